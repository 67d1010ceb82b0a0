/* Shared limits end to end: toolgate wrap instances pointed at one Redis
 * with rate_scope=shared admit exactly the limit between them; with the
 * store down, on_store_error decides (closed: rate_store_unavailable), the
 * transition is audited, and the store's password never shows; a return
 * from the local fallback is charged to the shared bucket. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

static srv_t R;

static void sh_fini(void)
{
    tgh_cleanup();
    srv_done(&R);
}

TestSuite(shared, .fini = sh_fini, .timeout = 60);

/* Start `toolgate wrap` on the fixture agent with <extra> args
 * (NULL-terminated) in <w>, and initialize it; <name> names it in
 * failures. */
static void sh_start(tgh_wrap_t *w, const char *name, const char *const *extra)
{
    cr_assert_eq(tgh_wrap_start(w, extra, NULL, NULL), 0);
    json_t *r = mcp_initialize(&w->tg, 5000);
    cr_assert_not_null(r, "%s: no initialize answer", name);
    json_decref(r);
}

/* Close the stdin of <w>'s toolgate and wait for it to exit. */
static void sh_stop(tgh_wrap_t *w)
{
    tgh_close_stdin(&w->tg);
    cr_assert_eq(tgh_wait(&w->tg, 5000), 0);
}

Test(shared, three_instances_share_one_limit_exactly)
{
    srv_own(&R, false, NULL);
    /* A queue deep enough that concurrency never refuses: only the rate. */
    const char *extra[] = {"--store", R.url, "--limit", "rate_scope=shared",
                           "--limit", "rate_limit=30/minute", "--limit", "max_queued_calls=64",
                           NULL};
    static tgh_wrap_t p[3];
    const char *names[] = {"a", "b", "c"};
    for (int k = 0; k < 3; k++)
        sh_start(&p[k], names[k], extra);
    /* 20 calls each, interleaved: 60 asked, 30 allowed in total. */
    for (int i = 1; i <= 20; i++)
        for (int k = 0; k < 3; k++)
            mcp_call(&p[k].tg, i, "echo", "{\"text\":\"x\"}");
    int ok = 0, denied = 0;
    for (int k = 0; k < 3; k++) {
        for (int i = 1; i <= 20; i++) {
            json_t *r = tgh_read_json(&p[k].tg, 5000, NULL);
            cr_assert_not_null(r, "instance %s: answer %d missing", names[k], i);
            if (json_object_get(r, "result"))
                ok++;
            else if (mcp_code_of(r) && strcmp(mcp_code_of(r), "rate_limit_exceeded") == 0)
                denied++;
            json_decref(r);
        }
    }
    cr_assert_eq(ok, 30, "%d admitted across three instances (limit 30/minute)", ok);
    cr_assert_eq(denied, 30);
    for (int k = 0; k < 3; k++) {
        sh_stop(&p[k]);
        cr_assert_eq(tgh_exit_code(&p[k].tg), 0);
    }
    const char *path = p[0].audit;
    char *audit = tgh_read_file(path, NULL);
    cr_assert(audit && strstr(audit, "\"decided_by\":\"store\""),
              "audit does not say the store decided");
    free(audit);
    /* Events carrying decided_by pass the verifier's schema. */
    char cmd[TGH_PATH * 2 + 64];
    cr_assert_lt((size_t)snprintf(cmd, sizeof cmd, "'%s' audit verify '%s' >/dev/null 2>&1", TG_BIN,
                                  path),
                 sizeof cmd);
    cr_assert_eq(system(cmd), 0, "toolgate audit verify rejected %s", path);
}

/* A tool's own bucket shared (tools.echo.rate_scope=shared) beside a
 * local agent rate: two instances admit exactly 4 echo calls between them;
 * another tool is not held by it; the refusal names the tool scope. Then
 * both the agent's and the tool's buckets shared, in lease mode too. */
