/* Who may call what over Streamable HTTP (issue 22): `toolgate serve` with
 * an HTTP listener naming "agents", callers named by JWT, and a policy
 * matching the token's scope claim per agent. The list and the call agree
 * for each caller: what a scope does not allow is neither listed nor
 * callable (tool_not_allowed), through the same endpoint.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/http_client.h"
#include "tests/tg_jwt.h"
#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

#define ISS "https://idp.example"
#define AUD "toolgate"

static tgh_serve_t S;
static int port;

static void fini(void)
{
    tgh_cleanup();
}

TestSuite(hub_http, .fini = fini, .timeout = 60);

/* A JWT naming caller "svc" (sub) with OAuth scope <scope>, signed by <k>. */
static void token(EVP_PKEY *k, const char *scope, char *out, size_t cap)
{
    char claims[512];
    long now = (long)time(NULL);
    snprintf(claims, sizeof claims,
             "{\"sub\":\"svc\",\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"iat\":%ld,\"exp\":%ld,"
             "\"scope\":\"%s\"}",
             now - 5, now + 300, scope);
    snprintf(out, cap, "Authorization: Bearer %s\r\n",
             tgj_jws("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}", claims, k, NULL));
}

/* One request of session <sid> as <authz>: the JSON-RPC answer (caller
 * frees), from a JSON body or the first SSE data line. */
static json_t *post(const char *sid, const char *authz, const char *body)
{
    thc_resp_t r;
    cr_assert_eq(thc_post(port, sid, authz, body, &r), 0);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    const char *j = strstr(r.body, "data: ");
    json_t *v = json_loads(j != NULL ? j + 6 : r.body, JSON_DISABLE_EOF_CHECK, NULL);
    cr_assert_not_null(v, "no JSON in %s", r.raw);
    thc_free(&r);
    return v;
}

static void open_session(const char *authz, char sid[72])
{
    thc_resp_t r;
    cr_assert_eq(thc_post(port, NULL, authz, THC_INIT_BODY, &r), 0);
    cr_assert_eq(r.status, 200, "initialize: %s", r.raw);
    snprintf(sid, 72, "%s", r.sid);
    thc_free(&r);
    cr_assert_eq(thc_post(port, sid, authz, MCP_INITIALIZED, &r), 0);
    thc_free(&r);
}

static bool listed(const json_t *r, const char *name)
{
    const json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    for (size_t i = 0; i < json_array_size(tools); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(tools, i), "name")), name) ==
            0)
            return true;
    return false;
}

static const char *code_of(const json_t *r)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(r, "error"), "data"), "code"));
}

#define LIST "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"
#define CALL(tool)                                                                                 \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"" tool         \
    "\",\"arguments\":{\"text\":\"hi\"}}}"

Test(hub_http, a_jwt_scope_per_agent_decides_the_list_and_the_call_alike)
{
    EVP_PKEY *key = EVP_RSA_gen(2048);
    cr_assert_not_null(key);
    cr_assert_eq(tgh_serve_prepare(&S, "hub"), 0);
    char jwk[2048], keys[2300], jwks[TGH_PATH + 32];
    tgj_jwk(key, "k1", true, jwk, sizeof jwk);
    snprintf(keys, sizeof keys, "{\"keys\":[%s]}", jwk);
    tgh_put(S.dir, "jwks.json", keys);
    snprintf(jwks, sizeof jwks, "%s/jwks.json", S.dir);
    port = tgh_free_port();
    char json[4096];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"listen\": [{\"http\": \"127.0.0.1:%d\", \"agents\": [\"fs\", \"web\"]}]},"
        " \"audit\": {\"path\": \"%s\"},"
        " \"callers\": [{\"name\": \"svc\", \"jwt\": {\"issuer\": \"" ISS "\", \"audience\": \"" AUD
        "\", \"jwks_file\": \"%s\"}}],"
        " \"agents\": [{\"id\": \"fs\", \"command\": [\"%s/tg_fixture_agent\"]},"
        "              {\"id\": \"web\", \"command\": [\"%s/tg_fixture_agent\"]}],"
        " \"policy\": {\"default\": \"deny\", \"rules\": ["
        "   {\"effect\": \"allow\", \"agents\": [\"fs\"], \"claims\": {\"scope\": [\"fs:read\"]},"
        "    \"tools\": [\"echo\"]},"
        "   {\"effect\": \"allow\", \"agents\": [\"web\"], \"claims\": {\"scope\": [\"web\"]}}]}}",
        port, S.audit, jwks, TG_AGENTS_DIR, TG_AGENTS_DIR);
    cr_assert(n > 0 && (size_t)n < sizeof json);
    tgh_serve_start(&S, json, NULL, 10000);

    static char reader[8400], writer[8400];
    token(key, "openid fs:read", reader, sizeof reader);
    token(key, "web", writer, sizeof writer);
    char sr[72], sw[72];
    open_session(reader, sr);
    open_session(writer, sw);

    json_t *l = post(sr, reader, LIST);
    cr_assert(listed(l, "fs__echo"), "%s", mcp_dump(l));
    cr_assert_not(listed(l, "fs__sleep") || listed(l, "web__echo"), "%s", mcp_dump(l));
    json_decref(l);
    json_t *r = post(sr, reader, CALL("fs__echo"));
    cr_assert_str_eq(mcp_text_of(r), "hi", "%s", mcp_dump(r));
    json_decref(r);
    r = post(sr, reader, CALL("web__echo"));
    cr_assert_str_eq(code_of(r), "tool_not_allowed", "%s", mcp_dump(r));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(json_object_get(r, "error"), "data"),
                                          "config_path")),
        "policy.default", "%s", mcp_dump(r));
    json_decref(r);

    l = post(sw, writer, LIST);
    cr_assert(listed(l, "web__echo") && listed(l, "web__sleep"), "%s", mcp_dump(l));
    cr_assert_not(listed(l, "fs__echo"), "%s", mcp_dump(l));
    json_decref(l);
    r = post(sw, writer, CALL("fs__echo"));
    cr_assert_str_eq(code_of(r), "tool_not_allowed", "%s", mcp_dump(r));
    json_decref(r);
    r = post(sw, writer, CALL("web__echo"));
    cr_assert_str_eq(mcp_text_of(r), "hi", "%s", mcp_dump(r));
    json_decref(r);

    tgh_serve_stop(&S, 10000);
    EVP_PKEY_free(key);
}
