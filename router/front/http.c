/* The MCP Streamable HTTP front. See http.h.
 *
 * A connection reads one request at a time: while a request is being
 * answered (busy) the socket is read only into the read buffer (to see a
 * client go away: its stream then takes nothing but its answer) and a
 * full buffer stops reading, so pipelined requests wait in the kernel and
 * a connection holds at most its read buffer, one request (head arena and
 * body, bounded) and its write queue. An idle connection holds none of
 * them: the read buffer is allocated right before a read and given back
 * once no request is part-read, the head arena grows as a head needs it
 * and goes with the body when the request is done (as nginx does). A POST's message is
 * handed to the session's engine; the connection reads on only once the
 * engine has it (and, for a request, once its response was written), so a
 * client cannot queue more than one message per connection.
 *
 * Timers: from accept, and from the first byte of each further request,
 * the whole request must arrive within header_timeout (408); between
 * requests a connection may idle keepalive_timeout; a connection carrying
 * an SSE stream is pinged every TG_HTTP_PING_MS instead (which also finds
 * peers that went away).
 *
 * With tls, what the socket reads is fed to the TLS endpoint and the
 * plaintext it gives is what the request reader sees; everything written
 * goes through it. A plain HTTP request on a TLS port is answered in
 * cleartext (400) and closed, as nginx does.
 */
#include "router/front/http.h"
#include "router/front/listen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "config/addr.h"
#include "limits/registry.h"
#include "router/codec/envelope.h"
#include "router/http/h1req.h"
#include "router/http/h1resp.h"
#include "router/http/sse.h"
#include "router/gateway/log.h"
#include "router/tls/tls.h"
#include "router/gateway/list.h"

#define HTTP_BACKLOG 511                /* fixed internal bound: listen(2) backlog */
#define HTTP_IN_CAP (16u * 1024)        /* fixed internal bound: bytes read ahead of the reader */
#define HTTP_HEAD_MAX 2048              /* fixed internal bound: one response head */
#define HTTP_PING_MS 15000u /* fixed internal bound: an SSE stream's keep-alive comment */
#define HTTP_PROBE_MS 200u  /* fixed internal bound: after a call's client sent EOF, the second
                             * comment that finds out whether it is still there */
#define HTTP_TLS_CAP (64u * 1024)       /* fixed internal bound: TLS ciphertext pending per way */
#define HTTP_MAX_HEADERS 100            /* fixed internal bound: header fields of a request */

typedef enum { M_NONE = 0, M_JSON, M_SSE, M_GET } mode_t_;

typedef struct hconn {
    uv_tcp_t tcp; /* first */
    uv_timer_t timer;
    tg_http_t *h;
    struct hconn *next, *prev;
    tg_h1req_t rq;
    bool rq_init;
    char *in;          /* NULL while nothing is pending (see bufs_get) */
    size_t in_len;
    size_t held;       /* what its buffers hold, as counted in stats.buffer_bytes */
    uint32_t nreq;
    int open;          /* handles still to close */
    bool closing;
    bool busy;         /* a request is being answered: the socket is not read */
    bool keep;         /* the connection goes on after this response */
    bool in_pump;
    bool got_bytes;    /* bytes of the next request arrived: header_timeout runs */
    bool shut;         /* close once the write queue is empty */
    bool head_sent, answered;
    bool posting;      /* a message of ours is on its way to the engine: posted() will run */
    bool dead;         /* closed while posting: posted() frees it */
    bool early;        /* answered while posting: posted() ends the request */
    bool peer_eof;     /* the client sent EOF while a request was answered */
    bool unframed;     /* an HTTP/1.0 client's stream: no chunks, ended by the close */
    char *cin;         /* tls: ciphertext read, not yet taken by the TLS endpoint */
    size_t cin_len;
    mode_t_ mode;
    tg_hsess_t *sess;  /* the session of the request being answered */
    char sid[TG_HSESS_ID_HEX + 1]; /* Mcp-Session-Id to send (initialize) */
    tg_hstream_t st;
    uint64_t stream_no, seq;
    size_t wq;         /* bytes written, not yet completed */
    int caller;
    char claims[TG_HSESS_CLAIMS_MAX]; /* the JWT's claims of the last request ("" none) */
    tg_tls_conn_t *tls;
} hconn_t;

struct tg_http {
    uv_loop_t *loop;
    uv_tcp_t lsock;
    uv_timer_t tick; /* once a second: idle sessions end */
    tg_http_opts_t o;
    const tg_listen_cfg_t *lc;
    tg_hub_t *hub;
    hconn_t *conns;
    uint32_t nconns, max_conns;
    int open; /* the listener and the connections' handles */
    bool stopping;
    int port;
    bool loopback; /* Host must then name this machine by a loopback name */
    size_t wq_bound;
    /* The bounds of one request, connection, caller or stream, in /limits
     * (-1: not registered): the latest value seen, as the admin endpoint
     * reports its request heads. */
    int reg_head, reg_reqs, reg_per_caller, reg_stream;
    tg_http_stats_t stats;
};

typedef struct wreq {
    uv_write_t req;
    hconn_t *c;
    size_t len;
    char data[];
} wreq_t;

static void conn_pump(hconn_t *c);
static void conn_close(hconn_t *c);
static void held_sync(hconn_t *c);

static void note(tg_http_t *h, int idx, uint64_t v)
{
    if (h->o.reg != NULL && idx >= 0 && !h->stopping)
        tg_registry_update(h->o.reg, idx, v);
}

/* The listener's fill levels, as /limits shows them. */
static void usage(tg_http_t *h)
{
    if (h->o.reg == NULL)
        return;
    if (h->o.reg_conns >= 0)
        tg_registry_update(h->o.reg, h->o.reg_conns, h->nconns);
    if (h->o.reg_sessions >= 0)
        tg_registry_update(h->o.reg, h->o.reg_sessions, tg_hub_sessions(h->hub));
}
static void on_timer(uv_timer_t *t);

/* ---- writing ----------------------------------------------------------- */

