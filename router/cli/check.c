/* toolgate check (see check.h): argument parsing, the effective-limit
 * tables, the predicted enforcement report, text and JSON output.
 *
 * The limit tables are the key table's TG_KF_CHECK rows (config/keys.h),
 * in its order: a limit added there shows here without a change.
 *
 * Every table is built once as rows (key, effective value, source, what
 * the manifest asked, what the operator set) and then written as text or
 * JSON, so the two outputs cannot disagree.
 */
#include "router/cli/check.h"

#include <uv.h>

#include "limits/store.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config/keys.h"
#include "config/manifest.h"
#include "config/units.h"
#include "router/cli/cli.h"
#include "router/cli/help.h"
#include "router/gateway/contain_cfg.h"

#define VAL_MAX          48   /* fixed internal bound: one formatted value */
#define NOTE_MAX         96   /* fixed internal bound: a row's note */
#define ENF_TEXT_MAX     4096 /* fixed internal bound: one agent's enforcement table */
#define CAPS_TEXT_MAX    8192 /* fixed internal bound: the host capability summary */
#define CHECK_LIMITS_MAX 256  /* fixed internal bound: --limit options on one command line (as wrap) */
#define ROWS_MAX         24   /* fixed internal bound: limit rows of one agent or tool */

/* ------------------------------------------------------------------ */
/* Prediction of the containment module's choices                      */

static bool hier_ok(const tg_contain_caps_t *caps, int i)
{
    return caps->h[i].usable && caps->h[i].writable;
}

tg_contain_kind_t tg_check_backend(const tg_contain_caps_t *caps, tg_contain_mode_t mode, char *why,
                                   size_t cap)
{
    bool v2 = hier_ok(caps, TG_CG_V2);
    bool v2_ctl = caps->v2_memory || caps->v2_cpu || caps->v2_pids;
    bool v1 = hier_ok(caps, TG_CG_MEMORY) || hier_ok(caps, TG_CG_CPU) || hier_ok(caps, TG_CG_PIDS);

    /* The order of tg_contain_init's choose(). */
    snprintf(why, cap, "%s", "");
    if (mode == TG_CONTAIN_OFF) {
        snprintf(why, cap, "containment.mode is off");
        return TG_CONTAIN_NONE;
    }
    if (v2 && v2_ctl)
        return TG_CONTAIN_CGROUP2;
    if (v1) {
        if (v2)
            snprintf(why, cap, "controllers on cgroup v1; the cgroup2 mount adds cgroup.kill");
        return TG_CONTAIN_CGROUP1;
    }
    if (v2) {
        snprintf(why, cap, "cgroup2 without delegated controllers: memory falls back to rlimits");
        return TG_CONTAIN_CGROUP2;
    }
    snprintf(why, cap, "no writable cgroup hierarchy below toolgate's cgroup");
    return TG_CONTAIN_RLIMIT;
}

static void plan_no(tg_enforced_t *e, tg_res_t r, const char *backend, const char *reason)
{
    tg_enforced_set(e, r, false, 0, backend, NULL, reason);
}

/* What the cgroup2 / cgroup1 backends' limit() would apply. */
static void plan_cgroup(const tg_contain_caps_t *caps, tg_contain_kind_t kind,
                        const tg_contain_req_t *q, tg_enforced_t *e)
{
    /* A hierarchy's reason plus ours; the report keeps TG_REASON_MAX of it. */
    char why[TG_REASON_MAX * 2];
    /* cpu.max / cfs quota over a 100 ms period, at least the kernel's
     * 1 ms: the millicores that quota enforces. */
    uint64_t quota = (uint64_t)q->cpu_millicores * TG_CONTAIN_CPU_PERIOD_US / 1000u;
    uint64_t cpu_mc = (quota < 1000u ? 1000u : quota) * 1000u / TG_CONTAIN_CPU_PERIOD_US;

    if (kind == TG_CONTAIN_CGROUP2) {
        if (q->memory_bytes && caps->v2_memory)
            tg_enforced_set(e, TG_RES_MEMORY, true, q->memory_bytes, "cgroup2", "memory.max", NULL);
        else if (q->memory_bytes)
            plan_no(e, TG_RES_MEMORY, "cgroup2",
                    "memory controller not delegated to toolgate's cgroup");
        if (q->cpu_millicores && caps->v2_cpu)
            tg_enforced_set(e, TG_RES_CPU, true, cpu_mc, "cgroup2", "cpu.max", NULL);
        else if (q->cpu_millicores)
            plan_no(e, TG_RES_CPU, "cgroup2", "cpu controller not delegated to toolgate's cgroup");
        if (q->pids && caps->v2_pids)
            tg_enforced_set(e, TG_RES_PIDS, true, q->pids, "cgroup2", "pids.max", NULL);
        else if (q->pids)
            plan_no(e, TG_RES_PIDS, "cgroup2",
                    "pids controller not delegated to toolgate's cgroup");
        return;
    }
    if (q->memory_bytes && hier_ok(caps, TG_CG_MEMORY)) {
        tg_enforced_set(e, TG_RES_MEMORY, true, q->memory_bytes, "cgroup1",
                        caps->v1_memsw ? "memory.limit_in_bytes, memory.memsw.limit_in_bytes"
                                       : "memory.limit_in_bytes",
                        NULL);
    } else if (q->memory_bytes) {
        snprintf(why, sizeof why, "no writable memory hierarchy: %s", caps->h[TG_CG_MEMORY].why);
        plan_no(e, TG_RES_MEMORY, "cgroup1", why);
    }
    if (q->cpu_millicores && hier_ok(caps, TG_CG_CPU)) {
        tg_enforced_set(e, TG_RES_CPU, true, cpu_mc, "cgroup1",
                        "cpu.cfs_quota_us/cpu.cfs_period_us", NULL);
    } else if (q->cpu_millicores) {
        snprintf(why, sizeof why, "no writable cpu hierarchy: %s", caps->h[TG_CG_CPU].why);
        plan_no(e, TG_RES_CPU, "cgroup1", why);
    }
    if (q->pids && hier_ok(caps, TG_CG_PIDS)) {
        tg_enforced_set(e, TG_RES_PIDS, true, q->pids, "cgroup1", "pids.max", NULL);
    } else if (q->pids) {
        snprintf(why, sizeof why, "no writable pids hierarchy: %s", caps->h[TG_CG_PIDS].why);
        plan_no(e, TG_RES_PIDS, "cgroup1", why);
    }
}

/* contain_ws.c's tg__ws_setup, minus what only creating the workspace
 * can show (a missing parent, a foreign owner): agent.started says that. */
