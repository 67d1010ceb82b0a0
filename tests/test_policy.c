/* router/auth/policy: who may call what (issue 22). The pure core only:
 * the model, the decision (first match wins, an explicit default), the
 * JSON loader and its messages, wrap's --allow-tool / --deny-tool, and
 * what check reports. The matrix test is the "list and call agree
 * for every rule", for each kind of caller identity.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/auth/policy.h"

#define T TG_POLICY_M_TOOLS
#define P TG_POLICY_M_PROMPTS
#define R TG_POLICY_M_RESOURCES

/* ---- helpers ---- */

static tg_policy_t *load(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    tg_err_t err = {{0}};
    tg_policy_t *p = NULL;

    cr_assert_not_null(v, "bad test JSON %s: %s", text, je.text);
    int rc = tg_policy_from_json(&p, v, &err);
    json_decref(v);
    cr_assert_eq(rc, 0, "%s: %s", text, err.msg);
    cr_assert_not_null(p);
    return p;
}

/* The message loading <text> fails with (it must fail with -EINVAL). */
static const char *load_err(const char *text)
{
    static tg_err_t err;
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    tg_policy_t *p = (tg_policy_t *)1;

    cr_assert_not_null(v, "bad test JSON %s: %s", text, je.text);
    memset(&err, 0, sizeof err);
    int rc = tg_policy_from_json(&p, v, &err);
    json_decref(v);
    cr_assert_eq(rc, -EINVAL, "%s: rc %d (%s)", text, rc, err.msg);
    cr_assert_null(p, "%s: *out is set on failure", text);
    return err.msg;
}

#define ERR_HAS(text, want)                                                                        \
    do {                                                                                           \
        const char *m_ = load_err(text);                                                           \
        cr_assert(strstr(m_, want) != NULL, "%s:\n  got  %s\n  want %s", text, m_, want);          \
    } while (0)

static tg_policy_who_t named(const char *caller)
{
    return (tg_policy_who_t){caller, -1, -1, NULL, NULL, 0};
}

static const char *or_null(const char *s)
{
    return s ? s : "(null)";
}

static const char *who_name(const tg_policy_who_t *w)
{
    return w && w->caller ? w->caller : "?";
}

static tg_policy_decision_t dec(const tg_policy_t *p, const tg_policy_who_t *who, const char *agent,
                                const char *name, tg_policy_method_t m)
{
    return tg_policy_decide(p, who, agent, name, m);
}

#define DECIDES(p, who, agent, name, m, eff, idx, at)                                              \
    do {                                                                                           \
        tg_policy_decision_t d_ = dec(p, who, agent, name, m);                                     \
        cr_assert_eq(d_.effect, eff, "%s on %s: effect %d (by %s)", who_name(who), or_null(name),  \
                     d_.effect, d_.where);                                                         \
        cr_assert_eq(d_.rule, idx, "%s: rule %d, want %d", or_null(name), d_.rule, idx);           \
        cr_assert_str_eq(d_.where, at);                                                            \
        cr_assert_eq(tg_policy_listed(p, who, agent, name, m), eff == TG_POLICY_ALLOW);            \
    } while (0)

#define ALLOW TG_POLICY_ALLOW
#define DENY  TG_POLICY_DENY

/* ---- the decision ---- */

Test(policy, first_match_wins)
{
    tg_policy_t *p = load("{\"default\":\"allow\",\"rules\":["
                          "{\"effect\":\"allow\",\"callers\":[\"ci-bot\"],\"tools\":[\"read_*\"]},"
                          "{\"effect\":\"deny\",\"callers\":[\"ci-bot\"]},"
                          "{\"effect\":\"deny\",\"tools\":[\"rm*\"]}]}");
    tg_policy_who_t ci = named("ci-bot"), alice = named("alice");

    DECIDES(p, &ci, "fs", "read_file", T, ALLOW, 0, "policy.rules[0]");
    DECIDES(p, &ci, "fs", "write_file", T, DENY, 1, "policy.rules[1]");
    DECIDES(p, &ci, "fs", "rm_rf", T, DENY, 1, "policy.rules[1]");
    DECIDES(p, &alice, "fs", "rm_rf", T, DENY, 2, "policy.rules[2]");
    DECIDES(p, &alice, "fs", "write_file", T, ALLOW, -1, "policy.default");
    tg_policy_free(p);

    /* The same rules the other way round: the deny comes first and wins. */
    p = load("{\"default\":\"allow\",\"rules\":["
             "{\"effect\":\"deny\",\"callers\":[\"ci-bot\"]},"
             "{\"effect\":\"allow\",\"callers\":[\"ci-bot\"],\"tools\":[\"read_*\"]}]}");
    DECIDES(p, &ci, "fs", "read_file", T, DENY, 0, "policy.rules[0]");
    tg_policy_free(p);
}

Test(policy, explicit_default)
{
    ERR_HAS("{\"rules\":[]}", "policy: no \"default\" (expected \"allow\" or \"deny\": a policy "
                              "has no implicit default)");
    ERR_HAS("{}", "no implicit default");
    ERR_HAS("{\"default\":\"maybe\"}",
            "policy.default: \"maybe\" is not an effect (expected \"allow\" or \"deny\")");
    ERR_HAS("{\"default\":true}", "policy.default: expected \"allow\" or \"deny\", got a boolean");

    tg_policy_t *p = load("{\"default\":\"deny\"}");
    tg_policy_who_t a = named("alice");
    cr_assert_eq(p->nrules, 0);
    DECIDES(p, &a, "fs", "read_file", T, DENY, -1, "policy.default");
    DECIDES(p, NULL, "fs", "hello", P, DENY, -1, "policy.default");
    tg_policy_free(p);

    p = load("{\"rules\":[{\"effect\":\"deny\",\"tools\":[\"x\"]}],\"default\":\"allow\"}");
    DECIDES(p, &a, "fs", "y", T, ALLOW, -1, "policy.default");
    DECIDES(p, &a, "fs", "x", T, DENY, 0, "policy.rules[0]");
    tg_policy_free(p);
}

