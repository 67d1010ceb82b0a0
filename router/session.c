/* toolgate wrap: the MCP stdio proxy. See wrap.h and DESIGN.md.
 *
 * Structure. One tg_wrap_t holds the caller (stdin/stdout), the current
 * agent instance (a child process with three pipes), the call table (a
 * slab of tg_call_t indexed by a small integer), and the limit state
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
#include "router/session_impl.h"

/* ---- deadlines ------------------------------------------------------- */

static void call_expired(tg_call_t *c);

static void on_call_timer(uv_timer_t *t)
{
    call_expired(t->data);
}

void mcp_on_call_deadline(tg_dlt_t *t, tg_dl_node_t *x)
{
    (void)t;
    call_expired((tg_call_t *)(void *)((char *)x - offsetof(tg_call_t, cc.dl)));
}

/* Expire call <c> in <ms> from now (router/dltimer.h). */
static void call_arm(tg_wrap_t *w, tg_call_t *c, uint64_t ms)
{
    (void)tg_dlt_arm(&w->ag->r.dlt, w->gw->loop, &c->cc.dl, &c->cc.own, on_call_timer, c, ms);
}

void mcp_call_disarm(tg_agent_t *ag, tg_call_t *c)
{
    tg_dlt_disarm(&ag->r.dlt, &c->cc.dl, &c->cc.own);
}

/* ---- call table ------------------------------------------------------- */

tg_call_t *mcp_call_at(const tg_agent_t *ag, uint32_t i)
{
    return tg_ctab_at(&ag->r.tab, i);
}

tg_call_t *mcp_call_alloc(tg_wrap_t *w, call_kind_t kind)
{
    uint32_t i;
    uint64_t id;
    tg_call_t *c = tg_ctab_take(&w->ag->r.tab, &i, &id);
    if (c == NULL)
        return NULL;
    tg_callc_reset(&c->cc, id, i, now_ms(w));
    memset((char *)c + offsetof(tg_call_t, w), 0, CALL_CLEARED - offsetof(tg_call_t, w));
    c->tool_name[0] = '\0';
    c->w = w;
    c->kind = kind;
    if (kind == K_PASS)
        w->npass++;
    if (kind == K_CALL || kind == K_PASS)
        w->nbusy++;
    return c;
}

void mcp_call_free(tg_wrap_t *w, tg_call_t *c)
{
    if (c->kind == K_FREE)
        return;
    mcp_call_disarm(w->ag, c);
    if (c->cc.fslot != NULL) {
        /* Every path gives the fleet slot back through release_slots; an
         * entry freed with one still held would keep it renewed forever. */
        tg_route_fleet_release(&w->ag->r, c->cc.fslot);
        c->cc.fslot = NULL;
        w->ag->r.fleet_held--;
    }
    tg_block_t *held = tg_route_take_frame(&w->ag->r, &c->cc);
    if (held != NULL)
        tg_block_unref(&w->gw->pool, held);
    /* Counters of the session the call belongs to, whoever frees it. */
    if (c->kind == K_PASS)
        c->w->npass--;
    if (c->kind == K_CALL || c->kind == K_PASS)
        c->w->nbusy--;
    c->kind = K_FREE;
    c->cc.state = TG_CALL_IDLE;
    tg_ctab_put(&w->ag->r.tab, c->cc.idx);
}

/* The live entry with agent-side id <id> belonging to session <w>: an
 * instance can only answer the calls of its own session. */
tg_call_t *mcp_call_by_agent_id(tg_wrap_t *w, uint64_t id)
{
    tg_call_t *c = tg_ctab_lookup(&w->ag->r.tab, id);
    if (c == NULL || c->kind == K_FREE || c->cc.id != id || c->w != w)
        return NULL;
    return c;
}

/* Calls that still need the agent: the drain waits for these. */
uint32_t mcp_busy_calls(const tg_wrap_t *w)
{
    return w->nbusy;
}

/* ---- output to the caller --------------------------------------------- */

static void to_caller(tg_wrap_t *w, const char *p, size_t len)
{
    if (!w->cout_dead)
        (void)tg_out_copy(&w->cwr, p, len);
}

void mcp_deny(tg_wrap_t *w, const char *id, size_t id_len, const tg_denial_t *d)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_denial_mcp(buf, sizeof(buf), id, id_len, d);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

