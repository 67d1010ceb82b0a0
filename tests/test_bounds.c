/* Every bound is config-wired or declared internal, and every wired bound
 * is registered or classified (issue 6, part 1). Three parts:
 *
 * 1. The source walk. The test reads the tree at TG_SOURCE_DIR and looks
 *    at every `#define` in the .c/.h files under router/ limits/ audit/
 *    config/. A define is "limit-shaped" when its name says it is a size,
 *    count, duration or ceiling and its value holds an integer literal:
 *
 *    name:  ends in one of the suffixes of LIMIT_SUFFIX below (MAX, MIN,
 *           CAP, CEIL, LIMIT, BYTES, MS, US, BPS, MC, BURST, DEPTH,
 *           BACKLOG, CHUNK, BLOCK, SPARES, LOG, QUEUE, ROUNDS, KEEP, MAXLEN,
 *           LINE, PIDS, PCT, BUF), or holds "MAX_", "_MIN_" or "_DEF_"
 *           anywhere (TG_DEF_X, TG_MAX_X_CEIL, TG_AUDIT_MAX_BYTES_MIN);
 *    value: holds a decimal literal that is not part of an identifier, so
 *           `(TG_CG_PATH_MAX + 64)` counts and a pure alias such as
 *           `AUDIT_SINKS_MAX TG_CFG_SINKS_MAX` does not (it inherits the
 *           class of what it names); string defaults ("tg:") do not.
 *
 *    Each such define must be one of:
 *    (a) marked `fixed internal bound` on its line or on the comment line
 *        just above it: an internal constant nobody needs to tune;
 *    (b) listed in `defines` as K_WIRED with the config key that sets it
 *        (its default, floor or ceiling); the key must be a row of the
 *        key table (config/keys.h: its path, or the path's tail such as
 *        "execution_limits.burst"), so a renamed key breaks the test;
 *    (c) listed as K_FORMAT: a unit, protocol or arithmetic constant that
 *        is not a resource bound at all (short list, each with its reason).
 *    A listed entry that no longer matches an unmarked define fails too, so
 *    marking or wiring a constant forces its entry out of the table.
 *
 * 2. Registration. Every config key a K_WIRED define names has rows in
 *    `keys`, saying how that bound shows at runtime:
 *    R_LIMIT     a limit registry entry: its name ('*' stands for one name
 *                component: an agent id, tool or caller name), category,
 *                scope, and its capacity under the runtime test's config
 *                (so the row proves the key feeds that entry);
 *    R_DURATION  a deadline or a delay: enforced per call, connection or
 *                attempt by a timer, not a fill level (see below), with
 *                the "file:function" that enforces it, which must exist;
 *    R_UNREG     wired but deliberately not registered, with the reason;
 *    R_PENDING   an entry that work landing in parallel registers: checked
 *                like R_LIMIT's name when present and reported when absent
 *                (the row becomes R_LIMIT once that work is in).
 *
 *    The rule for durations: a deadline is not a level that fills up. Each
 *    call, connection or attempt has its own clock and passing it is an
 *    event (a `timeout` denial, a closed connection, a kill), counted in
 *    /metrics and the audit trail where it happens. "Age of the oldest
 *    inflight call against max_tool_call_duration" would only restate the
 *    timer, sampled late, and would warn at 80% on every slow call. So
 *    durations are not registered; each is listed with where it is
 *    enforced. One exception, router.frame_timeout (see its row): what
 *    it shows is the time a frame took, observed when it completed.
 *
 * 3. The runtime check. A real toolgate is started with a config that sets
 *    every kind of limit (tools, stderr, restart, resources, the admin
 *    endpoint's bounds): once as `wrap`, once as `serve` with a callers[]
 *    entry and, when a Redis is available, a store. Its /limits must hold
 *    every R_LIMIT row that applies to that run, with the row's category,
 *    scope and capacity; and every entry it holds must be explained by a
 *    row, so a new registration cannot go unlisted either. Two entries are
 *    also driven: a crash and restart fills agent.fx.restarts (wrap), and
 *    caller connections fill and empty agent.fx.instances (serve).
 */
#include "limits/registry.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "config/keys.h"
#include "router/admin/admin.h"
#include "tests/mcp_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

#define MARKER "fixed internal bound"
#define LIMIT_SUFFIX                                                                               \
    "_(MAX|MIN|CAP|CEIL|LIMIT|BYTES|MS|US|BPS|MC|BURST|DEPTH|BACKLOG|CHUNK|BLOCK|SPARES|LOG|"    \
    "QUEUE|ROUNDS|KEEP|MAXLEN|LINE|PIDS|PCT|BUF)$"
#define REPORT_MAX (64u * 1024) /* failure text collected by one scan */

typedef enum kind { K_WIRED, K_FORMAT } kind_t;

typedef struct bound_class {
    const char *name;
    kind_t kind;
    const char *key; /* K_WIRED: the config key (JSON path) that sets it */
    const char *why; /* K_FORMAT: why it is not a bound */
} bound_class_t;

#define WIRED(n, k) {n, K_WIRED, k, NULL}
#define FORMAT(n, w) {n, K_FORMAT, NULL, w}

