/* tg_bench: what toolgate costs over a direct pipe, measured in one run.
 *
 * Two peers are spawned side by side: the echo agent alone ("direct") and
 * `toolgate wrap ... -- echo_agent` ("wrapped"). Each phase runs on both,
 * interleaved in blocks so that CPU frequency drift or a noisy neighbour
 * hits both alike:
 *   1. round trip of a small tools/call, 1 in flight (p50, p99);
 *   2. calls/s with 64 calls in flight, pipelined;
 *   3. round trip of 1 MiB frames, 1 in flight (p50).
 * Then toolgate's peak RSS (VmHWM) is read before it is told to exit.
 * Last (unless --no-http), the HTTP front: `toolgate serve` with an MCP
 * Streamable HTTP listener in front of the same agent, against the direct
 * pipe in the same run (tg_bench_http.h).
 *
 * Idle CPUs: on a VM whose idle vCPUs halt, waking a process on another
 * CPU costs tens of microseconds, and whether a pair of processes shares a
 * CPU is the scheduler's coin toss, held for seconds: the same pair measures
 * 8 us in one run and 90 us in the next. Like cyclictest, the bench holds
 * /dev/cpu_dma_latency at 0 while it runs (when it may: root), so idle CPUs
 * poll and the figures measure the processes, not the hypervisor.
 * --no-idle-poll measures the machine as configured.
 *
 * The client is raw libc: fixed-size frames built once, the id's ten digits
 * rewritten in place, one write per batch, answers found with memchr. A
 * client that costs little makes the ratios harsher, not kinder.
 *
 * Exit status: 0 whatever the figures (it is a benchmark); 2 on a protocol
 * error (an answer with a wrong id, an error, a closed pipe, a crash), 3 when
 * a phase hangs, 64 on bad usage.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Workload sizes; --quick divides the call counts and durations. */
#define BN_SMALL_WARMUP 2000          /* calls per peer before timing */
#define BN_SMALL_CALLS 20000          /* timed calls per peer */
#define BN_SMALL_BLOCK 1000           /* calls per peer before switching peers */
#define BN_PIPE_DEPTH 64              /* calls in flight in phase 2 */
#define BN_PIPE_ROUNDS 6              /* alternating rounds per peer */
#define BN_PIPE_ROUND_CALLS 35000     /* cap per round */
#define BN_PIPE_ROUND_MS 500          /* cap per round */
#define BN_BIG_FRAME_BYTES (1u << 20) /* whole request line, '\n' included */
#define BN_BIG_WARMUP 20
#define BN_BIG_CALLS 300
#define BN_BIG_BLOCK 50

#define BN_PIPE_BYTES (1 << 20)        /* F_SETPIPE_SZ asked for each pipe */
#define BN_READ_MIN (1u << 20)         /* free space kept for each read(2) */
#define BN_IN_MAX (64u << 20)          /* an answer larger than this is an error */
#define BN_PHASE_TIMEOUT_S 120         /* watchdog per phase */
#define BN_EXIT_WAIT_MS 5000           /* wait for a peer to exit after EOF */

/* What the wrapped peer is given; the RSS goal derives from the frame cap. */
#define BN_MAX_FRAME_ARG "max_frame_bytes=8Mi"
#define BN_MAX_FRAME_BYTES (8ull << 20)
#define BN_RSS_BASE_BYTES (16ull << 20)

/* Goals (DESIGN.md performance notes): wrapped / direct. */
#define BN_GOAL_P50 3.0
#define BN_GOAL_RATE 0.6
#define BN_GOAL_BIG_P50 1.6

/* Ids are ten digits (1000000000 + n), so a frame is built once and each
 * call only rewrites the digits. */
#define BN_ID_BASE 1000000000ull
#define BN_ID_DIGITS 10
static const char bn_head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
#define BN_ID_OFF (sizeof bn_head - 1)
static const char bn_small_tail[] =
    ",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
    "\"arguments\":{\"text\":\"hello, toolgate\"}}}\n";
static const char bn_big_mid[] =
    ",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"blob\":\"";
static const char bn_big_tail[] = "\"}}}\n";

/* One spawned peer and our ends of its pipes. Owned by main; bn_finish()
 * closes the fds and reaps the process. */
