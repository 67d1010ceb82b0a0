/* Audit sinks: file rotation (no line split or lost, keep honoured, keep 0,
 * oversize lines, existing and torn files), fsync policies and their
 * timer, the stderr sink (also on a slow non-blocking pipe), several sinks
 * at once and a failing one, and the audit.sinks config with its errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/sink.h"
#include "audit/verify.h"
#include "config/config.h"
#include "tests/tg_audit.h"
#include "tests/tg_harness.h"

#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031 /* Linux; glibc shows it only with _GNU_SOURCE */
#endif

TestSuite(sinks, .init = tgh_tmp_init, .fini = tgh_cleanup);

static char base[128]; /* <tgh_tmp>/audit.jsonl */

static const char *audit_path(void)
{
    tgh_tmp_path(base, sizeof base, "audit.jsonl");
    return base;
}

static tg_audit_sink_cfg_t file_cfg(const char *path, uint64_t max_bytes, uint32_t keep,
                                    tg_audit_fsync_t fsync)
{
    tg_audit_sink_cfg_t s;

    tg_config_sink_defaults(&s, TG_AUDIT_SINK_FILE);
    s.path = (char *)path;
    s.max_bytes = max_bytes;
    s.keep = keep;
    s.fsync = fsync;
    return s;
}

/* Emit <n> events (count 0..n-1), letting the loop write every 16 so the
 * queue never overflows and batches of many sizes form. */
static void emit_many(tg_audit_t *a, uv_loop_t *loop, int n)
{
    for (int i = 0; i < n; i++) {
        aud_emit(a, "call.completed", i);
        if (i % 16 == 15)
            cr_assert_eq(uv_run(loop, UV_RUN_DEFAULT), 0);
    }
    cr_assert_eq(uv_run(loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_dropped(a), 0);
}

typedef struct blob {
    char *p;
    size_t n;
} blob_t;

/* Whole file, or p == NULL when it does not exist. */
static blob_t slurp(const char *path)
{
    blob_t b = {NULL, 0};
    FILE *f = fopen(path, "rb");

    if (f == NULL) {
        cr_assert_eq(errno, ENOENT, "%s: %s", path, strerror(errno));
        return b;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc((size_t)len + 1);
    b.n = fread(b.p, 1, (size_t)len, f);
    b.p[b.n] = '\0';
    fclose(f);
    return b;
}

static void rotated(char *buf, size_t cap, unsigned n)
{
    if (n == 0)
        snprintf(buf, cap, "%s", audit_path());
    else
        snprintf(buf, cap, "%s.%u", audit_path(), n);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Highest N with audit.jsonl.N present (0: none). */
static unsigned last_rotated(void)
{
    char p[192];
    unsigned n = 0;

    for (;;) {
        rotated(p, sizeof(p), n + 1);
        if (!exists(p))
            return n;
        n++;
    }
}

static json_int_t member_int(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    cr_assert(json_is_integer(v), "no integer %s", key);
    return json_integer_value(v);
}

/* Walk the set oldest to newest: every file ends with '\n', is at most
 * <max> bytes unless it holds one line, and every line parses. Fills
 * seqs[] and counts[] in file order; returns the number of lines. */
static size_t read_set(unsigned last, uint64_t max, json_int_t *seqs, json_int_t *counts,
                       size_t cap)
{
    size_t n = 0;
    char p[192];

    for (unsigned r = last + 1; r-- > 0;) {
        rotated(p, sizeof(p), r);
        blob_t b = slurp(p);
        cr_assert_not_null(b.p, "%s missing", p);
        cr_assert(b.n == 0 || b.p[b.n - 1] == '\n', "%s does not end with a newline", p);
        size_t lines = 0;
        for (char *s = b.p; *s != '\0';) {
            char *nl = strchr(s, '\n');
            json_error_t je;
            json_t *j = json_loadb(s, (size_t)(nl - s), 0, &je);
            cr_assert_not_null(j, "%s: line %zu does not parse: %s", p, lines + 1, je.text);
            cr_assert_lt(n, cap);
            seqs[n] = member_int(j, "seq");
            counts[n] = json_object_get(j, "count") ? member_int(j, "count") : -1;
            json_decref(j);
            n++;
            lines++;
            s = nl + 1;
        }
        cr_assert(b.n <= max || lines == 1, "%s: %zu bytes in %zu lines > %llu", p, b.n, lines,
                  (unsigned long long)max);
        free(b.p);
    }
    return n;
}

static size_t nfound;

static void count_findings(void *ud, const tg_verify_finding_t *f)
{
    (void)ud;
    nfound += !f->open; /* a run that may still be going is a note */
}

/* Verify the rotated set with the core, feeding files in <order>
 * (rotation numbers). Returns its summary of host-a (copied). */
static tg_verify_summary_t verify_set(const unsigned *order, size_t n)
{
    tg_verify_t *v = tg_verify_new(count_findings, NULL);
    char p[192];

    nfound = 0;
    for (size_t i = 0; i < n; i++) {
        rotated(p, sizeof(p), order[i]);
        blob_t b = slurp(p);
        cr_assert_eq(tg_verify_begin(v, p), 0);
        cr_assert_eq(tg_verify_feed(v, b.p, b.n), 0);
        free(b.p);
    }
    return aud_verify_summary(v);
}

/* ---- rotation -------------------------------------------------------------- */

#define MANY 3000

Test(sinks, rotation_keeps_every_event_exactly_once_and_verify_passes)
{
    static json_int_t seqs[MANY + 16], counts[MANY + 16];
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 2048, 1000, TG_AUDIT_FSYNC_NEVER);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_many(a, &loop, MANY);
    aud_close(a, &loop);

    unsigned last = last_rotated();
    cr_assert_gt(last, 100, "only %u rotations", last); /* ~20 lines a file */
    size_t n = read_set(last, 2048, seqs, counts, MANY + 16);
    cr_assert_eq(n, MANY);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(seqs[i], (json_int_t)i + 1, "line %zu", i);
        cr_assert_eq(counts[i], (json_int_t)i, "line %zu", i); /* emission order kept */
    }

    /* the core in writing order and in a scrambled one */
    unsigned *order = calloc(last + 1, sizeof(*order));
    for (unsigned i = 0; i <= last; i++)
        order[i] = last - i;
    tg_verify_summary_t sum = verify_set(order, last + 1);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.events, MANY);
    cr_assert_eq(sum.first_seq, 1);
    cr_assert_eq(sum.last_seq, MANY);
    for (unsigned i = 0; i + 1 <= last; i += 2) { /* swap pairs: the oldest comes second */
        unsigned t = order[i];
        order[i] = order[i + 1];
        order[i + 1] = t;
    }
    sum = verify_set(order, last + 1);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.events, MANY);

    /* and the CLI, given the set as a shell glob sorts it */
    char **argv = calloc(last + 3, sizeof(*argv));
    char verify[] = "verify";
    argv[0] = verify;
    for (unsigned i = 0; i <= last; i++) {
        argv[i + 1] = malloc(192);
        rotated(argv[i + 1], 192, i);
    }
    fflush(stdout);
    int so = dup(1), devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    int rc = tg_cli_audit((int)last + 2, argv);
    fflush(stdout);
    dup2(so, 1);
    close(so);
    close(devnull);
    cr_assert_eq(rc, 0);
    for (unsigned i = 0; i <= last; i++)
        free(argv[i + 1]);
    free(argv);
    free(order);
}

