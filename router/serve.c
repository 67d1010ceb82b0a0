/* toolgate serve: a gateway for many callers. See serve.h.
 *
 * Each router.listen entry is a Unix socket serving one MCP agent. Every
 * accepted connection is a caller, identified by its peer credentials
 * (SO_PEERCRED) and mapped to an entry of callers[] by uid, then gid, then
 * the entry named "default"; an unknown peer gets no caller limits, or is
 * refused with caller_not_allowed when router.callers_only is true. MCP
 * sessions are stateful, so each connection gets its own agent instance
 * (a session); the agent's rate and concurrency limits are shared by all of
 * them, and at most max_instances run at once: the initialize of one more
 * is refused with concurrency_limit_exceeded.
 */
#define _GNU_SOURCE /* struct ucred */
#include "router/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "router/denial.h"
#include "router/envelope.h"
#include "router/log.h"
#include "router/session.h"

#define SERVE_BACKLOG 128          /* fixed internal bound: listen(2) backlog */
#define REFUSE_READ_MAX 4096       /* fixed internal bound: bytes read to find a refused request's id */
#define REFUSE_TIMEOUT_MS 5000     /* fixed internal bound: wait for that request */

typedef struct serve_run serve_run_t;

typedef struct listener {
    uv_pipe_t pipe;
    serve_run_t *r;
    tg_agent_t *ag;
    uint32_t *ninst; /* running instances of that agent */
    const tg_listen_cfg_t *lc;
    bool bound;
} listener_t;

struct serve_run {
    tg_gw_t gw;
    tg_config_t *cfg;
    tg_agent_t **agents;
    uint32_t *ninst;
    listener_t *ls;
    size_t nls;
    tg_caller_lim_t *callers;
    uv_signal_t sig_term, sig_int;
    bool stopping;
    size_t refusing; /* refusal connections still open */
};

/* A connection refused before a session exists: read the first request to
 * answer with its own id, then close. Owns itself. */
typedef struct refusal {
    uv_pipe_t pipe;
    uv_timer_t timer;
    serve_run_t *r;
    tg_denial_t d;
    char detail[160];
    char path[TG_NAME_MAX + 64];
    char buf[REFUSE_READ_MAX];
    size_t len;
    int open;
    bool answered;
} refusal_t;

static void refusal_closed(uv_handle_t *h)
{
    refusal_t *f = h->data;
    if (--f->open > 0)
        return;
    f->r->refusing--;
    free(f);
}

static void refusal_close(refusal_t *f)
{
    if (!uv_is_closing((uv_handle_t *)&f->pipe))
        uv_close((uv_handle_t *)&f->pipe, refusal_closed);
    if (!uv_is_closing((uv_handle_t *)&f->timer))
        uv_close((uv_handle_t *)&f->timer, refusal_closed);
}

static void refusal_written(uv_write_t *req, int status)
{
    refusal_t *f = req->data;
    (void)status;
    free(req);
    refusal_close(f);
}

static void refusal_answer(refusal_t *f, const char *id, size_t id_len)
{
    if (f->answered)
        return;
    f->answered = true;
    uv_read_stop((uv_stream_t *)&f->pipe);
    uv_timer_stop(&f->timer);
    char *line = malloc(TG_AUDIT_LINE_MAX);
    uv_write_t *req = malloc(sizeof(*req));
    long n = line != NULL ? tg_denial_mcp(line, TG_AUDIT_LINE_MAX, id, id_len, &f->d) : -1;
    if (n <= 0 || req == NULL) {
        free(line);
        free(req);
        refusal_close(f);
        return;
    }
    /* The line must live until the write completes: keep it in the
     * refusal's buffer (the request is no longer read). */
    size_t k = (size_t)n < sizeof(f->buf) ? (size_t)n : sizeof(f->buf);
    memcpy(f->buf, line, k);
    free(line);
    uv_buf_t b = uv_buf_init(f->buf, (unsigned)k);
    req->data = f;
    if (uv_write(req, (uv_stream_t *)&f->pipe, &b, 1, refusal_written) < 0) {
        free(req);
        refusal_close(f);
    }
}

