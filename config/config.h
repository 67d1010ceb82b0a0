/* Config model and loader: the public header of config/ (see README.md).
 *
 * Everything is held in bytes, milliseconds and counts. A tg_config_t is
 * built by tg_config_default(), then tg_config_load_file() and
 * tg_config_apply_limit() (the CLI's --limit KEY=VALUE) refine it; every
 * limit remembers where its value came from (default, file, --limit) and
 * its config path (for denials: "agents.search.tools.web.rate_limit").
 *
 * Error convention (setup layer, config/err.h): functions return 0 or -1
 * and fill <err> on failure only, with a message of the form
 *   FILE:LINE:COL: json.path: what is wrong (expected ...)
 * or, for --limit, "--limit KEY=VALUE: KEY: what is wrong (expected ...)".
 *
 * Every key a config may hold is a row of the key table (config/keys.h),
 * which the loader, --limit, validation and `toolgate check` all read.
 *
 * Ownership: tg_config_t owns every string and array reachable from it;
 * tg_config_free() releases them all.
 */
#ifndef TG_CONFIG_CONFIG_H
#define TG_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/err.h"
#include "config/units.h"

typedef enum tg_src {
    TG_SRC_DEFAULT = 0,
    TG_SRC_FILE,
    TG_SRC_CLI,
    TG_SRC_MANIFEST,
    /* The operator's file value where it was stricter than the agent's
     * manifest asked for (config/manifest.h: the stricter value wins). */
    TG_SRC_CAP,
    /* The default where the operator is silent and the agent's manifest
     * asked for more: the default is the ceiling (DESIGN.md "Config"). */
    TG_SRC_DEFAULT_CAP,
} tg_src_t;

/* Defaults of DESIGN.md. */
#define TG_DEF_MAX_FRAME_BYTES (4u * 1024 * 1024)
#define TG_DEF_CALL_DURATION_MS 15000
#define TG_DEF_MAX_CONCURRENT 3
#define TG_DEF_MAX_QUEUED 16
#define TG_DEF_RATE_COUNT 60
#define TG_DEF_RATE_PERIOD_MS 60000
#define TG_DEF_KILL_GRACE_MS 5000
#define TG_DEF_STDERR_BPS (64u * 1024)
#define TG_DEF_STDERR_LINE (4u * 1024)
#define TG_DEF_MAX_RESTARTS 5
#define TG_DEF_RESTART_WINDOW_MS 60000
#define TG_DEF_BACKOFF_INITIAL_MS 100
#define TG_DEF_BACKOFF_MAX_MS 5000
#define TG_DEF_AUDIT_QUEUE 4096
#define TG_DEF_AUDIT_MAX_BYTES (100ull * 1024 * 1024) /* file sink: rotate past 100 MiB */
#define TG_DEF_AUDIT_KEEP 5                            /* file sink: rotated files kept */
#define TG_DEF_AUDIT_FSYNC_MS 1000                     /* file sink: fsync "interval" */
#define TG_DEF_AUDIT_STREAM "toolgate:audit"           /* redis_stream sink: the key */
#define TG_DEF_AUDIT_MAXLEN 1000000                    /* redis_stream: XADD MAXLEN ~ entries */
#define TG_DEF_AUDIT_SPOOL_BYTES (100ull * 1024 * 1024) /* redis_stream: spool file bound */
#define TG_DEF_AUDIT_REDIS_TIMEOUT_MS 1000             /* redis_stream: connect and command */

/* Resources of an agent instance (DESIGN.md, seeds 001 and 004). */
#define TG_DEF_MEMORY_BYTES (512ull * 1024 * 1024)
#define TG_DEF_CPU_MILLICORES 1000
#define TG_DEF_PIDS 64
#define TG_DEF_DISK_BYTES (1024ull * 1024 * 1024) /* workspace */

