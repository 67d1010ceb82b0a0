/* OpenSentience envelope scanner: every type toolgate reads, the envelope
 * rules, duplicates, v, truncation, tool ids, the tools iterator, the
 * session token check, and a differential run against jansson over
 * generated and mutated frames (the oracle is tests/os_oracle.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "json_gen.h"
#include "os_oracle.h"
#include "router/codec/osenv.h"

static tg_os_env_t env;

static int scan(const char *s)
{
    return tg_os_scan(s, strlen(s), &env);
}

/* An envelope around <type> and <payload> (a JSON object text). */
static const char *frame(const char *type, const char *payload)
{
    static char b[4][2048];
    static int k;
    char *o = b[k++ & 3];
    int n = snprintf(o, 2048, "{\"v\":1,\"type\":\"%s\",\"id\":\"m-1\",\"ts\":\"2026-01-16T12:00:00Z\",\"payload\":%s}",
                     type, payload);
    cr_assert(n > 0 && n < 2048, "test frame too long");
    return o;
}

static void assert_valid(const char *s)
{
    cr_assert_eq(scan(s), 0, "should be valid: %s", s);
    const char *why = os_oracle_check(s, strlen(s));
    cr_assert_null(why, "%s: %s", why, s);
}

static void assert_invalid(const char *s)
{
    cr_assert_eq(scan(s), -1, "should be invalid: %s", s);
    cr_assert_eq(env.type, TG_OS_OTHER);
    cr_assert_eq(env.payload.type, TG_J_NONE, "nothing reported");
    cr_assert_eq(env.call_id.type, TG_J_NONE);
    const char *why = os_oracle_check(s, strlen(s));
    cr_assert_null(why, "%s: %s", why, s);
}

Test(osenv, envelope_fields)
{
    const char *s = " {\"v\":1,\"type\":\"agent.heartbeat\",\"id\":\"m-7\",\"ts\":\"2026-01-16T12:00:00Z\","
                    "\"request_id\":\"r-1\",\"correlation_id\":\"chat:1\",\"causation_id\":\"c-9\","
                    "\"in_reply_to\":\"m-6\",\"error\":{\"code\":\"x\"},\"actor\":{\"type\":\"agent\"},"
                    "\"payload\":{\"session_id\":\"s\",\"uptime_ms\":5,\"inflight_calls\":0,\"status\":\"ok\"}}\n ";
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_HEARTBEAT);
    cr_assert_str_eq(span_text(s, env.type_s), "\"agent.heartbeat\"");
    cr_assert_str_eq(span_text(s, env.id), "\"m-7\"");
    cr_assert_str_eq(span_text(s, env.ts), "\"2026-01-16T12:00:00Z\"");
    cr_assert_str_eq(span_text(s, env.request_id), "\"r-1\"");
    cr_assert_str_eq(span_text(s, env.correlation_id), "\"chat:1\"");
    cr_assert_str_eq(span_text(s, env.causation_id), "\"c-9\"");
    cr_assert_str_eq(span_text(s, env.in_reply_to), "\"m-6\"");
    cr_assert_str_eq(span_text(s, env.error), "{\"code\":\"x\"}");
    cr_assert_str_eq(span_text(s, env.payload),
                     "{\"session_id\":\"s\",\"uptime_ms\":5,\"inflight_calls\":0,\"status\":\"ok\"}");
    /* a heartbeat's "status" is not agent.tool.result's */
    cr_assert_eq(env.status, TG_OS_ST_NONE);
    cr_assert_eq(env.call_id.type, TG_J_NONE);

    /* optional members written as null are absent */
    s = "{\"v\":1,\"type\":\"x.y\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"request_id\":null,"
        "\"correlation_id\":null,\"causation_id\":null,\"in_reply_to\":null,\"error\":null}";
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_OTHER);
    cr_assert_str_eq(span_text(s, env.type_s), "\"x.y\"");
    cr_assert_eq(env.request_id.type, TG_J_NONE);
    cr_assert_eq(env.correlation_id.type, TG_J_NONE);
    cr_assert_eq(env.causation_id.type, TG_J_NONE);
    cr_assert_eq(env.in_reply_to.type, TG_J_NONE);
    cr_assert_eq(env.error.type, TG_J_NONE);
}

