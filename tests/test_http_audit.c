/* Audit and metrics of the MCP Streamable HTTP front (issue 13 part 5),
 * against the real `toolgate serve`:
 *
 *   - every audit event of an MCP session opened over HTTP (its calls and
 *     its agent instance's start and exit) names the front ("http"), the
 *     caller (by token, or anonymous), the session as a digest of its
 *     Mcp-Session-Id (the first 16 hex digits of its SHA-256: never the id,
 *     the same for every event of a session, different between sessions)
 *     and the client's address:port; a Unix-socket session's events say
 *     "unix" and the peer's uid, a wrapped (stdio) one's "stdio"; router.*
 *     events name no front; `toolgate audit verify` accepts them;
 *   - /metrics has the per-listener HTTP families, labelled by listener
 *     index and address, and they count requests, responses by status
 *     class, connections (refused ones apart) and sessions (opened, ended,
 *     idled).
 *   - idle connections hold no read buffer or request arena: the
 *     toolgate_http_connection_buffer_bytes gauge stays under 1 KiB per
 *     connection with 1 000 of them, and counts a part-read request's.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "router/auth/auth.h"
#include "tests/http_client.h"
#include "tests/tg_jwt.h"
#include "tests/mcp_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"

#define TOKEN "t0k3n-for-the-http-audit-test-2f9c"
#define CALL(id, text)                                                                           \
    "{\"jsonrpc\":\"2.0\",\"id\":\"" id "\",\"method\":\"tools/call\",\"params\":{\"name\":"      \
    "\"echo\",\"arguments\":{\"text\":\"" text "\"}}}"

static tgh_serve_t S;
static char admin[64];
static int port;
static tgh_proc_t unix_caller;

static void fini(void)
{
    tgh_conn_close(&unix_caller);
    tgh_cleanup();
}

/* serve with one HTTP listener (and a Unix one for fx), callers "bot" by
 * token and "me" by uid; <extra> is more of the HTTP listener's keys. */
static void start(const char *extra)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    port = tgh_free_port();
    snprintf(admin, sizeof admin, "127.0.0.1:%d", tgh_free_port());
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    char digest[TG_TOKEN_DIGEST_TEXT + 1];
    tg_auth_token_digest(TOKEN, strlen(TOKEN), d);
    tg_auth_digest_text(d, digest);
    char json[4096];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"instance\": \"ha\", \"admin\": \"%s\",\n"
        "   \"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"},\n"
        "              {\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"%s}]},\n"
        " \"audit\": {\"path\": \"%s\"},\n"
        " \"callers\": [{\"name\": \"bot\", \"tokens\": [\"%s\"]}, {\"name\": \"me\", \"uid\": %u}],\n"
        " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", \"--log\", \"%s\"]}]}\n",
        admin, S.sock, port, extra, S.audit, digest, (unsigned)getuid(), TG_AGENTS_DIR, S.log);
    cr_assert(n > 0 && (size_t)n < sizeof json);
    tgh_serve_start(&S, json, NULL, 10000);
}

/* The sizes http_init writes: a session id (32 hex) and an address:port. */
#define SID_CAP  72
#define FROM_CAP 64

/* initialize over HTTP (with <authz> header lines, "" none): the
 * session id into <sid> and the client address it was made from into
 * <local>. */
static void http_init(const char *authz, char sid[SID_CAP], char local[FROM_CAP])
{
    thc_resp_t r;
    cr_assert_eq(thc_post(port, NULL, authz, THC_INIT_BODY, &r), 0);
    cr_assert_eq(r.status, 200, "initialize: %s", r.raw);
    cr_assert_eq(strlen(r.sid), 32, "no Mcp-Session-Id: %s", r.raw);
    snprintf(sid, SID_CAP, "%s", r.sid);
    snprintf(local, FROM_CAP, "%s", r.local);
    thc_free(&r);
    cr_assert_eq(thc_post(port, sid, authz, MCP_INITIALIZED, &r), 0);
    cr_assert_eq(r.status, 202, "initialized: %s", r.raw);
    thc_free(&r);
}

static void http_call(const char *sid, const char *authz, const char *body, const char *want)
{
    thc_resp_t r;
    cr_assert_eq(thc_post(port, sid, authz, body, &r), 0);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    cr_assert_not_null(strstr(r.body, want), "%s", r.raw);
    thc_free(&r);
}

