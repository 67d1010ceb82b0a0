/* The MCP engine behind the dialect ops table (agent/dialect.h): every
 * MCP agent of the run, the sessions its fronts hand it, their refusals
 * before a session exists, shutdown and reload. See mcp.h.
 *
 * Sessions are stateful: each caller connection is a session with its own
 * agent instance (the `session` binding of the agent's pool), started by
 * the caller's first initialize; a connection that sends none within
 * router.handshake_timeout is closed without one (session_life.c). A Unix
 * connection is refused here, in MCP's framing, when toolgate is shutting
 * down, when router.callers_only finds no callers[] entry for the peer,
 * or past its listener's max_connections: its first request is read (up
 * to REFUSE_READ_MAX bytes, REFUSE_TIMEOUT_MS) to answer with its own id,
 * then the connection is closed. An HTTP session is refused by its front
 * (front/http_sess.c) with the reason this engine gives.
 */
#include "router/dialect/mcp/mcp.h"

#include "router/dialect/mcp/session_impl.h"

#define REFUSE_READ_MAX 4096   /* fixed internal bound: bytes read to find a refused request's id */
#define REFUSE_TIMEOUT_MS 5000 /* fixed internal bound: wait for that request */
#define REFUSING_MAX 64        /* fixed internal bound: refused connections waiting for their
                                * request; past it one is answered at once (id null) */

/* ---- refusals before a session exists ----------------------------------- */

/* A connection refused before a session exists: read the first request to
 * answer with its own id, then close. Owns itself and the connection. */
typedef struct refusal {
    uv_pipe_t *pipe; /* the front's block: freed with the refusal */
    uv_timer_t timer;
    tg_mcp_eng_t *e;
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
    f->e->refusing--;
    tg_gw_conn_ended(f->e->gw);
    free(f->pipe);
    free(f);
}

static void refusal_close(refusal_t *f)
{
    if (!uv_is_closing((uv_handle_t *)f->pipe))
        uv_close((uv_handle_t *)f->pipe, refusal_closed);
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
    uv_read_stop((uv_stream_t *)f->pipe);
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
    if (uv_write(req, (uv_stream_t *)f->pipe, &b, 1, refusal_written) < 0) {
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

static void conn_dropped(uv_handle_t *h)
{
    tg_mcp_eng_t *e = h->data;
    tg_gw_conn_ended(e->gw);
    free(h);
}

/* Close connection <conn> without a word (out of memory). */
static void conn_drop(tg_mcp_eng_t *e, uv_pipe_t *conn)
{
    conn->data = e;
    uv_close((uv_handle_t *)conn, conn_dropped);
}

/* Refuse connection <conn> of <peer> (a Unix listener's) with <code>:
 * audited (at the listener's bounded rate), answered with a denial for
 * its first request and its id, then closed; past REFUSING_MAX such
 * connections waiting for their request, answered at once (id null, best
 * effort) and closed, so refusals cannot pile up. <detail> and <path>
 * (NULL: none) are copied. */
static void refuse(tg_mcp_eng_t *e, uv_pipe_t *conn, const tg_peer_t *peer, tg_deny_code_t code,
                   const char *limit, const char *agent, int64_t observed, int64_t cap,
                   const char *path, const char *detail)
{
    refusal_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        conn_drop(e, conn);
        return;
    }
    f->e = e;
    f->pipe = conn;
    conn->data = f;
    f->timer.data = f;
    snprintf(f->detail, sizeof(f->detail), "%s", detail);
    snprintf(f->path, sizeof(f->path), "%s", path != NULL ? path : "");
    f->d.code = code;
    f->d.limit = limit;
    f->d.scope = code == TG_DENY_CALLER              ? "caller"
                 : strcmp(limit, "connections") == 0 ? "instance"
                                                     : "agent";
    f->d.agent = agent;
    f->d.observed = observed;
    f->d.cap = cap;
    f->d.unit = code == TG_DENY_CONCURRENCY ? limit : NULL;
    f->d.retry_after_ms = TG_DENY_ABSENT;
    f->d.config_path = path != NULL ? f->path : NULL;
    f->d.detail = f->detail;

    tg_audit_ev_t ev;
    tg_refused_ev(&ev, agent, tg_deny_name(code), limit, f->d.scope, "unix", peer->remote);
    ev.limit.observed = observed == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : observed;
    ev.limit.cap = cap == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : cap;
    if (tg_refused_take(&e->ls[peer->listener].gate, uv_now(e->gw->loop), &ev))
        tg_audit_emit(e->gw->audit, &ev);

    e->refusing++;
    if (e->refusing > REFUSING_MAX) {
        char line[TG_AUDIT_LINE_MAX];
        long n = tg_denial_mcp(line, sizeof(line), NULL, 0, &f->d);
        if (n > 0) {
            uv_buf_t b = uv_buf_init(line, (unsigned)n);
            (void)uv_try_write((uv_stream_t *)conn, &b, 1);
        }
        f->open = 1;
        uv_close((uv_handle_t *)conn, refusal_closed);
        return;
    }
    uv_timer_init(e->gw->loop, &f->timer);
    f->open = 2;
    uv_timer_start(&f->timer, refusal_timeout, REFUSE_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)conn, refusal_alloc, refusal_read);
}

