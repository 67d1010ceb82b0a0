/* libFuzzer target: the HTTP/1.1 request reader (router/http/h1req.c),
 * with its bounds asserted, not only the absence of crashes.
 *
 * The input is a connection's byte stream. The first byte picks the
 * bounds (max_header_bytes 256..1216, max_headers 1..8, max_body_bytes
 * 1..4096), the second the read size (1..97). The bytes are read into a
 * window of exactly one read, as a front would: NEED_MORE must consume
 * everything, so the window is empty before each read; after REQUEST or
 * HEAD the rest is fed again at once. Asserted at every step: consumed <=
 * fed; the reader's storage stays within its bounds (the head arena
 * grows up to its bound, max_header_bytes and slack, fixed at init; body
 * buffer <= max_body_bytes, head bytes <= max_header_bytes);
 * every span it reports lies in its storage; an error has a status of the
 * documented set and is sticky. The same stream is then fed in one piece:
 * the events must be the same (the reader does not depend on how the
 * bytes were split).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/http/h1req.h"
#include "router/http/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 64

typedef struct trace {
    int n;
    uint32_t ev[MAX_EVENTS]; /* event, status, body length and path length, folded */
} trace_t;

static void die(const char *what, size_t a, size_t b)
{
    fprintf(stderr, "fuzz_h1req: %s (%zu, %zu)\n", what, a, b);
    abort();
}

static void span_in(const tg_h1req_t *r, tg_h1_str_t s, const char *what)
{
    if (s.p == NULL)
        return;
    if (s.p < r->arena || s.n > r->arena_cap || s.p + s.n > r->arena + r->arena_len)
        die(what, (size_t)(s.p - r->arena), s.n);
}

static void check_bounds(const tg_h1req_t *r, const tg_h1req_opts_t *o, size_t arena_cap)
{
    if (r->arena_max != arena_cap || r->arena_cap > r->arena_max || r->arena_len > r->arena_cap)
        die("head arena past its bound", r->arena_len, r->arena_cap);
    if (r->buf_cap > o->max_body_bytes || r->body_len > o->max_body_bytes)
        die("body storage past max_body_bytes", r->buf_cap, r->body_len);
    if (r->head_bytes > o->max_header_bytes)
        die("head bytes past max_header_bytes", r->head_bytes, o->max_header_bytes);
}

static void check_request(const tg_h1req_t *r)
{
    span_in(r, r->path, "path outside the arena");
    span_in(r, r->query, "query outside the arena");
    for (int i = 0; i < TG_H1H_COUNT; i++)
        span_in(r, r->hdr[i], "header outside the arena");
    if (r->path.p == NULL || r->body == NULL)
        die("request without path or body", 0, 0);
    tg_h1_str_t a = r->hdr[TG_H1H_ACCEPT], ct = r->hdr[TG_H1H_CONTENT_TYPE];
    if (a.p != NULL) {
        (void)tg_h1_accepts(a.p, a.n, "application/json");
        (void)tg_h1_accepts(a.p, a.n, "text/event-stream");
    }
    if (ct.p != NULL)
        (void)tg_h1_media_is(ct.p, ct.n, "application/json");
}

/* Send body b[0, n) as the next event of <w>; check the window. */
static void sse_round(tg_sse_win_t *w, const char *b, size_t n)
{
    static char ev[3 * 4096 + 64];
    char id[TG_SSE_ID_MAX];
    long idn = tg_sse_id(id, sizeof id, w->stream, w->next_seq);
    long len = tg_sse_win_send(w, b, n, ev, sizeof ev);
    if (len < 0)
        return; /* more line breaks than the buffer holds: -ENOSPC, nothing sent */
    if (idn < 0 || (size_t)len != tg_sse_event_len((size_t)idn, b, n) ||
        memcmp(ev + 4, id, (size_t)idn) != 0 || memchr(ev, '\r', (size_t)len) != NULL)
        die("SSE event not as promised (length, id) or with a CR", (size_t)len, n);
    if (w->used > w->max_bytes || w->count > w->max_events ||
        w->next_seq - w->first_seq != w->count)
        die("replay window past its bounds", w->used, w->count);
    const char *p;
    size_t pn;
    if (w->count > 0 && (!tg_sse_win_get(w, w->next_seq - 1, &p, &pn) || pn != (size_t)len ||
                         memcmp(p, ev, pn) != 0))
        die("the window does not replay what was sent", pn, (size_t)len);
}

