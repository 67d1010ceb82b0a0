/* Denials: the exact line of DESIGN.md, the code table, message templates,
 * escaping, the caller-string check, buffer bounds, plain RPC errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "router/call/denial.h"

static char out[4096];

static tg_denial_t base(tg_deny_code_t code)
{
    tg_denial_t d = {
        .code = code,
        .observed = TG_DENY_ABSENT,
        .cap = TG_DENY_ABSENT,
        .retry_after_ms = TG_DENY_ABSENT,
    };
    return d;
}

/* The rate denial of DESIGN.md's example. */
static tg_denial_t design_example(void)
{
    tg_denial_t d = {
        .code = TG_DENY_RATE,
        .limit = "rate",
        .scope = "tool",
        .agent = "search",
        .tool = "web",
        .tool_len = 3,
        .observed = 11,
        .cap = 10,
        .unit = "calls/minute",
        .retry_after_ms = 5200,
        .config_path = "agents.search.tools.web.rate_limit",
        .request_id = "tg-3f2a9c",
        .detail = "11 calls in 1m > 10/minute",
    };
    return d;
}

/* Render and parse; returns the parsed line (caller decrefs). */
static json_t *render(const char *id, const tg_denial_t *d)
{
    long n = tg_denial_mcp(out, sizeof out, id, id ? strlen(id) : 0, d);
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(out));
    cr_assert_eq(out[n - 1], '\n');
    cr_assert_null(memchr(out, '\n', (size_t)n - 1), "one line");
    json_error_t err;
    json_t *j = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    cr_assert_not_null(j, "%s: %s", out, err.text);
    return j;
}

static const char *message_of(const tg_denial_t *d)
{
    static char msg[1024];
    json_t *j = render("1", d);
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    cr_assert_not_null(m);
    snprintf(msg, sizeof msg, "%s", m);
    json_decref(j);
    return msg;
}

Test(denial, design_example_exact)
{
    tg_denial_t d = design_example();
    long n = tg_denial_mcp(out, sizeof out, "7", 1, &d);
    const char *want =
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32060,"
        "\"message\":\"rate limit exceeded: agent 'search' tool 'web' 11 calls in 1m > 10/minute; "
        "retry in 5.2s (raise agents.search.tools.web.rate_limit)\","
        "\"data\":{\"code\":\"rate_limit_exceeded\",\"limit\":\"rate\",\"scope\":\"tool\",\"agent\":\"search\","
        "\"tool\":\"web\",\"observed\":11,\"cap\":10,\"unit\":\"calls/minute\",\"retry_after_ms\":5200,"
        "\"config_path\":\"agents.search.tools.web.rate_limit\",\"request_id\":\"tg-3f2a9c\"}}}\n";
    cr_assert_str_eq(out, want);
    cr_assert_eq(n, (long)strlen(want));
}

