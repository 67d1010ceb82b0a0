/* The OpenSentience engine's agents (see os_gw.c for the invariants):
 * their frames (hello, register, heartbeat, results, streams), the
 * instance, shutdown, setup, reload and the public API. */
#define _GNU_SOURCE /* explicit_bzero */
#include "router/dialect/opensentience/os_gw_impl.h"
#include "router/gateway/list.h"

static void switch_done(os_agent_t *ag);

/* ---- agent frames ----------------------------------------------------- */

static void agent_invalid_frame(os_agent_t *ag, uint64_t bytes, const char *reason)
{
    ag->invalid_frames++;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "agent.invalid_frame";
    ev.agent = aname(ag);
    ev.reason = reason;
    ev.bytes_out = (int64_t)bytes;
    ev.count = (int64_t)ag->invalid_frames;
    emit(ag->g, &ev);
}

static void agent_event(os_agent_t *ag, const char *event, const char *status, const char *reason)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.agent = aname(ag);
    ev.status = status;
    ev.reason = reason;
    ev.pid = ag->inst != NULL ? ag->inst->a.p.pid : TG_AUDIT_ABSENT;
    emit(ag->g, &ev);
}

static void on_hb_timer(uv_timer_t *t);

/* Reply to agent.hello from <frame>: core.welcome, or a core.welcome
 * carrying the error, after which the instance has kill_grace_period to
 * leave before it is killed. */
static void on_hello(os_agent_t *ag, const char *frame, const tg_os_env_t *env)
{
    tg_osgw_t *g = ag->g;
    os_inst_t *in = ag->inst;
    char buf[1024], id[32];
    tg_os_hdr_t h;
    if (ag->hello_ok) {
        agent_invalid_frame(ag, env->payload.len, "duplicate_hello");
        return;
    }
    memset(&h, 0, sizeof(h));
    h.id = msg_id(g, id);
    h.ts_ms = wall_now_ms();
    h.in_reply_to = tg_os_raw(frame, env->id);
    const char *code = NULL, *msg = NULL, *reason = NULL;
    /* The token first, in constant time: nothing else of an agent that
     * cannot prove it is the process toolgate started is looked at. */
    if (!tg_os_token_ok(frame, env->session_token, ag->token, strlen(ag->token))) {
        code = "protocol.unauthorized";
        msg = "session_token does not match the one toolgate passed in " OS_TOKEN_ENV;
        reason = "bad_session_token";
    } else if (!tg_jstr_eq(frame, env->agent_id, aname(ag))) {
        code = "protocol.agent_mismatch";
        msg = "agent_id is not the id this agent has in toolgate's config";
        reason = "agent_id_mismatch";
    } else if (tg_os_supports_v1(frame, env->versions) != 1) {
        code = "protocol.unsupported_version";
        msg = "toolgate speaks OpenSentience protocol version 1 only";
        reason = "unsupported_version";
    }
    if (code != NULL) {
        long n = tg_os_enc_error(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h,
                                 "core.welcome", code, msg, false);
        osg_send_built(&in->a.p.wr, buf, n);
        tg_log_warn("agent '%s' refused at agent.hello: %s; stopping the instance", aname(ag), msg);
        agent_event(ag, "agent.unhealthy", "rejected", reason);
        in->a.p.killed = true; /* counts as a failure whatever its exit status */
        ag->hello_ok = false;
        uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->kill_grace_ms, 0);
        in->a.p.stdin_closed = true; /* nothing more goes to it */
        return;
    }
    char sid[TG_NAME_MAX + 24];
    snprintf(sid, sizeof(sid), "%s-%u", aname(ag), ag->starts);
    tg_os_welcome_t wel = {.accepted_version = TG_OS_VERSION,
                           .session_id = sid,
                           .heartbeat_interval_ms = ag->r.acfg->os.heartbeat_interval_ms,
                           .max_frame_bytes = g->cfg->max_frame_bytes,
                           .core_version = TG_VERSION,
                           .instance_id = g->cfg->instance};
    long n = tg_os_enc_welcome(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, &wel);
    osg_send_built(&in->a.p.wr, buf, n);
    ag->hello_ok = true;
    /* From now on the heartbeat watch. */
    uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->os.heartbeat_timeout_ms, 0);
}

/* agent.tools.register: check every tool_id and answer
 * core.tools.registered. The first registration makes the agent ready. */
static void on_register(os_agent_t *ag, const char *frame, const tg_os_env_t *env)
{
    tg_osgw_t *g = ag->g;
    os_inst_t *in = ag->inst;
    tg_os_tools_iter_t it;
    tg_jspan_t tid;
    size_t n = 0, nreg = 0, nrej = 0;
    int rc;
    char id[32];
    tg_os_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.id = msg_id(g, id);
    h.ts_ms = wall_now_ms();
    h.in_reply_to = tg_os_raw(frame, env->id);
    tg_os_tools_begin(&it, frame, env->tools);
    while ((rc = tg_os_tools_next(&it, &tid)) == 1)
        n++;
    tg_os_raw_t *regd = calloc(n ? n : 1, sizeof(*regd));
    tg_os_reject_t *rej = calloc(n ? n : 1, sizeof(*rej));
    size_t cap = 256 + n * (OS_REJECT_ECHO_MAX + 6 * TG_OS_TOOL_ID_MAX + 256);
    char *buf = malloc(cap + TG_LENPFX_HDR);
    if (regd == NULL || rej == NULL || buf == NULL) {
        free(regd);
        free(rej);
        free(buf);
        return;
    }
    if (rc < 0) {
        long len = tg_os_enc_error(buf + TG_LENPFX_HDR, cap, &h, "core.tools.registered",
                                   "protocol.invalid_frame", "tools is not a valid array", false);
        osg_send_built(&in->a.p.wr, buf, len);
        agent_invalid_frame(ag, env->payload.len, "invalid_tools");
        free(regd);
        free(rej);
        free(buf);
        return;
    }
    tg_os_tools_begin(&it, frame, env->tools);
    while (tg_os_tools_next(&it, &tid) == 1) {
        char name[TG_OS_TOOL_ID_MAX + 1];
        size_t len = 0, alen = 0;
        tg_os_reject_t *r = &rej[nrej];
        r->tool_id = tid.type == TG_J_STRING && tid.len <= OS_REJECT_ECHO_MAX
                         ? tg_os_raw(frame, tid)
                         : (tg_os_raw_t){NULL, 0};
        if (tid.type == TG_J_NONE) {
            r->code = "tool.invalid";
            r->message = "a tool is an object with a string tool_id";
            nrej++;
            continue;
        }
        if (tg_os_tool_id_parse(frame, tid, name, sizeof(name), &len, &alen) < 0 ||
            alen != strlen(aname(ag)) || memcmp(name, aname(ag), alen) != 0) {
            r->code = "tool.invalid_id";
            r->message = "tool_id must be '<agent_id>/<name>' with this agent's id, of "
                         "[A-Za-z0-9._:@-], at most 128 bytes";
            nrej++;
            continue;
        }
        const char *tool = name + alen + 1;
        size_t tlen = len - alen - 1;
        if (tg_toolreg_add(&ag->tools, tool, tlen) < 0) {
            r->code = "tool.too_many";
            r->message = "this agent registered as many tools as toolgate keeps (1024)";
            nrej++;
            continue;
        }
        regd[nreg++] = tg_os_raw(frame, tid);
    }
    long len = tg_os_enc_tools_registered(buf + TG_LENPFX_HDR, cap, &h, regd, nreg, rej, nrej);
    osg_send_built(&in->a.p.wr, buf, len);
    free(regd);
    free(rej);
    free(buf);
    if (nrej > 0)
        tg_log_warn(
            "agent '%s': %zu of %zu tools refused at registration (see core.tools.registered)",
            aname(ag), nrej, n);
    ag->registered = true;
    if (ag->st == TG_AGENT_STARTING) {
        set_state(ag, TG_AGENT_RUNNING);
        tg_log("agent '%s' ready: %zu tools registered", aname(ag), tg_toolreg_count(&ag->tools));
    }
    tg_pipe_pump(&ag->r, ag->g);
}

