/* toolgate wrap's argument parsing: see cli.h. */
#include "router/cli/cli.h"
#include "router/auth/policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config/addr.h"
#include "config/config.h"
#include "router/front/serve.h"
#include "router/front/wrap.h"
#include "router/gateway/log.h"

static bool id_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

/* <s> is an agent id: 1 to TG_NAME_MAX of [A-Za-z0-9._-]. */
static bool id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TG_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!id_char(s[i]))
            return false;
    return true;
}

/* The agent id for a command: its basename, with every byte outside
 * [A-Za-z0-9._-] replaced by '_' (ids go into config paths and audit). */
static char *id_from_command(const char *cmd)
{
    const char *base = strrchr(cmd, '/');
    base = base != NULL ? base + 1 : cmd;
    size_t n = strlen(base);
    if (n == 0 || n > 64)
        n = n == 0 ? 0 : 64;
    char *id = malloc(n + 6);
    if (id == NULL)
        return NULL;
    if (n == 0) {
        memcpy(id, "agent", 6);
        return id;
    }
    for (size_t i = 0; i < n; i++) {
        id[i] = id_char(base[i]) ? base[i] : '_';
    }
    id[n] = '\0';
    return id;
}

#define CLI_TOOL_GLOBS_MAX 64 /* fixed internal bound: --allow-tool (or --deny-tool) globs */

/* The options of wrap and of serve --http, as given. */
typedef struct cli_opts {
    const char *config, *name, *audit, *store, *admin;
    const char *limits[256];
    int nlimits;
    /* wrap only: --allow-tool and --deny-tool globs */
    const char *allow[CLI_TOOL_GLOBS_MAX], *deny[CLI_TOOL_GLOBS_MAX];
    size_t nallow, ndeny;
    /* serve only */
    const char *http, *path, *tls_cert, *tls_key, *tls;
    const char *origins[TG_HTTP_ORIGINS_MAX];
    int norigins;
    const char *first_serve_opt; /* the first of the above given, for messages */
} cli_opts_t;

#define CLI_WRAP_OPTS                                                                              \
    "--config, --audit, --store, --admin, --name, --limit, --allow-tool, --deny-tool"
#define CLI_SERVE_OPTS                                                                             \
    "--config FILE alone, or --http, --path, --tls-cert, --tls-key, --tls, --allowed-origin, "     \
    "--audit, --store, --admin, "                                                                  \
    "--name, --limit"

/* Store option <opt> (with its value) in <o>. 0, or -1 with <err>. */
static int cli_opt_set(cli_opts_t *o, const char *opt, const char *val, tg_err_t *err)
{
    const char **slot = NULL;
    static const struct {
        const char *name;
        size_t off;
    } one[] = {
        {"--config", offsetof(cli_opts_t, config)},
        {"--name", offsetof(cli_opts_t, name)},
        {"--audit", offsetof(cli_opts_t, audit)},
        {"--store", offsetof(cli_opts_t, store)},
        {"--admin", offsetof(cli_opts_t, admin)},
        {"--http", offsetof(cli_opts_t, http)},
        {"--path", offsetof(cli_opts_t, path)},
        {"--tls-cert", offsetof(cli_opts_t, tls_cert)},
        {"--tls-key", offsetof(cli_opts_t, tls_key)},
        {"--tls", offsetof(cli_opts_t, tls)},
    };
    for (size_t k = 0; k < sizeof(one) / sizeof(one[0]); k++)
        if (strcmp(opt, one[k].name) == 0)
            slot = (const char **)(void *)((char *)o + one[k].off);
    if (slot != NULL) {
        *slot = val;
        return 0;
    }
    if (strcmp(opt, "--allow-tool") == 0 || strcmp(opt, "--deny-tool") == 0) {
        bool allow = opt[2] == 'a';
        size_t *n = allow ? &o->nallow : &o->ndeny;
        if (*n >= CLI_TOOL_GLOBS_MAX)
            return tg_err_set(err, -1, "%s: more than %d globs", opt, CLI_TOOL_GLOBS_MAX);
        (allow ? o->allow : o->deny)[(*n)++] = val;
        return 0;
    }
    if (strcmp(opt, "--allowed-origin") == 0) {
        if (o->norigins >= TG_HTTP_ORIGINS_MAX)
            return tg_err_set(err, -1, "--allowed-origin: more than %d origins",
                              TG_HTTP_ORIGINS_MAX);
        o->origins[o->norigins++] = val;
        return 0;
    }
    if (o->nlimits >= (int)(sizeof(o->limits) / sizeof(o->limits[0])))
        return tg_err_set(err, -1, "too many --limit options (at most 256)");
    o->limits[o->nlimits++] = val;
    return 0;
}

