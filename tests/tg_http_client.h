/* A small HTTP/1.1 client on a raw socket for the integration tests of the
 * MCP Streamable HTTP front (tests/test_http_front.c): send request bytes
 * as they are (so a test can send malformed or hostile ones), read a
 * response head and its body (Content-Length, chunked, or up to the close),
 * and read the events of an SSE stream one at a time. Over TLS with
 * OpenSSL's libssl client (tgc_tls_dial), verifying against a CA file.
 *
 * Header-only, like tests/tg_harness.h (which it needs for tgh_tcp_dial
 * and the clock). Reads time out after TGC_TIMEOUT_MS; functions return 0
 * or a negative errno (-ETIMEDOUT, -ECONNRESET at EOF, -EPROTO on bytes
 * that are not HTTP), and nothing here fails a test by itself except the
 * tgc_must_* shorthands.
 */
#ifndef TG_TESTS_HTTP_CLIENT_H
#define TG_TESTS_HTTP_CLIENT_H

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tests/tg_harness.h"

#define TGC_TIMEOUT_MS 5000
#define TGC_HEAD_MAX   (16 * 1024)

typedef struct tgc {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    char *buf; /* bytes read, not yet consumed */
    size_t len, cap;
    bool eof;
    /* an SSE body being read: its de-chunked bytes not yet returned */
    char *sse;
    size_t sse_len, sse_cap;
    bool sse_chunked, sse_done;
} tgc_t;

typedef struct tgc_resp {
    int status;
    char head[TGC_HEAD_MAX]; /* status line and headers, NUL-terminated */
    char *body;              /* NUL-terminated; the caller frees (tgc_resp_free) */
    size_t body_len;
} tgc_resp_t;

/* The first <nlen> bytes <needle> in <hay> (<len> bytes), or NULL. */
static inline char *tgc_mem(char *hay, size_t len, const char *needle, size_t nlen)
{
    for (size_t i = 0; i + nlen <= len; i++)
        if (memcmp(hay + i, needle, nlen) == 0)
            return hay + i;
    return NULL;
}

static inline void tgc_init(tgc_t *c, int fd)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
}

/* A plain connection to 127.0.0.1:<port>. */
static inline int tgc_dial(tgc_t *c, int port)
{
    int fd = tgh_tcp_dial(port);
    if (fd < 0)
        return fd;
    tgc_init(c, fd);
    return 0;
}

/* A TLS connection to 127.0.0.1:<port> for "localhost", verifying the
 * server against <ca_pem> (NULL: no verification), ALPN http/1.1. 0, or
 * -EPROTO when the handshake failed (the reason in <why>). */
static inline int tgc_tls_dial(tgc_t *c, int port, const char *ca_pem, char *why, size_t cap)
{
    int rc = tgc_dial(c, port);
    if (rc < 0)
        return rc;
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (ca_pem != NULL) {
        SSL_CTX_load_verify_locations(c->ctx, ca_pem, NULL);
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    }
    SSL_CTX_set_alpn_protos(c->ctx, (const unsigned char *)"\x08http/1.1", 9);
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    SSL_set1_host(c->ssl, "localhost");
    if (SSL_connect(c->ssl) != 1) {
        unsigned long e = ERR_get_error();
        snprintf(why, cap, "%s (verify: %s)", e ? ERR_error_string(e, NULL) : "handshake failed",
                 X509_verify_cert_error_string(SSL_get_verify_result(c->ssl)));
        return -EPROTO;
    }
    return 0;
}

static inline void tgc_close(tgc_t *c)
{
    if (c->ssl != NULL)
        SSL_free(c->ssl);
    if (c->ctx != NULL)
        SSL_CTX_free(c->ctx);
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c->sse);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

