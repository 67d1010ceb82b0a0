/* Hostile callers against the real binary (issue 12): a caller that never
 * reads its answers must not grow toolgate, and is shown the door after
 * idle_timeout; a caller that reads them but pipelines 100 000 calls must
 * not grow it either, nor make the audit lose one; a caller that drips
 * bytes must not hold a connection past the frame-completion deadline. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/os_client.h"
#include "tests/tg_admin.h"
#include "tests/tg_harness.h"

/* Registered with the harness: they must outlive the test bodies. */
static tgh_wrap_t W;
static tgh_serve_t S;

static void h_fini(void)
{
    tgh_cleanup();
}

TestSuite(hostile, .fini = h_fini, .timeout = 60);

static bool under_asan(void)
{
    const char *a = getenv("TG_ASAN");
    return a != NULL && *a == '1';
}

/* Write lines toolgate answers itself (parse errors) to <fd> until it
 * stops reading (a write blocks for 500 ms) or <max> bytes went; the bytes
 * written. */
static size_t flood_unanswered(tgh_proc_t *p, int fd, size_t max, bool lenpfx)
{
    /* MCP: "x{" lines (parse errors); OpenSentience: zero-length frames
     * (protocol errors). */
    static char junk[64 * 1024];
    for (size_t i = 0; i < sizeof junk; i += 4)
        memcpy(junk + i, lenpfx ? "\0\0\0\0" : "x{\n\n", 4);
    size_t sent = 0;
    while (sent < max) {
        int rc;
        if (p != NULL) {
            rc = tgh_send(p, junk, sizeof junk, 500);
        } else {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            rc = poll(&pf, 1, 500) == 1 && write(fd, junk, sizeof junk) > 0 ? 0 : -1;
        }
        if (rc != 0)
            break;
        sent += sizeof junk;
    }
    return sent;
}

Test(hostile, wrap_caller_that_never_reads_stays_bounded_and_is_ended)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char cfg[TGH_PATH + 32];
    snprintf(cfg, sizeof cfg, "%s/c.json", W.dir);
    cr_assert_eq(tgh_write_file(cfg, "{\"router\": {\"idle_timeout\": \"1s\", "
                                      "\"max_frame_bytes\": \"64Ki\"}}\n"),
                 0);
    const char *const args[] = {"--config", cfg, NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, NULL), 0);
    /* 64 MiB of lines each answered with a parse error: 20 times that in
     * answers, which the caller never reads. */
    size_t sent = flood_unanswered(&W.tg, -1, 64u << 20, false);
    cr_log_info("toolgate stopped reading after %zu bytes", sent);
    cr_assert_lt(sent, 64u << 20, "toolgate kept reading a caller that reads nothing");
    long hwm = tgh_proc_status_kb(W.tg.pid, "VmHWM");
    cr_log_info("toolgate VmHWM: %ld KiB", hwm);
    if (!under_asan())
        cr_assert_lt(hwm, 24 * 1024, "toolgate peak RSS %ld KiB under a caller not reading", hwm);
    /* Past idle_timeout the session ends and wrap exits. */
    cr_assert_eq(tgh_wait(&W.tg, 8000), 0, "toolgate still runs 8 s after its caller stopped reading");
    cr_assert_gt(tgh_file_count(W.audit, "\"reason\":\"caller_not_reading\""), 0,
                 "the ended session is not audited");
}

/* A serve config with one listener of <dialect> on <sock> in front of
 * the fixture agent of that dialect, idle_timeout and frame_timeout 1s. */
static void serve_cfg(tgh_serve_t *s, const char *dialect)
{
    char json[8 * TGH_PATH + 512];
    bool os = strcmp(dialect, "opensentience") == 0;
    char hboff[TGH_PATH + 16], tok[TGH_PATH + 16];
    snprintf(hboff, sizeof hboff, "%s/hb-off", s->dir);
    snprintf(tok, sizeof tok, "%s/token", s->dir);
    char cmd[4 * TGH_PATH + 400];
    if (os)
        snprintf(cmd, sizeof cmd,
                 "\"%s/tg_os_agent\", \"--log\", \"%s\", \"--hb-off\", \"%s\", \"--token-file\", "
                 "\"%s\", \"--id\", \"fx\"",
                 TG_AGENTS_DIR, s->log, hboff, tok);
    else
        snprintf(cmd, sizeof cmd, "\"%s/tg_fixture_agent\", \"--log\", \"%s\"", TG_AGENTS_DIR,
                 s->log);
    snprintf(json, sizeof json,
             "{\"router\": {\"idle_timeout\": \"1s\", \"frame_timeout\": \"1s\", "
             "\"listen\": [{\"unix\": \"%s\", "
             "\"dialect\": \"%s\"%s}]},\n"
             " \"audit\": {\"path\": \"%s\"},\n"
             " \"agents\": [{\"id\": \"fx\", \"dialect\": \"%s\", \"command\": [%s]}]}\n",
             s->sock, dialect, os ? "" : ", \"agent\": \"fx\"", s->audit, dialect, cmd);
    tgh_serve_start(s, json, NULL, 10000);
}

/* Drip a frame's bytes one every 200 ms: the connection must be closed
 * within frame_timeout of the frame's first byte (plus slack), however
 * the bytes keep coming. */