Test(denial, code_table)
{
    struct {
        tg_deny_code_t c;
        const char *name;
        int rpc;
        bool retry;
    } t[] = {
        {TG_DENY_RATE, "rate_limit_exceeded", -32060, true},
        {TG_DENY_CONCURRENCY, "concurrency_limit_exceeded", -32061, true},
        {TG_DENY_TIMEOUT, "timeout", -32062, true},
        {TG_DENY_FRAME, "frame_too_large", -32063, false},
        {TG_DENY_UNAVAILABLE, "agent_unavailable", -32064, true},
        {TG_DENY_RESOURCE, "resource_limit_exceeded", -32065, false},
        {TG_DENY_CALLER, "caller_not_allowed", -32066, false},
        {TG_DENY_STORE, "rate_store_unavailable", -32067, true},
        {TG_DENY_SHUTTING_DOWN, "shutting_down", -32068, true},
        {TG_DENY_NOT_ALLOWED, "tool_not_allowed", -32069, false},
    };
    cr_assert_eq(sizeof t / sizeof t[0], TG_DENY__COUNT);
    for (size_t i = 0; i < TG_DENY__COUNT; i++) {
        cr_assert_str_eq(tg_deny_name(t[i].c), t[i].name);
        cr_assert_eq(tg_deny_rpc_code(t[i].c), t[i].rpc);
        cr_assert_eq(tg_deny_retryable(t[i].c), t[i].retry, "%s", t[i].name);
        /* and the line carries the same code and name */
        tg_denial_t d = base(t[i].c);
        json_t *j = render("\"x\"", &d);
        json_t *e = json_object_get(j, "error");
        cr_assert_eq(json_integer_value(json_object_get(e, "code")), t[i].rpc);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "data"), "code")), t[i].name);
        cr_assert_str_eq(json_string_value(json_object_get(j, "id")), "x");
        cr_assert_str_eq(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
        json_decref(j);
    }
    cr_assert_str_eq(tg_deny_name(TG_DENY__COUNT), "internal_error");
    cr_assert_eq(tg_deny_rpc_code((tg_deny_code_t)99), -32603);
    cr_assert_not(tg_deny_retryable(TG_DENY__COUNT));
    tg_denial_t bad = base(TG_DENY__COUNT);
    cr_assert_eq(tg_denial_mcp(out, sizeof out, NULL, 0, &bad), -EINVAL);
}

Test(denial, minimal_line_and_absent_fields)
{
    tg_denial_t d = base(TG_DENY_CALLER);
    const char *want = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32066,"
                       "\"message\":\"caller not allowed\",\"data\":{\"code\":\"caller_not_allowed\"}}}\n";
    cr_assert_eq(tg_denial_mcp(out, sizeof out, NULL, 0, &d), (long)strlen(want));
    cr_assert_str_eq(out, want);
    /* id_len 0 also writes null */
    cr_assert_gt(tg_denial_mcp(out, sizeof out, "5", 0, &d), 0);
    cr_assert_not_null(strstr(out, "\"id\":null,"));
    /* zero values are present, not absent */
    d.observed = 0;
    d.cap = 0;
    d.retry_after_ms = 0;
    json_t *j = render(NULL, &d);
    json_t *data = json_object_get(json_object_get(j, "error"), "data");
    cr_assert_eq(json_integer_value(json_object_get(data, "observed")), 0);
    cr_assert_eq(json_integer_value(json_object_get(data, "cap")), 0);
    cr_assert_eq(json_integer_value(json_object_get(data, "retry_after_ms")), 0);
    cr_assert_null(json_object_get(data, "tool"));
    cr_assert_null(json_object_get(data, "config_path"));
    json_decref(j);
}

Test(denial, ids_copied_raw)
{
    tg_denial_t d = base(TG_DENY_TIMEOUT);
    const char *ids[] = {"0", "-12", "1.5e3", "\"abc\"", "\"\\u00e9\\\"\"", "null", "12345678901234567890"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        long n = tg_denial_mcp(out, sizeof out, ids[i], strlen(ids[i]), &d);
        cr_assert_gt(n, 0);
        char want[128];
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":", ids[i]);
        cr_assert_eq(strncmp(out, want, strlen(want)), 0, "%s", out);
        /* big integers are valid JSON; jansson reads them as reals */
        json_t *j = json_loads(out, JSON_DECODE_INT_AS_REAL, NULL);
        cr_assert_not_null(j, "%s", out);
        json_decref(j);
    }
}

