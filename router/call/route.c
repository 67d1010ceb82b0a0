/* Routes: the per-agent limit state both engines share (see route.h). */
#include "router/call/route.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/gateway/metrics.h"
#include "router/gateway/log.h"

#define NO_STORE_HINT "no shared store is configured (add store {\"kind\": \"redis\", \"url\": ...} or --store URL)"

int tg_route_stores(const tg_gw_t *gw, const tg_agent_cfg_t *a, tg_store_t **store,
                    char *rate_key, tg_store_t **tool_store, tg_store_t **cstore,
                    char *slots_key, tg_err_t *err)
{
    *store = *cstore = *tool_store = NULL;
    for (size_t i = 0; i < a->ntools; i++)
        if (a->tools[i].lim.rate_shared)
            *tool_store = a->shared_lease ? gw->lease : gw->store;
    if (a->rate_shared) {
        *store = a->shared_lease ? gw->lease : gw->store;
        if (*store == NULL) {
            return tg_err_set(
                err, -EINVAL, "agents.%s.execution_limits.rate_scope: shared but %s", a->id,
                gw->store == NULL
                    ? NO_STORE_HINT
                    : "the lease view of the store opens at start only when an agent uses "
                      "shared_mode \"lease\" (restart toolgate to add the first one)");
        }
        if (tg_store_make_key(*store, rate_key, TG_STORE_KEY_MAX + 1, a->id, "rate") < 0) {
            return tg_err_set(err, -EINVAL,
                              "agents.%s.id: cannot name a shared bucket (braces?)", a->id);
        }
    }
    if (a->conc_shared) {
        /* Slots live in the redis store itself, never in the lease view:
         * each one is a call in flight, not a token to spend later. */
        *cstore = gw->store;
        if (*cstore == NULL) {
            return tg_err_set(err, -EINVAL,
                              "agents.%s.execution_limits.concurrency_scope: shared but " NO_STORE_HINT,
                              a->id);
        }
        if (tg_store_make_key(*cstore, slots_key, TG_STORE_KEY_MAX + 1, a->id, "slots") < 0) {
            return tg_err_set(err, -EINVAL,
                              "agents.%s.id: cannot name a shared slot set (braces?)", a->id);
        }
    }
    return 0;
}

bool tg_route_same_rate(const tg_exec_limits_t *a, const tg_exec_limits_t *b)
{
    return a->rate_src == b->rate_src && a->rate_limit.count == b->rate_limit.count &&
           a->rate_limit.period_ms == b->rate_limit.period_ms && a->burst == b->burst &&
           a->burst_src == b->burst_src;
}

int tg_route_tools_build(const tg_route_t *r, const tg_agent_cfg_t *a, tg_store_t *tool_store,
                         tg_adm_tool_t **out, tg_err_t *err)
{
    tg_adm_tool_t *tools = calloc(a->ntools ? a->ntools : 1, sizeof(*tools));
    if (tools == NULL)
        return tg_err_set(err, -ENOMEM, "agents.%s.tools: out of memory", a->id);
    for (size_t i = 0; i < a->ntools; i++) {
        const tg_exec_limits_t *l = &a->tools[i].lim;
        tg_adm_tool_t *t = &tools[i];
        const char *tn = a->tools[i].name;
        const tg_tool_cfg_t *oc =
            r != NULL && r->tools != NULL ? tg_config_tool(r->acfg, tn, strlen(tn)) : NULL;
        const tg_adm_tool_t *ot = oc != NULL ? &r->tools[oc - r->acfg->tools] : NULL;
        bool keep = ot != NULL && ot->has_rate && tg_route_same_rate(&oc->lim, l);
        if (tg_adm_tool_init(t, a, &a->tools[i], keep ? &ot->rate : NULL) < 0) {
            free(tools);
            return tg_err_set(err, -EINVAL,
                              "agents.%s.tools.%s.rate_limit: cannot be set up as a bucket", a->id,
                              tn);
        }
        /* Shared tool buckets sit beside the agent's, under
         * "{agent}:tool.NAME.rate" (the same hash slot). */
        if (t->has_rate && l->rate_shared && tg_adm_tool_key(t, tool_store, a->id, tn) < 0) {
            free(tools);
            return tg_err_set(err, -EINVAL, "agents.%s.tools.%s.rate_scope: shared but %s", a->id,
                              tn,
                              tool_store == NULL ? NO_STORE_HINT
                                                 : "its name cannot name a shared bucket");
        }
    }
    *out = tools;
    return 0;
}

