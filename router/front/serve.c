/* toolgate serve: a gateway for many callers. See serve.h.
 *
 * Each router.listen entry is a Unix socket or an HTTP address. Every
 * accepted Unix connection is a caller, identified by its peer
 * credentials (SO_PEERCRED) and mapped to an entry of callers[] by uid,
 * then gid, then the entry named "default"; an unknown peer gets no caller
 * limits, or is refused with caller_not_allowed when router.callers_only
 * is true. An HTTP caller is named by its bearer token or JWT
 * (front/http.c). The connection is then handed to the engine of the
 * listener's dialect through the dialect ops table (agent/dialect.h,
 * dialect/dialect.h), which owns it from there: MCP's gives each
 * connection a session with its own agent instance, OpenSentience's
 * routes calls by tool_id to shared agents. This file names no engine.
 */
#define _GNU_SOURCE /* struct ucred */
#include "router/front/serve.h"
#include "router/auth/policy.h"
#include <jansson.h>

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "config/diff.h"
#include "limits/gcra.h"
#include "router/agent/dialect.h"
#include "router/auth/auth.h"
#include "router/front/http.h"
#include "router/front/listen.h"
#include "router/front/notify.h"
#include "router/front/run.h"
#include "router/admin/admin.h"
#include "router/dialect/dialect.h"
#include "router/gateway/log.h"
#include "router/gateway/refused.h"
#include "router/tls/tls.h"

#define SERVE_BACKLOG 128          /* fixed internal bound: listen(2) backlog */
#define ACCEPT_BURST 64            /* fixed internal bound: connections accepted per loop turn */
#define SESSION_DIGEST_HEX 16      /* hex digits of an MCP session id's digest in audit */
#define DIALECTS_MAX 4             /* fixed internal bound: dialects built in (dialect/dialect.c) */

typedef struct serve_run serve_run_t;

typedef struct listener {
    uv_pipe_t pipe;
    serve_run_t *r;
    const tg_listen_cfg_t *lc;
    int reg;         /* http: listen.<i>.connections in the registry (-1: none; a Unix
                      * listener's are its engine's) */
    tg_lsock_t sock; /* the socket file; its fd is the pipe's once open */
    bool pipe_init;  /* <pipe> is a libuv handle (to close) */
    bool bound;      /* <sock> holds a bound socket file (to remove) */
    tg_http_t *http; /* an http listener's front (http.h), else NULL */
    tg_tls_ctx_t *tls; /* its certificate and key, NULL: plain HTTP */
    tg_refused_gate_t refused; /* http: its refusals' audit bound */
    bool accept_paused;      /* unix: a connection waits to be accepted (ACCEPT_BURST) */
} listener_t;

/* One loaded config: the first (owned by the CLI) and each accepted
 * reload. Agents and the current config hold references; a generation
 * nobody refers to any more is freed (the first never is: the gateway
 * runs on it). */
typedef struct gen {
    tg_config_t *cfg;
    uint32_t refs;
    bool owned;
} gen_t;

/* Owned by tg_serve_run, freed after the teardown. */
struct serve_run {
    tg_front_t f; /* first: the loop and the signals */
    tg_gw_t gw;
    tg_config_t *cfg; /* the current generation's */
    gen_t *cur;
    gen_t **agent_gen; /* per agent: the generation its config lives in */
    void *eng[DIALECTS_MAX]; /* the engine of each dialect (tg_dialects[] order) */
    listener_t *ls;
    size_t nls;
    tg_caller_lim_t *callers;
    tg_auth_t *auth; /* who an HTTP caller is (callers[].tokens, jwt); NULL: no http listener */
    bool stopping;
    /* Accepting is capped per loop turn (ACCEPT_BURST), as libuv caps a
     * stream's reads: a client connecting and closing as fast as it can
     * would otherwise keep the loop accepting, the closed connections'
     * descriptors and memory piling up until it stops (issue 20 item 19).
     * Past the cap a listener waits for the next turn (accept_idle). */
    uint32_t accepted;
    uv_idle_t accept_idle;
};

/* The dialects this run opens an engine for: tg_dialects[], within eng[]. */
static size_t ndialects(void)
{
    return tg_ndialects < DIALECTS_MAX ? tg_ndialects : DIALECTS_MAX;
}

/* The engine of dialect <d> and its ops (NULL: none such). */
static const tg_dialect_ops_t *eng_of(const serve_run_t *r, tg_dialect_t d, void **eng)
{
    for (size_t i = 0; i < ndialects(); i++)
        if (tg_dialects[i]->dialect == d && r->eng[i] != NULL) {
            *eng = r->eng[i];
            return tg_dialects[i];
        }
    return NULL;
}

/* The callers[] entry for peer <uid>/<gid>: by uid, then gid, then the
 * one named "default"; -1 when none. */
static int caller_for(const tg_config_t *cfg, uid_t uid, gid_t gid)
{
    for (size_t i = 0; i < cfg->ncallers; i++)
        if (cfg->callers[i].uid >= 0 && (uid_t)cfg->callers[i].uid == uid)
            return (int)i;
    for (size_t i = 0; i < cfg->ncallers; i++)
        if (cfg->callers[i].gid >= 0 && (gid_t)cfg->callers[i].gid == gid)
            return (int)i;
    for (size_t i = 0; i < cfg->ncallers; i++)
        if (strcmp(cfg->callers[i].name, "default") == 0)
            return (int)i;
    return -1;
}

/* The peer credentials of accepted connection <p> (SO_PEERCRED); uid and
 * gid -1 when the kernel cannot say (then no callers[] uid/gid matches). */
static struct ucred peer_cred(uv_pipe_t *p)
{
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t clen = sizeof(cred);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)p, &fd) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
        cred.uid = (uid_t)-1;
        cred.gid = (gid_t)-1;
    }
    return cred;
}