static void tool_shared_run(const char *mode, const char *agent_scope, int want_echo)
{
    srv_own(&R, false, NULL);
    char sm[32], as[32];
    snprintf(sm, sizeof sm, "shared_mode=%s", mode);
    snprintf(as, sizeof as, "rate_scope=%s", agent_scope);
    const char *extra[] = {"--store", R.url, "--limit", as, "--limit", sm, "--limit",
                           "rate_limit=1000/minute", "--limit", "tools.echo.rate_limit=4/minute",
                           "--limit", "tools.echo.rate_scope=shared", "--limit",
                           "max_queued_calls=64", NULL};
    static tgh_wrap_t p[2];
    const char *names[] = {"a", "b"};
    for (int k = 0; k < 2; k++)
        sh_start(&p[k], names[k], extra);
    int ok = 0, denied = 0, other = 0;
    for (int i = 1; i <= 5; i++)
        for (int k = 0; k < 2; k++) {
            mcp_call(&p[k].tg, i, "echo", "{\"text\":\"x\"}");
            json_t *r = mcp_await_int(&p[k].tg, i, 5000, NULL);
            cr_assert_not_null(r, "%s: answer %d missing", names[k], i);
            if (json_object_get(r, "result")) {
                ok++;
            } else {
                cr_assert_str_eq(mcp_code_of(r), "rate_limit_exceeded");
                json_t *data = mcp_data_of(r);
                cr_assert_str_eq(json_string_value(json_object_get(data, "scope")), "tool");
                cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")),
                                 "agents.tg_fixture_agent.tools.echo.rate_limit");
                denied++;
            }
            json_decref(r);
            mcp_call(&p[k].tg, 100 + i, "sleep", "{\"ms\":1}");
            r = mcp_await_int(&p[k].tg, 100 + i, 5000, NULL);
            cr_assert_not_null(r);
            other += json_object_get(r, "result") != NULL;
            json_decref(r);
        }
    cr_assert_eq(ok, want_echo, "%d echo calls admitted across two instances (tool limit 4/minute)",
                 ok);
    cr_assert_eq(denied, 10 - want_echo);
    cr_assert_eq(other, 10, "another tool was held by echo's shared bucket");
    for (int k = 0; k < 2; k++)
        sh_stop(&p[k]);
    srv_done(&R);
}

Test(shared, tool_bucket_shared_exact)
{
    tool_shared_run("exact", "local", 4);
}

Test(shared, tool_and_agent_buckets_shared_exact)
{
    tool_shared_run("exact", "shared", 4);
}

/* Lease mode never admits over the limit; leases held by one instance may
 * leave the other short (the documented under-admission bound). */
Test(shared, tool_bucket_shared_lease_never_over)
{
    srv_own(&R, false, NULL);
    const char *extra[] = {"--store", R.url, "--limit", "shared_mode=lease", "--limit",
                           "tools.echo.rate_limit=4/minute", "--limit",
                           "tools.echo.rate_scope=shared", NULL};
    static tgh_wrap_t p[2];
    sh_start(&p[0], "a", extra);
    sh_start(&p[1], "b", extra);
    int ok = 0;
    for (int i = 1; i <= 5; i++)
        for (int k = 0; k < 2; k++) {
            mcp_call(&p[k].tg, i, "echo", "{\"text\":\"x\"}");
            json_t *r = mcp_await_int(&p[k].tg, i, 5000, NULL);
            cr_assert_not_null(r);
            ok += json_object_get(r, "result") != NULL;
            json_decref(r);
        }
    cr_assert(ok >= 1 && ok <= 4, "%d echo calls admitted in lease mode (limit 4/minute)", ok);
    for (int k = 0; k < 2; k++)
        sh_stop(&p[k]);
}

