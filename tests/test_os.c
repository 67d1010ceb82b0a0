/* Integration tests of the OpenSentience dialect in `toolgate serve`: the
 * real binary, an opensentience listener, and the fixture agent
 * tests/agents/tg_os_agent.c. Callers speak length-prefixed frames over
 * the Unix socket; the fixture logs what reached it (calls with the
 * call_id toolgate gave them, cancels), so each test checks both sides.
 * Suite os_reload sends SIGHUP with changed agent configs (limits in
 * place, a new command by a drained restart, a storm of reloads under
 * load); suite os_shared runs shared limits against a throwaway Redis
 * (tests/tg_redis.h, or TG_REDIS_URL); suite os_agent checks the agent
 * lifecycle both dialects share (the config keys: test_os_config.c). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/mcp_client.h"
#include "tests/os_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

static tgh_serve_t S;
static char os_hboff[TGH_PATH + 16]; /* the fixture stops its heartbeats while this exists */
static char os_token[TGH_PATH + 16]; /* the fixture writes its session token here */
static tgh_proc_t os_aux; /* `audit verify`, `check`: registered with the harness, so not on a stack */

typedef struct os_opts {
    const char *listen; /* spliced into the listener object */
    const char *router; /* into "router" */
    const char *agent;  /* into the agent object */
    const char *args;   /* more fixture arguments: , "--x", "y" */
    const char *top;    /* top-level members */
    bool no_wait;       /* do not wait for the agent to be ready */
} os_opts_t;

static void os_fini(void)
{
    tgh_cleanup();
}

/* Write the config of `toolgate serve` with agent "os" (the fixture,
 * logging to <log>) behind one opensentience listener on <sock>, auditing
 * to <audit>, into <path>. */
static void os_write_cfg(const char *path, const char *sock, const char *audit, const char *log,
                         const os_opts_t *o)
{
    char json[8192];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"dialect\": \"opensentience\"%s}]%s},\n"
        " \"audit\": {\"path\": \"%s\"},\n"
        " \"agents\": [{\"id\": \"os\", \"dialect\": \"opensentience\",\n"
        "   \"command\": [\"%s/tg_os_agent\", \"--log\", \"%s\", \"--hb-off\", \"%s\", "
        "\"--token-file\", \"%s\"%s]%s}]%s}\n",
        sock, o && o->listen ? o->listen : "", o && o->router ? o->router : "", audit,
        TG_AGENTS_DIR, log, os_hboff, os_token, o && o->args ? o->args : "",
        o && o->agent ? o->agent : "", o && o->top ? o->top : "");
    cr_assert(n > 0 && (size_t)n < sizeof json);
    cr_assert_eq(tgh_write_file(path, json), 0);
}

/* Start `toolgate serve` with agent "os" (the fixture) behind one
 * opensentience listener. */
static void os_start(const os_opts_t *o)
{
    cr_assert_eq(tgh_serve_prepare(&S, "os"), 0);
    snprintf(os_hboff, sizeof os_hboff, "%s/hb-off", S.dir);
    snprintf(os_token, sizeof os_token, "%s/token", S.dir);
    os_write_cfg(S.cfg, S.sock, S.audit, S.log, o);
    tgh_serve_start(&S, NULL, NULL, 10000);
    if ((o == NULL || !o->no_wait) && tgh_file_wait(S.err, "agent 'os' ready", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "agent 'os' did not become ready");
}

/* Stop toolgate: SIGTERM, a clean exit, the socket file gone. */
static void os_stop(void)
{
    tgh_serve_stop(&S, 20000);
    /* Every event it wrote passes `toolgate audit verify` (schema, seq). */
    tgh_proc_t *v = &os_aux;
    char *const argv[] = {(char *)TG_BIN, (char *)"audit", (char *)"verify", S.audit, NULL};
    cr_assert_eq(tgh_spawn(v, argv, NULL, NULL), 0);
    tgh_close_stdin(v);
    char *line = tgh_read_line(v, 10000, NULL);
    cr_assert_eq(tgh_wait(v, 10000), 0);
    cr_assert_eq(tgh_exit_code(v), 0, "audit verify: %s", line ? line : "");
    free(line);
}

/* os_start, and one caller connected in <c>. */
static void os_start_caller(const os_opts_t *o, osc_t *c)
{
    os_start(o);
    osc_open(c, S.sock);
}

/* Close the caller <c>, then os_stop. */
static void os_stop_caller(osc_t *c)
{
    osc_close(c);
    os_stop();
}

TestSuite(os, .fini = os_fini, .timeout = 60);

Test(os, many_concurrent_callers_with_colliding_call_ids)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 64, "
                            "\"max_queued_calls\": 128, \"rate_limit\": \"1000/second\"}"};
    os_start(&o);
    enum { NC = 16, NCALL = 5 };
    osc_t c[NC];
    for (int i = 0; i < NC; i++)
        osc_open(&c[i], S.sock);
    /* Every caller uses the same call ids, all pipelined before any is read. */
    for (int i = 0; i < NC; i++)
        for (int j = 0; j < NCALL; j++) {
            char cid[16], in[96];
            snprintf(cid, sizeof cid, "c%d", j);
            if (j == 0)
                snprintf(in, sizeof in, "{\"ms\": 200}");
            else
                snprintf(in, sizeof in, "{\"text\": \"caller%d-call%d\"}", i, j);
            osc_call(&c[i], cid, j == 0 ? "os/sleep" : "os/echo", in, NULL);
        }
    for (int i = 0; i < NC; i++) {
        for (int j = 1; j < NCALL; j++) {
            char cid[16], want[64];
            snprintf(cid, sizeof cid, "c%d", j);
            snprintf(want, sizeof want, "caller%d-call%d", i, j);
            json_t *r = osc_await(&c[i], cid, 10000, NULL);
            cr_assert_not_null(r, "caller %d: no result for %s", i, cid);
            cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
            cr_assert_str_eq(json_string_value(json_object_get(
                                 json_object_get(json_object_get(r, "payload"), "output"), "text")),
                             want, "a result went to the wrong caller");
            json_decref(r);
        }
        json_t *r = osc_await(&c[i], "c0", 10000, NULL);
        cr_assert_not_null(r);
        cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
        json_decref(r);
    }
    /* The agent saw 80 calls, each with its own toolgate-made call_id. */
    char *text = tgh_read_file(S.log, NULL);
    cr_assert_eq(tgh_count_lines_with(text, "call tg-", NULL), NC * NCALL);
    cr_assert_eq(tgh_count_lines_with(text, "call c", NULL), 0,
                 "a caller's call_id reached the agent");
    json_t *seen = json_object();
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char id[64];
        if (sscanf(line, "call %63s", id) == 1) {
            cr_assert_null(json_object_get(seen, id), "call_id %s given twice", id);
            json_object_set_new(seen, id, json_true());
        }
        line = nl ? nl + 1 : NULL;
    }
    cr_assert_eq(json_object_size(seen), NC * NCALL);
    json_decref(seen);
    free(text);
    for (int i = 0; i < NC; i++)
        osc_close(&c[i]);
    os_stop();
}

Test(os, session_token_fresh_secret_and_checked)
{
    os_opts_t o = {.agent = ", \"restart\": {\"policy\": \"always\", \"backoff\": \"50ms\"}"};
    os_start(&o);
    char *tok1 = tgh_read_file(os_token, NULL);
    cr_assert_not_null(tok1);
    cr_assert_eq(strlen(tok1), 32, "a 128-bit token in hex: %s", tok1);
    for (size_t i = 0; i < 32; i++)
        cr_assert(strchr("0123456789abcdef", tok1[i]) != NULL);
    /* A restarted instance gets a fresh token. */
    osc_t c;
    osc_open(&c, S.sock);
    osc_call(&c, "boom", "os/crash", "{}", NULL);
    json_t *r = osc_await(&c, "boom", 10000, NULL);
    cr_assert_str_eq(osc_code_of(r), "agent_unavailable");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.err, "agent 'os' ready", 2, 10000), 2);
    char *tok2 = tgh_read_file(os_token, NULL);
    cr_assert_eq(strlen(tok2), 32);
    cr_assert_str_neq(tok1, tok2, "the restarted instance got the same token");
    json_decref(osc_ok_call(&c, "after", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
    /* Never logged, never audited. */
    char *err = tgh_read_file(S.err, NULL), *audit = tgh_read_file(S.audit, NULL);
    cr_assert_null(strstr(err, tok1), "the session token is in toolgate's log");
    cr_assert_null(strstr(err, tok2));
    cr_assert_null(strstr(audit, tok1), "the session token is in the audit trail");
    cr_assert_null(strstr(audit, tok2));
    free(err);
    free(audit);
    free(tok1);
    free(tok2);
}

Test(os, wrong_session_token_rejected)
{
    os_opts_t o = {.args = ", \"--wrong-token\"",
                   .agent = ", \"restart\": {\"policy\": \"no\"}",
                   .no_wait = true};
    os_start(&o);
    cr_assert_eq(tgh_file_wait(S.log, "welcome-error protocol.unauthorized", 1, 10000), 1,
                 "the agent was not told its token is wrong");
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"bad_session_token\"", 1, 10000), 1);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"agent.exited\"", 1, 10000), 1);
    cr_assert_eq(tgh_file_count(S.err, "agent 'os' ready"), 0);
    cr_assert_eq(tgh_file_count(S.log, "registered"), 0, "tools of an agent that failed hello");
    osc_t c;
    osc_open(&c, S.sock);
    json_t *r = osc_denied_call(&c, "c1", "os/echo", "{\"text\":\"x\"}", NULL, "agent_unavailable");
    cr_assert_eq(json_is_true(json_object_get(json_object_get(r, "error"), "retryable")), true);
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, "call "), 0);
    os_stop_caller(&c);
}

