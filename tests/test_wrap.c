/* Integration tests: the real `toolgate wrap` binary (TG_BIN) in front of
 * tests/agents/tg_fixture_agent, driven over its stdin/stdout as an MCP
 * caller would. Each test states one rule of DESIGN.md ("Wire dialects",
 * "Limits", "Denials", "Audit") as seen from outside the process.
 *
 * TG_ASAN=1 (set by .ci/run for sanitizer builds) skips the resident-memory
 * bound, which ASan's shadow memory makes meaningless.
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

#define IT_AGENT "tg_fixture_agent"
#define IT_CANARY "CANARY-7d1e-SECRET"

static tgh_wrap_t W;

static void it_fini(void)
{
    if (W.tg.pid > 0 && getenv("TG_IT_VERBOSE")) {
        char *err = tgh_read_file(W.err, NULL);
        fprintf(stderr, "---- toolgate stderr ----\n%s\n-------------------------\n",
                err ? err : "(none)");
        free(err);
    }
    tgh_cleanup();
}

TestSuite(wrap, .fini = it_fini, .timeout = 20);

/* ---- helpers ----------------------------------------------------------- */

static void it_start(const char *const *tg_args, const char *const *agent_args,
                     const char *const *env)
{
    int rc = tgh_wrap_start(&W, tg_args, agent_args, env);
    cr_assert_eq(rc, 0, "cannot start %s: %s", TG_BIN, strerror(-rc));
}

/* The response to <id>: taken from <others> (messages read earlier) when it
 * is there, else awaited. */
static json_t *it_take(json_t *others, const json_t *id, int timeout_ms)
{
    for (size_t i = 0; i < json_array_size(others); i++) {
        json_t *m = json_array_get(others, i);
        if (mcp_is_response_to(m, id)) {
            json_incref(m);
            json_array_remove(others, i);
            return m;
        }
    }
    return mcp_expect(&W.tg, id, timeout_ms, others);
}

static void it_call(json_int_t id, const char *tool, const char *args)
{
    int rc = mcp_call(&W.tg, id, tool, args);
    cr_assert_eq(rc, 0, "sending call %lld: %s", (long long)id, strerror(-rc));
}

static void it_send(const char *line)
{
    int rc = tgh_sendf(&W.tg, "%s", line);
    cr_assert_eq(rc, 0, "sending a line: %s", strerror(-rc));
}

/* Append a tools/call line (id <id>, tool <tool>, arguments <args>, and
 * params._meta.timeout_ms unless <timeout_ms> is 0) to <batch> at <off>;
 * returns the new length. */
static size_t it_batch_call(char *batch, size_t cap, size_t off, int id, const char *tool,
                            const char *args, int timeout_ms)
{
    char jid[16], meta[48] = "";
    snprintf(jid, sizeof jid, "%d", id);
    if (timeout_ms > 0)
        snprintf(meta, sizeof meta, "\"timeout_ms\":%d", timeout_ms);
    return off + mcp_call_line(batch + off, cap - off, jid, tool, args, meta);
}

/* True when the serialised <v> contains the canary anywhere. */
static bool it_has_canary(const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    bool has = s && strstr(s, IT_CANARY) != NULL;
    free(s);
    return has;
}

static json_int_t it_int(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    cr_assert(json_is_integer(v), "field %s is not an integer", key);
    return json_integer_value(v);
}

static const char *it_str(const json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    cr_assert_not_null(v, "field %s is not a string", key);
    return v;
}

static const char it_init_line[] =
    "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
    "\"clientInfo\":{\"name\":\"tg-it\",\"version\":\"1\"}}}";
static const char it_initialized_line[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";

/* initialize + notifications/initialized; returns the initialize result
 * (caller owns). */
static json_t *it_handshake(void)
{
    it_send(it_init_line);
    json_t *id = json_string("init");
    json_t *r = mcp_expect(&W.tg, id, 5000, NULL);
    json_decref(id);
    json_t *result = json_incref(json_object_get(r, "result"));
    cr_assert_not_null(result, "initialize failed");
    json_decref(r);
    it_send(it_initialized_line);
    return result;
}

static void it_start_init(const char *const *tg_args)
{
    it_start(tg_args, NULL, NULL);
    json_decref(it_handshake());
}

typedef struct it_resp {
    json_t *msg;
    uint64_t at_ms; /* arrival, ms after the calls were sent */
} it_resp_t;

/* Collect the responses to integer ids first..first+n-1 (any order). */
static void it_collect(it_resp_t *out, json_int_t first, int n, uint64_t t0, int timeout_ms)
{
    memset(out, 0, (size_t)n * sizeof *out);
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (int got = 0; got < n;) {
        json_t *msg = tgh_read_json(&W.tg, tgh_left(deadline), NULL);
        if (!msg) {
            cr_assert(!W.tg.out_eof && tgh_left(deadline) > 0,
                      "only %d of %d responses arrived", got, n);
            continue;
        }
        json_t *id = json_object_get(msg, "id");
        json_int_t k = json_is_integer(id) ? json_integer_value(id) - first : -1;
        if (json_object_get(msg, "method") || k < 0 || k >= n || out[k].msg) {
            json_decref(msg);
            continue;
        }
        out[k].msg = msg;
        out[k].at_ms = tgh_now_ms() - t0;
        got++;
    }
}

static void it_free_resps(it_resp_t *r, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(r[i].msg);
}

/* Close toolgate's stdin and wait for it to exit; returns its exit code. */
static int it_eof_and_exit(int timeout_ms)
{
    tgh_close_stdin(&W.tg);
    /* Keep draining stdout so toolgate never blocks writing to us. */
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    while (tgh_wait(&W.tg, 0) != 0) {
        cr_assert(tgh_left(deadline) > 0, "toolgate did not exit within %d ms after EOF",
                  timeout_ms);
        free(tgh_read_line(&W.tg, 20, NULL));
    }
    return tgh_exit_code(&W.tg);
}

static pid_t it_agent_pid(int nth)
{
    char field[64];
    cr_assert_eq(tgh_log_field(W.log, "start ", nth, field, sizeof field), 0,
                 "fixture log has no start line #%d", nth + 1);
    return (pid_t)strtol(field, NULL, 10);
}

/* The agent-side id of the <nth> "call <id> <tool>" log line. */
static void it_logged_call(int nth, char *id, size_t cap, const char *tool)
{
    char field[128];
    cr_assert_eq(tgh_log_wait(W.log, "call ", nth + 1, 3000) > nth, true,
                 "the agent never logged call #%d", nth + 1);
    cr_assert_eq(tgh_log_field(W.log, "call ", nth, field, sizeof field), 0);
    char *sp = strrchr(field, ' ');
    cr_assert_not_null(sp, "bad call line '%s'", field);
    cr_assert_str_eq(sp + 1, tool, "call line '%s'", field);
    *sp = '\0';
    cr_assert_lt((size_t)snprintf(id, cap, "%s", field), cap, "id too long: %s", field);
}

/* Send <line> and read the next message, which must come; <why...> is
 * the printf-style failure message. */
__attribute__((format(printf, 2, 3))) static json_t *it_answer(const char *line,
                                                               const char *why, ...)
{
    it_send(line);
    json_t *r = tgh_read_json(&W.tg, 3000, NULL);
    if (r == NULL) {
        char msg[512];
        va_list ap;
        va_start(ap, why);
        vsnprintf(msg, sizeof msg, why, ap);
        va_end(ap);
        cr_assert_fail("%s", msg);
    }
    return r;
}

/* Prepare the session with <json> as <W.dir>/config.json, its path in
 * <cfg>. */
static void it_prepare_config(char *cfg, size_t cap, const char *json)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    snprintf(cfg, cap, "%s/config.json", W.dir);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
}

/* An initialized session whose agent runs call 1, a sleep with
 * <sleep_args>: the agent's pid, once the agent has logged the call. */
static pid_t it_start_sleeping(const char *sleep_args)
{
    it_start_init(NULL);
    it_call(1, "sleep", sleep_args);
    char id[64];
    it_logged_call(0, id, sizeof id, "sleep");
    return it_agent_pid(0);
}

/* All of toolgate's stderr; caller frees. */
static char *it_stderr(void)
{
    char *s = tgh_read_file(W.err, NULL);
    return s ? s : strdup("");
}

/* ---- pass-through ------------------------------------------------------ */

static const char *const it_script[] = {
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
    ("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
     "\"arguments\":{\"text\":\"h\\u00e9llo \\\"quoted\\\" \\\\ \\u2603 \\ud83d\\ude00\"}}}"),
    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"no/such/method\"}",
};

