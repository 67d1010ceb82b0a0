/* toolgate wrap: the MCP stdio proxy. See wrap.h and DESIGN.md.
 *
 * Structure. One mcp_sess_t holds the caller (stdin/stdout), the current
 * agent instance (a child process with three pipes), the call table (a
 * slab of mcp_call_t indexed by a small integer), and the limit state
 * (GCRA buckets, concurrency slots, the FIFO wait queue).
 *
 * Ids. Every request the caller sends is forwarded with a toolgate-made
 * integer id, so the agent never sees two live requests with one id (a
 * caller may reuse an id after a timeout) and a late result can be told
 * apart. The id is the call's in the agent's call table (router/call/table.h).
 * Requests the agent sends (sampling, elicitation, roots) pass through with
 * their own ids, and so do the caller's answers to them.
 *
 * Invariants.
 *  - An entry in state INFLIGHT or ZOMBIE holds one agent slot (and one
 *    tool slot when its tool has a concurrency limit); QUEUED holds none.
 *    SLOT holds its local slots while the shared store decides on a fleet
 *    slot (concurrency_scope shared); INFLIGHT and ZOMBIE entries of such
 *    an agent also hold a fleet slot (fslot), and every path that gives
 *    back the local slots gives back the fleet slot with them
 *    (release_slots).
 *  - The caller gets exactly one answer per request id: a result, or one
 *    denial. After a timeout or cancel the entry is a ZOMBIE: its answer
 *    is dropped (call.late_result), and its slot is freed when the agent
 *    proves alive (pong or the late result) or the agent is killed.
 *  - Entries are never freed inside a libuv callback that still uses them;
 *    call_free is the only place an entry returns to the free list.
 *  - Every callback ends with flush_all(): all output of one event goes out
 *    in one uv_write per stream.
 */
#include "router/dialect/mcp/session_impl.h"

static const tg_call_ops_t call_ops;

/* ---- call table ------------------------------------------------------- */

mcp_call_t *mcp_call_at(const tg_mcp_agent_t *ag, uint32_t i)
{
    return tg_ctab_at(&ag->r.tab, i);
}

mcp_call_t *mcp_call_alloc(mcp_sess_t *w, call_kind_t kind)
{
    uint32_t i;
    uint64_t id;
    mcp_call_t *c = tg_ctab_take(&w->ag->r.tab, &i, &id);
    if (c == NULL)
        return NULL;
    tg_callc_reset(&c->cc, &w->ag->r, id, i, tg_gw_now(w->gw));
    memset((char *)c + offsetof(mcp_call_t, w), 0, CALL_CLEARED - offsetof(mcp_call_t, w));
    c->tool_name[0] = '\0';
    c->w = w;
    c->kind = kind;
    if (kind == K_PASS)
        w->npass++;
    if (kind == K_CALL || kind == K_PASS)
        w->nbusy++;
    return c;
}

void mcp_call_free(mcp_call_t *c)
{
    if (c->kind == K_FREE)
        return;
    /* Counters of the session the call belongs to, whoever frees it. */
    if (c->kind == K_PASS)
        c->w->npass--;
    if (c->kind == K_CALL || c->kind == K_PASS)
        c->w->nbusy--;
    c->kind = K_FREE;
    tg_pipe_free_entry(&c->cc);
}

/* The live entry with agent-side id <id> belonging to session <w>: an
 * instance can only answer the calls of its own session. */
mcp_call_t *mcp_call_by_agent_id(mcp_sess_t *w, uint64_t id)
{
    mcp_call_t *c = tg_ctab_lookup(&w->ag->r.tab, id);
    if (c == NULL || c->kind == K_FREE || c->cc.id != id || c->w != w)
        return NULL;
    return c;
}

/* Calls that still need the agent: the drain waits for these. */
uint32_t mcp_busy_calls(const mcp_sess_t *w)
{
    return w->nbusy;
}

/* ---- output to the caller --------------------------------------------- */

