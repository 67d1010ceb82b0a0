/* Audit: the encoder's exact output and secret-freedom, and the file sink's
 * seq, loss accounting, queue bounds and shutdown. */
#include "audit/audit.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/tg_audit.h"
#include "tests/tg_harness.h"

#define TS_EXAMPLE 1795646901123LL /* 2026-11-25T22:48:21.123Z */

static tg_audit_ev_t full_event(void)
{
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "call.completed";
    ev.request_id = "tg-0000000000000001";
    ev.correlation_id = "corr-7";
    ev.call_id = "42";
    ev.agent = "search";
    ev.tool = "web";
    ev.caller = "ci-bot";
    ev.front = "http";
    ev.session = "0123456789abcdef";
    ev.remote = "[::1]:5123";
    ev.status = "error";
    ev.code = "rate_limit_exceeded";
    ev.stage = "timed_out";
    ev.reason = "deadline";
    ev.key = "agents[0].tools.web";
    ev.limit.type = "rate";
    ev.limit.scope = "tool";
    ev.limit.name = "agents.search.tools.web.rate_limit";
    ev.limit.observed = 11;
    ev.limit.cap = 10;
    ev.duration_ms = 1500;
    ev.bytes_in = 123;
    ev.bytes_out = 0;
    ev.retry_after_ms = 6000;
    ev.count = 3;
    ev.pid = 4242;
    ev.attempt = 2;
    ev.backoff_ms = 200;
    ev.exit.code = 1;
    ev.exit.signal = 9;
    ev.exit.reason = "killed";
    return ev;
}

static const char FULL_LINE[] =
    "{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":42,\"instance\":\"host-a\","
    "\"event\":\"call.completed\",\"request_id\":\"tg-0000000000000001\","
    "\"correlation_id\":\"corr-7\",\"call_id\":\"42\",\"agent\":\"search\",\"tool\":\"web\","
    "\"caller\":\"ci-bot\",\"front\":\"http\",\"session\":\"0123456789abcdef\","
    "\"remote\":\"[::1]:5123\",\"status\":\"error\",\"code\":\"rate_limit_exceeded\","
    "\"stage\":\"timed_out\",\"reason\":\"deadline\",\"key\":\"agents[0].tools.web\","
    "\"limit\":{\"type\":\"rate\","
    "\"scope\":\"tool\",\"name\":\"agents.search.tools.web.rate_limit\",\"observed\":11,"
    "\"cap\":10},\"duration_ms\":1500,\"bytes_in\":123,\"bytes_out\":0,"
    "\"retry_after_ms\":6000,\"count\":3,\"pid\":4242,\"attempt\":2,\"backoff_ms\":200,"
    "\"exit\":{\"code\":1,\"signal\":9,\"reason\":\"killed\"}}\n";

/* Encode <ev> into a NUL-terminated string; asserts success. */
static void encode_ok(char *out, size_t cap, const tg_audit_ev_t *ev, uint64_t seq, int64_t ts)
{
    long n = tg_audit_encode(out, cap - 1, ev, seq, ts, "host-a");
    cr_assert_gt(n, 0, "encode failed: %ld", n);
    out[n] = '\0';
}

/* Parse one encoded line (without its '\n') with jansson. */
static json_t *parse_line(const char *line, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    cr_assert_not_null(j, "line does not parse: %s: %.*s", je.text, (int)len, line);
    return j;
}

Test(audit_encode, full_event_exact)
{
    char out[TG_AUDIT_LINE_MAX];
    tg_audit_ev_t ev = full_event();

    long n = tg_audit_encode(out, sizeof(out), &ev, 42, TS_EXAMPLE, "host-a");
    cr_assert_eq(n, (long)strlen(FULL_LINE));
    cr_assert_eq(memcmp(out, FULL_LINE, (size_t)n), 0, "got %.*s", (int)n, out);
    json_decref(parse_line(out, (size_t)n - 1));
}

Test(audit_encode, minimal_event_exact)
{
    char out[256];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "router.started";
    encode_ok(out, sizeof(out), &ev, 1, TS_EXAMPLE);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,"
                          "\"instance\":\"host-a\",\"event\":\"router.started\"}\n");
}