Test(wrap, passthrough_matches_direct)
{
    /* The agent run directly gives the reference answers. */
    char dir[TGH_PATH];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    char dlog[TGH_PATH + 32];
    snprintf(dlog, sizeof dlog, "%s/direct.log", dir);
    char *const dargv[] = {(char *)TG_AGENTS_DIR "/tg_fixture_agent", (char *)"--log", dlog,
                           NULL};
    static tgh_proc_t direct;
    cr_assert_eq(tgh_spawn(&direct, dargv, NULL, NULL), 0);
    json_t *dres[5];
    cr_assert_eq(tgh_sendf(&direct, "%s", it_init_line), 0);
    json_t *jid = json_string("init");
    json_t *r = mcp_await(&direct, jid, 5000, NULL);
    cr_assert_not_null(r);
    dres[0] = json_incref(json_object_get(r, "result"));
    json_decref(r);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tgh_sendf(&direct, "%s", it_script[i]), 0);
        r = mcp_await_int(&direct, i + 2, 5000, NULL);
        cr_assert_not_null(r);
        dres[i + 1] = r;
    }

    it_start(NULL, NULL, NULL);
    json_t *init = it_handshake();
    cr_assert(json_equal(init, dres[0]), "initialize result differs from direct");
    json_decref(init);
    for (int i = 0; i < 4; i++) {
        it_send(it_script[i]);
        r = mcp_expect_int(&W.tg, i + 2, 5000);
        char *a = mcp_dump(r), *b = mcp_dump(dres[i + 1]);
        cr_assert(json_equal(r, dres[i + 1]), "line %d: via toolgate %s, direct %s", i, a, b);
        free(a), free(b);
        json_decref(r);
        json_decref(dres[i + 1]);
    }
    json_decref(dres[0]);
    json_decref(jid);
    /* The notification and the ping reached the agent unchanged. */
    cr_assert_eq(tgh_log_wait(W.log, "initialized", 1, 2000), 1);
    cr_assert_eq(tgh_log_count(W.log, "ping "), 1);
    cr_assert_eq(tgh_log_count(W.log, "initialize "), 1);
}

Test(wrap, ids_restored_and_rewritten)
{
    it_start_init(NULL);
    /* The same number as a string and as an integer are different ids. */
    it_send("{\"jsonrpc\":\"2.0\",\"id\":\"42\",\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"sleep\",\"arguments\":{\"ms\":100}}}");
    it_send("{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"echo\",\"arguments\":{\"text\":\"int\"}}}");
    it_send("{\"jsonrpc\":\"2.0\",\"id\":\"req-A\",\"method\":\"tools/call\",\"params\":{"
            "\"name\":\"echo\",\"arguments\":{\"text\":\"str\"}}}");
    json_t *others = json_array();
    json_t *ids[3] = {json_string("42"), json_integer(42), json_string("req-A")};
    const char *texts[3] = {"slept 100", "int", "str"};
    for (int i = 0; i < 3; i++) {
        json_t *r = it_take(others, ids[i], 3000);
        mcp_assert_text(r, texts[i]);
        json_decref(r);
        json_decref(ids[i]);
    }
    json_decref(others);

    /* The agent saw three distinct toolgate-made integer ids. */
    char seen[3][64];
    it_logged_call(0, seen[0], sizeof seen[0], "sleep");
    it_logged_call(1, seen[1], sizeof seen[1], "echo");
    it_logged_call(2, seen[2], sizeof seen[2], "echo");
    for (int i = 0; i < 3; i++) {
        json_error_t e;
        json_t *v = json_loads(seen[i], JSON_DECODE_ANY, &e);
        cr_assert(json_is_integer(v), "agent-side id '%s' is not an integer", seen[i]);
        json_decref(v);
    }
    cr_assert_str_neq(seen[0], seen[1]);
    cr_assert_str_neq(seen[1], seen[2]);
    cr_assert_str_neq(seen[0], seen[2]);
}

Test(wrap, progress_passthrough)
{
    it_start_init(NULL);
    it_send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"progress\",\"arguments\":{},\"_meta\":{\"progressToken\":\"tok-9\"}}}");
    json_t *others = json_array();
    json_t *jid = json_integer(7);
    json_t *r = mcp_expect(&W.tg, jid, 3000, others);
    mcp_assert_text(r, "progress done");
    cr_assert_eq(json_array_size(others), 2, "expected 2 progress notifications first");
    for (size_t i = 0; i < 2; i++) {
        json_t *n = json_array_get(others, i);
        char *s = mcp_dump(n);
        cr_assert_str_eq(it_str(n, "method"), "notifications/progress", "%s", s);
        json_t *params = json_object_get(n, "params");
        cr_assert_str_eq(it_str(params, "progressToken"), "tok-9", "token changed: %s", s);
        cr_assert_eq(it_int(params, "progress"), 1);
        cr_assert_eq(it_int(params, "total"), 2);
        free(s);
    }
    json_decref(r);
    json_decref(jid);
    json_decref(others);
}

Test(wrap, server_request_roundtrip)
{
    it_start_init(NULL);
    it_call(8, "ask", NULL);
    json_t *req = tgh_read_json(&W.tg, 3000, NULL);
    cr_assert_not_null(req, "no server-initiated request arrived");
    char *s = mcp_dump(req);
    cr_assert_str_eq(it_str(req, "method"), "sampling/createMessage", "%s", s);
    json_t *sid = json_object_get(req, "id");
    cr_assert_not_null(sid, "server request without id: %s", s);
    cr_assert_eq(it_int(json_object_get(req, "params"), "maxTokens"), 16, "params changed: %s",
                 s);
    char *sidtext = mcp_dump(sid);
    char line[512];
    snprintf(line, sizeof line,
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"role\":\"assistant\",\"content\":{"
             "\"type\":\"text\",\"text\":\"ok\"},\"model\":\"m\"}}",
             sidtext);
    it_send(line);
    json_t *r = mcp_expect_int(&W.tg, 8, 3000);
    mcp_assert_text(r, "got:result");
    /* The agent got the answer under the id it chose. */
    cr_assert_eq(tgh_log_wait(W.log, "response \"srv-1\"", 1, 2000), 1);
    json_decref(r);
    json_decref(req);
    free(sidtext);
    free(s);
}

Test(wrap, env_passthrough)
{
    const char *const env[] = {"TG_TEST_VAR=hello", NULL};
    it_start(NULL, NULL, env);
    json_decref(it_handshake());
    mcp_call_text(&W.tg, 1, "env", "{\"name\":\"TG_TEST_VAR\"}", "hello", 3000);
    mcp_call_text(&W.tg, 2, "env", "{\"name\":\"TG_TEST_SURELY_UNSET\"}", "(unset)", 3000);
}

/* ---- rate -------------------------------------------------------------- */

Test(wrap, rate_agent_sixth_refused)
{
    const char *const args[] = {"--limit", "rate_limit=5/second", NULL};
    it_start_init(args);
    /* One write: six calls arrive within one GCRA emission interval. */
    char batch[2048];
    size_t off = 0;
    for (int i = 1; i <= 6; i++) {
        char a[32];
        snprintf(a, sizeof a, "{\"text\":\"r%d\"}", i);
        off = it_batch_call(batch, sizeof batch, off, i, "echo", a, 0);
    }
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[6];
    it_collect(rs, 1, 6, tgh_now_ms(), 5000);
    for (int i = 0; i < 5; i++) {
        char text[8];
        snprintf(text, sizeof text, "r%d", i + 1);
        mcp_assert_text(rs[i].msg, text);
    }
    json_t *data = mcp_assert_denial(rs[5].msg, -32060, "rate_limit_exceeded");
    json_int_t retry = it_int(data, "retry_after_ms");
    cr_assert(retry >= 1 && retry <= 200, "retry_after_ms %lld", (long long)retry);
    cr_assert_eq(it_int(data, "observed"), 6);
    cr_assert_eq(it_int(data, "cap"), 5);
    cr_assert_str_eq(it_str(data, "config_path"),
                     "agents." IT_AGENT ".execution_limits.rate_limit");
    cr_assert_str_eq(it_str(data, "scope"), "agent");
    cr_assert_str_eq(it_str(data, "limit"), "rate");
    cr_assert_str_eq(it_str(data, "agent"), IT_AGENT);
    cr_assert_str_eq(it_str(data, "tool"), "echo");
    it_free_resps(rs, 6);
    /* The refused call never reached the agent. */
    cr_assert_eq(tgh_log_count(W.log, "call "), 5);
}

/* Issue 20 item 17: a limit of capacity 1 is at 100% during every call;
 * its warning is logged once for a run of calls, worded as a share of
 * the cap. */
