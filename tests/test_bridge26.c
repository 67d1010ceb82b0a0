/* MCP 2025 -> 2026 translations of the bridge (router/codec/bridge26.c),
 * checked against the spec's own examples where it has them (MCP
 * 2026-07-28: server/discover.mdx, basic/patterns/mrtr.mdx and
 * schema/2026-07-28/examples/, quoted below), then a whole multi round
 * trip with a sealed requestState (router/codec/seal.c). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/bridge26.h"
#include "router/codec/seal.h"

/* Parse <text> or fail the test. */
static json_t *J(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    cr_assert_not_null(v, "test JSON: %s at %d: %s", e.text, e.position, text);
    return v;
}

/* <got> equals <want> (JSON text), or fail showing both. Releases <got>. */
static void assert_json(json_t *got, const char *want)
{
    cr_assert_not_null(got);
    json_t *w = J(want);
    char *g = json_dumps(got, JSON_SORT_KEYS), *ws = json_dumps(w, JSON_SORT_KEYS);
    cr_assert(json_equal(got, w), "got  %s\nwant %s", g, ws);
    free(g);
    free(ws);
    json_decref(w);
    json_decref(got);
}

/* ---- server/discover ---- */

/* schema/2026-07-28/examples/DiscoverResult/server-capabilities-discovery.json */
static const char SPEC_DISCOVER[] =
    "{\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],"
    "\"capabilities\":{\"tools\":{},\"resources\":{}},"
    "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"ExampleServer\","
    "\"version\":\"1.0.0\"}},"
    "\"instructions\":\"This server provides weather and resource utilities. Prefer "
    "`get_weather` for forecast lookups.\",\"ttlMs\":3600000,\"cacheScope\":\"public\"}";

/* The 2025 InitializeResult the same server would have answered. */
static const char INIT_2025[] =
    "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{},\"resources\":{}},"
    "\"serverInfo\":{\"name\":\"ExampleServer\",\"version\":\"1.0.0\"},"
    "\"instructions\":\"This server provides weather and resource utilities. Prefer "
    "`get_weather` for forecast lookups.\"}";

Test(bridge26, discover_from_initialize_is_the_spec_example)
{
    json_t *init = J(INIT_2025);
    assert_json(tg_b26_discover(init, 3600000, TG_B26_PUBLIC, 0, NULL, 0), SPEC_DISCOVER);
    json_decref(init);
}

Test(bridge26, discover_drops_tasks_and_optionally_notifications)
{
    json_t *init = J("{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{"
                     "\"tools\":{\"listChanged\":true},\"prompts\":{\"listChanged\":true},"
                     "\"resources\":{\"subscribe\":true,\"listChanged\":true},\"logging\":{},"
                     "\"tasks\":{\"list\":{},\"requests\":{\"tools\":{\"call\":{}}}}},"
                     "\"serverInfo\":{\"name\":\"s\",\"version\":\"2\",\"title\":\"S\"}}");
    assert_json(tg_b26_discover(init, 0, TG_B26_PRIVATE, 0, NULL, 0),
                "{\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],"
                "\"capabilities\":{\"tools\":{\"listChanged\":true},\"prompts\":{\"listChanged\":"
                "true},\"resources\":{\"subscribe\":true,\"listChanged\":true},\"logging\":{}},"
                "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"s\",\"version\":"
                "\"2\",\"title\":\"S\"}},\"ttlMs\":0,\"cacheScope\":\"private\"}");
    assert_json(tg_b26_discover(init, 5, TG_B26_PUBLIC, TG_B26_NO_NOTIFY, NULL, 0),
                "{\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],"
                "\"capabilities\":{\"tools\":{},\"prompts\":{},\"resources\":{},\"logging\":{}},"
                "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"s\",\"version\":"
                "\"2\",\"title\":\"S\"}},\"ttlMs\":5,\"cacheScope\":\"public\"}");
    json_t *caps = json_object_get(init, "capabilities");
    cr_assert_not_null(json_object_get(caps, "tasks"), "the input is not changed");
    json_decref(init);
}