Test(audit_encode, nested_objects_omit_absent_members)
{
    char out[512];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "agent.exited";
    ev.limit.type = "memory";
    ev.limit.cap = 536870912;
    ev.exit.signal = 9;
    ev.exit.reason = "killed";
    encode_ok(out, sizeof(out), &ev, 7, 0);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\",\"seq\":7,"
                          "\"instance\":\"host-a\",\"event\":\"agent.exited\","
                          "\"limit\":{\"type\":\"memory\",\"cap\":536870912},"
                          "\"exit\":{\"signal\":9,\"reason\":\"killed\"}}\n");

    ev.limit.type = NULL; /* no type: no limit object, whatever else is set */
    ev.exit.signal = TG_AUDIT_ABSENT;
    ev.exit.code = 0;
    ev.exit.reason = "exited";
    encode_ok(out, sizeof(out), &ev, 8, 0);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\",\"seq\":8,"
                          "\"instance\":\"host-a\",\"event\":\"agent.exited\","
                          "\"exit\":{\"code\":0,\"reason\":\"exited\"}}\n");

    ev.exit.code = TG_AUDIT_ABSENT;
    encode_ok(out, sizeof(out), &ev, 9, 0);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\",\"seq\":9,"
                          "\"instance\":\"host-a\",\"event\":\"agent.exited\","
                          "\"exit\":{\"reason\":\"exited\"}}\n");
}

Test(audit_encode, number_extremes)
{
    char out[512];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "e";
    ev.count = INT64_MAX;
    ev.pid = INT64_MIN + 1; /* INT64_MIN itself means absent */
    ev.attempt = -1;
    encode_ok(out, sizeof(out), &ev, UINT64_MAX, 0);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\","
                          "\"seq\":18446744073709551615,\"instance\":\"host-a\",\"event\":\"e\","
                          "\"count\":9223372036854775807,\"pid\":-9223372036854775807,"
                          "\"attempt\":-1}\n");
}

/* The "ts" value of a line encoded at <ts_ms>. */
static void ts_of(char *ts, int64_t ts_ms)
{
    char out[256];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "e";
    encode_ok(out, sizeof(out), &ev, 1, ts_ms);
    const char *p = strstr(out, "\"ts\":\"");
    cr_assert_not_null(p);
    memcpy(ts, p + 6, 24);
    ts[24] = '\0';
}

Test(audit_encode, timestamps)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {-1, "1969-12-31T23:59:59.999Z"},
        {951782400000LL, "2000-02-29T00:00:00.000Z"},
        {951868799999LL, "2000-02-29T23:59:59.999Z"},
        {4107542400000LL, "2100-03-01T00:00:00.000Z"}, /* 2100 is not a leap year */
        {-62167219200000LL, "0000-01-01T00:00:00.000Z"},
        {253402300799999LL, "9999-12-31T23:59:59.999Z"},
        {TS_EXAMPLE, "2026-11-25T22:48:21.123Z"},
        /* The encoder formats each second once and then only the
         * milliseconds: within a second, across one, and back. */
        {TS_EXAMPLE + 876, "2026-11-25T22:48:21.999Z"},
        {TS_EXAMPLE + 877, "2026-11-25T22:48:22.000Z"},
        {TS_EXAMPLE - 1, "2026-11-25T22:48:21.122Z"},
        {TS_EXAMPLE - 124, "2026-11-25T22:48:20.999Z"},
        {-1000, "1969-12-31T23:59:59.000Z"},
        {-1001, "1969-12-31T23:59:58.999Z"},
    };
    char ts[25];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ts_of(ts, cases[i].ms);
        cr_assert_str_eq(ts, cases[i].want, "ms %lld", (long long)cases[i].ms);
    }

    /* Every 1000003 s (~11.6 days, drifting through the time of day) from
     * 1901 to 2100 agrees with gmtime_r. */
    for (int64_t s = -2177452800LL; s < 4102444800LL; s += 1000003) {
        struct tm tm;
        time_t t = (time_t)s;
        char want[32];
        gmtime_r(&t, &tm);
        strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S.042Z", &tm);
        ts_of(ts, s * 1000 + 42);
        cr_assert_str_eq(ts, want);
    }
}

Test(audit_encode, rejects_what_it_cannot_write)
{
    char out[256];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, 0, "host-a"), -EINVAL); /* no event */
    ev.event = "e";
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, 0, NULL), -EINVAL);
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, -62167219200001LL, "h"), -EINVAL);
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, 253402300800000LL, "h"), -EINVAL);
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, INT64_MIN, "h"), -EINVAL);
    cr_assert_eq(tg_audit_encode(out, sizeof(out), &ev, 1, INT64_MAX, "h"), -EINVAL);
}

