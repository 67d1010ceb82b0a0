/* jscan: a pure byte-span JSON scanner (no allocation, no libuv).
 *
 * It finds the boundaries of JSON values and the members of objects, and
 * walks nested values without recording them (bounded depth). It is the
 * envelope scanner's engine (router/envelope.c) and locates JSON paths in
 * config text for error messages (config/load.c); it lives here, in the
 * bottom layer, so both share one scanner.
 *
 * Validation: whatever it scans is validated strictly (RFC 8259), nested
 * values included: strings (escapes, surrogates, UTF-8), numbers,
 * literals, commas and colons, and depth <= TG_JSCAN_MAX_DEPTH. So a
 * frame the envelope scanner accepts is valid JSON throughout.
 * Invariant tested against jansson: whatever jansson accepts (within the
 * depth bound), jscan accepts with the same spans, and the other way round.
 */
#ifndef TG_CONFIG_JSCAN_H
#define TG_CONFIG_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_JSCAN_MAX_DEPTH 128 /* fixed internal bound: nesting of a scanned value */

typedef enum tg_jtype {
    TG_J_NONE = 0,
    TG_J_OBJECT,
    TG_J_ARRAY,
    TG_J_STRING,
    TG_J_NUMBER,
    TG_J_TRUE,
    TG_J_FALSE,
    TG_J_NULL,
} tg_jtype_t;

/* A value: [off, off+len) in the scanned buffer. For strings the span
 * includes the quotes; <escaped> is true when the string holds a '\\'. */
typedef struct tg_jspan {
    size_t off;
    size_t len;
    tg_jtype_t type;
    bool escaped;
} tg_jspan_t;

/* Scan one value starting at or after <pos> (leading whitespace skipped).
 * Returns the offset just past the value (>= 0) and fills <*out>, or -1 on
 * malformed input and -2 when the buffer ends before the value does
 * (truncated). */
long tg_jscan_value(const char *buf, size_t len, size_t pos, tg_jspan_t *out);

/* Object member iteration over the object <obj> (type TG_J_OBJECT).
 * Keys and scalar values are validated strictly; nested containers are
 * skipped, the iterated object counting as one level of
 * TG_JSCAN_MAX_DEPTH (so iterating a document from its top bounds it as
 * tg_jscan_value does). Once next() has returned 0 or an error it keeps
 * returning it; after 0, <pos> is the offset just past the closing brace.
 * The iterator borrows <buf>; nothing to free. */
typedef struct tg_jobj_iter {
    const char *buf;
    size_t end;      /* closing bracket offset, or the limit up to which it is searched */
    size_t pos;
    size_t open_at;  /* offset of the opening bracket */
    unsigned depth;  /* nesting budget of member values */
    bool first;
    bool partial;    /* the buffer may be cut at <end>: running out is truncation */
    bool open;       /* the closing bracket is not located yet: iteration finds it */
    bool pending;    /* tg_jobj_key returned a member whose value is not consumed */
    int state;       /* 1 iterating, else the sticky result of next() */
} tg_jobj_iter_t;

void tg_jobj_begin(tg_jobj_iter_t *it, const char *buf, tg_jspan_t obj);
/* 1: a member (key span is a string span, val its value); 0: end;
 * -1: malformed. */
int tg_jobj_next(tg_jobj_iter_t *it, tg_jspan_t *key, tg_jspan_t *val);

/* Single-pass descent, for scanners that read a member's object value
 * while walking its parent (the envelope scanner reads tools/call params
 * without skipping them first). tg_jobj_next is tg_jobj_key followed by
 * tg_jobj_value.
 *
 * tg_jobj_key: 1 and the next member's <key> with its value not consumed
 * yet; 0 at the end; <0 malformed (-2: cut, partial iteration only). Then
 * one of (or neither: the next tg_jobj_key skips the value first):
 *   tg_jobj_value: scan or skip the value as tg_jobj_next does: 0 and
 *     <val> (may be NULL), or <0 (sticky, as next() would return);
 *   tg_jobj_enter: when the value is an object, begin iterating it in place
 *     into <child> (its members are validated as in any iteration; the
 *     nesting budget goes down one level) and return 1; the parent is
 *     suspended until tg_jobj_leave. 0 when the value is not an object
 *     (call tg_jobj_value), <0 when the bytes end first.
 * tg_jobj_leave: once <child> has returned 0 from key/next, the parent
 * resumes just past it and <val> spans the object: 0. When <child> failed
 * (or was left before its end), its error becomes the parent's: <0. */
