/* The MCP engine's lifecycle (see session.c for the invariants): a
 * session's shutdown and end, the tick, stdio setup, agents (made,
 * reconfigured, succeeded, retired) and the sessions' API. */
#include "router/dialect/mcp/session_impl.h"
#include "router/gateway/list.h"

static void report_stderr_drops(mcp_sess_t *w);

/* ---- shutdown --------------------------------------------------------- */

static void on_phase_timer(uv_timer_t *t);

static void stop_agent_step(mcp_sess_t *w)
{
    mcp_inst_t *inst = w->inst;
    if (inst == NULL || inst->a.p.gone) {
        w->phase = TG_P_DONE;
        mcp_finish(w);
        return;
    }
    if (tg_ainst_stop_step(&inst->a, &w->phase, "shutdown"))
        uv_timer_start(&w->phase_timer, on_phase_timer, w->ag->r.acfg->kill_grace_ms, 0);
}

static void on_phase_timer(uv_timer_t *t)
{
    mcp_sess_t *w = t->data;
    stop_agent_step(w);
    mcp_flush_all(w);
}

void mcp_check_drained(mcp_sess_t *w)
{
    if (w->phase == TG_P_DRAIN && mcp_busy_calls(w) == 0) {
        uv_timer_stop(&w->phase_timer);
        stop_agent_step(w);
    }
}

void mcp_begin_shutdown(mcp_sess_t *w, const char *why)
{
    if (w->phase != TG_P_RUN)
        return;
    w->phase = TG_P_DRAIN;
    if (w->hub != NULL && w->leg == 0)
        mcp_hub_shutdown(w->hub, why, false); /* the lead reads the caller: the hub ends */
    if (w->gw->wrap_mode) {
        /* In wrap mode the session is the router; in serve mode a caller
         * leaving is not the router stopping. */
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "router.stopping";
        ev.reason = why;
        ev.count = (int64_t)mcp_busy_calls(w);
        emit(w, &ev);
    }
    tg_restarter_stop(&w->rst);
    if (w->astate == TG_AGENT_BACKOFF || w->inst == NULL) {
        w->phase = TG_P_DONE;
        mcp_finish(w);
        return;
    }
    uv_timer_start(&w->phase_timer, on_phase_timer, w->ag->r.acfg->kill_grace_ms, 0);
    mcp_check_drained(w);
}

/* Drop one hold on session <w> (a handle of its own, or its agent
 * instance); the last frees it and tells the gateway. */
void mcp_sess_release(mcp_sess_t *w)
{
    if (--w->open_handles > 0)
        return;
    tg_gw_t *gw = w->gw;
    tg_mcp_eng_t *e = w->ag->eng;
    TG_LIST_UNLINK(e->sessions, w, prev, next);
    e->nsessions--;
    tg_gw_conn_ended(gw);
    tg_audit_room_cancel(&w->audit_room);
    tg_in_free(&w->crd);
    tg_out_free(&w->cwr);
    free(w->init_frame);
    json_decref(w->b26_init);
    free(w->initd_frame);
    mcp_tasks_free(w);
    tg_toolreg_free(&w->tools);
    free(w->conn);
    tg_apool_leave(&w->pm);
    tg_mcp_agent_t *ag = w->ag;
    mcp_eng_session_gone(e, w);
    if (w->hub != NULL)
        mcp_hub_released(w);
    free(w);
    ag->nsess--;
    mcp_agent_maybe_reap(ag);
}

static void sess_handle_closed(uv_handle_t *h)
{
    mcp_sess_release(h->data);
}

/* Everything is answered and the agent is gone (or being closed): close
 * the session's own handles once the caller's output is written; the last
 * close frees the session and tells the gateway. */
void mcp_finish(mcp_sess_t *w)
{
    w->phase = TG_P_DONE;
    if (w->inst != NULL && !w->inst->a.p.gone) {
        /* The agent still runs: escalate until its exit brings us back. */
        if (!uv_is_active((uv_handle_t *)&w->phase_timer)) {
            w->phase = TG_P_DRAIN;
            stop_agent_step(w);
        }
        return;
    }
    if (w->hub == NULL && !mcp_cdead(w) && (w->cw->queued_bytes > 0 || w->cw->npieces > 0)) {
        (void)tg_out_flush(w->cw);
        if (w->cw->queued_bytes > 0)
            return; /* caller_out_drain calls us again */
    }
    if (w->finished)
        return;
    w->finished = true;
    uv_timer_stop(&w->phase_timer);
    tg_restarter_stop(&w->rst);
    if (w->hub == NULL)
        w->cw->stream = NULL;
    uv_timer_stop(&w->idle_timer);
    uv_timer_stop(&w->life_timer);
    uv_handle_t *hs[] = {(uv_handle_t *)&w->phase_timer, (uv_handle_t *)&w->rst.timer,
                         (uv_handle_t *)&w->idle_timer, (uv_handle_t *)&w->life_timer};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (!uv_is_closing(hs[i]))
            uv_close(hs[i], sess_handle_closed);
    if (w->hub == NULL)
        mcp_sess_close_caller(w);
    else
        mcp_hub_maybe_end(w->hub); /* the hub closes the caller after its last leg */
}

