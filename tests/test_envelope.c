/* Envelope scanner: kinds, envelope rules, tools/call fields, batches, head
 * ids of cut frames, and a differential run against jansson over generated
 * and mutated frames (the oracle is tests/mcp_oracle.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_gen.h"
#include "mcp_oracle.h"
#include "router/codec/envelope.h"

static tg_mcp_env_t env;

static int scan(const char *s)
{
    return tg_mcp_scan(s, strlen(s), &env);
}

Test(envelope, request_notification_response)
{
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}";
    cr_assert_eq(scan(r), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    cr_assert_str_eq(span_text(r, env.id), "7");
    cr_assert_str_eq(span_text(r, env.method), "\"tools/list\"");
    cr_assert_eq(env.params.type, TG_J_NONE);
    cr_assert_not(env.is_tools_call);

    const char *n = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    cr_assert_eq(scan(n), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
    cr_assert_eq(env.id.type, TG_J_NONE);

    const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"result\":{\"tools\":[]}}";
    cr_assert_eq(scan(ok), 0);
    cr_assert_eq(env.kind, TG_MCP_RESPONSE);
    cr_assert(env.has_result);
    cr_assert_not(env.has_error);
    cr_assert_str_eq(span_text(ok, env.id), "\"a-1\"");

    const char *er = "{\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"},\"jsonrpc\":\"2.0\"}";
    cr_assert_eq(scan(er), 0);
    cr_assert_eq(env.kind, TG_MCP_RESPONSE);
    cr_assert(env.has_error);
    cr_assert_eq(env.id.type, TG_J_NULL);

    /* jsonrpc is not required: frames are forwarded as they came */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"ping\"}"), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    /* blanks around the object */
    cr_assert_eq(scan(" \t{\"method\":\"x\"}\r "), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
}

Test(envelope, ids_of_every_type)
{
    const char *ids[] = {"0", "-1", "42", "1.5", "-2e3", "12345678901234567890", "\"s\"", "\"\"",
                         "\"\\u00e9\\\"x\"", "null"};
    tg_jtype_t types[] = {TG_J_NUMBER, TG_J_NUMBER, TG_J_NUMBER, TG_J_NUMBER, TG_J_NUMBER,
                          TG_J_NUMBER, TG_J_STRING, TG_J_STRING, TG_J_STRING, TG_J_NULL};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char f[128];
        snprintf(f, sizeof f, "{\"method\":\"m\",\"id\":%s}", ids[i]);
        cr_assert_eq(scan(f), 0, "%s", f);
        cr_assert_eq(env.kind, TG_MCP_REQUEST);
        cr_assert_eq(env.id.type, types[i]);
        cr_assert_str_eq(span_text(f, env.id), ids[i]);
    }
    const char *bad[] = {"true", "false", "{}", "[1]", "{\"a\":1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char f[128];
        snprintf(f, sizeof f, "{\"method\":\"m\",\"id\":%s}", bad[i]);
        cr_assert_eq(scan(f), -1, "%s", f);
        cr_assert_eq(env.kind, TG_MCP_INVALID);
    }
}

Test(envelope, invalid_envelopes)
{
    const char *bad[] = {
        "",
        "   ",
        "not json",
        "42",
        "\"str\"",
        "null",
        "{\"id\":1,\"method\":\"a\"} x",     /* trailing garbage */
        "{\"id\":1,\"method\":\"a\"}{}",     /* two values */
        "{\"id\":1,\"method\":7}",           /* method not a string */
        "{\"id\":1,\"method\":null}",
        "{\"id\":1,\"method\":\"a\",\"params\":3}", /* params not structured */
        "{\"id\":1,\"method\":\"a\",\"params\":\"x\"}",
        "{\"id\":1,\"method\":\"a\",\"result\":1}",  /* method with result */
        "{\"method\":\"a\",\"error\":{}}",
        "{\"id\":1}",                        /* response without result/error */
        "{\"id\":1,\"result\":1,\"error\":{}}", /* both */
        "{\"result\":1}",                    /* response without id */
        "{}",
        "{\"jsonrpc\":\"2.0\"}",
        "{\"id\":1,\"method\":\"a\"",        /* truncated */
        "{\"id\":1,\"method\":\"a\",}",      /* trailing comma */
        "{\"id\":1 \"method\":\"a\"}",
        "{\"id\":01,\"method\":\"a\"}",
        "{\"id\":1,\"method\":\"a\\x\"}",
        "{\"id\":1,\"method\":\"a\",\"params\":{\"x\":[}}",
        "{'id':1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&env, 0x5a, sizeof env);
        cr_assert_eq(scan(bad[i]), -1, "%s", bad[i]);
        cr_assert_eq(env.kind, TG_MCP_INVALID, "%s", bad[i]);
        cr_assert_eq(env.id.type, TG_J_NONE);
        cr_assert_not(env.is_tools_call);
    }
    /* raw control byte inside a skipped string */
    const char nul[] = "{\"id\":1,\"method\":\"a\",\"params\":{\"x\":\"a\x01\"}}";
    cr_assert_eq(tg_mcp_scan(nul, sizeof nul - 1, &env), -1);
}

