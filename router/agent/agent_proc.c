/* Agent processes shared by the two serve engines. See agent_proc.h. */
#define _GNU_SOURCE /* pipe2 */
#include "router/agent/agent_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/units.h"
#include "limits/registry.h"
#include "router/gateway/contain_cfg.h"
#include "router/gateway/io.h"
#include "router/gateway/log.h"
#include "router/gateway/metrics.h"
#include "router/agent/shim.h"

/* ---- environment ------------------------------------------------------ */

static bool is_extra(const char *entry, const char *name, size_t nl, bool assignment)
{
    if (name == NULL)
        return false;
    if (!assignment)
        return strcmp(entry, name) == 0;
    return strncmp(entry, name, nl) == 0 && entry[nl] == '=';
}

char **tg_aproc_env_build(const tg_agent_cfg_t *a, const char *extra_name, const char *extra_value)
{
    size_t n = extra_name != NULL ? 1 : 0, k = 0;
    size_t nl = extra_name != NULL ? strlen(extra_name) : 0;
    for (char **p = a->env_pass; p != NULL && *p != NULL; p++)
        n++;
    for (char **p = a->env_set; p != NULL && *p != NULL; p++)
        n++;
    char **env = calloc(n + 1, sizeof(*env));
    if (env == NULL)
        return NULL;
    for (char **p = a->env_pass; p != NULL && *p != NULL; p++) {
        const char *v = getenv(*p);
        if (v == NULL || is_extra(*p, extra_name, nl, false))
            continue;
        size_t len = strlen(*p) + strlen(v) + 2;
        if ((env[k] = malloc(len)) == NULL)
            goto fail;
        (void)snprintf(env[k++], len, "%s=%s", *p, v);
    }
    for (char **p = a->env_set; p != NULL && *p != NULL; p++) {
        if (is_extra(*p, extra_name, nl, true))
            continue;
        if ((env[k] = strdup(*p)) == NULL)
            goto fail;
        k++;
    }
    if (extra_name != NULL) {
        size_t len = nl + 1 + strlen(extra_value) + 1;
        if ((env[k] = malloc(len)) == NULL)
            goto fail;
        (void)snprintf(env[k++], len, "%s=%s", extra_name, extra_value);
    }
    return env;
fail:
    tg_aproc_env_free(env); /* NULL-terminated: calloc'd past k */
    return NULL;
}

void tg_aproc_env_free(char **env)
{
    for (char **p = env; p != NULL && *p != NULL; p++) {
        explicit_bzero(*p, strlen(*p)); /* an engine's extra may be a token */
        free(*p);
    }
    free(env);
}

/* ---- containment and spawn -------------------------------------------- */

int tg_aproc_contain_create(tg_gw_t *gw, const tg_agent_cfg_t *a, tg_contain_inst_t **ci)
{
    tg_contain_req_t req;
    tg_err_t err;
    if (tg_config_contain_req_for(gw->cfg, a, &req) == -ENOTSUP) {
        if (gw->contain.mode == TG_CONTAIN_REQUIRED) {
            tg_log_error("cannot start agent '%s': network \"loopback\" cannot be enforced on this "
                         "host and containment.mode is required (use \"none\" or \"full\")",
                         a->id);
            return -1;
        }
        tg_log_warn("agent '%s': network \"loopback\" is not enforced on this host", a->id);
    }
    if (tg_contain_create(&gw->contain, a->id, &req, ci, &err) < 0) {
        tg_log_error("cannot start agent '%s': %s", a->id, err.msg);
        *ci = NULL;
        return -1;
    }
    return 0;
}

/* The three pipes of one instance: real pipes, not the socketpairs
 * UV_CREATE_PIPE makes, so they can be enlarged (F_SETPIPE_SZ) and cost
 * fewer cycles per small frame. The child's ends are inherited as fds
 * 0-2 (stdio), toolgate's are opened on the instance's uv pipes. */
typedef struct pipes {
    int child[3]; /* the child's stdin, stdout, stderr ends; -1 once closed */
    uv_stdio_container_t stdio[3];
} pipes_t;

/* Make the pipes of agent <name> and open toolgate's ends on <pin>,
 * <pout>, <perr>. 0, or a negative errno after logging (no fd left open). */