Test(audit_encode, enospc_never_leaves_a_line)
{
    char out[TG_AUDIT_LINE_MAX];
    tg_audit_ev_t ev = full_event();
    size_t len = strlen(FULL_LINE);

    for (size_t cap = 0; cap < len; cap++) {
        memset(out, '#', sizeof(out));
        cr_assert_eq(tg_audit_encode(out, cap, &ev, 42, TS_EXAMPLE, "host-a"), -ENOSPC,
                     "cap %zu", cap);
        cr_assert_null(memchr(out, '\n', cap), "cap %zu: a newline was written", cap);
        for (size_t i = cap; i < sizeof(out); i++)
            cr_assert_eq(out[i], '#', "cap %zu: byte %zu past the cap was touched", cap, i);
    }
    cr_assert_eq(tg_audit_encode(NULL, 0, &ev, 42, TS_EXAMPLE, "host-a"), -ENOSPC);
    cr_assert_eq(tg_audit_encode(out, len, &ev, 42, TS_EXAMPLE, "host-a"), (long)len);
    cr_assert_eq(memcmp(out, FULL_LINE, len), 0);
}

Test(audit_encode, safe_str_table)
{
    char s129[130], s128[129];

    memset(s129, 'a', 129);
    s129[129] = '\0';
    memcpy(s128, s129, 128);
    s128[128] = '\0';

    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"abcxyz", true},
        {"ABCXYZ", true},
        {"0123456789", true},
        {".", true},
        {"_", true},
        {":", true},
        {"@", true},
        {"/", true},
        {"-", true},
        {"req-42:a.b_c@host/x", true},
        {"", false},
        {"a b", false},
        {"a\"b", false},
        {"a'b", false},
        {"a\nb", false},
        {"a\tb", false},
        {"a\\b", false},
        {"a=b", false},
        {"a+b", false},
        {"a~b", false},
        {"a%b", false},
        {"a,b", false},
        {"{}", false},
        {"caf\xc3\xa9", false},
        {"a\x7f", false},
        {"a\x01", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_assert_eq(tg_audit_safe_str(cases[i].s, strlen(cases[i].s)), cases[i].ok, "case %zu",
                     i);

    cr_assert(tg_audit_safe_str(s128, 128));
    cr_assert_not(tg_audit_safe_str(s129, 129));
    cr_assert_not(tg_audit_safe_str("a\0b", 3)); /* an embedded NUL is not in the class */
    cr_assert_not(tg_audit_safe_str(NULL, 0));

    /* Exactly the 66 bytes of the class pass, alone. */
    int n = 0;
    for (int c = 1; c < 256; c++) {
        char b = (char)c;
        n += tg_audit_safe_str(&b, 1);
    }
    cr_assert_eq(n, 26 + 26 + 10 + 6);
}

Test(audit_encode, config_names_are_escaped)
{
    char out[512];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "agent.started";
    /* quote, backslash, controls, DEL, é, a stray byte, a cut 3-byte sequence */
    ev.agent = "a\"b\\c\x01\n\t\x1f\x7f" "caf\xc3\xa9\xff\xe2\x82";
    encode_ok(out, sizeof(out), &ev, 1, 0);
    cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\",\"seq\":1,"
                          "\"instance\":\"host-a\",\"event\":\"agent.started\","
                          "\"agent\":\"a\\\"b\\\\c\\u0001\\n\\t\\u001f\\u007f"
                          "caf\xc3\xa9\\ufffd\\ufffd\\ufffd\"}\n");

    json_t *j = parse_line(out, strlen(out) - 1);
    cr_assert_str_eq(json_string_value(json_object_get(j, "agent")),
                     "a\"b\\c\x01\n\t\x1f\x7f" "caf\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(j);

    /* Overlongs, surrogates and code points past U+10FFFF are not UTF-8;
     * a 4-byte character is. */
    ev.agent = "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xf0\x9f\x98\x80";
    encode_ok(out, sizeof(out), &ev, 1, 0);
    cr_assert_not_null(strstr(out, "\"agent\":\"\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|"
                                   "\\ufffd\\ufffd\\ufffd\\ufffd|\xf0\x9f\x98\x80\""),
                       "%s", out);
    json_decref(parse_line(out, strlen(out) - 1));
}