static void drip_is_cut(const char *dialect, const char *frame, size_t len)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    serve_cfg(&S, dialect);
    int fd = tgh_unix_dial(S.sock);
    cr_assert_geq(fd, 0, "cannot connect to %s", S.sock);
    uint64_t t0 = tgh_now_ms();
    bool closed = false;
    for (size_t i = 0; i < len && !closed && tgh_now_ms() - t0 < 6000; i++) {
        if (send(fd, frame + i, 1, MSG_NOSIGNAL) != 1) {
            closed = true;
            break;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 200) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof buf) > 0)
                if (poll(&pf, 1, 0) != 1)
                    break;
            if (pf.revents & (POLLHUP | POLLERR) || recv(fd, buf, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
                closed = true;
        }
    }
    uint64_t took = tgh_now_ms() - t0;
    close(fd);
    cr_assert(closed, "a caller dripping one byte per 200 ms held its connection for %llu ms "
                      "(frame_timeout 1s)",
              (unsigned long long)took);
    cr_assert_lt(took, 3500, "the drip was cut only after %llu ms", (unsigned long long)took);
    cr_assert_gt(tgh_file_wait(S.audit, "\"reason\":\"frame_timeout\"", 1, 3000), 0, "the cut is not audited");
    tgh_serve_stop(&S, 10000);
}

Test(hostile, mcp_drip_gets_no_more_time_than_silence)
{
    static const char f[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
                            "\"params\":{\"padding\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\n";
    drip_is_cut("mcp", f, sizeof f - 1);
}

Test(hostile, opensentience_drip_gets_no_more_time_than_silence)
{
    /* A length prefix announcing 200 bytes, then the bytes one by one. */
    char f[4 + 200];
    f[0] = 0, f[1] = 0, f[2] = 0, f[3] = (char)200;
    memset(f + 4, ' ', 200);
    drip_is_cut("opensentience", f, sizeof f);
}

static void serve_not_reading(const char *dialect)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    serve_cfg(&S, dialect);
    int fd = tgh_unix_dial(S.sock);
    cr_assert_geq(fd, 0, "cannot connect to %s", S.sock);
    int small = 4096;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    size_t sent = flood_unanswered(NULL, fd, 64u << 20, strcmp(dialect, "opensentience") == 0);
    cr_log_info("toolgate stopped reading after %zu bytes", sent);
    cr_assert_lt(sent, 64u << 20, "toolgate kept reading a caller that reads nothing");
    long hwm = tgh_proc_status_kb(S.tg.pid, "VmHWM");
    if (!under_asan())
        cr_assert_lt(hwm, 24 * 1024, "toolgate peak RSS %ld KiB under a caller not reading", hwm);
    /* Disconnected after idle_timeout: the socket reads EOF (what was
     * queued may come first). Reading before then would drain the queue
     * and make it a reading caller again. */
    tgh_sleep_ms(2500);
    uint64_t deadline = tgh_now_ms() + 8000;
    bool eof = false;
    char buf[65536];
    while (!eof && tgh_left(deadline) > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)tgh_left(deadline)) != 1)
            break;
        ssize_t n = read(fd, buf, sizeof buf);
        eof = n <= 0;
    }
    close(fd);
    cr_assert(eof, "toolgate did not disconnect a caller that read nothing");
    cr_assert_gt(tgh_file_wait(S.audit, "\"reason\":\"caller_not_reading\"", 1, 3000), 0,
                 "the disconnect is not audited");
    tgh_serve_stop(&S, 10000);
}

Test(hostile, serve_mcp_caller_that_never_reads_stays_bounded_and_is_disconnected)
{
    serve_not_reading("mcp");
}

Test(hostile, serve_opensentience_caller_that_never_reads_stays_bounded_and_is_disconnected)
{
    serve_not_reading("opensentience");
}

/* Issue 12, item 19: shutdown(SHUT_WR) after a call is not a disconnect:
 * the call is answered (as MCP callers' are), then the connection ends. */
Test(hostile, opensentience_half_close_still_gets_its_answer)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    serve_cfg(&S, "opensentience");
    if (tgh_file_wait(S.err, "agent 'fx' ready", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "agent 'fx' did not become ready");
    static osc_t a;
    osc_open(&a, S.sock);
    osc_call(&a, "c1", "fx/sleep", "{\"ms\": 300}", NULL);
    cr_assert_eq(shutdown(a.in_fd, SHUT_WR), 0);
    json_t *r = osc_await(&a, "c1", 5000, NULL);
    cr_assert_not_null(r, "a half-closed caller got no answer");
    cr_assert_str_eq(osc_str(r, "payload", "status"), "succeeded");
    json_decref(r);
    /* Then toolgate ends the connection. */
    cr_assert_null(osc_read(&a, 3000), "a message came after the last answer");
    cr_assert(a.out_eof, "the connection stayed open after the last answer");
    osc_close(&a);
    cr_assert_eq(tgh_file_count(S.audit, "caller_gone"), 0);
    tgh_serve_stop(&S, 10000);
}

/* ---- a reading caller pipelining calls (issue 12, item 2) --------------- */

#define PIPE_FRAME "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"tools/call\"," \
                   "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}}\n"
#define PIPE_INIT "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":" \
                  "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"        \
                  "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n"           \
                  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"

/* OpenSentience: length-prefixed core.tool.call frames, call ids c1..cN. */
#define PIPE_OS_FRAME "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m%u\","                \
                      "\"ts\":\"2026-01-16T12:00:00Z\",\"payload\":{\"call_id\":\"c%u\"," \
                      "\"tool_id\":\"os/echo\",\"input\":{\"text\":\"hi\"}}}"

/* The answers one pipelined run got, by id (0: MCP's initialize, 1..n:
 * calls). */
