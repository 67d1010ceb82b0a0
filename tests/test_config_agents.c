/* The config keys of issue 22 ("one endpoint, many agents"):
 * router.listen[].agents, agents[].tool_prefix, agent ids without "__",
 * and the top-level policy; each accepted, each refusal with its message,
 * copies and frees, and what a reload's diff says of them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/diff.h"
#include "config/keys.h"

#define DOC_MAX 2048 /* bytes of a test document */

static tg_config_t cfg;
static tg_err_t err;

static void setup(void)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(tg_config_default(&cfg), 0);
}

static void teardown(void)
{
    tg_config_free(&cfg);
}

TestSuite(cfg_agents, .init = setup, .fini = teardown);

/* Load <json> over a fresh default into <c>, then validate: 0 or -1. */
static int load_into(tg_config_t *c, const char *json)
{
    tg_config_free(c);
    cr_assert_eq(tg_config_default(c), 0);
    if (tg_config_load_buffer(c, "t.json", json, strlen(json), &err) < 0)
        return -1;
    return tg_config_validate(c, &err);
}

static int load(const char *json)
{
    return load_into(&cfg, json);
}

/* <json> is refused with a message holding <want>. */
static void refused(const char *json, const char *want)
{
    cr_expect_eq(load(json), -1, "accepted: %s", json);
    cr_expect_not_null(strstr(err.msg, want), "for: %s\n got: %s\nwant: %s", json, err.msg, want);
}

/* Three mcp agents and an opensentience one, then <listen> as
 * router.listen and <extra> (",\"policy\": ..." or ""). */
static const char *doc(const char *listen, const char *agent_extra, const char *extra)
{
    static char buf[DOC_MAX];

    snprintf(buf, sizeof buf,
             "{\"router\": {\"listen\": [%s]},"
             " \"agents\": ["
             "  {\"id\": \"fs\", \"command\": [\"/bin/fs\"]},"
             "  {\"id\": \"search\", \"command\": [\"/bin/s\"], \"tool_prefix\": \"s\"},"
             "  {\"id\": \"git\", \"command\": [\"/bin/g\"]%s},"
             "  {\"id\": \"osa\", \"dialect\": \"opensentience\", \"command\": [\"/bin/o\"]}]%s}",
             listen, agent_extra, extra);
    return buf;
}

/* ---- router.listen[].agents ---- */

Test(cfg_agents, a_unix_and_an_http_listener_take_a_list)
{
    cr_assert_eq(load(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"search\", \"git\"]},"
                          "{\"http\": \"127.0.0.1:8080\", \"agents\": [\"git\"]}",
                          "", "")),
                 0, "%s", err.msg);
    const tg_listen_cfg_t *l = &cfg.listen[0];
    cr_assert_null(l->agent, "agent stays NULL when agents is given");
    cr_assert_eq(l->nagents, 3);
    cr_assert_str_eq(l->agents[0], "fs");
    cr_assert_str_eq(l->agents[1], "search");
    cr_assert_str_eq(l->agents[2], "git");
    cr_assert_eq(cfg.listen[1].nagents, 1, "a list of one is a list");
    cr_assert_null(cfg.listen[1].agent);

    /* A single agent stays as it was: no list. */
    cr_assert_eq(load(doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "", "")), 0, "%s",
                 err.msg);
    cr_assert_str_eq(cfg.listen[0].agent, "fs");
    cr_assert_null(cfg.listen[0].agents);
    cr_assert_eq(cfg.listen[0].nagents, 0);
}

Test(cfg_agents, agent_and_agents_exactly_one)
{
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\", \"agents\": [\"fs\"]}", "", ""),
            "router.listen[0]: a listener serves one \"agent\" or a list of \"agents\", not both");
    refused(doc("{\"http\": \"127.0.0.1:8080\", \"agent\": \"fs\", \"agents\": [\"git\"]}", "", ""),
            "router.listen[0]: a listener serves one \"agent\" or a list of \"agents\", not both");
    refused(doc("{\"unix\": \"/tmp/a.sock\"}", "", ""),
            "router.listen[0]: a listener needs \"unix\" (socket path) or \"http\" (HOST:PORT), "
            "and \"agent\" (agent id) or \"agents\" (a list of agent ids)");
    refused(doc("{\"http\": \"127.0.0.1:8080\"}", "", ""),
            "router.listen[0]: an http listener needs \"agent\" (agent id) or \"agents\"");
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"dialect\": \"opensentience\", \"agents\": [\"osa\"]}",
                "", ""),
            "router.listen[0]: an opensentience listener routes calls by tool_id to every "
            "opensentience agent (remove \"agents\")");
}

