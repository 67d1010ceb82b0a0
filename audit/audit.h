/* Audit: the event model, the secret-free encoder and the sinks.
 *
 * Secret-free by construction: an event holds only numbers, enums, names
 * from config, ids toolgate made, and caller-supplied strings that pass
 * tg_audit_safe_str ([A-Za-z0-9._:@/-], 1..128 bytes; otherwise the
 * encoder writes "invalid"). There is no field for free text: tool
 * arguments, results, environment, tokens, agent stderr and agent error
 * text have nowhere to go.
 *
 * Runtime convention: 0 or a negative errno. tg_audit_emit never blocks
 * the loop: the encoded line goes to a bounded queue drained by the sink
 * on the libuv threadpool; when the queue is full the event is counted as
 * dropped and an audit.dropped event (with the count) is written as soon
 * as there is room again. seq is per instance, from 1, with no gaps among
 * written events other than those reported by audit.dropped.
 *
 * A sink that fails (a full disk) does not stop toolgate: its lost lines
 * are counted as above, and the pipe logs once when it starts failing and
 * once when it writes again (tg_audit_opts_t.log). A file sink whose file
 * is deleted or moved away while in use opens a new one at its path and
 * the pipe audits it as audit.reopened (reason "deleted" or "moved"; with
 * "deleted", count is the lines written again into the new file).
 */
#ifndef TG_AUDIT_AUDIT_H
#define TG_AUDIT_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"

#define TG_AUDIT_LINE_MAX 4096    /* fixed internal bound: one encoded event */
#define TG_AUDIT_SAFE_MAX 128     /* fixed internal bound: longest caller string written as-is */
#define TG_AUDIT_FLUSH_MS 20      /* fixed internal bound: max delay before queued lines are written */
#define TG_AUDIT_SCHEMA_VERSION 1

#define TG_AUDIT_ABSENT INT64_MIN /* value of an unset numeric field */

/* One event. Initialise with tg_audit_ev_init (all fields absent), set
 * what applies. Strings are borrowed for the duration of the call.
 * Fields marked (checked) are caller-supplied and pass tg_audit_safe_str;
 * the others must be names from config, enums or toolgate's own ids. */
typedef struct tg_audit_ev {
    const char *event;          /* "call.completed", ... */
    const char *request_id;     /* toolgate's id for the call ("tg-...") */
    const char *correlation_id; /* (checked) */
    const char *call_id;        /* (checked) the caller's JSON-RPC id, as text */
    const char *agent;
    const char *tool;           /* (checked) */
    const char *exposed_tool;   /* (checked) the name a front of several agents shows the
                                 * tool (or prompt) under: "fs__read_file" (issue 22) */
    const char *caller;
    const char *front;          /* enum: the session's front, "http", "unix" or "stdio" */
    const char *session;        /* toolgate's digest of an HTTP session id (never the id) */
    const char *remote;         /* the peer as toolgate formats it: "127.0.0.1:5123",
                                 * "[::1]:5123", "uid:1000" */
    const char *status;         /* enum: "ok", "error", "denied", "timeout", ... */
    const char *code;           /* denial code: "rate_limit_exceeded", ... */
    const char *stage;          /* how a call ended: "timed_out", "cancelled", "killed" */
    const char *decided_by;     /* shared rate: "store", "local_fallback", "open", "closed" */
    const char *reason;         /* enum-like words chosen by toolgate only */
    const char *key;            /* config.rejected: the config key whose change needs a
                                 * restart ("agents[1].resources.memory"): a path of the key
                                 * table with indexes and names from config, never a value */
    struct {
        const char *type;       /* "rate", "concurrency", "frame", "timeout", ... */
        const char *scope;      /* "agent", "tool", "caller", "instance" */
        const char *name;       /* registry name */
        int64_t observed;
        int64_t cap;
    } limit;                    /* present when limit.type != NULL */
    int64_t duration_ms;
    int64_t bytes_in;
    int64_t bytes_out;
    int64_t retry_after_ms;
    int64_t count;              /* audit.dropped: events lost; others: a count */
    int64_t pid;
    int64_t attempt;            /* agent.restarting */
    int64_t backoff_ms;
    struct {
        int64_t code;           /* exit status, or TG_AUDIT_ABSENT */
        int64_t signal;         /* terminating signal, or TG_AUDIT_ABSENT */
        int64_t memory_peak;    /* the instance's peak memory in bytes, or TG_AUDIT_ABSENT */
        const char *reason;     /* "exited", "crashed", "killed", ... */
    } exit;                     /* present when exit.reason != NULL */
    /* agent.started: the enforcement report as a JSON object that toolgate
     * built itself from numbers and enums (tg_enforced_json); never text
     * from a peer. Written as is. */
    const char *enforced_json;
} tg_audit_ev_t;

void tg_audit_ev_init(tg_audit_ev_t *ev);

