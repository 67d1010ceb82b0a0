/* The file sink: JSON lines appended to a local file, rotated by size,
 * made durable per the fsync policy; and the default location of that file.
 *
 * The file may end up holding call metadata for a whole host, so it is
 * created 0600 in directories made 0700; an existing file keeps the mode
 * the operator gave it. O_APPEND makes each write land at the end even if
 * a second writer appends to the same file. Every open (the first, after a
 * rotation, after the file was deleted or moved) goes through
 * tg_audit_open_file: never through a symbolic link, never in a directory
 * anyone may write without the sticky bit (sink_open.c).
 *
 * Whole lines only: a write cut short (a full disk, EFBIG) is truncated
 * back to the end of its last whole line, so the file never holds part of
 * a line and the lines after the failure start clean; the pipe counts the
 * lines that did not land and reports them as audit.dropped. Only when the
 * truncation cannot be made (another writer appended meanwhile, or
 * ftruncate fails) is the torn line left, and ended by the next write.
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
 * The file deleted or moved while in use: after every batch the path is
 * compared with the descriptor (lstat against fstat: device, inode, link
 * count), so a batch that went to a file nobody can read any more is
 * noticed at once rather than on a timer:
 *  - deleted (no link left): a new file is made at the path and the batch's
 *    lines are written again there (the deleted file took them; nobody
 *    can read them). Lines of earlier batches were in the file when it was
 *    deleted: removing them was the operator's doing, as removing a
 *    rotated file is;
 *  - moved (renamed away: logrotate without copytruncate, or a file put in
 *    its place): the lines are in the moved file. A file already at the
 *    path (logrotate's "create") is opened at once; a new one is made only
 *    after MOVED_GRACE_MS, so toolgate does not race logrotate for the
 *    name. Until then lines go on to the moved file.
 * Each reopen is reported through the status op (audit.reopened); a
 * reopen that fails is retried with the next batch and reported as the
 * sink's problem (logged once by the pipe); lines of a deleted file that
 * cannot be made again are lost and counted.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/sink.h"

#define ROTATED_SUFFIX_MAX 12   /* fixed internal bound: ".<keep>" with keep <= 1000 */
#define MOVED_GRACE_MS     1000 /* fixed internal bound: wait for a rotator to make the new file */

/* Owned by the sink; freed by file_close. Touched only by the one thread
 * running write/sync/close at a time, and by status on the loop thread in
 * between (see sink.h). */
typedef struct file_sink {
    int fd;
    bool partial;         /* the file ends in a line without its '\n' */
    bool reopen;          /* the path must be opened again: a rotation or a reopen could not */
    bool dirty;           /* written since the last fsync */
    uint64_t synced_ms;   /* when the last interval fsync ran */
    const char *gone;     /* with <reopen>: the file was "deleted" or "moved"; NULL: a rotation */
    int gone_rc;          /* "deleted": why the new file could not be made */
    uint64_t moved_ms;    /* when the file was first seen moved away (0: it was not) */
    const char *reopened; /* status: "deleted" or "moved", until status reads it */
    uint64_t rewritten;   /* status: lines written again after "deleted" */
    char problem[TG_ERR_MAX]; /* status: what went wrong in the last write, "" if nothing */
    tg_audit_sink_cfg_t cfg;  /* path is <path> below */
    char path[PATH_MAX];
} file_sink_t;

