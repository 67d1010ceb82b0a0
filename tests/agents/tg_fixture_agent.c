/* tg_fixture_agent: a scriptable MCP tool server on stdio for toolgate's
 * integration tests. Newline-delimited JSON-RPC 2.0; one thread, poll()
 * on stdin with the nearest timer as the timeout, so many slow calls can be
 * pending at once without blocking each other.
 *
 * Tools (tools/call params.name, params.arguments):
 *   echo {text}            text back as {content:[{type:text,text}]}
 *   sleep {ms}             answered after ms; a cancel drops it unanswered
 *   slow_cancel {ms}       like sleep, but answers even when cancelled
 *   big {bytes}            a text result of <bytes> 'x'
 *   crash {code=3}         exits at once, answering nothing
 *   stderr {bytes,line_len=100,text}  writes that much to stderr, in lines
 *                          of line_len bytes (newline included) filled with
 *                          <text> repeated (default 'x'), then answers
 *   progress               two notifications/progress for the caller's token
 *   ask                    a server-initiated sampling/createMessage; the
 *                          call is answered ("got:result"/"got:error") once
 *                          the caller's response to it arrives
 *   env {name}             value of that environment variable or "(unset)"
 *   hang {ignore_term}     never answered; pings stop being answered too
 *   raw {lines}            writes each string of <lines> as it is, plus a
 *                          newline ("$ID" in it: the call's id as JSON);
 *                          nothing else answers the call
 *
 * MCP tasks (2025-11-25): a tools/call of sleep with params.task creates
 * task "task-N" (CreateTaskResult, status working; log "task <taskId>
 * ttl <ttl or none>") that completes after ms (with {notify: true} in the
 * arguments it then sends notifications/tasks/status completed). tasks/get
 * answers its status, tasks/result its result once completed (waiting
 * until then), tasks/cancel cancels it (log "task_cancel <taskId>"),
 * tasks/list lists every task made.
 *
 * With TG_FIXTURE_DISCOVER set it answers server/discover (MCP
 * 2026-07-28) with {fixture: "discover", ...}; otherwise -32601.
 *
 * tools/list with params {pad: N} pads the result with an N-byte string;
 * {id_last: true} writes the id after the result.
 *
 * Events are appended, one line each, to the log named by --log PATH or
 * TG_FIXTURE_LOG: "start <pid>", "initialize <id>", "initialized",
 * "call <id> <tool>", "cancelled <requestId>", "ping <id>",
 * "response <id>" (ids as compact JSON). Each line is one write(2) on an
 * O_APPEND descriptor, so tests can read it while the agent runs.
 *
 * --crash-on-start N or TG_FIXTURE_CRASH_ON_START=N: exit(1) at start when
 * this is start number N or later (counted from the "start" lines already
 * in the log; without a log every start counts as the first). N=2 lets the
 * first instance run and makes every restart crash.
 *
 * On stdin EOF the agent finishes its pending timed calls and exits; a
 * pending hang keeps it alive (the tests check that toolgate kills it).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define FX_READ_CHUNK (64 * 1024) /* bytes per read(2) of stdin */
#define FX_LOG_LINE 512           /* longest log line; ids are truncated to fit */

typedef struct fx_timer {
    json_t *id;       /* the call's id, owned */
    uint64_t due_ms;  /* monotonic ms */
    uint64_t ms;      /* requested duration, echoed in the result */
    bool late_ok;     /* slow_cancel: answer even after a cancel */
    int task;         /* the task it runs (index into fx_tasks), or -1 */
} fx_timer_t;

#define FX_TASKS 64
typedef struct fx_task {
    char status[16];  /* "" free, "working", "completed", "cancelled" */
    uint64_t ms;
    bool notify;
    json_t *result_id; /* a tasks/result waiting for the end, owned */
} fx_task_t;
static fx_task_t fx_tasks[FX_TASKS];

typedef struct fx_ask {
    char srv_id[32]; /* id of our server-initiated request */
    json_t *call_id; /* the tools/call waiting for it, owned */
} fx_ask_t;

static int fx_log_fd = -1;
static fx_timer_t *fx_timers;   /* pending sleeps, unordered */
static size_t fx_ntimers, fx_timers_cap;
static fx_ask_t *fx_asks;       /* pending asks */
static size_t fx_nasks, fx_asks_cap;
static unsigned fx_next_srv = 1;
static bool fx_hung;            /* a hang call arrived: stop answering pings */
static json_t *fx_batch_out;    /* while handling a batch: collected replies */

