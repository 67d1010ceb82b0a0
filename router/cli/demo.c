/* `toolgate demo`: run the bundled demo agent (tests/agents/tg_fixture_agent,
 * built next to toolgate as agents/tg_fixture_agent, installed as
 * <libexecdir>/toolgate/demo-agent) under `toolgate wrap`
 * with small limits, drive it with a scripted caller, and print what
 * happened: allowed calls, a rate denial, a timeout, frame refusals both
 * ways, and where the audit file is.
 *
 * This is a plain blocking program (poll on two pipes): it is the caller,
 * not part of the proxy.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "audit/audit.h"
#include "router/cli/cli.h"
#include "router/gateway/log.h"
#include "tg_build_info.h" /* TG_DEMO_AGENT_REL */

#define DEMO_LINE_MAX (1u << 20) /* fixed internal bound: one response line */

typedef struct demo {
    pid_t pid;
    int to, from;
    char *buf;
    size_t len;
} demo_t;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int send_line(demo_t *d, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t k = write(d->to, s + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return write(d->to, "\n", 1) == 1 ? 0 : -1;
}

/* Next line from toolgate's stdout as JSON, or NULL after <timeout_ms>. */
static json_t *recv_json(demo_t *d, int timeout_ms)
{
    uint64_t until = mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl = memchr(d->buf, '\n', d->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - d->buf);
            json_t *j = json_loadb(d->buf, n, 0, NULL);
            memmove(d->buf, nl + 1, d->len - n - 1);
            d->len -= n + 1;
            return j;
        }
        uint64_t now = mono_ms();
        if (now >= until || d->len >= DEMO_LINE_MAX)
            return NULL;
        struct pollfd p = {.fd = d->from, .events = POLLIN};
        if (poll(&p, 1, (int)(until - now)) <= 0)
            continue;
        ssize_t k = read(d->from, d->buf + d->len, DEMO_LINE_MAX - d->len);
        if (k <= 0)
            return NULL;
        d->len += (size_t)k;
    }
}

static json_t *call(demo_t *d, const char *line, int timeout_ms)
{
    if (send_line(d, line) < 0)
        return NULL;
    return recv_json(d, timeout_ms);
}

static void show(const char *what, json_t *r)
{
    json_t *err = json_object_get(r, "error");
    if (r == NULL) {
        printf("  %-28s -> (no answer)\n", what);
    } else if (err != NULL) {
        json_t *data = json_object_get(err, "data");
        printf("  %-28s -> DENIED %" JSON_INTEGER_FORMAT " %s\n", what,
               json_integer_value(json_object_get(err, "code")),
               json_string_value(json_object_get(data, "code")) ? json_string_value(json_object_get(data, "code")) : "");
        printf("  %-28s    %s\n", "", json_string_value(json_object_get(err, "message")));
    } else {
        json_t *content = json_object_get(json_object_get(r, "result"), "content");
        const char *text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
        size_t tl = text != NULL ? strlen(text) : 0;
        printf("  %-28s -> ok %.*s%s\n", what, (int)(tl > 40 ? 40 : tl), text ? text : "",
               tl > 40 ? "..." : "");
    }
    json_decref(r);
}

/* The demo agent: $TG_DEMO_AGENT, else next to the binary in a build tree
 * (<exe dir>/agents/tg_fixture_agent), else where `cmake --install` and the
 * Debian package put it (<exe dir>/TG_DEMO_AGENT_REL). 0 with <out> set,
 * or -1 with <out> naming every place looked at. */
static int find_agent(const char *exe, char *out, size_t cap)
{
    const char *env = getenv("TG_DEMO_AGENT");
    if (env != NULL && env[0] != '\0') {
        snprintf(out, cap, "%s", env);
        return access(out, X_OK);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    const char *rel[] = {"agents/tg_fixture_agent", TG_DEMO_AGENT_REL};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char path[PATH_MAX * 2];
        snprintf(path, sizeof(path), "%s/%s", dir, rel[i]);
        char real[PATH_MAX];
        if (access(path, X_OK) == 0 && realpath(path, real) != NULL &&
            (size_t)snprintf(out, cap, "%s", real) < cap)
            return 0;
    }
    snprintf(out, cap, "%s/%s or %s/%s", dir, rel[0], dir, rel[1]);
    return -1;
}

/* Start `<exe> wrap` over <agent> with the demo's limits and audit file,
 * its stdin and stdout on pipes in <d>. 0, or -1 after saying why. */
static int demo_start(demo_t *d, const char *exe, const char *agent, const char *audit)
{
    /* The wrap logs as the demo was asked to (toolgate --log-format json
     * demo); TOOLGATE_LOG and JOURNAL_STREAM reach it through the
     * environment. */
    const char *fmt = tg_log_opts()->format == TG_LOG_JSON ? "json" : "text";
    const char *args[] = {exe, "wrap", "--log-format", fmt, "--audit", audit,
                          "--limit", "rate_limit=5/second",
                          "--limit", "max_tool_call_duration=500ms",
                          "--limit", "max_frame_bytes=64Ki",
                          "--limit", "kill_grace_period=1s",
                          "--", agent, NULL};
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0) {
        fprintf(stderr, "toolgate: pipe: %s\n", strerror(errno));
        return -1;
    }
    printf("toolgate demo: running\n  %s wrap%s --audit %s \\\n"
           "    --limit rate_limit=5/second --limit max_tool_call_duration=500ms \\\n"
           "    --limit max_frame_bytes=64Ki --limit kill_grace_period=1s -- %s\n\n",
           exe, tg_log_opts()->format == TG_LOG_JSON ? " --log-format json" : "", audit, agent);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "toolgate: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(exe, (char *const *)args);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    signal(SIGPIPE, SIG_IGN);
    *d = (demo_t){.pid = pid, .to = in[1], .from = out[0], .buf = malloc(DEMO_LINE_MAX)};
    return d->buf != NULL ? 0 : -1;
}

