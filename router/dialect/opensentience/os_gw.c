/* The OpenSentience gateway (see os_gw.h and DESIGN.md "Wire dialects").
 *
 * Structure. One os_agent_t per opensentience agent holds its one shared
 * instance (a child with three pipes, framed by lenpfx both ways), its
 * limit state (GCRA buckets, concurrency slots, the FIFO wait queue), its
 * registered tools, its idempotency cache, and a slab of calls indexed by
 * a small integer. One os_conn_t per caller connection holds its reader,
 * writer and the list of its calls.
 *
 * Ids. A call is forwarded with its call_id replaced (spliced in place,
 * the frame otherwise forwarded as it came) by "tg-<hex>" of its id in
 * the agent's call table (router/call/table.h, which also says why the
 * agent never sees two live calls with one id, and why the table may grow
 * under live calls on reload). Results and streams go back with the
 * caller's own call_id spliced in.
 *
 * Invariants.
 *  - A call in state INFLIGHT, CANCELLING or ZOMBIE holds one agent slot
 *    and, when those scopes have a concurrency limit, its tool's slot, and
 *    its caller's while the caller still waits for it (not as a ZOMBIE);
 *    with concurrency_scope shared it also holds a fleet slot (fslot), and
 *    release_slots gives every one of them back. SLOT holds its local
 *    slots while the shared store decides on a fleet slot. QUEUED holds
 *    none and is in the agent's FIFO (and only QUEUED is), also while the
 *    agent is starting or being replaced (it is dispatched once an
 *    instance has registered tools). RATE holds nothing but its frame and
 *    waits for the shared rate store.
 *  - Admission, store answers, the queue, expiry and release are the
 *    pipeline's (router/call/pipeline.c); this file gives it the
 *    dialect's ops (os_op_*): the splice of the call_id, the answers, and
 *    the shared instance's readiness (calls wait while it starts or a
 *    reload replaces it).
 *  - The caller gets exactly one agent.tool.result per call: the agent's
 *    (forwarded), or one toolgate made (a denial, a routing error, a
 *    canceled result). After a timeout or the caller's leaving the call is
 *    a ZOMBIE: nothing more reaches a caller, and its slots are freed when
 *    the agent proves alive (any result for it, normally "canceled"), or
 *    when the agent is killed after kill_grace_period.
 *  - Calls return to the free list only in call_free; a connection is
 *    freed only in its last close callback, after its calls forgot it.
 *  - Every callback ends with g_flush(): what one event wrote goes out in
 *    one uv_write per stream.
 *  - The session token lives in the agent struct only while its instance
 *    runs, goes to the child through its environment, and is compared with
 *    tg_os_token_ok (constant time); no log line, event or message holds
 *    it, and it is wiped when the instance ends.
 *  - Reload (tg_osgw_reconfigure): nothing of the gateway points into an
 *    agent config but ag->r.acfg, which moves to the new one at once; what a
 *    running instance needs of the config it was started with (its stderr
 *    line buffer size, its containment) is copied into the instance. A
 *    switch to a new instance (switching) drains the old one's calls in
 *    flight, dispatches nothing to it, and keeps QUEUED and RATE calls for
 *    the new one.
 */
#define _GNU_SOURCE /* explicit_bzero */
#include "router/dialect/opensentience/os_gw_impl.h"
#include "router/gateway/list.h"

/* ---- framed output ---------------------------------------------------- */

/* Queue on <o> the message an encoder wrote at buf + 4, framed: <n> is
 * what the encoder returned, its length or a negative errno. A message
 * that did not fit is dropped (logged): toolgate built it from bounded
 * parts, so that is a bug, not a peer's doing. */
void osg_send_built(tg_out_t *o, char *buf, long n)
{
    if (n <= 0 || o == NULL || o->stream == NULL) {
        if (n <= 0)
            tg_log_error("an opensentience message toolgate builds did not fit (%ld)", n);
        return;
    }
    (void)tg_lenpfx_header((unsigned char *)buf, (uint64_t)n);
    (void)tg_out_copy(o, buf, (size_t)n + TG_LENPFX_HDR);
}

static void hdr_for_call(tg_osgw_t *g, const os_call_t *c, tg_os_hdr_t *h, char id[32])
{
    memset(h, 0, sizeof(*h));
    h->id = msg_id(g, id);
    h->ts_ms = wall_now_ms();
    if (c != NULL) {
        h->in_reply_to = echo_raw(&c->msg_id);
        h->request_id = echo_raw(&c->request_id);
        h->correlation_id = echo_raw(&c->correlation_id);
    }
}

bool osg_conn_writable(const os_conn_t *c)
{
    return c != NULL && !c->closed && c->wr.stream != NULL && c->wr.error == 0;
}

/* ---- call table ------------------------------------------------------- */

