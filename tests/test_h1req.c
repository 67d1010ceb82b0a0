/* h1req: requests whole, pipelined and split at every byte boundary; every
 * refusal class (400, 413, 417, 431, 501, 505) with its smuggling and
 * injection cases; the bounds exactly at and one over; Expect:
 * 100-continue; chunked bodies with extensions and trailers; Accept and
 * Content-Type matching. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/http/h1req.h"

#define MAXREQ 8

typedef struct got {
    tg_h1_ev_t ev;
    int status;
    const char *reason;
    tg_h1_method_t method;
    char method_name[16];
    char path[128], query[128];
    bool has_query;
    int minor;
    bool keep_alive, cont, chunked;
    char hdr[TG_H1H_COUNT][512];
    bool has[TG_H1H_COUNT];
    char body[8192];
    size_t body_len;
    int heads; /* HEAD events before this request */
} got_t;

typedef struct run {
    got_t g[MAXREQ];
    int n;
} run_t;

static tg_h1req_opts_t opts = {.max_header_bytes = 1024, .max_headers = 16, .max_body_bytes = 64};

static void copy_str(char *dst, size_t cap, tg_h1_str_t s)
{
    cr_assert_lt(s.n, cap);
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
}

static void record(tg_h1req_t *r, tg_h1_ev_t ev, got_t *g)
{
    g->ev = ev;
    if (ev == TG_H1_ERROR) {
        g->status = r->status;
        g->reason = r->reason;
        cr_assert_not_null(r->reason);
        return;
    }
    g->method = r->method;
    snprintf(g->method_name, sizeof g->method_name, "%s", r->method_name);
    copy_str(g->path, sizeof g->path, r->path);
    g->has_query = r->query.p != NULL;
    if (g->has_query)
        copy_str(g->query, sizeof g->query, r->query);
    g->minor = r->http_minor;
    g->keep_alive = r->keep_alive;
    g->cont = r->expect_continue;
    g->chunked = r->chunked;
    for (int i = 0; i < TG_H1H_COUNT; i++) {
        g->has[i] = r->hdr[i].p != NULL;
        if (g->has[i])
            copy_str(g->hdr[i], sizeof g->hdr[i], r->hdr[i]);
    }
    cr_assert_not_null(r->body);
    cr_assert_leq(r->body_len, sizeof g->body);
    memcpy(g->body, r->body, r->body_len);
    g->body_len = r->body_len;
}

/* Feed s[0, n) as a front would: pieces of the sizes first, then step
 * (the rest in one piece when step is 0), keeping unconsumed bytes in a
 * window. Stops at the first ERROR. */
static void feed_split(const tg_h1req_opts_t *o, const char *s, size_t n, size_t first, size_t step,
                       run_t *out)
{
    tg_h1req_t r;
    static char win[1 << 16];
    size_t len = 0, fed = 0;
    int heads = 0;
    memset(out, 0, sizeof(*out));
    cr_assert_eq(tg_h1req_init(&r, o), 0);
    while (fed < n) {
        size_t k = fed == 0 && first > 0 ? first : step > 0 ? step : n - fed;
        if (k > n - fed)
            k = n - fed;
        cr_assert_leq(len + k, sizeof win);
        memcpy(win + len, s + fed, k);
        len += k;
        fed += k;
        for (;;) {
            size_t used = 12345;
            tg_h1_ev_t ev = tg_h1req_feed(&r, win, len, &used);
            cr_assert_leq(used, len, "consumed %zu of %zu", used, len);
            if (ev == TG_H1_NEED_MORE) {
                cr_assert_eq(used, len, "NEED_MORE consumes everything");
                len = 0;
                break;
            }
            memmove(win, win + used, len - used);
            len -= used;
            if (ev == TG_H1_HEAD) {
                heads++;
                continue;
            }
            cr_assert_lt(out->n, MAXREQ);
            record(&r, ev, &out->g[out->n]);
            out->g[out->n++].heads = heads;
            heads = 0;
            if (ev == TG_H1_ERROR) {
                size_t u2 = 1;
                cr_assert_eq(tg_h1req_feed(&r, "GET / HTTP/1.1\r\n", 16, &u2), TG_H1_ERROR);
                cr_assert_eq(u2, 0, "an error is sticky");
                tg_h1req_free(&r);
                return;
            }
        }
    }
    tg_h1req_free(&r);
}