Test(policy, no_policy_allows)
{
    tg_policy_who_t a = named("alice");
    DECIDES(NULL, &a, "fs", "anything", T, ALLOW, -1, "no policy");
    DECIDES(NULL, NULL, NULL, NULL, R, ALLOW, -1, "no policy");
}

Test(policy, matcher_callers)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":["
                          "{\"effect\":\"allow\",\"callers\":[\"ci-*\",\"alice\"]},"
                          "{\"effect\":\"allow\",\"callers\":[\"*\"],\"tools\":[\"public_*\"]}]}");
    tg_policy_who_t ci = named("ci-7"), alice = named("alice"), bob = named("bob"),
                    anon = named(NULL);

    DECIDES(p, &ci, "fs", "x", T, ALLOW, 0, "policy.rules[0]");
    DECIDES(p, &alice, "fs", "x", T, ALLOW, 0, "policy.rules[0]");
    DECIDES(p, &bob, "fs", "x", T, DENY, -1, "policy.default");
    DECIDES(p, &bob, "fs", "public_x", T, ALLOW, 1, "policy.rules[1]");
    /* An anonymous caller is named by no callers entry, not even "*". */
    DECIDES(p, &anon, "fs", "public_x", T, DENY, -1, "policy.default");
    DECIDES(p, NULL, "fs", "public_x", T, DENY, -1, "policy.default");
    tg_policy_free(p);
}

Test(policy, matcher_uid_gid)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":["
                          "{\"effect\":\"allow\",\"uids\":[1000,1001]},"
                          "{\"effect\":\"allow\",\"gids\":[50],\"tools\":[\"read_*\"]},"
                          "{\"effect\":\"allow\",\"uids\":[0],\"gids\":[0]}]}");
    tg_policy_who_t w = named("x");

    w.uid = 1001;
    DECIDES(p, &w, "fs", "write", T, ALLOW, 0, "policy.rules[0]");
    w.uid = 7;
    w.gid = 50;
    DECIDES(p, &w, "fs", "read_a", T, ALLOW, 1, "policy.rules[1]");
    DECIDES(p, &w, "fs", "write", T, DENY, -1, "policy.default");
    /* Not a Unix peer: no uid or gid matcher matches. */
    w.uid = w.gid = -1;
    DECIDES(p, &w, "fs", "read_a", T, DENY, -1, "policy.default");
    /* uid 0 alone is not enough where the rule wants gid 0 too (AND). */
    w.uid = 0;
    w.gid = 5;
    DECIDES(p, &w, "fs", "read_a", T, DENY, -1, "policy.default");
    w.gid = 0;
    DECIDES(p, &w, "fs", "read_a", T, ALLOW, 2, "policy.rules[2]");
    tg_policy_free(p);
}

Test(policy, matcher_tokens)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":["
                          "{\"effect\":\"allow\",\"tokens\":[\"deploy-*\"]}]}");
    tg_policy_who_t w = named("ci");

    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    w.token = "deploy-2026";
    DECIDES(p, &w, "fs", "x", T, ALLOW, 0, "policy.rules[0]");
    w.token = "laptop";
    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    tg_policy_free(p);
}

Test(policy, matcher_claims)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":["
                          "{\"effect\":\"allow\",\"claims\":{\"groups\":[\"ops\",\"sre\"],"
                          "\"tenant\":[\"acme\"]}}]}");
    /* "groups" is an array claim: one pair per element. */
    tg_policy_kv_t both[] = {
        {"sub", "ann"}, {"groups", "dev"}, {"groups", "sre"}, {"tenant", "acme"}};
    tg_policy_kv_t no_tenant[] = {{"groups", "ops"}};
    tg_policy_kv_t other[] = {{"groups", "ops"}, {"tenant", "acme-2"}};
    tg_policy_kv_t as_value[] = {{"groups", "acme"}, {"tenant", "ops"}};
    tg_policy_who_t w = named("ann");

    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default"); /* no JWT */
    w.claims = both;
    w.nclaims = 4;
    DECIDES(p, &w, "fs", "x", T, ALLOW, 0, "policy.rules[0]");
    w.claims = no_tenant;
    w.nclaims = 1;
    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    w.claims = other;
    w.nclaims = 2;
    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    /* A value only counts under its own claim's name. */
    w.claims = as_value;
    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    tg_policy_free(p);
}

Test(policy, matcher_scope)
{
    tg_policy_t *p =
        load("{\"default\":\"deny\",\"rules\":["
             "{\"effect\":\"allow\",\"claims\":{\"scope\":[\"tools:write\",\"admin\"]}},"
             "{\"effect\":\"allow\",\"claims\":{\"scp\":[\"tools:write\"]}}]}");
    static const struct {
        const char *scope;
        bool allowed;
    } cases[] = {
        {"openid tools:read tools:write", true}, /* one of the listed is enough */
        {"admin", true},
        {"  admin  ", true},
        {"openid tools:writer", false}, /* whole words only */
        {"tools", false},
        {"tools:write:all", false},
        {"", false},
        {"openid tools:read", false},
    };
    tg_policy_who_t w = named("ann");

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_policy_kv_t kv = {"scope", cases[i].scope};
        w.claims = &kv;
        w.nclaims = 1;
        cr_assert_eq(tg_policy_listed(p, &w, "fs", "x", T), cases[i].allowed, "scope \"%s\"",
                     cases[i].scope);
    }
    /* Only "scope" is split: another claim is compared whole. */
    tg_policy_kv_t scp = {"scp", "tools:write admin"};
    w.claims = &scp;
    DECIDES(p, &w, "fs", "x", T, DENY, -1, "policy.default");
    scp.value = "tools:write";
    DECIDES(p, &w, "fs", "x", T, ALLOW, 1, "policy.rules[1]");
    tg_policy_free(p);
}

