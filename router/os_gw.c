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
#include "router/os_gw.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "limits/conc.h"
#include "limits/contain.h"
#include "limits/gcra.h"
#include "limits/registry.h"
#include "limits/store.h"
#include "router/agent/contain_cfg.h"
#include "router/call/denial.h"
#include "router/call/dltimer.h"
#include "router/front/io.h"
#include "router/dialect/idem.h"
#include "router/dialect/lenpfx.h"
#include "router/log.h"
#include "router/admin/metrics.h"
#include "router/dialect/osenv.h"
#include "router/dialect/osmsg.h"
#include "router/call/admit.h"
#include "router/call/call.h"
#include "router/call/route.h"
#include "router/call/table.h"
#include "router/agent/agent_proc.h"
#include "router/agent/instance.h"

#define OS_ECHO_MAX        130  /* fixed internal bound: an id kept per call (128 bytes + quotes) */
#define OS_TOOLS_MAX       1024 /* fixed internal bound: tools one instance may register */
#define OS_IDEM_KEY_MAX    256  /* fixed internal bound: bytes of an idempotency_key */
#define OS_MSG_MAX         4096 /* fixed internal bound: one message toolgate writes */
#define OS_REJECT_ECHO_MAX 256  /* fixed internal bound: a refused tool_id echoed back, bytes */
#define OS_TOKEN_BYTES     16        /* the session token: 128 bits */
#define OS_TOKEN_ENV       "OPENSENTIENCE_SESSION_TOKEN"

typedef struct os_agent os_agent_t;
typedef struct os_conn os_conn_t;


typedef enum {
    A_DOWN = 0,  /* no instance (on_demand: the next call starts one) */
    A_STARTING,  /* spawned: waiting for agent.hello, then agent.tools.register */
    A_READY,     /* welcomed and registered: calls are routed to it */
    A_UNHEALTHY, /* its heartbeats stopped: calls refused until it recovers or is killed */
    A_BACKOFF,   /* waiting to be restarted */
    A_FAILED,    /* not restarted (policy, or restarts exhausted) */
} astate_t;

typedef enum { P_RUN = 0, P_DRAIN, P_STOP_STDIN, P_STOP_TERM, P_STOP_KILL, P_DONE } phase_t;

/* An id copied from a caller's frame: the raw string span, quotes
 * included (scanned and validated by tg_os_scan); len 0 when absent. */
typedef struct os_echo {
    char buf[OS_ECHO_MAX];
    size_t len;
} os_echo_t;

/* One call. Owned by its agent's call table. */
typedef struct os_call {
    tg_callc_t cc; /* first: the admission's view (router/call/call.h) */
    os_agent_t *ag;
    os_conn_t *conn;               /* NULL once the caller left */
    struct os_call *cnext, *cprev; /* the caller's calls */
    os_echo_t cid, msg_id, request_id, correlation_id;
    bool rid_assigned; /* request_id is toolgate's (the caller named none) */
    char tool[TG_OS_TOOL_ID_MAX + 1]; /* the tool's name in its agent (after '/') */
    size_t tool_len;
    enum { DL_CALLER, DL_AGENT, DL_TOOL } deadline_src; /* whose cap the deadline is */
    char idem[OS_IDEM_KEY_MAX + 1];
    size_t idem_len;
    bool has_idem;
} os_call_t;

/* One running agent process. Freed when its handles have closed. */
typedef struct os_inst {
    tg_ainst_t a; /* first: its handles' data point here */
    os_agent_t *ag;
    tg_lenpfx_t lp;
    bool paused;
} os_inst_t;

struct os_agent {
    tg_route_t r; /* first: its limits, stores, call table and rows */
    tg_osgw_t *g;
    astate_t st;
    phase_t phase;
    os_inst_t *inst;
    char token[2 * OS_TOKEN_BYTES + 1]; /* hex; "" when no instance runs */
    bool hello_ok;
    bool registered;          /* its first agent.tools.register was answered */
    uint32_t starts;          /* instances started, for session ids */
    bool last_failed;         /* the last instance failed: an on-demand start counts as a restart */
    uv_timer_t hb_timer;      /* hello deadline, then the heartbeat watch */
    uv_timer_t restart_timer; /* backoff */
    uv_timer_t phase_timer;   /* shutdown steps */
    uint64_t restart_at[TG_APROC_RESTART_LOG];
    uint32_t nrestarts;
    char **reg; /* registered tool names (after '/'), owned */
    size_t nreg;
    uint32_t qcap;  /* max_queued_calls (r.aq's ring may be larger after a reload lowered it) */
    int reg_idem;
    char path_hb[256];
    /* A reload changed more than limits: the instance is drained, stopped
     * and started again from the new config. */
    bool switching;
    /* idempotency cache: result payloads (header excluded) under idem_key,
     * on the uv_now clock; freed in agent_free */
    tg_idem_t idem_cache;
    /* stderr budget: bytes relayed in the current second, and dropped */
    tg_aproc_errbudget_t err;
    uint64_t err_reported;
    uint64_t invalid_frames;
};

/* An opensentience listener's connection count (router.listen[i]). */
typedef struct os_listen {
    char path[108];
    uint32_t max, open;
    int reg;
    char cfg_path[64]; /* "router.listen[3].max_connections" */
} os_listen_t;

struct os_conn {
    uv_pipe_t *pipe; /* the accepted socket: first member of a heap block we free */
    tg_osgw_t *g;
    os_conn_t *next, *prev;
    /* Copied from its listener: a reload may free the config it came from. */
    char path[108];
    tg_on_oversize_t on_oversize;
    os_listen_t *ls; /* counts it while it is open; NULL when refused */
    char caller[64];
    unsigned uid; /* the peer's (SO_PEERCRED) */
    tg_caller_lim_t *lim;
    tg_in_t rd;
    tg_lenpfx_t lp;
    tg_out_t wr;
    uv_timer_t idle; /* a partial frame left too long, or a write queue that does not drain */
    int open;        /* handles not yet closed */
    bool ending;     /* no more reading: close once the output is written */
    bool closed;     /* uv_close called */
    bool paused;     /* reading stopped: an agent's write queue is full */
    bool over;       /* its write queue is over the high mark (counted in g->nover) */
    bool refused;    /* every call is answered with the refusal, then the connection ends */
    tg_deny_code_t rcode;
    const char *rlimit, *rscope, *rpath; /* the refusal's limit, scope and config path */
    int64_t robserved, rcap;
    char rdetail[160];
    os_call_t *calls;
};

struct tg_osgw {
    tg_gw_t *gw;
    tg_config_t *cfg;
    os_agent_t **agents;
    size_t nagents;
    os_listen_t *ls;
    size_t nls;
    os_conn_t *conns;
    uint32_t nover; /* connections over their write-queue mark: agents are not read */
    uint64_t msg_seq;
    bool stopping, closing_timers, idle;
    int open_timers; /* agent timers not yet closed, all agents */
    void (*on_idle)(void *arg);
    void *on_idle_arg;
};

static void g_flush(tg_osgw_t *g);
static void pump_queue(os_agent_t *ag);
static void call_release(os_call_t *c);
static void inst_kill(os_agent_t *ag, int sig, const char *reason);
static int agent_spawn(os_agent_t *ag);
static void agent_check_drained(os_agent_t *ag);
static void switch_done(os_agent_t *ag);
static void conn_end(os_conn_t *c);
static void g_check_idle(tg_osgw_t *g);
static void flow(tg_osgw_t *g);
static void agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* ---- small helpers ---------------------------------------------------- */

static int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ms(const tg_osgw_t *g)
{
    return uv_now(g->gw->loop);
}

static const char *aname(const os_agent_t *ag)
{
    return ag->r.acfg->id;
}

static uint64_t high_mark(const tg_osgw_t *g)
{
    return 2 * g->cfg->max_frame_bytes;
}

static void emit(tg_osgw_t *g, const tg_audit_ev_t *ev)
{
    if (g->gw->audit != NULL)
        tg_audit_emit(g->gw->audit, ev);
}

/* Audit (and log) a registered limit crossing 80% or re-arming. */
static void reg_set(tg_osgw_t *g, int idx, uint64_t current)
{
    tg_registry_update(&g->gw->reg, idx, current);
}

static void set_state(os_agent_t *ag, astate_t st)
{
    static const tg_agent_state_t map[] = {
        [A_DOWN] = TG_AGENT_DOWN,       [A_STARTING] = TG_AGENT_STARTING,
        [A_READY] = TG_AGENT_RUNNING,   [A_UNHEALTHY] = TG_AGENT_UNHEALTHY,
        [A_BACKOFF] = TG_AGENT_BACKOFF, [A_FAILED] = TG_AGENT_DOWN,
    };
    ag->st = st;
    if (ag->g->gw->metrics_ok)
        tg_metrics_agent_state(&ag->g->gw->metrics, ag->r.idx, map[st],
                               ag->inst != NULL ? ag->inst->a.p.pid : 0);
}

