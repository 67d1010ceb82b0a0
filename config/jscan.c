/* jscan: byte-span JSON scanner (see jscan.h for the contract).
 *
 * One grammar. Every byte of a scanned value is validated (RFC 8259,
 * including UTF-8 and \u surrogate checks), the scanned level (a scalar
 * handed to tg_jscan_value, the keys and scalar values of an iterated
 * object or array) and the containers below it alike, so any span this
 * file reports can be trusted by its caller (ids are copied raw into
 * replies, frames forwarded whole). Strings, where a frame's bytes mostly
 * are, are searched 16 bytes at a time with SSE2 (8 with a portable SWAR
 * fallback), and past their first 16 bytes 64 at a time with AVX2 when
 * the CPU has it. Containers below the scanned level are walked without
 * recursion, their brackets matched on a bit stack of TG_JSCAN_MAX_DEPTH
 * entries.
 *
 * Hot path: every frame toolgate relays is scanned here (twice per call:
 * request and response), so the per-member steps are inlined and the
 * common case of each (compact JSON, short ASCII strings) comes first.
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

/* TG_JSCAN_PORTABLE (a test build's choice) keeps the portable code on
 * x86 too, so that it is tested where the tests run. */
#if defined(__SSE2__) && !defined(TG_JSCAN_PORTABLE)
#include <emmintrin.h>
#define TG_JSCAN_SSE2 1
#endif
#if defined(TG_JSCAN_SSE2) && defined(__x86_64__) && defined(__GNUC__)
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

#ifdef TG_JSCAN_SSE2

static inline size_t first_bit(unsigned m)
{
    return (size_t)__builtin_ctz(m);
}

/* First index >= <i> (and < <n>) holding a string stop byte, or <n>. */
static inline __attribute__((always_inline)) size_t str_next_stop(const unsigned char *p, size_t i,
                                                                 size_t n, bool strict)
{
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1f);
    while (n - i >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash));
        /* x <= 0x1f (unsigned) <=> min(x, 0x1f) == x */
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x));
        if (strict)
            hit = _mm_or_si128(hit, x); /* a byte >= 0x80 is its own high bit */
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m)
            return i + first_bit(m);
        i += 16;
    }
    while (i < n && !str_stop(p[i], strict))
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

#endif

static inline bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Frames between toolgate and its peers are mostly compact: the first
 * test rejects every byte above the space at once. */
static inline size_t skip_ws(const unsigned char *p, size_t i, size_t n)
{
    while (i < n && p[i] <= ' ' && is_ws(p[i]))
        i++;
    return i;
}

/* Move <*i> past blanks to the next token: false when the buffer ends
 * first. The usual case, a byte above the space right there, is one test
 * whose load the caller's next look at p[*i] reuses (the hot steps run it
 * several times per member; skip_ws and a separate end test cost twice
 * that). */
static inline __attribute__((always_inline)) bool at_token(const unsigned char *p, size_t *i,
                                                           size_t n)
{
    if (__builtin_expect(*i < n && p[*i] > ' ', 1))
        return true;
    *i = skip_ws(p, *i, n);
    return *i < n;
}

/* Read the 4 hex digits after "\u" at p[i] (i points at the 'u').
 * 0 and *cp, J_ERR or J_TRUNC. */
static int read_u4(const unsigned char *p, size_t i, size_t n, unsigned *cp)
{
    unsigned v = 0;
    for (size_t k = 1; k <= 4; k++) {
        if (i + k >= n)
            return J_TRUNC;
        int h = tg_hexval(p[i + k]);
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

#ifdef TG_JSCAN_AVX2
/* The string scan past the first 16 bytes (large tool arguments and
 * results), 64 bytes at a time with AVX2, chosen at run time: it is the
 * one loop whose cost grows with frame size, and it sets how close a
 * 1 MiB frame gets to a plain pipe. Same stops as str_next_stop(.., true):
 * non-ASCII bytes stop it too, to be validated as UTF-8. */
__attribute__((target("avx2"))) static size_t str_skip_avx2(const unsigned char *p, size_t i,
                                                             size_t n)
{
    const __m256i quote = _mm256_set1_epi8('"');
    const __m256i bslash = _mm256_set1_epi8('\\');
    const __m256i ctl = _mm256_set1_epi8(0x1f);
    while (n - i >= 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32));
        /* a byte >= 0x80 is its own sign bit: or-ing it in flags it */
        __m256i ha = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(a, quote), _mm256_cmpeq_epi8(a, bslash)),
            _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(a, ctl), a), a));
        __m256i hb = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(b, quote), _mm256_cmpeq_epi8(b, bslash)),
            _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(b, ctl), b), b));
        unsigned ma = (unsigned)_mm256_movemask_epi8(ha);
        unsigned mb = (unsigned)_mm256_movemask_epi8(hb);
        if ((ma | mb) != 0)
            return ma ? i + (size_t)__builtin_ctz(ma) : i + 32 + (size_t)__builtin_ctz(mb);
        i += 64;
    }
    return str_next_stop(p, i, n, true);
}

