/* Call admission pieces both serve engines share (see admit.h). */
#include "router/call/admit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config/units.h"
#include "router/agent/agent_proc.h"

const char *tg_adm_rate_unit(tg_rate_t r)
{
    return r.period_ms == 1000    ? "calls/second"
           : r.period_ms == 60000 ? "calls/minute"
                                  : "calls/hour";
}

void tg_adm_rate_detail(char *buf, size_t cap, uint64_t observed, tg_rate_t r)
{
    char period[16], rate[48];
    tg_unit_fmt_duration(period, sizeof(period), r.period_ms);
    tg_unit_fmt_rate(rate, sizeof(rate), r);
    /* A detail cut short still names the count: the denial's observed,
     * cap and unit carry the numbers in full. */
    (void)snprintf(buf, cap, "%" PRIu64 " calls in %s > %s", observed, period, rate);
}

int tg_adm_rate_worst(const tg_adm_rate_scope_t *scopes, int n, uint64_t now, tg_gcra_result_t *out)
{
    int worst = -1;
    tg_gcra_result_t rw = {.allowed = true};
    for (int i = 0; i < n; i++) {
        tg_gcra_result_t r = tg_gcra_peek(scopes[i].g, now);
        if (!r.allowed && (worst < 0 || r.retry_after_ms > rw.retry_after_ms)) {
            worst = i;
            rw = r;
        }
    }
    if (worst >= 0)
        *out = rw;
    return worst;
}

void tg_adm_rate_denial(tg_denial_t *d, char *detail, size_t detail_cap, const char *scope,
                        const char *path, tg_rate_t rate, const tg_gcra_result_t *r)
{
    d->limit = "rate";
    d->scope = scope;
    d->observed = (int64_t)r->observed;
    d->cap = (int64_t)r->cap;
    d->unit = tg_adm_rate_unit(rate);
    d->retry_after_ms = (int64_t)r->retry_after_ms;
    d->config_path = path;
    tg_adm_rate_detail(detail, detail_cap, r->observed, rate);
    d->detail = detail;
}

void tg_adm_denial_init(tg_denial_t *d, tg_deny_code_t code, const char *agent, const char *tool,
                        size_t tool_len, const char *request_id)
{
    memset(d, 0, sizeof(*d));
    d->code = code;
    d->agent = agent;
    d->scope = "agent";
    d->observed = TG_DENY_ABSENT;
    d->cap = TG_DENY_ABSENT;
    d->retry_after_ms = TG_DENY_ABSENT;
    if (tool_len > 0) {
        d->tool = tool;
        d->tool_len = tool_len;
    }
    d->request_id = request_id;
}

void tg_adm_audit_refused(tg_audit_ev_t *ev, const char *agent, const char *caller,
                          const char *reason, uint64_t bytes_in)
{
    tg_audit_ev_init(ev);
    ev->event = "call.denied";
    ev->agent = agent;
    ev->caller = caller;
    ev->status = "invalid";
    ev->reason = reason;
    ev->bytes_in = (int64_t)bytes_in;
}

void tg_adm_audit_call(tg_audit_ev_t *ev, const char *tool, size_t tool_len, uint64_t duration_ms,
                       uint64_t bytes_in, const char *decided_by)
{
    if (tool_len > 0)
        ev->tool = tool;
    ev->duration_ms = (int64_t)duration_ms;
    ev->bytes_in = (int64_t)bytes_in;
    ev->decided_by = decided_by;
}

void tg_adm_audit_denial(tg_audit_ev_t *ev, const tg_denial_t *d)
{
    ev->code = tg_deny_name(d->code);
    ev->limit.type = d->limit;
    ev->limit.scope = d->scope;
    ev->limit.observed = d->observed == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d->observed;
    ev->limit.cap = d->cap == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d->cap;
    if (d->retry_after_ms != TG_DENY_ABSENT)
        ev->retry_after_ms = d->retry_after_ms;
}

tg_outcome_t tg_adm_outcome(const char *event, const char *status, const tg_denial_t *d,
                            const char *stage)
{
    /* A call refused while queued never reached the agent: denied even
     * when the reason is the agent going away. */
    bool agent_gone = d != NULL &&
                      (d->code == TG_DENY_UNAVAILABLE || d->code == TG_DENY_RESOURCE) &&
                      stage != NULL && strcmp(stage, "queued") != 0;
    return strcmp(event, "call.completed") == 0
               ? (strcmp(status, "ok") == 0 ? TG_OUTCOME_OK : TG_OUTCOME_ERROR)
           : strcmp(event, "call.timeout") == 0   ? TG_OUTCOME_TIMEOUT
           : strcmp(event, "call.cancelled") == 0 ? TG_OUTCOME_CANCELLED
           : agent_gone                           ? TG_OUTCOME_FAILED
                                                  : TG_OUTCOME_DENIED;
}

