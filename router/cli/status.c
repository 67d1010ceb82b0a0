/* `toolgate status [--admin ADDR] [--json]`: the limit registry of a
 * running toolgate, fetched from its admin endpoint (/limits) and printed
 * as a table sorted by fill, fullest first (see cli.h).
 *
 * Exit status: 0 printed; 1 the endpoint could not be reached or did not
 * answer with a limits snapshot; 2 bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/admin/admin.h"
#include "router/cli/cli.h"
#include "router/cli/help.h"

#define STATUS_TIMEOUT_MS   3000                /* fixed internal bound: whole exchange */
#define STATUS_MAX_BODY     (16u * 1024 * 1024) /* fixed internal bound: /limits answer */
#define STATUS_NAME_COL_MAX 72                  /* fixed internal bound: widest name column */

/* The answer comes from whatever listens on that port: show only
 * printable ASCII so a name cannot carry terminal escapes. */
static void put_safe(const char *s, int width)
{
    int n = 0;
    for (; s != NULL && *s != '\0'; s++, n++) {
        unsigned char c = (unsigned char)*s;
        putchar(c >= 0x20 && c < 0x7f ? c : '?');
    }
    for (; n < width; n++)
        putchar(' ');
}

static int safe_len(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    return n > STATUS_NAME_COL_MAX ? STATUS_NAME_COL_MAX : (int)n;
}

static double fill_of(json_t *l)
{
    json_t *f = json_object_get(l, "fill_pct");
    return json_is_number(f) ? json_number_value(f) : -1.0;
}

static const char *str_of(json_t *l, const char *key)
{
    const char *s = json_string_value(json_object_get(l, key));
    return s != NULL ? s : "";
}

static int by_fill(const void *pa, const void *pb)
{
    json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    double fa = fill_of(a), fb = fill_of(b);
    if (fa != fb)
        return fa < fb ? 1 : -1;
    return strcmp(str_of(a, "name"), str_of(b, "name"));
}

static void put_num(json_t *l, const char *key, int width)
{
    json_t *v = json_object_get(l, key);
    if (json_is_integer(v))
        printf("%*lld", width, (long long)json_integer_value(v));
    else
        printf("%*s", width, "-");
}

static void print_table(const char *addr, const char *instance, json_t **v, size_t n)
{
    int wname = 5, wcat = 8, wscope = 5;
    for (size_t i = 0; i < n; i++) {
        int k = safe_len(str_of(v[i], "name"));
        wname = k > wname ? k : wname;
        k = safe_len(str_of(v[i], "category"));
        wcat = k > wcat ? k : wcat;
        k = safe_len(str_of(v[i], "scope"));
        wscope = k > wscope ? k : wscope;
    }
    printf("toolgate ");
    put_safe(instance, 0);
    printf(" at %s: %zu limit%s\n", addr, n, n == 1 ? "" : "s");
    printf("%-*s  %-*s  %-*s  %7s  %12s  %12s  %12s\n", wname, "LIMIT", wcat, "CATEGORY", wscope,
           "SCOPE", "FILL", "CURRENT", "HIGH_WATER", "CAPACITY");
    for (size_t i = 0; i < n; i++) {
        put_safe(str_of(v[i], "name"), wname);
        printf("  ");
        put_safe(str_of(v[i], "category"), wcat);
        printf("  ");
        put_safe(str_of(v[i], "scope"), wscope);
        double f = fill_of(v[i]);
        if (f >= 0)
            printf("  %6.1f%%", f);
        else
            printf("  %7s", "-");
        put_num(v[i], "current", 14);
        put_num(v[i], "high_water", 14);
        put_num(v[i], "capacity", 14);
        putchar('\n');
    }
}

int tg_cli_status(int argc, char **argv)
{
    const char *addr = TG_ADMIN_DEF_ADDR;
    bool as_json = false;
    tg_err_t err;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            as_json = true;
        } else if (strcmp(a, "--admin") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "toolgate status: --admin needs a value (HOST:PORT)\n");
                return 2;
            }
            addr = argv[++i];
        } else if (strncmp(a, "--admin=", 8) == 0) {
            addr = a + 8;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tg_cli_help_of(stdout, "status");
            return 0;
        } else {
            fprintf(stderr,
                    "toolgate status: unknown argument '%s' (expected --admin ADDR, --json)\n", a);
            return 2;
        }
    }
    struct sockaddr_storage ss;
    if (tg_admin_parse_addr(addr, &ss, &err) < 0) {
        fprintf(stderr, "toolgate status: %s\n", err.msg);
        return 2;
    }

    char *body = NULL;
    size_t len = 0;
    int st = tg_admin_get(addr, "/limits", STATUS_TIMEOUT_MS, STATUS_MAX_BODY, &body, &len, &err);
    if (st < 0) {
        fprintf(stderr, "toolgate status: %s (is toolgate running with --admin %s?)\n", err.msg,
                addr);
        return 1;
    }
    if (st != 200) {
        fprintf(stderr, "toolgate status: %s answered HTTP %d for /limits\n", addr, st);
        free(body);
        return 1;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    free(body);
    json_t *limits = json_object_get(doc, "limits");
    if (!json_is_array(limits)) {
        fprintf(stderr, "toolgate status: %s: /limits is not a limits snapshot\n", addr);
        json_decref(doc);
        return 1;
    }
    size_t n = json_array_size(limits);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    if (v == NULL) {
        fprintf(stderr, "toolgate status: out of memory\n");
        json_decref(doc);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(limits, i);
    qsort(v, n, sizeof(*v), by_fill);

    int rc = 0;
    if (as_json) {
        /* The same snapshot, limits in table order. */
        json_t *sorted = json_array();
        for (size_t i = 0; sorted != NULL && i < n; i++)
            json_array_append(sorted, v[i]);
        if (sorted == NULL || json_object_set_new(doc, "limits", sorted) < 0 ||
            json_dumpf(doc, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0) {
            fprintf(stderr, "toolgate status: cannot write JSON\n");
            rc = 1;
        } else {
            putchar('\n');
        }
    } else {
        print_table(addr, str_of(doc, "instance"), v, n);
    }
    free(v);
    json_decref(doc);
    if (fflush(stdout) != 0)
        rc = 1;
    return rc;
}
