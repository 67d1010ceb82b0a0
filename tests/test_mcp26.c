/* MCP 2026-07-28 request metadata (router/codec/mcp26.c): the Base64
 * sentinel, the era of a POST, headers against the body, the x-mcp-header
 * map of a tool and the 400 error bodies. Examples are the spec's
 * (basic/transports/streamable-http.mdx, server/tools.mdx,
 * schema/2026-07-28/examples). */
#include <criterion/criterion.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/mcp26.h"

/* An argument value that must never reach a message. */
#define CANARY "CANARY-7f3a-s3cr3t"

/* ---- helpers ---- */

static int dec(const char *v, char *out, size_t cap, size_t *n)
{
    return tg_mcp26_value_decode(v, strlen(v), out, cap, n);
}

static int enc(const char *v, char *out, size_t cap)
{
    size_t n = 0;
    int rc = tg_mcp26_value_encode(v, strlen(v), out, cap, &n);
    if (rc >= 0)
        cr_assert_eq(strlen(out), n);
    return rc;
}

static tg_mcp26_body_t body_of(const char *json)
{
    tg_mcp26_body_t b;
    tg_mcp26_fault_t f;
    int rc = tg_mcp26_body_scan(json, strlen(json), &b, &f);
    cr_assert_eq(rc, 0, "body_scan: %s", f.msg);
    return b;
}

static json_t *json_of(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert_not_null(j, "%s: %s", text, e.text);
    return j;
}

static int xmap_of(const char *tool, tg_mcp26_xmap_t *m, char *msg, size_t cap)
{
    json_t *t = json_of(tool);
    int rc = tg_mcp26_xmap_build(t, m, msg, cap);
    json_decref(t);
    return rc;
}

/* The 2026 meta every example request carries (streamable-http.mdx). */
#define META                                                                                       \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"ExampleClient\",\"version\":\"1.0.0\"},"   \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

#define HDR(n, v) ((tg_mcp26_hdr_t){(n), sizeof(n) - 1, (v), sizeof(v) - 1})

static tg_mcp26_hdrs_t hdrs(const char *method, const char *name, const tg_mcp26_hdr_t *p,
                            size_t np)
{
    tg_mcp26_hdrs_t h = {
        .method = method,
        .method_len = method != NULL ? strlen(method) : 0,
        .name = name,
        .name_len = name != NULL ? strlen(name) : 0,
        .params = p,
        .nparams = np,
    };
    return h;
}

/* Check, and on failure assert the fault is a HeaderMismatch whose message
 * holds <want> and no canary. Returns the check's result. */
static int check(const tg_mcp26_hdrs_t *h, const char *body, const tg_mcp26_xmap_t *m,
                 const char *want)
{
    tg_mcp26_body_t b = body_of(body);
    tg_mcp26_fault_t f;
    memset(&f, 0, sizeof f);
    int rc = tg_mcp26_check(h, &b, m, &f);
    if (want == NULL) {
        cr_assert_eq(rc, 0, "%s: %s", body, f.msg);
        return rc;
    }
    cr_assert_eq(rc, -EBADMSG, "%s: expected a refusal (%s)", body, want);
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);
    cr_assert(strncmp(f.msg, "Header mismatch: ", 17) == 0, "%s", f.msg);
    cr_assert(strstr(f.msg, want) != NULL, "'%s' lacks '%s'", f.msg, want);
    cr_assert(strstr(f.msg, "CANARY") == NULL, "a value leaked: %s", f.msg);
    char out[1024];
    long n = tg_mcp26_error_json(&f, "1", 1, out, sizeof out);
    cr_assert_gt(n, 0);
    cr_assert(strstr(out, "CANARY") == NULL, "a value leaked: %s", out);
    return rc;
}

/* ---- Base64 sentinel ---- */