Test(wrap, capacity_one_warns_once_per_episode)
{
    const char *const args[] = {"--limit", "max_concurrent_calls=1", NULL};
    it_start_init(args);
    for (int i = 1; i <= 5; i++)
        mcp_call_text(&W.tg, i, "echo", "{\"text\":\"x\"}", "x", 3000);
    char *err = it_stderr();
    cr_expect_eq(
        tgh_count_lines_with(err, "", "limit agent." IT_AGENT ".concurrency at 1 of 1 (100 %)"), 1,
        "not one warning for 5 calls:\n%s", err);
    cr_expect_null(strstr(err, "80%"), "%s", err);
    free(err);
}

Test(wrap, rate_tool_scope)
{
    const char *const args[] = {"--limit", "tools.echo.rate_limit=2/second", NULL};
    it_start_init(args);
    char batch[2048];
    size_t off = 0;
    for (int i = 1; i <= 3; i++)
        off = it_batch_call(batch, sizeof batch, off, i, "echo", "{\"text\":\"e\"}", 0);
    /* Other tools only see the agent's default rate. */
    for (int i = 4; i <= 8; i++)
        off = it_batch_call(batch, sizeof batch, off, i, "env", "{\"name\":\"X_NONE\"}", 0);
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[8];
    it_collect(rs, 1, 8, tgh_now_ms(), 5000);
    mcp_assert_text(rs[0].msg, "e");
    mcp_assert_text(rs[1].msg, "e");
    json_t *data = mcp_assert_denial(rs[2].msg, -32060, "rate_limit_exceeded");
    cr_assert_str_eq(it_str(data, "scope"), "tool");
    cr_assert_str_eq(it_str(data, "config_path"), "agents." IT_AGENT ".tools.echo.rate_limit");
    cr_assert_eq(it_int(data, "observed"), 3);
    cr_assert_eq(it_int(data, "cap"), 2);
    json_int_t retry = it_int(data, "retry_after_ms");
    cr_assert(retry >= 1 && retry <= 500, "retry_after_ms %lld", (long long)retry);
    for (int i = 3; i < 8; i++)
        mcp_assert_text(rs[i].msg, "(unset)");
    it_free_resps(rs, 8);
}

/* ---- concurrency ------------------------------------------------------- */

Test(wrap, concurrency_queue_then_refuse)
{
    const char *const args[] = {"--limit", "max_concurrent_calls=2", "--limit",
                                "max_queued_calls=1", NULL};
    it_start_init(args);
    char batch[2048];
    size_t off = 0;
    for (int i = 1; i <= 4; i++)
        off = it_batch_call(batch, sizeof batch, off, i, "sleep", "{\"ms\":500}", 0);
    uint64_t t0 = tgh_now_ms();
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[4];
    it_collect(rs, 1, 4, t0, 5000);
    /* Two run at once, one waits in the queue, the fourth is refused now. */
    mcp_assert_denial(rs[3].msg, -32061, "concurrency_limit_exceeded");
    cr_assert_lt(rs[3].at_ms, 400, "the refusal took %llu ms", (unsigned long long)rs[3].at_ms);
    for (int i = 0; i < 3; i++)
        mcp_assert_text(rs[i].msg, "slept 500");
    cr_assert(rs[0].at_ms >= 400 && rs[0].at_ms < 1000, "call 1 at %llu ms",
              (unsigned long long)rs[0].at_ms);
    cr_assert(rs[1].at_ms >= 400 && rs[1].at_ms < 1000, "call 2 at %llu ms",
              (unsigned long long)rs[1].at_ms);
    cr_assert(rs[2].at_ms >= 900 && rs[2].at_ms < 2500, "queued call 3 at %llu ms",
              (unsigned long long)rs[2].at_ms);
    it_free_resps(rs, 4);
}

/* A call waiting only for its tool's slot does not hold back a call to
 * another tool that has room. */
Test(wrap, tool_slot_wait_does_not_block_other_tools)
{
    const char *const args[] = {"--limit", "max_concurrent_calls=4", "--limit",
                                "tools.sleep.max_concurrent_calls=1", NULL};
    it_start_init(args);
    uint64_t t0 = tgh_now_ms();
    it_call(1, "sleep", "{\"ms\":1000}");
    it_call(2, "sleep", "{\"ms\":10}");
    it_call(3, "echo", "{\"text\":\"now\"}");
    it_resp_t rs[3];
    it_collect(rs, 1, 3, t0, 5000);
    mcp_assert_text(rs[2].msg, "now");
    cr_assert_lt(rs[2].at_ms, 500, "the echo waited %llu ms behind the sleep tool's queue",
                 (unsigned long long)rs[2].at_ms);
    cr_assert_geq(rs[1].at_ms, 900, "the second sleep ran before the tool's slot was free");
    it_free_resps(rs, 3);
}

Test(wrap, queued_call_deadline_refused)
{
    const char *const args[] = {"--limit", "max_concurrent_calls=1", "--limit",
                                "max_queued_calls=4", NULL};
    it_start_init(args);
    uint64_t t0 = tgh_now_ms();
    it_call(1, "sleep", "{\"ms\":1500}");
    it_send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"sleep\",\"arguments\":{\"ms\":10},\"_meta\":{\"timeout_ms\":300}}}");
    it_resp_t rs[2];
    it_collect(rs, 1, 2, t0, 5000);
    mcp_assert_denial(rs[1].msg, -32061, "concurrency_limit_exceeded");
    cr_assert(rs[1].at_ms >= 200 && rs[1].at_ms < 1300, "queued deadline refusal at %llu ms",
              (unsigned long long)rs[1].at_ms);
    mcp_assert_text(rs[0].msg, "slept 1500");
    it_free_resps(rs, 2);
    cr_assert_eq(tgh_log_count(W.log, "call "), 1, "the expired call reached the agent");
}

/* ---- timeouts ---------------------------------------------------------- */

Test(wrap, timeout_cap_cancels_agent_call)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=300ms", NULL};
    it_start_init(args);
    uint64_t t0 = tgh_now_ms();
    it_call(1, "sleep", "{\"ms\":5000}");
    json_t *r = mcp_expect_int(&W.tg, 1, 3000);
    uint64_t took = tgh_now_ms() - t0;
    json_t *data = mcp_assert_denial(r, -32062, "timeout");
    (void)data;
    cr_assert(took >= 250 && took < 2000, "timeout answered after %llu ms",
              (unsigned long long)took);
    json_decref(r);

    char agent_id[64], cancelled[128];
    it_logged_call(0, agent_id, sizeof agent_id, "sleep");
    cr_assert_eq(tgh_log_wait(W.log, "cancelled ", 1, 2000), 1, "no cancel reached the agent");
    cr_assert_eq(tgh_log_field(W.log, "cancelled ", 0, cancelled, sizeof cancelled), 0);
    cr_assert_str_eq(cancelled, agent_id, "cancel names another id than the call");
    /* DESIGN "Timeouts": a ping goes with the cancel; its pong frees the slot. */
    cr_assert_geq(tgh_log_wait(W.log, "ping ", 1, 2000), 1, "no ping followed the cancel");

    mcp_call_text(&W.tg, 2, "echo", "{\"text\":\"after\"}", "after", 3000);
}

Test(wrap, timeout_from_caller_meta)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=10s", NULL};
    it_start_init(args);
    uint64_t t0 = tgh_now_ms();
    it_send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"sleep\",\"arguments\":{\"ms\":5000},\"_meta\":{\"timeout_ms\":200}}}");
    json_t *r = mcp_expect_int(&W.tg, 1, 3000);
    uint64_t took = tgh_now_ms() - t0;
    mcp_assert_denial(r, -32062, "timeout");
    cr_assert(took >= 150 && took < 1500, "timeout answered after %llu ms",
              (unsigned long long)took);
    json_decref(r);
}

/* Deadlines live in one ordered list per agent behind one timer; a
 * shorter caller deadline goes ahead of the calls already waiting (the
 * timer is re-armed for it), and one that would walk past more than a few
 * of them gets a timer of its own. Both expire on time and the long calls
 * they overtook still complete. */