static void on_connection(uv_stream_t *server, int status);

/* A connection no engine took (its accept failed, out of memory). */
static void conn_closed(uv_handle_t *h)
{
    serve_run_t *r = h->data;
    tg_gw_conn_ended(&r->gw);
    free(h);
}

/* The next loop turn: the listeners that waited accept again. */
static void accept_resume(uv_idle_t *h)
{
    serve_run_t *r = h->data;
    uv_idle_stop(h);
    r->accepted = 0;
    for (size_t i = 0; i < r->nls; i++) {
        listener_t *l = &r->ls[i];
        if (!l->accept_paused)
            continue;
        l->accept_paused = false;
        if (!r->stopping && l->pipe_init && !uv_is_closing((uv_handle_t *)&l->pipe))
            on_connection((uv_stream_t *)&l->pipe, 0);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    listener_t *l = server->data;
    serve_run_t *r = l->r;
    if (status < 0) {
        tg_log_warn("accepting on %s failed: %s", l->lc->unix_path, uv_strerror(status));
        return;
    }
    bool can_wait = !uv_is_closing((uv_handle_t *)&r->accept_idle);
    if (r->accepted >= ACCEPT_BURST && can_wait) {
        /* Not accepted now: libuv stops watching the listener until
         * uv_accept (accept_resume, after this turn's closes ran). */
        l->accept_paused = true;
        if (!uv_is_active((uv_handle_t *)&r->accept_idle))
            uv_idle_start(&r->accept_idle, accept_resume);
        return;
    }
    r->accepted++;
    if (can_wait && !uv_is_active((uv_handle_t *)&r->accept_idle))
        uv_idle_start(&r->accept_idle, accept_resume); /* the count is per turn */
    /* The pipe is the block: the engine frees it with the connection. */
    uv_pipe_t *conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return;
    uv_pipe_init(r->gw.loop, conn, 0);
    conn->data = r;
    if (uv_accept(server, (uv_stream_t *)conn) < 0) {
        uv_close((uv_handle_t *)conn, conn_closed);
        return;
    }
    struct ucred cred = peer_cred(conn);
    int ci = caller_for(r->cfg, cred.uid, cred.gid);
    char remote[32] = "";
    if (cred.uid != (uid_t)-1)
        snprintf(remote, sizeof(remote), "uid:%u", (unsigned)cred.uid);
    tg_peer_t peer = {.front = TG_FRONT_UNIX,
                      .listener = (size_t)(l - r->ls),
                      .lc = l->lc,
                      .caller = ci >= 0 ? r->cfg->callers[ci].name : "unknown",
                      .lim = ci >= 0 ? &r->callers[ci] : NULL,
                      .not_allowed = ci < 0 && r->cfg->callers_only,
                      .uid = cred.uid == (uid_t)-1 ? -1 : (long)cred.uid,
                      .gid = cred.gid == (gid_t)-1 ? -1 : (long)cred.gid,
                      .remote = remote[0] != '\0' ? remote : NULL};
    void *eng = NULL;
    const tg_dialect_ops_t *ops = eng_of(r, l->lc->dialect, &eng);
    char why[160];
    if (ops == NULL || ops->accept(eng, conn, &peer, why, sizeof(why)) < 0)
        uv_close((uv_handle_t *)conn, conn_closed);
}

/* Once stopping and every engine is done: close what the run holds, so
 * the loop ends. */
static void maybe_done(serve_run_t *r)
{
    if (!r->stopping)
        return;
    for (size_t i = 0; i < ndialects(); i++)
        if (r->eng[i] != NULL && !tg_dialects[i]->idle(r->eng[i]))
            return;
    if (!uv_is_closing((uv_handle_t *)&r->f.sig_term)) {
        tg_front_signals_close(&r->f);
        tg_gw_stop(&r->gw);
    }
}

/* tg_dialect_env_t.on_done: an engine is done. */
static void eng_done(void *arg, int status)
{
    (void)status;
    maybe_done(arg);
}

static void stop_listeners(serve_run_t *r)
{
    tg_handle_close((uv_handle_t *)&r->accept_idle);
    for (size_t i = 0; i < r->nls; i++) {
        listener_t *l = &r->ls[i];
        if (l->bound) {
            tg_lsock_release(&l->sock, true);
            l->bound = false;
        }
        /* A listener whose bind failed has no handle: closing one that was
         * never initialised is libuv's assertion (issue 12, item 5). */
        if (l->pipe_init && !uv_is_closing((uv_handle_t *)&l->pipe))
            uv_close((uv_handle_t *)&l->pipe, NULL);
        if (l->http != NULL)
            tg_http_stop(l->http);
    }
}

static void reload(serve_run_t *r);

static void on_signal(uv_signal_t *sig, int signum)
{
    serve_run_t *r = sig->data;
    if (signum == SIGHUP) {
        if (!r->stopping) {
            tg_notify_reloading();
            reload(r);
            tg_notify("READY=1");
        }
        return;
    }
    size_t ne = ndialects();
    if (r->stopping && signum == SIGINT) {
        for (size_t i = 0; i < ne; i++)
            if (r->eng[i] != NULL)
                tg_dialects[i]->kill(r->eng[i]);
        return;
    }
    if (!r->stopping) {
        size_t n = 0;
        for (size_t i = 0; i < ne; i++)
            n += r->eng[i] != NULL ? tg_dialects[i]->callers(r->eng[i]) : 0;
        tg_log("%s: stopping: draining %zu callers", signum == SIGTERM ? "SIGTERM" : "SIGINT", n);
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "router.stopping";
        ev.reason = signum == SIGTERM ? "SIGTERM" : "SIGINT";
        ev.count = (int64_t)n;
        tg_audit_emit(r->gw.audit, &ev);
        tg_notify("STOPPING=1");
    }
    r->stopping = true;
    stop_listeners(r);
    /* An engine may be done inside its shutdown (maybe_done waits for all). */
    for (size_t i = 0; i < ne; i++)
        if (r->eng[i] != NULL)
            tg_dialects[i]->shutdown(r->eng[i], "router stopping");
    maybe_done(r);
}

/* ---- SIGHUP: reload ------------------------------------------------------
 *
 * The file is read, validated and compared with the running config as a
 * whole before anything changes, so a bad or unsupported reload changes
 * nothing (config.rejected) and a good one applies to every agent at once
 * (config.reloaded). The comparison is config/diff.h's, key by key through
 * the key table's reload column; it names the first key that needs what
 * the change needs. What a reload may change:
 *   - an agent's limits (execution_limits, tools): applied in place, so
 *     buckets, slots and queues of limits that did not change keep their
 *     state, and inflight calls keep their slots;
 *   - anything else of an agent (command, env, cwd, resources, manifest,
 *     restart, stderr, max_instances...): a successor agent takes new
 *     connections (and those not yet initialized); the old one's sessions
 *     run on with their instance and the old agent's limits (its route)
 *     until their caller leaves or router.reload_drain_timeout passes, then
 *     are drained (calls in flight are answered, new ones refused with
 *     shutting_down) and closed (0: at once);
 *   - an opensentience agent (one instance shared by every caller) the
 *     same way, but inside the gateway (tg_osgw_reconfigure): limits in
 *     place, anything else by draining and restarting its one instance
 *     while callers stay connected and new calls wait for it;
 *   - callers' limits and router.callers_only, listeners' mode/owner/group,
 *     router.handshake_timeout and router.reload_drain_timeout.
 * The rest (router.instance, max_frame_bytes, admin, idle_timeout, audit,
 * store, containment, the set of agents and their dialects, listeners and
 * callers) is bound to open sockets, files and connections: changing it is
 * refused with the key to change back (logged, and audited as the key of
 * config.rejected), and needs a restart. */

static void gen_unref(gen_t *g)
{
    if (g == NULL || --g->refs > 0 || !g->owned)
        return;
    tg_config_free(g->cfg);
    free(g->cfg);
    free(g);
}

static void gen_unref_cb(void *arg)
{
    gen_unref(arg);
}

/* Load and validate <path> as a new generation. NULL with <err> filled. */
static gen_t *gen_load(const char *path, tg_err_t *err)
{
    gen_t *g = calloc(1, sizeof(*g));
    tg_config_t *cfg = calloc(1, sizeof(*cfg));

    if (g == NULL || cfg == NULL || tg_config_default(cfg) < 0) {
        tg_err_set(err, -1, "%s: out of memory", path);
        goto fail;
    }
    if (tg_config_load_file(cfg, path, err) < 0)
        goto fail;
    if (tg_config_name_run(cfg, "serve") < 0) { /* the name the run started with */
        tg_err_set(err, -1, "%s: out of memory", path);
        goto fail;
    }
    if (tg_config_validate(cfg, err) < 0)
        goto fail;
    g->cfg = cfg;
    g->refs = 1;
    g->owned = true;
    return g;
fail:
    tg_config_free(cfg);
    free(cfg);
    free(g);
    return NULL;
}

static void reload_audit(serve_run_t *r, const char *event, const char *reason, const char *key,
                         uint64_t count)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.reason = reason;
    ev.key = key;
    ev.count = count;
    tg_audit_emit(r->gw.audit, &ev);
}

