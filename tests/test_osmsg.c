/* OpenSentience encoders: exact JSON of every message toolgate writes as
 * Core, the echoed envelope ids, escaping, required fields, buffer
 * bounds, framing with lenpfx, and the splice plan. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "router/codec/lenpfx.h"
#include "router/codec/osenv.h"
#include "router/codec/osmsg.h"

static char out[4096];

static tg_os_raw_t lit(const char *s)
{
    tg_os_raw_t r = {s, strlen(s)};
    return r;
}

static tg_os_hdr_t hdr(void)
{
    tg_os_hdr_t h = {.id = "tg-m-1", .ts_ms = 1768564800123};
    return h;
}

#define HEAD(type) "{\"v\":1,\"type\":\"" type "\",\"id\":\"tg-m-1\",\"ts\":\"2026-01-16T12:00:00.123Z\""

/* The message scans as a valid envelope and parses with jansson. */
static json_t *check(long n)
{
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(out));
    tg_os_env_t env;
    cr_assert_eq(tg_os_scan(out, (size_t)n, &env), 0, "%s", out);
    json_error_t err;
    json_t *j = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    cr_assert_not_null(j, "%s: %s", out, err.text);
    return j;
}

Test(osmsg, welcome_exact)
{
    tg_os_hdr_t h = hdr();
    h.in_reply_to = lit("\"hello-1\"");
    tg_os_welcome_t w = {
        .accepted_version = TG_OS_VERSION,
        .session_id = "tg-s-42",
        .heartbeat_interval_ms = 5000,
        .max_frame_bytes = 4194304,
        .core_version = "0.1.0",
        .instance_id = "host-a",
    };
    long n = tg_os_enc_welcome(out, sizeof out, &h, &w);
    const char *want = HEAD("core.welcome") ",\"in_reply_to\":\"hello-1\",\"payload\":{\"accepted_version\":1,"
                       "\"session_id\":\"tg-s-42\",\"heartbeat_interval_ms\":5000,\"max_frame_bytes\":4194304,"
                       "\"server\":{\"core_version\":\"0.1.0\",\"instance_id\":\"host-a\"}}}";
    cr_assert_str_eq(out, want);
    json_decref(check(n));

    w.core_version = NULL;
    tg_os_enc_welcome(out, sizeof out, &h, &w);
    cr_assert_not_null(strstr(out, ",\"server\":{\"instance_id\":\"host-a\"}}}"), "%s", out);
    w.instance_id = NULL;
    n = tg_os_enc_welcome(out, sizeof out, &h, &w);
    cr_assert_null(strstr(out, "server"));
    json_decref(check(n));
    w.session_id = NULL;
    cr_assert_eq(tg_os_enc_welcome(out, sizeof out, &h, &w), -EINVAL);
}

Test(osmsg, echoed_envelope_ids)
{
    tg_os_hdr_t h = hdr();
    h.in_reply_to = lit("\"m-9\"");
    h.request_id = lit("\"r\\\"1\"");
    h.correlation_id = lit("\"chat:abc\"");
    h.causation_id = lit("\"c\\u00e9\"");
    long n = tg_os_enc_tool_cancel(out, sizeof out, &h, "tg-c-7", "timeout");
    const char *want = HEAD("core.tool.cancel") ",\"in_reply_to\":\"m-9\",\"request_id\":\"r\\\"1\","
                       "\"correlation_id\":\"chat:abc\",\"causation_id\":\"c\\u00e9\","
                       "\"payload\":{\"call_id\":\"tg-c-7\",\"reason\":\"timeout\"}}";
    cr_assert_str_eq(out, want);
    json_t *j = check(n);
    cr_assert_str_eq(json_string_value(json_object_get(j, "causation_id")), "c\xc3\xa9");
    json_decref(j);

    /* an echoed value that is not a string span is refused */
    h.request_id = lit("7");
    cr_assert_eq(tg_os_enc_tool_cancel(out, sizeof out, &h, "c", NULL), -EINVAL);
    h.request_id = lit("\"");
    cr_assert_eq(tg_os_enc_tool_cancel(out, sizeof out, &h, "c", NULL), -EINVAL);
    h = hdr();
    h.id = NULL;
    cr_assert_eq(tg_os_enc_tool_cancel(out, sizeof out, &h, "c", NULL), -EINVAL);
    h = hdr();
    h.ts_ms = 253402300800000; /* year 10000 */
    cr_assert_eq(tg_os_enc_tool_cancel(out, sizeof out, &h, "c", NULL), -EINVAL);
}

