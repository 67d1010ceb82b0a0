/* The MCP engine's private header: its types, its small helpers (inline)
 * and the functions its three files share (session.c: the call table,
 * output, admission and fleet slots; session_flow.c: caller and agent
 * frames, reading, the instance and flow control; session_life.c:
 * shutdown, setup, the agents' and sessions' API and reload). Included by
 * those three only. See session.h. */
#ifndef TG_ROUTER_SESSION_IMPL_H
#define TG_ROUTER_SESSION_IMPL_H

#include "router/dialect/mcp/session.h"

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
#include "router/codec/envelope.h"
#include "router/gateway/io.h"
#include "router/gateway/contain_cfg.h"
#include "router/gateway/log.h"
#include "router/call/admit.h"
#include "router/call/call.h"
#include "router/call/route.h"
#include "router/call/table.h"
#include "router/agent/agent_proc.h"
#include "router/agent/dialect.h"
#include "router/gateway/refused.h"
#include "router/agent/instance.h"
#include "router/agent/pool.h"
#include "router/agent/restart.h"
#include "router/agent/toolreg.h"
#include "router/call/dltimer.h"
#include "router/call/pipeline.h"
#include "router/dialect/mcp/hub.h"

#define TG_ID_MAX 128          /* fixed internal bound: bytes of a caller's request id */
#define TG_TOOL_NAME_MAX 128   /* fixed internal bound: tool name bytes kept per call */
#define TG_MAX_PASSTHRU 256    /* fixed internal bound: non-call requests awaiting an answer */
#define TG_MCP_TOOLS_MAX 4096  /* fixed internal bound: tool names kept per instance */
/* fixed internal bound: spare call entries, so that a reload can raise
 * max_concurrent_calls/max_queued_calls a little in place (tg_mcp_agent_reconfigure) */
#define TG_RELOAD_SPARE_CALLS 64
#define TG_DENIAL_MAX 2048     /* fixed internal bound: one denial line */
/* A call the shared store turned away asks again after a wait doubling per refusal in
 * a row; a release by this instance lets it ask at once. */

typedef enum { K_FREE = 0, K_CALL, K_PASS, K_REPLAY_INIT, K_PING } call_kind_t;

/* mcp_call_t.b26 (session_b26.c): none; the caller's server/discover;
 * toolgate's initialize of a 2025 agent; a result of a bridged session;
 * B26_LIST + i: a list method's (session_b26.c list_methods[i]). */
enum { B26_NONE = 0, B26_DISCOVER, B26_INIT, B26_RESULT, B26_LIST };

typedef struct mcp_sess mcp_sess_t;
typedef struct tg_mcp_eng tg_mcp_eng_t;

/* One request known to toolgate. Owned by its agent's call table. A
 * tools/call (K_CALL) goes through admission (cc.state); the other kinds
 * stay TG_CALL_IDLE: pass-through requests, a replayed initialize, a
 * ping. */
typedef struct mcp_call {
    tg_callc_t cc; /* first: the admission's view (router/call/call.h) */
    mcp_sess_t *w;
    call_kind_t kind;
    size_t caller_id_len;
    size_t tool_name_len;
    /* K_PING: which zombie it proves alive. */
    uint32_t ping_for;
    uint64_t ping_for_id;
    /* MCP tasks (2025-11-25, session_task.c). A K_CALL sent with
     * params.task (<task_req>) that the agent answered with a
     * CreateTaskResult is a task (<task>): still running, it keeps its
     * slot and deadline until the task reaches a terminal status. <ttl_*>:
     * a params.task.ttl over the call's deadline, cut to it when
     * forwarded. A K_PASS tasks/get, tasks/result or tasks/cancel names
     * its task's entry (<task_of>, <task_of_id>) in <task_op>. */
    bool task_req, task;
    bool tools_list; /* a K_PASS tools/list: its answer fills the instance's tools */
    uint16_t hub_ask; /* a K_PASS its hub asked (ask index + 1): the answer goes to it */
    uint8_t task_op;
    uint32_t task_of;
    uint64_t task_of_id;
    size_t ttl_off, ttl_len;
    uint64_t ttl_new;
    /* Behind a hub (hub.c): the span of the exposed name in the held
     * frame, forwarded as <tool_name> (the agent's own); name_len 0: the
     * frame holds the agent's own name. */
    size_t name_off, name_len;
    /* Behind several agents: a keyed hash of the progress token the agent
     * was given ("tg<leg>.<raw>"), 0: none (hub.c progress_from). */
    uint64_t ptok;
    uint8_t exposed_len; /* <exposed>: the name the caller used behind a hub (0: none) */
    uint8_t b26;         /* B26_*: what the 2025 -> 2026 bridge does with its answer */
    size_t task_id_len;
    /* Not cleared when the entry is reused (call_alloc): the arrays are
     * written with their lengths. */
    char caller_id[TG_ID_MAX];
    char tool_name[TG_TOOL_NAME_MAX + 1];
    char task_id[TG_ID_MAX]; /* the taskId as JSON text, quotes included */
    char exposed[TG_EXPOSE_NAME_MAX + 1];
} mcp_call_t;

