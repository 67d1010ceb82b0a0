/* Sessions: one caller connected to one agent instance, with the limits of
 * the agent shared by all sessions that use it. The engine of both
 * `toolgate wrap` (one stdio session) and `toolgate serve` (a session per
 * accepted connection). See session.c for the invariants.
 *
 * Ownership: the gateway (tg_gw_t) is owned by its runner (wrap.c,
 * serve.c) and outlives every agent and session; agents are freed by the
 * runner after the loop ends; a session frees itself once its handles have
 * closed, then calls gw->on_session_end.
 */
#ifndef TG_ROUTER_SESSION_H
#define TG_ROUTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "audit/audit.h"
#include "config/config.h"
#include "limits/conc.h"
#include "limits/contain.h"
#include "limits/gcra.h"
#include "limits/registry.h"
#include "router/admin/admin.h"
#include "router/front/io.h"
#include "router/admin/metrics.h"

typedef struct tg_wrap tg_sess_t;
typedef struct tg_agent tg_agent_t;

/* One caller's own limits (callers[].execution_limits), shared by all of
 * its connections; owned by the runner. */
typedef struct tg_caller_lim {
    const char *name;
    tg_gcra_t rate;
    tg_rate_t rate_cfg;
    bool has_rate;
    tg_conc_t conc;
    bool has_conc;
    char path_rate[256], path_conc[256];
    int reg_rate, reg_conc; /* registry entries (-1: none); the runner registers them */
} tg_caller_lim_t;

/* From callers[] entry <cc> (which must outlive <cl>). 0 or -EINVAL. */
int tg_caller_lim_init(tg_caller_lim_t *cl, const tg_caller_cfg_t *cc);

typedef struct tg_gw {
    uv_loop_t *loop;
    tg_config_t *cfg;
    tg_audit_t *audit;
    tg_registry_t reg;
    tg_pool_t pool;
    int reg_frame_in, reg_wq_caller, reg_audit;
    int reg_store_pending; /* store.pending: calls waiting for the redis store; -1 without one */
    char path_frame[64];
    uv_timer_t tick_timer;
    struct tg_store *store; /* the shared rate store (redis), or NULL */
    struct tg_store *lease; /* lease view over it, when an agent uses shared_mode lease */
    tg_contain_t contain; /* containment context (detected once at open) */
    char peaks_path[4096]; /* pre-flight state file of peak memory, "" when none */
    tg_metrics_t metrics; /* counters for /metrics, /agents and the page */
    bool metrics_ok;
    tg_admin_t *admin;    /* the admin HTTP endpoint (router.admin / --admin), or NULL */
    bool contain_ok;      /* tg_contain_init succeeded: instances are placed */
    tg_sess_t *sessions; /* live sessions, a list linked through the sessions */
    tg_agent_t *retired; /* agents replaced by a reload, freed once unused */
    bool tearing_down;
    uint32_t nsessions;
    bool wrap_mode;      /* the single session is the router (router.stopping) */
    int exit_code;       /* wrap: the process status once the session ended */
    void (*on_session_end)(struct tg_gw *gw, tg_sess_t *s);
    void *data;          /* the runner's */
} tg_gw_t;

/* Open the audit pipe, registry and buffers on <loop> (gw zeroed by the
 * caller). 0, or an exit status (2) after logging what was wrong. */
int tg_gw_open(tg_gw_t *gw, uv_loop_t *loop, tg_config_t *cfg);
/* Close the gateway's own handles (so the loop can end). */
void tg_gw_stop(tg_gw_t *gw);


/* The shared state of agent <acfg>, for up to <max_sessions> sessions at
 * once. NULL after logging on failure. */
tg_agent_t *tg_agent_new(tg_gw_t *gw, tg_agent_cfg_t *acfg, uint32_t max_sessions);
void tg_agent_close_timers(tg_agent_t *ag);
void tg_agent_free(tg_agent_t *ag);

/* Reload. Apply agent config <acfg> (same id, same command and resources:
 * only limits changed) to <ag> in place: buckets and slots of unchanged
 * limits keep their state, inflight calls keep their slots. -EAGAIN when
 * the change needs a successor instead (tools added, removed or reordered,
 * the shared store choice changed, or the call table would have to grow);
 * -EINVAL/-ENOMEM otherwise. On failure <ag> is unchanged. */
int tg_agent_reconfigure(tg_agent_t *ag, tg_agent_cfg_t *acfg);
/* A new agent for <acfg> taking <old>'s place (metrics row, registry rows,
 * instance budget), with the state of its unchanged rate buckets. NULL
 * after logging. */
tg_agent_t *tg_agent_successor(tg_agent_t *old, tg_agent_cfg_t *acfg);
/* <ag> was replaced: free it once no session or store answer refers to it
 * (its sessions are drained by the runner), then call <on_free>(<arg>)
 * (NULL: none); at the latest in tg_gw_teardown. */
void tg_agent_retire(tg_agent_t *ag, void (*on_free)(void *arg), void *arg);
/* The agent config <ag> runs with. */
const tg_agent_cfg_t *tg_agent_cfg(const tg_agent_t *ag);
const char *tg_agent_id(const tg_agent_t *ag);
/* serve: <running> instances of <ag> run now (held against max_instances
 * in the limit registry as agent.<id>.instances; a no-op in wrap). */
void tg_agent_instances(tg_agent_t *ag, uint32_t running);

/* A session on toolgate's own stdin/stdout (wrap). NULL after logging. */
tg_sess_t *tg_sess_stdio(tg_gw_t *gw, tg_agent_t *ag);
/* A session on an accepted connection <conn> (heap; the session takes it
 * and frees it) for the caller named <caller> with limits <climits> (NULL:
 * none beyond the agent's). */
tg_sess_t *tg_sess_conn(tg_gw_t *gw, tg_agent_t *ag, uv_pipe_t *conn, const char *caller,
                        tg_caller_lim_t *climits);
tg_agent_t *tg_sess_agent(const tg_sess_t *s);
/* The next live session of the gateway (gw->sessions starts the list). */
tg_sess_t *tg_sess_next(const tg_sess_t *s);
/* Start its agent instance and read the caller. 0, or -1 when the agent
 * could not start (the session is then ending). */
int tg_sess_start(tg_sess_t *s);
/* Stop taking calls, drain within kill_grace, stop the agent. */
void tg_sess_shutdown(tg_sess_t *s, const char *why);
bool tg_sess_stopping(const tg_sess_t *s);
/* SIGKILL the session's agent tree now (a second Ctrl-C). */
void tg_sess_kill(tg_sess_t *s);

/* After the loop ended: write out and close audit, close every handle
 * still open on <loop> and run their callbacks, free the gateway's
 * buffers, close the loop. Agents are freed by the caller afterwards. */
void tg_gw_teardown(tg_gw_t *gw, uv_loop_t *loop);

#endif