os_call_t *osg_call_at(const os_agent_t *ag, uint32_t i)
{
    return tg_ctab_at(&ag->r.tab, i);
}

/* The slab the limits of <a> need: every call they allow at once (in
 * flight, zombies and cancelling calls keeping their slot; queued; one
 * being refused) and, with a shared rate, as many more waiting for the
 * store's answer. */
uint32_t osg_slab_need(const tg_agent_cfg_t *a)
{
    uint64_t n = (uint64_t)a->lim.max_concurrent_calls + a->lim.max_queued_calls + 1;
    if (a->rate_shared)
        n += (uint64_t)a->lim.max_concurrent_calls + a->lim.max_queued_calls;
    return n > TG_CALL_MAX ? TG_CALL_MAX : (uint32_t)n;
}

static os_call_t *call_alloc(os_agent_t *ag)
{
    uint32_t i;
    uint64_t id;
    os_call_t *c = tg_ctab_take(&ag->r.tab, &i, &id);
    if (c == NULL)
        return NULL;
    tg_callc_reset(&c->cc, &ag->r, id, i, tg_gw_now(ag->g->gw));
    memset((char *)c + offsetof(os_call_t, ag), 0,
           offsetof(os_call_t, cid) - offsetof(os_call_t, ag));
    c->cid.len = c->msg_id.len = c->request_id.len = c->correlation_id.len = 0;
    c->tool[0] = '\0';
    c->ag = ag;
    c->cc.state = TG_CALL_QUEUED; /* not yet in the queue: the admission decides */
    return c;
}

static void call_detach(os_call_t *c)
{
    os_conn_t *k = c->conn;
    if (k == NULL)
        return;
    TG_LIST_UNLINK(k->calls, c, cprev, cnext);
    c->conn = NULL;
    /* A half-closed caller's last call is answered: it ends (once what
     * was written to it has gone out). */
    if (k->half_closed && k->calls == NULL)
        osg_conn_end(k);
}

static void call_attach(os_call_t *c, os_conn_t *k)
{
    c->conn = k;
    TG_LIST_PUSH(k->calls, c, cprev, cnext);
}

void osg_call_free(os_call_t *c)
{
    if (c->cc.state == TG_CALL_IDLE)
        return;
    call_detach(c);
    tg_pipe_free_entry(&c->cc);
}

/* The live call numbered <seq>, or NULL. */
static os_call_t *call_by_seq(os_agent_t *ag, uint64_t seq)
{
    os_call_t *c = tg_ctab_lookup(&ag->r.tab, seq);
    return c != NULL && c->cc.state != TG_CALL_IDLE && c->cc.id == seq ? c : NULL;
}

/* The live call whose agent-side id is the string span <s> of <frame>. */
os_call_t *osg_call_by_agent_id(os_agent_t *ag, const char *frame, tg_jspan_t s)
{
    uint64_t v;
    if (s.type != TG_J_STRING || s.len < 2)
        return NULL;
    if (!s.escaped) {
        /* The usual case: the bytes are the id (no copy). */
        if (tg_call_id_parse(frame + s.off + 1, s.len - 2, &v) < 0)
            return NULL;
        return call_by_seq(ag, v);
    }
    char txt[40];
    long n = tg_jstr_decode(frame, s, txt, sizeof(txt));
    if (n < 0 || tg_call_id_parse(txt, (size_t)n, &v) < 0)
        return NULL;
    return call_by_seq(ag, v);
}

/* ---- answers to callers ----------------------------------------------- */

void osg_denial_init(const os_agent_t *ag, tg_denial_t *d, tg_deny_code_t code,
                        const os_call_t *c, char reqid[32])
{
    if (c != NULL)
        tg_call_id_hex(reqid, c->cc.id);
    tg_adm_denial_init(d, code, ag != NULL ? aname(ag) : NULL, c != NULL ? c->tool : NULL,
                       c != NULL ? c->tool_len : 0, c != NULL ? reqid : NULL);
}

/* Answer call <c> with denial <d> (the agent.tool.result of tg_denial_os). */
void osg_deny_to(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                    tg_denial_t *d)
{
    if (!osg_conn_writable(k))
        return;
    char buf[OS_MSG_MAX], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, c, &h, id);
    d->os = &h;
    long n = tg_denial_os(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR,
                          cid != NULL && cid->len ? cid->buf : NULL, cid != NULL ? cid->len : 0, d);
    osg_send_built(&k->wr, buf, n);
}

/* Answer call <c> with a result toolgate makes: "canceled", or "failed"
 * with a routing error <code> (not a limit). */
void osg_answer(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                   const char *status, const char *code, const char *message, bool retryable)
{
    if (!osg_conn_writable(k))
        return;
    char buf[OS_MSG_MAX], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, c, &h, id);
    long n = tg_os_enc_result(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, echo_raw(cid),
                              status, code, message, retryable);
    osg_send_built(&k->wr, buf, n);
}

