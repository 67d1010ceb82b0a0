/* lenpfx: header encoding, whole and split frames, back-to-back frames,
 * over-cap frames refused from the header and skipped as they stream,
 * zero-length frames, the max_frame boundary. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/lenpfx.h"

/* ---- a shell that keeps only the partial frame, moved to the front ---- */

typedef struct ev {
    tg_lp_ev_t ev;
    uint64_t total;   /* OVERSIZE, SKIPPED */
    char body[64];    /* FRAME: the payload (short ones in these tests) */
    size_t body_len;
} ev_t;

typedef struct run {
    ev_t evs[64];
    size_t nev;
    size_t max_window; /* most bytes the shell ever held */
    uint64_t last_need; /* *total of the last NEED_MORE */
} run_t;

/* Feed <s> in pieces of the sizes in <cuts> (0-terminated; the rest in
 * one piece), collecting events. */
static void feed(tg_lenpfx_t *c, const char *s, size_t n, const size_t *cuts, run_t *r)
{
    static char win[1 << 18];
    size_t len = 0, pos = 0, fed = 0, ci = 0;
    memset(r, 0, sizeof(*r));
    while (fed < n) {
        size_t k = cuts && cuts[ci] ? cuts[ci++] : n - fed;
        if (k > n - fed)
            k = n - fed;
        cr_assert_leq(len + k, sizeof win);
        memcpy(win + len, s + fed, k);
        len += k;
        fed += k;
        if (len > r->max_window)
            r->max_window = len;
        for (;;) {
            size_t start = 99, end = 99;
            uint64_t total = 7;
            size_t before = pos;
            tg_lp_ev_t e = tg_lenpfx_next(c, win, len, &pos, &start, &end, &total);
            cr_assert_geq(pos, before);
            cr_assert_leq(pos, len);
            if (e == TG_LP_NEED_MORE) {
                r->last_need = total;
                break;
            }
            cr_assert_lt(r->nev, 64);
            ev_t *x = &r->evs[r->nev++];
            memset(x, 0, sizeof(*x));
            x->ev = e;
            if (e == TG_LP_FRAME) {
                cr_assert_eq(end, pos);
                cr_assert_leq(end - start, sizeof x->body);
                memcpy(x->body, win + start, end - start);
                x->body_len = end - start;
            } else if (e == TG_LP_OVERSIZE || e == TG_LP_SKIPPED) {
                x->total = total;
            }
        }
        memmove(win, win + pos, len - pos);
        len -= pos;
        pos = 0;
    }
}

/* Append a frame with payload <p> to <out> at <*n>. */
static void put_frame(char *out, size_t *n, const char *p, size_t plen)
{
    cr_assert_eq(tg_lenpfx_header((unsigned char *)out + *n, plen), 0);
    memcpy(out + *n + 4, p, plen);
    *n += 4 + plen;
}

static void assert_frame(const ev_t *e, const char *want)
{
    cr_assert_eq(e->ev, TG_LP_FRAME, "event %d", e->ev);
    cr_assert_eq(e->body_len, strlen(want));
    cr_assert_eq(memcmp(e->body, want, e->body_len), 0, "%.*s", (int)e->body_len, e->body);
}

/* ---- tests ---- */

Test(lenpfx, header_encoding)
{
    unsigned char h[4];
    cr_assert_eq(tg_lenpfx_header(h, 0), 0);
    cr_assert(h[0] == 0 && h[1] == 0 && h[2] == 0 && h[3] == 0);
    cr_assert_eq(tg_lenpfx_header(h, 0x01020304), 0);
    cr_assert(h[0] == 1 && h[1] == 2 && h[2] == 3 && h[3] == 4);
    cr_assert_eq(tg_lenpfx_header(h, 300), 0);
    cr_assert(h[0] == 0 && h[1] == 0 && h[2] == 1 && h[3] == 44);
    cr_assert_eq(tg_lenpfx_header(h, UINT32_MAX), 0);
    cr_assert(h[0] == 0xFF && h[1] == 0xFF && h[2] == 0xFF && h[3] == 0xFF);
    memset(h, 0xAA, sizeof h);
    cr_assert_eq(tg_lenpfx_header(h, (uint64_t)UINT32_MAX + 1), -EMSGSIZE);
    cr_assert_eq(h[0], 0xAA, "nothing written on error");
}

