/* The MCP engine's frames and flow (see session.c for the invariants):
 * caller frames (calls, cancels, pass-through), agent frames (answers,
 * pings, its own requests), reading, the agent instance with its restart
 * policy, and flow control between a caller and its instance. */
#include "router/dialect/mcp/session_impl.h"

/* ---- caller frames ---------------------------------------------------- */

static void cache_copy(char **dst, size_t *dst_len, const char *p, size_t len)
{
    char *n = malloc(len);
    if (n == NULL)
        return;
    memcpy(n, p, len);
    free(*dst);
    *dst = n;
    *dst_len = len;
}

/* Elements of the batch <f> of kind <kind> (and in <*all>, all of them),
 * or -1 when one is not an object tg_mcp_scan accepts (or the array is
 * empty). */
static int batch_kinds(const char *f, size_t n, tg_mcp_kind_t kind, int *all_out)
{
    tg_jspan_t top, el;
    if (tg_jscan_value(f, n, 0, &top) < 0 || top.type != TG_J_ARRAY)
        return -1;
    tg_jarr_iter_t it;
    int rc, all = 0, hits = 0;
    tg_jarr_begin(&it, f, top);
    while ((rc = tg_jarr_next(&it, &el)) == 1) {
        tg_mcp_env_t env;
        if (el.type != TG_J_OBJECT || tg_mcp_scan(f + el.off, el.len, &env) < 0)
            return -1;
        all++;
        hits += env.kind == kind;
    }
    *all_out = all;
    return rc < 0 || all == 0 ? -1 : hits;
}

/* A caller line tg_mcp_scan refused (rare path): tg_mcp_judge answers it
 * as every front does (-32700 not JSON, -32600 no valid request), with
 * its id whenever one was read before the fault. Audited either way. */
static void caller_invalid(mcp_sess_t *w, const char *frame, size_t slen)
{
    tg_mcp_verdict_t v;
    tg_mcp_judge(frame, slen, &v);
    const char *id = NULL;
    size_t id_len = 0;
    if (v.id.type != TG_J_NONE && v.id.len <= TG_ID_MAX) {
        id = frame + v.id.off;
        id_len = v.id.len;
    }
    mcp_rpc_error(w, id, id_len, v.code, v.message);
    tg_audit_ev_t ev;
    char callid[TG_ID_MAX + 1];
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, v.reason, slen);
    if (id != NULL) {
        mcp_caller_id_text(id, id_len, callid);
        ev.call_id = callid;
    }
    emit(w, &ev);
}

static void on_caller_frame(mcp_sess_t *w, tg_block_t *b, size_t start, size_t nl)
{
    w->last_frame_ms = uv_now(w->gw->loop);
    const char *frame = b->data + start;
    size_t flen = nl - start; /* without the newline */
    size_t len = flen + 1;
    size_t slen = flen;
    if (slen > 0 && frame[slen - 1] == '\r')
        slen--;
    tg_mcp_env_t env;

    reg_set(w, w->gw->reg_frame_in, flen);
    if (slen == 0)
        return; /* blank line: nothing to do */
    if (tg_mcp_scan(frame, slen, &env) < 0) {
        caller_invalid(w, frame, slen);
        return;
    }
    if (w->hub != NULL)
        mcp_hub_frame(w->hub, b, frame, len, &env);
    else
        mcp_sess_dispatch(w, b, frame, len, &env);
}

void mcp_sess_dispatch(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env)
{
    size_t flen = len - 1;
    w->hub_dirty = true; /* (read only behind a hub: mcp_hub_flush_legs) */
    if (w->awaiting_init && mcp_before_init(w, frame, env))
        return; /* serve, no instance yet (session_life.c) */
    if (env->kind == TG_MCP_BATCH) {
        size_t slen = flen;
        if (slen > 0 && frame[slen - 1] == '\r')
            slen--;
        int has = tg_mcp_batch_has_call(frame, slen);
        if (has != 0) {
            mcp_rpc_error(w, NULL, 0, -32600,
                      has > 0 ? "invalid request: a batch may not hold tools/call; send each "
                                "tools/call on its own line"
                              : "invalid request: malformed batch");
            return;
        }
        if (mcp_agent_writable(w) && w->astate == TG_AGENT_RUNNING) {
            tg_out_slice(&w->inst->a.p.wr, b, frame, len);
            int all;
            if (batch_kinds(frame, slen, TG_MCP_REQUEST, &all) > 0 && w->batches_open < UINT32_MAX)
                w->batches_open++;
        }
        return;
    }
    if (env->kind == TG_MCP_REQUEST && env->id.len > TG_ID_MAX) {
        mcp_rpc_error(w, NULL, 0, -32600, "invalid request: id longer than 128 bytes");
        return;
    }
    if (env->kind == TG_MCP_REQUEST && env->is_tools_call) {
        mcp_admit_call(w, b, frame, len, env);
        return;
    }
    if (env->kind == TG_MCP_NOTIFICATION && env->is_tools_call) {
        /* A tools/call without an id cannot be answered, so it cannot be
         * limited either: it is dropped, never forwarded unbounded. */
        tg_audit_ev_t ev;
        tg_adm_audit_refused(&ev, agent_name(w), w->caller, "tools_call_without_id", flen);
        emit(w, &ev);
        return;
    }
    if (env->kind == TG_MCP_NOTIFICATION && tg_jstr_eq(frame, env->method, "notifications/cancelled")) {
        mcp_caller_cancel(w, b, frame, len, env);
        return;
    }
    if (env->kind == TG_MCP_NOTIFICATION && tg_jstr_eq(frame, env->method, "notifications/initialized"))
        cache_copy(&w->initd_frame, &w->initd_len, frame, len);

    if (env->kind == TG_MCP_REQUEST) {
        bool is_init = tg_jstr_eq(frame, env->method, "initialize");
        if (w->phase != TG_P_RUN || w->astate != TG_AGENT_RUNNING || w->npass >= TG_MAX_PASSTHRU) {
            tg_denial_t d;
            char reqid[32];
            tg_deny_code_t code = w->phase != TG_P_RUN     ? TG_DENY_SHUTTING_DOWN
                                  : w->astate != TG_AGENT_RUNNING ? TG_DENY_UNAVAILABLE
                                                           : TG_DENY_CONCURRENCY;
            mcp_denial_init(w, &d, code, NULL, reqid, sizeof(reqid));
            d.limit = code == TG_DENY_CONCURRENCY ? "concurrency" : code == TG_DENY_UNAVAILABLE ? "agent" : "shutdown";
            d.detail = code == TG_DENY_CONCURRENCY ? "too many requests awaiting an answer"
                                                   : code == TG_DENY_UNAVAILABLE ? "agent is restarting"
                                                                                 : "toolgate is shutting down";
            mcp_deny(w, frame + env->id.off, env->id.len, &d);
            return;
        }
        int op = mcp_task_op_of(frame, env->method);
        mcp_call_t *task = NULL;
        if (op != TG_TASK_OP_NONE && mcp_task_caller_request(w, frame, env, &task))
            return;
        mcp_call_t *c = mcp_call_alloc(w, K_PASS);
        if (c == NULL) {
            mcp_rpc_error(w, frame + env->id.off, env->id.len, -32603, "toolgate: request table full");
            return;
        }
        c->tools_list = tg_jstr_eq(frame, env->method, "tools/list");
        c->b26 = mcp_b26_kind(w, frame, env->method);
        if (w->hub != NULL && env->progress_token.type == TG_J_STRING)
            c->ptok = mcp_hub_ptok(w, frame, env->progress_token);
        c->hub_ask = w->hub_tag;
        w->hub_tag = 0;
        if (task != NULL) {
            c->task_op = (uint8_t)op;
            c->task_of = task->cc.idx;
            c->task_of_id = task->cc.id;
        }
        memcpy(c->caller_id, frame + env->id.off, env->id.len);
        c->caller_id_len = env->id.len;
        if (is_init) {
            cache_copy(&w->init_frame, &w->init_len, frame, len);
            w->init_id_off = env->id.off;
            w->init_id_len = env->id.len;
        }
        mcp_to_agent_spliced(w, b, frame, len, env->id.off, env->id.len, c->cc.id);
        return;
    }
    /* Notifications and the caller's answers to agent requests pass as they are. */
    if (mcp_agent_writable(w) && w->astate != TG_AGENT_BACKOFF)
        tg_out_slice(&w->inst->a.p.wr, b, frame, len);
}

