/* Call deadlines on libuv: one timer over an ordered deadline list
 * (limits/deadline.h), shared by both engines.
 *
 * An owner (an agent) keeps one tg_dlt_t; each of its calls keeps a list
 * node and a tg_dlt_own_t. tg_dlt_arm puts the call's deadline in the list
 * (one step in the usual arrival order) and arms the owner's timer only
 * when that deadline is the earliest; answering a call only unlinks it, and
 * a timer that fires early for an answered call finds a later head and
 * sleeps again. A deadline that would walk more than TG_DLT_MAX_STEPS
 * nodes goes on the call's own timer instead, so every arm costs a bounded
 * walk. The owner's timer stops when the list empties (an idle agent keeps
 * no timer running).
 *
 * Handles: both timers are initialised on first use; tg_dlt_arm says when
 * it initialised one (for owners that count open handles before freeing).
 * The owner closes tg_dlt_t.timer (when .ready) and each own timer (when
 * .ready) like its other handles. The owner's timer's data is the owner's
 * to set (tg_dlt_init); the expiry callback finds the tg_dlt_t without it.
 */
#ifndef TG_ROUTER_DLTIMER_H
#define TG_ROUTER_DLTIMER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "limits/deadline.h"

#define TG_DLT_MAX_STEPS 8 /* fixed internal bound: deadline list walk before a call gets its own timer */

typedef struct tg_dlt tg_dlt_t;

/* A node of <t> whose deadline passed: unlinked already. It may arm,
 * disarm or free any call, this one included. */
typedef void (*tg_dlt_expire_fn)(tg_dlt_t *t, tg_dl_node_t *x);

struct tg_dlt {
    tg_dl_t list;
    uv_timer_t timer;
    bool ready;       /* timer initialised */
    uint64_t armed;   /* the due time it is armed for; 0: stopped */
    tg_dlt_expire_fn expire;
    void *data;       /* the owner's */
};

/* A call's fallback timer (its data is the call, set by tg_dlt_arm). */
typedef struct tg_dlt_own {
    uv_timer_t timer;
    bool ready;
} tg_dlt_own_t;

/* No libuv call: the timer is initialised on first arm. */
void tg_dlt_init(tg_dlt_t *t, tg_dlt_expire_fn expire, void *data);

/* Expire <x> (with fallback <own>) <ms> from now on <loop>, replacing any
 * deadline it had. When the list would not take it, <own> fires <own_cb>
 * with <own_data> as the timer's data. Returns how many timers it
 * initialised (0 or 1). */
int tg_dlt_arm(tg_dlt_t *t, uv_loop_t *loop, tg_dl_node_t *x, tg_dlt_own_t *own,
               uv_timer_cb own_cb, void *own_data, uint64_t ms);

/* <x> will not expire. */
void tg_dlt_disarm(tg_dlt_t *t, tg_dl_node_t *x, tg_dlt_own_t *own);

#endif
