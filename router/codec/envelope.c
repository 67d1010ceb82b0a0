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
 *
 * One pass: when the method comes before params (the usual order), a
 * tools/call's params are read in place while the top level is walked
 * (tg_jobj_enter), so its arguments are skipped once; otherwise params are
 * iterated from their span once the method is known.
 */
#include "router/codec/envelope.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

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

/* True when the key span <k> is the literal <lit> (<n> bytes). Keys are
 * compared raw, as memcmp of a known length; only an escaped key (rare) is
 * decoded. */
static inline bool key_is(const char *buf, tg_jspan_t k, const char *lit, size_t n)
{
    if (k.escaped)
        return tg_jstr_eq(buf, k, lit);
    return k.len - 2 == n && memcmp(buf + k.off + 1, lit, n) == 0;
}

#define KEY_IS(buf, k, lit) key_is((buf), (k), (lit), sizeof(lit) - 1)

/* ---- top level ---- */

typedef enum top_key {
    TK_OTHER = 0,
    TK_ID,
    TK_METHOD,
    TK_PARAMS,
    TK_RESULT,
    TK_ERROR,
} top_key_t;

static inline top_key_t top_key(const char *buf, tg_jspan_t k)
{
    if (k.escaped) {
        return tg_jstr_eq(buf, k, "id")       ? TK_ID
               : tg_jstr_eq(buf, k, "method") ? TK_METHOD
               : tg_jstr_eq(buf, k, "params") ? TK_PARAMS
               : tg_jstr_eq(buf, k, "result") ? TK_RESULT
               : tg_jstr_eq(buf, k, "error")  ? TK_ERROR
                                              : TK_OTHER;
    }
    const char *s = buf + k.off + 1;
    switch (k.len - 2) {
    case 2:
        return memcmp(s, "id", 2) == 0 ? TK_ID : TK_OTHER;
    case 5:
        return memcmp(s, "error", 5) == 0 ? TK_ERROR : TK_OTHER;
    case 6:
        if (memcmp(s, "method", 6) == 0)
            return TK_METHOD;
        if (memcmp(s, "params", 6) == 0)
            return TK_PARAMS;
        if (memcmp(s, "result", 6) == 0)
            return TK_RESULT;
        return TK_OTHER;
    default:
        return TK_OTHER;
    }
}

/* ---- params of tools/call, and its _meta ---- */

typedef struct call_ctx {
    tg_jspan_t name, meta;             /* seen-markers for duplicates */
    tg_jspan_t timeout, progress;      /* inside _meta */
    tg_jspan_t task;                   /* params.task */
} call_ctx_t;

/* Read the members of a tools/call's params from <it> (begun on the
 * params span, or entered in place while the top level is walked), and of
 * its _meta; everything else (the arguments) is skipped once. 0 at the
 * closing brace, -1 when malformed or a key toolgate reads is repeated. */
static int call_members(tg_jobj_iter_t *it, const char *buf, call_ctx_t *c)
{
    tg_jspan_t k, v;
    int rc;
    while ((rc = tg_jobj_key(it, &k)) == 1) {
        if (KEY_IS(buf, k, "name")) {
            if (tg_jobj_value(it, &v) < 0 || take_once(&c->name, v) < 0)
                return -1;
        } else if (KEY_IS(buf, k, "_meta")) {
            if (c->meta.type != TG_J_NONE)
                return -1;
            tg_jobj_iter_t mit;
            int er = tg_jobj_enter(it, &mit);
            if (er < 0)
                return -1;
            if (er == 0) {
                if (tg_jobj_value(it, &c->meta) < 0)
                    return -1;
                continue;
            }
            while ((rc = tg_jobj_next(&mit, &k, &v)) == 1) {
                if (KEY_IS(buf, k, "timeout_ms")) {
                    if (take_once(&c->timeout, v) < 0)
                        return -1;
                } else if (KEY_IS(buf, k, "progressToken")) {
                    if (take_once(&c->progress, v) < 0)
                        return -1;
                }
            }
            if (tg_jobj_leave(it, &mit, &c->meta) < 0)
                return -1;
        } else if (KEY_IS(buf, k, "task")) {
            /* A task-augmented call: a repeated "task" could make toolgate
             * and the agent disagree on whether the call is a task. */
            if (tg_jobj_value(it, &v) < 0 || take_once(&c->task, v) < 0)
                return -1;
        } else if (tg_jobj_value(it, NULL) < 0) {
            return -1;
        }
    }
    return rc == 0 ? 0 : -1;
}

