/* SIGHUP reload of `toolgate serve` (issue 3, part 6) and the listener's
 * socket owner/group: a bad file is rejected and the old config keeps
 * running; limits change in place with the state of unchanged limits kept;
 * an agent whose command changed is replaced (its open sessions keep their
 * old instance until reload_drain_timeout); keys bound to
 * open resources are refused; under load every request gets one answer. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_serve_t R;

static void r_fini(void)
{
    tgh_cleanup();
}

/* Write the config: agent "fx" (the fixture, logging to <log>) with
 * <agent_extra> spliced in, behind one socket with <listen_extra>. */
static void r_write(const char *log, const char *agent_extra, const char *listen_extra,
                    const char *router_extra)
{
    tgh_fx_write(&R, &(tgh_fx_t){.log = log, .listen_extra = listen_extra,
                                 .router_extra = router_extra, .agent_extra = agent_extra});
}

static void r_start(const char *agent_extra, const char *listen_extra)
{
    cr_assert_eq(tgh_serve_prepare(&R, "fx"), 0);
    r_write(R.log, agent_extra, listen_extra, NULL);
    tgh_serve_start(&R, NULL, NULL, 5000);
}

/* SIGHUP, then wait for the <nth> log line starting with <prefix>. */
static void r_hup(const char *prefix, int nth)
{
    cr_assert_eq(kill(R.tg.pid, SIGHUP), 0);
    if (tgh_log_wait(R.err, prefix, nth, 5000) < nth) {
        char what[160];
        snprintf(what, sizeof what, "no '%s' line #%d after SIGHUP", prefix, nth);
        tgh_fail_with_stderr(R.err, what);
    }
}

/* One echo call: NULL when it succeeded, else its error code ("" when the
 * answer is missing). */
static const char *r_echo(tgh_proc_t *c, int id)
{
    static char code[64];
    mcp_call(c, id, "echo", "{\"text\":\"x\"}");
    json_t *r = mcp_await_int(c, id, 5000, NULL);
    if (r == NULL)
        return "";
    if (json_object_get(r, "result") != NULL) {
        json_decref(r);
        return NULL;
    }
    const char *s = mcp_code_of(r);
    snprintf(code, sizeof code, "%s", s ? s : "?");
    json_decref(r);
    return code;
}

static void r_stop(void)
{
    tgh_serve_stop(&R, 10000);
}

/* Events <event> in the audit file, waiting up to 3 s for <want> of them
 * (the audit is written in batches off the loop). */
static int audit_count(const char *event, int want)
{
    char needle[96];
    snprintf(needle, sizeof needle, "\"event\":\"%s\"", event);
    return tgh_file_wait(R.audit, needle, want, 3000);
}

TestSuite(reload, .fini = r_fini, .timeout = 60);

Test(reload, bad_file_is_rejected_and_old_config_keeps_its_state)
{
    r_start(", \"execution_limits\": {\"rate_limit\": \"3/minute\"}", NULL);
    tgh_proc_t a;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    cr_assert_null(r_echo(&a, 1));
    cr_assert_null(r_echo(&a, 2));
    /* A value that parses as JSON but is invalid, with a canary in it. */
    r_write(R.log, ", \"execution_limits\": {\"rate_limit\": \"CANARY-7f3a/minute\"}", NULL, NULL);
    r_hup("SIGHUP: config rejected", 1);
    char *err = tgh_read_file(R.err, NULL);
    cr_assert(strstr(err, "serve.json:") && strstr(err, "rate_limit"),
              "the rejection names neither file nor key:\n%s", err);
    free(err);
    /* The old 3/minute bucket, two tokens spent, is still the one in force. */
    cr_assert_null(r_echo(&a, 3));
    cr_assert_str_eq(r_echo(&a, 4), "rate_limit_exceeded");
    cr_assert_eq(audit_count("config.rejected", 1), 1);
    char *audit = tgh_read_file(R.audit, NULL);
    cr_assert_null(strstr(audit, "CANARY-7f3a"), "the rejected value reached the audit trail");
    free(audit);
    /* Broken JSON too. */
    cr_assert_eq(tgh_write_file(R.cfg, "{\"router\": "), 0);
    r_hup("SIGHUP: config rejected", 2);
    cr_assert_str_eq(r_echo(&a, 5), "rate_limit_exceeded");
    tgh_conn_close(&a);
    r_stop();
}