Test(policy, tool_globs)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\",\"tools\":["
                          "\"read_*\",\"?s\",\"[ab]x\",\"file/*\",\"\\\\*lit\",\"[!z]z\"]}]}");
    static const struct {
        const char *name;
        bool allowed;
    } cases[] = {
        {"read_file", true},  {"read_", true}, {"xread_file", false}, {"ls", true},
        {"lls", false},       {"ax", true},    {"bx", true},          {"cx", false},
        {"file/a/b", true}, /* no FNM_PATHNAME: '*' crosses '/' */
        {"*lit", true},       {"xlit", false}, {"az", true},          {"zz", false},
        {"Read_file", false}, /* case matters */
    };
    tg_policy_who_t w = named("a");

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(tg_policy_listed(p, &w, "fs", cases[i].name, T), cases[i].allowed, "%s",
                     cases[i].name);
    /* No name: a rule with a tools matcher does not match. */
    DECIDES(p, &w, "fs", NULL, T, DENY, -1, "policy.default");
    tg_policy_free(p);

    /* Bracket expressions fnmatch(3) reads are loaded as such. */
    p = load("{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\",\"tools\":["
             "\"[]a]x\",\"[[:digit:]]*\",\"[[]q\"]}]}");
    cr_assert(tg_policy_listed(p, &w, "fs", "]x", T));
    cr_assert(tg_policy_listed(p, &w, "fs", "7up", T));
    cr_assert(tg_policy_listed(p, &w, "fs", "[q", T));
    cr_assert_not(tg_policy_listed(p, &w, "fs", "bx", T));
    tg_policy_free(p);
}

Test(policy, matcher_agents)
{
    tg_policy_t *p =
        load("{\"default\":\"deny\",\"rules\":["
             "{\"effect\":\"allow\",\"agents\":[\"fs\",\"git-*\"],\"tools\":[\"read*\"]}]}");
    tg_policy_who_t w = named("a");

    DECIDES(p, &w, "fs", "read", T, ALLOW, 0, "policy.rules[0]");
    DECIDES(p, &w, "git-main", "read", T, ALLOW, 0, "policy.rules[0]");
    DECIDES(p, &w, "search", "read", T, DENY, -1, "policy.default");
    DECIDES(p, &w, NULL, "read", T, DENY, -1, "policy.default");
    tg_policy_free(p);
}

