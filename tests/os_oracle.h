/* The jansson oracle for the OpenSentience envelope scanner, shared by the
 * unit tests (tests/test_osenv.c) and the fuzz target (tests/fuzz/).
 *
 * os_oracle_check(buf, len) runs tg_os_scan and the helpers on the bytes
 * and returns NULL when they agree with jansson, else a description of
 * the disagreement. The invariant checked:
 *   - when jansson (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY) accepts the
 *     bytes, tg_os_scan's verdict is exactly what the envelope rules (the
 *     list at the top of router/codec/osenv.c) make of jansson's tree, and every
 *     span it reports re-parses to jansson's value; tg_os_supports_v1, the
 *     tools iterator and tg_os_tool_id_parse agree with the same rules
 *     applied to the tree (the tool id rule re-implemented here);
 *   - for an accepted core.tool.call, the messages toolgate builds from
 *     its spans (tg_denial_os answering it, tg_os_enc_tool_call routing
 *     it, with the envelope ids echoed) parse with jansson and carry
 *     exactly the caller's values;
 *   - whatever jansson rejects, the scanner may accept or reject, but the
 *     spans it reports stay inside the buffer.
 * Inputs holding a NUL byte are only checked for memory safety: jansson
 * 2.14 silently drops a NUL that follows a number or literal. The span
 * checks and the reference parse are the oracle base (tests/json_oracle.h).
 */
#ifndef TG_TESTS_OS_ORACLE_H
#define TG_TESTS_OS_ORACLE_H

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "router/call/denial.h"
#include "router/codec/osenv.h"
#include "router/codec/osmsg.h"
#include "tests/json_oracle.h"

/* A JSON string equal to <lit> (NUL bytes inside count). */
static bool os_str_is(const json_t *v, const char *lit)
{
    return json_is_string(v) && json_string_length(v) == strlen(lit) &&
           memcmp(json_string_value(v), lit, strlen(lit)) == 0;
}

/* ---- the rules applied to jansson's tree ---- */

typedef struct os_want {
    bool valid;
    tg_os_type_t type;
    const json_t *type_s, *id, *ts, *payload, *request_id, *correlation_id, *causation_id,
        *in_reply_to, *error;
    const json_t *call_id, *session_token, *agent_id, *versions, *tools, *tool_id, *input,
        *idempotency_key, *reason, *timeout_at, *request_id_at;
    bool has_timeout;
    uint64_t timeout_ms;
    tg_os_status_t status;
} os_want_t;

/* <key> of <obj> when it has type <pred>: 1 present, 0 absent (or null
 * when <optional>), -1 breaks the rules. */
static int os_member(const json_t *obj, const char *key, int (*pred)(const json_t *), bool optional,
                     const json_t **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v == NULL || (optional && json_is_null(v)))
        return optional ? 0 : -1;
    if (!pred(v))
        return -1;
    *out = v;
    return 1;
}

static int os_is_string(const json_t *v) { return json_is_string(v); }
static int os_is_object(const json_t *v) { return json_is_object(v); }
static int os_is_array(const json_t *v) { return json_is_array(v); }
static int os_is_integer(const json_t *v) { return json_is_integer(v); }