typedef struct bn_peer {
    const char *label;
    pid_t pid;
    int wfd;              /* requests out (its stdin), non-blocking */
    int rfd;              /* answers in (its stdout), blocking */
    char *in;             /* bytes read; [in_off, in_len) not yet consumed */
    size_t in_off, in_len, in_cap;
    size_t scan;          /* offset from which no '\n' has been seen yet */
    int pipe_req, pipe_ans; /* pipe sizes obtained (bytes) */
    uint64_t next_id;
} bn_peer_t;

static const char *bn_phase = "start";

static void bn_fail(const bn_peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static pid_t bn_serve_pid; /* the HTTP case's toolgate serve, while it runs */

/* A protocol error: say which peer and phase, and stop with status 2. The
 * children see EOF on stdin when we exit; toolgate serve is sent SIGTERM. */
static void bn_fail(const bn_peer_t *p, const char *fmt, ...)
{
    if (bn_serve_pid > 0)
        kill(bn_serve_pid, SIGTERM);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tg_bench: protocol error (%s, %s): ", p ? p->label : "-", bn_phase);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void bn_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "tg_bench: a phase did not finish in time (peer hung)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

static uint64_t bn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *bn_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "tg_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void bn_put_id(char *frame, uint64_t id)
{
    for (int i = BN_ID_DIGITS - 1; i >= 0; i--) {
        frame[BN_ID_OFF + (size_t)i] = (char)('0' + id % 10);
        id /= 10;
    }
}

/* Enlarge a pipe as toolgate does for its agents; what the kernel grants
 * (capped by /proc/sys/fs/pipe-max-size) is reported, not required. */
static int bn_grow_pipe(int fd)
{
    (void)fcntl(fd, F_SETPIPE_SZ, BN_PIPE_BYTES);
    return fcntl(fd, F_GETPIPE_SZ);
}

/* Spawn <argv> with its stdin and stdout on fresh pipes; stderr is shared
 * with ours so a failing peer can say why. */
static void bn_spawn(bn_peer_t *p, const char *label, char *const argv[])
{
    int req[2], ans[2];
    if (pipe2(req, O_CLOEXEC) < 0 || pipe2(ans, O_CLOEXEC) < 0) {
        perror("tg_bench: pipe2");
        exit(1);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, req[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, ans[1], STDOUT_FILENO);
    int rc = posix_spawn(&p->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "tg_bench: cannot run %s: %s\n", argv[0], strerror(rc));
        exit(1);
    }
    close(req[0]);
    close(ans[1]);
    p->label = label;
    p->wfd = req[1];
    p->rfd = ans[0];
    p->pipe_req = bn_grow_pipe(p->wfd);
    p->pipe_ans = bn_grow_pipe(p->rfd);
    /* Writes must never block while the peer is blocked writing an answer
     * to us: bn_write_all() drains answers whenever the request pipe is
     * full. */
    (void)fcntl(p->wfd, F_SETFL, fcntl(p->wfd, F_GETFL) | O_NONBLOCK);
    p->in_cap = 2 * (size_t)BN_READ_MIN;
    p->in = bn_xmalloc(p->in_cap);
    p->in_off = p->in_len = p->scan = 0;
    p->next_id = BN_ID_BASE;
}

/* One read(2) into the input buffer, compacting or growing it first so at
 * least BN_READ_MIN bytes are free. */
static void bn_fill(bn_peer_t *p)
{
    if (p->in_cap - p->in_len < BN_READ_MIN) {
        size_t live = p->in_len - p->in_off;
        if (p->in_off > 0) {
            memmove(p->in, p->in + p->in_off, live);
            p->scan -= p->in_off;
            p->in_off = 0;
            p->in_len = live;
        }
        if (p->in_cap - p->in_len < BN_READ_MIN) {
            if (p->in_cap * 2 > BN_IN_MAX)
                bn_fail(p, "an answer exceeds %u bytes without a newline", BN_IN_MAX);
            char *n = realloc(p->in, p->in_cap * 2);
            if (!n)
                bn_fail(p, "out of memory");
            p->in = n;
            p->in_cap *= 2;
        }
    }
    for (;;) {
        ssize_t r = read(p->rfd, p->in + p->in_len, p->in_cap - p->in_len);
        if (r > 0) {
            p->in_len += (size_t)r;
            return;
        }
        if (r == 0)
            bn_fail(p, "peer closed its stdout");
        if (errno != EINTR)
            bn_fail(p, "read: %s", strerror(errno));
    }
}

/* The next complete answer line (without '\n'), or NULL when none is
 * buffered. The pointer is valid until the next bn_fill(). */
static const char *bn_line(bn_peer_t *p, size_t *len)
{
    if (p->scan < p->in_off)
        p->scan = p->in_off;
    char *nl = memchr(p->in + p->scan, '\n', p->in_len - p->scan);
    if (!nl) {
        p->scan = p->in_len;
        return NULL;
    }
    const char *line = p->in + p->in_off;
    *len = (size_t)(nl - line);
    p->in_off = p->scan = (size_t)(nl - p->in) + 1;
    if (p->in_off == p->in_len)
        p->in_off = p->in_len = p->scan = 0;
    return line;
}

static const char *bn_line_wait(bn_peer_t *p, size_t *len)
{
    const char *l;
    while ((l = bn_line(p, len)) == NULL)
        bn_fill(p);
    return l;
}

/* Write all of <buf>. When the request pipe is full, answers are read into
 * the input buffer meanwhile, so a peer streaming a large answer back is
 * never deadlocked against us. */
static void bn_write_all(bn_peer_t *p, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(p->wfd, buf, len);
        if (w > 0) {
            buf += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            bn_fail(p, "write: %s", strerror(errno));
        struct pollfd pf[2] = {{.fd = p->wfd, .events = POLLOUT}, {.fd = p->rfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            bn_fail(p, "poll: %s", strerror(errno));
        if (pf[1].revents & (POLLIN | POLLHUP))
            bn_fill(p);
    }
}

/* How much of a <len>-byte line to quote in a message: lines are not
 * NUL-terminated. */
static int bn_clip(size_t len, size_t max)
{
    return (int)(len < max ? len : max);
}

static const char *bn_memmem(const char *h, size_t hl, const char *n)
{
    return memmem(h, hl, n, strlen(n));
}

/* Check one answer and return its id: it must be a JSON-RPC result (not an
 * error) whose id is a ten-digit number we sent. The envelope is looked for
 * in the first bytes, where the agent and toolgate keep it, before falling
 * back to the whole line. */
static uint64_t bn_answer_id(const bn_peer_t *p, const char *l, size_t len)
{
    size_t head = len < 160 ? len : 160;
    if (len == 0 || l[0] != '{')
        bn_fail(p, "answer is not a JSON object: %.*s", bn_clip(len, 80), l);
    const char *r = bn_memmem(l, head, "\"result\"");
    if (!r && !bn_memmem(l, len, "\"result\""))
        bn_fail(p, "answer is not a result: %.*s", bn_clip(len, 300), l);
    const char *id = bn_memmem(l, head, "\"id\"");
    if (!id)
        id = bn_memmem(l, len, "\"id\"");
    if (!id)
        bn_fail(p, "answer has no id: %.*s", bn_clip(len, 160), l);
    const char *end = l + len, *q = id + 4;
    while (q < end && (*q == ' ' || *q == ':'))
        q++;
    uint64_t v = 0;
    int digits = 0;
    while (q < end && *q >= '0' && *q <= '9' && digits <= BN_ID_DIGITS) {
        v = v * 10 + (uint64_t)(*q++ - '0');
        digits++;
    }
    if (digits != BN_ID_DIGITS)
        bn_fail(p, "answer id is not one we sent: %.*s", bn_clip(len, 160), l);
    return v;
}

static void bn_expect(const bn_peer_t *p, uint64_t got, uint64_t want)
{
    if (got != want)
        bn_fail(p, "answer id %" PRIu64 ", expected %" PRIu64, got, want);
}

/* MCP handshake, as a client does it; checks both peers answer at all. */
static void bn_handshake(bn_peer_t *p)
{
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
        "\"clientInfo\":{\"name\":\"tg_bench\",\"version\":\"1\"}}}\n";
    static const char inited[] =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    bn_phase = "initialize";
    bn_write_all(p, init, sizeof init - 1);
    size_t len;
    const char *l = bn_line_wait(p, &len);
    if (!bn_memmem(l, len, "\"result\"") || !bn_memmem(l, len, "\"init\""))
        bn_fail(p, "bad initialize answer: %.*s", bn_clip(len, 200), l);
    bn_write_all(p, inited, sizeof inited - 1);
}

/* <n> sequential calls of <frame> (length <flen>); stores each round trip
 * in ns into <out> when not NULL. */
static void bn_serial(bn_peer_t *p, char *frame, size_t flen, size_t n, uint64_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t id = p->next_id++;
        bn_put_id(frame, id);
        uint64_t t0 = bn_now_ns();
        bn_write_all(p, frame, flen);
        size_t len;
        const char *l = bn_line_wait(p, &len);
        uint64_t t1 = bn_now_ns();
        bn_expect(p, bn_answer_id(p, l, len), id);
        if (flen > 4096 && (len + 256 < flen || len > flen + 256))
            bn_fail(p, "answer of %zu bytes to a %zu-byte frame", len, flen);
        if (out)
            out[i] = t1 - t0;
    }
}

/* Phase 2 for one round: keep <depth> calls in flight until <max_calls>
 * are answered or <max_ms> elapsed. Each batch of answers is replaced by as
 * many new calls in one write. Answers may come in any order; each id must
 * be one in flight and answered once. Adds to *calls and *ns. */
static void bn_pipelined(bn_peer_t *p, size_t depth, size_t max_calls, uint64_t max_ms,
                         uint64_t *calls, uint64_t *ns)
{
    size_t flen = sizeof bn_head - 1 + BN_ID_DIGITS + sizeof bn_small_tail - 1;
    char *batch = bn_xmalloc(flen * depth);
    uint8_t *seen = calloc(max_calls, 1);
    if (!seen)
        bn_fail(p, "out of memory");
    for (size_t i = 0; i < depth; i++) {
        memcpy(batch + i * flen, bn_head, sizeof bn_head - 1);
        memcpy(batch + i * flen + BN_ID_OFF + BN_ID_DIGITS, bn_small_tail,
               sizeof bn_small_tail - 1);
    }
    uint64_t base = p->next_id, t0 = bn_now_ns(), deadline = t0 + max_ms * 1000000ull;
    size_t sent = 0, done = 0, target = max_calls;

    size_t k = depth < target ? depth : target;
    for (size_t i = 0; i < k; i++)
        bn_put_id(batch + i * flen, base + sent + i);
    bn_write_all(p, batch, k * flen);
    sent += k;
    while (done < sent) {
        bn_fill(p);
        size_t got = 0, len;
        const char *l;
        while ((l = bn_line(p, &len)) != NULL) {
            uint64_t id = bn_answer_id(p, l, len);
            if (id < base || id >= base + sent || seen[id - base])
                bn_fail(p, "answer id %" PRIu64 " is not in flight", id);
            seen[id - base] = 1;
            got++;
        }
        done += got;
        if (target > sent && bn_now_ns() >= deadline)
            target = sent; /* time is up: drain what is in flight */
        k = got < target - sent ? got : target - sent;
        if (k > 0) {
            for (size_t i = 0; i < k; i++)
                bn_put_id(batch + i * flen, base + sent + i);
            bn_write_all(p, batch, k * flen);
            sent += k;
        }
    }
    *ns += bn_now_ns() - t0;
    *calls += done;
    p->next_id = base + sent;
    free(seen);
    free(batch);
}

static int bn_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t bn_pct(uint64_t *v, size_t n, unsigned pct)
{
    qsort(v, n, sizeof *v, bn_cmp_u64);
    size_t i = n * pct / 100;
    return v[i < n ? i : n - 1];
}

/* VmHWM (peak resident set) of <pid> in bytes, or 0 when unreadable. */
static uint64_t bn_vmhwm(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

/* Close the peer's stdin, read its stdout to EOF (answers are not expected
 * any more), and reap it; SIGKILL after BN_EXIT_WAIT_MS. Returns the wait
 * status, or -1 when it had to be killed. */
static int bn_finish(bn_peer_t *p)
{
    close(p->wfd);
    uint64_t deadline = bn_now_ns() + BN_EXIT_WAIT_MS * 1000000ull;
    char sink[65536];
    for (;;) {
        uint64_t now = bn_now_ns();
        if (now >= deadline)
            break;
        struct pollfd pf = {.fd = p->rfd, .events = POLLIN};
        int n = poll(&pf, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t r = read(p->rfd, sink, sizeof sink);
        if (r == 0 || (r < 0 && errno != EINTR))
            break;
    }
    close(p->rfd);
    free(p->in);
    int status;
    for (;;) {
        pid_t w = waitpid(p->pid, &status, WNOHANG);
        if (w == p->pid)
            return status;
        if (w < 0)
            return -1;
        if (bn_now_ns() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Keep idle CPUs polling while the returned fd stays open (PM QoS: the
 * kernel restores the normal idle states when it is closed, also when we
 * die). -1 when the device is absent or not writable. */
static int bn_hold_idle_poll(void)
{
    int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int32_t zero = 0;
    if (write(fd, &zero, sizeof zero) != (ssize_t)sizeof zero) {
        close(fd);
        return -1;
    }
    return fd;
}

static void bn_fmt_ns(char *buf, size_t cap, uint64_t ns)
{
    if (ns < 1000000ull)
        snprintf(buf, cap, "%.1f us", (double)ns / 1e3);
    else
        snprintf(buf, cap, "%.3f ms", (double)ns / 1e6);
}

static void bn_fmt(char *buf, size_t cap, uint64_t v, bool is_time)
{
    if (is_time)
        bn_fmt_ns(buf, cap, v);
    else
        snprintf(buf, cap, "%" PRIu64, v);
}

/* One figure: direct <d>, wrapped <w> and their ratio against the goal;
 * with a relay (has_relay), its figure <r> and ratio too. */
static void bn_row(const char *what, uint64_t d, uint64_t r, uint64_t w, bool has_relay,
                   bool is_time, double goal, bool higher_is_better)
{
    char ds[32], rs[48] = "", ws[32], gs[32] = "", verdict[16] = "";
    bn_fmt(ds, sizeof ds, d, is_time);
    bn_fmt(ws, sizeof ws, w, is_time);
    if (has_relay) {
        char v[32];
        bn_fmt(v, sizeof v, r, is_time);
        snprintf(rs, sizeof rs, " %12s %6.2fx", v, d ? (double)r / (double)d : 0.0);
    }
    double ratio = d ? (double)w / (double)d : 0.0;
    if (goal > 0) {
        snprintf(gs, sizeof gs, "%s %.1fx", higher_is_better ? ">=" : "<=", goal);
        bool ok = higher_is_better ? ratio >= goal : ratio <= goal;
        snprintf(verdict, sizeof verdict, "%s", ok ? "meets" : "MISSES");
    }
    printf("%-32s %12s%s %12s %7.2fx  %-8s %s\n", what, ds, rs, ws, ratio, gs, verdict);
}

static void bn_usage(FILE *f)
{
    fprintf(f,
            "usage: tg_bench --toolgate PATH --agent PATH [--relay PATH] [--quick]\n"
            "  Measures the echo agent directly and through `toolgate wrap` in one run:\n"
            "  small-call round trip (1 in flight), calls/s (%d in flight), and 1 MiB\n"
            "  frame round trip; prints ratios against the goals and toolgate's peak RSS.\n"
            "  --relay PATH    also measure a bare relay (tests/bench/tg_uv_relay: libuv,\n"
            "                  copies bytes, nothing else) in the same run: the floor that\n"
            "                  the event loop and the extra hop set for toolgate\n"
            "  --quick         about a tenth of the calls (a smoke run; figures are rough)\n"
            "  --no-idle-poll  leave CPU idle states alone (by default, when root, idle\n"
            "                  CPUs poll during the run so cross-CPU wake-ups are cheap)\n"
            "  --no-http       skip the HTTP front case (toolgate serve over HTTP/1.1:\n"
            "                  sequential and concurrent calls, RSS of idle connections)\n",
            BN_PIPE_DEPTH);
}

/* The command line. */
typedef struct bn_opts {
    const char *toolgate, *agent, *relay;
    bool quick, idle_poll, http;
} bn_opts_t;

/* Parse argv into <o>. -1 to go on, else the exit status (0 after --help,
 * 64 on bad usage). */
static int bn_parse_args(int argc, char **argv, bn_opts_t *o)
{
    *o = (bn_opts_t){.idle_poll = true, .http = true};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--toolgate") == 0 && i + 1 < argc)
            o->toolgate = argv[++i];
        else if (strcmp(argv[i], "--agent") == 0 && i + 1 < argc)
            o->agent = argv[++i];
        else if (strcmp(argv[i], "--relay") == 0 && i + 1 < argc)
            o->relay = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            o->quick = true;
        else if (strcmp(argv[i], "--no-idle-poll") == 0)
            o->idle_poll = false;
        else if (strcmp(argv[i], "--no-http") == 0)
            o->http = false;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bn_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tg_bench: unknown or incomplete argument '%s'\n", argv[i]);
            bn_usage(stderr);
            return 64;
        }
    }
    if (!o->toolgate || !o->agent) {
        bn_usage(stderr);
        return 64;
    }
    const char *const exes[] = {o->toolgate, o->agent, o->relay};
    for (int k = 0; k < 3; k++)
        if (exes[k] != NULL && access(exes[k], X_OK) != 0) {
            fprintf(stderr, "tg_bench: %s is not executable\n", exes[k]);
            return 64;
        }
    return -1;
}

/* The workload: call counts and round lengths (--quick divides them). */
typedef struct bn_sizes {
    size_t small_warm, small_n;
    size_t big_warm, big_n;
    size_t round_calls;
    uint64_t round_ms;
} bn_sizes_t;

static bn_sizes_t bn_sizes(bool quick)
{
    size_t div = quick ? 10 : 1;
    return (bn_sizes_t){
        .small_warm = BN_SMALL_WARMUP / div,
        .small_n = BN_SMALL_CALLS / div,
        .big_warm = quick ? 3 : BN_BIG_WARMUP,
        .big_n = BN_BIG_CALLS / div,
        .round_calls = BN_PIPE_ROUND_CALLS / div,
        .round_ms = BN_PIPE_ROUND_MS / div,
    };
}

#include "tg_bench_http.h"

/* What the phases measured, per peer (0 direct, 1 wrapped, 2 relay). */
typedef struct bn_results {
    uint64_t *lat[3];         /* small-call round trips, ns (heap) */
    uint64_t *blat[3];        /* 1 MiB round trips, ns (heap) */
    uint64_t calls[3], ns[3]; /* pipelined calls and the time they took */
    uint64_t hwm;             /* toolgate's VmHWM, bytes (0: unreadable) */
    long long audit_bytes;    /* -1: no audit file */
    int st[3];                /* bn_finish */
} bn_results_t;

/* Start the peers: the agent alone, under `toolgate wrap`, and under the
 * bare relay when there is one. */
static void bn_spawn_all(bn_peer_t *peers, const bn_opts_t *o, const char *audit)
{
    const char *direct_argv[] = {o->agent, NULL};
    const char *wrapped_argv[] = {o->toolgate, "wrap", "--audit", audit,
                            "--limit", "rate_limit=1000000/second",
                            "--limit", "max_concurrent_calls=1024",
                            "--limit", "max_queued_calls=1024",
                            "--limit", BN_MAX_FRAME_ARG,
                            "--", o->agent, NULL};
    const char *relay_argv[] = {o->relay, "--", o->agent, NULL};
    bn_spawn(&peers[0], "direct", (char *const *)direct_argv);
    bn_spawn(&peers[1], "wrapped", (char *const *)wrapped_argv);
    if (o->relay != NULL)
        bn_spawn(&peers[2], "relay", (char *const *)relay_argv);
}

/* Phase 1: small calls, 1 in flight, interleaved in blocks. */
static void bn_phase_small(bn_peer_t *peers, int np, const bn_sizes_t *z, bn_results_t *res)
{
    bn_phase = "small calls";
    alarm(BN_PHASE_TIMEOUT_S);
    size_t sflen = sizeof bn_head - 1 + BN_ID_DIGITS + sizeof bn_small_tail - 1;
    char *small = bn_xmalloc(sflen);
    memcpy(small, bn_head, sizeof bn_head - 1);
    memcpy(small + BN_ID_OFF + BN_ID_DIGITS, bn_small_tail, sizeof bn_small_tail - 1);
    for (int k = 0; k < np; k++)
        res->lat[k] = bn_xmalloc(z->small_n * sizeof(uint64_t));
    for (int k = 0; k < np; k++)
        bn_serial(&peers[k], small, sflen, z->small_warm, NULL);
    for (size_t done = 0; done < z->small_n; done += BN_SMALL_BLOCK) {
        size_t n = z->small_n - done < BN_SMALL_BLOCK ? z->small_n - done : BN_SMALL_BLOCK;
        for (int k = 0; k < np; k++)
            bn_serial(&peers[k], small, sflen, n, res->lat[k] + done);
    }
    free(small);
}

/* Phase 2: throughput with 64 in flight, rounds alternating. */
static void bn_phase_pipelined(bn_peer_t *peers, int np, const bn_sizes_t *z, bn_results_t *res)
{
    bn_phase = "pipelined calls";
    alarm(BN_PHASE_TIMEOUT_S);
    for (int r = 0; r < BN_PIPE_ROUNDS; r++)
        for (int k = 0; k < np; k++)
            bn_pipelined(&peers[k], BN_PIPE_DEPTH, z->round_calls, z->round_ms, &res->calls[k],
                         &res->ns[k]);
}

/* Phase 3: 1 MiB frames, 1 in flight. */
static void bn_phase_big(bn_peer_t *peers, int np, const bn_sizes_t *z, bn_results_t *res)
{
    bn_phase = "1 MiB frames";
    alarm(BN_PHASE_TIMEOUT_S);
    char *big = bn_xmalloc(BN_BIG_FRAME_BYTES);
    size_t off = 0;
    memcpy(big, bn_head, sizeof bn_head - 1);
    off = BN_ID_OFF + BN_ID_DIGITS;
    memcpy(big + off, bn_big_mid, sizeof bn_big_mid - 1);
    off += sizeof bn_big_mid - 1;
    size_t blob = BN_BIG_FRAME_BYTES - off - (sizeof bn_big_tail - 1);
    memset(big + off, 'x', blob);
    memcpy(big + off + blob, bn_big_tail, sizeof bn_big_tail - 1);
    for (int k = 0; k < np; k++)
        res->blat[k] = bn_xmalloc(z->big_n * sizeof(uint64_t));
    for (int k = 0; k < np; k++)
        bn_serial(&peers[k], big, BN_BIG_FRAME_BYTES, z->big_warm, NULL);
    for (size_t done = 0; done < z->big_n; done += BN_BIG_BLOCK) {
        size_t n = z->big_n - done < BN_BIG_BLOCK ? z->big_n - done : BN_BIG_BLOCK;
        for (int k = 0; k < np; k++)
            bn_serial(&peers[k], big, BN_BIG_FRAME_BYTES, n, res->blat[k] + done);
    }
    free(big);
}

/* Print the figures against the goals. <qos_fd> says whether idle CPUs
 * polled. */
static void bn_report(const bn_opts_t *o, const bn_sizes_t *z, const bn_peer_t *peers, int np,
                      bn_results_t *res, int qos_fd)
{
    uint64_t p50[3] = {0}, p99[3] = {0}, bp50[3] = {0}, rate[3] = {0};
    for (int k = 0; k < np; k++) {
        p50[k] = bn_pct(res->lat[k], z->small_n, 50);
        p99[k] = bn_pct(res->lat[k], z->small_n, 99);
        bp50[k] = bn_pct(res->blat[k], z->big_n, 50);
        rate[k] = res->ns[k] ? res->calls[k] * 1000000000ull / res->ns[k] : 0;
    }

    printf("tg_bench%s: echo agent direct vs through toolgate wrap\n", o->quick ? " --quick" : "");
    printf("  %zu small calls, %d in flight for %" PRIu64 "+%" PRIu64
           " calls, %zu frames of 1 MiB; pipes %d/%d bytes\n",
           z->small_n, BN_PIPE_DEPTH, res->calls[0], res->calls[1], z->big_n,
           peers[1].pipe_req, peers[1].pipe_ans);
    printf("  idle CPUs: %s\n",
           qos_fd >= 0    ? "polling (/dev/cpu_dma_latency held at 0)"
           : o->idle_poll ? "as configured (/dev/cpu_dma_latency not writable; expect noise)"
                          : "as configured (--no-idle-poll)");
    bool hr = o->relay != NULL;
    if (hr)
        printf("%-32s %12s %12s %7s %12s %8s  %-8s %s\n", "", "direct", "bare relay", "ratio",
               "wrapped", "ratio", "goal", "");
    else
        printf("%-32s %12s %12s %8s  %-8s %s\n", "", "direct", "wrapped", "ratio", "goal", "");
    bn_row("small call p50 (1 in flight)", p50[0], p50[2], p50[1], hr, true, BN_GOAL_P50, false);
    bn_row("small call p99 (1 in flight)", p99[0], p99[2], p99[1], hr, true, 0, false);
    bn_row("calls/s (64 in flight)", rate[0], rate[2], rate[1], hr, false, BN_GOAL_RATE, true);
    bn_row("1 MiB frame p50 (1 in flight)", bp50[0], bp50[2], bp50[1], hr, true, BN_GOAL_BIG_P50,
           false);
    uint64_t rss_goal = BN_RSS_BASE_BYTES + 2 * BN_MAX_FRAME_BYTES;
    printf("%-32s %12s %9.1f MiB           <= %.0f MiB %s\n", "toolgate peak RSS (VmHWM)", "",
           (double)res->hwm / 1048576.0, (double)rss_goal / 1048576.0,
           res->hwm == 0 ? "(unreadable)" : res->hwm <= rss_goal ? "meets" : "MISSES");
    if (res->audit_bytes >= 0)
        printf("  audit written: %lld bytes\n", res->audit_bytes);
}

/* 0 when every peer exited cleanly after EOF, else 2 (each failure said). */
static int bn_exit_status(const bn_peer_t *peers, int np, const int *st)
{
    int rc = 0;
    for (int k = 0; k < np; k++) {
        if (st[k] == -1) {
            fprintf(stderr, "tg_bench: %s did not exit within %d ms of EOF; killed\n",
                    peers[k].label, BN_EXIT_WAIT_MS);
            rc = 2;
        } else if (WIFSIGNALED(st[k])) {
            fprintf(stderr, "tg_bench: %s died of signal %d\n", peers[k].label,
                    WTERMSIG(st[k]));
            rc = 2;
        } else if (WEXITSTATUS(st[k]) != 0) {
            fprintf(stderr, "tg_bench: %s exited with status %d after EOF\n", peers[k].label,
                    WEXITSTATUS(st[k]));
            rc = 2;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    bn_opts_t o;
    int early = bn_parse_args(argc, argv, &o);
    if (early >= 0)
        return early;
    bn_sizes_t z = bn_sizes(o.quick);

    int qos_fd = o.idle_poll ? bn_hold_idle_poll() : -1;
    signal(SIGPIPE, SIG_IGN); /* a dead peer shows as EPIPE, reported as such */
    signal(SIGALRM, bn_on_alarm);

    char audit[128];
    snprintf(audit, sizeof audit, "/tmp/tg_bench-%d.audit.jsonl", (int)getpid());
    /* 0: direct, 1: wrapped, 2: the bare relay (--relay); every phase
     * interleaves them so that they see the same machine. */
    const int np = o.relay != NULL ? 3 : 2;
    bn_peer_t peers[3];
    bn_spawn_all(peers, &o, audit);
    alarm(BN_PHASE_TIMEOUT_S);
    for (int k = 0; k < np; k++)
        bn_handshake(&peers[k]);

    bn_results_t res = {0};
    bn_phase_small(peers, np, &z, &res);
    bn_phase_pipelined(peers, np, &z, &res);
    bn_phase_big(peers, np, &z, &res);
    bh_results_t hres = {0};
    if (o.http)
        bh_run(&o, &peers[0], &z, audit, &hres);

    /* Peak RSS while the process still exists, then shut both down. */
    bn_phase = "shutdown";
    alarm(BN_PHASE_TIMEOUT_S);
    res.hwm = bn_vmhwm(peers[1].pid);
    for (int k = 0; k < np; k++)
        res.st[k] = bn_finish(&peers[k]);
    alarm(0);
    if (qos_fd >= 0)
        close(qos_fd);
    struct stat ast;
    res.audit_bytes = stat(audit, &ast) == 0 ? (long long)ast.st_size : -1;
    unlink(audit);

    bn_report(&o, &z, peers, np, &res, qos_fd);
    if (o.http)
        bh_report(&z, &hres, res.ns[0] ? res.calls[0] * 1000000000ull / res.ns[0] : 0);
    free(hres.lat);
    free(hres.dlat);
    int rc = bn_exit_status(peers, np, res.st);
    for (int k = 0; k < np; k++) {
        free(res.lat[k]);
        free(res.blat[k]);
    }
    return rc;
}