Test(sinks, keep_is_honoured_and_the_newest_events_stay)
{
    static json_int_t seqs[600], counts[600];
    uv_loop_t loop;
    char p[192];

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1024, 3, TG_AUDIT_FSYNC_INTERVAL);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_many(a, &loop, 500);
    aud_close(a, &loop);

    cr_assert_eq(last_rotated(), 3);
    rotated(p, sizeof(p), 4);
    cr_assert_not(exists(p));
    size_t n = read_set(3, 1024, seqs, counts, 600);
    cr_assert_gt(n, 10);
    cr_assert_lt(n, 100);
    cr_assert_eq(seqs[n - 1], 500);
    for (size_t i = 1; i < n; i++)
        cr_assert_eq(seqs[i], seqs[i - 1] + 1);

    unsigned order[] = {0, 1, 2, 3};
    tg_verify_summary_t sum = verify_set(order, 4);
    cr_assert_eq(nfound, 0); /* a run that starts after 1 is not a gap */
    cr_assert_eq(sum.first_seq, (uint64_t)seqs[0]);
    cr_assert_gt(sum.first_seq, 1);
}

Test(sinks, keep_zero_empties_the_file_in_place)
{
    static json_int_t seqs[64], counts[64];
    uv_loop_t loop;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1024, 0, TG_AUDIT_FSYNC_ALWAYS);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    emit_many(a, &loop, 200);
    aud_close(a, &loop);

    cr_assert_eq(last_rotated(), 0);
    size_t n = read_set(0, 1024, seqs, counts, 64);
    cr_assert_gt(n, 0);
    cr_assert_eq(seqs[n - 1], 200);
    for (size_t i = 1; i < n; i++)
        cr_assert_eq(seqs[i], seqs[i - 1] + 1);
}

/* Cuts fall between lines inside one batch; a line longer than max_bytes
 * gets a file of its own. */
