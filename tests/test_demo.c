/* `toolgate demo`, the README's first command: it runs the bundled demo
 * agent under wrap and shows every kind of refusal. Tests: the whole
 * script from a build tree (answers, denials, an audit file with no gap),
 * --log-format reaching the wrap, the installed layout
 * (<bindir>/../libexec/toolgate/demo-agent) and a clear error when no
 * agent is found.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/tg_harness.h"
#include "tests/tg_sh.h"

#define FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"

TestSuite(demo, .init = tgh_tmp_init, .fini = tgh_cleanup, .timeout = 60);

/* The audit directory the demo printed ("5. audit trail: DIR/audit.jsonl"),
 * into <dir>; false when it printed none. */
static bool audit_dir(const char *out, char *dir, size_t cap)
{
    const char *p = strstr(out, "5. audit trail: ");
    if (p == NULL)
        return false;
    p += strlen("5. audit trail: ");
    const char *end = strstr(p, "/audit.jsonl");
    if (end == NULL || (size_t)(end - p) >= cap)
        return false;
    snprintf(dir, cap, "%.*s", (int)(end - p), p);
    return strncmp(dir, "/tmp/toolgate-demo-", 19) == 0;
}

/* Run `<bin> [<pre>] demo` with <env> ("" or "VAR=value ") from /; its
 * exit code, output in <*out>/<*err>. The audit directory it names is
 * removed after, unless the caller takes it in <keep> (NULL: remove). */
static int run_demo(const char *env, const char *bin, const char *pre, char **out, char **err,
                    char keep[256])
{
    char cmd[TGH_SH_MAX];
    snprintf(cmd, sizeof cmd, "cd / && env -u TG_DEMO_AGENT -u TOOLGATE_LOG %s'%s' %s demo", env,
             bin, pre);
    int rc = tgh_sh(cmd, out, err);
    char dir[256];
    if (!audit_dir(*out, dir, sizeof dir))
        dir[0] = '\0';
    if (keep != NULL)
        snprintf(keep, 256, "%s", dir);
    else if (dir[0] != '\0')
        tgh_rmtree(dir);
    return rc;
}

Test(demo, runs_the_whole_script_from_the_build_tree)
{
    char *out, *err, dir[256];
    int rc = run_demo("", TG_BIN, "", &out, &err, dir);
    cr_assert_eq(rc, 0, "demo exited %d:\n%s\n%s", rc, out, err);
    const char *want[] = {
        "handshake: agent 'tg-fixture' answered initialize",
        "-> ok hello 1",
        "-> ok hello 3",
        "-> DENIED -32060 rate_limit_exceeded",
        "-> DENIED -32062 timeout",
        "(the caller's params._meta.timeout_ms)",
        "request of 100 KiB           -> DENIED -32063 frame_too_large",
        "response of 100 KB           -> DENIED -32063 frame_too_large",
        "echo after all that          -> ok still here",
        "toolgate exited with status 0",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(out, want[i]) != NULL, "demo output lacks \"%s\":\n%s", want[i], out);
    cr_expect(strstr(out, TG_AGENTS_DIR "/tg_fixture_agent") != NULL, "not the build's agent");

    /* The audit file it names: every event, seq 1..N with no gap, and the
     * count it printed. */
    char path[300];
    cr_assert(dir[0] != '\0', "no audit directory in:\n%s", out);
    snprintf(path, sizeof path, "%s/audit.jsonl", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char line[8192];
    json_int_t seq = 0;
    int denied = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        json_t *ev = json_loads(line, 0, NULL);
        cr_assert_not_null(ev, "not JSON: %s", line);
        cr_expect_eq(json_integer_value(json_object_get(ev, "seq")), ++seq);
        const char *name = json_string_value(json_object_get(ev, "event"));
        denied += name != NULL && strcmp(name, "call.denied") == 0;
        json_decref(ev);
    }
    fclose(f);
    cr_expect_eq(denied, 4, "two rate and two frame denials, got %d", denied);
    char count[64];
    snprintf(count, sizeof count, "  %lld events; check it with", (long long)seq);
    cr_expect(strstr(out, count) != NULL, "printed count differs from %lld:\n%s", (long long)seq,
              out);
    tgh_rmtree(dir);
    free(out);
    free(err);
}