void tg_adm_queue_full(tg_denial_t *d, char *detail, size_t detail_cap, bool tool_full,
                       uint32_t tool_queued, uint32_t tool_cap, const char *tool_path,
                       uint32_t agent_queued, uint32_t agent_cap, const char *agent_path,
                       uint32_t inflight, bool fleet_full)
{
    d->limit = "concurrency";
    d->scope = tool_full ? "tool" : "agent";
    /* observed counts the refused call too: one more than the queue holds. */
    d->observed = tool_full ? (int64_t)tool_queued + 1 : (int64_t)agent_queued + 1;
    d->cap = tool_full ? (int64_t)tool_cap : (int64_t)agent_cap;
    d->unit = "queued calls";
    d->config_path = tool_full ? tool_path : agent_path;
    /* As a person would say it: "1 call in flight, and no wait queue
     * (max_queued_calls 0)"; "2 calls in flight, and the agent's wait
     * queue is full (4 of 4 waiting)". observed and cap stay the numbers. */
    const char *calls = inflight == 1 ? "call" : "calls";
    const char *fleet = fleet_full ? " with every shared slot taken" : "";
    if (d->cap == 0)
        (void)snprintf(detail, detail_cap,
                       "%u %s in flight%s, and no wait queue (max_queued_calls 0)", inflight, calls,
                       fleet);
    else
        (void)snprintf(detail, detail_cap,
                       "%u %s in flight%s, and the %s wait queue is full (%" PRId64 " of %" PRId64
                       " waiting)",
                       inflight, calls, fleet, tool_full ? "tool's" : "agent's", d->cap, d->cap);
    d->detail = detail;
}

void tg_adm_fleet_denial(tg_denial_t *d, char *detail, size_t detail_cap, const char *path,
                         uint32_t observed, uint32_t cap, const char *why)
{
    d->limit = "concurrency";
    d->scope = "shared";
    d->unit = "calls";
    d->config_path = path;
    if (cap > 0) {
        d->observed = observed;
        d->cap = cap;
        (void)snprintf(detail, detail_cap, "%u of %u slots shared across instances in use, %s",
                       observed, cap, why);
    } else {
        (void)snprintf(detail, detail_cap, "%s (the store had not answered for a shared slot)",
                       why);
    }
    d->detail = detail;
}

void tg_adm_store_denial(tg_denial_t *d, const char *limit, const char *scope, const char *unit,
                         const char *detail, int64_t retry_after_ms)
{
    d->limit = limit;
    d->scope = scope != NULL ? scope : "shared";
    d->unit = unit;
    d->config_path = "store.on_store_error";
    d->detail = detail;
    d->retry_after_ms = retry_after_ms;
}

uint32_t tg_adm_fleet_delay(uint32_t *backoff_ms)
{
    uint32_t d = *backoff_ms != 0 ? *backoff_ms : TG_ADM_FLEET_RETRY_MIN_MS;
    *backoff_ms = d * 2 < TG_ADM_FLEET_RETRY_MAX_MS ? d * 2 : TG_ADM_FLEET_RETRY_MAX_MS;
    return d;
}

/* Rotate the oldest <n> entries of <q> to its end (O(n): the ring
 * removes its oldest entry in O(1)). */
static void waitq_rotate(tg_waitq_t *q, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = tg_waitq_at(q, 0);
        tg_waitq_remove_at(q, 0);
        (void)tg_waitq_push(q, v);
    }
}

void tg_adm_waitq_insert(tg_waitq_t *q, uint32_t at, uint32_t v)
{
    uint32_t n = q->count;
    if (at == n) {
        /* At the end: no rotation needed. */
        (void)tg_waitq_push(q, v);
        return;
    }
    waitq_rotate(q, at);
    (void)tg_waitq_push(q, v);
    waitq_rotate(q, n - at);
}

bool tg_adm_pump_begin(tg_adm_pump_t *p)
{
    if (p->pumping) {
        p->again = true;
        return false;
    }
    p->pumping = true;
    p->again = false;
    return true;
}

bool tg_adm_pump_again(tg_adm_pump_t *p)
{
    if (p->again) {
        p->again = false;
        return true;
    }
    p->pumping = false;
    return false;
}

void tg_adm_dequeue_at(tg_waitq_t *q, uint32_t i, struct tg_adm_tool *t)
{
    tg_waitq_remove_at(q, i);
    if (t != NULL)
        t->queued--;
}

bool tg_adm_requeue(tg_waitq_t *q, uint32_t cap, struct tg_adm_tool *t, uint32_t v, uint64_t key,
                    uint64_t (*key_of)(const void *ctx, uint32_t e), const void *ctx)
{
    if (q->count >= cap || q->count >= q->cap || tg_adm_tool_queue_full(t))
        return false;
    uint32_t n = q->count, at = n;
    for (uint32_t i = 0; i < n && at == n; i++)
        if (key_of(ctx, tg_waitq_at(q, i)) > key)
            at = i;
    tg_adm_waitq_insert(q, at, v);
    if (t != NULL)
        t->queued++;
    return true;
}

