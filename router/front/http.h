/* The MCP Streamable HTTP front (spec 2025-06-18; 2025-03-26 clients too):
 * one listener, its connections and the transport rules, on the pure
 * cores of router/http/ (request reader, response heads, SSE) and, with
 * tls, router/tls/. Each MCP session is an engine session (http_sess.h),
 * so every limit, denial and audit event is the MCP engine's.
 *
 * One endpoint path. POST carries one JSON-RPC message: a request is
 * answered application/json, or text/event-stream (an SSE stream carrying
 * progress and the agent's requests before the response) for tools/call
 * when the client accepts it, or for any request of a client that accepts
 * only SSE; notifications and responses are answered 202. GET opens the
 * session's server-to-client SSE stream (one at a time: a newer GET replaces it),
 * resumable with Last-Event-ID within a bounded window. DELETE ends the
 * session. Only transport faults use HTTP statuses (400, 401, 403, 404,
 * 405, 406, 408, 409, 413, 415, 429, 431, 503); a denial of a call is the
 * engine's JSON-RPC error in a 200, as on stdio.
 *
 * Bounds: connections per listener (429 past them), requests per
 * connection, request head bytes (431) and body bytes (max_frame_bytes,
 * 413), the time a request may take to arrive (408) and a connection may
 * idle, sessions per listener (503) and per caller (429), and the bytes
 * queued on a connection carrying a stream: past 2 x max_frame_bytes the
 * session stops reading its engine until the client reads.
 */
#ifndef TG_ROUTER_HTTP_FRONT_H
#define TG_ROUTER_HTTP_FRONT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "config/err.h"
#include "router/front/http_sess.h"

typedef struct tg_http tg_http_t;

/* Who a request is from: 0 with *caller the callers[] index (-1:
 * anonymous, no caller limits), or -1 to answer 401 with <why> and the
 * short constant *<cause> ("expired", "wrong audience", "unknown token",
 * "no token"...: router/auth/README.md) for the log and the audit; neither
 * ever holds a byte of the credential. */
typedef int (*tg_http_auth_fn)(void *arg, const char *authz, size_t authz_len, int *caller,
                               char *why, size_t why_cap, const char **cause);

/* A request refused before it reached a session for who or where it came
 * from: 401 (no or a bad credential: <reason> "unauthenticated: CAUSE",
 * the auth's cause), 403 (<reason> "origin_not_allowed" or
 * "host_not_loopback"), or because it did not arrive within
 * header_timeout once begun: 408 (<reason> "frame_timeout"). <remote> is
 * the peer ("address:port", "" when unknown). The runner audits and logs
 * it. */
typedef void (*tg_http_refused_fn)(void *arg, int status, const char *reason, const char *remote);

typedef struct tg_http_opts {
    const tg_listen_cfg_t *lc;
    size_t index;          /* router.listen[index], for messages */
    uint64_t max_frame;    /* router.max_frame_bytes: the body bound */
    uint64_t frame_timeout_ms; /* router.frame_timeout: header_timeout when the listener sets
                                * none (0: TG_HTTP_DEF_HEADER_TIMEOUT_MS) */
    tg_hub_open_fn open;   /* opens an engine session (the runner's) */
    void *open_arg;
    tg_http_auth_fn auth;  /* NULL: every request is anonymous */
    void *auth_arg;
    /* After <auth> named a caller: the claims of the verified JWT that
     * named it, as a JSON object's text (at most <cap> - 1 bytes; "" none),
     * for the session a request opens (a policy matches them). NULL: none. */
    void (*claims)(void *arg, const char *authz, size_t authz_len, char *out, size_t cap);
    tg_http_refused_fn refused; /* NULL: refusals are only counted */
    void *refused_arg;
    void *tls_ctx;         /* a tg_tls_ctx_t for a tls listener, else NULL (the runner owns it) */
    struct tg_registry *reg; /* where the listener's fill levels are kept (NULL: nowhere) */
    int reg_conns, reg_sessions; /* its entries: connections and sessions (-1: none) */
} tg_http_opts_t;

typedef struct tg_http_stats {
    uint64_t connections, refused_connections, requests;
    uint64_t status[6]; /* by class: [1] 1xx .. [5] 5xx */
    uint64_t buffer_bytes; /* held now by the connections' read buffers and request readers */
} tg_http_stats_t;

/* Bind and listen. 0, or -1 with <err> naming the listener and why. */
int tg_http_listen(uv_loop_t *loop, const tg_http_opts_t *o, tg_http_t **out, tg_err_t *err);
/* The bound port (a listener on port 0 gets a free one). */
int tg_http_port(const tg_http_t *h);
/* Stop accepting and close every connection not waiting for an answer
 * (GET streams included); a connection waiting for one is closed once it
 * is written. The sessions end as their engine sessions do (serve drains
 * them on SIGTERM). 503 for requests still arriving. */
void tg_http_stop(tg_http_t *h);
/* Every handle closed: tg_http_free may run. */
bool tg_http_idle(const tg_http_t *h);
void tg_http_free(tg_http_t *h);
/* A reload: the listener's config now lives at <lc> (same address, path
 * and bounds: a reload that changes them is refused). */
void tg_http_set_cfg(tg_http_t *h, const tg_listen_cfg_t *lc);
const tg_http_stats_t *tg_http_stats(const tg_http_t *h);
tg_hub_t *tg_http_hub(const tg_http_t *h);

#endif