static bool os_want_payload(const json_t *p, os_want_t *w)
{
    const json_t *proto, *st, *tmo;
    switch (w->type) {
    case TG_OS_AGENT_HELLO:
        return os_member(p, "session_token", os_is_string, false, &w->session_token) > 0 &&
               os_member(p, "agent_id", os_is_string, false, &w->agent_id) > 0 &&
               os_member(p, "protocol", os_is_object, false, &proto) > 0 &&
               os_member(proto, "supported_versions", os_is_array, false, &w->versions) > 0;
    case TG_OS_AGENT_TOOLS_REGISTER:
        return os_member(p, "tools", os_is_array, false, &w->tools) > 0;
    case TG_OS_CORE_TOOL_CALL:
        if (os_member(p, "call_id", os_is_string, false, &w->call_id) < 0 ||
            os_member(p, "tool_id", os_is_string, false, &w->tool_id) < 0 ||
            os_member(p, "input", os_is_object, false, &w->input) < 0 ||
            os_member(p, "idempotency_key", os_is_string, true, &w->idempotency_key) < 0 ||
            os_member(p, "timeout_ms", os_is_integer, true, &tmo) < 0)
            return false;
        if (tmo) {
            if (json_integer_value(tmo) < 0)
                return false;
            w->has_timeout = true;
            w->timeout_ms = (uint64_t)json_integer_value(tmo);
        }
        w->timeout_at = json_object_get(p, "timeout_ms"); /* a number, or null */
        return true;
    case TG_OS_AGENT_TOOL_STREAM:
        return os_member(p, "call_id", os_is_string, false, &w->call_id) > 0;
    case TG_OS_AGENT_TOOL_RESULT:
        if (os_member(p, "call_id", os_is_string, false, &w->call_id) < 0 ||
            os_member(p, "status", os_is_string, false, &st) < 0)
            return false;
        if (os_str_is(st, "succeeded"))
            w->status = TG_OS_ST_SUCCEEDED;
        else if (os_str_is(st, "failed"))
            w->status = TG_OS_ST_FAILED;
        else if (os_str_is(st, "canceled"))
            w->status = TG_OS_ST_CANCELED;
        else
            return false;
        return true;
    case TG_OS_CORE_TOOL_CANCEL:
        return os_member(p, "call_id", os_is_string, false, &w->call_id) > 0 &&
               os_member(p, "reason", os_is_string, true, &w->reason) >= 0;
    case TG_OS_AGENT_HEARTBEAT:
    case TG_OS_OTHER:
        break;
    }
    return true;
}

static void os_want(const json_t *j, os_want_t *w)
{
    static const struct {
        const char *name;
        tg_os_type_t t;
    } types[] = {
        {"agent.hello", TG_OS_AGENT_HELLO},
        {"agent.tools.register", TG_OS_AGENT_TOOLS_REGISTER},
        {"core.tool.call", TG_OS_CORE_TOOL_CALL},
        {"agent.tool.stream", TG_OS_AGENT_TOOL_STREAM},
        {"agent.tool.result", TG_OS_AGENT_TOOL_RESULT},
        {"core.tool.cancel", TG_OS_CORE_TOOL_CANCEL},
        {"agent.heartbeat", TG_OS_AGENT_HEARTBEAT},
    };
    memset(w, 0, sizeof(*w));
    if (!json_is_object(j) || oracle_depth(j) > TG_JSCAN_MAX_DEPTH)
        return;
    const json_t *v = json_object_get(j, "v");
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        return;
    if (os_member(j, "type", os_is_string, false, &w->type_s) < 0 ||
        os_member(j, "id", os_is_string, false, &w->id) < 0 ||
        os_member(j, "ts", os_is_string, false, &w->ts) < 0 ||
        os_member(j, "payload", os_is_object, false, &w->payload) < 0 ||
        os_member(j, "request_id", os_is_string, true, &w->request_id) < 0 ||
        os_member(j, "correlation_id", os_is_string, true, &w->correlation_id) < 0 ||
        os_member(j, "causation_id", os_is_string, true, &w->causation_id) < 0 ||
        os_member(j, "in_reply_to", os_is_string, true, &w->in_reply_to) < 0 ||
        os_member(j, "error", os_is_object, true, &w->error) < 0)
        return;
    w->request_id_at = json_object_get(j, "request_id"); /* a string, or null */
    w->type = TG_OS_OTHER;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (os_str_is(w->type_s, types[i].name))
            w->type = types[i].t;
    }
    if (!os_want_payload(w->payload, w)) {
        memset(w, 0, sizeof(*w));
        return;
    }
    w->valid = true;
}

/* The tool id rule, written independently of osenv.c. */
static bool os_ref_tool_id(const char *s, size_t n)
{
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@-";
    if (n == 0 || n > 128 || memchr(s, '\0', n))
        return false;
    size_t slashes = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/') {
            slashes++;
            at = i;
        } else if (!strchr(ok, s[i])) {
            return false;
        }
    }
    if (slashes != 1)
        return false;
    size_t tl = n - at - 1;
    const char *t = s + at + 1;
    bool a_dots = (at == 1 && s[0] == '.') || (at == 2 && s[0] == '.' && s[1] == '.');
    bool t_dots = (tl == 1 && t[0] == '.') || (tl == 2 && t[0] == '.' && t[1] == '.');
    return at > 0 && tl > 0 && !a_dots && !t_dots;
}

