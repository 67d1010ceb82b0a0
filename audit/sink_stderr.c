/* The stderr sink: JSON lines on toolgate's standard error, for a
 * supervisor (systemd's journal, a container runtime) to collect.
 *
 * The router logs to the same stream from the loop thread. Each write here
 * holds whole lines and at most PIPE_BUF bytes, which POSIX makes atomic on
 * a pipe, so an audit line and a log line never interleave mid-line (a
 * single line longer than PIPE_BUF cannot exist: TG_AUDIT_LINE_MAX is
 * PIPE_BUF on Linux). The router's log may have made fd 2 non-blocking;
 * a reader that stops reading stalls this sink for at most
 * STDERR_WAIT_MS per write, after which the lines are counted as lost
 * rather than holding a threadpool thread forever.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/sink.h"

#define STDERR_WAIT_MS 5000 /* fixed internal bound: one stalled write to stderr */

/* Owned by the sink; freed by stderr_close. */
typedef struct stderr_sink {
    int fd; /* our duplicate of fd 2 */
} stderr_sink_t;

static ssize_t stderr_write(void *ctx, const struct iovec *iov, int iovcnt)
{
    const stderr_sink_t *ss = ctx;
    tg_audit_cur_t cur;
    size_t total = 0;

    tg_audit_cur_init(&cur, iov, iovcnt);
    while (tg_audit_cur_left(&cur) != 0) {
        size_t n = tg_audit_cur_lines(&cur, PIPE_BUF);
        if (n == 0)
            n = tg_audit_cur_line(&cur);
        ssize_t w = tg_audit_fd_write(ss->fd, &cur, n, STDERR_WAIT_MS);
        if (w < 0)
            return total != 0 ? (ssize_t)total : w;
        total += (size_t)w;
        if ((size_t)w < n)
            break;
    }
    return (ssize_t)total;
}

static void stderr_close(void *ctx)
{
    stderr_sink_t *ss = ctx;

    close(ss->fd);
    free(ss);
}

static const tg_audit_sink_ops_t stderr_ops = {
    .kind = "stderr",
    .write = stderr_write,
    .sync = NULL,
    .close = stderr_close,
};

int tg_audit_sink_stderr_open(tg_audit_sink_t *out, tg_err_t *err)
{
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);

    if (fd < 0) {
        int e = errno;
        return tg_err_set(err, -e, "audit: stderr sink: standard error is not open: %s",
                          strerror(e));
    }
    stderr_sink_t *ss = malloc(sizeof(*ss));
    if (ss == NULL) {
        close(fd);
        return tg_err_set(err, -ENOMEM, "audit: stderr sink: out of memory");
    }
    ss->fd = fd;
    out->ops = &stderr_ops;
    out->ctx = ss;
    return 0;
}
