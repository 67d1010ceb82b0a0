/* Help, version, man pages and completion (issue 14, parts 4 and 5):
 * every command's --help and -h exit 0 with its usage on stdout; the
 * commands of toolgate(1), of the command table and of main.c's dispatch
 * are the same; every option is in toolgate(1); every key-table row is in
 * toolgate.json(5) as built; mandoc -T lint passes; --version names the
 * revision, the libraries and the containment backends; the bash
 * completion offers the binary's commands, options and --limit keys.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "config/keys.h"
#include "router/cli/help.h"
#include "tests/tg_harness.h"
#include "tests/tg_sh.h"

#ifndef TG_MAN_DIR
#error "TG_MAN_DIR: the built man pages (tests/CMakeLists.txt)"
#endif

#define MAN1      TG_SOURCE_DIR "/deploy/man/toolgate.1"
#define MAN5      TG_MAN_DIR "/toolgate.json.5"
#define CMD_MAX   TGH_SH_MAX
#define NAMES_MAX 64 /* commands documented in toolgate(1) */
#define NAME_LEN  32

TestSuite(help, .init = tgh_tmp_init, .fini = tgh_cleanup);

/* tests/tg_sh.h's runner. */
static int run(const char *cmd, char **out, char **err)
{
    return tgh_sh(cmd, out, err);
}

/* `toolgate <args> <flag>` prints "usage: toolgate <name>" on stdout,
 * nothing on stderr, and exits 0. */
static void expect_help(const char *args, const char *flag, const char *name)
{
    char cmd[CMD_MAX], want[256];
    char *out, *err;
    snprintf(cmd, sizeof cmd, "'%s' %s %s", TG_BIN, args, flag);
    int rc = run(cmd, &out, &err);
    snprintf(want, sizeof want, "usage: toolgate %s", name);
    cr_expect_eq(rc, 0, "%s: exit %d (stderr: %s)", cmd, rc, err);
    cr_expect(strncmp(out, want, strlen(want)) == 0, "%s: stdout does not start with '%s': %s", cmd,
              want, out);
    cr_expect_str_empty(err, "%s: stderr: %s", cmd, err);
    free(out);
    free(err);
}

Test(help, every_command_help_exits_0_with_usage_on_stdout)
{
    for (size_t i = 0; i < tg_cli_ncmds; i++) {
        expect_help(tg_cli_cmds[i].name, "--help", tg_cli_cmds[i].name);
        expect_help(tg_cli_cmds[i].name, "-h", tg_cli_cmds[i].name);
    }
    expect_help("", "--help", "COMMAND");
    expect_help("", "-h", "COMMAND");
    expect_help("", "help", "COMMAND");
    expect_help("audit", "--help", "audit tail");
    expect_help("token", "-h", "token new");
    /* after other options, and with values that look like words */
    expect_help("wrap --config /nonexistent.json --limit burst=3", "--help", "wrap");
    expect_help("check --json", "-h", "check");
    expect_help("serve --config /nonexistent.json", "--help", "serve");
}

/* Issue 20 item 17: the options every command takes are in `toolgate
 * --help` and in each command's --help. */
Test(help, log_format_and_toolgate_log_are_in_every_help)
{
    char cmd[CMD_MAX], *out, *err;
    for (size_t i = 0; i <= tg_cli_ncmds; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s --help", TG_BIN,
                 i < tg_cli_ncmds ? tg_cli_cmds[i].name : "");
        cr_assert_eq(run(cmd, &out, &err), 0, "%s: %s", cmd, err);
        cr_expect_not_null(strstr(out, "--log-format"), "%s: no --log-format:\n%s", cmd, out);
        cr_expect_not_null(strstr(out, "TOOLGATE_LOG"), "%s: no TOOLGATE_LOG:\n%s", cmd, out);
        free(out);
        free(err);
    }
}

Test(help, help_text_lists_limit_keys_from_the_key_table)
{
    char cmd[CMD_MAX], *out, *err;
    snprintf(cmd, sizeof cmd, "'%s' wrap --help", TG_BIN);
    cr_assert_eq(run(cmd, &out, &err), 0);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        if (!tg_cfg_keys[i].cli)
            continue;
        const char *name = tg_cfg_key_cli(&tg_cfg_keys[i]);
        cr_expect(strstr(out, name) != NULL, "wrap --help does not list --limit %s", name);
    }
    free(out);
    free(err);
}

