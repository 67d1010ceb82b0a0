/* Integration tests of `toolgate wrap`'s life in a shell and beside other
 * wraps (issue 12, items 16, 25, 26): SIGHUP reloads and keeps the call in
 * flight; every run has its own instance name and request ids, --name
 * names the agent, a taken --admin port is not fatal; stdin and stdout may
 * be regular files or /dev/null. */
#include <criterion/criterion.h>
#include <signal.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

#define WL_FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"

/* Static: the harness keeps pointers to them until the suite's fini. */
static tgh_wrap_t W;
static tgh_wrap_t WS[3];
static tgh_proc_t SH;

TestSuite(wrap_life, .fini = tgh_cleanup, .timeout = 30);

static const char wl_init[] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
    "\"clientInfo\":{\"name\":\"tg-it\",\"version\":\"1\"}}}\n"
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

static void wl_handshake(tgh_wrap_t *w)
{
    cr_assert_eq(tgh_send(&w->tg, wl_init, sizeof(wl_init) - 1, 3000), 0);
    json_t *r = mcp_expect_str(&w->tg, "init", 5000);
    cr_assert(json_is_object(json_object_get(r, "result")), "initialize failed");
    json_decref(r);
}

/* Close <w>'s stdin, drain its stdout, and return its exit code. */
static int wl_eof_and_exit(tgh_wrap_t *w, int timeout_ms)
{
    tgh_close_stdin(&w->tg);
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    while (tgh_wait(&w->tg, 0) != 0) {
        cr_assert(tgh_left(deadline) > 0, "toolgate did not exit within %d ms after EOF",
                  timeout_ms);
        free(tgh_read_line(&w->tg, 20, NULL));
    }
    return tgh_exit_code(&w->tg);
}

/* The audit events of <path> named <event>, as a new array. */
static json_t *wl_events(const char *path, const char *event)
{
    char *text = tgh_read_file(path, NULL);
    cr_assert_not_null(text, "no audit file at %s", path);
    json_t *out = json_array();
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        cr_assert_not_null(nl, "unterminated audit line: %.200s", line);
        *nl = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        cr_assert(json_is_object(ev), "audit line is not JSON: %.200s", line);
        const char *name = json_string_value(json_object_get(ev, "event"));
        if (name != NULL && strcmp(name, event) == 0)
            json_array_append(out, ev);
        json_decref(ev);
        line = nl + 1;
    }
    free(text);
    return out;
}

static const char *wl_str(const json_t *ev, const char *key)
{
    const char *v = json_string_value(json_object_get(ev, key));
    cr_assert_not_null(v, "no %s in an audit event", key);
    return v;
}

/* Run `sh -c <cmd>`, its stderr appended to <err>, and return its exit
 * code (-1: still running after <timeout_ms>). */
static int wl_sh(const char *cmd, const char *err, int timeout_ms)
{
    tgh_proc_t *p = &SH;
    char *const argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)cmd, NULL};
    cr_assert_eq(tgh_spawn(p, argv, NULL, err), 0);
    tgh_close_stdin(p);
    if (tgh_wait(p, timeout_ms) != 0) {
        tgh_kill(p);
        return -1;
    }
    return tgh_exit_code(p);
}

/* ---- item 16: SIGHUP ------------------------------------------------------ */

#define WL_CFG(conc)                                                                          \
    "{\"agents\":[{\"id\":\"fx\",\"execution_limits\":{\"max_concurrent_calls\":" #conc      \
    ",\"max_queued_calls\":0}}]}\n"

/* <text> written to config file <cfg> and SIGHUP: the <nth> rejection,
 * whose log line names <key> and says <why>. */