Test(bridge26, discover_refuses_what_is_not_an_initialize_result)
{
    static const struct {
        const char *json, *why;
    } bad[] = {
        {"[]", "not an object"},
        {"{\"capabilities\":{},\"serverInfo\":{\"name\":\"a\",\"version\":\"1\"}}",
         "protocolVersion"},
        {"{\"protocolVersion\":\"2025-06-18\",\"serverInfo\":{\"name\":\"a\",\"version\":\"1\"}}",
         "capabilities"},
        {"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":[],"
         "\"serverInfo\":{\"name\":\"a\",\"version\":\"1\"}}",
         "capabilities"},
        {"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"a\"}}",
         "serverInfo"},
        {"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
         "\"serverInfo\":{\"name\":\"a\",\"version\":\"1\"},\"instructions\":7}",
         "instructions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *v = J(bad[i].json);
        char why[128] = "";
        cr_assert_null(tg_b26_discover(v, 1, TG_B26_PUBLIC, 0, why, sizeof why), "%s", bad[i].json);
        cr_assert_not_null(strstr(why, bad[i].why), "%s: why = %s", bad[i].json, why);
        json_decref(v);
    }
    json_t *init = J(INIT_2025);
    char why[128] = "";
    cr_assert_null(tg_b26_discover(init, -1, TG_B26_PUBLIC, 0, why, sizeof why));
    cr_assert_not_null(strstr(why, "ttlMs"));
    cr_assert_null(tg_b26_discover(NULL, 1, TG_B26_PUBLIC, 0, NULL, 0), "no why buffer: fine");
    json_decref(init);
}

/* ---- results ---- */

Test(bridge26, a_2025_result_becomes_complete_and_cannot_spoof_input_required)
{
    json_t *r = J("{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false}");
    cr_assert_eq(tg_b26_complete(r, NULL), 0);
    assert_json(r, "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false,"
                   "\"resultType\":\"complete\"}");

    r = J("{\"resultType\":\"input_required\",\"requestState\":\"x\",\"inputRequests\":{\"a\":"
          "{\"method\":\"roots/list\"}},\"content\":[],\"_meta\":{\"k\":1}}");
    json_t *info = J("{\"name\":\"s\",\"version\":\"1\"}");
    cr_assert_eq(tg_b26_complete(r, info), 0);
    assert_json(r, "{\"resultType\":\"complete\",\"content\":[],\"_meta\":{\"k\":1,"
                   "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}");

    r = J("{}");
    cr_assert_eq(tg_b26_complete(r, info), 0);
    assert_json(r, "{\"resultType\":\"complete\",\"_meta\":{\"io.modelcontextprotocol/serverInfo\":"
                   "{\"name\":\"s\",\"version\":\"1\"}}}");

    r = J("[]");
    cr_assert_eq(tg_b26_complete(r, NULL), -EINVAL);
    json_decref(r);
    r = J("{\"_meta\":3}");
    cr_assert_eq(tg_b26_complete(r, info), -EINVAL, "a _meta that is not an object");
    json_decref(r);
    r = J("{}");
    json_t *notobj = J("[1]");
    cr_assert_eq(tg_b26_complete(r, notobj), -EINVAL);
    json_decref(notobj);
    json_decref(r);
    json_decref(info);
}

/* schema/2026-07-28/examples/ListToolsResult/tools-list-with-cursor-and-ttl.json, and the
 * same list as a 2025 server sends it (no resultType, ttlMs, cacheScope). */
#define TOOLS_BODY                                                                                 \
    "\"tools\":[{\"name\":\"get_weather\",\"title\":\"Weather Information Provider\","             \
    "\"description\":\"Get current weather information for a location\","                          \
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\","      \
    "\"description\":\"City name or zip code\"}},\"required\":[\"location\"]},"                    \
    "\"icons\":[{\"src\":\"https://example.com/weather-icon.png\",\"mimeType\":\"image/png\","     \
    "\"sizes\":[\"48x48\"]}]}],\"nextCursor\":\"next-page-cursor\""

Test(bridge26, a_list_result_gains_the_caching_hints_of_the_spec_example)
{
    json_t *r = J("{" TOOLS_BODY "}");
    cr_assert_eq(tg_b26_cacheable(r, 300000, TG_B26_PUBLIC, NULL), 0);
    assert_json(r, "{\"resultType\":\"complete\"," TOOLS_BODY
                   ",\"ttlMs\":300000,\"cacheScope\":\"public\"}");
    r = J("{\"prompts\":[]}");
    cr_assert_eq(tg_b26_cacheable(r, 0, tg_b26_scope_for("prompts/list", true), NULL), 0);
    assert_json(r, "{\"resultType\":\"complete\",\"prompts\":[],\"ttlMs\":0,"
                   "\"cacheScope\":\"private\"}");
    r = J("{\"tools\":[]}");
    cr_assert_eq(tg_b26_cacheable(r, -1, TG_B26_PUBLIC, NULL), -EINVAL, "ttlMs MUST be >= 0");
    cr_assert_null(json_object_get(r, "resultType"), "refused before any change");
    json_decref(r);
}

Test(bridge26, scope_follows_the_spec_recommendation_and_filtering)
{
    cr_assert_eq(tg_b26_scope_for("tools/list", false), TG_B26_PUBLIC);
    cr_assert_eq(tg_b26_scope_for("prompts/list", false), TG_B26_PUBLIC);
    cr_assert_eq(tg_b26_scope_for("resources/templates/list", false), TG_B26_PUBLIC);
    cr_assert_eq(tg_b26_scope_for("server/discover", false), TG_B26_PUBLIC);
    cr_assert_eq(tg_b26_scope_for("tools/list", true), TG_B26_PRIVATE, "a policy filtered it");
    cr_assert_eq(tg_b26_scope_for("resources/list", false), TG_B26_PRIVATE);
    cr_assert_eq(tg_b26_scope_for("resources/read", false), TG_B26_PRIVATE);
    cr_assert_eq(tg_b26_scope_for("tools/call", false), TG_B26_PRIVATE);
    cr_assert_eq(tg_b26_scope_for(NULL, false), TG_B26_PRIVATE);
}

Test(bridge26, resource_not_found_is_renumbered)
{
    cr_assert_eq(tg_b26_error_code(-32002), -32602);
    cr_assert_eq(tg_b26_error_code(-32601), -32601);
    cr_assert_eq(tg_b26_error_code(-32603), -32603);
}

/* ---- input requests ---- */

/* schema/2026-07-28/examples/ElicitRequest/elicitation-request.json's
 * body, and CreateMessageRequest/sampling-request.json's. */
#define ELICIT_BODY                                                                                \
    "\"method\":\"elicitation/create\",\"params\":{\"mode\":\"form\",\"message\":\"Please "        \
    "provide your GitHub username\",\"requestedSchema\":{\"type\":\"object\",\"properties\":"      \
    "{\"name\":{\"type\":\"string\",\"title\":\"GitHub Username\",\"description\":\"Your "         \
    "GitHub username\"}},\"required\":[\"name\"]}}"
#define SAMPLING_BODY                                                                              \
    "\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"role\":\"user\","          \
    "\"content\":{\"type\":\"text\",\"text\":\"What is the capital of France?\"}}],"               \
    "\"modelPreferences\":{\"hints\":[{\"name\":\"claude-3-sonnet\"}],"                            \
    "\"intelligencePriority\":0.8,\"speedPriority\":0.5},\"systemPrompt\":\"You are a helpful "    \
    "assistant.\",\"maxTokens\":100}"

static const char ALL_CAPS[] =
    "{\"sampling\":{\"tools\":{},\"context\":{}},\"elicitation\":{\"form\":{},\"url\":{}},"
    "\"roots\":{}}";

/* tg_b26_input_request on JSON text <req>, the client declaring <caps>. */
static int input_of(const char *req, const char *caps, size_t index, tg_b26_pending_t *p,
                    json_t **entry, char *why, size_t cap)
{
    json_t *r = J(req), *c = caps != NULL ? J(caps) : NULL;
    int rc = tg_b26_input_request(r, c, index, p, entry, why, cap);
    json_decref(r);
    json_decref(c);
    return rc;
}

Test(bridge26, server_requests_become_the_spec_input_requests)
{
    tg_b26_pending_t p;
    json_t *e = NULL, *id;

    cr_assert_eq(
        input_of("{\"jsonrpc\":\"2.0\",\"id\":7," ELICIT_BODY "}", ALL_CAPS, 0, &p, &e, NULL, 0),
        0);
    assert_json(e, "{" ELICIT_BODY "}");
    cr_assert_str_eq(p.key, "elicitation_0");
    cr_assert_eq(p.kind, TG_B26_ELICITATION);
    id = J("7");
    cr_assert(json_equal(p.id, id));
    json_decref(id);
    tg_b26_pending_clear(&p);
    cr_assert_null(p.id);

    cr_assert_eq(input_of("{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\"," SAMPLING_BODY "}", ALL_CAPS, 1,
                          &p, &e, NULL, 0),
                 0);
    assert_json(e, "{" SAMPLING_BODY "}");
    cr_assert_str_eq(p.key, "sampling_1");
    cr_assert_str_eq(json_string_value(p.id), "srv-1");
    tg_b26_pending_clear(&p);

    /* schema/2026-07-28/examples/ListRootsRequest: no params at all */
    cr_assert_eq(input_of("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"roots/list\"}", ALL_CAPS, 15,
                          &p, &e, NULL, 0),
                 0);
    assert_json(e, "{\"method\":\"roots/list\"}");
    cr_assert_str_eq(p.key, "roots_15");
    tg_b26_pending_clear(&p);

    /* URL mode: 2026 has no elicitationId (changelog minor 11); _meta stays */
    cr_assert_eq(input_of("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"elicitation/create\","
                          "\"params\":{\"mode\":\"url\",\"message\":\"Sign in\",\"url\":"
                          "\"https://example.com/auth\",\"elicitationId\":\"e-1\","
                          "\"_meta\":{\"progressToken\":4}}}",
                          ALL_CAPS, 2, &p, &e, NULL, 0),
                 0);
    assert_json(e, "{\"method\":\"elicitation/create\",\"params\":{\"mode\":\"url\","
                   "\"message\":\"Sign in\",\"url\":\"https://example.com/auth\","
                   "\"_meta\":{\"progressToken\":4}}}");
    tg_b26_pending_clear(&p);
}

Test(bridge26, requests_that_are_not_input_requests_or_malformed_are_refused)
{
    static const struct {
        const char *json;
        int rc;
        const char *why;
    } bad[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", -EOPNOTSUPP, "ping"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", -EOPNOTSUPP,
         "tools/call"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1," ELICIT_BODY "}", 0, NULL}, /* control */
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{"
         "\"message\":\"m\",\"requestedSchema\":{},\"task\":{\"ttl\":1000}}}",
         -EOPNOTSUPP, "task"},
        {"{\"id\":1," ELICIT_BODY "}", -EINVAL, "jsonrpc"},
        {"{\"jsonrpc\":\"1.0\",\"id\":1," ELICIT_BODY "}", -EINVAL, "jsonrpc"},
        {"{\"jsonrpc\":\"2.0\"," ELICIT_BODY "}", -EINVAL, "id"},
        {"{\"jsonrpc\":\"2.0\",\"id\":null," ELICIT_BODY "}", -EINVAL, "id"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1.5," ELICIT_BODY "}", -EINVAL, "id"},
        {"{\"jsonrpc\":\"2.0\",\"id\":{}," ELICIT_BODY "}", -EINVAL, "id"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", -EINVAL, "method"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\",\"params\":[]}", -EINVAL,
         "params"},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\"}", -EINVAL,
         "without params"},
        {"[1]", -EINVAL, "not an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_b26_pending_t p;
        memset(&p, 0x5a, sizeof p);
        json_t *e = (json_t *)&p; /* a sentinel: must stay untouched on failure */
        char why[128] = "";
        int rc = input_of(bad[i].json, ALL_CAPS, 0, &p, &e, why, sizeof why);
        cr_assert_eq(rc, bad[i].rc, "%s: %d (%s)", bad[i].json, rc, why);
        if (rc == 0) {
            json_decref(e);
            tg_b26_pending_clear(&p);
            continue;
        }
        cr_assert_eq(e, (json_t *)&p, "%s: entry untouched", bad[i].json);
        cr_assert_not_null(strstr(why, bad[i].why), "%s: why = %s", bad[i].json, why);
    }
    tg_b26_pending_t p;
    json_t *e = NULL;
    char why[128] = "";
    cr_assert_eq(input_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}", ALL_CAPS,
                          TG_B26_INPUTS_MAX, &p, &e, why, sizeof why),
                 -ERANGE);
    cr_assert_null(e);
}