static void same_run(const run_t *a, const run_t *b, size_t first, size_t step)
{
    cr_assert_eq(a->n, b->n, "split at %zu then %zu: %d events, whole: %d", first, step, b->n,
                 a->n);
    for (int i = 0; i < a->n; i++) {
        const got_t *x = &a->g[i], *y = &b->g[i];
        cr_assert_eq(x->ev, y->ev, "split at %zu/%zu: event %d", first, step, i);
        cr_assert_eq(x->status, y->status, "split at %zu/%zu: status %d vs %d (%s / %s)", first,
                     step, x->status, y->status, x->reason, y->reason);
        if (x->ev == TG_H1_ERROR)
            continue;
        cr_assert_str_eq(x->path, y->path);
        cr_assert_eq(x->body_len, y->body_len, "split at %zu/%zu", first, step);
        cr_assert_eq(memcmp(x->body, y->body, x->body_len), 0);
        cr_assert_eq(x->keep_alive, y->keep_alive);
        cr_assert_eq(x->heads, y->heads);
        for (int h = 0; h < TG_H1H_COUNT; h++) {
            cr_assert_eq(x->has[h], y->has[h]);
            cr_assert_str_eq(x->hdr[h], y->hdr[h]);
        }
    }
}

/* Run <s> whole, then split at every byte boundary, then byte by byte:
 * every way must give the same events. Returns the whole run. */
static run_t *run_all(const tg_h1req_opts_t *o, const char *s)
{
    static run_t whole, part;
    size_t n = strlen(s);
    feed_split(o, s, n, 0, 0, &whole);
    for (size_t k = 1; k < n; k++) {
        feed_split(o, s, n, k, 0, &part);
        same_run(&whole, &part, k, 0);
    }
    feed_split(o, s, n, 0, 1, &part);
    same_run(&whole, &part, 0, 1);
    return &whole;
}

static const got_t *one(const char *s)
{
    run_t *r = run_all(&opts, s);
    cr_assert_eq(r->n, 1, "expected one event for %s", s);
    return &r->g[0];
}

static void refused(const char *s, int status)
{
    const got_t *g = one(s);
    cr_assert_eq(g->ev, TG_H1_ERROR, "expected %d for %s", status, s);
    cr_assert_eq(g->status, status, "got %d (%s), expected %d for %s", g->status, g->reason, status,
                 s);
}

static const got_t *accepted(const char *s)
{
    const got_t *g = one(s);
    cr_assert_eq(g->ev, TG_H1_REQUEST, "refused %d (%s): %s", g->status, g->reason, s);
    return g;
}

/* ---- well-formed requests --------------------------------------------- */

Test(h1req, get_with_query_and_kept_headers)
{
    const got_t *g = accepted("GET /mcp?x=1&y HTTP/1.1\r\n"
                              "Host: 127.0.0.1:8080\r\n"
                              "Accept: text/event-stream  \r\n"
                              "X-Other: dropped\r\n"
                              "mcp-session-id: abc\r\n"
                              "MCP-Protocol-Version: 2025-06-18\r\n"
                              "Last-Event-ID: 3_7\r\n"
                              "Origin: http://localhost\r\n"
                              "Authorization: Bearer t0k\r\n\r\n");
    cr_assert_eq(g->method, TG_H1M_GET);
    cr_assert_str_eq(g->method_name, "GET");
    cr_assert_str_eq(g->path, "/mcp");
    cr_assert(g->has_query);
    cr_assert_str_eq(g->query, "x=1&y");
    cr_assert_eq(g->minor, 1);
    cr_assert(g->keep_alive);
    cr_assert_str_eq(g->hdr[TG_H1H_HOST], "127.0.0.1:8080");
    cr_assert_str_eq(g->hdr[TG_H1H_ACCEPT], "text/event-stream", "trailing OWS trimmed");
    cr_assert_str_eq(g->hdr[TG_H1H_SESSION_ID], "abc");
    cr_assert_str_eq(g->hdr[TG_H1H_PROTOCOL_VERSION], "2025-06-18");
    cr_assert_str_eq(g->hdr[TG_H1H_LAST_EVENT_ID], "3_7");
    cr_assert_str_eq(g->hdr[TG_H1H_ORIGIN], "http://localhost");
    cr_assert_str_eq(g->hdr[TG_H1H_AUTHORIZATION], "Bearer t0k");
    cr_assert_not(g->has[TG_H1H_CONTENT_TYPE]);
    cr_assert_eq(g->body_len, 0);
}