void mcp_rpc_error(tg_wrap_t *w, const char *id, size_t id_len, int code, const char *msg)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_rpc_error(buf, sizeof(buf), id, id_len, code, msg);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

void mcp_denial_init(tg_wrap_t *w, tg_denial_t *d, tg_deny_code_t code, const tg_call_t *c,
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

void mcp_audit_call(tg_wrap_t *w, const tg_call_t *c, const char *event, const char *status,
                       const tg_denial_t *d, const char *stage)
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
        tg_adm_audit_call(&ev, c->tool_name, c->tool_name_len, now_ms(w) - c->cc.t_start, c->cc.bytes_in,
                          c->cc.decided_by);
    }
    ev.status = status;
    ev.stage = stage;
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
void mcp_deny_call(tg_wrap_t *w, tg_call_t *c, const tg_denial_t *d, const char *event,
                      const char *stage)
{
    mcp_deny(w, c->caller_id, c->caller_id_len, d);
    mcp_audit_call(w, c, event, event[5] == 't' ? "timeout" : "denied", d, stage);
}

/* ---- output to the agent ---------------------------------------------- */

/* Forward frame [p, p+len) (with its newline) from block <b> to the agent,
 * the id span [id_off, id_off+id_len) replaced by <agent_id>. */
void mcp_to_agent_spliced(tg_wrap_t *w, tg_block_t *b, const char *p, size_t len,
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

bool mcp_agent_writable(const tg_wrap_t *w)
{
    return w->inst != NULL && !w->inst->a.p.gone && !w->inst->a.p.stdin_closed &&
           w->inst->a.p.wr.stream != NULL;
}

/* Tell the agent to stop call <c> (MCP notifications/cancelled for the id
 * it saw) and ask it to prove it is alive (ping): its slot is freed on the
 * pong. */
/* Ask the agent to prove it is alive for zombie call <c>: a ping whose
 * pong frees <c>'s slot. Without room for the ping entry the kill_grace
 * timer still bounds the zombie. */
static void send_ping(tg_wrap_t *w, tg_call_t *c)
{
    tg_call_t *p = mcp_agent_writable(w) ? mcp_call_alloc(w, K_PING) : NULL;
    if (p == NULL)
        return;
    char buf[96];
    p->ping_for = c->cc.idx;
    p->ping_for_id = c->cc.id;
    int n = snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"ping\"}\n",
                     p->cc.id);
    tg_out_copy(&w->inst->a.p.wr, buf, (size_t)n);
}

static void send_cancel_and_ping(tg_wrap_t *w, tg_call_t *c, const char *reason)
{
    if (!mcp_agent_writable(w))
        return;
    char buf[256];
    int n = snprintf(buf, sizeof(buf),
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                     "\"requestId\":%" PRIu64 ",\"reason\":\"%s\"}}\n",
                     c->cc.id, reason);
    tg_out_copy(&w->inst->a.p.wr, buf, (size_t)n);
    send_ping(w, c);
}

/* ---- admission -------------------------------------------------------- */

/* Take call <c>'s local slots: the agent's, its tool's, its caller's.
 * The registry hears of them when the call is forwarded: slots held only
 * while the shared store decides (and given back when it says the fleet
 * is full) must not make a limit warn and re-arm on every retry. */
static void take_slots(tg_wrap_t *w, tg_call_t *c)
{
    tg_route_take_slots(&w->ag->r, &c->cc, w->climits);
}

/* Send call <c>, holding its slots, to the agent: it is in flight. */
static void forward(tg_wrap_t *w, tg_call_t *c, tg_block_t *b, const char *frame, size_t len,
                    size_t id_off, size_t id_len)
{
    c->cc.state = TG_CALL_INFLIGHT;
    mcp_to_agent_spliced(w, b, frame, len, id_off, id_len, c->cc.id);
    if (c->cc.caller_slot)
        reg_set(w, w->climits->reg_conc, w->climits->conc.inflight);
    update_conc_regs(w, c->cc.tool);
}

static void dispatch(tg_wrap_t *w, tg_call_t *c, tg_block_t *b, const char *frame, size_t len,
                     size_t id_off, size_t id_len)
{
    take_slots(w, c);
    forward(w, c, b, frame, len, id_off, id_len);
}

