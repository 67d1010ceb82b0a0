/* Lease mode: spend shared tokens locally, taken from the shared bucket in
 * small batches.
 *
 * A lease store is a view over a backing store (the redis store). For each
 * key it holds a lease: tokens granted by the backing store with
 * tg_store_take_n that this instance may spend, one per call, until the
 * lease expires (lease_ms after the grant; default 1 s, never longer than
 * the limit's period). A call that finds a token is decided at once,
 * without a round trip. A call that finds none waits for the next batch;
 * calls arriving meanwhile for the same key join it, so one round trip
 * serves them all.
 *
 * Batch size (tg_store_lease_batch): every waiting call, plus what this
 * instance is expected to spend during one lease at its observed rate,
 * the latter at most max(1, cap / (2 * instances)) tokens. A first batch
 * for a key, with no rate known yet, is only for the waiting calls.
 *
 * Never over the global limit: the shared bucket counts a token as used
 * when it grants it, and every admitted call spends one granted token at
 * most once. So from the first grant on, the fleet admits no more than
 * exact mode would have over the same span. Because a token may be spent
 * up to lease_ms after its grant, a sliding window of length W holds at
 * most what exact mode allows in W + lease_ms (at most cap + (W +
 * lease_ms) / T calls, T = period / count).
 *
 * Bound on under-admission: tokens sitting unspent in a lease are unusable
 * by other instances, and are lost if their lease expires. Per key an
 * instance holds at most max(1, cap / (2 * instances)) predicted tokens
 * (tokens for calls already waiting are spent at once). So across the
 * fleet at most instances * max(1, cap / (2 * instances)) tokens — about
 * half the burst, or one per instance when the burst is smaller than
 * 2 * instances — are held unspent at any moment, and at most that many
 * are lost per lease_ms. A call can therefore be refused while that many
 * tokens sit at other instances; exact mode would have admitted it.
 *
 * Failure: when the backing store cannot decide, its policy grants the
 * batch (local fallback share, open, or closed); the tokens carry that
 * decision (decided_by, status) and expire like any lease. Degraded and
 * recovered are the backing store's events.
 *
 * Bounds: at most local_max_keys leases (idle ones are dropped when the
 * table is full) and max_pending waiting calls; a call over either bound
 * goes to the backing store on its own (exact mode), so nothing is refused
 * for lack of room here.
 *
 * Callback timing: a call spending a leased token, or decided at once by
 * the backing store, is answered before tg_store_take returns.
 *
 * Ownership: the lease store does not own its backing store, which must
 * outlive it. It owns its leases and waiters; close waits for batches in
 * flight (bounded by the backing store's timeout), then frees everything
 * and runs its callback.
 */
#include "limits/store.h"

#include "limits/ktab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct waiter {
    struct waiter *next;
    tg_store_take_cb cb;
    void *arg;
} waiter_t;

struct lease_store;

typedef struct lease {
    tg_ktab_node_t node; /* first: a node is its lease */
    struct lease_store *ls;
    uint64_t count;
    uint64_t period_ms;
    uint32_t burst;
    uint32_t cap;
    uint32_t tokens;       /* granted, unspent */
    uint32_t reserved;     /* of those, promised to callers being answered */
    uint64_t expires_ms;   /* tokens are void from this time on */
    tg_store_decider_t by; /* who granted them */
    int status;            /* and the backing store's status then */
    uint64_t observed;     /* shared bucket count as of the last token spent */
    uint64_t rem_shared;   /* tokens the shared bucket had left after the grant */
    double rate;           /* this instance's calls per ms for the key; < 0: unknown */
    uint64_t rate_calls;   /* calls since rate_since_ms */
    uint64_t rate_since_ms;
    waiter_t *head, *tail;
    uint32_t nwait;
    uint32_t want; /* tokens the batch in flight asked for */
    bool in_flight;
    char key[];
} lease_t;

typedef struct lease_store {
    tg_store_t base;
    tg_store_t *backing;
    tg_ktab_t tab;
    waiter_t *free_waiters;
    uint32_t nwaiters; /* allocated */
    uint32_t max_waiters;
    uint64_t lease_ms;
    uint32_t instances;
    tg_store_clock_fn clock;
    void *clock_arg;
    uint64_t sweep_now_ms;
    unsigned batches_in_flight;
    int depth; /* nesting of our own frames that may call out */
    bool closing;
    tg_store_close_cb close_cb;
    void *close_arg;
    tg_store_lease_stats_t stats;
} lease_store_t;

