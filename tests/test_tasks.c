/* MCP tasks (2025-11-25) through toolgate (issue 20 item 3): a
 * task-augmented tools/call is a call still running after its
 * CreateTaskResult. It holds its concurrency slot until a terminal status,
 * its deadline is the call's (ttl cut to it; tasks/cancel to the agent and
 * the timeout denial to the caller at the deadline), audit ends the call
 * when the task ends, and tasks/... requests must name the caller's own
 * task. Wrap mode against the fixture agent's tasks (tg_fixture_agent.c). */
#include <criterion/criterion.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_wrap_t T;

static void tk_fini(void)
{
    tgh_cleanup();
}

TestSuite(tasks, .fini = tk_fini, .timeout = 30);

/* One concurrency slot and no queue: a call finds the slot taken or not. */
static const char *const ONE_SLOT[] = {"--limit", "max_concurrent_calls=1", "--limit",
                                       "max_queued_calls=0", NULL};

static void tk_start(const char *const *tg_args)
{
    int rc = tgh_wrap_start(&T, tg_args, NULL, NULL);
    cr_assert_eq(rc, 0, "cannot start %s: %s", TG_BIN, strerror(-rc));
    mcp_init_ok(&T.tg, 5000);
}

/* A task-augmented sleep of <ms> (id <id>), with params.task.ttl <ttl>
 * (<0: none) and notifications/tasks/status at its end when <notify>. */
static void tk_task_call(int id, int ms, long ttl, bool notify)
{
    char task[48];
    if (ttl >= 0)
        snprintf(task, sizeof task, "{\"ttl\":%ld}", ttl);
    else
        snprintf(task, sizeof task, "{}");
    cr_assert_eq(tgh_sendf(&T.tg,
                           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                           "\"name\":\"sleep\",\"arguments\":{\"ms\":%d,\"notify\":%s},"
                           "\"task\":%s}}",
                           id, ms, notify ? "true" : "false", task),
                 0);
}

/* The CreateTaskResult of call <id>: its taskId (static buffer). */
static const char *tk_created(int id)
{
    static char tid[64];
    json_t *r = mcp_expect_int(&T.tg, id, 5000);
    const char *s =
        json_string_value(json_object_get(json_object_get(json_object_get(r, "result"), "task"),
                                          "taskId"));
    cr_assert_not_null(s, "no CreateTaskResult: %s", mcp_dump(r));
    snprintf(tid, sizeof tid, "%s", s);
    json_decref(r);
    return tid;
}

static void tk_task_req(int id, const char *method, const char *tid)
{
    cr_assert_eq(tgh_sendf(&T.tg,
                           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{"
                           "\"taskId\":\"%s\"}}",
                           id, method, tid),
                 0);
}

/* The answer to request <id> is a task in status <status>. */
static void tk_expect_status(int id, const char *status)
{
    json_t *r = mcp_expect_int(&T.tg, id, 5000);
    const char *st = json_string_value(json_object_get(json_object_get(r, "result"), "status"));
    cr_assert(st != NULL && strcmp(st, status) == 0, "want status %s: %s", status, mcp_dump(r));
    json_decref(r);
}

/* The duration_ms of the first audit event holding <needle>, or -1. */
static long tk_audit_duration(const char *needle)
{
    if (tgh_file_wait(T.audit, needle, 1, 5000) < 1)
        return -1;
    FILE *f = fopen(T.audit, "r");
    cr_assert_not_null(f);
    char line[4096];
    long d = -1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, needle) == NULL)
            continue;
        json_t *ev = json_loads(line, 0, NULL);
        d = (long)json_integer_value(json_object_get(ev, "duration_ms"));
        json_decref(ev);
        break;
    }
    fclose(f);
    return d;
}

Test(tasks, a_task_holds_its_slot_until_it_ends)
{
    tk_start(ONE_SLOT);
    tk_task_call(1, 1500, -1, true);
    const char *tid = tk_created(1);
    /* the task still runs: its slot is taken */
    mcp_call(&T.tg, 2, "echo", "{\"text\":\"x\"}");
    json_t *r = mcp_expect_int(&T.tg, 2, 5000);
    mcp_assert_denied(r, "concurrency_limit_exceeded");
    json_decref(r);
    /* it ends (notifications/tasks/status completed): the slot is back */
    json_t *others = json_array();
    uint64_t deadline = tgh_now_ms() + 8000;
    bool ended = false;
    while (!ended && tgh_now_ms() < deadline) {
        json_t *m = tgh_read_json(&T.tg, 500, NULL);
        const char *st = json_string_value(
            json_object_get(json_object_get(m, "params"), "status"));
        ended = st != NULL && strcmp(st, "completed") == 0;
        json_decref(m);
    }
    json_decref(others);
    cr_assert(ended, "no notifications/tasks/status completed reached the caller");
    mcp_call_text(&T.tg, 3, "echo", "{\"text\":\"after\"}", "after", 5000);
    /* its result after the end: this session's task, the agent answers */
    tk_task_req(4, "tasks/result", tid);
    r = mcp_expect_int(&T.tg, 4, 5000);
    cr_assert_str_eq(mcp_text_of(r), "slept 1500");
    json_decref(r);
    /* audit ended the call with the task, its real duration */
    long d = tk_audit_duration("\"stage\":\"task\"");
    cr_assert_geq(d, 1400, "the task's call was audited as lasting %ld ms", d);
    /* (audit is written asynchronously: waited for, then counted) */
    cr_assert_eq(tgh_file_wait(T.audit, "\"event\":\"call.completed\"", 2, 5000), 2,
                 "one call.completed for the task, one for the echo");
}