Test(audit_encode, unsafe_caller_strings_become_invalid)
{
    char out[512];
    char long_id[130];
    tg_audit_ev_t ev;

    memset(long_id, 'x', 129);
    long_id[129] = '\0';
    const char *bad[] = {"", "a b", "a\"b", long_id, "t\xc3\xa9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tg_audit_ev_init(&ev);
        ev.event = "call.denied";
        ev.correlation_id = bad[i];
        ev.call_id = "7";
        ev.tool = bad[i];
        encode_ok(out, sizeof(out), &ev, 1, 0);
        cr_assert_str_eq(out, "{\"v\":1,\"ts\":\"1970-01-01T00:00:00.000Z\",\"seq\":1,"
                              "\"instance\":\"host-a\",\"event\":\"call.denied\","
                              "\"correlation_id\":\"invalid\",\"call_id\":\"7\","
                              "\"tool\":\"invalid\"}\n",
                         "case %zu", i);
    }
}

/* Values a caller could smuggle into the checked fields; each holds the
 * canary and fails the check in a different way. */
static const char *const CANARIES[] = {
    "sk-CANARY-3f9a ' \"x\"",
    "sk-CANARY-3f9a\n",
    "sk-CANARY-3f9a\\",
    "sk-CANARY-3f9a\t",
    "sk-CANARY-3f9a=",
    "Bearer sk-CANARY-3f9a",
    "sk-CANARY-3f9a\xc3\xa9",
    "sk-CANARY-3f9a\x7f",
    ("sk-CANARY-3f9a-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), /* 129 bytes, all in the class */
};

static void canary_event(tg_audit_ev_t *ev, const char *canary)
{
    *ev = full_event();
    ev->correlation_id = canary;
    ev->call_id = canary;
    ev->tool = canary;
}

Test(audit_encode, canary_never_reaches_the_line)
{
    char out[TG_AUDIT_LINE_MAX + 1];
    tg_audit_ev_t ev;

    cr_assert_eq(strlen(CANARIES[8]), 129);
    for (size_t i = 0; i < sizeof(CANARIES) / sizeof(CANARIES[0]); i++) {
        canary_event(&ev, CANARIES[i]);
        encode_ok(out, sizeof(out), &ev, 1, TS_EXAMPLE);
        cr_assert_null(strstr(out, "CANARY"), "canary %zu leaked: %s", i, out);
        json_t *j = parse_line(out, strlen(out) - 1);
        cr_assert_str_eq(json_string_value(json_object_get(j, "correlation_id")), "invalid");
        cr_assert_str_eq(json_string_value(json_object_get(j, "call_id")), "invalid");
        cr_assert_str_eq(json_string_value(json_object_get(j, "tool")), "invalid");
        json_decref(j);
    }
}

/* ---- file sink ---------------------------------------------------------- */

TestSuite(audit_sink, .init = tgh_tmp_init, .fini = tgh_cleanup);


typedef struct lines {
    char *data;
    char *v[256];
    size_t n;
} lines_t;

/* Read <path> and split it at '\n'; asserts the file ends with one. */
static void read_lines(lines_t *l, const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    l->data = malloc(1 << 20);
    size_t len = fread(l->data, 1, (1 << 20) - 1, f);
    fclose(f);
    l->data[len] = '\0';
    cr_assert(len == 0 || l->data[len - 1] == '\n', "file does not end with a newline");
    l->n = 0;
    for (char *p = l->data; *p != '\0';) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        cr_assert_lt(l->n, 256);
        l->v[l->n++] = p;
        p = nl + 1;
    }
}

/* Every line parses, has the common fields, and seq runs first..first+n-1. */
static void assert_seq_run(const lines_t *l, uint64_t first)
{
    for (size_t i = 0; i < l->n; i++) {
        json_t *j = parse_line(l->v[i], strlen(l->v[i]));
        cr_assert_eq(json_integer_value(json_object_get(j, "v")), 1);
        cr_assert_eq(json_integer_value(json_object_get(j, "seq")), (json_int_t)(first + i),
                     "line %zu: %s", i, l->v[i]);
        cr_assert_str_eq(json_string_value(json_object_get(j, "instance")), "host-a");
        cr_assert_eq(strlen(json_string_value(json_object_get(j, "ts"))), 24);
        json_decref(j);
    }
}

