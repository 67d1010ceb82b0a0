/* Containment: put each agent instance in a box the host can enforce.
 *
 * A tg_contain_t is made once at start (tg_contain_init): it detects what
 * the host offers (cgroup v2 unified hierarchy, cgroup v1 memory / cpu /
 * cpuacct / pids hierarchies, network namespaces), caches it, creates the
 * base cgroup "toolgate-<pid>" below toolgate's own cgroup in every usable
 * hierarchy, removes orphans of a dead toolgate, picks a backend and, on a
 * cgroup backend, starts the watchdog that kills and removes every
 * instance cgroup once toolgate has died, SIGKILL included
 * (contain_watch.c):
 *
 *   cgroup2  memory.max, memory.swap.max=0, cpu.max, pids.max,
 *            memory.events oom_kill, memory.peak, cgroup.kill
 *   cgroup1  memory.limit_in_bytes (+ memsw), cpu.cfs_quota_us/period,
 *            pids.max, memory.oom_control oom_kill, max_usage_in_bytes;
 *            a writable cgroup2 mount beside it ("hybrid") is joined too,
 *            for cgroup.kill and cpu.stat
 *   rlimit   RLIMIT_DATA plus a resident-memory monitor of the process
 *            tree for memory (never RLIMIT_AS: V8, the JVM and Go reserve
 *            address space up front and die at start); a CPU rate is not
 *            an rlimit and is reported as not enforced; RLIMIT_NPROC only
 *            for a dedicated non-root user (it counts per uid, and not at
 *            all for root)
 *   none     containment.mode "off"
 *
 * Whatever the backend, RLIMIT_NOFILE and RLIMIT_FSIZE are always applied
 * when requested, and network "none" is a new network namespace when the
 * host allows unshare(CLONE_NEWNET). Every rlimit is held to toolgate's
 * own hard limit, which the shim inherits and an unprivileged process
 * cannot raise: a request above it is applied at the hard limit, the
 * report gives the applied value, and a notice says so (once per agent,
 * resource and value). Network bandwidth and connection counts are
 * requests no backend enforces (no traffic shaping here): reported not
 * applied, so "required" refuses them, unless network "none" leaves the
 * agent no route out, which enforces both. A resource the chosen backend cannot
 * enforce falls back per resource (a cgroup1 host without a pids hierarchy
 * still gets its memory limit from memory.limit_in_bytes).
 *
 * Disk is a workspace (limits/contain_ws.c), a directory of the agent's
 * whose total size is the disk limit, held one of two ways per instance:
 *   tmpfs    the shim unshares a mount namespace, makes its mount tree
 *            private and mounts a tmpfs of the disk size on the workspace:
 *            the kernel refuses writes past it (ENOSPC), and the files
 *            vanish with the instance; detected once (a probe child)
 *   scan     a fresh directory "<workspace>/tg-<pid>-<instance>" is the
 *            instance's workspace; every sample walks it (a bounded number
 *            of entries per sample, resumed at the next) and sums the
 *            allocated blocks; over the limit, the router kills the
 *            instance (TG_VERDICT_DISK_OVER); removed at destroy
 * Without a workspace, a disk request is reported not applied: each file
 * is still capped by RLIMIT_FSIZE.
 *
 * Per instance (tg_contain_create): a cgroup "<agent>-<n>" under the base,
 * named from the sanitised agent id, with the limits written before any
 * agent code runs; the router then spawns toolgate's exec shim
 * (router/shim.h) with tg_contain_place()'s joins and rlimits, tells the
 * instance the pid (tg_contain_set_pid), samples it every second
 * (tg_contain_sample, tg_contain_judge), kills the whole tree when needed
 * (tg_contain_kill) and removes the cgroup when the instance ends
 * (tg_contain_destroy).
 *
 * Honest report: every instance carries a tg_enforced_t with, per
 * requested resource, whether it was applied, by which backend and how, or
 * why not. Mode "required" refuses to create an instance whose requested
 * limits cannot all be applied; "best_effort" applies what it can and the
 * report says the rest.
 *
 * Error convention: setup calls (init, create) return 0 or a negative
 * errno and fill <err> on failure only; runtime calls (sample, kill,
 * destroy) return 0 or a negative errno.
 *
 * Ownership: the caller owns the tg_contain_t (tg_contain_fini releases
 * what it made on the host); tg_contain_create allocates an instance that
 * tg_contain_destroy frees. An instance must be destroyed before fini.
 * Nothing here is thread-safe; the router calls it from the loop thread.
 */