void tg_route_paths(tg_route_t *r)
{
    const tg_agent_cfg_t *a = r->acfg;
    tg_config_path_for(a, NULL, "rate_limit", r->path_rate, sizeof(r->path_rate));
    tg_config_path_for(a, NULL, "max_concurrent_calls", r->path_conc, sizeof(r->path_conc));
    tg_config_path_for(a, NULL, "max_queued_calls", r->path_queue, sizeof(r->path_queue));
    tg_config_path_for(a, NULL, "max_tool_call_duration", r->path_dur, sizeof(r->path_dur));
    tg_config_path_for(a, NULL, "kill_grace_period", r->path_grace, sizeof(r->path_grace));
}

static int reg_row(tg_route_t *r, tg_limit_cat_t cat, const char *scope, uint64_t cap,
                   const char *what)
{
    char name[TG_LIMIT_NAME_MAX];
    snprintf(name, sizeof(name), "agent.%s.%s", r->acfg->id, what);
    return tg_registry_upsert(&r->gw->reg, name, cat, scope, cap);
}

void tg_route_register(tg_route_t *r)
{
    const tg_agent_cfg_t *a = r->acfg;
    r->reg_frame_out = reg_row(r, TG_LIMIT_FRAME, "agent", r->gw->cfg->max_frame_bytes,
                               "frame_bytes");
    r->reg_rate = reg_row(r, TG_LIMIT_RATE, "agent", r->arate.burst, "rate");
    r->reg_conc = reg_row(r, TG_LIMIT_CONCURRENCY, "agent", a->lim.max_concurrent_calls,
                          "concurrency");
    /* concurrency_scope shared: the fleet slots this instance holds, of the
     * fleet-wide cap (the store knows the fleet's count; this is ours). */
    r->reg_fleet = r->cstore != NULL ? reg_row(r, TG_LIMIT_CONCURRENCY, "shared",
                                               a->lim.max_concurrent_calls, "concurrency.shared")
                                     : -1;
    r->reg_queue = reg_row(r, TG_LIMIT_QUEUE, "agent", a->lim.max_queued_calls, "queue");
    r->reg_wq_agent = reg_row(r, TG_LIMIT_WRITE_QUEUE, "session", 2 * r->gw->cfg->max_frame_bytes,
                              "write_queue_bytes");
    (void)tg_agent_rows_register(&r->rows, &r->gw->reg, a);
    for (size_t i = 0; i < a->ntools; i++)
        tg_adm_tool_register(&r->tools[i], &r->gw->reg, a->id, a->tools[i].name);
}