static void on_heartbeat(os_agent_t *ag)
{
    uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->os.heartbeat_timeout_ms, 0);
    if (ag->st != TG_AGENT_UNHEALTHY)
        return;
    set_state(ag, ag->registered ? TG_AGENT_RUNNING : TG_AGENT_STARTING);
    tg_log("agent '%s' recovered: heartbeats resumed", aname(ag));
    agent_event(ag, "agent.unhealthy", "recovered", "heartbeat_resumed");
    tg_pipe_pump(&ag->r, ag->g);
}

/* Forward frame [frame, frame+len) of block <b> to <c>'s caller with the
 * caller's call_id in place of the agent-side one at <span>. */
static void to_caller(os_call_t *c, tg_block_t *b, const char *frame, size_t len, tg_jspan_t span)
{
    os_conn_t *k = c->conn;
    tg_os_splice_t sp;
    if (!osg_conn_writable(k) || tg_os_splice_plan(len, span, c->cid.len, &sp) < 0)
        return;
    tg_out_copy(&k->wr, (const char *)sp.hdr, TG_LENPFX_HDR);
    tg_out_slice(&k->wr, b, frame, sp.head_len);
    tg_out_copy(&k->wr, c->cid.buf, c->cid.len);
    tg_out_slice(&k->wr, b, frame + sp.tail_off, len - sp.tail_off);
}

static void late_result(os_agent_t *ag, const os_call_t *c, const char *frame, tg_jspan_t cid,
                        size_t len)
{
    tg_audit_ev_t ev;
    char reqid[40];
    tg_audit_ev_init(&ev);
    ev.event = "call.late_result";
    ev.agent = aname(ag);
    if (c != NULL) {
        tg_call_id_hex(reqid, c->cc.id);
        ev.request_id = reqid;
        if (c->tool_len > 0)
            ev.tool = c->tool;
        ev.stage = c->cc.stage;
    } else if (tg_jstr_decode(frame, cid, reqid, sizeof(reqid)) > 3 &&
               memcmp(reqid, "tg-", 3) == 0 && tg_audit_safe_str(reqid, strlen(reqid))) {
        ev.request_id = reqid;
    }
    ev.bytes_out = (int64_t)len;
    emit(ag->g, &ev);
}

static void on_result(os_agent_t *ag, tg_block_t *b, const char *frame, size_t len,
                      const tg_os_env_t *env)
{
    os_call_t *c = osg_call_by_agent_id(ag, frame, env->call_id);
    if (c == NULL || c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE || c->cc.state == TG_CALL_SLOT) {
        late_result(ag, NULL, frame, env->call_id, len);
        return;
    }
    switch (c->cc.state) {
    case TG_CALL_INFLIGHT: {
        tg_dlt_disarm(&ag->r.dlt, &c->cc.dl, &c->cc.own);
        to_caller(c, b, frame, len, env->call_id);
        const char *status = env->status == TG_OS_ST_SUCCEEDED ? "ok"
                             : env->status == TG_OS_ST_FAILED  ? "error"
                                                               : "cancelled";
        if (c->has_idem && env->status != TG_OS_ST_CANCELED)
            osg_idem_store(c, frame, len, env->call_id, env->status == TG_OS_ST_SUCCEEDED);
        osg_audit_call(c, "call.completed", status, NULL, NULL, NULL);
        break;
    }
    case TG_CALL_CANCELLING:
        /* The agent's answer to the caller's cancel (normally "canceled"). */
        to_caller(c, b, frame, len, env->call_id);
        break;
    default:
        /* A zombie: the canceled result is the agent proving it is alive;
         * any other result came too late for anyone. */
        if (env->status != TG_OS_ST_CANCELED)
            late_result(ag, c, frame, env->call_id, len);
        break;
    }
    tg_pipe_release(&c->cc);
}

static void on_stream(os_agent_t *ag, tg_block_t *b, const char *frame, size_t len,
                      const tg_os_env_t *env)
{
    os_call_t *c = osg_call_by_agent_id(ag, frame, env->call_id);
    if (c != NULL && (c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_CANCELLING))
        to_caller(c, b, frame, len, env->call_id);
}

static void on_agent_frame(os_agent_t *ag, tg_block_t *b, const char *frame, size_t len)
{
    tg_os_env_t env;
    reg_set(ag->g, ag->r.reg_frame_out, len);
    if (tg_os_scan(frame, len, &env) < 0) {
        /* Dropped, counted and audited as its length, never its content. */
        agent_invalid_frame(ag, len, "invalid_frame");
        return;
    }
    if (!ag->hello_ok && env.type != TG_OS_AGENT_HELLO) {
        /* Nothing is taken from an agent that has not proved who it is. */
        agent_invalid_frame(ag, len, "before_hello");
        return;
    }
    switch (env.type) {
    case TG_OS_AGENT_HELLO:
        on_hello(ag, frame, &env);
        break;
    case TG_OS_AGENT_TOOLS_REGISTER:
        on_register(ag, frame, &env);
        break;
    case TG_OS_AGENT_HEARTBEAT:
        on_heartbeat(ag);
        break;
    case TG_OS_AGENT_TOOL_STREAM:
        on_stream(ag, b, frame, len, &env);
        break;
    case TG_OS_AGENT_TOOL_RESULT:
        on_result(ag, b, frame, len, &env);
        break;
    default:
        /* Unknown types are ignored, as v1 allows; a core.* type from an
         * agent is a peer confusing roles: counted. */
        if (env.type != TG_OS_OTHER)
            agent_invalid_frame(ag, len, "unexpected_type");
        break;
    }
}