/* True when <s> (length <len>) may be written as-is: 1..128 bytes of
 * [A-Za-z0-9._:@/-]. */
bool tg_audit_safe_str(const char *s, size_t len);

/* Pure encoder: one JSON line (with the trailing '\n') into <buf>.
 * Returns its length, or -ENOSPC when it does not fit (no partial line),
 * or -EINVAL when <ev>->event or <instance> is NULL or <ts_ms> is outside
 * years 0000..9999. <ts_ms> is milliseconds since the epoch, written as
 * RFC 3339 UTC with ms. */
long tg_audit_encode(char *buf, size_t cap, const tg_audit_ev_t *ev, uint64_t seq, int64_t ts_ms,
                     const char *instance);

typedef struct tg_audit tg_audit_t;

/* How much a line for toolgate's log matters: a file reopened (logrotate
 * moved it) or a sink writing normally again is news, a sink back after
 * losing events a warning, a sink failing an error. */
typedef enum tg_audit_news {
    TG_AUDIT_NEWS_INFO,
    TG_AUDIT_NEWS_WARN,
    TG_AUDIT_NEWS_ERROR,
} tg_audit_news_t;

/* A line for toolgate's own log at <level>: one sentence without a
 * prefix or a newline, naming the sink (a file's path, "stderr", a
 * stream's key) and what happened. Called on the loop thread. Holds only
 * paths and keys from config, errno texts and counts. */
typedef void (*tg_audit_log_fn)(void *ctx, tg_audit_news_t level, const char *line);

/* Where events go: <sinks> (copied at open) when <nsinks> > 0, else one
 * file sink on <path> with the default rotation and fsync of config.h.
 * The router passes cfg->audit_sinks / cfg->naudit_sinks and
 * cfg->audit_path (or the default path). */
typedef struct tg_audit_opts {
    const char *path;     /* file sink path (JSON lines, appended, 0600, dirs made) */
    const tg_audit_sink_cfg_t *sinks; /* 1..TG_CFG_SINKS_MAX sinks, or NULL */
    size_t nsinks;
    const char *instance; /* instance name for every event */
    uint32_t queue_cap;   /* bounded queue, events */
    /* Optional (NULL: say nothing): where the pipe tells the operator, once
     * per episode, that a sink started failing and that it recovered, and
     * that a sink's file was deleted or moved and opened again. */
    tg_audit_log_fn log;
    void *log_ctx;
} tg_audit_opts_t;

/* Open the audit pipe on <loop> with every sink of <opts>. On failure
 * returns a negative errno and writes a message naming the failing sink's
 * path and the cause into <err>. */
int tg_audit_open(tg_audit_t **out, uv_loop_t *loop, const tg_audit_opts_t *opts, tg_err_t *err);
/* Queue one event (assigns seq and ts). Never blocks. */
void tg_audit_emit(tg_audit_t *a, const tg_audit_ev_t *ev);
/* Counters for the registry and tests. */
uint64_t tg_audit_dropped(const tg_audit_t *a);
uint32_t tg_audit_queued(const tg_audit_t *a);
/* Room in the queue for a front that stopped reading a caller while the
 * queue was crowded (issue 12 item 2): what callers send cannot make the
 * audit drop events, since every call is audited. Embedded in its owner;
 * zeroed before first use. */
typedef struct tg_audit_room {
    struct tg_audit_room *next, *prev; /* linked while waiting */
    void (*cb)(struct tg_audit_room *r);
} tg_audit_room_t;
/* True while the queue holds 3/4 of its events or ring bytes or more: a
 * front stops reading callers then and waits (tg_audit_room_wait). */
bool tg_audit_crowded(const tg_audit_t *a);
/* Have <cb> run once (on the loop thread, <r> unlinked first) when a
 * write leaves the queue no longer crowded. No-op when <r> already waits. */
void tg_audit_room_wait(tg_audit_t *a, tg_audit_room_t *r, void (*cb)(tg_audit_room_t *r));
/* Stop waiting (no-op when <r> does not wait): before <r>'s owner is
 * freed. Needs no pipe: valid after tg_audit_close too. */
void tg_audit_room_cancel(tg_audit_room_t *r);
static inline bool tg_audit_room_waiting(const tg_audit_room_t *r)
{
    return r->next != NULL;
}
/* Write out everything queued (blocking; only at shutdown), make it
 * durable per each sink's fsync policy, and free. Does not run the loop,
 * so it may be called from a callback; the pipe's timers are closed and a
 * write in flight is released the next time <loop> runs (run it once more
 * before uv_loop_close). */
void tg_audit_close(tg_audit_t *a);

/* Default path: $XDG_STATE_HOME/toolgate/audit.jsonl, else
 * $HOME/.local/state/toolgate/audit.jsonl. 0 or -ENAMETOOLONG/-ENOENT. */
int tg_audit_default_path(char *buf, size_t cap);

#endif
