/* The exec shim, its supervisor and its argv builder (see shim.h).
 *
 * The shim runs between fork and the agent's exec, in a process that is
 * already the agent's (or, supervised, its parent): it never returns into
 * the router and reports a failure as one stderr line and an exit status.
 * Before the exec it allocates nothing; the supervisor handles signals in
 * sigwaitinfo, never in a handler, and allocates only in its kill rounds
 * (opendir of /proc).
 */
#define _GNU_SOURCE
#include "router/agent/shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHIM_MSG_MAX 512 /* fixed internal bound: one stderr line */

static const struct {
    const char *name;
    int resource;
} rl_names[] = {
    {"data", RLIMIT_DATA},   {"nofile", RLIMIT_NOFILE}, {"fsize", RLIMIT_FSIZE},
    {"nproc", RLIMIT_NPROC}, {"as", RLIMIT_AS},         {"cpu", RLIMIT_CPU},
    {"core", RLIMIT_CORE},   {"stack", RLIMIT_STACK},   {"memlock", RLIMIT_MEMLOCK},
};
#define RL_NAMES (sizeof rl_names / sizeof rl_names[0])

typedef struct shim_rl {
    int resource;
    const char *name;
    struct rlimit lim;
} shim_rl_t;

typedef struct shim_opts {
    const char *join[TG_SHIM_JOIN_MAX];
    size_t njoin;
    shim_rl_t rl[TG_SHIM_RLIMIT_MAX];
    size_t nrl;
    bool setsid, unshare_net, no_new_privs, set_user, supervise;
    pid_t pdeath_parent; /* 0: no death signal */
    uid_t uid;
    gid_t gid;
    const char *workdir;
    const char *tmpfs_dir; /* NULL: no workspace mount */
    uint64_t tmpfs_bytes, tmpfs_inodes;
} shim_opts_t;

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
    char line[SHIM_MSG_MAX];
    int n = snprintf(line, sizeof line, "toolgate shim: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    /* One write, so the line cannot interleave with the agent's stderr. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
    return code;
}

static int parse_num(const char *s, uint64_t *out)
{
    if (strcmp(s, "infinity") == 0) {
        *out = UINT64_MAX;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

static rlim_t to_rlim(uint64_t v)
{
    return v == UINT64_MAX || v >= (uint64_t)RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)v;
}

/* "NAME=SOFT[:HARD]" */
static int parse_rlimit(const char *arg, shim_rl_t *out)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return -EINVAL;
    size_t nl = (size_t)(eq - arg);
    out->name = NULL;
    for (size_t i = 0; i < RL_NAMES; i++) {
        if (strlen(rl_names[i].name) == nl && strncmp(arg, rl_names[i].name, nl) == 0) {
            out->resource = rl_names[i].resource;
            out->name = rl_names[i].name;
        }
    }
    if (!out->name)
        return -EINVAL;
    char val[64];
    if (snprintf(val, sizeof val, "%s", eq + 1) >= (int)sizeof val)
        return -EINVAL;
    char *colon = strchr(val, ':');
    if (colon)
        *colon = '\0';
    uint64_t soft, hard;
    if (parse_num(val, &soft) < 0)
        return -EINVAL;
    hard = soft;
    if (colon && parse_num(colon + 1, &hard) < 0)
        return -EINVAL;
    if (hard < soft)
        return -EINVAL;
    out->lim.rlim_cur = to_rlim(soft);
    out->lim.rlim_max = to_rlim(hard);
    return 0;
}

/* Set <r>, held to the hard limit this process has: the router already
 * holds every value to its own (limits/contain_rlimit.c), which the shim
 * inherits, so this only matters when that limit was lowered in between
 * (prlimit on a running toolgate). Raising a hard limit needs privilege,
 * and an agent that does not start protects nothing: the shim lowers the
 * value instead and says so in one line. 0 or a negative errno. */
static int set_rlimit(shim_rl_t *r)
{
    struct rlimit cur;

    if (setrlimit(r->resource, &r->lim) == 0)
        return 0;
    if (errno != EPERM || getrlimit(r->resource, &cur) < 0 || cur.rlim_max == RLIM_INFINITY ||
        r->lim.rlim_max <= cur.rlim_max)
        return -errno;
    fail(0, "%s %llu is above the hard limit %llu: set to %llu", r->name,
         (unsigned long long)r->lim.rlim_max, (unsigned long long)cur.rlim_max,
         (unsigned long long)cur.rlim_max);
    if (r->lim.rlim_cur > cur.rlim_max)
        r->lim.rlim_cur = cur.rlim_max;
    r->lim.rlim_max = cur.rlim_max;
    return setrlimit(r->resource, &r->lim) == 0 ? 0 : -errno;
}