static void plan_workspace(const tg_contain_caps_t *caps, const tg_contain_req_t *q,
                           tg_enforced_t *e)
{
    char why[TG_REASON_MAX * 2], sz[32];
    tg_workspace_backend_t kind = q->workspace_backend;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = page > 0 ? (uint64_t)page : 4096u;

    if (kind == TG_WORKSPACE_AUTO)
        kind = caps->tmpfs ? TG_WORKSPACE_TMPFS : TG_WORKSPACE_SCAN;
    if (kind == TG_WORKSPACE_SCAN) {
        tg_enforced_set(e, TG_RES_DISK, true, q->disk_bytes, "scan",
                        "per-instance directory, scanned every second, killed when over",
                        NULL);
    } else if (caps->tmpfs) {
        tg_enforced_set(e, TG_RES_DISK, true, (q->disk_bytes + pg - 1) / pg * pg, "tmpfs",
                        "tmpfs per instance in a private mount namespace", NULL);
    } else {
        tg_unit_fmt_bytes(sz, (int)sizeof sz, q->fsize ? q->fsize : q->disk_bytes);
        snprintf(why, sizeof why,
                 "tmpfs workspaces are refused here (%s); each file is capped at %s by "
                 "RLIMIT_FSIZE",
                 caps->tmpfs_why[0] ? caps->tmpfs_why : "not probed", sz);
        plan_no(e, TG_RES_DISK, "tmpfs", why);
    }
}

/* contain.c's net_requests: bandwidth and connections are enforced only
 * by a namespace without a route out (network "none", applied). */
static void plan_net_requests(tg_enforced_t *e)
{
    char why[TG_REASON_MAX];

    for (int r = TG_RES_BANDWIDTH; r <= TG_RES_CONNECTIONS; r++) {
        bool bw = r == TG_RES_BANDWIDTH;
        if (!e->r[r].requested)
            continue;
        if (e->r[TG_RES_NETWORK].applied) {
            tg_enforced_set(e, (tg_res_t)r, true, e->r[r].value, "netns",
                            "network none: no route out of the agent's namespace", NULL);
            continue;
        }
        snprintf(why, sizeof why,
                 "no backend %s; remove resources.network.%s, set network \"none\", or use "
                 "containment.mode best_effort",
                 bw ? "shapes bandwidth" : "counts connections",
                 bw ? "bandwidth_limit" : "max_connections");
        plan_no(e, (tg_res_t)r, "none", why);
    }
}

/* contain_rlimit.c's clamp: each rlimit held to this process's hard limit
 * (toolgate started the same way inherits the same). */
static void plan_clamp(const tg_contain_req_t *q, tg_enforced_t *e)
{
    const struct {
        int resource;
        uint64_t v;
    } rl[] = {{RLIMIT_NOFILE, q->nofile},
              {RLIMIT_FSIZE, q->fsize ? q->fsize : q->disk_bytes},
              {RLIMIT_DATA, q->memory_bytes},
              {RLIMIT_NPROC, q->pids}};

    for (size_t i = 0; i < sizeof rl / sizeof rl[0]; i++) {
        uint64_t hard = tg_contain_hard_limit(rl[i].resource);
        if (rl[i].v > hard)
            tg_enforced_clamp(e, rl[i].resource, hard);
    }
}

/* tg__contain_rlimit_fallback, then contain.c's common_limits. */
static void plan_fallback(const tg_contain_caps_t *caps, const tg_contain_req_t *q,
                          tg_enforced_t *e)
{
    char why[TG_REASON_MAX * 2], sz[32]; /* the report keeps TG_REASON_MAX of <why> */
    tg_enforced_item_t *it;
    uint64_t fsize = q->fsize ? q->fsize : q->disk_bytes;

    it = &e->r[TG_RES_MEMORY];
    if (q->memory_bytes && !it->applied)
        tg_enforced_set(e, TG_RES_MEMORY, true, q->memory_bytes, "rlimit",
                        "RLIMIT_DATA + process-tree RSS monitor", NULL);
    it = &e->r[TG_RES_CPU];
    if (q->cpu_millicores && !it->applied) {
        snprintf(why, sizeof why, "%s; RLIMIT_CPU is total seconds, not a rate",
                 it->reason[0] ? it->reason : "no cpu controller");
        plan_no(e, TG_RES_CPU, "none", why);
    }
    it = &e->r[TG_RES_PIDS];
    if (q->pids && !it->applied) {
        if (q->set_user && q->uid != 0) {
            tg_enforced_set(e, TG_RES_PIDS, true, q->pids, "rlimit",
                            "RLIMIT_NPROC (counts every process of the dedicated uid)", NULL);
        } else {
            snprintf(why, sizeof why,
                     "%s; RLIMIT_NPROC binds only an agent running as its own non-root user",
                     it->reason[0] ? it->reason : "no pids controller");
            plan_no(e, TG_RES_PIDS, "none", why);
        }
    }
    if (q->nofile)
        tg_enforced_set(e, TG_RES_NOFILE, true, q->nofile, "rlimit", "RLIMIT_NOFILE", NULL);
    if (q->fsize)
        tg_enforced_set(e, TG_RES_FSIZE, true, q->fsize, "rlimit", "RLIMIT_FSIZE", NULL);
    if (q->disk_bytes && q->workspace) {
        plan_workspace(caps, q, e);
    } else if (q->disk_bytes) {
        tg_unit_fmt_bytes(sz, (int)sizeof sz, fsize);
        snprintf(why, sizeof why, "no workspace quota; each file is capped at %s by RLIMIT_FSIZE",
                 sz);
        plan_no(e, TG_RES_DISK, "none", why);
    }
    if (q->network_none) {
        if (caps->netns)
            tg_enforced_set(e, TG_RES_NETWORK, true, 1, "netns", "unshare(CLONE_NEWNET)", NULL);
        else
            plan_no(e, TG_RES_NETWORK, "none",
                    "network namespaces unavailable (unshare(CLONE_NEWNET) refused)");
    }
    plan_net_requests(e);
    plan_clamp(q, e);
}

void tg_check_plan(const tg_contain_caps_t *caps, tg_contain_kind_t kind, tg_contain_mode_t mode,
                   const tg_contain_req_t *req, tg_enforced_t *e)
{
    tg_enforced_init(e, kind, mode, req);
    if (kind == TG_CONTAIN_NONE) {
        for (int r = 0; r < TG_RES_COUNT; r++)
            if (e->r[r].requested)
                plan_no(e, (tg_res_t)r, "none", "containment.mode is off");
        return;
    }
    if (kind == TG_CONTAIN_CGROUP2 || kind == TG_CONTAIN_CGROUP1)
        plan_cgroup(caps, kind, req, e);
    plan_fallback(caps, req, e);
}