void mcp_sess_close_caller(mcp_sess_t *w)
{
    uv_handle_t *in = (uv_handle_t *)w->cin, *out = (uv_handle_t *)w->cout;
    if (in != NULL && !uv_is_closing(in))
        uv_close(in, sess_handle_closed);
    if (out != NULL && out != in && !uv_is_closing(out))
        uv_close(out, sess_handle_closed);
}

/* Say how much agent stderr was dropped since the last report. */
static void report_stderr_drops(mcp_sess_t *w)
{
    tg_agent_report_drops(w->ag->r.acfg, &w->err, &w->err_dropped_reported);
}

/* Restarts of <w>'s agent within restart.window before <now>: what its
 * restarter holds against max_restarts. */
uint32_t mcp_recent_restarts(const mcp_sess_t *w, uint64_t now)
{
    return tg_restarts_recent(&w->rst.rs, w->ag->r.acfg, now);
}

/* The gateway's tick: report stderr drops and age out restarts: each
 * agent's restarts entry shows the live session with the most restarts
 * within the window (sessions are per caller in serve, and each has its
 * own budget). */
void mcp_eng_tick(tg_mcp_eng_t *e, uint64_t now)
{
    for (mcp_sess_t *w = e->sessions; w != NULL; w = w->next) {
        report_stderr_drops(w);
        w->ag->tick_restarts = 0;
    }
    for (mcp_sess_t *w = e->sessions; w != NULL; w = w->next) {
        uint32_t n = mcp_recent_restarts(w, now);
        if (n > w->ag->tick_restarts)
            w->ag->tick_restarts = n;
    }
    for (mcp_sess_t *w = e->sessions; w != NULL; w = w->next)
        reg_set(w, w->ag->reg_restarts, w->ag->tick_restarts);
}

/* ---- setup ------------------------------------------------------------ */

/* Open toolgate's own fd <fd> (0 or 1) as a tty or a pipe into <tty> or
 * <pipe>; NULL when it is neither (then *<type> says what it is). */
static uv_stream_t *open_std(mcp_sess_t *w, int fd, uv_tty_t *tty, uv_pipe_t *pipe,
                             uv_handle_type *type)
{
    uv_stream_t *s = NULL;
    *type = uv_guess_handle(fd);
    if (*type == UV_TTY) {
        uv_tty_init(w->gw->loop, tty, fd, fd == 0);
        s = (uv_stream_t *)tty;
    } else if (*type == UV_NAMED_PIPE) {
        uv_pipe_init(w->gw->loop, pipe, 0);
        if (uv_pipe_open(pipe, fd) < 0)
            return NULL;
        s = (uv_stream_t *)pipe;
        tg_pipe_enlarge(fd, TG_APROC_PIPE_BYTES);
    }
    if (s != NULL)
        s->data = w;
    return s;
}

static int open_caller(mcp_sess_t *w)
{
    uv_handle_type t;
    if ((w->cin = open_std(w, 0, &w->cin_tty, &w->cin_pipe, &t)) == NULL) {
        if (t != UV_NAMED_PIPE)
            tg_log_error(
                "stdin is %s; toolgate wrap reads MCP frames from a pipe or terminal (as MCP "
                "clients launch servers)",
                t == UV_FILE ? "a regular file" : "not a pipe");
        return -EINVAL;
    }
    if ((w->cout = open_std(w, 1, &w->cout_tty, &w->cout_pipe, &t)) == NULL) {
        if (t != UV_NAMED_PIPE)
            tg_log_error("stdout is %s; toolgate wrap writes MCP frames to a pipe or terminal",
                         t == UV_FILE ? "a regular file" : "not a pipe");
        return -EINVAL;
    }
    w->cw->stream = w->cout;
    return 0;
}


/* The MCP engine's own rows, beside the route's. */
static void register_limits(tg_mcp_agent_t *ag)
{
    const tg_agent_cfg_t *a = ag->r.acfg;
    char name[TG_LIMIT_NAME_MAX];
    /* Each session's instance has its own restart budget. */
    ag->reg_restarts = tg_restarts_register(&ag->gw->reg, a, "session");
    /* max_instances is enforced by serve only (wrap runs one instance). */
    ag->reg_instances = -1;
    if (!ag->gw->wrap_mode) {
        snprintf(name, sizeof(name), "agent.%s.instances", a->id);
        ag->reg_instances = tg_registry_upsert(&ag->gw->reg, name, TG_LIMIT_CONCURRENCY,
                                               "agent", a->max_instances);
    }
}