Test(sinks, a_line_longer_than_max_bytes_is_alone_in_its_file)
{
    static json_int_t seqs[8], counts[8];
    uv_loop_t loop;
    char agent[301];
    tg_audit_ev_t ev;

    memset(agent, 'a', 300);
    agent[300] = '\0';
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 250, 10, TG_AUDIT_FSYNC_NEVER);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    aud_emit(a, "call.completed", 0); /* 103 bytes: two fit in 250 */
    tg_audit_ev_init(&ev);
    ev.event = "agent.started";
    ev.agent = agent;
    tg_audit_emit(a, &ev); /* ~400 bytes */
    aud_emit(a, "call.completed", 2);
    aud_emit(a, "call.completed", 3);
    cr_assert_eq(tg_audit_queued(a), 4); /* one batch */
    aud_close(a, &loop);

    cr_assert_eq(last_rotated(), 2);
    cr_assert_eq(read_set(2, 250, seqs, counts, 8), 4);
    char p[192];
    rotated(p, sizeof(p), 1);
    blob_t b = slurp(p);
    cr_assert_not_null(strstr(b.p, agent));
    cr_assert_eq(strchr(b.p, '\n'), b.p + b.n - 1); /* one line */
    free(b.p);
    rotated(p, sizeof(p), 0);
    b = slurp(p);
    cr_assert_leq(b.n, 250);
    cr_assert_eq(strchr(b.p, '\n') != b.p + b.n - 1, true); /* two lines */
    free(b.p);
}

/* What an existing file already holds counts towards max_bytes. */
Test(sinks, existing_content_counts_towards_max_bytes)
{
    uv_loop_t loop;
    char p1[192], line[TG_AUDIT_LINE_MAX];
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "call.completed";
    long len = tg_audit_encode(line, sizeof(line), &ev, 1, 0, "old");
    cr_assert_gt(len, 0);
    FILE *f = fopen(audit_path(), "wb");
    for (long written = 0; written + len <= 900; written += len)
        fwrite(line, 1, (size_t)len, f);
    fclose(f);
    struct stat st;
    cr_assert_eq(stat(audit_path(), &st), 0);
    off_t before = st.st_size;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1024, 2, TG_AUDIT_FSYNC_NEVER);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    aud_emit(a, "call.completed", 0);
    aud_emit(a, "call.completed", 1);
    aud_emit(a, "call.completed", 2);
    aud_close(a, &loop);

    rotated(p1, sizeof(p1), 1);
    blob_t old = slurp(p1), cur = slurp(audit_path());
    cr_assert_not_null(old.p);
    /* the old content plus as many new lines as fit in 1024 bytes */
    cr_assert_gt(old.n, (size_t)before);
    cr_assert_leq(old.n, 1024);
    cr_assert_not_null(strstr(old.p, "\"seq\":1,\"instance\":\"host-a\""));
    cr_assert_not_null(strstr(cur.p, "\"seq\":3,\"instance\":\"host-a\""));
    cr_assert_null(strstr(cur.p, "\"instance\":\"old\""));
    free(old.p);
    free(cur.p);
}

/* A file left torn by a crash is ended before our first line. */
Test(sinks, a_torn_existing_file_gets_its_line_ended)
{
    uv_loop_t loop;
    static const char torn[] = "{\"v\":1,\"ts\":\"2026-";

    FILE *f = fopen(audit_path(), "wb");
    fputs(torn, f);
    fclose(f);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1 << 20, 2, TG_AUDIT_FSYNC_NEVER);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 8);
    aud_emit(a, "router.started", TG_AUDIT_ABSENT);
    aud_close(a, &loop);

    blob_t b = slurp(audit_path());
    cr_assert_eq(memcmp(b.p, torn, sizeof(torn) - 1), 0);
    cr_assert_eq(b.p[sizeof(torn) - 1], '\n');
    json_error_t je;
    json_t *j = json_loads(b.p + sizeof(torn), 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    cr_assert_eq(member_int(j, "seq"), 1);
    json_decref(j);
    free(b.p);
}

/* ---- fsync ----------------------------------------------------------------- */

Test(sinks, every_fsync_policy_writes_everything)
{
    static const tg_audit_fsync_t policies[] = {TG_AUDIT_FSYNC_ALWAYS, TG_AUDIT_FSYNC_INTERVAL,
                                                TG_AUDIT_FSYNC_NEVER};
    static json_int_t seqs[64], counts[64];

    for (size_t i = 0; i < 3; i++) {
        uv_loop_t loop;
        char p[192];
        tgh_tmp_path(p, sizeof p, "audit.jsonl");
        unlink(p);
        cr_assert_eq(uv_loop_init(&loop), 0);
        tg_audit_sink_cfg_t s = file_cfg(p, 1 << 20, 1, policies[i]);
        tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
        emit_many(a, &loop, 40);
        aud_close(a, &loop);
        cr_assert_eq(read_set(0, 1 << 20, seqs, counts, 64), 40, "policy %zu", i);
    }
}

