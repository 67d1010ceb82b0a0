/* The tools of one agent instance (see toolreg.h). */
#include "router/agent/toolreg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TOOLREG_FIRST_CAP 16 /* fixed internal bound: slots of a registry's first table */

static uint32_t hash_of(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The slot holding <name>, or the empty one where it would go. */
static tg_toolreg_slot_t *find(const tg_toolreg_slot_t *slots, size_t cap, uint32_t h,
                               const char *name, size_t len)
{
    size_t mask = cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const tg_toolreg_slot_t *s = &slots[i];
        if (s->len == 0 || (s->hash == h && s->len == len && memcmp(s->name, name, len) == 0))
            return (tg_toolreg_slot_t *)s;
    }
}

void tg_toolreg_init(tg_toolreg_t *r, size_t max)
{
    memset(r, 0, sizeof(*r));
    r->max = max;
}

static int grow(tg_toolreg_t *r)
{
    size_t cap = r->cap == 0 ? TOOLREG_FIRST_CAP : 2 * r->cap;
    tg_toolreg_slot_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < r->cap; i++)
        if (r->slots[i].len != 0)
            *find(slots, cap, r->slots[i].hash, r->slots[i].name, r->slots[i].len) = r->slots[i];
    free(r->slots);
    r->slots = slots;
    r->cap = cap;
    return 0;
}

int tg_toolreg_add(tg_toolreg_t *r, const char *name, size_t len)
{
    if (len == 0 || len > TG_TOOLREG_NAME_MAX)
        return -EINVAL;
    if (tg_toolreg_has(r, name, len))
        return 0;
    if (r->n >= r->max)
        return -ENOSPC;
    if (2 * (r->n + 1) > r->cap && grow(r) < 0)
        return -ENOMEM;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -ENOMEM;
    memcpy(copy, name, len);
    copy[len] = '\0';
    uint32_t h = hash_of(name, len);
    *find(r->slots, r->cap, h, name, len) =
        (tg_toolreg_slot_t){.hash = h, .len = (uint32_t)len, .name = copy};
    r->n++;
    return 1;
}

bool tg_toolreg_has(const tg_toolreg_t *r, const char *name, size_t len)
{
    if (r->n == 0 || len == 0)
        return false;
    return find(r->slots, r->cap, hash_of(name, len), name, len)->len != 0;
}

void tg_toolreg_clear(tg_toolreg_t *r)
{
    for (size_t i = 0; i < r->cap; i++) {
        free(r->slots[i].name);
        r->slots[i] = (tg_toolreg_slot_t){0};
    }
    r->n = 0;
}

void tg_toolreg_free(tg_toolreg_t *r)
{
    tg_toolreg_clear(r);
    free(r->slots);
    r->slots = NULL;
    r->cap = 0;
}