static int pipes_open(pipes_t *pp, const char *name, uv_pipe_t *pin, uv_pipe_t *pout,
                      uv_pipe_t *perr)
{
    int fd[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    for (int i = 0; i < 3; i++) {
        if (pipe2(fd[i], O_CLOEXEC) == 0)
            continue;
        int e = -errno;
        tg_log_error("cannot start agent '%s': pipe: %s", name, strerror(-e));
        for (int j = 0; j < i; j++) {
            close(fd[j][0]);
            close(fd[j][1]);
        }
        for (int j = 0; j < 3; j++)
            pp->child[j] = -1;
        return e;
    }
    /* stdin: the child reads [0]; stdout and stderr: the child writes [1]. */
    pp->child[0] = fd[0][0];
    pp->child[1] = fd[1][1];
    pp->child[2] = fd[2][1];
    tg_pipe_enlarge(fd[0][1], TG_APROC_PIPE_BYTES);
    tg_pipe_enlarge(fd[1][0], TG_APROC_PIPE_BYTES);
    for (int i = 0; i < 3; i++) {
        pp->stdio[i].flags = UV_INHERIT_FD;
        pp->stdio[i].data.fd = pp->child[i];
    }
    uv_pipe_open(pin, fd[0][1]);
    uv_pipe_open(pout, fd[1][0]);
    uv_pipe_open(perr, fd[2][0]);
    return 0;
}

static void pipes_close_child(pipes_t *pp)
{
    for (int i = 0; i < 3; i++) {
        if (pp->child[i] >= 0)
            close(pp->child[i]);
        pp->child[i] = -1;
    }
}

/* Spawn agent <a> into p->proc, through the exec shim when p->ci is not
 * NULL (p->supervised when the shim stays as its supervisor).
 * p->proc_init once uv_spawn was called. 0 or a negative errno after
 * logging. */
static int spawn(uv_loop_t *loop, tg_aproc_t *p, const tg_agent_cfg_t *a, char **envp,
                 uv_stdio_container_t *stdio, uv_exit_cb exit_cb, const char *hint)
{
    tg_contain_inst_t *ci = p->ci;
    /* Containment: the agent starts through toolgate's own exec shim,
     * which joins the instance's cgroups and sets its limits before the
     * agent's first instruction. */
    char **shim_argv = NULL;
    if (ci != NULL) {
        tg_contain_place_t pl;
        tg_contain_place(ci, &pl);
        if (tg_shim_argv_build("/proc/self/exe", &pl, a->cwd, a->command, &shim_argv) < 0) {
            tg_log_error("cannot start agent '%s': cannot build the exec shim's arguments", a->id);
            return -EINVAL;
        }
        p->supervised = tg_shim_supervises(&pl);
    }
    uv_process_options_t opt;
    memset(&opt, 0, sizeof(opt));
    opt.file = shim_argv != NULL ? shim_argv[0] : a->command[0];
    opt.args = shim_argv != NULL ? shim_argv : a->command;
    opt.env = envp;
    opt.cwd = a->cwd;
    opt.exit_cb = exit_cb;
    opt.stdio = stdio;
    opt.stdio_count = 3;
    /* Own session and process group: the whole tree can be signalled (the
     * shim calls setsid itself). */
    opt.flags = shim_argv != NULL ? 0 : UV_PROCESS_DETACHED;
    p->proc_init = true;
    int rc = uv_spawn(loop, &p->proc, &opt);
    tg_shim_argv_free(shim_argv);
    if (rc < 0)
        tg_log_error("cannot start agent '%s': %s: %s%s", a->id, a->command[0], uv_strerror(rc),
                     hint);
    return rc;
}

static void out_error(tg_out_t *o, void *ctx, int status)
{
    /* EPIPE: the agent closed its stdin; its exit will follow. */
    (void)o;
    (void)ctx;
    (void)status;
}

void tg_aproc_init(tg_aproc_t *p, tg_gw_t *gw, const tg_agent_cfg_t *a, void *data, void *wr_ctx,
                   void (*on_drain)(tg_out_t *o, void *ctx))
{
    tg_aproc_lines_init(&p->err, a->stderr_line_max);
    tg_in_init(&p->rd, &gw->pool, gw->cfg->max_frame_bytes);
    tg_out_init(&p->wr, &gw->pool);
    p->wr.ctx = wr_ctx;
    p->wr.on_drain = on_drain;
    p->wr.on_error = out_error;
    uv_pipe_init(gw->loop, &p->pin, 0);
    uv_pipe_init(gw->loop, &p->pout, 0);
    uv_pipe_init(gw->loop, &p->perr, 0);
    uv_timer_init(gw->loop, &p->linger);
    uv_timer_init(gw->loop, &p->monitor);
    p->pin.data = p->pout.data = p->perr.data = data;
    p->linger.data = p->monitor.data = p->proc.data = data;
    p->open_handles = 6;
}

/* A start that enforces less than agent <id> asked for (containment.mode
 * best_effort, a backend that cannot do it all): one warn line naming
 * each resource left out and why, besides agent.started's "enforced". */
static void log_incomplete(const tg_enforced_t *e, const char *id)
{
    char list[TG_LOG_LINE_MAX];
    size_t n = 0;
    for (int r = 0; r < TG_RES_COUNT && n < sizeof(list); r++) {
        const tg_enforced_item_t *it = &e->r[r];
        if (!it->requested || it->applied)
            continue;
        int k = snprintf(list + n, sizeof(list) - n, "%s%s (%s)", n > 0 ? ", " : "",
                         tg_res_name((tg_res_t)r), it->reason);
        n += k > 0 ? (size_t)k : 0;
    }
    if (n > 0)
        tg_log_warn("agent '%s' started with containment incomplete (containment.mode %s): not "
                    "enforced: %s",
                    id, tg_contain_mode_name(e->mode), list);
}

int tg_aproc_start(tg_aproc_t *p, uv_loop_t *loop, const tg_agent_cfg_t *a, char **envp,
                   uv_exit_cb exit_cb, const char *hint, uv_timer_cb on_monitor, char *enforced,
                   size_t cap)
{
    pipes_t pp;
    enforced[0] = '\0';
    int rc = pipes_open(&pp, a->id, &p->pin, &p->pout, &p->perr);
    if (rc < 0)
        return rc;
    rc = spawn(loop, p, a, envp, pp.stdio, exit_cb, hint);
    pipes_close_child(&pp);
    if (rc < 0)
        return rc;
    p->pid = p->proc.pid;
    if (p->ci != NULL) {
        tg_contain_set_pid(p->ci, p->pid);
        log_incomplete(&p->ci->enforced, a->id);
        if (tg_enforced_json(&p->ci->enforced, enforced, cap) < 0)
            enforced[0] = '\0';
        /* On the loop's whole second: every instance samples in the same
         * pass of the timers, so a backend that walks /proc (rlimit,
         * none) walks once for all of them (contain_rlimit.c). */
        uint64_t first = TG_APROC_MONITOR_MS - uv_now(loop) % TG_APROC_MONITOR_MS;
        uv_timer_start(&p->monitor, on_monitor, first, TG_APROC_MONITOR_MS);
    }
    p->wr.stream = (uv_stream_t *)&p->pin;
    return 0;
}

void tg_aproc_close(tg_aproc_t *p, uv_close_cb cb)
{
    uv_handle_t *hs[] = {(uv_handle_t *)&p->proc,   (uv_handle_t *)&p->pin,
                         (uv_handle_t *)&p->pout,   (uv_handle_t *)&p->perr,
                         (uv_handle_t *)&p->linger, (uv_handle_t *)&p->monitor};
    p->wr.stream = NULL;
    if (!p->proc_init) {
        /* Never spawned: the process handle is not a libuv handle yet. */
        p->open_handles--;
        hs[0] = NULL;
    }
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i] != NULL && !uv_is_closing(hs[i]))
            uv_close(hs[i], cb);
}

