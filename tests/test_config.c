/* Config model: defaults, JSON loading with positioned errors, --limit,
 * validation, config paths, and the key table they all read. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config/config.h"
#include "config/keys.h"
#include "config/manifest.h"

#define DATA TG_SOURCE_DIR "/tests/data/"

static tg_config_t cfg;
static tg_err_t err;

static void setup(void)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(tg_config_default(&cfg), 0);
}

static void teardown(void)
{
    tg_config_free(&cfg);
}

static int load(const char *text)
{
    return tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err);
}

/* Load <text> expecting failure with exactly <msg>. */
static void load_fails(const char *text, const char *msg)
{
    int rc = load(text);
    cr_expect_eq(rc, -1, "accepted: %s", text);
    cr_expect_str_eq(err.msg, msg, "for: %s\n got: %s\nwant: %s", text, err.msg, msg);
}

static void limit_fails(const char *kv, const char *msg)
{
    int rc = tg_config_apply_limit(&cfg, 0, kv, &err);
    cr_expect_eq(rc, -1, "accepted: %s", kv);
    cr_expect_str_eq(err.msg, msg, "for: %s\n got: %s\nwant: %s", kv, err.msg, msg);
}

static char arg_true[] = "/bin/true";
static char *argv_x[] = {arg_true, NULL};

TestSuite(config, .init = setup, .fini = teardown);
TestSuite(keys, .init = setup, .fini = teardown);

/* ---- defaults ---- */

Test(config, defaults_equal_design)
{
    char host[256] = "";
    const tg_agent_cfg_t *a = &cfg.agents[0];

    cr_assert_eq(gethostname(host, sizeof host), 0);
    cr_expect_str_eq(cfg.instance, host);
    cr_expect_null(cfg.path);
    cr_expect_eq(cfg.max_frame_bytes, 4u * 1024 * 1024);
    cr_expect_eq(cfg.max_frame_src, TG_SRC_DEFAULT);
    cr_expect_null(cfg.audit_path);
    cr_expect_eq(cfg.audit_queue, 4096);
    cr_assert_eq(cfg.nagents, 1);
    cr_expect_str_eq(a->id, "agent");
    cr_expect_eq(a->dialect, TG_DIALECT_MCP);
    cr_expect_null(a->command);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 15000);
    cr_expect_eq(a->lim.max_concurrent_calls, 3);
    cr_expect_eq(a->lim.max_queued_calls, 16);
    cr_expect_eq(a->lim.rate_limit.count, 60);
    cr_expect_eq(a->lim.rate_limit.period_ms, 60000);
    cr_expect_eq(a->lim.burst, 0);
    cr_expect_eq(a->lim.duration_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->lim.queued_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->lim.burst_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->ntools, 0);
    cr_expect_null(a->tools);
    cr_expect_eq(a->kill_grace_ms, 5000);
    cr_expect_eq(a->kill_grace_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->restart_policy, TG_RESTART_ON_FAILURE);
    cr_expect_eq(a->max_restarts, 5);
    cr_expect_eq(a->restart_window_ms, 60000);
    cr_expect_eq(a->backoff_initial_ms, 100);
    cr_expect_eq(a->backoff_max_ms, 5000);
    cr_expect_eq(a->stderr_bytes_per_sec, 64 * 1024);
    cr_expect_eq(a->stderr_line_max, 4 * 1024);
}

Test(config, default_needs_a_command)
{
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[0].command: no command (expected \"command\" in the config "
                              "or a command after --)");
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv_x, &err), 0);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

/* ---- loading good configs ---- */

Test(config, load_full_example)
{
    const tg_agent_cfg_t *a;
    const tg_tool_cfg_t *t;

    cr_assert_eq(tg_config_load_file(&cfg, DATA "config_full.json", &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg.path, DATA "config_full.json");
    cr_expect_str_eq(cfg.instance, "host-a");
    cr_expect_eq(cfg.max_frame_bytes, 4194304);
    cr_expect_eq(cfg.max_frame_src, TG_SRC_FILE);
    cr_expect_str_eq(cfg.audit_path, "/var/log/toolgate/audit.jsonl");
    cr_expect_eq(cfg.audit_queue, 4096);
    cr_assert_eq(cfg.nagents, 1);
    a = &cfg.agents[0];
    cr_expect_str_eq(a->id, "search");
    cr_expect_eq(a->dialect, TG_DIALECT_MCP);
    cr_assert_not_null(a->command);
    cr_expect_str_eq(a->command[0], "/usr/bin/x");
    cr_expect_str_eq(a->command[1], "arg");
    cr_expect_null(a->command[2]);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 30000);
    cr_expect_eq(a->lim.max_concurrent_calls, 5);
    cr_expect_eq(a->lim.max_queued_calls, 16);
    cr_expect_eq(a->lim.rate_limit.count, 100);
    cr_expect_eq(a->lim.rate_limit.period_ms, 60000);
    cr_expect_eq(a->lim.burst, 100);
    cr_expect_eq(a->lim.duration_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.queued_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.rate_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.burst_src, TG_SRC_FILE);
    cr_expect_eq(a->kill_grace_ms, 5000);
    cr_expect_eq(a->kill_grace_src, TG_SRC_FILE);
    cr_assert_eq(a->ntools, 1);
    t = tg_config_tool(a, "web", 3);
    cr_assert_not_null(t);
    cr_expect_str_eq(t->name, "web");
    cr_expect_eq(t->lim.rate_limit.count, 10);
    cr_expect_eq(t->lim.rate_limit.period_ms, 60000);
    cr_expect_eq(t->lim.max_concurrent_calls, 1);
    cr_expect_eq(t->lim.max_tool_call_duration_ms, 5000);
    cr_expect_eq(t->lim.max_queued_calls, 4);
    cr_expect_eq(t->lim.burst, 2);
    cr_expect_eq(t->lim.rate_src, TG_SRC_FILE);
    cr_expect_eq(t->lim.burst_src, TG_SRC_FILE);
    cr_expect_eq(a->restart_policy, TG_RESTART_ON_FAILURE);
    cr_expect_eq(a->max_restarts, 5);
    cr_expect_eq(a->restart_window_ms, 60000);
    cr_expect_eq(a->backoff_initial_ms, 100);
    cr_expect_eq(a->backoff_max_ms, 5000);
    cr_expect_eq(a->stderr_bytes_per_sec, 65536);
    cr_expect_eq(a->stderr_line_max, 4096);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

Test(config, load_serve_config_in_wrap)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(tg_config_load_file(&cfg, DATA "config_serve.json", &err), 0, "%s", err.msg);
    cr_assert_eq(cfg.nagents, 2);
    a = &cfg.agents[0];
    cr_expect_str_eq(a->id, "search");
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 30000);
    cr_expect_eq(a->lim.max_concurrent_calls, 5);
    cr_expect_eq(a->lim.rate_limit.count, 100);
    /* Unset fields keep DESIGN.md's defaults. */
    cr_expect_eq(a->lim.max_queued_calls, 16);
    cr_expect_eq(a->lim.queued_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->lim.burst, 0);
    cr_expect_eq(a->lim.burst_src, TG_SRC_DEFAULT);
    cr_assert_eq(a->ntools, 1);
    cr_expect_eq(a->tools[0].lim.rate_limit.count, 10);
    cr_expect_eq(a->tools[0].lim.duration_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->tools[0].lim.concurrent_src, TG_SRC_DEFAULT);
    a = &cfg.agents[1];
    cr_expect_str_eq(a->id, "files");
    cr_expect_eq(a->dialect, TG_DIALECT_OPENSENTIENCE);
    cr_expect_str_eq(a->command[2], "/srv");
    cr_expect_eq(a->restart_policy, TG_RESTART_ALWAYS);
    cr_expect_null(cfg.audit_path);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

Test(config, deploy_example_serve_loads)
{
    cr_assert_eq(tg_config_load_file(&cfg, TG_SOURCE_DIR "/deploy/examples/serve.json", &err), 0,
                 "%s", err.msg);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(cfg.nlisten, 1);
    cr_expect_str_eq(cfg.listen[0].agent, "demo");
    cr_expect_eq(cfg.listen[0].mode, 0660);
    cr_assert_eq(cfg.ncallers, 2);
    cr_expect_eq(cfg.callers[0].uid, 1001);
    cr_expect_eq(cfg.callers[0].lim.rate_limit.count, 30);
    cr_expect_str_eq(cfg.callers[1].name, "default");
    cr_expect_str_eq(cfg.admin_addr, "127.0.0.1:9464");
    cr_expect_eq(cfg.agents[0].max_instances, 8);
    cr_expect_str_eq(cfg.agents[0].env_pass[0], "PATH");
    cr_expect_str_eq(cfg.agents[0].env_set[0], "LANG=C.UTF-8");
    /* the bundled demo agent, where the package installs it */
    cr_expect_str_eq(cfg.agents[0].command[0], "/usr/libexec/toolgate/demo-agent");
}