Test(shared, tool_shared_needs_a_store_and_a_tool_rate)
{
    char dir[TGH_PATH], err[TGH_PATH + 32];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(err, sizeof err, "%s/check.stderr", dir);
    static tgh_proc_t p; /* registered with the harness: must outlive the body */
    char *const argv[] = {(char *)TG_BIN, (char *)"check", (char *)"--limit",
                          (char *)"tools.echo.rate_scope=shared", (char *)"--",
                          (char *)"/bin/true", NULL};
    cr_assert_eq(tgh_spawn(&p, argv, NULL, err), 0);
    cr_assert_eq(tgh_wait(&p, 10000), 0);
    cr_assert_eq(tgh_exit_code(&p), 1);
    char *text = tgh_read_file(err, NULL);
    cr_assert(text && strstr(text, "tools.echo.rate_scope: \"shared\" without a tool rate_limit"),
              "%s", text ? text : "");
    free(text);
}

Test(shared, store_down_closed_policy_and_no_password)
{
    if (redis_server_path() == NULL)
        cr_skip_test("redis-server is not installed; CI installs it");
    /* A free port nobody listens on: the store is down from the start. */
    int port = tgh_free_port();
    char url[128];
    snprintf(url, sizeof url, "redis://app:CANARY-PW-51c3@127.0.0.1:%d/0", port);
    const char *extra[] = {"--store", url, "--limit", "rate_scope=shared",
                           "--limit", "on_store_error=closed", NULL};
    static tgh_wrap_t p;
    sh_start(&p, "down", extra);
    uint64_t t0 = tgh_now_ms();
    mcp_call(&p.tg, 1, "echo", "{\"text\":\"x\"}");
    json_t *r = mcp_await_int(&p.tg, 1, 5000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(mcp_code_of(r), "rate_store_unavailable");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32067);
    cr_assert_lt(tgh_now_ms() - t0, 2000, "the call hung on a dead store");
    json_decref(r);
    sh_stop(&p);

    char *audit = tgh_read_file(p.audit, NULL);
    cr_assert(audit && strstr(audit, "\"event\":\"store.degraded\""), "no store.degraded event");
    cr_assert(strstr(audit, "CANARY-PW") == NULL, "the store password reached the audit trail");
    free(audit);
    char *err = tgh_read_file(p.err, NULL);
    cr_assert(err && strstr(err, "store.degraded"), "the degraded store was not logged");
    cr_assert(strstr(err, "CANARY-PW") == NULL, "the store password reached the log");
    free(err);
}

Test(shared, redis_restart_recovers_exact_admission)
{
    srv_own(&R, false, NULL);
    const char *extra[] = {"--store", R.url, "--limit", "rate_scope=shared",
                           "--limit", "rate_limit=3/minute", "--limit", "on_store_error=closed",
                           NULL};
    static tgh_wrap_t w;
    tgh_proc_t *p = &w.tg;
    sh_start(&w, "r", extra);
    mcp_call(p, 1, "echo", "{\"text\":\"x\"}");
    json_t *r = mcp_await_int(p, 1, 5000, NULL);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    /* Redis dies: the closed policy refuses at once. */
    srv_kill(&R);
    bool refused = false;
    for (int i = 2; i < 40 && !refused; i++) {
        mcp_call(p, i, "echo", "{\"text\":\"x\"}");
        r = mcp_await_int(p, i, 3000, NULL);
        cr_assert_not_null(r, "a call hung while Redis was down");
        refused = mcp_code_of(r) && strcmp(mcp_code_of(r), "rate_store_unavailable") == 0;
        if (refused) {
            /* One wording in both dialects (test_os: store_down_closed_refuses). */
            json_t *data = json_object_get(json_object_get(r, "error"), "data");
            cr_assert_str_eq(json_string_value(json_object_get(data, "scope")), "agent");
            cr_assert_str_eq(json_string_value(json_object_get(data, "unit")), "calls/minute");
            cr_assert_not_null(strstr(json_string_value(json_object_get(json_object_get(r, "error"),
                                                                        "message")),
                                      "the shared rate store is unavailable and on_store_error "
                                      "is closed"));
        }
        json_decref(r);
        if (!refused)
            tgh_sleep_ms(50);
    }
    cr_assert(refused, "the closed policy never applied with Redis down");
    /* Back on the same port (empty, its script cache lost too): exact again. */
    srv_spawn(&R);
    int ok = 0;
    uint64_t deadline = tgh_now_ms() + 10000;
    for (int i = 100; tgh_left(deadline) > 0 && ok == 0; i++) {
        mcp_call(p, i, "echo", "{\"text\":\"x\"}");
        r = mcp_await_int(p, i, 3000, NULL);
        cr_assert_not_null(r);
        ok += json_object_get(r, "result") != NULL;
        json_decref(r);
        if (!ok)
            tgh_sleep_ms(200);
    }
    cr_assert_eq(ok, 1, "no call was admitted after Redis came back");
    /* The fresh bucket holds 3: two more pass, then refusals. */
    int more = 0;
    for (int i = 500; i < 505; i++) {
        mcp_call(p, i, "echo", "{\"text\":\"x\"}");
        r = mcp_await_int(p, i, 3000, NULL);
        more += json_object_get(r, "result") != NULL;
        json_decref(r);
    }
    cr_assert_eq(more, 2, "admission is not exact after recovery (%d more admitted)", more);
    sh_stop(&w);
    char *audit = tgh_read_file(w.audit, NULL);
    cr_assert(audit && strstr(audit, "store.degraded") && strstr(audit, "store.recovered"),
              "degraded/recovered not audited");
    free(audit);
}

