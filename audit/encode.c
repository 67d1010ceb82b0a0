/* The audit encoder: tg_audit_ev_t -> one JSON line, by hand.
 *
 * Pure and allocation-free: it runs for every call on the loop thread, so it
 * writes straight into the caller's buffer with memcpy and hand-rolled
 * number formatting (no jansson, no stdio, no locale); the timestamp is
 * config/jsonw's, cached per second.
 *
 * Field order is fixed (v, ts, seq, instance, event, then the struct's
 * order) so that lines diff and grep predictably; only set fields appear.
 * Every string that is not a checked caller field is JSON-escaped and
 * forced to valid UTF-8, so a line always parses whatever config held.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "audit/audit.h"
#include "config/jsonw.h"

/* Output cursor. Once <full> is set the line is abandoned: <end> is
 * pulled back to <p>, so later puts find no room (one test each) and
 * write nothing, and the encoder returns -ENOSPC. */
typedef struct enc {
    char *p;
    char *end;
    bool full;
} enc_t;

static inline void put(enc_t *w, const void *s, size_t n)
{
    if (__builtin_expect((size_t)(w->end - w->p) < n, 0)) {
        w->full = true;
        w->end = w->p;
        return;
    }
    tg_jw_copy(w->p, s, n);
    w->p += n;
}

#define PUT_LIT(w, lit) put((w), (lit), sizeof(lit) - 1)

static void put_u64(enc_t *w, uint64_t v)
{
    char t[20]; /* UINT64_MAX has 20 digits */
    size_t n = tg_jw_digits(t, v);
    put(w, t + 20 - n, n);
}

static void put_i64(enc_t *w, int64_t v)
{
    if (v < 0) {
        PUT_LIT(w, "-");
        /* Negate in unsigned arithmetic: -INT64_MIN overflows int64_t. */
        put_u64(w, 0 - (uint64_t)v);
    } else {
        put_u64(w, (uint64_t)v);
    }
}

/* Zero-padded decimal of exactly <width> digits into <out>; <v> fits by
 * construction. */
static inline void fmt_digits(char *out, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* Length of the well-formed UTF-8 sequence at <s> (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF), or 0 when it is not one. <s> is
 * NUL-terminated, so a truncated sequence stops at a byte that fails the
 * continuation test. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0; /* overlong */
    else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    else if (c == 0xf0)
        lo = 0x90; /* overlong */
    else if (c == 0xf4)
        hi = 0x8f; /* above U+10FFFF */
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* Byte classes, one table lookup per byte on the hot path (every event
 * carries a handful of names). */
enum {
    C_PLAIN = 1, /* copied as it is inside a JSON string */
    C_SAFE = 2,  /* in tg_audit_safe_str's class */
};

#define R4(x) x, x, x, x
#define R8(x) R4(x), R4(x)
#define R16(x) R8(x), R8(x)
#define P C_PLAIN
#define S (C_PLAIN | C_SAFE)

/* Plain: printable ASCII other than the quote and the backslash. DEL is
 * escaped too so that a name cannot smuggle terminal control into
 * someone's `tail -f`. Safe: [A-Za-z0-9._:@/-]. */
static const unsigned char cls[256] = {
    R16(0), R16(0),                            /* 0x00-0x1f: control */
    P, P, 0, P, P, P, P, P, P, P, P, P, P, S, S, S, /* ' ' to '/': '"' escaped; '-' '.' '/' safe */
    S, S, S, S, S, S, S, S, S, S, S, P, P, P, P, P, /* '0'-'9' ':' safe */
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, /* '@' 'A'-'O' */
    S, S, S, S, S, S, S, S, S, S, S, P, 0, P, P, S, /* 'P'-'Z' '[' '\\' ']' '^' '_' */
    P, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, /* '`' 'a'-'o' */
    S, S, S, S, S, S, S, S, S, S, S, P, P, P, P, 0, /* 'p'-'z' '{' '|' '}' '~' DEL */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), /* 0x80-0xff: UTF-8 */
};