/* Send <len> bytes as they are. */
static inline int tgc_send(tgc_t *c, const void *p, size_t len)
{
    const char *b = p;
    while (len > 0) {
        ssize_t n =
            c->ssl != NULL ? SSL_write(c->ssl, b, (int)len) : send(c->fd, b, len, MSG_NOSIGNAL);
        if (n <= 0) {
            if (c->ssl == NULL && n < 0 && errno == EINTR)
                continue;
            return c->ssl == NULL && n < 0 ? -errno : -ECONNRESET;
        }
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

static inline int tgc_sendf(tgc_t *c, const char *s)
{
    return tgc_send(c, s, strlen(s));
}

/* A request: <method> on /mcp with Host 127.0.0.1, <headers> (each line
 * ended by CRLF, may be NULL) and <body> (NULL: none) with its
 * Content-Length. */
static inline int tgc_request(tgc_t *c, const char *method, const char *headers, const char *body)
{
    size_t blen = body != NULL ? strlen(body) : 0;
    size_t cap = 512 + (headers ? strlen(headers) : 0) + blen;
    char *req = malloc(cap);
    if (req == NULL)
        return -ENOMEM;
    int n = snprintf(req, cap, "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n%s", method,
                     headers ? headers : "");
    if (body != NULL)
        n += snprintf(req + n, cap - (size_t)n, "Content-Length: %zu\r\n", blen);
    n += snprintf(req + n, cap - (size_t)n, "\r\n");
    if (body != NULL)
        memcpy(req + n, body, blen);
    int rc = tgc_send(c, req, (size_t)n + blen);
    free(req);
    return rc;
}

/* More bytes into the buffer within the deadline. */
static inline int tgc_fill(tgc_t *c, uint64_t deadline)
{
    if (c->eof)
        return -ECONNRESET;
    if (c->len + 16384 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 65536;
        char *nb = realloc(c->buf, ncap);
        if (nb == NULL)
            return -ENOMEM;
        c->buf = nb;
        c->cap = ncap;
    }
    if (c->ssl == NULL || SSL_pending(c->ssl) == 0) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int pr;
        while ((pr = poll(&p, 1, tgh_left(deadline))) < 0 && errno == EINTR) {
        }
        if (pr == 0)
            return -ETIMEDOUT;
    }
    ssize_t n = c->ssl != NULL ? SSL_read(c->ssl, c->buf + c->len, (int)(c->cap - c->len - 1))
                               : recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (n <= 0) {
        c->eof = true;
        return -ECONNRESET;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    return 0;
}

static inline void tgc_consume(tgc_t *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* The index just past the next CRLF (or "\n\n" when <blank>), filling as
 * needed; negative errno. */
static inline long tgc_find(tgc_t *c, const char *what, uint64_t deadline)
{
    for (;;) {
        if (c->len > 0) {
            c->buf[c->len] = '\0';
            char *p = tgc_mem(c->buf, c->len, what, strlen(what));
            if (p != NULL)
                return (long)(p - c->buf) + (long)strlen(what);
        }
        int rc = tgc_fill(c, deadline);
        if (rc < 0)
            return rc;
    }
}

/* The value of header <name> in <head> into <out> ("" and false when absent). */
static inline bool tgc_header(const char *head, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    out[0] = '\0';
    for (const char *l = strstr(head, "\r\n"); l != NULL; l = strstr(l, "\r\n")) {
        l += 2;
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            snprintf(out, cap, "%.*s", (int)n, v);
            return true;
        }
    }
    return false;
}

/* Read the bytes of <n> into <out> (grown), within the deadline. */
static inline int tgc_take(tgc_t *c, size_t n, char **out, size_t *olen, size_t *ocap,
                           uint64_t deadline)
{
    while (c->len < n) {
        int rc = tgc_fill(c, deadline);
        if (rc < 0)
            return rc;
    }
    if (*olen + n + 1 > *ocap) {
        size_t ncap = (*olen + n + 1) * 2;
        char *nb = realloc(*out, ncap);
        if (nb == NULL)
            return -ENOMEM;
        *out = nb;
        *ocap = ncap;
    }
    memcpy(*out + *olen, c->buf, n);
    *olen += n;
    (*out)[*olen] = '\0';
    tgc_consume(c, n);
    return 0;
}

/* One chunk of a chunked body appended to <out>; 1 after the last chunk. */
static inline int tgc_chunk(tgc_t *c, char **out, size_t *olen, size_t *ocap, uint64_t deadline)
{
    long e = tgc_find(c, "\r\n", deadline);
    if (e < 0)
        return (int)e;
    char *end;
    unsigned long sz = strtoul(c->buf, &end, 16);
    if (end == c->buf)
        return -EPROTO;
    tgc_consume(c, (size_t)e);
    if (sz == 0) {
        long t = tgc_find(c, "\r\n", deadline); /* no trailers from toolgate */
        if (t < 0)
            return (int)t;
        tgc_consume(c, (size_t)t);
        return 1;
    }
    int rc = tgc_take(c, sz, out, olen, ocap, deadline);
    if (rc < 0)
        return rc;
    e = tgc_find(c, "\r\n", deadline);
    if (e != 2)
        return e < 0 ? (int)e : -EPROTO;
    tgc_consume(c, 2);
    return 0;
}

/* A response head into <r>: 0, or a negative errno. */
static inline int tgc_read_head(tgc_t *c, tgc_resp_t *r, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    memset(r, 0, sizeof *r);
    long e = tgc_find(c, "\r\n\r\n", deadline);
    if (e < 0)
        return (int)e;
    if ((size_t)e >= sizeof r->head || strncmp(c->buf, "HTTP/1.", 7) != 0)
        return -EPROTO;
    memcpy(r->head, c->buf, (size_t)e);
    r->head[e] = '\0';
    r->status = atoi(r->head + 9);
    tgc_consume(c, (size_t)e);
    return 0;
}

static inline bool tgc_is_chunked(const tgc_resp_t *r)
{
    char te[64];
    return tgc_header(r->head, "Transfer-Encoding", te, sizeof te) &&
           strcasecmp(te, "chunked") == 0;
}

/* A whole response (head and body; a 100 Continue is skipped). */
static inline int tgc_read(tgc_t *c, tgc_resp_t *r, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    int rc;
    do
        rc = tgc_read_head(c, r, tgh_left(deadline));
    while (rc == 0 && r->status == 100);
    if (rc < 0)
        return rc;
    size_t cap = 0;
    char cl[32];
    r->body = calloc(1, 1);
    if (tgc_is_chunked(r)) {
        while ((rc = tgc_chunk(c, &r->body, &r->body_len, &cap, deadline)) == 0) {
        }
        return rc < 0 ? rc : 0;
    }
    if (tgc_header(r->head, "Content-Length", cl, sizeof cl))
        return tgc_take(c, strtoul(cl, NULL, 10), &r->body, &r->body_len, &cap, deadline);
    while (tgc_fill(c, deadline) == 0) { /* up to the close */
    }
    return tgc_take(c, c->len, &r->body, &r->body_len, &cap, deadline);
}

static inline void tgc_resp_free(tgc_resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

/* The data of the next SSE event of the stream whose head was just read
 * (comments skipped), NUL-terminated in <out>, its id in <id> (may be
 * NULL). 0; 1 when the stream ended; negative errno. */
static inline int tgc_sse_next(tgc_t *c, char *out, size_t cap, char *id, size_t id_cap,
                               int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *end = c->sse_len ? tgc_mem(c->sse, c->sse_len, "\n\n", 2) : NULL;
        if (end != NULL) {
            size_t n = (size_t)(end - c->sse) + 2;
            out[0] = '\0';
            if (id != NULL)
                id[0] = '\0';
            for (char *l = c->sse; l < end + 1;) {
                char *nl = memchr(l, '\n', (size_t)(end + 1 - l));
                size_t ll = (size_t)(nl - l);
                if (ll >= 6 && strncmp(l, "data: ", 6) == 0)
                    snprintf(out + strlen(out), cap - strlen(out), "%.*s", (int)(ll - 6), l + 6);
                else if (id != NULL && ll >= 4 && strncmp(l, "id: ", 4) == 0)
                    snprintf(id, id_cap, "%.*s", (int)(ll - 4), l + 4);
                l = nl + 1;
            }
            bool comment = c->sse[0] == ':';
            memmove(c->sse, c->sse + n, c->sse_len - n);
            c->sse_len -= n;
            if (!comment)
                return 0;
            continue;
        }
        if (c->sse_done)
            return 1;
        int rc = tgc_chunk(c, &c->sse, &c->sse_len, &c->sse_cap, deadline);
        if (rc < 0)
            return rc;
        if (rc == 1)
            c->sse_done = true;
    }
}

/* Start reading an SSE body (after its head). */
static inline void tgc_sse_begin(tgc_t *c)
{
    c->sse_len = 0;
    c->sse_done = false;
}

#endif