/* Admit <calls> echo calls on <w> one at a time (ids from <id0>); the
 * number answered with a result. Every call must be answered. */
static int sh_admitted(tgh_wrap_t *w, int id0, int calls)
{
    int ok = 0;
    for (int i = id0; i < id0 + calls; i++) {
        mcp_call(&w->tg, i, "echo", "{\"text\":\"x\"}");
        json_t *r = mcp_await_int(&w->tg, i, 5000, NULL);
        cr_assert_not_null(r, "call %d was not answered", i);
        ok += json_object_get(r, "result") != NULL;
        json_decref(r);
    }
    return ok;
}

/* Issue 12 item 13, end to end: two toolgates share 10/minute
 * (store.instances 2) under on_store_error local. Redis dies: each admits
 * its share, 5. A new, empty Redis comes up: both are back on it within
 * store.max_backoff (250 ms) plus set-up, and the shared bucket is
 * charged with what the fallback admitted, so the fleet does not get the
 * new server's full burst on top of the 10 it admitted a moment ago
 * (before the charge, it admitted 10 more here). */
Test(shared, redis_restart_charges_what_the_fallback_admitted)
{
    srv_own(&R, false, NULL);
    char dir[TGH_PATH], cfg[TGH_PATH + 32], json[1024];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(json, sizeof json,
             "{\"store\":{\"kind\":\"redis\",\"url\":\"%s\",\"instances\":2}}\n", R.url);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    const char *extra[] = {"--config", cfg, "--limit", "rate_scope=shared", "--limit",
                           "rate_limit=10/minute", NULL};
    static tgh_wrap_t w[2];
    for (int k = 0; k < 2; k++)
        sh_start(&w[k], k == 0 ? "a" : "b", extra);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(sh_admitted(&w[k], 1, 1), 1, "instance %d: no call through Redis", k);
    srv_kill(&R);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(tgh_log_wait(w[k].err, "store.degraded", 1, 5000), 1,
                     "instance %d did not notice Redis going", k);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(sh_admitted(&w[k], 10, 7), 5, "instance %d: its share is 5/minute", k);
    srv_spawn(&R);
    uint64_t back = tgh_now_ms();
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(tgh_log_wait(w[k].err, "store.recovered", 1, 5000), 1,
                     "instance %d did not return to Redis", k);
        cr_assert_leq(tgh_now_ms() - back, 250 + 750,
                      "instance %d back on Redis after %llu ms (documented: 250 ms + set-up)", k,
                      (unsigned long long)(tgh_now_ms() - back));
    }
    int again = 0;
    for (int k = 0; k < 2; k++)
        again += sh_admitted(&w[k], 100, 5);
    cr_assert_leq(again, 1,
                  "%d more admitted right after Redis came back: the fleet admitted 10 of "
                  "10/minute on its shares a moment ago",
                  again);
    for (int k = 0; k < 2; k++) {
        sh_stop(&w[k]);
        char *audit = tgh_read_file(w[k].audit, NULL);
        cr_assert(audit && strstr(audit, "\"decided_by\":\"local_fallback\"") &&
                      strstr(audit, "store.recovered"),
                  "instance %d: the fallback and the recovery are not audited", k);
        free(audit);
    }
    tgh_rmtree(dir);
}

