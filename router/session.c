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
#include "router/session.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "audit/audit.h"
#include "limits/conc.h"
#include "limits/gcra.h"
#include "limits/registry.h"
#include "limits/preflight.h"
#include "limits/store.h"
#include "router/call/denial.h"
#include "router/dialect/envelope.h"
#include "router/front/io.h"
#include "router/agent/contain_cfg.h"
#include "router/log.h"
#include "router/call/admit.h"
#include "router/call/call.h"
#include "router/call/route.h"
#include "router/call/table.h"
#include "router/agent/agent_proc.h"
#include "router/agent/instance.h"
#include "router/call/dltimer.h"

#define TG_ID_MAX 128          /* fixed internal bound: bytes of a caller's request id */
#define TG_TOOL_NAME_MAX 128   /* fixed internal bound: tool name bytes kept per call */
#define TG_MAX_PASSTHRU 256    /* fixed internal bound: non-call requests awaiting an answer */
/* fixed internal bound: spare call entries, so that a reload can raise
 * max_concurrent_calls/max_queued_calls a little in place (tg_agent_reconfigure) */
#define TG_RELOAD_SPARE_CALLS 64
#define TG_DENIAL_MAX 2048     /* fixed internal bound: one denial line */
/* A call the shared store turned away asks again after a wait doubling per refusal in
 * a row; a release by this instance lets it ask at once. */

typedef enum { K_FREE = 0, K_CALL, K_PASS, K_REPLAY_INIT, K_PING } call_kind_t;
typedef enum { A_DOWN = 0, A_STARTING, A_RUNNING, A_BACKOFF } agent_state_t;
typedef enum { P_RUN = 0, P_DRAIN, P_STOP_STDIN, P_STOP_TERM, P_STOP_KILL, P_DONE } phase_t;

typedef struct tg_wrap tg_wrap_t;

/* One request known to toolgate. Owned by its agent's call table. A
 * tools/call (K_CALL) goes through admission (cc.state); the other kinds
 * stay TG_CALL_IDLE: pass-through requests, a replayed initialize, a
 * ping. */
typedef struct tg_call {
    tg_callc_t cc; /* first: the admission's view (router/call/call.h) */
    tg_wrap_t *w;
    call_kind_t kind;
    size_t caller_id_len;
    size_t tool_name_len;
    const char *deadline_path;      /* config path of the cap that set the deadline */
    /* K_PING: which zombie it proves alive. */
    uint32_t ping_for;
    uint64_t ping_for_id;
    /* Not cleared when the entry is reused (call_alloc): the arrays are
     * written with their lengths. */
    char caller_id[TG_ID_MAX];
    char tool_name[TG_TOOL_NAME_MAX + 1];
} tg_call_t;

#define CALL_CLEARED offsetof(tg_call_t, caller_id)

/* One running agent process. Freed when all its handles have closed. */
typedef struct tg_inst {
    tg_ainst_t a; /* first: its handles' data point here */
    tg_wrap_t *w;
} tg_inst_t;

/* A configured tool's own limits (tools.NAME). */
typedef tg_adm_tool_t tool_state_t;

/* One configured agent: its limits aggregate over every session that uses
 * it (rate and concurrency are per agent, not per connection), and its call
 * slab holds the calls of all of them, so agent-side ids are unique per
 * agent. Owned by the gateway. */
typedef struct tg_agent {
    tg_route_t r; /* first: its limits, stores, call table and rows */
    tg_gw_t *gw;
    int reg_restarts, reg_instances; /* -1: not registered (instances: wrap) */
    uint32_t tick_restarts;         /* on_tick scratch: most recent restarts of a session */
    /* Reload (tg_agent_reconfigure, tg_agent_successor, tg_agent_retire):
     * sessions and store answers that still point here, and whether a
     * successor replaced this agent (it is freed once both are 0). */
    uint32_t max_sessions;
    uint32_t nsess;
    uint32_t nstore_wait;
    bool retired;
    uint32_t closing;           /* call timers still closing after retirement */
    struct tg_agent *next_retired; /* gw->retired */
    void (*on_free)(void *arg);    /* the runner's, once a retired agent is freed */
    void *on_free_arg;
} tg_agent_t;

/* One caller and the agent instance serving it (MCP sessions are
 * stateful: one instance per caller). */
struct tg_wrap {
    tg_gw_t *gw;
    tg_agent_t *ag;
    tg_wrap_t *next, *prev;         /* gw->sessions */
    int open_handles;               /* closed one by one by finish(); freed at 0 */
    uv_pipe_t *conn;                /* serve: the accepted socket (cin == cout) */
    char caller[64];                /* caller name for audit: "stdio" or from callers[] */
    tg_caller_lim_t *climits;       /* the caller's own limits (serve), or NULL */

    /* caller */
    uv_pipe_t cin_pipe, cout_pipe;
    uv_tty_t cin_tty, cout_tty;
    uv_stream_t *cin, *cout;
    tg_in_t crd;
    tg_out_t cwr;
    bool caller_eof, caller_paused, cout_dead;
    char over_id[TG_ID_MAX];        /* id read from the head of an over-cap caller frame */
    size_t over_id_len;
    bool over_has_id;

    /* agent instance */
    tg_inst_t *inst;
    agent_state_t astate;
    bool agent_paused;
    uint64_t agent_over_id;
    bool agent_over_has_id;
    uint64_t restart_at[TG_APROC_RESTART_LOG];
    uint32_t nrestarts;
    uint64_t invalid_agent_frames;
    uint64_t unmatched_responses;

    /* init replay cache (copies, bounded by max_frame_bytes) */
    char *init_frame;
    size_t init_len, init_id_off, init_id_len;
    char *initd_frame;
    size_t initd_len;

    uint32_t npass;                 /* this session's pass-through requests */
    uint32_t nbusy;                 /* its K_CALL and K_PASS entries: what a drain waits for */

    /* stderr budget: bytes relayed in the current second, and dropped */
    tg_aproc_errbudget_t err;
    uint64_t err_dropped_reported;

    uv_timer_t restart_timer, phase_timer;
    uv_timer_t idle_timer; /* serve: a partial frame left unfinished too long */
    phase_t phase;
    bool finished;
};

static void flush_all(tg_wrap_t *w);
static void call_release(tg_wrap_t *w, tg_call_t *c);
static void begin_shutdown(tg_wrap_t *w, const char *why);
static void inst_kill(tg_wrap_t *w, int sig, const char *reason);
static int agent_spawn(tg_wrap_t *w);
static void pump_queue(tg_wrap_t *w);
static void finish(tg_wrap_t *w);
static void sess_release(tg_wrap_t *w);
static void report_stderr_drops(tg_wrap_t *w);
static void check_drained(tg_wrap_t *w);
static void agent_maybe_reap(tg_agent_t *ag);
static uint32_t recent_restarts(const tg_wrap_t *w, uint64_t now);

/* ---- small helpers ---------------------------------------------------- */

static int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ms(tg_wrap_t *w)
{
    return uv_now(w->gw->loop);
}

static const char *agent_name(tg_wrap_t *w)
{
    return w->ag->r.acfg->id;
}

/* <v> in base <base> (10 or 16) into <out> (>= 21 bytes), NUL-terminated;
 * returns the length. Per call: the agent-side id of every frame, the
 * request id of every audit event; snprintf would cost more than the rest
 * of the splice. Inline, so each call site's constant base becomes a
 * constant divisor (no division instruction). */
static inline size_t u64_fmt(char *out, uint64_t v, unsigned base)
{
    char tmp[24];
    char *q = tmp + sizeof(tmp);
    do {
        *--q = "0123456789abcdef"[v % base];
        v /= base;
    } while (v != 0);
    size_t n = (size_t)(tmp + sizeof(tmp) - q);
    memcpy(out, q, n);
    out[n] = '\0';
    return n;
}

static void request_id_of(const tg_call_t *c, char *buf, size_t cap)
{
    if (cap < 24)
        return;
    tg_call_id_hex(buf, c->cc.id);
}

static void emit(tg_wrap_t *w, tg_audit_ev_t *ev)
{
    if (w->gw->audit != NULL)
        tg_audit_emit(w->gw->audit, ev);
}

static void reg_set(tg_wrap_t *w, int idx, uint64_t current)
{
    tg_registry_update(&w->gw->reg, idx, current);
}

/* The agent's concurrency and queue usage, and tool <tool>'s (none when
 * -1), into the metrics and the registry. */
static void update_conc_regs(tg_wrap_t *w, int tool)
{
    tg_route_regs(&w->ag->r, tool);
}

/* ---- deadlines ------------------------------------------------------- */

static void call_expired(tg_call_t *c);

static void on_call_timer(uv_timer_t *t)
{
    call_expired(t->data);
}