#ifndef TG_LIMITS_CONTAIN_H
#define TG_LIMITS_CONTAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

#define TG_CG_PATH_MAX 1024   /* fixed internal bound: one cgroup directory path */
#define TG_CG_NAME_MAX 96     /* fixed internal bound: instance dir name "<agent>-<n>" */
#define TG_CG_AGENT_NAME_MAX 64 /* fixed internal bound: sanitised agent part of an instance name */
#define TG_REASON_MAX 160     /* fixed internal bound: a "why not applied" text */
#define TG_CONTAIN_RL_MAX 8   /* fixed internal bound: rlimits one instance can carry */
#define TG_WS_DIR_MAX (TG_WORKSPACE_PATH_MAX + TG_CG_NAME_MAX + 16) /* fixed internal bound: a workspace dir, "<path>/tg-<pid>-<instance>" */
/* fixed internal bound: clamp notices remembered (each said once) */
#define TG_CONTAIN_NOTICED_MAX 32

/* Defaults of DESIGN.md (seeds 001 and 004). */
#define TG_CONTAIN_DEF_MEMORY (512ull * 1024 * 1024)
#define TG_CONTAIN_DEF_CPU_MC 1000u
#define TG_CONTAIN_DEF_PIDS 64u
#define TG_CONTAIN_DEF_DISK (1024ull * 1024 * 1024)
/* TG_CONTAIN_DEF_NOFILE is in config/config.h (resources.nofile). */
#define TG_CONTAIN_CPU_PERIOD_US 100000u /* cfs period for cpu.max / cfs_period_us */

typedef enum tg_contain_mode {
    TG_CONTAIN_BEST_EFFORT = 0,
    TG_CONTAIN_REQUIRED,
    TG_CONTAIN_OFF,
} tg_contain_mode_t;

typedef enum tg_contain_kind {
    TG_CONTAIN_AUTO = 0, /* only in tg_contain_opts_t: pick the best */
    TG_CONTAIN_NONE,
    TG_CONTAIN_RLIMIT,
    TG_CONTAIN_CGROUP1,
    TG_CONTAIN_CGROUP2,
} tg_contain_kind_t;

/* The hierarchies toolgate uses. With v1, cpu and cpuacct are often one
 * mount ("cpu,cpuacct"); such an entry is an alias of the earlier one. */
typedef enum tg_cg_hier {
    TG_CG_V2 = 0,
    TG_CG_MEMORY,
    TG_CG_CPU,
    TG_CG_CPUACCT,
    TG_CG_PIDS,
    TG_CG_NHIER,
} tg_cg_hier_t;

typedef struct tg_cg_hier_caps {
    bool mounted;  /* a mount of this hierarchy was found in mountinfo */
    bool usable;   /* toolgate's own cgroup lies inside that mount */
    bool writable; /* rw mount and own dir writable; confirmed at init by mkdir of the base */
    int alias;     /* index of an earlier entry on the same mount, or -1 */
    char mount[TG_CG_PATH_MAX];   /* mount point */
    char own_dir[TG_CG_PATH_MAX]; /* mount point + toolgate's own cgroup path */
    char why[TG_REASON_MAX];      /* why not usable/writable, "" when it is */
} tg_cg_hier_caps_t;

typedef struct tg_contain_caps {
    tg_cg_hier_caps_t h[TG_CG_NHIER];
    bool v2_memory, v2_cpu, v2_pids; /* listed in the own cgroup's cgroup.controllers */
    bool v2_kill;                    /* cgroup.kill exists (kernel >= 5.14) */
    bool v1_memsw;                   /* memory.memsw.* exists (swap accounting) */
    bool netns;                      /* unshare(CLONE_NEWNET) works (probed in a child) */
    bool tmpfs;                      /* a private mount namespace with a tmpfs works (probed) */
    char tmpfs_why[TG_REASON_MAX];   /* why not, "" when it does */
    bool root;                       /* euid 0 */
} tg_contain_caps_t;