Test(os, heartbeat_loss_then_recovery)
{
    os_opts_t o = {.agent = ", \"opensentience\": {\"heartbeat_interval\": \"100ms\", "
                            "\"heartbeat_timeout\": \"1s\"}, "
                            "\"execution_limits\": {\"kill_grace_period\": \"60s\"}"};
    os_start(&o);
    cr_assert_eq(tgh_file_wait(S.log, "welcome 100 ", 1, 1000), 1, "heartbeat_interval_ms not announced");
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "a", "os/echo", "{\"text\":\"x\"}"));
    cr_assert_eq(tgh_write_file(os_hboff, "off"), 0);
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"heartbeat_missed\"", 1, 5000), 1);
    json_t *r = osc_denied_call(&c, "b", "os/echo", "{\"text\":\"x\"}", NULL, "agent_unavailable");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.opensentience.heartbeat_timeout");
    cr_assert_eq(osc_detail_int(r, "retry_after_ms"), 100);
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 1, "a call reached an unhealthy agent");
    unlink(os_hboff);
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"heartbeat_resumed\"", 1, 5000), 1);
    json_decref(osc_ok_call(&c, "c", "os/echo", "{\"text\":\"x\"}"));
    cr_assert_eq(tgh_file_count(S.log, "start "), 1, "a recovered agent must not be restarted");
    os_stop_caller(&c);
}

Test(os, heartbeat_loss_kills_and_restarts)
{
    os_opts_t o = {.agent = ", \"opensentience\": {\"heartbeat_interval\": \"100ms\", "
                            "\"heartbeat_timeout\": \"300ms\"}, "
                            "\"execution_limits\": {\"kill_grace_period\": \"300ms\"}, "
                            "\"restart\": {\"policy\": \"on-failure\", \"backoff\": \"50ms\"}"};
    os_start(&o);
    cr_assert_eq(tgh_write_file(os_hboff, "off"), 0);
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"heartbeat\"", 1, 5000), 1, "not killed");
    cr_assert_eq(tgh_file_count(S.audit, "\"event\":\"agent.killed\""), 1);
    unlink(os_hboff);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"agent.restarting\"", 1, 5000), 1);
    cr_assert_eq(tgh_file_wait(S.err, "agent 'os' ready", 2, 10000), 2, "not restarted");
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "a", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

Test(os, caller_disconnect_cancels_its_calls)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 1}"};
    os_start(&o);
    osc_t a, b;
    osc_open(&a, S.sock);
    osc_call(&a, "long", "os/sleep", "{\"ms\": 30000}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, "call tg-", 1, 5000), 1);
    char line[128];
    cr_assert_eq(tgh_log_field(S.log, "call ", 0, line, sizeof line), 0);
    char agent_cid[64];
    cr_assert_eq(sscanf(line, "%63s", agent_cid), 1);
    osc_close(&a);
    char want[96];
    snprintf(want, sizeof want, "cancel %s caller_gone", agent_cid);
    cr_assert_eq(tgh_file_wait(S.log, want, 1, 5000), 1,
                 "no core.tool.cancel for the call of a gone caller");
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"caller_gone\"", 1, 5000), 1);
    /* The agent confirmed (canceled): the one slot is free again. */
    osc_open(&b, S.sock);
    json_decref(osc_ok_call(&b, "next", "os/echo", "{\"text\":\"x\"}"));
    osc_close(&b);
    os_stop();
}

Test(os, caller_cancel_answered_canceled)
{
    osc_t c;
    os_start_caller(NULL, &c);
    osc_call(&c, "s1", "os/sleep", "{\"ms\": 30000}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, "call tg-", 1, 5000), 1);
    osc_cancel(&c, "s1");
    json_t *r = osc_await(&c, "s1", 5000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "canceled");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.log, "caller_cancelled", 1, 5000), 1);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"call.cancelled\"", 1, 5000), 1);
    /* A queued call is cancelled by toolgate itself. */
    os_stop_caller(&c);
}

Test(os, idempotent_replay_within_window)
{
    os_opts_t o = {.agent = ", \"opensentience\": {\"idempotency_window\": \"1500ms\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    const char *k1 = ", \"idempotency_key\": \"order-1\"";
    osc_call(&c, "x1", "os/count", "{}", k1);
    json_t *r1 = osc_await(&c, "x1", 5000, NULL);
    osc_call(&c, "x2", "os/count", "{}", k1);
    json_t *r2 = osc_await(&c, "x2", 5000, NULL);
    cr_assert_not_null(r1);
    cr_assert_not_null(r2);
    cr_assert_str_eq(osc_str(r2, "payload", "call_id"), "x2", "the replay carries the new call_id");
    cr_assert(json_equal(json_object_get(json_object_get(r1, "payload"), "output"),
                         json_object_get(json_object_get(r2, "payload"), "output")));
    cr_assert_eq(json_integer_value(json_object_get(
                     json_object_get(json_object_get(r2, "payload"), "output"), "runs")),
                 1);
    json_decref(r1);
    json_decref(r2);
    cr_assert_eq(tgh_file_count(S.log, " count order-1"), 1, "the tool ran twice");
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"idempotent_replay\"", 1, 5000), 1);
    /* Another key runs the tool. */
    json_t *out = osc_ok_call(&c, "x3", "os/count", "{}");
    cr_assert_eq(json_integer_value(json_object_get(out, "runs")), 2);
    json_decref(out);
    /* Past the window the key runs again. */
    tgh_sleep_ms(1800);
    osc_call(&c, "x4", "os/count", "{}", k1);
    json_t *r4 = osc_await(&c, "x4", 5000, NULL);
    cr_assert_eq(json_integer_value(json_object_get(
                     json_object_get(json_object_get(r4, "payload"), "output"), "runs")),
                 3);
    json_decref(r4);
    cr_assert_eq(tgh_file_count(S.log, " count order-1"), 2);
    os_stop_caller(&c);
}

Test(os, agent_rate_limit)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"3/second\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    for (int i = 0; i < 3; i++) {
        char cid[8];
        snprintf(cid, sizeof cid, "r%d", i);
        json_decref(osc_ok_call(&c, cid, "os/echo", "{\"text\":\"x\"}"));
    }
    json_t *r = osc_denied_call(&c, "r3", "os/echo", "{\"text\":\"x\"}", NULL, "rate_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "scope"), "agent");
    cr_assert_eq(osc_detail_int(r, "observed"), 4);
    cr_assert_eq(osc_detail_int(r, "cap"), 3);
    cr_assert_gt(osc_detail_int(r, "retry_after_ms"), 0);
    cr_assert_leq(osc_detail_int(r, "retry_after_ms"), 334);
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.execution_limits.rate_limit");
    cr_assert_str_eq(osc_detail_str(r, "unit"), "calls/second");
    cr_assert_str_eq(osc_detail_str(r, "tool"), "echo");
    /* The envelope of the caller's call is echoed. */
    cr_assert_str_eq(osc_str(r, "in_reply_to", NULL), "m-r3");
    cr_assert_str_eq(osc_str(r, "request_id", NULL), "req-r3");
    cr_assert_str_eq(osc_str(r, "correlation_id", NULL), "corr-r3");
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 3);
    cr_assert_eq(tgh_file_wait(S.audit, "\"code\":\"rate_limit_exceeded\"", 1, 5000), 1);
    os_stop_caller(&c);
}

