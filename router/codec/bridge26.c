/* MCP 2025 -> 2026 translations for the bridge: see bridge26.h. */
#include "router/codec/bridge26.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Write a reason into <why> (may be NULL) and return <rc>: one line. */
__attribute__((format(printf, 4, 5))) static int fail(int rc, char *why, size_t cap,
                                                      const char *fmt, ...)
{
    if (why != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static const char *kind_method(tg_b26_kind_t k)
{
    return k == TG_B26_SAMPLING      ? "sampling/createMessage"
           : k == TG_B26_ELICITATION ? "elicitation/create"
           : k == TG_B26_ROOTS       ? "roots/list"
                                     : NULL;
}

static const char *kind_word(tg_b26_kind_t k)
{
    return k == TG_B26_SAMPLING ? "sampling" : k == TG_B26_ELICITATION ? "elicitation" : "roots";
}

static tg_b26_kind_t kind_of(const char *method)
{
    for (tg_b26_kind_t k = TG_B26_SAMPLING; k <= TG_B26_ROOTS; k++)
        if (strcmp(method, kind_method(k)) == 0)
            return k;
    return 0;
}

/* <v> is a JSON-RPC id a 2025 peer may use for a request: a string or an
 * integer (JSON-RPC 2.0 allows null and fractions; MCP's RequestId is
 * string | number and toolgate refuses null and fractions, as elsewhere). */
static bool id_ok(const json_t *v)
{
    return json_is_string(v) || json_is_integer(v);
}

void tg_b26_pending_clear(tg_b26_pending_t *p)
{
    json_decref(p->id);
    memset(p, 0, sizeof *p);
}

/* ---- results ---- */

static const char *scope_word(tg_b26_scope_t s)
{
    return s == TG_B26_PUBLIC ? "public" : "private";
}

json_t *tg_b26_discover(const json_t *init, int64_t ttl_ms, tg_b26_scope_t scope, unsigned flags,
                        char *why, size_t cap)
{
    /* server/discover.mdx "Response" and "DiscoverResult"; schema.ts
     * DiscoverResult extends CacheableResult. */
    if (!json_is_object(init))
        return fail(0, why, cap, "initialize result: not an object"), NULL;
    const json_t *caps = json_object_get(init, "capabilities");
    const json_t *info = json_object_get(init, "serverInfo");
    const json_t *instr = json_object_get(init, "instructions");
    if (!json_is_string(json_object_get(init, "protocolVersion")))
        return fail(0, why, cap, "initialize result: protocolVersion: not a string"), NULL;
    if (!json_is_object(caps))
        return fail(0, why, cap, "initialize result: capabilities: not an object"), NULL;
    if (!json_is_object(info) || !json_is_string(json_object_get(info, "name")) ||
        !json_is_string(json_object_get(info, "version")))
        return fail(0, why, cap, "initialize result: serverInfo: needs string name and version"),
               NULL;
    if (instr != NULL && !json_is_string(instr))
        return fail(0, why, cap, "initialize result: instructions: not a string"), NULL;
    if (ttl_ms < 0)
        return fail(0, why, cap, "ttlMs: negative"), NULL;

    json_t *c = json_deep_copy(caps);
    json_t *meta = json_object();
    json_t *out = json_object();
    if (c == NULL || meta == NULL || out == NULL)
        goto oom;
    json_object_del(c, "tasks");
    if (flags & TG_B26_NO_NOTIFY) {
        static const char *const lists[] = {"tools", "prompts", "resources"};
        for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
            json_t *o = json_object_get(c, lists[i]);
            json_object_del(o, "listChanged");
            json_object_del(o, "subscribe");
        }
    }
    if (json_object_set_new(meta, TG_B26_META_SINFO, json_deep_copy(info)) < 0 ||
        json_object_set_new(out, "resultType", json_string("complete")) < 0 ||
        json_object_set_new(out, "supportedVersions", json_pack("[s]", TG_B26_VERSION)) < 0 ||
        json_object_set(out, "capabilities", c) < 0 || json_object_set(out, "_meta", meta) < 0 ||
        (instr != NULL && json_object_set_new(out, "instructions", json_deep_copy(instr)) < 0) ||
        json_object_set_new(out, "ttlMs", json_integer(ttl_ms)) < 0 ||
        json_object_set_new(out, "cacheScope", json_string(scope_word(scope))) < 0)
        goto oom;
    json_decref(c);
    json_decref(meta);
    return out;
oom:
    json_decref(c);
    json_decref(meta);
    json_decref(out);
    return fail(0, why, cap, "out of memory"), NULL;
}

int tg_b26_complete(json_t *result, const json_t *server_info)
{
    /* changelog major 8; schema.ts Result.resultType, ResultMetaObject. */
    if (!json_is_object(result) || (server_info != NULL && !json_is_object(server_info)))
        return -EINVAL;
    json_t *meta = json_object_get(result, "_meta");
    if (server_info != NULL && meta != NULL && !json_is_object(meta))
        return -EINVAL;
    if (json_object_set_new(result, "resultType", json_string("complete")) < 0)
        return -ENOMEM;
    json_object_del(result, "inputRequests");
    json_object_del(result, "requestState");
    if (server_info == NULL)
        return 0;
    if (meta == NULL) {
        meta = json_object();
        if (meta == NULL || json_object_set_new(result, "_meta", meta) < 0)
            return -ENOMEM;
    }
    return json_object_set_new(meta, TG_B26_META_SINFO, json_deep_copy(server_info)) < 0 ? -ENOMEM
                                                                                         : 0;
}

int tg_b26_cacheable(json_t *result, int64_t ttl_ms, tg_b26_scope_t scope,
                     const json_t *server_info)
{
    /* server/utilities/caching.mdx "Cacheable Results"; schema.ts
     * CacheableResult: ttlMs >= 0, cacheScope "public" | "private". */
    if (ttl_ms < 0)
        return -EINVAL;
    int rc = tg_b26_complete(result, server_info);
    if (rc < 0)
        return rc;
    if (json_object_set_new(result, "ttlMs", json_integer(ttl_ms)) < 0 ||
        json_object_set_new(result, "cacheScope", json_string(scope_word(scope))) < 0)
        return -ENOMEM;
    return 0;
}

tg_b26_scope_t tg_b26_scope_for(const char *method, bool filtered)
{
    /* caching.mdx "Choosing a Cache Scope". */
    static const char *const shared[] = {"tools/list", "prompts/list", "resources/templates/list",
                                         "server/discover"};
    if (filtered || method == NULL)
        return TG_B26_PRIVATE;
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
        if (strcmp(method, shared[i]) == 0)
            return TG_B26_PUBLIC;
    return TG_B26_PRIVATE;
}

int tg_b26_error_code(int code)
{
    return code == -32002 ? -32602 : code; /* changelog minor 6 */
}

/* ---- multi round-trip requests ---- */

bool tg_b26_client_supports(const json_t *caps, tg_b26_kind_t kind, const json_t *params)
{
    const json_t *c = json_is_object(caps) ? json_object_get(caps, kind_word(kind)) : NULL;
    if (!json_is_object(c))
        return false;
    switch (kind) {
    case TG_B26_SAMPLING: {
        /* client/sampling.mdx "Capabilities", and its tool use section. */
        const json_t *ctx = json_object_get(params, "includeContext");
        if ((json_object_get(params, "tools") != NULL ||
             json_object_get(params, "toolChoice") != NULL) &&
            json_object_get(c, "tools") == NULL)
            return false;
        if (ctx != NULL && !(json_is_string(ctx) && strcmp(json_string_value(ctx), "none") == 0) &&
            json_object_get(c, "context") == NULL)
            return false;
        return true;
    }
    case TG_B26_ELICITATION: {
        /* client/elicitation.mdx "Capabilities": {} is form only. */
        const json_t *m = json_object_get(params, "mode");
        const char *mode = m == NULL ? "form" : json_is_string(m) ? json_string_value(m) : "";
        bool form = json_object_get(c, "form") != NULL, url = json_object_get(c, "url") != NULL;
        if (!form && !url)
            form = true;
        return (strcmp(mode, "form") == 0 && form) || (strcmp(mode, "url") == 0 && url);
    }
    case TG_B26_ROOTS:
        return true;
    }
    return false;
}

int tg_b26_input_request(const json_t *req, const json_t *caps, size_t index,
                         tg_b26_pending_t *pend, json_t **entry, char *why, size_t cap)
{
    /* mrtr.mdx "InputRequests"; schema.ts InputRequest = CreateMessageRequest
     * | ListRootsRequest | ElicitRequest, each { method, params }. */
    if (index >= TG_B26_INPUTS_MAX)
        return fail(-ERANGE, why, cap, "more than %d input requests at once", TG_B26_INPUTS_MAX);
    if (!json_is_object(req))
        return fail(-EINVAL, why, cap, "server request: not an object");
    const json_t *ver = json_object_get(req, "jsonrpc");
    const json_t *id = json_object_get(req, "id");
    const json_t *method = json_object_get(req, "method");
    const json_t *params = json_object_get(req, "params");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
        return fail(-EINVAL, why, cap, "server request: jsonrpc: not \"2.0\"");
    if (!id_ok(id))
        return fail(-EINVAL, why, cap, "server request: id: not a string or integer");
    if (!json_is_string(method))
        return fail(-EINVAL, why, cap, "server request: method: not a string");
    tg_b26_kind_t kind = kind_of(json_string_value(method));
    if (kind == 0)
        return fail(-EOPNOTSUPP, why, cap, "server request: %s is not an input request",
                    json_string_value(method));
    if (params != NULL && !json_is_object(params))
        return fail(-EINVAL, why, cap, "server request: params: not an object");
    if (params == NULL && kind != TG_B26_ROOTS)
        return fail(-EINVAL, why, cap, "server request: %s without params", kind_method(kind));
    if (json_object_get(params, "task") != NULL)
        return fail(-EOPNOTSUPP, why, cap, "server request: task-augmented %s not bridged",
                    kind_method(kind));
    if (!tg_b26_client_supports(caps, kind, params))
        return fail(-ENOPROTOOPT, why, cap, "client did not declare the capability for %s",
                    kind_method(kind));

    json_t *e = json_object(), *p = params != NULL ? json_deep_copy(params) : NULL;
    json_t *idc = json_deep_copy(id);
    if (e == NULL || idc == NULL || (params != NULL && p == NULL) ||
        json_object_set_new(e, "method", json_string(kind_method(kind))) < 0)
        goto oom;
    if (p != NULL) {
        if (kind == TG_B26_ELICITATION)
            json_object_del(p, "elicitationId"); /* changelog minor 11 */
        int rc = json_object_set_new(e, "params", p);
        p = NULL; /* set_new took it, on failure too */
        if (rc < 0)
            goto oom;
    }
    memset(pend, 0, sizeof *pend);
    snprintf(pend->key, sizeof pend->key, "%s_%zu", kind_word(kind), index);
    pend->kind = kind;
    pend->id = idc;
    *entry = e;
    return 0;
oom:
    json_decref(e);
    json_decref(p);
    json_decref(idc);
    return fail(-ENOMEM, why, cap, "out of memory");
}

json_t *tg_b26_input_required(const tg_b26_pending_t *pend, json_t *const *entries, size_t n,
                              const char *state, char *why, size_t cap)
{
    /* mrtr.mdx "InputRequiredResult", "Server Requirements"; schema.ts
     * InputRequiredResult. */
    if (n > TG_B26_INPUTS_MAX)
        return fail(0, why, cap, "more than %d input requests at once", TG_B26_INPUTS_MAX), NULL;
    if (n == 0 && state == NULL)
        return fail(0, why, cap, "neither inputRequests nor requestState"), NULL;
    json_t *out = json_object(), *reqs = n > 0 ? json_object() : NULL;
    if (out == NULL || (n > 0 && reqs == NULL) ||
        json_object_set_new(out, "resultType", json_string("input_required")) < 0)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        if (!json_is_object(entries[i]) || pend[i].key[0] == '\0') {
            fail(0, why, cap, "input request %zu: no entry or no key", i);
            goto bad;
        }
        if (json_object_get(reqs, pend[i].key) != NULL) {
            fail(0, why, cap, "input request key %s: twice", pend[i].key);
            goto bad;
        }
        if (json_object_set(reqs, pend[i].key, entries[i]) < 0)
            goto oom;
    }
    if (reqs != NULL) {
        int rc = json_object_set_new(out, "inputRequests", reqs);
        reqs = NULL;
        if (rc < 0)
            goto oom;
    }
    if (state != NULL && json_object_set_new(out, "requestState", json_string(state)) < 0)
        goto oom;
    return out;
oom:
    fail(0, why, cap, "out of memory");
bad:
    json_decref(reqs);
    json_decref(out);
    return NULL;
}

