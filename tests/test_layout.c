/* The folder layout (CMakeLists.txt, router/README.md): one library per
 * folder, and dependencies that point one way
 *
 *   router -> limits, audit, config;   limits, audit -> config;   config -> nothing
 *
 * so nothing below router/ includes a router/ header, and limits/ and
 * audit/ do not include each other.
 *
 * Neither the compiler nor the linker would notice a breach: every folder
 * compiles with the source root on its include path, and every binary
 * links tg_router, which carries all four libraries. So this test reads
 * the sources at TG_SOURCE_DIR, as tests/test_bounds.c does: every
 * #include of every .c and .h under limits/, audit/ and config/, in either
 * quote style and with any leading "./" or "../", is checked against the
 * table below. A header without a folder ("store.h") is the file's own
 * folder's or a system one, and is allowed.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The folders that are modules of toolgate, and what each may include. */
static const char *const modules[] = {"router", "limits", "audit", "config"};

static const struct rule {
    const char *folder;
    const char *may[3];
} rules[] = {
    {"limits", {"limits", "config", NULL}},
    {"audit", {"audit", "config", NULL}},
    {"config", {"config", NULL, NULL}},
};
#define NRULES (sizeof rules / sizeof rules[0])

#define LAYOUT_REPORT_MAX 8192 /* bytes of one report of breaches */

/* When <line> is an #include directive, copy the header's path (without
 * quotes or brackets) into <out> and return true. */
static bool include_path(const char *line, char *out, size_t cap)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '#')
        return false;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "include", 7) != 0)
        return false;
    p += 7;
    while (*p == ' ' || *p == '\t')
        p++;
    char close = *p == '"' ? '"' : *p == '<' ? '>' : '\0';
    if (close == '\0')
        return false; /* #include MACRO: nothing to read */
    const char *end = strchr(++p, close);
    if (end == NULL || (size_t)(end - p) >= cap)
        return false;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return true;
}

/* The toolgate module a header path names ("router/gateway/log.h", "../router/gateway/log.h"
 * -> "router"), or NULL for a path in the including file's own folder or
 * outside toolgate ("store.h", "sys/stat.h", "hiredis/async.h"). */
static const char *module_of(const char *path)
{
    while (strncmp(path, "./", 2) == 0 || strncmp(path, "../", 3) == 0)
        path += path[1] == '/' ? 2 : 3;
    size_t n = strcspn(path, "/");
    if (path[n] != '/')
        return NULL;
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
        if (strlen(modules[i]) == n && strncmp(path, modules[i], n) == 0)
            return modules[i];
    return NULL;
}

static bool may_include(const struct rule *r, const char *module)
{
    for (size_t i = 0; i < sizeof r->may / sizeof r->may[0] && r->may[i] != NULL; i++)
        if (strcmp(r->may[i], module) == 0)
            return true;
    return false;
}

typedef struct scan {
    const struct rule *rule;
    size_t files;
    size_t includes;                  /* of a toolgate module */
    char breaches[LAYOUT_REPORT_MAX]; /* one line each: "<file>:<line> includes ..." */
    size_t nbreaches;
    char router[LAYOUT_REPORT_MAX]; /* the breaches that include a router/ header */
} scan_t;

/* Append a line to <buf> (capacity LAYOUT_REPORT_MAX, cut when full). */
static void add_line(char *buf, const char *line)
{
    size_t used = strlen(buf);
    snprintf(buf + used, LAYOUT_REPORT_MAX - used, "%s", line);
}

static void scan_file(scan_t *s, const char *path, const char *rel)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    char line[4096], hdr[1024];
    size_t lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (!include_path(line, hdr, sizeof hdr))
            continue;
        const char *m = module_of(hdr);
        if (m == NULL)
            continue;
        s->includes++;
        if (may_include(s->rule, m))
            continue;
        char what[2048];
        snprintf(what, sizeof what, "  %s:%zu includes \"%s\": %s/ may include only %s/%s%s%s\n",
                 rel, lineno, hdr, s->rule->folder, s->rule->may[0], s->rule->may[1] ? ", " : "",
                 s->rule->may[1] ? s->rule->may[1] : "", s->rule->may[1] ? "/" : "");
        add_line(s->breaches, what);
        if (strcmp(m, "router") == 0)
            add_line(s->router, what);
        s->nbreaches++;
    }
    fclose(f);
    s->files++;
}

/* Every .c and .h below <rel> (relative to TG_SOURCE_DIR), to <fn>(<ctx>,
 * its path, its path relative to TG_SOURCE_DIR). */
