/* `toolgate serve --http HOST:PORT [--limit ...] -- CMD` (issue 13): one
 * MCP agent behind one HTTP listener with no config file. The real
 * binary: it starts, answers initialize and tools/call over HTTP, applies
 * --limit as wrap does, takes --path and --name, and refuses bad
 * arguments with exit status 2 and a message naming the argument. */
#define _GNU_SOURCE /* strcasestr */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tg_harness.h"

#define SH_FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"
#define SH_INIT                                                                                    \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"     \
    "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"
#define SH_INITIALIZED "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"

static tgh_serve_t S;
static int sh_port;

static void sh_fini(void)
{
    tgh_cleanup();
}

TestSuite(serve_http_cli, .fini = sh_fini, .timeout = 30);

/* Start `toolgate serve --http 127.0.0.1:0 <extra...> -- fixture --log
 * LOG` with the audit in the run's dir; wait until it serves and read the
 * port it bound from its stderr. */
static void sh_start(const char *const *extra)
{
    char *argv[TGH_MAX_ARGS];
    int n = 0;
    cr_assert_eq(tgh_serve_prepare(&S, "unused"), 0);
    S.sock[0] = '\0';
    argv[n++] = (char *)TG_BIN;
    argv[n++] = (char *)"serve";
    argv[n++] = (char *)"--http";
    argv[n++] = (char *)"127.0.0.1:0";
    argv[n++] = (char *)"--audit";
    argv[n++] = S.audit;
    for (; extra != NULL && *extra != NULL; extra++)
        argv[n++] = (char *)*extra;
    argv[n++] = (char *)"--";
    argv[n++] = (char *)SH_FIXTURE;
    argv[n++] = (char *)"--log";
    argv[n++] = S.log;
    argv[n] = NULL;
    cr_assert_eq(tgh_spawn(&S.tg, argv, NULL, S.err), 0);
    if (tgh_log_wait(S.err, "serving ", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "toolgate serve --http did not start");
    char *err = tgh_read_file(S.err, NULL);
    const char *p = err != NULL ? strstr(err, "(port ") : NULL;
    cr_assert_not_null(p, "no port in:\n%s", err ? err : "");
    sh_port = atoi(p + 6);
    cr_assert_gt(sh_port, 0);
    free(err);
}

/* One POST of <body> to <path> on its own connection (Connection: close),
 * with <sid> as Mcp-Session-Id when non-NULL and the header lines <extra>
 * ("Name: value\r\n"...). The status; the whole answer (head and body) in
 * <*out> (to free). */
static int sh_post_h(const char *path, const char *sid, const char *extra, const char *body,
                     char **out)
{
    char req[4096];
    char sidh[128] = "";
    if (sid != NULL)
        snprintf(sidh, sizeof sidh, "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n",
                 sid);
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     "Content-Type: application/json\r\n%s%sConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, sh_port, sidh, extra, strlen(body), body);
    cr_assert_lt((size_t)n, sizeof req);
    int fd = tgh_tcp_dial(sh_port);
    cr_assert_geq(fd, 0, "connect to port %d: %s", sh_port, strerror(-fd));
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    size_t len = 0;
    *out = tgh_read_all(fd, &len);
    close(fd);
    cr_assert_not_null(*out);
    int status = 0;
    cr_assert_eq(sscanf(*out, "HTTP/1.1 %d", &status), 1, "not an HTTP answer: '%s'", *out);
    return status;
}

static int sh_post(const char *path, const char *sid, const char *body, char **out)
{
    return sh_post_h(path, sid, "", body, out);
}

/* initialize and notifications/initialized on <path>: the session id. */
static void sh_session(const char *path, char *sid, size_t cap)
{
    char *ans = NULL;
    int st = sh_post(path, NULL, SH_INIT, &ans);
    cr_assert_eq(st, 200, "initialize: %s", ans);
    cr_assert(strstr(ans, "\"serverInfo\"") != NULL, "no serverInfo in %s", ans);
    const char *h = strcasestr(ans, "\r\nMcp-Session-Id: ");
    cr_assert_not_null(h, "no Mcp-Session-Id in %s", ans);
    h += strlen("\r\nMcp-Session-Id: ");
    size_t n = strcspn(h, "\r\n");
    cr_assert_lt(n, cap);
    memcpy(sid, h, n);
    sid[n] = '\0';
    free(ans);
    st = sh_post(path, sid, SH_INITIALIZED, &ans);
    cr_assert_eq(st, 202, "notifications/initialized: %s", ans);
    free(ans);
}

/* tools/call echo with id <id>: the whole answer (to free), status 200. */
static char *sh_echo(const char *path, const char *sid, int id)
{
    char body[256], *ans = NULL;
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"text\":\"hi-%d\"}}}",
             id, id);
    int st = sh_post(path, sid, body, &ans);
    cr_assert_eq(st, 200, "tools/call %d: %s", id, ans);
    return ans;
}

