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

static void scan_dir(scan_t *s, const char *rel)
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
            scan_dir(s, crel);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n > 2 && e->d_name[n - 2] == '.' &&
            (e->d_name[n - 1] == 'c' || e->d_name[n - 1] == 'h'))
            scan_file(s, cpath, crel);
    }
    closedir(d);
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