Test(osmsg, cancel_without_reason_and_escaping)
{
    tg_os_hdr_t h = hdr();
    h.id = "tg-\"m\n";
    long n = tg_os_enc_tool_cancel(out, sizeof out, &h, "c\\1", NULL);
    cr_assert_str_eq(out, "{\"v\":1,\"type\":\"core.tool.cancel\",\"id\":\"tg-\\\"m\\n\","
                          "\"ts\":\"2026-01-16T12:00:00.123Z\",\"payload\":{\"call_id\":\"c\\\\1\"}}");
    json_t *j = check(n);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "payload"), "call_id")), "c\\1");
    json_decref(j);
    cr_assert_eq(tg_os_enc_tool_cancel(out, sizeof out, &h, NULL, NULL), -EINVAL);
}

Test(osmsg, error_message)
{
    tg_os_hdr_t h = hdr();
    h.in_reply_to = lit("\"hello-1\"");
    long n = tg_os_enc_error(out, sizeof out, &h, "core.welcome", "protocol.unauthorized",
                             "session token rejected", false);
    const char *want = HEAD("core.welcome") ",\"in_reply_to\":\"hello-1\",\"payload\":{},"
                       "\"error\":{\"code\":\"protocol.unauthorized\",\"message\":\"session token rejected\","
                       "\"retryable\":false,\"where\":\"toolgate.router\"}}";
    cr_assert_str_eq(out, want);
    json_decref(check(n));
    n = tg_os_enc_error(out, sizeof out, &h, "core.goodbye", "shutting_down", "draining", true);
    cr_assert_not_null(strstr(out, "\"retryable\":true"));
    json_decref(check(n));
    cr_assert_eq(tg_os_enc_error(out, sizeof out, &h, "x", NULL, "m", false), -EINVAL);
    cr_assert_eq(tg_os_enc_error(out, sizeof out, &h, "x", "c", NULL, false), -EINVAL);
    cr_assert_eq(tg_os_enc_error(out, sizeof out, &h, NULL, "c", "m", false), -EINVAL);
}

Test(osmsg, tools_registered)
{
    tg_os_hdr_t h = hdr();
    h.in_reply_to = lit("\"reg-1\"");
    tg_os_raw_t reg[] = {lit("\"a/web\""), lit("\"a\\/news\"")};
    tg_os_reject_t rej[] = {
        {.tool_id = lit("\"b/x\""), .code = "tool.invalid_id", .message = "tool_id must be <agent_id>/<tool>"},
        {.tool_id = {NULL, 0}, .code = "tool.invalid_id", .message = "tool_id missing"},
    };
    long n = tg_os_enc_tools_registered(out, sizeof out, &h, reg, 2, rej, 2);
    const char *want = HEAD("core.tools.registered") ",\"in_reply_to\":\"reg-1\",\"payload\":{"
                       "\"registered\":[\"a/web\",\"a\\/news\"],\"rejected\":["
                       "{\"tool_id\":\"b/x\",\"error\":{\"code\":\"tool.invalid_id\",\"message\":"
                       "\"tool_id must be <agent_id>/<tool>\",\"retryable\":false,\"where\":\"toolgate.router\"}},"
                       "{\"tool_id\":null,\"error\":{\"code\":\"tool.invalid_id\",\"message\":\"tool_id missing\","
                       "\"retryable\":false,\"where\":\"toolgate.router\"}}]}}";
    cr_assert_str_eq(out, want);
    json_t *j = check(n);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(json_object_get(j, "payload"), "registered"), 1)),
                     "a/news");
    json_decref(j);

    n = tg_os_enc_tools_registered(out, sizeof out, &h, NULL, 0, NULL, 0);
    cr_assert_str_eq(out, HEAD("core.tools.registered") ",\"in_reply_to\":\"reg-1\",\"payload\":{\"registered\":[]}}");
    json_decref(check(n));

    tg_os_raw_t bad[] = {lit("7")};
    cr_assert_eq(tg_os_enc_tools_registered(out, sizeof out, &h, bad, 1, NULL, 0), -EINVAL);
    tg_os_reject_t badr[] = {{.tool_id = lit("{}"), .code = "c", .message = "m"}};
    cr_assert_eq(tg_os_enc_tools_registered(out, sizeof out, &h, NULL, 0, badr, 1), -EINVAL);
    badr[0].tool_id = lit("\"x\"");
    badr[0].code = NULL;
    cr_assert_eq(tg_os_enc_tools_registered(out, sizeof out, &h, NULL, 0, badr, 1), -EINVAL);
}

