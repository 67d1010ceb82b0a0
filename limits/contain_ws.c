/* Workspaces: the disk resource of an agent instance (see contain.h).
 *
 * tmpfs: the shim mounts a tmpfs of the disk size on the workspace in the
 * instance's own mount namespace (router/shim.c). Here: the probe that
 * says whether that works on this host, the report, and the usage sample,
 * read with statfs through /proc/<pid>/root, which resolves paths in the
 * agent's mount namespace. The kernel holds the limit (ENOSPC); nothing
 * needs to be killed.
 *
 * scan: each instance gets a fresh directory below the workspace, and
 * every sample walks it for at most WS_SCAN_STEP_MAX entries, resuming
 * where it stopped at the next sample, so a huge tree costs the loop a
 * bounded slice per second instead of one long stall. The sum is of
 * allocated blocks (st_blocks * 512: a sparse file costs what it
 * occupies) of every entry, each hard link in full. The walk holds a
 * single directory open: it descends by openat(O_NOFOLLOW) and climbs back
 * by "..", checking that the parent it reaches is the directory it left
 * (device and inode), and starts over when the tree was moved under it.
 * Known gaps, stated in README: a file deleted while still open is not
 * seen; levels below WS_SCAN_DEPTH_MAX are counted but not entered; an
 * agent that keeps renaming directories delays the count. RLIMIT_FSIZE
 * caps every single file whatever the backend.
 *
 * Everything toolgate does in a workspace as root goes through directory
 * descriptors with O_NOFOLLOW and *at() calls, so a symlink planted by the
 * agent never leads toolgate outside it.
 */
#define _GNU_SOURCE
#include "limits/contain_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/units.h"

#define WS_SCAN_STEP_MAX  4096 /* fixed internal bound: entries one sample examines */
#define WS_SCAN_DEPTH_MAX 4096 /* fixed internal bound: directory levels the scan enters */
#define WS_RM_ENTRIES_MAX                                                                          \
    65536 /* fixed internal bound: entries one removal visits (a bounded stall); the rest waits    \
             for a later toolgate's orphan sweep */
#define WS_SWEEP_ENTRIES_MAX                                                                       \
    1024 /* fixed internal bound: workspace entries the orphan sweep looks at */
#define WS_TMPFS_INODES_MIN 1024 /* fixed internal bound: inodes of the smallest tmpfs workspace   \
                                  */
#define WS_TMPFS_BYTES_PER_INODE                                                                   \
    4096 /* one inode per page of the size: empty files cannot pin kernel memory past it */

static const char ws_prefix[] = "tg-"; /* scan dirs: "tg-<pid>-<instance name>" */

/* One directory the scan passed through on its way down. */
typedef struct ws_level {
    dev_t dev;
    ino_t ino;
    long pos; /* telldir() just after the entry the walk descended into */
} ws_level_t;

/* The scan backend's state of one instance. Owned by the instance
 * (tg_contain_inst_t.ws_scan), freed by tg__ws_destroy. */
struct tg_ws_scan {
    int root_fd;   /* the instance's directory, open for its whole life */
    dev_t dev;     /* its filesystem: the walk never leaves it */
    DIR *cur;      /* directory being read; NULL between walks */
    dev_t cur_dev; /* identity of <cur> */
    ino_t cur_ino;
    size_t depth;      /* levels of <cur> below the root */
    ws_level_t *stack; /* [depth]: the directories above <cur> */
    size_t cap;
    uint64_t partial; /* bytes counted by the walk in progress */
    uint64_t total;   /* bytes of the last complete walk */
};

/* ---- probe ---- */

/* Stages of the probe child, reported through a pipe with the errno. */
enum { PROBE_UNSHARE = 1, PROBE_PRIVATE, PROBE_MOUNT };