/* The bounds of the admin endpoint and the store's tuning are config keys,
 * with floors and ceilings; resources.nofile sets RLIMIT_NOFILE. */
Test(config, admin_store_and_nofile_bounds_are_wired)
{
    static const char text[] =
        "{\"router\":{\"admin\":{\"listen\":\"127.0.0.1:9999\",\"max_header_bytes\":\"4Ki\","
        "\"max_connections\":4,\"idle_timeout\":\"2s\",\"max_response_bytes\":\"1Mi\"}},"
        "\"store\":{\"kind\":\"redis\",\"url\":\"redis://127.0.0.1:6379/0\","
        "\"connect_timeout\":\"2s\",\"dead_after\":\"3s\",\"backoff\":\"50ms\","
        "\"max_backoff\":\"10s\",\"lease\":\"500ms\",\"max_pending\":1000,"
        "\"local_max_keys\":5000},"
        "\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"],"
        "\"resources\":{\"nofile\":{\"limit\":4096}}}]}";
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", text, sizeof text - 1, &err), 0, "%s",
                 err.msg);
    cr_expect_str_eq(cfg.admin_addr, "127.0.0.1:9999");
    cr_expect_eq(cfg.admin_max_header_bytes, 4096);
    cr_expect_eq(cfg.admin_max_connections, 4);
    cr_expect_eq(cfg.admin_idle_timeout_ms, 2000);
    cr_expect_eq(cfg.admin_max_response_bytes, 1u << 20);
    cr_expect_eq(cfg.store.connect_timeout_ms, 2000);
    cr_expect_eq(cfg.store.dead_after_ms, 3000);
    cr_expect_eq(cfg.store.backoff_ms, 50);
    cr_expect_eq(cfg.store.max_backoff_ms, 10000);
    cr_expect_eq(cfg.store.lease_ms, 500);
    cr_expect_eq(cfg.store.max_pending, 1000);
    cr_expect_eq(cfg.store.local_max_keys, 5000);
    cr_expect_eq(cfg.agents[0].res.nofile, 4096);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_expect_eq(cfg.agents[0].res.nofile, TG_CONTAIN_DEF_NOFILE);
    static const char bad[] = "{\"router\":{\"admin\":{\"listen\":\"127.0.0.1:1\","
                              "\"max_connections\":100000}}}";
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", bad, sizeof bad - 1, &err), -1);
    cr_expect(strstr(err.msg, "router.admin.max_connections") != NULL, "%s", err.msg);
    static const char nolisten[] = "{\"router\":{\"admin\":{\"max_connections\":2}}}";
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", nolisten, sizeof nolisten - 1, &err), -1);
    cr_expect(strstr(err.msg, "listen") != NULL, "%s", err.msg);
}

Test(config, deploy_example_wrap_loads)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(tg_config_load_file(&cfg, TG_SOURCE_DIR "/deploy/examples/wrap.json", &err), 0,
                 "%s", err.msg);
    cr_assert_eq(cfg.nagents, 1);
    a = &cfg.agents[0];
    cr_expect_str_eq(a->id, "search");
    cr_expect_null(a->command);
    cr_expect_eq(a->lim.rate_limit.count, 120);
    cr_expect_not_null(tg_config_tool(a, "web", 3));
    /* Wrap mode: the command after -- is agents[0]'s command. */
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv_x, &err), 0);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

Test(config, file_without_agents_keeps_default_agent)
{
    cr_assert_eq(load("{\"router\": {\"instance\": \"h1\", \"max_frame_bytes\": 65536},"
                      " \"audit\": {\"queue\": \"100\"}}"),
                 0, "%s", err.msg);
    cr_expect_str_eq(cfg.instance, "h1");
    cr_expect_eq(cfg.max_frame_bytes, 65536);
    cr_expect_eq(cfg.audit_queue, 100);
    cr_assert_eq(cfg.nagents, 1);
    cr_expect_str_eq(cfg.agents[0].id, "agent");
    cr_expect_eq(cfg.agents[0].lim.rate_limit.count, 60);
    cr_expect_null(cfg.path);
}

Test(config, file_agents_replace_default_agent)
{
    cr_assert_eq(
        load("{\"agents\": [{\"id\": \"a\"}, {\"id\": \"b\", \"command\": [\"/x\", \"\"]}]}"), 0,
        "%s", err.msg);
    cr_assert_eq(cfg.nagents, 2);
    cr_expect_str_eq(cfg.agents[0].id, "a");
    cr_expect_str_eq(cfg.agents[1].id, "b");
    cr_expect_str_eq(cfg.agents[1].command[1], "");
    cr_expect_eq(cfg.agents[1].kill_grace_ms, 5000);
    cr_expect_eq(cfg.agents[1].lim.max_concurrent_calls, 3);
}

Test(config, counts_as_strings_and_edges)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(load("{\"router\": {\"max_frame_bytes\": \"64\"}, \"agents\": [{\"id\": \"a\","
                      " \"execution_limits\": {\"max_concurrent_calls\": \"65536\","
                      " \"max_queued_calls\": 0, \"burst\": \"1000000\","
                      " \"max_tool_call_duration\": \"24h\", \"rate_limit\": \"1000000/s\","
                      " \"kill_grace_period\": \"10m\"},"
                      " \"restart\": {\"max_restarts\": \"0\", \"policy\": \"no\"}}]}"),
                 0, "%s", err.msg);
    a = &cfg.agents[0];
    cr_expect_eq(cfg.max_frame_bytes, 64);
    cr_expect_eq(a->lim.max_concurrent_calls, 65536);
    cr_expect_eq(a->lim.max_queued_calls, 0);
    cr_expect_eq(a->lim.queued_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.burst, 1000000);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 86400000);
    cr_expect_eq(a->lim.rate_limit.count, 1000000);
    cr_expect_eq(a->lim.rate_limit.period_ms, 1000);
    cr_expect_eq(a->kill_grace_ms, 600000);
    cr_expect_eq(a->max_restarts, 0);
    cr_expect_eq(a->restart_policy, TG_RESTART_NO);
    cr_assert_eq(load("{\"router\": {\"max_frame_bytes\": \"1Gi\"}}"), 0, "%s", err.msg);
    cr_expect_eq(cfg.max_frame_bytes, 1ull << 30);
}

Test(config, tool_names_with_dots_and_symbols)
{
    cr_assert_eq(load("{\"agents\": [{\"id\": \"a\", \"tools\": {\"gh.search\": {\"burst\": 3,"
                      " \"rate_limit\": \"3/s\"}, \"a:b@c/d-e_f\": {}}}]}"),
                 0, "%s", err.msg);
    cr_assert_eq(cfg.agents[0].ntools, 2);
    cr_expect_eq(tg_config_tool(&cfg.agents[0], "gh.search", 9)->lim.burst, 3);
    cr_expect_not_null(tg_config_tool(&cfg.agents[0], "a:b@c/d-e_f", 11));
    cr_expect_null(tg_config_tool(&cfg.agents[0], "gh", 2));
    cr_expect_null(tg_config_tool(&cfg.agents[0], "gh.search!", 10));
    /* Length-delimited lookup: the name need not be NUL-terminated. */
    cr_expect_not_null(tg_config_tool(&cfg.agents[0], "gh.search\"}", 9));
}

/* ---- syntax errors (jansson's text, jansson's position) ---- */

Test(config, syntax_errors)
{
    load_fails("", "t.json:1:0: syntax error: '[' or '{' expected near end of file");
    load_fails("{\n", "t.json:2:0: syntax error: string or '}' expected near end of file");
    load_fails("{\"a\": }", "t.json:1:7: syntax error: unexpected token near '}'");
    load_fails("{\"router\":{\"instance\":\"a\",}}",
               "t.json:1:27: syntax error: string or '}' expected near '}'");
    load_fails("{\"a\":/* c */1}", "t.json:1:6: syntax error: invalid token near '/'");
    load_fails("{\"router\":{}} x", "t.json:1:15: syntax error: end of file expected near 'x'");
    load_fails("{\"audit\":{\"queue\":99999999999999999999}}",
               "t.json:1:38: syntax error: too big integer near '99999999999999999999'");
    load_fails("{\"audit\":{\"path\":\"a\\u0000b\"}}",
               "t.json:1:27: syntax error: \\u0000 is not allowed without JSON_ALLOW_NUL near "
               "'\"a\\u0000b\"'");
}