Test(cfg_agents, the_list_itself)
{
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": []}", "", ""),
            "router.listen[0].agents: 0 agent ids (expected 1 to 1024; for one agent without a "
            "prefix, write \"agent\")");
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": \"fs\"}", "", ""),
            "router.listen[0].agents: expected an array of agent ids");
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", 3]}", "", ""),
            "router.listen[0].agents[1]: expected");
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\", \"fs\"]}", "", ""),
            "router.listen[0].agents[2]: agent \"fs\" is also agents[0] (expected each id once)");
}

Test(cfg_agents, each_id_is_a_configured_mcp_agent)
{
    refused(doc("{\"unix\": \"/tmp/b.sock\", \"agent\": \"fs\"},"
                "{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\", \"x\"]}",
                "", ""),
            "router.listen[1].agents[2]: no agent \"x\" in agents[] (expected one of the "
            "configured agent ids: fs, search, git)");
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"osa\"]}", "", ""),
            "router.listen[0].agents[1]: agent \"osa\" speaks opensentience (serve it on a "
            "listener with \"dialect\": \"opensentience\"");
    /* the single agent's message keeps its path */
    refused(doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"nope\"}", "", ""),
            "router.listen[0].agent: no agent \"nope\" in agents[]");
}

/* ---- agent ids and tool_prefix ---- */

Test(cfg_agents, ids_never_hold_the_separator)
{
    refused("{\"agents\": [{\"id\": \"ok\", \"command\": [\"/bin/a\"]},"
            " {\"id\": \"my__fs\", \"command\": [\"/bin/b\"]}]}",
            "agents[1].id: \"my__fs\" holds \"__\", the separator of exposed tool names "
            "(expected an id without it: write one '_' or '-' there)");
    /* one '_' is fine, and so is one at the end of an agent no list names */
    cr_assert_eq(load("{\"agents\": [{\"id\": \"my_fs_\", \"command\": [\"/bin/a\"]}]}"), 0, "%s",
                 err.msg);
}

Test(cfg_agents, tool_prefix_accepted_and_empty)
{
    cr_assert_eq(load(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"search\", \"git\"]}",
                          ", \"tool_prefix\": \"\"", "")),
                 0, "%s", err.msg);
    cr_assert_null(cfg.agents[0].tool_prefix, "unset: the id is the prefix");
    cr_assert_str_eq(cfg.agents[1].tool_prefix, "s");
    cr_assert_not_null(cfg.agents[2].tool_prefix);
    cr_assert_str_eq(cfg.agents[2].tool_prefix, "", "\"\": no prefix");

    /* a file loads over a copy of the config: the copy keeps them */
    cr_assert_eq(tg_config_load_buffer(&cfg, "u.json", "{\"router\": {\"instance\": \"x\"}}", 29,
                                       &err),
                 0, "%s", err.msg);
    cr_assert_str_eq(cfg.agents[1].tool_prefix, "s");
    cr_assert_str_eq(cfg.agents[2].tool_prefix, "");
    cr_assert_eq(cfg.listen[0].nagents, 3);
    cr_assert_str_eq(cfg.listen[0].agents[2], "git");
}

Test(cfg_agents, a_bad_tool_prefix_is_refused)
{
    static const struct {
        const char *prefix, *why;
    } bad[] = {
        {"a__b", "holds \"__\" at offset 1"},
        {"fs_", "ends in '_'"},
        {"f s", "holds byte 0x20 at offset 1"},
        {"f:s", "holds byte 0x3a at offset 1"},
        {"pppppppppppppppppppppppppppppppppp", "is 34 bytes, over 32"},
    };
    char extra[128], want[256];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(extra, sizeof extra, ", \"tool_prefix\": \"%s\"", bad[i].prefix);
        snprintf(want, sizeof want, "agents[2].tool_prefix: \"%s\" is not a tool prefix: it %s",
                 bad[i].prefix, bad[i].why);
        refused(doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", extra, ""), want);
    }
}

