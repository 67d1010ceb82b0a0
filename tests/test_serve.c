/* Integration tests of `toolgate serve`: Unix-socket listeners, one agent
 * instance per caller connection, limits shared across connections,
 * per-caller limits by peer uid, max_instances, callers_only, SIGTERM. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_serve_t S;
static tgh_proc_t s_second; /* registered with the harness: must outlive the test body */
static char *const *s_env;  /* extra environment for toolgate serve */

static void s_fini(void)
{
    tgh_cleanup();
}

/* Start `toolgate serve` with agent "fx" (the fixture) behind one socket;
 * <router_extra>, <agent_extra> and <top_extra> are spliced into the JSON. */
static void s_start(const char *router_extra, const char *agent_extra, const char *top_extra)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    tgh_fx_write(&S, &(tgh_fx_t){.router_extra = router_extra, .agent_extra = agent_extra,
                                 .top_extra = top_extra});
    tgh_serve_start(&S, NULL, s_env, 5000);
}

static void s_stop(void)
{
    tgh_serve_stop(&S, 10000);
}

/* The audit trail names the caller <name>. */
static void s_audit_names(const char *name)
{
    char needle[96];
    snprintf(needle, sizeof needle, "\"caller\":\"%s\"", name);
    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert(audit && strstr(audit, needle), "audit events do not name the caller %s", name);
    free(audit);
}

TestSuite(serve, .fini = s_fini, .timeout = 30);

Test(serve, one_instance_per_connection_and_shared_agent_rate)
{
    s_start(NULL, ", \"execution_limits\": {\"rate_limit\": \"5/second\"}", NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_connect(&b, S.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert_not_null(json_object_get(r, "result"), "initialize through serve failed");
    json_decref(r);
    r = mcp_initialize(&b, 5000);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    cr_assert_eq(tgh_log_wait(S.log, "start ", 2, 3000), 2, "two connections, two instances");

    /* 3 + 3 calls against one agent's 5/second: the sixth is refused. */
    int ok = 0, denied = 0;
    for (int i = 1; i <= 6; i++) {
        tgh_proc_t *c = i % 2 ? &a : &b;
        mcp_call(c, i, "echo", "{\"text\":\"hi\"}");
        r = mcp_await_int(c, i, 5000, NULL);
        cr_assert_not_null(r);
        if (json_object_get(r, "result"))
            ok++;
        else if (mcp_code_of(r) && strcmp(mcp_code_of(r), "rate_limit_exceeded") == 0)
            denied++;
        json_decref(r);
    }
    cr_assert_eq(ok, 5);
    cr_assert_eq(denied, 1);

    /* A connection that goes away takes its instance with it. */
    pid_t pids[8];
    cr_assert_eq(tgh_log_pids(S.log, pids, 8), 2);
    tgh_conn_close(&a);
    bool one_gone = false;
    for (int i = 0; i < 100 && !one_gone; i++) {
        one_gone = !tgh_pid_alive(pids[0]) || !tgh_pid_alive(pids[1]);
        tgh_sleep_ms(30);
    }
    cr_assert(one_gone, "closing a connection did not stop its agent instance");
    tgh_conn_close(&b);
    s_stop();
}

Test(serve, max_instances_refuses_initialize)
{
    s_start(NULL, ", \"max_instances\": 1", NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    mcp_connect(&b, S.sock);
    r = mcp_initialize(&b, 5000);
    cr_assert_not_null(r, "no answer to the initialize over max_instances");
    cr_assert_str_eq(mcp_code_of(r), "concurrency_limit_exceeded");
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 0, "the refusal must carry the id");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32061);
    json_decref(r);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    s_stop();
}

Test(serve, caller_limits_by_peer_uid)
{
    char callers[256];
    snprintf(callers, sizeof callers,
             ", \"callers\": [{\"name\": \"me\", \"uid\": %u, \"execution_limits\": "
             "{\"rate_limit\": \"2/second\"}}]",
             (unsigned)getuid());
    /* With the admin endpoint on, to see the caller's limits registered. */
    char admin[96], addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tgh_free_port());
    snprintf(admin, sizeof admin, ", \"admin\": \"%s\"", addr);
    s_start(admin, NULL, callers);
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    json_decref(mcp_initialize(&a, 5000));
    for (int i = 1; i <= 3; i++)
        mcp_call(&a, i, "echo", "{\"text\":\"x\"}");
    /* Answers come in any order: the denial is sent before the results. */
    json_t *by_id[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        json_t *r = tgh_read_json(&a, 5000, NULL);
        cr_assert_not_null(r, "only %d of 3 answers", k);
        json_int_t id = json_integer_value(json_object_get(r, "id"));
        cr_assert(id >= 1 && id <= 3 && by_id[id] == NULL, "unexpected answer id %lld", (long long)id);
        by_id[id] = r;
    }
    cr_assert_not_null(json_object_get(by_id[1], "result"), "call 1 should pass");
    cr_assert_not_null(json_object_get(by_id[2], "result"), "call 2 should pass");
    json_t *r3 = by_id[3];
    json_decref(by_id[1]);
    json_decref(by_id[2]);
    cr_assert_str_eq(mcp_code_of(r3), "rate_limit_exceeded");
    json_t *data = json_object_get(json_object_get(r3, "error"), "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "scope")), "caller");
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")),
                     "callers.me.execution_limits.rate_limit");
    json_decref(r3);
    /* The caller's bucket is a registered limit, full after two calls. */
    char cmd[2048], out[TGH_PATH + 32];
    snprintf(out, sizeof out, "%s/status.txt", S.dir);
    cr_assert_lt((size_t)snprintf(cmd, sizeof cmd, "'%s' status --admin %s > '%s' 2>&1", TG_BIN,
                                  addr, out),
                 sizeof cmd);
    cr_assert_eq(system(cmd), 0);
    char *status = tgh_read_file(out, NULL);
    cr_assert(status && strstr(status, "caller.me.rate"), "caller limit not registered:\n%s",
              status ? status : "");
    free(status);
    tgh_conn_close(&a);
    s_stop();
    s_audit_names("me");
}

