/* h1resp: response heads byte for byte, the Date format, framing headers,
 * refusal of injected or conflicting headers, exact buffer bounds, and
 * the chunk encoder (round-tripped through h1req's chunked decoding). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "router/http/h1req.h"
#include "router/http/h1resp.h"

static char buf[1024];

static long head(const tg_h1resp_t *r)
{
    memset(buf, 0, sizeof buf);
    return tg_h1resp_head(buf, sizeof buf, r);
}

static void head_is(const tg_h1resp_t *r, const char *want)
{
    long n = head(r);
    cr_assert_eq(n, (long)strlen(want), "got %ld: %s", n, buf);
    cr_assert_eq(memcmp(buf, want, (size_t)n), 0, "got: %.*s", (int)n, buf);
}

Test(h1resp, json_answer)
{
    tg_h1_field_t extra[] = {{"Mcp-Session-Id", "0123abcd"}};
    tg_h1resp_t r = {.status = 200,
                     .content_type = "application/json",
                     .content_length = 42,
                     .keep_alive = true,
                     .date = -1,
                     .extra = extra,
                     .nextra = 1};
    head_is(&r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 42\r\n"
                "Connection: keep-alive\r\nMcp-Session-Id: 0123abcd\r\n\r\n");
}

Test(h1resp, sse_stream_is_chunked)
{
    tg_h1_field_t extra[] = {{"Cache-Control", "no-cache"}};
    tg_h1resp_t r = {.status = 200,
                     .content_type = "text/event-stream",
                     .content_length = TG_H1_LEN_CHUNKED,
                     .keep_alive = true,
                     .date = -1,
                     .extra = extra,
                     .nextra = 1};
    head_is(&r, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n"
                "Cache-Control: no-cache\r\n\r\n");
}

Test(h1resp, refusals_with_date_and_extra_headers)
{
    tg_h1_field_t extra[] = {{"WWW-Authenticate", "Bearer realm=\"toolgate\""},
                             {"Allow", "GET, POST, DELETE"},
                             {"Retry-After", "1"}};
    tg_h1resp_t r = {
        .status = 401, .content_length = 0, .date = 784111777, .extra = extra, .nextra = 3};
    head_is(&r, "HTTP/1.1 401 Unauthorized\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                "Content-Length: 0\r\nConnection: close\r\n"
                "WWW-Authenticate: Bearer realm=\"toolgate\"\r\nAllow: GET, POST, DELETE\r\n"
                "Retry-After: 1\r\n\r\n");
    r = (tg_h1resp_t){.status = 202, .content_length = 0, .keep_alive = true, .date = 0};
    head_is(&r, "HTTP/1.1 202 Accepted\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                "Content-Length: 0\r\nConnection: keep-alive\r\n\r\n");
    r = (tg_h1resp_t){.status = 204, .content_length = TG_H1_LEN_NONE, .date = -1};
    head_is(&r, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    r = (tg_h1resp_t){.status = 100, .content_length = TG_H1_LEN_NONE, .date = -1};
    head_is(&r, TG_H1_CONTINUE);
}

Test(h1resp, reasons)
{
    int codes[] = {200, 202, 400, 401, 403, 404, 405, 406, 409,
                   413, 415, 417, 429, 431, 500, 501, 503, 505};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        cr_assert_str_neq(tg_h1_reason(codes[i]), "Unknown", "%d", codes[i]);
    cr_assert_str_eq(tg_h1_reason(299), "Unknown");
    cr_assert_str_eq(tg_h1_reason(413), "Content Too Large");
}

Test(h1resp, injected_or_conflicting_headers_are_refused)
{
    const char *bad_values[] = {"a\r\nSet-Cookie: x", "a\nX: y", "a\rb", "a\x01", "a\x7f"};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        tg_h1_field_t f = {"Mcp-Session-Id", bad_values[i]};
        tg_h1resp_t r = {.status = 200, .content_length = 0, .date = -1, .extra = &f, .nextra = 1};
        cr_assert_eq(head(&r), -EINVAL, "value %zu", i);
        r = (tg_h1resp_t){.status = 200, .content_type = bad_values[i], .date = -1};
        cr_assert_eq(head(&r), -EINVAL, "content type %zu", i);
    }
    const char *bad_names[] = {
        "",           "A B",  "A:",          "A\r\nB", "Content-Length", "transfer-encoding",
        "CONNECTION", "Date", "content-type"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        tg_h1_field_t f = {bad_names[i], "v"};
        tg_h1resp_t r = {.status = 200, .content_length = 0, .date = -1, .extra = &f, .nextra = 1};
        cr_assert_eq(head(&r), -EINVAL, "name %zu", i);
    }
    tg_h1_field_t tab = {"X-Ok", "a\tb"};
    tg_h1resp_t r = {.status = 200, .content_length = 0, .date = -1, .extra = &tab, .nextra = 1};
    cr_assert_gt(head(&r), 0, "HT is allowed in a value");
    r = (tg_h1resp_t){.status = 99, .date = -1};
    cr_assert_eq(head(&r), -EINVAL);
    r = (tg_h1resp_t){.status = 600, .date = -1};
    cr_assert_eq(head(&r), -EINVAL);
    r = (tg_h1resp_t){.status = 204, .content_length = 0, .date = -1};
    cr_assert_eq(head(&r), -EINVAL, "no Content-Length on 204");
    r = (tg_h1resp_t){.status = 200, .content_length = -3, .date = -1};
    cr_assert_eq(head(&r), -EINVAL);
}

Test(h1resp, the_buffer_bound_is_exact)
{
    tg_h1_field_t f = {"Mcp-Session-Id", "abc"};
    tg_h1resp_t r = {.status = 404,
                     .content_type = "application/json",
                     .content_length = 123,
                     .date = 1700000000,
                     .extra = &f,
                     .nextra = 1};
    long full = head(&r);
    cr_assert_gt(full, 0);
    char small[1024];
    for (long cap = 0; cap < full; cap++) {
        memset(small, 'Z', sizeof small);
        cr_assert_eq(tg_h1resp_head(small, (size_t)cap, &r), -ENOSPC, "cap %ld", cap);
        cr_assert_eq(small[cap], 'Z', "nothing written past cap %ld", cap);
    }
    cr_assert_eq(tg_h1resp_head(small, (size_t)full, &r), full);
    cr_assert_eq(memcmp(small, buf, (size_t)full), 0);
}

Test(h1resp, chunk_heads)
{
    char b[32];
    cr_assert_eq(tg_h1_chunk_head(b, sizeof b, 1), 3);
    cr_assert_eq(memcmp(b, "1\r\n", 3), 0);
    cr_assert_eq(tg_h1_chunk_head(b, sizeof b, 0x1a2f), 6);
    cr_assert_eq(memcmp(b, "1a2f\r\n", 6), 0);
    cr_assert_eq(tg_h1_chunk_head(b, sizeof b, 0), -EINVAL);
    cr_assert_eq(tg_h1_chunk_head(b, 5, 0x1a2f), -ENOSPC);
    cr_assert_eq(tg_h1_chunk(b, sizeof b, "hello", 5), 10);
    cr_assert_eq(memcmp(b, "5\r\nhello\r\n", 10), 0);
    cr_assert_eq(tg_h1_chunk(b, 9, "hello", 5), -ENOSPC);
    cr_assert_eq(tg_h1_chunk(b, sizeof b, "", 0), -EINVAL);
}

Test(h1resp, chunks_round_trip_through_the_reader)
{
    static char wire[8192], data[3000];
    int n = snprintf(wire, sizeof wire,
                     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    size_t len = (size_t)n, sizes[] = {1, 15, 16, 255, 256, 1000, 1457};
    size_t total = 0;
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        long k = tg_h1_chunk(wire + len, sizeof wire - len, data + total, sizes[i]);
        cr_assert_gt(k, 0);
        len += (size_t)k;
        total += sizes[i];
    }
    memcpy(wire + len, TG_H1_CHUNK_LAST, 5);
    len += 5;
    tg_h1req_t r;
    tg_h1req_opts_t o = {.max_header_bytes = 1024, .max_headers = 8, .max_body_bytes = 4096};
    size_t used;
    cr_assert_eq(tg_h1req_init(&r, &o), 0);
    cr_assert_eq(tg_h1req_feed(&r, wire, len, &used), TG_H1_REQUEST);
    cr_assert_eq(used, len);
    cr_assert_eq(r.body_len, total);
    cr_assert_eq(memcmp(r.body, data, total), 0);
    tg_h1req_free(&r);
}