static void to_caller(mcp_sess_t *w, const char *p, size_t len)
{
    if (!mcp_cdead(w))
        (void)tg_out_copy(w->cw, p, len);
}

void mcp_deny(mcp_sess_t *w, const char *id, size_t id_len, const tg_denial_t *d)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_denial_mcp(buf, sizeof(buf), id, id_len, d);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

void mcp_rpc_error(mcp_sess_t *w, const char *id, size_t id_len, int code, const char *msg)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_rpc_error(buf, sizeof(buf), id, id_len, code, msg);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

void mcp_denial_init(mcp_sess_t *w, tg_denial_t *d, tg_deny_code_t code, const mcp_call_t *c,
                        char *reqid, size_t reqid_cap)
{
    if (c != NULL)
        request_id_of(c, reqid, reqid_cap);
    tg_adm_denial_init(d, code, agent_name(w), c != NULL ? c->tool_name : NULL,
                       c != NULL ? c->tool_name_len : 0, c != NULL ? reqid : NULL);
}

/* The caller's id as text for audit: a string id without its quotes (the
 * audit encoder checks it; an id with escapes becomes "invalid"). <out>
 * holds TG_ID_MAX + 1 bytes. */
void mcp_caller_id_text(const char *id, size_t len, char *out)
{
    if (len >= 2 && id[0] == '"') {
        id++;
        len -= 2;
    }
    memcpy(out, id, len);
    out[len] = '\0';
}

static void audit_call_why(mcp_sess_t *w, const mcp_call_t *c, const char *event, const char *status,
                           const tg_denial_t *d, const char *stage, const char *reason);

void mcp_audit_call(mcp_sess_t *w, const mcp_call_t *c, const char *event, const char *status,
                       const tg_denial_t *d, const char *stage)
{
    audit_call_why(w, c, event, status, d, stage, NULL);
}

/* mcp_audit_call with <reason> (NULL: none), e.g. caller_gone. */
static void audit_call_why(mcp_sess_t *w, const mcp_call_t *c, const char *event, const char *status,
                           const tg_denial_t *d, const char *stage, const char *reason)
{
    tg_audit_ev_t ev;
    char reqid[32];
    char callid[TG_ID_MAX + 1];
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.agent = agent_name(w);
    ev.caller = w->caller;
    if (c != NULL) {
        request_id_of(c, reqid, sizeof(reqid));
        ev.request_id = reqid;
        if (c->caller_id_len > 0) {
            mcp_caller_id_text(c->caller_id, c->caller_id_len, callid);
            ev.call_id = callid;
        }
        tg_adm_audit_call(&ev, c->tool_name, c->tool_name_len, tg_gw_now(w->gw) - c->cc.t_start,
                          c->cc.bytes_in, c->cc.decided_by);
        if (c->exposed_len > 0)
            ev.exposed_tool = c->exposed;
    }
    ev.status = status;
    ev.stage = stage;
    ev.reason = reason;
    if (w->gw->metrics_ok && c != NULL && c->kind == K_CALL) {
        tg_outcome_t o = tg_adm_outcome(event, status, d, stage);
        tg_metrics_call(&w->gw->metrics, w->ag->r.idx, c->cc.tool, o, now_ms(w) - c->cc.t_start);
        if (d != NULL)
            tg_metrics_denial(&w->gw->metrics, d->code, (int)w->ag->r.idx, c->tool_name,
                              c->tool_name_len, wall_now_ms());
    }
    if (d != NULL)
        tg_adm_audit_denial(&ev, d);
    emit(w, &ev);
}

/* Deny call <c> (answering the caller with its own id), audit, free it. */
void mcp_deny_call(mcp_sess_t *w, mcp_call_t *c, const tg_denial_t *d, const char *event,
                      const char *stage)
{
    if (!mcp_task_denied(w, c, d))
        mcp_deny(w, c->caller_id, c->caller_id_len, d);
    mcp_audit_call(w, c, event, event[5] == 't' ? "timeout" : "denied", d, stage);
}