void osg_agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    os_inst_t *in = h->data;
    (void)suggested;
    tg_in_alloc(&in->a.p.rd, buf);
}


void osg_agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    os_inst_t *in = s->data;
    os_agent_t *ag = in->ag;
    (void)buf;
    if (n < 0) {
        uv_read_stop(s);
        tg_ainst_out_eof(&in->a);
        osg_g_flush(ag->g);
        return;
    }
    tg_in_commit(&in->a.p.rd, (size_t)n);
    while (ag->inst == in && !in->a.p.gone) {
        size_t st = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = in->a.p.rd.blk;
        if (b == NULL)
            break;
        tg_lp_ev_t ev = tg_lenpfx_next(&in->lp, b->data, in->a.p.rd.len, &in->a.p.rd.pos, &st, &e, &total);
        if (ev == TG_LP_NEED_MORE) {
            if (total > in->a.p.rd.hint)
                in->a.p.rd.hint = (size_t)total;
            break;
        }
        if (ev == TG_LP_FRAME) {
            on_agent_frame(ag, b, b->data + st, e - st);
        } else if (ev == TG_LP_OVERSIZE) {
            reg_set(ag->g, ag->r.reg_frame_out, ag->g->cfg->max_frame_bytes);
            agent_invalid_frame(ag, total, "frame_too_large");
            tg_log_warn("agent '%s' sent a %" PRIu64 "-byte frame over max_frame_bytes (%" PRIu64
                        "; raise %s)%s",
                        aname(ag), total, ag->g->cfg->max_frame_bytes, ag->g->gw->path_frame,
                        ag->r.acfg->os.on_oversize == TG_OVERSIZE_CLOSE ? ": restarting it"
                                                                        : ": skipped");
            if (ag->r.acfg->os.on_oversize == TG_OVERSIZE_CLOSE) {
                TG_AINST_KILL(ag->inst, SIGKILL, "frame_too_large");
                in->a.p.rd.len = in->a.p.rd.pos = 0;
                break;
            }
        } else if (ev == TG_LP_INVALID) {
            agent_invalid_frame(ag, 0, "empty_frame");
        }
    }
    if (ag->inst == in)
        tg_in_settle(&in->a.p.rd);
    else
        in->a.p.rd.len = in->a.p.rd.pos = 0;
    osg_g_flush(ag->g);
}

/* ---- agent process ---------------------------------------------------- */

static void inst_closed(tg_ainst_t *a)
{
    os_inst_t *in = (os_inst_t *)a;
    tg_osgw_t *g = in->ag->g;
    free(in);
    osg_g_check_idle(g);
}

/* The instance is gone: every call it had is answered, and the queued
 * ones too unless a reload is switching to a new instance. */
static void fail_calls(os_agent_t *ag, const os_inst_t *in)
{
    tg_osgw_t *g = ag->g;
    tg_denial_t d;
    char reqid[32], detail[160], path[TG_NAME_MAX + 64];
    /* A reload's switch keeps the queued calls for the new instance. */
    bool keep_queued = ag->r.switching && !g->stopping;
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = osg_call_at(ag, i);
        /* Calls waiting for the store never reached this instance: the
         * answer finds the agent as it is then. */
        if (c->cc.state == TG_CALL_IDLE || c->cc.state == TG_CALL_RATE || c->cc.state == TG_CALL_SLOT ||
            (c->cc.state == TG_CALL_QUEUED && keep_queued))
            continue;
        if (c->cc.state == TG_CALL_INFLIGHT && in->a.p.watch.verdict.kind != TG_VERDICT_OK) {
            const tg_verdict_t *v = &in->a.p.watch.verdict;
            osg_denial_init(ag, &d, TG_DENY_RESOURCE, c, reqid);
            d.limit = tg_res_name(v->res);
            d.observed = (int64_t)v->used;
            d.cap = (int64_t)v->limit;
            d.unit = v->res == TG_RES_MEMORY ? "bytes" : v->res == TG_RES_PIDS ? "processes" : NULL;
            snprintf(path, sizeof(path), "agents.%s.resources.%s.limit", aname(ag),
                     tg_res_name(v->res));
            d.config_path = path;
            snprintf(detail, sizeof(detail),
                     "%s over its limit while the call ran (used %" PRIu64 " of %" PRIu64 ")",
                     tg_res_name(v->res), v->used, v->limit);
            d.detail = detail;
            osg_deny_call(c, &d, "call.denied", "killed");
        } else if (c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_QUEUED) {
            /* Queued when toolgate stops, or still running when its stop
             * steps ended the instance (kill_grace_period after the
             * shutdown began): the shutdown ends it, not the agent. */
            bool ran = c->cc.state == TG_CALL_INFLIGHT;
            bool stopping = g->stopping && (!ran || in->a.stopping);
            osg_denial_init(ag, &d, stopping ? TG_DENY_SHUTTING_DOWN : TG_DENY_UNAVAILABLE, c, reqid);
            d.limit = stopping ? "shutdown" : "agent";
            if (!stopping)
                d.retry_after_ms = (int64_t)ag->r.acfg->backoff_initial_ms;
            if (stopping && ran)
                d.config_path = ag->r.path_grace;
            if (stopping)
                snprintf(detail, sizeof(detail), "%s",
                         ran ? "toolgate is shutting down: the call still ran when the agent was "
                               "stopped, kill_grace_period after the shutdown began"
                             : "toolgate is shutting down");
            else if (in->a.p.term_signal != 0)
                snprintf(detail, sizeof(detail), "agent %s by signal %d %s",
                         in->a.p.killed ? "was killed" : "died", in->a.p.term_signal,
                         c->cc.state == TG_CALL_QUEUED ? "before the call ran" : "while the call ran");
            else
                snprintf(detail, sizeof(detail), "agent exited with status %" PRId64 " %s",
                         in->a.p.exit_status,
                         c->cc.state == TG_CALL_QUEUED ? "before the call ran" : "while the call ran");
            d.detail = detail;
            osg_deny_call(c, &d, "call.denied",
                      c->cc.state == TG_CALL_QUEUED ? "queued"
                      : stopping                 ? "shutdown"
                      : in->a.p.killed         ? "killed"
                                           : "agent_exited");
        } else if (c->cc.state == TG_CALL_CANCELLING) {
            osg_answer(g, c->conn, c, &c->cid, "canceled", NULL, NULL, false);
        }
        if (c->cc.state == TG_CALL_QUEUED)
            tg_route_unqueue(&c->ag->r, &c->cc);
        else
            tg_route_release_slots(&ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
        osg_call_free(c);
    }
    tg_route_regs(&ag->r, -1);
}

