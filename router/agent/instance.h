/* An agent instance: one running agent process and everything toolgate
 * does to it that does not depend on the dialect or on who its callers
 * are — the memory pre-flight, containment, start through the exec shim,
 * the once-a-second sample and verdict (registry rows, kill on a hard
 * limit), the stderr relay with its byte budget, kills with their audit
 * event, the exit (OOM seen at exit, agent.exited with the peak memory,
 * the peak recorded for later pre-flights) and the close.
 *
 * What happens around it is the engine's, through tg_ainst_ops_t: how its
 * stdout is framed, what its calls are told when it is gone, whether it is
 * restarted (the MCP engine runs one instance per caller session, the
 * OpenSentience engine one shared instance per agent).
 *
 * Ownership: the engine allocates the instance (usually as the first
 * member of its own struct), calls tg_ainst_init then tg_ainst_spawn, and
 * frees it in ops->closed, after the last handle closed. Nothing here
 * keeps a pointer into an agent config across callbacks but through
 * <*acfg>, which the engine may move to a reloaded config at any time.
 */
#ifndef TG_ROUTER_AGENT_INSTANCE_H
#define TG_ROUTER_AGENT_INSTANCE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "router/agent/agent_proc.h"
#include "router/gateway/gateway.h"

typedef struct tg_ainst tg_ainst_t;

typedef struct tg_ainst_ops {
    /* The agent's stdout: the engine frames it (handle data is the instance). */
    uv_alloc_cb out_alloc;
    uv_read_cb out_read;
    /* Its stdin's write queue drained (ctx is the owner). */
    void (*out_drain)(tg_out_t *o, void *ctx);
    /* It exited and its stdout ended (or lingered too long): agent.exited
     * is written and the instance is closing. The engine answers the
     * instance's calls and applies its restart policy; it must not use
     * <in> once this returns but to compare pointers. */
    void (*gone)(tg_ainst_t *in);
    /* Its last handle closed: the memory is the engine's to free. */
    void (*closed)(tg_ainst_t *in);
    /* Called at the end of every libuv callback the instance runs, so
     * what it wrote goes out (the engine's flush). */
    void (*flush)(void *owner);
    /* Optional (NULL: none): add what the owner knows to one of the
     * instance's audit events (the MCP engine: where its caller is). */
    void (*stamp)(void *owner, tg_audit_ev_t *ev);
} tg_ainst_ops_t;

/* The registry rows of the agent an instance belongs to (-1: none), owned
 * by the agent. */
typedef struct tg_agent_rows {
    int memory, disk, pids, stderr_bytes;
} tg_agent_rows_t;

/* Register (or, on reload, update) agent <a>'s instance rows in <reg>:
 * agent.ID.stderr_bytes_per_second, .memory_bytes, .disk_bytes (with a
 * workspace only) and .pids. 0 or -ENOMEM. */
int tg_agent_rows_register(tg_agent_rows_t *rows, tg_registry_t *reg, const tg_agent_cfg_t *a);

/* What one instance adds to its agent's tg_agent_usage_t: its latest
 * sample, taken back when it is gone. */
typedef struct tg_ainst_share {
    bool live; /* counted in the agent's <live> */
    uint64_t memory, disk, pids, cpu_us;
} tg_ainst_share_t;

struct tg_ainst {
    tg_aproc_t p; /* the process, its pipes, containment and watch */
    tg_gw_t *gw;
    tg_agent_cfg_t *const *acfg; /* the agent's current config, through the agent */
    size_t idx;                  /* the agent's metrics row */
    const tg_agent_rows_t *rows;
    tg_aproc_errbudget_t *err;   /* the stderr budget charged (per session or per agent) */
    uint64_t *err_reported;      /* bytes of err->dropped already logged */
    const tg_ainst_ops_t *ops;
    void *owner;                 /* the engine's (its session or agent) */
    bool kill_audited;           /* agent.killed written for this instance */
    bool stopping;               /* a stop step ran: its stdout may end before it exits */
    const char *kill_reason;     /* the first reason toolgate signalled it for, or NULL */
    tg_ainst_share_t share;      /* its part of the agent's usage figures */
};

/* How long an instance that closed its stdout may live on before it is
 * killed: no answer can come from it, so its calls must not wait out
 * their deadlines. */
#define TG_AINST_MUTE_MS 500 /* fixed internal bound */

/* Set up <in> (zeroed by the caller) for agent <*acfg> of <gw>. */
void tg_ainst_init(tg_ainst_t *in, tg_gw_t *gw, tg_agent_cfg_t *const *acfg, size_t idx,
                   const tg_agent_rows_t *rows, tg_aproc_errbudget_t *err, uint64_t *err_reported,
                   const tg_ainst_ops_t *ops, void *owner);