static void wl_refused(const char *cfg, const char *text, const char *key, const char *why, int nth)
{
    char line[TGH_PATH + 512];
    cr_assert_eq(tgh_write_file(cfg, text), 0);
    cr_assert_eq(kill(W.tg.pid, SIGHUP), 0);
    snprintf(line, sizeof line,
             "SIGHUP: config rejected, the running config stays: %s: %s: %s (change it back to "
             "reload)",
             cfg, key, why);
    cr_assert_gt(tgh_file_wait(W.err, "config rejected", nth, 3000), nth - 1,
                 "no rejection logged");
    cr_assert_eq(tgh_file_wait(W.err, line, 1, 3000), 1, "no line '%s'", line);
}

/* A call in flight when SIGHUP arrives is answered, toolgate keeps
 * running, and the concurrency limit changed in the file applies after it;
 * a file that does not load is refused and changes nothing, and so is a
 * change that needs a restart, named by its key in the log and audit. */
Test(wrap_life, sighup_reloads_limits_and_keeps_the_call_in_flight)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char cfg[TGH_PATH + 32];
    snprintf(cfg, sizeof cfg, "%s/config.json", W.dir);
    cr_assert_eq(tgh_write_file(cfg, WL_CFG(1)), 0);
    const char *const args[] = {"--config", cfg, NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, WL_FIXTURE, agent_args, NULL), 0);
    wl_handshake(&W);

    cr_assert_eq(mcp_call(&W.tg, 1, "sleep", "{\"ms\":3000}"), 0);
    cr_assert_gt(tgh_log_wait(W.log, "call ", 1, 3000), 0, "the agent never got call 1");
    mcp_call_denied(&W.tg, 2, "echo", "{\"text\":\"a\"}", -32061, "concurrency_limit_exceeded",
                    3000);

    cr_assert_eq(tgh_write_file(cfg, WL_CFG(2)), 0);
    cr_assert_eq(kill(W.tg.pid, SIGHUP), 0);
    cr_assert_gt(tgh_file_wait(W.err, "config reloaded", 1, 3000), 0, "no reload logged");
    cr_assert_eq(tgh_wait(&W.tg, 0), -ETIMEDOUT, "toolgate ended on SIGHUP");
    /* Call 1 still holds its slot; the second slot is new. */
    mcp_call_text(&W.tg, 3, "echo", "{\"text\":\"b\"}", "b", 3000);

    /* A broken file: refused, the running config stays. */
    cr_assert_eq(tgh_write_file(cfg, "{\"agents\":[{\"id\":"), 0);
    cr_assert_eq(kill(W.tg.pid, SIGHUP), 0);
    cr_assert_gt(tgh_file_wait(W.err, "config rejected", 1, 3000), 0, "no rejection logged");
    /* A change that needs a restart: refused too. */
    wl_refused(cfg,
               "{\"router\":{\"max_frame_bytes\":\"2Mi\"},\"agents\":[{\"id\":\"fx\","
               "\"execution_limits\":{\"max_concurrent_calls\":1,\"max_queued_calls\":0}}]}\n",
               "router.max_frame_bytes", "changed, which needs a restart", 2);
    /* Still two slots: the refused file's 1 did not apply. */
    mcp_call_text(&W.tg, 4, "echo", "{\"text\":\"c\"}", "c", 3000);
    /* A key that restarts the agent: refused, a wrap's agent is its session's. */
    wl_refused(cfg,
               "{\"agents\":[{\"id\":\"fx\",\"execution_limits\":{\"max_concurrent_calls\":2,"
               "\"max_queued_calls\":0},\"stderr\":{\"max_line\":\"1Ki\"}}]}\n",
               "agents[0].stderr.max_line", "changed, which needs a restart", 3);
    /* A limit that cannot change in place (a tool added). */
    wl_refused(cfg,
               "{\"agents\":[{\"id\":\"fx\",\"execution_limits\":{\"max_concurrent_calls\":2,"
               "\"max_queued_calls\":0},\"tools\":{\"web\":{\"rate_limit\":\"5/second\"}}}]}\n",
               "agents[0].tools.web",
               "changed, and the tools, the shared store use or the call table size cannot "
               "change in place, which needs a restart",
               4);

    json_t *r1 = mcp_expect_int(&W.tg, 1, 5000);
    mcp_assert_text(r1, "slept 3000");
    json_decref(r1);
    cr_assert_eq(wl_eof_and_exit(&W, 5000), 0);
    json_t *ok = wl_events(W.audit, "config.reloaded");
    json_t *no = wl_events(W.audit, "config.rejected");
    cr_assert_eq(json_array_size(ok), 1);
    cr_assert_eq(json_array_size(no), 4);
    /* The file that does not load names no key; the others name theirs. */
    cr_assert_null(json_object_get(json_array_get(no, 0), "key"));
    cr_assert_str_eq(wl_str(json_array_get(no, 1), "key"), "router.max_frame_bytes");
    cr_assert_str_eq(wl_str(json_array_get(no, 2), "key"), "agents[0].stderr.max_line");
    cr_assert_str_eq(wl_str(json_array_get(no, 3), "key"), "agents[0].tools.web");
    for (size_t i = 1; i < 4; i++)
        cr_assert_str_eq(wl_str(json_array_get(no, i), "reason"), "needs_restart");
    json_decref(ok);
    json_decref(no);
}

