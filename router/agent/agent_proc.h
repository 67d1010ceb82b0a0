/* Agent processes: the pieces both serve engines use to start and watch an
 * agent instance, under the lifecycle of instance.c. The MCP engine runs
 * one instance per caller session, the OpenSentience engine one shared
 * instance per agent;
 * their state machines differ (what a restart replays, who is told), the
 * process plumbing does not:
 *
 *  - the instance core (tg_aproc_t): the child, its pipes and timers,
 *    start through the exec shim, exit, linger, close;
 *  - the serve-mode environment (env.pass, env.set, an engine's extra);
 *  - the containment instance (tg_contain_create, with the loopback rule);
 *  - the once-a-second sample and verdict, the exit-time OOM check;
 *  - the stderr relay: line splitting at stderr_line_max and the
 *    per-second byte budget;
 *  - restart arithmetic (restarts within the window, backoff);
 *  - the agent.started / agent.exited audit events.
 *
 * Every function logs exactly what both engines logged before, so the
 * texts tests assert stay one. The line splitter and the budget are pure
 * (no libuv, no clock): they take bytes and a now_ms.
 */
#ifndef TG_ROUTER_AGENT_PROC_H
#define TG_ROUTER_AGENT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "audit/audit.h"
#include "config/config.h"
#include "limits/contain.h"
#include "router/gateway/io.h"
#include "router/gateway/gateway.h"

/* fixed internal bound: kernel pipe buffer asked for (F_SETPIPE_SZ) */
#define TG_APROC_PIPE_BYTES (1 << 20)
/* fixed internal bound: wait for the agent's stdout EOF after its exit */
#define TG_APROC_LINGER_MS   200
#define TG_APROC_RESTART_LOG 64    /* fixed internal bound: restart timestamps kept */
#define TG_APROC_MONITOR_MS  1000  /* fixed internal bound: containment sampling period */
#define TG_APROC_ERR_SCRATCH 16384 /* fixed internal bound: stderr bytes read per wakeup */

/* ---- environment ------------------------------------------------------ */

/* The environment of a serve-mode agent <a>: each env.pass name set in
 * toolgate's own environment, then the env.set entries, then, when
 * <extra_name> is not NULL, "<extra_name>=<extra_value>" (an env.pass or
 * env.set entry of that name is left out: the extra one wins).
 * NULL-terminated, heap (free with tg_aproc_env_free); NULL when out of
 * memory. */
char **tg_aproc_env_build(const tg_agent_cfg_t *a, const char *extra_name, const char *extra_value);
/* Wipe (the extra may be a secret) and free <env>; NULL is a no-op. */
void tg_aproc_env_free(char **env);

/* ---- containment and spawn -------------------------------------------- */

/* Create the containment instance of agent <a> in <gw>'s context into
 * *<ci>. 0, or -1 after logging ("cannot start agent ...") when
 * containment.mode is required and network "loopback" cannot be enforced,
 * or the instance cannot be made (*<ci> NULL then). */
int tg_aproc_contain_create(tg_gw_t *gw, const tg_agent_cfg_t *a, tg_contain_inst_t **ci);

/* What the monitor remembers of one instance. */
typedef struct tg_aproc_watch {
    tg_contain_sample_t last;
    bool have_last;
    tg_verdict_t verdict; /* why toolgate killed it for a resource, kind OK otherwise */
} tg_aproc_watch_t;

/* The line being assembled from an agent's stderr. buf holds max bytes,
 * out the line as relayed (TG_LOG_RELAY_CAP(max): time, level,
 * component, escaped text cut to max, mark, json escaping); both
 * malloc'd by tg_aproc_lines_init (buf NULL when that failed: bytes are
 * then dropped); owned, freed by tg_aproc_lines_free. */
typedef struct tg_aproc_lines {
    char *buf, *out;
    size_t len, max;
    bool trunc;
} tg_aproc_lines_t;

/* One agent process as both engines run it: the child, its three pipes,
 * the exit linger and monitor timers, its containment instance. Embedded
 * in an engine's instance, which it points every handle's data at; the
 * engine frees that instance once tg_aproc_handle_closed says the last
 * handle closed. */
