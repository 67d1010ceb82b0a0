/* The idempotency cache (router/codec/idem.h): window, replacement,
 * byte budget and its eviction order, refusal of an entry larger than the
 * budget, clear/free (leaks show under the ASan build), hash chains. */
#include "router/codec/idem.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* What an entry of key <k> and frame <f> costs. */
static uint64_t cost(const char *k, const char *f)
{
    return strlen(k) + strlen(f) + sizeof(tg_idem_entry_t);
}

static int put(tg_idem_t *c, const char *k, const char *f, uint64_t now)
{
    return tg_idem_store(c, k, strlen(k), f, strlen(f), 1, 2, true, now);
}

static const tg_idem_entry_t *get(tg_idem_t *c, const char *k, uint64_t now)
{
    return tg_idem_find(c, k, strlen(k), now);
}

/* True when <k> is found at <now> with the frame <f>. */
static bool holds(tg_idem_t *c, const char *k, const char *f, uint64_t now)
{
    const tg_idem_entry_t *e = get(c, k, now);
    return e != NULL && e->frame_len == strlen(f) && memcmp(e->frame, f, e->frame_len) == 0;
}

static size_t count(const tg_idem_t *c)
{
    size_t n = 0;
    for (const tg_idem_entry_t *e = c->oldest; e != NULL; e = e->newer)
        n++;
    return n;
}

Test(idem, hit_within_window)
{
    tg_idem_t c;
    cr_assert_eq(tg_idem_init(&c, 1 << 20, 500), 0);
    const char *f = "{\"call_id\":\"c-1\",\"status\":\"succeeded\"}";
    cr_assert_eq(tg_idem_store(&c, "who\0tool\0key", 12, f, strlen(f), 11, 5, true, 1000), 0);
    cr_assert_eq(tg_idem_bytes(&c), 12 + strlen(f) + sizeof(tg_idem_entry_t),
                 "cost: frame + key + entry");
    const tg_idem_entry_t *e = tg_idem_find(&c, "who\0tool\0key", 12, 1499);
    cr_assert_not_null(e);
    cr_assert_eq(e->frame_len, strlen(f));
    cr_assert_neq(e->frame, f, "a copy of the frame");
    cr_assert_eq(memcmp(e->frame, f, e->frame_len), 0);
    cr_assert_eq(e->cid_off, 11);
    cr_assert_eq(e->cid_len, 5);
    cr_assert(e->ok);
    cr_assert_null(tg_idem_find(&c, "who\0tool\0kex", 12, 1499), "another key");
    cr_assert_null(tg_idem_find(&c, "who\0tool\0ke", 11, 1499), "a prefix of the key");
    tg_idem_free(&c);
}

Test(idem, miss_after_window)
{
    tg_idem_t c;
    cr_assert_eq(tg_idem_init(&c, 1 << 20, 500), 0);
    cr_assert_eq(put(&c, "a", "A", 1000), 0);
    cr_assert_eq(put(&c, "b", "B", 1200), 0);
    cr_assert(holds(&c, "a", "A", 1499));
    /* expiry is at store time + window, exclusive */
    cr_assert_null(get(&c, "a", 1500));
    cr_assert_eq(tg_idem_bytes(&c), cost("b", "B"), "the expired entry's bytes are returned");
    cr_assert_eq(count(&c), 1);
    /* any lookup expires: "b" goes while another key is looked up */
    cr_assert_null(get(&c, "zzz", 1700));
    cr_assert_eq(tg_idem_bytes(&c), 0);
    cr_assert_null(c.oldest);
    cr_assert_null(c.newest);
    tg_idem_free(&c);
}

Test(idem, same_key_replaced)
{
    tg_idem_t c;
    cr_assert_eq(tg_idem_init(&c, 1 << 20, 500), 0);
    cr_assert_eq(put(&c, "k", "first", 1000), 0);
    cr_assert_eq(put(&c, "other", "o", 1100), 0);
    cr_assert_eq(tg_idem_store(&c, "k", 1, "second!", 7, 3, 4, false, 1200), 0);
    cr_assert_eq(count(&c), 2, "one entry per key");
    cr_assert_eq(tg_idem_bytes(&c), cost("other", "o") + cost("k", "second!"));
    const tg_idem_entry_t *e = get(&c, "k", 1200);
    cr_assert_not_null(e);
    cr_assert_eq(e->frame_len, 7);
    cr_assert_eq(memcmp(e->frame, "second!", 7), 0);
    cr_assert_not(e->ok);
    cr_assert_eq(e->cid_off, 3);
    cr_assert_eq(e->cid_len, 4);
    /* the replacement is the newest entry and has a fresh window */
    cr_assert_eq(c.newest, e);
    cr_assert_null(get(&c, "other", 1600));
    cr_assert(holds(&c, "k", "second!", 1699));
    cr_assert_null(get(&c, "k", 1700));
    tg_idem_free(&c);
}

