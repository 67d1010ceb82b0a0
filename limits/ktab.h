/* A bounded hash table of string keys with intrusive nodes: the buckets of
 * the local store and the leases of lease mode (pure, no I/O).
 *
 * The owner embeds a tg_ktab_node_t in its entry, keeps the key bytes in
 * the entry too, and frees entries itself; the table only links them.
 * Chains grow by doubling the heads while there is more than one entry
 * per head, up to the power of two covering <max_count>. Counting entries
 * against max_count is the owner's job (tg_ktab_t.count helps).
 *
 * The hash is FNV-1a with a per-table seed. Keys come from configuration
 * (agent, tool and caller names), not from peers, so a keyed hash would
 * buy nothing; the seed only keeps layouts from repeating across runs.
 *
 * Ownership: tg_ktab_free() releases the heads only.
 */
#ifndef TG_LIMITS_KTAB_H
#define TG_LIMITS_KTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_ktab_node {
    struct tg_ktab_node *next;
    uint64_t hash;
    const char *key; /* NUL-terminated, owned by the entry */
} tg_ktab_node_t;

typedef struct tg_ktab {
    tg_ktab_node_t **heads;
    size_t nheads; /* power of two */
    size_t count;
    size_t max_count;
    uint64_t seed;
} tg_ktab_t;

/* 0 or -ENOMEM. */
int tg_ktab_init(tg_ktab_t *t, size_t max_count);
void tg_ktab_free(tg_ktab_t *t);

uint64_t tg_ktab_hash(const tg_ktab_t *t, const char *key, size_t len);

/* The node with <key> (hash <h>), or NULL. */
tg_ktab_node_t *tg_ktab_find(const tg_ktab_t *t, const char *key, uint64_t h);

/* Link <n> (its key set) under hash <h>. A failed growth only lengthens
 * chains, so this cannot fail. */
void tg_ktab_insert(tg_ktab_t *t, tg_ktab_node_t *n, uint64_t h);

/* Visit every node; where <drop> returns true the node is unlinked first
 * and <drop> may free it. */
typedef bool (*tg_ktab_drop_fn)(void *arg, tg_ktab_node_t *n);
void tg_ktab_sweep(tg_ktab_t *t, tg_ktab_drop_fn drop, void *arg);

#endif