/* Refuse a reload: log the whole message, audit only where it points
 * ("FILE:LINE:COL: json.path"), never the offending value, and <key>
 * (NULL: none), the key whose change needs a restart. */
static void reload_reject(serve_run_t *r, const char *msg, const char *key)
{
    char where[256];
    const char *p = msg;
    /* FILE:LINE:COL: PATH: message — keep up to the end of PATH. */
    for (int colons = 0; *p != '\0'; p++)
        if (p[0] == ':' && p[1] == ' ' && ++colons == 2)
            break;
    size_t n = (size_t)(p - msg);
    if (n >= sizeof(where))
        n = sizeof(where) - 1;
    memcpy(where, msg, n);
    where[n] = '\0';
    tg_log_error("SIGHUP: config rejected, the running config stays: %s", msg);
    reload_audit(r, "config.rejected", where, key, 0);
}

static void reload_listeners(serve_run_t *r);
static void reload_http(serve_run_t *r, const tg_config_t *nc);

/* Update caller limit <cl> to <cc> (same name), keeping the state of what
 * did not change. */
static void caller_reconfigure(serve_run_t *r, tg_caller_lim_t *cl, const tg_caller_cfg_t *oc,
                               const tg_caller_cfg_t *cc)
{
    tg_caller_lim_t fresh;
    if (tg_caller_lim_init(&fresh, cc) < 0)
        return; /* validated already */
    bool rate_same = oc->lim.rate_src == cc->lim.rate_src &&
                     oc->lim.rate_limit.count == cc->lim.rate_limit.count &&
                     oc->lim.rate_limit.period_ms == cc->lim.rate_limit.period_ms &&
                     oc->lim.burst == cc->lim.burst && oc->lim.burst_src == cc->lim.burst_src;
    if (!rate_same) {
        cl->rate = fresh.rate;
        cl->rate_cfg = fresh.rate_cfg;
        cl->has_rate = fresh.has_rate;
    }
    /* The counter is kept (also across a removal and a return of the
     * limit): inflight calls keep their slots and give them back to it. */
    if (fresh.has_conc)
        cl->conc.max = fresh.conc.max;
    cl->has_conc = fresh.has_conc;
    char name[TG_LIMIT_NAME_MAX];
    if (cl->has_rate && cl->reg_rate < 0) {
        snprintf(name, sizeof(name), "caller.%s.rate", cl->name);
        cl->reg_rate = tg_registry_add(&r->gw.reg, name, TG_LIMIT_RATE, "caller", cl->rate.burst);
    } else if (cl->reg_rate >= 0) {
        r->gw.reg.v[cl->reg_rate].capacity = cl->has_rate ? cl->rate.burst : 0;
    }
    if (cl->has_conc && cl->reg_conc < 0) {
        snprintf(name, sizeof(name), "caller.%s.concurrency", cl->name);
        cl->reg_conc = tg_registry_add(&r->gw.reg, name, TG_LIMIT_CONCURRENCY, "caller", cl->conc.max);
    } else if (cl->reg_conc >= 0) {
        r->gw.reg.v[cl->reg_conc].capacity = cl->has_conc ? cl->conc.max : 0;
    }
}