static void on_call_deadline(tg_dlt_t *t, tg_dl_node_t *x)
{
    (void)t;
    call_expired((tg_call_t *)(void *)((char *)x - offsetof(tg_call_t, cc.dl)));
}

/* Expire call <c> in <ms> from now (router/dltimer.h). */
static void call_arm(tg_wrap_t *w, tg_call_t *c, uint64_t ms)
{
    (void)tg_dlt_arm(&w->ag->r.dlt, w->gw->loop, &c->cc.dl, &c->cc.own, on_call_timer, c, ms);
}

static void call_disarm(tg_agent_t *ag, tg_call_t *c)
{
    tg_dlt_disarm(&ag->r.dlt, &c->cc.dl, &c->cc.own);
}

/* ---- call table ------------------------------------------------------- */

static inline tg_call_t *call_at(const tg_agent_t *ag, uint32_t i)
{
    return tg_ctab_at(&ag->r.tab, i);
}

static tg_call_t *call_alloc(tg_wrap_t *w, call_kind_t kind)
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

static void call_free(tg_wrap_t *w, tg_call_t *c)
{
    if (c->kind == K_FREE)
        return;
    call_disarm(w->ag, c);
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
static tg_call_t *call_by_agent_id(tg_wrap_t *w, uint64_t id)
{
    tg_call_t *c = tg_ctab_lookup(&w->ag->r.tab, id);
    if (c == NULL || c->kind == K_FREE || c->cc.id != id || c->w != w)
        return NULL;
    return c;
}

/* Calls that still need the agent: the drain waits for these. */
static uint32_t busy_calls(const tg_wrap_t *w)
{
    return w->nbusy;
}

/* ---- output to the caller --------------------------------------------- */

static void to_caller(tg_wrap_t *w, const char *p, size_t len)
{
    if (!w->cout_dead)
        (void)tg_out_copy(&w->cwr, p, len);
}

static void deny(tg_wrap_t *w, const char *id, size_t id_len, const tg_denial_t *d)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_denial_mcp(buf, sizeof(buf), id, id_len, d);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

static void rpc_error(tg_wrap_t *w, const char *id, size_t id_len, int code, const char *msg)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_rpc_error(buf, sizeof(buf), id, id_len, code, msg);
    if (n > 0)
        to_caller(w, buf, (size_t)n);
}

static void denial_init(tg_wrap_t *w, tg_denial_t *d, tg_deny_code_t code, const tg_call_t *c,
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
static void caller_id_text(const char *id, size_t len, char *out)
{
    if (len >= 2 && id[0] == '"') {
        id++;
        len -= 2;
    }
    memcpy(out, id, len);
    out[len] = '\0';
}

static void audit_call(tg_wrap_t *w, const tg_call_t *c, const char *event, const char *status,
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
            caller_id_text(c->caller_id, c->caller_id_len, callid);
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
static void deny_call(tg_wrap_t *w, tg_call_t *c, const tg_denial_t *d, const char *event,
                      const char *stage)
{
    deny(w, c->caller_id, c->caller_id_len, d);
    audit_call(w, c, event, event[5] == 't' ? "timeout" : "denied", d, stage);
}

/* ---- output to the agent ---------------------------------------------- */

/* Forward frame [p, p+len) (with its newline) from block <b> to the agent,
 * the id span [id_off, id_off+id_len) replaced by <agent_id>. */
static void to_agent_spliced(tg_wrap_t *w, tg_block_t *b, const char *p, size_t len,
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

static bool agent_writable(const tg_wrap_t *w)
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
    tg_call_t *p = agent_writable(w) ? call_alloc(w, K_PING) : NULL;
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
    if (!agent_writable(w))
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
    to_agent_spliced(w, b, frame, len, id_off, id_len, c->cc.id);
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
        agent_maybe_reap(ag);
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
        denial_init(w, &d, store_down ? TG_DENY_STORE : TG_DENY_RATE, c, reqid, sizeof(reqid));
        if (store_down) {
            tg_adm_store_denial(&d, "rate", tool ? "tool" : "agent", tg_adm_rate_unit(rate),
                                TG_ADM_STORE_CLOSED_RATE, (int64_t)r->gcra.retry_after_ms);
        } else {
            tg_adm_rate_denial(&d, detail, sizeof(detail), tool ? "tool" : "agent",
                               tool ? ts->path_rate : ag->r.path_rate, rate, &r->gcra);
        }
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
        check_drained(w);
        flush_all(w);
        return;
    }
    /* The agent's shared token taken, the tool's next. A refusal there
     * leaves the agent's token spent: the fleet can fall short of the
     * agent's limit by such calls, never exceed either limit. */
    if (step == STEP_AGENT && ts != NULL && ts->shared) {
        if (store_step(w, c, STEP_TOOL) < 0) {
            denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
            tg_adm_store_denial(&d, "rate", "tool", NULL, TG_ADM_STORE_REFUSED_RATE,
                                TG_DENY_ABSENT);
            deny_call(w, c, &d, "call.denied", NULL);
            call_free(w, c);
            check_drained(w);
        }
        flush_all(w);
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
        denial_init(w, &d, TG_DENY_RATE, c, reqid, sizeof(reqid));
        d.limit = "rate";
        d.scope = k == 0 ? "tool" : "caller";
        d.observed = (int64_t)rr.observed;
        d.cap = (int64_t)rr.cap;
        d.retry_after_ms = (int64_t)rr.retry_after_ms;
        d.config_path = k == 0 ? ts->path_rate : cl->path_rate;
        d.detail = "the scope filled while the shared store answered";
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
        check_drained(w);
        flush_all(w);
        return;
    }
    for (int k = 0; k < 2; k++)
        if (local[k] != NULL)
            tg_gcra_take(local[k], now);
    c->cc.state = TG_CALL_IDLE;
    admit_slots(w, c, c->cc.qblk, c->cc.qframe, c->cc.qlen, c->cc.qid_off, c->cc.qid_len, true);
    flush_all(w);
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
        denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "rate", w->ag->r.store != NULL ? "agent" : "tool", NULL,
                            TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
    }
}

typedef tg_adm_rate_scope_t rate_scope_t;

/* Admit or refuse one tools/call frame [frame, frame+len) from the caller,
 * in block <b>. */
static void admit_call(tg_wrap_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    tg_call_t *c = call_alloc(w, K_CALL);
    if (c == NULL) {
        /* Cannot happen while limits hold (the slab is sized from them). */
        denial_init(w, &d, TG_DENY_CONCURRENCY, NULL, reqid, sizeof(reqid));
        d.limit = "concurrency";
        d.detail = "call table full";
        deny(w, frame + env->id.off, env->id.len, &d);
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
        denial_init(w, &d, TG_DENY_SHUTTING_DOWN, c, reqid, sizeof(reqid));
        d.limit = "shutdown";
        d.detail = "toolgate is shutting down";
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
        return;
    }
    if (w->astate != A_RUNNING) {
        denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
        d.limit = "agent";
        d.detail = w->astate == A_BACKOFF ? "agent is restarting" : "agent is starting";
        d.retry_after_ms = 1000;
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
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
        denial_init(w, &d, TG_DENY_RATE, c, reqid, sizeof(reqid));
        tg_adm_rate_denial(&d, detail, sizeof(detail), scopes[worst].scope, scopes[worst].path,
                           scopes[worst].rate, &rw);
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
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
    tg_wrap_t *w = call_at(ag, tg_waitq_at(&ag->r.aq, 0))->w;
    pump_queue(w);
    flush_all(w);
}

/* Refuse call <c> for the shared concurrency limit: <observed> of <cap>
 * slots held (as the store last said), <why> in the detail. */
static void deny_fleet(tg_wrap_t *w, tg_call_t *c, uint32_t observed, uint32_t cap,
                       const char *why, const char *stage)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
    tg_adm_fleet_denial(&d, detail, sizeof(detail), w->ag->r.path_conc, observed, cap, why);
    deny_call(w, c, &d, "call.denied", stage);
}

/* A call waiting for the shared store: the agent and id name it, so an
 * answer for a call that is gone (timed out, cancelled, session ended)
 * finds nothing and gives the slot back. */
typedef struct slot_ticket {
    tg_agent_t *ag;
    uint64_t agent_id;
} slot_ticket_t;