/* Paths are for tests (a fake cgroupfs tree); NULL means the real file. */
typedef struct tg_contain_opts {
    tg_contain_mode_t mode;
    tg_contain_kind_t backend;   /* TG_CONTAIN_AUTO: best available */
    const char *mountinfo_path;  /* default /proc/self/mountinfo */
    const char *self_cgroup_path; /* default /proc/self/cgroup */
    pid_t self_pid;              /* 0: getpid(); names the base "toolgate-<pid>" */
    bool skip_netns_probe;       /* take netns as unavailable without forking a probe */
    bool skip_tmpfs_probe;       /* take tmpfs workspaces as unavailable without a probe */
    bool no_watchdog;            /* tests: start no watchdog (a toolgate killed with its watchdog) */
} tg_contain_opts_t;

/* What an agent instance asks for; 0 (false) = not requested. */
typedef struct tg_contain_req {
    uint64_t memory_bytes;
    uint32_t cpu_millicores;
    uint32_t pids;
    uint64_t disk_bytes;  /* total workspace size; each file is also capped by fsize */
    const char *workspace; /* the workspace directory, or NULL; read during create only */
    tg_workspace_backend_t workspace_backend; /* how to hold it (auto: tmpfs if possible) */
    bool network_none;
    uint32_t nofile;
    uint64_t fsize;       /* 0: disk_bytes when set */
    uint64_t bandwidth_bps;   /* resources.network.bandwidth_limit: bit/s */
    uint64_t max_connections; /* resources.network.max_connections */
    bool set_user;        /* run as a dedicated user */
    uid_t uid;
    gid_t gid;
} tg_contain_req_t;

/* The resources of the enforcement report, in its order. */
typedef enum tg_res {
    TG_RES_MEMORY = 0,  /* bytes */
    TG_RES_CPU,         /* millicores */
    TG_RES_PIDS,        /* count */
    TG_RES_DISK,        /* bytes */
    TG_RES_NETWORK,     /* 1 = "none" */
    TG_RES_NOFILE,      /* count */
    TG_RES_FSIZE,       /* bytes */
    TG_RES_BANDWIDTH,   /* bit/s */
    TG_RES_CONNECTIONS, /* count */
    TG_RES_COUNT,
} tg_res_t;

typedef struct tg_enforced_item {
    bool requested;
    uint64_t value;       /* requested value in the resource's unit */
    bool applied;
    uint64_t applied_value; /* what the host enforces (cpu is rounded to the cfs minimum) */
    const char *backend;  /* static: "cgroup2", "cgroup1", "rlimit", "netns", "none" */
    const char *how;      /* static: the mechanism, e.g. "memory.max"; NULL when not applied */
    char reason[TG_REASON_MAX]; /* why not applied; "" when applied */
} tg_enforced_item_t;

typedef struct tg_enforced {
    tg_enforced_item_t r[TG_RES_COUNT];
    const char *backend; /* the instance's backend name */
    tg_contain_mode_t mode;
} tg_enforced_t;

typedef struct tg_contain_rlimit {
    int resource; /* RLIMIT_* */
    uint64_t value; /* soft = hard */
} tg_contain_rlimit_t;

/* Everything the exec shim does for one instance (see router/shim.h). */
typedef struct tg_contain_place {
    char procs[TG_CG_NHIER][TG_CG_PATH_MAX + 16]; /* cgroup.procs files to join */
    size_t nprocs;
    tg_contain_rlimit_t rl[TG_CONTAIN_RL_MAX];
    size_t nrl;
    bool unshare_net;
    bool no_new_privs;
    bool setsid;    /* own session and process group: the tree can be signalled as one */
    bool pdeathsig; /* SIGKILL when toolgate dies */
    bool set_user;
    uid_t uid;
    gid_t gid;
    /* Workspace: mount a tmpfs of <tmpfs_bytes> and <tmpfs_inodes> on
     * <tmpfs_dir> in a private mount namespace ("" = none); <workdir> is
     * the workspace the agent starts in unless a cwd is configured. */
    char tmpfs_dir[TG_WORKSPACE_PATH_MAX];
    uint64_t tmpfs_bytes;
    uint64_t tmpfs_inodes;
    char workdir[TG_WS_DIR_MAX];
} tg_contain_place_t;

