/* Unix listening sockets of `toolgate serve`: see listen.h. */
#define _GNU_SOURCE /* O_PATH, AT_EMPTY_PATH */
#include "router/front/listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "router/gateway/log.h"

void tg_lsock_init(tg_lsock_t *ls)
{
    memset(ls, 0, sizeof(*ls));
    ls->fd = -1;
    ls->dirfd = -1;
}

/* What the file of mode <m> is, for a message. */
static const char *file_kind(mode_t m)
{
    return S_ISREG(m)    ? "a regular file"
           : S_ISDIR(m)  ? "a directory"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "a file of another kind";
}

/* Open the directory of <path> (as O_PATH) into <ls> and keep the last
 * component as its name. 0 or -1 with <err> filled. */
static int open_dir(tg_lsock_t *ls, const char *path, tg_err_t *err)
{
    const char *slash = strrchr(path, '/');
    char dir[TG_LSOCK_PATH_MAX];
    size_t dlen = slash != NULL ? (size_t)(slash - path) : 0;
    if (path[0] != '/' || slash[1] == '\0' || strlen(path) >= TG_LSOCK_PATH_MAX)
        return tg_err_set(err, -1,
                          "router.listen: %s: expected an absolute path of at most %d bytes "
                          "naming a file",
                          path, TG_LSOCK_PATH_MAX - 1);
    if (dlen == 0)
        dlen = 1; /* the root directory */
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    snprintf(ls->name, sizeof(ls->name), "%s", slash + 1);
    ls->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ls->dirfd >= 0)
        return 0;
    int e = errno;
    if (e == ENOENT)
        return tg_err_set(err, -1,
                          "router.listen: cannot listen on %s: the directory %s does not exist "
                          "(create it, e.g. with RuntimeDirectory= in the systemd unit)",
                          path, dir);
    if (e == ENOTDIR)
        return tg_err_set(err, -1, "router.listen: cannot listen on %s: %s is not a directory",
                          path, dir);
    return tg_err_set(err, -1, "router.listen: cannot listen on %s: directory %s: %s", path, dir,
                      strerror(e));
}

/* Whether a process accepts on the socket file at <path>: 1 live, 0 stale
 * (refused: nobody listens), or a negative errno when it cannot tell. */
static int socket_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    /* Non-blocking: a live server whose backlog is full answers EAGAIN
     * at once instead of holding the start. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 1 : -errno;
    close(fd);
    if (rc == -EAGAIN)
        return 1;
    if (rc == -ECONNREFUSED)
        return 0;
    return rc;
}

/* Make room for the socket at <ls>'s name: nothing there, or a stale
 * socket file, removed. 0 or -1 with <err> filled. */