Test(policy, methods)
{
    tg_policy_t *p = load("{\"default\":\"allow\",\"rules\":["
                          "{\"effect\":\"deny\",\"methods\":[\"prompts/get\"],\"tools\":[\"x*\"]},"
                          "{\"effect\":\"deny\",\"methods\":[\"resources/read\",\"tools/call\"],"
                          "\"tools\":[\"file:///etc/*\",\"etc_*\"]}]}");
    tg_policy_who_t w = named("a");

    DECIDES(p, &w, "fs", "xray", T, ALLOW, -1, "policy.default");
    DECIDES(p, &w, "fs", "xray", P, DENY, 0, "policy.rules[0]");
    DECIDES(p, &w, "fs", "file:///etc/passwd", R, DENY, 1, "policy.rules[1]");
    DECIDES(p, &w, "fs", "etc_read", T, DENY, 1, "policy.rules[1]");
    DECIDES(p, &w, "fs", "etc_read", P, ALLOW, -1, "policy.default");
    tg_policy_free(p);

    /* The families of the methods the engines receive. */
    static const struct {
        const char *m;
        int fam;
    } fams[] = {
        {"tools/call", T},
        {"tools/list", T},
        {"prompts/get", P},
        {"prompts/list", P},
        {"resources/read", R},
        {"resources/list", R},
        {"resources/templates/list", R},
        {"resources/subscribe", R},
        {"initialize", -1},
        {"ping", -1},
        {"tools/callx", -1},
        {"notifications/cancelled", -1},
        {"tools", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        cr_assert_eq(tg_policy_method(fams[i].m, strlen(fams[i].m)), fams[i].fam, "%s", fams[i].m);
    cr_assert_eq(tg_policy_method("tools/callx", 10), T, "a span, not a C string");

    /* A list method is refused: its call method decides it. */
    ERR_HAS(
        "{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"methods\":[\"tools/list\"]}]}",
        "policy.rules[0].methods[0]: \"tools/list\" is decided by \"tools/call\"");
    ERR_HAS("{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"methods\":[\"tools/call\","
            "\"resources/templates/list\"]}]}",
            "policy.rules[0].methods[1]: \"resources/templates/list\" is decided by "
            "\"resources/read\"");
    ERR_HAS(
        "{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"methods\":[\"initialize\"]}]}",
        "policy.rules[0].methods[0]: \"initialize\" is not a method a policy decides "
        "(expected \"tools/call\", \"prompts/get\" or \"resources/read\")");
}

/* ---- list and call agree, for every rule and every kind of identity ---- */

#define NWHO   11
#define NAGENT 2
#define NNAME  6

Test(policy, list_call_matrix)
{
    tg_policy_t *p = load(
        "{\"default\":\"deny\",\"rules\":["
        "{\"effect\":\"deny\",\"callers\":[\"mallory\"]},"                                /* 0 */
        "{\"effect\":\"allow\",\"uids\":[1000],\"tools\":[\"read_*\"]},"                  /* 1 */
        "{\"effect\":\"allow\",\"gids\":[200],\"tools\":[\"list_*\"]},"                   /* 2 */
        "{\"effect\":\"allow\",\"tokens\":[\"ci-*\"],\"tools\":[\"read_*\",\"list_*\"]}," /* 3 */
        "{\"effect\":\"deny\",\"tools\":[\"*_secret\"]},"                                 /* 4 */
        "{\"effect\":\"allow\",\"claims\":{\"team\":[\"ops\"]},\"agents\":[\"fs\"]},"     /* 5 */
        "{\"effect\":\"allow\",\"claims\":{\"scope\":[\"git:write\"]},\"agents\":[\"git\"]}," /* 6
                                                                                               */
        "{\"effect\":\"deny\",\"callers\":[\"alice\"],\"methods\":[\"prompts/get\"]},"   /* 7 */
        "{\"effect\":\"allow\",\"callers\":[\"alice\"]},"                                /* 8 */
        "{\"effect\":\"allow\",\"methods\":[\"resources/read\"],\"tools\":[\"file:*\"]}" /* 9 */
        "]}");
    static const tg_policy_kv_t team_ops[] = {{"sub", "ops-bot"}, {"team", "ops"}};
    static const tg_policy_kv_t scope_git[] = {{"scope", "openid git:write"}};
    static const tg_policy_kv_t scope_none[] = {{"scope", "openid git:read"}};
    const tg_policy_who_t who[NWHO] = {
        {"mallory", 1000, 200, "ci-1", team_ops, 2}, /* named, deny first whatever else */
        {NULL, 1000, 5, NULL, NULL, 0},              /* a Unix peer by uid */
        {NULL, 7, 200, NULL, NULL, 0},               /* a Unix peer by gid */
        {"ci", -1, -1, "ci-42", NULL, 0},            /* a bearer token */
        {"ops-bot", -1, -1, NULL, team_ops, 2},      /* a JWT claim */
        {"gitter", -1, -1, NULL, scope_git, 1},      /* a JWT scope */
        {"gitter", -1, -1, NULL, scope_none, 1},     /* the wrong scope */
        {"alice", -1, -1, NULL, NULL, 0},            /* by name */
        {"bob", -1, -1, NULL, NULL, 0},              /* named, no rule */
        {NULL, -1, -1, NULL, NULL, 0},               /* anonymous */
        {NULL, 0, 0, NULL, NULL, 0},                 /* root, no rule */
    };
    const char *agents[NAGENT] = {"fs", "git"};
    const char *names[NNAME] = {"read_file",  "list_dir",  "write_file",
                                "key_secret", "file:///a", "hello"};
    bool decided[TG_POLICY_RULES_MAX + 1] = {false}; /* [nrules]: the default */

    for (size_t w = 0; w < NWHO; w++)
        for (size_t a = 0; a < NAGENT; a++)
            for (int m = 0; m < TG_POLICY_M_COUNT; m++) {
                /* The list a caller would get: the names it shows. */
                bool listed[NNAME];
                for (size_t n = 0; n < NNAME; n++)
                    listed[n] = tg_policy_listed(p, &who[w], agents[a], names[n], m);
                for (size_t n = 0; n < NNAME; n++) {
                    tg_policy_decision_t d = dec(p, &who[w], agents[a], names[n], m);
                    cr_assert_eq(d.effect == ALLOW, listed[n],
                                 "who[%zu] %s %s family %d: listed %d but the call gets %d by %s",
                                 w, agents[a], names[n], m, listed[n], d.effect, d.where);
                    decided[d.rule < 0 ? p->nrules : (size_t)d.rule] = true;
                }
            }
    for (size_t r = 0; r <= p->nrules; r++)
        cr_assert(decided[r], "%s never decided in the matrix",
                  r < p->nrules ? p->rules[r].where : "the default");

    /* A few cells by hand. */
    DECIDES(p, &who[0], "fs", "read_file", T, DENY, 0, "policy.rules[0]");
    DECIDES(p, &who[1], "fs", "read_file", T, ALLOW, 1, "policy.rules[1]");
    DECIDES(p, &who[1], "fs", "list_dir", T, DENY, -1, "policy.default");
    DECIDES(p, &who[2], "git", "list_dir", T, ALLOW, 2, "policy.rules[2]");
    DECIDES(p, &who[3], "git", "list_dir", P, ALLOW, 3, "policy.rules[3]");
    DECIDES(p, &who[4], "fs", "key_secret", T, DENY, 4, "policy.rules[4]");
    DECIDES(p, &who[4], "fs", "write_file", T, ALLOW, 5, "policy.rules[5]");
    DECIDES(p, &who[4], "git", "write_file", T, DENY, -1, "policy.default");
    DECIDES(p, &who[5], "git", "write_file", T, ALLOW, 6, "policy.rules[6]");
    DECIDES(p, &who[6], "git", "write_file", T, DENY, -1, "policy.default");
    DECIDES(p, &who[7], "fs", "hello", P, DENY, 7, "policy.rules[7]");
    DECIDES(p, &who[7], "fs", "hello", T, ALLOW, 8, "policy.rules[8]");
    DECIDES(p, &who[9], "fs", "file:///a", R, ALLOW, 9, "policy.rules[9]");
    DECIDES(p, &who[9], "fs", "file:///a", T, DENY, -1, "policy.default");
    tg_policy_free(p);
}

Test(policy, decision_allocates_nothing)
{
    tg_policy_t *p = load("{\"default\":\"deny\",\"rules\":["
                          "{\"effect\":\"allow\",\"claims\":{\"scope\":[\"a\",\"b\"]},"
                          "\"agents\":[\"f*\"],\"tools\":[\"[[:alpha:]]*_x\",\"read_*\"]}]}");
    tg_policy_kv_t kv = {"scope", "x y b"};
    tg_policy_who_t w = {"ann", 1, 2, "t", &kv, 1};
    size_t allowed = 0;

    tg_policy_decide(p, &w, "fs", "read_a", T); /* anything lazily set up, once */
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < 10000; i++)
        allowed += tg_policy_listed(p, &w, "fs", i % 2 ? "read_a" : "zz_y", T);
    struct mallinfo2 after = mallinfo2();
    cr_assert_eq(allowed, 5000);
    cr_assert_eq(before.uordblks, after.uordblks, "a decision allocated");
    tg_policy_free(p);
}

/* ---- the loader's messages ---- */

#define RULE(body) "{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\"," body "}]}"

Test(policy, json_errors)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[]", "policy: expected an object {\"default\": \"allow\" or \"deny\", \"rules\": [...]}, "
               "got an array"},
        {"{\"default\":\"deny\",\"rule\":[]}",
         "policy: unknown key \"rule\" (known: default, rules)"},
        {"{\"default\":\"deny\",\"rules\":{}}",
         "policy.rules: expected an array of rules, got an object"},
        {"{\"default\":\"deny\",\"rules\":[1]}", "policy.rules[0]: expected an object"},
        {"{\"default\":\"deny\",\"rules\":[{\"callers\":[\"a\"]}]}",
         "policy.rules[0]: no \"effect\" (expected \"allow\" or \"deny\")"},
        {"{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\"},{\"effect\":\"allow\",\"tool\":["
         "\"x\"]}]}",
         "policy.rules[1]: unknown key \"tool\" (known: effect, callers, uids, gids, tokens, "
         "claims, agents, tools, methods)"},
        {"{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\"},{\"effect\":\"allow\"},"
         "{\"effect\":\"permit\"}]}",
         "policy.rules[2].effect: \"permit\" is not an effect (expected \"allow\" or \"deny\")"},
        {RULE("\"tools\":[]"), "policy.rules[0].tools: an empty list matches nothing (leave the "
                               "key out to match any)"},
        {RULE("\"tools\":\"read_*\""), "policy.rules[0].tools: expected an array of globs, got a "
                                       "string"},
        {RULE("\"tools\":[\"ok\",3]"), "policy.rules[0].tools[1]: expected a string, got a number"},
        {RULE("\"tools\":[\"a[b\"]"), "policy.rules[0].tools[0]: \"a[b\" has a [ without its ]"},
        {RULE("\"tools\":[\"[[:alpha]x\"]"), "policy.rules[0].tools[0]: \"[[:alpha]x\" has a [ "
                                             "without its ]"},
        {RULE("\"tools\":[\"a\\\\\"]"), "policy.rules[0].tools[0]: \"a\\\" ends in a lone \\"},
        {RULE("\"callers\":[\"\"]"), "policy.rules[0].callers[0]: \"\" is empty"},
        {RULE("\"agents\":[\"a\\u0001b\"]"),
         "policy.rules[0].agents[0]: \"a?b\" holds a control byte"},
        {RULE("\"tokens\":[\"a\\u0000b\"]"), "policy.rules[0].tokens[0]: \"a\" holds a NUL byte"},
        {RULE("\"uids\":[\"root\"]"), "policy.rules[0].uids[0]: expected a numeric uid 0 to "
                                      "2147483647 (names are not looked up), got a string"},
        {RULE("\"gids\":[1,-1]"), "policy.rules[0].gids[1]: expected a numeric gid 0 to "
                                  "2147483647 (names are not looked up), got one out of range"},
        {RULE("\"uids\":[2147483648]"), "policy.rules[0].uids[0]: expected a numeric uid"},
        {RULE("\"uids\":[1.5]"), "got a number"},
        {RULE("\"claims\":[]"), "policy.rules[0].claims: expected an object {\"claim\": "
                                "[values]}, got an array"},
        {RULE("\"claims\":{}"), "policy.rules[0].claims: 0 claims (expected 1 to 16"},
        {RULE("\"claims\":{\"scope\":[\"a\",\"b c\"]}"),
         "policy.rules[0].claims.scope[1]: \"b c\" holds a space (expected one scope per entry)"},
        {RULE("\"claims\":{\"team\":\"ops\"}"),
         "policy.rules[0].claims.team: expected an array of strings, got a string"},
        {RULE("\"claims\":{\"team\":[]}"), "policy.rules[0].claims.team: an empty list"},
        {RULE("\"claims\":{\"\":[\"x\"]}"), "policy.rules[0].claims: claim name \"\" is empty"},
        {RULE("\"methods\":[]"), "policy.rules[0].methods: an empty list matches nothing"},
        {RULE("\"methods\":[1]"), "policy.rules[0].methods[0]: expected a string, got a number"},
        {"{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\",\"tools\":[\"a\"]},"
         "{\"effect\":\"deny\",\"agents\":[\"ok\",\"bad[\"]}]}",
         "policy.rules[1].agents[1]: \"bad[\" has a [ without its ]"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ERR_HAS(cases[i].text, cases[i].want);
    /* The first error in document order. */
    ERR_HAS("{\"default\":\"deny\",\"rules\":[{\"effect\":\"allow\",\"tools\":[],\"agents\":[]}]}",
            "policy.rules[0].tools:");
    /* The NULL policy is refused like any non-object. */
    tg_err_t err = {{0}};
    tg_policy_t *p;
    cr_assert_eq(tg_policy_from_json(&p, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, "policy: expected an object") != NULL, "%s", err.msg);
}

Test(policy, json_model)
{
    tg_policy_t *p =
        load("{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\","
             "\"callers\":[\"a\",\"b\"],\"uids\":[1],\"gids\":[2,3],\"tokens\":[\"t\"],"
             "\"claims\":{\"scope\":[\"s\"],\"team\":[\"x\",\"y\"]},"
             "\"agents\":[\"fs\"],\"tools\":[\"r*\"],"
             "\"methods\":[\"tools/call\",\"resources/read\"]},"
             "{\"effect\":\"allow\"}]}");
    const tg_policy_rule_t *r = &p->rules[0];

    cr_assert_eq(p->nrules, 2);
    cr_assert_eq(p->def, ALLOW);
    cr_assert_str_eq(p->def_where, "policy.default");
    cr_assert_eq(r->effect, DENY);
    cr_assert_str_eq(r->where, "policy.rules[0]");
    cr_assert_not(r->from_flag);
    cr_assert_eq(r->callers.n, 2);
    cr_assert_eq(r->uids.n, 1);
    cr_assert_eq(r->gids.v[1], 3);
    cr_assert_eq(r->nclaims, 2);
    cr_assert(r->claims[0].scope);
    cr_assert_str_eq(r->claims[1].name, "team");
    cr_assert_not(r->claims[1].scope);
    cr_assert_eq(r->claims[1].values.n, 2);
    cr_assert_eq(r->methods, (1u << T) | (1u << R));
    cr_assert_eq(p->rules[1].methods, 0);
    cr_assert_eq(p->rules[1].tools.n, 0);
    cr_assert_str_eq(p->rules[1].where, "policy.rules[1]");
    tg_policy_free(p);
}

/* ---- wrap's flags ---- */

static tg_policy_t *flags(const char *const *allow, size_t na, const char *const *deny, size_t nd)
{
    tg_err_t err = {{0}};
    tg_policy_t *p = (tg_policy_t *)1;
    cr_assert_eq(tg_policy_from_flags(&p, allow, na, deny, nd, &err), 0, "%s", err.msg);
    return p;
}

Test(policy, wrap_flags)
{
    static const char *const deny[] = {"rm*", "*_secret"};
    static const char *const allow[] = {"read_*", "list_*"};
    static const char *const all[] = {"*"};
    tg_policy_who_t w = named(NULL);

    /* No flag: no policy, everything allowed. */
    tg_policy_t *p = flags(NULL, 0, NULL, 0);
    cr_assert_null(p);
    DECIDES(p, &w, "srv", "rm_rf", T, ALLOW, -1, "no policy");

    /* Only deny globs: everything but these. */
    p = flags(NULL, 0, deny, 2);
    DECIDES(p, &w, "srv", "rm_rf", T, DENY, 0, "--deny-tool rm*");
    DECIDES(p, &w, "srv", "api_secret", T, DENY, 1, "--deny-tool *_secret");
    DECIDES(p, &w, "srv", "read_file", T, ALLOW, -1, "wrap's tool flags (default allow)");
    DECIDES(p, &w, "srv", "rm_prompt", P, ALLOW, -1, "wrap's tool flags (default allow)");
    cr_assert(p->rules[0].from_flag);
    tg_policy_free(p);

    /* Any allow glob: only these tools; prompts and resources untouched. */
    p = flags(allow, 2, NULL, 0);
    cr_assert_eq(p->nrules, 3);
    DECIDES(p, &w, "srv", "read_file", T, ALLOW, 0, "--allow-tool read_*");
    DECIDES(p, &w, "srv", "list_dir", T, ALLOW, 1, "--allow-tool list_*");
    DECIDES(p, &w, "srv", "write_file", T, DENY, 2, "--allow-tool (no glob matched)");
    DECIDES(p, &w, "srv", "write_prompt", P, ALLOW, -1, "wrap's tool flags (default allow)");
    DECIDES(p, &w, "srv", "file:///x", R, ALLOW, -1, "wrap's tool flags (default allow)");
    tg_policy_free(p);

    /* Both: deny first, whatever the order on the command line. */
    p = flags(all, 1, deny, 2);
    DECIDES(p, &w, "srv", "rm_rf", T, DENY, 0, "--deny-tool rm*");
    DECIDES(p, &w, "srv", "write_file", T, ALLOW, 2, "--allow-tool *");
    tg_policy_free(p);

    /* List and call agree here too. */
    p = flags(allow, 2, deny, 2);
    const char *names[] = {"read_file", "read_secret", "rm", "list_x", "other"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(tg_policy_listed(p, &w, "srv", names[i], T),
                     dec(p, &w, "srv", names[i], T).effect == ALLOW);
    cr_assert_not(tg_policy_listed(p, &w, "srv", "read_secret", T));
    tg_policy_free(p);
}

Test(policy, wrap_flag_errors)
{
    static const char *const bad[] = {"ok", "a["};
    static const char *const empty[] = {""};
    tg_err_t err = {{0}};
    tg_policy_t *p = (tg_policy_t *)1;

    cr_assert_eq(tg_policy_from_flags(&p, bad, 2, NULL, 0, &err), -EINVAL);
    cr_assert_null(p);
    cr_assert_str_eq(err.msg,
                     "--allow-tool \"a[\": has a [ without its ] (write [[] for a literal [)");
    cr_assert_eq(tg_policy_from_flags(&p, NULL, 0, empty, 1, &err), -EINVAL);
    cr_assert_str_eq(err.msg, "--deny-tool \"\": is empty");

    const char *many[TG_POLICY_RULES_MAX];
    for (size_t i = 0; i < TG_POLICY_RULES_MAX; i++)
        many[i] = "x*";
    cr_assert_eq(tg_policy_from_flags(&p, many, 128, many, 128, &err), -EINVAL);
    cr_assert_str_eq(err.msg, "256 --allow-tool and --deny-tool globs (expected at most 255)");
    cr_assert_eq(tg_policy_from_flags(&p, many, 128, many, 127, &err), 0, "%s", err.msg);
    cr_assert_eq(p->nrules, TG_POLICY_RULES_MAX);
    tg_policy_free(p);
    cr_assert_eq(tg_policy_from_flags(&p, NULL, 0, many, 255, &err), 0, "%s", err.msg);
    tg_policy_free(p);
}

/* ---- check ---- */

#define NOTES_MAX 32

typedef struct notes {
    char v[NOTES_MAX][640];
    size_t n;
} notes_t;

static void collect(void *arg, tg_policy_sev_t sev, const char *where, const char *msg)
{
    notes_t *ns = arg;
    cr_assert_lt(ns->n, NOTES_MAX);
    snprintf(ns->v[ns->n++], sizeof ns->v[0], "%s %s: %s", sev == TG_POLICY_ERROR ? "E" : "W",
             where, msg);
}

static bool has_note(const notes_t *ns, const char *want)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strstr(ns->v[i], want))
            return true;
    return false;
}