Test(envelope, duplicate_envelope_keys)
{
    const char *dup[] = {
        "{\"id\":1,\"id\":2,\"method\":\"a\"}",
        "{\"id\":1,\"method\":\"a\",\"method\":\"tools/call\"}",
        "{\"id\":1,\"method\":\"a\",\"params\":{},\"params\":{}}",
        "{\"id\":1,\"result\":1,\"result\":2}",
        "{\"id\":1,\"error\":{},\"error\":{}}",
        /* an escaped spelling is the same key */
        "{\"id\":1,\"\\u0069d\":2,\"method\":\"a\"}",
        "{\"id\":1,\"method\":\"a\",\"m\\u0065thod\":\"b\"}",
        /* the tools/call fields toolgate reads */
        "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"name\":\"b\"}}",
        "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"n\\u0061me\":\"b\"}}",
        "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{},\"_meta\":{}}}",
        "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"timeout_ms\":1,\"timeout_ms\":2}}}",
        "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"progressToken\":1,\"progressToken\":2}}}",
        "{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1,\"requestId\":2}}",
        "{\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progressToken\":2}}",
    };
    for (size_t i = 0; i < sizeof dup / sizeof dup[0]; i++) {
        cr_assert_eq(scan(dup[i]), -1, "%s", dup[i]);
        cr_assert_eq(env.kind, TG_MCP_INVALID);
    }
    /* duplicates toolgate does not read are the agent's business */
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}"), 0);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"a\",\"params\":{\"name\":1,\"name\":2}}"), 0);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"arguments\":{\"q\":1,\"q\":2}}}"), 0);
}

Test(envelope, escaped_keys_and_method)
{
    const char *f = "{\"\\u0069d\":3,\"\\u006dethod\":\"tools\\/c\\u0061ll\",\"p\\u0061rams\":{\"n\\u0061me\":\"w\\u0065b\"}}";
    cr_assert_eq(scan(f), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    cr_assert(env.is_tools_call);
    cr_assert_str_eq(span_text(f, env.id), "3");
    cr_assert(tg_jstr_eq(f, env.tool_name, "web"));
    cr_assert(env.tool_name.escaped);
    /* near misses are other keys */
    cr_assert_eq(scan("{\"ID\":1,\"method\":\"a\"}"), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
    cr_assert_eq(scan("{\"id \":1,\"method\":\"a\"}"), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call \"}"), 0);
    cr_assert_not(env.is_tools_call);
}

Test(envelope, tools_call_fields)
{
    const char *f = "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"web\","
                    "\"arguments\":{\"q\":\"x\",\"_meta\":{\"timeout_ms\":1}},"
                    "\"_meta\":{\"progressToken\":\"tok-1\",\"timeout_ms\":2500}}}";
    cr_assert_eq(scan(f), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    cr_assert(env.is_tools_call);
    cr_assert_str_eq(span_text(f, env.tool_name), "\"web\"");
    cr_assert(env.has_timeout);
    cr_assert_eq(env.timeout_ms, 2500);
    cr_assert_str_eq(span_text(f, env.progress_token), "\"tok-1\"");
    cr_assert_eq(env.params.type, TG_J_OBJECT);
    cr_assert_eq(f[env.params.off], '{');
    cr_assert_eq(f[env.params.off + env.params.len - 1], '}');
    cr_assert_eq(env.params.off + env.params.len, strlen(f) - 1);

    /* params before method: order does not matter */
    const char *g = "{\"params\":{\"_meta\":{\"progressToken\":5},\"name\":\"a.b\"},\"method\":\"tools/call\",\"id\":\"x\"}";
    cr_assert_eq(scan(g), 0);
    cr_assert(env.is_tools_call);
    cr_assert_str_eq(span_text(g, env.tool_name), "\"a.b\"");
    cr_assert_str_eq(span_text(g, env.progress_token), "5");
    cr_assert_not(env.has_timeout);

    /* name of the wrong type, params as an array, no params */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":5}}"), 0);
    cr_assert(env.is_tools_call);
    cr_assert_eq(env.tool_name.type, TG_J_NONE);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":[\"web\"]}"), 0);
    cr_assert(env.is_tools_call);
    cr_assert_eq(env.tool_name.type, TG_J_NONE);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\"}"), 0);
    cr_assert(env.is_tools_call);
    cr_assert_eq(env.tool_name.type, TG_J_NONE);
    /* progressToken of another type is absent; _meta not an object ignored */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"progressToken\":{}}}}"), 0);
    cr_assert_eq(env.progress_token.type, TG_J_NONE);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":[1]}}"), 0);
    cr_assert_not(env.has_timeout);

    /* a tools/call notification is flagged, so the router sees it */
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"params\":{\"name\":\"web\"}}"), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
    cr_assert(env.is_tools_call);
    /* other methods do not read params.name */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":\"web\"}}"), 0);
    cr_assert_not(env.is_tools_call);
    cr_assert_eq(env.tool_name.type, TG_J_NONE);
}

Test(envelope, timeout_ms_variants)
{
    struct {
        const char *v;
        bool has;
        uint64_t ms;
    } c[] = {
        {"0", true, 0},
        {"1", true, 1},
        {"-0", true, 0},
        {"30000", true, 30000},
        {"18446744073709551615", true, UINT64_MAX},
        {"18446744073709551616", false, 0},
        {"-1", false, 0},
        {"1.5", false, 0},
        {"1.0", false, 0},
        {"1e3", false, 0},
        {"\"100\"", false, 0},
        {"null", false, 0},
        {"true", false, 0},
        {"{}", false, 0},
        {"[100]", false, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char f[256];
        snprintf(f, sizeof f,
                 "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"_meta\":{\"timeout_ms\":%s}}}",
                 c[i].v);
        cr_assert_eq(scan(f), 0, "%s", f);
        cr_assert_eq(env.has_timeout, c[i].has, "%s", c[i].v);
        cr_assert_eq(env.timeout_ms, c[i].ms, "%s", c[i].v);
    }
    /* malformed number spelling makes the frame invalid, not the timeout */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"timeout_ms\":01}}}"), -1);
    cr_assert_eq(scan("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"timeout_ms\":1.}}}"), -1);
}

