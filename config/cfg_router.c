/* The router section's schema: router.* (instance, listeners, admin) and
 * callers[] — what the key table's rows for them cannot say alone (name
 * checks, octal modes, users and groups, arrays with required keys) — and
 * the router's checks in tg_config_validate.
 */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/addr.h"
#include "config/cfg_impl.h"

TG_KCHECK(tg__cfg_check_instance)
{
    char q[QUOTED_MAX];

    if (tg__cfg_name_ok(s, len, true))
        return 0;
    tg__cfg_quote(q, sizeof q, s, len);
    return tg__cfg_why(-1, msg, cap, "%s is not an instance name (expected 1 to %d of %s)", q,
                       TG_NAME_MAX, tg__cfg_name_chars_tool);
}

TG_KCHECK(tg__cfg_check_unix_path)
{
    if (s[0] != '/')
        return tg__cfg_why(-1, msg, cap,
                           "socket path \"%s\" is not absolute (expected e.g. "
                           "/run/toolgate/search.sock)",
                           s);
    if (len >= 108)
        return tg__cfg_why(-1, msg, cap,
                           "socket path is %zu bytes (expected at most 107: the "
                           "sun_path limit)",
                           len);
    return 0;
}

TG_KCHECK(tg__cfg_check_caller_name)
{
    if (tg__cfg_name_ok(s, len, true))
        return 0;
    return tg__cfg_why(-1, msg, cap, "\"%s\" is not a caller name (expected 1 to %d of %s)", s,
                       TG_NAME_MAX, tg__cfg_name_chars_tool);
}

/* ---- router.listen[] ---- */

TG_KLOAD(tg__cfg_load_mode)
{
    const char *s = tg__cfg_get_str(c, v, true);
    tg_cfg_val_t val = {0};
    char *end;

    if (!s)
        return -1;
    val.u = strtoul(s, &end, 8);
    if (*end != '\0' || val.u > k->max || s[0] != '0')
        return tg__cfg_at_err(c, false,
                              "\"%s\" is not a file mode (expected octal such as \"0660\")", s);
    tg__cfg_store(c, k, &val);
    return 0;
}

/* The id of user (or group) <s>, a name or digits. */
static bool lookup_id(const char *s, bool group, int64_t *out)
{
    char buf[4096], *end;
    unsigned long n = strtoul(s, &end, 10);

    if (*end == '\0' && n <= 0x7fffffff) {
        *out = (int64_t)n;
        return true;
    }
    if (group) {
        struct group gr, *res = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof buf, &res) == 0 && res != NULL) {
            *out = (int64_t)gr.gr_gid;
            return true;
        }
        return false;
    }
    struct passwd pw, *res = NULL;
    if (getpwnam_r(s, &pw, buf, sizeof buf, &res) == 0 && res != NULL) {
        *out = (int64_t)pw.pw_uid;
        return true;
    }
    return false;
}

/* owner and group: a name or a number (JSON integer or digits), resolved
 * now so that a typo is a config error, not a failed chown. */
TG_KLOAD(tg__cfg_load_owner)
{
    bool group = strcmp(tg_cfg_key_name(k), "group") == 0;
    const char *what = group ? "group" : "user", *s;
    int64_t id = 0;
    tg_cfg_val_t val = {0};

    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > 0x7fffffff)
            return tg__cfg_at_err(c, false, "%s id %lld is out of range (expected 0..2147483647)",
                                  what, (long long)n);
        id = (int64_t)n;
    } else if (!(s = tg__cfg_get_str(c, v, true))) {
        return -1;
    } else if (!lookup_id(s, group, &id)) {
        return tg__cfg_at_err(
            c, false, "no %s named \"%s\" on this host (expected a %s name or a numeric id)", what,
            s, what);
    }
    val.u = (uint64_t)id;
    tg__cfg_store(c, k, &val);
    return 0;
}

TG_KCHECK(tg__cfg_check_http_addr)
{
    struct sockaddr_storage ss;
    tg_err_t e = {0};

    (void)len;
    if (tg_addr_parse(s, "address", &ss, &e) < 0)
        return tg__cfg_why(-1, msg, cap, "%s", e.msg);
    return 0;
}

TG_KCHECK(tg__cfg_check_http_path)
{
    if (s[0] != '/' || len >= TG_HTTP_PATH_MAX)
        return tg__cfg_why(-1, msg, cap,
                           "\"%.64s\" is not an endpoint path (expected an absolute path under "
                           "%d bytes, e.g. \"/mcp\")",
                           s, TG_HTTP_PATH_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '?' || ch == '#' || ch == '%')
            return tg__cfg_why(-1, msg, cap,
                               "endpoint path \"%.64s\" holds a byte a request path would not "
                               "match literally (expected printable ASCII without ?, # or %%)",
                               s);
    }
    return 0;
}