/* tasks/... requests a caller may send about its tasks (task_op). */
enum { TG_TASK_OP_NONE = 0, TG_TASK_OP_GET, TG_TASK_OP_RESULT, TG_TASK_OP_CANCEL };

#define TG_TASKS_KEPT 64 /* fixed internal bound: ended tasks a session remembers */

/* A session's ended tasks, newest last (a ring): a caller asks for a
 * task's result after it ended, and toolgate must still know the task is
 * its own, and whether toolgate ended it (then it answers for it).
 * Allocated with the session's first task; freed with the session. */
typedef struct mcp_task_end {
    size_t id_len;
    int fate; /* -1 ended by the agent; else the tg_deny_code_t toolgate ended it with */
    char id[TG_ID_MAX];
} mcp_task_end_t;

typedef struct mcp_tasks {
    uint32_t next;
    mcp_task_end_t e[TG_TASKS_KEPT];
} mcp_tasks_t;

#define CALL_CLEARED offsetof(mcp_call_t, caller_id)

/* One running agent process. Freed when all its handles have closed. */
typedef struct mcp_inst {
    tg_ainst_t a; /* first: its handles' data point here */
    mcp_sess_t *w;
} mcp_inst_t;

/* A configured tool's own limits (tools.NAME). */
typedef tg_adm_tool_t tool_state_t;

/* One configured agent: its limits aggregate over every session that uses
 * it (rate and concurrency are per agent, not per connection), and its call
 * slab holds the calls of all of them, so agent-side ids are unique per
 * agent. Owned by the gateway. */
typedef struct tg_mcp_agent {
    tg_route_t r; /* first: its limits, stores, call table and rows */
    tg_gw_t *gw;
    tg_mcp_eng_t *eng; /* the engine of every MCP agent of the run (engine.c) */
    int reg_restarts, reg_instances; /* -1: not registered (instances: wrap) */
    /* serve: the agent's pool of instances (agent/pool.h), shared with
     * the successors a reload makes; NULL in wrap (one instance). */
    tg_apool_t *pool;
    uint32_t tick_restarts;         /* on_tick scratch: most recent restarts of a session */
    /* Reload (tg_mcp_agent_reconfigure, tg_mcp_agent_successor, tg_mcp_agent_retire):
     * sessions and store answers that still point here, and whether a
     * successor replaced this agent (it is freed once both are 0). */
    uint32_t max_sessions;
    uint32_t nsess;
    bool retired;
    uint32_t closing;           /* call timers still closing after retirement */
    struct tg_mcp_agent *next_retired; /* eng->retired */
    struct tg_mcp_agent *successor;    /* the agent a reload replaced this one with */
    void (*on_free)(void *arg);    /* the runner's, once a retired agent is freed */
    void *on_free_arg;
} tg_mcp_agent_t;

/* One caller and the agent instance serving it (MCP sessions are
 * stateful: one instance per caller). */
