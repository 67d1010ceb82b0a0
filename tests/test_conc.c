/* Concurrency slots and the bounded FIFO wait queue. */
#include "limits/conc.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

Test(conc, slots_cap_and_high_water)
{
    tg_conc_t c;
    tg_conc_init(&c, 3);
    cr_assert_eq(c.max, 3);
    cr_assert_eq(c.inflight, 0);
    cr_assert(tg_conc_has_room(&c));
    cr_assert(tg_conc_acquire(&c));
    cr_assert(tg_conc_acquire(&c));
    cr_assert(tg_conc_acquire(&c));
    cr_assert_not(tg_conc_has_room(&c));
    cr_assert_not(tg_conc_acquire(&c));
    cr_assert_eq(c.inflight, 3);
    cr_assert_eq(c.high_water, 3);
    tg_conc_release(&c);
    tg_conc_release(&c);
    cr_assert_eq(c.inflight, 1);
    cr_assert_eq(c.high_water, 3);
    cr_assert(tg_conc_has_room(&c));
    cr_assert(tg_conc_acquire(&c));
    cr_assert_eq(c.inflight, 2);
    cr_assert_eq(c.high_water, 3);
}

Test(conc, release_never_goes_below_zero)
{
    tg_conc_t c;
    tg_conc_init(&c, 1);
    tg_conc_release(&c);
    cr_assert_eq(c.inflight, 0);
    cr_assert(tg_conc_acquire(&c));
    tg_conc_release(&c);
    tg_conc_release(&c);
    cr_assert_eq(c.inflight, 0);
    /* the cap still holds after the spurious release */
    cr_assert(tg_conc_acquire(&c));
    cr_assert_not(tg_conc_acquire(&c));
}

Test(conc, zero_max_admits_nothing)
{
    tg_conc_t c;
    tg_conc_init(&c, 0);
    cr_assert_not(tg_conc_has_room(&c));
    cr_assert_not(tg_conc_acquire(&c));
    cr_assert_eq(c.inflight, 0);
    cr_assert_eq(c.high_water, 0);
}

static void expect_queue(const tg_waitq_t *q, const uint32_t *want, uint32_t n)
{
    cr_assert_eq(q->count, n, "count %u, want %u", q->count, n);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(tg_waitq_at(q, i), want[i], "entry %u: %u, want %u", i, tg_waitq_at(q, i),
                     want[i]);
}

Test(waitq, fifo_bounded_with_high_water)
{
    tg_waitq_t q;
    cr_assert_eq(tg_waitq_init(&q, 3), 0);
    cr_assert(tg_waitq_push(&q, 10));
    cr_assert(tg_waitq_push(&q, 11));
    cr_assert(tg_waitq_push(&q, 12));
    cr_assert_not(tg_waitq_push(&q, 13));
    expect_queue(&q, (uint32_t[]){10, 11, 12}, 3);
    cr_assert_eq(q.high_water, 3);
    tg_waitq_remove_at(&q, 0); /* pop the oldest */
    cr_assert(tg_waitq_push(&q, 13));
    expect_queue(&q, (uint32_t[]){11, 12, 13}, 3);
    cr_assert_eq(tg_waitq_at(&q, 3), UINT32_MAX);
    tg_waitq_free(&q);
    cr_assert_null(q.ring);
    cr_assert_eq(q.count, 0);
}

Test(waitq, zero_cap_refuses_every_push)
{
    tg_waitq_t q;
    cr_assert_eq(tg_waitq_init(&q, 0), 0);
    cr_assert_not(tg_waitq_push(&q, 1));
    cr_assert_eq(q.count, 0);
    cr_assert_not(tg_waitq_remove(&q, 1));
    tg_waitq_remove_at(&q, 0);
    cr_assert_eq(tg_waitq_at(&q, 0), UINT32_MAX);
    tg_waitq_free(&q);
}