/* ---- the retry's inputResponses ---- */

/* ElicitResult (schema.ts): action, and content only values of
 * PrimitiveSchemaDefinition's kinds (string, number, boolean, string[]). */
static int check_elicit(const json_t *v, const char *key, char *why, size_t cap)
{
    const json_t *a = json_object_get(v, "action"), *c = json_object_get(v, "content");
    const char *s = json_string_value(a);
    if (s == NULL ||
        (strcmp(s, "accept") != 0 && strcmp(s, "decline") != 0 && strcmp(s, "cancel") != 0))
        return fail(-EINVAL, why, cap,
                    "inputResponses.%s.action: not \"accept\", \"decline\" or \"cancel\"", key);
    if (c == NULL)
        return 0;
    if (!json_is_object(c))
        return fail(-EINVAL, why, cap, "inputResponses.%s.content: not an object", key);
    const char *k;
    const json_t *f;
    json_object_foreach((json_t *)c, k, f)
    {
        bool ok = json_is_string(f) || json_is_number(f) || json_is_boolean(f);
        if (json_is_array(f)) {
            ok = true;
            for (size_t i = 0; i < json_array_size(f); i++)
                ok = ok && json_is_string(json_array_get(f, i));
        }
        if (!ok)
            return fail(-EINVAL, why, cap,
                        "inputResponses.%s.content.%s: not a string, number, boolean or list of "
                        "strings",
                        key, k);
    }
    return 0;
}