static int parse_user(const char *arg, uid_t *uid, gid_t *gid)
{
    char buf[48];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return -EINVAL;
    char *colon = strchr(buf, ':');
    if (!colon)
        return -EINVAL;
    *colon = '\0';
    uint64_t u, g;
    if (parse_num(buf, &u) < 0 || parse_num(colon + 1, &g) < 0 || u >= UINT32_MAX ||
        g >= UINT32_MAX)
        return -EINVAL;
    *uid = (uid_t)u;
    *gid = (gid_t)g;
    return 0;
}

static int join_cgroup(const char *procs)
{
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* "0" names the writer: the shim moves itself, and the agent it
     * becomes, with every process it will ever fork. */
    int rc = write(fd, "0", 1) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

static int lo_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = 0;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        rc = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            rc = -errno;
    }
    close(fd);
    return rc;
}

/* Close every descriptor above stderr: the agent must not inherit
 * toolgate's sockets, pipes of other agents or the audit file. */
static int close_stray_fds(void)
{
    if (close_range(3, ~0u, 0) == 0)
        return 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end == '\0' && fd > 2 && fd != self)
            close((int)fd);
    }
    closedir(d);
    return 0;
}

/* The workspace: a tmpfs of the disk size in a mount namespace of the
 * agent's own. The tree is made private first, so the mount propagates to
 * no other namespace (a shared "/" would otherwise carry it back to the
 * host's), and it disappears with the last process of the instance.
 * Owned by the agent's user, 0700, no device files, no setuid bits.
 * 0, or TG_SHIM_EXIT_SETUP after reporting. */
static int mount_workspace(const shim_opts_t *o)
{
    char opts[160];
    int n = o->set_user
                ? snprintf(opts, sizeof opts,
                           "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0700,uid=%lu,gid=%lu",
                           o->tmpfs_bytes, o->tmpfs_inodes, (unsigned long)o->uid,
                           (unsigned long)o->gid)
                : snprintf(opts, sizeof opts, "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0700",
                           o->tmpfs_bytes, o->tmpfs_inodes);
    if (n < 0 || (size_t)n >= sizeof opts)
        return fail(TG_SHIM_EXIT_SETUP, "mount tmpfs on %s: options too long", o->tmpfs_dir);
    if (unshare(CLONE_NEWNS) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "unshare(CLONE_NEWNS): %s", strerror(errno));
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "make the mount tree private: %s", strerror(errno));
    if (mount("toolgate-workspace", o->tmpfs_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "mount tmpfs on %s: %s", o->tmpfs_dir, strerror(errno));
    return 0;
}