Test(serve_http_cli, serves_initialize_and_calls)
{
    sh_start(NULL);
    char sid[128];
    sh_session("/mcp", sid, sizeof sid);
    char *ans = sh_echo("/mcp", sid, 2);
    cr_assert(strstr(ans, "\"id\":2") != NULL && strstr(ans, "\"result\"") != NULL, "echo: %s",
              ans);
    free(ans);
    /* The agent is the command's basename; the audit names it. */
    cr_assert_geq(tgh_file_wait(S.audit, "\"agent\":\"tg_fixture_agent\"", 1, 5000), 1);
    tgh_serve_stop(&S, 10000);
}

Test(serve_http_cli, limit_rate_applies)
{
    const char *const extra[] = {"--limit", "rate_limit=2/minute", NULL};
    sh_start(extra);
    char sid[128];
    sh_session("/mcp", sid, sizeof sid);
    for (int id = 2; id <= 3; id++) {
        char *ans = sh_echo("/mcp", sid, id);
        cr_assert(strstr(ans, "\"result\"") != NULL, "call %d: %s", id, ans);
        free(ans);
    }
    /* A denial is the JSON-RPC error, in a 200 as MCP expects. */
    char *ans = sh_echo("/mcp", sid, 4);
    cr_assert(strstr(ans, "\"error\"") != NULL && strstr(ans, "-32060") != NULL &&
                  strstr(ans, "rate_limit_exceeded") != NULL,
              "call 4 not refused by rate_limit=2/minute: %s", ans);
    free(ans);
    cr_assert_geq(tgh_file_wait(S.audit, "call.denied", 1, 5000), 1);
    tgh_serve_stop(&S, 10000);
}

Test(serve_http_cli, path_and_name)
{
    const char *const extra[] = {"--path", "/tools/v1", "--name", "fx-http", NULL};
    sh_start(extra);
    char *ans = NULL;
    int st = sh_post("/mcp", NULL, SH_INIT, &ans);
    cr_assert_eq(st, 404, "the default path answered under --path: %s", ans);
    free(ans);
    char sid[128];
    sh_session("/tools/v1", sid, sizeof sid);
    ans = sh_echo("/tools/v1", sid, 2);
    cr_assert(strstr(ans, "\"result\"") != NULL, "%s", ans);
    free(ans);
    cr_assert_geq(tgh_file_wait(S.audit, "\"agent\":\"fx-http\"", 1, 5000), 1);
    tgh_serve_stop(&S, 10000);
}

Test(serve_http_cli, allowed_origin)
{
    const char *const extra[] = {"--allowed-origin", "http://app.example", NULL};
    sh_start(extra);
    char *ans = NULL;
    int st = sh_post_h("/mcp", NULL, "Origin: http://app.example\r\n", SH_INIT, &ans);
    cr_assert_eq(st, 200, "the allowed origin was refused: %s", ans);
    free(ans);
    st = sh_post_h("/mcp", NULL, "Origin: http://other.example\r\n", SH_INIT, &ans);
    cr_assert_eq(st, 403, "another origin was let through: %s", ans);
    free(ans);
    tgh_serve_stop(&S, 10000);
}