typedef struct pipe_run {
    bool os;          /* OpenSentience frames, else MCP lines */
    unsigned n;
    uint8_t *answers; /* n + 1 counts, saturating at 2 */
    unsigned lines, unmatched;
    char line[8192 + 1];
    size_t llen;
} pipe_run_t;

/* Count the answer of one line or frame (NUL-terminated) by its id;
 * OpenSentience messages other than results answer nothing. */
static void pipe_line(pipe_run_t *r, const char *l)
{
    const char *key = r->os ? "\"call_id\":\"c" : "\"id\":";
    if (r->os && strstr(l, "\"type\":\"agent.tool.result\"") == NULL)
        return;
    r->lines++;
    const char *id = strstr(l, key);
    char *end = NULL;
    size_t kl = strlen(key);
    unsigned long v = id != NULL ? strtoul(id + kl, &end, 10) : 0;
    if (id == NULL || end == id + kl || v > r->n) {
        r->unmatched++;
        return;
    }
    if (r->answers[v] < 2)
        r->answers[v]++;
}

static void pipe_read(pipe_run_t *r, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r->llen < sizeof r->line - 1)
            r->line[r->llen++] = buf[i];
        const unsigned char *u = (const unsigned char *)r->line;
        size_t want = r->os && r->llen >= 4
                          ? 4 + ((size_t)u[0] << 24 | (size_t)u[1] << 16 | (size_t)u[2] << 8 | u[3])
                          : 0;
        if (r->os ? want == 0 || r->llen < want : buf[i] != '\n')
            continue;
        r->line[r->llen] = '\0';
        pipe_line(r, r->line + (r->os ? 4 : 0));
        r->llen = 0;
    }
}

/* The next call's frame at <out>, at most <cap> bytes; its length. */
static size_t pipe_frame(const pipe_run_t *r, char *out, size_t cap, unsigned id)
{
    if (!r->os)
        return (size_t)snprintf(out, cap, PIPE_FRAME, id);
    size_t len = (size_t)snprintf(out + 4, cap - 4, PIPE_OS_FRAME, id, id);
    out[0] = 0, out[1] = 0, out[2] = (char)(len >> 8), out[3] = (char)len;
    return 4 + len;
}

/* Write an initialize and <n> tools/call frames (OpenSentience: <n>
 * core.tool.call frames) back to back to <wfd>
 * while reading every answer from <rfd> (one poll loop, both
 * non-blocking), until n + 1 answers came or 60 s went. */
static void pipe_calls(pipe_run_t *r, int wfd, int rfd, unsigned n)
{
    r->n = n;
    r->answers = calloc(n + 1, 1);
    cr_assert_not_null(r->answers);
    if (r->os) /* no initialize */
        r->answers[0] = 1, r->lines = 1;
    fcntl(wfd, F_SETFL, fcntl(wfd, F_GETFL) | O_NONBLOCK);
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    static char out[64 * 1024], in[64 * 1024];
    size_t olen = r->os ? 0 : (size_t)snprintf(out, sizeof out, "%s", PIPE_INIT), opos = 0;
    unsigned next = 1;
    uint64_t deadline = tgh_now_ms() + 60000;
    while (r->lines < n + 1 && tgh_left(deadline) > 0) {
        while (opos == olen && next <= n) { /* refill: as many frames as fit */
            olen = opos = 0;
            while (next <= n && sizeof out - olen > 256)
                olen += pipe_frame(r, out + olen, sizeof out - olen, next++);
        }
        short want = opos < olen ? POLLOUT : 0;
        struct pollfd pf[2] = {{.fd = rfd, .events = POLLIN | (wfd == rfd ? want : 0)},
                               {.fd = wfd, .events = want}};
        if (poll(pf, wfd == rfd ? 1 : 2, 1000) <= 0)
            continue;
        if (wfd == rfd)
            pf[1].revents = pf[0].revents; /* one socket both ways */
        if (pf[1].revents & POLLOUT) {
            ssize_t w = write(wfd, out + opos, olen - opos);
            if (w > 0)
                opos += (size_t)w;
        }
        if (pf[0].revents & (POLLIN | POLLHUP)) {
            ssize_t got = read(rfd, in, sizeof in);
            if (got == 0)
                break;
            if (got > 0)
                pipe_read(r, in, (size_t)got);
        }
    }
}

/* Every call got exactly one answer, and nothing else came. */
static void pipe_check(const pipe_run_t *r)
{
    unsigned none = 0, twice = 0;
    for (unsigned i = 0; i <= r->n; i++) {
        none += r->answers[i] == 0;
        twice += r->answers[i] > 1;
    }
    cr_assert_eq(none, 0, "%u of %u pipelined requests got no answer", none, r->n + 1);
    cr_assert_eq(twice, 0, "%u pipelined requests got more than one answer", twice);
    cr_assert_eq(r->unmatched, 0, "%u lines answered no request", r->unmatched);
}

/* The bound of issue 12 (16 MiB + 2 x max_frame_bytes, 64Ki here) on
 * toolgate's peak RSS, and an audit trail with every call in it. */
static void pipe_bounds(pid_t pid, unsigned n)
{
    long hwm = tgh_proc_status_kb(pid, "VmHWM");
    cr_log_info("toolgate VmHWM after %u pipelined calls: %ld KiB", n, hwm);
    if (!under_asan())
        cr_assert_leq(hwm, 16 * 1024 + 2 * 64, "toolgate peak RSS %ld KiB under %u pipelined calls "
                                                "(bound: 16 MiB + 2 x max_frame_bytes)",
                      hwm, n);
}