/* Upper bounds: every limit can be raised, never made unbounded. */
#define TG_MAX_FRAME_BYTES_CEIL (1024ull * 1024 * 1024) /* 1 GiB */
#define TG_MAX_DURATION_CEIL_MS (24ull * 3600 * 1000)   /* 24 h */
#define TG_MAX_CONCURRENT_CEIL 65536
#define TG_MAX_QUEUED_CEIL 65536
#define TG_MIN_FRAME_BYTES 64                      /* below this no JSON-RPC call fits */
#define TG_KILL_GRACE_CEIL_MS (10ull * 60 * 1000)  /* 10 min */
#define TG_RATE_COUNT_CEIL 1000000                 /* calls per period: T stays >= 1 us */
#define TG_BURST_CEIL 1000000                      /* keeps T * burst below 2^53 us */
#define TG_AUDIT_QUEUE_CEIL (1u << 20)             /* events */
#define TG_AUDIT_MAX_BYTES_MIN 1024                /* a file holds at least a line or so */
#define TG_AUDIT_MAX_BYTES_CEIL (1ull << 40)       /* 1 TiB per audit file */
#define TG_AUDIT_KEEP_CEIL 1000                    /* rotated files: renames per rotation */
#define TG_AUDIT_FSYNC_CEIL_MS (3600ull * 1000)    /* 1 h between fsyncs at most */
#define TG_AUDIT_MAXLEN_CEIL 1000000000ull         /* stream entries kept */
#define TG_AUDIT_SPOOL_MIN 4096                    /* a spool holds at least a line */
#define TG_AUDIT_REDIS_TIMEOUT_CEIL_MS 60000       /* one Redis round trip */
#define TG_AUDIT_STREAM_KEY_MAX 256                /* fixed internal bound: bytes of a stream key */
#define TG_MAX_RESTARTS_CEIL 1000
#define TG_STDERR_BPS_CEIL (64ull * 1024 * 1024)   /* bytes per second */
#define TG_STDERR_LINE_CEIL (1024ull * 1024)       /* bytes */
#define TG_MEMORY_MIN (1024ull * 1024)             /* 1 MiB: no runtime starts below it */
#define TG_MEMORY_CEIL (1ull << 40)                /* 1 TiB */
#define TG_CPU_MIN_MC 10                           /* the cfs minimum: 1 ms per 100 ms period */
#define TG_CPU_CEIL_MC 1024000                     /* 1024 cores */
#define TG_PIDS_CEIL 4194304                       /* PID_MAX_LIMIT of 64-bit Linux */
#define TG_DISK_MIN (1024ull * 1024)               /* 1 MiB */
#define TG_DISK_CEIL (1ull << 44)                  /* 16 TiB */
#define TG_BANDWIDTH_MIN_BPS 1000ull               /* 1Kbps */
#define TG_BANDWIDTH_CEIL_BPS 100000000000ull      /* 100Gbps */
#define TG_CONNECTIONS_CEIL 1048576                /* open connections */

/* Fixed internal bounds on config input. */
#define TG_NAME_MAX 128          /* fixed internal bound: agent ids, tool names, instance */
#define TG_CFG_FILE_MAX (16u * 1024 * 1024) /* fixed internal bound: bytes of a config file */
#define TG_CFG_AGENTS_MAX 1024   /* fixed internal bound: agents in one config */
#define TG_CFG_TOOLS_MAX 4096    /* fixed internal bound: tool entries per agent */
#define TG_CFG_ARGV_MAX 4096     /* fixed internal bound: command words per agent */
#define TG_CFG_SINKS_MAX 8       /* fixed internal bound: audit sinks in one config */
#define TG_CFG_PREFIX_MAX 32     /* fixed internal bound: bytes of a tool prefix */
#define TG_CFG_EXPOSED_NAME_MAX 64 /* fixed internal bound: bytes of an exposed name (LLM APIs) */
#define TG_CFG_POLICY_RULES_MAX 256 /* fixed internal bound: policy.rules entries */
#define TG_MANIFEST_FILE_MAX (1024u * 1024) /* fixed internal bound: bytes of an opensentience.agent.json */

/* Execution limits for one scope (agent or tool). A field whose
 * <*_src> is TG_SRC_DEFAULT in a tool scope means "not set: only the agent
 * limit applies". */
typedef struct tg_exec_limits {
    uint64_t max_tool_call_duration_ms;
    uint32_t max_concurrent_calls;
    uint32_t max_queued_calls;
    tg_rate_t rate_limit;
    uint32_t burst; /* 0 = same as rate_limit.count */
    tg_src_t duration_src, concurrent_src, queued_src, rate_src, burst_src;
    /* tools.NAME.rate_scope "shared": the tool's bucket lives in the store
     * (the agent's own is tg_agent_cfg_t.rate_shared). */
    bool rate_shared;
} tg_exec_limits_t;

typedef struct tg_tool_cfg {
    char *name;
    tg_exec_limits_t lim;
} tg_tool_cfg_t;

typedef enum tg_restart_policy {
    TG_RESTART_NO = 0,
    TG_RESTART_ON_FAILURE,
    TG_RESTART_ALWAYS,
} tg_restart_policy_t;

/* Network access of an agent instance, in increasing strictness (the
 * manifest merge keeps the larger value). */
typedef enum tg_network {
    TG_NET_FULL = 0,  /* the host's network */
    TG_NET_LOOPBACK,  /* an own network namespace with loopback only */
    TG_NET_NONE,      /* an own network namespace without any interface up */
} tg_network_t;

/* The resources of one agent (agents[].resources, the manifest's
 * "resources", --limit memory=...), in bytes, millicores and counts. The
 * network bandwidth and connection count are requests no containment
 * backend enforces but a namespace without a route out (network none):
 * they are in the enforced set as not applied (agent.started, `toolgate
 * check`), and refused under containment.mode "required". */
typedef struct tg_resources {
    uint64_t memory_bytes;
    uint64_t cpu_millicores;
    uint64_t pids;
    uint64_t disk_bytes;      /* the agent's workspace */
    tg_network_t network;
    uint64_t bandwidth_bps;   /* 0 = not limited */
    uint64_t max_connections; /* 0 = not limited */
    tg_src_t memory_src, cpu_src, pids_src, disk_src, network_src, bandwidth_src,
        connections_src;
    uint64_t nofile; /* RLIMIT_NOFILE (resources.nofile.limit) */
    tg_src_t nofile_src;
} tg_resources_t;