Test(config, duplicate_keys_are_syntax_errors)
{
    load_fails("{\"router\":{},\"router\":{}}",
               "t.json:1:21: syntax error: duplicate object key near '\"router\"'");
    load_fails("{\"agents\":[{\"id\":\"a\",\"tools\":{\"w\":{\"rate_limit\":\"1/s\"},\"w\":{}}}]}",
               "t.json:1:58: syntax error: duplicate object key near '\"w\"'");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"burst\":1,\"burst\":2}}]}",
               "t.json:1:58: syntax error: duplicate object key near '\"burst\"'");
}

Test(config, syntax_error_in_file_multiline)
{
    cr_expect_eq(tg_config_load_file(&cfg, DATA "config_bad_syntax.json", &err), -1);
    cr_expect_str_eq(err.msg, DATA "config_bad_syntax.json:4:21: syntax error: '}' expected near "
                                   "'\"max_frame_bytes\"'");
    cr_expect_null(cfg.path);
}

/* ---- value errors, at the value's position ---- */

Test(config, value_error_in_file_multiline)
{
    cr_expect_eq(tg_config_load_file(&cfg, DATA "config_bad_value.json", &err), -1);
    cr_expect_str_eq(err.msg,
                     DATA "config_bad_value.json:7:23: agents[0].execution_limits."
                          "rate_limit: \"100/fortnight\" is not a rate (expected N/second, "
                          "N/minute or N/hour, e.g. 100/minute)");
}

Test(config, value_errors)
{
    load_fails(
        "{\"agents\":[{\"id\":\"search\",\"execution_limits\":{\"rate_limit\":\"100/"
        "fortnight\"}}]}",
        "t.json:1:60: agents[0].execution_limits.rate_limit: \"100/fortnight\" is not a rate "
        "(expected N/second, N/minute or N/hour, e.g. 100/minute)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"rate_limit\":\"0/minute\"}}]}",
               "t.json:1:55: agents[0].execution_limits.rate_limit: \"0/minute\" is out of range "
               "(expected at least 1 call per period, e.g. 100/minute)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"rate_limit\":\"1000001/s\"}}]}",
               "t.json:1:55: agents[0].execution_limits.rate_limit: \"1000001/s\" is out of range "
               "(expected at most 1000000 calls per period)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_tool_call_duration\":\"30\"}}]}",
        "t.json:1:67: agents[0].execution_limits.max_tool_call_duration: \"30\" is not a "
        "duration (expected a whole number with a unit ms, s, m or h, e.g. 250ms, 30s, 5m "
        "or 1h)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_tool_call_duration\":\"25h\"}}]}",
        "t.json:1:67: agents[0].execution_limits.max_tool_call_duration: \"25h\" is out of "
        "range (expected at most 24h)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_tool_call_duration\":\"0s\"}}]}",
        "t.json:1:67: agents[0].execution_limits.max_tool_call_duration: \"0s\" is out of "
        "range (expected a duration above zero, e.g. 30s)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"kill_grace_period\":\"11m\"}}]}",
               "t.json:1:62: agents[0].execution_limits.kill_grace_period: \"11m\" is out of range "
               "(expected at most 10m)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_concurrent_calls\":0}}]}",
               "t.json:1:65: agents[0].execution_limits.max_concurrent_calls: 0 is out of range "
               "(expected 1 to 65536)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_concurrent_calls\":65537}}]}",
        "t.json:1:65: agents[0].execution_limits.max_concurrent_calls: 65537 is out of "
        "range (expected 1 to 65536)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_concurrent_calls\":\"0\"}}]}",
        "t.json:1:65: agents[0].execution_limits.max_concurrent_calls: \"0\" is out of "
        "range (expected 1 to 65536)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_concurrent_calls\":\"5x\"}}]}",
        "t.json:1:65: agents[0].execution_limits.max_concurrent_calls: \"5x\" is not a "
        "count (expected a whole number, e.g. 5)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_queued_calls\":-1}}]}",
               "t.json:1:61: agents[0].execution_limits.max_queued_calls: -1 is out of range "
               "(expected 0 to 65536)");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_queued_calls\":\"65537\"}}]}",
        "t.json:1:61: agents[0].execution_limits.max_queued_calls: \"65537\" is out of range "
        "(expected 0 to 65536)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"burst\":0}}]}",
               "t.json:1:50: agents[0].execution_limits.burst: 0 is out of range (expected 1 to "
               "1000000)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"burst\":1000001}}]}",
               "t.json:1:50: agents[0].execution_limits.burst: 1000001 is out of range (expected 1 "
               "to 1000000)");
    load_fails("{\"router\":{\"max_frame_bytes\":63}}",
               "t.json:1:30: router.max_frame_bytes: 63 is out of range (expected 64 to 1Gi)");
    load_fails("{\"router\":{\"max_frame_bytes\":\"0\"}}",
               "t.json:1:30: router.max_frame_bytes: \"0\" is out of range (expected a size above "
               "zero, e.g. 4Mi)");
    load_fails("{\"router\":{\"max_frame_bytes\":\"1Gi1\"}}",
               "t.json:1:30: router.max_frame_bytes: \"1Gi1\" is not a size (expected a whole "
               "number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi)");
    load_fails("{\"router\":{\"max_frame_bytes\":\"1025Mi\"}}",
               "t.json:1:30: router.max_frame_bytes: \"1025Mi\" is out of range (expected 64 to "
               "1Gi)");
    load_fails("{\"router\":{\"max_frame_bytes\":\"1.5Mi\"}}",
               "t.json:1:30: router.max_frame_bytes: \"1.5Mi\" is not a size (expected a whole "
               "number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi)");
    load_fails("{\"router\":{\"max_frame_bytes\":\"99999999999999999999Gi\"}}",
               "t.json:1:30: router.max_frame_bytes: \"99999999999999999999Gi\" is out of range "
               "(expected a size below 2^64 bytes, e.g. 1Gi)");
    load_fails("{\"router\":{\"instance\":\"my host\"}}",
               "t.json:1:23: router.instance: \"my host\" is not an instance name (expected 1 to "
               "128 of A-Z a-z 0-9 . _ : @ / -)");
    load_fails("{\"router\":{\"instance\":\"\"}}",
               "t.json:1:23: router.instance: \"\" is not an instance name (expected 1 to 128 of "
               "A-Z a-z 0-9 . _ : @ / -)");
    load_fails("{\"audit\":{\"queue\":0}}",
               "t.json:1:19: audit.queue: 0 is out of range (expected 1 to 1048576)");
    load_fails("{\"audit\":{\"path\":\"\"}}",
               "t.json:1:18: audit.path: expected a non-empty string");
    load_fails("{\"agents\":[{\"id\":\"a/b\"}]}",
               "t.json:1:18: agents[0].id: \"a/b\" is not an agent id (expected 1 to 128 of A-Z "
               "a-z 0-9 . _ -)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"dialect\":\"grpc\"}]}",
               "t.json:1:32: agents[0].dialect: \"grpc\" is not a dialect (expected \"mcp\" or "
               "\"opensentience\")");
    load_fails("{\"agents\":[{\"id\":\"a\",\"restart\":{\"policy\":\"sometimes\"}}]}",
               "t.json:1:42: agents[0].restart.policy: \"sometimes\" is not a restart policy "
               "(expected \"no\", \"on-failure\" or \"always\")");
    load_fails("{\"agents\":[{\"id\":\"a\",\"restart\":{\"max_restarts\":1001}}]}",
               "t.json:1:48: agents[0].restart.max_restarts: 1001 is out of range (expected 0 to "
               "1000)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"restart\":{\"window\":\"1d\"}}]}",
               "t.json:1:42: agents[0].restart.window: \"1d\" is not a duration (expected a whole "
               "number with a unit ms, s, m or h, e.g. 250ms, 30s, 5m or 1h)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"stderr\":{\"max_line\":\"2Mi\"}}]}",
               "t.json:1:43: agents[0].stderr.max_line: \"2Mi\" is out of range (expected at most "
               "1Mi)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"stderr\":{\"bytes_per_second\":\"65Mi\"}}]}",
               "t.json:1:51: agents[0].stderr.bytes_per_second: \"65Mi\" is out of range (expected "
               "at most 64Mi)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"rate_scope\":\"global\"}}]}",
               "t.json:1:55: agents[0].execution_limits.rate_scope: \"global\" is not a rate scope "
               "(expected \"local\" or \"shared\")");
}

