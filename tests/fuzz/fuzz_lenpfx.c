/* libFuzzer target: the OpenSentience dialect on untrusted bytes.
 *
 * The input is a byte stream fed through the lenpfx codec in pseudo-random
 * chunk sizes into a window kept the way the shell keeps it (only the
 * partial frame, moved to the front). The events must be exactly those of
 * a reference parse of the stream: FRAME with the announced payload,
 * INVALID for a zero length, OVERSIZE with the announced length as soon as
 * an over-cap header is complete, then SKIPPED once its payload has gone
 * by; the window never holds more than one frame plus one read. Every
 * FRAME goes through tests/os_oracle.h: tg_os_scan and its helpers against
 * jansson, and the messages toolgate builds from an accepted call.
 *
 * Layout: byte 0 picks max_frame (bits 0-1) and the mode (bit 7), the last
 * byte seeds the chunk sizes. Raw mode: the bytes between are the stream.
 * Build mode: the bytes between are split on '\n' and each piece framed
 * with its exact length, so the fuzzer reaches the scanner without having
 * to learn the header.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/lenpfx.h"
#include "tests/os_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHUNK_MAX 256

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_lenpfx: %s (%zu bytes)\n", what, n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, "%02x", p[i]);
    fputc('\n', stderr);
    abort();
}

/* Run the oracle on an exact-size copy, so ASan sees any over-read. */
static void check_frame(const char *p, size_t n)
{
    char *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, p, n);
    const char *why = os_oracle_check(copy, n);
    if (why)
        die(why, (const uint8_t *)copy, n);
    free(copy);
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The reference: what the stream holds from <at>. */
typedef struct ref {
    const uint8_t *s;
    size_t n, at;
    uint64_t max;
    uint64_t skip; /* announced length of the over-cap frame being skipped, 0 if none */
} ref_t;

static void expect_event(ref_t *r, tg_lp_ev_t ev, const char *win, size_t start, size_t end,
                         uint64_t total, size_t fed)
{
    if (r->skip) {
        if (ev != TG_LP_SKIPPED || total != r->skip || r->at + r->skip > fed)
            die("expected SKIPPED with the announced length", r->s, r->n);
        r->at += (size_t)r->skip;
        r->skip = 0;
        return;
    }
    if (r->at + 4 > fed)
        die("event before a whole header", r->s, r->n);
    uint64_t len = get_be32(r->s + r->at);
    if (len == 0) {
        if (ev != TG_LP_INVALID)
            die("expected INVALID for a zero length", r->s, r->n);
        r->at += 4;
        return;
    }
    if (len > r->max) {
        if (ev != TG_LP_OVERSIZE || total != len)
            die("expected OVERSIZE from the header", r->s, r->n);
        r->at += 4;
        r->skip = len;
        return;
    }
    if (ev != TG_LP_FRAME || end - start != len || r->at + 4 + len > fed ||
        memcmp(win + start, r->s + r->at + 4, (size_t)len) != 0)
        die("expected FRAME", r->s, r->n);
    r->at += 4 + (size_t)len;
}

/* What NEED_MORE's *total must be with a whole header at <at>. */
static uint64_t expect_need(const ref_t *r)
{
    uint64_t len = get_be32(r->s + r->at);
    return len > 0 && len <= r->max ? 4 + len : 0;
}

static void run_stream(const uint8_t *s, size_t n, uint64_t max, uint32_t seed)
{
    size_t cap = 4 + (size_t)max + CHUNK_MAX;
    char *win = malloc(cap);
    if (!win)
        abort();
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, max);
    ref_t r = {.s = s, .n = n, .at = 0, .max = max, .skip = 0};
    size_t len = 0, pos = 0, fed = 0;
    uint32_t x = seed | 1;
    while (fed < n) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        size_t k = 1 + x % CHUNK_MAX;
        if (k > n - fed)
            k = n - fed;
        if (cap - len < k)
            die("window overflow: the codec kept more than one frame", s, n);
        memcpy(win + len, s + fed, k);
        len += k;
        fed += k;
        for (;;) {
            size_t start = 0, end = 0, before = pos;
            uint64_t total = 0;
            tg_lp_ev_t ev = tg_lenpfx_next(&c, win, len, &pos, &start, &end, &total);
            if (pos < before || pos > len)
                die("position moved backwards or past the data", s, n);
            if (ev == TG_LP_NEED_MORE) {
                /* the shell keeps [pos, len): it must be the stream from the
                 * reference's position, unless skipping */
                if (!r.skip && fed - r.at != len - pos)
                    die("NEED_MORE keeps the wrong bytes", s, n);
                if (r.skip && pos != len)
                    die("bytes kept while skipping", s, n);
                uint64_t want = !r.skip && fed - r.at >= 4 ? expect_need(&r) : 0;
                if (total != want)
                    die("NEED_MORE size hint differs", s, n);
                break;
            }
            expect_event(&r, ev, win, start, end, total, fed);
            if (ev == TG_LP_FRAME)
                check_frame(win + start, end - start);
        }
        memmove(win, win + pos, len - pos);
        len -= pos;
        pos = 0;
    }
    /* what is left is an unfinished header or frame, or an unfinished skip */
    if (r.skip) {
        if (r.at + r.skip <= n)
            die("SKIPPED missing at the end of the stream", s, n);
    } else if (n - r.at >= 4) {
        uint64_t l = get_be32(s + r.at);
        if (l == 0 || l > max || r.at + 4 + l <= n)
            die("events missing at the end of the stream", s, n);
    }
    free(win);
}

/* Build mode: each '\n'-separated piece of <body> becomes one frame. */
static uint8_t *build(const uint8_t *body, size_t n, size_t *out_len)
{
    size_t pieces = 1;
    for (size_t i = 0; i < n; i++)
        pieces += body[i] == '\n';
    uint8_t *s = malloc(n + 4 * pieces + 1);
    if (!s)
        abort();
    size_t o = 0, from = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && body[i] != '\n')
            continue;
        size_t pl = i - from;
        tg_lenpfx_header(s + o, pl);
        memcpy(s + o + 4, body + from, pl);
        o += 4 + pl;
        from = i + 1;
    }
    *out_len = o;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const uint64_t maxes[4] = {0, 256, 65536, 65536};
    uint64_t max = (data[0] & 3) == 0 ? 8 + ((data[0] >> 2) & 31) : maxes[data[0] & 3];
    uint32_t seed = data[size - 1] * 2654435761u;
    const uint8_t *body = data + 1;
    size_t n = size - 2;
    if (data[0] & 0x80) {
        size_t sl;
        uint8_t *s = build(body, n, &sl);
        run_stream(s, sl, max, seed);
        free(s);
    } else {
        run_stream(body, n, max, seed);
    }
    return 0;
}