static uint64_t fx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void fx_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                (void)poll(&pfd, 1, 100);
                continue;
            }
            /* The reader is gone: nothing useful is left to do. */
            _exit(0);
        }
        p += w;
        n -= (size_t)w;
    }
}

/* The id as compact JSON for log lines. */
static void fx_id_text(const json_t *id, char *buf, size_t cap)
{
    char *s = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, cap, "%s", s ? s : "null");
    free(s);
}

static void fx_log(const char *event, const json_t *id, const char *extra)
{
    if (fx_log_fd < 0)
        return;
    char idbuf[128] = "";
    if (id)
        fx_id_text(id, idbuf, sizeof idbuf);
    char line[FX_LOG_LINE];
    int n = snprintf(line, sizeof line, "%s%s%s%s%s\n", event, id ? " " : "", idbuf,
                     extra ? " " : "", extra ? extra : "");
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) {
        /* Cut, but keep one event per line. */
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    fx_write_all(fx_log_fd, line, (size_t)n);
}

/* Send one message: to the batch being answered, or as its own line. */
static void fx_emit(json_t *msg)
{
    if (fx_batch_out) {
        json_array_append_new(fx_batch_out, msg);
        return;
    }
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s)
        abort();
    size_t n = strlen(s);
    /* One write per message so a reader never sees a torn line from us. */
    char *line = malloc(n + 1);
    if (!line)
        abort();
    memcpy(line, s, n);
    line[n] = '\n';
    fx_write_all(STDOUT_FILENO, line, n + 1);
    free(line);
    free(s);
}

static void fx_result(const json_t *id, json_t *result)
{
    fx_emit(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static void fx_error(const json_t *id, int code, const char *message)
{
    fx_emit(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                      "error", "code", code, "message", message));
}

/* A tool result whose only content is <text> (length <len>). */
static void fx_text_result(const json_t *id, const char *text, size_t len)
{
    json_t *content = json_pack("[{s:s, s:s%}]", "type", "text", "text", text, len);
    if (!content)
        abort();
    fx_result(id, json_pack("{s:o}", "content", content));
}

static uint64_t fx_arg_uint(const json_t *args, const char *key, uint64_t def)
{
    const json_t *v = json_object_get(args, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return (uint64_t)json_integer_value(v);
    return def;
}

static void fx_add_timer(const json_t *id, uint64_t ms, bool late_ok)
{
    if (fx_ntimers == fx_timers_cap) {
        size_t ncap = fx_timers_cap ? fx_timers_cap * 2 : 16;
        fx_timer_t *nt = realloc(fx_timers, ncap * sizeof *nt);
        if (!nt)
            abort();
        fx_timers = nt;
        fx_timers_cap = ncap;
    }
    fx_timers[fx_ntimers++] = (fx_timer_t){.id = json_deep_copy(id),
                                           .due_ms = fx_now_ms() + ms,
                                           .ms = ms,
                                           .late_ok = late_ok,
                                           .task = -1};
}

static void fx_remove_timer(size_t i)
{
    json_decref(fx_timers[i].id);
    fx_timers[i] = fx_timers[--fx_ntimers];
}

static void fx_raw(const json_t *id, const json_t *args)
{
    char *idtxt = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
    const json_t *lines = json_object_get(args, "lines");
    for (size_t i = 0; idtxt && i < json_array_size(lines); i++) {
        const char *l = json_string_value(json_array_get(lines, i));
        size_t cap = (l ? strlen(l) : 0) * 2 + strlen(idtxt) * 4 + 2, n = 0;
        char *out = malloc(cap);
        if (!l || !out)
            abort();
        for (const char *q = l; *q;) {
            if (strncmp(q, "$ID", 3) == 0) {
                memcpy(out + n, idtxt, strlen(idtxt));
                n += strlen(idtxt);
                q += 3;
            } else {
                out[n++] = *q++;
            }
        }
        out[n++] = '\n';
        fx_write_all(STDOUT_FILENO, out, n);
        free(out);
    }
    free(idtxt);
}

static void fx_tools_list(const json_t *id, const json_t *params)
{
    size_t pad = (size_t)json_integer_value(json_object_get(params, "pad"));
    if (pad > 0 && json_is_true(json_object_get(params, "id_last"))) {
        char *idtxt = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
        char *out = malloc(pad + 128);
        if (!idtxt || !out)
            abort();
        int h = snprintf(out, 128, "{\"jsonrpc\":\"2.0\",\"result\":{\"tools\":[],\"pad\":\"");
        memset(out + h, 'x', pad);
        int t = snprintf(out + h + pad, 128, "\"},\"id\":%s}\n", idtxt);
        fx_write_all(STDOUT_FILENO, out, (size_t)h + pad + (size_t)t);
        free(out);
        free(idtxt);
        return;
    }

    static const char *const names[] = {"echo", "sleep", "slow_cancel", "big", "crash",
                                        "stderr", "progress", "ask", "env", "hang", "alloc",
                                        "mute"};
    json_t *tools = json_array();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        json_array_append_new(tools, json_pack("{s:s, s:s, s:{s:s}}", "name", names[i],
                                               "description", "tg fixture tool", "inputSchema",
                                               "type", "object"));
    json_t *res = json_pack("{s:o}", "tools", tools);
    if (pad > 0) {
        char *s = malloc(pad + 1);
        if (!s)
            abort();
        memset(s, 'x', pad);
        s[pad] = '\0';
        json_object_set_new(res, "pad", json_string(s));
        free(s);
    }
    fx_result(id, res);
}

static void fx_tool_stderr(const json_t *args)
{
    const char *text = json_string_value(json_object_get(args, "text"));
    size_t tlen = text ? strlen(text) : 0;
    if (tlen == 0)
        text = "x", tlen = 1;
    uint64_t line_len = fx_arg_uint(args, "line_len", 100);
    if (line_len < 2)
        line_len = 2;
    uint64_t total = fx_arg_uint(args, "bytes", tlen + 1);
    char *line = malloc(line_len);
    if (!line)
        abort();
    for (uint64_t i = 0; i + 1 < line_len; i++)
        line[i] = text[i % tlen];
    line[line_len - 1] = '\n';
    while (total > 0) {
        size_t n = total < line_len ? (size_t)total : (size_t)line_len;
        /* A short last chunk still ends its line. */
        if (n < line_len) {
            fx_write_all(STDERR_FILENO, line, n - 1);
            fx_write_all(STDERR_FILENO, "\n", 1);
        } else {
            fx_write_all(STDERR_FILENO, line, n);
        }
        total -= n;
    }
    free(line);
}

static json_t *fx_task_obj(int t)
{
    char tid[32];
    snprintf(tid, sizeof tid, "task-%d", t);
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i}", "taskId", tid, "status",
                     fx_tasks[t].status, "createdAt", "2026-01-01T00:00:00Z", "lastUpdatedAt",
                     "2026-01-01T00:00:00Z", "ttl", 60000, "pollInterval", 100);
}

