/* toolgate wrap: one stdio session in front of one agent. See wrap.h. */
#include "router/front/wrap.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "config/diff.h"
#include "router/front/relay.h"
#include "router/front/run.h"
#include "router/admin/admin.h"
#include "router/dialect/dialect.h"
#include "router/gateway/log.h"

/* Owned by tg_wrap_run, freed after the teardown. */
typedef struct wrap_run {
    tg_front_t f; /* first: the loop and the signals */
    tg_gw_t gw;
    const tg_dialect_ops_t *ops; /* agents[0]'s dialect (MCP: wrap serves MCP) */
    void *eng;                   /* its engine, serving one stdio session */
    bool running;                /* the session has not ended */
    bool stopping;               /* SIGTERM or SIGINT asked it to stop */
    int status;                  /* the process status once it ended */
    tg_config_t *cfg;     /* the command line's, owned by the caller */
    tg_wrap_load_fn load; /* SIGHUP: the command line parsed again (NULL: no reload) */
    void *load_ctx;
    tg_config_t *live; /* the reloaded config the agent runs with, NULL: cfg; owned */
} wrap_run_t;

/* ---- SIGHUP: reload --------------------------------------------------------
 *
 * As serve (serve.c), but for the one agent: the command line is parsed
 * again (--config FILE, then --name and the --limit overrides) and
 * compared with the running config key by key (config/diff.h). When every
 * changed key applies in place, agents[0]'s limits (execution_limits,
 * tools) do (tg_mcp_agent_reconfigure): the call in flight keeps its slot and
 * is answered; the other keys that apply in place are serve's (listeners,
 * callers, handshake and drain timeouts) and mean nothing here. A key that
 * needs the agent restarted is refused as one that needs toolgate
 * restarted: the agent is the session's, and a wrap has no other. A
 * refused reload, or a file that does not load, leaves the running config
 * as it is; the log says why, naming the key (config.rejected in audit,
 * with the key). The audit file needs nothing: its sink follows a file
 * moved or deleted (logrotate) by itself after every batch
 * (audit/sink_file.c). */

static void reload_audit(wrap_run_t *r, const char *event, const char *reason, const char *key)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.reason = reason;
    ev.key = key;
    ev.agent = r->cfg->agents[0].id;
    tg_audit_emit(r->gw.audit, &ev);
}

/* <key>: the key whose change needs a restart, or NULL. */
static void reload_reject(wrap_run_t *r, const char *reason, const char *key, const char *msg)
{
    tg_log_error("SIGHUP: config rejected, the running config stays: %s", msg);
    reload_audit(r, "config.rejected", reason, key);
}

static void config_drop(tg_config_t *c)
{
    if (c != NULL) {
        tg_config_free(c);
        free(c);
    }
}

static void reload(wrap_run_t *r)
{
    if (r->load == NULL || r->cfg->path == NULL || r->eng == NULL) {
        tg_log_warn("SIGHUP: no --config to reload (the audit file follows logrotate by itself)");
        return;
    }
    tg_err_t err;
    tg_config_t *nc = calloc(1, sizeof(*nc));
    if (nc == NULL) {
        reload_reject(r, "out_of_memory", NULL, "out of memory");
        return;
    }
    if (r->load(r->load_ctx, nc, &err) < 0) {
        reload_reject(r, "invalid", NULL, err.msg);
        config_drop(nc);
        return;
    }
    tg_cfg_change_t all, ag0;
    char msg[TG_CFG_KEY_MAX + 512];
    if (tg_cfg_diff(r->live != NULL ? r->live : r->cfg, nc, &all, &ag0, 1) > TG_NEED_LIVE) {
        snprintf(msg, sizeof(msg),
                 "%s: %s: changed, which needs a restart (change it back to reload)", r->cfg->path,
                 all.key);
        reload_reject(r, "needs_restart", all.key, msg);
        config_drop(nc);
        return;
    }
    /* The agent moves to <nc> even when its limits are the same: it holds
     * its config, and the running one is dropped below. A change that
     * needs a new instance is -EAGAIN: the instance is the session's. */
    tg_err_t aerr;
    int rc = r->ops->reconfigure(r->eng, &nc->agents[0], TG_NEED_LIVE, NULL, NULL, &aerr);
    if (rc == -EAGAIN) {
        const char *key = ag0.need != TG_NEED_NONE ? ag0.key : "agents[0]";
        snprintf(msg, sizeof(msg),
                 "%s: %s: changed, and the tools, the shared store use or the call table size "
                 "cannot change in place, which needs a restart (change it back to reload)",
                 r->cfg->path, key);
        reload_reject(r, "needs_restart", key, msg);
    } else if (rc < 0) {
        snprintf(msg, sizeof(msg), "%s: cannot apply the new limits: %s", r->cfg->path, aerr.msg);
        reload_reject(r, rc == -ENOMEM ? "out_of_memory" : "invalid", NULL, msg);
    }
    if (rc < 0) {
        config_drop(nc);
        return;
    }
    /* The agent runs on <nc> now: the previous reload's config may go. */
    config_drop(r->live);
    r->live = nc;
    tg_log("SIGHUP: agent '%s': config reloaded from %s (limits updated in place)",
           nc->agents[0].id, nc->path);
    reload_audit(r, "config.reloaded", NULL, NULL);
}

