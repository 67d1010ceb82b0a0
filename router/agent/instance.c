/* Agent instances (see instance.h): the lifecycle both engines share. */
#include "router/agent/instance.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config/units.h"
#include "limits/preflight.h"
#include "router/gateway/metrics.h"
#include "router/gateway/log.h"

static const char *iname(const tg_ainst_t *in)
{
    return (*in->acfg)->id;
}

static void emit(const tg_ainst_t *in, const tg_audit_ev_t *ev)
{
    if (in->gw->audit == NULL)
        return;
    tg_audit_ev_t e = *ev;
    if (in->ops->stamp != NULL)
        in->ops->stamp(in->owner, &e);
    tg_audit_emit(in->gw->audit, &e);
}

void tg_ainst_init(tg_ainst_t *in, tg_gw_t *gw, tg_agent_cfg_t *const *acfg, size_t idx,
                   const tg_agent_rows_t *rows, tg_aproc_errbudget_t *err, uint64_t *err_reported,
                   const tg_ainst_ops_t *ops, void *owner)
{
    in->gw = gw;
    in->acfg = acfg;
    in->idx = idx;
    in->rows = rows;
    in->err = err;
    in->err_reported = err_reported;
    in->ops = ops;
    in->owner = owner;
    tg_aproc_init(&in->p, gw, *acfg, in, owner, ops->out_drain);
}

int tg_agent_rows_register(tg_agent_rows_t *rows, tg_registry_t *reg, const tg_agent_cfg_t *a)
{
    char name[TG_LIMIT_NAME_MAX];
    snprintf(name, sizeof(name), "agent.%s.stderr_bytes_per_second", a->id);
    rows->stderr_bytes = tg_registry_upsert(reg, name, TG_LIMIT_STDERR, "agent",
                                            a->stderr_bytes_per_sec);
    snprintf(name, sizeof(name), "agent.%s.memory_bytes", a->id);
    rows->memory = tg_registry_upsert(reg, name, TG_LIMIT_RESOURCE, "agent", a->res.memory_bytes);
    rows->disk = -1;
    if (a->workspace != NULL) {
        snprintf(name, sizeof(name), "agent.%s.disk_bytes", a->id);
        rows->disk = tg_registry_upsert(reg, name, TG_LIMIT_RESOURCE, "agent", a->res.disk_bytes);
    }
    snprintf(name, sizeof(name), "agent.%s.pids", a->id);
    rows->pids = tg_registry_upsert(reg, name, TG_LIMIT_RESOURCE, "agent", a->res.pids);
    return rows->stderr_bytes < 0 || rows->memory < 0 || rows->pids < 0 ? -ENOMEM : 0;
}

/* ---- pre-flight and peaks ----------------------------------------------- */

int tg_ainst_preflight(tg_gw_t *gw, const tg_agent_cfg_t *a)
{
    uint64_t min_free = gw->cfg->min_free_memory, avail = 0, peaks[TG_PEAKS_KEEP];
    size_t n = 0;
    if (min_free == 0 || tg_mem_available(NULL, &avail) < 0)
        return 0;
    if (gw->peaks_path[0] != '\0')
        (void)tg_peaks_load(gw->peaks_path, a->id, peaks, &n);
    uint64_t p95 = tg_peaks_p95(peaks, n);
    if (avail >= min_free + p95)
        return 0;
    char av[24], m[24], p[24];
    tg_unit_fmt_bytes(av, sizeof(av), avail);
    tg_unit_fmt_bytes(m, sizeof(m), min_free);
    tg_unit_fmt_bytes(p, sizeof(p), p95);
    tg_log_warn("not starting agent '%s': %s available < containment.min_free_memory %s + P95 peak "
                "%s of its last %zu instances (free memory, or lower containment.min_free_memory)",
                a->id, av, m, p, n);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "agent.unhealthy";
    ev.agent = a->id;
    ev.reason = "preflight_memory";
    ev.limit.type = "memory";
    ev.limit.scope = "instance";
    ev.limit.observed = (int64_t)avail;
    ev.limit.cap = (int64_t)(min_free + p95);
    if (gw->audit != NULL)
        tg_audit_emit(gw->audit, &ev);
    return -1;
}