Test(serve, callers_only_refuses_unknown_peers)
{
    s_start(", \"callers_only\": true", NULL,
            ", \"callers\": [{\"name\": \"nobody\", \"uid\": 4242424}]");
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert_not_null(r);
    cr_assert_str_eq(mcp_code_of(r), "caller_not_allowed");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32066);
    json_decref(r);
    cr_assert_eq(tgh_log_count(S.log, "start "), 0, "an agent was started for a refused caller");
    /* audited with the front and the peer's uid (who was refused) */
    cr_assert_eq(tgh_file_wait(S.audit, "\"caller_not_allowed\"", 1, 5000), 1);
    char *audit = tgh_read_file(S.audit, NULL);
    const char *ev = strstr(audit, "\"code\":\"caller_not_allowed\"");
    cr_assert_not_null(ev, "%s", audit);
    while (ev > audit && ev[-1] != '\n')
        ev--;
    char uid[32];
    snprintf(uid, sizeof uid, "\"remote\":\"uid:%u\"", (unsigned)getuid());
    char line[2048];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(ev, "\n"), ev);
    cr_assert_not_null(strstr(line, "\"event\":\"call.denied\""), "%s", line);
    cr_assert_not_null(strstr(line, "\"front\":\"unix\""), "%s", line);
    cr_assert_not_null(strstr(line, uid), "%s", line);
    free(audit);
    tgh_conn_close(&a);
    s_stop();
}