static void dump(const notes_t *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        fprintf(stderr, "  %s\n", ns->v[i]);
}

#define NOTE_HAS(ns, want)                                                                         \
    do {                                                                                           \
        if (!has_note(ns, want))                                                                   \
            dump(ns);                                                                              \
        cr_assert(has_note(ns, want), "no finding %s", want);                                      \
    } while (0)

static const char *const fs_tools[] = {"read_file", "write_file", "list_dir"};
static const char *const callers[] = {"alice", "ci-bot"};

static tg_policy_known_t known(tg_policy_agent_known_t ag[2])
{
    memset(ag, 0, 2 * sizeof *ag);
    ag[0].id = "fs";
    ag[0].names[T] = fs_tools;
    ag[0].nnames[T] = 3;
    ag[1].id = "git"; /* nothing of it known */
    return (tg_policy_known_t){callers, 2, ag, 2};
}

Test(policy, check_findings)
{
    tg_policy_t *p =
        load("{\"default\":\"deny\",\"rules\":["
             "{\"effect\":\"allow\",\"callers\":[\"ci-*\",\"bob\"],\"tools\":[\"read_*\"]}," /* 0 */
             "{\"effect\":\"allow\",\"callers\":[\"carol\",\"dave\"]},"                      /* 1 */
             "{\"effect\":\"deny\",\"agents\":[\"fz\",\"fs\",\"g?t\",\"nope*\"]},"           /* 2 */
             "{\"effect\":\"allow\",\"agents\":[\"fs\"],\"tools\":[\"fs__read_*\"],"
             "\"methods\":[\"tools/call\"]}," /* 3 */
             "{\"effect\":\"allow\",\"agents\":[\"git\"],\"tools\":[\"nothing\"],"
             "\"methods\":[\"tools/call\"]}," /* 4 */
             "{\"effect\":\"allow\",\"agents\":[\"fs\"],\"tools\":[\"read_*\",\"zap\"],"
             "\"methods\":[\"tools/call\"]},"                                                /* 5 */
             "{\"effect\":\"allow\",\"agents\":[\"fs\"],\"tools\":[\"nothing\"]},"           /* 6 */
             "{\"effect\":\"deny\",\"methods\":[\"prompts/get\"]},"                          /* 7 */
             "{\"effect\":\"allow\",\"callers\":[\"alice\"],\"methods\":[\"prompts/get\"]}," /* 8 */
             "{\"effect\":\"allow\",\"callers\":[\"alice\"],\"uids\":[5],\"tokens\":[\"x\"],"
             "\"claims\":{\"scope\":[\"q\"]}},"               /* 9 */
             "{\"effect\":\"deny\"},"                         /* 10 */
             "{\"effect\":\"allow\",\"callers\":[\"alice\"]}" /* 11 */
             "]}");
    tg_policy_agent_known_t ag[2];
    tg_policy_known_t k = known(ag);
    notes_t ns = {.n = 0};

    int errors = tg_policy_check(p, &k, collect, &ns);
    NOTE_HAS(&ns, "W policy.rules[0].callers[1]: \"bob\" names no caller (callers[]: alice, "
                  "ci-bot); the rule's other callers still match");
    NOTE_HAS(&ns, "W policy.rules[1]: matches nothing: its callers name no caller (callers[]: "
                  "alice, ci-bot)");
    NOTE_HAS(&ns, "E policy.rules[2].agents[0]: \"fz\" matches no agent (agents: fs, git)");
    NOTE_HAS(&ns, "E policy.rules[2].agents[3]: \"nope*\" matches no agent");
    NOTE_HAS(&ns, "W policy.rules[3]: matches nothing: its tools (\"fs__read_*\") match no known "
                  "name of the agents it applies to; tool globs match an agent's own names: "
                  "write \"agents\": [\"fs\"], \"tools\": [\"read_*\"]");
    NOTE_HAS(&ns, "W policy.rules[5].tools[1]: \"zap\" matches no known name of the agents the "
                  "rule applies to; the rule's other tools still match");
    NOTE_HAS(&ns, "W policy.rules[8]: never decides: policy.rules[7] has no matcher but methods "
                  "and takes its requests first");
    NOTE_HAS(&ns, "W policy.rules[11]: never decides: policy.rules[10] has no matcher and takes "
                  "its requests first");
    cr_assert_eq(errors, 2);
    /* Nothing else: git's tools and fs's prompts are not known, rule 9's
     * uids, tokens and claims are not judged. */
    if (ns.n != 8)
        dump(&ns);
    cr_assert_eq(ns.n, 8);
    tg_policy_free(p);
}

