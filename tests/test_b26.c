/* The 2025 -> 2026 bridge of a session (issue 23,
 * router/dialect/mcp/session_b26.c): a client speaking MCP 2026-07-28
 * (server/discover, no initialize) in front of the fixture agent, which
 * speaks only the 2025 era. toolgate initializes the agent itself,
 * answers server/discover from its InitializeResult, gives every result
 * resultType (the lists ttlMs and cacheScope), and answers the agent's
 * own requests to the client with an error rather than sending them on. */
#include <criterion/criterion.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_wrap_t T;
static tgh_serve_t S;

static void b26_fini(void)
{
    tgh_cleanup();
}

TestSuite(b26, .fini = b26_fini, .timeout = 30);

#define META26                                                                                      \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"t\",\"version\":\"1\"},"                  \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

static int log_count(const char *needle)
{
    char *t = tgh_read_file(T.log, NULL);
    int n = 0;
    for (const char *p = t; p != NULL && (p = strstr(p, needle)) != NULL; p++)
        n++;
    free(t);
    return n;
}

static json_t *discover(int id)
{
    tgh_sendf(&T.tg, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"server/discover\",\"params\":{" META26
                     "}}\n",
              id);
    return mcp_expect_int(&T.tg, id, 10000);
}

Test(b26, a_2025_agent_is_initialized_by_toolgate_and_discover_answered_from_it)
{
    cr_assert_eq(tgh_wrap_start(&T, NULL, NULL, NULL), 0);
    json_t *r = discover(1);
    json_t *res = json_object_get(r, "result");
    cr_assert_not_null(res, "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(res, "supportedVersions"), 0)),
                     "2026-07-28", "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_object_get(res, "resultType")), "complete");
    cr_assert_not_null(json_object_get(json_object_get(res, "capabilities"), "tools"), "%s",
                       mcp_dump(r));
    json_decref(r);
    cr_assert_eq(log_count("initialize "), 1); /* toolgate's own */
    /* A second discover: from what toolgate kept, the agent not asked again. */
    json_decref(discover(2));
    cr_assert_eq(log_count("initialize "), 1);
    /* A list: resultType and the caching hints. */
    tgh_sendf(&T.tg, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{" META26
                     "}}\n");
    r = mcp_expect_int(&T.tg, 3, 10000);
    res = json_object_get(r, "result");
    cr_assert_str_eq(json_string_value(json_object_get(res, "resultType")), "complete", "%s",
                     mcp_dump(r));
    cr_assert(json_is_integer(json_object_get(res, "ttlMs")), "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_object_get(res, "cacheScope")), "public");
    cr_assert(json_array_size(json_object_get(res, "tools")) > 0);
    json_decref(r);
    /* A call, under toolgate's limits as ever. */
    tgh_sendf(&T.tg, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                     "\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}," META26 "}}\n");
    r = mcp_expect_int(&T.tg, 4, 10000);
    cr_assert_str_eq(mcp_text_of(r), "hi", "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "resultType")),
                     "complete");
    json_decref(r);
    /* An error passes as an error. */
    tgh_sendf(&T.tg, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"nope/nothing\",\"params\":{" META26
                     "}}\n");
    r = mcp_expect_int(&T.tg, 5, 10000);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32601,
                 "%s", mcp_dump(r));
    json_decref(r);
}

Test(b26, the_agents_own_requests_are_answered_by_toolgate_never_sent_to_a_2026_client)
{
    cr_assert_eq(tgh_wrap_start(&T, NULL, NULL, NULL), 0);
    json_decref(discover(1));
    /* The fixture's "ask" sends sampling/createMessage and answers the call
     * with what it got back: toolgate's error. */
    tgh_sendf(&T.tg, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                     "\"name\":\"ask\",\"arguments\":{}," META26 "}}\n");
    json_t *others = json_array();
    json_t *r = mcp_await_int(&T.tg, 2, 10000, others);
    cr_assert_str_eq(mcp_text_of(r), "got:error", "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_eq(json_array_size(others), 0, "a request reached the 2026 client: %s",
                 mcp_dump(others));
    json_decref(others);
}

Test(b26, an_agent_speaking_2026_itself_is_passed_through)
{
    /* The fixture answers server/discover when told to (TG_FIXTURE_DISCOVER):
     * toolgate then sends no initialize of its own. */
    static const char *const env[] = {"TG_FIXTURE_DISCOVER=1", NULL};
    cr_assert_eq(tgh_wrap_start(&T, NULL, NULL, env), 0);
    json_t *r = discover(1);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "fixture")),
                     "discover", "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_eq(log_count("initialize "), 0);
}

/* A Unix socket front with one agent: a 2026 client's server/discover
 * starts the connection's instance as an initialize would. */
Test(b26, serve_starts_the_instance_on_discover_and_bridges_it)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    tgh_fx_write(&S, &(tgh_fx_t){0});
    tgh_serve_start(&S, NULL, NULL, 5000);
    static tgh_proc_t c; /* registered with the harness: outlives the test body */
    mcp_connect(&c, S.sock);
    tgh_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META26
                  "}}\n");
    json_t *r = mcp_expect_int(&c, 1, 10000);
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(r, "result"), "supportedVersions"), 0)),
                     "2026-07-28", "%s", mcp_dump(r));
    json_decref(r);
    tgh_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                  "\"name\":\"echo\",\"arguments\":{\"text\":\"via serve\"}," META26 "}}\n");
    r = mcp_expect_int(&c, 2, 10000);
    cr_assert_str_eq(mcp_text_of(r), "via serve", "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "resultType")),
                     "complete");
    json_decref(r);
    tgh_serve_stop(&S, 10000);
}
