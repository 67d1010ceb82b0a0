/* idem: the idempotency cache of the OpenSentience dialect (v1
 * idempotency_key): completed results kept for a window, so a repeated
 * call is answered from the cache instead of running the tool again.
 *
 * Pure (no libuv, no I/O): the caller passes its clock as <now_ms> and
 * builds the key (toolgate's is caller, tool and idempotency_key: see
 * router/dialect/opensentience/os_gw.c), and writes a replay itself. The cache keeps copies.
 *
 * Entries sit in hash buckets (chained) and in one list in insertion
 * order. All entries of one window expire in that order, so expiry and
 * eviction both take the oldest. A window shortened by tg_idem_limits
 * breaks the order for entries already kept; tg_idem_find then drops an
 * entry past its own expiry when it meets it.
 *
 * Budget: each entry costs frame length + key length +
 * sizeof(tg_idem_entry_t) bytes; the sum stays <= max_bytes (the oldest
 * entries make room), and an entry costing more than max_bytes is not
 * kept at all.
 */
#ifndef TG_ROUTER_IDEM_H
#define TG_ROUTER_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_IDEM_BUCKETS 1024 /* fixed internal bound: hash buckets of one cache */

/* One kept result. Owned by its cache: a pointer returned by tg_idem_find
 * is valid until the next call that takes the cache non-const. */
typedef struct tg_idem_entry {
    struct tg_idem_entry *older, *newer; /* insertion order = expiry order */
    struct tg_idem_entry *chain;         /* hash bucket */
    uint32_t hash;
    uint64_t expires; /* ms, on the caller's clock */
    bool ok;          /* the result said succeeded */
    size_t cost;      /* bytes counted against max_bytes */
    char *key;        /* key_len bytes, not NUL-terminated */
    size_t key_len;
    char *frame; /* the result as stored (for toolgate: the payload, header excluded) */
    size_t frame_len, cid_off, cid_len; /* the call_id span in <frame>, for splicing */
} tg_idem_entry_t;

/* A cache. Zeroed or after tg_idem_free it holds nothing and finds
 * nothing; tg_idem_init makes it usable. The owner frees it with
 * tg_idem_free. */
typedef struct tg_idem {
    tg_idem_entry_t *oldest, *newest;
    tg_idem_entry_t **tab; /* TG_IDEM_BUCKETS chains; NULL before init */
    uint64_t bytes;        /* sum of the entries' cost */
    uint64_t max_bytes;    /* idempotency_max_bytes */
    uint64_t window_ms;    /* idempotency_window: how long an entry lives */
} tg_idem_t;

/* Set up <c> empty with budget <max_bytes> and entry lifetime <window_ms>.
 * 0, or -ENOMEM (then <c> holds nothing, and tg_idem_free is harmless). */
int tg_idem_init(tg_idem_t *c, uint64_t max_bytes, uint64_t window_ms);

/* Drop every entry and the buckets. <c> may be zeroed, or freed already. */
void tg_idem_free(tg_idem_t *c);

/* Drop every entry; the cache stays usable. */
void tg_idem_clear(tg_idem_t *c);

/* New limits (a reload): the oldest entries go until the rest fit
 * <max_bytes>; <window_ms> applies to entries stored from now on (those
 * kept keep their expiry, so a longer window does not revive them and a
 * shorter one is checked entry by entry by tg_idem_find). */
void tg_idem_limits(tg_idem_t *c, uint64_t max_bytes, uint64_t window_ms);

/* Expire entries whose time has come at <now_ms>, then look <key> (<len>
 * bytes) up. The live entry, or NULL (none, expired, or <c> not set up). */
const tg_idem_entry_t *tg_idem_find(tg_idem_t *c, const char *key, size_t len, uint64_t now_ms);

/* Keep <frame> (<len> bytes, copied; its call_id at [cid_off, cid_off +
 * cid_len)) under <key> (<klen> bytes) until <now_ms> + window_ms, with
 * the result flag <ok>. Expires as tg_idem_find does; an entry under the
 * same key is replaced; then the oldest entries are evicted until the new
 * one fits max_bytes. Returns 0 when kept; -EMSGSIZE when it costs more
 * than the whole budget (nothing changed: not even expiry); -EINVAL when
 * <c> is not set up; -ENOMEM (expiry, replacement and eviction done, the
 * new entry not kept). */
int tg_idem_store(tg_idem_t *c, const char *key, size_t klen, const char *frame, size_t len,
                  size_t cid_off, size_t cid_len, bool ok, uint64_t now_ms);

/* Bytes held (the sum of the entries' cost): the caller's registry row. */
static inline uint64_t tg_idem_bytes(const tg_idem_t *c)
{
    return c->bytes;
}

/* The hash of <key> (FNV-1a, 32 bits): its entry's chain is
 * hash % TG_IDEM_BUCKETS. Exposed so tests can build colliding keys. */
uint32_t tg_idem_hash(const char *key, size_t len);

#endif