Test(bridge26, input_requests_need_the_client_capability)
{
    tg_b26_pending_t p;
    json_t *e = NULL;
    const char *roots = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}";
    cr_assert_eq(input_of(roots, NULL, 0, &p, &e, NULL, 0), -ENOPROTOOPT, "no capabilities");
    cr_assert_eq(input_of(roots, "{\"sampling\":{}}", 0, &p, &e, NULL, 0), -ENOPROTOOPT);
    cr_assert_eq(input_of(roots, "{\"roots\":true}", 0, &p, &e, NULL, 0), -ENOPROTOOPT,
                 "a capability is an object");
    cr_assert_null(e);

    /* elicitation: {} is form only; the mode asked must be declared */
    json_t *form = J("{\"mode\":\"form\"}"), *url = J("{\"mode\":\"url\"}"), *none = J("{}");
    json_t *c_empty = J("{\"elicitation\":{}}"), *c_url = J("{\"elicitation\":{\"url\":{}}}");
    json_t *c_both = J("{\"elicitation\":{\"form\":{},\"url\":{}}}");
    cr_assert(tg_b26_client_supports(c_empty, TG_B26_ELICITATION, form));
    cr_assert(tg_b26_client_supports(c_empty, TG_B26_ELICITATION, none), "no mode: form");
    cr_assert_not(tg_b26_client_supports(c_empty, TG_B26_ELICITATION, url));
    cr_assert_not(tg_b26_client_supports(c_url, TG_B26_ELICITATION, form));
    cr_assert(tg_b26_client_supports(c_url, TG_B26_ELICITATION, url));
    cr_assert(tg_b26_client_supports(c_both, TG_B26_ELICITATION, url));
    json_t *odd = J("{\"mode\":\"carrier-pigeon\"}");
    cr_assert_not(tg_b26_client_supports(c_both, TG_B26_ELICITATION, odd));

    /* sampling: tools and includeContext need their sub-capabilities */
    json_t *s = J("{\"sampling\":{}}"), *st = J("{\"sampling\":{\"tools\":{}}}");
    json_t *sc = J("{\"sampling\":{\"context\":{}}}");
    json_t *plain = J("{\"messages\":[],\"maxTokens\":1}");
    json_t *tools = J("{\"messages\":[],\"maxTokens\":1,\"tools\":[]}");
    json_t *ctx_none = J("{\"messages\":[],\"maxTokens\":1,\"includeContext\":\"none\"}");
    json_t *ctx_this = J("{\"messages\":[],\"maxTokens\":1,\"includeContext\":\"thisServer\"}");
    cr_assert(tg_b26_client_supports(s, TG_B26_SAMPLING, plain));
    cr_assert_not(tg_b26_client_supports(s, TG_B26_SAMPLING, tools));
    cr_assert(tg_b26_client_supports(st, TG_B26_SAMPLING, tools));
    cr_assert(tg_b26_client_supports(s, TG_B26_SAMPLING, ctx_none));
    cr_assert_not(tg_b26_client_supports(s, TG_B26_SAMPLING, ctx_this));
    cr_assert(tg_b26_client_supports(sc, TG_B26_SAMPLING, ctx_this));
    cr_assert_not(tg_b26_client_supports(c_both, TG_B26_SAMPLING, plain));
    json_t *all[] = {form, url, none, c_empty, c_url, c_both,   odd,
                     s,    st,  sc,   plain,   tools, ctx_none, ctx_this};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        json_decref(all[i]);
}