bool osg_crash_loop(const os_agent_t *ag, uint64_t now, uint32_t *recent)
{
    *recent = tg_restarts_recent(&ag->rst.rs, ag->r.acfg, now);
    return *recent >= ag->r.acfg->max_restarts;
}

/* ---- the restarter's hooks (agent/restart.h) ---------------------------- */

/* A start that fails counts like a failed instance: an on-demand start
 * after it counts as a restart. */
static int ag_spawn(void *owner)
{
    os_agent_t *ag = owner;
    int rc = osg_agent_spawn(ag);
    if (rc < 0)
        ag->last_failed = true;
    return rc;
}

/* Toolgate stops, or the agent does: its instance stays down. */
static bool ag_stopped(void *owner)
{
    os_agent_t *ag = owner;
    return ag->g->stopping || ag->phase != TG_P_RUN;
}

static void emit_owner(void *owner, tg_audit_ev_t *ev)
{
    emit(owner, ev);
}

/* Not restarted by the policy: an on_demand agent's next call starts it.
 * agent.restarting is the gateway's to write. */
static tg_restart_ctx_t ag_where(void *owner)
{
    os_agent_t *ag = owner;
    bool on_demand = ag->r.acfg->start == TG_START_ON_DEMAND;
    return (tg_restart_ctx_t){.gw = ag->g->gw, .acfg = ag->r.acfg, .idx = ag->r.idx,
                              .reg_restarts = ag->reg_restarts, .emit = emit_owner, .owner = ag->g,
                              .stop_tail = on_demand ? "the next call starts it" : "not restarted"};
}

/* The agent's state after its instance's end: down when it stops (the
 * gateway may be idle now), down or failed when not restarted (down: an
 * on_demand agent's next call starts it again). */
static void ag_settle(void *owner, tg_exit_verdict_t v, int64_t status)
{
    os_agent_t *ag = owner;
    bool on_demand = ag->r.acfg->start == TG_START_ON_DEMAND;
    switch (v) {
    case TG_EXIT_RESTART:
        set_state(ag, TG_AGENT_BACKOFF);
        return;
    case TG_EXIT_STOPPED:
        set_state(ag, TG_AGENT_DOWN);
        ag->phase = TG_P_DONE;
        osg_g_check_idle(ag->g);
        return;
    case TG_EXIT_UNRUNNABLE:
        set_state(ag, TG_AGENT_FAILED);
        return;
    case TG_EXIT_POLICY:
    case TG_EXIT_GIVE_UP:
        set_state(ag, on_demand ? TG_AGENT_DOWN : TG_AGENT_FAILED);
        return;
    }
}

static void flush_owner(void *owner)
{
    osg_g_flush(((os_agent_t *)owner)->g);
}

static const tg_restarter_ops_t restart_ops = {
    .spawn = ag_spawn,
    .stopped = ag_stopped,
    .where = ag_where,
    .settle = ag_settle,
    .flush = flush_owner,
};

/* The instance is down (it exited, or could not be started): a reload's
 * switch starts the new one; otherwise the restarter applies the policy. */
static void after_exit(os_agent_t *ag, bool failed, int64_t status, bool by_signal)
{
    ag->last_failed = failed;
    if (ag->r.switching && !ag->g->stopping) {
        switch_done(ag); /* a reload stopped it: no restart policy applies */
        return;
    }
    tg_restarter_exited(&ag->rst, failed, status, by_signal, now_ms(ag->g));
}

/* The instance is gone (agent.exited written, the instance closing):
 * its calls are answered, then the restart policy applies. */
static void inst_gone(tg_ainst_t *a)
{
    os_inst_t *in = (os_inst_t *)a;
    os_agent_t *ag = in->ag;
    tg_apool_release(&ag->pm);
    uv_timer_stop(&ag->hb_timer);
    if (ag->inst == in)
        ag->inst = NULL;
    explicit_bzero(ag->token, sizeof(ag->token));
    ag->hello_ok = ag->registered = false;
    tg_toolreg_clear(&ag->tools);
    set_state(ag, TG_AGENT_DOWN);
    fail_calls(ag, in);
    after_exit(ag, tg_ainst_failed(a), tg_ainst_status(a), a->p.term_signal != 0);
}

static void agent_out_drain(tg_out_t *o, void *ctx)
{
    os_agent_t *ag = ctx;
    (void)o;
    osg_g_flush(ag->g); /* callers paused for this agent may read again */
}

/* A fresh session token: 128 bits from the kernel's CSPRNG, as hex. */
static int new_token(os_agent_t *ag)
{
    unsigned char raw[OS_TOKEN_BYTES];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++) {
        ag->token[2 * i] = "0123456789abcdef"[raw[i] >> 4];
        ag->token[2 * i + 1] = "0123456789abcdef"[raw[i] & 15];
    }
    ag->token[2 * OS_TOKEN_BYTES] = '\0';
    explicit_bzero(raw, sizeof(raw));
    return 0;
}

static const tg_ainst_ops_t inst_ops = {
    .out_alloc = osg_agent_alloc,
    .out_read = osg_agent_read,
    .out_drain = agent_out_drain,
    .gone = inst_gone,
    .closed = inst_closed,
    .flush = flush_owner,
};

/* Start the agent's instance: the pre-flight, containment through the
 * exec shim, a fresh session token in its environment. 0, or a negative
 * errno after logging (the caller applies the restart policy). */
int osg_agent_spawn(os_agent_t *ag)
{
    tg_osgw_t *g = ag->g;
    if (ag->inst != NULL)
        return 0;
    if (ag->st == TG_AGENT_DOWN && ag->last_failed) {
        /* An on-demand start after a failure counts as a restart. */
        tg_restarts_note(&ag->rst.rs, now_ms(g));
    }
    int rc = new_token(ag);
    if (rc < 0) {
        tg_log_error("cannot start agent '%s': no random bytes for its session token: %s",
                     aname(ag), strerror(-rc));
        return rc;
    }
    os_inst_t *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return -ENOMEM;
    in->ag = ag;
    tg_ainst_init(&in->a, g->gw, &ag->r.acfg, ag->r.idx, &ag->r.rows, &ag->err, &ag->err_reported,
                  &inst_ops, ag);
    tg_lenpfx_init(&in->lp, g->cfg->max_frame_bytes);
    /* The session token goes last: an entry of the same name from config
     * is left out, the token must be the one toolgate checks. */
    tg_ainst_spawn_t how = {.env_name = OS_TOKEN_ENV, .env_value = ag->token, .hint = "",
                            .attempt = ag->rst.rs.n};
    rc = tg_ainst_spawn(&in->a, &how);
    if (rc < 0) {
        explicit_bzero(ag->token, sizeof(ag->token));
        return rc;
    }
    ag->inst = in;
    ag->starts++;
    uint32_t running, cap;
    (void)tg_apool_take(&ag->pm, now_ms(g), &running, &cap); /* its one place: never refused */
    ag->hello_ok = false;
    set_state(ag, TG_AGENT_STARTING);
    /* The hello deadline. */
    uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->os.heartbeat_timeout_ms, 0);
    osg_flow(g);
    return 0;
}

