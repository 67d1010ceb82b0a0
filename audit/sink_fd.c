/* Writing batches of lines to a file descriptor: the cursor that lets a
 * sink cut a batch after a '\n' (rotation, atomic pipe writes) and the
 * write loop the file and stderr sinks share.
 *
 * Runs on the threadpool (see sink.h), so it may block; a wait on a
 * shared non-blocking fd is bounded by the caller's <wait_ms> so a stuck
 * reader turns into counted loss instead of a sink that never returns.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "audit/sink.h"

/* Step past empty buffers so <c> points at a byte, or at the end. */
static void cur_settle(tg_audit_cur_t *c)
{
    while (c->i < c->iovcnt && c->off == c->iov[c->i].iov_len) {
        c->i++;
        c->off = 0;
    }
}

void tg_audit_cur_init(tg_audit_cur_t *c, const struct iovec *iov, int iovcnt)
{
    c->iov = iov;
    c->iovcnt = iovcnt;
    c->i = 0;
    c->off = 0;
    cur_settle(c);
}

size_t tg_audit_cur_left(const tg_audit_cur_t *c)
{
    size_t n = 0;

    for (int i = c->i; i < c->iovcnt; i++)
        n += c->iov[i].iov_len - (i == c->i ? c->off : 0);
    return n;
}

/* Bytes from <c> through the first '\n' at or after byte <skip> ahead of
 * it, or to the end of the batch; stops looking once past <limit> bytes
 * (returning limit + 1) so that a scan for "fits in max" reads no more
 * than it needs. */
static size_t line_end(const tg_audit_cur_t *c, size_t skip, size_t limit)
{
    size_t pos = 0;

    for (int i = c->i; i < c->iovcnt; i++) {
        const char *base = (const char *)c->iov[i].iov_base + (i == c->i ? c->off : 0);
        size_t len = c->iov[i].iov_len - (i == c->i ? c->off : 0);
        size_t from = skip > pos ? skip - pos : 0;
        if (from < len) {
            const char *nl = memchr(base + from, '\n', len - from);
            if (nl != NULL)
                return pos + (size_t)(nl - base) + 1;
        }
        pos += len;
        if (pos > limit)
            return limit + 1;
    }
    return pos;
}

size_t tg_audit_cur_line(const tg_audit_cur_t *c)
{
    return line_end(c, 0, SIZE_MAX - 1);
}

size_t tg_audit_cur_lines(const tg_audit_cur_t *c, size_t max)
{
    size_t fit = 0;

    for (;;) {
        size_t end = line_end(c, fit, max);
        if (end > max || end == fit)
            return fit;
        fit = end;
    }
}

int tg_audit_cur_prev(const tg_audit_cur_t *c)
{
    int i = c->i;
    size_t off = c->off;

    while (off == 0) {
        if (i == 0)
            return -1;
        off = c->iov[--i].iov_len;
    }
    return (unsigned char)((const char *)c->iov[i].iov_base)[off - 1];
}

void tg_audit_cur_skip(tg_audit_cur_t *c, size_t n)
{
    while (n != 0) {
        size_t room = c->iov[c->i].iov_len - c->off;
        size_t step = n < room ? n : room;
        c->off += step;
        n -= step;
        cur_settle(c);
    }
    cur_settle(c);
}

size_t tg_audit_cur_copy(tg_audit_cur_t *c, char *dst, size_t n)
{
    size_t done = 0;

    while (done < n && c->i < c->iovcnt) {
        size_t room = c->iov[c->i].iov_len - c->off;
        size_t step = n - done < room ? n - done : room;
        memcpy(dst + done, (const char *)c->iov[c->i].iov_base + c->off, step);
        done += step;
        c->off += step;
        cur_settle(c);
    }
    return done;
}

/* Wait until <fd> takes bytes again; false after <wait_ms> or on error. */
static bool wait_writable(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};

    for (;;) {
        int r = poll(&p, 1, wait_ms);
        if (r < 0 && errno == EINTR)
            continue;
        return r > 0 && (p.revents & POLLOUT);
    }
}

ssize_t tg_audit_fd_write(int fd, tg_audit_cur_t *c, size_t n, int wait_ms)
{
    struct iovec v[64]; /* at most UIO_MAXIOV (1024) on Linux */
    size_t total = 0;

    while (total < n) {
        /* The next up to 64 spans of the <n - total> bytes still due. */
        size_t want = n - total;
        int cnt = 0;
        for (int i = c->i; i < c->iovcnt && want != 0 && cnt < (int)(sizeof v / sizeof v[0]);
             i++) {
            size_t off = i == c->i ? c->off : 0;
            size_t len = c->iov[i].iov_len - off;
            if (len == 0)
                continue;
            if (len > want)
                len = want;
            v[cnt].iov_base = (char *)c->iov[i].iov_base + off;
            v[cnt].iov_len = len;
            cnt++;
            want -= len;
        }
        if (cnt == 0)
            break; /* fewer than <n> bytes in the batch */

        ssize_t w = writev(fd, v, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(fd, wait_ms))
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            errno = e; /* the cause of a short return */
            return total != 0 ? (ssize_t)total : -e;
        }
        tg_audit_cur_skip(c, (size_t)w);
        total += (size_t)w;
    }
    return (ssize_t)total;
}