/* Read the options before the command into <o>: "--opt VALUE" or
 * "--opt=VALUE", up to "--" or the first word not starting with '-'.
 * <serve> accepts serve --http's options too. The index of the command
 * (argc when there is none), or -1 with <err>. */
static int cli_opts_parse(int argc, char **argv, bool serve, cli_opts_t *o, tg_err_t *err)
{
    static const char *const wrap_opts[] = {"--config", "--audit",      "--limit",
                                            "--store",  "--admin",      "--name",
                                            "--allow-tool", "--deny-tool", NULL};
    static const char *const serve_opts[] = {
        "--http", "--path", "--tls-cert", "--tls-key", "--tls", "--allowed-origin", NULL};
    int i = 0;

    memset(o, 0, sizeof(*o));
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i + 1;
        if (a[0] != '-')
            return i; /* the command starts without "--" */
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t klen = eq != NULL ? (size_t)(eq - a) : strlen(a);
        const char *known = NULL;
        for (int k = 0; known == NULL && wrap_opts[k] != NULL; k++)
            if (strlen(wrap_opts[k]) == klen && strncmp(a, wrap_opts[k], klen) == 0)
                known = wrap_opts[k];
        for (int k = 0; serve && known == NULL && serve_opts[k] != NULL; k++)
            if (strlen(serve_opts[k]) == klen && strncmp(a, serve_opts[k], klen) == 0)
                known = o->first_serve_opt = serve_opts[k];
        if (known == NULL)
            return tg_err_set(err, -1, "unknown option '%s' (expected %s, then -- CMD ARGS)", a,
                              serve ? CLI_SERVE_OPTS : CLI_WRAP_OPTS);
        const char *val = eq != NULL ? eq + 1 : NULL;
        if (val == NULL) {
            if (i + 1 >= argc)
                return tg_err_set(err, -1, "%s needs a value", known);
            val = argv[++i];
        }
        if (cli_opt_set(o, known, val, err) < 0)
            return -1;
    }
    return i;
}

/* The agent id of agents[0]: --name, else the config file's when it names
 * one, else the command's basename. */
static int cli_agent_id(tg_config_t *cfg, const cli_opts_t *o, const char *cmd, tg_err_t *err)
{
    tg_agent_cfg_t *ag = &cfg->agents[0];
    char *id = NULL;
    if (o->name != NULL) {
        if (!id_ok(o->name))
            return tg_err_set(err, -1,
                              "--name: '%s' is not an agent name (expected 1 to %d of "
                              "[A-Za-z0-9._-])",
                              o->name, TG_NAME_MAX);
        id = strdup(o->name);
    } else if (o->config == NULL || strcmp(ag->id, "agent") == 0) {
        id = id_from_command(cmd);
    } else {
        return 0;
    }
    if (id == NULL)
        return tg_err_set(err, -1, "out of memory");
    free(ag->id);
    ag->id = id;
    return 0;
}

/* What wrap and serve --http do alike once agents[0] has its command:
 * --limit in order, --store, --admin, --audit, then validation. */