Test(osenv, agent_hello)
{
    const char *s = frame("agent.hello",
                          "{\"session_token\":\"tok-123\",\"agent_id\":\"com.example.search\","
                          "\"agent_version\":\"1.0.0\",\"protocol\":{\"supported_versions\":[2,1],"
                          "\"capabilities\":[\"tools\"]}}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_HELLO);
    cr_assert_str_eq(tg_os_type_name(env.type), "agent.hello");
    cr_assert_str_eq(span_text(s, env.session_token), "\"tok-123\"");
    cr_assert_str_eq(span_text(s, env.agent_id), "\"com.example.search\"");
    cr_assert_str_eq(span_text(s, env.versions), "[2,1]");
    cr_assert_eq(tg_os_supports_v1(s, env.versions), 1);
    cr_assert(tg_os_token_ok(s, env.session_token, "tok-123", 7));
    cr_assert_not(tg_os_token_ok(s, env.session_token, "tok-124", 7));
    cr_assert_not(tg_os_token_ok(s, env.session_token, "tok-12", 6));
    cr_assert_not(tg_os_token_ok(s, env.agent_id, "tok-123", 7));

    s = frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[2,\"1\",1.0]}}");
    assert_valid(s);
    cr_assert_eq(tg_os_supports_v1(s, env.versions), 0, "only the integer 1 counts");
    s = frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[]}}");
    assert_valid(s);
    cr_assert_eq(tg_os_supports_v1(s, env.versions), 0);

    /* required members, with their types */
    assert_invalid(frame("agent.hello", "{\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\"}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":1,\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":null,\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":[],\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":[1]}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":1}}"));
    /* duplicates of what toolgate reads */
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"session_token\":\"u\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"agent_id\":\"b\",\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]},\"protocol\":{\"supported_versions\":[1]}}"));
    assert_invalid(frame("agent.hello", "{\"session_token\":\"t\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1],\"supported_versions\":[2]}}"));
}

Test(osenv, session_token_check)
{
    /* escapes are decoded: the agent meant "abc" */
    const char *s = frame("agent.hello", "{\"session_token\":\"\\u0061b\\u0063\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}");
    assert_valid(s);
    cr_assert(tg_os_token_ok(s, env.session_token, "abc", 3));
    /* a token past the bound is refused without being compared */
    char big[2048];
    char tok[TG_OS_TOKEN_MAX + 2];
    memset(tok, 'k', sizeof tok - 1);
    tok[sizeof tok - 1] = 0;
    snprintf(big, sizeof big, "{\"session_token\":\"%s\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}", tok);
    s = frame("agent.hello", big);
    assert_valid(s);
    cr_assert_not(tg_os_token_ok(s, env.session_token, tok, strlen(tok)));
    tok[TG_OS_TOKEN_MAX] = 0; /* exactly the bound: compared */
    snprintf(big, sizeof big, "{\"session_token\":\"%s\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}", tok);
    s = frame("agent.hello", big);
    assert_valid(s);
    cr_assert(tg_os_token_ok(s, env.session_token, tok, TG_OS_TOKEN_MAX));
    /* a NUL escape never matches */
    s = frame("agent.hello", "{\"session_token\":\"ab\\u0000\",\"agent_id\":\"a\",\"protocol\":{\"supported_versions\":[1]}}");
    assert_valid(s);
    cr_assert_not(tg_os_token_ok(s, env.session_token, "ab", 2));
    cr_assert_not(tg_os_token_ok(s, env.session_token, "ab\0", 3));
}

Test(osenv, ct_equal)
{
    cr_assert(tg_ct_equal("abcd", 4, "abcd", 4));
    cr_assert_not(tg_ct_equal("abce", 4, "abcd", 4));
    cr_assert_not(tg_ct_equal("xbcd", 4, "abcd", 4));
    cr_assert_not(tg_ct_equal("abc", 3, "abcd", 4));
    cr_assert_not(tg_ct_equal("abcde", 5, "abcd", 4));
    cr_assert_not(tg_ct_equal("abcd\0", 5, "abcd", 4), "a longer input is never equal");
    cr_assert(tg_ct_equal("", 0, "", 0));
    cr_assert(tg_ct_equal(NULL, 0, "", 0));
    cr_assert_not(tg_ct_equal(NULL, 0, "a", 1));
    cr_assert_not(tg_ct_equal("a", 1, "", 0));
    unsigned char a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = b[i] = (unsigned char)(i * 37);
    cr_assert(tg_ct_equal(a, 32, b, 32));
    for (int i = 0; i < 32; i++) {
        b[i] ^= 0x80;
        cr_assert_not(tg_ct_equal(a, 32, b, 32), "byte %d", i);
        b[i] ^= 0x80;
    }
}