/* The interval policy's clock, driven by hand through the sink table. */
Test(sinks, interval_fsync_runs_at_most_once_per_interval)
{
    tg_audit_sink_t sk;
    tg_err_t err = {""};
    static char line[] = "{\"x\":1}\n";
    struct iovec iov = {.iov_base = line, .iov_len = sizeof(line) - 1};

    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_INTERVAL);
    s.fsync_interval_ms = 1000;
    cr_assert_eq(tg_audit_sink_file_open(&sk, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(sk.ops->sync(sk.ctx, 5000), 0); /* nothing written: nothing due */
    cr_assert_eq(sk.ops->write(sk.ctx, &iov, 1), (ssize_t)iov.iov_len);
    cr_assert_eq(sk.ops->sync(sk.ctx, 5000), 0); /* first one: synced at once */
    cr_assert_eq(sk.ops->write(sk.ctx, &iov, 1), (ssize_t)iov.iov_len);
    cr_assert_eq(sk.ops->sync(sk.ctx, 5400), 600); /* too soon: call back in 600 ms */
    cr_assert_eq(sk.ops->sync(sk.ctx, 5999), 1);
    cr_assert_eq(sk.ops->sync(sk.ctx, 6000), 0); /* due: synced */
    cr_assert_eq(sk.ops->sync(sk.ctx, 6001), 0); /* clean: nothing pending */
    cr_assert_eq(sk.ops->write(sk.ctx, &iov, 1), (ssize_t)iov.iov_len);
    cr_assert_eq(sk.ops->sync(sk.ctx, 6250), 750);
    sk.ops->close(sk.ctx);

    /* always and never have nothing to do later */
    for (int pol = TG_AUDIT_FSYNC_ALWAYS; pol <= TG_AUDIT_FSYNC_NEVER; pol++) {
        s.fsync = (tg_audit_fsync_t)pol;
        cr_assert_eq(tg_audit_sink_file_open(&sk, &s, &err), 0, "%s", err.msg);
        cr_assert_eq(sk.ops->write(sk.ctx, &iov, 1), (ssize_t)iov.iov_len);
        cr_assert_eq(sk.ops->sync(sk.ctx, 5000), 0);
        cr_assert_eq(sk.ops->write(sk.ctx, &iov, 1), (ssize_t)iov.iov_len);
        cr_assert_eq(sk.ops->sync(sk.ctx, 5001), 0);
        sk.ops->close(sk.ctx);
    }
    blob_t b = slurp(audit_path());
    cr_assert_eq(b.n, 7 * (sizeof(line) - 1));
    free(b.p);
}

/* A pending interval fsync arms a timer that never keeps the loop alive,
 * fires while something else does, and is closed cleanly. */
Test(sinks, pending_fsync_timer_never_holds_the_loop)
{
    uv_loop_t loop;
    uv_timer_t keep;

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_INTERVAL);
    s.fsync_interval_ms = 20;
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 8);
    aud_emit(a, "router.started", TG_AUDIT_ABSENT);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0); /* written and synced at once */
    aud_emit(a, "call.completed", 1);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0); /* written; its sync is pending */
    cr_assert_not(uv_loop_alive(&loop));

    /* keep the loop busy past the interval so the sync timer fires */
    uv_timer_init(&loop, &keep);
    uv_timer_start(&keep, aud_keepalive, 80, 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    uv_close((uv_handle_t *)&keep, NULL);

    /* and once more pending when the pipe closes */
    aud_emit(a, "call.completed", 2);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    aud_emit(a, "call.completed", 3);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    aud_close(a, &loop);

    unsigned order[] = {0};
    tg_verify_summary_t sum = verify_set(order, 1);
    cr_assert_eq(nfound, 0);
    cr_assert_eq(sum.events, 4);
}

/* ---- stderr and several sinks ------------------------------------------------ */

/* Point fd 2 at <path> (or at <fd> when path is NULL); returns the saved fd 2. */
static int redirect_stderr(const char *path, int fd)
{
    fflush(stderr);
    int saved = dup(2);
    int to = path != NULL ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600) : fd;
    cr_assert_geq(to, 0);
    dup2(to, 2);
    if (path != NULL)
        close(to);
    return saved;
}

static void restore_stderr(int saved)
{
    dup2(saved, 2);
    close(saved);
}

