/* Exact admission under load (issue 20, item 21): many MCP callers of one
 * `toolgate serve` keep an agent's rate limit (GCRA, local store) busy
 * while processes spin beside it on every core. Each request gets one
 * answer, and the calls admitted are exactly what GCRA allows over the
 * time toolgate itself saw: burst + floor(elapsed / T), where elapsed runs
 * from the first admission to the last as toolgate's audit dates them
 * (the test's own clock is not the measure: a request sent before the
 * test's window closed may be read by a loaded toolgate after it).
 *
 * Exact means: while calls wait at toolgate, every token the bucket
 * earns is taken. So each caller keeps TG_RATE_DEPTH requests out (a
 * caller slowed by the busy machine still has some waiting), and the
 * burst holds 1 s of tokens, longer than the machine stalls toolgate.
 * A stall longer than burst x T would leave tokens unearned: that is
 * GCRA's bound on a burst, not a drift.
 *
 * Knobs for a longer run by hand (the defaults keep it short):
 * TG_RATE_CALLERS (24), TG_RATE_DEPTH (4), TG_RATE_PER_S (10),
 * TG_RATE_BURST (10), TG_RATE_SECONDS (6), TG_RATE_SPIN (spinning
 * processes, default 2; 0 is taken as the default). */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

#define RX_MAX_CALLERS 256

static tgh_serve_t X;

static void x_fini(void)
{
    tgh_cleanup();
}

static long knob(const char *name, long dflt)
{
    const char *v = getenv(name);
    long n = v != NULL ? strtol(v, NULL, 10) : 0;
    return n > 0 ? n : dflt;
}

/* One caller: its socket and what it has read of the current line. */
typedef struct rx_caller {
    int fd;
    char buf[8192];
    size_t len;
    long next_id;
    long waiting; /* requests out */
} rx_caller_t;

static void send_line(int fd, const char *line)
{
    size_t n = strlen(line), off = 0;
    while (off < n) {
        ssize_t w = write(fd, line + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        cr_assert_gt(w, 0, "write to toolgate: %s", strerror(errno));
        off += (size_t)w;
    }
}

/* Read one whole line from <fd> within <ms> into <out> (cap bytes). */
static void read_line_fd(int fd, char *out, size_t cap, int ms)
{
    size_t n = 0;
    uint64_t end = tgh_now_ms() + (uint64_t)ms;
    while (tgh_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, out + n, 1);
        cr_assert_eq(r, 1, "toolgate closed a caller during its handshake");
        if (out[n] == '\n') {
            out[n] = '\0';
            return;
        }
        if (++n >= cap - 1)
            cr_assert_fail("handshake line too long");
    }
    cr_assert_fail("no handshake answer within %d ms", ms);
}

static void send_call(rx_caller_t *c)
{
    char line[160];
    snprintf(line, sizeof line,
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"text\":\"r\"}}}\n",
             ++c->next_id);
    send_line(c->fd, line);
    c->waiting++;
}

typedef struct rx_count {
    long sent, answered, admitted, rate_denied, other;
} rx_count_t;

/* Take the whole lines <c> has read: each answers its one request. */
static void take_lines(rx_caller_t *c, rx_count_t *k)
{
    char *start = c->buf, *nl;
    while ((nl = memchr(start, '\n', c->len - (size_t)(start - c->buf))) != NULL) {
        *nl = '\0';
        k->answered++;
        if (strstr(start, "\"result\"") != NULL)
            k->admitted++;
        else if (strstr(start, "\"rate_limit_exceeded\"") != NULL)
            k->rate_denied++;
        else {
            k->other++;
            fprintf(stderr, "unexpected answer: %.300s\n", start);
        }
        c->waiting--;
        start = nl + 1;
    }
    size_t rest = c->len - (size_t)(start - c->buf);
    memmove(c->buf, start, rest);
    c->len = rest;
}

/* Processes that spin on the CPU until killed: a busy machine. */
static int spin_start(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        cr_assert_geq(p, 0);
        if (p == 0) {
            volatile unsigned long x = 0;
            alarm(120); /* never outlive a crashed test */
            for (;;)
                x++;
        }
        pids[i] = p;
    }
    return n;
}

static void spin_stop(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
}