Test(osmsg, tool_call)
{
    tg_os_hdr_t h = hdr();
    h.request_id = lit("\"req-1\"");
    tg_os_call_t c = {
        .call_id = "tg-c-1",
        .tool_id = lit("\"search/web\""),
        .input = lit("{\"q\":\"x\",\"n\":[1,{}]}"),
        .timeout_ms = 30000,
        .idempotency_key = lit("\"k-1\""),
    };
    long n = tg_os_enc_tool_call(out, sizeof out, &h, &c);
    const char *want = HEAD("core.tool.call") ",\"request_id\":\"req-1\",\"payload\":{\"call_id\":\"tg-c-1\","
                       "\"tool_id\":\"search/web\",\"input\":{\"q\":\"x\",\"n\":[1,{}]},\"timeout_ms\":30000,"
                       "\"idempotency_key\":\"k-1\"}}";
    cr_assert_str_eq(out, want);
    json_decref(check(n));
    tg_os_env_t env;
    tg_os_scan(out, (size_t)n, &env);
    cr_assert_eq(env.type, TG_OS_CORE_TOOL_CALL);
    cr_assert_eq(env.timeout_ms, 30000);

    c.timeout_ms = TG_OS_NO_TIMEOUT;
    c.idempotency_key = (tg_os_raw_t){NULL, 0};
    n = tg_os_enc_tool_call(out, sizeof out, &h, &c);
    cr_assert_str_eq(out, HEAD("core.tool.call") ",\"request_id\":\"req-1\",\"payload\":{\"call_id\":\"tg-c-1\","
                          "\"tool_id\":\"search/web\",\"input\":{\"q\":\"x\",\"n\":[1,{}]}}}");
    json_decref(check(n));
    c.timeout_ms = 0;
    n = tg_os_enc_tool_call(out, sizeof out, &h, &c);
    cr_assert_not_null(strstr(out, "\"timeout_ms\":0}"));

    tg_os_call_t bad = c;
    bad.input = lit("[]");
    cr_assert_eq(tg_os_enc_tool_call(out, sizeof out, &h, &bad), -EINVAL);
    bad = c;
    bad.tool_id = (tg_os_raw_t){NULL, 0};
    cr_assert_eq(tg_os_enc_tool_call(out, sizeof out, &h, &bad), -EINVAL);
    bad = c;
    bad.call_id = NULL;
    cr_assert_eq(tg_os_enc_tool_call(out, sizeof out, &h, &bad), -EINVAL);
    bad = c;
    bad.idempotency_key = lit("5");
    cr_assert_eq(tg_os_enc_tool_call(out, sizeof out, &h, &bad), -EINVAL);
}

Test(osmsg, buffer_bounds_and_framing)
{
    tg_os_hdr_t h = hdr();
    tg_os_welcome_t w = {.accepted_version = 1, .session_id = "s", .heartbeat_interval_ms = 1,
                         .max_frame_bytes = 2};
    long n = tg_os_enc_welcome(out, sizeof out, &h, &w);
    cr_assert_gt(n, 0);
    char full[4096];
    memcpy(full, out, (size_t)n + 1);
    char small[4096];
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        memset(small, 'Z', sizeof small);
        cr_assert_eq(tg_os_enc_welcome(small, cap, &h, &w), -ENOSPC, "cap %zu", cap);
        cr_assert_eq(small[cap], 'Z', "no write past cap %zu", cap);
    }
    cr_assert_eq(tg_os_enc_welcome(small, (size_t)n + 1, &h, &w), n);
    cr_assert_str_eq(small, full);

    /* framed as osmsg.h says, it decodes back through the codec */
    char fr[4096];
    long m = tg_os_enc_welcome(fr + TG_LENPFX_HDR, sizeof fr - TG_LENPFX_HDR, &h, &w);
    cr_assert_eq(m, n);
    cr_assert_eq(tg_lenpfx_header((unsigned char *)fr, (uint64_t)m), 0);
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 4096);
    size_t pos = 0, start, end;
    uint64_t total;
    cr_assert_eq(tg_lenpfx_next(&c, fr, TG_LENPFX_HDR + (size_t)m, &pos, &start, &end, &total), TG_LP_FRAME);
    cr_assert_eq(end - start, (size_t)m);
    cr_assert_eq(memcmp(fr + start, full, (size_t)m), 0);
}