Test(osenv, tools_register_and_iterator)
{
    const char *s = frame("agent.tools.register",
                          "{\"tools\":[{\"tool_id\":\"a/web\",\"name\":\"web\",\"input_schema\":{}},"
                          "42,{\"name\":\"x\"},{\"tool_id\":7},{\"tool_id\":\"a\\/b\"},{\"tool_id\":null}],"
                          "\"replace\":true}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_TOOLS_REGISTER);
    cr_assert_eq(env.tools.type, TG_J_ARRAY);
    tg_os_tools_iter_t it;
    tg_jspan_t tid;
    const char *want[] = {"\"a/web\"", "<none>", "<none>", "<none>", "\"a\\/b\"", "<none>"};
    tg_os_tools_begin(&it, s, env.tools);
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(tg_os_tools_next(&it, &tid), 1);
        cr_assert_str_eq(span_text(s, tid), want[i], "element %zu", i);
    }
    cr_assert_eq(tg_os_tools_next(&it, &tid), 0);
    cr_assert_eq(tg_os_tools_next(&it, &tid), 0, "sticky end");

    /* a duplicate tool_id makes that element unusable, not the frame */
    s = frame("agent.tools.register", "{\"tools\":[{\"tool_id\":\"a/x\",\"tool_id\":\"a/y\"},{\"tool_id\":\"a/z\"}]}");
    cr_assert_eq(scan(s), 0);
    tg_os_tools_begin(&it, s, env.tools);
    cr_assert_eq(tg_os_tools_next(&it, &tid), 1);
    cr_assert_eq(tid.type, TG_J_NONE);
    cr_assert_eq(tg_os_tools_next(&it, &tid), 1);
    cr_assert_str_eq(span_text(s, tid), "\"a/z\"");
    /* a bad number inside a nested value: the frame is refused whole
     * (issue 12 item 20: nested values are validated, not only skipped) */
    s = frame("agent.tools.register", "{\"tools\":[{\"tool_id\":\"a/x\",\"n\":01}]}");
    cr_assert_eq(scan(s), -1, "nested values are validated");
    assert_valid(frame("agent.tools.register", "{\"tools\":[]}"));
    assert_invalid(frame("agent.tools.register", "{}"));
    assert_invalid(frame("agent.tools.register", "{\"tools\":{}}"));
    assert_invalid(frame("agent.tools.register", "{\"tools\":null}"));
    assert_invalid(frame("agent.tools.register", "{\"tools\":[],\"tools\":[]}"));
}

Test(osenv, core_tool_call)
{
    const char *s = frame("core.tool.call",
                          "{\"call_id\":\"c-1\",\"tool_id\":\"search/web\",\"input\":{\"q\":\"x\",\"n\":[1,{}]},"
                          "\"timeout_ms\":30000,\"idempotency_key\":\"k-1\",\"caller\":{\"type\":\"human\"}}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_CORE_TOOL_CALL);
    cr_assert_str_eq(span_text(s, env.call_id), "\"c-1\"");
    cr_assert_str_eq(span_text(s, env.tool_id), "\"search/web\"");
    cr_assert_str_eq(span_text(s, env.input), "{\"q\":\"x\",\"n\":[1,{}]}");
    cr_assert(env.has_timeout);
    cr_assert_eq(env.timeout_ms, 30000);
    cr_assert_str_eq(span_text(s, env.timeout_at), "30000", "where the deadline is written");
    cr_assert_eq(env.request_id_at.type, TG_J_NONE);
    cr_assert_str_eq(span_text(s, env.idempotency_key), "\"k-1\"");
    char tid[TG_OS_TOOL_ID_MAX + 1];
    size_t n, alen;
    cr_assert_eq(tg_os_tool_id_parse(s, env.tool_id, tid, sizeof tid, &n, &alen), 0);
    cr_assert_eq(n, 10);
    cr_assert_eq(alen, 6);
    cr_assert_str_eq(tid, "search/web");

    /* optional members absent or null */
    s = frame("core.tool.call", "{\"input\":{},\"tool_id\":\"a/b\",\"call_id\":\"c\",\"timeout_ms\":null,\"idempotency_key\":null}");
    assert_valid(s);
    cr_assert_not(env.has_timeout);
    cr_assert_eq(env.timeout_at.type, TG_J_NULL, "a null timeout_ms is where the deadline goes");
    cr_assert_eq(env.idempotency_key.type, TG_J_NONE);
    /* the payload before the type: read from its span afterwards, alike */
    s = "{\"payload\":{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":7},"
        "\"request_id\":null,\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m\",\"ts\":\"t\"}";
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_CORE_TOOL_CALL);
    cr_assert_eq(env.timeout_ms, 7);
    cr_assert_str_eq(span_text(s, env.timeout_at), "7");
    cr_assert_eq(env.request_id.type, TG_J_NONE);
    cr_assert_str_eq(span_text(s, env.request_id_at), "null");
    s = frame("core.tool.call", "{\"input\":{},\"tool_id\":\"a/b\",\"call_id\":\"c\",\"timeout_ms\":0}");
    assert_valid(s);
    cr_assert(env.has_timeout);
    cr_assert_eq(env.timeout_ms, 0);
    s = frame("core.tool.call", "{\"input\":{},\"tool_id\":\"a/b\",\"call_id\":\"c\",\"timeout_ms\":-0}");
    assert_valid(s);
    cr_assert_eq(env.timeout_ms, 0, "-0 is 0, as jansson reads it");
    /* a tool id that does not split is still a valid frame: the shell refuses the call */
    s = frame("core.tool.call", "{\"input\":{},\"tool_id\":\"nodelimiter\",\"call_id\":\"c\"}");
    assert_valid(s);
    cr_assert_eq(tg_os_tool_id_parse(s, env.tool_id, tid, sizeof tid, &n, &alen), -1);

    const char *bad[] = {
        "{\"tool_id\":\"a/b\",\"input\":{}}",
        "{\"call_id\":\"c\",\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\"}",
        "{\"call_id\":7,\"tool_id\":\"a/b\",\"input\":{}}",
        "{\"call_id\":null,\"tool_id\":\"a/b\",\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":[\"a/b\"],\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":[]}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":\"{}\"}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":-1}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":1.5}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":1e3}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":\"100\"}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":99999999999999999999999}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"idempotency_key\":5}",
        /* duplicates */
        "{\"call_id\":\"c\",\"call_id\":\"d\",\"tool_id\":\"a/b\",\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"tool_id\":\"a/c\",\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"input\":{}}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":1,\"timeout_ms\":2}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"timeout_ms\":null,\"timeout_ms\":2}",
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{},\"idempotency_key\":\"x\",\"idempotency_key\":\"y\"}",
        /* an escaped duplicate is the same key */
        "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"\\u0074ool_id\":\"a/c\",\"input\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_invalid(frame("core.tool.call", bad[i]));
    /* duplicates of keys toolgate does not read are fine */
    assert_valid(frame("core.tool.call", "{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{\"x\":1,\"x\":2},\"ctx\":1,\"ctx\":2}"));
}