static int parse_args(int argc, char **argv, shim_opts_t *o, int *cmd_at)
{
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--join") == 0 && has_val) {
            if (o->njoin == TG_SHIM_JOIN_MAX)
                return fail(TG_SHIM_EXIT_SETUP, "more than %d --join options", TG_SHIM_JOIN_MAX);
            o->join[o->njoin++] = argv[++i];
        } else if (strcmp(a, "--rlimit") == 0 && has_val) {
            if (o->nrl == TG_SHIM_RLIMIT_MAX)
                return fail(TG_SHIM_EXIT_SETUP, "more than %d --rlimit options", TG_SHIM_RLIMIT_MAX);
            if (parse_rlimit(argv[++i], &o->rl[o->nrl]) < 0)
                return fail(TG_SHIM_EXIT_SETUP, "bad --rlimit %s (expected NAME=SOFT[:HARD])",
                            argv[i]);
            o->nrl++;
        } else if (strcmp(a, "--user") == 0 && has_val) {
            if (parse_user(argv[++i], &o->uid, &o->gid) < 0)
                return fail(TG_SHIM_EXIT_SETUP, "bad --user %s (expected UID:GID)", argv[i]);
            o->set_user = true;
        } else if (strcmp(a, "--pdeathsig") == 0 && has_val) {
            uint64_t p;
            if (parse_num(argv[++i], &p) < 0 || p == 0 || p > INT32_MAX)
                return fail(TG_SHIM_EXIT_SETUP, "bad --pdeathsig %s (expected the parent's pid)",
                            argv[i]);
            o->pdeath_parent = (pid_t)p;
        } else if (strcmp(a, "--chdir") == 0 && has_val) {
            o->workdir = argv[++i];
        } else if (strcmp(a, "--tmpfs") == 0 && has_val) {
            o->tmpfs_dir = argv[++i];
            if (o->tmpfs_dir[0] != '/')
                return fail(TG_SHIM_EXIT_SETUP, "bad --tmpfs %s (expected an absolute path)",
                            o->tmpfs_dir);
        } else if ((strcmp(a, "--tmpfs-size") == 0 || strcmp(a, "--tmpfs-inodes") == 0) &&
                   has_val) {
            uint64_t v;
            if (parse_num(argv[++i], &v) < 0 || v == 0 || v == UINT64_MAX)
                return fail(TG_SHIM_EXIT_SETUP, "bad %s %s (expected a positive number)", a,
                            argv[i]);
            if (strcmp(a, "--tmpfs-size") == 0)
                o->tmpfs_bytes = v;
            else
                o->tmpfs_inodes = v;
        } else if (strcmp(a, "--setsid") == 0) {
            o->setsid = true;
        } else if (strcmp(a, "--unshare-net") == 0) {
            o->unshare_net = true;
        } else if (strcmp(a, "--no-new-privs") == 0) {
            o->no_new_privs = true;
        } else if (strcmp(a, "--supervise") == 0) {
            o->supervise = true;
        } else {
            return fail(TG_SHIM_EXIT_SETUP, "unknown option %s", a);
        }
    }
    if (o->tmpfs_dir && (o->tmpfs_bytes == 0 || o->tmpfs_inodes == 0))
        return fail(TG_SHIM_EXIT_SETUP, "--tmpfs needs --tmpfs-size and --tmpfs-inodes");
    if (i >= argc || argv[i][0] == '\0')
        return fail(TG_SHIM_EXIT_SETUP, "no command after --");
    *cmd_at = i;
    return 0;
}

/* Arm PR_SET_PDEATHSIG with <sig>, then check that the parent is still
 * <parent> (it may have died before the signal was armed). 0, or
 * TG_SHIM_EXIT_SETUP after reporting. */
static int arm_pdeath(int sig, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "PR_SET_PDEATHSIG: %s", strerror(errno));
    if (getppid() != parent)
        return fail(TG_SHIM_EXIT_SETUP, "toolgate exited while the agent was starting");
    return 0;
}

/* Steps 5 to 10 in the process that becomes the agent: rlimits, user,
 * no_new_privs, the death signal (sent when <parent> dies; 0: none),
 * the working directory, stray descriptors, exec. Returns only on
 * failure, with the exit status. */
