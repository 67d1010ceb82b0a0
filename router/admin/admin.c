/* Admin HTTP server (see admin.h).
 *
 * One connection = one conn_t holding its TCP handle, an idle timer, an
 * http_parser and a fixed read buffer. Reads go into that buffer and are
 * parsed at once. When a request is complete the parser is paused, reading
 * stops, and the bytes after it (a pipelined request) stay in the buffer
 * until the response has been written; then parsing resumes on them. So a
 * connection holds at most one read buffer and one response, whatever the
 * client sends.
 *
 * Ownership: tg_admin_t owns its conns (a list); a conn is freed in the
 * close callback of its last handle, and the server in the last close
 * callback of all (listener and every conn), never inside a callback that
 * still uses it: conn_close only marks and starts closing.
 */
#include "router/admin/admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config/addr.h"
#include "router/gateway/metrics.h"
#include "router/admin/metrics_enc.h"
#include "router/gateway/list.h"

#define ADMIN_READ_BUF     4096  /* fixed internal bound: bytes per read (headers span reads) */
#define ADMIN_URL_MAX      2048  /* fixed internal bound: request target; longer: 414 */
#define ADMIN_HOST_MAX     256   /* fixed internal bound: Host header kept for the check */
#define ADMIN_BACKLOG      64    /* fixed internal bound: listen(2) backlog */
#define ADMIN_LINGER_MS    1000  /* fixed internal bound: drain input after a closing answer */
#define ADMIN_FIRST_RENDER 16384 /* first body buffer; doubled up to max_response_bytes */

typedef struct conn conn_t;

struct tg_admin {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listener_open;
    tg_admin_provider_t prov;
    tg_admin_opts_t o;
    conn_t *conns;    /* every conn not yet freed, refused ones included */
    uint32_t nserved; /* conns counted against max_connections */
    bool closing;
    /* entries of prov.own (admin.connections, .header_bytes,
     * .response_bytes); -1 when not registered */
    int reg_conns, reg_head, reg_body;
};

struct conn {
    tg_admin_t *a;
    conn_t *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    int handles; /* open handles; the conn is freed when this reaches 0 */
    bool served; /* counted in a->nserved */
    bool closing;
    bool reading;
    bool busy;      /* a request is complete and being answered */
    bool lingering; /* answered with Connection: close; draining input */
    bool keep_alive;
    http_parser p;
    /* the request being parsed */
    bool in_head;        /* before the end of its headers: bytes count against the bound */
    uint32_t head_bytes; /* bytes since the previous request ended */
    int reject;          /* status decided while parsing (405, 413, 414), 0 when none */
    char url[ADMIN_URL_MAX];
    size_t url_len;
    bool url_over;
    char field[8]; /* enough to recognise "host" */
    size_t field_len;
    bool field_done; /* the last callback was a value: the next field is new */
    bool is_host;
    char host[ADMIN_HOST_MAX];
    size_t host_len;
    bool host_over, have_host;
    /* input not yet parsed (a pipelined request while busy) */
    char in[ADMIN_READ_BUF];
    size_t in_off, in_len;
    /* the response being written */
    char head[640];
    char *body; /* malloc'd body, freed by the write callback */
};

/* ---- addresses -------------------------------------------------------- */

int tg_admin_parse_addr(const char *addr, struct sockaddr_storage *ss, tg_err_t *err)
{
    return tg_addr_parse_admin(addr, ss, err);
}

/* ---- usage of the bounds ---------------------------------------------- */

/* Record usage <v> of the server's own registry entry <idx>. Nothing is
 * recorded once the server is closing: the connections it cuts then are
 * not load, and the registry's owner may be tearing down. */
static void admin_usage(tg_admin_t *a, int idx, uint64_t v)
{
    if (a->prov.own == NULL || idx < 0 || a->closing)
        return;
    tg_limit_ev_t ev = tg_registry_set(a->prov.own, idx, v);
    if (ev != TG_LIMIT_EV_NONE && a->prov.limit_event != NULL)
        a->prov.limit_event(a->prov.ctx, idx, ev);
}

/* ---- connection lifetime ---------------------------------------------- */

static void admin_maybe_free(tg_admin_t *a)
{
    if (a->closing && !a->listener_open && a->conns == NULL)
        free(a);
}

static void conn_handle_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    tg_admin_t *a = c->a;
    TG_LIST_UNLINK(a->conns, c, prev, next);
    free(c->body);
    free(c);
    admin_maybe_free(a);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->served) {
        c->served = false;
        c->a->nserved--;
        admin_usage(c->a, c->a->reg_conns, c->a->nserved);
    }
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
    if (c->handles > 1)
        uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