uint32_t tg_store_lease_batch(uint32_t cap, uint32_t instances, double rate_per_ms,
                              uint64_t lease_ms, uint32_t waiting)
{
    uint32_t inst = instances > 0 ? instances : 1;
    uint64_t bmax = cap / (2 * (uint64_t)inst);
    if (bmax < 1)
        bmax = 1;
    uint64_t predicted = 0;
    if (rate_per_ms > 0) {
        double p = rate_per_ms * (double)lease_ms;
        if (p >= (double)bmax) {
            predicted = bmax;
        } else {
            predicted = (uint64_t)p;
            predicted += (double)predicted < p; /* round up */
        }
    }
    uint64_t want = waiting < cap ? waiting : cap;
    if (predicted > want)
        want = predicted;
    return want > 0 ? (uint32_t)want : 1;
}

static bool lease_free_node(void *arg, tg_ktab_node_t *n)
{
    (void)arg;
    free(n);
    return true;
}

static void lease_free_all(lease_store_t *ls)
{
    tg_ktab_sweep(&ls->tab, lease_free_node, NULL);
    tg_ktab_free(&ls->tab);
    while (ls->free_waiters != NULL) {
        waiter_t *w = ls->free_waiters;
        ls->free_waiters = w->next;
        free(w);
    }
    tg_store_close_cb cb = ls->close_cb;
    void *arg = ls->close_arg;
    free(ls);
    if (cb != NULL)
        cb(arg);
}

/* Leave one of our frames: the last one out of a closing store frees it. */
static void lease_leave(lease_store_t *ls)
{
    if (--ls->depth == 0 && ls->closing && ls->batches_in_flight == 0)
        lease_free_all(ls);
}

/* A lease the table may drop: nothing waits, nothing in flight, no token
 * left that can still be spent. */
static bool lease_idle(void *arg, tg_ktab_node_t *n)
{
    lease_store_t *ls = arg;
    lease_t *e = (lease_t *)n;
    if (e->in_flight || e->nwait > 0 || e->reserved > 0 ||
        (e->tokens > 0 && ls->sweep_now_ms < e->expires_ms))
        return false;
    ls->stats.expired += e->tokens;
    free(e);
    return true;
}

static lease_t *lease_get(lease_store_t *ls, const char *key, size_t n, uint64_t now)
{
    uint64_t h = tg_ktab_hash(&ls->tab, key, n);
    lease_t *e = (lease_t *)tg_ktab_find(&ls->tab, key, h);
    if (e != NULL)
        return e;
    if (ls->tab.count >= ls->tab.max_count) {
        ls->sweep_now_ms = now;
        tg_ktab_sweep(&ls->tab, lease_idle, ls);
        if (ls->tab.count >= ls->tab.max_count)
            return NULL;
    }
    e = calloc(1, sizeof *e + n + 1);
    if (e == NULL)
        return NULL;
    memcpy(e->key, key, n + 1);
    e->node.key = e->key;
    e->ls = ls;
    e->rate = -1;
    e->rate_since_ms = now;
    tg_ktab_insert(&ls->tab, &e->node, h);
    return e;
}

/* Spend one leased token for a caller. observed counts on from the grant;
 * remaining is what the shared bucket had left after the grant plus the
 * tokens still in this lease: the calls that could still pass now, as far
 * as this instance can know without asking. */
static tg_store_result_t lease_spend(lease_t *e)
{
    e->tokens--;
    bool shared = e->by == TG_STORE_BY_STORE;
    if (shared && e->observed < e->cap)
        e->observed++;
    tg_store_result_t r = {.decided_by = e->by, .status = e->status, .granted = 1};
    r.gcra.allowed = true;
    r.gcra.cap = e->cap;
    r.gcra.observed = shared ? e->observed : 0;
    r.gcra.remaining = (shared ? e->rem_shared : 0) + e->tokens;
    return r;
}

static void lease_drop_tokens(lease_t *e)
{
    e->ls->stats.expired += e->tokens;
    e->tokens = 0;
}

/* Lease lifetime: lease_ms, never longer than the limit's period. */
static uint64_t lease_life(const lease_store_t *ls, const lease_t *e)
{
    return ls->lease_ms < e->period_ms ? ls->lease_ms : e->period_ms;
}

static bool lease_has_token(const lease_t *e, uint64_t now)
{
    return e->tokens > e->reserved && now < e->expires_ms;
}

