/* The gateway: what one toolgate process has once, whatever its dialects
 * and fronts — the loop, the limit registry (and its warning events into
 * audit and the log), the audit pipe, the shared store, containment, the
 * metrics and the admin endpoint — and its open, stop and teardown.
 *
 * Ownership: the runner (front/wrap.c, front/serve.c) owns the tg_gw_t,
 * zeroes it, opens it before any agent and tears it down after the loop
 * ended; it outlives every agent, session and connection. It holds no
 * dialect's state: the engines hook into its tick and teardown
 * (tg_gw_hook_add) and the runner reaches them through the dialect ops
 * table (agent/dialect.h).
 */
#ifndef TG_ROUTER_GATEWAY_H
#define TG_ROUTER_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "audit/audit.h"
#include "config/config.h"
#include "limits/conc.h"
#include "limits/contain.h"
#include "limits/gcra.h"
#include "limits/registry.h"
#include "router/gateway/metrics.h"
#include "router/gateway/io.h"

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

/* What the live instances of one agent use together, whichever config
 * generation they run (a reload leaves the old one's sessions running
 * beside the new one's): each instance adds its latest sample and takes
 * it back when it is gone, so the agent's registry rows and /metrics
 * figures are these sums, never the figure of whichever instance was
 * sampled last, and they fall to 0 once no instance is left. One per
 * agent (config index), owned by the gateway. */
typedef struct tg_agent_usage {
    uint32_t live;               /* instances started and not yet gone */
    uint64_t memory, disk, pids; /* bytes, bytes, tasks: sums of their latest samples */
    uint64_t cpu_us;             /* CPU of every instance so far, the gone included (a counter) */
    uint64_t peak;               /* the highest memory peak an instance reached (a high water) */
    bool sampled;                /* some instance was sampled */
} tg_agent_usage_t;

#define TG_GW_HOOKS_MAX 4 /* fixed internal bound: engines hooked into the tick */

typedef struct tg_gw {
    uv_loop_t *loop;
    tg_config_t *cfg;
    tg_audit_t *audit;
    tg_registry_t reg;
    tg_pool_t pool;
    int reg_frame_in, reg_wq_caller, reg_audit;
    /* caller.frame_timeout_ms (serve only; -1 in wrap): how long the latest
     * frame that came in pieces took from its first byte to its last,
     * against router.frame_timeout (a cut connection reads as the cap). */
    int reg_frame_time;
    int reg_store_pending; /* store.pending: calls waiting for the redis store; -1 without one */
    char path_frame[64];
    uv_timer_t tick_timer;
    struct tg_store *store; /* the shared rate store (redis), or NULL */
    struct tg_store *lease; /* lease view over it, when an agent uses shared_mode lease */
    tg_contain_t contain; /* containment context (detected once at open) */
    char peaks_path[4096]; /* pre-flight state file of peak memory, "" when none */
    tg_metrics_t metrics; /* counters for /metrics, /agents and the page */
    bool metrics_ok;
    tg_agent_usage_t *usage; /* per agent (config index): <nusage> of them, owned */
    size_t nusage;
    /* The admin HTTP endpoint (router.admin / --admin), or NULL: opened
     * by the runner (tg_admin_open_gw, admin/admin.h), closed by
     * tg_gw_stop through <admin_close>. */
    struct tg_admin *admin;
    void (*admin_close)(struct tg_admin *a);
    bool contain_ok;      /* tg_contain_init succeeded: instances are placed */
    bool tearing_down;
    /* The runner is `toolgate wrap`: one caller on toolgate's own stdio,
     * whose end is the run's (no listener, no instances row, the agent
     * inherits toolgate's environment). */
    bool wrap_mode;
    /* wrap's --allow-tool and --deny-tool globs (borrowed from argv), the
     * policy when the config has none (router/auth/policy.h). */
    const char *const *allow_tools, *const *deny_tools;
    size_t nallow_tools, ndeny_tools;
    /* The live router keys sessions read (serve updates them on reload;
     * gw->cfg stays the first config). */
    uint64_t handshake_timeout_ms;    /* router.handshake_timeout */
    uint64_t reload_drain_timeout_ms; /* router.reload_drain_timeout */
    /* The engines' parts of the tick and of teardown (tg_gw_hook_add). */
    struct tg_gw_hook {
        void (*tick)(void *arg, uint64_t now); /* once a second, or NULL */
        void (*reap)(void *arg);               /* after the loop ended, or NULL */
        void *arg;
    } hooks[TG_GW_HOOKS_MAX];
    size_t nhooks;
    /* The runner's counters into <metrics> before the admin endpoint
     * renders them (NULL: none; serve: its HTTP listeners'). */
    void (*metrics_refresh)(struct tg_gw *gw);
    void *data;          /* the runner's */
    /* Connections ended (sessions, opensentience callers, refused ones):
     * the tick gives the allocator's free memory back once they stop
     * (tg_gw_conn_ended, on_tick). */
    uint64_t conns_ended, trim_seen;
    uint64_t trim_at; /* loop time of the last trim (or of the churn's start) */
    bool trim_due;
} tg_gw_t;

/* A caller connection of <gw> ended (its memory freed). */
static inline void tg_gw_conn_ended(tg_gw_t *gw)
{
    gw->conns_ended++;
}

/* The loop's time brought up to date, then read (ms, monotonic): what a
 * call's arrival, its rate decision and its duration are measured with.
 * The loop reads its clock once per pass, and under load a pass that
 * reads many callers can last tens of ms: the cached value would date
 * those later in the pass early, so the durations the audit writes (and
 * an operator checking admissions against them) would disagree with the
 * time the decisions were made at. One clock_gettime (vDSO). */
static inline uint64_t tg_gw_now(tg_gw_t *gw)
{
    uv_update_time(gw->loop);
    return uv_now(gw->loop);
}

/* Open the audit pipe, registry, store, containment, admin endpoint and
 * buffers on <loop> (gw zeroed by the caller). 0, or -1 with <err> filled
 * (the runner logs it and exits 2); what is only degraded (containment
 * unavailable in best_effort mode) is logged here and not an error. */
int tg_gw_open(tg_gw_t *gw, uv_loop_t *loop, tg_config_t *cfg, tg_err_t *err);
/* An engine's part of the tick (<tick>, once a second) and of teardown
 * (<reap>, after the loop ended); either may be NULL. Once per engine:
 * 0, or -ENOSPC past TG_GW_HOOKS_MAX. */
int tg_gw_hook_add(tg_gw_t *gw, void (*tick)(void *arg, uint64_t now), void (*reap)(void *arg),
                   void *arg);

/* The store's pending calls into the registry (the tick and the admin
 * endpoint's refresh). */
void tg_gw_store_sample(tg_gw_t *gw);
/* Close the gateway's own handles (so the loop can end). */
void tg_gw_stop(tg_gw_t *gw);
/* After the loop ended: write out and close audit, close every handle
 * still open on <loop> and run their callbacks, free the gateway's
 * buffers, close the loop. Agents are freed by the caller afterwards. */
void tg_gw_teardown(tg_gw_t *gw, uv_loop_t *loop);

/* uv_close <h> unless it is closing, closed or was never initialised. */
void tg_handle_close(uv_handle_t *h);

#endif