/* Without --config, SIGHUP (logrotate's postrotate) stops nothing; the
 * audit file moved away by the rotation is followed: the call answered
 * after it lands in a new file at the path. */
Test(wrap_life, sighup_without_config_keeps_running_and_audit_follows_rotation)
{
    const char *const agent_args[] = {NULL};
    cr_assert_eq(tgh_wrap_start(&W, NULL, agent_args, NULL), 0);
    wl_handshake(&W);
    mcp_call_text(&W.tg, 1, "echo", "{\"text\":\"x\"}", "x", 3000);
    cr_assert_eq(mcp_call(&W.tg, 2, "sleep", "{\"ms\":500}"), 0);
    cr_assert_gt(tgh_log_wait(W.log, "call ", 2, 3000), 1);
    char rotated[TGH_PATH + 40];
    snprintf(rotated, sizeof rotated, "%s.1", W.audit);
    cr_assert_gt(tgh_file_wait(W.audit, "call.completed", 1, 3000), 0);
    cr_assert_eq(rename(W.audit, rotated), 0);
    cr_assert_eq(kill(W.tg.pid, SIGHUP), 0);
    json_t *r = mcp_expect_int(&W.tg, 2, 3000);
    mcp_assert_text(r, "slept 500");
    json_decref(r);
    /* The batch that notices the move went to the moved file; the sink
     * makes a new file at the path within its grace (1 s). */
    cr_assert_eq(tgh_file_wait(rotated, "call.completed", 2, 3000), 2);
    tgh_sleep_ms(1200);
    mcp_call_text(&W.tg, 3, "echo", "{\"text\":\"y\"}", "y", 3000);
    cr_assert_eq(tgh_file_wait(W.audit, "call.completed", 1, 3000), 1,
                 "the call after the rotation is not in the new audit file");
    cr_assert_eq(wl_eof_and_exit(&W, 5000), 0);
}

/* ---- item 25: one identity per run ------------------------------------- */

/* Three wraps of one command, launched at once into one audit file: three
 * instance names, no request id twice, and `toolgate audit verify` checks
 * the file clean (each run on its own). */