/* The hello deadline, then the heartbeat watch: no heartbeat for
 * heartbeat_timeout makes the agent unhealthy; still none after
 * kill_grace_period more, it is killed (and restarted per its policy). */
static void on_hb_timer(uv_timer_t *t)
{
    os_agent_t *ag = t->data;
    os_inst_t *in = ag->inst;
    if (in == NULL || in->a.p.gone || in->a.p.exited)
        return;
    if (in->a.p.killed && !ag->hello_ok) {
        /* Refused at hello and still there. */
        TG_AINST_KILL(ag->inst, SIGKILL, "hello_refused");
    } else if (!ag->hello_ok) {
        tg_log_warn("agent '%s' sent no agent.hello within %" PRIu64 " ms (raise %s): killing it",
                    aname(ag), ag->r.acfg->os.heartbeat_timeout_ms, ag->path_hb);
        agent_event(ag, "agent.unhealthy", "unhealthy", "hello_timeout");
        TG_AINST_KILL(ag->inst, SIGKILL, "hello_timeout");
    } else if (ag->st != TG_AGENT_UNHEALTHY) {
        tg_log_warn("agent '%s' missed its heartbeats for %" PRIu64
                    " ms: unhealthy, calls refused until it recovers",
                    aname(ag), ag->r.acfg->os.heartbeat_timeout_ms);
        set_state(ag, TG_AGENT_UNHEALTHY);
        agent_event(ag, "agent.unhealthy", "unhealthy", "heartbeat_missed");
        uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->kill_grace_ms, 0);
    } else {
        tg_log_warn("agent '%s' still sent no heartbeat %" PRIu64
                    " ms later: killing it (raise %s)",
                    aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        TG_AINST_KILL(ag->inst, SIGKILL, "heartbeat");
    }
    osg_g_flush(ag->g);
}

/* ---- shutdown --------------------------------------------------------- */

static void on_phase_timer(uv_timer_t *t);

/* One step of stopping the instance (shutdown, or a reload's switch):
 * stdin closed, then SIGTERM, then SIGKILL, kill_grace_period apart. */
static void stop_step(os_agent_t *ag)
{
    os_inst_t *in = ag->inst;
    if (in == NULL || in->a.p.gone) {
        if (ag->r.switching && !ag->g->stopping) {
            switch_done(ag);
            return;
        }
        ag->phase = TG_P_DONE;
        osg_g_check_idle(ag->g);
        return;
    }
    if (tg_ainst_stop_step(&in->a, &ag->phase, ag->r.switching ? "reload" : "shutdown"))
        uv_timer_start(&ag->phase_timer, on_phase_timer, ag->r.acfg->kill_grace_ms, 0);
}

static void on_phase_timer(uv_timer_t *t)
{
    os_agent_t *ag = t->data;
    stop_step(ag);
    osg_g_flush(ag->g);
}

/* Draining done? A shutdown waits for every call (or kill_grace_period);
 * a reload's switch for the calls the old instance has (in flight,
 * cancelling, zombies; each bounded by its deadline or kill_grace_period)
 * and for those holding slots while the store decides. */
void osg_agent_check_drained(os_agent_t *ag)
{
    if (ag->phase != TG_P_DRAIN)
        return;
    if (ag->r.switching ? ag->r.aconc.inflight == 0 : tg_ctab_used(&ag->r.tab) == 0) {
        uv_timer_stop(&ag->phase_timer);
        stop_step(ag);
    }
}

static void agent_stop(os_agent_t *ag)
{
    if (ag->r.switching) {
        /* The reload's switch becomes the shutdown: the calls in flight
         * now have kill_grace_period, queued ones may still run. */
        ag->r.switching = false;
        if (ag->phase == TG_P_DRAIN) {
            uv_timer_start(&ag->phase_timer, on_phase_timer, ag->r.acfg->kill_grace_ms, 0);
            tg_pipe_pump(&ag->r, ag->g);
            osg_agent_check_drained(ag);
        }
        return;
    }
    if (ag->phase != TG_P_RUN)
        return;
    ag->phase = TG_P_DRAIN;
    tg_restarter_stop(&ag->rst);
    if (ag->inst == NULL) {
        ag->phase = TG_P_DONE;
        if (ag->st == TG_AGENT_BACKOFF)
            set_state(ag, TG_AGENT_DOWN);
        return;
    }
    uv_timer_start(&ag->phase_timer, on_phase_timer, ag->r.acfg->kill_grace_ms, 0);
    osg_agent_check_drained(ag);
}

static void timer_closed(uv_handle_t *h)
{
    tg_osgw_t *g = ((os_agent_t *)h->data)->g;
    g->open_timers--;
    osg_g_check_idle(g);
}

static void call_timer_closed(uv_handle_t *h)
{
    os_call_t *c = h->data;
    c->ag->g->open_timers--;
    osg_g_check_idle(c->ag->g);
}

/* Once every agent is down: callers are told nothing more is coming
 * (their connections end once written), then the gateway's own timers
 * close, then <on_idle> runs. */
void osg_g_check_idle(tg_osgw_t *g)
{
    if (!g->stopping || g->idle)
        return;
    for (size_t i = 0; i < g->nagents; i++)
        if (g->agents[i]->inst != NULL || g->agents[i]->phase != TG_P_DONE)
            return;
    for (os_conn_t *k = g->conns; k != NULL; k = k->next)
        osg_conn_end(k);
    if (g->conns != NULL)
        return;
    if (!g->closing_timers) {
        g->closing_timers = true;
        for (size_t i = 0; i < g->nagents; i++) {
            os_agent_t *ag = g->agents[i];
            uv_close((uv_handle_t *)&ag->hb_timer, timer_closed);
            tg_restarter_close(&ag->rst, timer_closed);
            uv_close((uv_handle_t *)&ag->phase_timer, timer_closed);
            uv_close((uv_handle_t *)&ag->r.fleet_timer, timer_closed);
            if (ag->r.dlt.ready)
                uv_close((uv_handle_t *)&ag->r.dlt.timer, timer_closed);
            for (uint32_t j = 0; j < ag->r.tab.n; j++)
                if (osg_call_at(ag, j)->cc.own.ready)
                    uv_close((uv_handle_t *)&osg_call_at(ag, j)->cc.own.timer, call_timer_closed);
        }
    }
    if (g->open_timers > 0)
        return;
    g->idle = true;
    if (g->on_idle != NULL)
        g->on_idle(g->on_idle_arg);
}

