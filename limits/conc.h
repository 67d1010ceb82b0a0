/* Concurrency slots and the bounded FIFO wait queue: pure, no I/O.
 *
 * tg_conc_t counts inflight calls against a cap. tg_waitq_t is a bounded
 * FIFO of opaque call indices (uint32_t) with removal from the middle (a
 * call whose deadline passed while queued, or whose caller went away).
 * The router combines several scopes (agent, tool): a call takes a slot
 * in each; when one is full it waits in the agent's queue, and on release
 * the router scans the queue in order for the first call that now fits.
 * Ownership: the caller owns the structs; tg_waitq_free releases the ring.
 */
#ifndef TG_LIMITS_CONC_H
#define TG_LIMITS_CONC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tg_conc {
    uint32_t max;
    uint32_t inflight;
    uint32_t high_water;
} tg_conc_t;

void tg_conc_init(tg_conc_t *c, uint32_t max);
static inline bool tg_conc_has_room(const tg_conc_t *c) { return c->inflight < c->max; }
/* Take a slot: true when granted. */
bool tg_conc_acquire(tg_conc_t *c);
/* Give a slot back (never below 0). */
void tg_conc_release(tg_conc_t *c);

typedef struct tg_waitq {
    uint32_t *ring;
    uint32_t cap;   /* max_queued_calls */
    uint32_t head;  /* index of the oldest entry */
    uint32_t count;
    uint32_t high_water;
} tg_waitq_t;

/* 0 or -ENOMEM. <cap> may be 0 (no queueing: every push fails). */
int tg_waitq_init(tg_waitq_t *q, uint32_t cap);
void tg_waitq_free(tg_waitq_t *q);
/* Append; false when full. */
bool tg_waitq_push(tg_waitq_t *q, uint32_t v);
/* The i-th entry from the oldest (i < count). */
uint32_t tg_waitq_at(const tg_waitq_t *q, uint32_t i);
/* Remove the i-th entry from the oldest, keeping order. */
void tg_waitq_remove_at(tg_waitq_t *q, uint32_t i);
/* Remove the entry equal to <v>; true when found. */
bool tg_waitq_remove(tg_waitq_t *q, uint32_t v);
/* Give <q> capacity <cap> (>= its count), keeping its entries in order and
 * its high-water mark (a reload changed max_queued_calls). 0, or -ENOMEM
 * with <q> unchanged, -EINVAL when <cap> is below the count. */
int tg_waitq_resize(tg_waitq_t *q, uint32_t cap);

#endif