/* How to start it. */
typedef struct tg_ainst_spawn {
    bool inherit_env;       /* wrap: toolgate's own environment, unchanged */
    const char *env_name;   /* one more variable (after env.pass and env.set), or NULL */
    const char *env_value;
    const char *hint;       /* appended to a failed exec's log line */
    uint32_t attempt;       /* restarts so far, for agent.started */
} tg_ainst_spawn_t;

/* Start <in>: the pre-flight, containment, the environment, the process,
 * reading its stdout (ops) and stderr (relayed), agent.started. 0, or a
 * negative errno after logging, the instance then closing (ops->closed
 * follows): -EAGAIN the pre-flight refused, -EPERM containment could not
 * be set up, -ENOMEM, or tg_aproc_start's error (p.proc_init tells that
 * the command itself failed). */
int tg_ainst_spawn(tg_ainst_t *in, const tg_ainst_spawn_t *how);

/* Where an engine is in stopping its instance: running, draining the
 * calls in flight, then the stop steps (stdin closed, SIGTERM, SIGKILL)
 * kill_grace apart, then done. */
typedef enum tg_phase {
    TG_P_RUN = 0,
    TG_P_DRAIN,
    TG_P_STOP_STDIN,
    TG_P_STOP_TERM,
    TG_P_STOP_KILL,
    TG_P_DONE,
} tg_phase_t;

/* The next stop step of <in> (NULL, or gone: none is left; false) from
 * *<phase> (DRAIN, STOP_STDIN or STOP_TERM; any other: false): close its
 * stdin, send SIGTERM, then SIGKILL (logged, <why> audited). True when a
 * step was taken: the engine arms its phase timer for kill_grace. */
bool tg_ainst_stop_step(tg_ainst_t *in, tg_phase_t *phase, const char *why);

/* Send <sig>; the first SIGKILL writes agent.killed with <reason>; every
 * SIGKILL marks the instance killed. Nothing once it is gone or has exited. */
void tg_ainst_kill(tg_ainst_t *in, int sig, const char *reason);
/* The same for an engine's instance pointer <in> (NULL: none runs). */
#define TG_AINST_KILL(in, sig, reason) \
    ((in) != NULL ? tg_ainst_kill(&(in)->a, (sig), (reason)) : (void)0)

/* Its stdout ended (the engine's reader saw EOF or an error, and stopped
 * reading): gone once the process has exited too. Outside a stop step, a
 * process still alive TG_AINST_MUTE_MS later is killed ("stdout_closed"):
 * the instance has failed. Until then the engine sends it nothing
 * (tg_ainst_writable). */
void tg_ainst_out_eof(tg_ainst_t *in);

/* An instance that ended with <status> (not by a signal) could not run
 * its command at all — 127: not found, 126: not executable (what the
 * shim and shells exit with) — and restarting it cannot help. */
static inline bool tg_ainst_exec_failed(int64_t status, bool by_signal)
{
    return !by_signal && (status == 126 || status == 127);
}

/* The exit status a spawn error <rc> stands for: 127 when the command
 * cannot be executed (tg_ainst_exec_failed), 1 for any other failure
 * (out of memory, the pre-flight, containment), which a restart may
 * mend. */
static inline int64_t tg_ainst_spawn_status(int rc)
{
    return rc == -ENOENT || rc == -EACCES || rc == -ENOEXEC || rc == -ENOTDIR ? 127 : 1;
}

/* Calls and messages may be written to <in> (NULL: none runs): not gone,
 * its stdin open, its stdout not ended. */
static inline bool tg_ainst_writable(const tg_ainst_t *in)
{
    return in != NULL && !in->p.gone && !in->p.stdin_closed && !in->p.out_eof &&
           in->p.wr.stream != NULL;
}

/* Close its stdin (a stop step); <in> must not be gone. */
void tg_ainst_close_stdin(tg_ainst_t *in);

/* Log the stderr bytes agent <a> dropped from budget <err> since the last
 * report (*<reported> bytes), if any. */
void tg_agent_report_drops(const tg_agent_cfg_t *a, const tg_aproc_errbudget_t *err,
                           uint64_t *reported);

/* Pre-flight (containment.min_free_memory) for agent <a>: 0 to go ahead,
 * or -1 after logging and auditing agent.unhealthy preflight_memory:
 * MemAvailable is below min_free_memory + the P95 of the agent's recorded
 * peaks. */
int tg_ainst_preflight(tg_gw_t *gw, const tg_agent_cfg_t *a);

/* The live instances of agent <idx> of <gw> (every config generation):
 * 0 when none runs, whatever the last one's engine said. */
static inline uint32_t tg_agent_live(const tg_gw_t *gw, size_t idx)
{
    return idx < gw->nusage ? gw->usage[idx].live : 0;
}

/* The exit status an instance's end means for a restart policy. */
bool tg_ainst_failed(const tg_ainst_t *in);
int64_t tg_ainst_status(const tg_ainst_t *in);

#endif
