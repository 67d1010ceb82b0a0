/* Containment: names, base cgroups, orphan cleanup, controller
 * delegation and the instance lifecycle (see contain.h). Detection is in
 * contain_detect.c, the cgroupfs file helpers in contain_cgfs.c, the
 * enforcement report in contain_report.c, the backends behind
 * contain_impl.h.
 *
 * Layout on the host, per hierarchy toolgate can write:
 *   <own cgroup>/toolgate-<pid>/<agent>-<n>     one agent instance
 *   <own cgroup>/toolgate-<pid>/router          cgroup2 only: toolgate itself,
 *                                               when it had to leave its own
 *                                               cgroup to delegate controllers
 * Everything stays below the cgroup toolgate was started in, so it works in
 * a delegated subtree (systemd Delegate=yes, a container) and never touches
 * another service's cgroups. Only toolgate itself is ever moved.
 */
#define _GNU_SOURCE
#include "limits/contain_impl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config/units.h"

#define CG_WAIT_MS 500       /* fixed internal bound: destroy: wait for the kernel to empty a cgroup */
#define CG_KILL_ROUNDS 100   /* fixed internal bound: v1 kill: rounds of SIGKILL over cgroup.procs */
#define ORPHAN_DEPTH_MAX 8   /* fixed internal bound: orphan trees are 2 deep; bound a hostile one */

/* ---- rlimits of an instance ---- */

void tg__contain_add_rlimit(tg_contain_inst_t *ci, int resource, uint64_t value)
{
    for (size_t i = 0; i < ci->nrl; i++) {
        if (ci->rl[i].resource == resource) {
            ci->rl[i].value = value;
            return;
        }
    }
    if (ci->nrl < TG_CONTAIN_RL_MAX)
        ci->rl[ci->nrl++] = (tg_contain_rlimit_t){.resource = resource, .value = value};
}

/* ---- names ---- */

static bool name_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

int tg_contain_sanitize(const char *id, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(id);
    bool ok = n >= 1 && n <= TG_CG_AGENT_NAME_MAX && id[0] != '.';
    for (size_t i = 0; ok && i < n; i++)
        ok = name_char_ok(id[i]);
    if (ok) {
        if (cap <= n)
            return -ENOSPC;
        memcpy(out, id, n + 1);
        return (int)n;
    }
    /* Anything else is encoded, so '/', "..", a leading dot (hidden, and
     * "." / "..") or a control byte can never reach a path. */
    if (1 + 2 * n <= TG_CG_AGENT_NAME_MAX) {
        if (cap <= 1 + 2 * n)
            return -ENOSPC;
        out[0] = 'x';
        for (size_t i = 0; i < n; i++) {
            out[1 + 2 * i] = hex[(unsigned char)id[i] >> 4];
            out[2 + 2 * i] = hex[(unsigned char)id[i] & 15];
        }
        out[1 + 2 * n] = '\0';
        return (int)(1 + 2 * n);
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)id[i];
        h *= 1099511628211ull;
    }
    if (cap <= 17)
        return -ENOSPC;
    out[0] = 'h';
    for (int i = 0; i < 16; i++)
        out[1 + i] = hex[(h >> (60 - 4 * i)) & 15];
    out[17] = '\0';
    return 17;
}

const char *tg_contain_mode_name(tg_contain_mode_t m)
{
    switch (m) {
    case TG_CONTAIN_BEST_EFFORT: return "best_effort";
    case TG_CONTAIN_REQUIRED: return "required";
    case TG_CONTAIN_OFF: return "off";
    }
    return "?";
}

int tg_contain_mode_parse(const char *s, tg_contain_mode_t *out)
{
    if (strcmp(s, "best_effort") == 0)
        *out = TG_CONTAIN_BEST_EFFORT;
    else if (strcmp(s, "required") == 0)
        *out = TG_CONTAIN_REQUIRED;
    else if (strcmp(s, "off") == 0)
        *out = TG_CONTAIN_OFF;
    else
        return -EINVAL;
    return 0;
}

const char *tg_contain_kind_name(tg_contain_kind_t k)
{
    switch (k) {
    case TG_CONTAIN_AUTO: return "auto";
    case TG_CONTAIN_NONE: return "none";
    case TG_CONTAIN_RLIMIT: return "rlimit";
    case TG_CONTAIN_CGROUP1: return "cgroup1";
    case TG_CONTAIN_CGROUP2: return "cgroup2";
    }
    return "?";
}