/* ---- output to the agent ---------------------------------------------- */

/* Forward frame [p, p+len) (with its newline) from block <b> to the agent,
 * the id span [id_off, id_off+id_len) replaced by <agent_id>. */
void mcp_to_agent_spliced(mcp_sess_t *w, tg_block_t *b, const char *p, size_t len,
                             size_t id_off, size_t id_len, uint64_t agent_id)
{
    tg_out_t *o = &w->inst->a.p.wr;
    char num[24];
    size_t n = u64_fmt(num, agent_id, 10);
    if (b != NULL) {
        tg_out_slice(o, b, p, id_off);
        tg_out_copy(o, num, n);
        tg_out_slice(o, b, p + id_off + id_len, len - id_off - id_len);
    } else {
        tg_out_copy(o, p, id_off);
        tg_out_copy(o, num, n);
        tg_out_copy(o, p + id_off + id_len, len - id_off - id_len);
    }
}

/* Forward the held frame of call <c> with its id replaced and, when set,
 * its ttl cut (a task, session_task.c) and its exposed name turned back
 * into the agent's own (behind a hub): up to three splices, written in
 * the order they come in the frame, the rest sliced from the caller's
 * block. */
void mcp_forward_edited(mcp_sess_t *w, mcp_call_t *c)
{
    tg_callc_t *cc = &c->cc;
    tg_out_t *o = &w->inst->a.p.wr;
    const char *p = cc->qframe;
    size_t id_end = cc->qid_off + cc->qid_len;
    if (c->ttl_len == 0 && cc->qblk != NULL && c->name_off >= id_end &&
        c->name_off - id_end <= 192) {
        /* The common frame: the name a little after the id, no task. */
        char mid[24 + 192 + TG_TOOL_NAME_MAX + 2];
        size_t m = u64_fmt(mid, cc->id, 10), gap = c->name_off - id_end;
        memcpy(mid + m, p + id_end, gap);
        m += gap;
        mid[m++] = '"';
        memcpy(mid + m, c->tool_name, c->tool_name_len);
        m += c->tool_name_len;
        mid[m++] = '"';
        size_t rest = c->name_off + c->name_len;
        tg_out_slice(o, cc->qblk, p, cc->qid_off);
        tg_out_copy(o, mid, m);
        tg_out_slice(o, cc->qblk, p + rest, cc->qlen - rest);
        return;
    }
    char idn[24], ttln[24], name[TG_TOOL_NAME_MAX + 3];
    struct {
        size_t off, len;
        const char *txt;
        size_t n;
    } sp[3], t;
    int n = 0;
    sp[n++] = (__typeof__(t)){cc->qid_off, cc->qid_len, idn, u64_fmt(idn, cc->id, 10)};
    if (c->ttl_len > 0)
        sp[n++] = (__typeof__(t)){c->ttl_off, c->ttl_len, ttln, u64_fmt(ttln, c->ttl_new, 10)};
    if (c->name_len > 0) {
        name[0] = '"';
        memcpy(name + 1, c->tool_name, c->tool_name_len);
        name[c->tool_name_len + 1] = '"';
        sp[n++] = (__typeof__(t)){c->name_off, c->name_len, name, c->tool_name_len + 2};
    }
    for (int i = 1; i < n; i++) /* insertion sort by offset: at most three */
        for (int j = i; j > 0 && sp[j].off < sp[j - 1].off; j--) {
            t = sp[j];
            sp[j] = sp[j - 1];
            sp[j - 1] = t;
        }
    /* The edits and what lies between them as one piece when it is short
     * (the id and the name usually are a few dozen bytes apart): three
     * pieces to write, as for the id alone, rather than five. */
    char mid[320];
    size_t span = sp[n - 1].off + sp[n - 1].len - sp[0].off, m = 0;
    if (span + sizeof(name) + 2 * sizeof(idn) <= sizeof(mid)) {
        size_t at = sp[0].off;
        for (int i = 0; i < n; i++) {
            memcpy(mid + m, p + at, sp[i].off - at);
            m += sp[i].off - at;
            memcpy(mid + m, sp[i].txt, sp[i].n);
            m += sp[i].n;
            at = sp[i].off + sp[i].len;
        }
        if (cc->qblk != NULL) {
            tg_out_slice(o, cc->qblk, p, sp[0].off);
            tg_out_copy(o, mid, m);
            tg_out_slice(o, cc->qblk, p + at, cc->qlen - at);
        } else {
            tg_out_copy(o, p, sp[0].off);
            tg_out_copy(o, mid, m);
            tg_out_copy(o, p + at, cc->qlen - at);
        }
        return;
    }
    size_t at = 0;
    for (int i = 0; i <= n; i++) {
        size_t end = i < n ? sp[i].off : cc->qlen;
        if (cc->qblk != NULL)
            tg_out_slice(o, cc->qblk, p + at, end - at);
        else
            tg_out_copy(o, p + at, end - at);
        if (i < n) {
            tg_out_copy(o, sp[i].txt, sp[i].n);
            at = sp[i].off + sp[i].len;
        }
    }
}