/* CreateMessageResult (schema.ts): role, content (one block or an array of
 * them), model. */
static int check_sampling(const json_t *v, const char *key, char *why, size_t cap)
{
    const char *role = json_string_value(json_object_get(v, "role"));
    const json_t *c = json_object_get(v, "content");
    if (role == NULL || (strcmp(role, "assistant") != 0 && strcmp(role, "user") != 0))
        return fail(-EINVAL, why, cap, "inputResponses.%s.role: not \"assistant\" or \"user\"",
                    key);
    if (!json_is_object(c) && !json_is_array(c))
        return fail(-EINVAL, why, cap, "inputResponses.%s.content: not an object or array", key);
    if (!json_is_string(json_object_get(v, "model")))
        return fail(-EINVAL, why, cap, "inputResponses.%s.model: not a string", key);
    return 0;
}

/* ListRootsResult (schema.ts): roots, each with a uri. */
static int check_roots(const json_t *v, const char *key, char *why, size_t cap)
{
    const json_t *r = json_object_get(v, "roots");
    if (!json_is_array(r))
        return fail(-EINVAL, why, cap, "inputResponses.%s.roots: not an array", key);
    for (size_t i = 0; i < json_array_size(r); i++)
        if (!json_is_string(json_object_get(json_array_get(r, i), "uri")))
            return fail(-EINVAL, why, cap, "inputResponses.%s.roots[%zu].uri: not a string", key,
                        i);
    return 0;
}