/* The idle timeout: between requests, or a request begun and not
 * complete in time (from the connection's start or the previous answer,
 * however its bytes trickle in), which is told to the provider. */
static void on_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    if (!c->busy && !c->lingering && c->head_bytes > 0 && c->a->prov.request_timeout != NULL)
        c->a->prov.request_timeout(c->a->prov.ctx);
    conn_close(c);
}

static void arm_timer(conn_t *c, uint64_t ms)
{
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- responses -------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 421:
        return "Misdirected Request";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    }
    return "Error";
}

static void conn_parse(conn_t *c);
static void start_reading(conn_t *c);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn_t *c = req->data;
    if (status < 0)
        conn_close(c);
}

static void on_written(uv_write_t *req, int status)
{
    conn_t *c = req->data;
    free(c->body);
    c->body = NULL;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (!c->keep_alive) {
        /* Closing at once with unread input (the rest of an oversized
         * request) would send a reset that can destroy the answer before
         * the client reads it: send FIN, then drain for a short while. */
        c->lingering = true;
        c->sreq.data = c;
        if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
            conn_close(c);
            return;
        }
        arm_timer(c, ADMIN_LINGER_MS < c->a->o.idle_timeout_ms ? ADMIN_LINGER_MS
                                                               : c->a->o.idle_timeout_ms);
        c->in_off = c->in_len = 0;
        start_reading(c);
        return;
    }
    c->busy = false;
    arm_timer(c, c->a->o.idle_timeout_ms);
    http_parser_pause(&c->p, 0);
    conn_parse(c);
    if (!c->busy && !c->closing)
        start_reading(c);
}

/* Answer the current request. <body> is either static (<owned> false) or
 * malloc'd and owned by the conn from here on. */
static void respond(conn_t *c, int status, const char *ctype, const char *body, size_t body_len,
                    bool owned, const char *extra)
{
    bool head_only = c->p.method == HTTP_HEAD && c->reject == 0;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    c->busy = true;
    if (status >= 400 && status != 404)
        c->keep_alive = false;
    int n = snprintf(c->head, sizeof(c->head),
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "X-Content-Type-Options: nosniff\r\n"
                     "%s"
                     "Connection: %s\r\n\r\n",
                     status, reason(status), ctype, body_len, extra != NULL ? extra : "",
                     c->keep_alive ? "keep-alive" : "close");
    if (n < 0 || (size_t)n >= sizeof(c->head)) {
        if (owned)
            free((char *)body);
        conn_close(c);
        return;
    }
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)n),
                        uv_buf_init((char *)body, head_only ? 0 : (unsigned)body_len)};
    c->body = owned ? (char *)body : NULL;
    c->wreq.data = c;
    /* The timer keeps running: a client that does not take its answer
     * within the idle timeout is cut off, so it cannot pin the body. */
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, bufs[1].len ? 2 : 1, on_written) < 0) {
        free(c->body);
        c->body = NULL;
        conn_close(c);
    }
}

static void respond_text(conn_t *c, int status, const char *text)
{
    respond(c, status, "text/plain; charset=utf-8", text, strlen(text), false,
            status == 405 ? "Allow: GET, HEAD\r\n" : NULL);
}

typedef long (*render_fn)(tg_admin_t *a, char *buf, size_t cap);

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const tg_registry_t *prov_registry(tg_admin_t *a)
{
    return a->prov.registry != NULL ? a->prov.registry(a->prov.ctx) : NULL;
}

static const tg_metrics_t *prov_metrics(tg_admin_t *a)
{
    return a->prov.metrics != NULL ? a->prov.metrics(a->prov.ctx) : NULL;
}

static long r_metrics(tg_admin_t *a, char *buf, size_t cap)
{
    return tg_metrics_prom(buf, cap, prov_registry(a), prov_metrics(a));
}

static long r_limits(tg_admin_t *a, char *buf, size_t cap)
{
    return tg_metrics_limits_json(buf, cap, prov_registry(a), prov_metrics(a));
}

static long r_agents(tg_admin_t *a, char *buf, size_t cap)
{
    return tg_metrics_agents_json(buf, cap, prov_metrics(a), wall_ms());
}

/* Render with <fn> into a buffer that doubles until the body fits or
 * reaches max_response_bytes. */