Test(sinks, stderr_sink_writes_whole_lines_to_fd_2)
{
    uv_loop_t loop;
    char ep[192];

    tgh_tmp_path(ep, sizeof ep, "stderr.out");
    int saved = redirect_stderr(ep, -1);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s;
    tg_config_sink_defaults(&s, TG_AUDIT_SINK_STDERR);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 64);
    /* the sink has its own descriptor: closing fd 2 (as the router's log
     * does at exit) does not stop it */
    restore_stderr(saved);
    emit_many(a, &loop, 5);
    aud_close(a, &loop);

    blob_t b = slurp(ep);
    int lines = 0;
    for (char *p = b.p; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    cr_assert_eq(lines, 5);
    cr_assert_eq(strncmp(b.p, "{\"v\":1,", 7), 0);
    cr_assert_not_null(strstr(b.p, "\"seq\":5,"));
    free(b.p);
}

typedef struct reader {
    int fd;
    char *buf;
    size_t n, cap;
} reader_t;

/* A slow reader: 512 bytes at a time, with a pause. */
static void slow_read(void *arg)
{
    reader_t *r = arg;
    struct timespec pause = {0, 200000};

    for (;;) {
        size_t want = r->cap - r->n < 512 ? r->cap - r->n : 512;
        ssize_t n = read(r->fd, r->buf + r->n, want);
        if (n <= 0)
            return;
        r->n += (size_t)n;
        nanosleep(&pause, NULL);
    }
}

/* The router's log makes fd 2 non-blocking when it is a pipe: the sink
 * waits for room instead of losing lines, and never splits one. */
Test(sinks, stderr_sink_on_a_slow_non_blocking_pipe_loses_nothing)
{
    uv_loop_t loop;
    uv_thread_t th;
    int pfd[2];
    reader_t r = {.n = 0, .cap = 1 << 20};

    cr_assert_eq(pipe(pfd), 0);
    (void)fcntl(pfd[1], F_SETPIPE_SZ, 4096);
    cr_assert_eq(fcntl(pfd[1], F_SETFL, O_NONBLOCK), 0);
    r.fd = pfd[0];
    r.buf = malloc(r.cap);
    int saved = redirect_stderr(NULL, pfd[1]);
    close(pfd[1]);
    cr_assert_eq(uv_thread_create(&th, slow_read, &r), 0);

    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_sink_cfg_t s;
    tg_config_sink_defaults(&s, TG_AUDIT_SINK_STDERR);
    tg_audit_t *a = aud_open_sinks(&loop, &s, 1, 512);
    for (int i = 0; i < 300; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    aud_close(a, &loop);
    restore_stderr(saved); /* the last write end: the reader sees EOF */
    cr_assert_eq(uv_thread_join(&th), 0);
    close(pfd[0]);

    cr_assert_gt(r.n, 300 * 80);
    r.buf[r.n] = '\0';
    int i = 0;
    for (char *p = r.buf; *p != '\0'; i++) {
        char *nl = strchr(p, '\n');
        cr_assert_not_null(nl);
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, NULL);
        cr_assert_not_null(j, "line %d split", i);
        cr_assert_eq(member_int(j, "seq"), i + 1);
        json_decref(j);
        p = nl + 1;
    }
    cr_assert_eq(i, 300);
    free(r.buf);
}

Test(sinks, several_sinks_get_the_same_bytes)
{
    uv_loop_t loop;
    char p2[192], ep[192];

    tgh_tmp_path(p2, sizeof p2, "second/audit.jsonl");
    tgh_tmp_path(ep, sizeof ep, "stderr.out");
    tg_audit_sink_cfg_t s[3];
    s[0] = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_INTERVAL);
    tg_config_sink_defaults(&s[1], TG_AUDIT_SINK_STDERR);
    s[2] = file_cfg(p2, 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    int saved = redirect_stderr(ep, -1);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_sinks(&loop, s, 3, 64);
    emit_many(a, &loop, 100);
    aud_close(a, &loop);
    restore_stderr(saved);

    blob_t b0 = slurp(audit_path()), b1 = slurp(ep), b2 = slurp(p2);
    cr_assert_gt(b0.n, 100 * 80);
    cr_assert_eq(b1.n, b0.n);
    cr_assert_eq(b2.n, b0.n);
    cr_assert_eq(memcmp(b0.p, b1.p, b0.n), 0);
    cr_assert_eq(memcmp(b0.p, b2.p, b0.n), 0);
    free(b0.p);
    free(b1.p);
    free(b2.p);
}

/* One failing sink: the healthy one gets every line and the audit.dropped
 * reports of what the other lost, with no gap. A report the failing sink
 * lost is reported again (a line counts as written only when every sink
 * took it), so the healthy sink's counts overlap: 3, then 3 + 2. */