#undef P
#undef S
#undef R16
#undef R8
#undef R4

static inline bool plain_byte(unsigned char c)
{
    return cls[c] & C_PLAIN;
}

/* The end of the run of plain bytes at <s> (NUL-terminated, so the run
 * ends at the NUL at the latest). 16 bytes at a time while the 16 bytes
 * stay in <s>'s page: past the NUL they are read but never used, and a
 * read that does not cross a page boundary cannot fault (the sanitizer,
 * which checks object bounds rather than pages, is told so). */
#ifdef __SSE2__
__attribute__((no_sanitize_address)) static inline const unsigned char *
plain_run(const unsigned char *s)
{
    const __m128i ctl = _mm_set1_epi8(0x1f), del = _mm_set1_epi8(0x7f);
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    while (((uintptr_t)s & 4095) <= 4096 - 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i stop = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x),  /* <= 0x1f */
                                    _mm_cmpeq_epi8(_mm_max_epu8(x, del), x)); /* >= 0x7f */
        stop = _mm_or_si128(stop, _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m != 0)
            return s + __builtin_ctz(m);
        s += 16;
    }
    while (plain_byte(*s))
        s++;
    return s;
}
#else
static inline const unsigned char *plain_run(const unsigned char *s)
{
    while (plain_byte(*s))
        s++;
    return s;
}
#endif

/* <s> as the body of a JSON string: runs of plain bytes are copied in one
 * memcpy, well-formed UTF-8 passes through, control bytes become escapes
 * and each byte of ill-formed UTF-8 becomes U+FFFD. */
static void put_escaped(enc_t *w, const char *str)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;

    for (;;) {
        const unsigned char *run = s;

        s = plain_run(s);
        put(w, run, (size_t)(s - run));

        unsigned char c = *s;
        if (c == '\0')
            return;
        if (c >= 0x80) {
            size_t n = utf8_len(s);
            if (n != 0) {
                put(w, s, n);
                s += n;
            } else {
                PUT_LIT(w, "\\ufffd");
                s++;
            }
            continue;
        }
        switch (c) {
        case '"': PUT_LIT(w, "\\\""); break;
        case '\\': PUT_LIT(w, "\\\\"); break;
        case '\n': PUT_LIT(w, "\\n"); break;
        case '\r': PUT_LIT(w, "\\r"); break;
        case '\t': PUT_LIT(w, "\\t"); break;
        case '\b': PUT_LIT(w, "\\b"); break;
        case '\f': PUT_LIT(w, "\\f"); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
            put(w, u, sizeof(u));
        }
        }
        s++;
    }
}

/* ,"key":"value" for a name from config, enum or toolgate id; <key> holds
 * the opening quote of the value. */
static void field_str(enc_t *w, const char *key, size_t keylen, const char *v)
{
    if (v == NULL)
        return;
    put(w, key, keylen);
    put_escaped(w, v);
    PUT_LIT(w, "\"");
}

/* ,"key":"value" for a caller-supplied string: written only when it passes
 * tg_audit_safe_str (so it needs no escaping), else as "invalid". The
 * caller's bytes are never copied anywhere else. <key> holds the opening
 * quote of the value. */
static void field_checked(enc_t *w, const char *key, size_t keylen, const char *v)
{
    if (v == NULL)
        return;
    put(w, key, keylen);
    /* tg_audit_safe_str and its length in one pass: stop at the first byte
     * outside the class (the NUL is) or past the longest string allowed. */
    const unsigned char *u = (const unsigned char *)v;
    size_t len = 0;
    while (len <= TG_AUDIT_SAFE_MAX && (cls[u[len]] & C_SAFE))
        len++;
    if (len > 0 && len <= TG_AUDIT_SAFE_MAX && u[len] == '\0')
        put(w, v, len);
    else
        PUT_LIT(w, "invalid");
    PUT_LIT(w, "\"");
}