bool mcp_agent_writable(const mcp_sess_t *w)
{
    return tg_ainst_writable((const tg_ainst_t *)w->inst);
}

/* Tell the agent to stop call <c> (MCP notifications/cancelled for the id
 * it saw) and ask it to prove it is alive (ping): its slot is freed on the
 * pong. */
/* Ask the agent to prove it is alive for zombie call <c>: a ping whose
 * pong frees <c>'s slot. Without room for the ping entry the kill_grace
 * timer still bounds the zombie. */
static void send_ping(mcp_sess_t *w, mcp_call_t *c)
{
    mcp_call_t *p = mcp_agent_writable(w) ? mcp_call_alloc(w, K_PING) : NULL;
    if (p == NULL)
        return;
    char buf[96];
    p->ping_for = c->cc.idx;
    p->ping_for_id = c->cc.id;
    int n = snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"ping\"}\n",
                     p->cc.id);
    tg_out_copy(&w->inst->a.p.wr, buf, (size_t)n);
}

/* MCP notifications/cancelled to the agent for the request it knows as
 * <c>'s id, with the constant <reason>. */
static void send_cancel(mcp_sess_t *w, const mcp_call_t *c, const char *reason)
{
    if (!mcp_agent_writable(w))
        return;
    char buf[256];
    int n = snprintf(buf, sizeof(buf),
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                     "\"requestId\":%" PRIu64 ",\"reason\":\"%s\"}}\n",
                     c->cc.id, reason);
    tg_out_copy(&w->inst->a.p.wr, buf, (size_t)n);
}

static void send_cancel_and_ping(mcp_sess_t *w, mcp_call_t *c, const char *reason)
{
    if (!mcp_agent_writable(w))
        return;
    send_cancel(w, c, reason);
    send_ping(w, c);
}

/* ---- admission (router/call/pipeline.h) -------------------------------- */

#define CALL(cc) ((mcp_call_t *)(void *)(cc))
#define CCALL(cc) ((const mcp_call_t *)(const void *)(cc))

/* Admit or refuse one tools/call frame [frame, frame+len) from the caller,
 * in block <b>. */