static void lease_request(lease_t *e, uint64_t now);

/* The backing store answered a batch for lease <arg>. */
static void lease_on_batch(void *arg, const tg_store_result_t *r)
{
    lease_t *e = arg;
    lease_store_t *ls = e->ls;
    ls->depth++;
    ls->batches_in_flight--;
    e->in_flight = false;
    uint64_t now = ls->clock(ls->clock_arg);
    ls->stats.granted += r->granted;

    /* Serve from a detached list, with the tokens they get reserved:
     * callers may take again meanwhile, and then spend only what is left
     * over or start the next batch. Calls that joined after the batch was
     * asked for, beyond what it asked for, are not refused when the bucket
     * gave all that was asked: they stay queued for the next batch. When
     * it gave less, the bucket is empty now and exact mode would refuse
     * them too. */
    waiter_t *w = e->head;
    uint32_t nwait = e->nwait;
    bool bucket_short = r->granted < e->want;
    if (!bucket_short && nwait > r->granted) {
        waiter_t **cut = &e->head;
        for (uint32_t i = 0; i < r->granted; i++)
            cut = &(*cut)->next;
        e->head = *cut; /* the tail stays queued, in order */
        *cut = NULL;
        e->nwait = nwait - r->granted;
        nwait = r->granted;
    } else {
        e->head = e->tail = NULL;
        e->nwait = 0;
    }
    lease_drop_tokens(e);
    e->tokens = r->granted;
    e->reserved = r->granted < nwait ? r->granted : nwait;
    e->expires_ms = now + lease_life(ls, e);
    e->by = r->decided_by;
    e->status = r->status;
    /* r->gcra.observed is the count the last granted token sees; the
     * first one sees granted - 1 less. */
    e->observed = r->gcra.observed >= r->granted ? r->gcra.observed - r->granted : 0;
    e->rem_shared = r->gcra.remaining;

    tg_store_result_t refused = *r;
    refused.granted = 0;
    refused.gcra.allowed = false;
    refused.gcra.remaining = 0;
    if (r->granted > 0) {
        refused.gcra.observed = r->gcra.observed + 1;
        if (refused.gcra.retry_after_ms == 0)
            refused.gcra.retry_after_ms = 1;
    }
    for (uint32_t i = 0; i < nwait; i++) {
        waiter_t *next = w->next;
        tg_store_take_cb cb = w->cb;
        void *cb_arg = w->arg;
        w->next = ls->free_waiters;
        ls->free_waiters = w;
        if (e->reserved > 0) {
            e->reserved--;
            tg_store_result_t ok = lease_spend(e);
            cb(cb_arg, &ok);
        } else {
            cb(cb_arg, &refused);
        }
        w = next;
    }
    /* Calls still queued (joined late, or while the batch was being
     * served) get the next batch; also while closing, so that close
     * answers every call from the store. */
    if (e->nwait > 0 && !e->in_flight)
        lease_request(e, now);
    lease_leave(ls);
}

static void lease_request(lease_t *e, uint64_t now)
{
    lease_store_t *ls = e->ls;
    /* The rate over the time since the last batch, averaged with the one
     * before; the first batch of a key has none. */
    uint64_t elapsed = now > e->rate_since_ms ? now - e->rate_since_ms : 0;
    if (elapsed > 0) {
        double r = (double)e->rate_calls / (double)elapsed;
        e->rate = e->rate < 0 ? r : (e->rate + r) / 2;
    }
    e->rate_calls = 0;
    e->rate_since_ms = now;
    uint32_t want =
        tg_store_lease_batch(e->cap, ls->instances, e->rate, lease_life(ls, e), e->nwait);
    e->want = want;
    e->in_flight = true;
    ls->batches_in_flight++;
    ls->stats.batches++;
    int rc = tg_store_take_n(ls->backing, e->key, e->count, e->period_ms, e->burst, want,
                             lease_on_batch, e);
    if (rc < 0) {
        /* Arguments were checked already; this only follows a backing
         * store that is closing. Answer the waiters as refused. */
        tg_store_result_t r = tg_store_policy_result(TG_STORE_POLICY_CLOSED, rc, e->cap, want, 1);
        lease_on_batch(e, &r);
    }
}

