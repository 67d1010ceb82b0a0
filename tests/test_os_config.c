/* The opensentience sections of the config: defaults, keys, errors with
 * positions, shared limits, and what `toolgate check` says of them (moved
 * out of test_os.c, which drives the running gateway). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/tg_harness.h"

static tgh_proc_t aux; /* `check`: registered with the harness, so not on a stack */

static tg_config_t cfg;
static tg_err_t err;

static int load(const char *json)
{
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    if (tg_config_load_buffer(&cfg, "t.json", json, strlen(json), &err) < 0)
        return -1;
    return tg_config_validate(&cfg, &err);
}

/* <json> loads or validates with exactly the error <msg>. */
static void load_fails(const char *json, const char *msg)
{
    cr_assert_eq(load(json), -1, "accepted: %s", json);
    cr_assert_str_eq(err.msg, msg);
}

static void cfg_fini(void)
{
    tg_config_free(&cfg);
    tgh_cleanup();
}

TestSuite(os_config, .fini = cfg_fini, .timeout = 30);

Test(os_config, defaults_and_keys)
{
    cr_assert_eq(
        load("{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"dialect\":\"opensentience\"}]},"
             "\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"]}]}"),
        0, "%s", err.msg);
    cr_assert_eq(cfg.listen[0].dialect, TG_DIALECT_OPENSENTIENCE);
    cr_assert_null(cfg.listen[0].agent);
    cr_assert_eq(cfg.listen[0].on_oversize, TG_OVERSIZE_REJECT);
    cr_assert_eq(cfg.listen[0].max_connections, 0,
                 "0: the default (TG_DEF_LISTEN_MAX_CONNECTIONS)");
    const tg_agent_cfg_t *a = &cfg.agents[0];
    cr_assert_eq(a->start, TG_START_EAGER);
    cr_assert_eq(a->os.heartbeat_interval_ms, 5000);
    cr_assert_eq(a->os.heartbeat_timeout_ms, 15000);
    cr_assert_eq(a->os.idempotency_window_ms, 600000);
    cr_assert_eq(a->os.idempotency_max_bytes, 16u * 1024 * 1024);
    cr_assert_eq(a->os.on_oversize, TG_OVERSIZE_REJECT);

    cr_assert_eq(
        load("{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"dialect\":\"opensentience\","
             "\"on_oversize\":\"close\",\"max_connections\":7}]},"
             "\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
             "\"start\":\"on_demand\",\"opensentience\":{\"heartbeat_interval\":\"1s\","
             "\"heartbeat_timeout\":\"3s\",\"idempotency_window\":\"1m\","
             "\"idempotency_max_bytes\":\"1Mi\",\"on_oversize\":\"close\"}}]}"),
        0, "%s", err.msg);
    a = &cfg.agents[0];
    cr_assert_eq(cfg.listen[0].on_oversize, TG_OVERSIZE_CLOSE);
    cr_assert_eq(cfg.listen[0].max_connections, 7);
    cr_assert_eq(a->start, TG_START_ON_DEMAND);
    cr_assert_eq(a->os.heartbeat_interval_ms, 1000);
    cr_assert_eq(a->os.heartbeat_timeout_ms, 3000);
    cr_assert_eq(a->os.idempotency_window_ms, 60000);
    cr_assert_eq(a->os.idempotency_max_bytes, 1024 * 1024);
    cr_assert_eq(a->os.on_oversize, TG_OVERSIZE_CLOSE);
}