void mcp_admit_call(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                    const tg_mcp_env_t *env)
{
    tg_denial_t d;
    char reqid[32];
    mcp_call_t *c = mcp_call_alloc(w, K_CALL);
    if (c == NULL) {
        /* Cannot happen while limits hold (the slab is sized from them). */
        mcp_denial_init(w, &d, TG_DENY_CONCURRENCY, NULL, reqid, sizeof(reqid));
        d.limit = "concurrency";
        d.detail = "call table full";
        mcp_deny(w, frame + env->id.off, env->id.len, &d);
        return;
    }
    memcpy(c->caller_id, frame + env->id.off, env->id.len);
    c->caller_id_len = env->id.len;
    c->cc.bytes_in = len;
    if (w->hub_exposed != NULL) {
        /* From the hub: the name the caller used, for audit. */
        memcpy(c->exposed, w->hub_exposed, w->hub_exposed_len + 1);
        c->exposed_len = (uint8_t)w->hub_exposed_len;
    }
    if (w->hub_own != NULL) {
        /* From the hub: the exposed name at env->tool_name is forwarded as
         * the agent's own (mcp_forward_edited). */
        memcpy(c->tool_name, w->hub_own, w->hub_own_len + 1);
        c->tool_name_len = w->hub_own_len;
        c->name_off = env->tool_name.off;
        c->name_len = env->tool_name.len;
        const tg_tool_cfg_t *tc = tg_config_tool(w->ag->r.acfg, c->tool_name, c->tool_name_len);
        if (tc != NULL)
            c->cc.tool = (int)(tc - w->ag->r.acfg->tools);
    } else if (env->tool_name.type == TG_J_STRING) {
        long n = tg_jstr_decode(frame, env->tool_name, c->tool_name, sizeof(c->tool_name));
        if (n > 0) {
            c->tool_name_len = (size_t)n;
            const tg_tool_cfg_t *tc = tg_config_tool(w->ag->r.acfg, c->tool_name, c->tool_name_len);
            if (tc != NULL)
                c->cc.tool = (int)(tc - w->ag->r.acfg->tools);
        } else if (n < 0) {
            /* Longer than any name we keep: refer to it as invalid. */
            memcpy(c->tool_name, "invalid", 8);
            c->tool_name_len = 7;
        }
    }
    if (w->phase != TG_P_RUN || w->astate != TG_AGENT_RUNNING) {
        bool down = w->phase != TG_P_RUN;
        mcp_denial_init(w, &d, down ? TG_DENY_SHUTTING_DOWN : TG_DENY_UNAVAILABLE, c, reqid,
                        sizeof(reqid));
        d.limit = down ? "shutdown" : "agent";
        d.detail = down                       ? "toolgate is shutting down"
                   : w->astate == TG_AGENT_BACKOFF ? "agent is restarting"
                                            : "agent is starting";
        if (!down)
            d.retry_after_ms = 1000;
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(c);
        return;
    }
    if (w->hub != NULL && env->progress_token.type == TG_J_STRING)
        c->ptok = mcp_hub_ptok(w, frame, env->progress_token);
    tg_route_deadline(&w->ag->r, &c->cc, env->has_timeout, env->timeout_ms);
    mcp_task_admit(w, c, frame, env);
    tg_route_hold_frame(&w->ag->r, &c->cc, b, frame, len, env->id.off, env->id.len, false);
    tg_pipe_admit(&c->cc);
}

static tg_caller_lim_t *mcp_op_climits(const tg_callc_t *cc)
{
    return CCALL(cc)->w->climits;
}

/* MCP topology: each caller session has its own instance; a call can go
 * while that instance runs, and waits for no other. */
static tg_call_go_t mcp_op_ready(const tg_callc_t *cc)
{
    const mcp_sess_t *w = CCALL(cc)->w;
    return mcp_agent_writable(w) && w->astate == TG_AGENT_RUNNING ? TG_GO_NOW : TG_GO_NOT;
}

static bool mcp_op_forward(tg_callc_t *cc)
{
    if (CALL(cc)->ttl_len > 0 || CALL(cc)->name_len > 0) {
        mcp_forward_edited(CALL(cc)->w, CALL(cc));
        return true;
    }
    mcp_to_agent_spliced(CALL(cc)->w, cc->qblk, cc->qframe, cc->qlen, cc->qid_off, cc->qid_len,
                         cc->id);
    return true;
}

static void mcp_op_denial_init(const tg_callc_t *cc, tg_denial_t *d, tg_deny_code_t code,
                           char reqid[32])
{
    mcp_denial_init(CCALL(cc)->w, d, code, CCALL(cc), reqid, 32);
}