/* A fresh id for a message toolgate writes. */
static const char *msg_id(tg_osgw_t *g, char out[32])
{
    char num[24];
    tg_call_id_hex(num, ++g->msg_seq);
    snprintf(out, 32, "tgm-%s", num + 3);
    return out;
}

static void echo_set(os_echo_t *e, const char *frame, tg_jspan_t s)
{
    e->len = 0;
    if (s.type == TG_J_STRING && s.len <= sizeof(e->buf)) {
        memcpy(e->buf, frame + s.off, s.len);
        e->len = s.len;
    }
}

static tg_os_raw_t echo_raw(const os_echo_t *e)
{
    tg_os_raw_t r = {NULL, 0};
    if (e->len > 0) {
        r.p = e->buf;
        r.len = e->len;
    }
    return r;
}

/* A string span's text for audit: without its quotes; "" when escaped or
 * absent (the audit encoder writes "invalid" for what fails its check).
 * <out> holds OS_ECHO_MAX bytes. */
static const char *echo_text(const os_echo_t *e, char *out)
{
    if (e->len < 2 || memchr(e->buf, '\\', e->len) != NULL)
        return NULL;
    memcpy(out, e->buf + 1, e->len - 2);
    out[e->len - 2] = '\0';
    return out;
}

/* ---- framed output ---------------------------------------------------- */

/* Queue on <o> the message an encoder wrote at buf + 4, framed: <n> is
 * what the encoder returned, its length or a negative errno. A message
 * that did not fit is dropped (logged): toolgate built it from bounded
 * parts, so that is a bug, not a peer's doing. */
static void send_built(tg_out_t *o, char *buf, long n)
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

static bool conn_writable(const os_conn_t *c)
{
    return c != NULL && !c->closed && c->wr.stream != NULL && c->wr.error == 0;
}

/* ---- call table ------------------------------------------------------- */

static os_call_t *call_at(const os_agent_t *ag, uint32_t i)
{
    return tg_ctab_at(&ag->r.tab, i);
}

/* The slab the limits of <a> need: every call they allow at once (in
 * flight, zombies and cancelling calls keeping their slot; queued; one
 * being refused) and, with a shared rate, as many more waiting for the
 * store's answer. */
static uint32_t slab_need(const tg_agent_cfg_t *a)
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

static void call_free(os_call_t *c)
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
static os_call_t *call_by_agent_id(os_agent_t *ag, const char *frame, tg_jspan_t s)
{
    char txt[40];
    long n = tg_jstr_decode(frame, s, txt, sizeof(txt));
    uint64_t v;
    if (n < 0 || tg_call_id_parse(txt, (size_t)n, &v) < 0)
        return NULL;
    return call_by_seq(ag, v);
}

/* ---- answers to callers ----------------------------------------------- */

static void denial_init(const os_agent_t *ag, tg_denial_t *d, tg_deny_code_t code,
                        const os_call_t *c, char reqid[32])
{
    if (c != NULL)
        tg_call_id_hex(reqid, c->cc.id);
    tg_adm_denial_init(d, code, ag != NULL ? aname(ag) : NULL, c != NULL ? c->tool : NULL,
                       c != NULL ? c->tool_len : 0, c != NULL ? reqid : NULL);
}

/* Answer call <c> with denial <d> (the agent.tool.result of tg_denial_os). */
static void deny_to(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                    tg_denial_t *d)
{
    if (!conn_writable(k))
        return;
    char buf[OS_MSG_MAX], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, c, &h, id);
    d->os = &h;
    long n = tg_denial_os(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR,
                          cid != NULL && cid->len ? cid->buf : NULL, cid != NULL ? cid->len : 0, d);
    send_built(&k->wr, buf, n);
}

/* Answer call <c> with a result toolgate makes: "canceled", or "failed"
 * with a routing error <code> (not a limit). */
static void answer(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                   const char *status, const char *code, const char *message, bool retryable)
{
    if (!conn_writable(k))
        return;
    char buf[OS_MSG_MAX], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, c, &h, id);
    long n = tg_os_enc_result(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, echo_raw(cid),
                              status, code, message, retryable);
    send_built(&k->wr, buf, n);
}

/* A protocol error on the connection (no call to answer): a core.error. */
static void conn_error(tg_osgw_t *g, os_conn_t *k, const char *code, const char *message)
{
    if (!conn_writable(k))
        return;
    char buf[1024], id[32];
    tg_os_hdr_t h;
    hdr_for_call(g, NULL, &h, id);
    long n = tg_os_enc_error(buf + TG_LENPFX_HDR, sizeof(buf) - TG_LENPFX_HDR, &h, "core.error",
                             code, message, false);
    send_built(&k->wr, buf, n);
}

/* One audit event for call <c>, with the fields MCP calls carry; counts
 * the call in the metrics. */
static void audit_call(os_call_t *c, const char *event, const char *status, const tg_denial_t *d,
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
static void deny_call(os_call_t *c, tg_denial_t *d, const char *event, const char *stage)
{
    deny_to(c->ag->g, c->conn, c, &c->cid, d);
    audit_call(c, event, event[5] == 't' ? "timeout" : "denied", d, stage, NULL);
}

static void update_conc_regs(os_agent_t *ag, const os_call_t *c)
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
static void idem_store(os_call_t *c, const char *frame, size_t len, tg_jspan_t cid, bool ok)
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
    if (!conn_writable(k) || tg_os_splice_plan(e->frame_len, s, c->cid.len, &sp) < 0)
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

static void on_call_deadline(tg_dlt_t *t, tg_dl_node_t *x)
{
    (void)t;
    call_expired((os_call_t *)(void *)((char *)x - offsetof(os_call_t, cc.dl)));
}
static void slot_ask(os_call_t *c);
static void release_slots(os_call_t *c);

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
    update_conc_regs(ag, c);
}

