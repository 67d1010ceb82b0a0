/* Containment and limit ceilings on the real binary (`toolgate wrap` with
 * the fixture agent): what an agent's manifest may ask for, the network
 * requests no backend enforces, and rlimits held to toolgate's own hard
 * limits (issue 12, items 11, 12 and 18). Each test reads what toolgate
 * says: the agent.started event's "enforced" set, its stderr, its exit.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <jansson.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_caps.h"
#include "tests/tg_harness.h"

#define FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"

static tgh_wrap_t W;

TestSuite(contain_wrap, .fini = tgh_cleanup);

/* ---- helpers ---- */

/* Start `toolgate wrap --config <dir>/config.json <args>... -- FIXTURE
 * --log <dir>/fixture.log`, the config holding <json> (NULL: no
 * --config). */
static void wrap_start(const char *json, const char *const *args)
{
    char cfg[TGH_PATH + 32];
    const char *tg_args[16];
    size_t n = 0;

    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    if (json) {
        snprintf(cfg, sizeof cfg, "%s/config.json", W.dir);
        cr_assert_eq(tgh_write_file(cfg, json), 0);
        tg_args[n++] = "--config";
        tg_args[n++] = cfg;
    }
    for (size_t i = 0; args && args[i] && n < 15; i++)
        tg_args[n++] = args[i];
    tg_args[n] = NULL;
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, tg_args, FIXTURE, agent_args, NULL), 0);
}

/* Close toolgate's stdin and wait for its exit status. */
static int eof_and_exit(int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;

    tgh_close_stdin(&W.tg);
    while (tgh_wait(&W.tg, 0) != 0) {
        cr_assert(tgh_left(deadline) > 0, "toolgate did not exit after EOF");
        free(tgh_read_line(&W.tg, 20, NULL));
    }
    return tgh_exit_code(&W.tg);
}

static char *stderr_text(void)
{
    char *s = tgh_read_file(W.err, NULL);
    return s ? s : strdup("");
}

/* The first agent.started event of the audit trail (caller frees), or
 * NULL. */
static json_t *agent_started(void)
{
    char *text = tgh_read_file(W.audit, NULL);
    json_t *found = NULL;

    for (char *line = text; line && *line && !found;) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        if (ev && strcmp(json_string_value(json_object_get(ev, "event")), "agent.started") == 0)
            found = json_incref(ev);
        json_decref(ev);
        line = nl + 1;
    }
    free(text);
    return found;
}

/* enforced.<res> of <started> (borrowed), failing the test when absent. */
static json_t *enforced(json_t *started, const char *res)
{
    json_t *it = json_object_get(json_object_get(started, "enforced"), res);
    char *dump = json_dumps(started, 0);
    cr_assert_not_null(it, "agent.started has no enforced.%s: %s", res, dump);
    free(dump);
    return it;
}

/* ---- item 18: rlimits held to toolgate's own hard limit ---- */


/* `prlimit --nofile=512:512` on toolgate made every agent fail to start
 * (the shim's setrlimit of the default 1024: EPERM) while agent.started
 * said nofile applied. The agent starts, with 512, and toolgate says so. */
Test(contain_wrap, nofile_above_toolgates_hard_limit_is_clamped, .timeout = 30)
{
    struct rlimit low = {512, 512};

    tgc_drop_sys_resource();
    /* In this test's own process: toolgate, forked from it, inherits. */
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "%s", strerror(errno));
    wrap_start(NULL, NULL);
    json_t *r = mcp_initialize(&W.tg, 10000);
    if (r == NULL || json_object_get(r, "result") == NULL) {
        char *err = stderr_text();
        cr_assert_fail("the agent did not start under a hard nofile of 512:\n%s", err);
    }
    json_decref(r);
    mcp_call_text(&W.tg, 1, "echo", "{\"text\":\"up\"}", "up", 5000);
    cr_assert_eq(eof_and_exit(5000), 0);

    json_t *started = agent_started();
    cr_assert_not_null(started, "no agent.started");
    json_t *nofile = enforced(started, "nofile");
    cr_expect_eq(json_integer_value(json_object_get(nofile, "requested")), 1024);
    cr_expect(json_is_true(json_object_get(nofile, "applied")));
    cr_expect_eq(json_integer_value(json_object_get(nofile, "applied_value")), 512,
                 "the report must give the value applied");
    json_decref(started);
    char *err = stderr_text();
    cr_expect(strstr(err, "warn  wrap: agent 'tg_fixture_agent': RLIMIT_NOFILE 1024 is above "
                          "toolgate's own hard limit 512: the agent gets 512"),
              "no notice of the clamp:\n%s", err);
    cr_expect_null(strstr(err, "setrlimit"), "%s", err);
    free(err);
}

/* ---- item 12: network requests no backend enforces ---- */