/* tls: {"cert": FILE, "key": FILE}, or "off". */
TG_KLOAD(tg__cfg_load_tls)
{
    tg_listen_cfg_t *l = c->item;

    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "off") != 0)
            return tg__cfg_at_err(c, false,
                                  "\"%.32s\" is not a TLS setting (expected {\"cert\": FILE, "
                                  "\"key\": FILE} or \"off\")",
                                  json_string_value(v));
        l->tls_off = true;
        return 0;
    }
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "{\"cert\": FILE, \"key\": FILE} or \"off\"");
    if (tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (l->tls_cert == NULL || l->tls_key == NULL)
        return tg__cfg_at_err(c, false, "tls needs both \"cert\" and \"key\" (PEM files)");
    return 0;
}

/* allowed_origins: exact Origin values, "scheme://host[:port]". */
TG_KLOAD(tg__cfg_load_origins)
{
    tg_listen_cfg_t *l = c->item;
    size_t n;
    char **out;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of origins such as \"https://app.example\"");
    n = json_array_size(v);
    if (n > TG_HTTP_ORIGINS_MAX)
        return tg__cfg_at_err(c, false, "%zu origins (expected at most %d)", n,
                              TG_HTTP_ORIGINS_MAX);
    if (!(out = calloc(n + 1, sizeof *out)))
        return tg__cfg_at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i);
        const char *o = tg__cfg_get_str(c, json_array_get(v, i), true);
        int rc = o ? 0 : -1;
        const char *sep = o ? strstr(o, "://") : NULL;
        if (rc == 0 && (sep == NULL || sep == o || sep[3] == '\0' || strchr(sep + 3, '/') ||
                        strlen(o) > 255))
            rc = tg__cfg_at_err(c, false,
                                "\"%.64s\" is not an origin (expected scheme://host[:port], "
                                "no path, e.g. \"https://app.example\")",
                                o);
        if (rc == 0 && !(out[i] = strdup(o)))
            rc = tg__cfg_at_err(c, false, "out of memory");
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            tg__cfg_argv_free(out);
            return -1;
        }
    }
    tg__cfg_argv_free(l->allowed_origins);
    l->allowed_origins = out;
    return 0;
}

static int listen_http_one(tg_cfg_ctx_t *c, tg_listen_cfg_t *l)
{
    struct sockaddr_storage ss;
    tg_err_t e = {0};

    if (l->unix_path)
        return tg__cfg_at_err(c, false,
                              "a listener is \"unix\" or \"http\", not both (make two entries)");
    if (l->dialect != TG_DIALECT_MCP)
        return tg__cfg_at_err(c, false,
                              "an http listener speaks MCP (Streamable HTTP): remove \"dialect\"");
    if (!l->agent)
        return tg__cfg_at_err(c, false, "an http listener needs \"agent\" (agent id)");
    if (!l->http_path && !(l->http_path = strdup(TG_HTTP_DEF_PATH)))
        return tg__cfg_at_err(c, false, "out of memory");
    if (tg_addr_parse(l->http_addr, "address", &ss, &e) == 0 && !tg_addr_loopback(&ss) &&
        !l->tls_cert && !l->tls_off)
        return tg__cfg_at_err(c, false,
                              "http listener %s is not on loopback and has no tls: bearer tokens "
                              "and results would cross the network in clear (add \"tls\": "
                              "{\"cert\": ..., \"key\": ...}, or \"tls\": \"off\" behind a "
                              "TLS-terminating proxy)",
                              l->http_addr);
    return 0;
}

static int listen_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    tg_listen_cfg_t *l = (tg_listen_cfg_t *)c->items + i;

    l->mode = 0660;
    l->owner = l->group = -1;
    c->item = l;
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, "router.listen[]") < 0)
        return -1;
    if (l->http_addr)
        return listen_http_one(c, l);
    if (l->http_path || l->tls_cert || l->tls_off || l->allowed_origins || l->max_header_bytes ||
        l->max_requests || l->header_timeout_ms || l->keepalive_timeout_ms || l->max_sessions ||
        l->sessions_per_caller || l->session_idle_ms)
        return tg__cfg_at_err(c, false,
                              "path, tls, allowed_origins and the HTTP bounds belong to an "
                              "\"http\" listener (this one is \"unix\")");
    if (l->dialect == TG_DIALECT_OPENSENTIENCE && l->agent)
        return tg__cfg_at_err(c, false,
                              "an opensentience listener routes calls by tool_id to "
                              "every opensentience agent (remove \"agent\")");
    if (!l->unix_path || (!l->agent && l->dialect == TG_DIALECT_MCP))
        return tg__cfg_at_err(c, false,
                              "a listener needs \"unix\" (socket path) or \"http\" (HOST:PORT), "
                              "and \"agent\" (agent id)");
    return 0;
}

TG_KLOAD(tg__cfg_load_listen)
{
    static const tg_cfg_array_t listeners = {"listener", TG_CFG_LISTEN_MAX,
                                             true,       sizeof(tg_listen_cfg_t),
                                             listen_one, tg__cfg_listen_free};
    (void)k;
    return tg__cfg_load_array(c, v, &listeners, &c->cfg->listen, &c->cfg->nlisten);
}

