/* Audit verify: the pure core (schema, gaps, duplicates, reordering,
 * audit.dropped, runs, instances, chunked input) and the CLI (file order
 * of rotated sets, output, exit codes). */
#include "audit/verify.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "tests/tg_harness.h"

#define TS_EXAMPLE 1795646901123LL /* 2026-11-25T22:48:21.123Z */
#define MAXF 64

typedef struct got {
    tg_verify_kind_t kind;
    char file[64];
    uint64_t line;
    char instance[64]; /* "" for none */
    uint64_t seq, seq_last, count, prev_seq;
    bool explained;
    char msg[600];
} got_t;

static got_t got[MAXF];
static size_t ngot;
static got_t notes[MAXF]; /* open runs without router.stopping: not findings */
static size_t nnotes;

static void collect(void *ud, const tg_verify_finding_t *f)
{
    (void)ud;
    got_t *g;
    if (f->open) {
        cr_assert_eq(f->kind, TG_VERIFY_UNSTOPPED);
        cr_assert_lt(nnotes, MAXF, "too many notes");
        g = &notes[nnotes++];
    } else {
        cr_assert_lt(ngot, MAXF, "too many findings");
        g = &got[ngot++];
    }
    g->kind = f->kind;
    snprintf(g->file, sizeof(g->file), "%s", f->file);
    g->line = f->line;
    snprintf(g->instance, sizeof(g->instance), "%s", f->instance ? f->instance : "");
    g->seq = f->seq;
    g->seq_last = f->seq_last;
    g->count = f->count;
    g->prev_seq = f->prev_seq;
    g->explained = f->explained;
    snprintf(g->msg, sizeof(g->msg), "%s", f->msg);
}

static tg_verify_t *vnew(void)
{
    ngot = 0;
    nnotes = 0;
    tg_verify_t *v = tg_verify_new(collect, NULL);
    cr_assert_not_null(v);
    return v;
}

/* One encoded line (with its '\n') from the real encoder. */
static size_t enc(char *buf, size_t cap, const char *inst, uint64_t seq, const char *event,
                  int64_t count, int64_t ts)
{
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = event;
    ev.count = count;
    long n = tg_audit_encode(buf, cap, &ev, seq, ts, inst);
    cr_assert_gt(n, 0);
    return (size_t)n;
}

/* Append the line for <seq> of <inst> to the growing text <t>. */
typedef struct text {
    char b[1 << 16];
    size_t n;
} text_t;

static void add(text_t *t, const char *inst, uint64_t seq)
{
    t->n += enc(t->b + t->n, sizeof(t->b) - t->n, inst, seq, "call.completed", TG_AUDIT_ABSENT,
                TS_EXAMPLE + (int64_t)seq);
}

static void add_ev(text_t *t, const char *inst, uint64_t seq, const char *event)
{
    t->n += enc(t->b + t->n, sizeof(t->b) - t->n, inst, seq, event, TG_AUDIT_ABSENT,
                TS_EXAMPLE + (int64_t)seq);
}

static void add_dropped(text_t *t, const char *inst, uint64_t seq, int64_t count)
{
    t->n += enc(t->b + t->n, sizeof(t->b) - t->n, inst, seq, "audit.dropped", count,
                TS_EXAMPLE + (int64_t)seq);
}

static void add_raw(text_t *t, const char *s)
{
    size_t n = strlen(s);
    memcpy(t->b + t->n, s, n);
    t->n += n;
}

/* Verify <t> as one file "t.jsonl" and finish. */
static tg_verify_t *run(const text_t *t)
{
    tg_verify_t *v = vnew();
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    cr_assert_eq(tg_verify_feed(v, t->b, t->n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    return v;
}

static const tg_verify_summary_t *sum_of(const tg_verify_t *v, const char *inst)
{
    for (size_t i = 0; i < tg_verify_ninstances(v); i++)
        if (strcmp(tg_verify_summary(v, i)->instance, inst) == 0)
            return tg_verify_summary(v, i);
    cr_assert_fail("no summary for %s", inst);
    return NULL;
}

Test(verify, clean_log_has_no_findings)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 100; s++)
        add(&t, "host-a", s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 0, "first: %s", ngot ? got[0].msg : "");
    cr_assert_eq(tg_verify_findings(v), 0);
    cr_assert_eq(tg_verify_ninstances(v), 1);
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->events, 100);
    cr_assert_eq(s->runs, 1);
    cr_assert_eq(s->first_seq, 1);
    cr_assert_eq(s->last_seq, 100);
    cr_assert_eq(s->missing + s->duplicates + s->reordered + s->schema + s->dropped_lines, 0);
    tg_verify_free(v);
}