Test(osenv, stream_result_cancel)
{
    const char *s = frame("agent.tool.stream", "{\"call_id\":\"tg-5\",\"seq\":1,\"channel\":\"stdout\",\"data\":{\"text\":\"hi\"}}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_TOOL_STREAM);
    cr_assert_str_eq(span_text(s, env.call_id), "\"tg-5\"");
    assert_invalid(frame("agent.tool.stream", "{\"seq\":1}"));
    assert_invalid(frame("agent.tool.stream", "{\"call_id\":\"a\",\"call_id\":\"b\"}"));

    struct {
        const char *st;
        tg_os_status_t want;
    } sts[] = {{"succeeded", TG_OS_ST_SUCCEEDED}, {"failed", TG_OS_ST_FAILED}, {"canceled", TG_OS_ST_CANCELED},
               {"c\\u0061nceled", TG_OS_ST_CANCELED}};
    for (size_t i = 0; i < 4; i++) {
        char p[256];
        snprintf(p, sizeof p, "{\"call_id\":\"tg-5\",\"status\":\"%s\",\"output\":{\"r\":[]}}", sts[i].st);
        s = frame("agent.tool.result", p);
        assert_valid(s);
        cr_assert_eq(env.type, TG_OS_AGENT_TOOL_RESULT);
        cr_assert_eq(env.status, sts[i].want, "%s", sts[i].st);
        cr_assert_str_eq(span_text(s, env.call_id), "\"tg-5\"");
    }
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"status\":\"cancelled\"}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"status\":\"SUCCEEDED\"}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"status\":\"\"}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"status\":1}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\"}"));
    assert_invalid(frame("agent.tool.result", "{\"status\":\"failed\"}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"status\":\"failed\",\"status\":\"succeeded\"}"));
    assert_invalid(frame("agent.tool.result", "{\"call_id\":\"c\",\"call_id\":\"d\",\"status\":\"failed\"}"));

    s = frame("core.tool.cancel", "{\"call_id\":\"c-1\",\"reason\":\"user\",\"deadline_ms\":100}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_CORE_TOOL_CANCEL);
    cr_assert_str_eq(span_text(s, env.call_id), "\"c-1\"");
    cr_assert_str_eq(span_text(s, env.reason), "\"user\"");
    s = frame("core.tool.cancel", "{\"call_id\":\"c-1\"}");
    assert_valid(s);
    cr_assert_eq(env.reason.type, TG_J_NONE);
    assert_valid(frame("core.tool.cancel", "{\"call_id\":\"c-1\",\"reason\":null}"));
    assert_invalid(frame("core.tool.cancel", "{\"call_id\":\"c-1\",\"reason\":3}"));
    assert_invalid(frame("core.tool.cancel", "{\"reason\":\"x\"}"));
    assert_invalid(frame("core.tool.cancel", "{\"call_id\":\"c-1\",\"reason\":\"a\",\"reason\":\"b\"}"));

    s = frame("agent.heartbeat", "{}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_HEARTBEAT);
    /* types toolgate does not read: payload not looked at */
    s = frame("core.welcome", "{\"accepted_version\":1,\"x\":1,\"x\":2}");
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_OTHER);
    assert_valid(frame("agent.tool.cancel_ack", "{\"call_id\":1,\"call_id\":2}"));
    /* type names are exact */
    assert_valid(frame("agent.hello ", "{}"));
    cr_assert_eq(env.type, TG_OS_OTHER);
    assert_valid(frame("Agent.hello", "{}"));
    cr_assert_eq(env.type, TG_OS_OTHER);
    assert_valid(frame("", "{}"));
    cr_assert_eq(env.type, TG_OS_OTHER);
}