/* The audit digest of session id <sid>: the first 16 hex of its SHA-256. */
static void digest16(const char *sid, char out[17])
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    tg_auth_token_digest(sid, strlen(sid), d);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static const char *str(json_t *ev, const char *key)
{
    return json_string_value(json_object_get(ev, key));
}

/* Every audit event in <audit>: a JSON array. */
static json_t *events(const char *audit)
{
    json_t *all = json_array();
    for (const char *p = audit; p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        json_t *ev = json_loadb(p, n, 0, NULL);
        cr_assert_not_null(ev, "not JSON: %.*s", (int)n, p);
        json_array_append_new(all, ev);
        p = nl != NULL ? nl + 1 : NULL;
    }
    return all;
}

/* The first event <name> whose string field <key> is <value>, or NULL. */
static json_t *find_event(json_t *all, const char *name, const char *key, const char *value)
{
    size_t i;
    json_t *ev;
    json_array_foreach(all, i, ev) {
        const char *v = str(ev, key);
        if (strcmp(str(ev, "event"), name) == 0 && v != NULL && strcmp(v, value) == 0)
            return ev;
    }
    return NULL;
}

/* The event <name> with call_id <id>. */
static json_t *call_event(json_t *all, const char *name, const char *id)
{
    json_t *ev = find_event(all, name, "call_id", id);
    cr_assert_not_null(ev, "no %s event for call %s", name, id);
    return ev;
}

static void assert_http_event(json_t *ev, const char *caller, const char *digest,
                              const char *remote)
{
    char *s = json_dumps(ev, JSON_COMPACT);
    cr_assert_str_eq(str(ev, "front"), "http", "%s", s);
    cr_assert_str_eq(str(ev, "caller"), caller, "%s", s);
    cr_assert_str_eq(str(ev, "session"), digest, "%s", s);
    cr_assert_str_eq(str(ev, "remote"), remote, "%s", s);
    free(s);
}

static void verify_audit(void)
{
    static tgh_proc_t v;
    char *const argv[] = {(char *)TG_BIN, (char *)"audit", (char *)"verify", S.audit, NULL};
    cr_assert_eq(tgh_spawn(&v, argv, NULL, NULL), 0);
    tgh_close_stdin(&v);
    char *line = tgh_read_line(&v, 10000, NULL);
    cr_assert_eq(tgh_wait(&v, 10000), 0);
    cr_assert_eq(tgh_exit_code(&v), 0, "audit verify: %s", line ? line : "");
    free(line);
}

Test(http_audit, events_name_the_front_caller_session_digest_and_remote, .fini = fini,
     .timeout = 60)
{
    start("");
    static const char bearer[] = "Authorization: Bearer " TOKEN "\r\n";
    char sid_a[SID_CAP], from_a[FROM_CAP], sid_b[SID_CAP], from_b[FROM_CAP];
    http_init(bearer, sid_a, from_a);
    http_call(sid_a, bearer, CALL("a1", "one"), "one");
    http_call(sid_a, bearer, CALL("a2", "two"), "two");
    http_init("", sid_b, from_b);
    http_call(sid_b, "", CALL("b1", "three"), "three");
    mcp_connect(&unix_caller, S.sock);
    mcp_init_ok(&unix_caller, 10000);
    mcp_call_meta(&unix_caller, "\"u1\"", "echo", "{\"text\":\"four\"}", "");
    json_decref(mcp_expect_str(&unix_caller, "u1", 10000));
    tgh_conn_close(&unix_caller);
    tgh_serve_stop(&S, 15000);

    char da[17], db[17];
    digest16(sid_a, da);
    digest16(sid_b, db);
    cr_assert_str_neq(da, db);
    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert_not_null(audit);
    cr_assert_null(strstr(audit, sid_a), "the audit trail holds a session id");
    cr_assert_null(strstr(audit, sid_b), "the audit trail holds a session id");
    cr_assert_null(strstr(audit, TOKEN), "the audit trail holds the token");
    json_t *all = events(audit);
    free(audit);
    /* Both calls of session A carry the same digest, B's another. */
    assert_http_event(call_event(all, "call.completed", "a1"), "bot", da, from_a);
    assert_http_event(call_event(all, "call.completed", "a2"), "bot", da, from_a);
    assert_http_event(call_event(all, "call.completed", "b1"), "anonymous", db, from_b);
    json_t *u = call_event(all, "call.completed", "u1");
    char uid[32];
    snprintf(uid, sizeof uid, "uid:%u", (unsigned)getuid());
    cr_assert_str_eq(str(u, "front"), "unix");
    cr_assert_str_eq(str(u, "caller"), "me");
    cr_assert_str_eq(str(u, "remote"), uid);
    cr_assert_null(json_object_get(u, "session"), "a Unix session has no MCP session id");
    /* The agent instance of each HTTP session names it too. */
    int started_a = 0, exited_b = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(all, i, ev) {
        const char *e = str(ev, "event"), *s = str(ev, "session");
        if (strncmp(e, "router.", 7) == 0)
            cr_assert_null(json_object_get(ev, "front"), "%s names a front", e);
        if (s == NULL)
            continue;
        if (strcmp(e, "agent.started") == 0 && strcmp(s, da) == 0) {
            assert_http_event(ev, "bot", da, from_a);
            started_a++;
        }
        if (strcmp(e, "agent.exited") == 0 && strcmp(s, db) == 0) {
            assert_http_event(ev, "anonymous", db, from_b);
            exited_b++;
        }
    }
    cr_assert_eq(started_a, 1, "agent.started of session A's instance");
    cr_assert_eq(exited_b, 1, "agent.exited of session B's instance");
    json_decref(all);
    verify_audit();
}