/* ---- public API: gateway, agents, sessions ------------------------------ */

static const tg_apool_ops_t pool_ops;

/* An agent for <acfg> at metrics row <idx>. NULL with <err> filled. */
static tg_mcp_agent_t *agent_make(tg_mcp_eng_t *e, tg_agent_cfg_t *acfg, size_t idx,
                                  uint32_t max_sessions, tg_err_t *err)
{
    tg_gw_t *gw = e->gw;
    tg_mcp_agent_t *ag = calloc(1, sizeof(*ag));
    if (ag == NULL) {
        tg_err_set(err, -ENOMEM, "agents.%s: out of memory", acfg->id);
        return NULL;
    }
    ag->gw = gw;
    ag->eng = e;
    ag->r.ops = mcp_call_ops();
    tg_dlt_init(&ag->r.dlt, tg_pipe_deadline, ag);
    ag->max_sessions = max_sessions;
    /* The table holds every entry the limits allow: inflight and zombie
     * calls (<= max_concurrent, each with at most one ping), queued calls,
     * and per session its pass-through requests and replayed initialize. */
    uint64_t n = 2ull * acfg->lim.max_concurrent_calls + acfg->lim.max_queued_calls +
                 (uint64_t)max_sessions * (TG_MAX_PASSTHRU + 2) + TG_RELOAD_SPARE_CALLS;
    /* Ids fitted to twice that: short in every frame, and room for a
     * reload to raise the limits in place (beyond it, a successor). */
    uint32_t fit = n > TG_CALL_MAX / 2 ? TG_CALL_MAX : (uint32_t)(2 * n);
    if (tg_route_setup(&ag->r, gw, acfg, idx, sizeof(mcp_call_t), n, fit, err) < 0) {
        tg_mcp_agent_free(ag);
        return NULL;
    }
    register_limits(ag);
    return ag;
}

tg_mcp_agent_t *tg_mcp_agent_new(tg_mcp_eng_t *e, tg_agent_cfg_t *acfg, uint32_t max_sessions,
                                 tg_err_t *err)
{
    tg_gw_t *gw = e->gw;
    tg_mcp_agent_t *ag = agent_make(e, acfg, (size_t)(acfg - gw->cfg->agents), max_sessions, err);
    /* serve: the instances of its sessions are the agent's pool, bounded
     * by max_instances (wrap runs one). */
    if (ag != NULL && !gw->wrap_mode) {
        if ((ag->pool = malloc(sizeof(*ag->pool))) == NULL) {
            tg_err_set(err, -ENOMEM, "agents.%s: out of memory", acfg->id);
            tg_mcp_agent_free(ag);
            return NULL;
        }
        tg_apool_init(ag->pool, TG_BIND_SESSION, acfg->max_instances, &pool_ops, &gw->reg,
                      ag->reg_instances);
        ag->pool->refs = 1;
    }
    return ag;
}

void tg_mcp_agent_close_timers(tg_mcp_agent_t *ag)
{
    for (uint32_t i = 0; i < ag->r.tab.n; i++)
        if (mcp_call_at(ag, i)->cc.own.ready)
            tg_handle_close((uv_handle_t *)&mcp_call_at(ag, i)->cc.own.timer);
    if (ag->r.fleet_timer_ready)
        tg_handle_close((uv_handle_t *)&ag->r.fleet_timer);
    if (ag->r.dlt.ready)
        tg_handle_close((uv_handle_t *)&ag->r.dlt.timer);
}

void tg_mcp_agent_free(tg_mcp_agent_t *ag)
{
    if (ag == NULL)
        return;
    if (ag->pool != NULL && --ag->pool->refs == 0)
        free(ag->pool);
    tg_route_fini(&ag->r);
    free(ag);
}

/* ---- reload ----------------------------------------------------------- */