static const int open_flags = O_WRONLY | O_APPEND | O_CREAT;

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_problem(file_sink_t *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_problem(file_sink_t *fs, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(fs->problem, sizeof(fs->problem), fmt, ap);
    va_end(ap);
}

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

/* Open <fs>->path afresh (a rotation, or the file deleted or moved away),
 * by the rules of tg_audit_open_file; without <create>, only a file that
 * exists. 0, or a negative errno with <err> filled and the old descriptor
 * kept. */
static int reopen(file_sink_t *fs, bool create, tg_err_t *err)
{
    int fd = tg_audit_open_file(fs->path, create ? open_flags : open_flags & ~O_CREAT, err);

    if (fd < 0)
        return fd;
    if (fs->cfg.fsync != TG_AUDIT_FSYNC_NEVER && fs->dirty)
        sync_fd(fs);
    close(fs->fd);
    fs->fd = fd;
    fs->reopen = false;
    fs->gone = NULL;
    fs->partial = false;
    fs->moved_ms = 0;
    if (fs->cfg.fsync == TG_AUDIT_FSYNC_ALWAYS)
        sync_dir(fs->path);
    return 0;
}

/* Move the files up one (see the file comment). Returns 0 when the next
 * line can go to an empty file, or a negative errno when it cannot and
 * lines must keep going to the current one (the problem says why). */
static int rotate(file_sink_t *fs)
{
    char from[PATH_MAX + ROTATED_SUFFIX_MAX], to[PATH_MAX + ROTATED_SUFFIX_MAX];
    tg_err_t err;

    if (fs->cfg.keep == 0) {
        if (ftruncate(fs->fd, 0) != 0) {
            int e = errno;
            set_problem(fs, "cannot empty it at max_bytes: %s; lines go on past it", strerror(e));
            return -e;
        }
        fs->partial = false;
        return 0;
    }
    for (unsigned n = fs->cfg.keep - 1; n >= 1; n--) {
        rotated_name(from, sizeof(from), fs->path, n);
        rotated_name(to, sizeof(to), fs->path, n + 1);
        if (rename(from, to) != 0 && errno != ENOENT) {
            int e = errno;
            set_problem(fs, "cannot rotate %s: %s; lines go on past max_bytes", from, strerror(e));
            return -e;
        }
    }
    rotated_name(to, sizeof(to), fs->path, 1);
    if (rename(fs->path, to) != 0) {
        int e = errno;
        set_problem(fs, "cannot rotate it: %s; lines go on past max_bytes", strerror(e));
        return -e;
    }
    fs->reopen = true;
    int rc = reopen(fs, true, &err);
    if (rc < 0)
        set_problem(fs, "rotated, but no new file: %s; lines go on to %s", err.msg, to);
    return rc;
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

/* Bytes of whole lines (each ending in '\n') among the first <n> at <c>. */
static size_t whole_lines(const tg_audit_cur_t *c, size_t n)
{
    tg_audit_cur_t t = *c;
    size_t done = 0;

    for (;;) {
        size_t len = tg_audit_cur_line(&t);
        if (len == 0 || done + len > n)
            return done;
        tg_audit_cur_skip(&t, len);
        if (tg_audit_cur_prev(&t) != '\n')
            return done;
        done += len;
    }
}

/* Lines of more than a lone '\n' among the first <n> bytes at <c>. */
static uint64_t count_lines(const tg_audit_cur_t *c, size_t n)
{
    tg_audit_cur_t t = *c;
    size_t done = 0;
    uint64_t lines = 0;

    for (;;) {
        size_t len = tg_audit_cur_line(&t);
        if (len == 0 || done + len > n)
            return lines;
        lines += len > 1;
        done += len;
        tg_audit_cur_skip(&t, len);
    }
}

/* Write the <n> bytes at <c> to the end of the file, now <*size> bytes
 * long, and advance <c>. A write cut short is truncated back to the end of
 * its last whole line (see the file comment). Returns the bytes that
 * stayed, or a negative errno when none did; the problem says why it
 * stopped. */
static ssize_t put_lines(file_sink_t *fs, tg_audit_cur_t *c, size_t n, uint64_t *size)
{
    tg_audit_cur_t start = *c;
    ssize_t w = tg_audit_fd_write(fs->fd, c, n, -1);
    int e = w < 0 ? (int)-w : errno;

    if (w == (ssize_t)n) {
        *size += n;
        fs->dirty = true;
        fs->partial = tg_audit_cur_prev(c) != '\n';
        return w;
    }
    set_problem(fs, "cannot write: %s", strerror(e));
    if (w <= 0)
        return w < 0 ? w : -EIO;
    size_t kept = (size_t)w, whole = whole_lines(&start, kept);
    struct stat st;
    if (whole < kept && fstat(fs->fd, &st) == 0 && (uint64_t)st.st_size == *size + kept &&
        ftruncate(fs->fd, (off_t)(*size + whole)) == 0)
        kept = whole; /* the cut line is gone: the file ends in a whole line */
    *size += kept;
    fs->dirty = true;
    fs->partial = kept != whole;
    return kept != 0 ? (ssize_t)kept : -e;
}

/* Write the batch at <c>, rotating as max_bytes says. <*from> and
 * <*from_total> are set to the place in the batch, and the bytes before
 * it, where the file now open began to take lines. Returns the bytes
 * written, or a negative errno when none were. */
static ssize_t write_lines(file_sink_t *fs, tg_audit_cur_t *c, tg_audit_cur_t *from,
                           size_t *from_total)
{
    size_t total = 0;
    uint64_t size = file_size(fs);
    /* Rotation failed, or the file was moved away and its successor is
     * not open yet (rotating would rename whatever is at the path now):
     * write the rest here. */
    bool stuck = fs->gone != NULL;

    if (!fs->partial && tg_audit_cur_line(c) == 1) {
        /* The pipe's repair '\n' for a torn line this file does not hold
         * (it was truncated away, or a new file was opened): not a line. */
        tg_audit_cur_skip(c, 1);
        total = 1;
    }
    *from = *c;
    *from_total = total;
    while (tg_audit_cur_left(c) != 0) {
        size_t n;
        if (fs->partial || stuck) {
            /* A torn line is ended in the file that holds its start. */
            n = fs->partial ? tg_audit_cur_line(c) : tg_audit_cur_left(c);
        } else {
            uint64_t room = fs->cfg.max_bytes > size ? fs->cfg.max_bytes - size : 0;
            n = tg_audit_cur_lines(c, room > SIZE_MAX ? SIZE_MAX : (size_t)room);
            if (n == 0 && size != 0) {
                if (rotate(fs) == 0) {
                    size = 0;
                    *from = *c;
                    *from_total = total;
                } else {
                    stuck = true;
                }
                continue;
            }
            if (n == 0)
                n = tg_audit_cur_line(c); /* longer than max_bytes: alone */
        }
        ssize_t w = put_lines(fs, c, n, &size);
        if (w < 0)
            return total != 0 ? (ssize_t)total : w;
        total += (size_t)w;
        if ((size_t)w < n)
            break;
    }
    return (ssize_t)total;
}

typedef enum path_state { PATH_SAME, PATH_DELETED, PATH_MOVED } path_state_t;

/* Whether <fs>->path still names the file on <fs>->fd. PATH_SAME also
 * when it cannot be told (not a regular file; a directory we may not
 * search). */
static path_state_t path_state(const file_sink_t *fs)
{
    struct stat pst, fst;
    int r = lstat(fs->path, &pst);

    if (r != 0 && errno != ENOENT && errno != ENOTDIR)
        return PATH_SAME;
    if (fstat(fs->fd, &fst) != 0 || !S_ISREG(fst.st_mode))
        return PATH_SAME;
    if (r == 0 && pst.st_dev == fst.st_dev && pst.st_ino == fst.st_ino)
        return PATH_SAME;
    return fst.st_nlink == 0 ? PATH_DELETED : PATH_MOVED;
}

/* The file was deleted under the batch that <done> reports: its lines
 * from <from> (<from_total> bytes into the batch) went where nobody can
 * read them. Make a new file and write them again. Returns the batch's
 * result as write reports it. */
static ssize_t after_deleted(file_sink_t *fs, ssize_t done, const tg_audit_cur_t *from,
                             size_t from_total)
{
    tg_err_t err;
    tg_audit_cur_t c = *from, c_from;
    size_t c_total;

    int rc = reopen(fs, true, &err);
    if (rc < 0) {
        fs->reopen = true;
        fs->gone = "deleted";
        fs->gone_rc = rc;
        set_problem(fs, "was deleted and cannot be made again: %s; events are lost until it can",
                    err.msg);
        return from_total != 0 ? (ssize_t)from_total : rc;
    }
    fs->reopened = "deleted";
    if (done <= (ssize_t)from_total)
        return done; /* nothing of it had gone to the deleted file */
    fs->problem[0] = '\0';
    ssize_t w = write_lines(fs, &c, &c_from, &c_total);
    if (w <= 0)
        return from_total != 0 ? (ssize_t)from_total : w;
    fs->rewritten = count_lines(from, (size_t)w);
    return (ssize_t)(from_total + (size_t)w);
}

/* The file was moved away: take up the file now at the path, or after
 * MOVED_GRACE_MS make one. */
static void after_moved(file_sink_t *fs)
{
    tg_err_t err;
    uint64_t now = mono_ms();

    if (fs->moved_ms == 0)
        fs->moved_ms = now != 0 ? now : 1;
    bool create = now - fs->moved_ms >= MOVED_GRACE_MS;
    int rc = reopen(fs, create, &err);
    if (rc == 0) {
        fs->reopened = "moved";
        return;
    }
    fs->reopen = true;
    fs->gone = "moved";
    if (rc != -ENOENT || create)
        set_problem(fs,
                    "was moved away and cannot be opened again: %s; lines go on to the "
                    "moved file",
                    err.msg);
}

/* Before a write: open the path again where an earlier write could not
 * (see the file comment for what happens to lines meanwhile). */
static void retry_reopen(file_sink_t *fs)
{
    tg_err_t err;
    const char *gone = fs->gone;

    if (gone != NULL && strcmp(gone, "moved") == 0) {
        after_moved(fs);
        return;
    }
    int rc = reopen(fs, true, &err);
    if (rc == 0) {
        fs->reopened = gone;
    } else if (gone != NULL) {
        fs->gone_rc = rc;
        set_problem(fs, "was deleted and cannot be made again: %s; events are lost until it can",
                    err.msg);
    } else {
        set_problem(fs, "rotated, but no new file: %s; lines go on to the rotated file", err.msg);
    }
}

static ssize_t file_write(void *ctx, const struct iovec *iov, int iovcnt)
{
    file_sink_t *fs = ctx;
    tg_audit_cur_t cur, from;
    size_t from_total;

    fs->problem[0] = '\0';
    if (fs->reopen)
        retry_reopen(fs);
    if (fs->reopen && fs->gone != NULL && strcmp(fs->gone, "deleted") == 0)
        return fs->gone_rc; /* nowhere to write but the deleted file: lost, and counted */
    tg_audit_cur_init(&cur, iov, iovcnt);
    ssize_t done = write_lines(fs, &cur, &from, &from_total);

    /* With a rotation's new file not open yet, the path is not ours to
     * judge: the next batch retries the open. */
    path_state_t ps = fs->reopen && fs->gone == NULL ? PATH_SAME : path_state(fs);
    switch (ps) {
    case PATH_DELETED:
        done = after_deleted(fs, done, &from, from_total);
        break;
    case PATH_MOVED:
        after_moved(fs);
        break;
    case PATH_SAME:
        break;
    }
    if (fs->cfg.fsync == TG_AUDIT_FSYNC_ALWAYS && fs->dirty)
        sync_fd(fs);
    return done;
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

static void file_status(void *ctx, tg_audit_sink_status_t *st)
{
    file_sink_t *fs = ctx;

    st->problem = fs->problem;
    st->reopened = fs->reopened;
    st->rewritten = fs->rewritten;
    fs->reopened = NULL;
    fs->rewritten = 0;
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
    .status = file_status,
};

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
    file_sink_t *fs;
    tg_err_t oerr;

    if (path == NULL || path[0] == '\0') {
        return tg_err_set(err, -EINVAL,
                          "audit: empty file path (use --audit PATH to write elsewhere)");
    }
    if (strlen(path) >= sizeof(fs->path)) {
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
    int fd = tg_audit_open_file(path, (open_flags & ~O_ACCMODE) | O_RDWR, &oerr);
    if (fd == -EACCES || fd == -EINVAL)
        fd = tg_audit_open_file(path, open_flags, &oerr); /* write-only file, or /dev/full */
    if (fd < 0)
        return tg_err_set(err, fd, "audit: %s (use --audit PATH to write elsewhere)", oerr.msg);

    fs = calloc(1, sizeof(*fs));
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
