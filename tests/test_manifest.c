/* Manifests: reading opensentience.agent.json, the merge with the
 * operator's values (the stricter wins, per limit, with its source),
 * agents[].resources, --limit on resources and on a manifest agent, and
 * errors with positions. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/keys.h"
#include "config/manifest.h"
#include "tests/tg_harness.h"

static tg_config_t cfg;
static tg_err_t err;
static void setup(void)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(tg_config_default(&cfg), 0);
    tgh_tmp_init();
}

static void teardown(void)
{
    tg_config_free(&cfg);
    tgh_cleanup();
}

TestSuite(manifest, .init = setup, .fini = teardown);

/* A config file "c.json" in tgh_tmp holding one agent "a" with the manifest
 * "m.json" (also in tgh_tmp) and the agent members <members> (may be ""). */
static int load_pair(const char *manifest, const char *members)
{
    char mp[128], cp[128], text[2048];

    tgh_tmp_put("m.json", manifest, mp, sizeof mp);
    snprintf(
        text, sizeof text,
        "{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"],\"manifest\":\"m.json\"%s%s}]}",
        members[0] ? "," : "", members);
    tgh_tmp_put("c.json", text, cp, sizeof cp);
    return tg_config_load_file(&cfg, cp, &err);
}

static const tg_agent_cfg_t *agent(void)
{
    cr_assert_eq(cfg.nagents, 1);
    return &cfg.agents[0];
}

/* ---- the merge, per limit ---- */

Test(manifest, stricter_wins_per_limit_with_sources)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(
        load_pair("{\"resources\":{\"memory\":{\"limit\":\"1Gi\"},\"cpu\":{\"limit\":\"250m\"},"
                  "\"pids\":{\"limit\":32},\"disk\":{\"limit\":\"2Gi\"}},"
                  "\"execution_limits\":{\"max_tool_call_duration\":\"30s\","
                  "\"max_concurrent_calls\":5,\"max_queued_calls\":4,"
                  "\"rate_limit\":\"100/minute\"}}",
                  "\"resources\":{\"memory\":{\"limit\":\"256Mi\"},\"cpu\":{\"limit\":\"1\"},"
                  "\"pids\":{\"limit\":32}},"
                  "\"execution_limits\":{\"max_tool_call_duration\":\"1m\","
                  "\"max_concurrent_calls\":2,\"kill_grace_period\":\"2s\"}"),
        0, "%s", err.msg);
    a = agent();
    /* Operator stricter: the operator's value, as a cap. */
    cr_expect_eq(a->res.memory_bytes, 256ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_CAP);
    cr_expect_eq(a->lim.max_concurrent_calls, 2);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_CAP);
    /* Manifest stricter: the request. */
    cr_expect_eq(a->res.cpu_millicores, 250);
    cr_expect_eq(a->res.cpu_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 30000);
    cr_expect_eq(a->lim.duration_src, TG_SRC_MANIFEST);
    /* A tie is the manifest's: its request is met exactly. */
    cr_expect_eq(a->res.pids, 32);
    cr_expect_eq(a->res.pids_src, TG_SRC_MANIFEST);
    /* Only the manifest asks: the default is the ceiling. Below it, the
     * request; above it, the default as a cap. */
    cr_expect_eq(a->lim.max_queued_calls, 4);
    cr_expect_eq(a->lim.queued_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->res.disk_bytes, 1ull << 30);
    cr_expect_eq(a->res.disk_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->lim.rate_limit.count, 60);
    cr_expect_eq(a->lim.rate_limit.period_ms, 60000);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT_CAP);
    /* Neither asks: the default. Only the operator: the file. */
    cr_expect_eq(a->res.network, TG_NET_FULL);
    cr_expect_eq(a->res.network_src, TG_SRC_DEFAULT);
    cr_expect_eq(a->kill_grace_ms, 2000);
    cr_expect_eq(a->kill_grace_src, TG_SRC_FILE);
    cr_expect_eq(a->lim.burst, 0);
    cr_expect_eq(a->lim.burst_src, TG_SRC_DEFAULT);
    /* What each side said is kept for `toolgate check`. */
    cr_assert_not_null(a->manifest);
    cr_expect_eq(a->manifest->req.max_concurrent_calls, 5);
    cr_expect_eq(a->manifest->req.concurrent_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->manifest->op.max_concurrent_calls, 2);
    cr_expect_eq(a->manifest->op.concurrent_src, TG_SRC_FILE);
    cr_expect_eq(a->manifest->req_res.memory_bytes, 1ull << 30);
    cr_expect_eq(a->manifest->op_res.memory_bytes, 256ull << 20);
    cr_expect_eq(a->manifest->req_res.network_src, TG_SRC_DEFAULT);
    cr_expect_str_eq(a->manifest->given, "m.json");
    cr_expect_eq(strncmp(a->manifest->path, tgh_tmp, strlen(tgh_tmp)), 0);
    cr_expect_str_eq(a->manifest->path + strlen(tgh_tmp), "/m.json");
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    cr_expect_str_eq(tg_src_name(TG_SRC_CAP), "operator cap");
}