int tg_mcp_agent_reconfigure(tg_mcp_agent_t *ag, tg_agent_cfg_t *acfg, tg_err_t *err)
{
    const tg_agent_cfg_t *o = ag->r.acfg;
    if (acfg->rate_shared != o->rate_shared || acfg->shared_lease != o->shared_lease ||
        acfg->conc_shared != o->conc_shared)
        return tg_err_set(err, -EAGAIN, "agents.%s.execution_limits: a scope changed", acfg->id);
    if (acfg->ntools != o->ntools)
        return tg_err_set(err, -EAGAIN, "agents.%s.tools: a tool added or removed", acfg->id);
    for (size_t i = 0; i < acfg->ntools; i++)
        if (strcmp(acfg->tools[i].name, o->tools[i].name) != 0 ||
            acfg->tools[i].lim.rate_shared != o->tools[i].lim.rate_shared)
            return tg_err_set(err, -EAGAIN, "agents.%s.tools.%s: renamed, moved or its scope changed",
                              acfg->id, acfg->tools[i].name);
    /* The table grows in place (its chunks never move); it is left
     * larger when a later step fails, which is harmless. */
    uint64_t need = 2ull * acfg->lim.max_concurrent_calls + acfg->lim.max_queued_calls +
                    (uint64_t)ag->max_sessions * (TG_MAX_PASSTHRU + 2);
    if (need > (UINT64_C(1) << ag->r.tab.bits) || ag->r.aq.count > acfg->lim.max_queued_calls)
        return tg_err_set(err, -EAGAIN,
                          "agents.%s.execution_limits: the call table or the queue's calls "
                          "outgrow the new limits",
                          acfg->id);
    if (tg_ctab_grow(&ag->r.tab, (uint32_t)need) < 0)
        return tg_err_set(err, -ENOMEM, "agents.%s: out of memory", acfg->id);
    tg_gcra_t arate = ag->r.arate;
    if (!tg_route_same_rate(&o->lim, &acfg->lim) &&
        tg_gcra_init(&arate, acfg->lim.rate_limit.count, acfg->lim.rate_limit.period_ms,
                     acfg->lim.burst) < 0)
        return tg_err_set(err, -EINVAL,
                          "agents.%s.execution_limits.rate_limit: cannot be set up as a bucket",
                          acfg->id);
    if (acfg->lim.max_queued_calls != ag->r.aq.cap &&
        tg_waitq_resize(&ag->r.aq, acfg->lim.max_queued_calls) < 0)
        return tg_err_set(err, -ENOMEM, "agents.%s: out of memory", acfg->id);
    /* Nothing fails from here on: the new limits apply as a whole. */
    ag->r.arate = arate;
    ag->r.aconc.max = acfg->lim.max_concurrent_calls;
    ag->r.qcap = acfg->lim.max_queued_calls;
    for (size_t i = 0; i < acfg->ntools; i++) {
        tool_state_t *t = &ag->r.tools[i];
        const tg_exec_limits_t *l = &acfg->tools[i].lim, *ol = &o->tools[i].lim;
        if (l->rate_src == TG_SRC_DEFAULT) {
            t->has_rate = false;
        } else if (!t->has_rate || !tg_route_same_rate(ol, l)) {
            t->has_rate = tg_gcra_init(&t->rate, l->rate_limit.count, l->rate_limit.period_ms,
                                       l->burst_src != TG_SRC_DEFAULT ? l->burst : 0) == 0;
        }
        if (l->concurrent_src == TG_SRC_DEFAULT) {
            t->has_conc = false;
        } else {
            /* The counter is kept across a removal and a return of the
             * limit: calls that took a slot before still give it back
             * through it. Calls started while the tool had no limit hold
             * no slot and are not counted (until they end). */
            t->conc.max = l->max_concurrent_calls;
            t->has_conc = true;
        }
        t->has_queue = l->queued_src != TG_SRC_DEFAULT;
        t->max_queued = l->max_queued_calls;
        /* A limit dropped takes its count out of its row (kept: the row
         * follows its count again at the next call). */
        if (!t->has_conc)
            tg_registry_share(&ag->gw->reg, t->reg_conc, &t->sh_conc, 0);
        if (!t->has_queue)
            tg_registry_share(&ag->gw->reg, t->reg_queue, &t->sh_queue, 0);
    }
    ag->r.acfg = acfg;
    tg_route_register(&ag->r);
    register_limits(ag);
    if (ag->pool != NULL)
        ag->pool->max_instances = acfg->max_instances;
    /* Raised caps may let queued calls run now. */
    for (mcp_sess_t *w = ag->eng->sessions; w != NULL; w = w->next)
        if (w->ag == ag) {
            tg_pipe_pump(&w->ag->r, w);
            mcp_flush_all(w);
            break;
        }
    return 0;
}

tg_mcp_agent_t *tg_mcp_agent_successor(tg_mcp_agent_t *old, tg_agent_cfg_t *acfg, tg_err_t *err)
{
    tg_mcp_agent_t *ag = agent_make(old->eng, acfg, old->r.idx, old->max_sessions, err);
    if (ag == NULL)
        return NULL;
    /* The pool is the agent's across generations: the old sessions keep
     * their instances counted, the cap is the new one's. */
    if ((ag->pool = old->pool) != NULL) {
        ag->pool->refs++;
        ag->pool->max_instances = acfg->max_instances;
    }
    /* Bucket state survives for the rates that did not change (a local
     * bucket; a shared one lives in the store under the same key). */
    if (!acfg->rate_shared && !old->r.acfg->rate_shared && tg_route_same_rate(&old->r.acfg->lim, &acfg->lim))
        ag->r.arate = old->r.arate;
    for (size_t i = 0; i < acfg->ntools; i++)
        for (size_t j = 0; j < old->r.acfg->ntools; j++)
            if (strcmp(acfg->tools[i].name, old->r.acfg->tools[j].name) == 0 &&
                ag->r.tools[i].has_rate && old->r.tools[j].has_rate &&
                tg_route_same_rate(&acfg->tools[i].lim, &old->r.acfg->tools[j].lim))
                ag->r.tools[i].rate = old->r.tools[j].rate;
    return ag;
}