/* ---- setup ------------------------------------------------------------ */


/* The OpenSentience engine's own rows, beside the route's. */
static void register_limits(os_agent_t *ag)
{
    char name[TG_LIMIT_NAME_MAX];
    snprintf(name, sizeof(name), "agent.%s.idempotency_bytes", aname(ag));
    ag->reg_idem = tg_registry_upsert(&ag->g->gw->reg, name, TG_LIMIT_RESOURCE, "agent",
                                      ag->r.acfg->os.idempotency_max_bytes);
    snprintf(ag->path_hb, sizeof(ag->path_hb), "agents.%s.opensentience.heartbeat_timeout",
             aname(ag));
    ag->reg_restarts = tg_restarts_register(&ag->g->gw->reg, ag->r.acfg, "agent");
    snprintf(name, sizeof(name), "agent.%s.instances", aname(ag));
    ag->reg_instances = tg_registry_upsert(&ag->g->gw->reg, name, TG_LIMIT_CONCURRENCY, "agent",
                                           OS_INSTANCES);
}

static void switch_start(os_agent_t *ag);

/* The agent's one place is never evicted: every caller shares it. */
static uint64_t pool_evictable(tg_pool_member_t *m, uint64_t now)
{
    (void)m;
    (void)now;
    return 0;
}

static void pool_evict(tg_pool_member_t *m)
{
    (void)m;
}

/* A reload needs a new instance (tg_osgw_reconfigure): drain the calls
 * in flight on the old one, stop it, start the new (switch_start). It
 * moves at once when no instance runs. */
static bool pool_drain(tg_pool_member_t *m)
{
    os_agent_t *ag = (os_agent_t *)((char *)m - offsetof(os_agent_t, pm));
    switch_start(ag);
    return !ag->r.switching;
}

static const tg_apool_ops_t pool_ops = {
    .evictable = pool_evictable, .evict = pool_evict, .drain = pool_drain};

static int setup_limits(os_agent_t *ag, tg_agent_cfg_t *a, size_t idx, tg_err_t *err)
{
    ag->r.qcap = a->lim.max_queued_calls;
    int rc = tg_route_setup(&ag->r, ag->g->gw, a, idx, sizeof(os_call_t), osg_slab_need(a), 0,
                            err);
    if (rc < 0)
        return rc;
    rc = tg_idem_init(&ag->idem_cache, a->os.idempotency_max_bytes, a->os.idempotency_window_ms);
    if (rc < 0)
        return tg_err_set(err, rc, "agents.%s.opensentience.idempotency_max_bytes: %s", a->id,
                          rc == -ENOMEM ? "out of memory" : "cannot be set up");
    register_limits(ag);
    tg_apool_init(&ag->pool, TG_BIND_SHARED, OS_INSTANCES, &pool_ops, &ag->g->gw->reg,
                  ag->reg_instances);
    tg_apool_join(&ag->pool, &ag->pm, "*", false);
    return 0;
}

static void agent_free(os_agent_t *ag)
{
    if (ag == NULL)
        return;
    tg_apool_leave(&ag->pm);
    tg_idem_free(&ag->idem_cache);
    tg_toolreg_free(&ag->tools);
    tg_route_fini(&ag->r);
    explicit_bzero(ag->token, sizeof(ag->token));
    free(ag);
}

/* ---- reload ----------------------------------------------------------- */

static void restarts_reset(os_agent_t *ag)
{
    tg_restarts_reset(&ag->rst.rs);
    ag->last_failed = false;
}

/* Refuse every queued call of <ag> with agent_unavailable (<why>). */
static void fail_queued(os_agent_t *ag, const char *why)
{
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = osg_call_at(ag, i);
        if (c->cc.state != TG_CALL_QUEUED)
            continue;
        osg_deny_unavailable(c, why);
        tg_route_unqueue(&c->ag->r, &c->cc);
        osg_call_free(c);
    }
    tg_route_regs(&ag->r, -1);
}

/* The old instance of a reload's switch is gone (or there was none): run
 * the new config, whatever the restart policy says, with its restart
 * count reset; an on_demand agent starts only when calls wait for it. */
static void switch_done(os_agent_t *ag)
{
    ag->r.switching = false;
    ag->phase = TG_P_RUN;
    tg_apool_renew(&ag->pm);
    uv_timer_stop(&ag->phase_timer);
    tg_restarter_stop(&ag->rst);
    restarts_reset(ag);
    set_state(ag, TG_AGENT_DOWN);
    bool start = ag->r.acfg->start == TG_START_EAGER || ag->r.aq.count > 0;
    tg_log("SIGHUP: agent '%s': %s", aname(ag),
           start ? "starting an instance with the reloaded config"
                 : "the next call starts an instance with the reloaded config");
    if (!start)
        return;
    int rc = osg_agent_spawn(ag);
    if (rc < 0) {
        fail_queued(ag, "agent could not be started with its reloaded config");
        after_exit(ag, true, tg_ainst_spawn_status(rc), false);
    }
}

/* Replace <ag>'s instance by one of its (new) config: drain the calls
 * in flight on the old one, stop it as a shutdown does, then start the
 * new one (switch_done). Calls arriving meanwhile wait in the queue. */
static void switch_start(os_agent_t *ag)
{
    restarts_reset(ag);
    if (ag->inst == NULL) {
        switch_done(ag); /* down, backing off or failed: nothing to drain */
        return;
    }
    if (!ag->r.switching) {
        ag->r.switching = true;
        ag->phase = TG_P_DRAIN;
        tg_log("SIGHUP: agent '%s': its command, environment or resources changed: draining "
               "its %u call(s) in flight, then restarting it",
               aname(ag), ag->r.aconc.inflight);
    }
    osg_agent_check_drained(ag);
}

/* ---- public API --------------------------------------------------------- */

/* The gateway's tick: each agent's restarts row ages out restarts that
 * left the window. */
static void os_tick(void *arg, uint64_t now)
{
    tg_osgw_t *g = arg;
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        if (ag->reg_restarts >= 0)
            reg_set(g, ag->reg_restarts, tg_restarts_recent(&ag->rst.rs, ag->r.acfg, now));
    }
}

