/* toolgate wrap's stdin and stdout relays: see relay.h. */
#define _GNU_SOURCE /* pipe2 */
#include "router/front/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "router/gateway/log.h"

#define RELAY_CHUNK (64 * 1024) /* fixed internal bound: bytes moved per read */
#define RELAY_LAST_MS 5000      /* fixed internal bound: wait at exit for stdout to take the rest */

/* Write all <n> bytes of <p> to <fd>, blocking. 0, or -1 when <fd> took
 * no more (the reader went away, the disk is full). */
static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copy <src> to <dst> until <src> ends or <dst> takes no more, then close
 * both: closing the write end of the stdin pipe is the caller's EOF, and
 * closing the read end of the stdout pipe tells the session that its
 * writes no longer land (EPIPE). */
static void pump(int src, int dst)
{
    char buf[RELAY_CHUNK];
    for (;;) {
        ssize_t n = read(src, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || write_all(dst, buf, (size_t)n) < 0)
            break;
    }
    close(src);
    close(dst);
}

static void *in_main(void *arg)
{
    tg_relay_t *r = arg;
    pump(r->in_src, r->in_dst);
    return NULL;
}

static void *out_main(void *arg)
{
    tg_relay_t *r = arg;
    pump(r->out_src, r->out_dst);
    return NULL;
}

/* Whether the loop can poll <fd> as a stream (uv_tty_t or uv_pipe_t). */
static bool pollable(int fd)
{
    uv_handle_type t = uv_guess_handle(fd);
    return t == UV_TTY || t == UV_NAMED_PIPE;
}

/* Put a pipe behind std fd <fd> (0 or 1): the loop gets one end on <fd>,
 * the thread the other end and the original <fd>. 0 or a negative errno
 * (nothing changed). */
static int relay_fd(tg_relay_t *r, int fd)
{
    int p[2];
    int orig = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (orig < 0)
        return -errno;
    if (pipe2(p, O_CLOEXEC) < 0) {
        int e = -errno;
        close(orig);
        return e;
    }
    /* stdin: the loop reads p[0] as fd 0; stdout: it writes p[1] as fd 1.
     * dup2 leaves fd 0/1 without O_CLOEXEC, as they were. */
    int mine = fd == 0 ? p[0] : p[1], theirs = fd == 0 ? p[1] : p[0];
    if (dup2(mine, fd) < 0) {
        int e = -errno;
        close(orig);
        close(p[0]);
        close(p[1]);
        return e;
    }
    close(mine);
    pthread_t *thr = fd == 0 ? &r->in_thr : &r->out_thr;
    if (fd == 0) {
        r->in_src = orig;
        r->in_dst = theirs;
    } else {
        r->out_src = theirs;
        r->out_dst = orig;
    }
    int rc = pthread_create(thr, NULL, fd == 0 ? in_main : out_main, r);
    if (rc != 0) {
        /* Put the original back: the session then says what it is. */
        dup2(orig, fd);
        close(orig);
        close(theirs);
        return -rc;
    }
    if (fd == 0)
        r->in_on = true;
    else
        r->out_on = true;
    return 0;
}

int tg_relay_start(tg_relay_t *r)
{
    *r = (tg_relay_t){.in_src = -1, .in_dst = -1, .out_src = -1, .out_dst = -1};
    /* A closed std fd: /dev/null, so that later pipes and files do not
     * take its number (a frame written to a log, an agent's pipe read as
     * the caller). open() returns the lowest free number: the closed one. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd)
            return -EBADF;
    int rc = 0;
    if (!pollable(0) && (rc = relay_fd(r, 0)) < 0) {
        tg_log_error("stdin: cannot relay it through a pipe: %s", uv_strerror(rc));
        return rc;
    }
    if (!pollable(1) && (rc = relay_fd(r, 1)) < 0) {
        tg_log_error("stdout: cannot relay it through a pipe: %s", uv_strerror(rc));
        return rc;
    }
    return 0;
}

void tg_relay_finish(tg_relay_t *r)
{
    if (r->out_on) {
        /* The session closed fd 1 with its handle, or never opened it:
         * either way fd 1 goes to /dev/null, which drops toolgate's last
         * reference to the pipe's write end, so the thread reads EOF
         * after the last byte. */
        int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (nul >= 0) {
            dup2(nul, 1);
            close(nul);
        }
        /* A device that never takes the rest (a stopped terminal, a FIFO
         * nobody reads) must not hold toolgate's exit: bounded wait. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += RELAY_LAST_MS / 1000;
        if (pthread_timedjoin_np(r->out_thr, NULL, &until) != 0) {
            tg_log("stdout took no more bytes for %d s: exiting without the rest of the output",
                   RELAY_LAST_MS / 1000);
            pthread_detach(r->out_thr);
        }
        r->out_on = false;
    }
    if (r->in_on) {
        /* The session closed fd 0: the thread's next write fails (EPIPE)
         * and it ends; one blocked reading a device ends with the process. */
        pthread_detach(r->in_thr);
        r->in_on = false;
    }
}
