/* The agents[] section's schema and its manifest interplay: agent ids,
 * commands, environments, tools, resources, the opensentience settings,
 * reading an agent's manifest (and the manifest document's own walk,
 * which takes the same rows), and the agents' checks in
 * tg_config_validate.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"
#include "config/manifest.h"

#define TG_CFG_ENV_MAX 256 /* fixed internal bound: env.pass / env.set entries */

TG_KCHECK(tg__cfg_check_agent_id)
{
    char q[QUOTED_MAX];

    tg__cfg_quote(q, sizeof q, s, len);
    if (!tg__cfg_agent_id_ok(s))
        return tg__cfg_why(-1, msg, cap, "%s is not an agent id (expected 1 to %d of %s)", q,
                           TG_NAME_MAX, tg__cfg_name_chars_agent);
    /* "__" separates prefix and name in an aggregate's exposed names: an
     * id holding it could be a prefix that does not end at the first. */
    if (strstr(s, "__"))
        return tg__cfg_why(-1, msg, cap,
                           "%s holds \"__\", the separator of exposed tool names (expected an id "
                           "without it: write one '_' or '-' there)",
                           q);
    return 0;
}

/* agents[].tool_prefix: tg_cfg_prefix_check's rule, "" allowed. */
TG_KCHECK(tg__cfg_check_tool_prefix)
{
    char q[QUOTED_MAX], why[256];

    if (tg_cfg_prefix_check(s, len, why, sizeof why) == 0)
        return 0;
    tg__cfg_quote(q, sizeof q, s, len);
    return tg__cfg_why(-1, msg, cap, "%s is not a tool prefix: it %s", q, why);
}

TG_KCHECK(tg__cfg_check_abs_path)
{
    (void)len;
    if (s[0] == '/')
        return 0;
    return tg__cfg_why(-1, msg, cap, "\"%s\" is not an absolute path", s);
}

TG_KLOAD(tg__cfg_load_command)
{
    size_t n;
    char **argv;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v,
                                "an array of strings such as [\"/usr/bin/server\", \"--stdio\"]");
    n = json_array_size(v);
    if (n == 0)
        return tg__cfg_at_err(c, false, "expected at least one word (the program to run)");
    if (n > TG_CFG_ARGV_MAX)
        return tg__cfg_at_err(c, false, "%zu words (expected at most %d)", n, TG_CFG_ARGV_MAX);
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i);
        const char *w = tg__cfg_get_str(c, json_array_get(v, i), i == 0);
        tg__cfg_pop(c, pushed);
        if (!w)
            return -1;
    }
    if (!(argv = calloc(n + 1, sizeof *argv)))
        return tg__cfg_at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!(argv[i] = strdup(json_string_value(json_array_get(v, i))))) {
            tg__cfg_argv_free(argv);
            return tg__cfg_at_err(c, false, "out of memory");
        }
    }
    tg__cfg_argv_free(c->agent->command);
    c->agent->command = argv;
    return 0;
}

TG_KLOAD(tg__cfg_load_exec_limits)
{
    c->lim = &c->agent->lim;
    return tg__cfg_want_object(c, v) < 0 ? -1 : tg__cfg_walk(c, v, k->path);
}