/* ---- the ops ------------------------------------------------------------ */

static void eng_tick(void *arg, uint64_t now)
{
    mcp_eng_tick(arg, now);
}

static void eng_reap(void *arg)
{
    mcp_eng_reap_retired(arg);
}

static void eng_free(void *arg)
{
    tg_mcp_eng_t *e = arg;
    if (e == NULL)
        return;
    for (size_t i = 0; e->agents != NULL && i < e->nagents; i++)
        tg_mcp_agent_free(e->agents[i]);
    tg_policy_free(e->policy);
    free(e->agents);
    free(e->ls);
    free(e);
}

static int policy_build(tg_policy_t **out, const struct json_t *policy, tg_err_t *err)
{
    tg_policy_t *p = NULL;
    if (tg_policy_from_json(&p, policy, err) < 0)
        return -1;
    if (tg_policy_supported(p, err) < 0) {
        tg_policy_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* Who may call what (router/auth/policy.h): the config's "policy", else
 * wrap's --allow-tool and --deny-tool globs, else none. */
static int mcp_eng_policy(tg_mcp_eng_t *e, const tg_config_t *cfg, tg_err_t *err)
{
    if (cfg->policy != NULL)
        return policy_build(&e->policy, cfg->policy, err);
    const tg_gw_t *gw = e->gw;
    if (gw->nallow_tools + gw->ndeny_tools == 0)
        return 0;
    return tg_policy_from_flags(&e->policy, gw->allow_tools, gw->nallow_tools, gw->deny_tools,
                                gw->ndeny_tools, err);
}

static int eng_policy(void *arg, const struct json_t *policy, tg_err_t *err)
{
    tg_mcp_eng_t *e = arg;
    tg_policy_t *p = NULL;
    if (policy != NULL && policy_build(&p, policy, err) < 0)
        return -1;
    tg_policy_free(e->policy);
    e->policy = p;
    if (e->gw->metrics_ok)
        memset(e->gw->metrics.policy_denied, 0, sizeof(e->gw->metrics.policy_denied));
    mcp_hub_policy_changed(e);
    return 0;
}

static void *eng_open(tg_gw_t *gw, const tg_dialect_env_t *env, tg_err_t *err)
{
    tg_config_t *cfg = gw->cfg;
    tg_mcp_eng_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        tg_err_set(err, -ENOMEM, "agents: out of memory");
        return NULL;
    }
    e->gw = gw;
    e->env = *env;
    /* wrap serves agents[0] alone, with one instance, or (a config of
     * several agents) every MCP agent of it through one hub. */
    e->nagents = gw->wrap_mode && cfg->nagents <= 1 ? (cfg->nagents > 0) : cfg->nagents;
    e->nls = gw->wrap_mode ? 0 : cfg->nlisten;
    e->agents = calloc(e->nagents ? e->nagents : 1, sizeof(*e->agents));
    e->ls = calloc(e->nls ? e->nls : 1, sizeof(*e->ls));
    if (e->agents == NULL || e->ls == NULL ||
        tg_gw_hook_add(gw, eng_tick, eng_reap, e) < 0) {
        tg_err_set(err, -ENOMEM, "agents: out of memory");
        eng_free(e);
        return NULL;
    }
    if (mcp_eng_policy(e, cfg, err) < 0) {
        eng_free(e);
        return NULL;
    }
    for (size_t i = 0; i < e->nagents; i++) {
        tg_agent_cfg_t *a = &cfg->agents[i];
        if (a->dialect != TG_DIALECT_MCP)
            continue;
        uint32_t max = gw->wrap_mode ? 1 : a->max_instances;
        if ((e->agents[i] = tg_mcp_agent_new(e, a, max, err)) == NULL) {
            eng_free(e);
            return NULL;
        }
    }
    /* The Unix listeners' connections, counted here (an HTTP listener's
     * are its front's). */
    for (size_t i = 0; i < e->nls; i++) {
        const tg_listen_cfg_t *lc = &cfg->listen[i];
        e->ls[i].reg = -1;
        if (lc->dialect != TG_DIALECT_MCP || lc->http_addr != NULL)
            continue;
        char name[TG_LIMIT_NAME_MAX];
        snprintf(name, sizeof(name), "listen.%zu.connections", i);
        e->ls[i].reg = tg_registry_add(&gw->reg, name, TG_LIMIT_CONCURRENCY, "instance",
                                       lc->max_connections ? lc->max_connections
                                                           : TG_DEF_LISTEN_MAX_CONNECTIONS);
    }
    return e;
}

static void eng_start(void *arg)
{
    (void)arg; /* an instance starts with its session */
}

/* The engine is done: shut down with no session left, or wrap's one
 * ended. Its agents' timers close; the runner is told once. */
static void eng_maybe_done(tg_mcp_eng_t *e)
{
    if (e->done || e->nsessions > 0 || (!e->stopping && !e->gw->wrap_mode))
        return;
    e->done = true;
    for (size_t i = 0; i < e->nagents; i++)
        if (e->agents[i] != NULL)
            tg_mcp_agent_close_timers(e->agents[i]);
    if (e->env.on_done != NULL)
        e->env.on_done(e->env.arg, e->exit_code);
}

void mcp_eng_session_gone(tg_mcp_eng_t *e, mcp_sess_t *w)
{
    if (w->listener >= 0) {
        mcp_listener_t *l = &e->ls[w->listener];
        if (l->nconn > 0)
            tg_registry_update(&e->gw->reg, l->reg, --l->nconn);
    }
    eng_maybe_done(e);
}

/* The agent a listener serves: by its id (the set of agents does not
 * change on reload, their generations do). */
static tg_mcp_agent_t *agent_named(const tg_mcp_eng_t *e, const char *id)
{
    for (size_t i = 0; id != NULL && i < e->nagents; i++)
        if (e->agents[i] != NULL && strcmp(tg_mcp_agent_id(e->agents[i]), id) == 0)
            return e->agents[i];
    return NULL;
}

/* The agents of a listener's hub, in its order, into <out>: its "agents"
 * list, or its one "agent" when a policy must be applied (a hub of one,
 * names kept verbatim); 0 when the listener needs no hub. */
static size_t hub_agents(const tg_mcp_eng_t *e, const tg_listen_cfg_t *lc, tg_mcp_agent_t **out)
{
    if (lc->nagents == 0) {
        out[0] = agent_named(e, lc->agent);
        return e->policy != NULL && out[0] != NULL ? 1 : 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < lc->nagents && n < TG_CFG_AGENTS_MAX; i++)
        if ((out[n] = agent_named(e, lc->agents[i])) != NULL)
            n++;
    return n;
}

/* wrap: one hub of every MCP agent of the config when it has several (or
 * a policy to apply), else the classic session of agents[0]. */
static int accept_stdio_hub(tg_mcp_eng_t *e, char *why, size_t cap)
{
    tg_mcp_agent_t *legs[TG_CFG_AGENTS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < e->nagents && n < TG_CFG_AGENTS_MAX; i++)
        if (e->agents[i] != NULL)
            legs[n++] = e->agents[i];
    tg_mcp_sess_t *s = n > 0 ? tg_mcp_sess_stdio(e->gw, legs[0]) : NULL;
    mcp_hub_t *h = s != NULL ? mcp_hub_new(e, s, legs, n, NULL, e->nagents == 1) : NULL;
    if (h == NULL) {
        snprintf(why, cap, "cannot open the stdio session");
        if (s != NULL) {
            mcp_begin_shutdown(s, "out of memory");
            mcp_finish(s);
        }
        return -EINVAL;
    }
    if (mcp_hub_start(h) < 0 && e->exit_code == 0)
        e->exit_code = 127;
    return 0;
}

static int accept_stdio(tg_mcp_eng_t *e, char *why, size_t cap)
{
    if (e->nagents > 1 || (e->nagents == 1 && e->policy != NULL))
        return accept_stdio_hub(e, why, cap);
    tg_mcp_sess_t *s = e->nagents > 0 && e->agents[0] != NULL
                           ? tg_mcp_sess_stdio(e->gw, e->agents[0])
                           : NULL;
    if (s == NULL) {
        snprintf(why, cap, "cannot open the stdio session");
        return -EINVAL;
    }
    if (tg_mcp_sess_start(s) < 0 && e->exit_code == 0)
        e->exit_code = 127;
    return 0;
}

static int eng_accept(void *arg, uv_pipe_t *conn, const tg_peer_t *peer, char *why, size_t cap)
{
    tg_mcp_eng_t *e = arg;
    if (peer->front == TG_FRONT_STDIO)
        return accept_stdio(e, why, cap);
    const tg_listen_cfg_t *lc = peer->lc;
    const char *first = tg_listen_first_agent(lc);
    tg_mcp_agent_t *ag = agent_named(e, first);
    bool unix_conn = peer->front == TG_FRONT_UNIX;
    const char *agent = ag != NULL ? tg_mcp_agent_id(ag) : first;
    char detail[160], path[64];
    if (e->stopping || ag == NULL) {
        snprintf(why, cap, "toolgate is shutting down");
        if (unix_conn)
            refuse(e, conn, peer, TG_DENY_SHUTTING_DOWN, "shutdown", agent, TG_DENY_ABSENT,
                   TG_DENY_ABSENT, NULL, why);
        return unix_conn ? 0 : -ESHUTDOWN;
    }
    mcp_listener_t *l = unix_conn ? &e->ls[peer->listener] : NULL;
    if (unix_conn && peer->not_allowed) {
        snprintf(detail, sizeof(detail),
                 "peer uid %ld gid %ld matches no callers[] entry and router.callers_only is true",
                 peer->uid, peer->gid);
        refuse(e, conn, peer, TG_DENY_CALLER, "caller", agent, TG_DENY_ABSENT, TG_DENY_ABSENT,
               "callers", detail);
        return 0;
    }
    /* Instances are counted at initialize (the agent's pool); connections
     * here, so idle ones cannot hold instances nor grow without bound. */
    uint32_t maxc = unix_conn && lc->max_connections ? lc->max_connections
                                                     : TG_DEF_LISTEN_MAX_CONNECTIONS;
    if (unix_conn && l->nconn >= maxc) {
        snprintf(path, sizeof(path), "router.listen[%zu].max_connections", peer->listener);
        snprintf(detail, sizeof(detail), "%u connections open, the most allowed", l->nconn);
        refuse(e, conn, peer, TG_DENY_CONCURRENCY, "connections", agent, (int64_t)l->nconn + 1,
               (int64_t)maxc, path, detail);
        return 0;
    }
    tg_mcp_agent_t *legs[TG_CFG_AGENTS_MAX];
    size_t nlegs = hub_agents(e, lc, legs);
    tg_mcp_sess_t *s = tg_mcp_sess_conn(e->gw, ag, conn, peer->caller, peer->lim);
    if (s == NULL) {
        snprintf(why, cap, "cannot open a session (out of memory)");
        if (!unix_conn)
            return -ENOMEM;
        conn_drop(e, conn);
        return 0;
    }
    tg_mcp_sess_set_origin(s, unix_conn ? "unix" : "http", peer->remote, peer->session);
    if (unix_conn) {
        s->listener = (int)peer->listener;
        tg_registry_update(&e->gw->reg, l->reg, ++l->nconn);
    }
    if (nlegs == 0) {
        (void)tg_mcp_sess_start(s);
        return 0;
    }
    mcp_hub_t *h = mcp_hub_new(e, s, legs, nlegs, peer, lc->nagents == 0);
    if (h == NULL) {
        mcp_begin_shutdown(s, "out of memory");
        mcp_finish(s);
        return 0;
    }
    (void)mcp_hub_start(h);
    return 0;
}

static void eng_shutdown(void *arg, const char *why)
{
    tg_mcp_eng_t *e = arg;
    e->stopping = true;
    /* A session may end (and unlink itself) inside shutdown: walk a copy. */
    size_t n = 0;
    tg_mcp_sess_t **snap = calloc(e->nsessions + 1, sizeof(*snap));
    for (mcp_sess_t *w = e->sessions; snap != NULL && w != NULL; w = w->next)
        snap[n++] = w;
    for (size_t i = 0; i < n; i++)
        tg_mcp_sess_shutdown(snap[i], why);
    free(snap);
    eng_maybe_done(e);
}

static void eng_kill(void *arg)
{
    tg_mcp_eng_t *e = arg;
    for (mcp_sess_t *w = e->sessions; w != NULL; w = w->next)
        tg_mcp_sess_kill(w);
}

static size_t eng_callers(const void *arg)
{
    const tg_mcp_eng_t *e = arg;
    return e->nsessions;
}

static bool eng_idle(const void *arg)
{
    const tg_mcp_eng_t *e = arg;
    return e->nsessions == 0;
}

/* Reload agent <na>: limits in place when they can be; anything else (and
 * limits that cannot: the tools, the call table's size) by a successor
 * agent that takes new connections, while the old one's sessions run on
 * with their instance and its limits until their caller leaves or
 * router.reload_drain_timeout passes (tg_mcp_sess_replaced); the old agent
 * is freed once none refers to it, then <release>(<old>). wrap has no
 * second session to hand a successor to: -EAGAIN. */
static int eng_reconfigure(void *arg, tg_agent_cfg_t *na, tg_cfg_need_t need,
                           void (*release)(void *old), void *old_ref, tg_err_t *err)
{
    tg_mcp_eng_t *e = arg;
    size_t i = 0;
    while (i < e->nagents && (e->agents[i] == NULL || strcmp(tg_mcp_agent_id(e->agents[i]), na->id) != 0))
        i++;
    if (i == e->nagents)
        return tg_err_set(err, -ENOENT, "agents.%s: no such MCP agent runs", na->id);
    tg_mcp_agent_t *old = e->agents[i];
    bool same_spawn = need == TG_NEED_LIVE;
    if (same_spawn) {
        int rc = tg_mcp_agent_reconfigure(old, na, err);
        if (rc == 0) {
            tg_log("SIGHUP: agent '%s': limits updated in place", na->id);
            return TG_RECONF_RELEASED;
        }
        if (e->gw->wrap_mode)
            return rc;
    } else if (e->gw->wrap_mode) {
        return tg_err_set(err, -EAGAIN, "agents.%s: only a restart can apply it", na->id);
    }
    tg_mcp_agent_t *ag = tg_mcp_agent_successor(old, na, err);
    if (ag == NULL)
        return -1;
    e->agents[i] = ag;
    /* The old agent's sessions are its pool's places of the generation
     * before: the pool asks each to drain (mcp_pool_drain), once. */
    old->successor = ag;
    uint64_t drain_ms = e->gw->reload_drain_timeout_ms;
    uint32_t moved = 0;
    uint32_t kept = tg_apool_reload(ag->pool, na->max_instances, &moved);
    char ends[64];
    if (drain_ms == 0)
        snprintf(ends, sizeof(ends), "drained now");
    else
        tg_unit_fmt_duration(ends, sizeof(ends), drain_ms);
    tg_log("SIGHUP: agent '%s': %s changed: %zu session(s) keep the old config (%s%s), new "
           "connections get the new config",
           na->id, same_spawn ? "its call table size" : "command, environment or resources",
           (size_t)kept, drain_ms == 0 ? "" : "router.reload_drain_timeout ", ends);
    tg_mcp_agent_retire(old, release, old_ref);
    return TG_RECONF_LATER;
}

const tg_dialect_ops_t tg_mcp_dialect = {
    .name = "mcp",
    .dialect = TG_DIALECT_MCP,
    .open = eng_open,
    .start = eng_start,
    .accept = eng_accept,
    .shutdown = eng_shutdown,
    .reconfigure = eng_reconfigure,
    .policy = eng_policy,
    .callers = eng_callers,
    .kill = eng_kill,
    .idle = eng_idle,
    .free = eng_free,
};