Test(help, the_agent_commands_help_is_not_ours)
{
    /* wrap -- CMD --help: --help is the agent's (wrap tries to run CMD). */
    char cmd[CMD_MAX], *out, *err;
    snprintf(cmd, sizeof cmd, "'%s' wrap --audit /dev/null -- /nonexistent/agent --help", TG_BIN);
    run(cmd, &out, &err);
    cr_expect(strstr(out, "usage:") == NULL, "printed help: %s", out);
    cr_expect(strstr(err, "/nonexistent/agent") != NULL, "did not run the agent: %s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' demo --nonsense", TG_BIN);
    cr_expect_eq(run(cmd, &out, &err), 2, "demo ran with an unknown argument");
    cr_expect(strstr(err, "--nonsense") != NULL, "%s", err);
    free(out);
    free(err);
}

Test(help, version_names_revision_libraries_and_backends)
{
    char cmd[CMD_MAX], *out, *err;
    snprintf(cmd, sizeof cmd, "'%s' --version", TG_BIN);
    cr_assert_eq(run(cmd, &out, &err), 0, "%s", err);
    cr_expect(strncmp(out, "toolgate " TG_VERSION " (git ", 16) == 0, "%s", out);
    cr_expect(strstr(out, "(git unknown)") != NULL || strstr(out, "(git )") == NULL, "%s", out);
    const char *want[] = {"libuv ",
                          "hiredis ",
                          "jansson ",
                          "OpenSSL 3",
                          "containment: ",
                          "rlimit",
                          "containment.mode best_effort here: "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(out, want[i]) != NULL, "--version lacks '%s': %s", want[i], out);
    cr_expect_str_empty(err, "%s", err);
    free(out);
    free(err);
}

/* The commands toolgate(1) documents: the words after ".It Cm" in its
 * COMMANDS section, up to the first macro (a capitalised word). */
static size_t man_commands(char names[NAMES_MAX][NAME_LEN])
{
    char *man = tgh_read_file(MAN1, NULL);
    cr_assert(man != NULL, "cannot read %s", MAN1);
    char *sec = strstr(man, "\n.Sh COMMANDS\n");
    cr_assert(sec != NULL, "toolgate(1) has no COMMANDS section");
    char *end = strstr(sec + 1, "\n.Sh ");
    size_t n = 0;
    for (char *p = strstr(sec, "\n.It Cm "); p != NULL && (!end || p < end);
         p = strstr(p + 1, "\n.It Cm ")) {
        char *w = p + strlen("\n.It Cm ");
        size_t len = 0;
        while (w[len] != '\n' && !(w[len] == ' ' && w[len + 1] >= 'A' && w[len + 1] <= 'Z'))
            len++;
        cr_assert(n < NAMES_MAX && len < NAME_LEN);
        snprintf(names[n++], NAME_LEN, "%.*s", (int)len, w);
    }
    free(man);
    return n;
}

Test(help, toolgate_1_documents_exactly_the_commands)
{
    char names[NAMES_MAX][NAME_LEN];
    size_t n = man_commands(names);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        char w0[NAME_LEN];
        const char *sp = strchr(names[i], ' ');
        snprintf(w0, sizeof w0, "%.*s", sp ? (int)(sp - names[i]) : (int)strlen(names[i]),
                 names[i]);
        const tg_cli_cmd_t *c = tg_cli_cmd_find(w0, sp ? sp + 1 : NULL);
        cr_expect(c != NULL && strcmp(c->name, names[i]) == 0,
                  "toolgate(1) documents '%s', which toolgate does not have", names[i]);
        if (c != NULL)
            expect_help(names[i], "--help", names[i]); /* and it runs */
    }
    for (size_t i = 0; i < tg_cli_ncmds; i++) {
        bool found = false;
        for (size_t j = 0; j < n && !found; j++)
            found = strcmp(names[j], tg_cli_cmds[i].name) == 0;
        cr_expect(found, "toolgate %s is not in toolgate(1)'s COMMANDS", tg_cli_cmds[i].name);
    }
}