/* Unlink retired agent <ag> from its gateway and free it. */
static void agent_reap(tg_mcp_agent_t *ag)
{
    for (tg_mcp_agent_t **p = &ag->eng->retired; *p != NULL; p = &(*p)->next_retired)
        if (*p == ag) {
            *p = ag->next_retired;
            break;
        }
    void (*cb)(void *) = ag->on_free;
    void *arg = ag->on_free_arg;
    tg_mcp_agent_free(ag);
    if (cb != NULL)
        cb(arg);
}

void mcp_eng_reap_retired(tg_mcp_eng_t *e)
{
    while (e->retired != NULL)
        agent_reap(e->retired);
}

static void retired_timer_closed(uv_handle_t *h)
{
    tg_mcp_agent_t *ag = h->data;
    if (--ag->closing == 0)
        agent_reap(ag);
}

/* A retired agent with no session and no store answer outstanding: close
 * its call timers, then free it (now, or when the last timer has closed). */
void mcp_agent_maybe_reap(tg_mcp_agent_t *ag)
{
    /* At teardown every handle is being closed by the walk: the gateway
     * frees what is left once those closes have run. */
    if (!ag->retired || ag->nsess > 0 || ag->r.nstore_wait > 0 || ag->closing > 0 ||
        ag->gw->tearing_down)
        return;
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        uv_timer_t *t = &mcp_call_at(ag, i)->cc.own.timer;
        if (mcp_call_at(ag, i)->cc.own.ready && !uv_is_closing((uv_handle_t *)t)) {
            t->data = ag;
            ag->closing++;
            uv_close((uv_handle_t *)t, retired_timer_closed);
        }
    }
    if (ag->r.fleet_timer_ready && !uv_is_closing((uv_handle_t *)&ag->r.fleet_timer)) {
        ag->closing++; /* its data is <ag> already */
        uv_close((uv_handle_t *)&ag->r.fleet_timer, retired_timer_closed);
    }
    if (ag->r.dlt.ready && !uv_is_closing((uv_handle_t *)&ag->r.dlt.timer)) {
        ag->closing++; /* its data is <ag> already */
        uv_close((uv_handle_t *)&ag->r.dlt.timer, retired_timer_closed);
    }
    if (ag->closing == 0)
        agent_reap(ag);
}

void tg_mcp_agent_retire(tg_mcp_agent_t *ag, void (*on_free)(void *arg), void *arg)
{
    ag->retired = true;
    ag->r.retired = true;
    ag->on_free = on_free;
    ag->on_free_arg = arg;
    ag->next_retired = ag->eng->retired;
    ag->eng->retired = ag;
    mcp_agent_maybe_reap(ag);
}

const tg_agent_cfg_t *tg_mcp_agent_cfg(const tg_mcp_agent_t *ag)
{
    return ag->r.acfg;
}

const char *tg_mcp_agent_id(const tg_mcp_agent_t *ag)
{
    return ag->r.acfg->id;
}

static mcp_sess_t *sess_alloc(tg_gw_t *gw, tg_mcp_agent_t *ag, const char *caller)
{
    mcp_sess_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->gw = gw;
    w->ag = ag;
    ag->nsess++;
    snprintf(w->caller, sizeof(w->caller), "%s", caller);
    tg_in_init(&w->crd, &gw->pool, gw->cfg->max_frame_bytes);
    tg_toolreg_init(&w->tools, TG_MCP_TOOLS_MAX);
    tg_out_init(&w->cwr, &gw->pool);
    w->cw = &w->cwr;
    w->cw->ctx = w;
    w->cw->on_drain = mcp_caller_out_drain;
    w->cw->on_error = mcp_caller_out_error;
    tg_restarter_init(&w->rst, gw->loop, &mcp_restart_ops, w);
    uv_timer_init(gw->loop, &w->phase_timer);
    uv_timer_init(gw->loop, &w->idle_timer);
    uv_timer_init(gw->loop, &w->life_timer);
    w->phase_timer.data = w->idle_timer.data = w->life_timer.data = w;
    w->open_handles = 4;
    tg_mcp_eng_t *e = ag->eng;
    w->listener = -1;
    TG_LIST_PUSH(e->sessions, w, prev, next);
    e->nsessions++;
    return w;
}