/* clang-format off */
static const bound_class_t classes[] = {
    /* (b) config-wired: default, floor and ceiling of one key each. */
    WIRED("TG_DEF_MAX_FRAME_BYTES", "router.max_frame_bytes"),
    WIRED("TG_MIN_FRAME_BYTES", "router.max_frame_bytes"),
    WIRED("TG_MAX_FRAME_BYTES_CEIL", "router.max_frame_bytes"),
    WIRED("TG_DEF_CALL_DURATION_MS", "execution_limits.max_tool_call_duration"),
    WIRED("TG_MAX_DURATION_CEIL_MS", "execution_limits.max_tool_call_duration"),
    WIRED("TG_DEF_MAX_CONCURRENT", "execution_limits.max_concurrent_calls"),
    WIRED("TG_MAX_CONCURRENT_CEIL", "execution_limits.max_concurrent_calls"),
    WIRED("TG_DEF_MAX_QUEUED", "execution_limits.max_queued_calls"),
    WIRED("TG_MAX_QUEUED_CEIL", "execution_limits.max_queued_calls"),
    WIRED("TG_DEF_RATE_COUNT", "execution_limits.rate_limit"),
    WIRED("TG_DEF_RATE_PERIOD_MS", "execution_limits.rate_limit"),
    WIRED("TG_RATE_COUNT_CEIL", "execution_limits.rate_limit"),
    WIRED("TG_BURST_CEIL", "execution_limits.burst"),
    WIRED("TG_GCRA_MAX_BURST", "execution_limits.burst"), /* the pure core's copy */
    WIRED("TG_DEF_KILL_GRACE_MS", "execution_limits.kill_grace_period"),
    WIRED("TG_KILL_GRACE_CEIL_MS", "execution_limits.kill_grace_period"),
    WIRED("TG_DEF_STDERR_BPS", "agents[].stderr.bytes_per_second"),
    WIRED("TG_STDERR_BPS_CEIL", "agents[].stderr.bytes_per_second"),
    WIRED("TG_DEF_STDERR_LINE", "agents[].stderr.max_line"),
    WIRED("TG_STDERR_LINE_CEIL", "agents[].stderr.max_line"),
    WIRED("TG_DEF_MAX_RESTARTS", "agents[].restart.max_restarts"),
    WIRED("TG_MAX_RESTARTS_CEIL", "agents[].restart.max_restarts"),
    WIRED("TG_DEF_RESTART_WINDOW_MS", "agents[].restart.window"),
    WIRED("TG_DEF_BACKOFF_INITIAL_MS", "agents[].restart.backoff"),
    WIRED("TG_DEF_BACKOFF_MAX_MS", "agents[].restart.max_backoff"),
    WIRED("TG_DEF_MAX_INSTANCES", "agents[].max_instances"),
    WIRED("TG_MAX_INSTANCES_CEIL", "agents[].max_instances"),
    WIRED("TG_DEF_IDLE_TIMEOUT_MS", "router.idle_timeout"),
    WIRED("TG_DEF_FRAME_TIMEOUT_MS", "router.frame_timeout"),
    WIRED("TG_DEF_HANDSHAKE_TIMEOUT_MS", "router.handshake_timeout"),
    WIRED("TG_DEF_RELOAD_DRAIN_TIMEOUT_MS", "router.reload_drain_timeout"),
    WIRED("TG_DEF_AUDIT_QUEUE", "audit.queue"),
    WIRED("TG_AUDIT_QUEUE_CEIL", "audit.queue"),
    WIRED("TG_DEF_AUDIT_MAX_BYTES", "audit.sinks[].max_bytes"),
    WIRED("TG_AUDIT_MAX_BYTES_MIN", "audit.sinks[].max_bytes"),
    WIRED("TG_AUDIT_MAX_BYTES_CEIL", "audit.sinks[].max_bytes"),
    WIRED("TG_DEF_AUDIT_KEEP", "audit.sinks[].keep"),
    WIRED("TG_AUDIT_KEEP_CEIL", "audit.sinks[].keep"),
    WIRED("TG_DEF_AUDIT_FSYNC_MS", "audit.sinks[].fsync_interval"),
    WIRED("TG_AUDIT_FSYNC_CEIL_MS", "audit.sinks[].fsync_interval"),
    WIRED("TG_DEF_AUDIT_MAXLEN", "audit.sinks[].maxlen"),
    WIRED("TG_AUDIT_MAXLEN_CEIL", "audit.sinks[].maxlen"),
    WIRED("TG_DEF_AUDIT_SPOOL_BYTES", "audit.sinks[].spool_max_bytes"),
    WIRED("TG_AUDIT_SPOOL_MIN", "audit.sinks[].spool_max_bytes"),
    WIRED("TG_DEF_AUDIT_REDIS_TIMEOUT_MS", "audit.sinks[].timeout"),
    WIRED("TG_AUDIT_REDIS_TIMEOUT_CEIL_MS", "audit.sinks[].timeout"),
    WIRED("TG_DEF_MEMORY_BYTES", "agents[].resources.memory"),
    WIRED("TG_CONTAIN_DEF_MEMORY", "agents[].resources.memory"),
    WIRED("TG_MEMORY_MIN", "agents[].resources.memory"),
    WIRED("TG_MEMORY_CEIL", "agents[].resources.memory"),
    WIRED("TG_DEF_CPU_MILLICORES", "agents[].resources.cpu"),
    WIRED("TG_CONTAIN_DEF_CPU_MC", "agents[].resources.cpu"),
    WIRED("TG_CPU_MIN_MC", "agents[].resources.cpu"),
    WIRED("TG_CPU_CEIL_MC", "agents[].resources.cpu"),
    WIRED("TG_DEF_PIDS", "agents[].resources.pids"),
    WIRED("TG_CONTAIN_DEF_PIDS", "agents[].resources.pids"),
    WIRED("TG_PIDS_CEIL", "agents[].resources.pids"),
    WIRED("TG_DEF_DISK_BYTES", "agents[].resources.disk"),
    WIRED("TG_CONTAIN_DEF_DISK", "agents[].resources.disk"),
    WIRED("TG_DISK_MIN", "agents[].resources.disk"),
    WIRED("TG_DISK_CEIL", "agents[].resources.disk"),
    WIRED("TG_BANDWIDTH_MIN_BPS", "agents[].resources.network.bandwidth_limit"),
    WIRED("TG_BANDWIDTH_CEIL_BPS", "agents[].resources.network.bandwidth_limit"),
    WIRED("TG_CONNECTIONS_CEIL", "agents[].resources.network.max_connections"),
    WIRED("TG_CONTAIN_DEF_NOFILE", "agents[].resources.nofile"),
    WIRED("TG_NOFILE_CEIL", "agents[].resources.nofile"),
    WIRED("TG_DEF_OS_HEARTBEAT_MS", "agents[].opensentience.heartbeat_interval"),
    WIRED("TG_DEF_OS_HEARTBEAT_TIMEOUT_MS", "agents[].opensentience.heartbeat_timeout"),
    WIRED("TG_OS_HEARTBEAT_MIN_MS", "agents[].opensentience.heartbeat_interval"),
    WIRED("TG_OS_HEARTBEAT_CEIL_MS", "agents[].opensentience.heartbeat_interval"),
    WIRED("TG_DEF_OS_IDEM_WINDOW_MS", "agents[].opensentience.idempotency_window"),
    WIRED("TG_OS_IDEM_WINDOW_CEIL_MS", "agents[].opensentience.idempotency_window"),
    WIRED("TG_DEF_OS_IDEM_MAX_BYTES", "agents[].opensentience.idempotency_max_bytes"),
    WIRED("TG_OS_IDEM_MAX_BYTES_CEIL", "agents[].opensentience.idempotency_max_bytes"),
    WIRED("TG_DEF_LISTEN_MAX_CONNECTIONS", "router.listen[].max_connections"),
    WIRED("TG_LISTEN_MAX_CONNECTIONS_CEIL", "router.listen[].max_connections"),
    WIRED("TG_STORE_DEF_TIMEOUT_MS", "store.timeout"),
    WIRED("TG_STORE_DEF_CONNECT_TIMEOUT_MS", "store.connect_timeout"),
    WIRED("TG_STORE_DEF_DEAD_AFTER_MS", "store.dead_after"),
    WIRED("TG_STORE_DEF_BACKOFF_INITIAL_MS", "store.backoff"),
    WIRED("TG_STORE_DEF_BACKOFF_MAX_MS", "store.max_backoff"),
    WIRED("TG_STORE_DEF_LEASE_MS", "store.lease"),
    WIRED("TG_STORE_DEF_SLOT_LEASE_MS", "store.slot_lease"),
    WIRED("TG_STORE_SLOT_LEASE_MIN_MS", "store.slot_lease"),
    WIRED("TG_STORE_DURATION_CEIL_MS", "store.lease"), /* and every other store.* duration */
    WIRED("TG_STORE_DEF_MAX_PENDING", "store.max_pending"),
    WIRED("TG_STORE_MAX_PENDING_CEIL", "store.max_pending"),
    WIRED("TG_STORE_DEF_LOCAL_MAX_KEYS", "store.local_max_keys"),
    WIRED("TG_STORE_LOCAL_MAX_KEYS_CEIL", "store.local_max_keys"),
    WIRED("TG_ADMIN_DEF_MAX_HEADER_BYTES", "router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_MIN_HEADER_BYTES", "router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_MAX_HEADER_BYTES_CEIL", "router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_DEF_MAX_CONNECTIONS", "router.admin.max_connections"),
    WIRED("TG_ADMIN_MAX_CONNECTIONS_CEIL", "router.admin.max_connections"),
    WIRED("TG_ADMIN_DEF_IDLE_TIMEOUT_MS", "router.admin.idle_timeout"),
    WIRED("TG_ADMIN_MIN_IDLE_TIMEOUT_MS", "router.admin.idle_timeout"),
    WIRED("TG_ADMIN_IDLE_TIMEOUT_CEIL_MS", "router.admin.idle_timeout"),
    WIRED("TG_ADMIN_DEF_MAX_RESPONSE_BYTES", "router.admin.max_response_bytes"),
    WIRED("TG_ADMIN_MIN_RESPONSE_BYTES", "router.admin.max_response_bytes"),
    WIRED("TG_ADMIN_MAX_RESPONSE_BYTES_CEIL", "router.admin.max_response_bytes"),
    WIRED("TG_HTTP_DEF_MAX_HEADER_BYTES", "router.listen[].max_header_bytes"),
    WIRED("TG_H1_MIN_HEADER_BYTES", "router.listen[].max_header_bytes"), /* the reader's range */
    WIRED("TG_H1_MAX_HEADER_BYTES", "router.listen[].max_header_bytes"),
    WIRED("TG_HTTP_MIN_HEADER_BYTES", "router.listen[].max_header_bytes"),
    WIRED("TG_HTTP_MAX_HEADER_BYTES_CEIL", "router.listen[].max_header_bytes"),
    WIRED("TG_HTTP_DEF_MAX_REQUESTS", "router.listen[].max_requests_per_connection"),
    WIRED("TG_HTTP_MAX_REQUESTS_CEIL", "router.listen[].max_requests_per_connection"),
    WIRED("TG_HTTP_DEF_HEADER_TIMEOUT_MS", "router.listen[].header_timeout"),
    WIRED("TG_HTTP_DEF_KEEPALIVE_TIMEOUT_MS", "router.listen[].keepalive_timeout"),
    WIRED("TG_HTTP_MIN_TIMEOUT_MS", "router.listen[].header_timeout"), /* and keepalive_timeout */
    WIRED("TG_HTTP_TIMEOUT_CEIL_MS", "router.listen[].header_timeout"), /* and keepalive_timeout */
    WIRED("TG_HTTP_DEF_MAX_SESSIONS", "router.listen[].max_sessions"),
    WIRED("TG_HTTP_DEF_SESSIONS_PER_CALLER", "router.listen[].max_sessions_per_caller"),
    WIRED("TG_HTTP_MAX_SESSIONS_CEIL", "router.listen[].max_sessions"), /* and per caller */
    WIRED("TG_HTTP_DEF_SESSION_IDLE_MS", "router.listen[].session_idle_timeout"),
    WIRED("TG_HTTP_SESSION_IDLE_CEIL_MS", "router.listen[].session_idle_timeout"),
    WIRED("TG_DEF_JWT_LEEWAY_MS", "callers[].jwt.leeway"),
    WIRED("TG_JWT_LEEWAY_CEIL_MS", "callers[].jwt.leeway"),

    /* (c) units, protocol ranges and arithmetic headroom: not resource bounds. */
    FORMAT("TS_MIN_MS", "RFC 3339 year 0000: the range a timestamp can be written in"),
    FORMAT("TS_END_MS", "RFC 3339 year 10000: the range a timestamp can be written in"),
    FORMAT("METRICS_TS_MAX_MS", "last millisecond of year 9999, for exposition timestamps"),
    FORMAT("TG_STORE_PATH_MAX", "sizeof sun_path: the kernel's unix socket path size"),
    FORMAT("TG_STORE_DB_MAX", "INT_MAX: the range of a Redis database index"),
    FORMAT("TG_CONTAIN_CPU_PERIOD_US", "the cfs period cpu.max quotas are expressed in"),
    FORMAT("TG_GCRA_MAX_SPAN_US", "keeps GCRA arithmetic exact below 2^53 us"),
    FORMAT("TG_GCRA_MAX_NOW_US", "keeps GCRA arithmetic exact below 2^53 us"),
    FORMAT("REGISTRY_WARN_PCT", "the 80% approach threshold fixed by seed 002"),
    FORMAT("REGISTRY_REARM_PCT", "the 50% re-arm threshold fixed by seed 002"),
    FORMAT("TG_SSE_ID_MAX", "the longest SSE event id two 64-bit decimals can make"),
    FORMAT("OS_TOKEN_BYTES", "the OpenSentience session token's size: 128 random bits"),
};
/* clang-format on */
#define NCLASSES (sizeof classes / sizeof classes[0])