/* streamable-http.mdx "Value Encoding", the encoding examples table. */
static const struct {
    const char *orig, *wire;
} spec_table[] = {
    {"us-west1", "us-west1"},
    {"Hello, \xe4\xb8\x96\xe7\x95\x8c", "=?base64?SGVsbG8sIOS4lueVjA==?="},
    {" padded ", "=?base64?IHBhZGRlZCA=?="},
    {"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
    {"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
};

Test(mcp26, sentinel_spec_examples_encode_and_decode)
{
    for (size_t i = 0; i < sizeof spec_table / sizeof spec_table[0]; i++) {
        char out[128];
        size_t n;
        int rc = enc(spec_table[i].orig, out, sizeof out);
        cr_assert_eq(rc, i == 0 ? 0 : 1, "%s", spec_table[i].wire);
        cr_assert_str_eq(out, spec_table[i].wire);
        rc = dec(spec_table[i].wire, out, sizeof out, &n);
        cr_assert_eq(rc, i == 0 ? 0 : 1, "%s", spec_table[i].wire);
        cr_assert_eq(n, strlen(spec_table[i].orig));
        cr_assert_str_eq(out, spec_table[i].orig);
    }
}

Test(mcp26, sentinel_needs_encoding_rules)
{
    cr_assert_not(tg_mcp26_value_needs_b64("a b~!", 5));
    cr_assert_not(tg_mcp26_value_needs_b64("", 0));
    cr_assert(tg_mcp26_value_needs_b64("a\tb", 3), "tab is a control character");
    cr_assert(tg_mcp26_value_needs_b64("a\x7f", 2), "DEL");
    cr_assert(tg_mcp26_value_needs_b64("caf\xc3\xa9", 5), "non-ASCII");
    cr_assert(tg_mcp26_value_needs_b64(" a", 2));
    cr_assert(tg_mcp26_value_needs_b64("a ", 2));
    cr_assert(tg_mcp26_value_needs_b64("=?base64?=", 10), "prefix and suffix overlap");
    cr_assert_not(tg_mcp26_value_needs_b64("=?base64?abc", 12), "no suffix");
    cr_assert_not(tg_mcp26_value_needs_b64("=?BASE64?abc?=", 14), "markers are case-sensitive");
    char out[64];
    size_t n = 0;
    cr_assert_eq(tg_mcp26_value_encode("=?base64?=", 10, out, sizeof out, &n), 1);
    cr_assert_eq(dec(out, out, sizeof out, &n), 1);
    cr_assert_eq(n, 10);
    cr_assert_eq(memcmp(out, "=?base64?=", 10), 0);
    char nul[3] = {'a', '\0', 'b'};
    cr_assert_eq(tg_mcp26_value_encode(nul, 3, out, sizeof out, &n), 1);
    cr_assert_str_eq(out, "=?base64?YQBi?=");
    cr_assert_eq(tg_mcp26_value_encode(nul, 3, out, TG_MCP26_B64_LEN(3), &n), -ENOSPC,
                 "room for the NUL too");
    cr_assert_eq(tg_mcp26_value_encode(nul, 3, out, TG_MCP26_B64_LEN(3) + 1, &n), 1);
}

Test(mcp26, sentinel_decode_refuses_malformed_values)
{
    char out[64];
    size_t n;
    const char *bad[] = {
        "=?base64?abc?=",      /* not a multiple of 4 */
        "=?base64?ab!d?=",     /* outside the alphabet */
        "=?base64?YW Jj?=",    /* white space inside */
        "=?base64?QR==?=",     /* non-canonical: unused bits set */
        "=?base64?QUI=QUI=?=", /* padding inside */
        "=?base64?Q===?=",     /* three pads */
        "=?base64?=",          /* prefix and suffix overlap */
        "=?base64?YWJj?=?=",   /* '?' and '=' in the payload */
        "=?base64?YWJj-_==?=", /* base64url is not the standard alphabet */
        "a\x01z",              /* a control character, plain */
        "tab\there",           /* tab, plain: an encoder encodes it */
        "caf\xc3\xa9",         /* non-ASCII, plain */
        " lead",
        "trail ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(dec(bad[i], out, sizeof out, &n), -EINVAL, "%s", bad[i]);

    static const char empty[] = {'=', '?', 'b', 'a', 's', 'e', '6', '4', '?', '?', '=', '\0'};
    cr_assert_eq(dec(empty, out, sizeof out, &n), 1, "an empty payload (spelt out: a trigraph)");
    cr_assert_eq(n, 0);
    cr_assert_eq(dec("", out, sizeof out, &n), 0);
    cr_assert_eq(dec("=?BASE64?SGk=?=", out, sizeof out, &n), 0, "not the sentinel: plain");
    cr_assert_str_eq(out, "=?BASE64?SGk=?=");
    cr_assert_eq(dec("=?base64?abc", out, sizeof out, &n), 0, "no suffix: plain");
    cr_assert_eq(dec("=?base64?YWJj?=", out, 4, &n), 1);
    cr_assert_str_eq(out, "abc");
    cr_assert_eq(dec("=?base64?YWJj?=", out, 3, &n), -ENOSPC);
    cr_assert_eq(dec("=?base64?YWI=?=", out, 3, &n), 1, "the exact decoded length + 1 fits");
    cr_assert_str_eq(out, "ab");
    cr_assert_eq(dec("=?base64?YQ==?=", out, 2, &n), 1);
    cr_assert_eq(dec("=?base64?YQ==?=", out, 1, &n), -ENOSPC);
    cr_assert_eq(dec("abc", out, 3, &n), -ENOSPC);

    static char big[TG_MCP26_VALUE_MAX + 2];
    memset(big, 'a', TG_MCP26_VALUE_MAX + 1);
    static char dst[TG_MCP26_VALUE_MAX + 2];
    cr_assert_eq(tg_mcp26_value_decode(big, TG_MCP26_VALUE_MAX, dst, sizeof dst, &n), 0);
    cr_assert_eq(tg_mcp26_value_decode(big, TG_MCP26_VALUE_MAX + 1, dst, sizeof dst, &n), -E2BIG);
}

Test(mcp26, sentinel_round_trips_every_byte_and_length)
{
    unsigned char v[300];
    for (size_t i = 0; i < sizeof v; i++)
        v[i] = (unsigned char)(i * 7 + 3);
    for (size_t len = 0; len <= sizeof v; len++) {
        char wire[TG_MCP26_B64_LEN(300) + 1], back[301];
        size_t n, m;
        int rc = tg_mcp26_value_encode((const char *)v, len, wire, sizeof wire, &n);
        cr_assert_geq(rc, 0);
        cr_assert_eq(tg_mcp26_value_decode(wire, n, back, sizeof back, &m), rc, "len %zu", len);
        cr_assert_eq(m, len);
        cr_assert_eq(memcmp(back, v, len), 0, "len %zu", len);
    }
}

/* ---- versions and era ---- */

Test(mcp26, one_list_of_versions)
{
    const char *want[] = {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
    size_t i = 0;
    for (; tg_mcp_versions[i] != NULL; i++) {
        cr_assert_lt(i, 5);
        cr_assert_str_eq(tg_mcp_versions[i], want[i]);
    }
    cr_assert_eq(i, 5);
    cr_assert_eq(tg_mcp26_version_era("2026-07-28", 10), TG_MCP26_MODERN);
    cr_assert_eq(tg_mcp26_version_era("2024-11-05", 10), TG_MCP26_LEGACY);
    cr_assert_eq(tg_mcp26_version_era("2026-07-2", 9), -ENOENT);
    cr_assert_eq(tg_mcp26_version_era("2026-07-28 ", 11), -ENOENT);
}

static int era(const char *hv, const char *body, tg_mcp26_fault_t *f)
{
    memset(f, 0, sizeof *f);
    if (body == NULL)
        return tg_mcp26_era(hv, hv != NULL ? strlen(hv) : 0, NULL, f);
    tg_mcp26_body_t b = body_of(body);
    return tg_mcp26_era(hv, hv != NULL ? strlen(hv) : 0, &b, f);
}

#define CALL_2026 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}"

Test(mcp26, era_before_the_body)
{
    tg_mcp26_fault_t f;
    cr_assert_eq(era(NULL, NULL, &f), TG_MCP26_LEGACY, "no header: 2025-03-26");
    cr_assert_eq(era("2025-06-18", NULL, &f), TG_MCP26_LEGACY);
    cr_assert_eq(era("2026-07-28", NULL, &f), TG_MCP26_MODERN);
    cr_assert_eq(era("1900-01-01", NULL, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_UNSUPPORTED_VERSION);
    cr_assert_str_eq(f.requested, "1900-01-01");
    cr_assert_str_eq(f.msg, "Unsupported protocol version");
    cr_assert_eq(era("2026-07-28\r\nX: y", NULL, &f), -EBADMSG);
    cr_assert_str_eq(f.requested, "2026-07-28??X: y", "made printable");
    char longv[100];
    memset(longv, '9', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    cr_assert_eq(era(longv, NULL, &f), -EBADMSG);
    cr_assert_eq(strlen(f.requested), TG_MCP26_VERSION_MAX, "cut to the bound");
}

Test(mcp26, era_after_the_body)
{
    tg_mcp26_fault_t f;
    cr_assert_eq(era("2026-07-28", CALL_2026, &f), TG_MCP26_MODERN);

    cr_assert_eq(era(NULL, CALL_2026, &f), -EBADMSG, "a 2026 body without its header");
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);
    cr_assert(strstr(f.msg, "MCP-Protocol-Version header missing") != NULL, "%s", f.msg);

    cr_assert_eq(era("2025-11-25", CALL_2026, &f), -EBADMSG, "header and body disagree");
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);
    cr_assert(strstr(f.msg, "does not match") != NULL, "%s", f.msg);

    const char *old = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                      "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\"}}}";
    cr_assert_eq(era(NULL, old, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_UNSUPPORTED_VERSION);
    cr_assert_str_eq(f.requested, "1900-01-01");
    cr_assert_eq(era("1900-01-01", old, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_UNSUPPORTED_VERSION);
    cr_assert_eq(era("2026-07-28", old, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);

    const char *bare = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}";
    cr_assert_eq(era("2026-07-28", bare, &f), -EBADMSG, "a 2026 request needs its _meta");
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);
    cr_assert_eq(era("2025-11-25", bare, &f), TG_MCP26_LEGACY, "a session's request");
    cr_assert_eq(era(NULL, bare, &f), TG_MCP26_LEGACY, "2025-03-26");

    const char *notif = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}";
    cr_assert_eq(era("2026-07-28", notif, &f), TG_MCP26_MODERN, "no header rule for these");

    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    cr_assert_eq(era(NULL, init, &f), TG_MCP26_LEGACY);
    cr_assert_eq(era("2026-07-28", init, &f), TG_MCP26_LEGACY, "initialize selects legacy");

    const char *num = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                      "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":20260728}}}";
    cr_assert_eq(era("2026-07-28", num, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_HEADER_MISMATCH);

    const char *esc =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-\\u00328\"}}}";
    cr_assert_eq(era("2026-07-28", esc, &f), TG_MCP26_MODERN, "the body string is decoded");
}

Test(mcp26, body_scan_refusals)
{
    tg_mcp26_body_t b;
    tg_mcp26_fault_t f;
    const char *notjson = "{\"id\":1,";
    cr_assert_eq(tg_mcp26_body_scan(notjson, strlen(notjson), &b, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_PARSE_ERROR);
    const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}]";
    cr_assert_eq(tg_mcp26_body_scan(batch, strlen(batch), &b, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_INVALID_REQUEST);
    const char *resp = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    cr_assert_eq(tg_mcp26_body_scan(resp, strlen(resp), &b, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_INVALID_REQUEST);
    const char *dupuri = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\","
                         "\"params\":{\"uri\":\"a:b\",\"uri\":\"c:d\"}}";
    cr_assert_eq(tg_mcp26_body_scan(dupuri, strlen(dupuri), &b, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_INVALID_REQUEST);
    cr_assert_str_eq(f.msg, "invalid request: params.uri repeats");
    cr_assert_eq(b.id.type, TG_J_NUMBER, "the id to answer with");
    const char *cut = "{\"jsonrpc\":\"2.0\",\"id\":\"x7\",\"method\":\"tools/call\",\"params\":{";
    cr_assert_eq(tg_mcp26_body_scan(cut, strlen(cut), &b, &f), -EBADMSG);
    cr_assert_eq(f.code, TG_MCP26_PARSE_ERROR);
    cr_assert_eq(b.id.type, TG_J_STRING, "read before the fault");
    const char *dupver = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                         "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                         "\"io.modelcontextprotocol/protocol\\u0056ersion\":\"2025-11-25\"}}}";
    cr_assert_eq(tg_mcp26_body_scan(dupver, strlen(dupver), &b, &f), -EBADMSG,
                 "an escaped duplicate is a duplicate");
    cr_assert_eq(f.code, TG_MCP26_INVALID_REQUEST);
}

/* ---- headers against the body ---- */

/* streamable-http.mdx "Standard Request Headers", the tools/call example. */
#define WEATHER                                                                                    \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"                \
    "\"get_weather\",\"arguments\":{\"location\":\"Seattle, WA\"}," META "}}"
/* ... and the resources/read example. */
#define READ                                                                                       \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":"             \
    "\"file:///projects/myapp/config.json\"," META "}}"

Test(mcp26, spec_examples_pass)
{
    tg_mcp26_hdrs_t h = hdrs("tools/call", "get_weather", NULL, 0);
    check(&h, WEATHER, NULL, NULL);
    h = hdrs("resources/read", "file:///projects/myapp/config.json", NULL, 0);
    check(&h, READ, NULL, NULL);
    h = hdrs("tools/list", NULL, NULL, 0);
    check(&h, CALL_2026, NULL, NULL);
}

Test(mcp26, standard_headers_missing_or_wrong)
{
    tg_mcp26_hdrs_t h = hdrs(NULL, "get_weather", NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Method header missing");
    h = hdrs("tools/list", "get_weather", NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Method header does not match");
    h = hdrs("TOOLS/CALL", "get_weather", NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Method header does not match"); /* values are case-sensitive */
    h = hdrs("tools/call", NULL, NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Name header missing (required for tools/call)");
    h = hdrs("resources/read", NULL, NULL, 0);
    check(&h, READ, NULL, "Mcp-Name header missing (required for resources/read)");
    h = hdrs("tools/call", "get_weather2", NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Name header does not match params.name");
    h = hdrs("tools/call", "Get_weather", NULL, 0);
    check(&h, WEATHER, NULL, "does not match params.name");
    h = hdrs("resources/read", "file:///etc/passwd", NULL, 0);
    check(&h, READ, NULL, "Mcp-Name header does not match params.uri");
    h = hdrs("tools/call", "=?base64?!!!!?=", NULL, 0);
    check(&h, WEATHER, NULL, "Mcp-Name header value is malformed");
    h = hdrs("tools/list", "get_weather", NULL, 0);
    check(&h, CALL_2026, NULL, "Mcp-Name header on a method that has no name");

    const char *prompt = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\",\"params\":{"
                         "\"name\":\"code_review\"," META "}}";
    h = hdrs("prompts/get", "code_review", NULL, 0);
    check(&h, prompt, NULL, NULL);
    h = hdrs("prompts/get", NULL, NULL, 0);
    check(&h, prompt, NULL, "Mcp-Name header missing (required for prompts/get)");
    const char *noname = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\",\"params\":{"
                         "\"name\":7," META "}}";
    h = hdrs("prompts/get", "7", NULL, 0);
    check(&h, noname, NULL, "no string params.name");

    /* A notification: nothing required, what is there must match. */
    const char *notif = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}";
    h = hdrs(NULL, NULL, NULL, 0);
    check(&h, notif, NULL, NULL);
    h = hdrs("notifications/y", NULL, NULL, 0);
    check(&h, notif, NULL, "Mcp-Method header does not match");
}

Test(mcp26, mcp_name_in_the_sentinel_form)
{
    /* A URI outside the header-safe set travels encoded. */
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{"
                       "\"uri\":\"file:///caf\\u00e9 menu.txt\"," META "}}";
    char wire[128];
    cr_assert_eq(enc("file:///caf\xc3\xa9 menu.txt", wire, sizeof wire), 1);
    tg_mcp26_hdrs_t h = hdrs("resources/read", wire, NULL, 0);
    check(&h, body, NULL, NULL);
    h = hdrs("resources/read", "file:///caf menu.txt", NULL, 0);
    check(&h, body, NULL, "does not match params.uri");
    /* A plain name that happens to look encoded must itself be encoded. */
    const char *odd = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"=?base64?YQ==?=\"," META "}}";
    h = hdrs("tools/call", "=?base64?YQ==?=", NULL, 0);
    check(&h, odd, NULL, "does not match params.name");
    cr_assert_eq(enc("=?base64?YQ==?=", wire, sizeof wire), 1);
    h = hdrs("tools/call", wire, NULL, 0);
    check(&h, odd, NULL, NULL);
}

/* server/tools.mdx "x-mcp-header", the example tool. */
#define SQL_TOOL                                                                                   \
    "{\"name\":\"execute_sql\",\"description\":\"Execute SQL on Google Cloud Spanner\","           \
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"                                        \
    "\"region\":{\"type\":\"string\",\"description\":\"The region\",\"x-mcp-header\":"             \
    "\"Region\"},"                                                                                 \
    "\"query\":{\"type\":\"string\",\"description\":\"The SQL query to execute\"}},"               \
    "\"required\":[\"region\",\"query\"]}}"

#define SQL_CALL(args)                                                                             \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" META                    \
    ",\"name\":\"execute_sql\",\"arguments\":" args "}}"

Test(mcp26, mcp_param_spec_example_and_header_case)
{
    static tg_mcp26_xmap_t m;
    char msg[256];
    cr_assert_eq(xmap_of(SQL_TOOL, &m, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(m.n, 1);
    cr_assert_str_eq(m.p[0].header, "Region");
    cr_assert_eq(m.p[0].type, TG_MCP26_T_STRING);
    cr_assert_eq(m.p[0].depth, 1);
    cr_assert_str_eq(m.p[0].keys + m.p[0].key_off[0], "region");

    const char *body = SQL_CALL("{\"region\":\"us-west1\",\"query\":\"SELECT * FROM users\"}");
    const char *names[] = {"Mcp-Param-Region", "mcp-param-region", "MCP-PARAM-REGION",
                           "mCp-PaRaM-rEgIoN"};
    for (size_t i = 0; i < 4; i++) {
        tg_mcp26_hdr_t p[1] = {{names[i], strlen(names[i]), "us-west1", 8}};
        tg_mcp26_hdrs_t h = hdrs("tools/call", "execute_sql", p, 1);
        check(&h, body, &m, NULL);
    }
    tg_mcp26_hdr_t p[1] = {HDR("Mcp-Param-Region", "US-WEST1")};
    tg_mcp26_hdrs_t h = hdrs("tools/call", "execute_sql", p, 1);
    check(&h, body, &m, "Mcp-Param-Region header does not match params.arguments.region");
    h = hdrs("tools/call", "execute_sql", NULL, 0);
    check(&h, body, &m, "Mcp-Param-Region header missing for params.arguments.region");
    h = hdrs("tools/call", "execute_sql", p, 1);
    check(&h, body, NULL, NULL); /* no map: an Mcp-Param-* header nobody named is passed over */

    /* Unrecognised Mcp-Param-* headers are forwarded and ignored. */
    tg_mcp26_hdr_t extra[3] = {HDR("Mcp-Param-Region", "us-west1"), HDR("Mcp-Param-Other", "x"),
                               HDR("X-Unrelated", "y")};
    h = hdrs("tools/call", "execute_sql", extra, 3);
    check(&h, body, &m, NULL);
    tg_mcp26_hdr_t dup[2] = {HDR("Mcp-Param-Region", "us-west1"),
                             HDR("mcp-param-REGION", "us-west1")};
    h = hdrs("tools/call", "execute_sql", dup, 2);
    check(&h, body, &m, "Mcp-Param-Region header repeated");
    /* Another method: the map is not about it. */
    h = hdrs("tools/list", NULL, p, 1);
    check(&h, CALL_2026, &m, NULL);
}

Test(mcp26, mcp_param_absent_null_and_extra)
{
    static tg_mcp26_xmap_t m;
    char msg[256];
    cr_assert_eq(xmap_of(SQL_TOOL, &m, msg, sizeof msg), 0, "%s", msg);
    tg_mcp26_hdr_t p[1] = {HDR("Mcp-Param-Region", "us-west1")};
    tg_mcp26_hdrs_t none = hdrs("tools/call", "execute_sql", NULL, 0);
    tg_mcp26_hdrs_t one = hdrs("tools/call", "execute_sql", p, 1);
    check(&none, SQL_CALL("{\"query\":\"q\"}"), &m, NULL);
    check(&none, SQL_CALL("{\"region\":null}"), &m, NULL);
    check(&none, SQL_CALL("[1]"), &m, NULL);
    const char *noargs = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" META
                         ",\"name\":\"execute_sql\"}}";
    check(&none, noargs, &m, NULL);
    check(&one, SQL_CALL("{\"query\":\"q\"}"), &m,
          "Mcp-Param-Region header without a value in params.arguments.region");
    check(&one, SQL_CALL("{\"region\":null}"), &m, "without a value");
    check(&one, SQL_CALL("{\"region\":{\"a\":1}}"), &m, "is not a string, integer or boolean");
    check(&one, SQL_CALL("{\"region\":\"us-west1\",\"region\":\"eu-west1\"}"), &m,
          "a key on the way repeats");
    tg_mcp26_hdr_t badc[1] = {HDR("Mcp-Param-Region", "us\x01west1")};
    tg_mcp26_hdrs_t h = hdrs("tools/call", "execute_sql", badc, 1);
    check(&h, SQL_CALL("{\"region\":\"us-west1\"}"), &m,
          "Mcp-Param-Region header value is malformed");
}

#define TYPED_TOOL                                                                                 \
    "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"                        \
    "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"},"                                         \
    "\"b\":{\"type\":\"boolean\",\"x-mcp-header\":\"Flag\"},"                                      \
    "\"s\":{\"type\":[\"string\",\"null\"],\"x-mcp-header\":\"Greeting\"},"                        \
    "\"o\":{\"type\":\"object\",\"properties\":{\"tenant\":{\"type\":\"string\","                  \
    "\"x-mcp-header\":\"Tenant\"}}}}}}"

#define T_CALL(args)                                                                               \
    "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"tools/call\",\"params\":{\"name\":\"t\","     \
    "\"arguments\":" args "," META "}}"

Test(mcp26, mcp_param_types_nested_and_encoded)
{
    static tg_mcp26_xmap_t m;
    char msg[256];
    cr_assert_eq(xmap_of(TYPED_TOOL, &m, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(m.n, 4);
    cr_assert_eq(m.p[0].type, TG_MCP26_T_INTEGER);
    cr_assert_eq(m.p[1].type, TG_MCP26_T_BOOLEAN);
    cr_assert_eq(m.p[2].type, TG_MCP26_T_STRING, "[string, null] is a string");
    cr_assert_eq(m.p[3].depth, 2);
    cr_assert_str_eq(m.p[3].keys + m.p[3].key_off[1], "tenant");

    const char *body = T_CALL("{\"n\":42,\"b\":false,\"s\":\"Hello, \\u4e16\\u754c\","
                              "\"o\":{\"tenant\":\"acme\"}}");
    tg_mcp26_hdr_t ok[4] = {HDR("Mcp-Param-N", "42"), HDR("Mcp-Param-Flag", "false"),
                            HDR("Mcp-Param-Greeting", "=?base64?SGVsbG8sIOS4lueVjA==?="),
                            HDR("Mcp-Param-Tenant", "acme")};
    tg_mcp26_hdrs_t h = hdrs("tools/call", "t", ok, 4);
    check(&h, body, &m, NULL);

    /* Integers compare numerically (streamable-http.mdx "Server Validation"). */
    const char *same[] = {"42.0", "4.2e1", "420e-1", "42.000", "=?base64?NDI=?="};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        tg_mcp26_hdr_t p[4] = {ok[0], ok[1], ok[2], ok[3]};
        p[0].value = same[i];
        p[0].value_len = strlen(same[i]);
        h = hdrs("tools/call", "t", p, 4);
        check(&h, body, &m, NULL);
    }
    const char *differ[] = {"43", "-42", "042", "+42", "42 ", "0x2a", "42e", "4.2", ""};
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        tg_mcp26_hdr_t p[4] = {ok[0], ok[1], ok[2], ok[3]};
        p[0].value = differ[i];
        p[0].value_len = strlen(differ[i]);
        h = hdrs("tools/call", "t", p, 4);
        check(&h, body, &m, "Mcp-Param-N header");
    }
    h = hdrs("tools/call", "t", ok, 4);
    check(
        &h,
        T_CALL(
            "{\"n\":42.0,\"b\":false,\"s\":\"Hello, \\u4e16\\u754c\",\"o\":{\"tenant\":\"acme\"}}"),
        &m, NULL);
    check(&h, T_CALL("{\"n\":9007199254740992,\"b\":false}"), &m,
          "params.arguments.n is not an integer within");
    check(&h, T_CALL("{\"n\":42.5,\"b\":false}"), &m, "is not an integer");

    tg_mcp26_hdr_t big[1] = {HDR("Mcp-Param-N", "-9007199254740991")};
    h = hdrs("tools/call", "t", big, 1);
    check(&h, T_CALL("{\"n\":-9007199254740991}"), &m, NULL);
    tg_mcp26_hdr_t zero[1] = {HDR("Mcp-Param-N", "0")};
    h = hdrs("tools/call", "t", zero, 1);
    check(&h, T_CALL("{\"n\":-0.0e5}"), &m, NULL);

    tg_mcp26_hdr_t tr[1] = {HDR("Mcp-Param-Flag", "True")};
    h = hdrs("tools/call", "t", tr, 1);
    check(&h, T_CALL("{\"b\":true}"), &m,
          "Mcp-Param-Flag header does not match params.arguments.b");
    tr[0] = HDR("Mcp-Param-Flag", "true");
    check(&h, T_CALL("{\"b\":true}"), &m, NULL);

    tg_mcp26_hdr_t plain[1] = {HDR("Mcp-Param-Greeting", "Hello, ??")};
    h = hdrs("tools/call", "t", plain, 1);
    check(&h, T_CALL("{\"s\":\"Hello, \\u4e16\\u754c\"}"), &m,
          "Mcp-Param-Greeting header does not match params.arguments.s");

    h = hdrs("tools/call", "t", NULL, 0);
    check(&h, T_CALL("{\"o\":{\"tenant\":\"acme\"}}"), &m,
          "Mcp-Param-Tenant header missing for params.arguments.o.tenant");
    check(&h, T_CALL("{\"o\":\"not an object\"}"), &m, NULL);
    check(&h, T_CALL("{\"o\":{\"tenant\":\"a\",\"tenant\":\"b\"}}"), &m, "o.tenant: a key");
}

Test(mcp26, too_many_param_headers)
{
    tg_mcp26_hdr_t p[TG_MCP26_PARAM_HDRS_MAX + 1];
    for (size_t i = 0; i < TG_MCP26_PARAM_HDRS_MAX + 1; i++)
        p[i] = HDR("Mcp-Param-X", "1");
    tg_mcp26_hdrs_t h = hdrs("tools/call", "get_weather", p, TG_MCP26_PARAM_HDRS_MAX + 1);
    tg_mcp26_body_t b = body_of(WEATHER);
    tg_mcp26_fault_t f;
    cr_assert_eq(tg_mcp26_check(&h, &b, NULL, &f), -E2BIG);
    cr_assert_eq(f.code, TG_MCP26_INVALID_REQUEST);
    h.nparams = TG_MCP26_PARAM_HDRS_MAX;
    cr_assert_eq(tg_mcp26_check(&h, &b, NULL, &f), 0);
}

/* A secret argument never reaches a message, whatever goes wrong. */
Test(mcp26, canary_values_never_in_messages)
{
    static tg_mcp26_xmap_t m;
    char msg[256];
    const char *tool = "{\"name\":\"" CANARY "x\",\"inputSchema\":{\"type\":\"object\","
                       "\"properties\":{\"key\":{\"type\":\"string\",\"x-mcp-header\":\"Key\"},"
                       "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"}}}}";
    cr_assert_eq(xmap_of(tool, &m, msg, sizeof msg), 0, "%s", msg);
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"" CANARY "x\",\"arguments\":{\"key\":\"" CANARY "\","
                       "\"n\":1"
                       "}," META "}}";
    const tg_mcp26_hdr_t wrong[][2] = {
        {HDR("Mcp-Param-Key", CANARY "y"), HDR("Mcp-Param-N", "1")},
        {HDR("Mcp-Param-Key", "=?base64?" CANARY "?="), HDR("Mcp-Param-N", "1")},
        {HDR("Mcp-Param-Key", CANARY), HDR("Mcp-Param-N", CANARY)},
        {HDR("Mcp-Param-Key", CANARY), HDR("Mcp-Param-Key", CANARY)},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        tg_mcp26_hdrs_t h = hdrs("tools/call", CANARY "x", wrong[i], 2);
        check(&h, body, &m, "Header mismatch");
    }
    tg_mcp26_hdrs_t h = hdrs("tools/call", CANARY "y", wrong[0], 0);
    check(&h, body, &m, "Mcp-Name header does not match");
    h = hdrs(CANARY, CANARY "x", wrong[0], 0);
    check(&h, body, &m, "Mcp-Method header does not match");
    h = hdrs("tools/call", "=?base64?" CANARY "?=", wrong[0], 0);
    check(&h, body, &m, "Mcp-Name header value is malformed");
    /* and the body's own method, when unknown, is not echoed either */
    const char *odd = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"" CANARY "\","
                      "\"params\":{" META "}}";
    h = hdrs("tools/call", NULL, NULL, 0);
    check(&h, odd, &m, "Mcp-Method header does not match");
    h = hdrs(CANARY, "n", NULL, 0);
    check(&h, odd, &m, "Mcp-Name header on a method");
}

/* ---- x-mcp-header constraints ---- */

static void xmap_refused(const char *props, int err, const char *want)
{
    char tool[2048], msg[256];
    snprintf(tool, sizeof tool,
             "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":%s}}", props);
    static tg_mcp26_xmap_t m;
    m.n = 99;
    int rc = xmap_of(tool, &m, msg, sizeof msg);
    cr_assert_eq(rc, err, "%s: %d (%s)", props, rc, rc < 0 ? msg : "");
    cr_assert_eq(m.n, 0, "left empty");
    cr_assert(strstr(msg, want) != NULL, "'%s' lacks '%s'", msg, want);
}

Test(mcp26, xmap_refuses_what_the_spec_forbids)
{
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}", -EINVAL,
                 "not a non-empty string");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":7}}", -EINVAL,
                 "not a non-empty string");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Re gion\"}}", -EINVAL,
                 "not an HTTP token");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Re\\r\\ngion\"}}", -EINVAL,
                 "not an HTTP token");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"R:g\"}}", -EINVAL,
                 "not an HTTP token");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"R\\u00e9g\"}}", -EINVAL,
                 "not an HTTP token");
    xmap_refused("{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                 "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"rEGION\"}}",
                 -EINVAL, "repeats that of property a");
    xmap_refused("{\"a\":{\"type\":\"number\",\"x-mcp-header\":\"A\"}}", -EINVAL,
                 "not string, integer or boolean");
    xmap_refused("{\"a\":{\"type\":\"object\",\"x-mcp-header\":\"A\"}}", -EINVAL,
                 "not string, integer or boolean");
    xmap_refused("{\"a\":{\"x-mcp-header\":\"A\"}}", -EINVAL, "not string, integer or boolean");
    xmap_refused("{\"a\":{\"type\":[\"string\",\"integer\"],\"x-mcp-header\":\"A\"}}", -EINVAL,
                 "not string, integer or boolean");
    xmap_refused("{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"x-mcp-header\":"
                 "\"A\"}}}",
                 -EINVAL, "under \"items\" is not statically reachable");
    xmap_refused("{\"a\":{\"anyOf\":[{\"type\":\"string\",\"x-mcp-header\":\"A\"}]}}", -EINVAL,
                 "under \"anyOf\"");
    xmap_refused("{\"a\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\","
                 "\"x-mcp-header\":\"A\"}}}",
                 -EINVAL, "under \"additionalProperties\"");
    xmap_refused("{\"a\":{\"if\":{\"type\":\"string\"},\"then\":{\"type\":\"string\","
                 "\"x-mcp-header\":\"A\"}}}",
                 -EINVAL, "under \"then\"");
    xmap_refused("{\"a\":{\"not\":{\"properties\":{\"b\":{\"type\":\"string\","
                 "\"x-mcp-header\":\"A\"}}}}}",
                 -EINVAL, "under \"not\"");

    char msg[256];
    static tg_mcp26_xmap_t m;
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\","
                         "\"x-mcp-header\":\"Root\"}}",
                         &m, msg, sizeof msg),
                 -EINVAL);
    cr_assert(strstr(msg, "root") != NULL, "%s", msg);
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"$defs\":{"
                         "\"r\":{\"type\":\"string\",\"x-mcp-header\":\"R\"}},\"properties\":{"
                         "\"a\":{\"$ref\":\"#/$defs/r\"}}}}",
                         &m, msg, sizeof msg),
                 -EINVAL, "behind $ref");
    cr_assert(strstr(msg, "under \"$defs\"") != NULL, "%s", msg);
    json_t *arr = json_array();
    cr_assert_eq(tg_mcp26_xmap_build(arr, &m, msg, sizeof msg), -EINVAL, "not an object");
    json_decref(arr);
}