/* One sample. <have> says which fields hold data (TG_SAMPLE_* bits). */
enum {
    TG_SAMPLE_MEM = 1u << 0,
    TG_SAMPLE_PEAK = 1u << 1,
    TG_SAMPLE_CPU = 1u << 2,
    TG_SAMPLE_PIDS = 1u << 3,
    TG_SAMPLE_OOM = 1u << 4,
    TG_SAMPLE_PIDS_DENIED = 1u << 5,
    TG_SAMPLE_DISK = 1u << 6,
};
typedef struct tg_contain_sample {
    unsigned have;
    uint64_t memory_current; /* bytes: cgroup usage, or tree RSS (rlimit backend) */
    uint64_t memory_peak;    /* bytes: kernel peak, or the highest sample seen */
    uint64_t cpu_usage_us;   /* cumulative CPU time of the instance */
    uint64_t pids_current;   /* tasks (threads count) */
    uint64_t oom_kills;      /* kernel OOM kills in the instance since create */
    uint64_t pids_denied;    /* forks refused by pids.max since create */
    uint64_t disk_bytes;     /* workspace: tmpfs usage, or the scan's count (see contain_ws.c) */
} tg_contain_sample_t;

typedef enum tg_verdict_kind {
    TG_VERDICT_OK = 0,
    TG_VERDICT_OOM,         /* the kernel OOM-killed a process of the instance */
    TG_VERDICT_MEMORY_OVER, /* tree RSS above the limit (monitor): kill the instance */
    TG_VERDICT_PIDS_DENIED, /* forks were refused at pids.max: the agent may be failing */
    TG_VERDICT_DISK_OVER,   /* scanned workspace above the disk limit: kill the instance */
} tg_verdict_kind_t;

typedef struct tg_verdict {
    tg_verdict_kind_t kind;
    tg_res_t res;
    uint64_t used;  /* observed value in the resource's unit */
    uint64_t limit; /* the limit it was held against */
} tg_verdict_t;

typedef struct tg_contain_ops tg_contain_ops_t;

/* The containment context. Ownership: the caller; see tg_contain_fini. */
typedef struct tg_contain {
    tg_contain_mode_t mode;
    tg_contain_kind_t kind;      /* the backend in use */
    const tg_contain_ops_t *ops;
    tg_contain_caps_t caps;
    pid_t self;
    char base[TG_CG_NHIER][TG_CG_PATH_MAX]; /* "<own_dir>/toolgate-<pid>", "" when not made */
    bool self_moved;       /* cgroup2: toolgate moved itself into base/router */
    uint32_t seq;          /* instance counter: names "<agent>-<n>" */
    unsigned orphans_removed; /* cgroups of dead toolgates removed at init */
    /* The watchdog's pipe (contain_watch.c): toolgate's write end, whose
     * closing, at any exit, has the watchdog kill every instance. */
    int watch_fd;
    bool watching;
    int watch_errno; /* why no watchdog runs on a cgroup backend, 0 when one does */
    char why[TG_REASON_MAX];  /* why this backend (and not a better one) */
    /* Clamps already said (hashes of agent, rlimit and value), a ring. */
    uint64_t noticed[TG_CONTAIN_NOTICED_MAX];
    unsigned nnoticed;
} tg_contain_t;

/* One agent instance. Ownership: made by tg_contain_create, freed by
 * tg_contain_destroy; <ctx> must outlive it. */
