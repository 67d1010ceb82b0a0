/* Bounded string-keyed hash table with intrusive nodes (see ktab.h). */
#include "limits/ktab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KTAB_HEADS_MIN 16 /* fixed internal bound: smallest hash table of the local store */

int tg_ktab_init(tg_ktab_t *t, size_t max_count)
{
    t->heads = calloc(KTAB_HEADS_MIN, sizeof *t->heads);
    if (t->heads == NULL)
        return -ENOMEM;
    t->nheads = KTAB_HEADS_MIN;
    t->count = 0;
    t->max_count = max_count;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->seed = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)t;
    return 0;
}

void tg_ktab_free(tg_ktab_t *t)
{
    free(t->heads);
    t->heads = NULL;
    t->nheads = 0;
    t->count = 0;
}

uint64_t tg_ktab_hash(const tg_ktab_t *t, const char *key, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037) ^ t->seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

tg_ktab_node_t *tg_ktab_find(const tg_ktab_t *t, const char *key, uint64_t h)
{
    tg_ktab_node_t *n = t->heads[h & (t->nheads - 1)];
    while (n != NULL && (n->hash != h || strcmp(n->key, key) != 0))
        n = n->next;
    return n;
}

static void ktab_grow(tg_ktab_t *t)
{
    if (t->count <= t->nheads || t->nheads >= t->max_count)
        return;
    size_t n = t->nheads * 2;
    tg_ktab_node_t **h = calloc(n, sizeof *h);
    if (h == NULL)
        return;
    for (size_t i = 0; i < t->nheads; i++) {
        tg_ktab_node_t *e = t->heads[i];
        while (e != NULL) {
            tg_ktab_node_t *next = e->next;
            size_t j = (size_t)(e->hash & (n - 1));
            e->next = h[j];
            h[j] = e;
            e = next;
        }
    }
    free(t->heads);
    t->heads = h;
    t->nheads = n;
}

void tg_ktab_insert(tg_ktab_t *t, tg_ktab_node_t *n, uint64_t h)
{
    size_t i = (size_t)(h & (t->nheads - 1));
    n->hash = h;
    n->next = t->heads[i];
    t->heads[i] = n;
    t->count++;
    ktab_grow(t);
}

void tg_ktab_sweep(tg_ktab_t *t, tg_ktab_drop_fn drop, void *arg)
{
    for (size_t i = 0; i < t->nheads; i++) {
        tg_ktab_node_t **pp = &t->heads[i];
        while (*pp != NULL) {
            tg_ktab_node_t *n = *pp;
            tg_ktab_node_t *next = n->next;
            /* Unlink before asking: <drop> may free the node. */
            *pp = next;
            if (drop(arg, n)) {
                t->count--;
                continue;
            }
            *pp = n;
            pp = &n->next;
        }
    }
}
