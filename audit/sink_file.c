/* The file sink: JSON lines appended to a local file, rotated by size,
 * made durable per the fsync policy; and the default location of that file.
 *
 * The file may end up holding call metadata for a whole host, so it is
 * created 0600 in directories made 0700; an existing file keeps the mode
 * the operator gave it. O_APPEND makes each write land at the end even if
 * a second writer appends to the same file.
 *
 * Rotation: before a line would take the file past max_bytes, path.<keep-1>
 * .. path.1 move up one, path becomes path.1 and a new path is opened; the
 * oldest (path.<keep>) is replaced by the rename. Cuts fall only after a
 * '\n', so no line is split across files, and a line longer than
 * max_bytes gets a file of its own. The old descriptor is closed only once
 * the new file is open: if opening fails, lines keep going to the renamed
 * file (still in order: it is path.1, the newest rotated file) and the
 * open is retried with the next batch, so rotation never loses a line.
 * With keep 0 there is no rotated file: the file is emptied in place.
 *
 * fsync: "always" syncs each batch before write returns; "interval" syncs
 * from sync() at most once per fsync_interval_ms, asking to be called
 * back while written data is not yet synced; "never" leaves it to the
 * kernel. All of it runs on the threadpool. A rotated file is synced
 * before its descriptor is closed unless the policy is "never".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/sink.h"

#define ROTATED_SUFFIX_MAX 12 /* fixed internal bound: ".<keep>" with keep <= 1000 */

/* Owned by the sink; freed by file_close. Touched only by the one thread
 * running write/sync/close at a time (see sink.h). */
typedef struct file_sink {
    int fd;
    bool partial;     /* the file ends in a line without its '\n' */
    bool reopen;      /* rotation renamed the file but could not open a new one */
    bool dirty;       /* written since the last fsync */
    uint64_t synced_ms; /* when the last interval fsync ran */
    tg_audit_sink_cfg_t cfg; /* path is <path> below */
    char path[PATH_MAX];
} file_sink_t;

static const int open_flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY;

static void sync_fd(file_sink_t *fs)
{
    /* An fsync error cannot be retried usefully (the kernel may already
     * have dropped the pages); the lines are written, only their
     * durability is in doubt, so there is nothing to count. */
    (void)fdatasync(fs->fd);
    fs->dirty = false;
}

/* The directory entry changes of a rotation, made durable ("always"). */
static void sync_dir(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);

    if (slash == path)
        n = 1; /* "/file": the root */
    if (n == 0) {
        dir[0] = '.';
        n = 1;
    } else {
        memcpy(dir, path, n);
    }
    dir[n] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

static void rotated_name(char *buf, size_t cap, const char *path, unsigned n)
{
    snprintf(buf, cap, "%s.%u", path, n);
}

/* Open <fs>->path afresh after a rotation. */
static int reopen(file_sink_t *fs)
{
    int fd = open(fs->path, open_flags, 0600);

    if (fd < 0)
        return -errno;
    if (fs->cfg.fsync != TG_AUDIT_FSYNC_NEVER && fs->dirty)
        sync_fd(fs);
    close(fs->fd);
    fs->fd = fd;
    fs->reopen = false;
    fs->partial = false;
    if (fs->cfg.fsync == TG_AUDIT_FSYNC_ALWAYS)
        sync_dir(fs->path);
    return 0;
}

/* Move the files up one (see the file comment). Returns 0 when the next
 * line can go to an empty file, or a negative errno when it cannot and
 * lines must keep going to the current one. */
static int rotate(file_sink_t *fs)
{
    char from[PATH_MAX + ROTATED_SUFFIX_MAX], to[PATH_MAX + ROTATED_SUFFIX_MAX];

    if (fs->cfg.keep == 0) {
        if (ftruncate(fs->fd, 0) != 0)
            return -errno;
        fs->partial = false;
        return 0;
    }
    for (unsigned n = fs->cfg.keep - 1; n >= 1; n--) {
        rotated_name(from, sizeof(from), fs->path, n);
        rotated_name(to, sizeof(to), fs->path, n + 1);
        if (rename(from, to) != 0 && errno != ENOENT)
            return -errno;
    }
    rotated_name(to, sizeof(to), fs->path, 1);
    if (rename(fs->path, to) != 0)
        return -errno;
    fs->reopen = true;
    return reopen(fs);
}

/* Size of the file now: another writer or a truncation may have changed
 * it since our last write. */
static uint64_t file_size(const file_sink_t *fs)
{
    struct stat st;

    if (fstat(fs->fd, &st) != 0)
        return 0;
    return (uint64_t)st.st_size;
}

static ssize_t file_write(void *ctx, const struct iovec *iov, int iovcnt)
{
    file_sink_t *fs = ctx;
    tg_audit_cur_t cur;
    size_t total = 0;

    if (fs->reopen)
        (void)reopen(fs);
    tg_audit_cur_init(&cur, iov, iovcnt);
    uint64_t size = file_size(fs);
    bool stuck = false; /* rotation failed: write the rest here */

    while (tg_audit_cur_left(&cur) != 0) {
        size_t n;
        if (fs->partial || stuck) {
            /* A torn line is ended in the file that holds its start. */
            n = fs->partial ? tg_audit_cur_line(&cur) : tg_audit_cur_left(&cur);
        } else {
            uint64_t room = fs->cfg.max_bytes > size ? fs->cfg.max_bytes - size : 0;
            n = tg_audit_cur_lines(&cur, room > SIZE_MAX ? SIZE_MAX : (size_t)room);
            if (n == 0 && size != 0) {
                if (rotate(fs) == 0)
                    size = 0;
                else
                    stuck = true;
                continue;
            }
            if (n == 0)
                n = tg_audit_cur_line(&cur); /* longer than max_bytes: alone */
        }
        ssize_t w = tg_audit_fd_write(fs->fd, &cur, n, -1);
        if (w > 0) {
            total += (size_t)w;
            size += (uint64_t)w;
            fs->dirty = true;
            fs->partial = tg_audit_cur_prev(&cur) != '\n';
        }
        if (w < 0)
            return total != 0 ? (ssize_t)total : w;
        if ((size_t)w < n)
            break;
    }
    if (fs->cfg.fsync == TG_AUDIT_FSYNC_ALWAYS && fs->dirty)
        sync_fd(fs);
    return (ssize_t)total;
}

