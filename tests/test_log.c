/* toolgate's log lines (issue 14, part 6): an RFC 3339 time, a level and
 * a component on every line, text or json (--log-format), a level filter
 * (TOOLGATE_LOG), "<N>" priority prefixes and no time when stderr is the
 * journal (JOURNAL_STREAM), agent stderr lines as component "agent=ID"
 * with their escaping kept, and a degraded containment start as a warn
 * line. The pure formatter (router/gateway/log.c) first, then the real binary.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "router/gateway/log.h"
#include "tg_harness.h"

TestSuite(log, .fini = tgh_cleanup, .timeout = 30);

/* 2026-11-26T17:20:01.123Z, the time of the formatter tests */
#define T0      INT64_C(1795713601123)
#define T0_TEXT "2026-11-26T17:20:01.123Z"

static const tg_log_opts_t o_text = {.format = TG_LOG_TEXT, .min = TG_LOG_INFO};
static const tg_log_opts_t o_json = {.format = TG_LOG_JSON, .min = TG_LOG_INFO};

/* tg_log_format of <msg> into a NUL-terminated <out>. */
static size_t fmt(char *out, size_t cap, const tg_log_opts_t *o, tg_log_level_t lv,
                  const char *comp, const char *agent, const char *msg)
{
    size_t n = tg_log_format(out, cap - 1, o, T0, lv, comp, agent, msg, strlen(msg));
    out[n] = '\0';
    return n;
}

/* <line> (one json line, '\n' ended) parsed; fails the test otherwise. */
static json_t *parse_line(const char *line)
{
    size_t len = strlen(line);
    cr_assert(len > 0 && line[len - 1] == '\n', "not one line: %s", line);
    cr_assert_null(memchr(line, '\n', len - 1), "more than one line: %s", line);
    json_error_t je;
    json_t *o = json_loadb(line, len - 1, 0, &je);
    cr_assert_not_null(o, "not JSON (%s): %s", je.text, line);
    return o;
}