Test(os, tool_and_caller_rate_limits)
{
    char top[256];
    snprintf(top, sizeof top,
             ", \"callers\": [{\"name\": \"me\", \"uid\": %u, \"execution_limits\": "
             "{\"rate_limit\": \"5/second\"}}]",
             (unsigned)getuid());
    os_opts_t o = {.agent = ", \"tools\": {\"count\": {\"rate_limit\": \"2/second\"}}", .top = top};
    osc_t c;
    os_start_caller(&o, &c);
    json_decref(osc_ok_call(&c, "t0", "os/count", "{}"));
    json_decref(osc_ok_call(&c, "t1", "os/count", "{}"));
    json_t *r = osc_denied_call(&c, "t2", "os/count", "{}", NULL, "rate_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "scope"), "tool");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.tools.count.rate_limit");
    json_decref(r);
    /* The caller's 5/second: two spent, the refused call took none. */
    for (int i = 0; i < 3; i++) {
        char cid[8];
        snprintf(cid, sizeof cid, "e%d", i);
        json_decref(osc_ok_call(&c, cid, "os/echo", "{\"text\":\"x\"}"));
    }
    r = osc_denied_call(&c, "e3", "os/echo", "{\"text\":\"x\"}", NULL, "rate_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "scope"), "caller");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "callers.me.execution_limits.rate_limit");
    json_decref(r);
    /* 5 completed, 2 denied: all audited under the caller's name. */
    cr_assert_eq(tgh_file_wait(S.audit, "\"caller\":\"me\"", 7, 5000), 7);
    os_stop_caller(&c);
}

Test(os, concurrency_queue_and_deadline)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 1, "
                            "\"max_queued_calls\": 1}, "
                            "\"tools\": {\"sleep\": {\"max_tool_call_duration\": \"1s\"}}"};
    osc_t c;
    os_start_caller(&o, &c);
    osc_call(&c, "q0", "os/sleep", "{\"ms\": 300}", NULL);   /* in flight */
    osc_call(&c, "q1", "os/echo", "{\"text\":\"w\"}", NULL); /* waits in the queue */
    json_t *r =
        osc_denied_call(&c, "q2", "os/echo", "{\"text\":\"x\"}", NULL, "concurrency_limit_exceeded");
    cr_assert_eq(osc_detail_int(r, "observed"), 2);
    cr_assert_eq(osc_detail_int(r, "cap"), 1);
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.execution_limits.max_queued_calls");
    json_decref(r);
    r = osc_await(&c, "q0", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    r = osc_await(&c, "q1", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded", "the queued call did not run");
    json_decref(r);

    /* The tool's cap: timeout to the caller, core.tool.cancel to the agent. */
    uint64_t t0 = tgh_now_ms();
    r = osc_denied_call(&c, "slow", "os/sleep", "{\"ms\": 30000}", NULL, "timeout");
    uint64_t took = tgh_now_ms() - t0;
    cr_assert_geq(took, 990);
    cr_assert_lt(took, 6000);
    cr_assert_eq(osc_detail_int(r, "cap"), 1000);
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.tools.sleep.max_tool_call_duration");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.log, " timeout", 1, 5000), 1, "no core.tool.cancel on timeout");
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"call.timeout\"", 1, 5000), 1);
    /* The caller's own shorter timeout_ms wins. */
    t0 = tgh_now_ms();
    r = osc_denied_call(&c, "short", "os/sleep", "{\"ms\": 30000}", ", \"timeout_ms\": 100", "timeout");
    cr_assert_lt(tgh_now_ms() - t0, 900, "the caller's shorter timeout_ms was not honoured");
    cr_assert_eq(osc_detail_int(r, "cap"), 100);
    json_decref(r);
    /* The agent confirmed both cancels: the slot is free. */
    json_decref(osc_ok_call(&c, "after", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

/* Deadlines share one ordered list per agent (router/dltimer.h): a shorter
 * caller deadline goes ahead of the calls already waiting, and one that
 * would walk past more than a few of them gets a timer of its own. Both
 * expire on time and the long calls they overtook still complete. */
Test(os, mixed_deadlines_each_expire_on_time)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 32, "
                            "\"max_queued_calls\": 32, \"rate_limit\": \"1000/second\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    char cid[16];
    for (int i = 0; i < 3; i++) {
        snprintf(cid, sizeof cid, "l%d", i);
        osc_call(&c, cid, "os/sleep", "{\"ms\": 2500}", NULL);
    }
    uint64_t t0 = tgh_now_ms();
    json_t *r = osc_denied_call(&c, "h", "os/sleep", "{\"ms\": 30000}", ", \"timeout_ms\": 200",
                            "timeout");
    cr_assert_lt(tgh_now_ms() - t0, 900, "a deadline ahead of the list's head was late");
    json_decref(r);
    for (int i = 3; i < 12; i++) {
        snprintf(cid, sizeof cid, "l%d", i);
        osc_call(&c, cid, "os/sleep", "{\"ms\": 2500}", NULL);
    }
    t0 = tgh_now_ms();
    r = osc_denied_call(&c, "o", "os/sleep", "{\"ms\": 30000}", ", \"timeout_ms\": 300", "timeout");
    cr_assert_lt(tgh_now_ms() - t0, 1000, "a deadline on its own timer was late");
    json_decref(r);
    int ok = 0;
    uint64_t deadline = tgh_now_ms() + 8000;
    while (ok < 12) {
        json_t *m = osc_read(&c, tgh_left(deadline));
        cr_assert_not_null(m, "only %d of the 12 long calls were answered", ok);
        const char *type = osc_str(m, "type", NULL);
        if (type != NULL && strcmp(type, "agent.tool.result") == 0) {
            cr_assert_str_eq(osc_str(m, "payload", "status"), "succeeded", "%s",
                             json_dumps(m, JSON_COMPACT));
            ok++;
        }
        json_decref(m);
    }
    os_stop_caller(&c);
}

Test(os, caller_concurrency_waits_then_deadline)
{
    char top[256];
    snprintf(top, sizeof top,
             ", \"callers\": [{\"name\": \"me\", \"uid\": %u, \"execution_limits\": "
             "{\"max_concurrent_calls\": 1}}]",
             (unsigned)getuid());
    os_opts_t o = {.top = top};
    osc_t c;
    os_start_caller(&o, &c);
    osc_call(&c, "a", "os/sleep", "{\"ms\": 1500}", NULL);
    json_t *r = osc_denied_call(&c, "b", "os/echo", "{\"text\":\"x\"}", ", \"timeout_ms\": 200",
                            "concurrency_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "limit"), "concurrency");
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 1, "the caller's second call ran");
    r = osc_await(&c, "a", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    json_decref(osc_ok_call(&c, "c", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

Test(os, oversize_header_refused_from_the_header_alone)
{
    os_opts_t o = {.router = ", \"max_frame_bytes\": \"64Ki\""};
    osc_t c;
    os_start_caller(&o, &c);
    /* Only the header: the refusal must not wait for the payload. */
    unsigned char h[4] = {0x00, 0x10, 0x00, 0x00}; /* 1 MiB */
    osc_raw(&c, h, 4);
    json_t *r = osc_read(&c, 3000);
    cr_assert_not_null(r, "no refusal before the payload was sent");
    cr_assert_str_eq(osc_code_of(r), "frame_too_large");
    cr_assert(json_is_null(json_object_get(json_object_get(r, "payload"), "call_id")));
    cr_assert_eq(osc_detail_int(r, "observed"), 1048576);
    cr_assert_eq(osc_detail_int(r, "cap"), 65536);
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "router.max_frame_bytes");
    json_decref(r);
    /* The payload streams by and is skipped; the connection goes on. */
    char *junk = malloc(1048576);
    memset(junk, '{', 1048576);
    osc_raw(&c, junk, 1048576);
    free(junk);
    json_decref(osc_ok_call(&c, "after", "os/echo", "{\"text\":\"x\"}"));
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 1);
    os_stop_caller(&c);
}

Test(os, ffffffff_header_with_on_oversize_close)
{
    os_opts_t o = {.listen = ", \"on_oversize\": \"close\""};
    osc_t c;
    os_start_caller(&o, &c);
    unsigned char h[4] = {0xff, 0xff, 0xff, 0xff};
    osc_raw(&c, h, 4);
    json_t *r = osc_read(&c, 3000);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_code_of(r), "frame_too_large");
    cr_assert_eq(osc_detail_int(r, "observed"), 4294967295LL);
    json_decref(r);
    cr_assert_null(osc_read(&c, 3000));
    cr_assert(c.out_eof, "the connection stayed open after an over-cap frame with on_oversize close");
    osc_close(&c);
    /* The gateway is unharmed. */
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "a", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

Test(os, garbage_is_answered_and_survived)
{
    osc_t c;
    os_start_caller(NULL, &c);
    osc_frame(&c, "this is not json");
    json_t *r = osc_read(&c, 3000);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "type", NULL), "core.error");
    cr_assert_str_eq(osc_code_of(r), "protocol.invalid_frame");
    json_decref(r);
    unsigned char zero[4] = {0, 0, 0, 0};
    osc_raw(&c, zero, 4);
    r = osc_read(&c, 3000);
    cr_assert_str_eq(osc_code_of(r), "protocol.invalid_frame");
    json_decref(r);
    osc_frame(&c, "[1,2,3]");
    r = osc_read(&c, 3000);
    cr_assert_str_eq(osc_code_of(r), "protocol.invalid_frame");
    json_decref(r);
    osc_frame(&c, "{\"v\":1,\"type\":\"agent.heartbeat\",\"id\":\"h\",\"ts\":\"t\",\"payload\":{}}");
    r = osc_read(&c, 3000);
    cr_assert_str_eq(osc_code_of(r), "protocol.unsupported_type");
    json_decref(r);
    /* Routing errors are results for the call. */
    json_decref(osc_denied_call(&c, "n1", "os/nope", "{}", NULL, "tool.not_found"));
    json_decref(osc_denied_call(&c, "n2", "ghost/echo", "{}", NULL, "tool.not_found"));
    json_decref(osc_denied_call(&c, "n3", "no-slash", "{}", NULL, "tool.invalid_id"));
    osc_call(&c, "dup", "os/sleep", "{\"ms\": 300}", NULL);
    json_decref(osc_denied_call(&c, "dup", "os/echo", "{}", NULL, "call.duplicate_id"));
    r = osc_await(&c, "dup", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    json_decref(osc_ok_call(&c, "fine", "os/echo", "{\"text\":\"x\"}"));
    osc_close(&c);
    /* Bytes that are no framing at all: "GET " reads as a huge length. */
    osc_open(&c, S.sock);
    osc_raw(&c, "GET / HTTP/1.1\r\n\r\n", 18);
    r = osc_read(&c, 3000);
    cr_assert_str_eq(osc_code_of(r), "frame_too_large");
    json_decref(r);
    osc_close(&c);
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 2);
    os_stop();
}

Test(os, streams_and_failures_forwarded)
{
    osc_t c;
    os_start_caller(NULL, &c);
    int streams = 0;
    osc_call(&c, "st", "os/stream", "{\"n\": 3}", NULL);
    json_t *r = osc_await(&c, "st", 5000, &streams);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    cr_assert_eq(streams, 3);
    json_decref(r);
    osc_call(&c, "f", "os/fail", "{}", NULL);
    r = osc_await(&c, "f", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "failed");
    cr_assert_str_eq(osc_code_of(r), "tool.failed", "the agent's own error is forwarded");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.audit, "\"status\":\"error\"", 1, 5000), 1);
    os_stop_caller(&c);
}

