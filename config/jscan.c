/* jscan: byte-span JSON scanner (see jscan.h for the contract).
 *
 * Two speeds. The scanned level (a scalar handed to tg_jscan_value, the
 * keys and scalar values of an iterated object or array) goes through the
 * strict RFC 8259 grammar, including UTF-8 and \u surrogate checks, so any
 * span this file reports can be trusted by its caller (ids are copied raw
 * into replies). Containers below that level are only skipped: the next
 * byte that matters (a quote, backslash or control byte inside a string; a
 * quote or bracket outside) is found 16 bytes at a time with SSE2, 8 at a
 * time with a portable SWAR fallback, and brackets are matched on a bit
 * stack of TG_JSCAN_MAX_DEPTH entries.
 *
 * Return convention of the internal scanners: offset just past the token
 * (>= 0), -1 malformed, -2 the buffer ended first. The first error met
 * from the left wins, so a string or container cut short gives -2. A
 * number that reaches the end of the buffer is complete as far as the
 * scanner can tell; partial iteration, which knows the buffer is cut,
 * reports it as -2.
 */
#include "config/jscan.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_JSCAN_AVX2 1
#endif

#define J_ERR (-1)
#define J_TRUNC (-2)

/* ---- finding the next interesting byte, 16 (SSE2) or 8 (SWAR) at a time ---- */

/* Bytes that stop a string scan: '"', '\\', control bytes; in strict mode
 * also every byte >= 0x80 (it starts a UTF-8 sequence to validate). */
static inline bool str_stop(unsigned char c, bool strict)
{
    return c == '"' || c == '\\' || c < 0x20 || (strict && c >= 0x80);
}

/* Bytes that matter to a structural skip outside strings. */
static inline bool struct_stop(unsigned char c)
{
    unsigned char f = c | 0x20; /* folds '[' onto '{' and ']' onto '}' */
    return c == '"' || f == '{' || f == '}';
}

#if defined(__SSE2__)

static inline size_t first_bit(unsigned m)
{
    return (size_t)__builtin_ctz(m);
}

/* First index >= <i> (and < <n>) holding a string stop byte, or <n>. */
static size_t str_next_stop(const unsigned char *p, size_t i, size_t n, bool strict)
{
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1f);
    while (n - i >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash));
        /* x <= 0x1f (unsigned) <=> min(x, 0x1f) == x */
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (strict)
            m |= (unsigned)_mm_movemask_epi8(x); /* high bit: non-ASCII */
        if (m)
            return i + first_bit(m);
        i += 16;
    }
    while (i < n && !str_stop(p[i], strict))
        i++;
    return i;
}

/* First index >= <i> holding '"', a bracket or a brace, or <n>. */
static size_t struct_next_stop(const unsigned char *p, size_t i, size_t n)
{
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i fold = _mm_set1_epi8(0x20);
    const __m128i open = _mm_set1_epi8('{');
    const __m128i close = _mm_set1_epi8('}');
    while (n - i >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m128i f = _mm_or_si128(x, fold);
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, quote),
                                   _mm_or_si128(_mm_cmpeq_epi8(f, open), _mm_cmpeq_epi8(f, close)));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m)
            return i + first_bit(m);
        i += 16;
    }
    while (i < n && !struct_stop(p[i]))
        i++;
    return i;
}

#else /* portable SWAR: "does this 8-byte word hold a byte that ..." */

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline uint64_t has_zero(uint64_t v)
{
    return (v - ONES) & ~v & HIGHS;
}

static inline uint64_t has_byte(uint64_t v, unsigned char b)
{
    return has_zero(v ^ (ONES * b));
}

/* Nonzero iff some byte is < <n> (exact as a boolean for n <= 128). */
static inline uint64_t has_less(uint64_t v, unsigned char n)
{
    return (v - ONES * n) & ~v & HIGHS;
}

static size_t str_next_stop(const unsigned char *p, size_t i, size_t n, bool strict)
{
    const uint64_t hi = strict ? HIGHS : 0;
    while (n - i >= 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if ((has_byte(v, '"') | has_byte(v, '\\') | has_less(v, 0x20) | (v & hi)) != 0)
            break;
        i += 8;
    }
    while (i < n && !str_stop(p[i], strict))
        i++;
    return i;
}