/* containment.workspace_backend: how an agent's workspace size is held
 * (limits/contain.h). "auto" picks tmpfs where this host lets toolgate
 * mount one in a private mount namespace, else scan. */
typedef enum tg_workspace_backend {
    TG_WORKSPACE_AUTO = 0,
    TG_WORKSPACE_TMPFS, /* a tmpfs of the disk size, per instance, in its own mount namespace */
    TG_WORKSPACE_SCAN,  /* a per-instance directory whose size the monitor scans */
} tg_workspace_backend_t;

#define TG_WORKSPACE_PATH_MAX 512 /* fixed internal bound: bytes of agents[].workspace */

/* containment.mode (DESIGN.md "Containment"); same order as limits'
 * tg_contain_mode_t, which config cannot include. */
typedef enum tg_containment_mode {
    TG_CONTAINMENT_BEST_EFFORT = 0,
    TG_CONTAINMENT_REQUIRED,
    TG_CONTAINMENT_OFF,
} tg_containment_mode_t;

struct tg_manifest; /* config/manifest.h */

typedef enum tg_dialect {
    TG_DIALECT_MCP = 0,
    TG_DIALECT_OPENSENTIENCE,
} tg_dialect_t;

/* agents[].start: when an agent's instance is started in serve mode. */
typedef enum tg_start {
    TG_START_EAGER = 0, /* at serve start (opensentience default) */
    TG_START_ON_DEMAND, /* at the first call routed to it */
} tg_start_t;

/* What a peer's over-cap frame costs it (its header is refused alone). */
typedef enum tg_on_oversize {
    TG_OVERSIZE_REJECT = 0, /* answer frame_too_large, skip the payload, go on */
    TG_OVERSIZE_CLOSE,      /* answer, then close the connection (agent: restart it) */
} tg_on_oversize_t;

/* OpenSentience agents (agents[].opensentience). */
#define TG_DEF_OS_HEARTBEAT_MS (5u * 1000)            /* core.welcome heartbeat_interval_ms */
#define TG_DEF_OS_HEARTBEAT_TIMEOUT_MS (15u * 1000)   /* no heartbeat this long: unhealthy */
#define TG_OS_HEARTBEAT_MIN_MS 10                     /* heartbeat_interval, heartbeat_timeout */
#define TG_OS_HEARTBEAT_CEIL_MS (3600ull * 1000)      /* 1 h */
#define TG_DEF_OS_IDEM_WINDOW_MS (10ull * 60 * 1000)  /* idempotent results replayed this long */
#define TG_OS_IDEM_WINDOW_CEIL_MS (24ull * 3600 * 1000)
#define TG_DEF_OS_IDEM_MAX_BYTES (16ull * 1024 * 1024) /* cached results per agent */
#define TG_OS_IDEM_MAX_BYTES_CEIL (1ull << 30)
#define TG_DEF_LISTEN_MAX_CONNECTIONS 256u     /* callers of one listener */
#define TG_LISTEN_MAX_CONNECTIONS_CEIL 65536u

typedef struct tg_os_cfg {
    uint64_t heartbeat_interval_ms; /* announced in core.welcome */
    uint64_t heartbeat_timeout_ms;  /* unhealthy after this long without one; the hello deadline */
    uint64_t idempotency_window_ms; /* a completed result is replayed this long */
    uint64_t idempotency_max_bytes; /* cached results of one agent; oldest evicted first */
    tg_on_oversize_t on_oversize;   /* an over-cap frame from the agent */
    bool set;                       /* "opensentience" was given (an mcp agent refuses it) */
} tg_os_cfg_t;