static bool tool_has_room(const os_agent_t *ag, const os_call_t *c)
{
    return tg_route_has_room(&ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
}

static bool tool_registered(const os_agent_t *ag, const char *name, size_t len)
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
    answer(c->ag->g, c->conn, c, &c->cid, "failed", "tool.not_found", msg, false);
    audit_call(c, "call.denied", "invalid", NULL, NULL, "tool_not_found");
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
static void pump_queue(os_agent_t *ag)
{
    if (!tg_adm_pump_begin(&ag->r.pump))
        return;
    do {
        uint32_t i = 0;
        while (can_dispatch(ag) && i < ag->r.aq.count && tg_conc_has_room(&ag->r.aconc)) {
            os_call_t *c = call_at(ag, tg_waitq_at(&ag->r.aq, i));
            if (!tool_registered(ag, c->tool, c->tool_len)) {
                tg_route_dequeue_at(&ag->r, i, &c->cc);
                not_found(c);
                call_free(c);
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
    update_conc_regs(ag, NULL);
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
    denial_init(c->ag, &d, TG_DENY_RATE, c, reqid);
    tg_adm_rate_denial(&d, detail, sizeof(detail), scopes[worst].scope, scopes[worst].path,
                       scopes[worst].rate, &rw);
    if (detail_text != NULL)
        d.detail = detail_text;
    deny_call(c, &d, "call.denied", NULL);
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
    pump_queue(ag);
    g_flush(ag->g);
}

/* Refuse call <c> for the shared concurrency limit: <observed> of <cap>
 * slots held (as the store last said), <why> in the detail. */
static void deny_fleet(os_call_t *c, uint32_t observed, uint32_t cap, const char *why,
                       const char *stage)
{
    tg_denial_t d;
    char reqid[32], detail[160];
    denial_init(c->ag, &d, TG_DENY_CONCURRENCY, c, reqid);
    tg_adm_fleet_denial(&d, detail, sizeof(detail), c->ag->r.path_conc, observed, cap, why);
    deny_call(c, &d, "call.denied", stage);
}

/* Refuse call <c> because the shared store cannot decide and
 * on_store_error is closed (or the store refused the request), with
 * <retry_after_ms> (TG_DENY_ABSENT: none). */
static void deny_store(os_call_t *c, const char *limit, const char *scope, const char *unit,
                       const char *detail, int64_t retry_after_ms)
{
    tg_denial_t d;
    char reqid[32];
    denial_init(c->ag, &d, TG_DENY_STORE, c, reqid);
    tg_adm_store_denial(&d, limit, scope, unit, detail, retry_after_ms);
    deny_call(c, &d, "call.denied", NULL);
}

/* A call a reload's instance switch turned away: its queue is full. */
static void deny_switching(os_call_t *c, const char *stage)
{
    tg_denial_t d;
    char reqid[32];
    denial_init(c->ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
    d.limit = "agent";
    d.retry_after_ms = (int64_t)c->ag->r.acfg->kill_grace_ms;
    d.detail = "agent is being restarted with its reloaded config and its wait queue is full";
    deny_call(c, &d, "call.denied", stage);
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
        call_release(c);
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
            pump_queue(ag); /* the fleet had room: the next waiter may ask too */
            return;
        }
        if (ag->switching && !ag->g->stopping) {
            /* A reload is replacing the instance: wait for the new one. */
            release_slots(c);
            c->cc.state = TG_CALL_QUEUED;
            if (!requeue(c)) {
                deny_switching(c, "queued");
                call_free(c);
            }
            update_conc_regs(ag, NULL);
            agent_check_drained(ag);
            return;
        }
        tg_denial_t d;
        char reqid[32];
        denial_init(ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
        d.limit = "agent";
        d.detail = "agent stopped while the call waited for a shared slot";
        deny_call(c, &d, "call.denied", "queued");
        call_release(c);
        return;
    }
    if (r->decided_by == TG_STORE_BY_CLOSED) {
        tg_config_t *cfg = ag->g->gw->cfg;
        deny_store(c, "concurrency", NULL, NULL, TG_ADM_STORE_CLOSED_SLOT,
                   cfg->store.timeout_ms != 0 ? (int64_t)cfg->store.timeout_ms
                                              : TG_STORE_DEF_TIMEOUT_MS);
        call_release(c);
        return;
    }
    /* Full (fleet-wide, or this instance's share under the local policy):
     * give the local slots back and wait in the queue, in arrival order. */
    release_slots(c);
    c->cc.state = TG_CALL_QUEUED;
    c->cc.fleet_seen = (uint32_t)r->holders;
    c->cc.fleet_cap = (uint32_t)r->cap;
    tg_route_fleet_wait(&ag->r, on_fleet_timer, ag);
    if (!requeue(c)) {
        deny_fleet(c, c->cc.fleet_seen, c->cc.fleet_cap, "and the wait queue is full", NULL);
        call_free(c);
    }
    update_conc_regs(ag, NULL);
    agent_check_drained(ag);
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
    g_flush(ag->g);
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
            call_free(c);
            return;
        }
        tg_denial_t d;
        char reqid[32], detail[160];
        denial_init(ag, &d, TG_DENY_CONCURRENCY, c, reqid);
        tg_adm_queue_full(&d, detail, sizeof(detail), tool_full, tool_full ? ts->queued : 0,
                          tool_full ? ts->max_queued : 0, tool_full ? ts->path_queue : NULL,
                          ag->r.aq.count, ag->qcap, ag->r.path_queue, ag->r.aconc.inflight,
                          ag->r.cstore != NULL && ag->r.fleet_full);
        deny_call(c, &d, "call.denied", NULL);
        call_free(c);
        return;
    }
    tg_route_enqueue(&ag->r, &c->cc);
    call_arm(c, c->cc.deadline_ms);
    /* The calls ahead may be held only by their tool's or caller's slot:
     * this one may still fit now. */
    pump_queue(ag);
    update_conc_regs(ag, c);
}

static os_agent_t *agent_by_id(tg_osgw_t *g, const char *id, size_t len)
{
    for (size_t i = 0; i < g->nagents; i++)
        if (strlen(aname(g->agents[i])) == len && memcmp(aname(g->agents[i]), id, len) == 0)
            return g->agents[i];
    return NULL;
}

static bool crash_loop(const os_agent_t *ag, uint64_t now, uint32_t *recent);

/* Refuse call <c> with agent_unavailable for reason <why>. */
static void deny_unavailable(os_call_t *c, const char *why)
{
    os_agent_t *ag = c->ag;
    tg_denial_t d;
    char reqid[32];
    denial_init(ag, &d, TG_DENY_UNAVAILABLE, c, reqid);
    d.limit = "agent";
    d.detail = why;
    if (ag->st == A_UNHEALTHY)
        d.retry_after_ms = (int64_t)ag->r.acfg->os.heartbeat_interval_ms;
    else if (ag->st == A_BACKOFF)
        d.retry_after_ms = (int64_t)ag->r.acfg->backoff_initial_ms;
    d.config_path = ag->st == A_UNHEALTHY ? ag->path_hb : NULL;
    deny_call(c, &d, "call.denied", NULL);
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
    if (why == NULL && ag->st == A_DOWN && crash_loop(ag, now_ms(ag->g), &recent))
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
    answer(k->g, k, &tmp, &tmp.cid, "failed", code, message, false);
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
        if (agent_spawn(ag) < 0) {
            ag->last_failed = true; /* counted by the crash-loop check */
            deny_unavailable(c, "agent could not be started");
            call_free(c);
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
            denial_init(ag, &d, TG_DENY_RATE, c, reqid);
            tg_adm_rate_denial(&d, detail, sizeof(detail), tool ? "tool" : "agent",
                               tool ? ts->path_rate : ag->r.path_rate, rate, &r->gcra);
            deny_call(c, &d, "call.denied", NULL);
        }
        call_free(c);
        agent_check_drained(ag);
        g_flush(g);
        return;
    }
    /* The agent's shared token taken, the tool's next. A refusal there
     * leaves the agent's token spent: the fleet can fall short of the
     * agent's limit by such calls, never exceed either limit. */
    if (step == STEP_AGENT && ts != NULL && ts->shared && ag->r.tool_store != NULL) {
        if (store_step(c, STEP_TOOL) < 0) {
            deny_store(c, "rate", "tool", NULL, TG_ADM_STORE_REFUSED_RATE, TG_DENY_ABSENT);
            call_free(c);
            agent_check_drained(ag);
        }
        g_flush(g);
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
        denial_init(ag, &d, TG_DENY_SHUTTING_DOWN, c, reqid);
        d.limit = "shutdown";
        d.detail = why;
        deny_call(c, &d, "call.denied", NULL);
    } else if (why != NULL) {
        deny_unavailable(c, why);
    } else if (rate_refused(c, scopes, n, now,
                            "the scope filled while the shared store answered")) {
        /* answered */
    } else if (ag->st == A_READY && !ag->switching && !tool_registered(ag, c->tool, c->tool_len)) {
        not_found(c);
    } else {
        tg_route_rate_take(&ag->r, scopes, n, now);
        c->cc.state = TG_CALL_QUEUED; /* between stages: in no queue */
        admit_go(c);
        g_flush(g);
        return;
    }
    call_free(c);
    agent_check_drained(ag);
    g_flush(g);
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
        call_free(c);
    }
}

/* A core.tool.call from caller <k>: route it by tool_id, then admit or
 * refuse it. The payload is [frame, frame+len) of block <b>. */
static void admit(os_conn_t *k, tg_block_t *b, const char *frame, size_t len,
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
    os_agent_t *ag = agent_by_id(g, tid, alen);
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
        denial_init(ag, &d, TG_DENY_CONCURRENCY, NULL, reqid);
        d.limit = "concurrency";
        d.detail = "call table full";
        deny_to(g, k, &tmp, &tmp.cid, &d);
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
        denial_init(ag, &d, TG_DENY_SHUTTING_DOWN, c, reqid);
        d.limit = "shutdown";
        d.detail = why;
        deny_call(c, &d, "call.denied", NULL);
        call_free(c);
        return;
    }
    /* A repeat of a completed call is answered from the cache: the tool
     * does not run again, and no limit is charged for it. */
    if (c->has_idem) {
        char key[96 + TG_OS_TOOL_ID_MAX + OS_IDEM_KEY_MAX + 4];
        size_t klen = idem_key(c, key, sizeof(key));
        const tg_idem_entry_t *e = klen > 0 ? idem_find(ag, key, klen) : NULL;
        if (e != NULL) {
            idem_replay(c, e);
            audit_call(c, "call.completed", e->ok ? "ok" : "error", NULL, NULL,
                       "idempotent_replay");
            call_free(c);
            return;
        }
        for (uint32_t i = 0; i < ag->r.tab.n && klen > 0; i++) {
            os_call_t *o = call_at(ag, i);
            char okey[sizeof(key)];
            if (o == c || o->cc.state == TG_CALL_IDLE || o->cc.state == TG_CALL_ZOMBIE || !o->has_idem ||
                o->conn == NULL || idem_key(o, okey, sizeof(okey)) != klen ||
                memcmp(okey, key, klen) != 0)
                continue;
            denial_init(ag, &d, TG_DENY_CONCURRENCY, c, reqid);
            d.limit = "idempotency";
            d.scope = "caller";
            d.observed = 2;
            d.cap = 1;
            d.unit = "calls";
            d.detail = "a call with this idempotency_key is still running";
            deny_call(c, &d, "call.denied", NULL);
            call_free(c);
            return;
        }
    }
    if (why != NULL) {
        deny_unavailable(c, why);
        call_free(c);
        return;
    }
    if (ag->st == A_READY && !ag->switching && !tool_registered(ag, c->tool, c->tool_len)) {
        not_found(c);
        call_free(c);
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
        call_free(c);
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
static void release_slots(os_call_t *c)
{
    tg_route_release_slots(&c->ag->r, &c->cc, c->conn != NULL ? c->conn->lim : NULL);
}

/* Give back the slots of a call, free it, let waiters in. */
static void call_release(os_call_t *c)
{
    os_agent_t *ag = c->ag;
    if (c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_CANCELLING || c->cc.state == TG_CALL_ZOMBIE ||
        c->cc.state == TG_CALL_SLOT)
        release_slots(c);
    else if (c->cc.state == TG_CALL_QUEUED)
        tg_route_unqueue(&c->ag->r, &c->cc);
    os_call_t copy = *c;
    call_free(c);
    update_conc_regs(ag, &copy);
    pump_queue(ag);
    agent_check_drained(ag);
}

/* Call <c> is over as far as its caller is concerned (answered, or the
 * caller left): it leaves the caller's list and gives back the caller's
 * slot, since a caller's limits count what it still waits for. The
 * agent's and tool's slots stay until the agent confirms. */
static void call_leave_caller(os_call_t *c)
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
static void send_cancel(os_call_t *c, const char *reason)
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
    send_built(&ag->inst->a.p.wr, buf, n);
}

