/* The limit registry: warn once at 80%, re-arm (RECOVERED) below 50%. */
#include "limits/registry.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

Test(registry, warns_once_and_rearms_below_half)
{
    tg_limit_t l = {.capacity = 10};
    cr_assert_eq(tg_limit_observe(&l, 7), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 8), TG_LIMIT_EV_WARNING); /* 80% exactly */
    cr_assert(l.warned);
    cr_assert_eq(tg_limit_observe(&l, 9), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 10), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 12), TG_LIMIT_EV_NONE);
    /* between 50% and 80%: still armed off, no repeat */
    cr_assert_eq(tg_limit_observe(&l, 5), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 8), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 5), TG_LIMIT_EV_NONE); /* 50% is not below */
    cr_assert_eq(tg_limit_observe(&l, 4), TG_LIMIT_EV_RECOVERED);
    cr_assert_not(l.warned);
    cr_assert_eq(tg_limit_observe(&l, 3), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_NONE);
    /* re-armed: the next crossing warns again */
    cr_assert_eq(tg_limit_observe(&l, 9), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(l.current, 0);
    cr_assert_eq(l.high_water, 12);
}

Test(registry, thresholds_round_toward_the_exact_percentages)
{
    /* capacity 3: 80% is 2.4, so 3 warns and 2 does not; 50% is 1.5 */
    tg_limit_t l = {.capacity = 3};
    cr_assert_eq(tg_limit_observe(&l, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 3), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 1), TG_LIMIT_EV_RECOVERED);
    /* capacity 1: anything in use is 100%, only 0 is below half */
    tg_limit_t one = {.capacity = 1};
    cr_assert_eq(tg_limit_observe(&one, 1), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&one, 1), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&one, 0), TG_LIMIT_EV_RECOVERED);
    /* 4 MiB frame cap in bytes */
    tg_limit_t fr = {.capacity = 4194304};
    cr_assert_eq(tg_limit_observe(&fr, 3355443), TG_LIMIT_EV_NONE);    /* 79.99998% */
    cr_assert_eq(tg_limit_observe(&fr, 3355444), TG_LIMIT_EV_WARNING); /* 80.00002% */
    cr_assert_eq(tg_limit_observe(&fr, 2097152), TG_LIMIT_EV_NONE);    /* 50% */
    cr_assert_eq(tg_limit_observe(&fr, 2097151), TG_LIMIT_EV_RECOVERED);
}

Test(registry, huge_values_do_not_overflow)
{
    tg_limit_t l = {.capacity = UINT64_MAX};
    /* 80% of 2^64-1 is 14757395258967641292.0; a naive current * 100 wraps */
    cr_assert_eq(tg_limit_observe(&l, UINT64_C(14757395258967641291)), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_C(14757395258967641292)), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX / 2 + 1), TG_LIMIT_EV_NONE); /* 50% */
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX / 2), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(l.high_water, UINT64_MAX);
}

Test(registry, capacity_zero_never_warns)
{
    tg_limit_t l = {.capacity = 0};
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 1000), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX), TG_LIMIT_EV_NONE);
    cr_assert_not(l.warned);
    cr_assert_eq(l.high_water, UINT64_MAX);
}

Test(registry, add_set_and_high_water)
{
    tg_registry_t r;
    tg_registry_init(&r);
    int a = tg_registry_add(&r, "agent.search.concurrency", TG_LIMIT_CONCURRENCY, "agent", 4);
    int b = tg_registry_add(&r, "agent.search.tool.web.rate", TG_LIMIT_RATE, "tool", 10);
    cr_assert_eq(a, 0);
    cr_assert_eq(b, 1);
    cr_assert_eq(r.n, 2);
    cr_assert_str_eq(r.v[b].name, "agent.search.tool.web.rate");
    cr_assert_str_eq(r.v[b].scope, "tool");
    cr_assert_eq(r.v[b].cat, TG_LIMIT_RATE);
    cr_assert_eq(r.v[b].capacity, 10);
    cr_assert_eq(r.v[b].current, 0);
    cr_assert_eq(r.v[b].high_water, 0);
    cr_assert_not(r.v[b].warned);

    cr_assert_eq(tg_registry_set(&r, a, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, a, 4), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_registry_set(&r, a, 3), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, a, 1), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(r.v[a].current, 1);
    cr_assert_eq(r.v[a].high_water, 4);
    /* limits are independent */
    cr_assert_eq(r.v[b].high_water, 0);
    cr_assert_eq(tg_registry_set(&r, b, 8), TG_LIMIT_EV_WARNING);
    /* bad indices are ignored */
    cr_assert_eq(tg_registry_set(&r, -1, 100), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, 2, 100), TG_LIMIT_EV_NONE);
    tg_registry_free(&r);
    cr_assert_null(r.v);
    cr_assert_eq(r.n, 0);
}

Test(registry, many_entries_keep_their_indices)
{
    tg_registry_t r;
    tg_registry_init(&r);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "limit.%d", i);
        cr_assert_eq(tg_registry_add(&r, name, TG_LIMIT_QUEUE, "instance", (uint64_t)i + 1), i);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "limit.%d", i);
        cr_assert_str_eq(r.v[i].name, name);
        cr_assert_eq(r.v[i].capacity, (uint64_t)i + 1);
    }
    tg_registry_free(&r);
}

Test(registry, names_are_truncated_safely)
{
    tg_registry_t r;
    tg_registry_init(&r);
    char long_name[400];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    int i = tg_registry_add(&r, long_name, TG_LIMIT_FRAME, "a-scope-longer-than-16", 1);
    cr_assert_geq(i, 0);
    cr_assert_eq(strlen(r.v[i].name), TG_LIMIT_NAME_MAX - 1);
    cr_assert_str_eq(r.v[i].scope, "a-scope-longer-");

    /* a cut inside a multi-byte character backs off to its first byte:
     * 158 ASCII bytes then "é" (2 bytes) would end at byte 160 */
    char utf[200];
    memset(utf, 'b', 158);
    memcpy(utf + 158, "\xc3\xa9tail", 7);
    int j = tg_registry_add(&r, utf, TG_LIMIT_FRAME, "tool", 1);
    cr_assert_eq(strlen(r.v[j].name), 158);
    cr_assert_eq(r.v[j].name[157], 'b');

    /* exactly fits: NAME_MAX - 1 bytes are kept whole */
    char fit[TG_LIMIT_NAME_MAX];
    memset(fit, 'c', sizeof(fit) - 1);
    fit[sizeof(fit) - 1] = '\0';
    int k = tg_registry_add(&r, fit, TG_LIMIT_FRAME, "tool", 1);
    cr_assert_str_eq(r.v[k].name, fit);

    int m = tg_registry_add(&r, NULL, TG_LIMIT_FRAME, NULL, 1);
    cr_assert_str_eq(r.v[m].name, "");
    cr_assert_str_eq(r.v[m].scope, "");
    tg_registry_free(&r);
}

Test(registry, category_names)
{
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_FRAME), "frame");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_RATE), "rate");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_CONCURRENCY), "concurrency");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_QUEUE), "queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_WRITE_QUEUE), "write_queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_AUDIT_QUEUE), "audit_queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_STDERR), "stderr");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_RESOURCE), "resource");
    cr_assert_str_eq(tg_limit_cat_name((tg_limit_cat_t)99), "unknown");
}