Test(idem, budget_evicts_oldest_first)
{
    tg_idem_t c;
    uint64_t one = cost("k1", "0123456789");
    cr_assert_eq(tg_idem_init(&c, 3 * one, 60000), 0);
    cr_assert_eq(put(&c, "k1", "0123456789", 1), 0);
    cr_assert_eq(put(&c, "k2", "0123456789", 2), 0);
    cr_assert_eq(put(&c, "k3", "0123456789", 3), 0);
    cr_assert_eq(tg_idem_bytes(&c), 3 * one, "exactly full");
    /* a lookup does not refresh: k1 stays the oldest */
    cr_assert(holds(&c, "k1", "0123456789", 4));
    cr_assert_eq(put(&c, "k4", "0123456789", 5), 0);
    cr_assert_null(get(&c, "k1", 6), "the oldest made room");
    cr_assert(holds(&c, "k2", "0123456789", 6));
    cr_assert(holds(&c, "k3", "0123456789", 6));
    cr_assert(holds(&c, "k4", "0123456789", 6));
    cr_assert_eq(tg_idem_bytes(&c), 3 * one);
    /* an entry one byte larger than the others: it needs two of them gone,
     * and the two oldest go, in order */
    cr_assert_eq(put(&c, "k5", "0123456789x", 7), 0);
    cr_assert_null(get(&c, "k2", 8));
    cr_assert_null(get(&c, "k3", 8));
    cr_assert(holds(&c, "k4", "0123456789", 8));
    cr_assert(holds(&c, "k5", "0123456789x", 8));
    cr_assert_eq(tg_idem_bytes(&c), 2 * one + 1);
    cr_assert_eq(count(&c), 2);
    /* a replacement counts its predecessor's bytes as free: nothing else goes */
    cr_assert_eq(put(&c, "k6", "012345678", 9), 0);
    cr_assert_eq(tg_idem_bytes(&c), 3 * one, "full again");
    cr_assert_eq(put(&c, "k4", "0123456789", 10), 0);
    cr_assert_eq(count(&c), 3);
    cr_assert_eq(tg_idem_bytes(&c), 3 * one);
    cr_assert(holds(&c, "k5", "0123456789x", 11));
    tg_idem_free(&c);
}

Test(idem, larger_than_budget_refused)
{
    tg_idem_t c;
    uint64_t max = cost("key", "0123456789");
    cr_assert_eq(tg_idem_init(&c, max, 100), 0);
    /* exactly the budget fits */
    cr_assert_eq(put(&c, "key", "0123456789", 1000), 0);
    cr_assert_eq(tg_idem_bytes(&c), max);
    /* one byte over: refused, the cache untouched (no eviction, and no
     * expiry either, though "key" is past its window by now) */
    cr_assert_eq(put(&c, "big", "0123456789x", 2000), -EMSGSIZE);
    cr_assert_eq(tg_idem_bytes(&c), max);
    cr_assert_eq(count(&c), 1);
    cr_assert_eq(put(&c, "key", "0123456789x", 2000), -EMSGSIZE, "not even as a replacement");
    cr_assert_eq(count(&c), 1);
    cr_assert_null(get(&c, "big", 2000));
    cr_assert_eq(tg_idem_bytes(&c), 0, "the lookup expired the old entry");
    tg_idem_free(&c);
}

Test(idem, clear_frees_all)
{
    tg_idem_t c;
    cr_assert_eq(tg_idem_init(&c, 1 << 20, 1000), 0);
    char k[32], f[64];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof(k), "key-%d", i);
        snprintf(f, sizeof(f), "{\"n\":%d}", i);
        cr_assert_eq(put(&c, k, f, (uint64_t)i), 0);
    }
    cr_assert_eq(count(&c), 500);
    tg_idem_clear(&c);
    cr_assert_eq(tg_idem_bytes(&c), 0);
    cr_assert_null(c.oldest);
    cr_assert_null(c.newest);
    for (size_t b = 0; b < TG_IDEM_BUCKETS; b++)
        cr_assert_null(c.tab[b], "bucket %zu", b);
    cr_assert_null(get(&c, "key-7", 600));
    /* still usable; the entries stored now are freed by tg_idem_free */
    cr_assert_eq(put(&c, "again", "x", 700), 0);
    cr_assert(holds(&c, "again", "x", 701));
    cr_assert_eq(put(&c, "more", "y", 702), 0);
    tg_idem_free(&c);
    cr_assert_null(c.tab);
    cr_assert_null(c.oldest);
    cr_assert_eq(tg_idem_bytes(&c), 0);
    tg_idem_free(&c); /* twice: harmless */
}

Test(idem, not_set_up)
{
    tg_idem_t c;
    memset(&c, 0, sizeof(c));
    cr_assert_null(get(&c, "k", 1));
    cr_assert_eq(put(&c, "k", "v", 1), -EINVAL);
    cr_assert_eq(tg_idem_bytes(&c), 0);
    tg_idem_free(&c);
}

/* Distinct keys with the same 32-bit hash (one pair of equal length, so
 * the bytes decide, one of different lengths) and keys sharing a bucket. */