void tg_contain_req_default(tg_contain_req_t *req)
{
    memset(req, 0, sizeof *req);
    req->memory_bytes = TG_CONTAIN_DEF_MEMORY;
    req->cpu_millicores = TG_CONTAIN_DEF_CPU_MC;
    req->pids = TG_CONTAIN_DEF_PIDS;
    req->disk_bytes = TG_CONTAIN_DEF_DISK;
    req->nofile = TG_CONTAIN_DEF_NOFILE;
}

/* ---- init: orphans, base cgroups, delegation (detection: contain_detect.c) ---- */

static bool parse_base_name(const char *name, pid_t *pid)
{
    static const char pfx[] = "toolgate-";
    if (strncmp(name, pfx, sizeof pfx - 1) != 0)
        return false;
    const char *d = name + sizeof pfx - 1;
    size_t n = strlen(d);
    if (n == 0 || n > 10)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] < '0' || d[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(d[i] - '0');
    }
    if (v == 0 || v > (uint64_t)INT_MAX)
        return false;
    *pid = (pid_t)v;
    return true;
}

/* Post-order removal of a dead toolgate's cgroup tree: kill what still
 * runs in each directory, then remove it. */
static void remove_tree(const char *dir, unsigned depth)
{
    if (depth > ORPHAN_DEPTH_MAX)
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[TG_CG_PATH_MAX];
            if (tg__cg_join(child, dir, e->d_name) == 0)
                remove_tree(child, depth + 1);
        }
        closedir(d);
    }
    tg__cg_kill_procs(dir, CG_KILL_ROUNDS);
    tg__cg_rmdir(dir, CG_WAIT_MS);
}

static unsigned clean_orphans(const tg_contain_t *c, int hi)
{
    const tg_cg_hier_caps_t *h = &c->caps.h[hi];
    DIR *d = opendir(h->own_dir);
    if (!d)
        return 0;
    unsigned removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid;
        if (e->d_type != DT_DIR || !parse_base_name(e->d_name, &pid))
            continue;
        /* A live pid (or one we may not signal) owns its tree. Our own pid
         * can only name a tree left by an earlier toolgate with the same
         * pid: we have made nothing yet. The pid is read in our pid
         * namespace; toolgates in other pid namespaces must not share this
         * cgroup (a cgroup namespace per container keeps them apart). */
        if (pid != c->self && (kill(pid, 0) == 0 || errno == EPERM))
            continue;
        char base[TG_CG_PATH_MAX];
        if (tg__cg_join(base, h->own_dir, e->d_name) < 0)
            continue;
        /* cgroup.kill takes the whole subtree at once, forks included. */
        if (hi == TG_CG_V2 && tg__cg_exists(base, "cgroup.kill"))
            tg__cg_kill_v2(base, CG_WAIT_MS);
        remove_tree(base, 0);
        if (access(base, F_OK) != 0)
            removed++;
    }
    closedir(d);
    return removed;
}

static bool make_base(tg_contain_t *c, int i)
{
    tg_cg_hier_caps_t *h = &c->caps.h[i];
    if (h->alias >= 0) {
        if (c->base[h->alias][0] == '\0') {
            h->writable = false; /* keeps the backend choice loop finite */
            snprintf(h->why, sizeof h->why, "same mount as %s, which is not writable",
                     tg__cg_hier_name(h->alias));
            return false;
        }
        tg__copy_str(c->base[i], sizeof c->base[i], c->base[h->alias]);
        return true;
    }
    char name[32];
    snprintf(name, sizeof name, "toolgate-%ld", (long)c->self);
    int rc = tg__cg_join(c->base[i], h->own_dir, name);
    if (rc == 0)
        rc = tg__cg_mkdir(c->base[i]);
    if (rc < 0) {
        c->base[i][0] = '\0';
        h->writable = false;
        snprintf(h->why, sizeof h->why, "mkdir toolgate-%ld: %s", (long)c->self, strerror(-rc));
        return false;
    }
    return true;
}

/* Enable the wanted controllers for our children: in the own cgroup's
 * subtree_control (unless already there) and in the base's. cgroup2's
 * no-internal-process rule forbids that while the own cgroup (not the
 * root) holds processes, so toolgate first moves itself, and only itself,
 * into base/router. If other processes share the own cgroup, the
 * controllers stay off and the report says why. */