/* The value of the sample of <family> for listener 1 (with <more> labels
 * after the address, "" none) in /metrics text <m>; -1 when absent. */
static long long sample_of(const char *m, const char *family, const char *more)
{
    char key[256];
    snprintf(key, sizeof key, "%s{listener=\"1\",address=\"127.0.0.1:%d\"%s} ", family, port, more);
    const char *p = strstr(m, key);
    return p != NULL ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static char *metrics(void)
{
    char *m = tga_get(admin, "/metrics", NULL);
    cr_assert_not_null(m);
    return m;
}

/* Poll /metrics until <family> reaches <want> (10 s). */
static void wait_sample(const char *family, long long want)
{
    long long v = -1;
    for (int tries = 0; tries < 200; tries++) {
        char *m = metrics();
        v = sample_of(m, family, "");
        free(m);
        if (v == want)
            return;
        tgh_sleep_ms(50);
    }
    cr_assert_fail("%s is %lld, not %lld", family, v, want);
}

Test(http_audit, metrics_count_requests_statuses_connections_and_sessions, .fini = fini,
     .timeout = 60)
{
    start(", \"max_connections\": 2, \"session_idle_timeout\": \"1s\"");
    char *m = metrics();
    static const char *const fams[] = {
        "toolgate_http_requests_total",          "toolgate_http_connections",
        "toolgate_http_connections_total",       "toolgate_http_connections_refused_total",
        "toolgate_http_sessions",                "toolgate_http_sessions_opened_total",
        "toolgate_http_sessions_ended_total",    "toolgate_http_sessions_idled_total",
        "toolgate_http_responses_dropped_total", "toolgate_http_backlog_dropped_total",
        "toolgate_http_connection_buffer_bytes",
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        char head[160];
        snprintf(head, sizeof head, "# TYPE %s ", fams[i]);
        cr_assert_not_null(strstr(m, head), "no family %s", fams[i]);
        cr_assert_eq(sample_of(m, fams[i], ""), 0, "%s does not start at 0", fams[i]);
    }
    cr_assert_eq(sample_of(m, "toolgate_http_responses_total", ",class=\"2xx\""), 0);
    free(m);

    char sid[SID_CAP], from[FROM_CAP];
    http_init("", sid, from);                       /* 200, 202 */
    http_call(sid, "", CALL("c1", "five"), "five"); /* 200 */
    thc_resp_t r;
    cr_assert_eq(thc_post(port, "0123456789abcdef0123456789abcdef", NULL, CALL("c2", "x"), &r), 0);
    cr_assert_eq(r.status, 404, "%s", r.raw);
    thc_free(&r);
    cr_assert_eq(thc_request(port, "DELETE", "/mcp", "", NULL, &r), 0);
    cr_assert_eq(r.status / 100, 4, "DELETE without a session: %s", r.raw);
    thc_free(&r);
    m = metrics();
    cr_assert_eq(sample_of(m, "toolgate_http_requests_total", ""), 5, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_responses_total", ",class=\"2xx\""), 3, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_responses_total", ",class=\"4xx\""), 2, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_sessions_opened_total", ""), 1, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_sessions", ""), 1, "%s", m);
    free(m);
    /* Two idle connections fill max_connections: the next is refused. */
    int c1 = tgh_tcp_dial(port), c2 = tgh_tcp_dial(port);
    cr_assert(c1 >= 0 && c2 >= 0);
    wait_sample("toolgate_http_connections", 2);
    cr_assert_eq(thc_post(port, sid, NULL, CALL("c3", "x"), &r), 0);
    cr_assert_eq(r.status, 429, "%s", r.raw);
    thc_free(&r);
    close(c1);
    close(c2);
    wait_sample("toolgate_http_connections", 0);
    m = metrics();
    cr_assert_eq(sample_of(m, "toolgate_http_connections_refused_total", ""), 1, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_connections_total", ""), 7, "%s", m);
    free(m);
    /* The session, left alone, idles out; DELETE ends a second one. */
    wait_sample("toolgate_http_sessions_idled_total", 1);
    wait_sample("toolgate_http_sessions", 0);
    http_init("", sid, from);
    char h[128];
    snprintf(h, sizeof h, "Mcp-Session-Id: %s\r\n", sid);
    cr_assert_eq(thc_request(port, "DELETE", "/mcp", h, NULL, &r), 0);
    cr_assert_eq(r.status / 100, 2, "DELETE: %s", r.raw);
    thc_free(&r);
    wait_sample("toolgate_http_sessions_ended_total", 2);
    m = metrics();
    cr_assert_eq(sample_of(m, "toolgate_http_sessions_opened_total", ""), 2, "%s", m);
    cr_assert_eq(sample_of(m, "toolgate_http_sessions_idled_total", ""), 1, "%s", m);
    free(m);
    tgh_serve_stop(&S, 15000);
}