Test(envelope, cancelled_and_progress)
{
    const char *c = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"r-9\",\"reason\":\"user\"}}";
    cr_assert_eq(scan(c), 0);
    cr_assert_eq(env.kind, TG_MCP_NOTIFICATION);
    cr_assert_str_eq(span_text(c, env.cancel_id), "\"r-9\"");
    cr_assert_eq(scan("{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":17}}"), 0);
    cr_assert_eq(env.cancel_id.type, TG_J_NUMBER);
    cr_assert_eq(scan("{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":null}}"), 0);
    cr_assert_eq(env.cancel_id.type, TG_J_NONE);
    cr_assert_eq(scan("{\"method\":\"notifications/cancelled\"}"), 0);
    cr_assert_eq(env.cancel_id.type, TG_J_NONE);

    const char *p = "{\"method\":\"notifications/progress\",\"params\":{\"progressToken\":99,\"progress\":0.5,\"total\":1}}";
    cr_assert_eq(scan(p), 0);
    cr_assert_str_eq(span_text(p, env.notif_progress_token), "99");
    cr_assert_eq(env.cancel_id.type, TG_J_NONE);
    /* a request with that method is not a notification */
    cr_assert_eq(scan("{\"id\":1,\"method\":\"notifications/progress\",\"params\":{\"progressToken\":99}}"), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    cr_assert_eq(env.notif_progress_token.type, TG_J_NONE);
}

Test(envelope, huge_nested_params_are_skipped)
{
    /* 4 MiB of nested arguments with strings full of brackets and escapes */
    size_t cap = 5u << 20;
    char *f = malloc(cap);
    size_t n = (size_t)snprintf(f, cap, "{\"id\":99,\"method\":\"tools/call\",\"params\":{\"arguments\":{\"a\":[");
    const char *chunk = "{\"k\":\"}]\\\"[{\\\\\",\"n\":[1,2.5e3,true,null,{\"x\":[[[]]]}]},";
    size_t cl = strlen(chunk);
    while (n + cl + 256 < (4u << 20)) {
        memcpy(f + n, chunk, cl);
        n += cl;
    }
    n += (size_t)snprintf(f + n, cap - n, "0]},\"name\":\"big\",\"_meta\":{\"timeout_ms\":77}}}");
    cr_assert_eq(tg_mcp_scan(f, n, &env), 0);
    cr_assert(env.is_tools_call);
    cr_assert(tg_jstr_eq(f, env.tool_name, "big"));
    cr_assert_eq(env.timeout_ms, 77);
    cr_assert_eq(env.params.off + env.params.len, n - 1);
    /* the same frame cut anywhere inside the arguments: invalid, id still in the head */
    cr_assert_eq(tg_mcp_scan(f, n / 2, &env), -1);
    tg_jspan_t id;
    cr_assert_eq(tg_mcp_scan_head_id(f, n / 2, &id), 0);
    cr_assert_eq(id.off, 6);
    cr_assert_eq(id.len, 2);
    free(f);
}

Test(envelope, nesting_bound)
{
    char f[1024];
    size_t d = TG_JSCAN_MAX_DEPTH - 2; /* top object + params + d arrays */
    size_t n = (size_t)snprintf(f, sizeof f, "{\"id\":1,\"method\":\"a\",\"params\":{\"x\":");
    memset(f + n, '[', d);
    memset(f + n + d, ']', d);
    n += 2 * d;
    memcpy(f + n, "}}", 2);
    cr_assert_eq(tg_mcp_scan(f, n + 2, &env), 0, "depth %d is allowed", TG_JSCAN_MAX_DEPTH);
    n = (size_t)snprintf(f, sizeof f, "{\"id\":1,\"method\":\"a\",\"params\":{\"x\":");
    memset(f + n, '[', d + 1);
    memset(f + n + d + 1, ']', d + 1);
    n += 2 * d + 2;
    memcpy(f + n, "}}", 2);
    cr_assert_eq(tg_mcp_scan(f, n + 2, &env), -1, "one deeper is not");
}

/* With the method first, a tools/call's params are read in place while
 * the top level is walked (arguments skipped once): the same rules and
 * spans as when they are iterated afterwards. */
Test(envelope, tools_call_params_read_in_one_pass)
{
    const char *f = " { \"method\" : \"tools/call\" , \"id\" : 3 , \"params\" : { \"arguments\" : "
                    "{ \"a\" : [ 1 , { \"b\" : \"}\" } ] } , \"name\" : \"web\" , \"_meta\" : { "
                    "\"timeout_ms\" : 40 } } , \"jsonrpc\" : \"2.0\" } ";
    cr_assert_eq(scan(f), 0);
    cr_assert_eq(env.kind, TG_MCP_REQUEST);
    cr_assert_str_eq(span_text(f, env.tool_name), "\"web\"");
    cr_assert(env.has_timeout);
    cr_assert_eq(env.timeout_ms, 40);
    cr_assert_eq(f[env.params.off], '{');
    cr_assert_eq(env.params.off, (size_t)(strstr(f, "{ \"arguments\"") - f));
    cr_assert_eq(f[env.params.off + env.params.len - 1], '}');
    cr_assert_eq(env.params.off + env.params.len, (size_t)(strstr(f, " , \"jsonrpc\"") - f));

    /* repeated keys inside and around params read in place */
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"name\":\"a\",\"name\":\"b\"}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"_meta\":{},\"_meta\":{}}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"_meta\":1,\"_meta\":{}}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,"
                      "\"params\":{\"_meta\":{\"timeout_ms\":1,\"timeout_ms\":2}}}"),
                 -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{},\"params\":{}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{},\"method\":\"x\"}"), -1);
    /* malformed inside: at every level, the arguments too (issue 12 item 20) */
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"name\":01}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"arguments\":{\"a\":01}}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"arguments\":{\"a\":[}}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"name\":\"a\",}}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"name\":\"a\"}"), -1);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":{\"name\":\"a\"]}"), -1);
    /* params of another kind are not read in place */
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":[1,2]}"), 0);
    cr_assert_eq(env.params.type, TG_J_ARRAY);
    cr_assert_eq(scan("{\"method\":\"tools/call\",\"id\":1,\"params\":5}"), -1);

    /* the nesting bound is the same either way: top + params + arrays */
    for (int first = 0; first < 2; first++) {
        for (size_t d = TG_JSCAN_MAX_DEPTH - 3; d <= TG_JSCAN_MAX_DEPTH - 1; d++) {
            char g[1024];
            size_t n = (size_t)snprintf(g, sizeof g, "%s\"params\":{\"arguments\":",
                                        first ? "{\"method\":\"tools/call\",\"id\":1," : "{\"id\":1,");
            memset(g + n, '[', d);
            memset(g + n + d, ']', d);
            n += 2 * d;
            n += (size_t)snprintf(g + n, sizeof g - n, "}%s}", first ? "" : ",\"method\":\"tools/call\"");
            bool fits = d + 2 <= TG_JSCAN_MAX_DEPTH;
            cr_assert_eq(tg_mcp_scan(g, n, &env), fits ? 0 : -1, "method %s, depth %zu",
                         first ? "first" : "last", d + 2);
            if (fits)
                cr_assert(env.is_tools_call);
        }
    }
}