/* A zombie or cancelled call must be answered by the agent within
 * kill_grace_period, else the agent is stuck. */
static void zombie(os_call_t *c, const char *stage)
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
        call_release(c);
    } else if (c->cc.state == TG_CALL_QUEUED) {
        bool waiting_agent = ag->st != A_READY || ag->switching;
        denial_init(ag, &d, waiting_agent ? TG_DENY_UNAVAILABLE : TG_DENY_CONCURRENCY, c, reqid);
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
        deny_call(c, &d, "call.denied", "queued");
        call_release(c);
    } else if (c->cc.state == TG_CALL_INFLIGHT) {
        const char *path = deadline_path(c);
        denial_init(ag, &d, TG_DENY_TIMEOUT, c, reqid);
        tg_route_timeout_denial(&c->cc, now_ms(ag->g), path, "timeout_ms", &d, detail,
                                sizeof(detail));
        deny_call(c, &d, "call.timeout", "timed_out");
        send_cancel(c, "timeout");
        call_leave_caller(c);
        zombie(c, "timed_out");
        pump_queue(ag); /* a call waiting for the caller's slot */
    } else if (c->cc.state == TG_CALL_CANCELLING) {
        /* The agent never confirmed the caller's cancel: answer for it. */
        answer(ag->g, c->conn, c, &c->cid, "canceled", NULL, NULL, false);
        call_leave_caller(c);
        zombie(c, "cancelled");
        tg_log("agent '%s' did not answer a core.tool.cancel within %" PRIu64
               " ms; killing it (raise %s)",
               aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        inst_kill(ag, SIGKILL, "stuck");
    } else if (c->cc.state == TG_CALL_ZOMBIE) {
        tg_log("agent '%s' did not answer a core.tool.cancel within %" PRIu64
               " ms; killing it (raise %s)",
               aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        inst_kill(ag, SIGKILL, "stuck");
    }
    g_flush(ag->g);
}

/* core.tool.cancel from caller <k> for one of its calls. */
static void caller_cancel(os_conn_t *k, const char *frame, const tg_os_env_t *env)
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
        answer(k->g, k, c, &c->cid, "canceled", NULL, NULL, false);
        audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_cancelled");
        if (c->cc.state == TG_CALL_RATE) {
            call_free(c);
            agent_check_drained(ag);
        } else {
            call_release(c);
        }
        return;
    }
    audit_call(c, "call.cancelled", "cancelled", NULL, "cancelled", "caller_cancelled");
    send_cancel(c, "caller_cancelled");
    c->cc.state = TG_CALL_CANCELLING;
    call_arm(c, c->ag->r.acfg->kill_grace_ms);
}

/* ---- caller connections ----------------------------------------------- */

/* The caller left (or is being dropped): its calls are cancelled, the
 * agent told, their slots kept until the agent confirms. */
static void conn_forget_calls(os_conn_t *k)
{
    while (k->calls != NULL) {
        os_call_t *c = k->calls;
        switch (c->cc.state) {
        case TG_CALL_RATE: {
            /* The store's answer will find nothing. */
            os_agent_t *ag = c->ag;
            audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_gone");
            call_free(c);
            agent_check_drained(ag);
            break;
        }
        case TG_CALL_SLOT:
        case TG_CALL_QUEUED:
            audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_gone");
            call_release(c);
            break;
        case TG_CALL_INFLIGHT:
            audit_call(c, "call.cancelled", "cancelled", NULL, "cancelled", "caller_gone");
            send_cancel(c, "caller_gone");
            call_leave_caller(c);
            zombie(c, "cancelled");
            break;
        default:
            call_leave_caller(c);
            break;
        }
    }
    for (size_t i = 0; i < k->g->nagents; i++)
        pump_queue(k->g->agents[i]);
}

static void conn_closed(uv_handle_t *h)
{
    os_conn_t *k = h->data;
    if (--k->open > 0)
        return;
    tg_osgw_t *g = k->g;
    if (k->prev != NULL)
        k->prev->next = k->next;
    else
        g->conns = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
    if (k->over && g->nover > 0)
        g->nover--;
    if (k->ls != NULL) {
        k->ls->open--;
        reg_set(g, k->ls->reg, k->ls->open);
    }
    tg_in_free(&k->rd);
    tg_out_free(&k->wr);
    free(k->pipe); /* the accepted block: the pipe is its first member */
    free(k);
    flow(g);
    g_check_idle(g);
}

static void conn_close_now(os_conn_t *k)
{
    if (k->closed)
        return;
    k->closed = true;
    k->ending = true;
    conn_forget_calls(k);
    uv_timer_stop(&k->idle);
    k->wr.stream = NULL;
    uv_close((uv_handle_t *)k->pipe, conn_closed);
    uv_close((uv_handle_t *)&k->idle, conn_closed);
}

static void on_conn_idle(uv_timer_t *t);

/* The denial a refused connection answers with. */
static void refusal_denial(const os_conn_t *k, tg_denial_t *d, char reqid[32])
{
    denial_init(NULL, d, k->rcode, NULL, reqid);
    d->limit = k->rlimit;
    d->scope = k->rscope;
    d->config_path = k->rpath;
    d->observed = k->robserved;
    d->cap = k->rcap;
    d->unit = k->rcode == TG_DENY_CONCURRENCY ? "connections" : NULL;
    d->detail = k->rdetail;
}

/* Stop reading <k>, cancel its calls, and close it once what was written
 * to it is out (bounded by idle_timeout). */
static void conn_end(os_conn_t *k)
{
    if (k->closed)
        return;
    if (!k->ending) {
        k->ending = true;
        uv_read_stop((uv_stream_t *)k->pipe);
        conn_forget_calls(k);
        (void)tg_out_flush(&k->wr);
        /* Bounded: a caller that does not read what is left is dropped. */
        uv_timer_start(&k->idle, on_conn_idle, k->g->cfg->idle_timeout_ms, 0);
    }
    if (k->wr.queued_bytes == 0 && k->wr.npieces == 0)
        conn_close_now(k);
}

static void on_conn_idle(uv_timer_t *t)
{
    os_conn_t *k = t->data;
    tg_osgw_t *g = k->g;
    if (k->ending) {
        conn_close_now(k); /* its output did not drain in time */
        return;
    }
    if (k->refused) {
        /* It sent no call to refuse in time: the refusal, with no call_id. */
        tg_denial_t d;
        char reqid[32];
        refusal_denial(k, &d, reqid);
        deny_to(g, k, NULL, NULL, &d);
        conn_end(k);
        g_flush(g);
        return;
    }
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "invalid";
    if (k->over) {
        ev.reason = "caller_not_reading";
        tg_log("a caller on %s did not read its answers for %" PRIu64
               " ms (router.idle_timeout): disconnecting it",
               k->path, g->cfg->idle_timeout_ms);
        emit(g, &ev);
        conn_close_now(k);
    } else {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 "an unfinished frame and no data for %" PRIu64
                 " ms (router.idle_timeout); closing",
                 g->cfg->idle_timeout_ms);
        conn_error(g, k, "protocol.idle_timeout", msg);
        ev.reason = "idle_timeout";
        ev.bytes_in = (int64_t)(k->rd.len - k->rd.pos);
        emit(g, &ev);
        conn_end(k);
    }
    g_flush(g);
}

/* Arm the idle clock while a frame is unfinished (it restarts with every
 * read), or while the output is over its mark (it does not: a caller that
 * sends but never reads is dropped all the same). */
static void conn_idle_arm(os_conn_t *k)
{
    if (k->ending || k->refused)
        return;
    if (k->over) {
        if (!uv_is_active((uv_handle_t *)&k->idle))
            uv_timer_start(&k->idle, on_conn_idle, k->g->cfg->idle_timeout_ms, 0);
    } else if (k->rd.len > k->rd.pos || k->lp.skipping) {
        uv_timer_start(&k->idle, on_conn_idle, k->g->cfg->idle_timeout_ms, 0);
    } else {
        uv_timer_stop(&k->idle);
    }
}

/* A refused connection: its calls are answered with the refusal, then it
 * ends (after the first answer, as an MCP refusal does). */