Test(denial, message_templates)
{
    tg_denial_t d = base(TG_DENY_RATE);
    d.agent = "search";
    d.observed = 11;
    d.cap = 10;
    d.unit = "calls/minute";
    d.retry_after_ms = 250;
    d.config_path = "agents.search.rate_limit";
    cr_assert_str_eq(message_of(&d), "rate limit exceeded: agent 'search' 11 > 10 calls/minute; "
                                     "retry in 250ms (raise agents.search.rate_limit)");

    d = base(TG_DENY_CONCURRENCY);
    d.agent = "search";
    d.limit = "concurrency";
    d.observed = 3;
    d.cap = 3;
    d.unit = "calls";
    d.config_path = "agents.search.execution_limits.max_concurrent_calls";
    cr_assert_str_eq(message_of(&d), "concurrency limit exceeded: agent 'search' 3 in flight, cap 3 calls "
                                     "(raise agents.search.execution_limits.max_concurrent_calls)");
    d.limit = "queue";
    d.observed = 16;
    d.cap = 16;
    d.config_path = "agents.search.execution_limits.max_queued_calls";
    cr_assert_str_eq(message_of(&d), "concurrency limit exceeded: agent 'search' 16 waiting, queue full at "
                                     "16 calls (raise agents.search.execution_limits.max_queued_calls)");

    d = base(TG_DENY_TIMEOUT);
    d.agent = "a";
    d.tool = "slow";
    d.tool_len = 4;
    d.observed = 15003;
    d.cap = 15000;
    d.unit = "ms";
    d.retry_after_ms = 1000;
    d.config_path = "agents.a.tools.slow.max_tool_call_duration";
    cr_assert_str_eq(message_of(&d), "timeout: agent 'a' tool 'slow' no result within 15000 ms; retry in 1s "
                                     "(raise agents.a.tools.slow.max_tool_call_duration)");

    d = base(TG_DENY_FRAME);
    d.observed = 5242880;
    d.cap = 4194304;
    d.unit = "bytes";
    d.config_path = "router.max_frame_bytes";
    cr_assert_str_eq(message_of(&d), "frame too large: frame of 5242880 bytes > 4194304 bytes "
                                     "(raise router.max_frame_bytes)");
    d.observed = TG_DENY_ABSENT;
    cr_assert_str_eq(message_of(&d), "frame too large: frame > 4194304 bytes (raise router.max_frame_bytes)");

    d = base(TG_DENY_UNAVAILABLE);
    d.agent = "search";
    d.retry_after_ms = 2000;
    cr_assert_str_eq(message_of(&d), "agent unavailable: agent 'search' agent not running; retry in 2s");

    d = base(TG_DENY_RESOURCE);
    d.agent = "search";
    d.limit = "memory";
    d.observed = 540000000;
    d.cap = 536870912;
    d.unit = "bytes";
    d.config_path = "agents.search.resources.memory.limit";
    cr_assert_str_eq(message_of(&d), "resource limit exceeded: agent 'search' memory 540000000 > 536870912 "
                                     "bytes (raise agents.search.resources.memory.limit)");

    d = base(TG_DENY_CALLER);
    d.agent = "search";
    d.scope = "caller";
    cr_assert_str_eq(message_of(&d), "caller not allowed: agent 'search'");

    d = base(TG_DENY_STORE);
    d.agent = "search";
    d.retry_after_ms = 50;
    cr_assert_str_eq(message_of(&d), "rate store unavailable: agent 'search' shared rate store did not "
                                     "answer; retry in 50ms");

    d = base(TG_DENY_SHUTTING_DOWN);
    d.retry_after_ms = 5200;
    cr_assert_str_eq(message_of(&d), "shutting down: no new calls accepted; retry in 5.2s");

    /* a tool without an agent; detail given by toolgate wins */
    d = base(TG_DENY_RATE);
    d.tool = "web";
    d.tool_len = 3;
    d.detail = "6 calls in 1s > 5/second";
    cr_assert_str_eq(message_of(&d), "rate limit exceeded: tool 'web' 6 calls in 1s > 5/second");
}

Test(denial, retry_rounds_up)
{
    struct {
        int64_t ms;
        const char *txt;
    } c[] = {{0, "0ms"}, {1, "1ms"}, {999, "999ms"}, {1000, "1s"}, {1001, "1.1s"},
             {5200, "5.2s"}, {5201, "5.3s"}, {59999, "60s"}, {125000, "125s"}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tg_denial_t d = base(TG_DENY_SHUTTING_DOWN);
        d.retry_after_ms = c[i].ms;
        char want[128];
        snprintf(want, sizeof want, "shutting down: no new calls accepted; retry in %s", c[i].txt);
        cr_assert_str_eq(message_of(&d), want);
    }
}