Test(sinks, a_failing_sink_is_reported_in_the_healthy_one)
{
    uv_loop_t loop;
    static json_int_t seqs[16], counts[16];

    tg_audit_sink_cfg_t s[2];
    s[0] = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    s[1] = file_cfg("/dev/full", 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = aud_open_sinks(&loop, s, 2, 8);
    for (int i = 0; i < 3; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_dropped(a), 3);
    aud_emit(a, "call.completed", 3); /* brings the report (3), then itself */
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(tg_audit_dropped(a), 5);
    aud_close(a, &loop); /* reports the lost report's 3 and the last 2 */

    cr_assert_eq(read_set(0, 1 << 20, seqs, counts, 16), 6);
    static const json_int_t want_counts[] = {0, 1, 2, 3, 3, 5};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(seqs[i], i + 1);
        cr_assert_eq(counts[i], want_counts[i], "line %d", i);
    }
    unsigned order[] = {0};
    tg_verify_summary_t sum = verify_set(order, 1);
    cr_assert_eq(nfound, 2); /* the two audit.dropped */
    cr_assert_eq(sum.dropped_lines, 2);
    cr_assert_eq(sum.dropped_events, 8);
    cr_assert_eq(sum.missing, 0);
}

Test(sinks, open_failure_of_a_later_sink_names_it)
{
    uv_loop_t loop;
    tg_audit_t *a = NULL;
    tg_err_t err = {""};

    tg_audit_sink_cfg_t s[TG_CFG_SINKS_MAX + 1];
    s[0] = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    s[1] = file_cfg("/proc/nonexistent/x", 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t o = {.sinks = s, .nsinks = 2, .instance = "host-a", .queue_cap = 8};
    cr_assert_lt(tg_audit_open(&a, &loop, &o, &err), 0);
    cr_assert_null(a);
    cr_assert_not_null(strstr(err.msg, "/proc/nonexistent/x"), "%s", err.msg);

    for (size_t i = 0; i < TG_CFG_SINKS_MAX + 1; i++)
        s[i] = file_cfg(audit_path(), 1 << 20, 1, TG_AUDIT_FSYNC_NEVER);
    o.nsinks = TG_CFG_SINKS_MAX + 1;
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -EINVAL);
    cr_assert_str_eq(err.msg, "audit: 9 sinks (expected 1 to 8)");
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ---- config ------------------------------------------------------------------ */

static tg_config_t cfg;
static tg_err_t cerr;

static void cfg_setup(void)
{
    memset(&cerr, 0, sizeof(cerr));
    cr_assert_eq(tg_config_default(&cfg), 0);
}

static void cfg_teardown(void)
{
    tg_config_free(&cfg);
}

TestSuite(sinks_config, .init = cfg_setup, .fini = cfg_teardown);

static int load(const char *text)
{
    return tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &cerr);
}

static void load_fails(const char *text, const char *msg)
{
    cr_expect_eq(load(text), -1, "accepted: %s", text);
    cr_expect_str_eq(cerr.msg, msg, "for: %s\n got: %s\nwant: %s", text, cerr.msg, msg);
}

Test(sinks_config, sinks_are_parsed_with_units_and_defaults)
{
    cr_assert_eq(load("{\"audit\":{\"queue\":100,\"sinks\":["
                      "{\"kind\":\"file\",\"path\":\"/var/log/a.jsonl\",\"max_bytes\":\"10Mi\","
                      "\"keep\":0,\"fsync\":\"interval\",\"fsync_interval\":\"250ms\"},"
                      "{\"kind\":\"stderr\"},"
                      "{\"kind\":\"file\",\"path\":\"b.jsonl\",\"max_bytes\":4096,"
                      "\"fsync\":\"always\"},"
                      "{\"kind\":\"file\",\"path\":\"c.jsonl\",\"fsync\":\"never\"}]}}"),
                 0, "%s", cerr.msg);
    cr_assert_null(cfg.audit_path);
    cr_assert_eq(cfg.audit_queue, 100);
    cr_assert_eq(cfg.naudit_sinks, 4);
    const tg_audit_sink_cfg_t *s = cfg.audit_sinks;
    cr_assert_eq(s[0].kind, TG_AUDIT_SINK_FILE);
    cr_assert_str_eq(s[0].path, "/var/log/a.jsonl");
    cr_assert_eq(s[0].max_bytes, 10 * 1024 * 1024);
    cr_assert_eq(s[0].keep, 0);
    cr_assert_eq(s[0].fsync, TG_AUDIT_FSYNC_INTERVAL);
    cr_assert_eq(s[0].fsync_interval_ms, 250);
    cr_assert_eq(s[1].kind, TG_AUDIT_SINK_STDERR);
    cr_assert_null(s[1].path);
    cr_assert_eq(s[2].max_bytes, 4096);
    cr_assert_eq(s[2].keep, TG_DEF_AUDIT_KEEP);
    cr_assert_eq(s[2].fsync, TG_AUDIT_FSYNC_ALWAYS);
    cr_assert_eq(s[3].max_bytes, 100ull * 1024 * 1024);
    cr_assert_eq(s[3].keep, 5);
    cr_assert_eq(s[3].fsync, TG_AUDIT_FSYNC_NEVER);
    cr_assert_eq(s[3].fsync_interval_ms, 1000);

    char agent[] = "/bin/true";
    char *argv[] = {agent, NULL};
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv, &cerr), 0);
    cr_assert_eq(tg_config_validate(&cfg, &cerr), 0, "%s", cerr.msg);
}

