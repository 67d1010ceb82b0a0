/* The 2025 -> 2026 bridge of one session (issue 23): a client speaking MCP
 * 2026-07-28 (no initialize; server/discover, resultType) in front of an
 * agent that speaks only the 2025 era (initialize, no server/discover).
 *
 * How it starts. The caller's server/discover goes to the agent as any
 * request. An agent that answers it with a result speaks 2026 itself:
 * everything passes as it is. An agent that answers with an error (a 2025
 * server: -32601) is initialized by toolgate instead (protocol 2025-11-25,
 * no client capabilities, clientInfo toolgate's), and the caller's
 * server/discover is answered from that InitializeResult
 * (router/codec/bridge26.c tg_b26_discover). The initialize toolgate sent
 * is kept as the session's init frame, so a restarted agent is
 * initialized again as after a caller's own initialize.
 *
 * While bridged:
 *  - every result to the caller gains resultType "complete" (and the
 *    agent's serverInfo in _meta); the lists' results, ttlMs 0 and their
 *    cacheScope (tg_b26_cacheable); errors pass as they are, -32002
 *    spelled -32602;
 *  - a later server/discover is answered from the kept InitializeResult;
 *  - the agent's own requests to the client (sampling, elicitation,
 *    roots/list) are answered by toolgate with an error, never sent on:
 *    a 2026 client takes no requests, and the multi round-trip that
 *    carries them (InputRequiredResult, a sealed requestState:
 *    router/codec/seal.c) is not wired yet. Toolgate declared no client
 *    capabilities, so a well-behaved 2025 server does not ask.
 *
 * Only for a session without a hub (wrap, a listener with one agent).
 * Cost: one parse and one dump per answer of a bridged session only; a
 * session whose agent speaks the caller's era takes none of this.
 */
#include "router/dialect/mcp/session_impl.h"

#include "router/codec/bridge26.h"

#define B26_INIT_VERSION "2025-11-25" /* the 2025 era's newest, asked of the agent */

static const char *const list_methods[] = {"tools/list", "prompts/list", "resources/list",
                                           "resources/templates/list", "resources/read"};

uint8_t mcp_b26_kind(const mcp_sess_t *w, const char *frame, tg_jspan_t method)
{
    if (w->hub != NULL)
        return B26_NONE;
    if (method.len == sizeof("\"server/discover\"") - 1 && tg_jstr_eq(frame, method, "server/discover"))
        return B26_DISCOVER;
    if (!w->b26_on)
        return B26_NONE;
    for (size_t i = 0; i < sizeof(list_methods) / sizeof(list_methods[0]); i++)
        if (tg_jstr_eq(frame, method, list_methods[i]))
            return (uint8_t)(B26_LIST + i);
    return B26_RESULT;
}