static void on_slot_taken(void *arg, const tg_store_slot_result_t *r);
static void release_slots(tg_wrap_t *w, tg_call_t *c);

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
        denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "concurrency", NULL, NULL, TG_ADM_STORE_REFUSED_SLOT,
                            TG_DENY_ABSENT);
        deny_call(w, c, &d, "call.denied", NULL);
        call_release(w, c);
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
        if (!agent_writable(w) || w->astate != A_RUNNING) {
            /* The instance went away while the store answered. */
            tg_denial_t d;
            char reqid[32];
            denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
            d.limit = "agent";
            d.detail = "agent stopped while the call waited for a shared slot";
            deny_call(w, c, &d, "call.denied", "queued");
            call_release(w, c);
            return;
        }
        tg_block_t *b = tg_route_take_frame(&ag->r, &c->cc);
        forward(w, c, b, c->cc.qframe, c->cc.qlen, c->cc.qid_off, c->cc.qid_len);
        tg_block_unref(&w->gw->pool, b);
        /* The fleet had room: the next waiter may ask too. */
        pump_queue(w);
        return;
    }
    if (r->decided_by == TG_STORE_BY_CLOSED) {
        tg_denial_t d;
        char reqid[32];
        denial_init(w, &d, TG_DENY_STORE, c, reqid, sizeof(reqid));
        tg_adm_store_denial(&d, "concurrency", NULL, NULL, TG_ADM_STORE_CLOSED_SLOT,
                            w->gw->cfg->store.timeout_ms != 0 ? (int64_t)w->gw->cfg->store.timeout_ms
                                                              : TG_STORE_DEF_TIMEOUT_MS);
        deny_call(w, c, &d, "call.denied", NULL);
        call_release(w, c);
        return;
    }
    /* Full (fleet-wide, or this instance's share under the local policy):
     * give the local slots back and wait in the queue, in arrival order. */
    release_slots(w, c);
    c->cc.fleet_seen = (uint32_t)r->holders;
    c->cc.fleet_cap = (uint32_t)r->cap;
    tg_route_fleet_wait(&ag->r, on_fleet_timer, ag);
    if (!c->cc.in_queue && !tg_route_requeue(&ag->r, &c->cc, ag->r.aq.cap)) {
        deny_fleet(w, c, c->cc.fleet_seen, c->cc.fleet_cap, "and the wait queue is full", NULL);
        call_release(w, c);
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
        agent_maybe_reap(ag);
        return;
    }
    tg_wrap_t *w = c->w;
    slot_decided(w, c, r);
    flush_all(w);
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
        denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
        tg_adm_queue_full(&d, detail, sizeof(detail), tool_scope, tool_scope ? ts->queued : 0,
                          tool_scope ? ts->max_queued : 0, tool_scope ? ts->path_queue : NULL,
                          w->ag->r.aq.count, w->ag->r.aq.cap, w->ag->r.path_queue,
                          w->ag->r.aconc.inflight, w->ag->r.fleet_full);
        deny_call(w, c, &d, "call.denied", NULL);
        call_free(w, c);
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
        pump_queue(w);
}

/* Queue order is kept: the first waiting call that now fits runs. A call
 * blocked only by its tool's slot does not hold back calls to other tools.
 * With concurrency_scope shared a call that fits asks the store for a
 * fleet slot and keeps its place in the queue until the answer (TG_CALL_SLOT);
 * none asks while the store says the fleet is full. The answer may come at
 * once and call back in here: such a nested call only asks for one more
 * pass of the loop (tg_adm_pump_t). */
static void pump_queue(tg_wrap_t *w)
{
    tg_agent_t *ag = w->ag;
    if (!tg_adm_pump_begin(&ag->r.pump))
        return;
    do {
        uint32_t i = 0;
        /* The queue is the agent's: a slot freed by one session may go to a
         * call of another, sent through that call's own session. */
        while (i < ag->r.aq.count && tg_conc_has_room(&ag->r.aconc)) {
            tg_call_t *c = call_at(ag, tg_waitq_at(&ag->r.aq, i));
            tg_wrap_t *cw = c->w;
            if (c->cc.state != TG_CALL_QUEUED || !tool_has_room(cw, c) || !agent_writable(cw) ||
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
                flush_all(cw);
        }
    } while (tg_adm_pump_again(&ag->r.pump));
}

/* Give back every concurrency slot an inflight, zombie or slot-waiting
 * call holds: the local ones and the fleet slot. A fleet slot freed by
 * this instance is room in the fleet, so the queue may ask again. */
static void release_slots(tg_wrap_t *w, tg_call_t *c)
{
    tg_route_release_slots(&w->ag->r, &c->cc, c->w->climits);
}

/* Give back the slots of an inflight or zombie call, free it, let waiters in. */
static void call_release(tg_wrap_t *w, tg_call_t *c)
{
    if (c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_ZOMBIE || c->cc.state == TG_CALL_SLOT)
        release_slots(w, c);
    tg_route_unqueue(&w->ag->r, &c->cc);
    int tool = c->cc.tool;
    call_free(w, c);
    update_conc_regs(w, tool);
    pump_queue(w);
    check_drained(w);
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
        call_release(w, c);
    } else if (c->cc.state == TG_CALL_QUEUED) {
        denial_init(w, &d, TG_DENY_CONCURRENCY, c, reqid, sizeof(reqid));
        tg_route_queued_denial(&w->ag->r, &c->cc, &d, detail, sizeof(detail));
        deny_call(w, c, &d, "call.denied", "queued");
        call_release(w, c);
    } else if (c->cc.state == TG_CALL_INFLIGHT) {
        denial_init(w, &d, TG_DENY_TIMEOUT, c, reqid, sizeof(reqid));
        tg_route_timeout_denial(&c->cc, now_ms(w), c->deadline_path, "params._meta.timeout_ms",
                                &d, detail, sizeof(detail));
        deny_call(w, c, &d, "call.timeout", "timed_out");
        c->cc.state = TG_CALL_ZOMBIE;
        c->cc.stage = "timed_out";
        send_cancel_and_ping(w, c, "toolgate: deadline exceeded");
        call_arm(w, c, w->ag->r.acfg->kill_grace_ms);
    } else if (c->cc.state == TG_CALL_ZOMBIE) {
        tg_log("agent '%s' did not answer a cancel or ping within %" PRIu64
               " ms; killing it (raise %s)",
               agent_name(w), w->ag->r.acfg->kill_grace_ms, w->ag->r.path_grace);
        inst_kill(w, SIGKILL, "stuck");
    }
    flush_all(w);
}

/* notifications/cancelled from the caller for one of its requests. */
static void caller_cancel(tg_wrap_t *w, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env)
{
    tg_jspan_t id = env->cancel_id;
    for (uint32_t i = 0; id.type != TG_J_NONE && i < w->ag->r.tab.n; i++) {
        tg_call_t *c = call_at(w->ag, i);
        if (c->w != w || (c->kind != K_CALL && c->kind != K_PASS) || c->caller_id_len != id.len ||
            memcmp(c->caller_id, frame + id.off, id.len) != 0 || c->cc.state == TG_CALL_ZOMBIE)
            continue;
        if (c->kind == K_CALL &&
            (c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE || c->cc.state == TG_CALL_SLOT)) {
            /* The agent never saw it: nothing to forward. */
            audit_call(w, c, "call.cancelled", "cancelled", NULL, "queued");
            if (c->cc.state == TG_CALL_RATE) {
                call_free(w, c); /* the store's answer will find nothing */
                check_drained(w);
            } else {
                call_release(w, c);
            }
            return;
        }
        if (agent_writable(w))
            to_agent_spliced(w, b, frame, len, id.off, id.len, c->cc.id);
        if (c->kind == K_PASS) {
            call_free(w, c);
            check_drained(w);
            return;
        }
        audit_call(w, c, "call.cancelled", "cancelled", NULL, "cancelled");
        c->cc.state = TG_CALL_ZOMBIE;
        c->cc.stage = "cancelled";
        send_ping(w, c);
        call_arm(w, c, w->ag->r.acfg->kill_grace_ms);
        return;
    }
    if (agent_writable(w))
        tg_out_slice(&w->inst->a.p.wr, b, frame, len);
}

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