/* Everything the encoder can write passes the schema. */
Test(verify, every_encoder_field_passes_the_schema)
{
    char line[TG_AUDIT_LINE_MAX];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "agent.exited";
    ev.request_id = "tg-1";
    ev.correlation_id = "corr-7";
    ev.call_id = "has space"; /* written as "invalid", which passes */
    ev.agent = "search";
    ev.tool = "web";
    ev.caller = "ci-bot";
    ev.status = "error";
    ev.code = "timeout";
    ev.stage = "killed";
    ev.reason = "deadline";
    ev.limit.type = "memory";
    ev.limit.scope = "agent";
    ev.limit.name = "agents.search.resources.memory";
    ev.limit.observed = -1;
    ev.limit.cap = 10;
    ev.duration_ms = 1;
    ev.bytes_in = 2;
    ev.bytes_out = 3;
    ev.retry_after_ms = 4;
    ev.count = 5;
    ev.pid = 6;
    ev.attempt = 7;
    ev.backoff_ms = 8;
    ev.exit.code = -1;
    ev.exit.signal = 9;
    ev.exit.reason = "killed";
    ev.decided_by = "local_fallback";
    ev.key = "agents[1].resources.memory";
    long n = tg_audit_encode(line, sizeof(line), &ev, 1, TS_EXAMPLE, "host-a");
    cr_assert_gt(n, 0);
    cr_assert_not_null(strstr(line, "\"decided_by\":\"local_fallback\""));
    cr_assert_not_null(strstr(line, "\"key\":\"agents[1].resources.memory\""));

    tg_verify_t *v = vnew();
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    cr_assert_eq(tg_verify_feed(v, line, (size_t)n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot, 0, "%s", ngot ? got[0].msg : "");
    tg_verify_free(v);
}

Test(verify, gap_is_reported_with_its_range_and_place)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 10; s++)
        add(&t, "host-a", s);
    for (uint64_t s = 14; s <= 20; s++)
        add(&t, "host-a", s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_GAP);
    cr_assert_str_eq(got[0].file, "t.jsonl");
    cr_assert_eq(got[0].line, 11); /* where seq 14 is */
    cr_assert_str_eq(got[0].instance, "host-a");
    cr_assert_eq(got[0].seq, 11);
    cr_assert_eq(got[0].seq_last, 13);
    cr_assert_eq(got[0].count, 3);
    cr_assert_not(got[0].explained);
    cr_assert_str_eq(got[0].msg,
                     "gap: seq 11..13 missing (3 events), not reported by any audit.dropped");
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->missing, 3);
    cr_assert_eq(s->unexplained, 3);
    cr_assert_eq(s->events, 17);
    cr_assert_eq(s->last_seq, 20);
    tg_verify_free(v);
}

/* audit.c reports lines whose write failed in the next audit.dropped:
 * such a gap is explained, and still a finding, as is the report. */
Test(verify, gap_covered_by_the_next_audit_dropped_is_explained)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 5; s++)
        add(&t, "host-a", s);
    add(&t, "host-a", 8);          /* 6, 7 lost */
    add_dropped(&t, "host-a", 9, 2); /* line 7 */
    add(&t, "host-a", 10);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 2);
    cr_assert_eq(got[0].kind, TG_VERIFY_DROPPED); /* reported while reading */
    cr_assert_eq(got[0].line, 7);
    cr_assert_eq(got[0].seq, 9);
    cr_assert_eq(got[0].count, 2);
    cr_assert_str_eq(got[0].msg, "audit.dropped: the writer lost 2 events before this line");
    cr_assert_eq(got[1].kind, TG_VERIFY_GAP);
    cr_assert_eq(got[1].line, 6);
    cr_assert_eq(got[1].seq, 6);
    cr_assert_eq(got[1].seq_last, 7);
    cr_assert(got[1].explained);
    cr_assert_str_eq(got[1].msg, "gap: seq 6..7 missing (2 events), explained by the "
                                 "audit.dropped at t.jsonl:7");
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->missing, 2);
    cr_assert_eq(s->unexplained, 0);
    cr_assert_eq(s->dropped_events, 2);
    cr_assert_eq(s->dropped_lines, 1);
    tg_verify_free(v);
}

Test(verify, gaps_beyond_the_reported_count_are_unexplained)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 3);            /* 2 lost */
    add(&t, "host-a", 5);            /* 4 lost */
    add_dropped(&t, "host-a", 6, 1); /* reports only one */
    add(&t, "host-a", 8);            /* 7 lost, and no report follows */
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 4);
    cr_assert_eq(got[0].kind, TG_VERIFY_DROPPED);
    for (int i = 1; i < 4; i++) {
        cr_assert_eq(got[i].kind, TG_VERIFY_GAP);
        cr_assert_not(got[i].explained);
    }
    cr_assert_eq(got[1].seq, 2);
    cr_assert_str_eq(got[1].msg, "gap: seq 2 missing, more than the audit.dropped at t.jsonl:4 "
                                 "reports");
    cr_assert_eq(got[3].seq, 7);
    cr_assert_str_eq(got[3].msg, "gap: seq 7 missing, not reported by any audit.dropped");
    cr_assert_eq(sum_of(v, "host-a")->unexplained, 3);
    tg_verify_free(v);
}

/* Queue overflow: lost events never got a seq, so there is no gap, but
 * the log is still not complete. */
Test(verify, audit_dropped_without_gap_is_still_a_finding)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add_dropped(&t, "host-a", 2, 96);
    add(&t, "host-a", 3);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_DROPPED);
    cr_assert_eq(got[0].count, 96);
    cr_assert_eq(sum_of(v, "host-a")->missing, 0);
    cr_assert_eq(sum_of(v, "host-a")->dropped_events, 96);
    tg_verify_free(v);
}

Test(verify, duplicate_seq_is_reported_once)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    add(&t, "host-a", 3);
    add(&t, "host-a", 2);
    add(&t, "host-a", 4);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1, "%s", got[1].msg);
    cr_assert_eq(got[0].kind, TG_VERIFY_DUPLICATE);
    cr_assert_eq(got[0].line, 4);
    cr_assert_eq(got[0].seq, 2);
    cr_assert_str_eq(got[0].msg, "duplicate: seq 2 was seen before in this run");
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->duplicates, 1);
    cr_assert_eq(s->events, 4);
    cr_assert_eq(s->reordered, 0);
    tg_verify_free(v);
}