/* {"jsonrpc":"2.0","id":<cid>,"result":<result>}\n to the caller; <result> taken. */
static void answer(mcp_sess_t *w, const char *cid, size_t cid_len, json_t *result)
{
    char *r = json_dumps(result, JSON_COMPACT);
    json_decref(result);
    if (r == NULL) {
        mcp_rpc_error(w, cid, cid_len, -32603, "toolgate: out of memory bridging a result");
        return;
    }
    if (!mcp_cdead(w)) {
        tg_out_copy(w->cw, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
        tg_out_copy(w->cw, cid, cid_len);
        tg_out_copy(w->cw, ",\"result\":", 10);
        tg_out_copy(w->cw, r, strlen(r));
        tg_out_copy(w->cw, "}\n", 2);
    }
    free(r);
}

/* The agent's error <frame> to the caller under <cid>, its code as 2026
 * spells it. */
static void pass_error(mcp_sess_t *w, const char *frame, size_t len, const char *cid,
                       size_t cid_len)
{
    json_t *root = json_loadb(frame, len, 0, NULL);
    json_t *err = json_object_get(root, "error");
    json_t *code = json_object_get(err, "code");
    const char *msg = json_string_value(json_object_get(err, "message"));
    if (json_is_integer(code) && msg != NULL)
        mcp_rpc_error(w, cid, cid_len, tg_b26_error_code((int)json_integer_value(code)), msg);
    else
        mcp_rpc_error(w, cid, cid_len, -32603, "the agent answered with a malformed error");
    json_decref(root);
}

/* The caller's server/discover, answered from the agent's InitializeResult. */
static void answer_discover(mcp_sess_t *w, const char *cid, size_t cid_len)
{
    char why[160];
    json_t *d = tg_b26_discover(w->b26_init, 0, TG_B26_PUBLIC, TG_B26_NO_NOTIFY, why, sizeof(why));
    if (d == NULL) {
        char msg[224];
        snprintf(msg, sizeof(msg), "toolgate: the agent's initialize result cannot be bridged: %s",
                 why);
        mcp_rpc_error(w, cid, cid_len, -32603, msg);
        return;
    }
    answer(w, cid, cid_len, d);
}

/* The agent (a 2025 server) refused server/discover: toolgate initializes
 * it for the caller whose discover was <c>. */
static void start(mcp_sess_t *w, const mcp_call_t *c)
{
    mcp_call_t *n = mcp_agent_writable(w) ? mcp_call_alloc(w, K_PASS) : NULL;
    if (n == NULL) {
        mcp_rpc_error(w, c->caller_id, c->caller_id_len, -32603,
                      "toolgate: the agent speaks MCP 2025 and could not be initialized for "
                      "this 2026 client (request table full or agent down)");
        return;
    }
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    char f[256];
    int k = snprintf(f, sizeof(f),
                     "%s0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
                     "\"capabilities\":{},\"clientInfo\":{\"name\":\"toolgate\",\"version\":\"%s\"}}}\n",
                     head, B26_INIT_VERSION, TG_VERSION);
    if (k <= 0 || (size_t)k >= sizeof(f)) {
        mcp_call_free(n);
        return;
    }
    n->b26 = B26_INIT;
    memcpy(n->caller_id, c->caller_id, c->caller_id_len);
    n->caller_id_len = c->caller_id_len;
    /* Kept as the caller's own initialize would be: a restart replays it. */
    char *keep = malloc((size_t)k);
    if (keep != NULL) {
        memcpy(keep, f, (size_t)k);
        free(w->init_frame);
        w->init_frame = keep;
        w->init_len = (size_t)k;
        w->init_id_off = sizeof(head) - 1;
        w->init_id_len = 1;
    }
    mcp_to_agent_spliced(w, NULL, f, (size_t)k, sizeof(head) - 1, 1, n->cc.id);
    tg_log("agent '%s' speaks MCP 2025 only: toolgate initialized it and bridges this "
                "session's MCP 2026-07-28 client",
                agent_name(w));
}

/* The answer to toolgate's own initialize. */
static void init_answered(mcp_sess_t *w, const mcp_call_t *c, const char *frame, size_t len,
                          const tg_mcp_env_t *env)
{
    if (!env->has_result) {
        pass_error(w, frame, len, c->caller_id, c->caller_id_len);
        return;
    }
    json_t *root = json_loadb(frame, len, 0, NULL);
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res)) {
        json_decref(root);
        mcp_rpc_error(w, c->caller_id, c->caller_id_len, -32603,
                      "toolgate: the agent's initialize result is not an object");
        return;
    }
    json_decref(w->b26_init);
    w->b26_init = json_incref(res);
    json_decref(root);
    static const char initd[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    char *keep = malloc(sizeof(initd) - 1);
    if (keep != NULL) {
        memcpy(keep, initd, sizeof(initd) - 1);
        free(w->initd_frame);
        w->initd_frame = keep;
        w->initd_len = sizeof(initd) - 1;
    }
    if (mcp_agent_writable(w))
        tg_out_copy(&w->inst->a.p.wr, initd, sizeof(initd) - 1);
    w->b26_on = true;
    answer_discover(w, c->caller_id, c->caller_id_len);
}

bool mcp_b26_answer(mcp_sess_t *w, const mcp_call_t *c, const char *frame, size_t len,
                    const tg_mcp_env_t *env)
{
    switch (c->b26) {
    case B26_DISCOVER:
        if (env->has_result && !w->b26_on)
            return false; /* the agent speaks 2026 itself */
        if (w->b26_on)
            answer_discover(w, c->caller_id, c->caller_id_len);
        else
            start(w, c);
        return true;
    case B26_INIT:
        init_answered(w, c, frame, len, env);
        return true;
    case B26_NONE:
        return false;
    default:
        return mcp_b26_result(w, c->b26, frame, len, env, c->caller_id, c->caller_id_len);
    }
}

bool mcp_b26_result(mcp_sess_t *w, uint8_t kind, const char *frame, size_t len,
                    const tg_mcp_env_t *env, const char *cid, size_t cid_len)
{
    if (!w->b26_on)
        return false;
    if (!env->has_result) {
        pass_error(w, frame, len, cid, cid_len);
        return true;
    }
    json_t *root = json_loadb(frame, len, 0, NULL);
    json_t *res = json_incref(json_object_get(root, "result"));
    json_decref(root);
    const json_t *info = json_object_get(w->b26_init, "serverInfo");
    int rc = -EINVAL;
    if (json_is_object(res) && kind >= B26_LIST &&
        kind < B26_LIST + sizeof(list_methods) / sizeof(list_methods[0]))
        rc = tg_b26_cacheable(res, 0, tg_b26_scope_for(list_methods[kind - B26_LIST], false),
                              json_is_object(info) ? info : NULL);
    else if (json_is_object(res))
        rc = tg_b26_complete(res, json_is_object(info) ? info : NULL);
    if (rc < 0) {
        json_decref(res);
        mcp_rpc_error(w, cid, cid_len, -32603, "toolgate: the agent's result is not an object");
        return true;
    }
    answer(w, cid, cid_len, res);
    return true;
}

bool mcp_b26_agent_request(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env)
{
    if (!w->b26_on || env->kind != TG_MCP_REQUEST || !mcp_agent_writable(w))
        return w->b26_on && env->kind == TG_MCP_REQUEST;
    char buf[TG_DENIAL_MAX];
    long n = tg_rpc_error(buf, sizeof(buf), frame + env->id.off, env->id.len, -32601,
                          "toolgate: the client speaks MCP 2026-07-28, which takes no requests "
                          "from servers; toolgate does not carry them to it yet");
    if (n > 0)
        tg_out_copy(&w->inst->a.p.wr, buf, (size_t)n);
    return true;
}
