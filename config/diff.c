/* Two configs compared through the key table (see diff.h).
 *
 * The walk visits the table's rows as the document nests them: the
 * members of an object in table order, each followed by its own members,
 * arrays element by element. A row with a value in the model (an offset,
 * keys.h's tg_cfg_at_t) is compared by the table's own readers; the rows
 * whose value is not a plain field (lists, maps, arrays, an object's
 * presence) have a comparator below, named by path. What is left is a
 * section (compared through its members) or a key checked and not kept;
 * tests/test_cfg_diff.c changes every row of the table and checks that
 * the walk names it.
 */
#include "config/diff.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>
#include <string.h>

#include "config/keys.h"
#include "config/manifest.h"

_Static_assert(TG_NEED_LIVE == TG_RELOAD_LIVE + 1 && TG_NEED_AGENT == TG_RELOAD_AGENT + 1 &&
                   TG_NEED_RESTART == TG_RELOAD_RESTART + 1,
               "a need is its reload class + 1");

/* Rows [lo, hi) of the table. */
typedef struct span {
    size_t lo, hi;
} span_t;

typedef struct walk {
    tg_cfg_change_t *all;
    tg_cfg_change_t *agents; /* the caller's per-agent verdicts, <nagents> of them */
    size_t nagents;
    tg_cfg_change_t *agent;   /* the verdict of the agent being walked, or NULL */
    char key[TG_CFG_KEY_MAX]; /* the path being walked, in config syntax */
    size_t len;
} walk_t;

/* Append to the path being walked; the length to pop back to. A path too
 * long for TG_CFG_KEY_MAX is cut (it still starts with the section). */