static void on_caller_frame(tg_wrap_t *w, tg_block_t *b, size_t start, size_t nl)
{
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
        /* Rare path: a full parse only to choose the right error code. */
        json_t *j = json_loadb(frame, slen, JSON_DECODE_ANY, NULL);
        bool json = j != NULL;
        json_decref(j);
        if (json)
            rpc_error(w, NULL, 0, -32600, "invalid request: not a JSON-RPC 2.0 request object");
        else
            rpc_error(w, NULL, 0, -32700, "parse error: the line is not valid JSON");
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "call.denied";
        ev.agent = agent_name(w);
        ev.caller = w->caller;
        ev.status = "invalid";
        ev.reason = json ? "invalid_request" : "parse_error";
        ev.bytes_in = (int64_t)flen;
        emit(w, &ev);
        return;
    }
    if (env.kind == TG_MCP_BATCH) {
        int has = tg_mcp_batch_has_call(frame, slen);
        if (has != 0) {
            rpc_error(w, NULL, 0, -32600,
                      has > 0 ? "invalid request: a batch may not hold tools/call; send each "
                                "tools/call on its own line"
                              : "invalid request: malformed batch");
            return;
        }
        if (agent_writable(w) && w->astate == A_RUNNING)
            tg_out_slice(&w->inst->a.p.wr, b, frame, len);
        return;
    }
    if (env.kind == TG_MCP_REQUEST && env.id.len > TG_ID_MAX) {
        rpc_error(w, NULL, 0, -32600, "invalid request: id longer than 128 bytes");
        return;
    }
    if (env.kind == TG_MCP_REQUEST && env.is_tools_call) {
        admit_call(w, b, frame, len, &env);
        return;
    }
    if (env.kind == TG_MCP_NOTIFICATION && env.is_tools_call) {
        /* A tools/call without an id cannot be answered, so it cannot be
         * limited either: it is dropped, never forwarded unbounded. */
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "call.denied";
        ev.agent = agent_name(w);
        ev.caller = w->caller;
        ev.status = "invalid";
        ev.reason = "tools_call_without_id";
        ev.bytes_in = (int64_t)flen;
        emit(w, &ev);
        return;
    }
    if (env.kind == TG_MCP_NOTIFICATION && tg_jstr_eq(frame, env.method, "notifications/cancelled")) {
        caller_cancel(w, b, frame, len, &env);
        return;
    }
    if (env.kind == TG_MCP_NOTIFICATION && tg_jstr_eq(frame, env.method, "notifications/initialized"))
        cache_copy(&w->initd_frame, &w->initd_len, frame, len);

    if (env.kind == TG_MCP_REQUEST) {
        bool is_init = tg_jstr_eq(frame, env.method, "initialize");
        if (w->phase != P_RUN || w->astate != A_RUNNING || w->npass >= TG_MAX_PASSTHRU) {
            tg_denial_t d;
            char reqid[32];
            tg_deny_code_t code = w->phase != P_RUN     ? TG_DENY_SHUTTING_DOWN
                                  : w->astate != A_RUNNING ? TG_DENY_UNAVAILABLE
                                                           : TG_DENY_CONCURRENCY;
            denial_init(w, &d, code, NULL, reqid, sizeof(reqid));
            d.limit = code == TG_DENY_CONCURRENCY ? "concurrency" : code == TG_DENY_UNAVAILABLE ? "agent" : "shutdown";
            d.detail = code == TG_DENY_CONCURRENCY ? "too many requests awaiting an answer"
                                                   : code == TG_DENY_UNAVAILABLE ? "agent is restarting"
                                                                                 : "toolgate is shutting down";
            deny(w, frame + env.id.off, env.id.len, &d);
            return;
        }
        tg_call_t *c = call_alloc(w, K_PASS);
        if (c == NULL) {
            rpc_error(w, frame + env.id.off, env.id.len, -32603, "toolgate: request table full");
            return;
        }
        memcpy(c->caller_id, frame + env.id.off, env.id.len);
        c->caller_id_len = env.id.len;
        if (is_init) {
            cache_copy(&w->init_frame, &w->init_len, frame, len);
            w->init_id_off = env.id.off;
            w->init_id_len = env.id.len;
        }
        to_agent_spliced(w, b, frame, len, env.id.off, env.id.len, c->cc.id);
        return;
    }
    /* Notifications and the caller's answers to agent requests pass as they are. */
    if (agent_writable(w) && w->astate != A_BACKOFF)
        tg_out_slice(&w->inst->a.p.wr, b, frame, len);
}

static void on_caller_oversize(tg_wrap_t *w, const char *head, size_t len)
{
    tg_jspan_t id;
    w->over_has_id = false;
    if (tg_mcp_scan_head_id(head, len, &id) == 0 && id.len <= TG_ID_MAX) {
        memcpy(w->over_id, head + id.off, id.len);
        w->over_id_len = id.len;
        w->over_has_id = true;
    }
}

/* The frame_too_large denial for a <what> ("request", "agent response")
 * of <total> bytes; <reqid> and <detail> are the caller's buffers. */
static void frame_denial(tg_wrap_t *w, tg_denial_t *d, const tg_call_t *c, char reqid[32],
                         char detail[96], const char *what, uint64_t total)
{
    char cap[24];
    denial_init(w, d, TG_DENY_FRAME, c, reqid, 32);
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

static void on_caller_skipped(tg_wrap_t *w, uint64_t total)
{
    tg_denial_t d;
    char reqid[32], detail[96];
    frame_denial(w, &d, NULL, reqid, detail, "request", total);
    reg_set(w, w->gw->reg_frame_in, w->gw->cfg->max_frame_bytes);
    if (w->over_has_id)
        deny(w, w->over_id, w->over_id_len, &d);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.agent = agent_name(w);
    ev.caller = w->caller;
    ev.status = "denied";
    ev.code = tg_deny_name(TG_DENY_FRAME);
    ev.limit.type = "frame";
    ev.limit.scope = "instance";
    ev.limit.observed = (int64_t)total;
    ev.limit.cap = (int64_t)w->gw->cfg->max_frame_bytes;
    ev.bytes_in = (int64_t)total;
    char callid[TG_ID_MAX + 1];
    if (w->over_has_id) {
        caller_id_text(w->over_id, w->over_id_len, callid);
        ev.call_id = callid;
    }
    emit(w, &ev);
    w->over_has_id = false;
}

/* ---- agent frames ----------------------------------------------------- */

static void to_caller_spliced(tg_wrap_t *w, tg_block_t *b, const char *p, size_t len,
                              size_t id_off, size_t id_len, const char *cid, size_t cid_len)
{
    if (w->cout_dead)
        return;
    tg_out_slice(&w->cwr, b, p, id_off);
    tg_out_copy(&w->cwr, cid, cid_len);
    tg_out_slice(&w->cwr, b, p + id_off + id_len, len - id_off - id_len);
}

static void agent_running(tg_wrap_t *w)
{
    w->astate = A_RUNNING;
    pump_queue(w);
}

static void on_agent_response(tg_wrap_t *w, tg_block_t *b, const char *frame, size_t len,
                              const tg_mcp_env_t *env)
{
    uint64_t id;
    tg_call_t *c = NULL;
    if (env->id.type == TG_J_NUMBER && tg_jnum_u64(frame, env->id, UINT64_MAX, &id) == 0)
        c = call_by_agent_id(w, id);
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
        if (c->cc.state == TG_CALL_INFLIGHT) {
            call_disarm(w->ag, c);
            to_caller_spliced(w, b, frame, len, env->id.off, env->id.len, c->caller_id,
                              c->caller_id_len);
            tg_audit_ev_t ev;
            (void)ev;
            audit_call(w, c, "call.completed", env->has_error ? "error" : "ok", NULL, NULL);
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
        call_release(w, c);
        break;
    case K_PASS:
        to_caller_spliced(w, b, frame, len, env->id.off, env->id.len, c->caller_id,
                          c->caller_id_len);
        call_free(w, c);
        check_drained(w);
        break;
    case K_REPLAY_INIT:
        call_free(w, c);
        if (w->initd_frame != NULL && agent_writable(w))
            tg_out_copy(&w->inst->a.p.wr, w->initd_frame, w->initd_len);
        agent_running(w);
        break;
    case K_PING: {
        tg_call_t *z = call_at(w->ag, c->ping_for);
        call_free(w, c);
        if (z->kind == K_CALL && z->cc.id == c->ping_for_id && z->cc.state == TG_CALL_ZOMBIE)
            call_release(w, z);
        break;
    }
    default:
        break;
    }
}

static void on_agent_frame(tg_wrap_t *w, tg_block_t *b, size_t start, size_t nl)
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
        /* Dropped, counted and audited as its length, never its content. */
        w->invalid_agent_frames++;
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "agent.invalid_frame";
        ev.agent = agent_name(w);
        ev.bytes_out = (int64_t)flen;
        ev.count = (int64_t)w->invalid_agent_frames;
        emit(w, &ev);
        return;
    }
    if (env.kind == TG_MCP_RESPONSE) {
        on_agent_response(w, b, frame, len, &env);
        return;
    }
    /* Requests, notifications and batches from the agent go to the caller
     * as they are. */
    if (!w->cout_dead)
        tg_out_slice(&w->cwr, b, frame, len);
}

static void on_agent_oversize(tg_wrap_t *w, const char *head, size_t len)
{
    tg_jspan_t id;
    uint64_t v;
    w->agent_over_has_id = tg_mcp_scan_head_id(head, len, &id) == 0 && id.type == TG_J_NUMBER &&
                           tg_jnum_u64(head, id, UINT64_MAX, &v) == 0;
    w->agent_over_id = w->agent_over_has_id ? v : 0;
}