Test(osenv, v_must_be_integer_one)
{
    const char *vs[] = {"2", "0", "-1", "-0", "1.0", "1e0", "10", "\"1\"", "true", "null", "[1]", "{}"};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        char s[256];
        snprintf(s, sizeof s, "{\"v\":%s,\"type\":\"agent.heartbeat\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}", vs[i]);
        assert_invalid(s);
    }
    assert_valid("{\"v\":1,\"type\":\"agent.heartbeat\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}");
    assert_valid("{\"\\u0076\":1,\"type\":\"agent.heartbeat\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}");
    assert_invalid("{\"type\":\"agent.heartbeat\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}");
}

Test(osenv, envelope_rules)
{
    const char *bad[] = {
        "",
        "   ",
        "[]",
        "[{\"v\":1}]",
        "\"x\"",
        "1",
        "null",
        /* a required member missing */
        "{\"v\":1,\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"ts\":\"t\",\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\"}",
        /* of the wrong type */
        "{\"v\":1,\"type\":1,\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}",
        "{\"v\":1,\"type\":null,\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":1,\"ts\":\"t\",\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":1768564800,\"payload\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":[]}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":null}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"request_id\":1}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"correlation_id\":{}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"causation_id\":true}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"in_reply_to\":[]}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"error\":\"boom\"}",
        /* trailing bytes, two objects */
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}x",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}{}",
        /* malformed in a payload toolgate reads (the payload of a type it
         * does not read is only skipped, checked for structure) */
        "{\"v\":1,\"type\":\"core.tool.cancel\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{\"call_id\":\"c\",\"a\":}}",
        "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{\"a\":[}}",
        "{\"v\":01,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_invalid(bad[i]);
}

Test(osenv, duplicate_envelope_keys)
{
    const char *keys[] = {"\"v\":1",          "\"type\":\"x\"",         "\"id\":\"a\"",
                          "\"ts\":\"t\"",     "\"payload\":{}",          "\"request_id\":\"r\"",
                          "\"correlation_id\":\"c\"", "\"causation_id\":\"c\"", "\"in_reply_to\":\"m\"",
                          "\"error\":{}",     "\"request_id\":null",     "\"error\":null"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char s[512];
        const char *extra = strstr(keys[i], "null") ? (strstr(keys[i], "error") ? "\"error\":{}" : "\"request_id\":\"r\"") : keys[i];
        snprintf(s, sizeof s, "{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},%s,%s}", keys[i],
                 strstr(keys[i], "null") ? extra : keys[i]);
        /* the envelope's own copy of "v"..."payload" plus a second one */
        assert_invalid(s);
    }
    /* an escaped spelling is the same key */
    assert_invalid("{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"\\u0069d\":\"b\"}");
    /* unread keys may repeat */
    assert_valid("{\"v\":1,\"type\":\"x\",\"id\":\"a\",\"ts\":\"t\",\"payload\":{},\"actor\":1,\"actor\":2}");
}

Test(osenv, escaped_type_and_keys)
{
    const char *s = "{\"\\u0076\":1,\"t\\u0079pe\":\"agent\\u002etool.result\",\"id\":\"a\",\"ts\":\"t\","
                    "\"payload\":{\"c\\u0061ll_id\":\"x\\\"y\",\"status\":\"failed\"}}";
    assert_valid(s);
    cr_assert_eq(env.type, TG_OS_AGENT_TOOL_RESULT);
    cr_assert_str_eq(span_text(s, env.call_id), "\"x\\\"y\"");
    cr_assert(env.call_id.escaped);
}