/* A protocol error on the connection (no call to answer): a core.error. */
void osg_conn_error(tg_osgw_t *g, os_conn_t *k, const char *code, const char *message)
{
    if (!osg_conn_writable(k))
        return;
    char buf[1024], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, NULL, &h, id);
    long n = tg_os_enc_error(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, "core.error",
                             code, message, false);
    osg_send_built(&k->wr, buf, n);
}

/* One audit event for call <c>, with the fields MCP calls carry; counts
 * the call in the metrics. */
void osg_audit_call(os_call_t *c, const char *event, const char *status, const tg_denial_t *d,
                       const char *stage, const char *reason)
{
    os_agent_t *ag = c->ag;
    tg_osgw_t *g = ag->g;
    tg_audit_ev_t ev;
    char reqid[32], cid[OS_ECHO_MAX], corr[OS_ECHO_MAX];
    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.agent = aname(ag);
    ev.caller = c->conn != NULL ? c->conn->caller : NULL;
    tg_call_id_hex(reqid, c->cc.id);
    ev.request_id = reqid;
    ev.call_id = echo_text(&c->cid, cid);
    ev.correlation_id = echo_text(&c->correlation_id, corr);
    tg_adm_audit_call(&ev, c->tool, c->tool_len, tg_gw_now(g->gw) - c->cc.t_start,
                      c->cc.bytes_in, c->cc.decided_by);
    ev.status = status;
    ev.stage = stage;
    ev.reason = reason;
    if (d != NULL)
        tg_adm_audit_denial(&ev, d);
    if (g->gw->metrics_ok) {
        tg_outcome_t o = tg_adm_outcome(event, status, d, stage);
        tg_metrics_call(&g->gw->metrics, ag->r.idx, c->cc.tool, o, now_ms(g) - c->cc.t_start);
        if (d != NULL)
            tg_metrics_denial(&g->gw->metrics, d->code, (int)ag->r.idx, c->tool, c->tool_len,
                              wall_now_ms());
    }
    emit(g, &ev);
}

/* Deny call <c> to its caller and audit it (call.denied, or call.timeout). */
void osg_deny_call(os_call_t *c, tg_denial_t *d, const char *event, const char *stage)
{
    osg_deny_to(c->ag->g, c->conn, c, &c->cid, d);
    osg_audit_call(c, event, event[5] == 't' ? "timeout" : "denied", d, stage, NULL);
}


/* ---- idempotency cache ------------------------------------------------ */

/* The cache key of call <c>: "<peer uid>:<caller>" NUL tool NUL key,
 * into <out>; its length, 0 when it does not fit. The caller is part of
 * it, by uid too (every peer without a callers[] entry is "unknown"): one
 * caller never reads another's result. */
static size_t idem_key(const os_call_t *c, char *out, size_t cap)
{
    char who[96];
    int a =
        c->conn != NULL ? snprintf(who, sizeof(who), "%u:%s", c->conn->uid, c->conn->caller) : -1;
    if (a < 0 || (size_t)a >= sizeof(who))
        return 0;
    size_t n = (size_t)a + 1 + c->tool_len + 1 + c->idem_len;
    if (n > cap)
        return 0;
    memcpy(out, who, (size_t)a + 1);
    memcpy(out + a + 1, c->tool, c->tool_len + 1);
    memcpy(out + a + 2 + c->tool_len, c->idem, c->idem_len);
    return n;
}

/* The live entry under <key>, expired ones dropped (the registry follows). */
static const tg_idem_entry_t *idem_find(os_agent_t *ag, const char *key, size_t len)
{
    const tg_idem_entry_t *e = tg_idem_find(&ag->idem_cache, key, len, now_ms(ag->g));
    reg_set(ag->g, ag->reg_idem, tg_idem_bytes(&ag->idem_cache));
    return e;
}

/* Keep the result payload [frame, frame+len) of call <c> (call_id at
 * <cid>) for replay; the oldest entries make room. A result larger than
 * the whole budget is not kept. */
void osg_idem_store(os_call_t *c, const char *frame, size_t len, tg_jspan_t cid, bool ok)
{
    os_agent_t *ag = c->ag;
    char key[96 + TG_OS_TOOL_ID_MAX + OS_IDEM_KEY_MAX + 4];
    size_t klen = idem_key(c, key, sizeof(key));
    if (klen == 0)
        return;
    (void)tg_idem_store(&ag->idem_cache, key, klen, frame, len, cid.off, cid.len, ok,
                        now_ms(ag->g));
    reg_set(ag->g, ag->reg_idem, tg_idem_bytes(&ag->idem_cache));
}

