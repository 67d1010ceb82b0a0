/* The tools of an agent instance (router/agent/toolreg.c): a bounded set
 * of names found in O(1), the same for every dialect that fills it. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "router/agent/toolreg.h"

Test(toolreg, names_are_found_exactly)
{
    tg_toolreg_t r;
    tg_toolreg_init(&r, 8);
    cr_assert_not(tg_toolreg_has(&r, "echo", 4), "empty");
    cr_assert_eq(tg_toolreg_add(&r, "echo", 4), 1);
    cr_assert_eq(tg_toolreg_add(&r, "echo", 4), 0, "a second register of one name");
    cr_assert_eq(tg_toolreg_add(&r, "echoes", 4), 0, "only <len> bytes count");
    cr_assert(tg_toolreg_has(&r, "echo", 4));
    cr_assert_not(tg_toolreg_has(&r, "ech", 3), "a prefix is another name");
    cr_assert_not(tg_toolreg_has(&r, "echo2", 5));
    cr_assert_not(tg_toolreg_has(&r, "Echo", 4));
    cr_assert_eq(tg_toolreg_count(&r), 1);
    tg_toolreg_free(&r);
}

Test(toolreg, bounded_by_count_and_name_length)
{
    tg_toolreg_t r;
    tg_toolreg_init(&r, 100);
    char name[TG_TOOLREG_NAME_MAX + 2];
    for (int i = 0; i < 100; i++) {
        int n = snprintf(name, sizeof name, "tool.%d", i);
        cr_assert_eq(tg_toolreg_add(&r, name, (size_t)n), 1, "%s", name);
    }
    cr_assert_eq(tg_toolreg_add(&r, "one.more", 8), -ENOSPC);
    cr_assert_eq(tg_toolreg_add(&r, "tool.7", 6), 0, "a known one is still known when full");
    for (int i = 0; i < 100; i++) {
        int n = snprintf(name, sizeof name, "tool.%d", i);
        cr_assert(tg_toolreg_has(&r, name, (size_t)n), "%s lost when the table grew", name);
    }
    memset(name, 'x', sizeof name);
    cr_assert_eq(tg_toolreg_add(&r, name, TG_TOOLREG_NAME_MAX + 1), -EINVAL);
    cr_assert_eq(tg_toolreg_add(&r, name, 0), -EINVAL);
    cr_assert_not(tg_toolreg_has(&r, name, 0));
    tg_toolreg_free(&r);
}

Test(toolreg, a_cleared_registry_knows_nothing_and_fills_again)
{
    tg_toolreg_t r;
    tg_toolreg_init(&r, 4);
    cr_assert_eq(tg_toolreg_add(&r, "a", 1), 1);
    cr_assert_eq(tg_toolreg_add(&r, "b", 1), 1);
    tg_toolreg_clear(&r); /* the instance is gone */
    cr_assert_eq(tg_toolreg_count(&r), 0);
    cr_assert_not(tg_toolreg_has(&r, "a", 1));
    for (int i = 0; i < 4; i++) {
        char n[2] = {(char)('c' + i), 0};
        cr_assert_eq(tg_toolreg_add(&r, n, 1), 1);
    }
    cr_assert_eq(tg_toolreg_add(&r, "z", 1), -ENOSPC, "the bound holds after a clear");
    tg_toolreg_free(&r);
    tg_toolreg_free(&r); /* twice is harmless */
}
