/* sse: event encoding byte for byte and decoded back by an SSE parser
 * written from the WHATWG rules (line breaks in data, empty data, leading
 * spaces), ids and their parsing, the replay window's eviction by count
 * and by bytes, oversized events, and resumption by Last-Event-ID. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/http/sse.h"

/* ---- a minimal SSE decoder (one event) --------------------------------- */

typedef struct dec {
    char id[64];
    bool has_id;
    char data[4096];
    size_t data_len;
    bool has_data;
} dec_t;

/* Decode the event in e[0, n), which must end with its blank line. */
static void decode(const char *e, size_t n, dec_t *d)
{
    memset(d, 0, sizeof(*d));
    cr_assert_geq(n, 2);
    cr_assert_eq(e[n - 1], '\n');
    cr_assert_eq(e[n - 2], '\n', "an event ends with a blank line");
    size_t i = 0;
    while (i < n - 1) {
        const char *nl = memchr(e + i, '\n', n - i);
        cr_assert_not_null(nl);
        size_t len = (size_t)(nl - (e + i));
        const char *line = e + i;
        cr_assert_null(memchr(line, '\r', len), "the encoder only ends lines with LF");
        const char *colon = memchr(line, ':', len);
        cr_assert_not_null(colon, "every line has a field");
        size_t fl = (size_t)(colon - line), vo = fl + 1;
        if (vo < len && line[vo] == ' ')
            vo++;
        if (fl == 2 && memcmp(line, "id", 2) == 0) {
            cr_assert_lt(len - vo, sizeof d->id);
            memcpy(d->id, line + vo, len - vo);
            d->has_id = true;
        } else if (fl == 4 && memcmp(line, "data", 4) == 0) {
            if (d->has_data)
                d->data[d->data_len++] = '\n';
            cr_assert_lt(d->data_len + len - vo, sizeof d->data);
            memcpy(d->data + d->data_len, line + vo, len - vo);
            d->data_len += len - vo;
            d->has_data = true;
        } else {
            cr_assert_fail("unexpected field %.*s", (int)fl, line);
        }
        i += len + 1;
    }
}

static char out[8192];

static long enc(const char *id, const char *data)
{
    size_t idn = id != NULL ? strlen(id) : 0, n = strlen(data);
    long len = tg_sse_event(out, sizeof out, id, idn, data, n);
    if (len >= 0)
        cr_assert_eq((size_t)len, tg_sse_event_len(idn, data, n), "event_len is exact");
    return len;
}

Test(sse, one_json_message)
{
    const char *json = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    long n = enc("3-17", json);
    const char *want = "id: 3-17\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    cr_assert_eq(n, (long)strlen(want));
    cr_assert_eq(memcmp(out, want, (size_t)n), 0);
    n = enc(NULL, "{}");
    cr_assert_eq(n, 10);
    cr_assert_eq(memcmp(out, "data: {}\n\n", 10), 0);
}

