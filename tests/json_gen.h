/* The pieces both differential runs against jansson (tests/test_envelope.c,
 * tests/test_osenv.c) build their inputs from: a growing text buffer, a
 * fixed-seed xorshift generator (so a failing case number reproduces),
 * byte-level mutations, and the text of a scanner's span for assertion
 * messages. Each dialect writes its own frame generator on top. */
#ifndef TG_TESTS_JSON_GEN_H
#define TG_TESTS_JSON_GEN_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/jscan.h"

/* Generated text; NUL-terminated after <len> bytes. The test owns <p>. */
typedef struct gbuf {
    char *p;
    size_t len, cap;
} gbuf_t;

static inline void gput(gbuf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + n + 1)
            nc *= 2;
        b->p = realloc(b->p, nc);
        cr_assert_not_null(b->p);
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static inline void gs(gbuf_t *b, const char *s)
{
    gput(b, s, strlen(s));
}

/* An exact-length heap copy of <b>'s text, so ASan sees any over-read
 * past it; the caller frees. */
static inline char *gexact(const gbuf_t *b)
{
    char *exact = malloc(b->len ? b->len : 1);
    cr_assert_not_null(exact);
    memcpy(exact, b->p, b->len);
    return exact;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* A number in [0, n) (0 when n is 0). */
static inline uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

static inline bool chance(uint32_t pct)
{
    return rnd(100) < pct;
}

/* One to three random edits of <b>, with bytes drawn from <interesting>
 * (<n> of them, NULs included). */
static inline void gmutate(gbuf_t *b, const char *interesting, size_t n)
{
    if (b->len == 0)
        return;
    uint32_t k = 1 + rnd(3);
    for (uint32_t i = 0; i < k && b->len > 0; i++) {
        size_t at = rnd((uint32_t)b->len);
        switch (rnd(5)) {
        case 0: /* truncate */
            b->len = at;
            break;
        case 1: /* flip a bit */
            b->p[at] ^= (char)(1u << rnd(8));
            break;
        case 2: /* overwrite with a structural byte */
            b->p[at] = interesting[rnd((uint32_t)n)];
            break;
        case 3: /* delete a byte */
            memmove(b->p + at, b->p + at + 1, b->len - at - 1);
            b->len--;
            break;
        default: { /* insert a byte */
            char c = interesting[rnd((uint32_t)n)];
            gput(b, "x", 1);
            memmove(b->p + at + 1, b->p + at, b->len - at - 1);
            b->p[at] = c;
            break;
        }
        }
    }
}

/* The bytes of span <v> of <s> (at most 511), NUL-terminated, in one of
 * four static buffers, so one assertion can show several. */
static inline const char *span_text(const char *s, tg_jspan_t v)
{
    static char b[4][512];
    static int k;
    char *o = b[k++ & 3];
    if (v.type == TG_J_NONE)
        return "<none>";
    size_t n = v.len < 511 ? v.len : 511;
    memcpy(o, s + v.off, n);
    o[n] = 0;
    return o;
}

#endif