/* An over-cap caller frame: its top-level members are read as it streams
 * past the cap (tg_mcp_head_*), never buffered, so an id written after the
 * arguments (the official TypeScript SDK writes "id" last) is answered. */
static void on_caller_oversize(mcp_sess_t *w, const char *head, size_t len)
{
    tg_mcp_head_init(&w->over);
    tg_mcp_head_feed(&w->over, head, len);
}

static void on_caller_skipping(mcp_sess_t *w, const char *p, size_t len)
{
    tg_mcp_head_feed(&w->over, p, len);
}

/* The frame_too_large denial for a <what> ("request", "agent response")
 * of <total> bytes; <reqid> and <detail> are the caller's buffers. */
static void frame_denial(mcp_sess_t *w, tg_denial_t *d, const mcp_call_t *c, char reqid[32],
                         char detail[96], const char *what, uint64_t total)
{
    char cap[24];
    mcp_denial_init(w, d, TG_DENY_FRAME, c, reqid, 32);
    d->limit = "frame";
    d->scope = "instance";
    d->observed = (int64_t)total;
    d->cap = (int64_t)w->gw->cfg->max_frame_bytes;
    d->unit = "bytes";
    d->config_path = w->gw->path_frame;
    tg_unit_fmt_bytes(cap, sizeof(cap), w->gw->cfg->max_frame_bytes);
    snprintf(detail, 96, "%s of %" PRIu64 " bytes > %s", what, total, cap);
    d->detail = detail;
}

static void on_caller_skipped(mcp_sess_t *w, uint64_t total)
{
    tg_denial_t d;
    char reqid[32], detail[96];
    frame_denial(w, &d, NULL, reqid, detail, "request", total);
    reg_set(w, w->gw->reg_frame_in, w->gw->cfg->max_frame_bytes);
    /* The id wherever it came in the frame; null only when none could be
     * read (not an object, a repeated or over-long id) or the frame is a
     * response (JSON-RPC answers requests), so the caller hears of its
     * frame either way. */
    const char *id = NULL;
    size_t id_len = 0;
    bool has_id = tg_mcp_head_id(&w->over, &id, &id_len) == 1 &&
                  (w->over.method || !w->over.response) && id_len <= TG_ID_MAX;
    if (has_id)
        mcp_deny(w, id, id_len, &d);
    else
        mcp_deny(w, NULL, 0, &d);
    tg_audit_ev_t ev;
    denied_ev(w, &ev, NULL);
    ev.code = tg_deny_name(TG_DENY_FRAME);
    ev.limit.type = "frame";
    ev.limit.scope = "instance";
    ev.limit.observed = (int64_t)total;
    ev.limit.cap = (int64_t)w->gw->cfg->max_frame_bytes;
    ev.bytes_in = (int64_t)total;
    char callid[TG_ID_MAX + 1];
    if (has_id) {
        mcp_caller_id_text(id, id_len, callid);
        ev.call_id = callid;
    }
    emit(w, &ev);
    tg_mcp_head_init(&w->over);
}

/* ---- agent frames ----------------------------------------------------- */

/* A tool name of a tools/list answer into the instance's registry (past
 * its bound, the rest are not kept). */
static int tool_listed(void *ctx, const char *name, size_t len)
{
    return tg_toolreg_add(ctx, name, len) == -ENOSPC ? -1 : 0;
}

static void to_caller_spliced(mcp_sess_t *w, tg_block_t *b, const char *p, size_t len,
                              size_t id_off, size_t id_len, const char *cid, size_t cid_len)
{
    if (mcp_cdead(w))
        return;
    tg_out_slice(w->cw, b, p, id_off);
    tg_out_copy(w->cw, cid, cid_len);
    tg_out_slice(w->cw, b, p + id_off + id_len, len - id_off - id_len);
}

static void agent_running(mcp_sess_t *w)
{
    w->astate = TG_AGENT_RUNNING;
    tg_pipe_pump(&w->ag->r, w);
}