static void on_agent_skipped(tg_wrap_t *w, uint64_t total)
{
    tg_call_t *c = w->agent_over_has_id ? call_by_agent_id(w, w->agent_over_id) : NULL;
    reg_set(w, w->ag->r.reg_frame_out, w->gw->cfg->max_frame_bytes);
    w->agent_over_has_id = false;
    if (c == NULL || (c->kind != K_CALL && c->kind != K_PASS) ||
        (c->kind == K_CALL && c->cc.state != TG_CALL_INFLIGHT)) {
        tg_log("dropped a %" PRIu64 "-byte frame from agent '%s' over max_frame_bytes (%" PRIu64
               "; raise %s)",
               total, agent_name(w), w->gw->cfg->max_frame_bytes, w->gw->path_frame);
        return;
    }
    tg_denial_t d;
    char reqid[32], detail[96];
    frame_denial(w, &d, c, reqid, detail, "agent response", total);
    deny(w, c->caller_id, c->caller_id_len, &d);
    if (c->kind == K_CALL) {
        audit_call(w, c, "call.denied", "denied", &d, "response");
        call_release(w, c);
    } else {
        call_free(w, c);
        check_drained(w);
    }
}

/* ---- reading ---------------------------------------------------------- */

typedef void (*frame_fn)(tg_wrap_t *, tg_block_t *, size_t, size_t);
typedef void (*over_fn)(tg_wrap_t *, const char *, size_t);
typedef void (*skip_fn)(tg_wrap_t *, uint64_t);

static void drain_frames(tg_wrap_t *w, tg_in_t *in, frame_fn on_frame, over_fn on_over,
                         skip_fn on_skip)
{
    for (;;) {
        size_t s = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = in->blk;
        tg_nd_ev_t ev = tg_ndjson_next(&in->nd, b->data, in->len, &in->pos, &s, &e, &total);
        if (ev == TG_ND_NEED_MORE)
            break;
        if (ev == TG_ND_FRAME) {
            if (e - s > in->hint)
                in->hint = e - s;
            on_frame(w, b, s, e);
        } else if (ev == TG_ND_OVERSIZE) {
            on_over(w, b->data + s, e - s);
            /* The head is consumed: nothing of this frame stays buffered. */
            if (in->pos == in->len && b->refs == 1)
                in->len = in->pos = 0;
        } else {
            on_skip(w, total);
        }
    }
    tg_in_settle(in);
}

static void caller_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    tg_wrap_t *w = h->data;
    tg_in_alloc(&w->crd, buf);
}

static void backpressure(tg_wrap_t *w);

/* A serve caller sent part of a frame and then nothing for idle_timeout:
 * it holds a buffer and a connection slot for nothing. Say so and hang up. */
static void on_idle(uv_timer_t *t)
{
    tg_wrap_t *w = t->data;
    char msg[128];
    snprintf(msg, sizeof(msg),
             "invalid request: an unfinished frame and no data for %" PRIu64
             " ms (router.idle_timeout); closing",
             w->gw->cfg->idle_timeout_ms);
    rpc_error(w, NULL, 0, -32600, msg);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.agent = agent_name(w);
    ev.caller = w->caller;
    ev.status = "invalid";
    ev.reason = "idle_timeout";
    ev.bytes_in = (int64_t)(w->crd.len - w->crd.pos);
    emit(w, &ev);
    if (w->cin != NULL)
        uv_read_stop(w->cin);
    w->caller_eof = true;
    begin_shutdown(w, "caller idle with a partial frame");
    flush_all(w);
}

static void caller_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    tg_wrap_t *w = s->data;
    if (n > 0) {
        tg_in_commit(&w->crd, (size_t)n);
        drain_frames(w, &w->crd, on_caller_frame, on_caller_oversize, on_caller_skipped);
        if (w->conn != NULL) {
            /* Socket callers only: toolgate's own stdin is its caller's
             * business. The clock runs while a frame is unfinished. */
            if (w->crd.len > w->crd.pos || w->crd.nd.skipping)
                uv_timer_start(&w->idle_timer, on_idle, w->gw->cfg->idle_timeout_ms, 0);
            else
                uv_timer_stop(&w->idle_timer);
        }
    } else if (n < 0) {
        uv_read_stop(s);
        w->caller_eof = true;
        if (n != UV_EOF)
            tg_log("reading the caller failed: %s", uv_strerror((int)n));
        begin_shutdown(w, "caller closed stdin");
    }
    flush_all(w);
}

static void agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    tg_inst_t *inst = h->data;
    tg_in_alloc(&inst->a.p.rd, buf);
}


static void agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    tg_inst_t *inst = s->data;
    tg_wrap_t *w = inst->w;
    if (n > 0) {
        tg_in_commit(&inst->a.p.rd, (size_t)n);
        if (w->inst == inst)
            drain_frames(w, &inst->a.p.rd, on_agent_frame, on_agent_oversize, on_agent_skipped);
        else
            inst->a.p.rd.len = inst->a.p.rd.pos = 0;
    } else if (n < 0) {
        uv_read_stop(s);
        tg_ainst_out_eof(&inst->a);
    }
    flush_all(w);
}

/* ---- agent process ---------------------------------------------------- */

static void inst_closed(tg_ainst_t *a)
{
    tg_inst_t *inst = (tg_inst_t *)a;
    tg_wrap_t *w = inst->w;
    free(inst);
    if (w->phase == P_DONE && w->inst == NULL)
        finish(w);
    sess_release(w); /* the instance held its session until now */
}

static void fail_inflight(tg_wrap_t *w, tg_inst_t *inst)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        tg_call_t *c = call_at(w->ag, i);
        if (c->kind == K_FREE || c->w != w)
            continue;
        bool pending = c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_QUEUED || c->cc.state == TG_CALL_RATE ||
                       c->cc.state == TG_CALL_SLOT;
        if (c->kind == K_CALL && pending && inst->a.p.watch.verdict.kind != TG_VERDICT_OK) {
            /* Killed for a resource: say which, and how much against what. */
            const tg_verdict_t *v = &inst->a.p.watch.verdict;
            char path[TG_NAME_MAX + 64];
            denial_init(w, &d, TG_DENY_RESOURCE, c, reqid, sizeof(reqid));
            d.limit = tg_res_name(v->res);
            d.observed = (int64_t)v->used;
            d.cap = (int64_t)v->limit;
            d.unit = v->res == TG_RES_MEMORY || v->res == TG_RES_DISK ? "bytes"
                     : v->res == TG_RES_PIDS                          ? "processes"
                                                                      : NULL;
            snprintf(path, sizeof(path), "agents.%s.resources.%s.limit", agent_name(w),
                     tg_res_name(v->res));
            d.config_path = path;
            snprintf(detail, sizeof(detail), "%s %s while the call ran (used %" PRIu64 " of %" PRIu64 ")",
                     tg_res_name(v->res), v->kind == TG_VERDICT_OOM ? "ran out (OOM kill)"
                                          : v->kind == TG_VERDICT_PIDS_DENIED ? "exhausted"
                                                                               : "over its limit",
                     v->used, v->limit);
            d.detail = detail;
            deny_call(w, c, &d, "call.denied", "killed");
        } else if (c->kind == K_CALL && pending) {
            denial_init(w, &d, TG_DENY_UNAVAILABLE, c, reqid, sizeof(reqid));
            d.limit = "agent";
            d.retry_after_ms = (int64_t)w->ag->r.acfg->backoff_initial_ms;
            if (inst->a.p.term_signal != 0)
                snprintf(detail, sizeof(detail), "agent %s by signal %d while the call ran",
                         inst->a.p.killed ? "was killed" : "died", inst->a.p.term_signal);
            else
                snprintf(detail, sizeof(detail), "agent exited with status %" PRId64
                         " while the call ran", inst->a.p.exit_status);
            d.detail = detail;
            deny_call(w, c, &d, "call.denied", inst->a.p.killed ? "killed" : "agent_exited");
        } else if (c->kind == K_PASS) {
            denial_init(w, &d, TG_DENY_UNAVAILABLE, NULL, reqid, sizeof(reqid));
            d.limit = "agent";
            d.detail = "agent exited before answering";
            deny(w, c->caller_id, c->caller_id_len, &d);
        }
        tg_route_unqueue(&w->ag->r, &c->cc);
        if ((c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_ZOMBIE || c->cc.state == TG_CALL_SLOT) &&
            c->kind == K_CALL)
            release_slots(w, c);
        call_free(w, c);
    }
    update_conc_regs(w, -1);
    /* The slots given back (local and fleet) may serve other sessions'
     * waiting calls. */
    pump_queue(w);
}

static void after_exit(tg_wrap_t *w, bool failed, int64_t status, bool by_signal);