/* The audit pipeline end to end: wrap writes its events to a Redis Stream
 * (and a file), `toolgate audit tail` reads them as a consumer group and
 * acknowledges them, a second tail finds nothing left, and
 * `toolgate audit verify` proves the tailed copy lost nothing. */
Test(shared, audit_stream_tail_and_verify)
{
    srv_own(&R, false, NULL);
    char dir[TGH_PATH], cfg[TGH_PATH + 32], json[2048], out[TGH_PATH + 32], err[TGH_PATH + 32];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(json, sizeof json,
             "{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"%s\",\"stream\":"
             "\"tg:audit:test\",\"spool\":\"%s/spool.jsonl\"},"
             "{\"kind\":\"file\",\"path\":\"%s/file.jsonl\"}]}}\n",
             R.url, dir, dir);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    static tgh_proc_t p;
    char *argv[] = {(char *)TG_BIN, (char *)"wrap", (char *)"--config", cfg, (char *)"--",
                    (char *)TG_AGENTS_DIR "/tg_fixture_agent", NULL};
    snprintf(err, sizeof err, "%s/wrap.stderr", dir);
    cr_assert_eq(tgh_spawn(&p, argv, NULL, err), 0);
    json_decref(mcp_initialize(&p, 5000));
    for (int i = 1; i <= 5; i++) {
        mcp_call(&p, i, "echo", "{\"text\":\"x\"}");
        json_decref(mcp_await_int(&p, i, 5000, NULL));
    }
    tgh_close_stdin(&p);
    cr_assert_eq(tgh_wait(&p, 5000), 0);

    snprintf(out, sizeof out, "%s/tail.jsonl", dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' audit tail --url '%s' --stream tg:audit:test --group readers --once > '%s'",
             TG_BIN, R.url, out);
    cr_assert_eq(system(cmd), 0, "audit tail failed");
    size_t len = 0;
    char *tail = tgh_read_file(out, &len);
    cr_assert(tail && strstr(tail, "\"event\":\"call.completed\""), "tail printed no events");
    int lines = tgh_count_lines_with(tail, NULL, "\"seq\":");
    cr_assert_geq(lines, 8, "only %d events came through the stream", lines);
    free(tail);
    /* Everything was acknowledged: a second reader of the group gets nothing. */
    snprintf(cmd, sizeof cmd,
             "'%s' audit tail --url '%s' --stream tg:audit:test --group readers --once > '%s.2'",
             TG_BIN, R.url, out);
    cr_assert_eq(system(cmd), 0);
    char out2[TGH_PATH + 40];
    snprintf(out2, sizeof out2, "%s.2", out);
    char *again = tgh_read_file(out2, &len);
    cr_assert(again != NULL && len == 0, "acknowledged events were delivered again");
    free(again);
    /* The tailed copy is complete: verify finds no gap. */
    snprintf(cmd, sizeof cmd, "'%s' audit verify '%s' > /dev/null", TG_BIN, out);
    cr_assert_eq(system(cmd), 0, "audit verify found loss in the stream copy");
}