static int clear_path(tg_lsock_t *ls, const char *path, tg_err_t *err)
{
    struct stat st;
    if (fstatat(ls->dirfd, ls->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0
                               : tg_err_set(err, -1, "router.listen: cannot listen on %s: %s", path,
                                            strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return tg_err_set(err, -1,
                          "router.listen: %s exists and is not a socket but %s (remove it or "
                          "choose another path)",
                          path, file_kind(st.st_mode));
    int live = socket_live(path);
    if (live > 0)
        return tg_err_set(err, -1,
                          "router.listen: %s is live: another process accepts on it (stop it "
                          "or choose another path)",
                          path);
    if (live < 0 && live != -ENOENT)
        return tg_err_set(err, -1,
                          "router.listen: %s exists and toolgate cannot tell whether another "
                          "process accepts on it: %s (remove it or choose another path)",
                          path, strerror(-live));
    if (unlinkat(ls->dirfd, ls->name, 0) < 0 && errno != ENOENT)
        return tg_err_set(err, -1, "router.listen: cannot remove the stale socket %s: %s", path,
                          strerror(errno));
    return 0;
}

/* bind(2) <fd> to <path> with the file born at <mode> less the umask. */
static int bind_at_mode(int fd, const char *path, uint32_t mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    /* Linux creates the file with the socket inode's mode less the umask:
     * set that mode first. Elsewhere (fchmod on a socket fails), clear
     * every bit outside <mode> with the umask for the one call. */
    bool narrow = fchmod(fd, (mode_t)(mode & 0777)) < 0;
    mode_t old = narrow ? umask((mode_t)(~mode & 0777)) : 0;
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    if (narrow)
        umask(old);
    return rc;
}

/* ---- socket activation ---------------------------------------------- */

#define ACT_NAME_MAX 64 /* fixed internal bound: a FileDescriptorName kept for messages */

typedef struct act_fd {
    int fd; /* -1: taken by a listener, or never valid */
    char name[ACT_NAME_MAX];
} act_fd_t;

static act_fd_t act[TG_LSOCK_ACTIVATED_MAX];
static int nact;

/* The next ':'-separated name of *<names> into <out> (empty when none). */
static void next_name(const char **names, char *out, size_t cap)
{
    const char *p = *names != NULL ? *names : "";
    size_t n = strcspn(p, ":");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    *names = p[n] == ':' ? p + n + 1 : p + n;
}

/* Whether <fd> is a listening stream socket. */
static bool is_listening(int fd)
{
    int v = 0, type = 0;
    socklen_t l = sizeof(v), tl = sizeof(type);
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v != 0 &&
           getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM;
}

int tg_lsock_activation_init(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    char *end = NULL;
    long n = fds != NULL ? strtol(fds, &end, 10) : 0;
    bool ours = pid != NULL && strtol(pid, NULL, 10) == (long)getpid();
    nact = 0;
    if (ours && fds != NULL && (end == fds || *end != '\0' || n < 0)) {
        tg_log("LISTEN_FDS: '%.16s' is not a count: no socket is taken from the service manager",
               fds);
        n = 0;
    }
    if (ours && n > TG_LSOCK_ACTIVATED_MAX) {
        tg_log("LISTEN_FDS: %ld sockets passed; toolgate takes the first %d (fixed bound)", n,
               TG_LSOCK_ACTIVATED_MAX);
        n = TG_LSOCK_ACTIVATED_MAX;
    }
    for (int i = 0; ours && i < (int)n; i++) {
        int fd = 3 + i;
        act_fd_t *a = &act[nact];
        next_name(&names, a->name, sizeof(a->name));
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
            continue; /* not open */
        if (!is_listening(fd)) {
            tg_log("LISTEN_FDS: fd %d (%s) is not a listening stream socket: closed (use "
                   "ListenStream= in the socket unit)",
                   fd, a->name[0] ? a->name : "unnamed");
            close(fd);
            continue;
        }
        a->fd = fd;
        nact++;
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return nact;
}

/* Take entry <i>: its fd, logged as adopted for <what>. */
static int take(int i, const char *what)
{
    int fd = act[i].fd;
    act[i].fd = -1;
    tg_log("router.listen: %s: the socket the service manager passed (fd %d%s%s)", what, fd,
           act[i].name[0] ? ", " : "", act[i].name);
    return fd;
}

/* Whether Unix paths <a> and <b> name one file (or are one string). */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return strcmp(a, b) == 0 || (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
                                 sa.st_ino == sb.st_ino);
}

int tg_lsock_inherited_unix(const char *path)
{
    for (int i = 0; i < nact; i++) {
        struct sockaddr_un sa;
        socklen_t l = sizeof(sa);
        memset(&sa, 0, sizeof(sa));
        if (act[i].fd < 0 || getsockname(act[i].fd, (struct sockaddr *)&sa, &l) < 0 ||
            sa.sun_family != AF_UNIX || sa.sun_path[0] == '\0')
            continue;
        sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
        if (same_file(sa.sun_path, path))
            return take(i, path);
    }
    return -1;
}

/* The port of <sa> and whether its address is a wildcard; false when it
 * is no AF_INET or AF_INET6 address. */
static bool inet_parts(const struct sockaddr *sa, uint16_t *port, bool *any)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        *port = ntohs(s4->sin_port);
        *any = s4->sin_addr.s_addr == htonl(INADDR_ANY);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        *port = ntohs(s6->sin6_port);
        *any = IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
        return true;
    }
    return false;
}

static bool same_inet(const struct sockaddr *a, const struct sockaddr *b)
{
    uint16_t pa, pb;
    bool aa, ab;
    if (!inet_parts(a, &pa, &aa) || !inet_parts(b, &pb, &ab) || pa != pb || pa == 0)
        return false;
    if (aa && ab)
        return true; /* 0.0.0.0:P and [::]:P (dual-stack, systemd's ListenStream=P) */
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

int tg_lsock_inherited_inet(const struct sockaddr *want)
{
    for (int i = 0; i < nact; i++) {
        struct sockaddr_storage ss;
        socklen_t l = sizeof(ss);
        if (act[i].fd >= 0 && getsockname(act[i].fd, (struct sockaddr *)&ss, &l) == 0 &&
            same_inet((struct sockaddr *)&ss, want)) {
            char what[32];
            uint16_t port = 0;
            bool any;
            inet_parts(want, &port, &any);
            snprintf(what, sizeof(what), "port %u", (unsigned)port);
            return take(i, what);
        }
    }
    return -1;
}

void tg_lsock_activation_done(void)
{
    for (int i = 0; i < nact; i++) {
        if (act[i].fd < 0)
            continue;
        tg_log("LISTEN_FDS: fd %d (%s) matches no router.listen entry: closed (make the socket "
               "unit's ListenStream= equal a listener's unix path or http address)",
               act[i].fd, act[i].name[0] ? act[i].name : "unnamed");
        close(act[i].fd);
        act[i].fd = -1;
    }
    nact = 0;
}

/* Adopt the inherited listening socket <fd> at <path> into <ls>: its
 * directory opened and its file recorded as for a bind. */
static int adopt(tg_lsock_t *ls, const char *path, int fd, tg_err_t *err)
{
    ls->fd = fd;
    ls->inherited = true;
    if (open_dir(ls, path, err) < 0)
        return -1;
    struct stat st;
    if (fstatat(ls->dirfd, ls->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode))
        return tg_err_set(err, -1,
                          "router.listen: %s: the service manager passed its socket but the file "
                          "is gone or replaced (restart the socket unit)",
                          path);
    ls->dev = st.st_dev;
    ls->ino = st.st_ino;
    return 0;
}

int tg_lsock_bind(tg_lsock_t *ls, const char *path, uint32_t mode, tg_err_t *err)
{
    tg_lsock_init(ls);
    int fd = tg_lsock_inherited_unix(path);
    if (fd >= 0) {
        if (adopt(ls, path, fd, err) == 0)
            return 0;
        goto fail;
    }
    if (open_dir(ls, path, err) < 0 || clear_path(ls, path, err) < 0)
        goto fail;
    ls->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = ls->fd < 0 ? -errno : bind_at_mode(ls->fd, path, mode);
    if (rc == -EADDRINUSE) {
        tg_err_set(err, -1,
                   "router.listen: %s appeared while toolgate was binding it (another process "
                   "is starting on it?)",
                   path);
        goto fail;
    }
    if (rc < 0) {
        tg_err_set(err, -1, "router.listen: cannot listen on %s: %s", path, strerror(-rc));
        goto fail;
    }
    /* Record the file bind created, to know it again later. */
    struct stat st;
    if (fstatat(ls->dirfd, ls->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode)) {
        tg_err_set(err, -1, "router.listen: %s was removed or replaced while toolgate bound it",
                   path);
        goto fail;
    }
    ls->dev = st.st_dev;
    ls->ino = st.st_ino;
    return 0;
fail:
    tg_lsock_release(ls, false);
    return -1;
}

/* An O_PATH descriptor of <ls>'s file when it still is the socket bound
 * (never following a symlink), else -ESTALE or a negative errno. */
static int open_ours(const tg_lsock_t *ls)
{
    if (ls->dirfd < 0)
        return -EBADF;
    int fd = openat(ls->dirfd, ls->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESTALE : -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_dev != ls->dev ||
        st.st_ino != ls->ino) {
        close(fd);
        return -ESTALE;
    }
    return fd;
}

/* chmod of the inode O_PATH descriptor <fd> names: such a descriptor
 * takes no fchmod, and fchmodat(AT_EMPTY_PATH) needs a kernel and libc
 * newer than Debian 12's. The /proc link names the inode, not a path. */
static int chmod_fd(int fd, mode_t mode)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return chmod(proc, mode & 07777) < 0 ? -errno : 0;
}

int tg_lsock_set_access(const tg_lsock_t *ls, uint32_t mode, int64_t owner, int64_t group,
                        int *owner_rc)
{
    *owner_rc = 0;
    int fd = open_ours(ls);
    if (fd < 0)
        return fd;
    struct stat st;
    uid_t uid = owner < 0 ? (uid_t)-1 : (uid_t)owner;
    gid_t gid = group < 0 ? (gid_t)-1 : (gid_t)group;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0 &&
        ((uid != (uid_t)-1 && uid != st.st_uid) || (gid != (gid_t)-1 && gid != st.st_gid))) {
        /* Neither the old owner under the new mode nor the new owner under
         * the old mode: only what both modes grant while the owner moves. */
        rc = chmod_fd(fd, st.st_mode & (mode_t)mode);
        if (rc == 0 && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
            *owner_rc = -errno;
    }
    if (rc == 0)
        rc = chmod_fd(fd, (mode_t)mode);
    close(fd);
    return rc;
}

void tg_lsock_release(tg_lsock_t *ls, bool unlink)
{
    if (unlink && ls->dirfd >= 0 && !ls->inherited) {
        /* Only our own file: whatever replaced it is someone else's. */
        struct stat st;
        if (fstatat(ls->dirfd, ls->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
            st.st_dev == ls->dev && st.st_ino == ls->ino)
            (void)unlinkat(ls->dirfd, ls->name, 0);
    }
    if (ls->fd >= 0)
        close(ls->fd);
    if (ls->dirfd >= 0)
        close(ls->dirfd);
    ls->fd = -1;
    ls->dirfd = -1;
}
