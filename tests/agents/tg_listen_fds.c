/* A stand-in for systemd's socket activation, for tests/test_systemd.c:
 *
 *   tg_listen_fds [--no-pid] [--delay-ms N] SPEC... -- CMD ARGS...
 *
 * Each SPEC is "unix:PATH", "tcp:PORT" (127.0.0.1) or "pipe" (the read end
 * of a pipe, which is no listening socket), optionally followed
 * by "=NAME". The sockets are bound and listening, placed at fds 3, 4, ...
 * in order, then CMD is exec'd with LISTEN_PID (this process's pid, which
 * exec keeps; --no-pid gives another pid), LISTEN_FDS and LISTEN_FDNAMES
 * set, as a socket unit would. --delay-ms waits N ms (sockets listening)
 * before the exec: a service that is not running yet, as while it
 * restarts. Exit 127 with a message on any failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FDS 16

static int fail(const char *what, const char *spec)
{
    fprintf(stderr, "tg_listen_fds: %s: %s: %s\n", spec, what, strerror(errno));
    return 127;
}

/* A listening socket for <spec> (without its "=NAME"), or -1. */
static int open_spec(const char *spec)
{
    int fd = -1;
    if (strncmp(spec, "unix:", 5) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", spec + 5);
        unlink(sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            return -1;
    } else if (strncmp(spec, "tcp:", 4) == 0) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)atoi(spec + 4))};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            return -1;
    } else if (strcmp(spec, "pipe") == 0) {
        int p[2];
        return pipe(p) == 0 ? p[0] : -1; /* not a socket: to be refused */
    } else {
        errno = EINVAL;
        return -1;
    }
    return fd >= 0 && listen(fd, 16) == 0 ? fd : -1;
}

int main(int argc, char **argv)
{
    int i = 1, n = 0;
    int fds[MAX_FDS];
    char names[1024] = "";
    int other_pid = argc > i && strcmp(argv[i], "--no-pid") == 0;
    i += other_pid;
    long delay_ms = 0;
    if (argc > i + 1 && strcmp(argv[i], "--delay-ms") == 0) {
        delay_ms = atol(argv[i + 1]);
        i += 2;
    }
    for (; i < argc && strcmp(argv[i], "--") != 0 && n < MAX_FDS; i++, n++) {
        char spec[512];
        snprintf(spec, sizeof(spec), "%s", argv[i]);
        char *eq = strchr(spec, '=');
        if (eq != NULL)
            *eq++ = '\0';
        if ((fds[n] = open_spec(spec)) < 0)
            return fail("cannot listen", spec);
        size_t len = strlen(names);
        snprintf(names + len, sizeof(names) - len, "%s%s", n ? ":" : "", eq ? eq : "unknown");
    }
    if (i >= argc - 1) {
        fprintf(stderr, "usage: tg_listen_fds [--no-pid] [--delay-ms N] SPEC... -- CMD ARGS...\n");
        return 127;
    }
    /* Move them out of the way, then into place at 3.. */
    for (int k = 0; k < n; k++) {
        int moved = fcntl(fds[k], F_DUPFD_CLOEXEC, 64);
        if (moved < 0)
            return fail("dup", argv[i]);
        close(fds[k]);
        fds[k] = moved;
    }
    for (int k = 0; k < n; k++)
        if (dup2(fds[k], 3 + k) < 0)
            return fail("dup2", argv[i]);
    char v[32];
    snprintf(v, sizeof(v), "%ld", other_pid ? (long)getppid() : (long)getpid());
    setenv("LISTEN_PID", v, 1);
    snprintf(v, sizeof(v), "%d", n);
    setenv("LISTEN_FDS", v, 1);
    setenv("LISTEN_FDNAMES", names, 1);
    if (delay_ms > 0)
        usleep((useconds_t)delay_ms * 1000);
    execv(argv[i + 1], argv + i + 1);
    return fail("exec", argv[i + 1]);
}