typedef struct tg_contain_inst {
    tg_contain_t *ctx;
    char name[TG_CG_NAME_MAX];
    char dir[TG_CG_NHIER][TG_CG_PATH_MAX]; /* "" when not in that hierarchy */
    tg_contain_req_t req;
    tg_enforced_t enforced;
    tg_contain_rlimit_t rl[TG_CONTAIN_RL_MAX];
    size_t nrl;
    bool rss_monitor;   /* memory is held by the tree-RSS monitor (no memory cgroup) */
    pid_t pid;          /* main pid once spawned; 0 before spawn and after reaping */
    int cg_errno;       /* why a cgroup of this instance could not be made (report) */
    uint64_t peak_seen; /* highest memory sampled, for backends without a kernel peak */
    /* Workspace (contain_ws.c): how disk is held, where, and the scan's
     * walk state (owned; freed by destroy). */
    tg_workspace_backend_t ws_kind; /* TG_WORKSPACE_AUTO here: no workspace */
    char ws_path[TG_WORKSPACE_PATH_MAX]; /* the configured directory */
    char ws_dir[TG_WS_DIR_MAX];          /* the instance's workspace (scan: its own dir) */
    struct tg_ws_scan *ws_scan;
} tg_contain_inst_t;

/* Detect what this host offers into <caps> without changing anything
 * (writability is a guess from the mount flags and access(2); init
 * confirms it). <opts> may be NULL. Always succeeds: what cannot be read
 * is reported absent with a reason in the entry's <why>. */
void tg_contain_detect(tg_contain_caps_t *caps, const tg_contain_opts_t *opts);

/* Detect, clean orphans, create the base cgroups and choose the backend
 * per <opts> (NULL: best effort, auto). Fails (-ENOTSUP, <err> filled)
 * only when <opts> forces a backend the host does not offer; a missing
 * cgroup in best_effort or required mode just selects a weaker backend
 * (required refuses per instance, in tg_contain_create). Call it once per
 * process (keep the context across config reloads): a tree named after
 * toolgate's own pid is taken for a dead predecessor's and cleaned. */
int tg_contain_init(tg_contain_t *c, const tg_contain_opts_t *opts, tg_err_t *err);

/* Remove the base cgroups. 0, or -EBUSY when an instance is still alive
 * or toolgate moved itself into base/router (cgroup2 delegation): what is
 * left is removed by the next start's orphan cleanup. */
int tg_contain_fini(tg_contain_t *c);

/* Create instance "<sanitised agent_id>-<n>" with <req> applied, into
 * <*out>. In required mode, fails with -EPERM and <err> naming the first
 * requested resource that cannot be enforced (nothing is left behind).
 * -ENOMEM, or a cgroup write failure in required mode, also fail. */
int tg_contain_create(tg_contain_t *c, const char *agent_id, const tg_contain_req_t *req,
                      tg_contain_inst_t **out, tg_err_t *err);

/* Fill <pl> with what the shim must do for <ci>: cgroup.procs files to
 * join, rlimits, netns, user, no_new_privs, setsid, pdeathsig. */
void tg_contain_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl);

/* Record the main pid of <ci> after spawn (the rlimit backend walks the
 * tree from it; every backend also signals it on kill). Set it back to 0
 * as soon as the pid is reaped: a reaped pid can be reused by anyone. */
void tg_contain_set_pid(tg_contain_inst_t *ci, pid_t pid);

/* Sample <ci> into <s>. 0 or a negative errno (-ESRCH: rlimit backend and
 * the main pid is gone). Fields the backend cannot measure are left out of
 * <s->have>. */
int tg_contain_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s);

/* Judge sample <cur> against <ci>'s limits and the previous sample
 * <prev> (NULL: none yet; counters start at 0 at create). Pure. New OOM
 * kills come first, then memory over the limit when the RSS monitor holds
 * memory, then a scanned workspace over the disk limit, then newly
 * refused forks. */
tg_verdict_t tg_contain_judge(const tg_contain_inst_t *ci, const tg_contain_sample_t *prev,
                              const tg_contain_sample_t *cur);