/* ---- how each wired key shows at runtime -------------------------------- */

typedef enum reg_kind { R_LIMIT, R_DURATION, R_UNREG, R_PENDING } reg_kind_t;

/* Runs a row applies to: every run unless it needs serve or a store. */
#define NEED_SERVE 1u /* serve only: callers[] limits, max_instances */
#define NEED_STORE 2u /* a redis store is configured */

typedef struct key_reg {
    const char *key;   /* the config key, as `classes` names it */
    reg_kind_t kind;
    const char *name;  /* R_LIMIT, R_PENDING: registry name, '*' = one component */
    const char *cat;   /* R_LIMIT: tg_limit_cat_name of its category */
    const char *scope; /* R_LIMIT: its scope */
    uint64_t cap;      /* R_LIMIT: its capacity under the runtime config below (0: not checked) */
    unsigned need;     /* NEED_* */
    const char *text;  /* R_DURATION: "file:function" enforcing it; R_UNREG, R_PENDING: why */
} key_reg_t;

/* The runtime config (rt_config) sets each of these, distinct where it
 * can, so a capacity names the key that fed it. */
#define RT_FRAME       1048576u   /* router.max_frame_bytes "1Mi" */
#define RT_CONC        2u         /* agent max_concurrent_calls */
#define RT_QUEUE       4u         /* agent max_queued_calls */
#define RT_BURST       10u        /* agent burst (rate_limit 100/minute) */
#define RT_TOOL_RATE   7u         /* tools.echo.rate_limit 7/second: its burst */
#define RT_TOOL_CONC   1u         /* tools.echo.max_concurrent_calls */
#define RT_TOOL_QUEUE  5u         /* tools.echo.max_queued_calls */
#define RT_STDERR_BPS  16384u     /* stderr.bytes_per_second "16Ki" */
#define RT_RESTARTS    3u         /* restart.max_restarts */
#define RT_INSTANCES   6u         /* max_instances */
#define RT_MEMORY      268435456u /* resources.memory "256Mi" */
#define RT_PIDS        32u        /* resources.pids */
#define RT_DISK        8388608u   /* resources.disk "8Mi", with a workspace */
#define RT_AUDIT_QUEUE 512u       /* audit.queue */
#define RT_CALLER_RATE 9u         /* callers[].execution_limits.rate_limit 9/second */
#define RT_CALLER_CONC 8u         /* callers[].execution_limits.max_concurrent_calls */
#define RT_ADM_HEAD    4096u      /* router.admin.max_header_bytes "4Ki" */
#define RT_ADM_CONNS   5u         /* router.admin.max_connections */
#define RT_LISTEN_CONNS 256u      /* router.listen[].max_connections: the default */
#define RT_HTTP_SESSIONS 5u       /* the http listener's max_sessions */
#define RT_HTTP_HEAD 4096u        /* its max_header_bytes "4Ki" */
#define RT_HTTP_REQS 50u          /* its max_requests_per_connection */
#define RT_HTTP_PER_CALLER 3u     /* its max_sessions_per_caller */
#define RT_ADM_BODY    2097152u   /* router.admin.max_response_bytes "2Mi" */
#define RT_STORE_PENDING 100u     /* store.max_pending (serve with a store) */
#define RT_FRAME_TIMEOUT 7000u    /* router.frame_timeout "7s" */