int tg_route_setup(tg_route_t *r, tg_gw_t *gw, tg_agent_cfg_t *a, size_t idx, size_t esize,
                   uint64_t ncalls, uint32_t fit, tg_err_t *err)
{
    r->gw = gw;
    r->acfg = a;
    r->idx = idx;
    tg_ctab_init(&r->tab, esize);
    if (fit != 0)
        tg_ctab_fit(&r->tab, fit);
    /* A random start of 16 bits, so that two runs' ids rarely meet in one
     * trail (issue 12, item 25); what identifies a call for certain is
     * the pair (instance, request_id), instance names being unique per
     * run. More random bits would make every id longer: each costs its
     * digits in every splice, parse and audit event (about 20
     * instructions per call per 4 bits). */
    uint64_t seed = 0;
    (void)uv_random(NULL, NULL, &seed, sizeof(seed), 0, NULL);
    tg_ctab_seed(&r->tab, seed & 0xffff);
    if (tg_route_stores(gw, a, &r->store, r->rate_key, &r->tool_store, &r->cstore,
                        r->slots_key, err) < 0)
        return -EINVAL;
    if (tg_gcra_init(&r->arate, a->lim.rate_limit.count, a->lim.rate_limit.period_ms,
                     a->lim.burst) < 0)
        return tg_err_set(err, -EINVAL,
                          "agents.%s.execution_limits.rate_limit: cannot be set up as a bucket",
                          a->id);
    tg_conc_init(&r->aconc, a->lim.max_concurrent_calls);
    r->qcap = a->lim.max_queued_calls;
    int rc = tg_waitq_init(&r->aq, a->lim.max_queued_calls);
    if (rc == 0)
        tg_route_paths(r);
    if (rc < 0)
        return tg_err_set(err, rc, "agents.%s: out of memory", a->id);
    if (tg_route_tools_build(NULL, a, r->tool_store, &r->tools, err) < 0)
        return -EINVAL;
    if (ncalls > TG_CALL_MAX || tg_ctab_grow(&r->tab, (uint32_t)ncalls) < 0)
        return tg_err_set(err, -ENOMEM, "agents.%s: out of memory for %" PRIu64 " call entries",
                          a->id, ncalls);
    tg_route_register(r);
    return 0;
}


void tg_route_fini(tg_route_t *r)
{
    tg_waitq_free(&r->aq);
    free(r->tools);
    r->tools = NULL;
    tg_ctab_fini(&r->tab);
}

/* ---- slots and the wait queue ------------------------------------------ */

void tg_route_take_slots(tg_route_t *r, tg_callc_t *cc, tg_caller_lim_t *cl)
{
    tg_adm_take_slots(&r->aconc, cc->tool >= 0 ? &r->tools[cc->tool] : NULL, cl, &cc->tool_slot,
                      &cc->caller_slot);
}

void tg_route_fleet_release(tg_route_t *r, struct tg_store_slot *slot)
{
    if (r->gw->store != NULL)
        tg_store_slot_release(r->gw->store, slot);
}

void tg_route_release_slots(tg_route_t *r, tg_callc_t *cc, tg_caller_lim_t *cl)
{
    tg_conc_release(&r->aconc);
    if (cc->tool_slot)
        tg_conc_release(&r->tools[cc->tool].conc);
    if (cc->caller_slot && cl != NULL) {
        tg_conc_release(&cl->conc);
        tg_registry_update(&r->gw->reg, cl->reg_conc, cl->conc.inflight);
    }
    cc->tool_slot = cc->caller_slot = false;
    if (cc->fslot != NULL) {
        tg_route_fleet_release(r, cc->fslot);
        cc->fslot = NULL;
        r->fleet_held--;
        r->fleet_full = false;
    }
}

void tg_route_fleet_granted(tg_route_t *r, tg_callc_t *cc, struct tg_store_slot *slot)
{
    cc->fslot = slot;
    r->fleet_held++;
    r->fleet_full = false;
    r->fleet_backoff_ms = 0;
}

void tg_route_enqueue(tg_route_t *r, tg_callc_t *cc)
{
    tg_waitq_push(&r->aq, cc->idx);
    if (cc->tool >= 0)
        r->tools[cc->tool].queued++;
    cc->in_queue = true;
}

void tg_route_unqueue(tg_route_t *r, tg_callc_t *cc)
{
    if (!cc->in_queue)
        return;
    if (tg_waitq_remove(&r->aq, cc->idx) && cc->tool >= 0)
        r->tools[cc->tool].queued--;
    cc->in_queue = false;
}

void tg_route_dequeue_at(tg_route_t *r, uint32_t i, tg_callc_t *cc)
{
    tg_adm_dequeue_at(&r->aq, i, cc->tool >= 0 ? &r->tools[cc->tool] : NULL);
    cc->in_queue = false;
}