Test(h1req, post_with_content_length)
{
    const got_t *g = accepted("POST /mcp HTTP/1.1\r\nHost: h\r\n"
                              "Content-Type: application/json\r\nContent-Length: 13\r\n\r\n"
                              "{\"a\":[1,2,3]}");
    cr_assert_eq(g->method, TG_H1M_POST);
    cr_assert_not(g->has_query);
    cr_assert_eq(g->body_len, 13);
    cr_assert_eq(memcmp(g->body, "{\"a\":[1,2,3]}", 13), 0);
    cr_assert_str_eq(g->hdr[TG_H1H_CONTENT_LENGTH], "13");
    cr_assert_not(g->chunked);
}

Test(h1req, delete_absolute_form_and_empty_header)
{
    const got_t *g = accepted("DELETE http://h:1/mcp HTTP/1.1\r\nHost: h:1\r\n"
                              "Mcp-Session-Id:\r\nConnection: close\r\n\r\n");
    cr_assert_eq(g->method, TG_H1M_DELETE);
    cr_assert_str_eq(g->path, "/mcp");
    cr_assert(g->has[TG_H1H_SESSION_ID], "an empty header is present");
    cr_assert_str_eq(g->hdr[TG_H1H_SESSION_ID], "");
    cr_assert_str_eq(g->hdr[TG_H1H_CONNECTION], "close");
    cr_assert_not(g->keep_alive);
}