Test(osenv, truncated_frames)
{
    const char *s = frame("core.tool.call",
                          "{\"call_id\":\"c-1\",\"tool_id\":\"search/web\",\"input\":{\"q\":\"x\",\"n\":[1,{}]},\"timeout_ms\":30000}");
    size_t n = strlen(s);
    cr_assert_eq(tg_os_scan(s, n, &env), 0);
    for (size_t cut = 0; cut < n; cut++) {
        char *p = malloc(cut ? cut : 1); /* exact size: ASan sees any over-read */
        memcpy(p, s, cut);
        cr_assert_eq(tg_os_scan(p, cut, &env), -1, "cut at %zu", cut);
        cr_assert_eq(env.call_id.type, TG_J_NONE);
        cr_assert_null(os_oracle_check(p, cut));
        free(p);
    }
}

Test(osenv, tool_ids)
{
    const char *good[] = {"a/b", "search/web", "com.graphonomous.core/graph_search", "a-b:c@d/e_f.g",
                          "A1/B2", ".a/b", "a/..b", "a/.b."};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t alen = 99;
        cr_assert_eq(tg_os_tool_id_split(good[i], strlen(good[i]), &alen), 0, "%s", good[i]);
        cr_assert_eq(good[i][alen], '/');
    }
    size_t alen = 0;
    cr_assert_eq(tg_os_tool_id_split("search/web", 10, &alen), 0);
    cr_assert_eq(alen, 6);
    const char *bad[] = {"", "/", "a/", "/b", "ab", "a/b/c", "a//b", "./b", "../b", "a/.", "a/..",
                         "a b/c", "a/b c", "a/\xc3\xa9", "a\"/b", "a/b\n", "a\\/b", "a/b#"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(tg_os_tool_id_split(bad[i], strlen(bad[i]), &alen), -1, "'%s'", bad[i]);
    cr_assert_eq(tg_os_tool_id_split("a\0/b", 4, &alen), -1, "NUL inside");
    cr_assert_eq(tg_os_tool_id_split("a/bc", 3, &alen), 0, "len bounds the id");
    /* the length bound: 128 is fine, 129 is not */
    char id[200];
    memset(id, 'x', sizeof id);
    id[10] = '/';
    cr_assert_eq(tg_os_tool_id_split(id, 128, &alen), 0);
    cr_assert_eq(alen, 10);
    cr_assert_eq(tg_os_tool_id_split(id, 129, &alen), -1);

    /* parse decodes first: "\/" is a slash; a NUL escape is refused */
    char dst[TG_OS_TOOL_ID_MAX + 1];
    size_t n;
    const char *s = frame("core.tool.call", "{\"call_id\":\"c\",\"tool_id\":\"a\\/w\\u0065b\",\"input\":{}}");
    cr_assert_eq(scan(s), 0);
    cr_assert_eq(tg_os_tool_id_parse(s, env.tool_id, dst, sizeof dst, &n, &alen), 0);
    cr_assert_str_eq(dst, "a/web");
    cr_assert_eq(alen, 1);
    s = frame("core.tool.call", "{\"call_id\":\"c\",\"tool_id\":\"a/\\u0000b\",\"input\":{}}");
    cr_assert_eq(scan(s), 0);
    cr_assert_eq(tg_os_tool_id_parse(s, env.tool_id, dst, sizeof dst, &n, &alen), -1);
    char big[512], p[600];
    memset(big, 'y', 200);
    big[1] = '/';
    big[200] = 0;
    snprintf(p, sizeof p, "{\"call_id\":\"c\",\"tool_id\":\"%s\",\"input\":{}}", big);
    s = frame("core.tool.call", p);
    cr_assert_eq(scan(s), 0);
    cr_assert_eq(tg_os_tool_id_parse(s, env.tool_id, dst, sizeof dst, &n, &alen), -1, "too long");
    cr_assert_eq(tg_os_tool_id_parse(s, env.call_id, dst, 2, &n, &alen), -1, "no room");
}

/* {"v":1,...,"payload":{"call_id":"c","tool_id":"a/b","input":{"k":<nest>}}}
 * with <depth> brackets around a <fill>-byte string. */
