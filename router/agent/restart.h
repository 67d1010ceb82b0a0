/* The restart policy of an agent instance, written once for every
 * dialect: what an instance's end means (restart after a backoff, stop by
 * the policy, give up after a crash loop, or never again because its
 * command cannot be run), logged, audited (agent.restarting), counted in
 * the metrics (restarts) and in the limit registry (agent.ID.restarts:
 * restarts within restart_window against max_restarts).
 *
 * The engine keeps a tg_restarts_t per place an instance runs (an MCP
 * session, an OpenSentience agent), calls tg_restart_decide when its
 * instance is down, and acts on the verdict: arm its restart timer for
 * the backoff, or stop (MCP: end the session; OpenSentience: leave the
 * agent down or failed).
 */
#ifndef TG_ROUTER_AGENT_RESTART_H
#define TG_ROUTER_AGENT_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
