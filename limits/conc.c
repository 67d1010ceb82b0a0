/* Concurrency slots and the bounded FIFO wait queue (see conc.h).
 *
 * The queue is a fixed ring sized once at init to max_queued_calls, so a
 * burst of callers can never grow memory; pushes beyond the cap fail and
 * the router answers concurrency_limit_exceeded.
 */
#include "limits/conc.h"

#include <errno.h>
#include <stdlib.h>

void tg_conc_init(tg_conc_t *c, uint32_t max)
{
    c->max = max;
    c->inflight = 0;
    c->high_water = 0;
}

bool tg_conc_acquire(tg_conc_t *c)
{
    if (c->inflight >= c->max)
        return false;
    c->inflight++;
    if (c->inflight > c->high_water)
        c->high_water = c->inflight;
    return true;
}

void tg_conc_release(tg_conc_t *c)
{
    /* A double release is a router bug, but must not wrap the counter to
     * 4 billion and so disable the limit. */
    if (c->inflight > 0)
        c->inflight--;
}

int tg_waitq_init(tg_waitq_t *q, uint32_t cap)
{
    q->ring = NULL;
    q->cap = cap;
    q->head = 0;
    q->count = 0;
    q->high_water = 0;
    if (cap == 0)
        return 0;
    q->ring = calloc(cap, sizeof(*q->ring));
    if (q->ring == NULL) {
        q->cap = 0;
        return -ENOMEM;
    }
    return 0;
}

void tg_waitq_free(tg_waitq_t *q)
{
    free(q->ring);
    q->ring = NULL;
    q->cap = 0;
    q->head = 0;
    q->count = 0;
}

/* Ring slot of the i-th entry from the oldest; i < cap, head < cap, so the
 * sum fits in 64 bits and one subtraction wraps it. */
static uint32_t waitq__slot(const tg_waitq_t *q, uint32_t i)
{
    uint64_t s = (uint64_t)q->head + i;
    return (uint32_t)(s >= q->cap ? s - q->cap : s);
}

bool tg_waitq_push(tg_waitq_t *q, uint32_t v)
{
    if (q->count >= q->cap)
        return false;
    q->ring[waitq__slot(q, q->count)] = v;
    q->count++;
    if (q->count > q->high_water)
        q->high_water = q->count;
    return true;
}

uint32_t tg_waitq_at(const tg_waitq_t *q, uint32_t i)
{
    /* Out of range is a caller bug; UINT32_MAX is never a valid call index
     * in the router, so it fails visibly rather than reading stale data. */
    if (i >= q->count)
        return UINT32_MAX;
    return q->ring[waitq__slot(q, i)];
}

void tg_waitq_remove_at(tg_waitq_t *q, uint32_t i)
{
    if (i >= q->count)
        return;
    /* Close the gap from whichever end is nearer: entries older than i
     * shift one step toward the tail (and head advances), or entries newer
     * than i shift one step toward the head. Either keeps FIFO order. */
    if (i < q->count / 2) {
        for (uint32_t k = i; k > 0; k--)
            q->ring[waitq__slot(q, k)] = q->ring[waitq__slot(q, k - 1)];
        q->head = waitq__slot(q, 1);
    } else {
        for (uint32_t k = i; k + 1 < q->count; k++)
            q->ring[waitq__slot(q, k)] = q->ring[waitq__slot(q, k + 1)];
    }
    q->count--;
    if (q->count == 0)
        q->head = 0;
}

bool tg_waitq_remove(tg_waitq_t *q, uint32_t v)
{
    for (uint32_t i = 0; i < q->count; i++) {
        if (q->ring[waitq__slot(q, i)] == v) {
            tg_waitq_remove_at(q, i);
            return true;
        }
    }
    return false;
}

int tg_waitq_resize(tg_waitq_t *q, uint32_t cap)
{
    tg_waitq_t nq;
    if (cap < q->count)
        return -EINVAL;
    if (tg_waitq_init(&nq, cap) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < q->count; i++)
        (void)tg_waitq_push(&nq, tg_waitq_at(q, i));
    nq.high_water = q->high_water;
    tg_waitq_free(q);
    *q = nq;
    return 0;
}