/* Room in the call's tool slots and its caller's slots (the agent's are
 * checked by the caller of this). */
static bool tool_has_room(tg_wrap_t *w, const tg_call_t *c)
{
    return tg_route_has_room(&w->ag->r, &c->cc, c->w->climits);
}

static void admit_slots(tg_wrap_t *w, tg_call_t *c, tg_block_t *b, const char *frame, size_t len,
                        size_t id_off, size_t id_len, bool held);

/* A call waiting for the shared store: the agent and id name it, so an
 * answer for a call that is gone (its session ended) finds nothing. */
typedef struct store_ticket {
    tg_agent_t *ag;
    uint64_t agent_id;
    int step; /* STEP_AGENT or STEP_TOOL: whose shared bucket answers */
} store_ticket_t;

enum { STEP_AGENT = TG_ROUTE_STEP_AGENT, STEP_TOOL = TG_ROUTE_STEP_TOOL };

static int store_step(tg_wrap_t *w, tg_call_t *c, int step);

static void on_store_taken(void *arg, const tg_store_result_t *r)
{
    store_ticket_t *t = arg;
    tg_agent_t *ag = t->ag;
    int step = t->step;
    tg_call_t *c = tg_ctab_lookup(&ag->r.tab, t->agent_id);
    bool live = c != NULL && c->kind == K_CALL && c->cc.id == t->agent_id && c->cc.state == TG_CALL_RATE;
    free(t);
    ag->nstore_wait--;
    if (!live) {
        mcp_agent_maybe_reap(ag);
        return;
    }
    tg_wrap_t *w = c->w;
    tool_state_t *ts = c->cc.tool >= 0 ? &ag->r.tools[c->cc.tool] : NULL;
    /* Two shared buckets: the one that did not simply answer from the
     * store (a fallback, open, closed) is what the audit names. */
    if (step == STEP_AGENT || r->decided_by != TG_STORE_BY_STORE || c->cc.rate_by == NULL) {
        c->cc.rate_by = tg_store_decider_name(r->decided_by);
        c->cc.decided_by = c->cc.rate_by;
    }
    tg_denial_t d;
    char reqid[32], detail[160];
    if (!r->gcra.allowed) {
        bool tool = step == STEP_TOOL;
        tg_rate_t rate = tool ? ag->r.acfg->tools[c->cc.tool].lim.rate_limit : ag->r.acfg->lim.rate_limit;
        bool store_down = r->decided_by == TG_STORE_BY_CLOSED;
        mcp_denial_init(w, &d, store_down ? TG_DENY_STORE : TG_DENY_RATE, c, reqid, sizeof(reqid));
        if (store_down) {
            tg_adm_store_denial(&d, "rate", tool ? "tool" : "agent", tg_adm_rate_unit(rate),
                                TG_ADM_STORE_CLOSED_RATE, (int64_t)r->gcra.retry_after_ms);
        } else {
            tg_adm_rate_denial(&d, detail, sizeof(detail), tool ? "tool" : "agent",
                               tool ? ts->path_rate : ag->r.path_rate, rate, &r->gcra);
        }
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        mcp_check_drained(w);
        mcp_flush_all(w);
        return;
    }
    /* The agent's shared token taken, the tool's next. A refusal there
     * leaves the agent's token spent: the fleet can fall short of the
     * agent's limit by such calls, never exceed either limit. */
    if (step == STEP_AGENT && ts != NULL && ts->shared) {
        if (store_step(w, c, STEP_TOOL) < 0) {
            mcp_denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
            tg_adm_store_denial(&d, "rate", "tool", NULL, TG_ADM_STORE_REFUSED_RATE,
                                TG_DENY_ABSENT);
            mcp_deny_call(w, c, &d, "call.denied", NULL);
            mcp_call_free(w, c);
            mcp_check_drained(w);
        }
        mcp_flush_all(w);
        return;
    }
    /* The local scopes (tool, caller) last: they may have filled since. */
    uint64_t now = now_ms(w);
    tg_caller_lim_t *cl = w->climits;
    tg_gcra_t *local[2] = {ts != NULL && ts->has_rate && !ts->shared ? &ts->rate : NULL,
                           cl != NULL && cl->has_rate ? &cl->rate : NULL};
    for (int k = 0; k < 2; k++) {
        if (local[k] == NULL)
            continue;
        tg_gcra_result_t rr = tg_gcra_peek(local[k], now);
        if (rr.allowed)
            continue;
        mcp_denial_init(w, &d, TG_DENY_RATE, c, reqid, sizeof(reqid));
        d.limit = "rate";
        d.scope = k == 0 ? "tool" : "caller";
        d.observed = (int64_t)rr.observed;
        d.cap = (int64_t)rr.cap;
        d.retry_after_ms = (int64_t)rr.retry_after_ms;
        d.config_path = k == 0 ? ts->path_rate : cl->path_rate;
        d.detail = "the scope filled while the shared store answered";
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        mcp_check_drained(w);
        mcp_flush_all(w);
        return;
    }
    for (int k = 0; k < 2; k++)
        if (local[k] != NULL)
            tg_gcra_take(local[k], now);
    c->cc.state = TG_CALL_IDLE;
    admit_slots(w, c, c->cc.qblk, c->cc.qframe, c->cc.qlen, c->cc.qid_off, c->cc.qid_len, true);
    mcp_flush_all(w);
}

