/* The cgroup watchdog: what ties an agent's whole tree to toolgate's life.
 *
 * The shim's PR_SET_PDEATHSIG kills the agent when toolgate dies, but it
 * reaches that one process: a forked child, or a grandchild that called
 * setsid and was orphaned, lives on. The cgroup holds them all (they
 * joined before the agent's first instruction and cannot leave an
 * unprivileged cgroup), so one small process per toolgate waits for
 * toolgate's death and then kills and removes every instance cgroup.
 *
 * How it learns of the death: a pipe whose only write end toolgate holds
 * (close-on-exec, so no agent inherits it). read() returns 0 when the
 * last write end closes: toolgate exited, whatever killed it, SIGKILL
 * included. A normal exit wakes it too, after tg_contain_fini removed the
 * bases: it finds nothing and exits.
 *
 * Started by tg_contain_init on the real cgroupfs only (never on a test's
 * fake tree, whose cgroup.procs could name any pid), double-forked so it
 * is never toolgate's zombie and init reaps it, in a session of its own
 * with every signal ignored (a terminal's ^C or a process-group kill
 * aimed at toolgate leaves it; SIGKILL still ends it). It holds no other
 * descriptor (stdio goes to /dev/null: it must not keep a caller's pipe
 * open). It lives where toolgate's own cgroup is (cgroup2 with
 * delegation: base/router, which it then cannot remove: the next start's
 * orphan cleanup does).
 *
 * What it does on wake, per base "toolgate-<pid>": cgroup.kill on each
 * instance cgroup of the unified hierarchy when the kernel has it, then
 * rounds of SIGKILL over each instance's cgroup.procs in every hierarchy
 * (the only way on pure cgroup1), then rmdir of the instances and the
 * base. It never touches "router" (toolgate's own leaf) or anything
 * outside the bases toolgate made.
 */
#define _GNU_SOURCE
#include "limits/contain_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WATCH_KILL_ROUNDS 200 /* fixed internal bound: SIGKILL rounds over an instance's cgroup.procs */
#define WATCH_RMDIR_MS 2000   /* fixed internal bound: wait for the kernel to empty an instance */
#define WATCH_DIRS_MAX 256    /* fixed internal bound: instance cgroups handled per base */

/* The bases to sweep: copied before the fork, read by the watchdog. */
typedef struct watch_set {
    char base[TG_CG_NHIER][TG_CG_PATH_MAX];
    bool v2_kill;
} watch_set_t;

/* Call <fn>(<dir>/<name>) for each instance cgroup below <base> (not
 * "router"), at most WATCH_DIRS_MAX. */
static void each_instance(const char *base, void (*fn)(const char *dir, const watch_set_t *w),
                          const watch_set_t *w)
{
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *e;
    unsigned n = 0;
    while ((e = readdir(d)) != NULL && n < WATCH_DIRS_MAX) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.' || strcmp(e->d_name, "router") == 0)
            continue;
        char dir[TG_CG_PATH_MAX];
        if (tg__cg_join(dir, base, e->d_name) == 0) {
            fn(dir, w);
            n++;
        }
    }
    closedir(d);
}

static void kill_v2(const char *dir, const watch_set_t *w)
{
    if (w->v2_kill)
        (void)tg__cg_write(dir, "cgroup.kill", "1");
    (void)tg__cg_kill_procs(dir, WATCH_KILL_ROUNDS);
}

static void kill_v1(const char *dir, const watch_set_t *w)
{
    (void)w;
    (void)tg__cg_kill_procs(dir, WATCH_KILL_ROUNDS);
}

static void remove_one(const char *dir, const watch_set_t *w)
{
    (void)w;
    (void)tg__cg_rmdir(dir, WATCH_RMDIR_MS);
}

/* Kill every process of every instance, then remove the instances and
 * the bases. */
static void sweep(const watch_set_t *w)
{
    if (w->base[TG_CG_V2][0])
        each_instance(w->base[TG_CG_V2], kill_v2, w);
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (i != TG_CG_V2 && w->base[i][0])
            each_instance(w->base[i], kill_v1, w);
    }
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (w->base[i][0]) {
            each_instance(w->base[i], remove_one, w);
            (void)tg__cg_rmdir(w->base[i], 0);
        }
    }
}

/* The watchdog process: never returns. */
static void watchdog(int rfd, const watch_set_t *w)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    /* Handlers inherited from the loop would write to descriptors this
     * process no longer has (or has reused): ignore everything. */
    for (int s = 1; s < NSIG; s++)
        (void)sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    (void)setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
        if (null >= 0 && null != fd)
            (void)dup2(null, fd);
    }
    /* <rfd> is 3 (tg__contain_watch_start put it there): close above. */
    if (close_range((unsigned)rfd + 1, ~0u, 0) < 0) {
        for (int fd = rfd + 1; fd < 1024; fd++)
            close(fd);
    }
    char b;
    ssize_t r;
    do {
        r = read(rfd, &b, 1);
    } while (r > 0 || (r < 0 && errno == EINTR));
    sweep(w);
    _exit(0);
}

int tg__contain_watch_start(tg_contain_t *c)
{
    static watch_set_t w;
    memset(&w, 0, sizeof w);
    bool any = false;
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (c->base[i][0] && c->caps.h[i].alias < 0) {
            memcpy(w.base[i], c->base[i], TG_CG_PATH_MAX);
            any = true;
        }
    }
    if (!any)
        return 0;
    w.v2_kill = c->caps.v2_kill;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t mid = fork();
    if (mid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (mid == 0) {
        close(p[1]);
        /* The watchdog must hold the read end at a number close_range(3)
         * can skip: move it to 3 and close above it. */
        if (p[0] != 3) {
            if (dup2(p[0], 3) < 0)
                _exit(1);
            close(p[0]);
        }
        if (fork() == 0)
            watchdog(3, &w);
        _exit(0);
    }
    close(p[0]);
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        ;
    c->watch_fd = p[1];
    c->watching = true;
    return 0;
}

void tg__contain_watch_stop(tg_contain_t *c)
{
    if (c->watching) {
        close(c->watch_fd);
        c->watching = false;
    }
}
