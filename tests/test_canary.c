/* One canary test across every output (issue 6).
 *
 * A single `toolgate serve` runs with the admin endpoint on, the audit
 * trail in a file, its stderr captured, a callers[] entry for this uid and,
 * when redis-server is installed, a shared rate store whose URL carries a
 * password. Secrets are planted wherever a caller, an operator or an agent
 * can put bytes:
 *
 *   C_ARG         tool arguments (and so the echo tool's result), the body
 *                 of an over-cap frame, the arguments of a call that times
 *                 out, a line that is not JSON
 *   C_ENV_SET     agents[].env.set, read back by the agent (a tool result)
 *   C_ENV_PASS    toolgate's own environment, passed with env.pass
 *   C_STDERR      the agent's stderr
 *   C_PROGRESS    the progress token of a call that reports progress
 *   C_CLIENT      the caller's clientInfo in initialize
 *   C_ID_SECRET   request ids that look like credentials (not [A-Za-z0-9._:@/-])
 *   C_TOOL_SECRET a tool name that looks like one, on a call toolgate refuses
 *   C_ID_LABEL    a request id and
 *   C_TOOL_LABEL  a tool name made only of safe characters: the audit trail
 *                 records caller ids and tool names by design, so these two
 *                 may appear there, and only there; what they test is that
 *                 caller text never becomes a metrics label or a name on
 *                 /limits, /agents, the page or `toolgate status`
 *   C_PW          the redis password in store.url
 *   C_TOKEN       a bearer token of caller "bot" (its digest, in config, and
 *                 parts of that digest are canaries too), used over the
 *                 MCP Streamable HTTP listener
 *   C_BAD_TOKEN   a bearer token that names nobody (answered 401)
 *   a JWT         of caller "svc" (ES256, signed here with a key made at
 *                 test time; its claims hold C_JWT_CLAIM): the whole token
 *                 and each of its three parts, and a forged one (bad
 *                 signature, answered 401)
 *
 * and calls are driven that succeed, are refused (rate, frame too large,
 * concurrency with an over-full queue, a line that is not JSON) and time
 * out. Then every output is read: /metrics, /limits, /agents, /healthz, the
 * page at /, `toolgate status --json`, the audit file, toolgate's stderr
 * and every error answer the caller received (over HTTP: the whole
 * response, head included). None may hold a canary
 * (with the two exceptions above, and C_STDERR, which the bounded relay
 * passes on as the agent's own stderr lines but never in a line toolgate
 * writes itself, one with a component other than "agent=ID").
 *
 * Each canary is also shown to have been planted where the test says: the
 * echo and env results carry theirs back, the progress notification its
 * token, the relayed stderr its line, the audit trail the safe id and tool
 * name, the store decided calls, and the token's and the JWT's callers
 * made calls over HTTP. So a canary missing from the outputs
 * means it was kept out, not that it never got in.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "router/auth/auth.h"
#include "tests/http_client.h"
#include "tests/mcp_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

#define C_ARG "CANARY-ARG-5e1f"
#define C_ENV_SET "CANARY-ENVSET-2b7c"
#define C_ENV_PASS "CANARY-ENVPASS-9a0d"
#define C_STDERR "CANARY-STDERR-4d2e"
#define C_PROGRESS "CANARY-PROGRESS-7f3a"
#define C_CLIENT "CANARY-CLIENT-a1b2"
#define C_ID_SECRET "Bearer CANARY-IDSECRET-1c9b"
#define C_TOOL_SECRET "web?token=CANARY-TOOLSECRET-6d1a"
#define C_ID_LABEL "CANARY-IDLABEL-8e4f"
#define C_TOOL_LABEL "CANARY-TOOLLABEL-3b8c"
#define C_PW "CANARY-REDISPW-0f5e"
#define C_TOKEN "CANARY-TOKEN-6c1e9d0a7b"
#define C_BAD_TOKEN "CANARY-BADTOKEN-2e8f"
#define C_JWT_CLAIM "CANARY-JWTCLAIM-9b4a"
#define JWT_ISS "https://idp.canary.example"

typedef struct canary {
    const char *value;
    bool in_audit;     /* may appear in the audit trail (a checked caller string) */
    bool in_relay;     /* may appear in relayed agent stderr lines */
} canary_t;