TG_KLOAD(tg__cfg_load_tools)
{
    char parent[64];
    const char *name;
    json_t *tv;

    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    snprintf(parent, sizeof parent, "%s.*", k->path);
    json_object_foreach(v, name, tv)
    {
        int pushed = tg__cfg_push_key(c, name), rc;
        size_t len = strlen(name);
        tg_tool_cfg_t *t;
        if (!tg_config_tool_name_ok(name, len)) {
            char q[QUOTED_MAX];
            tg__cfg_quote(q, sizeof q, name, len);
            rc = tg__cfg_at_err(c, true, "%s is not a tool name (expected 1 to %d of %s)", q,
                                TG_NAME_MAX, tg__cfg_name_chars_tool);
        } else if (!(t = tg__cfg_tool_get_or_add(c->agent, name, len))) {
            rc = tg__cfg_at_err(c, true, "cannot add tool (out of memory or more than %d tools)",
                                TG_CFG_TOOLS_MAX);
        } else {
            c->lim = &t->lim;
            rc = tg__cfg_want_object(c, tv) < 0 ? -1 : tg__cfg_walk(c, tv, parent);
        }
        tg__cfg_pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One fleet-wide set of slots per agent: a tool (or caller) asking for
 * its own would silently get none, so it is refused rather than ignored. */
TG_KLOAD(tg__cfg_load_tool_conc_scope)
{
    int i = tg__cfg_get_enum(c, v, k);

    if (i == 1)
        return tg__cfg_at_err(c, false,
                              "\"shared\" is per agent (set concurrency_scope in the "
                              "agent's execution_limits; a tool's max_concurrent_calls "
                              "stays local)");
    return i < 0 ? -1 : 0;
}

/* ---- env: {"pass": ["PATH", ...], "set": {"NAME": "value"}} ---- */

static bool env_name_ok(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

TG_KLOAD(tg__cfg_load_env_pass)
{
    size_t n;
    char **out;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of variable names");
    n = json_array_size(v);
    if (n > TG_CFG_ENV_MAX)
        return tg__cfg_at_err(c, false, "%zu names (expected at most %d)", n, TG_CFG_ENV_MAX);
    if (!(out = calloc(n + 1, sizeof *out)))
        return tg__cfg_at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i);
        const char *name = tg__cfg_get_str(c, json_array_get(v, i), true);
        int rc = name ? 0 : -1;
        if (rc == 0 && !env_name_ok(name))
            rc = tg__cfg_at_err(c, false,
                                "\"%s\" is not a variable name (expected "
                                "[A-Za-z_][A-Za-z0-9_]*)",
                                name);
        if (rc == 0 && !(out[i] = strdup(name)))
            rc = tg__cfg_at_err(c, false, "out of memory");
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            tg__cfg_argv_free(out);
            return -1;
        }
    }
    tg__cfg_argv_free(c->agent->env_pass);
    c->agent->env_pass = out;
    return 0;
}

/* "NAME=value" for member <name> of env.set: its value is never echoed in
 * a message, as it may be a secret. */
static int env_entry(tg_cfg_ctx_t *c, const char *name, const json_t *val, char **out)
{
    size_t len;

    if (!env_name_ok(name))
        return tg__cfg_at_err(c, true, "not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)");
    if (!json_is_string(val))
        return tg__cfg_type_err(c, val, "a string");
    len = strlen(name) + 1 + json_string_length(val) + 1;
    if (!(*out = malloc(len)))
        return tg__cfg_at_err(c, false, "out of memory");
    snprintf(*out, len, "%s=%s", name, json_string_value(val));
    return 0;
}

TG_KLOAD(tg__cfg_load_env_set)
{
    const char *name;
    json_t *val;
    size_t n = 0;
    char **out;

    (void)k;
    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    if (json_object_size(v) > TG_CFG_ENV_MAX)
        return tg__cfg_at_err(c, false, "%zu variables (expected at most %d)", json_object_size(v),
                              TG_CFG_ENV_MAX);
    if (!(out = calloc(json_object_size(v) + 1, sizeof *out)))
        return tg__cfg_at_err(c, false, "out of memory");
    json_object_foreach(v, name, val)
    {
        int pushed = tg__cfg_push_key(c, name), rc = env_entry(c, name, val, &out[n]);
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            tg__cfg_argv_free(out);
            return -1;
        }
        n++;
    }
    tg__cfg_argv_free(c->agent->env_set);
    c->agent->env_set = out;
    return 0;
}

/* ---- resources ----
 *   {"memory": {"limit": "512Mi", "request": "128Mi"}, "cpu": {...},
 *    "pids": {...}, "nofile": {...}, "disk": {...},
 *    "network": "none" | {"limit": "none", "bandwidth_limit": "10Mbps",
 *                         "max_connections": 100}}
 * (agents[].resources and a manifest's "resources"). A "request" is a
 * scheduling hint: toolgate enforces limits, so a request is checked for
 * its unit and bounds and not used otherwise. The rows do all of it but
 * the network's two forms. */
TG_KLOAD(tg__cfg_load_network)
{
    tg_cfg_val_t val;

    if (json_is_string(v)) {
        if (tg__cfg_get_val(c, v, k, &val) < 0)
            return -1;
        tg__cfg_store(c, k, &val);
        return 0;
    }
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "\"none\", \"loopback\", \"full\" or an object");
    return tg__cfg_walk(c, v, k->path);
}

/* ---- manifest, start, opensentience ---- */

/* The file is read once the whole agent is known (load_manifest_file):
 * the operator's limits may come after "manifest" in the object. */
TG_KLOAD(tg__cfg_load_manifest)
{
    const char *s = tg__cfg_get_str(c, v, true);

    (void)k;
    if (!s)
        return -1;
    c->manifest = s;
    return 0;
}

/* Read the current agent's manifest and merge it into the agent. A file
 * that cannot be read is reported at the config's "manifest" value; an
 * error inside the manifest at its own position in the manifest. */