Test(manifest, operator_order_in_object_does_not_matter)
{
    char mp[128], cp[128];

    /* "manifest" after the limits, and before: the same merge. */
    tgh_tmp_put("m.json", "{\"execution_limits\":{\"max_concurrent_calls\":5}}", mp, sizeof mp);
    tgh_tmp_put("c.json",
        "{\"agents\":[{\"execution_limits\":{\"max_concurrent_calls\":2},\"id\":\"a\","
        "\"manifest\":\"m.json\",\"command\":[\"x\"]}]}",
        cp, sizeof cp);
    cr_assert_eq(tg_config_load_file(&cfg, cp, &err), 0, "%s", err.msg);
    cr_expect_eq(agent()->lim.max_concurrent_calls, 2);
    cr_expect_eq(agent()->lim.concurrent_src, TG_SRC_CAP);
}

/* ---- a manifest only asks: the default is the ceiling ---- */

/* Notices sent while a test runs (tg_notice_set_sink). */
#define NOTICES_MAX 32
static char notices[NOTICES_MAX][512];
static size_t nnotices;

static void keep_notice(void *arg, const char *msg)
{
    (void)arg;
    if (nnotices < NOTICES_MAX)
        snprintf(notices[nnotices++], sizeof notices[0], "%s", msg);
}

static void capture_notices(void)
{
    nnotices = 0;
    tg_notice_set_sink(keep_notice, NULL);
}

/* The notice holding <needle>, or NULL. */
static const char *notice_with(const char *needle)
{
    for (size_t i = 0; i < nnotices; i++)
        if (strstr(notices[i], needle))
            return notices[i];
    return NULL;
}

/* Issue 12 item 11, the case as observed: the operator silent, a manifest
 * asking for 24h calls, 65 536 at once, 1 000 000/second and 64Gi got all
 * four. Each is held at the default, as a default cap, and said once. */
Test(manifest, silent_operator_default_is_the_ceiling)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(load_pair("{\"execution_limits\":{\"max_tool_call_duration\":\"24h\","
                           "\"max_concurrent_calls\":65536,\"rate_limit\":\"1000000/second\"},"
                           "\"resources\":{\"memory\":{\"limit\":\"64Gi\"}}}",
                           ""),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.max_tool_call_duration_ms, TG_DEF_CALL_DURATION_MS);
    cr_expect_eq(a->lim.duration_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->lim.max_concurrent_calls, TG_DEF_MAX_CONCURRENT);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->lim.rate_limit.count, TG_DEF_RATE_COUNT);
    cr_expect_eq(a->lim.rate_limit.period_ms, TG_DEF_RATE_PERIOD_MS);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->res.memory_bytes, TG_DEF_MEMORY_BYTES);
    cr_expect_eq(a->res.memory_src, TG_SRC_DEFAULT_CAP);
    cr_expect_str_eq(tg_src_name(TG_SRC_DEFAULT_CAP), "default cap");
    /* What was asked is kept for check and the notices. */
    cr_expect_eq(a->manifest->req.max_tool_call_duration_ms, 24ull * 3600 * 1000);

    /* Said once at load, when the config is final: agent, key, asked,
     * granted and why. */
    capture_notices();
    cr_assert_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    tg_notice_set_sink(NULL, NULL);
    cr_expect_eq(nnotices, 4, "%zu notices", nnotices);
    cr_expect_str_eq(notice_with("max_tool_call_duration"),
                     "agent 'a': manifest m.json asks max_tool_call_duration 24h; granted 15s "
                     "(default cap; a manifest cannot raise its own limits)");
    cr_expect_not_null(notice_with("asks max_concurrent_calls 65536; granted 3 (default cap"));
    cr_expect_not_null(notice_with("asks rate_limit 1000000/second; granted 60/minute (default"));
    cr_expect_not_null(notice_with("asks memory 64Gi; granted 512Mi (default cap"));
}

/* The same with the operator's values: they are the ceiling, and a
 * request within every ceiling is met without a word. */
Test(manifest, operator_value_is_the_ceiling_and_met_requests_are_quiet)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(load_pair("{\"resources\":{\"memory\":{\"limit\":\"64Gi\"},"
                           "\"nofile\":{\"limit\":4096}}}",
                           "\"resources\":{\"memory\":{\"limit\":\"1Gi\"}}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->res.memory_bytes, 1ull << 30);
    cr_expect_eq(a->res.memory_src, TG_SRC_CAP);
    /* nofile is merged too (it was ignored: a request of any size fell
     * through to the operator's value without a source or a word). */
    cr_expect_eq(a->res.nofile, TG_CONTAIN_DEF_NOFILE);
    cr_expect_eq(a->res.nofile_src, TG_SRC_DEFAULT_CAP);
    capture_notices();
    cr_assert_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    cr_expect_eq(nnotices, 2);
    cr_expect_not_null(notice_with("asks memory 64Gi; granted 1Gi (operator cap;"));
    cr_expect_not_null(notice_with("asks nofile 4096; granted 1024 (default cap;"));
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);

    cr_assert_eq(load_pair("{\"resources\":{\"nofile\":{\"limit\":256},"
                           "\"network\":{\"bandwidth_limit\":\"10Mbps\"}},"
                           "\"execution_limits\":{\"max_tool_call_duration\":\"15s\"}}",
                           "\"resources\":{\"network\":{\"max_connections\":10}}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->res.nofile, 256);
    cr_expect_eq(a->res.nofile_src, TG_SRC_MANIFEST);
    /* Not limited by default: any bandwidth request is stricter. */
    cr_expect_eq(a->res.bandwidth_bps, 10000000);
    cr_expect_eq(a->res.bandwidth_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->lim.max_tool_call_duration_ms, 15000);
    cr_expect_eq(a->lim.duration_src, TG_SRC_MANIFEST);
    nnotices = 0;
    cr_assert_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    tg_notice_set_sink(NULL, NULL);
    cr_expect_eq(nnotices, 0, "%s", nnotices ? notices[0] : "");
}

/* The JSON for a manifest asking row <k> (agents[].X.Y) for <val>:
 * {"X": {"Y": "<val>"}}, the value in {"limit": ...} for a resource. */
static void manifest_for(const tg_cfg_key_t *k, const char *val, char *buf, size_t cap)
{
    const char *rest = k->path + strlen("agents[].");
    char path[128], *parts[4], *save = NULL;
    size_t n = 0, len = 0;

    snprintf(path, sizeof path, "%s", rest);
    for (char *p = strtok_r(path, ".", &save); p && n < 4; p = strtok_r(NULL, ".", &save))
        parts[n++] = p;
    len += (size_t)snprintf(buf + len, cap - len, "{");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "\"%s\":%s", parts[i], i + 1 < n ? "{" : "");
    if (k->flags & TG_KF_LIMIT_OBJ)
        len += (size_t)snprintf(buf + len, cap - len, "{\"limit\":\"%s\"}", val);
    else
        len += (size_t)snprintf(buf + len, cap - len, "\"%s\"", val);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "}");
}