/* Ask the store for call <c>'s token from the agent's shared bucket
 * (STEP_AGENT) or its tool's (STEP_TOOL). 0, or a negative errno when the
 * request could not be made (nothing is pending then). The callback may
 * run before this returns (a degraded store, a lease token at hand). */
static int store_step(tg_wrap_t *w, tg_call_t *c, int step)
{
    tg_agent_t *ag = w->ag;
    store_ticket_t *t = malloc(sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->ag = ag;
    t->agent_id = c->cc.id;
    t->step = step;
    /* The answer holds the agent (a retired one is freed only after it). */
    ag->nstore_wait++;
    int rc = tg_route_rate_ask(&ag->r, &c->cc, step, on_store_taken, t);
    if (rc < 0) {
        ag->nstore_wait--;
        free(t);
    }
    return rc;
}

/* Hold call <c>'s frame and ask the shared store for its tokens: the
 * agent's bucket first when it is shared, then the tool's. */
static void rate_hold(tg_wrap_t *w, tg_call_t *c, tg_block_t *b, const char *frame, size_t len,
                      size_t id_off, size_t id_len)
{
    c->cc.state = TG_CALL_RATE;
    tg_route_hold_frame(&w->ag->r, &c->cc, b, frame, len, id_off, id_len, false);
    if (store_step(w, c, w->ag->r.store != NULL ? STEP_AGENT : STEP_TOOL) < 0) {
        tg_denial_t d;
        char reqid[32];
        mcp_denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "rate", w->ag->r.store != NULL ? "agent" : "tool", NULL,
                            TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
    }
}

typedef tg_adm_rate_scope_t rate_scope_t;

/* Admit or refuse one tools/call frame [frame, frame+len) from the caller,
 * in block <b>. */
void mcp_admit_call(tg_wrap_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    tg_call_t *c = mcp_call_alloc(w, K_CALL);
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
    if (env->tool_name.type == TG_J_STRING) {
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
    tool_state_t *ts = c->cc.tool >= 0 ? &w->ag->r.tools[c->cc.tool] : NULL;

    if (w->phase != P_RUN) {
        mcp_denial_init(w, &d, TG_DENY_SHUTTING_DOWN, c, reqid, sizeof(reqid));
        d.limit = "shutdown";
        d.detail = "toolgate is shutting down";
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        return;
    }
    if (w->astate != A_RUNNING) {
        mcp_denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
        d.limit = "agent";
        d.detail = w->astate == A_BACKOFF ? "agent is restarting" : "agent is starting";
        d.retry_after_ms = 1000;
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        return;
    }

    /* Rate: both buckets must allow; a call refused by one takes no token
     * from the other. */
    /* Deadline: min(caller timeout_ms, tool cap, agent cap). */
    c->cc.deadline_ms = w->ag->r.acfg->lim.max_tool_call_duration_ms;
    c->deadline_path = w->ag->r.path_dur;
    if (ts != NULL && w->ag->r.acfg->tools[c->cc.tool].lim.duration_src != TG_SRC_DEFAULT &&
        w->ag->r.acfg->tools[c->cc.tool].lim.max_tool_call_duration_ms < c->cc.deadline_ms) {
        c->cc.deadline_ms = w->ag->r.acfg->tools[c->cc.tool].lim.max_tool_call_duration_ms;
        c->deadline_path = ts->path_dur;
    }
    if (env->has_timeout && env->timeout_ms < c->cc.deadline_ms) {
        c->cc.deadline_ms = env->timeout_ms;
        c->deadline_path = NULL; /* the caller's own choice: nothing to raise */
    }

    uint64_t now = now_ms(w);
    tg_caller_lim_t *cl = w->climits;
    rate_scope_t scopes[3];
    int nscopes = tg_route_rate_scopes(&w->ag->r, &c->cc, cl, true, scopes);
    /* The refusal names the scope that frees up last. */
    tg_gcra_result_t rw;
    int worst = tg_adm_rate_worst(scopes, nscopes, now, &rw);
    if (worst >= 0) {
        mcp_denial_init(w, &d, TG_DENY_RATE, c, reqid, sizeof(reqid));
        tg_adm_rate_denial(&d, detail, sizeof(detail), scopes[worst].scope, scopes[worst].path,
                           scopes[worst].rate, &rw);
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        return;
    }
    if (w->ag->r.store != NULL || (ts != NULL && ts->shared)) {
        /* The agent's or the tool's bucket is shared: ask the store, holding the frame
         * until it answers (within its own timeout). The local scopes are
         * taken then, so a call the store refuses costs them nothing. */
        rate_hold(w, c, b, frame, len, env->id.off, env->id.len);
        return;
    }
    /* Every scope allows it: a call refused by one takes no token from the
     * others. */
    tg_route_rate_take(&w->ag->r, scopes, nscopes, now);
    admit_slots(w, c, b, frame, len, env->id.off, env->id.len, false);
}

/* ---- fleet slots (concurrency_scope shared) ---------------------------- */

static void on_fleet_timer(uv_timer_t *t)
{
    tg_agent_t *ag = t->data;
    ag->r.fleet_full = false;
    if (ag->r.aq.count == 0)
        return;
    tg_wrap_t *w = mcp_call_at(ag, tg_waitq_at(&ag->r.aq, 0))->w;
    mcp_pump_queue(w);
    mcp_flush_all(w);
}

/* Refuse call <c> for the shared concurrency limit: <observed> of <cap>
 * slots held (as the store last said), <why> in the detail. */
static void deny_fleet(tg_wrap_t *w, tg_call_t *c, uint32_t observed, uint32_t cap,
                       const char *why, const char *stage)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    mcp_denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
    tg_adm_fleet_denial(&d, detail, sizeof(detail), w->ag->r.path_conc, observed, cap, why);
    mcp_deny_call(w, c, &d, "call.denied", stage);
}

/* A call waiting for the shared store: the agent and id name it, so an
 * answer for a call that is gone (timed out, cancelled, session ended)
 * finds nothing and gives the slot back. */
typedef struct slot_ticket {
    tg_agent_t *ag;
    uint64_t agent_id;
} slot_ticket_t;

static void on_slot_taken(void *arg, const tg_store_slot_result_t *r);
void mcp_release_slots(tg_wrap_t *w, tg_call_t *c);

/* Ask the store for a fleet slot for <c>, which holds its frame (qblk)
 * and has room in every local scope: the local slots are taken first and
 * held while the store decides, so that other calls cannot claim them
 * meanwhile. The answer may come before this returns, and may free <c>. */
static void slot_ask(tg_wrap_t *w, tg_call_t *c)
{
    tg_agent_t *ag = w->ag;
    take_slots(w, c);
    c->cc.state = TG_CALL_SLOT;
    slot_ticket_t *t = malloc(sizeof(*t));
    int rc = -ENOMEM;
    if (t != NULL) {
        t->ag = ag;
        t->agent_id = c->cc.id;
        ag->nstore_wait++;
        rc = tg_store_slot_acquire(ag->r.cstore, ag->r.slots_key, ag->r.acfg->lim.max_concurrent_calls,
                                   on_slot_taken, t);
        if (rc < 0) {
            ag->nstore_wait--;
            free(t);
        }
    }
    if (rc < 0) {
        tg_denial_t d;
        char reqid[32];
        mcp_denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "concurrency", NULL, NULL, TG_ADM_STORE_REFUSED_SLOT,
                            TG_DENY_ABSENT);
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_release(w, c);
    }
}