static void v2_delegate(tg_contain_t *c)
{
    tg_contain_caps_t *caps = &c->caps;
    tg_cg_hier_caps_t *h = &caps->h[TG_CG_V2];
    unsigned want = (caps->v2_cpu ? TG_CG_CTL_CPU : 0) | (caps->v2_memory ? TG_CG_CTL_MEMORY : 0) |
                    (caps->v2_pids ? TG_CG_CTL_PIDS : 0);
    if (want == 0)
        return;
    unsigned missing = want & ~tg__cg_read_ctls(h->own_dir, "cgroup.subtree_control");
    bool is_root = strcmp(h->own_dir, h->mount) == 0;
    if (missing && !is_root) {
        long others = 0, mine = 0;
        char buf[TG_CG_READ_MAX];
        if (tg__cg_read(h->own_dir, "cgroup.procs", buf, sizeof buf) >= 0) {
            char *save = NULL;
            for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
                if (atol(t) == (long)c->self)
                    mine++;
                else
                    others++;
            }
        }
        if (others > 0) {
            snprintf(c->why, sizeof c->why,
                     "cgroup2 controllers not delegated: toolgate's cgroup holds other processes");
            tg__caps_set_ctls(caps, 0);
            return;
        }
        if (mine > 0) {
            char leaf[TG_CG_PATH_MAX];
            if (tg__cg_join(leaf, c->base[TG_CG_V2], "router") == 0 && tg__cg_mkdir(leaf) == 0 &&
                tg__cg_write(leaf, "cgroup.procs", "0") == 0)
                c->self_moved = true;
        }
    }
    if (missing)
        tg__cg_enable_ctls(h->own_dir, missing);
    tg__cg_enable_ctls(c->base[TG_CG_V2], want);
    /* What the base actually enables is what instances get. */
    tg__caps_set_ctls(caps, tg__cg_read_ctls(c->base[TG_CG_V2], "cgroup.subtree_control"));
    if (!tg__caps_v2_ctl(caps))
        snprintf(c->why, sizeof c->why,
                 "cgroup2 controllers could not be enabled below toolgate's cgroup");
}

static const tg_contain_ops_t *ops_for(tg_contain_kind_t k)
{
    switch (k) {
    case TG_CONTAIN_CGROUP2: return &tg__contain_cgroup2_ops;
    case TG_CONTAIN_CGROUP1: return &tg__contain_cgroup1_ops;
    case TG_CONTAIN_RLIMIT: return &tg__contain_rlimit_ops;
    case TG_CONTAIN_NONE:
    case TG_CONTAIN_AUTO: break;
    }
    return &tg__contain_none_ops;
}

/* Make the base cgroups backend <k> needs; false when none could be made. */
static bool make_bases(tg_contain_t *c, tg_contain_kind_t k)
{
    if (k == TG_CONTAIN_CGROUP2) {
        if (!tg__caps_hier_ok(&c->caps, TG_CG_V2) || !make_base(c, TG_CG_V2))
            return false;
        c->caps.v2_kill = tg__cg_exists(c->base[TG_CG_V2], "cgroup.kill");
        return true;
    }
    if (k == TG_CONTAIN_CGROUP1) {
        bool any = false;
        for (int i = TG_CG_MEMORY; i < TG_CG_NHIER; i++) {
            if (tg__caps_hier_ok(&c->caps, i) && make_base(c, i) && i != TG_CG_CPUACCT)
                any = true;
        }
        /* Hybrid hosts: the unified hierarchy beside v1 brings cgroup.kill
         * and a cpu.stat that works without any controller. */
        if (any && tg__caps_hier_ok(&c->caps, TG_CG_V2) && make_base(c, TG_CG_V2))
            c->caps.v2_kill = tg__cg_exists(c->base[TG_CG_V2], "cgroup.kill");
        return any;
    }
    return true;
}

static void remove_bases(tg_contain_t *c)
{
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (c->base[i][0] && c->caps.h[i].alias < 0)
            tg__cg_rmdir(c->base[i], 0);
        c->base[i][0] = '\0';
    }
}