mcp_sess_t *tg_mcp_sess_stdio(tg_gw_t *gw, tg_mcp_agent_t *ag)
{
    mcp_sess_t *w = sess_alloc(gw, ag, "stdio");
    if (w == NULL)
        return NULL;
    w->origin = "stdio";
    int rc = open_caller(w);
    w->open_handles += (w->cin != NULL) + (w->cout != NULL && w->cout != w->cin);
    if (rc < 0) {
        mcp_finish(w);
        return NULL;
    }
    return w;
}

mcp_sess_t *tg_mcp_sess_conn(tg_gw_t *gw, tg_mcp_agent_t *ag, uv_pipe_t *conn, const char *caller,
                        tg_caller_lim_t *climits)
{
    mcp_sess_t *w = sess_alloc(gw, ag, caller);
    if (w == NULL)
        return NULL;
    w->climits = climits;
    w->origin = "unix";
    if (ag->pool != NULL)
        tg_apool_join(ag->pool, &w->pm, w->caller, false);
    w->conn = conn;
    w->cin = w->cout = (uv_stream_t *)conn;
    conn->data = w;
    w->cw->stream = w->cout;
    w->open_handles += 1;
    return w;
}

mcp_sess_t *mcp_sess_leg(mcp_sess_t *lead, tg_mcp_agent_t *ag)
{
    mcp_sess_t *w = sess_alloc(lead->gw, ag, lead->caller);
    if (w == NULL)
        return NULL;
    w->climits = lead->climits;
    w->origin = lead->origin;
    snprintf(w->remote, sizeof(w->remote), "%s", lead->remote);
    snprintf(w->sdigest, sizeof(w->sdigest), "%s", lead->sdigest);
    if (lead->conn != NULL) {
        if (ag->pool != NULL)
            tg_apool_join(ag->pool, &w->pm, w->caller, false);
        w->pm.may_evict = lead->pm.may_evict;
        w->awaiting_init = true;
    }
    return w;
}

static void on_handshake_timeout(uv_timer_t *t);

int tg_mcp_sess_start(mcp_sess_t *w)
{
    if (w->conn != NULL) {
        /* serve: the instance waits for the caller's initialize. */
        w->awaiting_init = true;
        w->life_ms = w->gw->handshake_timeout_ms;
        uv_timer_start(&w->life_timer, on_handshake_timeout, w->life_ms, 0);
        uv_read_start(w->cin, mcp_caller_alloc, mcp_caller_read);
        return 0;
    }
    if (mcp_agent_spawn(w) < 0) {
        mcp_begin_shutdown(w, "agent failed to start");
        mcp_finish(w);
        return -1;
    }
    uv_read_start(w->cin, mcp_caller_alloc, mcp_caller_read);
    return 0;
}

void tg_mcp_sess_shutdown(mcp_sess_t *w, const char *why)
{
    mcp_begin_shutdown(w, why);
    mcp_flush_all(w);
}

bool tg_mcp_sess_stopping(const mcp_sess_t *w)
{
    return w->phase != TG_P_RUN;
}

void tg_mcp_sess_kill(mcp_sess_t *w)
{
    TG_AINST_KILL(w->inst, SIGKILL, "interrupted");
}

/* ---- before the caller's initialize (serve) ----------------------------- */

/* Read nothing more from <w>'s caller: it is being closed. */
static void stop_reading(mcp_sess_t *w)
{
    if (w->cin != NULL && !w->caller_eof)
        uv_read_stop(w->cin);
    w->caller_eof = true;
}

/* No complete initialize within router.handshake_timeout: the connection
 * holds a slot and a buffer for nothing. Told (id null), audited, closed;
 * no instance was ever started for it. */
static void on_handshake_timeout(uv_timer_t *t)
{
    mcp_sess_t *w = t->data;
    if (!w->awaiting_init || w->phase != TG_P_RUN)
        return;
    char msg[160];
    snprintf(msg, sizeof(msg),
             "invalid request: no initialize within %" PRIu64
             " ms (router.handshake_timeout); closing",
             w->life_ms);
    mcp_rpc_error(w, NULL, 0, -32600, msg);
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "handshake_timeout",
                         w->crd.len - w->crd.pos);
    emit(w, &ev);
    stop_reading(w);
    mcp_begin_shutdown(w, "no initialize within router.handshake_timeout");
    mcp_flush_all(w);
}

/* The initialize with id <id> of <w> is refused: <running> instances of
 * its agent run, <cap> the most allowed. Answered with its id, audited,
 * and the session ends (as a connection over max_instances always did). */
