/* Frame judging end to end (issue 12 items 20-23): what toolgate does with
 * invalid, over-deep, over-cap, unterminated and misaddressed frames, both
 * ways, in wrap mode against the fixture agent. */
#include <criterion/criterion.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_wrap_t J;

static void jd_fini(void)
{
    tgh_cleanup();
}

TestSuite(judge, .fini = jd_fini, .timeout = 20);

static void jd_send(const char *line)
{
    int rc = tgh_sendf(&J.tg, "%s", line);
    cr_assert_eq(rc, 0, "sending a line: %s", strerror(-rc));
}

static void jd_start(const char *const *tg_args)
{
    int rc = tgh_wrap_start(&J, tg_args, NULL, NULL);
    cr_assert_eq(rc, 0, "cannot start %s: %s", TG_BIN, strerror(-rc));
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
            "\"clientInfo\":{\"name\":\"tg-judge\",\"version\":\"1\"}}}");
    json_t *id = json_string("init");
    json_t *r = mcp_expect(&J.tg, id, 5000, NULL);
    json_decref(id);
    cr_assert_not_null(json_object_get(r, "result"), "initialize failed");
    json_decref(r);
    jd_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* The next message toolgate writes; fails after <ms>. */
static json_t *jd_next(int ms, const char *why)
{
    json_t *r = tgh_read_json(&J.tg, ms, NULL);
    cr_assert_not_null(r, "%s", why);
    return r;
}

static json_int_t jd_code(const json_t *r)
{
    return json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

/* ---- item 20: nested values are validated both ways ---- */

Test(judge, agent_answer_invalid_inside_is_dropped)
{
    jd_start(NULL);
    mcp_call(&J.tg, 3, "raw",
             "{\"lines\":[\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":$ID,\\\"result\\\":"
             "{\\\"type\\\":\\\"t\\\":\\\"ok\\\"}}\",\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":$ID,"
             "\\\"result\\\":{\\\"content\\\":[{\\\"type\\\":\\\"text\\\",\\\"text\\\":"
             "\\\"good\\\"}]}}\"]}");
    json_t *r = mcp_expect_int(&J.tg, 3, 5000);
    const char *text = mcp_text_of(r);
    cr_assert(text != NULL && strcmp(text, "good") == 0, "the invalid answer was relayed");
    json_decref(r);
    cr_assert_geq(tgh_file_wait(J.audit, "\"agent.invalid_frame\"", 1, 3000), 1,
                  "the invalid frame was not audited");
}

Test(judge, caller_invalid_arguments_refused)
{
    jd_start(NULL);
    const char *bad[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"text\":01}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"text\":\"\xff\xfe\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"text\":\"a\",,}}}",
    };
    /* issue 20 item 2: the id was read before the fault, so it is echoed
     * (a null id leaves the client waiting for its own timeout) */
    for (size_t i = 0; i < 3; i++) {
        jd_send(bad[i]);
        json_t *r = jd_next(3000, "no answer to an invalid frame");
        cr_assert_eq(jd_code(r), -32700, "case %zu", i);
        cr_assert_eq(json_integer_value(json_object_get(r, "id")), 4 + (json_int_t)i,
                     "case %zu: the id read before the fault was not echoed", i);
        json_decref(r);
    }
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":5}");
    json_t *r = jd_next(3000, "no answer to a method of the wrong type");
    cr_assert_eq(jd_code(r), -32600);
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 9);
    json_decref(r);
    /* a response is never answered with its own id */
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"a\":01}}");
    r = jd_next(3000, "no answer to an invalid response");
    cr_assert_eq(jd_code(r), -32700);
    cr_assert(json_is_null(json_object_get(r, "id")));
    json_decref(r);
    mcp_call_text(&J.tg, 7, "echo", "{\"text\":\"on\"}", "on", 3000);
    cr_assert_eq(tgh_log_count(J.log, "call "), 1, "an invalid frame reached the agent");
}

/* ---- item 21 ---- */

/* issue 20 item 1: the id after the cap (the TypeScript SDK writes it
 * last) is read as the frame streams past, never buffered */
Test(judge, over_cap_id_after_cap_answered_with_id)
{
    const char *const args[] = {"--limit", "max_frame_bytes=2Ki", NULL};
    jd_start(args);
    char line[4096];
    int n = snprintf(line, sizeof line,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                     "\"arguments\":{\"text\":\"");
    memset(line + n, 'x', 3000);
    n += 3000;
    n += snprintf(line + n, sizeof line - (size_t)n, "\"}},\"id\":9}");
    jd_send(line);
    json_t *r = jd_next(3000, "no answer to an over-cap frame whose id is past the cap");
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 9, "the id past the cap was lost");
    mcp_assert_denial(r, -32063, "frame_too_large");
    json_decref(r);
    cr_assert_geq(tgh_file_wait(J.audit, "\"call_id\":\"9\"", 1, 3000), 1,
                  "the denial's audit event does not name the call");
    /* an id that cannot be read (repeated) is answered with null */
    n = snprintf(line, sizeof line, "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"a\":\"");
    memset(line + n, 'y', 3000);
    n += 3000;
    snprintf(line + n, sizeof line - (size_t)n, "\"},\"id\":2}");
    jd_send(line);
    r = jd_next(3000, "no answer to an over-cap frame with two ids");
    cr_assert(json_is_null(json_object_get(r, "id")));
    mcp_assert_denial(r, -32063, "frame_too_large");
    json_decref(r);
    mcp_call_text(&J.tg, 10, "echo", "{\"text\":\"next\"}", "next", 3000);
}