int tg_contain_init(tg_contain_t *c, const tg_contain_opts_t *opts, tg_err_t *err)
{
    static const tg_contain_opts_t defaults;
    if (!opts)
        opts = &defaults;
    memset(c, 0, sizeof *c);
    c->mode = opts->mode;
    c->self = opts->self_pid > 0 ? opts->self_pid : getpid();
    tg_contain_detect(&c->caps, opts);

    if (c->mode == TG_CONTAIN_OFF) {
        c->kind = TG_CONTAIN_NONE;
        c->ops = ops_for(c->kind);
        tg__copy_str(c->why, sizeof c->why, "containment.mode is off");
        return 0;
    }
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (tg__caps_hier_ok(&c->caps, i) && c->caps.h[i].alias < 0)
            c->orphans_removed += clean_orphans(c, i);
    }

    tg_contain_kind_t k = opts->backend;
    if (k == TG_CONTAIN_AUTO) {
        /* A failed mkdir marks its hierarchy unwritable, so each round
         * picks a weaker backend; rlimit always succeeds. */
        for (;;) {
            k = tg__contain_choose(&c->caps);
            if (make_bases(c, k))
                break;
            remove_bases(c);
        }
    } else if (!make_bases(c, k)) {
        remove_bases(c);
        return tg_err_set(
            err, -ENOTSUP, "containment backend %s is not available on this host (%s)",
            tg_contain_kind_name(k),
            k == TG_CONTAIN_CGROUP2 ? c->caps.h[TG_CG_V2].why : "no writable v1 hierarchy");
    }
    c->kind = k;
    c->ops = ops_for(k);
    if (k == TG_CONTAIN_CGROUP2)
        v2_delegate(c);
    /* After v2_delegate: the watchdog must not sit in the cgroup that
     * toolgate empties of itself. Only on the host's real cgroupfs: a
     * test's fake tree names pids that are not its own. */
    if ((k == TG_CONTAIN_CGROUP1 || k == TG_CONTAIN_CGROUP2) && opts->mountinfo_path == NULL &&
        opts->self_cgroup_path == NULL && opts->self_pid == 0 && !opts->no_watchdog)
        c->watch_errno = -tg__contain_watch_start(c);
    if (c->why[0] == '\0') {
        if (k == TG_CONTAIN_RLIMIT)
            tg__copy_str(c->why, sizeof c->why,
                         "no writable cgroup hierarchy below toolgate's cgroup");
        else if (k == TG_CONTAIN_CGROUP1 && tg__caps_hier_ok(&c->caps, TG_CG_V2))
            tg__copy_str(c->why, sizeof c->why,
                         "controllers on cgroup v1; the cgroup2 mount adds cgroup.kill");
    }
    return 0;
}

int tg_contain_fini(tg_contain_t *c)
{
    int rc = 0;
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (c->base[i][0] == '\0' || c->caps.h[i].alias >= 0)
            continue;
        /* toolgate cannot leave base/router without breaking the
         * no-internal-process rule of its old cgroup; the next start's
         * orphan cleanup removes the pair once this pid is gone. */
        int r = tg__cg_rmdir(c->base[i], c->self_moved && i == TG_CG_V2 ? 0 : CG_WAIT_MS);
        if (r < 0 && rc == 0)
            rc = (r == -ENOTEMPTY) ? -EBUSY : r;
    }
    for (int i = 0; i < TG_CG_NHIER; i++)
        c->base[i][0] = '\0';
    tg__contain_watch_stop(c);
    return rc;
}

/* ---- instances ---- */

/* Bandwidth and connection counts: no backend shapes traffic (tc and
 * netem are not toolgate's to drive) or counts an agent's sockets. A
 * network namespace with no route out (network "none", applied) leaves
 * nothing to shape or count; anything else is reported not applied, with
 * the way out, so that "required" refuses it rather than run without. */
static void net_requests(tg_contain_inst_t *ci)
{
    static const struct {
        tg_res_t r;
        const char *key;
    } nr[] = {{TG_RES_BANDWIDTH, "bandwidth_limit"}, {TG_RES_CONNECTIONS, "max_connections"}};
    tg_enforced_t *e = &ci->enforced;

    for (size_t i = 0; i < sizeof nr / sizeof nr[0]; i++) {
        if (!e->r[nr[i].r].requested)
            continue;
        if (e->r[TG_RES_NETWORK].applied)
            tg_enforced_set(e, nr[i].r, true, e->r[nr[i].r].value, "netns",
                            "network none: no route out of the agent's namespace", NULL);
        else
            tg__enf_no(ci, nr[i].r, "none",
                       "no backend %s; remove resources.network.%s, set network \"none\", or "
                       "use containment.mode best_effort",
                       nr[i].r == TG_RES_BANDWIDTH ? "shapes bandwidth" : "counts connections",
                       nr[i].key);
    }
}

