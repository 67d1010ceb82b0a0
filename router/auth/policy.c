/* The policy's model and its decision: see policy.h. Building one (JSON,
 * wrap's flags) is policy_load.c; check is policy_check.c.
 *
 * fnmatch(3) allocates nothing in a single-byte locale, and toolgate
 * never calls setlocale, so it runs in "C": a decision stays free of
 * allocation, as the hot path requires.
 */
#include "router/auth/policy.h"

#include <fnmatch.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The MCP methods a policy decides and their family. The list methods
 * are here so that the engines ask with the method they received. */
static const struct {
    const char *name;
    tg_policy_method_t m;
} methods[] = {
    {"tools/call", TG_POLICY_M_TOOLS},
    {"tools/list", TG_POLICY_M_TOOLS},
    {"prompts/get", TG_POLICY_M_PROMPTS},
    {"prompts/list", TG_POLICY_M_PROMPTS},
    {"resources/read", TG_POLICY_M_RESOURCES},
    {"resources/list", TG_POLICY_M_RESOURCES},
    {"resources/templates/list", TG_POLICY_M_RESOURCES},
    {"resources/subscribe", TG_POLICY_M_RESOURCES},
};

int tg_policy_method(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].name) == len && memcmp(methods[i].name, s, len) == 0)
            return (int)methods[i].m;
    return -1;
}

static void strs_free(tg_policy_strs_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

void tg_policy_free(tg_policy_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nrules; i++) {
        tg_policy_rule_t *r = &p->rules[i];
        strs_free(&r->callers);
        strs_free(&r->tokens);
        strs_free(&r->agents);
        strs_free(&r->tools);
        free(r->uids.v);
        free(r->gids.v);
        for (size_t j = 0; j < r->nclaims; j++) {
            free(r->claims[j].name);
            strs_free(&r->claims[j].values);
        }
        free(r->claims);
    }
    free(p->rules);
    free(p);
}

/* ---- deciding ---- */

static bool glob_any(const tg_policy_strs_t *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (fnmatch(l->v[i], s, 0) == 0)
            return true;
    return false;
}

static bool id_any(const tg_policy_ids_t *l, int64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == id)
            return true;
    return false;
}

/* Whether space-separated scope list <have> holds scope <want> as a
 * whole word ("read" is not in "reader"). */
static bool scope_has(const char *have, const char *want)
{
    size_t wl = strlen(want);

    for (const char *p = have; *p != '\0';) {
        const char *e;
        while (*p == ' ')
            p++;
        for (e = p; *e != '\0' && *e != ' '; e++)
            ;
        if ((size_t)(e - p) == wl && memcmp(p, want, wl) == 0)
            return true;
        p = e;
    }
    return false;
}

/* Whether some pair of <who> named like <c> holds one of <c>'s values. */
static bool claim_ok(const tg_policy_claim_t *c, const tg_policy_who_t *who)
{
    for (size_t i = 0; i < who->nclaims; i++) {
        const tg_policy_kv_t *kv = &who->claims[i];
        if (!kv->name || !kv->value || strcmp(kv->name, c->name) != 0)
            continue;
        for (size_t j = 0; j < c->values.n; j++)
            if (c->scope ? scope_has(kv->value, c->values.v[j])
                         : strcmp(kv->value, c->values.v[j]) == 0)
                return true;
    }
    return false;
}

/* A matcher <l> that is present must match <s>, which must exist. */
static bool strs_ok(const tg_policy_strs_t *l, const char *s)
{
    return l->n == 0 || (s != NULL && glob_any(l, s));
}

static bool ids_ok(const tg_policy_ids_t *l, int64_t id)
{
    return l->n == 0 || (id >= 0 && id_any(l, id));
}

/* Whether rule <r> matches; cheap tests first, globs last. */
static bool rule_matches(const tg_policy_rule_t *r, const tg_policy_who_t *who, const char *agent,
                         const char *name, unsigned mbit)
{
    if (r->methods != 0 && (r->methods & mbit) == 0)
        return false;
    if (!ids_ok(&r->uids, who->uid) || !ids_ok(&r->gids, who->gid))
        return false;
    if (!strs_ok(&r->callers, who->caller) || !strs_ok(&r->tokens, who->token))
        return false;
    for (size_t i = 0; i < r->nclaims; i++)
        if (!claim_ok(&r->claims[i], who))
            return false;
    return strs_ok(&r->agents, agent) && strs_ok(&r->tools, name);
}

tg_policy_decision_t tg_policy_decide(const tg_policy_t *p, const tg_policy_who_t *who,
                                      const char *agent, const char *name, tg_policy_method_t m)
{
    static const tg_policy_who_t nobody = {NULL, -1, -1, NULL, NULL, 0};
    /* A family out of range matches only rules without a methods matcher. */
    unsigned mbit = (unsigned)m < TG_POLICY_M_COUNT ? 1u << m : 0;

    if (!p)
        return (tg_policy_decision_t){TG_POLICY_ALLOW, -1, "no policy"};
    if (!who)
        who = &nobody;
    for (size_t i = 0; i < p->nrules; i++)
        if (rule_matches(&p->rules[i], who, agent, name, mbit))
            return (tg_policy_decision_t){p->rules[i].effect, (int)i, p->rules[i].where};
    return (tg_policy_decision_t){p->def, -1, p->def_where};
}

bool tg_policy_listed(const tg_policy_t *p, const tg_policy_who_t *who, const char *agent,
                      const char *name, tg_policy_method_t m)
{
    return tg_policy_decide(p, who, agent, name, m).effect == TG_POLICY_ALLOW;
}

int tg_policy_supported(const tg_policy_t *p, tg_err_t *err)
{
    for (size_t i = 0; p != NULL && i < p->nrules; i++)
        if (p->rules[i].tokens.n > 0)
            return tg_err_set(err, -EINVAL,
                              "%s.tokens: bearer tokens have no names in this config "
                              "(callers[].tokens holds their digests): match the caller a "
                              "token names with \"callers\" instead",
                              p->rules[i].where);
    return 0;
}