/* ---- InputRequiredResult ---- */

/* schema/2026-07-28/examples/InputRequiredResult/
 * input-required-result-with-elicitation-and-sampling-and-request-state.json */
#define SPEC_ELICIT_ENTRY                                                                          \
    "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Please provide your GitHub "     \
    "username\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"      \
    "\"string\"}},\"required\":[\"name\"]}}}"
#define SPEC_SAMPLING_ENTRY                                                                        \
    "{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"role\":\"user\","         \
    "\"content\":{\"type\":\"text\",\"text\":\"What is the capital of France?\"}}],"               \
    "\"maxTokens\":100}}"
static const char SPEC_INPUT_REQUIRED[] =
    "{\"resultType\":\"input_required\",\"inputRequests\":{\"github_login\":" SPEC_ELICIT_ENTRY
    ",\"capital_of_france\":" SPEC_SAMPLING_ENTRY "},"
    "\"requestState\":\"eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0\"}";

static tg_b26_pending_t pend_of(const char *key, tg_b26_kind_t kind, const char *id)
{
    tg_b26_pending_t p;
    memset(&p, 0, sizeof p);
    snprintf(p.key, sizeof p.key, "%s", key);
    p.kind = kind;
    p.id = J(id);
    return p;
}

Test(bridge26, input_required_result_is_the_spec_example)
{
    tg_b26_pending_t p[2] = {pend_of("github_login", TG_B26_ELICITATION, "1"),
                             pend_of("capital_of_france", TG_B26_SAMPLING, "2")};
    json_t *e[2] = {J(SPEC_ELICIT_ENTRY), J(SPEC_SAMPLING_ENTRY)};
    assert_json(tg_b26_input_required(p, e, 2, "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0", NULL, 0),
                SPEC_INPUT_REQUIRED);
    cr_assert_eq(e[0]->refcount, 1, "entries are borrowed, not kept");

    /* InputRequiredResult/input-required-result-with-request-state-only.json */
    assert_json(tg_b26_input_required(
                    NULL, NULL, 0, "eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9", NULL, 0),
                "{\"resultType\":\"input_required\",\"requestState\":"
                "\"eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9\"}");

    char why[128] = "";
    cr_assert_null(tg_b26_input_required(NULL, NULL, 0, NULL, why, sizeof why));
    cr_assert_not_null(strstr(why, "neither"), "%s", why);
    snprintf(p[1].key, sizeof p[1].key, "github_login");
    cr_assert_null(tg_b26_input_required(p, e, 2, "s", why, sizeof why));
    cr_assert_not_null(strstr(why, "twice"), "%s", why);
    p[1].key[0] = '\0';
    cr_assert_null(tg_b26_input_required(p, e, 2, "s", why, sizeof why), "an empty key");
    cr_assert_null(tg_b26_input_required(p, e, TG_B26_INPUTS_MAX + 1, "s", why, sizeof why));
    cr_assert_not_null(strstr(why, "more than"), "%s", why);
    for (int i = 0; i < 2; i++) {
        json_decref(e[i]);
        tg_b26_pending_clear(&p[i]);
    }
}