static void common_limits(tg_contain_inst_t *ci)
{
    const tg_contain_req_t *q = &ci->req;
    tg_enforced_t *e = &ci->enforced;
    char sz[32];
    if (q->nofile) {
        tg__contain_add_rlimit(ci, RLIMIT_NOFILE, q->nofile);
        tg_enforced_set(e, TG_RES_NOFILE, true, q->nofile, "rlimit", "RLIMIT_NOFILE", NULL);
    }
    uint64_t fsize = q->fsize ? q->fsize : q->disk_bytes;
    if (fsize)
        tg__contain_add_rlimit(ci, RLIMIT_FSIZE, fsize);
    if (q->fsize)
        tg_enforced_set(e, TG_RES_FSIZE, true, q->fsize, "rlimit", "RLIMIT_FSIZE", NULL);
    if (q->disk_bytes && q->workspace) {
        tg__ws_setup(ci);
    } else if (q->disk_bytes) {
        tg_unit_fmt_bytes(sz, sizeof sz, fsize);
        tg__enf_no(ci, TG_RES_DISK, "none",
                   "no workspace quota; each file is capped at %s by RLIMIT_FSIZE", sz);
    }
    if (q->network_none) {
        if (ci->ctx->caps.netns)
            tg_enforced_set(e, TG_RES_NETWORK, true, 1, "netns", "unshare(CLONE_NEWNET)", NULL);
        else
            tg__enf_no(ci, TG_RES_NETWORK, "none",
                       "network namespaces unavailable (unshare(CLONE_NEWNET) refused)");
    }
    net_requests(ci);
}

int tg_contain_create(tg_contain_t *c, const char *agent_id, const tg_contain_req_t *req,
                      tg_contain_inst_t **out, tg_err_t *err)
{
    *out = NULL;
    tg_contain_inst_t *ci = calloc(1, sizeof *ci);
    if (!ci) {
        return tg_err_set(err, -ENOMEM, "containment: out of memory");
    }
    ci->ctx = c;
    ci->req = *req;
    char agent[TG_CG_AGENT_NAME_MAX + 1];
    tg_contain_sanitize(agent_id ? agent_id : "", agent, sizeof agent);
    /* The "-<n>" suffix makes every name unique even when two ids encode
     * alike, and no cgroup interface file name ends in "-<digits>". */
    snprintf(ci->name, sizeof ci->name, "%s-%" PRIu32, agent, ++c->seq);

    tg_enforced_t *e = &ci->enforced;
    tg_enforced_init(e, c->kind, c->mode, req);

    int rc = c->ops->create(ci, err);
    if (rc == 0)
        rc = c->ops->limit(ci, err);
    if (rc < 0) {
        c->ops->destroy(ci);
        free(ci);
        return rc;
    }
    if (c->kind != TG_CONTAIN_NONE) {
        tg__contain_rlimit_fallback(ci);
        common_limits(ci);
        tg__contain_rlimit_clamp(ci, agent);
    }
    /* The workspace path is the caller's: the instance keeps its copy
     * (ws_path) and must not hold the pointer past this call. */
    ci->req.workspace = NULL;

    tg_res_t miss;
    if (c->mode == TG_CONTAIN_REQUIRED && !tg_enforced_complete(e, &miss)) {
        char v[32];
        tg__res_fmt_value(miss, e->r[miss].value, v, sizeof v);
        tg_err_set(err, -EPERM,
                   "containment required: agent '%s': %s %s is not enforced on this host: %s",
                   agent, tg_res_name(miss), v, e->r[miss].reason);
        c->ops->destroy(ci);
        (void)tg__ws_destroy(ci);
        free(ci);
        return -EPERM;
    }
    *out = ci;
    return 0;
}

void tg_contain_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl)
{
    memset(pl, 0, sizeof *pl);
    /* setsid and pdeathsig are process hygiene, not limits: even with
     * containment off, the agent tree is one unit that dies with toolgate. */
    pl->setsid = true;
    pl->pdeathsig = true;
    if (ci->ctx->kind == TG_CONTAIN_NONE)
        return;
    ci->ctx->ops->place(ci, pl);
    for (size_t i = 0; i < ci->nrl; i++)
        pl->rl[pl->nrl++] = ci->rl[i];
    pl->no_new_privs = true;
    pl->unshare_net = ci->enforced.r[TG_RES_NETWORK].applied;
    pl->set_user = ci->req.set_user;
    pl->uid = ci->req.uid;
    pl->gid = ci->req.gid;
    if (ci->ws_kind == TG_WORKSPACE_TMPFS) {
        tg__copy_str(pl->tmpfs_dir, sizeof pl->tmpfs_dir, ci->ws_path);
        pl->tmpfs_bytes = ci->enforced.r[TG_RES_DISK].applied_value;
        pl->tmpfs_inodes = tg__ws_tmpfs_inodes(pl->tmpfs_bytes);
    }
    if (ci->ws_kind != TG_WORKSPACE_AUTO)
        tg__copy_str(pl->workdir, sizeof pl->workdir, ci->ws_dir);
}