static size_t struct_next_stop(const unsigned char *p, size_t i, size_t n)
{
    while (n - i >= 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        uint64_t f = v | (ONES * 0x20);
        if ((has_byte(v, '"') | has_byte(f, '{') | has_byte(f, '}')) != 0)
            break;
        i += 8;
    }
    while (i < n && !struct_stop(p[i]))
        i++;
    return i;
}

#endif

static inline bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const unsigned char *p, size_t i, size_t n)
{
    while (i < n && is_ws(p[i]))
        i++;
    return i;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Read the 4 hex digits after "\u" at p[i] (i points at the 'u').
 * 0 and *cp, J_ERR or J_TRUNC. */
static int read_u4(const unsigned char *p, size_t i, size_t n, unsigned *cp)
{
    unsigned v = 0;
    for (size_t k = 1; k <= 4; k++) {
        if (i + k >= n)
            return J_TRUNC;
        int h = hexval(p[i + k]);
        if (h < 0)
            return J_ERR;
        v = v << 4 | (unsigned)h;
    }
    *cp = v;
    return 0;
}

/* Validate one UTF-8 sequence starting at p[i] (p[i] >= 0x80), as jansson
 * does: no overlongs, no surrogates, nothing above U+10FFFF. Returns its
 * length, J_ERR or J_TRUNC. */
static long utf8_seq(const unsigned char *p, size_t i, size_t n)
{
    unsigned char c = p[i];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return J_ERR;
    }
    for (size_t k = 1; k <= need; k++) {
        if (i + k >= n)
            return J_TRUNC;
        unsigned char b = p[i + k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return J_ERR;
    }
    return (long)need + 1;
}

/* Strict string: <i> at the opening quote. */
static long scan_string_strict(const unsigned char *p, size_t n, size_t i, bool *escaped)
{
    i++;
    for (;;) {
        i = str_next_stop(p, i, n, true);
        if (i >= n)
            return J_TRUNC;
        unsigned char c = p[i];
        if (c == '"')
            return (long)(i + 1);
        if (c < 0x20)
            return J_ERR;
        if (c >= 0x80) {
            long k = utf8_seq(p, i, n);
            if (k < 0)
                return k;
            i += (size_t)k;
            continue;
        }
        /* backslash */
        *escaped = true;
        if (i + 1 >= n)
            return J_TRUNC;
        switch (p[i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            i += 2;
            break;
        case 'u': {
            unsigned cp, lo;
            int rc = read_u4(p, i + 1, n, &cp);
            if (rc < 0)
                return rc;
            i += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return J_ERR; /* lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                /* a high surrogate must be followed by \u + low surrogate */
                if (i >= n)
                    return J_TRUNC;
                if (p[i] != '\\')
                    return J_ERR;
                if (i + 1 >= n)
                    return J_TRUNC;
                if (p[i + 1] != 'u')
                    return J_ERR;
                rc = read_u4(p, i + 1, n, &lo);
                if (rc < 0)
                    return rc;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return J_ERR;
                i += 6;
            }
            break;
        }
        default:
            return J_ERR;
        }
    }
}

#ifdef TG_JSCAN_AVX2
/* The string scan of skipped values (large tool arguments and results)
 * 64 bytes at a time with AVX2, chosen at run time: it is the one loop
 * whose cost grows with frame size, and it sets how close a 1 MiB frame
 * gets to a plain pipe. Same stops as str_next_stop(.., false). */
__attribute__((target("avx2"))) static size_t str_skip_avx2(const unsigned char *p, size_t i,
                                                             size_t n)
{
    const __m256i quote = _mm256_set1_epi8('"');
    const __m256i bslash = _mm256_set1_epi8('\\');
    const __m256i ctl = _mm256_set1_epi8(0x1f);
    while (n - i >= 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32));
        __m256i ha = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(a, quote), _mm256_cmpeq_epi8(a, bslash)),
            _mm256_cmpeq_epi8(_mm256_min_epu8(a, ctl), a));
        __m256i hb = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(b, quote), _mm256_cmpeq_epi8(b, bslash)),
            _mm256_cmpeq_epi8(_mm256_min_epu8(b, ctl), b));
        if (!_mm256_testz_si256(_mm256_or_si256(ha, hb), _mm256_or_si256(ha, hb))) {
            unsigned ma = (unsigned)_mm256_movemask_epi8(ha);
            if (ma)
                return i + (size_t)__builtin_ctz(ma);
            return i + 32 + (size_t)__builtin_ctz((unsigned)_mm256_movemask_epi8(hb));
        }
        i += 64;
    }
    return str_next_stop(p, i, n, false);
}