#define LIMIT(k, n, c, s, cap) {k, R_LIMIT, n, c, s, cap, 0, NULL}
#define LIMIT_IF(k, n, c, s, cap, need) {k, R_LIMIT, n, c, s, cap, need, NULL}
#define DURATION(k, where) {k, R_DURATION, NULL, NULL, NULL, 0, 0, where}
#define UNREG(k, why) {k, R_UNREG, NULL, NULL, NULL, 0, 0, why}
#define PENDING(k, n, need, who) {k, R_PENDING, n, NULL, NULL, 0, need, who}

/* clang-format off */
static const key_reg_t keys[] = {
    LIMIT("router.max_frame_bytes", "caller.frame_bytes", "frame", "instance", RT_FRAME),
    LIMIT("router.max_frame_bytes", "agent.*.frame_bytes", "frame", "agent", RT_FRAME),
    LIMIT("router.max_frame_bytes", "caller.write_queue_bytes", "write_queue", "session", 2 * RT_FRAME),
    LIMIT("router.max_frame_bytes", "agent.*.write_queue_bytes", "write_queue", "session", 2 * RT_FRAME),
    LIMIT("execution_limits.max_concurrent_calls", "agent.*.concurrency", "concurrency", "agent", RT_CONC),
    LIMIT("execution_limits.max_concurrent_calls", "agent.*.tool.*.concurrency", "concurrency", "tool", RT_TOOL_CONC),
    LIMIT_IF("execution_limits.max_concurrent_calls", "caller.*.concurrency", "concurrency", "caller", RT_CALLER_CONC, NEED_SERVE),
    LIMIT_IF("execution_limits.max_concurrent_calls", "agent.*.concurrency.shared", "concurrency", "shared", RT_CONC, NEED_STORE),
    LIMIT("execution_limits.max_queued_calls", "agent.*.queue", "queue", "agent", RT_QUEUE),
    LIMIT("execution_limits.max_queued_calls", "agent.*.tool.*.queue", "queue", "tool", RT_TOOL_QUEUE),
    LIMIT("execution_limits.rate_limit", "agent.*.rate", "rate", "agent", RT_BURST),
    LIMIT("execution_limits.rate_limit", "agent.*.tool.*.rate", "rate", "tool", RT_TOOL_RATE),
    LIMIT_IF("execution_limits.rate_limit", "caller.*.rate", "rate", "caller", RT_CALLER_RATE, NEED_SERVE),
    LIMIT("execution_limits.burst", "agent.*.rate", "rate", "agent", RT_BURST),
    LIMIT("agents[].stderr.bytes_per_second", "agent.*.stderr_bytes_per_second", "stderr", "agent", RT_STDERR_BPS),
    LIMIT("agents[].restart.max_restarts", "agent.*.restarts", "rate", "session", RT_RESTARTS),
    LIMIT("agents[].restart.window", "agent.*.restarts", "rate", "session", RT_RESTARTS),
    LIMIT_IF("agents[].max_instances", "agent.*.instances", "concurrency", "agent", RT_INSTANCES, NEED_SERVE),
    LIMIT("audit.queue", "audit.queue", "audit_queue", "instance", RT_AUDIT_QUEUE),
    LIMIT("agents[].resources.memory", "agent.*.memory_bytes", "resource", "agent", RT_MEMORY),
    LIMIT("agents[].resources.pids", "agent.*.pids", "resource", "agent", RT_PIDS),
    LIMIT("agents[].resources.disk", "agent.*.disk_bytes", "resource", "agent", RT_DISK),
    LIMIT_IF("store.max_pending", "store.pending", "queue", "instance", RT_STORE_PENDING, NEED_STORE),
    LIMIT("router.admin.max_header_bytes", "admin.header_bytes", "frame", "instance", RT_ADM_HEAD),
    LIMIT("router.admin.max_connections", "admin.connections", "concurrency", "instance", RT_ADM_CONNS),
    LIMIT_IF("router.listen[].max_connections", "listen.*.connections", "concurrency", "instance", RT_LISTEN_CONNS, NEED_SERVE),
    LIMIT_IF("router.listen[].max_sessions", "listen.*.sessions", "concurrency", "instance", RT_HTTP_SESSIONS, NEED_SERVE),
    LIMIT_IF("router.listen[].max_header_bytes", "listen.*.header_bytes", "frame", "request", RT_HTTP_HEAD, NEED_SERVE),
    LIMIT_IF("router.listen[].max_requests_per_connection", "listen.*.requests_per_connection", "concurrency", "connection", RT_HTTP_REQS, NEED_SERVE),
    LIMIT_IF("router.listen[].max_sessions_per_caller", "listen.*.sessions_per_caller", "concurrency", "caller", RT_HTTP_PER_CALLER, NEED_SERVE),
    LIMIT_IF("router.max_frame_bytes", "listen.*.stream_queue_bytes", "write_queue", "session", 2 * RT_FRAME, NEED_SERVE),
    LIMIT("router.admin.max_response_bytes", "admin.response_bytes", "frame", "instance", RT_ADM_BODY),
    /* The one duration registered (issue 20 item 18 asks it of /limits):
     * a frame's arrival is a level of sorts, how long the latest frame
     * that came in pieces took from its first byte, and nearing the cap
     * means a caller is about to be cut (a slowloris, or a link too slow
     * for the setting), which is worth its one warning. */
    LIMIT_IF("router.frame_timeout", "caller.frame_timeout_ms", "frame", "session", RT_FRAME_TIMEOUT, NEED_SERVE),

    /* Deadlines and delays: a clock per call, connection or attempt. */
    DURATION("execution_limits.max_tool_call_duration", "router/call/pipeline.c:tg_pipe_deadline"),
    DURATION("execution_limits.kill_grace_period", "router/dialect/mcp/session_life.c:on_phase_timer"),
    DURATION("agents[].restart.backoff", "router/agent/restart.c:on_restart_timer"),
    DURATION("agents[].restart.max_backoff", "router/agent/restart.c:on_restart_timer"),
    DURATION("router.idle_timeout", "router/dialect/mcp/session_flow.c:on_not_reading"),
    DURATION("router.frame_timeout", "router/dialect/mcp/session_flow.c:on_frame_timeout"),
    DURATION("router.handshake_timeout", "router/dialect/mcp/session_life.c:on_handshake_timeout"),
    DURATION("router.reload_drain_timeout", "router/dialect/mcp/session_life.c:on_drain_timeout"),
    DURATION("router.admin.idle_timeout", "router/admin/admin.c:on_timer"),
    DURATION("router.listen[].header_timeout", "router/front/http.c:on_timer"),
    DURATION("router.listen[].keepalive_timeout", "router/front/http.c:on_timer"),
    DURATION("router.listen[].session_idle_timeout", "router/front/http_sess.c:tg_hub_tick"),
    DURATION("audit.sinks[].fsync_interval", "audit/audit.c:on_sync_timer"),
    DURATION("audit.sinks[].timeout", "audit/sink_redis.c:rs_connect"),
    DURATION("store.timeout", "limits/store_redis.c:req_on_timeout"),
    DURATION("store.connect_timeout", "limits/store_redis_conn.c:rs_on_watchdog"),
    DURATION("store.dead_after", "limits/store_redis_conn.c:rs_on_watchdog"),
    DURATION("store.backoff", "limits/store_redis_conn.c:rs_on_retry"),
    DURATION("store.max_backoff", "limits/store_redis_conn.c:rs_on_retry"),
    DURATION("store.lease", "limits/store_lease.c:lease_life"),
    DURATION("store.slot_lease", "limits/store_redis_slots.c:rs_on_renew"),

    /* Wired, deliberately not registered. */
    UNREG("callers[].jwt.leeway",
          "a tolerance on a token's exp, nbf and iat (clock skew), not a fill level: "
          "nothing is counted against it"),
    UNREG("agents[].stderr.max_line",
          "a cut, not a fill level: a longer line is relayed cut and marked [truncated]; "
          "the relay's byte budget is agent.<id>.stderr_bytes_per_second"),
    UNREG("audit.sinks[].max_bytes",
          "retention: passing it rotates the file, nothing is refused or lost"),
    UNREG("audit.sinks[].keep", "retention: how many rotated files stay, nothing is refused"),
    UNREG("audit.sinks[].maxlen", "retention: XADD MAXLEN ~ trims old stream entries"),
    UNREG("audit.sinks[].spool_max_bytes",
          "the spool is filled by the audit writer thread, which reports no size to the "
          "loop; what it cannot hold is counted in audit.dropped (reported to the lead)"),
    UNREG("agents[].resources.cpu",
          "a rate the kernel enforces by throttling (cpu.max), so usage never passes it; "
          "used CPU is toolgate_agent_cpu_seconds_total on /metrics"),
    UNREG("agents[].resources.network.bandwidth_limit",
          "a request no containment backend enforces (toolgate check says so): nothing fills"),
    UNREG("agents[].resources.network.max_connections",
          "a request no containment backend enforces (toolgate check says so): nothing fills"),
    UNREG("agents[].resources.nofile",
          "RLIMIT_NOFILE: the kernel refuses the agent's open(2) itself; toolgate does not "
          "sample an agent's descriptors"),
    UNREG("store.local_max_keys",
          "buckets of the redis store's local fallback and lease tables, inside the store: "
          "it reports no count for them (tg_store_local_size covers a plain local store)"),
    UNREG("agents[].opensentience.heartbeat_interval",
          "a period toolgate announces in core.welcome for the agent to keep; what toolgate "
          "enforces is heartbeat_timeout"),
    DURATION("agents[].opensentience.heartbeat_timeout", "router/dialect/opensentience/os_agent.c:on_hb_timer"),
    DURATION("agents[].opensentience.idempotency_window", "router/codec/idem.c:tg_idem_find"),
    /* Registered per opensentience agent and listener; the runtime config
     * here has none (tests/test_os.c runs them). */
    PENDING("agents[].opensentience.idempotency_max_bytes", "agent.*.idempotency_bytes", 0,
            "registered for opensentience agents only, which the runtime config has none of"),
};
/* clang-format on */
#define NKEYS (sizeof keys / sizeof keys[0])