/* The store's answer for call <c> (state SLOT). */
static void slot_decided(tg_wrap_t *w, tg_call_t *c, const tg_store_slot_result_t *r)
{
    tg_agent_t *ag = w->ag;
    tg_route_note_slot(&c->cc, r->decided_by);
    if (r->granted) {
        tg_route_fleet_granted(&ag->r, &c->cc, r->slot);
        tg_route_unqueue(&ag->r, &c->cc);
        if (!mcp_agent_writable(w) || w->astate != A_RUNNING) {
            /* The instance went away while the store answered. */
            tg_denial_t d;
            char reqid[32];
            mcp_denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
            d.limit = "agent";
            d.detail = "agent stopped while the call waited for a shared slot";
            mcp_deny_call(w, c, &d, "call.denied", "queued");
            mcp_call_release(w, c);
            return;
        }
        tg_block_t *b = tg_route_take_frame(&ag->r, &c->cc);
        forward(w, c, b, c->cc.qframe, c->cc.qlen, c->cc.qid_off, c->cc.qid_len);
        tg_block_unref(&w->gw->pool, b);
        /* The fleet had room: the next waiter may ask too. */
        mcp_pump_queue(w);
        return;
    }
    if (r->decided_by == TG_STORE_BY_CLOSED) {
        tg_denial_t d;
        char reqid[32];
        mcp_denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "concurrency", NULL, NULL, TG_ADM_STORE_CLOSED_SLOT,
                            w->gw->cfg->store.timeout_ms != 0 ? (int64_t)w->gw->cfg->store.timeout_ms
                                                              : TG_STORE_DEF_TIMEOUT_MS);
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_release(w, c);
        return;
    }
    /* Full (fleet-wide, or this instance's share under the local policy):
     * give the local slots back and wait in the queue, in arrival order. */
    mcp_release_slots(w, c);
    c->cc.fleet_seen = (uint32_t)r->holders;
    c->cc.fleet_cap = (uint32_t)r->cap;
    tg_route_fleet_wait(&ag->r, on_fleet_timer, ag);
    if (!c->cc.in_queue && !tg_route_requeue(&ag->r, &c->cc, ag->r.aq.cap)) {
        deny_fleet(w, c, c->cc.fleet_seen, c->cc.fleet_cap, "and the wait queue is full", NULL);
        mcp_call_release(w, c);
        return;
    }
    c->cc.state = TG_CALL_QUEUED;
    update_conc_regs(w, c->cc.tool);
    /* A queued call keeps waiting; the slots it gave back may serve no one
     * else now (the fleet is full), which pump_queue knows. */
}