/* Every limit a manifest may name (the key table's manifest rows), asked
 * at its ceiling with the operator silent, gets at most the default: the
 * default itself as a default cap where it is a limit, the request where
 * the default is "not limited" (bandwidth, connections) or the request is
 * already the loosest (network full). */
Test(manifest, every_manifest_limit_is_capped_by_the_default)
{
    size_t seen = 0;

    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        tg_cfg_val_t v = {0}, got, def;
        char val[64], json[512];
        tg_cfg_at_t at, dat;
        tg_agent_cfg_t d;
        if ((k->flags & (TG_KF_LIMIT | TG_KF_MANIFEST)) != (TG_KF_LIMIT | TG_KF_MANIFEST) ||
            !tg_cfg_key_under(k, "agents[]"))
            continue;
        seen++;
        v.u = k->max;
        v.rate = (tg_rate_t){k->max, 1000};
        if (k->type == TG_KT_NETWORK)
            v.u = TG_NET_FULL;
        tg_cfg_key_fmt(k, &v, val, sizeof val);
        manifest_for(k, val, json, sizeof json);
        tg_config_free(&cfg);
        cr_assert_eq(tg_config_default(&cfg), 0);
        cr_assert_eq(load_pair(json, ""), 0, "%s: %s", json, err.msg);
        at = (tg_cfg_at_t){.lim = &agent()->lim, .res = &agent()->res};
        got = tg_cfg_key_get(k, &at);
        memset(&d, 0, sizeof d);
        d.lim = cfg.agents[0].manifest->op;
        d.res = cfg.agents[0].manifest->op_res;
        dat = (tg_cfg_at_t){.lim = &d.lim, .res = &d.res};
        def = tg_cfg_key_get(k, &dat);
        if (k->flags & TG_KF_FOLLOWS_RATE)
            def.u = d.lim.rate_limit.count; /* the default burst: the rate's count */
        if ((k->flags & TG_KF_ADVISORY) || k->type == TG_KT_NETWORK) {
            cr_expect_eq(got.u, v.u, "%s", k->path);
            cr_expect_eq(got.src, TG_SRC_MANIFEST, "%s", k->path);
        } else if (k->type == TG_KT_RATE) {
            cr_expect(got.rate.count == def.rate.count && got.rate.period_ms == def.rate.period_ms,
                      "%s: %llu/%llu ms", k->path, (unsigned long long)got.rate.count,
                      (unsigned long long)got.rate.period_ms);
            cr_expect_eq(got.src, TG_SRC_DEFAULT_CAP, "%s", k->path);
        } else {
            cr_expect_eq(got.u, def.u, "%s: asked %s, got %llu, default %llu", k->path, val,
                         (unsigned long long)got.u, (unsigned long long)def.u);
            cr_expect_eq(got.src, TG_SRC_DEFAULT_CAP, "%s", k->path);
        }
    }
    /* duration, concurrency, queue, rate, burst, memory, cpu, pids,
     * nofile, disk, network, bandwidth, connections */
    cr_expect_eq(seen, 13);
}