/* ---- scanning ---------------------------------------------------------- */

typedef struct scan {
    regex_t define_re, name_re;
    size_t files, defines, marked, listed;
    bool seen[NCLASSES];
    char unclassified[REPORT_MAX];
    char stale[REPORT_MAX];
} scan_t;

static void report(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(char *buf, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= REPORT_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, REPORT_MAX - used, fmt, ap);
    va_end(ap);
}

static bool name_is_limit_shaped(const regex_t *re, const char *name)
{
    return regexec(re, name, 0, NULL, 0) == 0 || strstr(name, "MAX_") != NULL ||
           strstr(name, "_MIN_") != NULL || strstr(name, "_DEF_") != NULL;
}

/* True when <v> (a define's value, comment already cut) holds a decimal
 * literal that does not sit inside an identifier. */
static bool value_is_numeric(const char *v)
{
    for (const char *p = v; *p != '\0'; p++) {
        if (*p >= '0' && *p <= '9') {
            char b = p == v ? ' ' : p[-1];
            bool ident = (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') ||
                         (b >= '0' && b <= '9') || b == '_';
            if (!ident)
                return true;
        }
        if (*p == '"')
            return false; /* a string default, not a bound */
    }
    return false;
}

static bool is_comment_line(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return strncmp(line, "/*", 2) == 0 || *line == '*' || strncmp(line, "//", 2) == 0;
}

static int class_find(const char *name)
{
    for (size_t i = 0; i < NCLASSES; i++)
        if (strcmp(classes[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void scan_line(scan_t *s, const char *rel, int lineno, const char *line, const char *prev)
{
    regmatch_t m[3];
    if (regexec(&s->define_re, line, 3, m, 0) != 0)
        return;
    char name[128], value[256];
    size_t nl = (size_t)(m[1].rm_eo - m[1].rm_so);
    size_t vl = (size_t)(m[2].rm_eo - m[2].rm_so);
    if (nl >= sizeof(name))
        nl = sizeof(name) - 1;
    if (vl >= sizeof(value))
        vl = sizeof(value) - 1;
    memcpy(name, line + m[1].rm_so, nl);
    name[nl] = '\0';
    memcpy(value, line + m[2].rm_so, vl);
    value[vl] = '\0';
    char *cut = strstr(value, "/*");
    if (cut != NULL)
        *cut = '\0';
    if ((cut = strstr(value, "//")) != NULL)
        *cut = '\0';
    if (!name_is_limit_shaped(&s->name_re, name) || !value_is_numeric(value))
        return;
    s->defines++;

    bool marked = strstr(line, MARKER) != NULL ||
                  (prev != NULL && is_comment_line(prev) && strstr(prev, MARKER) != NULL);
    int idx = class_find(name);
    if (marked) {
        s->marked++;
        if (idx >= 0)
            report(s->stale, "  %s:%d: %s is marked `" MARKER "` and also listed in "
                   "tests/test_bounds.c: remove its table entry\n", rel, lineno, name);
        return;
    }
    if (idx < 0) {
        report(s->unclassified, "  %s:%d: %s\n", rel, lineno, name);
        return;
    }
    s->listed++;
    s->seen[idx] = true;
}

static void scan_file(scan_t *s, const char *path, const char *rel)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    char *line = NULL, *prev = NULL;
    size_t cap = 0;
    int lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        scan_line(s, rel, lineno, line, prev);
        free(prev);
        prev = strdup(line);
        cr_assert_not_null(prev);
    }
    free(prev);
    free(line);
    fclose(f);
    s->files++;
}

static void scan_dir(scan_t *s, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", TG_SOURCE_DIR, rel);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char crel[1024], cpath[4096];
        struct stat st;
        snprintf(crel, sizeof(crel), "%s/%s", rel, e->d_name);
        snprintf(cpath, sizeof(cpath), "%s/%s", TG_SOURCE_DIR, crel);
        if (stat(cpath, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            scan_dir(s, crel);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n > 2 && e->d_name[n - 2] == '.' && (e->d_name[n - 1] == 'c' || e->d_name[n - 1] == 'h'))
            scan_file(s, cpath, crel);
    }
    closedir(d);
}

static scan_t *scan_tree(void)
{
    static const char *const dirs[] = {"router", "limits", "audit", "config"};
    scan_t *s = calloc(1, sizeof(*s));
    cr_assert_not_null(s);
    cr_assert_eq(regcomp(&s->define_re,
                         "^[[:space:]]*#[[:space:]]*define[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)"
                         "[[:space:]]+([^\n]*)",
                         REG_EXTENDED),
                 0);
    cr_assert_eq(regcomp(&s->name_re, LIMIT_SUFFIX, REG_EXTENDED | REG_NOSUB), 0);
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        scan_dir(s, dirs[i]);
    for (size_t i = 0; i < NCLASSES; i++)
        if (!s->seen[i])
            report(s->stale, "  %s: listed in tests/test_bounds.c but no unmarked "
                   "limit-shaped define has that name any more: remove its entry\n",
                   classes[i].name);
    return s;
}

static void scan_free(scan_t *s)
{
    regfree(&s->define_re);
    regfree(&s->name_re);
    free(s);
}

static char *slurp(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", TG_SOURCE_DIR, rel);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- the registry against the table ------------------------------------- */

/* <pat> against <name>: '*' matches one name component (1+ bytes, no '.'). */
static bool name_matches(const char *pat, const char *name)
{
    while (*pat != '\0') {
        if (*pat == '*') {
            size_t n = strcspn(name, ".");
            if (n == 0)
                return false;
            name += n;
        } else if (*pat != *name++) {
            return false;
        }
        pat++;
    }
    return *name == '\0';
}

/* True when <src> defines the function whose name and '(' are <fn>: a
 * line at the left margin naming it that is not a prototype. */
static bool defines_function(const char *src, const char *fn)
{
    size_t fl = strlen(fn);
    for (const char *p = strstr(src, fn); p != NULL; p = strstr(p + 1, fn)) {
        const char *bol = p;
        while (bol > src && bol[-1] != '\n')
            bol--;
        const char *eol = strchr(p, '\n');
        if (eol == NULL)
            eol = p + strlen(p);
        bool at_margin = *bol != ' ' && *bol != '\t' && *bol != '#' && *bol != '/' && *bol != '*';
        bool named = p > bol && (p[-1] == ' ' || p[-1] == '*');
        bool prototype = eol > p + fl && eol[-1] == ';';
        if (at_margin && named && !prototype)
            return true;
    }
    return false;
}

static bool class_has_key(const char *key)
{
    for (size_t i = 0; i < NCLASSES; i++)
        if (classes[i].kind == K_WIRED && strcmp(classes[i].key, key) == 0)
            return true;
    return false;
}

static bool cat_is_real(const char *cat)
{
    for (int c = 0;; c++) {
        const char *n = tg_limit_cat_name((tg_limit_cat_t)c);
        if (strcmp(n, "unknown") == 0)
            return false;
        if (strcmp(n, cat) == 0)
            return true;
    }
}

static bool row_applies(const key_reg_t *k, unsigned run)
{
    return (k->kind == R_LIMIT || k->kind == R_PENDING) && (k->need & ~run) == 0;
}

/* Check the /limits snapshot of a toolgate at <addr> started for <run>
 * (NEED_* bits it satisfies) against `keys`; failures go to <rep>. */
static void check_snapshot(const char *addr, unsigned run, char *rep)
{
    json_t *doc = tga_limits(addr);
    json_t *lims = json_object_get(doc, "limits");
    cr_assert(json_is_array(lims));
    cr_assert_geq(json_array_size(lims), 10, "only %zu limits registered", json_array_size(lims));

    for (size_t r = 0; r < NKEYS; r++) {
        const key_reg_t *k = &keys[r];
        if (!row_applies(k, run))
            continue;
        size_t hits = 0, i;
        json_t *e;
        json_array_foreach(lims, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name == NULL || !name_matches(k->name, name))
                continue;
            hits++;
            if (k->kind != R_LIMIT)
                continue;
            const char *cat = json_string_value(json_object_get(e, "category"));
            const char *scope = json_string_value(json_object_get(e, "scope"));
            uint64_t cap = (uint64_t)json_integer_value(json_object_get(e, "capacity"));
            if (cat == NULL || strcmp(cat, k->cat) != 0)
                report(rep, "  %s (%s): category %s, the table says %s\n", name, k->key,
                       cat ? cat : "(none)", k->cat);
            if (scope == NULL || strcmp(scope, k->scope) != 0)
                report(rep, "  %s (%s): scope %s, the table says %s\n", name, k->key,
                       scope ? scope : "(none)", k->scope);
            if (k->cap != 0 && cap != k->cap)
                report(rep, "  %s: capacity %llu, but %s is %llu in the runtime config\n", name,
                       (unsigned long long)cap, k->key, (unsigned long long)k->cap);
        }
        if (hits == 0 && k->kind == R_LIMIT)
            report(rep, "  %s sets %s, but no registry entry matches it\n", k->key, k->name);
        if (hits == 0 && k->kind == R_PENDING)
            fprintf(stderr, "[WARN] %s is not registered yet (%s): %s\n", k->name, k->key, k->text);
    }
    size_t i;
    json_t *e;
    json_array_foreach(lims, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        bool known = false;
        for (size_t r = 0; r < NKEYS && !known; r++)
            known = row_applies(&keys[r], run) && name != NULL && name_matches(keys[r].name, name);
        if (!known)
            report(rep, "  %s is registered but no row of `keys` in tests/test_bounds.c "
                   "names it (add the config key that sets it)\n", name ? name : "(no name)");
    }
    json_decref(doc);
}

/* The runtime config: every kind of limit set, to the RT_* values, the
 * audit trail to <audit> ("" to leave it to --audit). <router_extra>,
 * <agent_extra> (agents[0]'s members), <limits_extra> (its
 * execution_limits' members) and <top_extra> are spliced in. */
static void rt_config(const char *path, const char *admin, const char *audit,
                      const char *router_extra, const char *agent_extra,
                      const char *limits_extra, const char *top_extra)
{
    char json[8192], ws[TGH_PATH + 8];
    /* The workspace lies beside the config file. */
    const char *slash = strrchr(path, '/');
    cr_assert_not_null(slash);
    snprintf(ws, sizeof ws, "%.*s/ws", (int)(slash - path), path);
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"instance\": \"bounds-rt\", \"max_frame_bytes\": \"1Mi\", "
        "\"idle_timeout\": \"20s\", \"frame_timeout\": \"7s\",\n"
        "   \"admin\": {\"listen\": \"%s\", \"max_header_bytes\": \"4Ki\", \"max_connections\": 5,"
        " \"idle_timeout\": \"9s\", \"max_response_bytes\": \"2Mi\"}%s},\n"
        " \"audit\": {\"queue\": 512%s%s%s},\n"
        " \"agents\": [{\"id\": \"fx\"%s,\n"
        "   \"execution_limits\": {\"max_tool_call_duration\": \"10s\", \"max_concurrent_calls\": 2,"
        " \"max_queued_calls\": 4, \"rate_limit\": \"100/minute\", \"burst\": 10,"
        " \"kill_grace_period\": \"2s\"%s},\n"
        "   \"tools\": {\"echo\": {\"rate_limit\": \"7/second\", \"max_concurrent_calls\": 1,"
        " \"max_queued_calls\": 5, \"max_tool_call_duration\": \"5s\"}},\n"
        "   \"restart\": {\"policy\": \"on-failure\", \"max_restarts\": 3, \"window\": \"1m\","
        " \"backoff\": \"100ms\", \"max_backoff\": \"1s\"},\n"
        "   \"stderr\": {\"bytes_per_second\": \"16Ki\", \"max_line\": \"1Ki\"},\n"
        "   \"resources\": {\"memory\": {\"limit\": \"256Mi\"}, \"pids\": {\"limit\": 32},"
        " \"disk\": {\"limit\": \"8Mi\"}},\n"
        "   \"workspace\": \"%s\",\n"
        "   \"max_instances\": 6}]%s}\n",
        admin, router_extra, audit[0] ? ", \"path\": \"" : "", audit, audit[0] ? "\"" : "",
        agent_extra, limits_extra, ws, top_extra);
    cr_assert(n > 0 && (size_t)n < sizeof json);
    cr_assert_eq(tgh_write_file(path, json), 0);
}

/* ---- tests ------------------------------------------------------------- */

Test(bounds, pattern_tells_limits_from_other_defines)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, LIMIT_SUFFIX, REG_EXTENDED | REG_NOSUB), 0);
    cr_assert(name_is_limit_shaped(&re, "TG_IO_CHUNK"));
    cr_assert(name_is_limit_shaped(&re, "TG_MAX_FRAME_BYTES_CEIL"));
    cr_assert(name_is_limit_shaped(&re, "TG_AUDIT_MAX_BYTES_MIN"));
    cr_assert(name_is_limit_shaped(&re, "TG_STORE_DEF_MAX_PENDING"));
    cr_assert(name_is_limit_shaped(&re, "V1_KILL_ROUNDS"));
    cr_assert_not(name_is_limit_shaped(&re, "TG_OS_VERSION"));
    cr_assert_not(name_is_limit_shaped(&re, "TG_LIMIT_FRAME"));
    cr_assert_not(name_is_limit_shaped(&re, "F_SETPIPE_SZ"));
    regfree(&re);
    cr_assert(value_is_numeric("(64u * 1024)"));
    cr_assert(value_is_numeric("(TG_CG_PATH_MAX + 64)"));
    cr_assert(value_is_numeric("(UINT64_C(1) << 50)"));
    cr_assert_not(value_is_numeric("TG_CFG_SINKS_MAX"));
    cr_assert_not(value_is_numeric("INT64_MIN"));
    cr_assert_not(value_is_numeric("\"127.0.0.1:9464\""));
}