static void on_slot_taken(void *arg, const tg_store_slot_result_t *r)
{
    slot_ticket_t *t = arg;
    tg_agent_t *ag = t->ag;
    tg_call_t *c = tg_ctab_lookup(&ag->r.tab, t->agent_id);
    bool live = c != NULL && c->kind == K_CALL && c->cc.id == t->agent_id && c->cc.state == TG_CALL_SLOT;
    free(t);
    ag->nstore_wait--;
    if (!live) {
        /* Nobody wants it any more. */
        if (r->granted)
            tg_route_fleet_release(&ag->r, r->slot);
        mcp_agent_maybe_reap(ag);
        return;
    }
    tg_wrap_t *w = c->w;
    slot_decided(w, c, r);
    mcp_flush_all(w);
}

/* The concurrency stage: run now when every scope has room and nobody
 * waits, else wait in the FIFO when it has room, else refuse; then start
 * the deadline. <held>: the call already holds a reference on <b> (it
 * waited for the store). With concurrency_scope shared, "run now" is "ask
 * the store for a fleet slot now" (slot_ask), unless the store said the
 * fleet is full: then the call waits in the queue like the others. */
static void admit_slots(tg_wrap_t *w, tg_call_t *c, tg_block_t *b, const char *frame, size_t len,
                        size_t id_off, size_t id_len, bool held)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    tool_state_t *ts = c->cc.tool >= 0 ? &w->ag->r.tools[c->cc.tool] : NULL;
    bool room = w->ag->r.aq.count == 0 && tg_conc_has_room(&w->ag->r.aconc) && tool_has_room(w, c);
    if (room && w->ag->r.cstore == NULL) {
        dispatch(w, c, b, frame, len, id_off, id_len);
        if (held)
            tg_block_unref(&w->gw->pool, tg_route_take_frame(&w->ag->r, &c->cc));
        call_arm(w, c, c->cc.deadline_ms);
        return;
    }
    bool ask = room && !w->ag->r.fleet_full;
    bool tool_scope = tg_adm_tool_queue_full(ts);
    if (!ask && (w->ag->r.aq.count >= w->ag->r.aq.cap || tool_scope)) {
        mcp_denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
        tg_adm_queue_full(&d, detail, sizeof(detail), tool_scope, tool_scope ? ts->queued : 0,
                          tool_scope ? ts->max_queued : 0, tool_scope ? ts->path_queue : NULL,
                          w->ag->r.aq.count, w->ag->r.aq.cap, w->ag->r.path_queue,
                          w->ag->r.aconc.inflight, w->ag->r.fleet_full);
        mcp_deny_call(w, c, &d, "call.denied", NULL);
        mcp_call_free(w, c);
        return;
    }
    /* It waits (in the queue, or for the store): it keeps its frame. */
    tg_route_hold_frame(&w->ag->r, &c->cc, b, frame, len, id_off, id_len, held);
    call_arm(w, c, c->cc.deadline_ms);
    if (ask) {
        slot_ask(w, c); /* may answer, and free <c>, at once */
        return;
    }
    tg_route_enqueue(&w->ag->r, &c->cc);
    c->cc.state = TG_CALL_QUEUED;
    update_conc_regs(w, c->cc.tool);
    /* The calls ahead may wait only for their own tool's slot: this one
     * may run now, and nothing else would pump until a slot is freed. */
    if (tg_conc_has_room(&w->ag->r.aconc) && !w->ag->r.fleet_full)
        mcp_pump_queue(w);
}