/* The arrival key of the call at index <i> of route <ctx>'s table. */
static uint64_t arrival_of(const void *ctx, uint32_t i)
{
    const tg_route_t *r = ctx;
    return ((const tg_callc_t *)tg_ctab_at(&r->tab, i))->id;
}

bool tg_route_requeue(tg_route_t *r, tg_callc_t *cc, uint32_t cap)
{
    if (!tg_adm_requeue(&r->aq, cap, cc->tool >= 0 ? &r->tools[cc->tool] : NULL, cc->idx, cc->id,
                        arrival_of, r))
        return false;
    cc->in_queue = true;
    return true;
}

void tg_route_fleet_wait(tg_route_t *r, uv_timer_cb on_timer, void *data)
{
    r->fleet_full = true;
    if (!r->fleet_timer_ready) {
        uv_timer_init(r->gw->loop, &r->fleet_timer);
        r->fleet_timer_ready = true;
    }
    r->fleet_timer.data = data;
    if (uv_is_active((uv_handle_t *)&r->fleet_timer) || uv_is_closing((uv_handle_t *)&r->fleet_timer))
        return;
    uv_timer_start(&r->fleet_timer, on_timer, tg_adm_fleet_delay(&r->fleet_backoff_ms), 0);
}

void tg_route_note_slot(tg_callc_t *cc, tg_store_decider_t by)
{
    cc->slot_by = tg_store_decider_name(by);
    cc->decided_by =
        cc->rate_by != NULL && strcmp(cc->rate_by, "store") != 0 ? cc->rate_by : cc->slot_by;
}

void tg_route_hold_frame(tg_route_t *r, tg_callc_t *cc, tg_block_t *b, const char *frame,
                         size_t len, size_t id_off, size_t id_len, bool held)
{
    if (!held) {
        cc->qblk = b;
        b->refs++;
        r->queued_frame_bytes += len;
    }
    cc->qframe = frame;
    cc->qlen = len;
    cc->qid_off = id_off;
    cc->qid_len = id_len;
}

tg_block_t *tg_route_take_frame(tg_route_t *r, tg_callc_t *cc)
{
    tg_block_t *b = cc->qblk;
    if (b != NULL)
        r->queued_frame_bytes -= cc->qlen;
    cc->qblk = NULL;
    return b;
}

/* ---- rate ------------------------------------------------------------- */

int tg_route_rate_scopes(tg_route_t *r, const tg_callc_t *cc, tg_caller_lim_t *cl,
                         bool with_agent, tg_adm_rate_scope_t *scopes)
{
    tg_adm_tool_t *ts = cc->tool >= 0 ? &r->tools[cc->tool] : NULL;
    int n = 0;
    /* A retired route's buckets are no longer the agent's rows. */
    if (with_agent && r->store == NULL)
        scopes[n++] = (tg_adm_rate_scope_t){&r->arate, "agent", r->path_rate,
                                            r->acfg->lim.rate_limit, r->retired ? -1 : r->reg_rate};
    if (ts != NULL && ts->has_rate && !ts->shared)
        scopes[n++] = (tg_adm_rate_scope_t){&ts->rate, "tool", ts->path_rate,
                                            r->acfg->tools[cc->tool].lim.rate_limit,
                                            r->retired ? -1 : ts->reg_rate};
    if (cl != NULL && cl->has_rate)
        scopes[n++] =
            (tg_adm_rate_scope_t){&cl->rate, "caller", cl->path_rate, cl->rate_cfg, cl->reg_rate};
    return n;
}

void tg_route_rate_take(tg_route_t *r, const tg_adm_rate_scope_t *scopes, int n, uint64_t now)
{
    for (int i = 0; i < n; i++) {
        tg_gcra_take(scopes[i].g, now);
        tg_registry_update(&r->gw->reg, scopes[i].reg, tg_gcra_used(scopes[i].g, now));
    }
}

