/* The restart policy of an agent instance, written once for every
 * dialect: what an instance's end means (restart after a backoff, stop by
 * the policy, give up after a crash loop, or never again because its
 * command cannot be run), logged, audited (agent.restarting), counted in
 * the metrics (restarts) and in the limit registry (agent.ID.restarts:
 * restarts within restart_window against max_restarts).
 *
 * And the restart driver around it, the one state machine of every
 * dialect: the engine embeds a tg_restarter_t per place an instance runs
 * (an MCP session, an OpenSentience agent) and tells it when the instance
 * is down; the restarter decides, arms its timer for the backoff, starts
 * the next instance when the timer fires (a start that fails counts like
 * a crash) and hands every outcome to the engine (tg_restarter_ops_t):
 * what differs is only what the engine does with it (MCP: end the
 * session, set the exit code; OpenSentience: leave the agent down or
 * failed).
 */
#ifndef TG_ROUTER_AGENT_RESTART_H
#define TG_ROUTER_AGENT_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "audit/audit.h"
#include "config/config.h"
#include "router/agent/agent_proc.h"
#include "router/gateway/gateway.h"

/* The restarts of one place an instance runs: a ring of their times. */
typedef struct tg_restarts {
    uint64_t at[TG_APROC_RESTART_LOG];
    uint32_t n;
} tg_restarts_t;

/* What an instance's end means. */
typedef enum tg_exit_verdict {
    TG_EXIT_RESTART = 0, /* restart after the backoff */
    TG_EXIT_UNRUNNABLE,  /* its command cannot be run (status 126/127): never restarted */
    TG_EXIT_POLICY,      /* the restart policy says no (no; on-failure after a clean exit) */
    TG_EXIT_GIVE_UP,     /* max_restarts within restart_window: a crash loop */
    TG_EXIT_STOPPED,     /* the place stops (restarts are off): only the restarter says it,
                          * before any decision */
} tg_exit_verdict_t;

/* Where the decision is written. */
typedef struct tg_restart_ctx {
    tg_gw_t *gw;
    const tg_agent_cfg_t *acfg;
    size_t idx;           /* the agent's metrics row */
    int reg_restarts;     /* agent.ID.restarts in the registry, -1: none */
    const char *stop_tail; /* TG_EXIT_POLICY's log: what happens now ("stopping") */
    /* agent.restarting goes out through <emit>(<owner>, ev) (the engine
     * stamps where its caller is). */
    void (*emit)(void *owner, tg_audit_ev_t *ev);
    void *owner;
} tg_restart_ctx_t;

/* Restarts of <rs> within the agent's restart_window before <now>. */
uint32_t tg_restarts_recent(const tg_restarts_t *rs, const tg_agent_cfg_t *a, uint64_t now);
/* A start counted as a restart at <now> (an on-demand start after a failure). */
void tg_restarts_note(tg_restarts_t *rs, uint64_t now);
void tg_restarts_reset(tg_restarts_t *rs);

/* Register (or, on reload, update) agent.ID.restarts of agent <a> in
 * <reg>: max_restarts per restart_window, a count over a period like a
 * rate, for each <scope> ("session": each MCP session's instance has its
 * own budget; "agent": one shared instance). The row's index, or -1
 * (out of memory). */
int tg_restarts_register(tg_registry_t *reg, const tg_agent_cfg_t *a, const char *scope);

/* The instance of <x> ended (<failed>, exit <status>, <by_signal>) at
 * <now>: the verdict, logged. TG_EXIT_RESTART notes the restart in <rs>,
 * writes agent.restarting, counts it (metrics; the registry row is only
 * raised: another place of the agent may be nearer its budget) and sets
 * *<backoff_ms>. <*recent>: the restarts within the window before this
 * one. */
tg_exit_verdict_t tg_restart_decide(tg_restarts_t *rs, const tg_restart_ctx_t *x, bool failed,
                                    int64_t status, bool by_signal, uint64_t now,
                                    uint64_t *backoff_ms, uint32_t *recent);

/* ---- the restart driver ------------------------------------------------ */

/* What the engine does for its restarter; each hook gets the restarter's
 * owner (the engine's place: its session, its agent). */
typedef struct tg_restarter_ops {
    /* Start an instance: 0, or a negative errno after logging it (as
     * tg_ainst_spawn_status reads it). */
    int (*spawn)(void *owner);
    /* Restarts are off: the place stops (MCP: its session no longer
     * runs; OpenSentience: toolgate or the agent stops). */
    bool (*stopped)(void *owner);
    /* Where a decision is written (tg_restart_ctx_t, emit and owner
     * included), asked at each one: a reload changes the agent's config
     * and rows, and may give the place another agent. */
    tg_restart_ctx_t (*where)(void *owner);
    /* The outcome of an instance's end: TG_EXIT_RESTART, its state is
     * backoff (the timer is armed right after); TG_EXIT_STOPPED, the
     * place stops; any other verdict, the instance is not restarted
     * (<status>: its exit status, or what a failed start stands for). */
    void (*settle)(void *owner, tg_exit_verdict_t v, int64_t status);
    /* After the timer's start: write what it queued. */
    void (*flush)(void *owner);
} tg_restarter_ops_t;

/* The restart state machine of one place an instance runs. */
typedef struct tg_restarter {
    tg_restarts_t rs; /* its instance's restarts */
    /* The backoff. Its data is the owner, so the engine's close callback
     * for its other handles serves this one too; the engine stops it
     * (tg_restarter_stop) and closes it with its own handles. */
    uv_timer_t timer;
    const tg_restarter_ops_t *ops;
    void *owner;
} tg_restarter_t;

/* Set <r> up on <loop> for <owner>, driven by <ops> (not copied: static storage). The
 * timer is open from here on: the engine closes it (tg_restarter_close or
 * uv_close of r->timer) before freeing the memory that holds <r>. */
void tg_restarter_init(tg_restarter_t *r, uv_loop_t *loop, const tg_restarter_ops_t *ops,
                       void *owner);

/* The owner's instance is down (it exited <failed> with <status>,
 * <by_signal>, or could not be started) at <now>: stopped, settled as
 * TG_EXIT_STOPPED; otherwise decided (tg_restart_decide), settled, and on
 * TG_EXIT_RESTART the timer armed for the backoff. */
void tg_restarter_exited(tg_restarter_t *r, bool failed, int64_t status, bool by_signal,
                         uint64_t now);

/* Start the owner's instance; a start that fails counts like a crash
 * (tg_restarter_exited, its status per tg_ainst_spawn_status). What the
 * spawn hook returned. */
int tg_restarter_start(tg_restarter_t *r);

/* No restart pending any more (a shutdown, a reload's switch). */
void tg_restarter_stop(tg_restarter_t *r);

/* Teardown: close the timer (a pending restart is dropped); <cb> gets it
 * with the owner as its data. */
void tg_restarter_close(tg_restarter_t *r, uv_close_cb cb);

#endif
