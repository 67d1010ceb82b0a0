/* Containment internals shared by the files of containment: contain.c,
 * its cgroupfs file helpers (contain_cgfs.c), detection
 * (contain_detect.c), the enforcement report (contain_report.c), the
 * backend files (contain_cgroup2.c, contain_cgroup1.c, contain_rlimit.c,
 * contain_none.c), the watchdog (contain_watch.c) and the workspaces
 * (contain_ws.c). Not for use outside limits/.
 *
 * A backend is a table of function pointers (after crun's cgroup
 * backends). Each one handles memory, cpu and pids; contain.c does the
 * rest for every backend (nofile, fsize, network, disk) and gives the rlimit
 * fallback to whatever the backend left unapplied.
 *
 * Convention: 0 or a negative errno; setup calls fill <err> on failure.
 */
#ifndef TG_LIMITS_CONTAIN_IMPL_H
#define TG_LIMITS_CONTAIN_IMPL_H

#include <string.h>

#include "limits/contain.h"

struct tg_contain_ops {
    const char *name;
    tg_contain_kind_t kind;
    /* Make <ci>'s cgroup directories (ci->name is set). */
    int (*create)(tg_contain_inst_t *ci, tg_err_t *err);
    /* Apply memory, cpu and pids of ci->req and record them in
     * ci->enforced; an item left unapplied keeps its reason and gets the
     * rlimit fallback. A failure is an item with a reason, not an error:
     * the return is for -ENOMEM-like faults only. */
    int (*limit)(tg_contain_inst_t *ci, tg_err_t *err);
    /* Add the cgroup.procs files the shim joins to <pl>. */
    void (*place)(const tg_contain_inst_t *ci, tg_contain_place_t *pl);
    int (*sample)(tg_contain_inst_t *ci, tg_contain_sample_t *s);
    int (*kill)(tg_contain_inst_t *ci);
    /* Remove <ci>'s cgroups (the processes are already killed). */
    int (*destroy)(tg_contain_inst_t *ci);
};

extern const tg_contain_ops_t tg__contain_cgroup2_ops;
extern const tg_contain_ops_t tg__contain_cgroup1_ops;
extern const tg_contain_ops_t tg__contain_rlimit_ops;
extern const tg_contain_ops_t tg__contain_none_ops;

/* ---- cgroupfs file helpers (contain_cgfs.c) ---- */

#define TG_CG_READ_MAX 4096 /* fixed internal bound: interface files we parse are small */

/* The controllers toolgate delegates, as bits of a mask. */
enum { TG_CG_CTL_CPU = 1, TG_CG_CTL_MEMORY = 2, TG_CG_CTL_PIDS = 4 };

/* Interface files are opened without following a symbolic link in the
 * file's own place (-ELOOP); see contain_cgfs.c. */

/* Write <val> to <dir>/<file> in one write(2). 0 or -errno. */
int tg__cg_write(const char *dir, const char *file, const char *val);
/* Read <dir>/<file> (at most <cap>-1 bytes) NUL-terminated into <buf>.
 * Returns the length or -errno. */
int tg__cg_read(const char *dir, const char *file, char *buf, size_t cap);
/* Read one unsigned number ("max" reads as UINT64_MAX). 0 or -errno. */
int tg__cg_read_u64(const char *dir, const char *file, uint64_t *out);
/* Read the value of "<key> N" in a flat keyed file (memory.events,
 * cpu.stat, memory.oom_control, pids.events). 0, -ENOENT when the key is
 * absent, or -errno. */
int tg__cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out);
/* True when <dir>/<file> exists. */
bool tg__cg_exists(const char *dir, const char *file);
/* Join <dir> and <name> into <out> (capacity TG_CG_PATH_MAX). 0 or -ENAMETOOLONG. */
int tg__cg_join(char *out, const char *dir, const char *name);
/* mkdir <dir>; EEXIST is success. 0 or -errno. */
int tg__cg_mkdir(const char *dir);
/* rmdir <dir>, retrying while the kernel still reports it busy, up to
 * <wait_ms>. ENOENT is success. 0 or -errno. */
int tg__cg_rmdir(const char *dir, unsigned wait_ms);
/* Count the pids in <dir>/cgroup.procs; -errno on error. */
long tg__cg_nprocs(const char *dir);
/* SIGKILL every pid of <dir>/cgroup.procs, in rounds until it is empty or
 * <rounds> are spent. 0, -EAGAIN when processes remain, or -errno. */
int tg__cg_kill_procs(const char *dir, unsigned rounds);
/* Write "1" to <dir>/cgroup.kill and wait up to <wait_ms> for
 * cgroup.procs to empty. 0, -EAGAIN when still populated, or -errno. */
int tg__cg_kill_v2(const char *dir, unsigned wait_ms);

/* The controllers listed in <dir>/<file> (cgroup.controllers: "cpu
 * memory"; cgroup.subtree_control of a fake tree: "+cpu +memory") as
 * TG_CG_CTL_* bits; 0 when the file cannot be read. */
unsigned tg__cg_read_ctls(const char *dir, const char *file);
/* Enable the controllers of <mask> in <dir>/cgroup.subtree_control, as
 * many as the kernel takes (read them back with tg__cg_read_ctls). */
void tg__cg_enable_ctls(const char *dir, unsigned mask);

/* Monotonic milliseconds and a sleep, for the bounded waits above. */
uint64_t tg__contain_now_ms(void);
void tg__contain_sleep_ms(unsigned ms);

/* ---- shared by the files of containment ---- */

/* Add an rlimit to <ci> (replacing one of the same resource); contain.c. */
void tg__contain_add_rlimit(tg_contain_inst_t *ci, int resource, uint64_t value);