/* toolgate check shows which limits are shared and pings the store, never
 * printing its password. */
Test(shared, check_shows_shared_limits_and_pings_the_store)
{
    srv_own(&R, false, NULL);
    char json[1024], *text;
    snprintf(json, sizeof json,
             "{\"store\":{\"kind\":\"redis\",\"url\":\"%s\"},\"agents\":[{\"id\":\"a\","
             "\"command\":[\"/bin/true\"],\"execution_limits\":{\"rate_limit\":\"9/minute\","
             "\"rate_scope\":\"shared\"}}]}\n",
             R.url);
    cr_assert_eq(tgh_check_config(json, &text), 0);
    cr_assert(strstr(text, "answers (ping"), "the store was not pinged:\n%s", text);
    cr_assert(strstr(text, "shared: agents.a rate_limit"), "shared limits not shown:\n%s", text);
    free(text);
    /* A password in the URL is never printed, even when the store refuses it. */
    snprintf(json, sizeof json,
             "{\"store\":{\"kind\":\"redis\",\"url\":\"redis://u:CANARY-CHECK-PW@127.0.0.1:%d/0\"},"
             "\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"]}]}\n",
             R.port);
    cr_assert_eq(tgh_check_config(json, &text), 0);
    cr_assert(strstr(text, "CANARY-CHECK-PW") == NULL, "check printed the password");
    cr_assert(strstr(text, "does not answer"), "a refused AUTH was not reported:\n%s", text);
    free(text);
}

/* Three toolgate instances as three hosts: network namespaces joined by
 * veth pairs to a Redis in a fourth (all made here, removed after), one
 * limit of 30/minute shared: exactly 30 calls admitted across them. */
static char ns_tag[16];

static int sh_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void ns_cleanup(void)
{
    if (ns_tag[0] == '\0')
        return;
    for (int i = 1; i <= 3; i++)
        sh_sh("ip netns del tgh%d%s 2>/dev/null", i, ns_tag);
    sh_sh("ip netns del tgr%s 2>/dev/null", ns_tag);
    ns_tag[0] = '\0';
}

static void ns_fini(void)
{
    tgh_cleanup();
    srv_done(&R);
    ns_cleanup();
}