static void on_written(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    hconn_t *c = w->c;
    size_t before = c->wq;
    c->wq -= w->len;
    free(w);
    if (c->st.s != NULL)
        note(c->h, c->h->reg_stream, c->wq);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->wq == 0 && c->shut) {
        conn_close(c);
        return;
    }
    if (before >= c->h->wq_bound && c->wq < c->h->wq_bound && c->st.s != NULL)
        tg_hsess_resume(c->st.s);
}

/* Queue <n> buffers on the socket, as they are (one copy). */
static void raw_write(hconn_t *c, const uv_buf_t *b, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += b[i].len;
    if (c->closing || len == 0)
        return;
    wreq_t *w = malloc(sizeof(*w) + len);
    if (w == NULL) {
        conn_close(c);
        return;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(w->data + off, b[i].base, b[i].len);
        off += b[i].len;
    }
    w->c = c;
    w->len = len;
    uv_buf_t one = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &one, 1, on_written) < 0) {
        free(w);
        conn_close(c);
        return;
    }
    c->wq += len;
    if (c->st.s != NULL)
        note(c->h, c->h->reg_stream, c->wq);
}

/* Ciphertext the TLS endpoint has ready, to the socket. */
static void tls_flush(hconn_t *c)
{
    char buf[16384];
    size_t n;
    while (!c->closing && (n = tg_tls_conn_pull(c->tls, buf, sizeof(buf))) > 0) {
        uv_buf_t b = uv_buf_init(buf, (unsigned)n);
        raw_write(c, &b, 1);
    }
}

/* Send <n> buffers of plaintext: through TLS when the listener has it. */
static void conn_write(hconn_t *c, const uv_buf_t *b, size_t n)
{
    if (c->tls == NULL) {
        raw_write(c, b, n);
        return;
    }
    for (size_t i = 0; i < n && !c->closing; i++) {
        size_t off = 0;
        while (off < b[i].len && !c->closing) {
            ssize_t k = tg_tls_conn_write(c->tls, b[i].base + off, b[i].len - off);
            if (k == -EAGAIN) {
                tls_flush(c);
                continue;
            }
            if (k < 0) {
                conn_close(c);
                return;
            }
            off += (size_t)k;
            tls_flush(c);
        }
    }
}

/* ---- responses --------------------------------------------------------- */

static void count_status(hconn_t *c, int status)
{
    if (status >= 100 && status < 600)
        c->h->stats.status[status / 100]++;
}

/* The request was answered: read the next one (or close). */
static void request_done(hconn_t *c)
{
    if (c->st.s != NULL)
        tg_hsess_detach(&c->st);
    c->mode = M_NONE;
    c->sess = NULL;
    c->sid[0] = '\0';
    c->head_sent = c->answered = c->unframed = false;
    if (c->posting) {
        /* Answered before the engine had the message (its session ended
         * meanwhile): the next request waits for posted(), which must not
         * answer this one again. */
        c->early = true;
        return;
    }
    c->busy = false;
    if (c->closing)
        return;
    if (!c->keep || c->h->stopping) {
        c->shut = true;
        if (c->wq == 0)
            conn_close(c);
        return;
    }
    tg_h1req_trim(&c->rq);
    c->got_bytes = false;
    held_sync(c);
    uv_timer_stop(&c->timer); /* re-armed by conn_pump for the wait that follows */
    if (!c->in_pump)
        conn_pump(c);
}

/* Write a response head for the current request. */
static bool send_head(hconn_t *c, int status, const char *ctype, int64_t clen,
                      const tg_h1_field_t *extra, size_t nextra)
{
    tg_h1_field_t f[8];
    size_t nf = 0;
    for (size_t i = 0; i < nextra && nf < 7; i++)
        f[nf++] = extra[i];
    if (c->sid[0] != '\0' && nf < 8)
        f[nf++] = (tg_h1_field_t){"Mcp-Session-Id", c->sid};
    tg_h1resp_t r = {.status = status,
                     .content_type = ctype,
                     .content_length = clen,
                     .keep_alive = c->keep,
                     .date = -1,
                     .extra = f,
                     .nextra = nf};
    char head[HTTP_HEAD_MAX];
    long n = tg_h1resp_head(head, sizeof(head), &r);
    if (n < 0) {
        conn_close(c);
        return false;
    }
    uv_buf_t b = uv_buf_init(head, (unsigned)n);
    conn_write(c, &b, 1);
    count_status(c, status);
    c->head_sent = true;
    return true;
}

/* A whole response with body <body> (<len> bytes), then the next request. */
static void respond(hconn_t *c, int status, const char *ctype, const char *body, size_t len,
                    const tg_h1_field_t *extra, size_t nextra)
{
    if (!send_head(c, status, ctype, (int64_t)len, extra, nextra))
        return;
    if (len > 0) {
        uv_buf_t b = uv_buf_init((char *)body, (unsigned)len);
        conn_write(c, &b, 1);
    }
    request_done(c);
}

static void respond_text(hconn_t *c, int status, const char *text)
{
    char body[512];
    int n = snprintf(body, sizeof(body), "%s\n", text);
    respond(c, status, "text/plain; charset=utf-8", body,
            n < 0 ? 0 : (size_t)n >= sizeof(body) ? sizeof(body) - 1 : (size_t)n, NULL, 0);
}

/* A JSON-RPC error body (id null unless <id>), for transport refusals of
 * a POST, as the official SDK answers them. */
static void respond_rpc(hconn_t *c, int status, int code, const char *id, size_t id_len,
                        const char *msg, const tg_h1_field_t *extra, size_t nextra)
{
    char body[768];
    int n = snprintf(body, sizeof(body),
                     "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
                     id != NULL ? (int)id_len : 4, id != NULL ? id : "null", code, msg);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = snprintf(body, sizeof(body),
                     "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
                     code, "refused");
    respond(c, status, "application/json", body, (size_t)n, extra, nextra);
}

/* ---- streams (the session's side) ------------------------------------- */