/* Each line of <err> (the wrap's own log lines) in the format asked for. */
static void expect_log_lines(const char *err, bool json)
{
    int lines = 0;
    for (const char *p = err; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (json) {
            json_t *o = json_loadb(p, n, 0, NULL);
            cr_expect_not_null(o, "not a JSON log line: %.*s", (int)n, p);
            cr_expect_not_null(json_object_get(o, "level"), "no level: %.*s", (int)n, p);
            json_decref(o);
        } else {
            /* RFC 3339 time first: 2026-11-26T19:41:44.084Z */
            cr_expect(n > 24 && p[4] == '-' && p[10] == 'T' && p[23] == 'Z',
                      "not a text log line: %.*s", (int)n, p);
        }
        lines++;
        p += n + (nl != NULL);
    }
    /* the demo's burst and frames cross the 80% warning at least once */
    cr_expect(lines > 0, "the wrap logged nothing");
}

Test(demo, passes_its_log_format_to_the_wrap)
{
    char *out, *err;
    cr_assert_eq(run_demo("", TG_BIN, "--log-format json", &out, &err, NULL), 0, "%s\n%s", out, err);
    cr_expect(strstr(out, " wrap --log-format json --audit ") != NULL, "%s", out);
    expect_log_lines(err, true);
    free(out);
    free(err);
    cr_assert_eq(run_demo("", TG_BIN, "", &out, &err, NULL), 0, "%s\n%s", out, err);
    cr_expect(strstr(out, " wrap --audit ") != NULL, "%s", out);
    expect_log_lines(err, false);
    free(out);
    free(err);
}

/* Copy <src> to <dst> (mode 0755). */
static void install_file(const char *src, const char *dst)
{
    char cmd[TGH_SH_MAX];
    snprintf(cmd, sizeof cmd, "install -D -m 0755 '%s' '%s'", src, dst);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(demo, finds_the_installed_agent_next_to_an_installed_binary)
{
    char bin[TGH_PATH + 32], agent[TGH_PATH + 64], real_agent[PATH_MAX];
    tgh_tmp_path(bin, sizeof bin, "usr/bin/toolgate");
    tgh_tmp_path(agent, sizeof agent, "usr/libexec/toolgate/demo-agent");
    install_file(TG_BIN, bin);
    char *out, *err;

    /* No agent anywhere: exit 1 naming both places and TG_DEMO_AGENT. */
    cr_assert_eq(run_demo("", bin, "", &out, &err, NULL), 1, "%s\n%s", out, err);
    cr_expect(strstr(err, "demo agent not found") != NULL, "%s", err);
    cr_expect(strstr(err, "agents/tg_fixture_agent") != NULL, "%s", err);
    cr_expect(strstr(err, "libexec/toolgate/demo-agent") != NULL, "%s", err);
    cr_expect(strstr(err, "TG_DEMO_AGENT=") != NULL, "%s", err);
    free(out);
    free(err);

    install_file(FIXTURE, agent);
    cr_assert_not_null(realpath(agent, real_agent));
    cr_assert_eq(run_demo("", bin, "", &out, &err, NULL), 0, "%s\n%s", out, err);
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "-- %s\n", real_agent);
    cr_expect(strstr(out, want) != NULL, "did not run %s:\n%s", real_agent, out);
    cr_expect(strstr(out, "DENIED -32060 rate_limit_exceeded") != NULL, "%s", out);
    free(out);
    free(err);

    /* TG_DEMO_AGENT wins, and one that cannot run is an error. */
    cr_assert_eq(run_demo("TG_DEMO_AGENT=/nonexistent/agent ", bin, "", &out, &err, NULL), 1, "%s", out);
    cr_expect(strstr(err, "/nonexistent/agent") != NULL, "%s", err);
    free(out);
    free(err);
}