static int has_call(const char *s)
{
    return tg_mcp_batch_has_call(s, strlen(s));
}

Test(envelope, batches)
{
    const char *b = "[{\"id\":1,\"method\":\"tools/list\"},{\"method\":\"notifications/initialized\"}]";
    cr_assert_eq(scan(b), 0);
    cr_assert_eq(env.kind, TG_MCP_BATCH);
    cr_assert_eq(has_call(b), 0);
    cr_assert_eq(has_call("[{\"id\":1,\"method\":\"tools/list\"},{\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}]"), 1);
    cr_assert_eq(has_call("[{\"method\":\"tools/call\"}]"), 1, "a call notification counts");
    cr_assert_eq(has_call("[{\"id\":1,\"result\":{}}]"), 0, "responses");
    cr_assert_eq(has_call("[{\"id\":1,\"method\":\"t\\u006fols/call\"}]"), 1, "escaped method");
    cr_assert_eq(has_call(" [ ] "), -1, "empty batch");
    cr_assert_eq(has_call("[1]"), -1);
    cr_assert_eq(has_call("[[{\"id\":1,\"method\":\"tools/call\"}]]"), -1, "nested batch");
    cr_assert_eq(has_call("[{\"id\":1,\"id\":2,\"method\":\"tools/call\"}]"), -1, "element with duplicates");
    cr_assert_eq(has_call("[{\"id\":1,\"method\":\"a\"},]"), -1, "trailing comma");
    cr_assert_eq(has_call("[{\"id\":1,\"method\":\"a\"}"), -1, "truncated");
    cr_assert_eq(has_call("{\"id\":1,\"method\":\"a\"}"), -1, "not a batch");
    cr_assert_eq(has_call("[{\"id\":{},\"method\":\"a\"}]"), -1, "element with a bad id");
    /* a batch frame is accepted by tg_mcp_scan without looking inside */
    cr_assert_eq(scan("[1,2]"), 0);
    cr_assert_eq(env.kind, TG_MCP_BATCH);
    cr_assert_eq(scan("[1,2"), -1);
}

Test(envelope, head_id_of_cut_frames)
{
    const char *f = "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"id\":\"abc\",\"params\":{\"arguments\":\"xxxxxxxxxxxxxxxx\"}}";
    size_t n = strlen(f);
    size_t idoff = (size_t)(strstr(f, "\"abc\"") - f);
    tg_jspan_t id;
    for (size_t cut = 0; cut <= n; cut++) {
        memset(&id, 0, sizeof id);
        int rc = tg_mcp_scan_head_id(f, cut, &id);
        if (cut >= idoff + 5) {
            cr_assert_eq(rc, 0, "cut %zu", cut);
            cr_assert_eq(id.off, idoff);
            cr_assert_eq(id.len, 5);
            cr_assert_eq(id.type, TG_J_STRING);
        } else {
            cr_assert_eq(rc, -1, "cut %zu", cut);
        }
    }
    /* a number id is trusted only once something follows it */
    const char *g = "{\"id\":12345,\"method\":\"x\"}";
    cr_assert_eq(tg_mcp_scan_head_id(g, 9, &id), -1);
    cr_assert_eq(tg_mcp_scan_head_id(g, 11, &id), -1);
    cr_assert_eq(tg_mcp_scan_head_id(g, 12, &id), 0);
    cr_assert_eq(id.len, 5);
    /* the id comes after a huge member that is cut: unknown */
    cr_assert_eq(tg_mcp_scan_head_id("{\"params\":{\"a\":\"xxx", 19, &id), -1);
    /* null and escaped-key ids; bad ids and non-objects */
    const char *h = "{\"\\u0069d\" : null , \"x";
    cr_assert_eq(tg_mcp_scan_head_id(h, strlen(h), &id), 0);
    cr_assert_eq(id.type, TG_J_NULL);
    cr_assert_eq(tg_mcp_scan_head_id("{\"id\":{\"a\":1},", 14, &id), -1);
    cr_assert_eq(tg_mcp_scan_head_id("[{\"id\":1}]", 10, &id), -1);
    cr_assert_eq(tg_mcp_scan_head_id("{\"id\" 1,", 8, &id), -1);
    cr_assert_eq(tg_mcp_scan_head_id("", 0, &id), -1);
}

