/* Envelope scanner (see envelope.h).
 *
 * Reads the top-level members of a frame and, for the few methods toolgate
 * acts on, the members of params (and params._meta). Everything deeper is
 * skipped by jscan. The rules, all in tg_mcp_scan:
 *   - the frame is one JSON object (or an array: a batch), blanks around it;
 *   - "method", when present, is a string; "id", when present, is a number,
 *     a string or null; "params", when present, is an object or an array;
 *     "jsonrpc" is not required (frames are forwarded as they came);
 *   - a key toolgate reads may appear once: "id", "method", "params",
 *     "result", "error" at the top; "name" and "_meta" in tools/call params;
 *     "timeout_ms" and "progressToken" in _meta; "requestId" or
 *     "progressToken" in the params of the notifications that carry them.
 *     Otherwise toolgate could account a call to one tool or id while the
 *     agent (which typically keeps the last duplicate) runs another;
 *   - method + id: request; method alone: notification; no method: a
 *     response, which needs an id and exactly one of result and error.
 *     A frame with a method and a result or error is invalid.
 */
#include "router/envelope.h"

#include <string.h>

/* Call <fn> on every member left in <it>. Returns 0 at the closing brace,
 * or -1 when the object is malformed, cut, or <fn> refuses a member. */
typedef int (*member_fn)(void *ctx, const char *buf, tg_jspan_t key, tg_jspan_t val);

static int each_member_it(tg_jobj_iter_t *it, const char *buf, member_fn fn, void *ctx)
{
    tg_jspan_t k, v;
    int rc;
    while ((rc = tg_jobj_next(it, &k, &v)) == 1) {
        if (fn(ctx, buf, k, v) < 0)
            return -1;
    }
    return rc == 0 ? 0 : -1;
}

static int each_member(const char *buf, tg_jspan_t obj, member_fn fn, void *ctx)
{
    tg_jobj_iter_t it;
    tg_jobj_begin(&it, buf, obj);
    return each_member_it(&it, buf, fn, ctx);
}

/* Store <val> in <slot> unless the key was already seen. */
static int take_once(tg_jspan_t *slot, tg_jspan_t val)
{
    if (slot->type != TG_J_NONE)
        return -1;
    *slot = val;
    return 0;
}

static bool is_id_type(tg_jtype_t t)
{
    return t == TG_J_NUMBER || t == TG_J_STRING || t == TG_J_NULL;
}

/* Progress tokens and request ids are strings or numbers (MCP). A member
 * of another type is recorded as seen (so a duplicate is still caught) but
 * reported as absent. */
static tg_jspan_t token_or_none(tg_jspan_t v)
{
    if (v.type == TG_J_STRING || v.type == TG_J_NUMBER)
        return v;
    return (tg_jspan_t){.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false};
}

/* ---- top level ---- */

typedef struct top_ctx {
    tg_jspan_t id, method, params, result, error;
} top_ctx_t;

static int top_member(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    top_ctx_t *t = ctx;
    size_t n = k.len - 2;
    /* Envelope keys are short; a long or escaped key is compared decoded. */
    if (!k.escaped && (n < 2 || n > 6))
        return 0;
    if (tg_jstr_eq(buf, k, "id")) {
        if (!is_id_type(v.type))
            return -1;
        return take_once(&t->id, v);
    }
    if (tg_jstr_eq(buf, k, "method")) {
        if (v.type != TG_J_STRING)
            return -1;
        return take_once(&t->method, v);
    }
    if (tg_jstr_eq(buf, k, "params")) {
        if (v.type != TG_J_OBJECT && v.type != TG_J_ARRAY)
            return -1;
        return take_once(&t->params, v);
    }
    if (tg_jstr_eq(buf, k, "result"))
        return take_once(&t->result, v);
    if (tg_jstr_eq(buf, k, "error"))
        return take_once(&t->error, v);
    return 0;
}

/* ---- params of tools/call, and its _meta ---- */

typedef struct call_ctx {
    tg_jspan_t name, meta;             /* seen-markers for duplicates */
    tg_jspan_t timeout, progress;      /* inside _meta */
} call_ctx_t;

static int meta_member(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    call_ctx_t *c = ctx;
    if (tg_jstr_eq(buf, k, "timeout_ms"))
        return take_once(&c->timeout, v);
    if (tg_jstr_eq(buf, k, "progressToken"))
        return take_once(&c->progress, v);
    return 0;
}

static int call_member(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    call_ctx_t *c = ctx;
    if (tg_jstr_eq(buf, k, "name"))
        return take_once(&c->name, v);
    if (tg_jstr_eq(buf, k, "_meta")) {
        if (take_once(&c->meta, v) < 0)
            return -1;
        if (v.type == TG_J_OBJECT)
            return each_member(buf, v, meta_member, c);
    }
    return 0;
}

/* ---- params of a notification carrying one member toolgate reads ---- */

typedef struct one_ctx {
    const char *key;
    tg_jspan_t val;
} one_ctx_t;

static int one_member(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    one_ctx_t *o = ctx;
    if (tg_jstr_eq(buf, k, o->key))
        return take_once(&o->val, v);
    return 0;
}