static void refuse_call(os_conn_t *k, const char *frame, const tg_os_env_t *env)
{
    os_call_t tmp;
    tg_denial_t d;
    char reqid[32];
    memset(&tmp, 0, sizeof(tmp));
    echo_set(&tmp.cid, frame, env->call_id);
    echo_set(&tmp.msg_id, frame, env->id);
    echo_set(&tmp.request_id, frame, env->request_id);
    echo_set(&tmp.correlation_id, frame, env->correlation_id);
    refusal_denial(k, &d, reqid);
    deny_to(k->g, k, &tmp, &tmp.cid, &d);
    tg_audit_ev_t ev;
    char cid[OS_ECHO_MAX];
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "denied";
    ev.code = tg_deny_name(k->rcode);
    ev.limit.type = d.limit;
    ev.limit.scope = d.scope;
    ev.limit.observed = d.observed == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d.observed;
    ev.limit.cap = d.cap == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d.cap;
    ev.call_id = echo_text(&tmp.cid, cid);
    emit(k->g, &ev);
    conn_end(k);
}

static void on_caller_frame(os_conn_t *k, tg_block_t *b, const char *frame, size_t len)
{
    tg_osgw_t *g = k->g;
    tg_os_env_t env;
    reg_set(g, g->gw->reg_frame_in, len);
    if (tg_os_scan(frame, len, &env) < 0) {
        conn_error(g, k, "protocol.invalid_frame",
                   "the frame is not one OpenSentience v1 message (a JSON object with v, type, "
                   "id, ts and payload)");
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "call.denied";
        ev.caller = k->caller;
        ev.status = "invalid";
        ev.reason = "invalid_frame";
        ev.bytes_in = (int64_t)len;
        emit(g, &ev);
        return;
    }
    switch (env.type) {
    case TG_OS_CORE_TOOL_CALL:
        if (k->refused)
            refuse_call(k, frame, &env);
        else
            admit(k, b, frame, len, &env);
        break;
    case TG_OS_CORE_TOOL_CANCEL:
        caller_cancel(k, frame, &env);
        break;
    default:
        conn_error(g, k, "protocol.unsupported_type",
                   "toolgate takes core.tool.call and core.tool.cancel from callers");
        break;
    }
}

/* A header announced more than max_frame_bytes: refused from the header
 * alone (the call_id is never read: the answer carries null). */
static void on_caller_oversize(os_conn_t *k, uint64_t total)
{
    tg_osgw_t *g = k->g;
    tg_denial_t d;
    char reqid[32], detail[96], cap[24];
    denial_init(NULL, &d, TG_DENY_FRAME, NULL, reqid);
    d.limit = "frame";
    d.scope = "instance";
    d.observed = (int64_t)total;
    d.cap = (int64_t)g->cfg->max_frame_bytes;
    d.unit = "bytes";
    d.config_path = g->gw->path_frame;
    tg_unit_fmt_bytes(cap, sizeof(cap), g->cfg->max_frame_bytes);
    snprintf(detail, sizeof(detail), "frame of %" PRIu64 " bytes > %s", total, cap);
    d.detail = detail;
    deny_to(g, k, NULL, NULL, &d);
    reg_set(g, g->gw->reg_frame_in, g->cfg->max_frame_bytes);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "denied";
    ev.code = tg_deny_name(TG_DENY_FRAME);
    ev.reason = k->on_oversize == TG_OVERSIZE_CLOSE ? "oversize_close" : NULL;
    ev.limit.type = "frame";
    ev.limit.scope = "instance";
    ev.limit.observed = (int64_t)total;
    ev.limit.cap = (int64_t)g->cfg->max_frame_bytes;
    ev.bytes_in = (int64_t)total;
    emit(g, &ev);
    if (k->on_oversize == TG_OVERSIZE_CLOSE)
        conn_end(k);
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    os_conn_t *k = h->data;
    (void)suggested;
    tg_in_alloc(&k->rd, buf);
}

/* Is any agent's write queue over the mark? Then callers wait. */
static bool agents_lagging(const tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++) {
        const os_agent_t *ag = g->agents[i];
        uint64_t q = (ag->inst != NULL ? ag->inst->a.p.wr.queued_bytes : 0) + ag->r.queued_frame_bytes;
        if (q > high_mark(g))
            return true;
    }
    return false;
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    os_conn_t *k = s->data;
    tg_osgw_t *g = k->g;
    (void)buf;
    if (n < 0) {
        /* EOF or error: the caller left. */
        conn_end(k);
        g_flush(g);
        return;
    }
    tg_in_commit(&k->rd, (size_t)n);
    while (!k->ending) {
        size_t st = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = k->rd.blk;
        tg_lp_ev_t ev = tg_lenpfx_next(&k->lp, b->data, k->rd.len, &k->rd.pos, &st, &e, &total);
        if (ev == TG_LP_NEED_MORE) {
            if (total > k->rd.hint)
                k->rd.hint = (size_t)total;
            break;
        }
        if (ev == TG_LP_FRAME)
            on_caller_frame(k, b, b->data + st, e - st);
        else if (ev == TG_LP_OVERSIZE)
            on_caller_oversize(k, total);
        else if (ev == TG_LP_INVALID)
            conn_error(g, k, "protocol.invalid_frame", "a zero-length frame holds no message");
        /* TG_LP_SKIPPED: the refused payload has gone by */
    }
    if (!k->ending)
        tg_in_settle(&k->rd);
    if (!k->ending && agents_lagging(g)) {
        uv_read_stop(s);
        k->paused = true;
    }
    conn_idle_arm(k);
    g_flush(g);
}

static void conn_out_drain(tg_out_t *o, void *ctx)
{
    os_conn_t *k = ctx;
    (void)o;
    if (k->ending) {
        conn_end(k);
        return;
    }
    flow(k->g);
    conn_idle_arm(k);
}

static void conn_out_error(tg_out_t *o, void *ctx, int status)
{
    os_conn_t *k = ctx;
    (void)o;
    (void)status;
    /* The caller is gone (EPIPE, reset): as if it had closed. */
    k->ending = true;
    conn_close_now(k);
}

/* ---- flow control ----------------------------------------------------- */

/* caller -> agent: callers are not read while an agent lags; agent ->
 * caller: agents are not read while a caller's write queue is over the
 * mark (and such a caller is dropped after idle_timeout). */
static void flow(tg_osgw_t *g)
{
    uint64_t high = high_mark(g);
    for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
        bool over = k->wr.queued_bytes > high && !k->closed;
        if (over != k->over) {
            k->over = over;
            if (over)
                g->nover++;
            else if (g->nover > 0)
                g->nover--;
            conn_idle_arm(k);
        }
    }
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        os_inst_t *in = ag->inst;
        reg_set(g, ag->r.reg_wq_agent,
                (in != NULL ? in->a.p.wr.queued_bytes : 0) + ag->r.queued_frame_bytes);
        if (in == NULL || in->a.p.gone || in->a.p.out_eof)
            continue;
        if (g->nover > 0 && !in->paused) {
            uv_read_stop((uv_stream_t *)&in->a.p.pout);
            in->paused = true;
        } else if (g->nover == 0 && in->paused) {
            in->paused = false;
            uv_read_start((uv_stream_t *)&in->a.p.pout, agent_alloc, agent_read);
        }
    }
}

static void g_flush(tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++) {
        os_inst_t *in = g->agents[i]->inst;
        if (in != NULL && !in->a.p.gone)
            (void)tg_out_flush(&in->a.p.wr);
        else if (in != NULL)
            tg_out_discard(&in->a.p.wr);
    }
    uint64_t most = 0;
    for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
        if (k->closed)
            tg_out_discard(&k->wr);
        else if (k->wr.npieces > 0)
            (void)tg_out_flush(&k->wr);
        if (k->wr.queued_bytes > most)
            most = k->wr.queued_bytes;
        if (k->ending && !k->closed && k->wr.queued_bytes == 0 && k->wr.npieces == 0)
            conn_close_now(k);
    }
    reg_set(g, g->gw->reg_wq_caller, most);
    flow(g);
    if (!agents_lagging(g)) {
        for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
            if (k->paused && !k->ending) {
                k->paused = false;
                uv_read_start((uv_stream_t *)k->pipe, conn_alloc, conn_read);
            }
        }
    }
}

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
        send_built(&in->a.p.wr, buf, n);
        tg_log("agent '%s' refused at agent.hello: %s; stopping the instance", aname(ag), msg);
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
    send_built(&in->a.p.wr, buf, n);
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
        send_built(&in->a.p.wr, buf, len);
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
        if (!tool_registered(ag, tool, tlen)) {
            char *copy = ag->nreg < OS_TOOLS_MAX ? strndup(tool, tlen) : NULL;
            char **grown =
                copy != NULL ? realloc(ag->reg, (ag->nreg + 1) * sizeof(*ag->reg)) : NULL;
            if (grown == NULL) {
                free(copy);
                r->code = "tool.too_many";
                r->message = "this agent registered as many tools as toolgate keeps (1024)";
                nrej++;
                continue;
            }
            ag->reg = grown;
            ag->reg[ag->nreg++] = copy;
        }
        regd[nreg++] = tg_os_raw(frame, tid);
    }
    long len = tg_os_enc_tools_registered(buf + TG_LENPFX_HDR, cap, &h, regd, nreg, rej, nrej);
    send_built(&in->a.p.wr, buf, len);
    free(regd);
    free(rej);
    free(buf);
    if (nrej > 0)
        tg_log("agent '%s': %zu of %zu tools refused at registration (see core.tools.registered)",
               aname(ag), nrej, n);
    ag->registered = true;
    if (ag->st == A_STARTING) {
        set_state(ag, A_READY);
        tg_log("agent '%s' ready: %zu tools registered", aname(ag), ag->nreg);
    }
    pump_queue(ag);
}