/* ---- differential run against jansson ---- */

static void gen_ws(gbuf_t *b)
{
    static const char *ws[] = {" ", "\t", "\n", "\r", "  "};
    if (chance(15))
        gs(b, ws[rnd(5)]);
}

static void gen_string_body(gbuf_t *b, uint32_t maxlen)
{
    static const char *pieces[] = {"a", "b", "Z", "0", " ", "/", ".", "-", "\\n", "\\\"", "\\\\",
                                   "\\/", "\\t", "\\u00e9", "\\u20AC", "\\ud83d\\ude00", "\xc3\xa9",
                                   "\xe2\x82\xac", "\xf0\x9f\x98\x80", "{", "}", "[", "]", ":", ",",
                                   "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf",
                                   "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
                                   "\xf4\x8f\xbf\xbf", "\\udbff\\udfff"};
    static const char *rare[] = {"\\ud800", "\\udc00", "\\u0000", "\x01", "\xc3", "\xff", "\\x",
                                 "\\u12", "\xed\xa0\x80", "\xc0\xaf"};
    uint32_t n = rnd(maxlen + 1);
    for (uint32_t i = 0; i < n; i++) {
        if (chance(1))
            gs(b, rare[rnd(sizeof rare / sizeof rare[0])]);
        else
            gs(b, pieces[rnd(sizeof pieces / sizeof pieces[0])]);
    }
}

static void gen_string(gbuf_t *b, uint32_t maxlen)
{
    gs(b, "\"");
    gen_string_body(b, maxlen);
    gs(b, "\"");
}

static void gen_number(gbuf_t *b)
{
    static const char *nums[] = {"0", "-0", "1", "7", "42", "-1", "-17", "1.5", "0.25", "-0.5",
                                 "1e3", "1E+2", "2e-3", "-1.5E10", "100", "2500", "30000",
                                 "9223372036854775807", "-9223372036854775808",
                                 "18446744073709551615", "99999999999999999999", "1e400",
                                 "123456789", "0.0", "1.0"};
    static const char *bad[] = {"01", "1.", ".5", "+1", "-", "1e", "0x10", "--1", "1.e3", "Infinity",
                                "NaN"};
    if (chance(2))
        gs(b, bad[rnd(sizeof bad / sizeof bad[0])]);
    else
        gs(b, nums[rnd(sizeof nums / sizeof nums[0])]);
}

static void gen_value(gbuf_t *b, int depth);

static void gen_key(gbuf_t *b)
{
    static const char *keys[] = {"\"a\"", "\"b\"", "\"q\"", "\"name\"", "\"id\"", "\"_meta\"",
                                 "\"x y\"", "\"\\u0041\"", "\"\"", "\"k\\\"\""};
    if (chance(70))
        gs(b, keys[rnd(sizeof keys / sizeof keys[0])]);
    else
        gen_string(b, 6);
}

static void gen_object(gbuf_t *b, int depth)
{
    gs(b, "{");
    uint32_t n = rnd(5);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            gs(b, ",");
        gen_ws(b);
        gen_key(b);
        gen_ws(b);
        gs(b, ":");
        gen_ws(b);
        gen_value(b, depth + 1);
        gen_ws(b);
    }
    gs(b, "}");
}

static void gen_array(gbuf_t *b, int depth)
{
    gs(b, "[");
    uint32_t n = rnd(5);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            gs(b, ",");
        gen_ws(b);
        gen_value(b, depth + 1);
        gen_ws(b);
    }
    gs(b, "]");
}

static void gen_deep(gbuf_t *b)
{
    /* chains around the nesting bound */
    uint32_t d = TG_JSCAN_MAX_DEPTH - 8 + rnd(16);
    char *close = malloc(d);
    for (uint32_t i = 0; i < d; i++) {
        if (chance(50)) {
            gs(b, "{\"d\":");
            close[i] = '}';
        } else {
            gs(b, "[");
            close[i] = ']';
        }
    }
    gs(b, "0");
    for (uint32_t i = d; i-- > 0;)
        gput(b, &close[i], 1);
    free(close);
}

static void gen_value(gbuf_t *b, int depth)
{
    uint32_t r = rnd(100);
    if (depth > 6)
        r = rnd(60);
    if (r < 25)
        gen_string(b, 10);
    else if (r < 45)
        gen_number(b);
    else if (r < 50)
        gs(b, "true");
    else if (r < 55)
        gs(b, "false");
    else if (r < 60)
        gs(b, "null");
    else if (r < 78)
        gen_object(b, depth);
    else if (r < 98)
        gen_array(b, depth);
    else if (depth < 3)
        gen_deep(b);
    else
        gs(b, "1");
}