Test(verify, reordering_is_reported_at_the_late_line_without_a_gap)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    add(&t, "host-a", 4);
    add(&t, "host-a", 3);
    add(&t, "host-a", 5);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_REORDER);
    cr_assert_eq(got[0].line, 4);
    cr_assert_eq(got[0].seq, 3);
    cr_assert_eq(got[0].prev_seq, 4);
    cr_assert_str_eq(got[0].msg, "out of order: seq 3 comes after seq 4");
    cr_assert_eq(sum_of(v, "host-a")->missing, 0);
    tg_verify_free(v);
}

/* One misplaced line is one finding, not one per line after it. */
Test(verify, one_line_moved_far_is_one_reorder)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 10);
    for (uint64_t s = 2; s <= 9; s++)
        add(&t, "host-a", s);
    add(&t, "host-a", 11);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_REORDER);
    cr_assert_eq(got[0].seq, 2);
    cr_assert_eq(got[0].prev_seq, 10);
    tg_verify_free(v);
}

typedef struct bad {
    const char *line;
    const char *msg; /* the whole finding text */
    bool attributed;
} bad_t;

#define HEAD "{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,\"instance\":\"host-a\""

Test(verify, schema_violations_are_named)
{
    static const bad_t cases[] = {
        {"", "schema: empty line", false},
        {"not json", "schema: not valid JSON (near byte 3)", false},
        {"[1,2]", "schema: not a JSON object", false},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,\"event\":\"router.started\"}",
         "schema: no \"instance\" (expected 1 to 128 of [A-Za-z0-9._:@/-])", false},
        {"{\"v\":1,\"seq\":1,\"instance\":\"has space\",\"event\":\"router.started\"}",
         "schema: an invalid \"instance\" (expected 1 to 128 of [A-Za-z0-9._:@/-])", false},
        {"{\"seq\":1,\"instance\":\"host-a\",\"event\":\"router.started\"}",
         "schema: no \"v\"; no \"ts\"", true},
        {HEAD ",\"v\":1,\"event\":\"router.started\"}", "schema: not valid JSON (near byte 70)",
         false},
        {"{\"v\":2,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"v\" is 2 (this verify reads version 1)", true},
        {"{\"v\":\"1\",\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"v\" is not an integer", true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21Z\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"ts\" is not an RFC 3339 UTC time with milliseconds "
         "(YYYY-MM-DDTHH:MM:SS.mmmZ)",
         true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123+00:00\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"ts\" is not an RFC 3339 UTC time with milliseconds "
         "(YYYY-MM-DDTHH:MM:SS.mmmZ)",
         true},
        {"{\"v\":1,\"ts\":\"2026-02-29T00:00:00.000Z\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"ts\" is not an RFC 3339 UTC time with milliseconds "
         "(YYYY-MM-DDTHH:MM:SS.mmmZ)",
         true},
        {"{\"v\":1,\"ts\":\"2026-13-01T00:00:00.000Z\",\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"ts\" is not an RFC 3339 UTC time with milliseconds "
         "(YYYY-MM-DDTHH:MM:SS.mmmZ)",
         true},
        {"{\"v\":1,\"ts\":1795646901123,\"seq\":1,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"ts\" is not an RFC 3339 UTC time with milliseconds "
         "(YYYY-MM-DDTHH:MM:SS.mmmZ)",
         true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":0,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"seq\" is not an integer >= 1", true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":\"1\",\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"seq\" is not an integer >= 1", true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1.5,\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: \"seq\" is not an integer >= 1", true},
        {"{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"instance\":\"host-a\","
         "\"event\":\"router.started\"}",
         "schema: no \"seq\"", true},
        {HEAD "}", "schema: no \"event\"", true},
        {HEAD ",\"event\":\"router.exploded\"}", "schema: unknown event \"router.exploded\"",
         true},
        {HEAD ",\"event\":\"x y\"}", "schema: unknown event (with unexpected characters)", true},
        {HEAD ",\"event\":7}", "schema: \"event\" is not a string", true},
        {HEAD ",\"event\":\"call.completed\",\"secret\":\"x\"}",
         "schema: unknown field \"secret\"", true},
        {HEAD ",\"event\":\"call.completed\",\"a b\":1}",
         "schema: an unknown field with unexpected characters in its name", true},
        {HEAD ",\"event\":\"call.completed\",\"duration_ms\":\"5\"}",
         "schema: \"duration_ms\" is not an integer >= 0", true},
        {HEAD ",\"event\":\"call.completed\",\"bytes_in\":-1}",
         "schema: \"bytes_in\" is not an integer >= 0", true},
        {HEAD ",\"event\":\"call.completed\",\"agent\":5}", "schema: \"agent\" is not a string",
         true},
        {HEAD ",\"event\":\"call.completed\",\"tool\":\"rm -rf\"}",
         "schema: \"tool\" is not a safe string (1 to 128 of [A-Za-z0-9._:@/-], or \"invalid\")",
         true},
        {HEAD ",\"event\":\"call.denied\",\"limit\":{\"scope\":\"tool\"}}",
         "schema: \"limit\" has no \"type\"", true},
        {HEAD ",\"event\":\"call.denied\",\"limit\":{\"type\":\"rate\",\"cap\":\"10\"}}",
         "schema: \"limit.cap\" is not an integer", true},
        {HEAD ",\"event\":\"call.denied\",\"limit\":{\"type\":\"rate\",\"why\":1}}",
         "schema: unknown field in \"limit\" \"why\"", true},
        {HEAD ",\"event\":\"call.denied\",\"limit\":[]}", "schema: \"limit\" is not an object",
         true},
        {HEAD ",\"event\":\"agent.exited\",\"exit\":{\"code\":1}}",
         "schema: \"exit\" has no \"reason\"", true},
        {HEAD ",\"event\":\"agent.started\",\"enforced\":true}",
         "schema: \"enforced\" is not an object", true},
        {HEAD ",\"event\":\"audit.dropped\"}", "schema: audit.dropped without \"count\"", true},
        {"{\"v\":1,\"v\":1}", "schema: not valid JSON (near byte 10)", false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        text_t t = {.n = 0};
        add_raw(&t, cases[i].line);
        add_raw(&t, "\n");
        tg_verify_t *v = run(&t);
        cr_assert_eq(ngot, 1, "case %zu: %zu findings (%s)", i, ngot, ngot ? got[0].msg : "");
        cr_assert_eq(got[0].kind, TG_VERIFY_SCHEMA, "case %zu", i);
        cr_assert_eq(got[0].line, 1);
        cr_assert_str_eq(got[0].msg, cases[i].msg, "case %zu: %s", i, got[0].msg);
        cr_assert_str_eq(got[0].instance, cases[i].attributed ? "host-a" : "", "case %zu", i);
        cr_assert_eq(tg_verify_unattributed(v), cases[i].attributed ? 0 : 1, "case %zu", i);
        if (cases[i].attributed)
            cr_assert_eq(sum_of(v, "host-a")->schema, 1, "case %zu", i);
        tg_verify_free(v);
    }
}

