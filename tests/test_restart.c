/* The restart policy of the agent layer (router/agent/restart.c), one for
 * every dialect, driven without a process: the verdict for each kind of
 * end, the backoff doubling within the window, the crash-loop limit, and
 * what a restart writes (agent.restarting through the engine's emit, the
 * metrics' restarts counter, the agent.ID.restarts row, only raised).
 * And the restart driver both engines embed (tg_restarter_t), on a real
 * uv loop with fake hooks in place of an engine: the backoff timer starts
 * the next instance, a start that fails counts like a crash, a place that
 * stops is settled without a start.
 * Each test would fail if one dialect's engine grew its own copy again
 * and this one changed. */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include <uv.h>

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
    /* the driver's tests: its loop, and what its hooks saw */
    uv_loop_t loop;
    tg_restarter_t r;
    int spawn_rc; /* what the fake spawn returns */
    bool stopped; /* what the fake stopped says */
    int spawns, settled, flushes, closed;
    tg_exit_verdict_t verdict; /* the last settled */
    int64_t status;
    uint64_t spawned_at; /* uv_now at the last spawn */
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

/* ---- the restart driver ------------------------------------------------ */

static int fake_spawn(void *owner)
{
    cr_assert_eq(owner, &F);
    F.spawns++;
    F.spawned_at = uv_now(&F.loop);
    return F.spawn_rc;
}

static bool fake_stopped(void *owner)
{
    cr_assert_eq(owner, &F);
    return F.stopped;
}

static tg_restart_ctx_t fake_where(void *owner)
{
    cr_assert_eq(owner, &F);
    return F.x;
}

static void fake_settle(void *owner, tg_exit_verdict_t v, int64_t status)
{
    cr_assert_eq(owner, &F);
    F.settled++;
    F.verdict = v;
    F.status = status;
}

static void fake_flush(void *owner)
{
    cr_assert_eq(owner, &F);
    F.flushes++;
}

static const tg_restarter_ops_t fake_ops = {
    .spawn = fake_spawn,
    .stopped = fake_stopped,
    .where = fake_where,
    .settle = fake_settle,
    .flush = fake_flush,
};

static void driver_with(const char *restart)
{
    setup_with(restart);
    cr_assert_eq(uv_loop_init(&F.loop), 0);
    tg_restarter_init(&F.r, &F.loop, &fake_ops, &F);
    cr_assert_eq(F.r.timer.data, &F, "the timer's data is the owner, for its close callback");
}

static void timer_closed(uv_handle_t *h)
{
    cr_assert_eq(h->data, &F, "the engine's close callback gets its owner");
    F.closed++;
}

static void driver_teardown(void)
{
    tg_restarter_close(&F.r, timer_closed);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_expect_eq(F.closed, 1);
    cr_expect_eq(uv_loop_close(&F.loop), 0, "every handle closed");
    teardown();
}

/* The instance of the fake place ended (<failed>, <status>) now. */
static void exited(bool failed, int64_t status)
{
    tg_restarter_exited(&F.r, failed, status, false, uv_now(&F.loop));
}

Test(restarter, restarts_after_the_backoff, .fini = driver_teardown)
{
    driver_with("{\"policy\": \"on-failure\", \"backoff\": \"30ms\"}");
    uint64_t t0 = uv_now(&F.loop);
    exited(true, 1);
    cr_assert_eq(F.settled, 1);
    cr_assert_eq(F.verdict, TG_EXIT_RESTART, "the engine is told it backs off");
    cr_assert_eq(F.spawns, 0, "not before the backoff");
    cr_assert(uv_is_active((uv_handle_t *)&F.r.timer));
    cr_assert_eq(F.emitted, 1, "agent.restarting through the engine's emit");
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.spawns, 1, "the timer starts the next instance");
    cr_assert_geq(F.spawned_at - t0, 30, "after the backoff");
    cr_assert_eq(F.flushes, 1, "what the start queued is written");
    cr_assert_eq(F.settled, 1, "a start that succeeds settles nothing");
    cr_assert_eq(F.r.rs.n, 1, "the restart is noted");
}

Test(restarter, a_failing_start_counts_as_a_crash_until_the_give_up, .fini = driver_teardown)
{
    driver_with("{\"policy\": \"on-failure\", \"max_restarts\": 2, \"window\": \"1m\", "
                "\"backoff\": \"10ms\", \"max_backoff\": \"20ms\"}");
    F.spawn_rc = -ENOMEM; /* a failure a restart may mend: status 1 */
    exited(true, 1);
    cr_assert_eq(F.verdict, TG_EXIT_RESTART);
    /* The first restart's start fails: restarted again; the second's too:
     * max_restarts within the window, given up. */
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.spawns, 2);
    cr_assert_eq(F.settled, 3, "restart, restart, give up");
    cr_assert_eq(F.verdict, TG_EXIT_GIVE_UP);
    cr_assert_eq(F.status, 1, "the status a failed start stands for");
    cr_assert_eq(F.emitted, 2);
    cr_assert_eq(F.gw.metrics.agents[0].restarts, 2);
    cr_assert_eq(F.flushes, 2, "each timer's start is followed by a flush");
    cr_assert_not(uv_is_active((uv_handle_t *)&F.r.timer), "nothing more pending");
}

Test(restarter, a_start_that_cannot_run_the_command_is_not_restarted, .fini = driver_teardown)
{
    driver_with("{\"policy\": \"always\"}");
    F.spawn_rc = -ENOENT;
    cr_assert_eq(tg_restarter_start(&F.r), -ENOENT, "the spawn's error comes back");
    cr_assert_eq(F.spawns, 1);
    cr_assert_eq(F.verdict, TG_EXIT_UNRUNNABLE, "settled as an exit with status 127");
    cr_assert_eq(F.status, 127);
    cr_assert_not(uv_is_active((uv_handle_t *)&F.r.timer));
    F.spawn_rc = 0;
    cr_assert_eq(tg_restarter_start(&F.r), 0);
    cr_assert_eq(F.settled, 1, "a start that succeeds settles nothing");
}

Test(restarter, a_place_that_stops_is_settled_without_a_start, .fini = driver_teardown)
{
    driver_with("{\"policy\": \"always\", \"backoff\": \"10ms\"}");
    F.stopped = true;
    exited(true, 1);
    cr_assert_eq(F.verdict, TG_EXIT_STOPPED);
    cr_assert_eq(F.emitted, 0, "no decision: nothing written");
    cr_assert_eq(F.r.rs.n, 0);
    cr_assert_not(uv_is_active((uv_handle_t *)&F.r.timer));
    /* Stopping while it backs off: the timer finds it stopped. */
    F.stopped = false;
    exited(true, 1);
    cr_assert_eq(F.verdict, TG_EXIT_RESTART);
    F.stopped = true;
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.verdict, TG_EXIT_STOPPED);
    cr_assert_eq(F.settled, 3);
    cr_assert_eq(F.spawns, 0);
    cr_assert_eq(F.flushes, 0);
}

Test(restarter, a_stop_drops_the_pending_restart, .fini = driver_teardown)
{
    driver_with("{\"policy\": \"always\", \"backoff\": \"10ms\"}");
    exited(false, 0);
    cr_assert_eq(F.verdict, TG_EXIT_RESTART);
    tg_restarter_stop(&F.r);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.spawns, 0);
    cr_assert_eq(F.settled, 1);
}
