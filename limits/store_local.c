/* The local store: GCRA buckets in a bounded hash table, in process.
 *
 * Decides synchronously: tg_store_take() runs its callback before it
 * returns, every time. The redis store keeps one of these as its
 * on_store_error=local fallback and calls tg_store_local_take_sync().
 *
 * Bounds: at most <local_max_keys> buckets. A bucket whose TAT has passed
 * is, by the algorithm, the same as an absent one, so when the table is
 * full a sweep drops all such buckets without changing any decision. If
 * none can go, the new key is refused (-ENOSPC, decided closed): failing
 * open would let a flood of new keys switch rate limiting off. The sweep
 * remembers when the earliest live bucket expires and does not run again
 * before then, so a table full of live buckets costs O(1) per refusal.
 *
 * The hash is FNV-1a with a per-table seed. Keys come from configuration
 * (agent, tool and caller names), not from peers, so a keyed hash would
 * buy nothing; the seed only keeps layouts from repeating across runs.
 *
 * Ownership: the table owns its buckets (one allocation each, key inline)
 * and its chain heads; close frees them all.
 */
#include "limits/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bucket {
    struct bucket *next;
    uint64_t hash;
    /* The parameters <g> was built from: a reloaded limit with new values
     * re-initialises T and tau but keeps TAT, as the Redis script (which
     * stores only TAT) does. */
    uint64_t count;
    uint64_t period_ms;
    uint32_t burst;
    tg_gcra_t g;
    char key[]; /* NUL-terminated */
} bucket_t;

typedef struct local_store {
    tg_store_t base;
    bucket_t **heads;
    size_t nheads; /* power of two */
    size_t count;
    size_t max_keys;
    uint64_t no_sweep_before_ms; /* earliest expiry of a live bucket at the last sweep */
    uint64_t seed;
    tg_store_clock_fn clock;
    void *clock_arg;
} local_store_t;

#define LOCAL_HEADS_MIN 16

static uint64_t local_mono_ms(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t local_hash(const local_store_t *ls, const char *key, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037) ^ ls->seed;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)key[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

/* Double the chain heads while the load exceeds one bucket per head, up
 * to the power of two covering max_keys. Failure to grow only lengthens
 * chains, so it is not an error. */
static void local_grow(local_store_t *ls)
{
    if (ls->count <= ls->nheads || ls->nheads >= ls->max_keys)
        return;
    size_t n = ls->nheads * 2;
    bucket_t **h = calloc(n, sizeof *h);
    if (h == NULL)
        return;
    for (size_t i = 0; i < ls->nheads; i++) {
        bucket_t *b = ls->heads[i];
        while (b != NULL) {
            bucket_t *next = b->next;
            size_t j = (size_t)(b->hash & (n - 1));
            b->next = h[j];
            h[j] = b;
            b = next;
        }
    }
    free(ls->heads);
    ls->heads = h;
    ls->nheads = n;
}

/* Drop every bucket that is equivalent to an absent one at <now_ms>. */
static void local_sweep(local_store_t *ls, uint64_t now_ms)
{
    uint64_t earliest = UINT64_MAX;
    for (size_t i = 0; i < ls->nheads; i++) {
        bucket_t **pp = &ls->heads[i];
        while (*pp != NULL) {
            bucket_t *b = *pp;
            if (tg_gcra_used(&b->g, now_ms) == 0) {
                *pp = b->next;
                free(b);
                ls->count--;
                continue;
            }
            /* Live: TAT > now >= 0, so tat_us is positive here. */
            uint64_t exp_ms = ((uint64_t)b->g.tat_us + 999) / 1000;
            if (exp_ms < earliest)
                earliest = exp_ms;
            pp = &b->next;
        }
    }
    ls->no_sweep_before_ms = earliest;
}

int tg_store_local_take_sync(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                             uint32_t burst, tg_store_result_t *out)
{
    local_store_t *ls = (local_store_t *)s;
    size_t n = strnlen(key, TG_STORE_KEY_MAX + 1);
    tg_gcra_t fresh;
    if (n == 0 || n > TG_STORE_KEY_MAX || tg_gcra_init(&fresh, count, period_ms, burst) < 0)
        return -EINVAL;
    uint64_t now = ls->clock(ls->clock_arg);
    uint64_t h = local_hash(ls, key, n);
    bucket_t *b = ls->heads[h & (ls->nheads - 1)];
    while (b != NULL && (b->hash != h || strcmp(b->key, key) != 0))
        b = b->next;
    if (b == NULL) {
        if (ls->count >= ls->max_keys && now >= ls->no_sweep_before_ms)
            local_sweep(ls, now);
        if (ls->count >= ls->max_keys) {
            uint64_t wait = ls->no_sweep_before_ms > now ? ls->no_sweep_before_ms - now : 1;
            *out = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOSPC, fresh.burst, wait);
            return 0;
        }
        b = malloc(sizeof *b + n + 1);
        if (b == NULL) {
            *out = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOMEM, fresh.burst, 1);
            return 0;
        }
        memcpy(b->key, key, n + 1);
        b->hash = h;
        b->count = count;
        b->period_ms = period_ms;
        b->burst = burst;
        b->g = fresh;
        size_t i = (size_t)(h & (ls->nheads - 1));
        b->next = ls->heads[i];
        ls->heads[i] = b;
        ls->count++;
        local_grow(ls);
    } else if (b->count != count || b->period_ms != period_ms || b->burst != burst) {
        fresh.tat_us = b->g.tat_us;
        b->g = fresh;
        b->count = count;
        b->period_ms = period_ms;
        b->burst = burst;
    }
    *out = (tg_store_result_t){.gcra = tg_gcra_take(&b->g, now), .decided_by = TG_STORE_BY_STORE};
    /* Keep no_sweep_before_ms a lower bound of every live bucket's expiry:
     * a take only moves an existing TAT later, so only a new bucket can
     * lower it. */
    if (b->g.tat_us > 0) {
        uint64_t exp_ms = ((uint64_t)b->g.tat_us + 999) / 1000;
        if (exp_ms < ls->no_sweep_before_ms)
            ls->no_sweep_before_ms = exp_ms;
    }
    return 0;
}