Test(config, tool_value_errors)
{
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"tools\":{\"web\":{\"rate_limit\":\"10/fortnight\"}}}]}",
        "t.json:1:51: agents[0].tools.web.rate_limit: \"10/fortnight\" is not a rate "
        "(expected N/second, N/minute or N/hour, e.g. 100/minute)");
    /* A dotted tool name is found member by member. */
    load_fails("{\"agents\":[{\"id\":\"a\",\n \"tools\":{\"web.x\":{\"burst\":0}}}]}",
               "t.json:2:28: agents[0].tools.web.x.burst: 0 is out of range (expected 1 to "
               "1000000)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"tools\":{\"a b\":{}}}]}",
               "t.json:1:31: agents[0].tools: \"a b\" is not a tool name (expected 1 to 128 of A-Z "
               "a-z 0-9 . _ : @ / -)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"tools\":{\"web\":[]}}]}",
               "t.json:1:37: agents[0].tools.web: expected an object, got an array");
}

Test(config, errors_in_later_agents)
{
    load_fails("{\"agents\": [\n"
               "  {\"id\": \"a\"},\n"
               "  {\"id\": \"b\", \"execution_limits\": {\"burst\": \"many\"}}\n"
               "]}",
               "t.json:3:45: agents[1].execution_limits.burst: \"many\" is not a count (expected a "
               "whole number, e.g. 5)");
    load_fails("{\"agents\":[{\"id\":\"a\"},{\"id\":\"a\"}]}",
               "t.json:1:29: agents[1].id: duplicate agent id \"a\" (also agents[0])");
    load_fails("{\"agents\":[{\"id\":\"a\"},{\"dialect\":\"mcp\"}]}",
               "t.json:1:23: agents[1]: missing required key \"id\"");
}

/* ---- unknown keys: at the key, with the allowed list ---- */

Test(config, unknown_keys)
{
    load_fails("{\"routr\":{}}",
               "t.json:1:2: unknown key \"routr\" (allowed: router, audit, agents, store, "
               "containment, callers, policy)");
    load_fails(
        "{\"router\":{\"max_frame\":\"4Mi\"}}",
        "t.json:1:12: router: unknown key \"max_frame\" (allowed: instance, max_frame_bytes, "
        "listen, callers_only, idle_timeout, frame_timeout, handshake_timeout, reload_drain_timeout, "
        "admin)");
    load_fails("{\"audit\":{\"file\":\"x\"}}",
               "t.json:1:11: audit: unknown key \"file\" (allowed: path, queue, sinks)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"limits\":{}}]}",
               "t.json:1:22: agents[0]: unknown key \"limits\" (allowed: id, tool_prefix, "
               "dialect, command, execution_limits, tools, restart, stderr, env, resources, cwd, "
               "workspace, max_instances, manifest, start, opensentience)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"rate\":\"1/s\"}}]}",
               "t.json:1:42: agents[0].execution_limits: unknown key \"rate\" (allowed: "
               "max_tool_call_duration, max_concurrent_calls, max_queued_calls, rate_limit, burst, "
               "kill_grace_period, rate_scope, shared_mode, concurrency_scope)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"tools\":{\"w\":{\"kill_grace_period\":\"1s\"}}}]}",
               "t.json:1:36: agents[0].tools.w: unknown key \"kill_grace_period\" (allowed: "
               "max_tool_call_duration, max_concurrent_calls, max_queued_calls, rate_limit, burst, "
               "rate_scope, shared_mode, concurrency_scope)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"restart\":{\"delay\":\"1s\"}}]}",
               "t.json:1:33: agents[0].restart: unknown key \"delay\" (allowed: policy, "
               "max_restarts, window, backoff, max_backoff)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"stderr\":{\"limit\":\"1Ki\"}}]}",
               "t.json:1:32: agents[0].stderr: unknown key \"limit\" (allowed: bytes_per_second, "
               "max_line)");
    /* Odd key text is quoted with escapes, never echoed raw. */
    load_fails("{\"a\\nb\\\"\":1}",
               "t.json:1:2: unknown key \"a\\x0ab\\\"\" (allowed: router, audit, agents, store, "
               "containment, callers, policy)");
}

/* ---- wrong types ---- */

Test(config, wrong_types)
{
    load_fails("[]", "t.json:1:1: expected an object at the top level, got an array");
    load_fails("{\"router\":[]}", "t.json:1:11: router: expected an object, got an array");
    load_fails("{\"router\":{\"instance\":7}}",
               "t.json:1:23: router.instance: expected a string, got an integer");
    load_fails("{\"router\":{\"max_frame_bytes\":1.5}}",
               "t.json:1:30: router.max_frame_bytes: expected a size string such as \"4Mi\" or a "
               "number of bytes, got a real number");
    load_fails("{\"router\":{\"listen\":\"/run/x.sock\"}}",
               "t.json:1:21: router.listen: expected an array, got a string");
    load_fails("{\"router\":{\"admin\":9464}}",
               "t.json:1:20: router.admin: expected a \"HOST:PORT\" string or an object, got an integer");
    load_fails("{\"store\":\"redis\"}", "t.json:1:10: store: expected an object, got a string");
    load_fails("{\"containment\":null}", "t.json:1:16: containment: expected an object, got null");
    load_fails("{\"callers\":{}}", "t.json:1:12: callers: expected an array, got an object");
    load_fails("{\"audit\":{\"sinks\":{}}}",
               "t.json:1:19: audit.sinks: expected an array, got an object");
    load_fails("{\"audit\":{\"queue\":true}}",
               "t.json:1:19: audit.queue: expected a whole number such as 5, got a boolean");
    load_fails("{\"agents\":{}}", "t.json:1:11: agents: expected an array, got an object");
    load_fails("{\"agents\":[]}", "t.json:1:11: agents: expected at least one agent");
    load_fails("{\"agents\":[\"a\"]}", "t.json:1:12: agents[0]: expected an object, got a string");
    load_fails("{\"agents\":[{\"id\":1}]}",
               "t.json:1:18: agents[0].id: expected a string, got an integer");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":\"/bin/x\"}]}",
               "t.json:1:32: agents[0].command: expected an array of strings such as "
               "[\"/usr/bin/server\", \"--stdio\"], got a string");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":[]}]}",
               "t.json:1:32: agents[0].command: expected at least one word (the program to run)");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":[\"\"]}]}",
               "t.json:1:33: agents[0].command[0]: expected a non-empty string");
    load_fails("{\"agents\":[{\"id\":\"a\",\"command\":[\"/x\", 3]}]}",
               "t.json:1:39: agents[0].command[1]: expected a string, got an integer");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"max_tool_call_duration\":30}}]}",
               "t.json:1:67: agents[0].execution_limits.max_tool_call_duration: expected a "
               "duration string such as \"30s\", got an integer");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"rate_limit\":100}}]}",
               "t.json:1:55: agents[0].execution_limits.rate_limit: expected a rate string such as "
               "\"100/minute\", got an integer");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":{\"burst\":2.0}}]}",
               "t.json:1:50: agents[0].execution_limits.burst: expected a whole number such as 5, "
               "got a real number");
    load_fails(
        "{\"agents\":[{\"id\":\"a\",\"stderr\":{\"max_line\":4096}}]}",
        "t.json:1:43: agents[0].stderr.max_line: expected a size string such as \"4Mi\", got "
        "an integer");
    load_fails("{\"agents\":[{\"id\":\"a\",\"execution_limits\":[]}]}",
               "t.json:1:41: agents[0].execution_limits: expected an object, got an array");
    load_fails("{\"agents\":[{\"id\":\"a\",\"env\":[\"PATH\"]}]}",
               "t.json:1:28: agents[0].env: expected an object, got an array");
    load_fails("{\"agents\":[{\"id\":\"a\",\"resources\":\"512Mi\"}]}",
               "t.json:1:34: agents[0].resources: expected an object, got a string");
    load_fails("{\"agents\":[{\"id\":\"a\",\"cwd\":\"\"}]}",
               "t.json:1:28: agents[0].cwd: expected a non-empty string");
    load_fails("{\"agents\":[{\"id\":\"a\",\"manifest\":false}]}",
               "t.json:1:33: agents[0].manifest: expected a string, got a boolean");
}

/* A rejected file leaves the config exactly as it was (reload keeps the
 * old config). */