static json_t *fx_task_result(int t)
{
    char text[48];
    snprintf(text, sizeof text, "slept %llu", (unsigned long long)fx_tasks[t].ms);
    return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
}

/* The task named by params.taskId, or -1. */
static int fx_task_of(const json_t *params)
{
    const char *tid = json_string_value(json_object_get(params, "taskId"));
    int t;
    if (tid == NULL || sscanf(tid, "task-%d", &t) != 1 || t < 0 || t >= FX_TASKS ||
        fx_tasks[t].status[0] == '\0')
        return -1;
    return t;
}

static void fx_task_end(int t, const char *status)
{
    snprintf(fx_tasks[t].status, sizeof fx_tasks[t].status, "%s", status);
    if (fx_tasks[t].notify)
        fx_emit(json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
                          "notifications/tasks/status", "params", fx_task_obj(t)));
    if (fx_tasks[t].result_id != NULL) {
        if (strcmp(status, "completed") == 0)
            fx_result(fx_tasks[t].result_id, fx_task_result(t));
        else
            fx_error(fx_tasks[t].result_id, -32603, "task cancelled");
        json_decref(fx_tasks[t].result_id);
        fx_tasks[t].result_id = NULL;
    }
}

static void fx_task_request(const char *method, const json_t *id, const json_t *params)
{
    int t = fx_task_of(params);
    fx_log(method, id, NULL);
    if (t < 0) {
        fx_error(id, -32602, "no such task");
        return;
    }
    if (strcmp(method, "tasks/get") == 0) {
        fx_result(id, fx_task_obj(t));
    } else if (strcmp(method, "tasks/result") == 0) {
        if (strcmp(fx_tasks[t].status, "completed") == 0)
            fx_result(id, fx_task_result(t));
        else if (strcmp(fx_tasks[t].status, "working") == 0 && fx_tasks[t].result_id == NULL)
            fx_tasks[t].result_id = json_deep_copy(id);
        else
            fx_error(id, -32603, "task cancelled");
    } else {
        char tid[32];
        snprintf(tid, sizeof tid, "task-%d", t);
        json_t *jtid = json_string(tid);
        fx_log("task_cancel", jtid, NULL);
        json_decref(jtid);
        for (size_t i = 0; i < fx_ntimers; i++)
            if (fx_timers[i].task == t) {
                json_decref(fx_timers[i].id);
                fx_timers[i] = fx_timers[--fx_ntimers];
                break;
            }
        if (strcmp(fx_tasks[t].status, "working") == 0)
            fx_task_end(t, "cancelled");
        fx_result(id, fx_task_obj(t));
    }
}

