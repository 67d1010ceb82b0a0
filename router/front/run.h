/* What the runs of the fronts (wrap.c, serve.c) share: the loop, the
 * signals that stop them (and reload serve), and how a run begins. */
#ifndef TG_ROUTER_FRONT_RUN_H
#define TG_ROUTER_FRONT_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

/* The first member of every front's run state. The run owns it: the
 * handles are closed by tg_front_signals_close or the gateway's teardown,
 * the loop by the teardown, and the memory goes with the run. */
typedef struct tg_front {
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup; /* data: the run */
} tg_front_t;

/* Begin a front's run: <size> bytes of zeroed run state that start with a
 * tg_front_t, whose loop is initialised and whose signal handles are
 * ready (not started) with the run as their data; SIGPIPE is ignored (a
 * caller or agent gone mid-write is a write error on that stream, never
 * the end of toolgate). NULL when memory or the loop is missing; nothing
 * is left to undo then. The caller frees the run after the teardown. */
void *tg_front_begin(size_t size);

/* Deliver SIGTERM and SIGINT to <cb>, and SIGHUP too when <hup>. */
void tg_front_signals_start(tg_front_t *f, uv_signal_cb cb, bool hup);

/* Close the signal handles not closing already, so the loop can end. */
void tg_front_signals_close(tg_front_t *f);

#endif
