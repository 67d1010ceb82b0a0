/* Routes: the per-agent limit state both engines share (see route.h). */
#include "router/call/route.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/admin/metrics.h"
#include "router/log.h"

#define NO_STORE_HINT "no shared store is configured (add store {\"kind\": \"redis\", \"url\": ...} or --store URL)"

int tg_route_stores(const tg_gw_t *gw, const tg_agent_cfg_t *a, tg_store_t **store,
                    char *rate_key, tg_store_t **tool_store, tg_store_t **cstore,
                    char *slots_key)
{
    *store = *cstore = *tool_store = NULL;
    for (size_t i = 0; i < a->ntools; i++)
        if (a->tools[i].lim.rate_shared)
            *tool_store = a->shared_lease ? gw->lease : gw->store;
    if (a->rate_shared) {
        *store = a->shared_lease ? gw->lease : gw->store;
        if (*store == NULL) {
            tg_log("agent '%s': rate_scope is shared but %s", a->id,
                   gw->store == NULL
                       ? NO_STORE_HINT
                       : "the lease view of the store opens at start only when an agent uses "
                         "shared_mode \"lease\" (restart toolgate to add the first one)");
            return -EINVAL;
        }
        if (tg_store_make_key(*store, rate_key, TG_STORE_KEY_MAX + 1, a->id, "rate") < 0) {
            tg_log("agent '%s': its id cannot name a shared bucket (braces?)", a->id);
            return -EINVAL;
        }
    }
    if (a->conc_shared) {
        /* Slots live in the redis store itself, never in the lease view:
         * each one is a call in flight, not a token to spend later. */
        *cstore = gw->store;
        if (*cstore == NULL) {
            tg_log("agent '%s': concurrency_scope is shared but " NO_STORE_HINT, a->id);
            return -EINVAL;
        }
        if (tg_store_make_key(*cstore, slots_key, TG_STORE_KEY_MAX + 1, a->id, "slots") < 0) {
            tg_log("agent '%s': its id cannot name a shared slot set (braces?)", a->id);
            return -EINVAL;
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
                         tg_adm_tool_t **out)
{
    tg_adm_tool_t *tools = calloc(a->ntools ? a->ntools : 1, sizeof(*tools));
    if (tools == NULL)
        return -ENOMEM;
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
            return -EINVAL;
        }
        /* Shared tool buckets sit beside the agent's, under
         * "{agent}:tool.NAME.rate" (the same hash slot). */
        if (t->has_rate && l->rate_shared && tg_adm_tool_key(t, tool_store, a->id, tn) < 0) {
            tg_log("agent '%s': tool '%s' has rate_scope shared but %s", a->id, tn,
                   tool_store == NULL ? NO_STORE_HINT : "its name cannot name a shared bucket");
            free(tools);
            return -EINVAL;
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
                   uint64_t ncalls)
{
    r->gw = gw;
    r->acfg = a;
    r->idx = idx;
    tg_ctab_init(&r->tab, esize);
    if (tg_route_stores(gw, a, &r->store, r->rate_key, &r->tool_store, &r->cstore,
                        r->slots_key) < 0)
        return -EINVAL;
    if (tg_gcra_init(&r->arate, a->lim.rate_limit.count, a->lim.rate_limit.period_ms,
                     a->lim.burst) < 0) {
        tg_log("agent '%s': its rate_limit cannot be set up", a->id);
        return -EINVAL;
    }
    tg_conc_init(&r->aconc, a->lim.max_concurrent_calls);
    int rc = tg_waitq_init(&r->aq, a->lim.max_queued_calls);
    if (rc == 0)
        tg_route_paths(r);
    if (rc == 0)
        rc = tg_route_tools_build(NULL, a, r->tool_store, &r->tools);
    if (rc == 0 && (ncalls > TG_CALL_MAX || tg_ctab_grow(&r->tab, (uint32_t)ncalls) < 0))
        rc = -ENOMEM;
    if (rc == -ENOMEM)
        tg_log("cannot set up limits for agent '%s': out of memory", a->id);
    if (rc < 0)
        return rc;
    tg_route_register(r);
    return 0;
}

void tg_route_regs(tg_route_t *r, int tool)
{
    tg_gw_t *gw = r->gw;
    if (gw->metrics_ok)
        tg_metrics_load(&gw->metrics, r->idx, r->aconc.inflight, r->aq.count);
    tg_registry_update(&gw->reg, r->reg_conc, r->aconc.inflight);
    tg_registry_update(&gw->reg, r->reg_queue, r->aq.count);
    tg_registry_update(&gw->reg, r->reg_fleet, r->fleet_held);
    if (tool >= 0)
        tg_adm_tool_regs(gw, &r->tools[tool]);
}

void tg_route_fini(tg_route_t *r)
{
    tg_waitq_free(&r->aq);
    free(r->tools);
    r->tools = NULL;
    tg_ctab_fini(&r->tab);
}