Test(serve, live_socket_is_an_error_stale_is_replaced)
{
    s_start(NULL, NULL, NULL);
    /* A second serve on the same path must refuse: the socket is live. */
    tgh_proc_t *second = &s_second;
    char err2[TGH_PATH + 16];
    snprintf(err2, sizeof err2, "%s/stderr2.txt", S.dir);
    char *const argv[] = {(char *)TG_BIN, (char *)"serve", (char *)"--config", S.cfg, NULL};
    cr_assert_eq(tgh_spawn(second, argv, NULL, err2), 0);
    cr_assert_eq(tgh_wait(second, 5000), 0);
    cr_assert_eq(tgh_exit_code(second), 1, "a live socket: status 1, not an abort");
    char *e = tgh_read_file(err2, NULL);
    cr_assert(e && strstr(e, "is live"), "no clear error for a live socket: %s", e ? e : "");
    free(e);
    /* SIGKILL leaves a stale socket file; a new serve replaces it. */
    kill(S.tg.pid, SIGKILL);
    tgh_wait(&S.tg, 5000);
    cr_assert(access(S.sock, F_OK) == 0);
    cr_assert_eq(tgh_spawn(&S.tg, argv, NULL, S.err), 0);
    tgh_proc_t a;
    bool up = tgh_log_wait(S.err, "serving ", 2, 5000) >= 2;
    cr_assert(up, "a stale socket file was not replaced");
    mcp_connect(&a, S.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    tgh_conn_close(&a);
    s_stop();
}

Test(serve, bad_listener_agent_is_a_config_error)
{
    char dir[TGH_PATH], cfg[TGH_PATH + 16], err[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(err, sizeof err, "%s/e.txt", dir);
    tgh_write_file(cfg, "{\"router\": {\"listen\": [{\"unix\": \"/tmp/x.sock\", \"agent\": \"nope\"}]},\n"
                        " \"agents\": [{\"id\": \"fx\", \"command\": [\"/bin/true\"]}]}\n");
    tgh_proc_t *p = &s_second;
    char *const argv[] = {(char *)TG_BIN, (char *)"serve", (char *)"--config", cfg, NULL};
    cr_assert_eq(tgh_spawn(p, argv, NULL, err), 0);
    cr_assert_eq(tgh_wait(p, 5000), 0);
    cr_assert_eq(tgh_exit_code(p), 2);
    char *e = tgh_read_file(err, NULL);
    cr_assert(e && strstr(e, "router.listen[0].agent") && strstr(e, "\"nope\""),
              "unclear error: %s", e ? e : "");
    free(e);
}

/* Two serves of one config without router.instance write the default
 * audit file ($XDG_STATE_HOME/toolgate/audit.jsonl) side by side: each is
 * its own run, named HOST-serve-PID, so `audit verify --stopped` checks
 * each on its own (one shared name read as duplicates and an unstopped
 * run). */
Test(serve, two_runs_of_one_config_are_two_instances)
{
    static tgh_serve_t two[2];
    static tgh_proc_t c[2];
    char state[TGH_PATH + 16], envv[TGH_PATH + 32], audit[TGH_PATH + 64];
    cr_assert_eq(tgh_serve_prepare(&two[0], "fx"), 0);
    cr_assert_eq(tgh_serve_prepare(&two[1], "fx"), 0);
    snprintf(state, sizeof state, "%s/state", two[0].dir);
    snprintf(envv, sizeof envv, "XDG_STATE_HOME=%s", state);
    snprintf(audit, sizeof audit, "%s/toolgate/audit.jsonl", state);
    char *const env[] = {envv, NULL};
    for (int i = 0; i < 2; i++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"}]},\n"
                 " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", "
                 "\"--log\", \"%s\"]}]}\n",
                 two[i].sock, TG_AGENTS_DIR, two[i].log);
        tgh_serve_start(&two[i], json, env, 5000);
        mcp_connect(&c[i], two[i].sock);
        mcp_init_ok(&c[i], 5000);
        mcp_call_text(&c[i], 1, "echo", "{\"text\":\"x\"}", "x", 5000);
    }
    for (int i = 0; i < 2; i++) {
        tgh_conn_close(&c[i]);
        tgh_serve_stop(&two[i], 10000);
    }
    char host[256] = "";
    cr_assert_eq(gethostname(host, sizeof host), 0);
    char *text = tgh_read_file(audit, NULL);
    cr_assert_not_null(text, "no audit at the default path %s", audit);
    for (int i = 0; i < 2; i++) {
        char want[300];
        snprintf(want, sizeof want, "\"instance\":\"%.128s-serve-%d\"", host, (int)two[i].tg.pid);
        cr_assert_gt(tgh_count_lines_with(text, "", want), 3, "no events of %s in %s", want, text);
    }
    free(text);
    char cmd[3 * TGH_PATH], out[TGH_PATH + 16];
    snprintf(out, sizeof out, "%s/verify.txt", two[0].dir);
    snprintf(cmd, sizeof cmd, "'%s' audit verify --stopped '%s' > '%s' 2>&1", TG_BIN, audit, out);
    int st = system(cmd);
    char *v = tgh_read_file(out, NULL);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "audit verify --stopped refused the shared file:\n%s", v ? v : "");
    free(v);
}