typedef struct tg_aproc {
    uv_process_t proc;
    uv_pipe_t pin, pout, perr;
    uv_timer_t linger, monitor;
    int open_handles; /* of the six above */
    int pid;
    bool proc_init; /* uv_spawn was called: the process handle must be closed */
    bool exited, out_eof, gone, stdin_closed, killed;
    bool supervised; /* pid is the shim's supervisor (no cgroup holds the tree) */
    int64_t exit_status;
    int term_signal;
    tg_in_t rd;            /* the agent's stdout */
    tg_out_t wr;           /* toward its stdin */
    tg_contain_inst_t *ci; /* NULL: uncontained */
    tg_aproc_watch_t watch;
    tg_aproc_lines_t err; /* stderr relay; its max is stderr_line_max when it started */
} tg_aproc_t;

/* Set up <p> (zeroed) on <gw>'s loop and pool for agent <a>: handles
 * with data <data>, buffers, the stderr line buffer. Writes toward the
 * agent call <on_drain>(<wr_ctx>) when drained; a write error is left to
 * the exit that follows (EPIPE: the agent closed its stdin). */
void tg_aproc_init(tg_aproc_t *p, tg_gw_t *gw, const tg_agent_cfg_t *a, void *data, void *wr_ctx,
                   void (*on_drain)(tg_out_t *o, void *ctx));
/* Start <p> (after tg_aproc_init and, when contained, creating p->ci):
 * the pipes, then the spawn of agent <a> through `toolgate __shim` when
 * contained (it places the agent before its first instruction), otherwise
 * the command itself in its own process group. <envp> NULL keeps
 * toolgate's environment. On success: p->pid set, what containment
 * enforces as JSON in <enforced> ("" when none), <on_monitor> running
 * every TG_APROC_MONITOR_MS when contained, p->wr writing to its stdin.
 * 0, or a negative errno after logging "cannot start agent ..." (<hint>
 * appended to a spawn error, "" for none); p->proc_init tells whether
 * uv_spawn itself failed. The caller then marks it gone and closes it. */
int tg_aproc_start(tg_aproc_t *p, uv_loop_t *loop, const tg_agent_cfg_t *a, char **envp,
                   uv_exit_cb exit_cb, const char *hint, uv_timer_cb on_monitor, char *enforced,
                   size_t cap);
/* Close every handle of <p> with <cb> (a never-spawned process handle is
 * not a libuv handle: it counts as closed). */
void tg_aproc_close(tg_aproc_t *p, uv_close_cb cb);
/* One of <p>'s handles closed. true when it was the last: its buffers and
 * containment instance (leftovers killed, cgroups removed) are freed, and
 * the caller frees the memory holding <p>. */
bool tg_aproc_handle_closed(tg_aproc_t *p);
/* The agent's stdin: flush what is queued, then close it (handle closed
 * with <cb>); nothing more goes to it. */
void tg_aproc_close_stdin(tg_aproc_t *p, uv_close_cb cb);
/* Signal <p>'s process group and the process itself with <sig>. A
 * supervised agent's SIGKILL first kills its whole tree (tg_contain_kill),
 * while the supervisor still holds it. */
void tg_aproc_signal(const tg_aproc_t *p, int sig);
/* The process exited (<status>, <sig>): recorded; a kernel OOM kill
 * since the last sample is judged now (true when found: p->killed and
 * p->watch.verdict set); the rest of its process group is killed. */
bool tg_aproc_on_exit(tg_aproc_t *p, int64_t status, int sig);
/* true when <p> exited and its stdout reached EOF (the caller runs its
 * exit handling now); when stdout is still open, waits for it at most
 * TG_APROC_LINGER_MS (then <on_linger>). false when not yet, or already
 * gone. */
bool tg_aproc_ready_gone(tg_aproc_t *p, uv_timer_cb on_linger);

/* ---- monitor ---------------------------------------------------------- */

/* One monitor tick of the contained instance <ci>: sample it into *<cur>.
 * false when there is no sample (<ci> NULL, <exited>, or the read
 * failed). What it adds to its agent's figures is the instance's
 * (tg_ainst_t, instance.c). */
bool tg_aproc_sample(tg_contain_inst_t *ci, bool exited, tg_contain_sample_t *cur);
/* Judge sample <cur> against <w>'s last one. true, after logging that
 * agent <name> broke a limit, when it broke one for the first time
 * (w->verdict says which): the caller kills the instance. */
bool tg_aproc_judge(tg_aproc_watch_t *w, tg_contain_inst_t *ci, const char *name,
                    const tg_contain_sample_t *cur);
/* At exit: a kernel OOM kill between two samples shows in the counters
 * now. Keeps the final sample (its peak) in <w>; true when the verdict
 * became TG_VERDICT_OOM (w->verdict set). */
bool tg_aproc_exit_oom(tg_aproc_watch_t *w, tg_contain_inst_t *ci);