Test(cfg_agents, an_id_unfit_as_a_prefix_needs_tool_prefix)
{
    static const char agents[] =
        "{\"router\": {\"listen\": [{\"unix\": \"/tmp/a.sock\", \"agents\": [\"ok\", \"fs_\"]}]},"
        " \"agents\": [{\"id\": \"ok\", \"command\": [\"/bin/a\"]},"
        "  {\"id\": \"fs_\", \"command\": [\"/bin/b\"]%s}]}";
    char json[512];

    snprintf(json, sizeof json, agents, "");
    refused(json, "router.listen[0].agents[1]: agent id \"fs_\" would prefix its tools and ends "
                  "in '_'");
    cr_expect_not_null(strstr(err.msg, "(set \"tool_prefix\" on agents[1])"), "%s", err.msg);
    snprintf(json, sizeof json, agents, ", \"tool_prefix\": \"fs\"");
    cr_assert_eq(load(json), 0, "a tool_prefix makes it fit: %s", err.msg);

    /* 33 bytes: a fine id, too long a prefix */
    static const char longid[] = "abcdefghijabcdefghijabcdefghijabc";
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"unix\": \"/tmp/a.sock\", \"agents\": [\"%s\"]}]},"
             " \"agents\": [{\"id\": \"%s\", \"command\": [\"/bin/a\"]}]}",
             longid, longid);
    refused(json, "router.listen[0].agents[0]: agent id \"abcdefghijabcdefghijabcdefghijabc\" "
                  "would prefix its tools and is 33 bytes, over 32");
    /* the same id behind "agent" keeps the server's names: no prefix, no refusal */
    snprintf(json, sizeof json,
             "{\"router\": {\"listen\": [{\"unix\": \"/tmp/a.sock\", \"agent\": \"%s\"}]},"
             " \"agents\": [{\"id\": \"%s\", \"command\": [\"/bin/a\"]}]}",
             longid, longid);
    cr_assert_eq(load(json), 0, "%s", err.msg);
}

Test(cfg_agents, prefix_check_is_expose_rule)
{
    char msg[128] = "untouched";

    cr_assert_eq(tg_cfg_prefix_check("", 0, msg, sizeof msg), 0);
    cr_assert_eq(tg_cfg_prefix_check("fs.a-b_c", 8, msg, sizeof msg), 0);
    cr_assert_str_eq(msg, "untouched");
    cr_assert_eq(tg_cfg_prefix_check("a__b", 4, msg, sizeof msg), -EINVAL);
    cr_assert_eq(tg_cfg_prefix_check("a_", 2, NULL, 0), -EINVAL, "no message buffer");
}

/* ---- policy ---- */

Test(cfg_agents, policy_kept_as_json)
{
    cr_assert_eq(load(doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "", "")), 0, "%s",
                 err.msg);
    cr_assert_null(cfg.policy, "absent: NULL");
    cr_assert_eq(load(doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\"]}", "",
                          ", \"policy\": {\"default\": \"deny\", \"rules\": ["
                          "{\"effect\": \"allow\", \"callers\": [\"ci\"], \"uids\": [0],"
                          " \"gids\": [10], \"tokens\": [\"t*\"],"
                          " \"claims\": {\"scope\": [\"read\", \"write\"]},"
                          " \"agents\": [\"fs\"], \"tools\": [\"read_*\"],"
                          " \"methods\": [\"tools/call\"]}]}")),
                 0, "%s", err.msg);
    json_t *p = (json_t *)cfg.policy;
    cr_assert_not_null(p);
    cr_assert(json_is_object(p));
    cr_assert_str_eq(json_string_value(json_object_get(p, "default")), "deny");
    json_t *r0 = json_array_get(json_object_get(p, "rules"), 0);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r0, "tools"), 0)),
                     "read_*");

    /* a failed load keeps it; a file loads over a copy, which holds it */
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", "{\"policy\": 1}", 13, &err), -1);
    cr_assert_not_null(strstr(err.msg, "policy: expected an object"), "%s", err.msg);
    cr_assert_eq(cfg.policy, p, "a refused load leaves the config as it was");
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", "{\"router\": {\"instance\": \"x\"}}", 29,
                                       &err),
                 0, "%s", err.msg);
    cr_assert_not_null(cfg.policy);
    cr_assert_str_eq(json_string_value(json_object_get(cfg.policy, "default")), "deny");
}

Test(cfg_agents, policy_refusals)
{
    refused("{\"policy\": [\"deny\"]}", "policy: expected an object");
    refused("{\"policy\": \"deny\"}", "policy: expected an object");
    refused("{\"policy\": {\"rules\": []}}", "policy: missing required key \"default\"");
    refused("{\"policy\": {\"default\": \"maybe\"}}", "policy.default: \"maybe\" is not an effect");
    refused("{\"policy\": {\"default\": \"deny\", \"rulez\": []}}",
            "policy: unknown key \"rulez\" (allowed: default, rules)");
    refused("{\"policy\": {\"default\": \"deny\", \"rules\": [{\"callers\": [\"a\"]}]}}",
            "policy.rules[0]: missing required key \"effect\"");
    refused("{\"policy\": {\"default\": \"deny\", \"rules\": [{\"effect\": \"allow\","
            " \"callers\": []}]}}",
            "policy.rules[0].callers: an empty list matches nothing");
    refused("{\"policy\": {\"default\": \"deny\", \"rules\": [{\"effect\": \"allow\","
            " \"uids\": [\"root\"]}]}}",
            "policy.rules[0].uids[0]: expected a numeric id");
    refused("{\"policy\": {\"default\": \"deny\", \"rules\": [{\"effect\": \"allow\","
            " \"claims\": {\"scope\": \"read\"}}]}}",
            "policy.rules[0].claims.scope: expected an array of strings");
    refused("{\"policy\": {\"default\": \"deny\", \"rules\": [{\"effect\": \"allow\","
            " \"tool\": [\"x\"]}]}}",
            "policy.rules[0]: unknown key \"tool\" (allowed: effect, callers, uids, gids, tokens, "
            "claims, agents, tools, methods)");
}