static void refuse_instance(mcp_sess_t *w, const char *id, size_t id_len, uint32_t running,
                            uint32_t cap)
{
    tg_denial_t d;
    char reqid[32], path[TG_NAME_MAX + 64], detail[96];
    mcp_denial_init(w, &d, TG_DENY_CONCURRENCY, NULL, reqid, sizeof(reqid));
    d.limit = "instances";
    d.unit = "instances";
    d.observed = (int64_t)running + 1;
    d.cap = (int64_t)cap;
    snprintf(path, sizeof(path), "agents.%s.max_instances", agent_name(w));
    d.config_path = path;
    snprintf(detail, sizeof(detail), "%u instances running, the most allowed", running);
    d.detail = detail;
    mcp_deny(w, id, id_len, &d);
    tg_audit_ev_t ev;
    denied_ev(w, &ev, &d);
    emit(w, &ev);
    stop_reading(w);
    mcp_begin_shutdown(w, "max_instances reached");
}

/* The caller's first initialize: start the instance (when the runner
 * admits one more), then let the usual path forward the request to it (it
 * waits in the instance's input until the process reads it). true when
 * the request was answered here instead. */
static bool start_on_initialize(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env)
{
    uv_timer_stop(&w->life_timer);
    if (w->phase != TG_P_RUN) {
        w->awaiting_init = false;
        return false; /* refused as shutting_down by the usual path */
    }
    uint32_t running = 0, cap = 0;
    bool full = tg_apool_take(&w->pm, uv_now(w->gw->loop), &running, &cap) < 0;
    if (w->hub != NULL && (full || mcp_agent_spawn(w) < 0)) {
        /* A hub's leg: the other agents serve; this one's tools stay out
         * (its hub says so in the answer's _meta). */
        tg_log_warn("agent '%s' could not start for a session of caller %s (%s): its tools are "
                    "left out",
                    agent_name(w), w->caller,
                    full ? "max_instances reached" : "the instance failed to start");
        tg_audit_ev_t ev;
        tg_adm_audit_refused(&ev, agent_name(w), w->caller,
                             full ? "max_instances" : "agent_failed_to_start", 0);
        ev.status = "left_out";
        emit(w, &ev);
        w->leg_failed = true;
        w->awaiting_init = false;
        return true;
    }
    if (full) {
        refuse_instance(w, frame + env->id.off, env->id.len, running, cap);
        return true;
    }
    if (w->hub == NULL && mcp_agent_spawn(w) < 0) {
        tg_denial_t d;
        char reqid[32];
        mcp_denial_init(w, &d, TG_DENY_UNAVAILABLE, NULL, reqid, sizeof(reqid));
        d.limit = "agent";
        d.detail = "agent failed to start";
        mcp_deny(w, frame + env->id.off, env->id.len, &d);
        stop_reading(w);
        mcp_begin_shutdown(w, "agent failed to start");
        return true;
    }
    w->awaiting_init = false;
    return false;
}

/* A caller frame (scanned) of serve session <w> before its initialize:
 * true when it was dealt with here. ping is answered ({} result), the
 * initialize starts the instance, any other request (or batch) gets
 * -32600 (JSON-RPC Invalid Request: MCP clients send nothing but ping
 * before initialize), and notifications and responses have no instance to
 * go to (dropped). */
bool mcp_before_init(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env)
{
    bool request = env->kind == TG_MCP_REQUEST;
    if (request && env->id.len > TG_ID_MAX)
        return false; /* refused for its id by the usual path; nothing reaches an agent */
    if (request && (tg_jstr_eq(frame, env->method, "initialize") ||
                    (w->hub == NULL && tg_jstr_eq(frame, env->method, "server/discover"))))
        return start_on_initialize(w, frame, env); /* (a 2026 client opens with discover) */
    if (request && tg_jstr_eq(frame, env->method, "ping")) {
        char buf[TG_ID_MAX + 64];
        int n = snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{}}\n",
                         (int)env->id.len, frame + env->id.off);
        if (!mcp_cdead(w) && n > 0 && (size_t)n < sizeof(buf))
            (void)tg_out_copy(w->cw, buf, (size_t)n);
        return true;
    }
    if (request || env->kind == TG_MCP_BATCH)
        mcp_rpc_error(w, request ? frame + env->id.off : NULL, request ? env->id.len : 0, -32600,
                      "invalid request: the session is not initialized (send initialize first)");
    return true;
}

void tg_mcp_sess_set_origin(mcp_sess_t *w, const char *front, const char *remote, const char *session)
{
    w->origin = front;
    /* An HTTP client often leaves its session without DELETE: its new
     * session may take the place of its idle one (agent/pool.h). */
    w->pm.may_evict = strcmp(front, "http") == 0;
    /* Only a Unix caller's frames are timed here: wrap's stdin belongs to
     * the client that launched toolgate (it may write as slowly as it
     * likes), and an HTTP session's frames come whole from http.c, whose
     * header_timeout times the client's request. */
    w->frame_clock = w->conn != NULL && strcmp(front, "unix") == 0;
    snprintf(w->remote, sizeof(w->remote), "%s", remote != NULL ? remote : "");
    snprintf(w->sdigest, sizeof(w->sdigest), "%s", session != NULL ? session : "");
}

