/* The restart policy of an agent instance (see restart.h). */
#include "router/agent/restart.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "router/agent/instance.h"
#include "router/gateway/log.h"
#include "router/gateway/metrics.h"

uint32_t tg_restarts_recent(const tg_restarts_t *rs, const tg_agent_cfg_t *a, uint64_t now)
{
    return tg_aproc_recent(rs->at, rs->n, now, a->restart_window_ms);
}

void tg_restarts_note(tg_restarts_t *rs, uint64_t now)
{
    tg_aproc_restart_note(rs->at, &rs->n, now);
}

void tg_restarts_reset(tg_restarts_t *rs)
{
    memset(rs, 0, sizeof(*rs));
}

int tg_restarts_register(tg_registry_t *reg, const tg_agent_cfg_t *a, const char *scope)
{
    char name[TG_LIMIT_NAME_MAX];
    snprintf(name, sizeof(name), "agent.%s.restarts", a->id);
    return tg_registry_upsert(reg, name, TG_LIMIT_RATE, scope, a->max_restarts);
}

tg_exit_verdict_t tg_restart_decide(tg_restarts_t *rs, const tg_restart_ctx_t *x, bool failed,
                                    int64_t status, bool by_signal, uint64_t now,
                                    uint64_t *backoff_ms, uint32_t *recent)
{
    const tg_agent_cfg_t *a = x->acfg;
    tg_restart_policy_t pol = a->restart_policy;
    *backoff_ms = 0;
    *recent = tg_restarts_recent(rs, a, now);
    if (tg_ainst_exec_failed(status, by_signal)) {
        tg_log_error(
            "agent '%s': its command %s cannot be run (status %" PRId64
            ": not found or not executable; fix agents[].command or PATH): not restarting it",
            a->id, a->command[0], status);
        return TG_EXIT_UNRUNNABLE;
    }
    if (pol == TG_RESTART_NO || (pol == TG_RESTART_ON_FAILURE && !failed)) {
        tg_logf(failed ? TG_LOG_WARN : TG_LOG_INFO, NULL,
                "agent '%s' %s (status %" PRId64 "); restart policy '%s': %s", a->id,
                failed ? "failed" : "exited", status, pol == TG_RESTART_NO ? "no" : "on-failure",
                x->stop_tail);
        return TG_EXIT_POLICY;
    }
    /* Crash-loop protection: at most max_restarts within the window. */
    if (*recent >= a->max_restarts) {
        tg_aproc_log_give_up(a, *recent);
        return TG_EXIT_GIVE_UP;
    }
    *backoff_ms = tg_aproc_backoff(a, *recent);
    tg_restarts_note(rs, now);
    tg_gw_t *gw = x->gw;
    if (x->reg_restarts >= 0 && *recent + 1 > gw->reg.v[x->reg_restarts].current)
        tg_registry_update(&gw->reg, x->reg_restarts, *recent + 1);
    if (gw->metrics_ok)
        tg_metrics_agent_restarted(&gw->metrics, x->idx);
    tg_audit_ev_t ev;
    tg_aproc_ev_restarting(&ev, a->id, *recent + 1, *backoff_ms);
    x->emit(x->owner, &ev);
    tg_log_warn("agent '%s' %s; restarting in %" PRIu64 " ms (attempt %u of %u)", a->id,
                by_signal ? "was killed by a signal" : failed ? "failed" : "exited", *backoff_ms,
                *recent + 1, a->max_restarts);
    return TG_EXIT_RESTART;
}

/* ---- the restart driver ------------------------------------------------ */

void tg_restarter_init(tg_restarter_t *r, uv_loop_t *loop, const tg_restarter_ops_t *ops,
                       void *owner)
{
    tg_restarts_reset(&r->rs);
    r->ops = ops;
    r->owner = owner;
    uv_timer_init(loop, &r->timer);
    r->timer.data = owner;
}

static void on_restart_timer(uv_timer_t *t)
{
    /* The timer's data is the owner's (restart.h): the restarter is the
     * struct around it. */
    tg_restarter_t *r = (tg_restarter_t *)(void *)((char *)t - offsetof(tg_restarter_t, timer));
    if (r->ops->stopped(r->owner)) {
        r->ops->settle(r->owner, TG_EXIT_STOPPED, 0);
        return;
    }
    (void)tg_restarter_start(r);
    r->ops->flush(r->owner);
}

void tg_restarter_exited(tg_restarter_t *r, bool failed, int64_t status, bool by_signal,
                         uint64_t now)
{
    const tg_restarter_ops_t *o = r->ops;
    if (o->stopped(r->owner)) {
        o->settle(r->owner, TG_EXIT_STOPPED, status);
        return;
    }
    tg_restart_ctx_t x = o->where(r->owner);
    uint64_t backoff;
    uint32_t recent;
    tg_exit_verdict_t v =
        tg_restart_decide(&r->rs, &x, failed, status, by_signal, now, &backoff, &recent);
    o->settle(r->owner, v, status);
    if (v == TG_EXIT_RESTART)
        uv_timer_start(&r->timer, on_restart_timer, backoff, 0);
}

int tg_restarter_start(tg_restarter_t *r)
{
    int rc = r->ops->spawn(r->owner);
    /* A start that fails counts like a crash: the crash-loop rules decide
     * whether to try again. */
    if (rc < 0)
        tg_restarter_exited(r, true, tg_ainst_spawn_status(rc), false, uv_now(r->timer.loop));
    return rc;
}

void tg_restarter_stop(tg_restarter_t *r)
{
    uv_timer_stop(&r->timer);
}

void tg_restarter_close(tg_restarter_t *r, uv_close_cb cb)
{
    uv_close((uv_handle_t *)&r->timer, cb);
}