static char *s_env_text(tgh_proc_t *c, int id, const char *name)
{
    char args[128];
    snprintf(args, sizeof args, "{\"name\":\"%s\"}", name);
    mcp_call(c, id, "env", args);
    json_t *r = mcp_await_int(c, id, 5000, NULL);
    cr_assert_not_null(r);
    const char *t = mcp_text_of(r);
    char *out = strdup(t ? t : "");
    json_decref(r);
    return out;
}

/* Serve mode passes the agent only env.pass and env.set, never the rest of
 * the daemon's environment (unlike wrap, a drop-in). */
Test(serve, agent_environment_is_allowlisted)
{
    static char *const env[] = {(char *)"TG_SERVE_PASSED=passed", (char *)"TG_SERVE_HIDDEN=CANARY-9e2f", NULL};
    s_env = env;
    s_start(NULL, ", \"env\": {\"pass\": [\"TG_SERVE_PASSED\", \"PATH\"], \"set\": {\"TG_SET\": \"yes\"}}", NULL);
    s_env = NULL;
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    json_decref(mcp_initialize(&a, 5000));
    char *v = s_env_text(&a, 1, "TG_SERVE_PASSED");
    cr_assert_str_eq(v, "passed");
    free(v);
    v = s_env_text(&a, 2, "TG_SET");
    cr_assert_str_eq(v, "yes");
    free(v);
    v = s_env_text(&a, 3, "TG_SERVE_HIDDEN");
    cr_assert_str_eq(v, "(unset)", "a variable outside env.pass reached the agent");
    free(v);
    tgh_conn_close(&a);
    s_stop();
}

/* ---- hostile callers ------------------------------------------------------ */

static int s_count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Half a frame then silence: answered -32600 and closed after
 * router.frame_timeout; garbage gets -32700 and the session goes on. */
Test(serve, hostile_half_frame_and_garbage)
{
    s_start(", \"frame_timeout\": \"300ms\"", NULL, NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    json_decref(mcp_initialize(&a, 5000));
    cr_assert_eq(tgh_send(&a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"meth", 30, 1000), 0);
    uint64_t t0 = tgh_now_ms();
    json_t *r = tgh_read_json(&a, 3000, NULL);
    cr_assert_not_null(r, "no answer to a half frame left idle");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32600);
    json_decref(r);
    char *rest = tgh_read_line(&a, 3000, NULL);
    cr_assert(rest == NULL && a.out_eof, "the idle caller was not disconnected");
    cr_assert_lt(tgh_now_ms() - t0, 2500);
    tgh_conn_close(&a);

    mcp_connect(&b, S.sock);
    json_decref(mcp_initialize(&b, 5000));
    tgh_sendf(&b, "\x01\x02 not json at all");
    r = tgh_read_json(&b, 3000, NULL);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32700);
    json_decref(r);
    mcp_call(&b, 1, "echo", "{\"text\":\"still\"}");
    r = mcp_await_int(&b, 1, 3000, NULL);
    cr_assert_not_null(json_object_get(r, "result"), "the session did not go on after garbage");
    json_decref(r);
    tgh_conn_close(&b);
    s_stop();
}

/* Many connects and disconnects, some mid-call: every instance is stopped,
 * nothing leaks (fds), and the gateway still serves. */
