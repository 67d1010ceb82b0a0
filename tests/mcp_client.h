/* The MCP caller of the integration tests: JSON-RPC over newline-delimited
 * JSON, on a tg_harness.h connection (a child's stdin/stdout for
 * `toolgate wrap`, a Unix socket for `toolgate serve`). Header-only, on top
 * of tests/tg_harness.h; tests/os_client.h is the OpenSentience one.
 *
 * Convention: mcp_send*, mcp_call* and mcp_await* return as the harness
 * does (0 or a negative errno; a message, or NULL on timeout or EOF);
 * mcp_expect*, mcp_init_ok and mcp_assert* fail the test themselves,
 * so a test body reads as what it checks.
 */
#ifndef TG_TESTS_MCP_CLIENT_H
#define TG_TESTS_MCP_CLIENT_H

#include <criterion/criterion.h>

#include "tests/tg_harness.h"

#define MCP_INITIALIZE                                                                             \
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"                         \
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"                                      \
    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"
#define MCP_INITIALIZED "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"

/* A caller connection <c> to the MCP listener at <path> (toolgate serve);
 * close it with tgh_conn_close. */
static inline void mcp_connect(tgh_proc_t *c, const char *path)
{
    int rc = tgh_unix_connect(c, path);
    cr_assert_eq(rc, 0, "cannot connect to %s: %s", path, strerror(-rc));
}

/* ---- sending ------------------------------------------------------------ */

/* Send a tools/call with integer id <id>, tool <tool> and <args_json>
 * (raw JSON text for params.arguments; NULL for {}). */
static inline int mcp_call(tgh_proc_t *c, json_int_t id, const char *tool, const char *args_json)
{
    return tgh_sendf(c,
                     "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
                     ",\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
                     id, tool, args_json ? args_json : "{}");
}

/* A tools/call line in <buf> (newline included): any JSON id <id_json>,
 * any tool name (quoted here), arguments <args_json> (NULL: {}) and
 * <meta>, the inside of params._meta ("" or NULL: no _meta). Returns its
 * length; fails the test when it does not fit. */
static inline size_t mcp_call_line(char *buf, size_t cap, const char *id_json, const char *tool,
                                   const char *args_json, const char *meta)
{
    json_t *name = json_string(tool);
    char *qname = json_dumps(name, JSON_ENCODE_ANY);
    json_decref(name);
    cr_assert_not_null(qname);
    bool has_meta = meta != NULL && meta[0] != '\0';
    int n = snprintf(buf, cap,
                     "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":%s,\"arguments\":%s%s%s%s}}\n",
                     id_json, qname, args_json ? args_json : "{}", has_meta ? ",\"_meta\":{" : "",
                     has_meta ? meta : "", has_meta ? "}" : "");
    free(qname);
    cr_assert(n > 0 && (size_t)n < cap, "a tools/call line does not fit in %zu bytes", cap);
    return (size_t)n;
}

/* mcp_call_line, sent; fails the test when it cannot be. */
static inline void mcp_call_meta(tgh_proc_t *c, const char *id_json, const char *tool,
                                 const char *args_json, const char *meta)
{
    char line[4096];
    size_t n = mcp_call_line(line, sizeof line, id_json, tool, args_json, meta);
    int rc = tgh_send(c, line, n, 5000);
    cr_assert_eq(rc, 0, "sending call %s: %s", id_json, strerror(-rc));
}

/* A tools/call of <tool> with id <id> and params._meta.timeout_ms
 * <timeout_ms> (none when 0). */
static inline void mcp_call_timeout(tgh_proc_t *c, json_int_t id, const char *tool,
                                    const char *args_json, unsigned timeout_ms)
{
    char jid[32], meta[48] = "";
    snprintf(jid, sizeof jid, "%" JSON_INTEGER_FORMAT, id);
    if (timeout_ms > 0)
        snprintf(meta, sizeof meta, "\"timeout_ms\":%u", timeout_ms);
    mcp_call_meta(c, jid, tool, args_json, meta);
}

/* ---- receiving ---------------------------------------------------------- */

/* True when <msg> is a response (result or error, no method) for <id>. */
static inline bool mcp_is_response_to(const json_t *msg, const json_t *id)
{
    return json_is_object(msg) && !json_object_get(msg, "method") &&
           (json_object_get(msg, "result") || json_object_get(msg, "error")) &&
           json_equal(json_object_get(msg, "id"), (json_t *)id);
}

/* Read until the response to <id> arrives; other messages are appended to
 * the array <others> (or dropped when it is NULL). NULL on timeout/EOF. */
static inline json_t *mcp_await(tgh_proc_t *c, const json_t *id, int timeout_ms, json_t *others)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        json_t *msg = tgh_read_json(c, tgh_left(deadline), NULL);
        if (!msg) {
            if (c->out_eof || tgh_left(deadline) == 0)
                return NULL;
            continue;
        }
        if (mcp_is_response_to(msg, id))
            return msg;
        if (others)
            json_array_append_new(others, msg);
        else
            json_decref(msg);
    }
}

static inline json_t *mcp_await_int(tgh_proc_t *c, json_int_t id, int timeout_ms, json_t *others)
{
    json_t *jid = json_integer(id);
    json_t *r = mcp_await(c, jid, timeout_ms, others);
    json_decref(jid);
    return r;
}