/* Whether this CPU has AVX2, asked once (every thread computes the same
 * answer, so a race on the cache is harmless). */
static bool have_avx2(void)
{
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    return avx2 == 1;
}

static size_t str_skip_next(const unsigned char *p, size_t i, size_t n)
{
    return have_avx2() ? str_skip_avx2(p, i, n) : str_next_stop(p, i, n, true);
}
#else
static size_t str_skip_next(const unsigned char *p, size_t i, size_t n)
{
    return str_next_stop(p, i, n, true);
}
#endif

/* Strict string from <i>, inside it (past the opening quote, an escape
 * or a UTF-8 sequence). */
static long string_strict_rest(const unsigned char *p, size_t n, size_t i, bool *escaped)
{
    for (;;) {
        i = str_skip_next(p, i, n);
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

/* Strict string: <i> at the opening quote. Keys and envelope values are
 * short plain ASCII, so the first stop is usually the closing quote: that
 * case is inlined into the callers, the rest is string_strict_rest. */
static inline __attribute__((always_inline)) long scan_string_strict(const unsigned char *p,
                                                                     size_t n, size_t i,
                                                                     bool *escaped)
{
    size_t j = str_next_stop(p, i + 1, n, true);
    if (j < n && p[j] == '"')
        return (long)(j + 1);
    return string_strict_rest(p, n, j, escaped);
}

static inline bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Nonzero bytes where the 8 bytes of <v> (memory order) are not ASCII
 * digits: a byte is a digit iff its high nibble is 3 both before and after
 * adding 6. A carry out of a non-digit byte can only disturb the bytes
 * after it, so the lowest flagged byte is always right. */
static inline uint64_t nondigits8(uint64_t v)
{
    const uint64_t hi = 0xF0F0F0F0F0F0F0F0ULL, three = 0x3030303030303030ULL;
    return ((v & hi) ^ three) | (((v + 0x0606060606060606ULL) & hi) ^ three);
}

/* First index >= <i> that is not an ASCII digit, or <n>. Ids and sizes
 * run to ten digits and more, so eight are checked at once when the
 * buffer has them. */
static inline size_t digits_end(const unsigned char *p, size_t i, size_t n)
{
    while (n - i >= 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        uint64_t bad = nondigits8(v);
        if (bad != 0) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return i + (size_t)__builtin_ctzll(bad) / 8;
#else
            return i + (size_t)__builtin_clzll(bad) / 8;
#endif
        }
        i += 8;
    }
    while (i < n && is_digit(p[i]))
        i++;
    return i;
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
        i = digits_end(p, i + 1, n);
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

/* ---- validating containers below the scanned level ---- */

/* A container below the scanned level, validated in one pass: <i> at '{'
 * or '['. The whole RFC 8259 grammar holds, as at the scanned level
 * (strings with their escapes and UTF-8, number and literal spelling,
 * commas and colons), and brackets nest at most <maxdepth> deep, kept on
 * a bit stack (1 = object). Nothing is recorded: the caller gets the
 * span. Strings go through the same scanner as keys (16 bytes, then 64
 * with AVX2, at a time), so a large argument costs about what its
 * string bytes cost. Not inlined on purpose: kept out of the flattened
 * envelope scan, it runs in registers of its own (about 180 instructions
 * less per small call than inlined, tests/bench/callgrind_calls.py). */
__attribute__((noinline)) static long skip_container(const unsigned char *p, size_t n, size_t i,
                                                    size_t maxdepth)
{
    /* The innermost 64 levels' bits in a register (bit 0: the innermost);
     * each full word of outer levels is spilled to <stack>. */
    uint64_t stack[(TG_JSCAN_MAX_DEPTH + 63) / 64];
    uint64_t bits = 0;
    size_t depth = 0;
    bool obj; /* the innermost open container is an object */
    bool escaped;
    long e;

open:
    if (depth >= maxdepth)
        return J_ERR;
    obj = p[i] == '{';
    if (depth > 0 && depth % 64 == 0) {
        stack[depth / 64 - 1] = bits;
        bits = 0;
    }
    bits = bits << 1 | obj;
    depth++;
    i++;
    if (!at_token(p, &i, n))
        return J_TRUNC;
    if (p[i] == (obj ? '}' : ']'))
        goto close;
    for (;;) {
        /* an element: in an object, its key and colon first */
        if (obj) {
            if (p[i] != '"')
                return J_ERR;
            e = scan_string_strict(p, n, i, &escaped);
            if (e < 0)
                return e;
            i = (size_t)e;
            if (!at_token(p, &i, n))
                return J_TRUNC;
            if (p[i] != ':')
                return J_ERR;
            i++;
            if (!at_token(p, &i, n))
                return J_TRUNC;
        }
        switch (p[i]) {
        case '{':
        case '[':
            goto open;
        case '"':
            e = scan_string_strict(p, n, i, &escaped);
            break;
        case 't':
            e = scan_literal(p, n, i, "true");
            break;
        case 'f':
            e = scan_literal(p, n, i, "false");
            break;
        case 'n':
            e = scan_literal(p, n, i, "null");
            break;
        default:
            e = scan_number(p, n, i);
            break;
        }
        if (e < 0)
            return e;
        i = (size_t)e;
    next:
        /* after an element: a comma, or the close of its container */
        if (!at_token(p, &i, n))
            return J_TRUNC;
        if (p[i] == ',') {
            i++;
            if (!at_token(p, &i, n))
                return J_TRUNC;
            continue;
        }
        if (p[i] != (obj ? '}' : ']'))
            return J_ERR;
    close:
        if (--depth == 0)
            return (long)(i + 1);
        bits >>= 1;
        if (depth % 64 == 0)
            bits = stack[depth / 64 - 1];
        obj = bits & 1;
        i++;
        goto next;
    }
}

/* tg_jscan_value with the nesting budget of the level being scanned;
 * <out> is always filled (garbage on error). Inlined into the iteration
 * step: it runs once per member of every frame. */
static inline __attribute__((always_inline)) long scan_value(const char *buf, size_t len,
                                                             size_t pos, tg_jspan_t *out,
                                                             size_t maxdepth)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = pos;
    if (!at_token(p, &i, len))
        return J_TRUNC;
    long e;
    out->off = i;
    out->escaped = false;
    switch (p[i]) {
    case '"':
        out->type = TG_J_STRING;
        e = scan_string_strict(p, len, i, &out->escaped);
        break;
    case '{':
        out->type = TG_J_OBJECT;
        e = skip_container(p, len, i, maxdepth);
        break;
    case '[':
        out->type = TG_J_ARRAY;
        e = skip_container(p, len, i, maxdepth);
        break;
    case 't':
        out->type = TG_J_TRUE;
        e = scan_literal(p, len, i, "true");
        break;
    case 'f':
        out->type = TG_J_FALSE;
        e = scan_literal(p, len, i, "false");
        break;
    case 'n':
        out->type = TG_J_NULL;
        e = scan_literal(p, len, i, "null");
        break;
    default:
        out->type = TG_J_NUMBER;
        e = scan_number(p, len, i);
        break;
    }
    out->len = (size_t)e - i;
    return e;
}

long tg_jscan_value(const char *buf, size_t len, size_t pos, tg_jspan_t *out)
{
    tg_jspan_t v;
    long e = scan_value(buf, len, pos, &v, TG_JSCAN_MAX_DEPTH);
    if (e >= 0 && out)
        *out = v;
    return e;
}

/* ---- container iteration ---- */

/* Common begin: <it> walks the container whose opening bracket is at
 * <open_at>. Closed: <end> is the closing bracket's offset (a skip already
 * matched the brackets). Open: the closing bracket is a byte to be found
 * before <end>, the buffer's end (partial) or the parent's limit (a child
 * entered by tg_jobj_enter). */
static void iter_init(tg_jobj_iter_t *it, const char *buf, size_t open_at, size_t end,
                      bool partial, bool open, unsigned depth)
{
    it->buf = buf;
    it->end = end;
    it->pos = open_at + 1;
    it->open_at = open_at;
    it->depth = depth;
    it->first = true;
    it->partial = partial;
    it->open = open;
    it->pending = false;
    it->state = 1;
}

void tg_jobj_begin(tg_jobj_iter_t *it, const char *buf, tg_jspan_t obj)
{
    iter_init(it, buf, obj.off, obj.off + obj.len - 1, false, false, TG_JSCAN_MAX_DEPTH - 1);
    if (obj.type != TG_J_OBJECT || obj.len < 2)
        it->state = J_ERR;
}

void tg_jarr_begin(tg_jarr_iter_t *it, const char *buf, tg_jspan_t arr)
{
    iter_init(it, buf, arr.off, arr.off + arr.len - 1, false, false, TG_JSCAN_MAX_DEPTH - 1);
    if (arr.type != TG_J_ARRAY || arr.len < 2)
        it->state = J_ERR;
}

int tg_jobj_begin_partial(tg_jobj_iter_t *it, const char *buf, size_t len, size_t pos)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = skip_ws(p, pos, len);
    iter_init(it, buf, i, len, true, true, TG_JSCAN_MAX_DEPTH - 1);
    if (i >= len)
        it->state = J_TRUNC;
    else if (p[i] != '{')
        it->state = J_ERR;
    return it->state < 0 ? it->state : 0;
}