typedef struct tg_agent_cfg {
    char *id;          /* name from config, or the command's basename */
    tg_dialect_t dialect;
    tg_start_t start;  /* serve: eager or on demand (mcp: per connection, on demand only) */
    bool start_set;
    tg_os_cfg_t os;    /* dialect opensentience only */
    char **command;    /* argv, NULL-terminated; NULL in wrap mode until the CLI sets it */
    tg_exec_limits_t lim;
    tg_tool_cfg_t *tools;
    size_t ntools;
    uint64_t kill_grace_ms;
    tg_src_t kill_grace_src;
    tg_restart_policy_t restart_policy;
    uint32_t max_restarts;
    uint64_t restart_window_ms;
    uint64_t backoff_initial_ms;
    uint64_t backoff_max_ms;
    uint64_t stderr_bytes_per_sec;
    uint64_t stderr_line_max;
    uint32_t max_instances; /* serve: instances at once (one per MCP caller connection) */
    /* serve: the agent's environment is only env.pass (names copied from
     * toolgate's own environment) plus env.set ("NAME=VALUE"); wrap mode
     * passes the caller's environment unchanged. NULL-terminated. */
    char **env_pass;
    char **env_set;
    char *cwd; /* working directory, or NULL: toolgate's */
    /* agents[].workspace, --limit workspace=: a directory whose size is
     * resources.disk.limit (containment.workspace_backend), the agent's
     * working directory unless <cwd> is set; NULL: none. Absolute and
     * normalised (tg_config_workspace_check). */
    char *workspace;
    bool rate_shared;  /* execution_limits.rate_scope "shared": the agent's bucket is in the store */
    bool shared_lease; /* execution_limits.shared_mode "lease" (else "exact") */
    /* execution_limits.concurrency_scope "shared": max_concurrent_calls is a
     * fleet-wide cap held as leased slots in the store (needs a redis store) */
    bool conc_shared;
    /* Effective resources: defaults, agents[].resources, --limit, merged
     * with the manifest's requests when there is one. */
    tg_resources_t res;
    /* agents[].manifest: what the manifest asked for and what the
     * operator set before the merge; NULL without a manifest. Owned. */
    struct tg_manifest *manifest;
    /* agents[].tool_prefix: what the agent's tools, prompts are prefixed
     * with ("<prefix>__<name>") on a listener with "agents"; "" for none;
     * NULL: the agent id. Checked by tg_cfg_prefix_check. Owned. */
    char *tool_prefix;
} tg_agent_cfg_t;

typedef enum tg_audit_sink_kind {
    TG_AUDIT_SINK_FILE = 0,
    TG_AUDIT_SINK_STDERR,
    TG_AUDIT_SINK_REDIS_STREAM,
} tg_audit_sink_kind_t;

/* The Redis server a redis_stream sink writes to, as parsed from its URL.
 * Same fields and sizes as the store's parsed URL (limits/store.h,
 * tg_store_url_t), which is what fills it: the config loader keeps the URL
 * text only, and whoever opens the audit pipe parses it into this. */
typedef struct tg_audit_redis_ep {
    bool is_unix;
    char host[256];     /* tcp: name or IP literal */
    uint16_t port;
    char path[108];     /* unix socket */
    char user[256];     /* "" = AUTH with the password alone */
    char password[256]; /* "" = no AUTH */
    uint32_t db;        /* SELECT when not 0 */
} tg_audit_redis_ep_t;

/* When the file sink makes written lines durable. */
typedef enum tg_audit_fsync {
    TG_AUDIT_FSYNC_INTERVAL = 0, /* at most every fsync_interval_ms, off the loop */
    TG_AUDIT_FSYNC_ALWAYS,       /* after every batch, before the next one starts */
    TG_AUDIT_FSYNC_NEVER,        /* left to the kernel */
} tg_audit_fsync_t;

/* One audit sink (audit.sinks[i]). Owned by the tg_config_t holding it
 * (its strings included). */
typedef struct tg_audit_sink_cfg {
    tg_audit_sink_kind_t kind;
    char *path;                 /* file: JSON lines, appended */
    uint64_t max_bytes;         /* file: rotate before a line would take it past this */
    uint32_t keep;              /* file: rotated files kept, path.1 (newest) .. path.<keep> */
    tg_audit_fsync_t fsync;
    uint64_t fsync_interval_ms; /* file, fsync "interval": at most one fsync per this */
    char *url;                  /* redis_stream: as configured; may hold a password */
    tg_audit_redis_ep_t ep;     /* redis_stream: <url> parsed, filled before tg_audit_open */
    char *stream;               /* redis_stream: the stream's key; NULL = TG_DEF_AUDIT_STREAM */
    uint64_t maxlen;            /* redis_stream: XADD MAXLEN ~ this */
    char *spool;                /* redis_stream: lines wait here while Redis is away */
    uint64_t spool_max_bytes;   /* redis_stream: beyond this, lines are lost (and counted) */
    uint64_t timeout_ms;        /* redis_stream: connect and command timeout */
} tg_audit_sink_cfg_t;

#define TG_DEF_MAX_INSTANCES 8
#define TG_DEF_IDLE_TIMEOUT_MS 30000
#define TG_DEF_FRAME_TIMEOUT_MS 10000
#define TG_DEF_HANDSHAKE_TIMEOUT_MS 10000
#define TG_DEF_RELOAD_DRAIN_TIMEOUT_MS 300000
#define TG_MAX_INSTANCES_CEIL 1024
#define TG_CFG_LISTEN_MAX 64   /* fixed internal bound: listeners */
#define TG_CFG_CALLERS_MAX 256 /* fixed internal bound: callers[] entries */

/* Admin endpoint bounds (router.admin as an object). */
#define TG_ADMIN_DEF_MAX_HEADER_BYTES    8192u
#define TG_ADMIN_MIN_HEADER_BYTES        256u
#define TG_ADMIN_MAX_HEADER_BYTES_CEIL   65536u
#define TG_ADMIN_DEF_MAX_CONNECTIONS     16u
#define TG_ADMIN_MAX_CONNECTIONS_CEIL    1024u
#define TG_ADMIN_DEF_IDLE_TIMEOUT_MS     10000u
#define TG_ADMIN_MIN_IDLE_TIMEOUT_MS     10u
#define TG_ADMIN_IDLE_TIMEOUT_CEIL_MS    600000u
#define TG_ADMIN_DEF_MAX_RESPONSE_BYTES  (16u * 1024 * 1024)
#define TG_ADMIN_MIN_RESPONSE_BYTES      (64u * 1024)
#define TG_ADMIN_MAX_RESPONSE_BYTES_CEIL (256u * 1024 * 1024)