static void on_heartbeat(os_agent_t *ag)
{
    uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->os.heartbeat_timeout_ms, 0);
    if (ag->st != A_UNHEALTHY)
        return;
    set_state(ag, ag->registered ? A_READY : A_STARTING);
    tg_log("agent '%s' recovered: heartbeats resumed", aname(ag));
    agent_event(ag, "agent.unhealthy", "recovered", "heartbeat_resumed");
    pump_queue(ag);
}

/* Forward frame [frame, frame+len) of block <b> to <c>'s caller with the
 * caller's call_id in place of the agent-side one at <span>. */
static void to_caller(os_call_t *c, tg_block_t *b, const char *frame, size_t len, tg_jspan_t span)
{
    os_conn_t *k = c->conn;
    tg_os_splice_t sp;
    if (!conn_writable(k) || tg_os_splice_plan(len, span, c->cid.len, &sp) < 0)
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
    os_call_t *c = call_by_agent_id(ag, frame, env->call_id);
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
            idem_store(c, frame, len, env->call_id, env->status == TG_OS_ST_SUCCEEDED);
        audit_call(c, "call.completed", status, NULL, NULL, NULL);
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
    call_release(c);
}

static void on_stream(os_agent_t *ag, tg_block_t *b, const char *frame, size_t len,
                      const tg_os_env_t *env)
{
    os_call_t *c = call_by_agent_id(ag, frame, env->call_id);
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

static void agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    os_inst_t *in = h->data;
    (void)suggested;
    tg_in_alloc(&in->a.p.rd, buf);
}


static void agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    os_inst_t *in = s->data;
    os_agent_t *ag = in->ag;
    (void)buf;
    if (n < 0) {
        uv_read_stop(s);
        tg_ainst_out_eof(&in->a);
        g_flush(ag->g);
        return;
    }
    tg_in_commit(&in->a.p.rd, (size_t)n);
    while (ag->inst == in && !in->a.p.gone) {
        size_t st = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = in->a.p.rd.blk;
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
            tg_log("agent '%s' sent a %" PRIu64 "-byte frame over max_frame_bytes (%" PRIu64
                   "; raise %s)%s",
                   aname(ag), total, ag->g->cfg->max_frame_bytes, ag->g->gw->path_frame,
                   ag->r.acfg->os.on_oversize == TG_OVERSIZE_CLOSE ? ": restarting it" : ": skipped");
            if (ag->r.acfg->os.on_oversize == TG_OVERSIZE_CLOSE) {
                inst_kill(ag, SIGKILL, "frame_too_large");
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
    g_flush(ag->g);
}

/* ---- agent process ---------------------------------------------------- */

static void inst_closed(tg_ainst_t *a)
{
    os_inst_t *in = (os_inst_t *)a;
    tg_osgw_t *g = in->ag->g;
    free(in);
    g_check_idle(g);
}

/* The instance is gone: every call it had is answered, and the queued
 * ones too unless a reload is switching to a new instance. */
static void fail_calls(os_agent_t *ag, const os_inst_t *in)
{
    tg_osgw_t *g = ag->g;
    tg_denial_t d;
    char reqid[32], detail[160], path[TG_NAME_MAX + 64];
    /* A reload's switch keeps the queued calls for the new instance. */
    bool keep_queued = ag->switching && !g->stopping;
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = call_at(ag, i);
        /* Calls waiting for the store never reached this instance: the
         * answer finds the agent as it is then. */
        if (c->cc.state == TG_CALL_IDLE || c->cc.state == TG_CALL_RATE || c->cc.state == TG_CALL_SLOT ||
            (c->cc.state == TG_CALL_QUEUED && keep_queued))
            continue;
        if (c->cc.state == TG_CALL_INFLIGHT && in->a.p.watch.verdict.kind != TG_VERDICT_OK) {
            const tg_verdict_t *v = &in->a.p.watch.verdict;
            denial_init(ag, &d, TG_DENY_RESOURCE, c, reqid);
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
            deny_call(c, &d, "call.denied", "killed");
        } else if (c->cc.state == TG_CALL_INFLIGHT || c->cc.state == TG_CALL_QUEUED) {
            bool stopping = g->stopping && c->cc.state == TG_CALL_QUEUED;
            denial_init(ag, &d, stopping ? TG_DENY_SHUTTING_DOWN : TG_DENY_UNAVAILABLE, c, reqid);
            d.limit = stopping ? "shutdown" : "agent";
            if (!stopping)
                d.retry_after_ms = (int64_t)ag->r.acfg->backoff_initial_ms;
            if (stopping)
                snprintf(detail, sizeof(detail), "toolgate is shutting down");
            else if (in->a.p.term_signal != 0)
                snprintf(detail, sizeof(detail), "agent %s by signal %d %s",
                         in->a.p.killed ? "was killed" : "died", in->a.p.term_signal,
                         c->cc.state == TG_CALL_QUEUED ? "before the call ran" : "while the call ran");
            else
                snprintf(detail, sizeof(detail), "agent exited with status %" PRId64 " %s",
                         in->a.p.exit_status,
                         c->cc.state == TG_CALL_QUEUED ? "before the call ran" : "while the call ran");
            d.detail = detail;
            deny_call(c, &d, "call.denied",
                      c->cc.state == TG_CALL_QUEUED ? "queued"
                      : in->a.p.killed         ? "killed"
                                           : "agent_exited");
        } else if (c->cc.state == TG_CALL_CANCELLING) {
            answer(g, c->conn, c, &c->cid, "canceled", NULL, NULL, false);
        }
        if (c->cc.state == TG_CALL_QUEUED)
            tg_route_unqueue(&c->ag->r, &c->cc);
        else
            release_slots(c);
        call_free(c);
    }
    update_conc_regs(ag, NULL);
}

static bool crash_loop(const os_agent_t *ag, uint64_t now, uint32_t *recent)
{
    *recent = tg_aproc_recent(ag->restart_at, ag->nrestarts, now, ag->r.acfg->restart_window_ms);
    return *recent >= ag->r.acfg->max_restarts;
}

static void on_restart_timer(uv_timer_t *t);

/* The instance is down (it exited, or could not be started): restart it
 * with backoff per the agent's policy, or leave it down. */
static void after_exit(os_agent_t *ag, bool failed, int64_t status)
{
    tg_osgw_t *g = ag->g;
    ag->last_failed = failed;
    if (ag->switching && !g->stopping) {
        switch_done(ag); /* a reload stopped it: no restart policy applies */
        return;
    }
    if (g->stopping || ag->phase != P_RUN) {
        set_state(ag, A_DOWN);
        ag->phase = P_DONE;
        g_check_idle(g);
        return;
    }
    tg_restart_policy_t pol = ag->r.acfg->restart_policy;
    bool on_demand = ag->r.acfg->start == TG_START_ON_DEMAND;
    if (pol == TG_RESTART_NO || (pol == TG_RESTART_ON_FAILURE && !failed)) {
        tg_log("agent '%s' %s (status %" PRId64 "); restart policy '%s': %s", aname(ag),
               failed ? "failed" : "exited", status, pol == TG_RESTART_NO ? "no" : "on-failure",
               on_demand ? "the next call starts it" : "not restarted");
        set_state(ag, on_demand ? A_DOWN : A_FAILED);
        return;
    }
    uint64_t now = now_ms(g);
    uint32_t recent = 0;
    if (crash_loop(ag, now, &recent)) {
        tg_aproc_log_give_up(ag->r.acfg, recent);
        set_state(ag, on_demand ? A_DOWN : A_FAILED);
        return;
    }
    uint64_t backoff = tg_aproc_backoff(ag->r.acfg, recent);
    tg_aproc_restart_note(ag->restart_at, &ag->nrestarts, now);
    tg_audit_ev_t ev;
    tg_aproc_ev_restarting(&ev, aname(ag), recent + 1, backoff);
    emit(g, &ev);
    if (g->gw->metrics_ok)
        tg_metrics_agent_restarted(&g->gw->metrics, ag->r.idx);
    tg_log("agent '%s' %s; restarting in %" PRIu64 " ms (attempt %u of %u)", aname(ag),
           failed ? "failed" : "exited", backoff, recent + 1, ag->r.acfg->max_restarts);
    set_state(ag, A_BACKOFF);
    uv_timer_start(&ag->restart_timer, on_restart_timer, backoff, 0);
}