Test(manifest, rate_compares_calls_per_time_then_burst)
{
    tg_rate_t per_min60 = {60, 60000}, per_sec1 = {1, 1000}, per_min100 = {100, 60000};
    const tg_agent_cfg_t *a;

    cr_expect(tg_rate_stricter(per_min60, per_min100));
    cr_expect_not(tg_rate_stricter(per_min100, per_min60));
    /* Same rate: the smaller count allows the smaller burst. */
    cr_expect(tg_rate_stricter(per_sec1, per_min60));
    cr_expect_not(tg_rate_stricter(per_min60, per_sec1));
    cr_expect_not(tg_rate_stricter(per_min60, per_min60));

    /* 10/second asks more than the operator's 300/minute allows. */
    cr_assert_eq(load_pair("{\"execution_limits\":{\"rate_limit\":\"10/second\"}}",
                           "\"execution_limits\":{\"rate_limit\":\"300/minute\"}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.rate_limit.count, 300);
    cr_expect_eq(a->lim.rate_limit.period_ms, 60000);
    cr_expect_eq(a->lim.rate_src, TG_SRC_CAP);
}

Test(manifest, burst_follows_rate_unless_one_side_sets_it)
{
    const tg_agent_cfg_t *a;

    /* Neither sets a burst: it follows the merged rate (0 = its count). */
    cr_assert_eq(load_pair("{\"execution_limits\":{\"rate_limit\":\"10/minute\"}}",
                           "\"execution_limits\":{\"rate_limit\":\"100/minute\"}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.rate_limit.count, 10);
    cr_expect_eq(a->lim.burst, 0);
    cr_expect_eq(a->lim.burst_src, TG_SRC_DEFAULT);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);

    /* The operator's burst 50 against the manifest's implicit 10 (its
     * rate's count): the manifest's. */
    cr_assert_eq(load_pair("{\"execution_limits\":{\"rate_limit\":\"10/minute\"}}",
                           "\"execution_limits\":{\"rate_limit\":\"100/minute\",\"burst\":50}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.burst, 10);
    cr_expect_eq(a->lim.burst_src, TG_SRC_MANIFEST);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);

    /* The manifest's burst 100 against the operator's implicit 20 (rate
     * 20/minute from the file): capped at 20. */
    cr_assert_eq(load_pair("{\"execution_limits\":{\"rate_limit\":\"100/minute\",\"burst\":100}}",
                           "\"execution_limits\":{\"rate_limit\":\"20/minute\"}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.rate_limit.count, 20);
    cr_expect_eq(a->lim.rate_src, TG_SRC_CAP);
    cr_expect_eq(a->lim.burst, 20);
    cr_expect_eq(a->lim.burst_src, TG_SRC_CAP);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);

    /* Against the default rate the default's burst (its count, 60) caps
     * the manifest's; below it the request stands. */
    cr_assert_eq(load_pair("{\"execution_limits\":{\"burst\":100}}", ""), 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.burst, 60);
    cr_expect_eq(a->lim.burst_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->lim.rate_limit.count, 60);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(load_pair("{\"execution_limits\":{\"burst\":20}}", ""), 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.burst, 20);
    cr_expect_eq(a->lim.burst_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->lim.rate_limit.count, 60);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT);
}

Test(manifest, network_none_beats_loopback_beats_full)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(load_pair("{\"resources\":{\"network\":{\"limit\":\"loopback\","
                           "\"bandwidth_limit\":\"10Mbps\",\"max_connections\":100}}}",
                           "\"resources\":{\"network\":\"full\"}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->res.network, TG_NET_LOOPBACK);
    cr_expect_eq(a->res.network_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->res.bandwidth_bps, 10000000);
    cr_expect_eq(a->res.bandwidth_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->res.max_connections, 100);
    cr_expect_eq(a->res.connections_src, TG_SRC_MANIFEST);
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);

    cr_assert_eq(load_pair("{\"resources\":{\"network\":\"loopback\"}}",
                           "\"resources\":{\"network\":{\"limit\":\"none\","
                           "\"max_connections\":500}}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->res.network, TG_NET_NONE);
    cr_expect_eq(a->res.network_src, TG_SRC_CAP);
    cr_expect_eq(a->res.max_connections, 500);
    cr_expect_eq(a->res.connections_src, TG_SRC_FILE);
    cr_expect_eq(a->res.bandwidth_bps, 0);
    cr_expect_eq(a->res.bandwidth_src, TG_SRC_DEFAULT);
    cr_expect_str_eq(tg_network_name(TG_NET_LOOPBACK), "loopback");
}

Test(manifest, merge_is_pure_over_the_two_sides)
{
    tg_manifest_t m;
    tg_exec_limits_t lim;
    tg_resources_t res;

    memset(&m, 0, sizeof m);
    tg_resources_default(&m.op_res);
    tg_resources_default(&m.req_res);
    m.op.max_tool_call_duration_ms = 15000;
    m.op.max_concurrent_calls = 3;
    m.op.rate_limit = (tg_rate_t){60, 60000};
    m.req = m.op;
    /* --limit values stay --limit when they win. */
    m.op.max_concurrent_calls = 1;
    m.op.concurrent_src = TG_SRC_CLI;
    m.req.max_concurrent_calls = 8;
    m.req.concurrent_src = TG_SRC_MANIFEST;
    m.op_res.memory_bytes = 64ull << 20;
    m.op_res.memory_src = TG_SRC_CLI;
    m.req_res.memory_bytes = 32ull << 20;
    m.req_res.memory_src = TG_SRC_MANIFEST;
    tg_manifest_merge(&m, &lim, &res);
    cr_expect_eq(lim.max_concurrent_calls, 1);
    cr_expect_eq(lim.concurrent_src, TG_SRC_CLI);
    cr_expect_eq(res.memory_bytes, 32ull << 20);
    cr_expect_eq(res.memory_src, TG_SRC_MANIFEST);
    cr_expect_eq(lim.max_tool_call_duration_ms, 15000);
    cr_expect_eq(lim.duration_src, TG_SRC_DEFAULT);
    cr_expect_eq(res.cpu_millicores, 1000);
    cr_expect_eq(res.cpu_src, TG_SRC_DEFAULT);
}

/* ---- --limit ---- */

Test(manifest, limit_on_manifest_agent_merges_again)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(load_pair("{\"resources\":{\"memory\":{\"limit\":\"512Mi\"}},"
                           "\"execution_limits\":{\"max_concurrent_calls\":5}}",
                           "\"execution_limits\":{\"max_concurrent_calls\":8}"),
                 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->lim.max_concurrent_calls, 5);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_MANIFEST);
    /* Stricter than the manifest: the --limit. */
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "max_concurrent_calls=2", &err), 0, "%s", err.msg);
    cr_expect_eq(a->lim.max_concurrent_calls, 2);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_CLI);
    /* Looser than the manifest: the manifest's request still holds. */
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "memory=2Gi", &err), 0, "%s", err.msg);
    cr_expect_eq(a->res.memory_bytes, 512ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->manifest->op_res.memory_bytes, 2ull << 30);
    cr_expect_eq(a->manifest->op_res.memory_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "memory=128Mi", &err), 0, "%s", err.msg);
    cr_expect_eq(a->res.memory_bytes, 128ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_CLI);
    /* Keys the manifest cannot ask for are applied as they are. */
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "kill_grace_period=1s", &err), 0, "%s", err.msg);
    cr_expect_eq(a->kill_grace_ms, 1000);
    cr_expect_eq(a->kill_grace_src, TG_SRC_CLI);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "tools.web.max_concurrent_calls=9", &err), 0);
    cr_expect_eq(a->tools[0].lim.max_concurrent_calls, 9);
    cr_expect_eq(a->lim.max_concurrent_calls, 2);
}