Test(wrap, mixed_deadlines_each_expire_on_time)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=10s", "--limit",
                                "max_concurrent_calls=32", NULL};
    it_start_init(args);
    char batch[8192];
    size_t off = 0;
    /* ids 1-3 long, 4 short (list head), 5-16 long, 17 short (own timer). */
    for (int i = 1; i <= 17; i++) {
        int meta = i == 4 ? 200 : i == 17 ? 300 : 0;
        off = it_batch_call(batch, sizeof batch, off, i, "sleep",
                            meta > 0 ? "{\"ms\":5000}" : "{\"ms\":1200}", meta);
    }
    uint64_t t0 = tgh_now_ms();
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[17];
    it_collect(rs, 1, 17, t0, 8000);
    mcp_assert_denial(rs[3].msg, -32062, "timeout");
    cr_assert(rs[3].at_ms >= 150 && rs[3].at_ms < 1000, "short call 4 answered at %llu ms",
              (unsigned long long)rs[3].at_ms);
    mcp_assert_denial(rs[16].msg, -32062, "timeout");
    cr_assert(rs[16].at_ms >= 250 && rs[16].at_ms < 1100, "short call 17 answered at %llu ms",
              (unsigned long long)rs[16].at_ms);
    for (int i = 0; i < 16; i++) {
        if (i == 3)
            continue;
        mcp_assert_text(rs[i].msg, "slept 1200");
        cr_assert(rs[i].at_ms >= 1100, "call %d at %llu ms", i + 1,
                  (unsigned long long)rs[i].at_ms);
    }
    it_free_resps(rs, 17);
}

/* A call timed on its own timer (its deadline far ahead of the list) and
 * then cancelled by the caller becomes a zombie with kill_grace_period to
 * prove the agent alive: its original deadline no longer counts. The agent
 * here hangs (no pong), so it is killed after the grace, not at the
 * cancelled call's old deadline. */
Test(wrap, cancelled_call_keeps_only_its_grace)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=10s", "--limit",
                                "max_concurrent_calls=32", "--limit", "kill_grace_period=2500ms",
                                NULL};
    it_start_init(args);
    char batch[8192];
    size_t off = 0;
    /* ids 1-3 short, 4-10 long: ten deadlines after call 11's, so 11 gets
     * its own timer; once 1-3 are answered only seven remain, and the
     * cancel's grace fits in the list. */
    for (int i = 1; i <= 10; i++)
        off = it_batch_call(batch, sizeof batch, off, i, "sleep",
                            i <= 3 ? "{\"ms\":100}" : "{\"ms\":6000}", 0);
    off = it_batch_call(batch, sizeof batch, off, 11, "hang", "{}", 1500);
    uint64_t t0 = tgh_now_ms();
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t early[3];
    it_collect(early, 1, 3, t0, 3000);
    for (int i = 0; i < 3; i++)
        mcp_assert_text(early[i].msg, "slept 100");
    it_free_resps(early, 3);
    it_send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
            "{\"requestId\":11,\"reason\":\"user\"}}");
    uint64_t cancelled_at = tgh_now_ms() - t0;
    cr_assert_lt(cancelled_at, 1200, "the cancel went out late (%llu ms)",
                 (unsigned long long)cancelled_at);
    /* The hung agent is killed after the grace: the long calls fail then,
     * not at the cancelled call's 1500 ms deadline. */
    it_resp_t rs[7];
    it_collect(rs, 4, 7, t0, 8000);
    for (int i = 0; i < 7; i++) {
        mcp_assert_denial(rs[i].msg, -32064, "agent_unavailable");
        cr_assert(rs[i].at_ms >= cancelled_at + 2300, "call %d failed at %llu ms (cancel at %llu)",
                  i + 4, (unsigned long long)rs[i].at_ms, (unsigned long long)cancelled_at);
    }
    it_free_resps(rs, 7);
}

Test(wrap, late_result_dropped_and_audited)
{
    const char *const args[] = {"--limit", "max_tool_call_duration=300ms", NULL};
    it_start_init(args);
    mcp_call_denied(&W.tg, 1, "slow_cancel", "{\"ms\":800}", -32062, "timeout", 3000);
    /* The agent answers at ~800 ms; the caller must never see it. */
    uint64_t deadline = tgh_now_ms() + 1200;
    json_t *jid = json_integer(1);
    while (tgh_left(deadline) > 0) {
        json_t *m = tgh_read_json(&W.tg, tgh_left(deadline), NULL);
        if (!m)
            continue;
        char *s = mcp_dump(m);
        cr_assert(!mcp_is_response_to(m, jid), "a second answer for id 1: %s", s);
        free(s);
        json_decref(m);
    }
    json_decref(jid);
    mcp_call_text(&W.tg, 2, "echo", "{\"text\":\"still here\"}", "still here", 3000);
    cr_assert_eq(it_eof_and_exit(5000), 0);
    char *audit = tgh_read_file(W.audit, NULL);
    cr_assert_not_null(audit, "no audit file at %s", W.audit);
    cr_assert_not_null(strstr(audit, "\"event\":\"call.late_result\""),
                       "no call.late_result in the audit trail");
    free(audit);
}

/* ---- frames ------------------------------------------------------------ */

static char *it_big_call(json_int_t id, size_t text_bytes, const char *fill, size_t *len)
{
    char head[160];
    int hn = snprintf(head, sizeof head,
                      "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"echo\",\"arguments\":{\"text\":\"",
                      (long long)id);
    static const char tail[] = "\"}}}\n";
    size_t n = (size_t)hn + text_bytes + sizeof tail - 1;
    char *buf = malloc(n);
    cr_assert_not_null(buf);
    memcpy(buf, head, (size_t)hn);
    size_t flen = strlen(fill);
    for (size_t i = 0; i < text_bytes; i++)
        buf[(size_t)hn + i] = fill[i % flen];
    memcpy(buf + (size_t)hn + text_bytes, tail, sizeof tail - 1);
    *len = n;
    return buf;
}

Test(wrap, frame_caller_over_cap)
{
    const char *const args[] = {"--limit", "max_frame_bytes=64Ki", NULL};
    it_start_init(args);
    size_t len;
    char *line = it_big_call(77, 1 << 20, "x", &len);
    cr_assert_eq(tgh_send(&W.tg, line, len, 5000), 0);
    free(line);
    json_t *r = mcp_expect_int(&W.tg, 77, 5000);
    json_t *data = mcp_assert_denial(r, -32063, "frame_too_large");
    cr_assert_eq(it_int(data, "cap"), 65536);
    json_decref(r);
    mcp_call_text(&W.tg, 78, "echo", "{\"text\":\"next\"}", "next", 3000);
    cr_assert_eq(tgh_log_count(W.log, "call "), 1, "the over-cap frame reached the agent");
}

Test(wrap, frame_agent_over_cap)
{
    const char *const args[] = {"--limit", "max_frame_bytes=64Ki", NULL};
    it_start_init(args);
    mcp_call_denied(&W.tg, 5, "big", "{\"bytes\":200000}", -32063, "frame_too_large", 5000);
    /* Under the cap still passes, whole. */
    it_call(6, "big", "{\"bytes\":60000}");
    json_t *r = mcp_expect_int(&W.tg, 6, 5000);
    const char *text = mcp_text_of(r);
    cr_assert_not_null(text);
    cr_assert_eq(strlen(text), 60000);
    json_decref(r);
    mcp_call_text(&W.tg, 7, "echo", "{\"text\":\"ok\"}", "ok", 3000);
}

Test(wrap, frame_memory_stays_bounded, .timeout = 30)
{
    const char *const args[] = {"--limit", "max_frame_bytes=64Ki", NULL};
    it_start_init(args);
    /* 50 MiB in one line, written in 1 MiB pieces from one buffer. */
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    cr_assert_not_null(buf);
    memset(buf, 'x', chunk);
    char head[160];
    int hn = snprintf(head, sizeof head,
                      "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"echo\",\"arguments\":{\"text\":\"");
    cr_assert_eq(tgh_send(&W.tg, head, (size_t)hn, 5000), 0);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(tgh_send(&W.tg, buf, chunk, 10000), 0, "toolgate stopped reading at %d MiB",
                     i);
    cr_assert_eq(tgh_send(&W.tg, "\"}}}\n", 5, 5000), 0);
    free(buf);
    json_t *r = mcp_expect_int(&W.tg, 99, 10000);
    mcp_assert_denial(r, -32063, "frame_too_large");
    json_decref(r);
    mcp_call_text(&W.tg, 100, "echo", "{\"text\":\"alive\"}", "alive", 3000);
    long hwm = tgh_proc_status_kb(W.tg.pid, "VmHWM");
    cr_assert_gt(hwm, 0, "cannot read VmHWM of %ld", (long)W.tg.pid);
    const char *asan = getenv("TG_ASAN");
    cr_log_info("toolgate VmHWM after a 50 MiB line: %ld KiB", hwm);
    if (!(asan && *asan == '1'))
        cr_assert_lt(hwm, 24 * 1024, "toolgate peak RSS %ld KiB for a 64Ki cap", hwm);
}