Test(wrap_life, concurrent_wraps_have_their_own_identity)
{
    tgh_wrap_t *w = WS;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tgh_wrap_prepare(&w[i]), 0);
        if (i > 0)
            memcpy(w[i].audit, w[0].audit, sizeof(w[i].audit));
        const char *const agent_args[] = {"--log", w[i].log, NULL};
        cr_assert_eq(tgh_wrap_exec(&w[i], NULL, WL_FIXTURE, agent_args, NULL), 0);
    }
    for (int i = 0; i < 3; i++)
        wl_handshake(&w[i]);
    for (int k = 1; k <= 3; k++)
        for (int i = 0; i < 3; i++)
            mcp_call_text(&w[i].tg, k, "echo", "{\"text\":\"x\"}", "x", 3000);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(wl_eof_and_exit(&w[i], 5000), 0);

    json_t *calls = wl_events(w[0].audit, "call.completed");
    cr_assert_eq(json_array_size(calls), 9);
    for (size_t a = 0; a < 9; a++) {
        const json_t *ea = json_array_get(calls, a);
        cr_assert(strstr(wl_str(ea, "instance"), "-tg_fixture_agent-") != NULL,
                  "instance '%s' is not HOST-AGENT-PID", wl_str(ea, "instance"));
        size_t same_inst = 0;
        for (size_t b = 0; b < 9; b++) {
            const json_t *eb = json_array_get(calls, b);
            same_inst += strcmp(wl_str(ea, "instance"), wl_str(eb, "instance")) == 0;
            if (b != a)
                cr_assert_str_neq(wl_str(ea, "request_id"), wl_str(eb, "request_id"),
                                  "request id %s given twice", wl_str(ea, "request_id"));
        }
        cr_assert_eq(same_inst, 3, "instance %s has %zu calls, not 3", wl_str(ea, "instance"),
                     same_inst);
    }
    json_decref(calls);
    char cmd[3 * TGH_PATH];
    snprintf(cmd, sizeof cmd, "exec '%s' audit verify '%s' >/dev/null", TG_BIN, w[0].audit);
    cr_assert_eq(wl_sh(cmd, w[0].err, 10000), 0, "audit verify failed on the shared file");
}

/* --name NAME is the agent's id (every npx server is otherwise "npx"),
 * in audit and in the instance name; a bad one is refused. */
Test(wrap_life, name_sets_the_agent_id)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    const char *const args[] = {"--name", "files-server", NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, WL_FIXTURE, agent_args, NULL), 0);
    wl_handshake(&W);
    mcp_call_text(&W.tg, 1, "echo", "{\"text\":\"x\"}", "x", 3000);
    cr_assert_eq(wl_eof_and_exit(&W, 5000), 0);
    json_t *calls = wl_events(W.audit, "call.completed");
    cr_assert_eq(json_array_size(calls), 1);
    const json_t *ev = json_array_get(calls, 0);
    cr_assert_str_eq(wl_str(ev, "agent"), "files-server");
    char want[64];
    snprintf(want, sizeof want, "-files-server-%d", (int)W.tg.pid);
    cr_assert(strstr(wl_str(ev, "instance"), want) != NULL, "instance '%s' lacks '%s'",
              wl_str(ev, "instance"), want);
    json_decref(calls);

    char cmd[3 * TGH_PATH];
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --name 'a b' -- /bin/true </dev/null", TG_BIN);
    cr_assert_eq(wl_sh(cmd, W.err, 5000), 2, "a bad --name was taken");
    cr_assert_gt(tgh_file_count(W.err, "--name: 'a b' is not an agent name"), 0);
}

/* Two wraps with one --admin port: the second serves its tools and says
 * it has no admin endpoint. */
Test(wrap_life, second_wrap_on_a_taken_admin_port_serves_its_tools)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tgh_free_port());
    const char *const args[] = {"--admin", addr, NULL};
    tgh_wrap_t *w = WS;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tgh_wrap_prepare(&w[i]), 0);
        const char *const agent_args[] = {"--log", w[i].log, NULL};
        cr_assert_eq(tgh_wrap_exec(&w[i], args, WL_FIXTURE, agent_args, NULL), 0);
        wl_handshake(&w[i]);
    }
    for (int i = 0; i < 2; i++)
        mcp_call_text(&w[i].tg, 1, "echo", "{\"text\":\"x\"}", "x", 3000);
    cr_assert_gt(tgh_file_count(w[0].err, "admin endpoint on http://"), 0);
    cr_assert_gt(tgh_file_count(w[1].err, "without an admin endpoint"), 0,
                 "the second wrap did not say it has no admin endpoint");
    for (int i = 0; i < 2; i++)
        cr_assert_eq(wl_eof_and_exit(&w[i], 5000), 0);
}

