/* tg_os_agent: a scriptable OpenSentience (v1) agent on stdio for
 * toolgate's integration tests. Length-prefixed frames (4-byte big-endian
 * length, then one JSON object); one thread, poll() on stdin with the
 * nearest timer as the timeout.
 *
 * Start: agent.hello with the session token from
 * OPENSENTIENCE_SESSION_TOKEN (or a wrong one with --wrong-token), the
 * agent id (--id, default "os") and supported_versions [1]; on
 * core.welcome, agent.tools.register of "<id>/<tool>" for each tool of
 * --tools (default all below; --bad-tool adds one with another agent's
 * id), then agent.heartbeat every heartbeat_interval_ms, except while the
 * file named by --hb-off exists. A core.welcome carrying an error makes
 * it log "welcome-error <code>" and exit 3. --token-file PATH writes the
 * token it was given to PATH (tests check it appears nowhere else).
 *
 * Tools (core.tool.call payload.input):
 *   echo {text}        succeeded, output {text, pid} (and tag: the value of
 *                      --tag, when given: tests tell instances apart by it)
 *   sleep {ms}         succeeded after ms, output {slept}; core.tool.cancel
 *                      answers it "canceled" at once (--ignore-cancel: never)
 *   stream {n}         n agent.tool.stream frames {chunk: i}, then succeeded
 *   fail               failed with error {code: "tool.failed"}
 *   count              succeeded, output {runs}: how many times count ran
 *   crash              exit(3) at once, answering nothing
 *   oversize {bytes}   a frame whose header announces <bytes>, then as many
 *                      bytes of junk; the call is never answered
 *
 * Events are appended, one line each, to --log PATH: "start <pid>",
 * "welcome <heartbeat_interval_ms> <max_frame_bytes>", "registered <n>
 * rejected <m>", "call <call_id> <tool> <idempotency_key or ->",
 * "done <call_id>" (a sleep finished, written before its result),
 * "request_id <id or ->" and "timeout_ms <n or ->" (what a core.tool.call
 * carried, written before its "call" line),
 * "cancel <call_id> <reason>", "exit <why>". Each line is one write(2) on
 * an O_APPEND descriptor, so tests can read it while the agent runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define OA_FRAME_MAX   (64u * 1024 * 1024) /* largest frame this agent reads */
#define OA_PENDING_MAX 1024                /* sleeps pending at once */

typedef struct pending {
    char *call_id;
    uint64_t due;
    uint64_t ms;
} pending_t;

static int log_fd = -1;
static const char *agent_id = "os";
static const char *tools_arg = "echo,sleep,stream,fail,count,crash,oversize";
static const char *hb_off_path, *token_path, *tag;
static bool wrong_token, ignore_cancel, bad_tool;
static uint64_t hb_interval_ms; /* 0 until welcomed */
static uint64_t next_hb;
static unsigned msg_seq;
static unsigned count_runs;
static pending_t pend[OA_PENDING_MAX];
static size_t npend;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    if (log_fd < 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(log_fd, line, (size_t)n);
}

static void write_all(const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(1, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            exit(4);
        c += w;
        n -= (size_t)w;
    }
}

static void send_frame(const char *text, size_t n)
{
    unsigned char h[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    write_all(h, 4);
    write_all(text, n);
}

/* Send {v, type, id, ts, payload} (payload stolen). */
static void send_msg(const char *type, json_t *payload, json_t *error)
{
    char id[32];
    snprintf(id, sizeof id, "a-%u", ++msg_seq);
    json_t *m = json_pack("{s:i, s:s, s:s, s:s, s:o}", "v", 1, "type", type, "id", id, "ts",
                          "2026-01-01T00:00:00.000Z", "payload", payload);
    if (error)
        json_object_set_new(m, "error", error);
    char *text = json_dumps(m, JSON_COMPACT);
    send_frame(text, strlen(text));
    free(text);
    json_decref(m);
}

static void result(const char *call_id, const char *status, json_t *output, json_t *error)
{
    json_t *p = json_pack("{s:s, s:s}", "call_id", call_id, "status", status);
    if (output)
        json_object_set_new(p, "output", output);
    send_msg("agent.tool.result", p, error);
}

static void send_hello(void)
{
    const char *tok = getenv("OPENSENTIENCE_SESSION_TOKEN");
    char wrong[64];
    if (token_path != NULL && tok != NULL) {
        int fd = open(token_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            (void)!write(fd, tok, strlen(tok));
            close(fd);
        }
    }
    if (wrong_token || tok == NULL) {
        snprintf(wrong, sizeof wrong, "%s", "00000000000000000000000000000000");
        tok = wrong;
    }
    send_msg("agent.hello",
             json_pack("{s:s, s:s, s:{s:[i]}}", "session_token", tok, "agent_id", agent_id,
                       "protocol", "supported_versions", 1),
             NULL);
}

static void send_register(void)
{
    json_t *arr = json_array();
    char *list = strdup(tools_arg), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char tid[256];
        snprintf(tid, sizeof tid, "%s/%s", agent_id, t);
        json_array_append_new(arr, json_pack("{s:s}", "tool_id", tid));
    }
    free(list);
    if (bad_tool)
        json_array_append_new(arr, json_pack("{s:s}", "tool_id", "someone-else/echo"));
    send_msg("agent.tools.register", json_pack("{s:o}", "tools", arr), NULL);
}