/* ---- eviction: HTTP sessions their clients left without DELETE ---------- */

uint64_t tg_mcp_sess_evictable(const mcp_sess_t *w, uint64_t now, uint64_t min_idle_ms)
{
    if (!w->pm.counted || w->pm.evicted || w->phase != TG_P_RUN || w->awaiting_init || w->nbusy > 0 ||
        w->batches_open > 0 || strcmp(w->origin, "http") != 0)
        return 0;
    if (now < w->last_frame_ms + min_idle_ms)
        return 0;
    return w->last_frame_ms + 1;
}

/* The pool ended <w> for a new session of its caller: its instance is no
 * longer counted (the new session's takes its place), it is logged and
 * audited (call.denied, reason session_evicted, status ended) and drained
 * like a session whose caller left. Its client gets 404 for the session
 * id and starts a new one, as MCP clients do. */
static void sess_evict(mcp_sess_t *w)
{
    uint64_t idle = uv_now(w->gw->loop) - w->last_frame_ms;
    tg_log("agent '%s': ending a session of caller %s idle for %" PRIu64
           " ms to start a new one of the same caller (max_instances reached)",
           agent_name(w), w->caller, idle);
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "session_evicted", 0);
    ev.status = "ended";
    ev.duration_ms = (int64_t)idle;
    emit(w, &ev);
    tg_mcp_sess_shutdown(w, "session evicted for a new one of its caller");
}

#define EVICT_MIN_IDLE_MS 1000 /* fixed internal bound: an HTTP session idle this long may be evicted */

static uint64_t pool_evictable(tg_pool_member_t *m, uint64_t now)
{
    mcp_sess_t *w = (mcp_sess_t *)((char *)m - offsetof(mcp_sess_t, pm));
    return tg_mcp_sess_evictable(w, now, EVICT_MIN_IDLE_MS);
}

static void pool_evict(tg_pool_member_t *m)
{
    sess_evict((mcp_sess_t *)((char *)m - offsetof(mcp_sess_t, pm)));
}

/* A reload replaced the agent of <m>'s session (tg_apool_reload): it
 * moves to the successor when nothing of the old agent runs in it, else
 * runs on until its caller leaves or router.reload_drain_timeout. */
static bool pool_drain(tg_pool_member_t *m)
{
    mcp_sess_t *w = (mcp_sess_t *)((char *)m - offsetof(mcp_sess_t, pm));
    return tg_mcp_sess_replaced(w, w->ag->successor, w->gw->reload_drain_timeout_ms) == 1;
}

static const tg_apool_ops_t pool_ops = {
    .evictable = pool_evictable, .evict = pool_evict, .drain = pool_drain};

/* ---- reload: sessions of a replaced agent ------------------------------- */

/* A session of a replaced agent ran its router.reload_drain_timeout: it
 * ends as on shutdown (calls in flight answered within kill_grace, new
 * ones refused with shutting_down), audited. */
static void on_drain_timeout(uv_timer_t *t)
{
    mcp_sess_t *w = t->data;
    if (w->phase != TG_P_RUN)
        return;
    tg_log_warn("agent '%s': a session (caller %s) of the config a reload replaced ran "
                "router.reload_drain_timeout (%" PRIu64 " ms): ending it",
                agent_name(w), w->caller, w->life_ms);
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "reload_drain_timeout", 0);
    ev.status = "ended";
    ev.count = (int64_t)mcp_busy_calls(w);
    emit(w, &ev);
    tg_mcp_sess_shutdown(w, "agent config changed by reload");
}

int tg_mcp_sess_replaced(mcp_sess_t *w, tg_mcp_agent_t *ag, uint64_t drain_ms)
{
    if (w->awaiting_init && w->inst == NULL && w->nbusy == 0 && w->phase == TG_P_RUN) {
        /* Nothing of the old agent in use: it is a new connection. */
        w->ag->nsess--;
        mcp_agent_maybe_reap(w->ag);
        w->ag = ag;
        ag->nsess++;
        return 1;
    }
    if (drain_ms == 0) {
        tg_mcp_sess_shutdown(w, "agent config changed by reload");
        return 0;
    }
    if (w->phase == TG_P_RUN && !uv_is_active((uv_handle_t *)&w->life_timer)) {
        w->life_ms = drain_ms;
        uv_timer_start(&w->life_timer, on_drain_timeout, drain_ms, 0);
    }
    return 0;
}
