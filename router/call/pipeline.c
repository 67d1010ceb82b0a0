/* The admission pipeline (see pipeline.h): the stages, the store answers,
 * the queue's pump, expiry and release, once for every dialect. */
#include "router/call/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "limits/registry.h"

typedef tg_adm_rate_scope_t rate_scope_t;

enum { STEP_AGENT = TG_ROUTE_STEP_AGENT, STEP_TOOL = TG_ROUTE_STEP_TOOL };

static void slot_ask(tg_callc_t *cc);

/* A rate decision's time: the clock as it reads now (tg_gw_now). */
static inline uint64_t now_of(const tg_route_t *r)
{
    return tg_gw_now(r->gw);
}

/* ---- freeing --------------------------------------------------------- */

void tg_pipe_free_entry(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    tg_dlt_disarm(&r->dlt, &cc->dl, &cc->own);
    if (cc->fslot != NULL) {
        /* Every path gives the fleet slot back through release; an entry
         * freed with one still held would keep it renewed forever. */
        tg_route_fleet_release(r, cc->fslot);
        cc->fslot = NULL;
        r->fleet_held--;
    }
    tg_block_t *held = tg_route_take_frame(r, cc);
    if (held != NULL)
        tg_block_unref(&r->gw->pool, held);
    cc->state = TG_CALL_IDLE;
    tg_ctab_put(&r->tab, cc->idx);
}

void tg_pipe_done(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    void *o = r->ops->owner(cc);
    r->ops->free(cc);
    r->ops->settle(r, o);
}

void tg_pipe_release(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    const tg_call_ops_t *ops = r->ops;
    if (tg_callc_holds_slots(cc->state))
        tg_route_release_slots(r, cc, ops->climits(cc));
    tg_route_unqueue(r, cc);
    int tool = cc->tool;
    void *o = ops->owner(cc);
    ops->free(cc);
    tg_route_regs(r, tool);
    if (r->aq.count > 0)
        tg_pipe_pump(r, o);
    ops->settle(r, o);
}

void tg_pipe_cancel_waiting(tg_callc_t *cc)
{
    if (cc->state == TG_CALL_RATE)
        tg_pipe_done(cc); /* the store's answer will find nothing */
    else
        tg_pipe_release(cc);
}

/* ---- denials ----------------------------------------------------------- */

static void deny_store(tg_callc_t *cc, const char *limit, const char *scope, const char *unit,
                       const char *detail, int64_t retry_after_ms)
{
    tg_denial_t d;
    char reqid[32];
    cc->r->ops->denial_init(cc, &d, TG_DENY_STORE, reqid);
    tg_adm_store_denial(&d, limit, scope, unit, detail, retry_after_ms);
    cc->r->ops->deny(cc, &d, "call.denied", NULL);
}

/* Refuse <cc> for the shared concurrency limit: <observed> of <cap> slots
 * held (as the store last said), <why> in the detail. */
static void deny_fleet(tg_callc_t *cc, const char *why, const char *stage)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    cc->r->ops->denial_init(cc, &d, TG_DENY_CONCURRENCY, reqid);
    tg_adm_fleet_denial(&d, detail, sizeof(detail), cc->r->path_conc, cc->fleet_seen,
                        cc->fleet_cap, why);
    cc->r->ops->deny(cc, &d, "call.denied", stage);
}

/* Refuse <cc>, whose instance is gone or stopping, with <detail>. */
static void deny_gone(tg_callc_t *cc, const char *detail, const char *stage)
{
    tg_denial_t d;
    char reqid[32];
    cc->r->ops->denial_init(cc, &d, TG_DENY_UNAVAILABLE, reqid);
    d.limit = "agent";
    d.detail = detail;
    cc->r->ops->deny(cc, &d, "call.denied", stage);
}

/* Refuse <cc>: no room to wait (the agent's queue, or its tool's when
 * <tool_full>); while a reload replaces the instance, say so. */