static void on_call(json_t *p)
{
    const char *cid = json_string_value(json_object_get(p, "call_id"));
    const char *tid = json_string_value(json_object_get(p, "tool_id"));
    const char *key = json_string_value(json_object_get(p, "idempotency_key"));
    json_t *in = json_object_get(p, "input");
    const char *slash = tid ? strchr(tid, '/') : NULL;
    const char *tool = slash ? slash + 1 : "";
    if (!cid)
        return;
    logf_("call %s %s %s", cid, tool, key ? key : "-");
    if (strcmp(tool, "echo") == 0) {
        json_t *t = json_object_get(in, "text");
        json_t *out = json_pack("{s:O, s:I}", "text", t ? t : json_null(), "pid",
                                (json_int_t)getpid());
        if (tag != NULL)
            json_object_set_new(out, "tag", json_string(tag));
        result(cid, "succeeded", out, NULL);
    } else if (strcmp(tool, "sleep") == 0) {
        uint64_t ms = (uint64_t)json_integer_value(json_object_get(in, "ms"));
        if (npend < OA_PENDING_MAX) {
            pend[npend].call_id = strdup(cid);
            pend[npend].ms = ms;
            pend[npend].due = now_ms() + ms;
            npend++;
        }
    } else if (strcmp(tool, "stream") == 0) {
        json_int_t n = json_integer_value(json_object_get(in, "n"));
        for (json_int_t i = 0; i < n; i++)
            send_msg("agent.tool.stream", json_pack("{s:s, s:I}", "call_id", cid, "chunk", i),
                     NULL);
        result(cid, "succeeded", json_pack("{s:I}", "chunks", n), NULL);
    } else if (strcmp(tool, "fail") == 0) {
        result(cid, "failed", NULL,
               json_pack("{s:s, s:s, s:b}", "code", "tool.failed", "message", "it failed",
                         "retryable", 0));
    } else if (strcmp(tool, "count") == 0) {
        result(cid, "succeeded", json_pack("{s:i}", "runs", ++count_runs), NULL);
    } else if (strcmp(tool, "crash") == 0) {
        logf_("exit crash");
        exit(3);
    } else if (strcmp(tool, "oversize") == 0) {
        uint64_t n = (uint64_t)json_integer_value(json_object_get(in, "bytes"));
        unsigned char h[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                              (unsigned char)(n >> 8), (unsigned char)n};
        write_all(h, 4);
        char junk[4096];
        memset(junk, 'x', sizeof junk);
        for (uint64_t left = n; left > 0;) {
            size_t k = left < sizeof junk ? (size_t)left : sizeof junk;
            write_all(junk, k);
            left -= k;
        }
    } else {
        result(cid, "failed", NULL,
               json_pack("{s:s, s:s}", "code", "tool.unknown", "message", "no such tool"));
    }
}

static void on_cancel(json_t *p)
{
    const char *cid = json_string_value(json_object_get(p, "call_id"));
    const char *why = json_string_value(json_object_get(p, "reason"));
    if (!cid)
        return;
    logf_("cancel %s %s", cid, why ? why : "-");
    if (ignore_cancel)
        return;
    for (size_t i = 0; i < npend; i++) {
        if (strcmp(pend[i].call_id, cid) == 0) {
            result(cid, "canceled", NULL, NULL);
            free(pend[i].call_id);
            pend[i] = pend[--npend];
            return;
        }
    }
}