/* Issue 20 item 5: a malformed or non-loopback admin address is bad usage
 * (exit 2, naming the address and what to write) in wrap as in serve,
 * from --admin or from the config file; only a taken port falls back
 * (second_wrap_on_a_taken_admin_port_serves_its_tools). check refuses the
 * file as invalid (its exit 1). */
Test(wrap_life, bad_admin_address_is_refused_by_every_command)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char nonloop[64], cfg[TGH_PATH + 32], cmd[3 * TGH_PATH], text[256];
    snprintf(nonloop, sizeof nonloop, "0.0.0.0:%d", tgh_free_port());
    const struct {
        const char *addr, *why;
    } bad[] = {{"127.0.0.1", "expected HOST:PORT"},
               {nonloop, "is not a loopback address"},
               {"127.0.0.1:http", "is not 0 to 65535"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' --admin '%s' -- '%s' </dev/null",
                 TG_BIN, W.audit, bad[i].addr, WL_FIXTURE);
        cr_expect_eq(wl_sh(cmd, W.err, 5000), 2, "wrap --admin %s: not exit 2", bad[i].addr);
        snprintf(cmd, sizeof cmd,
                 "exec '%s' serve --http 127.0.0.1:0 --audit '%s' --admin '%s' -- '%s' </dev/null",
                 TG_BIN, W.audit, bad[i].addr, WL_FIXTURE);
        cr_expect_eq(wl_sh(cmd, W.err, 5000), 2, "serve --admin %s: not exit 2", bad[i].addr);
        snprintf(text, sizeof text, "--admin: admin address '%s'", bad[i].addr);
        cr_expect_eq(tgh_file_count(W.err, text), 2, "wrap and serve do not both say \"%s\"", text);
        cr_expect_gt(tgh_file_count(W.err, bad[i].why), 0, "no \"%s\"", bad[i].why);
    }
    cr_expect_eq(tgh_file_count(W.err, "without an admin endpoint"), 0, "a wrap served on");

    /* The same address in the file. */
    snprintf(cfg, sizeof cfg, "%s/admin.json", W.dir);
    snprintf(text, sizeof text, "{\"router\":{\"admin\":\"%s\"},\"agents\":[{\"id\":\"fx\"}]}\n",
             nonloop);
    cr_assert_eq(tgh_write_file(cfg, text), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' --config '%s' -- '%s' </dev/null",
             TG_BIN, W.audit, cfg, WL_FIXTURE);
    cr_expect_eq(wl_sh(cmd, W.err, 5000), 2, "wrap with router.admin %s: not exit 2", nonloop);
    snprintf(cmd, sizeof cmd, "exec '%s' check --config '%s' -- '%s' </dev/null", TG_BIN, cfg,
             WL_FIXTURE);
    cr_expect_eq(wl_sh(cmd, W.err, 5000), 1, "check with router.admin %s: valid", nonloop);
    snprintf(text, sizeof text, "router.admin.listen: admin address '%s' is not a loopback",
             nonloop);
    cr_expect_eq(tgh_file_count(W.err, text), 2, "wrap and check do not both say \"%s\"", text);
}

/* ---- item 26: any stdin and stdout ------------------------------------- */

static const char wl_requests[] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
    "\"clientInfo\":{\"name\":\"tg-it\",\"version\":\"1\"}}}\n"
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
    "\"arguments\":{\"text\":\"one\"}}}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sleep\","
    "\"arguments\":{\"ms\":300}}}\n";

/* `toolgate wrap -- agent < requests.jsonl > out.jsonl`: every request
 * answered into the file, then a clean exit on the file's end. */