size_t tg_store_local_size(const tg_store_t *s) { return ((const local_store_t *)s)->count; }

static int local_take(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                      uint32_t burst, tg_store_take_cb cb, void *arg)
{
    tg_store_result_t r;
    int rc = tg_store_local_take_sync(s, key, count, period_ms, burst, &r);
    if (rc < 0)
        return rc;
    cb(arg, &r);
    return 0;
}

static int local_ping(tg_store_t *s, tg_store_ping_cb cb, void *arg)
{
    (void)s;
    cb(arg, 0);
    return 0;
}

static void local_close(tg_store_t *s, tg_store_close_cb cb, void *arg)
{
    local_store_t *ls = (local_store_t *)s;
    for (size_t i = 0; i < ls->nheads; i++) {
        bucket_t *b = ls->heads[i];
        while (b != NULL) {
            bucket_t *next = b->next;
            free(b);
            b = next;
        }
    }
    free(ls->heads);
    free(ls);
    if (cb != NULL)
        cb(arg);
}

static const tg_store_ops_t local_ops = {
    .kind = "local",
    .take = local_take,
    .ping = local_ping,
    .close = local_close,
};

int tg_store_local_open(const tg_store_opts_t *o, tg_store_t **out, tg_cfg_err_t *err)
{
    const char *prefix = o->prefix != NULL ? o->prefix : TG_STORE_DEF_PREFIX;
    if (strlen(prefix) >= sizeof ((tg_store_t *)0)->prefix || strpbrk(prefix, "{}") != NULL) {
        snprintf(err->msg, sizeof err->msg,
                 "store: prefix: expected at most %zu bytes and no braces (they would "
                 "become the Redis Cluster hash tag)",
                 sizeof ((tg_store_t *)0)->prefix - 1);
        return -1;
    }
    local_store_t *ls = calloc(1, sizeof *ls);
    if (ls != NULL)
        ls->heads = calloc(LOCAL_HEADS_MIN, sizeof *ls->heads);
    if (ls == NULL || ls->heads == NULL) {
        free(ls);
        snprintf(err->msg, sizeof err->msg, "store: out of memory");
        return -1;
    }
    ls->base.ops = &local_ops;
    memcpy(ls->base.prefix, prefix, strlen(prefix) + 1);
    snprintf(ls->base.name, sizeof ls->base.name, "local");
    ls->nheads = LOCAL_HEADS_MIN;
    ls->max_keys = o->local_max_keys != 0 ? o->local_max_keys : TG_STORE_DEF_LOCAL_MAX_KEYS;
    ls->clock = o->clock_ms != NULL ? o->clock_ms : local_mono_ms;
    ls->clock_arg = o->clock_ms != NULL ? o->clock_arg : NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ls->seed = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)ls;
    *out = &ls->base;
    return 0;
}