/* The instance's peak memory, when its last sample has one. */
static bool peak_of(const tg_ainst_t *in, uint64_t *peak)
{
    if (!in->p.watch.have_last || !(in->p.watch.last.have & TG_SAMPLE_PEAK))
        return false;
    *peak = in->p.watch.last.memory_peak;
    return true;
}

/* Keep the instance's peak memory for the pre-flight check of later
 * instances (a small file, written once per instance exit). */
static void record_peak(const tg_ainst_t *in)
{
    uint64_t peak;
    if (in->gw->peaks_path[0] == '\0' || !peak_of(in, &peak))
        return;
    int rc = tg_peaks_record(in->gw->peaks_path, iname(in), peak);
    if (rc < 0)
        tg_log_warn("cannot record agent '%s' peak memory in %s: %s", iname(in), in->gw->peaks_path,
                    strerror(-rc));
}

/* ---- stderr ------------------------------------------------------------- */

static void stderr_emit(void *ctx, const char *p, size_t len, bool truncated)
{
    tg_ainst_t *in = ctx;
    const tg_agent_cfg_t *a = *in->acfg;
    if (!tg_log_enabled(TG_LOG_INFO))
        return; /* TOOLGATE_LOG above info: agent lines are not written */
    /* Attributed and escaped, then charged as written: the budget bounds
     * what reaches toolgate's stderr, prefix and escapes included. */
    size_t n = tg_aproc_err_format(&in->p.err, a->id, p, len, truncated);
    if (!tg_aproc_err_charge(in->err, uv_now(in->gw->loop), a->stderr_bytes_per_sec, n - 1, false))
        return;
    tg_registry_update(&in->gw->reg, in->rows->stderr_bytes, in->err->window_bytes);
    tg_aproc_err_write(in->err, in->p.err.out, n);
}

static void err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    tg_ainst_t *in = s->data;
    tg_aproc_err_read(&in->p, s, n, buf, stderr_emit, in);
}

void tg_agent_report_drops(const tg_agent_cfg_t *a, const tg_aproc_errbudget_t *err,
                           uint64_t *reported)
{
    if (err->dropped <= *reported)
        return;
    char cap[24];
    tg_unit_fmt_bytes(cap, sizeof(cap), a->stderr_bytes_per_sec);
    tg_log_warn("agent '%s' stderr: %" PRIu64 " bytes dropped so far (over %s/s or lines over "
                "the line limit; raise agents.%s.stderr.bytes_per_second)",
                a->id, err->dropped, cap, a->id);
    *reported = err->dropped;
}

/* ---- exit --------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    tg_ainst_t *in = h->data;
    if (tg_aproc_handle_closed(&in->p))
        in->ops->closed(in);
}

bool tg_ainst_failed(const tg_ainst_t *in)
{
    return in->p.killed || in->p.term_signal != 0 || in->p.exit_status != 0;
}

int64_t tg_ainst_status(const tg_ainst_t *in)
{
    return in->p.term_signal ? 128 + in->p.term_signal : in->p.exit_status;
}

/* Why <in> ended, normalized (README "Containment", exit reasons): a
 * resource verdict first; then a kill toolgate made (after an unanswered
 * cancel or timeout: "timeout"; in its own stop steps: "stopped"; any
 * other: "killed"); then a signal toolgate did not send ("crashed");
 * then the exit status (126/127, what the shim and shells exit with when
 * the command cannot be run: "exec_failed"; other non-zero: "failed";
 * 0: "exited"). */
static const char *exit_reason(const tg_ainst_t *in)
{
    const tg_aproc_t *p = &in->p;
    switch (p->watch.verdict.kind) {
    case TG_VERDICT_OOM:
        return "oom";
    case TG_VERDICT_MEMORY_OVER:
        return "memory";
    case TG_VERDICT_PIDS_DENIED:
        return "pids";
    case TG_VERDICT_DISK_OVER:
        return "disk";
    case TG_VERDICT_OK:
        break;
    }
    bool by_toolgate = p->killed || (in->kill_reason != NULL && p->term_signal != 0);
    if (by_toolgate && in->kill_reason != NULL && strcmp(in->kill_reason, "stuck") == 0)
        return "timeout";
    if (by_toolgate && in->stopping)
        return "stopped";
    if (by_toolgate)
        return "killed";
    if (p->term_signal != 0)
        return "crashed";
    if (p->exit_status == 126 || p->exit_status == 127)
        return "exec_failed";
    return p->exit_status != 0 ? "failed" : "exited";
}