Test(wrap_life, files_on_stdin_and_stdout)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char req[TGH_PATH + 32], out[TGH_PATH + 32], cmd[4 * TGH_PATH];
    snprintf(req, sizeof req, "%s/requests.jsonl", W.dir);
    snprintf(out, sizeof out, "%s/out.jsonl", W.dir);
    cr_assert_eq(tgh_write_file(req, wl_requests), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' -- '%s' <'%s' >'%s'", TG_BIN,
             W.audit, WL_FIXTURE, req, out);
    cr_assert_eq(wl_sh(cmd, W.err, 10000), 0, "toolgate wrap < file > file failed");
    char *text = tgh_read_file(out, NULL);
    cr_assert_not_null(text);
    cr_assert(strstr(text, "\"id\":\"init\",\"result\"") != NULL, "no initialize answer:\n%s", text);
    cr_assert(strstr(text, "\"text\":\"one\"") != NULL, "call 1 not answered:\n%s", text);
    cr_assert(strstr(text, "slept 300") != NULL, "call 2 not answered:\n%s", text);
    free(text);
}

/* `< /dev/null`: the caller is gone at once; toolgate exits 0. */
Test(wrap_life, dev_null_on_stdin_exits_cleanly)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char cmd[4 * TGH_PATH];
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' -- '%s' </dev/null", TG_BIN, W.audit,
             WL_FIXTURE);
    cr_assert_eq(wl_sh(cmd, W.err, 10000), 0, "toolgate wrap </dev/null did not exit 0");
    cr_assert_eq(tgh_file_count(W.err, "stdin is"), 0, "stdin refused");
}

/* `> /dev/null`: calls are made (audited) and toolgate exits 0. */
Test(wrap_life, dev_null_on_stdout_works)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char req[TGH_PATH + 32], cmd[4 * TGH_PATH];
    snprintf(req, sizeof req, "%s/requests.jsonl", W.dir);
    cr_assert_eq(tgh_write_file(req, wl_requests), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' -- '%s' <'%s' >/dev/null", TG_BIN,
             W.audit, WL_FIXTURE, req);
    cr_assert_eq(wl_sh(cmd, W.err, 10000), 0, "toolgate wrap >/dev/null failed");
    json_t *calls = wl_events(W.audit, "call.completed");
    cr_assert_eq(json_array_size(calls), 2, "calls not made with stdout on /dev/null");
    json_decref(calls);
}

/* Issue 20, item 16: calls still running when the wrap's input ends and
 * kill_grace_period passes end with the shutdown: each is answered with
 * the shutting_down denial (naming kill_grace_period), not agent_unavailable
 * "exited with status 0 while the call ran", and audited so. */
Test(wrap_life, calls_running_at_the_end_of_input_are_shutting_down)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    const char *const args[] = {"--limit", "kill_grace_period=500ms", "--name", "fx", NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, WL_FIXTURE, agent_args, NULL), 0);
    wl_handshake(&W);
    cr_assert_eq(mcp_call(&W.tg, 1, "sleep", "{\"ms\":20000}"), 0);
    cr_assert_eq(mcp_call(&W.tg, 2, "sleep", "{\"ms\":20000}"), 0);
    cr_assert_gt(tgh_log_wait(W.log, "call ", 2, 3000), 1, "the agent never got both calls");
    uint64_t t0 = tgh_now_ms();
    tgh_close_stdin(&W.tg);
    for (int id = 1; id <= 2; id++) {
        json_t *r = mcp_await_int(&W.tg, id, 10000, NULL);
        cr_assert_not_null(r, "call %d was not answered after the input ended", id);
        json_t *den = mcp_assert_denial(r, -32068, "shutting_down");
        const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        cr_assert(msg != NULL && strstr(msg, "kill_grace_period") != NULL,
                  "the denial does not say what to raise: %s", msg ? msg : "");
        cr_assert_str_eq(json_string_value(json_object_get(den, "config_path")),
                         "agents.fx.execution_limits.kill_grace_period");
        json_decref(r);
    }
    cr_assert_geq(tgh_now_ms() - t0, 400, "answered before kill_grace_period passed");
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0, "toolgate did not exit");
    cr_assert_eq(tgh_exit_code(&W.tg), 0);
    json_t *den = wl_events(W.audit, "call.denied");
    cr_assert_eq(json_array_size(den), 2);
    for (size_t k = 0; k < 2; k++) {
        const json_t *ev = json_array_get(den, k);
        cr_assert_str_eq(wl_str(ev, "code"), "shutting_down");
    }
    json_decref(den);
}