struct mcp_sess {
    tg_gw_t *gw;
    tg_mcp_agent_t *ag;
    mcp_sess_t *next, *prev;         /* eng->sessions */
    int open_handles;               /* closed one by one by finish(); freed at 0 */
    uv_pipe_t *conn;                /* serve: the accepted socket (cin == cout) */
    char caller[64];                /* caller name for audit: "stdio" or from callers[] */
    const char *origin;             /* its front for audit: "stdio", "unix", "http" */
    char remote[TG_MCP_SESS_REMOTE_MAX]; /* its peer for audit ("" none) */
    char sdigest[TG_MCP_SESS_DIGEST_MAX]; /* its MCP session's digest for audit ("" none) */
    tg_caller_lim_t *climits;       /* the caller's own limits (serve), or NULL */

    /* caller */
    uv_pipe_t cin_pipe, cout_pipe;
    uv_tty_t cin_tty, cout_tty;
    uv_stream_t *cin, *cout;
    tg_in_t crd;
    tg_out_t cwr;                   /* its own output to the caller */
    tg_out_t *cw;                   /* where it writes to the caller: &cwr, or its hub's */
    bool caller_eof, caller_paused, cout_dead; /* paused: over the queues' bound */
    bool caller_stopped;            /* its reads are stopped (paused, or audit_room) */
    bool held_frames;               /* whole frames wait in crd for room in the audit queue */
    tg_audit_room_t audit_room;     /* linked while paused for the audit queue */
    tg_mcp_head_t over;             /* an over-cap caller frame's members, read as it streams */
    mcp_tasks_t *tasks;             /* ended tasks (session_task.c), or NULL before the first */
    tg_toolreg_t tools;             /* its instance's tools, from the tools/list answers that
                                     * passed (agent/toolreg.h); cleared when it is gone */

    /* agent instance */
    mcp_inst_t *inst;
    tg_agent_state_t astate; /* the one agent state enum (gateway/metrics.h) */
    bool agent_paused;
    tg_mcp_head_t agent_over; /* an over-cap agent frame's members, read as it streams */
    tg_restarter_t rst;       /* its instance's restarts and backoff (agent/restart.h) */
    uint64_t invalid_agent_frames;
    uint64_t unmatched_responses;
    uint64_t dropped_cancels; /* notifications/cancelled naming no live request */
    uint32_t batches_open;    /* caller batches holding requests, sent and not answered */

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

    uv_timer_t phase_timer;
    uv_timer_t idle_timer; /* unix callers: a frame not complete within frame_timeout of
                            * its first byte; any front: a caller not reading its answers
                            * (stuck_armed) */
    bool stuck_armed;
    bool frame_clock;      /* frames of this caller are timed (a unix connection: not wrap's
                            * stdin, nor an http session's socketpair, which http.c times) */
    uint64_t frame_t0;     /* loop time of the first byte of the unfinished frame */
    tg_phase_t phase;
    bool finished;

    /* serve: the instance starts with the caller's initialize (issue 12
     * item 4). life_timer is the handshake deadline until then; after a
     * reload replaced the session's agent, the drain deadline (item 29). */
    uv_timer_t life_timer;
    uint64_t life_ms;    /* the deadline life_timer was armed with */
    bool awaiting_init;  /* no instance yet: only initialize and ping are taken */
    tg_pool_member_t pm; /* its place in its agent's pool (serve; wrap: in none): counted
                          * against max_instances, evicted to make room */
    uint64_t last_frame_ms; /* loop time of the caller's last frame (or of the session's start) */
    int listener;        /* serve, unix: its router.listen index (connections), else -1 */
    /* Several agents behind one front (hub.c): the hub of which this
     * session is leg <leg>, or NULL. */
    struct mcp_hub *hub;
    uint32_t leg;
    uint16_t hub_tag;    /* the hub's ask the next pass-through request answers (+1) */
    /* The hub's tools/call being dispatched: the agent's own name for the
     * exposed one at env->tool_name (NUL-terminated, nothing to escape),
     * or NULL. Set only around that one dispatch. */
    const char *hub_own;
    size_t hub_own_len;
    const char *hub_exposed; /* and the name the caller used (audit), NUL-terminated */
    size_t hub_exposed_len;
    bool leg_failed;     /* its instance could not start: the hub leaves its tools out */
    bool hub_dirty;      /* a frame was dispatched to it since its hub last flushed the legs */
    /* The 2025 -> 2026 bridge (session_b26.c): on once toolgate initialized
     * a 2025 agent for a 2026 caller; its InitializeResult (owned). */
    bool b26_on;
    json_t *b26_init;
    uint64_t dropped_progress; /* progress for no call of this leg's (hub.c progress_from) */
};