/* `toolgate serve <args...>` must exit 2 without serving, saying <want>. */
static void sh_refused(const char *const *args, const char *want)
{
    char *argv[TGH_MAX_ARGS];
    int n = 0;
    argv[n++] = (char *)TG_BIN;
    argv[n++] = (char *)"serve";
    for (; *args != NULL; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    static tgh_proc_t p; /* registered with the harness: it must outlive the test body */
    char dir[TGH_PATH], err_path[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    cr_assert_eq(tgh_spawn(&p, argv, NULL, err_path), 0);
    cr_assert_eq(tgh_wait(&p, 10000), 0, "serve %s did not exit", argv[2]);
    char *err = tgh_read_file(err_path, NULL);
    cr_assert_eq(tgh_exit_code(&p), 2, "serve %s: status %d:\n%s", argv[2], tgh_exit_code(&p),
                 err ? err : "");
    cr_assert(err != NULL && strstr(err, want) != NULL, "no '%s' in:\n%s", want, err ? err : "");
    cr_assert(strchr(err, '\n') == err + strlen(err) - 1, "not one line:\n%s", err);
    free(err);
    tgh_kill(&p);
}

Test(serve_http_cli, bad_arguments_exit_2_naming_them)
{
    static const struct {
        const char *args[8];
        const char *want;
    } cases[] = {
        {{NULL}, "needs --config FILE"},
        {{"--http", NULL}, "--http needs a value"},
        {{"--http", "nowhere", "--", SH_FIXTURE, NULL}, "--http: address 'nowhere'"},
        {{"--http", "127.0.0.1:0", NULL}, "--http: no agent command"},
        {{"--http", "0.0.0.0:0", "--", SH_FIXTURE, NULL}, "--http 0.0.0.0:0: not on loopback"},
        {{"--http", "127.0.0.1:0", "--path", "mcp", "--", SH_FIXTURE, NULL}, "--path: \"mcp\""},
        {{"--http", "127.0.0.1:0", "--limit", "rate_limit=lots", "--", SH_FIXTURE, NULL},
         "--limit rate_limit=lots: rate_limit"},
        {{"--http", "127.0.0.1:0", "--limit", "colour=red", "--", SH_FIXTURE, NULL},
         "--limit colour=red: unknown key"},
        {{"--http", "127.0.0.1:0", "--tls", "on", "--", SH_FIXTURE, NULL}, "--tls: 'on'"},
        {{"--http", "127.0.0.1:0", "--tls-key", "/k.pem", "--", SH_FIXTURE, NULL},
         "--tls-key: TLS needs both"},
        {{"--http", "127.0.0.1:0", "--allowed-origin", "app", "--", SH_FIXTURE, NULL},
         "--allowed-origin: \"app\""},
        {{"--http", "127.0.0.1:0", "--name", "a/b", "--", SH_FIXTURE, NULL}, "--name: 'a/b'"},
        {{"--http", "127.0.0.1:0", "--colour", "--", SH_FIXTURE, NULL},
         "unknown option '--colour'"},
        {{"--config", "/nonexistent.json", "--http", "127.0.0.1:0", NULL},
         "--config FILE takes no other argument (got --http)"},
        {{"--config", "/nonexistent.json", "--", SH_FIXTURE, NULL},
         "--config FILE takes no other argument (got a command)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        sh_refused(cases[i].args, cases[i].want);
}

Test(serve_http_cli, non_loopback_with_tls_off_starts)
{
    /* --tls off says on purpose that a proxy in front terminates TLS. */
    char *argv[] = {(char *)TG_BIN,
                    (char *)"serve",
                    (char *)"--http",
                    (char *)"0.0.0.0:0",
                    (char *)"--tls",
                    (char *)"off",
                    (char *)"--audit",
                    NULL,
                    (char *)"--",
                    (char *)SH_FIXTURE,
                    NULL};
    cr_assert_eq(tgh_serve_prepare(&S, "unused"), 0);
    S.sock[0] = '\0';
    argv[7] = S.audit;
    cr_assert_eq(tgh_spawn(&S.tg, argv, NULL, S.err), 0);
    if (tgh_log_wait(S.err, "serving ", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "serve --http 0.0.0.0:0 --tls off did not start");
    tgh_serve_stop(&S, 10000);
}

Test(serve_http_cli, usage_names_serve_http)
{
    char *argv[] = {(char *)TG_BIN, (char *)"--help", NULL};
    static tgh_proc_t p; /* registered with the harness: it must outlive the test body */
    cr_assert_eq(tgh_spawn(&p, argv, NULL, NULL), 0);
    tgh_close_stdin(&p);
    static char out[16384];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof out - 1 && (r = read(p.out_fd, out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    cr_assert_eq(tgh_wait(&p, 5000), 0);
    cr_assert_eq(tgh_exit_code(&p), 0);
    cr_assert(strstr(out, "toolgate serve --http HOST:PORT") != NULL, "%s", out);
    tgh_kill(&p);
}

/* Issue 20 item 17: the listener line's URL has the port bound (asked
 * for 0), and a certificate file that is not there is bad config (exit 2,
 * naming the options), not a runtime failure (1). */
Test(serve_http_cli, url_has_the_bound_port_and_a_missing_cert_exits_2)
{
    sh_start(NULL);
    char want[256];
    snprintf(want, sizeof want, "MCP Streamable HTTP on http://127.0.0.1:%d/mcp", sh_port);
    cr_expect_eq(tgh_file_count(S.err, want), 1, "no \"%s\" in:\n%s", want,
                 tgh_read_file(S.err, NULL));
    tgh_serve_stop(&S, 10000);

    static tgh_proc_t p; /* registered with the harness */
    char dir[TGH_PATH], err_path[TGH_PATH + 16], audit[TGH_PATH + 16], cert[TGH_PATH + 16],
        key[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    snprintf(audit, sizeof audit, "%s/audit.jsonl", dir);
    snprintf(cert, sizeof cert, "%s/absent.pem", dir);
    snprintf(key, sizeof key, "%s/absent.key", dir);
    char *argv[] = {(char *)TG_BIN,       (char *)"serve", (char *)"--http",
                    (char *)"127.0.0.1:0", (char *)"--audit", audit,
                    (char *)"--tls-cert",  cert,             (char *)"--tls-key",
                    key,                   (char *)"--",     (char *)SH_FIXTURE,
                    NULL};
    cr_assert_eq(tgh_spawn(&p, argv, NULL, err_path), 0);
    cr_assert_eq(tgh_wait(&p, 10000), 0, "serve did not exit");
    char *err = tgh_read_file(err_path, NULL);
    cr_expect_eq(tgh_exit_code(&p), 2, "status %d:\n%s", tgh_exit_code(&p), err ? err : "");
    snprintf(want, sizeof want, "--tls-cert/--tls-key: tls cert %s: No such file or directory",
             cert);
    cr_expect(err != NULL && strstr(err, want) != NULL, "no '%s' in:\n%s", want, err ? err : "");
    free(err);
}
