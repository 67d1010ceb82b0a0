/* The limit registry (see registry.h).
 *
 * Warnings use hysteresis (warn at >= 80%, re-arm below 50%) so that a
 * limit hovering around its threshold produces one warning, not one per
 * call. The comparisons are done on integer thresholds derived from the
 * capacity, so a usage or capacity near UINT64_MAX cannot overflow.
 */
#include "limits/registry.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define REGISTRY_WARN_PCT 80
#define REGISTRY_REARM_PCT 50

void tg_registry_init(tg_registry_t *r)
{
    r->v = NULL;
    r->n = 0;
    r->cap = 0;
    r->on_event = NULL;
    r->event_ctx = NULL;
    r->now_ms = 0;
    r->rearm_quiet_ms = 0;
}

void tg_registry_on_event(tg_registry_t *r, tg_limit_event_fn fn, void *ctx)
{
    r->on_event = fn;
    r->event_ctx = ctx;
}

int tg_registry_upsert(tg_registry_t *r, const char *name, tg_limit_cat_t cat, const char *scope,
                       uint64_t capacity)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0) {
            r->v[i].capacity = capacity;
            return (int)i;
        }
    return tg_registry_add(r, name, cat, scope, capacity);
}

void tg_registry_free(tg_registry_t *r)
{
    free(r->v);
    tg_registry_init(r);
}

/* Copy <src> into <dst> of <size> bytes, always NUL-terminated. When it must
 * cut, it backs off to a UTF-8 character boundary so a report never carries
 * half a character (agent and tool names come from manifests). */
static void registry__copy_name(char *dst, size_t size, const char *src)
{
    size_t len = src != NULL ? strnlen(src, size) : 0;
    if (len >= size) {
        len = size - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    if (len > 0)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

int tg_registry_add(tg_registry_t *r, const char *name, tg_limit_cat_t cat, const char *scope,
                    uint64_t capacity)
{
    /* Indices are returned as int: the registry stops at INT_MAX entries. */
    if (r->n >= (size_t)INT_MAX)
        return -ENOMEM;
    if (r->n == r->cap) {
        size_t ncap = r->cap != 0 ? r->cap * 2 : 16;
        if (ncap > (size_t)INT_MAX)
            ncap = (size_t)INT_MAX;
        if (ncap > SIZE_MAX / sizeof(*r->v))
            return -ENOMEM;
        tg_limit_t *nv = realloc(r->v, ncap * sizeof(*nv));
        if (nv == NULL)
            return -ENOMEM;
        r->v = nv;
        r->cap = ncap;
    }
    tg_limit_t *l = &r->v[r->n];
    memset(l, 0, sizeof(*l));
    registry__copy_name(l->name, sizeof(l->name), name);
    registry__copy_name(l->scope, sizeof(l->scope), scope);
    l->cat = cat;
    l->capacity = capacity;
    return (int)r->n++;
}

/* Smallest usage u with u * 100 >= capacity * pct, computed without the
 * products: capacity = 100q + m gives capacity * pct / 100 = q * pct +
 * m * pct / 100, and u is an integer so the fraction rounds up. */
static uint64_t registry__threshold(uint64_t capacity, unsigned pct)
{
    uint64_t q = capacity / 100, m = capacity % 100;
    return q * pct + (m * pct + 99) / 100;
}

/* The usage and thresholds part of an observation: record <current>,
 * keep the high water, recompute the thresholds when the capacity
 * changed. false for capacity 0, which means "not applicable here" (e.g.
 * a backend that cannot measure it): 0% or 100% would both be lies, so
 * stay silent. */
static bool registry__record(tg_limit_t *l, uint64_t current)
{
    l->current = current;
    if (current > l->high_water)
        l->high_water = current;
    if (l->capacity == 0)
        return false;
    /* This runs several times per call: the divisions only when the
     * capacity changed. */
    if (__builtin_expect(l->thr_cap != l->capacity, 0)) {
        l->thr_cap = l->capacity;
        l->warn_at = registry__threshold(l->capacity, REGISTRY_WARN_PCT);
        l->rearm_at = registry__threshold(l->capacity, REGISTRY_REARM_PCT);
    }
    return true;
}

tg_limit_ev_t tg_limit_observe_quiet(tg_limit_t *l, uint64_t current, uint64_t now_ms)
{
    if (!registry__record(l, current))
        return TG_LIMIT_EV_NONE;
    if (!l->warned && current >= l->warn_at) {
        l->warned = true;
        l->below_ms = 0;
        return TG_LIMIT_EV_WARNING;
    }
    if (l->warned && current < l->rearm_at && l->below_ms == 0)
        l->below_ms = now_ms + 1;
    else if (l->warned && current >= l->rearm_at)
        l->below_ms = 0; /* busy again: the same episode */
    return TG_LIMIT_EV_NONE;
}

void tg_registry_tick(tg_registry_t *r, uint64_t now_ms)
{
    r->now_ms = now_ms;
    if (r->rearm_quiet_ms == 0)
        return;
    for (size_t i = 0; i < r->n; i++) {
        tg_limit_t *l = &r->v[i];
        if (!l->warned || l->below_ms == 0 || l->current >= l->rearm_at ||
            now_ms + 1 - l->below_ms < r->rearm_quiet_ms)
            continue;
        l->warned = false;
        l->below_ms = 0;
        tg_registry_emit(r, (int)i, TG_LIMIT_EV_RECOVERED);
    }
}

tg_limit_ev_t tg_limit_observe(tg_limit_t *l, uint64_t current)
{
    if (!registry__record(l, current))
        return TG_LIMIT_EV_NONE;
    if (!l->warned && current >= l->warn_at) {
        l->warned = true;
        return TG_LIMIT_EV_WARNING;
    }
    if (l->warned && current < l->rearm_at) {
        l->warned = false;
        return TG_LIMIT_EV_RECOVERED;
    }
    return TG_LIMIT_EV_NONE;
}

const char *tg_limit_cat_name(tg_limit_cat_t c)
{
    switch (c) {
    case TG_LIMIT_FRAME:
        return "frame";
    case TG_LIMIT_RATE:
        return "rate";
    case TG_LIMIT_CONCURRENCY:
        return "concurrency";
    case TG_LIMIT_QUEUE:
        return "queue";
    case TG_LIMIT_WRITE_QUEUE:
        return "write_queue";
    case TG_LIMIT_AUDIT_QUEUE:
        return "audit_queue";
    case TG_LIMIT_STDERR:
        return "stderr";
    case TG_LIMIT_RESOURCE:
        return "resource";
    }
    return "unknown";
}