bool tg__ws_probe_tmpfs(char *why, size_t cap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(why, cap, "probe: pipe: %s", strerror(errno));
        return false;
    }
    pid_t p = fork();
    if (p < 0) {
        snprintf(why, cap, "probe: fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return false;
    }
    if (p == 0) {
        /* Only system calls here: toolgate may have threads. The mount
         * lives and dies in the child's own namespace. */
        int rep[2] = {0, 0};
        close(pfd[0]);
        if (unshare(CLONE_NEWNS) < 0)
            rep[0] = PROBE_UNSHARE;
        else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            rep[0] = PROBE_PRIVATE;
        else if (mount("toolgate-probe", "/", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "size=4096,nr_inodes=16,mode=0700") < 0)
            rep[0] = PROBE_MOUNT;
        rep[1] = rep[0] ? errno : 0;
        ssize_t w = write(pfd[1], rep, sizeof rep);
        _exit(w == (ssize_t)sizeof rep && rep[0] == 0 ? 0 : 1);
    }
    close(pfd[1]);
    int rep[2] = {-1, 0};
    ssize_t r;
    do {
        r = read(pfd[0], rep, sizeof rep);
    } while (r < 0 && errno == EINTR);
    close(pfd[0]);
    int st = 0;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    if (r == (ssize_t)sizeof rep && rep[0] == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        why[0] = '\0';
        return true;
    }
    const char *stage = rep[0] == PROBE_UNSHARE   ? "unshare(CLONE_NEWNS)"
                        : rep[0] == PROBE_PRIVATE ? "making the mount tree private"
                        : rep[0] == PROBE_MOUNT   ? "mount tmpfs"
                                                  : "the probe child";
    snprintf(why, cap, "%s refused: %s", stage,
             r == (ssize_t)sizeof rep && rep[1] ? strerror(rep[1]) : "no report");
    return false;
}

/* ---- safe removal ---- */