/* ---- the messages toolgate builds from an accepted call ---- */

/* The accepted call of <buf> (<len> bytes) forwarded as the engine does
 * (tg_os_fwd_plan, the gather list assembled): it parses, carries
 * toolgate's call_id, the deadline told (1234 ms, or less when the caller
 * asked less) where the caller wrote timeout_ms, or added unless
 * <max_frame> leaves no room, the request_id toolgate adds when the caller
 * named none (over its null, or added: likewise), and the caller's other
 * values. */
static const char *os_check_forward(const char *buf, size_t len, const tg_os_env_t *env,
                                    const os_want_t *w, uint64_t max_frame)
{
    static char out[1 << 16];
    static const char rid[] = "\"tg-r-1\"", cid[] = "\"tg-c-1\"";
    if (len > sizeof out - 256)
        return NULL;
    /* As the engine tells it: never more than was asked. */
    json_int_t told = w->has_timeout && w->timeout_ms < 1234 ? (json_int_t)w->timeout_ms : 1234;
    tg_os_fwd_in_t in;
    tg_os_fwd_in_from_env(&in, buf, len, env);
    in.new_call_id = (tg_os_raw_t){cid, sizeof cid - 1};
    in.timeout_ms = (uint64_t)told;
    in.request_id = w->request_id ? (tg_os_raw_t){NULL, 0} : (tg_os_raw_t){rid, sizeof rid - 1};
    in.max_frame = max_frame;
    tg_os_fwd_t f;
    if (tg_os_fwd_plan(&in, &f) < 0)
        return oracle_fail("tg_os_fwd_plan failed on an accepted call");
    size_t n = 0, pos = 0;
    for (size_t i = 0; i < f.n; i++) {
        memcpy(out + n, buf + pos, f.e[i].off - pos);
        n += f.e[i].off - pos;
        memcpy(out + n, f.e[i].text, f.e[i].text_len);
        n += f.e[i].text_len;
        pos = f.e[i].off + f.e[i].len;
    }
    memcpy(out + n, buf + pos, len - pos);
    n += len - pos;
    size_t hdr = (size_t)f.hdr[0] << 24 | (size_t)f.hdr[1] << 16 | (size_t)f.hdr[2] << 8 | f.hdr[3];
    if (hdr != n)
        return oracle_fail("forwarded header says %zu, the frame has %zu bytes", hdr, n);
    tg_os_env_t fe;
    if (tg_os_scan(out, n, &fe) < 0 || fe.type != TG_OS_CORE_TOOL_CALL)
        return oracle_fail("the forwarded call does not scan");
    json_t *r = json_loadb(out, n, JSON_REJECT_DUPLICATES, NULL);
    if (!r)
        return oracle_fail("the forwarded call does not parse");
    const json_t *p = json_object_get(r, "payload");
    const json_t *tmo = json_object_get(p, "timeout_ms");
    const char *why = NULL;
    bool room = max_frame == UINT64_MAX;
    if (!os_str_is(json_object_get(p, "call_id"), "tg-c-1"))
        why = oracle_fail("forwarded call_id differs");
    else if (!json_equal(json_object_get(p, "tool_id"), w->tool_id) ||
             !json_equal(json_object_get(p, "input"), w->input))
        why = oracle_fail("forwarded tool_id or input differs");
    else if ((room || w->timeout_at) ? !json_is_integer(tmo) || json_integer_value(tmo) != told
                                     : tmo != NULL)
        why = oracle_fail("forwarded timeout_ms differs");
    else if (w->request_id ? !json_equal(json_object_get(r, "request_id"), w->request_id)
             : room        ? !os_str_is(json_object_get(r, "request_id"), "tg-r-1")
                           : !json_equal(json_object_get(r, "request_id"), w->request_id_at) &&
                          json_object_get(r, "request_id") != w->request_id_at)
        why = oracle_fail("forwarded request_id differs");
    json_decref(r);
    return why;
}