/* ---- inputResponses ---- */

/* schema/2026-07-28/examples/InputResponses/elicitation-and-sampling-input-responses.json */
#define SPEC_ELICIT_RESULT "{\"action\":\"accept\",\"content\":{\"name\":\"octocat\"}}"
#define SPEC_SAMPLING_RESULT                                                                       \
    "{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"The capital of France "     \
    "is Paris.\"},\"model\":\"claude-3-sonnet-20240307\",\"stopReason\":\"endTurn\"}"
static const char SPEC_INPUT_RESPONSES[] =
    "{\"github_login\":" SPEC_ELICIT_RESULT ",\"capital_of_france\":" SPEC_SAMPLING_RESULT "}";
/* ListRootsResult/multiple-root-directories.json */
#define SPEC_ROOTS_RESULT                                                                          \
    "{\"roots\":[{\"uri\":\"file:///home/user/repos/frontend\",\"name\":\"Frontend "               \
    "Repository\"},{\"uri\":\"file:///home/user/repos/backend\",\"name\":\"Backend "               \
    "Repository\"}]}"

/* Retry params carrying <responses> (JSON text, or NULL: none). */
static json_t *retry_params(const char *responses)
{
    json_t *p = J("{\"name\":\"get_weather\",\"arguments\":{},\"requestState\":\"s\"}");
    if (responses != NULL)
        json_object_set_new(p, "inputResponses", J(responses));
    return p;
}