static bool is_dir_at(int dfd, const struct dirent *e)
{
    if (e->d_type != DT_UNKNOWN)
        return e->d_type == DT_DIR;
    struct stat st;
    return fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* One directory on the way down of rm_tree_at. */
typedef struct rm_level {
    char *name; /* its name in the level above */
    dev_t dev;
    ino_t ino;
    long pos; /* telldir() just after the entry the removal descended into */
} rm_level_t;

static void rm_levels_free(rm_level_t *st, size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        free(st[i].name);
    free(st);
}

/* Open <name> in <dfd> as a directory that is really there (no symlink)
 * and push it. The DIR, or NULL with errno set (ENOTDIR/ELOOP: not a
 * directory). */
static DIR *rm_enter(int dfd, const char *name, rm_level_t **st, size_t *depth, size_t *cap)
{
    if (*depth == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        rm_level_t *ns = realloc(*st, ncap * sizeof *ns);
        if (!ns)
            return NULL;
        *st = ns;
        *cap = ncap;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return NULL;
    char *copy = strdup(name);
    DIR *d = copy && fstat(fd, &sb) == 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = copy ? errno : ENOMEM;
        free(copy);
        close(fd);
        errno = e;
        return NULL;
    }
    (*st)[(*depth)++] = (rm_level_t){.name = copy, .dev = sb.st_dev, .ino = sb.st_ino};
    return d;
}

/* Remove <name> in <parent_fd> and everything below it, visiting at most
 * *<budget> entries: depth first, unlinking files as they are read,
 * climbing back by ".." (checked against the device and inode recorded on
 * the way down) to remove each directory once it is empty, then going on
 * in its parent where it stopped. One directory open at a time, names
 * kept per level, no recursion: depth costs neither stack nor PATH_MAX.
 * 0 when it is gone, -EAGAIN when the budget ran out, or -errno. */
static int rm_tree_at(int parent_fd, const char *name, size_t *budget)
{
    rm_level_t *st = NULL;
    size_t depth = 0, cap = 0;
    int rc = 0;
    DIR *cur = rm_enter(parent_fd, name, &st, &depth, &cap);
    if (!cur) {
        if (errno == ENOENT)
            rc = 0;
        else if (errno == ENOTDIR || errno == ELOOP)
            rc = unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
        else
            rc = -errno;
        rm_levels_free(st, depth);
        return rc;
    }
    while (depth > 0) {
        errno = 0;
        struct dirent *e = readdir(cur);
        if (e) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (*budget == 0) {
                rc = -EAGAIN;
                break;
            }
            (*budget)--;
            if (!is_dir_at(dirfd(cur), e) &&
                (unlinkat(dirfd(cur), e->d_name, 0) == 0 || errno == ENOENT))
                continue;
            if (errno != 0 && errno != EISDIR && errno != ENOENT) {
                rc = -errno;
                break;
            }
            long pos = telldir(cur);
            DIR *d = rm_enter(dirfd(cur), e->d_name, &st, &depth, &cap);
            if (!d) {
                if (errno == ENOENT)
                    continue;
                if ((errno == ENOTDIR || errno == ELOOP) &&
                    (unlinkat(dirfd(cur), e->d_name, 0) == 0 || errno == ENOENT))
                    continue;
                rc = -errno;
                break;
            }
            st[depth - 2].pos = pos;
            closedir(cur);
            cur = d;
            continue;
        }
        if (errno != 0) {
            rc = -errno;
            break;
        }
        /* <cur> is read to the end: remove it from its parent. */
        int pfd;
        if (depth == 1) {
            pfd = dup(parent_fd);
        } else {
            struct stat sb;
            pfd = openat(dirfd(cur), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (pfd >= 0 && (fstat(pfd, &sb) < 0 || sb.st_dev != st[depth - 2].dev ||
                             sb.st_ino != st[depth - 2].ino)) {
                close(pfd);
                pfd = -1;
                errno = ESTALE; /* moved under us: stop rather than guess */
            }
        }
        if (pfd < 0) {
            rc = -errno;
            break;
        }
        closedir(cur);
        cur = NULL;
        if (unlinkat(pfd, st[depth - 1].name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
            if (errno != ENOTEMPTY) {
                rc = -errno;
                close(pfd);
                break;
            }
            /* Entries the pass did not see: read it again from the start
             * (each pass spends budget, so this ends). */
            depth--;
            char *again = st[depth].name;
            cur = rm_enter(pfd, again, &st, &depth, &cap);
            free(again);
            close(pfd);
            if (!cur) {
                rc = -errno;
                break;
            }
            continue;
        }
        free(st[--depth].name);
        if (depth == 0) {
            close(pfd);
            break;
        }
        cur = fdopendir(pfd);
        if (!cur) {
            rc = -errno;
            close(pfd);
            break;
        }
        seekdir(cur, st[depth - 1].pos);
    }
    if (cur)
        closedir(cur);
    rm_levels_free(st, depth);
    return rc;
}

/* ---- workspace preparation ---- */

/* Make <ci>'s workspace directory exist for backend <kind>. Returns an
 * O_DIRECTORY descriptor of it, or -1 with <reason> filled.
 *
 * The directory itself stays toolgate's: what the agent owns is what it
 * writes into, the tmpfs mounted over it (uid=, gid=) or its own
 * directory inside it (scan). A workspace the agent's user could write to
 * would let a scanned agent store files beside its directory, where no
 * scan looks, so an existing one must not be; and nothing that exists is
 * ever chowned, which could hand the agent any directory the config
 * names. */
static int ws_open(tg_contain_inst_t *ci, tg_workspace_backend_t kind, char *reason, size_t cap)
{
    const tg_contain_req_t *q = &ci->req;
    bool created = mkdir(ci->ws_path, 0700) == 0;
    if (!created && errno != EEXIST) {
        snprintf(reason, cap, "workspace %s: mkdir: %s%s", ci->ws_path, strerror(errno),
                 errno == ENOENT ? " (its parent must exist)" : "");
        return -1;
    }
    int fd = open(ci->ws_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(reason, cap, "workspace %s: %s", ci->ws_path,
                 errno == ENOTDIR || errno == ELOOP ? "not a directory (or a symlink)"
                                                    : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(reason, cap, "workspace %s: stat: %s", ci->ws_path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!q->set_user)
        return fd; /* the agent is toolgate's uid */
    if (created) {
        /* Searchable, not listable or writable, by the agent's user: it
         * reaches its own directory and nothing else (whichever backend
         * uses it next). */
        if (fchmod(fd, 0711) < 0) {
            snprintf(reason, cap, "workspace %s: chmod: %s", ci->ws_path, strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    }
    if (kind != TG_WORKSPACE_SCAN)
        return fd; /* the tmpfs covers the directory */
    if (st.st_uid == q->uid || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(reason, cap,
                 "workspace %s is writable by the agent's user: a scan would miss "
                 "what it writes beside its own directory",
                 ci->ws_path);
        close(fd);
        return -1;
    }
    if (!(st.st_mode & S_IXOTH) && !(st.st_gid == q->gid && (st.st_mode & S_IXGRP))) {
        snprintf(reason, cap, "workspace %s is not searchable by the agent's uid %lu", ci->ws_path,
                 (unsigned long)q->uid);
        close(fd);
        return -1;
    }
    return fd;
}

/* "tg-<pid>-..." in the workspace whose toolgate is gone: the leftovers of
 * an instance a killed toolgate could not remove. */
static void sweep_orphans(int ws_fd, size_t *budget)
{
    int fd = openat(ws_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    char names[8][NAME_MAX + 1]; /* a few per instance start: the next ones take the rest */
    size_t n = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && seen++ < WS_SWEEP_ENTRIES_MAX && n < 8) {
        const char *p = e->d_name;
        if (strncmp(p, ws_prefix, sizeof ws_prefix - 1) != 0)
            continue;
        p += sizeof ws_prefix - 1;
        char *end;
        errno = 0;
        long pid = strtol(p, &end, 10);
        if (errno || end == p || *end != '-' || pid <= 0 || pid > INT_MAX)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
            continue; /* its toolgate lives */
        snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    /* Removed after the listing: unlinking while reading may skip entries. */
    for (size_t i = 0; i < n; i++)
        (void)rm_tree_at(dirfd(d), names[i], budget);
    closedir(d);
}

static void ws_no(tg_contain_inst_t *ci, const char *backend, const char *why)
{
    char sz[32];
    uint64_t fsize = ci->req.fsize ? ci->req.fsize : ci->req.disk_bytes;
    tg_unit_fmt_bytes(sz, sizeof sz, fsize);
    tg__enf_no(ci, TG_RES_DISK, backend, "%s; each file is capped at %s by RLIMIT_FSIZE", why, sz);
}

static int scan_setup(tg_contain_inst_t *ci, int ws_fd, char *reason, size_t cap)
{
    const tg_contain_req_t *q = &ci->req;
    char name[TG_CG_NAME_MAX + 32];
    size_t budget = WS_RM_ENTRIES_MAX;

    sweep_orphans(ws_fd, &budget);
    snprintf(name, sizeof name, "%s%ld-%s", ws_prefix, (long)ci->ctx->self, ci->name);
    /* A leftover of an earlier toolgate that had this pid. */
    (void)rm_tree_at(ws_fd, name, &budget);
    if (mkdirat(ws_fd, name, 0700) < 0) {
        snprintf(reason, cap, "workspace %s: mkdir %s: %s", ci->ws_path, name, strerror(errno));
        return -1;
    }
    int fd = openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || (q->set_user && fchown(fd, q->uid, q->gid) < 0)) {
        snprintf(reason, cap, "workspace %s: %s: %s", ci->ws_path, name, strerror(errno));
        if (fd >= 0)
            close(fd);
        (void)unlinkat(ws_fd, name, AT_REMOVEDIR);
        return -1;
    }
    struct tg_ws_scan *sc = calloc(1, sizeof *sc);
    if (!sc) {
        snprintf(reason, cap, "workspace %s: out of memory", ci->ws_path);
        close(fd);
        (void)unlinkat(ws_fd, name, AT_REMOVEDIR);
        return -1;
    }
    sc->root_fd = fd;
    sc->dev = st.st_dev;
    ci->ws_scan = sc;
    int n = snprintf(ci->ws_dir, sizeof ci->ws_dir, "%s/%s", ci->ws_path, name);
    if (n < 0 || (size_t)n >= sizeof ci->ws_dir) /* sizes make this impossible; be exact anyway */
        ci->ws_dir[0] = '\0';
    return 0;
}

void tg__ws_setup(tg_contain_inst_t *ci)
{
    const tg_contain_req_t *q = &ci->req;
    const tg_contain_caps_t *caps = &ci->ctx->caps;
    char reason[TG_WORKSPACE_PATH_MAX + TG_REASON_MAX]; /* cut to TG_REASON_MAX in the report */

    if (strlen(q->workspace) >= sizeof ci->ws_path) {
        /* Config refuses such a path; a cut one would name another directory. */
        snprintf(reason, sizeof reason, "workspace path longer than %zu bytes",
                 sizeof ci->ws_path - 1);
        ws_no(ci, "none", reason);
        return;
    }
    snprintf(ci->ws_path, sizeof ci->ws_path, "%s", q->workspace);
    tg_workspace_backend_t kind = q->workspace_backend;
    if (kind == TG_WORKSPACE_AUTO)
        kind = caps->tmpfs ? TG_WORKSPACE_TMPFS : TG_WORKSPACE_SCAN;
    if (kind == TG_WORKSPACE_TMPFS && !caps->tmpfs) {
        snprintf(reason, sizeof reason, "tmpfs workspaces are refused here (%s)",
                 caps->tmpfs_why[0] ? caps->tmpfs_why : "not probed");
        ws_no(ci, "tmpfs", reason);
        return;
    }
    const char *backend = kind == TG_WORKSPACE_TMPFS ? "tmpfs" : "scan";
    int fd = ws_open(ci, kind, reason, sizeof reason);
    if (fd < 0) {
        ws_no(ci, backend, reason);
        return;
    }
    if (kind == TG_WORKSPACE_SCAN) {
        int rc = scan_setup(ci, fd, reason, sizeof reason);
        close(fd);
        if (rc < 0) {
            ws_no(ci, backend, reason);
            return;
        }
        ci->ws_kind = TG_WORKSPACE_SCAN;
        tg_enforced_set(&ci->enforced, TG_RES_DISK, true, q->disk_bytes, "scan",
                        "per-instance directory, scanned every second, killed when over", NULL);
        return;
    }
    close(fd);
    ci->ws_kind = TG_WORKSPACE_TMPFS;
    snprintf(ci->ws_dir, sizeof ci->ws_dir, "%s", ci->ws_path);
    /* The kernel sizes a tmpfs in whole pages. */
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = page > 0 ? (uint64_t)page : 4096u;
    uint64_t size = (q->disk_bytes + pg - 1) / pg * pg;
    tg_enforced_set(&ci->enforced, TG_RES_DISK, true, size, "tmpfs",
                    "tmpfs per instance in a private mount namespace", NULL);
}

uint64_t tg__ws_tmpfs_inodes(uint64_t bytes)
{
    uint64_t n = bytes / WS_TMPFS_BYTES_PER_INODE;
    return n < WS_TMPFS_INODES_MIN ? WS_TMPFS_INODES_MIN : n;
}

/* ---- scan ---- */

static void scan_reset(struct tg_ws_scan *sc)
{
    if (sc->cur)
        closedir(sc->cur);
    sc->cur = NULL;
    sc->depth = 0;
    sc->partial = 0;
}

static uint64_t blocks_bytes(const struct stat *st)
{
    return (uint64_t)st->st_blocks * 512u;
}

/* Enter directory <fd> (whose identity is <st>) one level down. */
static bool scan_push(struct tg_ws_scan *sc, int fd, const struct stat *st)
{
    if (sc->depth == sc->cap) {
        size_t ncap = sc->cap ? 2 * sc->cap : 16;
        ws_level_t *ns = realloc(sc->stack, ncap * sizeof *ns);
        if (!ns)
            return false;
        sc->stack = ns;
        sc->cap = ncap;
    }
    DIR *d = fdopendir(fd);
    if (!d)
        return false;
    sc->stack[sc->depth++] =
        (ws_level_t){.dev = sc->cur_dev, .ino = sc->cur_ino, .pos = telldir(sc->cur)};
    closedir(sc->cur);
    sc->cur = d;
    sc->cur_dev = st->st_dev;
    sc->cur_ino = st->st_ino;
    return true;
}

/* Climb from <cur> to its parent. False when the tree moved under the walk. */
static bool scan_pop(struct tg_ws_scan *sc)
{
    const ws_level_t *up = &sc->stack[sc->depth - 1];
    int fd = openat(dirfd(sc->cur), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return false;
    if (fstat(fd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
        close(fd);
        return false;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    closedir(sc->cur);
    sc->cur = d;
    sc->cur_dev = up->dev;
    sc->cur_ino = up->ino;
    seekdir(d, up->pos);
    sc->depth--;
    return true;
}

/* Walk on for at most <budget> entries. True when a walk completed (its
 * sum is in sc->total). */
static bool scan_step(struct tg_ws_scan *sc, unsigned budget)
{
    if (!sc->cur) {
        struct stat st;
        int fd = openat(sc->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return false;
        if (fstat(fd, &st) < 0 || !(sc->cur = fdopendir(fd))) {
            close(fd);
            return false;
        }
        sc->cur_dev = st.st_dev;
        sc->cur_ino = st.st_ino;
        sc->depth = 0;
        sc->partial = blocks_bytes(&st);
    }
    while (budget > 0) {
        errno = 0;
        struct dirent *e = readdir(sc->cur);
        if (!e) {
            if (errno != 0) {
                scan_reset(sc);
                return false;
            }
            if (sc->depth == 0) {
                sc->total = sc->partial;
                scan_reset(sc);
                return true;
            }
            budget--;
            if (!scan_pop(sc)) {
                scan_reset(sc); /* moved under us: count again from the top */
                return false;
            }
            continue;
        }
        budget--;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(sc->cur), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone since readdir */
        sc->partial += blocks_bytes(&st);
        if (!S_ISDIR(st.st_mode) || st.st_dev != sc->dev || sc->depth + 1 >= WS_SCAN_DEPTH_MAX)
            continue;
        int fd = openat(dirfd(sc->cur), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat cst;
        if (fd < 0)
            continue;
        /* Swapped between fstatat and openat: skip it rather than count
         * something else. */
        if (fstat(fd, &cst) < 0 || cst.st_dev != st.st_dev || cst.st_ino != st.st_ino ||
            !scan_push(sc, fd, &cst))
            close(fd);
    }
    return false;
}

void tg__ws_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s)
{
    if (ci->ws_kind == TG_WORKSPACE_SCAN && ci->ws_scan) {
        struct tg_ws_scan *sc = ci->ws_scan;
        scan_step(sc, WS_SCAN_STEP_MAX);
        /* The last complete count, or the walk in progress once it has
         * seen more: either is what the workspace held at some point. */
        s->disk_bytes = sc->partial > sc->total ? sc->partial : sc->total;
        s->have |= TG_SAMPLE_DISK;
        return;
    }
    if (ci->ws_kind != TG_WORKSPACE_TMPFS || ci->pid <= 0)
        return;
    char p[TG_WORKSPACE_PATH_MAX + 48];
    struct stat in_ns, host;
    struct statfs fs;
    int n = snprintf(p, sizeof p, "/proc/%ld/root%s", (long)ci->pid, ci->ws_path);
    if (n < 0 || (size_t)n >= sizeof p || stat(p, &in_ns) < 0 || stat(ci->ws_path, &host) < 0)
        return;
    /* The same device as the host's directory: the shim has not mounted
     * the tmpfs yet (or the path is not the agent's), nothing to read. */
    if (in_ns.st_dev == host.st_dev || statfs(p, &fs) < 0)
        return;
    s->disk_bytes = (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
    s->have |= TG_SAMPLE_DISK;
}

int tg__ws_destroy(tg_contain_inst_t *ci)
{
    struct tg_ws_scan *sc = ci->ws_scan;
    int rc = 0;
    if (!sc)
        return 0;
    scan_reset(sc);
    close(sc->root_fd);
    free(sc->stack);
    free(sc);
    ci->ws_scan = NULL;
    /* The instance's processes are gone (destroy kills first): remove its
     * directory through the workspace's descriptor. */
    const char *name = strrchr(ci->ws_dir, '/');
    int ws_fd = open(ci->ws_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws_fd < 0)
        return -errno;
    if (name && name[1]) {
        size_t budget = WS_RM_ENTRIES_MAX;
        rc = rm_tree_at(ws_fd, name + 1, &budget);
    }
    close(ws_fd);
    return rc;
}
