/* The HTTP case of tg_bench (included by tg_bench.c, whose helpers it
 * uses): `toolgate serve --config` with one MCP Streamable HTTP listener on
 * 127.0.0.1 in front of the same echo agent, driven by a small HTTP/1.1
 * keep-alive client: initialize per connection (one session each), then
 * POST /mcp with Mcp-Session-Id and `Accept: application/json,
 * text/event-stream`; the answer (an SSE stream in chunks, or JSON with a
 * Content-Length) is read whole and its id checked.
 *   - sequential calls on one connection, interleaved in blocks with the
 *     direct pipe (p50, p99);
 *   - calls/s with BH_CONNS connections, one call in flight on each;
 *   - toolgate's RSS with BH_IDLE idle keep-alive connections (each has
 *     had one request answered), against its RSS before they opened.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/socket.h>

#define BH_CONNS 8          /* concurrent connections (sessions) */
#define BH_IDLE 1000        /* idle keep-alive connections for the RSS figure */
#define BH_ROUND_MS 500     /* per round of the concurrent phase */
#define BH_IN_CAP (1u << 16) /* an answer larger than this is an error */

typedef struct bh_conn {
    int fd;
    char sid[80];
    char in[BH_IN_CAP];
    size_t len;
    uint64_t id, t0;
} bh_conn_t;

typedef struct bh_results {
    uint64_t *lat, *dlat; /* sequential round trips, http and direct, ns */
    uint64_t calls, ns;   /* concurrent phase */
    uint64_t rss0, rss_idle; /* bytes: before and with BH_IDLE idle connections */
    int idle;                /* idle connections opened */
} bh_results_t;

static bn_peer_t bh_peer = {.label = "http"}; /* for bn_fail's messages */

static int bh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0)
        bn_fail(&bh_peer, "no free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static int bh_dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Send one POST of <body> (with the session id once there is one). */
static void bh_post(bh_conn_t *c, int port, const char *body, size_t blen)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                     port, c->sid[0] ? "Mcp-Session-Id: " : "", c->sid, c->sid[0] ? "\r\n" : "", blen);
    if (n < 0 || (size_t)n + blen > sizeof req)
        bn_fail(&bh_peer, "request too long");
    memcpy(req + n, body, blen);
    size_t len = (size_t)n + blen, off = 0;
    while (off < len) {
        ssize_t k = send(c->fd, req + off, len - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            bn_fail(&bh_peer, "send: %s", strerror(errno));
        off += (size_t)k;
    }
}

/* Is c->in a whole response? Its status into *status. */
static bool bh_complete(const bh_conn_t *c, int *status)
{
    const char *end = bn_memmem(c->in, c->len, "\r\n\r\n");
    if (end == NULL)
        return false;
    size_t head = (size_t)(end - c->in) + 4;
    *status = c->len > 12 ? atoi(c->in + 9) : 0;
    const char *cl = bn_memmem(c->in, head, "Content-Length: ");
    if (cl != NULL)
        return c->len >= head + strtoull(cl + 16, NULL, 10);
    return c->len >= head + 5 && memcmp(c->in + c->len - 5, "0\r\n\r\n", 5) == 0;
}

/* Read once (blocking); true when the response is whole. */
static bool bh_read_some(bh_conn_t *c, int *status)
{
    if (c->len == sizeof c->in)
        bn_fail(&bh_peer, "an answer over %u bytes", BH_IN_CAP);
    ssize_t k = recv(c->fd, c->in + c->len, sizeof c->in - c->len, 0);
    if (k < 0 && errno == EINTR)
        return false;
    if (k <= 0)
        bn_fail(&bh_peer, "connection closed or failed: %s", k < 0 ? strerror(errno) : "EOF");
    c->len += (size_t)k;
    return bh_complete(c, status);
}

/* The whole answer (blocking); checks the status and that <id> is in it. */
static void bh_answer(bh_conn_t *c, int want, const char *id)
{
    int status = 0;
    while (!bh_read_some(c, &status))
        ;
    if (status != want || (id != NULL && bn_memmem(c->in, c->len, id) == NULL))
        bn_fail(&bh_peer, "status %d, expected %d with id %s: %.*s", status, want, id ? id : "-",
                bn_clip(c->len, 300), c->in);
    c->len = 0;
}