/* Bounded copy of <src> into <dst> of <cap> bytes, cut to fit and always
 * NUL-terminated (cap > 0); <src> may lie inside <dst> (callers trim in
 * place). */
static inline void tg__copy_str(char *dst, size_t cap, const char *src)
{
    if (cap == 0)
        return;
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memmove(dst, src, n);
    dst[n] = '\0';
}

/* ---- detection (contain_detect.c) ---- */

/* The name of hierarchy <i> (TG_CG_V2 .. TG_CG_PIDS): "cgroup2" or the v1
 * controller's, as /proc/self/cgroup and `toolgate check` spell it. */
const char *tg__cg_hier_name(int i);
/* True when hierarchy <i> of <caps> is usable and toolgate may write its
 * own cgroup there. */
bool tg__caps_hier_ok(const tg_contain_caps_t *caps, int i);
/* True when cgroup2 offers at least one controller toolgate uses. */
bool tg__caps_v2_ctl(const tg_contain_caps_t *caps);
/* Set the v2 controller flags of <caps> from TG_CG_CTL_* bits. */
void tg__caps_set_ctls(tg_contain_caps_t *caps, unsigned mask);
/* The best backend <caps> allow, for containment.backend "auto": cgroup2
 * with a controller, then cgroup1, then cgroup2 alone, then rlimit. */
tg_contain_kind_t tg__contain_choose(const tg_contain_caps_t *caps);

/* ---- the enforcement report (contain_report.c) ---- */

/* Fill ci->enforced item <r> as not applied with a formatted reason. */
void tg__enf_no(tg_contain_inst_t *ci, tg_res_t r, const char *backend, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* <v> of resource <r> in its unit ("512Mi", "500m", "none", "10Mbps")
 * into <buf> of <cap> bytes, as the report's table shows it. */
void tg__res_fmt_value(tg_res_t r, uint64_t v, char *buf, size_t cap);

/* ---- process tree (contain_rlimit.c) ---- */

typedef struct tg_tree_stat {
    uint64_t rss_bytes;  /* sum of resident memory */
    uint64_t cpu_us;     /* utime+stime of members + cutime+cstime (reaped children) */
    uint64_t tasks;      /* threads of live members */
    uint64_t nprocs;     /* live (not zombie) members */
} tg_tree_stat_t;

/* Walk /proc for the tree rooted at <root>: its descendants by ppid, plus
 * processes in session <root> when <session> is true (a daemonised
 * grandchild keeps its session). Sums into <st>. When <sig> is non-zero,
 * also sends it to every live member. 0, or -ESRCH when <root> is gone and
 * no member is left. */
int tg__proc_tree(pid_t root, bool session, int sig, tg_tree_stat_t *st);

/* The rlimit fallback for memory, cpu and pids items <ci>'s backend left
 * unapplied; used by contain.c for every backend. */
void tg__contain_rlimit_fallback(tg_contain_inst_t *ci);
/* Hold every rlimit of <ci> to toolgate's own hard limit (the shim
 * inherits it and could not raise it: setrlimit would fail with EPERM and
 * the agent never start): a value above it becomes the hard limit, the
 * report says what is applied (tg_enforced_clamp), and a notice names
 * agent <agent>, once per agent, rlimit and value for the context. */
void tg__contain_rlimit_clamp(tg_contain_inst_t *ci, const char *agent);

/* Sample / kill the process tree and session of ci->pid (rlimit and none
 * backends). 0 or -ESRCH when there is no main pid or nothing is left. */
int tg__tree_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s);
int tg__tree_kill(tg_contain_inst_t *ci);

/* ---- watchdog (contain_watch.c) ---- */

/* Start the watchdog that kills and removes <c>'s instance cgroups and
 * bases once toolgate has died (see contain_watch.c); c->watch_fd is the
 * write end toolgate keeps. 0 (also when there is no base to watch) or a
 * negative errno. */
int tg__contain_watch_start(tg_contain_t *c);
/* Close toolgate's end: the watchdog sweeps what is left and exits. */
void tg__contain_watch_stop(tg_contain_t *c);

/* ---- workspaces (contain_ws.c) ---- */

/* Whether this process may unshare a mount namespace, make its tree
 * private and mount a tmpfs there; probed in a child, so toolgate's own
 * namespace never changes. False with the refused step in <why>. */
bool tg__ws_probe_tmpfs(char *why, size_t cap);
/* Prepare ci->req.workspace for ci->req.disk_bytes with the backend the
 * request and the host allow, and record the disk item of the report
 * (applied, or why not; never fails otherwise). */
void tg__ws_setup(tg_contain_inst_t *ci);
/* Add the workspace's usage to <s> (TG_SAMPLE_DISK) when there is one to
 * read; the scan backend walks on for a bounded number of entries. */
void tg__ws_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s);
/* Free the scan state and remove the scan directory (its processes must
 * be dead). 0, -EAGAIN when the removal budget ran out, or -errno. */
int tg__ws_destroy(tg_contain_inst_t *ci);
/* Inodes of a tmpfs workspace of <bytes>. */
uint64_t tg__ws_tmpfs_inodes(uint64_t bytes);

/* cfs quota for <mc> millicores over TG_CONTAIN_CPU_PERIOD_US, at least
 * the kernel's 1 ms minimum; and the millicores that quota enforces. */
static inline uint64_t tg__cpu_quota_us(uint32_t mc)
{
    uint64_t q = (uint64_t)mc * TG_CONTAIN_CPU_PERIOD_US / 1000u;
    return q < 1000u ? 1000u : q;
}
static inline uint64_t tg__cpu_quota_mc(uint64_t quota_us)
{
    return quota_us * 1000u / TG_CONTAIN_CPU_PERIOD_US;
}

#endif