int tg_jobj_key(tg_jobj_iter_t *it, tg_jspan_t *key);
int tg_jobj_value(tg_jobj_iter_t *it, tg_jspan_t *val);
int tg_jobj_enter(tg_jobj_iter_t *it, tg_jobj_iter_t *child);
int tg_jobj_leave(tg_jobj_iter_t *it, const tg_jobj_iter_t *child, tg_jspan_t *val);

/* Call <fn> on every member of an object, in order. <fn> returns >= 0 to
 * go on, < 0 to refuse the member (iteration stops there); <key> and <val>
 * are spans in <buf>, the iterated buffer. */
typedef int (*tg_jmember_fn)(void *ctx, const char *buf, tg_jspan_t key, tg_jspan_t val);

/* True when [buf+i, buf+len) is JSON white space only (what may follow
 * a frame's one value). */
static inline bool tg_json_blank_from(const char *buf, size_t len, size_t i)
{
    for (; i < len; i++) {
        char c = buf[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return false;
    }
    return true;
}

/* tg_jobj_each_it: call <fn>(<ctx>, ...) on every member left in <it> (as
 * tg_jobj_next yields them). Returns 0 at the closing brace, or -1 when the
 * object is malformed or cut (-2 from a partial iteration included) or <fn>
 * refused a member. Inline on purpose: the envelope scanners run it per
 * frame with a constant <fn>, which is then called directly. */
static inline int tg_jobj_each_it(tg_jobj_iter_t *it, tg_jmember_fn fn, void *ctx)
{
    tg_jspan_t k, v;
    int rc;
    while ((rc = tg_jobj_next(it, &k, &v)) == 1) {
        if (fn(ctx, it->buf, k, v) < 0)
            return -1;
    }
    return rc == 0 ? 0 : -1;
}

/* tg_jobj_each: tg_jobj_each_it over the object <obj> of <buf>, from its
 * first member. */
static inline int tg_jobj_each(const char *buf, tg_jspan_t obj, tg_jmember_fn fn, void *ctx)
{
    tg_jobj_iter_t it;
    tg_jobj_begin(&it, buf, obj);
    return tg_jobj_each_it(&it, fn, ctx);
}

/* Element iteration over the array <arr> (type TG_J_ARRAY), same rules:
 * 1 and the element's span, 0 at the end, -1 malformed. */
typedef tg_jobj_iter_t tg_jarr_iter_t;
void tg_jarr_begin(tg_jarr_iter_t *it, const char *buf, tg_jspan_t arr);
int tg_jarr_next(tg_jarr_iter_t *it, tg_jspan_t *val);

/* Like tg_jscan_value over a buffer that may be cut anywhere (e.g. the
 * head of an over-cap frame): iterate the top-level object's members as far
 * as the bytes go. tg_jobj_next returns -2 at the truncation point (also
 * for a number that runs into the cut: digits may be missing). Returns 0,
 * -1 when the first non-blank byte is not '{', -2 when there is none. */
int tg_jobj_begin_partial(tg_jobj_iter_t *it, const char *buf, size_t len, size_t pos);

/* True when the string span <s> decodes to exactly <lit> (escapes decoded). */
bool tg_jstr_eq(const char *buf, tg_jspan_t s, const char *lit);

/* Decode the string span <s> into <dst> (capacity <cap>, NUL-terminated,
 * UTF-8). Returns the decoded length, or -1 when it does not fit or holds
 * a NUL (\u0000) or a malformed escape / lone surrogate. Raw bytes are
 * copied as they are (the scanner validated UTF-8 where it scanned). */
long tg_jstr_decode(const char *buf, tg_jspan_t s, char *dst, size_t cap);

/* Parse a number span as a non-negative integer <= max. 0 or -1. Only
 * integer literals qualify ("1.0" and "1e3" do not); "-0" is 0, as jansson
 * reads it. */
int tg_jnum_u64(const char *buf, tg_jspan_t n, uint64_t max, uint64_t *out);

/* 1-based line and column (in bytes) of offset <off>. */
void tg_jscan_linecol(const char *buf, size_t len, size_t off, int *line, int *col);

/* Locate a dotted path ("agents.0.execution_limits.rate_limit"; array
 * elements by index) in the document <buf>. Returns 0 and the value span,
 * or -1 when the path is not present. An empty path is the whole
 * document; of duplicate keys the last wins, as in jansson. */
int tg_jscan_find_path(const char *buf, size_t len, const char *path, tg_jspan_t *out);

/* The value of hex digit <c> (either case), or -1. */
static inline int tg_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