static const char *event_of(const char *line, char *buf, size_t cap)
{
    json_t *j = parse_line(line, strlen(line));
    snprintf(buf, cap, "%s", json_string_value(json_object_get(j, "event")));
    json_decref(j);
    return buf;
}

static json_int_t int_of(const char *line, const char *key)
{
    json_t *j = parse_line(line, strlen(line));
    json_t *v = json_object_get(j, key);
    cr_assert_not_null(v, "no %s in %s", key, line);
    json_int_t r = json_integer_value(v);
    json_decref(j);
    return r;
}

Test(audit_sink, creates_dirs_and_file_private_and_writes_gap_free_seq)
{
    uv_loop_t loop;
    char path[256], dir[256];
    struct stat st;
    lines_t l;

    tgh_tmp_path(dir, sizeof(dir), "state/toolgate");
    tgh_tmp_path(path, sizeof(path), "state/toolgate/audit.jsonl");
    umask(022);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 64);

    cr_assert_eq(stat(dir, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);

    int64_t before = (int64_t)time(NULL);
    for (int i = 0; i < 50; i++) {
        aud_emit(a, "call.completed", i);
        if (i % 7 == 0)
            uv_run(&loop, UV_RUN_NOWAIT); /* interleave completions with emits */
    }
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_queued(a), 0);
    cr_assert_eq(tg_audit_dropped(a), 0);
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 50);
    assert_seq_run(&l, 1);
    for (size_t i = 0; i < l.n; i++)
        cr_assert_eq(int_of(l.v[i], "count"), (json_int_t)i); /* emission order kept */

    /* ts is the wall clock in ms */
    json_t *j = parse_line(l.v[0], strlen(l.v[0]));
    struct tm tm = {0};
    const char *ts = json_string_value(json_object_get(j, "ts"));
    cr_assert_eq(sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec),
                 6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    int64_t t = (int64_t)timegm(&tm);
    /* time() reads the kernel's coarse clock, which lags the precise one
     * by up to a tick: a line stamped just after a second began can be
     * ahead of it. */
    cr_assert(t >= before - 1 && t <= (int64_t)time(NULL) + 1, "ts %s", ts);
    json_decref(j);
    free(l.data);
}

Test(audit_sink, appends_to_an_existing_file)
{
    uv_loop_t loop;
    char path[256];
    lines_t l;

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    FILE *f = fopen(path, "w");
    fputs("{\"old\":1}\n", f);
    fclose(f);

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 8);
    aud_emit(a, "router.started", TG_AUDIT_ABSENT);
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 2);
    cr_assert_str_eq(l.v[0], "{\"old\":1}");
    cr_assert_eq(int_of(l.v[1], "seq"), 1);
    free(l.data);
}

Test(audit_sink, overflow_is_counted_and_reported_without_seq_gaps)
{
    uv_loop_t loop;
    char path[256], name[64];
    lines_t l;

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 4);

    /* Without the loop running no write can complete, so the queue holds
     * exactly queue_cap events and the rest are dropped. */
    for (int i = 0; i < 100; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(tg_audit_queued(a), 4);
    cr_assert_eq(tg_audit_dropped(a), 96);

    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_queued(a), 0);
    cr_assert_eq(tg_audit_dropped(a), 96); /* a lifetime total: reporting keeps it */
    read_lines(&l, path); /* reported as soon as there was room, not with the next event */
    cr_assert_eq(l.n, 5);
    cr_assert_str_eq(event_of(l.v[4], name, sizeof(name)), "audit.dropped");
    free(l.data);

    aud_emit(a, "call.completed", 1000);
    aud_emit(a, "call.completed", 1001);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 7);
    assert_seq_run(&l, 1);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(event_of(l.v[i], name, sizeof(name)), "call.completed");
        cr_assert_eq(int_of(l.v[i], "count"), (json_int_t)i);
    }
    cr_assert_str_eq(event_of(l.v[4], name, sizeof(name)), "audit.dropped");
    cr_assert_eq(int_of(l.v[4], "count"), 96);
    cr_assert_eq(int_of(l.v[5], "count"), 1000);
    cr_assert_eq(int_of(l.v[6], "count"), 1001);
    free(l.data);
}

/* Issue 12 item 2: a front that stops reading callers while the queue is
 * crowded is woken once, after a write made room; a cancelled waiter is
 * not; close leaves no waiter linked to a freed pipe. */
static int room_woken;
static void on_room(tg_audit_room_t *r)
{
    (void)r;
    room_woken++;
}

