/* Building a policy: from the config's "policy" object and from wrap's
 * --allow-tool / --deny-tool flags. See policy.h.
 *
 * Every message starts with the path of what is wrong, as the config
 * loader's do ("policy.rules[2].tools[0]: ..."), so that whoever reads
 * the JSON from a file can put "FILE: " in front and be exact. Values are
 * echoed cut at VALUE_SHOWN bytes with control bytes shown as '?'.
 */
#include "router/auth/policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_MAX      (TG_POLICY_GLOB_MAX + 64) /* fixed internal bound: bytes of a JSON path */
#define VALUE_SHOWN 64                        /* fixed internal bound: bytes of a value echoed */
/* fixed internal bound: the largest uid or gid, as config reads them */
#define UID_CEIL 2147483647
#define STR_(x)  #x
#define STR(x)   STR_(x)

/* ---- values ---- */

static const char *noun(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* <s> for a message: at most VALUE_SHOWN bytes, control bytes and '"'
 * as '?', so that a message is one printable line. */
static const char *shown(const char *s, char out[VALUE_SHOWN + 1])
{
    size_t i = 0;

    for (; s[i] != '\0' && i < VALUE_SHOWN; i++)
        out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '"' ? '?' : s[i];
    out[i] = '\0';
    return out;
}

/* Why <s> (<len> bytes) cannot be a name or a value, or NULL. */
static const char *value_why(const char *s, size_t len)
{
    if (len == 0)
        return "is empty";
    if (len > TG_POLICY_GLOB_MAX)
        return "is longer than " STR(TG_POLICY_GLOB_MAX) " bytes";
    if (strlen(s) != len)
        return "holds a NUL byte";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return "holds a control byte";
    return NULL;
}

/* Past the ']' closing the bracket expression whose '[' is before <p>,
 * as fnmatch(3) reads one ("[]a]", "[!a]", "[[:alpha:]]"); NULL when it
 * is not closed (fnmatch would then match the '[' literally: refused, so
 * that a glob always means what it seems to). */
static const char *bracket_end(const char *p, const char *end)
{
    if (p < end && (*p == '!' || *p == '^'))
        p++;
    if (p < end && *p == ']')
        p++;
    while (p < end && *p != ']') {
        if (*p == '[' && p + 1 < end && strchr(":.=", p[1])) {
            const char *q = p + 2;
            while (q + 1 < end && !(q[0] == p[1] && q[1] == ']'))
                q++;
            if (q + 1 >= end)
                return NULL;
            p = q + 2;
            continue;
        }
        p += (*p == '\\' && p + 1 < end) ? 2 : 1;
    }
    return p < end ? p + 1 : NULL;
}

/* Why <s> (<len> bytes) cannot be a glob, or NULL. */
static const char *glob_why(const char *s, size_t len)
{
    const char *why = value_why(s, len), *end = s + len, *p = s;

    while (!why && p < end) {
        if (*p == '\\') {
            if (p + 1 == end)
                why = "ends in a lone \\ (write \\\\ for a literal \\)";
            p += 2;
        } else if (*p == '[') {
            if (!(p = bracket_end(p + 1, end)))
                why = "has a [ without its ] (write [[] for a literal [)";
        } else {
            p++;
        }
    }
    return why;
}

/* "allow" or "deny" at <at> into <e>. */
static int load_effect(const json_t *v, const char *at, tg_policy_effect_t *e, tg_err_t *err)
{
    const char *s = json_string_value(v);
    char q[VALUE_SHOWN + 1];

    if (!s)
        return tg_err_set(err, -EINVAL, "%s: expected \"allow\" or \"deny\", got %s", at, noun(v));
    if (strcmp(s, "allow") != 0 && strcmp(s, "deny") != 0)
        return tg_err_set(err, -EINVAL,
                          "%s: \"%s\" is not an effect (expected \"allow\" or \"deny\")", at,
                          shown(s, q));
    *e = s[0] == 'a' ? TG_POLICY_ALLOW : TG_POLICY_DENY;
    return 0;
}

/* ---- matchers ---- */

enum { S_GLOB = 1, S_SCOPE = 2 }; /* load_strs: entries are globs; scopes (no space) */

/* The array at <at> checked for a matcher: 1 to TG_POLICY_MATCH_MAX
 * entries. Its size, or -EINVAL with <err> set. */
static long matcher_size(const json_t *v, const char *at, const char *what, tg_err_t *err)
{
    size_t n = json_array_size(v);

    if (!json_is_array(v))
        return tg_err_set(err, -EINVAL, "%s: expected an array of %s, got %s", at, what, noun(v));
    if (n == 0)
        return tg_err_set(err, -EINVAL,
                          "%s: an empty list matches nothing (leave the key out to match any)", at);
    if (n > TG_POLICY_MATCH_MAX)
        return tg_err_set(err, -EINVAL, "%s: %zu entries (expected at most %d)", at, n,
                          TG_POLICY_MATCH_MAX);
    return (long)n;
}

/* A list of strings at <at> into <l>, each a glob (S_GLOB) or an exact
 * value, one scope each with S_SCOPE. */
static int load_strs(tg_policy_strs_t *l, const json_t *v, const char *at, unsigned flags,
                     tg_err_t *err)
{
    long n = matcher_size(v, at, flags & S_GLOB ? "globs" : "strings", err);
    char q[VALUE_SHOWN + 1];

    if (n < 0)
        return (int)n;
    if (!(l->v = calloc((size_t)n, sizeof *l->v)))
        return tg_err_set(err, -ENOMEM, "%s: out of memory", at);
    for (size_t i = 0; i < (size_t)n; i++) {
        const json_t *e = json_array_get(v, i);
        const char *s = json_string_value(e), *why;
        if (!s)
            return tg_err_set(err, -EINVAL, "%s[%zu]: expected a string, got %s", at, i, noun(e));
        why = flags & S_GLOB ? glob_why(s, json_string_length(e))
                             : value_why(s, json_string_length(e));
        if (!why && (flags & S_SCOPE) && strchr(s, ' '))
            why = "holds a space (expected one scope per entry)";
        if (why)
            return tg_err_set(err, -EINVAL, "%s[%zu]: \"%s\" %s", at, i, shown(s, q), why);
        if (!(l->v[i] = strdup(s)))
            return tg_err_set(err, -ENOMEM, "%s: out of memory", at);
        l->n = i + 1; /* freed up to here on failure */
    }
    return 0;
}

/* A list of uids or gids at <at>: integers (names are not looked up:
 * the decision runs on the loop, far from NSS). */
static int load_ids(tg_policy_ids_t *l, const json_t *v, const char *at, const char *what,
                    tg_err_t *err)
{
    long n = matcher_size(v, at, what, err);

    if (n < 0)
        return (int)n;
    if (!(l->v = calloc((size_t)n, sizeof *l->v)))
        return tg_err_set(err, -ENOMEM, "%s: out of memory", at);
    l->n = (size_t)n;
    for (size_t i = 0; i < l->n; i++) {
        const json_t *e = json_array_get(v, i);
        json_int_t id = json_integer_value(e);
        if (!json_is_integer(e) || id < 0 || id > UID_CEIL)
            return tg_err_set(err, -EINVAL,
                              "%s[%zu]: expected a numeric %s 0 to %d (names are not looked up), "
                              "got %s",
                              at, i, what, UID_CEIL,
                              json_is_integer(e) ? "one out of range" : noun(e));
        l->v[i] = (int64_t)id;
    }
    return 0;
}

/* methods: the call method of each family; a list method is refused,
 * naming the call method that decides it. */
static int load_methods(unsigned *mask, const json_t *v, const char *at, tg_err_t *err)
{
    static const char *const call[TG_POLICY_M_COUNT] = {"tools/call", "prompts/get",
                                                        "resources/read"};
    long n = matcher_size(v, at, "methods", err);
    char q[VALUE_SHOWN + 1];

    for (size_t i = 0; n > 0 && i < (size_t)n; i++) {
        const json_t *e = json_array_get(v, i);
        const char *s = json_string_value(e);
        int m = s ? tg_policy_method(s, json_string_length(e)) : -1;
        if (!s)
            return tg_err_set(err, -EINVAL, "%s[%zu]: expected a string, got %s", at, i, noun(e));
        if (m < 0)
            return tg_err_set(err, -EINVAL,
                              "%s[%zu]: \"%s\" is not a method a policy decides (expected "
                              "\"tools/call\", \"prompts/get\" or \"resources/read\")",
                              at, i, shown(s, q));
        if (strcmp(s, call[m]) != 0)
            return tg_err_set(err, -EINVAL,
                              "%s[%zu]: \"%s\" is decided by \"%s\" (the rule on the call decides "
                              "the list too, so a denied item is never listed): write \"%s\"",
                              at, i, shown(s, q), call[m], call[m]);
        *mask |= 1u << m;
    }
    return n < 0 ? (int)n : 0;
}

/* claims: {"name": [values], ...}, 1 to TG_POLICY_CLAIMS_MAX names. */
static int load_claims(tg_policy_rule_t *r, const json_t *v, const char *at, tg_err_t *err)
{
    size_t n = json_object_size(v);
    char sub[2 * AT_MAX], q[VALUE_SHOWN + 1]; /* <at> and a claim name, each shorter than AT_MAX */
    const char *name, *why;
    json_t *vals;

    if (!json_is_object(v))
        return tg_err_set(err, -EINVAL, "%s: expected an object {\"claim\": [values]}, got %s", at,
                          noun(v));
    if (n == 0 || n > TG_POLICY_CLAIMS_MAX)
        return tg_err_set(err, -EINVAL,
                          "%s: %zu claims (expected 1 to %d; leave the key out to "
                          "match any token)",
                          at, n, TG_POLICY_CLAIMS_MAX);
    if (!(r->claims = calloc(n, sizeof *r->claims)))
        return tg_err_set(err, -ENOMEM, "%s: out of memory", at);
    json_object_foreach((json_t *)v, name, vals)
    {
        tg_policy_claim_t *c = &r->claims[r->nclaims];
        int rc;
        if ((why = value_why(name, strlen(name))))
            return tg_err_set(err, -EINVAL, "%s: claim name \"%s\" %s", at, shown(name, q), why);
        if (!(c->name = strdup(name)))
            return tg_err_set(err, -ENOMEM, "%s: out of memory", at);
        r->nclaims++; /* freed from here on failure */
        c->scope = strcmp(name, "scope") == 0;
        snprintf(sub, sizeof sub, "%s.%s", at, name);
        if ((rc = load_strs(&c->values, vals, sub, c->scope ? S_SCOPE : 0, err)) < 0)
            return rc;
    }
    return 0;
}

/* ---- rules ---- */

enum key_kind { K_EFFECT, K_GLOBS, K_UIDS, K_GIDS, K_CLAIMS, K_METHODS };

/* The keys of a rule, in the order messages list them. */
static const struct rule_key {
    const char *name;
    enum key_kind kind;
    size_t off; /* K_GLOBS: the tg_policy_strs_t in tg_policy_rule_t */
} rule_keys[] = {
    {"effect", K_EFFECT, 0},
    {"callers", K_GLOBS, offsetof(tg_policy_rule_t, callers)},
    {"uids", K_UIDS, 0},
    {"gids", K_GIDS, 0},
    {"tokens", K_GLOBS, offsetof(tg_policy_rule_t, tokens)},
    {"claims", K_CLAIMS, 0},
    {"agents", K_GLOBS, offsetof(tg_policy_rule_t, agents)},
    {"tools", K_GLOBS, offsetof(tg_policy_rule_t, tools)},
    {"methods", K_METHODS, 0},
};
#define RULE_KEYS "effect, callers, uids, gids, tokens, claims, agents, tools, methods"

/* Member <k> (value <v>) of rule <r> whose path is <at>. */
static int load_key(tg_policy_rule_t *r, const struct rule_key *k, const json_t *v, const char *at,
                    tg_err_t *err)
{
    switch (k->kind) {
    case K_EFFECT:
        return load_effect(v, at, &r->effect, err);
    case K_GLOBS:
        return load_strs((tg_policy_strs_t *)((char *)r + k->off), v, at, S_GLOB, err);
    case K_UIDS:
        return load_ids(&r->uids, v, at, "uid", err);
    case K_GIDS:
        return load_ids(&r->gids, v, at, "gid", err);
    case K_CLAIMS:
        return load_claims(r, v, at, err);
    case K_METHODS:
        return load_methods(&r->methods, v, at, err);
    }
    return -EINVAL;
}

/* Rule <i> from <v> into <r>: its members in document order. */
static int load_rule(tg_policy_rule_t *r, const json_t *v, size_t i, tg_err_t *err)
{
    char at[AT_MAX], q[VALUE_SHOWN + 1];
    const char *key;
    json_t *val;

    snprintf(r->where, sizeof r->where, "policy.rules[%zu]", i);
    if (!json_is_object(v))
        return tg_err_set(
            err, -EINVAL,
            "%s: expected an object {\"effect\": \"allow\" or \"deny\", matchers...}, "
            "got %s",
            r->where, noun(v));
    if (!json_object_get(v, "effect"))
        return tg_err_set(err, -EINVAL, "%s: no \"effect\" (expected \"allow\" or \"deny\")",
                          r->where);
    json_object_foreach((json_t *)v, key, val)
    {
        const struct rule_key *k = NULL;
        int rc;
        for (size_t j = 0; j < sizeof rule_keys / sizeof rule_keys[0] && !k; j++)
            k = strcmp(rule_keys[j].name, key) == 0 ? &rule_keys[j] : NULL;
        if (!k)
            return tg_err_set(err, -EINVAL, "%s: unknown key \"%s\" (known: " RULE_KEYS ")",
                              r->where, shown(key, q));
        snprintf(at, sizeof at, "%s.%s", r->where, key);
        if ((rc = load_key(r, k, val, at, err)) < 0)
            return rc;
    }
    return 0;
}

static int load_rules(tg_policy_t *p, const json_t *v, tg_err_t *err)
{
    size_t n = json_array_size(v);

    if (!json_is_array(v))
        return tg_err_set(err, -EINVAL, "policy.rules: expected an array of rules, got %s",
                          noun(v));
    if (n > TG_POLICY_RULES_MAX)
        return tg_err_set(err, -EINVAL, "policy.rules: %zu rules (expected at most %d)", n,
                          TG_POLICY_RULES_MAX);
    if (n && !(p->rules = calloc(n, sizeof *p->rules)))
        return tg_err_set(err, -ENOMEM, "policy.rules: out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc;
        p->nrules = i + 1; /* freed up to here on failure */
        if ((rc = load_rule(&p->rules[i], json_array_get(v, i), i, err)) < 0)
            return rc;
    }
    return 0;
}

/* The top level's members: "default" (required) and "rules". */
static int load_top(tg_policy_t *p, const json_t *v, tg_err_t *err)
{
    const json_t *d = json_object_get(v, "default"), *rules = json_object_get(v, "rules");
    char q[VALUE_SHOWN + 1];
    const char *key;
    json_t *val;
    int rc;

    json_object_foreach(
        (json_t *)v, key,
        val) if (strcmp(key, "default") != 0 &&
                 strcmp(key, "rules") !=
                     0) return tg_err_set(err, -EINVAL,
                                          "policy: unknown key \"%s\" (known: default, rules)",
                                          shown(key, q));
    if (!d)
        return tg_err_set(err, -EINVAL,
                          "policy: no \"default\" (expected \"allow\" or \"deny\": a policy has no "
                          "implicit default)");
    snprintf(p->def_where, sizeof p->def_where, "policy.default");
    if ((rc = load_effect(d, p->def_where, &p->def, err)) < 0)
        return rc;
    return rules ? load_rules(p, rules, err) : 0;
}

int tg_policy_from_json(tg_policy_t **out, const json_t *v, tg_err_t *err)
{
    tg_policy_t *p;
    int rc;

    *out = NULL;
    if (!json_is_object(v))
        return tg_err_set(err, -EINVAL,
                          "policy: expected an object {\"default\": \"allow\" or \"deny\", "
                          "\"rules\": [...]}, got %s",
                          v ? noun(v) : "nothing");
    if (!(p = calloc(1, sizeof *p)))
        return tg_err_set(err, -ENOMEM, "policy: out of memory");
    if ((rc = load_top(p, v, err)) < 0) {
        tg_policy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- wrap's flags ---- */

/* Rule <r>: <effect> for the tools matching <glob> (NULL: every tool),
 * named by <where>. 0 or -ENOMEM. */
static int flag_rule(tg_policy_rule_t *r, tg_policy_effect_t effect, const char *glob,
                     const char *where)
{
    r->effect = effect;
    r->from_flag = true;
    r->methods = 1u << TG_POLICY_M_TOOLS;
    snprintf(r->where, sizeof r->where, "%s", where);
    if (!glob)
        return 0;
    if (!(r->tools.v = calloc(1, sizeof *r->tools.v)) || !(r->tools.v[0] = strdup(glob)))
        return -ENOMEM;
    r->tools.n = 1;
    return 0;
}

/* One rule of <effect> per glob of <globs> (<n>) of flag <flag>, into <p>. */
static int flag_rules(tg_policy_t *p, const char *flag, tg_policy_effect_t effect,
                      const char *const *globs, size_t n, tg_err_t *err)
{
    char where[TG_POLICY_WHERE_MAX], q[VALUE_SHOWN + 1];

    for (size_t i = 0; i < n; i++) {
        const char *why = glob_why(globs[i], strlen(globs[i]));
        if (why)
            return tg_err_set(err, -EINVAL, "%s \"%s\": %s", flag, shown(globs[i], q), why);
        snprintf(where, sizeof where, "%s %s", flag, globs[i]);
        if (flag_rule(&p->rules[p->nrules++], effect, globs[i], where) < 0)
            return tg_err_set(err, -ENOMEM, "%s: out of memory", flag);
    }
    return 0;
}

int tg_policy_from_flags(tg_policy_t **out, const char *const *allow, size_t nallow,
                         const char *const *deny, size_t ndeny, tg_err_t *err)
{
    size_t n = ndeny + nallow + (nallow > 0); /* the last: "no glob matched" */
    tg_policy_t *p;
    int rc;

    *out = NULL;
    if (nallow + ndeny == 0)
        return 0;
    if (n > TG_POLICY_RULES_MAX)
        return tg_err_set(err, -EINVAL,
                          "%zu --allow-tool and --deny-tool globs (expected at most %d)",
                          nallow + ndeny, TG_POLICY_RULES_MAX - 1);
    if (!(p = calloc(1, sizeof *p)) || !(p->rules = calloc(n, sizeof *p->rules))) {
        free(p);
        return tg_err_set(err, -ENOMEM, "--allow-tool, --deny-tool: out of memory");
    }
    p->def = TG_POLICY_ALLOW;
    snprintf(p->def_where, sizeof p->def_where, "wrap's tool flags (default allow)");
    rc = flag_rules(p, "--deny-tool", TG_POLICY_DENY, deny, ndeny, err);
    if (rc == 0)
        rc = flag_rules(p, "--allow-tool", TG_POLICY_ALLOW, allow, nallow, err);
    if (rc == 0 && nallow > 0 &&
        flag_rule(&p->rules[p->nrules++], TG_POLICY_DENY, NULL, "--allow-tool (no glob matched)") <
            0)
        rc = tg_err_set(err, -ENOMEM, "--allow-tool: out of memory");
    if (rc < 0) {
        tg_policy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