Test(denial, caller_tool_checked)
{
    tg_denial_t d = base(TG_DENY_RATE);
    d.agent = "search";
    /* a caller-supplied tool name holding anything but [A-Za-z0-9._:@/-] */
    const char *evil = "web\"},\"x\":\"CANARY-sk_live_123 $(rm -rf)";
    d.tool = evil;
    d.tool_len = strlen(evil);
    json_t *j = render("1", &d);
    cr_assert_null(strstr(out, "CANARY"), "%s", out);
    cr_assert_null(strstr(out, "sk_live"));
    json_t *e = json_object_get(j, "error");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "data"), "tool")), "invalid");
    cr_assert_not_null(strstr(json_string_value(json_object_get(e, "message")), "tool 'invalid'"));
    json_decref(j);

    /* too long (129 safe bytes) and empty are invalid too */
    char lng[130];
    memset(lng, 'a', 129);
    lng[129] = 0;
    d.tool = lng;
    d.tool_len = 129;
    j = render("1", &d);
    cr_assert_null(strstr(out, lng));
    cr_assert_not_null(strstr(out, "\"tool\":\"invalid\""));
    json_decref(j);
    d.tool_len = 128;
    j = render("1", &d);
    cr_assert_not_null(strstr(out, "\"tool\":\"aaaa"));
    json_decref(j);
    d.tool = "";
    d.tool_len = 0;
    j = render("1", &d);
    cr_assert_not_null(strstr(out, "\"tool\":\"invalid\""));
    json_decref(j);

    /* tool_len bounds the name: the bytes after it never appear */
    d.tool = "web/search:v2@x SECRET";
    d.tool_len = 15;
    j = render("1", &d);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(j, "error"), "data"),
                                                       "tool")),
                     "web/search:v2@x");
    cr_assert_null(strstr(out, "SECRET"));
    json_decref(j);
}

Test(denial, config_strings_escaped)
{
    tg_denial_t d = base(TG_DENY_UNAVAILABLE);
    d.agent = "we\"ird\\name\n\x01\x7f caf\xc3\xa9 \xff";
    d.config_path = "agents.we\"ird.x";
    d.request_id = "tg-\t1";
    d.unit = "calls";
    d.scope = "agent";
    d.limit = "agent";
    json_t *j = render("1", &d);
    json_t *data = json_object_get(json_object_get(j, "error"), "data");
    /* invalid UTF-8 becomes U+FFFD; everything else round-trips */
    cr_assert_str_eq(json_string_value(json_object_get(data, "agent")),
                     "we\"ird\\name\n\x01\x7f caf\xc3\xa9 \xef\xbf\xbd");
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")), "agents.we\"ird.x");
    cr_assert_str_eq(json_string_value(json_object_get(data, "request_id")), "tg-\t1");
    cr_assert_not_null(strstr(out, "\\u0001"));
    cr_assert_not_null(strstr(out, "\\n"));
    json_decref(j);
}

Test(denial, buffer_bounds)
{
    tg_denial_t d = base(TG_DENY_RATE);
    d.agent = "search";
    d.observed = 11;
    d.cap = 10;
    d.retry_after_ms = 5200;
    d.config_path = "agents.search.rate_limit";
    long n = tg_denial_mcp(out, sizeof out, "7", 1, &d);
    cr_assert_gt(n, 0);
    char full[4096];
    memcpy(full, out, (size_t)n + 1);
    char small[4096];
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        memset(small, 'Z', sizeof small);
        cr_assert_eq(tg_denial_mcp(small, cap, "7", 1, &d), -ENOSPC, "cap %zu", cap);
        cr_assert_eq(small[cap], 'Z', "no write past cap %zu", cap);
    }
    cr_assert_eq(tg_denial_mcp(small, (size_t)n + 1, "7", 1, &d), n, "the line and its NUL fit");
    cr_assert_str_eq(small, full);
    cr_assert_eq(tg_rpc_error(small, 10, NULL, 0, -32700, NULL), -ENOSPC);
}