Test(help, every_option_is_in_toolgate_1)
{
    char *man = tgh_read_file(MAN1, NULL);
    cr_assert(man != NULL);
    for (size_t i = 0; i < tg_cli_ncmds; i++) {
        const char *p = tg_cli_cmds[i].options;
        while (*p != '\0') {
            size_t len = strcspn(p, " =");
            char want[64];
            /* "--config" is written "Fl -config" in mdoc */
            snprintf(want, sizeof want, "Fl %.*s", (int)len - 1, p + 1);
            cr_expect(strstr(man, want) != NULL, "toolgate %s %.*s is not in toolgate(1)",
                      tg_cli_cmds[i].name, (int)len, p);
            p += strcspn(p, " ");
            p += strspn(p, " ");
        }
    }
    free(man);
}

/* main.c dispatches on strcmp(cmd, "WORD"): each public word is a command
 * of the table (so of toolgate(1)). */
Test(help, main_dispatches_only_documented_commands)
{
    char *src = tgh_read_file(TG_SOURCE_DIR "/router/main.c", NULL);
    cr_assert(src != NULL);
    size_t seen = 0;
    for (char *p = strstr(src, "strcmp(cmd, \""); p != NULL; p = strstr(p + 1, "strcmp(cmd, \"")) {
        char word[NAME_LEN];
        const char *w = p + strlen("strcmp(cmd, \"");
        size_t len = strcspn(w, "\"");
        cr_assert_lt(len, NAME_LEN);
        snprintf(word, sizeof word, "%.*s", (int)len, w);
        if (word[0] == '-' || strncmp(word, "__", 2) == 0 || strcmp(word, "help") == 0 ||
            strcmp(word, "version") == 0)
            continue; /* options, hidden commands, aliases of --help/--version */
        bool found = false;
        for (size_t i = 0; i < tg_cli_ncmds && !found; i++)
            found = strncmp(tg_cli_cmds[i].name, word, len) == 0 &&
                    (tg_cli_cmds[i].name[len] == '\0' || tg_cli_cmds[i].name[len] == ' ');
        cr_expect(found, "main.c dispatches '%s', which has no help (router/cli/help.c)", word);
        seen++;
    }
    cr_expect_geq(seen, 7, "main.c's dispatch was not found (%zu words)", seen);
    free(src);
}

Test(help, every_key_row_is_in_toolgate_json_5)
{
    char *man = tgh_read_file(MAN5, NULL);
    cr_assert(man != NULL, "cannot read %s (built by the tg_man target)", MAN5);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        char want[256];
        snprintf(want, sizeof want, "\n.It Cm %s Pq %s\n", tg_cfg_keys[i].path,
                 tg_ktype_name(tg_cfg_keys[i].type));
        cr_expect(strstr(man, want) != NULL, "toolgate.json(5) has no entry for %s",
                  tg_cfg_keys[i].path);
        if (tg_cfg_keys[i].def != NULL && tg_cfg_keys[i].def[0] != '\0') {
            const char *at = strstr(man, want);
            const char *next = at ? strstr(at + 1, "\n.It Cm ") : NULL;
            char def[128];
            snprintf(def, sizeof def, "Default:\n.Ql %s .", tg_cfg_keys[i].def);
            const char *d = at ? strstr(at, def) : NULL;
            cr_expect(d != NULL && (next == NULL || d < next), "%s: default %s not shown",
                      tg_cfg_keys[i].path, tg_cfg_keys[i].def);
        }
    }
    free(man);
}

Test(help, man_pages_pass_mandoc_lint)
{
    if (tgh_which("mandoc") == NULL)
        cr_skip_test("mandoc is not installed (deploy/install-deps.sh installs it)");
    const char *pages[] = {MAN1, MAN5};
    for (size_t i = 0; i < 2; i++) {
        char cmd[CMD_MAX], *out, *err;
        /* warnings and worse; "referenced manual not found" (a STYLE
         * message) depends on what this host has installed */
        snprintf(cmd, sizeof cmd, "mandoc -T lint -W warning '%s'", pages[i]);
        int rc = run(cmd, &out, &err);
        cr_expect_eq(rc, 0, "%s: %s%s", cmd, out, err);
        cr_expect_str_empty(out, "%s: %s", cmd, out);
        free(out);
        free(err);
    }
}

