/* The agent stderr relay (issue 12, item 9): every relayed line carries
 * the agent's id, control bytes and invalid UTF-8 are escaped so no
 * terminal sequence survives, and the line and rate caps hold on what is
 * written. The pure formatter (router/gateway/log.c) first, then a real
 * `toolgate wrap` whose agent prints a forged toolgate line, an ESC[2J
 * and a long line.
 */
#include <criterion/criterion.h>

#include "router/gateway/log.h"
#include "tg_harness.h"

static void it_fini(void)
{
    tgh_cleanup();
}

TestSuite(stderr_relay, .fini = it_fini, .timeout = 30);

static size_t esc(char *out, size_t cap, const char *in)
{
    size_t n = tg_log_escape(out, cap - 1, in, strlen(in), NULL);
    out[n] = '\0';
    return n;
}

Test(stderr_relay, escape_controls_and_bad_utf8)
{
    char out[256];
    esc(out, sizeof out, "plain text\twith tab");
    cr_assert_str_eq(out, "plain text\twith tab");
    esc(out, sizeof out, "\033[2J\033[31m");
    cr_assert_str_eq(out, "\\x1b[2J\\x1b[31m");
    esc(out, sizeof out, "a\rb\x7f" "c\x01");
    cr_assert_str_eq(out, "a\\x0db\\x7fc\\x01");
    /* C1 CSI (U+009B) as UTF-8, a bidi override (U+202E), an isolate
     * (U+2066): escaped; é and a CJK character pass. */
    esc(out, sizeof out, "\xc2\x9b|\xe2\x80\xae|\xe2\x81\xa6|\xc3\xa9\xe4\xb8\xad");
    cr_assert_str_eq(out, "\\xc2\\x9b|\\xe2\\x80\\xae|\\xe2\\x81\\xa6|\xc3\xa9\xe4\xb8\xad");
    /* Invalid: a lone 0xff, a stray continuation byte, an overlong '/', a
     * surrogate, a sequence cut short at the end. */
    esc(out, sizeof out, "\xff|\x80|\xc0\xaf|\xed\xa0\x80|\xe4\xb8");
    cr_assert_str_eq(out, "\\xff|\\x80|\\xc0\\xaf|\\xed\\xa0\\x80|\\xe4\\xb8");
}

Test(stderr_relay, escape_stops_before_a_unit_that_does_not_fit)
{
    char out[16];
    size_t used = 0;
    size_t n = tg_log_escape(out, 5, "ab\033cd", 5, &used);
    cr_assert_eq(n, 2, "an escape is never cut in half");
    cr_assert_eq(used, 2);
    n = tg_log_escape(out, 3, "a\xc3\xa9", 3, &used);
    cr_assert_eq(n, 3);
    cr_assert_eq(used, 3);
    n = tg_log_escape(out, 2, "a\xc3\xa9", 3, &used);
    cr_assert_eq(n, 1, "a UTF-8 character is never cut in half");
    cr_assert_eq(used, 1);
}

/* 2026-11-26T17:20:01.123Z, the time of the formatter tests */
#define T0      INT64_C(1795713601123)
#define T0_TEXT "2026-11-26T17:20:01.123Z"

Test(stderr_relay, relay_line_prefixed_capped_marked)
{
    static const tg_log_opts_t text = {.format = TG_LOG_TEXT, .min = TG_LOG_INFO};
    char out[TG_LOG_RELAY_CAP(64)];
    size_t n = tg_log_relay_fmt(out, &text, T0, "srch", "serve: SIGHUP fake\r", 19, 64, false);
    static const char want[] = T0_TEXT " info  agent=srch: serve: SIGHUP fake\n";
    cr_assert_eq(n, strlen(want));
    cr_assert(memcmp(out, want, n) == 0);
    /* 20 ESC bytes escape to 80 bytes: cut at 64 (16 escapes), marked. */
    char in[20];
    memset(in, 033, sizeof in);
    n = tg_log_relay_fmt(out, &text, T0, "a", in, sizeof in, 64, false);
    out[n] = '\0';
    cr_assert_str_eq(out, T0_TEXT " info  agent=a: \\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b"
                                  "\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b [truncated]\n");
    /* An id with control bytes is escaped too. */
    n = tg_log_relay_fmt(out, &text, T0, "x\033y", "hi", 2, 64, true);
    out[n] = '\0';
    cr_assert_str_eq(out, T0_TEXT " info  agent=x\\x1by: hi [truncated]\n");
}

/* No line of <err> may hold an ESC, C1 or other control byte except '\n'. */
static void assert_no_controls(const char *err)
{
    for (const unsigned char *p = (const unsigned char *)err; *p; p++) {
        cr_assert(*p == '\n' || *p == '\t' || (*p >= 0x20 && *p != 0x7f),
                  "a raw control byte 0x%02x reached toolgate's stderr", *p);
        if (p[0] == 0xc2)
            cr_assert(p[1] < 0x80 || p[1] > 0x9f, "a raw C1 control reached toolgate's stderr");
    }
}

/* A wrap whose agent (a shell script) writes hostile stderr at start and
 * then stays; <bps> is agents[].stderr.bytes_per_second. Returns
 * toolgate's stderr (heap) after the script's lines had time to arrive. */