static void on_restart_timer(uv_timer_t *t)
{
    os_agent_t *ag = t->data;
    if (ag->g->stopping)
        return;
    /* A restart that cannot even start counts like a crash. */
    if (agent_spawn(ag) < 0)
        after_exit(ag, true, 127);
    g_flush(ag->g);
}

/* The instance is gone (agent.exited written, the instance closing):
 * its calls are answered, then the restart policy applies. */
static void inst_gone(tg_ainst_t *a)
{
    os_inst_t *in = (os_inst_t *)a;
    os_agent_t *ag = in->ag;
    uv_timer_stop(&ag->hb_timer);
    if (ag->inst == in)
        ag->inst = NULL;
    explicit_bzero(ag->token, sizeof(ag->token));
    ag->hello_ok = ag->registered = false;
    for (size_t i = 0; i < ag->nreg; i++)
        free(ag->reg[i]);
    ag->nreg = 0;
    set_state(ag, A_DOWN);
    fail_calls(ag, in);
    after_exit(ag, tg_ainst_failed(a), tg_ainst_status(a));
}

static void agent_out_drain(tg_out_t *o, void *ctx)
{
    os_agent_t *ag = ctx;
    (void)o;
    g_flush(ag->g); /* callers paused for this agent may read again */
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

static void flush_owner(void *owner)
{
    g_flush(((os_agent_t *)owner)->g);
}

static const tg_ainst_ops_t inst_ops = {
    .out_alloc = agent_alloc,
    .out_read = agent_read,
    .out_drain = agent_out_drain,
    .gone = inst_gone,
    .closed = inst_closed,
    .flush = flush_owner,
};

/* Start the agent's instance: the pre-flight, containment through the
 * exec shim, a fresh session token in its environment. 0, or a negative
 * errno after logging (the caller applies the restart policy). */
static int agent_spawn(os_agent_t *ag)
{
    tg_osgw_t *g = ag->g;
    if (ag->inst != NULL)
        return 0;
    if (ag->st == A_DOWN && ag->last_failed) {
        /* An on-demand start after a failure counts as a restart. */
        tg_aproc_restart_note(ag->restart_at, &ag->nrestarts, now_ms(g));
    }
    int rc = new_token(ag);
    if (rc < 0) {
        tg_log("cannot start agent '%s': no random bytes for its session token: %s", aname(ag),
               strerror(-rc));
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
                            .attempt = ag->nrestarts};
    rc = tg_ainst_spawn(&in->a, &how);
    if (rc < 0) {
        explicit_bzero(ag->token, sizeof(ag->token));
        return rc;
    }
    ag->inst = in;
    ag->starts++;
    ag->hello_ok = false;
    set_state(ag, A_STARTING);
    /* The hello deadline. */
    uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->os.heartbeat_timeout_ms, 0);
    flow(g);
    return 0;
}

static void inst_kill(os_agent_t *ag, int sig, const char *reason)
{
    if (ag->inst != NULL)
        tg_ainst_kill(&ag->inst->a, sig, reason);
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
        inst_kill(ag, SIGKILL, "hello_refused");
    } else if (!ag->hello_ok) {
        tg_log("agent '%s' sent no agent.hello within %" PRIu64 " ms (raise %s): killing it",
               aname(ag), ag->r.acfg->os.heartbeat_timeout_ms, ag->path_hb);
        agent_event(ag, "agent.unhealthy", "unhealthy", "hello_timeout");
        inst_kill(ag, SIGKILL, "hello_timeout");
    } else if (ag->st != A_UNHEALTHY) {
        tg_log("agent '%s' missed its heartbeats for %" PRIu64
               " ms: unhealthy, calls refused until it recovers",
               aname(ag), ag->r.acfg->os.heartbeat_timeout_ms);
        set_state(ag, A_UNHEALTHY);
        agent_event(ag, "agent.unhealthy", "unhealthy", "heartbeat_missed");
        uv_timer_start(&ag->hb_timer, on_hb_timer, ag->r.acfg->kill_grace_ms, 0);
    } else {
        tg_log("agent '%s' still sent no heartbeat %" PRIu64 " ms later: killing it (raise %s)",
               aname(ag), ag->r.acfg->kill_grace_ms, ag->r.path_grace);
        inst_kill(ag, SIGKILL, "heartbeat");
    }
    g_flush(ag->g);
}

/* ---- shutdown --------------------------------------------------------- */

static void on_phase_timer(uv_timer_t *t);

/* One step of stopping the instance (shutdown, or a reload's switch):
 * stdin closed, then SIGTERM, then SIGKILL, kill_grace_period apart. */
static void stop_step(os_agent_t *ag)
{
    os_inst_t *in = ag->inst;
    uint64_t grace = ag->r.acfg->kill_grace_ms;
    const char *why = ag->switching ? "reload" : "shutdown";
    if (in == NULL || in->a.p.gone) {
        if (ag->switching && !ag->g->stopping) {
            switch_done(ag);
            return;
        }
        ag->phase = P_DONE;
        g_check_idle(ag->g);
        return;
    }
    switch (ag->phase) {
    case P_DRAIN:
        /* The calls in flight had their chance: close the agent's stdin. */
        ag->phase = P_STOP_STDIN;
        tg_ainst_close_stdin(&in->a);
        break;
    case P_STOP_STDIN:
        ag->phase = P_STOP_TERM;
        inst_kill(ag, SIGTERM, why);
        break;
    case P_STOP_TERM:
        ag->phase = P_STOP_KILL;
        tg_log("agent '%s' ignored SIGTERM for %" PRIu64 " ms: SIGKILL", aname(ag), grace);
        inst_kill(ag, SIGKILL, why);
        break;
    default:
        return;
    }
    uv_timer_start(&ag->phase_timer, on_phase_timer, grace, 0);
}

static void on_phase_timer(uv_timer_t *t)
{
    os_agent_t *ag = t->data;
    stop_step(ag);
    g_flush(ag->g);
}

/* Draining done? A shutdown waits for every call (or kill_grace_period);
 * a reload's switch for the calls the old instance has (in flight,
 * cancelling, zombies; each bounded by its deadline or kill_grace_period)
 * and for those holding slots while the store decides. */
static void agent_check_drained(os_agent_t *ag)
{
    if (ag->phase != P_DRAIN)
        return;
    if (ag->switching ? ag->r.aconc.inflight == 0 : tg_ctab_used(&ag->r.tab) == 0) {
        uv_timer_stop(&ag->phase_timer);
        stop_step(ag);
    }
}

static void agent_stop(os_agent_t *ag)
{
    if (ag->switching) {
        /* The reload's switch becomes the shutdown: the calls in flight
         * now have kill_grace_period, queued ones may still run. */
        ag->switching = false;
        if (ag->phase == P_DRAIN) {
            uv_timer_start(&ag->phase_timer, on_phase_timer, ag->r.acfg->kill_grace_ms, 0);
            pump_queue(ag);
            agent_check_drained(ag);
        }
        return;
    }
    if (ag->phase != P_RUN)
        return;
    ag->phase = P_DRAIN;
    uv_timer_stop(&ag->restart_timer);
    if (ag->inst == NULL) {
        ag->phase = P_DONE;
        if (ag->st == A_BACKOFF)
            set_state(ag, A_DOWN);
        return;
    }
    uv_timer_start(&ag->phase_timer, on_phase_timer, ag->r.acfg->kill_grace_ms, 0);
    agent_check_drained(ag);
}

static void timer_closed(uv_handle_t *h)
{
    tg_osgw_t *g = ((os_agent_t *)h->data)->g;
    g->open_timers--;
    g_check_idle(g);
}

static void call_timer_closed(uv_handle_t *h)
{
    os_call_t *c = h->data;
    c->ag->g->open_timers--;
    g_check_idle(c->ag->g);
}

/* Once every agent is down: callers are told nothing more is coming
 * (their connections end once written), then the gateway's own timers
 * close, then <on_idle> runs. */