/* ---- malformed input --------------------------------------------------- */

Test(wrap, parse_error_then_continue)
{
    it_start_init(NULL);
    json_t *r = it_answer("this is not json {", "no answer to a non-JSON line");
    char *s = mcp_dump(r);
    cr_assert(json_is_null(json_object_get(r, "id")), "id must be null: %s", s);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32700,
                 "%s", s);
    free(s);
    json_decref(r);
    mcp_call_text(&W.tg, 1, "echo", "{\"text\":\"on\"}", "on", 3000);
}

/* Valid JSON that is not a request is -32600, malformed JSON -32700 (even
 * when its brackets balance), and a tools/call without an id never reaches
 * the agent unlimited. */
Test(wrap, invalid_request_codes_and_unanswerable_call)
{
    it_start_init(NULL);
    const char *lines[] = {"{\"a\" 1}", "{\"jsonrpc\":\"2.0\",\"id\":3}", "42"};
    const int codes[] = {-32700, -32600, -32600};
    for (int i = 0; i < 3; i++) {
        json_t *r = it_answer(lines[i], "no answer to %s", lines[i]);
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     codes[i], "wrong code for %s", lines[i]);
        json_decref(r);
    }
    it_send("{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
            "\"arguments\":{\"text\":\"x\"}}}");
    mcp_call_text(&W.tg, 5, "echo", "{\"text\":\"after\"}", "after", 3000);
    cr_assert_eq(tgh_log_count(W.log, "call "), 1, "a tools/call without id reached the agent");
}

Test(wrap, batch_with_call_refused)
{
    it_start_init(NULL);
    json_t *r = it_answer("[{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/call\",\"params\":"
                          "{\"name\":\"echo\",\"arguments\":{\"text\":\"a\"}}}]",
                          "no answer to a batch holding a call");
    char *s = mcp_dump(r);
    /* A single error, or a batch of errors: either must be -32600. */
    const json_t *e = json_is_array(r) ? json_array_get(r, 0) : r;
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(e, "error"), "code")), -32600,
                 "%s", s);
    free(s);
    json_decref(r);
    mcp_call_text(&W.tg, 42, "echo", "{\"text\":\"b\"}", "b", 3000);
    cr_assert_eq(tgh_log_count(W.log, "call "), 1, "the batched call reached the agent");
}

Test(wrap, batch_without_call_forwarded)
{
    it_start_init(NULL);
    json_t *r = it_answer("[{\"jsonrpc\":\"2.0\",\"id\":\"b1\",\"method\":\"ping\"},"
                          "{\"jsonrpc\":\"2.0\",\"id\":\"b2\",\"method\":\"tools/list\"}]",
                          "no answer to a batch without calls");
    char *s = mcp_dump(r);
    cr_assert(json_is_array(r) && json_array_size(r) == 2, "expected a batch of 2: %s", s);
    json_t *b1 = json_string("b1"), *b2 = json_string("b2");
    cr_assert(mcp_is_response_to(json_array_get(r, 0), b1), "%s", s);
    cr_assert(mcp_is_response_to(json_array_get(r, 1), b2), "%s", s);
    json_decref(b1), json_decref(b2);
    free(s);
    json_decref(r);
    cr_assert_eq(tgh_log_count(W.log, "ping "), 1);
}

/* Parse the audit trail; checks every line and the seq numbering. */
static json_t *it_audit_events(void)
{
    char *text = tgh_read_file(W.audit, NULL);
    cr_assert_not_null(text, "no audit file at %s", W.audit);
    json_t *events = json_array();
    json_int_t seq = 1;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        cr_assert_not_null(nl, "unterminated audit line: %.200s", line);
        *nl = '\0';
        json_error_t e;
        json_t *ev = json_loads(line, 0, &e);
        cr_assert(json_is_object(ev), "audit line is not a JSON object: %.300s", line);
        cr_assert_eq(it_int(ev, "seq"), seq, "seq gap or disorder at %.300s", line);
        cr_assert(json_is_integer(json_object_get(ev, "v")), "no v: %.300s", line);
        const char *ts = it_str(ev, "ts");
        cr_assert(strlen(ts) == 24 && ts[10] == 'T' && ts[23] == 'Z', "ts '%s'", ts);
        it_str(ev, "instance");
        it_str(ev, "event");
        json_array_append_new(events, ev);
        seq++;
        line = nl + 1;
    }
    free(text);
    return events;
}

static json_t *it_find_event(json_t *events, const char *name, size_t nth)
{
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        if (strcmp(json_string_value(json_object_get(ev, "event")), name) == 0 && nth-- == 0)
            return ev;
    }
    return NULL;
}

/* ---- agent failure ----------------------------------------------------- */

Test(wrap, crash_fails_inflight_and_restarts)
{
    pid_t first = it_start_sleeping("{\"ms\":5000}");
    uint64_t t0 = tgh_now_ms();
    it_call(2, "crash", NULL);
    it_resp_t rs[2];
    it_collect(rs, 1, 2, t0, 3000);
    mcp_assert_denial(rs[0].msg, -32064, "agent_unavailable");
    mcp_assert_denial(rs[1].msg, -32064, "agent_unavailable");
    cr_assert_lt(rs[0].at_ms, 2000, "the pending call was answered after %llu ms",
                 (unsigned long long)rs[0].at_ms);
    it_free_resps(rs, 2);
    cr_assert(tgh_pid_wait_gone(first, 2000));

    /* Calls work again once the restart backoff has passed. */
    bool ok = false;
    uint64_t deadline = tgh_now_ms() + 4000;
    for (json_int_t k = 100; !ok && tgh_left(deadline) > 0; k++) {
        it_call(k, "echo", "{\"text\":\"back\"}");
        json_t *r = mcp_expect_int(&W.tg, k, 2000);
        if (json_object_get(r, "result")) {
            mcp_assert_text(r, "back");
            ok = true;
        } else {
            mcp_assert_denial(r, -32064, "agent_unavailable");
            tgh_sleep_ms(200);
        }
        json_decref(r);
    }
    cr_assert(ok, "no call succeeded within 4 s of the crash");
    cr_assert_eq(tgh_log_count(W.log, "start "), 2);
    /* toolgate replays the handshake to the new instance itself. */
    cr_assert_eq(tgh_log_count(W.log, "initialize "), 2);
    cr_assert_eq(tgh_log_wait(W.log, "initialized", 2, 2000), 2);
    cr_assert(tgh_pid_alive(it_agent_pid(1)));

    cr_assert_eq(it_eof_and_exit(5000), 0);
    json_t *events = it_audit_events();
    json_t *exited = it_find_event(events, "agent.exited", 0);
    cr_assert_not_null(exited, "no agent.exited event");
    cr_assert_eq(it_int(json_object_get(exited, "exit"), "code"), 3);
    cr_assert_not_null(it_find_event(events, "agent.restarting", 0), "no agent.restarting event");
    cr_assert_not_null(it_find_event(events, "agent.started", 1), "no second agent.started");
    json_decref(events);
}

Test(wrap, crash_loop_gives_up)
{
    char cfg[TGH_PATH + 32];
    it_prepare_config(cfg, sizeof cfg, "{\"agents\":[{\"id\":\"x\",\"restart\":{"
                                     "\"max_restarts\":2,\"window\":\"1m\"}}]}\n");
    const char *const args[] = {"--config", cfg, NULL};
    /* The first instance runs; every restart exits at once. */
    const char *const agent_args[] = {"--log", W.log, "--crash-on-start", "2", NULL};
    int rc = tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, NULL);
    cr_assert_eq(rc, 0, "cannot start %s: %s", TG_BIN, strerror(-rc));
    json_decref(it_handshake());
    uint64_t deadline = tgh_now_ms() + 8000;
    json_int_t k = 1;
    while (tgh_wait(&W.tg, 0) != 0) {
        cr_assert(tgh_left(deadline) > 0, "toolgate still runs 8 s into a crash loop");
        (void)mcp_call(&W.tg, k++, "crash", NULL);
        uint64_t pause = tgh_now_ms() + 300;
        while (tgh_left(pause) > 0 && !W.tg.out_eof)
            free(tgh_read_line(&W.tg, tgh_left(pause), NULL));
        if (W.tg.out_eof)
            tgh_wait(&W.tg, tgh_left(deadline));
    }
    cr_assert(WIFEXITED(W.tg.status), "toolgate died of signal %d", WTERMSIG(W.tg.status));
    cr_assert_neq(WEXITSTATUS(W.tg.status), 0, "toolgate exited 0 after giving up");
    char *err = it_stderr();
    cr_assert_gt(tgh_count_lines_with(err, NULL, "restart"), 0,
                 "stderr does not mention the restart limit:\n%s", err);
    free(err);
    cr_assert_geq(tgh_log_count(W.log, "start "), 3);
}

