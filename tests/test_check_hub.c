/* toolgate check for issue 22 (router/cli/check_hub.c): the policy built
 * and judged (a bad glob fails naming its path, a rule matching nothing
 * warns, an unknown agent is an error) and the names each front with
 * several agents exposes (the mapping, rewritten names, collisions as
 * warnings, the bound on lines shown). Each runs the real binary with
 * `toolgate check --config` (stdout and stderr together).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "router/cli/check.h"
#include "router/codec/expose.h"
#include "tests/tg_harness.h"

#define DOC_MAX (64 * 1024)

TestSuite(check_hub, .init = tgh_tmp_init, .fini = tgh_cleanup);

/* <text> holds <line> as a whole line. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

#define EXPECT_LINE(text, line)                                                                    \
    cr_expect(has_line(text, line), "missing line:\n%s\nin:\n%s", line, text)
#define EXPECT_HAS(text, s) cr_expect(strstr(text, s) != NULL, "missing:\n%s\nin:\n%s", s, text)

/* A config of two agents fronted by one Unix listener, callers ci-bot
 * and ops, then <extra> (",\"policy\": ..." or ""). Agent "fs" knows the
 * tools read_file and write_file, agent "web" the tool fetch. */
static const char *doc(const char *extra)
{
    static char buf[DOC_MAX];

    snprintf(buf, sizeof buf,
             "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\","
             " \"agents\": [\"fs\", \"web\"]}]},"
             " \"callers\": [{\"name\": \"ci-bot\", \"uid\": 1001},"
             "               {\"name\": \"ops\", \"uid\": 1002}],"
             " \"agents\": ["
             "  {\"id\": \"fs\", \"command\": [\"/bin/true\"],"
             "   \"tools\": {\"read_file\": {}, \"write_file\": {}}},"
             "  {\"id\": \"web\", \"command\": [\"/bin/true\"],"
             "   \"tools\": {\"fetch\": {}}}]%s}",
             extra);
    return buf;
}

/* The config loads and validates: what check says of its policy is
 * check's own finding, not the loader's. */
static void loads(const char *json)
{
    tg_config_t cfg;
    tg_err_t err;

    cr_assert_eq(tg_config_default(&cfg), 0);
    int rc = tg_config_load_buffer(&cfg, "t.json", json, strlen(json), &err);
    if (rc == 0)
        rc = tg_config_validate(&cfg, &err);
    cr_assert_eq(rc, 0, "the loader refuses it: %s", err.msg);
    tg_config_free(&cfg);
}

/* ---- the policy ---- */

Test(check_hub, a_policy_that_does_not_build_fails_naming_the_path)
{
    const char *json = doc(",\"policy\": {\"default\": \"deny\", \"rules\": ["
                           " {\"effect\": \"allow\", \"tools\": [\"read_*\"]},"
                           " {\"effect\": \"allow\", \"agents\": [\"fs\"], \"tools\": [\"[abc\"]}]}");
    char *out;

    loads(json);
    cr_expect_eq(tgh_check_config(json, &out), 1, "%s", out);
    EXPECT_HAS(out, "policy.rules[1].tools[0]: \"[abc\" has a [ without its ]");
    cr_expect_null(strstr(out, "valid\n"), "reported valid:\n%s", out);
    free(out);
}

Test(check_hub, a_rule_matching_nothing_is_a_warning)
{
    /* rules[0] names no caller; rules[1] (tools/call only, so the known
     * tools are all it can match) names no known tool of fs; rules[2]'s
     * second callers entry names no caller while its first does. */
    const char *json = doc(",\"policy\": {\"default\": \"allow\", \"rules\": ["
                           " {\"effect\": \"deny\", \"callers\": [\"nobody\"]},"
                           " {\"effect\": \"deny\", \"agents\": [\"fs\"], \"tools\": [\"exec_*\"],"
                           "  \"methods\": [\"tools/call\"]},"
                           " {\"effect\": \"deny\", \"callers\": [\"ops\", \"opz\"]}]}");
    char *out;

    loads(json);
    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_LINE(out, "policy: default allow, 3 rules (tools known to check: agents[].tools)");
    EXPECT_HAS(out, "  warning: policy.rules[0]: matches nothing: its callers name no caller "
                    "(callers[]: ci-bot, ops)");
    EXPECT_HAS(out, "  warning: policy.rules[1]: matches nothing: its tools (\"exec_*\") match no "
                    "known name");
    EXPECT_HAS(out, "  warning: policy.rules[2].callers[1]: \"opz\" names no caller");
    /* also on stderr, as the start problems are */
    EXPECT_HAS(out, "toolgate check: warning: policy.rules[0]: matches nothing");
    cr_expect_null(strstr(out, "error:"), "an error in:\n%s", out);
    free(out);
}

