/* A deadline list: calls ordered by when they expire, behind one timer.
 *
 * Most calls of an agent share one duration cap, so their deadlines arrive
 * in the order the calls do: inserting from the tail is one step, removing
 * (the call answered) is an unlink, and the owner keeps a single timer
 * armed for the head instead of starting and stopping a timer per call
 * (a heap insert and a heap removal each). A deadline earlier than most of
 * the list (a caller's shorter params._meta.timeout_ms) would walk the
 * list: past <max_steps> nodes tg_dl_insert refuses, and the owner times
 * that call on its own timer instead, so no insert costs more than a
 * bounded walk.
 *
 * Pure: intrusive nodes, no allocation, no clock. Ties keep arrival order.
 */
#ifndef TG_LIMITS_DEADLINE_H
#define TG_LIMITS_DEADLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_dl_node {
    struct tg_dl_node *prev, *next; /* both NULL while not in a list */
    uint64_t due;
} tg_dl_node_t;

typedef struct tg_dl {
    tg_dl_node_t *head, *tail;
    size_t n;
} tg_dl_t;

static inline void tg_dl_init(tg_dl_t *l)
{
    l->head = l->tail = NULL;
    l->n = 0;
}

static inline bool tg_dl_linked(const tg_dl_t *l, const tg_dl_node_t *x)
{
    return x->prev != NULL || x->next != NULL || l->head == x;
}

/* Insert <x> (not linked) due at <due> after every node due at or before
 * it. Returns false, leaving <x> unlinked, when that place is more than
 * <max_steps> nodes from the tail. */
static inline bool tg_dl_insert(tg_dl_t *l, tg_dl_node_t *x, uint64_t due, unsigned max_steps)
{
    tg_dl_node_t *after = l->tail;
    unsigned steps = 0;
    while (after != NULL && after->due > due) {
        if (++steps > max_steps)
            return false;
        after = after->prev;
    }
    x->due = due;
    x->prev = after;
    x->next = after != NULL ? after->next : l->head;
    if (x->next != NULL)
        x->next->prev = x;
    else
        l->tail = x;
    if (after != NULL)
        after->next = x;
    else
        l->head = x;
    l->n++;
    return true;
}

/* Unlink <x>, which must be in <l>. */
static inline void tg_dl_remove(tg_dl_t *l, tg_dl_node_t *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        l->head = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    else
        l->tail = x->prev;
    x->prev = x->next = NULL;
    l->n--;
}

/* The node due first, or NULL. */
static inline tg_dl_node_t *tg_dl_first(const tg_dl_t *l)
{
    return l->head;
}

#endif