static const char net_config[] =
    "{\"agents\": [{\"id\": \"fx\", \"command\": [\"x\"],"
    " \"resources\": {\"network\": {\"bandwidth_limit\": \"10Mbps\", \"max_connections\": 100}}}]"
    "%s}";

/* best_effort: the agent runs, and agent.started lists both requests as
 * not enforced, with why and the way out, instead of dropping them. */
Test(contain_wrap, network_requests_are_in_the_enforced_set, .timeout = 30)
{
    char json[512];

    snprintf(json, sizeof json, net_config, "");
    wrap_start(json, NULL);
    mcp_init_ok(&W.tg, 10000);
    cr_assert_eq(eof_and_exit(5000), 0);
    json_t *started = agent_started();
    cr_assert_not_null(started, "no agent.started");
    json_t *bw = enforced(started, "bandwidth"), *cn = enforced(started, "connections");
    cr_expect_eq(json_integer_value(json_object_get(bw, "requested")), 10000000);
    cr_expect(json_is_false(json_object_get(bw, "applied")));
    cr_expect(strstr(json_string_value(json_object_get(bw, "reason")),
                     "no backend shapes bandwidth; remove resources.network.bandwidth_limit"));
    cr_expect_eq(json_integer_value(json_object_get(cn, "requested")), 100);
    cr_expect(json_is_false(json_object_get(cn, "applied")));
    json_decref(started);
}

/* required: refused at load, before any agent starts, with what, where
 * and how to fix it; toolgate exits 2 as for any bad config. */
Test(contain_wrap, required_refuses_network_requests_at_load, .timeout = 30)
{
    char json[512];

    snprintf(json, sizeof json, net_config, ", \"containment\": {\"mode\": \"required\"}");
    wrap_start(json, NULL);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0, "toolgate did not exit");
    cr_expect_eq(tgh_exit_code(&W.tg), 2);
    char *err = stderr_text();
    cr_expect(strstr(err, "agents[0].resources.network.bandwidth_limit: 10Mbps cannot be "
                          "enforced on any host (no containment backend shapes bandwidth) and "
                          "containment.mode is \"required\" (expected the key removed, network "
                          "\"none\", or containment.mode \"best_effort\""),
              "%s", err);
    free(err);
    cr_expect_eq(tgh_log_count(W.log, "start "), 0, "the agent started anyway");
}

/* ---- item 11: a manifest only asks ---- */

/* With the operator silent, the manifest's 24h, 65 536, 1 000 000/second
 * and 64Gi get the defaults, and toolgate says so once at load. */
Test(contain_wrap, manifest_cannot_raise_its_limits, .timeout = 30)
{
    char mpath[TGH_PATH + 32], json[TGH_PATH + 256];

    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    snprintf(mpath, sizeof mpath, "%s/m.json", W.dir);
    cr_assert_eq(tgh_write_file(mpath, "{\"execution_limits\": {\"max_tool_call_duration\": "
                                       "\"24h\", \"max_concurrent_calls\": 65536, \"rate_limit\": "
                                       "\"1000000/second\"}, \"resources\": {\"memory\": "
                                       "{\"limit\": \"64Gi\"}}}"),
                 0);
    snprintf(json, sizeof json,
             "{\"agents\": [{\"id\": \"fx\", \"command\": [\"x\"], \"manifest\": \"%s\"}]}", mpath);
    char cfg[TGH_PATH + 32];
    snprintf(cfg, sizeof cfg, "%s/config.json", W.dir);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    const char *const args[] = {"--config", cfg, NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, FIXTURE, agent_args, NULL), 0);
    mcp_init_ok(&W.tg, 10000);
    /* The default rate (60/minute, burst 60) holds, not 1 000 000/second:
     * the 61st call of a burst is refused. */
    for (json_int_t i = 1; i <= 61; i++)
        mcp_call(&W.tg, i, "echo", "{\"text\":\"r\"}");
    json_t *last = mcp_expect_int(&W.tg, 61, 5000);
    mcp_assert_denial(last, -32060, "rate_limit_exceeded");
    json_decref(last);
    cr_assert_eq(eof_and_exit(5000), 0);

    char *err = stderr_text();
    static const char *const said[] = {
        "asks max_tool_call_duration 24h; granted 15s (default cap",
        "asks max_concurrent_calls 65536; granted 3 (default cap",
        "asks rate_limit 1000000/second; granted 60/minute (default cap",
        "asks memory 64Gi; granted 512Mi (default cap",
    };
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) {
        const char *at = strstr(err, said[i]);
        cr_expect(at, "no notice \"%s\":\n%s", said[i], err);
        cr_expect(at == NULL || strstr(at + 1, said[i]) == NULL, "said twice: %s", said[i]);
    }
    cr_expect(strstr(err, "warn  wrap: agent 'fx': manifest "), "%s", err);
    free(err);
}