static void pipe_audit(const char *audit, unsigned n)
{
    int calls = tgh_file_wait(audit, "\"event\":\"call.", (int)n, 10000);
    cr_assert_eq(tgh_file_count(audit, "\"event\":\"audit.dropped\""), 0,
                 "the audit dropped events of pipelined calls");
    cr_assert_eq(calls, (int)n, "%d call events audited for %u calls", calls, n);
}

/* 100 000 calls (about 1 s each in a Debug build, 5 s under ASan, whose
 * allocator makes RSS meaningless: it is not checked there): default
 * limits, so most are refused (rate), each answered and audited by
 * toolgate itself. */
enum { PIPE_CALLS = 100000 };

Test(hostile, wrap_reading_caller_pipelining_100k_calls_stays_bounded)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    const char *const args[] = {"--limit", "max_frame_bytes=64Ki", NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", NULL, NULL), 0);
    static pipe_run_t r;
    unsigned n = PIPE_CALLS;
    pipe_calls(&r, W.tg.in_fd, W.tg.out_fd, n);
    pipe_bounds(W.tg.pid, n);
    pipe_check(&r);
    free(r.answers);
    tgh_close_stdin(&W.tg);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0, "toolgate did not exit after its caller's EOF");
    pipe_audit(W.audit, n);
}

/* serve with one listener of <dialect> in front of its fixture agent, and
 * an audit queue of 256 events (a flood overflowed it before the audit
 * held callers back: 11 000 of 100 000 OpenSentience calls audited). */
static void serve_pipelining(const char *dialect, const char *agent)
{
    bool os = strcmp(dialect, "opensentience") == 0;
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    char json[4 * TGH_PATH + 512];
    snprintf(json, sizeof json,
             "{\"router\": {\"max_frame_bytes\": \"64Ki\", \"listen\": [{\"unix\": \"%s\", "
             "\"dialect\": \"%s\"%s}]},\n"
             " \"audit\": {\"path\": \"%s\", \"queue\": 256},\n"
             " \"agents\": [{\"id\": \"fx\", \"dialect\": \"%s\", "
             "\"command\": [\"%s/%s\"%s]}]}\n",
             S.sock, dialect, os ? "" : ", \"agent\": \"fx\"", S.audit, dialect, TG_AGENTS_DIR,
             agent, os ? ", \"--id\", \"fx\"" : "");
    tgh_serve_start(&S, json, NULL, 10000);
    if (os && tgh_file_wait(S.err, "agent 'fx' ready", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "agent 'fx' did not become ready");
    int fd = tgh_unix_dial(S.sock);
    cr_assert_geq(fd, 0, "cannot connect to %s", S.sock);
    static pipe_run_t r;
    memset(&r, 0, sizeof r);
    r.os = os;
    unsigned n = PIPE_CALLS;
    pipe_calls(&r, fd, fd, n);
    pipe_bounds(S.tg.pid, n);
    pipe_check(&r);
    free(r.answers);
    close(fd);
    tgh_serve_stop(&S, 10000);
    pipe_audit(S.audit, n);
}

Test(hostile, serve_mcp_reading_caller_pipelining_100k_calls_stays_bounded)
{
    serve_pipelining("mcp", "tg_fixture_agent");
}

Test(hostile, serve_opensentience_reading_caller_pipelining_100k_calls_stays_bounded)
{
    serve_pipelining("opensentience", "tg_os_agent");
}

/* The call table follows the calls held, not the limits that allow them:
 * a wrap allowed 65 536 calls at once and as many queued held 108 MiB
 * before its first call (every entry allocated up front); a few calls
 * must leave it within the bound the flood tests hold it to. */
Test(hostile, wrap_with_limits_at_their_ceilings_idles_small)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    const char *const args[] = {"--limit", "max_frame_bytes=64Ki", "--limit",
                                "max_concurrent_calls=65536", "--limit",
                                "max_queued_calls=65536", NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", NULL, NULL), 0);
    static pipe_run_t r;
    pipe_calls(&r, W.tg.in_fd, W.tg.out_fd, 10);
    pipe_check(&r);
    free(r.answers);
    pipe_bounds(W.tg.pid, 10);
    tgh_close_stdin(&W.tg);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0, "toolgate did not exit after its caller's EOF");
}

/* ---- drip-fed frames (issue 20, item 18) -------------------------------- */

/* One connection dripping a frame: its socket, the bytes it drips, how far
 * it got, and when it was cut (relative to its first byte). */
typedef struct drip {
    int fd;
    const char *what;
    char frame[512];
    size_t len, sent;
    size_t stop_at;     /* stop sending after this many bytes (a half prefix), 0: never */
    uint64_t t0, cut;   /* first byte; ms from it to the close (0: still open) */
} drip_t;

/* Read what <fd> has and say whether the peer closed it. */
static bool drip_closed(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0)
            return true;
        if (n < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
}

/* Wait up to <ms> for a line holding "result" on <fd> (an answer to the
 * initialize written before). */
static bool await_result_line(int fd, int ms)
{
    char buf[8192];
    size_t n = 0;
    uint64_t deadline = tgh_now_ms() + (uint64_t)ms;
    while (tgh_left(deadline) > 0 && n < sizeof buf - 1) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, tgh_left(deadline)) != 1)
            break;
        ssize_t got = read(fd, buf + n, sizeof buf - 1 - n);
        if (got <= 0)
            break;
        n += (size_t)got;
        buf[n] = '\0';
        if (strstr(buf, "\"result\"") != NULL && strchr(buf, '\n') != NULL)
            return true;
    }
    return false;
}