/* Reload agent <i> from generation <g>, whose own keys need <need>
 * (config/diff.h), through its engine (the dialect ops' reconfigure); the
 * agent's generation moves to <g> once the engine runs on it, and the
 * old one is let go now or once the engine no longer uses it. 1 when the
 * agent changed, else 0. */
static uint64_t reload_agent(serve_run_t *r, gen_t *g, size_t i, tg_cfg_need_t need)
{
    gen_t *og = r->agent_gen[i];
    tg_agent_cfg_t *na = &g->cfg->agents[i];
    if (need == TG_NEED_NONE)
        return 0;
    void *eng = NULL;
    const tg_dialect_ops_t *ops = eng_of(r, na->dialect, &eng);
    tg_err_t err;
    int rc = ops != NULL ? ops->reconfigure(eng, na, need, gen_unref_cb, og, &err)
                         : tg_err_set(&err, -ENOENT, "agents.%s: no engine speaks its dialect",
                                      na->id);
    if (rc < 0) {
        tg_log_error("SIGHUP: agent '%s': cannot apply its new config (%s); the old one keeps "
                     "running",
                     na->id, err.msg);
        return 1;
    }
    if (rc == TG_RECONF_RELEASED)
        gen_unref(og);
    r->agent_gen[i] = g;
    g->refs++;
    return 1;
}

/* What each agent's own keys need (<out>, one per agent of <g>), against
 * the config the agent runs: its generation, which is older than the
 * current one when a reload left it unchanged or could not start its
 * successor. One comparison per generation. 0 or -ENOMEM. */