/* Store tuning (store.*): defaults and ceilings. */
#define TG_STORE_DEF_CONNECT_TIMEOUT_MS 1000  /* connect + AUTH + SELECT + SCRIPT LOAD */
#define TG_STORE_DEF_DEAD_AFTER_MS      1000  /* no reply at all for this long: reconnect */
#define TG_STORE_DEF_BACKOFF_INITIAL_MS 100   /* first reconnect delay */
#define TG_STORE_DEF_BACKOFF_MAX_MS     250   /* reconnect delay ceiling: bounds recovery */
#define TG_STORE_DEF_MAX_PENDING        65536 /* calls in flight on the connection */
#define TG_STORE_DEF_LOCAL_MAX_KEYS     65536 /* buckets in one local table */
#define TG_STORE_DEF_LEASE_MS           1000  /* lease lifetime (lease mode) */
#define TG_STORE_DEF_SLOT_LEASE_MS      10000 /* a shared concurrency slot without renewal */
#define TG_STORE_SLOT_LEASE_MIN_MS      1000  /* renewed every lease / 3: leave room for round trips */
#define TG_STORE_DURATION_CEIL_MS       600000   /* any store.* duration */
#define TG_STORE_MAX_PENDING_CEIL       1048576  /* store.max_pending */
#define TG_STORE_LOCAL_MAX_KEYS_CEIL    16777216 /* store.local_max_keys */

/* RLIMIT_NOFILE of an agent instance (resources.nofile). */
#define TG_CONTAIN_DEF_NOFILE 1024u
#define TG_NOFILE_CEIL 1048576u

/* store: where shared rate buckets live (DESIGN.md "Rate limits"). */
typedef struct tg_store_cfg {
    bool redis;               /* kind "redis"; else "local" (nothing shared) */
    char *url;                /* redis://[user:password@]host:port/db or unix:/path?db=N */
    uint64_t timeout_ms;      /* one store call; default 50 */
    int on_store_error;       /* 0 local, 1 open, 2 closed (limits/store.h order) */
    uint32_t instances;       /* toolgates sharing the limits (local fallback share); default 1 */
    char *prefix;             /* key prefix, NULL: the store's default */
    /* 0 = the TG_STORE_DEF_* default */
    uint64_t connect_timeout_ms, dead_after_ms, backoff_ms, max_backoff_ms, lease_ms;
    uint64_t slot_lease_ms; /* shared concurrency slots: lifetime without renewal */
    uint32_t max_pending, local_max_keys;
} tg_store_cfg_t;

/* HTTP listeners (router.listen[].http): defaults and bounds. */
#define TG_HTTP_DEF_PATH "/mcp"
#define TG_HTTP_PATH_MAX 256                       /* fixed internal bound: endpoint path bytes */
#define TG_HTTP_DEF_MAX_HEADER_BYTES (16u * 1024)
#define TG_HTTP_MIN_HEADER_BYTES 256u
#define TG_HTTP_MAX_HEADER_BYTES_CEIL 65536u
#define TG_HTTP_DEF_MAX_REQUESTS 10000u            /* requests on one connection */
#define TG_HTTP_MAX_REQUESTS_CEIL 1000000u
#define TG_HTTP_DEF_HEADER_TIMEOUT_MS 10000u       /* a request head arriving (slowloris) */
#define TG_HTTP_DEF_KEEPALIVE_TIMEOUT_MS 60000u    /* an idle keep-alive connection */
#define TG_HTTP_MIN_TIMEOUT_MS 10u
#define TG_HTTP_TIMEOUT_CEIL_MS (3600ull * 1000)
#define TG_HTTP_DEF_MAX_SESSIONS 256u              /* MCP sessions of one listener */
#define TG_HTTP_DEF_SESSIONS_PER_CALLER 64u        /* of one caller on one listener */
#define TG_HTTP_MAX_SESSIONS_CEIL 65536u
#define TG_HTTP_DEF_SESSION_IDLE_MS (30ull * 60 * 1000) /* a session with no request, no stream */
#define TG_HTTP_SESSION_IDLE_CEIL_MS (7ull * 24 * 3600 * 1000)
#define TG_HTTP_ORIGINS_MAX 64                     /* fixed internal bound: allowed_origins */

/* router.listen[]: a Unix socket serving one MCP agent, or (dialect
 * opensentience) every opensentience agent, calls routed by tool_id; or an
 * MCP Streamable HTTP endpoint (http) serving one MCP agent. */
