/* What /limits and /metrics say about an agent's instances (issue 20,
 * items 8 and 22): the agent's rows and gauges are the sums over its live
 * instances, of every config generation a reload left running, and fall
 * to 0 once no instance is left; no instance's figure overwrites
 * another's. Runs `toolgate serve` with the admin endpoint against the
 * fixture agent. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"

static tgh_serve_t U;
static char u_admin[64];

static void u_fini(void)
{
    tgh_cleanup();
}

/* Write the config (agent "fx" logging to <log>, the admin endpoint) with
 * <router_extra> spliced into router. */
static void u_write(const char *log, const char *router_extra)
{
    char router[256];
    snprintf(router, sizeof router, ", \"admin\": \"%s\"%s", u_admin,
             router_extra != NULL ? router_extra : "");
    tgh_fx_write(&U, &(tgh_fx_t){.log = log, .router_extra = router});
}

static void u_start(void)
{
    cr_assert_eq(tgh_serve_prepare(&U, "fx"), 0);
    snprintf(u_admin, sizeof u_admin, "127.0.0.1:%d", tgh_free_port());
    u_write(U.log, NULL);
    tgh_serve_start(&U, NULL, NULL, 5000);
}

/* Row <name> of /limits: its current usage and capacity. false when
 * there is no such row. */
static bool u_row(const char *name, uint64_t *current, uint64_t *capacity)
{
    json_t *doc = tga_limits(u_admin);
    json_t *e = tga_limit(doc, name);
    if (e != NULL) {
        *current = (uint64_t)json_integer_value(json_object_get(e, "current"));
        *capacity = (uint64_t)json_integer_value(json_object_get(e, "capacity"));
    }
    json_decref(doc);
    return e != NULL;
}