static int load_manifest_file(tg_cfg_ctx_t *c)
{
    tg_manifest_t *m = calloc(1, sizeof *m);
    tg_err_t merr;
    int rc;

    if (!m || !(m->given = strdup(c->manifest)) ||
        !(m->path = tg_manifest_resolve(c->config_path, c->manifest))) {
        tg_manifest_free(m);
        free(m);
        return tg__cfg_at_err(c, false, "out of memory");
    }
    rc = tg_manifest_load_file(m, m->path, &merr);
    if (rc < 0) {
        if (rc == -EINVAL)
            tg_err_set(c->err, -1, "%s", merr.msg);
        else
            tg__cfg_member_err(c, "manifest", "%s", merr.msg);
        tg_manifest_free(m);
        free(m);
        return -1;
    }
    tg_manifest_attach(c->agent, m);
    return 0;
}

TG_KLOAD(tg__cfg_load_start)
{
    if (tg__cfg_load_default(c, v, k) < 0)
        return -1;
    c->agent->start_set = true;
    return 0;
}

TG_KLOAD(tg__cfg_load_os)
{
    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    c->agent->os.set = true;
    return tg__cfg_walk(c, v, k->path);
}

/* ---- agents[] ---- */

static int agent_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    tg_agent_cfg_t *agents = c->items, *a = &agents[i];

    tg__cfg_agent_defaults(a);
    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    c->agent = a;
    c->manifest = NULL;
    if (tg__cfg_walk(c, v, "agents[]") < 0)
        return -1;
    if (c->manifest && load_manifest_file(c) < 0)
        return -1;
    if (!a->id)
        return tg__cfg_at_err(c, false, "missing required key \"id\"");
    for (size_t j = 0; j < i; j++)
        if (strcmp(agents[j].id, a->id) == 0)
            return tg__cfg_member_err(c, "id", "duplicate agent id \"%s\" (also agents[%zu])",
                                      a->id, j);
    return 0;
}

/* The file's agents replace the config's (the default's single agent in
 * wrap mode). */
TG_KLOAD(tg__cfg_load_agents)
{
    static const tg_cfg_array_t agents = {
        "agent", TG_CFG_AGENTS_MAX, false, sizeof(tg_agent_cfg_t), agent_one, tg__cfg_agent_free};
    (void)k;
    return tg__cfg_load_array(c, v, &agents, &c->cfg->agents, &c->cfg->nagents);
}

/* ---- a manifest document ---- */

int tg__config_parse_manifest(const char *name, const char *text, size_t len, tg_exec_limits_t *lim,
                              tg_resources_t *res, tg_err_t *err)
{
    json_error_t jerr;
    json_t *root, *v;
    tg_agent_cfg_t scratch; /* holds no allocation: defaults and values only */
    tg_config_t none;
    const char *key;
    tg_cfg_ctx_t c;
    int rc = 0;

    if (!name)
        name = "manifest";
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tg_err_set(err, -1, "%s:%d:%d: syntax error: %s", name, jerr.line, jerr.column,
                          jerr.text);
    tg__cfg_agent_defaults(&scratch);
    memset(&none, 0, sizeof none);
    tg__cfg_ctx_init(&c, name, text, len, &none, TG_SRC_MANIFEST, err);
    c.agent = &scratch;
    c.mask = TG_KF_MANIFEST; /* what a manifest may ask for */
    if (!json_is_object(root)) {
        rc = tg__cfg_at_err(&c, false, "expected an object at the top level, got %s",
                            tg__cfg_json_noun(root));
    } else {
        /* The rest of the manifest (id, permissions, tools, ...) is not
         * about limits and belongs to other readers. */
        json_object_foreach(root, key, v)
        {
            char path[64];
            const tg_cfg_key_t *k;
            int pushed;
            if (strcmp(key, "resources") != 0 && strcmp(key, "execution_limits") != 0)
                continue;
            snprintf(path, sizeof path, "agents[].%s", key);
            k = tg_cfg_key_find(path);
            pushed = tg__cfg_push_key(&c, key);
            rc = k->load ? k->load(&c, v, k) : tg__cfg_load_default(&c, v, k);
            tg__cfg_pop(&c, pushed);
            if (rc < 0)
                break;
        }
    }
    json_decref(root);
    if (rc < 0)
        return -1;
    *lim = scratch.lim;
    *res = scratch.res;
    return 0;
}

/* ---- validation ---- */

/* The keys that belong to one dialect only, and the opensentience
 * heartbeat's consistency. */