static const char *field(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* ---- pure: formats ---- */

Test(log, text_line_has_time_level_and_component)
{
    char out[512];
    size_t n = fmt(out, sizeof out, &o_text, TG_LOG_WARN, "serve", NULL, "a message");
    cr_assert_str_eq(out, T0_TEXT " warn  serve: a message\n");
    cr_assert_eq(n, strlen(out));
    fmt(out, sizeof out, &o_text, TG_LOG_ERROR, "wrap", NULL, "x");
    cr_assert_str_eq(out, T0_TEXT " error wrap: x\n");
    fmt(out, sizeof out, &o_text, TG_LOG_INFO, "wrap", NULL, "x");
    cr_assert_str_eq(out, T0_TEXT " info  wrap: x\n");
    fmt(out, sizeof out, &o_text, TG_LOG_DEBUG, "wrap", NULL, "x");
    cr_assert_str_eq(out, T0_TEXT " debug wrap: x\n");
    /* A message never spans lines nor carries a control byte. */
    fmt(out, sizeof out, &o_text, TG_LOG_INFO, "wrap", NULL, "two\nlines \033[2J");
    cr_assert_str_eq(out, T0_TEXT " info  wrap: two\\x0alines \\x1b[2J\n");
}

Test(log, json_line_is_one_object)
{
    char out[512];
    fmt(out, sizeof out, &o_json, TG_LOG_WARN, "serve", NULL, "say \"hi\" \\ now\ttab");
    cr_assert_str_eq(out, "{\"time\":\"" T0_TEXT "\",\"level\":\"warn\",\"component\":\"serve\","
                          "\"msg\":\"say \\\"hi\\\" \\\\ now\\ttab\"}\n");
    json_t *o = parse_line(out);
    cr_assert_str_eq(field(o, "msg"), "say \"hi\" \\ now\ttab");
    cr_assert_null(json_object_get(o, "agent"));
    json_decref(o);
}

/* Agent lines: component "agent=ID" in text; "agent" and the id in json,
 * the escaping kept (a reader of the json sees the same \xNN text). */
Test(log, agent_lines_carry_the_agent)
{
    char out[512];
    fmt(out, sizeof out, &o_text, TG_LOG_INFO, "wrap", "fx", "red \033[31m \xff");
    cr_assert_str_eq(out, T0_TEXT " info  agent=fx: red \\x1b[31m \\xff\n");
    fmt(out, sizeof out, &o_json, TG_LOG_INFO, "wrap", "f\"x\033", "red \033[31m \xff \"q\"");
    json_t *o = parse_line(out);
    cr_assert_str_eq(field(o, "component"), "agent");
    cr_assert_str_eq(field(o, "agent"), "f\"x\\x1b");
    cr_assert_str_eq(field(o, "msg"), "red \\x1b[31m \\xff \"q\"");
    cr_assert_str_eq(field(o, "level"), "info");
    cr_assert_str_eq(field(o, "time"), T0_TEXT);
    json_decref(o);
}

Test(log, relay_lines_in_json)
{
    char out[TG_LOG_RELAY_CAP(16)];
    char in[40];
    memset(in, '\\', sizeof in); /* each doubles in JSON: the worst case */
    size_t n = tg_log_relay_fmt(out, &o_json, T0, "a", in, sizeof in, 16, false);
    out[n] = '\0';
    json_t *o = parse_line(out);
    cr_assert_str_eq(field(o, "msg"), "\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\ [truncated]");
    cr_assert_str_eq(field(o, "agent"), "a");
    json_decref(o);
    memset(in, 033, sizeof in);
    n = tg_log_relay_fmt(out, &o_json, T0, "a", in, sizeof in, 16, false);
    out[n] = '\0';
    o = parse_line(out);
    cr_assert_str_eq(field(o, "msg"), "\\x1b\\x1b\\x1b\\x1b [truncated]");
    json_decref(o);
}

/* Under the journal: "<N>" (syslog priority) and no time in text. */
Test(log, journal_prefixes)
{
    tg_log_opts_t jt = o_text, jj = o_json;
    jt.journal = jj.journal = true;
    char out[512];
    fmt(out, sizeof out, &jt, TG_LOG_ERROR, "serve", NULL, "m");
    cr_assert_str_eq(out, "<3>serve: m\n");
    fmt(out, sizeof out, &jt, TG_LOG_WARN, "serve", NULL, "m");
    cr_assert_str_eq(out, "<4>serve: m\n");
    fmt(out, sizeof out, &jt, TG_LOG_INFO, "serve", "fx", "m");
    cr_assert_str_eq(out, "<6>agent=fx: m\n");
    fmt(out, sizeof out, &jt, TG_LOG_DEBUG, "serve", NULL, "m");
    cr_assert_str_eq(out, "<7>serve: m\n");
    fmt(out, sizeof out, &jj, TG_LOG_WARN, "serve", NULL, "m");
    cr_assert_eq(strncmp(out, "<4>{", 4), 0, "%s", out);
    json_decref(parse_line(out + 3));
}

/* A line that does not fit is cut, still ends, and json still parses. */
Test(log, a_cut_line_still_ends_and_parses)
{
    char msg[300], out[128];
    memset(msg, '"', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    size_t n = fmt(out, sizeof out, &o_json, TG_LOG_INFO, "serve", NULL, msg);
    cr_assert_leq(n, sizeof out - 1);
    json_decref(parse_line(out));
    n = fmt(out, sizeof out, &o_text, TG_LOG_INFO, "serve", NULL, msg);
    cr_assert_eq(out[n - 1], '\n');
    cr_assert_eq(strncmp(out, T0_TEXT " info  serve: \"\"", 32), 0, "%s", out);
}

/* ---- pure: settings ---- */

Test(log, levels_and_formats_parse)
{
    tg_log_level_t lv;
    tg_log_format_t f;
    tg_err_t err;
    cr_assert_eq(tg_log_parse_level("debug", "TOOLGATE_LOG", &lv, &err), 0);
    cr_assert_eq(lv, TG_LOG_DEBUG);
    cr_assert_eq(tg_log_parse_level("error", "TOOLGATE_LOG", &lv, &err), 0);
    cr_assert_eq(lv, TG_LOG_ERROR);
    cr_assert_lt(tg_log_parse_level("verbose", "TOOLGATE_LOG", &lv, &err), 0);
    cr_assert_str_eq(err.msg, "TOOLGATE_LOG=verbose: expected debug, info, warn or error");
    cr_assert_eq(tg_log_parse_format("json", "--log-format", &f, &err), 0);
    cr_assert_eq(f, TG_LOG_JSON);
    cr_assert_lt(tg_log_parse_format("yaml", "--log-format", &f, &err), 0);
    cr_assert_str_eq(err.msg, "--log-format yaml: expected text or json");
}

/* JOURNAL_STREAM counts only when it names the file stderr is on. */
Test(log, journal_stream_must_name_stderr)
{
    char path[] = "/tmp/tg-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    cr_assert(tg_log_is_journal(v, fd));
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    cr_assert_not(tg_log_is_journal(v, fd));
    cr_assert_not(tg_log_is_journal("", fd));
    cr_assert_not(tg_log_is_journal("12:34x", fd));
    cr_assert_not(tg_log_is_journal(NULL, fd));
    close(fd);
}

Test(log, setup_takes_its_options_out_of_argv)
{
    tg_err_t err;
    char *argv[] = {(char *)"toolgate",
                    (char *)"serve",
                    (char *)"--log-format",
                    (char *)"json",
                    (char *)"--config",
                    (char *)"f",
                    (char *)"--log-format=text",
                    (char *)"--",
                    (char *)"--log-format",
                    (char *)"json",
                    NULL};
    int argc = 10;
    unsetenv("TOOLGATE_LOG");
    cr_assert_eq(tg_log_setup(&argc, argv, &err), 0, "%s", err.msg);
    cr_assert_eq(argc, 7);
    cr_assert_str_eq(argv[2], "--config");
    cr_assert_str_eq(argv[4], "--");
    cr_assert_str_eq(argv[5], "--log-format", "what follows -- is the agent's");
    cr_assert_null(argv[7]);
    cr_assert_eq(tg_log_opts()->format, TG_LOG_TEXT, "the last one wins");

    char *bad[] = {(char *)"toolgate", (char *)"wrap", (char *)"--log-format", NULL};
    argc = 3;
    cr_assert_lt(tg_log_setup(&argc, bad, &err), 0);
    cr_assert_str_eq(err.msg, "--log-format needs a value (text or json)");
    setenv("TOOLGATE_LOG", "warn", 1);
    char *ok[] = {(char *)"toolgate", (char *)"wrap", NULL};
    argc = 2;
    cr_assert_eq(tg_log_setup(&argc, ok, &err), 0);
    cr_assert_eq(tg_log_opts()->min, TG_LOG_WARN);
    cr_assert_not(tg_log_enabled(TG_LOG_INFO));
    cr_assert(tg_log_enabled(TG_LOG_ERROR));
    setenv("TOOLGATE_LOG", "loud", 1);
    cr_assert_lt(tg_log_setup(&argc, ok, &err), 0);
    unsetenv("TOOLGATE_LOG");
}

/* ---- the real binary ---- */

/* An agent (a shell script) that writes three stderr lines, a marker,
 * and reads its stdin to the end; its config asks for a bandwidth limit
 * no containment backend enforces, so best_effort starts it with containment incomplete. */
static const char script_text[] = "#!/bin/sh\n"
                                  "printf 'plain line\\n' >&2\n"
                                  "printf 'esc \\033[2J \"quoted\" back\\\\slash\\n' >&2\n"
                                  "echo END-OF-NOISE >&2\n"
                                  "exec cat >/dev/null\n";

typedef struct run {
    char dir[TGH_PATH], script[TGH_PATH + 16], cfg[TGH_PATH + 16], err[TGH_PATH + 16];
    tgh_proc_t p;
} run_t;

static run_t R;

static void run_prepare(void)
{
    char json[4096];
    cr_assert_eq(tgh_mkdtemp(R.dir, sizeof R.dir), 0);
    snprintf(R.script, sizeof R.script, "%s/noisy", R.dir);
    cr_assert_eq(tgh_write_file(R.script, script_text), 0);
    chmod(R.script, 0700);
    snprintf(R.cfg, sizeof R.cfg, "%s/c.json", R.dir);
    snprintf(json, sizeof json,
             "{\"agents\":[{\"id\":\"noisy\",\"command\":[\"%s\"],"
             "\"resources\":{\"network\":{\"bandwidth_limit\":\"10Mbps\"}}}],"
             "\"audit\":{\"path\":\"%s/audit.jsonl\"}}\n",
             R.script, R.dir);
    cr_assert_eq(tgh_write_file(R.cfg, json), 0);
    snprintf(R.err, sizeof R.err, "%s/wrap.stderr", R.dir);
    /* Created first: a test names its inode in JOURNAL_STREAM. */
    cr_assert_eq(tgh_write_file(R.err, ""), 0);
}

/* `toolgate wrap [<opt>] --config ... -- script` with <env> added; returns
 * toolgate's stderr once the script's marker is in it (or 5 s passed) and
 * wrap ended on EOF. <wait_marker> false: the agent's lines are not
 * expected (a level above info), wait a second instead. */
static char *run_wrap(const char *opt, char *const *env, bool wait_marker)
{
    char *argv[8];
    int n = 0;
    argv[n++] = (char *)TG_BIN;
    if (opt != NULL)
        argv[n++] = (char *)opt;
    argv[n++] = (char *)"wrap";
    argv[n++] = (char *)"--config";
    argv[n++] = R.cfg;
    argv[n++] = (char *)"--";
    argv[n++] = R.script;
    argv[n] = NULL;
    cr_assert_eq(tgh_spawn(&R.p, argv, env, R.err), 0);
    uint64_t deadline = tgh_now_ms() + (wait_marker ? 5000 : 1000);
    while (tgh_now_ms() < deadline) {
        if (wait_marker && tgh_file_count(R.err, "END-OF-NOISE") > 0)
            break;
        tgh_sleep_ms(50);
    }
    tgh_close_stdin(&R.p);
    cr_assert_eq(tgh_wait(&R.p, 5000), 0, "wrap did not exit on EOF");
    char *text = tgh_read_file(R.err, NULL);
    cr_assert_not_null(text);
    return text;
}

/* The line of <text> holding <needle> (heap), or NULL. */
static char *line_with(const char *text, const char *needle)
{
    const char *at = strstr(text, needle);
    if (at == NULL)
        return NULL;
    const char *s = at, *e = strchr(at, '\n');
    while (s > text && s[-1] != '\n')
        s--;
    return strndup(s, (size_t)(e != NULL ? e + 1 - s : (long)strlen(s)));
}

/* Every line is toolgate's own (time, level, component) or the agent's,
 * in text; the degraded start is a warn line. */
Test(log, wrap_text_lines_and_the_degraded_start)
{
    run_prepare();
    char *err = run_wrap(NULL, NULL, true);
    cr_assert(strstr(err, " warn  wrap: agent 'noisy' started with containment incomplete "
                          "(containment.mode best_effort): not enforced: bandwidth (no backend "
                          "shapes bandwidth"),
              "no warn line for the degraded start:\n%s", err);
    cr_assert(strstr(err, " info  agent=noisy: plain line\n"), "%s", err);
    cr_assert(strstr(err, " info  agent=noisy: esc \\x1b[2J \"quoted\" back\\slash\n"), "%s", err);
    for (const char *s = err; *s;) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char level[8];
        bool own = tgh_log_own(s, level, NULL) != NULL;
        bool agent = n > 31 && strncmp(s + 24, " info  agent=noisy: ", 20) == 0;
        cr_assert(own || agent, "a line without time, level and component: %.*s", (int)n, s);
        s += n + (e ? 1 : 0);
    }
    free(err);
}

Test(log, wrap_json_lines)
{
    run_prepare();
    char *err = run_wrap("--log-format=json", NULL, true);
    int lines = 0, agent = 0, warn = 0;
    for (char *s = err; *s;) {
        char *e = strchr(s, '\n');
        cr_assert_not_null(e, "a line without its end: %s", s);
        char save = e[1];
        e[1] = '\0';
        json_t *o = parse_line(s);
        e[1] = save;
        lines++;
        cr_assert_eq(strlen(field(o, "time")), 24);
        const char *lv = field(o, "level"), *comp = field(o, "component");
        cr_assert(lv != NULL && comp != NULL && field(o, "msg") != NULL, "%.*s", (int)(e - s), s);
        if (strcmp(comp, "agent") == 0) {
            cr_assert_str_eq(field(o, "agent"), "noisy");
            cr_assert_str_eq(lv, "info");
            agent += strcmp(field(o, "msg"), "esc \\x1b[2J \"quoted\" back\\slash") == 0;
        } else {
            cr_assert_str_eq(comp, "wrap");
            warn += strcmp(lv, "warn") == 0 && strstr(field(o, "msg"), "containment incomplete");
        }
        json_decref(o);
        s = e + 1;
    }
    cr_assert_geq(lines, 4, "%s", err);
    cr_assert_eq(agent, 1, "the escaped agent line is not there as written:\n%s", err);
    cr_assert_eq(warn, 1, "%s", err);
    free(err);
}

Test(log, toolgate_log_filters_levels)
{
    run_prepare();
    char *env_warn[] = {(char *)"TOOLGATE_LOG=warn", NULL};
    char *err = run_wrap(NULL, env_warn, false);
    cr_assert(strstr(err, " warn  wrap: agent 'noisy' started with containment incomplete"), "%s",
              err);
    cr_assert_null(strstr(err, " info  "), "an info line under TOOLGATE_LOG=warn:\n%s", err);
    free(err);

    run_prepare();
    char *env_error[] = {(char *)"TOOLGATE_LOG=error", NULL};
    err = run_wrap(NULL, env_error, false);
    cr_assert_null(strstr(err, "containment incomplete"), "a warn line under error:\n%s", err);
    free(err);

    run_prepare();
    char *env_debug[] = {(char *)"TOOLGATE_LOG=debug", NULL};
    err = run_wrap(NULL, env_debug, true);
    cr_assert(strstr(err, " info  agent=noisy: plain line\n"), "%s", err);
    free(err);
}

Test(log, journal_stream_gets_priorities_and_no_time)
{
    run_prepare();
    struct stat st;
    cr_assert_eq(stat(R.err, &st), 0);
    char var[96];
    snprintf(var, sizeof var, "JOURNAL_STREAM=%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    char *env[] = {var, NULL};
    char *err = run_wrap(NULL, env, true);
    char *warn = line_with(err, "started with containment incomplete");
    cr_assert_not_null(warn, "%s", err);
    static const char want[] = "<4>wrap: agent 'noisy' started with containment incomplete";
    cr_assert_eq(strncmp(warn, want, sizeof want - 1), 0, "%s", warn);
    free(warn);
    cr_assert(strstr(err, "<6>agent=noisy: plain line\n"), "%s", err);
    cr_assert_null(strstr(err, "2026-"), "a time under the journal:\n%s", err);
    free(err);

    /* Inherited by a process whose stderr is elsewhere: plain text. */
    run_prepare();
    char *other[] = {(char *)"JOURNAL_STREAM=1:2", NULL};
    err = run_wrap(NULL, other, true);
    cr_assert_null(strstr(err, "<6>"), "%s", err);
    cr_assert(strstr(err, " info  agent=noisy: plain line\n"), "%s", err);
    free(err);
}

/* A bad --log-format or TOOLGATE_LOG is a usage error: exit 2, one error
 * line saying what is expected. */
Test(log, bad_settings_are_usage_errors)
{
    run_prepare();
    char *argv[] = {(char *)TG_BIN,
                    (char *)"serve",
                    (char *)"--log-format",
                    (char *)"yaml",
                    (char *)"--config",
                    R.cfg,
                    NULL};
    cr_assert_eq(tgh_spawn(&R.p, argv, NULL, R.err), 0);
    cr_assert_eq(tgh_wait(&R.p, 5000), 0);
    cr_assert_eq(tgh_exit_code(&R.p), 2);
    char *err = tgh_read_file(R.err, NULL);
    cr_assert(strstr(err, " error toolgate: --log-format yaml: expected text or json\n"), "%s",
              err);
    free(err);

    char *env[] = {(char *)"TOOLGATE_LOG=chatty", NULL};
    char *argv2[] = {(char *)TG_BIN, (char *)"check", (char *)"--config", R.cfg, NULL};
    cr_assert_eq(tgh_spawn(&R.p, argv2, env, R.err), 0);
    cr_assert_eq(tgh_wait(&R.p, 5000), 0);
    cr_assert_eq(tgh_exit_code(&R.p), 2);
    err = tgh_read_file(R.err, NULL);
    cr_assert(strstr(err, "TOOLGATE_LOG=chatty: expected debug, info, warn or error"), "%s", err);
    free(err);
}

/* serve takes --log-format after its command too; its lines are
 * component "serve". */
Test(log, serve_json_lines)
{
    static tgh_serve_t S; /* registered with the harness: it must outlive the test body */
    char json_cfg[4096];
    cr_assert_eq(tgh_serve_prepare(&S, "lg"), 0);
    snprintf(json_cfg, sizeof json_cfg,
             "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"}]},"
             " \"audit\": {\"path\": \"%s\"},"
             " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\"]}]}\n",
             S.sock, S.audit, TG_AGENTS_DIR);
    cr_assert_eq(tgh_write_file(S.cfg, json_cfg), 0);
    char *argv[] = {(char *)TG_BIN,
                    (char *)"serve",
                    (char *)"--config",
                    S.cfg,
                    (char *)"--log-format",
                    (char *)"json",
                    NULL};
    cr_assert_eq(tgh_spawn(&S.tg, argv, NULL, S.err), 0);
    if (tgh_file_wait(S.err, "\"msg\":\"serving ", 1, 10000) < 1)
        tgh_fail_with_stderr(S.err, "no json serving line");
    tgh_serve_stop(&S, 10000);
    char *err = tgh_read_file(S.err, NULL);
    char *serving = line_with(err, "\"msg\":\"serving ");
    json_t *o = parse_line(serving);
    cr_assert_str_eq(field(o, "component"), "serve");
    cr_assert_str_eq(field(o, "level"), "info");
    json_decref(o);
    free(serving);
    free(err);
}