static void demo_handshake(demo_t *d)
{
    json_t *r = call(d,
                     "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                     "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                     "\"clientInfo\":{\"name\":\"toolgate-demo\",\"version\":\"1\"}}}",
                     5000);
    json_t *info = json_object_get(json_object_get(r, "result"), "serverInfo");
    printf("handshake: agent '%s' answered initialize\n",
           json_string_value(json_object_get(info, "name")) ? json_string_value(json_object_get(info, "name")) : "?");
    json_decref(r);
    send_line(d, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* Echo calls with ids <first>..<last>, the text "<word> <id>". */
static void demo_echoes(demo_t *d, int first, int last, const char *word)
{
    char line[256];
    for (int i = first; i <= last; i++) {
        snprintf(line, sizeof(line),
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"echo\",\"arguments\":{\"text\":\"%s %d\"}}}",
                 i, word, i);
        char what[32];
        snprintf(what, sizeof(what), "echo #%d", i);
        show(what, call(d, line, 5000));
    }
}

static void demo_timeouts(demo_t *d)
{
    printf("\n3. a call that runs past max_tool_call_duration (500ms):\n");
    show("sleep 3000ms",
         call(d,
              "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{"
              "\"name\":\"sleep\",\"arguments\":{\"ms\":3000}}}",
              5000));
    printf("\n   and one that asks for less with params._meta.timeout_ms=100:\n");
    show("sleep 3000ms, timeout_ms 100",
         call(d,
              "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{"
              "\"name\":\"sleep\",\"arguments\":{\"ms\":3000},\"_meta\":{\"timeout_ms\":100}}}",
              5000));
}

static void demo_frames(demo_t *d)
{
    printf("\n4. frames over max_frame_bytes (64Ki):\n");
    size_t big = 100 * 1024;
    char *req = malloc(big + 256);
    if (req != NULL) {
        int h = snprintf(req, 256,
                         "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"echo\",\"arguments\":{\"text\":\"");
        memset(req + h, 'x', big);
        memcpy(req + h + big, "\"}}}", 5);
        show("request of 100 KiB", call(d, req, 5000));
        free(req);
    }
    show("response of 100 KB",
         call(d,
              "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/call\",\"params\":{"
              "\"name\":\"big\",\"arguments\":{\"bytes\":100000}}}",
              5000));
    show("echo after all that",
         call(d,
              "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"tools/call\",\"params\":{"
              "\"name\":\"echo\",\"arguments\":{\"text\":\"still here\"}}}",
              5000));
}

/* One line per event of the audit file at <audit>. */
static void demo_audit(const char *audit)
{
    printf("\n5. audit trail: %s\n", audit);
    FILE *f = fopen(audit, "r");
    if (f == NULL) {
        printf("  (cannot read it: %s)\n", strerror(errno));
        return;
    }
    char l[TG_AUDIT_LINE_MAX + 2];
    int count = 0;
    while (fgets(l, sizeof(l), f) != NULL) {
        json_t *ev = json_loads(l, 0, NULL);
        const char *name = json_string_value(json_object_get(ev, "event"));
        const char *code = json_string_value(json_object_get(ev, "code"));
        printf("  seq %-3" JSON_INTEGER_FORMAT " %-18s%s%s\n",
               json_integer_value(json_object_get(ev, "seq")), name ? name : "?",
               code ? " " : "", code ? code : "");
        json_decref(ev);
        count++;
    }
    fclose(f);
    printf("  %d events; check it with: jq . %s\n", count, audit);
}

int tg_cli_demo(int argc, char **argv, const char *self)
{
    char agent[PATH_MAX], exe[PATH_MAX], dir[PATH_MAX], audit[PATH_MAX + 32];
    if (argc > 0) {
        fprintf(stderr,
                "toolgate demo: unknown argument '%s' (demo takes none; see toolgate demo --help)\n",
                argv[0]);
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "toolgate: cannot find its own binary (/proc/self/exe)\n");
        return 1;
    }
    exe[n] = '\0';
    (void)self;
    if (find_agent(exe, agent, sizeof(agent)) != 0) {
        fprintf(stderr,
                "toolgate: demo agent not found at %s (build the tree with cmake, install it "
                "with cmake --install or the Debian package, or set "
                "TG_DEMO_AGENT=/path/to/tg_fixture_agent)\n",
                agent);
        return 1;
    }
    snprintf(dir, sizeof(dir), "/tmp/toolgate-demo-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "toolgate: cannot make a temp dir in /tmp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(audit, sizeof(audit), "%s/audit.jsonl", dir);

    demo_t d;
    if (demo_start(&d, exe, agent, audit) < 0)
        return 1;
    demo_handshake(&d);
    printf("\n1. allowed calls (rate limit 5/second):\n");
    demo_echoes(&d, 1, 3, "hello");
    printf("\n2. a burst past the rate limit:\n");
    demo_echoes(&d, 4, 7, "burst");
    usleep(1200 * 1000); /* let the bucket refill */
    demo_timeouts(&d);
    demo_frames(&d);

    close(d.to);
    int status = 0;
    waitpid(d.pid, &status, 0);
    close(d.from);
    free(d.buf);

    demo_audit(audit);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    printf("\ntoolgate exited with status %d\n", rc);
    return rc;
}
