/* Audit Redis Stream sink against a real redis-server (skipped when none is
 * installed): delivery in order, the disk spool while Redis is away and
 * its replay, Redis killed and restarted, a full spool, MAXLEN trimming,
 * and the sink's config. Every stream is checked with the verify core. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/verify.h"
#include "config/config.h"
#include "tests/tg_audit.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

#define STREAM "tg:audit:test"

static char spool[TGH_PATH + 32];
static srv_t R;

static redisContext *connect_test(void)
{
    redisContext *c = srv_connect(&R);
    if (c != NULL && c->err != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Start redis-server on R's port, persisting every write (AOF, fsync
 * always) in its dir, so that a restart finds what was written. */
static void redis_start(void)
{
    srv_spawn(&R);
}

static void redis_kill(void)
{
    if (R.pid > 0)
        srv_kill(&R);
}

static void setup(void)
{
    /* a broken connection raises SIGPIPE on write; toolgate ignores it
     * process-wide, as any user of this sink must */
    signal(SIGPIPE, SIG_IGN);
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    srv_prepare(&R, false, aof);
    tgh_tmp_init();
    tgh_tmp_path(spool, sizeof spool, "spool/audit.spool");
}

static void teardown(void)
{
    srv_done(&R);
    tgh_cleanup();
}

TestSuite(audit_redis, .init = setup, .fini = teardown);

static tg_audit_sink_cfg_t redis_cfg(void)
{
    static char stream[] = STREAM;
    tg_audit_sink_cfg_t s;

    tg_config_sink_defaults(&s, TG_AUDIT_SINK_REDIS_STREAM);
    snprintf(s.ep.host, sizeof(s.ep.host), "127.0.0.1");
    s.ep.port = (uint16_t)R.port;
    s.stream = stream;
    s.spool = spool;
    s.timeout_ms = 500;
    return s;
}

static void emit_range(tg_audit_t *a, uv_loop_t *loop, int from, int to)
{
    for (int i = from; i < to; i++) {
        aud_emit(a, "call.completed", i);
        if (i % 16 == 15)
            uv_run(loop, UV_RUN_DEFAULT);
    }
    uv_run(loop, UV_RUN_DEFAULT);
}

static off_t spool_size(void)
{
    struct stat st;
    return stat(spool, &st) == 0 ? st.st_size : -1;
}

typedef struct stream_text {
    char *p;
    size_t n;
    size_t entries;
} stream_text_t;

/* Every entry's "json" field, one per line, in stream order. */
static stream_text_t read_stream(void)
{
    stream_text_t t = {malloc(1 << 22), 0, 0};
    redisContext *c = connect_test();

    cr_assert_not_null(c);
    redisReply *r = redisCommand(c, "XRANGE %s - +", STREAM);
    cr_assert_not_null(r);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        cr_assert_eq(e->elements, 2);
        redisReply *f = e->element[1];
        cr_assert_eq(f->elements, 2);
        cr_assert_str_eq(f->element[0]->str, "json");
        cr_assert_lt(t.n + f->element[1]->len + 1, (size_t)1 << 22);
        memcpy(t.p + t.n, f->element[1]->str, f->element[1]->len);
        t.n += f->element[1]->len;
        t.p[t.n++] = '\n';
        t.entries++;
    }
    freeReplyObject(r);
    redisFree(c);
    return t;
}

static size_t nfound, ngaps, ndropped, nunexplained;

static void on_finding(void *ud, const tg_verify_finding_t *f)
{
    (void)ud;
    if (f->open)
        return; /* a run that may still be going is a note, not a finding */
    nfound++;
    ngaps += f->kind == TG_VERIFY_GAP;
    ndropped += f->kind == TG_VERIFY_DROPPED;
    nunexplained += f->kind == TG_VERIFY_GAP && !f->explained;
    cr_log_info("%s:%llu: %s", f->file, (unsigned long long)f->line, f->msg);
}

/* Verify the stream; returns host-a's summary. */
static tg_verify_summary_t verify_stream(const stream_text_t *t)
{
    tg_verify_t *v = tg_verify_new(on_finding, NULL);

    nfound = ngaps = ndropped = nunexplained = 0;
    cr_assert_eq(tg_verify_begin(v, "stream"), 0);
    cr_assert_eq(tg_verify_feed(v, t->p, t->n), 0);
    return aud_verify_summary(v);
}

