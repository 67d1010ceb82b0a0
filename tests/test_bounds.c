/* Every bound is config-wired or declared internal (issue 6, part 1).
 *
 * The test reads the source tree at TG_SOURCE_DIR and looks at every
 * `#define` in the .c/.h files under router/ limits/ audit/ config/. A define
 * is "limit-shaped" when its name says it is a size, count, duration or
 * ceiling and its value holds an integer literal:
 *
 *   name:  ends in one of the suffixes of LIMIT_SUFFIX below (MAX, MIN, CAP,
 *          CEIL, LIMIT, BYTES, MS, US, BPS, MC, BURST, DEPTH, BACKLOG, CHUNK,
 *          BLOCK, SPARES, LOG, QUEUE, ROUNDS, KEEP, MAXLEN, LINE, PIDS, PCT,
 *          BUF), or holds "MAX_", "_MIN_" or "_DEF_" anywhere (TG_DEF_X,
 *          TG_MAX_X_CEIL, TG_AUDIT_MAX_BYTES_MIN, TG_STORE_DEF_X);
 *   value: holds a decimal literal that is not part of an identifier, so
 *          `(TG_CG_PATH_MAX + 64)` counts and a pure alias such as
 *          `AUDIT_SINKS_MAX TG_CFG_SINKS_MAX` does not (it inherits the
 *          class of what it names); string defaults ("tg:") do not.
 *
 * Each such define must be one of:
 *   (a) marked `fixed internal bound` on its line or on the comment line
 *       just above it: an internal constant nobody needs to tune;
 *   (b) listed below as K_WIRED with the config key that sets it (its
 *       default, floor or ceiling); the key's last component must appear as
 *       a quoted key in config/config.c, so a renamed key breaks the test;
 *   (c) listed as K_FORMAT: a unit, protocol or arithmetic constant that is
 *       not a resource bound at all (short list, each with its reason);
 *   (d) listed as K_UNMARKED or K_UNWIRED: known cases reported to the lead,
 *       an internal bound lacking the marker or a tunable no config key
 *       reaches yet. Each carries the reason it is tolerated.
 * A listed entry that no longer matches an unmarked define fails too, so
 * marking or wiring a constant forces its entry out of this table.
 */
#include "limits/registry.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MARKER "fixed internal bound"
#define LIMIT_SUFFIX                                                                               \
    "_(MAX|MIN|CAP|CEIL|LIMIT|BYTES|MS|US|BPS|MC|BURST|DEPTH|BACKLOG|CHUNK|BLOCK|SPARES|LOG|"    \
    "QUEUE|ROUNDS|KEEP|MAXLEN|LINE|PIDS|PCT|BUF)$"
#define REPORT_MAX (64u * 1024) /* failure text collected by one scan */

typedef enum kind { K_WIRED, K_FORMAT, K_UNMARKED, K_UNWIRED } kind_t;

typedef struct bound_class {
    const char *name;
    kind_t kind;
    const char *key; /* K_WIRED: the config key (JSON path) that sets it */
    const char *why; /* every other kind: why it is tolerated */
} bound_class_t;

#define WIRED(n, k) {n, K_WIRED, k, NULL}
#define FORMAT(n, w) {n, K_FORMAT, NULL, w}
#define UNMARKED(n, w) {n, K_UNMARKED, NULL, w}
#define UNWIRED(n, w) {n, K_UNWIRED, NULL, w}

