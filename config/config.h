/* Config model and loader.
 *
 * Everything is held in bytes, milliseconds and counts. A tg_config_t is
 * built by tg_config_default(), then tg_config_load_file() and
 * tg_config_apply_limit() (the CLI's --limit KEY=VALUE) refine it; every
 * limit remembers where its value came from (default, file, --limit) and
 * its config path (for denials: "agents.search.tools.web.rate_limit").
 *
 * Error convention (setup layer): functions return 0 or -1 and fill
 * <err> (tg_cfg_err_t) on failure only, with a message of the form
 *   FILE:LINE:COL: json.path: what is wrong (expected ...)
 * or, for --limit, "--limit KEY=VALUE: KEY: what is wrong (expected ...)".
 *
 * Ownership: tg_config_t owns every string and array reachable from it;
 * tg_config_free() releases them all.
 */
#ifndef TG_CONFIG_CONFIG_H
#define TG_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/units.h"

#define TG_ERR_MAX 512 /* fixed internal bound: error message buffer */

typedef struct tg_cfg_err {
    char msg[TG_ERR_MAX];
} tg_cfg_err_t;

typedef enum tg_src {
    TG_SRC_DEFAULT = 0,
    TG_SRC_FILE,
    TG_SRC_CLI,
    TG_SRC_MANIFEST,
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
#define TG_MAX_RESTARTS_CEIL 1000
#define TG_STDERR_BPS_CEIL (64ull * 1024 * 1024)   /* bytes per second */
#define TG_STDERR_LINE_CEIL (1024ull * 1024)       /* bytes */

/* Fixed internal bounds on config input. */
#define TG_NAME_MAX 128          /* agent ids, tool names, instance */
#define TG_CFG_FILE_MAX (16u * 1024 * 1024) /* bytes of a config file */
#define TG_CFG_AGENTS_MAX 1024   /* agents in one config */
#define TG_CFG_TOOLS_MAX 4096    /* tool entries per agent */
#define TG_CFG_ARGV_MAX 4096     /* command words per agent */
#define TG_CFG_SINKS_MAX 8       /* audit sinks in one config */

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

typedef enum tg_dialect {
    TG_DIALECT_MCP = 0,
    TG_DIALECT_OPENSENTIENCE,
} tg_dialect_t;

typedef struct tg_agent_cfg {
    char *id;          /* name from config, or the command's basename */
    tg_dialect_t dialect;
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
} tg_agent_cfg_t;

typedef enum tg_audit_sink_kind {
    TG_AUDIT_SINK_FILE = 0,
    TG_AUDIT_SINK_STDERR,
} tg_audit_sink_kind_t;

/* When the file sink makes written lines durable. */
typedef enum tg_audit_fsync {
    TG_AUDIT_FSYNC_INTERVAL = 0, /* at most every fsync_interval_ms, off the loop */
    TG_AUDIT_FSYNC_ALWAYS,       /* after every batch, before the next one starts */
    TG_AUDIT_FSYNC_NEVER,        /* left to the kernel */
} tg_audit_fsync_t;

/* One audit sink (audit.sinks[i]). Fields other than <kind> apply to the
 * file sink only. Owned by the tg_config_t holding it (path included). */
typedef struct tg_audit_sink_cfg {
    tg_audit_sink_kind_t kind;
    char *path;                 /* file: JSON lines, appended */
    uint64_t max_bytes;         /* file: rotate before a line would take it past this */
    uint32_t keep;              /* file: rotated files kept, path.1 (newest) .. path.<keep> */
    tg_audit_fsync_t fsync;
    uint64_t fsync_interval_ms; /* file, fsync "interval": at most one fsync per this */
} tg_audit_sink_cfg_t;

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
    tg_agent_cfg_t *agents;
    size_t nagents;
} tg_config_t;

/* A config with DESIGN.md's defaults and one agent (id "agent", no
 * command): the embedded default of wrap mode. 0 or -1 (ENOMEM). */
int tg_config_default(tg_config_t *cfg);

/* Parse <path> (JSON) over <cfg>. Unknown keys are errors (a typo must not
 * silently drop a limit). Keys the file sets override <cfg>; a file
 * "agents" array replaces <cfg>'s agents (each starts from the defaults).
 * Atomic: on failure <cfg> is unchanged (a bad reload keeps the old config).
 * Syntax errors carry jansson's line, column and text; value errors the
 * 1-based line and byte column of the value (or of an unknown key). */
int tg_config_load_file(tg_config_t *cfg, const char *path, tg_cfg_err_t *err);
/* Same from a buffer; <name> is used as FILE in messages. */
int tg_config_load_buffer(tg_config_t *cfg, const char *name, const char *text, size_t len,
                          tg_cfg_err_t *err);

/* Apply one --limit KEY=VALUE to agent <agent_idx>. Keys: max_frame_bytes,
 * max_tool_call_duration, max_concurrent_calls, max_queued_calls,
 * rate_limit, burst, kill_grace_period, tools.NAME.KEY (the per-tool keys). */
int tg_config_apply_limit(tg_config_t *cfg, size_t agent_idx, const char *kv,
                          tg_cfg_err_t *err);

/* Make the audit go to one file sink at <path> with the default rotation
 * and fsync (the CLI's --audit PATH): sets audit_path and drops
 * audit.sinks. 0 or -1 with <err> filled (empty path, out of memory). */
int tg_config_set_audit_path(tg_config_t *cfg, const char *path, tg_cfg_err_t *err);

/* <s> as a <kind> sink with the defaults of DESIGN.md: max_bytes 100Mi,
 * keep 5, fsync "interval" every 1s, no path. */
void tg_config_sink_defaults(tg_audit_sink_cfg_t *s, tg_audit_sink_kind_t kind);

/* Final checks after all sources are merged (e.g. burst vs rate). */
int tg_config_validate(const tg_config_t *cfg, tg_cfg_err_t *err);

/* Replace agent <agent_idx>'s command with a copy of <argv> (NULL-terminated,
 * at least one non-empty word): wrap mode's "-- CMD ARGS...", which takes
 * precedence over the file's command. 0 or -1 with <err> filled. */
int tg_config_set_command(tg_config_t *cfg, size_t agent_idx, char *const argv[],
                          tg_cfg_err_t *err);

/* Write into <buf> (capacity <cap>) the config path that raises limit <key>
 * of agent <a>: "agents.<id>.execution_limits.<key>", or with <tool> not NULL
 * "agents.<id>.tools.<tool>.<key>"; "router.max_frame_bytes" for that key.
 * Used in denials, so <tool> must be a valid tool name (a name from config).
 * Returns the length written, -EINVAL for a bad tool name, -ENOSPC when the
 * path does not fit. */
int tg_config_path_for(const tg_agent_cfg_t *a, const char *tool, const char *key, char *buf,
                       size_t cap);

/* True when [<s>, <s>+<len>) is a valid tool name: 1..TG_NAME_MAX bytes of
 * [A-Za-z0-9._:@/-] (the same check as caller strings in audit events). */
bool tg_config_tool_name_ok(const char *s, size_t len);

/* Readable name of a source: "default", "file", "--limit", "manifest". */
const char *tg_src_name(tg_src_t s);

/* The tool config for <name> in <agent>, or NULL. */
const tg_tool_cfg_t *tg_config_tool(const tg_agent_cfg_t *agent, const char *name, size_t len);

void tg_config_free(tg_config_t *cfg);

#endif