Test(lenpfx, one_frame_exact_offsets)
{
    char buf[64];
    size_t n = 0;
    put_frame(buf, &n, "{\"v\":1}", 7);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1024);
    size_t pos = 0, start = 0, end = 0;
    uint64_t total = 1;
    cr_assert_eq(tg_lenpfx_next(&c, buf, n, &pos, &start, &end, &total), TG_LP_FRAME);
    cr_assert_eq(start, 4);
    cr_assert_eq(end, 11);
    cr_assert_eq(pos, 11);
    cr_assert_eq(total, 0);
    cr_assert_eq(tg_lenpfx_next(&c, buf, n, &pos, &start, &end, &total), TG_LP_NEED_MORE);
    cr_assert_eq(pos, 11);
    cr_assert_eq(total, 0);
    /* a frame at an offset other than 0 */
    char b2[64] = "junk";
    size_t n2 = 4;
    put_frame(b2, &n2, "{}", 2);
    pos = 4;
    cr_assert_eq(tg_lenpfx_next(&c, b2, n2, &pos, &start, &end, &total), TG_LP_FRAME);
    cr_assert_eq(start, 8);
    cr_assert_eq(end, 10);
}

Test(lenpfx, header_split_across_reads)
{
    char buf[64];
    size_t n = 0;
    put_frame(buf, &n, "{\"a\":[1,2]}", 11);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1024);
    size_t pos = 0, start, end;
    uint64_t total;
    /* 1, 2, 3 header bytes: nothing to do, nothing consumed, size unknown */
    for (size_t have = 0; have < 4; have++) {
        cr_assert_eq(tg_lenpfx_next(&c, buf, have, &pos, &start, &end, &total), TG_LP_NEED_MORE);
        cr_assert_eq(pos, 0);
        cr_assert_eq(total, 0, "size unknown with %zu header bytes", have);
    }
    /* header complete, payload partial: the full size is known */
    for (size_t have = 4; have < n; have++) {
        cr_assert_eq(tg_lenpfx_next(&c, buf, have, &pos, &start, &end, &total), TG_LP_NEED_MORE);
        cr_assert_eq(pos, 0);
        cr_assert_eq(total, 15);
    }
    cr_assert_eq(tg_lenpfx_next(&c, buf, n, &pos, &start, &end, &total), TG_LP_FRAME);
    cr_assert_eq(end - start, 11);
}

Test(lenpfx, back_to_back_frames_one_read)
{
    char buf[256];
    size_t n = 0;
    put_frame(buf, &n, "{\"n\":1}", 7);
    put_frame(buf, &n, "{}", 2);
    put_frame(buf, &n, "{\"n\":3,\"s\":\"x\"}", 15);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1024);
    run_t r;
    feed(&c, buf, n, NULL, &r);
    cr_assert_eq(r.nev, 3);
    assert_frame(&r.evs[0], "{\"n\":1}");
    assert_frame(&r.evs[1], "{}");
    assert_frame(&r.evs[2], "{\"n\":3,\"s\":\"x\"}");
    cr_assert_eq(r.last_need, 0);
}

/* Every split point of a stream of several frames, and every byte alone,
 * gives the same events. */