Test(os, on_demand_start)
{
    os_opts_t o = {.agent = ", \"start\": \"on_demand\"", .no_wait = true};
    os_start(&o);
    tgh_sleep_ms(300);
    cr_assert_eq(tgh_file_count(S.log, "start "), 0, "an on_demand agent started before any call");
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "first", "os/echo", "{\"text\":\"x\"}"));
    cr_assert_eq(tgh_file_count(S.log, "start "), 1);
    os_stop_caller(&c);
}

Test(os, crash_fails_calls_and_restarts)
{
    os_opts_t o = {.agent = ", \"restart\": {\"policy\": \"on-failure\", \"backoff\": \"50ms\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    osc_call(&c, "s", "os/sleep", "{\"ms\": 30000}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, "call tg-", 1, 5000), 1);
    osc_call(&c, "boom", "os/crash", "{}", NULL);
    json_t *r = osc_await(&c, "s", 5000, NULL);
    cr_assert_str_eq(osc_code_of(r), "agent_unavailable", "an inflight call of a crashed agent");
    json_decref(r);
    r = osc_await(&c, "boom", 5000, NULL);
    cr_assert_str_eq(osc_code_of(r), "agent_unavailable");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"agent.restarting\"", 1, 5000), 1);
    cr_assert_eq(tgh_file_wait(S.err, "agent 'os' ready", 2, 10000), 2);
    json_decref(osc_ok_call(&c, "again", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

/* The restart policy is the agent layer's, one for both dialects: an
 * OpenSentience agent's restarts fill agent.ID.restarts as an MCP
 * session's do (it had no such row), and count in the metrics. */
Test(os, restarts_fill_the_agents_restarts_row)
{
    char router[96];
    snprintf(router, sizeof router, ", \"admin\": \"127.0.0.1:%d\"", tgh_free_port());
    const char *addr = strchr(router, '1');
    char a[64];
    snprintf(a, sizeof a, "%.*s", (int)strcspn(addr, "\""), addr);
    os_opts_t o = {.router = router,
                   .agent = ", \"restart\": {\"policy\": \"on-failure\", \"backoff\": \"50ms\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    json_t *doc = tga_limits(a);
    json_t *e = tga_limit(doc, "agent.os.restarts");
    cr_assert_not_null(e, "agent.os.restarts is not registered");
    cr_assert_str_eq(json_string_value(json_object_get(e, "scope")), "agent");
    cr_assert_eq(json_integer_value(json_object_get(e, "current")), 0);
    /* The agent's pool (agent/pool.h, binding shared): its one instance. */
    e = tga_limit(doc, "agent.os.instances");
    cr_assert_not_null(e, "agent.os.instances is not registered");
    cr_assert_eq(json_integer_value(json_object_get(e, "capacity")), 1);
    cr_assert_eq(json_integer_value(json_object_get(e, "current")), 1, "the instance runs");
    json_decref(doc);
    json_decref(osc_denied_call(&c, "boom", "os/crash", "{}", NULL, "agent_unavailable"));
    cr_assert_eq(tgh_file_wait(S.err, "agent 'os' ready", 2, 10000), 2);
    doc = tga_limits(a);
    e = tga_limit(doc, "agent.os.restarts");
    cr_assert_not_null(e);
    cr_assert_eq(json_integer_value(json_object_get(e, "current")), 1,
                 "restarts within the window after one crash");
    e = tga_limit(doc, "agent.os.instances");
    cr_assert_eq(json_integer_value(json_object_get(e, "current")), 1,
                 "the restarted instance holds the place again, once");
    json_decref(doc);
    os_stop_caller(&c);
}

Test(os, registration_refuses_foreign_tool_ids)
{
    os_opts_t o = {.args = ", \"--bad-tool\""};
    os_start(&o);
    cr_assert_eq(tgh_file_wait(S.log, "registered 7 rejected 1", 1, 5000), 1);
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_denied_call(&c, "x", "someone-else/echo", "{}", NULL, "tool.not_found"));
    os_stop_caller(&c);
}

Test(os, agent_oversize_frame_skipped)
{
    os_opts_t o = {.router = ", \"max_frame_bytes\": \"64Ki\""};
    osc_t c;
    os_start_caller(&o, &c);
    json_t *r = osc_denied_call(&c, "big", "os/oversize", "{\"bytes\": 200000}",
                            ", \"timeout_ms\": 500", "timeout");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.audit, "\"reason\":\"frame_too_large\"", 1, 5000), 1);
    json_decref(osc_ok_call(&c, "after", "os/echo", "{\"text\":\"x\"}"));
    os_stop_caller(&c);
}

Test(os, callers_only_refuses_unknown_peer)
{
    os_opts_t o = {.router = ", \"callers_only\": true"};
    osc_t c;
    os_start_caller(&o, &c);
    json_t *r = osc_denied_call(&c, "x", "os/echo", "{}", NULL, "caller_not_allowed");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "callers");
    json_decref(r);
    cr_assert_null(osc_read(&c, 3000));
    cr_assert(c.out_eof);
    osc_close(&c);
    cr_assert_eq(tgh_file_count(S.log, "call tg-"), 0);
    os_stop();
}