static int cli_apply(tg_config_t *cfg, const cli_opts_t *o, tg_err_t *err)
{
    for (int k = 0; k < o->nlimits; k++)
        if (tg_config_apply_limit(cfg, 0, o->limits[k], err) < 0)
            return -1;
    /* --store URL: the shared store for limits with rate_scope=shared. */
    if (o->store != NULL) {
        if (strncmp(o->store, "redis://", 8) != 0 && strncmp(o->store, "unix:", 5) != 0)
            return tg_err_set(err, -1,
                              "--store: not a store URL (expected redis://[user:password@]"
                              "host:port/db or unix:/path?db=N)");
        free(cfg->store.url);
        cfg->store.url = strdup(o->store);
        cfg->store.redis = cfg->store.url != NULL;
        if (cfg->store.url == NULL)
            return tg_err_set(err, -1, "out of memory");
    }
    if (o->admin != NULL) {
        struct sockaddr_storage ss;
        tg_err_t aerr;
        if (tg_addr_parse_admin(o->admin, &ss, &aerr) < 0)
            return tg_err_set(err, -1, "--admin: %s", aerr.msg);
        free(cfg->admin_addr);
        if ((cfg->admin_addr = strdup(o->admin)) == NULL)
            return tg_err_set(err, -1, "out of memory");
    }
    /* --audit PATH replaces whatever sinks the config file named. */
    if (o->audit != NULL && tg_config_set_audit_path(cfg, o->audit, err) < 0)
        return -1;
    return tg_config_validate(cfg, err);
}

int tg_cli_parse_wrap(int argc, char **argv, tg_config_t *cfg, tg_err_t *err)
{
    cli_opts_t o;
    int i = cli_opts_parse(argc, argv, false, &o, err);
    if (i < 0)
        return -1;
    if (i >= argc && o.config == NULL)
        return tg_err_set(err, -1,
                          "no agent command: put it after --, e.g. toolgate wrap -- my-mcp-server "
                          "(or give --config FILE with agents[0].command)");
    if (tg_config_default(cfg) < 0)
        return tg_err_set(err, -1, "out of memory");
    if (o.config != NULL && tg_config_load_file(cfg, o.config, err) < 0)
        return -1;
    /* The command: the one after --, else the file's agents[0].command.
     * Given both, the command line wins (a config kept for its limits
     * runs another build of the server) and a notice says the file's is
     * not used. */
    char **fcmd = cfg->agents[0].command;
    bool file_cmd = fcmd != NULL && fcmd[0] != NULL && fcmd[0][0] != '\0';
    if (i >= argc && !file_cmd)
        return tg_err_set(err, -1,
                          "%s: agents[0].command: no command (expected \"command\" in the file, "
                          "or the command after --, e.g. toolgate wrap --config %s -- "
                          "my-mcp-server)",
                          o.config, o.config);
    if (i < argc && file_cmd)
        tg_notice("--config %s: agents[0].command (%s) is not used: the command after -- "
                  "replaces it",
                  o.config, fcmd[0]);
    if (i < argc && tg_config_set_command(cfg, 0, argv + i, err) < 0)
        return -1;
    if (cli_agent_id(cfg, &o, cfg->agents[0].command[0], err) < 0)
        return -1;
    if (tg_config_name_run(cfg, cfg->agents[0].id) < 0)
        return tg_err_set(err, -1, "out of memory");
    return cli_apply(cfg, &o, err);
}

typedef struct wrap_args {
    int argc;
    char **argv;
} wrap_args_t;

static int wrap_reload(void *ctx, tg_config_t *cfg, tg_err_t *err)
{
    const wrap_args_t *a = ctx;
    return tg_cli_parse_wrap(a->argc, a->argv, cfg, err);
}

