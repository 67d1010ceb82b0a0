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
 * Shared slots (store.h) are counted per key in process: the local store
 * is what the slot interface falls back to without Redis, and what its
 * users are tested against.
 *
 * Ownership: the store owns its buckets (one allocation each, key inline),
 * its table (limits/ktab.h) and its slot table; close frees them all.
 */
#include "limits/store.h"

#include "limits/ktab.h"
#include "limits/store_slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    tg_ktab_node_t node; /* first: a node is its bucket */
    /* The parameters <g> was built from (the limit asked for, and the
     * number of instances it is shared by: <g> enforces the share): a
     * reloaded limit with new values re-initialises T and tau but keeps
     * TAT, as the Redis script (which stores only TAT) does. */
    uint64_t count;
    uint64_t period_ms;
    uint32_t burst;
    uint32_t instances;
    tg_gcra_t g;
    char key[]; /* NUL-terminated */
} bucket_t;

typedef struct local_store {
    tg_store_t base;
    tg_ktab_t tab;
    uint64_t no_sweep_before_ms; /* earliest expiry of a live bucket at the last sweep */
    uint64_t sweep_now_ms;
    tg_store_clock_fn clock;
    void *clock_arg;
    tg_slots_t slots; /* shared slots, held in process: a plain count per key */
} local_store_t;

/* Sweep step: drop a bucket equivalent to an absent one; note the
 * earliest expiry of those that stay. */
static bool local_expired(void *arg, tg_ktab_node_t *n)
{
    local_store_t *ls = arg;
    bucket_t *b = (bucket_t *)n;
    if (tg_gcra_used(&b->g, ls->sweep_now_ms) == 0) {
        free(b);
        return true;
    }
    /* Live: TAT > now >= 0, so tat_us is positive here. */
    uint64_t exp_ms = ((uint64_t)b->g.tat_us + 999) / 1000;
    if (exp_ms < ls->no_sweep_before_ms)
        ls->no_sweep_before_ms = exp_ms;
    return false;
}

static void local_sweep(local_store_t *ls, uint64_t now_ms)
{
    ls->sweep_now_ms = now_ms;
    ls->no_sweep_before_ms = UINT64_MAX;
    tg_ktab_sweep(&ls->tab, local_expired, ls);
}

/* Up to <n> takes in a row at <now>: the first refusal leaves the bucket
 * as it is, so every later one would be refused too. Result as the
 * Redis script gives it (store.h). */
static const tg_store_ops_t local_ops;

int tg_store_local_take_share(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                              uint32_t burst, uint32_t instances, uint32_t want,
                              tg_store_result_t *out)
{
    if (s->ops != &local_ops)
        return -EINVAL;
    local_store_t *ls = (local_store_t *)s;
    size_t n = strnlen(key, TG_STORE_KEY_MAX + 1);
    tg_gcra_t fresh;
    if (instances == 0)
        instances = 1;
    if (n == 0 || n > TG_STORE_KEY_MAX || want == 0 || want > TG_GCRA_MAX_BURST ||
        tg_gcra_init(&fresh, count, period_ms, burst) < 0 ||
        tg_gcra_init(&fresh, tg_store_share(count, instances), period_ms,
                     (uint32_t)tg_store_share(burst, instances)) < 0)
        return -EINVAL;
    uint64_t now = ls->clock(ls->clock_arg);
    uint64_t h = tg_ktab_hash(&ls->tab, key, n);
    bucket_t *b = (bucket_t *)tg_ktab_find(&ls->tab, key, h);
    if (b == NULL) {
        if (ls->tab.count >= ls->tab.max_count && now >= ls->no_sweep_before_ms)
            local_sweep(ls, now);
        if (ls->tab.count >= ls->tab.max_count) {
            uint64_t wait = ls->no_sweep_before_ms > now ? ls->no_sweep_before_ms - now : 1;
            *out = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOSPC, fresh.burst, want, wait);
            return 0;
        }
        b = malloc(sizeof *b + n + 1);
        if (b == NULL) {
            *out = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOMEM, fresh.burst, want, 1);
            return 0;
        }
        memcpy(b->key, key, n + 1);
        b->node.key = b->key;
        b->count = count;
        b->period_ms = period_ms;
        b->burst = burst;
        b->instances = instances;
        b->g = fresh;
        tg_ktab_insert(&ls->tab, &b->node, h);
    } else if (b->count != count || b->period_ms != period_ms || b->burst != burst ||
               b->instances != instances) {
        fresh.tat_us = b->g.tat_us;
        b->g = fresh;
        b->count = count;
        b->period_ms = period_ms;
        b->burst = burst;
        b->instances = instances;
    }
    *out = tg_store_gcra_take_n(&b->g, now, want);
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

int tg_store_local_take_sync(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                             uint32_t burst, uint32_t want, tg_store_result_t *out)
{
    return tg_store_local_take_share(s, key, count, period_ms, burst, 1, want, out);
}

typedef struct debt_walk {
    int64_t now_us;
    tg_store_local_debt_fn fn;
    void *arg;
    size_t visited;
} debt_walk_t;