static const canary_t canaries[] = {
    {C_ARG, false, false},        {C_ENV_SET, false, false},     {C_ENV_PASS, false, false},
    {C_STDERR, false, true},      {C_PROGRESS, false, false},    {C_CLIENT, false, false},
    {C_ID_SECRET, false, false},  {C_TOOL_SECRET, false, false}, {C_ID_LABEL, true, false},
    {C_TOOL_LABEL, true, false},  {C_PW, false, false},
    /* Parts of the unsafe ones, in case an encoder cut them at the space
     * or the '?' and kept the rest. */
    {"CANARY-IDSECRET-1c9b", false, false}, {"CANARY-TOOLSECRET-6d1a", false, false},
};
#define NCANARIES (sizeof canaries / sizeof canaries[0])

/* Canaries made at run time, allowed nowhere: the token's digest (as in
 * config, its hex, its first 16 hex digits) and the JWTs and their parts. */
#define NDYN 11
static char dyn[NDYN][2048];

typedef struct run {
    char status[TGH_PATH + 16]; /* `toolgate status --json` output */
    char addr[64];              /* the admin endpoint */
    bool store;
    int http_port;
    char jwks[TGH_PATH + 32];
    char token_digest[TG_TOKEN_DIGEST_TEXT + 1];
    char jwt[2048], forged[2048];
    tgh_proc_t caller;
    json_t *errors; /* every error answer the caller received */
} run_t;

static tgh_serve_t S;
static run_t T;
static srv_t R;

static void canary_fini(void)
{
    json_decref(T.errors);
    tgh_cleanup();
    srv_done(&R);
}

/* The first canary <text> holds that it may not, for an output where only
 * canaries flagged <allowed_audit> may appear; NULL when clean. */
static const char *leaked(const char *text, bool allowed_audit)
{
    for (size_t i = 0; text != NULL && i < NCANARIES; i++)
        if (!(allowed_audit && canaries[i].in_audit) && strstr(text, canaries[i].value) != NULL)
            return canaries[i].value;
    for (size_t i = 0; text != NULL && i < NDYN; i++)
        if (dyn[i][0] != '\0' && strstr(text, dyn[i]) != NULL)
            return dyn[i];
    return NULL;
}

/* ---- credentials for the HTTP listener ---- */

/* base64url without padding of <n> bytes of <in> into <out> (4n/3 + 4). */
static void b64u(const void *in, size_t n, char *out)
{
    int k = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    for (int i = 0; i < k; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    while (k > 0 && out[k - 1] == '=')
        k--;
    out[k] = '\0';
}

/* Coordinate <name> of EC key <k>, 32 bytes, base64url. */
static void ec_coord(EVP_PKEY *k, const char *name, char *out)
{
    BIGNUM *bn = NULL;
    unsigned char b[32];
    cr_assert_eq(EVP_PKEY_get_bn_param(k, name, &bn), 1);
    cr_assert_eq(BN_bn2binpad(bn, b, 32), 32);
    BN_free(bn);
    b64u(b, 32, out);
}

/* An ES256 JWS of <payload> signed by <k> into <out> (NULL <k>: a
 * signature of zeros, which no key verifies). */
static void es256(EVP_PKEY *k, const char *payload, char *out, size_t cap)
{
    static const char hdr[] = "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"k1\"}";
    char h[128], p[1024], sig[128];
    unsigned char der[128], raw[64] = {0};
    size_t dlen = sizeof der;
    b64u(hdr, strlen(hdr), h);
    b64u(payload, strlen(payload), p);
    snprintf(out, cap, "%s.%s", h, p);
    if (k != NULL) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        cr_assert_eq(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
        cr_assert_eq(EVP_DigestSign(md, der, &dlen, (unsigned char *)out, strlen(out)), 1);
        EVP_MD_CTX_free(md);
        const unsigned char *dp = der;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &dp, (long)dlen);
        cr_assert_not_null(es);
        BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
        BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
        ECDSA_SIG_free(es);
    }
    b64u(raw, 64, sig);
    snprintf(out + strlen(out), cap - strlen(out), ".%s", sig);
}