static void refusal_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    refusal_t *f = h->data;
    (void)suggested;
    *buf = uv_buf_init(f->buf + f->len, (unsigned)(sizeof(f->buf) - f->len));
}

static void refusal_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    refusal_t *f = s->data;
    (void)buf;
    if (n < 0) {
        refusal_answer(f, NULL, 0);
        return;
    }
    f->len += (size_t)n;
    char *nl = memchr(f->buf, '\n', f->len);
    if (nl == NULL) {
        if (f->len == sizeof(f->buf))
            refusal_answer(f, NULL, 0);
        return;
    }
    tg_mcp_env_t env;
    char id[128];
    size_t id_len = 0;
    if (tg_mcp_scan(f->buf, (size_t)(nl - f->buf), &env) == 0 && env.id.type != TG_J_NONE &&
        env.id.len <= sizeof(id)) {
        memcpy(id, f->buf + env.id.off, env.id.len);
        id_len = env.id.len;
    }
    refusal_answer(f, id_len > 0 ? id : NULL, id_len);
}

static void refusal_timeout(uv_timer_t *t)
{
    refusal_answer(t->data, NULL, 0);
}

/* Refuse the connection in <f> (accepted) with a denial for its first
 * request, answered with that request's id. */
static void refuse(refusal_t *f, tg_deny_code_t code, const char *limit, const char *agent,
                   int64_t observed, int64_t cap, const char *path)
{
    serve_run_t *r = f->r;
    f->d.code = code;
    f->d.limit = limit;
    f->d.scope = code == TG_DENY_CALLER ? "caller" : "agent";
    f->d.agent = agent;
    f->d.observed = observed;
    f->d.cap = cap;
    f->d.unit = code == TG_DENY_CONCURRENCY ? "instances" : NULL;
    f->d.retry_after_ms = TG_DENY_ABSENT;
    f->d.config_path = path;
    f->d.detail = f->detail;
    f->pipe.data = f;
    f->timer.data = f;
    uv_timer_init(r->gw.loop, &f->timer);
    f->open = 2;
    r->refusing++;
    uv_timer_start(&f->timer, refusal_timeout, REFUSE_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&f->pipe, refusal_alloc, refusal_read);

    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.agent = agent;
    ev.status = "denied";
    ev.code = tg_deny_name(code);
    ev.limit.type = limit;
    ev.limit.scope = f->d.scope;
    ev.limit.observed = observed == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : observed;
    ev.limit.cap = cap == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : cap;
    tg_audit_emit(r->gw.audit, &ev);
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

static void on_connection(uv_stream_t *server, int status)
{
    listener_t *l = server->data;
    serve_run_t *r = l->r;
    if (status < 0) {
        tg_log("accepting on %s failed: %s", l->lc->unix_path, uv_strerror(status));
        return;
    }
    /* The pipe is the first member: a session frees the block through it. */
    refusal_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return;
    f->r = r;
    uv_pipe_init(r->gw.loop, &f->pipe, 0);
    if (uv_accept(server, (uv_stream_t *)&f->pipe) < 0) {
        f->open = 1;
        r->refusing++;
        f->pipe.data = f;
        uv_close((uv_handle_t *)&f->pipe, refusal_closed);
        return;
    }
    const char *agent = tg_agent_id(l->ag);
    if (r->stopping) {
        snprintf(f->detail, sizeof(f->detail), "toolgate is shutting down");
        refuse(f, TG_DENY_SHUTTING_DOWN, "shutdown", agent, TG_DENY_ABSENT, TG_DENY_ABSENT, NULL);
        return;
    }
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t clen = sizeof(cred);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&f->pipe, &fd) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
        cred.uid = (uid_t)-1;
        cred.gid = (gid_t)-1;
    }
    int ci = caller_for(r->cfg, cred.uid, cred.gid);
    if (ci < 0 && r->cfg->callers_only) {
        snprintf(f->detail, sizeof(f->detail),
                 "peer uid %u gid %u matches no callers[] entry and router.callers_only is true",
                 (unsigned)cred.uid, (unsigned)cred.gid);
        refuse(f, TG_DENY_CALLER, "caller", agent, TG_DENY_ABSENT, TG_DENY_ABSENT, "callers");
        return;
    }
    const tg_agent_cfg_t *acfg = NULL;
    for (size_t i = 0; i < r->cfg->nagents; i++)
        if (strcmp(r->cfg->agents[i].id, agent) == 0)
            acfg = &r->cfg->agents[i];
    if (*l->ninst >= acfg->max_instances) {
        snprintf(f->path, sizeof(f->path), "agents.%s.max_instances", agent);
        snprintf(f->detail, sizeof(f->detail), "%u instances running, the most allowed",
                 *l->ninst);
        refuse(f, TG_DENY_CONCURRENCY, "instances", agent, (int64_t)*l->ninst + 1,
               (int64_t)acfg->max_instances, f->path);
        return;
    }
    tg_sess_t *s = tg_sess_conn(&r->gw, l->ag, &f->pipe, ci >= 0 ? r->cfg->callers[ci].name : "unknown",
                                ci >= 0 ? &r->callers[ci] : NULL);
    if (s == NULL) {
        f->open = 1;
        r->refusing++;
        f->pipe.data = f;
        uv_close((uv_handle_t *)&f->pipe, refusal_closed);
        return;
    }
    (*l->ninst)++;
    (void)tg_sess_start(s);
}