Test(bounds, every_limit_shaped_define_is_marked_or_wired)
{
    scan_t *s = scan_tree();
    /* The walk must really have read the tree, not passed on nothing. */
    cr_assert_geq(s->files, 40, "only %zu source files read under %s", s->files, TG_SOURCE_DIR);
    cr_assert_geq(s->marked, 40, "only %zu marked bounds found", s->marked);
    cr_assert_str_empty(s->unclassified,
                        "limit-shaped #defines that are neither a fixed internal bound nor "
                        "config-wired:\n%s"
                        "Fix each one: if nobody should tune it, end its line with "
                        "`/* " MARKER ": <what it bounds> */`; otherwise wire it to a config key "
                        "(default, floor, ceiling in config/config.h), add it to `classes` in "
                        "tests/test_bounds.c with that key, and give the key its rows in `keys` "
                        "(registered, a duration, or why not).",
                        s->unclassified);
    cr_assert_eq(s->defines, s->marked + s->listed);
    scan_free(s);
}

Test(bounds, table_has_no_stale_entries)
{
    scan_t *s = scan_tree();
    cr_assert_str_empty(s->stale, "tests/test_bounds.c table is out of date:\n%s", s->stale);
    scan_free(s);
}

/* A row of the key table whose path is <key> or ends with ".<key>". */
static const tg_cfg_key_t *key_row(const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const char *p = tg_cfg_keys[i].path;
        size_t pl = strlen(p);
        if (strcmp(p, key) == 0 || (pl > kl && p[pl - kl - 1] == '.' && strcmp(p + pl - kl, key) == 0))
            return &tg_cfg_keys[i];
    }
    return NULL;
}