Test(waitq, remove_from_middle_keeps_order_across_wrap)
{
    tg_waitq_t q;
    cr_assert_eq(tg_waitq_init(&q, 5), 0);
    /* move head to slot 3 so the live entries wrap around the ring end */
    for (uint32_t v = 0; v < 3; v++)
        cr_assert(tg_waitq_push(&q, v));
    for (int i = 0; i < 3; i++)
        tg_waitq_remove_at(&q, 0);
    for (uint32_t v = 1; v <= 5; v++)
        cr_assert(tg_waitq_push(&q, v));
    expect_queue(&q, (uint32_t[]){1, 2, 3, 4, 5}, 5);

    tg_waitq_remove_at(&q, 1); /* nearer the head: older entries shift */
    expect_queue(&q, (uint32_t[]){1, 3, 4, 5}, 4);
    tg_waitq_remove_at(&q, 2); /* nearer the tail: newer entries shift */
    expect_queue(&q, (uint32_t[]){1, 3, 5}, 3);
    cr_assert(tg_waitq_push(&q, 6));
    cr_assert(tg_waitq_push(&q, 7));
    cr_assert_not(tg_waitq_push(&q, 8));
    expect_queue(&q, (uint32_t[]){1, 3, 5, 6, 7}, 5);
    tg_waitq_remove_at(&q, 4); /* the newest */
    expect_queue(&q, (uint32_t[]){1, 3, 5, 6}, 4);
    tg_waitq_remove_at(&q, 9); /* out of range: no-op */
    expect_queue(&q, (uint32_t[]){1, 3, 5, 6}, 4);
    cr_assert_eq(q.high_water, 5);
    tg_waitq_free(&q);
}

Test(waitq, remove_by_value)
{
    tg_waitq_t q;
    cr_assert_eq(tg_waitq_init(&q, 4), 0);
    for (uint32_t v = 100; v < 104; v++)
        cr_assert(tg_waitq_push(&q, v));
    cr_assert(tg_waitq_remove(&q, 102));
    cr_assert_not(tg_waitq_remove(&q, 102));
    cr_assert_not(tg_waitq_remove(&q, 7));
    expect_queue(&q, (uint32_t[]){100, 101, 103}, 3);
    cr_assert(tg_waitq_remove(&q, 100));
    cr_assert(tg_waitq_remove(&q, 103));
    cr_assert(tg_waitq_remove(&q, 101));
    cr_assert_eq(q.count, 0);
    cr_assert(tg_waitq_push(&q, 5));
    expect_queue(&q, (uint32_t[]){5}, 1);
    tg_waitq_free(&q);
}

/* Random pushes and removals against a plain array model. */
Test(waitq, matches_array_model)
{
    enum { CAP = 7 };
    tg_waitq_t q;
    uint32_t model[CAP], n = 0, next = 1, hw = 0;
    uint64_t s = 0x853C49E6748FEA9Bull;
    cr_assert_eq(tg_waitq_init(&q, CAP), 0);
    for (int step = 0; step < 20000; step++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(s >> 33);
        if (r % 3 != 0) {
            bool ok = tg_waitq_push(&q, next);
            cr_assert_eq(ok, n < CAP, "step %d", step);
            if (ok) {
                model[n++] = next;
                if (n > hw)
                    hw = n;
            }
            next++;
        } else if (n > 0) {
            uint32_t i = (r / 3) % n;
            if (r & 1) {
                tg_waitq_remove_at(&q, i);
            } else {
                cr_assert(tg_waitq_remove(&q, model[i]));
            }
            for (uint32_t k = i; k + 1 < n; k++)
                model[k] = model[k + 1];
            n--;
        }
        expect_queue(&q, model, n);
        cr_assert_eq(q.high_water, hw);
    }
    tg_waitq_free(&q);
}

Test(conc, waitq_resize_keeps_order_and_high_water)
{
    tg_waitq_t q;
    cr_assert_eq(tg_waitq_init(&q, 3), 0);
    /* Wrap the ring: head moves past the start before the resize. */
    cr_assert(tg_waitq_push(&q, 1));
    cr_assert(tg_waitq_push(&q, 2));
    cr_assert(tg_waitq_push(&q, 3));
    cr_assert(tg_waitq_remove(&q, 1));
    cr_assert(tg_waitq_push(&q, 4));
    cr_assert_eq(tg_waitq_resize(&q, 2), -EINVAL, "below the count");
    cr_assert_eq(q.cap, 3);
    cr_assert_eq(tg_waitq_resize(&q, 5), 0);
    cr_assert_eq(q.cap, 5);
    cr_assert_eq(q.count, 3);
    cr_assert_eq(q.high_water, 3);
    cr_assert_eq(tg_waitq_at(&q, 0), 2);
    cr_assert_eq(tg_waitq_at(&q, 1), 3);
    cr_assert_eq(tg_waitq_at(&q, 2), 4);
    cr_assert(tg_waitq_push(&q, 5));
    cr_assert(tg_waitq_push(&q, 6));
    cr_assert_not(tg_waitq_push(&q, 7), "full at the new cap");
    cr_assert_eq(tg_waitq_resize(&q, 5), 0, "same size");
    cr_assert_eq(tg_waitq_at(&q, 4), 6);
    tg_waitq_free(&q);
}