static char *nested_call(size_t depth, size_t fill, size_t *len)
{
    size_t cap = fill + 2 * depth + 256;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    size_t n = (size_t)snprintf(s, cap, "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m\",\"ts\":\"t\","
                                        "\"payload\":{\"call_id\":\"c\",\"tool_id\":\"a/b\",\"input\":{\"k\":");
    for (size_t i = 0; i < depth; i++)
        s[n++] = '[';
    s[n++] = '"';
    memset(s + n, 'z', fill);
    n += fill;
    s[n++] = '"';
    for (size_t i = 0; i < depth; i++)
        s[n++] = ']';
    memcpy(s + n, "}}}", 3);
    *len = n + 3;
    return s;
}

Test(osenv, big_and_deep_inputs)
{
    /* a 1 MiB input is skipped as one value; the spans are exact */
    size_t n;
    char *s = nested_call(10, 1 << 20, &n);
    cr_assert_eq(tg_os_scan(s, n, &env), 0);
    cr_assert_eq(env.type, TG_OS_CORE_TOOL_CALL);
    cr_assert_eq(env.input.len, 5 + 20 + (1 << 20) + 2 + 1);
    cr_assert_str_eq(span_text(s, env.call_id), "\"c\"");
    free(s);
    /* nesting: the document may be TG_JSCAN_MAX_DEPTH deep, no deeper
     * (top object, payload, input: 3 levels around the brackets) */
    s = nested_call(TG_JSCAN_MAX_DEPTH - 3, 1, &n);
    cr_assert_eq(tg_os_scan(s, n, &env), 0);
    cr_assert_null(os_oracle_check(s, n));
    free(s);
    s = nested_call(TG_JSCAN_MAX_DEPTH - 2, 1, &n);
    cr_assert_eq(tg_os_scan(s, n, &env), -1);
    cr_assert_null(os_oracle_check(s, n));
    free(s);
}

/* ---- differential run against jansson ---- */

static const char *pick(const char *const *v, size_t n)
{
    return v[rnd((uint32_t)n)];
}

static void gen_value(gbuf_t *b, int depth);

static void gen_string(gbuf_t *b)
{
    static const char *const s[] = {"\"\"", "\"a/b\"", "\"search/web\"", "\"c-1\"", "\"x\\\"y\"", "\"\\u0041\"",
                                    "\"caf\xc3\xa9\"", "\"a\\/b\"", "\"succeeded\"", "\"failed\"", "\"canceled\"",
                                    "\"../x\"", "\"a//b\"", "\"tok\"", "\"a/b/c\""};
    gs(b, pick(s, sizeof s / sizeof s[0]));
}

static void gen_value(gbuf_t *b, int depth)
{
    static const char *const scal[] = {"1", "0", "-0", "-1", "1.0", "1e0", "30000", "true", "false", "null",
                                       "18446744073709551615", "9223372036854775807"};
    uint32_t r = rnd(depth > 3 ? 60 : 100);
    if (r < 30) {
        gs(b, pick(scal, sizeof scal / sizeof scal[0]));
    } else if (r < 60) {
        gen_string(b);
    } else if (r < 80) {
        gs(b, "[");
        for (uint32_t i = 0, n = rnd(4); i < n; i++) {
            if (i)
                gs(b, ",");
            gen_value(b, depth + 1);
        }
        gs(b, "]");
    } else {
        gs(b, "{");
        for (uint32_t i = 0, n = rnd(4); i < n; i++) {
            if (i)
                gs(b, ",");
            static const char *const k[] = {"\"a\"", "\"tool_id\"", "\"call_id\"", "\"x\""};
            gs(b, pick(k, 4));
            gs(b, ":");
            gen_value(b, depth + 1);
        }
        gs(b, "}");
    }
}

static const char *const type_names[] = {"agent.hello",       "agent.tools.register", "core.tool.call",
                                         "agent.tool.stream", "agent.tool.result",    "core.tool.cancel",
                                         "agent.heartbeat",   "core.welcome",         "agent\\u002ehello",
                                         "x"};

/* A member "key":value where the value is usually of the right type. */
static void gen_member(gbuf_t *b, const char *key, const char *good)
{
    gs(b, "\"");
    gs(b, key);
    gs(b, "\":");
    if (chance(85))
        gs(b, good);
    else
        gen_value(b, 1);
}

