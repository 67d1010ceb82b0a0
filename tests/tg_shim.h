/* The exec shim (router/agent/shim.h) as the containment and workspace
 * tests drive it: in a forked child of the test process, the way the
 * router runs it, with what it prints collected. Header-only, on top of
 * tests/tg_harness.h; the including file defines _GNU_SOURCE (pipe2). */
#ifndef TG_TESTS_TG_SHIM_H
#define TG_TESTS_TG_SHIM_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>

#include "limits/contain.h"
#include "router/agent/shim.h"
#include "tests/tg_harness.h"

/* What one run of the shim left: its wait status and output (cut to the
 * buffers, NUL-terminated). */
typedef struct shim_run {
    int status;
    bool timed_out; /* killed at the deadline */
    char out[16384];
    size_t outlen;
    char err[4096];
    size_t errlen;
} shim_run_t;

/* Append what the non-blocking <fd> holds now to <buf>; past <cap> it is
 * read and dropped, so the writer never blocks on a full pipe. */
static inline void shim_drain(int fd, char *buf, size_t cap, size_t *len)
{
    for (;;) {
        if (*len + 1 >= cap) {
            char sink[4096];
            if (read(fd, sink, sizeof sink) <= 0)
                return;
            continue;
        }
        ssize_t r = read(fd, buf + *len, cap - 1 - *len);
        if (r <= 0)
            return;
        *len += (size_t)r;
        buf[*len] = '\0';
    }
}

/* Fork, and in the child run the shim for <pl> with <argv>, as the router
 * will. With <stray_fd>, the child first opens a descriptor without
 * O_CLOEXEC that the shim must close. Waits for the main pid only (a
 * forked grandchild may hold the pipes open), up to <timeout_ms>. */
static inline void shim_run(const tg_contain_place_t *pl, char *const argv[], bool stray_fd,
                            unsigned timeout_ms, shim_run_t *r)
{
    memset(r, 0, sizeof *r);
    char **sv = NULL;
    cr_assert_eq(tg_shim_argv_build("/proc/self/exe", pl, NULL, argv, &sv), 0);
    int sc = 0;
    while (sv[sc])
        sc++;
    int po[2], pe[2];
    cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        if (stray_fd && open("/dev/null", O_RDONLY) < 0)
            _exit(99);
        _exit(tg_shim_main(sc - 1, sv + 1));
    }
    tg_shim_argv_free(sv);
    close(po[1]);
    close(pe[1]);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    uint64_t deadline = tgh_now_ms() + timeout_ms;
    for (;;) {
        struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
        poll(pf, 2, 20);
        shim_drain(po[0], r->out, sizeof r->out, &r->outlen);
        shim_drain(pe[0], r->err, sizeof r->err, &r->errlen);
        pid_t w = waitpid(pid, &r->status, WNOHANG);
        if (w == pid)
            break;
        if (tgh_now_ms() >= deadline) {
            r->timed_out = true;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &r->status, 0);
            break;
        }
    }
    shim_drain(po[0], r->out, sizeof r->out, &r->outlen);
    shim_drain(pe[0], r->err, sizeof r->err, &r->errlen);
    close(po[0]);
    close(pe[0]);
}

/* Start the shim for <pl> with <argv> in the background, its stdout to
 * /dev/null; the caller reaps the pid. */
static inline pid_t shim_spawn(const tg_contain_place_t *pl, char *const argv[])
{
    char **sv = NULL;
    cr_assert_eq(tg_shim_argv_build("/proc/self/exe", pl, NULL, argv, &sv), 0);
    int sc = 0;
    while (sv[sc])
        sc++;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 1);
        _exit(tg_shim_main(sc - 1, sv + 1));
    }
    tg_shim_argv_free(sv);
    return pid;
}

#endif