/* The token's digest for config, a JWKS of a fresh key, a JWT of caller
 * "svc" signed by it and a forged one; all of them canaries. */
static void make_credentials(const char *dir)
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    tg_auth_token_digest(C_TOKEN, strlen(C_TOKEN), d);
    tg_auth_digest_text(d, T.token_digest);
    EVP_PKEY *k = EVP_EC_gen("P-256");
    cr_assert_not_null(k);
    char x[64], y[64], jwks[512], claims[512];
    ec_coord(k, OSSL_PKEY_PARAM_EC_PUB_X, x);
    ec_coord(k, OSSL_PKEY_PARAM_EC_PUB_Y, y);
    snprintf(jwks, sizeof jwks,
             "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k1\",\"alg\":\"ES256\","
             "\"x\":\"%s\",\"y\":\"%s\"}]}",
             x, y);
    tgh_put(dir, "jwks.json", jwks);
    snprintf(T.jwks, sizeof T.jwks, "%s/jwks.json", dir);
    long long now = (long long)time(NULL);
    snprintf(claims, sizeof claims,
             "{\"iss\":\"" JWT_ISS "\",\"aud\":\"toolgate\",\"sub\":\"svc\",\"iat\":%lld,"
             "\"exp\":%lld,\"jti\":\"" C_JWT_CLAIM "\"}",
             now - 5, now + 600);
    es256(k, claims, T.jwt, sizeof T.jwt);
    es256(NULL, claims, T.forged, sizeof T.forged);
    EVP_PKEY_free(k);

    size_t n = 0;
    snprintf(dyn[n++], sizeof dyn[0], "%s", C_TOKEN);
    snprintf(dyn[n++], sizeof dyn[0], "%s", C_BAD_TOKEN);
    snprintf(dyn[n++], sizeof dyn[0], "%s", C_JWT_CLAIM);
    snprintf(dyn[n++], sizeof dyn[0], "%s", T.token_digest);
    snprintf(dyn[n++], sizeof dyn[0], "%s", T.token_digest + 7); /* its hex */
    snprintf(dyn[n++], sizeof dyn[0], "%.16s", T.token_digest + 7);
    snprintf(dyn[n++], sizeof dyn[0], "%s", T.jwt);
    snprintf(dyn[n++], sizeof dyn[0], "%s", T.forged);
    const char *dot1 = strchr(T.jwt, '.'), *dot2 = strrchr(T.jwt, '.');
    snprintf(dyn[n++], sizeof dyn[0], "%.*s", (int)(dot1 - T.jwt), T.jwt);
    snprintf(dyn[n++], sizeof dyn[0], "%.*s", (int)(dot2 - dot1 - 1), dot1 + 1);
    snprintf(dyn[n++], sizeof dyn[0], "%s", dot2 + 1);
    cr_assert_eq(n, NDYN);
}