Test(policy, check_clean_and_flags)
{
    tg_policy_agent_known_t ag[2];
    tg_policy_known_t k = known(ag);
    notes_t ns = {.n = 0};
    tg_policy_t *p =
        load("{\"default\":\"deny\",\"rules\":["
             "{\"effect\":\"allow\",\"callers\":[\"ci-bot\"],\"agents\":[\"fs\"],"
             "\"tools\":[\"read_*\",\"list_*\"],\"methods\":[\"tools/call\"]},"
             "{\"effect\":\"allow\",\"claims\":{\"scope\":[\"git\"]},\"agents\":[\"g*\"]},"
             "{\"effect\":\"deny\",\"methods\":[\"prompts/get\"]},"
             "{\"effect\":\"allow\",\"callers\":[\"alice\"],\"methods\":[\"tools/call\"]}]}");

    cr_assert_eq(tg_policy_check(p, &k, collect, &ns), 0);
    if (ns.n)
        dump(&ns);
    cr_assert_eq(ns.n, 0);
    tg_policy_free(p);
    cr_assert_eq(tg_policy_check(NULL, &k, collect, &ns), 0);

    /* A flag's rule is named by the flag and its glob. */
    static const char *const allow[] = {"reed_*", "read_*"};
    static const char *const allow1[] = {"reed_*"};
    p = flags(allow, 2, NULL, 0);
    cr_assert_eq(tg_policy_check(p, &k, collect, &ns), 0);
    tg_policy_free(p);
    p = flags(allow1, 1, NULL, 0);
    cr_assert_eq(tg_policy_check(p, &k, collect, &ns), 0);
    tg_policy_free(p);
    /* git's tools are unknown: only with fs alone is anything dead. */
    cr_assert_eq(ns.n, 0);
    k.nagents = 1;
    p = flags(allow, 2, NULL, 0);
    tg_policy_check(p, &k, collect, &ns);
    tg_policy_free(p);
    p = flags(allow1, 1, NULL, 0);
    tg_policy_check(p, &k, collect, &ns);
    tg_policy_free(p);
    /* A flag's rule holds one glob: dead, it is the rule that matches nothing. */
    NOTE_HAS(&ns, "W --allow-tool reed_*: matches nothing: its tools (\"reed_*\") match no known "
                  "name of the agents it applies to");
    cr_assert_eq(ns.n, 2);
}