/* ---- the agent's usage figures ------------------------------------------ */

/* <a> - <b>, or 0 when <b> is larger (a sum never wraps below 0). */
static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* <limit> x <n>, saturated. */
static uint64_t times(uint64_t limit, uint64_t n)
{
    return n != 0 && limit > UINT64_MAX / n ? UINT64_MAX : limit * n;
}

/* Show agent <in>'s usage sums in its registry rows and metrics. The
 * rows count every live instance of the agent; their capacity is the
 * per-instance limit times the instances running (at least one), so the
 * fill is that of the agent as a whole and one instance alone fills as
 * before. */
static void usage_show(const tg_ainst_t *in, const tg_agent_usage_t *u)
{
    const tg_agent_cfg_t *a = *in->acfg;
    tg_registry_t *reg = &in->gw->reg;
    uint64_t n = u->live > 0 ? u->live : 1;
    tg_registry_update_cap(reg, in->rows->memory, u->memory, times(a->res.memory_bytes, n));
    tg_registry_update_cap(reg, in->rows->disk, u->disk, times(a->res.disk_bytes, n));
    tg_registry_update_cap(reg, in->rows->pids, u->pids, times(a->res.pids, n));
    if (in->gw->metrics_ok && u->sampled)
        tg_metrics_agent_usage(&in->gw->metrics, in->idx, u->memory, u->peak,
                               a->res.memory_bytes, u->cpu_us, u->pids);
}

/* Put sample <cur> in place of what instance <in> added before to its
 * agent's sums (the CPU counter only ever grows). */
static void usage_sample(tg_ainst_t *in, const tg_contain_sample_t *cur)
{
    if (in->idx >= in->gw->nusage)
        return;
    tg_agent_usage_t *u = &in->gw->usage[in->idx];
    tg_ainst_share_t *sh = &in->share;
    if (cur->have & TG_SAMPLE_MEM) {
        u->memory = sub0(u->memory, sh->memory) + cur->memory_current;
        sh->memory = cur->memory_current;
    }
    if (cur->have & TG_SAMPLE_DISK) {
        u->disk = sub0(u->disk, sh->disk) + cur->disk_bytes;
        sh->disk = cur->disk_bytes;
    }
    if (cur->have & TG_SAMPLE_PIDS) {
        u->pids = sub0(u->pids, sh->pids) + cur->pids_current;
        sh->pids = cur->pids_current;
    }
    if ((cur->have & TG_SAMPLE_CPU) && cur->cpu_usage_us > sh->cpu_us) {
        u->cpu_us += cur->cpu_usage_us - sh->cpu_us;
        sh->cpu_us = cur->cpu_usage_us;
    }
    uint64_t peak = (cur->have & TG_SAMPLE_PEAK) ? cur->memory_peak : cur->memory_current;
    if (peak > u->peak)
        u->peak = peak;
    u->sampled = true;
    usage_show(in, u);
}

/* Instance <in> runs from now on: one more in its agent's count. */
static void usage_start(tg_ainst_t *in)
{
    if (in->idx >= in->gw->nusage || in->share.live)
        return;
    in->share.live = true;
    in->gw->usage[in->idx].live++;
    usage_show(in, &in->gw->usage[in->idx]);
}

/* Instance <in> is gone: its part leaves the sums (its CPU stays in the
 * counter), so an agent with no instance left reads 0. */
static void usage_gone(tg_ainst_t *in)
{
    if (in->idx >= in->gw->nusage || !in->share.live)
        return;
    tg_agent_usage_t *u = &in->gw->usage[in->idx];
    tg_ainst_share_t *sh = &in->share;
    u->memory = sub0(u->memory, sh->memory);
    u->disk = sub0(u->disk, sh->disk);
    u->pids = sub0(u->pids, sh->pids);
    u->live--;
    *sh = (tg_ainst_share_t){0};
    usage_show(in, u);
}

