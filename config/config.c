/* Config model, JSON loader, --limit and validation (see config.h).
 *
 * Shape of this file:
 *  - value specs (kind + bounds) turn text or JSON into bytes, ms, counts
 *    and rates, with the "(expected ...)" messages of units.c;
 *  - one table of limit keys (lkeys) drives both the JSON execution_limits /
 *    tools objects and the CLI's --limit, so a key added there is accepted,
 *    bounded and reported the same way everywhere;
 *  - the JSON schema is a set of small member tables walked in document
 *    order, so the first error reported is the first one in the file;
 *  - positions: jansson keeps none for values, so an error's JSON path is
 *    located again in the original text with jscan.
 *
 * Loading is atomic: the file is applied to a deep copy of the config,
 * which replaces the original only when the whole file was accepted (a
 * SIGHUP reload with a bad file keeps the old config).
 */
#include "config/config.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config_impl.h"
#include "config/jscan.h"
#include "config/manifest.h"

#define TG_FMT(a, b) __attribute__((format(printf, a, b)))

#define CFG_DEPTH   8  /* fixed internal bound: JSON path depth the schema uses */
#define VALUE_SHOWN 64 /* fixed internal bound: bytes of a bad value echoed in a message */

/* ------------------------------------------------------------------ */
/* Names                                                               */

static const char name_chars_tool[] = "A-Z a-z 0-9 . _ : @ / -";
static const char name_chars_agent[] = "A-Z a-z 0-9 . _ -";

static bool name_chars_ok(const char *s, size_t len, bool tool_set)
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
    return s && name_chars_ok(s, len, true);
}

/* Agent ids end up in cgroup names, config paths and OpenSentience tool ids
 * ("<agent_id>/<tool>"), hence the narrower set: no ':', '@' or '/'. */
static bool agent_id_ok(const char *s)
{
    return s && name_chars_ok(s, strlen(s), false);
}

const char *tg_src_name(tg_src_t s)
{
    switch (s) {
    case TG_SRC_DEFAULT:
        return "default";
    case TG_SRC_FILE:
        return "file";
    case TG_SRC_CLI:
        return "--limit";
    case TG_SRC_MANIFEST:
        return "manifest";
    case TG_SRC_CAP:
        return "operator cap";
    }
    return "unknown";
}

/* The enums' order is the order of these names. */
static const char *const network_names[] = {"full", "loopback", "none", NULL};
static const char *const containment_names[] = {"best_effort", "required", "off", NULL};
static const char *const workspace_backend_names[] = {"auto", "tmpfs", "scan", NULL};

const char *tg_network_name(tg_network_t n)
{
    return (unsigned)n <= TG_NET_NONE ? network_names[n] : "unknown";
}

const char *tg_containment_mode_name(tg_containment_mode_t m)
{
    return (unsigned)m <= TG_CONTAINMENT_OFF ? containment_names[m] : "unknown";
}

const char *tg_workspace_backend_name(tg_workspace_backend_t b)
{
    return (unsigned)b <= TG_WORKSPACE_SCAN ? workspace_backend_names[b] : "unknown";
}

/* toolgate creates the workspace, may chown it to the agent's user and
 * mounts over it, all as root: a path that could mean something else
 * than it says ("..", a doubled '/'), or that lies on a kernel filesystem,
 * is refused rather than interpreted. */
int tg_config_workspace_check(const char *path, char *why, size_t cap)
{
    static const char *const kernel_fs[] = {"/proc", "/sys", "/dev"};
    size_t len = strlen(path);

    if (path[0] != '/') {
        snprintf(why, cap, "is not an absolute path");
        return -EINVAL;
    }
    if (len >= TG_WORKSPACE_PATH_MAX) {
        snprintf(why, cap, "is %zu bytes long (at most %d)", len, TG_WORKSPACE_PATH_MAX - 1);
        return -EINVAL;
    }
    if (len == 1) {
        snprintf(why, cap, "is the root directory");
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)path[i];
        if (ch < 0x20 || ch == 0x7f) {
            snprintf(why, cap, "holds a control byte at offset %zu", i);
            return -EINVAL;
        }
    }
    /* Each component: between one '/' and the next (or the end). */
    for (const char *p = path + 1;; ) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0) {
            snprintf(why, cap, "has an empty component (a doubled or trailing '/')");
            return -EINVAL;
        }
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            snprintf(why, cap, "has a \"%.*s\" component", (int)n, p);
            return -EINVAL;
        }
        if (!e)
            break;
        p = e + 1;
    }
    for (size_t i = 0; i < sizeof kernel_fs / sizeof kernel_fs[0]; i++) {
        size_t kl = strlen(kernel_fs[i]);
        if (strncmp(path, kernel_fs[i], kl) == 0 && (path[kl] == '\0' || path[kl] == '/')) {
            snprintf(why, cap, "lies under %s, a kernel filesystem", kernel_fs[i]);
            return -EINVAL;
        }
    }
    return 0;
}

/* Quote <len> bytes of <s> for a message: "..." with '"', '\\' and control
 * bytes escaped, cut at VALUE_SHOWN bytes. Bad values come from the
 * operator's own file or command line, but they are still echoed to a
 * terminal, so nothing raw. */