Test(verify, valid_calendar_edges_pass)
{
    static const char *const ts[] = {"2024-02-29T23:59:59.999Z", "2000-02-29T00:00:00.000Z",
                                     "2016-12-31T23:59:60.000Z", "1970-01-01T00:00:00.000Z"};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
        text_t t = {.n = 0};
        char line[256];
        snprintf(line, sizeof(line),
                 "{\"v\":1,\"ts\":\"%s\",\"seq\":1,\"instance\":\"h\",\"event\":\"router.started\"}\n",
                 ts[i]);
        add_raw(&t, line);
        tg_verify_t *v = run(&t);
        cr_assert_eq(ngot, 0, "%s: %s", ts[i], ngot ? got[0].msg : "");
        tg_verify_free(v);
    }
    text_t t = {.n = 0};
    add_raw(&t, "{\"v\":1,\"ts\":\"1900-02-29T00:00:00.000Z\",\"seq\":1,\"instance\":\"h\","
                "\"event\":\"router.started\"}\n");
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1); /* 1900 is not a leap year */
    tg_verify_free(v);
}

/* A schema error does not hide the seq: no false gap around it. */
Test(verify, bad_line_with_a_seq_still_counts_for_gaps)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add_raw(&t, "{\"v\":1,\"ts\":\"bad\",\"seq\":2,\"instance\":\"host-a\","
                "\"event\":\"call.completed\"}\n");
    add(&t, "host-a", 3);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_SCHEMA);
    cr_assert_eq(got[0].seq, 2);
    cr_assert_eq(sum_of(v, "host-a")->missing, 0);
    cr_assert_eq(sum_of(v, "host-a")->events, 3);
    tg_verify_free(v);
}

Test(verify, two_instances_interleaved_are_judged_apart)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-b", 1);
    add(&t, "host-a", 2);
    add(&t, "host-b", 3); /* host-b lost 2 */
    add(&t, "host-a", 3);
    add(&t, "host-b", 4);
    add(&t, "host-a", 4);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_GAP);
    cr_assert_str_eq(got[0].instance, "host-b");
    cr_assert_eq(got[0].line, 4);
    cr_assert_eq(got[0].seq, 2);
    cr_assert_eq(tg_verify_ninstances(v), 2);
    cr_assert_str_eq(tg_verify_summary(v, 0)->instance, "host-a");
    cr_assert_str_eq(tg_verify_summary(v, 1)->instance, "host-b");
    cr_assert_eq(sum_of(v, "host-a")->events, 4);
    cr_assert_eq(sum_of(v, "host-a")->missing, 0);
    cr_assert_eq(sum_of(v, "host-b")->events, 3);
    cr_assert_eq(sum_of(v, "host-b")->missing, 1);
    tg_verify_free(v);
}

/* A restart under the same instance name starts again at seq 1. */
Test(verify, restart_starts_a_new_run)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 4; s++)
        add(&t, "host-a", s);
    add_ev(&t, "host-a", 5, "router.stopping");
    /* the new process: same seqs, later timestamps */
    for (uint64_t s = 1; s <= 3; s++)
        t.n += enc(t.b + t.n, sizeof(t.b) - t.n, "host-a", s, "router.started", TG_AUDIT_ABSENT,
                   TS_EXAMPLE + 60000 + (int64_t)s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 0, "%s", ngot ? got[0].msg : "");
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->runs, 2);
    cr_assert_eq(s->events, 8);
    cr_assert_eq(s->first_seq, 1);
    cr_assert_eq(s->last_seq, 3);
    tg_verify_free(v);
}

/* A run that a later run shows to be over, without router.stopping, ended
 * by a kill, a crash or a full disk: "ended without router.stopping", a
 * finding at its last event. The last run may still be going: a note. */