Test(idem, hash_collisions_chain)
{
    static const char *const same[][2] = {{"k00268088", "k01392106"}, {"k32728", "k261234"}};
    for (size_t i = 0; i < 2; i++)
        cr_assert_eq(tg_idem_hash(same[i][0], strlen(same[i][0])),
                     tg_idem_hash(same[i][1], strlen(same[i][1])), "premise: %s and %s collide",
                     same[i][0], same[i][1]);
    /* four more keys in the bucket of same[0][0] */
    uint32_t b0 = tg_idem_hash(same[0][0], strlen(same[0][0])) % TG_IDEM_BUCKETS;
    char bucket[4][16];
    size_t nb = 0;
    for (unsigned i = 0; nb < 4 && i < 1000000; i++) {
        char k[16];
        snprintf(k, sizeof(k), "b%u", i);
        if (tg_idem_hash(k, strlen(k)) % TG_IDEM_BUCKETS == b0)
            memcpy(bucket[nb++], k, sizeof(k));
    }
    cr_assert_eq(nb, 4);

    tg_idem_t c;
    cr_assert_eq(tg_idem_init(&c, 1 << 20, 1000), 0);
    uint64_t t = 0;
    cr_assert_eq(put(&c, same[0][0], "A0", t++), 0);
    cr_assert_eq(put(&c, bucket[0], "B0", t++), 0);
    cr_assert_eq(put(&c, same[0][1], "A1", t++), 0);
    cr_assert_eq(put(&c, bucket[1], "B1", t++), 0);
    cr_assert_eq(put(&c, same[1][0], "C0", t++), 0);
    cr_assert_eq(put(&c, same[1][1], "C1", t++), 0);
    cr_assert_eq(put(&c, bucket[2], "B2", t++), 0);
    cr_assert_eq(count(&c), 7, "colliding keys are distinct entries");
    size_t chain = 0;
    for (const tg_idem_entry_t *e = c.tab[b0]; e != NULL; e = e->chain)
        chain++;
    cr_assert_eq(chain, 5, "one chain holds the five keys of that bucket");
    cr_assert(holds(&c, same[0][0], "A0", t));
    cr_assert(holds(&c, same[0][1], "A1", t));
    cr_assert(holds(&c, same[1][0], "C0", t));
    cr_assert(holds(&c, same[1][1], "C1", t));
    cr_assert(holds(&c, bucket[0], "B0", t));
    cr_assert(holds(&c, bucket[1], "B1", t));
    cr_assert(holds(&c, bucket[2], "B2", t));
    cr_assert_null(get(&c, bucket[3], t), "same bucket, never stored");

    /* out of the middle of the chain (a replacement), then its tail (the
     * oldest, by expiry): the rest stay reachable */
    cr_assert_eq(put(&c, same[0][1], "A1'", t), 0);
    cr_assert(holds(&c, same[0][1], "A1'", t));
    cr_assert(holds(&c, same[0][0], "A0", t));
    cr_assert_null(get(&c, same[0][0], 1000), "A0 expired");
    cr_assert_null(get(&c, bucket[0], 1001), "B0 expired");
    cr_assert(holds(&c, same[0][1], "A1'", 1001));
    cr_assert(holds(&c, bucket[1], "B1", 1001));
    cr_assert(holds(&c, bucket[2], "B2", 1001));
    cr_assert(holds(&c, same[1][0], "C0", 1001));
    cr_assert(holds(&c, same[1][1], "C1", 1001));
    chain = 0;
    for (const tg_idem_entry_t *e = c.tab[b0]; e != NULL; e = e->chain)
        chain++;
    cr_assert_eq(chain, 3);
    tg_idem_free(&c);
}

/* New limits: a lower budget evicts the oldest at once; a shorter window
 * applies to new entries, which may then expire behind older live ones. */
Test(idem, limits_change)
{
    tg_idem_t c;
    uint64_t one = cost("k1", "v");
    cr_assert_eq(tg_idem_init(&c, 4 * one, 60000), 0);
    cr_assert_eq(put(&c, "k1", "v", 0), 0);
    cr_assert_eq(put(&c, "k2", "v", 1), 0);
    cr_assert_eq(put(&c, "k3", "v", 2), 0);
    tg_idem_limits(&c, 2 * one, 300);
    cr_assert_eq(tg_idem_bytes(&c), 2 * one);
    cr_assert_null(get(&c, "k1", 3), "the oldest went");
    cr_assert(holds(&c, "k2", "v", 3));
    cr_assert_eq(put(&c, "k4", "v", 10), 0); /* evicts k2; expires at 310 */
    cr_assert_null(get(&c, "k2", 11));
    /* k3 (window 60000) is the oldest and live, k4 behind it is past its
     * own expiry: found, it goes */
    cr_assert(holds(&c, "k4", "v", 309));
    cr_assert_null(get(&c, "k4", 310));
    cr_assert_eq(count(&c), 1);
    cr_assert(holds(&c, "k3", "v", 310));
    cr_assert_eq(tg_idem_bytes(&c), one);
    tg_idem_free(&c);
}