/* A task-augmented sleep: answered with a CreateTaskResult at once. */
static void fx_task_create(const json_t *id, const json_t *args, const json_t *task)
{
    int t = 0;
    while (t < FX_TASKS && fx_tasks[t].status[0] != '\0')
        t++;
    if (t == FX_TASKS) {
        fx_error(id, -32603, "too many tasks");
        return;
    }
    snprintf(fx_tasks[t].status, sizeof fx_tasks[t].status, "working");
    fx_tasks[t].ms = fx_arg_uint(args, "ms", 0);
    fx_tasks[t].notify = json_is_true(json_object_get(args, "notify"));
    char tid[32], ttl[32];
    snprintf(tid, sizeof tid, "task-%d", t);
    const json_t *jt = json_object_get(task, "ttl");
    if (json_is_integer(jt))
        snprintf(ttl, sizeof ttl, "ttl %lld", (long long)json_integer_value(jt));
    else
        snprintf(ttl, sizeof ttl, "ttl none");
    json_t *jtid = json_string(tid);
    fx_log("task", jtid, ttl);
    json_decref(jtid);
    fx_add_timer(id, fx_tasks[t].ms, false);
    fx_timers[fx_ntimers - 1].task = t;
    fx_result(id, json_pack("{s:o}", "task", fx_task_obj(t)));
}

static void fx_tools_call(const json_t *id, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    fx_log("call", id, name ? name : "(none)");
    if (!name) {
        fx_error(id, -32602, "missing tool name");
        return;
    }
    if (strcmp(name, "echo") == 0) {
        const json_t *t = json_object_get(args, "text");
        const char *s = json_is_string(t) ? json_string_value(t) : "";
        fx_text_result(id, s, json_is_string(t) ? json_string_length(t) : 0);
    } else if (strcmp(name, "sleep") == 0 && json_is_object(json_object_get(params, "task"))) {
        fx_task_create(id, args, json_object_get(params, "task"));
    } else if (strcmp(name, "sleep") == 0 || strcmp(name, "slow_cancel") == 0) {
        fx_add_timer(id, fx_arg_uint(args, "ms", 0), strcmp(name, "slow_cancel") == 0);
    } else if (strcmp(name, "big") == 0) {
        uint64_t n = fx_arg_uint(args, "bytes", 0);
        char *buf = malloc(n + 1);
        if (!buf)
            abort();
        memset(buf, 'x', n);
        fx_text_result(id, buf, n);
        free(buf);
    } else if (strcmp(name, "crash") == 0) {
        _exit((int)fx_arg_uint(args, "code", 3));
    } else if (strcmp(name, "mute") == 0) {
        /* Close stdout and live on: no answer can come any more. */
        close(1);
        sleep((unsigned)fx_arg_uint(args, "s", 30));
        _exit(0);
    } else if (strcmp(name, "alloc") == 0) {
        /* Allocate and touch arguments.mib MiB (containment tests), keep it. */
        size_t mib = (size_t)fx_arg_uint(args, "mib", 16);
        for (size_t i = 0; i < mib; i++) {
            char *p = malloc(1u << 20);
            if (p == NULL)
                break;
            memset(p, 0x5a, 1u << 20);
        }
        fx_text_result(id, "allocated", 9);
    } else if (strcmp(name, "stderr") == 0) {
        fx_tool_stderr(args);
        fx_text_result(id, "written", 7);
    } else if (strcmp(name, "progress") == 0) {
        const json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
        for (int i = 0; tok && i < 2; i++)
            fx_emit(json_pack("{s:s, s:s, s:{s:O, s:i, s:i}}", "jsonrpc", "2.0", "method",
                              "notifications/progress", "params", "progressToken", tok,
                              "progress", 1, "total", 2));
        fx_text_result(id, "progress done", 13);
    } else if (strcmp(name, "ask") == 0) {
        if (fx_nasks == fx_asks_cap) {
            size_t ncap = fx_asks_cap ? fx_asks_cap * 2 : 8;
            fx_ask_t *na = realloc(fx_asks, ncap * sizeof *na);
            if (!na)
                abort();
            fx_asks = na;
            fx_asks_cap = ncap;
        }
        fx_ask_t *a = &fx_asks[fx_nasks++];
        snprintf(a->srv_id, sizeof a->srv_id, "srv-%u", fx_next_srv++);
        a->call_id = json_deep_copy(id);
        fx_emit(json_pack("{s:s, s:s, s:s, s:{s:[{s:s, s:{s:s, s:s}}], s:i}}", "jsonrpc", "2.0",
                          "id", a->srv_id, "method", "sampling/createMessage", "params",
                          "messages", "role", "user", "content", "type", "text", "text",
                          "fixture question", "maxTokens", 16));
    } else if (strcmp(name, "env") == 0) {
        const char *var = json_string_value(json_object_get(args, "name"));
        const char *val = var ? getenv(var) : NULL;
        if (!val)
            val = "(unset)";
        fx_text_result(id, val, strlen(val));
    } else if (strcmp(name, "raw") == 0) {
        fx_raw(id, args);
    } else if (strcmp(name, "hang") == 0) {
        fx_hung = true;
        if (json_is_true(json_object_get(args, "ignore_term")))
            signal(SIGTERM, SIG_IGN);
    } else {
        fx_error(id, -32602, "unknown tool");
    }
}