static void respond_rendered(conn_t *c, render_fn fn, const char *ctype)
{
    tg_admin_t *a = c->a;
    size_t cap = ADMIN_FIRST_RENDER;
    if (a->prov.refresh != NULL)
        a->prov.refresh(a->prov.ctx);
    for (;;) {
        if (cap > a->o.max_response_bytes)
            cap = a->o.max_response_bytes;
        char *buf = malloc(cap);
        if (buf == NULL)
            break;
        long n = fn(a, buf, cap);
        if (n >= 0) {
            admin_usage(a, a->reg_body, (uint64_t)n);
            respond(c, 200, ctype, buf, (size_t)n, true, NULL);
            return;
        }
        free(buf);
        if (n != -ENOSPC || cap >= a->o.max_response_bytes)
            break;
        cap *= 2;
    }
    /* Out of memory lands here too; both mean the body did not fit. */
    admin_usage(a, a->reg_body, a->o.max_response_bytes);
    respond_text(c, 500, "response could not be rendered within max_response_bytes\n");
}

#define CSP                                                                                        \
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "                    \
    "style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; "         \
    "frame-ancestors 'none'\r\n"

static void route(conn_t *c)
{
    struct http_parser_url u;

    if (c->reject != 0) {
        respond_text(c, c->reject,
                     c->reject == 405   ? "only GET and HEAD are served\n"
                     : c->reject == 413 ? "request bodies are not accepted\n"
                                        : "request target too long\n");
        return;
    }
    if (c->have_host && (c->host_over || !tg_addr_host_loopback(c->host, c->host_len))) {
        respond_text(c, 421, "Host must be localhost or a loopback address\n");
        return;
    }
    http_parser_url_init(&u);
    if (http_parser_parse_url(c->url, c->url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH))) {
        respond_text(c, 400, "bad request target\n");
        return;
    }
    const char *path = c->url + u.field_data[UF_PATH].off;
    size_t plen = u.field_data[UF_PATH].len;
#define IS(lit) (plen == sizeof(lit) - 1 && memcmp(path, lit, plen) == 0)
    if (IS("/metrics")) {
        respond_rendered(c, r_metrics, "text/plain; version=0.0.4; charset=utf-8");
    } else if (IS("/limits")) {
        respond_rendered(c, r_limits, "application/json");
    } else if (IS("/agents")) {
        respond_rendered(c, r_agents, "application/json");
    } else if (IS("/healthz")) {
        respond_text(c, 200, "ok\n");
    } else if (IS("/")) {
        size_t len;
        const char *page = tg_admin_page(&len);
        respond(c, 200, "text/html; charset=utf-8", page, len, false, CSP);
    } else {
        respond_text(c, 404, "not found (try /, /metrics, /limits, /agents, /healthz)\n");
    }
#undef IS
}