static void on_restart_timer(uv_timer_t *t)
{
    tg_wrap_t *w = t->data;
    if (w->phase != P_RUN) {
        finish(w);
        return;
    }
    /* A restart that cannot even start counts like a crash: the crash-loop
     * rules decide whether to try again. */
    if (agent_spawn(w) < 0)
        after_exit(w, true, 127, false);
    flush_all(w);
}

/* The agent is gone (agent.exited written, the instance closing):
 * answer its calls, then restart, stop, or give up. */
static void inst_gone(tg_ainst_t *a)
{
    tg_inst_t *inst = (tg_inst_t *)a;
    tg_wrap_t *w = inst->w;
    if (w->inst == inst)
        w->inst = NULL;
    w->astate = A_DOWN;
    fail_inflight(w, inst);
    if (w->gw->metrics_ok)
        tg_metrics_agent_state(&w->gw->metrics, w->ag->r.idx, TG_AGENT_DOWN, 0);
    after_exit(w, tg_ainst_failed(a), tg_ainst_status(a), a->p.term_signal != 0);
}

/* The agent is down (it exited, or could not be started): stop, restart
 * with backoff, or give up after max_restarts within the window. */
static void after_exit(tg_wrap_t *w, bool failed, int64_t status, bool by_signal)
{
    tg_audit_ev_t ev;
    if (w->phase != P_RUN) {
        finish(w);
        return;
    }
    tg_restart_policy_t pol = w->ag->r.acfg->restart_policy;
    if (pol == TG_RESTART_NO || (pol == TG_RESTART_ON_FAILURE && !failed)) {
        tg_log("agent '%s' %s (status %" PRId64 "); restart policy '%s': stopping",
               agent_name(w), failed ? "failed" : "exited", status,
               pol == TG_RESTART_NO ? "no" : "on-failure");
        w->gw->exit_code = (int)status;
        begin_shutdown(w, "agent exited");
        finish(w);
        return;
    }
    /* Crash-loop protection: at most max_restarts within window. */
    uint64_t now = now_ms(w);
    uint32_t recent = recent_restarts(w, now);
    if (recent >= w->ag->r.acfg->max_restarts) {
        tg_aproc_log_give_up(w->ag->r.acfg, recent);
        w->gw->exit_code = 1;
        begin_shutdown(w, "agent restarts exhausted");
        finish(w);
        return;
    }
    uint64_t backoff = tg_aproc_backoff(w->ag->r.acfg, recent);
    tg_aproc_restart_note(w->restart_at, &w->nrestarts, now);
    /* Another session of the agent may be nearer its budget: only raise
     * (on_tick lowers it as restarts leave the window). */
    if (w->ag->reg_restarts >= 0 && recent + 1 > w->gw->reg.v[w->ag->reg_restarts].current)
        reg_set(w, w->ag->reg_restarts, recent + 1);
    tg_aproc_ev_restarting(&ev, agent_name(w), recent + 1, backoff);
    emit(w, &ev);
    tg_log("agent '%s' %s; restarting in %" PRIu64 " ms (attempt %u of %u)", agent_name(w),
           by_signal ? "was killed by a signal" : "failed", backoff, recent + 1,
           w->ag->r.acfg->max_restarts);
    w->astate = A_BACKOFF;
    uv_timer_start(&w->restart_timer, on_restart_timer, backoff, 0);
}

static void agent_out_drain(tg_out_t *o, void *ctx)
{
    tg_wrap_t *w = ctx;
    (void)o;
    backpressure(w);
}

static void flush_owner(void *owner)
{
    flush_all(owner);
}

static const tg_ainst_ops_t inst_ops = {
    .out_alloc = agent_alloc,
    .out_read = agent_read,
    .out_drain = agent_out_drain,
    .gone = inst_gone,
    .closed = inst_closed,
    .flush = flush_owner,
};

/* Start one agent instance. On failure: log, count as a crash. */
static int agent_spawn(tg_wrap_t *w)
{
    tg_inst_t *inst = calloc(1, sizeof(*inst));
    if (inst == NULL)
        return -ENOMEM;
    inst->w = w;
    w->open_handles++; /* released when the instance's last handle closes */
    tg_ainst_init(&inst->a, w->gw, &w->ag->r.acfg, w->ag->r.idx, &w->ag->r.rows, &w->err,
                  &w->err_dropped_reported, &inst_ops, w);
    tg_ainst_spawn_t how = {.inherit_env = w->gw->wrap_mode,
                            .hint = " (check the command after --)",
                            .attempt = w->nrestarts};
    int rc = tg_ainst_spawn(&inst->a, &how);
    if (rc < 0) {
        /* uv_spawn itself failed: the command; containment or the
         * pre-flight refused: 1. */
        if (rc == -EAGAIN || rc == -EPERM)
            w->gw->exit_code = 1;
        else if (inst->a.p.proc_init)
            w->gw->exit_code = 127;
        return rc;
    }
    w->inst = inst;
    w->agent_paused = false;
    if (w->gw->metrics_ok)
        tg_metrics_agent_state(&w->gw->metrics, w->ag->r.idx, TG_AGENT_RUNNING, inst->a.p.pid);

    if (w->nrestarts > 0 && w->init_frame != NULL) {
        /* Replay the caller's handshake so the session goes on. */
        tg_call_t *c = call_alloc(w, K_REPLAY_INIT);
        if (c != NULL) {
            w->astate = A_STARTING;
            to_agent_spliced(w, NULL, w->init_frame, w->init_len, w->init_id_off, w->init_id_len,
                             c->cc.id);
            return 0;
        }
    }
    agent_running(w);
    return 0;
}

static void inst_kill(tg_wrap_t *w, int sig, const char *reason)
{
    if (w->inst != NULL)
        tg_ainst_kill(&w->inst->a, sig, reason);
}

/* ---- flow control ----------------------------------------------------- */

static void backpressure(tg_wrap_t *w)
{
    size_t high = 2 * (size_t)w->gw->cfg->max_frame_bytes;
    /* caller -> agent: stop reading the caller while the agent lags. */
    size_t toward_agent = (w->inst != NULL ? w->inst->a.p.wr.queued_bytes : 0) + w->ag->r.queued_frame_bytes;
    reg_set(w, w->ag->r.reg_wq_agent, toward_agent);
    if (!w->caller_eof && w->cin != NULL) {
        if (toward_agent > high && !w->caller_paused) {
            uv_read_stop(w->cin);
            w->caller_paused = true;
        } else if (toward_agent <= high / 2 && w->caller_paused) {
            uv_read_start(w->cin, caller_alloc, caller_read);
            w->caller_paused = false;
        }
    }
    /* agent -> caller */
    reg_set(w, w->gw->reg_wq_caller, w->cwr.queued_bytes);
    if (w->inst != NULL && !w->inst->a.p.out_eof) {
        uv_stream_t *s = (uv_stream_t *)&w->inst->a.p.pout;
        if (w->cwr.queued_bytes > high && !w->agent_paused) {
            uv_read_stop(s);
            w->agent_paused = true;
        } else if (w->cwr.queued_bytes <= high / 2 && w->agent_paused) {
            uv_read_start(s, agent_alloc, agent_read);
            w->agent_paused = false;
        }
    }
}

static void flush_all(tg_wrap_t *w)
{
    if (w->inst != NULL && !w->inst->a.p.gone)
        (void)tg_out_flush(&w->inst->a.p.wr);
    else if (w->inst != NULL)
        tg_out_discard(&w->inst->a.p.wr);
    if (!w->cout_dead)
        (void)tg_out_flush(&w->cwr);
    else
        tg_out_discard(&w->cwr);
    backpressure(w);
}

static void caller_out_drain(tg_out_t *o, void *ctx)
{
    (void)o;
    tg_wrap_t *w = ctx;
    backpressure(w);
    if (w->phase == P_DONE && w->inst == NULL)
        finish(w);
}

static void caller_out_error(tg_out_t *o, void *ctx, int status)
{
    tg_wrap_t *w = ctx;
    (void)o;
    w->cout_dead = true;
    if (status != UV_EPIPE && status != UV_ECANCELED)
        tg_log("writing to the caller failed: %s", uv_strerror(status));
    begin_shutdown(w, "caller closed stdout");
}

/* ---- shutdown --------------------------------------------------------- */

static void on_phase_timer(uv_timer_t *t);

static void stop_agent_step(tg_wrap_t *w)
{
    tg_inst_t *inst = w->inst;
    uint64_t grace = w->ag->r.acfg->kill_grace_ms;
    if (inst == NULL || inst->a.p.gone) {
        w->phase = P_DONE;
        finish(w);
        return;
    }
    switch (w->phase) {
    case P_DRAIN:
        /* Inflight calls had their chance: close the agent's stdin. */
        w->phase = P_STOP_STDIN;
        tg_ainst_close_stdin(&inst->a);
        break;
    case P_STOP_STDIN:
        w->phase = P_STOP_TERM;
        inst_kill(w, SIGTERM, "shutdown");
        break;
    case P_STOP_TERM:
        w->phase = P_STOP_KILL;
        tg_log("agent '%s' ignored SIGTERM for %" PRIu64 " ms: SIGKILL", agent_name(w), grace);
        inst_kill(w, SIGKILL, "shutdown");
        break;
    default:
        return;
    }
    uv_timer_start(&w->phase_timer, on_phase_timer, grace, 0);
}