Test(denial, rpc_errors)
{
    long n = tg_rpc_error(out, sizeof out, NULL, 0, -32700, NULL);
    const char *pe = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n";
    cr_assert_str_eq(out, pe);
    cr_assert_eq(n, (long)strlen(pe));
    tg_rpc_error(out, sizeof out, "\"b-1\"", 5, -32600, "batch holds tools/call: send calls one by one");
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":\"b-1\",\"error\":{\"code\":-32600,"
                          "\"message\":\"batch holds tools/call: send calls one by one\"}}\n");
    tg_rpc_error(out, sizeof out, "3", 1, -32600, NULL);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"}}\n");
    tg_rpc_error(out, sizeof out, "3", 1, -32600, "say \"no\"");
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "message")), "say \"no\"");
    json_decref(j);
}

/* ---- OpenSentience: agent.tool.result with status "failed" ---- */

static const tg_os_hdr_t os_hdr = {.id = "tg-m-9", .ts_ms = 1768564800123};

static json_t *render_os(const char *call_id, const tg_denial_t *d)
{
    long n = tg_denial_os(out, sizeof out, call_id, call_id ? strlen(call_id) : 0, d);
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(out));
    json_error_t err;
    json_t *j = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    cr_assert_not_null(j, "%s: %s", out, err.text);
    return j;
}

Test(denial, os_design_example_exact)
{
    tg_os_hdr_t h = os_hdr;
    h.in_reply_to = (tg_os_raw_t){"\"m-1\"", 5};
    h.request_id = (tg_os_raw_t){"\"req-1\"", 7};
    h.correlation_id = (tg_os_raw_t){"\"chat_session:abc123\"", 21};
    tg_denial_t d = design_example();
    d.os = &h;
    long n = tg_denial_os(out, sizeof out, "\"c-1\"", 5, &d);
    const char *want =
        "{\"v\":1,\"type\":\"agent.tool.result\",\"id\":\"tg-m-9\",\"ts\":\"2026-01-16T12:00:00.123Z\","
        "\"in_reply_to\":\"m-1\",\"request_id\":\"req-1\",\"correlation_id\":\"chat_session:abc123\","
        "\"payload\":{\"call_id\":\"c-1\",\"status\":\"failed\"},"
        "\"error\":{\"code\":\"rate_limit_exceeded\","
        "\"message\":\"rate limit exceeded: agent 'search' tool 'web' 11 calls in 1m > 10/minute; "
        "retry in 5.2s (raise agents.search.tools.web.rate_limit)\","
        "\"details\":{\"code\":\"rate_limit_exceeded\",\"limit\":\"rate\",\"scope\":\"tool\",\"agent\":\"search\","
        "\"tool\":\"web\",\"observed\":11,\"cap\":10,\"unit\":\"calls/minute\",\"retry_after_ms\":5200,"
        "\"config_path\":\"agents.search.tools.web.rate_limit\",\"request_id\":\"tg-3f2a9c\"},"
        "\"retryable\":true,\"where\":\"toolgate.router\"}}";
    cr_assert_str_eq(out, want);
    cr_assert_eq(n, (long)strlen(want));

    /* same message and the same fields as the MCP denial's data */
    json_t *j = render_os("\"c-1\"", &d);
    char os_line[4096];
    memcpy(os_line, out, strlen(out) + 1);
    json_t *m = render("7", &d);
    json_t *e = json_object_get(j, "error");
    json_t *me = json_object_get(m, "error");
    cr_assert(json_equal(json_object_get(e, "details"), json_object_get(me, "data")), "%s", os_line);
    cr_assert(json_equal(json_object_get(e, "message"), json_object_get(me, "message")));
    json_decref(m);
    json_decref(j);
}