Test(config, failed_load_changes_nothing)
{
    cr_assert_eq(load("{\"router\":{\"instance\":\"before\"},\"agents\":[{\"id\":\"keep\"}]}"), 0,
                 "%s", err.msg);
    load_fails("{\"router\":{\"instance\":\"after\",\"max_frame_bytes\":\"4Mi\"},"
               "\"audit\":{\"path\":\"/x\"},\"agents\":[{\"id\":\"new\",\"burst\":1}]}",
               "t.json:1:100: agents[0]: unknown key \"burst\" (allowed: id, tool_prefix, "
               "dialect, command, execution_limits, tools, restart, stderr, env, resources, cwd, "
               "workspace, max_instances, manifest, start, opensentience)");
    cr_expect_str_eq(cfg.instance, "before");
    cr_expect_eq(cfg.max_frame_src, TG_SRC_DEFAULT);
    cr_expect_null(cfg.audit_path);
    cr_assert_eq(cfg.nagents, 1);
    cr_expect_str_eq(cfg.agents[0].id, "keep");
}

Test(config, load_over_previous_file)
{
    cr_assert_eq(tg_config_load_file(&cfg, DATA "config_full.json", &err), 0, "%s", err.msg);
    cr_assert_eq(load("{\"router\":{\"instance\":\"second\"}}"), 0, "%s", err.msg);
    cr_expect_str_eq(cfg.instance, "second");
    cr_expect_str_eq(cfg.agents[0].id, "search");
    cr_expect_str_eq(cfg.audit_path, "/var/log/toolgate/audit.jsonl");
    cr_expect_str_eq(cfg.path, DATA "config_full.json");
}

Test(config, load_file_errors)
{
    char path[] = "/tmp/tg_cfg_big_XXXXXX";
    int fd;
    FILE *f;

    cr_expect_eq(tg_config_load_file(&cfg, "/nonexistent/tg.json", &err), -1);
    cr_expect_str_eq(err.msg, "/nonexistent/tg.json: cannot open: No such file or directory");
    cr_expect_eq(tg_config_load_file(&cfg, "/", &err), -1);
    cr_expect_str_eq(err.msg, "/: cannot read: Is a directory");

    /* One byte over the bound is refused before parsing. */
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputc('{', f);
    for (unsigned i = 1; i < TG_CFG_FILE_MAX; i++)
        fputc(' ', f);
    fputc('}', f);
    fclose(f);
    cr_expect_eq(tg_config_load_file(&cfg, path, &err), -1);
    {
        char want[128];
        snprintf(want, sizeof want, "%s: larger than 16777216 bytes (config files are bounded)",
                 path);
        cr_expect_str_eq(err.msg, want);
    }
    /* Exactly at the bound loads. */
    cr_assert_eq(truncate(path, TG_CFG_FILE_MAX), 0);
    f = fopen(path, "r+");
    cr_assert_not_null(f);
    fseek(f, TG_CFG_FILE_MAX - 1, SEEK_SET);
    fputc('}', f);
    fclose(f);
    cr_expect_eq(tg_config_load_file(&cfg, path, &err), 0, "%s", err.msg);
    unlink(path);
}

/* ---- --limit ---- */

Test(config, limit_every_key)
{
    tg_agent_cfg_t *a = &cfg.agents[0];

    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_frame_bytes=1Mi", &err), 0, "%s", err.msg);
    cr_expect_eq(cfg.max_frame_bytes, 1u << 20);
    cr_expect_eq(cfg.max_frame_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_frame_bytes=65536", &err), 0, "%s", err.msg);
    cr_expect_eq(cfg.max_frame_bytes, 65536);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_tool_call_duration=2m", &err), 0);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 120000);
    cr_expect_eq(a->lim.duration_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_concurrent_calls=8", &err), 0);
    cr_expect_eq(a->lim.max_concurrent_calls, 8);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_queued_calls=0", &err), 0);
    cr_expect_eq(a->lim.max_queued_calls, 0);
    cr_expect_eq(a->lim.queued_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "rate_limit=10/s", &err), 0);
    cr_expect_eq(a->lim.rate_limit.count, 10);
    cr_expect_eq(a->lim.rate_limit.period_ms, 1000);
    cr_expect_eq(a->lim.rate_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "burst=25", &err), 0);
    cr_expect_eq(a->lim.burst, 25);
    cr_expect_eq(a->lim.burst_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "kill_grace_period=250ms", &err), 0);
    cr_expect_eq(a->kill_grace_ms, 250);
    cr_expect_eq(a->kill_grace_src, TG_SRC_CLI);
    cr_expect_eq(a->ntools, 0);
}

Test(config, limit_overrides_file)
{
    cr_assert_eq(tg_config_load_file(&cfg, DATA "config_full.json", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.rate_limit=20/minute", &err), 0);
    cr_assert_eq(cfg.agents[0].ntools, 1);
    cr_expect_eq(cfg.agents[0].tools[0].lim.rate_limit.count, 20);
    cr_expect_eq(cfg.agents[0].tools[0].lim.rate_src, TG_SRC_CLI);
    /* The tool's other file values stay. */
    cr_expect_eq(cfg.agents[0].tools[0].lim.burst, 2);
    cr_expect_eq(cfg.agents[0].tools[0].lim.burst_src, TG_SRC_FILE);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "rate_limit=1/h", &err), 0);
    cr_expect_eq(cfg.agents[0].lim.rate_limit.period_ms, 3600000);
    cr_expect_eq(cfg.agents[0].lim.duration_src, TG_SRC_FILE);
}

Test(config, limit_tool_keys_create_entries)
{
    const tg_tool_cfg_t *t;

    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.rate_limit=10/minute", &err), 0, "%s",
                 err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.burst=2", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.max_concurrent_calls=1", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.max_queued_calls=4", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.max_tool_call_duration=5s", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.gh.search.burst=3", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.gh.search.rate_limit=3/s", &err), 0);
    cr_assert_eq(cfg.agents[0].ntools, 2);
    t = tg_config_tool(&cfg.agents[0], "web", 3);
    cr_assert_not_null(t);
    cr_expect_eq(t->lim.rate_limit.count, 10);
    cr_expect_eq(t->lim.burst, 2);
    cr_expect_eq(t->lim.max_concurrent_calls, 1);
    cr_expect_eq(t->lim.max_queued_calls, 4);
    cr_expect_eq(t->lim.max_tool_call_duration_ms, 5000);
    cr_expect_eq(t->lim.rate_src, TG_SRC_CLI);
    cr_expect_eq(t->lim.concurrent_src, TG_SRC_CLI);
    t = tg_config_tool(&cfg.agents[0], "gh.search", 9);
    cr_assert_not_null(t);
    cr_expect_eq(t->lim.burst, 3);
    cr_expect_eq(t->lim.duration_src, TG_SRC_DEFAULT);
    /* The agent scope is untouched. */
    cr_expect_eq(cfg.agents[0].lim.burst_src, TG_SRC_DEFAULT);
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv_x, &err), 0);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