static void on_agent_response(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                              const tg_mcp_env_t *env)
{
    uint64_t id;
    mcp_call_t *c = NULL;
    if (env->id.type == TG_J_NUMBER && tg_jnum_u64(frame, env->id, UINT64_MAX, &id) == 0)
        c = mcp_call_by_agent_id(w, id);
    if (c == NULL) {
        if (env->id.type == TG_J_NUMBER && tg_jnum_u64(frame, env->id, UINT64_MAX, &id) == 0 &&
            id <= w->ag->r.tab.last_id) {
            tg_audit_ev_t ev;
            char reqid[32];
            tg_audit_ev_init(&ev);
            snprintf(reqid, sizeof(reqid), "tg-%" PRIx64, id);
            ev.event = "call.late_result";
            ev.agent = agent_name(w);
            ev.request_id = reqid;
            ev.bytes_out = (int64_t)len;
            emit(w, &ev);
        } else {
            w->unmatched_responses++;
        }
        return;
    }
    switch (c->kind) {
    case K_CALL:
        if (c->cc.state == TG_CALL_INFLIGHT &&
            (c->task_req || c->task) &&
            mcp_task_on_response(w, c, b, frame, len, env, to_caller_spliced))
            break;
        if (c->cc.state == TG_CALL_INFLIGHT) {
            if (!w->b26_on ||
                !mcp_b26_result(w, B26_RESULT, frame, len, env, c->caller_id, c->caller_id_len))
                to_caller_spliced(w, b, frame, len, env->id.off, env->id.len, c->caller_id,
                                  c->caller_id_len);
            mcp_audit_call(w, c, "call.completed", env->has_error ? "error" : "ok", NULL, NULL);
        } else {
            tg_audit_ev_t ev;
            char reqid[32];
            tg_audit_ev_init(&ev);
            request_id_of(c, reqid, sizeof(reqid));
            ev.event = "call.late_result";
            ev.agent = agent_name(w);
            ev.request_id = reqid;
            if (c->tool_name_len > 0)
                ev.tool = c->tool_name;
            ev.stage = c->cc.stage;
            ev.bytes_out = (int64_t)len;
            emit(w, &ev);
        }
        tg_pipe_release(&c->cc);
        break;
    case K_PASS:
        if (c->hub_ask != 0) {
            /* Asked by its hub (initialize, a list): the hub answers. */
            if (c->tools_list && env->has_result)
                (void)tg_mcp_tools_listed(frame, len, tool_listed, &w->tools);
            uint32_t ask = c->hub_ask - 1u;
            mcp_call_free(c);
            mcp_hub_answer(w, ask, frame, len, env);
            mcp_check_drained(w);
            break;
        }
        /* The tools its instance listed: what the session sent passes as
         * it is, toolgate only reads the answer. */
        if (c->tools_list && env->has_result)
            (void)tg_mcp_tools_listed(frame, len, tool_listed, &w->tools);
        if (c->b26 == B26_NONE || !mcp_b26_answer(w, c, frame, len, env))
            to_caller_spliced(w, b, frame, len, env->id.off, env->id.len, c->caller_id,
                              c->caller_id_len);
        if (c->task_op != TG_TASK_OP_NONE)
            mcp_task_on_pass_answer(w, c, frame, len, env);
        mcp_call_free(c);
        mcp_check_drained(w);
        break;
    case K_REPLAY_INIT:
        mcp_call_free(c);
        if (w->initd_frame != NULL && mcp_agent_writable(w))
            tg_out_copy(&w->inst->a.p.wr, w->initd_frame, w->initd_len);
        agent_running(w);
        break;
    case K_PING: {
        mcp_call_t *z = mcp_call_at(w->ag, c->ping_for);
        mcp_call_free(c);
        if (z->kind == K_CALL && z->cc.id == c->ping_for_id && z->cc.state == TG_CALL_ZOMBIE)
            tg_pipe_release(&z->cc);
        break;
    }
    default:
        break;
    }
}

/* An agent frame toolgate will not relay: dropped, counted and audited
 * as its length <flen>, never its content. */
static void agent_invalid(mcp_sess_t *w, size_t flen)
{
    w->invalid_agent_frames++;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "agent.invalid_frame";
    ev.agent = agent_name(w);
    ev.bytes_out = (int64_t)flen;
    ev.count = (int64_t)w->invalid_agent_frames;
    emit(w, &ev);
}

static void on_agent_frame(mcp_sess_t *w, tg_block_t *b, size_t start, size_t nl)
{
    const char *frame = b->data + start;
    size_t flen = nl - start;
    size_t len = flen + 1;
    size_t slen = flen;
    if (slen > 0 && frame[slen - 1] == '\r')
        slen--;
    tg_mcp_env_t env;

    reg_set(w, w->ag->r.reg_frame_out, flen);
    if (slen == 0)
        return;
    if (tg_mcp_scan(frame, slen, &env) < 0) {
        agent_invalid(w, flen);
        return;
    }
    if (env.kind == TG_MCP_RESPONSE) {
        on_agent_response(w, b, frame, len, &env);
        return;
    }
    /* An array (issue 12 item 21): MCP 2025-06-18 has no batches, but a
     * caller's batch without tools/call is forwarded as it came, so the
     * agent may answer it with a batch of responses (ids as the caller
     * wrote them). That, and only while such a batch is unanswered, goes
     * to the caller; any other array ([1,2,3], requests the caller could
     * not tell apart) is an invalid agent frame. */
    if (env.kind == TG_MCP_BATCH) {
        int all = 0;
        int n = batch_kinds(frame, slen, TG_MCP_RESPONSE, &all);
        if (w->batches_open == 0 || n <= 0 || n != all) {
            agent_invalid(w, flen);
            return;
        }
        w->batches_open--;
    }
    /* Requests and notifications from the agent go to the caller as they
     * are (through a hub: an agent's request ids made unique, list
     * changes merged). */
    if (w->hub != NULL && env.kind != TG_MCP_BATCH && mcp_hub_from_agent(w, b, frame, len, &env))
        ;
    else if (w->b26_on && mcp_b26_agent_request(w, frame, &env))
        ; /* a 2026 client takes no requests: answered here */
    else if (!mcp_cdead(w))
        tg_out_slice(w->cw, b, frame, len);
    if (env.kind == TG_MCP_NOTIFICATION &&
        env.method.len == sizeof("\"notifications/tools/list_changed\"") - 1 &&
        tg_jstr_eq(frame, env.method, "notifications/tools/list_changed"))
        tg_toolreg_clear(&w->tools); /* the next tools/list fills it again */
    if (env.kind == TG_MCP_NOTIFICATION && env.method.len == sizeof("\"notifications/tasks/status\"") - 1 &&
        tg_jstr_eq(frame, env.method, "notifications/tasks/status"))
        mcp_task_on_status(w, frame, &env);
}

static void on_agent_oversize(mcp_sess_t *w, const char *head, size_t len)
{
    tg_mcp_head_init(&w->agent_over);
    tg_mcp_head_feed(&w->agent_over, head, len);
}

static void on_agent_skipping(mcp_sess_t *w, const char *p, size_t len)
{
    tg_mcp_head_feed(&w->agent_over, p, len);
}