Test(tasks, tasks_result_ends_the_task)
{
    tk_start(ONE_SLOT);
    tk_task_call(1, 600, -1, false);
    const char *tid = tk_created(1);
    tk_task_req(2, "tasks/get", tid);
    tk_expect_status(2, "working");
    tk_task_req(3, "tasks/result", tid); /* blocks until the end */
    json_t *r = mcp_expect_int(&T.tg, 3, 5000);
    cr_assert_str_eq(mcp_text_of(r), "slept 600");
    json_decref(r);
    mcp_call_text(&T.tg, 4, "echo", "{\"text\":\"free\"}", "free", 5000);
}

Test(tasks, the_deadline_cuts_ttl_cancels_and_fails_the_task)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=1s", "--limit",
                                "max_concurrent_calls=1", "--limit", "max_queued_calls=0", NULL};
    tk_start(args);
    tk_task_call(1, 5000, 60000, false);
    const char *tid = tk_created(1);
    /* the ttl the agent saw is the call's deadline */
    cr_assert_eq(tgh_log_wait(T.log, "task \"task-0\" ttl 1000", 1, 3000), 1,
                 "the agent saw a ttl over the call's deadline");
    tk_task_req(2, "tasks/result", tid); /* waiting at the deadline */
    json_t *r = mcp_expect_int(&T.tg, 2, 5000);
    mcp_assert_denied(r, "timeout");
    json_decref(r);
    cr_assert_eq(tgh_log_wait(T.log, "task_cancel \"task-0\"", 1, 3000), 1,
                 "toolgate did not send tasks/cancel to the agent");
    /* later requests about it get the same answer */
    tk_task_req(3, "tasks/get", tid);
    r = mcp_expect_int(&T.tg, 3, 5000);
    mcp_assert_denied(r, "timeout");
    json_decref(r);
    /* the slot is free once the agent answered tasks/cancel (its answer
     * may still be on its way: asked again until then) */
    json_t *ok = NULL;
    for (int i = 0; i < 50 && ok == NULL; i++) {
        mcp_call(&T.tg, 100 + i, "echo", "{\"text\":\"free\"}");
        r = mcp_expect_int(&T.tg, 100 + i, 5000);
        if (json_object_get(r, "result") != NULL) {
            ok = r;
            break;
        }
        cr_assert_str_eq(mcp_code_of(r), "concurrency_limit_exceeded", "%s", mcp_dump(r));
        json_decref(r);
        tgh_sleep_ms(100);
    }
    cr_assert_not_null(ok, "the slot of the timed-out task was not released");
    json_decref(ok);
    long d = tk_audit_duration("\"event\":\"call.timeout\"");
    cr_assert(d >= 900 && d < 4000, "the task's call was audited as lasting %ld ms", d);
    cr_assert_eq(tgh_file_wait(T.audit, "\"event\":\"call.completed\"", 1, 5000), 1,
                 "only the echo");
}

Test(tasks, tasks_requests_must_name_the_callers_own_task)
{
    tk_start(NULL);
    tk_task_req(1, "tasks/get", "task-7");
    json_t *r = mcp_expect_int(&T.tg, 1, 5000);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602,
                 "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_geq(tgh_file_wait(T.audit, "task_not_owned", 1, 3000), 1);
    cr_assert_eq(tgh_log_count(T.log, "tasks/get"), 0, "the request reached the agent");
    /* a task of its own is served */
    tk_task_call(2, 100, -1, false);
    const char *tid = tk_created(2);
    tk_task_req(3, "tasks/get", tid);
    r = mcp_expect_int(&T.tg, 3, 5000);
    cr_assert_not_null(json_object_get(r, "result"), "%s", mcp_dump(r));
    json_decref(r);
}

Test(tasks, tasks_cancel_ends_the_task_as_cancelled)
{
    tk_start(ONE_SLOT);
    tk_task_call(1, 5000, -1, false);
    const char *tid = tk_created(1);
    tk_task_req(2, "tasks/cancel", tid);
    tk_expect_status(2, "cancelled");
    mcp_call_text(&T.tg, 3, "echo", "{\"text\":\"free\"}", "free", 5000);
    cr_assert_geq(tgh_file_wait(T.audit, "\"event\":\"call.cancelled\"", 1, 3000), 1);
}