/* Issue 20 item 10: an enum's choices render as "One of 'a', 'b' or
 * 'c'." Lint passes the mdoc source either way (".Ql b or" is valid mdoc
 * that quotes "b or" as one literal), so this reads the rendered text. */
Test(help, enum_choices_render_each_quoted_alone)
{
    if (tgh_which("mandoc") == NULL)
        cr_skip_test("mandoc is not installed (deploy/install-deps.sh installs it)");
    char cmd[CMD_MAX], *out, *err;
    snprintf(cmd, sizeof cmd, "mandoc -T utf8 -O width=300 '%s'", MAN5);
    cr_assert_eq(run(cmd, &out, &err), 0, "%s: %s", cmd, err);
    /* One space for every run of blanks and newlines: a line break of
     * the renderer must not decide the test. */
    size_t w = 0;
    for (size_t r = 0; out[r] != '\0'; r++)
        if (!(out[r] == ' ' || out[r] == '\n') || (w > 0 && out[w - 1] != ' '))
            out[w++] = out[r] == '\n' ? ' ' : out[r];
    out[w] = '\0';
    const char *bad = strstr(out, " or\u2019");
    cr_expect_null(bad, "a choice is quoted with \"or\": ...%.60s",
                   bad == NULL      ? ""
                   : bad - 40 > out ? bad - 40
                                    : out);
    size_t nenum = 0;
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        if (k->type != TG_KT_ENUM || k->choices == NULL)
            continue;
        char want[512];
        size_t n = (size_t)snprintf(want, sizeof want, "One of");
        for (size_t c = 0; k->choices[c] != NULL && n < sizeof want; c++)
            n += (size_t)snprintf(want + n, sizeof want - n, "%s \u2018%s\u2019",
                                  c == 0                      ? ""
                                  : k->choices[c + 1] != NULL ? ","
                                                              : " or",
                                  k->choices[c]);
        if (n < sizeof want)
            snprintf(want + n, sizeof want - n, ".");
        cr_expect_not_null(strstr(out, want), "%s: toolgate.json(5) does not say \"%s\"", k->path,
                           want);
        nenum++;
    }
    cr_expect_geq(nenum, 10, "the key table's enums were not found (%zu)", nenum);
    free(out);
    free(err);
}

/* Complete the words <words> (the last one being completed) with
 * deploy/completion/toolgate.bash; the candidates, space-separated. */
static char *complete(const char *words)
{
    char cmd[CMD_MAX], *out, *err;
    snprintf(cmd, sizeof cmd,
             "bash -c 'source \"%s/deploy/completion/toolgate.bash\"; "
             "COMP_WORDS=(\"%s\" %s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
             "_toolgate; echo \"${COMPREPLY[*]}\"'",
             TG_SOURCE_DIR, TG_BIN, words);
    int rc = run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "%s: %s", cmd, err);
    free(err);
    return out;
}

Test(help, completion_offers_commands_options_and_limit_keys)
{
    if (tgh_which("bash") == NULL)
        cr_skip_test("bash is not installed");
    char *c = complete("wr");
    cr_expect_str_eq(c, "wrap\n");
    free(c);
    c = complete("audit \"\"");
    cr_expect_str_eq(c, "tail verify\n");
    free(c);
    c = complete("check --js");
    cr_expect_str_eq(c, "--json\n");
    free(c);
    c = complete("wrap --limit tools.web.max_c");
    cr_expect_str_eq(c, "tools.web.max_concurrent_calls=\n");
    free(c);
    /* every --limit key of the key table, and nothing else */
    c = complete("wrap --limit \"\"");
    char padded[8192];
    snprintf(padded, sizeof padded, " %s", c);
    size_t want = 1; /* "tools." */
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        if (!tg_cfg_keys[i].cli || tg_cfg_key_under(&tg_cfg_keys[i], "agents[].tools.*"))
            continue;
        char k[96];
        snprintf(k, sizeof k, " %s=", tg_cfg_key_cli(&tg_cfg_keys[i]));
        cr_expect(strstr(padded, k) != NULL, "--limit completion lacks%s: %s", k, c);
        want++;
    }
    size_t words = 0;
    for (const char *p = c; *p; p++)
        words += *p == ' ' || *p == '\n';
    cr_expect_eq(words, want, "--limit completion: %s", c);
    free(c);
}