__attribute__((format(printf, 2, 3))) static size_t push(walk_t *w, const char *fmt, ...)
{
    size_t mark = w->len;
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(w->key + w->len, sizeof w->key - w->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        w->len += (size_t)n < sizeof w->key - w->len ? (size_t)n : sizeof w->key - w->len - 1;
    return mark;
}

static void pop(walk_t *w, size_t mark)
{
    w->len = mark;
    w->key[mark] = '\0';
}

static void note(tg_cfg_change_t *c, tg_cfg_need_t need, const char *key)
{
    /* Document order: of the keys that need the most, the first stays. */
    if (c == NULL || need <= c->need)
        return;
    c->need = need;
    snprintf(c->key, sizeof c->key, "%s", key);
}

/* Row <k> changed at the path being walked. */
static void changed(walk_t *w, const tg_cfg_key_t *k)
{
    tg_cfg_need_t need = (tg_cfg_need_t)(k->reload + 1);

    note(w->all, need, w->key);
    note(w->agent, need, w->key);
}

static bool str_same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Lists as the model holds them: NULL-terminated, NULL for none. The
 * first entry that differs, from <b> when it has one, else <a>'s; NULL
 * when the lists are the same. */
static const char *list_diff(char *const *a, char *const *b)
{
    for (; a != NULL && *a != NULL && b != NULL && *b != NULL; a++, b++)
        if (strcmp(*a, *b) != 0)
            return *b;
    if (b != NULL && *b != NULL)
        return *b;
    return a != NULL ? *a : NULL;
}

/* The value of row <k> (its field in the model) is the same in <a> and
 * <b>. A source alone changes what a limit means (a tool's or caller's
 * limit is unset while its source is the default) and what `check` and
 * denials report, but nothing bound to a socket or file: for a key that
 * needs a restart only the value counts. */
static bool value_same(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    if (k->type == TG_KT_STRING)
        return str_same(tg_cfg_key_str(k, a), tg_cfg_key_str(k, b));
    tg_cfg_val_t x = tg_cfg_key_get(k, a), y = tg_cfg_key_get(k, b);
    return x.u == y.u && x.rate.count == y.rate.count && x.rate.period_ms == y.rate.period_ms &&
           (x.src == y.src || k->reload == TG_RELOAD_RESTART);
}

/* The rows below <parent> within <in> (they all are: a row below a
 * member is below its object). Empty: lo == hi. */
static span_t span_below(const char *parent, span_t in)
{
    span_t s = {0, 0};

    for (size_t i = in.lo; i < in.hi; i++) {
        if (!tg_cfg_key_under(&tg_cfg_keys[i], parent))
            continue;
        if (s.hi == 0)
            s.lo = i;
        s.hi = i + 1;
    }
    return s;
}

static void walk(walk_t *w, const char *parent, span_t sp, const tg_cfg_at_t *a,
                 const tg_cfg_at_t *b);

/* ---- arrays: by position ---- */

typedef void item_fn(tg_cfg_at_t *at, size_t i);

static void listen_item(tg_cfg_at_t *at, size_t i)
{
    at->item = &at->cfg->listen[i];
}

static void sink_item(tg_cfg_at_t *at, size_t i)
{
    at->item = &at->cfg->audit_sinks[i];
}

static void agent_item(tg_cfg_at_t *at, size_t i)
{
    at->agent = &at->cfg->agents[i];
    at->lim = &at->agent->lim;
    at->res = &at->agent->res;
}

static void caller_item(tg_cfg_at_t *at, size_t i)
{
    at->item = &at->cfg->callers[i];
    at->lim = &at->cfg->callers[i].lim;
}

/* The arrays of objects: where their elements and count live. */
static const struct {
    const char *path;
    size_t count_off; /* the size_t counting them in tg_config_t */
    item_fn *item;
} arrays[] = {
    {"router.listen", offsetof(tg_config_t, nlisten), listen_item},
    {"audit.sinks", offsetof(tg_config_t, naudit_sinks), sink_item},
    {"agents", offsetof(tg_config_t, nagents), agent_item},
    {"callers", offsetof(tg_config_t, ncallers), caller_item},
};

static size_t count_at(const tg_config_t *cfg, size_t off)
{
    size_t n;

    memcpy(&n, (const char *)cfg + off, sizeof n);
    return n;
}

/* Array row <k>: the elements both configs have, by position, then a
 * count that differs as a change of the first element only one has. */
static void cmp_array(walk_t *w, const tg_cfg_key_t *k, span_t sp, const tg_cfg_at_t *a,
                      const tg_cfg_at_t *b)
{
    char elem[TG_CFG_KEY_MAX];
    size_t t = 0;

    while (t + 1 < sizeof arrays / sizeof arrays[0] && strcmp(arrays[t].path, k->path) != 0)
        t++; /* own[] gives cmp_array only these rows */
    size_t na = count_at(a->cfg, arrays[t].count_off), nb = count_at(b->cfg, arrays[t].count_off);
    size_t n = na < nb ? na : nb;
    snprintf(elem, sizeof elem, "%s[]", k->path);
    sp = span_below(elem, sp);
    for (size_t i = 0; i < n; i++) {
        tg_cfg_at_t ea = *a, eb = *b;
        tg_cfg_change_t *outer = w->agent;
        size_t mark = push(w, "[%zu]", i);
        arrays[t].item(&ea, i);
        arrays[t].item(&eb, i);
        if (arrays[t].item == agent_item)
            w->agent = i < w->nagents ? &w->agents[i] : NULL;
        walk(w, elem, sp, &ea, &eb);
        w->agent = outer;
        pop(w, mark);
    }
    if (na != nb) {
        size_t mark = push(w, "[%zu]", n);
        changed(w, k);
        pop(w, mark);
    }
}

/* agents[].tools: by position and name ("agents[0].tools.web"); a tool
 * renamed, added or removed is a change of the tools at its name. */
static void cmp_tools(walk_t *w, const tg_cfg_key_t *k, span_t sp, const tg_cfg_at_t *a,
                      const tg_cfg_at_t *b)
{
    const tg_agent_cfg_t *x = a->agent, *y = b->agent;
    size_t n = x->ntools < y->ntools ? x->ntools : y->ntools;

    sp = span_below("agents[].tools.*", sp);
    for (size_t j = 0; j < n; j++) {
        size_t mark = push(w, ".%s", y->tools[j].name);
        if (strcmp(x->tools[j].name, y->tools[j].name) != 0) {
            changed(w, k);
            pop(w, mark);
            return;
        }
        tg_cfg_at_t ta = *a, tb = *b;
        ta.lim = &x->tools[j].lim;
        tb.lim = &y->tools[j].lim;
        walk(w, "agents[].tools.*", sp, &ta, &tb);
        pop(w, mark);
    }
    if (x->ntools != y->ntools) {
        size_t mark = push(w, ".%s", (x->ntools > n ? x : y)->tools[n].name);
        changed(w, k);
        pop(w, mark);
    }
}

/* ---- values that are not a plain field: same in <a> and <b>? ---- */

/* router.listen[].mode: a string in the file, a number in the model. */
static bool same_mode(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    return tg_cfg_key_get(k, a).u == tg_cfg_key_get(k, b).u;
}

/* router.listen[].tls: whether TLS is on, or said off; its files are its
 * members. */
static bool same_tls(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_listen_cfg_t *x = a->item, *y = b->item;

    (void)k;
    return (x->tls_cert == NULL) == (y->tls_cert == NULL) && x->tls_off == y->tls_off;
}

static bool same_origins(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_listen_cfg_t *x = a->item, *y = b->item;

    (void)k;
    return list_diff(x->allowed_origins, y->allowed_origins) == NULL;
}

/* router.listen[].agents: the same ids in the same order (the order is
 * the order of precedence when two agents expose one name). */
static bool same_listen_agents(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_listen_cfg_t *x = a->item, *y = b->item;

    (void)k;
    if (x->nagents != y->nagents)
        return false;
    for (size_t i = 0; i < x->nagents; i++)
        if (strcmp(x->agents[i], y->agents[i]) != 0)
            return false;
    return true;
}

/* policy: the object as a whole (its rows are its shape, not fields);
 * json_equal compares objects whatever the order of their keys. */
static bool same_policy(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const json_t *x = a->cfg->policy, *y = b->cfg->policy;

    (void)k;
    return x == y || (x != NULL && y != NULL && json_equal(x, y));
}

static bool same_sink_kind(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_audit_sink_cfg_t *x = a->item, *y = b->item;

    (void)k;
    return x->kind == y->kind;
}

static bool same_command(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    (void)k;
    return list_diff(a->agent->command, b->agent->command) == NULL;
}

static bool same_env_pass(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    (void)k;
    return list_diff(a->agent->env_pass, b->agent->env_pass) == NULL;
}

/* agents[].manifest: the file named (what it asks for is in the agent's
 * effective limits and resources, compared by their own rows). */
static bool same_manifest(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_manifest_t *x = a->agent->manifest, *y = b->agent->manifest;

    (void)k;
    return str_same(x != NULL ? x->given : NULL, y != NULL ? y->given : NULL);
}

static bool same_os(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    (void)k;
    return a->agent->os.set == b->agent->os.set;
}

/* callers[].tokens: digests, compared and never shown. */
static bool same_tokens(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_caller_cfg_t *x = a->item, *y = b->item;

    (void)k;
    return x->ntokens == y->ntokens &&
           (x->ntokens == 0 || memcmp(x->tokens, y->tokens, x->ntokens * sizeof *x->tokens) == 0);
}

static bool same_jwt(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b)
{
    const tg_caller_cfg_t *x = a->item, *y = b->item;

    (void)k;
    return x->has_jwt == y->has_jwt;
}

/* agents[].env.set: "NAME=VALUE" entries; the key names the variable,
 * never its value (it may be a secret). */
static void cmp_env_set(walk_t *w, const tg_cfg_key_t *k, span_t sp, const tg_cfg_at_t *a,
                        const tg_cfg_at_t *b)
{
    const char *e = list_diff(a->agent->env_set, b->agent->env_set);

    (void)sp;
    if (e == NULL)
        return;
    size_t mark = push(w, ".%.*s", (int)strcspn(e, "="), e);
    changed(w, k);
    pop(w, mark);
}

typedef bool same_fn(const tg_cfg_key_t *k, const tg_cfg_at_t *a, const tg_cfg_at_t *b);
typedef void cmp_fn(walk_t *w, const tg_cfg_key_t *k, span_t sp, const tg_cfg_at_t *a,
                    const tg_cfg_at_t *b);

/* The rows compared here rather than as a field: by a predicate, or by a
 * comparator that names what changed below the row (an element, a tool, a
 * variable). */
static const struct {
    const char *path;
    same_fn *same;
    cmp_fn *cmp;
} own[] = {
    {"router.listen", NULL, cmp_array},
    {"router.listen[].mode", same_mode, NULL},
    {"router.listen[].tls", same_tls, NULL},
    {"router.listen[].agents", same_listen_agents, NULL},
    {"router.listen[].allowed_origins", same_origins, NULL},
    {"audit.sinks", NULL, cmp_array},
    {"audit.sinks[].kind", same_sink_kind, NULL},
    {"agents", NULL, cmp_array},
    {"agents[].command", same_command, NULL},
    {"agents[].tools", NULL, cmp_tools},
    {"agents[].env.pass", same_env_pass, NULL},
    {"agents[].env.set", NULL, cmp_env_set},
    {"agents[].manifest", same_manifest, NULL},
    {"agents[].opensentience", same_os, NULL},
    {"callers", NULL, cmp_array},
    {"callers[].tokens", same_tokens, NULL},
    {"callers[].jwt", same_jwt, NULL},
    {"policy", same_policy, NULL},
};

/* Compare row <k>'s own value (not its members). */
static void cmp_row(walk_t *w, const tg_cfg_key_t *k, span_t sp, const tg_cfg_at_t *a,
                    const tg_cfg_at_t *b)
{
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (strcmp(own[i].path, k->path) != 0)
            continue;
        if (own[i].cmp != NULL)
            own[i].cmp(w, k, sp, a, b);
        else if (!own[i].same(k, a, b))
            changed(w, k);
        return;
    }
    /* A field of the model; or none: a section (compared through its
     * members), a key checked and not kept (a resource's request, a scope
     * with one choice). */
    if (k->obj != TG_KO_NONE && !value_same(k, a, b))
        changed(w, k);
}