/* One Unix listener of the MCP dialect, as the engine counts it. */
typedef struct mcp_listener {
    uint32_t nconn;          /* sessions open on it (router.listen[].max_connections) */
    int reg;                 /* listen.<i>.connections in the registry (-1: none) */
    tg_refused_gate_t gate;  /* its refusals' audit bound */
} mcp_listener_t;

/* The MCP engine of a run (engine.c): every MCP agent of the config, its
 * sessions, and the agents a reload retired. Owned by the runner through
 * the dialect ops table. */
struct tg_mcp_eng {
    tg_gw_t *gw;
    tg_dialect_env_t env;
    tg_mcp_agent_t **agents;  /* per config index; NULL: another dialect's */
    size_t nagents;
    mcp_listener_t *ls;       /* per router.listen index */
    size_t nls;
    mcp_sess_t *sessions;     /* live sessions, linked through them */
    uint32_t nsessions;
    tg_mcp_agent_t *retired;  /* agents replaced by a reload, freed once unused */
    size_t refusing;          /* refused connections still open */
    bool stopping, done;
    int exit_code;            /* wrap: the process status once the session ended */
    /* The config's policy (who may call what), built by the engine; NULL:
     * everything allowed. Hubs borrow it. */
    tg_policy_t *policy;
};

/* engine.c: session <w> is gone (freed next): its listener's count, and
 * the engine's end once the last is gone after shutdown (or wrap's one). */
void mcp_eng_session_gone(tg_mcp_eng_t *e, mcp_sess_t *w);

/* ---- shared between the engine's files ---------------------------------- */

mcp_call_t *mcp_call_at(const tg_mcp_agent_t *ag, uint32_t i);
mcp_call_t *mcp_call_alloc(mcp_sess_t *w, call_kind_t kind);
void mcp_call_free(mcp_call_t *c);
const tg_call_ops_t *mcp_call_ops(void);
mcp_call_t *mcp_call_by_agent_id(mcp_sess_t *w, uint64_t id);
uint32_t mcp_busy_calls(const mcp_sess_t *w);
void mcp_deny(mcp_sess_t *w, const char *id, size_t id_len, const tg_denial_t *d);
void mcp_rpc_error(mcp_sess_t *w, const char *id, size_t id_len, int code, const char *msg);
void mcp_denial_init(mcp_sess_t *w, tg_denial_t *d, tg_deny_code_t code, const mcp_call_t *c,
                        char *reqid, size_t reqid_cap);
void mcp_caller_id_text(const char *id, size_t len, char *out);
void mcp_audit_call(mcp_sess_t *w, const mcp_call_t *c, const char *event, const char *status,
                       const tg_denial_t *d, const char *stage);
void mcp_deny_call(mcp_sess_t *w, mcp_call_t *c, const tg_denial_t *d, const char *event,
                      const char *stage);
void mcp_to_agent_spliced(mcp_sess_t *w, tg_block_t *b, const char *p, size_t len,
                             size_t id_off, size_t id_len, uint64_t agent_id);
bool mcp_agent_writable(const mcp_sess_t *w);
void mcp_admit_call(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env);
void mcp_caller_cancel(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env);
/* Serve: the caller of <w> closed its connection (not a half-close) or it
 * failed: every call of it is cancelled, at the agent for those in flight,
 * audited call.cancelled with reason caller_gone. */