bool tg_aproc_handle_closed(tg_aproc_t *p)
{
    if (--p->open_handles > 0)
        return false;
    tg_in_free(&p->rd);
    tg_out_free(&p->wr);
    tg_aproc_lines_free(&p->err);
    (void)tg_contain_destroy(p->ci); /* kills leftovers, removes its cgroups */
    p->ci = NULL;
    return true;
}

void tg_aproc_close_stdin(tg_aproc_t *p, uv_close_cb cb)
{
    (void)tg_out_flush(&p->wr);
    p->stdin_closed = true;
    if (!uv_is_closing((uv_handle_t *)&p->pin))
        uv_close((uv_handle_t *)&p->pin, cb);
    p->wr.stream = NULL;
}

void tg_aproc_signal(const tg_aproc_t *p, int sig)
{
    /* The supervisor cannot forward SIGKILL, and once it is dead the
     * orphans it held go to init: walk the tree first. */
    if (sig == SIGKILL && p->supervised && p->ci != NULL)
        (void)tg_contain_kill(p->ci);
    (void)kill(-p->pid, sig);
    (void)kill(p->pid, sig);
}

bool tg_aproc_on_exit(tg_aproc_t *p, int64_t status, int sig)
{
    bool oom = false;
    p->exited = true;
    p->exit_status = status;
    p->term_signal = sig;
    if (p->ci != NULL) {
        /* A kernel OOM kill between two samples shows in the counters now. */
        if (tg_aproc_exit_oom(&p->watch, p->ci))
            oom = p->killed = true;
        tg_contain_set_pid(p->ci, 0); /* reaped: the pid may be reused */
    }
    /* Reap the rest of the tree: the agent led its own process group. */
    if (p->pid > 0)
        (void)kill(-p->pid, SIGKILL);
    return oom;
}

