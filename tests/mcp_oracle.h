/* The jansson oracle for the envelope scanner, shared by the differential
 * test (tests/test_envelope.c) and the fuzz target (tests/fuzz/).
 *
 * tg_oracle_check(buf, len) runs every scanner entry point on the bytes
 * and returns NULL when they agree with jansson, else a description of the
 * disagreement. The invariant checked:
 *   - when jansson (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY) accepts the
 *     bytes, tg_mcp_scan's verdict is exactly what the envelope rules make
 *     of jansson's tree, and every span it reports re-parses to jansson's
 *     value (id, method, params, params.name, timeout_ms, progress tokens,
 *     requestId); tg_mcp_batch_has_call, tg_mcp_scan_head_id (whole and cut
 *     anywhere), tg_jscan_value and tg_jobj_next agree likewise;
 *   - whatever jansson rejects, the scanners may accept or reject, but the
 *     spans they report stay inside the buffer.
 * Inputs holding a NUL byte are only checked for memory safety: jansson
 * 2.14 silently drops a NUL that follows a number or literal. The span
 * checks and the reference parse are the oracle base (tests/json_oracle.h).
 * Envelope rules the scanner adds to JSON (so jansson accepts and
 * toolgate rejects): nesting deeper than TG_JSCAN_MAX_DEPTH, a method that
 * is not a string, an id that is not a number/string/null, params that are
 * not structured, method with result/error, a response without an id or
 * with both or neither of result and error; for batches, an empty array
 * or an element that is not a valid envelope. Duplicate keys need no rule:
 * jansson rejects them with JSON_REJECT_DUPLICATES.
 */
#ifndef TG_TESTS_MCP_ORACLE_H
#define TG_TESTS_MCP_ORACLE_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "router/codec/envelope.h"
#include "tests/json_oracle.h"

static bool oracle_is_token(const json_t *v)
{
    return json_is_string(v) || json_is_number(v);
}

static const json_t *oracle_token(const json_t *v)
{
    return oracle_is_token(v) ? v : NULL;
}

/* The envelope rules applied to jansson's tree. */
static tg_mcp_kind_t oracle_kind(const json_t *j)
{
    if (json_is_array(j))
        return TG_MCP_BATCH;
    if (!json_is_object(j))
        return TG_MCP_INVALID;
    const json_t *id = json_object_get(j, "id");
    const json_t *method = json_object_get(j, "method");
    const json_t *params = json_object_get(j, "params");
    bool res = json_object_get(j, "result") != NULL;
    bool err = json_object_get(j, "error") != NULL;
    if (id && !json_is_number(id) && !json_is_string(id) && !json_is_null(id))
        return TG_MCP_INVALID;
    if (method && !json_is_string(method))
        return TG_MCP_INVALID;
    if (params && !json_is_object(params) && !json_is_array(params))
        return TG_MCP_INVALID;
    if (method) {
        if (res || err)
            return TG_MCP_INVALID;
        return id ? TG_MCP_REQUEST : TG_MCP_NOTIFICATION;
    }
    if (!id || res == err)
        return TG_MCP_INVALID;
    return TG_MCP_RESPONSE;
}

static bool oracle_method_is(const json_t *j, const char *m)
{
    const json_t *method = json_object_get(j, "method");
    return json_is_string(method) && strcmp(json_string_value(method), m) == 0;
}

static const char *oracle_check_env(const char *buf, size_t len, const json_t *j,
                                    const tg_mcp_env_t *env)
{
    const json_t *params = json_object_get(j, "params");
    if (!oracle_span_is(buf, len, env->id, json_object_get(j, "id")))
        return oracle_fail("id span differs");
    if (!oracle_span_is(buf, len, env->method, json_object_get(j, "method")))
        return oracle_fail("method span differs");
    if (!oracle_span_is(buf, len, env->params, params))
        return oracle_fail("params span differs");
    if (env->has_result != (json_object_get(j, "result") != NULL) ||
        env->has_error != (json_object_get(j, "error") != NULL))
        return oracle_fail("result/error presence differs");

    bool call = oracle_method_is(j, "tools/call");
    if (env->is_tools_call != call)
        return oracle_fail("is_tools_call differs");
    const json_t *name = NULL, *meta = NULL, *tmo = NULL, *ptok = NULL;
    if (call && json_is_object(params)) {
        name = json_object_get(params, "name");
        if (!json_is_string(name))
            name = NULL;
        meta = json_object_get(params, "_meta");
        if (json_is_object(meta)) {
            tmo = json_object_get(meta, "timeout_ms");
            ptok = oracle_token(json_object_get(meta, "progressToken"));
        }
    }
    if (!oracle_span_is(buf, len, env->tool_name, name))
        return oracle_fail("params.name differs");
    bool want_tmo = json_is_integer(tmo) && json_integer_value(tmo) >= 0;
    if (env->has_timeout != want_tmo)
        return oracle_fail("has_timeout differs");
    if (want_tmo && env->timeout_ms != (uint64_t)json_integer_value(tmo))
        return oracle_fail("timeout_ms differs");
    if (!oracle_span_is(buf, len, env->progress_token, ptok))
        return oracle_fail("_meta.progressToken differs");

    bool notif = json_object_get(j, "id") == NULL;
    const json_t *cid = NULL, *nptok = NULL;
    if (notif && json_is_object(params) && oracle_method_is(j, "notifications/cancelled"))
        cid = oracle_token(json_object_get(params, "requestId"));
    if (notif && json_is_object(params) && oracle_method_is(j, "notifications/progress"))
        nptok = oracle_token(json_object_get(params, "progressToken"));
    if (!oracle_span_is(buf, len, env->cancel_id, cid))
        return oracle_fail("requestId differs");
    if (!oracle_span_is(buf, len, env->notif_progress_token, nptok))
        return oracle_fail("notification progressToken differs");
    return NULL;
}