Test(os_config, errors)
{
    load_fails("{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"dialect\":\"opensentience\","
               "\"agent\":\"a\"}]},\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\","
               "\"command\":[\"/bin/a\"]}]}",
               "t.json:1:22: router.listen[0]: an opensentience listener routes calls "
               "by tool_id to every opensentience agent (remove \"agent\")");
    load_fails("{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"agent\":\"a\"}]},"
               "\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"]}]}",
               "router.listen[0].agent: agent \"a\" speaks opensentience (serve it "
               "on a listener with \"dialect\": \"opensentience\", which routes by tool_id)");
    load_fails("{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"dialect\":\"opensentience\"}]},"
               "\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/a\"]}]}",
               "router.listen[0].dialect: no agent in agents[] speaks "
               "opensentience (expected at least one with \"dialect\": \"opensentience\")");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/a\"],"
               "\"opensentience\":{\"heartbeat_interval\":\"1s\"}}]}",
               "agents[0].opensentience: agent \"a\" speaks mcp (expected "
               "\"dialect\": \"opensentience\", or remove the key)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/a\"],\"start\":\"eager\"}]}",
               "agents[0].start: an mcp agent starts one instance per caller "
               "connection (expected \"on_demand\")");
    load_fails("{\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
               "\"opensentience\":{\"heartbeat_interval\":\"10s\",\"heartbeat_timeout\":\"5s\"}}]}",
               "agents[0].opensentience.heartbeat_timeout: 5s is shorter than "
               "heartbeat_interval 10s (expected at least one interval)");
    cr_assert_eq(
        load("{\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
             "\"opensentience\":{\"heartbeat_interval\":\"5ms\"}}]}"),
        -1);
    cr_assert(strstr(err.msg,
                     "agents[0].opensentience.heartbeat_interval: \"5ms\" is out of range") != NULL,
              "%s", err.msg);
    cr_assert_eq(
        load("{\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
             "\"opensentience\":{\"beat\":\"1s\"}}]}"),
        -1);
    cr_assert(strstr(err.msg,
                     "unknown key \"beat\" (allowed: heartbeat_interval, heartbeat_timeout, "
                     "idempotency_window, idempotency_max_bytes, on_oversize)") != NULL,
              "%s", err.msg);
    cr_assert_eq(
        load("{\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
             "\"opensentience\":{\"on_oversize\":\"drop\"}}]}"),
        -1);
    cr_assert(strstr(err.msg, "opensentience.on_oversize") != NULL, "%s", err.msg);
    /* Shared limits as for MCP agents: slots need the store. */
    load_fails("{\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
               "\"execution_limits\":{\"concurrency_scope\":\"shared\"}}]}",
               "agents[0].execution_limits.concurrency_scope: \"shared\" needs a "
               "shared store (expected store {\"kind\": \"redis\", \"url\": ...} or "
               "--store URL)");
}

Test(os_config, shared_limits)
{
    cr_assert_eq(
        load("{\"store\":{\"kind\":\"redis\",\"url\":\"redis://127.0.0.1:1/0\"},"
             "\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\",\"command\":[\"/bin/a\"],"
             "\"execution_limits\":{\"rate_scope\":\"shared\",\"shared_mode\":\"lease\","
             "\"concurrency_scope\":\"shared\"},\"tools\":{\"t\":{\"rate_limit\":\"1/second\","
             "\"rate_scope\":\"shared\"}}}]}"),
        0, "%s", err.msg);
    cr_assert(cfg.agents[0].tools[0].lim.rate_shared);
    cr_assert(cfg.agents[0].rate_shared);
    cr_assert(cfg.agents[0].shared_lease);
    cr_assert(cfg.agents[0].conc_shared);
}

Test(os_config, check_shows_the_runtime)
{
    char dir[TGH_PATH], path[TGH_PATH + 16], out[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/c.json", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    cr_assert_eq(tgh_write_file(path,
                                "{\"router\":{\"listen\":[{\"unix\":\"/tmp/x.sock\",\"dialect\":"
                                "\"opensentience\"}]},\"containment\":{\"mode\":\"off\"},"
                                "\"agents\":[{\"id\":\"a\",\"dialect\":\"opensentience\","
                                "\"command\":[\"/bin/true\"],\"start\":\"on_demand\","
                                "\"opensentience\":{\"heartbeat_interval\":\"2s\","
                                "\"idempotency_window\":\"1m\",\"on_oversize\":\"close\"}}]}"),
                 0);
    tgh_proc_t *p = &aux;
    char *const argv[] = {(char *)TG_BIN, (char *)"check", (char *)"--config", path, NULL};
    cr_assert_eq(tgh_spawn(p, argv, NULL, out), 0);
    tgh_close_stdin(p);
    char text[16384];
    size_t n = 0;
    for (char *line; (line = tgh_read_line(p, 5000, NULL)) != NULL; free(line))
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\n", line);
    cr_assert_eq(tgh_wait(p, 5000), 0);
    cr_assert_eq(tgh_exit_code(p), 0, "%s", text);
    cr_assert_not_null(strstr(text, "  opensentience: one shared instance, started by the first "
                                    "call; heartbeat every 2s, unhealthy after 15s without one\n"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "  idempotent results replayed for 1m (at most 16Mi kept); an "
                                    "over-cap agent frame is answered by restarting the agent\n"),
                       "%s", text);
}

