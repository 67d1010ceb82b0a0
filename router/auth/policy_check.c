/* What `check` says of a policy: entries that name nothing known, rules
 * that can never decide. See policy.h, tg_policy_check.
 *
 * An agents entry naming no agent is an error (issue 22): it is most
 * likely a typo or a removed agent, and the rule would silently protect
 * nothing. Everything else is a warning, because what is known may be
 * less than what will connect: the tools of an agent are judged only when
 * its whole list of that family is known.
 */
#include "router/auth/policy.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NOTE_MAX    512 /* fixed internal bound: bytes of one finding */
#define NAMES_SHOWN 8   /* fixed internal bound: known names one finding lists */

typedef struct chk {
    const tg_policy_known_t *k;
    tg_policy_note_fn fn;
    void *arg;
    int errors;
} chk_t;

static void note(chk_t *c, tg_policy_sev_t sev, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void note(chk_t *c, tg_policy_sev_t sev, const char *where, const char *fmt, ...)
{
    char msg[NOTE_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->errors += sev == TG_POLICY_ERROR;
    c->fn(c->arg, sev, where, msg);
}

static bool glob_hits(const char *glob, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && fnmatch(glob, names[i], 0) == 0)
            return true;
    return false;
}

/* The path of entry <j> of matcher <key> of <r>: a flag's rule has only
 * its own (the flag and its one glob). */
static void entry_where(char *out, size_t cap, const tg_policy_rule_t *r, const char *key, size_t j)
{
    if (r->from_flag)
        snprintf(out, cap, "%s", r->where);
    else
        snprintf(out, cap, "%s.%s[%zu]", r->where, key, j);
}

/* "a, b, c" (at most NAMES_SHOWN, then "..."), or "none", into <buf>:
 * the callers' names, or with <agents> the agents' ids. */
static void known_list(char *buf, size_t cap, const tg_policy_known_t *k, bool agents)
{
    size_t n = agents ? k->nagents : k->ncallers, used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        const char *s = agents ? k->agents[i].id : k->callers[i];
        s = s ? s : "?";
        int w = i == NAMES_SHOWN ? snprintf(buf + used, cap - used, ", ...")
                                 : snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", s);
        used += w > 0 ? (size_t)w : 0;
        if (i == NAMES_SHOWN)
            break;
    }
    if (n == 0)
        snprintf(buf, cap, "none");
}

/* ---- agents: errors ---- */

static void check_agents(chk_t *c, const tg_policy_rule_t *r)
{
    char where[TG_POLICY_WHERE_MAX + 32], list[NOTE_MAX / 2];

    for (size_t j = 0; j < r->agents.n; j++) {
        bool hit = false;
        for (size_t a = 0; a < c->k->nagents && !hit; a++)
            hit = c->k->agents[a].id && fnmatch(r->agents.v[j], c->k->agents[a].id, 0) == 0;
        if (hit)
            continue;
        entry_where(where, sizeof where, r, "agents", j);
        known_list(list, sizeof list, c->k, true);
        note(c, TG_POLICY_ERROR, where, "\"%.64s\" matches no agent (agents: %s)", r->agents.v[j],
             list);
    }
}

/* ---- callers and tools: warnings ---- */

/* Whether agent <a> is one rule <r> applies to. */
static bool agent_applies(const tg_policy_rule_t *r, const tg_policy_agent_known_t *a)
{
    for (size_t j = 0; j < r->agents.n; j++)
        if (a->id && fnmatch(r->agents.v[j], a->id, 0) == 0)
            return true;
    return r->agents.n == 0;
}

/* Whether tools entry <glob> of <r> can match nothing: every family of
 * every agent the rule applies to has a known list, and no name of any
 * of them matches. */
static bool tool_dead(const chk_t *c, const tg_policy_rule_t *r, const char *glob)
{
    size_t lists = 0;

    for (size_t a = 0; a < c->k->nagents; a++) {
        const tg_policy_agent_known_t *ag = &c->k->agents[a];
        if (!agent_applies(r, ag))
            continue;
        for (int m = 0; m < TG_POLICY_M_COUNT; m++) {
            if (r->methods != 0 && !(r->methods & (1u << m)))
                continue;
            if (!ag->names[m] || glob_hits(glob, ag->names[m], ag->nnames[m]))
                return false;
            lists++;
        }
    }
    return lists > 0; /* no agent applies: its agents entries are errors already */
}

static bool caller_dead(const chk_t *c, const tg_policy_rule_t *r, const char *glob)
{
    (void)r;
    return !glob_hits(glob, c->k->callers, c->k->ncallers);
}

/* For a tools glob written as an exposed name ("fs__read_*"): how to
 * write it, into <buf> ("" when it is not one). */