static void start_serve(void)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    snprintf(T.status, sizeof T.status, "%s/status.json", S.dir);
    snprintf(T.addr, sizeof T.addr, "127.0.0.1:%d", tgh_free_port());
    T.http_port = tgh_free_port();
    make_credentials(S.dir);

    /* An own redis-server that needs the planted password: TG_REDIS_URL
     * names a server whose password is not ours to choose. */
    char store[512] = "", shared[64] = "";
    if (redis_server_path() != NULL) {
        static const char *const extra[] = {"--requirepass", C_PW, NULL};
        srv_own(&R, false, extra);
        snprintf(store, sizeof store,
                 ",\n \"store\": {\"kind\": \"redis\", \"url\": \"redis://default:" C_PW
                 "@127.0.0.1:%d/0\", \"on_store_error\": \"closed\"}",
                 R.port);
        snprintf(shared, sizeof shared, ", \"rate_scope\": \"shared\"");
        T.store = true;
    } else {
        cr_log_warn("redis-server is not installed: the store password canary is not planted "
                    "(CI installs redis-server)");
    }
    char json[8192];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"instance\": \"canary\", \"max_frame_bytes\": \"64Ki\",\n"
        "   \"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"},\n"
        "              {\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"}], \"admin\": \"%s\"},\n"
        " \"audit\": {\"path\": \"%s\"},\n"
        " \"callers\": [{\"name\": \"me\", \"uid\": %u, \"execution_limits\": "
        "{\"rate_limit\": \"1000/minute\"}},\n"
        "   {\"name\": \"bot\", \"tokens\": [\"%s\"]},\n"
        "   {\"name\": \"svc\", \"jwt\": {\"issuer\": \"" JWT_ISS "\", \"audience\": \"toolgate\", "
        "\"jwks_file\": \"%s\"}}]%s,\n"
        " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", \"--log\", \"%s\"],\n"
        "   \"env\": {\"set\": {\"TG_CANARY_SET\": \"" C_ENV_SET "\"}, "
        "\"pass\": [\"TG_CANARY_PASS\"]},\n"
        "   \"execution_limits\": {\"max_concurrent_calls\": 2, \"max_queued_calls\": 0, "
        "\"rate_limit\": \"600/minute\"%s},\n"
        "   \"tools\": {\"echo\": {\"rate_limit\": \"3/minute\"}}}]}\n",
        S.sock, T.http_port, T.addr, S.audit, (unsigned)getuid(), T.token_digest, T.jwks, store,
        TG_AGENTS_DIR, S.log, shared);
    cr_assert(n > 0 && (size_t)n < sizeof json);
    char *const env[] = {(char *)"TG_CANARY_PASS=" C_ENV_PASS, NULL};
    tgh_serve_start(&S, json, env, 10000);
}

/* <r>, an answer the caller received, kept in T.errors when it is an
 * error answer. */
static json_t *keep(json_t *r)
{
    if (json_object_get(r, "error") != NULL)
        json_array_append(T.errors, r);
    return r;
}

static json_t *await_int(json_int_t id)
{
    return keep(mcp_expect_int(&T.caller, id, 10000));
}

static json_t *await_str(const char *id)
{
    return keep(mcp_expect_str(&T.caller, id, 10000));
}

/* A tools/call with any JSON id, tool name and arguments (<meta> is the
 * _meta object's inside, or ""). */
static void call(const char *id_json, const char *tool, const char *args, const char *meta)
{
    mcp_call_meta(&T.caller, id_json, tool, args, meta);
}

static char *admin_get(const char *path)
{
    return tga_get(T.addr, path, NULL);
}

/* Wait until no call of agent fx holds a slot (/limits). */
static void wait_idle(void)
{
    for (int tries = 0; tries < 200; tries++) {
        json_t *doc = tga_limits(T.addr);
        json_t *e = tga_limit(doc, "agent.fx.concurrency");
        json_int_t cur = e ? json_integer_value(json_object_get(e, "current")) : -1;
        json_decref(doc);
        if (cur == 0)
            return;
        tgh_sleep_ms(25);
    }
    cr_assert_fail("agent.fx.concurrency never went back to 0");
}