bool tg_aproc_ready_gone(tg_aproc_t *p, uv_timer_cb on_linger)
{
    if (p->gone || !p->exited)
        return false;
    if (!p->out_eof) {
        if (!uv_is_active((uv_handle_t *)&p->linger))
            uv_timer_start(&p->linger, on_linger, TG_APROC_LINGER_MS, 0);
        return false;
    }
    return true;
}

/* ---- monitor ---------------------------------------------------------- */

bool tg_aproc_sample(tg_contain_inst_t *ci, bool exited, tg_contain_sample_t *cur)
{
    return ci != NULL && !exited && tg_contain_sample(ci, cur) == 0;
}

bool tg_aproc_judge(tg_aproc_watch_t *w, tg_contain_inst_t *ci, const char *name,
                    const tg_contain_sample_t *cur)
{
    tg_verdict_t v = tg_contain_judge(ci, w->have_last ? &w->last : NULL, cur);
    w->last = *cur;
    w->have_last = true;
    if (v.kind == TG_VERDICT_OK || w->verdict.kind != TG_VERDICT_OK)
        return false;
    w->verdict = v;
    tg_log_warn("agent '%s' broke its %s limit (%" PRIu64 " of %" PRIu64 "): killing the instance",
                name, tg_res_name(v.res), v.used, v.limit);
    return true;
}

bool tg_aproc_exit_oom(tg_aproc_watch_t *w, tg_contain_inst_t *ci)
{
    tg_contain_sample_t cur;
    if (w->verdict.kind != TG_VERDICT_OK || tg_contain_sample(ci, &cur) < 0)
        return false;
    tg_verdict_t v = tg_contain_judge(ci, w->have_last ? &w->last : NULL, &cur);
    w->last = cur; /* the final peak, for the pre-flight record */
    w->have_last = true;
    if (v.kind != TG_VERDICT_OOM)
        return false;
    w->verdict = v;
    return true;
}

/* ---- stderr relay ----------------------------------------------------- */

void tg_aproc_lines_init(tg_aproc_lines_t *l, size_t max)
{
    l->max = max;
    l->len = 0;
    l->trunc = false;
    l->buf = malloc(max + 1);
    l->out = malloc(TG_LOG_RELAY_CAP(max));
    if (l->out == NULL) {
        free(l->buf);
        l->buf = NULL;
    }
}

void tg_aproc_lines_free(tg_aproc_lines_t *l)
{
    free(l->buf);
    free(l->out);
    l->buf = NULL;
    l->out = NULL;
    l->len = 0;
}

void tg_aproc_lines_feed(tg_aproc_lines_t *l, const char *p, size_t n, tg_aproc_line_fn fn,
                         void *ctx)
{
    while (n > 0 && l->buf != NULL) {
        const char *nl = memchr(p, '\n', n);
        size_t chunk = nl != NULL ? (size_t)(nl - p) : n;
        size_t room = l->max - l->len;
        size_t take = chunk < room ? chunk : room;
        memcpy(l->buf + l->len, p, take);
        l->len += take;
        if (take < chunk)
            l->trunc = true;
        if (nl != NULL) {
            fn(ctx, l->buf, l->len, l->trunc);
            l->len = 0;
            l->trunc = false;
            chunk++;
        }
        p += chunk;
        n -= chunk;
    }
}

void tg_aproc_lines_flush(tg_aproc_lines_t *l, tg_aproc_line_fn fn, void *ctx)
{
    if (l->len > 0)
        fn(ctx, l->buf, l->len, l->trunc);
    l->len = 0;
    l->trunc = false;
}

static const char trunc_mark[] = " [truncated]";