Test(audit_sink, crowded_queue_wakes_its_waiters_once_when_a_write_makes_room)
{
    uv_loop_t loop;
    char path[256];

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 8);
    tg_audit_room_t r1 = {0}, r2 = {0}, r3 = {0};
    for (int i = 0; i < 5; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_not(tg_audit_crowded(a), "5 of 8 is not crowded");
    aud_emit(a, "call.completed", 5);
    cr_assert(tg_audit_crowded(a), "6 of 8 (3/4) is crowded");
    tg_audit_room_wait(a, &r1, on_room);
    tg_audit_room_wait(a, &r1, on_room); /* twice: still one waiter */
    tg_audit_room_wait(a, &r2, on_room);
    tg_audit_room_wait(a, &r3, on_room);
    tg_audit_room_cancel(&r2);
    cr_assert_not(tg_audit_room_waiting(&r2));
    room_woken = 0;
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_not(tg_audit_crowded(a));
    cr_assert_eq(room_woken, 2, "r1 and r3 woken once each, r2 not: %d", room_woken);
    cr_assert_not(tg_audit_room_waiting(&r1));
    cr_assert_not(tg_audit_room_waiting(&r3));
    cr_assert_eq(tg_audit_dropped(a), 0);
    /* A waiter left at close is unlinked; cancelling it later is safe. */
    for (int i = 0; i < 6; i++)
        aud_emit(a, "call.completed", 10 + i);
    tg_audit_room_wait(a, &r1, on_room);
    aud_close(a, &loop);
    cr_assert_not(tg_audit_room_waiting(&r1));
    tg_audit_room_cancel(&r1);
    cr_assert_eq(room_woken, 2);
}

Test(audit_sink, close_with_write_in_flight_writes_everything_in_order)
{
    uv_loop_t loop;
    char path[256];
    lines_t l;

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 64);
    for (int i = 0; i < 10; i++)
        aud_emit(a, "call.completed", i);
    cr_assert(uv_loop_alive(&loop)); /* the first line's write is in flight */
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 10);
    assert_seq_run(&l, 1);
    for (size_t i = 0; i < l.n; i++)
        cr_assert_eq(int_of(l.v[i], "count"), (json_int_t)i);
    free(l.data);
}

Test(audit_sink, close_reports_loss_not_yet_reported)
{
    uv_loop_t loop;
    char path[256], name[64];
    lines_t l;

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 2);
    for (int i = 0; i < 5; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(tg_audit_dropped(a), 3);
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 3);
    assert_seq_run(&l, 1);
    cr_assert_str_eq(event_of(l.v[2], name, sizeof(name)), "audit.dropped");
    cr_assert_eq(int_of(l.v[2], "count"), 3);
    free(l.data);
}

Test(audit_sink, idle_pipe_does_not_keep_the_loop_alive)
{
    uv_loop_t loop;
    char path[256];

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 8);
    cr_assert_not(uv_loop_alive(&loop));
    cr_assert_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);

    aud_emit(a, "router.started", TG_AUDIT_ABSENT);
    cr_assert(uv_loop_alive(&loop));
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0); /* returns once written */
    cr_assert_not(uv_loop_alive(&loop));
    cr_assert_eq(tg_audit_queued(a), 0);
    aud_close(a, &loop);
}

Test(audit_sink, canary_never_reaches_the_file)
{
    uv_loop_t loop;
    char path[256];
    lines_t l;
    tg_audit_ev_t ev;

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 64);
    for (size_t i = 0; i < sizeof(CANARIES) / sizeof(CANARIES[0]); i++) {
        canary_event(&ev, CANARIES[i]);
        tg_audit_emit(a, &ev);
    }
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, sizeof(CANARIES) / sizeof(CANARIES[0]));
    for (size_t i = 0; i < l.n; i++)
        cr_assert_null(strstr(l.v[i], "CANARY"), "line %zu: %s", i, l.v[i]);
    free(l.data);
}

Test(audit_sink, write_errors_are_counted_and_do_not_spin)
{
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, "/dev/full", 8); /* every write fails: ENOSPC */
    for (int i = 0; i < 3; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_queued(a), 0);
    cr_assert_eq(tg_audit_dropped(a), 3);

    /* the next event brings an audit.dropped report; both fail and count */
    aud_emit(a, "call.completed", 3);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_dropped(a), 5);
    aud_close(a, &loop);
}