static size_t str_skip_next(const unsigned char *p, size_t i, size_t n)
{
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    return avx2 ? str_skip_avx2(p, i, n) : str_next_stop(p, i, n, false);
}
#else
static size_t str_skip_next(const unsigned char *p, size_t i, size_t n)
{
    return str_next_stop(p, i, n, false);
}
#endif

/* Structural string skip: end, no control bytes; escapes are stepped over
 * without checking their spelling. */
static long skip_string(const unsigned char *p, size_t n, size_t i)
{
    i++;
    for (;;) {
        i = str_skip_next(p, i, n);
        if (i >= n)
            return J_TRUNC;
        unsigned char c = p[i];
        if (c == '"')
            return (long)(i + 1);
        if (c < 0x20)
            return J_ERR;
        if (i + 1 >= n)
            return J_TRUNC;
        if (p[i + 1] < 0x20)
            return J_ERR;
        i += 2;
    }
}

static inline bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Strict number (RFC 8259 grammar). The number ends at the first byte that
 * cannot continue it; the caller judges what follows. */
static long scan_number(const unsigned char *p, size_t n, size_t i)
{
    if (p[i] == '-') {
        if (++i >= n)
            return J_TRUNC;
    }
    if (p[i] == '0') {
        i++;
    } else if (p[i] >= '1' && p[i] <= '9') {
        while (i < n && is_digit(p[i]))
            i++;
    } else {
        return J_ERR;
    }
    if (i < n && p[i] == '.') {
        if (++i >= n)
            return J_TRUNC;
        if (!is_digit(p[i]))
            return J_ERR;
        while (i < n && is_digit(p[i]))
            i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        if (++i >= n)
            return J_TRUNC;
        if (p[i] == '+' || p[i] == '-') {
            if (++i >= n)
                return J_TRUNC;
        }
        if (!is_digit(p[i]))
            return J_ERR;
        while (i < n && is_digit(p[i]))
            i++;
    }
    return (long)i;
}

static long scan_literal(const unsigned char *p, size_t n, size_t i, const char *lit)
{
    size_t l = strlen(lit);
    for (size_t k = 0; k < l; k++) {
        if (i + k >= n)
            return J_TRUNC;
        if (p[i + k] != (unsigned char)lit[k])
            return J_ERR;
    }
    return (long)(i + l);
}

/* Structural skip of a container: <i> at '{' or '['. Brackets must match
 * (a bit per level: 1 = object) and nest at most <maxdepth> deep. */
static long skip_container(const unsigned char *p, size_t n, size_t i, size_t maxdepth)
{
    uint64_t stack[(TG_JSCAN_MAX_DEPTH + 63) / 64];
    size_t depth = 0;
    for (;;) {
        unsigned char c = p[i];
        if (c == '"') {
            long e = skip_string(p, n, i);
            if (e < 0)
                return e;
            i = (size_t)e;
        } else if (c == '{' || c == '[') {
            if (depth >= maxdepth)
                return J_ERR;
            if (c == '{')
                stack[depth / 64] |= 1ULL << (depth % 64);
            else
                stack[depth / 64] &= ~(1ULL << (depth % 64));
            depth++;
            i++;
        } else { /* '}' or ']': struct_next_stop finds nothing else */
            if (depth == 0)
                return J_ERR;
            depth--;
            bool obj = (stack[depth / 64] >> (depth % 64)) & 1;
            if (obj != (c == '}'))
                return J_ERR;
            i++;
            if (depth == 0)
                return (long)i;
        }
        i = struct_next_stop(p, i, n);
        if (i >= n)
            return J_TRUNC;
    }
}

