/* rlimit backend, the per-resource rlimit fallback, and the process-tree
 * walk behind both.
 *
 * Memory: RLIMIT_DATA, which since Linux 4.7 counts every private
 * writable mapping (heap and anonymous mmap), so malloc fails at the limit.
 * Never RLIMIT_AS: V8, the JVM and Go reserve gigabytes of address space
 * up front and die at start under it ("Failed to reserve virtual memory
 * for CodeRange"). RLIMIT_DATA is per process, so a tree of processes can
 * still add up past it: a monitor sums the resident memory of the tree
 * each sample and the router kills the instance above the limit
 * (tg_contain_judge, TG_VERDICT_MEMORY_OVER).
 *
 * CPU: RLIMIT_CPU is total seconds, which would kill a long-lived agent
 * after its budget; a rate needs the cpu controller, so without it the
 * report says not enforced.
 *
 * Pids: RLIMIT_NPROC counts every process of the real uid, system-wide,
 * and is not checked at all for root; it stands in for a pids limit only
 * when the agent runs as its own non-root user.
 *
 * Descendants: the shim stays as the agent's supervisor on both backends
 * (router/agent/shim.h, --supervise), a subreaper that kills the whole
 * tree when the agent ends or toolgate dies; toolgate's own kill walks the
 * tree from it (tg__tree_kill).
 *
 * The tree is found by scanning /proc/[pid]/stat for parent links
 * (/proc/[pid]/task/[tid]/children needs CONFIG_PROC_CHILDREN, which many
 * kernels lack), plus every process of the session the shim's setsid()
 * made: a daemonised grandchild loses its parent link but keeps its
 * session unless it calls setsid itself.
 */
#include "limits/contain_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define TREE_SCAN_MAX 65536  /* fixed internal bound: processes examined per walk */
#define TREE_KILL_ROUNDS 16  /* fixed internal bound: kill: rounds until no live member is left */
#define STAT_READ_MAX 1024   /* fixed internal bound: /proc/[pid]/stat is a few hundred bytes */
#define TREE_SNAPSHOT_MS 100 /* fixed internal bound: one walk of /proc serves the samples this close */

typedef struct proc_ent {
    pid_t pid, ppid, sid;
    char state;
    bool in;
    uint64_t rss_pages;
    uint64_t ticks;  /* utime + stime */
    uint64_t cticks; /* cutime + cstime: children already reaped */
    uint64_t threads;
} proc_ent_t;

static int read_stat(pid_t pid, proc_ent_t *e)
{
    char path[64], buf[STAT_READ_MAX];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: fields restart after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -EIO;
    long ppid, sid;
    unsigned long long ut, st, nthreads, rss;
    long long cut, cst;
    char state;
    int got = sscanf(p + 2,
                     "%c %ld %*d %ld %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d "
                     "%llu %*d %*u %*u %llu",
                     &state, &ppid, &sid, &ut, &st, &cut, &cst, &nthreads, &rss);
    if (got != 9)
        return -EIO;
    e->pid = pid;
    e->ppid = (pid_t)ppid;
    e->sid = (pid_t)sid;
    e->state = state;
    e->in = false;
    e->rss_pages = rss;
    e->ticks = ut + st;
    e->cticks = (uint64_t)(cut > 0 ? cut : 0) + (uint64_t)(cst > 0 ? cst : 0);
    e->threads = nthreads;
    return 0;
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = ((const proc_ent_t *)a)->pid, y = ((const proc_ent_t *)b)->pid;
    return (x > y) - (x < y);
}

static proc_ent_t *find(proc_ent_t *v, size_t n, pid_t pid)
{
    proc_ent_t key = {.pid = pid};
    return bsearch(&key, v, n, sizeof *v, cmp_pid);
}

/* Every process's stat, sorted by pid, into a new array *<out> of *<nout>
 * entries. 0 or a negative errno. */