Test(http_audit, a_wrapped_session_says_stdio_and_names_no_remote_or_session, .fini = fini,
     .timeout = 30)
{
    static tgh_wrap_t w;
    cr_assert_eq(tgh_wrap_start(&w, NULL, NULL, NULL), 0);
    mcp_init_ok(&w.tg, 10000);
    mcp_call_meta(&w.tg, "\"w1\"", "echo", "{\"text\":\"six\"}", "");
    json_decref(mcp_expect_str(&w.tg, "w1", 10000));
    tgh_close_stdin(&w.tg);
    cr_assert_eq(tgh_wait(&w.tg, 10000), 0);
    char *audit = tgh_read_file(w.audit, NULL);
    cr_assert_not_null(audit);
    json_t *all = events(audit);
    free(audit);
    json_t *ev = call_event(all, "call.completed", "w1");
    cr_assert_str_eq(str(ev, "front"), "stdio");
    cr_assert_str_eq(str(ev, "caller"), "stdio");
    cr_assert_null(json_object_get(ev, "remote"));
    cr_assert_null(json_object_get(ev, "session"));
    size_t i;
    json_array_foreach(all, i, ev) {
        const char *e = str(ev, "event");
        if (strncmp(e, "router.", 7) == 0)
            cr_assert_null(json_object_get(ev, "front"), "%s names a front", e);
        else if (strncmp(e, "agent.", 6) == 0)
            cr_assert_str_eq(str(ev, "front"), "stdio", "%s", e);
    }
    json_decref(all);
}

/* A request refused for who or where it came from (401 a credential that
 * names nobody, 403 an Origin not allowed) is audited as a Unix caller's
 * refused connection is: call.denied caller_not_allowed, front http, the
 * client's address, why; never the credential. */