/* Drive every kind of call through the session. */
static void drive_calls(void)
{
    cr_assert_eq(tgh_sendf(&T.caller,
                           "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                           "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                           "\"clientInfo\":{\"name\":\"" C_CLIENT "\",\"version\":\"1\"}}}"),
                 0);
    json_t *r = await_int(0);
    cr_assert_not_null(json_object_get(r, "result"), "initialize failed");
    json_decref(r);
    cr_assert_eq(tgh_sendf(&T.caller, MCP_INITIALIZED), 0);

    /* Succeed: the planted values come back to the caller, as they should. */
    call("1", "echo", "{\"text\":\"" C_ARG "\"}", "");
    r = await_int(1);
    cr_assert_str_eq(mcp_text_of(r), C_ARG);
    json_decref(r);
    call("2", "env", "{\"name\":\"TG_CANARY_SET\"}", "");
    r = await_int(2);
    cr_assert_str_eq(mcp_text_of(r), C_ENV_SET, "env.set did not reach the agent");
    json_decref(r);
    call("3", "env", "{\"name\":\"TG_CANARY_PASS\"}", "");
    r = await_int(3);
    cr_assert_str_eq(mcp_text_of(r), C_ENV_PASS, "env.pass did not reach the agent");
    json_decref(r);
    call("4", "stderr", "{\"text\":\"" C_STDERR " \",\"bytes\":400,\"line_len\":80}", "");
    json_decref(await_int(4));
    json_t *notes = json_array();
    call("5", "progress", "{}", "\"progressToken\":\"" C_PROGRESS "\"");
    json_t *jid = json_integer(5);
    json_decref(keep(mcp_expect(&T.caller, jid, 10000, notes)));
    json_decref(jid);
    char *ns = json_dumps(notes, JSON_COMPACT);
    cr_assert(ns && strstr(ns, "notifications/progress") && strstr(ns, C_PROGRESS),
              "the progress token did not come back: %s", ns ? ns : "");
    free(ns);
    json_decref(notes);
    /* Ids and tool names: secret-shaped and label-shaped. The echo tool's
     * bucket (3/minute) is spent by calls 1, SECRET and LABEL. */
    call("\"" C_ID_SECRET "\"", "echo", "{\"text\":\"" C_ARG "\"}", "");
    json_decref(await_str(C_ID_SECRET));
    call("\"" C_ID_LABEL "\"", "echo", "{\"text\":\"" C_ARG "\"}", "");
    json_decref(await_str(C_ID_LABEL));
    call("6", C_TOOL_LABEL, "{\"text\":\"" C_ARG "\"}", "");
    json_decref(await_int(6)); /* the agent's own "unknown tool" error */
    call("7", C_TOOL_SECRET, "{\"text\":\"" C_ARG "\"}", "");
    json_decref(await_int(7));

    /* Refused: rate. */
    call("\"" C_ID_SECRET "/rate\"", "echo", "{\"text\":\"" C_ARG "\"}", "");
    r = await_str(C_ID_SECRET "/rate");
    mcp_assert_denied(r, "rate_limit_exceeded");
    json_decref(r);
    /* Refused: a frame over max_frame_bytes, full of the canary. */
    size_t fill = 100 * 1024, off = 0;
    char *big = malloc(fill + 256);
    cr_assert_not_null(big);
    off += (size_t)snprintf(big, 256, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
                                      "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"");
    while (off + sizeof(C_ARG) < fill) {
        memcpy(big + off, C_ARG " ", sizeof(C_ARG));
        off += sizeof(C_ARG);
    }
    off += (size_t)snprintf(big + off, 32, "\"}}}\n");
    cr_assert_eq(tgh_send(&T.caller, big, off, 10000), 0);
    free(big);
    r = await_int(8);
    mcp_assert_denied(r, "frame_too_large");
    json_decref(r);
    /* Times out: the caller's own deadline, shorter than the tool's. */
    call("9", "sleep", "{\"ms\":5000,\"note\":\"" C_ARG "\"}", "\"timeout_ms\":200");
    r = await_int(9);
    mcp_assert_denied(r, "timeout");
    json_decref(r);
    /* The zombie's slot comes back with the agent's pong. */
    wait_idle();
    /* Refused: concurrency, with both slots busy and no queue, for a
     * secret-shaped tool name and id. */
    call("10", "sleep", "{\"ms\":1500}", "");
    call("11", "sleep", "{\"ms\":1500}", "");
    tgh_sleep_ms(200);
    call("\"" C_ID_SECRET "/conc\"", C_TOOL_SECRET, "{\"text\":\"" C_ARG "\"}", "");
    r = await_str(C_ID_SECRET "/conc");
    mcp_assert_denied(r, "concurrency_limit_exceeded");
    json_decref(r);
    json_decref(await_int(10));
    json_decref(await_int(11));
    /* Refused: a line that is not JSON. */
    cr_assert_eq(tgh_sendf(&T.caller, "not json " C_ARG " " C_ID_SECRET), 0);
    r = tgh_read_json(&T.caller, 5000, NULL);
    cr_assert_not_null(r, "no answer to a line that is not JSON");
    cr_assert_not_null(json_object_get(r, "error"));
    json_array_append_new(T.errors, r);
}

/* One POST to the HTTP listener with <authz> (an Authorization value,
 * NULL: none) in session <sid> (NULL: none); the whole response must be
 * free of canaries. Returns its status; the session id it names goes to
 * <sid_out> (SID_CAP bytes; NULL: not wanted). */
#define SID_CAP 72 /* thc_resp_t's sid */
static int http_post(const char *authz, const char *sid, const char *body, char *sid_out)
{
    char h[2400] = "";
    if (authz != NULL)
        snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", authz);
    thc_resp_t r;
    cr_assert_eq(thc_post(T.http_port, sid, h, body, &r), 0);
    const char *l = leaked(r.raw, false);
    cr_assert_null(l, "an HTTP response holds the canary %s:\n%s", l, r.raw);
    if (sid_out != NULL)
        snprintf(sid_out, SID_CAP, "%s", r.sid);
    int status = r.status;
    thc_free(&r);
    return status;
}

/* Callers over HTTP: by token and by JWT, each with one call; refused:
 * a token that names nobody, a forged JWT, a JWT in the wrong header. */
static void drive_http(void)
{
    static const char call_body[] = "{\"jsonrpc\":\"2.0\",\"id\":\"h1\",\"method\":\"tools/call\","
                                    "\"params\":{\"name\":\"env\",\"arguments\":{\"name\":\"HOME\"}}}";
    const char *creds[] = {C_TOKEN, T.jwt};
    for (size_t i = 0; i < 2; i++) {
        char sid[SID_CAP] = "";
        cr_assert_eq(http_post(creds[i], NULL, THC_INIT_BODY, sid), 200);
        cr_assert_eq(http_post(creds[i], sid, MCP_INITIALIZED, NULL), 202);
        cr_assert_eq(http_post(creds[i], sid, call_body, NULL), 200);
    }
    cr_assert_eq(http_post(C_BAD_TOKEN, NULL, THC_INIT_BODY, NULL), 401);
    cr_assert_eq(http_post(T.forged, NULL, THC_INIT_BODY, NULL), 401);
    cr_assert_eq(http_post(T.token_digest, NULL, THC_INIT_BODY, NULL), 401);
    thc_resp_t r;
    char h[2400];
    snprintf(h, sizeof h, "Authorization: Basic %s\r\n", T.jwt);
    cr_assert_eq(thc_post(T.http_port, NULL, h, THC_INIT_BODY, &r), 0);
    cr_assert_eq(r.status, 401, "%s", r.raw);
    const char *l = leaked(r.raw, false);
    cr_assert_null(l, "an HTTP response holds the canary %s:\n%s", l, r.raw);
    thc_free(&r);
}

Test(canary, no_planted_secret_reaches_any_output, .fini = canary_fini, .timeout = 120)
{
    T.errors = json_array();
    start_serve();
    mcp_connect(&T.caller, S.sock);
    drive_calls();
    drive_http();

    /* The admin endpoint and `toolgate status`, while the session is open. */
    static const char *const paths[] = {"/metrics", "/limits", "/agents", "/healthz", "/"};
    char *bodies[5];
    for (size_t i = 0; i < 5; i++) {
        bodies[i] = admin_get(paths[i]);
        const char *l = leaked(bodies[i], false);
        cr_assert_null(l, "%s holds the canary %s", paths[i], l);
    }
    /* Unconfigured tool names are counted, under "other". */
    cr_assert_not_null(strstr(bodies[0], "tool=\"other\""), "/metrics has no tool=\"other\" series");
    /* The refused calls are on the page's denial list, with the
     * secret-shaped tool name as "invalid". */
    cr_assert_not_null(strstr(bodies[2], "\"concurrency_limit_exceeded\""));
    cr_assert_not_null(strstr(bodies[2], "\"invalid\""), "/agents: %s", bodies[2]);
    for (size_t i = 0; i < 5; i++)
        free(bodies[i]);
    char cmd[2 * TGH_PATH + 128];
    cr_assert_lt((size_t)snprintf(cmd, sizeof cmd, "'%s' status --admin %s --json > '%s' 2>&1",
                                  TG_BIN, T.addr, T.status),
                 sizeof cmd);
    cr_assert_eq(system(cmd), 0, "toolgate status --json failed");
    char *status = tgh_read_file(T.status, NULL);
    cr_assert(status && strstr(status, "agent.fx.rate"), "status --json: %s", status ? status : "");
    const char *l = leaked(status, false);
    cr_assert_null(l, "toolgate status --json holds the canary %s", l);
    free(status);

    /* Every error answer the caller got. The JSON-RPC id of an answer is
     * the caller's own by protocol: only the error object is toolgate's. */
    size_t i;
    json_t *r;
    json_array_foreach(T.errors, i, r) {
        char *s = json_dumps(json_object_get(r, "error"), JSON_COMPACT);
        l = leaked(s, false);
        cr_assert_null(l, "an error answer holds the canary %s: %s", l, s);
        free(s);
    }
    cr_assert_geq(json_array_size(T.errors), 7, "only %zu error answers",
                  json_array_size(T.errors));

    /* Stop, then the audit trail and the log are complete. */
    tgh_conn_close(&T.caller);
    tgh_serve_stop(&S, 15000);

    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert(audit && strlen(audit) > 0, "no audit trail");
    l = leaked(audit, true);
    cr_assert_null(l, "the audit trail holds the canary %s", l);
    /* The safe caller strings reached it, as designed. */
    cr_assert_not_null(strstr(audit, "\"" C_ID_LABEL "\""), "the audit lacks the caller's id");
    cr_assert_not_null(strstr(audit, "\"" C_TOOL_LABEL "\""), "the audit lacks the tool name");
    cr_assert_not_null(strstr(audit, "\"event\":\"call.timeout\""), "no call.timeout event");
    /* The token's and the JWT's callers made their calls over HTTP. */
    cr_assert_not_null(strstr(audit, "\"caller\":\"bot\",\"front\":\"http\""),
                       "no call of the token's caller over HTTP");
    cr_assert_not_null(strstr(audit, "\"caller\":\"svc\",\"front\":\"http\""),
                       "no call of the JWT's caller over HTTP");
    if (T.store)
        cr_assert_not_null(strstr(audit, "\"decided_by\":\"store\""),
                           "the redis store decided no call (wrong password?)");
    free(audit);

    char *err = tgh_read_file(S.err, NULL);
    cr_assert_not_null(err);
    cr_assert_gt(tgh_count_lines_with(err, NULL, C_STDERR), 0,
                 "the agent's stderr was not relayed: the log was not captured");
    cr_assert_eq(tgh_own_lines_with(err, "CANARY"), 0, "a line toolgate wrote holds a canary:\n%s",
                 err);
    for (size_t k = 0; k < NCANARIES; k++)
        if (!canaries[k].in_relay)
            cr_assert_null(strstr(err, canaries[k].value), "toolgate's stderr holds %s:\n%s",
                           canaries[k].value, err);
    for (size_t k = 0; k < NDYN; k++)
        cr_assert_null(strstr(err, dyn[k]), "toolgate's stderr holds %s:\n%s", dyn[k], err);
    free(err);
}