static int agents_need(const serve_run_t *r, const gen_t *g, tg_cfg_change_t *out)
{
    size_t n = g->cfg->nagents;
    tg_cfg_change_t *one = calloc(n, sizeof(*one));
    if (one == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const gen_t *og = r->agent_gen[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = r->agent_gen[j] == og;
        if (seen)
            continue;
        tg_cfg_diff(og->cfg, g->cfg, NULL, one, n);
        for (size_t j = i; j < n; j++)
            if (r->agent_gen[j] == og)
                out[j] = one[j];
    }
    free(one);
    return 0;
}

/* A changed "policy": built once to check it (an error names its path and
 * rejects the reload, nothing applied), then handed to every engine. */
static int reload_policy(serve_run_t *r, const tg_config_t *nc, tg_err_t *err)
{
    tg_policy_t *p = NULL;
    if (nc->policy != NULL && tg_policy_from_json(&p, nc->policy, err) < 0) {
        char msg[sizeof(err->msg)];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        return tg_err_set(err, -EINVAL, "%s: %s", nc->path, msg);
    }
    tg_policy_free(p);
    for (size_t i = 0; i < ndialects(); i++)
        if (r->eng[i] != NULL && tg_dialects[i]->policy != NULL &&
            tg_dialects[i]->policy(r->eng[i], nc->policy, err) < 0)
            return -1;
    tg_log("SIGHUP: policy changed: applied to every session from its next request");
    return 0;
}

static void reload(serve_run_t *r)
{
    tg_err_t err;
    if (r->cfg->path == NULL) {
        tg_log_warn("SIGHUP: nothing to reload (the config did not come from a file)");
        return;
    }
    gen_t *g = gen_load(r->cfg->path, &err);
    if (g == NULL) {
        reload_reject(r, err.msg, NULL);
        return;
    }
    tg_config_t *nc = g->cfg;
    tg_cfg_change_t all;
    if (tg_cfg_diff(r->cfg, nc, &all, NULL, 0) == TG_NEED_RESTART) {
        char msg[TG_CFG_KEY_MAX + 512];
        snprintf(msg, sizeof(msg),
                 "%s: %s: changed, which needs a restart (change it back to reload)", r->cfg->path,
                 all.key);
        reload_reject(r, msg, all.key);
        gen_unref(g);
        return;
    }
    tg_cfg_change_t *need = calloc(nc->nagents ? nc->nagents : 1, sizeof(*need));
    if (need == NULL || agents_need(r, g, need) < 0) {
        tg_err_set(&err, -1, "%s: out of memory", nc->path);
        reload_reject(r, err.msg, NULL);
        free(need);
        gen_unref(g);
        return;
    }
    if (!json_equal(r->cfg->policy, nc->policy) && reload_policy(r, nc, &err) < 0) {
        reload_reject(r, err.msg, "policy");
        free(need);
        gen_unref(g);
        return;
    }
    uint64_t changed = 0;
    r->gw.handshake_timeout_ms = nc->handshake_timeout_ms;
    r->gw.reload_drain_timeout_ms = nc->reload_drain_timeout_ms;
    for (size_t i = 0; i < nc->nagents; i++)
        changed += reload_agent(r, g, i, need[i].need);
    for (size_t i = 0; i < nc->ncallers; i++)
        caller_reconfigure(r, &r->callers[i], &r->cfg->callers[i], &nc->callers[i]);
    for (size_t i = 0; i < r->nls; i++)
        r->ls[i].lc = &nc->listen[i];
    reload_listeners(r);
    reload_http(r, nc);
    /* The current generation: what callers and listeners now read. */
    gen_t *prev = r->cur;
    r->cur = g;
    r->cfg = nc;
    gen_unref(prev);
    free(need);
    tg_log("SIGHUP: config reloaded from %s (%" PRIu64 " agent(s) changed)", nc->path, changed);
    reload_audit(r, "config.reloaded", NULL, NULL, changed);
}

/* Give <l>'s socket file its configured owner, group and mode (0660 by
 * default: that user and group may connect) through the file bound
 * (listen.h), never a path that may lead elsewhere. 0, -ESTALE when the
 * path no longer holds the socket bound (nothing changed), or another
 * negative errno when the mode could not be set; an owner that cannot be
 * given is logged. */
static int apply_listener_access(listener_t *l)
{
    const tg_listen_cfg_t *lc = l->lc;
    int orc;
    int rc = tg_lsock_set_access(&l->sock, lc->mode, lc->owner, lc->group, &orc);
    if (orc < 0)
        tg_log_warn(
            "router.listen: cannot give %s to owner %lld group %lld: %s (toolgate needs root "
            "or membership of that group)",
            lc->unix_path, (long long)lc->owner, (long long)lc->group, strerror(-orc));
    return rc;
}

/* SIGHUP: the mode, owner and group of every bound listener, as the new
 * config says; a socket file someone removed or replaced (a symlink to a
 * file of theirs, say) is left alone. */
static void reload_listeners(serve_run_t *r)
{
    for (size_t i = 0; i < r->nls; i++) {
        listener_t *l = &r->ls[i];
        int rc = l->bound ? apply_listener_access(l) : 0;
        if (rc == -ESTALE)
            tg_log_warn(
                "SIGHUP: router.listen: %s is no longer the socket toolgate bound (removed or "
                "replaced): left as it is; restart toolgate to bind it again",
                l->lc->unix_path);
        else if (rc < 0)
            tg_log_warn("SIGHUP: router.listen: cannot set the mode of %s to %04o: %s",
                        l->lc->unix_path, (unsigned)l->lc->mode, strerror(-rc));
    }
}

/* Bind and listen on <l>'s socket (listen.h: a stale socket file is
 * replaced; anything else there is an error). 0 or -1 with <err> filled;
 * on failure nothing is left to undo but stop_listeners. */
/* ---- HTTP listeners (front/http.h) ---- */

/* The index of callers[] entry "default", or -1. */
static int default_caller(const tg_config_t *cfg)
{
    for (size_t i = 0; i < cfg->ncallers; i++)
        if (strcmp(cfg->callers[i].name, "default") == 0)
            return (int)i;
    return -1;
}

#define CLAIMS_MAX 16 /* fixed internal bound: claims of a JWT handed to a session */

/* The claims a policy may match, of a JWT http_auth verified: its
 * top-level string claims and arrays of strings (at most CLAIMS_MAX, each
 * value at most TG_POLICY_GLOB_MAX bytes), as a JSON object's text in
 * <out>; "" for a bearer token that is no JWT. The payload is read again
 * here without its signature: the same bytes http_auth verified. */
static void http_claims(void *arg, const char *authz, size_t n, char *out, size_t cap)
{
    (void)arg;
    out[0] = '\0';
    if (n < 7 || !tg_jwt_shaped(authz + 7, n - 7))
        return;
    json_t *payload = tg_jwt_peek(authz + 7, n - 7);
    json_t *keep = json_object();
    const char *k;
    json_t *v;
    size_t kept = 0;
    json_object_foreach(payload, k, v) {
        bool ok = json_is_string(v) && json_string_length(v) <= TG_POLICY_GLOB_MAX;
        if (json_is_array(v)) {
            ok = json_array_size(v) > 0 && json_array_size(v) <= TG_POLICY_MATCH_MAX;
            for (size_t i = 0; ok && i < json_array_size(v); i++)
                ok = json_is_string(json_array_get(v, i)) &&
                     json_string_length(json_array_get(v, i)) <= TG_POLICY_GLOB_MAX;
        }
        if (ok && kept < CLAIMS_MAX && strlen(k) <= TG_POLICY_GLOB_MAX) {
            json_object_set(keep, k, v);
            kept++;
        }
    }
    char *text = json_dumps(keep, JSON_COMPACT);
    if (text != NULL && strlen(text) < cap)
        memcpy(out, text, strlen(text) + 1);
    free(text);
    json_decref(keep);
    json_decref(payload);
}

/* tg_http_auth_fn: Authorization: Bearer names a caller by token or JWT;
 * without it a request is the "default" caller's, or anonymous, unless
 * router.callers_only. A credential that names nobody is refused. */
static int http_auth(void *arg, const char *authz, size_t n, int *caller, char *why, size_t cap,
                     const char **cause)
{
    listener_t *l = arg;
    serve_run_t *r = l->r;
    if (authz == NULL) {
        *caller = default_caller(r->cfg);
        if (*caller < 0 && r->cfg->callers_only) {
            *cause = "no token";
            snprintf(why, cap, "a bearer token is required (Authorization: Bearer TOKEN; "
                               "router.callers_only is true)");
            return -1;
        }
        return 0;
    }
    if (n < 7 || strncasecmp(authz, "Bearer ", 7) != 0) {
        *cause = "not a bearer credential";
        snprintf(why, cap, "Authorization must be \"Bearer TOKEN\"");
        return -1;
    }
    size_t off = 7;
    while (off < n && authz[off] == ' ')
        off++;
    const char *reason = "no caller has tokens or a jwt entry";
    int ci = r->auth != NULL && tg_auth_any(r->auth)
                 ? tg_auth_identify(r->auth, authz + off, n - off, (int64_t)time(NULL), &reason)
                 : -1;
    if (ci < 0) {
        *cause = reason; /* a constant of router/auth: no credential byte */
        snprintf(why, cap, "bearer credential refused: %s", reason);
        return -1;
    }
    *caller = ci;
    return 0;
}

/* tg_http_refused_fn: a request refused for who or where it came from is
 * audited as the Unix listener's refused connections are: call.denied,
 * caller_not_allowed, with the peer and why ("unauthenticated: expired",
 * "origin_not_allowed"...: no credential, ever), and logged the same. A
 * flood of them (a token being guessed) is audited and logged at
 * REFUSED_AUDIT_RATE per listener, so it cannot crowd the calls' events
 * out of the audit queue nor flood the log; the next event audited says
 * in <count> how many were not. */

static void http_refused(void *arg, int status, const char *reason, const char *remote)
{
    listener_t *l = arg;
    tg_audit_ev_t ev;
    if (status == 408) {
        /* Not a caller refused: a request that did not arrive in time
         * (header_timeout, by default router.frame_timeout), audited as
         * a Unix caller's unfinished frame is. */
        tg_audit_ev_init(&ev);
        ev.event = "call.denied";
        ev.agent = tg_listen_first_agent(l->lc);
        ev.status = "invalid";
        ev.front = "http";
        ev.remote = remote != NULL && remote[0] != '\0' ? remote : NULL;
    } else {
        /* The denial code's name (call/denial.c's table; the front
         * audits, it does not deny). */
        tg_refused_ev(&ev, tg_listen_first_agent(l->lc), "caller_not_allowed", "caller", "caller", "http", remote);
    }
    ev.reason = reason;
    /* <reason> says it: unauthenticated 401, frame_timeout 408, the others
     * 403. Logged at the audit's bounded rate, with the same count. */
    uint64_t quiet = l->refused.quiet;
    if (!tg_refused_take(&l->refused, uv_now(l->r->gw.loop), &ev))
        return;
    char more[64] = "";
    if (quiet > 0)
        snprintf(more, sizeof(more), "; %" PRIu64 " refused before it not logged", quiet);
    tg_log_warn("router.listen[%zu] (http %s): refused a request from %s with %d: %s (%s)%s",
                (size_t)(l - l->r->ls), l->lc->http_addr, remote != NULL && remote[0] ? remote : "?",
                status, reason,
                status == 401 ? "the caller's bearer token or JWT must match callers[].tokens or "
                                "callers[].jwt"
                : status == 408 ? "a request must arrive whole within the listener's "
                                  "header_timeout (router.frame_timeout by default)"
                : strcmp(reason, "origin_not_allowed") == 0
                    ? "add the Origin to router.listen[].allowed_origins"
                    : "a loopback listener takes a loopback Host only",
                more);
    tg_audit_emit(l->r->gw.audit, &ev);
}

/* The audit name of MCP session <id>: the first 16 hex digits of its
 * SHA-256. Stable for the session, different between sessions (64 bits),
 * and no way back to a usable id: SHA-256 has no known preimage attack,
 * and even an attacker able to invert it would be left with about 2^64
 * ids of 128 random bits sharing those 64 bits, each one to try against
 * the listener (which only takes the exact id, from the caller that made
 * it). */
static void session_digest(const char *id, char out[SESSION_DIGEST_HEX + 1])
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    tg_auth_token_digest(id, strlen(id), d);
    for (size_t i = 0; i < SESSION_DIGEST_HEX / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* tg_hub_open_fn: a session of the listener's engine for <caller>. */
static int http_open(void *arg, uv_pipe_t *conn, int caller, const tg_hsess_meta_t *meta,
                     char *why, size_t cap)
{
    listener_t *l = arg;
    serve_run_t *r = l->r;
    if (r->stopping) {
        snprintf(why, cap, "toolgate is shutting down");
        return -ESHUTDOWN;
    }
    char digest[SESSION_DIGEST_HEX + 1];
    session_digest(meta->id, digest);
    tg_peer_t peer = {.front = TG_FRONT_HTTP,
                      .listener = (size_t)(l - r->ls),
                      .lc = l->lc,
                      .caller = caller >= 0 ? r->cfg->callers[caller].name : "anonymous",
                      .lim = caller >= 0 ? &r->callers[caller] : NULL,
                      .uid = -1,
                      .gid = -1,
                      .remote = meta->remote,
                      .session = digest,
                      .claims = meta->claims};
    void *eng = NULL;
    const tg_dialect_ops_t *ops = eng_of(r, l->lc->dialect, &eng);
    if (ops == NULL) {
        snprintf(why, cap, "no engine speaks the listener's dialect");
        return -EPROTONOSUPPORT;
    }
    return ops->accept(eng, conn, &peer, why, cap);
}

/* gw->metrics_refresh: the HTTP listeners' counters, for /metrics. */
static void http_metrics(tg_gw_t *gw)
{
    serve_run_t *r = gw->data;
    for (size_t i = 0; i < r->nls; i++) {
        const listener_t *l = &r->ls[i];
        tg_metrics_http_t *m = tg_metrics_http_row(&gw->metrics, i);
        if (l->http == NULL || m == NULL)
            continue;
        const tg_http_stats_t *hs = tg_http_stats(l->http);
        const tg_hub_t *hub = tg_http_hub(l->http);
        const tg_hub_stats_t *ss = tg_hub_stats(hub);
        m->requests = hs->requests;
        memcpy(m->status, hs->status, sizeof(m->status));
        m->connections = l->reg >= 0 ? gw->reg.v[l->reg].current : 0;
        m->connections_total = hs->connections;
        m->connections_refused = hs->refused_connections;
        m->buffer_bytes = hs->buffer_bytes;
        m->sessions = tg_hub_sessions(hub);
        m->sessions_opened = ss->sessions_opened;
        m->sessions_ended = ss->sessions_ended;
        m->sessions_idled = ss->sessions_idled;
        m->responses_dropped = ss->responses_dropped;
        m->backlog_dropped = ss->backlog_dropped;
    }
}

/* Bind HTTP listener <i>. 0; -1 with <err> when it cannot listen; -2 with
 * <err> when its certificate or key cannot be used (bad config: exit 2). */
static int bind_http(serve_run_t *r, listener_t *l, size_t i, tg_err_t *err)
{
    const tg_listen_cfg_t *lc = l->lc;
    if (lc->tls_cert != NULL) {
        char warn[TG_TLS_WARN_MAX];
        tg_err_t terr;
        if (tg_tls_ctx_new(&l->tls, lc->tls_cert, lc->tls_key, warn, sizeof(warn), &terr) < 0) {
            /* Where it was given: serve --http has no file. */
            if (r->cfg->path == NULL)
                tg_err_set(err, -2, "--tls-cert/--tls-key: %s", terr.msg);
            else
                tg_err_set(err, -2, "%s: router.listen[%zu].tls: %s", r->cfg->path, i, terr.msg);
            return -2;
        }
        if (warn[0] != '\0')
            tg_log_warn("router.listen[%zu].tls: %s", i, warn);
    }
    if (r->auth == NULL && tg_auth_new(&r->auth, r->cfg, err) < 0)
        return -2; /* a callers[].jwt.jwks_file that changed since the load */
    char name[TG_LIMIT_NAME_MAX];
    snprintf(name, sizeof(name), "listen.%zu.sessions", i);
    int reg_sessions = tg_registry_add(&r->gw.reg, name, TG_LIMIT_CONCURRENCY, "instance",
                                       lc->max_sessions ? lc->max_sessions
                                                        : TG_HTTP_DEF_MAX_SESSIONS);
    tg_http_opts_t o = {.lc = lc,
                        .index = i,
                        .max_frame = r->cfg->max_frame_bytes,
                        .frame_timeout_ms = r->cfg->frame_timeout_ms,
                        .open = http_open,
                        .open_arg = l,
                        .auth = http_auth,
                        .claims = http_claims,
                        .auth_arg = l,
                        .refused = http_refused,
                        .refused_arg = l,
                        .tls_ctx = l->tls,
                        .reg = &r->gw.reg,
                        .reg_conns = l->reg,
                        .reg_sessions = reg_sessions};
    if (tg_http_listen(r->gw.loop, &o, &l->http, err) < 0)
        return -1;
    /* The URL a client uses: with the port bound (port 0 asks the kernel
     * for one), the host as configured. */
    const char *colon = strrchr(lc->http_addr, ':');
    int hostlen = colon != NULL ? (int)(colon - lc->http_addr) : (int)strlen(lc->http_addr);
    tg_log("router.listen[%zu]: MCP Streamable HTTP on %s%.*s:%d%s (port %d)", i,
           lc->tls_cert != NULL ? "https://" : "http://", hostlen, lc->http_addr,
           tg_http_port(l->http), lc->http_path, tg_http_port(l->http));
    return 0;
}

/* SIGHUP: the listeners' certificates and the callers' credentials. */
static void reload_http(serve_run_t *r, const tg_config_t *nc)
{
    tg_err_t err;
    bool any = false;
    for (size_t i = 0; i < r->nls; i++) {
        listener_t *l = &r->ls[i];
        if (l->http == NULL)
            continue;
        any = true;
        tg_http_set_cfg(l->http, l->lc);
        char warn[TG_TLS_WARN_MAX] = "";
        if (l->tls != NULL &&
            tg_tls_ctx_reload(l->tls, l->lc->tls_cert, l->lc->tls_key, warn, sizeof(warn), &err) < 0)
            tg_log_error("SIGHUP: router.listen[%zu].tls: %s; the old certificate stays", i,
                         err.msg);
        else if (warn[0] != '\0')
            tg_log_warn("SIGHUP: router.listen[%zu].tls: %s", i, warn);
    }
    tg_auth_t *na = NULL;
    if (any && tg_auth_new(&na, nc, &err) < 0) {
        tg_log_error("SIGHUP: callers: %s; the old credentials stay", err.msg);
        return;
    }
    if (any) {
        tg_auth_free(r->auth);
        r->auth = na;
    }
}

/* Bind listener <l>: 0, or bind_http's -1 / -2 (bad config) with <err>. */
static int bind_listener(serve_run_t *r, listener_t *l, tg_err_t *err)
{
    if (l->lc->http_addr != NULL)
        return bind_http(r, l, (size_t)(l - r->ls), err);
    const char *path = l->lc->unix_path;
    if (tg_lsock_bind(&l->sock, path, l->lc->mode, err) < 0)
        return -1;
    l->bound = true;
    int rc = apply_listener_access(l);
    if (rc < 0)
        return tg_err_set(err, -1, "router.listen: cannot set the mode of %s to %04o: %s", path,
                          (unsigned)l->lc->mode,
                          rc == -ESTALE ? "it was removed or replaced meanwhile" : strerror(-rc));
    uv_pipe_init(r->gw.loop, &l->pipe, 0);
    l->pipe_init = true;
    l->pipe.data = l;
    rc = uv_pipe_open(&l->pipe, l->sock.fd);
    if (rc == 0) {
        l->sock.fd = -1; /* the pipe's now: closed with it */
        rc = uv_listen((uv_stream_t *)&l->pipe, SERVE_BACKLOG, on_connection);
    }
    if (rc < 0)
        return tg_err_set(err, -1, "router.listen: cannot listen on %s: %s", path, uv_strerror(rc));
    return 0;
}

int tg_serve_run(tg_config_t *cfg)
{
    serve_run_t *r = tg_front_begin(sizeof(*r));
    tg_err_t err;
    int rc;

    if (r == NULL)
        return 1;
    uv_loop_t *loop = &r->f.loop;
    r->cfg = cfg;
    uv_idle_init(loop, &r->accept_idle);
    r->accept_idle.data = r;
    tg_notify_init();
    tg_lsock_activation_init();
    gen_t gen0 = {.cfg = cfg, .refs = 1, .owned = false};
    r->cur = &gen0;
    r->gw.metrics_refresh = http_metrics;
    r->gw.data = r;
    r->agent_gen = calloc(cfg->nagents ? cfg->nagents : 1, sizeof(*r->agent_gen));
    r->ls = calloc(cfg->nlisten ? cfg->nlisten : 1, sizeof(*r->ls));
    r->callers = calloc(cfg->ncallers ? cfg->ncallers : 1, sizeof(*r->callers));
    rc = r->agent_gen && r->ls && r->callers
             ? (tg_gw_open(&r->gw, loop, cfg, &err) < 0 || tg_admin_open_gw(&r->gw, &err) < 0
                    ? tg_log_failed(&err, 2)
                    : 0)
             : 1;
    if (rc == 0 && cfg->nlisten == 0) {
        tg_log_error(
            "router.listen is empty: nothing to serve (add {\"unix\": PATH, \"agent\": ID})");
        rc = 2;
    }
    for (size_t i = 0; rc == 0 && i < cfg->ncallers; i++) {
        tg_caller_lim_t *cl = &r->callers[i];
        char name[TG_LIMIT_NAME_MAX];
        if (tg_caller_lim_init(cl, &cfg->callers[i]) < 0) {
            rc = 2;
            break;
        }
        /* A caller's own limits are limits like any other: registered, so
         * they show in /limits, `toolgate status` and the page. */
        if (cl->has_rate) {
            snprintf(name, sizeof(name), "caller.%s.rate", cl->name);
            cl->reg_rate = tg_registry_add(&r->gw.reg, name, TG_LIMIT_RATE, "caller", cl->rate.burst);
        }
        if (cl->has_conc) {
            snprintf(name, sizeof(name), "caller.%s.concurrency", cl->name);
            cl->reg_conc =
                tg_registry_add(&r->gw.reg, name, TG_LIMIT_CONCURRENCY, "caller", cl->conc.max);
        }
    }
    for (size_t i = 0; rc == 0 && i < cfg->nagents; i++)
        r->agent_gen[i] = &gen0, gen0.refs++;
    /* Each dialect's engine, for the agents that speak it. */
    tg_dialect_env_t env = {.on_done = eng_done, .arg = r};
    size_t ne = ndialects();
    for (size_t i = 0; rc == 0 && i < ne; i++)
        if ((r->eng[i] = tg_dialects[i]->open(&r->gw, &env, &err)) == NULL)
            rc = tg_log_failed(&err, 1);
    for (size_t i = 0; rc == 0 && i < cfg->nlisten; i++) {
        listener_t *l = &r->ls[i];
        l->r = r;
        l->lc = &cfg->listen[i];
        l->reg = -1;
        tg_lsock_init(&l->sock);
        if (l->lc->http_addr != NULL) {
            /* As the engines register their Unix listeners'. */
            char name[TG_LIMIT_NAME_MAX];
            snprintf(name, sizeof(name), "listen.%zu.connections", i);
            l->reg = tg_registry_add(&r->gw.reg, name, TG_LIMIT_CONCURRENCY, "instance",
                                     l->lc->max_connections ? l->lc->max_connections
                                                            : TG_DEF_LISTEN_MAX_CONNECTIONS);
        }
        r->nls = i + 1;
        int brc = bind_listener(r, l, &err);
        if (brc < 0)
            rc = tg_log_failed(&err, brc == -2 ? 2 : 1);
    }
    tg_lsock_activation_done();
    if (rc == 0) {
        for (size_t i = 0; i < ne; i++)
            tg_dialects[i]->start(r->eng[i]);
        tg_front_signals_start(&r->f, on_signal, true);
        tg_log("serving %zu listener(s); SIGHUP reloads %s, SIGTERM drains and stops", cfg->nlisten,
               cfg->path != NULL ? cfg->path : "(no file)");
        tg_notify("READY=1");
        uv_run(loop, UV_RUN_DEFAULT);
        rc = 0;
    } else {
        stop_listeners(r);
    }
    tg_gw_teardown(&r->gw, loop);
    for (size_t i = 0; i < r->nls; i++) {
        tg_http_free(r->ls[i].http);
        tg_tls_ctx_free(r->ls[i].tls);
    }
    tg_auth_free(r->auth);
    for (size_t i = 0; i < ne; i++)
        if (r->eng[i] != NULL)
            tg_dialects[i]->free(r->eng[i]);
    for (size_t i = 0; r->agent_gen != NULL && i < cfg->nagents; i++)
        gen_unref(r->agent_gen[i]);
    if (r->cur != &gen0)
        gen_unref(r->cur);
    free(r->agent_gen);
    free(r->ls);
    free(r->callers);
    free(r);
    return rc;
}