/* ---- what a reload's diff says ---- */

static tg_cfg_need_t diff_of(const char *a, const char *b, tg_cfg_change_t *all)
{
    tg_config_t x = {0}, y = {0};

    cr_assert_eq(load_into(&x, a), 0, "%s", err.msg);
    cr_assert_eq(load_into(&y, b), 0, "%s", err.msg);
    tg_cfg_need_t need = tg_cfg_diff(&x, &y, all, NULL, 0);
    tg_config_free(&x);
    tg_config_free(&y);
    return need;
}

Test(cfg_agents, diff_reports_policy_live)
{
    char a[DOC_MAX], b[DOC_MAX];
    tg_cfg_change_t all;

    snprintf(a, sizeof a, "%s", doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "", ""));
    snprintf(b, sizeof b, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "",
                 ", \"policy\": {\"default\": \"allow\"}"));
    cr_assert_eq(diff_of(a, b, &all), TG_NEED_LIVE, "added: %s", all.key);
    cr_assert_str_eq(all.key, "policy");
    cr_assert_eq(diff_of(b, a, &all), TG_NEED_LIVE, "removed");
    cr_assert_str_eq(all.key, "policy");
    snprintf(a, sizeof a, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "",
                 ", \"policy\": {\"rules\": [{\"effect\": \"deny\", \"tools\": [\"rm\"]}],"
                 " \"default\": \"allow\"}"));
    cr_assert_eq(diff_of(b, a, &all), TG_NEED_LIVE, "a rule added");
    cr_assert_str_eq(all.key, "policy");
    cr_assert_eq(diff_of(a, a, &all), TG_NEED_NONE, "the same policy: %s", all.key);
    /* the same object with its keys in another order is the same policy */
    snprintf(b, sizeof b, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "",
                 ", \"policy\": {\"default\": \"allow\", \"rules\": [{\"tools\": [\"rm\"],"
                 " \"effect\": \"deny\"}]}"));
    cr_assert_eq(diff_of(a, b, &all), TG_NEED_NONE, "%s", all.key);
}

Test(cfg_agents, diff_reports_agents_as_agent_is)
{
    char a[DOC_MAX], b[DOC_MAX];
    tg_cfg_change_t all;
    const tg_cfg_key_t *one = tg_cfg_key_find("router.listen[].agent");
    const tg_cfg_key_t *list = tg_cfg_key_find("router.listen[].agents");

    cr_assert_not_null(one);
    cr_assert_not_null(list);
    cr_assert_eq(list->reload, one->reload, "agents reloads as agent does");
    snprintf(a, sizeof a, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\"]}", "", ""));
    snprintf(b, sizeof b, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"git\", \"fs\"]}", "", ""));
    cr_assert_eq(diff_of(a, b, &all), (tg_cfg_need_t)(one->reload + 1), "reordered: %s", all.key);
    cr_assert_str_eq(all.key, "router.listen[0].agents");
    snprintf(b, sizeof b, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\", \"search\"]}", "",
                 ""));
    cr_assert_eq(diff_of(a, b, &all), (tg_cfg_need_t)(one->reload + 1), "one more");
    cr_assert_str_eq(all.key, "router.listen[0].agents");
    cr_assert_eq(diff_of(a, a, &all), TG_NEED_NONE, "%s", all.key);
    /* agent to agents: the single id goes first in document order */
    snprintf(b, sizeof b, "%s", doc("{\"unix\": \"/tmp/a.sock\", \"agent\": \"fs\"}", "", ""));
    cr_assert_eq(diff_of(b, a, &all), (tg_cfg_need_t)(one->reload + 1));
    cr_assert_str_eq(all.key, "router.listen[0].agent");
    /* tool_prefix renames what clients know: as the listener's list */
    snprintf(b, sizeof b, "%s",
             doc("{\"unix\": \"/tmp/a.sock\", \"agents\": [\"fs\", \"git\"]}",
                 ", \"tool_prefix\": \"g\"", ""));
    cr_assert_eq(diff_of(a, b, &all), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "agents[2].tool_prefix");
}
