/* The oracle base of both dialects' envelope oracles (tests/mcp_oracle.h,
 * tests/os_oracle.h), shared with the fuzz targets (tests/fuzz/): jansson
 * parses the bytes on its own, and each span a toolgate scanner reports
 * is checked to lie inside the buffer and to re-parse to jansson's value.
 *
 * What a dialect oracle adds is its envelope rules applied to jansson's
 * tree; what it returns is NULL when the scanner agrees, else a
 * description of the disagreement (oracle_fail, in one static buffer).
 */
#ifndef TG_TESTS_JSON_ORACLE_H
#define TG_TESTS_JSON_ORACLE_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config/jscan.h"

#define ORACLE_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)

static char oracle_msg[256];

/* <what> as the disagreement found; printf-style. */
__attribute__((format(printf, 1, 2))) static inline const char *oracle_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(oracle_msg, sizeof oracle_msg, fmt, ap);
    va_end(ap);
    return oracle_msg;
}

/* Nesting depth of <j>: 0 for a scalar, 1 for a flat object or array. */
static inline size_t oracle_depth(const json_t *j)
{
    size_t d = 0;
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            size_t x = oracle_depth(v);
            if (x > d)
                d = x;
        }
        return d + 1;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            size_t x = oracle_depth(v);
            if (x > d)
                d = x;
        }
        return d + 1;
    }
    return 0;
}

static inline bool oracle_span_inside(tg_jspan_t s, size_t len)
{
    return s.type == TG_J_NONE || (s.off <= len && s.len <= len - s.off);
}

/* True when the span is inside [0, len) and re-parses to <want>; an
 * absent span matches an absent <want>. */
static inline bool oracle_span_is(const char *buf, size_t len, tg_jspan_t s, const json_t *want)
{
    if (s.type == TG_J_NONE)
        return want == NULL;
    if (want == NULL || s.off > len || s.len > len - s.off || s.len == 0)
        return false;
    json_t *got = json_loadb(buf + s.off, s.len, ORACLE_FLAGS, NULL);
    bool eq = got && json_equal(got, want);
    json_decref(got);
    return eq;
}

/* jansson's tree of <buf>, or NULL when it is no reference: jansson
 * rejects the bytes (then anything memory-safe goes), or they hold a NUL.
 * jansson 2.14 drops a NUL byte that directly follows a number or a
 * literal (its lexer's unget treats NUL as "buffer empty"), so it accepts
 * "1\0" and "{\"a\":1.0\0}"; a raw NUL is never valid JSON. */
static inline json_t *oracle_reference(const char *buf, size_t len)
{
    if (memchr(buf, 0, len))
        return NULL;
    return json_loadb(buf, len, ORACLE_FLAGS, NULL);
}

#endif