int tg_route_rate_ask(tg_route_t *r, const tg_callc_t *cc, int step, tg_store_take_cb cb,
                      void *arg)
{
    bool tool = step == TG_ROUTE_STEP_TOOL;
    const tg_exec_limits_t *l = tool ? &r->acfg->tools[cc->tool].lim : &r->acfg->lim;
    uint32_t burst = tool ? (l->burst_src != TG_SRC_DEFAULT ? l->burst : 0) : l->burst;
    return tg_store_take(tool ? r->tool_store : r->store,
                         tool ? r->tools[cc->tool].rate_key : r->rate_key, l->rate_limit.count,
                         l->rate_limit.period_ms, burst ? burst : (uint32_t)l->rate_limit.count,
                         cb, arg);
}

/* ---- expiry ----------------------------------------------------------- */

void tg_route_deadline(const tg_route_t *r, tg_callc_t *cc, bool has_timeout,
                       uint64_t timeout_ms)
{
    cc->deadline_ms = r->acfg->lim.max_tool_call_duration_ms;
    cc->dl_src = TG_DL_AGENT;
    const tg_tool_cfg_t *tc = cc->tool >= 0 ? &r->acfg->tools[cc->tool] : NULL;
    if (tc != NULL && tc->lim.duration_src != TG_SRC_DEFAULT &&
        tc->lim.max_tool_call_duration_ms < cc->deadline_ms) {
        cc->deadline_ms = tc->lim.max_tool_call_duration_ms;
        cc->dl_src = TG_DL_TOOL;
    }
    if (has_timeout && timeout_ms < cc->deadline_ms) {
        cc->deadline_ms = timeout_ms;
        cc->dl_src = TG_DL_CALLER; /* the caller's own choice: nothing to raise */
    }
}

const char *tg_route_deadline_path(const tg_route_t *r, const tg_callc_t *cc)
{
    if (cc->dl_src == TG_DL_CALLER)
        return NULL;
    if (cc->dl_src == TG_DL_TOOL && cc->tool >= 0)
        return r->tools[cc->tool].path_dur;
    return r->path_dur;
}

bool tg_route_held_by_fleet(const tg_route_t *r, const tg_callc_t *cc, const tg_caller_lim_t *cl,
                            bool ready)
{
    return cc->state == TG_CALL_SLOT ||
           (cc->state == TG_CALL_QUEUED && r->cstore != NULL && cc->fleet_cap > 0 && ready &&
            tg_conc_has_room(&r->aconc) && tg_route_has_room(r, cc, cl));
}

void tg_route_queued_denial(const tg_route_t *r, const tg_callc_t *cc, tg_denial_t *d,
                            char *detail, size_t cap)
{
    const tg_adm_tool_t *t = cc->tool >= 0 ? &r->tools[cc->tool] : NULL;
    d->limit = "concurrency";
    d->observed = r->aconc.inflight;
    d->cap = r->aconc.max;
    d->unit = "calls";
    d->config_path = t != NULL && t->has_conc && !tg_conc_has_room(&t->conc) ? t->path_conc
                                                                             : r->path_conc;
    snprintf(detail, cap, "deadline of %" PRIu64 " ms passed while queued", cc->deadline_ms);
    d->detail = detail;
}

void tg_route_timeout_denial(const tg_callc_t *cc, uint64_t now, const char *path,
                             const char *caller_field, tg_denial_t *d, char *detail, size_t cap)
{
    d->limit = "timeout";
    d->observed = (int64_t)(now - cc->t_start);
    d->cap = (int64_t)cc->deadline_ms;
    d->unit = "ms";
    d->config_path = path;
    if (path == NULL)
        snprintf(detail, cap, "no result within %" PRIu64 " ms (the caller's %s)", cc->deadline_ms,
                 caller_field);
    else
        snprintf(detail, cap, "no result within %" PRIu64 " ms", cc->deadline_ms);
    d->detail = detail;
}