static int check_dialect(const tg_agent_cfg_t *a, size_t i, const char *f, const char *sep,
                         tg_err_t *err)
{
    char t[32], n[32];

    if (a->dialect == TG_DIALECT_MCP) {
        if (a->os.set)
            return tg_err_set(err, -1,
                              "%s%sagents[%zu].opensentience: agent \"%s\" speaks mcp "
                              "(expected \"dialect\": \"opensentience\", or remove the "
                              "key)",
                              f, sep, i, a->id);
        if (a->start_set && a->start == TG_START_EAGER)
            return tg_err_set(err, -1,
                              "%s%sagents[%zu].start: an mcp agent starts one instance "
                              "per caller connection (expected \"on_demand\")",
                              f, sep, i);
        return 0;
    }
    if (a->os.heartbeat_timeout_ms >= a->os.heartbeat_interval_ms)
        return 0;
    tg_unit_fmt_duration(t, (int)sizeof t, a->os.heartbeat_timeout_ms);
    tg_unit_fmt_duration(n, (int)sizeof n, a->os.heartbeat_interval_ms);
    return tg_err_set(err, -1,
                      "%s%sagents[%zu].opensentience.heartbeat_timeout: %s is shorter "
                      "than heartbeat_interval %s (expected at least one interval)",
                      f, sep, i, t, n);
}

/* A tool's own checks: its name, its limits' ranges, and the keys that
 * need another one (a burst its rate, a shared rate a rate and a store). */
static int check_tool(const tg_config_t *cfg, const tg_agent_cfg_t *a, size_t i,
                      const tg_tool_cfg_t *tc, const char *f, const char *sep, tg_err_t *err)
{
    char where[TG_NAME_MAX * 2 + 64];
    tg_cfg_at_t at = {.cfg = cfg, .agent = a, .lim = &tc->lim};

    if (!tc->name || !tg_config_tool_name_ok(tc->name, strlen(tc->name)))
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].tools: a tool name is missing or invalid "
                          "(expected 1 to %d of %s)",
                          f, sep, i, TG_NAME_MAX, tg__cfg_name_chars_tool);
    snprintf(where, sizeof where, "agents[%zu].tools.%s.", i, tc->name);
    if (tg__cfg_check_limits(cfg, &at, "agents[].tools.*", where, err) < 0)
        return -1;
    /* A tool burst without a tool rate would silently reshape the agent's
     * bucket, which the tool scope does not own. */
    if (tc->lim.burst_src != TG_SRC_DEFAULT && tc->lim.rate_src == TG_SRC_DEFAULT)
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].tools.%s.burst: set without a rate_limit "
                          "(expected tools.%s.rate_limit as well)",
                          f, sep, i, tc->name, tc->name);
    if (tc->lim.rate_shared && tc->lim.rate_src == TG_SRC_DEFAULT)
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].tools.%s.rate_scope: \"shared\" without a "
                          "tool rate_limit (expected tools.%s.rate_limit: the tool has "
                          "no bucket of its own to share)",
                          f, sep, i, tc->name, tc->name);
    if (tc->lim.rate_shared && !cfg->store.redis)
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].tools.%s.rate_scope: \"shared\" needs a "
                          "shared store (expected store {\"kind\": \"redis\", \"url\": "
                          "...} or --store URL)",
                          f, sep, i, tc->name);
    return 0;
}

/* Agent <i>'s identity, command and dialect keys. */
static int check_agent_head(const tg_config_t *cfg, size_t i, const char *f, const char *sep,
                            tg_err_t *err)
{
    const tg_agent_cfg_t *a = &cfg->agents[i];

    if (!tg__cfg_agent_id_ok(a->id))
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].id: missing or not an agent id (expected 1 "
                          "to %d of %s)",
                          f, sep, i, TG_NAME_MAX, tg__cfg_name_chars_agent);
    for (size_t j = 0; j < i; j++)
        if (strcmp(cfg->agents[j].id, a->id) == 0)
            return tg_err_set(err, -1,
                              "%s%sagents[%zu].id: duplicate agent id \"%s\" (also "
                              "agents[%zu])",
                              f, sep, i, a->id, j);
    if (!a->command || !a->command[0] || !a->command[0][0])
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].command: no command (expected \"command\" "
                          "in the config or a command after --)",
                          f, sep, i);
    return check_dialect(a, i, f, sep, err);
}

/* resources.network's bandwidth_limit and max_connections (the advisory
 * rows): no backend shapes traffic or counts connections here, so under
 * containment.mode "required" an agent asking for either is refused at
 * load, saying where the value came from and the ways out, rather than
 * at each start. With network "none" the namespace leaves nothing to
 * shape or count (limits/contain.c enforces both through it). */