/* Answer the request <c> that an over-cap agent reply of <total> bytes
 * was (or may have been) for, with frame_too_large for its id. */
static void agent_reply_too_large(mcp_sess_t *w, mcp_call_t *c, uint64_t total)
{
    tg_denial_t d;
    char reqid[32], detail[96];
    frame_denial(w, &d, c, reqid, detail, "agent response", total);
    mcp_deny(w, c->caller_id, c->caller_id_len, &d);
    if (c->kind == K_CALL) {
        mcp_audit_call(w, c, "call.denied", "denied", &d, "response");
        tg_pipe_release(&c->cc);
    } else {
        tg_audit_ev_t ev;
        char callid[TG_ID_MAX + 1];
        denied_ev(w, &ev, &d);
        ev.stage = "response";
        ev.bytes_out = (int64_t)total;
        mcp_caller_id_text(c->caller_id, c->caller_id_len, callid);
        ev.call_id = callid;
        emit(w, &ev);
        mcp_call_free(c);
    }
}

static bool awaits_answer(const mcp_sess_t *w, const mcp_call_t *c)
{
    return c->w == w && (c->kind == K_PASS || (c->kind == K_CALL && c->cc.state == TG_CALL_INFLIGHT));
}

/* An agent reply over max_frame_bytes (issue 12 item 23): every request
 * toolgate forwarded is answered. With the id read from the head, its
 * request gets frame_too_large. Without it (the id comes after a result
 * cut by the cap), the reply cannot be matched: when one request of this
 * session awaits the agent, it is that one's; when several do, the reply
 * was one of theirs and that one will never be answered by the agent. A
 * tools/call has its deadline and is answered (timeout) by it; a
 * pass-through request (tools/list, resources/read...) has none, so every
 * pass-through request awaiting the agent gets frame_too_large — the
 * innocent ones can be sent again, which beats a client waiting forever;
 * their real replies are then dropped as unmatched. */
static void on_agent_skipped(mcp_sess_t *w, uint64_t total)
{
    const char *idt;
    size_t idn;
    uint64_t v = 0;
    bool has_id = false;
    if (tg_mcp_head_id(&w->agent_over, &idt, &idn) == 1) {
        tg_jspan_t sp;
        has_id = tg_jscan_value(idt, idn, 0, &sp) >= 0 && sp.type == TG_J_NUMBER &&
                 tg_jnum_u64(idt, sp, UINT64_MAX, &v) == 0;
    }
    mcp_call_t *c = has_id ? mcp_call_by_agent_id(w, v) : NULL;
    bool had_id = has_id || w->agent_over.method;
    reg_set(w, w->ag->r.reg_frame_out, w->gw->cfg->max_frame_bytes);
    tg_mcp_head_init(&w->agent_over);
    if (c != NULL && awaits_answer(w, c)) {
        agent_reply_too_large(w, c, total);
        mcp_check_drained(w);
        return;
    }
    tg_log_warn("dropped a %" PRIu64 "-byte frame from agent '%s' over max_frame_bytes (%" PRIu64
                "; raise %s)",
                total, agent_name(w), w->gw->cfg->max_frame_bytes, w->gw->path_frame);
    if (had_id)
        return; /* a reply to nothing live (late), or a request or notification */
    uint32_t waiting = 0, last = 0;
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        if (awaits_answer(w, mcp_call_at(w->ag, i))) {
            waiting++;
            last = i;
        }
    }
    if (waiting == 1) {
        agent_reply_too_large(w, mcp_call_at(w->ag, last), total);
    } else {
        for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
            mcp_call_t *p = mcp_call_at(w->ag, i);
            if (p->w == w && p->kind == K_PASS)
                agent_reply_too_large(w, p, total);
        }
    }
    mcp_check_drained(w);
}

/* ---- reading ---------------------------------------------------------- */

typedef void (*frame_fn)(mcp_sess_t *, tg_block_t *, size_t, size_t);
typedef void (*over_fn)(mcp_sess_t *, const char *, size_t);
typedef void (*skip_fn)(mcp_sess_t *, uint64_t);

/* The handlers of one direction's frames. */
typedef struct frame_ops {
    frame_fn frame;
    over_fn over;     /* the head of an over-cap frame */
    over_fn skipping; /* more of it, streaming past */
    skip_fn skipped;  /* its end */
} frame_ops_t;

static const frame_ops_t caller_ops = {on_caller_frame, on_caller_oversize, on_caller_skipping,
                                       on_caller_skipped};
static const frame_ops_t agent_ops = {on_agent_frame, on_agent_oversize, on_agent_skipping,
                                      on_agent_skipped};

/* Frames handed on between two asks of a drain's <hold>: asking costs more
 * than a frame's share of the rest; the audit queue's crowded mark leaves
 * room for a quarter of it (1 024 events by default). */
#define HOLD_EVERY 16 /* fixed internal bound: frames between two checks of the audit queue */

/* Hand every whole frame of <in> to its handler, or (<hold> non-NULL) only
 * until <hold> says to stop (asked every HOLD_EVERY frames), the rest
 * staying in <in>; how many frames ended (an over-cap frame counts once,
 * at its end: its pieces streaming past are no finished frame, so they
 * never reset a frame clock). */
static unsigned drain_frames(mcp_sess_t *w, tg_in_t *in, const frame_ops_t *ops,
                             bool (*hold)(mcp_sess_t *))
{
    unsigned n = 0, ended = 0;
    for (;; n++) {
        if (hold != NULL && n % HOLD_EVERY == 0 && n > 0 && hold(w))
            break;
        size_t s = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = in->blk;
        if (b == NULL)
            break; /* nothing read since the block went back (tg_in_settle) */
        tg_nd_ev_t ev = tg_ndjson_next(&in->nd, b->data, in->len, &in->pos, &s, &e, &total);
        if (ev == TG_ND_NEED_MORE)
            break;
        if (ev == TG_ND_FRAME) {
            if (e - s > in->hint)
                in->hint = e - s;
            ops->frame(w, b, s, e);
            ended++;
        } else if (ev == TG_ND_OVERSIZE || ev == TG_ND_SKIPPING) {
            (ev == TG_ND_OVERSIZE ? ops->over : ops->skipping)(w, b->data + s, e - s);
            /* Consumed: nothing of this frame stays buffered. */
            if (in->pos == in->len && b->refs == 1)
                in->len = in->pos = 0;
        } else {
            ops->skipping(w, b->data + s, e - s);
            ops->skipped(w, total);
            ended++;
        }
    }
    tg_in_settle(in);
    return ended;
}