Test(osmsg, splice_plan)
{
    /* the caller's call_id "c-1" becomes toolgate's "tg-000042" */
    const char *f = "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m\",\"ts\":\"t\","
                    "\"payload\":{\"call_id\":\"c-1\",\"tool_id\":\"a/b\",\"input\":{}}}";
    size_t flen = strlen(f);
    tg_os_env_t env;
    cr_assert_eq(tg_os_scan(f, flen, &env), 0);
    const char *repl = "\"tg-000042\"";
    tg_os_splice_t sp;
    cr_assert_eq(tg_os_splice_plan(flen, env.call_id, strlen(repl), &sp), 0);
    cr_assert_eq(sp.head_len, env.call_id.off);
    cr_assert_eq(sp.tail_off, env.call_id.off + 5);
    /* assemble the gather list and read it back */
    char b[512];
    size_t n = 0;
    memcpy(b, sp.hdr, 4);
    n = 4;
    memcpy(b + n, f, sp.head_len);
    n += sp.head_len;
    memcpy(b + n, repl, strlen(repl));
    n += strlen(repl);
    memcpy(b + n, f + sp.tail_off, flen - sp.tail_off);
    n += flen - sp.tail_off;
    tg_lenpfx_t c;
    tg_lenpfx_init(&c, 4096);
    size_t pos = 0, start, end;
    uint64_t total;
    cr_assert_eq(tg_lenpfx_next(&c, b, n, &pos, &start, &end, &total), TG_LP_FRAME);
    cr_assert_eq(pos, n, "the header announces exactly the spliced length");
    cr_assert_eq(tg_os_scan(b + start, end - start, &env), 0);
    cr_assert_eq(memcmp(b + start + env.call_id.off, repl, strlen(repl)), 0);
    cr_assert_eq(env.tool_id.type, TG_J_STRING);

    tg_jspan_t out_of = {.off = 10, .len = 5, .type = TG_J_STRING};
    cr_assert_eq(tg_os_splice_plan(12, out_of, 3, &sp), -EINVAL);
    out_of.off = 13;
    out_of.len = 0;
    cr_assert_eq(tg_os_splice_plan(12, out_of, 3, &sp), -EINVAL);
    tg_jspan_t all = {.off = 0, .len = 10, .type = TG_J_STRING};
    cr_assert_eq(tg_os_splice_plan(10, all, (size_t)UINT32_MAX, &sp), 0, "exactly 4 GiB - 1");
    cr_assert_eq(tg_os_splice_plan(10, all, (size_t)UINT32_MAX + 1, &sp), -EMSGSIZE);
    cr_assert_eq(tg_os_splice_plan(20, all, (size_t)UINT32_MAX - 9, &sp), -EMSGSIZE);
}

/* Assemble the frame tg_os_fwd_plan plans for <f> into <b>: its length. */
static size_t fwd_assemble(const char *f, const tg_os_fwd_t *p, char *b)
{
    size_t flen = strlen(f), n = 0, pos = 0;
    for (size_t i = 0; i < p->n; i++) {
        memcpy(b + n, f + pos, p->e[i].off - pos);
        n += p->e[i].off - pos;
        memcpy(b + n, p->e[i].text, p->e[i].text_len);
        n += p->e[i].text_len;
        pos = p->e[i].off + p->e[i].len;
    }
    memcpy(b + n, f + pos, flen - pos);
    n += flen - pos;
    b[n] = '\0';
    size_t hdr =
        (size_t)p->hdr[0] << 24 | (size_t)p->hdr[1] << 16 | (size_t)p->hdr[2] << 8 | p->hdr[3];
    cr_assert_eq(hdr, n, "the header announces exactly the forwarded length");
    return n;
}

/* Forward the call <f> with deadline <ms>, the request_id <rid> (NULL:
 * the caller's own) and <max> bytes of room; the frame sent, in <b>; the
 * count of edits (after joining). */