static int exec_agent(shim_opts_t *o, char **cmd, pid_t parent)
{
    int rc;
    for (size_t i = 0; i < o->nrl; i++) {
        if ((rc = set_rlimit(&o->rl[i])) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "setrlimit %s: %s", o->rl[i].name, strerror(-rc));
    }
    if (o->set_user) {
        /* Supplementary groups go first: they would keep root's group
         * access after setgid, and setgroups needs the privilege setuid
         * gives up. */
        if (setgroups(0, NULL) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "setgroups: %s", strerror(errno));
        if (setgid(o->gid) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "setgid %lu: %s", (unsigned long)o->gid,
                        strerror(errno));
        if (setuid(o->uid) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "setuid %lu: %s", (unsigned long)o->uid,
                        strerror(errno));
        /* A process that could regain root after dropping it is not
         * dropped (setuid as a non-root euid only changes the euid). */
        if (o->uid != 0 && (setuid(0) == 0 || geteuid() != o->uid || getuid() != o->uid))
            return fail(TG_SHIM_EXIT_SETUP, "uid drop to %lu did not hold", (unsigned long)o->uid);
    }
    if (o->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
    if (parent && (rc = arm_pdeath(SIGKILL, parent)) != 0)
        return rc;
    if (o->workdir && chdir(o->workdir) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "chdir %s: %s", o->workdir, strerror(errno));
    if ((rc = close_stray_fds()) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "close stray fds: %s", strerror(-rc));

    execvp(cmd[0], cmd);
    int e = errno;
    return fail(e == ENOENT ? TG_SHIM_EXIT_NOTFOUND : TG_SHIM_EXIT_SETUP, "exec %s: %s", cmd[0],
                strerror(e));
}

/* ---- the supervisor (--supervise) ----
 *
 * Where no cgroup holds an instance (the rlimit and none backends), the
 * shim does not exec the agent: it forks it and stays, as its parent and
 * as the subreaper of everything below it (PR_SET_CHILD_SUBREAPER: an
 * orphan, a double fork, a setsid grandchild whose parent died, comes
 * back to it instead of init). It sleeps in sigwaitinfo (no handler runs,
 * nothing is allocated on a signal) until one of:
 *   - SIGCHLD for the agent: the agent ended;
 *   - its death signal (SUP_PDEATH_SIG), or a parent that is no longer
 *     toolgate: toolgate died, whatever killed it;
 *   - SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH: sent
 *     on to the agent's process group and the agent, as toolgate sent them
 *     to the agent before (SIGKILL cannot be: toolgate's kill walks the
 *     tree while the supervisor still holds it, limits/contain_rlimit.c).
 * Then it kills every descendant left and reaps it, round after round,
 * until it has no child, and leaves the way the agent did: its exit code,
 * or death by the same signal. */

#define SUP_KILL_ROUNDS 200     /* fixed internal bound: kill-and-reap rounds over what is left */
#define SUP_ROUND_MS    10      /* fixed internal bound: wait for a death between two rounds */
#define SUP_PDEATH_SIG  SIGRTMIN /* not one toolgate or a terminal sends */

static const int sup_forward[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
#define SUP_FORWARD (sizeof sup_forward / sizeof sup_forward[0])

/* The parent, process group and session of process <pid> (a /proc entry
 * name). 0, or -1 when it is gone or unreadable. */
static int proc_links(const char *pid, long *ppid, long *pgrp, long *sid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: fields restart after the last ')'. */
    const char *p = strrchr(buf, ')');
    char state;
    return p && sscanf(p + 1, " %c %ld %ld %ld", &state, ppid, pgrp, sid) == 4 ? 0 : -1;
}

/* SIGKILL every process that is this one's child, in the agent's process
 * group <agent>, or in this one's session when it leads it (<session>):
 * each is a descendant. */
static void sup_kill_pass(pid_t self, pid_t agent, bool session)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long ppid, pgrp, sid;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
            proc_links(e->d_name, &ppid, &pgrp, &sid) < 0)
            continue;
        long pid = strtol(e->d_name, NULL, 10);
        if (pid != self && (ppid == self || pgrp == agent || (session && sid == self)))
            (void)kill((pid_t)pid, SIGKILL);
    }
    closedir(d);
}

/* Kill and reap every descendant left: a killed process's children come
 * here, so rounds end when there is no child left, or after
 * SUP_KILL_ROUNDS (then toolgate's own kill walks what is left). */
static void sup_reap_all(pid_t agent)
{
    pid_t self = getpid(), w = 0;
    bool session = getsid(0) == self;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (unsigned r = 0; r < SUP_KILL_ROUNDS; r++) {
        sup_kill_pass(self, agent, session);
        while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (w < 0 && errno == ECHILD)
            return;
        struct timespec ts = {0, SUP_ROUND_MS * 1000000L};
        (void)sigtimedwait(&chld, NULL, &ts);
    }
    fail(0, "descendants of the agent still ran after %d kill rounds", SUP_KILL_ROUNDS);
}

/* Wait until agent <agent> ends (true, its wait status in *<status>) or
 * toolgate dies (false): the death signal, or a parent that is no longer
 * <parent> (0: not watched). Takes the signals of <set>, forwarding those
 * of sup_forward. */
static bool sup_wait(const sigset_t *set, pid_t parent, pid_t agent, int *status)
{
    for (;;) {
        if (parent && getppid() != parent)
            return false;
        siginfo_t si;
        int s = sigwaitinfo(set, &si);
        if (s == SIGCHLD) {
            bool done = false;
            int st;
            pid_t w;
            while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
                if (w == agent) {
                    *status = st;
                    done = true;
                }
            }
            if (done)
                return true;
        } else if (s == SUP_PDEATH_SIG) {
            if (parent)
                return false;
        } else if (s > 0) {
            /* The agent leaves its group only by calling setsid or
             * setpgid itself: then it is signalled on its own too. */
            (void)kill(-agent, s);
            if (getpgid(agent) != agent)
                (void)kill(agent, s);
        }
    }
}