typedef struct tg_listen_cfg {
    char *unix_path;
    char *http_addr;          /* "HOST:PORT": an HTTP listener (NULL: a Unix one) */
    char *http_path;          /* the endpoint's path; default TG_HTTP_DEF_PATH */
    char *tls_cert, *tls_key; /* PEM files; both NULL: plain HTTP */
    bool tls_off;             /* "tls": "off": plain HTTP off loopback, said on purpose */
    char **allowed_origins;   /* NULL-terminated; NULL: no Origin header is accepted */
    uint32_t max_header_bytes, max_requests, max_sessions, sessions_per_caller;
    uint64_t header_timeout_ms, keepalive_timeout_ms, session_idle_ms;
    char *agent;   /* mcp: agent id, checked against agents[] by tg_config_validate;
                    * NULL for opensentience and when <agents> is given */
    /* mcp: router.listen[].agents, the <nagents> (1..TG_CFG_AGENTS_MAX,
     * distinct) ids of the agents one endpoint fronts together, in config
     * order, their tools prefixed; NULL (0) when <agent> is given. Owned. */
    char **agents;
    size_t nagents;
    uint32_t mode; /* socket file mode, default 0660 */
    tg_dialect_t dialect;
    tg_on_oversize_t on_oversize; /* opensentience: a caller's over-cap frame */
    uint32_t max_connections;     /* callers connected at once; 0 = the default */
    int64_t owner; /* uid to chown the socket file to; -1: toolgate's own */
    int64_t group; /* gid, likewise */
} tg_listen_cfg_t;

/* The agent listener <lc> names first: its one "agent", or the first of
 * its "agents" (NULL for an opensentience listener). */
static inline const char *tg_listen_first_agent(const tg_listen_cfg_t *lc)
{
    return lc->nagents > 0 ? lc->agents[0] : lc->agent;
}

/* Bearer tokens and JWTs of callers[] (the HTTP front: router/auth/). */
#define TG_TOKEN_DIGEST_BYTES 32            /* fixed internal bound: a SHA-256 digest */
#define TG_TOKEN_DIGEST_TEXT  (7 + 64)      /* "sha256:" and 64 hex digits */
#define TG_CALLER_TOKENS_MAX  16            /* fixed internal bound: tokens of one caller */
#define TG_JWKS_FILE_MAX      (64u * 1024)  /* fixed internal bound: a JWKS file's bytes */
#define TG_JWKS_KEYS_MAX      16            /* fixed internal bound: keys in one JWKS */
#define TG_JWT_LEEWAY_CEIL_MS 600000u       /* callers[].jwt.leeway: at most 10 minutes */
#define TG_DEF_JWT_LEEWAY_MS  30000u
#define TG_DEF_JWT_CLAIM      "sub"

/* callers[].jwt: which JWTs name this caller. Strings owned by the caller
 * entry (freed with it). */
typedef struct tg_jwt_cfg {
    char *issuer;      /* "iss" must equal it */
    char *audience;    /* "aud" (a string, or an array) must hold it */
    char *jwks_file;   /* absolute path of the public keys (JWKS), shape-checked at load */
    char *claim;       /* the claim whose value must be the caller's name; default "sub" */
    uint64_t leeway_ms; /* clock skew allowed on exp, nbf and iat */
} tg_jwt_cfg_t;

/* callers[]: who a peer is (by uid or gid from SO_PEERCRED, or by a bearer
 * token or JWT over HTTP) and the limits that apply to it on top of agent
 * and tool limits. */
typedef struct tg_caller_cfg {
    char *name;
    int64_t uid; /* -1: any */
    int64_t gid; /* -1: any */
    tg_exec_limits_t lim; /* rate_limit, burst, max_concurrent_calls (src DEFAULT = unset) */
    /* callers[].tokens: SHA-256 digests of its bearer tokens (never the
     * tokens), <ntokens> of them; owned, wiped when freed. */
    uint8_t (*tokens)[TG_TOKEN_DIGEST_BYTES];
    size_t ntokens;
    bool has_jwt; /* callers[].jwt is set: <jwt> holds it */
    tg_jwt_cfg_t jwt;
} tg_caller_cfg_t;

