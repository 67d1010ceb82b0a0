/* The ingestion examples in deploy/ingest/ are checked by the tools that
 * consume them: rsyslogd -N1 for the imfile config, promtool for the scrape
 * config and alert rules, a throwaway redis-server for the stream consumer.
 * A broken copy of each config must be refused, so a pass means the
 * validator looked at the file. The alert rules may only name metrics that
 * router/gateway/metrics.c emits, so renaming a metric breaks this suite instead of
 * silencing an alert. Each test skips, naming the Debian package, when its
 * tool is not installed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tg_redis.h"

#define INGEST_DIR TG_SOURCE_DIR "/deploy/ingest"
#define OUT_MAX    (64 * 1024) /* tool output kept for the failure message, bytes */

/* Full path of <name> found on PATH, in a static buffer, or NULL. */
static const char *find_tool(const char *name)
{
    static char found[512];
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        snprintf(found, sizeof found, "%.*s/%s", (int)n, path, name);
        if (access(found, X_OK) == 0)
            return found;
        path += n + (path[n] == ':');
    }
    /* rsyslogd lives in /usr/sbin, which a non-root PATH may lack. */
    snprintf(found, sizeof found, "/usr/sbin/%s", name);
    return access(found, X_OK) == 0 ? found : NULL;
}

/* Run <argv> (argv[0] a full path) and wait for it. Its stdout (and its
 * stderr too when <with_stderr>, else stderr goes to /dev/null) is kept in
 * <out> (<cap> bytes, NUL-terminated, cut when longer). Returns the exit
 * status, or -1 when it did not exit normally. */
static int run(const char *const *argv, bool with_stderr, char *out, size_t cap)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(p[1], 1);
        dup2(with_stderr ? p[1] : null, 2);
        close(p[0]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    char sink[4096];
    for (;;) {
        /* Keep reading past <cap> so the child never blocks on a full pipe. */
        char *dst = len + 1 < cap ? out + len : sink;
        size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
        ssize_t n = read(p[0], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != sink)
            len += (size_t)n;
    }
    out[len] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        cr_assert_eq(errno, EINTR);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Copy <src> to <dst> with every <from> replaced by <to>; asserts that
 * <from> occurred, so the broken copy really differs. */
static void copy_replacing(const char *src, const char *dst, const char *from, const char *to)
{
    FILE *in = fopen(src, "r");
    cr_assert_not_null(in, "%s: %s", src, strerror(errno));
    static char buf[OUT_MAX];
    size_t n = fread(buf, 1, sizeof buf - 1, in);
    fclose(in);
    buf[n] = '\0';
    FILE *o = fopen(dst, "w");
    cr_assert_not_null(o);
    bool hit = false;
    for (const char *s = buf, *m; *s != '\0'; s = m + strlen(from)) {
        m = strstr(s, from);
        if (m == NULL) {
            fputs(s, o);
            break;
        }
        fwrite(s, 1, (size_t)(m - s), o);
        fputs(to, o);
        hit = true;
    }
    fclose(o);
    cr_assert(hit, "%s does not contain '%s'", src, from);
}

static char tmpdir[64];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg-ingest-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char path[128];
    static const char *const files[] = {"rsyslog.conf", "prometheus.yml", "alerts.yml"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

TestSuite(ingest, .init = setup, .fini = teardown);

Test(ingest, rsyslog_config_is_valid)
{
    const char *bin = find_tool("rsyslogd");
    if (bin == NULL)
        cr_skip_test("rsyslogd is not installed (Debian package rsyslog; deploy/install-deps.sh "
                     "installs it)");
    static char out[OUT_MAX];
    const char *argv[] = {bin, "-N1", "-f", INGEST_DIR "/rsyslog-toolgate.conf", NULL};
    int rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 0, "rsyslogd -N1 exited %d:\n%s", rc, out);

    /* A misspelt imfile parameter must be refused. */
    char bad[128];
    snprintf(bad, sizeof bad, "%s/rsyslog.conf", tmpdir);
    copy_replacing(INGEST_DIR "/rsyslog-toolgate.conf", bad, "reopenOnTruncate=",
                   "reopenOnTruncated=");
    argv[3] = bad;
    rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 1, "rsyslogd -N1 accepted a broken config (exit %d):\n%s", rc, out);
    cr_assert_not_null(strstr(out, "reopenOnTruncated"), "%s", out);
}

Test(ingest, prometheus_config_is_valid)
{
    const char *bin = find_tool("promtool");
    if (bin == NULL)
        cr_skip_test("promtool is not installed (Debian package prometheus; "
                     "deploy/install-deps.sh installs it)");
    static char out[OUT_MAX];
    /* check config also loads the rule files it names (toolgate-alerts.yml). */
    const char *argv[] = {bin, "check", "config", INGEST_DIR "/prometheus.yml", NULL};
    int rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 0, "promtool check config exited %d:\n%s", rc, out);
    cr_assert_not_null(strstr(out, "SUCCESS: 1 rule files found"), "%s", out);

    char bad[128];
    snprintf(bad, sizeof bad, "%s/prometheus.yml", tmpdir);
    copy_replacing(INGEST_DIR "/prometheus.yml", bad, "metrics_path:", "metrics_pth:");
    argv[3] = bad;
    rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 1, "promtool accepted a broken config (exit %d):\n%s", rc, out);
}