Test(bridge26, input_responses_become_the_servers_responses_by_key)
{
    tg_b26_pending_t p[3] = {pend_of("capital_of_france", TG_B26_SAMPLING, "\"srv-2\""),
                             pend_of("github_login", TG_B26_ELICITATION, "41"),
                             pend_of("roots_2", TG_B26_ROOTS, "0")};
    char resp[2048];
    snprintf(resp, sizeof resp,
             "{\"github_login\":" SPEC_ELICIT_RESULT ",\"capital_of_france\":" SPEC_SAMPLING_RESULT
             ",\"roots_2\":" SPEC_ROOTS_RESULT "}");
    json_t *params = retry_params(resp), *out[3];
    size_t extra = 99;
    cr_assert_eq(tg_b26_input_responses(params, p, 3, out, &extra, NULL, 0), 0);
    cr_assert_eq(extra, 0);
    assert_json(out[0],
                "{\"jsonrpc\":\"2.0\",\"id\":\"srv-2\",\"result\":" SPEC_SAMPLING_RESULT "}");
    assert_json(out[1], "{\"jsonrpc\":\"2.0\",\"id\":41,\"result\":" SPEC_ELICIT_RESULT "}");
    assert_json(out[2], "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":" SPEC_ROOTS_RESULT "}");
    json_decref(params);

    /* the spec's example with one extra key: ignored, counted */
    params = retry_params(SPEC_INPUT_RESPONSES);
    json_object_set_new(json_object_get(params, "inputResponses"), "surprise", J("{}"));
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, &extra, NULL, 0), 0);
    cr_assert_eq(extra, 1);
    json_decref(out[0]);
    json_decref(out[1]);
    json_decref(params);
    for (int i = 0; i < 3; i++)
        tg_b26_pending_clear(&p[i]);
}

Test(bridge26, missing_responses_are_told_and_the_others_kept)
{
    tg_b26_pending_t p[2] = {pend_of("github_login", TG_B26_ELICITATION, "1"),
                             pend_of("roots_1", TG_B26_ROOTS, "2")};
    json_t *params = retry_params(SPEC_INPUT_RESPONSES), *out[2];
    char why[128] = "";
    size_t extra = 0;
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, &extra, why, sizeof why), -ENOENT);
    cr_assert_not_null(strstr(why, "roots_1"), "%s", why);
    cr_assert_eq(extra, 1, "capital_of_france was not asked here");
    assert_json(out[0], "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" SPEC_ELICIT_RESULT "}");
    cr_assert_null(out[1]);
    json_decref(params);

    params = retry_params(NULL);
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, why, sizeof why), -ENOENT,
                 "a retry with no inputResponses: ask again");
    cr_assert_null(out[0]);
    cr_assert_null(out[1]);
    cr_assert_eq(tg_b26_input_responses(params, p, 0, out, &extra, why, sizeof why), 0,
                 "nothing pending (a state-only round)");
    json_decref(params);
    for (int i = 0; i < 2; i++)
        tg_b26_pending_clear(&p[i]);
}

