/* The OpenSentience engine's private header: its types, its small helpers
 * (inline) and the functions its three files share (os_gw.c: calls,
 * answers and admission; os_conn.c: caller connections and flow control;
 * os_agent.c: agent frames, the instance, shutdown, setup, reload and the
 * public API). Included by those three only. See os_gw.h. */
#ifndef TG_ROUTER_OS_GW_IMPL_H
#define TG_ROUTER_OS_GW_IMPL_H

#include "router/dialect/opensentience/os_gw.h"

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
#include "router/gateway/contain_cfg.h"
#include "router/call/denial.h"
#include "router/call/dltimer.h"
#include "router/gateway/io.h"
#include "router/codec/idem.h"
#include "router/codec/lenpfx.h"
#include "router/gateway/log.h"
#include "router/gateway/metrics.h"
#include "router/codec/osenv.h"
#include "router/codec/osmsg.h"
#include "router/call/admit.h"
#include "router/call/call.h"
#include "router/call/pipeline.h"
#include "router/agent/pool.h"
#include "router/call/route.h"
#include "router/call/table.h"
#include "router/agent/agent_proc.h"
#include "router/agent/instance.h"
#include "router/agent/restart.h"
#include "router/agent/toolreg.h"

#define OS_ECHO_MAX        130  /* fixed internal bound: an id kept per call (128 bytes + quotes) */
#define OS_TOOLS_MAX       1024 /* fixed internal bound: tools one instance may register */
#define OS_INSTANCES       1    /* fixed: an opensentience agent runs one instance, shared */
#define OS_IDEM_KEY_MAX    256  /* fixed internal bound: bytes of an idempotency_key */
#define OS_MSG_MAX         4096 /* fixed internal bound: one message toolgate writes */
#define OS_REJECT_ECHO_MAX 256  /* fixed internal bound: a refused tool_id echoed back, bytes */
#define OS_REFUSING_MAX    64   /* fixed internal bound: refused connections waiting for a call */
#define OS_TOKEN_BYTES     16        /* the session token: 128 bits */
#define OS_TOKEN_ENV       "OPENSENTIENCE_SESSION_TOKEN"

typedef struct os_agent os_agent_t;
typedef struct os_conn os_conn_t;




/* An id copied from a caller's frame: the raw string span, quotes
 * included (scanned and validated by tg_os_scan); len 0 when absent. */
typedef struct os_echo {
    size_t len; /* first: cleared alone (call_alloc) */
    char buf[OS_ECHO_MAX];
} os_echo_t;

