/* Opening a sink's file (the audit file, the Redis spool) so that no
 * other user can redirect it.
 *
 * The file may sit in a directory other users can write (the example
 * config puts it in /tmp), where a link or file planted ahead of toolgate
 * would make it append its audit to a file of the attacker's choosing, or
 * to one the attacker can read. So, as systemd does with the paths it is
 * given:
 *  - the last component is opened with O_NOFOLLOW: a symbolic link there
 *    is refused, never followed. The directories above may be links (only
 *    whoever can write their parents could have put them there);
 *  - a parent directory that every user may write, without the sticky
 *    bit, is refused outright: anyone could rename the file away and put
 *    their own (or a link) in its place between two opens;
 *  - in a world-writable directory with the sticky bit (/tmp), where other
 *    users cannot touch toolgate's file but can make theirs first, an
 *    existing file must belong to toolgate's user or to the directory's
 *    owner (the kernel's fs.protected_regular rule), and must have no
 *    other hard link;
 *  - what is opened must be a regular file or a character device
 *    (/dev/null, /dev/full): a FIFO is opened non-blocking, so that one
 *    planted without a reader cannot hang the open, and then refused.
 * The file is opened relative to a descriptor of the very directory that
 * was checked (openat on an O_PATH descriptor), so the checks and the open
 * cannot be told apart by swapping a directory in between.
 */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/sink.h"

int tg_audit_make_parents(char *path)
{
    for (char *s = strchr(path + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return 0;
}

/* Split <path> into its directory (into <dir>, <cap> bytes) and return its
 * last component, or NULL when that is empty (a path ending in '/'). */
static const char *split(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL) {
        snprintf(dir, cap, ".");
        return path[0] != '\0' ? path : NULL;
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/file": the root */
    if (n >= cap)
        n = cap - 1;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return slash[1] != '\0' ? slash + 1 : NULL;
}

/* A descriptor (O_PATH) of the directory <dir> that holds <path>, made
 * (0700, with its parents) when it is missing and <create>. */
static int open_dir(const char *path, const char *dir, bool create, tg_err_t *err)
{
    char buf[PATH_MAX];
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (dfd < 0 && errno == ENOENT && create) {
        /* Only now make directories: the common case (they exist) costs
         * no mkdir, and a parent we could not write but which exists is
         * not an error. */
        snprintf(buf, sizeof(buf), "%s", path);
        int rc = tg_audit_make_parents(buf);
        if (rc < 0)
            return tg_err_set(err, rc, "cannot create directory %s for %s: %s", buf, path,
                              strerror(-rc));
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (dfd < 0) {
        int e = errno;
        return tg_err_set(err, -e, "cannot open %s: %s", path, strerror(e));
    }
    return dfd;
}

/* Whether the file <st> may be used in the directory <dst> (<dir>): the
 * rules of the file comment that apply once it is open. 0 or -EPERM with
 * <err> filled. */
static int check_file(const char *path, const char *dir, const struct stat *dst,
                      const struct stat *st, tg_err_t *err)
{
    if (!S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode)) {
        return tg_err_set(err, -EPERM,
                          "%s is not a regular file (a FIFO, a socket or a block device); "
                          "remove it or name a file",
                          path);
    }
    if (!(dst->st_mode & S_IWOTH))
        return 0;
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != dst->st_uid) {
        return tg_err_set(err, -EPERM,
                          "%s belongs to uid %u, not to toolgate's user (uid %u), and sits in "
                          "the world-writable directory %s: another user may have made it to "
                          "read the audit; remove it, or write where only toolgate's user can",
                          path, (unsigned)st->st_uid, (unsigned)me, dir);
    }
    if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
        return tg_err_set(err, -EPERM,
                          "%s has %lu hard links and sits in the world-writable directory %s: "
                          "a link may have been made to another file; remove it, or write "
                          "where only toolgate's user can",
                          path, (unsigned long)st->st_nlink, dir);
    }
    return 0;
}

int tg_audit_open_file(const char *path, int flags, tg_err_t *err)
{
    char dir[PATH_MAX];
    struct stat dst, st;

    const char *name = split(path, dir, sizeof(dir));
    if (name == NULL)
        return tg_err_set(err, -EISDIR, "%s names a directory, not a file", path);
    int dfd = open_dir(path, dir, (flags & O_CREAT) != 0, err);
    if (dfd < 0)
        return dfd;
    if (fstat(dfd, &dst) != 0) {
        int e = errno;
        close(dfd);
        return tg_err_set(err, -e, "cannot open %s: %s", path, strerror(e));
    }
    if ((dst.st_mode & S_IWOTH) && !(dst.st_mode & S_ISVTX)) {
        close(dfd);
        return tg_err_set(err, -EPERM,
                          "%s is in the directory %s, which every user may write and which has "
                          "no sticky bit (mode %04o): anyone could replace the file; make the "
                          "directory writable only by its owner (chmod o-w %s) or set its "
                          "sticky bit (chmod +t %s)",
                          path, dir, (unsigned)(dst.st_mode & 07777), dir, dir);
    }

    const int always = O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = openat(dfd, name, flags | always, 0600);
    int e = errno;
    if (fd < 0 && e == ELOOP && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
        close(dfd);
        return tg_err_set(err, -ELOOP,
                          "%s is a symbolic link: toolgate does not follow a link to its audit "
                          "files (one planted in a shared directory would send them elsewhere); "
                          "remove the link, or name the file it points to",
                          path);
    }
    if (fd < 0 && e == ENXIO) {
        close(dfd);
        return tg_err_set(err, -EPERM,
                          "%s is a FIFO or a socket, not a file; remove it or name "
                          "a file",
                          path);
    }
    if (fd < 0 && e == EACCES && (dst.st_mode & S_IWOTH) &&
        fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* The kernel refused first (fs.protected_regular / protected_fifos:
         * another user's file in a sticky shared directory): say why, as
         * toolgate's own check would have. */
        int rc = check_file(path, dir, &dst, &st, err);
        if (rc < 0) {
            close(dfd);
            return rc;
        }
    }
    if (fd < 0) {
        close(dfd);
        return tg_err_set(err, -e, "cannot open %s: %s", path, strerror(e));
    }
    int rc = fstat(fd, &st) != 0
                 ? tg_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno))
                 : check_file(path, dir, &dst, &st, err);
    close(dfd);
    if (rc == 0) {
        /* O_NONBLOCK was only for the open (a FIFO without a reader). */
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            rc = tg_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}