Test(bridge26, malformed_responses_are_refused_whole)
{
    static const struct {
        const char *elicit, *why;
    } bad[] = {
        {"\"accept\"", "inputResponses.e: not an object"},
        {"{}", "e.action"},
        {"{\"action\":\"maybe\"}", "e.action"},
        {"{\"action\":\"accept\",\"content\":[]}", "e.content"},
        {"{\"action\":\"accept\",\"content\":{\"a\":{\"nested\":1}}}", "e.content.a"},
        {"{\"action\":\"accept\",\"content\":{\"a\":[\"x\",2]}}", "e.content.a"},
        {"{\"action\":\"accept\",\"content\":{\"a\":null}}", "e.content.a"},
    };
    tg_b26_pending_t p[2] = {pend_of("s", TG_B26_SAMPLING, "1"),
                             pend_of("e", TG_B26_ELICITATION, "2")};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char resp[1024], why[160] = "";
        snprintf(resp, sizeof resp, "{\"s\":" SPEC_SAMPLING_RESULT ",\"e\":%s}", bad[i].elicit);
        json_t *params = retry_params(resp), *out[2] = {J("1"), J("2")};
        json_t *keep[2] = {out[0], out[1]};
        cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, why, sizeof why), -EINVAL,
                     "%s", resp);
        cr_assert_null(out[0], "nothing half-made: %s", resp);
        cr_assert_null(out[1]);
        cr_assert_not_null(strstr(why, bad[i].why), "%s: why = %s", resp, why);
        json_decref(keep[0]);
        json_decref(keep[1]);
        json_decref(params);
    }
    /* accepted shapes: decline without content, primitives and string lists */
    json_t *params = retry_params("{\"s\":" SPEC_SAMPLING_RESULT ",\"e\":{\"action\":\"accept\","
                                  "\"content\":{\"a\":\"x\",\"b\":2.5,\"c\":true,\"d\":[\"y\"]}}}");
    json_t *out[2];
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, NULL, 0), 0);
    json_decref(out[0]);
    json_decref(out[1]);
    json_decref(params);

    static const struct {
        const char *sampling, *why;
    } bads[] = {
        {"{\"content\":{},\"model\":\"m\"}", "s.role"},
        {"{\"role\":\"system\",\"content\":{},\"model\":\"m\"}", "s.role"},
        {"{\"role\":\"assistant\",\"content\":\"hi\",\"model\":\"m\"}", "s.content"},
        {"{\"role\":\"assistant\",\"content\":[]}", "s.model"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        char resp[1024], why[160] = "";
        snprintf(resp, sizeof resp, "{\"s\":%s,\"e\":{\"action\":\"cancel\"}}", bads[i].sampling);
        params = retry_params(resp);
        cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, why, sizeof why), -EINVAL,
                     "%s", resp);
        cr_assert_not_null(strstr(why, bads[i].why), "%s: why = %s", resp, why);
        json_decref(params);
    }

    tg_b26_pending_t r = pend_of("r", TG_B26_ROOTS, "3");
    const char *bad_roots[] = {"{\"r\":{}}", "{\"r\":{\"roots\":{}}}",
                               "{\"r\":{\"roots\":[{\"name\":\"x\"}]}}"};
    for (size_t i = 0; i < 3; i++) {
        params = retry_params(bad_roots[i]);
        cr_assert_eq(tg_b26_input_responses(params, &r, 1, out, NULL, NULL, 0), -EINVAL, "%s",
                     bad_roots[i]);
        json_decref(params);
    }
    tg_b26_pending_clear(&r);

    char why[128] = "";
    params = J("{\"inputResponses\":[]}");
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, why, sizeof why), -EINVAL);
    cr_assert_not_null(strstr(why, "inputResponses"), "%s", why);
    json_decref(params);
    params = J("[]");
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, why, sizeof why), -EINVAL);
    json_decref(params);
    for (int i = 0; i < 2; i++)
        tg_b26_pending_clear(&p[i]);
}

Test(bridge26, an_abandoned_request_is_answered_with_an_error)
{
    json_t *id = J("\"srv-9\"");
    assert_json(tg_b26_server_error(id, -32603, "the client did not answer in time"),
                "{\"jsonrpc\":\"2.0\",\"id\":\"srv-9\",\"error\":{\"code\":-32603,"
                "\"message\":\"the client did not answer in time\"}}");
    json_decref(id);
    id = J("null");
    cr_assert_null(tg_b26_server_error(id, -32603, "x"));
    json_decref(id);
}

/* ---- requests ---- */

