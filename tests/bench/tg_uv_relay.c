/* The floor toolgate is measured against: a bare libuv relay.
 *
 *   tg_uv_relay [ignored args...] -- CMD ARGS...
 *
 * Starts CMD with pipes on its stdin and stdout and copies bytes both ways
 * on one libuv loop, as toolgate does, but does nothing else: no framing,
 * no parsing, no limits, no audit. It reads into one reused 64 KiB buffer
 * per direction (a 1 MiB frame is forwarded piece by piece as it arrives,
 * which toolgate cannot do: it admits a frame only once it is whole), writes with uv_try_write (queueing only a remainder, and
 * pausing that direction's reads until it drains) and enlarges every pipe
 * with F_SETPIPE_SZ. tg_bench runs it beside toolgate (--relay) so each
 * run shows what the event loop and the extra hop cost on their own: the
 * part of toolgate's ratios that no amount of work inside toolgate can
 * remove. Arguments before "--" are ignored so that it takes toolgate's
 * command line unchanged.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#define RELAY_BUF (64 << 10) /* smaller reads forward a large frame as it streams in */
#define RELAY_PIPE (1 << 20)

typedef struct dir {
    uv_pipe_t in, out;
    char *buf;
    uv_write_t wr;
    bool writing;
    struct dir *self;
} dir_t;

static dir_t up, down; /* up: caller -> agent, down: agent -> caller */
static pid_t agent_pid;

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    dir_t *d = h->data;
    (void)suggested;
    *b = uv_buf_init(d->buf, RELAY_BUF);
}

static void on_written(uv_write_t *req, int status)
{
    dir_t *d = req->data;
    d->writing = false;
    if (status < 0)
        exit(1);
    uv_read_start((uv_stream_t *)&d->in, on_alloc, on_read);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    dir_t *d = s->data;
    if (n < 0) {
        /* EOF on either side ends the run: close the agent's stdin, reap. */
        if (d == &up) {
            uv_close((uv_handle_t *)&up.out, NULL);
            int st;
            waitpid(agent_pid, &st, 0);
        }
        exit(0);
    }
    if (n == 0)
        return;
    uv_buf_t out = uv_buf_init(b->base, (unsigned)n);
    int w = uv_try_write((uv_stream_t *)&d->out, &out, 1);
    if (w == n)
        return;
    if (w < 0 && w != UV_EAGAIN)
        exit(1);
    if (w > 0) {
        out.base += w;
        out.len -= (size_t)w;
    }
    /* The rest waits in <buf>: no more reads this way until it is out. */
    uv_read_stop(s);
    d->writing = true;
    d->wr.data = d;
    if (uv_write(&d->wr, (uv_stream_t *)&d->out, &out, 1, on_written) < 0)
        exit(1);
}

static void open_pipe(uv_loop_t *loop, uv_pipe_t *p, int fd, dir_t *d)
{
    (void)fcntl(fd, F_SETPIPE_SZ, RELAY_PIPE);
    if (uv_pipe_init(loop, p, 0) != 0 || uv_pipe_open(p, fd) != 0) {
        fprintf(stderr, "tg_uv_relay: fd %d is not a pipe\n", fd);
        exit(64);
    }
    p->data = d;
}

int main(int argc, char **argv)
{
    int i = 1;
    while (i < argc && strcmp(argv[i], "--") != 0)
        i++;
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: tg_uv_relay [ignored...] -- CMD ARGS...\n");
        return 64;
    }
    int to_agent[2], from_agent[2];
    if (pipe2(to_agent, O_CLOEXEC) != 0 || pipe2(from_agent, O_CLOEXEC) != 0)
        return 1;
    agent_pid = fork();
    if (agent_pid < 0)
        return 1;
    if (agent_pid == 0) {
        dup2(to_agent[0], 0);
        dup2(from_agent[1], 1);
        execvp(argv[i + 1], argv + i + 1);
        _exit(127);
    }
    close(to_agent[0]);
    close(from_agent[1]);
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t *loop = uv_default_loop();
    up.buf = malloc(RELAY_BUF);
    down.buf = malloc(RELAY_BUF);
    if (up.buf == NULL || down.buf == NULL)
        return 1;
    open_pipe(loop, &up.in, 0, &up);
    open_pipe(loop, &up.out, to_agent[1], &up);
    open_pipe(loop, &down.in, from_agent[0], &down);
    open_pipe(loop, &down.out, 1, &down);
    uv_read_start((uv_stream_t *)&up.in, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&down.in, on_alloc, on_read);
    return uv_run(loop, UV_RUN_DEFAULT);
}
