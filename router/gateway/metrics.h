/* metrics: the router's counters, gauges, call-duration histogram and the
 * ring of latest denials (tg_metrics_t), and the pure encoders that turn
 * them and the limit registry into what the admin endpoint serves:
 * Prometheus text exposition 0.0.4 (/metrics) and JSON (/limits, /agents).
 *
 * Hot path: the update functions are integer stores and increments on
 * arrays sized at init; they never allocate, format or take locks. The
 * encoders run only when the admin endpoint is asked.
 *
 * Bounded labels, secret-free by construction: every label value is a
 * name from config (agent ids, tool names) or an enum word. A call to a
 * tool that config does not name is counted under tool="other", so a
 * caller's free text never becomes a label and the series count is fixed
 * by config. A name that fails tg_metrics_name_ok (which config validation
 * should make impossible) is shown as "invalid.<index>" everywhere instead
 * of its bytes. The denial ring keeps the caller's tool name only when it
 * passes tg_audit_safe_str, else "invalid", as the audit trail does.
 *
 * Encoders: pure, write into a caller-supplied buffer and return the length
 * written (NUL excluded) or -ENOSPC when it did not fit (nothing partial is
 * promised: the caller retries with a larger buffer).
 *
 * Ownership: tg_metrics_t owns copies of every name it reports (so a config
 * reload cannot leave it pointing at freed strings) and its arrays;
 * tg_metrics_free releases them. Not thread-safe: the loop thread only.
 */
#ifndef TG_ROUTER_METRICS_H
#define TG_ROUTER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"
#include "config/config.h"
#include "limits/registry.h"
#include "limits/store.h"
#include "router/call/denial-t.h"

#define TG_METRICS_DENIALS    32 /* fixed internal bound: latest denials kept for the page */
#define TG_METRICS_BUCKETS    13 /* fixed internal bound: finite histogram buckets */
#define TG_METRICS_NAME_MAX   (TG_LIMIT_NAME_MAX - 1) /* fixed internal bound: longest name shown as-is, bytes */
#define TG_METRICS_OTHER_TOOL "other" /* label of calls to tools config does not name */

/* Upper bounds of the call-duration histogram buckets, ms (+Inf follows). */
extern const uint32_t tg_metrics_bucket_ms[TG_METRICS_BUCKETS];

/* How one call ended, as counted in toolgate_calls_total{outcome}. */
typedef enum tg_outcome {
    TG_OUTCOME_OK = 0,    /* the agent answered with a result */
    TG_OUTCOME_ERROR,     /* the agent answered with an error */
    TG_OUTCOME_DENIED,    /* refused by a limit before reaching the agent */
    TG_OUTCOME_TIMEOUT,   /* the deadline passed while the agent had it */
    TG_OUTCOME_CANCELLED, /* the caller cancelled it */
    TG_OUTCOME_FAILED,    /* the agent went away (exited, killed, OOM) with it inflight */
    TG_OUTCOME__COUNT
} tg_outcome_t;

/* The one state of an agent (or of one instance place: an MCP session),
 * for every dialect. */
typedef enum tg_agent_state {
    TG_AGENT_DOWN = 0, /* no instance (on_demand: the next call starts one) */
    TG_AGENT_STARTING, /* spawned, its dialect's handshake not done */
    TG_AGENT_RUNNING,  /* calls are routed to it */
    TG_AGENT_BACKOFF,  /* waiting to be restarted */
    TG_AGENT_UNHEALTHY, /* its heartbeats stopped: calls refused until it recovers or is killed */
    TG_AGENT_FAILED,   /* not restarted (policy, or restarts exhausted); shown as down */
} tg_agent_state_t;

/* One configured agent. Arrays are sized at init from config. */
typedef struct tg_metrics_agent {
    char name[TG_LIMIT_NAME_MAX];     /* config id, or "invalid.<i>" */
    size_t ntools;                    /* configured tools */
    char (*tools)[TG_LIMIT_NAME_MAX]; /* their names (checked like <name>) */
    size_t other;                     /* row of unconfigured tools: ntools, or the row of a
                                       * configured tool that is itself named "other" */
    uint64_t *calls;                  /* (ntools + 1) rows x TG_OUTCOME__COUNT */
    uint64_t dur_bucket[TG_METRICS_BUCKETS + 1]; /* per bucket, not cumulative; last: +Inf */
    uint64_t dur_sum_ms;
    uint64_t dur_count;
    uint32_t inflight;
    uint32_t queued;
    tg_agent_state_t state;
    int64_t pid; /* 0 when no process */
    uint64_t restarts;
    /* Its tools, prompts or URIs hidden behind a front of several agents
     * because an agent earlier in the list exposes the same name (hub.c),
     * counted each time a merged list hid one. */
    uint64_t hidden_names;
    bool have_usage; /* the figures below were sampled at least once */
    uint64_t memory_bytes, memory_peak_bytes, memory_limit_bytes; /* limit 0: none */
    uint64_t cpu_usec;
    uint64_t pids;
} tg_metrics_agent_t;

/* One refused call, for the page. */
typedef struct tg_metrics_denial {
    int64_t ts_ms; /* wall clock, ms since the epoch */
    tg_deny_code_t code;
    int32_t agent;                    /* agent index, -1 when none */
    char tool[TG_AUDIT_SAFE_MAX + 1]; /* checked caller text, "invalid", or "" */
} tg_metrics_denial_t;

#define TG_METRICS_ADDR_MAX 128 /* fixed internal bound: a listener's address shown, bytes */