Test(serve, hostile_connect_churn_and_disconnect_mid_call, .timeout = 120)
{
    s_start(NULL, ", \"max_instances\": 4", NULL);
    int fds0 = s_count_fds(S.tg.pid);
    /* Warm up (pools, the first instance), then take the memory baseline. */
    tgh_proc_t w;
    mcp_connect(&w, S.sock);
    json_decref(mcp_initialize(&w, 5000));
    tgh_conn_close(&w);
    tgh_sleep_ms(300);
    long rss0 = tgh_proc_status_kb(S.tg.pid, "VmRSS");
    for (int i = 0; i < 2000; i++) {
        tgh_proc_t c;
        mcp_connect(&c, S.sock);
        if (i % 10 == 0) {
            json_decref(mcp_initialize(&c, 5000));
            mcp_call(&c, 1, "sleep", "{\"ms\":5000}");
        }
        tgh_conn_close(&c);
    }
    /* Instances of dropped connections go away: the last may have had its
     * call queued behind three 5 s sleeps (max_concurrent_calls 3 for 4
     * instances, all of them initialized now that idle connections take
     * no instance), so up to two sleeps and the stop steps. */
    pid_t pids[256];
    bool all_gone = false;
    for (int k = 0; k < 200 && !all_gone; k++) {
        int n = tgh_log_pids(S.log, pids, 256);
        all_gone = true;
        for (int i = 0; i < n; i++)
            all_gone = all_gone && !tgh_pid_alive(pids[i]);
        if (!all_gone)
            tgh_sleep_ms(100);
    }
    cr_assert(all_gone, "agent instances outlived their callers");
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert_not_null(json_object_get(r, "result"), "the gateway stopped serving after churn");
    json_decref(r);
    tgh_conn_close(&a);
    tgh_sleep_ms(300);
    int fds1 = s_count_fds(S.tg.pid);
    cr_assert_leq(fds1, fds0 + 2, "fds grew from %d to %d over 2000 connections", fds0, fds1);
    /* Memory back to baseline (not under ASan: its quarantine keeps freed
     * memory resident by design; TG_ASAN=1 is set by .ci/run there). */
    long rss1 = tgh_proc_status_kb(S.tg.pid, "VmRSS");
    const char *asan = getenv("TG_ASAN");
    cr_assert_gt(rss0, 0);
    if (asan == NULL || strcmp(asan, "1") != 0)
        cr_assert_leq(rss1, rss0 + 2048, "RSS grew from %ld to %ld KiB over 2000 connections",
                      rss0, rss1);
    s_stop();
}

/* 50 callers at once, each with its own instance, calls interleaved: every
 * call answered with its own result, on its own connection. */
Test(serve, fifty_concurrent_callers, .timeout = 90)
{
    s_start(NULL,
            ", \"max_instances\": 64, \"execution_limits\": {\"rate_limit\": \"1000/second\", "
            "\"max_concurrent_calls\": 16, \"max_queued_calls\": 256}",
            NULL);
    enum { N = 50, CALLS = 3 };
    static tgh_proc_t c[N];
    for (int i = 0; i < N; i++)
        mcp_connect(&c[i], S.sock);
    for (int i = 0; i < N; i++)
        tgh_sendf(&c[i], MCP_INITIALIZE);
    for (int i = 0; i < N; i++) {
        json_t *r = mcp_await_int(&c[i], 0, 30000, NULL);
        cr_assert(r != NULL && json_object_get(r, "result") != NULL, "caller %d: no initialize", i);
        json_decref(r);
        tgh_sendf(&c[i], MCP_INITIALIZED);
    }
    for (int k = 1; k <= CALLS; k++)
        for (int i = 0; i < N; i++) {
            char args[64];
            snprintf(args, sizeof args, "{\"text\":\"c%d-k%d\"}", i, k);
            mcp_call(&c[i], k, "echo", args);
        }
    for (int i = 0; i < N; i++)
        for (int k = 1; k <= CALLS; k++) {
            json_t *r = mcp_await_int(&c[i], k, 30000, NULL);
            cr_assert_not_null(r, "caller %d: no answer to call %d", i, k);
            char want[64];
            snprintf(want, sizeof want, "c%d-k%d", i, k);
            char *text = json_dumps(r, JSON_COMPACT);
            cr_assert(strstr(text, want) != NULL, "caller %d call %d got %s", i, k, text);
            free(text);
            json_decref(r);
        }
    cr_assert_eq(tgh_log_count(S.log, "start "), N, "one instance per connection");
    for (int i = 0; i < N; i++)
        tgh_conn_close(&c[i]);
    s_stop();
}