static void gen_id(gbuf_t *b)
{
    uint32_t r = rnd(100);
    if (r < 40)
        gen_number(b);
    else if (r < 80)
        gen_string(b, 8);
    else if (r < 92)
        gs(b, "null");
    else
        gen_value(b, 2); /* often a wrong type */
}

static const char *methods[] = {"tools/call", "tools/call", "tools/call", "tools/list", "initialize",
                                "notifications/cancelled", "notifications/progress", "ping",
                                "notifications/initialized", "t\\u006fols/call", "tools/cal"};

static void gen_meta(gbuf_t *b)
{
    static const char *tmo[] = {"0", "1", "-0", "250", "30000", "5000", "100", "60000", "7",
                                "-5", "1.5", "1e3", "1.0",
                                "\"100\"", "null", "18446744073709551615", "9223372036854775807",
                                "{}", "true"};
    gs(b, "{");
    bool first = true;
    uint32_t n = 1 + rnd(3);
    for (uint32_t i = 0; i < n; i++) {
        if (!first)
            gs(b, ",");
        first = false;
        gen_ws(b);
        uint32_t r = i == 0 && chance(60) ? 0 : rnd(10);
        if (r < 4) {
            gs(b, chance(85) ? "\"timeout_ms\":" : "\"timeout\\u005fms\":");
            gs(b, tmo[rnd(sizeof tmo / sizeof tmo[0])]);
        } else if (r < 7) {
            gs(b, "\"progressToken\":");
            gen_id(b);
        } else {
            gen_key(b);
            gs(b, ":");
            gen_value(b, 3);
        }
    }
    gs(b, "}");
}

static void gen_params(gbuf_t *b, const char *method)
{
    if (chance(8)) {
        gen_value(b, 1); /* any type: arrays and scalars too */
        return;
    }
    gs(b, "{");
    uint32_t n = 1 + rnd(4);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            gs(b, ",");
        gen_ws(b);
        uint32_t r = rnd(10);
        if (strstr(method, "call") && i < 2 && chance(70))
            r = i == 0 ? 0 : 3; /* calls mostly carry name and _meta */
        else if (strstr(method, "call") && i >= 2 && r < 5 && !chance(10))
            r = 7; /* and only sometimes a duplicate of them */
        if (r < 3 && strstr(method, "call")) {
            gs(b, chance(90) ? "\"name\":" : "\"n\\u0061me\":");
            if (chance(85))
                gen_string(b, 8);
            else
                gen_value(b, 2);
        } else if (r < 5) {
            gs(b, "\"_meta\":");
            if (chance(90))
                gen_meta(b);
            else
                gen_value(b, 2);
        } else if (r < 6) {
            gs(b, "\"requestId\":");
            gen_id(b);
        } else if (r < 7) {
            gs(b, "\"progressToken\":");
            gen_id(b);
        } else {
            gs(b, chance(50) ? "\"arguments\":" : "\"reason\":");
            gen_value(b, 1);
        }
    }
    gs(b, "}");
}

static void gen_frame(gbuf_t *b)
{
    /* members: 0 jsonrpc, 1 id, 2 method, 3 params, 4 result, 5 error, 6 extra */
    bool want[7] = {chance(85), false, false, false, false, false, chance(15)};
    uint32_t shape = rnd(100);
    const char *method = methods[rnd(sizeof methods / sizeof methods[0])];
    if (shape < 55) { /* request */
        want[1] = want[2] = true;
        want[3] = chance(90);
    } else if (shape < 75) { /* notification */
        want[2] = true;
        want[3] = chance(80);
    } else if (shape < 92) { /* response */
        want[1] = true;
        want[chance(70) ? 4 : 5] = true;
    } else { /* anything */
        for (int i = 1; i < 6; i++)
            want[i] = chance(50);
    }
    int order[7] = {0, 1, 2, 3, 4, 5, 6};
    for (int i = 6; i > 0; i--) {
        int k = (int)rnd((uint32_t)i + 1), t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    gen_ws(b);
    gs(b, "{");
    bool first = true;
    for (int oi = 0; oi < 7; oi++) {
        int m = order[oi];
        int reps = want[m] ? (chance(3) ? 2 : 1) : 0; /* sometimes a duplicate */
        for (int rep = 0; rep < reps; rep++) {
            if (!first)
                gs(b, ",");
            first = false;
            gen_ws(b);
            switch (m) {
            case 0:
                gs(b, "\"jsonrpc\":\"2.0\"");
                break;
            case 1:
                gs(b, chance(92) ? "\"id\"" : "\"\\u0069d\"");
                gen_ws(b);
                gs(b, ":");
                gen_ws(b);
                gen_id(b);
                break;
            case 2:
                gs(b, "\"method\":");
                if (chance(95)) {
                    gs(b, "\"");
                    gs(b, method);
                    gs(b, "\"");
                } else {
                    gen_value(b, 2);
                }
                break;
            case 3:
                gs(b, "\"params\":");
                gen_params(b, method);
                break;
            case 4:
                gs(b, "\"result\":");
                gen_value(b, 1);
                break;
            case 5:
                gs(b, "\"error\":{\"code\":-32601,\"message\":\"nope\"}");
                break;
            default:
                gen_key(b);
                gs(b, ":");
                gen_value(b, 1);
                break;
            }
            gen_ws(b);
        }
    }
    gs(b, "}");
    gen_ws(b);
}

static void gen_input(gbuf_t *b)
{
    uint32_t r = rnd(100);
    if (r < 80) {
        gen_frame(b);
    } else if (r < 92) {
        gs(b, "[");
        uint32_t n = rnd(4);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                gs(b, ",");
            if (chance(90))
                gen_frame(b);
            else
                gen_value(b, 1);
        }
        gs(b, "]");
    } else {
        gen_value(b, 0);
    }
}