int tg_adm_tool_init(tg_adm_tool_t *t, const tg_agent_cfg_t *a, const tg_tool_cfg_t *tc,
                     const tg_gcra_t *keep)
{
    const tg_exec_limits_t *l = &tc->lim;
    if (l->rate_src != TG_SRC_DEFAULT) {
        /* A burst the tool does not set is its own rate's count (0),
         * never the agent's burst. */
        if (keep != NULL)
            t->rate = *keep;
        else if (tg_gcra_init(&t->rate, l->rate_limit.count, l->rate_limit.period_ms,
                              l->burst_src != TG_SRC_DEFAULT ? l->burst : 0) < 0)
            return -EINVAL;
        t->has_rate = true;
    }
    if (l->concurrent_src != TG_SRC_DEFAULT) {
        tg_conc_init(&t->conc, l->max_concurrent_calls);
        t->has_conc = true;
    }
    if (l->queued_src != TG_SRC_DEFAULT) {
        t->max_queued = l->max_queued_calls;
        t->has_queue = true;
    }
    t->reg_rate = t->reg_conc = t->reg_queue = -1;
    tg_config_path_for(a, tc->name, "rate_limit", t->path_rate, sizeof(t->path_rate));
    tg_config_path_for(a, tc->name, "max_concurrent_calls", t->path_conc, sizeof(t->path_conc));
    tg_config_path_for(a, tc->name, "max_queued_calls", t->path_queue, sizeof(t->path_queue));
    tg_config_path_for(a, tc->name, "max_tool_call_duration", t->path_dur, sizeof(t->path_dur));
    return 0;
}

int tg_adm_tool_key(tg_adm_tool_t *t, tg_store_t *store, const char *agent, const char *tool)
{
    char what[TG_NAME_MAX + 16];
    if (store == NULL || snprintf(what, sizeof(what), "tool.%s.rate", tool) >= (int)sizeof(what) ||
        tg_store_make_key(store, t->rate_key, sizeof(t->rate_key), agent, what) < 0)
        return -EINVAL;
    t->shared = true;
    return 0;
}

void tg_adm_tool_register(tg_adm_tool_t *t, tg_registry_t *reg, const char *agent, const char *tool)
{
    char name[TG_LIMIT_NAME_MAX];
    t->reg_rate = t->reg_conc = t->reg_queue = -1;
    /* A name cut short by the bound still registers: the row is found by
     * its index, the name only labels it. */
    if (t->has_rate) {
        (void)snprintf(name, sizeof(name), "agent.%s.tool.%s.rate", agent, tool);
        t->reg_rate = tg_registry_upsert(reg, name, TG_LIMIT_RATE, "tool", t->rate.burst);
    }
    if (t->has_conc) {
        (void)snprintf(name, sizeof(name), "agent.%s.tool.%s.concurrency", agent, tool);
        t->reg_conc = tg_registry_upsert(reg, name, TG_LIMIT_CONCURRENCY, "tool", t->conc.max);
    }
    if (t->has_queue) {
        (void)snprintf(name, sizeof(name), "agent.%s.tool.%s.queue", agent, tool);
        t->reg_queue = tg_registry_upsert(reg, name, TG_LIMIT_QUEUE, "tool", t->max_queued);
    }
}

bool tg_adm_tool_queue_full(const tg_adm_tool_t *t)
{
    return t != NULL && t->has_queue && t->queued >= t->max_queued;
}

bool tg_adm_has_room(const tg_adm_tool_t *t, const tg_caller_lim_t *cl)
{
    if (cl != NULL && cl->has_conc && !tg_conc_has_room(&cl->conc))
        return false;
    return t == NULL || !t->has_conc || tg_conc_has_room(&t->conc);
}

void tg_adm_take_slots(tg_conc_t *agent, tg_adm_tool_t *t, tg_caller_lim_t *cl, bool *tool_slot,
                       bool *caller_slot)
{
    tg_conc_acquire(agent);
    if (t != NULL && t->has_conc) {
        tg_conc_acquire(&t->conc);
        *tool_slot = true;
    }
    if (cl != NULL && cl->has_conc) {
        tg_conc_acquire(&cl->conc);
        *caller_slot = true;
    }
}

void tg_adm_tool_regs(tg_gw_t *gw, tg_adm_tool_t *t)
{
    if (t->has_conc)
        tg_registry_share(&gw->reg, t->reg_conc, &t->sh_conc, t->conc.inflight);
    if (t->has_queue)
        tg_registry_share(&gw->reg, t->reg_queue, &t->sh_queue, t->queued);
}