/* ---- bounds ---- */

/* Append to <b> (capacity <cap>, <*used> bytes in it), printf-style. */
static void app(char *b, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void app(char *b, size_t cap, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b + *used, cap - *used, fmt, ap);
    va_end(ap);
    cr_assert(w >= 0 && (size_t)w < cap - *used, "test buffer too small");
    *used += (size_t)w;
}

/* A policy of <n> rules, or a rule whose <key> has <n> entries of <entry>
 * (claims: <n> claims). The caller frees it. */
static char *big(size_t n, const char *key, const char *entry)
{
    size_t cap = 64 + n * ((entry ? strlen(entry) : 0) + 48), used = 0;
    char *s = malloc(cap);
    bool claims = key && strcmp(key, "claims") == 0;

    cr_assert_not_null(s);
    app(s, cap, &used, "{\"default\":\"deny\",\"rules\":[");
    if (key) {
        app(s, cap, &used, "{\"effect\":\"allow\",\"%s\":%s", key, claims ? "{" : "[");
        for (size_t i = 0; i < n; i++)
            if (claims)
                app(s, cap, &used, "%s\"c%zu\":[\"v\"]", i ? "," : "", i);
            else
                app(s, cap, &used, "%s\"%s\"", i ? "," : "", entry);
        app(s, cap, &used, "%s}", claims ? "}" : "]");
    } else {
        for (size_t i = 0; i < n; i++)
            app(s, cap, &used, "%s{\"effect\":\"allow\",\"tools\":[\"t%zu\"]}", i ? "," : "", i);
    }
    app(s, cap, &used, "]}");
    return s;
}