Test(manifest, limit_resources_and_containment_without_manifest)
{
    const tg_agent_cfg_t *a = &cfg.agents[0];

    cr_expect_eq(a->res.memory_bytes, 512ull << 20);
    cr_expect_eq(a->res.cpu_millicores, 1000);
    cr_expect_eq(a->res.pids, 64);
    cr_expect_eq(a->res.disk_bytes, 1ull << 30);
    cr_expect_eq(a->res.network, TG_NET_FULL);
    cr_expect_eq(a->res.memory_src, TG_SRC_DEFAULT);
    cr_expect_eq(cfg.containment_mode, TG_CONTAINMENT_BEST_EFFORT);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "memory=64Mi", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "cpu=0.5", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "pids=32", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "disk=100Mi", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "network=none", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "containment=required", &err), 0, "%s", err.msg);
    cr_expect_eq(a->res.memory_bytes, 64ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_CLI);
    cr_expect_eq(a->res.cpu_millicores, 500);
    cr_expect_eq(a->res.pids, 32);
    cr_expect_eq(a->res.disk_bytes, 100ull << 20);
    cr_expect_eq(a->res.network, TG_NET_NONE);
    cr_expect_eq(a->res.network_src, TG_SRC_CLI);
    cr_expect_eq(cfg.containment_mode, TG_CONTAINMENT_REQUIRED);
    cr_expect_eq(cfg.containment_src, TG_SRC_CLI);
    cr_expect_str_eq(tg_containment_mode_name(cfg.containment_mode), "required");

    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "cpu=5m", &err), -1);
    cr_expect_str_eq(err.msg,
                     "--limit cpu=5m: cpu: \"5m\" is out of range (expected 10m to 1024000m)");
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "network=off", &err), -1);
    cr_expect_str_eq(err.msg, "--limit network=off: network: \"off\" is not a network mode "
                              "(expected \"none\", \"loopback\" or \"full\")");
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "containment=strict", &err), -1);
    cr_expect_str_eq(err.msg,
                     "--limit containment=strict: containment: \"strict\" is not a "
                     "containment mode (expected \"best_effort\", \"required\" or \"off\")");
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "bandwidth_limit=1Mbps", &err), -1);
    cr_expect_eq(tg_config_apply_limit(&cfg, 0, "tools.web.memory=1Gi", &err), -1);
    cr_expect_str_eq(err.msg, "--limit tools.web.memory=1Gi: unknown tool key \"memory\" (allowed: "
                              "max_tool_call_duration, max_concurrent_calls, max_queued_calls, "
                              "rate_limit, burst, rate_scope)");
    /* The failures changed nothing. */
    cr_expect_eq(a->res.cpu_millicores, 500);
    cr_expect_eq(a->res.network, TG_NET_NONE);
    cr_expect_eq(cfg.containment_mode, TG_CONTAINMENT_REQUIRED);
}

/* ---- agents[].resources and containment in the config ---- */

Test(manifest, config_resources_and_containment)
{
    static const char text[] =
        "{\"containment\":{\"mode\":\"off\"},\"agents\":[{\"id\":\"a\",\"command\":[\"x\"],"
        "\"resources\":{\"memory\":{\"request\":\"64Mi\",\"limit\":\"256Mi\"},"
        "\"cpu\":{\"limit\":\"1500m\"},\"pids\":{\"limit\":\"16\"},\"disk\":{\"limit\":1048576},"
        "\"network\":\"none\"}}]}";
    const tg_agent_cfg_t *a;

    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err), 0, "%s", err.msg);
    a = agent();
    cr_expect_eq(a->res.memory_bytes, 256ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_FILE);
    cr_expect_eq(a->res.cpu_millicores, 1500);
    cr_expect_eq(a->res.pids, 16);
    cr_expect_eq(a->res.disk_bytes, 1048576);
    cr_expect_eq(a->res.network, TG_NET_NONE);
    cr_expect_eq(a->res.network_src, TG_SRC_FILE);
    cr_expect_null(a->manifest);
    cr_expect_eq(cfg.containment_mode, TG_CONTAINMENT_OFF);
    cr_expect_eq(cfg.containment_src, TG_SRC_FILE);
    cr_expect_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
}

/* Load <text> (name t.json) and validate it: 0, or -1 with err.msg. */
static int load_validate(const char *text)
{
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err), 0, "%s", err.msg);
    return tg_config_validate(&cfg, &err);
}

/* Issue 12 item 12: resources.network's bandwidth_limit and
 * max_connections were accepted under containment.mode "required" and
 * dropped at run time. No backend enforces them: "required" refuses them
 * at load, naming the key, why, and the ways out; network "none" (no route
 * out) enforces both; best_effort takes them and reports them. */
