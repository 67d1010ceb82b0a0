/* toolgate wrap: one stdio session in front of one agent. See wrap.h. */
#include "router/front/wrap.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "router/front/relay.h"
#include "router/front/run.h"
#include "router/admin/admin.h"
#include "router/gateway/log.h"
#include "router/dialect/mcp/session.h"

/* Owned by tg_wrap_run, freed after the teardown. */
typedef struct wrap_run {
    tg_front_t f; /* first: the loop and the signals */
    tg_gw_t gw;
    tg_mcp_agent_t *ag;
    tg_mcp_sess_t *sess;
    tg_config_t *cfg;     /* the command line's, owned by the caller */
    tg_wrap_load_fn load; /* SIGHUP: the command line parsed again (NULL: no reload) */
    void *load_ctx;
    tg_config_t *live;    /* the reloaded config the agent runs with, NULL: cfg; owned */
    json_t *doc;          /* the --config file as JSON when the running config was read */
} wrap_run_t;

/* ---- SIGHUP: reload --------------------------------------------------------
 *
 * As serve (serve.c), but for the one agent: the command line is parsed
 * again (--config FILE, then --name and the --limit overrides), and when
 * only agents[0]'s limits (execution_limits, tools) changed they apply in
 * place (tg_mcp_agent_reconfigure): the call in flight keeps its slot and is
 * answered. Anything else, or a file that does not load, is refused: the
 * running config stays, the log says why (config.rejected in audit). The
 * audit file needs nothing: its sink follows a file moved or deleted
 * (logrotate) by itself after every batch (audit/sink_file.c). */

static void reload_audit(wrap_run_t *r, const char *event, const char *reason)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.reason = reason;
    ev.agent = tg_mcp_agent_id(r->ag);
    tg_audit_emit(r->gw.audit, &ev);
}

static void reload_reject(wrap_run_t *r, const char *reason, const char *msg)
{
    tg_log_error("SIGHUP: config rejected, the running config stays: %s", msg);
    reload_audit(r, "config.rejected", reason);
}

/* <doc> with agents[0]'s execution_limits and tools removed (a copy). */
static json_t *without_limits(const json_t *doc)
{
    json_t *c = json_deep_copy(doc);
    json_t *a0 = json_array_get(json_object_get(c, "agents"), 0);
    if (json_is_object(a0)) {
        json_object_del(a0, "execution_limits");
        json_object_del(a0, "tools");
    }
    return c;
}

/* What a reload from <nd> / <na> cannot change in place, or NULL. */
static const char *reload_blocker(const wrap_run_t *r, const json_t *nd, const tg_agent_cfg_t *na)
{
    json_t *a = without_limits(r->doc), *b = without_limits(nd);
    bool same = a != NULL && b != NULL && json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (!same)
        return "something other than agents[0].execution_limits and agents[0].tools changed";
    const tg_agent_cfg_t *oa = tg_mcp_agent_cfg(r->ag);
    const tg_resources_t *x = &oa->res, *y = &na->res;
    if (x->memory_bytes != y->memory_bytes || x->cpu_millicores != y->cpu_millicores ||
        x->pids != y->pids || x->disk_bytes != y->disk_bytes || x->network != y->network ||
        x->nofile != y->nofile || x->bandwidth_bps != y->bandwidth_bps ||
        x->max_connections != y->max_connections)
        return "the agent's resources (its manifest) changed";
    return NULL;
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
    if (r->load == NULL || r->cfg->path == NULL || r->ag == NULL) {
        tg_log_warn("SIGHUP: no --config to reload (the audit file follows logrotate by itself)");
        return;
    }
    tg_err_t err;
    tg_config_t *nc = calloc(1, sizeof(*nc));
    if (nc == NULL) {
        reload_reject(r, "out_of_memory", "out of memory");
        return;
    }
    if (r->load(r->load_ctx, nc, &err) < 0) {
        reload_reject(r, "invalid", err.msg);
        config_drop(nc);
        return;
    }
    json_error_t je;
    json_t *nd = json_load_file(nc->path, 0, &je);
    const char *blocker = nd == NULL ? "the file changed while being read (send SIGHUP again)"
                                     : reload_blocker(r, nd, &nc->agents[0]);
    int rc = 0;
    if (blocker == NULL && (rc = tg_mcp_agent_reconfigure(r->ag, &nc->agents[0])) < 0)
        blocker = rc == -EAGAIN ? "the tools, the shared store use or the call table size changed"
                                : "out of memory";
    if (blocker != NULL) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: %s, which needs a restart (change it back to reload)",
                 r->cfg->path, blocker);
        reload_reject(r, "needs_restart", msg);
        json_decref(nd);
        config_drop(nc);
        return;
    }
    /* The agent runs on <nc> now: the previous reload's config may go. */
    config_drop(r->live);
    r->live = nc;
    json_decref(r->doc);
    r->doc = nd;
    tg_log("SIGHUP: agent '%s': config reloaded from %s (limits updated in place)",
           tg_mcp_agent_id(r->ag), nc->path);
    reload_audit(r, "config.reloaded", NULL);
}