int tg_cli_wrap(int argc, char **argv)
{
    tg_config_t cfg;
    tg_err_t err;
    memset(&cfg, 0, sizeof(cfg));
    if (tg_cli_parse_wrap(argc, argv, &cfg, &err) < 0) {
        tg_log_error("%s", err.msg);
        tg_config_free(&cfg);
        return 2;
    }
    /* --allow-tool and --deny-tool: checked now, built by the engine. */
    static cli_opts_t o;
    tg_policy_t *pol = NULL;
    if (cli_opts_parse(argc, argv, false, &o, &err) < 0 ||
        tg_policy_from_flags(&pol, o.allow, o.nallow, o.deny, o.ndeny, &err) < 0) {
        tg_log_error("%s", err.msg);
        tg_config_free(&cfg);
        return 2;
    }
    tg_policy_free(pol);
    tg_wrap_tools_t tools = {o.allow, o.deny, o.nallow, o.ndeny};
    wrap_args_t args = {argc, argv};
    int rc = tg_wrap_run_tools(&cfg, wrap_reload, &args, &tools);
    tg_config_free(&cfg);
    return rc;
}

/* serve --http's listener as a config document {"router": {"listen":
 * [...]}} for the loader, which checks each value as it checks a file's.
 * A new reference, or NULL (out of memory). */
static json_t *serve_http_doc(const cli_opts_t *o, const char *agent)
{
    json_t *l = json_pack("{s:s, s:s, s:s}", "http", o->http, "agent", agent, "path",
                          o->path != NULL ? o->path : TG_HTTP_DEF_PATH);
    if (l == NULL)
        return NULL;
    int rc = 0;
    if (o->tls_cert != NULL)
        rc |= json_object_set_new(l, "tls",
                                  json_pack("{s:s, s:s}", "cert", o->tls_cert, "key", o->tls_key));
    else if (o->tls != NULL)
        rc |= json_object_set_new(l, "tls", json_string(o->tls));
    if (o->norigins > 0) {
        json_t *a = json_array();
        for (int k = 0; k < o->norigins; k++)
            rc |= json_array_append_new(a, json_string(o->origins[k]));
        rc |= json_object_set_new(l, "allowed_origins", a);
    }
    json_t *doc = json_pack("{s:{s:[o]}}", "router", "listen", l);
    if (rc != 0 && doc != NULL) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* The loader's "NAME:LINE:COL: router.listen[0].KEY: why" as "--OPT: why". */
static int serve_http_load_err(tg_err_t *err)
{
    static const struct {
        const char *key, *opt;
    } map[] = {{"router.listen[0].http", "--http"},
               {"router.listen[0].path", "--path"},
               {"router.listen[0].tls.cert", "--tls-cert"},
               {"router.listen[0].tls.key", "--tls-key"},
               {"router.listen[0].tls", "--tls"},
               {"router.listen[0].allowed_origins", "--allowed-origin"}};
    char msg[TG_ERR_MAX];
    for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++) {
        const char *at = strstr(err->msg, map[k].key);
        if (at == NULL)
            continue;
        at += strlen(map[k].key);
        at += strspn(at, "[]0123456789"); /* allowed_origins[N] */
        if (*at == ':' || *at == ' ')
            at += strspn(at, ": ");
        snprintf(msg, sizeof(msg), "%s", at);
        return tg_err_set(err, -1, "%s: %s", map[k].opt, msg);
    }
    return -1;
}

/* --http, --tls-cert/--tls-key and --tls together, before the loader: the
 * message names the options, not config keys. */