static void call_apply(const char *buf, const call_ctx_t *c, tg_mcp_env_t *env)
{
    if (c->name.type == TG_J_STRING)
        env->tool_name = c->name;
    uint64_t t;
    if (c->timeout.type == TG_J_NUMBER && tg_jnum_u64(buf, c->timeout, UINT64_MAX, &t) == 0) {
        env->has_timeout = true;
        env->timeout_ms = t;
    }
    env->progress_token = token_or_none(c->progress);
    env->task = c->task;
}

/* The params of a tools/call whose method came after them: iterated from
 * their span, after the top level. */
static int scan_call(const char *buf, tg_mcp_env_t *env)
{
    if (env->params.type != TG_J_OBJECT)
        return 0;
    call_ctx_t c;
    memset(&c, 0, sizeof c);
    tg_jobj_iter_t it;
    tg_jobj_begin(&it, buf, env->params);
    if (call_members(&it, buf, &c) < 0)
        return -1;
    call_apply(buf, &c, env);
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

static int scan_one(const char *buf, const tg_mcp_env_t *env, const char *key, tg_jspan_t *out)
{
    if (env->params.type != TG_J_OBJECT)
        return 0;
    one_ctx_t o = {.key = key, .val = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false}};
    if (tg_jobj_each(buf, env->params, one_member, &o) < 0)
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

static bool is_tools_call(const char *buf, tg_jspan_t method)
{
    return KEY_IS(buf, method, "tools/call");
}

/* ---- the top level, and the envelope rules ---- */

/* Once, and only when not seen yet: a flag. */
static inline int flag_once(bool *seen)
{
    if (*seen)
        return -1;
    *seen = true;
    return 0;
}

/* Record the top-level member <which> with value <v> straight into <env>
 * (zeroed by tg_mcp_scan: no copy of the top level to clear and move):
 * -1 when the value's type or a repeated key breaks an envelope rule. */
static inline int top_take(tg_mcp_env_t *env, top_key_t which, tg_jspan_t v)
{
    switch (which) {
    case TK_ID:
        return is_id_type(v.type) ? take_once(&env->id, v) : -1;
    case TK_METHOD:
        return v.type == TG_J_STRING ? take_once(&env->method, v) : -1;
    case TK_PARAMS:
        return v.type == TG_J_OBJECT || v.type == TG_J_ARRAY ? take_once(&env->params, v) : -1;
    case TK_RESULT:
        return flag_once(&env->has_result);
    case TK_ERROR:
        return flag_once(&env->has_error);
    default:
        return 0;
    }
}

/* Which members of params the method makes toolgate read. */
typedef enum params_need {
    NEED_NONE = 0,
    NEED_CALL,     /* tools/call: name, _meta.timeout_ms, _meta.progressToken */
    NEED_CANCEL,   /* notifications/cancelled: requestId */
    NEED_PROGRESS, /* notifications/progress: progressToken */
} params_need_t;

/* Judge <env>'s top-level members by the envelope rules (see the top of
 * this file). 0 and what params must still give, or -1. */
static int top_finish(const char *buf, tg_mcp_env_t *env, params_need_t *need)
{
    bool has_id = env->id.type != TG_J_NONE;
    *need = NEED_NONE;
    if (env->method.type != TG_J_NONE) {
        if (env->has_result || env->has_error)
            return -1;
        env->kind = has_id ? TG_MCP_REQUEST : TG_MCP_NOTIFICATION;
        /* A tools/call without an id is still flagged: an agent may run
         * it, so the router must not let it past the limits unnoticed. */
        if (is_tools_call(buf, env->method)) {
            env->is_tools_call = true;
            *need = NEED_CALL;
        } else if (!has_id && tg_jstr_eq(buf, env->method, "notifications/cancelled")) {
            *need = NEED_CANCEL;
        } else if (!has_id && tg_jstr_eq(buf, env->method, "notifications/progress")) {
            *need = NEED_PROGRESS;
        }
        return 0;
    }
    if (!has_id || env->has_result == env->has_error)
        return -1;
    env->kind = TG_MCP_RESPONSE;
    return 0;
}

/* Flattened: every frame both ways comes through here, and inlining the
 * jscan steps it calls (across libraries under LTO) lets their iterator
 * live in registers; about a third of the scan's instructions were calls
 * and iterator state. */
__attribute__((flatten)) static int scan_bytes(const char *buf, size_t len, tg_mcp_env_t *env)
{
    /* An object is read in one pass: iterated from its opening brace
     * (partial mode finds the closing one), not skipped first and then
     * iterated. */
    tg_jobj_iter_t it;
    int rc = tg_jobj_begin_partial(&it, buf, len, 0);
    if (rc == -1) {
        tg_jspan_t top;
        long end = tg_jscan_value(buf, len, 0, &top);
        if (end < 0 || top.type != TG_J_ARRAY || !tg_json_blank_from(buf, len, (size_t)end))
            return -1;
        env->kind = TG_MCP_BATCH;
        return 0;
    }
    if (rc < 0)
        return -1;
    tg_jspan_t k, v;
    bool call_read = false; /* a tools/call's params were read in this pass */
    while ((rc = tg_jobj_key(&it, &k)) == 1) {
        top_key_t which = top_key(buf, k);
        /* The usual order puts the method first: then a tools/call's
         * params are read in place and its arguments skipped once. */
        if (which == TK_PARAMS && env->params.type == TG_J_NONE && env->method.type != TG_J_NONE &&
            is_tools_call(buf, env->method)) {
            tg_jobj_iter_t pit;
            int er = tg_jobj_enter(&it, &pit);
            if (er < 0)
                return -1;
            if (er == 1) {
                call_ctx_t c;
                memset(&c, 0, sizeof c);
                if (call_members(&pit, buf, &c) < 0 || tg_jobj_leave(&it, &pit, &env->params) < 0)
                    return -1;
                call_apply(buf, &c, env);
                call_read = true;
                continue;
            }
        }
        if (tg_jobj_value(&it, &v) < 0 || top_take(env, which, v) < 0)
            return -1;
    }
    if (rc < 0 || !tg_json_blank_from(buf, len, it.pos))
        return -1;
    params_need_t need;
    if (top_finish(buf, env, &need) < 0)
        return -1;
    switch (need) {
    case NEED_CALL:
        return call_read ? 0 : scan_call(buf, env);
    case NEED_CANCEL:
        return scan_one(buf, env, "requestId", &env->cancel_id);
    case NEED_PROGRESS:
        return scan_one(buf, env, "progressToken", &env->notif_progress_token);
    default:
        return 0;
    }
}

int tg_mcp_scan(const char *buf, size_t len, tg_mcp_env_t *env)
{
    memset(env, 0, sizeof *env);
    if (scan_bytes(buf, len, env) < 0)
        return invalid(env);
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

/* Deepest bracket nesting outside strings, counted up to <limit> + 1
 * (a byte walk: only for frames already refused). */
static size_t nest_depth(const char *buf, size_t len, size_t limit)
{
    size_t d = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < len && max <= limit; i++) {
        char c = buf[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            if (++d > max)
                max = d;
        } else if ((c == '}' || c == ']') && d > 0) {
            d--;
        }
    }
    return max;
}

void tg_mcp_salvage(const char *buf, size_t len, tg_mcp_salvage_t *out)
{
    memset(out, 0, sizeof *out);
    out->too_deep = nest_depth(buf, len, TG_JSCAN_MAX_DEPTH) > TG_JSCAN_MAX_DEPTH;
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    bool has_id = false;
    /* Members in order until the fault (partial mode: a cut value ends it
     * like a malformed one). The first of a repeated key is kept. */
    if (tg_jobj_begin_partial(&it, buf, len, 0) < 0)
        return;
    while (tg_jobj_key(&it, &k) == 1) {
        /* The key counts even when its value is the fault: a "result"
         * that does not parse still makes the frame a response. */
        top_key_t which = top_key(buf, k);
        if (which == TK_RESULT || which == TK_ERROR)
            out->response = true;
        else if (which == TK_METHOD)
            out->method_key = true;
        if (tg_jobj_value(&it, &v) < 0)
            break;
        if (which == TK_ID && !has_id && is_id_type(v.type)) {
            out->id = v;
            has_id = true;
        } else if (which == TK_METHOD) {
            out->method |= v.type == TG_J_STRING;
        }
    }
    out->request = has_id && out->method;
}

#define STR_(x) #x
#define STR(x) STR_(x)

void tg_mcp_judge(const char *buf, size_t len, tg_mcp_verdict_t *v)
{
    tg_mcp_salvage_t sv;
    tg_mcp_salvage(buf, len, &sv);
    memset(v, 0, sizeof *v);
    if (sv.id.type != TG_J_NONE && (sv.method_key || !sv.response))
        v->id = sv.id;
    if (sv.too_deep) {
        v->code = -32600;
        v->message = "invalid request: nested deeper than " STR(TG_JSCAN_MAX_DEPTH) " levels";
        v->reason = "nested_too_deep";
        return;
    }
    /* jscan validates strictly (RFC 8259, UTF-8 included), as jansson
     * does: the same verdict on valid JSON as a full parser's. */
    tg_jspan_t top;
    long end = tg_jscan_value(buf, len, 0, &top);
    bool json = end >= 0;
    for (size_t i = json ? (size_t)end : len; i < len; i++)
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r' && buf[i] != '\n')
            json = false;
    if (json) {
        v->code = -32600;
        v->message = "invalid request: not a JSON-RPC 2.0 request object";
        v->reason = "invalid_request";
    } else {
        v->code = -32700;
        v->message = "parse error: the message is not valid JSON";
        v->reason = "parse_error";
    }
}

/* ---- over-cap frames, read as a stream ---- */

enum head_state {
    HS_START = 0, /* before the top-level '{' */
    HS_KEY_OR_END, /* at the top, a key or '}' next */
    HS_KEY,        /* in a top-level key */
    HS_COLON,      /* after a key */
    HS_VALUE,      /* before a top-level value */
    HS_STR,        /* in a top-level string value */
    HS_SCALAR,     /* in a top-level number or literal */
    HS_NEST,       /* inside a nested object or array, outside strings */
    HS_NEST_STR,   /* in a string inside it */
    HS_AFTER,      /* after a top-level value: ',' or '}' */
    HS_END,        /* the top-level object closed, or the grammar broke */
};

void tg_mcp_head_init(tg_mcp_head_t *h)
{
    memset(h, 0, sizeof *h);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The id's bytes as they come; the bound voids it (it could not be echoed
 * whole). */
static void id_put(tg_mcp_head_t *h, char c)
{
    if (h->key != TK_ID || h->id_void)
        return;
    if (h->id_len == sizeof h->id) {
        h->id_void = true;
        return;
    }
    h->id[h->id_len++] = c;
}

static void key_done(tg_mcp_head_t *h)
{
    top_key_t k = TK_OTHER;
    size_t n = h->klen;
    if (n == 2 && memcmp(h->kbuf, "id", 2) == 0)
        k = TK_ID;
    else if (n == 6 && memcmp(h->kbuf, "method", 6) == 0)
        k = TK_METHOD;
    else if (n == 6 && memcmp(h->kbuf, "result", 6) == 0)
        k = TK_RESULT;
    else if (n == 5 && memcmp(h->kbuf, "error", 5) == 0)
        k = TK_ERROR;
    h->key = (uint8_t)k;
    if (k == TK_ID) {
        if (h->id_seen)
            h->id_void = true;
        h->id_seen = true;
        h->id_len = 0;
    } else if (k == TK_METHOD) {
        h->method = true;
    } else if (k == TK_RESULT || k == TK_ERROR) {
        h->response = true;
    }
}

/* Where a top-level value ends: the next key, the end, or a broken frame. */
static void after_value(tg_mcp_head_t *h, char c)
{
    h->key = TK_OTHER;
    if (c == ',')
        h->st = HS_KEY_OR_END;
    else if (c == '}')
        h->st = HS_END;
    else if (is_blank(c))
        h->st = HS_AFTER;
    else
        h->st = HS_END;
}

void tg_mcp_head_feed(tg_mcp_head_t *h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        switch (h->st) {
        case HS_NEST_STR: {
            /* The bulk of a big frame: run to the next quote or backslash. */
            if (h->esc) {
                h->esc = false;
                break;
            }
            while (i < n && p[i] != '"' && p[i] != '\\')
                i++;
            if (i == n)
                return;
            if (p[i] == '\\')
                h->esc = true;
            else
                h->st = HS_NEST;
            break;
        }
        case HS_NEST:
            if (c == '"') {
                h->st = HS_NEST_STR;
            } else if (c == '{' || c == '[') {
                h->depth++;
            } else if (c == '}' || c == ']') {
                if (--h->depth == 1)
                    h->st = HS_AFTER;
            }
            break;
        case HS_START:
            if (c == '{') {
                h->depth = 1;
                h->st = HS_KEY_OR_END;
            } else if (!is_blank(c)) {
                h->st = HS_END;
            }
            break;
        case HS_KEY_OR_END:
            if (c == '"') {
                h->st = HS_KEY;
                h->klen = 0;
            } else if (c == '}') {
                h->st = HS_END;
            } else if (!is_blank(c)) {
                h->st = HS_END;
            }
            break;
        case HS_KEY:
            if (h->esc) {
                h->esc = false;
            } else if (c == '\\') {
                /* An escaped key is read as no key toolgate knows: real
                 * clients never escape "id". */
                h->esc = true;
                h->klen = sizeof h->kbuf;
            } else if (c == '"') {
                key_done(h);
                h->st = HS_COLON;
            } else if (h->klen < sizeof h->kbuf) {
                h->kbuf[h->klen++] = c;
            }
            break;
        case HS_COLON:
            if (c == ':')
                h->st = HS_VALUE;
            else if (!is_blank(c))
                h->st = HS_END;
            break;
        case HS_VALUE:
            if (is_blank(c))
                break;
            if (c == '"') {
                id_put(h, c);
                h->st = HS_STR;
            } else if (c == '{' || c == '[') {
                if (h->key == TK_ID)
                    h->id_void = true;
                h->depth++;
                h->st = HS_NEST;
            } else if (c == ',' || c == '}') {
                h->st = HS_END;
            } else {
                if (h->key == TK_ID && !(c == '-' || (c >= '0' && c <= '9') || c == 'n'))
                    h->id_void = true; /* true or false: not an id */
                id_put(h, c);
                h->st = HS_SCALAR;
            }
            break;
        case HS_STR:
            id_put(h, c);
            if (h->esc)
                h->esc = false;
            else if (c == '\\')
                h->esc = true;
            else if (c == '"')
                h->st = HS_AFTER;
            break;
        case HS_SCALAR:
            if (c == ',' || c == '}' || is_blank(c))
                after_value(h, c);
            else
                id_put(h, c);
            break;
        case HS_AFTER:
            after_value(h, c);
            break;
        default:
            return;
        }
    }
}