static void mcp_op_deny(tg_callc_t *cc, tg_denial_t *d, const char *event, const char *stage)
{
    mcp_deny_call(CALL(cc)->w, CALL(cc), d, event, stage);
}

static void mcp_op_free(tg_callc_t *cc)
{
    mcp_call_free(CALL(cc));
}

static void *mcp_op_owner(const tg_callc_t *cc)
{
    return CCALL(cc)->w;
}

static void mcp_op_flush(tg_route_t *r, void *owner)
{
    (void)r;
    mcp_flush_all(owner);
}

static void mcp_op_settle(tg_route_t *r, void *owner)
{
    (void)r;
    mcp_check_drained(owner);
}

static void mcp_op_reap(tg_route_t *r)
{
    mcp_agent_maybe_reap((tg_mcp_agent_t *)(void *)r);
}

/* Past its deadline in flight: the agent gets notifications/cancelled and
 * a ping; the slot is freed on the pong, or the agent is killed after
 * kill_grace. */
static void mcp_op_timed_out(tg_callc_t *cc)
{
    mcp_call_t *c = CALL(cc);
    cc->state = TG_CALL_ZOMBIE;
    cc->stage = "timed_out";
    if (!mcp_task_cancel_at_agent(c->w, c))
        send_cancel_and_ping(c->w, c, "toolgate: deadline exceeded");
    tg_pipe_arm(cc, cc->r->acfg->kill_grace_ms);
}

static void mcp_op_stuck(tg_callc_t *cc)
{
    mcp_sess_t *w = CALL(cc)->w;
    tg_log_warn("agent '%s' did not answer a cancel or ping within %" PRIu64
                " ms; killing it (raise %s)",
                agent_name(w), cc->r->acfg->kill_grace_ms, cc->r->path_grace);
    TG_AINST_KILL(w->inst, SIGKILL, "stuck");
}

static const tg_call_ops_t call_ops = {
    .climits = mcp_op_climits,
    .ready = mcp_op_ready,
    .forward = mcp_op_forward,
    .denial_init = mcp_op_denial_init,
    .deny = mcp_op_deny,
    .free = mcp_op_free,
    .owner = mcp_op_owner,
    .flush = mcp_op_flush,
    .settle = mcp_op_settle,
    .reap = mcp_op_reap,
    .timed_out = mcp_op_timed_out,
    .stuck = mcp_op_stuck,
    .timeout_field = "params._meta.timeout_ms",
};

const tg_call_ops_t *mcp_call_ops(void)
{
    return &call_ops;
}

/* The reason the HTTP front's bridge gives when a client left while its
 * call ran (http_sess.c, tg_hsess_abandon): the frame ends with it, and
 * with the process's token, which no client knows (a client's own cancel
 * with reason caller_gone is an ordinary cancel). */
static bool cancel_says_gone(const char *frame, size_t len)
{
    size_t n;
    const char *tail = tg_mcp_gone_tail(&n);
    while (len > 0 && (frame[len - 1] == '\n' || frame[len - 1] == '\r' || frame[len - 1] == ' '))
        len--;
    return n > 0 && len >= n && memcmp(frame + len - n, tail, n) == 0;
}

/* Cancel call <c> of <w> as its caller left (<why>: caller_gone): one
 * still waiting (rate, slot, queue) is released, as the agent never saw
 * it; one in flight is cancelled at the agent (notifications/cancelled for
 * the id it saw, and a ping whose pong frees the slot; no answer within
 * kill_grace_period: killed as stuck); a pass-through request is
 * cancelled and forgotten. Audited call.cancelled, reason <why>. */