Test(check_hub, a_rule_naming_an_unknown_agent_is_an_error)
{
    const char *json = doc(",\"policy\": {\"default\": \"allow\", \"rules\": ["
                           " {\"effect\": \"deny\", \"agents\": [\"fs\", \"gti*\"]}]}");
    char *out;

    loads(json);
    cr_expect_eq(tgh_check_config(json, &out), 1, "%s", out);
    EXPECT_LINE(out, "  error: policy.rules[0].agents[1]: \"gti*\" matches no agent (agents: fs, "
                     "web)");
    EXPECT_HAS(out, "toolgate check: error: policy.rules[0].agents[1]");
    EXPECT_HAS(out, "toolgate check: the policy has 1 error");
    free(out);
}

Test(check_hub, a_clean_policy_says_so_and_passes)
{
    const char *json = doc(",\"policy\": {\"default\": \"deny\", \"rules\": ["
                           " {\"effect\": \"allow\", \"callers\": [\"ci-bot\"], \"agents\": "
                           "[\"fs\"], \"tools\": [\"read_*\"]}]}");
    char *out;

    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_LINE(out, "policy: default deny, 1 rule (tools known to check: agents[].tools)");
    cr_expect_null(strstr(out, "warning:"), "a warning in:\n%s", out);
    free(out);
}

/* ---- exposed names ---- */

Test(check_hub, a_listener_with_agents_prints_the_mapping)
{
    char *out;

    cr_expect_eq(tgh_check_config(doc(""), &out), 0, "%s", out);
    EXPECT_LINE(out, "exposed names on router.listen[0] (unix /tmp/tg-check-hub.sock): 3 names, 0 "
                     "rewritten, 0 hidden");
    EXPECT_LINE(out, "  fs__read_file -> fs/read_file");
    EXPECT_LINE(out, "  fs__write_file -> fs/write_file");
    EXPECT_LINE(out, "  web__fetch -> web/fetch");
    /* the agents in the listener's order: fs's names before web's */
    cr_expect_lt(strstr(out, "fs__read_file"), strstr(out, "web__fetch"));
    free(out);
}

Test(check_hub, long_and_odd_names_show_their_rewritten_form)
{
    char tool[101], json[DOC_MAX], name[TG_EXPOSE_NAME_MAX + 1], line[512];
    size_t len;
    char *out;

    memset(tool, 'x', 100);
    tool[100] = '\0';
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\","
             " \"agents\": [\"fs\"]}]},"
             " \"agents\": [{\"id\": \"fs\", \"command\": [\"/bin/true\"],"
             "   \"tools\": {\"%s\": {}, \"ns:get\": {}}}]}",
             tool);
    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_HAS(out, ": 2 names, 2 rewritten, 0 hidden");

    cr_assert_eq(tg_expose_name("fs", 2, tool, 100, name, &len), 1);
    cr_assert_eq(len, TG_EXPOSE_NAME_MAX);
    snprintf(line, sizeof line, "  %s -> fs/%s  (rewritten: shortened to 64 bytes)", name, tool);
    EXPECT_LINE(out, line);

    cr_assert_eq(tg_expose_name("fs", 2, "ns:get", 6, name, &len), 1);
    snprintf(line, sizeof line,
             "  %s -> fs/ns:get  (rewritten: bytes outside [A-Za-z0-9_.-] escaped)", name);
    EXPECT_LINE(out, line);
    free(out);
}