typedef struct tg_config {
    char *path;            /* file the config came from, or NULL */
    char *instance;        /* router.instance; default: hostname */
    uint64_t max_frame_bytes;
    tg_src_t max_frame_src;
    /* Audit sinks: <audit_sinks> when naudit_sinks > 0 (audit.sinks),
     * else one file sink with the default rotation and fsync on
     * <audit_path> (audit.path, --audit), or on the default path when NULL
     * ($XDG_STATE_HOME/toolgate/audit.jsonl). A file setting one clears
     * the other. */
    char *audit_path;
    tg_audit_sink_cfg_t *audit_sinks;
    size_t naudit_sinks;
    uint32_t audit_queue;  /* audit queue capacity in events */
    tg_containment_mode_t containment_mode; /* containment.mode, --limit containment= */
    uint64_t min_free_memory; /* containment.min_free_memory: 0 = no pre-flight check */
    tg_workspace_backend_t workspace_backend; /* containment.workspace_backend, --limit */
    tg_src_t containment_src;
    tg_agent_cfg_t *agents;
    size_t nagents;
    tg_listen_cfg_t *listen;
    size_t nlisten;
    tg_caller_cfg_t *callers;
    size_t ncallers;
    bool callers_only; /* router.callers_only: unknown peers are refused */
    char *admin_addr;  /* router.admin / --admin: loopback HOST:PORT of the admin HTTP, or NULL */
    /* router.admin as an object: its bounds; 0 = the TG_ADMIN_DEF_* default */
    uint32_t admin_max_header_bytes, admin_max_connections, admin_idle_timeout_ms,
        admin_max_response_bytes;
    uint64_t idle_timeout_ms; /* router.idle_timeout: a serve caller not reading its answers
                               * this long is disconnected (default 30s) */
    uint64_t frame_timeout_ms; /* router.frame_timeout: a frame a serve caller has begun must
                                * be complete this long after its first byte (default 10s) */
    uint64_t handshake_timeout_ms; /* router.handshake_timeout: a serve connection without a
                                    * complete initialize this long is closed (default 10s) */
    uint64_t reload_drain_timeout_ms; /* router.reload_drain_timeout: sessions of an agent a
                                       * reload replaced run on this long (default 5m; 0: none) */
    tg_store_cfg_t store;
    /* The top-level "policy" object as the file gave it (a new reference,
     * its shape checked by the loader, json_decref'd by tg_config_free),
     * or NULL when absent. The router builds its tg_policy_t from it
     * (router/auth/policy.h, tg_policy_from_json). */
    struct json_t *policy;
} tg_config_t;

/* A config with DESIGN.md's defaults and one agent (id "agent", no
 * command): the embedded default of wrap mode. 0 or -1 (ENOMEM). */
int tg_config_default(tg_config_t *cfg);

/* Name the run <cfg> describes when router.instance is the default (the
 * host name): HOST-<tag>-PID (the host part cut to fit TG_NAME_MAX; <tag>
 * dropped when it does not fit), so that runs writing one audit file or
 * Redis stream (the wraps one MCP client launches, two serves on one
 * host) are told apart and `toolgate audit verify` checks each run on its
 * own. wrap's <tag> is its agent id, serve's "serve". A configured name
 * is kept. Call it once the config is loaded; the same process gets the
 * same name again (a reload). 0 or -ENOMEM. */
int tg_config_name_run(tg_config_t *cfg, const char *tag);

/* Parse <path> (JSON) over <cfg>. Unknown keys are errors (a typo must not
 * silently drop a limit). Keys the file sets override <cfg>; a file
 * "agents" array replaces <cfg>'s agents (each starts from the defaults).
 * Atomic: on failure <cfg> is unchanged (a bad reload keeps the old config).
 * Syntax errors carry jansson's line, column and text; value errors the
 * 1-based line and byte column of the value (or of an unknown key). */
int tg_config_load_file(tg_config_t *cfg, const char *path, tg_err_t *err);
/* Same from a buffer; <name> is used as FILE in messages. */
int tg_config_load_buffer(tg_config_t *cfg, const char *name, const char *text, size_t len,
                          tg_err_t *err);

/* Apply one --limit KEY=VALUE to agent <agent_idx>. Keys: max_frame_bytes,
 * max_tool_call_duration, max_concurrent_calls, max_queued_calls,
 * rate_limit, burst, kill_grace_period, the resources memory, cpu, pids,
 * disk, network (none|loopback|full), containment
 * (best_effort|required|off), workspace (a path), workspace_backend
 * (auto|tmpfs|scan), and tools.NAME.KEY (the per-tool keys).
 * For an agent with a manifest, an execution limit or resource is the
 * operator's value: the manifest's request still wins where it is
 * stricter (config/manifest.h). */
int tg_config_apply_limit(tg_config_t *cfg, size_t agent_idx, const char *kv,
                          tg_err_t *err);

/* Make the audit go to one file sink at <path> with the default rotation
 * and fsync (the CLI's --audit PATH): sets audit_path and drops
 * audit.sinks. 0 or -1 with <err> filled (empty path, out of memory). */
int tg_config_set_audit_path(tg_config_t *cfg, const char *path, tg_err_t *err);

/* <s> as a <kind> sink with the defaults: max_bytes 100Mi, keep 5, fsync
 * "interval" every 1s; maxlen 1000000, spool_max_bytes 100Mi, timeout 1s;
 * no path, url, stream (the default key) or spool. */
void tg_config_sink_defaults(tg_audit_sink_cfg_t *s, tg_audit_sink_kind_t kind);

/* Final checks after all sources are merged (e.g. burst vs rate; under
 * containment.mode "required", network bandwidth or connection requests
 * no backend enforces). When they pass, the config being final, each
 * limit an agent's manifest asked more of than it got is said once
 * through tg_notice (config/manifest.h, config/err.h). */
int tg_config_validate(const tg_config_t *cfg, tg_err_t *err);

