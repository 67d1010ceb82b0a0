/* The admin endpoint (router/admin/admin.h) as the integration tests read
 * it from a running toolgate: a body, the /limits document, one of its
 * entries. Header-only, on top of tests/tg_harness.h; each helper fails
 * the test when the endpoint does not answer as it must. */
#ifndef TG_TESTS_TG_ADMIN_H
#define TG_TESTS_TG_ADMIN_H

#include <criterion/criterion.h>
#include <jansson.h>

#include "router/admin/admin.h"
#include "tests/tg_harness.h"

/* GET <path> at <addr>: the body (caller frees), its length in <*len>
 * when non-NULL; the answer must be a 200. */
static inline char *tga_get(const char *addr, const char *path, size_t *len)
{
    char *body = NULL;
    tg_err_t err = {""};
    size_t n = 0;
    int st = tg_admin_get(addr, path, 5000, 16u << 20, &body, &n, &err);
    cr_assert_eq(st, 200, "GET %s from %s: %d %s", path, addr, st, st < 0 ? err.msg : "");
    if (len)
        *len = n;
    return body;
}

/* The /limits document at <addr> (caller frees). */
static inline json_t *tga_limits(const char *addr)
{
    size_t len = 0;
    char *body = tga_get(addr, "/limits", &len);
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    cr_assert_not_null(doc, "/limits is not JSON: %s", jerr.text);
    free(body);
    return doc;
}

/* The entry named <name> of the /limits document <doc> (borrowed), or
 * NULL when there is none. */
static inline json_t *tga_limit(const json_t *doc, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "limits"), i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0)
            return e;
    }
    return NULL;
}

#endif
