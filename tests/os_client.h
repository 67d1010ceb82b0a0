/* The OpenSentience caller of the integration tests: length-prefixed JSON
 * frames (a 4-byte big-endian length, then the envelope) over a Unix
 * socket to a `toolgate serve` opensentience listener. Header-only, on top
 * of tests/tg_harness.h; tests/mcp_client.h is the MCP one.
 *
 * Convention: osc_read and osc_await return NULL on timeout or EOF (then
 * <out_eof> is set); the others fail the test themselves, so a test body
 * reads as what it checks.
 */
#ifndef TG_TESTS_OS_CLIENT_H
#define TG_TESTS_OS_CLIENT_H

#include <criterion/criterion.h>

#include "tests/tg_harness.h"

/* One caller connection: a harness connection on one socket (its reader
 * buffers what came and is not yet a whole frame). */
typedef tgh_proc_t osc_t;

/* Connect <c> to the listener at <path>. */
static inline void osc_open(osc_t *c, const char *path)
{
    int rc = tgh_unix_connect(c, path);
    cr_assert_eq(rc, 0, "cannot connect to %s: %s", path, strerror(-rc));
}

static inline void osc_close(osc_t *c)
{
    tgh_conn_close(c);
}

/* Write all of <p>, as it is (no frame header). */
static inline void osc_raw(osc_t *c, const void *p, size_t n)
{
    int rc = tgh_send(c, p, n, 10000);
    cr_assert_eq(rc, 0, "write to toolgate: %s", strerror(-rc));
}

/* <text> as one frame. */
static inline void osc_frame(osc_t *c, const char *text)
{
    size_t n = strlen(text);
    unsigned char h[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    osc_raw(c, h, 4);
    osc_raw(c, text, n);
}

/* core.tool.call <cid> of <tool> with <input> (JSON text; NULL: {}) and
 * <extra> payload members (", \"timeout_ms\": 300" or NULL). */
static inline void osc_call(osc_t *c, const char *cid, const char *tool, const char *input,
                            const char *extra)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m-%s\",\"ts\":\"2026-01-16T12:00:00Z\","
             "\"request_id\":\"req-%s\",\"correlation_id\":\"corr-%s\","
             "\"payload\":{\"call_id\":\"%s\",\"tool_id\":\"%s\",\"input\":%s%s}}",
             cid, cid, cid, cid, tool, input ? input : "{}", extra ? extra : "");
    osc_frame(c, buf);
}

static inline void osc_cancel(osc_t *c, const char *cid)
{
    char buf[512];
    snprintf(
        buf, sizeof buf,
        "{\"v\":1,\"type\":\"core.tool.cancel\",\"id\":\"x-%s\",\"ts\":\"2026-01-16T12:00:00Z\","
        "\"payload\":{\"call_id\":\"%s\",\"reason\":\"user\"}}",
        cid, cid);
    osc_frame(c, buf);
}

/* The next frame as JSON; NULL on timeout or EOF (c->out_eof). A frame
 * that is not JSON fails the test. */
static inline json_t *osc_read(osc_t *c, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (c->rlen >= 4) {
            const unsigned char *u = (const unsigned char *)c->rbuf;
            size_t n = (size_t)u[0] << 24 | (size_t)u[1] << 16 | (size_t)u[2] << 8 | u[3];
            if (c->rlen - 4 >= n) {
                json_error_t je;
                json_t *v = json_loadb(c->rbuf + 4, n, 0, &je);
                cr_assert_not_null(v, "a frame from toolgate is not JSON: %.*s", (int)n,
                                   c->rbuf + 4);
                memmove(c->rbuf, c->rbuf + 4 + n, c->rlen - 4 - n);
                c->rlen -= 4 + n;
                return v;
            }
        }
        if (c->out_eof || tgh_read_more(c, deadline) < 0)
            return NULL;
    }
}

/* The string at <m>.<a> (or <m>.<a>.<b> when <b> is non-NULL), or NULL. */
static inline const char *osc_str(const json_t *m, const char *a, const char *b)
{
    const json_t *v = json_object_get(m, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_string_value(v);
}

/* error.code of a result, or NULL. */
static inline const char *osc_code_of(const json_t *m)
{
    return osc_str(m, "error", "code");
}

static inline json_int_t osc_detail_int(const json_t *m, const char *key)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(m, "error"), "details"), key));
}

static inline const char *osc_detail_str(const json_t *m, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(m, "error"), "details"), key));
}

/* Read until the agent.tool.result of <cid>; streams for it are counted
 * in <*streams> (may be NULL); other frames are dropped. */
static inline json_t *osc_await(osc_t *c, const char *cid, int timeout_ms, int *streams)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        json_t *m = osc_read(c, tgh_left(deadline));
        if (m == NULL)
            return NULL;
        const char *type = osc_str(m, "type", NULL);
        const char *mc = osc_str(m, "payload", "call_id");
        if (type && strcmp(type, "agent.tool.result") == 0 && mc && strcmp(mc, cid) == 0)
            return m;
        if (streams && type && strcmp(type, "agent.tool.stream") == 0 && mc && strcmp(mc, cid) == 0)
            (*streams)++;
        json_decref(m);
    }
}

/* A call answered "succeeded": returns its output (a new reference). */
static inline json_t *osc_ok_call(osc_t *c, const char *cid, const char *tool, const char *input)
{
    osc_call(c, cid, tool, input, NULL);
    json_t *r = osc_await(c, cid, 10000, NULL);
    cr_assert_not_null(r, "no result for %s", cid);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded", "%s: %s", cid,
                     json_dumps(r, JSON_COMPACT));
    json_t *out = json_incref(json_object_get(json_object_get(r, "payload"), "output"));
    json_decref(r);
    return out;
}

/* A call refused by toolgate with <code>: returns the result. */
static inline json_t *osc_denied_call(osc_t *c, const char *cid, const char *tool,
                                      const char *input, const char *extra, const char *code)
{
    osc_call(c, cid, tool, input, extra);
    json_t *r = osc_await(c, cid, 10000, NULL);
    cr_assert_not_null(r, "no answer for %s", cid);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "failed", "%s: %s", cid,
                     json_dumps(r, JSON_COMPACT));
    cr_assert_str_eq(osc_code_of(r), code, "%s: %s", cid, json_dumps(r, JSON_COMPACT));
    cr_assert_str_eq(osc_str(r, "error", "where"), "toolgate.router");
    return r;
}

#endif