/* ------------------------------------------------------------------ */
/* Values and rows: the key table's TG_KF_CHECK rows                   */

#define TOOL_KEYS "agents[].tools.*"

/* Row <k>'s value in <lim>/<res> (and <a>'s own fields). A burst left at
 * 0 reads as its rate's count, the value it stands for. */
static tg_cfg_val_t kget(const tg_cfg_key_t *k, const tg_exec_limits_t *lim,
                         const tg_resources_t *res, const tg_agent_cfg_t *a)
{
    tg_cfg_at_t at = {.agent = a, .lim = lim, .res = res};
    tg_cfg_val_t v = tg_cfg_key_get(k, &at);

    if ((k->flags & TG_KF_FOLLOWS_RATE) && v.u == 0)
        v.u = lim->rate_limit.count;
    return v;
}

/* The value in base units (ms, bytes, millicores, bit/s, counts) for
 * --json; a rate is {"count", "period_ms"}, the network its name. */
static json_t *kjson(const tg_cfg_key_t *k, const tg_cfg_val_t *v)
{
    if (k->type == TG_KT_RATE)
        return json_pack("{s:I,s:I}", "count", (json_int_t)v->rate.count, "period_ms",
                         (json_int_t)v->rate.period_ms);
    if (k->type == TG_KT_NETWORK)
        return json_string(tg_network_name((tg_network_t)v->u));
    return json_integer((json_int_t)v->u);
}

/* One line of a limits table. Empty strings are "not set". */
typedef struct row {
    const tg_cfg_key_t *key;
    tg_cfg_val_t eff;
    char eff_text[VAL_MAX];
    char man[VAL_MAX]; /* what the manifest asked for */
    char op[VAL_MAX];  /* what the operator set (file, --limit) */
    char note[NOTE_MAX];
} row_t;

static bool operator_src(tg_src_t s)
{
    return s == TG_SRC_FILE || s == TG_SRC_CLI;
}

static void agent_row(const tg_agent_cfg_t *a, const tg_cfg_key_t *k, row_t *r)
{
    const tg_manifest_t *m = a->manifest;

    memset(r, 0, sizeof *r);
    r->key = k;
    r->eff = kget(k, &a->lim, &a->res, a);
    tg_cfg_key_fmt(k, &r->eff, r->eff_text, sizeof r->eff_text);
    if (m && (k->flags & TG_KF_MANIFEST)) {
        tg_cfg_val_t q = kget(k, &m->req, &m->req_res, a), o = kget(k, &m->op, &m->op_res, a);
        if (q.src == TG_SRC_MANIFEST)
            tg_cfg_key_fmt(k, &q, r->man, sizeof r->man);
        if (operator_src(o.src))
            tg_cfg_key_fmt(k, &o, r->op, sizeof r->op);
    } else if (operator_src(r->eff.src)) {
        tg_cfg_key_fmt(k, &r->eff, r->op, sizeof r->op);
    }
    if ((k->flags & TG_KF_FOLLOWS_RATE) && r->eff.src == TG_SRC_DEFAULT)
        snprintf(r->note, sizeof r->note, "the rate's count");
    if ((k->flags & TG_KF_ADVISORY) && r->eff.u)
        snprintf(r->note, sizeof r->note, "%s",
                 a->res.network == TG_NET_NONE ? "held by network none (no route out)"
                                               : "not enforced: no backend does it");
}

/* The agent's rows: execution limits, then resources; the advisory ones
 * only when someone asked for them. Returns the count. */
static size_t agent_rows(const tg_agent_cfg_t *a, row_t rows[ROWS_MAX])
{
    size_t n = 0;

    for (size_t i = 0; i < tg_cfg_nkeys && n < ROWS_MAX; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        if (!(k->flags & TG_KF_CHECK) || !tg_cfg_key_under(k, "agents[]") ||
            tg_cfg_key_under(k, TOOL_KEYS))
            continue;
        agent_row(a, k, &rows[n]);
        if ((k->flags & TG_KF_ADVISORY) && rows[n].eff.u == 0 && !rows[n].man[0])
            continue;
        n++;
    }
    return n;
}