static int scan_call(const char *buf, tg_mcp_env_t *env)
{
    if (env->params.type != TG_J_OBJECT)
        return 0;
    call_ctx_t c;
    memset(&c, 0, sizeof c);
    if (each_member(buf, env->params, call_member, &c) < 0)
        return -1;
    if (c.name.type == TG_J_STRING)
        env->tool_name = c.name;
    uint64_t t;
    if (c.timeout.type == TG_J_NUMBER && tg_jnum_u64(buf, c.timeout, UINT64_MAX, &t) == 0) {
        env->has_timeout = true;
        env->timeout_ms = t;
    }
    env->progress_token = token_or_none(c.progress);
    return 0;
}

static int scan_one(const char *buf, const tg_mcp_env_t *env, const char *key, tg_jspan_t *out)
{
    if (env->params.type != TG_J_OBJECT)
        return 0;
    one_ctx_t o = {.key = key, .val = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false}};
    if (each_member(buf, env->params, one_member, &o) < 0)
        return -1;
    *out = token_or_none(o.val);
    return 0;
}

static int invalid(tg_mcp_env_t *env)
{
    memset(env, 0, sizeof *env);
    env->kind = TG_MCP_INVALID;
    return -1;
}

static bool blank_from(const char *buf, size_t len, size_t i)
{
    for (; i < len; i++) {
        char c = buf[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return false;
    }
    return true;
}

int tg_mcp_scan(const char *buf, size_t len, tg_mcp_env_t *env)
{
    memset(env, 0, sizeof *env);
    /* An object is read in one pass: iterated from its opening brace
     * (partial mode finds the closing one), not skipped first and then
     * iterated. */
    tg_jobj_iter_t it;
    int rc = tg_jobj_begin_partial(&it, buf, len, 0);
    if (rc == -1) {
        tg_jspan_t top;
        long end = tg_jscan_value(buf, len, 0, &top);
        if (end < 0 || top.type != TG_J_ARRAY || !blank_from(buf, len, (size_t)end))
            return invalid(env);
        env->kind = TG_MCP_BATCH;
        return 0;
    }
    if (rc < 0)
        return invalid(env);
    top_ctx_t t;
    memset(&t, 0, sizeof t);
    if (each_member_it(&it, buf, top_member, &t) < 0 || !blank_from(buf, len, it.pos))
        return invalid(env);
    bool has_id = t.id.type != TG_J_NONE;
    env->id = t.id;
    env->method = t.method;
    env->params = t.params;
    env->has_result = t.result.type != TG_J_NONE;
    env->has_error = t.error.type != TG_J_NONE;

    if (t.method.type != TG_J_NONE) {
        if (env->has_result || env->has_error)
            return invalid(env);
        env->kind = has_id ? TG_MCP_REQUEST : TG_MCP_NOTIFICATION;
        /* A tools/call without an id is still flagged: an agent may run
         * it, so the router must not let it past the limits unnoticed. */
        if (tg_jstr_eq(buf, t.method, "tools/call")) {
            env->is_tools_call = true;
            if (scan_call(buf, env) < 0)
                return invalid(env);
        } else if (!has_id && tg_jstr_eq(buf, t.method, "notifications/cancelled")) {
            if (scan_one(buf, env, "requestId", &env->cancel_id) < 0)
                return invalid(env);
        } else if (!has_id && tg_jstr_eq(buf, t.method, "notifications/progress")) {
            if (scan_one(buf, env, "progressToken", &env->notif_progress_token) < 0)
                return invalid(env);
        }
        return 0;
    }
    if (!has_id || env->has_result == env->has_error)
        return invalid(env);
    env->kind = TG_MCP_RESPONSE;
    return 0;
}

int tg_mcp_batch_has_call(const char *buf, size_t len)
{
    tg_jspan_t top;
    long end = tg_jscan_value(buf, len, 0, &top);
    if (end < 0 || top.type != TG_J_ARRAY)
        return -1;
    tg_jarr_iter_t it;
    tg_jspan_t el;
    int rc, n = 0, calls = 0;
    tg_jarr_begin(&it, buf, top);
    while ((rc = tg_jarr_next(&it, &el)) == 1) {
        tg_mcp_env_t env;
        /* An element toolgate cannot classify could still be a call to the
         * agent; a nested array is not JSON-RPC at all. */
        if (el.type != TG_J_OBJECT || tg_mcp_scan(buf + el.off, el.len, &env) < 0)
            return -1;
        if (env.is_tools_call)
            calls++;
        n++;
    }
    if (rc < 0 || n == 0) /* JSON-RPC: an empty batch is an invalid request */
        return -1;
    return calls > 0;
}

int tg_mcp_scan_head_id(const char *buf, size_t len, tg_jspan_t *id)
{
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    if (tg_jobj_begin_partial(&it, buf, len, 0) < 0)
        return -1;
    while (tg_jobj_next(&it, &k, &v) == 1) {
        if (tg_jstr_eq(buf, k, "id")) {
            if (!is_id_type(v.type))
                return -1;
            *id = v;
            return 0;
        }
    }
    return -1;
}