/* ---- parsing ---------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
    conn_t *c = p->data;
    c->reject = 0;
    c->url_len = 0;
    c->url_over = false;
    c->field_len = 0;
    c->field_done = false;
    c->is_host = false;
    c->host_len = 0;
    c->host_over = false;
    c->have_host = false;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    if (len > sizeof(c->url) - c->url_len) {
        c->url_over = true;
        return 0;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    /* The parser may hand one field over in pieces (split reads). */
    if (c->field_done) {
        c->field_len = 0;
        c->field_done = false;
        c->is_host = false;
    }
    size_t room = c->field_len < sizeof(c->field) ? sizeof(c->field) - c->field_len : 0;
    size_t k = len < room ? len : room;
    memcpy(c->field + c->field_len, at, k);
    c->field_len += len; /* may pass the buffer: then it is not "host" */
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    if (!c->field_done) {
        c->field_done = true;
        c->is_host = c->field_len == 4 && strncasecmp(c->field, "host", 4) == 0;
        if (c->is_host) {
            /* A second Host header is as suspicious as a foreign one. */
            if (c->have_host)
                c->host_over = true;
            c->have_host = true;
            c->host_len = 0;
        }
    }
    if (!c->is_host)
        return 0;
    if (len > sizeof(c->host) - c->host_len) {
        c->host_over = true;
        return 0;
    }
    memcpy(c->host + c->host_len, at, len);
    c->host_len += len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    conn_t *c = p->data;
    c->in_head = false;
    if (p->method != HTTP_GET && p->method != HTTP_HEAD)
        c->reject = 405;
    else if ((p->flags & F_CHUNKED) || p->uses_transfer_encoding ||
             ((p->flags & F_CONTENTLENGTH) && p->content_length > 0))
        c->reject = 413;
    else if (c->url_over)
        c->reject = 414;
    if (c->reject != 0) {
        /* Stop before any body: the connection is answered and closed. */
        c->busy = true;
        http_parser_pause(p, 1);
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    conn_t *c = p->data;
    c->busy = true;
    c->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

/* Parse c->in[in_off, in_len) until it is used up or a request is
 * complete (then answered; the rest waits in the buffer). */
static void conn_parse(conn_t *c)
{
    uint32_t max_head = c->a->o.max_header_bytes;
    /* A request's first bytes start its own clock (router.frame_timeout),
     * when it ends sooner than the idle timeout's: however the rest
     * trickles in, it is cut then (on_timer). */
    if (c->in_head && c->head_bytes == 0 && c->in_off < c->in_len && !c->busy &&
        c->a->o.frame_timeout_ms > 0 && c->a->o.frame_timeout_ms < uv_timer_get_due_in(&c->timer))
        arm_timer(c, c->a->o.frame_timeout_ms);
    while (c->in_off < c->in_len && !c->busy && !c->closing) {
        size_t chunk = c->in_len - c->in_off;
        bool counting = c->in_head;
        /* Feed at most what the header budget has left, so an oversized
         * head is caught at exactly max_header_bytes, however it was split. */
        if (counting && chunk > max_head - c->head_bytes)
            chunk = max_head - c->head_bytes;
        size_t np = http_parser_execute(&c->p, &settings, c->in + c->in_off, chunk);
        enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
        if (counting && c->in_head && !c->busy)
            c->head_bytes += (uint32_t)np;
        c->in_off += np;
        if (e == HPE_PAUSED || c->busy) {
            /* A request is complete or refused at the end of its headers:
             * no route takes a body, so what was parsed of it is its head. */
            if (counting)
                admin_usage(c->a, c->a->reg_head, (uint64_t)c->head_bytes + np);
            if (c->reject != 0)
                c->keep_alive = false;
            /* The next request's head is counted from here. */
            c->in_head = true;
            c->head_bytes = 0;
            route(c);
            return;
        }
        if (e != HPE_OK) {
            c->keep_alive = false;
            if (e == HPE_HEADER_OVERFLOW)
                admin_usage(c->a, c->a->reg_head, max_head);
            respond_text(c, e == HPE_HEADER_OVERFLOW ? 431 : 400,
                         e == HPE_HEADER_OVERFLOW ? "request header too large\n"
                                                  : "malformed request\n");
            return;
        }
        if (c->in_head && c->head_bytes >= max_head) {
            c->keep_alive = false;
            admin_usage(c->a, c->a->reg_head, max_head);
            respond_text(c, 431, "request header too large\n");
            return;
        }
    }
    if (c->in_off >= c->in_len)
        c->in_off = c->in_len = 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)suggested;
    /* Reading only runs when nothing is left unparsed. */
    *buf = uv_buf_init(c->in, sizeof(c->in));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (c->lingering)
        return; /* discarded: the answer is already out */
    c->in_off = 0;
    c->in_len = (size_t)n;
    conn_parse(c);
}

static void start_reading(conn_t *c)
{
    if (c->reading || c->closing)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        conn_close(c);
        return;
    }
    c->reading = true;
}

/* ---- listener --------------------------------------------------------- */

static const char refused_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                  "Content-Type: text/plain; charset=utf-8\r\n"
                                  "Content-Length: 26\r\n"
                                  "Connection: close\r\n\r\n"
                                  "too many admin connections";

static void on_connection(uv_stream_t *server, int status)
{
    tg_admin_t *a = server->data;
    if (status < 0 || a->closing)
        return;
    conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->a = a;
    c->tcp.data = c;
    c->timer.data = c;
    uv_tcp_init(a->loop, &c->tcp);
    c->handles = 1;
    TG_LIST_PUSH(a->conns, c, prev, next);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    if (a->nserved >= a->o.max_connections) {
        /* Over the bound: a best-effort answer and close now. Nothing is
         * read, queued or timed for it, so a flood costs one accept each. */
        uv_buf_t b = uv_buf_init((char *)refused_503, sizeof(refused_503) - 1);
        uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        conn_close(c);
        return;
    }
    uv_timer_init(a->loop, &c->timer);
    c->handles = 2;
    c->served = true;
    a->nserved++;
    admin_usage(a, a->reg_conns, a->nserved);
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    c->in_head = true;
    uv_tcp_nodelay(&c->tcp, 1);
    arm_timer(c, a->o.idle_timeout_ms);
    start_reading(c);
}

static void on_listener_closed(uv_handle_t *h)
{
    tg_admin_t *a = h->data;
    a->listener_open = false;
    admin_maybe_free(a);
}