static int check_entry(tg_b26_kind_t kind, const json_t *v, const char *key, char *why, size_t cap)
{
    if (!json_is_object(v))
        return fail(-EINVAL, why, cap, "inputResponses.%s: not an object", key);
    switch (kind) {
    case TG_B26_ELICITATION:
        return check_elicit(v, key, why, cap);
    case TG_B26_SAMPLING:
        return check_sampling(v, key, why, cap);
    case TG_B26_ROOTS:
        return check_roots(v, key, why, cap);
    }
    return fail(-EINVAL, why, cap, "inputResponses.%s: no such request kind", key);
}

int tg_b26_input_responses(const json_t *params, const tg_b26_pending_t *pend, size_t n,
                           json_t **out, size_t *extra, char *why, size_t cap)
{
    /* mrtr.mdx "InputResponses", "Error Handling"; schema.ts
     * InputResponseRequestParams. */
    const char *missing = NULL;
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (extra != NULL)
        *extra = 0;
    if (!json_is_object(params))
        return fail(-EINVAL, why, cap, "params: not an object");
    const json_t *resp = json_object_get(params, "inputResponses");
    if (resp != NULL && !json_is_object(resp))
        return fail(-EINVAL, why, cap, "params.inputResponses: not an object");
    if (n > TG_B26_INPUTS_MAX)
        return fail(-EINVAL, why, cap, "more than %d input requests at once", TG_B26_INPUTS_MAX);
    /* Check every entry before building any response: a malformed one
     * refuses the whole retry, so nothing half-made reaches the server. */
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(resp, pend[i].key);
        if (v == NULL) {
            if (missing == NULL)
                missing = pend[i].key;
            continue;
        }
        found++;
        int rc = check_entry(pend[i].kind, v, pend[i].key, why, cap);
        if (rc < 0)
            return rc;
    }
    if (extra != NULL && resp != NULL)
        *extra = json_object_size(resp) - found;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(resp, pend[i].key);
        if (v == NULL)
            continue;
        out[i] = json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", pend[i].id, "result", v);
        if (out[i] == NULL) {
            for (size_t j = 0; j < i; j++) {
                json_decref(out[j]);
                out[j] = NULL;
            }
            return fail(-ENOMEM, why, cap, "out of memory");
        }
    }
    if (missing != NULL)
        return fail(-ENOENT, why, cap, "inputResponses.%s: missing", missing);
    return 0;
}