Test(verify, run_ended_without_router_stopping_is_reported)
{
    text_t t = {.n = 0};
    add_ev(&t, "host-a", 1, "router.started");
    for (uint64_t s = 2; s <= 4; s++)
        add(&t, "host-a", s);
    for (uint64_t s = 1; s <= 3; s++)
        t.n += enc(t.b + t.n, sizeof(t.b) - t.n, "host-a", s, "call.completed", TG_AUDIT_ABSENT,
                   TS_EXAMPLE + 60000 + (int64_t)s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1, "%s", ngot ? got[0].msg : "");
    cr_assert_eq(got[0].kind, TG_VERIFY_UNSTOPPED);
    cr_assert_eq(got[0].line, 4);
    cr_assert_eq(got[0].seq, 4);
    cr_assert_not_null(strstr(got[0].msg, "ended without router.stopping"), "%s", got[0].msg);
    cr_assert_eq(nnotes, 1);
    cr_assert_eq(notes[0].line, 7);
    cr_assert_eq(notes[0].seq, 3);
    cr_assert_eq(tg_verify_findings(v), 1);
    const tg_verify_summary_t *s = sum_of(v, "host-a");
    cr_assert_eq(s->runs, 2);
    cr_assert_eq(s->unstopped, 1);
    cr_assert(s->open);
    tg_verify_free(v);
}

/* The last run: router.stopping anywhere in it (the agents' exits follow
 * it) ends it cleanly; without one it is a note, and a finding once the
 * caller says every writer has stopped. */
Test(verify, last_run_without_router_stopping_fails_only_when_stopped)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 3; s++)
        add(&t, "host-a", s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 0);
    cr_assert_eq(nnotes, 1);
    cr_assert_eq(tg_verify_findings(v), 0);
    cr_assert(sum_of(v, "host-a")->open);
    cr_assert_eq(sum_of(v, "host-a")->unstopped, 0);
    tg_verify_free(v);

    v = vnew();
    tg_verify_set_stopped(v, true);
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    cr_assert_eq(tg_verify_feed(v, t.b, t.n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(nnotes, 0);
    cr_assert_eq(got[0].kind, TG_VERIFY_UNSTOPPED);
    cr_assert_not(sum_of(v, "host-a")->open);
    cr_assert_eq(sum_of(v, "host-a")->unstopped, 1);
    tg_verify_free(v);

    add_ev(&t, "host-a", 4, "router.stopping");
    add_ev(&t, "host-a", 5, "agent.exited");
    v = vnew();
    tg_verify_set_stopped(v, true);
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    cr_assert_eq(tg_verify_feed(v, t.b, t.n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot + nnotes, 0, "%s", ngot ? got[0].msg : notes[0].msg);
    cr_assert_not(sum_of(v, "host-a")->open);
    tg_verify_free(v);
}

/* audit.reopened (the file deleted or moved away under the writer) is a
 * valid event, and no finding by itself. */
Test(verify, audit_reopened_is_accepted)
{
    char line[TG_AUDIT_LINE_MAX];
    text_t t = {.n = 0};
    tg_audit_ev_t ev;

    add(&t, "host-a", 1);
    tg_audit_ev_init(&ev);
    ev.event = "audit.reopened";
    ev.reason = "deleted";
    ev.count = 3;
    long n = tg_audit_encode(line, sizeof(line), &ev, 2, TS_EXAMPLE, "host-a");
    cr_assert_gt(n, 0);
    add_raw(&t, line);
    add_ev(&t, "host-a", 3, "router.stopping");
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot + nnotes, 0, "%s", ngot ? got[0].msg : notes[0].msg);
    tg_verify_free(v);
}

/* ...but a repeat of the first line itself is a duplicate, and a gap
 * in the first run is still reported when the second starts. */
Test(verify, repeated_first_line_is_a_duplicate_not_a_run)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    add(&t, "host-a", 1);
    add(&t, "host-a", 4); /* 3 missing */
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 2);
    cr_assert_eq(got[0].kind, TG_VERIFY_DUPLICATE);
    cr_assert_eq(got[0].line, 3);
    cr_assert_eq(got[1].kind, TG_VERIFY_GAP);
    cr_assert_eq(got[1].seq, 3);
    cr_assert_eq(sum_of(v, "host-a")->runs, 1);
    tg_verify_free(v);
}

/* Oldest rotated files removed: the run starts above 1 and that is fine. */
Test(verify, run_starting_above_one_is_not_a_gap)
{
    text_t t = {.n = 0};
    for (uint64_t s = 50; s <= 60; s++)
        add(&t, "host-a", s);
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 0);
    cr_assert_eq(sum_of(v, "host-a")->first_seq, 50);
    tg_verify_free(v);
}

Test(verify, byte_by_byte_feed_equals_whole_feed)
{
    text_t t = {.n = 0};
    for (uint64_t s = 1; s <= 20; s++)
        if (s != 7)
            add(&t, "host-a", s);
    tg_verify_t *v = vnew();
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    for (size_t i = 0; i < t.n; i++)
        cr_assert_eq(tg_verify_feed(v, t.b + i, 1), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_GAP);
    cr_assert_eq(got[0].seq, 7);
    cr_assert_eq(got[0].line, 7);
    cr_assert_eq(sum_of(v, "host-a")->events, 19);
    tg_verify_free(v);
}