/* Send the kept result <e> to the caller of call <c>, its call_id spliced in. */
static void idem_replay(os_call_t *c, const tg_idem_entry_t *e)
{
    os_conn_t *k = c->conn;
    tg_os_splice_t sp;
    tg_jspan_t s = {.off = e->cid_off, .len = e->cid_len, .type = TG_J_STRING};
    if (!osg_conn_writable(k) || tg_os_splice_plan(e->frame_len, s, c->cid.len, &sp) < 0)
        return;
    tg_out_copy(&k->wr, (const char *)sp.hdr, TG_LENPFX_HDR);
    tg_out_copy(&k->wr, e->frame, sp.head_len);
    tg_out_copy(&k->wr, c->cid.buf, c->cid.len);
    tg_out_copy(&k->wr, e->frame + sp.tail_off, e->frame_len - sp.tail_off);
}

/* ---- admission -------------------------------------------------------- */

/* Caller <k>'s call whose call_id is the span <s> of <frame> (hash <h>),
 * or NULL. */
static os_call_t *conn_call_by_cid(os_conn_t *k, const char *frame, tg_jspan_t s, uint32_t h)
{
    for (os_call_t *o = k->calls; o != NULL; o = o->cnext) {
        if (o->cid_hash == h && o->cid.len == s.len &&
            memcmp(o->cid.buf, frame + s.off, s.len) == 0)
            return o;
    }
    return NULL;
}

static bool agent_writable(const os_agent_t *ag)
{
    return tg_ainst_writable((const tg_ainst_t *)ag->inst);
}

/* Calls may go to the instance now: it has registered its tools, its
 * stdin is open, it is not being stopped, nor replaced by a reload. */
static bool can_dispatch(const os_agent_t *ag)
{
    return ag->st == TG_AGENT_RUNNING && agent_writable(ag) && ag->phase < TG_P_STOP_STDIN && !ag->r.switching;
}


/* The ready instance has not registered <c>'s tool (found: noted in
 * c->reg_seen). False while no instance is ready: the call may wait. */
static bool tool_unknown(const os_agent_t *ag, os_call_t *c)
{
    if (ag->st != TG_AGENT_RUNNING || ag->r.switching)
        return false;
    if (c->reg_seen == ag->starts)
        return false;
    if (!osg_tool_registered(ag, c->tool, c->tool_len))
        return true;
    c->reg_seen = ag->starts;
    return false;
}

bool osg_tool_registered(const os_agent_t *ag, const char *name, size_t len)
{
    return tg_toolreg_has(&ag->tools, name, len);
}

static void not_found(os_call_t *c)
{
    char msg[TG_OS_TOOL_ID_MAX * 2 + 96];
    snprintf(msg, sizeof(msg), "agent '%s' has not registered tool '%s'", aname(c->ag),
             tg_audit_safe_str(c->tool, c->tool_len) ? c->tool : "invalid");
    osg_answer(c->ag->g, c->conn, c, &c->cid, "failed", "tool.not_found", msg, false);
    osg_audit_call(c, "call.denied", "invalid", NULL, NULL, "tool_not_found");
}


/* Why calls to <ag> are refused now (agent_unavailable), or NULL when
 * they may go on (ready, or starting, or being replaced by a reload: they
 * wait for it). */
static const char *unavailable(const os_agent_t *ag)
{
    if (ag->r.switching)
        return NULL;
    switch (ag->st) {
    case TG_AGENT_RUNNING:
    case TG_AGENT_STARTING:
        return NULL;
    case TG_AGENT_DOWN:
        return ag->r.acfg->start == TG_START_ON_DEMAND ? NULL : "agent is not running";
    case TG_AGENT_UNHEALTHY:
        return "agent missed its heartbeats";
    case TG_AGENT_BACKOFF:
        return "agent is restarting";
    case TG_AGENT_FAILED:
        break;
    }
    return "agent stopped and is not restarted (restart policy or max_restarts)";
}


os_agent_t *osg_agent_by_id(tg_osgw_t *g, const char *id, size_t len)
{
    for (size_t i = 0; i < g->nagents; i++)
        if (strlen(aname(g->agents[i])) == len && memcmp(aname(g->agents[i]), id, len) == 0)
            return g->agents[i];
    return NULL;
}