static int iter_fail(tg_jobj_iter_t *it, int rc)
{
    it->state = rc;
    it->pending = false;
    return rc;
}

/* What running out of bytes inside the container means: truncation when
 * the buffer may be cut, else malformed (a complete container, or a child
 * of one, ended early). */
static inline int iter_trunc(const tg_jobj_iter_t *it)
{
    return it->partial ? J_TRUNC : J_ERR;
}

/* Step to the next element of the container: 1 with <pos> at its first
 * byte, 0 at the closing bracket <close>, <0 malformed. */
static inline __attribute__((always_inline)) int elem_start(tg_jobj_iter_t *it,
                                                            unsigned char close)
{
    const unsigned char *p = (const unsigned char *)it->buf;
    const size_t n = it->end;
    size_t i = it->pos;

    if (!at_token(p, &i, n)) {
        if (it->open)
            return iter_fail(it, iter_trunc(it));
        it->pos = n + 1;
        return iter_fail(it, 0);
    }
    if (p[i] == close) {
        /* In a closed container the bracket at <end> is the only close. */
        if (!it->open)
            return iter_fail(it, J_ERR);
        it->pos = i + 1;
        return iter_fail(it, 0);
    }
    if (!it->first) {
        if (p[i] != ',')
            return iter_fail(it, J_ERR);
        i++;
        if (!at_token(p, &i, n))
            return iter_fail(it, iter_trunc(it));
    }
    it->pos = i;
    return 1;
}