/* Queue order is kept: the first waiting call that now fits runs. A call
 * blocked only by its tool's slot does not hold back calls to other tools.
 * With concurrency_scope shared a call that fits asks the store for a
 * fleet slot and keeps its place in the queue until the answer (TG_CALL_SLOT);
 * none asks while the store says the fleet is full. The answer may come at
 * once and call back in here: such a nested call only asks for one more
 * pass of the loop (tg_adm_pump_t). */
void mcp_pump_queue(tg_wrap_t *w)
{
    tg_agent_t *ag = w->ag;
    if (!tg_adm_pump_begin(&ag->r.pump))
        return;
    do {
        uint32_t i = 0;
        /* The queue is the agent's: a slot freed by one session may go to a
         * call of another, sent through that call's own session. */
        while (i < ag->r.aq.count && tg_conc_has_room(&ag->r.aconc)) {
            tg_call_t *c = mcp_call_at(ag, tg_waitq_at(&ag->r.aq, i));
            tg_wrap_t *cw = c->w;
            if (c->cc.state != TG_CALL_QUEUED || !tool_has_room(cw, c) || !mcp_agent_writable(cw) ||
                cw->astate != A_RUNNING) {
                i++;
                continue;
            }
            if (ag->r.cstore != NULL) {
                if (ag->r.fleet_full)
                    break;
                slot_ask(cw, c);
                /* Still asking from its place, or gone from the queue (the
                 * next entry is at i now). */
                if (tg_waitq_at(&ag->r.aq, i) == c->cc.idx)
                    i++;
            } else {
                tg_route_dequeue_at(&ag->r, i, &c->cc);
                tg_block_t *b = tg_route_take_frame(&ag->r, &c->cc);
                dispatch(cw, c, b, c->cc.qframe, c->cc.qlen, c->cc.qid_off, c->cc.qid_len);
                tg_block_unref(&ag->gw->pool, b);
            }
            /* The caller of pump_queue flushes its own session only. */
            if (cw != w)
                mcp_flush_all(cw);
        }
    } while (tg_adm_pump_again(&ag->r.pump));
}

/* Give back every concurrency slot an inflight, zombie or slot-waiting
 * call holds: the local ones and the fleet slot. A fleet slot freed by
 * this instance is room in the fleet, so the queue may ask again. */
void mcp_release_slots(tg_wrap_t *w, tg_call_t *c)
{
    tg_route_release_slots(&w->ag->r, &c->cc, c->w->climits);
}

