/* The config model (config.h): names, defaults, deep copies and frees.
 * Ownership: a tg_config_t owns every string and array reachable from it;
 * the copy and free functions here are the only ones that walk it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cfg_impl.h"
#include "config/manifest.h"

/* ------------------------------------------------------------------ */
/* Names                                                               */

const char tg__cfg_name_chars_tool[] = "A-Z a-z 0-9 . _ : @ / -";
const char tg__cfg_name_chars_agent[] = "A-Z a-z 0-9 . _ -";

bool tg__cfg_name_ok(const char *s, size_t len, bool tool_set)
{
    if (len == 0 || len > TG_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '.' || ch == '_' || ch == '-')
            continue;
        if (tool_set && (ch == ':' || ch == '@' || ch == '/'))
            continue;
        return false;
    }
    return true;
}

bool tg_config_tool_name_ok(const char *s, size_t len)
{
    return s && tg__cfg_name_ok(s, len, true);
}

/* Agent ids end up in cgroup names, config paths and OpenSentience tool ids
 * ("<agent_id>/<tool>"), hence the narrower set: no ':', '@' or '/'. */
bool tg__cfg_agent_id_ok(const char *s)
{
    return s && tg__cfg_name_ok(s, strlen(s), false);
}

/* The same byte set as tg__cfg_name_ok without the tool set: what LLM
 * APIs accept in a tool name. Plain ASCII ranges: no locale. */
static bool prefix_byte_ok(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

int tg_cfg_prefix_check(const char *p, size_t len, char *msg, size_t cap)
{
    if (len > TG_CFG_PREFIX_MAX)
        return tg__cfg_why(-EINVAL, msg, cap,
                           "is %zu bytes, over %d: a prefix takes its bytes from the %d of every "
                           "exposed name (set a shorter \"tool_prefix\")",
                           len, TG_CFG_PREFIX_MAX, TG_CFG_EXPOSED_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!prefix_byte_ok(ch))
            return tg__cfg_why(-EINVAL, msg, cap,
                               "holds byte 0x%02x at offset %zu, outside [A-Za-z0-9_.-]", ch, i);
        if (ch == '_' && i + 1 < len && p[i + 1] == '_')
            return tg__cfg_why(-EINVAL, msg, cap,
                               "holds \"__\" at offset %zu: the separator of exposed names, so "
                               "the first \"__\" of a name would not end its prefix",
                               i);
    }
    if (len > 0 && p[len - 1] == '_')
        return tg__cfg_why(-EINVAL, msg, cap,
                           "ends in '_': before the separator it makes \"___\", whose first "
                           "\"__\" would end the prefix one byte early");
    return 0;
}