/* ---- shutdown ---------------------------------------------------------- */

Test(wrap, caller_eof_drains_then_exits)
{
    pid_t agent = it_start_sleeping("{\"ms\":300}");
    tgh_close_stdin(&W.tg);
    json_t *r = mcp_expect_int(&W.tg, 1, 3000);
    mcp_assert_text(r, "slept 300");
    json_decref(r);
    cr_assert_eq(tgh_wait(&W.tg, 3000), 0, "toolgate did not exit after caller EOF");
    cr_assert_eq(tgh_exit_code(&W.tg), 0);
    cr_assert(tgh_pid_wait_gone(agent, 2000), "agent %ld outlived toolgate", (long)agent);
}

Test(wrap, sigterm_drains_and_refuses_new)
{
    pid_t agent = it_start_sleeping("{\"ms\":800}");
    cr_assert_eq(kill(W.tg.pid, SIGTERM), 0);
    tgh_sleep_ms(100);
    it_call(2, "echo", "{\"text\":\"late\"}");
    json_t *others = json_array();
    json_t *jid = json_integer(2);
    json_t *r = mcp_expect(&W.tg, jid, 2000, others);
    mcp_assert_denial(r, -32068, "shutting_down");
    json_decref(r);
    json_decref(jid);
    jid = json_integer(1);
    r = it_take(others, jid, 3000);
    mcp_assert_text(r, "slept 800");
    json_decref(r);
    json_decref(jid);
    json_decref(others);
    /* toolgate closes stdout itself: the caller's stdin stays open. */
    uint64_t deadline = tgh_now_ms() + 3000;
    while (tgh_wait(&W.tg, 0) != 0) {
        cr_assert(tgh_left(deadline) > 0, "toolgate did not exit after SIGTERM");
        free(tgh_read_line(&W.tg, 20, NULL));
    }
    cr_assert_eq(tgh_exit_code(&W.tg), 0);
    cr_assert(tgh_pid_wait_gone(agent, 2000), "agent %ld outlived toolgate", (long)agent);
}

Test(wrap, hung_agent_killed_after_grace)
{
    const char *const args[] = {"--limit", "kill_grace_period=500ms", NULL};
    it_start_init(args);
    it_call(1, "hang", "{\"ignore_term\":true}");
    char id[64];
    it_logged_call(0, id, sizeof id, "hang");
    pid_t agent = it_agent_pid(0);
    uint64_t t0 = tgh_now_ms();
    (void)it_eof_and_exit(4000);
    uint64_t took = tgh_now_ms() - t0;
    cr_assert_lt(took, 4000, "toolgate took %llu ms to stop", (unsigned long long)took);
    cr_assert(tgh_pid_wait_gone(agent, 1000), "the hung agent %ld was not killed", (long)agent);
    /* It ignored SIGTERM, so only SIGKILL can have ended it. */
    json_t *events = it_audit_events();
    json_t *exited = it_find_event(events, "agent.exited", 0);
    cr_assert_not_null(exited, "no agent.exited event");
    cr_assert_eq(it_int(json_object_get(exited, "exit"), "signal"), SIGKILL);
    /* Stopped by toolgate's own stop steps: not a crash (issue 12, item 24). */
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(exited, "exit"), "reason")),
                     "stopped");
    json_decref(events);
}

/* ---- agent stderr ------------------------------------------------------ */

/* Longest line of <text>. */
static size_t it_longest_line(const char *text)
{
    size_t best = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > best)
            best = len;
        line = nl ? nl + 1 : NULL;
    }
    return best;
}

Test(wrap, stderr_flood_is_rate_limited)
{
    it_start_init(NULL);
    mcp_call_text(&W.tg, 1, "stderr", "{\"bytes\":5000000,\"line_len\":100}", "written", 10000);
    cr_assert_eq(it_eof_and_exit(5000), 0);
    uint64_t secs = (tgh_now_ms() - W.started_ms + 999) / 1000;
    size_t len = 0;
    char *err = tgh_read_file(W.err, &len);
    cr_assert_not_null(err);
    size_t bound = 65536 * (secs + 1) + 16384;
    cr_assert_lt(len, bound, "%zu bytes of stderr in %llu s (bound %zu)", len,
                 (unsigned long long)secs, bound);
    cr_assert_gt(tgh_count_lines_with(err, NULL, "xxxxxxxxxxxxxxxxxxxx"), 10,
                 "agent stderr was not passed through");
    cr_assert_gt(tgh_own_lines_with(err, "drop"), 0,
                 "toolgate did not report the dropped stderr bytes");
    cr_assert_leq(it_longest_line(err), 4096 + 256);
    free(err);
}

Test(wrap, stderr_long_lines_cut)
{
    it_start_init(NULL);
    mcp_call_text(&W.tg, 1, "stderr", "{\"bytes\":60000,\"line_len\":20000}", "written", 5000);
    cr_assert_eq(it_eof_and_exit(5000), 0);
    char *err = tgh_read_file(W.err, NULL);
    cr_assert_not_null(err);
    size_t longest = it_longest_line(err);
    cr_assert_leq(longest, 4096 + 256, "a stderr line of %zu bytes", longest);
    char run[1001];
    memset(run, 'x', 1000);
    run[1000] = '\0';
    cr_assert_not_null(strstr(err, run), "agent stderr was not passed through");
    free(err);
}

/* ---- audit ------------------------------------------------------------- */

Test(wrap, audit_trail)
{
    const char *const args[] = {"--limit", "tools.echo.rate_limit=2/second", "--limit",
                                "max_tool_call_duration=300ms", NULL};
    it_start_init(args);
    char batch[1024];
    size_t off = 0;
    for (int i = 1; i <= 3; i++)
        off = it_batch_call(batch, sizeof batch, off, i, "echo", "{\"text\":\"a\"}", 0);
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[3];
    it_collect(rs, 1, 3, tgh_now_ms(), 3000);
    mcp_assert_denial(rs[2].msg, -32060, "rate_limit_exceeded");
    it_free_resps(rs, 3);
    mcp_call_denied(&W.tg, 4, "sleep", "{\"ms\":3000}", -32062, "timeout", 3000);
    cr_assert_eq(it_eof_and_exit(5000), 0);

    json_t *events = it_audit_events();
    cr_assert_gt(json_array_size(events), 0);
    cr_assert_str_eq(it_str(json_array_get(events, 0), "event"), "router.started");
    cr_assert_not_null(it_find_event(events, "agent.started", 0));
    json_t *done = it_find_event(events, "call.completed", 1);
    cr_assert_not_null(done, "fewer than two call.completed events");
    cr_assert_str_eq(it_str(done, "agent"), IT_AGENT);
    cr_assert_str_eq(it_str(done, "tool"), "echo");
    json_t *denied = it_find_event(events, "call.denied", 0);
    cr_assert_not_null(denied, "no call.denied event");
    json_t *limit = json_object_get(denied, "limit");
    cr_assert(json_is_object(limit), "call.denied without limit");
    cr_assert_str_eq(it_str(limit, "type"), "rate");
    cr_assert_str_eq(it_str(limit, "scope"), "tool");
    cr_assert_eq(it_int(limit, "observed"), 3);
    cr_assert_eq(it_int(limit, "cap"), 2);
    cr_assert_not_null(it_find_event(events, "call.timeout", 0), "no call.timeout event");
    cr_assert_not_null(it_find_event(events, "router.stopping", 0), "no router.stopping event");
    json_decref(events);
}