/* ---- the walk ---- */

/* The members of the object at table path <parent> (rows <sp>), each
 * then its own members; w->key is the object's path in config syntax. */
static void walk(walk_t *w, const char *parent, span_t sp, const tg_cfg_at_t *a,
                 const tg_cfg_at_t *b)
{
    for (size_t i = sp.lo; i < sp.hi; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        if (!tg_cfg_key_is_child(k, parent))
            continue;
        size_t mark = push(w, w->len > 0 ? ".%s" : "%s", tg_cfg_key_name(k));
        cmp_row(w, k, sp, a, b);
        span_t sub = span_below(k->path, sp);
        if (sub.lo < sub.hi)
            walk(w, k->path, sub, a, b);
        pop(w, mark);
    }
}

tg_cfg_need_t tg_cfg_diff(const tg_config_t *old, const tg_config_t *cur, tg_cfg_change_t *all,
                          tg_cfg_change_t *agents, size_t nagents)
{
    tg_cfg_change_t whole;
    walk_t w = {.all = all != NULL ? all : &whole, .agents = agents, .nagents = nagents};
    tg_cfg_at_t a = {.cfg = old}, b = {.cfg = cur};

    w.all->need = TG_NEED_NONE;
    w.all->key[0] = '\0';
    for (size_t i = 0; agents != NULL && i < nagents; i++) {
        agents[i].need = TG_NEED_NONE;
        agents[i].key[0] = '\0';
    }
    walk(&w, "", (span_t){0, tg_cfg_nkeys}, &a, &b);
    return w.all->need;
}