Test(audit_redis, delivers_every_event_in_order)
{
    uv_loop_t loop;

    redis_start();
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_range(a, &loop, 0, 300);
    cr_assert_eq(tg_audit_dropped(a), 0);
    aud_close(a, &loop);

    stream_text_t t = read_stream();
    cr_assert_eq(t.entries, 300);
    tg_verify_summary_t sum = verify_stream(&t);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.events, 300);
    cr_assert_eq(sum.last_seq, 300);
    cr_assert_eq(spool_size(), 0);
    free(t.p);
}

Test(audit_redis, spools_while_away_and_replays_in_order)
{
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_range(a, &loop, 0, 50); /* nobody listens yet */
    cr_assert_eq(tg_audit_dropped(a), 0);
    cr_assert_gt(spool_size(), 50 * 80);

    redis_start();
    aud_run_for(&loop, 1500); /* the sync timer reconnects and replays */
    cr_assert_eq(spool_size(), 0);
    stream_text_t t = read_stream();
    cr_assert_eq(t.entries, 50);
    free(t.p);

    emit_range(a, &loop, 50, 100);
    aud_close(a, &loop);
    t = read_stream();
    cr_assert_eq(t.entries, 100);
    tg_verify_summary_t sum = verify_stream(&t);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.events, 100);
    free(t.p);
}

/* The test: Redis killed and restarted loses no event. */
Test(audit_redis, redis_killed_and_restarted_loses_nothing)
{
    uv_loop_t loop;

    redis_start();
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_range(a, &loop, 0, 100);
    redis_kill();
    emit_range(a, &loop, 100, 200); /* the connection breaks: spooled */
    cr_assert_gt(spool_size(), 0);
    redis_start(); /* the AOF brings the first 100 back */
    aud_run_for(&loop, 1500);
    emit_range(a, &loop, 200, 300);
    cr_assert_eq(tg_audit_dropped(a), 0);
    aud_close(a, &loop);

    stream_text_t t = read_stream();
    cr_assert_eq(t.entries, 300);
    tg_verify_summary_t sum = verify_stream(&t);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.last_seq, 300);
    cr_assert_eq(spool_size(), 0);
    free(t.p);
}

/* What a previous run left in the spool is sent before the new run. */
Test(audit_redis, spool_left_by_a_previous_run_goes_first)
{
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_range(a, &loop, 0, 19);
    aud_emit(a, "router.stopping", TG_AUDIT_ABSENT); /* a clean stop (verify checks it) */
    aud_close(a, &loop); /* Redis never came: all 20 stay spooled */
    cr_assert_gt(spool_size(), 0);

    /* a crash tore the spool's last line */
    int fd = open(spool, O_WRONLY | O_APPEND);
    cr_assert_eq(write(fd, "{\"v\":1,\"ts", 10), 10);
    close(fd);

    redis_start();
    cr_assert_eq(uv_loop_init(&loop), 0);
    a = aud_open_sinks(&loop, &s, 1, 64);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "router.started";
    tg_audit_emit(a, &ev); /* seq 1 of the new run */
    uv_run(&loop, UV_RUN_DEFAULT);
    aud_close(a, &loop);

    stream_text_t t = read_stream();
    cr_assert_eq(t.entries, 21);
    cr_assert_not_null(strstr(t.p + t.n - 120, "\"event\":\"router.started\""));
    tg_verify_summary_t sum = verify_stream(&t);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.runs, 2);
    free(t.p);
}

/* A full spool refuses lines; they are counted and reported, and the
 * stream's gap is explained by the audit.dropped that follows. */
Test(audit_redis, full_spool_loss_is_counted_and_explained)
{
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    s.spool_max_bytes = 4096;
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 256);
    emit_range(a, &loop, 0, 100); /* ~10 KiB: about 40 lines fit */
    uint64_t lost = tg_audit_dropped(a);
    cr_assert_gt(lost, 40);
    cr_assert_lt(lost, 70);
    cr_assert_leq(spool_size(), 4096);

    redis_start();
    aud_run_for(&loop, 1500);
    emit_range(a, &loop, 100, 101); /* brings the audit.dropped report */
    aud_close(a, &loop);

    stream_text_t t = read_stream();
    tg_verify_summary_t sum = verify_stream(&t);
    cr_assert_eq(sum.missing, lost);
    cr_assert_eq(nunexplained, 0);
    cr_assert_geq(ndropped, 1);
    cr_assert_eq(sum.dropped_events, lost);
    free(t.p);
}

