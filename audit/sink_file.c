/* The file sink: JSON lines appended to a local file, and the default
 * location of that file.
 *
 * The file may end up holding call metadata for a whole host, so it is
 * created 0600 in directories made 0700; an existing file keeps the mode
 * the operator gave it. O_APPEND makes each write land at the end even if
 * a rotation tool or a second toolgate appends to the same file.
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

/* Owned by the sink; freed by file_close. */
typedef struct file_sink {
    int fd;
} file_sink_t;

static ssize_t file_write(void *ctx, const struct iovec *iov, int iovcnt)
{
    const file_sink_t *fs = ctx;
    size_t total = 0;
    size_t off = 0; /* bytes of iov[i] already written */
    int i = 0;

    for (;;) {
        while (i < iovcnt && off == iov[i].iov_len) {
            i++;
            off = 0;
        }
        if (i == iovcnt)
            return (ssize_t)total;

        ssize_t n;
        if (off != 0) {
            /* Finish a buffer a short write split before handing the
             * untouched rest to writev again. */
            n = write(fs->fd, (const char *)iov[i].iov_base + off, iov[i].iov_len - off);
        } else {
            int cnt = iovcnt - i < UIO_MAXIOV ? iovcnt - i : UIO_MAXIOV;
            n = writev(fs->fd, iov + i, cnt);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            return total != 0 ? (ssize_t)total : -e;
        }
        total += (size_t)n;
        for (size_t left = (size_t)n; left != 0;) {
            size_t room = iov[i].iov_len - off;
            size_t step = left < room ? left : room;
            off += step;
            left -= step;
            if (off == iov[i].iov_len) {
                i++;
                off = 0;
            }
        }
    }
}

static void file_close(void *ctx)
{
    file_sink_t *fs = ctx;

    close(fs->fd);
    free(fs);
}

static const tg_audit_sink_ops_t file_ops = {
    .kind = "file",
    .write = file_write,
    .close = file_close,
};

/* Make every missing directory above the file named by <path> (a writable
 * copy), mode 0700. Returns 0, or a negative errno with <path> cut at the
 * directory that failed, for the message. */
static int make_parents(char *path)
{
    for (char *s = strchr(path + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return 0;
}

int tg_audit_sink_file_open(tg_audit_sink_t *out, const char *path, char *err, size_t errlen)
{
    const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY;
    char dir[PATH_MAX];

    if (path == NULL || path[0] == '\0') {
        snprintf(err, errlen, "audit: empty file path (use --audit PATH to write elsewhere)");
        return -EINVAL;
    }
    if (strlen(path) >= sizeof(dir)) {
        snprintf(err, errlen,
                 "audit: %.64s...: path too long (use --audit PATH to write elsewhere)", path);
        return -ENAMETOOLONG;
    }

    int fd = open(path, flags, 0600);
    if (fd < 0 && errno == ENOENT) {
        /* Only now make directories: the common case (they exist) costs
         * no mkdir, and a parent we could not write but which exists is
         * not an error. */
        memcpy(dir, path, strlen(path) + 1);
        int rc = make_parents(dir);
        if (rc < 0) {
            snprintf(err, errlen,
                     "audit: cannot create directory %s for %s: %s (use --audit PATH to write "
                     "elsewhere)",
                     dir, path, strerror(-rc));
            return rc;
        }
        fd = open(path, flags, 0600);
    }
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "audit: cannot open %s: %s (use --audit PATH to write elsewhere)",
                 path, strerror(e));
        return -e;
    }

    file_sink_t *fs = malloc(sizeof(*fs));
    if (fs == NULL) {
        close(fd);
        snprintf(err, errlen, "audit: %s: out of memory", path);
        return -ENOMEM;
    }
    fs->fd = fd;
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