static const char *os_check_encoders(const char *buf, size_t len, const tg_os_env_t *env,
                                     const os_want_t *w)
{
    static char out[1 << 16];
    tg_os_hdr_t h = {
        .id = "tg-m-1",
        .ts_ms = 1768564800123,
        .in_reply_to = tg_os_raw(buf, env->id),
        .request_id = tg_os_raw(buf, env->request_id),
        .correlation_id = tg_os_raw(buf, env->correlation_id),
        .causation_id = tg_os_raw(buf, env->causation_id),
    };
    tg_denial_t d = {
        .code = TG_DENY_RATE,
        .limit = "rate",
        .scope = "tool",
        .agent = "a",
        .observed = 6,
        .cap = 5,
        .unit = "calls/second",
        .retry_after_ms = 200,
        .os = &h,
    };
    long n = tg_denial_os(out, sizeof out, buf + env->call_id.off, env->call_id.len, &d);
    if (n == -ENOSPC)
        return NULL; /* a call_id or echo larger than the scratch */
    if (n < 0)
        return oracle_fail("tg_denial_os failed on an accepted call");
    json_t *r = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
    const char *why = NULL;
    if (!r)
        why = oracle_fail("denial does not parse");
    else if (!json_equal(json_object_get(json_object_get(r, "payload"), "call_id"), w->call_id))
        why = oracle_fail("denial call_id differs");
    else if (!json_equal(json_object_get(r, "in_reply_to"), w->id))
        why = oracle_fail("denial in_reply_to differs");
    else if ((w->request_id || json_object_get(r, "request_id")) &&
             !json_equal(json_object_get(r, "request_id"), w->request_id))
        why = oracle_fail("denial request_id differs");
    else if ((w->correlation_id || json_object_get(r, "correlation_id")) &&
             !json_equal(json_object_get(r, "correlation_id"), w->correlation_id))
        why = oracle_fail("denial correlation_id differs");
    json_decref(r);
    if (why)
        return why;

    tg_os_call_t c = {
        .call_id = "tg-c-1",
        .tool_id = tg_os_raw(buf, env->tool_id),
        .input = tg_os_raw(buf, env->input),
        .timeout_ms = env->has_timeout ? env->timeout_ms : TG_OS_NO_TIMEOUT,
        .idempotency_key = tg_os_raw(buf, env->idempotency_key),
    };
    n = tg_os_enc_tool_call(out, sizeof out, &h, &c);
    if (n == -ENOSPC)
        return NULL;
    if (n < 0)
        return oracle_fail("tg_os_enc_tool_call failed on an accepted call");
    r = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
    json_t *p = json_object_get(r, "payload");
    if (!r)
        why = oracle_fail("encoded call does not parse");
    else if (!json_equal(json_object_get(p, "tool_id"), w->tool_id) ||
             !json_equal(json_object_get(p, "input"), w->input) ||
             !os_str_is(json_object_get(p, "call_id"), "tg-c-1"))
        why = oracle_fail("encoded call differs");
    else if (w->has_timeout && (uint64_t)json_integer_value(json_object_get(p, "timeout_ms")) != w->timeout_ms)
        why = oracle_fail("encoded timeout differs");
    else if (w->idempotency_key && !json_equal(json_object_get(p, "idempotency_key"), w->idempotency_key))
        why = oracle_fail("encoded idempotency_key differs");
    json_decref(r);
    if (why)
        return why;
    /* Forwarded as the engine does, with every edit, then with no room
     * for the additions. */
    why = os_check_forward(buf, len, env, w, UINT64_MAX);
    if (!why)
        why = os_check_forward(buf, len, env, w, 0);
    return why;
}

static const char *os_check_spans(const char *buf, size_t len, const tg_os_env_t *e,
                                  const os_want_t *w)
{
    struct {
        tg_jspan_t s;
        const json_t *v;
        const char *name;
    } t[] = {
        {e->type_s, w->type_s, "type"},
        {e->id, w->id, "id"},
        {e->ts, w->ts, "ts"},
        {e->payload, w->payload, "payload"},
        {e->request_id, w->request_id, "request_id"},
        {e->correlation_id, w->correlation_id, "correlation_id"},
        {e->causation_id, w->causation_id, "causation_id"},
        {e->in_reply_to, w->in_reply_to, "in_reply_to"},
        {e->error, w->error, "error"},
        {e->call_id, w->call_id, "call_id"},
        {e->session_token, w->session_token, "session_token"},
        {e->agent_id, w->agent_id, "agent_id"},
        {e->versions, w->versions, "supported_versions"},
        {e->tools, w->tools, "tools"},
        {e->tool_id, w->tool_id, "tool_id"},
        {e->input, w->input, "input"},
        {e->idempotency_key, w->idempotency_key, "idempotency_key"},
        {e->reason, w->reason, "reason"},
        {e->timeout_at, w->timeout_at, "timeout_ms"},
        {e->request_id_at, w->request_id_at, "request_id (or null)"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!oracle_span_is(buf, len, t[i].s, t[i].v)) {
            return oracle_fail("%s span differs", t[i].name);
        }
    }
    if (e->type != w->type)
        return oracle_fail("type differs");
    if (e->has_timeout != w->has_timeout || (w->has_timeout && e->timeout_ms != w->timeout_ms))
        return oracle_fail("timeout_ms differs");
    if (e->status != w->status)
        return oracle_fail("status differs");
    return NULL;
}