/* One MCP Streamable HTTP listener (router.listen[listener].http). The
 * runner copies its front's counters here before each render
 * (tg_gw_t.metrics_refresh); label values are its index and the address
 * config gives it, never a peer's text. */
typedef struct tg_metrics_http {
    uint32_t listener;              /* index in router.listen */
    char addr[TG_METRICS_ADDR_MAX]; /* its configured HOST:PORT (truncated) */
    uint64_t requests;              /* requests read */
    uint64_t status[6];             /* responses by class: [1] 1xx .. [5] 5xx */
    uint64_t connections;           /* open now */
    uint64_t connections_total;     /* accepted and served (refused ones not counted) */
    uint64_t connections_refused;   /* answered 429/503 at once: over max_connections, stopping */
    uint64_t buffer_bytes;          /* held now by the connections' read buffers and heads */
    uint64_t sessions;              /* MCP sessions open now */
    uint64_t sessions_opened, sessions_ended, sessions_idled;
    uint64_t responses_dropped;     /* the agent's answers no POST waited for any more */
    uint64_t backlog_dropped;       /* notifications dropped from a full session backlog */
} tg_metrics_http_t;

#define TG_METRICS_POLICY_DEFAULT 256 /* fixed internal bound: policy rules counted apart */

typedef struct tg_metrics {
    char instance[TG_LIMIT_NAME_MAX];
    tg_metrics_agent_t *agents;
    size_t nagents;
    tg_metrics_http_t *http; /* one per http listener of config, in config order */
    size_t nhttp;
    uint64_t denials[TG_DENY__COUNT];
    tg_metrics_denial_t ring[TG_METRICS_DENIALS];
    uint64_t ndenials; /* denials ever recorded; the newest is at (n-1) % size */
    tg_store_kind_t store_kind;
    bool store_degraded;
    uint64_t audit_queue_depth;
    uint64_t audit_queue_capacity;
    uint64_t audit_dropped;
    /* Several agents behind one front (dialect/mcp/hub.c): names or URIs
     * two agents exposed, the later one's hidden. */
    uint64_t name_collisions;
    /* Calls the policy refused, by the rule that decided: rules[i] at i,
     * the default at TG_METRICS_POLICY_DEFAULT (router/auth/policy.h holds
     * at most 256 rules). A reload that changes the policy starts them
     * again at 0 (the rules' numbers mean other rules). */
    uint64_t policy_denied[TG_METRICS_POLICY_DEFAULT + 1];
    int64_t start_ms; /* wall clock at init */
} tg_metrics_t;

/* Size <m> for the instance, agents (with their tools) and HTTP
 * listeners of <cfg>, all counters at zero, agents down, store local.
 * 0 or -ENOMEM. */
int tg_metrics_init(tg_metrics_t *m, const tg_config_t *cfg);
void tg_metrics_free(tg_metrics_t *m);

/* True when <s> (NUL-terminated) may be shown as-is in a label, JSON or
 * the page: 1..TG_METRICS_NAME_MAX bytes of [A-Za-z0-9._:@/-]. */
bool tg_metrics_name_ok(const char *s);
/* <src> as metrics show it: itself when tg_metrics_name_ok, else
 * "invalid.<idx>" (TG_LIMIT_NAME_MAX bytes at <dst>). */
void tg_metrics_shown_name(char *dst, const char *src, size_t idx);

/* Hot path. <agent> is the index in cfg->agents; <tool> the index in that
 * agent's cfg tools, or -1 for a tool config does not name. Out-of-range
 * indices are ignored. */

/* Count a finished call. Calls that reached the agent (every outcome but
 * DENIED) are also observed in the duration histogram: denials are
 * answered at once and would drag the latency quantiles to zero. */
void tg_metrics_call(tg_metrics_t *m, size_t agent, int tool, tg_outcome_t outcome,
                     uint64_t duration_ms);
/* Count a denial by code and keep it in the ring. <agent> < 0 when none;
 * <tool>/<tool_len> is the caller's text (NULL when none), kept only when
 * it passes tg_audit_safe_str. <ts_ms> is wall-clock ms. The call itself
 * is counted separately with tg_metrics_call(..., TG_OUTCOME_DENIED, ...). */
void tg_metrics_denial(tg_metrics_t *m, tg_deny_code_t code, int agent, const char *tool,
                       size_t tool_len, int64_t ts_ms);
/* Calls of <agent> held by the agent now, and waiting in its queue. */
void tg_metrics_load(tg_metrics_t *m, size_t agent, uint32_t inflight, uint32_t queued);

/* Not on the hot path. */
void tg_metrics_agent_state(tg_metrics_t *m, size_t agent, tg_agent_state_t st, int64_t pid);
void tg_metrics_agent_restarted(tg_metrics_t *m, size_t agent);
/* A containment sample: bytes, bytes, bytes (0: no limit), CPU µs, tasks. */
void tg_metrics_agent_usage(tg_metrics_t *m, size_t agent, uint64_t memory_bytes,
                            uint64_t memory_peak_bytes, uint64_t memory_limit_bytes,
                            uint64_t cpu_usec, uint64_t pids);
void tg_metrics_store(tg_metrics_t *m, tg_store_kind_t kind, bool degraded);
/* The row of HTTP listener router.listen[<listener>], or NULL when that
 * listener is not an HTTP one. */
tg_metrics_http_t *tg_metrics_http_row(tg_metrics_t *m, size_t listener);
void tg_metrics_audit(tg_metrics_t *m, uint64_t depth, uint64_t capacity, uint64_t dropped);

const char *tg_outcome_name(tg_outcome_t o);         /* "ok", "error", ... */
const char *tg_agent_state_name(tg_agent_state_t s); /* "down", "running", ... */

#endif