/* ---- stderr relay ----------------------------------------------------- */

/* Called once per complete line (without its '\n'); <truncated> when the
 * line was cut at the line limit. */
typedef void (*tg_aproc_line_fn)(void *ctx, const char *p, size_t len, bool truncated);

/* Lines of at most <max> bytes (longer ones are cut and flagged). */
void tg_aproc_lines_init(tg_aproc_lines_t *l, size_t max);
void tg_aproc_lines_free(tg_aproc_lines_t *l);
/* Feed <n> bytes at <p>: <fn>(<ctx>, ...) per line completed. */
void tg_aproc_lines_feed(tg_aproc_lines_t *l, const char *p, size_t n, tg_aproc_line_fn fn,
                         void *ctx);
/* End of stream: a pending partial line goes to <fn> as a line. */
void tg_aproc_lines_flush(tg_aproc_lines_t *l, tg_aproc_line_fn fn, void *ctx);

/* The per-second byte budget of relayed stderr, and what it dropped. */
typedef struct tg_aproc_errbudget {
    uint64_t window_start, window_bytes; /* the current one-second window */
    uint64_t dropped;                    /* bytes not relayed (over budget, or the log dropped) */
} tg_aproc_errbudget_t;

/* Charge a line of <len> bytes (+1 for its '\n', +12 for " [truncated]")
 * at <now_ms> against <per_sec>. true when it fits (window_bytes counts
 * it), false when it is dropped (counted in dropped). The relay charges
 * the line as written (prefix and escapes included, <truncated> false). */
bool tg_aproc_err_charge(tg_aproc_errbudget_t *b, uint64_t now_ms, uint64_t per_sec, size_t len,
                         bool truncated);
/* Format line <p>/<len> of agent <who> into l->out as relayed
 * (tg_log_relay_fmt in the process's log format: component "agent=ID",
 * escaped, at most l->max bytes of text). Returns its length, '\n' included. */
size_t tg_aproc_err_format(tg_aproc_lines_t *l, const char *who, const char *p, size_t len,
                           bool truncated);
/* Write a charged, formatted line <p>/<len> to toolgate's log in one
 * write (bytes the log drops count in <b>->dropped). */
void tg_aproc_err_write(tg_aproc_errbudget_t *b, const char *p, size_t len);
/* uv_alloc_cb for stderr pipes: one static scratch buffer (lines are
 * copied out within the read callback). */
void tg_aproc_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
/* The body of a stderr uv_read_cb for <p>: <n> bytes of <buf> split into
 * lines for <fn>(<ctx>, ...); at EOF or error, reading stops and a
 * pending partial line goes out. */
void tg_aproc_err_read(tg_aproc_t *p, uv_stream_t *s, ssize_t n, const uv_buf_t *buf,
                       tg_aproc_line_fn fn, void *ctx);

/* ---- restarts --------------------------------------------------------- */

/* Of the <n> restarts logged in <at> (a ring of TG_APROC_RESTART_LOG),
 * those within <window_ms> before <now>. */
uint32_t tg_aproc_recent(const uint64_t *at, uint32_t n, uint64_t now, uint64_t window_ms);
/* Log a restart at <now> in the ring <at> of <*n>. */
void tg_aproc_restart_note(uint64_t *at, uint32_t *n, uint64_t now);
/* The wait before restart number <recent> + 1 of agent <a>:
 * backoff_initial doubled per recent restart, at most backoff_max. */
uint64_t tg_aproc_backoff(const tg_agent_cfg_t *a, uint32_t recent);
/* Log that agent <a> failed <recent> + 1 times within its window. */
void tg_aproc_log_give_up(const tg_agent_cfg_t *a, uint32_t recent);

/* ---- audit ------------------------------------------------------------ */

/* agent.started of agent <name>, <pid>, restart <attempt>; <enforced>
 * JSON or "" (left out). <ev> borrows the strings. */
void tg_aproc_ev_started(tg_audit_ev_t *ev, const char *name, int pid, uint32_t attempt,
                         const char *enforced);
/* agent.exited of agent <name>, <pid>: exit code or signal, and a reason
 * (killed by toolgate, crashed on a signal, failed, exited). */
void tg_aproc_ev_exited(tg_audit_ev_t *ev, const char *name, int pid, bool killed, int term_signal,
                        int64_t exit_status);
/* agent.restarting of agent <name>: <attempt>, after <backoff_ms>. */
void tg_aproc_ev_restarting(tg_audit_ev_t *ev, const char *name, uint32_t attempt,
                            uint64_t backoff_ms);

#endif