/* One call. Owned by its agent's call table. */
typedef struct os_call {
    tg_callc_t cc; /* first: the admission's view (router/call/call.h) */
    os_agent_t *ag;
    os_conn_t *conn;               /* NULL once the caller left */
    struct os_call *cnext, *cprev; /* the caller's calls */
    uint32_t cid_hash; /* os_cid_hash of cid: a caller's list is searched by it */
    bool rid_assigned; /* request_id is toolgate's (the caller named none) */
    /* Where the frame (cc.qframe) is edited when forwarded: the payload's
     * opening brace, the timeout_ms value and a null request_id (len 0:
     * absent). */
    size_t pay_off, tmo_off, tmo_len, rid_off, rid_len;
    /* ag->starts of the instance its tool was found registered on (0:
     * not checked yet). Registrations only grow while an instance lives,
     * so forwarding to that same instance need not look again. */
    uint32_t reg_seen;
    size_t tool_len;
    size_t idem_len;
    bool has_idem;
    /* Text last: read only up to its lengths, so a new call clears what
     * comes before <cid> and the lengths alone (call_alloc). */
    os_echo_t cid, msg_id, request_id, correlation_id;
    char tool[TG_OS_TOOL_ID_MAX + 1]; /* the tool's name in its agent (after '/') */
    char idem[OS_IDEM_KEY_MAX + 1];
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
    tg_agent_state_t st; /* the one agent state enum (gateway/metrics.h) */
    tg_phase_t phase;
    os_inst_t *inst;
    char token[2 * OS_TOKEN_BYTES + 1]; /* hex; "" when no instance runs */
    bool hello_ok;
    bool registered;          /* its first agent.tools.register was answered */
    uint32_t starts;          /* instances started, for session ids */
    bool last_failed;         /* the last instance failed: an on-demand start counts as a restart */
    uv_timer_t hb_timer;      /* hello deadline, then the heartbeat watch */
    uv_timer_t phase_timer;   /* shutdown steps */
    tg_restarter_t rst;       /* its instance's restarts and backoff (agent/restart.h) */
    /* Its pool (agent/pool.h), binding shared: one place, the agent
     * itself, counted while an instance runs, drained and renewed by a
     * reload that needs a new instance. */
    tg_apool_t pool;
    tg_pool_member_t pm;
    int reg_instances;      /* agent.ID.instances in the registry (-1: none) */
    int reg_restarts;       /* agent.ID.restarts in the registry (-1: none) */
    tg_toolreg_t tools; /* its instance's registered tool names (after '/') */
    int reg_idem;
    char path_hb[256];
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
    uv_timer_t idle; /* a frame not complete within frame_timeout of its first byte, or a
                      * write queue that does not drain within idle_timeout */
    uint64_t frames, idle_frames; /* frames read; frames read when the clock was last armed */
    uint64_t frame_t0; /* loop time the frame clock started (0: it is not running) */
    int open;        /* handles not yet closed */
    bool ending;     /* no more reading: close once the output is written */
    bool closed;     /* uv_close called */
    bool paused;     /* reading stopped: an agent's write queue is full */
    bool over;       /* its write queue is over the high mark (counted in g->nover) */
    bool refused;    /* every call is answered with the refusal, then the connection ends */
    bool half_closed; /* the caller shut down its sending side: it ends once its calls are answered */
    bool held;        /* whole frames wait in rd for room in the audit queue */
    tg_audit_room_t audit_room; /* linked while held */
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
    uint32_t nrefused; /* refused connections open (OS_REFUSING_MAX) */
    uint64_t msg_seq;
    bool stopping, closing_timers, idle;
    int open_timers; /* agent timers not yet closed, all agents */
    void (*on_idle)(void *arg);
    void *on_idle_arg;
};

/* ---- shared between the engine's files ---------------------------------- */

void osg_send_built(tg_out_t *o, char *buf, long n);
bool osg_conn_writable(const os_conn_t *c);
os_call_t *osg_call_at(const os_agent_t *ag, uint32_t i);
uint32_t osg_slab_need(const tg_agent_cfg_t *a);
void osg_call_free(os_call_t *c);
os_call_t *osg_call_by_agent_id(os_agent_t *ag, const char *frame, tg_jspan_t s);
void osg_denial_init(const os_agent_t *ag, tg_denial_t *d, tg_deny_code_t code,
                        const os_call_t *c, char reqid[32]);
void osg_deny_to(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                    tg_denial_t *d);
void osg_answer(tg_osgw_t *g, os_conn_t *k, const os_call_t *c, const os_echo_t *cid,
                   const char *status, const char *code, const char *message, bool retryable);
void osg_conn_error(tg_osgw_t *g, os_conn_t *k, const char *code, const char *message);
void osg_refusal_denial(const os_conn_t *k, tg_denial_t *d, char reqid[32]);
void osg_audit_call(os_call_t *c, const char *event, const char *status, const tg_denial_t *d,
                       const char *stage, const char *reason);
void osg_deny_call(os_call_t *c, tg_denial_t *d, const char *event, const char *stage);
void osg_idem_store(os_call_t *c, const char *frame, size_t len, tg_jspan_t cid, bool ok);
bool osg_tool_registered(const os_agent_t *ag, const char *name, size_t len);
os_agent_t *osg_agent_by_id(tg_osgw_t *g, const char *id, size_t len);
void osg_deny_unavailable(os_call_t *c, const char *why);
void osg_admit(os_conn_t *k, tg_block_t *b, const char *frame, size_t len,
                  const tg_os_env_t *env);