Test(bounds, wired_entries_name_real_config_keys)
{
    for (size_t i = 0; i < NCLASSES; i++) {
        const bound_class_t *c = &classes[i];
        if (c->kind != K_WIRED) {
            cr_assert_not_null(c->why, "%s: entry without a reason", c->name);
            cr_assert_gt(strlen(c->why), 10, "%s: give a real reason", c->name);
            continue;
        }
        cr_assert_not_null(c->key);
        const tg_cfg_key_t *k = key_row(c->key);
        cr_assert_not_null(k, "%s is listed as set by %s, but the key table (config/keys.c) has "
                              "no such key", c->name, c->key);
        cr_assert(tg_ktype_has_unit(k->type), "%s is listed as set by %s, which holds no value "
                                              "with a unit", c->name, c->key);
    }
}

/* Part 2, statically: each wired key says how it shows at runtime, and
 * each row is well-formed and names a key that still exists. */
Test(bounds, every_wired_key_is_registered_or_classified)
{
    for (size_t i = 0; i < NCLASSES; i++) {
        if (classes[i].kind != K_WIRED)
            continue;
        bool has_row = false;
        for (size_t r = 0; r < NKEYS && !has_row; r++)
            has_row = strcmp(keys[r].key, classes[i].key) == 0;
        cr_assert(has_row,
                  "%s (set by %s) has no row in `keys`: say which registry entry shows it "
                  "(R_LIMIT), where it is enforced if it is a duration (R_DURATION), or why "
                  "it is not registered (R_UNREG)",
                  classes[i].name, classes[i].key);
    }
    for (size_t r = 0; r < NKEYS; r++) {
        const key_reg_t *k = &keys[r];
        cr_assert(class_has_key(k->key), "row %zu names %s, which no define in `classes` is "
                  "wired to: remove the row or fix the key", r, k->key);
        switch (k->kind) {
        case R_LIMIT:
            cr_assert(k->name != NULL && k->cat != NULL && k->scope != NULL, "row %zu", r);
            cr_assert(cat_is_real(k->cat), "row %zu: %s is not a registry category", r, k->cat);
            cr_assert_lt(strlen(k->name), TG_LIMIT_NAME_MAX);
            break;
        case R_DURATION: {
            cr_assert_not_null(k->text, "row %zu: where is %s enforced?", r, k->key);
            const char *colon = strchr(k->text, ':');
            cr_assert_not_null(colon, "row %zu: \"%s\" is not file:function", r, k->text);
            char file[256], fn[128];
            snprintf(file, sizeof file, "%.*s", (int)(colon - k->text), k->text);
            snprintf(fn, sizeof fn, "%s(", colon + 1);
            char *src = slurp(file);
            cr_assert(defines_function(src, fn), "%s is said to be enforced by %s, which %s "
                      "does not define", k->key, colon + 1, file);
            free(src);
            break;
        }
        case R_UNREG:
        case R_PENDING:
            cr_assert(k->text != NULL && strlen(k->text) > 20, "row %zu (%s): give the reason",
                      r, k->key);
            if (k->kind == R_PENDING)
                cr_assert_not_null(k->name);
            break;
        }
    }
}