/* ---- the run ---------------------------------------------------------------- */

static void on_signal(uv_signal_t *s, int signum)
{
    wrap_run_t *r = s->data;
    if (!r->running)
        return;
    if (signum == SIGHUP) {
        if (!r->stopping)
            reload(r);
        return;
    }
    if (r->stopping && signum == SIGINT) {
        /* A second Ctrl-C: do not wait for the grace period. */
        r->ops->kill(r->eng);
        return;
    }
    r->stopping = true;
    r->ops->shutdown(r->eng, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* tg_dialect_env_t.on_done: the session is the router: when it ends, so
 * does everything. */
static void on_done(void *arg, int status)
{
    wrap_run_t *r = arg;
    r->running = false;
    r->status = status;
    /* On error paths the teardown's close-all may have closed them. */
    tg_front_signals_close(&r->f);
    tg_gw_stop(&r->gw);
}

int tg_wrap_run(tg_config_t *cfg, tg_wrap_load_fn load, void *load_ctx)
{
    return tg_wrap_run_tools(cfg, load, load_ctx, NULL);
}

int tg_wrap_run_tools(tg_config_t *cfg, tg_wrap_load_fn load, void *load_ctx,
                      const tg_wrap_tools_t *tools)
{
    wrap_run_t *r = tg_front_begin(sizeof(*r));
    if (r == NULL)
        return 1;
    r->gw.wrap_mode = true;
    if (tools != NULL) {
        r->gw.allow_tools = tools->allow;
        r->gw.nallow_tools = tools->nallow;
        r->gw.deny_tools = tools->deny;
        r->gw.ndeny_tools = tools->ndeny;
    }
    r->gw.data = r;
    r->cfg = cfg;
    r->load = load;
    r->load_ctx = load_ctx;
    r->ops = tg_dialect_find(cfg->nagents > 0 ? cfg->agents[0].dialect : TG_DIALECT_MCP);

    tg_err_t err;
    tg_relay_t relay;
    tg_dialect_env_t env = {.on_done = on_done, .arg = r};
    int rc = tg_relay_start(&relay) < 0 ? 2 : 0;
    if (rc == 0 && (tg_gw_open(&r->gw, &r->f.loop, cfg, &err) < 0 ||
                    tg_admin_open_gw(&r->gw, &err) < 0))
        rc = tg_log_failed(&err, 2);
    if (rc == 0 && (r->eng = r->ops->open(&r->gw, &env, &err)) == NULL)
        rc = tg_log_failed(&err, 1);
    if (rc == 0) {
        tg_front_signals_start(&r->f, on_signal, true);
        tg_peer_t peer = {.front = TG_FRONT_STDIO, .caller = "stdio", .uid = -1, .gid = -1};
        char why[160];
        r->running = true;
        if (r->ops->accept(r->eng, NULL, &peer, why, sizeof(why)) < 0)
            rc = 2;
    }
    if (rc == 0) {
        uv_run(&r->f.loop, UV_RUN_DEFAULT);
        rc = r->status;
    }
    tg_gw_teardown(&r->gw, &r->f.loop);
    tg_relay_finish(&relay);
    if (r->eng != NULL)
        r->ops->free(r->eng);
    config_drop(r->live);
    free(r);
    return rc;
}
