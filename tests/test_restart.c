/* The restart policy of the agent layer (router/agent/restart.c), one for
 * every dialect, driven without a process: the verdict for each kind of
 * end, the backoff doubling within the window, the crash-loop limit, and
 * what a restart writes (agent.restarting through the engine's emit, the
 * metrics' restarts counter, the agent.ID.restarts row, only raised).
 * Each test would fail if one dialect's engine grew its own copy again
 * and this one changed. */
#include <criterion/criterion.h>

#include <string.h>

#include "config/config.h"
#include "router/agent/restart.h"
#include "router/gateway/gateway.h"
#include "router/gateway/metrics.h"

static struct {
    tg_config_t cfg;
    tg_gw_t gw;
    tg_restarts_t rs;
    tg_restart_ctx_t x;
    int emitted;
    uint32_t last_attempt;
} F;

static void fake_emit(void *owner, tg_audit_ev_t *ev)
{
    cr_assert_eq(owner, &F, "the engine's owner comes back");
    cr_assert_str_eq(ev->event, "agent.restarting");
    F.emitted++;
}

static void setup_with(const char *restart)
{
    memset(&F, 0, sizeof(F));
    char json[512];
    snprintf(json, sizeof json,
             "{\"agents\": [{\"id\": \"a\", \"command\": [\"/bin/true\"], \"restart\": %s}]}",
             restart);
    tg_err_t err;
    cr_assert_eq(tg_config_default(&F.cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&F.cfg, "t.json", json, strlen(json), &err), 0, "%s",
                 err.msg);
    F.gw.cfg = &F.cfg;
    tg_registry_init(&F.gw.reg);
    cr_assert_eq(tg_metrics_init(&F.gw.metrics, &F.cfg), 0);
    F.gw.metrics_ok = true;
    F.x = (tg_restart_ctx_t){.gw = &F.gw,
                             .acfg = &F.cfg.agents[0],
                             .idx = 0,
                             .reg_restarts = tg_restarts_register(&F.gw.reg, &F.cfg.agents[0],
                                                                  "agent"),
                             .stop_tail = "stopping",
                             .emit = fake_emit,
                             .owner = &F};
    cr_assert_geq(F.x.reg_restarts, 0);
}

static void teardown(void)
{
    tg_metrics_free(&F.gw.metrics);
    tg_registry_free(&F.gw.reg);
    tg_config_free(&F.cfg);
}

static tg_exit_verdict_t end(bool failed, int64_t status, bool by_signal, uint64_t now,
                             uint64_t *backoff)
{
    uint32_t recent;
    return tg_restart_decide(&F.rs, &F.x, failed, status, by_signal, now, backoff, &recent);
}

static uint64_t row(void)
{
    return F.gw.reg.v[F.x.reg_restarts].current;
}

Test(restart, the_row_is_the_agents_and_names_its_budget, .fini = teardown)
{
    setup_with("{\"max_restarts\": 4}");
    cr_assert_str_eq(F.gw.reg.v[F.x.reg_restarts].name, "agent.a.restarts");
    cr_assert_eq(F.gw.reg.v[F.x.reg_restarts].capacity, 4);
}

Test(restart, backoff_doubles_within_the_window_until_the_crash_loop, .fini = teardown)
{
    setup_with("{\"policy\": \"on-failure\", \"max_restarts\": 3, \"window\": \"10s\", "
               "\"backoff\": \"100ms\", \"max_backoff\": \"250ms\"}");
    uint64_t b;
    cr_assert_eq(end(true, 1, false, 1000, &b), TG_EXIT_RESTART);
    cr_assert_eq(b, 100);
    cr_assert_eq(end(true, 1, false, 2000, &b), TG_EXIT_RESTART);
    cr_assert_eq(b, 200);
    cr_assert_eq(end(true, 0, true, 3000, &b), TG_EXIT_RESTART, "killed by a signal");
    cr_assert_eq(b, 250, "capped at max_backoff");
    cr_assert_eq(F.emitted, 3);
    cr_assert_eq(F.gw.metrics.agents[0].restarts, 3, "the metrics count every restart");
    cr_assert_eq(row(), 3);
    cr_assert_eq(end(true, 1, false, 4000, &b), TG_EXIT_GIVE_UP, "max_restarts within the window");
    cr_assert_eq(F.emitted, 3, "giving up writes no agent.restarting");
    /* Past the window the budget is back. */
    cr_assert_eq(end(true, 1, false, 20000, &b), TG_EXIT_RESTART);
    cr_assert_eq(b, 100);
}

Test(restart, the_policy_decides_a_clean_exit, .fini = teardown)
{
    uint64_t b;
    setup_with("{\"policy\": \"on-failure\"}");
    cr_assert_eq(end(false, 0, false, 1000, &b), TG_EXIT_POLICY);
    cr_assert_eq(end(true, 3, false, 1000, &b), TG_EXIT_RESTART);
    teardown();
    setup_with("{\"policy\": \"no\"}");
    cr_assert_eq(end(true, 3, false, 1000, &b), TG_EXIT_POLICY);
    cr_assert_eq(F.emitted, 0);
    teardown();
    setup_with("{\"policy\": \"always\"}");
    cr_assert_eq(end(false, 0, false, 1000, &b), TG_EXIT_RESTART);
}

Test(restart, a_command_that_cannot_run_is_never_restarted, .fini = teardown)
{
    setup_with("{\"policy\": \"always\"}");
    uint64_t b;
    cr_assert_eq(end(true, 127, false, 1000, &b), TG_EXIT_UNRUNNABLE);
    cr_assert_eq(end(true, 126, false, 1000, &b), TG_EXIT_UNRUNNABLE);
    cr_assert_eq(end(true, 127, true, 1000, &b), TG_EXIT_RESTART, "signal 127 is no exec failure");
    cr_assert_eq(F.emitted, 1);
}

Test(restart, the_row_is_only_raised_by_a_restart, .fini = teardown)
{
    setup_with("{\"policy\": \"always\", \"max_restarts\": 5}");
    uint64_t b;
    /* Another place of the agent (an MCP session) is nearer its budget. */
    tg_registry_update(&F.gw.reg, F.x.reg_restarts, 4);
    cr_assert_eq(end(true, 1, false, 1000, &b), TG_EXIT_RESTART);
    cr_assert_eq(row(), 4, "this place's first restart does not lower it");
    tg_restarts_reset(&F.rs);
    cr_assert_eq(tg_restarts_recent(&F.rs, &F.cfg.agents[0], 1000), 0);
}