/* Refuse call <c> with agent_unavailable for reason <why>. */
void osg_deny_unavailable(os_call_t *c, const char *why)
{
    os_agent_t *ag = c->ag;
    tg_denial_t d;
    char reqid[32];
    osg_denial_init(ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
    d.limit = "agent";
    d.detail = why;
    if (ag->st == TG_AGENT_UNHEALTHY)
        d.retry_after_ms = (int64_t)ag->r.acfg->os.heartbeat_interval_ms;
    else if (ag->st == TG_AGENT_BACKOFF)
        d.retry_after_ms = (int64_t)ag->r.acfg->backoff_initial_ms;
    d.config_path = ag->st == TG_AGENT_UNHEALTHY ? ag->path_hb : NULL;
    osg_deny_call(c, &d, "call.denied", NULL);
}

/* Why the call may not go on now (shutting down: <*shutdown> set), or
 * NULL. */
static const char *refusal_now(const os_agent_t *ag, bool *shutdown)
{
    *shutdown = ag->g->stopping || (ag->phase != TG_P_RUN && !ag->r.switching);
    if (*shutdown)
        return "toolgate is shutting down";
    const char *why = unavailable(ag);
    uint32_t recent = 0;
    if (why == NULL && ag->st == TG_AGENT_DOWN && osg_crash_loop(ag, now_ms(ag->g), &recent))
        why = "agent failed too often; restarts exhausted within the restart window";
    return why;
}

/* Refuse the frame's call before it has a slab entry (routing errors). */
static void refuse_frame(os_conn_t *k, const char *frame, const tg_os_env_t *env, const char *code,
                         const char *message, const char *reason)
{
    os_call_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    echo_set(&tmp.msg_id, frame, env->id);
    echo_set(&tmp.request_id, frame, env->request_id);
    echo_set(&tmp.correlation_id, frame, env->correlation_id);
    echo_set(&tmp.cid, frame, env->call_id);
    osg_answer(k->g, k, &tmp, &tmp.cid, "failed", code, message, false);
    tg_audit_ev_t ev;
    char cid[OS_ECHO_MAX];
    tg_adm_audit_refused(&ev, NULL, k->caller, reason, env->payload.off + env->payload.len);
    ev.call_id = echo_text(&tmp.cid, cid);
    emit(k->g, &ev);
}


/* A repeat of a completed call with the same idempotency_key is answered
 * from the cache (the tool does not run again, and no limit is charged
 * for it); one while the first still runs is refused. True when <c> was
 * answered (and freed). */
static bool idem_answered(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    tg_denial_t d;
    char reqid[32];
    char key[96 + TG_OS_TOOL_ID_MAX + OS_IDEM_KEY_MAX + 4];
    size_t klen = idem_key(c, key, sizeof(key));
    const tg_idem_entry_t *e = klen > 0 ? idem_find(ag, key, klen) : NULL;
    if (e != NULL) {
        idem_replay(c, e);
        osg_audit_call(c, "call.completed", e->ok ? "ok" : "error", NULL, NULL,
                       "idempotent_replay");
        osg_call_free(c);
        return true;
    }
    for (uint32_t i = 0; i < ag->r.tab.n && klen > 0; i++) {
        os_call_t *o = osg_call_at(ag, i);
        char okey[sizeof(key)];
        if (o == c || o->cc.state == TG_CALL_IDLE || o->cc.state == TG_CALL_ZOMBIE ||
            !o->has_idem || o->conn == NULL || idem_key(o, okey, sizeof(okey)) != klen ||
            memcmp(okey, key, klen) != 0)
            continue;
        osg_denial_init(ag, &d, TG_DENY_CONCURRENCY, c, reqid);
        d.limit = "idempotency";
        d.scope = "caller";
        d.observed = 2;
        d.cap = 1;
        d.unit = "calls";
        d.detail = "a call with this idempotency_key is still running";
        osg_deny_call(c, &d, "call.denied", NULL);
        osg_call_free(c);
        return true;
    }
    return false;
}

/* ---- the dialect's part of the pipeline (router/call/pipeline.h) ------- */

#define CALL(cc) ((os_call_t *)(void *)(cc))
#define CCALL(cc) ((const os_call_t *)(const void *)(cc))

static tg_caller_lim_t *os_op_climits(const tg_callc_t *cc)
{
    const os_conn_t *k = CCALL(cc)->conn;
    return k != NULL ? k->lim : NULL;
}

/* OpenSentience topology: one instance shared by every caller. Calls wait
 * for it while it starts, restarts or a reload replaces it; none waits
 * once toolgate or the agent is stopping. */
static tg_call_go_t os_op_ready(const tg_callc_t *cc)
{
    const os_agent_t *ag = CCALL(cc)->ag;
    if (can_dispatch(ag))
        return TG_GO_NOW;
    if (ag->g->stopping || (ag->phase != TG_P_RUN && !ag->r.switching))
        return TG_GO_NOT;
    return TG_GO_LATER;
}

/* Write call <c>'s frame to the instance, edited (tg_os_fwd_plan): its
 * call_id replaced by "tg-<hex>" of its id; its timeout_ms set to what is
 * left of the call's deadline now, after any wait in the queue, so the
 * agent is told when toolgate will cancel it (a caller that asked for
 * more than the cap, or asked nothing, is told the deadline toolgate
 * enforces: the field is v1's, and an agent that knows it can give up in
 * time); and the request_id toolgate assigned, when it fits. A tool the
 * instance has not registered is answered instead. */
static bool os_op_forward(tg_callc_t *cc)
{
    os_call_t *c = CALL(cc);
    os_agent_t *ag = c->ag;
    if (c->reg_seen != ag->starts && !osg_tool_registered(ag, c->tool, c->tool_len)) {
        not_found(c);
        return false;
    }
    char id[26];
    id[0] = '"';
    size_t n = tg_call_id_hex(id + 1, cc->id) + 1;
    id[n++] = '"';
    tg_os_fwd_in_t in = {
        .frame = cc->qframe,
        .frame_len = cc->qlen,
        .call_id = {.off = cc->qid_off, .len = cc->qid_len, .type = TG_J_STRING},
        .payload_off = c->pay_off,
        .timeout_off = c->tmo_off,
        .timeout_len = c->tmo_len,
        .new_call_id = {id, n},
        .timeout_ms = tg_pipe_left_ms(cc, now_ms(ag->g)),
        .request_id = c->rid_assigned ? echo_raw(&c->request_id) : (tg_os_raw_t){NULL, 0},
        .request_id_off = c->rid_off,
        .request_id_len = c->rid_len,
        .max_frame = ag->g->cfg->max_frame_bytes,
    };
    tg_os_fwd_t f;
    if (tg_os_fwd_plan(&in, &f) < 0)
        return true; /* not from a scan: nothing sane to send (the deadline answers it) */
    tg_out_t *o = &ag->inst->a.p.wr;
    tg_out_copy(o, (const char *)f.hdr, TG_LENPFX_HDR);
    size_t pos = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (f.e[i].off > pos)
            tg_out_slice(o, cc->qblk, cc->qframe + pos, f.e[i].off - pos);
        tg_out_copy(o, f.e[i].text, f.e[i].text_len);
        pos = f.e[i].off + f.e[i].len;
    }
    if (cc->qlen > pos)
        tg_out_slice(o, cc->qblk, cc->qframe + pos, cc->qlen - pos);
    return true;
}