Test(config, limit_bad_values)
{
    limit_fails("rate_limit=banana",
                "--limit rate_limit=banana: rate_limit: \"banana\" is not a rate (expected "
                "N/second, N/minute or N/hour, e.g. 100/minute)");
    limit_fails("rate_limit=", "--limit rate_limit=: rate_limit: \"\" is not a rate (expected "
                               "N/second, N/minute or N/hour, e.g. 100/minute)");
    limit_fails("rate_limit=0/s", "--limit rate_limit=0/s: rate_limit: \"0/s\" is out of range "
                                  "(expected at least 1 call per period, e.g. 100/minute)");
    limit_fails("max_frame_bytes=63", "--limit max_frame_bytes=63: max_frame_bytes: \"63\" is out "
                                      "of range (expected 64 to 1Gi)");
    limit_fails("max_frame_bytes=2Gi", "--limit max_frame_bytes=2Gi: max_frame_bytes: \"2Gi\" is "
                                       "out of range (expected 64 to 1Gi)");
    limit_fails("max_frame_bytes=4MB", "--limit max_frame_bytes=4MB: max_frame_bytes: \"4MB\" is "
                                       "not a size (expected a whole number of bytes, Ki, Mi, Gi "
                                       "or Ti, e.g. 512Ki, 4Mi or 1Gi)");
    limit_fails("max_tool_call_duration=30",
                "--limit max_tool_call_duration=30: max_tool_call_duration: \"30\" is not a "
                "duration (expected a whole number with a unit ms, s, m or h, e.g. 250ms, 30s, 5m "
                "or 1h)");
    limit_fails("max_tool_call_duration=48h",
                "--limit max_tool_call_duration=48h: max_tool_call_duration: \"48h\" is out of "
                "range (expected at most 24h)");
    limit_fails("max_concurrent_calls=0", "--limit max_concurrent_calls=0: max_concurrent_calls: "
                                          "\"0\" is out of range (expected 1 to 65536)");
    limit_fails("max_concurrent_calls=-1", "--limit max_concurrent_calls=-1: max_concurrent_calls: "
                                           "\"-1\" is not a count (expected a whole number, e.g. "
                                           "5)");
    limit_fails("max_queued_calls=65537", "--limit max_queued_calls=65537: max_queued_calls: "
                                          "\"65537\" is out of range (expected 0 to 65536)");
    limit_fails("max_queued_calls=x", "--limit max_queued_calls=x: max_queued_calls: \"x\" is not "
                                      "a count (expected a whole number, e.g. 5)");
    limit_fails("burst=0", "--limit burst=0: burst: \"0\" is out of range (expected 1 to 1000000)");
    limit_fails("burst=1.5", "--limit burst=1.5: burst: \"1.5\" is not a count (expected a whole "
                             "number, e.g. 5)");
    limit_fails("kill_grace_period=0s",
                "--limit kill_grace_period=0s: kill_grace_period: \"0s\" is "
                "out of range (expected a duration above zero, e.g. 30s)");
    limit_fails("kill_grace_period=1h",
                "--limit kill_grace_period=1h: kill_grace_period: \"1h\" is "
                "out of range (expected at most 10m)");
    limit_fails("tools.web.rate_limit=10/fortnight",
                "--limit tools.web.rate_limit=10/fortnight: tools.web.rate_limit: \"10/fortnight\" "
                "is not a rate (expected N/second, N/minute or N/hour, e.g. 100/minute)");
    limit_fails("tools.web.burst=0", "--limit tools.web.burst=0: tools.web.burst: \"0\" is out of "
                                     "range (expected 1 to 1000000)");
    /* Nothing was applied by the failures. */
    cr_expect_eq(cfg.agents[0].ntools, 0);
    cr_expect_eq(cfg.max_frame_src, TG_SRC_DEFAULT);
    cr_expect_eq(cfg.agents[0].lim.rate_src, TG_SRC_DEFAULT);
}

Test(config, limit_bad_keys)
{
    limit_fails("foo=1", "--limit foo=1: unknown key \"foo\" (allowed: max_frame_bytes, "
                         "max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                         "rate_limit, burst, kill_grace_period, memory, cpu, pids, nofile, disk, network, "
                         "containment, rate_scope, shared_mode, on_store_error, concurrency_scope, "
                         "workspace, workspace_backend, max_instances, tools.NAME.KEY)");
    limit_fails("rate_scope=global", "--limit rate_scope=global: rate_scope: \"global\" is not "
                                     "valid (expected \"local\" or \"shared\")");
    limit_fails("on_store_error=maybe", "--limit on_store_error=maybe: on_store_error: \"maybe\" is "
                                        "not valid (expected \"local\", \"open\" or \"closed\")");
    limit_fails("tools.web.kill_grace_period=5s",
                "--limit tools.web.kill_grace_period=5s: unknown tool key \"kill_grace_period\" "
                "(allowed: max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                "rate_limit, burst, rate_scope)");
    limit_fails("tools.web.max_frame_bytes=1Mi",
                "--limit tools.web.max_frame_bytes=1Mi: unknown tool key \"max_frame_bytes\" "
                "(allowed: max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                "rate_limit, burst, rate_scope)");
    limit_fails("tools.web.=1", "--limit tools.web.=1: unknown tool key \"\" (allowed: "
                                "max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                                "rate_limit, burst, rate_scope)");
    load_fails("{\"callers\":[{\"name\":\"c\",\"uid\":5,\"execution_limits\":{\"rate_scope\":"
               "\"shared\"}}],\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/a\"]}]}",
               "t.json:1:66: callers[0].execution_limits.rate_scope: \"shared\" is for an agent's or "
               "a tool's rate (a caller's rate_limit is per toolgate)");
    limit_fails("tools.web.rate_scope=global", "--limit tools.web.rate_scope=global: "
                "tools.web.rate_scope: \"global\" is not valid (expected \"local\" or \"shared\")");
    limit_fails("tools.a b.burst=1", "--limit tools.a b.burst=1: tools.a b.burst: \"a b\" is not a "
                                     "tool name (expected 1 to 128 of A-Z a-z 0-9 . _ : @ / -)");
    limit_fails("tools.web=1", "--limit tools.web=1: tools.web: expected tools.NAME.KEY, e.g. "
                               "tools.web.rate_limit=10/minute");
    limit_fails("tools..burst=1", "--limit tools..burst=1: tools..burst: expected tools.NAME.KEY, "
                                  "e.g. tools.web.rate_limit=10/minute");
    limit_fails("tools.=1", "--limit tools.=1: unknown key \"tools.\" (allowed: max_frame_bytes, "
                            "max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                            "rate_limit, burst, kill_grace_period, memory, cpu, pids, nofile, disk, "
                            "network, containment, rate_scope, shared_mode, on_store_error, "
                            "concurrency_scope, workspace, workspace_backend, max_instances, tools.NAME.KEY)");
    limit_fails("burst", "--limit burst: expected KEY=VALUE, e.g. rate_limit=100/minute");
    limit_fails("=5", "--limit =5: expected KEY=VALUE, e.g. rate_limit=100/minute");
    limit_fails("", "--limit : expected KEY=VALUE, e.g. rate_limit=100/minute");
    cr_expect_eq(tg_config_apply_limit(&cfg, 1, "burst=1", &err), -1);
    cr_expect_str_eq(err.msg, "--limit burst=1: no agent 1");
}

Test(config, limit_tool_name_bound)
{
    char kv[300];
    char name[TG_NAME_MAX + 2];

    memset(name, 'n', sizeof name);
    name[TG_NAME_MAX] = '\0';
    snprintf(kv, sizeof kv, "tools.%s.burst=1", name);
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, kv, &err), 0, "%s", err.msg);
    name[TG_NAME_MAX] = 'n';
    name[TG_NAME_MAX + 1] = '\0';
    snprintf(kv, sizeof kv, "tools.%s.burst=1", name);
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, kv, &err), -1);
    cr_expect(strstr(err.msg, "is not a tool name (expected 1 to 128 of") != NULL, "%s", err.msg);
    cr_expect_eq(cfg.agents[0].ntools, 1);
}

/* ---- validation ---- */

Test(config, validate_rules)
{
    cr_assert_eq(load("{\"agents\":[{\"id\":\"a\",\"command\":[\"/x\"],"
                      "\"tools\":{\"web\":{\"burst\":2}}}]}"),
                 0, "%s", err.msg);
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[0].tools.web.burst: set without a rate_limit (expected "
                              "tools.web.rate_limit as well)");
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.rate_limit=5/s", &err), 0);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);

    cr_assert_eq(load("{\"agents\":[{\"id\":\"a\",\"command\":[\"/x\"],"
                      "\"restart\":{\"backoff\":\"10s\",\"max_backoff\":\"5s\"}}]}"),
                 0, "%s", err.msg);
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[0].restart.backoff: 10s is not within 1ms to max_backoff 5s");
}

Test(config, validate_checks_the_struct)
{
    char *dup;

    cr_assert_eq(tg_config_set_command(&cfg, 0, argv_x, &err), 0);
    /* Values set directly (not through a parser) are still bounded. */
    cfg.agents[0].lim.max_concurrent_calls = 0;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[0].execution_limits.max_concurrent_calls: 0 is out of range "
                              "(expected 1 to 65536)");
    cfg.agents[0].lim.max_concurrent_calls = 3;
    cfg.agents[0].lim.burst_src = TG_SRC_CLI; /* set, but 0 */
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg,
                     "agents[0].execution_limits.burst: 0 is out of range (expected 1 to 1000000)");
    cfg.agents[0].lim.burst_src = TG_SRC_DEFAULT;
    cfg.max_frame_bytes = 2ull << 30;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "router.max_frame_bytes: 2Gi is out of range (expected 64 to 1Gi)");
    cfg.max_frame_bytes = 4096;
    cfg.agents[0].lim.rate_limit.count = 0;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[0].execution_limits.rate_limit: 0/minute is out of range "
                              "(expected at most 1000000 calls per period)");
    cfg.agents[0].lim.rate_limit.count = 60;
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);

    /* Duplicate ids, checked again after every source is merged. */
    cr_assert_eq(load("{\"agents\":[{\"id\":\"a\",\"command\":[\"/x\"]},"
                      "{\"id\":\"b\",\"command\":[\"/y\"]}]}"),
                 0, "%s", err.msg);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    dup = strdup("a");
    free(cfg.agents[1].id);
    cfg.agents[1].id = dup;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "agents[1].id: duplicate agent id \"a\" (also agents[0])");
}