Test(http_audit, refused_requests_are_audited_with_the_peer_and_no_credential, .fini = fini,
     .timeout = 30)
{
    start("");
    thc_resp_t r;
    cr_assert_eq(thc_post(port, NULL, "Authorization: Bearer canary-WRONG-TOKEN-7f3a\r\n",
                          THC_INIT_BODY, &r), 0);
    cr_assert_eq(r.status, 401, "%s", r.raw);
    char bad_token_from[64];
    snprintf(bad_token_from, sizeof bad_token_from, "%s", r.local);
    thc_free(&r);
    cr_assert_eq(thc_post(port, NULL, "Origin: http://evil.example\r\n", THC_INIT_BODY, &r), 0);
    cr_assert_eq(r.status, 403, "%s", r.raw);
    char origin_from[64];
    snprintf(origin_from, sizeof origin_from, "%s", r.local);
    thc_free(&r);

    cr_assert_eq(tgh_file_wait(S.audit, "\"origin_not_allowed\"", 1, 5000), 1);
    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert_not_null(audit);
    cr_assert_null(strstr(audit, "canary-WRONG"), "the credential reached the audit");
    json_t *all = events(audit);
    free(audit);
    const char *want[][2] = {{"unauthenticated: unknown token", bad_token_from},
                             {"origin_not_allowed", origin_from}};
    for (size_t i = 0; i < 2; i++) {
        json_t *ev = find_event(all, "call.denied", "reason", want[i][0]);
        cr_assert_not_null(ev, "no call.denied event with reason %s", want[i][0]);
        char *s = json_dumps(ev, JSON_COMPACT);
        cr_expect_str_eq(str(ev, "code"), "caller_not_allowed", "%s", s);
        cr_expect_str_eq(str(ev, "front"), "http", "%s", s);
        cr_expect_str_eq(str(ev, "remote"), want[i][1], "%s", s);
        cr_expect_str_eq(str(ev, "agent"), "fx", "%s", s);
        cr_expect_null(json_object_get(ev, "session"), "%s", s);
        free(s);
    }
    json_decref(all);
    verify_audit();
}

/* JWT refusals (issue 20, item 12): the audit event's reason and the log
 * line say why ("unauthenticated: expired", "wrong audience", "bad
 * signature", "unknown kid"), as the 401's body does, and neither holds a
 * byte of the token: a canary planted in a claim, in the kid and in the
 * subject is in no event and no line, nor is any part of the token. */
#define JWT_ISS    "https://idp.example"
#define JWT_AUD    "toolgate"
#define JWT_CANARY "CANARYjwt5b1e"

/* A JWT from JWT_ISS with header kid <kid>, audience <aud>, subject
 * <sub>, expiring <exp> s from now, a canary claim, signed by <k>. */
static const char *jwt_tok(const char *kid, const char *aud, const char *sub, long exp,
                           EVP_PKEY *k)
{
    char hdr[160], claims[512];
    long now = (long)time(NULL);
    snprintf(hdr, sizeof hdr, "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"%s\"}", kid);
    snprintf(claims, sizeof claims,
             "{\"sub\":\"%s\",\"iss\":\"" JWT_ISS "\",\"aud\":\"%s\",\"iat\":%ld,\"exp\":%ld,"
             "\"jti\":\"" JWT_CANARY "-jti\",\"note\":\"" JWT_CANARY "-claim\"}",
             sub, aud, now - 5, now + exp);
    return tgj_jws(hdr, claims, k, NULL);
}