static void os_op_denial_init(const tg_callc_t *cc, tg_denial_t *d, tg_deny_code_t code,
                           char reqid[32])
{
    osg_denial_init(CCALL(cc)->ag, d, code, CCALL(cc), reqid);
}

static void os_op_deny(tg_callc_t *cc, tg_denial_t *d, const char *event, const char *stage)
{
    osg_deny_call(CALL(cc), d, event, stage);
}

static void os_op_free(tg_callc_t *cc)
{
    osg_call_free(CALL(cc));
}

static void *os_op_owner(const tg_callc_t *cc)
{
    return CCALL(cc)->ag->g;
}

static void os_op_flush(tg_route_t *r, void *owner)
{
    (void)r;
    osg_g_flush(owner);
}

static void os_op_settle(tg_route_t *r, void *owner)
{
    (void)owner;
    osg_agent_check_drained((os_agent_t *)(void *)r);
}

/* After a wait for the shared rate store: refused now when toolgate or
 * the agent stopped meanwhile, or the instance has no such tool. */
static bool os_op_recheck(tg_callc_t *cc)
{
    os_call_t *c = CALL(cc);
    os_agent_t *ag = c->ag;
    bool shutdown = false;
    const char *why = refusal_now(ag, &shutdown);
    if (shutdown) {
        tg_denial_t d;
        char reqid[32];
        osg_denial_init(ag, &d, TG_DENY_SHUTTING_DOWN, c, reqid);
        d.limit = "shutdown";
        d.detail = why;
        osg_deny_call(c, &d, "call.denied", NULL);
        return true;
    }
    if (why != NULL) {
        osg_deny_unavailable(c, why);
        return true;
    }
    if (tool_unknown(ag, c)) {
        not_found(c);
        return true;
    }
    return false;
}

/* After the rate stage: start the agent when it is down (on_demand: this
 * call starts it and waits for it), then the slots. */
static void os_op_rated(tg_callc_t *cc)
{
    os_agent_t *ag = CALL(cc)->ag;
    if (ag->st == TG_AGENT_DOWN && osg_agent_spawn(ag) < 0) {
        ag->last_failed = true; /* counted by the crash-loop check */
        osg_deny_unavailable(CALL(cc), "agent could not be started");
        tg_pipe_done(cc);
        return;
    }
    tg_pipe_slots(cc);
}

/* Past its deadline in flight: the agent gets core.tool.cancel; the
 * caller's slot is free at once, the agent's when it confirms. */
static void os_op_timed_out(tg_callc_t *cc)
{
    os_call_t *c = CALL(cc);
    osg_send_cancel(c, "timeout");
    osg_call_leave_caller(c);
    osg_zombie(c, "timed_out");
    tg_pipe_pump(cc->r, c->ag->g); /* a call waiting for the caller's slot */
}