Test(judge, last_line_without_newline_is_answered)
{
    jd_start(NULL);
    const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":"
                        "{\"name\":\"echo\",\"arguments\":{\"text\":\"last\"}}}";
    cr_assert_eq(tgh_send(&J.tg, call, sizeof call - 1, 3000), 0);
    tgh_close_stdin(&J.tg);
    json_t *r = mcp_expect_int(&J.tg, 11, 5000);
    const char *text = mcp_text_of(r);
    cr_assert(text != NULL && strcmp(text, "last") == 0);
    json_decref(r);
}

Test(judge, unterminated_garbage_before_eof_is_answered)
{
    jd_start(NULL);
    cr_assert_eq(tgh_send(&J.tg, "{\"a\" 1}", 7, 3000), 0);
    tgh_close_stdin(&J.tg);
    json_t *r = jd_next(5000, "no answer to the last, unterminated line");
    cr_assert_eq(jd_code(r), -32700);
    json_decref(r);
}

Test(judge, too_deep_keeps_id_and_says_so)
{
    jd_start(NULL);
    char line[1024];
    int n = snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\","
                                        "\"params\":{\"a\":");
    for (int i = 0; i < 200; i++)
        line[n++] = '[';
    for (int i = 0; i < 200; i++)
        line[n++] = ']';
    memcpy(line + n, "}}", 3);
    jd_send(line);
    json_t *r = jd_next(3000, "no answer to an over-deep frame");
    cr_assert_eq(jd_code(r), -32600);
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 12, "the id was read");
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg != NULL && strstr(msg, "nested deeper") != NULL, "%s", msg ? msg : "");
    json_decref(r);
}

Test(judge, params_of_wrong_type_answered_with_id)
{
    jd_start(NULL);
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"ping\",\"params\":5}");
    json_t *r = jd_next(3000, "no answer");
    cr_assert_eq(jd_code(r), -32600);
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 13);
    json_decref(r);
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":\"x\"}");
    r = jd_next(3000, "no answer");
    cr_assert_eq(jd_code(r), -32600);
    cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "s");
    json_decref(r);
}

Test(judge, agent_array_is_not_relayed)
{
    jd_start(NULL);
    mcp_call(&J.tg, 14, "raw",
             "{\"lines\":[\"[1,2,3]\",\"[{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":1,"
             "\\\"result\\\":{}}]\",\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":$ID,"
             "\\\"result\\\":{\\\"content\\\":[{\\\"type\\\":\\\"text\\\",\\\"text\\\":"
             "\\\"after\\\"}]}}\"]}");
    json_t *r = jd_next(5000, "no answer");
    cr_assert(json_is_object(r), "an agent array reached the caller");
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 14);
    json_decref(r);
    cr_assert_geq(tgh_file_wait(J.audit, "\"agent.invalid_frame\"", 2, 3000), 2,
                  "the arrays were not audited");
}

/* ---- item 22: cancels map through the call table ---- */

Test(judge, cancel_of_no_live_call_is_dropped)
{
    jd_start(NULL);
    mcp_call(&J.tg, 20, "sleep", "{\"ms\":400}");
    cr_assert_geq(tgh_log_wait(J.log, "call ", 1, 3000), 1);
    /* agent-side ids are small integers and "tg-" strings; none is the
     * caller's live call (20) */
    for (int i = 0; i < 8; i++) {
        char line[160];
        snprintf(line, sizeof line,
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                 "{\"requestId\":%d}}",
                 i);
        jd_send(line);
    }
    jd_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
            "{\"requestId\":\"tg-1\"}}");
    json_t *r = mcp_expect_int(&J.tg, 20, 5000);
    cr_assert_not_null(json_object_get(r, "result"), "the live call was cancelled");
    json_decref(r);
    cr_assert_eq(tgh_log_count(J.log, "cancelled "), 0, "a cancel reached the agent");
    cr_assert_geq(tgh_file_wait(J.audit, "cancel_not_live", 9, 3000), 9);
    /* a cancel of the live call still goes through, mapped */
    mcp_call(&J.tg, 21, "sleep", "{\"ms\":3000}");
    cr_assert_geq(tgh_log_wait(J.log, "call ", 2, 3000), 2);
    jd_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
            "{\"requestId\":21}}");
    cr_assert_geq(tgh_log_wait(J.log, "cancelled ", 1, 3000), 1);
}

/* ---- item 23: over-cap replies to pass-through requests ---- */

Test(judge, over_cap_reply_to_tools_list_answered)
{
    const char *const args[] = {"--limit", "max_frame_bytes=2Ki", NULL};
    jd_start(args);
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"tools/list\",\"params\":{\"pad\":7700}}");
    json_t *r = mcp_expect_int(&J.tg, 30, 5000);
    mcp_assert_denial(r, -32063, "frame_too_large");
    json_decref(r);
    /* the id after the result, past the cap: the only request waiting */
    jd_send("{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"tools/list\",\"params\":"
            "{\"pad\":7700,\"id_last\":true}}");
    r = mcp_expect_int(&J.tg, 31, 5000);
    mcp_assert_denial(r, -32063, "frame_too_large");
    json_decref(r);
    mcp_call_text(&J.tg, 32, "echo", "{\"text\":\"next\"}", "next", 3000);
}
