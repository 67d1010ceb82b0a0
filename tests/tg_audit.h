/* The audit module (audit/audit.h) as its suites drive it on a libuv loop
 * of their own: open with sinks or a file, emit a named event, run the
 * loop for a while, close and check that the loop closes cleanly; and the
 * one-instance summary of a verifier that read what was written.
 * Header-only; each helper fails the test when a step does not succeed. */
#ifndef TG_TESTS_TG_AUDIT_H
#define TG_TESTS_TG_AUDIT_H

#include <criterion/criterion.h>
#include <uv.h>

#include "audit/audit.h"
#include "audit/verify.h"

/* tg_audit_open with <o> on <loop>. */
static inline tg_audit_t *aud_open(uv_loop_t *loop, const tg_audit_opts_t *o)
{
    tg_audit_t *a = NULL;
    tg_err_t err = {""};
    cr_assert_eq(tg_audit_open(&a, loop, o, &err), 0, "open: %s", err);
    cr_assert_not_null(a);
    return a;
}

/* An audit of instance "host-a" writing to the <n> sinks <s>. */
static inline tg_audit_t *aud_open_sinks(uv_loop_t *loop, const tg_audit_sink_cfg_t *s, size_t n,
                                         uint32_t queue_cap)
{
    tg_audit_opts_t o = {.sinks = s, .nsinks = n, .instance = "host-a", .queue_cap = queue_cap};
    return aud_open(loop, &o);
}

/* An audit of instance "host-a" writing to the file <path>. */
static inline tg_audit_t *aud_open_path(uv_loop_t *loop, const char *path, uint32_t queue_cap)
{
    tg_audit_opts_t o = {.path = path, .instance = "host-a", .queue_cap = queue_cap};
    return aud_open(loop, &o);
}

/* Emit an event <event> whose count is <count>. */
static inline void aud_emit(tg_audit_t *a, const char *event, int64_t count)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.count = count;
    tg_audit_emit(a, &ev);
}

/* A timer callback that does nothing: its timer only keeps a loop alive. */
static inline void aud_keepalive(uv_timer_t *t)
{
    (void)t;
}

/* Run <loop> for <ms>, so that the sinks' timers can fire (a reconnect,
 * a spool replay, an interval fsync). */
static inline void aud_run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, aud_keepalive, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}

/* Close <a>, let libuv release any request it left, and check that the
 * loop then closes cleanly. */
static inline void aud_close(tg_audit_t *a, uv_loop_t *loop)
{
    tg_audit_close(a);
    cr_assert_eq(uv_run(loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uv_loop_close(loop), 0);
}

/* Finish <v>, which must have seen exactly one instance, and free it:
 * that instance's summary (copied; its name cleared, being freed). */
static inline tg_verify_summary_t aud_verify_summary(tg_verify_t *v)
{
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(tg_verify_ninstances(v), 1);
    tg_verify_summary_t s = *tg_verify_summary(v, 0);
    s.instance = NULL;
    tg_verify_free(v);
    return s;
}

#endif