/* Many requests in the file (more than any pipe holds, both ways): every
 * one answered, by the agent or by a denial, one line each. */
Test(wrap_life, large_request_file_is_answered_in_full)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char req[TGH_PATH + 32], out[TGH_PATH + 32], cmd[4 * TGH_PATH];
    snprintf(req, sizeof req, "%s/requests.jsonl", W.dir);
    snprintf(out, sizeof out, "%s/out.jsonl", W.dir);
    enum { N = 3000 };
    size_t cap = sizeof(wl_init) + (size_t)N * 256;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    size_t off = (size_t)snprintf(text, cap, "%s", wl_init);
    for (int i = 1; i <= N; i++)
        off += (size_t)snprintf(text + off, cap - off,
                                "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
                                "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":"
                                "\"%0100d\"}}}\n",
                                i, i);
    cr_assert_eq(tgh_write_file(req, text), 0);
    free(text);
    snprintf(cmd, sizeof cmd,
             "exec '%s' wrap --audit '%s' --limit max_queued_calls=65536 -- '%s' <'%s' >'%s'",
             TG_BIN, W.audit, WL_FIXTURE, req, out);
    cr_assert_eq(wl_sh(cmd, W.err, 20000), 0, "toolgate wrap < file > file failed");
    char *got = tgh_read_file(out, NULL);
    cr_assert_not_null(got);
    int lines = tgh_count_lines_with(got, "", NULL);
    int ids = tgh_count_lines_with(got, "", "\"id\":");
    int last = tgh_count_lines_with(got, "", "\"id\":3000,");
    free(got);
    /* The default rate limit refuses most: a denial is an answer too. */
    cr_assert_eq(lines, N + 1, "%d answers to %d requests", lines, N + 1);
    cr_assert_eq(ids, N + 1, "%d answers with an id of %d", ids, N + 1);
    cr_assert_eq(last, 1, "the last request was not answered");
}

/* Issue 12, item 27: a command that cannot be run is not restarted:
 * toolgate fails at once, naming it. */
Test(wrap_life, a_command_that_cannot_run_fails_at_once)
{
    static tgh_wrap_t V;
    cr_assert_eq(tgh_wrap_prepare(&V), 0);
    uint64_t t0 = tgh_now_ms();
    cr_assert_eq(tgh_wrap_exec(&V, NULL, "/nonexistent/tg-no-such-agent", NULL, NULL), 0);
    cr_assert_eq(tgh_wait(&V.tg, 5000), 0, "toolgate still runs 5 s after its command failed");
    uint64_t took = tgh_now_ms() - t0;
    cr_assert_neq(tgh_exit_code(&V.tg), 0);
    cr_assert_lt(took, 1500, "toolgate took %llu ms to give up", (unsigned long long)took);
    char *err = tgh_read_file(V.err, NULL);
    cr_assert(err != NULL && strstr(err, "/nonexistent/tg-no-such-agent") != NULL,
              "stderr does not name the command:\n%s", err ? err : "");
    cr_assert(strstr(err, "restarting in") == NULL, "it was restarted:\n%s", err);
    free(err);
}

/* Issue 12, item 28: an agent killed for memory during initialize: the
 * initialize is answered resource_limit_exceeded naming the memory, not
 * "agent exited before answering". */