/* Give back the slots of an inflight or zombie call, free it, let waiters in. */
void mcp_call_release(tg_wrap_t *w, tg_call_t *c)
{
    if (tg_callc_holds_slots(c->cc.state))
        mcp_release_slots(w, c);
    tg_route_unqueue(&w->ag->r, &c->cc);
    int tool = c->cc.tool;
    mcp_call_free(w, c);
    update_conc_regs(w, tool);
    mcp_pump_queue(w);
    mcp_check_drained(w);
}

static void call_expired(tg_call_t *c)
{
    tg_wrap_t *w = c->w;
    tg_denial_t d;
    char reqid[32], detail[160];

    if (c->kind != K_CALL)
        return;
    /* Waiting for the fleet rather than for a local slot: the store is
     * deciding now, or it refused this call and the local scopes have
     * room, so the shared limit is what held it back. */
    if (tg_route_held_by_fleet(&w->ag->r, &c->cc, w->climits, true)) {
        snprintf(detail, sizeof(detail), "deadline of %" PRIu64 " ms passed while waiting for one",
                 c->cc.deadline_ms);
        deny_fleet(w, c, c->cc.fleet_seen, c->cc.fleet_cap, detail, "queued");
        mcp_call_release(w, c);
    } else if (c->cc.state == TG_CALL_QUEUED) {
        mcp_denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
        tg_route_queued_denial(&w->ag->r, &c->cc, &d, detail, sizeof(detail));
        mcp_deny_call(w, c, &d, "call.denied", "queued");
        mcp_call_release(w, c);
    } else if (c->cc.state == TG_CALL_INFLIGHT) {
        mcp_denial_init(w, &d, TG_DENY_TIMEOUT, c, reqid, sizeof(reqid));
        tg_route_timeout_denial(&c->cc, now_ms(w), c->deadline_path, "params._meta.timeout_ms",
                                &d, detail, sizeof(detail));
        mcp_deny_call(w, c, &d, "call.timeout", "timed_out");
        c->cc.state = TG_CALL_ZOMBIE;
        c->cc.stage = "timed_out";
        send_cancel_and_ping(w, c, "toolgate: deadline exceeded");
        call_arm(w, c, w->ag->r.acfg->kill_grace_ms);
    } else if (c->cc.state == TG_CALL_ZOMBIE) {
        tg_log("agent '%s' did not answer a cancel or ping within %" PRIu64
               " ms; killing it (raise %s)",
               agent_name(w), w->ag->r.acfg->kill_grace_ms, w->ag->r.path_grace);
        mcp_inst_kill(w, SIGKILL, "stuck");
    }
    mcp_flush_all(w);
}

/* notifications/cancelled from the caller for one of its requests. */
void mcp_caller_cancel(tg_wrap_t *w, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env)
{
    tg_jspan_t id = env->cancel_id;
    for (uint32_t i = 0; id.type != TG_J_NONE && i < w->ag->r.tab.n; i++) {
        tg_call_t *c = mcp_call_at(w->ag, i);
        if (c->w != w || (c->kind != K_CALL && c->kind != K_PASS) || c->caller_id_len != id.len ||
            memcmp(c->caller_id, frame + id.off, id.len) != 0 || c->cc.state == TG_CALL_ZOMBIE)
            continue;
        if (c->kind == K_CALL &&
            (c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE || c->cc.state == TG_CALL_SLOT)) {
            /* The agent never saw it: nothing to forward. */
            mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "queued");
            if (c->cc.state == TG_CALL_RATE) {
                mcp_call_free(w, c); /* the store's answer will find nothing */
                mcp_check_drained(w);
            } else {
                mcp_call_release(w, c);
            }
            return;
        }
        if (mcp_agent_writable(w))
            mcp_to_agent_spliced(w, b, frame, len, id.off, id.len, c->cc.id);
        if (c->kind == K_PASS) {
            mcp_call_free(w, c);
            mcp_check_drained(w);
            return;
        }
        mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "cancelled");
        c->cc.state = TG_CALL_ZOMBIE;
        c->cc.stage = "cancelled";
        send_ping(w, c);
        call_arm(w, c, w->ag->r.acfg->kill_grace_ms);
        return;
    }
    if (mcp_agent_writable(w))
        tg_out_slice(&w->inst->a.p.wr, b, frame, len);
}