/* clang-format off */
static const bound_class_t classes[] = {
    /* (b) config-wired: default, floor and ceiling of one key each. */
    WIRED("TG_DEF_MAX_FRAME_BYTES", "router.max_frame_bytes"),
    WIRED("TG_MIN_FRAME_BYTES", "router.max_frame_bytes"),
    WIRED("TG_MAX_FRAME_BYTES_CEIL", "router.max_frame_bytes"),
    WIRED("TG_DEF_CALL_DURATION_MS", "execution_limits.max_tool_call_duration"),
    WIRED("TG_MAX_DURATION_CEIL_MS", "execution_limits.max_tool_call_duration"),
    WIRED("TG_DEF_MAX_CONCURRENT", "execution_limits.max_concurrent_calls"),
    WIRED("TG_MAX_CONCURRENT_CEIL", "execution_limits.max_concurrent_calls"),
    WIRED("TG_DEF_MAX_QUEUED", "execution_limits.max_queued_calls"),
    WIRED("TG_MAX_QUEUED_CEIL", "execution_limits.max_queued_calls"),
    WIRED("TG_DEF_RATE_COUNT", "execution_limits.rate_limit"),
    WIRED("TG_DEF_RATE_PERIOD_MS", "execution_limits.rate_limit"),
    WIRED("TG_RATE_COUNT_CEIL", "execution_limits.rate_limit"),
    WIRED("TG_BURST_CEIL", "execution_limits.burst"),
    WIRED("TG_GCRA_MAX_BURST", "execution_limits.burst"), /* the pure core's copy */
    WIRED("TG_DEF_KILL_GRACE_MS", "execution_limits.kill_grace_period"),
    WIRED("TG_KILL_GRACE_CEIL_MS", "execution_limits.kill_grace_period"),
    WIRED("TG_DEF_STDERR_BPS", "agents[].stderr.bytes_per_second"),
    WIRED("TG_STDERR_BPS_CEIL", "agents[].stderr.bytes_per_second"),
    WIRED("TG_DEF_STDERR_LINE", "agents[].stderr.max_line"),
    WIRED("TG_STDERR_LINE_CEIL", "agents[].stderr.max_line"),
    WIRED("TG_DEF_MAX_RESTARTS", "agents[].restart.max_restarts"),
    WIRED("TG_MAX_RESTARTS_CEIL", "agents[].restart.max_restarts"),
    WIRED("TG_DEF_RESTART_WINDOW_MS", "agents[].restart.window"),
    WIRED("TG_DEF_BACKOFF_INITIAL_MS", "agents[].restart.backoff"),
    WIRED("TG_DEF_BACKOFF_MAX_MS", "agents[].restart.max_backoff"),
    WIRED("TG_DEF_MAX_INSTANCES", "agents[].max_instances"),
    WIRED("TG_DEF_IDLE_TIMEOUT_MS", "router.idle_timeout"),
    WIRED("TG_MAX_INSTANCES_CEIL", "agents[].max_instances"),
    WIRED("TG_DEF_AUDIT_QUEUE", "audit.queue"),
    WIRED("TG_AUDIT_QUEUE_CEIL", "audit.queue"),
    WIRED("TG_DEF_AUDIT_MAX_BYTES", "audit.sinks[].max_bytes"),
    WIRED("TG_AUDIT_MAX_BYTES_MIN", "audit.sinks[].max_bytes"),
    WIRED("TG_AUDIT_MAX_BYTES_CEIL", "audit.sinks[].max_bytes"),
    WIRED("TG_DEF_AUDIT_KEEP", "audit.sinks[].keep"),
    WIRED("TG_AUDIT_KEEP_CEIL", "audit.sinks[].keep"),
    WIRED("TG_DEF_AUDIT_FSYNC_MS", "audit.sinks[].fsync_interval"),
    WIRED("TG_AUDIT_FSYNC_CEIL_MS", "audit.sinks[].fsync_interval"),
    WIRED("TG_DEF_AUDIT_MAXLEN", "audit.sinks[].maxlen"),
    WIRED("TG_AUDIT_MAXLEN_CEIL", "audit.sinks[].maxlen"),
    WIRED("TG_DEF_AUDIT_SPOOL_BYTES", "audit.sinks[].spool_max_bytes"),
    WIRED("TG_AUDIT_SPOOL_MIN", "audit.sinks[].spool_max_bytes"),
    WIRED("TG_DEF_AUDIT_REDIS_TIMEOUT_MS", "audit.sinks[].timeout"),
    WIRED("TG_AUDIT_REDIS_TIMEOUT_CEIL_MS", "audit.sinks[].timeout"),
    WIRED("TG_DEF_MEMORY_BYTES", "agents[].resources.memory"),
    WIRED("TG_CONTAIN_DEF_MEMORY", "agents[].resources.memory"),
    WIRED("TG_MEMORY_MIN", "agents[].resources.memory"),
    WIRED("TG_MEMORY_CEIL", "agents[].resources.memory"),
    WIRED("TG_DEF_CPU_MILLICORES", "agents[].resources.cpu"),
    WIRED("TG_CONTAIN_DEF_CPU_MC", "agents[].resources.cpu"),
    WIRED("TG_CPU_MIN_MC", "agents[].resources.cpu"),
    WIRED("TG_CPU_CEIL_MC", "agents[].resources.cpu"),
    WIRED("TG_DEF_PIDS", "agents[].resources.pids"),
    WIRED("TG_CONTAIN_DEF_PIDS", "agents[].resources.pids"),
    WIRED("TG_PIDS_CEIL", "agents[].resources.pids"),
    WIRED("TG_DEF_DISK_BYTES", "agents[].resources.disk"),
    WIRED("TG_CONTAIN_DEF_DISK", "agents[].resources.disk"),
    WIRED("TG_DISK_MIN", "agents[].resources.disk"),
    WIRED("TG_DISK_CEIL", "agents[].resources.disk"),
    WIRED("TG_BANDWIDTH_MIN_BPS", "agents[].resources.network.bandwidth_limit"),
    WIRED("TG_BANDWIDTH_CEIL_BPS", "agents[].resources.network.bandwidth_limit"),
    WIRED("TG_CONNECTIONS_CEIL", "agents[].resources.network.max_connections"),
    WIRED("TG_STORE_DEF_TIMEOUT_MS", "store.timeout"),

    /* (c) units, protocol ranges and arithmetic headroom: not resource bounds. */
    FORMAT("TS_MIN_MS", "RFC 3339 year 0000: the range a timestamp can be written in"),
    FORMAT("TS_END_MS", "RFC 3339 year 10000: the range a timestamp can be written in"),
    FORMAT("METRICS_TS_MAX_MS", "last millisecond of year 9999, for exposition timestamps"),
    FORMAT("TG_STORE_PATH_MAX", "sizeof sun_path: the kernel's unix socket path size"),
    FORMAT("TG_STORE_DB_MAX", "INT_MAX: the range of a Redis database index"),
    FORMAT("TG_CONTAIN_CPU_PERIOD_US", "the cfs period cpu.max quotas are expressed in"),
    FORMAT("TG_GCRA_MAX_SPAN_US", "keeps GCRA arithmetic exact below 2^53 us"),
    FORMAT("TG_GCRA_MAX_NOW_US", "keeps GCRA arithmetic exact below 2^53 us"),
    FORMAT("REGISTRY_WARN_PCT", "the 80% approach threshold fixed by seed 002"),
    FORMAT("REGISTRY_REARM_PCT", "the 50% re-arm threshold fixed by seed 002"),

    /* (d) internal bounds that lack the marker comment: adding
     * `/ * fixed internal bound: ... * /` to the define retires the entry. */

    /* (d) tunables with an option field but no config key reaching it:
     * the process always runs with these defaults. Reported to the lead. */
    WIRED("TG_ADMIN_DEF_MAX_HEADER_BYTES", "router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_MIN_HEADER_BYTES", "floor of router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_MAX_HEADER_BYTES_CEIL", "ceiling of router.admin.max_header_bytes"),
    WIRED("TG_ADMIN_DEF_MAX_CONNECTIONS", "router.admin.max_connections"),
    WIRED("TG_ADMIN_MAX_CONNECTIONS_CEIL", "ceiling of router.admin.max_connections"),
    WIRED("TG_ADMIN_DEF_IDLE_TIMEOUT_MS", "router.admin.idle_timeout"),
    WIRED("TG_ADMIN_MIN_IDLE_TIMEOUT_MS", "floor of router.admin.idle_timeout"),
    WIRED("TG_ADMIN_IDLE_TIMEOUT_CEIL_MS", "ceiling of router.admin.idle_timeout"),
    WIRED("TG_ADMIN_DEF_MAX_RESPONSE_BYTES", "router.admin.max_response_bytes"),
    WIRED("TG_ADMIN_MIN_RESPONSE_BYTES", "floor of router.admin.max_response_bytes"),
    WIRED("TG_ADMIN_MAX_RESPONSE_BYTES_CEIL", "ceiling of router.admin.max_response_bytes"),
    WIRED("TG_STORE_DEF_CONNECT_TIMEOUT_MS", "store.connect_timeout"),
    WIRED("TG_STORE_DEF_DEAD_AFTER_MS", "store.dead_after"),
    WIRED("TG_STORE_DEF_BACKOFF_INITIAL_MS", "store.backoff"),
    WIRED("TG_STORE_DEF_BACKOFF_MAX_MS", "store.max_backoff"),
    WIRED("TG_STORE_DEF_MAX_PENDING", "store.max_pending"),
    WIRED("TG_STORE_DEF_LOCAL_MAX_KEYS", "store.local_max_keys"),
    WIRED("TG_STORE_DEF_LEASE_MS", "store.lease"),
    WIRED("TG_CONTAIN_DEF_NOFILE", "agents[].resources.nofile"),
    WIRED("TG_NOFILE_CEIL", "ceiling of agents[].resources.nofile"),
    WIRED("TG_STORE_DURATION_CEIL_MS", "ceiling of the store.* durations, e.g. store.lease"),
    WIRED("TG_STORE_MAX_PENDING_CEIL", "ceiling of store.max_pending"),
    WIRED("TG_STORE_LOCAL_MAX_KEYS_CEIL", "ceiling of store.local_max_keys"),
};
/* clang-format on */
#define NCLASSES (sizeof classes / sizeof classes[0])