static int serve_http_check(const cli_opts_t *o, tg_err_t *err)
{
    struct sockaddr_storage ss;
    tg_err_t e = {0};
    if (tg_addr_parse(o->http, "address", &ss, &e) < 0)
        return tg_err_set(err, -1, "--http: %s", e.msg);
    if ((o->tls_cert == NULL) != (o->tls_key == NULL))
        return tg_err_set(err, -1, "%s: TLS needs both --tls-cert FILE and --tls-key FILE (PEM)",
                          o->tls_cert != NULL ? "--tls-cert" : "--tls-key");
    if (o->tls != NULL && strcmp(o->tls, "off") != 0)
        return tg_err_set(err, -1,
                          "--tls: '%s' is not a TLS setting (expected --tls off, or --tls-cert "
                          "FILE --tls-key FILE)",
                          o->tls);
    if (o->tls != NULL && o->tls_cert != NULL)
        return tg_err_set(err, -1,
                          "--tls off: contradicts --tls-cert/--tls-key (give one or "
                          "the other)");
    if (!tg_addr_loopback(&ss) && o->tls_cert == NULL && o->tls == NULL)
        return tg_err_set(err, -1,
                          "--http %s: not on loopback and no TLS: bearer tokens and results "
                          "would cross the network in clear (add --tls-cert FILE --tls-key FILE, "
                          "or --tls off behind a TLS-terminating proxy)",
                          o->http);
    return 0;
}

int tg_cli_parse_serve(int argc, char **argv, tg_config_t *cfg, tg_err_t *err)
{
    cli_opts_t o;
    int i = cli_opts_parse(argc, argv, true, &o, err);
    if (i < 0)
        return -1;
    if (o.config != NULL) {
        /* One way to say what to serve: the file's router.listen. */
        if (o.first_serve_opt != NULL || o.nlimits > 0 || o.name || o.audit || o.store || o.admin ||
            i < argc)
            return tg_err_set(
                err, -1,
                "--config FILE takes no other argument (got %s): the file "
                "says what to serve (router.listen[].http, agents[].execution_limits, "
                "audit); --http ... -- CMD serves one command without a file",
                o.first_serve_opt != NULL ? o.first_serve_opt
                : i < argc                ? "a command"
                : o.nlimits > 0           ? "--limit"
                                          : "an option of serve --http");
        if (tg_config_default(cfg) < 0)
            return tg_err_set(err, -1, "out of memory");
        if (tg_config_load_file(cfg, o.config, err) < 0)
            return -1;
        if (tg_config_name_run(cfg, "serve") < 0)
            return tg_err_set(err, -1, "out of memory");
        return tg_config_validate(cfg, err);
    }
    if (o.http == NULL)
        return tg_err_set(err, -1,
                          "needs --config FILE (agents and router.listen), or --http "
                          "HOST:PORT -- CMD ARGS to serve one MCP server over HTTP");
    if (serve_http_check(&o, err) < 0)
        return -1;
    if (i >= argc)
        return tg_err_set(err, -1,
                          "--http: no agent command: put it after --, e.g. toolgate serve --http "
                          "127.0.0.1:8080 -- my-mcp-server");
    if (tg_config_default(cfg) < 0)
        return tg_err_set(err, -1, "out of memory");
    if (tg_config_set_command(cfg, 0, argv + i, err) < 0 || cli_agent_id(cfg, &o, argv[i], err) < 0)
        return -1;
    if (tg_config_name_run(cfg, "serve") < 0)
        return tg_err_set(err, -1, "out of memory");
    json_t *doc = serve_http_doc(&o, cfg->agents[0].id);
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text == NULL)
        return tg_err_set(err, -1, "out of memory");
    int rc = tg_config_load_buffer(cfg, "serve --http", text, strlen(text), err);
    free(text);
    if (rc < 0)
        return serve_http_load_err(err);
    return cli_apply(cfg, &o, err);
}

int tg_cli_serve(int argc, char **argv)
{
    tg_config_t cfg;
    tg_err_t err;
    memset(&cfg, 0, sizeof(cfg));
    if (tg_cli_parse_serve(argc, argv, &cfg, &err) < 0) {
        fprintf(stderr, "toolgate: serve: %s\n", err.msg);
        tg_config_free(&cfg);
        return 2;
    }
    int rc = tg_serve_run(&cfg);
    tg_config_free(&cfg);
    return rc;
}