static void quote(char *out, size_t cap, const char *s, size_t len)
{
    size_t o = 0;
    bool cut = len > VALUE_SHOWN;

    if (cap < 8) {
        if (cap)
            out[0] = '\0';
        return;
    }
    if (cut)
        len = VALUE_SHOWN;
    out[o++] = '"';
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (cut && o + 5 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* ------------------------------------------------------------------ */
/* Values                                                              */

typedef enum vkind {
    V_BYTES = 0,
    V_DURATION,
    V_RATE,
    V_COUNT,
    V_MILLICORES,
    V_BANDWIDTH, /* bits per second */
    V_NETWORK,   /* tg_network_t */
} vkind_t;

typedef struct vspec {
    vkind_t kind;
    uint64_t min, max; /* for V_RATE: bounds of the count */
    bool bare_int;     /* V_BYTES: a JSON integer is a number of bytes */
} vspec_t;

typedef struct val {
    uint64_t u;
    tg_rate_t rate;
} val_t;

static const char *kind_noun(vkind_t k)
{
    switch (k) {
    case V_BYTES:
        return "a size";
    case V_DURATION:
        return "a duration";
    case V_RATE:
        return "a rate";
    case V_COUNT:
        return "a count";
    case V_MILLICORES:
        return "a CPU quantity";
    case V_BANDWIDTH:
        return "a bandwidth";
    case V_NETWORK:
        return "a network mode";
    }
    return "a value";
}

/* "10Mbps": the largest decimal unit that divides <bps> exactly. */
static void fmt_bandwidth(char *buf, size_t cap, uint64_t bps)
{
    if (bps && bps % 1000000000u == 0)
        snprintf(buf, cap, "%lluGbps", (unsigned long long)(bps / 1000000000u));
    else if (bps && bps % 1000000u == 0)
        snprintf(buf, cap, "%lluMbps", (unsigned long long)(bps / 1000000u));
    else if (bps && bps % 1000u == 0)
        snprintf(buf, cap, "%lluKbps", (unsigned long long)(bps / 1000u));
    else
        snprintf(buf, cap, "%llu bit/s", (unsigned long long)bps);
}

static void fmt_num(char *buf, size_t cap, vkind_t k, uint64_t n)
{
    switch (k) {
    case V_BYTES:
        tg_unit_fmt_bytes(buf, (int)cap, n);
        break;
    case V_DURATION:
        tg_unit_fmt_duration(buf, (int)cap, n);
        break;
    case V_RATE:
    case V_COUNT:
        snprintf(buf, cap, "%llu", (unsigned long long)n);
        break;
    case V_MILLICORES:
        snprintf(buf, cap, "%llum", (unsigned long long)n);
        break;
    case V_BANDWIDTH:
        fmt_bandwidth(buf, cap, n);
        break;
    case V_NETWORK:
        snprintf(buf, cap, "%s", tg_network_name((tg_network_t)n));
        break;
    }
}

/* "(expected ...)" for a value outside [min, max] of <sp>. */
static void range_why(char *buf, size_t cap, const vspec_t *sp)
{
    char lo[32], hi[32];

    fmt_num(lo, sizeof lo, sp->kind, sp->min);
    fmt_num(hi, sizeof hi, sp->kind, sp->max);
    if (sp->kind == V_RATE)
        snprintf(buf, cap, "expected at most %s calls per period", hi);
    else if (sp->kind == V_COUNT || sp->min > 1)
        snprintf(buf, cap, "expected %s to %s", lo, hi);
    else
        snprintf(buf, cap, "expected at most %s", hi);
}

static bool in_range(const vspec_t *sp, const val_t *v)
{
    uint64_t n = sp->kind == V_RATE ? v->rate.count : v->u;
    return n >= sp->min && n <= sp->max;
}

/* Parse text <s> per <sp>. On failure writes the message tail
 * ("\"x\" is not a rate (expected ...)") into <msg> and returns -1. */
static int parse_text(const vspec_t *sp, const char *s, val_t *out, char *msg, size_t cap)
{
    const char *why = NULL;
    char q[VALUE_SHOWN * 4 + 8], rw[96];
    val_t v = {0};
    int rc = 0;

    switch (sp->kind) {
    case V_BYTES:
        rc = tg_unit_bytes(s, &v.u, &why);
        break;
    case V_DURATION:
        rc = tg_unit_duration_ms(s, &v.u, &why);
        break;
    case V_RATE:
        rc = tg_unit_rate(s, &v.rate, &why);
        break;
    case V_COUNT:
        /* Zero is a meaningful count for some keys (no queue, no
         * restarts): tg_unit_count refuses it, so it is taken here. */
        if (sp->min == 0 && s[0] == '0' && strspn(s, "0") == strlen(s))
            v.u = 0;
        else
            rc = tg_unit_count(s, UINT64_MAX, &v.u, &why);
        break;
    case V_MILLICORES:
        rc = tg_unit_millicores(s, &v.u, &why);
        break;
    case V_BANDWIDTH:
        rc = tg_unit_bandwidth_bps(s, &v.u, &why);
        break;
    case V_NETWORK:
        rc = -EINVAL;
        why = "expected \"none\", \"loopback\" or \"full\"";
        for (int i = 0; network_names[i]; i++) {
            if (strcmp(s, network_names[i]) == 0) {
                v.u = (uint64_t)i;
                rc = 0;
            }
        }
        break;
    }
    quote(q, sizeof q, s, strlen(s));
    if (rc == -EINVAL) {
        snprintf(msg, cap, "%s is not %s (%s)", q, kind_noun(sp->kind), why);
        return -1;
    }
    if (rc == -ERANGE && sp->kind != V_COUNT) {
        snprintf(msg, cap, "%s is out of range (%s)", q, why);
        return -1;
    }
    if (rc != 0 || !in_range(sp, &v)) {
        range_why(rw, sizeof rw, sp);
        snprintf(msg, cap, "%s is out of range (%s)", q, rw);
        return -1;
    }
    *out = v;
    return 0;
}

static const char *json_type_noun(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

/* Parse JSON value <v> per <sp>; same contract as parse_text. Sizes,
 * durations and rates must be strings (the unit is part of the value);
 * counts may be integers or strings. */
static int parse_json(const vspec_t *sp, const json_t *v, val_t *out, char *msg, size_t cap)
{
    if (json_is_string(v))
        return parse_text(sp, json_string_value(v), out, msg, cap);
    if (json_is_integer(v) && (sp->kind == V_COUNT || sp->bare_int)) {
        json_int_t n = json_integer_value(v);
        val_t x = {.u = n < 0 ? 0 : (uint64_t)n};
        char rw[96];
        if (n < 0 || !in_range(sp, &x)) {
            range_why(rw, sizeof rw, sp);
            snprintf(msg, cap, "%lld is out of range (%s)", (long long)n, rw);
            return -1;
        }
        *out = x;
        return 0;
    }
    switch (sp->kind) {
    case V_BYTES:
        snprintf(msg, cap, "expected a size string such as \"4Mi\"%s, got %s",
                 sp->bare_int ? " or a number of bytes" : "", json_type_noun(v));
        break;
    case V_DURATION:
        snprintf(msg, cap, "expected a duration string such as \"30s\", got %s", json_type_noun(v));
        break;
    case V_RATE:
        snprintf(msg, cap, "expected a rate string such as \"100/minute\", got %s",
                 json_type_noun(v));
        break;
    case V_COUNT:
        snprintf(msg, cap, "expected a whole number such as 5, got %s", json_type_noun(v));
        break;
    case V_MILLICORES:
        snprintf(msg, cap, "expected a CPU string such as \"500m\" or \"2\", got %s",
                 json_type_noun(v));
        break;
    case V_BANDWIDTH:
        snprintf(msg, cap, "expected a bandwidth string such as \"10Mbps\", got %s",
                 json_type_noun(v));
        break;
    case V_NETWORK:
        snprintf(msg, cap, "expected \"none\", \"loopback\" or \"full\", got %s",
                 json_type_noun(v));
        break;
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Limit keys: the one table behind execution_limits, tools and --limit.
 * To add a key (e.g. the resource keys), add a row with its spec and
 * scopes, and its set/get pair. */

enum {
    S_ROUTER = 1, /* one value for the whole config */
    S_AGENT = 2,  /* agents[].execution_limits */
    S_TOOL = 4,   /* agents[].tools.NAME */
    S_RES = 8,    /* agents[].resources.KEY.limit, and --limit KEY=VALUE */
    S_NET = 16,   /* agents[].resources.network.KEY (not a --limit key) */
    S_MAN = 32,   /* a manifest's execution_limits */
};

typedef struct lkey {
    const char *name;
    vspec_t spec;
    unsigned scopes;
    void (*set)(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                tg_src_t src);
    /* false when the value is not set in this scope (a tool field left to
     * the agent, burst left equal to the rate's count). */
    bool (*get)(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                bool tool, val_t *v);
} lkey_t;

static void set_frame(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                      tg_src_t src)
{
    cfg->max_frame_bytes = v->u;
    cfg->max_frame_src = src;
}

static bool get_frame(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                      bool tool, val_t *v)
{
    v->u = cfg->max_frame_bytes;
    return true;
}

static void set_duration(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                         tg_src_t src)
{
    lim->max_tool_call_duration_ms = v->u;
    lim->duration_src = src;
}

static bool get_duration(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                         const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = lim->max_tool_call_duration_ms;
    return !tool || lim->duration_src != TG_SRC_DEFAULT;
}

static void set_concurrent(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim,
                           const val_t *v, tg_src_t src)
{
    lim->max_concurrent_calls = (uint32_t)v->u;
    lim->concurrent_src = src;
}

static bool get_concurrent(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                           const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = lim->max_concurrent_calls;
    return !tool || lim->concurrent_src != TG_SRC_DEFAULT;
}

static void set_queued(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                       tg_src_t src)
{
    lim->max_queued_calls = (uint32_t)v->u;
    lim->queued_src = src;
}

static bool get_queued(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                       bool tool, val_t *v)
{
    v->u = lim->max_queued_calls;
    return !tool || lim->queued_src != TG_SRC_DEFAULT;
}

static void set_rate(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                     tg_src_t src)
{
    lim->rate_limit = v->rate;
    lim->rate_src = src;
}

static bool get_rate(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                     bool tool, val_t *v)
{
    v->rate = lim->rate_limit;
    return !tool || lim->rate_src != TG_SRC_DEFAULT;
}

static void set_burst(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                      tg_src_t src)
{
    lim->burst = (uint32_t)v->u;
    lim->burst_src = src;
}

static bool get_burst(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                      bool tool, val_t *v)
{
    v->u = lim->burst;
    return lim->burst_src != TG_SRC_DEFAULT;
}

static void set_grace(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                      tg_src_t src)
{
    a->kill_grace_ms = v->u;
    a->kill_grace_src = src;
}

static bool get_grace(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                      bool tool, val_t *v)
{
    v->u = a->kill_grace_ms;
    return true;
}

/* Resources: always set in an agent (a default at least). */

static void set_memory(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                       tg_src_t src)
{
    a->res.memory_bytes = v->u;
    a->res.memory_src = src;
}

static bool get_memory(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                       const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = a->res.memory_bytes;
    return true;
}

static void set_cpu(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                    tg_src_t src)
{
    a->res.cpu_millicores = v->u;
    a->res.cpu_src = src;
}

static bool get_cpu(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                    bool tool, val_t *v)
{
    v->u = a->res.cpu_millicores;
    return true;
}

static void set_pids(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                     tg_src_t src)
{
    a->res.pids = v->u;
    a->res.pids_src = src;
}

static bool get_pids(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                     bool tool, val_t *v)
{
    v->u = a->res.pids;
    return true;
}

static void set_nofile(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                       tg_src_t src)
{
    a->res.nofile = v->u;
    a->res.nofile_src = src;
}

static bool get_nofile(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                       const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = a->res.nofile;
    return true;
}

static void set_disk(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim, const val_t *v,
                     tg_src_t src)
{
    a->res.disk_bytes = v->u;
    a->res.disk_src = src;
}

static bool get_disk(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                     bool tool, val_t *v)
{
    v->u = a->res.disk_bytes;
    return true;
}

static void set_network(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim,
                        const val_t *v, tg_src_t src)
{
    a->res.network = (tg_network_t)v->u;
    a->res.network_src = src;
}

static bool get_network(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                        const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = (uint64_t)a->res.network;
    return true;
}

/* Bandwidth and connections: 0 = not limited, so "not set". */
static void set_bandwidth(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim,
                          const val_t *v, tg_src_t src)
{
    a->res.bandwidth_bps = v->u;
    a->res.bandwidth_src = src;
}

static bool get_bandwidth(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                          const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = a->res.bandwidth_bps;
    return v->u != 0;
}

static void set_connections(tg_config_t *cfg, tg_agent_cfg_t *a, tg_exec_limits_t *lim,
                            const val_t *v, tg_src_t src)
{
    a->res.max_connections = v->u;
    a->res.connections_src = src;
}

static bool get_connections(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                            const tg_exec_limits_t *lim, bool tool, val_t *v)
{
    v->u = a->res.max_connections;
    return v->u != 0;
}

/* One row per key (clang-format would put one field per line). */
/* clang-format off */
static const lkey_t lkeys[] = {
    {"max_frame_bytes", {V_BYTES, TG_MIN_FRAME_BYTES, TG_MAX_FRAME_BYTES_CEIL, true},
     S_ROUTER, set_frame, get_frame},
    {"max_tool_call_duration", {V_DURATION, 1, TG_MAX_DURATION_CEIL_MS, false},
     S_AGENT | S_TOOL | S_MAN, set_duration, get_duration},
    {"max_concurrent_calls", {V_COUNT, 1, TG_MAX_CONCURRENT_CEIL, false},
     S_AGENT | S_TOOL | S_MAN, set_concurrent, get_concurrent},
    /* 0 = no waiting room: refuse as soon as every slot is busy. */
    {"max_queued_calls", {V_COUNT, 0, TG_MAX_QUEUED_CEIL, false},
     S_AGENT | S_TOOL | S_MAN, set_queued, get_queued},
    {"rate_limit", {V_RATE, 1, TG_RATE_COUNT_CEIL, false},
     S_AGENT | S_TOOL | S_MAN, set_rate, get_rate},
    {"burst", {V_COUNT, 1, TG_BURST_CEIL, false},
     S_AGENT | S_TOOL | S_MAN, set_burst, get_burst},
    /* How long toolgate waits for a stuck agent is the operator's call,
     * not the agent's: no S_MAN. */
    {"kill_grace_period", {V_DURATION, 1, TG_KILL_GRACE_CEIL_MS, false},
     S_AGENT, set_grace, get_grace},
    {"memory", {V_BYTES, TG_MEMORY_MIN, TG_MEMORY_CEIL, true},
     S_RES, set_memory, get_memory},
    {"cpu", {V_MILLICORES, TG_CPU_MIN_MC, TG_CPU_CEIL_MC, false},
     S_RES, set_cpu, get_cpu},
    {"pids", {V_COUNT, 1, TG_PIDS_CEIL, false},
     S_RES, set_pids, get_pids},
    {"nofile", {V_COUNT, 16, TG_NOFILE_CEIL, false},
     S_RES, set_nofile, get_nofile},
    {"disk", {V_BYTES, TG_DISK_MIN, TG_DISK_CEIL, true},
     S_RES, set_disk, get_disk},
    {"network", {V_NETWORK, TG_NET_FULL, TG_NET_NONE, false},
     S_RES, set_network, get_network},
    {"bandwidth_limit", {V_BANDWIDTH, TG_BANDWIDTH_MIN_BPS, TG_BANDWIDTH_CEIL_BPS, false},
     S_NET, set_bandwidth, get_bandwidth},
    {"max_connections", {V_COUNT, 1, TG_CONNECTIONS_CEIL, false},
     S_NET, set_connections, get_connections},
};
/* clang-format on */
#define NLKEYS (sizeof lkeys / sizeof lkeys[0])

static const lkey_t *lkey_find(const char *name, size_t len, unsigned scopes)
{
    for (size_t i = 0; i < NLKEYS; i++)
        if ((lkeys[i].scopes & scopes) && strlen(lkeys[i].name) == len &&
            memcmp(lkeys[i].name, name, len) == 0)
            return &lkeys[i];
    return NULL;
}

/* Append ", "-separated names to <buf> (NUL-terminated, capacity <cap>). */
static void list_add(char *buf, size_t cap, const char *name)
{
    size_t n = strlen(buf);
    if (n < cap)
        snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", name);
}

static void lkeys_list(char *buf, size_t cap, unsigned scopes)
{
    buf[0] = '\0';
    for (size_t i = 0; i < NLKEYS; i++)
        if (lkeys[i].scopes & scopes)
            list_add(buf, cap, lkeys[i].name);
}

/* ------------------------------------------------------------------ */
/* Model: defaults, copies, frees                                      */

static void lim_defaults(tg_exec_limits_t *l)
{
    memset(l, 0, sizeof *l);
    l->max_tool_call_duration_ms = TG_DEF_CALL_DURATION_MS;
    l->max_concurrent_calls = TG_DEF_MAX_CONCURRENT;
    l->max_queued_calls = TG_DEF_MAX_QUEUED;
    l->rate_limit.count = TG_DEF_RATE_COUNT;
    l->rate_limit.period_ms = TG_DEF_RATE_PERIOD_MS;
    l->burst = 0;
}

void tg_resources_default(tg_resources_t *r)
{
    memset(r, 0, sizeof *r);
    r->memory_bytes = TG_DEF_MEMORY_BYTES;
    r->cpu_millicores = TG_DEF_CPU_MILLICORES;
    r->pids = TG_DEF_PIDS;
    r->disk_bytes = TG_DEF_DISK_BYTES;
    r->network = TG_NET_FULL;
    r->nofile = TG_CONTAIN_DEF_NOFILE;
}

/* Every field at its DESIGN.md default; id and command left NULL. */
static void agent_defaults(tg_agent_cfg_t *a)
{
    memset(a, 0, sizeof *a);
    a->dialect = TG_DIALECT_MCP;
    lim_defaults(&a->lim);
    a->kill_grace_ms = TG_DEF_KILL_GRACE_MS;
    a->restart_policy = TG_RESTART_ON_FAILURE;
    a->max_restarts = TG_DEF_MAX_RESTARTS;
    a->restart_window_ms = TG_DEF_RESTART_WINDOW_MS;
    a->backoff_initial_ms = TG_DEF_BACKOFF_INITIAL_MS;
    a->backoff_max_ms = TG_DEF_BACKOFF_MAX_MS;
    a->stderr_bytes_per_sec = TG_DEF_STDERR_BPS;
    a->stderr_line_max = TG_DEF_STDERR_LINE;
    a->max_instances = TG_DEF_MAX_INSTANCES;
    a->os.heartbeat_interval_ms = TG_DEF_OS_HEARTBEAT_MS;
    a->os.heartbeat_timeout_ms = TG_DEF_OS_HEARTBEAT_TIMEOUT_MS;
    a->os.idempotency_window_ms = TG_DEF_OS_IDEM_WINDOW_MS;
    a->os.idempotency_max_bytes = TG_DEF_OS_IDEM_MAX_BYTES;
    tg_resources_default(&a->res);
}

static void argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

static char **argv_dup(char *const *argv)
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
            argv_free(out);
            return NULL;
        }
    }
    return out;
}

static void agent_free(tg_agent_cfg_t *a)
{
    free(a->id);
    argv_free(a->command);
    argv_free(a->env_pass);
    argv_free(a->env_set);
    free(a->cwd);
    free(a->workspace);
    for (size_t i = 0; i < a->ntools; i++)
        free(a->tools[i].name);
    free(a->tools);
    tg_manifest_free(a->manifest);
    free(a->manifest);
    memset(a, 0, sizeof *a);
}

static void agents_free(tg_agent_cfg_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        agent_free(&v[i]);
    free(v);
}

static int agent_clone(tg_agent_cfg_t *dst, const tg_agent_cfg_t *src)
{
    *dst = *src;
    dst->id = NULL;
    dst->command = NULL;
    dst->env_pass = dst->env_set = NULL;
    dst->cwd = NULL;
    dst->workspace = NULL;
    if (src->env_pass && !(dst->env_pass = argv_dup(src->env_pass)))
        goto fail;
    if (src->env_set && !(dst->env_set = argv_dup(src->env_set)))
        goto fail;
    if (src->cwd && !(dst->cwd = strdup(src->cwd)))
        goto fail;
    if (src->workspace && !(dst->workspace = strdup(src->workspace)))
        goto fail;
    dst->tools = NULL;
    dst->ntools = 0;
    dst->manifest = NULL;
    if (src->id && !(dst->id = strdup(src->id)))
        goto fail;
    if (src->manifest) {
        if (!(dst->manifest = malloc(sizeof *dst->manifest)))
            goto fail;
        if (tg_manifest_copy(dst->manifest, src->manifest) < 0) {
            free(dst->manifest);
            dst->manifest = NULL;
            goto fail;
        }
    }
    if (src->command && !(dst->command = argv_dup(src->command)))
        goto fail;
    if (src->ntools) {
        dst->tools = calloc(src->ntools, sizeof *dst->tools);
        if (!dst->tools)
            goto fail;
        for (size_t i = 0; i < src->ntools; i++) {
            dst->tools[i] = src->tools[i];
            dst->tools[i].name = strdup(src->tools[i].name);
            if (!dst->tools[i].name)
                goto fail;
            dst->ntools = i + 1;
        }
    }
    return 0;
fail:
    agent_free(dst);
    return -1;
}

static void sink_free(tg_audit_sink_cfg_t *s)
{
    free(s->path);
    free(s->stream);
    free(s->spool);
    if (s->url) {
        /* it may hold a password */
        explicit_bzero(s->url, strlen(s->url));
        free(s->url);
    }
    explicit_bzero(&s->ep, sizeof s->ep);
}

static void sinks_free(tg_audit_sink_cfg_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sink_free(&v[i]);
    free(v);
}

static int strdup_opt(char **dst, const char *src)
{
    *dst = NULL;
    return src && !(*dst = strdup(src)) ? -1 : 0;
}

static int sinks_clone(tg_config_t *dst, const tg_config_t *src)
{
    if (!src->naudit_sinks)
        return 0;
    dst->audit_sinks = calloc(src->naudit_sinks, sizeof *dst->audit_sinks);
    if (!dst->audit_sinks)
        return -1;
    for (size_t i = 0; i < src->naudit_sinks; i++) {
        const tg_audit_sink_cfg_t *s = &src->audit_sinks[i];
        tg_audit_sink_cfg_t *d = &dst->audit_sinks[i];
        *d = *s;
        d->path = d->url = d->stream = d->spool = NULL;
        dst->naudit_sinks = i + 1;
        if (strdup_opt(&d->path, s->path) < 0 || strdup_opt(&d->url, s->url) < 0 ||
            strdup_opt(&d->stream, s->stream) < 0 || strdup_opt(&d->spool, s->spool) < 0)
            return -1;
    }
    return 0;
}

/* router.listen and callers[]: owned strings in arrays. */
static void serve_free(tg_config_t *cfg)
{
    free(cfg->store.url);
    free(cfg->store.prefix);
    free(cfg->admin_addr);
    cfg->store.url = cfg->store.prefix = cfg->admin_addr = NULL;
    for (size_t i = 0; i < cfg->nlisten; i++) {
        free(cfg->listen[i].unix_path);
        free(cfg->listen[i].agent);
    }
    free(cfg->listen);
    for (size_t i = 0; i < cfg->ncallers; i++)
        free(cfg->callers[i].name);
    free(cfg->callers);
    cfg->listen = NULL;
    cfg->callers = NULL;
    cfg->nlisten = cfg->ncallers = 0;
}

static int serve_clone(tg_config_t *dst, const tg_config_t *src)
{
    dst->admin_addr = src->admin_addr ? strdup(src->admin_addr) : NULL;
    if (src->admin_addr && !dst->admin_addr)
        return -1;
    dst->store.url = src->store.url ? strdup(src->store.url) : NULL;
    dst->store.prefix = src->store.prefix ? strdup(src->store.prefix) : NULL;
    if ((src->store.url && !dst->store.url) || (src->store.prefix && !dst->store.prefix))
        return -1;
    if (src->nlisten) {
        if (!(dst->listen = calloc(src->nlisten, sizeof *dst->listen)))
            return -1;
        for (size_t i = 0; i < src->nlisten; i++) {
            dst->listen[i] = src->listen[i];
            dst->listen[i].unix_path = strdup(src->listen[i].unix_path);
            dst->listen[i].agent = src->listen[i].agent ? strdup(src->listen[i].agent) : NULL;
            dst->nlisten = i + 1;
            if (!dst->listen[i].unix_path || (src->listen[i].agent && !dst->listen[i].agent))
                return -1;
        }
    }
    if (src->ncallers) {
        if (!(dst->callers = calloc(src->ncallers, sizeof *dst->callers)))
            return -1;
        for (size_t i = 0; i < src->ncallers; i++) {
            dst->callers[i] = src->callers[i];
            dst->callers[i].name = strdup(src->callers[i].name);
            dst->ncallers = i + 1;
            if (!dst->callers[i].name)
                return -1;
        }
    }
    return 0;
}

static int config_clone(tg_config_t *dst, const tg_config_t *src)
{
    *dst = *src;
    dst->path = NULL;
    dst->instance = NULL;
    dst->audit_path = NULL;
    dst->audit_sinks = NULL;
    dst->naudit_sinks = 0;
    dst->agents = NULL;
    dst->nagents = 0;
    dst->listen = NULL;
    dst->nlisten = 0;
    dst->callers = NULL;
    dst->ncallers = 0;
    if (serve_clone(dst, src) < 0)
        goto fail;
    if (src->path && !(dst->path = strdup(src->path)))
        goto fail;
    if (src->instance && !(dst->instance = strdup(src->instance)))
        goto fail;
    if (src->audit_path && !(dst->audit_path = strdup(src->audit_path)))
        goto fail;
    if (sinks_clone(dst, src) < 0)
        goto fail;
    if (src->nagents) {
        dst->agents = calloc(src->nagents, sizeof *dst->agents);
        if (!dst->agents)
            goto fail;
        for (size_t i = 0; i < src->nagents; i++) {
            if (agent_clone(&dst->agents[i], &src->agents[i]) < 0)
                goto fail;
            dst->nagents = i + 1;
        }
    }
    return 0;
fail:
    tg_config_free(dst);
    return -1;
}

/* The entry for tool <name> (<len> bytes) in <a>, created with every field
 * unset when missing. NULL on ENOMEM or when the agent has
 * TG_CFG_TOOLS_MAX tools already. */
static tg_tool_cfg_t *tool_get_or_add(tg_agent_cfg_t *a, const char *name, size_t len)
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
        if (!name_chars_ok(&host[i], 1, true))
            host[i] = '_';
    return strdup(host);
}

int tg_config_default(tg_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_frame_bytes = TG_DEF_MAX_FRAME_BYTES;
    cfg->idle_timeout_ms = TG_DEF_IDLE_TIMEOUT_MS;
    cfg->max_frame_src = TG_SRC_DEFAULT;
    cfg->audit_queue = TG_DEF_AUDIT_QUEUE;
    cfg->instance = default_instance();
    cfg->agents = calloc(1, sizeof *cfg->agents);
    if (!cfg->instance || !cfg->agents)
        goto fail;
    cfg->nagents = 1;
    agent_defaults(&cfg->agents[0]);
    cfg->agents[0].id = strdup("agent");
    if (!cfg->agents[0].id)
        goto fail;
    return 0;
fail:
    tg_config_free(cfg);
    return -1;
}

void tg_config_sink_defaults(tg_audit_sink_cfg_t *s, tg_audit_sink_kind_t kind)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->max_bytes = TG_DEF_AUDIT_MAX_BYTES;
    s->keep = TG_DEF_AUDIT_KEEP;
    s->fsync = TG_AUDIT_FSYNC_INTERVAL;
    s->fsync_interval_ms = TG_DEF_AUDIT_FSYNC_MS;
    s->maxlen = TG_DEF_AUDIT_MAXLEN;
    s->spool_max_bytes = TG_DEF_AUDIT_SPOOL_BYTES;
    s->timeout_ms = TG_DEF_AUDIT_REDIS_TIMEOUT_MS;
}