/* ---- the run ---------------------------------------------------------------- */

static void on_signal(uv_signal_t *s, int signum)
{
    wrap_run_t *r = s->data;
    if (r->sess == NULL)
        return;
    if (signum == SIGHUP) {
        if (!tg_mcp_sess_stopping(r->sess))
            reload(r);
        return;
    }
    if (tg_mcp_sess_stopping(r->sess) && signum == SIGINT) {
        /* A second Ctrl-C: do not wait for the grace period. */
        tg_mcp_sess_kill(r->sess);
        return;
    }
    tg_mcp_sess_shutdown(r->sess, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* The session is the router: when it ends, so does everything. */
static void on_session_end(tg_gw_t *gw, tg_mcp_sess_t *s)
{
    wrap_run_t *r = gw->data;
    (void)s;
    r->sess = NULL;
    /* On error paths the teardown's close-all may have closed them. */
    tg_front_signals_close(&r->f);
    tg_gw_stop(gw);
    if (r->ag != NULL)
        tg_mcp_agent_close_timers(r->ag);
}

int tg_wrap_run(tg_config_t *cfg, tg_wrap_load_fn load, void *load_ctx)
{
    wrap_run_t *r = tg_front_begin(sizeof(*r));
    if (r == NULL)
        return 1;
    r->gw.wrap_mode = true;
    r->gw.on_session_end = on_session_end;
    r->gw.data = r;
    r->cfg = cfg;
    r->load = load;
    r->load_ctx = load_ctx;
    if (cfg->path != NULL) {
        json_error_t je;
        r->doc = json_load_file(cfg->path, 0, &je);
        if (r->doc == NULL)
            r->load = NULL; /* gone since it was parsed: no reload */
    }

    tg_err_t err;
    tg_relay_t relay;
    int rc = tg_relay_start(&relay) < 0 ? 2 : 0;
    if (rc == 0 && (tg_gw_open(&r->gw, &r->f.loop, cfg, &err) < 0 ||
                    tg_admin_open_gw(&r->gw, &err) < 0))
        rc = tg_log_failed(&err, 2);
    if (rc == 0 && (r->ag = tg_mcp_agent_new(&r->gw, &cfg->agents[0], 1)) == NULL)
        rc = 1;
    if (rc == 0 && (r->sess = tg_mcp_sess_stdio(&r->gw, r->ag)) == NULL)
        rc = 2;
    if (rc == 0) {
        tg_front_signals_start(&r->f, on_signal, true);
        if (tg_mcp_sess_start(r->sess) < 0 && r->gw.exit_code == 0)
            r->gw.exit_code = 127;
        uv_run(&r->f.loop, UV_RUN_DEFAULT);
        rc = r->gw.exit_code;
    }
    tg_gw_teardown(&r->gw, &r->f.loop);
    tg_relay_finish(&relay);
    tg_mcp_agent_free(r->ag);
    config_drop(r->live);
    json_decref(r->doc);
    free(r);
    return rc;
}