static void prefix_hint(char *buf, size_t cap, const chk_t *c, const char *glob)
{
    buf[0] = '\0';
    for (size_t a = 0; a < c->k->nagents; a++) {
        const char *id = c->k->agents[a].id;
        size_t n = id ? strlen(id) : 0;
        if (n && strncmp(glob, id, n) == 0 && strncmp(glob + n, "__", 2) == 0) {
            snprintf(buf, cap,
                     "; tool globs match an agent's own names: write \"agents\": [\"%.64s\"], "
                     "\"tools\": [\"%.64s\"]",
                     id, glob + n + 2);
            return;
        }
    }
}

/* The warning for a matcher of <r> none of whose entries can match:
 * <first> is its first entry. */
static void rule_dead(chk_t *c, const tg_policy_rule_t *r, bool tools, const char *first, size_t n)
{
    char list[NOTE_MAX / 2], hint[NOTE_MAX / 2];

    if (!tools) {
        known_list(list, sizeof list, c->k, false);
        note(c, TG_POLICY_WARNING, r->where,
             "matches nothing: its callers name no caller (callers[]: %s)", list);
        return;
    }
    prefix_hint(hint, sizeof hint, c, first);
    note(c, TG_POLICY_WARNING, r->where,
         "matches nothing: its tools (\"%.64s\"%s) match no known name of the agents it applies "
         "to%s",
         first, n > 1 ? ", ..." : "", hint);
}

/* The warning for entry <j> of a matcher of <r> that can match nothing
 * while the others can. */
static void entry_dead(chk_t *c, const tg_policy_rule_t *r, bool tools, const char *glob, size_t j)
{
    char where[TG_POLICY_WHERE_MAX + 32], list[NOTE_MAX / 2], hint[NOTE_MAX / 2];

    entry_where(where, sizeof where, r, tools ? "tools" : "callers", j);
    if (!tools) {
        known_list(list, sizeof list, c->k, false);
        note(c, TG_POLICY_WARNING, where,
             "\"%.64s\" names no caller (callers[]: %s); the rule's other callers still match",
             glob, list);
        return;
    }
    prefix_hint(hint, sizeof hint, c, glob);
    note(c, TG_POLICY_WARNING, where,
         "\"%.64s\" matches no known name of the agents the rule applies to%s; the rule's other "
         "tools still match",
         glob, hint);
}

/* The callers (or with <tools>, the tools) matcher of <r>, judged entry
 * by entry: all dead is one warning on the rule, some dead one each. */
static void check_list(chk_t *c, const tg_policy_rule_t *r, bool tools)
{
    const tg_policy_strs_t *l = tools ? &r->tools : &r->callers;
    bool (*dead)(const chk_t *, const tg_policy_rule_t *, const char *) =
        tools ? tool_dead : caller_dead;
    size_t ndead = 0;

    for (size_t j = 0; j < l->n; j++)
        ndead += dead(c, r, l->v[j]);
    if (ndead > 0 && ndead == l->n) {
        rule_dead(c, r, tools, l->v[0], l->n);
        return;
    }
    for (size_t j = 0; ndead > 0 && j < l->n; j++)
        if (dead(c, r, l->v[j]))
            entry_dead(c, r, tools, l->v[j], j);
}

/* ---- shadowed rules ---- */

/* Whether <r> has no matcher but, perhaps, methods. */
static bool only_methods(const tg_policy_rule_t *r)
{
    return !r->callers.n && !r->tokens.n && !r->agents.n && !r->tools.n && !r->uids.n &&
           !r->gids.n && !r->nclaims;
}

/* The first rule before <i> that takes every request rule <i> could
 * match (it has no matcher but methods, and those cover <i>'s), or -1. */
static long shadow_of(const tg_policy_t *p, size_t i)
{
    unsigned mi = p->rules[i].methods;

    for (size_t j = 0; j < i; j++) {
        unsigned mj = p->rules[j].methods;
        if (only_methods(&p->rules[j]) && (mj == 0 || (mi != 0 && (mi & ~mj) == 0)))
            return (long)j;
    }
    return -1;
}

int tg_policy_check(const tg_policy_t *p, const tg_policy_known_t *k, tg_policy_note_fn fn,
                    void *arg)
{
    chk_t c = {k, fn, arg, 0};

    for (size_t i = 0; p && i < p->nrules; i++) {
        const tg_policy_rule_t *r = &p->rules[i];
        long s = shadow_of(p, i);
        check_agents(&c, r);
        if (s >= 0)
            note(&c, TG_POLICY_WARNING, r->where,
                 "never decides: %s has no matcher%s and takes its requests first",
                 p->rules[s].where, p->rules[s].methods ? " but methods" : "");
        check_list(&c, r, false);
        check_list(&c, r, true);
    }
    return c.errors;
}
