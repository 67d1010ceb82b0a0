/* MCP sessions of the Streamable HTTP front (issue 13): each one bridges
 * the HTTP requests of one MCP session to one session of the MCP engine
 * (router/dialect/mcp/session.h), so a caller over HTTP gets exactly what a caller on
 * a Unix socket gets: the same judge, admission, limits, denials, audit
 * and agent instance per session. The bridge is a socketpair: the engine
 * reads and writes one end as it would an accepted connection; this file
 * writes each POSTed message to the other end as one line and reads the
 * engine's lines back, routing each to the HTTP stream it belongs to.
 *
 * Routing of what the engine writes (the agent's side of the session):
 *   - a response goes to the POST stream that sent the request with that
 *     id (byte-equal: the engine echoes the caller's id bytes verbatim);
 *     with none waiting any more (its connection went away) it is dropped
 *     and counted;
 *   - a notifications/progress naming a progressToken goes to the POST
 *     stream whose request carried that token, if it carries events
 *     (SSE); else it is dropped (counted with the responses): it concerns
 *     a call answered, gone, or answered as JSON;
 *   - any other request or notification of the agent (sampling,
 *     elicitation, roots, logging, list_changed) goes to the GET stream
 *     when one is open, else to the oldest POST stream that can carry
 *     events (SSE), else into a bounded backlog that the next such stream
 *     receives first. A full backlog drops its oldest notification
 *     (counted); a request of the agent is never dropped while the session
 *     lives: when nothing can take it, reading the engine pauses.
 *
 * Bounds: what one session holds is its read buffer (max_frame_bytes + 1),
 * a backlog of at most TG_HSESS_BACKLOG messages and
 * TG_HSESS_BACKLOG_BYTES bytes, and one pending write per POST (a POST is
 * answered, or the next request of its connection read, only once its
 * message is in the engine's hands).
 *
 * Ownership: the hub (one per HTTP listener) owns its sessions; a session
 * is freed once its bridge has closed and no stream refers to it. Streams
 * belong to the HTTP connections and are attached and detached by them.
 */
#ifndef TG_ROUTER_HTTP_SESS_H
#define TG_ROUTER_HTTP_SESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define TG_HSESS_ID_HEX 32           /* 128-bit session ids, as hex */
#define TG_HSESS_BACKLOG 64          /* fixed internal bound: messages held for a stream */
#define TG_HSESS_BACKLOG_BYTES (256u * 1024) /* fixed internal bound: their bytes */
#define TG_HSESS_RPCID_MAX 128       /* fixed internal bound: bytes of a routed request id */

typedef struct tg_hub tg_hub_t;
typedef struct tg_hsess tg_hsess_t;
typedef struct tg_hstream tg_hstream_t;

/* Implemented by the HTTP connection that holds the stream. */
typedef struct tg_hstream_ops {
    /* One JSON-RPC message (no newline) for this stream. Returns false when
     * the connection's write queue is over its bound: the session stops
     * reading the engine until tg_hsess_resume. */
    bool (*message)(tg_hstream_t *st, const char *msg, size_t len);
    /* POST: its response was just delivered. GET: the session ended.
     * The stream is detached before the call. */
    void (*finish)(tg_hstream_t *st);
} tg_hstream_ops_t;

struct tg_hstream {
    const tg_hstream_ops_t *ops;
    void *ctx;                 /* the connection's */
    tg_hsess_t *s;             /* NULL once detached */
    bool get;                  /* the session's GET stream */
    bool events;               /* may carry messages other than its response (SSE) */
    bool answered;             /* set before finish: its response was the last message */
    bool call;                 /* POST: its request is a tools/call (cancelled if abandoned) */
    char rpcid[TG_HSESS_RPCID_MAX];
    size_t rpcid_len;          /* POST: its request's id bytes */
    char ptoken[TG_HSESS_RPCID_MAX];
    size_t ptoken_len;         /* POST: its request's progressToken bytes (0: none) */
    tg_hstream_t *next, *prev; /* the session's streams, oldest first */
};

#define TG_HSESS_REMOTE_MAX 64 /* fixed internal bound: "[v6 address]:port" and its NUL */

/* What the runner learns of a new session, for its audit events. */
typedef struct tg_hsess_meta {
    const char *id;     /* its Mcp-Session-Id (TG_HSESS_ID_HEX hex): the runner audits a
                         * digest of it, never the id itself */
    const char *remote; /* the client's address:port ("" when unknown) */
    const char *claims; /* the verified JWT's claims (JSON object text), or NULL */
} tg_hsess_meta_t;

#define TG_HSESS_CLAIMS_MAX 2048 /* fixed internal bound: bytes of a session's JWT claims */

/* The runner's part: open an engine session on <conn> (heap; the session
 * takes it) for caller index <caller> (-1: anonymous), described by
 * <meta> (borrowed for the call). 0, or a negative errno after writing a
 * reason into <why> (the engine refused it: shutting down, max_instances). */