bool tg_aproc_err_charge(tg_aproc_errbudget_t *b, uint64_t now_ms, uint64_t per_sec, size_t len,
                         bool truncated)
{
    if (now_ms - b->window_start >= 1000) {
        b->window_start = now_ms;
        b->window_bytes = 0;
    }
    size_t total = len + 1 + (truncated ? (sizeof(trunc_mark) - 1) : 0);
    if (b->window_bytes + total > per_sec) {
        b->dropped += total;
        return false;
    }
    b->window_bytes += total;
    return true;
}

size_t tg_aproc_err_format(tg_aproc_lines_t *l, const char *who, const char *p, size_t len,
                           bool truncated)
{
    return tg_log_relay_fmt(l->out, tg_log_opts(), tg_log_now_ms(), who, p, len, l->max, truncated);
}

void tg_aproc_err_write(tg_aproc_errbudget_t *b, const char *p, size_t len)
{
    /* One write: with a pipe on stderr a line goes out whole or not at
     * all, never a prefix without its end. */
    b->dropped += tg_log_raw(p, len);
}

void tg_aproc_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char scratch[TG_APROC_ERR_SCRATCH];
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(scratch, sizeof(scratch));
}

void tg_aproc_err_read(tg_aproc_t *p, uv_stream_t *s, ssize_t n, const uv_buf_t *buf,
                       tg_aproc_line_fn fn, void *ctx)
{
    if (n < 0) {
        uv_read_stop(s);
        tg_aproc_lines_flush(&p->err, fn, ctx);
        return;
    }
    tg_aproc_lines_feed(&p->err, buf->base, (size_t)n, fn, ctx);
}

/* ---- restarts --------------------------------------------------------- */

uint32_t tg_aproc_recent(const uint64_t *at, uint32_t n, uint64_t now, uint64_t window_ms)
{
    uint32_t recent = 0;
    for (uint32_t i = 0; i < n && i < TG_APROC_RESTART_LOG; i++)
        if (now - at[i] < window_ms)
            recent++;
    return recent;
}

void tg_aproc_restart_note(uint64_t *at, uint32_t *n, uint64_t now)
{
    at[*n % TG_APROC_RESTART_LOG] = now;
    (*n)++;
}

uint64_t tg_aproc_backoff(const tg_agent_cfg_t *a, uint32_t recent)
{
    uint64_t backoff = a->backoff_initial_ms;
    for (uint32_t i = 0; i < recent && backoff < a->backoff_max_ms; i++)
        backoff *= 2;
    return backoff > a->backoff_max_ms ? a->backoff_max_ms : backoff;
}

void tg_aproc_log_give_up(const tg_agent_cfg_t *a, uint32_t recent)
{
    char win[16];
    tg_unit_fmt_duration(win, sizeof(win), a->restart_window_ms);
    tg_log_error("agent '%s' failed %u times within %s: giving up on restart (raise "
                 "agents.%s.restart.max_restarts or fix the agent)",
                 a->id, recent + 1, win, a->id);
}

/* ---- audit ------------------------------------------------------------ */

void tg_aproc_ev_started(tg_audit_ev_t *ev, const char *name, int pid, uint32_t attempt,
                         const char *enforced)
{
    tg_audit_ev_init(ev);
    ev->event = "agent.started";
    ev->agent = name;
    ev->pid = pid;
    ev->attempt = attempt;
    ev->enforced_json = enforced[0] != '\0' ? enforced : NULL;
}

void tg_aproc_ev_exited(tg_audit_ev_t *ev, const char *name, int pid, bool killed, int term_signal,
                        int64_t exit_status)
{
    tg_audit_ev_init(ev);
    ev->event = "agent.exited";
    ev->agent = name;
    ev->pid = pid;
    ev->exit.code = term_signal ? TG_AUDIT_ABSENT : exit_status;
    ev->exit.signal = term_signal ? term_signal : TG_AUDIT_ABSENT;
    ev->exit.reason = killed        ? "killed"
                      : term_signal ? "crashed"
                      : exit_status ? "failed"
                                    : "exited";
}

void tg_aproc_ev_restarting(tg_audit_ev_t *ev, const char *name, uint32_t attempt,
                            uint64_t backoff_ms)
{
    tg_audit_ev_init(ev);
    ev->event = "agent.restarting";
    ev->agent = name;
    ev->attempt = attempt;
    ev->backoff_ms = (int64_t)backoff_ms;
}