static void sse_write(hconn_t *c, const char *event, size_t len)
{
    if (c->unframed) {
        uv_buf_t b = uv_buf_init((char *)event, (unsigned)len);
        conn_write(c, &b, 1);
        return;
    }
    char ch[32];
    long hn = tg_h1_chunk_head(ch, sizeof(ch), len);
    if (hn < 0) {
        conn_close(c);
        return;
    }
    uv_buf_t b[3] = {uv_buf_init(ch, (unsigned)hn), uv_buf_init((char *)event, (unsigned)len),
                     uv_buf_init((char *)TG_H1_CHUNK_END, 2)};
    conn_write(c, b, 3);
}

static bool sse_begin(hconn_t *c)
{
    static const tg_h1_field_t f[] = {{"Cache-Control", "no-cache"}};
    if (c->head_sent)
        return true;
    if (c->rq.http_minor == 0) { /* HTTP/1.0 knows no chunks: the close ends the stream */
        c->unframed = true;
        c->keep = false;
    }
    if (!send_head(c, 200, "text/event-stream", c->unframed ? TG_H1_LEN_NONE : TG_H1_LEN_CHUNKED,
                   f, 1))
        return false;
    uv_timer_start(&c->timer, on_timer, HTTP_PING_MS, 0);
    return true;
}

static void sse_event(hconn_t *c, const char *msg, size_t len)
{
    size_t cap = tg_sse_event_len(TG_SSE_ID_MAX, msg, len);
    char *ev = malloc(cap);
    if (ev == NULL) {
        conn_close(c);
        return;
    }
    long n;
    if (c->mode == M_GET) {
        tg_sse_win_t *win = tg_hsess_get_window(c->sess);
        n = win != NULL ? tg_sse_win_send(win, msg, len, ev, cap) : -ENOMEM;
    } else {
        char id[TG_SSE_ID_MAX];
        long idn = tg_sse_id(id, sizeof(id), c->stream_no, ++c->seq);
        n = idn < 0 ? idn : tg_sse_event(ev, cap, id, (size_t)idn, msg, len);
    }
    if (n > 0)
        sse_write(c, ev, (size_t)n);
    free(ev);
}

/* An error answering initialize: no session for the client to use. */
static bool is_error(const char *msg, size_t len)
{
    tg_mcp_env_t env;
    return tg_mcp_scan(msg, len, &env) == 0 && env.kind == TG_MCP_RESPONSE && env.has_error;
}

static bool st_message(tg_hstream_t *st, const char *msg, size_t len)
{
    hconn_t *c = st->ctx;
    if (c->closing)
        return true;
    if (c->sid[0] != '\0' && !c->head_sent && is_error(msg, len))
        c->sid[0] = '\0'; /* the engine refused it (max_instances): the session ends */
    if (c->mode == M_JSON) {
        c->answered = true;
        if (send_head(c, 200, "application/json", (int64_t)len, NULL, 0)) {
            uv_buf_t b = uv_buf_init((char *)msg, (unsigned)len);
            conn_write(c, &b, 1);
        }
        return c->wq < c->h->wq_bound;
    }
    if (!sse_begin(c))
        return true;
    sse_event(c, msg, len);
    return c->wq < c->h->wq_bound;
}

static void st_finish(tg_hstream_t *st)
{
    hconn_t *c = st->ctx;
    if (c->closing)
        return;
    static const char ended[] = "the session ended before the agent answered";
    if (c->mode == M_JSON) {
        if (st->answered && c->answered)
            request_done(c);
        else
            respond_rpc(c, 200, -32603, st->rpcid, st->rpcid_len, ended, NULL, 0);
        return;
    }
    if (!sse_begin(c))
        return;
    if (c->mode == M_SSE && !st->answered) {
        char body[320];
        int n = snprintf(body, sizeof(body),
                         "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"error\":{\"code\":-32603,"
                         "\"message\":\"%s\"}}",
                         (int)st->rpcid_len, st->rpcid, ended);
        if (n > 0 && (size_t)n < sizeof(body))
            sse_event(c, body, (size_t)n);
    }
    if (!c->unframed) {
        uv_buf_t b = uv_buf_init((char *)TG_H1_CHUNK_LAST, sizeof(TG_H1_CHUNK_LAST) - 1);
        conn_write(c, &b, 1);
    }
    request_done(c);
}

static const tg_hstream_ops_t stream_ops = {st_message, st_finish};

/* ---- requests ------------------------------------------------------------ */

static bool hdr_eq(const tg_h1_str_t *h, const char *s)
{
    size_t n = strlen(s);
    return h->p != NULL && h->n == n && memcmp(h->p, s, n) == 0;
}

static bool origin_ok(const tg_http_t *h, const tg_h1_str_t *o)
{
    if (o->p == NULL)
        return true; /* not a browser: nothing to rebind */
    if (h->lc->allowed_origins != NULL)
        for (char **a = h->lc->allowed_origins; *a != NULL; a++)
            if (hdr_eq(o, *a))
                return true;
    return false;
}

static const char *const versions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25",
                                       NULL};

static bool version_ok(const tg_h1_str_t *v)
{
    if (v->p == NULL)
        return true; /* 2025-03-26 clients send none */
    for (const char *const *s = versions; *s != NULL; s++)
        if (hdr_eq(v, *s))
            return true;
    return false;
}

static void conn_free(hconn_t *c);

static void posted(void *arg, int status)
{
    hconn_t *c = arg;
    c->posting = false;
    if (c->dead) {
        conn_free(c);
        return;
    }
    if (c->closing)
        return;
    if (c->early) { /* already answered: only the next request was waiting for this */
        c->early = false;
        request_done(c);
        return;
    }
    if (status < 0) {
        if (c->st.s != NULL)
            tg_hsess_detach(&c->st);
        respond_text(c, 404, "the session ended (send initialize for a new one)");
        return;
    }
    if (c->mode == M_NONE) /* a notification or a response: accepted */
        respond(c, 202, NULL, NULL, 0, NULL, 0);
}