static void walk_sources(const char *rel, void (*fn)(void *ctx, const char *path, const char *rel),
                         void *ctx)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", TG_SOURCE_DIR, rel);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char crel[1024], cpath[4096];
        struct stat st;
        snprintf(crel, sizeof crel, "%s/%s", rel, e->d_name);
        snprintf(cpath, sizeof cpath, "%s/%s", TG_SOURCE_DIR, crel);
        if (stat(cpath, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk_sources(crel, fn, ctx);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n > 2 && e->d_name[n - 2] == '.' &&
            (e->d_name[n - 1] == 'c' || e->d_name[n - 1] == 'h'))
            fn(ctx, cpath, crel);
    }
    closedir(d);
}

static void scan_one(void *ctx, const char *path, const char *rel)
{
    scan_file(ctx, path, rel);
}

static void scan_dir(scan_t *s, const char *rel)
{
    walk_sources(rel, scan_one, s);
}

/* Scan the folder of rules[<i>]; it must hold sources that include
 * something of toolgate's, so a wrong TG_SOURCE_DIR cannot pass. */
static void scan_folder(scan_t *s, size_t i)
{
    memset(s, 0, sizeof *s);
    s->rule = &rules[i];
    scan_dir(s, rules[i].folder);
    cr_assert_gt(s->files, 2, "only %zu source files under %s/%s", s->files, TG_SOURCE_DIR,
                 rules[i].folder);
    cr_assert_gt(s->includes, 0, "no include of a toolgate header under %s/", rules[i].folder);
}

Test(layout, include_lines_are_read_as_the_compiler_reads_them)
{
    char h[64];
    cr_assert(include_path("#include \"router/gateway/log.h\"\n", h, sizeof h));
    cr_assert_str_eq(h, "router/gateway/log.h");
    cr_assert_str_eq(module_of(h), "router");
    cr_assert(include_path("  #  include <router/gateway/io.h>", h, sizeof h));
    cr_assert_str_eq(module_of(h), "router");
    cr_assert(include_path("#include\t\"../router/gateway/log.h\" /* why */", h, sizeof h));
    cr_assert_str_eq(module_of(h), "router");
    cr_assert(include_path("#include \"./../limits/store.h\"", h, sizeof h));
    cr_assert_str_eq(module_of(h), "limits");
    cr_assert(include_path("#include \"store_slots.h\"", h, sizeof h));
    cr_assert_null(module_of(h), "the file's own folder");
    cr_assert(include_path("#include <hiredis/async.h>", h, sizeof h));
    cr_assert_null(module_of(h));
    cr_assert(include_path("#include <sys/stat.h>", h, sizeof h));
    cr_assert_null(module_of(h));
    cr_assert(include_path("#include \"routers/x.h\"", h, sizeof h));
    cr_assert_null(module_of(h), "a prefix of a module's name is not the module");
    cr_assert_not(include_path(" * #include \"router/gateway/log.h\" in a comment", h, sizeof h));
    cr_assert_not(include_path("#define include \"router/gateway/log.h\"", h, sizeof h));
    cr_assert_not(include_path("#include TG_HEADER", h, sizeof h));

    cr_assert_not(may_include(&rules[0], "router"));
    cr_assert_not(may_include(&rules[0], "audit"));
    cr_assert(may_include(&rules[0], "config"));
    cr_assert_not(may_include(&rules[2], "limits"));
}

Test(layout, nothing_below_router_includes_a_router_header)
{
    static scan_t s;
    static char found[LAYOUT_REPORT_MAX];
    for (size_t i = 0; i < NRULES; i++) {
        scan_folder(&s, i);
        add_line(found, s.router);
    }
    cr_assert_eq(found[0], '\0',
                 "limits/, audit/ and config/ are below router/ and must not include its "
                 "headers (move what they need down, or the caller up):\n%s",
                 found);
}

Test(layout, limits_audit_and_config_include_only_what_they_may)
{
    static scan_t s;
    static char found[LAYOUT_REPORT_MAX];
    for (size_t i = 0; i < NRULES; i++) {
        scan_folder(&s, i);
        add_line(found, s.breaches);
    }
    cr_assert_eq(found[0], '\0', "dependencies point one way (router/README.md):\n%s", found);
}

/* ---- rooms inside router/ -------------------------------------------------
 *
 * Each folder of router/ is a room built as its own static library
 * (router/CMakeLists.txt), and a room may include only the headers of the
 * rooms below it, listed here, bottom first. A type-only header (its name
 * ends in "-t.h", as HAProxy's) names what two rooms must both name and
 * may be included from any room. A folder missing from this table fails:
 * a new room takes its place in the order before it is built. */

#define ROOM_MAY_MAX 12