static bool local_debt(void *arg, tg_ktab_node_t *n)
{
    debt_walk_t *w = arg;
    const bucket_t *b = (const bucket_t *)n;
    if (b->g.tat_us > w->now_us) {
        w->visited++;
        w->fn(w->arg, b->key, b->count, b->period_ms, b->burst,
              (uint64_t)(b->g.tat_us - w->now_us));
    }
    return false;
}

size_t tg_store_local_debts(tg_store_t *s, tg_store_local_debt_fn fn, void *arg)
{
    if (s->ops != &local_ops)
        return 0;
    local_store_t *ls = (local_store_t *)s;
    uint64_t now_ms = ls->clock(ls->clock_arg);
    if (now_ms > TG_GCRA_MAX_NOW_US / 1000)
        now_ms = TG_GCRA_MAX_NOW_US / 1000; /* as gcra.c clamps it */
    debt_walk_t w = {.now_us = (int64_t)(now_ms * 1000), .fn = fn, .arg = arg};
    tg_ktab_sweep(&ls->tab, local_debt, &w);
    return w.visited;
}

size_t tg_store_local_size(const tg_store_t *s)
{
    return ((const local_store_t *)s)->tab.count;
}

static int local_take(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                      uint32_t burst, uint32_t n, tg_store_take_cb cb, void *arg)
{
    tg_store_result_t r;
    int rc = tg_store_local_take_sync(s, key, count, period_ms, burst, n, &r);
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

/* Slots in process: nothing to share and nothing to renew, so a slot is
 * granted while fewer than <cap> are held under <key>. */
static int local_slot_acquire(tg_store_t *s, const char *key, uint32_t cap, tg_store_slot_cb cb,
                              void *arg)
{
    local_store_t *ls = (local_store_t *)s;
    size_t n = strnlen(key, TG_STORE_KEY_MAX + 1);
    if (n == 0 || n > TG_STORE_KEY_MAX || cap == 0 || cap > TG_MAX_CONCURRENT_CEIL)
        return -EINVAL;
    tg_store_slot_result_t r = {.cap = cap, .decided_by = TG_STORE_BY_STORE};
    uint32_t held = tg_slots_held(&ls->slots, key);
    r.holders = held;
    if (held < cap) {
        r.slot = tg_slots_add(&ls->slots, key, tg_slots_next_seq(&ls->slots), TG_STORE_BY_STORE);
        if (r.slot != NULL) {
            r.granted = true;
            r.holders = held + 1;
        } else {
            r.decided_by = TG_STORE_BY_CLOSED;
            r.status = -ENOMEM;
        }
    }
    cb(arg, &r);
    return 0;
}

static void local_slot_release(tg_store_t *s, tg_store_slot_t *slot)
{
    tg_slots_remove(&((local_store_t *)s)->slots, slot);
}

static uint64_t local_slots_held(const tg_store_t *s)
{
    return ((const local_store_t *)s)->slots.held;
}

static bool local_free_bucket(void *arg, tg_ktab_node_t *n)
{
    (void)arg;
    free(n);
    return true;
}

static void local_close(tg_store_t *s, tg_store_close_cb cb, void *arg)
{
    local_store_t *ls = (local_store_t *)s;
    tg_ktab_sweep(&ls->tab, local_free_bucket, NULL);
    tg_ktab_free(&ls->tab);
    tg_slots_free(&ls->slots);
    free(ls);
    if (cb != NULL)
        cb(arg);
}

static const tg_store_ops_t local_ops = {
    .kind = "local",
    .take = local_take,
    .ping = local_ping,
    .close = local_close,
    .slot_acquire = local_slot_acquire,
    .slot_release = local_slot_release,
    .slots_held = local_slots_held,
};

int tg_store_local_open(const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err)
{
    const char *prefix = o->prefix != NULL ? o->prefix : TG_STORE_DEF_PREFIX;
    if (strlen(prefix) >= sizeof((tg_store_t *)0)->prefix || strpbrk(prefix, "{}") != NULL) {
        return tg_err_set(err, -1,
                          "store: prefix: expected at most %zu bytes and no braces (they would "
                          "become the Redis Cluster hash tag)",
                          sizeof((tg_store_t *)0)->prefix - 1);
    }
    size_t max_keys = o->local_max_keys != 0 ? o->local_max_keys : TG_STORE_DEF_LOCAL_MAX_KEYS;
    local_store_t *ls = calloc(1, sizeof *ls);
    if (ls == NULL || tg_ktab_init(&ls->tab, max_keys) < 0) {
        free(ls);
        return tg_err_set(err, -1, "store: out of memory");
    }
    if (tg_slots_init(&ls->slots, o->instance, max_keys) < 0) {
        tg_ktab_free(&ls->tab);
        free(ls);
        return tg_err_set(err, -1, "store: out of memory");
    }
    ls->base.ops = &local_ops;
    memcpy(ls->base.prefix, prefix, strlen(prefix) + 1);
    snprintf(ls->base.name, sizeof ls->base.name, "local");
    ls->clock = o->clock_ms != NULL ? o->clock_ms : tg_store_mono_ms;
    ls->clock_arg = o->clock_ms != NULL ? o->clock_arg : NULL;
    *out = &ls->base;
    return 0;
}