/* router.admin: "HOST:PORT", or {"listen": "HOST:PORT", bounds...}. */
TG_KLOAD(tg__cfg_load_admin)
{
    if (json_is_string(v))
        return tg__cfg_load_default(c, v, tg_cfg_key_child(k->path, "listen", 6, 0));
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "a \"HOST:PORT\" string or an object");
    if (tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (c->cfg->admin_addr == NULL)
        return tg__cfg_at_err(c, false, "router.admin needs \"listen\" (a loopback HOST:PORT)");
    return 0;
}

/* ---- callers[] ---- */

TG_KLOAD(tg__cfg_load_caller_id)
{
    tg_cfg_val_t val = {0};

    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL)
        return tg__cfg_type_err(c, v, "a numeric id from 0 to 4294967294");
    val.u = (uint64_t)json_integer_value(v);
    tg__cfg_store(c, k, &val);
    return 0;
}

/* A caller's limits take the per-tool keys (rate, burst, concurrency). */
TG_KLOAD(tg__cfg_load_caller_limits)
{
    c->lim = &((tg_caller_cfg_t *)c->item)->lim;
    return tg__cfg_want_object(c, v) < 0 ? -1 : tg__cfg_walk(c, v, k->path);
}

/* A caller is a connection to this toolgate: its bucket is local. */
TG_KLOAD(tg__cfg_load_caller_rate_scope)
{
    int i = tg__cfg_get_enum(c, v, k);

    if (i == 1)
        return tg__cfg_at_err(c, false,
                              "\"shared\" is for an agent's or a tool's rate (a "
                              "caller's rate_limit is per toolgate)");
    return i < 0 ? -1 : 0;
}

static int caller_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    tg_caller_cfg_t *cc = (tg_caller_cfg_t *)c->items + i;

    cc->uid = cc->gid = -1;
    c->item = cc;
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, "callers[]") < 0)
        return -1;
    if (!cc->name)
        return tg__cfg_at_err(c, false, "missing required key \"name\"");
    if (cc->uid < 0 && cc->gid < 0 && strcmp(cc->name, "default") != 0)
        return tg__cfg_at_err(
            c, false, "caller \"%s\" needs \"uid\" or \"gid\" (only \"default\" matches everyone)",
            cc->name);
    return 0;
}

TG_KLOAD(tg__cfg_load_callers)
{
    static const tg_cfg_array_t callers = {"caller",   TG_CFG_CALLERS_MAX,
                                           true,       sizeof(tg_caller_cfg_t),
                                           caller_one, tg__cfg_caller_free};
    (void)k;
    return tg__cfg_load_array(c, v, &callers, &c->cfg->callers, &c->cfg->ncallers);
}

/* ---- validation ---- */

/* router.listen[i] against agents[]: an mcp listener names an mcp agent,
 * an opensentience one needs an opensentience agent, paths differ. */
static int check_listener(const tg_config_t *cfg, size_t i, const char *f, const char *sep,
                          tg_err_t *err)
{
    const tg_listen_cfg_t *l = &cfg->listen[i];
    const tg_agent_cfg_t *la = NULL;
    bool any_os = false;

    for (size_t j = 0; j < cfg->nagents; j++) {
        any_os = any_os || cfg->agents[j].dialect == TG_DIALECT_OPENSENTIENCE;
        if (l->agent && strcmp(cfg->agents[j].id, l->agent) == 0)
            la = &cfg->agents[j];
    }
    if (l->dialect == TG_DIALECT_OPENSENTIENCE && !any_os)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].dialect: no agent in agents[] speaks "
                          "opensentience (expected at least one with \"dialect\": "
                          "\"opensentience\")",
                          f, sep, i);
    if (l->dialect == TG_DIALECT_MCP && !la)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].agent: no agent \"%s\" in agents[] (expected "
                          "one of the configured agent ids)",
                          f, sep, i, l->agent ? l->agent : "");
    if (la && la->dialect == TG_DIALECT_OPENSENTIENCE)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].agent: agent \"%s\" speaks opensentience "
                          "(serve it on a listener with \"dialect\": \"opensentience\", which "
                          "routes by tool_id)",
                          f, sep, i, la->id);
    for (size_t j = 0; j < i; j++) {
        const tg_listen_cfg_t *o = &cfg->listen[j];
        bool same_unix = l->unix_path && o->unix_path && strcmp(o->unix_path, l->unix_path) == 0;
        bool same_http = l->http_addr && o->http_addr && strcmp(o->http_addr, l->http_addr) == 0;
        if (same_unix || same_http)
            return tg_err_set(err, -1,
                              "%s%srouter.listen[%zu].%s: \"%s\" is also "
                              "router.listen[%zu]",
                              f, sep, i, same_unix ? "unix" : "http",
                              same_unix ? l->unix_path : l->http_addr, j);
    }
    return 0;
}

TG_KVALID(tg__cfg_validate_router)
{
    for (size_t i = 0; i < cfg->nlisten; i++)
        if (check_listener(cfg, i, f, sep, err) < 0)
            return -1;
    if (!cfg->instance || !tg__cfg_name_ok(cfg->instance, strlen(cfg->instance), true))
        return tg_err_set(err, -1,
                          "%s%srouter.instance: missing or not a name (expected 1 to %d of %s)", f,
                          sep, TG_NAME_MAX, tg__cfg_name_chars_tool);
    return 0;
}
