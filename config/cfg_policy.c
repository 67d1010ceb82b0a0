/* The top-level "policy" (issue 22): who may call what. config/ checks
 * its shape through the key table's rows (policy.*: unknown keys, types,
 * choices, empty lists) and keeps the object as JSON in
 * tg_config_t.policy; the router builds the tg_policy_t from it
 * (router/auth/policy.h, tg_policy_from_json), which checks the rest
 * (globs, methods, id ranges), since config/ may not include router/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"

#define POLICY_MATCH_MAX  64 /* fixed internal bound: entries of one matcher (as the router's) */
#define POLICY_CLAIMS_MAX 16 /* fixed internal bound: claims one rule names (as the router's) */

/* policy: an object with "default"; kept whole as a copy. */
TG_KLOAD(tg__cfg_load_policy)
{
    json_t *copy;

    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (!json_object_get(v, "default"))
        return tg__cfg_at_err(c, false,
                              "missing required key \"default\" (a policy says what happens "
                              "when no rule matches: \"allow\" or \"deny\")");
    if (!(copy = json_deep_copy(v)))
        return tg__cfg_at_err(c, false, "out of memory");
    json_decref(c->cfg->policy);
    c->cfg->policy = copy;
    return 0;
}

static int rule_one(tg_cfg_ctx_t *c, json_t *v)
{
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "an object {\"effect\": \"allow\" or \"deny\", matchers...}");
    if (tg__cfg_walk(c, v, "policy.rules[]") < 0)
        return -1;
    if (!json_object_get(v, "effect"))
        return tg__cfg_at_err(c, false, "missing required key \"effect\" (\"allow\" or \"deny\")");
    return 0;
}

/* policy.rules: checked element by element; nothing kept apart from the
 * policy's JSON. */
TG_KLOAD(tg__cfg_load_policy_rules)
{
    size_t n;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of rules");
    n = json_array_size(v);
    if (n > TG_CFG_POLICY_RULES_MAX)
        return tg__cfg_at_err(c, false, "%zu rules (expected at most %d)", n,
                              TG_CFG_POLICY_RULES_MAX);
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i), rc = rule_one(c, json_array_get(v, i));
        tg__cfg_pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One matcher entry: a uid or gid (an integer), or a non-empty string. */
static int entry_one(tg_cfg_ctx_t *c, const json_t *e, bool ids)
{
    if (ids && !(json_is_integer(e) && json_integer_value(e) >= 0 &&
                 json_integer_value(e) <= 2147483647))
        return tg__cfg_type_err(c, e, "a numeric id from 0 to 2147483647 (names are not looked up)");
    if (!ids && !tg__cfg_get_str(c, e, true))
        return -1;
    return 0;
}

/* A matcher: 1..POLICY_MATCH_MAX entries (an empty one would match
 * nothing); uids and gids hold integers, the others strings. */
static int match_list(tg_cfg_ctx_t *c, const json_t *v, bool ids)
{
    size_t n;

    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, ids ? "an array of numeric ids" : "an array of strings");
    n = json_array_size(v);
    if (n == 0)
        return tg__cfg_at_err(c, false,
                              "an empty list matches nothing (leave the key out to match any)");
    if (n > POLICY_MATCH_MAX)
        return tg__cfg_at_err(c, false, "%zu entries (expected at most %d)", n, POLICY_MATCH_MAX);
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i), rc = entry_one(c, json_array_get(v, i), ids);
        tg__cfg_pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* policy.rules[].callers, uids, gids, tokens, agents, tools, methods. */
TG_KLOAD(tg__cfg_load_policy_list)
{
    const char *name = tg_cfg_key_name(k);

    return match_list(c, v, strcmp(name, "uids") == 0 || strcmp(name, "gids") == 0);
}

/* policy.rules[].claims: {"claim": ["value", ...]}, 1..POLICY_CLAIMS_MAX. */
TG_KLOAD(tg__cfg_load_policy_claims)
{
    const char *name;
    json_t *vals;
    size_t n;

    (void)k;
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "an object {\"claim\": [values]}");
    n = json_object_size(v);
    if (n == 0 || n > POLICY_CLAIMS_MAX)
        return tg__cfg_at_err(c, false,
                              "%zu claims (expected 1 to %d; leave the key out to match any)", n,
                              POLICY_CLAIMS_MAX);
    json_object_foreach(v, name, vals)
    {
        int pushed = tg__cfg_push_key(c, name), rc = match_list(c, vals, false);
        tg__cfg_pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}
