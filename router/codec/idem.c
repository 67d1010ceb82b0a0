/* The idempotency cache (see idem.h). */
#include "router/codec/idem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint32_t tg_idem_hash(const char *key, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 16777619u;
    }
    return h;
}

int tg_idem_init(tg_idem_t *c, uint64_t max_bytes, uint64_t window_ms)
{
    memset(c, 0, sizeof(*c));
    c->tab = calloc(TG_IDEM_BUCKETS, sizeof(*c->tab));
    if (c->tab == NULL)
        return -ENOMEM;
    c->max_bytes = max_bytes;
    c->window_ms = window_ms;
    return 0;
}

/* Take <e> out of its chain and the list, and free it. */
static void unlink_entry(tg_idem_t *c, tg_idem_entry_t *e)
{
    tg_idem_entry_t **pp = &c->tab[e->hash % TG_IDEM_BUCKETS];
    while (*pp != NULL && *pp != e)
        pp = &(*pp)->chain;
    if (*pp == e)
        *pp = e->chain;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    c->bytes -= e->cost;
    free(e->key);
    free(e->frame);
    free(e);
}

void tg_idem_clear(tg_idem_t *c)
{
    while (c->oldest != NULL)
        unlink_entry(c, c->oldest);
}

void tg_idem_free(tg_idem_t *c)
{
    tg_idem_clear(c);
    free(c->tab);
    c->tab = NULL;
}

void tg_idem_limits(tg_idem_t *c, uint64_t max_bytes, uint64_t window_ms)
{
    c->max_bytes = max_bytes;
    c->window_ms = window_ms;
    while (c->oldest != NULL && c->bytes > max_bytes)
        unlink_entry(c, c->oldest);
}

/* Drop expired entries: the oldest expire first (one window for all). */
static void expire(tg_idem_t *c, uint64_t now_ms)
{
    while (c->oldest != NULL && c->oldest->expires <= now_ms)
        unlink_entry(c, c->oldest);
}

const tg_idem_entry_t *tg_idem_find(tg_idem_t *c, const char *key, size_t len, uint64_t now_ms)
{
    if (c->tab == NULL)
        return NULL;
    expire(c, now_ms);
    uint32_t h = tg_idem_hash(key, len);
    /* A shortened window leaves newer entries expiring before older ones:
     * expire() stops at the first live one, so an entry behind it may be
     * past its own expiry: it goes now. */
    for (tg_idem_entry_t *e = c->tab[h % TG_IDEM_BUCKETS]; e != NULL; e = e->chain)
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
            if (e->expires > now_ms)
                return e;
            unlink_entry(c, e);
            return NULL;
        }
    return NULL;
}

int tg_idem_store(tg_idem_t *c, const char *key, size_t klen, const char *frame, size_t len,
                  size_t cid_off, size_t cid_len, bool ok, uint64_t now_ms)
{
    size_t cost = len + klen + sizeof(tg_idem_entry_t);
    if (c->tab == NULL)
        return -EINVAL;
    if (cost > c->max_bytes)
        return -EMSGSIZE;
    /* The entry found is ours to drop: the cache is not const here. */
    tg_idem_entry_t *old = (tg_idem_entry_t *)tg_idem_find(c, key, klen, now_ms);
    if (old != NULL)
        unlink_entry(c, old);
    while (c->oldest != NULL && c->bytes + cost > c->max_bytes)
        unlink_entry(c, c->oldest);
    /* (+1: malloc(0) may return NULL, which would read as no memory.) */
    tg_idem_entry_t *e = calloc(1, sizeof(*e));
    if (e == NULL || (e->key = malloc(klen + 1)) == NULL || (e->frame = malloc(len + 1)) == NULL) {
        if (e != NULL)
            free(e->key);
        free(e);
        return -ENOMEM;
    }
    memcpy(e->key, key, klen);
    e->key_len = klen;
    memcpy(e->frame, frame, len);
    e->frame_len = len;
    e->cid_off = cid_off;
    e->cid_len = cid_len;
    e->ok = ok;
    e->cost = cost;
    e->hash = tg_idem_hash(key, klen);
    e->expires = now_ms + c->window_ms;
    tg_idem_entry_t **b = &c->tab[e->hash % TG_IDEM_BUCKETS];
    e->chain = *b;
    *b = e;
    e->older = c->newest;
    if (c->newest != NULL)
        c->newest->newer = e;
    else
        c->oldest = e;
    c->newest = e;
    c->bytes += cost;
    return 0;
}