Test(bounds, registry_names_match_their_patterns)
{
    cr_assert(name_matches("agent.*.rate", "agent.search.rate"));
    cr_assert(name_matches("agent.*.tool.*.rate", "agent.search.tool.web.rate"));
    cr_assert(name_matches("audit.queue", "audit.queue"));
    cr_assert_not(name_matches("agent.*.rate", "agent.search.tool.web.rate"));
    cr_assert_not(name_matches("agent.*.concurrency", "agent.fx.concurrency.shared"));
    cr_assert_not(name_matches("agent.*.rate", "agent..rate"));
    cr_assert_not(name_matches("audit.queue", "audit.queue2"));
    cr_assert_not(name_matches("audit.queue2", "audit.queue"));
    const char *src = "static void on_tick(uv_timer_t *t);\n"
                      "    on_idle(w);\n"
                      "static void on_tick(uv_timer_t *t)\n{\n}\n"
                      "static void\non_idle_x(void)\n";
    cr_assert(defines_function(src, "on_tick("));
    cr_assert_not(defines_function(src, "on_idle("));
    cr_assert_not(defines_function("static void on_x(void);\n", "on_x("));
}

/* ---- part 3: a real toolgate's registry ------------------------------- */

/* Current and high-water of registry entry <name> at <addr>. */
static void limit_usage(const char *addr, const char *name, uint64_t *cur, uint64_t *hw)
{
    json_t *doc = tga_limits(addr);
    json_t *e = tga_limit(doc, name);
    cr_assert_not_null(e, "%s is not registered", name);
    *cur = (uint64_t)json_integer_value(json_object_get(e, "current"));
    *hw = (uint64_t)json_integer_value(json_object_get(e, "high_water"));
    json_decref(doc);
}

static srv_t R;
static tgh_wrap_t W;
static tgh_serve_t SV;

static void rt_fini(void)
{
    tgh_cleanup();
    srv_done(&R);
}

Test(bounds, wrap_registers_every_wired_bound, .fini = rt_fini, .timeout = 60)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char addr[64], cfg[TGH_PATH + 32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tgh_free_port());
    snprintf(cfg, sizeof cfg, "%s/bounds.json", W.dir);
    rt_config(cfg, addr, "", "", "", "", "");
    const char *const args[] = {"--config", cfg, NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, NULL), 0);
    if (tgh_log_wait(W.err, "admin endpoint on", 1, 10000) < 1) {
        char *e = tgh_read_file(W.err, NULL);
        cr_assert_fail("toolgate wrap did not start its admin endpoint: %s", e ? e : "");
    }
    char *rep = calloc(1, REPORT_MAX);
    cr_assert_not_null(rep);
    check_snapshot(addr, 0, rep);
    cr_assert_str_empty(rep, "toolgate wrap's registry does not match tests/test_bounds.c:\n%s",
                        rep);
    free(rep);
    /* The restart budget is in use once the agent crashes and restarts. */
    uint64_t cur, hw;
    limit_usage(addr, "agent.fx.restarts", &cur, &hw);
    cr_assert_eq(cur, 0);
    json_decref(mcp_initialize(&W.tg, 5000));
    mcp_call(&W.tg, 1, "crash", "{}");
    json_t *r = mcp_await_int(&W.tg, 1, 5000, NULL);
    cr_assert(r != NULL && json_object_get(r, "error") != NULL, "the crashed call was not answered");
    json_decref(r);
    cr_assert_eq(tgh_log_wait(W.log, "start ", 2, 5000), 2, "the agent was not restarted");
    limit_usage(addr, "agent.fx.restarts", &cur, &hw);
    cr_assert_eq(cur, 1, "restarts within the window: %llu", (unsigned long long)cur);
    cr_assert_eq(hw, 1);
    tgh_close_stdin(&W.tg);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0, "toolgate wrap did not exit on EOF");
}

Test(bounds, serve_registers_every_wired_bound, .fini = rt_fini, .timeout = 60)
{
    char addr[64];
    cr_assert_eq(tgh_serve_prepare(&SV, "fx"), 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tgh_free_port());

    unsigned run = NEED_SERVE;
    char store[700] = "", limits_extra[64] = "";
    const char *env_url = getenv("TG_REDIS_URL");
    if ((env_url != NULL && env_url[0] != '\0') || redis_server_path() != NULL) {
        srv_any(&R);
        snprintf(store, sizeof store,
                 ",\n \"store\": {\"kind\": \"redis\", \"url\": \"%s\", \"max_pending\": %u}", R.url,
                 RT_STORE_PENDING);
        snprintf(limits_extra, sizeof limits_extra, ", \"concurrency_scope\": \"shared\"");
        run |= NEED_STORE;
    } else {
        fprintf(stderr, "[WARN] no redis (neither TG_REDIS_URL nor redis-server): the store's "
                        "entries are not checked; CI installs redis-server\n");
    }
    char router_extra[TGH_PATH + 400], agent_extra[TGH_PATH * 2 + 96], top_extra[1200];
    snprintf(router_extra, sizeof router_extra,
             ", \"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"}, {\"http\": \"127.0.0.1:0\", "
             "\"agent\": \"fx\", \"max_sessions\": %u, \"max_header_bytes\": \"4Ki\", "
             "\"max_requests_per_connection\": %u, \"max_sessions_per_caller\": %u}]",
             SV.sock, RT_HTTP_SESSIONS, RT_HTTP_REQS, RT_HTTP_PER_CALLER);
    snprintf(agent_extra, sizeof agent_extra,
             ", \"command\": [\"%s/tg_fixture_agent\", \"--log\", \"%s\"]", TG_AGENTS_DIR, SV.log);
    snprintf(top_extra, sizeof top_extra,
             ",\n \"callers\": [{\"name\": \"me\", \"uid\": %u, \"execution_limits\": "
             "{\"rate_limit\": \"9/second\", \"max_concurrent_calls\": 8}}]%s",
             (unsigned)getuid(), store);
    rt_config(SV.cfg, addr, SV.audit, router_extra, agent_extra, limits_extra, top_extra);
    tgh_serve_start(&SV, NULL, NULL, 10000);
    char *rep = calloc(1, REPORT_MAX);
    cr_assert_not_null(rep);
    check_snapshot(addr, run, rep);
    cr_assert_str_empty(rep, "toolgate serve's registry does not match tests/test_bounds.c:\n%s",
                        rep);
    free(rep);
    /* Each caller connection is an instance, counted against max_instances. */
    uint64_t cur, hw;
    limit_usage(addr, "agent.fx.instances", &cur, &hw);
    cr_assert_eq(cur, 0);
    tgh_proc_t c[2];
    for (int i = 0; i < 2; i++) {
        mcp_connect(&c[i], SV.sock);
        json_decref(mcp_initialize(&c[i], 5000));
    }
    limit_usage(addr, "agent.fx.instances", &cur, &hw);
    cr_assert_eq(cur, 2);
    cr_assert_eq(hw, 2);
    tgh_conn_close(&c[0]);
    for (int tries = 0; tries < 100 && cur != 1; tries++) {
        tgh_sleep_ms(50);
        limit_usage(addr, "agent.fx.instances", &cur, &hw);
    }
    cr_assert_eq(cur, 1, "a closed session is still counted");
    cr_assert_eq(hw, 2);
    tgh_conn_close(&c[1]);
    tgh_serve_stop(&SV, 10000);
}