Test(sinks_config, design_example_loads)
{
    cr_assert_eq(tg_config_load_file(&cfg, TG_SOURCE_DIR "/tests/data/config_serve.json", &cerr),
                 0, "%s", cerr.msg);
    cr_assert_eq(cfg.naudit_sinks, 1);
    cr_assert_str_eq(cfg.audit_sinks[0].path, "/var/log/toolgate/audit.jsonl");
    cr_assert_eq(cfg.audit_sinks[0].max_bytes, 100ull * 1024 * 1024);
    cr_assert_eq(cfg.audit_sinks[0].keep, 5);
}

/* audit.path is shorthand for one file sink: whichever a later source
 * sets replaces the other; --audit replaces both. */
Test(sinks_config, path_and_sinks_replace_each_other)
{
    cr_assert_eq(load("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\"}]}}"), 0, "%s", cerr.msg);
    cr_assert_eq(load("{\"audit\":{\"path\":\"/x.jsonl\"}}"), 0, "%s", cerr.msg);
    cr_assert_str_eq(cfg.audit_path, "/x.jsonl");
    cr_assert_eq(cfg.naudit_sinks, 0);
    cr_assert_null(cfg.audit_sinks);
    cr_assert_eq(load("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\"}]}}"), 0, "%s", cerr.msg);
    cr_assert_null(cfg.audit_path);
    cr_assert_eq(cfg.naudit_sinks, 1);
    /* a file that does not mention them keeps them */
    cr_assert_eq(load("{\"router\":{\"instance\":\"b\"}}"), 0, "%s", cerr.msg);
    cr_assert_eq(cfg.naudit_sinks, 1);

    cr_assert_eq(tg_config_set_audit_path(&cfg, "/cli.jsonl", &cerr), 0);
    cr_assert_str_eq(cfg.audit_path, "/cli.jsonl");
    cr_assert_eq(cfg.naudit_sinks, 0);
    cr_assert_eq(tg_config_set_audit_path(&cfg, "", &cerr), -1);
    cr_assert_str_eq(cerr.msg, "--audit: expected a file path");
    cr_assert_str_eq(cfg.audit_path, "/cli.jsonl");
}

Test(sinks_config, failed_load_keeps_the_old_sinks)
{
    cr_assert_eq(load("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"/a\"}]}}"), 0);
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\"}]},\"agents\":5}",
               "t.json:1:49: agents: expected an array, got an integer");
    cr_assert_eq(cfg.naudit_sinks, 1);
    cr_assert_eq(cfg.audit_sinks[0].kind, TG_AUDIT_SINK_FILE);
    cr_assert_str_eq(cfg.audit_sinks[0].path, "/a");
}