/* The value of series <series> on /metrics, or -1 when it is absent. */
static double u_metric(const char *series)
{
    char *body = tga_get(u_admin, "/metrics", NULL);
    size_t n = strlen(series);
    double v = -1;
    for (const char *p = body; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
    free(body);
    return v;
}

/* Wait up to <ms> for row <name>'s usage to satisfy <pred>(usage, arg). */
static bool u_wait_row(const char *name, bool (*pred)(uint64_t, uint64_t), uint64_t arg, int ms,
                       uint64_t *current, uint64_t *capacity)
{
    uint64_t end = tgh_now_ms() + (uint64_t)ms;
    do {
        if (u_row(name, current, capacity) && pred(*current, arg))
            return true;
        tgh_sleep_ms(100);
    } while (tgh_now_ms() < end);
    return false;
}

static bool at_least(uint64_t v, uint64_t min)
{
    return v >= min;
}

static bool equals(uint64_t v, uint64_t want)
{
    return v == want;
}

/* Both instances are sampled (the monitor runs once a second), or the
 * test is skipped on a host where no containment backend samples. */
static void u_wait_sampled(uint64_t min_pids)
{
    uint64_t cur = 0, cap = 0;
    if (!u_wait_row("agent.fx.memory_bytes", at_least, 1, 6000, &cur, &cap))
        cr_skip_test("no containment backend samples agent instances on this host");
    cr_assert(u_wait_row("agent.fx.pids", at_least, min_pids, 6000, &cur, &cap),
              "agent.fx.pids reads %llu with %llu instances running: one instance's count, not "
              "their sum",
              (unsigned long long)cur, (unsigned long long)min_pids);
}

TestSuite(agent_usage, .fini = u_fini, .timeout = 60);

/* Item 8: with no instance left, the gauges and /limits usage read 0. */
Test(agent_usage, figures_are_the_sum_of_live_instances_and_fall_to_zero)
{
    u_start();
    tgh_proc_t a, b;
    mcp_connect(&a, U.sock);
    mcp_init_ok(&a, 5000);
    mcp_connect(&b, U.sock);
    mcp_init_ok(&b, 5000);
    mcp_call_text(&a, 1, "echo", "{\"text\":\"x\"}", "x", 5000);
    mcp_call_text(&b, 1, "echo", "{\"text\":\"x\"}", "x", 5000);
    u_wait_sampled(2);
    uint64_t cur = 0, cap = 0, one_cap = 0;
    cr_assert(u_row("agent.fx.pids", &cur, &cap));
    cr_assert_eq(cap % 2, 0, "two instances: twice the per-instance pids limit, got %llu",
                 (unsigned long long)cap);
    one_cap = cap / 2;
    uint64_t two = cur;
    cr_assert_eq(u_metric("toolgate_agent_up{agent=\"fx\"}"), 1);

    /* One leaves: the agent is still up, its figures are the other's. */
    pid_t pids[4];
    cr_assert_eq(tgh_log_pids(U.log, pids, 4), 2);
    tgh_conn_close(&a);
    cr_assert(tgh_pid_wait_gone(pids[0], 5000) || tgh_pid_wait_gone(pids[1], 5000));
    uint64_t end = tgh_now_ms() + 3000;
    while ((!u_row("agent.fx.pids", &cur, &cap) || cap != one_cap) && tgh_now_ms() < end)
        tgh_sleep_ms(100);
    cr_assert(cur >= 1 && cur < two, "agent.fx.pids reads %llu with one instance left (%llu with two)",
              (unsigned long long)cur, (unsigned long long)two);
    cr_assert_eq(cap, one_cap, "one instance: the per-instance limit (%llu), got %llu",
                 (unsigned long long)one_cap, (unsigned long long)cap);
    cr_assert_eq(u_metric("toolgate_agent_up{agent=\"fx\"}"), 1,
                 "the agent reads down while an instance of it runs");

    /* The last one leaves: everything reads 0. */
    tgh_conn_close(&b);
    cr_assert(tgh_pid_wait_gone(pids[0], 5000) && tgh_pid_wait_gone(pids[1], 5000));
    cr_assert(u_wait_row("agent.fx.memory_bytes", equals, 0, 3000, &cur, &cap),
              "agent.fx.memory_bytes keeps %llu with no instance left", (unsigned long long)cur);
    cr_assert(u_wait_row("agent.fx.pids", equals, 0, 3000, &cur, &cap),
              "agent.fx.pids keeps %llu with no instance left", (unsigned long long)cur);
    cr_assert_eq(cap, one_cap, "no instance: the per-instance limit as capacity");
    cr_assert_eq(u_metric("toolgate_agent_memory_bytes{agent=\"fx\"}"), 0,
                 "toolgate_agent_memory_bytes keeps the last instance's figure");
    cr_assert_eq(u_metric("toolgate_agent_pids{agent=\"fx\"}"), 0,
                 "toolgate_agent_pids keeps the last instance's figure");
    cr_assert_eq(u_metric("toolgate_agent_up{agent=\"fx\"}"), 0);
    cr_assert_gt(u_metric("toolgate_agent_cpu_seconds_total{agent=\"fx\"}"), -1,
                 "the CPU counter of ended instances stays");
    tgh_serve_stop(&U, 10000);
}

/* Item 22: after a reload that replaced the agent, the old generation's
 * session and the new one's count in the same rows side by side: a call
 * running on the old instance stays counted while the new instance's
 * calls come and go. */
Test(agent_usage, old_and_new_generation_are_summed_not_overwritten)
{
    u_start();
    tgh_proc_t a, b;
    mcp_connect(&a, U.sock);
    mcp_init_ok(&a, 5000);
    char log2[TGH_PATH + 16];
    snprintf(log2, sizeof log2, "%s/fixture2.log", U.dir);
    u_write(log2, ", \"reload_drain_timeout\": \"30s\"");
    cr_assert_eq(kill(U.tg.pid, SIGHUP), 0);
    if (tgh_log_wait(U.err, "SIGHUP: config reloaded", 1, 5000) < 1)
        tgh_fail_with_stderr(U.err, "no reload");
    /* The old session holds a call on its old instance... */
    mcp_call(&a, 7, "sleep", "{\"ms\":6000}");
    tgh_sleep_ms(300);
    uint64_t cur = 0, cap = 0;
    cr_assert(u_wait_row("agent.fx.concurrency", equals, 1, 3000, &cur, &cap),
              "agent.fx.concurrency reads %llu with one call running", (unsigned long long)cur);
    /* ...while the new generation's session calls and finishes. */
    mcp_connect(&b, U.sock);
    mcp_init_ok(&b, 5000);
    cr_assert_eq(tgh_log_wait(log2, "start ", 1, 3000), 1, "the new session ran the old command");
    for (int i = 1; i <= 3; i++)
        mcp_call_text(&b, i, "echo", "{\"text\":\"x\"}", "x", 5000);
    cr_assert(u_row("agent.fx.concurrency", &cur, &cap));
    cr_assert_eq(cur, 1,
                 "agent.fx.concurrency reads %llu with the old session's call running: the new "
                 "generation overwrote the old one's count",
                 (unsigned long long)cur);
    cr_assert_eq(u_metric("toolgate_inflight_calls{agent=\"fx\"}"), 1);
    /* Both generations' instances count in the resource rows. */
    u_wait_sampled(2);
    /* The old call ends: 0. */
    json_t *r = mcp_await_int(&a, 7, 10000, NULL);
    cr_assert(r != NULL && json_object_get(r, "result") != NULL, "the old session's call failed");
    json_decref(r);
    cr_assert(u_wait_row("agent.fx.concurrency", equals, 0, 3000, &cur, &cap),
              "agent.fx.concurrency reads %llu with no call running", (unsigned long long)cur);
    cr_assert_eq(u_metric("toolgate_inflight_calls{agent=\"fx\"}"), 0);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    tgh_serve_stop(&U, 10000);
}