static uint64_t file_sync(void *ctx, uint64_t now_ms)
{
    file_sink_t *fs = ctx;

    if (fs->cfg.fsync != TG_AUDIT_FSYNC_INTERVAL || !fs->dirty)
        return 0;
    if (fs->synced_ms == 0 || now_ms - fs->synced_ms >= fs->cfg.fsync_interval_ms) {
        sync_fd(fs);
        fs->synced_ms = now_ms != 0 ? now_ms : 1;
        return 0;
    }
    return fs->synced_ms + fs->cfg.fsync_interval_ms - now_ms;
}

static void file_close(void *ctx)
{
    file_sink_t *fs = ctx;

    if (fs->cfg.fsync != TG_AUDIT_FSYNC_NEVER && fs->dirty)
        sync_fd(fs);
    close(fs->fd);
    free(fs);
}

static const tg_audit_sink_ops_t file_ops = {
    .kind = "file",
    .write = file_write,
    .sync = file_sync,
    .close = file_close,
};

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

/* True when the file on <fd> is not empty and its last byte is not '\n':
 * a previous writer was cut off mid-line. */
static bool ends_torn(int fd)
{
    struct stat st;
    char last;

    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return false;
    return pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
}

int tg_audit_sink_file_open(tg_audit_sink_t *out, const tg_audit_sink_cfg_t *cfg, tg_err_t *err)
{
    const char *path = cfg == NULL ? NULL : cfg->path;
    char dir[PATH_MAX];

    if (path == NULL || path[0] == '\0') {
        return tg_err_set(err, -EINVAL,
                          "audit: empty file path (use --audit PATH to write elsewhere)");
    }
    if (strlen(path) >= sizeof(dir)) {
        return tg_err_set(err, -ENAMETOOLONG,
                          "audit: %.64s...: path too long (use --audit PATH to write elsewhere)",
                          path);
    }
    if (cfg->max_bytes == 0 || cfg->fsync > TG_AUDIT_FSYNC_NEVER ||
        (cfg->fsync == TG_AUDIT_FSYNC_INTERVAL && cfg->fsync_interval_ms == 0)) {
        return tg_err_set(err, -EINVAL,
                          "audit: %s: max_bytes and fsync_interval must be at least 1", path);
    }

    /* O_RDWR rather than O_WRONLY only to read the last byte back. */
    const int flags = (open_flags & ~O_WRONLY) | O_RDWR;
    int fd = open(path, flags, 0600);
    if (fd < 0 && errno == ENOENT) {
        /* Only now make directories: the common case (they exist) costs
         * no mkdir, and a parent we could not write but which exists is
         * not an error. */
        memcpy(dir, path, strlen(path) + 1);
        int rc = tg_audit_make_parents(dir);
        if (rc < 0) {
            return tg_err_set(
                err, rc,
                "audit: cannot create directory %s for %s: %s (use --audit PATH to write "
                "elsewhere)",
                dir, path, strerror(-rc));
        }
        fd = open(path, flags, 0600);
    }
    if (fd < 0 && (errno == EACCES || errno == EINVAL))
        fd = open(path, open_flags, 0600); /* write-only file, or a device like /dev/full */
    if (fd < 0) {
        int e = errno;
        return tg_err_set(err, -e,
                          "audit: cannot open %s: %s (use --audit PATH to write elsewhere)", path,
                          strerror(e));
    }

    file_sink_t *fs = calloc(1, sizeof(*fs));
    if (fs == NULL) {
        close(fd);
        return tg_err_set(err, -ENOMEM, "audit: %s: out of memory", path);
    }
    fs->fd = fd;
    fs->cfg = *cfg;
    memcpy(fs->path, path, strlen(path) + 1);
    fs->cfg.path = fs->path;
    /* A line torn by a crash of the last writer is ended now, so that our
     * first line does not run into it (it stays one visible broken line,
     * which verify reports). */
    if (ends_torn(fd) && write(fd, "\n", 1) != 1) {
        /* Not writable now: the first batch fails the same way and its
         * lines are counted as lost. */
    }
    out->ops = &file_ops;
    out->ctx = fs;
    return 0;
}

/* Write "<base><suffix>" into <buf>; -ENAMETOOLONG when it does not fit. */
static int join(char *buf, size_t cap, const char *base, const char *suffix)
{
    int n = snprintf(buf, cap, "%s%s", base, suffix);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* $XDG_STATE_HOME/toolgate/audit.jsonl when XDG_STATE_HOME is set to an
 * absolute path (the XDG spec says to ignore relative ones), else
 * $HOME/.local/state/toolgate/audit.jsonl; -ENOENT when neither is usable,
 * -ENAMETOOLONG when the result does not fit in <cap> bytes. */
int tg_audit_default_path(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");

    if (xdg != NULL && xdg[0] == '/')
        return join(buf, cap, xdg, "/toolgate/audit.jsonl");
    if (home != NULL && home[0] != '\0')
        return join(buf, cap, home, "/.local/state/toolgate/audit.jsonl");
    return -ENOENT;
}