static const char *os_check_helpers(const char *buf, size_t len, const tg_os_env_t *e,
                                    const os_want_t *w)
{
    if (w->versions) {
        int want = 0;
        size_t i;
        json_t *v;
        json_array_foreach(w->versions, i, v) {
            if (json_is_integer(v) && json_integer_value(v) == 1)
                want = 1;
        }
        if (tg_os_supports_v1(buf, e->versions) != want)
            return oracle_fail("supports_v1 differs");
    }
    if (w->tools) {
        tg_os_tools_iter_t it;
        tg_jspan_t tid;
        size_t i = 0;
        int rc;
        tg_os_tools_begin(&it, buf, e->tools);
        while ((rc = tg_os_tools_next(&it, &tid)) == 1) {
            const json_t *el = json_array_get(w->tools, i++);
            const json_t *want = json_is_object(el) ? json_object_get(el, "tool_id") : NULL;
            if (!json_is_string(want))
                want = NULL;
            if (!oracle_span_is(buf, len, tid, want))
                return oracle_fail("tools iterator tool_id differs");
        }
        if (rc != 0 || i != json_array_size(w->tools))
            return oracle_fail("tools iterator count differs");
    }
    if (w->tool_id) {
        char dst[TG_OS_TOOL_ID_MAX + 1];
        size_t n = 0, alen = 0;
        int rc = tg_os_tool_id_parse(buf, e->tool_id, dst, sizeof dst, &n, &alen);
        bool want = os_ref_tool_id(json_string_value(w->tool_id), json_string_length(w->tool_id));
        if ((rc == 0) != want)
            return oracle_fail("tool_id verdict differs");
        if (rc == 0 && (n != json_string_length(w->tool_id) ||
                        memcmp(dst, json_string_value(w->tool_id), n) != 0 ||
                        dst[alen] != '/'))
            return oracle_fail("tool_id split differs");
    }
    if (w->type == TG_OS_CORE_TOOL_CALL)
        return os_check_encoders(buf, len, e, w);
    return NULL;
}

/* Check one frame payload. */
static const char *os_oracle_check(const char *buf, size_t len)
{
    tg_os_env_t env;
    int rc = tg_os_scan(buf, len, &env);
    const tg_jspan_t *all[] = {&env.type_s,
                               &env.id,
                               &env.ts,
                               &env.payload,
                               &env.request_id,
                               &env.correlation_id,
                               &env.causation_id,
                               &env.in_reply_to,
                               &env.error,
                               &env.call_id,
                               &env.session_token,
                               &env.agent_id,
                               &env.versions,
                               &env.tools,
                               &env.tool_id,
                               &env.input,
                               &env.idempotency_key,
                               &env.reason,
                               &env.timeout_at,
                               &env.request_id_at};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!oracle_span_inside(*all[i], len))
            return oracle_fail("span outside the buffer");
        if (rc < 0 && all[i]->type != TG_J_NONE)
            return oracle_fail("span reported for an invalid frame");
    }
    json_t *j = oracle_reference(buf, len);
    if (!j)
        return NULL;
    os_want_t w;
    os_want(j, &w);
    const char *why = NULL;
    if ((rc == 0) != w.valid) {
        why = oracle_fail("scan says %s, the rules say %s", rc == 0 ? "valid" : "invalid",
                          w.valid ? "valid" : "invalid");
    } else if (w.valid) {
        why = os_check_spans(buf, len, &env, &w);
        if (!why)
            why = os_check_helpers(buf, len, &env, &w);
    }
    json_decref(j);
    return why;
}

#endif