Test(wrap_life, oom_during_initialize_names_the_resource)
{
    static tgh_wrap_t O;
    cr_assert_eq(tgh_wrap_prepare(&O), 0);
    const char *const args[] = {"--limit", "memory=16Mi", NULL};
    const char *const agent_args[] = {"--log", O.log, NULL};
    const char *const env[] = {"TG_FIXTURE_ALLOC_ON_INIT=256", NULL};
    cr_assert_eq(tgh_wrap_exec(&O, args, WL_FIXTURE, agent_args, env), 0);
    cr_assert_eq(tgh_send(&O.tg, wl_init, sizeof(wl_init) - 1, 3000), 0);
    json_t *r = mcp_expect_str(&O.tg, "init", 10000);
    cr_assert_not_null(r, "no answer to the initialize the agent died of");
    mcp_assert_denial(r, -32065, "resource_limit_exceeded");
    json_t *data = json_object_get(json_object_get(r, "error"), "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "limit")), "memory");
    json_decref(r);
}

/* Issue 20 item 7: `wrap --config F` runs F's agents[0].command when no
 * command is given; given both, the one after -- runs and a notice says
 * the file's is not used; given neither, the message names the key. */
Test(wrap_life, config_command_runs_without_dashdash)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char req[TGH_PATH + 32], out[TGH_PATH + 32], cfg[TGH_PATH + 32], cmd[4 * TGH_PATH];
    char doc[2 * TGH_PATH];
    snprintf(req, sizeof req, "%s/requests.jsonl", W.dir);
    snprintf(out, sizeof out, "%s/out.jsonl", W.dir);
    snprintf(cfg, sizeof cfg, "%s/wrap.json", W.dir);
    cr_assert_eq(tgh_write_file(req, wl_requests), 0);

    snprintf(doc, sizeof doc, "{\"agents\":[{\"id\":\"fx\",\"command\":[\"%s\"]}]}\n", WL_FIXTURE);
    cr_assert_eq(tgh_write_file(cfg, doc), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' --config '%s' <'%s' >'%s'", TG_BIN,
             W.audit, cfg, req, out);
    cr_assert_eq(wl_sh(cmd, W.err, 10000), 0, "wrap --config without -- failed: %s",
                 tgh_read_file(W.err, NULL));
    char *text = tgh_read_file(out, NULL);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "\"text\":\"one\"") != NULL, "call 1 not answered:\n%s", text);
    free(text);

    /* Both: the command line's runs (the file's would fail to start). */
    snprintf(doc, sizeof doc, "{\"agents\":[{\"id\":\"fx\",\"command\":[\"%s/absent\"]}]}\n",
             W.dir);
    cr_assert_eq(tgh_write_file(cfg, doc), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' --config '%s' -- '%s' <'%s' >'%s'",
             TG_BIN, W.audit, cfg, WL_FIXTURE, req, out);
    cr_assert_eq(wl_sh(cmd, W.err, 10000), 0, "wrap --config -- CMD failed");
    text = tgh_read_file(out, NULL);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "\"text\":\"one\"") != NULL, "call 1 not answered:\n%s", text);
    free(text);
    char notice[3 * TGH_PATH];
    snprintf(notice, sizeof notice,
             "--config %s: agents[0].command (%s/absent) is not used: the command after -- "
             "replaces it",
             cfg, W.dir);
    cr_expect_eq(tgh_file_count(W.err, notice), 1, "no notice \"%s\"", notice);

    /* Neither. */
    cr_assert_eq(tgh_write_file(cfg, "{\"agents\":[{\"id\":\"fx\"}]}\n"), 0);
    snprintf(cmd, sizeof cmd, "exec '%s' wrap --audit '%s' --config '%s' </dev/null", TG_BIN,
             W.audit, cfg);
    cr_expect_eq(wl_sh(cmd, W.err, 10000), 2);
    snprintf(notice, sizeof notice,
             "%s: agents[0].command: no command (expected \"command\" in the file, or the command "
             "after --",
             cfg);
    cr_expect_eq(tgh_file_count(W.err, notice), 1, "no error \"%s\"", notice);
}