static int check_network_required(const tg_config_t *cfg, size_t i, const char *f, const char *sep,
                                  tg_err_t *err)
{
    const tg_agent_cfg_t *a = &cfg->agents[i];
    const tg_cfg_at_t at = {.cfg = cfg, .agent = a, .res = &a->res};
    bool from_manifest;
    char val[48];

    if (cfg->containment_mode != TG_CONTAINMENT_REQUIRED || a->res.network == TG_NET_NONE)
        return 0;
    for (size_t r = 0; r < tg_cfg_nkeys; r++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[r];
        tg_cfg_val_t v;
        if (!(k->flags & TG_KF_ADVISORY) || !tg_cfg_key_under(k, "agents[].resources") ||
            !tg_cfg_key_is_set(k, &at))
            continue;
        v = tg_cfg_key_get(k, &at);
        tg_cfg_key_fmt(k, &v, val, sizeof val);
        from_manifest = v.src == TG_SRC_MANIFEST && a->manifest;
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].resources.network.%s: %s%s%s%s cannot be enforced on "
                          "any host (no containment backend %s) and containment.mode is "
                          "\"required\" (expected the key removed%s, network \"none\", or "
                          "containment.mode \"best_effort\", which reports it not enforced)",
                          f, sep, i, tg_cfg_key_name(k), val,
                          from_manifest ? " (asked by manifest " : "",
                          from_manifest ? a->manifest->given : "", from_manifest ? ")" : "",
                          k->type == TG_KT_BANDWIDTH ? "shapes bandwidth" : "counts connections",
                          from_manifest ? " from the manifest" : "");
    }
    return 0;
}

static int check_agent(const tg_config_t *cfg, size_t i, const char *f, const char *sep,
                       tg_err_t *err)
{
    const tg_agent_cfg_t *a = &cfg->agents[i];
    tg_cfg_at_t at = {.cfg = cfg, .agent = a, .lim = &a->lim, .res = &a->res};
    char where[64], b[32], m[32];

    if (check_agent_head(cfg, i, f, sep, err) < 0)
        return -1;
    /* Checked once every source is merged: --store may come after the
     * file (or --limit) that asks for a shared bucket or shared slots.
     * Here, not at start, so that check refuses what wrap and serve do. */
    if (a->rate_shared && !cfg->store.redis)
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].execution_limits.rate_scope: \"shared\" needs a "
                          "shared store (expected store {\"kind\": \"redis\", \"url\": "
                          "...} or --store URL)",
                          f, sep, i);
    if (a->conc_shared && !cfg->store.redis)
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].execution_limits.concurrency_scope: "
                          "\"shared\" needs a shared store (expected store {\"kind\": "
                          "\"redis\", \"url\": ...} or --store URL)",
                          f, sep, i);
    snprintf(where, sizeof where, "agents[%zu].execution_limits.", i);
    if (tg__cfg_check_limits(cfg, &at, "agents[].execution_limits", where, err) < 0)
        return -1;
    snprintf(where, sizeof where, "agents[%zu].resources.", i);
    if (tg__cfg_check_limits(cfg, &at, "agents[].resources", where, err) < 0 ||
        check_network_required(cfg, i, f, sep, err) < 0)
        return -1;
    if (a->backoff_initial_ms == 0 || a->backoff_initial_ms > a->backoff_max_ms) {
        tg_unit_fmt_duration(b, (int)sizeof b, a->backoff_initial_ms);
        tg_unit_fmt_duration(m, (int)sizeof m, a->backoff_max_ms);
        return tg_err_set(err, -1,
                          "%s%sagents[%zu].restart.backoff: %s is not within 1ms to "
                          "max_backoff %s",
                          f, sep, i, b, m);
    }
    for (size_t t = 0; t < a->ntools; t++)
        if (check_tool(cfg, a, i, &a->tools[t], f, sep, err) < 0)
            return -1;
    return 0;
}

TG_KVALID(tg__cfg_validate_agents)
{
    if (cfg->nagents == 0 || !cfg->agents)
        return tg_err_set(err, -1, "%s%sagents: none configured (expected at least one agent)", f,
                          sep);
    for (size_t i = 0; i < cfg->nagents; i++)
        if (check_agent(cfg, i, f, sep, err) < 0)
            return -1;
    /* The config is final (every source merged) and valid: say once what
     * each manifest asked for and did not get. */
    for (size_t i = 0; i < cfg->nagents; i++)
        tg_manifest_notice_capped(&cfg->agents[i]);
    return 0;
}