static void on_phase_timer(uv_timer_t *t)
{
    tg_wrap_t *w = t->data;
    stop_agent_step(w);
    flush_all(w);
}

static void check_drained(tg_wrap_t *w)
{
    if (w->phase == P_DRAIN && busy_calls(w) == 0) {
        uv_timer_stop(&w->phase_timer);
        stop_agent_step(w);
    }
}

static void begin_shutdown(tg_wrap_t *w, const char *why)
{
    if (w->phase != P_RUN)
        return;
    w->phase = P_DRAIN;
    if (w->gw->wrap_mode) {
        /* In wrap mode the session is the router; in serve mode a caller
         * leaving is not the router stopping. */
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "router.stopping";
        ev.reason = why;
        ev.count = (int64_t)busy_calls(w);
        emit(w, &ev);
    }
    uv_timer_stop(&w->restart_timer);
    if (w->astate == A_BACKOFF || w->inst == NULL) {
        w->phase = P_DONE;
        finish(w);
        return;
    }
    uv_timer_start(&w->phase_timer, on_phase_timer, w->ag->r.acfg->kill_grace_ms, 0);
    check_drained(w);
}

/* Drop one hold on session <w> (a handle of its own, or its agent
 * instance); the last frees it and tells the gateway. */
static void sess_release(tg_wrap_t *w)
{
    if (--w->open_handles > 0)
        return;
    tg_gw_t *gw = w->gw;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        gw->sessions = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    gw->nsessions--;
    tg_in_free(&w->crd);
    tg_out_free(&w->cwr);
    free(w->init_frame);
    free(w->initd_frame);
    free(w->conn);
    if (gw->on_session_end != NULL)
        gw->on_session_end(gw, w);
    tg_agent_t *ag = w->ag;
    free(w);
    ag->nsess--;
    agent_maybe_reap(ag);
}

static void sess_handle_closed(uv_handle_t *h)
{
    sess_release(h->data);
}

/* Everything is answered and the agent is gone (or being closed): close
 * the session's own handles once the caller's output is written; the last
 * close frees the session and tells the gateway. */
static void finish(tg_wrap_t *w)
{
    w->phase = P_DONE;
    if (w->inst != NULL && !w->inst->a.p.gone) {
        /* The agent still runs: escalate until its exit brings us back. */
        if (!uv_is_active((uv_handle_t *)&w->phase_timer)) {
            w->phase = P_DRAIN;
            stop_agent_step(w);
        }
        return;
    }
    if (!w->cout_dead && (w->cwr.queued_bytes > 0 || w->cwr.npieces > 0)) {
        (void)tg_out_flush(&w->cwr);
        if (w->cwr.queued_bytes > 0)
            return; /* caller_out_drain calls us again */
    }
    if (w->finished)
        return;
    w->finished = true;
    uv_timer_stop(&w->phase_timer);
    uv_timer_stop(&w->restart_timer);
    w->cwr.stream = NULL;
    uv_timer_stop(&w->idle_timer);
    uv_handle_t *hs[] = {(uv_handle_t *)&w->phase_timer, (uv_handle_t *)&w->restart_timer,
                         (uv_handle_t *)&w->idle_timer, (uv_handle_t *)w->cin,
                         (uv_handle_t *)w->cout};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i] != NULL && !uv_is_closing(hs[i]) && (i < 4 || hs[i] != hs[3]))
            uv_close(hs[i], sess_handle_closed);
}

/* Say how much agent stderr was dropped since the last report. */
static void report_stderr_drops(tg_wrap_t *w)
{
    tg_agent_report_drops(w->ag->r.acfg, &w->err, &w->err_dropped_reported);
}

/* Restarts of <w>'s agent within restart.window before <now>: what
 * after_exit holds against max_restarts. */
static uint32_t recent_restarts(const tg_wrap_t *w, uint64_t now)
{
    return tg_aproc_recent(w->restart_at, w->nrestarts, now, w->ag->r.acfg->restart_window_ms);
}

/* The gateway's tick: report stderr drops and age out restarts: each
 * agent's restarts entry shows the live session with the most restarts
 * within the window (sessions are per caller in serve, and each has its
 * own budget). */
void tg_sess_tick(tg_gw_t *gw, uint64_t now)
{
    for (tg_wrap_t *w = gw->sessions; w != NULL; w = w->next) {
        report_stderr_drops(w);
        w->ag->tick_restarts = 0;
    }
    for (tg_wrap_t *w = gw->sessions; w != NULL; w = w->next) {
        uint32_t n = recent_restarts(w, now);
        if (n > w->ag->tick_restarts)
            w->ag->tick_restarts = n;
    }
    for (tg_wrap_t *w = gw->sessions; w != NULL; w = w->next)
        reg_set(w, w->ag->reg_restarts, w->ag->tick_restarts);
}

/* ---- setup ------------------------------------------------------------ */

/* Open toolgate's own fd <fd> (0 or 1) as a tty or a pipe into <tty> or
 * <pipe>; NULL when it is neither (then *<type> says what it is). */
