/* The admin endpoint of a gateway: opened by the runner after
 * tg_gw_open, with the gateway as its provider of registry and metrics,
 * closed by tg_gw_stop through gw->admin_close. */
#include "router/admin/admin.h"

#include <uv.h>

#include "router/gateway/gateway.h"
#include "router/gateway/log.h"

/* The admin endpoint's own bounds cross a threshold (see admin.h). */
static void admin_limit_event(void *ctx, int idx, tg_limit_ev_t ev)
{
    tg_registry_emit(&((tg_gw_t *)ctx)->reg, idx, ev);
}

/* An admin connection left a request unfinished past the admin idle
 * timeout: audited as a caller's unfinished frame is. */
static void admin_request_timeout(void *ctx)
{
    tg_gw_t *gw = ctx;
    if (gw->audit == NULL)
        return;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.status = "invalid";
    ev.reason = "frame_timeout";
    ev.front = "admin";
    tg_audit_emit(gw->audit, &ev);
}

static void admin_refresh(void *ctx)
{
    tg_gw_t *gw = ctx;
    if (gw->audit != NULL && gw->metrics_ok)
        tg_metrics_audit(&gw->metrics, tg_audit_queued(gw->audit), gw->cfg->audit_queue,
                         tg_audit_dropped(gw->audit));
    tg_gw_store_sample(gw);
}

static const tg_registry_t *admin_registry(void *ctx)
{
    return &((tg_gw_t *)ctx)->reg;
}

static const tg_metrics_t *admin_metrics(void *ctx)
{
    tg_gw_t *gw = ctx;
    if (gw->metrics_ok && gw->metrics_refresh != NULL)
        gw->metrics_refresh(gw);
    return gw->metrics_ok ? &gw->metrics : NULL;
}

int tg_admin_open_gw(tg_gw_t *gw, tg_err_t *err)
{
    if (gw->cfg->admin_addr != NULL) {
        tg_admin_opts_t aopts = {.max_header_bytes = gw->cfg->admin_max_header_bytes,
                                 .max_connections = gw->cfg->admin_max_connections,
                                 .idle_timeout_ms = gw->cfg->admin_idle_timeout_ms,
                                 .max_response_bytes = gw->cfg->admin_max_response_bytes,
                                 .frame_timeout_ms = gw->cfg->frame_timeout_ms};
        tg_admin_provider_t prov = {.ctx = gw, .refresh = admin_refresh,
                                    .registry = admin_registry, .metrics = admin_metrics,
                                    .own = &gw->reg, .limit_event = admin_limit_event,
                                    .request_timeout = admin_request_timeout};
        tg_err_t aerr;
        /* wrap: the tools matter more than the page. An MCP client that
         * launches several wraps with one --admin gets the endpoint in the
         * first; the others say so and serve their tools without one.
         * Only a port in use falls back: a bad address was refused by
         * validation, and any other failure is this run's own. */
        int arc = tg_admin_start(&gw->admin, gw->loop, gw->cfg->admin_addr, &aopts, &prov, &aerr);
        if (arc < 0) {
            if (!gw->wrap_mode || arc != UV_EADDRINUSE)
                return tg_err_set(err, -1, "router.admin: %s", aerr.msg);
            tg_log_warn("router.admin: %s; this wrap runs without an admin endpoint", aerr.msg);
            gw->admin = NULL;
        }
        char bound[128];
        if (gw->admin != NULL && tg_admin_bound(gw->admin, bound, sizeof(bound)) >= 0)
            tg_log("admin endpoint on http://%s/ (/metrics, /limits, /agents, /healthz)", bound);
    }
    if (gw->admin != NULL)
        gw->admin_close = tg_admin_close;
    return 0;
}