void tg_config_free(tg_config_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->path);
    free(cfg->instance);
    free(cfg->audit_path);
    sinks_free(cfg->audit_sinks, cfg->naudit_sinks);
    agents_free(cfg->agents, cfg->nagents);
    serve_free(cfg);
    memset(cfg, 0, sizeof *cfg);
}

const tg_tool_cfg_t *tg_config_tool(const tg_agent_cfg_t *agent, const char *name, size_t len)
{
    if (!agent || !name)
        return NULL;
    for (size_t i = 0; i < agent->ntools; i++) {
        const char *n = agent->tools[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return &agent->tools[i];
    }
    return NULL;
}

int tg_config_path_for(const tg_agent_cfg_t *a, const char *tool, const char *key, char *buf,
                       size_t cap)
{
    const lkey_t *k = key ? lkey_find(key, strlen(key), S_ROUTER) : NULL;
    const lkey_t *res = key ? lkey_find(key, strlen(key), S_RES | S_NET) : NULL;
    int n;

    if (!a || !a->id || !key || !buf)
        return -EINVAL;
    if (tool && !tg_config_tool_name_ok(tool, strlen(tool)))
        return -EINVAL;
    if (k)
        n = snprintf(buf, cap, "router.%s", key);
    else if (res && (res->scopes & S_NET))
        n = snprintf(buf, cap, "agents.%s.resources.network.%s", a->id, key);
    else if (res && res->spec.kind == V_NETWORK)
        n = snprintf(buf, cap, "agents.%s.resources.network", a->id);
    else if (res)
        n = snprintf(buf, cap, "agents.%s.resources.%s.limit", a->id, key);
    else if (tool)
        n = snprintf(buf, cap, "agents.%s.tools.%s.%s", a->id, tool, key);
    else
        n = snprintf(buf, cap, "agents.%s.execution_limits.%s", a->id, key);
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    return n;
}

/* ------------------------------------------------------------------ */
/* Errors with positions                                               */

static int err_set(tg_cfg_err_t *err, const char *fmt, ...) TG_FMT(2, 3);
static int err_set(tg_cfg_err_t *err, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The loader's state. <comp>/<idx> is the JSON path of the value being
 * read: comp[i] is an object key, or NULL for the array index idx[i]. */
typedef struct ctx {
    const char *file;
    const char *text;
    size_t len;
    tg_cfg_err_t *err;
    const char *comp[CFG_DEPTH];
    size_t idx[CFG_DEPTH];
    int depth;
    tg_config_t *cfg;      /* the copy being built */
    tg_agent_cfg_t *agent; /* current agent */
    tg_exec_limits_t *lim; /* current execution_limits or tool scope */
    unsigned scope;        /* S_AGENT, S_TOOL or S_MAN */
    tg_src_t src;          /* TG_SRC_FILE, or TG_SRC_MANIFEST for a manifest */
    const char *config_path; /* the config file (manifests are found beside it), or NULL */
    const char *manifest;    /* current agent's "manifest" value (in the JSON tree), or NULL */
    tg_audit_sink_cfg_t *sink; /* current audit.sinks[] entry */
    bool sink_interval_set;    /* it has an explicit fsync_interval */
    tg_listen_cfg_t *cur_listen; /* current router.listen[] entry */
    tg_caller_cfg_t *cur_caller; /* current callers[] entry */
} ctx_t;

/* The schema never nests deeper than CFG_DEPTH; a push past it keeps the
 * path at its deepest known prefix (the position is then less precise but
 * still inside the offending value). */
static int push_key(ctx_t *c, const char *key)
{
    if (c->depth >= CFG_DEPTH)
        return 0;
    c->comp[c->depth] = key;
    c->idx[c->depth] = 0;
    c->depth++;
    return 1;
}

static int push_idx(ctx_t *c, size_t i)
{
    if (c->depth >= CFG_DEPTH)
        return 0;
    c->comp[c->depth] = NULL;
    c->idx[c->depth] = i;
    c->depth++;
    return 1;
}

static void pop(ctx_t *c, int pushed)
{
    c->depth -= pushed;
}

/* Display form of the first <n> components: agents[0].tools.web.burst */
static void path_display(const ctx_t *c, int n, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && o < cap; i++) {
        int w;
        if (c->comp[i])
            w = snprintf(buf + o, cap - o, "%s%s", o ? "." : "", c->comp[i]);
        else
            w = snprintf(buf + o, cap - o, "[%zu]", c->idx[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

/* Element <i> of the array span <arr>. */
static bool array_nth(const char *buf, tg_jspan_t arr, size_t i, tg_jspan_t *out)
{
    size_t pos = arr.off + 1, end = arr.off + arr.len - 1;

    for (size_t k = 0;; k++) {
        tg_jspan_t el;
        long next = tg_jscan_value(buf, end, pos, &el);
        if (next < 0)
            return false;
        if (k == i) {
            *out = el;
            return true;
        }
        pos = (size_t)next;
        while (pos < end &&
               (buf[pos] == ' ' || buf[pos] == '\t' || buf[pos] == '\n' || buf[pos] == '\r'))
            pos++;
        if (pos >= end || buf[pos] != ',')
            return false;
        pos++;
    }
}

/* Offset in the text of the value at the first <n> path components, or,
 * with <want_key>, of the key of the last one. The leading components are
 * found with tg_jscan_find_path; from the first key holding a '.' (which
 * the dotted form cannot express; tool names may hold dots) the walk goes
 * on member by member. */
static bool locate(const ctx_t *c, int n, bool want_key, size_t *off)
{
    char jp[512];
    size_t jl = 0;
    int k = 0, plain = want_key ? n - 1 : n;
    tg_jspan_t cur;

    if (tg_jscan_value(c->text, c->len, 0, &cur) < 0)
        return false;
    jp[0] = '\0';
    for (; k < plain; k++) {
        int w;
        if (c->comp[k] && strchr(c->comp[k], '.'))
            break;
        if (c->comp[k])
            w = snprintf(jp + jl, sizeof jp - jl, "%s%s", jl ? "." : "", c->comp[k]);
        else
            w = snprintf(jp + jl, sizeof jp - jl, "%s%zu", jl ? "." : "", c->idx[k]);
        if (w < 0 || (size_t)w >= sizeof jp - jl) {
            jp[jl] = '\0';
            break;
        }
        jl += (size_t)w;
    }
    if (jl > 0 && tg_jscan_find_path(c->text, c->len, jp, &cur) < 0)
        return false;
    for (; k < n; k++) {
        if (!c->comp[k]) {
            if (cur.type != TG_J_ARRAY || !array_nth(c->text, cur, c->idx[k], &cur))
                return false;
            continue;
        }
        tg_jobj_iter_t it;
        tg_jspan_t key, val;
        int r;
        if (cur.type != TG_J_OBJECT)
            return false;
        tg_jobj_begin(&it, c->text, cur);
        while ((r = tg_jobj_next(&it, &key, &val)) == 1)
            if (tg_jstr_eq(c->text, key, c->comp[k]))
                break;
        if (r != 1)
            return false;
        if (want_key && k == n - 1) {
            *off = key.off;
            return true;
        }
        cur = val;
    }
    *off = cur.off;
    return true;
}

/* Fill the error for the current path: "FILE:L:C: path: message". With
 * <at_key> the position is the last key's and the path printed is its
 * parent's (the message names the key). Returns -1. */
static int at_err(ctx_t *c, bool at_key, const char *fmt, ...) TG_FMT(3, 4);
static int at_err(ctx_t *c, bool at_key, const char *fmt, ...)
{
    char path[256], msg[TG_ERR_MAX], pos[32] = "";
    size_t off;
    int line, col;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (locate(c, c->depth, at_key && c->depth > 0, &off)) {
        tg_jscan_linecol(c->text, c->len, off, &line, &col);
        snprintf(pos, sizeof pos, ":%d:%d", line, col);
    }
    path_display(c, at_key && c->depth > 0 ? c->depth - 1 : c->depth, path, sizeof path);
    return err_set(c->err, "%s%s: %s%s%s", c->file, pos, path, path[0] ? ": " : "", msg);
}

static int type_err(ctx_t *c, const json_t *v, const char *expected)
{
    return at_err(c, false, "expected %s, got %s", expected, json_type_noun(v));
}

static int get_json_val(ctx_t *c, const json_t *v, const vspec_t *sp, val_t *out)
{
    char msg[TG_ERR_MAX];

    if (parse_json(sp, v, out, msg, sizeof msg) < 0)
        return at_err(c, false, "%s", msg);
    return 0;
}

/* A string, or an error. <nonempty>: "" refused too. */
static const char *get_str(ctx_t *c, const json_t *v, bool nonempty)
{
    if (!json_is_string(v)) {
        type_err(c, v, "a string");
        return NULL;
    }
    if (nonempty && json_string_length(v) == 0) {
        at_err(c, false, "expected a non-empty string");
        return NULL;
    }
    return json_string_value(v);
}

/* Match a string against <choices> (NULL-terminated); index or -1. */
static int get_enum(ctx_t *c, const json_t *v, const char *noun, const char *const *choices)
{
    char q[VALUE_SHOWN * 4 + 8], list[128] = "";
    const char *s = get_str(c, v, false);
    int n = 0;

    if (!s)
        return -1;
    for (; choices[n]; n++)
        if (strcmp(s, choices[n]) == 0)
            return n;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s\"%s\"",
                 i == 0       ? ""
                 : i == n - 1 ? " or "
                              : ", ",
                 choices[i]);
    }
    quote(q, sizeof q, s, json_string_length(v));
    at_err(c, false, "%s is not %s (expected %s)", q, noun, list);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Schema                                                              */

typedef int (*member_fn)(ctx_t *c, json_t *v);
typedef struct member {
    const char *key;
    member_fn fn;
} member_t;

static int walk(ctx_t *c, json_t *obj, const member_t *m, size_t n)
{
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v)
    {
        size_t i = 0;
        int pushed, rc;
        while (i < n && strcmp(m[i].key, key) != 0)
            i++;
        pushed = push_key(c, key);
        if (i == n) {
            char list[256] = "", q[VALUE_SHOWN * 4 + 8];
            for (size_t j = 0; j < n; j++)
                list_add(list, sizeof list, m[j].key);
            quote(q, sizeof q, key, strlen(key));
            at_err(c, true, "unknown key %s (allowed: %s)", q, list);
            pop(c, pushed);
            return -1;
        }
        rc = m[i].fn(c, v);
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int want_object(ctx_t *c, const json_t *v)
{
    return json_is_object(v) ? 0 : type_err(c, v, "an object");
}


static int m_rate_scope(ctx_t *c, json_t *v)
{
    static const char *const scopes[] = {"local", "shared", NULL};
    int i = get_enum(c, v, "a rate scope", scopes);
    if (i < 0)
        return -1;
    if (c->scope == S_AGENT && c->agent != NULL) {
        c->agent->rate_shared = i == 1;
    } else if (c->scope == S_TOOL && c->cur_caller != NULL && c->lim == &c->cur_caller->lim) {
        /* A caller is a connection to this toolgate: its bucket is local. */
        if (i == 1)
            return at_err(c, false, "\"shared\" is for an agent's or a tool's rate (a caller's "
                                    "rate_limit is per toolgate)");
    } else if (c->scope == S_TOOL && c->lim != NULL) {
        c->lim->rate_shared = i == 1;
    }
    return 0;
}

static int m_shared_mode(ctx_t *c, json_t *v)
{
    static const char *const modes[] = {"exact", "lease", NULL};
    int i = get_enum(c, v, "a shared mode", modes);
    if (i < 0)
        return -1;
    if (c->scope == S_AGENT && c->agent != NULL)
        c->agent->shared_lease = i == 1;
    return 0;
}

static int m_concurrency_scope(ctx_t *c, json_t *v)
{
    static const char *const scopes[] = {"local", "shared", NULL};
    int i = get_enum(c, v, "a concurrency scope", scopes);
    if (i < 0)
        return -1;
    /* One fleet-wide set of slots per agent: a tool asking for its own
     * would silently get none, so it is refused rather than ignored. */
    if (i == 1 && c->scope == S_TOOL)
        return at_err(c, false, "\"shared\" is per agent (set concurrency_scope in the agent's "
                                "execution_limits; a tool's max_concurrent_calls stays local)");
    if (c->scope == S_AGENT && c->agent != NULL)
        c->agent->conc_shared = i == 1;
    return 0;
}

/* execution_limits (S_AGENT) and tools.NAME (S_TOOL): the lkeys table. */
static int walk_limits(ctx_t *c, json_t *obj)
{
    const char *key;
    json_t *v;

    if (want_object(c, obj) < 0)
        return -1;
    json_object_foreach(obj, key, v)
    {
        const lkey_t *k = lkey_find(key, strlen(key), c->scope);
        int pushed = push_key(c, key), rc;
        val_t val;
        if (!k && strcmp(key, "rate_scope") == 0) {
            rc = m_rate_scope(c, v);
        } else if (!k && strcmp(key, "shared_mode") == 0) {
            rc = m_shared_mode(c, v);
        } else if (!k && strcmp(key, "concurrency_scope") == 0) {
            rc = m_concurrency_scope(c, v);
        } else if (!k) {
            char list[256], q[VALUE_SHOWN * 4 + 8];
            lkeys_list(list, sizeof list, c->scope);
            list_add(list, sizeof list, "rate_scope");
            list_add(list, sizeof list, "shared_mode");
            list_add(list, sizeof list, "concurrency_scope");
            quote(q, sizeof q, key, strlen(key));
            rc = at_err(c, true, "unknown key %s (allowed: %s)", q, list);
        } else {
            rc = get_json_val(c, v, &k->spec, &val);
            if (rc == 0)
                k->set(c->cfg, c->agent, c->lim, &val, c->src);
        }
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* router */

static int m_instance(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, false);
    char q[VALUE_SHOWN * 4 + 8], *copy;

    if (!s)
        return -1;
    if (!name_chars_ok(s, json_string_length(v), true)) {
        quote(q, sizeof q, s, json_string_length(v));
        return at_err(c, false, "%s is not an instance name (expected 1 to %d of %s)", q,
                      TG_NAME_MAX, name_chars_tool);
    }
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->cfg->instance);
    c->cfg->instance = copy;
    return 0;
}

static int m_max_frame(ctx_t *c, json_t *v)
{
    const lkey_t *k = lkey_find("max_frame_bytes", strlen("max_frame_bytes"), S_ROUTER);
    val_t val;

    if (get_json_val(c, v, &k->spec, &val) < 0)
        return -1;
    k->set(c->cfg, NULL, NULL, &val, TG_SRC_FILE);
    return 0;
}

/* ---- serve mode: router.listen, router.callers_only, callers[] ---- */

static int l_unix(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    if (s[0] != '/')
        return at_err(c, false, "socket path \"%s\" is not absolute (expected e.g. /run/toolgate/search.sock)", s);
    if (strlen(s) >= 108)
        return at_err(c, false, "socket path is %zu bytes (expected at most 107: the sun_path limit)", strlen(s));
    free(c->cur_listen->unix_path);
    return (c->cur_listen->unix_path = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int l_agent(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    free(c->cur_listen->agent);
    return (c->cur_listen->agent = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int l_mode(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *end;
    if (!s)
        return -1;
    unsigned long m = strtoul(s, &end, 8);
    if (*end != '\0' || m > 0777 || s[0] != '0')
        return at_err(c, false, "\"%s\" is not a file mode (expected octal such as \"0660\")", s);
    c->cur_listen->mode = (uint32_t)m;
    return 0;
}

/* A user or group as a name or a number (JSON integer or digits),
 * resolved now so that a typo is a config error, not a failed chown. */
static int l_id(ctx_t *c, json_t *v, bool group, int64_t *out)
{
    const char *what = group ? "group" : "user";
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > 0x7fffffff)
            return at_err(c, false, "%s id %lld is out of range (expected 0..2147483647)", what,
                          (long long)n);
        *out = (int64_t)n;
        return 0;
    }
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    char *end;
    unsigned long n = strtoul(s, &end, 10);
    if (*end == '\0' && n <= 0x7fffffff) {
        *out = (int64_t)n;
        return 0;
    }
    char buf[4096];
    if (group) {
        struct group gr, *res = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof buf, &res) == 0 && res != NULL) {
            *out = (int64_t)gr.gr_gid;
            return 0;
        }
    } else {
        struct passwd pw, *res = NULL;
        if (getpwnam_r(s, &pw, buf, sizeof buf, &res) == 0 && res != NULL) {
            *out = (int64_t)pw.pw_uid;
            return 0;
        }
    }
    return at_err(c, false, "no %s named \"%s\" on this host (expected a %s name or a numeric id)",
                  what, s, what);
}

static int l_owner(ctx_t *c, json_t *v)
{
    return l_id(c, v, false, &c->cur_listen->owner);
}

static int l_group(ctx_t *c, json_t *v)
{
    return l_id(c, v, true, &c->cur_listen->group);
}

static int get_oversize(ctx_t *c, json_t *v, tg_on_oversize_t *out)
{
    static const char *const policies[] = {"reject", "close", NULL};
    int i = get_enum(c, v, "an oversize policy", policies);
    if (i < 0)
        return -1;
    *out = i == 0 ? TG_OVERSIZE_REJECT : TG_OVERSIZE_CLOSE;
    return 0;
}

static int l_dialect(ctx_t *c, json_t *v)
{
    static const char *const dialects[] = {"mcp", "opensentience", NULL};
    int i = get_enum(c, v, "a dialect", dialects);
    if (i < 0)
        return -1;
    c->cur_listen->dialect = i == 0 ? TG_DIALECT_MCP : TG_DIALECT_OPENSENTIENCE;
    return 0;
}

static int l_on_oversize(ctx_t *c, json_t *v)
{
    return get_oversize(c, v, &c->cur_listen->on_oversize);
}

static int l_max_connections(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 1, TG_LISTEN_MAX_CONNECTIONS_CEIL, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cur_listen->max_connections = (uint32_t)val.u;
    return 0;
}

static const member_t listen_members[] = {
    {"unix", l_unix},
    {"agent", l_agent},
    {"mode", l_mode},
    {"owner", l_owner},
    {"group", l_group},
    {"dialect", l_dialect},
    {"on_oversize", l_on_oversize},
    {"max_connections", l_max_connections},
};

static int m_listen(ctx_t *c, json_t *v)
{
    if (!json_is_array(v))
        return type_err(c, v, "an array");
    size_t n = json_array_size(v);
    if (n > TG_CFG_LISTEN_MAX)
        return at_err(c, false, "%zu listeners (expected at most %d)", n, TG_CFG_LISTEN_MAX);
    tg_listen_cfg_t *ls = calloc(n ? n : 1, sizeof *ls);
    if (!ls)
        return at_err(c, false, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int pushed = push_idx(c, i);
        json_t *e = json_array_get(v, i);
        ls[i].mode = 0660;
        ls[i].owner = ls[i].group = -1;
        c->cur_listen = &ls[i];
        rc = want_object(c, e);
        if (rc == 0)
            rc = walk(c, e, listen_members, sizeof listen_members / sizeof listen_members[0]);
        if (rc == 0 && ls[i].dialect == TG_DIALECT_MCP && ls[i].max_connections)
            rc = at_err(c, false, "an mcp listener's connections are bounded by its agent's "
                                  "max_instances (remove \"max_connections\")");
        else if (rc == 0 && ls[i].dialect == TG_DIALECT_OPENSENTIENCE && ls[i].agent)
            rc = at_err(c, false, "an opensentience listener routes calls by tool_id to every "
                                  "opensentience agent (remove \"agent\")");
        else if (rc == 0 && (!ls[i].unix_path ||
                             (!ls[i].agent && ls[i].dialect == TG_DIALECT_MCP)))
            rc = at_err(c, false, "a listener needs \"unix\" (socket path) and \"agent\" (agent id)");
        pop(c, pushed);
    }
    tg_config_t tmp = {.listen = ls, .nlisten = n};
    if (rc < 0) {
        serve_free(&tmp);
        return -1;
    }
    tg_config_t old = {.listen = c->cfg->listen, .nlisten = c->cfg->nlisten};
    serve_free(&old);
    c->cfg->listen = ls;
    c->cfg->nlisten = n;
    return 0;
}

static int adm_listen(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    free(c->cfg->admin_addr);
    return (c->cfg->admin_addr = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int adm_u32(ctx_t *c, json_t *v, vkind_t kind, uint64_t min, uint64_t max, uint32_t *out)
{
    const vspec_t sp = {kind, min, max, kind == V_BYTES};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    *out = (uint32_t)val.u;
    return 0;
}

static int adm_max_header_bytes(ctx_t *c, json_t *v)
{
    return adm_u32(c, v, V_BYTES, TG_ADMIN_MIN_HEADER_BYTES, TG_ADMIN_MAX_HEADER_BYTES_CEIL,
                   &c->cfg->admin_max_header_bytes);
}

static int adm_max_connections(ctx_t *c, json_t *v)
{
    return adm_u32(c, v, V_COUNT, 1, TG_ADMIN_MAX_CONNECTIONS_CEIL, &c->cfg->admin_max_connections);
}

static int adm_idle_timeout(ctx_t *c, json_t *v)
{
    return adm_u32(c, v, V_DURATION, TG_ADMIN_MIN_IDLE_TIMEOUT_MS, TG_ADMIN_IDLE_TIMEOUT_CEIL_MS,
                   &c->cfg->admin_idle_timeout_ms);
}

static int adm_max_response_bytes(ctx_t *c, json_t *v)
{
    return adm_u32(c, v, V_BYTES, TG_ADMIN_MIN_RESPONSE_BYTES, TG_ADMIN_MAX_RESPONSE_BYTES_CEIL,
                   &c->cfg->admin_max_response_bytes);
}

static const member_t admin_members[] = {
    {"listen", adm_listen},
    {"max_header_bytes", adm_max_header_bytes},
    {"max_connections", adm_max_connections},
    {"idle_timeout", adm_idle_timeout},
    {"max_response_bytes", adm_max_response_bytes},
};

/* router.admin: "HOST:PORT", or {"listen": "HOST:PORT", bounds...}. */
static int m_admin(ctx_t *c, json_t *v)
{
    if (json_is_string(v))
        return adm_listen(c, v);
    if (!json_is_object(v))
        return type_err(c, v, "a \"HOST:PORT\" string or an object");
    if (walk(c, v, admin_members, sizeof admin_members / sizeof admin_members[0]) < 0)
        return -1;
    if (c->cfg->admin_addr == NULL)
        return at_err(c, false, "router.admin needs \"listen\" (a loopback HOST:PORT)");
    return 0;
}

static int m_idle_timeout(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, 1, TG_MAX_DURATION_CEIL_MS, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->idle_timeout_ms = val.u;
    return 0;
}

static int m_callers_only(ctx_t *c, json_t *v)
{
    if (!json_is_boolean(v))
        return type_err(c, v, "true or false");
    c->cfg->callers_only = json_is_true(v);
    return 0;
}

static int k_name(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    if (!name_chars_ok(s, json_string_length(v), true))
        return at_err(c, false, "\"%s\" is not a caller name (expected 1 to %d of %s)", s,
                      TG_NAME_MAX, name_chars_tool);
    free(c->cur_caller->name);
    return (c->cur_caller->name = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int k_id(ctx_t *c, json_t *v, int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL)
        return type_err(c, v, "a numeric id from 0 to 4294967294");
    *out = json_integer_value(v);
    return 0;
}

static int k_uid(ctx_t *c, json_t *v)
{
    return k_id(c, v, &c->cur_caller->uid);
}

static int k_gid(ctx_t *c, json_t *v)
{
    return k_id(c, v, &c->cur_caller->gid);
}

static int k_limits(ctx_t *c, json_t *v)
{
    /* A caller's limits take the per-tool keys (rate, burst, concurrency). */
    c->lim = &c->cur_caller->lim;
    c->scope = S_TOOL;
    return walk_limits(c, v);
}

static const member_t caller_members[] = {
    {"name", k_name},
    {"uid", k_uid},
    {"gid", k_gid},
    {"execution_limits", k_limits},
};

static int m_callers(ctx_t *c, json_t *v)
{
    if (!json_is_array(v))
        return type_err(c, v, "an array");
    size_t n = json_array_size(v);
    if (n > TG_CFG_CALLERS_MAX)
        return at_err(c, false, "%zu callers (expected at most %d)", n, TG_CFG_CALLERS_MAX);
    tg_caller_cfg_t *cs = calloc(n ? n : 1, sizeof *cs);
    if (!cs)
        return at_err(c, false, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int pushed = push_idx(c, i);
        json_t *e = json_array_get(v, i);
        cs[i].uid = cs[i].gid = -1;
        c->cur_caller = &cs[i];
        rc = want_object(c, e);
        if (rc == 0)
            rc = walk(c, e, caller_members, sizeof caller_members / sizeof caller_members[0]);
        if (rc == 0 && !cs[i].name)
            rc = at_err(c, false, "missing required key \"name\"");
        if (rc == 0 && cs[i].uid < 0 && cs[i].gid < 0 && strcmp(cs[i].name, "default") != 0)
            rc = at_err(c, false, "caller \"%s\" needs \"uid\" or \"gid\" (only \"default\" matches everyone)", cs[i].name);
        pop(c, pushed);
    }
    tg_config_t tmp = {.callers = cs, .ncallers = n};
    if (rc < 0) {
        serve_free(&tmp);
        return -1;
    }
    tg_config_t old = {.callers = c->cfg->callers, .ncallers = c->cfg->ncallers};
    serve_free(&old);
    c->cfg->callers = cs;
    c->cfg->ncallers = n;
    return 0;
}

/* agents[].env: {"pass": ["PATH", ...], "set": {"NAME": "value"}}. */
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

#define TG_CFG_ENV_MAX 256 /* fixed internal bound: env.pass / env.set entries */

static int env_pass(ctx_t *c, json_t *v)
{
    if (!json_is_array(v))
        return type_err(c, v, "an array of variable names");
    size_t n = json_array_size(v);
    if (n > TG_CFG_ENV_MAX)
        return at_err(c, false, "%zu names (expected at most %d)", n, TG_CFG_ENV_MAX);
    char **out = calloc(n + 1, sizeof *out);
    if (!out)
        return at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = push_idx(c, i);
        const char *name = get_str(c, json_array_get(v, i), true);
        int rc = name ? 0 : -1;
        if (rc == 0 && !env_name_ok(name))
            rc = at_err(c, false, "\"%s\" is not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)", name);
        if (rc == 0 && !(out[i] = strdup(name)))
            rc = at_err(c, false, "out of memory");
        pop(c, pushed);
        if (rc < 0) {
            argv_free(out);
            return -1;
        }
    }
    argv_free(c->agent->env_pass);
    c->agent->env_pass = out;
    return 0;
}

static int env_set(ctx_t *c, json_t *v)
{
    const char *name;
    json_t *val;
    size_t n = 0;
    if (want_object(c, v) < 0)
        return -1;
    if (json_object_size(v) > TG_CFG_ENV_MAX)
        return at_err(c, false, "%zu variables (expected at most %d)", json_object_size(v), TG_CFG_ENV_MAX);
    char **out = calloc(json_object_size(v) + 1, sizeof *out);
    if (!out)
        return at_err(c, false, "out of memory");
    json_object_foreach(v, name, val)
    {
        int pushed = push_key(c, name);
        /* The value is never echoed in a message: it may be a secret. */
        int rc = env_name_ok(name) ? 0 : at_err(c, true, "not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)");
        if (rc == 0 && !json_is_string(val))
            rc = type_err(c, val, "a string");
        if (rc == 0) {
            size_t len = strlen(name) + 1 + json_string_length(val) + 1;
            if (!(out[n] = malloc(len)))
                rc = at_err(c, false, "out of memory");
            else
                snprintf(out[n++], len, "%s=%s", name, json_string_value(val));
        }
        pop(c, pushed);
        if (rc < 0) {
            argv_free(out);
            return -1;
        }
    }
    argv_free(c->agent->env_set);
    c->agent->env_set = out;
    return 0;
}

static const member_t env_members[] = {
    {"pass", env_pass},
    {"set", env_set},
};

static int m_env(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    return walk(c, v, env_members, sizeof env_members / sizeof env_members[0]);
}

static int m_cwd(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    if (s[0] != '/')
        return at_err(c, false, "\"%s\" is not an absolute path", s);
    free(c->agent->cwd);
    return (c->agent->cwd = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int m_workspace(ctx_t *c, json_t *v)
{
    char why[128], q[VALUE_SHOWN * 4 + 8];
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    if (tg_config_workspace_check(s, why, sizeof why) < 0) {
        quote(q, sizeof q, s, strlen(s));
        return at_err(c, false, "%s %s (expected an absolute, normalised directory path)", q, why);
    }
    free(c->agent->workspace);
    return (c->agent->workspace = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int m_max_instances(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 1, TG_MAX_INSTANCES_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->max_instances = (uint32_t)val.u;
    return 0;
}

static const member_t router_members[] = {
    {"instance", m_instance},
    {"max_frame_bytes", m_max_frame},
    {"listen", m_listen},
    {"callers_only", m_callers_only},
    {"idle_timeout", m_idle_timeout},
    {"admin", m_admin},
};

static int m_router(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    return walk(c, v, router_members, sizeof router_members / sizeof router_members[0]);
}

/* audit */

static int m_audit_path(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *copy;

    if (!s)
        return -1;
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->cfg->audit_path);
    c->cfg->audit_path = copy;
    /* The shorthand replaces sinks an earlier source configured. */
    sinks_free(c->cfg->audit_sinks, c->cfg->naudit_sinks);
    c->cfg->audit_sinks = NULL;
    c->cfg->naudit_sinks = 0;
    return 0;
}

static int m_audit_queue(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 1, TG_AUDIT_QUEUE_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->audit_queue = (uint32_t)val.u;
    return 0;
}

/* audit.sinks[]: the enums' order is the order of their choices. */
static const char *const sink_kinds[] = {"file", "stderr", "redis_stream", NULL};
static const char *const fsync_policies[] = {"interval", "always", "never", NULL};

/* "kind" was read before the walk, which picks the member table by it. */
static int m_sink_kind(ctx_t *c, json_t *v)
{
    return 0;
}

static int m_sink_path(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *copy;

    if (!s)
        return -1;
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->sink->path);
    c->sink->path = copy;
    return 0;
}

static int m_sink_max_bytes(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, TG_AUDIT_MAX_BYTES_MIN, TG_AUDIT_MAX_BYTES_CEIL, true};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->max_bytes = val.u;
    return 0;
}

/* 0 keeps no rotated file: rotation then empties the file in place. */
static int m_sink_keep(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 0, TG_AUDIT_KEEP_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->keep = (uint32_t)val.u;
    return 0;
}

static int m_sink_fsync(ctx_t *c, json_t *v)
{
    int i = get_enum(c, v, "an fsync policy", fsync_policies);

    if (i < 0)
        return -1;
    c->sink->fsync = (tg_audit_fsync_t)i;
    return 0;
}

static int m_sink_fsync_interval(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, 1, TG_AUDIT_FSYNC_CEIL_MS, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->fsync_interval_ms = val.u;
    c->sink_interval_set = true;
    return 0;
}

static const member_t file_sink_members[] = {
    {"kind", m_sink_kind},   {"path", m_sink_path},   {"max_bytes", m_sink_max_bytes},
    {"keep", m_sink_keep},   {"fsync", m_sink_fsync}, {"fsync_interval", m_sink_fsync_interval},
};

static const member_t stderr_sink_members[] = {
    {"kind", m_sink_kind},
};

/* Only the scheme is checked here: the URL is parsed (and its password
 * kept out of messages) where the pipe is opened. Nothing of the value is
 * echoed, since it may hold a password. */
static int m_sink_url(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *copy;

    if (!s)
        return -1;
    if (strncmp(s, "redis://", 8) != 0 && strncmp(s, "unix:", 5) != 0)
        return at_err(c, false,
                      "expected a redis://[[user]:password@]host[:port][/db] or "
                      "unix:/path[?db=N] URL");
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    if (c->sink->url) {
        explicit_bzero(c->sink->url, strlen(c->sink->url));
        free(c->sink->url);
    }
    c->sink->url = copy;
    return 0;
}

static int m_sink_stream(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *copy;

    if (!s)
        return -1;
    for (size_t i = 0; s[i]; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f)
            return at_err(c, false, "expected a key without spaces or control characters");
    if (json_string_length(v) > TG_AUDIT_STREAM_KEY_MAX)
        return at_err(c, false, "longer than %d bytes", TG_AUDIT_STREAM_KEY_MAX);
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->sink->stream);
    c->sink->stream = copy;
    return 0;
}

static int m_sink_maxlen(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 1, TG_AUDIT_MAXLEN_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->maxlen = val.u;
    return 0;
}

static int m_sink_spool(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    char *copy;

    if (!s)
        return -1;
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->sink->spool);
    c->sink->spool = copy;
    return 0;
}

static int m_sink_spool_max(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, TG_AUDIT_SPOOL_MIN, TG_AUDIT_MAX_BYTES_CEIL, true};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->spool_max_bytes = val.u;
    return 0;
}

static int m_sink_timeout(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, 1, TG_AUDIT_REDIS_TIMEOUT_CEIL_MS, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->sink->timeout_ms = val.u;
    return 0;
}

static const member_t redis_sink_members[] = {
    {"kind", m_sink_kind},     {"url", m_sink_url},
    {"stream", m_sink_stream}, {"maxlen", m_sink_maxlen},
    {"spool", m_sink_spool},   {"spool_max_bytes", m_sink_spool_max},
    {"timeout", m_sink_timeout},
};

static int load_sink(ctx_t *c, json_t *v, tg_audit_sink_cfg_t *sinks, size_t i)
{
    tg_audit_sink_cfg_t *s = &sinks[i];
    json_t *kind = json_is_object(v) ? json_object_get(v, "kind") : NULL;
    int pushed, k;

    if (want_object(c, v) < 0)
        return -1;
    if (!kind)
        return at_err(c, false,
                      "missing required key \"kind\" (expected \"file\", \"stderr\" or "
                      "\"redis_stream\")");
    pushed = push_key(c, "kind");
    k = get_enum(c, kind, "a sink kind", sink_kinds);
    pop(c, pushed);
    if (k < 0)
        return -1;
    tg_config_sink_defaults(s, (tg_audit_sink_kind_t)k);
    c->sink = s;
    c->sink_interval_set = false;
    if (s->kind == TG_AUDIT_SINK_STDERR) {
        if (walk(c, v, stderr_sink_members, sizeof stderr_sink_members / sizeof stderr_sink_members[0]) <
            0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (sinks[j].kind == TG_AUDIT_SINK_STDERR)
                return at_err(c, false, "a second stderr sink (also audit.sinks[%zu])", j);
        return 0;
    }
    if (s->kind == TG_AUDIT_SINK_REDIS_STREAM) {
        if (walk(c, v, redis_sink_members, sizeof redis_sink_members / sizeof redis_sink_members[0]) <
            0)
            return -1;
        if (!s->url)
            return at_err(c, false, "missing required key \"url\" (the Redis server)");
        if (!s->spool)
            return at_err(c, false,
                          "missing required key \"spool\" (the file that holds events while "
                          "Redis is away)");
        for (size_t j = 0; j < i; j++) {
            const char *other = sinks[j].kind == TG_AUDIT_SINK_FILE           ? sinks[j].path
                                : sinks[j].kind == TG_AUDIT_SINK_REDIS_STREAM ? sinks[j].spool
                                                                               : NULL;
            if (other && strcmp(other, s->spool) == 0) {
                pushed = push_key(c, "spool");
                at_err(c, false, "same file as audit.sinks[%zu]", j);
                pop(c, pushed);
                return -1;
            }
        }
        return 0;
    }
    if (walk(c, v, file_sink_members, sizeof file_sink_members / sizeof file_sink_members[0]) < 0)
        return -1;
    if (!s->path)
        return at_err(c, false, "missing required key \"path\" (the file to write)");
    if (c->sink_interval_set && s->fsync != TG_AUDIT_FSYNC_INTERVAL) {
        pushed = push_key(c, "fsync_interval");
        at_err(c, false, "applies only to fsync \"interval\" (this sink has fsync \"%s\")",
               fsync_policies[s->fsync]);
        pop(c, pushed);
        return -1;
    }
    for (size_t j = 0; j < i; j++) {
        const char *other = sinks[j].kind == TG_AUDIT_SINK_FILE           ? sinks[j].path
                            : sinks[j].kind == TG_AUDIT_SINK_REDIS_STREAM ? sinks[j].spool
                                                                           : NULL;
        if (other && strcmp(other, s->path) == 0) {
            /* Two rotating writers on one file would rename it under
             * each other and interleave their seqs. */
            pushed = push_key(c, "path");
            at_err(c, false, "same file as audit.sinks[%zu]", j);
            pop(c, pushed);
            return -1;
        }
    }
    return 0;
}

static int m_audit_sinks(ctx_t *c, json_t *v)
{
    tg_audit_sink_cfg_t *sinks;
    size_t n;

    if (!json_is_array(v))
        return type_err(c, v, "an array");
    n = json_array_size(v);
    if (n == 0)
        return at_err(c, false, "expected at least one sink");
    if (n > TG_CFG_SINKS_MAX)
        return at_err(c, false, "%zu sinks (expected at most %d)", n, TG_CFG_SINKS_MAX);
    sinks = calloc(n, sizeof *sinks);
    if (!sinks)
        return at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = push_idx(c, i), rc = load_sink(c, json_array_get(v, i), sinks, i);
        pop(c, pushed);
        if (rc < 0) {
            sinks_free(sinks, n);
            return -1;
        }
    }
    sinks_free(c->cfg->audit_sinks, c->cfg->naudit_sinks);
    c->cfg->audit_sinks = sinks;
    c->cfg->naudit_sinks = n;
    free(c->cfg->audit_path);
    c->cfg->audit_path = NULL;
    return 0;
}

static const member_t audit_members[] = {
    {"path", m_audit_path},
    {"queue", m_audit_queue},
    {"sinks", m_audit_sinks},
};

static int m_audit(ctx_t *c, json_t *v)
{
    int pushed;

    if (want_object(c, v) < 0)
        return -1;
    if (walk(c, v, audit_members, sizeof audit_members / sizeof audit_members[0]) < 0)
        return -1;
    if (json_object_get(v, "path") && json_object_get(v, "sinks")) {
        pushed = push_key(c, "sinks");
        at_err(c, false,
               "cannot be combined with audit.path (audit.path is shorthand for one file "
               "sink: give the file in audit.sinks instead)");
        pop(c, pushed);
        return -1;
    }
    return 0;
}

/* agents[] */

static int m_id(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, false);
    char q[VALUE_SHOWN * 4 + 8], *copy;

    if (!s)
        return -1;
    if (!agent_id_ok(s)) {
        quote(q, sizeof q, s, json_string_length(v));
        return at_err(c, false, "%s is not an agent id (expected 1 to %d of %s)", q, TG_NAME_MAX,
                      name_chars_agent);
    }
    if (!(copy = strdup(s)))
        return at_err(c, false, "out of memory");
    free(c->agent->id);
    c->agent->id = copy;
    return 0;
}

static int m_dialect(ctx_t *c, json_t *v)
{
    static const char *const dialects[] = {"mcp", "opensentience", NULL};
    int i = get_enum(c, v, "a dialect", dialects);

    if (i < 0)
        return -1;
    c->agent->dialect = i == 0 ? TG_DIALECT_MCP : TG_DIALECT_OPENSENTIENCE;
    return 0;
}

static int m_command(ctx_t *c, json_t *v)
{
    size_t n;
    char **argv;

    if (!json_is_array(v))
        return type_err(c, v, "an array of strings such as [\"/usr/bin/server\", \"--stdio\"]");
    n = json_array_size(v);
    if (n == 0)
        return at_err(c, false, "expected at least one word (the program to run)");
    if (n > TG_CFG_ARGV_MAX)
        return at_err(c, false, "%zu words (expected at most %d)", n, TG_CFG_ARGV_MAX);
    for (size_t i = 0; i < n; i++) {
        json_t *w = json_array_get(v, i);
        int pushed = push_idx(c, i), rc = 0;
        if (!get_str(c, w, i == 0))
            rc = -1;
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    argv = calloc(n + 1, sizeof *argv);
    if (!argv)
        return at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        argv[i] = strdup(json_string_value(json_array_get(v, i)));
        if (!argv[i]) {
            argv_free(argv);
            return at_err(c, false, "out of memory");
        }
    }
    argv_free(c->agent->command);
    c->agent->command = argv;
    return 0;
}

static int m_exec_limits(ctx_t *c, json_t *v)
{
    c->lim = &c->agent->lim;
    c->scope = S_AGENT;
    return walk_limits(c, v);
}

static int m_tools(ctx_t *c, json_t *v)
{
    const char *name;
    json_t *tv;

    if (want_object(c, v) < 0)
        return -1;
    json_object_foreach(v, name, tv)
    {
        int pushed = push_key(c, name), rc;
        size_t len = strlen(name);
        tg_tool_cfg_t *t;
        if (!tg_config_tool_name_ok(name, len)) {
            char q[VALUE_SHOWN * 4 + 8];
            quote(q, sizeof q, name, len);
            rc = at_err(c, true, "%s is not a tool name (expected 1 to %d of %s)", q, TG_NAME_MAX,
                        name_chars_tool);
        } else if (!(t = tool_get_or_add(c->agent, name, len))) {
            rc = at_err(c, true, "cannot add tool (out of memory or more than %d tools)",
                        TG_CFG_TOOLS_MAX);
        } else {
            c->lim = &t->lim;
            c->scope = S_TOOL;
            rc = walk_limits(c, tv);
        }
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int m_policy(ctx_t *c, json_t *v)
{
    static const char *const policies[] = {"no", "on-failure", "always", NULL};
    static const tg_restart_policy_t map[] = {TG_RESTART_NO, TG_RESTART_ON_FAILURE,
                                              TG_RESTART_ALWAYS};
    int i = get_enum(c, v, "a restart policy", policies);

    if (i < 0)
        return -1;
    c->agent->restart_policy = map[i];
    return 0;
}

static int m_max_restarts(ctx_t *c, json_t *v)
{
    /* 0 is bounded and meaningful: never restart within the window. */
    static const vspec_t sp = {V_COUNT, 0, TG_MAX_RESTARTS_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->max_restarts = (uint32_t)val.u;
    return 0;
}

static const vspec_t restart_dur = {V_DURATION, 1, TG_MAX_DURATION_CEIL_MS, false};

static int m_window(ctx_t *c, json_t *v)
{
    val_t val;

    if (get_json_val(c, v, &restart_dur, &val) < 0)
        return -1;
    c->agent->restart_window_ms = val.u;
    return 0;
}

static int m_backoff(ctx_t *c, json_t *v)
{
    val_t val;

    if (get_json_val(c, v, &restart_dur, &val) < 0)
        return -1;
    c->agent->backoff_initial_ms = val.u;
    return 0;
}

static int m_max_backoff(ctx_t *c, json_t *v)
{
    val_t val;

    if (get_json_val(c, v, &restart_dur, &val) < 0)
        return -1;
    c->agent->backoff_max_ms = val.u;
    return 0;
}

static const member_t restart_members[] = {
    {"policy", m_policy},   {"max_restarts", m_max_restarts}, {"window", m_window},
    {"backoff", m_backoff}, {"max_backoff", m_max_backoff},
};

static int m_restart(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    return walk(c, v, restart_members, sizeof restart_members / sizeof restart_members[0]);
}

static int m_stderr_bps(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, 1, TG_STDERR_BPS_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->stderr_bytes_per_sec = val.u;
    return 0;
}

static int m_stderr_line(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, 1, TG_STDERR_LINE_CEIL, false};
    val_t val;

    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->stderr_line_max = val.u;
    return 0;
}

static const member_t stderr_members[] = {
    {"bytes_per_second", m_stderr_bps},
    {"max_line", m_stderr_line},
};

static int m_stderr(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    return walk(c, v, stderr_members, sizeof stderr_members / sizeof stderr_members[0]);
}

/* resources (agents[].resources and a manifest's "resources"):
 *   {"memory": {"limit": "512Mi", "request": "128Mi"}, "cpu": {...},
 *    "pids": {...}, "disk": {...},
 *    "network": "none" | {"limit": "none", "bandwidth_limit": "10Mbps",
 *                         "max_connections": 100}}
 * A "request" is a scheduling hint (what the agent needs at least);
 * toolgate enforces limits, so a request is checked for its unit and
 * bounds and not used otherwise. */

static int res_item(ctx_t *c, json_t *obj, const lkey_t *k)
{
    const char *key;
    json_t *v;

    if (want_object(c, obj) < 0)
        return -1;
    json_object_foreach(obj, key, v)
    {
        int pushed = push_key(c, key), rc;
        val_t val;
        if (strcmp(key, "limit") == 0) {
            rc = get_json_val(c, v, &k->spec, &val);
            if (rc == 0)
                k->set(c->cfg, c->agent, NULL, &val, c->src);
        } else if (strcmp(key, "request") == 0) {
            rc = get_json_val(c, v, &k->spec, &val);
        } else {
            char q[VALUE_SHOWN * 4 + 8];
            quote(q, sizeof q, key, strlen(key));
            rc = at_err(c, true, "unknown key %s (allowed: limit, request)", q);
        }
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* "network": a mode as a string, or an object with the mode as "limit"
 * and the manifest format's bandwidth_limit and max_connections. */
static int res_network(ctx_t *c, json_t *obj, const lkey_t *net)
{
    const char *key;
    json_t *v;
    val_t val;

    if (json_is_string(obj)) {
        if (get_json_val(c, obj, &net->spec, &val) < 0)
            return -1;
        net->set(c->cfg, c->agent, NULL, &val, c->src);
        return 0;
    }
    if (!json_is_object(obj))
        return type_err(c, obj, "\"none\", \"loopback\", \"full\" or an object");
    json_object_foreach(obj, key, v)
    {
        const lkey_t *k = strcmp(key, "limit") == 0 ? net : lkey_find(key, strlen(key), S_NET);
        int pushed = push_key(c, key), rc;
        if (!k) {
            char list[128] = "limit", q[VALUE_SHOWN * 4 + 8];
            for (size_t i = 0; i < NLKEYS; i++)
                if (lkeys[i].scopes & S_NET)
                    list_add(list, sizeof list, lkeys[i].name);
            quote(q, sizeof q, key, strlen(key));
            rc = at_err(c, true, "unknown key %s (allowed: %s)", q, list);
        } else if ((rc = get_json_val(c, v, &k->spec, &val)) == 0) {
            k->set(c->cfg, c->agent, NULL, &val, c->src);
        }
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int m_resources(ctx_t *c, json_t *obj)
{
    const char *key;
    json_t *v;

    if (want_object(c, obj) < 0)
        return -1;
    json_object_foreach(obj, key, v)
    {
        const lkey_t *k = lkey_find(key, strlen(key), S_RES);
        int pushed = push_key(c, key), rc;
        if (!k) {
            char list[128], q[VALUE_SHOWN * 4 + 8];
            lkeys_list(list, sizeof list, S_RES);
            quote(q, sizeof q, key, strlen(key));
            rc = at_err(c, true, "unknown key %s (allowed: %s)", q, list);
        } else if (k->spec.kind == V_NETWORK) {
            rc = res_network(c, v, k);
        } else {
            rc = res_item(c, v, k);
        }
        pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The file is read once the whole agent is known (load_manifest): the
 * operator's limits may come after "manifest" in the object. */
static int m_manifest(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);

    if (!s)
        return -1;
    c->manifest = s;
    return 0;
}

/* Read the current agent's manifest and merge it into the agent. A file
 * that cannot be read is reported at the config's "manifest" value; an
 * error inside the manifest at its own position in the manifest. */
static int load_manifest(ctx_t *c)
{
    tg_manifest_t *m = calloc(1, sizeof *m);
    tg_cfg_err_t merr;
    int rc, pushed;

    if (!m || !(m->given = strdup(c->manifest)) ||
        !(m->path = tg_manifest_resolve(c->config_path, c->manifest))) {
        tg_manifest_free(m);
        free(m);
        return at_err(c, false, "out of memory");
    }
    rc = tg_manifest_load_file(m, m->path, &merr);
    if (rc < 0) {
        if (rc == -EINVAL) {
            err_set(c->err, "%s", merr.msg);
        } else {
            pushed = push_key(c, "manifest");
            at_err(c, false, "%s", merr.msg);
            pop(c, pushed);
        }
        tg_manifest_free(m);
        free(m);
        return -1;
    }
    tg_manifest_attach(c->agent, m);
    return 0;
}

static int m_start(ctx_t *c, json_t *v)
{
    static const char *const starts[] = {"eager", "on_demand", NULL};
    int i = get_enum(c, v, "a start policy", starts);
    if (i < 0)
        return -1;
    c->agent->start = i == 0 ? TG_START_EAGER : TG_START_ON_DEMAND;
    c->agent->start_set = true;
    return 0;
}

/* agents[].opensentience: the dialect's own knobs. */
static const vspec_t os_heartbeat = {V_DURATION, TG_OS_HEARTBEAT_MIN_MS, TG_OS_HEARTBEAT_CEIL_MS,
                                     false};

static int os_heartbeat_interval(ctx_t *c, json_t *v)
{
    val_t val;
    if (get_json_val(c, v, &os_heartbeat, &val) < 0)
        return -1;
    c->agent->os.heartbeat_interval_ms = val.u;
    return 0;
}

static int os_heartbeat_timeout(ctx_t *c, json_t *v)
{
    val_t val;
    if (get_json_val(c, v, &os_heartbeat, &val) < 0)
        return -1;
    c->agent->os.heartbeat_timeout_ms = val.u;
    return 0;
}

static int os_idem_window(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, 1, TG_OS_IDEM_WINDOW_CEIL_MS, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->os.idempotency_window_ms = val.u;
    return 0;
}

static int os_idem_bytes(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, 1024, TG_OS_IDEM_MAX_BYTES_CEIL, true};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->agent->os.idempotency_max_bytes = val.u;
    return 0;
}

static int os_on_oversize(ctx_t *c, json_t *v)
{
    return get_oversize(c, v, &c->agent->os.on_oversize);
}

static const member_t os_members[] = {
    {"heartbeat_interval", os_heartbeat_interval},
    {"heartbeat_timeout", os_heartbeat_timeout},
    {"idempotency_window", os_idem_window},
    {"idempotency_max_bytes", os_idem_bytes},
    {"on_oversize", os_on_oversize},
};

static int m_opensentience(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    c->agent->os.set = true;
    return walk(c, v, os_members, sizeof os_members / sizeof os_members[0]);
}

static const member_t agent_members[] = {
    {"id", m_id},
    {"dialect", m_dialect},
    {"command", m_command},
    {"execution_limits", m_exec_limits},
    {"tools", m_tools},
    {"restart", m_restart},
    {"stderr", m_stderr},
    {"env", m_env},
    {"resources", m_resources},
    {"cwd", m_cwd},
    {"workspace", m_workspace},
    {"max_instances", m_max_instances},
    {"manifest", m_manifest},
    {"start", m_start},
    {"opensentience", m_opensentience},
};

static int load_agent(ctx_t *c, json_t *v, tg_agent_cfg_t *agents, size_t i)
{
    int pushed;

    if (want_object(c, v) < 0)
        return -1;
    c->agent = &agents[i];
    c->manifest = NULL;
    if (walk(c, v, agent_members, sizeof agent_members / sizeof agent_members[0]) < 0)
        return -1;
    if (c->manifest && load_manifest(c) < 0)
        return -1;
    if (!agents[i].id)
        return at_err(c, false, "missing required key \"id\"");
    for (size_t j = 0; j < i; j++) {
        if (strcmp(agents[j].id, agents[i].id) == 0) {
            pushed = push_key(c, "id");
            at_err(c, false, "duplicate agent id \"%s\" (also agents[%zu])", agents[i].id, j);
            pop(c, pushed);
            return -1;
        }
    }
    return 0;
}

/* The file's agents replace the config's (the default's single agent in
 * wrap mode). */
static int m_agents(ctx_t *c, json_t *v)
{
    size_t n;
    tg_agent_cfg_t *agents;

    if (!json_is_array(v))
        return type_err(c, v, "an array");
    n = json_array_size(v);
    if (n == 0)
        return at_err(c, false, "expected at least one agent");
    if (n > TG_CFG_AGENTS_MAX)
        return at_err(c, false, "%zu agents (expected at most %d)", n, TG_CFG_AGENTS_MAX);
    agents = calloc(n, sizeof *agents);
    if (!agents)
        return at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++)
        agent_defaults(&agents[i]);
    for (size_t i = 0; i < n; i++) {
        int pushed = push_idx(c, i), rc = load_agent(c, json_array_get(v, i), agents, i);
        pop(c, pushed);
        if (rc < 0) {
            agents_free(agents, n);
            return -1;
        }
    }
    agents_free(c->cfg->agents, c->cfg->nagents);
    c->cfg->agents = agents;
    c->cfg->nagents = n;
    return 0;
}

/* containment */

static int m_containment_mode(ctx_t *c, json_t *v)
{
    int i = get_enum(c, v, "a containment mode", containment_names);

    if (i < 0)
        return -1;
    c->cfg->containment_mode = (tg_containment_mode_t)i;
    c->cfg->containment_src = c->src;
    return 0;
}

static int m_min_free_memory(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_BYTES, 1, TG_MAX_FRAME_BYTES_CEIL * 1024 * 1024, true};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->min_free_memory = val.u;
    return 0;
}

static int m_workspace_backend(ctx_t *c, json_t *v)
{
    int i = get_enum(c, v, "a workspace backend", workspace_backend_names);

    if (i < 0)
        return -1;
    c->cfg->workspace_backend = (tg_workspace_backend_t)i;
    return 0;
}

static const member_t containment_members[] = {
    {"mode", m_containment_mode},
    {"min_free_memory", m_min_free_memory},
    {"workspace_backend", m_workspace_backend},
};

static int m_containment(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    return walk(c, v, containment_members,
                sizeof containment_members / sizeof containment_members[0]);
}

/* store */

static const char *const store_policies[] = {"local", "open", "closed", NULL};

static int st_kind(ctx_t *c, json_t *v)
{
    static const char *const kinds[] = {"local", "redis", NULL};
    int i = get_enum(c, v, "a store kind", kinds);
    if (i < 0)
        return -1;
    c->cfg->store.redis = i == 1;
    return 0;
}

static int st_url(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    /* Never echo the URL: it may hold a password. */
    if (strncmp(s, "redis://", 8) != 0 && strncmp(s, "unix:", 5) != 0)
        return at_err(c, false, "not a store URL (expected redis://[user:password@]host:port/db "
                                "or unix:/path?db=N)");
    free(c->cfg->store.url);
    return (c->cfg->store.url = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int st_timeout(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, 1, 60000, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->store.timeout_ms = val.u;
    return 0;
}

static int st_policy(ctx_t *c, json_t *v)
{
    int i = get_enum(c, v, "an on_store_error policy", store_policies);
    if (i < 0)
        return -1;
    c->cfg->store.on_store_error = i;
    return 0;
}

static int st_instances(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_COUNT, 1, 100000, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->store.instances = (uint32_t)val.u;
    return 0;
}

static int st_prefix(ctx_t *c, json_t *v)
{
    const char *s = get_str(c, v, true);
    if (!s)
        return -1;
    if (strpbrk(s, "{}") != NULL || strlen(s) > 48)
        return at_err(c, false, "\"%s\" is not a key prefix (expected up to 48 bytes without braces)", s);
    free(c->cfg->store.prefix);
    return (c->cfg->store.prefix = strdup(s)) ? 0 : at_err(c, false, "out of memory");
}

static int st_duration(ctx_t *c, json_t *v, uint64_t *out)
{
    static const vspec_t sp = {V_DURATION, 1, TG_STORE_DURATION_CEIL_MS, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    *out = val.u;
    return 0;
}

static int st_connect_timeout(ctx_t *c, json_t *v)
{
    return st_duration(c, v, &c->cfg->store.connect_timeout_ms);
}

static int st_dead_after(ctx_t *c, json_t *v)
{
    return st_duration(c, v, &c->cfg->store.dead_after_ms);
}

static int st_backoff(ctx_t *c, json_t *v)
{
    return st_duration(c, v, &c->cfg->store.backoff_ms);
}

static int st_max_backoff(ctx_t *c, json_t *v)
{
    return st_duration(c, v, &c->cfg->store.max_backoff_ms);
}

static int st_lease(ctx_t *c, json_t *v)
{
    return st_duration(c, v, &c->cfg->store.lease_ms);
}

static int st_slot_lease(ctx_t *c, json_t *v)
{
    static const vspec_t sp = {V_DURATION, TG_STORE_SLOT_LEASE_MIN_MS, TG_STORE_DURATION_CEIL_MS,
                               false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    c->cfg->store.slot_lease_ms = val.u;
    return 0;
}

static int st_count(ctx_t *c, json_t *v, uint64_t max, uint32_t *out)
{
    const vspec_t sp = {V_COUNT, 1, max, false};
    val_t val;
    if (get_json_val(c, v, &sp, &val) < 0)
        return -1;
    *out = (uint32_t)val.u;
    return 0;
}

static int st_max_pending(ctx_t *c, json_t *v)
{
    return st_count(c, v, TG_STORE_MAX_PENDING_CEIL, &c->cfg->store.max_pending);
}

static int st_local_max_keys(ctx_t *c, json_t *v)
{
    return st_count(c, v, TG_STORE_LOCAL_MAX_KEYS_CEIL, &c->cfg->store.local_max_keys);
}

static const member_t store_members[] = {
    {"kind", st_kind},         {"url", st_url},           {"timeout", st_timeout},
    {"on_store_error", st_policy}, {"instances", st_instances}, {"prefix", st_prefix},
    {"connect_timeout", st_connect_timeout}, {"dead_after", st_dead_after},
    {"backoff", st_backoff},   {"max_backoff", st_max_backoff}, {"lease", st_lease},
    {"slot_lease", st_slot_lease},
    {"max_pending", st_max_pending}, {"local_max_keys", st_local_max_keys},
};

static int m_store(ctx_t *c, json_t *v)
{
    if (want_object(c, v) < 0)
        return -1;
    if (walk(c, v, store_members, sizeof store_members / sizeof store_members[0]) < 0)
        return -1;
    if (c->cfg->store.redis && !c->cfg->store.url)
        return at_err(c, false, "a redis store needs \"url\"");
    return 0;
}

static const member_t root_members[] = {
    {"router", m_router},
    {"audit", m_audit},
    {"agents", m_agents},
    {"store", m_store},
    {"containment", m_containment},
    {"callers", m_callers},
};

/* ------------------------------------------------------------------ */
/* Loading                                                             */

static int load(tg_config_t *cfg, const char *name, const char *text, size_t len,
                const char *set_path, tg_cfg_err_t *err)
{
    json_error_t jerr;
    json_t *root;
    tg_config_t work;
    ctx_t c;
    int rc;

    if (!name)
        name = "config";
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return err_set(err, "%s:%d:%d: syntax error: %s", name, jerr.line, jerr.column, jerr.text);
    if (config_clone(&work, cfg) < 0) {
        json_decref(root);
        return err_set(err, "%s: out of memory", name);
    }
    memset(&c, 0, sizeof c);
    c.file = name;
    c.text = text;
    c.len = len;
    c.err = err;
    c.cfg = &work;
    c.src = TG_SRC_FILE;
    c.config_path = set_path;
    if (!json_is_object(root))
        rc = at_err(&c, false, "expected an object at the top level, got %s", json_type_noun(root));
    else
        rc = walk(&c, root, root_members, sizeof root_members / sizeof root_members[0]);
    json_decref(root);
    if (rc == 0 && set_path) {
        char *p = strdup(set_path);
        if (!p)
            rc = err_set(err, "%s: out of memory", name);
        free(work.path);
        work.path = p;
    }
    if (rc < 0) {
        tg_config_free(&work);
        return -1;
    }
    tg_config_free(cfg);
    *cfg = work;
    return 0;
}

/* A manifest's execution_limits: the agent keys a manifest may ask for. */
static int m_manifest_limits(ctx_t *c, json_t *v)
{
    c->lim = &c->agent->lim;
    c->scope = S_MAN;
    return walk_limits(c, v);
}

int tg__config_parse_manifest(const char *name, const char *text, size_t len,
                              tg_exec_limits_t *lim, tg_resources_t *res, tg_cfg_err_t *err)
{
    json_error_t jerr;
    json_t *root, *v;
    tg_agent_cfg_t scratch; /* holds no allocation: defaults and values only */
    tg_config_t none;
    const char *key;
    ctx_t c;
    int rc = 0;

    if (!name)
        name = "manifest";
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return err_set(err, "%s:%d:%d: syntax error: %s", name, jerr.line, jerr.column, jerr.text);
    agent_defaults(&scratch);
    memset(&none, 0, sizeof none);
    memset(&c, 0, sizeof c);
    c.file = name;
    c.text = text;
    c.len = len;
    c.err = err;
    c.cfg = &none;
    c.agent = &scratch;
    c.src = TG_SRC_MANIFEST;
    if (!json_is_object(root)) {
        rc = at_err(&c, false, "expected an object at the top level, got %s", json_type_noun(root));
    } else {
        /* The rest of the manifest (id, permissions, tools, ...) is not
         * about limits and belongs to other readers. */
        json_object_foreach(root, key, v)
        {
            int pushed;
            bool is_res = strcmp(key, "resources") == 0;
            if (!is_res && strcmp(key, "execution_limits") != 0)
                continue;
            pushed = push_key(&c, key);
            rc = is_res ? m_resources(&c, v) : m_manifest_limits(&c, v);
            pop(&c, pushed);
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

int tg_config_load_buffer(tg_config_t *cfg, const char *name, const char *text, size_t len,
                          tg_cfg_err_t *err)
{
    return load(cfg, name, text, len, NULL, err);
}

int tg_config_load_file(tg_config_t *cfg, const char *path, tg_cfg_err_t *err)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t len = 0, n;
    int rc;

    if (!f)
        return err_set(err, "%s: cannot open: %s", path, strerror(errno));
    /* Read up to one byte past the bound to tell "exactly at the bound"
     * from "over it" without trusting st_size (pipes, /proc). */
    buf = malloc(TG_CFG_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return err_set(err, "%s: out of memory", path);
    }
    while (len <= TG_CFG_FILE_MAX && (n = fread(buf + len, 1, TG_CFG_FILE_MAX + 1 - len, f)) > 0)
        len += n;
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        return err_set(err, "%s: cannot read: %s", path, strerror(e));
    }
    fclose(f);
    if (len > TG_CFG_FILE_MAX) {
        free(buf);
        return err_set(err, "%s: larger than %u bytes (config files are bounded)", path,
                       TG_CFG_FILE_MAX);
    }
    rc = load(cfg, path, buf, len, path, err);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Command line                                                        */

int tg_config_set_command(tg_config_t *cfg, size_t agent_idx, char *const argv[], tg_cfg_err_t *err)
{
    char **copy;

    if (agent_idx >= cfg->nagents)
        return err_set(err, "no agent %zu", agent_idx);
    if (!argv || !argv[0] || !argv[0][0])
        return err_set(err, "expected a command to run");
    copy = argv_dup(argv);
    if (!copy)
        return err_set(err, "out of memory");
    argv_free(cfg->agents[agent_idx].command);
    cfg->agents[agent_idx].command = copy;
    return 0;
}

static const char containment_key[] = "containment";

/* --limit containment=MODE (wrap mode has no containment object). */
static int apply_containment(tg_config_t *cfg, const char *kv, const char *value,
                             tg_cfg_err_t *err)
{
    char q[VALUE_SHOWN * 4 + 8];

    for (int i = 0; containment_names[i]; i++) {
        if (strcmp(value, containment_names[i]) == 0) {
            cfg->containment_mode = (tg_containment_mode_t)i;
            cfg->containment_src = TG_SRC_CLI;
            return 0;
        }
    }
    quote(q, sizeof q, value, strlen(value));
    return err_set(err,
                   "--limit %s: containment: %s is not a containment mode (expected "
                   "\"best_effort\", \"required\" or \"off\")",
                   kv, q);
}

/* --limit workspace=PATH and workspace_backend=auto|tmpfs|scan (wrap
 * mode's agents[].workspace and containment.workspace_backend). 0 or -1
 * when <key> is one of them, 1 when it is not. */
static int apply_workspace(tg_config_t *cfg, tg_agent_cfg_t *a, const char *kv, const char *key,
                           size_t klen, const char *value, tg_cfg_err_t *err)
{
    static const char ws_key[] = "workspace", backend_key[] = "workspace_backend";
    char q[VALUE_SHOWN * 4 + 8], why[128];

    if (klen == sizeof ws_key - 1 && memcmp(key, ws_key, klen) == 0) {
        char *copy;
        if (tg_config_workspace_check(value, why, sizeof why) < 0) {
            quote(q, sizeof q, value, strlen(value));
            return err_set(err, "--limit %s: workspace: %s %s (expected an absolute, normalised "
                           "directory path)", kv, q, why);
        }
        if (!(copy = strdup(value)))
            return err_set(err, "--limit %s: out of memory", kv);
        free(a->workspace);
        a->workspace = copy;
        return 0;
    }
    if (klen != sizeof backend_key - 1 || memcmp(key, backend_key, klen) != 0)
        return 1;
    for (int i = 0; workspace_backend_names[i]; i++) {
        if (strcmp(value, workspace_backend_names[i]) == 0) {
            cfg->workspace_backend = (tg_workspace_backend_t)i;
            return 0;
        }
    }
    quote(q, sizeof q, value, strlen(value));
    return err_set(err, "--limit %s: workspace_backend: %s is not a workspace backend (expected "
                   "\"auto\", \"tmpfs\" or \"scan\")", kv, q);
}

/* --limit rate_scope=local|shared, shared_mode=exact|lease,
 * on_store_error=local|open|closed, concurrency_scope=local|shared: the
 * shared-limit switches of wrap mode.
 * 0 or -1 when <key> is one of them, 1 when it is not. */
static int apply_shared(tg_config_t *cfg, tg_agent_cfg_t *a, const char *kv, const char *key,
                        size_t klen, const char *value, tg_cfg_err_t *err)
{
    static const struct {
        const char *key;
        const char *const choices[4];
        const char *expected;
    } keys[] = {
        {"rate_scope", {"local", "shared", NULL}, "\"local\" or \"shared\""},
        {"shared_mode", {"exact", "lease", NULL}, "\"exact\" or \"lease\""},
        {"on_store_error", {"local", "open", "closed", NULL}, "\"local\", \"open\" or \"closed\""},
        {"concurrency_scope", {"local", "shared", NULL}, "\"local\" or \"shared\""},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strlen(keys[i].key) != klen || memcmp(key, keys[i].key, klen) != 0)
            continue;
        for (int j = 0; keys[i].choices[j]; j++) {
            if (strcmp(value, keys[i].choices[j]) != 0)
                continue;
            if (i == 0)
                a->rate_shared = j == 1;
            else if (i == 1)
                a->shared_lease = j == 1;
            else if (i == 2)
                cfg->store.on_store_error = j;
            else
                a->conc_shared = j == 1;
            return 0;
        }
        char q[VALUE_SHOWN * 4 + 8];
        quote(q, sizeof q, value, strlen(value));
        return err_set(err, "--limit %s: %s: %s is not valid (expected %s)", kv, keys[i].key, q,
                       keys[i].expected);
    }
    return 1;
}

/* --limit on an agent with a manifest: the value becomes the operator's
 * and the merge runs again, so the manifest's request still wins where it
 * is stricter. The key's setter writes the agent's lim, res or grace
 * fields only, so it runs on a copy holding the operator's values. */
static void set_operator(tg_config_t *cfg, tg_agent_cfg_t *a, const lkey_t *k, const val_t *v)
{
    tg_manifest_t *m = a->manifest;
    tg_agent_cfg_t op = *a;

    op.lim = m->op;
    op.res = m->op_res;
    k->set(cfg, &op, &op.lim, v, TG_SRC_CLI);
    m->op = op.lim;
    m->op_res = op.res;
    a->kill_grace_ms = op.kill_grace_ms;
    a->kill_grace_src = op.kill_grace_src;
    tg_manifest_merge(m, &a->lim, &a->res);
}

int tg_config_apply_limit(tg_config_t *cfg, size_t agent_idx, const char *kv, tg_cfg_err_t *err)
{
    static const char tools_pfx[] = "tools.";
    const char *eq = kv ? strchr(kv, '=') : NULL;
    const char *key, *value, *dot = NULL;
    size_t klen;
    const lkey_t *k;
    tg_agent_cfg_t *a;
    tg_exec_limits_t *lim;
    char list[384], msg[TG_ERR_MAX];
    val_t val;
    bool tool;

    if (!eq || eq == kv)
        return err_set(err, "--limit %s: expected KEY=VALUE, e.g. rate_limit=100/minute",
                       kv ? kv : "");
    if (agent_idx >= cfg->nagents)
        return err_set(err, "--limit %s: no agent %zu", kv, agent_idx);
    a = &cfg->agents[agent_idx];
    key = kv;
    klen = (size_t)(eq - kv);
    value = eq + 1;
    tool = klen > sizeof tools_pfx - 1 && memcmp(key, tools_pfx, sizeof tools_pfx - 1) == 0;
    if (tool) {
        const char *name = key + sizeof tools_pfx - 1;
        /* The key is after the last dot: tool names may hold dots. */
        for (const char *p = name; p < eq; p++)
            if (*p == '.')
                dot = p;
        if (!dot || dot == name)
            return err_set(err,
                           "--limit %s: %.*s: expected tools.NAME.KEY, e.g. "
                           "tools.web.rate_limit=10/minute",
                           kv, (int)klen, key);
        if (!tg_config_tool_name_ok(name, (size_t)(dot - name))) {
            char q[VALUE_SHOWN * 4 + 8];
            quote(q, sizeof q, name, (size_t)(dot - name));
            return err_set(err, "--limit %s: %.*s: %s is not a tool name (expected 1 to %d of %s)",
                           kv, (int)klen, key, q, TG_NAME_MAX, name_chars_tool);
        }
        k = lkey_find(dot + 1, (size_t)(eq - dot - 1), S_TOOL);
        static const char rs_key[] = "rate_scope";
        if (!k && (size_t)(eq - dot - 1) == sizeof rs_key - 1 &&
            memcmp(dot + 1, rs_key, sizeof rs_key - 1) == 0) {
            bool shared = strcmp(value, "shared") == 0;
            if (!shared && strcmp(value, "local") != 0) {
                char q[VALUE_SHOWN * 4 + 8];
                quote(q, sizeof q, value, strlen(value));
                return err_set(err, "--limit %s: %.*s: %s is not valid (expected \"local\" or "
                               "\"shared\")", kv, (int)klen, key, q);
            }
            const char *tname = key + sizeof tools_pfx - 1;
            tg_tool_cfg_t *t = tool_get_or_add(a, tname, (size_t)(dot - tname));
            if (!t)
                return err_set(err, "--limit %s: cannot add tool (out of memory or more than %d "
                               "tools)", kv, TG_CFG_TOOLS_MAX);
            t->lim.rate_shared = shared;
            return 0;
        }
        if (!k) {
            char q[VALUE_SHOWN * 4 + 8];
            lkeys_list(list, sizeof list, S_TOOL);
            list_add(list, sizeof list, "rate_scope");
            quote(q, sizeof q, dot + 1, (size_t)(eq - dot - 1));
            return err_set(err, "--limit %s: unknown tool key %s (allowed: %s)", kv, q, list);
        }
    } else {
        if (klen == sizeof containment_key - 1 && memcmp(key, containment_key, klen) == 0)
            return apply_containment(cfg, kv, value, err);
        int shared = apply_shared(cfg, a, kv, key, klen, value, err);
        if (shared != 1)
            return shared;
        int ws = apply_workspace(cfg, a, kv, key, klen, value, err);
        if (ws != 1)
            return ws;
        k = lkey_find(key, klen, S_ROUTER | S_AGENT | S_RES);
        if (!k) {
            char q[VALUE_SHOWN * 4 + 8];
            lkeys_list(list, sizeof list, S_ROUTER | S_AGENT | S_RES);
            list_add(list, sizeof list, containment_key);
            list_add(list, sizeof list, "rate_scope");
            list_add(list, sizeof list, "shared_mode");
            list_add(list, sizeof list, "on_store_error");
            list_add(list, sizeof list, "concurrency_scope");
            list_add(list, sizeof list, "workspace");
            list_add(list, sizeof list, "workspace_backend");
            list_add(list, sizeof list, "tools.NAME.KEY");
            quote(q, sizeof q, key, klen);
            return err_set(err, "--limit %s: unknown key %s (allowed: %s)", kv, q, list);
        }
    }
    if (parse_text(&k->spec, value, &val, msg, sizeof msg) < 0)
        return err_set(err, "--limit %s: %.*s: %s", kv, (int)klen, key, msg);
    if (tool) {
        const char *name = key + sizeof tools_pfx - 1;
        tg_tool_cfg_t *t = tool_get_or_add(a, name, (size_t)(dot - name));
        if (!t)
            return err_set(err, "--limit %s: cannot add tool (out of memory or more than %d tools)",
                           kv, TG_CFG_TOOLS_MAX);
        lim = &t->lim;
    } else {
        lim = &a->lim;
    }
    if (!tool && a->manifest && (k->scopes & (S_AGENT | S_RES))) {
        set_operator(cfg, a, k, &val);
        return 0;
    }
    k->set(cfg, a, lim, &val, TG_SRC_CLI);
    return 0;
}

int tg_config_set_audit_path(tg_config_t *cfg, const char *path, tg_cfg_err_t *err)
{
    char *copy;

    if (!path || !path[0])
        return err_set(err, "--audit: expected a file path");
    if (!(copy = strdup(path)))
        return err_set(err, "--audit %s: out of memory", path);
    free(cfg->audit_path);
    cfg->audit_path = copy;
    sinks_free(cfg->audit_sinks, cfg->naudit_sinks);
    cfg->audit_sinks = NULL;
    cfg->naudit_sinks = 0;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Validation                                                          */

/* Range checks of audit.sinks, for configs built or changed in code (the
 * loader already refuses all of this with positions). */
static int check_sinks(const tg_config_t *cfg, const char *f, const char *sep, tg_cfg_err_t *err)
{
    if (cfg->naudit_sinks > TG_CFG_SINKS_MAX || (cfg->naudit_sinks && !cfg->audit_sinks))
        return err_set(err, "%s%saudit.sinks: %zu sinks (expected 1 to %d)", f, sep,
                       cfg->naudit_sinks, TG_CFG_SINKS_MAX);
    for (size_t i = 0; i < cfg->naudit_sinks; i++) {
        const tg_audit_sink_cfg_t *s = &cfg->audit_sinks[i];
        char shown[32];
        if (s->kind == TG_AUDIT_SINK_STDERR)
            continue;
        if (s->kind == TG_AUDIT_SINK_REDIS_STREAM) {
            if (!s->url || !s->url[0])
                return err_set(err, "%s%saudit.sinks[%zu].url: missing (the Redis server)", f,
                               sep, i);
            if (!s->spool || !s->spool[0])
                return err_set(err, "%s%saudit.sinks[%zu].spool: missing (the spool file)", f,
                               sep, i);
            if (s->maxlen == 0 || s->maxlen > TG_AUDIT_MAXLEN_CEIL)
                return err_set(err, "%s%saudit.sinks[%zu].maxlen: %llu is out of range "
                               "(expected 1 to %llu)", f, sep, i, (unsigned long long)s->maxlen,
                               (unsigned long long)TG_AUDIT_MAXLEN_CEIL);
            if (s->spool_max_bytes < TG_AUDIT_SPOOL_MIN ||
                s->spool_max_bytes > TG_AUDIT_MAX_BYTES_CEIL) {
                tg_unit_fmt_bytes(shown, (int)sizeof shown, s->spool_max_bytes);
                return err_set(err, "%s%saudit.sinks[%zu].spool_max_bytes: %s is out of range "
                               "(expected 4Ki to 1Ti)", f, sep, i, shown);
            }
            if (s->timeout_ms == 0 || s->timeout_ms > TG_AUDIT_REDIS_TIMEOUT_CEIL_MS) {
                tg_unit_fmt_duration(shown, (int)sizeof shown, s->timeout_ms);
                return err_set(err, "%s%saudit.sinks[%zu].timeout: %s is out of range "
                               "(expected 1ms to 1m)", f, sep, i, shown);
            }
            continue;
        }
        if (s->kind != TG_AUDIT_SINK_FILE)
            return err_set(err, "%s%saudit.sinks[%zu].kind: not a sink kind (expected \"file\", "
                           "\"stderr\" or \"redis_stream\")", f, sep, i);
        if (!s->path || !s->path[0])
            return err_set(err, "%s%saudit.sinks[%zu].path: missing (the file to write)", f, sep,
                           i);
        if (s->max_bytes < TG_AUDIT_MAX_BYTES_MIN || s->max_bytes > TG_AUDIT_MAX_BYTES_CEIL) {
            tg_unit_fmt_bytes(shown, (int)sizeof shown, s->max_bytes);
            return err_set(err, "%s%saudit.sinks[%zu].max_bytes: %s is out of range (expected "
                           "1Ki to 1Ti)", f, sep, i, shown);
        }
        if (s->keep > TG_AUDIT_KEEP_CEIL)
            return err_set(err, "%s%saudit.sinks[%zu].keep: %u is out of range (expected 0 to %d)",
                           f, sep, i, s->keep, TG_AUDIT_KEEP_CEIL);
        if ((unsigned)s->fsync > TG_AUDIT_FSYNC_NEVER)
            return err_set(err, "%s%saudit.sinks[%zu].fsync: not an fsync policy (expected "
                           "\"interval\", \"always\" or \"never\")", f, sep, i);
        if (s->fsync == TG_AUDIT_FSYNC_INTERVAL &&
            (s->fsync_interval_ms == 0 || s->fsync_interval_ms > TG_AUDIT_FSYNC_CEIL_MS)) {
            tg_unit_fmt_duration(shown, (int)sizeof shown, s->fsync_interval_ms);
            return err_set(err, "%s%saudit.sinks[%zu].fsync_interval: %s is out of range "
                           "(expected 1ms to 1h)", f, sep, i, shown);
        }
    }
    return 0;
}

/* Range check of every lkey of <scope> that is set in <lim>. */
static int check_scope(const tg_config_t *cfg, const tg_agent_cfg_t *a, const tg_exec_limits_t *lim,
                       unsigned scope, const char *where, tg_cfg_err_t *err)
{
    const char *file = cfg->path ? cfg->path : NULL;

    for (size_t i = 0; i < NLKEYS; i++) {
        const lkey_t *k = &lkeys[i];
        val_t v;
        char shown[48], rw[96];
        if (!(k->scopes & scope) || !k->get(cfg, a, lim, scope == S_TOOL, &v))
            continue;
        if (in_range(&k->spec, &v) && (k->spec.kind != V_RATE || v.rate.period_ms != 0))
            continue;
        if (k->spec.kind == V_RATE)
            tg_unit_fmt_rate(shown, (int)sizeof shown, v.rate);
        else
            fmt_num(shown, sizeof shown, k->spec.kind, v.u);
        range_why(rw, sizeof rw, &k->spec);
        return err_set(err, "%s%s%s%s: %s is out of range (%s)", file ? file : "", file ? ": " : "",
                       where, k->name, shown, rw);
    }
    return 0;
}

/* The keys that belong to one dialect only, and the opensentience
 * heartbeat's consistency. */
static int check_dialect(const tg_agent_cfg_t *a, size_t i, const char *f, const char *sep,
                         tg_cfg_err_t *err)
{
    if (a->dialect == TG_DIALECT_MCP) {
        if (a->os.set)
            return err_set(err, "%s%sagents[%zu].opensentience: agent \"%s\" speaks mcp (expected "
                           "\"dialect\": \"opensentience\", or remove the key)", f, sep, i, a->id);
        if (a->start_set && a->start == TG_START_EAGER)
            return err_set(err, "%s%sagents[%zu].start: an mcp agent starts one instance per caller "
                           "connection (expected \"on_demand\")", f, sep, i);
        return 0;
    }
    if (a->os.heartbeat_timeout_ms < a->os.heartbeat_interval_ms) {
        char t[32], n[32];
        tg_unit_fmt_duration(t, (int)sizeof t, a->os.heartbeat_timeout_ms);
        tg_unit_fmt_duration(n, (int)sizeof n, a->os.heartbeat_interval_ms);
        return err_set(err, "%s%sagents[%zu].opensentience.heartbeat_timeout: %s is shorter than "
                       "heartbeat_interval %s (expected at least one interval)", f, sep, i, t, n);
    }
    return 0;
}

int tg_config_validate(const tg_config_t *cfg, tg_cfg_err_t *err)
{
    const char *f = cfg->path ? cfg->path : "";
    const char *sep = cfg->path ? ": " : "";
    char where[TG_NAME_MAX + 64];

    if (check_scope(cfg, NULL, NULL, S_ROUTER, "router.", err) < 0)
        return -1;
    for (size_t i = 0; i < cfg->nlisten; i++) {
        const tg_agent_cfg_t *la = NULL;
        bool any_os = false;
        for (size_t j = 0; j < cfg->nagents; j++) {
            any_os = any_os || cfg->agents[j].dialect == TG_DIALECT_OPENSENTIENCE;
            if (cfg->listen[i].agent && strcmp(cfg->agents[j].id, cfg->listen[i].agent) == 0)
                la = &cfg->agents[j];
        }
        if (cfg->listen[i].dialect == TG_DIALECT_OPENSENTIENCE && !any_os)
            return err_set(err, "%s%srouter.listen[%zu].dialect: no agent in agents[] speaks "
                           "opensentience (expected at least one with \"dialect\": "
                           "\"opensentience\")", f, sep, i);
        if (cfg->listen[i].dialect == TG_DIALECT_MCP && !la)
            return err_set(err, "%s%srouter.listen[%zu].agent: no agent \"%s\" in agents[] (expected "
                           "one of the configured agent ids)", f, sep, i,
                           cfg->listen[i].agent ? cfg->listen[i].agent : "");
        if (la && la->dialect == TG_DIALECT_OPENSENTIENCE)
            return err_set(err, "%s%srouter.listen[%zu].agent: agent \"%s\" speaks opensentience "
                           "(serve it on a listener with \"dialect\": \"opensentience\", which "
                           "routes by tool_id)", f, sep, i, la->id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->listen[j].unix_path, cfg->listen[i].unix_path) == 0)
                return err_set(err, "%s%srouter.listen[%zu].unix: \"%s\" is also router.listen[%zu]",
                               f, sep, i, cfg->listen[i].unix_path, j);
    }
    if (!cfg->instance || !name_chars_ok(cfg->instance, strlen(cfg->instance), true))
        return err_set(err, "%s%srouter.instance: missing or not a name (expected 1 to %d of %s)",
                       f, sep, TG_NAME_MAX, name_chars_tool);
    if (cfg->audit_queue == 0 || cfg->audit_queue > TG_AUDIT_QUEUE_CEIL)
        return err_set(err, "%s%saudit.queue: %u is out of range (expected 1 to %u)", f, sep,
                       cfg->audit_queue, (unsigned)TG_AUDIT_QUEUE_CEIL);
    if (check_sinks(cfg, f, sep, err) < 0)
        return -1;
    if ((unsigned)cfg->containment_mode > TG_CONTAINMENT_OFF)
        return err_set(err,
                       "%s%scontainment.mode: not a containment mode (expected \"best_effort\", "
                       "\"required\" or \"off\")",
                       f, sep);
    if (cfg->nagents == 0 || !cfg->agents)
        return err_set(err, "%s%sagents: none configured (expected at least one agent)", f, sep);
    for (size_t i = 0; i < cfg->nagents; i++) {
        const tg_agent_cfg_t *a = &cfg->agents[i];
        if (!agent_id_ok(a->id))
            return err_set(err,
                           "%s%sagents[%zu].id: missing or not an agent id (expected 1 to %d "
                           "of %s)",
                           f, sep, i, TG_NAME_MAX, name_chars_agent);
        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->agents[j].id, a->id) == 0)
                return err_set(err,
                               "%s%sagents[%zu].id: duplicate agent id \"%s\" (also "
                               "agents[%zu])",
                               f, sep, i, a->id, j);
        if (!a->command || !a->command[0] || !a->command[0][0])
            return err_set(err,
                           "%s%sagents[%zu].command: no command (expected \"command\" in the "
                           "config or a command after --)",
                           f, sep, i);
        if (check_dialect(a, i, f, sep, err) < 0)
            return -1;
        /* Checked once every source is merged: --store may come after the
         * file that asks for shared slots. */
        if (a->conc_shared && !cfg->store.redis)
            return err_set(err,
                           "%s%sagents[%zu].execution_limits.concurrency_scope: \"shared\" needs a "
                           "shared store (expected store {\"kind\": \"redis\", \"url\": ...} or "
                           "--store URL)",
                           f, sep, i);
        snprintf(where, sizeof where, "agents[%zu].execution_limits.", i);
        if (check_scope(cfg, a, &a->lim, S_AGENT, where, err) < 0)
            return -1;
        snprintf(where, sizeof where, "agents[%zu].resources.", i);
        if (check_scope(cfg, a, &a->lim, S_RES | S_NET, where, err) < 0)
            return -1;
        if (a->backoff_initial_ms == 0 || a->backoff_initial_ms > a->backoff_max_ms) {
            char b[32], m[32];
            tg_unit_fmt_duration(b, (int)sizeof b, a->backoff_initial_ms);
            tg_unit_fmt_duration(m, (int)sizeof m, a->backoff_max_ms);
            return err_set(err,
                           "%s%sagents[%zu].restart.backoff: %s is not within 1ms to "
                           "max_backoff %s",
                           f, sep, i, b, m);
        }
        for (size_t t = 0; t < a->ntools; t++) {
            const tg_tool_cfg_t *tc = &a->tools[t];
            if (!tc->name || !tg_config_tool_name_ok(tc->name, strlen(tc->name)))
                return err_set(err,
                               "%s%sagents[%zu].tools: a tool name is missing or invalid "
                               "(expected 1 to %d of %s)",
                               f, sep, i, TG_NAME_MAX, name_chars_tool);
            snprintf(where, sizeof where, "agents[%zu].tools.%s.", i, tc->name);
            if (check_scope(cfg, a, &tc->lim, S_TOOL, where, err) < 0)
                return -1;
            /* A tool burst without a tool rate would silently reshape the
             * agent's bucket, which the tool scope does not own. */
            if (tc->lim.burst_src != TG_SRC_DEFAULT && tc->lim.rate_src == TG_SRC_DEFAULT)
                return err_set(err,
                               "%s%sagents[%zu].tools.%s.burst: set without a rate_limit "
                               "(expected tools.%s.rate_limit as well)",
                               f, sep, i, tc->name, tc->name);
            if (tc->lim.rate_shared && tc->lim.rate_src == TG_SRC_DEFAULT)
                return err_set(err,
                               "%s%sagents[%zu].tools.%s.rate_scope: \"shared\" without a tool "
                               "rate_limit (expected tools.%s.rate_limit: the tool has no bucket "
                               "of its own to share)",
                               f, sep, i, tc->name, tc->name);
            if (tc->lim.rate_shared && !cfg->store.redis)
                return err_set(err,
                               "%s%sagents[%zu].tools.%s.rate_scope: \"shared\" needs a shared "
                               "store (expected store {\"kind\": \"redis\", \"url\": ...} or "
                               "--store URL)",
                               f, sep, i, tc->name);
        }
    }
    return 0;
}