static void os_op_stuck(tg_callc_t *cc)
{
    os_call_t *c = CALL(cc);
    os_agent_t *ag = c->ag;
    if (cc->state == TG_CALL_CANCELLING) {
        /* The agent never confirmed the caller's cancel: answer for it. */
        osg_answer(ag->g, c->conn, c, &c->cid, "canceled", NULL, NULL, false);
        osg_call_leave_caller(c);
        osg_zombie(c, "cancelled");
    }
    tg_log_warn("agent '%s' did not answer a core.tool.cancel within %" PRIu64
                " ms; killing it (raise %s)",
                aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
    TG_AINST_KILL(ag->inst, SIGKILL, "stuck");
}

static const tg_call_ops_t call_ops = {
    .climits = os_op_climits,
    .ready = os_op_ready,
    .forward = os_op_forward,
    .denial_init = os_op_denial_init,
    .deny = os_op_deny,
    .free = os_op_free,
    .owner = os_op_owner,
    .flush = os_op_flush,
    .settle = os_op_settle,
    .recheck = os_op_recheck,
    .rated = os_op_rated,
    .timed_out = os_op_timed_out,
    .stuck = os_op_stuck,
    .timeout_field = "timeout_ms",
};

const tg_call_ops_t *osg_call_ops(void)
{
    return &call_ops;
}

/* A core.tool.call from caller <k>: route it by tool_id, then admit or
 * refuse it. The payload is [frame, frame+len) of block <b>. */
void osg_admit(os_conn_t *k, tg_block_t *b, const char *frame, size_t len,
                  const tg_os_env_t *env)
{
    tg_osgw_t *g = k->g;
    char tid[TG_OS_TOOL_ID_MAX + 1];
    size_t tlen = 0, alen = 0;
    if (env->call_id.len > OS_ECHO_MAX) {
        refuse_frame(k, frame, env, "call.invalid_id", "call_id longer than 128 bytes",
                     "invalid_call_id");
        return;
    }
    if (tg_os_tool_id_parse(frame, env->tool_id, tid, sizeof(tid), &tlen, &alen) < 0) {
        refuse_frame(k, frame, env, "tool.invalid_id",
                     "tool_id is not '<agent_id>/<tool>' of [A-Za-z0-9._:@-] (at most 128 bytes)",
                     "invalid_tool_id");
        return;
    }
    os_agent_t *ag = osg_agent_by_id(g, tid, alen);
    if (ag == NULL) {
        char msg[TG_OS_TOOL_ID_MAX + 80];
        snprintf(msg, sizeof(msg), "no opensentience agent '%.*s' is configured", (int)alen, tid);
        refuse_frame(k, frame, env, "tool.not_found", msg, "agent_not_found");
        return;
    }
    uint32_t cid_hash = os_cid_hash(frame + env->call_id.off, env->call_id.len);
    if (conn_call_by_cid(k, frame, env->call_id, cid_hash) != NULL) {
        refuse_frame(k, frame, env, "call.duplicate_id",
                     "a call with this call_id is still running on this connection",
                     "duplicate_call_id");
        return;
    }
    if (env->idempotency_key.type != TG_J_NONE && env->idempotency_key.len > OS_IDEM_KEY_MAX) {
        refuse_frame(k, frame, env, "call.invalid_idempotency_key",
                     "idempotency_key longer than 256 bytes", "invalid_idempotency_key");
        return;
    }
    tg_denial_t d;
    char reqid[32];
    os_call_t *c = call_alloc(ag);
    if (c == NULL) {
        /* Only calls waiting for the shared rate store beyond what the
         * limits allow at once can fill the slab (it is sized from them). */
        os_call_t tmp;
        memset(&tmp, 0, sizeof(tmp));
        echo_set(&tmp.cid, frame, env->call_id);
        echo_set(&tmp.msg_id, frame, env->id);
        osg_denial_init(ag, &d, TG_DENY_CONCURRENCY, NULL, reqid);
        d.limit = "concurrency";
        d.detail = "call table full";
        osg_deny_to(g, k, &tmp, &tmp.cid, &d);
        return;
    }
    call_attach(c, k);
    echo_set(&c->cid, frame, env->call_id);
    c->cid_hash = cid_hash;
    c->pay_off = env->payload.off;
    c->tmo_off = env->timeout_at.off;
    c->tmo_len = env->timeout_at.type != TG_J_NONE ? env->timeout_at.len : 0;
    c->rid_off = env->request_id_at.off;
    c->rid_len = env->request_id_at.type != TG_J_NONE ? env->request_id_at.len : 0;
    echo_set(&c->msg_id, frame, env->id);
    echo_set(&c->request_id, frame, env->request_id);
    c->rid_assigned = c->request_id.len == 0;
    if (c->rid_assigned) {
        /* The caller named none: the call's own id is its request_id, in
         * what the agent gets and in every answer. */
        c->request_id.buf[0] = '"';
        c->request_id.len = tg_call_id_hex(c->request_id.buf + 1, c->cc.id) + 2;
        c->request_id.buf[c->request_id.len - 1] = '"';
    }
    echo_set(&c->correlation_id, frame, env->correlation_id);
    c->cc.bytes_in = len;
    c->tool_len = tlen - alen - 1;
    memcpy(c->tool, tid + alen + 1, c->tool_len);
    c->tool[c->tool_len] = '\0';
    const tg_tool_cfg_t *tc = tg_config_tool(ag->r.acfg, c->tool, c->tool_len);
    if (tc != NULL)
        c->cc.tool = (int)(tc - ag->r.acfg->tools);
    if (env->idempotency_key.type == TG_J_STRING) {
        long n = tg_jstr_decode(frame, env->idempotency_key, c->idem, sizeof(c->idem));
        if (n >= 0) {
            c->idem_len = (size_t)n;
            c->has_idem = true;
        }
    }

    bool shutdown = false;
    const char *why = refusal_now(ag, &shutdown);
    if (shutdown) {
        osg_denial_init(ag, &d, TG_DENY_SHUTTING_DOWN, c, reqid);
        d.limit = "shutdown";
        d.detail = why;
        osg_deny_call(c, &d, "call.denied", NULL);
        osg_call_free(c);
        return;
    }
    if (c->has_idem && idem_answered(c))
        return;
    if (why != NULL) {
        osg_deny_unavailable(c, why);
        osg_call_free(c);
        return;
    }
    if (tool_unknown(ag, c)) {
        not_found(c);
        osg_call_free(c);
        return;
    }
    /* Its deadline runs from arrival: time spent waiting counts. The
     * frame stays in its block until it is forwarded. */
    tg_route_deadline(&ag->r, &c->cc, env->has_timeout, env->timeout_ms);
    tg_route_hold_frame(&ag->r, &c->cc, b, frame, len, env->call_id.off, env->call_id.len, false);
    tg_pipe_admit(&c->cc);
}


/* Call <c> is over as far as its caller is concerned (answered, or the
 * caller left): it leaves the caller's list and gives back the caller's
 * slot, since a caller's limits count what it still waits for. The
 * agent's and tool's slots stay until the agent confirms. */
void osg_call_leave_caller(os_call_t *c)
{
    os_conn_t *k = c->conn;
    if (k != NULL && c->cc.caller_slot && k->lim != NULL) {
        tg_conc_release(&k->lim->conc);
        reg_set(k->g, k->lim->reg_conc, k->lim->conc.inflight);
    }
    c->cc.caller_slot = false;
    call_detach(c);
}

/* Tell the agent to stop call <c> (its agent-side id). */
void osg_send_cancel(os_call_t *c, const char *reason)
{
    os_agent_t *ag = c->ag;
    if (!agent_writable(ag))
        return;
    char buf[512], id[32], cid[24];
    tg_os_hdr_t h;
    hdr_for_call(ag->g, NULL, &h, id);
    tg_call_id_hex(cid, c->cc.id);
    long n =
        tg_os_enc_tool_cancel(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, cid, reason);
    osg_send_built(&ag->inst->a.p.wr, buf, n);
}

/* A zombie or cancelled call must be answered by the agent within
 * kill_grace_period, else the agent is stuck. */
void osg_zombie(os_call_t *c, const char *stage)
{
    c->cc.state = TG_CALL_ZOMBIE;
    c->cc.stage = stage;
    tg_pipe_arm(&c->cc, c->ag->r.acfg->kill_grace_ms);
}

/* core.tool.cancel from caller <k> for one of its calls. */
void osg_caller_cancel(os_conn_t *k, const char *frame, const tg_os_env_t *env)
{
    os_call_t *c = conn_call_by_cid(k, frame, env->call_id,
                                    os_cid_hash(frame + env->call_id.off, env->call_id.len));
    if (c == NULL || c->cc.state == TG_CALL_CANCELLING || c->cc.state == TG_CALL_ZOMBIE)
        return; /* answered already, or a cancel is under way */
    if (c->cc.state != TG_CALL_INFLIGHT) {
        /* The agent never saw it (queued, or waiting for the shared
         * store, whose answer will then find nothing): toolgate answers. */
        osg_answer(k->g, k, c, &c->cid, "canceled", NULL, NULL, false);
        osg_audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_cancelled");
        tg_pipe_cancel_waiting(&c->cc);
        return;
    }
    osg_audit_call(c, "call.cancelled", "cancelled", NULL, "cancelled", "caller_cancelled");
    osg_send_cancel(c, "caller_cancelled");
    c->cc.state = TG_CALL_CANCELLING;
    tg_pipe_arm(&c->cc, c->ag->r.acfg->kill_grace_ms);
}