/* tg_jscan_value with the nesting budget of the level being scanned. */
static long scan_value(const char *buf, size_t len, size_t pos, tg_jspan_t *out, size_t maxdepth)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = skip_ws(p, pos, len);
    if (i >= len)
        return J_TRUNC;
    tg_jspan_t v = {.off = i, .len = 0, .type = TG_J_NONE, .escaped = false};
    long e;
    switch (p[i]) {
    case '{':
        v.type = TG_J_OBJECT;
        e = skip_container(p, len, i, maxdepth);
        break;
    case '[':
        v.type = TG_J_ARRAY;
        e = skip_container(p, len, i, maxdepth);
        break;
    case '"':
        v.type = TG_J_STRING;
        e = scan_string_strict(p, len, i, &v.escaped);
        break;
    case 't':
        v.type = TG_J_TRUE;
        e = scan_literal(p, len, i, "true");
        break;
    case 'f':
        v.type = TG_J_FALSE;
        e = scan_literal(p, len, i, "false");
        break;
    case 'n':
        v.type = TG_J_NULL;
        e = scan_literal(p, len, i, "null");
        break;
    default:
        if (p[i] == '-' || is_digit(p[i])) {
            v.type = TG_J_NUMBER;
            e = scan_number(p, len, i);
        } else {
            e = J_ERR;
        }
        break;
    }
    if (e < 0)
        return e;
    v.len = (size_t)e - i;
    if (out)
        *out = v;
    return e;
}

long tg_jscan_value(const char *buf, size_t len, size_t pos, tg_jspan_t *out)
{
    return scan_value(buf, len, pos, out, TG_JSCAN_MAX_DEPTH);
}

/* ---- container iteration ---- */

/* Common begin: <it> walks the container whose opening bracket is at
 * <open>; members end at <end> (closing bracket offset) or, when partial,
 * at the buffer end <end>. */
static void iter_init(tg_jobj_iter_t *it, const char *buf, size_t open, size_t end, bool partial)
{
    it->buf = buf;
    it->end = end;
    it->pos = open + 1;
    it->first = true;
    it->partial = partial;
    it->state = 1;
}

void tg_jobj_begin(tg_jobj_iter_t *it, const char *buf, tg_jspan_t obj)
{
    iter_init(it, buf, obj.off, obj.off + obj.len - 1, false);
    if (obj.type != TG_J_OBJECT || obj.len < 2)
        it->state = J_ERR;
}

void tg_jarr_begin(tg_jarr_iter_t *it, const char *buf, tg_jspan_t arr)
{
    iter_init(it, buf, arr.off, arr.off + arr.len - 1, false);
    if (arr.type != TG_J_ARRAY || arr.len < 2)
        it->state = J_ERR;
}

int tg_jobj_begin_partial(tg_jobj_iter_t *it, const char *buf, size_t len, size_t pos)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = skip_ws(p, pos, len);
    iter_init(it, buf, i, len, true);
    if (i >= len)
        it->state = J_TRUNC;
    else if (p[i] != '{')
        it->state = J_ERR;
    return it->state < 0 ? it->state : 0;
}

static int iter_fail(tg_jobj_iter_t *it, int rc)
{
    it->state = rc;
    return rc;
}

/* Shared element step for objects (<obj> true) and arrays. In a complete
 * container <end> is the closing bracket (the skip that produced the span
 * already matched brackets), so reaching it means the close; in a partial
 * one <end> is the cut and the close is a byte to be found. */
static int iter_next(tg_jobj_iter_t *it, bool obj, tg_jspan_t *key, tg_jspan_t *val)
{
    if (it->state <= 0)
        return it->state;
    const unsigned char *p = (const unsigned char *)it->buf;
    const size_t n = it->end;
    const unsigned char close = obj ? '}' : ']';
    /* truncation inside a complete container is malformed */
    const int trunc = it->partial ? J_TRUNC : J_ERR;
    size_t i = skip_ws(p, it->pos, n);

    if (i >= n) {
        if (it->partial)
            return iter_fail(it, J_TRUNC);
        it->pos = n + 1;
        return iter_fail(it, 0);
    }
    if (p[i] == close) {
        if (!it->partial)
            return iter_fail(it, J_ERR);
        it->pos = i + 1;
        return iter_fail(it, 0);
    }
    if (!it->first) {
        if (p[i] != ',')
            return iter_fail(it, J_ERR);
        i = skip_ws(p, i + 1, n);
        if (i >= n)
            return iter_fail(it, trunc);
    }

    tg_jspan_t k = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false};
    if (obj) {
        if (p[i] != '"')
            return iter_fail(it, J_ERR);
        long e = scan_string_strict(p, n, i, &k.escaped);
        if (e < 0)
            return iter_fail(it, e == J_TRUNC ? trunc : J_ERR);
        k.off = i;
        k.len = (size_t)e - i;
        k.type = TG_J_STRING;
        i = skip_ws(p, (size_t)e, n);
        if (i >= n)
            return iter_fail(it, trunc);
        if (p[i] != ':')
            return iter_fail(it, J_ERR);
        i++;
    }
    /* The container being iterated is one level of the nesting budget. */
    tg_jspan_t v;
    long e = scan_value(it->buf, n, i, &v, TG_JSCAN_MAX_DEPTH - 1);
    if (e < 0)
        return iter_fail(it, e == J_TRUNC ? trunc : J_ERR);
    /* A number that runs into the cut may have lost digits. */
    if (it->partial && (size_t)e == n && v.type == TG_J_NUMBER)
        return iter_fail(it, J_TRUNC);
    it->pos = (size_t)e;
    it->first = false;
    if (key)
        *key = k;
    if (val)
        *val = v;
    return 1;
}