const tg_call_ops_t *osg_call_ops(void);
void osg_call_leave_caller(os_call_t *c);
void osg_send_cancel(os_call_t *c, const char *reason);
void osg_zombie(os_call_t *c, const char *stage);
void osg_caller_cancel(os_conn_t *k, const char *frame, const tg_os_env_t *env);
void osg_conn_end(os_conn_t *k);
/* Refuse connection <k> at once (its refusal with no call_id) and end it. */
void osg_refuse_now(tg_osgw_t *g, os_conn_t *k);
void osg_on_conn_idle(uv_timer_t *t);
void osg_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void osg_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
void osg_conn_out_drain(tg_out_t *o, void *ctx);
void osg_conn_out_error(tg_out_t *o, void *ctx, int status);
void osg_flow(tg_osgw_t *g);
void osg_g_flush(tg_osgw_t *g);
void osg_agent_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void osg_agent_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
bool osg_crash_loop(const os_agent_t *ag, uint64_t now, uint32_t *recent);
int osg_agent_spawn(os_agent_t *ag);
void osg_agent_check_drained(os_agent_t *ag);
void osg_g_check_idle(tg_osgw_t *g);

/* ---- small helpers ---------------------------------------------------- */

static inline int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t now_ms(const tg_osgw_t *g)
{
    return uv_now(g->gw->loop);
}

static inline const char *aname(const os_agent_t *ag)
{
    return ag->r.acfg->id;
}

static inline uint64_t high_mark(const tg_osgw_t *g)
{
    return 2 * g->cfg->max_frame_bytes;
}

static inline void emit(tg_osgw_t *g, const tg_audit_ev_t *ev)
{
    if (g->gw->audit != NULL)
        tg_audit_emit(g->gw->audit, ev);
}

/* Audit (and log) a registered limit crossing 80% or re-arming. */
static inline void reg_set(tg_osgw_t *g, int idx, uint64_t current)
{
    tg_registry_update(&g->gw->reg, idx, current);
}

static inline void set_state(os_agent_t *ag, tg_agent_state_t st)
{
    ag->st = st;
    if (ag->g->gw->metrics_ok)
        tg_metrics_agent_state(&ag->g->gw->metrics, ag->r.idx, st,
                               ag->inst != NULL ? ag->inst->a.p.pid : 0);
}

/* A fresh id for a message toolgate writes. */
static inline const char *msg_id(tg_osgw_t *g, char out[32])
{
    char num[24];
    tg_call_id_hex(num, ++g->msg_seq);
    snprintf(out, 32, "tgm-%s", num + 3);
    return out;
}

static inline void echo_set(os_echo_t *e, const char *frame, tg_jspan_t s)
{
    e->len = 0;
    if (s.type == TG_J_STRING && s.len <= sizeof(e->buf)) {
        memcpy(e->buf, frame + s.off, s.len);
        e->len = s.len;
    }
}

/* A hash of the <n> bytes of a call_id span at <p>, so that a caller's
 * calls (64 in flight, say) are told apart without a memcmp each. */
static inline uint32_t os_cid_hash(const char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (; n > 0; n--)
        w = w << 8 | (unsigned char)*p++;
    h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    return (uint32_t)(h ^ h >> 32);
}

static inline tg_os_raw_t echo_raw(const os_echo_t *e)
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
static inline const char *echo_text(const os_echo_t *e, char *out)
{
    if (e->len < 2 || memchr(e->buf, '\\', e->len) != NULL)
        return NULL;
    memcpy(out, e->buf + 1, e->len - 2);
    out[e->len - 2] = '\0';
    return out;
}

#endif