static void fx_cancelled(const json_t *params)
{
    const json_t *rid = json_object_get(params, "requestId");
    fx_log("cancelled", rid ? rid : json_null(), NULL);
    /* MCP: a cancelled request is not answered, except by slow_cancel
     * which plays the agent whose result was already on its way. */
    for (size_t i = 0; i < fx_ntimers; i++) {
        if (json_equal(fx_timers[i].id, rid) && !fx_timers[i].late_ok) {
            fx_remove_timer(i);
            return;
        }
    }
}

/* A response from the caller to one of our server-initiated requests. */
static void fx_response(const json_t *msg, const json_t *id)
{
    fx_log("response", id, NULL);
    const char *sid = json_string_value(id);
    for (size_t i = 0; sid && i < fx_nasks; i++) {
        if (strcmp(fx_asks[i].srv_id, sid) != 0)
            continue;
        bool ok = json_object_get(msg, "result") != NULL;
        json_t *call_id = fx_asks[i].call_id;
        fx_asks[i] = fx_asks[--fx_nasks];
        fx_text_result(call_id, ok ? "got:result" : "got:error", ok ? 10 : 9);
        json_decref(call_id);
        return;
    }
}

static void fx_message(const json_t *msg)
{
    if (!json_is_object(msg)) {
        fx_error(NULL, -32600, "invalid request");
        return;
    }
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *params = json_object_get(msg, "params");
    if (!method) {
        if (id)
            fx_response(msg, id);
        return;
    }
    if (!id) {
        if (strcmp(method, "notifications/initialized") == 0)
            fx_log("initialized", NULL, NULL);
        else if (strcmp(method, "notifications/cancelled") == 0)
            fx_cancelled(params);
        return;
    }
    if (strcmp(method, "server/discover") == 0 && getenv("TG_FIXTURE_DISCOVER") != NULL) {
        /* A server speaking MCP 2026-07-28 itself (the bridge's tests). */
        fx_result(id, json_pack("{s:s, s:[s], s:s}", "fixture", "discover", "supportedVersions",
                                "2026-07-28", "resultType", "complete"));
        return;
    }
    if (strcmp(method, "initialize") == 0) {
        fx_log("initialize", id, NULL);
        const char *init_mib = getenv("TG_FIXTURE_ALLOC_ON_INIT");
        for (long i = 0; init_mib != NULL && i < atol(init_mib); i++) {
            char *p = malloc(1u << 20); /* the memory-limit tests' OOM during initialize */
            if (p != NULL)
                memset(p, 0x5a, 1u << 20);
        }
        fx_result(id, json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion", "2025-06-18",
                                "capabilities", "tools", "serverInfo", "name", "tg-fixture",
                                "version", "1"));
    } else if (strcmp(method, "ping") == 0) {
        fx_log("ping", id, NULL);
        if (!fx_hung)
            fx_result(id, json_object());
    } else if (strcmp(method, "tools/list") == 0) {
        fx_tools_list(id, params);
    } else if (strcmp(method, "tools/call") == 0) {
        fx_tools_call(id, params);
    } else if (strcmp(method, "tasks/list") == 0) {
        json_t *all = json_array();
        for (int t = 0; t < FX_TASKS && fx_tasks[t].status[0] != '\0'; t++)
            json_array_append_new(all, fx_task_obj(t));
        fx_result(id, json_pack("{s:o}", "tasks", all));
    } else if (strncmp(method, "tasks/", 6) == 0) {
        fx_task_request(method, id, params);
    } else {
        fx_error(id, -32601, "method not found");
    }
}