static void field_num(enc_t *w, const char *key, size_t keylen, int64_t v)
{
    if (v == TG_AUDIT_ABSENT)
        return;
    put(w, key, keylen);
    put_i64(w, v);
}

#define F_STR(w, name, v) \
    field_str((w), ",\"" name "\":\"", sizeof(",\"" name "\":\"") - 1, (v))
#define F_CHECKED(w, name, v) \
    field_checked((w), ",\"" name "\":\"", sizeof(",\"" name "\":\"") - 1, (v))
#define F_NUM(w, name, v) field_num((w), ",\"" name "\":", sizeof(",\"" name "\":") - 1, (v))

/* The text of "ts" for <ms>, or NULL when it lies outside years
 * 0000..9999. Events come many per second: config/jsonw's formatter runs
 * once per second (per thread) and only the milliseconds are written per
 * event (tg_jw_ts_text allows that). */
static const char *ts_text(int64_t ms)
{
    static _Thread_local int64_t cached_sec = INT64_MIN; /* no second of the range */
    static _Thread_local char ts[TG_JW_TS_LEN];
    int64_t sec = ms / 1000, msec = ms % 1000;
    if (msec < 0) {
        msec += 1000;
        sec--;
    }
    if (sec == cached_sec) {
        fmt_digits(ts + 20, (unsigned)msec, 3);
        return ts;
    }
    if (tg_jw_ts_text(ts, ms) < 0)
        return NULL;
    cached_sec = sec;
    return ts;
}

/* Set every field of <ev> absent: NULL strings, TG_AUDIT_ABSENT numbers. */
void tg_audit_ev_init(tg_audit_ev_t *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->limit.observed = TG_AUDIT_ABSENT;
    ev->limit.cap = TG_AUDIT_ABSENT;
    ev->duration_ms = TG_AUDIT_ABSENT;
    ev->bytes_in = TG_AUDIT_ABSENT;
    ev->bytes_out = TG_AUDIT_ABSENT;
    ev->retry_after_ms = TG_AUDIT_ABSENT;
    ev->count = TG_AUDIT_ABSENT;
    ev->pid = TG_AUDIT_ABSENT;
    ev->attempt = TG_AUDIT_ABSENT;
    ev->backoff_ms = TG_AUDIT_ABSENT;
    ev->exit.code = TG_AUDIT_ABSENT;
    ev->exit.signal = TG_AUDIT_ABSENT;
    ev->exit.memory_peak = TG_AUDIT_ABSENT;
}

/* True when the <len> bytes at <s> are 1..TG_AUDIT_SAFE_MAX of
 * [A-Za-z0-9._:@/-]. The class has no quote, backslash, space, control or
 * non-ASCII byte, so an accepted string needs no escaping and cannot carry
 * a typical secret (tokens with '+', '=', '~', spaces) in a readable form. */
bool tg_audit_safe_str(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > TG_AUDIT_SAFE_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!(cls[(unsigned char)s[i]] & C_SAFE))
            return false;
    }
    return true;
}

/* Encode <ev> as one JSON line ending in '\n' into <buf> (<cap> bytes,
 * no NUL written). Returns the line's length; -ENOSPC when it does not
 * fit (nothing past <cap> is touched and <buf> then holds no '\n', so no
 * partial line can be mistaken for a record); -EINVAL when <ev>->event or
 * <instance> is NULL or <ts_ms> is outside years 0000..9999. */
/* Flattened: it runs for every event, and its field writers inlined into
 * one body cost a quarter less than calls to them. */