void tg_contain_set_pid(tg_contain_inst_t *ci, pid_t pid)
{
    ci->pid = pid;
}

int tg_contain_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s)
{
    memset(s, 0, sizeof *s);
    int rc = ci->ctx->ops->sample(ci, s);
    if (ci->rss_monitor && ci->ctx->kind != TG_CONTAIN_RLIMIT && ci->pid > 0) {
        tg_tree_stat_t st;
        if (tg__proc_tree(ci->pid, true, 0, &st) == 0) {
            s->memory_current = st.rss_bytes;
            s->have = (s->have | TG_SAMPLE_MEM) & ~(unsigned)TG_SAMPLE_PEAK;
            rc = 0;
        }
    }
    if ((s->have & TG_SAMPLE_MEM) && !(s->have & TG_SAMPLE_PEAK)) {
        if (s->memory_current > ci->peak_seen)
            ci->peak_seen = s->memory_current;
        s->memory_peak = ci->peak_seen;
        s->have |= TG_SAMPLE_PEAK;
    }
    tg__ws_sample(ci, s);
    return rc;
}

tg_verdict_t tg_contain_judge(const tg_contain_inst_t *ci, const tg_contain_sample_t *prev,
                              const tg_contain_sample_t *cur)
{
    static const tg_contain_sample_t zero;
    if (!prev)
        prev = &zero;
    tg_verdict_t v = {.kind = TG_VERDICT_OK};
    const tg_enforced_item_t *mem = &ci->enforced.r[TG_RES_MEMORY];
    if ((cur->have & TG_SAMPLE_OOM) && cur->oom_kills > prev->oom_kills) {
        v.kind = TG_VERDICT_OOM;
        v.res = TG_RES_MEMORY;
        v.used = (cur->have & TG_SAMPLE_PEAK) ? cur->memory_peak : cur->memory_current;
        v.limit = mem->applied_value;
        return v;
    }
    if (ci->rss_monitor && mem->applied && (cur->have & TG_SAMPLE_MEM) &&
        cur->memory_current > mem->applied_value) {
        v.kind = TG_VERDICT_MEMORY_OVER;
        v.res = TG_RES_MEMORY;
        v.used = cur->memory_current;
        v.limit = mem->applied_value;
        return v;
    }
    const tg_enforced_item_t *disk = &ci->enforced.r[TG_RES_DISK];
    if (ci->ws_kind == TG_WORKSPACE_SCAN && disk->applied && (cur->have & TG_SAMPLE_DISK) &&
        cur->disk_bytes > disk->applied_value) {
        v.kind = TG_VERDICT_DISK_OVER;
        v.res = TG_RES_DISK;
        v.used = cur->disk_bytes;
        v.limit = disk->applied_value;
        return v;
    }
    if ((cur->have & TG_SAMPLE_PIDS_DENIED) && cur->pids_denied > prev->pids_denied) {
        v.kind = TG_VERDICT_PIDS_DENIED;
        v.res = TG_RES_PIDS;
        v.used = cur->pids_current;
        v.limit = ci->enforced.r[TG_RES_PIDS].applied_value;
    }
    return v;
}

int tg_contain_kill(tg_contain_inst_t *ci)
{
    int rc = ci->ctx->ops->kill(ci);
    /* The main pid may not have reached its cgroup (the shim failed
     * before joining), and is the root of the rlimit backend's tree. */
    if (ci->pid > 0 && kill(ci->pid, SIGKILL) < 0 && errno != ESRCH && rc == 0)
        rc = -errno;
    return rc;
}

int tg_contain_destroy(tg_contain_inst_t *ci)
{
    if (!ci)
        return 0;
    int rc = tg_contain_kill(ci);
    if (rc == -ESRCH)
        rc = 0;
    int r = ci->ctx->ops->destroy(ci);
    if (r < 0 && rc == 0)
        rc = r;
    r = tg__ws_destroy(ci);
    if (r < 0 && rc == 0)
        rc = r;
    free(ci);
    return rc;
}