/* Exited and stdout done: agent.exited (with the peak), the peak kept,
 * dropped stderr reported, its part of the agent's usage taken back, then
 * the engine's part, then the close. */
static void gone(tg_ainst_t *in)
{
    in->p.gone = true;
    uv_timer_stop(&in->p.linger);
    tg_audit_ev_t ev;
    uint64_t peak;
    tg_aproc_ev_exited(&ev, iname(in), in->p.pid, in->p.killed, in->p.term_signal,
                       in->p.exit_status);
    ev.exit.reason = exit_reason(in);
    if (peak_of(in, &peak))
        ev.exit.memory_peak = (int64_t)peak;
    emit(in, &ev);
    tg_agent_report_drops(*in->acfg, in->err, in->err_reported);
    record_peak(in);
    usage_gone(in);
    tg_aproc_close(&in->p, handle_closed);
    in->ops->gone(in);
}

static void maybe_gone(tg_ainst_t *in);

static void on_linger(uv_timer_t *t)
{
    tg_ainst_t *in = t->data;
    void *owner = in->owner;
    const tg_ainst_ops_t *ops = in->ops;
    in->p.out_eof = true; /* a grandchild holds stdout open: stop waiting */
    maybe_gone(in);
    ops->flush(owner);
}

static void maybe_gone(tg_ainst_t *in)
{
    if (tg_aproc_ready_gone(&in->p, on_linger))
        gone(in);
}

/* The agent's stdout ended (the engine's reader calls this through
 * tg_aproc, see tg_ainst_out_eof). */
static void on_exit_cb(uv_process_t *proc, int64_t status, int sig)
{
    tg_ainst_t *in = proc->data;
    void *owner = in->owner;
    const tg_ainst_ops_t *ops = in->ops;
    if (tg_aproc_on_exit(&in->p, status, sig)) {
        /* An OOM kill the monitor did not see coming. */
        const tg_verdict_t *v = &in->p.watch.verdict;
        tg_audit_ev_t ev;
        tg_audit_ev_init(&ev);
        ev.event = "agent.killed";
        ev.agent = iname(in);
        ev.pid = in->p.pid;
        ev.reason = "oom";
        ev.limit.type = tg_res_name(v->res);
        ev.limit.scope = "agent";
        ev.limit.observed = (int64_t)v->used;
        ev.limit.cap = (int64_t)v->limit;
        emit(in, &ev);
    }
    maybe_gone(in);
    ops->flush(owner);
}

/* Its stdout ended TG_AINST_MUTE_MS ago and it still runs. */
static void on_mute(uv_timer_t *t)
{
    tg_ainst_t *in = t->data;
    void *owner = in->owner;
    const tg_ainst_ops_t *ops = in->ops;
    if (in->p.exited || in->p.gone || in->stopping)
        return;
    tg_log_warn("agent '%s' closed its stdout but did not exit within %d ms: killing it "
                "(no answer can come from it)",
                iname(in), TG_AINST_MUTE_MS);
    tg_ainst_kill(in, SIGKILL, "stdout_closed");
    ops->flush(owner);
}

void tg_ainst_out_eof(tg_ainst_t *in)
{
    in->p.out_eof = true;
    if (!in->p.exited && !in->stopping && !uv_is_active((uv_handle_t *)&in->p.linger))
        uv_timer_start(&in->p.linger, on_mute, TG_AINST_MUTE_MS, 0);
    maybe_gone(in);
}

/* ---- monitor and kills -------------------------------------------------- */

/* Once a second: sample the instance, update the agent's sums, and kill
 * it when it broke a hard limit (OOM kill, memory over the limit under
 * the RSS monitor, a scanned workspace over its disk size, forks
 * refused). Its calls then fail with resource_limit_exceeded naming the
 * resource (the engine's gone). */