/* Register the server's bounds in prov.own (see admin.h), once it listens.
 * An entry the registry cannot take (out of memory) stays -1: the bound
 * still holds, it is only not reported. */
static void admin_register(tg_admin_t *a)
{
    tg_registry_t *r = a->prov.own;
    if (r == NULL)
        return;
    a->reg_conns = tg_registry_add(r, "admin.connections", TG_LIMIT_CONCURRENCY, "instance",
                                   a->o.max_connections);
    a->reg_head = tg_registry_add(r, "admin.header_bytes", TG_LIMIT_FRAME, "instance",
                                  a->o.max_header_bytes);
    a->reg_body = tg_registry_add(r, "admin.response_bytes", TG_LIMIT_FRAME, "instance",
                                  a->o.max_response_bytes);
}

static int check_opt(uint32_t *v, uint32_t def, uint32_t lo, uint32_t hi, const char *name,
                     tg_err_t *err)
{
    if (*v == 0)
        *v = def;
    if (*v < lo || *v > hi) {
        return tg_err_set(err, -EINVAL, "admin %s %u is out of range (expected %u to %u)", name, *v,
                          lo, hi);
    }
    return 0;
}

int tg_admin_start(tg_admin_t **out, uv_loop_t *loop, const char *addr, const tg_admin_opts_t *opts,
                   const tg_admin_provider_t *prov, tg_err_t *err)
{
    struct sockaddr_storage ss;
    tg_admin_opts_t o = {0};
    int rc;

    *out = NULL;
    if (opts != NULL)
        o = *opts;
    if ((rc = tg_admin_parse_addr(addr, &ss, err)) < 0)
        return rc;
    if (check_opt(&o.max_header_bytes, TG_ADMIN_DEF_MAX_HEADER_BYTES, TG_ADMIN_MIN_HEADER_BYTES,
                  TG_ADMIN_MAX_HEADER_BYTES_CEIL, "max_header_bytes", err) < 0 ||
        check_opt(&o.max_connections, TG_ADMIN_DEF_MAX_CONNECTIONS, 1,
                  TG_ADMIN_MAX_CONNECTIONS_CEIL, "max_connections", err) < 0 ||
        check_opt(&o.idle_timeout_ms, TG_ADMIN_DEF_IDLE_TIMEOUT_MS, TG_ADMIN_MIN_IDLE_TIMEOUT_MS,
                  TG_ADMIN_IDLE_TIMEOUT_CEIL_MS, "idle_timeout_ms", err) < 0 ||
        check_opt(&o.max_response_bytes, TG_ADMIN_DEF_MAX_RESPONSE_BYTES,
                  TG_ADMIN_MIN_RESPONSE_BYTES, TG_ADMIN_MAX_RESPONSE_BYTES_CEIL,
                  "max_response_bytes", err) < 0)
        return -EINVAL;
    tg_admin_t *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return tg_err_set(err, -ENOMEM, "admin %s: out of memory", addr);
    }
    a->loop = loop;
    a->o = o;
    a->reg_conns = a->reg_head = a->reg_body = -1;
    if (prov != NULL)
        a->prov = *prov;
    if ((rc = uv_tcp_init(loop, &a->listener)) < 0) {
        free(a);
        return tg_err_set(err, rc, "admin %s: %s", addr, uv_strerror(rc));
    }
    a->listener.data = a;
    a->listener_open = true;
    if ((rc = uv_tcp_bind(&a->listener, (const struct sockaddr *)&ss, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&a->listener, ADMIN_BACKLOG, on_connection)) < 0) {
        tg_err_set(err, rc, "admin %s: cannot listen: %s", addr, uv_strerror(rc));
        /* The handle is closed asynchronously; the memory goes with it. */
        a->closing = true;
        uv_close((uv_handle_t *)&a->listener, on_listener_closed);
        return rc;
    }
    admin_register(a);
    *out = a;
    return 0;
}

int tg_admin_bound(const tg_admin_t *a, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN];
    int rc = uv_tcp_getsockname(&a->listener, (struct sockaddr *)&ss, &len);
    if (rc < 0)
        return rc;
    int n;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        n = snprintf(buf, cap, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        n = snprintf(buf, cap, "%s:%u", ip, ntohs(s4->sin_port));
    }
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    return n;
}

uint32_t tg_admin_connections(const tg_admin_t *a)
{
    return a->nserved;
}

void tg_admin_close(tg_admin_t *a)
{
    if (a == NULL || a->closing)
        return;
    a->closing = true;
    for (conn_t *c = a->conns; c != NULL; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&a->listener, on_listener_closed);
}