static int walk(proc_ent_t **out, size_t *nout)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    size_t n = 0, cap = 256;
    proc_ent_t *v = malloc(cap * sizeof *v);
    if (!v) {
        closedir(d);
        return -ENOMEM;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < TREE_SCAN_MAX) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        if (n == cap) {
            proc_ent_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
            cap *= 2;
        }
        if (read_stat((pid_t)pid, &v[n]) == 0)
            n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_pid);
    *out = v;
    *nout = n;
    return 0;
}

/* The tree of <root> (its session too with <session>) among the <n>
 * processes of <v>: summed into <st>, each member sent <sig> (0: none).
 * 0, or -ESRCH when no process of it is in <v>. */
static int tally(proc_ent_t *v, size_t n, pid_t root, bool session, int sig, tg_tree_stat_t *st)
{
    for (size_t i = 0; i < n; i++)
        v[i].in = v[i].pid == root || (session && v[i].sid == root);
    /* Pull in descendants until a pass adds nothing (passes <= depth). */
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].in)
                continue;
            proc_ent_t *parent = find(v, n, v[i].ppid);
            if (parent && parent->in) {
                v[i].in = true;
                grew = true;
            }
        }
    }
    long page = sysconf(_SC_PAGESIZE);
    long hz = sysconf(_SC_CLK_TCK);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const proc_ent_t *e = &v[i];
        if (!e->in)
            continue;
        any = true;
        st->cpu_us += (e->ticks + e->cticks) * 1000000u / (uint64_t)(hz > 0 ? hz : 100);
        if (e->state == 'Z' || e->state == 'X')
            continue;
        st->rss_bytes += e->rss_pages * (uint64_t)(page > 0 ? page : 4096);
        st->tasks += e->threads;
        st->nprocs++;
        if (sig)
            kill(e->pid, sig);
    }
    return any ? 0 : -ESRCH;
}

/* The last walk, shared by the samples taken within TREE_SNAPSHOT_MS of
 * it. Each instance's monitor samples once a second (on the loop, in
 * step: agent_proc.c starts them on the second), and a walk reads the
 * stat of every process of the host: one walk per instance made that
 * O(instances x processes) reads a second, which with 200 instances and
 * a build beside kept the loop busy most of the time. Kills never use
 * it, and a root it does not hold (just started) walks again. The loop's
 * thread is the only one sampling. */
static struct {
    proc_ent_t *v;
    size_t n;
    uint64_t at_ms; /* CLOCK_MONOTONIC when the walk ended */
} snap;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int tg__proc_tree(pid_t root, bool session, int sig, tg_tree_stat_t *st)
{
    memset(st, 0, sizeof *st);
    if (root <= 0)
        return -ESRCH;
    if (sig == 0 && snap.v != NULL && mono_ms() - snap.at_ms <= TREE_SNAPSHOT_MS &&
        find(snap.v, snap.n, root) != NULL)
        return tally(snap.v, snap.n, root, session, 0, st);
    proc_ent_t *v;
    size_t n;
    int rc = walk(&v, &n);
    if (rc < 0)
        return rc;
    rc = tally(v, n, root, session, sig, st);
    if (sig != 0) {
        free(v);
        return rc;
    }
    free(snap.v);
    snap.v = v;
    snap.n = n;
    snap.at_ms = mono_ms();
    return rc;
}

int tg__tree_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s)
{
    tg_tree_stat_t st;
    int rc = tg__proc_tree(ci->pid, true, 0, &st);
    if (rc < 0)
        return rc;
    /* The root is the shim's supervisor (--supervise): its memory and
     * its task are toolgate's, not the agent's usage (the CPU of the
     * descendants it reaped is, and stays in its cutime). */
    proc_ent_t root;
    if (read_stat(ci->pid, &root) == 0 && root.state != 'Z' && root.state != 'X') {
        long page = sysconf(_SC_PAGESIZE);
        uint64_t rss = root.rss_pages * (uint64_t)(page > 0 ? page : 4096);
        st.rss_bytes -= rss < st.rss_bytes ? rss : st.rss_bytes;
        st.tasks -= root.threads < st.tasks ? root.threads : st.tasks;
    }
    s->memory_current = st.rss_bytes;
    s->cpu_usage_us = st.cpu_us;
    s->pids_current = st.tasks;
    s->have |= TG_SAMPLE_MEM | TG_SAMPLE_CPU | TG_SAMPLE_PIDS;
    return 0;
}