void mcp_caller_gone(mcp_sess_t *w);
void mcp_caller_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void mcp_caller_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
int mcp_agent_spawn(mcp_sess_t *w);
/* What a session's restarter asks of it (session_flow.c). */
extern const tg_restarter_ops_t mcp_restart_ops;
void mcp_flush_all(mcp_sess_t *w);
void mcp_caller_out_drain(tg_out_t *o, void *ctx);
void mcp_caller_out_error(tg_out_t *o, void *ctx, int status);
void mcp_check_drained(mcp_sess_t *w);
void mcp_begin_shutdown(mcp_sess_t *w, const char *why);
void mcp_sess_release(mcp_sess_t *w);
void mcp_finish(mcp_sess_t *w);
uint32_t mcp_recent_restarts(const mcp_sess_t *w, uint64_t now);
void mcp_agent_maybe_reap(tg_mcp_agent_t *ag);
bool mcp_before_init(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env);

/* MCP tasks (session_task.c; the rules are at its top). */
typedef void (*mcp_to_caller_fn)(mcp_sess_t *w, tg_block_t *b, const char *p, size_t len,
                                 size_t id_off, size_t id_len, const char *cid, size_t cid_len);
/* At admission: a task-augmented call is marked, its ttl cut to the
 * deadline (set before). */
void mcp_task_admit(mcp_sess_t *w, mcp_call_t *c, const char *frame, const tg_mcp_env_t *env);
/* Forward call <c>'s held frame with its id and ttl spliced. */
void mcp_forward_edited(mcp_sess_t *w, mcp_call_t *c);
/* The agent answered the in-flight call <c>: true when it was handled here
 * (a CreateTaskResult relayed, or an answer to a task already created). */
bool mcp_task_on_response(mcp_sess_t *w, mcp_call_t *c, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env, mcp_to_caller_fn to_caller);
/* TG_TASK_OP_* of a request's method span. */
int mcp_task_op_of(const char *frame, tg_jspan_t method);
bool mcp_task_known(mcp_sess_t *w, const char *id, size_t len);
uint8_t mcp_b26_kind(const mcp_sess_t *w, const char *frame, tg_jspan_t method);
bool mcp_b26_answer(mcp_sess_t *w, const mcp_call_t *c, const char *frame, size_t len,
                    const tg_mcp_env_t *env);
bool mcp_b26_result(mcp_sess_t *w, uint8_t kind, const char *frame, size_t len,
                    const tg_mcp_env_t *env, const char *cid, size_t cid_len);
bool mcp_b26_agent_request(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env);
/* A caller's tasks/get|result|cancel: true when answered here (refused,
 * or the denial of a task toolgate ended); false to forward it, with
 * <*task> the live task it names (or NULL). */
bool mcp_task_caller_request(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env,
                             mcp_call_t **task);
/* The agent answered tasks/... request <p> about a live task. */
void mcp_task_on_pass_answer(mcp_sess_t *w, mcp_call_t *p, const char *frame, size_t len,
                             const tg_mcp_env_t *env);
/* notifications/tasks/status from the agent. */
void mcp_task_on_status(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env);
/* Toolgate denies call <c> (<d>): true when it is a task, whose original
 * request was answered already (its waiting tasks/... requests get <d>). */
bool mcp_task_denied(mcp_sess_t *w, mcp_call_t *c, const tg_denial_t *d);
/* Past its deadline, or its caller gone: true when <c> is a task
 * (tasks/cancel sent, its answer freeing the zombie's slot as a pong does). */
bool mcp_task_cancel_at_agent(mcp_sess_t *w, mcp_call_t *c);
void mcp_tasks_free(mcp_sess_t *w);

/* A caller frame (scanned; <len> with its newline) handed on as the
 * session's own caller sent it: the hub's legs take theirs here. */
void mcp_sess_dispatch(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                       const tg_mcp_env_t *env);
/* Whether <w> holds a live request of its caller with id <id>. */
bool mcp_sess_holds(const mcp_sess_t *w, const char *id, size_t len);
/* A leg of <lead>'s hub for agent <ag>: a session without a caller of
 * its own (serve: in its agent's pool). NULL when out of memory. */
mcp_sess_t *mcp_sess_leg(mcp_sess_t *lead, tg_mcp_agent_t *ag);
/* Close the caller handles of hub lead <w> (its hub ends). */
void mcp_sess_close_caller(mcp_sess_t *w);