Test(lenpfx, frames_split_at_every_byte)
{
    char buf[256];
    size_t n = 0;
    put_frame(buf, &n, "{\"n\":1}", 7);
    put_frame(buf, &n, "{\"payload\":{\"k\":\"v\"}}", 21);
    put_frame(buf, &n, "{}", 2);
    for (size_t cut = 1; cut < n; cut++) {
        tg_lenpfx_t c;
        tg_lenpfx_init(&c, 1024);
        size_t cuts[] = {cut, 0};
        run_t r;
        feed(&c, buf, n, cuts, &r);
        cr_assert_eq(r.nev, 3, "cut %zu", cut);
        assert_frame(&r.evs[0], "{\"n\":1}");
        assert_frame(&r.evs[1], "{\"payload\":{\"k\":\"v\"}}");
        assert_frame(&r.evs[2], "{}");
    }
    size_t ones[300];
    for (size_t i = 0; i < n; i++)
        ones[i] = 1;
    ones[n] = 0;
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1024);
    run_t r;
    feed(&c, buf, n, ones, &r);
    cr_assert_eq(r.nev, 3);
    assert_frame(&r.evs[1], "{\"payload\":{\"k\":\"v\"}}");
    cr_assert_leq(r.max_window, 4 + 21, "never more than one frame held");
}

/* A 0xFFFFFFFF header is refused as soon as its 4 bytes are there, and
 * its 4 GiB are discarded as they stream without the shell keeping any. */
Test(lenpfx, huge_header_refused_at_once)
{
    const char hdr[4] = {'\xff', '\xff', '\xff', '\xff'};
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 4u << 20);
    size_t pos = 0, start = 0, end = 0;
    uint64_t total = 0;
    cr_assert_eq(tg_lenpfx_next(&c, hdr, 3, &pos, &start, &end, &total), TG_LP_NEED_MORE);
    cr_assert_eq(tg_lenpfx_next(&c, hdr, 4, &pos, &start, &end, &total), TG_LP_OVERSIZE);
    cr_assert_eq(total, 0xFFFFFFFFu);
    cr_assert_eq(pos, 4, "only the header consumed");
    /* the payload: 4096 reads of 1 MiB, each consumed whole */
    size_t chunk = 1u << 20;
    char *zeros = calloc(1, chunk);
    cr_assert_not_null(zeros);
    uint64_t seen = 0;
    tg_lp_ev_t e = TG_LP_NEED_MORE;
    while (seen < 0xFFFFFFFFu) {
        uint64_t left = 0xFFFFFFFFu - seen;
        size_t k = left < chunk ? (size_t)left : chunk;
        pos = 0;
        e = tg_lenpfx_next(&c, zeros, k, &pos, &start, &end, &total);
        cr_assert_eq(pos, k, "everything given is consumed");
        seen += k;
        if (seen < 0xFFFFFFFFu) {
            cr_assert_eq(e, TG_LP_NEED_MORE);
            cr_assert_eq(total, 0);
        }
    }
    cr_assert_eq(e, TG_LP_SKIPPED);
    cr_assert_eq(total, 0xFFFFFFFFu);
    free(zeros);
    /* framed again */
    char buf[16];
    size_t n = 0;
    put_frame(buf, &n, "{}", 2);
    pos = 0;
    cr_assert_eq(tg_lenpfx_next(&c, buf, n, &pos, &start, &end, &total), TG_LP_FRAME);
}

Test(lenpfx, oversize_skipped_across_many_reads)
{
    /* frame, over-cap frame of 100000 bytes, frame; fed in 997-byte reads */
    size_t big = 100000;
    char *s = malloc(big + 64);
    cr_assert_not_null(s);
    size_t n = 0;
    put_frame(s, &n, "{\"a\":1}", 7);
    cr_assert_eq(tg_lenpfx_header((unsigned char *)s + n, big), 0);
    memset(s + n + 4, '{', big);
    n += 4 + big;
    put_frame(s, &n, "{\"b\":2}", 7);
    size_t cuts[200];
    for (size_t i = 0; i < 199; i++)
        cuts[i] = 997;
    cuts[199] = 0;
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1000);
    run_t r;
    feed(&c, s, n, cuts, &r);
    cr_assert_eq(r.nev, 4);
    assert_frame(&r.evs[0], "{\"a\":1}");
    cr_assert_eq(r.evs[1].ev, TG_LP_OVERSIZE);
    cr_assert_eq(r.evs[1].total, big);
    cr_assert_eq(r.evs[2].ev, TG_LP_SKIPPED);
    cr_assert_eq(r.evs[2].total, big);
    assert_frame(&r.evs[3], "{\"b\":2}");
    /* the shell never held more than one read plus a partial header */
    cr_assert_leq(r.max_window, 997 + 3 + 7);

    /* and in one read: the next frame follows the skipped payload */
    tg_lenpfx_init(&c, 1000);
    feed(&c, s, n, NULL, &r);
    cr_assert_eq(r.nev, 4);
    cr_assert_eq(r.evs[2].ev, TG_LP_SKIPPED);
    assert_frame(&r.evs[3], "{\"b\":2}");
    free(s);
}