void mcp_caller_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp_sess_t *w = h->data;
    tg_in_alloc(&w->crd, buf);
}

static void backpressure(mcp_sess_t *w);
static void agent_side_backpressure(mcp_sess_t *w, size_t high);

/* A Unix caller began a frame and did not finish it within frame_timeout
 * of its first byte, however its bytes trickled in: it holds a buffer and
 * a connection slot for nothing (a slowloris). Say so and hang up. The
 * audit event counts the bytes held, never shows them. */
static void on_frame_timeout(uv_timer_t *t)
{
    mcp_sess_t *w = t->data;
    uint64_t cap = w->gw->cfg->frame_timeout_ms;
    char msg[160];
    snprintf(msg, sizeof(msg),
             "invalid request: a frame begun %" PRIu64
             " ms ago is not complete (router.frame_timeout); closing",
             cap);
    mcp_rpc_error(w, NULL, 0, -32600, msg);
    reg_set(w, w->gw->reg_frame_time, cap);
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "frame_timeout", (w->crd.len - w->crd.pos));
    ev.limit.type = "frame_timeout";
    ev.limit.scope = "session";
    ev.limit.observed = (int64_t)(now_ms(w) - w->frame_t0);
    ev.limit.cap = (int64_t)cap;
    emit(w, &ev);
    if (w->cin != NULL)
        uv_read_stop(w->cin);
    w->caller_eof = true;
    mcp_begin_shutdown(w, "caller left a frame unfinished");
    if (w->hub != NULL)
        mcp_hub_shutdown(w->hub, "caller left a frame unfinished", false);
    mcp_flush_all(w);
}

/* EOF after a last line without its newline (issue 12 item 21): the line
 * is complete, so it is judged like any other (answered, audited), as if
 * the newline had come; an over-cap one ends its skip and is refused. */
static void caller_last_line(mcp_sess_t *w)
{
    if (w->crd.len == w->crd.pos && !w->crd.nd.skipping)
        return;
    uv_buf_t room;
    tg_in_alloc(&w->crd, &room);
    if (room.len == 0)
        return;
    room.base[0] = '\n';
    tg_in_commit(&w->crd, 1);
    drain_frames(w, &w->crd, &caller_ops, NULL);
}

/* The audit queue is crowded (issue 12 item 2): hand no more of the
 * caller's frames on; they wait in its read buffer (and the caller on its
 * socket) until a write makes room, so a flood of calls cannot make the
 * audit drop the events of those calls. */
static bool caller_audit_hold(mcp_sess_t *w)
{
    return w->gw->audit != NULL && tg_audit_crowded(w->gw->audit);
}

/* A Unix caller's frames completed in a read: the registry's
 * caller.frame_timeout_ms is told how long the first of them took from
 * its first byte (0: it came whole), and its clock stops (frame_settle
 * starts one for the next unfinished frame). */
static void frame_done(mcp_sess_t *w)
{
    if (!w->frame_clock || w->stuck_armed)
        return;
    bool running = uv_is_active((uv_handle_t *)&w->idle_timer);
    reg_set(w, w->gw->reg_frame_time, running ? now_ms(w) - w->frame_t0 : 0);
    if (running)
        uv_timer_stop(&w->idle_timer);
}

/* The frame clock of a Unix caller (after every read and flow change): it
 * runs while a frame is unfinished, from the frame's first byte, not from
 * the last read (a caller dripping bytes gets no more time than one
 * sending nothing). It does not run while toolgate itself holds the
 * caller back (its reads stopped by backpressure, whole frames held for
 * the audit queue): that time is not the caller's. A caller that does
 * not read its answers has the other clock (stuck_armed) instead. */
static void frame_settle(mcp_sess_t *w)
{
    if (!w->frame_clock || w->stuck_armed)
        return;
    bool want = !w->caller_eof && !w->caller_stopped && !w->held_frames &&
                (w->crd.len > w->crd.pos || w->crd.nd.skipping);
    bool running = uv_is_active((uv_handle_t *)&w->idle_timer);
    if (want && !running) {
        w->frame_t0 = now_ms(w);
        uv_timer_start(&w->idle_timer, on_frame_timeout, w->gw->cfg->frame_timeout_ms, 0);
    } else if (!want && running) {
        uv_timer_stop(&w->idle_timer);
    }
}

/* Hand on the whole frames the caller's read buffer holds (up to a
 * crowded audit queue, which leaves the rest held). */
static void caller_consume(mcp_sess_t *w)
{
    unsigned n = drain_frames(w, &w->crd, &caller_ops, caller_audit_hold);
    w->held_frames = caller_audit_hold(w) && w->crd.len > w->crd.pos;
    if (n > 0)
        frame_done(w);
    /* the clock of what is left: frame_settle, from mcp_flush_all */
}

void mcp_caller_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp_sess_t *w = s->data;
    if (n > 0) {
        tg_in_commit(&w->crd, (size_t)n);
        caller_consume(w);
    } else if (n < 0) {
        uv_read_stop(s);
        if (n == UV_EOF)
            caller_last_line(w);
        w->caller_eof = true;
        if (n != UV_EOF) {
            tg_log_warn("reading the caller failed: %s", uv_strerror((int)n));
            if (w->conn != NULL)
                mcp_set_cdead(w); /* the connection is gone both ways */
        } else if (w->conn != NULL && tg_io_peer_gone(s)) {
            mcp_set_cdead(w); /* closed, not half-closed: nobody reads the answers */
        }
        /* A connection's caller that left (not one that only stopped
         * sending: it still reads its answers) has its calls cancelled
         * at the agent rather than left to run for nobody. wrap's stdin
         * is a pipe: its EOF is the end of the requests, whose answers
         * are still owed. */
        if (w->conn != NULL && mcp_cdead(w))
            mcp_caller_gone(w);
        mcp_begin_shutdown(w, w->conn != NULL ? "caller left" : "caller closed stdin");
        if (w->hub != NULL)
            mcp_hub_shutdown(w->hub, w->conn != NULL ? "caller left" : "caller closed stdin",
                             w->conn != NULL && mcp_cdead(w));
    }
    mcp_flush_all(w);
}

static void agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp_inst_t *inst = h->data;
    tg_in_alloc(&inst->a.p.rd, buf);
}


static void agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp_inst_t *inst = s->data;
    mcp_sess_t *w = inst->w;
    if (n > 0) {
        tg_in_commit(&inst->a.p.rd, (size_t)n);
        if (w->inst == inst)
            drain_frames(w, &inst->a.p.rd, &agent_ops, NULL);
        else
            inst->a.p.rd.len = inst->a.p.rd.pos = 0;
    } else if (n < 0) {
        uv_read_stop(s);
        tg_ainst_out_eof(&inst->a);
    }
    mcp_flush_all(w);
}