/* Connect and open a session (initialize, then initialized). */
static void bh_open(bh_conn_t *c, int port)
{
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
        "\"clientInfo\":{\"name\":\"tg_bench\",\"version\":\"1\"}}}";
    static const char inited[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    memset(c, 0, offsetof(bh_conn_t, in));
    c->len = 0;
    c->id = BN_ID_BASE;
    if ((c->fd = bh_dial(port)) < 0)
        bn_fail(&bh_peer, "cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
    bh_post(c, port, init, sizeof init - 1);
    int status = 0;
    while (!bh_read_some(c, &status))
        ;
    const char *s = bn_memmem(c->in, c->len, "Mcp-Session-Id: ");
    if (status != 200 || s == NULL)
        bn_fail(&bh_peer, "initialize: %.*s", bn_clip(c->len, 300), c->in);
    size_t n = strcspn(s + 16, "\r\n");
    if (n >= sizeof c->sid)
        bn_fail(&bh_peer, "session id too long");
    memcpy(c->sid, s + 16, n);
    c->sid[n] = '\0';
    c->len = 0;
    bh_post(c, port, inited, sizeof inited - 1);
    bh_answer(c, 202, NULL);
}

/* Start one small call on <c> (its frame without the newline). */
static void bh_call(bh_conn_t *c, int port, char *frame, size_t flen)
{
    bn_put_id(frame, ++c->id);
    c->t0 = bn_now_ns();
    bh_post(c, port, frame, flen - 1);
}

static void bh_call_answer(bh_conn_t *c, const char *frame)
{
    char id[BN_ID_DIGITS + 1];
    memcpy(id, frame + BN_ID_OFF, BN_ID_DIGITS);
    id[BN_ID_DIGITS] = '\0';
    bh_answer(c, 200, id);
}

/* Sequential calls, interleaved in blocks with the direct pipe. */
static void bh_phase_serial(bn_peer_t *direct, bh_conn_t *c, int port, const bn_sizes_t *z,
                            bh_results_t *res, char *frame, size_t flen)
{
    bn_phase = "http sequential calls";
    alarm(BN_PHASE_TIMEOUT_S);
    res->lat = bn_xmalloc(z->small_n * sizeof(uint64_t));
    res->dlat = bn_xmalloc(z->small_n * sizeof(uint64_t));
    for (size_t i = 0; i < z->small_warm; i++) {
        bh_call(c, port, frame, flen);
        bh_call_answer(c, frame);
    }
    for (size_t done = 0; done < z->small_n; done += BN_SMALL_BLOCK) {
        size_t n = z->small_n - done < BN_SMALL_BLOCK ? z->small_n - done : BN_SMALL_BLOCK;
        bn_serial(direct, frame, flen, n, res->dlat + done);
        for (size_t i = 0; i < n; i++) {
            bh_call(c, port, frame, flen);
            bh_call_answer(c, frame);
            res->lat[done + i] = bn_now_ns() - c->t0;
        }
    }
}

/* BH_CONNS connections, one call in flight on each, for <ms>. */
static void bh_concurrent(bh_conn_t *cs, int port, char *frame, size_t flen, uint64_t ms,
                          bh_results_t *res)
{
    struct pollfd pf[BH_CONNS];
    uint64_t t0 = bn_now_ns(), stop = t0 + ms * 1000000ull;
    for (int k = 0; k < BH_CONNS; k++) {
        pf[k] = (struct pollfd){.fd = cs[k].fd, .events = POLLIN};
        bh_call(&cs[k], port, frame, flen);
    }
    int open = BH_CONNS;
    while (open > 0) {
        if (poll(pf, BH_CONNS, 1000) < 0 && errno != EINTR)
            bn_fail(&bh_peer, "poll: %s", strerror(errno));
        for (int k = 0; k < BH_CONNS; k++) {
            int status = 0;
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)) || !bh_read_some(&cs[k], &status))
                continue;
            char id[BN_ID_DIGITS + 1];
            snprintf(id, sizeof id, "%" PRIu64, cs[k].id);
            if (status != 200 || bn_memmem(cs[k].in, cs[k].len, id) == NULL)
                bn_fail(&bh_peer, "concurrent call: %.*s", bn_clip(cs[k].len, 300), cs[k].in);
            cs[k].len = 0;
            res->calls++;
            if (bn_now_ns() < stop) {
                bh_call(&cs[k], port, frame, flen);
            } else {
                pf[k].fd = -1;
                open--;
            }
        }
    }
    res->ns += bn_now_ns() - t0;
}