Test(lenpfx, max_frame_boundary)
{
    char buf[64];
    size_t n = 0;
    put_frame(buf, &n, "{\"x\":12}", 8);  /* exactly max: a frame */
    put_frame(buf, &n, "{\"x\":123}", 9); /* one over: refused */
    put_frame(buf, &n, "{}", 2);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 8);
    run_t r;
    feed(&c, buf, n, NULL, &r);
    cr_assert_eq(r.nev, 4);
    assert_frame(&r.evs[0], "{\"x\":12}");
    cr_assert_eq(r.evs[1].ev, TG_LP_OVERSIZE);
    cr_assert_eq(r.evs[1].total, 9);
    cr_assert_eq(r.evs[2].ev, TG_LP_SKIPPED);
    cr_assert_eq(r.evs[2].total, 9);
    assert_frame(&r.evs[3], "{}");

    /* max_frame 0: every frame is over the cap */
    tg_lenpfx_init(&c, 0);
    feed(&c, buf, n, NULL, &r);
    cr_assert_eq(r.nev, 6);
    cr_assert_eq(r.evs[0].ev, TG_LP_OVERSIZE);
    cr_assert_eq(r.evs[0].total, 8);
    cr_assert_eq(r.evs[5].ev, TG_LP_SKIPPED);
    cr_assert_eq(r.evs[5].total, 2);
}

Test(lenpfx, zero_length_frame_invalid)
{
    char buf[64];
    size_t n = 0;
    put_frame(buf, &n, "", 0);
    put_frame(buf, &n, "{}", 2);
    put_frame(buf, &n, "", 0);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 1024);
    size_t pos = 0, start = 0, end = 0;
    uint64_t total;
    cr_assert_eq(tg_lenpfx_next(&c, buf, n, &pos, &start, &end, &total), TG_LP_INVALID);
    cr_assert_eq(pos, 4, "the header is consumed: the stream stays framed");
    run_t r;
    tg_lenpfx_init(&c, 1024);
    size_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    feed(&c, buf, n, ones, &r);
    cr_assert_eq(r.nev, 3);
    cr_assert_eq(r.evs[0].ev, TG_LP_INVALID);
    assert_frame(&r.evs[1], "{}");
    cr_assert_eq(r.evs[2].ev, TG_LP_INVALID);
}

Test(lenpfx, oversize_header_split)
{
    /* the over-cap header itself arrives a byte at a time, then the whole
     * payload and the next frame in one read */
    char buf[128];
    size_t n = 0;
    cr_assert_eq(tg_lenpfx_header((unsigned char *)buf, 40), 0);
    memset(buf + 4, 'x', 40);
    n = 44;
    put_frame(buf, &n, "{}", 2);
    size_t cuts[] = {1, 1, 1, 1, 0};
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 16);
    run_t r;
    feed(&c, buf, n, cuts, &r);
    cr_assert_eq(r.nev, 3);
    cr_assert_eq(r.evs[0].ev, TG_LP_OVERSIZE);
    cr_assert_eq(r.evs[0].total, 40);
    cr_assert_eq(r.evs[1].ev, TG_LP_SKIPPED);
    assert_frame(&r.evs[2], "{}");
}