/* RFC 3339 "YYYY-MM-DDTHH:MM:SS.mmmZ" as ms since the epoch. */
static int64_t ts_ms(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    cr_assert_eq(sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
                 7, "ts '%s'", s);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

TestSuite(rate_exact, .fini = x_fini, .timeout = 120);

Test(rate_exact, admission_is_exact_on_a_busy_machine)
{
    long ncallers = knob("TG_RATE_CALLERS", 24), rate = knob("TG_RATE_PER_S", 10),
         burst = knob("TG_RATE_BURST", 10), seconds = knob("TG_RATE_SECONDS", 6),
         nspin = knob("TG_RATE_SPIN", 2), depth = knob("TG_RATE_DEPTH", 4);
    cr_assert_leq(ncallers, RX_MAX_CALLERS);
    cr_assert_eq(1000 % rate, 0, "TG_RATE_PER_S must divide 1000 (T in whole ms)");
    long t_ms = 1000 / rate;
    cr_assert_eq(tgh_serve_prepare(&X, "fx"), 0);
    char agent[512];
    snprintf(agent, sizeof agent,
             ", \"max_instances\": %ld, \"execution_limits\": {\"rate_limit\": \"%ld/second\", "
             "\"burst\": %ld, \"max_concurrent_calls\": %ld, \"max_queued_calls\": %ld}",
             ncallers + 2, rate, burst, ncallers * depth, ncallers * depth);
    tgh_fx_write(&X, &(tgh_fx_t){.agent_extra = agent,
                                 .top_extra = ", \"containment\": {\"mode\": \"off\"}"});
    tgh_serve_start(&X, NULL, NULL, 10000);

    static rx_caller_t cs[RX_MAX_CALLERS];
    for (long i = 0; i < ncallers; i++) {
        rx_caller_t *c = &cs[i];
        memset(c, 0, sizeof *c);
        c->fd = tgh_unix_dial(X.sock);
        cr_assert_geq(c->fd, 0, "connect: %s", strerror(-c->fd));
        send_line(c->fd, MCP_INITIALIZE "\n");
        read_line_fd(c->fd, c->buf, sizeof c->buf, 10000);
        cr_assert_not_null(strstr(c->buf, "\"result\""), "initialize: %s", c->buf);
        send_line(c->fd, MCP_INITIALIZED "\n");
        c->buf[0] = '\0';
    }

    pid_t spin[16];
    int ns = spin_start(spin, (int)(nspin < 16 ? nspin : 16));
    rx_count_t k = {0};
    static struct pollfd pf[RX_MAX_CALLERS];
    uint64_t t0 = tgh_now_ms(), stop = t0 + (uint64_t)seconds * 1000, drain = stop + 30000;
    for (long i = 0; i < ncallers; i++)
        for (long j = 0; j < depth; j++) {
            send_call(&cs[i]);
            k.sent++;
        }
    for (;;) {
        uint64_t now = tgh_now_ms();
        long out = 0;
        for (long i = 0; i < ncallers; i++)
            out += cs[i].waiting;
        if (now >= stop && out == 0)
            break;
        cr_assert_lt(now, drain, "%ld requests still unanswered 30 s after the load", out);
        for (long i = 0; i < ncallers; i++)
            pf[i] = (struct pollfd){.fd = cs[i].fd, .events = POLLIN};
        if (poll(pf, (nfds_t)ncallers, 100) <= 0)
            continue;
        for (long i = 0; i < ncallers; i++) {
            rx_caller_t *c = &cs[i];
            if (!(pf[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1);
            cr_assert_gt(r, 0, "toolgate closed caller %ld", i);
            c->len += (size_t)r;
            take_lines(c, &k);
            while (c->waiting < depth && tgh_now_ms() < stop) {
                send_call(c);
                k.sent++;
            }
        }
    }
    uint64_t t_end = tgh_now_ms();
    spin_stop(spin, ns);
    for (long i = 0; i < ncallers; i++)
        close(cs[i].fd);
    tgh_serve_stop(&X, 20000);

    cr_assert_eq(k.answered, k.sent, "%ld requests, %ld answers", k.sent, k.answered);
    cr_assert_eq(k.other, 0, "%ld answers were neither a result nor a rate denial", k.other);
    cr_assert_gt(k.rate_denied, k.admitted, "the load did not keep the rate busy");

    /* When toolgate admitted: each call.completed's ts less its duration
     * (both toolgate's clock, 1 ms resolution). */
    long completed = 0;
    int64_t first = INT64_MAX, last = INT64_MIN;
    /* Every denial is audited too: a long run rotates the file (100Mi). */
    for (int f = 0; f <= 5; f++) {
        char path[TGH_PATH + 48];
        if (f == 0)
            snprintf(path, sizeof path, "%s", X.audit);
        else
            snprintf(path, sizeof path, "%s.%d", X.audit, f);
        char *audit = tgh_read_file(path, NULL);
        if (audit == NULL)
            continue;
        for (char *line = audit, *nl; line != NULL && *line; line = nl != NULL ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl != NULL)
                *nl = '\0';
            if (strstr(line, "\"event\":\"call.completed\"") == NULL)
                continue;
            json_t *ev = json_loads(line, 0, NULL);
            cr_assert_not_null(ev);
            int64_t at = ts_ms(json_string_value(json_object_get(ev, "ts"))) -
                         (int64_t)json_integer_value(json_object_get(ev, "duration_ms"));
            first = at < first ? at : first;
            last = at > last ? at : last;
            completed++;
            json_decref(ev);
        }
        free(audit);
    }
    cr_assert_eq(completed, k.admitted, "%ld results, %ld call.completed events", k.admitted,
                 completed);
    int64_t el = last - first;
    /* The audit dates to the ms (a ts and a duration, each cut to the
     * ms): allow 2 ms either way. */
    long lo = burst + (long)((el - 2) / t_ms), hi = burst + (long)((el + 2) / t_ms);
    long client = burst + (long)((t_end - t0) * (uint64_t)rate / 1000);
    fprintf(stderr,
            "rate_exact: %ld callers, %ld/s burst %ld, %ld spinning: %ld sent, %ld admitted, "
            "%ld refused; toolgate saw %lld ms from first to last admission: burst + "
            "floor(elapsed/T) = %ld..%ld; the test's clock saw %llu ms (%ld)\n",
            ncallers, rate, burst, (long)ns, k.sent, k.admitted, k.rate_denied, (long long)el, lo,
            hi, (unsigned long long)(t_end - t0), client);
    cr_assert(k.admitted >= lo && k.admitted <= hi,
              "admitted %ld, but GCRA allows burst %ld + floor(%lld ms / %ld ms) = %ld..%ld over "
              "the time toolgate saw",
              k.admitted, burst, (long long)el, t_ms, lo, hi);
}

/* toolgate's CPU time (user + system, ms) so far. */
static long cpu_ms(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *t = tgh_read_file(path, NULL);
    cr_assert_not_null(t);
    const char *p = strrchr(t, ')');
    unsigned long ut = 0, st = 0;
    cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
    free(t);
    return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* What kept a loaded toolgate from reading its callers: where no cgroup
 * samples an instance (the rlimit and none backends), each instance's
 * once-a-second sample walked all of /proc, so idle instances cost
 * O(instances x processes) reads a second on the loop (48 idle instances
 * on a quiet host: 190 ms of CPU a second, and far more beside a build).
 * The instances now share one walk a second. */
Test(rate_exact, idle_instances_sampled_from_proc_leave_the_loop_free)
{
    enum { NINST = 48 };
    cr_assert_eq(tgh_serve_prepare(&X, "fx"), 0);
    char agent[64];
    snprintf(agent, sizeof agent, ", \"max_instances\": %d", NINST + 2);
    tgh_fx_write(&X, &(tgh_fx_t){.agent_extra = agent,
                                 .top_extra = ", \"containment\": {\"mode\": \"off\"}"});
    tgh_serve_start(&X, NULL, NULL, 10000);
    static tgh_proc_t c[NINST];
    for (int i = 0; i < NINST; i++) {
        mcp_connect(&c[i], X.sock);
        mcp_init_ok(&c[i], 10000);
    }
    tgh_sleep_ms(1500); /* every instance's monitor runs */
    long before = cpu_ms(X.tg.pid);
    tgh_sleep_ms(3000);
    long used = cpu_ms(X.tg.pid) - before;
    fprintf(stderr, "idle_instances: toolgate used %ld ms of CPU in 3 s with %d instances\n", used,
            NINST);
    cr_assert_lt(used, 150, "toolgate used %ld ms of CPU in 3 s with %d idle instances", used,
                 NINST);
    for (int i = 0; i < NINST; i++)
        tgh_conn_close(&c[i]);
    tgh_serve_stop(&X, 20000);
}