/* ---- scanning ---------------------------------------------------------- */

typedef struct scan {
    regex_t define_re, name_re;
    size_t files, defines, marked, listed;
    bool seen[NCLASSES];
    char unclassified[REPORT_MAX];
    char stale[REPORT_MAX];
} scan_t;

static void report(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(char *buf, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= REPORT_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, REPORT_MAX - used, fmt, ap);
    va_end(ap);
}

static bool name_is_limit_shaped(const regex_t *re, const char *name)
{
    return regexec(re, name, 0, NULL, 0) == 0 || strstr(name, "MAX_") != NULL ||
           strstr(name, "_MIN_") != NULL || strstr(name, "_DEF_") != NULL;
}

/* True when <v> (a define's value, comment already cut) holds a decimal
 * literal that does not sit inside an identifier. */
static bool value_is_numeric(const char *v)
{
    for (const char *p = v; *p != '\0'; p++) {
        if (*p >= '0' && *p <= '9') {
            char b = p == v ? ' ' : p[-1];
            bool ident = (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') ||
                         (b >= '0' && b <= '9') || b == '_';
            if (!ident)
                return true;
        }
        if (*p == '"')
            return false; /* a string default, not a bound */
    }
    return false;
}

static bool is_comment_line(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return strncmp(line, "/*", 2) == 0 || *line == '*' || strncmp(line, "//", 2) == 0;
}

static int class_find(const char *name)
{
    for (size_t i = 0; i < NCLASSES; i++)
        if (strcmp(classes[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void scan_line(scan_t *s, const char *rel, int lineno, const char *line, const char *prev)
{
    regmatch_t m[3];
    if (regexec(&s->define_re, line, 3, m, 0) != 0)
        return;
    char name[128], value[256];
    size_t nl = (size_t)(m[1].rm_eo - m[1].rm_so);
    size_t vl = (size_t)(m[2].rm_eo - m[2].rm_so);
    if (nl >= sizeof(name))
        nl = sizeof(name) - 1;
    if (vl >= sizeof(value))
        vl = sizeof(value) - 1;
    memcpy(name, line + m[1].rm_so, nl);
    name[nl] = '\0';
    memcpy(value, line + m[2].rm_so, vl);
    value[vl] = '\0';
    char *cut = strstr(value, "/*");
    if (cut != NULL)
        *cut = '\0';
    if ((cut = strstr(value, "//")) != NULL)
        *cut = '\0';
    if (!name_is_limit_shaped(&s->name_re, name) || !value_is_numeric(value))
        return;
    s->defines++;

    bool marked = strstr(line, MARKER) != NULL ||
                  (prev != NULL && is_comment_line(prev) && strstr(prev, MARKER) != NULL);
    int idx = class_find(name);
    if (marked) {
        s->marked++;
        if (idx >= 0)
            report(s->stale, "  %s:%d: %s is marked `" MARKER "` and also listed in "
                   "tests/test_bounds.c: remove its table entry\n", rel, lineno, name);
        return;
    }
    if (idx < 0) {
        report(s->unclassified, "  %s:%d: %s\n", rel, lineno, name);
        return;
    }
    s->listed++;
    s->seen[idx] = true;
}

static void scan_file(scan_t *s, const char *path, const char *rel)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    char *line = NULL, *prev = NULL;
    size_t cap = 0;
    int lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        scan_line(s, rel, lineno, line, prev);
        free(prev);
        prev = strdup(line);
        cr_assert_not_null(prev);
    }
    free(prev);
    free(line);
    fclose(f);
    s->files++;
}

static void scan_dir(scan_t *s, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", TG_SOURCE_DIR, rel);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char crel[1024], cpath[4096];
        struct stat st;
        snprintf(crel, sizeof(crel), "%s/%s", rel, e->d_name);
        snprintf(cpath, sizeof(cpath), "%s/%s", TG_SOURCE_DIR, crel);
        if (stat(cpath, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            scan_dir(s, crel);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n > 2 && e->d_name[n - 2] == '.' && (e->d_name[n - 1] == 'c' || e->d_name[n - 1] == 'h'))
            scan_file(s, cpath, crel);
    }
    closedir(d);
}

static scan_t *scan_tree(void)
{
    static const char *const dirs[] = {"router", "limits", "audit", "config"};
    scan_t *s = calloc(1, sizeof(*s));
    cr_assert_not_null(s);
    cr_assert_eq(regcomp(&s->define_re,
                         "^[[:space:]]*#[[:space:]]*define[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)"
                         "[[:space:]]+([^\n]*)",
                         REG_EXTENDED),
                 0);
    cr_assert_eq(regcomp(&s->name_re, LIMIT_SUFFIX, REG_EXTENDED | REG_NOSUB), 0);
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        scan_dir(s, dirs[i]);
    for (size_t i = 0; i < NCLASSES; i++)
        if (!s->seen[i])
            report(s->stale, "  %s: listed in tests/test_bounds.c but no unmarked "
                   "limit-shaped define has that name any more: remove its entry\n",
                   classes[i].name);
    return s;
}

static void scan_free(scan_t *s)
{
    regfree(&s->define_re);
    regfree(&s->name_re);
    free(s);
}

static char *slurp(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", TG_SOURCE_DIR, rel);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- tests ------------------------------------------------------------- */

Test(bounds, pattern_tells_limits_from_other_defines)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, LIMIT_SUFFIX, REG_EXTENDED | REG_NOSUB), 0);
    cr_assert(name_is_limit_shaped(&re, "TG_IO_CHUNK"));
    cr_assert(name_is_limit_shaped(&re, "TG_MAX_FRAME_BYTES_CEIL"));
    cr_assert(name_is_limit_shaped(&re, "TG_AUDIT_MAX_BYTES_MIN"));
    cr_assert(name_is_limit_shaped(&re, "TG_STORE_DEF_MAX_PENDING"));
    cr_assert(name_is_limit_shaped(&re, "V1_KILL_ROUNDS"));
    cr_assert_not(name_is_limit_shaped(&re, "TG_OS_VERSION"));
    cr_assert_not(name_is_limit_shaped(&re, "TG_LIMIT_FRAME"));
    cr_assert_not(name_is_limit_shaped(&re, "F_SETPIPE_SZ"));
    regfree(&re);
    cr_assert(value_is_numeric("(64u * 1024)"));
    cr_assert(value_is_numeric("(TG_CG_PATH_MAX + 64)"));
    cr_assert(value_is_numeric("(UINT64_C(1) << 50)"));
    cr_assert_not(value_is_numeric("TG_CFG_SINKS_MAX"));
    cr_assert_not(value_is_numeric("INT64_MIN"));
    cr_assert_not(value_is_numeric("\"127.0.0.1:9464\""));
}

Test(bounds, every_limit_shaped_define_is_marked_or_wired)
{
    scan_t *s = scan_tree();
    /* The walk must really have read the tree, not passed on nothing. */
    cr_assert_geq(s->files, 40, "only %zu source files read under %s", s->files, TG_SOURCE_DIR);
    cr_assert_geq(s->marked, 40, "only %zu marked bounds found", s->marked);
    cr_assert_str_empty(s->unclassified,
                        "limit-shaped #defines that are neither a fixed internal bound nor "
                        "config-wired:\n%s"
                        "Fix each one: if nobody should tune it, end its line with "
                        "`/* " MARKER ": <what it bounds> */`; otherwise wire it to a config key "
                        "(default, floor, ceiling in config/config.h), register it in the limit "
                        "registry and add it to the WIRED table in tests/test_bounds.c.",
                        s->unclassified);
    cr_assert_eq(s->defines, s->marked + s->listed);
    scan_free(s);
}

Test(bounds, table_has_no_stale_entries)
{
    scan_t *s = scan_tree();
    cr_assert_str_empty(s->stale, "tests/test_bounds.c table is out of date:\n%s", s->stale);
    scan_free(s);
}

Test(bounds, wired_entries_name_real_config_keys)
{
    char *cfg = slurp("config/config.c");
    for (size_t i = 0; i < NCLASSES; i++) {
        const bound_class_t *c = &classes[i];
        if (c->kind != K_WIRED) {
            cr_assert_not_null(c->why, "%s: entry without a reason", c->name);
            cr_assert_gt(strlen(c->why), 10, "%s: give a real reason", c->name);
            continue;
        }
        cr_assert_not_null(c->key);
        const char *leaf = strrchr(c->key, '.');
        leaf = leaf != NULL ? leaf + 1 : c->key;
        char quoted[128];
        snprintf(quoted, sizeof(quoted), "{\"%s\"", leaf);
        cr_assert_not_null(strstr(cfg, quoted),
                           "%s is listed as set by %s, but config/config.c parses no \"%s\" key",
                           c->name, c->key, leaf);
    }
    free(cfg);
}

/* Every registration in router/session.c names a category of the registry's
 * enum, so each bound shows up under a category on /limits and the page. */
Test(bounds, every_registration_has_a_category)
{
    char *reg_h = slurp("limits/registry.h");
    char *sess = slurp("router/session.c");
    regex_t cat_re;
    cr_assert_eq(regcomp(&cat_re, "TG_LIMIT_[A-Z_]+", REG_EXTENDED), 0);
    const char *enum_start = strstr(reg_h, "typedef enum tg_limit_cat");
    cr_assert_not_null(enum_start);
    const char *enum_end = strstr(enum_start, "} tg_limit_cat_t;");
    cr_assert_not_null(enum_end);

    size_t calls = 0;
    bool in_macro = false;
    for (char *line = strtok(sess, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        size_t n = strlen(line);
        bool continued = n > 0 && line[n - 1] == '\\';
        bool is_define = strstr(line, "#define") != NULL;
        bool skip = in_macro || is_define;
        in_macro = (in_macro || is_define) && continued;
        if (skip || (strstr(line, "tg_registry_add(") == NULL && strstr(line, "REG(") == NULL))
            continue;
        regmatch_t m;
        cr_assert_eq(regexec(&cat_re, line, 1, &m, 0), 0,
                     "router/session.c: a registration without a TG_LIMIT_* category: %s", line);
        char cat[64];
        size_t cl = (size_t)(m.rm_eo - m.rm_so);
        cr_assert_lt(cl, sizeof(cat));
        memcpy(cat, line + m.rm_so, cl);
        cat[cl] = '\0';
        const char *hit = strstr(enum_start, cat);
        cr_assert(hit != NULL && hit < enum_end, "router/session.c: %s is not a tg_limit_cat_t", cat);
        calls++;
    }
    /* agent: frame, rate, concurrency, queue, write queue, stderr, memory;
     * tool: rate, concurrency, queue; caller frame, caller write queue,
     * audit queue. */
    cr_assert_eq(calls, 13, "expected 13 registrations in router/session.c, found %zu", calls);
    regfree(&cat_re);
    free(sess);
    free(reg_h);
}