static int oracle_batch_has_call(const json_t *j)
{
    if (!json_is_array(j) || json_array_size(j) == 0)
        return -1;
    int calls = 0;
    size_t i;
    json_t *el;
    json_array_foreach(j, i, el) {
        tg_mcp_kind_t k = oracle_kind(el);
        if (!json_is_object(el) || k == TG_MCP_INVALID)
            return -1;
        if (oracle_method_is(el, "tools/call"))
            calls = 1;
    }
    return calls;
}

/* Every member tg_jobj_next reports is one of jansson's, and all are. */
static const char *oracle_check_members(const char *buf, size_t len, tg_jspan_t obj,
                                        const json_t *j)
{
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    int rc;
    size_t n = 0;
    tg_jobj_begin(&it, buf, obj);
    while ((rc = tg_jobj_next(&it, &k, &v)) == 1) {
        char key[512];
        if (tg_jstr_decode(buf, k, key, sizeof key) < 0)
            continue; /* long keys: counted, not compared */
        if (!oracle_span_is(buf, len, v, json_object_get(j, key)))
            return oracle_fail("member value differs");
        n++;
    }
    if (rc != 0)
        return oracle_fail("member iteration failed on a valid object");
    (void)n;
    return NULL;
}

static const char *oracle_check_head_id(const char *buf, size_t len, const json_t *j,
                                        unsigned cut_seed)
{
    tg_jspan_t hid = {0};
    const json_t *id = json_is_object(j) ? json_object_get(j, "id") : NULL;
    bool id_ok = id && (json_is_number(id) || json_is_string(id) || json_is_null(id));
    int rc = tg_mcp_scan_head_id(buf, len, &hid);
    if (!json_is_object(j))
        return rc == 0 ? oracle_fail("head id found in a non-object") : NULL;
    if (id_ok != (rc == 0))
        return oracle_fail("head id presence differs on the whole frame");
    if (rc == 0 && !oracle_span_is(buf, len, hid, id))
        return oracle_fail("head id differs on the whole frame");
    /* Cut anywhere: never a wrong id; and whole once past the id. */
    size_t need = rc == 0 ? hid.off + hid.len + 1 : len + 1;
    size_t cuts[4] = {cut_seed % (len + 1), (cut_seed / 7) % (len + 1), need <= len ? need : len,
                      len / 2};
    for (size_t c = 0; c < 4; c++) {
        tg_jspan_t h = {0};
        int r = tg_mcp_scan_head_id(buf, cuts[c], &h);
        if (r == 0 && !oracle_span_is(buf, cuts[c], h, id))
            return oracle_fail("head id of a cut frame differs");
        if (r != 0 && cuts[c] >= need)
            return oracle_fail("head id missing from a cut past it");
    }
    return NULL;
}

/* Check one input. <cut_seed> picks the cut points for the head-id check. */
static const char *oracle_check(const char *buf, size_t len, unsigned cut_seed)
{
    tg_mcp_env_t env;
    int rc = tg_mcp_scan(buf, len, &env);
    int bc = tg_mcp_batch_has_call(buf, len);
    tg_jspan_t hid = {0}, top = {0};
    int hr = tg_mcp_scan_head_id(buf, len, &hid);
    long vr = tg_jscan_value(buf, len, 0, &top);
    if ((rc == 0) != (env.kind != TG_MCP_INVALID))
        return oracle_fail("return code and kind disagree");
    if (!oracle_span_inside(env.id, len) || !oracle_span_inside(env.method, len) ||
        !oracle_span_inside(env.params, len) || !oracle_span_inside(env.tool_name, len) ||
        !oracle_span_inside(env.progress_token, len) || !oracle_span_inside(env.cancel_id, len) ||
        !oracle_span_inside(env.notif_progress_token, len) ||
        (hr == 0 && !oracle_span_inside(hid, len)) || (vr >= 0 && (size_t)vr > len))
        return oracle_fail("span outside the buffer");

    json_t *j = oracle_reference(buf, len);
    if (!j)
        return NULL;
    const char *why = NULL;
    bool deep = oracle_depth(j) > TG_JSCAN_MAX_DEPTH;
    tg_mcp_kind_t want = deep ? TG_MCP_INVALID : oracle_kind(j);
    if (env.kind != want) {
        why = oracle_fail("kind %d, jansson says %d", env.kind, want);
        goto out;
    }
    if (deep) {
        if (vr != -1)
            why = oracle_fail("jscan accepted nesting past the bound");
        goto out;
    }
    if (vr < 0) {
        why = oracle_fail("tg_jscan_value rejected a valid value");
        goto out;
    }
    if (!oracle_span_is(buf, len, top, j)) {
        why = oracle_fail("top value span differs");
        goto out;
    }
    if (want == TG_MCP_BATCH) {
        int wb = oracle_batch_has_call(j);
        if (bc != wb) {
            why = oracle_fail("batch_has_call %d, jansson says %d", bc, wb);
        }
        goto out;
    }
    if (bc != -1) {
        why = oracle_fail("batch_has_call accepted a non-array");
        goto out;
    }
    if (json_is_object(j) && (why = oracle_check_members(buf, len, top, j)) != NULL)
        goto out;
    if ((why = oracle_check_head_id(buf, len, j, cut_seed)) != NULL)
        goto out;
    if (want != TG_MCP_INVALID)
        why = oracle_check_env(buf, len, j, &env);
out:
    json_decref(j);
    return why;
}

#endif