Test(denial, os_minimal_and_every_code)
{
    tg_denial_t d = base(TG_DENY_FRAME);
    d.os = &os_hdr;
    long n = tg_denial_os(out, sizeof out, NULL, 0, &d);
    const char *want = "{\"v\":1,\"type\":\"agent.tool.result\",\"id\":\"tg-m-9\",\"ts\":\"2026-01-16T12:00:00.123Z\","
                       "\"payload\":{\"call_id\":null,\"status\":\"failed\"},\"error\":{\"code\":\"frame_too_large\","
                       "\"message\":\"frame too large\",\"details\":{\"code\":\"frame_too_large\"},"
                       "\"retryable\":false,\"where\":\"toolgate.router\"}}";
    cr_assert_str_eq(out, want);
    cr_assert_eq(n, (long)strlen(want));
    for (int c = 0; c < TG_DENY__COUNT; c++) {
        d = base((tg_deny_code_t)c);
        d.os = &os_hdr;
        json_t *j = render_os("\"x\\\"y\"", &d);
        json_t *e = json_object_get(j, "error");
        cr_assert_str_eq(json_string_value(json_object_get(e, "code")), tg_deny_name((tg_deny_code_t)c));
        cr_assert_eq(json_is_true(json_object_get(e, "retryable")), tg_deny_retryable((tg_deny_code_t)c));
        cr_assert_str_eq(json_string_value(json_object_get(e, "where")), "toolgate.router");
        json_t *p = json_object_get(j, "payload");
        cr_assert_str_eq(json_string_value(json_object_get(p, "call_id")), "x\"y");
        cr_assert_str_eq(json_string_value(json_object_get(p, "status")), "failed");
        cr_assert_eq(json_integer_value(json_object_get(j, "v")), 1);
        json_decref(j);
    }
    /* required: a valid code and the envelope */
    d = base(TG_DENY__COUNT);
    d.os = &os_hdr;
    cr_assert_eq(tg_denial_os(out, sizeof out, NULL, 0, &d), -EINVAL);
    d = base(TG_DENY_RATE);
    cr_assert_eq(tg_denial_os(out, sizeof out, NULL, 0, &d), -EINVAL, "no envelope");
    tg_os_hdr_t h = os_hdr;
    h.request_id = (tg_os_raw_t){"12", 2};
    d.os = &h;
    cr_assert_eq(tg_denial_os(out, sizeof out, NULL, 0, &d), -EINVAL, "echo not a string span");
}

Test(denial, os_secret_free_and_bounds)
{
    tg_denial_t d = base(TG_DENY_RATE);
    d.os = &os_hdr;
    d.agent = "search";
    const char *evil = "web\"},\"x\":\"CANARY-sk_live_123";
    d.tool = evil;
    d.tool_len = strlen(evil);
    d.observed = 6;
    d.cap = 5;
    d.retry_after_ms = 200;
    json_t *j = render_os("\"c\"", &d);
    cr_assert_null(strstr(out, "CANARY"), "%s", out);
    json_t *e = json_object_get(j, "error");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "details"), "tool")), "invalid");
    cr_assert_str_eq(json_string_value(json_object_get(e, "message")),
                     "rate limit exceeded: agent 'search' tool 'invalid' 6 > 5; retry in 200ms");
    json_decref(j);

    d.tool = "web";
    d.tool_len = 3;
    long n = tg_denial_os(out, sizeof out, "\"c\"", 3, &d);
    cr_assert_gt(n, 0);
    char full[4096];
    memcpy(full, out, (size_t)n + 1);
    char small[4096];
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        memset(small, 'Z', sizeof small);
        cr_assert_eq(tg_denial_os(small, cap, "\"c\"", 3, &d), -ENOSPC, "cap %zu", cap);
        cr_assert_eq(small[cap], 'Z', "no write past cap %zu", cap);
    }
    cr_assert_eq(tg_denial_os(small, (size_t)n + 1, "\"c\"", 3, &d), n);
    cr_assert_str_eq(small, full);
}