tg_osgw_t *tg_osgw_new(tg_gw_t *gw, tg_err_t *err)
{
    tg_osgw_t *g = calloc(1, sizeof(*g));
    tg_config_t *cfg = gw->cfg;
    if (g == NULL) {
        tg_err_set(err, -ENOMEM, "opensentience gateway: out of memory");
        return NULL;
    }
    g->gw = gw;
    g->cfg = cfg;
    g->agents = calloc(cfg->nagents ? cfg->nagents : 1, sizeof(*g->agents));
    g->ls = calloc(cfg->nlisten ? cfg->nlisten : 1, sizeof(*g->ls));
    if (g->agents == NULL || g->ls == NULL) {
        tg_err_set(err, -ENOMEM, "opensentience gateway: out of memory");
        tg_osgw_free(g);
        return NULL;
    }
    for (size_t i = 0; i < cfg->nlisten; i++) {
        const tg_listen_cfg_t *lc = &cfg->listen[i];
        if (lc->dialect != TG_DIALECT_OPENSENTIENCE)
            continue;
        os_listen_t *l = &g->ls[g->nls++];
        char name[TG_LIMIT_NAME_MAX];
        snprintf(l->path, sizeof(l->path), "%s", lc->unix_path);
        l->max = lc->max_connections ? lc->max_connections : TG_DEF_LISTEN_MAX_CONNECTIONS;
        snprintf(l->cfg_path, sizeof(l->cfg_path), "router.listen[%zu].max_connections", i);
        snprintf(name, sizeof(name), "listen.%zu.connections", i);
        l->reg = tg_registry_add(&gw->reg, name, TG_LIMIT_CONCURRENCY, "instance", l->max);
    }
    for (size_t i = 0; i < cfg->nagents; i++) {
        tg_agent_cfg_t *a = &cfg->agents[i];
        if (a->dialect != TG_DIALECT_OPENSENTIENCE)
            continue;
        os_agent_t *ag = calloc(1, sizeof(*ag));
        if (ag == NULL) {
            tg_err_set(err, -ENOMEM, "agents.%s: out of memory", a->id);
            tg_osgw_free(g);
            return NULL;
        }
        g->agents[g->nagents++] = ag;
        ag->g = g;
        ag->r.ops = osg_call_ops();
        tg_toolreg_init(&ag->tools, OS_TOOLS_MAX);
        ag->r.open_timers = &g->open_timers;
        tg_dlt_init(&ag->r.dlt, tg_pipe_deadline, ag);
        if (setup_limits(ag, a, i, err) < 0) {
            tg_osgw_free(g);
            return NULL;
        }
    }
    /* The timers last, once nothing can fail: memory holding a libuv
     * handle may only be freed after its close callback. */
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        uv_timer_init(gw->loop, &ag->hb_timer);
        tg_restarter_init(&ag->rst, gw->loop, &restart_ops, ag);
        uv_timer_init(gw->loop, &ag->phase_timer);
        uv_timer_init(gw->loop, &ag->r.fleet_timer);
        ag->r.fleet_timer_ready = true;
        ag->hb_timer.data = ag->phase_timer.data = ag;
        ag->r.fleet_timer.data = ag;
        g->open_timers += 4;
    }
    if (g->nagents > 0)
        (void)tg_gw_hook_add(gw, os_tick, NULL, g);
    return g;
}

size_t tg_osgw_nagents(const tg_osgw_t *g)
{
    return g != NULL ? g->nagents : 0;
}

void tg_osgw_start(tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        if (ag->r.acfg->start != TG_START_EAGER)
            continue;
        (void)tg_restarter_start(&ag->rst);
    }
    osg_g_flush(g);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

void tg_osgw_accept(tg_osgw_t *g, uv_pipe_t *conn, const tg_listen_cfg_t *lc,
                    const tg_osgw_peer_t *peer)
{
    os_conn_t *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        uv_close((uv_handle_t *)conn, free_handle);
        return;
    }
    k->g = g;
    k->pipe = conn;
    snprintf(k->path, sizeof(k->path), "%s", lc->unix_path);
    k->on_oversize = lc->on_oversize;
    snprintf(k->caller, sizeof(k->caller), "%s", peer->caller);
    k->lim = peer->lim;
    k->uid = peer->uid;
    conn->data = k;
    tg_in_init(&k->rd, &g->gw->pool, g->cfg->max_frame_bytes);
    tg_lenpfx_init(&k->lp, g->cfg->max_frame_bytes);
    tg_out_init(&k->wr, &g->gw->pool);
    k->wr.stream = (uv_stream_t *)conn;
    k->wr.ctx = k;
    k->wr.on_drain = osg_conn_out_drain;
    k->wr.on_error = osg_conn_out_error;
    uv_timer_init(g->gw->loop, &k->idle);
    k->idle.data = k;
    k->open = 2;
    TG_LIST_PUSH(g->conns, k, prev, next);
    os_listen_t *l = NULL;
    for (size_t i = 0; i < g->nls && l == NULL; i++)
        if (strcmp(g->ls[i].path, lc->unix_path) == 0)
            l = &g->ls[i];
    k->robserved = k->rcap = TG_DENY_ABSENT;
    if (g->stopping) {
        k->refused = true;
        k->rcode = TG_DENY_SHUTTING_DOWN;
        k->rlimit = "shutdown";
        k->rscope = "instance";
        snprintf(k->rdetail, sizeof(k->rdetail), "toolgate is shutting down");
    } else if (peer->not_allowed) {
        k->refused = true;
        k->rcode = TG_DENY_CALLER;
        k->rlimit = "caller";
        k->rscope = "caller";
        k->rpath = "callers";
        snprintf(k->rdetail, sizeof(k->rdetail),
                 "peer uid %u gid %u matches no callers[] entry and router.callers_only is true",
                 peer->uid, peer->gid);
    } else if (l != NULL && l->open >= l->max) {
        k->refused = true;
        k->rcode = TG_DENY_CONCURRENCY;
        k->rlimit = "connections";
        k->rscope = "instance";
        k->rpath = l->cfg_path;
        k->robserved = (int64_t)l->open + 1;
        k->rcap = (int64_t)l->max;
        snprintf(k->rdetail, sizeof(k->rdetail), "%u connections open, the most allowed", l->open);
    } else if (l != NULL) {
        k->ls = l;
        l->open++;
        reg_set(g, l->reg, l->open);
    }
    if (k->refused && g->nrefused >= OS_REFUSING_MAX) {
        /* Refused connections waiting for their call are bounded (issue
         * 20 item 19: churned connections must not pile up): past the
         * bound, the refusal at once, with no call_id, and the end. */
        g->nrefused++;
        osg_refuse_now(g, k);
        return;
    }
    if (k->refused) {
        /* A refused peer gets idle_timeout to send the call it is refused. */
        g->nrefused++;
        uv_timer_start(&k->idle, osg_on_conn_idle, g->cfg->idle_timeout_ms, 0);
    }
    uv_read_start((uv_stream_t *)conn, osg_conn_alloc, osg_conn_read);
}