/* Drip every connection of <d> one byte per <every_ms>, until each is
 * closed by toolgate or <limit_ms> passed since its first byte. */
static void drip_all(drip_t *d, size_t n, unsigned every_ms, uint64_t limit_ms)
{
    for (;;) {
        bool open = false;
        uint64_t now = tgh_now_ms();
        for (size_t i = 0; i < n; i++) {
            if (d[i].fd < 0 || d[i].cut != 0)
                continue;
            if (d[i].t0 != 0 && drip_closed(d[i].fd)) {
                d[i].cut = now - d[i].t0;
                continue;
            }
            if (d[i].t0 != 0 && now - d[i].t0 > limit_ms)
                continue;
            open = true;
            bool stopped = d[i].stop_at != 0 && d[i].sent >= d[i].stop_at;
            if (!stopped && d[i].sent < d[i].len) {
                if (send(d[i].fd, d[i].frame + d[i].sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
                    if (d[i].t0 == 0)
                        d[i].t0 = now;
                    d[i].sent++;
                } else if (d[i].t0 != 0) {
                    d[i].cut = now - d[i].t0;
                }
            }
        }
        if (!open)
            return;
        tgh_sleep_ms(every_ms);
    }
}

/* An OpenSentience core.tool.call frame of <len> bytes in all (prefix
 * included), padded in its input. */
static size_t os_padded_call(char *out, size_t cap, size_t len)
{
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"v\":1,\"type\":\"core.tool.call\",\"id\":\"m1\",\"ts\":"
                     "\"2026-01-16T12:00:00Z\",\"payload\":{\"call_id\":\"c1\",\"tool_id\":"
                     "\"os/echo\",\"input\":{\"text\":\"");
    while ((size_t)n + 4 + 4 < len && (size_t)n < sizeof body - 8)
        body[n++] = 'x';
    n += snprintf(body + n, sizeof body - (size_t)n, "\"}}}");
    cr_assert(4 + (size_t)n <= cap);
    out[0] = 0, out[1] = 0, out[2] = (char)(n >> 8), out[3] = (char)n;
    memcpy(out + 4, body, (size_t)n);
    return 4 + (size_t)n;
}

/* The hidden suite's case: twelve connections each drip one byte of a
 * frame at a time to serve's MCP and OpenSentience listeners (one only
 * half an OpenSentience length prefix, then nothing), and one more each to
 * an HTTP listener and the admin endpoint, all under the default
 * router.frame_timeout (10s). Callers that behave are served meanwhile;
 * every dripping connection is closed within 12 s of its first byte (not
 * before the 10 s), each audited with reason frame_timeout, and /limits
 * shows the bound. */