/* The response to <id>, failing the test when none comes in time. */
static inline json_t *mcp_expect(tgh_proc_t *c, const json_t *id, int timeout_ms, json_t *others)
{
    json_t *r = mcp_await(c, id, timeout_ms, others);
    if (!r) {
        char *idtext = json_dumps(id, JSON_ENCODE_ANY);
        cr_assert_fail("no response to id %s within %d ms%s", idtext ? idtext : "?", timeout_ms,
                       c->out_eof ? " (toolgate closed its stdout)" : "");
    }
    return r;
}

static inline json_t *mcp_expect_int(tgh_proc_t *c, json_int_t id, int timeout_ms)
{
    json_t *jid = json_integer(id);
    json_t *r = mcp_expect(c, jid, timeout_ms, NULL);
    json_decref(jid);
    return r;
}

static inline json_t *mcp_expect_str(tgh_proc_t *c, const char *id, int timeout_ms)
{
    json_t *jid = json_string(id);
    json_t *r = mcp_expect(c, jid, timeout_ms, NULL);
    json_decref(jid);
    return r;
}

/* initialize (id 0), then notifications/initialized when it succeeded.
 * The initialize response (caller owns), or NULL when none came. */
static inline json_t *mcp_initialize(tgh_proc_t *c, int timeout_ms)
{
    tgh_sendf(c, MCP_INITIALIZE);
    json_t *r = mcp_await_int(c, 0, timeout_ms, NULL);
    if (r != NULL && json_object_get(r, "result") != NULL)
        tgh_sendf(c, MCP_INITIALIZED);
    return r;
}

/* mcp_initialize, failing the test unless it succeeded. */
static inline void mcp_init_ok(tgh_proc_t *c, int timeout_ms)
{
    json_t *r = mcp_initialize(c, timeout_ms);
    cr_assert(r != NULL && json_object_get(r, "result") != NULL, "initialize failed");
    json_decref(r);
}

/* ---- reading answers ---------------------------------------------------- */

/* error.data of a denial (borrowed), or NULL. */
static inline json_t *mcp_data_of(const json_t *r)
{
    return json_object_get(json_object_get(r, "error"), "data");
}

/* error.data.code of a denial, or NULL. */
static inline const char *mcp_code_of(const json_t *r)
{
    return json_string_value(json_object_get(mcp_data_of(r), "code"));
}

/* result.content[0].text of a tool result, or NULL. */
static inline const char *mcp_text_of(const json_t *r)
{
    const json_t *c = json_array_get(json_object_get(json_object_get(r, "result"), "content"), 0);
    return json_string_value(json_object_get(c, "text"));
}

/* Compact JSON of <v> for assertion messages (caller frees), cut to 1000
 * bytes: criterion carries messages to its runner over a pipe protocol
 * that stalls on megabyte-sized ones. */
static inline char *mcp_dump(const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s)
        return strdup("?");
    if (strlen(s) > 1000)
        memcpy(s + 990, "...(cut)", 9);
    return s;
}

/* <resp> is a tool result whose content[0].text is <text>. */
static inline void mcp_assert_text(const json_t *resp, const char *text)
{
    char *s = mcp_dump(resp);
    json_t *result = json_object_get(resp, "result");
    cr_assert_not_null(result, "expected a result, got %s", s);
    const char *got = mcp_text_of(resp);
    cr_assert_not_null(got, "no content[0].text in %s", s);
    cr_assert_str_eq(got, text, "result text of %s", s);
    free(s);
}

/* <resp> is a denial with JSON-RPC code <code> and data.code <name>;
 * returns its data object (borrowed from <resp>). */
static inline json_t *mcp_assert_denial(const json_t *resp, int code, const char *name)
{
    char *s = mcp_dump(resp);
    json_t *err = json_object_get(resp, "error");
    cr_assert_not_null(err, "expected an error, got %s", s);
    cr_assert_eq(json_integer_value(json_object_get(err, "code")), code, "error code in %s", s);
    cr_assert(json_is_string(json_object_get(err, "message")), "message in %s", s);
    json_t *data = json_object_get(err, "data");
    cr_assert(json_is_object(data), "error.data in %s", s);
    cr_assert_str_eq(json_string_value(json_object_get(data, "code")), name, "data.code in %s", s);
    free(s);
    return data;
}

/* <r> is a denial whose data.code is <code>. */
static inline void mcp_assert_denied(const json_t *r, const char *code)
{
    char *s = mcp_dump(r);
    cr_assert_not_null(mcp_code_of(r), "expected a %s denial, got %s", code, s);
    cr_assert_str_eq(mcp_code_of(r), code, "expected %s: %s", code, s);
    free(s);
}

/* Call <tool> with <args_json> as id <id> and check that its result text
 * is <text>. */
static inline void mcp_call_text(tgh_proc_t *c, json_int_t id, const char *tool,
                                 const char *args_json, const char *text, int timeout_ms)
{
    int rc = mcp_call(c, id, tool, args_json);
    cr_assert_eq(rc, 0, "sending call %lld: %s", (long long)id, strerror(-rc));
    json_t *r = mcp_expect_int(c, id, timeout_ms);
    mcp_assert_text(r, text);
    json_decref(r);
}

/* Call <tool> with <args_json> as id <id> and check that toolgate refuses
 * it with JSON-RPC code <code> and data.code <name>. */
static inline void mcp_call_denied(tgh_proc_t *c, json_int_t id, const char *tool,
                                   const char *args_json, int code, const char *name,
                                   int timeout_ms)
{
    int rc = mcp_call(c, id, tool, args_json);
    cr_assert_eq(rc, 0, "sending call %lld: %s", (long long)id, strerror(-rc));
    json_t *r = mcp_expect_int(c, id, timeout_ms);
    mcp_assert_denial(r, code, name);
    json_decref(r);
}

#endif