void tg_osgw_shutdown(tg_osgw_t *g, void (*on_idle)(void *arg), void *arg)
{
    g->on_idle = on_idle;
    g->on_idle_arg = arg;
    if (!g->stopping) {
        g->stopping = true;
        for (size_t i = 0; i < g->nagents; i++)
            agent_stop(g->agents[i]);
    }
    osg_g_check_idle(g);
    if (!g->idle)
        osg_g_flush(g);
}

int tg_osgw_reconfigure(tg_osgw_t *g, tg_agent_cfg_t *acfg, bool respawn, tg_err_t *err)
{
    os_agent_t *ag = g != NULL ? osg_agent_by_id(g, acfg->id, strlen(acfg->id)) : NULL;
    if (ag == NULL || acfg->dialect != TG_DIALECT_OPENSENTIENCE)
        return tg_err_set(err, -ENOENT, "agents.%s: no such opensentience agent", acfg->id);
    const tg_agent_cfg_t *o = ag->r.acfg;
    tg_store_t *store = NULL, *tool_store = NULL, *cstore = NULL;
    char rate_key[TG_STORE_KEY_MAX + 1], slots_key[TG_STORE_KEY_MAX + 1];
    if (tg_route_stores(g->gw, acfg, &store, rate_key, &tool_store, &cstore, slots_key, err) < 0)
        return -EINVAL;
    /* The agent's bucket keeps its state when its rate did not change (a
     * shared one lives in the store under the same key either way). */
    tg_gcra_t arate = ag->r.arate;
    if ((!tg_route_same_rate(&o->lim, &acfg->lim) || o->rate_shared != acfg->rate_shared) &&
        tg_gcra_init(&arate, acfg->lim.rate_limit.count, acfg->lim.rate_limit.period_ms,
                     acfg->lim.burst) < 0)
        return tg_err_set(err, -EINVAL,
                          "agents.%s.execution_limits.rate_limit: cannot be set up as a bucket",
                          acfg->id);
    tg_adm_tool_t *tools = NULL;
    int rc = tg_route_tools_build(&ag->r, acfg, tool_store, &tools, err);
    if (rc < 0)
        return rc;
    /* The ring keeps every call queued now, in order, even when the new
     * cap is lower: those wait on, new calls are refused until the queue
     * is under the cap. The slab only grows (its chunks never move). */
    uint32_t ring = acfg->lim.max_queued_calls > ag->r.aq.count ? acfg->lim.max_queued_calls
                                                              : ag->r.aq.count;
    if ((ring > ag->r.aq.cap && tg_waitq_resize(&ag->r.aq, ring) < 0) ||
        tg_ctab_grow(&ag->r.tab, osg_slab_need(acfg)) < 0) {
        free(tools);
        return tg_err_set(err, -ENOMEM, "agents.%s: out of memory", acfg->id);
    }

    /* Nothing fails from here on: the new limits apply as a whole. Live
     * calls find their tool by name in the new config; one that held its
     * tool's slot keeps it where the tool still has a concurrency limit. */
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = osg_call_at(ag, i);
        if (c->cc.state == TG_CALL_IDLE)
            continue;
        const tg_tool_cfg_t *tc = tg_config_tool(acfg, c->tool, c->tool_len);
        int nt = tc != NULL ? (int)(tc - acfg->tools) : -1;
        if (c->cc.tool_slot && nt >= 0 && tools[nt].has_conc)
            tools[nt].conc.inflight++;
        else
            c->cc.tool_slot = false;
        if (c->cc.in_queue && nt >= 0)
            tools[nt].queued++;
        if (c->cc.dl_src == TG_DL_TOOL && nt < 0)
            c->cc.dl_src = TG_DL_AGENT;
        c->cc.tool = nt;
    }
    /* The tools' summed rows: a limit the new config keeps carries its
     * count on (its live calls were counted in above), one it drops takes
     * its part back. */
    for (size_t j = 0; j < o->ntools; j++) {
        tg_adm_tool_t *ot = &ag->r.tools[j];
        const char *tn = o->tools[j].name;
        const tg_tool_cfg_t *tc = tg_config_tool(acfg, tn, strlen(tn));
        tg_adm_tool_t *nt = tc != NULL ? &tools[tc - acfg->tools] : NULL;
        if (nt != NULL && nt->has_conc)
            nt->sh_conc = ot->sh_conc;
        else
            tg_registry_share(&g->gw->reg, ot->reg_conc, &ot->sh_conc, 0);
        if (nt != NULL && nt->has_queue)
            nt->sh_queue = ot->sh_queue;
        else
            tg_registry_share(&g->gw->reg, ot->reg_queue, &ot->sh_queue, 0);
    }
    free(ag->r.tools);
    ag->r.tools = tools;
    ag->r.arate = arate;
    ag->r.aconc.max = acfg->lim.max_concurrent_calls; /* inflight calls keep their slots */
    ag->r.qcap = acfg->lim.max_queued_calls;
    ag->r.store = store;
    if (store != NULL)
        memcpy(ag->r.rate_key, rate_key, sizeof(rate_key));
    ag->r.tool_store = tool_store;
    /* Calls holding fleet slots keep them (released through the redis
     * store whatever the new scope). */
    ag->r.cstore = cstore;
    if (cstore != NULL)
        memcpy(ag->r.slots_key, slots_key, sizeof(slots_key));
    if (cstore == NULL) {
        ag->r.fleet_full = false;
        uv_timer_stop(&ag->r.fleet_timer);
    }
    ag->r.acfg = acfg;
    tg_route_paths(&ag->r);
    tg_route_register(&ag->r);
    register_limits(ag);
    tg_idem_limits(&ag->idem_cache, acfg->os.idempotency_max_bytes, acfg->os.idempotency_window_ms);
    reg_set(g, ag->reg_idem, tg_idem_bytes(&ag->idem_cache));
    if (respawn && !g->stopping)
        (void)tg_apool_reload(&ag->pool, OS_INSTANCES, NULL); /* pool_drain */
    /* Raised caps may let queued calls run now. */
    tg_pipe_pump(&ag->r, ag->g);
    tg_route_regs(&ag->r, -1);
    for (size_t i = 0; i < acfg->ntools; i++)
        tg_adm_tool_regs(g->gw, &ag->r.tools[i]);
    osg_g_flush(g);
    return 0;
}

bool tg_osgw_idle(const tg_osgw_t *g)
{
    return g == NULL || g->idle;
}

void tg_osgw_kill(tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++)
        TG_AINST_KILL(g->agents[i]->inst, SIGKILL, "interrupted");
}

void tg_osgw_free(tg_osgw_t *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->nagents; i++)
        agent_free(g->agents[i]);
    free(g->agents);
    free(g->ls);
    free(g);
}