int tg_jobj_next(tg_jobj_iter_t *it, tg_jspan_t *key, tg_jspan_t *val)
{
    return iter_next(it, true, key, val);
}

int tg_jarr_next(tg_jarr_iter_t *it, tg_jspan_t *val)
{
    return iter_next(it, false, NULL, val);
}

/* ---- strings ---- */

/* Decoder over a string span: yields one code point per call, or -1 at
 * the closing quote, -2 on a malformed or lone-surrogate escape. Raw bytes
 * >= 0x80 are passed through one by one (code points < 0 never collide:
 * they are returned as 0x100 + byte so the caller can re-emit them). */
typedef struct str_dec {
    const unsigned char *p;
    size_t i, n; /* n: offset of the closing quote */
} str_dec_t;

#define DEC_END (-1)
#define DEC_BAD (-2)
#define DEC_RAW 0x200000 /* raw byte marker: DEC_RAW | byte */

static long dec_next(str_dec_t *d)
{
    if (d->i >= d->n)
        return DEC_END;
    unsigned char c = d->p[d->i];
    if (c != '\\') {
        d->i++;
        return c < 0x80 ? (long)c : (long)(DEC_RAW | c);
    }
    if (d->i + 1 >= d->n)
        return DEC_BAD;
    unsigned char e = d->p[d->i + 1];
    d->i += 2;
    switch (e) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'u': break;
    default: return DEC_BAD;
    }
    unsigned cp, lo;
    if (read_u4(d->p, d->i - 1, d->n, &cp) < 0)
        return DEC_BAD;
    d->i += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return DEC_BAD;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (d->i + 1 >= d->n || d->p[d->i] != '\\' || d->p[d->i + 1] != 'u')
            return DEC_BAD;
        if (read_u4(d->p, d->i + 1, d->n, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
            return DEC_BAD;
        d->i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return (long)cp;
}

/* UTF-8 encode <cp> (or re-emit a raw byte) into <out>; returns length. */
static size_t enc_utf8(long cp, unsigned char out[4])
{
    if (cp & DEC_RAW) {
        out[0] = (unsigned char)(cp & 0xFF);
        return 1;
    }
    unsigned long u = (unsigned long)cp;
    if (u < 0x80) {
        out[0] = (unsigned char)u;
        return 1;
    }
    if (u < 0x800) {
        out[0] = (unsigned char)(0xC0 | u >> 6);
        out[1] = (unsigned char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        out[0] = (unsigned char)(0xE0 | u >> 12);
        out[1] = (unsigned char)(0x80 | (u >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (u & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | u >> 18);
    out[1] = (unsigned char)(0x80 | (u >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (u >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (u & 0x3F));
    return 4;
}

static bool dec_init(str_dec_t *d, const char *buf, tg_jspan_t s)
{
    if (s.type != TG_J_STRING || s.len < 2)
        return false;
    d->p = (const unsigned char *)buf;
    d->i = s.off + 1;
    d->n = s.off + s.len - 1;
    return true;
}

/* Compare the decoded string <s> with the bytes [lit, lit+litlen). */
static bool str_eq_n(const char *buf, tg_jspan_t s, const char *lit, size_t litlen)
{
    if (s.type != TG_J_STRING || s.len < 2)
        return false;
    if (!s.escaped)
        return s.len - 2 == litlen && memcmp(buf + s.off + 1, lit, litlen) == 0;
    str_dec_t d;
    dec_init(&d, buf, s);
    size_t j = 0;
    for (;;) {
        long cp = dec_next(&d);
        if (cp == DEC_END)
            return j == litlen;
        if (cp == DEC_BAD)
            return false;
        unsigned char u[4];
        size_t k = enc_utf8(cp, u);
        if (litlen - j < k || memcmp(lit + j, u, k) != 0)
            return false;
        j += k;
    }
}

bool tg_jstr_eq(const char *buf, tg_jspan_t s, const char *lit)
{
    return str_eq_n(buf, s, lit, strlen(lit));
}

long tg_jstr_decode(const char *buf, tg_jspan_t s, char *dst, size_t cap)
{
    str_dec_t d;
    if (cap == 0 || !dec_init(&d, buf, s))
        return -1;
    size_t j = 0;
    for (;;) {
        long cp = dec_next(&d);
        if (cp == DEC_END)
            break;
        if (cp == DEC_BAD || cp == 0)
            return -1;
        unsigned char u[4];
        size_t k = enc_utf8(cp, u);
        if (cap - 1 - j < k)
            return -1;
        memcpy(dst + j, u, k);
        j += k;
    }
    dst[j] = '\0';
    return (long)j;
}

/* ---- numbers ---- */

int tg_jnum_u64(const char *buf, tg_jspan_t n, uint64_t max, uint64_t *out)
{
    if (n.type != TG_J_NUMBER || n.len == 0)
        return -1;
    const unsigned char *p = (const unsigned char *)buf + n.off;
    size_t i = 0;
    /* "-0" is zero, which is what jansson (and JavaScript) make of it. */
    if (p[0] == '-') {
        if (n.len == 2 && p[1] == '0') {
            *out = 0;
            return 0;
        }
        return -1;
    }
    uint64_t v = 0;
    for (; i < n.len; i++) {
        if (!is_digit(p[i]))
            return -1; /* fraction or exponent: not an integer literal */
        unsigned d = p[i] - '0';
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* ---- positions and paths ---- */

void tg_jscan_linecol(const char *buf, size_t len, size_t off, int *line, int *col)
{
    if (off > len)
        off = len;
    int l = 1;
    size_t bol = 0; /* offset of the current line's first byte */
    const char *q = buf;
    const char *stop = buf + off;
    while (q < stop) {
        const char *nl = memchr(q, '\n', (size_t)(stop - q));
        if (!nl)
            break;
        l++;
        bol = (size_t)(nl - buf) + 1;
        q = nl + 1;
    }
    *line = l;
    *col = (int)(off - bol) + 1;
}

/* Parse a path segment as an array index; false when not all digits. */
static bool seg_index(const char *s, size_t n, size_t *idx)
{
    if (n == 0 || n > 18)
        return false;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *idx = v;
    return true;
}

int tg_jscan_find_path(const char *buf, size_t len, const char *path, tg_jspan_t *out)
{
    tg_jspan_t cur;
    if (tg_jscan_value(buf, len, 0, &cur) < 0)
        return -1;
    const char *seg = path;
    while (*seg) {
        const char *dot = strchr(seg, '.');
        size_t sl = dot ? (size_t)(dot - seg) : strlen(seg);
        if (cur.type == TG_J_OBJECT) {
            /* jansson keeps the last of duplicate keys; so do we */
            tg_jobj_iter_t it;
            tg_jspan_t k, v, found = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false};
            int rc;
            tg_jobj_begin(&it, buf, cur);
            while ((rc = tg_jobj_next(&it, &k, &v)) == 1) {
                if (str_eq_n(buf, k, seg, sl))
                    found = v;
            }
            if (rc < 0 || found.type == TG_J_NONE)
                return -1;
            cur = found;
        } else if (cur.type == TG_J_ARRAY) {
            size_t idx, at = 0;
            if (!seg_index(seg, sl, &idx))
                return -1;
            tg_jarr_iter_t it;
            tg_jspan_t v;
            int rc;
            tg_jarr_begin(&it, buf, cur);
            while ((rc = tg_jarr_next(&it, &v)) == 1 && at < idx)
                at++;
            if (rc != 1)
                return -1;
            cur = v;
        } else {
            return -1;
        }
        if (!dot)
            break;
        seg = dot + 1;
    }
    if (out)
        *out = cur;
    return 0;
}