/* Leave as the agent left: its exit code, or death by the same signal
 * (default disposition; no core of the supervisor: the agent dumped its
 * own where its limits let it). */
__attribute__((noreturn)) static void sup_relay(int status)
{
    if (WIFSIGNALED(status)) {
        int s = WTERMSIG(status);
        struct rlimit none = {0, 0};
        struct sigaction sa;
        sigset_t one;
        (void)setrlimit(RLIMIT_CORE, &none);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        (void)sigaction(s, &sa, NULL);
        sigemptyset(&one);
        sigaddset(&one, s);
        (void)kill(getpid(), s);
        (void)sigprocmask(SIG_UNBLOCK, &one, NULL);
        _exit(128 + s); /* a signal that does not terminate */
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : TG_SHIM_EXIT_SETUP);
}

/* The supervisor's own end of stdio: stdin and stdout go to /dev/null, so
 * the agent's EOFs reach toolgate as before; stderr stays for its own
 * lines, and a closed one costs no SIGPIPE. */
static void sup_detach(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &sa, NULL);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 2; fd++) {
        if (null < 0 || dup2(null, fd) < 0)
            close(fd);
    }
    if (null > 1)
        close(null);
    /* Pin no directory: a workspace or a mount toolgate's cwd is on. */
    if (chdir("/") < 0) {
        /* stays where it is */
    }
}

/* Run the agent under a supervisor (see above). Returns only when the
 * supervisor could not be set up, with the exit status. */
static int supervise(shim_opts_t *o, char **cmd)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SUP_PDEATH_SIG);
    for (size_t i = 0; i < SUP_FORWARD; i++)
        sigaddset(&set, sup_forward[i]);
    /* Blocked before the death signal is armed and the agent forked: a
     * signal in between stays pending for sigwaitinfo. */
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "sigprocmask: %s", strerror(errno));
    int rc = close_stray_fds();
    if (rc < 0)
        return fail(TG_SHIM_EXIT_SETUP, "close stray fds: %s", strerror(-rc));
    if (o->pdeath_parent && (rc = arm_pdeath(SUP_PDEATH_SIG, o->pdeath_parent)) != 0)
        return rc;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        return fail(TG_SHIM_EXIT_SETUP, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    pid_t self = getpid();
    pid_t agent = fork();
    if (agent < 0)
        return fail(TG_SHIM_EXIT_SETUP, "fork: %s", strerror(errno));
    if (agent == 0) {
        /* The agent's own process group: toolgate's group signals reach
         * the supervisor alone, which sends them on. */
        (void)sigprocmask(SIG_SETMASK, &old, NULL);
        (void)setpgid(0, 0);
        _exit(exec_agent(o, cmd, self));
    }
    (void)setpgid(agent, agent); /* also here: whichever runs first */
    sup_detach();
    int status = 0;
    bool ended = sup_wait(&set, o->pdeath_parent, agent, &status);
    sup_reap_all(agent);
    if (!ended)
        _exit(0); /* toolgate is gone: no one reads this */
    sup_relay(status);
}

int tg_shim_main(int argc, char **argv)
{
    shim_opts_t o;
    memset(&o, 0, sizeof o);
    int at = 0;
    int rc = parse_args(argc, argv, &o, &at);
    if (rc != 0)
        return rc;
    char **cmd = argv + at;

    /* EPERM: already a group leader (spawned detached), which is the goal. */
    if (o.setsid && setsid() < 0 && getsid(0) != getpid())
        return fail(TG_SHIM_EXIT_SETUP, "setsid: %s", strerror(errno));
    for (size_t i = 0; i < o.njoin; i++) {
        if ((rc = join_cgroup(o.join[i])) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "join %s: %s", o.join[i], strerror(-rc));
    }
    if (o.unshare_net) {
        if (unshare(CLONE_NEWNET) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "unshare(CLONE_NEWNET): %s", strerror(errno));
        if ((rc = lo_up()) < 0)
            return fail(TG_SHIM_EXIT_SETUP, "bring up lo: %s", strerror(-rc));
    }
    if (o.tmpfs_dir && (rc = mount_workspace(&o)) != 0)
        return rc;
    if (o.supervise)
        return supervise(&o, cmd);
    return exec_agent(&o, cmd, o.pdeath_parent);
}

/* ---- argv builder (runs in the router) ---- */