Test(verify, torn_last_line_is_reported)
{
    text_t t = {.n = 0};
    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    t.n -= 20; /* cut the last line short, newline included */
    tg_verify_t *v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].kind, TG_VERIFY_SCHEMA);
    cr_assert_eq(got[0].line, 2);
    cr_assert_str_eq(got[0].msg, "schema: the last line is cut short (no newline and not a "
                                 "complete JSON object)");
    tg_verify_free(v);

    /* complete JSON but no newline: counted, and reported as torn */
    t.n = 0;
    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    t.n--;
    v = run(&t);
    cr_assert_eq(ngot, 1);
    cr_assert_str_eq(got[0].msg, "schema: no newline at the end of the file (a torn or "
                                 "unfinished write)");
    cr_assert_eq(sum_of(v, "host-a")->events, 2);
    tg_verify_free(v);
}

Test(verify, overlong_line_is_skipped_and_reading_goes_on)
{
    static char big[TG_VERIFY_LINE_MAX + 100];
    text_t t = {.n = 0};

    memset(big, 'x', sizeof(big));
    tg_verify_t *v = vnew();
    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    add(&t, "host-a", 1);
    cr_assert_eq(tg_verify_feed(v, t.b, t.n), 0);
    cr_assert_eq(tg_verify_feed(v, big, sizeof(big)), 0);
    cr_assert_eq(tg_verify_feed(v, big, 10), 0);
    t.n = 0;
    add_raw(&t, "\n");
    add(&t, "host-a", 2);
    cr_assert_eq(tg_verify_feed(v, t.b, t.n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot, 1);
    cr_assert_eq(got[0].line, 2);
    cr_assert_str_eq(got[0].msg, "schema: line longer than 65536 bytes (not read)");
    cr_assert_eq(sum_of(v, "host-a")->events, 2);
    tg_verify_free(v);
}

/* Gaps and duplicates are judged on the set of seqs, so files of one run
 * may come in any order; reordering is judged inside a file. */
Test(verify, files_of_one_run_in_any_order)
{
    text_t a = {.n = 0}, b = {.n = 0};
    for (uint64_t s = 1; s <= 10; s++)
        add(&a, "host-a", s);
    for (uint64_t s = 11; s <= 20; s++)
        add(&b, "host-a", s);
    tg_verify_t *v = vnew();
    cr_assert_eq(tg_verify_begin(v, "new"), 0);
    cr_assert_eq(tg_verify_feed(v, b.b, b.n), 0);
    cr_assert_eq(tg_verify_begin(v, "old"), 0);
    cr_assert_eq(tg_verify_feed(v, a.b, a.n), 0);
    cr_assert_eq(tg_verify_finish(v), 0);
    cr_assert_eq(ngot, 0, "%s", ngot ? got[0].msg : "");
    cr_assert_eq(sum_of(v, "host-a")->first_seq, 1);
    cr_assert_eq(sum_of(v, "host-a")->last_seq, 20);
    tg_verify_free(v);
}

Test(verify, too_many_instances_is_an_error_not_a_crash)
{
    tg_verify_t *v = vnew();
    char line[256];

    cr_assert_eq(tg_verify_begin(v, "t.jsonl"), 0);
    int rc = 0;
    for (int i = 0; i <= TG_VERIFY_INSTANCES_MAX && rc == 0; i++) {
        int n = snprintf(line, sizeof(line),
                         "{\"v\":1,\"ts\":\"2026-11-25T22:48:21.123Z\",\"seq\":1,"
                         "\"instance\":\"h%d\",\"event\":\"router.started\"}\n",
                         i);
        rc = tg_verify_feed(v, line, (size_t)n);
    }
    cr_assert_eq(rc, -E2BIG);
    cr_assert_eq(tg_verify_ninstances(v), TG_VERIFY_INSTANCES_MAX);
    tg_verify_free(v);
}

/* ---- CLI ------------------------------------------------------------------ */

TestSuite(verify_cli, .init = tgh_tmp_init, .fini = tgh_cleanup);

static void write_file(const char *name, const text_t *t, char *path, size_t cap)
{
    tgh_tmp_path(path, cap, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(t->b, 1, t->n, f), t->n);
    fclose(f);
}

static char out[1 << 16];

/* Writable argument words (string literals are const here). */
static char W_VERIFY[] = "verify", W_QUIET[] = "--quiet", W_BOGUS[] = "--bogus",
            W_FROB[] = "frobnicate", W_HELP[] = "--help", W_STOPPED[] = "--stopped";

/* Run tg_cli_audit with stdout and stderr captured into out / err. */
static int cli(char *err, size_t errcap, int argc, char **argv)
{
    char opath[128], epath[128];
    tgh_tmp_path(opath, sizeof opath, ".out");
    tgh_tmp_path(epath, sizeof epath, ".err");
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = tg_cli_audit(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);

    FILE *f = fopen(opath, "r");
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    f = fopen(epath, "r");
    n = fread(err, 1, errcap - 1, f);
    err[n] = '\0';
    fclose(f);
    return rc;
}

Test(verify_cli, rotated_set_in_any_order_with_a_restart)
{
    char p0[128], p1[128], p2[128], p10[128], err[1024];
    text_t t = {.n = 0};

    /* oldest .10: 1..10; .2: 11..15, then a restart 1..3; .1: 4..6; live: 7..9 */
    for (uint64_t s = 1; s <= 10; s++)
        add(&t, "host-a", s);
    write_file("audit.jsonl.10", &t, p10, sizeof(p10));
    t.n = 0;
    for (uint64_t s = 11; s <= 14; s++)
        add(&t, "host-a", s);
    add_ev(&t, "host-a", 15, "router.stopping");
    for (uint64_t s = 1; s <= 3; s++)
        t.n += enc(t.b + t.n, sizeof(t.b) - t.n, "host-a", s, "router.started", TG_AUDIT_ABSENT,
                   TS_EXAMPLE + 99999 + (int64_t)s);
    write_file("audit.jsonl.2", &t, p2, sizeof(p2));
    t.n = 0;
    for (uint64_t s = 4; s <= 6; s++)
        add(&t, "host-a", s);
    write_file("audit.jsonl.1", &t, p1, sizeof(p1));
    t.n = 0;
    for (uint64_t s = 7; s <= 9; s++)
        add(&t, "host-a", s);
    write_file("audit.jsonl", &t, p0, sizeof(p0));

    /* as a shell glob sorts them, and reversed */
    char *glob[] = {W_VERIFY, p0, p1, p10, p2};
    cr_assert_eq(cli(err, sizeof(err), 5, glob), 0, "out: %s err: %s", out, err);
    char want[1024];
    snprintf(want, sizeof(want),
             "%s:3: host-a: note: no router.stopping after seq 9: the run is still going, or it "
             "ended without router.stopping (killed, crashed, or its last events not written)\n"
             "host-a: ok events=24 runs=2 seq=1..9 missing=0 unexplained=0 duplicates=0 "
             "reordered=0 schema=0 dropped=0 unstopped=0 open=1\n",
             p0);
    cr_assert_str_eq(out, want);
    cr_assert_str_eq(err, "");
    char *rev[] = {W_VERIFY, p2, p10, p0, p1};
    cr_assert_eq(cli(err, sizeof(err), 5, rev), 0, "out: %s", out);
}

Test(verify_cli, findings_name_file_and_line_and_exit_1)
{
    char p[128], err[1024];
    text_t t = {.n = 0};

    add(&t, "host-a", 1);
    add(&t, "host-a", 2);
    add(&t, "host-a", 5);
    add(&t, "host-b", 1);
    add(&t, "host-a", 5);
    write_file("audit.jsonl", &t, p, sizeof(p));
    char *argv[] = {W_VERIFY, p};
    cr_assert_eq(cli(err, sizeof(err), 2, argv), 1);
    char want[2048];
    snprintf(want, sizeof(want),
             "%s:5: host-a: duplicate: seq 5 was seen before in this run\n"
             "%s:3: host-a: gap: seq 3..4 missing (2 events), not reported by any "
             "audit.dropped\n"
             "%s:3: host-a: note: no router.stopping after seq 5: the run is still going, or it "
             "ended without router.stopping (killed, crashed, or its last events not written)\n"
             "%s:4: host-b: note: no router.stopping after seq 1: the run is still going, or it "
             "ended without router.stopping (killed, crashed, or its last events not written)\n"
             "host-a: FAIL events=3 runs=1 seq=1..5 missing=2 unexplained=2 duplicates=1 "
             "reordered=0 schema=0 dropped=0 unstopped=0 open=1\n"
             "host-b: ok events=1 runs=1 seq=1..1 missing=0 unexplained=0 duplicates=0 "
             "reordered=0 schema=0 dropped=0 unstopped=0 open=1\n",
             p, p, p, p);
    cr_assert_str_eq(out, want);

    char *quiet[] = {W_VERIFY, W_QUIET, p};
    cr_assert_eq(cli(err, sizeof(err), 3, quiet), 1);
    cr_assert_eq(strncmp(out, "host-a: FAIL", 12), 0, "%s", out);
}

/* A run that ended without router.stopping fails verify when a later run
 * shows it is over; the last run only with --stopped. */
Test(verify_cli, a_run_without_router_stopping_fails_once_known_over)
{
    char p[128], err[1024], want[2048];
    text_t t = {.n = 0};

    add_ev(&t, "host-a", 1, "router.started");
    add(&t, "host-a", 2);
    add(&t, "host-a", 3); /* the disk filled up: nothing more of this run */
    for (uint64_t s = 1; s <= 2; s++)
        t.n += enc(t.b + t.n, sizeof(t.b) - t.n, "host-a", s, "router.started", TG_AUDIT_ABSENT,
                   TS_EXAMPLE + 99999 + (int64_t)s);
    write_file("audit.jsonl", &t, p, sizeof(p));
    char *argv[] = {W_VERIFY, W_QUIET, p};
    cr_assert_eq(cli(err, sizeof(err), 3, argv), 1, "out: %s", out);
    cr_assert_str_eq(out, "host-a: FAIL events=5 runs=2 seq=1..2 missing=0 unexplained=0 "
                          "duplicates=0 reordered=0 schema=0 dropped=0 unstopped=1 open=1\n");
    char *loud[] = {W_VERIFY, p};
    cr_assert_eq(cli(err, sizeof(err), 2, loud), 1, "out: %s", out);
    snprintf(want, sizeof(want),
             "%s:3: host-a: ended without router.stopping (seq 3 is the run's last event): "
             "toolgate was killed or crashed, or its last events could not be written\n",
             p);
    cr_assert_eq(strncmp(out, want, strlen(want)), 0, "%s", out);

    /* only the one run: fine while it may still be going, not once stopped */
    t.n = 0;
    add_ev(&t, "host-a", 1, "router.started");
    add(&t, "host-a", 2);
    write_file("audit.jsonl", &t, p, sizeof(p));
    cr_assert_eq(cli(err, sizeof(err), 3, argv), 0, "out: %s", out);
    cr_assert_not_null(strstr(out, " ok "), "%s", out);
    cr_assert_not_null(strstr(out, "unstopped=0 open=1"), "%s", out);
    char *stopped[] = {W_VERIFY, W_QUIET, W_STOPPED, p};
    cr_assert_eq(cli(err, sizeof(err), 4, stopped), 1, "out: %s", out);
    cr_assert_not_null(strstr(out, "FAIL"), "%s", out);
    cr_assert_not_null(strstr(out, "unstopped=1 open=0"), "%s", out);

    /* a clean stop: router.stopping, then the agents' exits */
    add_ev(&t, "host-a", 3, "router.stopping");
    add_ev(&t, "host-a", 4, "agent.exited");
    write_file("audit.jsonl", &t, p, sizeof(p));
    cr_assert_eq(cli(err, sizeof(err), 4, stopped), 0, "out: %s", out);
    cr_assert_not_null(strstr(out, "unstopped=0 open=0"), "%s", out);
}

Test(verify_cli, unattributed_lines_fail_too)
{
    char p[128], err[1024];
    text_t t = {.n = 0};

    add_raw(&t, "garbage\n");
    write_file("audit.jsonl", &t, p, sizeof(p));
    char *argv[] = {W_VERIFY, p};
    cr_assert_eq(cli(err, sizeof(err), 2, argv), 1);
    char want[512];
    snprintf(want, sizeof(want),
             "%s:1: schema: not valid JSON (near byte 7)\n"
             "(no instance): FAIL lines=1 (lines without a usable instance)\n",
             p);
    cr_assert_str_eq(out, want);
}

Test(verify_cli, usage_and_io_errors_exit_2)
{
    char p[128], err[1024], missing[128];
    text_t t = {.n = 0};

    add(&t, "host-a", 1);
    write_file("audit.jsonl", &t, p, sizeof(p));
    tgh_tmp_path(missing, sizeof missing, "nope.jsonl");

    char *none[] = {W_VERIFY};
    cr_assert_eq(cli(err, sizeof(err), 1, none), 2);
    cr_assert_not_null(strstr(err, "no FILE given"), "%s", err);

    char *opt[] = {W_VERIFY, W_BOGUS, p};
    cr_assert_eq(cli(err, sizeof(err), 3, opt), 2);
    cr_assert_str_eq(err, "toolgate audit verify: unknown option '--bogus' (expected --quiet, "
                          "--stopped, then FILE...)\n");

    char *sub[] = {W_FROB};
    cr_assert_eq(cli(err, sizeof(err), 1, sub), 2);
    cr_assert_str_eq(err, "toolgate audit: unknown subcommand 'frobnicate' (expected verify)\n");

    cr_assert_eq(cli(err, sizeof(err), 0, none), 2);

    /* a missing file: the others are still checked, the result is 2 */
    char *io[] = {W_VERIFY, p, missing};
    cr_assert_eq(cli(err, sizeof(err), 3, io), 2);
    char want[512];
    snprintf(want, sizeof(want),
             "toolgate audit verify: %s: cannot open: %s (give an audit file: the config's "
             "audit.path or audit.sinks[].path, by default $XDG_STATE_HOME/toolgate/audit.jsonl)\n",
             missing, strerror(ENOENT));
    cr_assert_str_eq(err, want);
    cr_assert_not_null(strstr(out, "\nhost-a: ok"), "%s", out);

    /* Issue 20 item 17: a missing file alone is not "no events in 1
     * file": stdout says nothing, stderr that it does not exist. */
    char *gone[] = {W_VERIFY, missing};
    cr_assert_eq(cli(err, sizeof(err), 2, gone), 2);
    cr_assert_str_eq(err, want);
    cr_assert_str_eq(out, "", "%s", out);
    /* With a readable empty file, only that one counts. */
    char empty[128];
    text_t none_text = {.n = 0};
    write_file("empty.jsonl", &none_text, empty, sizeof(empty));
    char *mixed[] = {W_VERIFY, empty, missing};
    cr_assert_eq(cli(err, sizeof(err), 3, mixed), 2);
    cr_assert_str_eq(out, "no events in 1 file\n");

    char *dir[] = {W_VERIFY, tgh_tmp};
    cr_assert_eq(cli(err, sizeof(err), 2, dir), 2);
    cr_assert_not_null(strstr(err, strerror(EISDIR)), "%s", err);

    char *twice[] = {W_VERIFY, p, p};
    cr_assert_eq(cli(err, sizeof(err), 3, twice), 2);
    cr_assert_not_null(strstr(err, "given twice"), "%s", err);

    char *help[] = {W_VERIFY, W_HELP};
    cr_assert_eq(cli(err, sizeof(err), 2, help), 0);
    cr_assert_eq(strncmp(out, "usage: toolgate audit verify", 28), 0, "%s", out);
    char *help2[] = {W_HELP};
    cr_assert_eq(cli(err, sizeof(err), 1, help2), 0);
}

Test(verify_cli, empty_file_is_clean)
{
    char p[128], err[256];
    text_t t = {.n = 0};

    write_file("audit.jsonl", &t, p, sizeof(p));
    char *argv[] = {W_VERIFY, p};
    cr_assert_eq(cli(err, sizeof(err), 2, argv), 0);
    cr_assert_str_eq(out, "no events in 1 file\n");
}