/* A caller running as another uid gets that uid's callers[] entry: run one
 * connection as nobody (65534) next to one as root. */
Test(serve, caller_limits_by_another_uid)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to connect as another uid");
    s_start(NULL, ", \"execution_limits\": {\"rate_limit\": \"100/second\"}",
            ", \"callers\": [{\"name\": \"nobody\", \"uid\": 65534, \"execution_limits\": "
            "{\"rate_limit\": \"2/minute\"}}]");
    /* nobody must reach the socket: open the directory and the socket up. */
    cr_assert_eq(chmod(S.dir, 0755), 0);
    cr_assert_eq(chmod(S.sock, 0666), 0);
    int res[2];
    cr_assert_eq(pipe(res), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(res[0]);
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(10);
        tgh_proc_t c;
        mcp_connect(&c, S.sock);
        json_t *r = mcp_initialize(&c, 5000);
        if (r == NULL || json_object_get(r, "result") == NULL)
            _exit(11);
        json_decref(r);
        char out[4] = "...";
        for (int i = 1; i <= 3; i++) {
            mcp_call(&c, i, "echo", "{\"text\":\"x\"}");
            json_t *a = mcp_await_int(&c, i, 5000, NULL);
            const char *code = a != NULL ? mcp_code_of(a) : "none";
            out[i - 1] = a == NULL ? '?' : code == NULL ? 'y' : strcmp(code, "rate_limit_exceeded") == 0 ? 'r' : 'x';
            json_decref(a);
        }
        if (write(res[1], out, 3) != 3)
            _exit(12);
        _exit(0);
    }
    close(res[1]);
    char got[4] = {0};
    cr_assert_eq(read(res[0], got, 3), 3, "the nobody caller reported nothing");
    close(res[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the nobody caller failed (%d)", st);
    cr_assert_str_eq(got, "yyr", "nobody's 2/minute: two calls pass, the third is refused");
    /* root, on the same agent, is not held by nobody's limit. */
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    json_decref(mcp_initialize(&a, 5000));
    for (int i = 1; i <= 3; i++) {
        mcp_call(&a, i, "echo", "{\"text\":\"x\"}");
        json_t *r = mcp_await_int(&a, i, 5000, NULL);
        cr_assert(r != NULL && json_object_get(r, "result") != NULL, "root's call %d refused", i);
        json_decref(r);
    }
    tgh_conn_close(&a);
    s_stop();
    s_audit_names("nobody");
}

/* Issue 20 items 3 and 20: a caller that leaves while its task runs. The
 * task is cancelled at the agent with tasks/cancel (not a
 * notifications/cancelled for a request already answered), audited
 * call.cancelled caller_gone, and its slot is released. */
Test(serve, caller_leaving_mid_task_cancels_the_task)
{
    s_start(NULL,
            ", \"execution_limits\": {\"max_concurrent_calls\": 1, \"max_queued_calls\": 0, "
            "\"max_tool_call_duration\": \"60s\"}",
            NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 5000);
    cr_assert_eq(tgh_sendf(&a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
                               "{\"name\":\"sleep\",\"arguments\":{\"ms\":30000},\"task\":{}}}"),
                 0);
    json_t *r = mcp_await_int(&a, 1, 5000, NULL);
    cr_assert(r != NULL && json_object_get(json_object_get(r, "result"), "task") != NULL,
              "no CreateTaskResult");
    json_decref(r);
    tgh_conn_close(&a);
    cr_assert_eq(tgh_log_wait(S.log, "task_cancel \"task-0\"", 1, 5000), 1,
                 "the agent was not sent tasks/cancel");
    cr_assert_eq(tgh_log_count(S.log, "cancelled "), 0, "a notifications/cancelled was sent");
    cr_assert_gt(tgh_file_wait(S.audit, "\"reason\":\"caller_gone\"", 1, 5000), 0);
    /* the slot is released once the agent answered tasks/cancel */
    mcp_connect(&b, S.sock);
    mcp_init_ok(&b, 5000);
    json_t *ok = NULL;
    for (int i = 1; i <= 50 && ok == NULL; i++) {
        mcp_call(&b, i, "echo", "{\"text\":\"next\"}");
        r = mcp_await_int(&b, i, 5000, NULL);
        cr_assert_not_null(r);
        if (json_object_get(r, "result") != NULL) {
            ok = r;
            break;
        }
        cr_assert_str_eq(mcp_code_of(r), "concurrency_limit_exceeded");
        json_decref(r);
        tgh_sleep_ms(100);
    }
    cr_assert_not_null(ok, "the slot of the task whose caller left was not released");
    json_decref(ok);
    tgh_conn_close(&b);
    s_stop();
}

/* Issue 20 item 20: a caller that closes its connection while its call
 * runs. The call is cancelled at the agent (notifications/cancelled for
 * the id the agent saw), its slot is released (max_concurrent_calls 1: the
 * next caller's call is admitted), and audit says call.cancelled with
 * reason caller_gone, never call.denied agent_unavailable. */
Test(serve, caller_leaving_mid_call_cancels_it_at_the_agent)
{
    s_start(NULL,
            ", \"execution_limits\": {\"max_concurrent_calls\": 1, \"max_queued_calls\": 0, "
            "\"max_tool_call_duration\": \"60s\"}",
            NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 5000);
    mcp_call(&a, 41, "sleep", "{\"ms\":30000}");
    cr_assert_eq(tgh_log_wait(S.log, "call ", 1, 5000), 1, "the call did not reach the agent");
    char agent_id[32] = "";
    cr_assert_eq(tgh_log_field(S.log, "call ", 0, agent_id, sizeof agent_id), 0);
    char *sp = strchr(agent_id, ' '); /* "call <id> <tool>" */
    if (sp != NULL)
        *sp = '\0';
    uint64_t t0 = tgh_now_ms();
    tgh_conn_close(&a);
    char want[64];
    snprintf(want, sizeof want, "cancelled %s", agent_id);
    cr_assert_eq(tgh_log_wait(S.log, want, 1, 5000), 1,
                 "the agent was not told of the cancel (%s)", want);
    cr_assert_gt(tgh_file_wait(S.audit, "\"reason\":\"caller_gone\"", 1, 5000), 0,
                 "no caller_gone in the audit trail");
    /* The slot is released: another caller's call is admitted (the
     * first's instance answers the ping with it), well before the sleep
     * would have ended. */
    mcp_connect(&b, S.sock);
    mcp_init_ok(&b, 5000);
    json_t *r = NULL;
    for (int i = 1; i <= 50; i++) {
        mcp_call(&b, i, "echo", "{\"text\":\"next\"}");
        r = mcp_await_int(&b, i, 5000, NULL);
        cr_assert_not_null(r);
        if (json_object_get(r, "result") != NULL)
            break;
        cr_assert_str_eq(mcp_code_of(r), "concurrency_limit_exceeded");
        json_decref(r);
        r = NULL;
        tgh_sleep_ms(100);
    }
    cr_assert_not_null(r, "the slot of the call whose caller left was not released");
    json_decref(r);
    cr_assert_lt(tgh_now_ms() - t0, 15000);
    tgh_conn_close(&b);
    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert_not_null(audit);
    const char *ev = strstr(audit, "\"event\":\"call.cancelled\"");
    cr_assert_not_null(ev, "no call.cancelled event:\n%s", audit);
    char *eol = strchr(ev, '\n');
    cr_assert_not_null(eol);
    *eol = '\0';
    cr_assert_not_null(strstr(ev, "\"reason\":\"caller_gone\""),
                       "call.cancelled without reason caller_gone: %s", ev);
    *eol = '\n';
    cr_assert_null(strstr(audit, "agent_unavailable"), "the call was denied instead:\n%s", audit);
    free(audit);
    s_stop();
}
