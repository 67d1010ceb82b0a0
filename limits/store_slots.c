/* Held-slot bookkeeping of the stores (see store_slots.h). */
#include "limits/store_slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <uv.h>

int tg_slots_init(tg_slots_t *t, const char *instance, size_t max_keys)
{
    memset(t, 0, sizeof *t);
    if (tg_ktab_init(&t->tab, max_keys > 0 ? max_keys : 1) < 0)
        return -ENOMEM;
    /* Random, not secret: it only has to differ between instances, also
     * between a crashed toolgate and its restart on the same host (whose
     * old members may still be in Redis until their lease ends). */
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)t;
    if (instance == NULL || instance[0] == '\0')
        instance = "toolgate";
    /* 16 hex digits and the colon always fit: the name is cut first. */
    int n = snprintf(t->holder, sizeof t->holder, "%.*s:%016llx",
                     (int)(sizeof t->holder - 18), instance, (unsigned long long)r);
    t->holder_len = n > 0 ? (size_t)n : 0;
    return 0;
}

static bool slots_drop_all(void *arg, tg_ktab_node_t *n)
{
    (void)arg;
    tg_slot_key_t *k = (tg_slot_key_t *)n;
    while (k->head != NULL) {
        struct tg_store_slot *s = k->head;
        k->head = s->next;
        free(s);
    }
    free(k);
    return true;
}

void tg_slots_free(tg_slots_t *t)
{
    tg_ktab_sweep(&t->tab, slots_drop_all, NULL);
    tg_ktab_free(&t->tab);
    t->held = 0;
}

static tg_slot_key_t *slots_find(const tg_slots_t *t, const char *key)
{
    uint64_t h = tg_ktab_hash(&t->tab, key, strlen(key));
    return (tg_slot_key_t *)tg_ktab_find(&t->tab, key, h);
}

uint32_t tg_slots_held(const tg_slots_t *t, const char *key)
{
    const tg_slot_key_t *k = slots_find(t, key);
    return k != NULL ? k->held : 0;
}

static bool slots_drop_idle(void *arg, tg_ktab_node_t *n)
{
    (void)arg;
    tg_slot_key_t *k = (tg_slot_key_t *)n;
    if (k->held > 0)
        return false;
    free(k);
    return true;
}

struct tg_store_slot *tg_slots_add(tg_slots_t *t, const char *key, uint64_t seq,
                                   tg_store_decider_t by)
{
    size_t n = strlen(key);
    uint64_t h = tg_ktab_hash(&t->tab, key, n);
    tg_slot_key_t *k = (tg_slot_key_t *)tg_ktab_find(&t->tab, key, h);
    if (k == NULL) {
        if (t->tab.count >= t->tab.max_count)
            tg_ktab_sweep(&t->tab, slots_drop_idle, NULL);
        if (t->tab.count >= t->tab.max_count)
            return NULL;
        k = calloc(1, sizeof *k + n + 1);
        if (k == NULL)
            return NULL;
        memcpy(k->key, key, n + 1);
        k->node.key = k->key;
        tg_ktab_insert(&t->tab, &k->node, h);
    }
    struct tg_store_slot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->k = k;
    s->seq = seq;
    s->by = by;
    s->next = k->head;
    if (k->head != NULL)
        k->head->prev = s;
    k->head = s;
    k->held++;
    t->held++;
    return s;
}

void tg_slots_remove(tg_slots_t *t, struct tg_store_slot *s)
{
    tg_slot_key_t *k = s->k;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        k->head = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    k->held--;
    t->held--;
    free(s);
}

size_t tg_slots_member(const tg_slots_t *t, uint64_t seq, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s:%llx", t->holder, (unsigned long long)seq);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

typedef struct each_ctx {
    tg_slots_key_fn fn;
    void *arg;
} each_ctx_t;

static bool slots_visit(void *arg, tg_ktab_node_t *n)
{
    each_ctx_t *e = arg;
    const tg_slot_key_t *k = (const tg_slot_key_t *)n;
    if (k->held > 0)
        e->fn(e->arg, k);
    return false;
}

void tg_slots_each(tg_slots_t *t, tg_slots_key_fn fn, void *arg)
{
    each_ctx_t e = {fn, arg};
    tg_ktab_sweep(&t->tab, slots_visit, &e);
}