Test(http_audit, jwt_refusals_say_why_in_audit_and_log_without_the_token, .fini = fini,
     .timeout = 60)
{
    EVP_PKEY *key = EVP_RSA_gen(2048), *other = EVP_RSA_gen(2048);
    cr_assert(key && other);
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    char jwk[2048], keys[2300], jwks[TGH_PATH + 32];
    tgj_jwk(key, "r1", true, jwk, sizeof jwk);
    snprintf(keys, sizeof keys, "{\"keys\":[%s]}", jwk);
    tgh_put(S.dir, "jwks.json", keys);
    snprintf(jwks, sizeof jwks, "%s/jwks.json", S.dir);
    port = tgh_free_port();
    char json[4096];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"listen\": [{\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"}]},\n"
        " \"audit\": {\"path\": \"%s\"},\n"
        " \"callers\": [{\"name\": \"svc-a\", \"jwt\": {\"issuer\": \"" JWT_ISS
        "\", \"audience\": \"" JWT_AUD "\", \"jwks_file\": \"%s\", \"leeway\": \"5s\"}}],\n"
        " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", \"--log\", \"%s\"]}]}\n",
        port, S.audit, jwks, TG_AGENTS_DIR, S.log);
    cr_assert(n > 0 && (size_t)n < sizeof json);
    tgh_serve_start(&S, json, NULL, 10000);

    static char toks[4][8192];
    const char *why[4] = {"expired", "wrong audience", "bad signature", "unknown kid"};
    snprintf(toks[0], sizeof toks[0], "%s", jwt_tok("r1", JWT_AUD, "svc-a", -600, key));
    snprintf(toks[1], sizeof toks[1], "%s", jwt_tok("r1", "someone-else", "svc-a", 300, key));
    snprintf(toks[2], sizeof toks[2], "%s", jwt_tok("r1", JWT_AUD, "svc-a", 300, other));
    snprintf(toks[3], sizeof toks[3], "%s",
             jwt_tok(JWT_CANARY "-kid", JWT_AUD, JWT_CANARY "-sub", 300, key));
    for (int i = 0; i < 4; i++) {
        char az[8400];
        snprintf(az, sizeof az, "Authorization: Bearer %s\r\n", toks[i]);
        thc_resp_t r;
        cr_assert_eq(thc_post(port, NULL, az, THC_INIT_BODY, &r), 0);
        cr_assert_eq(r.status, 401, "%s", r.raw);
        cr_assert_not_null(strstr(r.body, why[i]), "the 401 does not say %s: %s", why[i], r.raw);
        thc_free(&r);
    }
    cr_assert_eq(tgh_file_wait(S.audit, "unknown kid", 1, 5000), 1, "the last refusal not audited");
    tgh_serve_stop(&S, 10000);

    char *audit = tgh_read_file(S.audit, NULL), *log = tgh_read_file(S.err, NULL);
    cr_assert(audit != NULL && log != NULL);
    json_t *all = events(audit);
    for (int i = 0; i < 4; i++) {
        char reason[64];
        snprintf(reason, sizeof reason, "unauthenticated: %s", why[i]);
        json_t *ev = find_event(all, "call.denied", "reason", reason);
        cr_assert_not_null(ev, "no call.denied with reason '%s' in:\n%s", reason, audit);
        cr_expect_str_eq(str(ev, "code"), "caller_not_allowed");
        cr_expect_str_eq(str(ev, "front"), "http");
        cr_assert_gt(tgh_count_lines_with(log, "", reason), 0, "no log line says '%s':\n%s",
                     reason, log);
    }
    json_decref(all);
    cr_assert_null(strstr(audit, "CANARY"), "the canary reached the audit:\n%s", audit);
    cr_assert_null(strstr(log, "CANARY"), "the canary reached the log:\n%s", log);
    for (int i = 0; i < 4; i++) {
        /* each part of the token alone: header, claims, signature */
        char part[8192];
        snprintf(part, sizeof part, "%s", toks[i]);
        for (char *p = strtok(part, "."); p != NULL; p = strtok(NULL, ".")) {
            char head[24];
            snprintf(head, sizeof head, "%.20s", p);
            cr_assert_null(strstr(audit, head), "part of token %d in the audit", i);
            cr_assert_null(strstr(log, head), "part of token %d in the log", i);
        }
    }
    free(audit);
    free(log);
    EVP_PKEY_free(key);
    EVP_PKEY_free(other);
}

/* A flood of refused requests (a token being guessed) is audited at 100
 * a second per listener (200 at once), so it cannot crowd calls out of
 * the audit queue; the next refusal audited counts the ones that were
 * not, so none goes unaccounted. */
