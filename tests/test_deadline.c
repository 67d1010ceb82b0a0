/* The deadline list (limits/deadline.h): order, ties, the bounded walk,
 * and a randomized run against a plain sorted array. */
#include "limits/deadline.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static uint64_t due_at(const tg_dl_t *l, size_t k)
{
    const tg_dl_node_t *x = l->head;
    while (k-- > 0)
        x = x->next;
    return x->due;
}

/* Links agree both ways and with n; dues never decrease. */
static void check_list(const tg_dl_t *l)
{
    size_t n = 0;
    const tg_dl_node_t *prev = NULL;
    for (const tg_dl_node_t *x = l->head; x != NULL; x = x->next) {
        cr_assert_eq(x->prev, prev);
        if (prev != NULL)
            cr_assert_leq(prev->due, x->due);
        prev = x;
        n++;
    }
    cr_assert_eq(l->tail, prev);
    cr_assert_eq(l->n, n);
}

Test(deadline, same_duration_appends_in_arrival_order)
{
    tg_dl_t l;
    tg_dl_node_t x[4] = {0};
    tg_dl_init(&l);
    cr_assert_null(tg_dl_first(&l));
    for (int i = 0; i < 4; i++)
        cr_assert(tg_dl_insert(&l, &x[i], 100 + (uint64_t)i, 0)); /* no step needed */
    check_list(&l);
    cr_assert_eq(tg_dl_first(&l), &x[0]);
    /* Answered out of order: unlinking is enough. */
    tg_dl_remove(&l, &x[2]);
    tg_dl_remove(&l, &x[0]);
    check_list(&l);
    cr_assert_eq(tg_dl_first(&l), &x[1]);
    cr_assert_not(tg_dl_linked(&l, &x[0]));
    cr_assert(tg_dl_linked(&l, &x[1]));
    cr_assert(tg_dl_linked(&l, &x[3]));
    tg_dl_remove(&l, &x[1]);
    tg_dl_remove(&l, &x[3]);
    check_list(&l);
    cr_assert_null(tg_dl_first(&l));
    cr_assert_not(tg_dl_linked(&l, &x[3]));
}

Test(deadline, ties_keep_arrival_order)
{
    tg_dl_t l;
    tg_dl_node_t a = {0}, b = {0}, c = {0};
    tg_dl_init(&l);
    cr_assert(tg_dl_insert(&l, &a, 50, 0));
    cr_assert(tg_dl_insert(&l, &b, 50, 0));
    cr_assert(tg_dl_insert(&l, &c, 50, 0));
    cr_assert_eq(l.head, &a);
    cr_assert_eq(a.next, &b);
    cr_assert_eq(b.next, &c);
}

Test(deadline, earlier_deadline_walks_and_the_walk_is_bounded)
{
    tg_dl_t l;
    tg_dl_node_t x[6] = {0}, early = {0}, head = {0};
    tg_dl_init(&l);
    for (int i = 0; i < 6; i++)
        cr_assert(tg_dl_insert(&l, &x[i], 1000 + (uint64_t)i, 8));
    /* Before the last two: two steps. */
    cr_assert(tg_dl_insert(&l, &early, 1003, 2));
    check_list(&l);
    cr_assert_eq(early.prev, &x[3]);
    /* Before everything needs 7 steps: refused with 6, left unlinked. */
    cr_assert_not(tg_dl_insert(&l, &head, 1, 6));
    cr_assert_not(tg_dl_linked(&l, &head));
    cr_assert_eq(l.n, 7);
    cr_assert(tg_dl_insert(&l, &head, 1, 7));
    cr_assert_eq(tg_dl_first(&l), &head);
    check_list(&l);
}

Test(deadline, randomized_against_sorted_array)
{
    enum { N = 64, ROUNDS = 20000 };
    tg_dl_t l;
    tg_dl_node_t x[N] = {{0}};
    tg_dl_init(&l);
    srand(7);
    for (int r = 0; r < ROUNDS; r++) {
        tg_dl_node_t *n = &x[rand() % N];
        if (tg_dl_linked(&l, n)) {
            tg_dl_remove(&l, n);
        } else {
            uint64_t due = (uint64_t)(rand() % 50);
            unsigned max = (unsigned)(rand() % 4);
            /* Steps needed: nodes due strictly later. */
            unsigned later = 0;
            for (const tg_dl_node_t *y = l.head; y != NULL; y = y->next)
                later += y->due > due;
            bool ok = tg_dl_insert(&l, n, due, max);
            cr_assert_eq(ok, later <= max, "due %lu later %u max %u", (unsigned long)due, later,
                         max);
            if (ok) {
                /* After every node due at or before it. */
                for (const tg_dl_node_t *y = n->next; y != NULL; y = y->next)
                    cr_assert_gt(y->due, due);
            }
        }
        check_list(&l);
    }
    for (size_t k = 1; k < l.n; k++)
        cr_assert_leq(due_at(&l, k - 1), due_at(&l, k));
}
