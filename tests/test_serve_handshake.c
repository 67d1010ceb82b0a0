/* `toolgate serve`: an MCP session's agent instance starts with the
 * caller's initialize (issue 12 item 4). Idle connections hold no
 * instance, so they cannot lock callers out of max_instances; one that
 * sends no initialize within router.handshake_timeout is closed (audited),
 * without an agent ever starting for it; connections are bounded per
 * listener by max_connections. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_serve_t H;

static void h_fini(void)
{
    tgh_cleanup();
}

/* Serve agent "fx" (the fixture) behind one socket; <listen_extra>,
 * <router_extra> and <agent_extra> are spliced into the JSON. */
static void h_start(const char *listen_extra, const char *router_extra, const char *agent_extra)
{
    cr_assert_eq(tgh_serve_prepare(&H, "fx"), 0);
    tgh_fx_write(&H, &(tgh_fx_t){.listen_extra = listen_extra, .router_extra = router_extra,
                                 .agent_extra = agent_extra});
    tgh_serve_start(&H, NULL, NULL, 5000);
}

/* Fixture instances started so far (its log's "start <pid>" lines). */
static int h_starts(void)
{
    return tgh_log_count(H.log, "start ");
}

/* The error code of JSON-RPC answer <r> (0 when it is none). */
static json_int_t h_rpc_code(const json_t *r)
{
    return json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

/* Initialize over <c>: refused with concurrency_limit_exceeded, naming
 * the bound at <config_path>. */
static void h_init_refused(tgh_proc_t *c, const char *config_path)
{
    json_t *r = mcp_initialize(c, 5000);
    cr_assert_not_null(r, "no answer to the initialize over %s", config_path);
    cr_assert_str_eq(mcp_code_of(r), "concurrency_limit_exceeded");
    json_t *data = mcp_data_of(r);
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")), config_path);
    json_decref(r);
}

/* Read up to <timeout_ms> for the end of <c>: true once it came. */
static bool h_wait_eof(tgh_proc_t *c, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    while (!c->out_eof && tgh_now_ms() < deadline)
        json_decref(tgh_read_json(c, 200, NULL));
    return c->out_eof;
}

TestSuite(serve_handshake, .fini = h_fini, .timeout = 60);

/* More idle connections than max_instances: none of them has an instance,
 * and a caller that initializes is served. */
Test(serve_handshake, idle_connections_do_not_lock_out_a_caller)
{
    h_start(NULL, NULL, ", \"max_instances\": 8");
    enum { NIDLE = 10 };
    tgh_proc_t idle[NIDLE];
    for (int i = 0; i < NIDLE; i++)
        mcp_connect(&idle[i], H.sock);
    tgh_sleep_ms(300);
    cr_assert_eq(h_starts(), 0, "an agent instance was started for a connection that sent nothing");
    tgh_proc_t a;
    mcp_connect(&a, H.sock);
    json_t *r = mcp_initialize(&a, 5000);
    cr_assert(r != NULL && json_object_get(r, "result") != NULL,
              "%d idle connections locked a caller out of max_instances 8", NIDLE);
    json_decref(r);
    mcp_call_text(&a, 1, "echo", "{\"text\":\"served\"}", "served", 5000);
    cr_assert_eq(h_starts(), 1, "one initialize, one instance");
    /* The idle ones are still connected, and still hold nothing. */
    tgh_proc_t *last = &idle[NIDLE - 1];
    tgh_sendf(last, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}");
    r = mcp_await_int(last, 5, 3000, NULL);
    cr_assert(r != NULL && json_is_object(json_object_get(r, "result")),
              "a ping before initialize was not answered");
    json_decref(r);
    cr_assert_eq(h_starts(), 1);
    for (int i = 0; i < NIDLE; i++)
        tgh_conn_close(&idle[i]);
    tgh_conn_close(&a);
    tgh_serve_stop(&H, 10000);
}

/* max_instances still bounds instances: counted at initialize. */
Test(serve_handshake, max_instances_counts_initialized_sessions)
{
    h_start(NULL, NULL, ", \"max_instances\": 1");
    tgh_proc_t idle, a, b;
    mcp_connect(&idle, H.sock);
    mcp_connect(&a, H.sock);
    mcp_init_ok(&a, 5000);
    mcp_connect(&b, H.sock);
    h_init_refused(&b, "agents.fx.max_instances");
    json_t *r;
    cr_assert(h_wait_eof(&b, 3000), "the refused session stayed open");
    cr_assert_eq(h_starts(), 1);
    /* Once a's instance is gone, another caller gets one. */
    tgh_conn_close(&a);
    tgh_proc_t c;
    bool served = false;
    for (int k = 0; k < 50 && !served; k++) {
        mcp_connect(&c, H.sock);
        r = mcp_initialize(&c, 5000);
        served = r != NULL && json_object_get(r, "result") != NULL;
        json_decref(r);
        if (!served) {
            tgh_conn_close(&c);
            tgh_sleep_ms(100);
        }
    }
    cr_assert(served, "the instance of a caller that left was not given back");
    tgh_conn_close(&c);
    tgh_conn_close(&b);
    tgh_conn_close(&idle);
    tgh_serve_stop(&H, 10000);
}

/* No initialize within router.handshake_timeout: told, closed, audited,
 * and no agent ever started; other requests before initialize get -32600
 * and do not stop the clock. */
Test(serve_handshake, no_initialize_within_handshake_timeout_is_closed)
{
    h_start(NULL, ", \"handshake_timeout\": \"700ms\"", NULL);
    tgh_proc_t a;
    mcp_connect(&a, H.sock);
    uint64_t t0 = tgh_now_ms();
    mcp_call(&a, 1, "echo", "{\"text\":\"too soon\"}");
    json_t *r = mcp_await_int(&a, 1, 3000, NULL);
    cr_assert_not_null(r, "no answer to a tools/call before initialize");
    cr_assert_eq(h_rpc_code(r), -32600);
    json_decref(r);
    tgh_sendf(&a, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    r = mcp_await_int(&a, 2, 3000, NULL);
    cr_assert_eq(h_rpc_code(r), -32600, "tools/list before initialize must be refused");
    json_decref(r);
    /* Then the connection is told and closed. */
    r = tgh_read_json(&a, 5000, NULL);
    cr_assert_not_null(r, "nothing said before closing the connection");
    cr_assert_eq(h_rpc_code(r), -32600);
    cr_assert(json_is_null(json_object_get(r, "id")));
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg && strstr(msg, "router.handshake_timeout"), "the message does not name the key");
    json_decref(r);
    cr_assert(h_wait_eof(&a, 3000), "the connection stayed open past handshake_timeout");
    uint64_t took = tgh_now_ms() - t0;
    cr_assert_geq(took, 600, "closed before handshake_timeout (%llu ms)", (unsigned long long)took);
    tgh_conn_close(&a);
    cr_assert_eq(tgh_file_wait(H.audit, "\"reason\":\"handshake_timeout\"", 1, 3000), 1,
                 "the closed connection was not audited");
    cr_assert_eq(h_starts(), 0, "an agent was started for a connection that never initialized");
    cr_assert_eq(tgh_file_count(H.audit, "\"event\":\"agent.started\""), 0);
    tgh_serve_stop(&H, 10000);
}

/* A slow initialize, cut in two, complete within the timeout: the session
 * works, and goes on past the timeout. */
Test(serve_handshake, slow_valid_initialize_within_the_timeout_works)
{
    h_start(NULL, ", \"handshake_timeout\": \"1500ms\"", NULL);
    tgh_proc_t a;
    mcp_connect(&a, H.sock);
    const char *init = MCP_INITIALIZE "\n";
    size_t half = strlen(init) / 2;
    tgh_sleep_ms(300);
    cr_assert_eq(tgh_send(&a, init, half, 1000), 0);
    tgh_sleep_ms(500);
    cr_assert_eq(h_starts(), 0, "the instance started before the initialize was complete");
    cr_assert_eq(tgh_send(&a, init + half, strlen(init) - half, 1000), 0);
    json_t *r = mcp_await_int(&a, 0, 5000, NULL);
    cr_assert(r != NULL && json_object_get(r, "result") != NULL, "the slow initialize failed");
    json_decref(r);
    tgh_sendf(&a, MCP_INITIALIZED);
    tgh_sleep_ms(1500); /* past the handshake timeout */
    mcp_call_text(&a, 1, "echo", "{\"text\":\"still here\"}", "still here", 5000);
    cr_assert_eq(tgh_log_count(H.log, "initialize "), 1, "the agent saw the initialize once");
    cr_assert_eq(tgh_file_count(H.audit, "handshake_timeout"), 0);
    tgh_conn_close(&a);
    tgh_serve_stop(&H, 10000);
}

/* An mcp listener's connections are bounded by its max_connections. */
Test(serve_handshake, max_connections_bounds_an_mcp_listener)
{
    h_start(", \"max_connections\": 2", NULL, NULL);
    tgh_proc_t a, b, c;
    mcp_connect(&a, H.sock);
    mcp_connect(&b, H.sock);
    tgh_sleep_ms(200);
    mcp_connect(&c, H.sock);
    h_init_refused(&c, "router.listen[0].max_connections");
    tgh_conn_close(&c);
    mcp_init_ok(&a, 5000);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    tgh_serve_stop(&H, 10000);
}