int tg__tree_kill(tg_contain_inst_t *ci)
{
    if (ci->pid <= 0)
        return -ESRCH;
    for (unsigned i = 0; i < TREE_KILL_ROUNDS; i++) {
        tg_tree_stat_t st;
        int rc = tg__proc_tree(ci->pid, true, SIGKILL, &st);
        /* After the first walk: while the root (the shim's supervisor, a
         * subreaper) lives, every descendant is found by its parent link,
         * and the walk reads them all before it kills one. The root leads
         * a session and process group (the shim's setsid): the group kill
         * takes what was forked meanwhile. */
        if (i == 0)
            kill(-ci->pid, SIGKILL);
        if (rc < 0 || st.nprocs == 0)
            return 0;
        tg__contain_sleep_ms(2);
    }
    return -EAGAIN;
}

void tg__contain_rlimit_fallback(tg_contain_inst_t *ci)
{
    const tg_contain_req_t *q = &ci->req;
    tg_enforced_item_t *it;

    it = &ci->enforced.r[TG_RES_MEMORY];
    if (q->memory_bytes && !it->applied) {
        tg__contain_add_rlimit(ci, RLIMIT_DATA, q->memory_bytes);
        ci->rss_monitor = true;
        tg_enforced_set(&ci->enforced, TG_RES_MEMORY, true, q->memory_bytes, "rlimit",
                        "RLIMIT_DATA + process-tree RSS monitor", NULL);
    }
    it = &ci->enforced.r[TG_RES_CPU];
    if (q->cpu_millicores && !it->applied) {
        char prior[TG_REASON_MAX];
        snprintf(prior, sizeof prior, "%s", it->reason);
        tg__enf_no(ci, TG_RES_CPU, "none", "%s; RLIMIT_CPU is total seconds, not a rate",
                   prior[0] ? prior : "no cpu controller");
    }
    it = &ci->enforced.r[TG_RES_PIDS];
    if (q->pids && !it->applied) {
        if (q->set_user && q->uid != 0) {
            tg__contain_add_rlimit(ci, RLIMIT_NPROC, q->pids);
            tg_enforced_set(&ci->enforced, TG_RES_PIDS, true, q->pids, "rlimit",
                            "RLIMIT_NPROC (counts every process of the dedicated uid)", NULL);
        } else {
            char prior[TG_REASON_MAX];
            snprintf(prior, sizeof prior, "%s", it->reason);
            tg__enf_no(ci, TG_RES_PIDS, "none",
                       "%s; RLIMIT_NPROC binds only an agent running as its own non-root user",
                       prior[0] ? prior : "no pids controller");
        }
    }
}

/* ---- clamping to toolgate's hard limits ---- */

/* The rlimits an instance may carry: the resource each enforces, and how
 * the report words it once held to toolgate's hard limit. */
static const struct {
    int resource;
    const char *name;
    tg_res_t res;
    const char *how;
} rl_tab[] = {
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", TG_RES_NOFILE,
     "RLIMIT_NOFILE, at toolgate's own lower hard limit"},
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", TG_RES_FSIZE,
     "RLIMIT_FSIZE, at toolgate's own lower hard limit"},
    {RLIMIT_DATA, "RLIMIT_DATA", TG_RES_MEMORY,
     "RLIMIT_DATA at toolgate's own lower hard limit + process-tree RSS monitor"},
    {RLIMIT_NPROC, "RLIMIT_NPROC", TG_RES_PIDS,
     "RLIMIT_NPROC at toolgate's own lower hard limit (counts every process of the dedicated "
     "uid)"},
};
#define RL_TAB (sizeof rl_tab / sizeof rl_tab[0])