/* hub.c (see hub.h). */
mcp_hub_t *mcp_hub_new(tg_mcp_eng_t *e, mcp_sess_t *lead, tg_mcp_agent_t **ags, size_t n,
                       const tg_peer_t *peer, bool verbatim);
int mcp_hub_start(mcp_hub_t *h);
void mcp_hub_frame(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                   const tg_mcp_env_t *env);
void mcp_hub_answer(mcp_sess_t *w, uint32_t idx, const char *frame, size_t len,
                    const tg_mcp_env_t *env);
bool mcp_hub_from_agent(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                        const tg_mcp_env_t *env);
void mcp_hub_leg_down(mcp_sess_t *w);
void mcp_hub_shutdown(mcp_hub_t *h, const char *why, bool caller_gone);
void mcp_hub_maybe_end(mcp_hub_t *h);
void mcp_hub_released(mcp_sess_t *w);
void mcp_hub_flush_legs(mcp_hub_t *h);
void mcp_flush_agent(mcp_sess_t *w);
const char *mcp_hub_exposed(const mcp_sess_t *w, const char *tool, char *buf, size_t cap);
uint64_t mcp_hub_ptok(const mcp_sess_t *w, const char *frame, tg_jspan_t tok);
void mcp_hub_policy_changed(tg_mcp_eng_t *e);

/* ---- small helpers ---------------------------------------------------- */

/* Whether nobody reads the caller's output any more (a hub's: every leg's). */
static inline bool mcp_cdead(const mcp_sess_t *w)
{
    return w->hub != NULL ? w->hub->cout_dead : w->cout_dead;
}

static inline void mcp_set_cdead(mcp_sess_t *w)
{
    w->cout_dead = true;
    if (w->hub != NULL)
        w->hub->cout_dead = true;
}

static inline int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t now_ms(mcp_sess_t *w)
{
    return uv_now(w->gw->loop);
}

static inline const char *agent_name(mcp_sess_t *w)
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

static inline void request_id_of(const mcp_call_t *c, char *buf, size_t cap)
{
    if (cap < 24)
        return;
    tg_call_id_hex(buf, c->cc.id);
}

/* Every event of a session and of its agent instance names where its
 * caller is (front, caller, remote, session digest), but router.* events:
 * in wrap the session is the router, and those events are about it. */
static inline void stamp(const mcp_sess_t *w, tg_audit_ev_t *ev)
{
    if (strncmp(ev->event, "router.", 7) == 0)
        return;
    ev->front = w->origin;
    if (ev->caller == NULL)
        ev->caller = w->caller;
    if (w->remote[0] != '\0')
        ev->remote = w->remote;
    if (w->sdigest[0] != '\0')
        ev->session = w->sdigest;
}

static inline void emit(mcp_sess_t *w, tg_audit_ev_t *ev)
{
    if (w->gw->audit == NULL)
        return;
    stamp(w, ev);
    char exposed[TG_EXPOSE_NAME_MAX + 1];
    if (w->hub != NULL && ev->tool != NULL && ev->exposed_tool == NULL)
        ev->exposed_tool = mcp_hub_exposed(w, ev->tool, exposed, sizeof(exposed));
    tg_audit_emit(w->gw->audit, ev);
}

/* A call.denied event of <w>, from denial <d> (NULL: the caller fills
 * the limit fields). */
static inline void denied_ev(mcp_sess_t *w, tg_audit_ev_t *ev, const tg_denial_t *d)
{
    tg_audit_ev_init(ev);
    if (d != NULL)
        tg_adm_audit_denial(ev, d);
    ev->event = "call.denied";
    ev->agent = agent_name(w);
    ev->caller = w->caller;
    ev->status = "denied";
}

static inline void reg_set(mcp_sess_t *w, int idx, uint64_t current)
{
    tg_registry_update(&w->gw->reg, idx, current);
}

/* The agent's concurrency and queue usage, and tool <tool>'s (none when
 * -1), into the metrics and the registry. */
static inline void update_conc_regs(mcp_sess_t *w, int tool)
{
    tg_route_regs(&w->ag->r, tool);
}

#endif