Test(manifest, required_refuses_network_requests_no_backend_enforces)
{
    char mp[128], cp[128];

    cr_expect_eq(load_validate("{\"containment\":{\"mode\":\"required\"},\"agents\":[{\"id\":\"a\","
                               "\"command\":[\"x\"],\"resources\":{\"network\":"
                               "{\"bandwidth_limit\":\"10Mbps\"}}}]}"),
                 -1);
    cr_expect_str_eq(err.msg, "agents[0].resources.network.bandwidth_limit: 10Mbps cannot be "
                              "enforced on any host (no containment backend shapes bandwidth) and "
                              "containment.mode is \"required\" (expected the key removed, network "
                              "\"none\", or containment.mode \"best_effort\", which reports it not "
                              "enforced)");
    cr_expect_eq(load_validate("{\"containment\":{\"mode\":\"required\"},\"agents\":[{\"id\":\"a\","
                               "\"command\":[\"x\"],\"resources\":{\"network\":{\"limit\":"
                               "\"loopback\",\"max_connections\":100}}}]}"),
                 -1);
    cr_expect(strstr(err.msg, "agents[0].resources.network.max_connections: 100 cannot be "
                              "enforced on any host (no containment backend counts connections)"),
              "%s", err.msg);
    /* Without a route out there is nothing to shape or count. */
    cr_expect_eq(load_validate("{\"containment\":{\"mode\":\"required\"},\"agents\":[{\"id\":\"a\","
                               "\"command\":[\"x\"],\"resources\":{\"network\":{\"limit\":\"none\","
                               "\"bandwidth_limit\":\"10Mbps\",\"max_connections\":100}}}]}"),
                 0, "%s", err.msg);
    cr_expect_eq(load_validate("{\"agents\":[{\"id\":\"a\",\"command\":[\"x\"],\"resources\":"
                               "{\"network\":{\"bandwidth_limit\":\"10Mbps\"}}}]}"),
                 0, "%s", err.msg);

    /* Asked by a manifest: the message says so, and where to remove it. */
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    tgh_tmp_put("m.json", "{\"resources\":{\"network\":{\"bandwidth_limit\":\"1Mbps\"}}}", mp,
                sizeof mp);
    tgh_tmp_put("c.json",
                "{\"containment\":{\"mode\":\"required\"},\"agents\":[{\"id\":\"a\","
                "\"command\":[\"x\"],\"manifest\":\"m.json\"}]}",
                cp, sizeof cp);
    cr_assert_eq(tg_config_load_file(&cfg, cp, &err), 0, "%s", err.msg);
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect(strstr(err.msg, "agents[0].resources.network.bandwidth_limit: 1Mbps (asked by "
                              "manifest m.json) cannot be enforced"),
              "%s", err.msg);
    cr_expect(strstr(err.msg, "expected the key removed from the manifest, network \"none\""), "%s",
              err.msg);
}

/* Load <text> (name t.json) expecting exactly <msg>. */
static void cfg_fails(const char *text, const char *msg)
{
    cr_expect_eq(tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err), -1, "accepted %s",
                 text);
    cr_expect_str_eq(err.msg, msg, "for: %s\n got: %s\nwant: %s", text, err.msg, msg);
}

Test(manifest, config_resource_errors_have_positions)
{
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"ram\":{}}}]}",
              "t.json:1:35: agents[0].resources: unknown key \"ram\" (allowed: memory, cpu, pids, "
              "nofile, disk, network)");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"memory\":\"1Gi\"}}]}",
              "t.json:1:44: agents[0].resources.memory: expected an object, got a string");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"memory\":{\"max\":\"1Gi\"}}}]}",
              "t.json:1:45: agents[0].resources.memory: unknown key \"max\" (allowed: limit, "
              "request)");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"cpu\":{\"limit\":0.5}}}]}",
              "t.json:1:50: agents[0].resources.cpu.limit: expected a CPU string such as \"500m\" "
              "or \"2\", got a real number");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"memory\":{\"request\":\"512Ki\"}}}]}",
              "t.json:1:55: agents[0].resources.memory.request: \"512Ki\" is out of range "
              "(expected 1Mi to 1Ti)");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"network\":\"host\"}}]}",
              "t.json:1:45: agents[0].resources.network: \"host\" is not a network mode (expected "
              "\"none\", \"loopback\" or \"full\")");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"network\":{\"speed\":1}}}]}",
              "t.json:1:46: agents[0].resources.network: unknown key \"speed\" (allowed: limit, "
              "bandwidth_limit, max_connections)");
    cfg_fails("{\"agents\":[{\"id\":\"a\",\"resources\":{\"network\":5}}]}",
              "t.json:1:45: agents[0].resources.network: expected \"none\", \"loopback\", \"full\" "
              "or an object, got an integer");
    cfg_fails("{\"containment\":{\"mode\":\"strict\"}}",
              "t.json:1:24: containment.mode: \"strict\" is not a containment mode (expected "
              "\"best_effort\", \"required\" or \"off\")");
    cfg_fails("{\"containment\":{\"backend\":\"cgroup2\"}}",
              "t.json:1:17: containment: unknown key \"backend\" (allowed: mode, min_free_memory, "
              "workspace_backend)");
}

/* ---- manifest errors ---- */

/* Load a config whose agent names manifest <manifest_text>, expecting
 * <msg> with "@" standing for tgh_tmp. */