static uv_stream_t *open_std(tg_wrap_t *w, int fd, uv_tty_t *tty, uv_pipe_t *pipe,
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

static int open_caller(tg_wrap_t *w)
{
    uv_handle_type t;
    if ((w->cin = open_std(w, 0, &w->cin_tty, &w->cin_pipe, &t)) == NULL) {
        if (t != UV_NAMED_PIPE)
            tg_log("stdin is %s; toolgate wrap reads MCP frames from a pipe or terminal (as MCP "
                   "clients launch servers)",
                   t == UV_FILE ? "a regular file" : "not a pipe");
        return -EINVAL;
    }
    if ((w->cout = open_std(w, 1, &w->cout_tty, &w->cout_pipe, &t)) == NULL) {
        if (t != UV_NAMED_PIPE)
            tg_log("stdout is %s; toolgate wrap writes MCP frames to a pipe or terminal",
                   t == UV_FILE ? "a regular file" : "not a pipe");
        return -EINVAL;
    }
    w->cwr.stream = w->cout;
    return 0;
}


/* The MCP engine's own rows, beside the route's. */
static void register_limits(tg_agent_t *ag)
{
    const tg_agent_cfg_t *a = ag->r.acfg;
    char name[TG_LIMIT_NAME_MAX];
    /* max_restarts per restart.window: a count over a period, like a rate. */
    snprintf(name, sizeof(name), "agent.%s.restarts", a->id);
    ag->reg_restarts = tg_registry_upsert(&ag->gw->reg, name, TG_LIMIT_RATE, "session",
                                          a->max_restarts);
    /* max_instances is enforced by serve only (wrap runs one instance). */
    ag->reg_instances = -1;
    if (!ag->gw->wrap_mode) {
        snprintf(name, sizeof(name), "agent.%s.instances", a->id);
        ag->reg_instances = tg_registry_upsert(&ag->gw->reg, name, TG_LIMIT_CONCURRENCY,
                                               "agent", a->max_instances);
    }
}

/* ---- public API: gateway, agents, sessions ------------------------------ */

/* An agent for <acfg> at metrics row <idx>. NULL after logging. */
static tg_agent_t *agent_make(tg_gw_t *gw, tg_agent_cfg_t *acfg, size_t idx, uint32_t max_sessions)
{
    tg_agent_t *ag = calloc(1, sizeof(*ag));
    if (ag == NULL)
        return NULL;
    ag->gw = gw;
    gw->engine_tick = tg_sess_tick;
    gw->engine_reap = tg_sess_reap_retired;
    tg_dlt_init(&ag->r.dlt, on_call_deadline, ag);
    ag->max_sessions = max_sessions;
    /* The table holds every entry the limits allow: inflight and zombie
     * calls (<= max_concurrent, each with at most one ping), queued calls,
     * and per session its pass-through requests and replayed initialize. */
    uint64_t n = 2ull * acfg->lim.max_concurrent_calls + acfg->lim.max_queued_calls +
                 (uint64_t)max_sessions * (TG_MAX_PASSTHRU + 2) + TG_RELOAD_SPARE_CALLS;
    /* Ids fitted to twice that: short in every frame, and room for a
     * reload to raise the limits in place (beyond it, a successor). */
    uint32_t fit = n > TG_CALL_MAX / 2 ? TG_CALL_MAX : (uint32_t)(2 * n);
    if (tg_route_setup(&ag->r, gw, acfg, idx, sizeof(tg_call_t), n, fit) < 0) {
        tg_agent_free(ag);
        return NULL;
    }
    register_limits(ag);
    return ag;
}

tg_agent_t *tg_agent_new(tg_gw_t *gw, tg_agent_cfg_t *acfg, uint32_t max_sessions)
{
    return agent_make(gw, acfg, (size_t)(acfg - gw->cfg->agents), max_sessions);
}

void tg_agent_close_timers(tg_agent_t *ag)
{
    for (uint32_t i = 0; i < ag->r.tab.n; i++)
        if (call_at(ag, i)->cc.own.ready)
            tg_handle_close((uv_handle_t *)&call_at(ag, i)->cc.own.timer);
    if (ag->r.fleet_timer_ready)
        tg_handle_close((uv_handle_t *)&ag->r.fleet_timer);
    if (ag->r.dlt.ready)
        tg_handle_close((uv_handle_t *)&ag->r.dlt.timer);
}

void tg_agent_free(tg_agent_t *ag)
{
    if (ag == NULL)
        return;
    tg_route_fini(&ag->r);
    free(ag);
}

/* ---- reload ----------------------------------------------------------- */

int tg_agent_reconfigure(tg_agent_t *ag, tg_agent_cfg_t *acfg)
{
    const tg_agent_cfg_t *o = ag->r.acfg;
    if (acfg->rate_shared != o->rate_shared || acfg->shared_lease != o->shared_lease ||
        acfg->conc_shared != o->conc_shared || acfg->ntools != o->ntools)
        return -EAGAIN;
    for (size_t i = 0; i < acfg->ntools; i++)
        if (strcmp(acfg->tools[i].name, o->tools[i].name) != 0 ||
            acfg->tools[i].lim.rate_shared != o->tools[i].lim.rate_shared)
            return -EAGAIN;
    /* The table grows in place (its chunks never move); it is left
     * larger when a later step fails, which is harmless. */
    uint64_t need = 2ull * acfg->lim.max_concurrent_calls + acfg->lim.max_queued_calls +
                    (uint64_t)ag->max_sessions * (TG_MAX_PASSTHRU + 2);
    if (need > (UINT64_C(1) << ag->r.tab.bits) || ag->r.aq.count > acfg->lim.max_queued_calls)
        return -EAGAIN;
    if (tg_ctab_grow(&ag->r.tab, (uint32_t)need) < 0)
        return -ENOMEM;
    tg_gcra_t arate = ag->r.arate;
    if (!tg_route_same_rate(&o->lim, &acfg->lim) &&
        tg_gcra_init(&arate, acfg->lim.rate_limit.count, acfg->lim.rate_limit.period_ms,
                     acfg->lim.burst) < 0)
        return -EINVAL;
    if (acfg->lim.max_queued_calls != ag->r.aq.cap && tg_waitq_resize(&ag->r.aq, acfg->lim.max_queued_calls) < 0)
        return -ENOMEM;
    /* Nothing fails from here on: the new limits apply as a whole. */
    ag->r.arate = arate;
    ag->r.aconc.max = acfg->lim.max_concurrent_calls;
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
    }
    ag->r.acfg = acfg;
    tg_route_register(&ag->r);
    register_limits(ag);
    /* Raised caps may let queued calls run now. */
    for (tg_wrap_t *w = ag->gw->sessions; w != NULL; w = w->next)
        if (w->ag == ag) {
            pump_queue(w);
            flush_all(w);
            break;
        }
    return 0;
}

tg_agent_t *tg_agent_successor(tg_agent_t *old, tg_agent_cfg_t *acfg)
{
    tg_agent_t *ag = agent_make(old->gw, acfg, old->r.idx, old->max_sessions);
    if (ag == NULL)
        return NULL;
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
static void agent_reap(tg_agent_t *ag)
{
    for (tg_agent_t **p = &ag->gw->retired; *p != NULL; p = &(*p)->next_retired)
        if (*p == ag) {
            *p = ag->next_retired;
            break;
        }
    void (*cb)(void *) = ag->on_free;
    void *arg = ag->on_free_arg;
    tg_agent_free(ag);
    if (cb != NULL)
        cb(arg);
}

void tg_sess_reap_retired(tg_gw_t *gw)
{
    while (gw->retired != NULL)
        agent_reap(gw->retired);
}

static void retired_timer_closed(uv_handle_t *h)
{
    tg_agent_t *ag = h->data;
    if (--ag->closing == 0)
        agent_reap(ag);
}

/* A retired agent with no session and no store answer outstanding: close
 * its call timers, then free it (now, or when the last timer has closed). */
static void agent_maybe_reap(tg_agent_t *ag)
{
    /* At teardown every handle is being closed by the walk: the gateway
     * frees what is left once those closes have run. */
    if (!ag->retired || ag->nsess > 0 || ag->nstore_wait > 0 || ag->closing > 0 ||
        ag->gw->tearing_down)
        return;
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        uv_timer_t *t = &call_at(ag, i)->cc.own.timer;
        if (call_at(ag, i)->cc.own.ready && !uv_is_closing((uv_handle_t *)t)) {
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

void tg_agent_retire(tg_agent_t *ag, void (*on_free)(void *arg), void *arg)
{
    ag->retired = true;
    ag->on_free = on_free;
    ag->on_free_arg = arg;
    ag->next_retired = ag->gw->retired;
    ag->gw->retired = ag;
    agent_maybe_reap(ag);
}

const tg_agent_cfg_t *tg_agent_cfg(const tg_agent_t *ag)
{
    return ag->r.acfg;
}

const char *tg_agent_id(const tg_agent_t *ag)
{
    return ag->r.acfg->id;
}

void tg_agent_instances(tg_agent_t *ag, uint32_t running)
{
    if (ag->reg_instances >= 0)
        tg_registry_update(&ag->gw->reg, ag->reg_instances, running);
}

tg_agent_t *tg_sess_agent(const tg_wrap_t *w)
{
    return w->ag;
}

tg_wrap_t *tg_sess_next(const tg_wrap_t *w)
{
    return w->next;
}

static tg_wrap_t *sess_alloc(tg_gw_t *gw, tg_agent_t *ag, const char *caller)
{
    tg_wrap_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->gw = gw;
    w->ag = ag;
    ag->nsess++;
    snprintf(w->caller, sizeof(w->caller), "%s", caller);
    tg_in_init(&w->crd, &gw->pool, gw->cfg->max_frame_bytes);
    tg_out_init(&w->cwr, &gw->pool);
    w->cwr.ctx = w;
    w->cwr.on_drain = caller_out_drain;
    w->cwr.on_error = caller_out_error;
    uv_timer_init(gw->loop, &w->restart_timer);
    uv_timer_init(gw->loop, &w->phase_timer);
    uv_timer_init(gw->loop, &w->idle_timer);
    w->restart_timer.data = w->phase_timer.data = w->idle_timer.data = w;
    w->open_handles = 3;
    w->next = gw->sessions;
    if (gw->sessions != NULL)
        gw->sessions->prev = w;
    gw->sessions = w;
    gw->nsessions++;
    return w;
}

tg_wrap_t *tg_sess_stdio(tg_gw_t *gw, tg_agent_t *ag)
{
    tg_wrap_t *w = sess_alloc(gw, ag, "stdio");
    if (w == NULL)
        return NULL;
    int rc = open_caller(w);
    w->open_handles += (w->cin != NULL) + (w->cout != NULL && w->cout != w->cin);
    if (rc < 0) {
        finish(w);
        return NULL;
    }
    return w;
}

tg_wrap_t *tg_sess_conn(tg_gw_t *gw, tg_agent_t *ag, uv_pipe_t *conn, const char *caller,
                        tg_caller_lim_t *climits)
{
    tg_wrap_t *w = sess_alloc(gw, ag, caller);
    if (w == NULL)
        return NULL;
    w->climits = climits;
    w->conn = conn;
    w->cin = w->cout = (uv_stream_t *)conn;
    conn->data = w;
    w->cwr.stream = w->cout;
    w->open_handles += 1;
    return w;
}

int tg_sess_start(tg_wrap_t *w)
{
    if (agent_spawn(w) < 0) {
        begin_shutdown(w, "agent failed to start");
        finish(w);
        return -1;
    }
    uv_read_start(w->cin, caller_alloc, caller_read);
    return 0;
}

void tg_sess_shutdown(tg_wrap_t *w, const char *why)
{
    begin_shutdown(w, why);
    flush_all(w);
}

bool tg_sess_stopping(const tg_wrap_t *w)
{
    return w->phase != P_RUN;
}

void tg_sess_kill(tg_wrap_t *w)
{
    inst_kill(w, SIGKILL, "interrupted");
}