Test(bridge26, strip_removes_what_a_2025_server_must_not_see)
{
    json_t *r = J("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                  "\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\"},"
                  "\"inputResponses\":{\"a\":{}},\"requestState\":\"tgs1.xyz\","
                  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                  "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",\"version\":\"1\"},"
                  "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{}},"
                  "\"io.modelcontextprotocol/logLevel\":\"debug\",\"progressToken\":5,"
                  "\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}}}");
    cr_assert_eq(tg_b26_strip_request(r), 0);
    assert_json(r, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                   "\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\"},"
                   "\"_meta\":{\"progressToken\":5,\"traceparent\":"
                   "\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}}}");

    /* server/discover.mdx's request: nothing left of _meta */
    r = J("{\"jsonrpc\":\"2.0\",\"id\":\"discover-1\",\"method\":\"server/discover\","
          "\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
          "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"ExampleClient\",\"version\":"
          "\"1.0.0\"},\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
    cr_assert_eq(tg_b26_strip_request(r), 0);
    assert_json(r, "{\"jsonrpc\":\"2.0\",\"id\":\"discover-1\",\"method\":\"server/discover\","
                   "\"params\":{}}");

    r = J("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    cr_assert_eq(tg_b26_strip_request(r), 0, "no params");
    json_decref(r);
    const char *bad[] = {"[]", "{\"params\":[]}", "{\"params\":{\"_meta\":1}}"};
    for (size_t i = 0; i < 3; i++) {
        r = J(bad[i]);
        cr_assert_eq(tg_b26_strip_request(r), -EINVAL, "%s", bad[i]);
        json_decref(r);
    }
}

/* ---- a whole multi round trip ---- */

/* A 2026 client calls a tool of a 2025 server, which asks for an
 * elicitation and the roots during the call: the bridge answers the
 * client with an InputRequiredResult and a sealed requestState, the
 * client retries with its answers, and the server gets one response per
 * request, with its own ids. */
Test(bridge26, round_trip_through_a_sealed_request_state)
{
    const char *caps = "{\"elicitation\":{},\"roots\":{}}";
    const char *srv[2] = {"{\"jsonrpc\":\"2.0\",\"id\":100," ELICIT_BODY "}",
                          "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"}"};
    tg_b26_pending_t p[2];
    json_t *e[2];
    for (size_t i = 0; i < 2; i++)
        cr_assert_eq(input_of(srv[i], caps, i, &p[i], &e[i], NULL, 0), 0);

    uint8_t key[TG_SEAL_KEY_LEN] = {1}, nonce[TG_SEAL_NONCE_LEN] = {2};
    const char ad[] = "alice|fs|tools/call|get_weather";
    tg_seal_rec_t rec = {.expires_ms = 2000, .payload_len = 4, .payload = {'p', 'k', '0', '1'}};
    char state[TG_SEAL_TOKEN_MAX + 1];
    size_t slen = 0;
    cr_assert_eq(tg_seal(key, nonce, ad, strlen(ad), &rec, state, sizeof state, &slen), 0);
    json_t *irr = tg_b26_input_required(p, e, 2, state, NULL, 0);
    cr_assert_not_null(irr);
    char *wire = json_dumps(irr, JSON_COMPACT);
    json_decref(irr);
    json_decref(e[0]);
    json_decref(e[1]);

    /* The client, from the wire only: answer each input request by its key. */
    json_t *got = J(wire), *answers = json_object();
    free(wire);
    cr_assert_str_eq(json_string_value(json_object_get(got, "resultType")), "input_required");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(got, "inputRequests"), k, v)
    {
        const char *m = json_string_value(json_object_get(v, "method"));
        json_object_set_new(answers, k,
                            strcmp(m, "roots/list") == 0 ? J(SPEC_ROOTS_RESULT)
                                                         : J(SPEC_ELICIT_RESULT));
    }
    json_t *retry =
        json_pack("{s:s, s:i, s:s, s:{s:s, s:{}, s:O, s:O, s:{s:s, s:{}}}}", "jsonrpc", "2.0", "id",
                  2, "method", "tools/call", "params", "name", "get_weather", "arguments",
                  "inputResponses", answers, "requestState", json_object_get(got, "requestState"),
                  "_meta", TG_B26_META_VERSION, "2026-07-28", TG_B26_META_CCAPS);
    cr_assert_not_null(retry);
    json_decref(answers);
    json_decref(got);

    /* The bridge: the state opens under the same binding, then the answers. */
    json_t *params = json_object_get(retry, "params");
    const char *st = json_string_value(json_object_get(params, "requestState"));
    tg_seal_rec_t back;
    cr_assert_eq(tg_seal_open(key, ad, strlen(ad), st, strlen(st), 1000, &back), 0);
    cr_assert_eq(memcmp(back.payload, "pk01", 4), 0);
    cr_assert_eq(
        tg_seal_open(key, "bob|fs|tools/call|get_weather", 29, st, strlen(st), 1000, &back),
        TG_SEAL_INVALID, "another caller's retry");
    json_t *out[2];
    cr_assert_eq(tg_b26_input_responses(params, p, 2, out, NULL, NULL, 0), 0);
    assert_json(out[0], "{\"jsonrpc\":\"2.0\",\"id\":100,\"result\":" SPEC_ELICIT_RESULT "}");
    assert_json(out[1], "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"result\":" SPEC_ROOTS_RESULT "}");

    /* and what the 2025 server would have seen of the request itself */
    cr_assert_eq(tg_b26_strip_request(retry), 0);
    assert_json(retry, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                       "{\"name\":\"get_weather\",\"arguments\":{}}}");
    for (size_t i = 0; i < 2; i++)
        tg_b26_pending_clear(&p[i]);
}
