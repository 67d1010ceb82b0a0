/* `toolgate check` for issue 22 (see check.h, tg_check_hub): the policy
 * built and judged as serve would build it, and the names each front with
 * several agents exposes, from the same pure cores the runtime uses
 * (router/auth/policy.h, router/codec/expose.h), so what check shows is
 * what a caller gets.
 *
 * check starts no agent: an agent's tools are the keys of agents[].tools.
 * For the policy that knowledge is partial by nature, so it only ever
 * feeds warnings (tg_policy_check judges a tools glob dead only when every
 * family the rule applies to is known, and check knows no prompts nor
 * resources: a tools glob is judged only in a rule whose methods are
 * tools/call alone). An agents entry naming no agent is an error: the
 * agent ids are all known.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/auth/policy.h"
#include "router/cli/check.h"

/* Keep one finding (counted either way; past TG_CHECK_FINDINGS_MAX only
 * counted). */
__attribute__((format(printf, 4, 5))) static void finding(tg_check_hub_t *h, bool error,
                                                          bool policy, const char *fmt, ...)
{
    va_list ap;

    if (error)
        h->errors++;
    else
        h->warnings++;
    if (h->nfind >= TG_CHECK_FINDINGS_MAX) {
        h->dropped++;
        return;
    }
    tg_check_finding_t *f = &h->find[h->nfind++];
    f->error = error;
    f->policy = policy;
    va_start(ap, fmt);
    vsnprintf(f->line, sizeof f->line, fmt, ap);
    va_end(ap);
}

/* ---- the policy ---- */

static void on_policy_note(void *arg, tg_policy_sev_t sev, const char *where, const char *msg)
{
    finding(arg, sev == TG_POLICY_ERROR, true, "%s: %s", where, msg);
}

/* Build cfg->policy as the router does and judge it with what check
 * knows. -EINVAL (<err> set by tg_policy_from_json) or -ENOMEM. */
static int check_policy(tg_check_hub_t *h, const tg_config_t *cfg, tg_err_t *err)
{
    tg_policy_t *p = NULL;
    int rc = tg_policy_from_json(&p, cfg->policy, err);

    if (rc < 0)
        return rc;
    if ((rc = tg_policy_supported(p, err)) < 0) {
        tg_policy_free(p); /* serve and wrap refuse it alike */
        return rc;
    }
    h->has_policy = true;
    h->policy_deny = p->def == TG_POLICY_DENY;
    h->policy_rules = p->nrules;

    const char **callers = calloc(cfg->ncallers + 1, sizeof *callers);
    tg_policy_agent_known_t *ags = calloc(cfg->nagents + 1, sizeof *ags);
    const char ***tools = calloc(cfg->nagents + 1, sizeof *tools);
    rc = callers && ags && tools ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < cfg->ncallers; i++)
        callers[i] = cfg->callers[i].name;
    for (size_t i = 0; rc == 0 && i < cfg->nagents; i++) {
        const tg_agent_cfg_t *a = &cfg->agents[i];
        ags[i].id = a->id;
        if (a->ntools == 0)
            continue; /* its tools are not known: nothing is judged dead on them */
        if (!(tools[i] = calloc(a->ntools, sizeof *tools[i]))) {
            rc = -ENOMEM;
            break;
        }
        for (size_t t = 0; t < a->ntools; t++)
            tools[i][t] = a->tools[t].name;
        ags[i].names[TG_POLICY_M_TOOLS] = tools[i];
        ags[i].nnames[TG_POLICY_M_TOOLS] = a->ntools;
    }
    if (rc == 0) {
        tg_policy_known_t k = {.callers = callers,
                               .ncallers = cfg->ncallers,
                               .agents = ags,
                               .nagents = cfg->nagents};
        (void)tg_policy_check(p, &k, on_policy_note, h);
    }
    for (size_t i = 0; tools && i < cfg->nagents; i++)
        free(tools[i]);
    free(tools);
    free(ags);
    free(callers);
    tg_policy_free(p);
    if (rc < 0)
        tg_err_set(err, rc, "out of memory");
    return rc;
}

/* ---- the exposed names ---- */

static bool name_byte_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

/* Why tg_expose_name rewrites prefix "__" tool: over TG_EXPOSE_NAME_MAX
 * bytes (shortened), a byte outside [A-Za-z0-9_.-] (escaped). */