/* Scan the element value at <pos> within the nesting budget into <v>:
 * 0 or <0. */
static inline __attribute__((always_inline)) int value_step(tg_jobj_iter_t *it, tg_jspan_t *v)
{
    long e = scan_value(it->buf, it->end, it->pos, v, it->depth);
    if (e < 0)
        return iter_fail(it, e == J_TRUNC ? iter_trunc(it) : J_ERR);
    /* A number that runs into the cut may have lost digits. */
    if (it->partial && (size_t)e == it->end && v->type == TG_J_NUMBER)
        return iter_fail(it, J_TRUNC);
    it->pos = (size_t)e;
    it->first = false;
    it->pending = false;
    return 0;
}

int tg_jobj_key(tg_jobj_iter_t *it, tg_jspan_t *key)
{
    if (it->state <= 0)
        return it->state;
    /* A key whose value was never consumed: skip that value first. */
    tg_jspan_t skipped;
    if (it->pending && value_step(it, &skipped) < 0)
        return it->state;
    int rc = elem_start(it, '}');
    if (rc <= 0)
        return rc;
    const unsigned char *p = (const unsigned char *)it->buf;
    const size_t n = it->end;
    size_t i = it->pos;
    if (p[i] != '"')
        return iter_fail(it, J_ERR);
    bool escaped = false;
    long e = scan_string_strict(p, n, i, &escaped);
    if (e < 0)
        return iter_fail(it, e == J_TRUNC ? iter_trunc(it) : J_ERR);
    size_t c = (size_t)e;
    if (!at_token(p, &c, n))
        return iter_fail(it, iter_trunc(it));
    if (p[c] != ':')
        return iter_fail(it, J_ERR);
    it->pos = c + 1;
    it->pending = true;
    if (key) {
        key->off = i;
        key->len = (size_t)e - i;
        key->type = TG_J_STRING;
        key->escaped = escaped;
    }
    return 1;
}