static void mutate(gbuf_t *b)
{
    static const char interesting[] = "{}[]\",:\\ 0a-.e\x00\x01\x80\xc3\xff\n";
    gmutate(b, interesting, sizeof interesting - 1);
}

Test(envelope, differential_vs_jansson, .timeout = 120)
{
    gbuf_t b = {0};
    unsigned accepted = 0, requests = 0, calls = 0, timeouts = 0, batches = 0, invalid_ok = 0,
             responses = 0, notifs = 0, deep = 0;
    const unsigned cases = 30000;
    for (unsigned i = 0; i < cases; i++) {
        b.len = 0;
        gen_input(&b);
        if (i % 3 == 1)
            mutate(&b);
        char *exact = gexact(&b);
        const char *why = oracle_check(exact, b.len, i * 2654435761u);
        if (why)
            { fprintf(stderr, "case %u len %zu:", i, b.len); for (size_t x = 0; x < b.len && x < 400; x++) fprintf(stderr, " %02x", (unsigned char)exact[x]); fprintf(stderr, "\n"); cr_assert_fail("case %u: %s\n%.*s", i, why, (int)(b.len < 2000 ? b.len : 2000), exact); }
        json_t *j = json_loadb(exact, b.len, ORACLE_FLAGS, NULL);
        if (j) {
            accepted++;
            tg_mcp_env_t e;
            tg_mcp_scan(exact, b.len, &e);
            requests += e.kind == TG_MCP_REQUEST;
            notifs += e.kind == TG_MCP_NOTIFICATION;
            responses += e.kind == TG_MCP_RESPONSE;
            batches += e.kind == TG_MCP_BATCH;
            calls += e.is_tools_call;
            timeouts += e.has_timeout;
            invalid_ok += e.kind == TG_MCP_INVALID;
            deep += oracle_depth(j) > TG_JSCAN_MAX_DEPTH;
            json_decref(j);
        }
        free(exact);
    }
    free(b.p);
    cr_log_info("differential: %u cases, %u valid JSON: %u requests (%u tools/call, %u with timeout), "
                "%u notifications, %u responses, %u batches, %u envelope-invalid (%u too deep)",
                cases, accepted, requests, calls, timeouts, notifs, responses, batches, invalid_ok, deep);
    /* the generator must keep reaching every verdict */
    cr_assert_gt(accepted, cases / 3);
    cr_assert_gt(requests, 1000);
    cr_assert_gt(calls, 500);
    cr_assert_gt(timeouts, 200);
    cr_assert_gt(notifs, 500);
    cr_assert_gt(responses, 300);
    cr_assert_gt(batches, 100);
    cr_assert_gt(invalid_ok, 300);
    cr_assert_gt(deep, 10);
}

/* ---- issue 20 items 1-2: one judgement, and ids read past the cap ---- */

/* Feed <s> to a head reader in pieces of <step> bytes. */
static const char *head_id_of(const char *s, size_t step, tg_mcp_head_t *h)
{
    static char out[TG_MCP_HEAD_ID_MAX + 1];
    size_t n = strlen(s);
    tg_mcp_head_init(h);
    for (size_t i = 0; i < n; i += step)
        tg_mcp_head_feed(h, s + i, n - i < step ? n - i : step);
    const char *id;
    size_t len;
    if (!tg_mcp_head_id(h, &id, &len))
        return NULL;
    memcpy(out, id, len);
    out[len] = '\0';
    return out;
}

Test(envelope, head_stream_reads_id_anywhere)
{
    static const struct {
        const char *frame;
        const char *id; /* NULL: none */
        bool method, response;
    } cases[] = {
        /* the official TypeScript SDK's order: id last */
        {"{\"method\":\"tools/call\",\"params\":{\"name\":\"e\",\"arguments\":{\"t\":\"x}]\\\"{\"}},"
         "\"jsonrpc\":\"2.0\",\"id\":42}", "42", true, false},
        {"{\"id\":\"a\\\"b\",\"method\":\"x\"}", "\"a\\\"b\"", true, false},
        {" { \"params\" : [1,[2,{\"id\":3}]] , \"id\" : null , \"method\":\"m\" } ", "null", true,
         false},
        {"{\"id\":-1.5e3,\"result\":{}}", "-1.5e3", false, true},
        {"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1},\"id\":7}", "7", false, true},
        {"{\"id\":1,\"method\":\"m\",\"id\":2}", NULL, true, false},  /* repeated: void */
        {"{\"id\":true,\"method\":\"m\"}", NULL, true, false},         /* not an id type */
        {"{\"id\":{\"a\":1},\"method\":\"m\"}", NULL, true, false},
        {"{\"id\":01,\"method\":\"m\"}", NULL, true, false},           /* not a valid number */
        {"[{\"id\":1}]", NULL, false, false},                          /* a batch */
        {"{\"params\":{\"id\":5}}", NULL, false, false},               /* nested ids are not it */
        {"{\"method\":\"m\",\"params\":{}", NULL, true, false},         /* cut, no id */
        {"{\"id\":12", NULL, false, false},                            /* cut inside the id */
    };
    tg_mcp_head_t h;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (size_t step = 1; step <= 7; step += 3) {
            const char *got = head_id_of(cases[i].frame, step, &h);
            if (cases[i].id == NULL)
                cr_assert_null(got, "case %zu step %zu: %s", i, step, got);
            else
                cr_assert(got != NULL && strcmp(got, cases[i].id) == 0, "case %zu step %zu: %s", i,
                          step, got ? got : "(none)");
            cr_assert_eq(h.method, cases[i].method, "case %zu", i);
            cr_assert_eq(h.response, cases[i].response, "case %zu", i);
        }
    }
    /* an id over the bound is void, not cut */
    char big[400];
    int n = snprintf(big, sizeof big, "{\"method\":\"m\",\"id\":\"");
    memset(big + n, 'i', 200);
    snprintf(big + n + 200, sizeof big - (size_t)n - 200, "\"}");
    cr_assert_null(head_id_of(big, 5, &h));
}