static void rewrite_why(tg_check_exposed_t *r, const char *prefix, const char *tool)
{
    size_t plen = strlen(prefix), tlen = strlen(tool);

    r->shortened = (plen ? plen + TG_EXPOSE_SEP_LEN : 0) + tlen > TG_EXPOSE_NAME_MAX;
    for (const char *s = prefix; *s && !r->escaped; s++)
        r->escaped = !name_byte_ok((unsigned char)*s);
    for (const char *s = tool; *s && !r->escaped; s++)
        r->escaped = !name_byte_ok((unsigned char)*s);
}

static const char *prefix_of(const tg_agent_cfg_t *a)
{
    return a->tool_prefix != NULL ? a->tool_prefix : a->id;
}

/* The config path of agent <i> of front <f> ("router.listen[0].agents[1]",
 * or for wrap's front "agents[3]"), into <buf>. */
static void agent_where(char *buf, size_t cap, const tg_config_t *cfg, const tg_check_front_t *f,
                        size_t i)
{
    size_t at = f->all_agents ? (size_t)(f->agents[i] - cfg->agents) : i;
    snprintf(buf, cap, "%s[%zu]", f->path, at);
}

/* The config's own copy of tool <name> of <a> (rows borrow from the
 * config: the table's strings go with it). */
static const char *tool_name(const tg_agent_cfg_t *a, const char *name)
{
    const tg_tool_cfg_t *t = tg_config_tool(a, name, strlen(name));
    return t != NULL ? t->name : "?";
}

/* Expose every known tool of front <f>'s agents in one table, as the
 * runtime fills its table (tg_expose_add, agent by agent in the front's
 * order, each with its prefix), and keep its lines and collisions.
 * 0 or -ENOMEM. */
static int expose_front(tg_check_hub_t *h, const tg_config_t *cfg, tg_check_front_t *f)
{
    tg_expose_t t;
    tg_expose_added_t ad;
    char where[64];
    int rc = 0;

    memset(&t, 0, sizeof t);
    if (tg_expose_init(&t, TG_EXPOSE_ENTRIES_MAX) < 0)
        return -ENOMEM;
    f->first = h->nrows;
    for (size_t i = 0; rc == 0 && i < f->nagents; i++) {
        const tg_agent_cfg_t *a = f->agents[i];
        const char *prefix = prefix_of(a);
        for (size_t k = 0; rc == 0 && k < a->ntools; k++) {
            const char *tool = a->tools[k].name;
            int r = tg_expose_add(&t, (uint32_t)i, prefix, strlen(prefix), tool, strlen(tool), &ad);
            if (r == -ENOMEM) {
                rc = r;
            } else if (r < 0) {
                agent_where(where, sizeof where, cfg, f, i);
                finding(h, false, false, "%s: tool \"%s\" of agent %s is not exposed: %s", where,
                        tool, a->id,
                        r == -ENOSPC ? "the front already exposes the most names one table holds"
                                     : strerror(-r));
            }
        }
    }
    for (size_t e = 0; rc == 0 && e < tg_expose_count(&t); e++) {
        const tg_expose_ent_t *ent = tg_expose_at(&t, e);
        const tg_agent_cfg_t *a = f->agents[ent->agent];
        const tg_expose_ent_t *own = ent->hidden ? tg_expose_lookup(&t, ent->key, ent->key_len)
                                                 : NULL;
        const tg_agent_cfg_t *keeper = own != NULL ? f->agents[own->agent] : NULL;
        f->names++;
        f->rewritten += ent->rewritten;
        f->hidden += ent->hidden;
        if (ent->hidden) {
            agent_where(where, sizeof where, cfg, f, ent->agent);
            finding(h, false, false,
                    "%s: tool \"%s\" of agent %s is hidden on %s: its exposed name \"%s\" is "
                    "kept by %s/%s, earlier in the list (give one of them a tool_prefix)",
                    where, ent->val, a->id, f->label, ent->key, keeper ? keeper->id : "?",
                    keeper ? own->val : "?");
        }
        if (h->nrows >= TG_CHECK_EXPOSED_MAX) {
            f->more++;
            continue;
        }
        tg_check_exposed_t *r = &h->rows[h->nrows++];
        f->n++;
        snprintf(r->name, sizeof r->name, "%s", ent->key);
        r->agent = a->id;
        r->tool = tool_name(a, ent->val);
        r->rewritten = ent->rewritten;
        if (r->rewritten)
            rewrite_why(r, prefix_of(a), r->tool);
        r->hidden = ent->hidden;
        if (keeper != NULL) {
            r->kept_by = keeper->id;
            r->kept_tool = tool_name(keeper, own->val);
        }
    }
    tg_expose_free(&t);
    return rc;
}