typedef int (*tg_hub_open_fn)(void *arg, uv_pipe_t *conn, int caller, const tg_hsess_meta_t *meta,
                              char *why, size_t why_cap);

/* A hub for one listener. <max_frame> bounds a line read from the engine;
 * <idle_ms> ends a session with no open stream and no request for that
 * long (0: never). NULL on ENOMEM. */
tg_hub_t *tg_hub_new(uv_loop_t *loop, uint64_t max_frame, uint64_t idle_ms, uint32_t max_sessions,
                     tg_hub_open_fn open, void *open_arg);
/* End every session (shutdown): their bridges close, their streams finish. */
void tg_hub_shutdown(tg_hub_t *h);
/* Free the hub once tg_hub_idle (after the loop ran its close callbacks). */
void tg_hub_free(tg_hub_t *h);
bool tg_hub_idle(const tg_hub_t *h);
uint32_t tg_hub_sessions(const tg_hub_t *h);
/* Ages sessions out (call once a second). */
void tg_hub_tick(tg_hub_t *h, uint64_t now_ms);
void tg_hub_set_idle(tg_hub_t *h, uint64_t idle_ms);

/* A new session for <caller>, a client at <remote> (address:port text,
 * NULL or "" when unknown). NULL with <status> the HTTP status to answer
 * and <why> a reason (503 over max_sessions or refused by the engine, 500
 * on a resource failure). */
tg_hsess_t *tg_hsess_new(tg_hub_t *h, int caller, const char *remote, int *status, char *why,
                         size_t why_cap);
/* tg_hsess_new for a caller a JWT named, with its <claims> (JSON object
 * text; NULL or "": none) handed to the engine's session. */
tg_hsess_t *tg_hsess_new_claims(tg_hub_t *h, int caller, const char *remote, const char *claims,
                                int *status, char *why, size_t why_cap);
/* The live session with id <id> (hex, <len> bytes) bound to <caller>, or
 * NULL: unknown, ended, or another caller's (all three are a 404). */
tg_hsess_t *tg_hsess_find(tg_hub_t *h, const char *id, size_t len, int caller);
const char *tg_hsess_id(const tg_hsess_t *s);
bool tg_hsess_ended(const tg_hsess_t *s);

/* Hand one JSON-RPC message (a POST body: one request, notification or
 * response, already judged to be valid JSON-RPC) to the engine. Newlines
 * in the body (pretty-printed JSON: only whitespace) become blanks. When
 * <st> is not NULL it is a request's stream and is attached to wait for
 * its response. <done>(<arg>, status) runs once the engine has the
 * message (status 0) or it could not be given (negative errno, e.g. the
 * session ended): only then should the connection read its next request.
 * Returns 0, or a negative errno without calling <done>. */
int tg_hsess_post(tg_hsess_t *s, const char *body, size_t len, tg_hstream_t *st,
                  void (*done)(void *arg, int status), void *arg);
/* Attach <st> as the session's GET stream (any previous one is finished
 * first) and give it the backlog. */
void tg_hsess_attach_get(tg_hsess_t *s, tg_hstream_t *st);
/* A stream's connection is gone: detach it (its response, if still to
 * come, is dropped when it arrives). */
void tg_hsess_detach(tg_hstream_t *st);
/* A stream's client went away (its connection closed) before its
 * response: detach it and, for a tools/call still unanswered, have the
 * engine cancel it at the agent as a caller that left (a
 * notifications/cancelled with reason "caller_gone": audited
 * call.cancelled, reason caller_gone). Its response could reach nobody:
 * a POST stream is not resumable. */
void tg_hsess_abandon(tg_hstream_t *st);
/* A stream's connection drained: read the engine again. */
void tg_hsess_resume(tg_hsess_t *s);
/* End the session (DELETE): the engine sees its caller leave. */
void tg_hsess_end(tg_hsess_t *s);

/* SSE: the number of a new POST stream of <s> (2, 3, ...; the GET stream
 * is 1), and the GET stream's replay window (bounded like the backlog;
 * made on first use; NULL on ENOMEM). */
uint64_t tg_hsess_stream_no(tg_hsess_t *s);
struct tg_sse_win;
struct tg_sse_win *tg_hsess_get_window(tg_hsess_t *s);
/* Sessions of <caller> open on <h> (max_sessions_per_caller). */
uint32_t tg_hub_caller_sessions(const tg_hub_t *h, int caller);

/* Counters (for /metrics and tests). */
typedef struct tg_hub_stats {
    uint64_t sessions_opened, sessions_ended, sessions_idled;
    uint64_t responses_dropped;   /* no POST waited for them */
    uint64_t backlog_dropped;     /* oldest notifications dropped from a full backlog */
} tg_hub_stats_t;
const tg_hub_stats_t *tg_hub_stats(const tg_hub_t *h);

#endif