Test(hostile, drip_fed_frames_are_cut_at_the_default_frame_timeout, .timeout = 120)
{
    static tgh_serve_t s;
    cr_assert_eq(tgh_serve_prepare(&s, "mcp"), 0);
    char os_sock[TGH_PATH + 32], hboff[TGH_PATH + 16], tok[TGH_PATH + 16];
    snprintf(os_sock, sizeof os_sock, "%s/os.sock", s.dir);
    snprintf(hboff, sizeof hboff, "%s/hb-off", s.dir);
    snprintf(tok, sizeof tok, "%s/token", s.dir);
    int http_port = tgh_free_port(), admin_port = tgh_free_port();
    while (admin_port == http_port)
        admin_port = tgh_free_port();
    char admin[64];
    snprintf(admin, sizeof admin, "127.0.0.1:%d", admin_port);
    static char json[8192];
    snprintf(json, sizeof json,
             "{\"router\": {\"admin\": \"%s\", \"listen\": ["
             "{\"unix\": \"%s\", \"agent\": \"fx\"},"
             "{\"unix\": \"%s\", \"dialect\": \"opensentience\"},"
             "{\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"}]},\n"
             " \"audit\": {\"path\": \"%s\"},\n"
             " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", \"--log\", "
             "\"%s\"]},\n"
             "  {\"id\": \"os\", \"dialect\": \"opensentience\", \"command\": [\"%s/tg_os_agent\", "
             "\"--hb-off\", \"%s\", \"--token-file\", \"%s\", \"--id\", \"os\"]}]}\n",
             admin, s.sock, os_sock, http_port, s.audit, TG_AGENTS_DIR, s.log, TG_AGENTS_DIR,
             hboff, tok);
    tgh_serve_start(&s, json, NULL, 10000);
    if (tgh_file_wait(s.err, "agent 'os' ready", 1, 10000) < 1)
        tgh_fail_with_stderr(s.err, "agent 'os' did not become ready");

    /* The callers that behave connect first (the MCP one initializes:
     * its instance starts), so that the drips' clocks start with their
     * first bytes (an MCP connection's handshake clock starts at accept). */
    tgh_proc_t good;
    mcp_connect(&good, s.sock);
    mcp_init_ok(&good, 10000);
    static osc_t og;
    osc_open(&og, os_sock);

    enum { NMCP = 6, NOS = 6, NDRIP = NMCP + NOS + 2 };
    static drip_t d[NDRIP];
    static const char mcp_call_frame[] =
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"text\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}}\n";
    for (size_t i = 0; i < NDRIP; i++) {
        memset(&d[i], 0, sizeof d[i]);
        d[i].fd = -1;
    }
    /* MCP: three after their initialize (a call dripped), three before
     * it (the initialize dripped: handshake_timeout is 10s as well). */
    for (size_t i = 0; i < NMCP; i++) {
        d[i].fd = tgh_unix_dial(s.sock);
        cr_assert_geq(d[i].fd, 0);
        d[i].what = i < 3 ? "an initialized mcp caller" : "an mcp caller before initialize";
        if (i < 3) {
            static const char init[] = MCP_INITIALIZE "\n" MCP_INITIALIZED "\n";
            cr_assert_eq(write(d[i].fd, init, sizeof init - 1), (ssize_t)(sizeof init - 1));
            cr_assert(await_result_line(d[i].fd, 10000), "initialize not answered");
            memcpy(d[i].frame, mcp_call_frame, sizeof mcp_call_frame - 1);
            d[i].len = sizeof mcp_call_frame - 1;
        } else {
            d[i].len = (size_t)snprintf(d[i].frame, sizeof d[i].frame, "%s%s\n", MCP_INITIALIZE,
                                        "                                                  ");
        }
    }
    for (size_t i = NMCP; i < NMCP + NOS; i++) {
        d[i].fd = tgh_unix_dial(os_sock);
        cr_assert_geq(d[i].fd, 0);
        d[i].what = "an opensentience caller";
        d[i].len = os_padded_call(d[i].frame, sizeof d[i].frame, 200);
        if (i == NMCP) {
            d[i].stop_at = 2; /* half a length prefix, then nothing */
            d[i].what = "an opensentience caller with half a length prefix";
        }
    }
    d[NDRIP - 2].fd = tgh_tcp_dial(http_port);
    d[NDRIP - 2].what = "an http client";
    d[NDRIP - 2].len = (size_t)snprintf(
        d[NDRIP - 2].frame, sizeof d[NDRIP - 2].frame,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 400\r\n\r\n%s",
        MCP_INITIALIZE);
    d[NDRIP - 1].fd = tgh_tcp_dial(admin_port);
    d[NDRIP - 1].what = "an admin client";
    d[NDRIP - 1].len = (size_t)snprintf(
        d[NDRIP - 1].frame, sizeof d[NDRIP - 1].frame,
        "GET /limits HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: "
        "drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip-drip\r\n\r\n");
    cr_assert_geq(d[NDRIP - 2].fd, 0);
    cr_assert_geq(d[NDRIP - 1].fd, 0);

    /* The drips start; the callers that behave are served while they
     * drip (one byte each per 250 ms: 40 bytes in 10 s, short of any
     * frame here). */
    drip_all(d, NDRIP, 1, 0); /* (limit 0: one byte each) */
    mcp_call_text(&good, 1, "echo", "{\"text\":\"served\"}", "served", 10000);
    json_t *r = osc_ok_call(&og, "g1", "os/echo", "{\"text\":\"served\"}");
    json_decref(r);
    drip_all(d, NDRIP, 250, 16000);
    mcp_call_text(&good, 2, "echo", "{\"text\":\"still served\"}", "still served", 10000);
    r = osc_ok_call(&og, "g2", "os/echo", "{\"text\":\"still\"}");
    json_decref(r);

    for (size_t i = 0; i < NDRIP; i++) {
        cr_log_info("%s: cut after %llu ms (%zu bytes)", d[i].what, (unsigned long long)d[i].cut,
                    d[i].sent);
        cr_expect_neq(d[i].cut, 0, "%s dripping a frame is still connected 16 s on", d[i].what);
        cr_expect_lt(d[i].cut, 12000, "%s dripping a frame was cut only after %llu ms", d[i].what,
                     (unsigned long long)d[i].cut);
        cr_expect_geq(d[i].cut, 9000, "%s was cut after %llu ms, before router.frame_timeout",
                      d[i].what, (unsigned long long)d[i].cut);
        close(d[i].fd);
    }
    /* Audited (never with the bytes): the three initialized MCP callers,
     * the six OpenSentience ones, the HTTP client and the admin client;
     * the three before initialize by whichever of handshake_timeout and
     * frame_timeout came first. */
    int cuts = tgh_file_wait(s.audit, "\"reason\":\"frame_timeout\"", 3 + NOS + 2, 5000);
    int hs = tgh_file_count(s.audit, "\"reason\":\"handshake_timeout\"");
    cr_assert_geq(cuts + hs, NDRIP, "%d frame_timeout and %d handshake_timeout events for %d cuts",
                  cuts, hs, NDRIP);
    cr_assert_geq(cuts, 3 + NOS + 2, "%d frame_timeout events", cuts);
    cr_assert_eq(tgh_file_count(s.audit, "xxxxxxxx"), 0, "frame bytes in the audit trail");
    cr_assert_eq(tgh_file_count(s.audit, "drip-drip"), 0, "request bytes in the audit trail");
    json_t *doc = tga_limits(admin);
    json_t *e = tga_limit(doc, "caller.frame_timeout_ms");
    cr_assert_not_null(e, "/limits has no caller.frame_timeout_ms");
    cr_assert_eq(json_integer_value(json_object_get(e, "capacity")), 10000);
    cr_assert_eq(json_integer_value(json_object_get(e, "high_water")), 10000,
                 "a cut frame is not the limit's high water");
    json_decref(doc);
    tgh_conn_close(&good);
    osc_close(&og);
    tgh_serve_stop(&s, 10000);
}

/* ---- churn (issue 20, item 19) ------------------------------------------ */

/* Descriptors open in <pid>. */
static int fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