Test(sse, line_breaks_in_data_round_trip)
{
    /* what the data must decode to (line breaks normalised to LF) */
    const char *cases[][2] = {
        {"{\n\"a\": 1\n}", "{\n\"a\": 1\n}"},
        {"{\r\n\"a\": 1\r\n}", "{\n\"a\": 1\n}"},
        {"{\r\"a\":\r1}", "{\n\"a\":\n1}"},
        {"{}\n", "{}\n"},
        {"\n\n", "\n\n"},
        {"", ""},
        {" {} ", " {} "},
        {"a\r\n\r\nb", "a\n\nb"},
        {"\r", "\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long n = enc("1-1", cases[i][0]);
        cr_assert_gt(n, 0);
        dec_t d;
        decode(out, (size_t)n, &d);
        cr_assert(d.has_id);
        cr_assert_str_eq(d.id, "1-1");
        cr_assert(d.has_data);
        cr_assert_eq(d.data_len, strlen(cases[i][1]), "case %zu: %zu bytes", i, d.data_len);
        cr_assert_eq(memcmp(d.data, cases[i][1], d.data_len), 0, "case %zu", i);
    }
}

Test(sse, bad_ids_and_small_buffers)
{
    cr_assert_eq(tg_sse_event(out, sizeof out, "1\n2", 3, "{}", 2), -EINVAL);
    cr_assert_eq(tg_sse_event(out, sizeof out, "1\r2", 3, "{}", 2), -EINVAL);
    cr_assert_eq(tg_sse_event(out, sizeof out, "1\0002", 3, "{}", 2), -EINVAL);
    size_t need = tg_sse_event_len(3, "{}", 2);
    for (size_t cap = 0; cap < need; cap++)
        cr_assert_eq(tg_sse_event(out, cap, "1-1", 3, "{}", 2), -ENOSPC);
    cr_assert_eq(tg_sse_event(out, need, "1-1", 3, "{}", 2), (long)need);
    cr_assert_str_eq(TG_SSE_PING, ": ping\n\n");
}

Test(sse, ids)
{
    char id[TG_SSE_ID_MAX];
    uint64_t s, q;
    cr_assert_eq(tg_sse_id(id, sizeof id, 7, 42), 4);
    cr_assert_str_eq(id, "7-42");
    cr_assert_eq(tg_sse_id(id, sizeof id, UINT64_MAX, UINT64_MAX), 41);
    cr_assert_eq(tg_sse_parse_id(id, strlen(id), &s, &q), 0);
    cr_assert_eq(s, UINT64_MAX);
    cr_assert_eq(q, UINT64_MAX);
    cr_assert_eq(tg_sse_id(id, 4, 7, 42), -ENOSPC);
    cr_assert_eq(tg_sse_parse_id("12-345", 6, &s, &q), 0);
    cr_assert_eq(s, 12);
    cr_assert_eq(q, 345);
    const char *bad[] = {"",
                         "-",
                         "1-",
                         "-1",
                         "0-1",
                         "1-0",
                         "01-1",
                         "1-01",
                         "1-1x",
                         " 1-1",
                         "1 -1",
                         "1--1",
                         "1-1-1",
                         "+1-1",
                         "18446744073709551616-1",
                         "1-99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(tg_sse_parse_id(bad[i], strlen(bad[i]), &s, &q), -EINVAL, "%s", bad[i]);
}

/* ---- the replay window -------------------------------------------------- */

static long send_msg(tg_sse_win_t *w, int k)
{
    char json[64];
    int n = snprintf(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"k\":%d}", k);
    return tg_sse_win_send(w, json, (size_t)n, out, sizeof out);
}

static void kept_is(const tg_sse_win_t *w, uint64_t seq, int k)
{
    const char *p;
    size_t n;
    dec_t d;
    char want[64], id[TG_SSE_ID_MAX];
    cr_assert(tg_sse_win_get(w, seq, &p, &n), "seq %llu kept", (unsigned long long)seq);
    decode(p, n, &d);
    tg_sse_id(id, sizeof id, w->stream, seq);
    cr_assert_str_eq(d.id, id);
    snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"k\":%d}", k);
    cr_assert_eq(d.data_len, strlen(want));
    cr_assert_eq(memcmp(d.data, want, d.data_len), 0);
}

static tg_sse_resume_t resume(const tg_sse_win_t *w, const char *id, uint64_t *from)
{
    *from = 0;
    return tg_sse_win_resume(w, id, strlen(id), from);
}

Test(sse, window_evicts_by_count_and_resumes)
{
    tg_sse_win_t w;
    uint64_t from;
    cr_assert_eq(tg_sse_win_init(&w, 4, 4096, 3), 0);
    cr_assert_eq(resume(&w, "4-1", &from), TG_SSE_RESUME_UNKNOWN, "never issued");
    for (int k = 1; k <= 5; k++) {
        long n = send_msg(&w, k);
        cr_assert_gt(n, 0);
        dec_t d;
        decode(out, (size_t)n, &d);
        char id[TG_SSE_ID_MAX];
        tg_sse_id(id, sizeof id, 4, (uint64_t)k);
        cr_assert_str_eq(d.id, id, "the event sent carries its id");
    }
    cr_assert_eq(w.next_seq, 6);
    cr_assert_eq(w.first_seq, 3);
    cr_assert_eq(w.dropped, 2);
    const char *p;
    size_t n;
    cr_assert_not(tg_sse_win_get(&w, 2, &p, &n));
    cr_assert_not(tg_sse_win_get(&w, 6, &p, &n));
    for (int k = 3; k <= 5; k++)
        kept_is(&w, (uint64_t)k, k);
    cr_assert_eq(resume(&w, "4-1", &from), TG_SSE_RESUME_GONE, "event 2 was dropped");
    cr_assert_eq(resume(&w, "4-2", &from), TG_SSE_RESUME_OK);
    cr_assert_eq(from, 3);
    cr_assert_eq(resume(&w, "4-5", &from), TG_SSE_RESUME_OK);
    cr_assert_eq(from, 6, "up to date: nothing to replay");
    cr_assert_eq(resume(&w, "4-6", &from), TG_SSE_RESUME_UNKNOWN, "never issued");
    cr_assert_eq(resume(&w, "5-3", &from), TG_SSE_RESUME_UNKNOWN, "another stream");
    cr_assert_eq(resume(&w, "garbage", &from), TG_SSE_RESUME_UNKNOWN);
    tg_sse_win_free(&w);
}

Test(sse, window_evicts_by_bytes_and_keeps_events_intact)
{
    tg_sse_win_t w;
    cr_assert_eq(tg_sse_win_init(&w, 1, 1000, 1000), 0);
    long one = send_msg(&w, 1); /* every message here has the same size until k = 10 */
    cr_assert_gt(one, 0);
    for (int k = 2; k <= 5000; k++) {
        cr_assert_gt(send_msg(&w, k), 0);
        cr_assert_leq(w.used, w.max_bytes);
        uint64_t kept = w.next_seq - w.first_seq;
        cr_assert_eq(kept, w.count);
        cr_assert_eq(w.dropped + kept, (uint64_t)k);
        if (k % 97 == 0) {
            for (uint64_t s = w.first_seq; s < w.next_seq; s++)
                kept_is(&w, s, (int)s);
        }
    }
    /* about 1000 / 60-byte events fit; the bound, not the count, evicts */
    cr_assert_gt(w.count, 10);
    cr_assert_lt(w.count, 1000 / 50);
    tg_sse_win_free(&w);
}

Test(sse, an_oversized_event_is_sent_not_kept)
{
    tg_sse_win_t w;
    uint64_t from;
    static char big[600];
    cr_assert_eq(tg_sse_win_init(&w, 2, 256, 16), 0);
    send_msg(&w, 1);
    send_msg(&w, 2);
    memset(big, 'x', sizeof big - 1);
    long n = tg_sse_win_send(&w, big, strlen(big), out, sizeof out);
    cr_assert_gt(n, 600, "sent whole");
    cr_assert_eq(w.count, 0);
    cr_assert_eq(w.dropped, 3);
    cr_assert_eq(resume(&w, "2-2", &from), TG_SSE_RESUME_GONE, "event 3 cannot be replayed");
    cr_assert_eq(resume(&w, "2-3", &from), TG_SSE_RESUME_OK);
    cr_assert_eq(from, 4);
    send_msg(&w, 4);
    kept_is(&w, 4, 4);
    cr_assert_eq(resume(&w, "2-3", &from), TG_SSE_RESUME_OK);
    cr_assert_eq(from, 4);
    tg_sse_win_free(&w);
}

Test(sse, a_send_that_does_not_fit_uses_no_seq)
{
    tg_sse_win_t w;
    char small[8];
    cr_assert_eq(tg_sse_win_init(&w, 1, 256, 4), 0);
    cr_assert_eq(tg_sse_win_send(&w, "{}", 2, small, sizeof small), -ENOSPC);
    cr_assert_eq(w.next_seq, 1);
    cr_assert_eq(w.count, 0);
    cr_assert_gt(send_msg(&w, 1), 0);
    kept_is(&w, 1, 1);
    tg_sse_win_free(&w);
}

Test(sse, window_init_bounds)
{
    tg_sse_win_t w;
    cr_assert_eq(tg_sse_win_init(&w, 0, 10, 1), -EINVAL);
    cr_assert_eq(tg_sse_win_init(&w, 1, 0, 1), -EINVAL);
    cr_assert_eq(tg_sse_win_init(&w, 1, 10, 0), -EINVAL);
}