Test(audit_redis, maxlen_trims_the_stream)
{
    uv_loop_t loop;

    redis_start();
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = redis_cfg();
    s.maxlen = 10;
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_range(a, &loop, 0, 1000);
    aud_close(a, &loop);

    redisContext *c = connect_test();
    redisReply *r = redisCommand(c, "XLEN %s", STREAM);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    /* "~" trims whole nodes (100 entries by default), never below 10 */
    cr_assert_geq(r->integer, 10);
    cr_assert_lt(r->integer, 300);
    freeReplyObject(r);
    redisFree(c);
}

Test(audit_redis, config_redis_stream_sink)
{
    tg_config_t cfg;
    tg_err_t err;
    static const char good[] =
        "{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://:pw@10.0.0.5:6380/2\","
        "\"stream\":\"audit:a\",\"maxlen\":5000,\"spool\":\"/var/spool/tg\","
        "\"spool_max_bytes\":\"1Gi\",\"timeout\":\"250ms\"},"
        "{\"kind\":\"redis_stream\",\"url\":\"unix:/run/redis.sock\",\"spool\":\"/s2\"}]}}";

    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", good, strlen(good), &err), 0, "%s",
                 err.msg);
    cr_assert_eq(cfg.naudit_sinks, 2);
    const tg_audit_sink_cfg_t *s = &cfg.audit_sinks[0];
    cr_assert_eq(s->kind, TG_AUDIT_SINK_REDIS_STREAM);
    cr_assert_str_eq(s->url, "redis://:pw@10.0.0.5:6380/2");
    cr_assert_str_eq(s->stream, "audit:a");
    cr_assert_eq(s->maxlen, 5000);
    cr_assert_str_eq(s->spool, "/var/spool/tg");
    cr_assert_eq(s->spool_max_bytes, 1ull << 30);
    cr_assert_eq(s->timeout_ms, 250);
    s = &cfg.audit_sinks[1];
    cr_assert_null(s->stream); /* the default key */
    cr_assert_eq(s->maxlen, TG_DEF_AUDIT_MAXLEN);
    cr_assert_eq(s->spool_max_bytes, TG_DEF_AUDIT_SPOOL_BYTES);
    cr_assert_eq(s->timeout_ms, 1000);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"spool\":\"/s\"}]}}",
         "t.json:1:20: audit.sinks[0]: missing required key \"url\" (the Redis server)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\"}]}}",
         "t.json:1:20: audit.sinks[0]: missing required key \"spool\" (the file that holds "
         "events while Redis is away)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"http://u:secret@h\","
         "\"spool\":\"/s\"}]}}",
         "t.json:1:49: audit.sinks[0].url: expected a redis://[[user]:password@]host[:port][/db] "
         "or unix:/path[?db=N] URL"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\",\"spool\":\"/s\","
         "\"stream\":\"a b\"}]}}",
         "t.json:1:83: audit.sinks[0].stream: expected a key without spaces or control "
         "characters"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\",\"spool\":\"/s\","
         "\"maxlen\":0}]}}",
         "t.json:1:83: audit.sinks[0].maxlen: 0 is out of range (expected 1 to 1000000000)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\",\"spool\":\"/s\","
         "\"spool_max_bytes\":\"1Ki\"}]}}",
         "t.json:1:92: audit.sinks[0].spool_max_bytes: \"1Ki\" is out of range (expected 4Ki to "
         "1Ti)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\",\"spool\":\"/s\","
         "\"timeout\":\"2m\"}]}}",
         "t.json:1:84: audit.sinks[0].timeout: \"2m\" is out of range (expected at most 1m)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"redis_stream\",\"url\":\"redis://h\",\"spool\":\"/s\","
         "\"path\":\"/p\"}]}}",
         "t.json:1:74: audit.sinks[0]: unknown key \"path\" (allowed: kind, url, stream, maxlen, "
         "spool, spool_max_bytes, timeout)"},
        {"{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"/s\"},{\"kind\":\"redis_stream\","
         "\"url\":\"redis://h\",\"spool\":\"/s\"}]}}",
         "t.json:1:97: audit.sinks[1].spool: same file as audit.sinks[0]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(tg_config_load_buffer(&cfg, "t.json", bad[i].text, strlen(bad[i].text), &err),
                     -1, "accepted %zu", i);
        cr_expect_str_eq(err.msg, bad[i].msg, "case %zu: got %s", i, err.msg);
        cr_expect_null(strstr(err.msg, "secret"), "case %zu leaks the password", i);
    }
    tg_config_free(&cfg);
}
