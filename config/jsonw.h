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

#endif