static void check_error(tg_h1req_t *r)
{
    static const int ok[] = {400, 413, 417, 431, 500, 501, 505};
    bool found = false;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        found = found || r->status == ok[i];
    if (!found || r->reason == NULL)
        die("error status outside the documented set", (size_t)r->status, 0);
    size_t used = 1;
    if (tg_h1req_feed(r, "GET / HTTP/1.1\r\n", 16, &used) != TG_H1_ERROR || used != 0)
        die("an error is not sticky", used, 0);
}

static void note(trace_t *t, tg_h1_ev_t ev, const tg_h1req_t *r)
{
    if (t->n >= MAX_EVENTS)
        return;
    uint32_t v = (uint32_t)ev;
    if (ev == TG_H1_ERROR)
        v = v * 1000u + (uint32_t)r->status;
    else if (ev == TG_H1_REQUEST)
        v = v * 1000003u + (uint32_t)r->body_len * 31u + (uint32_t)r->path.n;
    t->ev[t->n++] = v;
}

/* Feed data[0, size) in reads of <chunk> bytes; record the events. */
static void run(const tg_h1req_opts_t *o, const uint8_t *data, size_t size, size_t chunk,
                trace_t *t)
{
    tg_h1req_t r;
    char *win = malloc(chunk);
    memset(t, 0, sizeof(*t));
    if (win == NULL || tg_h1req_init(&r, o) != 0) {
        free(win);
        return;
    }
    size_t arena_cap = r.arena_max, fed = 0;
    bool dead = false;
    tg_sse_win_t w;
    bool sse = tg_sse_win_init(&w, 1, 512, 4) == 0;
    while (fed < size && !dead) {
        size_t n = size - fed < chunk ? size - fed : chunk;
        memcpy(win, data + fed, n);
        fed += n;
        size_t pos = 0;
        for (;;) {
            size_t used = (size_t)-1;
            tg_h1_ev_t ev = tg_h1req_feed(&r, win + pos, n - pos, &used);
            if (used > n - pos)
                die("consumed more than fed", used, n - pos);
            pos += used;
            check_bounds(&r, o, arena_cap);
            if (ev == TG_H1_NEED_MORE) {
                if (pos != n)
                    die("NEED_MORE left bytes unconsumed", pos, n);
                break;
            }
            note(t, ev, &r);
            if (ev == TG_H1_REQUEST) {
                check_request(&r);
                if (sse)
                    sse_round(&w, r.body, r.body_len);
                if (r.body_len % 3 == 0)
                    tg_h1req_trim(&r);
            } else if (ev == TG_H1_ERROR) {
                check_error(&r);
                dead = true;
                break;
            }
        }
    }
    tg_h1req_free(&r);
    if (sse)
        tg_sse_win_free(&w);
    free(win);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    tg_h1req_opts_t o = {
        .max_header_bytes = 256 + (uint32_t)(data[0] & 0x0f) * 64,
        .max_headers = 1 + (uint32_t)((data[0] >> 4) & 7),
        .max_body_bytes = 1 + (size_t)(data[0] >> 7) * 4095 + (size_t)(data[1] & 0x3f),
    };
    size_t chunk = 1 + data[1] % 97;
    data += 2;
    size -= 2;
    trace_t split, whole;
    run(&o, data, size, chunk, &split);
    if (size > 0) {
        run(&o, data, size, size, &whole);
        if (split.n != whole.n || memcmp(split.ev, whole.ev, sizeof(uint32_t) * (size_t)split.n))
            die("the events depend on how the bytes were split", (size_t)split.n, (size_t)whole.n);
    }
    return 0;
}