static void pair_fails(const char *manifest_text, const char *msg)
{
    char want[2 * TG_ERR_MAX], *at = strchr(msg, '@');

    cr_expect_eq(load_pair(manifest_text, ""), -1, "accepted %s", manifest_text);
    if (at)
        snprintf(want, sizeof want, "%.*s%s%s", (int)(at - msg), msg, tgh_tmp, at + 1);
    else
        snprintf(want, sizeof want, "%s", msg);
    cr_expect_str_eq(err.msg, want, "for: %s\n got: %s\nwant: %s", manifest_text, err.msg, want);
}

Test(manifest, manifest_errors_have_positions)
{
    pair_fails("{\"resources\": {\"memory\": {\"limit\": \"lots\"}}}",
               "@/m.json:1:36: resources.memory.limit: \"lots\" is not a size (expected a whole "
               "number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi)");
    pair_fails("{\"id\": \"x\",\n \"execution_limits\": {\n   \"max_calls\": 5}}",
               "@/m.json:3:4: execution_limits: unknown key \"max_calls\" (allowed: "
               "max_tool_call_duration, max_concurrent_calls, max_queued_calls, rate_limit, burst, "
               "rate_scope, shared_mode, concurrency_scope)");
    /* The grace before a kill is the operator's, not the agent's. */
    pair_fails("{\"execution_limits\": {\"kill_grace_period\": \"1h\"}}",
               "@/m.json:1:23: execution_limits: unknown key \"kill_grace_period\" (allowed: "
               "max_tool_call_duration, max_concurrent_calls, max_queued_calls, rate_limit, burst, "
               "rate_scope, shared_mode, concurrency_scope)");
    pair_fails("{\"execution_limits\": {\"max_concurrent_calls\": 0}}",
               "@/m.json:1:47: execution_limits.max_concurrent_calls: 0 is out of range (expected "
               "1 to 65536)");
    pair_fails("{\"resources\": []}", "@/m.json:1:15: resources: expected an object, got an array");
    pair_fails("{\"resources\": {\"cpu\": {\"limit\": \"fast\"}}}",
               "@/m.json:1:33: resources.cpu.limit: \"fast\" is not a CPU quantity (expected "
               "millicores or cores, e.g. 500m, 1 or 0.5 (at most 3 decimals))");
    pair_fails("{\"resources\": {\"network\": {\"bandwidth_limit\": \"fast\"}}}",
               "@/m.json:1:47: resources.network.bandwidth_limit: \"fast\" is not a bandwidth "
               "(expected a whole number with Kbps, Mbps or Gbps, e.g. 512Kbps, 10Mbps or 1Gbps)");
    pair_fails("{\"resources\": {\"memory\": {\"limit\": \"1Gi\"}},\n}",
               "@/m.json:2:1: syntax error: string or '}' expected near '}'");
    pair_fails("[1]", "@/m.json:1:1: expected an object at the top level, got an array");
}

Test(manifest, missing_or_unreadable_file_names_the_path)
{
    char cp[128], want[4 * TG_ERR_MAX];

    tgh_tmp_put("c.json",
        "{\"agents\":[{\"id\":\"a\",\"command\":[\"x\"],\n"
        "  \"manifest\": \"sub/none.json\"}]}",
        cp, sizeof cp);
    cr_expect_eq(tg_config_load_file(&cfg, cp, &err), -1);
    snprintf(want, sizeof want,
             "%s/c.json:2:15: agents[0].manifest: %s/sub/none.json: cannot open: No such file or "
             "directory",
             tgh_tmp, tgh_tmp);
    cr_expect_str_eq(err.msg, want);
    /* The failed load left the config as it was. */
    cr_expect_str_eq(cfg.agents[0].id, "agent");
    cr_expect_null(cfg.agents[0].manifest);

    cfg_fails("{\"agents\":[{\"id\":\"a\",\"manifest\":\"\"}]}",
              "t.json:1:33: agents[0].manifest: expected a non-empty string");
}

Test(manifest, oversized_file_is_refused)
{
    char mp[128], want[TG_ERR_MAX];
    tg_manifest_t m;
    FILE *f;

    tgh_tmp_path(mp, sizeof mp, "big.json");
    f = fopen(mp, "w");
    cr_assert_not_null(f);
    for (unsigned i = 0; i <= TG_MANIFEST_FILE_MAX; i++)
        fputc(' ', f);
    cr_assert_eq(fclose(f), 0);
    memset(&m, 0, sizeof m);
    cr_expect_eq(tg_manifest_load_file(&m, mp, &err), -EFBIG);
    snprintf(want, sizeof want, "%s: larger than 1048576 bytes (manifests are bounded)", mp);
    cr_expect_str_eq(err.msg, want);
}

Test(manifest, other_keys_are_left_alone)
{
    static const char text[] =
        "{\"id\":\"com.example.x\",\"name\":\"X\",\"version\":\"1.0.0\",\"permissions\":[\"net\"],"
        "\"tools\":[{\"name\":\"t\",\"timeout\":\"forever\"}],\"resources\":{\"pids\":{\"limit\":8}"
        "}}";
    tg_manifest_t m;

    memset(&m, 0, sizeof m);
    cr_assert_eq(tg_manifest_load_buffer(&m, "m.json", text, strlen(text), &err), 0, "%s", err.msg);
    cr_expect_eq(m.req_res.pids, 8);
    cr_expect_eq(m.req_res.pids_src, TG_SRC_MANIFEST);
    cr_expect_eq(m.req_res.memory_src, TG_SRC_DEFAULT);
    cr_expect_eq(m.req.rate_src, TG_SRC_DEFAULT);
    cr_expect_eq(m.req.max_tool_call_duration_ms, TG_DEF_CALL_DURATION_MS);
}