__attribute__((flatten)) long tg_audit_encode(char *buf, size_t cap, const tg_audit_ev_t *ev, uint64_t seq, int64_t ts_ms,
                     const char *instance)
{
    if (ev == NULL || ev->event == NULL || instance == NULL)
        return -EINVAL;
    const char *ts = ts_text(ts_ms);
    if (ts == NULL)
        return -EINVAL;
    if (buf == NULL || cap == 0)
        return -ENOSPC;

    enc_t w = {buf, buf + cap, false};

    PUT_LIT(&w, "{\"v\":");
    put_u64(&w, TG_AUDIT_SCHEMA_VERSION);
    PUT_LIT(&w, ",\"ts\":\"");
    put(&w, ts, TG_JW_TS_LEN);
    PUT_LIT(&w, "\",\"seq\":");
    put_u64(&w, seq);
    F_STR(&w, "instance", instance);
    F_STR(&w, "event", ev->event);
    F_STR(&w, "request_id", ev->request_id);
    F_CHECKED(&w, "correlation_id", ev->correlation_id);
    F_CHECKED(&w, "call_id", ev->call_id);
    F_STR(&w, "agent", ev->agent);
    F_CHECKED(&w, "tool", ev->tool);
    F_CHECKED(&w, "exposed_tool", ev->exposed_tool);
    F_STR(&w, "caller", ev->caller);
    F_STR(&w, "front", ev->front);
    F_STR(&w, "session", ev->session);
    F_STR(&w, "remote", ev->remote);
    F_STR(&w, "status", ev->status);
    F_STR(&w, "code", ev->code);
    F_STR(&w, "stage", ev->stage);
    F_STR(&w, "decided_by", ev->decided_by);
    F_STR(&w, "reason", ev->reason);
    F_STR(&w, "key", ev->key);
    if (ev->limit.type != NULL) {
        PUT_LIT(&w, ",\"limit\":{\"type\":\"");
        put_escaped(&w, ev->limit.type);
        PUT_LIT(&w, "\"");
        F_STR(&w, "scope", ev->limit.scope);
        F_STR(&w, "name", ev->limit.name);
        F_NUM(&w, "observed", ev->limit.observed);
        F_NUM(&w, "cap", ev->limit.cap);
        PUT_LIT(&w, "}");
    }
    F_NUM(&w, "duration_ms", ev->duration_ms);
    F_NUM(&w, "bytes_in", ev->bytes_in);
    F_NUM(&w, "bytes_out", ev->bytes_out);
    F_NUM(&w, "retry_after_ms", ev->retry_after_ms);
    F_NUM(&w, "count", ev->count);
    F_NUM(&w, "pid", ev->pid);
    F_NUM(&w, "attempt", ev->attempt);
    F_NUM(&w, "backoff_ms", ev->backoff_ms);
    if (ev->exit.reason != NULL) {
        /* reason is last but always present, so it closes the object and
         * the numbers before it each carry their own trailing comma. */
        PUT_LIT(&w, ",\"exit\":{");
        if (ev->exit.code != TG_AUDIT_ABSENT) {
            PUT_LIT(&w, "\"code\":");
            put_i64(&w, ev->exit.code);
            PUT_LIT(&w, ",");
        }
        if (ev->exit.signal != TG_AUDIT_ABSENT) {
            PUT_LIT(&w, "\"signal\":");
            put_i64(&w, ev->exit.signal);
            PUT_LIT(&w, ",");
        }
        if (ev->exit.memory_peak != TG_AUDIT_ABSENT) {
            PUT_LIT(&w, "\"memory_peak_bytes\":");
            put_i64(&w, ev->exit.memory_peak);
            PUT_LIT(&w, ",");
        }
        PUT_LIT(&w, "\"reason\":\"");
        put_escaped(&w, ev->exit.reason);
        PUT_LIT(&w, "\"}");
    }
    if (ev->enforced_json != NULL && ev->enforced_json[0] == '{') {
        PUT_LIT(&w, ",\"enforced\":");
        put(&w, ev->enforced_json, strlen(ev->enforced_json));
    }
    PUT_LIT(&w, "}\n");

    if (w.full)
        return -ENOSPC;
    return (long)(w.p - buf);
}