Test(os, listener_max_connections)
{
    os_opts_t o = {.listen = ", \"max_connections\": 2"};
    os_start(&o);
    osc_t a, b, x;
    osc_open(&a, S.sock);
    osc_open(&b, S.sock);
    json_decref(osc_ok_call(&a, "a", "os/echo", "{\"text\":\"x\"}"));
    json_decref(osc_ok_call(&b, "b", "os/echo", "{\"text\":\"x\"}"));
    osc_open(&x, S.sock);
    json_t *r = osc_denied_call(&x, "x", "os/echo", "{}", NULL, "concurrency_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "limit"), "connections");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "router.listen[0].max_connections");
    cr_assert_eq(osc_detail_int(r, "observed"), 3);
    cr_assert_eq(osc_detail_int(r, "cap"), 2);
    json_decref(r);
    cr_assert_null(osc_read(&x, 3000));
    cr_assert(x.out_eof, "a connection over max_connections stayed open");
    osc_close(&x);
    osc_close(&a);
    /* Its place is free once it has closed. */
    uint64_t deadline = tgh_now_ms() + 5000;
    bool ok = false;
    while (!ok && tgh_now_ms() < deadline) {
        osc_open(&x, S.sock);
        osc_call(&x, "again", "os/echo", "{\"text\":\"x\"}", NULL);
        r = osc_await(&x, "again", 5000, NULL);
        ok = r != NULL && strcmp(osc_str(r, "payload", "status"), "succeeded") == 0;
        json_decref(r);
        osc_close(&x);
        if (!ok)
            tgh_sleep_ms(50);
    }
    cr_assert(ok, "a closed connection's place was not given back");
    osc_close(&b);
    os_stop();
}

Test(os, sigterm_drains_calls_in_flight)
{
    osc_t c;
    os_start_caller(NULL, &c);
    osc_call(&c, "s", "os/sleep", "{\"ms\": 500}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, "call tg-", 1, 5000), 1);
    kill(S.tg.pid, SIGTERM);
    json_t *r = osc_await(&c, "s", 5000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded", "a call in flight was not drained");
    json_decref(r);
    cr_assert_null(osc_read(&c, 5000));
    cr_assert(c.out_eof, "callers are disconnected once answered");
    cr_assert_eq(tgh_wait(&S.tg, 20000), 0);
    cr_assert_eq(tgh_exit_code(&S.tg), 0);
    cr_assert_eq(tgh_file_count(S.log, "exit eof"), 1, "the agent was not stopped by closing its stdin");
    osc_close(&c);
}

/* The timeout_ms the fixture logged for the <nth> core.tool.call it got. */
static long os_told_timeout(int nth)
{
    char field[64];
    cr_assert_eq(tgh_log_field(S.log, "timeout_ms ", nth, field, sizeof field), 0,
                 "no timeout_ms line %d in the agent's log", nth);
    cr_assert_neq(field[0], '-', "core.tool.call %d reached the agent without timeout_ms", nth);
    return strtol(field, NULL, 10);
}

/* The agent is told the deadline toolgate enforces, as it stands when the
 * call is forwarded: a caller asking more than the cap is told the cap,
 * one asking nothing too, one asking less its own; a call that waited in
 * the queue is told what the wait left of it. */
Test(os, agent_told_the_deadline_left)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_tool_call_duration\": \"2s\", "
                            "\"max_concurrent_calls\": 1, \"max_queued_calls\": 4}"};
    osc_t c;
    os_start_caller(&o, &c);
    json_t *r;
    osc_call(&c, "big", "os/echo", "{\"text\":\"x\"}", ", \"timeout_ms\": 60000");
    cr_assert_not_null(r = osc_await(&c, "big", 10000, NULL));
    json_decref(r);
    long t = os_told_timeout(0);
    cr_assert(t > 0 && t <= 2000, "asked 60000 under a 2 s cap, the agent was told %ld", t);

    json_decref(osc_ok_call(&c, "none", "os/echo", "{\"text\":\"x\"}"));
    t = os_told_timeout(1);
    cr_assert(t > 0 && t <= 2000, "asked nothing under a 2 s cap, the agent was told %ld", t);

    osc_call(&c, "small", "os/echo", "{\"text\":\"x\"}", ", \"timeout_ms\": 800");
    cr_assert_not_null(r = osc_await(&c, "small", 10000, NULL));
    json_decref(r);
    t = os_told_timeout(2);
    cr_assert(t > 0 && t <= 800, "asked 800, the agent was told %ld", t);

    /* The one slot busy for 600 ms: the next call waits that long in the
     * queue, and its agent is told what is left of its 2 s. */
    osc_call(&c, "hold", "os/sleep", "{\"ms\": 600}", ", \"timeout_ms\": 60000");
    cr_assert_eq(tgh_file_wait(S.log, "timeout_ms ", 4, 5000), 4);
    osc_call(&c, "queued", "os/echo", "{\"text\":\"x\"}", ", \"timeout_ms\": 60000");
    cr_assert_not_null(r = osc_await(&c, "hold", 10000, NULL));
    json_decref(r);
    cr_assert_not_null(r = osc_await(&c, "queued", 10000, NULL));
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    t = os_told_timeout(3);
    cr_assert(t > 0 && t <= 2000, "the sleep was told %ld", t);
    t = os_told_timeout(4);
    cr_assert(t > 0 && t <= 1500, "a call queued behind a 600 ms one was told %ld of 2000", t);
    os_stop_caller(&c);
}

Test(os, tool_concurrency_holds_only_its_tool)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 4}, "
                            "\"tools\": {\"sleep\": {\"max_concurrent_calls\": 1}}"};
    osc_t c;
    os_start_caller(&o, &c);
    osc_call(&c, "s1", "os/sleep", "{\"ms\": 2500}", NULL);
    osc_call(&c, "s2", "os/sleep", "{\"ms\": 10}", NULL); /* waits for the tool's one slot */
    uint64_t t0 = tgh_now_ms();
    json_decref(osc_ok_call(&c, "e", "os/echo", "{\"text\":\"x\"}")); /* not held back */
    cr_assert_lt(tgh_now_ms() - t0, 2000, "a call to another tool waited for sleep's slot");
    cr_assert_eq(tgh_file_count(S.log, " sleep -"), 1, "the second sleep ran beside the first");
    json_t *r = osc_await(&c, "s1", 5000, NULL);
    json_decref(r);
    r = osc_await(&c, "s2", 5000, NULL);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, " sleep -"), 2);
    os_stop_caller(&c);
}

Test(os, beside_an_mcp_listener)
{
    /* Written by hand: os_start's template has one listener and one
     * agent. The MCP pieces live in a dir of their own (its fixture.log
     * lets the harness kill the MCP fixture if the test fails). */
    char mdir[TGH_PATH], mlog[TGH_PATH + 16], msock[TGH_PATH + 16];
    char listen[TGH_PATH * 2], agents[TGH_PATH * 2];
    cr_assert_eq(tgh_mkdtemp(mdir, sizeof mdir), 0);
    snprintf(mlog, sizeof mlog, "%s/fixture.log", mdir);
    snprintf(msock, sizeof msock, "%s/mcp.sock", mdir);
    snprintf(listen, sizeof listen, ", {\"unix\": \"%s\", \"agent\": \"fx\"}", msock);
    snprintf(agents, sizeof agents,
             ", {\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", \"--log\", \"%s\"]}",
             TG_AGENTS_DIR, mlog);
    cr_assert_eq(tgh_serve_prepare(&S, "os"), 0);
    char json[8192];
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"dialect\": \"opensentience\"}%s]},\n"
             " \"audit\": {\"path\": \"%s\"},\n"
             " \"agents\": [{\"id\": \"os\", \"dialect\": \"opensentience\",\n"
             "   \"command\": [\"%s/tg_os_agent\", \"--log\", \"%s\"]}%s]}\n",
             S.sock, listen, S.audit, TG_AGENTS_DIR, S.log, agents);
    tgh_serve_start(&S, json, NULL, 10000);
    cr_assert_eq(tgh_file_wait(S.err, "agent 'os' ready", 1, 10000), 1);
    /* MCP: one line-framed connection with its own instance. */
    tgh_proc_t m;
    cr_assert_eq(tgh_unix_connect(&m, msock), 0);
    json_t *r = mcp_initialize(&m, 10000);
    cr_assert_not_null(json_object_get(r, "result"), "MCP initialize beside opensentience");
    json_decref(r);
    mcp_call(&m, 1, "echo", "{\"text\":\"hi\"}");
    r = mcp_await_int(&m, 1, 10000, NULL);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "a", "os/echo", "{\"text\":\"x\"}"));
    osc_close(&c);
    tgh_conn_close(&m);
    os_stop();
}

/* ---- SIGHUP reload of an opensentience agent ------------------------------ */

/* Rewrite the config with <o>, send SIGHUP, and wait until toolgate's
 * stderr holds <n> lines with <expect>. */
static void reload_to(const os_opts_t *o, const char *expect, int n)
{
    os_write_cfg(S.cfg, S.sock, S.audit, S.log, o);
    kill(S.tg.pid, SIGHUP);
    int got = tgh_file_wait(S.err, expect, n, 10000);
    if (got != n) {
        char *err = tgh_read_file(S.err, NULL);
        cr_assert_fail("expected %d line(s) with '%s' after SIGHUP, got %d: %s", n, expect, got,
                       err ? err : "");
    }
}

/* The pid and tag an echo call answered with (the instance that ran it). */
static json_int_t echo_pid(osc_t *c, const char *cid, char *tag, size_t cap)
{
    json_t *out = osc_ok_call(c, cid, "os/echo", "{\"text\":\"x\"}");
    json_int_t pid = json_integer_value(json_object_get(out, "pid"));
    const char *t = json_string_value(json_object_get(out, "tag"));
    if (tag != NULL)
        snprintf(tag, cap, "%s", t ? t : "");
    json_decref(out);
    cr_assert_gt(pid, 0);
    return pid;
}

TestSuite(os_reload, .fini = os_fini, .timeout = 120);

Test(os_reload, bad_file_rejected_old_config_keeps_running)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"3/minute\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    json_int_t pid = echo_pid(&c, "a", NULL, 0);
    /* Not JSON, then JSON that does not validate: both refused. */
    cr_assert_eq(tgh_write_file(S.cfg, "{\"agents\": ["), 0);
    kill(S.tg.pid, SIGHUP);
    cr_assert_eq(tgh_file_wait(S.err, "config rejected", 1, 10000), 1);
    os_opts_t bad = {.agent = ", \"execution_limits\": {\"rate_limit\": \"banana\"}"};
    os_write_cfg(S.cfg, S.sock, S.audit, S.log, &bad);
    kill(S.tg.pid, SIGHUP);
    cr_assert_eq(tgh_file_wait(S.err, "config rejected", 2, 10000), 2);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"config.rejected\"", 2, 5000), 2);
    cr_assert_eq(tgh_file_count(S.audit, "banana"), 0, "the offending value is not audited");
    /* The old config runs on, with its state: one 3/minute bucket, the
     * same instance. */
    cr_assert_eq(echo_pid(&c, "b", NULL, 0), pid);
    cr_assert_eq(echo_pid(&c, "c", NULL, 0), pid);
    json_decref(osc_denied_call(&c, "d", "os/echo", NULL, NULL, "rate_limit_exceeded"));
    cr_assert_eq(tgh_file_count(S.log, "start "), 1);
    os_stop_caller(&c);
}