uint64_t tg_contain_hard_limit(int resource)
{
    struct rlimit rl;

    if (getrlimit(resource, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)rl.rlim_max;
}

void tg_enforced_clamp(tg_enforced_t *e, int resource, uint64_t hard)
{
    for (size_t i = 0; i < RL_TAB; i++) {
        tg_enforced_item_t *it;
        if (rl_tab[i].resource != resource)
            continue;
        it = &e->r[rl_tab[i].res];
        if (!it->applied || !it->backend || strcmp(it->backend, "rlimit") != 0)
            return; /* not held by this rlimit (a cgroup, the netns) */
        /* The monitor holds memory's total: only each process's share
         * (RLIMIT_DATA) is lower. */
        if (rl_tab[i].res != TG_RES_MEMORY && it->applied_value > hard)
            it->applied_value = hard;
        it->how = rl_tab[i].how;
        return;
    }
}

/* FNV-1a over <s> and then the bytes of <a> and <b>. */
static uint64_t notice_key(const char *s, uint64_t a, uint64_t b)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint64_t v[2] = {a, b};
    const unsigned char *p = (const unsigned char *)v;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    for (size_t i = 0; i < sizeof v; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Whether <key> was noticed in <c> already; remembers it otherwise. */
static bool noticed(tg_contain_t *c, uint64_t key)
{
    size_t n = c->nnoticed < TG_CONTAIN_NOTICED_MAX ? c->nnoticed : TG_CONTAIN_NOTICED_MAX;

    for (size_t i = 0; i < n; i++)
        if (c->noticed[i] == key)
            return true;
    c->noticed[c->nnoticed++ % TG_CONTAIN_NOTICED_MAX] = key;
    return false;
}

void tg__contain_rlimit_clamp(tg_contain_inst_t *ci, const char *agent)
{
    for (size_t i = 0; i < ci->nrl; i++) {
        tg_contain_rlimit_t *rl = &ci->rl[i];
        uint64_t hard = tg_contain_hard_limit(rl->resource), asked = rl->value;
        const char *name = "rlimit";
        /* Lowering a hard limit is always allowed; raising one needs
         * CAP_SYS_RESOURCE, which the shim must not count on. */
        if (asked <= hard)
            continue;
        rl->value = hard;
        tg_enforced_clamp(&ci->enforced, rl->resource, hard);
        for (size_t j = 0; j < RL_TAB; j++)
            if (rl_tab[j].resource == rl->resource)
                name = rl_tab[j].name;
        if (noticed(ci->ctx, notice_key(agent, (uint64_t)rl->resource, asked ^ (hard << 1))))
            continue;
        tg_notice("agent '%s': %s %" PRIu64 " is above toolgate's own hard limit %" PRIu64
                  ": the agent gets %" PRIu64 " (raise toolgate's own limit, with systemd's "
                  "Limit*= or prlimit, to give it more)",
                  agent, name, asked, hard, hard);
    }
}

static int rl_create(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)ci;
    (void)err;
    return 0;
}

/* Everything is the fallback's job (contain.c runs it for every backend). */
static int rl_limit(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)ci;
    (void)err;
    return 0;
}

static void rl_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl)
{
    (void)ci;
    (void)pl;
}

static int rl_destroy(tg_contain_inst_t *ci)
{
    (void)ci;
    return 0;
}

const tg_contain_ops_t tg__contain_rlimit_ops = {
    .name = "rlimit",
    .kind = TG_CONTAIN_RLIMIT,
    .create = rl_create,
    .limit = rl_limit,
    .place = rl_place,
    .sample = tg__tree_sample,
    .kill = tg__tree_kill,
    .destroy = rl_destroy,
};
