/* toolgate wrap's argument parsing: see cli.h. */
#include "router/cli/cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "router/front/serve.h"
#include "router/front/wrap.h"
#include "router/log.h"

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

/* wrap without router.instance: the host name, the agent id and the pid,
 * so that the audit events of wraps that one MCP client launched at once
 * (into one default audit file, one Redis stream) tell the runs apart and
 * `toolgate audit verify` checks each run on its own. The host part is
 * cut to fit TG_NAME_MAX. 0 or -1 (out of memory). */
static int unique_instance(tg_config_t *cfg)
{
    char tail[TG_NAME_MAX + 1];
    char name[TG_NAME_MAX + 1];
    char pid[24];
    int pn = snprintf(pid, sizeof(pid), "-%ld", (long)getpid());
    size_t idn = strlen(cfg->agents[0].id);
    size_t tn;
    if (idn + 1 + (size_t)pn < TG_NAME_MAX) { /* "-AGENT-PID", built by hand: no truncation */
        tail[0] = '-';
        memcpy(tail + 1, cfg->agents[0].id, idn);
        memcpy(tail + 1 + idn, pid, (size_t)pn + 1);
        tn = idn + 1 + (size_t)pn;
    } else {
        memcpy(tail, pid, (size_t)pn + 1);
        tn = (size_t)pn;
    }
    size_t hn = strnlen(cfg->instance, TG_NAME_MAX - tn);
    memcpy(name, cfg->instance, hn);
    memcpy(name + hn, tail, tn + 1);
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    free(cfg->instance);
    cfg->instance = copy;
    return 0;
}

int tg_cli_parse_wrap(int argc, char **argv, tg_config_t *cfg, tg_err_t *err)
{
    const char *config_path = NULL;
    const char *name = NULL;
    const char *audit = NULL;
    const char *store = NULL;
    const char *admin = NULL;
    const char *limits[256];
    int nlimits = 0;
    int i = 0;

    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        const char *val = NULL;
        const char *eq = NULL;
        if (strncmp(a, "--", 2) == 0 && (eq = strchr(a, '=')) != NULL)
            val = eq + 1;
        size_t klen = eq != NULL ? (size_t)(eq - a) : strlen(a);
#define OPT(name) (klen == strlen(name) && strncmp(a, name, klen) == 0)
        if (OPT("--config") || OPT("--audit") || OPT("--limit") || OPT("--store") ||
            OPT("--admin") || OPT("--name")) {
            if (val == NULL) {
                if (i + 1 >= argc) {
                    return tg_err_set(err, -1, "%.*s needs a value", (int)klen, a);
                }
                val = argv[++i];
            }
            if (OPT("--config"))
                config_path = val;
            else if (OPT("--audit"))
                audit = val;
            else if (OPT("--store"))
                store = val;
            else if (OPT("--admin"))
                admin = val;
            else if (OPT("--name"))
                name = val;
            else if (nlimits < (int)(sizeof(limits) / sizeof(limits[0])))
                limits[nlimits++] = val;
            else {
                return tg_err_set(err, -1, "too many --limit options (at most 256)");
            }
        } else if (a[0] == '-') {
            return tg_err_set(
                err, -1,
                "unknown option '%s' (expected --config, --audit, --store, --admin, --name, --limit, "
                "then -- CMD ARGS)",
                a);
        } else {
            break; /* the command starts without "--" */
        }
#undef OPT
    }
    if (i >= argc)
        return tg_err_set(err, -1,
                          "no agent command: put it after --, e.g. toolgate wrap -- my-mcp-server");
    if (tg_config_default(cfg) < 0)
        return tg_err_set(err, -1, "out of memory");
    /* router.instance is "configured" when the file changed it from the
     * host name the defaults give. */
    char *host = strdup(cfg->instance);
    if (host == NULL)
        return tg_err_set(err, -1, "out of memory");
    int lrc = config_path != NULL ? tg_config_load_file(cfg, config_path, err) : 0;
    bool own_instance = strcmp(cfg->instance, host) != 0;
    free(host);
    if (lrc < 0)
        return -1;
    tg_agent_cfg_t *ag = &cfg->agents[0];
    /* The command line gives the command; the id comes from --name, else
     * from the config file when it names one, else from the command's
     * basename. */
    if (tg_config_set_command(cfg, 0, argv + i, err) < 0)
        return -1;
    if (name != NULL) {
        if (!id_ok(name))
            return tg_err_set(err, -1,
                              "--name: '%s' is not an agent name (expected 1 to %d of "
                              "[A-Za-z0-9._-])",
                              name, TG_NAME_MAX);
        char *id = strdup(name);
        if (id == NULL)
            return tg_err_set(err, -1, "out of memory");
        free(ag->id);
        ag->id = id;
    } else if (config_path == NULL || strcmp(ag->id, "agent") == 0) {
        char *id = id_from_command(argv[i]);
        if (id == NULL)
            return tg_err_set(err, -1, "out of memory");
        free(ag->id);
        ag->id = id;
    }
    if (!own_instance && unique_instance(cfg) < 0)
        return tg_err_set(err, -1, "out of memory");
    for (int k = 0; k < nlimits; k++)
        if (tg_config_apply_limit(cfg, 0, limits[k], err) < 0)
            return -1;
    /* --store URL: the shared store for limits with rate_scope=shared. */
    if (store != NULL) {
        if (strncmp(store, "redis://", 8) != 0 && strncmp(store, "unix:", 5) != 0)
            return tg_err_set(err, -1,
                              "--store: not a store URL (expected redis://[user:password@]"
                              "host:port/db or unix:/path?db=N)");
        free(cfg->store.url);
        cfg->store.url = strdup(store);
        cfg->store.redis = cfg->store.url != NULL;
        if (cfg->store.url == NULL)
            return tg_err_set(err, -1, "out of memory");
    }
    if (admin != NULL) {
        free(cfg->admin_addr);
        if ((cfg->admin_addr = strdup(admin)) == NULL)
            return tg_err_set(err, -1, "out of memory");
    }
    /* --audit PATH replaces whatever sinks the config file named. */
    if (audit != NULL && tg_config_set_audit_path(cfg, audit, err) < 0)
        return -1;
    return tg_config_validate(cfg, err);
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
    wrap_args_t args = {argc, argv};
    int rc = tg_wrap_run(&cfg, wrap_reload, &args);
    tg_config_free(&cfg);
    return rc;
}

int tg_cli_serve(int argc, char **argv)
{
    const char *path = NULL;
    tg_config_t cfg;
    tg_err_t cerr;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            path = argv[i] + 9;
        } else {
            fprintf(stderr, "toolgate: serve: unknown argument '%s' (expected --config FILE)\n",
                    argv[i]);
            return 2;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "toolgate: serve needs --config FILE (agents and router.listen)\n");
        return 2;
    }
    memset(&cfg, 0, sizeof(cfg));
    int rc = tg_config_default(&cfg) < 0 ? tg_err_set(&cerr, -1, "out of memory") : 0;
    if (rc == 0 &&
        (tg_config_load_file(&cfg, path, &cerr) < 0 || tg_config_validate(&cfg, &cerr) < 0))
        rc = -1;
    if (rc < 0) {
        tg_log_error("%s", cerr.msg);
        tg_config_free(&cfg);
        return 2;
    }
    rc = tg_serve_run(&cfg);
    tg_config_free(&cfg);
    return rc;
}