Test(shared, three_hosts_in_network_namespaces, .fini = ns_fini, .timeout = 90)
{
    /* tgh_spawn does not search PATH: iproute2's ip is /usr/sbin/ip on Debian. */
    if (geteuid() != 0 || access("/usr/sbin/ip", X_OK) != 0)
        cr_skip_test("needs root and iproute2 (/usr/sbin/ip netns); CI runs as root");
    if (redis_server_path() == NULL)
        cr_skip_test("redis-server is not installed; CI installs it");
    snprintf(ns_tag, sizeof ns_tag, "%d", (int)getpid() % 100000);
    /* tgr<tag> holds Redis; tgh<i><tag> are the hosts, host i reaches it
     * at 10.213.<i>.1 over its own veth pair. */
    cr_assert_eq(sh_sh("ip netns add tgr%s", ns_tag), 0);
    cr_assert_eq(sh_sh("ip -n tgr%s link set lo up", ns_tag), 0);
    for (int i = 1; i <= 3; i++) {
        cr_assert_eq(sh_sh("ip netns add tgh%d%s", i, ns_tag), 0);
        cr_assert_eq(sh_sh("ip -n tgh%d%s link set lo up", i, ns_tag), 0);
        cr_assert_eq(sh_sh("ip link add tgv%dh%s netns tgh%d%s type veth peer name tgv%dr%s netns tgr%s",
                           i, ns_tag, i, ns_tag, i, ns_tag, ns_tag), 0);
        cr_assert_eq(sh_sh("ip -n tgr%s addr add 10.213.%d.1/24 dev tgv%dr%s", ns_tag, i, i, ns_tag), 0);
        cr_assert_eq(sh_sh("ip -n tgh%d%s addr add 10.213.%d.2/24 dev tgv%dh%s", i, ns_tag, i, i, ns_tag), 0);
        cr_assert_eq(sh_sh("ip -n tgr%s link set tgv%dr%s up", ns_tag, i, ns_tag), 0);
        cr_assert_eq(sh_sh("ip -n tgh%d%s link set tgv%dh%s up", i, ns_tag, i, ns_tag), 0);
    }
    /* Redis in its namespace, on the three router-side addresses. */
    char dir[TGH_PATH];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    static tgh_proc_t redis;
    char ns_r[32];
    snprintf(ns_r, sizeof ns_r, "tgr%s", ns_tag);
    char *rargv[] = {(char *)"/usr/sbin/ip", (char *)"netns", (char *)"exec", ns_r,
                     (char *)redis_server_path(), (char *)"--port", (char *)"6379",
                     (char *)"--bind", (char *)"10.213.1.1", (char *)"10.213.2.1",
                     (char *)"10.213.3.1", (char *)"--save", (char *)"",
                     (char *)"--appendonly", (char *)"no", (char *)"--protected-mode",
                     (char *)"no", NULL};
    cr_assert_eq(tgh_spawn(&redis, rargv, NULL, NULL), 0);
    bool up = false;
    for (int k = 0; k < 100 && !up; k++) {
        up = sh_sh("ip netns exec tgh1%s redis-cli -h 10.213.1.1 ping >/dev/null 2>&1", ns_tag) == 0;
        if (!up)
            tgh_sleep_ms(50);
    }
    cr_assert(up, "redis in its namespace did not answer host 1");

    static tgh_proc_t h[3];
    for (int i = 0; i < 3; i++) {
        char ns[32], url[64], audit[TGH_PATH + 32];
        snprintf(ns, sizeof ns, "tgh%d%s", i + 1, ns_tag);
        snprintf(url, sizeof url, "redis://10.213.%d.1:6379/0", i + 1);
        snprintf(audit, sizeof audit, "%s/h%d.jsonl", dir, i + 1);
        char *argv[] = {(char *)"/usr/sbin/ip", (char *)"netns", (char *)"exec", ns, (char *)TG_BIN,
                        (char *)"wrap", (char *)"--audit", audit, (char *)"--store", url,
                        (char *)"--limit", (char *)"rate_scope=shared",
                        (char *)"--limit", (char *)"rate_limit=30/minute",
                        (char *)"--limit", (char *)"max_queued_calls=64",
                        /* `ip netns exec` remounts /sys, hiding the cgroups: the
                         * rlimit fallback's RLIMIT_DATA would stop an ASan-built
                         * agent. Containment is not what this test is about. */
                        (char *)"--limit", (char *)"containment=off", (char *)"--",
                        (char *)TG_AGENTS_DIR "/tg_fixture_agent", NULL};
        cr_assert_eq(tgh_spawn(&h[i], argv, NULL, NULL), 0);
        json_decref(mcp_initialize(&h[i], 5000));
    }
    for (int n = 1; n <= 20; n++)
        for (int i = 0; i < 3; i++)
            mcp_call(&h[i], n, "echo", "{\"text\":\"x\"}");
    int ok = 0;
    for (int i = 0; i < 3; i++)
        for (int n = 1; n <= 20; n++) {
            json_t *r = tgh_read_json(&h[i], 5000, NULL);
            cr_assert_not_null(r, "host %d: answer %d missing", i + 1, n);
            ok += json_object_get(r, "result") != NULL;
            json_decref(r);
        }
    cr_assert_eq(ok, 30, "%d calls admitted across three hosts sharing 30/minute", ok);
    for (int i = 0; i < 3; i++) {
        tgh_close_stdin(&h[i]);
        tgh_wait(&h[i], 5000);
    }
    tgh_kill(&redis);
}