Test(envelope, head_stream_big_frame_in_o1)
{
    /* 4 MiB of arguments, strings with brackets and escapes, then the id */
    size_t n = 4u << 20;
    char *f = malloc(n + 128);
    cr_assert_not_null(f);
    size_t at = (size_t)snprintf(f, 64, "{\"method\":\"tools/call\",\"params\":{\"a\":[\"");
    while (at < n) {
        memcpy(f + at, "{[\\\"x\\\\", 7);
        at += 7;
    }
    at += (size_t)snprintf(f + at, 64, "\"]},\"id\":\"tail\"}");
    tg_mcp_head_t h;
    tg_mcp_head_init(&h);
    for (size_t i = 0; i < at; i += 65536)
        tg_mcp_head_feed(&h, f + i, at - i < 65536 ? at - i : 65536);
    const char *id;
    size_t len;
    cr_assert_eq(tg_mcp_head_id(&h, &id, &len), 1);
    cr_assert_eq(len, 6);
    cr_assert(memcmp(id, "\"tail\"", 6) == 0);
    free(f);
}

Test(envelope, judge_one_verdict_for_every_front)
{
    static const struct {
        const char *frame;
        int code;
        const char *id; /* NULL: null */
        const char *reason;
    } cases[] = {
        {"{}", -32600, NULL, "invalid_request"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"params\":5,\"method\":\"initialize\"}", -32600, "1",
         "invalid_request"},
        {"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":5}", -32600, "9", "invalid_request"},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"e\","
         "\"arguments\":{\"text\":01}}}", -32700, "4", "parse_error"},
        {"{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"tools/call\",\"params\":{\"arguments\":"
         "{\"text\":\"\xff\xfe\"}}}", -32700, "\"u\"", "parse_error"},
        {"not json", -32700, NULL, "parse_error"},
        {"{\"id\":3,\"result\":{},\"error\":{}}", -32600, NULL, "invalid_request"}, /* a response */
        {"{\"id\":3,\"result\":{\"a\":01}}", -32700, NULL, "parse_error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_mcp_verdict_t v;
        const char *f = cases[i].frame;
        cr_assert_lt(tg_mcp_scan(f, strlen(f), &env), 0, "case %zu scans", i);
        tg_mcp_judge(f, strlen(f), &v);
        cr_assert_eq(v.code, cases[i].code, "case %zu: %d", i, v.code);
        cr_assert_str_eq(v.reason, cases[i].reason, "case %zu", i);
        if (cases[i].id == NULL)
            cr_assert_eq(v.id.type, TG_J_NONE, "case %zu", i);
        else
            cr_assert_str_eq(span_text(f, v.id), cases[i].id, "case %zu", i);
    }
}

/* The tool names of a tools/list answer, for the instance's registry
 * (agent/toolreg.h): every string name in order, escapes decoded, the
 * rest passed over; nothing from a frame without result.tools. */
static int collect(void *ctx, const char *name, size_t len)
{
    char *out = ctx;
    size_t used = strlen(out);
    snprintf(out + used, 256 - used, "%.*s|", (int)len, name);
    return strcmp(name, "stop") == 0 ? -1 : 0;
}

Test(envelope, tools_listed_names_every_tool_of_the_answer)
{
    char got[256] = "";
    const char *f = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"echo\","
                    "\"inputSchema\":{\"name\":\"not me\"}},{\"description\":\"x\",\"name\":"
                    "\"a\\u0062c\"},{\"name\":5},{\"name\":\"\"},7,{\"name\":\"x\",\"name\":\"y\"}],"
                    "\"nextCursor\":\"c\"}}";
    cr_assert_eq(tg_mcp_tools_listed(f, strlen(f), collect, got), 3);
    cr_assert_str_eq(got, "echo|abc|y|");
    got[0] = '\0';
    const char *e = "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-1,\"message\":\"m\"}}";
    cr_assert_eq(tg_mcp_tools_listed(e, strlen(e), collect, got), -1);
    const char *s = "{\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"},{\"name\":\"stop\"},"
                    "{\"name\":\"b\"}]}}";
    cr_assert_eq(tg_mcp_tools_listed(s, strlen(s), collect, got), 1, "the callback stops it");
    cr_assert_str_eq(got, "a|stop|");
}