int tg_jobj_value(tg_jobj_iter_t *it, tg_jspan_t *val)
{
    if (it->state <= 0)
        return it->state;
    if (!it->pending)
        return iter_fail(it, J_ERR); /* no key read: a caller's mistake, made sticky */
    tg_jspan_t v;
    if (value_step(it, val ? val : &v) < 0)
        return it->state;
    return 0;
}

int tg_jobj_next(tg_jobj_iter_t *it, tg_jspan_t *key, tg_jspan_t *val)
{
    tg_jspan_t k = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false}, v;
    int rc = tg_jobj_key(it, &k);
    if (rc <= 0)
        return rc;
    if (value_step(it, val ? val : &v) < 0)
        return it->state;
    if (key)
        *key = k;
    return 1;
}

int tg_jobj_enter(tg_jobj_iter_t *it, tg_jobj_iter_t *child)
{
    if (it->state <= 0)
        return it->state;
    if (!it->pending)
        return iter_fail(it, J_ERR);
    const unsigned char *p = (const unsigned char *)it->buf;
    size_t i = it->pos;
    if (!at_token(p, &i, it->end))
        return iter_fail(it, iter_trunc(it));
    if (p[i] != '{')
        return 0;
    /* The object is one level of the budget its value had. */
    if (it->depth == 0)
        return iter_fail(it, J_ERR);
    iter_init(child, it->buf, i, it->end, it->partial, true, it->depth - 1);
    return 1;
}

int tg_jobj_leave(tg_jobj_iter_t *it, const tg_jobj_iter_t *child, tg_jspan_t *val)
{
    if (it->state <= 0)
        return it->state;
    if (!it->pending)
        return iter_fail(it, J_ERR);
    if (child->state != 0)
        return iter_fail(it, child->state < 0 ? child->state : J_ERR);
    it->pos = child->pos;
    it->first = false;
    it->pending = false;
    if (val) {
        val->off = child->open_at;
        val->len = child->pos - child->open_at;
        val->type = TG_J_OBJECT;
        val->escaped = false;
    }
    return 0;
}

int tg_jarr_next(tg_jarr_iter_t *it, tg_jspan_t *val)
{
    if (it->state <= 0)
        return it->state;
    int rc = elem_start(it, ']');
    if (rc <= 0)
        return rc;
    tg_jspan_t v;
    if (value_step(it, val ? val : &v) < 0)
        return it->state;
    return 1;
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
    if (!s.escaped) {
        /* No backslash: the bytes are the text (a scanned string holds no
         * raw NUL: control bytes are rejected). */
        size_t n = s.len - 2;
        if (n > cap - 1 || memchr(buf + s.off + 1, '\0', n) != NULL)
            return -1;
        memcpy(dst, buf + s.off + 1, n);
        dst[n] = '\0';
        return (long)n;
    }
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
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Eight digits at a time while no overflow is possible (D. Lemire's
     * SWAR conversion): request ids are ten digits in many clients. */
    if (n.len <= 19) {
        while (n.len - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (nondigits8(w) != 0)
                return -1;
            w = ((w & 0x0F0F0F0F0F0F0F0FULL) * 2561) >> 8;
            w = ((w & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
            w = ((w & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
            v = v * 100000000 + w;
            i += 8;
        }
    }
#endif
    for (; i < n.len; i++) {
        if (!is_digit(p[i]))
            return -1; /* fraction or exponent: not an integer literal */
        unsigned d = p[i] - '0';
        /* Nineteen digits always fit; past them, v * 10 + d <= UINT64_MAX
         * is checked without a division. */
        if (i >= 19 && (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10)))
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