Test(os_reload, limits_in_place_keep_bucket_slots_and_instance)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"3/minute\", "
                            "\"max_concurrent_calls\": 1, \"max_queued_calls\": 4}"};
    osc_t c;
    os_start_caller(&o, &c);
    json_int_t pid = echo_pid(&c, "a", NULL, 0);
    /* A sleep holds the only slot; the cap is raised under it. */
    osc_call(&c, "s", "os/sleep", "{\"ms\":2500}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, " sleep ", 1, 5000), 1);
    os_opts_t raised = {.agent = ", \"execution_limits\": {\"rate_limit\": \"3/minute\", "
                                 "\"max_concurrent_calls\": 2, \"max_queued_calls\": 8},"
                                 " \"tools\": {\"echo\": {\"max_concurrent_calls\": 2}},"
                                 " \"opensentience\": {\"idempotency_window\": \"1m\"}"};
    reload_to(&raised, "limits updated in place", 1);
    /* The raised cap lets a call run beside the sleep at once; the bucket
     * kept its state: one token of three left. */
    uint64_t t0 = tgh_now_ms();
    osc_call(&c, "b", "os/echo", "{\"text\":\"x\"}", NULL);
    json_t *r = osc_await(&c, "b", 10000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded", "%s", json_dumps(r, 0));
    cr_assert_lt(tgh_now_ms() - t0, 2000, "the echo waited for the sleep");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(r, "payload"),
                                                                     "output"),
                                                    "pid")),
                 pid);
    json_decref(r);
    r = osc_denied_call(&c, "c", "os/echo", NULL, NULL, "rate_limit_exceeded");
    cr_assert_eq(osc_detail_int(r, "observed"), 4);
    cr_assert_eq(osc_detail_int(r, "cap"), 3);
    json_decref(r);
    /* The sleep ran on, in its slot, to its end. */
    r = osc_await(&c, "s", 10000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    /* A changed rate starts a fresh bucket. */
    os_opts_t rate5 = {.agent = ", \"execution_limits\": {\"rate_limit\": \"5/minute\", "
                                "\"max_concurrent_calls\": 2, \"max_queued_calls\": 8}"};
    reload_to(&rate5, "limits updated in place", 2);
    for (int i = 0; i < 5; i++) {
        char cid[16];
        snprintf(cid, sizeof cid, "f%d", i);
        cr_assert_eq(echo_pid(&c, cid, NULL, 0), pid);
    }
    r = osc_denied_call(&c, "g", "os/echo", NULL, NULL, "rate_limit_exceeded");
    cr_assert_eq(osc_detail_int(r, "cap"), 5);
    json_decref(r);
    /* One instance all along; both reloads audited. */
    cr_assert_eq(tgh_file_count(S.log, "start "), 1);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"config.reloaded\"", 2, 5000), 2);
    cr_assert_eq(tgh_file_count(S.audit, "\"event\":\"agent.exited\""), 0);
    os_stop_caller(&c);
}

Test(os_reload, command_change_drains_and_restarts)
{
    os_opts_t o = {.args = ", \"--tag\", \"v1\""};
    os_start(&o);
    osc_t c, d;
    osc_open(&c, S.sock);
    osc_open(&d, S.sock);
    char tag[16];
    json_int_t pid1 = echo_pid(&c, "a", tag, sizeof tag);
    cr_assert_str_eq(tag, "v1");
    osc_call(&c, "s", "os/sleep", "{\"ms\":1500}", NULL);
    cr_assert_eq(tgh_file_wait(S.log, " sleep ", 1, 5000), 1);
    os_opts_t v2 = {.args = ", \"--tag\", \"v2\""};
    reload_to(&v2, "draining", 1);
    /* During the switch a new call waits for the new instance. */
    osc_call(&d, "e", "os/echo", "{\"text\":\"y\"}", NULL);
    json_t *rs = osc_await(&c, "s", 10000, NULL);
    cr_assert_not_null(rs, "the call in flight was not answered");
    cr_assert_str_eq(osc_str(rs, "payload", "status"), "succeeded", "%s", json_dumps(rs, 0));
    json_decref(rs);
    json_t *re = osc_await(&d, "e", 10000, NULL);
    cr_assert_not_null(re, "the call made during the switch was not answered");
    cr_assert_str_eq(osc_str(re, "payload", "status"), "succeeded", "%s", json_dumps(re, 0));
    json_t *out = json_object_get(json_object_get(re, "payload"), "output");
    cr_assert_str_eq(json_string_value(json_object_get(out, "tag")), "v2");
    cr_assert_neq(json_integer_value(json_object_get(out, "pid")), pid1);
    json_decref(re);
    /* The old instance left when its stdin closed, the new one runs the
     * new command; the same connection goes on with it. */
    cr_assert_eq(tgh_file_count(S.log, "start "), 2);
    cr_assert_eq(tgh_file_wait(S.audit, "\"event\":\"agent.started\"", 2, 5000), 2);
    cr_assert_eq(tgh_file_count(S.audit, "\"event\":\"agent.exited\""), 1);
    cr_assert_eq(tgh_file_count(S.audit, "\"event\":\"agent.killed\""), 0);
    echo_pid(&c, "b", tag, sizeof tag);
    cr_assert_str_eq(tag, "v2");
    osc_close(&c);
    osc_close(&d);
    os_stop();
}

Test(os_reload, on_demand_switch_waits_for_a_call)
{
    os_opts_t o = {.args = ", \"--tag\", \"v1\""};
    osc_t c;
    os_start_caller(&o, &c);
    echo_pid(&c, "a", NULL, 0);
    /* Now on_demand and a new command: the old instance stops, the next
     * call starts the new one. */
    os_opts_t v2 = {.args = ", \"--tag\", \"v2\"", .agent = ", \"start\": \"on_demand\""};
    reload_to(&v2, "the next call starts an instance", 1);
    cr_assert_eq(tgh_file_count(S.log, "start "), 1);
    char tag[16];
    echo_pid(&c, "b", tag, sizeof tag);
    cr_assert_str_eq(tag, "v2");
    cr_assert_eq(tgh_file_count(S.log, "start "), 2);
    os_stop_caller(&c);
}

/* A reload that shortens idempotency_window: an entry kept after it
 * expires by the new window even while an older entry (kept under the
 * old, longer window) is still live ahead of it in the cache. */
Test(os_reload, shortened_idempotency_window_expires_newer_entries)
{
    os_opts_t o = {.agent = ", \"opensentience\": {\"idempotency_window\": \"1m\"}"};
    osc_t c;
    os_start_caller(&o, &c);
    osc_call(&c, "a", "os/count", "{}", ", \"idempotency_key\": \"old\"");
    json_decref(osc_await(&c, "a", 5000, NULL));
    os_opts_t shorter = {.agent = ", \"opensentience\": {\"idempotency_window\": \"300ms\"}"};
    reload_to(&shorter, "limits updated in place", 1);
    const char *k = ", \"idempotency_key\": \"new\"";
    osc_call(&c, "b", "os/count", "{}", k);
    json_decref(osc_await(&c, "b", 5000, NULL));
    tgh_sleep_ms(700);
    /* 700 ms after the first run of "new", past its 300 ms window: the
     * tool runs again instead of a replay. */
    osc_call(&c, "c", "os/count", "{}", k);
    json_t *r = osc_await(&c, "c", 5000, NULL);
    cr_assert_not_null(r);
    cr_assert_eq(json_integer_value(json_object_get(
                     json_object_get(json_object_get(r, "payload"), "output"), "runs")),
                 3, "a result past its window was replayed: %s", json_dumps(r, 0));
    json_decref(r);
    cr_assert_eq(tgh_file_count(S.log, " count new"), 2);
    os_stop_caller(&c);
}

/* Several callers keep calls in flight while SIGHUP comes again and again
 * with alternating limits (and, every third time, a new command): every
 * call gets exactly one answer, nothing else arrives. */