Test(http_audit, a_flood_of_refusals_is_audited_at_a_bounded_rate_and_counted, .fini = fini,
     .timeout = 60)
{
    start("");
    enum { FLOOD = 400 };
    thc_resp_t r;
    uint64_t t0 = tgh_now_ms(), flood_ms = 0;
    for (int i = 0; i <= FLOOD; i++) {
        if (i == FLOOD) {
            flood_ms = tgh_now_ms() - t0;
            tgh_sleep_ms(1100); /* the rate has room again: this one is audited */
        }
        cr_assert_eq(thc_post(port, NULL, "Authorization: Bearer nobody\r\n", THC_INIT_BODY, &r),
                     0);
        cr_assert_eq(r.status, 401, "%s", r.raw);
        thc_free(&r);
    }
    uint64_t deadline = tgh_now_ms() + 5000;
    long audited = 0, quiet = 0, last_count = 0;
    while (tgh_now_ms() < deadline) {
        char *audit = tgh_read_file(S.audit, NULL);
        json_t *all = events(audit);
        free(audit);
        audited = quiet = 0;
        size_t i;
        json_t *ev;
        json_array_foreach(all, i, ev) {
            const char *reason = str(ev, "reason");
            if (reason == NULL || strncmp(reason, "unauthenticated", 15) != 0)
                continue;
            audited++;
            last_count = (long)json_integer_value(json_object_get(ev, "count"));
            quiet += last_count;
        }
        json_decref(all);
        if (audited + quiet == FLOOD + 1)
            break;
        tgh_sleep_ms(100);
    }
    cr_expect_eq(audited + quiet, FLOOD + 1, "%ld audited + %ld counted", audited, quiet);
    /* at most the burst, what the rate refilled while the flood ran, and
     * the last one (a slow machine floods slowly: the bound follows) */
    long most = 200 + (long)(flood_ms / 10) + 2;
    cr_expect_leq(audited, most, "%ld audited in %lu ms", audited, (unsigned long)flood_ms);
    if (most < FLOOD)
        cr_expect_gt(last_count, 0, "the last refusal does not count the ones before it");
}

/* Idle connections are cheap: 1 000 that never sent a byte and 20 that
 * were answered and kept alive hold no read buffer and no request arena
 * (before, each held 16 KiB of read buffer and a head arena of
 * max_header_bytes); a request part-read holds them until it is done. */
#define IDLE_CONNS 1000
#define KEPT_CONNS 20
Test(http_audit, idle_connections_hold_no_buffers, .fini = fini, .timeout = 90)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl); /* toolgate inherits it */
    cr_assert_geq(rl.rlim_cur, 2 * (IDLE_CONNS + KEPT_CONNS) + 200, "too few descriptors");
    start(", \"max_connections\": 2000, \"header_timeout\": \"60s\", "
          "\"keepalive_timeout\": \"60s\"");
    static int fds[IDLE_CONNS + KEPT_CONNS];
    char req[256];
    int rn = snprintf(req, sizeof req, "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
    for (int i = 0; i < IDLE_CONNS + KEPT_CONNS; i++) {
        fds[i] = tgh_tcp_dial(port);
        cr_assert_geq(fds[i], 0, "connection %d", i);
        if (i >= IDLE_CONNS)
            cr_assert_eq(send(fds[i], req, (size_t)rn, 0), rn);
    }
    for (int i = IDLE_CONNS; i < IDLE_CONNS + KEPT_CONNS; i++) {
        char buf[1024];
        cr_assert_gt(recv(fds[i], buf, sizeof buf, 0), 0, "no answer on connection %d", i);
    }
    wait_sample("toolgate_http_connections", IDLE_CONNS + KEPT_CONNS);
    char *m = metrics();
    long long held = sample_of(m, "toolgate_http_connection_buffer_bytes", "");
    cr_assert(held >= 0 && held < (IDLE_CONNS + KEPT_CONNS) * 1024LL,
              "idle connections hold %lld bytes of buffers", held);
    free(m);
    /* A request part-read holds its buffers; they go once it is done. */
    static const char part[] = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
    cr_assert_eq(send(fds[0], part, sizeof part - 1, 0), (ssize_t)(sizeof part - 1));
    long long now = held;
    for (int tries = 0; tries < 200 && now <= held; tries++) {
        tgh_sleep_ms(50);
        m = metrics();
        now = sample_of(m, "toolgate_http_connection_buffer_bytes", "");
        free(m);
    }
    cr_assert_gt(now, held + 16 * 1024 - 1, "a part-read request holds %lld bytes", now);
    for (int i = 0; i < IDLE_CONNS + KEPT_CONNS; i++)
        close(fds[i]);
    wait_sample("toolgate_http_connections", 0);
    wait_sample("toolgate_http_connection_buffer_bytes", 0);
    tgh_serve_stop(&S, 15000);
}
