/* jsonw: a bounded JSON text writer for the few messages toolgate builds
 * itself (denials, OpenSentience handshake and control frames). Pure: it
 * writes into a caller-supplied buffer and never allocates.
 *
 * Once a write does not fit, the writer is failed: later writes are
 * dropped and tg_jw_end reports -ENOSPC, so an encoder checks once at the
 * end and never emits a partial message. One byte of the capacity is always kept
 * for the terminating NUL.
 */
#ifndef TG_ROUTER_JSONW_H
#define TG_ROUTER_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct tg_jw {
    char *buf;
    size_t cap;
    size_t len;
    int err; /* first failure (-ENOSPC, -EINVAL); once set, writes are dropped */
} tg_jw_t;

/* Start writing into <buf> of <cap> bytes (cap 0 fails at once). */
void tg_jw_init(tg_jw_t *w, char *buf, size_t cap);

/* <n> bytes as they are (already valid JSON text). */
void tg_jw_raw(tg_jw_t *w, const char *s, size_t n);
/* A NUL-terminated literal as it is. */
void tg_jw_lit(tg_jw_t *w, const char *s);
void tg_jw_i64(tg_jw_t *w, int64_t v);
void tg_jw_u64(tg_jw_t *w, uint64_t v);

/* The contents of a JSON string (no quotes): <n> bytes JSON-escaped;
 * control bytes become \u00XX and invalid UTF-8 becomes U+FFFD, so the
 * result always parses whatever the input. */
void tg_jw_esc(tg_jw_t *w, const char *s, size_t n);
/* Length of the valid UTF-8 sequence at s[0] (a lead byte >= 0x80) within
 * <n> bytes, or 0 when it is not one (overlong, surrogate, cut short). */
size_t tg_jw_utf8_len(const unsigned char *s, size_t n);
/* A quoted, escaped string from a NUL-terminated <s>. */
void tg_jw_str(tg_jw_t *w, const char *s);

/* A quoted RFC 3339 UTC timestamp with milliseconds
 * ("2026-01-16T12:00:00.000Z") for <ms> since the epoch. A time outside
 * years 0000..9999 cannot be written: tg_jw_end then reports -EINVAL. */
void tg_jw_ts(tg_jw_t *w, int64_t ms);

#define TG_JW_TS_LEN 24 /* "YYYY-MM-DDTHH:MM:SS.mmmZ", no quotes, no NUL */

/* toolgate's one RFC 3339 formatter (tg_jw_ts and the audit encoder use
 * it): <ms> since the epoch as "YYYY-MM-DDTHH:MM:SS.mmmZ" in the
 * TG_JW_TS_LEN bytes of <out>, no NUL. Returns 0, or -EINVAL when <ms>
 * lies outside years 0000..9999 (<out> untouched). Pure, no allocation.
 * A caller that formats many times per second may keep the text and
 * rewrite only its milliseconds, out[20..22]: the range's ends are whole
 * seconds, so every millisecond of a second that formatted does too. */
int tg_jw_ts_text(char out[TG_JW_TS_LEN], int64_t ms);

/* NUL-terminate. Returns the length written (NUL excluded), -ENOSPC when
 * something did not fit, -EINVAL when a value could not be written. */
long tg_jw_end(tg_jw_t *w);

/* ---- building blocks for writers on the hot path (the audit encoder,
 * the spliced OpenSentience call) ---- */

/* Copy <n> bytes from <src> to <d>. A size known at compile time is
 * memcpy's (inlined); a short unknown one, what messages and audit lines
 * are mostly made of (names, ids, digits), is two overlapping moves
 * instead of a call to memcpy, which costs more than the copy. Reads and
 * writes stay within the <n> bytes. */
/* <n> (w to 2w) bytes as the first and the last <w>, overlapping. */
static inline __attribute__((always_inline)) void tg_jw__ends(char *d, const char *s, size_t n,
                                                              size_t w)
{
    char a[8], b[8];
    memcpy(a, s, w);
    memcpy(b, s + n - w, w);
    memcpy(d, a, w);
    memcpy(d + n - w, b, w);
}

static inline __attribute__((always_inline)) void tg_jw_copy(char *d, const void *src, size_t n)
{
    const char *s = src;
    if (__builtin_constant_p(n) || n > 16) {
        memcpy(d, s, n);
    } else if (n >= 8) {
        tg_jw__ends(d, s, n, 8);
    } else if (n >= 4) {
        tg_jw__ends(d, s, n, 4);
    } else if (n > 0) {
        char a = s[0], b = s[n / 2], c = s[n - 1];
        d[0] = a;
        d[n / 2] = b;
        d[n - 1] = c;
    }
}

/* The decimal digits of <v> at the end of <out> (two per division, no
 * NUL): their count <n>, 1 to 20; they start at out + 20 - n. */
extern const char tg_jw_digit_pairs[201]; /* "00" to "99" */
static inline size_t tg_jw_digits(char out[20], uint64_t v)
{
    char *q = out + 20;
    while (v >= 100) {
        q -= 2;
        memcpy(q, tg_jw_digit_pairs + v % 100 * 2, 2);
        v /= 100;
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, tg_jw_digit_pairs + v * 2, 2);
    } else {
        *--q = (char)('0' + v);
    }
    return (size_t)(out + 20 - q);
}

#endif