static const tg_agent_cfg_t *agent_by_id(const tg_config_t *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->nagents; i++)
        if (strcmp(cfg->agents[i].id, id) == 0)
            return &cfg->agents[i];
    return NULL;
}

/* The fronts that expose prefixed names: each listener with "agents", in
 * the order of its list (the runtime's hub legs); without listeners (wrap)
 * and with several agents, the stdio hub of every MCP agent in config
 * order (router/dialect/mcp/engine.c, accept_stdio_hub). */
static int expose_all(tg_check_hub_t *h, const tg_config_t *cfg)
{
    h->fronts = calloc(cfg->nlisten + 1, sizeof *h->fronts);
    if (!h->fronts)
        return -ENOMEM;
    for (size_t l = 0; l < cfg->nlisten; l++) {
        const tg_listen_cfg_t *lc = &cfg->listen[l];
        if (lc->nagents == 0)
            continue;
        tg_check_front_t *f = &h->fronts[h->nfronts++];
        if (!(f->agents = calloc(lc->nagents, sizeof *f->agents)))
            return -ENOMEM;
        for (size_t i = 0; i < lc->nagents; i++) {
            const tg_agent_cfg_t *a = agent_by_id(cfg, lc->agents[i]);
            if (a != NULL) /* validation made sure it is there */
                f->agents[f->nagents++] = a;
        }
        if (lc->unix_path != NULL)
            snprintf(f->label, sizeof f->label, "router.listen[%zu] (unix %s)", l, lc->unix_path);
        else
            snprintf(f->label, sizeof f->label, "router.listen[%zu] (http %s%s)", l,
                     lc->http_addr ? lc->http_addr : "?",
                     lc->http_path ? lc->http_path : TG_HTTP_DEF_PATH);
        snprintf(f->path, sizeof f->path, "router.listen[%zu].agents", l);
        int rc = expose_front(h, cfg, f);
        if (rc < 0)
            return rc;
    }
    if (cfg->nlisten > 0 || cfg->nagents < 2)
        return 0;
    tg_check_front_t *f = &h->fronts[h->nfronts++];
    if (!(f->agents = calloc(cfg->nagents, sizeof *f->agents)))
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nagents; i++)
        if (cfg->agents[i].dialect == TG_DIALECT_MCP)
            f->agents[f->nagents++] = &cfg->agents[i];
    f->all_agents = true;
    snprintf(f->label, sizeof f->label, "wrap (stdio, every mcp agent)");
    snprintf(f->path, sizeof f->path, "agents");
    if (f->nagents == 0) {
        h->nfronts--;
        free(f->agents);
        f->agents = NULL;
        return 0;
    }
    return expose_front(h, cfg, f);
}

void tg_check_hub_free(tg_check_hub_t *h)
{
    for (size_t i = 0; h->fronts && i < h->nfronts; i++)
        free(h->fronts[i].agents);
    free(h->fronts);
    free(h->find);
    free(h->rows);
    memset(h, 0, sizeof *h);
}

int tg_check_hub(tg_check_hub_t *h, const tg_config_t *cfg, tg_err_t *err)
{
    int rc;

    memset(h, 0, sizeof *h);
    h->find = calloc(TG_CHECK_FINDINGS_MAX, sizeof *h->find);
    h->rows = calloc(TG_CHECK_EXPOSED_MAX, sizeof *h->rows);
    rc = h->find && h->rows ? 0 : tg_err_set(err, -ENOMEM, "out of memory");
    if (rc == 0 && cfg->policy != NULL)
        rc = check_policy(h, cfg, err);
    if (rc == 0 && (rc = expose_all(h, cfg)) < 0)
        tg_err_set(err, rc, "out of memory");
    if (rc < 0)
        tg_check_hub_free(h);
    return rc;
}

/* ---- text ---- */

static void text_findings(FILE *out, const tg_check_hub_t *h, bool policy)
{
    for (size_t i = 0; i < h->nfind; i++)
        if (h->find[i].policy == policy)
            fprintf(out, "  %s: %s\n", h->find[i].error ? "error" : "warning", h->find[i].line);
}

