/* The admission pipeline: one order of stages for every call of every
 * dialect and front, on a route (router/call/route.h):
 *
 *   frame -> rate (local scopes; the shared store's agent bucket, then
 *   its tool's) -> slots (agent, tool, caller; a fleet slot from the
 *   shared store) -> bounded FIFO -> dispatch; then expiry and cancel.
 *
 * A dialect plugs in through tg_call_ops_t, as containment backends,
 * stores and audit sinks do: how a call reaches its agent (splice its
 * id, write the frame), how a refusal is answered and audited, whether
 * the instance the call would go to takes calls now (topology: one
 * instance per MCP caller, one shared OpenSentience instance), and what
 * a timed-out or stuck call does to the instance. Everything else —
 * which stage runs when, what a store answer means, the queue's order,
 * the fleet's backoff, which denial a waiting call gets at its
 * deadline — is written here once.
 *
 * Ownership: a call (tg_callc_t first in the engine's call) lives in its
 * route's table; the pipeline frees it only through ops->free. Store
 * answers find their call by id (a ticket), so an answer for a call that
 * is gone finds nothing; route->nstore_wait counts the answers still to
 * come (a retired route is freed only after them).
 */
#ifndef TG_ROUTER_CALL_PIPELINE_H
#define TG_ROUTER_CALL_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "router/call/call.h"
#include "router/call/denial.h"
#include "router/call/route.h"

/* Whether the instance a call would go to takes it now. */
typedef enum tg_call_go {
    TG_GO_NOW = 0, /* it takes calls */
    TG_GO_LATER,   /* the route's instance is not ready yet (starting, being replaced):
                    * every call waits for it, the pump stops */
    TG_GO_NOT,     /* this call's instance is gone or stopping and none is coming for it */
} tg_call_go_t;

struct tg_call_ops {
    /* The caller limits call <cc> counts against (NULL: none, or its
     * caller left and gave its slot back). */
    tg_caller_lim_t *(*climits)(const tg_callc_t *cc);
    tg_call_go_t (*ready)(const tg_callc_t *cc);
    /* Write <cc>'s held frame (cc->qblk, qframe, qlen; its id at qid_off)
     * to its agent with the call's id spliced in. False: the dialect
     * answered the call instead (a tool the instance has not registered);
     * the pipeline gives its slots back and frees it. */
    bool (*forward)(tg_callc_t *cc);
    /* The fields every denial of <cc> carries, for <code>. */
    void (*denial_init)(const tg_callc_t *cc, tg_denial_t *d, tg_deny_code_t code,
                        char reqid[32]);
    /* Answer <cc>'s caller with <d> and audit <event> (stage: NULL, or
     * where the call was). */
    void (*deny)(tg_callc_t *cc, tg_denial_t *d, const char *event, const char *stage);
    /* Free <cc>'s entry (tg_pipe_free_entry and the dialect's own). */
    void (*free)(tg_callc_t *cc);
    /* What a write for <cc> must be flushed on (its session, the gateway);
     * valid until the callback that asked returns. */
    void *(*owner)(const tg_callc_t *cc);
    void (*flush)(tg_route_t *r, void *owner);
    /* A call of <owner> left: a drain waiting for it may end. */
    void (*settle)(tg_route_t *r, void *owner);
    /* A store answer found no call: a retired route may be freed now.
     * NULL: nothing to do. */
    void (*reap)(tg_route_t *r);
    /* After a wait for the shared rate store: the dialect's refusals of
     * the moment (shutting down, agent unavailable, tool unknown); true
     * when it answered <cc>. NULL: none. */
    bool (*recheck)(tg_callc_t *cc);
    /* The rate stage passed: what comes before the slots (start an
     * on-demand agent), then tg_pipe_slots. NULL: tg_pipe_slots. */
    void (*rated)(tg_callc_t *cc);
    /* <cc> in flight passed its deadline and its caller has the timeout
     * denial: cancel it at the agent and keep it as a zombie. */
    void (*timed_out)(tg_callc_t *cc);
    /* A cancelled or zombie <cc> passed its kill grace: the agent is stuck. */
    void (*stuck)(tg_callc_t *cc);
    const char *timeout_field; /* where the caller sets its own timeout, for denials */
};

/* The rate stage for call <cc> (state IDLE), which holds its frame
 * (tg_route_hold_frame) and its deadline (tg_route_deadline): refused,
 * or waiting for the shared store, or on to the slots. May free <cc>. */
void tg_pipe_admit(tg_callc_t *cc);

/* The slot stage for <cc> (rate passed, holds its frame, in no queue):
 * dispatch now when its instance takes calls, every scope has room and
 * nobody waits (with concurrency_scope shared: ask the store for a fleet
 * slot, unless it said the fleet is full); else wait in the FIFO, or be
 * refused when it is full. Its deadline starts here. May free <cc>. */
void tg_pipe_slots(tg_callc_t *cc);

/* Let waiting calls of <r> in, in arrival order: the first that fits
 * runs; one held only by its tool's or caller's slot does not hold back
 * the others. Writes for owners other than <owner> (NULL: any) are
 * flushed here; <owner>'s are the caller's to flush. Re-entry from a
 * store answer only asks for one more pass. */
void tg_pipe_pump(tg_route_t *r, void *owner);

/* <cc> is over: give back the slots it holds, take it out of the queue,
 * free it, let waiters in. */
void tg_pipe_release(tg_callc_t *cc);
/* Free <cc>, which holds no slot and is in no queue. */
void tg_pipe_done(tg_callc_t *cc);
/* The caller cancelled <cc> before its agent saw it (state RATE, QUEUED
 * or SLOT; audited by the dialect): free it (a pending store answer
 * will find nothing). */
void tg_pipe_cancel_waiting(tg_callc_t *cc);

/* Expire <cc> in <ms> from now (replacing any deadline it had). */
void tg_pipe_arm(tg_callc_t *cc, uint64_t ms);
/* What is left at loop time <now> of the deadline <cc> was armed with:
 * the time it may still run, queueing and store waits deducted (0 once
 * it is due). */
static inline uint64_t tg_pipe_left_ms(const tg_callc_t *cc, uint64_t now)
{
    return cc->due > now ? cc->due - now : 0;
}
/* The route's deadline list's expiry (tg_dlt_init's expire). */
void tg_pipe_deadline(tg_dlt_t *t, tg_dl_node_t *x);

/* The route's part of freeing entry <cc>: its deadline, a fleet slot it
 * still held, its frame; back to the table as IDLE. */
void tg_pipe_free_entry(tg_callc_t *cc);

#endif