static void deny_full(tg_callc_t *cc, bool tool_full, const char *stage)
{
    tg_route_t *r = cc->r;
    tg_denial_t d;
    char reqid[32], detail[160];
    if (r->switching && !tool_full) {
        r->ops->denial_init(cc, &d, TG_DENY_UNAVAILABLE, reqid);
        d.limit = "agent";
        d.retry_after_ms = (int64_t)r->acfg->kill_grace_ms;
        d.detail = "agent is being restarted with its reloaded config and its wait queue is full";
    } else {
        const tg_adm_tool_t *ts = cc->tool >= 0 ? &r->tools[cc->tool] : NULL;
        r->ops->denial_init(cc, &d, TG_DENY_CONCURRENCY, reqid);
        tg_adm_queue_full(&d, detail, sizeof(detail), tool_full, tool_full ? ts->queued : 0,
                          tool_full ? ts->max_queued : 0, tool_full ? ts->path_queue : NULL,
                          r->aq.count, r->qcap, r->path_queue, r->aconc.inflight,
                          r->fleet_full);
    }
    r->ops->deny(cc, &d, "call.denied", stage);
}

/* Refuse <cc> for rate scope <s>, which said <rw> (<text>: the detail,
 * NULL for the usual one). */
static void deny_rate(tg_callc_t *cc, const rate_scope_t *s, const tg_gcra_result_t *rw,
                      const char *text)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    cc->r->ops->denial_init(cc, &d, TG_DENY_RATE, reqid);
    tg_adm_rate_denial(&d, detail, sizeof(detail), s->scope, s->path, s->rate, rw);
    if (text != NULL)
        d.detail = text;
    cc->r->ops->deny(cc, &d, "call.denied", NULL);
}

/* Refuse <cc> when one of <scopes> has no token now, naming the scope
 * that frees up last (<text>: the detail, NULL for the usual one). True
 * when refused (answered, not freed). Takes nothing. */
static bool rate_refused(tg_callc_t *cc, const rate_scope_t *scopes, int n, uint64_t now,
                         const char *text)
{
    tg_gcra_result_t rw;
    int worst = tg_adm_rate_worst(scopes, n, now, &rw);
    if (worst < 0)
        return false;
    deny_rate(cc, &scopes[worst], &rw, text);
    return true;
}

/* ---- store tickets ----------------------------------------------------- */

/* A store answer's way back to its call: the route and the call's id
 * name it, so an answer for a call that is gone finds nothing. */
typedef struct ticket {
    tg_route_t *r;
    uint64_t id;
    int step; /* a rate answer: whose shared bucket answers */
} ticket_t;

static ticket_t *ticket_new(tg_callc_t *cc, int step)
{
    ticket_t *t = malloc(sizeof(*t));
    if (t == NULL)
        return NULL;
    *t = (ticket_t){.r = cc->r, .id = cc->id, .step = step};
    cc->r->nstore_wait++;
    return t;
}

static void ticket_drop(ticket_t *t)
{
    t->r->nstore_wait--;
    free(t);
}

/* The call <t> is for when it still waits in <state>, else NULL; frees
 * <t>. */
static tg_callc_t *ticket_call(ticket_t *t, tg_call_state_t state, tg_route_t **rp)
{
    tg_route_t *r = t->r;
    uint64_t id = t->id;
    ticket_drop(t);
    *rp = r;
    tg_callc_t *cc = tg_ctab_lookup(&r->tab, id);
    return cc != NULL && cc->id == id && cc->state == state ? cc : NULL;
}

/* ---- rate -------------------------------------------------------------- */

static void on_rate(void *arg, const tg_store_result_t *res);

/* Ask the store for <cc>'s token from the agent's shared bucket
 * (STEP_AGENT) or its tool's. 0, or a negative errno when the request
 * could not be made (nothing pending then). The answer may come before
 * this returns and may free <cc>. */
static int rate_ask(tg_callc_t *cc, int step)
{
    ticket_t *t = ticket_new(cc, step);
    if (t == NULL)
        return -ENOMEM;
    int rc = tg_route_rate_ask(cc->r, cc, step, on_rate, t);
    if (rc < 0)
        ticket_drop(t);
    return rc;
}

static void rated(tg_callc_t *cc)
{
    if (cc->r->ops->rated != NULL)
        cc->r->ops->rated(cc);
    else
        tg_pipe_slots(cc);
}