static size_t fwd(const char *f, uint64_t ms, const char *rid, uint64_t max, char *b)
{
    tg_os_env_t env;
    cr_assert_eq(tg_os_scan(f, strlen(f), &env), 0, "%s", f);
    tg_os_fwd_in_t in;
    tg_os_fwd_in_from_env(&in, f, strlen(f), &env);
    in.new_call_id = lit("\"tg-2a\"");
    in.timeout_ms = ms;
    in.request_id = rid ? lit(rid) : (tg_os_raw_t){NULL, 0};
    in.max_frame = max;
    tg_os_fwd_t p;
    cr_assert_eq(tg_os_fwd_plan(&in, &p), 0);
    size_t n = fwd_assemble(f, &p, b);
    cr_assert_eq(tg_os_scan(b, n, &env), 0, "%s", b);
    return p.n;
}

#define CALL_HEAD "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m\",\"ts\":\"t\","

Test(osmsg, forward_edits)
{
    char b[1024];
    /* The caller's timeout_ms is overwritten with the deadline left. */
    size_t n =
        fwd(CALL_HEAD "\"payload\":{\"call_id\":\"c-1\",\"timeout_ms\":60000,\"tool_id\":\"a/b\","
                      "\"input\":{}}}",
            2000, NULL, UINT64_MAX, b);
    cr_assert_eq(n, 1, "edits a few bytes apart go out as one");
    cr_assert_str_eq(b, CALL_HEAD "\"payload\":{\"call_id\":\"tg-2a\",\"timeout_ms\":2000,"
                                  "\"tool_id\":\"a/b\",\"input\":{}}}");
    /* Before the call_id, and over null. */
    fwd(CALL_HEAD "\"payload\":{\"timeout_ms\":null,\"call_id\":\"c-1\",\"tool_id\":\"a/b\","
                  "\"input\":{}}}",
        15000, NULL, UINT64_MAX, b);
    cr_assert_str_eq(b, CALL_HEAD "\"payload\":{\"timeout_ms\":15000,\"call_id\":\"tg-2a\","
                                  "\"tool_id\":\"a/b\",\"input\":{}}}");
    /* None asked: added as the payload's first member; the assigned
     * request_id as the envelope's. */
    const char *bare =
        CALL_HEAD "\"payload\": {\"call_id\":\"c-1\",\"tool_id\":\"a/b\",\"input\":{}}}";
    n = fwd(bare, 0, "\"tg-2a\"", UINT64_MAX, b);
    cr_assert_eq(n, 2,
                 "the request_id (joined with the frame's first byte) is too far from the rest");
    cr_assert_str_eq(b, "{\"request_id\":\"tg-2a\",\"v\":1,\"type\":\"core.tool.call\",\"id\":"
                        "\"m\",\"ts\":\"t\",\"payload\": {\"timeout_ms\":0,\"call_id\":\"tg-2a\","
                        "\"tool_id\":\"a/b\",\"input\":{}}}");
    /* No room over max_frame: the request_id is left out first, then the
     * timeout (overwriting a number never grows the frame). */
    size_t blen = strlen(bare) + 2; /* the call_id grows by 2 */
    fwd(bare, 2000, "\"tg-2a\"", blen + 18, b);
    cr_assert_str_eq(b, CALL_HEAD "\"payload\": {\"timeout_ms\":2000,\"call_id\":\"tg-2a\","
                                  "\"tool_id\":\"a/b\",\"input\":{}}}");
    fwd(bare, 2000, "\"tg-2a\"", blen + 17, b);
    cr_assert_str_eq(b, CALL_HEAD "\"payload\": {\"call_id\":\"tg-2a\",\"tool_id\":\"a/b\","
                                  "\"input\":{}}}");
    /* A caller's null request_id is overwritten, not repeated. */
    fwd("{\"request_id\":null,\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m\",\"ts\":\"t\","
        "\"payload\":{\"call_id\":\"c-1\",\"tool_id\":\"a/b\",\"input\":{}}}",
        5, "\"tg-2a\"", UINT64_MAX, b);
    cr_assert_eq(strstr(b, "null"), NULL, "%s", b);
    cr_assert_not_null(strstr(b, "{\"request_id\":\"tg-2a\",\"v\":1"), "%s", b);
}