Test(mcp26, xmap_accepts_and_ignores_non_annotations)
{
    char msg[256];
    static tg_mcp26_xmap_t m;
    cr_assert_eq(xmap_of("{\"name\":\"t\"}", &m, msg, sizeof msg), 0, "no inputSchema");
    cr_assert_eq(m.n, 0);
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\","
                         "\"additionalProperties\":false}}",
                         &m, msg, sizeof msg),
                 0);
    cr_assert_eq(m.n, 0);
    /* An instance, not a schema: "default", "const", "examples", "enum". */
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
                         "\"a\":{\"type\":\"object\",\"default\":{\"x-mcp-header\":\"D\"},"
                         "\"examples\":[{\"x-mcp-header\":\"E\"}]}}}}",
                         &m, msg, sizeof msg),
                 0, "%s", msg);
    cr_assert_eq(m.n, 0);
    /* A property named x-mcp-header is a property, not an annotation. */
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
                         "\"x-mcp-header\":{\"type\":\"string\"}}}}",
                         &m, msg, sizeof msg),
                 0, "%s", msg);
    cr_assert_eq(m.n, 0);
    /* Every tchar. */
    cr_assert_eq(xmap_of("{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
                         "\"a\":{\"type\":\"boolean\",\"x-mcp-header\":"
                         "\"!#$%&'*+-.^_`|~09azAZ\"}}}}",
                         &m, msg, sizeof msg),
                 0, "%s", msg);
    cr_assert_eq(m.n, 1);
}

