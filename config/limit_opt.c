/* The command line's changes to a loaded config: --limit KEY=VALUE (the
 * key table's rows with a --limit name, and tools.NAME.KEY) and wrap's
 * "-- CMD ARGS...".
 *
 * --limit on an agent with a manifest sets the operator's value and runs
 * the merge again, so the manifest's request still wins where it is
 * stricter (config/manifest.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"
#include "config/manifest.h"

#define TOOLS_PFX "tools."
#define TOOL_ROWS "agents[].tools.*"

int tg_config_set_command(tg_config_t *cfg, size_t agent_idx, char *const argv[], tg_err_t *err)
{
    char **copy;

    if (agent_idx >= cfg->nagents)
        return tg_err_set(err, -1, "no agent %zu", agent_idx);
    if (!argv || !argv[0] || !argv[0][0])
        return tg_err_set(err, -1, "expected a command to run");
    copy = tg__cfg_argv_dup(argv);
    if (!copy)
        return tg_err_set(err, -1, "out of memory");
    tg__cfg_argv_free(cfg->agents[agent_idx].command);
    cfg->agents[agent_idx].command = copy;
    return 0;
}

/* The --limit rows: a tool's (tools.NAME.KEY) or the others. */
static bool cli_row(const tg_cfg_key_t *k, bool tool)
{
    return k->cli && tg_cfg_key_under(k, TOOL_ROWS) == tool;
}

/* The row for --limit key <key> (<len> bytes), or NULL. */
static const tg_cfg_key_t *cli_find(const char *key, size_t len, bool tool)
{
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        const char *name = tg_cfg_key_cli(k);
        if (cli_row(k, tool) && strlen(name) == len && memcmp(name, key, len) == 0)
            return k;
    }
    return NULL;
}

/* The --limit keys in their order. */
static void cli_list(char *buf, size_t cap, bool tool)
{
    bool more = true;

    buf[0] = '\0';
    for (unsigned place = 1; more; place++) {
        more = false;
        for (size_t i = 0; i < tg_cfg_nkeys; i++) {
            if (cli_row(&tg_cfg_keys[i], tool) && tg_cfg_keys[i].cli == place) {
                tg__cfg_list_add(buf, cap, tg_cfg_key_cli(&tg_cfg_keys[i]));
                more = true;
            }
        }
    }
}

/* Parse <value> for row <k> into <v>: a value with a unit, a choice, or a
 * string the row's check accepts. The message tail in <msg> on failure. */
static int parse_value(const tg_cfg_key_t *k, const char *value, tg_cfg_val_t *v, char *msg,
                       size_t cap)
{
    int i;

    memset(v, 0, sizeof *v);
    if (tg_ktype_has_unit(k->type))
        return tg__cfg_parse_text(k, value, v, msg, cap);
    if (k->type == TG_KT_ENUM) {
        i = tg__cfg_parse_choice(k, value, strlen(value),
                                 (k->flags & TG_KF_CLI_VALID) ? "valid" : NULL, msg, cap);
        v->u = (uint64_t)i;
        return i < 0 ? -1 : 0;
    }
    return k->check ? k->check(value, strlen(value), msg, cap) : 0;
}

/* Set row <k> to <v> (or to string <value>) in agent <a>'s scope <lim>. */
static int set_value(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim,
                     const tg_cfg_key_t *k, const tg_cfg_val_t *v, const char *value)
{
    tg_manifest_t *m = a->manifest;
    tg_cfg_at_t at = {cfg, a, lim, &a->res, NULL};

    if (k->type == TG_KT_STRING)
        return tg__cfg_key_set_str(k, &at, value);
    if (m && lim == &a->lim && (k->flags & TG_KF_LIMIT) && k->obj != TG_KO_CFG) {
        /* The operator's value, then the merge again. */
        at.lim = &m->op;
        at.res = &m->op_res;
        tg__cfg_key_set(k, &at, v, TG_SRC_CLI);
        tg_manifest_merge(m, &a->lim, &a->res);
        return 0;
    }
    tg__cfg_key_set(k, &at, v, TG_SRC_CLI);
    return 0;
}