Test(os_reload, every_call_answered_once_under_reloads)
{
    static const char *const lims[] = {
        ", \"execution_limits\": {\"max_concurrent_calls\": 2, \"max_queued_calls\": 6, "
        "\"rate_limit\": \"1000/second\"}, \"tools\": {\"sleep\": {\"max_concurrent_calls\": 1}}",
        ", \"execution_limits\": {\"max_concurrent_calls\": 8, \"max_queued_calls\": 40, "
        "\"rate_limit\": \"2000/second\"}"};
    os_opts_t o = {.agent = lims[1], .args = ", \"--tag\", \"t0\""};
    os_start(&o);
    enum { NC = 4, ROUNDS = 9, PER = 8 };
    osc_t c[NC];
    for (int i = 0; i < NC; i++)
        osc_open(&c[i], S.sock);
    int answered = 0, succeeded = 0, restarts = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < NC; i++)
            for (int k = 0; k < PER; k++) {
                char cid[32];
                snprintf(cid, sizeof cid, "r%d-c%d-%d", round, i, k);
                if (k % 2 == 0)
                    osc_call(&c[i], cid, "os/sleep", "{\"ms\":60}", NULL);
                else
                    osc_call(&c[i], cid, "os/echo", "{\"text\":\"x\"}", NULL);
            }
        char args[64];
        bool respawn = round % 3 == 2;
        restarts += respawn;
        snprintf(args, sizeof args, ", \"--tag\", \"t%d\"", restarts);
        os_opts_t n = {.agent = lims[round % 2], .args = args};
        os_write_cfg(S.cfg, S.sock, S.audit, S.log, &n);
        kill(S.tg.pid, SIGHUP);
        cr_assert_eq(tgh_file_wait(S.err, "config reloaded", round + 1, 10000), round + 1);
        /* Every call of this round: one result each. */
        for (int i = 0; i < NC; i++) {
            bool seen[PER] = {false};
            int got = 0;
            while (got < PER) {
                json_t *m = osc_read(&c[i], 15000);
                cr_assert_not_null(m, "round %d caller %d: %d of %d answered", round, i, got, PER);
                const char *type = osc_str(m, "type", NULL);
                if (type != NULL && strcmp(type, "agent.tool.stream") == 0) {
                    json_decref(m);
                    continue;
                }
                cr_assert_str_eq(type, "agent.tool.result", "%s", json_dumps(m, 0));
                int r = -1, ci = -1, k = -1;
                const char *cid = osc_str(m, "payload", "call_id");
                cr_assert(cid != NULL && sscanf(cid, "r%d-c%d-%d", &r, &ci, &k) == 3, "%s",
                          json_dumps(m, 0));
                cr_assert(r == round && ci == i && k >= 0 && k < PER, "stray answer %s", cid);
                cr_assert(!seen[k], "%s answered twice", cid);
                seen[k] = true;
                got++;
                const char *st = osc_str(m, "payload", "status");
                if (strcmp(st, "succeeded") == 0) {
                    succeeded++;
                } else {
                    cr_assert_str_eq(st, "failed", "%s", json_dumps(m, 0));
                    const char *code = osc_code_of(m);
                    cr_assert(code != NULL && (strcmp(code, "concurrency_limit_exceeded") == 0 ||
                                               strcmp(code, "agent_unavailable") == 0),
                              "%s", json_dumps(m, 0));
                }
                json_decref(m);
            }
            answered += got;
        }
    }
    cr_assert_eq(answered, NC * ROUNDS * PER);
    cr_assert_gt(succeeded, NC * ROUNDS * PER / 4, "only %d succeeded", succeeded);
    /* Nothing more comes: no second answer for any call. */
    for (int i = 0; i < NC; i++) {
        json_t *m = osc_read(&c[i], 300);
        cr_assert_null(m, "an extra frame: %s", m ? json_dumps(m, 0) : "");
    }
    cr_assert_eq(tgh_file_count(S.log, "start "), 1 + restarts);
    char tag[16];
    echo_pid(&c[0], "last", tag, sizeof tag);
    cr_assert_eq(atoi(tag + 1), restarts);
    for (int i = 0; i < NC; i++)
        osc_close(&c[i]);
    os_stop();
}

/* ---- shared limits (redis) ------------------------------------------------- */

static srv_t R;

/* A second `toolgate serve` beside S, on the same agent config. */
static tgh_serve_t P2;

static void shared_fini(void)
{
    tgh_cleanup();
    srv_done(&R);
}

TestSuite(os_shared, .fini = shared_fini, .timeout = 90);

/* The store object for R with a key prefix of this test's own (an
 * external TG_REDIS_URL may serve other runs at once), and <more>. */
static void store_top(char *buf, size_t cap, char tag, const char *more)
{
    int n = snprintf(buf, cap,
                     ", \"store\": {\"kind\": \"redis\", \"url\": \"%s\", \"prefix\": "
                     "\"tgos%d%c:\"%s}",
                     R.url, (int)getpid(), tag, more ? more : "");
    cr_assert(n > 0 && (size_t)n < cap);
}

/* Two callers make three calls each, interleaved, against one shared
 * 3/minute bucket: exactly three pass, whoever makes them. */
static void three_per_minute(const char *mode, char tag)
{
    srv_any(&R);
    char top[1024], agent[256], key[64];
    store_top(top, sizeof top, tag, NULL);
    snprintf(agent, sizeof agent,
             ", \"execution_limits\": {\"rate_limit\": \"3/minute\", \"rate_scope\": \"shared\", "
             "\"shared_mode\": \"%s\"}",
             mode);
    os_opts_t o = {.agent = agent, .top = top};
    os_start(&o);
    osc_t c[2];
    osc_open(&c[0], S.sock);
    osc_open(&c[1], S.sock);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++) {
            char cid[16];
            snprintf(cid, sizeof cid, "c%d-%d", i, k);
            osc_call(&c[i], cid, "os/echo", "{\"text\":\"x\"}", NULL);
        }
    int ok = 0, refused = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            char cid[16];
            snprintf(cid, sizeof cid, "c%d-%d", i, k);
            json_t *r = osc_await(&c[i], cid, 10000, NULL);
            cr_assert_not_null(r, "no answer for %s", cid);
            if (strcmp(osc_str(r, "payload", "status"), "succeeded") == 0) {
                ok++;
            } else {
                cr_assert_str_eq(osc_code_of(r), "rate_limit_exceeded", "%s", json_dumps(r, 0));
                cr_assert_str_eq(osc_detail_str(r, "scope"), "agent");
                cr_assert_eq(osc_detail_int(r, "cap"), 3);
                refused++;
            }
            json_decref(r);
        }
    cr_assert_eq(ok, 3);
    cr_assert_eq(refused, 3);
    cr_assert_eq(tgh_file_count(S.log, "call "), 3);
    /* The bucket is Redis's, and each call event names who decided. */
    snprintf(key, sizeof key, "tgos%d%c:{os}:rate", (int)getpid(), tag);
    cr_assert_eq(srv_int(&R, "EXISTS %s", key), 1);
    cr_assert_eq(tgh_file_wait(S.audit, "\"decided_by\":\"store\"", 6, 5000), 6);
    cr_assert_eq(tgh_file_count(S.audit, "\"decided_by\":\"local_fallback\""), 0);
    (void)srv_int(&R, "DEL %s", key);
    osc_close(&c[0]);
    osc_close(&c[1]);
    os_stop();
}

Test(os_shared, rate_exact_two_callers_share_three_per_minute)
{
    three_per_minute("exact", 'r');
}

Test(os_shared, rate_lease_two_callers_share_three_per_minute)
{
    three_per_minute("lease", 'l');
}

/* A tool's own shared bucket (tools.echo.rate_scope shared) beside a
 * local agent rate: two callers get two echo calls between them; other
 * tools are not held by it. */
Test(os_shared, tool_bucket_shared)
{
    srv_any(&R);
    char top[1024], key[96];
    store_top(top, sizeof top, 't', NULL);
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"100/minute\"}, "
                            "\"tools\": {\"echo\": {\"rate_limit\": \"2/minute\", "
                            "\"rate_scope\": \"shared\"}}",
                   .top = top};
    os_start(&o);
    osc_t c[2];
    osc_open(&c[0], S.sock);
    osc_open(&c[1], S.sock);
    json_decref(osc_ok_call(&c[0], "a", "os/echo", "{\"text\":\"x\"}"));
    json_decref(osc_ok_call(&c[1], "b", "os/echo", "{\"text\":\"x\"}"));
    json_t *r = osc_denied_call(&c[0], "c", "os/echo", NULL, NULL, "rate_limit_exceeded");
    cr_assert_str_eq(osc_detail_str(r, "scope"), "tool");
    cr_assert_eq(osc_detail_int(r, "cap"), 2);
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "agents.os.tools.echo.rate_limit");
    json_decref(r);
    json_decref(osc_ok_call(&c[1], "d", "os/count", NULL));
    snprintf(key, sizeof key, "tgos%dt:{os}:tool.echo.rate", (int)getpid());
    cr_assert_eq(srv_int(&R, "EXISTS %s", key), 1);
    cr_assert_eq(tgh_file_wait(S.audit, "\"decided_by\":\"store\"", 3, 5000), 3);
    (void)srv_int(&R, "DEL %s", key);
    osc_close(&c[0]);
    osc_close(&c[1]);
    os_stop();
}

/* Two toolgate serve instances on one Redis, each with the agent and a
 * caller making sleep calls, under a shared cap of 1: the agents (one
 * log for both, each line written before what it lets happen) never run
 * two calls at once, and every call runs. */
