/* admin: the loopback HTTP/1.1 endpoint (DESIGN.md "Observability") and
 * the small blocking client that `toolgate status` uses.
 *
 * Routes (GET and HEAD only):
 *   /metrics  Prometheus text exposition 0.0.4 (tg_metrics_prom)
 *   /limits   JSON snapshot of the limit registry (tg_metrics_limits_json)
 *   /agents   JSON: agents, latest denials, store and audit (tg_metrics_agents_json)
 *   /healthz  "ok"
 *   /         a self-contained live page (no external resources) that polls
 *             /limits and /agents every second
 *
 * The server runs on the caller's libuv loop and reads everything through
 * a provider (function pointers + ctx), so it knows nothing of sessions.
 * It listens on loopback only: it has no authentication, so a non-loopback
 * address is refused at start. Requests whose Host is not a loopback name
 * are refused too (421), so a web page cannot reach it by DNS rebinding.
 *
 * Bounds (each a field of tg_admin_opts_t, 0 = default; all but the idle
 * timeout register in the limit registry, see tg_admin_provider_t.own):
 *   max_header_bytes    request line + headers of one request; over: 431
 *   max_connections     connections served at once; more are answered 503
 *                       and closed at once
 *   idle_timeout_ms     a connection must deliver a complete request within
 *                       this of opening or of its previous response, and a
 *                       response must be taken within it; else closed
 *   max_response_bytes  largest body rendered; over: 500
 * and request bodies are refused (413): no route takes one. One request is
 * handled at a time per connection (pipelined requests wait in the read
 * buffer, and reading stops meanwhile).
 *
 * Conventions: setup calls return 0 or a negative errno with a one-line
 * message in <err>. Ownership: tg_admin_start returns a server the caller
 * releases with tg_admin_close; its memory goes once its handles have
 * closed, so the loop must run once more after tg_admin_close.
 */
#ifndef TG_ROUTER_ADMIN_H
#define TG_ROUTER_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>
#include <uv.h>

#include "config/config.h"

#include "limits/registry.h"
#include "router/gateway/metrics.h"

#define TG_ADMIN_DEF_ADDR "127.0.0.1:9464"

/* Defaults and ranges of the bounds (see above). */
/* The bounds' defaults, floors and ceilings live in config/config.h
 * (router.admin sets them). */

#define TG_ADMIN_ADDR_MAX 64 /* fixed internal bound: "HOST:PORT" text, NUL included */

/* Where the server reads its figures. Every function is called on the
 * loop thread, for each request, and returns borrowed pointers valid until
 * it returns to the loop. */
typedef struct tg_admin_provider {
    void *ctx;
    /* Bring pulled figures up to date before a request is answered (audit
     * queue depth, store state...). May be NULL. */
    void (*refresh)(void *ctx);
    /* The limit registry, or NULL when there is none. */
    const tg_registry_t *(*registry)(void *ctx);
    /* Counters, gauges and denials, or NULL when there are none. */
    const tg_metrics_t *(*metrics)(void *ctx);
    /* The server's own bounds, kept in the caller's limit registry. When
     * <own> is set, tg_admin_start registers there, with the options in
     * force as capacities:
     *   admin.connections     concurrency  connections served now
     *   admin.header_bytes    frame        request line + headers of the
     *                                      latest request (431: at the cap)
     *   admin.response_bytes  frame        body of the latest rendered
     *                                      answer (500 for size: at the cap)
     * and records their usage as it changes, handing each warning or
     * recovery the registry reports to <limit_event> (may be NULL) with the
     * entry's index. <own> must outlive the server; NULL: not registered. */
    tg_registry_t *own;
    void (*limit_event)(void *ctx, int idx, tg_limit_ev_t ev);
    /* A connection began a request and did not finish it within the idle
     * timeout (a slowloris): it is closed, and told here (may be NULL) so
     * the owner can audit it. */
    void (*request_timeout)(void *ctx);
} tg_admin_provider_t;

typedef struct tg_admin_opts {
    uint32_t max_header_bytes;   /* bytes; 0 = TG_ADMIN_DEF_MAX_HEADER_BYTES */
    uint32_t max_connections;    /* 0 = TG_ADMIN_DEF_MAX_CONNECTIONS */
    uint32_t idle_timeout_ms;    /* 0 = TG_ADMIN_DEF_IDLE_TIMEOUT_MS */
    uint32_t max_response_bytes; /* 0 = TG_ADMIN_DEF_MAX_RESPONSE_BYTES */
    uint64_t frame_timeout_ms;   /* router.frame_timeout: a request begun must be complete this
                                  * long after its first byte, when sooner than the idle
                                  * timeout would end it (0: only the idle timeout) */
} tg_admin_opts_t;

typedef struct tg_admin tg_admin_t;

/* Parse <addr> ("127.0.0.1:9464", "[::1]:9464", "localhost:9464"; port 0
 * picks a free one) into <ss>. Loopback only (127.0.0.0/8, ::1): anything
 * else is refused with a message saying why. 0, or -EINVAL with <err>. */
int tg_admin_parse_addr(const char *addr, struct sockaddr_storage *ss, tg_err_t *err);

/* Listen on <addr> on <loop>. <prov> is copied; <opts> may be NULL. Out of
 * range options are refused with a message naming the field. 0, or a
 * negative errno with <err> filled (bad address, address in use...). */
int tg_admin_start(tg_admin_t **out, uv_loop_t *loop, const char *addr, const tg_admin_opts_t *opts,
                   const tg_admin_provider_t *prov, tg_err_t *err);

/* The address actually bound, as "HOST:PORT" (after port 0). Returns the
 * length, or a negative errno. */
int tg_admin_bound(const tg_admin_t *a, char *buf, size_t cap);

/* Connections open now (served, not the ones refused). */
uint32_t tg_admin_connections(const tg_admin_t *a);

/* Stop listening and close every connection (a response being written is
 * cut). Memory goes in the last close callback. NULL is a no-op. */
void tg_admin_close(tg_admin_t *a);

struct tg_gw;
/* The admin endpoint of gateway <gw> (open) when its config names one
 * (router.admin / --admin), with the gateway's registry and metrics:
 * 0 (none configured, or wrap's port already in use: logged), or -1 with
 * <err> filled. tg_gw_stop closes it. */
int tg_admin_open_gw(struct tg_gw *gw, tg_err_t *err);

/* The live page served at "/" (static, NUL-terminated). */
const char *tg_admin_page(size_t *len);

/* Client: GET <path> from the admin endpoint at <addr> (same syntax as
 * tg_admin_parse_addr), blocking; the whole exchange (connect, request,
 * answer) must end within <timeout_ms>.
 * On success returns the HTTP status, with the body (NUL-terminated,
 * malloc'd, at most <max_body> bytes) in <*body> and its length in
 * <*body_len>; the caller frees it. Else a negative errno with <err>
 * filled (-ECONNREFUSED, -ETIMEDOUT, -EMSGSIZE for a body over
 * <max_body>, -EPROTO for a response that is not HTTP). */
int tg_admin_get(const char *addr, const char *path, uint32_t timeout_ms, size_t max_body,
                 char **body, size_t *body_len, tg_err_t *err);

#endif