Test(osmsg, forward_plan_checks)
{
    const char *f =
        CALL_HEAD "\"payload\":{\"call_id\":\"c-1\",\"timeout_ms\":9,\"tool_id\":\"a/b\","
                  "\"input\":{}}}";
    tg_os_env_t env;
    cr_assert_eq(tg_os_scan(f, strlen(f), &env), 0);
    tg_os_fwd_in_t in;
    tg_os_fwd_in_from_env(&in, f, strlen(f), &env);
    in.new_call_id = lit("\"tg-2a\"");
    in.timeout_ms = 5;
    in.max_frame = UINT64_MAX;
    tg_os_fwd_t p;
    cr_assert_eq(tg_os_fwd_plan(&in, &p), 0);
    tg_os_fwd_in_t bad = in;
    bad.timeout_off = env.call_id.off + 1; /* inside the call_id */
    cr_assert_eq(tg_os_fwd_plan(&bad, &p), -EINVAL, "overlapping spans");
    bad = in;
    bad.timeout_off = strlen(f);
    bad.timeout_len = 2;
    cr_assert_eq(tg_os_fwd_plan(&bad, &p), -EINVAL, "past the frame");
    bad = in;
    bad.payload_off = 1;
    cr_assert_eq(tg_os_fwd_plan(&bad, &p), -EINVAL, "no object at the payload's offset");
    bad = in;
    char big[TG_OS_FWD_ID_MAX + 8];
    memset(big, 'x', sizeof big);
    bad.new_call_id = (tg_os_raw_t){big, sizeof big};
    cr_assert_eq(tg_os_fwd_plan(&bad, &p), -EINVAL, "an id over TG_OS_FWD_ID_MAX");
    bad = in;
    bad.request_id = (tg_os_raw_t){big, sizeof big};
    cr_assert_eq(tg_os_fwd_plan(&bad, &p), -EINVAL);
}

Test(osmsg, result_made_by_toolgate)
{
    tg_os_hdr_t h = hdr();
    h.in_reply_to = lit("\"m-3\"");
    long n = tg_os_enc_result(out, sizeof out, &h, lit("\"c-1\""), "failed", "tool.not_found",
                              "agent 'os' has not registered tool 'x'", false);
    const char *want = HEAD("agent.tool.result") ",\"in_reply_to\":\"m-3\",\"payload\":{\"call_id\":"
                       "\"c-1\",\"status\":\"failed\"},\"error\":{\"code\":\"tool.not_found\","
                       "\"message\":\"agent 'os' has not registered tool 'x'\",\"retryable\":false,"
                       "\"where\":\"toolgate.router\"}}";
    cr_assert_str_eq(out, want);
    json_t *j = check(n);
    json_decref(j);
    tg_os_env_t env;
    cr_assert_eq(tg_os_scan(out, (size_t)n, &env), 0);
    cr_assert_eq(env.type, TG_OS_AGENT_TOOL_RESULT);
    cr_assert_eq(env.status, TG_OS_ST_FAILED);

    /* canceled, no error; a missing call_id is null */
    h = hdr();
    n = tg_os_enc_result(out, sizeof out, &h, (tg_os_raw_t){NULL, 0}, "canceled", NULL, NULL, false);
    cr_assert_str_eq(out, HEAD("agent.tool.result") ",\"payload\":{\"call_id\":null,\"status\":"
                          "\"canceled\"}}");
    cr_assert_eq((size_t)n, strlen(out));
    json_error_t err;
    json_t *nj = json_loadb(out, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    cr_assert_not_null(nj, "%s", err.text);
    json_decref(nj);

    /* a call_id that is not a string span, a code without a message */
    cr_assert_eq(tg_os_enc_result(out, sizeof out, &h, lit("7"), "failed", NULL, NULL, false),
                 -EINVAL);
    cr_assert_eq(tg_os_enc_result(out, sizeof out, &h, lit("\"c\""), "failed", "x", NULL, false),
                 -EINVAL);
    cr_assert_eq(tg_os_enc_result(out, sizeof out, &h, lit("\"c\""), NULL, NULL, NULL, false),
                 -EINVAL);
    /* nothing partial when it does not fit */
    cr_assert_eq(tg_os_enc_result(out, 40, &h, lit("\"c\""), "canceled", NULL, NULL, false),
                 -ENOSPC);
}