static void fx_line(const char *p, size_t n)
{
    json_error_t jerr;
    json_t *msg = json_loadb(p, n, JSON_DECODE_ANY, &jerr);
    if (!msg) {
        fx_error(NULL, -32700, "parse error");
        return;
    }
    if (json_is_array(msg)) {
        /* Batches (no tools/call ever reaches us in one) are answered with
         * one array of the replies that are ready at once. */
        fx_batch_out = json_array();
        size_t i;
        json_t *el;
        json_array_foreach(msg, i, el) fx_message(el);
        json_t *out = fx_batch_out;
        fx_batch_out = NULL;
        if (json_array_size(out) > 0)
            fx_emit(out);
        else
            json_decref(out);
    } else {
        fx_message(msg);
    }
    json_decref(msg);
}

static void fx_fire_timers(void)
{
    uint64_t now = fx_now_ms();
    for (size_t i = 0; i < fx_ntimers;) {
        if (fx_timers[i].due_ms <= now && fx_timers[i].task >= 0) {
            int t = fx_timers[i].task;
            fx_remove_timer(i);
            fx_task_end(t, "completed");
        } else if (fx_timers[i].due_ms <= now) {
            char text[48];
            int n = snprintf(text, sizeof text, "slept %llu", (unsigned long long)fx_timers[i].ms);
            fx_text_result(fx_timers[i].id, text, (size_t)n);
            fx_remove_timer(i);
        } else {
            i++;
        }
    }
}

static int fx_poll_timeout(void)
{
    if (fx_ntimers == 0)
        return -1;
    uint64_t now = fx_now_ms(), next = UINT64_MAX;
    for (size_t i = 0; i < fx_ntimers; i++)
        if (fx_timers[i].due_ms < next)
            next = fx_timers[i].due_ms;
    return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

static unsigned fx_count_starts(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned n = 0;
    char line[FX_LOG_LINE];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "start ", 6) == 0)
            n++;
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    const char *log_path = getenv("TG_FIXTURE_LOG");
    const char *crash_on = getenv("TG_FIXTURE_CRASH_ON_START");
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--log") == 0)
            log_path = argv[++i];
        else if (strcmp(argv[i], "--crash-on-start") == 0)
            crash_on = argv[++i];
    }
    if (log_path && *log_path) {
        unsigned ordinal = fx_count_starts(log_path) + 1;
        unsigned long n = crash_on ? strtoul(crash_on, NULL, 10) : 0;
        fx_log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        char pid[24];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        fx_log("start", NULL, pid);
        if (n > 0 && ordinal >= n)
            exit(1);
    } else if (crash_on && strtoul(crash_on, NULL, 10) == 1) {
        exit(1);
    }

    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return 1;
    bool eof = false;
    for (;;) {
        fx_fire_timers();
        if (eof && fx_ntimers == 0 && !fx_hung)
            break;
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int pr = poll(&pfd, eof ? 0 : 1, fx_poll_timeout());
        if (pr < 0 && errno != EINTR)
            return 1;
        if (pr <= 0 || eof)
            continue;
        if (cap - len < FX_READ_CHUNK) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                return 1;
            buf = nb;
        }
        ssize_t r = read(STDIN_FILENO, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return 1;
        }
        if (r == 0) {
            eof = true;
            continue;
        }
        size_t scan = len;
        len += (size_t)r;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(buf + scan, '\n', len - scan)) != NULL) {
            size_t end = (size_t)(nl - buf);
            if (end > start)
                fx_line(buf + start, end - start);
            start = end + 1;
            scan = start;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
    }
    free(buf);
    return 0;
}