/* The client's address:port ("[v6]:port" for IPv6), or "" when the
 * kernel cannot say: for the audit events of the session it opens. */
static void peer_text(uv_tcp_t *tcp, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "";
    out[0] = '\0';
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (uv_ip4_name(a, ip, sizeof(ip)) == 0)
            snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (uv_ip6_name(a, ip, sizeof(ip)) == 0)
            snprintf(out, cap, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    }
}

static tg_hsess_t *open_session(hconn_t *c)
{
    tg_http_t *h = c->h;
    uint32_t per = h->lc->sessions_per_caller ? h->lc->sessions_per_caller
                                              : TG_HTTP_DEF_SESSIONS_PER_CALLER;
    if (tg_hub_caller_sessions(h->hub, c->caller) >= per) {
        static const tg_h1_field_t f[] = {{"Retry-After", "10"}};
        respond_rpc(c, 429, -32000, NULL, 0,
                    "this caller holds max_sessions_per_caller sessions on this listener "
                    "(end one with DELETE, or raise router.listen[].max_sessions_per_caller)",
                    f, 1);
        return NULL;
    }
    int status = 0;
    char why[256];
    char remote[TG_HSESS_REMOTE_MAX];
    peer_text(&c->tcp, remote, sizeof(remote));
    tg_hsess_t *s = tg_hsess_new_claims(h->hub, c->caller, remote, c->claims, &status, why,
                                        sizeof(why));
    if (s == NULL) {
        for (char *p = why; *p != '\0'; p++)
            if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
                *p = '\'';
        respond_rpc(c, status, -32000, NULL, 0, why, NULL, 0);
        return NULL;
    }
    snprintf(c->sid, sizeof(c->sid), "%s", tg_hsess_id(s));
    note(h, h->reg_per_caller, tg_hub_caller_sessions(h->hub, c->caller));
    return s;
}

static void handle_post(hconn_t *c)
{
    tg_h1req_t *r = &c->rq;
    const tg_h1_str_t *ct = &r->hdr[TG_H1H_CONTENT_TYPE], *acc = &r->hdr[TG_H1H_ACCEPT];
    if (ct->p == NULL || !tg_h1_media_is(ct->p, ct->n, "application/json")) {
        respond_rpc(c, 415, -32000, NULL, 0, "Content-Type must be application/json", NULL, 0);
        return;
    }
    bool json_ok = acc->p == NULL || tg_h1_accepts(acc->p, acc->n, "application/json");
    bool sse_ok = acc->p != NULL && tg_h1_accepts(acc->p, acc->n, "text/event-stream");
    if (!json_ok && !sse_ok) {
        respond_rpc(c, 406, -32000, NULL, 0,
                    "Accept must admit application/json and text/event-stream", NULL, 0);
        return;
    }
    tg_mcp_env_t env;
    if (tg_mcp_scan(r->body, r->body_len, &env) < 0) {
        /* The judgement of every front (tg_mcp_judge): -32700 for a body
         * that is not JSON, -32600 for JSON that is no valid message, with
         * the id whenever it was read. */
        tg_mcp_verdict_t v;
        tg_mcp_judge(r->body, r->body_len, &v);
        bool id = v.id.type != TG_J_NONE && v.id.len <= TG_HSESS_RPCID_MAX;
        respond_rpc(c, 400, v.code, id ? r->body + v.id.off : NULL, id ? v.id.len : 0,
                    v.message, NULL, 0);
        return;
    }
    if (env.kind == TG_MCP_BATCH) {
        respond_rpc(c, 400, -32600, NULL, 0,
                    "Invalid Request: send one JSON-RPC message per POST (no batches)", NULL, 0);
        return;
    }
    bool init = env.kind == TG_MCP_REQUEST && env.method.len == sizeof("\"initialize\"") - 1 &&
                memcmp(r->body + env.method.off, "\"initialize\"", env.method.len) == 0;
    const tg_h1_str_t *sid = &r->hdr[TG_H1H_SESSION_ID];
    tg_hsess_t *s;
    if (init) {
        if (sid->p != NULL) {
            respond_rpc(c, 400, -32600, NULL, 0,
                        "Invalid Request: initialize opens a session; send it without "
                        "Mcp-Session-Id",
                        NULL, 0);
            return;
        }
        if ((s = open_session(c)) == NULL)
            return;
    } else if (sid->p == NULL) {
        respond_rpc(c, 400, -32000, NULL, 0,
                    "Bad Request: Mcp-Session-Id header is required (send initialize first)",
                    NULL, 0);
        return;
    } else if ((s = tg_hsess_find(c->h->hub, sid->p, sid->n, c->caller)) == NULL) {
        respond_rpc(c, 404, -32001, NULL, 0, "Session not found", NULL, 0);
        return;
    }
    c->sess = s;
    tg_hstream_t *st = NULL;
    if (env.kind == TG_MCP_REQUEST) {
        memset(&c->st, 0, sizeof(c->st));
        c->st.ops = &stream_ops;
        c->st.ctx = c;
        if (env.id.len > sizeof(c->st.rpcid)) {
            respond_rpc(c, 400, -32600, NULL, 0, "Invalid Request: id over 128 bytes", NULL, 0);
            return;
        }
        memcpy(c->st.rpcid, r->body + env.id.off, env.id.len);
        c->st.rpcid_len = env.id.len;
        if (env.progress_token.type != TG_J_NONE && env.progress_token.len <= sizeof(c->st.ptoken)) {
            memcpy(c->st.ptoken, r->body + env.progress_token.off, env.progress_token.len);
            c->st.ptoken_len = env.progress_token.len;
        }
        c->st.call = env.is_tools_call;
        c->st.events = sse_ok && (env.is_tools_call || !json_ok);
        c->mode = c->st.events ? M_SSE : M_JSON;
        if (c->st.events) {
            c->stream_no = tg_hsess_stream_no(s);
            c->seq = 0;
        }
        st = &c->st;
    }
    int rc = tg_hsess_post(s, r->body, r->body_len, st, posted, c);
    c->posting = rc == 0;
    if (rc < 0) {
        c->mode = M_NONE;
        respond_rpc(c, rc == -ENOMEM ? 500 : 404, -32001, NULL, 0, "Session not found", NULL, 0);
    }
}