Test(wrap, canary_never_leaks)
{
    const char *const args[] = {"--limit", "tools.echo.rate_limit=2/second", "--limit",
                                "max_frame_bytes=64Ki", NULL};
    const char *const env[] = {"TG_CANARY_ENV=" IT_CANARY, NULL};
    it_start(args, NULL, env);
    json_decref(it_handshake());

    /* In arguments and in the result. */
    it_call(1, "echo", "{\"text\":\"" IT_CANARY "\"}");
    json_t *r = mcp_expect_int(&W.tg, 1, 3000);
    mcp_assert_text(r, IT_CANARY);
    json_decref(r);
    /* In the agent's environment (inherited from toolgate's). */
    mcp_call_text(&W.tg, 2, "env", "{\"name\":\"TG_CANARY_ENV\"}", IT_CANARY, 3000);
    /* In agent stderr. */
    it_call(3, "stderr", "{\"text\":\"" IT_CANARY "\",\"bytes\":200,\"line_len\":50}");
    r = mcp_expect_int(&W.tg, 3, 3000);
    json_decref(r);
    /* In the arguments of refused calls: rate, timeout, frame. */
    it_call(4, "echo", "{\"text\":\"" IT_CANARY "\"}");
    it_call(5, "echo", "{\"text\":\"" IT_CANARY "\"}");
    it_resp_t rs[2];
    it_collect(rs, 4, 2, tgh_now_ms(), 3000);
    int denied = 0;
    for (int i = 0; i < 2; i++) {
        char *s = mcp_dump(rs[i].msg);
        if (json_object_get(rs[i].msg, "error")) {
            denied++;
            cr_assert(!it_has_canary(rs[i].msg), "denial repeats the arguments: %s", s);
        }
        free(s);
    }
    cr_assert_geq(denied, 1, "the echo rate limit did not refuse");
    it_free_resps(rs, 2);
    it_send("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"sleep\",\"arguments\":{\"ms\":3000,\"note\":\"" IT_CANARY "\"},"
            "\"_meta\":{\"timeout_ms\":100}}}");
    r = mcp_expect_int(&W.tg, 6, 3000);
    mcp_assert_denial(r, -32062, "timeout");
    json_decref(r);
    size_t len;
    char *line = it_big_call(7, 100000, IT_CANARY " ", &len);
    cr_assert_eq(tgh_send(&W.tg, line, len, 5000), 0);
    free(line);
    r = mcp_expect_int(&W.tg, 7, 3000);
    char *s = mcp_dump(r);
    cr_assert(!it_has_canary(r), "frame denial repeats the frame: %s", s);
    free(s);
    json_decref(r);
    /* In a line that is not JSON, an unsafe tool name and an unsafe id. */
    r = it_answer("not json " IT_CANARY, "no answer to a line that is not JSON");
    s = mcp_dump(r);
    cr_assert(!it_has_canary(r), "parse error repeats the line: %s", s);
    free(s);
    json_decref(r);
    it_send("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"bad name " IT_CANARY "\",\"arguments\":{}}}");
    r = mcp_expect_int(&W.tg, 8, 3000);
    json_decref(r);
    it_send("{\"jsonrpc\":\"2.0\",\"id\":\"" IT_CANARY "!\",\"method\":\"tools/call\","
            "\"params\":{\"name\":\"env\",\"arguments\":{\"name\":\"X_NONE\"}}}");
    json_t *jid = json_string(IT_CANARY "!");
    r = mcp_expect(&W.tg, jid, 3000, NULL);
    json_decref(jid);
    json_decref(r);

    cr_assert_eq(it_eof_and_exit(5000), 0);
    char *audit = tgh_read_file(W.audit, NULL);
    cr_assert_not_null(audit, "no audit file");
    cr_assert_gt(strlen(audit), 0);
    cr_assert_null(strstr(audit, IT_CANARY), "the canary is in the audit trail");
    cr_assert_null(strstr(audit, "CANARY"), "part of the canary is in the audit trail");
    free(audit);
    char *err = it_stderr();
    cr_assert_eq(tgh_own_lines_with(err, IT_CANARY), 0,
                 "the canary is in toolgate's own log lines");
    free(err);
}

/* ---- the benchmark echo agent ------------------------------------------ */

TestSuite(echo_agent, .fini = it_fini, .timeout = 20);

/* params of a tools/call whose text argument is <n> bytes of <c>. */
static char *it_echo_line(json_int_t id, size_t n, char c, size_t *len)
{
    char fill[2] = {c, '\0'};
    return it_big_call(id, n, fill, len);
}

Test(echo_agent, splices_id_and_params)
{
    static tgh_proc_t p;
    char *const argv[] = {(char *)TG_AGENTS_DIR "/tg_echo_agent", NULL};
    cr_assert_eq(tgh_spawn(&p, argv, NULL, NULL), 0);
    static const char lines[] =
        "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"method\":\"a\",\"params\":{\"a\":[1,{\"id\":2}],"
        "\"s\":\"}\\\"]\"}}\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        "{\"id\":5}\n"
        "  {\"params\" : [1,2] , \"id\" : 7 }\n";
    cr_assert_eq(tgh_send(&p, lines, sizeof lines - 1, 3000), 0);
    json_t *r = tgh_read_json(&p, 3000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "x\"y");
    json_t *want = json_pack("{s:[i,{s:i}], s:s}", "a", 1, "id", 2, "s", "}\"]");
    cr_assert(json_equal(json_object_get(r, "result"), want));
    json_decref(want);
    json_decref(r);
    /* The notification got no answer: the next one is for id 5. */
    r = tgh_read_json(&p, 3000, NULL);
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 5);
    cr_assert(json_is_object(json_object_get(r, "result")));
    cr_assert_eq(json_object_size(json_object_get(r, "result")), 0);
    json_decref(r);
    r = tgh_read_json(&p, 3000, NULL);
    cr_assert_eq(json_integer_value(json_object_get(r, "id")), 7);
    cr_assert_eq(json_array_size(json_object_get(r, "result")), 2);
    json_decref(r);

    /* A 3 MiB line, then 500 pipelined calls in one write. */
    size_t len;
    char *big = it_echo_line(8, 3u << 20, 'q', &len);
    cr_assert_eq(tgh_send(&p, big, len, 5000), 0);
    free(big);
    r = mcp_await_int(&p, 8, 5000, NULL);
    cr_assert_not_null(r);
    const char *text = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "result"), "arguments"), "text"));
    cr_assert_not_null(text);
    cr_assert_eq(strlen(text), 3u << 20);
    json_decref(r);
    size_t cap = 500 * 128, off = 0;
    char *many = malloc(cap);
    cr_assert_not_null(many);
    for (int i = 0; i < 500; i++)
        off += (size_t)snprintf(many + off, cap - off,
                                "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", 1000 + i);
    cr_assert_eq(tgh_send(&p, many, off, 5000), 0);
    free(many);
    for (int i = 0; i < 500; i++) {
        r = tgh_read_json(&p, 3000, NULL);
        cr_assert_not_null(r, "answer %d missing", i);
        cr_assert_eq(json_integer_value(json_object_get(r, "id")), 1000 + i);
        json_decref(r);
    }
    tgh_close_stdin(&p);
    cr_assert_eq(tgh_wait(&p, 3000), 0);
    cr_assert_eq(tgh_exit_code(&p), 0);
}

Test(echo_agent, large_frames_through_toolgate)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    int rc = tgh_wrap_exec(&W, NULL, TG_AGENTS_DIR "/tg_echo_agent", NULL, NULL);
    cr_assert_eq(rc, 0, "cannot start %s: %s", TG_BIN, strerror(-rc));
    json_decref(it_handshake());
    /* 2 MiB is under the default 4 MiB cap: it passes whole, both ways. */
    size_t len;
    char *big = it_echo_line(1, 2u << 20, 'z', &len);
    cr_assert_eq(tgh_send(&W.tg, big, len, 5000), 0);
    free(big);
    json_t *r = mcp_expect_int(&W.tg, 1, 5000);
    const char *text = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "result"), "arguments"), "text"));
    cr_assert_not_null(text, "no echoed params");
    cr_assert_eq(strlen(text), 2u << 20);
    json_decref(r);
    /* Pipelined calls keep their ids (default concurrency 3, queue 16). */
    char batch[16 * 160];
    size_t off = 0;
    for (int i = 0; i < 16; i++) {
        char a[32];
        snprintf(a, sizeof a, "{\"n\":%d}", i);
        off = it_batch_call(batch, sizeof batch, off, 100 + i, "t", a, 0);
    }
    cr_assert_eq(tgh_send(&W.tg, batch, off, 3000), 0);
    it_resp_t rs[16];
    it_collect(rs, 100, 16, tgh_now_ms(), 5000);
    for (int i = 0; i < 16; i++) {
        json_t *args = json_object_get(json_object_get(rs[i].msg, "result"), "arguments");
        cr_assert_eq(it_int(args, "n"), i, "call %d got another call's answer", i);
    }
    it_free_resps(rs, 16);
}