Test(os_shared, concurrency_cap_one_across_two_serves)
{
    srv_any(&R);
    char top[1024], key[64];
    store_top(top, sizeof top, 'c', NULL);
    os_opts_t o = {.agent = ", \"execution_limits\": {\"max_concurrent_calls\": 1, "
                            "\"max_queued_calls\": 8, \"concurrency_scope\": \"shared\"}",
                   .top = top};
    os_start(&o);
    cr_assert_eq(tgh_serve_prepare(&P2, "os"), 0);
    os_write_cfg(P2.cfg, P2.sock, P2.audit, S.log, &o);
    tgh_serve_start(&P2, NULL, NULL, 10000);
    cr_assert_eq(tgh_file_wait(P2.err, "agent 'os' ready", 1, 10000), 1);
    osc_t c[2];
    osc_open(&c[0], S.sock);
    osc_open(&c[1], P2.sock);
    enum { PER = 3 };
    for (int k = 0; k < PER; k++)
        for (int i = 0; i < 2; i++) {
            char cid[16];
            snprintf(cid, sizeof cid, "c%d-%d", i, k);
            osc_call(&c[i], cid, "os/sleep", "{\"ms\":250}", NULL);
        }
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < PER; k++) {
            char cid[16];
            snprintf(cid, sizeof cid, "c%d-%d", i, k);
            json_t *r = osc_await(&c[i], cid, 20000, NULL);
            cr_assert_not_null(r, "no answer for %s", cid);
            cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded", "%s", json_dumps(r, 0));
            json_decref(r);
        }
    /* Replay the agents' log: at most one sleep running at any point. */
    char *text = tgh_read_file(S.log, NULL);
    cr_assert_not_null(text);
    int running = 0, most = 0, calls = 0;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        if (strncmp(line, "call ", 5) == 0 && strstr(line, " sleep ") != NULL) {
            calls++;
            if (++running > most)
                most = running;
        } else if (strncmp(line, "done ", 5) == 0) {
            running--;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    free(text);
    cr_assert_eq(calls, 2 * PER);
    cr_assert_eq(most, 1, "two calls ran at once across the two instances");
    cr_assert_eq(running, 0);
    /* Every slot went back to Redis. */
    snprintf(key, sizeof key, "tgos%dc:{os}:slots", (int)getpid());
    uint64_t deadline = tgh_now_ms() + 5000;
    while (srv_int(&R, "ZCARD %s", key) != 0 && tgh_now_ms() < deadline)
        tgh_sleep_ms(20);
    cr_assert_eq(srv_int(&R, "ZCARD %s", key), 0);
    osc_close(&c[0]);
    osc_close(&c[1]);
    tgh_serve_stop(&P2, 20000);
    os_stop();
}

/* Nothing listens where the store should be and on_store_error is
 * closed: a shared rate, then (after a reload) a shared concurrency cap,
 * refuses with rate_store_unavailable, as an agent.tool.result, audited
 * with decided_by "closed"; nothing reaches the agent. */
Test(os_shared, store_down_closed_refuses)
{
    char top[512];
    snprintf(top, sizeof top,
             ", \"store\": {\"kind\": \"redis\", \"url\": \"redis://127.0.0.1:%d/0\", "
             "\"on_store_error\": \"closed\"}",
             tgh_free_port());
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"100/minute\", "
                            "\"rate_scope\": \"shared\"}",
                   .top = top};
    osc_t c;
    os_start_caller(&o, &c);
    json_t *r = osc_denied_call(&c, "a", "os/echo", NULL, NULL, "rate_store_unavailable");
    cr_assert_str_eq(osc_detail_str(r, "limit"), "rate");
    cr_assert_str_eq(osc_detail_str(r, "config_path"), "store.on_store_error");
    /* Worded as the MCP dialect words it: the bucket's scope and unit. */
    cr_assert_str_eq(osc_detail_str(r, "scope"), "agent");
    cr_assert_str_eq(osc_detail_str(r, "unit"), "calls/minute");
    cr_assert_not_null(strstr(osc_str(r, "error", "message"),
                              "the shared rate store is unavailable and on_store_error is closed"));
    json_decref(r);
    os_opts_t conc = {.agent = ", \"execution_limits\": {\"rate_limit\": \"100/minute\", "
                               "\"concurrency_scope\": \"shared\"}",
                      .top = top};
    reload_to(&conc, "limits updated in place", 1);
    r = osc_denied_call(&c, "b", "os/echo", NULL, NULL, "rate_store_unavailable");
    cr_assert_str_eq(osc_detail_str(r, "limit"), "concurrency");
    cr_assert_str_eq(osc_detail_str(r, "scope"), "shared");
    json_decref(r);
    cr_assert_eq(tgh_file_wait(S.audit, "\"decided_by\":\"closed\"", 2, 5000), 2);
    cr_assert_eq(tgh_file_count(S.log, "call "), 0);
    os_stop_caller(&c);
}

/* ---- config --------------------------------------------------------------- */

/* ---- one agent lifecycle in both dialects ------------------------------- */

TestSuite(os_agent, .fini = os_fini, .timeout = 60);

/* containment.min_free_memory applies to OpenSentience agents as to MCP
 * ones: an instance is not started while free memory is below the floor
 * plus the P95 of the agent's recorded peaks, and calls are refused. */
Test(os_agent, preflight_memory_refuses_the_start)
{
    os_opts_t o = {.top = ", \"containment\": {\"min_free_memory\": \"900Ti\"}",
                   .agent = ", \"restart\": {\"policy\": \"no\"}",
                   .no_wait = true};
    os_start(&o);
    cr_assert_geq(tgh_file_wait(S.audit, "\"reason\":\"preflight_memory\"", 1, 5000), 1,
                  "no agent.unhealthy preflight_memory event");
    cr_assert_geq(tgh_file_count(S.err, "containment.min_free_memory"), 1, "no pre-flight message");
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_denied_call(&c, "p", "os/echo", "{\"text\":\"x\"}", NULL, "agent_unavailable"));
    osc_close(&c);
    cr_assert_eq(tgh_file_count(S.log, "start "), 0, "the agent started anyway");
    os_stop();
}

/* An instance's end is audited with its peak memory, and the peak is kept
 * for the pre-flight of later instances, in both dialects. */
Test(os_agent, exit_records_peak_memory)
{
    char state[TGH_PATH + 16], peaks[TGH_PATH + 64];
    char tmp[TGH_PATH];
    cr_assert_eq(tgh_mkdtemp(tmp, sizeof tmp), 0);
    snprintf(state, sizeof state, "%s/state", tmp);
    snprintf(peaks, sizeof peaks, "%s/toolgate/peaks.json", state);
    cr_assert_eq(setenv("XDG_STATE_HOME", state, 1), 0);
    os_start(NULL);
    osc_t c;
    osc_open(&c, S.sock);
    json_decref(osc_ok_call(&c, "a", "os/echo", "{\"text\":\"x\"}"));
    tgh_sleep_ms(1200); /* one monitor sample at least */
    os_stop_caller(&c);
    unsetenv("XDG_STATE_HOME");
    char *text = tgh_read_file(S.audit, NULL);
    cr_assert_not_null(text);
    const char *ex = strstr(text, "\"event\":\"agent.exited\"");
    cr_assert_not_null(ex, "no agent.exited");
    const char *eol = strchr(ex, '\n');
    const char *pk = strstr(ex, "\"memory_peak_bytes\":");
    cr_assert(pk != NULL && (eol == NULL || pk < eol), "agent.exited has no peak: %.*s",
              eol ? (int)(eol - ex) : 200, ex);
    cr_assert_gt(atoll(pk + strlen("\"memory_peak_bytes\":")), 0);
    free(text);
    text = tgh_read_file(peaks, NULL);
    cr_assert(text && strstr(text, "\"os\":["), "no peak recorded in %s", peaks);
    free(text);
}

/* A call whose caller named no request_id gets one: its own call id, in
 * the frame the agent gets and in every answer toolgate makes for it. */
Test(os_agent, request_id_assigned_when_absent)
{
    os_opts_t o = {.agent = ", \"execution_limits\": {\"rate_limit\": \"1/minute\"}"};
    os_start(&o);
    osc_t c;
    osc_open(&c, S.sock);
#define NO_RID_CALL                                                                          \
    "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m-%s\",\"ts\":\"2026-01-16T12:00:00Z\","   \
    "\"payload\":{\"call_id\":\"%s\",\"tool_id\":\"os/echo\",\"input\":{\"text\":\"x\"}}}"
    char buf[512];
    snprintf(buf, sizeof buf, NO_RID_CALL, "n1", "n1");
    osc_frame(&c, buf);
    json_t *r = osc_await(&c, "n1", 10000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    char line[128];
    cr_assert_eq(tgh_log_field(S.log, "request_id ", 0, line, sizeof line), 0);
    cr_assert(strncmp(line, "tg-", 3) == 0, "the agent got request_id %s", line);
    snprintf(buf, sizeof buf, NO_RID_CALL, "n2", "n2");
    osc_frame(&c, buf);
    r = osc_await(&c, "n2", 10000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(osc_code_of(r), "rate_limit_exceeded");
    const char *rid = osc_str(r, "request_id", NULL);
    cr_assert(rid != NULL && strncmp(rid, "tg-", 3) == 0, "denial without a request_id");
    cr_assert_str_eq(osc_detail_str(r, "request_id"), rid);
    json_decref(r);
    os_stop_caller(&c);
}