Test(policy, bounds)
{
    char *s = big(TG_POLICY_RULES_MAX, NULL, NULL);
    tg_policy_t *p = load(s);
    tg_policy_who_t w = named("a");
    cr_assert_eq(p->nrules, TG_POLICY_RULES_MAX);
    DECIDES(p, &w, "fs", "t255", T, ALLOW, 255, "policy.rules[255]");
    tg_policy_free(p);
    free(s);
    s = big(TG_POLICY_RULES_MAX + 1, NULL, NULL);
    ERR_HAS(s, "policy.rules: 257 rules (expected at most 256)");
    free(s);

    s = big(TG_POLICY_MATCH_MAX, "tools", "x");
    tg_policy_free(load(s));
    free(s);
    s = big(TG_POLICY_MATCH_MAX + 1, "tools", "x");
    ERR_HAS(s, "policy.rules[0].tools: 65 entries (expected at most 64)");
    free(s);
    s = big(TG_POLICY_MATCH_MAX + 1, "callers", "x");
    ERR_HAS(s, "policy.rules[0].callers: 65 entries (expected at most 64)");
    free(s);

    s = big(TG_POLICY_CLAIMS_MAX, "claims", NULL);
    tg_policy_free(load(s));
    free(s);
    s = big(TG_POLICY_CLAIMS_MAX + 1, "claims", NULL);
    ERR_HAS(s, "policy.rules[0].claims: 17 claims (expected 1 to 16");
    free(s);

    char glob[TG_POLICY_GLOB_MAX + 2];
    memset(glob, 'g', sizeof glob - 1);
    glob[TG_POLICY_GLOB_MAX] = '\0';
    s = big(1, "tools", glob);
    p = load(s);
    DECIDES(p, &w, "fs", glob, T, ALLOW, 0, "policy.rules[0]");
    tg_policy_free(p);
    free(s);
    glob[TG_POLICY_GLOB_MAX] = 'g';
    glob[TG_POLICY_GLOB_MAX + 1] = '\0';
    s = big(1, "tools", glob);
    ERR_HAS(s, "\" is longer than 256 bytes");
    free(s);

    /* A flag's glob has the same bound, and its where holds it whole. */
    const char *one[] = {glob};
    tg_err_t err = {{0}};
    cr_assert_eq(tg_policy_from_flags(&p, one, 1, NULL, 0, &err), -EINVAL);
    cr_assert(strstr(err.msg, "is longer than 256 bytes"), "%s", err.msg);
    glob[TG_POLICY_GLOB_MAX] = '\0';
    p = flags(NULL, 0, one, 1);
    cr_assert_eq(strlen(p->rules[0].where), strlen("--deny-tool ") + TG_POLICY_GLOB_MAX);
    tg_policy_free(p);
}