Test(manifest, resolve_paths_beside_the_config)
{
    char *p;

    p = tg_manifest_resolve("/etc/toolgate/toolgate.json", "search/m.json");
    cr_expect_str_eq(p, "/etc/toolgate/search/m.json");
    free(p);
    p = tg_manifest_resolve("/etc/toolgate/toolgate.json", "/opt/m.json");
    cr_expect_str_eq(p, "/opt/m.json");
    free(p);
    p = tg_manifest_resolve("toolgate.json", "m.json");
    cr_expect_str_eq(p, "m.json");
    free(p);
    p = tg_manifest_resolve(NULL, "m.json");
    cr_expect_str_eq(p, "m.json");
    free(p);
    p = tg_manifest_resolve("/toolgate.json", "m.json");
    cr_expect_str_eq(p, "/m.json");
    free(p);
}

Test(manifest, failed_reload_keeps_the_merged_manifest)
{
    static const char bad[] =
        "{\"agents\":[{\"id\":\"b\",\"command\":[\"x\"],\"dialect\":\"grpc\"}]}";
    cr_assert_eq(load_pair("{\"resources\":{\"memory\":{\"limit\":\"128Mi\"}}}", ""), 0, "%s",
                 err.msg);
    cr_expect_eq(tg_config_load_buffer(&cfg, "t.json", bad, strlen(bad), &err), -1);
    cr_assert_not_null(agent()->manifest);
    cr_expect_eq(agent()->res.memory_bytes, 128ull << 20);
    cr_expect_eq(agent()->res.memory_src, TG_SRC_MANIFEST);
    cr_expect_str_eq(agent()->manifest->given, "m.json");
    /* A load over it clones the agents (deep, manifest included) first. */
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", "{}", 2, &err), 0, "%s", err.msg);
    cr_assert_not_null(agent()->manifest);
    cr_expect_str_eq(agent()->manifest->given, "m.json");
    cr_expect_eq(agent()->manifest->req_res.memory_bytes, 128ull << 20);
}

Test(manifest, config_paths_of_resources)
{
    char buf[128];
    const tg_agent_cfg_t *a = &cfg.agents[0];

    cr_expect_eq(tg_config_path_for(a, NULL, "memory", buf, sizeof buf),
                 (int)strlen("agents.agent.resources.memory.limit"));
    cr_expect_str_eq(buf, "agents.agent.resources.memory.limit");
    cr_expect_gt(tg_config_path_for(a, NULL, "network", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "agents.agent.resources.network");
    cr_expect_gt(tg_config_path_for(a, NULL, "max_connections", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "agents.agent.resources.network.max_connections");
    cr_expect_gt(tg_config_path_for(a, NULL, "rate_limit", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "agents.agent.execution_limits.rate_limit");
}

Test(manifest, validate_range_checks_resources_set_in_code)
{
    static char word[] = "x";
    char *argv[] = {word, NULL};

    cr_assert_eq(tg_config_set_command(&cfg, 0, argv, &err), 0);
    cfg.agents[0].res.pids = 0;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg,
                     "agents[0].resources.pids: 0 is out of range (expected 1 to 4194304)");
    cfg.agents[0].res.pids = 1;
    cfg.containment_mode = (tg_containment_mode_t)7;
    cr_expect_eq(tg_config_validate(&cfg, &err), -1);
    cr_expect_str_eq(err.msg, "containment.mode: not a containment mode (expected \"best_effort\", "
                              "\"required\" or \"off\")");
}

Test(manifest, serve_example_reads_its_manifest)
{
    const tg_agent_cfg_t *a;

    cr_assert_eq(tg_config_load_file(&cfg, TG_SOURCE_DIR "/tests/data/config_serve.json", &err), 0,
                 "%s", err.msg);
    cr_assert_eq(cfg.nagents, 2);
    a = &cfg.agents[1];
    cr_assert_not_null(a->manifest);
    cr_expect_str_eq(a->manifest->path, TG_SOURCE_DIR "/tests/data/files.opensentience.agent.json");
    cr_expect_eq(a->res.memory_bytes, 256ull << 20);
    cr_expect_eq(a->res.memory_src, TG_SRC_MANIFEST);
    cr_expect_eq(a->res.cpu_millicores, 500);
    cr_expect_eq(a->res.bandwidth_bps, 10000000);
    /* It asks for 5 calls at once and 100/minute, the operator is silent:
     * the defaults hold. */
    cr_expect_eq(a->lim.max_concurrent_calls, 3);
    cr_expect_eq(a->lim.concurrent_src, TG_SRC_DEFAULT_CAP);
    cr_expect_eq(a->lim.rate_limit.count, 60);
    cr_expect_eq(a->lim.rate_src, TG_SRC_DEFAULT_CAP);
    /* The first agent's resources are the operator's. */
    cr_expect_eq(cfg.agents[0].res.memory_bytes, 512ull << 20);
    cr_expect_eq(cfg.agents[0].res.memory_src, TG_SRC_FILE);
    cr_expect_eq(cfg.agents[0].res.cpu_millicores, 500);
    cr_expect_eq(cfg.containment_mode, TG_CONTAINMENT_BEST_EFFORT);
    cr_expect_eq(cfg.containment_src, TG_SRC_FILE);
}