/* Replace agent <agent_idx>'s command with a copy of <argv> (NULL-terminated,
 * at least one non-empty word): wrap mode's "-- CMD ARGS...", which takes
 * precedence over the file's command. 0 or -1 with <err> filled. */
int tg_config_set_command(tg_config_t *cfg, size_t agent_idx, char *const argv[],
                          tg_err_t *err);

/* Write into <buf> (capacity <cap>) the config path that raises limit <key>
 * of agent <a>: "agents.<id>.execution_limits.<key>", or with <tool> not NULL
 * "agents.<id>.tools.<tool>.<key>"; "router.max_frame_bytes" for that key;
 * "agents.<id>.resources.<key>.limit" for memory, cpu, pids and disk,
 * "agents.<id>.resources.network" and ".network.<key>" for the network's.
 * Used in denials, so <tool> must be a valid tool name (a name from config).
 * Returns the length written, -EINVAL for a bad tool name, -ENOSPC when the
 * path does not fit. */
int tg_config_path_for(const tg_agent_cfg_t *a, const char *tool, const char *key, char *buf,
                       size_t cap);

/* True when [<s>, <s>+<len>) is a valid tool name: 1..TG_NAME_MAX bytes of
 * [A-Za-z0-9._:@/-] (the same check as caller strings in audit events). */
bool tg_config_tool_name_ok(const char *s, size_t len);

/* Whether <p> (<len> bytes) may prefix exposed names (an agents[].tool_prefix,
 * or the id of an agent a listener's "agents" fronts without one): at most
 * TG_CFG_PREFIX_MAX bytes of [A-Za-z0-9_.-], no "__" (the separator, so the
 * first "__" of an exposed name ends its prefix), not ending in '_'. ""
 * is accepted (no prefix). 0, or -EINVAL with what is wrong (not repeating
 * <p>) in <msg> (<cap> bytes, NUL-terminated; untouched on success, may be
 * NULL). Pure. */
int tg_cfg_prefix_check(const char *p, size_t len, char *msg, size_t cap);

/* Readable name of a source: "default", "file", "--limit", "manifest",
 * "operator cap", "default cap". */
const char *tg_src_name(tg_src_t s);

/* "full", "loopback", "none". */
const char *tg_network_name(tg_network_t n);

/* "best_effort", "required", "off". */
const char *tg_containment_mode_name(tg_containment_mode_t m);

/* "auto", "tmpfs", "scan". */
const char *tg_workspace_backend_name(tg_workspace_backend_t b);

/* Whether <path> may be a workspace: absolute, at most
 * TG_WORKSPACE_PATH_MAX - 1 bytes, no control bytes, no empty, "." or
 * ".." component, no trailing '/', not "/" and not under /proc, /sys or
 * /dev. 0, or -EINVAL with the reason in <why> (capacity <cap>), which
 * does not repeat the path. Pure. */
int tg_config_workspace_check(const char *path, char *why, size_t cap);

/* <r> at DESIGN.md's defaults (memory 512Mi, cpu 1000m, pids 64, disk 1Gi,
 * network full), every source TG_SRC_DEFAULT. */
void tg_resources_default(tg_resources_t *r);

/* The tool config for <name> in <agent>, or NULL. */
const tg_tool_cfg_t *tg__config_tool_find(const tg_agent_cfg_t *agent, const char *name,
                                          size_t len);
/* Inline for the agent without tools (the common case): no call. */
static inline const tg_tool_cfg_t *tg_config_tool(const tg_agent_cfg_t *agent, const char *name,
                                                  size_t len)
{
    if (agent == NULL || agent->ntools == 0 || name == NULL)
        return NULL;
    return tg__config_tool_find(agent, name, len);
}

/* Parse a token digest as callers[].tokens holds it: "sha256:" and 64 hex
 * digits (either case), <len> bytes at <s>, into <out>. 0, or -1 with the
 * reason in <why> (capacity <cap>), which never echoes <s>. Pure. */
int tg_config_token_digest_parse(const char *s, size_t len, uint8_t out[TG_TOKEN_DIGEST_BYTES],
                                 char *why, size_t cap);

/* Check the shape of JWKS text <text> (<len> bytes): an object whose
 * "keys" holds 1 to TG_JWKS_KEYS_MAX public keys, each RSA ("n", "e") or
 * EC P-256 ("crv", "x", "y"), base64url, with an optional "kid", an "alg"
 * that fits the key type (RS256, ES256) and "use" "sig"; private members
 * refused. 0, or -1 with the reason (naming keys[i]) in <why>. The keys
 * themselves are read by router/auth (OpenSSL). Pure. */
int tg_config_jwks_check(const char *text, size_t len, char *why, size_t cap);

/* Read JWKS file <path> (a regular file of at most TG_JWKS_FILE_MAX bytes)
 * and check its shape (tg_config_jwks_check): 0 with the text in *text
 * (<*len> bytes, the caller frees it), or -1 with the reason, naming the
 * file, in <why>. */
int tg_config_jwks_read(const char *path, char **text, size_t *len, char *why, size_t cap);

void tg_config_free(tg_config_t *cfg);

#endif