/* Kill every process of <ci>: cgroup.kill where available, else SIGKILL
 * of every member until none is left (a fork bomb loses the race because
 * killed processes cannot fork), else the process tree and session of the
 * main pid. 0 or a negative errno. */
int tg_contain_kill(tg_contain_inst_t *ci);

/* Kill what is left of <ci>, remove its cgroups and free it. Waits up to
 * about 500 ms for the kernel to empty the cgroups. 0, or the first
 * negative errno (the instance is freed regardless; a cgroup that could
 * not be removed is left for the next start's orphan cleanup). NULL is a
 * no-op. */
int tg_contain_destroy(tg_contain_inst_t *ci);

/* The request toolgate uses when nothing is configured (DESIGN.md). */
void tg_contain_req_default(tg_contain_req_t *req);

/* Write into <out> (capacity <cap>, >= 1) a cgroup-safe name for <id>: the
 * id itself when it is 1..TG_CG_AGENT_NAME_MAX bytes of [A-Za-z0-9_.-]
 * not starting with '.', else "x" + hex of the id when that fits, else
 * "h" + 16 hex digits of a 64-bit FNV-1a hash of the id. The result never
 * contains '/', never is "." or "..", and never starts with '.'. Returns
 * the length, or -ENOSPC when <cap> is too small. */
int tg_contain_sanitize(const char *id, char *out, size_t cap);

/* "best_effort", "required", "off"; and the reverse (-EINVAL when unknown). */
const char *tg_contain_mode_name(tg_contain_mode_t m);
int tg_contain_mode_parse(const char *s, tg_contain_mode_t *out);
/* "auto", "none", "rlimit", "cgroup1", "cgroup2". */
const char *tg_contain_kind_name(tg_contain_kind_t k);

/* Report helpers. */
const char *tg_res_name(tg_res_t r);
/* Set item <r> of <e>: applied with <backend>/<how>, or not, with <reason>. */
/* <e> cleared for backend <kind> in <mode>, each resource marked
 * requested (with its value) as <req> asks, none applied yet. */
void tg_enforced_init(tg_enforced_t *e, tg_contain_kind_t kind, tg_contain_mode_t mode,
                      const tg_contain_req_t *req);
void tg_enforced_set(tg_enforced_t *e, tg_res_t r, bool applied, uint64_t applied_value,
                     const char *backend, const char *how, const char *reason);
/* Toolgate's own hard limit of rlimit <resource> (RLIMIT_*), which an
 * agent's shim inherits; UINT64_MAX when unlimited or unknown. */
uint64_t tg_contain_hard_limit(int resource);
/* Record in <e> that rlimit <resource> holds at most <hard> (toolgate's
 * hard limit, below the request): the applied value of the resource it
 * enforces is lowered to it and its "how" says so. Memory under the
 * RSS monitor keeps its value (the monitor holds the tree's total;
 * RLIMIT_DATA is per process). Nothing for a resource not applied. */
void tg_enforced_clamp(tg_enforced_t *e, int resource, uint64_t hard);
/* True when every requested resource is applied; else false and
 * <*first_missing> (may be NULL) names the first one that is not. */
bool tg_enforced_complete(const tg_enforced_t *e, tg_res_t *first_missing);
/* JSON object for the audit event's "enforced" field: one member per
 * requested resource, {"requested":N,"applied":B,"backend":S,"how":S} or
 * with "reason":S when not applied (network: "requested":"none"), and
 * "applied_value":N when what is enforced differs from the request (cpu
 * rounded to the cfs minimum, an rlimit held to toolgate's hard limit). Returns
 * the length written (NUL-terminated), or -ENOSPC. */
int tg_enforced_json(const tg_enforced_t *e, char *buf, size_t cap);
/* The same as a text table for `toolgate check`, one line per requested
 * resource, values in units (512Mi, 500m). Length or -ENOSPC. */
int tg_enforced_text(const tg_enforced_t *e, char *buf, size_t cap);
/* A text summary of <caps> and the chosen backend of <c> for `toolgate
 * check`. Length or -ENOSPC. */
int tg_contain_caps_text(const tg_contain_t *c, char *buf, size_t cap);

#endif