static void cancel_gone(mcp_sess_t *w, mcp_call_t *c, const char *why)
{
    if (c->kind == K_PASS) {
        send_cancel(w, c, why);
        mcp_call_free(c);
        return;
    }
    if (c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE ||
        c->cc.state == TG_CALL_SLOT) {
        audit_call_why(w, c, "call.cancelled", "cancelled", NULL, "queued", why);
        tg_pipe_cancel_waiting(&c->cc);
        return;
    }
    audit_call_why(w, c, "call.cancelled", "cancelled", NULL, "cancelled", why);
    c->cc.state = TG_CALL_ZOMBIE;
    c->cc.stage = "cancelled";
    if (!mcp_task_cancel_at_agent(w, c)) /* a task is cancelled with tasks/cancel */
        send_cancel_and_ping(w, c, why);
    tg_pipe_arm(&c->cc, w->ag->r.acfg->kill_grace_ms);
}

void mcp_caller_gone(mcp_sess_t *w)
{
    /* Those in flight first: they become zombies and keep their slots, so
     * releasing the waiting ones after cannot hand a slot to one of this
     * caller's queued calls (it would go to the agent only to be
     * cancelled). */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
            mcp_call_t *c = mcp_call_at(w->ag, i);
            if (c->w != w || (c->kind != K_CALL && c->kind != K_PASS) ||
                c->cc.state == TG_CALL_ZOMBIE ||
                (pass == 0) != (c->kind == K_PASS || c->cc.state == TG_CALL_INFLIGHT))
                continue;
            cancel_gone(w, c, "caller_gone");
        }
    }
}

bool mcp_sess_holds(const mcp_sess_t *w, const char *id, size_t len)
{
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        const mcp_call_t *c = mcp_call_at(w->ag, i);
        if (c->w == w && (c->kind == K_CALL || c->kind == K_PASS) && c->caller_id_len == len &&
            memcmp(c->caller_id, id, len) == 0 && c->cc.state != TG_CALL_ZOMBIE)
            return true;
    }
    return false;
}

/* notifications/cancelled from the caller for one of its requests. */
void mcp_caller_cancel(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env)
{
    tg_jspan_t id = env->cancel_id;
    bool gone = cancel_says_gone(frame, len);
    for (uint32_t i = 0; id.type != TG_J_NONE && i < w->ag->r.tab.n; i++) {
        mcp_call_t *c = mcp_call_at(w->ag, i);
        if (c->w != w || (c->kind != K_CALL && c->kind != K_PASS) || c->caller_id_len != id.len ||
            memcmp(c->caller_id, frame + id.off, id.len) != 0 || c->cc.state == TG_CALL_ZOMBIE)
            continue;
        if (gone) {
            /* Its HTTP client left: as a Unix caller that left. */
            cancel_gone(w, c, "caller_gone");
            return;
        }
        if (c->task)
            break; /* a task's request was answered: tasks/cancel ends a task */
        if (c->kind == K_CALL && (c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE ||
                                  c->cc.state == TG_CALL_SLOT)) {
            /* The agent never saw it: nothing to forward. */
            mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "queued");
            tg_pipe_cancel_waiting(&c->cc);
            return;
        }
        if (mcp_agent_writable(w))
            mcp_to_agent_spliced(w, b, frame, len, id.off, id.len, c->cc.id);
        if (c->kind == K_PASS) {
            mcp_call_free(c);
            mcp_check_drained(w);
            return;
        }
        mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "cancelled");
        c->cc.state = TG_CALL_ZOMBIE;
        c->cc.stage = "cancelled";
        send_ping(w, c);
        tg_pipe_arm(&c->cc, w->ag->r.acfg->kill_grace_ms);
        return;
    }
    /* Not one of this caller's live requests (issue 12 item 22): an id
     * finished or never sent, or one spelled like an agent-side id, which
     * forwarded as it is would cancel another request. Only the table
     * maps a caller's id to the agent's, so the rest is dropped, counted
     * and audited (as its length). */
    w->dropped_cancels++;
    tg_audit_ev_t ev;
    tg_adm_audit_refused(&ev, agent_name(w), w->caller, "cancel_not_live", len - 1);
    ev.count = (int64_t)w->dropped_cancels;
    emit(w, &ev);
}