Test(mcp26, xmap_bounds)
{
    char tool[8192], msg[256];
    static tg_mcp26_xmap_t m;
    size_t o = (size_t)snprintf(tool, sizeof tool,
                                "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\","
                                "\"properties\":{");
    for (int i = 0; i <= TG_MCP26_XHDR_MAX; i++)
        o += (size_t)snprintf(tool + o, sizeof tool - o,
                              "%s\"p%d\":{\"type\":\"string\",\"x-mcp-header\":\"H%d\"}",
                              i > 0 ? "," : "", i, i);
    snprintf(tool + o, sizeof tool - o, "}}}");
    cr_assert_eq(xmap_of(tool, &m, msg, sizeof msg), -E2BIG);
    cr_assert(strstr(msg, "more than 32") != NULL, "%s", msg);

    char name[TG_MCP26_PARAM_NAME_MAX + 2];
    memset(name, 'h', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(tool, sizeof tool,
             "{\"name\":\"t\",\"inputSchema\":{\"properties\":{\"a\":{\"type\":\"string\","
             "\"x-mcp-header\":\"%s\"}}}}",
             name);
    cr_assert_eq(xmap_of(tool, &m, msg, sizeof msg), -E2BIG);
    name[TG_MCP26_PARAM_NAME_MAX] = '\0';
    snprintf(tool, sizeof tool,
             "{\"name\":\"t\",\"inputSchema\":{\"properties\":{\"a\":{\"type\":\"string\","
             "\"x-mcp-header\":\"%s\"}}}}",
             name);
    cr_assert_eq(xmap_of(tool, &m, msg, sizeof msg), 0, "%s", msg);

    /* A path of TG_MCP26_PATH_DEPTH_MAX keys, then one more. */
    for (int depth = TG_MCP26_PATH_DEPTH_MAX; depth <= TG_MCP26_PATH_DEPTH_MAX + 1; depth++) {
        o = (size_t)snprintf(tool, sizeof tool, "{\"name\":\"t\",\"inputSchema\":");
        for (int i = 0; i < depth; i++)
            o += (size_t)snprintf(tool + o, sizeof tool - o,
                                  "{\"type\":\"object\",\"properties\":{\"k%d\":", i);
        o += (size_t)snprintf(tool + o, sizeof tool - o,
                              "{\"type\":\"string\",\"x-mcp-header\":\"Deep\"}");
        for (int i = 0; i < depth; i++)
            o += (size_t)snprintf(tool + o, sizeof tool - o, "}}");
        snprintf(tool + o, sizeof tool - o, "}");
        int rc = xmap_of(tool, &m, msg, sizeof msg);
        if (depth == TG_MCP26_PATH_DEPTH_MAX) {
            cr_assert_eq(rc, 0, "%s", msg);
            cr_assert_eq(m.p[0].depth, TG_MCP26_PATH_DEPTH_MAX);
        } else {
            cr_assert_eq(rc, -E2BIG);
        }
    }

    /* A schema nested past the walk's bound, annotation or not. */
    o = (size_t)snprintf(tool, sizeof tool, "{\"name\":\"t\",\"inputSchema\":");
    for (int i = 0; i <= TG_MCP26_SCHEMA_DEPTH_MAX; i++)
        o += (size_t)snprintf(tool + o, sizeof tool - o, "{\"not\":");
    o += (size_t)snprintf(tool + o, sizeof tool - o, "{}");
    for (int i = 0; i <= TG_MCP26_SCHEMA_DEPTH_MAX; i++)
        o += (size_t)snprintf(tool + o, sizeof tool - o, "}");
    snprintf(tool + o, sizeof tool - o, "}");
    cr_assert_eq(xmap_of(tool, &m, msg, sizeof msg), -E2BIG);
    cr_assert(strstr(msg, "nested deeper") != NULL, "%s", msg);
}

/* ---- error bodies ---- */

Test(mcp26, unsupported_version_body_has_the_spec_shape)
{
    tg_mcp26_fault_t f;
    cr_assert_eq(era("1900-01-01", NULL, &f), -EBADMSG);
    char out[512];
    long n = tg_mcp26_error_json(&f, "1", 1, out, sizeof out);
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(out));
    json_t *got = json_of(out);
    json_t *want = json_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32022,"
                           "\"message\":\"Unsupported protocol version\",\"data\":{"
                           "\"supported\":[\"2026-07-28\",\"2025-11-25\",\"2025-06-18\","
                           "\"2025-03-26\",\"2024-11-05\"],\"requested\":\"1900-01-01\"}}}");
    cr_assert(json_equal(got, want), "%s", out);
    json_decref(got);
    json_decref(want);

    n = tg_mcp26_error_json(&f, NULL, 0, out, sizeof out);
    cr_assert_gt(n, 0);
    got = json_of(out);
    cr_assert(json_is_null(json_object_get(got, "id")), "before the body: id null");
    json_decref(got);

    cr_assert_eq(tg_mcp26_error_json(&f, "1", 1, out, 40), -ENOSPC);
}

