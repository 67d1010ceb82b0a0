/* The slots one store instance holds: the bookkeeping behind shared
 * concurrency (store.h, "shared concurrency slots"), shared by the local
 * and the redis store. Pure: no I/O, no clock.
 *
 * A slot is one call's hold on a limit key. Each gets a member name that
 * no other toolgate in the fleet uses: "<holder>:<seq in hex>", where the
 * holder is "<instance>:<64 random bits in hex>" fixed at store open, so
 * two instances with one configured name (or a restarted one) still
 * differ. The redis store writes these names into the key's sorted set;
 * the table here is what it renews every lease / 3 and what the
 * on_store_error=local fallback counts against this instance's share.
 *
 * Per key the table keeps the count and a list of the slots held (for the
 * batched renewal). Keys come from configuration (one per agent), and the
 * table holds at most <max_keys> of them; entries of keys with no slot
 * held are dropped when room is needed.
 *
 * Ownership: the table owns its key entries and slot records;
 * tg_slots_remove() frees a slot, tg_slots_free() everything left.
 */
#ifndef TG_LIMITS_STORE_SLOTS_H
#define TG_LIMITS_STORE_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "limits/ktab.h"
#include "limits/store.h"

#define TG_STORE_HOLDER_MAX 176 /* fixed internal bound: "<instance>:<16 hex>", NUL included */
#define TG_STORE_MEMBER_MAX 200 /* fixed internal bound: "<holder>:<seq hex>", NUL included */

struct tg_slot_key;

/* One held slot (opaque to store users: store.h tg_store_slot_t). */
struct tg_store_slot {
    struct tg_store_slot *prev, *next; /* the key's list */
    struct tg_slot_key *k;
    uint64_t seq;          /* the member is "<holder>:<seq hex>" */
    tg_store_decider_t by; /* who granted it */
};

typedef struct tg_slot_key {
    tg_ktab_node_t node; /* first: a node is its entry */
    struct tg_store_slot *head;
    uint32_t held;
    char key[]; /* NUL-terminated */
} tg_slot_key_t;

typedef struct tg_slots {
    tg_ktab_t tab;
    char holder[TG_STORE_HOLDER_MAX];
    size_t holder_len;
    uint64_t seq;  /* last member number handed out */
    uint64_t held; /* slots held over all keys */
} tg_slots_t;

/* Set up an empty table for at most <max_keys> keys, with holder name
 * "<instance>:<random hex>" (<instance> NULL or "": "toolgate"; cut to fit
 * TG_STORE_HOLDER_MAX). 0 or -ENOMEM. */
int tg_slots_init(tg_slots_t *t, const char *instance, size_t max_keys);
/* Free every key entry and slot record. */
void tg_slots_free(tg_slots_t *t);

/* Slots held under <key> (0 when the key is unknown). */
uint32_t tg_slots_held(const tg_slots_t *t, const char *key);

/* A member number no slot of this table has had. */
static inline uint64_t tg_slots_next_seq(tg_slots_t *t)
{
    return ++t->seq;
}

/* Record slot <seq> under <key>, granted by <by>. The slot, or NULL when
 * out of memory or the table is full of keys with slots held. */
struct tg_store_slot *tg_slots_add(tg_slots_t *t, const char *key, uint64_t seq,
                                   tg_store_decider_t by);

/* Forget slot <s> (from this table) and free it. */
void tg_slots_remove(tg_slots_t *t, struct tg_store_slot *s);

/* The member name of slot number <seq> into <buf> (<cap> bytes, at least
 * TG_STORE_MEMBER_MAX). Returns its length. */
size_t tg_slots_member(const tg_slots_t *t, uint64_t seq, char *buf, size_t cap);

/* Call <fn> for each key with at least one slot held. <fn> must not add
 * or remove slots. */
typedef void (*tg_slots_key_fn)(void *arg, const tg_slot_key_t *k);
void tg_slots_each(tg_slots_t *t, tg_slots_key_fn fn, void *arg);

#endif