/* ---- agent process ---------------------------------------------------- */

static void inst_closed(tg_ainst_t *a)
{
    mcp_inst_t *inst = (mcp_inst_t *)a;
    mcp_sess_t *w = inst->w;
    free(inst);
    if (w->phase == TG_P_DONE && w->inst == NULL)
        mcp_finish(w);
    mcp_sess_release(w); /* the instance held its session until now */
}

/* Denial <d> of call <c> (NULL: a request that is not a call) whose
 * instance <inst> was killed for a resource: which, and how much against
 * what; <path> (TG_NAME_MAX + 64 bytes) and <detail> hold its texts. */
static void resource_denial(mcp_sess_t *w, const mcp_inst_t *inst, const mcp_call_t *c,
                            tg_denial_t *d, char *reqid, char *path, char *detail, size_t cap)
{
    const tg_verdict_t *v = &inst->a.p.watch.verdict;
    mcp_denial_init(w, d, TG_DENY_RESOURCE, c, reqid, 32);
    d->limit = tg_res_name(v->res);
    d->observed = (int64_t)v->used;
    d->cap = (int64_t)v->limit;
    d->unit = v->res == TG_RES_MEMORY || v->res == TG_RES_DISK ? "bytes"
              : v->res == TG_RES_PIDS                          ? "processes"
                                                               : NULL;
    snprintf(path, TG_NAME_MAX + 64, "agents.%s.resources.%s.limit", agent_name(w),
             tg_res_name(v->res));
    d->config_path = path;
    snprintf(detail, cap, "%s %s while the %s ran (used %" PRIu64 " of %" PRIu64 ")",
             tg_res_name(v->res),
             v->kind == TG_VERDICT_OOM           ? "ran out (OOM kill)"
             : v->kind == TG_VERDICT_PIDS_DENIED ? "exhausted"
                                                 : "over its limit",
             c != NULL ? "call" : "request", v->used, v->limit);
    d->detail = detail;
}

static void fail_inflight(mcp_sess_t *w, mcp_inst_t *inst)
{
    tg_denial_t d;
    char reqid[32], detail[200], path[TG_NAME_MAX + 64];
    bool killed_for = inst->a.p.watch.verdict.kind != TG_VERDICT_OK;
    /* toolgate stopped the agent itself (the caller's input ended,
     * SIGTERM, a reload's drain) with requests still running
     * kill_grace_period after it asked them to finish: they end with the
     * shutdown, the agent did not fail them. */
    bool shutdown = w->phase != TG_P_RUN && inst->a.stopping;
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        mcp_call_t *c = mcp_call_at(w->ag, i);
        if (c->kind == K_FREE || c->w != w)
            continue;
        bool pending = c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE ||
                       c->cc.state == TG_CALL_SLOT;
        bool call = c->kind == K_CALL && pending;
        if (c->kind == K_PASS && c->hub_ask != 0) {
            uint32_t ask = c->hub_ask - 1u;
            mcp_call_free(c);
            mcp_hub_answer(w, ask, NULL, 0, NULL);
            continue;
        }
        if (call && mcp_cdead(w)) {
            /* Its caller left: nobody is denied anything (issue 12, 24). */
            mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "caller_gone");
        } else if (call && killed_for) {
            /* Killed for a resource: say which, and how much against what. */
            resource_denial(w, inst, c, &d, reqid, path, detail, sizeof(detail));
            mcp_deny_call(w, c, &d, "call.denied", "killed");
        } else if (c->kind == K_PASS && killed_for) {
            /* An initialize (or any request) the agent died of: name the
             * resource, as for a call (issue 12, item 28). */
            resource_denial(w, inst, NULL, &d, reqid, path, detail, sizeof(detail));
            mcp_deny(w, c->caller_id, c->caller_id_len, &d);
        } else if ((call || c->kind == K_PASS) && shutdown) {
            mcp_denial_init(w, &d, TG_DENY_SHUTTING_DOWN, call ? c : NULL, reqid, sizeof(reqid));
            d.limit = "shutdown";
            d.config_path = w->ag->r.path_grace;
            snprintf(detail, sizeof(detail),
                     "toolgate is shutting down: the %s still ran when the agent was stopped, "
                     "kill_grace_period after the shutdown began",
                     call ? "call" : "request");
            d.detail = detail;
            if (call)
                mcp_deny_call(w, c, &d, "call.denied", "shutdown");
            else
                mcp_deny(w, c->caller_id, c->caller_id_len, &d);
        } else if (call) {
            mcp_denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
            d.limit = "agent";
            d.retry_after_ms = (int64_t)w->ag->r.acfg->backoff_initial_ms;
            if (inst->a.p.term_signal != 0)
                snprintf(detail, sizeof(detail), "agent %s by signal %d while the call ran",
                         inst->a.p.killed ? "was killed" : "died", inst->a.p.term_signal);
            else
                snprintf(detail, sizeof(detail), "agent exited with status %" PRId64
                         " while the call ran", inst->a.p.exit_status);
            d.detail = detail;
            mcp_deny_call(w, c, &d, "call.denied", inst->a.p.killed ? "killed" : "agent_exited");
        } else if (c->kind == K_PASS) {
            mcp_denial_init(w, &d, TG_DENY_UNAVAILABLE, NULL, reqid, sizeof(reqid));
            d.limit = "agent";
            d.detail = "agent exited before answering";
            mcp_deny(w, c->caller_id, c->caller_id_len, &d);
        }
        tg_route_unqueue(&w->ag->r, &c->cc);
        if (tg_callc_holds_slots(c->cc.state) && c->kind == K_CALL)
            tg_route_release_slots(&w->ag->r, &c->cc, w->climits);
        mcp_call_free(c);
    }
    update_conc_regs(w, -1);
    /* The slots given back (local and fleet) may serve other sessions'
     * waiting calls. */
    tg_pipe_pump(&w->ag->r, w);
}

/* The agent is gone (agent.exited written, the instance closing):
 * answer its calls, then restart, stop, or give up. */