Test(reload, limits_change_in_place_and_unchanged_buckets_keep_state)
{
    r_start(", \"execution_limits\": {\"rate_limit\": \"3/minute\", \"max_concurrent_calls\": 2}",
            NULL);
    tgh_proc_t a;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    cr_assert_null(r_echo(&a, 1));
    cr_assert_null(r_echo(&a, 2));
    /* Another limit changes; the rate does not: its bucket keeps 2 spent. */
    r_write(R.log,
            ", \"execution_limits\": {\"rate_limit\": \"3/minute\", \"max_concurrent_calls\": 3}",
            NULL, NULL);
    r_hup("SIGHUP: config reloaded", 1);
    cr_assert_null(r_echo(&a, 3), "the connection must survive a limits-only reload");
    cr_assert_str_eq(r_echo(&a, 4), "rate_limit_exceeded");
    /* The rate itself changes: a fresh bucket of the new size. */
    r_write(R.log,
            ", \"execution_limits\": {\"rate_limit\": \"5/minute\", \"max_concurrent_calls\": 3}",
            NULL, NULL);
    r_hup("SIGHUP: config reloaded", 2);
    for (int i = 5; i < 10; i++)
        cr_assert_null(r_echo(&a, i), "call %d under the new 5/minute", i);
    json_t *r;
    mcp_call(&a, 10, "echo", "{}");
    r = mcp_await_int(&a, 10, 5000, NULL);
    json_t *data = json_object_get(json_object_get(r, "error"), "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "code")), "rate_limit_exceeded");
    cr_assert_eq(json_integer_value(json_object_get(data, "cap")), 5, "the denial shows the new cap");
    json_decref(r);
    /* One instance all along: the agent was not restarted. */
    cr_assert_eq(tgh_log_count(R.log, "start "), 1);
    cr_assert_eq(audit_count("config.reloaded", 2), 2);
    tgh_conn_close(&a);
    r_stop();
}

/* router.reload_drain_timeout 0: the old sessions are drained at once. */
Test(reload, command_change_drains_old_sessions_and_new_ones_run_the_new_command)
{
    r_start(NULL, NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    /* A call in flight across the reload is answered, not lost. */
    mcp_call(&a, 1, "sleep", "{\"ms\":600}");
    tgh_sleep_ms(100);
    char log2[TGH_PATH + 16];
    snprintf(log2, sizeof log2, "%s/fixture2.log", R.dir);
    r_write(log2, NULL, NULL, ", \"reload_drain_timeout\": \"0s\"");
    r_hup("SIGHUP: config reloaded", 1);
    json_t *r = mcp_await_int(&a, 1, 5000, NULL);
    cr_assert(r != NULL && json_object_get(r, "result") != NULL,
              "the call in flight during the reload was lost");
    json_decref(r);
    /* Then the old session ends: its connection closes. */
    uint64_t deadline = tgh_now_ms() + 8000;
    while (!a.out_eof && tgh_now_ms() < deadline) {
        json_t *m = tgh_read_json(&a, 200, NULL);
        json_decref(m);
    }
    cr_assert(a.out_eof, "the drained session's connection stayed open");
    tgh_conn_close(&a);
    mcp_connect(&b, R.sock);
    mcp_init_ok(&b, 5000);
    cr_assert_null(r_echo(&b, 1));
    cr_assert_eq(tgh_log_wait(log2, "start ", 1, 3000), 1, "the new connection ran the old command");
    tgh_conn_close(&b);
    r_stop();
}

/* The default: a session open across a reload that changes the agent's
 * command keeps its old instance (its calls answered by the old command)
 * until router.reload_drain_timeout, while a new connection, and one not
 * yet initialized, get the new command (issue 12 item 29). */
Test(reload, command_change_keeps_old_sessions_until_reload_drain_timeout)
{
    r_start(NULL, NULL);
    tgh_proc_t a, b, idle;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    cr_assert_null(r_echo(&a, 1));
    mcp_connect(&idle, R.sock); /* connected, not initialized */
    char log2[TGH_PATH + 16];
    snprintf(log2, sizeof log2, "%s/fixture2.log", R.dir);
    r_write(log2, NULL, NULL, ", \"reload_drain_timeout\": \"2s\"");
    r_hup("SIGHUP: config reloaded", 1);
    uint64_t t_reload = tgh_now_ms();
    /* The old session goes on, on the old command. */
    cr_assert_null(r_echo(&a, 2), "the session open across the reload stopped working");
    cr_assert_eq(tgh_log_count(R.log, "call "), 2, "the old session's call did not reach its "
                                                   "old instance");
    cr_assert_eq(tgh_log_count(log2, "start "), 0);
    /* New connections, and the one not yet initialized, get the new one. */
    mcp_connect(&b, R.sock);
    mcp_init_ok(&b, 5000);
    cr_assert_null(r_echo(&b, 1));
    mcp_init_ok(&idle, 5000);
    cr_assert_null(r_echo(&idle, 1));
    cr_assert_eq(tgh_log_count(log2, "start "), 2, "new sessions did not run the new command");
    cr_assert_eq(tgh_log_count(log2, "call "), 2);
    cr_assert_eq(tgh_log_count(R.log, "start "), 1);
    cr_assert_null(r_echo(&a, 3));
    cr_assert_eq(tgh_log_count(R.log, "call "), 3);
    /* After reload_drain_timeout the old session ends, audited. */
    uint64_t deadline = tgh_now_ms() + 10000;
    while (!a.out_eof && tgh_now_ms() < deadline)
        json_decref(tgh_read_json(&a, 200, NULL));
    cr_assert(a.out_eof, "the old session outlived reload_drain_timeout");
    cr_assert_geq(tgh_now_ms() - t_reload, 1500, "the old session ended before its drain time");
    cr_assert_eq(tgh_file_wait(R.audit, "\"reason\":\"reload_drain_timeout\"", 1, 3000), 1,
                 "the end of the old session was not audited");
    tgh_conn_close(&a);
    /* The new sessions are untouched. */
    cr_assert_null(r_echo(&b, 2));
    cr_assert_null(r_echo(&idle, 2));
    tgh_conn_close(&b);
    tgh_conn_close(&idle);
    r_stop();
}

/* A caller that leaves before reload_drain_timeout takes its old instance
 * with it, and toolgate stops in time with such a session open. */
Test(reload, old_session_ends_with_its_caller_and_on_stop)
{
    r_start(NULL, NULL);
    tgh_proc_t a, b;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    mcp_connect(&b, R.sock);
    mcp_init_ok(&b, 5000);
    pid_t pids[4];
    cr_assert_eq(tgh_log_wait(R.log, "start ", 2, 3000), 2);
    cr_assert_eq(tgh_log_pids(R.log, pids, 4), 2);
    char log2[TGH_PATH + 16];
    snprintf(log2, sizeof log2, "%s/fixture2.log", R.dir);
    r_write(log2, NULL, NULL, NULL); /* the default drain time: 5 minutes */
    r_hup("SIGHUP: config reloaded", 1);
    cr_assert_null(r_echo(&a, 1));
    cr_assert_null(r_echo(&b, 1));
    tgh_conn_close(&a);
    bool one_gone = false;
    for (int i = 0; i < 100 && !one_gone; i++) {
        one_gone = !tgh_pid_alive(pids[0]) || !tgh_pid_alive(pids[1]);
        tgh_sleep_ms(50);
    }
    cr_assert(one_gone, "the old instance outlived its caller");
    cr_assert_null(r_echo(&b, 2));
    r_stop(); /* b's old session is drained by SIGTERM, not waited for */
    tgh_conn_close(&b);
}

/* The <nth> reload refused for <key>: the log line names it after the
 * file, and so does config.rejected (its key, and its reason "FILE: key"). */
static void r_refused_for(const char *key, int nth)
{
    char line[TGH_PATH + 256], field[128], reason[TGH_PATH + 128];
    snprintf(line, sizeof line,
             "SIGHUP: config rejected, the running config stays: %s: %s: changed, which needs a "
             "restart (change it back to reload)",
             R.cfg, key);
    cr_assert_eq(tgh_file_wait(R.err, line, 1, 3000), 1, "no line '%s'", line);
    cr_assert_eq(audit_count("config.rejected", nth), nth);
    snprintf(field, sizeof field, "\"key\":\"%s\"", key);
    snprintf(reason, sizeof reason, "\"reason\":\"%s: %s\"", R.cfg, key);
    cr_assert_eq(tgh_file_wait(R.audit, field, 1, 3000), 1, "no config.rejected with %s", field);
    cr_assert_eq(tgh_file_wait(R.audit, reason, 1, 3000), 1, "no config.rejected with %s", reason);
}

Test(reload, keys_bound_to_open_resources_need_a_restart)
{
    r_start(NULL, NULL);
    r_write(R.log, NULL, NULL, ", \"idle_timeout\": \"5s\"");
    r_hup("SIGHUP: config rejected", 1);
    r_refused_for("router.idle_timeout", 1);
    /* A listener's key, by position; a change that also reloads in place
     * (the mode) does not hide it. */
    r_write(R.log, NULL, ", \"mode\": \"0600\", \"max_connections\": 7", NULL);
    r_hup("SIGHUP: config rejected", 2);
    r_refused_for("router.listen[0].max_connections", 2);
    /* A section's key, after an agent's key that would restart the agent. */
    tgh_fx_write(&R, &(tgh_fx_t){.agent_extra = ", \"cwd\": \"/\"",
                                 .top_extra = ", \"store\": {\"prefix\": \"tg2\"}"});
    r_hup("SIGHUP: config rejected", 3);
    r_refused_for("store.prefix", 3);
    /* Nothing refused reached the running config. */
    char *err = tgh_read_file(R.err, NULL);
    cr_assert_null(strstr(err, "SIGHUP: config reloaded"), "%s", err);
    free(err);
    tgh_proc_t a;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    cr_assert_null(r_echo(&a, 1));
    tgh_conn_close(&a);
    r_stop();
}

Test(reload, listener_mode_owner_and_group_apply_at_start_and_on_reload)
{
    /* Root runs the tests: give the socket to nobody:nogroup (65534). */
    r_start(NULL, ", \"mode\": \"0600\", \"owner\": 65534, \"group\": \"nogroup\"");
    struct stat st;
    cr_assert_eq(lstat(R.sock, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    if (geteuid() == 0) {
        cr_assert_eq(st.st_uid, 65534u);
        cr_assert_eq(st.st_gid, 65534u);
    }
    r_write(R.log, NULL, ", \"mode\": \"0660\", \"owner\": 0, \"group\": 0", NULL);
    r_hup("SIGHUP: config reloaded", 1);
    cr_assert_eq(lstat(R.sock, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0660);
    if (geteuid() == 0)
        cr_assert_eq(st.st_uid, 0u);
    r_stop();
}

Test(reload, unknown_owner_is_a_config_error)
{
    cr_assert_eq(tgh_serve_prepare(&R, "fx"), 0);
    r_write(R.log, NULL, ", \"owner\": \"no-such-user-tg\"", NULL);
    char *const argv[] = {(char *)TG_BIN, (char *)"check", (char *)"--config", R.cfg, NULL};
    cr_assert_eq(tgh_spawn(&R.tg, argv, NULL, R.err), 0);
    cr_assert_eq(tgh_wait(&R.tg, 10000), 0);
    cr_assert_neq(tgh_exit_code(&R.tg), 0);
    char *err = tgh_read_file(R.err, NULL);
    cr_assert(strstr(err, "router.listen[0].owner: no user named \"no-such-user-tg\""), "%s", err);
    free(err);
}

/* Callers each make calls back to back while the config is reloaded with
 * changing limits: every request gets exactly one answer. */
Test(reload, under_load_every_request_gets_one_answer, .timeout = 90)
{
    r_start(", \"execution_limits\": {\"max_concurrent_calls\": 4, \"max_queued_calls\": 64, \"rate_limit\": \"1000/second\"}", NULL);
    enum { NC = 6, NCALLS = 40 };
    tgh_proc_t c[NC];
    for (int i = 0; i < NC; i++) {
        mcp_connect(&c[i], R.sock);
        mcp_init_ok(&c[i], 5000);
    }
    int answered = 0, hups = 0;
    for (int k = 1; k <= NCALLS; k++) {
        for (int i = 0; i < NC; i++)
            mcp_call(&c[i], k, "sleep", "{\"ms\":5}");
        if (k % 8 == 0) {
            char extra[160];
            snprintf(extra, sizeof extra,
                     ", \"execution_limits\": {\"max_concurrent_calls\": %d, \"max_queued_calls\": 64, \"rate_limit\": \"1000/second\"}",
                     2 + (k / 8) % 3);
            r_write(R.log, extra, NULL, NULL);
            cr_assert_eq(kill(R.tg.pid, SIGHUP), 0);
            hups++;
        }
        for (int i = 0; i < NC; i++) {
            json_t *r = mcp_await_int(&c[i], k, 10000, NULL);
            cr_assert_not_null(r, "caller %d: no answer to request %d", i, k);
            char *text = json_dumps(r, JSON_COMPACT);
            cr_assert_not_null(json_object_get(r, "result"), "caller %d request %d failed: %s", i,
                               k, text);
            free(text);
            json_decref(r);
            answered++;
        }
    }
    cr_assert_eq(answered, NC * NCALLS);
    /* No answer twice: nothing more is waiting on any connection. */
    for (int i = 0; i < NC; i++) {
        json_t *extra = tgh_read_json(&c[i], 200, NULL);
        cr_assert_null(extra, "caller %d got an answer nobody asked for", i);
        tgh_conn_close(&c[i]);
    }
    cr_assert_eq(tgh_log_wait(R.err, "SIGHUP: config reloaded", hups, 5000), hups);
    cr_assert_eq(tgh_log_count(R.log, "start "), NC, "a limits-only reload restarted an agent");
    r_stop();
}

/* A tool's concurrency limit removed by one reload and restored by the
 * next: the call that held the slot throughout still holds it. */
Test(reload, restored_tool_concurrency_still_counts_running_calls)
{
    const char *one = ", \"tools\": {\"sleep\": {\"max_concurrent_calls\": 1}}";
    r_start(one, NULL);
    tgh_proc_t a;
    mcp_connect(&a, R.sock);
    mcp_init_ok(&a, 5000);
    uint64_t t0 = tgh_now_ms();
    mcp_call(&a, 1, "sleep", "{\"ms\":1500}");
    tgh_sleep_ms(100);
    r_write(R.log, ", \"tools\": {\"sleep\": {\"rate_limit\": \"100/second\"}}", NULL, NULL);
    r_hup("SIGHUP: config reloaded", 1);
    r_write(R.log, one, NULL, NULL);
    r_hup("SIGHUP: config reloaded", 2);
    mcp_call(&a, 2, "sleep", "{\"ms\":10}");
    /* Answers in arrival order: the 10 ms call must wait for the slot the
     * 1500 ms call holds, so call 1 is answered first. */
    json_t *first = tgh_read_json(&a, 5000, NULL);
    json_t *second = tgh_read_json(&a, 5000, NULL);
    cr_assert(first != NULL && second != NULL, "answers missing");
    cr_assert_eq(json_integer_value(json_object_get(first, "id")), 1,
                 "the second call ran beside the first: the restored limit lost its count");
    cr_assert_not_null(json_object_get(second, "result"));
    json_decref(first);
    json_decref(second);
    cr_assert_geq(tgh_now_ms() - t0, 1400);
    tgh_conn_close(&a);
    r_stop();
}