const char *tg_src_name(tg_src_t s)
{
    static const char *const names[] = {
        [TG_SRC_DEFAULT] = "default",  [TG_SRC_FILE] = "file",
        [TG_SRC_CLI] = "--limit",      [TG_SRC_MANIFEST] = "manifest",
        [TG_SRC_CAP] = "operator cap", [TG_SRC_DEFAULT_CAP] = "default cap",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

const char *tg_network_name(tg_network_t n)
{
    static const char *const names[] = {"full", "loopback", "none"};
    return (unsigned)n < sizeof names / sizeof names[0] ? names[n] : "unknown";
}

/* ------------------------------------------------------------------ */
/* Defaults                                                            */

/* The defaults are designated initializers: every field not named is 0
 * (a source TG_SRC_DEFAULT, an unset burst, a NULL string). */

void tg__cfg_lim_defaults(tg_exec_limits_t *l)
{
    *l = (tg_exec_limits_t){
        .max_tool_call_duration_ms = TG_DEF_CALL_DURATION_MS,
        .max_concurrent_calls = TG_DEF_MAX_CONCURRENT,
        .max_queued_calls = TG_DEF_MAX_QUEUED,
        .rate_limit = {.count = TG_DEF_RATE_COUNT, .period_ms = TG_DEF_RATE_PERIOD_MS},
    };
}

void tg_resources_default(tg_resources_t *r)
{
    *r = (tg_resources_t){.memory_bytes = TG_DEF_MEMORY_BYTES,
                          .cpu_millicores = TG_DEF_CPU_MILLICORES,
                          .pids = TG_DEF_PIDS,
                          .disk_bytes = TG_DEF_DISK_BYTES,
                          .network = TG_NET_FULL,
                          .nofile = TG_CONTAIN_DEF_NOFILE};
}

/* Every field at its DESIGN.md default; id and command left NULL. */
void tg__cfg_agent_defaults(tg_agent_cfg_t *a)
{
    *a = (tg_agent_cfg_t){
        .dialect = TG_DIALECT_MCP,
        .kill_grace_ms = TG_DEF_KILL_GRACE_MS,
        .restart_policy = TG_RESTART_ON_FAILURE,
        .max_restarts = TG_DEF_MAX_RESTARTS,
        .restart_window_ms = TG_DEF_RESTART_WINDOW_MS,
        .backoff_initial_ms = TG_DEF_BACKOFF_INITIAL_MS,
        .backoff_max_ms = TG_DEF_BACKOFF_MAX_MS,
        .stderr_bytes_per_sec = TG_DEF_STDERR_BPS,
        .stderr_line_max = TG_DEF_STDERR_LINE,
        .max_instances = TG_DEF_MAX_INSTANCES,
        .os = {.heartbeat_interval_ms = TG_DEF_OS_HEARTBEAT_MS,
               .heartbeat_timeout_ms = TG_DEF_OS_HEARTBEAT_TIMEOUT_MS,
               .idempotency_window_ms = TG_DEF_OS_IDEM_WINDOW_MS,
               .idempotency_max_bytes = TG_DEF_OS_IDEM_MAX_BYTES},
    };
    tg__cfg_lim_defaults(&a->lim);
    tg_resources_default(&a->res);
}

void tg_config_sink_defaults(tg_audit_sink_cfg_t *s, tg_audit_sink_kind_t kind)
{
    *s = (tg_audit_sink_cfg_t){
        .kind = kind,
        .max_bytes = TG_DEF_AUDIT_MAX_BYTES,
        .keep = TG_DEF_AUDIT_KEEP,
        .fsync = TG_AUDIT_FSYNC_INTERVAL,
        .fsync_interval_ms = TG_DEF_AUDIT_FSYNC_MS,
        .maxlen = TG_DEF_AUDIT_MAXLEN,
        .spool_max_bytes = TG_DEF_AUDIT_SPOOL_BYTES,
        .timeout_ms = TG_DEF_AUDIT_REDIS_TIMEOUT_MS,
    };
}

/* The host name, reduced to the audit-safe name set (instance names are
 * written in every audit event). */
static char *default_instance(void)
{
    char host[256];
    size_t n;

    if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
        return strdup("toolgate");
    host[sizeof host - 1] = '\0';
    n = strlen(host);
    if (n > TG_NAME_MAX)
        host[n = TG_NAME_MAX] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!tg__cfg_name_ok(&host[i], 1, true))
            host[i] = '_';
    return strdup(host);
}

int tg_config_name_run(tg_config_t *cfg, const char *tag)
{
    char *host = default_instance();
    if (host == NULL)
        return -ENOMEM;
    bool configured = strcmp(cfg->instance, host) != 0;
    free(host);
    if (configured)
        return 0;
    char tail[TG_NAME_MAX + 1];
    char name[TG_NAME_MAX + 1];
    char pid[24];
    int pn = snprintf(pid, sizeof(pid), "-%ld", (long)getpid());
    size_t tagn = strlen(tag);
    size_t tn;
    if (tagn + 1 + (size_t)pn < TG_NAME_MAX) { /* "-TAG-PID", built by hand: no truncation */
        tail[0] = '-';
        memcpy(tail + 1, tag, tagn);
        memcpy(tail + 1 + tagn, pid, (size_t)pn + 1);
        tn = tagn + 1 + (size_t)pn;
    } else {
        memcpy(tail, pid, (size_t)pn + 1);
        tn = (size_t)pn;
    }
    size_t hn = strnlen(cfg->instance, TG_NAME_MAX - tn);
    memcpy(name, cfg->instance, hn);
    memcpy(name + hn, tail, tn + 1);
    char *copy = strdup(name);
    if (copy == NULL)
        return -ENOMEM;
    free(cfg->instance);
    cfg->instance = copy;
    return 0;
}

int tg_config_default(tg_config_t *cfg)
{
    *cfg = (tg_config_t){.max_frame_bytes = TG_DEF_MAX_FRAME_BYTES,
                         .idle_timeout_ms = TG_DEF_IDLE_TIMEOUT_MS,
                         .frame_timeout_ms = TG_DEF_FRAME_TIMEOUT_MS,
                         .handshake_timeout_ms = TG_DEF_HANDSHAKE_TIMEOUT_MS,
                         .reload_drain_timeout_ms = TG_DEF_RELOAD_DRAIN_TIMEOUT_MS,
                         .audit_queue = TG_DEF_AUDIT_QUEUE};
    cfg->instance = default_instance();
    cfg->agents = calloc(1, sizeof *cfg->agents);
    if (!cfg->instance || !cfg->agents)
        goto fail;
    cfg->nagents = 1;
    tg__cfg_agent_defaults(&cfg->agents[0]);
    cfg->agents[0].id = strdup("agent");
    if (!cfg->agents[0].id)
        goto fail;
    return 0;
fail:
    tg_config_free(cfg);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                             */

const tg_tool_cfg_t *tg__config_tool_find(const tg_agent_cfg_t *agent, const char *name,
                                          size_t len)
{
    for (size_t i = 0; i < agent->ntools; i++) {
        const char *n = agent->tools[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return &agent->tools[i];
    }
    return NULL;
}

tg_tool_cfg_t *tg__cfg_tool_get_or_add(tg_agent_cfg_t *a, const char *name, size_t len)
{
    tg_tool_cfg_t *t = (tg_tool_cfg_t *)tg_config_tool(a, name, len);
    tg_tool_cfg_t *v;
    char *copy;

    if (t)
        return t;
    if (a->ntools >= TG_CFG_TOOLS_MAX)
        return NULL;
    copy = strndup(name, len);
    if (!copy)
        return NULL;
    v = realloc(a->tools, (a->ntools + 1) * sizeof *v);
    if (!v) {
        free(copy);
        return NULL;
    }
    a->tools = v;
    t = &v[a->ntools++];
    memset(t, 0, sizeof *t);
    t->name = copy;
    return t;
}

/* ------------------------------------------------------------------ */
/* Frees                                                               */

void tg__cfg_free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void tg__cfg_argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

void tg__cfg_agent_free(void *v)
{
    tg_agent_cfg_t *a = v;

    free(a->id);
    tg__cfg_argv_free(a->command);
    tg__cfg_argv_free(a->env_pass);
    tg__cfg_argv_free(a->env_set);
    free(a->cwd);
    free(a->workspace);
    for (size_t i = 0; i < a->ntools; i++)
        free(a->tools[i].name);
    free(a->tools);
    tg_manifest_free(a->manifest);
    free(a->manifest);
    free(a->tool_prefix);
    memset(a, 0, sizeof *a);
}

void tg__cfg_sink_free(void *v)
{
    tg_audit_sink_cfg_t *s = v;

    free(s->path);
    free(s->stream);
    free(s->spool);
    tg__cfg_free_secret(s->url);
    explicit_bzero(&s->ep, sizeof s->ep);
}

void tg__cfg_listen_free(void *v)
{
    tg_listen_cfg_t *l = v;

    free(l->unix_path);
    free(l->agent);
    free(l->http_addr);
    free(l->http_path);
    free(l->tls_cert);
    free(l->tls_key);
    tg__cfg_argv_free(l->allowed_origins);
    for (size_t i = 0; i < l->nagents; i++)
        free(l->agents[i]);
    free(l->agents);
    l->agents = NULL;
    l->nagents = 0;
}

void tg__cfg_caller_free(void *v)
{
    tg_caller_cfg_t *cc = v;

    free(cc->name);
    if (cc->tokens)
        memset(cc->tokens, 0, cc->ntokens * sizeof *cc->tokens);
    free(cc->tokens);
    free(cc->jwt.issuer);
    free(cc->jwt.audience);
    free(cc->jwt.jwks_file);
    free(cc->jwt.claim);
    cc->tokens = NULL;
    cc->ntokens = 0;
}

void tg__cfg_items_free(void *v, size_t n, size_t size, void (*one)(void *))
{
    for (size_t i = 0; i < n; i++)
        one((char *)v + i * size);
    free(v);
}

void tg_config_free(tg_config_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->path);
    free(cfg->instance);
    free(cfg->audit_path);
    free(cfg->admin_addr);
    tg__cfg_free_secret(cfg->store.url);
    free(cfg->store.prefix);
    tg__cfg_items_free(cfg->audit_sinks, cfg->naudit_sinks, sizeof *cfg->audit_sinks,
                       tg__cfg_sink_free);
    tg__cfg_items_free(cfg->agents, cfg->nagents, sizeof *cfg->agents, tg__cfg_agent_free);
    tg__cfg_items_free(cfg->listen, cfg->nlisten, sizeof *cfg->listen, tg__cfg_listen_free);
    tg__cfg_items_free(cfg->callers, cfg->ncallers, sizeof *cfg->callers, tg__cfg_caller_free);
    json_decref(cfg->policy);
    memset(cfg, 0, sizeof *cfg);
}

/* ------------------------------------------------------------------ */
/* Copies: an element is counted (so freed on failure) only once its
 * owned pointers are cleared; they are then copied one by one.         */

static int dup_str(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

char **tg__cfg_argv_dup(char *const *argv)
{
    size_t n = 0;
    char **out;

    while (argv[n])
        n++;
    out = calloc(n + 1, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = strdup(argv[i]);
        if (!out[i]) {
            tg__cfg_argv_free(out);
            return NULL;
        }
    }
    return out;
}

static int dup_argv(char ***dst, char *const *src)
{
    *dst = src ? tg__cfg_argv_dup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

/* A copy of the <n> elements of <size> bytes at <src> in the T * at
 * <dst> (NULL for none); their owned pointers are still <src>'s. */
static int array_dup(void *dst, const void *src, size_t n, size_t size)
{
    void *copy = NULL;

    if (n && !(copy = malloc(n * size)))
        return -1;
    if (n)
        memcpy(copy, src, n * size);
    memcpy(dst, &copy, sizeof copy);
    return 0;
}

static int agent_clone(void *dv, const void *sv)
{
    tg_agent_cfg_t *d = dv;
    const tg_agent_cfg_t *s = sv;

    d->id = d->cwd = d->workspace = NULL;
    d->command = d->env_pass = d->env_set = NULL;
    d->tools = NULL;
    d->ntools = 0;
    d->manifest = NULL;
    d->tool_prefix = NULL;
    if (dup_str(&d->id, s->id) < 0 || dup_str(&d->tool_prefix, s->tool_prefix) < 0 ||
        dup_argv(&d->command, s->command) < 0 ||
        dup_argv(&d->env_pass, s->env_pass) < 0 || dup_argv(&d->env_set, s->env_set) < 0 ||
        dup_str(&d->cwd, s->cwd) < 0 || dup_str(&d->workspace, s->workspace) < 0)
        return -1;
    if (s->manifest && (!(d->manifest = malloc(sizeof *d->manifest)) ||
                        tg_manifest_copy(d->manifest, s->manifest) < 0)) {
        free(d->manifest);
        d->manifest = NULL;
        return -1;
    }
    if (array_dup(&d->tools, s->tools, s->ntools, sizeof *s->tools) < 0)
        return -1;
    for (; d->ntools < s->ntools; d->ntools++)
        if (dup_str(&d->tools[d->ntools].name, s->tools[d->ntools].name) < 0)
            return -1;
    return 0;
}

/* Element clones: <d> holds a flat copy of <s>; its owned pointers are
 * replaced by copies (NULL where a copy failed). */
static int sink_clone(void *dv, const void *sv)
{
    tg_audit_sink_cfg_t *d = dv;
    const tg_audit_sink_cfg_t *s = sv;

    d->path = d->url = d->stream = d->spool = NULL;
    return dup_str(&d->path, s->path) < 0 || dup_str(&d->url, s->url) < 0 ||
                   dup_str(&d->stream, s->stream) < 0 || dup_str(&d->spool, s->spool) < 0
               ? -1
               : 0;
}

static int listen_clone(void *dv, const void *sv)
{
    tg_listen_cfg_t *d = dv;
    const tg_listen_cfg_t *s = sv;

    d->unix_path = d->agent = d->http_addr = d->http_path = d->tls_cert = d->tls_key = NULL;
    d->allowed_origins = NULL;
    d->agents = NULL;
    d->nagents = 0;
    if (s->nagents && array_dup(&d->agents, s->agents, s->nagents, sizeof *s->agents) < 0)
        return -1;
    for (; d->nagents < s->nagents; d->nagents++)
        if (dup_str(&d->agents[d->nagents], s->agents[d->nagents]) < 0)
            return -1;
    if (dup_str(&d->unix_path, s->unix_path) < 0 || dup_str(&d->agent, s->agent) < 0 ||
        dup_str(&d->http_addr, s->http_addr) < 0 || dup_str(&d->http_path, s->http_path) < 0 ||
        dup_str(&d->tls_cert, s->tls_cert) < 0 || dup_str(&d->tls_key, s->tls_key) < 0)
        return -1;
    return s->allowed_origins != NULL && !(d->allowed_origins = tg__cfg_argv_dup(s->allowed_origins))
               ? -1
               : 0;
}

static int caller_clone(void *dv, const void *sv)
{
    tg_caller_cfg_t *d = dv;
    const tg_caller_cfg_t *s = sv;

    d->name = d->jwt.issuer = d->jwt.audience = d->jwt.jwks_file = d->jwt.claim = NULL;
    d->tokens = NULL;
    d->ntokens = 0;
    if (s->ntokens && array_dup(&d->tokens, s->tokens, s->ntokens, sizeof *s->tokens) < 0)
        return -1;
    d->ntokens = s->ntokens;
    return dup_str(&d->name, s->name) < 0 || dup_str(&d->jwt.issuer, s->jwt.issuer) < 0 ||
                   dup_str(&d->jwt.audience, s->jwt.audience) < 0 ||
                   dup_str(&d->jwt.jwks_file, s->jwt.jwks_file) < 0 ||
                   dup_str(&d->jwt.claim, s->jwt.claim) < 0
               ? -1
               : 0;
}

/* The <n> elements of <size> bytes at <src> into a new array at <slot>
 * (a T *), each by <one>; <count> counts the elements a free must see. */
static int clone_items(void *slot, const void *src, size_t n, size_t size, size_t *count,
                       int (*one)(void *d, const void *s))
{
    char *copy;

    if (array_dup(slot, src, n, size) < 0)
        return -1;
    memcpy(&copy, slot, sizeof copy);
    while (*count < n) {
        size_t i = (*count)++;
        if (one(copy + i * size, (const char *)src + i * size) < 0)
            return -1;
    }
    return 0;
}

int tg__cfg_clone(tg_config_t *dst, const tg_config_t *src)
{
    *dst = *src;
    dst->audit_sinks = NULL;
    dst->agents = NULL;
    dst->listen = NULL;
    dst->callers = NULL;
    dst->naudit_sinks = dst->nagents = dst->nlisten = dst->ncallers = 0;
    dst->path = dst->instance = dst->audit_path = dst->admin_addr = NULL;
    dst->store.url = dst->store.prefix = NULL;
    /* A copy, not a shared reference: a config is handed to other
     * threads whole, and jansson's reference counts are no lock. */
    dst->policy = NULL;
    if ((src->policy && !(dst->policy = json_deep_copy(src->policy))) ||
        dup_str(&dst->path, src->path) < 0 || dup_str(&dst->instance, src->instance) < 0 ||
        dup_str(&dst->audit_path, src->audit_path) < 0 ||
        dup_str(&dst->admin_addr, src->admin_addr) < 0 ||
        dup_str(&dst->store.url, src->store.url) < 0 ||
        dup_str(&dst->store.prefix, src->store.prefix) < 0 ||
        clone_items(&dst->audit_sinks, src->audit_sinks, src->naudit_sinks,
                    sizeof *src->audit_sinks, &dst->naudit_sinks, sink_clone) < 0 ||
        clone_items(&dst->listen, src->listen, src->nlisten, sizeof *src->listen, &dst->nlisten,
                    listen_clone) < 0 ||
        clone_items(&dst->callers, src->callers, src->ncallers, sizeof *src->callers,
                    &dst->ncallers, caller_clone) < 0 ||
        clone_items(&dst->agents, src->agents, src->nagents, sizeof *src->agents, &dst->nagents,
                    agent_clone) < 0) {
        tg_config_free(dst);
        return -1;
    }
    return 0;
}