/* stderr.max_line is honoured above the 4 KiB default (up to its ceiling). */
Test(wrap, stderr_max_line_configurable)
{
    char cfg[TGH_PATH + 32];
    it_prepare_config(cfg, sizeof cfg, "{\"agents\":[{\"id\":\"fx\",\"stderr\":{"
                                     "\"max_line\":\"16Ki\"}}]}\n");
    const char *const args[] = {"--config", cfg, NULL};
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, NULL), 0);
    json_decref(it_handshake());
    mcp_call_text(&W.tg, 1, "stderr", "{\"bytes\":30000,\"line_len\":10000}", "written", 5000);
    cr_assert_eq(it_eof_and_exit(5000), 0);
    char *err = tgh_read_file(W.err, NULL);
    cr_assert_not_null(err);
    size_t longest = it_longest_line(err);
    /* line_len counts the newline: 9999 bytes of text. */
    cr_assert_geq(longest, 9999, "a 9999-byte line was cut to %zu under max_line 16Ki", longest);
    cr_assert_leq(longest, 16384 + 256);
    free(err);
}

/* ---- containment --------------------------------------------------------- */

/* --limit memory=64Mi: the agent runs in a memory cgroup (or under the RSS
 * monitor), a call that makes it allocate past the limit gets
 * resource_limit_exceeded naming memory, the kill is audited, and the
 * restarted agent answers again. agent.started says what was enforced. */
Test(wrap, memory_limit_kills_and_names_the_resource, .timeout = 30)
{
    const char *const args[] = {"--limit", "memory=64Mi", NULL};
    it_start_init(args);
    it_call(1, "alloc", "{\"mib\":200}");
    json_t *r = mcp_expect_int(&W.tg, 1, 10000);
    cr_assert_not_null(r, "no answer to the call that broke the memory limit");
    mcp_assert_denial(r, -32065, "resource_limit_exceeded");
    json_t *data = json_object_get(json_object_get(r, "error"), "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "limit")), "memory");
    cr_assert_eq(json_integer_value(json_object_get(data, "cap")), 64 << 20);
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")),
                     "agents.tg_fixture_agent.resources.memory.limit");
    json_decref(r);

    bool ok = false;
    uint64_t deadline = tgh_now_ms() + 5000;
    for (json_int_t k = 100; !ok && tgh_left(deadline) > 0; k++) {
        it_call(k, "echo", "{\"text\":\"back\"}");
        json_t *e = mcp_expect_int(&W.tg, k, 2000);
        ok = e != NULL && json_object_get(e, "result") != NULL;
        json_decref(e);
        if (!ok)
            tgh_sleep_ms(200);
    }
    cr_assert(ok, "the agent did not come back after the memory kill");
    cr_assert_eq(it_eof_and_exit(5000), 0);

    json_t *events = it_audit_events();
    json_t *started = it_find_event(events, "agent.started", 0);
    cr_assert_not_null(started);
    json_t *mem = json_object_get(json_object_get(started, "enforced"), "memory");
    cr_assert_not_null(mem, "agent.started has no enforced.memory");
    cr_assert_eq(json_integer_value(json_object_get(mem, "requested")), 64 << 20);
    cr_assert(json_is_true(json_object_get(mem, "applied")), "memory was not enforced");
    json_t *killed = it_find_event(events, "agent.killed", 0);
    cr_assert_not_null(killed, "no agent.killed event");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(killed, "limit"), "type")),
                     "memory");
    json_decref(events);
}

/* ---- admin endpoint ------------------------------------------------------ */

/* GET <path> from the admin endpoint at 127.0.0.1:<port>; the body, heap. */
static char *it_http_get(int port, const char *path)
{
    int fd = tgh_tcp_dial(port);
    if (fd < 0)
        return NULL;
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t len = 0;
    char *buf = tgh_read_all(fd, &len);
    close(fd);
    return buf;
}

/* --admin serves the registry and the metrics of the running proxy. */
Test(wrap, admin_endpoint_metrics_and_limits)
{
    int port = tgh_free_port();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *const args[] = {"--admin", addr, "--limit", "rate_limit=2/second", NULL};
    it_start_init(args);
    for (int i = 1; i <= 3; i++)
        it_call(i, "echo", "{\"text\":\"CANARY-ADMIN-77\"}");
    /* The denial comes first: read the three answers in any order. */
    for (int i = 1; i <= 3; i++) {
        json_t *r = tgh_read_json(&W.tg, 3000, NULL);
        cr_assert_not_null(r, "answer %d of 3 missing", i);
        json_decref(r);
    }
    char *m = it_http_get(port, "/metrics");
    cr_assert_not_null(m, "no admin endpoint on %s", addr);
    cr_assert(strstr(m, "toolgate_calls_total{agent=\"tg_fixture_agent\",tool=\"other\",outcome=\"ok\"} 2"),
              "calls not counted:\n%s", m);
    cr_assert(strstr(m, "toolgate_denials_total{code=\"rate_limit_exceeded\"} 1"), "denial not counted");
    cr_assert(strstr(m, "CANARY-ADMIN") == NULL, "call arguments reached /metrics");
    free(m);
    char *l = it_http_get(port, "/limits");
    cr_assert(l && strstr(l, "agent.tg_fixture_agent.rate"), "/limits lacks the rate limit");
    free(l);
    cr_assert_eq(it_eof_and_exit(5000), 0);
}

/* containment.min_free_memory: an instance is not started while free
 * memory is below the floor plus the P95 of the agent's recorded peaks;
 * an instance's peak is recorded when it ends. */
Test(wrap, preflight_memory_refuses_and_peaks_are_recorded)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char state[TGH_PATH + 32], env0[TGH_PATH + 64], peaks[TGH_PATH + 64];
    snprintf(state, sizeof state, "%s/state", W.dir);
    snprintf(env0, sizeof env0, "XDG_STATE_HOME=%s", state);
    snprintf(peaks, sizeof peaks, "%s/toolgate/peaks.json", state);
    const char *const env[] = {env0, NULL};
    /* A normal run records the instance's peak. */
    const char *const agent_args[] = {"--log", W.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, NULL, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, env), 0);
    json_decref(it_handshake());
    cr_assert_eq(it_eof_and_exit(5000), 0);
    char *text = tgh_read_file(peaks, NULL);
    cr_assert(text && strstr(text, "\"tg_fixture_agent\":["), "no peak recorded in %s", peaks);
    free(text);
    /* ... and agent.exited carries it. */
    text = tgh_read_file(W.audit, NULL);
    const char *ex = text ? strstr(text, "\"event\":\"agent.exited\"") : NULL;
    cr_assert_not_null(ex, "no agent.exited");
    const char *eol = strchr(ex, '\n'), *pk = strstr(ex, "\"memory_peak_bytes\":");
    cr_assert(pk != NULL && (eol == NULL || pk < eol), "agent.exited has no peak memory");
    free(text);

    /* A floor no host has: the agent is not started, the reason is said. */
    tgh_cleanup();
    char cfg[TGH_PATH + 32];
    it_prepare_config(cfg, sizeof cfg, "{\"containment\":{\"min_free_memory\":\"900Ti\"}}\n");
    const char *const args[] = {"--config", cfg, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, env), 0);
    cr_assert_eq(tgh_wait(&W.tg, 5000), 0, "toolgate did not exit");
    cr_assert_neq(tgh_exit_code(&W.tg), 0);
    char *err = it_stderr();
    cr_assert(strstr(err, "min_free_memory"), "no pre-flight message:\n%s", err);
    free(err);
    cr_assert_eq(tgh_log_count(W.log, "start "), 0, "the agent started anyway");
}

/* Issue 12, item 17: an agent that closes its stdout and lives on is a
 * failed instance: its call is answered at once (not at its deadline),
 * it is killed and restarted, and nothing more is written into it. */
Test(wrap, agent_closing_stdout_fails_at_once)
{
    pid_t first = it_start_sleeping("{\"ms\":60000}");
    uint64_t t0 = tgh_now_ms();
    it_call(2, "mute", NULL);
    it_resp_t rs[2];
    it_collect(rs, 1, 2, t0, 5000);
    mcp_assert_denial(rs[0].msg, -32064, "agent_unavailable");
    mcp_assert_denial(rs[1].msg, -32064, "agent_unavailable");
    cr_assert_lt(rs[1].at_ms, 3000, "the muted agent's call was answered after %llu ms",
                 (unsigned long long)rs[1].at_ms);
    it_free_resps(rs, 2);
    cr_assert(tgh_pid_wait_gone(first, 2000), "the muted agent still runs");
    cr_assert_eq(it_eof_and_exit(5000), 0);
    json_t *events = it_audit_events();
    json_t *killed = it_find_event(events, "agent.killed", 0);
    cr_assert_not_null(killed, "no agent.killed event");
    cr_assert_str_eq(json_string_value(json_object_get(killed, "reason")), "stdout_closed");
    json_t *exited = it_find_event(events, "agent.exited", 0);
    cr_assert_not_null(exited);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(exited, "exit"), "reason")),
                     "killed");
    json_decref(events);
}