static int add(char **v, size_t *n, const char *s)
{
    v[*n] = strdup(s);
    if (!v[*n])
        return -ENOMEM;
    (*n)++;
    return 0;
}

static int add_fmt(char **v, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int add_fmt(char **v, size_t *n, const char *fmt, ...)
{
    char buf[TG_CG_PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof buf)
        return -EINVAL;
    return add(v, n, buf);
}

static const char *rl_name(int resource)
{
    for (size_t i = 0; i < RL_NAMES; i++) {
        if (rl_names[i].resource == resource)
            return rl_names[i].name;
    }
    return NULL;
}

bool tg_shim_supervises(const tg_contain_place_t *pl)
{
    return pl->nprocs == 0;
}

void tg_shim_argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

int tg_shim_argv_build(const char *self_exe, const tg_contain_place_t *pl, const char *workdir,
                       char *const agent_argv[], char ***out)
{
    *out = NULL;
    if (!agent_argv || !agent_argv[0] || agent_argv[0][0] == '\0')
        return -EINVAL;
    size_t nargs = 0;
    while (agent_argv[nargs])
        nargs++;
    /* exe, subcommand, 2 per join/rlimit, 7 flags, 2 each for user,
     * pdeathsig, chdir, tmpfs, tmpfs-size, tmpfs-inodes, "--", the
     * command, NULL */
    size_t cap = 2 + 2 * pl->nprocs + 2 * pl->nrl + 7 + 12 + 1 + nargs + 1;
    char **v = calloc(cap, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    int rc = add(v, &n, self_exe);
    if (rc == 0)
        rc = add(v, &n, TG_SHIM_SUBCOMMAND);
    if (rc == 0 && pl->setsid)
        rc = add(v, &n, "--setsid");
    for (size_t i = 0; rc == 0 && i < pl->nprocs; i++) {
        rc = add(v, &n, "--join");
        if (rc == 0)
            rc = add(v, &n, pl->procs[i]);
    }
    if (rc == 0 && pl->unshare_net)
        rc = add(v, &n, "--unshare-net");
    if (rc == 0 && pl->tmpfs_dir[0]) {
        rc = add(v, &n, "--tmpfs");
        if (rc == 0)
            rc = add(v, &n, pl->tmpfs_dir);
        if (rc == 0)
            rc = add(v, &n, "--tmpfs-size");
        if (rc == 0)
            rc = add_fmt(v, &n, "%" PRIu64, pl->tmpfs_bytes);
        if (rc == 0)
            rc = add(v, &n, "--tmpfs-inodes");
        if (rc == 0)
            rc = add_fmt(v, &n, "%" PRIu64, pl->tmpfs_inodes);
    }
    for (size_t i = 0; rc == 0 && i < pl->nrl; i++) {
        const char *name = rl_name(pl->rl[i].resource);
        if (!name) {
            rc = -EINVAL;
            break;
        }
        rc = add(v, &n, "--rlimit");
        if (rc == 0)
            rc = add_fmt(v, &n, "%s=%" PRIu64, name, pl->rl[i].value);
    }
    if (rc == 0 && pl->set_user) {
        rc = add(v, &n, "--user");
        if (rc == 0)
            rc = add_fmt(v, &n, "%lu:%lu", (unsigned long)pl->uid, (unsigned long)pl->gid);
    }
    if (rc == 0 && pl->no_new_privs)
        rc = add(v, &n, "--no-new-privs");
    if (rc == 0 && pl->pdeathsig) {
        rc = add(v, &n, "--pdeathsig");
        if (rc == 0)
            rc = add_fmt(v, &n, "%ld", (long)getpid());
    }
    if (rc == 0 && tg_shim_supervises(pl))
        rc = add(v, &n, "--supervise");
    /* A configured cwd wins; else the agent starts in its workspace. */
    if (!workdir && pl->workdir[0])
        workdir = pl->workdir;
    if (rc == 0 && workdir) {
        rc = add(v, &n, "--chdir");
        if (rc == 0)
            rc = add(v, &n, workdir);
    }
    if (rc == 0)
        rc = add(v, &n, "--");
    for (size_t i = 0; rc == 0 && i < nargs; i++)
        rc = add(v, &n, agent_argv[i]);
    if (rc < 0) {
        tg_shim_argv_free(v);
        return rc;
    }
    *out = v;
    return 0;
}