/* The caller's live session named by header <sid>, or NULL after
 * answering 400 (no header) or 404 (unknown, ended, another caller's). */
static tg_hsess_t *session_of(hconn_t *c, const tg_h1_str_t *sid)
{
    if (sid->p == NULL) {
        respond_text(c, 400, "Mcp-Session-Id header is required");
        return NULL;
    }
    tg_hsess_t *s = tg_hsess_find(c->h->hub, sid->p, sid->n, c->caller);
    if (s == NULL)
        respond_text(c, 404, "Session not found");
    return s;
}

static void handle_get(hconn_t *c)
{
    tg_h1req_t *r = &c->rq;
    const tg_h1_str_t *acc = &r->hdr[TG_H1H_ACCEPT], *sid = &r->hdr[TG_H1H_SESSION_ID];
    if (acc->p == NULL || !tg_h1_accepts(acc->p, acc->n, "text/event-stream")) {
        respond_text(c, 406, "Accept must admit text/event-stream");
        return;
    }
    tg_hsess_t *s = session_of(c, sid);
    if (s == NULL)
        return;
    tg_sse_win_t *win = tg_hsess_get_window(s);
    uint64_t from = 0;
    tg_sse_resume_t how = TG_SSE_RESUME_GONE;
    const tg_h1_str_t *last = &r->hdr[TG_H1H_LAST_EVENT_ID];
    if (last->p != NULL && win != NULL) {
        uint64_t stream, seq;
        if (tg_sse_parse_id(last->p, last->n, &stream, &seq) < 0) {
            respond_text(c, 400, "Last-Event-ID is not an event id of this server");
            return;
        }
        how = tg_sse_win_resume(win, last->p, last->n, &from);
    }
    memset(&c->st, 0, sizeof(c->st));
    c->st.ops = &stream_ops;
    c->st.ctx = c;
    c->mode = M_GET;
    c->sess = s;
    if (!sse_begin(c))
        return;
    if (how == TG_SSE_RESUME_OK)
        for (uint64_t q = from; q < win->next_seq && !c->closing; q++) {
            const char *p;
            size_t n;
            if (tg_sse_win_get(win, q, &p, &n))
                sse_write(c, p, n);
        }
    tg_hsess_attach_get(s, &c->st); /* a GET stream already open is finished: the newest wins */
}

static void handle_delete(hconn_t *c)
{
    tg_hsess_t *s = session_of(c, &c->rq.hdr[TG_H1H_SESSION_ID]);
    if (s == NULL)
        return;
    tg_hsess_end(s);
    respond(c, 200, NULL, NULL, 0, NULL, 0);
}

/* A refusal for who or where the request came from, told to the runner
 * (tg_http_refused_fn) before it is answered. */
static void tell_refused(hconn_t *c, int status, const char *reason)
{
    tg_http_t *h = c->h;
    if (h->o.refused == NULL)
        return;
    char remote[TG_HSESS_REMOTE_MAX];
    peer_text(&c->tcp, remote, sizeof(remote));
    h->o.refused(h->o.refused_arg, status, reason, remote);
}

static void refuse_peer(hconn_t *c, int status, const char *reason, const char *text)
{
    tell_refused(c, status, reason);
    respond_text(c, status, text);
}

static void handle(hconn_t *c)
{
    tg_http_t *h = c->h;
    tg_h1req_t *r = &c->rq;
    h->stats.requests++;
    c->nreq++;
    note(h, h->reg_reqs, c->nreq);
    uint32_t maxr = h->lc->max_requests ? h->lc->max_requests : TG_HTTP_DEF_MAX_REQUESTS;
    c->keep = r->keep_alive && c->nreq < maxr && !h->stopping;
    if (h->stopping) {
        respond_text(c, 503, "toolgate is shutting down");
        return;
    }
    if (r->path.n != strlen(h->lc->http_path) ||
        memcmp(r->path.p, h->lc->http_path, r->path.n) != 0) {
        respond_text(c, 404, "no MCP endpoint at this path");
        return;
    }
    if (!origin_ok(h, &r->hdr[TG_H1H_ORIGIN])) {
        refuse_peer(c, 403, "origin_not_allowed",
                    "Origin not allowed (router.listen[].allowed_origins)");
        return;
    }
    const tg_h1_str_t *host = &r->hdr[TG_H1H_HOST];
    if (h->loopback && (host->p == NULL || !tg_addr_host_loopback(host->p, host->n))) {
        refuse_peer(c, 403, "host_not_loopback",
                    "Host must name this machine by a loopback name on a loopback listener");
        return;
    }
    c->caller = -1;
    if (h->o.auth != NULL) {
        char why[160], reason[96];
        const char *cause = NULL;
        const tg_h1_str_t *az = &r->hdr[TG_H1H_AUTHORIZATION];
        if (h->o.auth(h->o.auth_arg, az->p, az->p ? az->n : 0, &c->caller, why, sizeof(why),
                      &cause) < 0) {
            static const tg_h1_field_t f[] = {{"WWW-Authenticate", "Bearer realm=\"toolgate\""}};
            /* <cause> is one of the auth's constants: no credential byte. */
            snprintf(reason, sizeof(reason), "unauthenticated: %s",
                     cause != NULL && cause[0] != '\0' ? cause : "refused");
            tell_refused(c, 401, reason);
            char body[256];
            int n = snprintf(body, sizeof(body), "%s\n", why);
            respond(c, 401, "text/plain; charset=utf-8", body, (size_t)n, f, 1);
            return;
        }
        c->claims[0] = '\0';
        if (h->o.claims != NULL && c->caller >= 0 && az->p != NULL)
            h->o.claims(h->o.auth_arg, az->p, az->n, c->claims, sizeof(c->claims));
    }
    if (!version_ok(&r->hdr[TG_H1H_PROTOCOL_VERSION])) {
        respond_text(c, 400, "Bad Request: unsupported MCP-Protocol-Version");
        return;
    }
    switch (r->method) {
    case TG_H1M_POST:
        handle_post(c);
        return;
    case TG_H1M_GET:
        handle_get(c);
        return;
    case TG_H1M_DELETE:
        handle_delete(c);
        return;
    default: {
        static const tg_h1_field_t f[] = {{"Allow", "GET, POST, DELETE"}};
        respond(c, 405, "text/plain; charset=utf-8", "Method Not Allowed\n", 19, f, 1);
        return;
    }
    }
}