int tg_mcp_head_id(const tg_mcp_head_t *h, const char **id, size_t *len)
{
    if (!h->id_seen || h->id_void || h->id_len == 0)
        return 0;
    /* Complete only once the value ended (a scalar cut by the end of what
     * was fed may be a prefix). */
    if (h->st == HS_VALUE || h->st == HS_STR || h->st == HS_SCALAR)
        if (h->key == TK_ID)
            return 0;
    tg_jspan_t v;
    if (tg_jscan_value(h->id, h->id_len, 0, &v) != (long)h->id_len || !is_id_type(v.type))
        return 0;
    *id = h->id;
    *len = h->id_len;
    return 1;
}

/* ---- MCP tasks ---- */

int tg_mcp_task_read(const char *buf, tg_jspan_t obj, tg_mcp_task_t *t)
{
    memset(t, 0, sizeof *t);
    if (obj.type != TG_J_OBJECT)
        return -1;
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    tg_jobj_begin(&it, buf, obj);
    while (tg_jobj_next(&it, &k, &v) == 1) {
        if (KEY_IS(buf, k, "taskId") && v.type == TG_J_STRING)
            t->id = v;
        else if (KEY_IS(buf, k, "status") && v.type == TG_J_STRING)
            t->status = v;
        else if (KEY_IS(buf, k, "ttl") && v.type == TG_J_NUMBER)
            t->ttl = v;
    }
    return 0;
}