static void maybe_done(serve_run_t *r)
{
    if (!r->stopping || r->gw.nsessions > 0)
        return;
    if (!uv_is_closing((uv_handle_t *)&r->sig_term)) {
        uv_close((uv_handle_t *)&r->sig_term, NULL);
        if (!uv_is_closing((uv_handle_t *)&r->sig_int))
            uv_close((uv_handle_t *)&r->sig_int, NULL);
        tg_gw_stop(&r->gw);
        for (size_t i = 0; i < r->cfg->nagents; i++)
            if (r->agents[i] != NULL)
                tg_agent_close_timers(r->agents[i]);
    }
}

static void on_session_end(tg_gw_t *gw, tg_sess_t *s)
{
    serve_run_t *r = gw->data;
    tg_agent_t *ag = tg_sess_agent(s);
    for (size_t i = 0; i < r->cfg->nagents; i++)
        if (r->agents[i] == ag && r->ninst[i] > 0)
            r->ninst[i]--;
    maybe_done(r);
}

static void stop_listeners(serve_run_t *r)
{
    for (size_t i = 0; i < r->nls; i++) {
        listener_t *l = &r->ls[i];
        if (l->bound) {
            (void)unlink(l->lc->unix_path);
            l->bound = false;
        }
        if (!uv_is_closing((uv_handle_t *)&l->pipe))
            uv_close((uv_handle_t *)&l->pipe, NULL);
    }
}

static void on_signal(uv_signal_t *sig, int signum)
{
    serve_run_t *r = sig->data;
    if (r->stopping && signum == SIGINT) {
        for (tg_sess_t *s = r->gw.sessions; s != NULL; s = tg_sess_next(s))
            tg_sess_kill(s);
        return;
    }
    if (!r->stopping) {
        tg_log("%s: stopping: draining %u sessions", signum == SIGTERM ? "SIGTERM" : "SIGINT",
               r->gw.nsessions);
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "router.stopping";
        ev.reason = signum == SIGTERM ? "SIGTERM" : "SIGINT";
        ev.count = r->gw.nsessions;
        tg_audit_emit(r->gw.audit, &ev);
    }
    r->stopping = true;
    stop_listeners(r);
    /* A session may end (and unlink itself) inside shutdown: walk a copy. */
    size_t n = 0;
    tg_sess_t **snap = calloc(r->gw.nsessions + 1, sizeof(*snap));
    for (tg_sess_t *s = r->gw.sessions; snap != NULL && s != NULL; s = tg_sess_next(s))
        snap[n++] = s;
    for (size_t i = 0; i < n; i++)
        tg_sess_shutdown(snap[i], "router stopping");
    free(snap);
    maybe_done(r);
}