Test(h1req, http10_needs_no_host_and_closes)
{
    const got_t *g = accepted("GET / HTTP/1.0\r\n\r\n");
    cr_assert_eq(g->minor, 0);
    cr_assert_not(g->keep_alive);
    g = accepted("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cr_assert(g->keep_alive);
}

Test(h1req, empty_lines_before_a_request_are_ignored)
{
    accepted("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

Test(h1req, list_headers_are_joined)
{
    const got_t *g = accepted("GET / HTTP/1.1\r\nAccept: application/json\r\nHost: h\r\n"
                              "Connection: keep-alive\r\nAccept: text/event-stream\r\n"
                              "Connection: te\r\n\r\n");
    cr_assert_str_eq(g->hdr[TG_H1H_ACCEPT], "application/json, text/event-stream");
    cr_assert_str_eq(g->hdr[TG_H1H_CONNECTION], "keep-alive, te");
    cr_assert_str_eq(g->hdr[TG_H1H_HOST], "h");
}

Test(h1req, pipelined_requests_come_one_at_a_time_in_order)
{
    run_t *r = run_all(&opts, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                              "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                              "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "2\r\nde\r\n0\r\n\r\n"
                              "DELETE /d HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_eq(r->n, 4);
    const char *paths[] = {"/a", "/b", "/c", "/d"};
    const char *bodies[] = {"", "abc", "de", ""};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(r->g[i].ev, TG_H1_REQUEST);
        cr_assert_str_eq(r->g[i].path, paths[i]);
        cr_assert_eq(r->g[i].body_len, strlen(bodies[i]));
        cr_assert_eq(memcmp(r->g[i].body, bodies[i], r->g[i].body_len), 0);
    }
    cr_assert(r->g[2].chunked);
}

Test(h1req, upgrade_is_ignored)
{
    run_t *r = run_all(&opts, "GET /a HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                              "Upgrade: h2c\r\n\r\n"
                              "POST /b HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n"
                              "Upgrade: websocket\r\nContent-Length: 2\r\n\r\n{}"
                              "GET /c HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_eq(r->n, 3);
    cr_assert_str_eq(r->g[1].path, "/b");
    cr_assert_eq(r->g[1].body_len, 2);
    cr_assert_str_eq(r->g[2].path, "/c");
    cr_assert(r->g[0].keep_alive);
}

Test(h1req, a_request_leaves_the_next_unconsumed)
{
    tg_h1req_t r;
    const char *two = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t used;
    cr_assert_eq(tg_h1req_init(&r, &opts), 0);
    cr_assert_eq(tg_h1req_feed(&r, two, strlen(two), &used), TG_H1_REQUEST);
    cr_assert_eq(used, strlen(two) / 2);
    cr_assert_eq(tg_h1req_feed(&r, two + used, strlen(two) - used, &used), TG_H1_REQUEST);
    cr_assert_eq(used, strlen(two) / 2);
    cr_assert_eq(r.path.n, 2);
    cr_assert_eq(memcmp(r.path.p, "/b", 2), 0);
    tg_h1req_trim(&r);
    tg_h1req_free(&r);
}

Test(h1req, chunked_with_extensions_and_trailers)
{
    const got_t *g = accepted("POST /mcp HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
                              "5;name=value;x\r\nhello\r\n"
                              "1 ; ext\r\n \r\n"
                              "A\r\n0123456789\r\n"
                              "0;last\r\nX-Trailer: t\r\nAuthorization: ignored\r\n\r\n");
    cr_assert(g->chunked);
    cr_assert_eq(g->body_len, 16);
    cr_assert_eq(memcmp(g->body, "hello 0123456789", 16), 0);
    cr_assert_not(g->has[TG_H1H_AUTHORIZATION], "trailers are dropped");
}

/* ---- Expect ------------------------------------------------------------ */

Test(h1req, expect_100_continue_reports_the_head_first)
{
    run_t *r = run_all(&opts, "POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                              "Content-Length: 2\r\n\r\n{}");
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->g[0].ev, TG_H1_REQUEST);
    cr_assert_eq(r->g[0].heads, 1);
    cr_assert(r->g[0].cont);
    cr_assert_eq(r->g[0].body_len, 2);

    tg_h1req_t q;
    const char *s = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n";
    size_t used;
    cr_assert_eq(tg_h1req_init(&q, &opts), 0);
    cr_assert_eq(tg_h1req_feed(&q, s, strlen(s), &used), TG_H1_HEAD);
    cr_assert(q.expect_continue);
    cr_assert_eq(q.path.n, 1);
    cr_assert_eq(tg_h1req_feed(&q, s + used, strlen(s) - used, &used), TG_H1_NEED_MORE);
    cr_assert_eq(tg_h1req_feed(&q, "1\r\nx\r\n0\r\n\r\n", 11, &used), TG_H1_REQUEST);
    cr_assert_eq(q.body_len, 1);
    tg_h1req_free(&q);
}

Test(h1req, expect_without_body_or_in_http10)
{
    const got_t *g = accepted("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n");
    cr_assert_eq(g->heads, 0);
    cr_assert_not(g->cont, "nothing to continue");
    g = accepted("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx");
    cr_assert_eq(g->heads, 0, "HTTP/1.0 ignores 100-continue");
}

Test(h1req, other_expectations_417)
{
    refused("POST / HTTP/1.1\r\nHost: h\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx", 417);
    refused("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, x\r\n\r\n", 417);
}

/* ---- 400: malformed, smuggling, injection ------------------------------ */

Test(h1req, malformed_requests_400)
{
    refused("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400); /* a TLS hello */
    refused("GET\r\n\r\n", 400);
    refused("GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400);
    /* http-parser's lenient mode takes any bytes for "TTP/" */
    refused("GET / H\r\n\r\n", 400);
    refused("GET / Hxxx/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET / http/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET /HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400);
    refused("GET / \r\nHost: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\n\r\n", 400); /* no Host */
    refused("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

Test(h1req, invalid_chunked_400)
{
    const char *head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    /* http-parser's lenient mode takes any two bytes for the CRLF after
     * chunk data and any byte for the LF after a size line: a smuggling
     * gap the reader's own chunked decoder closes */
    const char *bad[] = {"z\r\nx\r\n0\r\n\r\n",
                         "1\r\nxy\r\n0\r\n\r\n",
                         "-1\r\nx\r\n0\r\n\r\n",
                         "1\nx\r\n0\r\n\r\n",
                         "1\r\nxYZ0\r\n\r\n",
                         "1\rxx\r\n0\r\n\r\n",
                         "1\r\nx\r\r0\r\n\r\n",
                         "1\r\nx\n0\r\n\r\n",
                         "\r\n1\r\nx\r\n0\r\n\r\n",
                         "1;a\rb\r\nx\r\n0\r\n\r\n",
                         "1;a\nb\r\nx\r\n0\r\n\r\n",
                         "1\r\nx\r\n0\r\nX: a\r\n folded\r\n\r\n",
                         "1\r\nx\r\n0\r\nX: a\rY: b\r\n\r\n",
                         "1\r\nx\r\n0\r\nX: a\nY: b\r\n\r\n",
                         "1\r\nx\r\n0\r\nBad Name: a\r\n\r\n",
                         "1\r\nx\r\n0\r\n\r\r",
                         "0x1\r\nx\r\n0\r\n\r\n",
                         " 1\r\nx\r\n0\r\n\r\n",
                         "1 x\r\nx\r\n0\r\n\r\n",
                         "1\tz;a\r\nx\r\n0\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char req[256];
        snprintf(req, sizeof req, "%s%s", head, bad[i]);
        refused(req, 400);
    }
}

Test(h1req, smuggling_400)
{
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
            "0\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\nabc", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 400);
    refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;x=1\r\n\r\n0\r\n\r\n", 400);
}

Test(h1req, header_injection_400)
{
    refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\rInjected: b\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\nInjected: b\r\n\r\n", 400);
    refused("GET / HTTP/1.1\nHost: h\n\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01z\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tfolded\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n", 400);
    /* NUL in a value, given with its length */
    run_t r;
    static const char nul[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
    feed_split(&opts, nul, sizeof nul - 1, 0, 0, &r);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.g[0].status, 400);
}

Test(h1req, duplicate_singletons_400)
{
    const char *dups[] = {"Authorization: a\r\nAuthorization: a",
                          "Mcp-Session-Id: a\r\nmcp-session-id: b",
                          "Content-Type: application/json\r\nContent-Type: text/plain",
                          "Host: h",
                          "MCP-Protocol-Version: 1\r\nMCP-Protocol-Version: 1",
                          "Last-Event-ID: 1\r\nLast-Event-ID: 2",
                          "Origin: a\r\nOrigin: a"};
    for (size_t i = 0; i < sizeof dups / sizeof dups[0]; i++) {
        char req[256];
        snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: h\r\n%s\r\n\r\n", dups[i]);
        refused(req, 400);
    }
}

/* ---- 501, 505 ---------------------------------------------------------- */

Test(h1req, unknown_method_501_version_505)
{
    refused("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", 501);
    refused("FOO / HTTP/1.1\r\nHost: h\r\n\r\n", 501);
    /* the first fault in the stream decides, however it was split */
    refused("PO h\r\nBad\x03Name: 4\r\n\r\n", 501);
    refused("PO\r\nBad\x03Name: 4\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nBad\x03Name: 4\r\nX\x01: y\r\n\r\n", 400);
    refused("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 501);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501);
    refused("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505);
    refused("GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505);
    refused("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

Test(h1req, other_known_methods_are_reported)
{
    const got_t *g = accepted("PUT /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx");
    cr_assert_eq(g->method, TG_H1M_OTHER);
    cr_assert_str_eq(g->method_name, "PUT");
    g = accepted("OPTIONS /mcp HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_eq(g->method, TG_H1M_OPTIONS);
    g = accepted("HEAD /mcp HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_eq(g->method, TG_H1M_HEAD);
}

/* ---- bounds ------------------------------------------------------------- */

/* A GET whose head is exactly <total> bytes, padded in one X-Pad header. */
static void head_of(char *buf, size_t cap, size_t total)
{
    const char *pre = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
    size_t fixed = strlen(pre) + 4;
    cr_assert_geq(total, fixed + 1);
    cr_assert_lt(total, cap);
    size_t pad = total - fixed;
    snprintf(buf, cap, "%s", pre);
    memset(buf + strlen(pre), 'p', pad);
    memcpy(buf + strlen(pre) + pad, "\r\n\r\n", 5);
    cr_assert_eq(strlen(buf), total);
}

Test(h1req, header_bytes_at_and_over_the_cap)
{
    static char buf[2048];
    tg_h1req_opts_t o = opts;
    o.max_header_bytes = 300;
    head_of(buf, sizeof buf, 300);
    run_t *r = run_all(&o, buf);
    cr_assert_eq(r->g[0].ev, TG_H1_REQUEST);
    head_of(buf, sizeof buf, 301);
    r = run_all(&o, buf);
    cr_assert_eq(r->g[0].status, 431);
    /* leading empty lines count */
    head_of(buf + 2, sizeof buf - 2, 298);
    memcpy(buf, "\r\n", 2);
    r = run_all(&o, buf);
    cr_assert_eq(r->g[0].ev, TG_H1_REQUEST);
    head_of(buf + 2, sizeof buf - 2, 299);
    memcpy(buf, "\r\n", 2);
    r = run_all(&o, buf);
    cr_assert_eq(r->g[0].status, 431);
    /* a head that never ends is refused at the cap, not buffered */
    memset(buf, 'a', 400);
    memcpy(buf, "GET /", 5);
    buf[400] = '\0';
    r = run_all(&o, buf);
    cr_assert_eq(r->g[0].status, 431);
}

Test(h1req, header_count_at_and_over_the_cap)
{
    char buf[1024];
    tg_h1req_opts_t o = opts;
    o.max_headers = 4;
    snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
    cr_assert_eq(run_all(&o, buf)->g[0].ev, TG_H1_REQUEST);
    snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n");
    cr_assert_eq(run_all(&o, buf)->g[0].status, 431);
}

Test(h1req, content_length_at_and_over_the_cap)
{
    char buf[512], body[66];
    memset(body, 'b', 65);
    body[65] = '\0';
    snprintf(buf, sizeof buf, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 64\r\n\r\n%.64s",
             body);
    const got_t *g = accepted(buf);
    cr_assert_eq(g->body_len, 64);
    /* over: refused from the head alone, before any body byte */
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n", 413);
    refused("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999\r\n\r\n", 413);
}

Test(h1req, chunked_at_and_over_the_cap)
{
    char buf[512], body[66];
    memset(body, 'b', 65);
    body[65] = '\0';
    snprintf(buf, sizeof buf,
             "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
             "20\r\n%.32s\r\n20\r\n%.32s\r\n0\r\n\r\n",
             body, body);
    cr_assert_eq(accepted(buf)->body_len, 64);
    snprintf(buf, sizeof buf,
             "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
             "20\r\n%.32s\r\n21\r\n%.33s\r\n0\r\n\r\n",
             body, body);
    refused(buf, 413);
    /* refused from the chunk size, before its data */
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\n", 413);
    /* a first digit over a small cap */
    tg_h1req_opts_t o = opts;
    o.max_body_bytes = 2;
    cr_assert_eq(run_all(&o, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\n\r\n")
                     ->g[0]
                     .status,
                 413);
    cr_assert_eq(run_all(&o, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "1\r\na\r\n2\r\nbc\r\n0\r\n\r\n")
                     ->g[0]
                     .status,
                 413);
    cr_assert_eq(run_all(&o, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "1\r\na\r\n1\r\nb\r\n0\r\n\r\n")
                     ->g[0]
                     .body_len,
                 2);
    refused("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            "ffffffffffffffffffffffff\r\n",
            413);
}

Test(h1req, chunk_framing_is_bounded)
{
    static char buf[4096];
    tg_h1req_opts_t o = opts;
    o.max_header_bytes = 256;
    int n = snprintf(buf, sizeof buf,
                     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    memset(buf + n, 'e', 400);
    snprintf(buf + n + 400, sizeof buf - (size_t)n - 400, "\r\nx\r\n0\r\n\r\n");
    run_t r;
    feed_split(&o, buf, strlen(buf), 0, 0, &r);
    cr_assert_eq(r.g[0].status, 413);
}

Test(h1req, init_refuses_bad_bounds)
{
    tg_h1req_t r;
    tg_h1req_opts_t o = opts;
    o.max_header_bytes = 100;
    cr_assert_eq(tg_h1req_init(&r, &o), -EINVAL);
    o.max_header_bytes = TG_H1_MAX_HEADER_BYTES + 1;
    cr_assert_eq(tg_h1req_init(&r, &o), -EINVAL);
    o = opts;
    o.max_headers = 0;
    cr_assert_eq(tg_h1req_init(&r, &o), -EINVAL);
    o = opts;
    o.max_body_bytes = 0;
    cr_assert_eq(tg_h1req_init(&r, &o), -EINVAL);
}

/* ---- Accept, Content-Type ---------------------------------------------- */

static bool acc(const char *v, const char *type)
{
    return tg_h1_accepts(v, strlen(v), type);
}

Test(h1req, accept_matching)
{
    const char *json = "application/json", *sse = "text/event-stream";
    cr_assert(acc("application/json, text/event-stream", json));
    cr_assert(acc("application/json, text/event-stream", sse));
    cr_assert_not(acc("application/json", sse));
    cr_assert(acc("*/*", sse));
    cr_assert(acc("text/*", sse));
    cr_assert_not(acc("text/*", json));
    cr_assert(acc("APPLICATION/JSON;charset=utf-8", json));
    cr_assert(acc(" application/json ; q=0.5 ", json));
    cr_assert_not(acc("application/json;q=0", json));
    cr_assert_not(acc("application/json; q=0.000", json));
    cr_assert(acc("application/json;q=0.001", json));
    cr_assert_not(acc("*/*, application/json;q=0", json), "the specific range decides");
    cr_assert(acc("*/*;q=0, application/json", json));
    cr_assert_not(acc("text/*;q=0", sse));
    cr_assert(acc("text/*;q=0, text/event-stream", sse));
    cr_assert_not(acc("application/jsonx", json));
    cr_assert_not(acc("application/json-seq", json));
    cr_assert_not(acc("json", json));
    cr_assert_not(acc("", json));
    cr_assert_not(acc(",,, ", json));
    cr_assert(acc("application/*", json));
    cr_assert_not(acc("application/*;q=0, */*", json));
}

static bool media(const char *v, const char *type)
{
    return tg_h1_media_is(v, strlen(v), type);
}

Test(h1req, content_type_matching)
{
    const char *json = "application/json";
    cr_assert(media("application/json", json));
    cr_assert(media("Application/JSON; charset=utf-8", json));
    cr_assert(media("  application/json  ", json));
    cr_assert(media("application/json;charset=utf-8", json));
    cr_assert_not(media("application/json-patch+json", json));
    cr_assert_not(media("application/jso", json));
    cr_assert_not(media("text/plain; x=application/json", json));
    cr_assert_not(media("", json));
    cr_assert_not(media("application/json x", json));
}