static void on_monitor(uv_timer_t *t)
{
    tg_ainst_t *in = t->data;
    tg_contain_sample_t cur;
    if (!tg_aproc_sample(in->p.ci, in->p.exited, &cur))
        return;
    usage_sample(in, &cur);
    if (!tg_aproc_judge(&in->p.watch, in->p.ci, iname(in), &cur))
        return;
    tg_ainst_kill(in, SIGKILL, tg_res_name(in->p.watch.verdict.res));
    (void)tg_contain_kill(in->p.ci);
    in->ops->flush(in->owner);
}

bool tg_ainst_stop_step(tg_ainst_t *in, tg_phase_t *phase, const char *why)
{
    if (in == NULL || in->p.gone)
        return false;
    in->stopping = true;
    switch (*phase) {
    case TG_P_DRAIN:
        /* The calls in flight had their chance: close the agent's stdin. */
        *phase = TG_P_STOP_STDIN;
        tg_ainst_close_stdin(in);
        return true;
    case TG_P_STOP_STDIN:
        *phase = TG_P_STOP_TERM;
        tg_ainst_kill(in, SIGTERM, why);
        return true;
    case TG_P_STOP_TERM:
        *phase = TG_P_STOP_KILL;
        tg_log_warn("agent '%s' ignored SIGTERM for %" PRIu64 " ms: SIGKILL", iname(in),
                    (*in->acfg)->kill_grace_ms);
        tg_ainst_kill(in, SIGKILL, why);
        return true;
    default:
        return false;
    }
}

void tg_ainst_kill(tg_ainst_t *in, int sig, const char *reason)
{
    if (in->p.gone || in->p.pid <= 0 || in->p.exited)
        return;
    if (in->kill_reason == NULL)
        in->kill_reason = reason;
    if (sig == SIGKILL) {
        in->p.killed = true;
        if (!in->kill_audited) {
            in->kill_audited = true;
            tg_audit_ev_t ev;
            tg_audit_ev_init(&ev);
            ev.event = "agent.killed";
            ev.agent = iname(in);
            ev.pid = in->p.pid;
            ev.reason = reason;
            emit(in, &ev);
        }
    }
    tg_aproc_signal(&in->p, sig);
}

void tg_ainst_close_stdin(tg_ainst_t *in)
{
    in->stopping = true;
    tg_aproc_close_stdin(&in->p, handle_closed);
}

/* ---- start -------------------------------------------------------------- */

int tg_ainst_spawn(tg_ainst_t *in, const tg_ainst_spawn_t *how)
{
    tg_gw_t *gw = in->gw;
    const tg_agent_cfg_t *a = *in->acfg;
    int rc = 0;
    char **envp = NULL;
    if (tg_ainst_preflight(gw, a) < 0)
        rc = -EAGAIN;
    if (rc == 0 && gw->contain_ok && tg_aproc_contain_create(gw, a, &in->p.ci) < 0)
        rc = -EPERM;
    /* Wrap mode is a drop-in: the caller's environment, unchanged. Serve
     * mode passes only env.pass and env.set (and the engine's one extra,
     * last, so a config entry of that name cannot replace it): a daemon's
     * environment is not the agent's business. */
    if (rc == 0 && !how->inherit_env &&
        (envp = tg_aproc_env_build(a, how->env_name, how->env_value)) == NULL)
        rc = -ENOMEM;
    char enforced[TG_AUDIT_LINE_MAX / 2];
    if (rc == 0)
        rc = tg_aproc_start(&in->p, gw->loop, a, envp, on_exit_cb, how->hint, on_monitor,
                            enforced, sizeof(enforced));
    tg_aproc_env_free(envp);
    if (rc < 0) {
        /* Handles that were set up (or a process never started) must
         * still be closed: ops->closed follows. */
        in->p.exited = in->p.gone = true;
        tg_aproc_close(&in->p, handle_closed);
        return rc;
    }
    uv_read_start((uv_stream_t *)&in->p.pout, in->ops->out_alloc, in->ops->out_read);
    uv_read_start((uv_stream_t *)&in->p.perr, tg_aproc_err_alloc, err_read);
    usage_start(in);
    tg_audit_ev_t ev;
    tg_aproc_ev_started(&ev, a->id, in->p.pid, how->attempt, enforced);
    emit(in, &ev);
    return 0;
}