/* A write cut short (EFBIG here, ENOSPC on a full disk) leaves no part of
 * a line: the file is truncated back to its last whole line. */
Test(audit_sink, a_line_cut_short_is_truncated_away)
{
    uv_loop_t loop;
    char path[256], line[TG_AUDIT_LINE_MAX], name[64];
    lines_t l;
    tg_audit_ev_t ev;
    struct rlimit saved, small;

    /* Size the file limit so the second line is cut 10 bytes in. */
    tg_audit_ev_init(&ev);
    ev.event = "call.completed";
    long len = tg_audit_encode(line, sizeof(line), &ev, 1, TS_EXAMPLE, "host-a");
    cr_assert_gt(len, 10);

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_path(&loop, path, 8);

    signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of dying */
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small = saved;
    small.rlim_cur = (rlim_t)len + 10;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);

    tg_audit_emit(a, &ev); /* seq 1: in flight alone */
    tg_audit_emit(a, &ev); /* seq 2: next batch, cut short */
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_dropped(a), 1);

    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
    tg_audit_emit(a, &ev); /* brings the report (seq 3), then seq 4 */
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    aud_close(a, &loop);

    read_lines(&l, path);
    cr_assert_eq(l.n, 3, "the cut line stayed: %s", l.n > 1 ? l.v[1] : "");
    cr_assert_eq(int_of(l.v[0], "seq"), 1);
    cr_assert_str_eq(event_of(l.v[1], name, sizeof(name)), "audit.dropped");
    cr_assert_eq(int_of(l.v[1], "seq"), 3);
    cr_assert_eq(int_of(l.v[1], "count"), 1);
    cr_assert_eq(int_of(l.v[2], "seq"), 4);
    free(l.data);
}

Test(audit_sink, open_failure_names_the_path_and_the_way_out)
{
    uv_loop_t loop;
    tg_audit_t *a = NULL;
    tg_err_t err = {""};
    char path[256];

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t opts = {.path = "/proc/nonexistent/x", .instance = "host-a", .queue_cap = 8};
    int rc = tg_audit_open(&a, &loop, &opts, &err);
    cr_assert_lt(rc, 0);
    cr_assert_null(a);
    cr_assert_not_null(strstr(err.msg, "/proc/nonexistent/x"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, strerror(-rc)), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "use --audit PATH to write elsewhere"), "%s", err.msg);

    /* a parent that is a file */
    tgh_tmp_path(path, sizeof(path), "plain");
    FILE *f = fopen(path, "w");
    fclose(f);
    tgh_tmp_path(path, sizeof(path), "plain/audit.jsonl");
    opts.path = path;
    cr_assert_eq(tg_audit_open(&a, &loop, &opts, &err), -ENOTDIR);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, strerror(ENOTDIR)), "%s", err.msg);

    /* a directory */
    opts.path = tgh_tmp;
    cr_assert_eq(tg_audit_open(&a, &loop, &opts, &err), -EISDIR);
    cr_assert_not_null(strstr(err.msg, tgh_tmp), "%s", err.msg);

    opts.path = path;
    opts.queue_cap = 0;
    cr_assert_eq(tg_audit_open(&a, &loop, &opts, &err), -EINVAL);
    cr_assert_null(a);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(audit_sink, default_path_honours_xdg_then_home)
{
    char buf[PATH_MAX];

    setenv("XDG_STATE_HOME", "/srv/state", 1);
    setenv("HOME", "/home/u", 1);
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "/srv/state/toolgate/audit.jsonl");

    /* exactly fits, then one byte short */
    size_t need = strlen("/srv/state/toolgate/audit.jsonl") + 1;
    cr_assert_eq(tg_audit_default_path(buf, need), 0);
    cr_assert_eq(tg_audit_default_path(buf, need - 1), -ENAMETOOLONG);

    setenv("XDG_STATE_HOME", "relative/state", 1); /* ignored, per the XDG spec */
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "/home/u/.local/state/toolgate/audit.jsonl");

    setenv("XDG_STATE_HOME", "", 1);
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "/home/u/.local/state/toolgate/audit.jsonl");

    unsetenv("XDG_STATE_HOME");
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "/home/u/.local/state/toolgate/audit.jsonl");

    unsetenv("HOME");
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), -ENOENT);
    setenv("HOME", "", 1);
    cr_assert_eq(tg_audit_default_path(buf, sizeof(buf)), -ENOENT);
}