/* VmRSS of <pid> in bytes (0: unreadable). */
static uint64_t bh_rss(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t kb = 0;
    while (f != NULL && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtoull(line + 6, NULL, 10);
    if (f != NULL)
        fclose(f);
    return kb * 1024;
}

/* BH_IDLE connections, each answered once (a request without a session:
 * 400) and left idle; toolgate's RSS before and with them. */
static void bh_phase_idle(pid_t tg, int port, bh_results_t *res)
{
    bn_phase = "http idle connections";
    alarm(BN_PHASE_TIMEOUT_S);
    static bh_conn_t c;
    static int fds[BH_IDLE];
    static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    res->rss0 = bh_rss(tg);
    for (res->idle = 0; res->idle < BH_IDLE; res->idle++) {
        memset(&c, 0, offsetof(bh_conn_t, in));
        if ((c.fd = bh_dial(port)) < 0)
            break; /* out of descriptors: the figure says how many */
        bh_post(&c, port, ping, sizeof ping - 1);
        bh_answer(&c, 400, NULL);
        fds[res->idle] = c.fd;
    }
    usleep(200000);
    res->rss_idle = bh_rss(tg);
    for (int i = 0; i < res->idle; i++)
        close(fds[i]);
}

/* The whole HTTP case, against <direct> (the echo agent alone). */
static void bh_run(const bn_opts_t *o, bn_peer_t *direct, const bn_sizes_t *z, const char *audit,
                   bh_results_t *res)
{
    int port = bh_free_port();
    struct rlimit rl; /* BH_IDLE connections at both ends; toolgate inherits it */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char cfg[160], haudit[160], json[2048];
    snprintf(haudit, sizeof haudit, "%s.http", audit);
    snprintf(cfg, sizeof cfg, "/tmp/tg_bench-%d.http.json", (int)getpid());
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"http\": \"127.0.0.1:%d\", \"agent\": \"echo\","
             " \"max_connections\": %d, \"keepalive_timeout\": \"600s\","
             " \"max_requests_per_connection\": 1000000}]},"
             " \"audit\": {\"path\": \"%s\"},"
             " \"agents\": [{\"id\": \"echo\", \"command\": [\"%s\"], \"max_instances\": %d,"
             " \"execution_limits\": {\"rate_limit\": \"1000000/second\", \"max_concurrent_calls\": 1024,"
             " \"max_queued_calls\": 1024}}]}\n",
             port, BH_IDLE + BH_CONNS + 8, haudit, o->agent, BH_CONNS + 2);
    FILE *f = fopen(cfg, "w");
    if (f == NULL || fputs(json, f) < 0 || fclose(f) != 0)
        bn_fail(&bh_peer, "cannot write %s", cfg);
    const char *argv[] = {o->toolgate, "serve", "--config", cfg, NULL};
    bn_peer_t tg;
    bn_spawn(&tg, "http", (char *const *)argv);
    bn_serve_pid = tg.pid;
    bn_phase = "http start";
    alarm(BN_PHASE_TIMEOUT_S);
    static bh_conn_t cs[BH_CONNS];
    for (int tries = 0; (cs[0].fd = bh_dial(port)) < 0; tries++) {
        if (tries > 500)
            bn_fail(&bh_peer, "toolgate serve never listened on 127.0.0.1:%d", port);
        usleep(10000);
    }
    close(cs[0].fd);
    for (int k = 0; k < BH_CONNS; k++)
        bh_open(&cs[k], port);
    size_t flen = sizeof bn_head - 1 + BN_ID_DIGITS + sizeof bn_small_tail - 1;
    char *frame = bn_xmalloc(flen);
    memcpy(frame, bn_head, sizeof bn_head - 1);
    memcpy(frame + BN_ID_OFF + BN_ID_DIGITS, bn_small_tail, sizeof bn_small_tail - 1);
    bh_phase_serial(direct, &cs[0], port, z, res, frame, flen);
    bn_phase = "http concurrent calls";
    for (int r = 0; r < BN_PIPE_ROUNDS; r++) {
        alarm(BN_PHASE_TIMEOUT_S);
        bh_concurrent(cs, port, frame, flen, z->round_ms, res);
    }
    free(frame);
    bh_phase_idle(tg.pid, port, res);
    for (int k = 0; k < BH_CONNS; k++)
        close(cs[k].fd);
    kill(tg.pid, SIGTERM);
    int st = bn_finish(&tg);
    bn_serve_pid = 0;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        bn_fail(&bh_peer, "toolgate serve did not stop cleanly on SIGTERM (status %d)", st);
    unlink(cfg);
    unlink(haudit);
}

/* The HTTP rows: figures and ratios to direct (<d_rate>: the direct pipe's
 * calls/s at 64 in flight, measured in the same run). */
static void bh_report(const bn_sizes_t *z, bh_results_t *res, uint64_t d_rate)
{
    uint64_t p50 = bn_pct(res->lat, z->small_n, 50), p99 = bn_pct(res->lat, z->small_n, 99);
    uint64_t d50 = bn_pct(res->dlat, z->small_n, 50), d99 = bn_pct(res->dlat, z->small_n, 99);
    uint64_t rate = res->ns ? res->calls * 1000000000ull / res->ns : 0;
    printf("HTTP front (toolgate serve, one keep-alive connection per session):\n");
    printf("%-32s %12s %12s %8s\n", "", "direct", "http", "ratio");
    bn_row("small call p50 (1 in flight)", d50, 0, p50, false, true, 0, false);
    bn_row("small call p99 (1 in flight)", d99, 0, p99, false, true, 0, false);
    char what[64];
    snprintf(what, sizeof what, "calls/s (%d conns, vs 64 pipe)", BH_CONNS);
    bn_row(what, d_rate, 0, rate, false, false, 0, true);
    double kib0 = (double)res->rss0 / 1024.0, kib = (double)res->rss_idle / 1024.0;
    printf("%-32s %9.1f MiB with %d idle connections (%.1f MiB before): %.1f KiB each\n",
           "toolgate RSS, idle keep-alive", kib / 1024.0, res->idle, kib0 / 1024.0,
           res->idle ? (kib - kib0) / res->idle : 0.0);
}