Test(ingest, alert_rules_are_valid)
{
    const char *bin = find_tool("promtool");
    if (bin == NULL)
        cr_skip_test("promtool is not installed (Debian package prometheus; "
                     "deploy/install-deps.sh installs it)");
    static char out[OUT_MAX];
    const char *argv[] = {bin, "check", "rules", INGEST_DIR "/toolgate-alerts.yml", NULL};
    int rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 0, "promtool check rules exited %d:\n%s", rc, out);
    cr_assert_not_null(strstr(out, "SUCCESS: 5 rules found"), "%s", out);

    /* A PromQL syntax error must be refused. */
    char bad[128];
    snprintf(bad, sizeof bad, "%s/alerts.yml", tmpdir);
    copy_replacing(INGEST_DIR "/toolgate-alerts.yml", bad, "toolgate_limit_fill_ratio > 0.9",
                   "toolgate_limit_fill_ratio >> 0.9");
    argv[3] = bad;
    rc = run(argv, true, out, sizeof out);
    cr_assert_eq(rc, 1, "promtool accepted broken rules (exit %d):\n%s", rc, out);
}

/* Every toolgate_* name in the alert rules is a metric router/gateway/metrics.c
 * writes, and the four conditions of the issue are all covered. */
Test(ingest, alert_rules_name_exported_metrics)
{
    static char rules[OUT_MAX], src[4 * OUT_MAX];
    FILE *f = fopen(INGEST_DIR "/toolgate-alerts.yml", "r");
    cr_assert_not_null(f);
    rules[fread(rules, 1, sizeof rules - 1, f)] = '\0';
    fclose(f);
    f = fopen(TG_SOURCE_DIR "/router/admin/metrics_enc.c", "r");
    cr_assert_not_null(f);
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    cr_assert_lt(n, sizeof src - 1, "router/admin/metrics_enc.c is larger than the test's buffer");
    src[n] = '\0';

    int names = 0;
    for (const char *p = strstr(rules, "toolgate_"); p != NULL; p = strstr(p, "toolgate_")) {
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
        char quoted[128];
        snprintf(quoted, sizeof quoted, "\"%.*s\"", (int)len, p);
        /* Alert names are CamelCase and never match; only metric names do. */
        cr_assert_not_null(strstr(src, quoted), "the rules use %s, which admin/metrics_enc.c does not emit",
                           quoted);
        names++;
        p += len;
    }
    cr_assert_eq(names, 7, "metric references in toolgate-alerts.yml: %d", names);
    static const char *const needed[] = {"toolgate_denials_total", "toolgate_limit_fill_ratio > 0.9",
                                         "toolgate_store_degraded == 1",
                                         "toolgate_audit_dropped_total"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        cr_assert_not_null(strstr(rules, needed[i]), "no rule on %s", needed[i]);
}

/* The consumer prints every entry once, in order, acknowledges it (a second
 * run under the same consumer name re-reads nothing pending), and refuses a
 * stream that is not toolgate's. */
Test(ingest, redis_consumer_reads_and_acks)
{
    if (find_tool("redis-cli") == NULL)
        cr_skip_test("redis-cli is not installed (Debian package redis-tools, a dependency of "
                     "redis-server)");
    srv_t s;
    srv_own(&s, false, NULL);
    static const char *const lines[] = {
        "{\"seq\":1,\"ts\":\"2024-05-01T10:00:00.000Z\",\"event\":\"call.ok\"}",
        "{\"seq\":2,\"ts\":\"2024-05-01T10:00:00.001Z\",\"event\":\"call.denied\"}",
        "{\"seq\":3,\"ts\":\"2024-05-01T10:00:00.002Z\",\"event\":\"audit.dropped\"}",
    };
    for (size_t i = 0; i < 3; i++)
        srv_int(&s, "XADD toolgate:audit MAXLEN ~ 1000 * json %s", lines[i]);

    static char out[OUT_MAX];
    /* -n 2: the three entries take two reads, so batching is exercised. */
    const char *argv[] = {INGEST_DIR "/redis-stream-consumer.sh", "-u", s.url, "-c", "c1", "-n",
                          "2", "-b", "200", "-1", NULL};
    int rc = run(argv, false, out, sizeof out);
    cr_assert_eq(rc, 0, "consumer exited %d", rc);
    char want[512];
    snprintf(want, sizeof want, "%s\n%s\n%s\n", lines[0], lines[1], lines[2]);
    cr_assert_str_eq(out, want);

    rc = run(argv, false, out, sizeof out);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(out, "", "entries re-delivered, so they were not acknowledged");

    srv_int(&s, "XADD %s * foo bar", "other");
    const char *other[] = {INGEST_DIR "/redis-stream-consumer.sh", "-u", s.url, "-k", "other",
                           "-b", "200", "-1", NULL};
    rc = run(other, true, out, sizeof out);
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert_not_null(strstr(out, "expected 'json'"), "%s", out);
    srv_done(&s);
}