Test(mcp26, header_mismatch_body_has_the_spec_shape)
{
    tg_mcp26_hdrs_t h = hdrs("tools/call", "foo", NULL, 0);
    tg_mcp26_body_t b = body_of(WEATHER);
    tg_mcp26_fault_t f;
    cr_assert_eq(tg_mcp26_check(&h, &b, NULL, &f), -EBADMSG);
    char out[512];
    long n = tg_mcp26_error_json(&f, "\"req-7\"", 7, out, sizeof out);
    cr_assert_gt(n, 0);
    json_t *got = json_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(got, "jsonrpc")), "2.0");
    cr_assert_str_eq(json_string_value(json_object_get(got, "id")), "req-7");
    json_t *err = json_object_get(got, "error");
    cr_assert_eq(json_integer_value(json_object_get(err, "code")), -32020);
    cr_assert_eq(json_object_size(err), 2, "code and message only: %s", out);
    cr_assert_str_eq(json_string_value(json_object_get(err, "message")),
                     "Header mismatch: Mcp-Name header does not match params.name");
    json_decref(got);

    /* The body's id span is spliced as it is. */
    tg_mcp26_fault_t g = {.code = TG_MCP26_HEADER_MISMATCH};
    snprintf(g.msg, sizeof g.msg, "Header mismatch: \"quoted\"\n");
    n = tg_mcp26_error_json(&g, "-3", 2, out, sizeof out);
    got = json_of(out);
    cr_assert_eq(json_integer_value(json_object_get(got, "id")), -3);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "error"), "message")),
                     "Header mismatch: \"quoted\"\n");
    json_decref(got);
}