/* tools.NAME.KEY: the tool's name and the row of its KEY. */
static int tool_key(const char *kv, const char *key, size_t klen, const char **name, size_t *nlen,
                    const tg_cfg_key_t **k, tg_err_t *err)
{
    const char *eq = key + klen, *dot = NULL;
    char q[QUOTED_MAX], list[LIST_MAX];

    *name = key + strlen(TOOLS_PFX);
    /* The key is after the last dot: tool names may hold dots. */
    for (const char *p = *name; p < eq; p++)
        if (*p == '.')
            dot = p;
    if (!dot || dot == *name)
        return tg_err_set(err, -1,
                          "--limit %s: %.*s: expected tools.NAME.KEY, e.g. "
                          "tools.web.rate_limit=10/minute",
                          kv, (int)klen, key);
    *nlen = (size_t)(dot - *name);
    if (!tg_config_tool_name_ok(*name, *nlen)) {
        tg__cfg_quote(q, sizeof q, *name, *nlen);
        return tg_err_set(err, -1,
                          "--limit %s: %.*s: %s is not a tool name (expected 1 to %d of "
                          "%s)",
                          kv, (int)klen, key, q, TG_NAME_MAX, tg__cfg_name_chars_tool);
    }
    if ((*k = cli_find(dot + 1, (size_t)(eq - dot - 1), true)))
        return 0;
    cli_list(list, sizeof list, true);
    tg__cfg_quote(q, sizeof q, dot + 1, (size_t)(eq - dot - 1));
    return tg_err_set(err, -1, "--limit %s: unknown tool key %s (allowed: %s)", kv, q, list);
}

int tg_config_apply_limit(tg_config_t *cfg, size_t agent_idx, const char *kv, tg_err_t *err)
{
    const char *eq = kv ? strchr(kv, '=') : NULL, *key = kv, *value, *name = NULL;
    size_t klen, nlen = 0;
    const tg_cfg_key_t *k;
    tg_agent_cfg_t *a;
    tg_exec_limits_t *lim;
    char list[LIST_MAX], msg[TG_ERR_MAX], q[QUOTED_MAX];
    tg_cfg_val_t val;
    bool tool;

    if (!eq || eq == kv)
        return tg_err_set(err, -1, "--limit %s: expected KEY=VALUE, e.g. rate_limit=100/minute",
                          kv ? kv : "");
    if (agent_idx >= cfg->nagents)
        return tg_err_set(err, -1, "--limit %s: no agent %zu", kv, agent_idx);
    a = &cfg->agents[agent_idx];
    klen = (size_t)(eq - kv);
    value = eq + 1;
    tool = klen > strlen(TOOLS_PFX) && memcmp(key, TOOLS_PFX, strlen(TOOLS_PFX)) == 0;
    if (tool && tool_key(kv, key, klen, &name, &nlen, &k, err) < 0)
        return -1;
    if (!tool && !(k = cli_find(key, klen, false))) {
        cli_list(list, sizeof list, false);
        tg__cfg_list_add(list, sizeof list, "tools.NAME.KEY");
        tg__cfg_quote(q, sizeof q, key, klen);
        return tg_err_set(err, -1, "--limit %s: unknown key %s (allowed: %s)", kv, q, list);
    }
    if (parse_value(k, value, &val, msg, sizeof msg) < 0)
        return tg_err_set(err, -1, "--limit %s: %.*s: %s", kv, (int)klen, key, msg);
    lim = &a->lim;
    if (tool) {
        tg_tool_cfg_t *t = tg__cfg_tool_get_or_add(a, name, nlen);
        if (!t)
            return tg_err_set(err, -1,
                              "--limit %s: cannot add tool (out of memory or more than "
                              "%d tools)",
                              kv, TG_CFG_TOOLS_MAX);
        lim = &t->lim;
    }
    if (set_value(cfg, a, lim, k, &val, value) < 0)
        return tg_err_set(err, -1, "--limit %s: out of memory", kv);
    return 0;
}