static void inst_gone(tg_ainst_t *a)
{
    mcp_inst_t *inst = (mcp_inst_t *)a;
    mcp_sess_t *w = inst->w;
    tg_toolreg_clear(&w->tools);
    if (w->hub != NULL)
        mcp_hub_leg_down(w);
    if (w->inst == inst)
        w->inst = NULL;
    w->astate = TG_AGENT_DOWN;
    fail_inflight(w, inst);
    /* serve runs an instance per session: the agent is down when the
     * last of them is gone. */
    if (w->gw->metrics_ok && tg_agent_live(w->gw, w->ag->r.idx) == 0)
        tg_metrics_agent_state(&w->gw->metrics, w->ag->r.idx, TG_AGENT_DOWN, 0);
    tg_restarter_exited(&w->rst, tg_ainst_failed(a), tg_ainst_status(a), a->p.term_signal != 0,
                        now_ms(w));
}

/* ---- the restarter's hooks (agent/restart.h) ---------------------------- */

static int sess_spawn(void *owner)
{
    return mcp_agent_spawn(owner);
}

/* A session that no longer runs ends with its instance. */
static bool sess_stopped(void *owner)
{
    return ((mcp_sess_t *)owner)->phase != TG_P_RUN;
}

static void emit_owner(void *owner, tg_audit_ev_t *ev)
{
    emit(owner, ev);
}

static tg_restart_ctx_t sess_where(void *owner)
{
    mcp_sess_t *w = owner;
    return (tg_restart_ctx_t){.gw = w->gw, .acfg = w->ag->r.acfg, .idx = w->ag->r.idx,
                              .reg_restarts = w->ag->reg_restarts, .stop_tail = "stopping",
                              .emit = emit_owner, .owner = w};
}

/* The agent stays down: the session ends, and with it (wrap) toolgate:
 * its exit code is the agent's status, 1 after a crash loop. */
static void sess_settle(void *owner, tg_exit_verdict_t v, int64_t status)
{
    mcp_sess_t *w = owner;
    if (w->hub != NULL && v != TG_EXIT_RESTART && v != TG_EXIT_STOPPED && w->phase == TG_P_RUN) {
        /* A hub's leg whose agent is down for good: its tools stay out,
         * the other agents serve on. */
        tg_log_warn("agent '%s' is down for this session (%s): its tools are left out of the "
                    "lists",
                    agent_name(w), v == TG_EXIT_GIVE_UP ? "restarts exhausted" : "exited");
        w->leg_failed = true;
        w->astate = TG_AGENT_DOWN;
        return;
    }
    switch (v) {
    case TG_EXIT_STOPPED:
        break;
    case TG_EXIT_UNRUNNABLE:
        w->ag->eng->exit_code = (int)status;
        mcp_begin_shutdown(w, "agent command cannot be run");
        break;
    case TG_EXIT_POLICY:
        w->ag->eng->exit_code = (int)status;
        mcp_begin_shutdown(w, "agent exited");
        break;
    case TG_EXIT_GIVE_UP:
        w->ag->eng->exit_code = 1;
        mcp_begin_shutdown(w, "agent restarts exhausted");
        break;
    case TG_EXIT_RESTART:
        w->astate = TG_AGENT_BACKOFF;
        return;
    }
    mcp_finish(w);
}

static void agent_out_drain(tg_out_t *o, void *ctx)
{
    mcp_sess_t *w = ctx;
    (void)o;
    backpressure(w);
}

static void flush_owner(void *owner)
{
    mcp_flush_all(owner);
}

static void stamp_owner(void *owner, tg_audit_ev_t *ev)
{
    stamp(owner, ev);
}

const tg_restarter_ops_t mcp_restart_ops = {
    .spawn = sess_spawn,
    .stopped = sess_stopped,
    .where = sess_where,
    .settle = sess_settle,
    .flush = flush_owner,
};

static const tg_ainst_ops_t inst_ops = {
    .out_alloc = agent_alloc,
    .out_read = agent_read,
    .out_drain = agent_out_drain,
    .gone = inst_gone,
    .closed = inst_closed,
    .flush = flush_owner,
    .stamp = stamp_owner,
};

/* Start one agent instance. On failure: log, count as a crash. */
int mcp_agent_spawn(mcp_sess_t *w)
{
    mcp_inst_t *inst = calloc(1, sizeof(*inst));
    if (inst == NULL)
        return -ENOMEM;
    inst->w = w;
    w->open_handles++; /* released when the instance's last handle closes */
    tg_ainst_init(&inst->a, w->gw, &w->ag->r.acfg, w->ag->r.idx, &w->ag->r.rows, &w->err,
                  &w->err_dropped_reported, &inst_ops, w);
    tg_ainst_spawn_t how = {.inherit_env = w->gw->wrap_mode,
                            .hint = " (check the command after --)",
                            .attempt = w->rst.rs.n};
    int rc = tg_ainst_spawn(&inst->a, &how);
    if (rc < 0) {
        /* uv_spawn itself failed: the command; containment or the
         * pre-flight refused: 1. */
        if (rc == -EAGAIN || rc == -EPERM)
            w->ag->eng->exit_code = 1;
        else if (inst->a.p.proc_init)
            w->ag->eng->exit_code = 127;
        return rc;
    }
    w->inst = inst;
    w->agent_paused = false;
    if (w->gw->metrics_ok)
        tg_metrics_agent_state(&w->gw->metrics, w->ag->r.idx, TG_AGENT_RUNNING, inst->a.p.pid);

    if (w->rst.rs.n > 0 && w->init_frame != NULL) {
        /* Replay the caller's handshake so the session goes on. */
        mcp_call_t *c = mcp_call_alloc(w, K_REPLAY_INIT);
        if (c != NULL) {
            w->astate = TG_AGENT_STARTING;
            mcp_to_agent_spliced(w, NULL, w->init_frame, w->init_len, w->init_id_off, w->init_id_len,
                             c->cc.id);
            return 0;
        }
    }
    agent_running(w);
    return 0;
}

/* ---- flow control ----------------------------------------------------- */

/* The caller has not read its answers for idle_timeout while its write
 * queue stayed over the bound: it holds toolgate's memory for nothing.
 * The session ends (serve: the connection; wrap: toolgate), audited. */
static void on_not_reading(uv_timer_t *t)
{
    mcp_sess_t *w = t->data;
    w->stuck_armed = false;
    if (w->cw->queued_bytes <= 2 * (size_t)w->gw->cfg->max_frame_bytes)
        return;
    tg_log_warn("a caller (%s) did not read its answers for %" PRIu64
                " ms (router.idle_timeout): ending its session",
                w->caller, w->gw->cfg->idle_timeout_ms);
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "caller_not_reading",
                         w->cw->queued_bytes);
    emit(w, &ev);
    mcp_set_cdead(w); /* nothing more will be read by it */
    if (w->cin != NULL && !w->caller_eof)
        uv_read_stop(w->cin);
    w->caller_eof = true;
    mcp_begin_shutdown(w, "caller not reading its answers");
    if (w->hub != NULL)
        mcp_hub_shutdown(w->hub, "caller not reading its answers", false);
    mcp_flush_all(w);
}