/* ---- reading --------------------------------------------------------------- */

static void refuse_close(hconn_t *c, int status, const char *why)
{
    c->keep = false;
    respond_text(c, status, why);
}

/* A plain HTTP request on a TLS port: answered in cleartext, then closed. */
static void plain_on_tls(hconn_t *c)
{
    uv_buf_t b = uv_buf_init((char *)TG_TLS_PLAIN_HTTP_REPLY, sizeof(TG_TLS_PLAIN_HTTP_REPLY) - 1);
    c->h->stats.requests++;
    c->h->stats.status[4]++;
    c->busy = true;
    raw_write(c, &b, 1);
    c->shut = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Count what <c>'s buffers hold now in stats.buffer_bytes (/metrics). */
static void held_sync(hconn_t *c)
{
    size_t now = (c->in != NULL ? HTTP_IN_CAP : 0) + (c->cin != NULL ? HTTP_IN_CAP : 0) +
                 (c->rq_init ? tg_h1req_held(&c->rq) : 0);
    c->h->stats.buffer_bytes = c->h->stats.buffer_bytes - c->held + now;
    c->held = now;
}

/* The read buffers exist only while bytes are pending (as nginx does): they
 * are allocated right before a read (on_alloc) and given back by bufs_put
 * once no request is part-read, so an idle connection holds none of them.
 * false: out of memory. */
static bool bufs_get(hconn_t *c)
{
    if (c->in == NULL && (c->in = malloc(HTTP_IN_CAP)) == NULL)
        return false;
    if (c->tls != NULL && c->cin == NULL && (c->cin = malloc(HTTP_IN_CAP)) == NULL)
        return false;
    held_sync(c);
    return true;
}

static void bufs_put(hconn_t *c)
{
    if (c->busy || c->got_bytes || c->in_len > 0 || c->cin_len > 0)
        return;
    free(c->in);
    free(c->cin);
    c->in = c->cin = NULL;
    held_sync(c);
}

/* Give TLS the ciphertext read, then move its plaintext into the read
 * buffer. false: the connection is closing. */
static bool tls_fill(hconn_t *c)
{
    if (!bufs_get(c)) {
        conn_close(c);
        return false;
    }
    while (c->cin_len > 0) {
        ssize_t k = tg_tls_conn_feed(c->tls, c->cin, c->cin_len);
        if (k == -ENOBUFS)
            break; /* its plaintext first */
        if (k < 0) {
            if (k == -EPROTO && tg_tls_conn_plain_http(c->tls))
                plain_on_tls(c);
            else
                conn_close(c);
            return false;
        }
        memmove(c->cin, c->cin + k, c->cin_len - (size_t)k);
        c->cin_len -= (size_t)k;
    }
    while (c->in_len < HTTP_IN_CAP) {
        ssize_t n = tg_tls_conn_read(c->tls, c->in + c->in_len, HTTP_IN_CAP - c->in_len);
        if (n == -EAGAIN)
            break;
        if (n <= 0) {
            tls_flush(c);
            conn_close(c);
            return false;
        }
        c->in_len += (size_t)n;
    }
    tls_flush(c);
    return !c->closing;
}

static void arm_wait(hconn_t *c)
{
    const tg_listen_cfg_t *lc = c->h->lc;
    uint64_t ms = c->got_bytes || c->nreq == 0
                      ? (lc->header_timeout_ms   ? lc->header_timeout_ms
                         : c->h->o.frame_timeout_ms ? c->h->o.frame_timeout_ms
                                                  : TG_HTTP_DEF_HEADER_TIMEOUT_MS)
                      : (lc->keepalive_timeout_ms ? lc->keepalive_timeout_ms
                                                  : TG_HTTP_DEF_KEEPALIVE_TIMEOUT_MS);
    if (!uv_is_active((uv_handle_t *)&c->timer))
        uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void conn_pump(hconn_t *c)
{
    c->in_pump = true;
    while (!c->closing && !c->busy) {
        if (c->tls != NULL && !tls_fill(c))
            break;
        if (c->in_len == 0)
            break; /* (with tls, ciphertext left in cin is a partial record) */
        size_t used = 0;
        tg_h1_ev_t ev = tg_h1req_feed(&c->rq, c->in, c->in_len, &used);
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
        held_sync(c);
        if (used > 0 && !c->got_bytes) {
            c->got_bytes = true;
            uv_timer_stop(&c->timer); /* the request's own clock starts now */
            arm_wait(c);
        }
        if (ev == TG_H1_NEED_MORE)
            continue; /* the buffer is empty now: more from TLS, or the loop ends */
        note(c->h, c->h->reg_head, c->rq.head_bytes);
        if (ev == TG_H1_HEAD) {
            uv_buf_t b = uv_buf_init((char *)TG_H1_CONTINUE, sizeof(TG_H1_CONTINUE) - 1);
            conn_write(c, &b, 1);
            continue;
        }
        c->busy = true;
        uv_timer_stop(&c->timer);
        if (ev == TG_H1_ERROR) {
            c->h->stats.requests++;
            refuse_close(c, c->rq.status, c->rq.reason);
            break;
        }
        handle(c);
    }
    c->in_pump = false;
    if (c->closing)
        return;
    bufs_put(c);
    if (c->shut || c->peer_eof) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        return;
    }
    if (c->busy) {
        /* Read on while a request is answered, so a client that goes away
         * is seen at once (its stream stops taking the agent's requests);
         * what it sends meanwhile waits in the read buffer, and a full
         * buffer stops reading (on_read) until the answer is written. */
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        return;
    }
    arm_wait(c);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    hconn_t *c = hd->data;
    (void)suggested;
    if (!bufs_get(c)) { /* UV_ENOBUFS: on_read closes the connection */
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    char *b = c->tls != NULL ? c->cin : c->in;
    size_t used = c->tls != NULL ? c->cin_len : c->in_len;
    buf->base = b + used;
    buf->len = HTTP_IN_CAP - used;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    hconn_t *c = s->data;
    if (n == UV_ENOBUFS && c->busy) { /* the read buffer is full: the kernel holds the rest */
        uv_read_stop(s);
        return;
    }
    if (n == UV_EOF && c->busy && c->mode != M_GET) {
        /* Gone, or only done sending: the answer is still written (then
         * the connection closes), but the stream carries nothing else. */
        c->peer_eof = true;
        c->keep = false;
        c->st.events = false;
        uv_read_stop(s);
        if (c->mode == M_SSE && c->st.s != NULL && c->st.call && !c->closing && sse_begin(c)) {
            /* TCP cannot tell a client that closed from one that only
             * shut down its sending side until something is written: a
             * comment now draws a reset from a closed one, and the next,
             * HTTP_PROBE_MS on, fails and closes the connection, which
             * cancels its call (tg_hsess_abandon: nobody could read the
             * answer). A half-closed client just reads two comments. */
            sse_write(c, TG_SSE_PING, sizeof(TG_SSE_PING) - 1);
            if (!c->closing)
                uv_timer_start(&c->timer, on_timer, HTTP_PROBE_MS, 0);
        }
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (c->tls != NULL)
        c->cin_len += (size_t)n;
    else
        c->in_len += (size_t)n;
    if (n > 0)
        conn_pump(c);
    else
        bufs_put(c); /* nothing was read (EAGAIN) */
}

static void on_timer(uv_timer_t *t)
{
    hconn_t *c = t->data;
    if (c->closing)
        return;
    if (c->mode == M_SSE || c->mode == M_GET) {
        sse_write(c, TG_SSE_PING, sizeof(TG_SSE_PING) - 1);
        uv_timer_start(&c->timer, on_timer, HTTP_PING_MS, 0);
        return;
    }
    if (c->busy)
        return;
    if (c->got_bytes || c->nreq == 0) {
        if (c->got_bytes) {
            c->busy = true;
            uv_read_stop((uv_stream_t *)&c->tcp);
            /* A slow head or body (a slowloris): audited as a Unix
             * caller's unfinished frame is (reason frame_timeout). */
            tell_refused(c, 408, "frame_timeout");
            refuse_close(c, 408, "the request did not arrive within header_timeout");
            return;
        }
    }
    conn_close(c);
}

/* ---- connections ------------------------------------------------------------ */

static void conn_closed(uv_handle_t *hd)
{
    hconn_t *c = hd->data;
    if (--c->open > 0)
        return;
    tg_http_t *h = c->h;
    TG_LIST_UNLINK(h->conns, c, prev, next);
    h->nconns--;
    h->open--;
    h->stats.buffer_bytes -= c->held;
    c->held = 0;
    if (!h->stopping)
        usage(h);
    if (c->posting) {
        c->dead = true; /* the session's write still names it */
        return;
    }
    conn_free(c);
}

static void conn_free(hconn_t *c)
{
    if (c->rq_init)
        tg_h1req_free(&c->rq);
    if (c->tls != NULL)
        tg_tls_conn_free(c->tls);
    free(c->in);
    free(c->cin);
    free(c);
}

static void conn_close(hconn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->st.s != NULL)
        tg_hsess_abandon(&c->st); /* its request, unanswered, is cancelled */
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    uv_close((uv_handle_t *)&c->timer, conn_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
    tg_http_t *h = server->data;
    if (status < 0)
        return;
    hconn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->h = h;
    c->caller = -1;
    uv_tcp_init(h->loop, &c->tcp);
    uv_timer_init(h->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open = 2;
    TG_LIST_PUSH(h->conns, c, prev, next);
    h->nconns++;
    h->open++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (h->nconns > h->max_conns || h->stopping) {
        static const char busy[] = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\n"
                                   "Content-Length: 52\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                                   "too many connections (router.listen[].max_connections)\n";
        static const char down[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                                   "Content-Length: 26\r\nConnection: close\r\n\r\n"
                                   "toolgate is shutting down\n";
        h->stats.refused_connections++;
        h->stats.status[h->stopping ? 5 : 4]++;
        uv_buf_t b = h->stopping ? uv_buf_init((char *)down, sizeof(down) - 1)
                                 : uv_buf_init((char *)busy, sizeof(busy) - 1);
        c->shut = true;
        raw_write(c, &b, 1); /* cleartext even on a TLS port: no handshake is spent on it */
        return;
    }
    h->stats.connections++;
    usage(h);
    tg_h1req_opts_t ro = {.max_header_bytes = h->lc->max_header_bytes
                                                  ? h->lc->max_header_bytes
                                                  : TG_HTTP_DEF_MAX_HEADER_BYTES,
                          .max_headers = HTTP_MAX_HEADERS,
                          .max_body_bytes = (size_t)h->o.max_frame};
    if (tg_h1req_init(&c->rq, &ro) < 0) { /* allocates nothing: the buffers come with bytes */
        conn_close(c);
        return;
    }
    c->rq_init = true;
    if (h->o.tls_ctx != NULL &&
        (c->tls = tg_tls_conn_new(h->o.tls_ctx, HTTP_TLS_CAP)) == NULL) {
        conn_close(c);
        return;
    }
    arm_wait(c);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- the listener ---------------------------------------------------------------- */

static void listener_closed(uv_handle_t *hd)
{
    tg_http_t *h = hd->data;
    h->open--;
}

static void on_tick(uv_timer_t *t)
{
    tg_http_t *h = t->data;
    tg_hub_tick(h->hub, uv_now(h->loop));
    usage(h);
}

/* listen.N.header_bytes, requests_per_connection, sessions_per_caller and
 * stream_queue_bytes (listen.N.connections and .sessions are the runner's). */
static void register_bounds(tg_http_t *h)
{
    const tg_listen_cfg_t *lc = h->lc;
    h->reg_head = h->reg_reqs = h->reg_per_caller = h->reg_stream = -1;
    if (h->o.reg == NULL)
        return;
    static const char *const names[] = {"header_bytes", "requests_per_connection",
                                        "sessions_per_caller", "stream_queue_bytes"};
    static const tg_limit_cat_t cats[] = {TG_LIMIT_FRAME, TG_LIMIT_CONCURRENCY,
                                          TG_LIMIT_CONCURRENCY, TG_LIMIT_WRITE_QUEUE};
    static const char *const scopes[] = {"request", "connection", "caller", "session"};
    uint64_t caps[] = {lc->max_header_bytes ? lc->max_header_bytes : TG_HTTP_DEF_MAX_HEADER_BYTES,
                       lc->max_requests ? lc->max_requests : TG_HTTP_DEF_MAX_REQUESTS,
                       lc->sessions_per_caller ? lc->sessions_per_caller
                                               : TG_HTTP_DEF_SESSIONS_PER_CALLER,
                       h->wq_bound};
    int *idx[] = {&h->reg_head, &h->reg_reqs, &h->reg_per_caller, &h->reg_stream};
    for (size_t i = 0; i < 4; i++) {
        char name[96];
        snprintf(name, sizeof(name), "listen.%zu.%s", h->o.index, names[i]);
        int rc = tg_registry_add(h->o.reg, name, cats[i], scopes[i], caps[i]);
        *idx[i] = rc >= 0 ? rc : -1;
    }
}

int tg_http_listen(uv_loop_t *loop, const tg_http_opts_t *o, tg_http_t **out, tg_err_t *err)
{
    const tg_listen_cfg_t *lc = o->lc;
    struct sockaddr_storage ss;
    char what[64];
    snprintf(what, sizeof(what), "router.listen[%zu].http", o->index);
    if (tg_addr_parse(lc->http_addr, what, &ss, err) < 0)
        return -1;
    tg_http_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return tg_err_set(err, -1, "%s: out of memory", what);
    h->loop = loop;
    h->o = *o;
    h->lc = lc;
    h->loopback = tg_addr_loopback(&ss);
    h->max_conns = lc->max_connections ? lc->max_connections : TG_DEF_LISTEN_MAX_CONNECTIONS;
    h->wq_bound = 2 * (size_t)o->max_frame;
    register_bounds(h);
    uint32_t maxs = lc->max_sessions ? lc->max_sessions : TG_HTTP_DEF_MAX_SESSIONS;
    uint64_t idle = lc->session_idle_ms ? lc->session_idle_ms : TG_HTTP_DEF_SESSION_IDLE_MS;
    h->hub = tg_hub_new(loop, o->max_frame, idle, maxs, o->open, o->open_arg);
    if (h->hub == NULL) {
        free(h);
        return tg_err_set(err, -1, "%s: out of memory", what);
    }
    uv_tcp_init(loop, &h->lsock);
    h->lsock.data = h;
    h->open = 1;
    /* Socket activation: a socket the service manager passed for this address (listen.h). */
    int afd = tg_lsock_inherited_inet((const struct sockaddr *)&ss);
    int rc = afd >= 0 ? uv_tcp_open(&h->lsock, afd)
                      : uv_tcp_bind(&h->lsock, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->lsock, HTTP_BACKLOG, on_connection);
    if (rc < 0) {
        tg_err_set(err, -1,
                   "%s: cannot listen on %s: %s (is another process using the port? pick "
                   "another or stop it)",
                   what, lc->http_addr, uv_strerror(rc));
        uv_close((uv_handle_t *)&h->lsock, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        tg_hub_free(h->hub);
        free(h);
        return -1;
    }
    uv_timer_init(loop, &h->tick);
    h->tick.data = h;
    h->open++;
    uv_timer_start(&h->tick, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&h->tick); /* the loop does not live for it */
    struct sockaddr_storage bound;
    int bl = sizeof(bound);
    if (uv_tcp_getsockname(&h->lsock, (struct sockaddr *)&bound, &bl) == 0)
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    *out = h;
    return 0;
}

int tg_http_port(const tg_http_t *h)
{
    return h->port;
}

tg_hub_t *tg_http_hub(const tg_http_t *h)
{
    return h->hub;
}

const tg_http_stats_t *tg_http_stats(const tg_http_t *h)
{
    return &h->stats;
}

void tg_http_set_cfg(tg_http_t *h, const tg_listen_cfg_t *lc)
{
    h->lc = lc;
    h->o.lc = lc;
}

void tg_http_stop(tg_http_t *h)
{
    if (h->stopping)
        return;
    h->stopping = true;
    if (!uv_is_closing((uv_handle_t *)&h->lsock))
        uv_close((uv_handle_t *)&h->lsock, listener_closed);
    if (!uv_is_closing((uv_handle_t *)&h->tick))
        uv_close((uv_handle_t *)&h->tick, listener_closed);
    /* The sessions are not ended here: serve drains their engine sessions
     * (calls in flight are answered, then each ends and its bridge closes),
     * and the answers still reach the connections that wait for them. */
    hconn_t *next;
    for (hconn_t *c = h->conns; c != NULL; c = next) {
        next = c->next;
        if (c->mode == M_GET) { /* the stream ends cleanly (its last chunk), then closes */
            tg_hsess_detach(&c->st);
            st_finish(&c->st);
        } else if (!c->busy) {
            conn_close(c);
        }
    }
}

bool tg_http_idle(const tg_http_t *h)
{
    return h->open == 0 && tg_hub_idle(h->hub);
}

void tg_http_free(tg_http_t *h)
{
    if (h == NULL)
        return;
    tg_hub_free(h->hub);
    free(h);
}