/* A tool's rows: the limits it sets itself (the agent's apply as well). */
static size_t tool_rows(const tg_agent_cfg_t *a, const tg_tool_cfg_t *t, row_t rows[ROWS_MAX])
{
    size_t n = 0;

    for (size_t i = 0; i < tg_cfg_nkeys && n < ROWS_MAX; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        row_t *r = &rows[n];
        if (!(k->flags & TG_KF_CHECK) || !tg_cfg_key_under(k, TOOL_KEYS))
            continue;
        memset(r, 0, sizeof *r);
        r->key = k;
        r->eff = kget(k, &t->lim, NULL, a);
        if (r->eff.src == TG_SRC_DEFAULT)
            continue;
        tg_cfg_key_fmt(k, &r->eff, r->eff_text, sizeof r->eff_text);
        if (operator_src(r->eff.src))
            tg_cfg_key_fmt(k, &r->eff, r->op, sizeof r->op);
        /* The deadline is the smaller of the two (DESIGN.md "Timeouts"). */
        if (strcmp(tg_cfg_key_name(k), "max_tool_call_duration") == 0 &&
            t->lim.max_tool_call_duration_ms > a->lim.max_tool_call_duration_ms) {
            char ag[VAL_MAX];
            tg_unit_fmt_duration(ag, (int)sizeof ag, a->lim.max_tool_call_duration_ms);
            snprintf(r->note, sizeof r->note, "the agent's %s ends a call first", ag);
        }
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* Enforcement per agent                                               */

/* Requests outside tg_contain_req_t, reported beside the module's table. */
typedef struct extra {
    const char *res;      /* the table's resource column */
    const char *json_key; /* its member in the JSON "resources" object */
    char requested[VAL_MAX];
    uint64_t number; /* the request in base units for JSON; 0: <requested> is the value */
    const char *reason;
    bool blocks; /* counts as "not enforced" for containment.mode required */
} extra_t;

/* fixed internal bound: requests beside the module's table (network loopback) */
#define EXTRA_MAX 1

typedef struct agent_enf {
    tg_enforced_t e;
    extra_t extra[EXTRA_MAX];
    size_t nextra;
    bool would_start;
    char refusal[TG_REASON_MAX + 64]; /* why required mode refuses; "" otherwise */
} agent_enf_t;

static void agent_enforcement(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                              const tg_contain_caps_t *caps, tg_contain_kind_t kind,
                              tg_contain_mode_t mode, agent_enf_t *out)
{
    tg_contain_req_t req;
    tg_res_t miss;
    bool loopback = tg_config_contain_req_for(cfg, a, &req) == -ENOTSUP;

    memset(out, 0, sizeof *out);
    tg_check_plan(caps, kind, mode, &req, &out->e);
    if (loopback) {
        extra_t *x = &out->extra[out->nextra++];
        x->res = x->json_key = "network";
        snprintf(x->requested, sizeof x->requested, "loopback");
        x->reason = "no backend provides loopback-only networking (use \"none\" or \"full\")";
        x->blocks = true;
    }
    out->would_start = true;
    if (mode != TG_CONTAIN_REQUIRED)
        return;
    if (!tg_enforced_complete(&out->e, &miss)) {
        out->would_start = false;
        snprintf(out->refusal, sizeof out->refusal, "%s is not enforced here: %s",
                 tg_res_name(miss), out->e.r[miss].reason);
        return;
    }
    for (size_t i = 0; i < out->nextra; i++) {
        if (out->extra[i].blocks) {
            out->would_start = false;
            snprintf(out->refusal, sizeof out->refusal, "%s %s is not enforced here: %s",
                     out->extra[i].res, out->extra[i].requested, out->extra[i].reason);
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Text                                                                */

static void check_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static const char *dialect_name(tg_dialect_t d)
{
    return d == TG_DIALECT_OPENSENTIENCE ? "opensentience" : "mcp";
}

/* Columns: the key column ends at the same place whatever the indent. */
#define KEY_COL 26

static void text_header(FILE *f, const char *indent)
{
    fprintf(f, "%s%-*s %-13s %-13s %-13s %s\n", indent, KEY_COL - (int)strlen(indent), "limit",
            "effective", "source", "manifest", "operator");
}

static void text_row(FILE *f, const char *indent, const row_t *r)
{
    fprintf(f, "%s%-*s %-13s %-13s %-13s %s", indent, KEY_COL - (int)strlen(indent),
            tg_cfg_key_name(r->key), r->eff_text, tg_src_name(r->eff.src), r->man[0] ? r->man : "-",
            r->op[0] ? r->op : "-");
    if (r->note[0])
        fprintf(f, "  (%s)", r->note);
    fputc('\n', f);
}

/* <text> with <indent> before each line. */
static void text_indented(FILE *f, const char *indent, const char *text)
{
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        fprintf(f, "%s%.*s\n", indent, (int)n, text);
        text += n + (nl ? 1 : 0);
    }
}

/* What an opensentience agent's runtime does, in one or two lines. */
static void text_os(FILE *f, const tg_agent_cfg_t *a)
{
    char hb[16], to[16], win[16], cache[24];
    tg_unit_fmt_duration(hb, (int)sizeof hb, a->os.heartbeat_interval_ms);
    tg_unit_fmt_duration(to, (int)sizeof to, a->os.heartbeat_timeout_ms);
    tg_unit_fmt_duration(win, (int)sizeof win, a->os.idempotency_window_ms);
    tg_unit_fmt_bytes(cache, (int)sizeof cache, a->os.idempotency_max_bytes);
    fprintf(f, "  opensentience: one shared instance, started %s; heartbeat every %s, unhealthy "
               "after %s without one\n",
            a->start == TG_START_ON_DEMAND ? "by the first call" : "with serve", hb, to);
    fprintf(f, "  idempotent results replayed for %s (at most %s kept); an over-cap agent frame "
               "is %s\n",
            win, cache,
            a->os.on_oversize == TG_OVERSIZE_CLOSE ? "answered by restarting the agent" : "skipped");
}

static json_t *json_os(const tg_agent_cfg_t *a)
{
    if (a->dialect != TG_DIALECT_OPENSENTIENCE)
        return NULL;
    return json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "start",
                     a->start == TG_START_ON_DEMAND ? "on_demand" : "eager",
                     "heartbeat_interval_ms", (json_int_t)a->os.heartbeat_interval_ms,
                     "heartbeat_timeout_ms", (json_int_t)a->os.heartbeat_timeout_ms,
                     "idempotency_window_ms", (json_int_t)a->os.idempotency_window_ms,
                     "idempotency_max_bytes", (json_int_t)a->os.idempotency_max_bytes,
                     "on_oversize", a->os.on_oversize == TG_OVERSIZE_CLOSE ? "close" : "reject");
}

static void text_agent(FILE *f, const tg_agent_cfg_t *a, const agent_enf_t *ae, const char *kind,
                       tg_workspace_backend_t ws_backend)
{
    row_t rows[ROWS_MAX];
    size_t n = agent_rows(a, rows);
    char enf[ENF_TEXT_MAX];

    fprintf(f, "\nagent %s (%s)\n", a->id, dialect_name(a->dialect));
    if (a->manifest)
        fprintf(f, "  manifest %s\n", a->manifest->path);
    if (a->rate_shared)
        fprintf(f, "  rate_limit is shared across hosts (rate_scope shared, shared_mode %s)\n",
                a->shared_lease ? "lease" : "exact");
    if (a->conc_shared)
        fprintf(f, "  max_concurrent_calls is shared across hosts (concurrency_scope shared: "
                   "leased slots in the store)\n");
    for (size_t t = 0; t < a->ntools; t++)
        if (a->tools[t].lim.rate_shared)
            fprintf(f, "  tools.%s rate_limit is shared across hosts (rate_scope shared, shared_mode "
                       "%s)\n",
                    a->tools[t].name, a->shared_lease ? "lease" : "exact");
    if (a->workspace)
        fprintf(f, "  workspace %s: its size is the disk limit (containment.workspace_backend %s)\n",
                a->workspace, tg_workspace_backend_name(ws_backend));
    if (a->dialect == TG_DIALECT_OPENSENTIENCE)
        text_os(f, a);
    text_header(f, "  ");
    for (size_t i = 0; i < n; i++)
        text_row(f, "  ", &rows[i]);
    for (size_t t = 0; t < a->ntools; t++) {
        const tg_tool_cfg_t *tc = &a->tools[t];
        size_t tn = tool_rows(a, tc, rows);
        fprintf(f, "  tool %s (%s)\n", tc->name,
                tn ? "these, and the agent's limits" : "the agent's limits only");
        for (size_t i = 0; i < tn; i++)
            text_row(f, "    ", &rows[i]);
    }
    fprintf(f, "  enforced on this host (backend %s, mode %s)\n", kind,
            tg_contain_mode_name(ae->e.mode));
    if (tg_enforced_text(&ae->e, enf, sizeof enf) < 0)
        snprintf(enf, sizeof enf, "(enforcement table too large to show)\n");
    text_indented(f, "    ", enf);
    for (size_t i = 0; i < ae->nextra; i++)
        fprintf(f, "    %-8s %-10s %-7s %-8s %s\n", ae->extra[i].res, ae->extra[i].requested, "NO",
                "none", ae->extra[i].reason);
    if (!ae->would_start)
        fprintf(f, "  containment.mode required: this agent would not start: %s\n", ae->refusal);
}

/* The shared store: its redacted URL (never the password), whether it
 * answers a ping now, and which agents share their rate through it. */
typedef struct ping_state {
    bool done;
    int status;
} ping_state_t;

static void on_ping(void *arg, int status)
{
    ping_state_t *ps = arg;
    ps->done = true;
    ps->status = status;
}

static void text_store(FILE *f, const tg_config_t *cfg)
{
    char red[TG_STORE_URL_MAX];
    if (!cfg->store.redis) {
        fprintf(f, "\nstore local (nothing shared)\n");
        return;
    }
    tg_store_url_redact_str(cfg->store.url, red, sizeof red);
    uv_loop_t loop;
    tg_store_opts_t o;
    tg_store_t *st = NULL;
    tg_err_t err;
    ping_state_t ps = {false, 0};
    memset(&o, 0, sizeof o);
    o.kind = TG_STORE_REDIS;
    o.url = cfg->store.url;
    o.prefix = cfg->store.prefix;
    o.timeout_ms = cfg->store.timeout_ms ? cfg->store.timeout_ms : 1000;
    o.on_store_error = TG_STORE_POLICY_CLOSED;
    if (uv_loop_init(&loop) != 0) {
        fprintf(f, "\nstore %s: cannot check (no event loop)\n", red);
        return;
    }
    uint64_t t0 = uv_hrtime();
    if (tg_store_open(&loop, &o, &st, &err) < 0) {
        fprintf(f, "\nstore %s: %s\n", red, err.msg);
    } else {
        if (tg_store_ping(st, on_ping, &ps) < 0)
            ps = (ping_state_t){true, -EINVAL};
        /* The ping has its own timer: the loop ends with an answer. */
        for (int i = 0; i < 200 && !ps.done; i++)
            uv_run(&loop, UV_RUN_ONCE);
        double ms = (double)(uv_hrtime() - t0) / 1e6;
        if (ps.done && ps.status == 0)
            fprintf(f, "\nstore %s: answers (ping %.1f ms); on_store_error %s\n", red, ms,
                    tg_store_policy_name((tg_store_policy_t)cfg->store.on_store_error));
        else
            fprintf(f, "\nstore %s: does not answer (%s); on_store_error %s decides while it is "
                       "away\n",
                    red, ps.done ? strerror(-ps.status) : "no reply",
                    tg_store_policy_name((tg_store_policy_t)cfg->store.on_store_error));
        tg_store_close(st, NULL, NULL);
    }
    uv_walk(&loop, check_close_walk, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
    char lease[32];
    tg_unit_fmt_duration(lease, (int)sizeof lease,
                         cfg->store.slot_lease_ms != 0 ? cfg->store.slot_lease_ms
                                                       : TG_STORE_DEF_SLOT_LEASE_MS);
    for (size_t i = 0; i < cfg->nagents; i++) {
        if (cfg->agents[i].rate_shared)
            fprintf(f, "  shared: agents.%s rate_limit\n", cfg->agents[i].id);
        for (size_t t = 0; t < cfg->agents[i].ntools; t++)
            if (cfg->agents[i].tools[t].lim.rate_shared)
                fprintf(f, "  shared: agents.%s tools.%s rate_limit\n", cfg->agents[i].id,
                        cfg->agents[i].tools[t].name);
        if (cfg->agents[i].conc_shared)
            fprintf(f, "  shared: agents.%s max_concurrent_calls (slots leased for %s, renewed "
                       "every third of it)\n",
                    cfg->agents[i].id, lease);
    }
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */

static const char *const hier_names[TG_CG_NHIER] = {
    [TG_CG_V2] = "cgroup2",      [TG_CG_MEMORY] = "memory", [TG_CG_CPU] = "cpu",
    [TG_CG_CPUACCT] = "cpuacct", [TG_CG_PIDS] = "pids",
};

static json_t *json_row(const row_t *r)
{
    return json_pack("{s:o,s:s,s:s,s:s?,s:s?,s:s?}", "value", kjson(r->key, &r->eff), "text",
                     r->eff_text, "source", tg_src_name(r->eff.src), "manifest",
                     r->man[0] ? r->man : NULL, "operator", r->op[0] ? r->op : NULL, "note",
                     r->note[0] ? r->note : NULL);
}

static json_t *json_rows(const row_t *rows, size_t n)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < n; i++)
        json_object_set_new(o, tg_cfg_key_name(rows[i].key), json_row(&rows[i]));
    return o;
}

static json_t *json_enforced(const agent_enf_t *ae)
{
    char buf[ENF_TEXT_MAX];
    json_t *res, *o;

    if (tg_enforced_json(&ae->e, buf, sizeof buf) < 0 || !(res = json_loads(buf, 0, NULL)))
        return NULL;
    for (size_t i = 0; i < ae->nextra; i++) {
        const extra_t *x = &ae->extra[i];
        json_object_set_new(
            res, x->json_key,
            json_pack("{s:o,s:b,s:s,s:s}", "requested",
                      x->number ? json_integer((json_int_t)x->number) : json_string(x->requested),
                      "applied", 0, "backend", "none", "reason", x->reason));
    }
    o = json_pack("{s:s,s:s,s:o,s:b}", "backend", ae->e.backend, "mode",
                  tg_contain_mode_name(ae->e.mode), "resources", res, "would_start",
                  ae->would_start);
    if (o && !ae->would_start)
        json_object_set_new(o, "refusal", json_string(ae->refusal));
    return o;
}

static json_t *json_agent(const tg_agent_cfg_t *a, const agent_enf_t *ae)
{
    row_t rows[ROWS_MAX];
    json_t *tools = json_object();
    size_t n;

    for (size_t t = 0; tools && t < a->ntools; t++) {
        size_t tn = tool_rows(a, &a->tools[t], rows);
        json_object_set_new(tools, a->tools[t].name, json_rows(rows, tn));
    }
    n = agent_rows(a, rows);
    return json_pack("{s:s,s:s,s:s?,s:s?,s:o,s:o,s:o,s:o*}", "id", a->id, "dialect",
                     dialect_name(a->dialect), "manifest", a->manifest ? a->manifest->path : NULL,
                     "workspace", a->workspace, "limits", json_rows(rows, n), "tools", tools,
                     "enforced", json_enforced(ae), "opensentience", json_os(a));
}

static json_t *json_host(const tg_contain_caps_t *caps, tg_contain_kind_t kind,
                         tg_contain_mode_t mode, const char *why)
{
    json_t *h = json_object(), *ctl = json_array();

    for (int i = 0; h && i < TG_CG_NHIER; i++) {
        const tg_cg_hier_caps_t *c = &caps->h[i];
        json_object_set_new(h, hier_names[i],
                            json_pack("{s:b,s:b,s:b,s:s?,s:s?}", "mounted", c->mounted, "usable",
                                      c->usable, "writable", c->writable, "path",
                                      c->usable ? c->own_dir : NULL, "why",
                                      c->why[0] ? c->why : NULL));
    }
    if (caps->v2_memory)
        json_array_append_new(ctl, json_string("memory"));
    if (caps->v2_cpu)
        json_array_append_new(ctl, json_string("cpu"));
    if (caps->v2_pids)
        json_array_append_new(ctl, json_string("pids"));
    return json_pack("{s:s,s:s,s:s?,s:o,s:o,s:b,s:b,s:b,s:b,s:s?,s:b}", "backend",
                     tg_contain_kind_name(kind), "mode", tg_contain_mode_name(mode), "why",
                     why[0] ? why : NULL, "hierarchies", h, "cgroup2_controllers", ctl,
                     "cgroup_kill", caps->v2_kill, "swap_accounting", caps->v1_memsw, "netns",
                     caps->netns, "tmpfs", caps->tmpfs, "tmpfs_why",
                     caps->tmpfs_why[0] ? caps->tmpfs_why : NULL, "root", caps->root);
}

/* callers[]: how each is identified and the limits that apply on top of
 * agent and tool limits. The text report and --json say the same: an
 * unset limit is "unlimited" (the caller adds none; agent and tool
 * limits still apply), an unset burst is the caller's rate count (as
 * tg_gcra_init takes burst 0), and identification is never a bare -1. */

#define WHO_MAX 640 /* fixed internal bound: one caller's "identified by" text */

typedef struct caller_view {
    char who[WHO_MAX];
    char rate[VAL_MAX], burst[VAL_MAX], conc[VAL_MAX];
    const char *rate_src, *burst_src, *conc_src; /* "caller", "default" or "unset" */
} caller_view_t;

/* Append ", " (unless first) and printf text to <v->who>. */
static void who_add(caller_view_t *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void who_add(caller_view_t *v, const char *fmt, ...)
{
    size_t n = strlen(v->who);
    va_list ap;
    if (n > 0 && n + 2 < sizeof v->who) {
        memcpy(v->who + n, ", ", 3);
        n += 2;
    }
    va_start(ap, fmt);
    vsnprintf(v->who + n, sizeof v->who - n, fmt, ap);
    va_end(ap);
}

static void caller_view(const tg_caller_cfg_t *cc, caller_view_t *v)
{
    memset(v, 0, sizeof *v);
    if (cc->uid >= 0)
        who_add(v, "uid %lld", (long long)cc->uid);
    if (cc->gid >= 0)
        who_add(v, "gid %lld", (long long)cc->gid);
    if (cc->ntokens > 0)
        who_add(v, "bearer token (%zu digest%s)", cc->ntokens, cc->ntokens == 1 ? "" : "s");
    if (cc->has_jwt)
        who_add(v, "JWT from issuer %s for audience %s with %s = %s", cc->jwt.issuer,
                cc->jwt.audience, cc->jwt.claim ? cc->jwt.claim : TG_DEF_JWT_CLAIM, cc->name);
    if (strcmp(cc->name, "default") == 0)
        who_add(v, "any peer no other entry identifies");

    if (cc->lim.rate_src != TG_SRC_DEFAULT) {
        tg_unit_fmt_rate(v->rate, (int)sizeof v->rate, cc->lim.rate_limit);
        v->rate_src = "caller";
    } else {
        snprintf(v->rate, sizeof v->rate, "unlimited");
        v->rate_src = "unset";
    }
    if (cc->lim.burst_src != TG_SRC_DEFAULT) {
        snprintf(v->burst, sizeof v->burst, "%" PRIu32, cc->lim.burst);
        v->burst_src = "caller";
    } else if (cc->lim.rate_src != TG_SRC_DEFAULT) {
        snprintf(v->burst, sizeof v->burst, "%" PRIu64 " (default)",
                 (uint64_t)cc->lim.rate_limit.count);
        v->burst_src = "default";
    } else {
        snprintf(v->burst, sizeof v->burst, "unlimited");
        v->burst_src = "unset";
    }
    if (cc->lim.concurrent_src != TG_SRC_DEFAULT) {
        snprintf(v->conc, sizeof v->conc, "%" PRIu32, cc->lim.max_concurrent_calls);
        v->conc_src = "caller";
    } else {
        snprintf(v->conc, sizeof v->conc, "unlimited");
        v->conc_src = "unset";
    }
}

/* One limit of a caller: {"value": N, "text", "source"}, or for an unset
 * one {"unlimited": true, "text": "unlimited", "source": "unset"}. */
static json_t *json_caller_lim(uint64_t value, const char *text, const char *src)
{
    if (strcmp(src, "unset") == 0)
        return json_pack("{s:b,s:s,s:s}", "unlimited", 1, "text", text, "source", src);
    return json_pack("{s:I,s:s,s:s}", "value", (json_int_t)value, "text", text, "source", src);
}

static json_t *json_callers(const tg_config_t *cfg)
{
    json_t *arr = json_array();
    caller_view_t v;
    for (size_t i = 0; arr && i < cfg->ncallers; i++) {
        const tg_caller_cfg_t *cc = &cfg->callers[i];
        caller_view(cc, &v);
        json_t *rate =
            cc->lim.rate_src == TG_SRC_DEFAULT
                ? json_caller_lim(0, v.rate, v.rate_src)
                : json_pack("{s:I,s:I,s:s,s:s}", "count", (json_int_t)cc->lim.rate_limit.count,
                            "period_ms", (json_int_t)cc->lim.rate_limit.period_ms, "text", v.rate,
                            "source", v.rate_src);
        uint64_t burst =
            cc->lim.burst_src != TG_SRC_DEFAULT ? cc->lim.burst : cc->lim.rate_limit.count;
        json_t *e = json_pack("{s:s,s:s,s:{s:o,s:o,s:o}}", "name", cc->name, "identified_by", v.who,
                              "limits", "rate_limit", rate, "burst",
                              json_caller_lim(burst, v.burst, v.burst_src), "max_concurrent_calls",
                              json_caller_lim(cc->lim.max_concurrent_calls, v.conc, v.conc_src));
        /* The structured identity, each member present only when set. */
        if (e != NULL && cc->uid >= 0)
            json_object_set_new(e, "uid", json_integer((json_int_t)cc->uid));
        if (e != NULL && cc->gid >= 0)
            json_object_set_new(e, "gid", json_integer((json_int_t)cc->gid));
        if (e != NULL && cc->ntokens > 0)
            json_object_set_new(e, "token_digests", json_integer((json_int_t)cc->ntokens));
        if (e != NULL && cc->has_jwt)
            json_object_set_new(e, "jwt",
                                json_pack("{s:s,s:s,s:s,s:s}", "issuer", cc->jwt.issuer, "audience",
                                          cc->jwt.audience, "claim",
                                          cc->jwt.claim ? cc->jwt.claim : TG_DEF_JWT_CLAIM,
                                          "equals", cc->name));
        json_array_append_new(arr, e);
    }
    return json_pack("{s:b,s:o}", "callers_only", cfg->callers_only, "entries",
                     arr ? arr : json_array());
}

/* ------------------------------------------------------------------ */
/* Report                                                              */

/* The "start" member of the JSON report. */
static json_t *json_start(const tg_check_problems_t *p)
{
    json_t *lines = json_array(), *notes = json_array();
    for (size_t i = 0; lines && i < p->n; i++)
        json_array_append_new(lines, json_string(p->line[i]));
    for (size_t i = 0; notes && i < p->nnotes; i++)
        json_array_append_new(notes, json_string(p->note[i]));
    return json_pack("{s:b,s:o,s:I,s:o}", "ok", p->n + p->dropped == 0, "problems",
                     lines ? lines : json_array(), "more", (json_int_t)p->dropped, "notes",
                     notes ? notes : json_array());
}

/* The start section of the text report. */
static void text_start(FILE *f, const tg_check_problems_t *p)
{
    if (p->n + p->dropped == 0) {
        fprintf(f, "\nstart on this host: nothing in the way (listener directories, commands)\n");
    } else {
        fprintf(f, "\nstart on this host: would fail\n");
        for (size_t i = 0; i < p->n; i++)
            fprintf(f, "  %s\n", p->line[i]);
        if (p->dropped > 0)
            fprintf(f, "  (%zu more)\n", p->dropped);
    }
    for (size_t i = 0; i < p->nnotes; i++)
        fprintf(f, "  note: %s\n", p->note[i]);
}

int tg_check_report(FILE *out, const tg_config_t *cfg, const tg_contain_caps_t *caps, bool json,
                    const tg_check_problems_t *start, const tg_check_hub_t *hub)
{
    tg_contain_mode_t mode = tg_config_contain_mode(cfg);
    char why[TG_REASON_MAX], frame[VAL_MAX];
    tg_contain_kind_t kind = tg_check_backend(caps, mode, why, sizeof why);
    agent_enf_t *enf = calloc(cfg->nagents ? cfg->nagents : 1, sizeof *enf);
    int rc = 0;

    if (!enf)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nagents; i++)
        agent_enforcement(cfg, &cfg->agents[i], caps, kind, mode, &enf[i]);
    tg_unit_fmt_bytes(frame, (int)sizeof frame, cfg->max_frame_bytes);

    if (json) {
        json_t *agents = json_array(), *root;
        for (size_t i = 0; agents && i < cfg->nagents; i++)
            json_array_append_new(agents, json_agent(&cfg->agents[i], &enf[i]));
        root = json_pack("{s:s?,s:b,s:{s:s,s:s},s:{s:{s:I,s:s,s:s}},s:o,s:o}", "config", cfg->path,
                         "valid", 1, "containment", "mode",
                         tg_containment_mode_name(cfg->containment_mode), "source",
                         tg_src_name(cfg->containment_src), "router", "max_frame_bytes", "value",
                         (json_int_t)cfg->max_frame_bytes, "text", frame, "source",
                         tg_src_name(cfg->max_frame_src), "agents", agents, "host",
                         json_host(caps, kind, mode, why));
        if (root != NULL)
            json_object_set_new(root, "callers", json_callers(cfg));
        if (root != NULL && start != NULL)
            json_object_set_new(root, "start", json_start(start));
        if (root != NULL && hub != NULL && tg_check_hub_json(root, hub) < 0) {
            json_decref(root);
            root = NULL;
        }
        if (!root)
            rc = -ENOMEM;
        else if (json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
                 fputc('\n', out) == EOF)
            rc = -EIO;
        json_decref(root);
    } else {
        tg_contain_t *host = calloc(1, sizeof *host);
        char *caps_text = malloc(CAPS_TEXT_MAX);
        if (!host || !caps_text) {
            free(host);
            free(caps_text);
            free(enf);
            return -ENOMEM;
        }
        fprintf(out, "config %s: valid\n", cfg->path ? cfg->path : "(built-in defaults)");
        fprintf(out, "containment.mode %s (%s)\n", tg_containment_mode_name(cfg->containment_mode),
                tg_src_name(cfg->containment_src));
        fprintf(out, "\nrouter\n");
        fprintf(out, "  %-*s %-13s %s\n", KEY_COL - 2, "limit", "effective", "source");
        fprintf(out, "  %-*s %-13s %s\n", KEY_COL - 2, "max_frame_bytes", frame,
                tg_src_name(cfg->max_frame_src));
        for (size_t i = 0; i < cfg->nagents; i++)
            text_agent(out, &cfg->agents[i], &enf[i], tg_contain_kind_name(kind),
                       cfg->workspace_backend);
        /* The capability summary of the containment module, for a context
         * that was detected but not initialised. */
        host->mode = mode;
        host->kind = kind;
        host->caps = *caps;
        snprintf(host->why, sizeof host->why, "%s", why);
        if (tg_contain_caps_text(host, caps_text, CAPS_TEXT_MAX) < 0)
            snprintf(caps_text, CAPS_TEXT_MAX, "containment: (summary too large to show)\n");
        text_store(out, cfg);
        if (cfg->ncallers > 0)
            fprintf(out,
                    "\ncallers (limits on top of agent and tool limits; unset: unlimited)\n"
                    "  %-20s %-14s %-14s %-21s %s\n",
                    "caller", "rate_limit", "burst", "max_concurrent_calls", "identified by");
        for (size_t i = 0; i < cfg->ncallers; i++) {
            caller_view_t v;
            caller_view(&cfg->callers[i], &v);
            fprintf(out, "  %-20s %-14s %-14s %-21s %s\n", cfg->callers[i].name, v.rate, v.burst,
                    v.conc, v.who);
        }
        if (cfg->ncallers > 0)
            fprintf(out, "  router.callers_only %s: %s\n", cfg->callers_only ? "true" : "false",
                    cfg->callers_only ? "a peer no entry identifies is refused"
                                      : "a peer no entry identifies gets no caller limits");
        if (hub != NULL)
            tg_check_hub_text(out, hub);
        fprintf(out, "\nhost (detected for this process; check creates no cgroup)\n%s", caps_text);
        if (start != NULL)
            text_start(out, start);
        free(host);
        free(caps_text);
        if (fflush(out) != 0 || ferror(out))
            rc = -EIO;
    }
    free(enf);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Command line                                                        */

/* Print the config error <msg> (stderr; also stdout as JSON with --json). */
static int check_fail(const char *msg, bool json)
{
    fprintf(stderr, "toolgate check: %s\n", msg);
    if (json) {
        json_t *o = json_pack("{s:b,s:s}", "valid", 0, "error", msg);
        if (o) {
            json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
            json_decref(o);
        }
        fflush(stdout);
    }
    return 1;
}

/* check_fail for an error found after the load: the file named first,
 * as the load's own errors are. */
static int check_fail_at(const char *path, const char *msg, bool json)
{
    char line[TG_ERR_MAX + 256];
    if (path == NULL)
        return check_fail(msg, json);
    snprintf(line, sizeof line, "%s: %s", path, msg);
    return check_fail(line, json);
}

int tg_cli_check(int argc, char **argv)
{
    const char *config_path = NULL, *limits[CHECK_LIMITS_MAX];
    int nlimits = 0, i = 0, rc;
    bool json = false;
    tg_config_t cfg;
    tg_err_t err;
    tg_contain_caps_t *caps;

    for (; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '='), *val = NULL;
        size_t klen = strncmp(a, "--", 2) == 0 && eq ? (size_t)(eq - a) : strlen(a);
#define OPT(name) (klen == strlen(name) && strncmp(a, name, klen) == 0)
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (OPT("--help") || OPT("-h")) {
            tg_cli_help_of(stdout, "check");
            return 0;
        }
        if (OPT("--json")) {
            json = true;
            continue;
        }
        if (!OPT("--config") && !OPT("--limit")) {
            fprintf(stderr,
                    "toolgate check: unknown argument '%s' (expected --config, --limit, --json "
                    "or -- CMD)\n",
                    a);
            return 2;
        }
        if (klen < strlen(a)) {
            val = a + klen + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(stderr, "toolgate check: %s needs a value\n", a);
            return 2;
        }
        if (OPT("--config")) {
            config_path = val;
        } else if (nlimits < CHECK_LIMITS_MAX) {
            limits[nlimits++] = val;
        } else {
            fprintf(stderr, "toolgate check: too many --limit options (at most %d)\n",
                    CHECK_LIMITS_MAX);
            return 2;
        }
#undef OPT
    }

    /* The report shows what each manifest asked and what it got (the
     * "manifest" and "source" columns): the load's notices would repeat it. */
    tg_notice_set_sink(tg_notice_discard, NULL);
    if (tg_config_default(&cfg) < 0)
        return check_fail("out of memory", json);
    rc = 0;
    if (config_path && tg_config_load_file(&cfg, config_path, &err) < 0)
        rc = -1;
    if (rc == 0 && i < argc && tg_config_set_command(&cfg, 0, argv + i, &err) < 0)
        rc = -1;
    for (int k = 0; rc == 0 && k < nlimits; k++)
        if (tg_config_apply_limit(&cfg, 0, limits[k], &err) < 0)
            rc = -1;
    if (rc == 0 && tg_config_validate(&cfg, &err) < 0)
        rc = -1;
    if (rc < 0) {
        tg_config_free(&cfg);
        return check_fail(err.msg, json);
    }

    caps = calloc(1, sizeof *caps);
    if (!caps) {
        tg_config_free(&cfg);
        return check_fail("out of memory", json);
    }
    tg_contain_detect(caps, NULL);
    /* The config is valid; would it start here? */
    tg_check_problems_t *start = calloc(1, sizeof *start);
    if (!start) {
        free(caps);
        tg_config_free(&cfg);
        return check_fail("out of memory", json);
    }
    /* The policy as serve would build it (a policy that does not build
     * is an invalid config), and the names its fronts expose. */
    tg_check_hub_t hub;
    if (tg_check_hub(&hub, &cfg, &err) < 0) {
        free(start);
        free(caps);
        rc = check_fail_at(cfg.path, err.msg, json);
        tg_config_free(&cfg);
        return rc;
    }
    int problems = tg_check_start(start, &cfg, cfg.nlisten > 0);
    rc = tg_check_report(stdout, &cfg, caps, json, start, &hub);
    free(caps);
    tg_config_free(&cfg);
    for (size_t k = 0; rc == 0 && k < start->n; k++)
        fprintf(stderr, "toolgate check: %s\n", start->line[k]);
    for (size_t k = 0; rc == 0 && k < hub.nfind; k++)
        fprintf(stderr, "toolgate check: %s: %s\n", hub.find[k].error ? "error" : "warning",
                hub.find[k].line);
    int hub_errors = hub.errors;
    tg_check_hub_free(&hub);
    free(start);
    if (rc < 0) {
        fprintf(stderr, "toolgate check: cannot write the report: %s\n", strerror(-rc));
        return 1;
    }
    if (hub_errors > 0)
        fprintf(stderr, "toolgate check: the policy has %d error%s: it would not protect what "
                        "it names\n",
                hub_errors, hub_errors == 1 ? "" : "s");
    if (problems > 0) {
        fprintf(stderr,
                "toolgate check: the config is valid but %d thing%s would stop a start on this "
                "host\n",
                problems, problems == 1 ? "" : "s");
        return 1;
    }
    return hub_errors > 0 ? 1 : 0;
}