/* A write made room in the audit queue: hand on the frames held in the
 * caller's read buffer, then read the caller again if nothing else holds
 * it back (mcp_flush_all ends in backpressure). */
static void on_audit_room(tg_audit_room_t *r)
{
    mcp_sess_t *w = (mcp_sess_t *)((char *)r - offsetof(mcp_sess_t, audit_room));
    if (w->held_frames)
        caller_consume(w);
    mcp_flush_all(w);
}

static void backpressure(mcp_sess_t *w)
{
    size_t high = 2 * (size_t)w->gw->cfg->max_frame_bytes;
    /* caller -> agent: stop reading the caller while the agent lags, or
     * while the caller does not read what it is owed (answers toolgate
     * makes itself, denials and parse errors, included): nothing a caller
     * sends can grow toolgate past the bounds. */
    size_t toward_agent = (w->inst != NULL ? w->inst->a.p.wr.queued_bytes : 0) + w->ag->r.queued_frame_bytes;
    if (w->hub != NULL && w->leg != 0) {
        /* A hub's leg: its lead reads the caller, for every leg. */
        reg_set(w, w->ag->r.reg_wq_agent, toward_agent);
        agent_side_backpressure(w, high);
        if (!w->hub->ending && !w->hub->legs[0]->finished)
            backpressure(w->hub->legs[0]);
        return;
    }
    for (uint32_t i = 1; w->hub != NULL && !w->hub->ending && i < w->hub->nlegs; i++) {
        const mcp_sess_t *l = w->hub->legs[i];
        size_t q = (l->inst != NULL ? l->inst->a.p.wr.queued_bytes : 0) + l->ag->r.queued_frame_bytes;
        if (q > toward_agent)
            toward_agent = q;
    }
    size_t owed = mcp_cdead(w) ? 0 : w->cw->queued_bytes;
    reg_set(w, w->ag->r.reg_wq_agent, toward_agent);
    if (!w->caller_eof && w->cin != NULL) {
        if ((toward_agent > high || owed > high) && !w->caller_paused)
            w->caller_paused = true;
        else if (toward_agent <= high / 2 && owed <= high / 2 && w->caller_paused)
            w->caller_paused = false;
        /* ... and while the audit queue is crowded (caller_audit_hold),
         * until a write wakes us (on_audit_room): a hold of its own, which
         * leaves the queues' hysteresis (and a stuck caller's clock) as
         * they are. */
        bool audit_full = w->held_frames || caller_audit_hold(w);
        bool stop = w->caller_paused || audit_full;
        if (stop != w->caller_stopped) {
            if (stop)
                uv_read_stop(w->cin);
            else
                uv_read_start(w->cin, mcp_caller_alloc, mcp_caller_read);
            w->caller_stopped = stop;
        }
        if (audit_full)
            tg_audit_room_wait(w->gw->audit, &w->audit_room, on_audit_room);
    } else {
        tg_audit_room_cancel(&w->audit_room);
    }
    if (owed > high && !w->stuck_armed && !w->caller_eof) {
        w->stuck_armed = true;
        uv_timer_start(&w->idle_timer, on_not_reading, w->gw->cfg->idle_timeout_ms, 0);
    } else if (owed <= high / 2 && w->stuck_armed) {
        w->stuck_armed = false;
        uv_timer_stop(&w->idle_timer);
    }
    frame_settle(w);
    agent_side_backpressure(w, high);
}

/* agent -> caller: stop reading the agent while the caller lags. */
static void agent_side_backpressure(mcp_sess_t *w, size_t high)
{
    reg_set(w, w->gw->reg_wq_caller, w->cw->queued_bytes);
    if (w->inst != NULL && !w->inst->a.p.out_eof) {
        uv_stream_t *s = (uv_stream_t *)&w->inst->a.p.pout;
        if (w->cw->queued_bytes > high && !w->agent_paused) {
            uv_read_stop(s);
            w->agent_paused = true;
        } else if (w->cw->queued_bytes <= high / 2 && w->agent_paused) {
            uv_read_start(s, agent_alloc, agent_read);
            w->agent_paused = false;
        }
    }
}

/* Write what <w> queued for its agent (a hub's leg, after the caller's
 * batch: mcp_hub_flush_legs). Its gauge follows; the lead's backpressure
 * counts every leg's queue. */
void mcp_flush_agent(mcp_sess_t *w)
{
    if (w->inst != NULL && !w->inst->a.p.gone)
        (void)tg_out_flush(&w->inst->a.p.wr);
    else if (w->inst != NULL)
        tg_out_discard(&w->inst->a.p.wr);
    reg_set(w, w->ag->r.reg_wq_agent,
            (w->inst != NULL ? w->inst->a.p.wr.queued_bytes : 0) + w->ag->r.queued_frame_bytes);
}

void mcp_flush_all(mcp_sess_t *w)
{
    if (w->hub != NULL && w->leg == 0)
        mcp_hub_flush_legs(w->hub);
    if (w->inst != NULL && !w->inst->a.p.gone)
        (void)tg_out_flush(&w->inst->a.p.wr);
    else if (w->inst != NULL)
        tg_out_discard(&w->inst->a.p.wr);
    if (!mcp_cdead(w))
        (void)tg_out_flush(w->cw);
    else
        tg_out_discard(w->cw);
    backpressure(w);
}

void mcp_caller_out_drain(tg_out_t *o, void *ctx)
{
    (void)o;
    mcp_sess_t *w = ctx;
    backpressure(w);
    if (w->phase == TG_P_DONE && w->inst == NULL)
        mcp_finish(w);
}

void mcp_caller_out_error(tg_out_t *o, void *ctx, int status)
{
    mcp_sess_t *w = ctx;
    (void)o;
    mcp_set_cdead(w);
    if (status != UV_EPIPE && status != UV_ECANCELED)
        tg_log_warn("writing to the caller failed: %s", uv_strerror(status));
    if (w->conn != NULL && w->phase == TG_P_RUN)
        mcp_caller_gone(w); /* its connection is gone: see mcp_caller_read */
    mcp_begin_shutdown(w, "caller closed stdout");
    /* A session that was only waiting for its output to drain would wait
     * forever (and hold its descriptor): nothing more will drain. */
    if (w->phase == TG_P_DONE && w->inst == NULL)
        mcp_finish(w);
}