static void gen_payload(gbuf_t *b, const char *type)
{
    struct m {
        const char *k, *v;
    };
    static const struct m hello[] = {{"session_token", "\"tok\""}, {"agent_id", "\"a\""},
                                     {"protocol", "{\"supported_versions\":[1,2]}"}, {"agent_version", "\"1\""}};
    static const struct m call[] = {{"call_id", "\"c-1\""}, {"tool_id", "\"a/b\""}, {"input", "{\"q\":[1,{\"x\":null}]}"},
                                    {"timeout_ms", "500"}, {"idempotency_key", "\"k\""}, {"context", "{}"}};
    static const struct m result[] = {{"call_id", "\"c-1\""}, {"status", "\"succeeded\""}, {"output", "{}"}};
    static const struct m cancel[] = {{"call_id", "\"c-1\""}, {"reason", "\"timeout\""}};
    static const struct m tools[] = {{"tools", "[{\"tool_id\":\"a/b\"},{\"tool_id\":\"a/c\",\"name\":\"c\"},3]"}};
    const struct m *ms = NULL;
    size_t n = 0;
    if (strcmp(type, "agent.hello") == 0 || strcmp(type, "agent\\u002ehello") == 0)
        ms = hello, n = 4;
    else if (strcmp(type, "core.tool.call") == 0)
        ms = call, n = 6;
    else if (strcmp(type, "agent.tool.result") == 0)
        ms = result, n = 3;
    else if (strcmp(type, "core.tool.cancel") == 0 || strcmp(type, "agent.tool.stream") == 0)
        ms = cancel, n = 2;
    else if (strcmp(type, "agent.tools.register") == 0)
        ms = tools, n = 1;
    gs(b, "{");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        int reps = chance(90) ? 1 : (chance(50) ? 0 : 2);
        for (int r = 0; r < reps; r++) {
            if (!first)
                gs(b, ",");
            first = false;
            gen_member(b, ms[i].k, ms[i].v);
        }
    }
    if (chance(30)) {
        if (!first)
            gs(b, ",");
        gs(b, "\"extra\":");
        gen_value(b, 1);
    }
    gs(b, "}");
}

static void gen_frame(gbuf_t *b)
{
    const char *type = pick(type_names, sizeof type_names / sizeof type_names[0]);
    static const char *const order[] = {"v", "type", "id", "ts", "payload", "request_id", "correlation_id",
                                        "causation_id", "in_reply_to", "error", "other"};
    if (chance(5))
        gs(b, " ");
    gs(b, "{");
    bool first = true;
    size_t start = rnd(11);
    for (size_t j = 0; j < 11; j++) {
        size_t i = (start + j) % 11;
        bool required = i < 5;
        int reps = required ? (chance(95) ? 1 : (chance(50) ? 0 : 2)) : (chance(40) ? 1 : (chance(95) ? 0 : 2));
        for (int r = 0; r < reps; r++) {
            if (!first)
                gs(b, ",");
            first = false;
            const char *k = order[i];
            if (i == 0) {
                gen_member(b, "v", "1");
            } else if (i == 1) {
                gs(b, "\"type\":\"");
                gs(b, type);
                gs(b, "\"");
            } else if (i == 4) {
                gs(b, "\"payload\":");
                if (chance(95))
                    gen_payload(b, type);
                else
                    gen_value(b, 1);
            } else if (i == 9) {
                gen_member(b, k, chance(50) ? "{\"code\":\"x\"}" : "null");
            } else if (i == 10) {
                gs(b, "\"actor\":");
                gen_value(b, 1);
            } else {
                gen_member(b, k, chance(80) ? "\"id-1\"" : "null");
            }
        }
    }
    gs(b, "}");
    if (chance(5))
        gs(b, "\n");
}

static void mutate(gbuf_t *b)
{
    static const char interesting[] = "{}[]\",:\\ 01a-.e\x00\x01\x80\xc3\xff\n";
    gmutate(b, interesting, sizeof interesting - 1);
}

Test(osenv, differential_vs_jansson, .timeout = 120)
{
    gbuf_t b = {0};
    unsigned accepted = 0, valid = 0, per_type[8] = {0};
    const unsigned cases = 30000;
    for (unsigned i = 0; i < cases; i++) {
        b.len = 0;
        gen_frame(&b);
        if (i % 3 == 1)
            mutate(&b);
        char *exact = gexact(&b);
        const char *why = os_oracle_check(exact, b.len);
        if (why)
            cr_assert_fail("case %u: %s\n%.*s", i, why, (int)(b.len < 2000 ? b.len : 2000), exact);
        json_t *j = json_loadb(exact, b.len, ORACLE_FLAGS, NULL);
        if (j) {
            accepted++;
            tg_os_env_t e;
            if (tg_os_scan(exact, b.len, &e) == 0) {
                valid++;
                per_type[e.type]++;
            }
            json_decref(j);
        }
        free(exact);
    }
    free(b.p);
    /* the generator reaches every type, valid and invalid */
    cr_assert_gt(accepted, cases / 3, "accepted %u", accepted);
    cr_assert_gt(valid, cases / 10, "valid %u", valid);
    for (int t = 0; t < 8; t++)
        cr_assert_gt(per_type[t], 50, "type %d: %u", t, per_type[t]);
}