Test(check_hub, a_collision_is_a_warning_naming_who_keeps_the_name)
{
    const char *json =
        "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\","
        " \"agents\": [\"left\", \"right\"]}]},"
        " \"agents\": ["
        "  {\"id\": \"left\", \"command\": [\"/bin/true\"], \"tool_prefix\": \"\","
        "   \"tools\": {\"search\": {}, \"left_only\": {}}},"
        "  {\"id\": \"right\", \"command\": [\"/bin/true\"], \"tool_prefix\": \"\","
        "   \"tools\": {\"search\": {}}}]}";
    char *out;

    cr_expect_eq(tgh_check_config(json, &out), 0, "a collision failed check:\n%s", out);
    EXPECT_HAS(out, ": 3 names, 0 rewritten, 1 hidden");
    EXPECT_LINE(out, "  search -> left/search");
    EXPECT_LINE(out, "  left_only -> left/left_only");
    EXPECT_LINE(out, "  search -> right/search  (hidden: collision, left/search keeps the name)");
    EXPECT_HAS(out, "  warning: router.listen[0].agents[1]: tool \"search\" of agent right is "
                    "hidden on router.listen[0] (unix /tmp/tg-check-hub.sock): its exposed name "
                    "\"search\" is kept by left/search");
    cr_expect_null(strstr(out, "error:"), "an error in:\n%s", out);
    free(out);
}

Test(check_hub, the_mapping_is_bounded)
{
    static char json[DOC_MAX];
    size_t n = 0;
    char *out;

    n += (size_t)snprintf(json + n, sizeof json - n,
                          "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\","
                          " \"agents\": [\"fs\"]}]},"
                          " \"agents\": [{\"id\": \"fs\", \"command\": [\"/bin/true\"],"
                          " \"tools\": {");
    for (int i = 0; i < TG_CHECK_EXPOSED_MAX + 50; i++)
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"t%03d\": {}", i ? ", " : "", i);
    snprintf(json + n, sizeof json - n, "}}]}");
    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_HAS(out, ": 250 names, 0 rewritten, 0 hidden");
    EXPECT_LINE(out, "  ... 50 more");
    size_t lines = 0;
    for (const char *p = out; (p = strstr(p, "\n  fs__t")) != NULL; p++)
        lines++;
    cr_expect_eq(lines, TG_CHECK_EXPOSED_MAX);
    free(out);
}

Test(check_hub, an_agent_without_known_tools_is_named)
{
    const char *json =
        "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\","
        " \"agents\": [\"fs\", \"bare\"]}]},"
        " \"agents\": [{\"id\": \"fs\", \"command\": [\"/bin/true\"], \"tools\": {\"a\": {}}},"
        "  {\"id\": \"bare\", \"command\": [\"/bin/true\"]}]}";
    char *out;

    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_LINE(out, "  fs__a -> fs/a");
    EXPECT_LINE(out, "  bare: no tools known (check lists agents[].tools; it starts no agent)");
    free(out);
}

Test(check_hub, wrap_with_several_agents_shows_its_stdio_front)
{
    const char *json =
        "{\"agents\": [{\"id\": \"fs\", \"command\": [\"/bin/true\"], \"tools\": {\"a\": {}}},"
        "  {\"id\": \"web\", \"command\": [\"/bin/true\"], \"tools\": {\"b\": {}}}]}";
    char *out;

    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    EXPECT_HAS(out, "exposed names on wrap (stdio, every mcp agent): 2 names");
    EXPECT_LINE(out, "  fs__a -> fs/a");
    EXPECT_LINE(out, "  web__b -> web/b");
    free(out);
}

Test(check_hub, a_front_with_one_agent_keeps_names_and_shows_no_mapping)
{
    const char *json =
        "{\"router\": {\"listen\": [{\"unix\": \"/tmp/tg-check-hub.sock\", \"agent\": \"fs\"}]},"
        " \"agents\": [{\"id\": \"fs\", \"command\": [\"/bin/true\"], \"tools\": {\"a\": {}}}]}";
    char *out;

    cr_expect_eq(tgh_check_config(json, &out), 0, "%s", out);
    cr_expect_null(strstr(out, "exposed names"), "a mapping for verbatim names:\n%s", out);
    free(out);
}

Test(check_hub, a_rule_on_token_names_fails_as_serve_and_wrap_refuse_it)
{
    const char *json = doc(",\"policy\": {\"default\": \"allow\", \"rules\": ["
                           "{\"effect\": \"deny\", \"tokens\": [\"ci-*\"]}]}");
    loads(json);
    char *out = NULL;
    cr_expect_eq(tgh_check_config(json, &out), 1, "%s", out);
    EXPECT_HAS(out, "policy.rules[0].tokens: bearer tokens have no names");
    free(out);
}