static void on_frame(const char *buf, size_t len)
{
    json_error_t je;
    json_t *m = json_loadb(buf, len, 0, &je);
    if (!m)
        return;
    const char *type = json_string_value(json_object_get(m, "type"));
    json_t *p = json_object_get(m, "payload");
    if (!type) {
        json_decref(m);
        return;
    }
    if (strcmp(type, "core.welcome") == 0) {
        json_t *err = json_object_get(m, "error");
        if (err) {
            logf_("welcome-error %s", json_string_value(json_object_get(err, "code")));
            exit(3);
        }
        hb_interval_ms = (uint64_t)json_integer_value(json_object_get(p, "heartbeat_interval_ms"));
        logf_("welcome %llu %llu", (unsigned long long)hb_interval_ms,
              (unsigned long long)json_integer_value(json_object_get(p, "max_frame_bytes")));
        next_hb = now_ms();
        send_register();
    } else if (strcmp(type, "core.tools.registered") == 0) {
        logf_("registered %zu rejected %zu", json_array_size(json_object_get(p, "registered")),
              json_array_size(json_object_get(p, "rejected")));
    } else if (strcmp(type, "core.tool.call") == 0) {
        const char *rid = json_string_value(json_object_get(m, "request_id"));
        json_t *tmo = json_object_get(p, "timeout_ms");
        logf_("request_id %s", rid ? rid : "-");
        if (json_is_integer(tmo))
            logf_("timeout_ms %lld", (long long)json_integer_value(tmo));
        else
            logf_("timeout_ms -");
        on_call(p);
    } else if (strcmp(type, "core.tool.cancel") == 0) {
        on_cancel(p);
    }
    json_decref(m);
}

static bool hb_off(void)
{
    return hb_off_path != NULL && access(hb_off_path, F_OK) == 0;
}

int main(int argc, char **argv)
{
    const char *log_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--log") == 0 && i + 1 < argc)
            log_path = argv[++i];
        else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
            agent_id = argv[++i];
        else if (strcmp(argv[i], "--tools") == 0 && i + 1 < argc)
            tools_arg = argv[++i];
        else if (strcmp(argv[i], "--hb-off") == 0 && i + 1 < argc)
            hb_off_path = argv[++i];
        else if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc)
            token_path = argv[++i];
        else if (strcmp(argv[i], "--wrong-token") == 0)
            wrong_token = true;
        else if (strcmp(argv[i], "--ignore-cancel") == 0)
            ignore_cancel = true;
        else if (strcmp(argv[i], "--bad-tool") == 0)
            bad_tool = true;
        else if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc)
            tag = argv[++i];
    }
    signal(SIGPIPE, SIG_IGN);
    if (log_path)
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    logf_("start %ld", (long)getpid());
    send_hello();

    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        uint64_t now = now_ms();
        /* Timers: due sleeps, the heartbeat. */
        for (size_t i = 0; i < npend;) {
            if (pend[i].due <= now) {
                /* Logged before the result leaves: whatever the result
                 * lets happen next is logged after this line. */
                logf_("done %s", pend[i].call_id);
                result(pend[i].call_id, "succeeded",
                       json_pack("{s:I}", "slept", (json_int_t)pend[i].ms), NULL);
                free(pend[i].call_id);
                pend[i] = pend[--npend];
            } else {
                i++;
            }
        }
        if (hb_interval_ms > 0 && now >= next_hb) {
            if (!hb_off())
                send_msg("agent.heartbeat", json_object(), NULL);
            next_hb = now + hb_interval_ms;
        }
        int timeout = -1;
        uint64_t soonest = UINT64_MAX;
        for (size_t i = 0; i < npend; i++)
            if (pend[i].due < soonest)
                soonest = pend[i].due;
        if (hb_interval_ms > 0 && next_hb < soonest)
            soonest = next_hb;
        if (soonest != UINT64_MAX)
            timeout = soonest > now ? (int)(soonest - now) : 0;
        struct pollfd pfd = {.fd = 0, .events = POLLIN};
        int pr = poll(&pfd, 1, timeout);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        if (cap - len < 16 * 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(0, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            logf_("exit eof");
            free(buf);
            return 0;
        }
        len += (size_t)r;
        size_t pos = 0;
        while (len - pos >= 4) {
            const unsigned char *u = (const unsigned char *)buf + pos;
            size_t n = (size_t)u[0] << 24 | (size_t)u[1] << 16 | (size_t)u[2] << 8 | u[3];
            if (n > OA_FRAME_MAX) {
                logf_("exit oversize");
                free(buf);
                return 5;
            }
            if (len - pos - 4 < n) {
                while (cap < n + 4 + 16 * 1024) {
                    cap *= 2;
                    buf = realloc(buf, cap);
                }
                break;
            }
            on_frame(buf + pos + 4, n);
            pos += 4 + n;
        }
        memmove(buf, buf + pos, len - pos);
        len -= pos;
    }
}