int tg_mcp_frame_member(const char *buf, size_t len, const char *key, tg_jspan_t *out)
{
    tg_jspan_t top;
    if (tg_jscan_value(buf, len, 0, &top) < 0 || top.type != TG_J_OBJECT)
        return 0;
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    tg_jobj_begin(&it, buf, top);
    while (tg_jobj_next(&it, &k, &v) == 1) {
        if (tg_jstr_eq(buf, k, key)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

tg_task_status_t tg_mcp_task_status(const char *buf, tg_jspan_t status)
{
    if (status.type != TG_J_STRING)
        return TG_TASK_LIVE;
    if (tg_jstr_eq(buf, status, "completed"))
        return TG_TASK_COMPLETED;
    if (tg_jstr_eq(buf, status, "failed"))
        return TG_TASK_FAILED;
    if (tg_jstr_eq(buf, status, "cancelled"))
        return TG_TASK_CANCELLED;
    return TG_TASK_LIVE;
}

/* ---- the bridge's caller_gone cancel ------------------------------------ */

const char *tg_mcp_gone_tail(size_t *len)
{
    static char tail[96];
    static size_t n;
    if (n == 0) {
        unsigned char raw[16];
        char hex[33];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
            /* No randomness: a token still unknown to the client (it never
             * sees this process's address space or start time). */
            uint64_t v = (uint64_t)(uintptr_t)&n ^ (uint64_t)time(NULL) * 1000003u ^ ((uint64_t)getpid() << 32);
            memcpy(raw, &v, sizeof(v));
            memcpy(raw + 8, &v, sizeof(v));
        }
        for (size_t i = 0; i < sizeof(raw); i++)
            snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        int k = snprintf(tail, sizeof(tail), ",\"reason\":\"caller_gone\",\"bridge\":\"%s\"}}", hex);
        n = k > 0 ? (size_t)k : 0;
    }
    *len = n;
    return tail;
}

/* ---- the tools a tools/list answer names -------------------------------- */

int tg_mcp_tools_listed(const char *frame, size_t len,
                        int (*fn)(void *ctx, const char *name, size_t len), void *ctx)
{
    tg_jspan_t tools, tool, key, val;
    if (tg_jscan_find_path(frame, len, "result.tools", &tools) < 0 || tools.type != TG_J_ARRAY)
        return -1;
    tg_jarr_iter_t it;
    tg_jarr_begin(&it, frame, tools);
    int n = 0, rc;
    while ((rc = tg_jarr_next(&it, &tool)) == 1) {
        if (tool.type != TG_J_OBJECT)
            continue;
        tg_jobj_iter_t m;
        tg_jobj_begin(&m, frame, tool);
        tg_jspan_t name = {.type = TG_J_NONE};
        while (tg_jobj_next(&m, &key, &val) == 1)
            if (tg_jstr_eq(frame, key, "name"))
                name = val; /* the last of duplicates, as jansson reads it */
        char buf[TG_MCP_TOOL_NAME_MAX + 1];
        long k = name.type == TG_J_STRING ? tg_jstr_decode(frame, name, buf, sizeof(buf)) : -1;
        if (k <= 0)
            continue;
        if (fn(ctx, buf, (size_t)k) < 0)
            break;
        n++;
    }
    return rc < 0 ? -1 : n;
}

