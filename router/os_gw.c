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
 *  - A store answer names its call by ticket {agent, seq}: an answer for a
 *    call that is gone (or moved on) finds nothing, and a fleet slot
 *    granted to nobody is given back.
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
#include "router/os_gw_impl.h"

/* ---- framed output ---------------------------------------------------- */

/* Queue on <o> the message an encoder wrote at buf + 4, framed: <n> is
 * what the encoder returned, its length or a negative errno. A message
 * that did not fit is dropped (logged): toolgate built it from bounded
 * parts, so that is a bug, not a peer's doing. */
void osg_send_built(tg_out_t *o, char *buf, long n)
{
    if (n <= 0 || o == NULL || o->stream == NULL) {
        if (n <= 0)
            tg_log("an opensentience message toolgate builds did not fit (%ld)", n);
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
    tg_callc_reset(&c->cc, id, i, now_ms(ag->g));
    memset((char *)c + offsetof(os_call_t, ag), 0, sizeof(*c) - offsetof(os_call_t, ag));
    c->ag = ag;
    c->cc.state = TG_CALL_QUEUED; /* not yet in the queue: the admission decides */
    return c;
}

static void call_detach(os_call_t *c)
{
    os_conn_t *k = c->conn;
    if (k == NULL)
        return;
    if (c->cprev != NULL)
        c->cprev->cnext = c->cnext;
    else
        k->calls = c->cnext;
    if (c->cnext != NULL)
        c->cnext->cprev = c->cprev;
    c->cnext = c->cprev = NULL;
    c->conn = NULL;
}

static void call_attach(os_call_t *c, os_conn_t *k)
{
    c->conn = k;
    c->cprev = NULL;
    c->cnext = k->calls;
    if (k->calls != NULL)
        k->calls->cprev = c;
    k->calls = c;
}

void osg_call_free(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    if (c->cc.state == TG_CALL_IDLE)
        return;
    tg_dlt_disarm(&ag->r.dlt, &c->cc.dl, &c->cc.own);
    tg_block_t *held = tg_route_take_frame(&ag->r, &c->cc);
    if (held != NULL)
        tg_block_unref(&ag->g->gw->pool, held);
    call_detach(c);
    c->cc.state = TG_CALL_IDLE;
    tg_ctab_put(&ag->r.tab, c->cc.idx);
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
    char txt[40];
    long n = tg_jstr_decode(frame, s, txt, sizeof(txt));
    uint64_t v;
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
    tg_adm_audit_call(&ev, c->tool, c->tool_len, now_ms(g) - c->cc.t_start, c->cc.bytes_in,
                      c->cc.decided_by);
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

void osg_update_conc_regs(os_agent_t *ag, const os_call_t *c)
{
    tg_route_regs(&ag->r, c != NULL ? c->cc.tool : -1);
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

static void call_expired(os_call_t *c);

static void on_call_timer(uv_timer_t *t)
{
    call_expired(t->data);
}

/* Expire call <c> in <ms> from now (router/dltimer.h); a timer it
 * initialises is one more to close before the gateway is idle. */
static void call_arm(os_call_t *c, uint64_t ms)
{
    tg_osgw_t *g = c->ag->g;
    g->open_timers += tg_dlt_arm(&c->ag->r.dlt, g->gw->loop, &c->cc.dl, &c->cc.own, on_call_timer, c, ms);
}

void osg_on_call_deadline(tg_dlt_t *t, tg_dl_node_t *x)
{
    (void)t;
    call_expired((os_call_t *)(void *)((char *)x - offsetof(os_call_t, cc.dl)));
}
static void slot_ask(os_call_t *c);
void osg_release_slots(os_call_t *c);

static bool agent_writable(const os_agent_t *ag)
{
    return ag->inst != NULL && !ag->inst->a.p.gone && !ag->inst->a.p.stdin_closed &&
           ag->inst->a.p.wr.stream != NULL;
}

/* Calls may go to the instance now: it has registered its tools, its
 * stdin is open, it is not being stopped, nor replaced by a reload. */
static bool can_dispatch(const os_agent_t *ag)
{
    return ag->st == A_READY && agent_writable(ag) && ag->phase < P_STOP_STDIN && !ag->switching;
}

/* Take call <c>'s local slots: the agent's, its tool's, its caller's.
 * The registry hears of them when the call is forwarded: slots held only
 * while the shared store decides (and given back when it says the fleet
 * is full) must not make a limit warn and re-arm on every retry. */
static void take_slots(os_call_t *c)
{
    tg_route_take_slots(&c->ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
}

/* Send call <c>, holding its slots, to the agent with its call_id
 * spliced: it is in flight. */
static void forward(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    c->cc.state = TG_CALL_INFLIGHT;
    char id[26];
    id[0] = '"';
    size_t n = tg_call_id_hex(id + 1, c->cc.id) + 1;
    id[n++] = '"';
    tg_os_splice_t sp;
    tg_jspan_t s = {.off = c->cc.qid_off, .len = c->cc.qid_len, .type = TG_J_STRING};
    tg_out_t *o = &ag->inst->a.p.wr;
    /* An assigned request_id goes in as the envelope's first member, unless
     * the frame would then exceed max_frame_bytes (the audit and every
     * answer still carry it). */
    char rid[OS_ECHO_MAX + 16];
    size_t rid_len = 0, brace = 0;
    if (c->rid_assigned) {
        while (brace < c->cc.qid_off && c->cc.qframe[brace] != '{')
            brace++;
        rid_len = (size_t)snprintf(rid, sizeof(rid), "\"request_id\":%.*s,",
                                   (int)c->request_id.len, c->request_id.buf);
        if (brace >= c->cc.qid_off ||
            c->cc.qlen - c->cc.qid_len + n + rid_len > ag->g->cfg->max_frame_bytes)
            rid_len = 0;
    }
    if (tg_os_splice_plan(c->cc.qlen, s, n + rid_len, &sp) == 0) {
        tg_out_copy(o, (const char *)sp.hdr, TG_LENPFX_HDR);
        if (rid_len > 0) {
            tg_out_slice(o, c->cc.qblk, c->cc.qframe, brace + 1);
            tg_out_copy(o, rid, rid_len);
            tg_out_slice(o, c->cc.qblk, c->cc.qframe + brace + 1, sp.head_len - brace - 1);
        } else {
            tg_out_slice(o, c->cc.qblk, c->cc.qframe, sp.head_len);
        }
        tg_out_copy(o, id, n);
        tg_out_slice(o, c->cc.qblk, c->cc.qframe + sp.tail_off, c->cc.qlen - sp.tail_off);
    }
    tg_block_unref(&ag->g->gw->pool, tg_route_take_frame(&ag->r, &c->cc));
    if (c->cc.caller_slot && c->conn != NULL && c->conn->lim != NULL)
        reg_set(ag->g, c->conn->lim->reg_conc, c->conn->lim->conc.inflight);
    osg_update_conc_regs(ag, c);
}

static bool tool_has_room(const os_agent_t *ag, const os_call_t *c)
{
    return tg_route_has_room(&ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
}

bool osg_tool_registered(const os_agent_t *ag, const char *name, size_t len)
{
    for (size_t i = 0; i < ag->nreg; i++)
        if (strlen(ag->reg[i]) == len && memcmp(ag->reg[i], name, len) == 0)
            return true;
    return false;
}

static void not_found(os_call_t *c)
{
    char msg[TG_OS_TOOL_ID_MAX * 2 + 96];
    snprintf(msg, sizeof(msg), "agent '%s' has not registered tool '%s'", aname(c->ag),
             tg_audit_safe_str(c->tool, c->tool_len) ? c->tool : "invalid");
    osg_answer(c->ag->g, c->conn, c, &c->cid, "failed", "tool.not_found", msg, false);
    osg_audit_call(c, "call.denied", "invalid", NULL, NULL, "tool_not_found");
}

/* Put <c> (not in the queue) back into the wait queue where its arrival
 * puts it: calls that came later must not pass it. False when the
 * agent's queue or the tool's is full. */
static bool requeue(os_call_t *c)
{
    if (!tg_route_requeue(&c->ag->r, &c->cc, c->ag->qcap))
        return false;
    c->cc.state = TG_CALL_QUEUED;
    return true;
}

/* Queue order is kept: the first waiting call that now fits runs; a call
 * blocked only by its tool's (or caller's) slot does not hold back
 * others. Nothing runs before an instance has registered its tools, nor
 * while a reload replaces it. With concurrency_scope shared a call that
 * fits leaves the queue to ask the store for a fleet slot (and goes back
 * in its place when the fleet is full); none asks while the store says
 * the fleet is full. The answer may come at once and call back in here:
 * such a nested call only asks for one more pass (tg_adm_pump_t). */
void osg_pump_queue(os_agent_t *ag)
{
    if (!tg_adm_pump_begin(&ag->r.pump))
        return;
    do {
        uint32_t i = 0;
        while (can_dispatch(ag) && i < ag->r.aq.count && tg_conc_has_room(&ag->r.aconc)) {
            os_call_t *c = osg_call_at(ag, tg_waitq_at(&ag->r.aq, i));
            if (!osg_tool_registered(ag, c->tool, c->tool_len)) {
                tg_route_dequeue_at(&ag->r, i, &c->cc);
                not_found(c);
                osg_call_free(c);
                continue;
            }
            if (!tool_has_room(ag, c)) {
                i++;
                continue;
            }
            if (ag->r.cstore != NULL && ag->r.fleet_full)
                break;
            tg_route_dequeue_at(&ag->r, i, &c->cc);
            if (ag->r.cstore != NULL) {
                slot_ask(c); /* its deadline runs on from its arrival */
            } else {
                take_slots(c);
                forward(c);
            }
        }
    } while (tg_adm_pump_again(&ag->r.pump));
    osg_update_conc_regs(ag, NULL);
}

typedef tg_adm_rate_scope_t rate_scope_t;

/* Refuse call <c> when one of <scopes> has no token now, naming the
 * scope that frees up last (<detail>: the denial's detail, NULL for the
 * usual "N calls in P > R"). True when refused (answered and audited,
 * not freed). Takes nothing. */
static bool rate_refused(os_call_t *c, const rate_scope_t *scopes, int n, uint64_t now,
                         const char *detail_text)
{
    tg_gcra_result_t rw;
    int worst = tg_adm_rate_worst(scopes, n, now, &rw);
    if (worst < 0)
        return false;
    tg_denial_t d;
    char reqid[32], detail[160];
    osg_denial_init(c->ag, &d, TG_DENY_RATE, c, reqid);
    tg_adm_rate_denial(&d, detail, sizeof(detail), scopes[worst].scope, scopes[worst].path,
                       scopes[worst].rate, &rw);
    if (detail_text != NULL)
        d.detail = detail_text;
    osg_deny_call(c, &d, "call.denied", NULL);
    return true;
}

/* Why calls to <ag> are refused now (agent_unavailable), or NULL when
 * they may go on (ready, or starting, or being replaced by a reload: they
 * wait for it). */
static const char *unavailable(const os_agent_t *ag)
{
    if (ag->switching)
        return NULL;
    switch (ag->st) {
    case A_READY:
    case A_STARTING:
        return NULL;
    case A_DOWN:
        return ag->r.acfg->start == TG_START_ON_DEMAND ? NULL : "agent is not running";
    case A_UNHEALTHY:
        return "agent missed its heartbeats";
    case A_BACKOFF:
        return "agent is restarting";
    case A_FAILED:
        break;
    }
    return "agent stopped and is not restarted (restart policy or max_restarts)";
}

/* The config path that raises call <c>'s deadline; NULL when it is the
 * caller's own timeout_ms. */
static const char *deadline_path(const os_call_t *c)
{
    if (c->deadline_src == DL_CALLER)
        return NULL;
    if (c->deadline_src == DL_TOOL && c->cc.tool >= 0)
        return c->ag->r.tools[c->cc.tool].path_dur;
    return c->ag->r.path_dur;
}

/* ---- fleet slots (concurrency_scope shared) ---------------------------- */

static void on_fleet_timer(uv_timer_t *t)
{
    os_agent_t *ag = t->data;
    ag->r.fleet_full = false;
    osg_pump_queue(ag);
    osg_g_flush(ag->g);
}

/* Refuse call <c> for the shared concurrency limit: <observed> of <cap>
 * slots held (as the store last said), <why> in the detail. */
static void deny_fleet(os_call_t *c, uint32_t observed, uint32_t cap, const char *why,
                       const char *stage)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    osg_denial_init(c->ag, &d, TG_DENY_CONCURRENCY, c, reqid);
    tg_adm_fleet_denial(&d, detail, sizeof(detail), c->ag->r.path_conc, observed, cap, why);
    osg_deny_call(c, &d, "call.denied", stage);
}

/* Refuse call <c> because the shared store cannot decide and
 * on_store_error is closed (or the store refused the request), with
 * <retry_after_ms> (TG_DENY_ABSENT: none). */
static void deny_store(os_call_t *c, const char *limit, const char *scope, const char *unit,
                       const char *detail, int64_t retry_after_ms)
{
    tg_denial_t d;
    char reqid[32];
    osg_denial_init(c->ag, &d, TG_DENY_STORE, c, reqid);
    tg_adm_store_denial(&d, limit, scope, unit, detail, retry_after_ms);
    osg_deny_call(c, &d, "call.denied", NULL);
}

/* A call a reload's instance switch turned away: its queue is full. */
static void deny_switching(os_call_t *c, const char *stage)
{
    tg_denial_t d;
    char reqid[32];
    osg_denial_init(c->ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
    d.limit = "agent";
    d.retry_after_ms = (int64_t)c->ag->r.acfg->kill_grace_ms;
    d.detail = "agent is being restarted with its reloaded config and its wait queue is full";
    osg_deny_call(c, &d, "call.denied", stage);
}

/* A store answer's way back to its call: the agent and the call's seq
 * name it, so an answer for a call that is gone finds nothing. */
typedef struct os_ticket {
    os_agent_t *ag;
    uint64_t seq;
    int step; /* a rate answer: STEP_AGENT or STEP_TOOL, whose shared bucket answers */
} os_ticket_t;

enum { STEP_AGENT = TG_ROUTE_STEP_AGENT, STEP_TOOL = TG_ROUTE_STEP_TOOL };

static void on_slot_taken(void *arg, const tg_store_slot_result_t *r);

/* Ask the store for a fleet slot for <c>, which holds its frame (qblk),
 * is not in the queue and has room in every local scope: the local slots
 * are taken first and held while the store decides, so that other calls
 * cannot claim them meanwhile. The answer may come before this returns,
 * and may free <c>. */
static void slot_ask(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    take_slots(c);
    c->cc.state = TG_CALL_SLOT;
    os_ticket_t *t = malloc(sizeof(*t));
    int rc = -ENOMEM;
    if (t != NULL) {
        t->ag = ag;
        t->seq = c->cc.id;
        rc = tg_store_slot_acquire(ag->r.cstore, ag->r.slots_key, ag->r.acfg->lim.max_concurrent_calls,
                                   on_slot_taken, t);
        if (rc < 0)
            free(t);
    }
    if (rc < 0) {
        deny_store(c, "concurrency", NULL, NULL, TG_ADM_STORE_REFUSED_SLOT, TG_DENY_ABSENT);
        osg_call_release(c);
    }
}

/* The store's answer for call <c> (state SLOT). */
static void slot_decided(os_call_t *c, const tg_store_slot_result_t *r)
{
    os_agent_t *ag = c->ag;
    tg_route_note_slot(&c->cc, r->decided_by);
    if (r->granted) {
        tg_route_fleet_granted(&ag->r, &c->cc, r->slot);
        if (can_dispatch(ag)) {
            forward(c);
            osg_pump_queue(ag); /* the fleet had room: the next waiter may ask too */
            return;
        }
        if (ag->switching && !ag->g->stopping) {
            /* A reload is replacing the instance: wait for the new one. */
            osg_release_slots(c);
            c->cc.state = TG_CALL_QUEUED;
            if (!requeue(c)) {
                deny_switching(c, "queued");
                osg_call_free(c);
            }
            osg_update_conc_regs(ag, NULL);
            osg_agent_check_drained(ag);
            return;
        }
        tg_denial_t d;
        char reqid[32];
        osg_denial_init(ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
        d.limit = "agent";
        d.detail = "agent stopped while the call waited for a shared slot";
        osg_deny_call(c, &d, "call.denied", "queued");
        osg_call_release(c);
        return;
    }
    if (r->decided_by == TG_STORE_BY_CLOSED) {
        tg_config_t *cfg = ag->g->gw->cfg;
        deny_store(c, "concurrency", NULL, NULL, TG_ADM_STORE_CLOSED_SLOT,
                   cfg->store.timeout_ms != 0 ? (int64_t)cfg->store.timeout_ms
                                              : TG_STORE_DEF_TIMEOUT_MS);
        osg_call_release(c);
        return;
    }
    /* Full (fleet-wide, or this instance's share under the local policy):
     * give the local slots back and wait in the queue, in arrival order. */
    osg_release_slots(c);
    c->cc.state = TG_CALL_QUEUED;
    c->cc.fleet_seen = (uint32_t)r->holders;
    c->cc.fleet_cap = (uint32_t)r->cap;
    tg_route_fleet_wait(&ag->r, on_fleet_timer, ag);
    if (!requeue(c)) {
        deny_fleet(c, c->cc.fleet_seen, c->cc.fleet_cap, "and the wait queue is full", NULL);
        osg_call_free(c);
    }
    osg_update_conc_regs(ag, NULL);
    osg_agent_check_drained(ag);
}

static void on_slot_taken(void *arg, const tg_store_slot_result_t *r)
{
    os_ticket_t *t = arg;
    os_agent_t *ag = t->ag;
    os_call_t *c = call_by_seq(ag, t->seq);
    free(t);
    if (c == NULL || c->cc.state != TG_CALL_SLOT) {
        /* Nobody wants it any more (timed out, cancelled, caller gone). */
        if (r->granted)
            tg_route_fleet_release(&ag->r, r->slot);
        return;
    }
    slot_decided(c, r);
    osg_g_flush(ag->g);
}

/* The concurrency stage: dispatch the call now when the agent is ready,
 * every scope has room and nobody waits (with concurrency_scope shared:
 * ask the store for a fleet slot now, unless it said the fleet is full);
 * else queue it in the FIFO (also while the agent starts or a reload
 * replaces it), or refuse it when the FIFO is full. Its deadline starts
 * here. <c> holds its frame and is in no queue. */
static void admit_slots(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    tg_adm_tool_t *ts = c->cc.tool >= 0 ? &ag->r.tools[c->cc.tool] : NULL;
    bool tool_full = tg_adm_tool_queue_full(ts);
    bool room = can_dispatch(ag) && ag->r.aq.count == 0 && tg_conc_has_room(&ag->r.aconc) &&
                tool_has_room(ag, c);
    c->cc.state = TG_CALL_QUEUED; /* not in the queue yet: the stage decides */
    if (room && (ag->r.cstore == NULL || !ag->r.fleet_full)) {
        call_arm(c, c->cc.deadline_ms);
        if (ag->r.cstore != NULL) {
            slot_ask(c); /* may answer, and free <c>, at once */
            return;
        }
        take_slots(c);
        forward(c);
        return;
    }
    if (ag->r.aq.count >= ag->qcap || ag->r.aq.count >= ag->r.aq.cap || tool_full) {
        if (ag->switching && !tool_full) {
            deny_switching(c, NULL);
            osg_call_free(c);
            return;
        }
        tg_denial_t d;
        char reqid[32], detail[160];
        osg_denial_init(ag, &d, TG_DENY_CONCURRENCY, c, reqid);
        tg_adm_queue_full(&d, detail, sizeof(detail), tool_full, tool_full ? ts->queued : 0,
                          tool_full ? ts->max_queued : 0, tool_full ? ts->path_queue : NULL,
                          ag->r.aq.count, ag->qcap, ag->r.path_queue, ag->r.aconc.inflight,
                          ag->r.cstore != NULL && ag->r.fleet_full);
        osg_deny_call(c, &d, "call.denied", NULL);
        osg_call_free(c);
        return;
    }
    tg_route_enqueue(&ag->r, &c->cc);
    call_arm(c, c->cc.deadline_ms);
    /* The calls ahead may be held only by their tool's or caller's slot:
     * this one may still fit now. */
    osg_pump_queue(ag);
    osg_update_conc_regs(ag, c);
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
    if (ag->st == A_UNHEALTHY)
        d.retry_after_ms = (int64_t)ag->r.acfg->os.heartbeat_interval_ms;
    else if (ag->st == A_BACKOFF)
        d.retry_after_ms = (int64_t)ag->r.acfg->backoff_initial_ms;
    d.config_path = ag->st == A_UNHEALTHY ? ag->path_hb : NULL;
    osg_deny_call(c, &d, "call.denied", NULL);
}

/* Why the call may not go on now (shutting down: <*shutdown> set), or
 * NULL. */
static const char *refusal_now(const os_agent_t *ag, bool *shutdown)
{
    *shutdown = ag->g->stopping || (ag->phase != P_RUN && !ag->switching);
    if (*shutdown)
        return "toolgate is shutting down";
    const char *why = unavailable(ag);
    uint32_t recent = 0;
    if (why == NULL && ag->st == A_DOWN && osg_crash_loop(ag, now_ms(ag->g), &recent))
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
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "invalid";
    ev.reason = reason;
    ev.call_id = echo_text(&tmp.cid, cid);
    ev.bytes_in = (int64_t)(env->payload.off + env->payload.len);
    emit(k->g, &ev);
}

/* After the rate stage: start the agent when it is down (on_demand: this
 * call starts it and waits for it), then the concurrency stage. */
static void admit_go(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    if (ag->st == A_DOWN) {
        if (osg_agent_spawn(ag) < 0) {
            ag->last_failed = true; /* counted by the crash-loop check */
            osg_deny_unavailable(c, "agent could not be started");
            osg_call_free(c);
            return;
        }
    }
    admit_slots(c);
}

static int store_step(os_call_t *c, int step);

/* A shared rate store's answer for call <c> (state RATE): refused; or on
 * to the tool's shared bucket after the agent's; or on to the local
 * scopes, which may have filled meanwhile, and the rest of the admission
 * against the agent as it is now. */
static void on_store_taken(void *arg, const tg_store_result_t *r)
{
    os_ticket_t *t = arg;
    os_agent_t *ag = t->ag;
    tg_osgw_t *g = ag->g;
    int step = t->step;
    os_call_t *c = call_by_seq(ag, t->seq);
    free(t);
    if (c == NULL || c->cc.state != TG_CALL_RATE)
        return; /* its caller left or cancelled it meanwhile */
    tg_adm_tool_t *ts = c->cc.tool >= 0 ? &ag->r.tools[c->cc.tool] : NULL;
    /* Two shared buckets: the one that did not simply answer from the
     * store (a fallback, open, closed) is what the audit names. */
    if (step == STEP_AGENT || r->decided_by != TG_STORE_BY_STORE || c->cc.rate_by == NULL) {
        c->cc.rate_by = tg_store_decider_name(r->decided_by);
        c->cc.decided_by = c->cc.rate_by;
    }
    if (!r->gcra.allowed) {
        bool tool = step == STEP_TOOL && ts != NULL;
        tg_rate_t rate = tool ? ag->r.acfg->tools[c->cc.tool].lim.rate_limit : ag->r.acfg->lim.rate_limit;
        if (r->decided_by == TG_STORE_BY_CLOSED) {
            deny_store(c, "rate", tool ? "tool" : "agent", tg_adm_rate_unit(rate),
                       TG_ADM_STORE_CLOSED_RATE, (int64_t)r->gcra.retry_after_ms);
        } else {
            tg_denial_t d;
            char reqid[32], detail[160];
            osg_denial_init(ag, &d, TG_DENY_RATE, c, reqid);
            tg_adm_rate_denial(&d, detail, sizeof(detail), tool ? "tool" : "agent",
                               tool ? ts->path_rate : ag->r.path_rate, rate, &r->gcra);
            osg_deny_call(c, &d, "call.denied", NULL);
        }
        osg_call_free(c);
        osg_agent_check_drained(ag);
        osg_g_flush(g);
        return;
    }
    /* The agent's shared token taken, the tool's next. A refusal there
     * leaves the agent's token spent: the fleet can fall short of the
     * agent's limit by such calls, never exceed either limit. */
    if (step == STEP_AGENT && ts != NULL && ts->shared && ag->r.tool_store != NULL) {
        if (store_step(c, STEP_TOOL) < 0) {
            deny_store(c, "rate", "tool", NULL, TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
            osg_call_free(c);
            osg_agent_check_drained(ag);
        }
        osg_g_flush(g);
        return;
    }
    rate_scope_t scopes[3];
    int n = tg_route_rate_scopes(&ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL, false,
                                 scopes);
    uint64_t now = now_ms(g);
    bool shutdown = false;
    const char *why = refusal_now(ag, &shutdown);
    if (shutdown) {
        tg_denial_t d;
        char reqid[32];
        osg_denial_init(ag, &d, TG_DENY_SHUTTING_DOWN, c, reqid);
        d.limit = "shutdown";
        d.detail = why;
        osg_deny_call(c, &d, "call.denied", NULL);
    } else if (why != NULL) {
        osg_deny_unavailable(c, why);
    } else if (rate_refused(c, scopes, n, now,
                            "the scope filled while the shared store answered")) {
        /* answered */
    } else if (ag->st == A_READY && !ag->switching && !osg_tool_registered(ag, c->tool, c->tool_len)) {
        not_found(c);
    } else {
        tg_route_rate_take(&ag->r, scopes, n, now);
        c->cc.state = TG_CALL_QUEUED; /* between stages: in no queue */
        admit_go(c);
        osg_g_flush(g);
        return;
    }
    osg_call_free(c);
    osg_agent_check_drained(ag);
    osg_g_flush(g);
}

/* Ask the store for call <c>'s token from the agent's shared bucket
 * (STEP_AGENT) or its tool's (STEP_TOOL). 0, or a negative errno when the
 * request could not be made (nothing is pending then). The answer may
 * come before this returns (a degraded store, a lease token at hand), and
 * may free <c>: nothing of it is used after. */
static int store_step(os_call_t *c, int step)
{
    os_agent_t *ag = c->ag;
    os_ticket_t *t = malloc(sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->ag = ag;
    t->seq = c->cc.id;
    t->step = step;
    int rc = tg_route_rate_ask(&ag->r, &c->cc, step, on_store_taken, t);
    if (rc < 0)
        free(t);
    return rc;
}

/* Ask the shared store for call <c>'s tokens, which holds its frame: the
 * agent's bucket first when it is shared, then the tool's. The local
 * scopes are taken when it has answered, so a call the store refuses
 * costs them nothing. */
static void rate_hold(os_call_t *c)
{
    c->cc.state = TG_CALL_RATE;
    if (store_step(c, c->ag->r.store != NULL ? STEP_AGENT : STEP_TOOL) < 0) {
        deny_store(c, "rate", c->ag->r.store != NULL ? "agent" : "tool", NULL,
                   TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
        osg_call_free(c);
    }
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
    for (os_call_t *o = k->calls; o != NULL; o = o->cnext) {
        if (o->cid.len == env->call_id.len &&
            memcmp(o->cid.buf, frame + env->call_id.off, env->call_id.len) == 0) {
            refuse_frame(k, frame, env, "call.duplicate_id",
                         "a call with this call_id is still running on this connection",
                         "duplicate_call_id");
            return;
        }
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
    if (ag->st == A_READY && !ag->switching && !osg_tool_registered(ag, c->tool, c->tool_len)) {
        not_found(c);
        osg_call_free(c);
        return;
    }

    /* Deadline: min(caller timeout_ms, tool cap, agent cap); it runs from
     * arrival, so time spent waiting counts. */
    c->cc.deadline_ms = ag->r.acfg->lim.max_tool_call_duration_ms;
    c->deadline_src = DL_AGENT;
    if (tc != NULL && tc->lim.duration_src != TG_SRC_DEFAULT &&
        tc->lim.max_tool_call_duration_ms < c->cc.deadline_ms) {
        c->cc.deadline_ms = tc->lim.max_tool_call_duration_ms;
        c->deadline_src = DL_TOOL;
    }
    if (env->has_timeout && env->timeout_ms < c->cc.deadline_ms) {
        c->cc.deadline_ms = env->timeout_ms;
        c->deadline_src = DL_CALLER; /* the caller's own choice: nothing to raise */
    }

    /* The frame stays in its block until it is forwarded. */
    tg_route_hold_frame(&ag->r, &c->cc, b, frame, len, env->call_id.off, env->call_id.len, false);

    /* Rate: every scope must allow it; a call refused by one takes no
     * token from the others. With rate_scope shared the agent's bucket is
     * in the store: the local scopes are checked first and taken once the
     * store allows. */
    uint64_t now = now_ms(g);
    rate_scope_t scopes[3];
    int nscopes = tg_route_rate_scopes(&ag->r, &c->cc, k->lim, true, scopes);
    if (rate_refused(c, scopes, nscopes, now, NULL)) {
        osg_call_free(c);
        return;
    }
    if (ag->r.store != NULL || (c->cc.tool >= 0 && ag->r.tools[c->cc.tool].shared)) {
        rate_hold(c);
        return;
    }
    tg_route_rate_take(&ag->r, scopes, nscopes, now);
    admit_go(c);
}

/* Give back every slot a call holds: the local ones and the fleet slot.
 * A fleet slot freed by this instance is room in the fleet, so the queue
 * may ask again. */
void osg_release_slots(os_call_t *c)
{
    tg_route_release_slots(&c->ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
}

/* Give back the slots of a call, free it, let waiters in. */
void osg_call_release(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    if (tg_callc_holds_slots(c->cc.state))
        osg_release_slots(c);
    else if (c->cc.state == TG_CALL_QUEUED)
        tg_route_unqueue(&c->ag->r, &c->cc);
    os_call_t copy = *c;
    osg_call_free(c);
    osg_update_conc_regs(ag, &copy);
    osg_pump_queue(ag);
    osg_agent_check_drained(ag);
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
    call_arm(c, c->ag->r.acfg->kill_grace_ms);
}
static void call_expired(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    tg_denial_t d;
    char reqid[32], detail[160];
    /* Waiting for the fleet rather than for a local slot: the store is
     * deciding now, or it refused this call and the local scopes have
     * room, so the shared limit is what held it back. */
    if (tg_route_held_by_fleet(&ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL,
                               can_dispatch(ag))) {
        snprintf(detail, sizeof(detail), "deadline of %" PRIu64 " ms passed while waiting for one",
                 c->cc.deadline_ms);
        deny_fleet(c, c->cc.fleet_seen, c->cc.fleet_cap, detail, "queued");
        osg_call_release(c);
    } else if (c->cc.state == TG_CALL_QUEUED) {
        bool waiting_agent = ag->st != A_READY || ag->switching;
        osg_denial_init(ag, &d, waiting_agent ? TG_DENY_UNAVAILABLE : TG_DENY_CONCURRENCY, c, reqid);
        if (waiting_agent) {
            d.limit = "agent";
            snprintf(detail, sizeof(detail),
                     "agent did not become ready within the call's deadline of %" PRIu64 " ms%s",
                     c->cc.deadline_ms,
                     ag->switching ? " (it is being restarted with its reloaded config)" : "");
            d.detail = detail;
        } else {
            tg_route_queued_denial(&ag->r, &c->cc, &d, detail, sizeof(detail));
        }
        osg_deny_call(c, &d, "call.denied", "queued");
        osg_call_release(c);
    } else if (c->cc.state == TG_CALL_INFLIGHT) {
        const char *path = deadline_path(c);
        osg_denial_init(ag, &d, TG_DENY_TIMEOUT, c, reqid);
        tg_route_timeout_denial(&c->cc, now_ms(ag->g), path, "timeout_ms", &d, detail,
                                sizeof(detail));
        osg_deny_call(c, &d, "call.timeout", "timed_out");
        osg_send_cancel(c, "timeout");
        osg_call_leave_caller(c);
        osg_zombie(c, "timed_out");
        osg_pump_queue(ag); /* a call waiting for the caller's slot */
    } else if (c->cc.state == TG_CALL_CANCELLING) {
        /* The agent never confirmed the caller's cancel: answer for it. */
        osg_answer(ag->g, c->conn, c, &c->cid, "canceled", NULL, NULL, false);
        osg_call_leave_caller(c);
        osg_zombie(c, "cancelled");
        tg_log("agent '%s' did not answer a core.tool.cancel within %" PRIu64
               " ms; killing it (raise %s)",
               aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        osg_inst_kill(ag, SIGKILL, "stuck");
    } else if (c->cc.state == TG_CALL_ZOMBIE) {
        tg_log("agent '%s' did not answer a core.tool.cancel within %" PRIu64
               " ms; killing it (raise %s)",
               aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        osg_inst_kill(ag, SIGKILL, "stuck");
    }
    osg_g_flush(ag->g);
}

/* core.tool.cancel from caller <k> for one of its calls. */
void osg_caller_cancel(os_conn_t *k, const char *frame, const tg_os_env_t *env)
{
    os_call_t *c = k->calls;
    for (; c != NULL; c = c->cnext)
        if (c->cid.len == env->call_id.len &&
            memcmp(c->cid.buf, frame + env->call_id.off, env->call_id.len) == 0)
            break;
    if (c == NULL || c->cc.state == TG_CALL_CANCELLING || c->cc.state == TG_CALL_ZOMBIE)
        return; /* answered already, or a cancel is under way */
    if (c->cc.state != TG_CALL_INFLIGHT) {
        /* The agent never saw it (queued, or waiting for the shared
         * store, whose answer will then find nothing): toolgate answers. */
        os_agent_t *ag = c->ag;
        osg_answer(k->g, k, c, &c->cid, "canceled", NULL, NULL, false);
        osg_audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_cancelled");
        if (c->cc.state == TG_CALL_RATE) {
            osg_call_free(c);
            osg_agent_check_drained(ag);
        } else {
            osg_call_release(c);
        }
        return;
    }
    osg_audit_call(c, "call.cancelled", "cancelled", NULL, "cancelled", "caller_cancelled");
    osg_send_cancel(c, "caller_cancelled");
    c->cc.state = TG_CALL_CANCELLING;
    call_arm(c, c->ag->r.acfg->kill_grace_ms);
}