Test(config, validate_names_the_file)
{
    cr_assert_eq(tg_config_load_file(&cfg, DATA "config_full.json", &err), 0, "%s", err.msg);
    cfg.agents[0].backoff_max_ms = 50;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, DATA "config_full.json: agents[0].restart.backoff: 100ms is not "
                                   "within 1ms to max_backoff 50ms");
}

/* ---- command, paths, sources ---- */

Test(config, set_command)
{
    char a0[] = "/usr/bin/srv", a1[] = "--stdio", a2[] = "";
    char *argv[] = {a0, a1, a2, NULL};
    char *empty[] = {a2, NULL};
    char *none[] = {NULL};

    cr_assert_eq(tg_config_set_command(&cfg, 0, argv, &err), 0);
    cr_expect_str_eq(cfg.agents[0].command[0], "/usr/bin/srv");
    cr_expect_neq(cfg.agents[0].command[0], argv[0]);
    cr_expect_str_eq(cfg.agents[0].command[2], "");
    cr_expect_null(cfg.agents[0].command[3]);
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv_x, &err), 0);
    cr_expect_str_eq(cfg.agents[0].command[0], "/bin/true");
    cr_expect_eq(tg_config_set_command(&cfg, 0, empty, &err), -1);
    cr_expect_str_eq(err.msg, "expected a command to run");
    cr_expect_eq(tg_config_set_command(&cfg, 0, none, &err), -1);
    cr_expect_eq(tg_config_set_command(&cfg, 3, argv, &err), -1);
    cr_expect_str_eq(err.msg, "no agent 3");
    cr_expect_str_eq(cfg.agents[0].command[0], "/bin/true");
}

Test(config, path_for)
{
    char buf[128];
    tg_agent_cfg_t a;

    cr_assert_eq(load("{\"agents\":[{\"id\":\"search\"}]}"), 0, "%s", err.msg);
    cr_expect_eq(tg_config_path_for(&cfg.agents[0], NULL, "rate_limit", buf, sizeof buf), 41);
    cr_expect_str_eq(buf, "agents.search.execution_limits.rate_limit");
    cr_expect_eq(tg_config_path_for(&cfg.agents[0], "web", "rate_limit", buf, sizeof buf), 34);
    cr_expect_str_eq(buf, "agents.search.tools.web.rate_limit");
    cr_expect_gt(tg_config_path_for(&cfg.agents[0], NULL, "kill_grace_period", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "agents.search.execution_limits.kill_grace_period");
    cr_expect_gt(tg_config_path_for(&cfg.agents[0], NULL, "max_frame_bytes", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "router.max_frame_bytes");
    cr_expect_eq(tg_config_path_for(&cfg.agents[0], "web", "rate_limit", buf, 34), -ENOSPC);
    cr_expect_eq(tg_config_path_for(&cfg.agents[0], "we b", "rate_limit", buf, sizeof buf),
                 -EINVAL);
    cr_expect_eq(tg_config_path_for(&cfg.agents[0], "", "rate_limit", buf, sizeof buf), -EINVAL);
    memset(&a, 0, sizeof a);
    cr_expect_eq(tg_config_path_for(&a, NULL, "rate_limit", buf, sizeof buf), -EINVAL);
}

Test(config, names_and_sources)
{
    cr_expect(tg_config_tool_name_ok("web", 3));
    cr_expect(tg_config_tool_name_ok("a.b:c@d/e-f_9", 13));
    cr_expect_not(tg_config_tool_name_ok("", 0));
    cr_expect_not(tg_config_tool_name_ok("a b", 3));
    cr_expect_not(tg_config_tool_name_ok("caf\xc3\xa9", 5));
    cr_expect_not(tg_config_tool_name_ok(NULL, 0));
    cr_expect_str_eq(tg_src_name(TG_SRC_DEFAULT), "default");
    cr_expect_str_eq(tg_src_name(TG_SRC_FILE), "file");
    cr_expect_str_eq(tg_src_name(TG_SRC_CLI), "--limit");
    cr_expect_str_eq(tg_src_name(TG_SRC_MANIFEST), "manifest");
}

Test(config, free_is_idempotent)
{
    tg_config_free(&cfg);
    tg_config_free(&cfg);
    cr_expect_null(cfg.agents);
    cr_expect_eq(cfg.nagents, 0);
    tg_config_free(NULL);
}

/* ---- the key table ---- */

/* The path of the object row <path> is a member of ("" at the top). */
static void parent_of(const char *path, char *buf, size_t cap)
{
    const char *dot = strrchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : 0;
    snprintf(buf, cap, "%.*s", (int)n, path);
}

/* The sink kind whose keys hold row flag set <flags>. */
static const char *sink_kind_for(unsigned flags)
{
    if (flags & TG_KF_SINK_FILE)
        return "file";
    return (flags & TG_KF_SINK_REDIS) ? "redis_stream" : "stderr";
}

/* A document with <leaf> at <path> (rows' syntax: "x[]" a one-element
 * array, "*" a name the operator picks, here "t"); "" is <leaf> itself. An
 * audit sink gets the kind whose keys <flags> marks. */
static json_t *doc_at(const char *path, json_t *leaf, unsigned flags)
{
    char buf[256], *save = NULL;
    json_t *root, *cur;

    if (!path[0])
        return leaf;
    root = cur = json_object();
    snprintf(buf, sizeof buf, "%s", path);
    for (char *comp = strtok_r(buf, ".", &save); comp;) {
        char *next = strtok_r(NULL, ".", &save);
        size_t n = strlen(comp);
        bool arr = n > 2 && strcmp(comp + n - 2, "[]") == 0;
        json_t *v = next ? json_object() : leaf, *member = v;
        if (arr) {
            comp[n - 2] = '\0';
            member = json_array();
            json_array_append_new(member, v);
            if (strcmp(comp, "sinks") == 0 && json_is_object(v))
                json_object_set_new(v, "kind", json_string(sink_kind_for(flags)));
        }
        json_object_set_new(cur, strcmp(comp, "*") == 0 ? "t" : comp, member);
        cur = v;
        comp = next;
    }
    return root;
}

/* Load document <doc> (consumed); the error text, "" when it loaded. */
static const char *load_doc(json_t *doc)
{
    char *text = json_dumps(doc, JSON_PRESERVE_ORDER);
    int rc = load(text);

    free(text);
    json_decref(doc);
    return rc == 0 ? "" : err.msg;
}

/* The names of the rows that are members of <parent> with all of <mask>,
 * as a refusal lists them. */
static void members_of(const char *parent, unsigned mask, char *buf, size_t cap)
{
    char p[256];

    buf[0] = '\0';
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        parent_of(k->path, p, sizeof p);
        if (strcmp(p, parent) == 0 && (k->flags & mask) == mask)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "",
                     tg_cfg_key_name(k));
    }
}

Test(keys, every_row_is_documented)
{
    cr_assert_gt(tg_cfg_nkeys, 100);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        char parent[256];
        cr_assert_not_null(k->path);
        cr_expect_eq(tg_cfg_key_find(k->path), k, "%s: a second row with its path", k->path);
        cr_expect(k->help && strlen(k->help) >= 10, "%s: no help text", k->path);
        cr_expect_str_neq(tg_ktype_name(k->type), "", "%s: no type", k->path);
        cr_expect_leq((unsigned)k->reload, TG_RELOAD_RESTART, "%s", k->path);
        cr_expect_leq((unsigned)k->section, TG_KS_CONTAINMENT, "%s", k->path);
        cr_expect_not_null(k->def, "%s: no default (\"\" when none)", k->path);
        if (tg_ktype_has_unit(k->type))
            cr_expect(k->min <= k->max && k->max > 0, "%s: bounds %llu..%llu", k->path,
                      (unsigned long long)k->min, (unsigned long long)k->max);
        if (k->type == TG_KT_ENUM)
            cr_expect(k->choices && k->choices[0] && k->choices[1] && k->noun && k->noun[0],
                      "%s: a choice needs two choices and a noun", k->path);
        if (k->cli)
            cr_expect(k->obj != TG_KO_NONE || k->load, "%s: a --limit key sets nothing", k->path);
        /* Every row hangs off a row, up to the top level. */
        parent_of(k->path, parent, sizeof parent);
        if (strstr(k->path, ".*.") && strcmp(parent, "agents[].tools.*") == 0)
            snprintf(parent, sizeof parent, "agents[].tools");
        else if (strlen(parent) > 2 && strcmp(parent + strlen(parent) - 2, "[]") == 0)
            parent[strlen(parent) - 2] = '\0';
        cr_expect(!parent[0] || tg_cfg_key_find(parent), "%s: no row for %s", k->path, parent);
    }
}