static void text_row(FILE *out, const tg_check_exposed_t *r)
{
    fprintf(out, "  %s -> %s/%s", r->name, r->agent, r->tool);
    if (r->rewritten)
        fprintf(out, "  (rewritten: %s%s%s)", r->shortened ? "shortened to 64 bytes" : "",
                r->shortened && r->escaped ? ", " : "",
                r->escaped ? "bytes outside [A-Za-z0-9_.-] escaped" : "");
    if (r->hidden)
        fprintf(out, "  (hidden: collision, %s/%s keeps the name)", r->kept_by ? r->kept_by : "?",
                r->kept_tool ? r->kept_tool : "?");
    fputc('\n', out);
}

void tg_check_hub_text(FILE *out, const tg_check_hub_t *h)
{
    if (h->has_policy) {
        fprintf(out, "\npolicy: default %s, %zu rule%s (tools known to check: agents[].tools)\n",
                h->policy_deny ? "deny" : "allow", h->policy_rules,
                h->policy_rules == 1 ? "" : "s");
        text_findings(out, h, true);
    }
    for (size_t i = 0; i < h->nfronts; i++) {
        const tg_check_front_t *f = &h->fronts[i];
        fprintf(out, "\nexposed names on %s: %zu name%s, %zu rewritten, %zu hidden\n", f->label,
                f->names, f->names == 1 ? "" : "s", f->rewritten, f->hidden);
        for (size_t k = 0; k < f->n; k++)
            text_row(out, &h->rows[f->first + k]);
        if (f->more > 0)
            fprintf(out, "  ... %zu more\n", f->more);
        for (size_t k = 0; k < f->nagents; k++)
            if (f->agents[k]->ntools == 0)
                fprintf(out, "  %s: no tools known (check lists agents[].tools; it starts no "
                             "agent)\n",
                        f->agents[k]->id);
    }
    text_findings(out, h, false);
    if (h->dropped > 0)
        fprintf(out, "  (%zu more findings)\n", h->dropped);
}

/* ---- JSON ---- */

static json_t *json_findings(const tg_check_hub_t *h, bool policy, bool error)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < h->nfind; i++)
        if (h->find[i].policy == policy && h->find[i].error == error)
            json_array_append_new(a, json_string(h->find[i].line));
    return a;
}

static json_t *json_row(const tg_check_exposed_t *r)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:b,s:b}", "name", r->name, "agent", r->agent, "tool",
                          r->tool, "rewritten", r->rewritten, "hidden", r->hidden);
    if (o && r->rewritten)
        json_object_set_new(o, "rewritten_why",
                            json_pack("{s:b,s:b}", "shortened", r->shortened, "escaped",
                                      r->escaped));
    if (o && r->hidden)
        json_object_set_new(o, "kept_by",
                            json_pack("{s:s,s:s}", "agent", r->kept_by ? r->kept_by : "?", "tool",
                                      r->kept_tool ? r->kept_tool : "?"));
    return o;
}

int tg_check_hub_json(json_t *root, const tg_check_hub_t *h)
{
    json_t *fronts = json_array();

    if (!fronts)
        return -ENOMEM;
    if (h->has_policy &&
        json_object_set_new(root, "policy",
                            json_pack("{s:s,s:I,s:o,s:o}", "default",
                                      h->policy_deny ? "deny" : "allow", "rules",
                                      (json_int_t)h->policy_rules, "errors",
                                      json_findings(h, true, true), "warnings",
                                      json_findings(h, true, false))) < 0) {
        json_decref(fronts);
        return -ENOMEM;
    }
    for (size_t i = 0; i < h->nfronts; i++) {
        const tg_check_front_t *f = &h->fronts[i];
        json_t *names = json_array(), *ids = json_array();
        for (size_t k = 0; names && k < f->n; k++)
            json_array_append_new(names, json_row(&h->rows[f->first + k]));
        for (size_t k = 0; ids && k < f->nagents; k++)
            json_array_append_new(ids, json_string(f->agents[k]->id));
        json_array_append_new(fronts, json_pack("{s:s,s:s,s:o*,s:I,s:I,s:I,s:o*,s:I}", "front",
                                                f->label, "path", f->path, "agents", ids, "total",
                                                (json_int_t)f->names, "rewritten",
                                                (json_int_t)f->rewritten, "hidden",
                                                (json_int_t)f->hidden, "names", names, "more",
                                                (json_int_t)f->more));
    }
    json_t *o = json_pack("{s:o,s:o,s:I}", "fronts", fronts, "warnings",
                          json_findings(h, false, false), "more_findings", (json_int_t)h->dropped);
    return o != NULL && json_object_set_new(root, "exposed", o) == 0 ? 0 : -ENOMEM;
}