static void g_check_idle(tg_osgw_t *g)
{
    if (!g->stopping || g->idle)
        return;
    for (size_t i = 0; i < g->nagents; i++)
        if (g->agents[i]->inst != NULL || g->agents[i]->phase != P_DONE)
            return;
    for (os_conn_t *k = g->conns; k != NULL; k = k->next)
        conn_end(k);
    if (g->conns != NULL)
        return;
    if (!g->closing_timers) {
        g->closing_timers = true;
        for (size_t i = 0; i < g->nagents; i++) {
            os_agent_t *ag = g->agents[i];
            uv_close((uv_handle_t *)&ag->hb_timer, timer_closed);
            uv_close((uv_handle_t *)&ag->restart_timer, timer_closed);
            uv_close((uv_handle_t *)&ag->phase_timer, timer_closed);
            uv_close((uv_handle_t *)&ag->r.fleet_timer, timer_closed);
            if (ag->r.dlt.ready)
                uv_close((uv_handle_t *)&ag->r.dlt.timer, timer_closed);
            for (uint32_t j = 0; j < ag->r.tab.n; j++)
                if (call_at(ag, j)->cc.own.ready)
                    uv_close((uv_handle_t *)&call_at(ag, j)->cc.own.timer, call_timer_closed);
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
}

static int setup_limits(os_agent_t *ag, tg_agent_cfg_t *a, size_t idx)
{
    ag->qcap = a->lim.max_queued_calls;
    int rc = tg_route_setup(&ag->r, ag->g->gw, a, idx, sizeof(os_call_t), slab_need(a), 0);
    if (rc < 0)
        return rc;
    rc = tg_idem_init(&ag->idem_cache, a->os.idempotency_max_bytes, a->os.idempotency_window_ms);
    if (rc < 0)
        return rc;
    register_limits(ag);
    return 0;
}

static void agent_free(os_agent_t *ag)
{
    if (ag == NULL)
        return;
    tg_idem_free(&ag->idem_cache);
    for (size_t i = 0; i < ag->nreg; i++)
        free(ag->reg[i]);
    free(ag->reg);
    tg_route_fini(&ag->r);
    explicit_bzero(ag->token, sizeof(ag->token));
    free(ag);
}

/* ---- reload ----------------------------------------------------------- */

static void restarts_reset(os_agent_t *ag)
{
    ag->nrestarts = 0;
    memset(ag->restart_at, 0, sizeof(ag->restart_at));
    ag->last_failed = false;
}

/* Refuse every queued call of <ag> with agent_unavailable (<why>). */
static void fail_queued(os_agent_t *ag, const char *why)
{
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = call_at(ag, i);
        if (c->cc.state != TG_CALL_QUEUED)
            continue;
        deny_unavailable(c, why);
        tg_route_unqueue(&c->ag->r, &c->cc);
        call_free(c);
    }
    update_conc_regs(ag, NULL);
}

/* The old instance of a reload's switch is gone (or there was none): run
 * the new config, whatever the restart policy says, with its restart
 * count reset; an on_demand agent starts only when calls wait for it. */
static void switch_done(os_agent_t *ag)
{
    ag->switching = false;
    ag->phase = P_RUN;
    uv_timer_stop(&ag->phase_timer);
    uv_timer_stop(&ag->restart_timer);
    restarts_reset(ag);
    set_state(ag, A_DOWN);
    bool start = ag->r.acfg->start == TG_START_EAGER || ag->r.aq.count > 0;
    tg_log("SIGHUP: agent '%s': %s", aname(ag),
           start ? "starting an instance with the reloaded config"
                 : "the next call starts an instance with the reloaded config");
    if (!start)
        return;
    if (agent_spawn(ag) < 0) {
        fail_queued(ag, "agent could not be started with its reloaded config");
        after_exit(ag, true, 127);
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
    if (!ag->switching) {
        ag->switching = true;
        ag->phase = P_DRAIN;
        tg_log("SIGHUP: agent '%s': its command, environment or resources changed: draining "
               "its %u call(s) in flight, then restarting it",
               aname(ag), ag->r.aconc.inflight);
    }
    agent_check_drained(ag);
}

/* ---- public API --------------------------------------------------------- */

tg_osgw_t *tg_osgw_new(tg_gw_t *gw)
{
    tg_osgw_t *g = calloc(1, sizeof(*g));
    tg_config_t *cfg = gw->cfg;
    if (g == NULL)
        return NULL;
    g->gw = gw;
    g->cfg = cfg;
    g->agents = calloc(cfg->nagents ? cfg->nagents : 1, sizeof(*g->agents));
    if (g->agents == NULL) {
        free(g);
        return NULL;
    }
    g->ls = calloc(cfg->nlisten ? cfg->nlisten : 1, sizeof(*g->ls));
    if (g->ls == NULL) {
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
            tg_osgw_free(g);
            return NULL;
        }
        g->agents[g->nagents++] = ag;
        ag->g = g;
        tg_dlt_init(&ag->r.dlt, on_call_deadline, ag);
        if (setup_limits(ag, a, i) < 0) {
            tg_osgw_free(g);
            return NULL;
        }
    }
    /* The timers last, once nothing can fail: memory holding a libuv
     * handle may only be freed after its close callback. */
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        uv_timer_init(gw->loop, &ag->hb_timer);
        uv_timer_init(gw->loop, &ag->restart_timer);
        uv_timer_init(gw->loop, &ag->phase_timer);
        uv_timer_init(gw->loop, &ag->r.fleet_timer);
        ag->r.fleet_timer_ready = true;
        ag->hb_timer.data = ag->restart_timer.data = ag->phase_timer.data = ag;
        ag->r.fleet_timer.data = ag;
        g->open_timers += 4;
    }
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
        if (agent_spawn(ag) < 0)
            after_exit(ag, true, 127);
    }
    g_flush(g);
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
    k->wr.on_drain = conn_out_drain;
    k->wr.on_error = conn_out_error;
    uv_timer_init(g->gw->loop, &k->idle);
    k->idle.data = k;
    k->open = 2;
    k->next = g->conns;
    if (g->conns != NULL)
        g->conns->prev = k;
    g->conns = k;
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
    if (k->refused) {
        /* A refused peer gets idle_timeout to send the call it is refused. */
        uv_timer_start(&k->idle, on_conn_idle, g->cfg->idle_timeout_ms, 0);
    }
    uv_read_start((uv_stream_t *)conn, conn_alloc, conn_read);
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
    g_check_idle(g);
    if (!g->idle)
        g_flush(g);
}

int tg_osgw_reconfigure(tg_osgw_t *g, tg_agent_cfg_t *acfg, bool respawn)
{
    os_agent_t *ag = g != NULL ? agent_by_id(g, acfg->id, strlen(acfg->id)) : NULL;
    if (ag == NULL || acfg->dialect != TG_DIALECT_OPENSENTIENCE)
        return -ENOENT;
    const tg_agent_cfg_t *o = ag->r.acfg;
    tg_store_t *store = NULL, *tool_store = NULL, *cstore = NULL;
    char rate_key[TG_STORE_KEY_MAX + 1], slots_key[TG_STORE_KEY_MAX + 1];
    if (tg_route_stores(g->gw, acfg, &store, rate_key, &tool_store, &cstore, slots_key) < 0)
        return -EINVAL;
    /* The agent's bucket keeps its state when its rate did not change (a
     * shared one lives in the store under the same key either way). */
    tg_gcra_t arate = ag->r.arate;
    if ((!tg_route_same_rate(&o->lim, &acfg->lim) || o->rate_shared != acfg->rate_shared) &&
        tg_gcra_init(&arate, acfg->lim.rate_limit.count, acfg->lim.rate_limit.period_ms,
                     acfg->lim.burst) < 0)
        return -EINVAL;
    tg_adm_tool_t *tools = NULL;
    int rc = tg_route_tools_build(&ag->r, acfg, tool_store, &tools);
    if (rc < 0)
        return rc;
    /* The ring keeps every call queued now, in order, even when the new
     * cap is lower: those wait on, new calls are refused until the queue
     * is under the cap. The slab only grows (its chunks never move). */
    uint32_t ring = acfg->lim.max_queued_calls > ag->r.aq.count ? acfg->lim.max_queued_calls
                                                              : ag->r.aq.count;
    if ((ring > ag->r.aq.cap && tg_waitq_resize(&ag->r.aq, ring) < 0) ||
        tg_ctab_grow(&ag->r.tab, slab_need(acfg)) < 0) {
        free(tools);
        return -ENOMEM;
    }

    /* Nothing fails from here on: the new limits apply as a whole. Live
     * calls find their tool by name in the new config; one that held its
     * tool's slot keeps it where the tool still has a concurrency limit. */
    for (uint32_t i = 0; i < ag->r.tab.n; i++) {
        os_call_t *c = call_at(ag, i);
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
        if (c->deadline_src == DL_TOOL && nt < 0)
            c->deadline_src = DL_AGENT;
        c->cc.tool = nt;
    }
    free(ag->r.tools);
    ag->r.tools = tools;
    ag->r.arate = arate;
    ag->r.aconc.max = acfg->lim.max_concurrent_calls; /* inflight calls keep their slots */
    ag->qcap = acfg->lim.max_queued_calls;
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
        switch_start(ag);
    /* Raised caps may let queued calls run now. */
    pump_queue(ag);
    update_conc_regs(ag, NULL);
    g_flush(g);
    return 0;
}

bool tg_osgw_idle(const tg_osgw_t *g)
{
    return g == NULL || g->idle;
}

void tg_osgw_kill(tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++)
        inst_kill(g->agents[i], SIGKILL, "interrupted");
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