Test(keys, defaults_are_the_models)
{
    tg_audit_sink_cfg_t sink;
    tg_listen_cfg_t listener;
    tg_cfg_at_t at = {.cfg = &cfg,
                      .agent = &cfg.agents[0],
                      .lim = &cfg.agents[0].lim,
                      .res = &cfg.agents[0].res,
                      .item = &listener};
    size_t checked = 0;

    memset(&listener, 0, sizeof listener);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        char shown[64];
        tg_cfg_val_t v;
        if (!k->def[0] || k->obj == TG_KO_NONE || k->type == TG_KT_STRING ||
            tg_cfg_key_under(k, "callers[]"))
            continue;
        if (tg_cfg_key_under(k, "audit.sinks[]")) {
            tg_config_sink_defaults(&sink, strcmp(sink_kind_for(k->flags), "file") == 0
                                               ? TG_AUDIT_SINK_FILE
                                               : TG_AUDIT_SINK_REDIS_STREAM);
            at.item = &sink;
        } else {
            at.item = &listener;
        }
        v = tg_cfg_key_get(k, &at);
        if ((k->flags & TG_KF_ZERO_DEF) && v.u == 0)
            continue; /* the user of the value applies the default */
        if (k->type == TG_KT_ENUM)
            snprintf(shown, sizeof shown, "%s", k->choices[v.u]);
        else if (k->type == TG_KT_BOOL)
            snprintf(shown, sizeof shown, "%s", v.u ? "true" : "false");
        else
            tg_cfg_key_fmt(k, &v, shown, sizeof shown);
        cr_expect_str_eq(shown, k->def, "%s: the model holds %s, the table says %s", k->path, shown,
                         k->def);
        checked++;
    }
    cr_expect_gt(checked, 50);
}

/* Each row's path is a key the loader takes: whatever it says of a null
 * there, it is not "unknown key". */
Test(keys, loader_takes_every_row)
{
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        const char *msg = load_doc(doc_at(k->path, json_null(), k->flags));
        cr_expect_null(strstr(msg, "unknown key"), "%s: %s", k->path, msg);
        cr_expect_null(strstr(msg, "has no loader"), "%s: %s", k->path, msg);
    }
}

/* ... and only those: in every object of the schema, another key is
 * refused, naming the table's keys for that object in table order. */
Test(keys, loader_refuses_what_is_not_a_row)
{
    char parent[256], allowed[512], want[768];

    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        json_t *obj = json_object();
        const char *msg;
        bool first = true;
        parent_of(k->path, parent, sizeof parent);
        for (size_t j = 0; j < i && first; j++) {
            char p[256];
            parent_of(tg_cfg_keys[j].path, p, sizeof p);
            first = strcmp(p, parent) != 0;
        }
        if (!first) {
            json_decref(obj);
            continue; /* each object once */
        }
        json_object_set_new(obj, "zz", json_integer(1));
        members_of(parent, strstr(parent, "sinks[]") ? TG_KF_SINK_FILE : 0, allowed,
                   sizeof allowed);
        snprintf(want, sizeof want, "unknown key \"zz\" (allowed: %s)", allowed);
        msg = load_doc(doc_at(parent, obj, TG_KF_SINK_FILE));
        cr_expect_not_null(strstr(msg, want), "%s: %s\nwant: %s", parent[0] ? parent : "(top)", msg,
                           want);
    }
}

/* A manifest takes the rows marked TG_KF_MANIFEST, and only those. */
Test(keys, manifest_takes_the_marked_rows)
{
    static const char *const objects[] = {"agents[].execution_limits", "agents[].resources",
                                          "agents[].resources.network",
                                          "agents[].resources.memory"};
    tg_manifest_t m;
    char allowed[512], want[768], *text;

    memset(&m, 0, sizeof m);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        if (!(k->flags & TG_KF_MANIFEST))
            continue;
        cr_assert(tg_cfg_key_under(k, "agents[]"), "%s", k->path);
        json_t *d = doc_at(k->path + strlen("agents[]."), json_null(), 0);
        text = json_dumps(d, 0);
        json_decref(d);
        if (tg_manifest_load_buffer(&m, "m.json", text, strlen(text), &err) < 0)
            cr_expect_null(strstr(err.msg, "unknown key"), "%s: %s", k->path, err.msg);
        free(text);
    }
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
        json_t *obj = json_object();
        json_object_set_new(obj, "kill_grace_period", json_string("1s"));
        json_object_set_new(obj, "zz", json_integer(1));
        members_of(objects[i], TG_KF_MANIFEST, allowed, sizeof allowed);
        snprintf(want, sizeof want, "(allowed: %s)", allowed);
        json_t *d = doc_at(objects[i] + strlen("agents[]."), obj, 0);
        text = json_dumps(d, JSON_PRESERVE_ORDER);
        json_decref(d);
        cr_expect_eq(tg_manifest_load_buffer(&m, "m.json", text, strlen(text), &err), -EINVAL);
        cr_expect_not_null(strstr(err.msg, want), "%s: %s\nwant: %s", objects[i], err.msg, want);
        free(text);
    }
    tg_manifest_free(&m);
}

/* --limit takes the rows with a --limit place, listed in place order. */
Test(keys, limit_takes_the_cli_rows)
{
    char kv[128], want[512] = "";

    for (unsigned place = 1; place < 64; place++) {
        for (size_t i = 0; i < tg_cfg_nkeys; i++) {
            const tg_cfg_key_t *k = &tg_cfg_keys[i];
            if (k->cli != place || tg_cfg_key_under(k, "agents[].tools.*"))
                continue;
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s, ", tg_cfg_key_cli(k));
            snprintf(kv, sizeof kv, "%s=\x7f", tg_cfg_key_cli(k));
            if (tg_config_apply_limit(&cfg, 0, kv, &err) < 0)
                cr_expect_null(strstr(err.msg, "unknown"), "%s: %s", kv, err.msg);
        }
    }
    snprintf(want + strlen(want), sizeof want - strlen(want), "tools.NAME.KEY)");
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "zz=1", &err), -1);
    cr_expect_not_null(strstr(err.msg, want), "%s\nwant: %s", err.msg, want);
}

/* router.handshake_timeout and router.reload_drain_timeout (issue 12 items
 * 4 and 29): their defaults, and 0 only where it means something (the
 * drain: at once). */
Test(config, handshake_and_reload_drain_timeouts)
{
    cr_assert_eq(load("{}"), 0, "%s", err.msg);
    cr_assert_eq(cfg.handshake_timeout_ms, 10000);
    cr_assert_eq(cfg.reload_drain_timeout_ms, 300000);
    tg_config_free(&cfg);
    setup();
    cr_assert_eq(load("{\"router\":{\"handshake_timeout\":\"2s\",\"reload_drain_timeout\":\"0s\"}}"),
                 0, "%s", err.msg);
    cr_assert_eq(cfg.handshake_timeout_ms, 2000);
    cr_assert_eq(cfg.reload_drain_timeout_ms, 0);
    tg_config_free(&cfg);
    setup();
    load_fails("{\"router\":{\"handshake_timeout\":\"0s\"}}",
               "t.json:1:32: router.handshake_timeout: \"0s\" is out of range (expected a "
               "duration above zero, e.g. 30s)");
}

/* router.frame_timeout (issue 20 item 18): 10s unless set, a duration
 * with its unit like the others, never 0 (a frame is always timed). */
Test(config, frame_timeout)
{
    cr_assert_eq(load("{}"), 0, "%s", err.msg);
    cr_assert_eq(cfg.frame_timeout_ms, 10000);
    tg_config_free(&cfg);
    setup();
    cr_assert_eq(load("{\"router\":{\"frame_timeout\":\"2500ms\"}}"), 0, "%s", err.msg);
    cr_assert_eq(cfg.frame_timeout_ms, 2500);
    tg_config_free(&cfg);
    setup();
    load_fails("{\"router\":{\"frame_timeout\":\"0s\"}}",
               "t.json:1:28: router.frame_timeout: \"0s\" is out of range (expected a "
               "duration above zero, e.g. 30s)");
}