/* Bind <l>'s socket: a stale socket file (nobody accepting) is replaced; a
 * live one, or a file that is not a socket, is an error. */
static int bind_listener(serve_run_t *r, listener_t *l)
{
    const char *path = l->lc->unix_path;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            tg_log("router.listen: %s exists and is not a socket (remove it or choose another path)",
                   path);
            return -1;
        }
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0)
            close(fd);
        if (live) {
            tg_log("router.listen: %s is live: another process accepts on it (stop it or choose "
                   "another path)",
                   path);
            return -1;
        }
        (void)unlink(path);
    }
    uv_pipe_init(r->gw.loop, &l->pipe, 0);
    l->pipe.data = l;
    int rc = uv_pipe_bind(&l->pipe, path);
    if (rc == 0) {
        l->bound = true;
        if (chmod(path, l->lc->mode) < 0)
            rc = -errno;
    }
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->pipe, SERVE_BACKLOG, on_connection);
    if (rc < 0) {
        tg_log("router.listen: cannot listen on %s: %s", path, uv_strerror(rc));
        return -1;
    }
    return 0;
}

int tg_serve_run(tg_config_t *cfg)
{
    serve_run_t *r = calloc(1, sizeof(*r));
    uv_loop_t loop;
    int rc;

    if (r == NULL || uv_loop_init(&loop) != 0) {
        free(r);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    r->cfg = cfg;
    r->gw.on_session_end = on_session_end;
    r->gw.data = r;
    uv_signal_init(&loop, &r->sig_term);
    uv_signal_init(&loop, &r->sig_int);
    r->sig_term.data = r->sig_int.data = r;
    r->agents = calloc(cfg->nagents, sizeof(*r->agents));
    r->ninst = calloc(cfg->nagents, sizeof(*r->ninst));
    r->ls = calloc(cfg->nlisten ? cfg->nlisten : 1, sizeof(*r->ls));
    r->callers = calloc(cfg->ncallers ? cfg->ncallers : 1, sizeof(*r->callers));
    rc = r->agents && r->ninst && r->ls && r->callers ? tg_gw_open(&r->gw, &loop, cfg) : 1;
    if (rc == 0 && cfg->nlisten == 0) {
        tg_log("router.listen is empty: nothing to serve (add {\"unix\": PATH, \"agent\": ID})");
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
        if ((r->agents[i] = tg_agent_new(&r->gw, &cfg->agents[i], cfg->agents[i].max_instances)) == NULL)
            rc = 1;
    for (size_t i = 0; rc == 0 && i < cfg->nlisten; i++) {
        listener_t *l = &r->ls[i];
        l->r = r;
        l->lc = &cfg->listen[i];
        for (size_t j = 0; j < cfg->nagents; j++)
            if (strcmp(cfg->agents[j].id, l->lc->agent) == 0) {
                l->ag = r->agents[j];
                l->ninst = &r->ninst[j];
            }
        r->nls = i + 1;
        if (bind_listener(r, l) < 0)
            rc = 1;
    }
    if (rc == 0) {
        uv_signal_start(&r->sig_term, on_signal, SIGTERM);
        uv_signal_start(&r->sig_int, on_signal, SIGINT);
        tg_log("serving %zu listener(s); SIGTERM drains and stops", cfg->nlisten);
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = 0;
    } else {
        stop_listeners(r);
    }
    tg_gw_teardown(&r->gw, &loop);
    for (size_t i = 0; r->agents != NULL && i < cfg->nagents; i++)
        tg_agent_free(r->agents[i]);
    free(r->agents);
    free(r->ninst);
    free(r->ls);
    free(r->callers);
    free(r);
    return rc;
}