/* The shared store's answer <res> for <cc> (state RATE) from bucket
 * <step>: refused; or on to the tool's bucket after the agent's; or on
 * to the local scopes, which may have filled meanwhile, the dialect's
 * checks of the moment, and the slots. */
static void rate_answered(tg_callc_t *cc, int step, const tg_store_result_t *res)
{
    tg_route_t *r = cc->r;
    tg_adm_tool_t *ts = cc->tool >= 0 ? &r->tools[cc->tool] : NULL;
    /* Two shared buckets: the one that did not simply answer from the
     * store (a fallback, open, closed) is what the audit names. */
    if (step == STEP_AGENT || res->decided_by != TG_STORE_BY_STORE || cc->rate_by == NULL) {
        cc->rate_by = tg_store_decider_name(res->decided_by);
        cc->decided_by = cc->rate_by;
    }
    if (!res->gcra.allowed) {
        bool tool = step == STEP_TOOL && ts != NULL;
        tg_rate_t rate = tool ? r->acfg->tools[cc->tool].lim.rate_limit : r->acfg->lim.rate_limit;
        if (res->decided_by == TG_STORE_BY_CLOSED) {
            deny_store(cc, "rate", tool ? "tool" : "agent", tg_adm_rate_unit(rate),
                       TG_ADM_STORE_CLOSED_RATE, (int64_t)res->gcra.retry_after_ms);
        } else {
            tg_denial_t d;
            char reqid[32], detail[160];
            r->ops->denial_init(cc, &d, TG_DENY_RATE, reqid);
            tg_adm_rate_denial(&d, detail, sizeof(detail), tool ? "tool" : "agent",
                               tool ? ts->path_rate : r->path_rate, rate, &res->gcra);
            r->ops->deny(cc, &d, "call.denied", NULL);
        }
        tg_pipe_done(cc);
        return;
    }
    /* The agent's shared token taken, the tool's next. A refusal there
     * leaves the agent's token spent: the fleet can fall short of the
     * agent's limit by such calls, never exceed either limit. */
    if (step == STEP_AGENT && ts != NULL && ts->shared && r->tool_store != NULL) {
        if (rate_ask(cc, STEP_TOOL) < 0) {
            deny_store(cc, "rate", "tool", NULL, TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
            tg_pipe_done(cc);
        }
        return;
    }
    if (r->ops->recheck != NULL && r->ops->recheck(cc)) {
        tg_pipe_done(cc);
        return;
    }
    rate_scope_t scopes[3];
    int n = tg_route_rate_scopes(r, cc, r->ops->climits(cc), false, scopes);
    uint64_t now = now_of(r);
    if (rate_refused(cc, scopes, n, now, "the scope filled while the shared store answered")) {
        tg_pipe_done(cc);
        return;
    }
    tg_route_rate_take(r, scopes, n, now);
    /* Between stages (in no queue), and not IDLE: an engine may tell a
     * free entry by its state. */
    cc->state = TG_CALL_QUEUED;
    rated(cc);
}

static void on_rate(void *arg, const tg_store_result_t *res)
{
    int step = ((ticket_t *)arg)->step;
    tg_route_t *r;
    tg_callc_t *cc = ticket_call(arg, TG_CALL_RATE, &r);
    if (cc == NULL) {
        /* Its caller left or cancelled it meanwhile. */
        if (r->ops->reap != NULL)
            r->ops->reap(r);
        return;
    }
    void *o = r->ops->owner(cc);
    rate_answered(cc, step, res);
    r->ops->flush(r, o);
}

void tg_pipe_admit(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    /* Every scope must allow it; a call refused by one takes no token
     * from the others. With a shared bucket the local scopes are checked
     * now and taken once the store allows. */
    uint64_t now = now_of(r);
    rate_scope_t scopes[3];
    int n = tg_route_rate_scopes(r, cc, r->ops->climits(cc), true, scopes);
    bool shared = r->store != NULL || (cc->tool >= 0 && r->tools[cc->tool].shared);
    if (n == 1 && !shared) {
        /* One bucket (the usual case): take decides and commits at once. */
        tg_gcra_result_t rr = tg_gcra_take(scopes[0].g, now);
        if (!rr.allowed) {
            deny_rate(cc, &scopes[0], &rr, NULL);
            tg_pipe_done(cc);
            return;
        }
        tg_registry_update(&r->gw->reg, scopes[0].reg, tg_gcra_used(scopes[0].g, now));
        rated(cc);
        return;
    }
    if (rate_refused(cc, scopes, n, now, NULL)) {
        tg_pipe_done(cc);
        return;
    }
    if (shared) {
        cc->state = TG_CALL_RATE;
        if (rate_ask(cc, r->store != NULL ? STEP_AGENT : STEP_TOOL) < 0) {
            deny_store(cc, "rate", r->store != NULL ? "agent" : "tool", NULL,
                       TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
            tg_pipe_done(cc);
        }
        return;
    }
    tg_route_rate_take(r, scopes, n, now);
    rated(cc);
}

/* ---- slots ------------------------------------------------------------- */

/* Send <cc>, holding its slots, to its agent: it is in flight. */
static void forward(tg_callc_t *cc, tg_caller_lim_t *cl)
{
    tg_route_t *r = cc->r;
    cc->state = TG_CALL_INFLIGHT;
    if (!r->ops->forward(cc)) {
        tg_pipe_release(cc);
        return;
    }
    tg_block_unref(&r->gw->pool, tg_route_take_frame(r, cc));
    if (cc->caller_slot && cl != NULL)
        tg_registry_update(&r->gw->reg, cl->reg_conc, cl->conc.inflight);
    tg_route_regs(r, cc->tool);
}

void tg_pipe_slots(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    const tg_call_ops_t *ops = r->ops;
    tg_call_go_t go = ops->ready(cc);
    if (go == TG_GO_NOT) {
        deny_gone(cc, "agent stopped before the call could run", NULL);
        tg_pipe_done(cc);
        return;
    }
    tg_caller_lim_t *cl = ops->climits(cc);
    bool room = go == TG_GO_NOW && r->aq.count == 0 && tg_conc_has_room(&r->aconc) &&
                tg_route_has_room(r, cc, cl);
    if (room && (r->cstore == NULL || !r->fleet_full)) {
        tg_pipe_arm(cc, cc->deadline_ms);
        if (r->cstore != NULL) {
            slot_ask(cc); /* may answer, and free <cc>, at once */
            return;
        }
        tg_route_take_slots(r, cc, cl);
        forward(cc, cl);
        return;
    }
    bool tool_full = tg_adm_tool_queue_full(cc->tool >= 0 ? &r->tools[cc->tool] : NULL);
    if (r->aq.count >= r->qcap || r->aq.count >= r->aq.cap || tool_full) {
        deny_full(cc, tool_full, NULL);
        tg_pipe_done(cc);
        return;
    }
    tg_route_enqueue(r, cc);
    cc->state = TG_CALL_QUEUED;
    tg_pipe_arm(cc, cc->deadline_ms);
    tg_route_regs(r, cc->tool);
    /* The calls ahead may be held only by their tool's or caller's slot:
     * this one may still fit now. */
    if (tg_conc_has_room(&r->aconc) && !r->fleet_full)
        tg_pipe_pump(r, ops->owner(cc));
}

void tg_pipe_pump(tg_route_t *r, void *owner)
{
    const tg_call_ops_t *ops = r->ops;
    if (!tg_adm_pump_begin(&r->pump))
        return;
    void *last = owner;
    do {
        uint32_t i = 0;
        while (i < r->aq.count && tg_conc_has_room(&r->aconc)) {
            tg_callc_t *cc = tg_ctab_at(&r->tab, tg_waitq_at(&r->aq, i));
            if (cc->state != TG_CALL_QUEUED) {
                i++; /* asking the store for a fleet slot from its place */
                continue;
            }
            tg_call_go_t go = ops->ready(cc);
            if (go == TG_GO_LATER)
                break;
            tg_caller_lim_t *cl = ops->climits(cc);
            if (go != TG_GO_NOW || !tg_route_has_room(r, cc, cl)) {
                i++;
                continue;
            }
            if (r->cstore != NULL && r->fleet_full)
                break;
            /* The queue is the route's: a slot freed by one caller may go
             * to a call of another, written through that call's owner. */
            void *o = ops->owner(cc);
            if (o != last) {
                if (last != owner)
                    ops->flush(r, last);
                last = o;
            }
            if (r->cstore != NULL) {
                slot_ask(cc);
                /* Still asking from its place, or gone from the queue (the
                 * next entry is at i now). */
                if (i < r->aq.count && tg_waitq_at(&r->aq, i) == cc->idx)
                    i++;
            } else {
                tg_route_dequeue_at(r, i, cc);
                tg_route_take_slots(r, cc, cl);
                forward(cc, cl);
            }
        }
    } while (tg_adm_pump_again(&r->pump));
    if (last != owner)
        ops->flush(r, last);
}

/* ---- fleet slots (concurrency_scope shared) ---------------------------- */

static void on_fleet_timer(uv_timer_t *t)
{
    tg_route_t *r = t->data;
    r->fleet_full = false;
    if (r->aq.count > 0)
        tg_pipe_pump(r, NULL);
}

static void on_slot(void *arg, const tg_store_slot_result_t *res);

/* Ask the store for a fleet slot for <cc>, which holds its frame and has
 * room in every local scope: the local slots are taken first and held
 * while the store decides, so that other calls cannot claim them
 * meanwhile. A call asking from the queue keeps its place there. The
 * answer may come before this returns, and may free <cc>. */
static void slot_ask(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    tg_route_take_slots(r, cc, r->ops->climits(cc));
    cc->state = TG_CALL_SLOT;
    ticket_t *t = ticket_new(cc, 0);
    int rc = -ENOMEM;
    if (t != NULL) {
        rc = tg_store_slot_acquire(r->cstore, r->slots_key, r->acfg->lim.max_concurrent_calls,
                                   on_slot, t);
        if (rc < 0)
            ticket_drop(t);
    }
    if (rc < 0) {
        deny_store(cc, "concurrency", NULL, NULL, TG_ADM_STORE_REFUSED_SLOT, TG_DENY_ABSENT);
        tg_pipe_release(cc);
    }
}

/* <cc> (state SLOT) goes back to waiting: its local slots and any fleet
 * slot given back, in the queue where its arrival puts it. */
static void back_to_queue(tg_callc_t *cc, bool fleet_full, void *owner)
{
    tg_route_t *r = cc->r;
    tg_route_release_slots(r, cc, r->ops->climits(cc));
    cc->state = TG_CALL_QUEUED;
    if (!cc->in_queue && !tg_route_requeue(r, cc, r->qcap)) {
        if (fleet_full)
            deny_fleet(cc, "and the wait queue is full", NULL);
        else
            deny_full(cc, false, "queued");
        tg_pipe_release(cc);
        return;
    }
    tg_route_regs(r, cc->tool);
    r->ops->settle(r, owner);
}

/* The store's answer <res> for <cc> (state SLOT). */
static void slot_decided(tg_callc_t *cc, const tg_store_slot_result_t *res, void *owner)
{
    tg_route_t *r = cc->r;
    tg_route_note_slot(cc, res->decided_by);
    if (res->granted) {
        tg_route_fleet_granted(r, cc, res->slot);
        tg_call_go_t go = r->ops->ready(cc);
        if (go == TG_GO_NOW) {
            tg_route_unqueue(r, cc);
            forward(cc, r->ops->climits(cc));
            tg_pipe_pump(r, owner); /* the fleet had room: the next waiter may ask too */
        } else if (go == TG_GO_LATER) {
            back_to_queue(cc, false, owner); /* wait for the instance */
        } else {
            deny_gone(cc, "agent stopped while the call waited for a shared slot", "queued");
            tg_pipe_release(cc);
        }
        return;
    }
    if (res->decided_by == TG_STORE_BY_CLOSED) {
        uint64_t ms = r->gw->cfg->store.timeout_ms;
        deny_store(cc, "concurrency", NULL, NULL, TG_ADM_STORE_CLOSED_SLOT,
                   ms != 0 ? (int64_t)ms : TG_STORE_DEF_TIMEOUT_MS);
        tg_pipe_release(cc);
        return;
    }
    /* Full (fleet-wide, or this instance's share under the local policy):
     * wait in the queue, in arrival order, until this instance releases a
     * fleet slot or the backoff passes. */
    cc->fleet_seen = (uint32_t)res->holders;
    cc->fleet_cap = (uint32_t)res->cap;
    tg_route_fleet_wait(r, on_fleet_timer, r);
    back_to_queue(cc, true, owner);
}

static void on_slot(void *arg, const tg_store_slot_result_t *res)
{
    tg_route_t *r;
    tg_callc_t *cc = ticket_call(arg, TG_CALL_SLOT, &r);
    if (cc == NULL) {
        /* Nobody wants it any more (timed out, cancelled, caller gone). */
        if (res->granted)
            tg_route_fleet_release(r, res->slot);
        if (r->ops->reap != NULL)
            r->ops->reap(r);
        return;
    }
    void *o = r->ops->owner(cc);
    slot_decided(cc, res, o);
    r->ops->flush(r, o);
}

/* ---- deadlines --------------------------------------------------------- */

/* A waiting call's deadline: held back by the fleet, by the agent's (or
 * its tool's) slots, or by an instance that never became ready. */
static void expired_waiting(tg_callc_t *cc, tg_call_go_t go)
{
    tg_route_t *r = cc->r;
    tg_denial_t d;
    char reqid[32], detail[160];
    if (tg_route_held_by_fleet(r, cc, r->ops->climits(cc), go == TG_GO_NOW)) {
        snprintf(detail, sizeof(detail), "deadline of %" PRIu64 " ms passed while waiting for one",
                 cc->deadline_ms);
        deny_fleet(cc, detail, "queued");
    } else if (go == TG_GO_LATER) {
        r->ops->denial_init(cc, &d, TG_DENY_UNAVAILABLE, reqid);
        d.limit = "agent";
        snprintf(detail, sizeof(detail),
                 "agent did not become ready within the call's deadline of %" PRIu64 " ms%s",
                 cc->deadline_ms,
                 r->switching ? " (it is being restarted with its reloaded config)" : "");
        d.detail = detail;
        r->ops->deny(cc, &d, "call.denied", "queued");
    } else {
        r->ops->denial_init(cc, &d, TG_DENY_CONCURRENCY, reqid);
        tg_route_queued_denial(r, cc, &d, detail, sizeof(detail));
        r->ops->deny(cc, &d, "call.denied", "queued");
    }
    tg_pipe_release(cc);
}

static void expired(tg_callc_t *cc)
{
    tg_route_t *r = cc->r;
    const tg_call_ops_t *ops = r->ops;
    if (cc->state == TG_CALL_IDLE || cc->state == TG_CALL_RATE)
        return; /* not a limited call (the store's own timeout bounds RATE) */
    void *o = ops->owner(cc);
    if (cc->state == TG_CALL_QUEUED || cc->state == TG_CALL_SLOT) {
        expired_waiting(cc, ops->ready(cc));
    } else if (cc->state == TG_CALL_INFLIGHT) {
        tg_denial_t d;
        char reqid[32], detail[160];
        ops->denial_init(cc, &d, TG_DENY_TIMEOUT, reqid);
        tg_route_timeout_denial(cc, now_of(r), tg_route_deadline_path(r, cc), ops->timeout_field,
                                &d, detail, sizeof(detail));
        ops->deny(cc, &d, "call.timeout", "timed_out");
        ops->timed_out(cc);
    } else {
        ops->stuck(cc); /* CANCELLING, ZOMBIE */
    }
    ops->flush(r, o);
}

static void on_own_timer(uv_timer_t *t)
{
    expired(t->data);
}

void tg_pipe_deadline(tg_dlt_t *t, tg_dl_node_t *x)
{
    (void)t;
    expired((tg_callc_t *)(void *)((char *)x - offsetof(tg_callc_t, dl)));
}

void tg_pipe_arm(tg_callc_t *cc, uint64_t ms)
{
    tg_route_t *r = cc->r;
    uint64_t now = uv_now(r->gw->loop); /* the clock tg_dlt_arm counts from */
    cc->due = ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
    int n = tg_dlt_arm(&r->dlt, r->gw->loop, &cc->dl, &cc->own, on_own_timer, cc, ms);
    if (r->open_timers != NULL)
        *r->open_timers += n;
}