/* Child processes of <pid> (its agent instances). */
static int child_count(pid_t pid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    char *text = tgh_read_file(path, NULL);
    int n = 0;
    for (char *p = text; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == '\n')
            p++;
        if (*p == '\0')
            break;
        n++;
        while (*p != '\0' && *p != ' ' && *p != '\n')
            p++;
    }
    free(text);
    return n;
}

enum churn_kind { CHURN_BARE, CHURN_OS_BARE, CHURN_CALL_LEAVE, CHURN_SLOW_LEAVE, CHURN_CALL };

/* One churning client (a child process): connect and close as fast as it
 * can for <ms>, with <kind>'s traffic in between. */
static void churn_child(const char *sock, enum churn_kind kind, unsigned ms)
{
    static const char init[] = MCP_INITIALIZE "\n" MCP_INITIALIZED "\n";
    static const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
                               "{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}}\n";
    static const char slow[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
                               "{\"name\":\"slow_cancel\",\"arguments\":{\"ms\":200}}}\n";
    uint64_t end = tgh_now_ms() + ms;
    char buf[4096];
    while (tgh_now_ms() < end) {
        int fd = tgh_unix_dial(sock);
        if (fd < 0)
            continue;
        if (kind == CHURN_CALL_LEAVE || kind == CHURN_SLOW_LEAVE || kind == CHURN_CALL) {
            struct timeval tv = {.tv_sec = 5};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            if (write(fd, init, sizeof init - 1) < 0)
                goto next;
            if (kind == CHURN_CALL_LEAVE) {
                /* the call sent, its caller gone before any answer */
                (void)!write(fd, call, sizeof call - 1);
                goto next;
            }
            size_t got = 0;
            while (got < sizeof buf - 1) { /* the initialize's answer */
                ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
                if (n <= 0)
                    goto next;
                got += (size_t)n;
                if (memchr(buf, '\n', got) != NULL)
                    break;
            }
            if (kind == CHURN_SLOW_LEAVE) {
                /* a call that runs a while (and is answered even when
                 * cancelled), its caller gone meanwhile */
                (void)!write(fd, slow, sizeof slow - 1);
                goto next;
            }
            if (write(fd, call, sizeof call - 1) < 0)
                goto next;
            (void)!read(fd, buf, sizeof buf); /* its answer (or a denial) */
        }
    next:
        close(fd);
    }
}

/* Churn <n> clients of <kind> on <sock> for <ms>, in child processes. */
static void churn(const char *sock, enum churn_kind kind, int n, unsigned ms)
{
    pid_t kids[16];
    cr_assert_leq(n, 16);
    for (int i = 0; i < n; i++) {
        kids[i] = fork();
        cr_assert_geq(kids[i], 0);
        if (kids[i] == 0) {
            churn_child(sock, kind, ms);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++)
        waitpid(kids[i], NULL, 0);
}

/* Wait up to <ms> for toolgate <pid> to hold at most <fds> descriptors,
 * at most <rss> KiB (unless under ASan) and <kids> children. */
static bool settles(pid_t pid, int fds, long rss, int kids, unsigned ms)
{
    uint64_t deadline = tgh_now_ms() + ms;
    for (;;) {
        bool ok = fd_count(pid) <= fds && child_count(pid) <= kids &&
                  (under_asan() || tgh_proc_status_kb(pid, "VmRSS") <= rss);
        if (ok || tgh_left(deadline) == 0)
            return ok;
        tgh_sleep_ms(200);
    }
}

/* Connections opened and closed as fast as clients can make them (bare,
 * on an MCP and an OpenSentience listener; with an initialize and a call
 * whose caller leaves before the answer, fast or slow; with a whole
 * call), 8 clients at
 * once: once the churn stops, toolgate's descriptors and RSS come back
 * near where they were and no agent instance is left (before: 163 MiB
 * kept after 8 s of calls left behind, 83 MiB after bare connects). */
Test(hostile, connection_churn_leaves_fds_and_memory_where_they_were, .timeout = 120)
{
    static tgh_serve_t s;
    cr_assert_eq(tgh_serve_prepare(&s, "mcp"), 0);
    char os_sock[TGH_PATH + 32], hboff[TGH_PATH + 16], tok[TGH_PATH + 16];
    snprintf(os_sock, sizeof os_sock, "%s/os.sock", s.dir);
    snprintf(hboff, sizeof hboff, "%s/hb-off", s.dir);
    snprintf(tok, sizeof tok, "%s/token", s.dir);
    static char json[8192];
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"},"
             "{\"unix\": \"%s\", \"dialect\": \"opensentience\"}]},\n"
             " \"audit\": {\"path\": \"%s\"},\n"
             " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\"]},\n"
             "  {\"id\": \"os\", \"dialect\": \"opensentience\", \"command\": [\"%s/tg_os_agent\", "
             "\"--hb-off\", \"%s\", \"--token-file\", \"%s\", \"--id\", \"os\"]}]}\n",
             s.sock, os_sock, s.audit, TG_AGENTS_DIR, TG_AGENTS_DIR, hboff, tok);
    tgh_serve_start(&s, json, NULL, 10000);
    if (tgh_file_wait(s.err, "agent 'os' ready", 1, 10000) < 1)
        tgh_fail_with_stderr(s.err, "agent 'os' did not become ready");
    pid_t pid = s.tg.pid;
    /* Warm up: a little of each, so that what is made once (pools, the
     * audit ring's pages, tables) is in the baseline. */
    churn(s.sock, CHURN_CALL, 2, 300);
    churn(s.sock, CHURN_CALL_LEAVE, 2, 300);
    churn(s.sock, CHURN_SLOW_LEAVE, 2, 300);
    churn(s.sock, CHURN_BARE, 2, 300);
    churn(os_sock, CHURN_OS_BARE, 2, 300);
    cr_assert(settles(pid, 1 << 20, 1L << 30, 1, 15000), "warm-up instances still running");
    tgh_sleep_ms(2500); /* past the trim after the warm-up */
    int fds0 = fd_count(pid);
    long rss0 = tgh_proc_status_kb(pid, "VmRSS");
    cr_log_info("before: %d fds, %ld KiB", fds0, rss0);

    churn(s.sock, CHURN_BARE, 8, 2500);
    cr_log_info("after bare connects: %d fds, %ld KiB", fd_count(pid),
                tgh_proc_status_kb(pid, "VmRSS"));
    churn(os_sock, CHURN_OS_BARE, 8, 2500);
    cr_log_info("after opensentience connects: %d fds, %ld KiB", fd_count(pid),
                tgh_proc_status_kb(pid, "VmRSS"));
    churn(s.sock, CHURN_CALL_LEAVE, 8, 2500);
    cr_log_info("after calls left behind: %d fds, %ld KiB", fd_count(pid),
                tgh_proc_status_kb(pid, "VmRSS"));
    churn(s.sock, CHURN_SLOW_LEAVE, 8, 1500);
    cr_log_info("after slow calls left behind: %d fds, %ld KiB", fd_count(pid),
                tgh_proc_status_kb(pid, "VmRSS"));
    churn(s.sock, CHURN_CALL, 8, 1500);
    cr_log_info("after whole calls: %d fds, %ld KiB", fd_count(pid),
                tgh_proc_status_kb(pid, "VmRSS"));

    long bound = rss0 + 2048;
    bool ok = settles(pid, fds0 + 2, bound, 1, 20000);
    int fds1 = fd_count(pid), kids = child_count(pid);
    long rss1 = tgh_proc_status_kb(pid, "VmRSS");
    cr_log_info("after the churn: %d fds, %ld KiB, %d children", fds1, rss1, kids);
    cr_assert_leq(fds1, fds0 + 2, "fds grew from %d to %d over the churn", fds0, fds1);
    cr_assert_leq(kids, 1, "%d agent processes left (the opensentience agent is 1)", kids);
    if (!under_asan())
        cr_assert_leq(rss1, bound, "RSS grew from %ld to %ld KiB over the churn", rss0, rss1);
    cr_assert(ok);
    /* And it still serves (an initialize: the churn spent the agent's
     * default rate of calls). */
    tgh_proc_t c;
    mcp_connect(&c, s.sock);
    mcp_init_ok(&c, 10000);
    tgh_conn_close(&c);
    tgh_serve_stop(&s, 20000);
}

/* router.frame_timeout bounds the HTTP listener (its header_timeout, when
 * unset) and the admin endpoint (a request begun, however long its idle
 * timeout), not only the Unix listeners: 1s here, the admin's idle
 * timeout 30s. A request dripped to either is cut after about 1 s. */
Test(hostile, frame_timeout_bounds_http_and_admin_requests, .timeout = 60)
{
    static tgh_serve_t s;
    cr_assert_eq(tgh_serve_prepare(&s, "mcp"), 0);
    int http_port = tgh_free_port(), admin_port = tgh_free_port();
    while (admin_port == http_port)
        admin_port = tgh_free_port();
    char json[4096];
    snprintf(json, sizeof json,
             "{\"router\": {\"frame_timeout\": \"1s\", \"admin\": {\"listen\": "
             "\"127.0.0.1:%d\", \"idle_timeout\": \"30s\"}, \"listen\": ["
             "{\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"}]},\n"
             " \"audit\": {\"path\": \"%s\"},\n"
             " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\"]}]}\n",
             admin_port, http_port, s.audit, TG_AGENTS_DIR);
    tgh_serve_start(&s, json, NULL, 10000);
    static drip_t d[2];
    memset(d, 0, sizeof d);
    d[0].fd = tgh_tcp_dial(http_port);
    d[0].what = "an http client";
    d[0].len = (size_t)snprintf(d[0].frame, sizeof d[0].frame,
                                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: "
                                "dddddddddddddddddddddddddddddddddddddddddddddddd\r\n\r\n");
    d[1].fd = tgh_tcp_dial(admin_port);
    d[1].what = "an admin client";
    d[1].len = (size_t)snprintf(d[1].frame, sizeof d[1].frame,
                                "GET /limits HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: "
                                "dddddddddddddddddddddddddddddddddddddddddddddddd\r\n\r\n");
    cr_assert_geq(d[0].fd, 0);
    cr_assert_geq(d[1].fd, 0);
    drip_all(d, 2, 100, 8000);
    for (int i = 0; i < 2; i++) {
        cr_log_info("%s: cut after %llu ms", d[i].what, (unsigned long long)d[i].cut);
        cr_expect_neq(d[i].cut, 0, "%s dripping a request is still connected", d[i].what);
        cr_expect_lt(d[i].cut, 3000, "%s cut after %llu ms (frame_timeout 1s)", d[i].what,
                     (unsigned long long)d[i].cut);
        close(d[i].fd);
    }
    cr_assert_geq(tgh_file_wait(s.audit, "\"reason\":\"frame_timeout\"", 2, 5000), 2,
                  "the cuts are not audited");
    cr_assert_eq(tgh_file_count(s.audit, "dddddddd"), 0, "request bytes in the audit trail");
    tgh_serve_stop(&s, 10000);
}