static const struct room {
    const char *room; /* relative to router/; "" is main.c's */
    const char *may[ROOM_MAY_MAX];
} rooms[] = {
    {"codec", {NULL}},
    {"http", {NULL}},
    {"tls", {NULL}},
    {"auth", {NULL}},
    {"gateway", {"codec", NULL}},
    {"agent", {"gateway", "codec", NULL}},
    {"call", {"agent", "gateway", "codec", NULL}},
    {"dialect/mcp", {"call", "agent", "gateway", "codec", "auth", NULL}},
    {"dialect/opensentience", {"call", "agent", "gateway", "codec", NULL}},
    {"dialect", {"dialect/mcp", "dialect/opensentience", "agent", "gateway", NULL}},
    {"admin", {"call", "gateway", "codec", "http", NULL}},
    {"front", {"admin", "dialect", "agent", "gateway", "codec", "http", "tls", "auth", NULL}},
    {"cli",
     {"front", "admin", "dialect/mcp", "call", "agent", "gateway", "codec", "http", "tls", "auth",
      NULL}},
    {"",
     {"cli", "front", "admin", "call", "agent", "gateway", "codec", "http", "tls", "auth", NULL}},
};
#define NROOMS (sizeof rooms / sizeof rooms[0])

static const struct room *room_find(const char *name, size_t len)
{
    for (size_t i = 0; i < NROOMS; i++)
        if (strlen(rooms[i].room) == len && strncmp(rooms[i].room, name, len) == 0)
            return &rooms[i];
    return NULL;
}

/* The room of a path relative to router/ ("dialect/mcp/session.c" ->
 * "dialect/mcp", "main.c" -> ""): its folder's length. */
static size_t room_len(const char *rel)
{
    const char *slash = strrchr(rel, '/');
    return slash != NULL ? (size_t)(slash - rel) : 0;
}

static bool room_may(const struct room *r, const char *target, size_t len)
{
    for (size_t i = 0; i < ROOM_MAY_MAX && r->may[i] != NULL; i++)
        if (strlen(r->may[i]) == len && strncmp(r->may[i], target, len) == 0)
            return true;
    return false;
}

typedef struct room_scan {
    size_t files, arrows;
    char breaches[LAYOUT_REPORT_MAX];
} room_scan_t;

static void room_file(room_scan_t *s, const char *path, const char *rel)
{
    size_t own = room_len(rel);
    const struct room *r = room_find(rel, own);
    char line[4096], hdr[1024], what[2048];
    if (r == NULL) {
        snprintf(what, sizeof what, "  router/%.*s/ is no room of the table: add it to rooms[]\n",
                 (int)own, rel);
        add_line(s->breaches, what);
        return;
    }
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    size_t lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (!include_path(line, hdr, sizeof hdr) || strncmp(hdr, "router/", 7) != 0)
            continue;
        const char *h = hdr + 7;
        size_t tl = room_len(h), hl = strlen(h);
        if (tl == own && strncmp(h, rel, own) == 0)
            continue; /* its own room */
        s->arrows++;
        if (hl > 4 && strcmp(h + hl - 4, "-t.h") == 0)
            continue; /* type only */
        if (room_may(r, h, tl))
            continue;
        snprintf(what, sizeof what,
                 "  router/%s:%zu includes \"%s\": router/%.*s/ is not among the rooms "
                 "router/%s/ may use\n",
                 rel, lineno, hdr, (int)tl, h, r->room);
        add_line(s->breaches, what);
    }
    fclose(f);
    s->files++;
}

static void room_one(void *ctx, const char *path, const char *rel)
{
    room_file(ctx, path, rel + strlen("router/")); /* relative to router/ */
}

Test(layout, rooms_of_router_include_only_the_rooms_below_them)
{
    static room_scan_t s;
    walk_sources("router", room_one, &s);
    cr_assert_gt(s.files, 50, "only %zu sources under %s/router", s.files, TG_SOURCE_DIR);
    cr_assert_gt(s.arrows, 50, "only %zu includes between rooms", s.arrows);
    cr_assert_eq(s.breaches[0], '\0', "arrows the wrong way (tests/test_layout.c rooms[]):\n%s",
                 s.breaches);
}

Test(layout, the_room_table_reads_paths_as_rooms)
{
    cr_assert_eq(room_len("dialect/mcp/session.c"), strlen("dialect/mcp"));
    cr_assert_eq(room_len("main.c"), 0);
    const struct room *call = room_find("call", 4);
    cr_assert_not_null(call);
    cr_assert(room_may(call, "agent", 5));
    cr_assert_not(room_may(call, "admin", 5), "call/ is below admin/");
    cr_assert_not(room_may(call, "ag", 2), "a prefix of a room is not the room");
    /* dialect/ is the table of the dialects (dialect/dialect.c): the
     * fronts use it, never an engine's room below it. */
    const struct room *front = room_find("front", 5);
    cr_assert_not_null(front);
    cr_assert(room_may(front, "dialect", 7));
    cr_assert_not(room_may(front, "dialect/mcp", 11), "front/ includes no engine");
    cr_assert_not(room_may(front, "dialect/opensentience", 21), "front/ includes no engine");
}