Test(sinks_config, bad_sinks_are_refused_with_positions)
{
    load_fails("{\"audit\":{\"sinks\":[]}}", "t.json:1:19: audit.sinks: expected at least one sink");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\"},{\"kind\":\"file\",\"path\":\"a\"},"
               "{\"kind\":\"file\",\"path\":\"b\"},{\"kind\":\"file\",\"path\":\"c\"},"
               "{\"kind\":\"file\",\"path\":\"d\"},{\"kind\":\"file\",\"path\":\"e\"},"
               "{\"kind\":\"file\",\"path\":\"f\"},{\"kind\":\"file\",\"path\":\"g\"},"
               "{\"kind\":\"file\",\"path\":\"h\"}]}}",
               "t.json:1:19: audit.sinks: 9 sinks (expected at most 8)");
    load_fails("{\"audit\":{\"sinks\":[\"file\"]}}",
               "t.json:1:20: audit.sinks[0]: expected an object, got a string");
    load_fails("{\"audit\":{\"sinks\":[{\"path\":\"a\"}]}}",
               "t.json:1:20: audit.sinks[0]: missing required key \"kind\" (expected \"file\", "
               "\"stderr\" or \"redis_stream\")");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"syslog\"}]}}",
               "t.json:1:28: audit.sinks[0].kind: \"syslog\" is not a sink kind (expected "
               "\"file\", \"stderr\" or \"redis_stream\")");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":1}]}}",
               "t.json:1:28: audit.sinks[0].kind: expected a string, got an integer");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\"}]}}",
               "t.json:1:20: audit.sinks[0]: missing required key \"path\" (the file to write)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"\"}]}}",
               "t.json:1:42: audit.sinks[0].path: expected a non-empty string");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"max_bytes\":\"lots\"}]}}",
               "t.json:1:58: audit.sinks[0].max_bytes: \"lots\" is not a size (expected a whole "
               "number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"max_bytes\":100}]}}",
               "t.json:1:58: audit.sinks[0].max_bytes: 100 is out of range (expected 1Ki to "
               "1Ti)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"keep\":1001}]}}",
               "t.json:1:53: audit.sinks[0].keep: 1001 is out of range (expected 0 to 1000)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"keep\":-1}]}}",
               "t.json:1:53: audit.sinks[0].keep: -1 is out of range (expected 0 to 1000)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"fsync\":\"sometimes\"}]}}",
               "t.json:1:54: audit.sinks[0].fsync: \"sometimes\" is not an fsync policy "
               "(expected \"interval\", \"always\" or \"never\")");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"fsync\":\"always\","
               "\"fsync_interval\":\"1s\"}]}}",
               "t.json:1:80: audit.sinks[0].fsync_interval: applies only to fsync \"interval\" "
               "(this sink has fsync \"always\")");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"fsync_interval\":\"2h\"}]}}",
               "t.json:1:63: audit.sinks[0].fsync_interval: \"2h\" is out of range (expected "
               "at most 1h)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\",\"path\":\"a\"}]}}",
               "t.json:1:37: audit.sinks[0]: unknown key \"path\" (allowed: kind)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\",\"rotate\":true}]}}",
               "t.json:1:46: audit.sinks[0]: unknown key \"rotate\" (allowed: kind, path, "
               "max_bytes, keep, fsync, fsync_interval)");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"stderr\"},{\"kind\":\"stderr\"}]}}",
               "t.json:1:38: audit.sinks[1]: a second stderr sink (also audit.sinks[0])");
    load_fails("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"a\"},"
               "{\"kind\":\"file\",\"path\":\"a\"}]}}",
               "t.json:1:69: audit.sinks[1].path: same file as audit.sinks[0]");
    load_fails("{\"audit\":{\"path\":\"a\",\"sinks\":[{\"kind\":\"stderr\"}]}}",
               "t.json:1:30: audit.sinks: cannot be combined with audit.path (audit.path is "
               "shorthand for one file sink: give the file in audit.sinks instead)");
}

/* Configs changed in code are checked by tg_config_validate. */
Test(sinks_config, validate_checks_sinks_set_in_code)
{
    char agent[] = "/bin/true";
    char *argv[] = {agent, NULL};
    cr_assert_eq(tg_config_set_command(&cfg, 0, argv, &cerr), 0);
    cr_assert_eq(load("{\"audit\":{\"sinks\":[{\"kind\":\"file\",\"path\":\"/a\"}]}}"), 0);
    cr_assert_eq(tg_config_validate(&cfg, &cerr), 0, "%s", cerr.msg);

    cfg.audit_sinks[0].max_bytes = 10;
    cr_assert_eq(tg_config_validate(&cfg, &cerr), -1);
    cr_assert_str_eq(cerr.msg, "audit.sinks[0].max_bytes: 10 is out of range (expected 1Ki to 1Ti)");
    cfg.audit_sinks[0].max_bytes = 4096;
    cfg.audit_sinks[0].keep = 5000;
    cr_assert_eq(tg_config_validate(&cfg, &cerr), -1);
    cr_assert_str_eq(cerr.msg, "audit.sinks[0].keep: 5000 is out of range (expected 0 to 1000)");
    cfg.audit_sinks[0].keep = 1;
    cfg.audit_sinks[0].fsync_interval_ms = 0;
    cr_assert_eq(tg_config_validate(&cfg, &cerr), -1);
    cr_assert_str_eq(cerr.msg,
                     "audit.sinks[0].fsync_interval: 0ms is out of range (expected 1ms to 1h)");
    cfg.audit_sinks[0].fsync = TG_AUDIT_FSYNC_NEVER; /* the interval is then unused */
    cr_assert_eq(tg_config_validate(&cfg, &cerr), 0, "%s", cerr.msg);
    free(cfg.audit_sinks[0].path);
    cfg.audit_sinks[0].path = NULL;
    cr_assert_eq(tg_config_validate(&cfg, &cerr), -1);
    cr_assert_str_eq(cerr.msg, "audit.sinks[0].path: missing (the file to write)");
}