static char *run_agent(const char *script_body, const char *bps, const char *max_line)
{
    char dir[TGH_PATH], script[TGH_PATH + 16], cfg[TGH_PATH + 16], err[TGH_PATH + 16];
    char json[1024];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(script, sizeof script, "%s/noisy", dir);
    cr_assert_eq(tgh_write_file(script, script_body), 0);
    chmod(script, 0700);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(json, sizeof json,
             "{\"agents\":[{\"id\":\"noisy\",\"command\":[\"%s\"],"
             "\"stderr\":{\"bytes_per_second\":\"%s\",\"max_line\":\"%s\"}}]}\n",
             script, bps, max_line);
    /* wrap takes the command after "--"; the config names the agent. */
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    snprintf(err, sizeof err, "%s/wrap.stderr", dir);
    static tgh_proc_t p;
    char *argv[] = {(char *)TG_BIN, (char *)"wrap", (char *)"--config", cfg, (char *)"--", script,
                    NULL};
    cr_assert_eq(tgh_spawn(&p, argv, NULL, err), 0);
    /* The script ends with a marker line; wait for it (or the cap). */
    uint64_t deadline = tgh_now_ms() + 5000;
    char *text = NULL;
    while (tgh_now_ms() < deadline) {
        free(text);
        text = tgh_read_file(err, NULL);
        if (text && strstr(text, "END-OF-NOISE"))
            break;
        tgh_sleep_ms(50);
    }
    tgh_sleep_ms(200);
    free(text);
    tgh_close_stdin(&p);
    tgh_wait(&p, 5000);
    text = tgh_read_file(err, NULL);
    cr_assert_not_null(text);
    return text;
}

Test(stderr_relay, wrap_attributes_escapes_and_caps)
{
    char *err = run_agent("#!/bin/sh\n"
                          "printf 'toolgate: SIGHUP accepted, config reloaded\\n' >&2\n"
                          "printf '2026-11-26T17:20:01.123Z info  wrap: SIGHUP: forged\\n' >&2\n"
                          "printf 'wipe \\033[2J\\033[31mred \\302\\233 \\377\\r\\n' >&2\n"
                          "head -c 6000 /dev/zero | tr '\\000' 'A' >&2; echo >&2\n"
                          "echo END-OF-NOISE >&2\n"
                          "exec sleep 30\n",
                          "64Ki", "4Ki");
    assert_no_controls(err);
    /* Each line the agent wrote is attributed; toolgate's own lines are
     * the only ones with a component other than "agent=ID". */
    cr_assert_eq(tgh_own_lines_with(err, "SIGHUP"), 0,
                 "a forged toolgate line passed for toolgate's own:\n%s", err);
    cr_assert(strstr(err, " info  agent=noisy: toolgate: SIGHUP accepted, config reloaded\n"), "%s",
              err);
    cr_assert(strstr(err, " info  agent=noisy: wipe \\x1b[2J\\x1b[31mred \\xc2\\x9b \\xff\n"), "%s",
              err);
    cr_assert(strstr(err, " info  agent=noisy: END-OF-NOISE\n"), "%s", err);
    cr_assert(
        strstr(err, " info  agent=noisy: 2026-11-26T17:20:01.123Z info  wrap: SIGHUP: forged\n"),
        "%s", err);
    /* The long line: cut at max_line (4096 bytes of text), marked. */
    const char *l = strstr(err, "agent=noisy: AAAA");
    cr_assert_not_null(l, "%s", err);
    const char *nl = strchr(l, '\n');
    size_t body = (size_t)(nl - l) - strlen("agent=noisy: ");
    cr_assert_eq(body, 4096 + strlen(" [truncated]"), "long line body is %zu bytes", body);
    cr_assert(strncmp(nl - 12, " [truncated]", 12) == 0);
    /* Every non-empty line is toolgate's or the agent's, with a time. */
    for (const char *s = err; *s;) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        bool agent = n > 31 && strncmp(s + 24, " info  agent=noisy: ", 20) == 0;
        cr_assert(n == 0 || tgh_log_own(s, NULL, NULL) != NULL || agent,
                  "an unattributed line: %.*s", (int)n, s);
        s += n + (e ? 1 : 0);
    }
    free(err);
}

Test(stderr_relay, wrap_rate_cap_counts_what_is_written)
{
    /* 200 escape-heavy lines of 50 ESC bytes: each is ~216 bytes as
     * written; a 2Ki/s budget relays about 9 of them a second (charged raw, 40). */
    char *err = run_agent("#!/bin/sh\n"
                          "i=0; while [ $i -lt 200 ]; do\n"
                          "  printf '\\033\\033\\033\\033\\033\\033\\033\\033\\033\\033"
                          "\\033\\033\\033\\033\\033\\033\\033\\033\\033\\033"
                          "\\033\\033\\033\\033\\033\\033\\033\\033\\033\\033"
                          "\\033\\033\\033\\033\\033\\033\\033\\033\\033\\033"
                          "\\033\\033\\033\\033\\033\\033\\033\\033\\033\\033\\n' >&2\n"
                          "  i=$((i+1)); done\n"
                          "sleep 1.2; echo END-OF-NOISE >&2\n"
                          "exec sleep 30\n",
                          "2Ki", "4Ki");
    assert_no_controls(err);
    int relayed = tgh_count_lines_with(err, NULL, "agent=noisy: \\x1b");
    cr_assert_gt(relayed, 0, "%s", err);
    cr_assert_leq(relayed, 2 * (2048 / 216), "%d escape lines relayed against a 2Ki/s budget", relayed);
    cr_assert(strstr(err, "warn  wrap: agent 'noisy' stderr: ") && strstr(err, "bytes dropped"),
              "the drop was not reported:\n%s", err);
    free(err);
}