json_t *tg_b26_server_error(const json_t *id, int code, const char *message)
{
    if (!id_ok(id) || message == NULL)
        return NULL;
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code,
                     "message", message);
}

/* ---- requests ---- */

int tg_b26_strip_request(json_t *req)
{
    /* mrtr.mdx (inputResponses, requestState: InputResponseRequestParams);
     * basic/index.mdx "Per-request protocol fields" (the _meta keys). */
    static const char *const meta_keys[] = {TG_B26_META_VERSION, TG_B26_META_CINFO,
                                            TG_B26_META_CCAPS, TG_B26_META_LOGLEVEL};
    if (!json_is_object(req))
        return -EINVAL;
    json_t *params = json_object_get(req, "params");
    if (params == NULL)
        return 0;
    if (!json_is_object(params))
        return -EINVAL;
    json_t *meta = json_object_get(params, "_meta");
    if (meta != NULL && !json_is_object(meta))
        return -EINVAL;
    json_object_del(params, "inputResponses");
    json_object_del(params, "requestState");
    if (meta == NULL)
        return 0;
    for (size_t i = 0; i < sizeof meta_keys / sizeof *meta_keys; i++)
        json_object_del(meta, meta_keys[i]);
    if (json_object_size(meta) == 0)
        json_object_del(params, "_meta");
    return 0;
}