static int lease_take(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                      uint32_t burst, uint32_t n, tg_store_take_cb cb, void *arg)
{
    lease_store_t *ls = (lease_store_t *)s;
    size_t len = strnlen(key, TG_STORE_KEY_MAX + 1);
    tg_gcra_t g;
    if (n != 1 || len == 0 || len > TG_STORE_KEY_MAX ||
        tg_gcra_init(&g, count, period_ms, burst) < 0)
        return -EINVAL;
    if (ls->closing)
        return -ECANCELED;
    uint64_t now = ls->clock(ls->clock_arg);
    lease_t *e = lease_get(ls, key, len, now);
    if (e != NULL) {
        if (e->count != count || e->period_ms != period_ms || e->burst != burst) {
            /* A reloaded limit: tokens granted under the old one do not
             * count against the new one. */
            lease_drop_tokens(e);
            e->count = count;
            e->period_ms = period_ms;
            e->burst = burst;
            e->cap = g.burst;
        }
        if (e->tokens > 0 && now >= e->expires_ms && e->reserved == 0)
            lease_drop_tokens(e);
        e->rate_calls++;
        if (lease_has_token(e, now)) {
            ls->stats.local++;
            tg_store_result_t r = lease_spend(e);
            cb(arg, &r);
            return 0;
        }
    }
    waiter_t *w = NULL;
    if (e != NULL) {
        w = ls->free_waiters;
        if (w != NULL)
            ls->free_waiters = w->next;
        else if (ls->nwaiters < ls->max_waiters && (w = malloc(sizeof *w)) != NULL)
            ls->nwaiters++;
    }
    if (w == NULL) {
        /* No room to lease: this call alone, exact mode. */
        ls->stats.direct++;
        return tg_store_take(ls->backing, key, count, period_ms, burst, cb, arg);
    }
    w->cb = cb;
    w->arg = arg;
    w->next = NULL;
    if (e->tail != NULL)
        e->tail->next = w;
    else
        e->head = w;
    e->tail = w;
    e->nwait++;
    if (!e->in_flight) {
        ls->depth++;
        lease_request(e, now);
        lease_leave(ls);
    }
    return 0;
}

static int lease_ping(tg_store_t *s, tg_store_ping_cb cb, void *arg)
{
    lease_store_t *ls = (lease_store_t *)s;
    return tg_store_ping(ls->backing, cb, arg);
}

static void lease_close(tg_store_t *s, tg_store_close_cb cb, void *arg)
{
    lease_store_t *ls = (lease_store_t *)s;
    if (ls->closing)
        return;
    ls->closing = true;
    ls->close_cb = cb;
    ls->close_arg = arg;
    /* Waiters are answered when their batches return, which the backing
     * store bounds by its timeout; no new call is taken meanwhile. */
    if (ls->depth == 0 && ls->batches_in_flight == 0)
        lease_free_all(ls);
}

static const tg_store_ops_t lease_ops = {
    .kind = "lease",
    .take = lease_take,
    .ping = lease_ping,
    .close = lease_close,
};

int tg_store_lease_open(tg_store_t *backing, const tg_store_opts_t *o, tg_store_t **out,
                        tg_err_t *err)
{
    lease_store_t *ls = calloc(1, sizeof *ls);
    size_t max_keys = o->local_max_keys != 0 ? o->local_max_keys : TG_STORE_DEF_LOCAL_MAX_KEYS;
    if (ls == NULL || tg_ktab_init(&ls->tab, max_keys) < 0) {
        free(ls);
        return tg_err_set(err, -1, "store: out of memory");
    }
    ls->base.ops = &lease_ops;
    memcpy(ls->base.prefix, backing->prefix, sizeof ls->base.prefix);
    memcpy(ls->base.name, backing->name, sizeof ls->base.name);
    ls->backing = backing;
    ls->lease_ms = o->lease_ms != 0 ? o->lease_ms : TG_STORE_DEF_LEASE_MS;
    ls->instances = o->instances != 0 ? o->instances : 1;
    ls->max_waiters = o->max_pending != 0 ? o->max_pending : TG_STORE_DEF_MAX_PENDING;
    ls->clock = o->clock_ms != NULL ? o->clock_ms : tg_store_mono_ms;
    ls->clock_arg = o->clock_ms != NULL ? o->clock_arg : NULL;
    *out = &ls->base;
    return 0;
}

int tg_store_lease_stats(const tg_store_t *s, tg_store_lease_stats_t *out)
{
    if (s->ops != &lease_ops)
        return -EINVAL;
    *out = ((const lease_store_t *)s)->stats;
    return 0;
}
