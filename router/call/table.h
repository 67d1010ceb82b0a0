/* The call table: one per agent, the calls of every caller of that agent,
 * whatever the dialect. Pure (no libuv): the engine keeps the calls'
 * contents; the table keeps where they are, which are free, and their ids.
 *
 * Ids. Every call gets an id that names its entry and when it was taken:
 * id = seq << bits | index, seq counting takes per table and <bits> the
 * table's index bits (TG_CALL_IDX_BITS, or fewer for a table whose size
 * is known: shorter ids are cheaper to write, and to scan in every frame
 * the agent answers). A
 * lookup by id finds the entry in O(1); the engine compares the id it
 * stored to tell a live call from a stale answer to a call long gone (a
 * late result). The agent sees the id instead of the caller's (an MCP
 * integer, an OpenSentience "tg-<hex>" string), so it never sees two live
 * calls with one id whatever the callers chose; the same number is the
 * call's request_id ("tg-<hex>") in audit and denials. Ids stay below
 * 2^53, exact in every JSON reader (seq wraps after 2^(53 - bits) takes).
 *
 * Entries live in chunks that never move (the calls' timers and deadline
 * nodes are inside them), so the table can grow under live calls when a
 * reload raises the limits; it never shrinks. A chunk is allocated when a
 * take finds no entry free, not when the table is sized: memory follows
 * the most calls held at once, not the limits that allow them.
 *
 * Ownership: the engine's agent owns the table (tg_ctab_fini frees it).
 */
#ifndef TG_ROUTER_CALL_TABLE_H
#define TG_ROUTER_CALL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 2^TG_CALL_IDX_BITS is more than the largest table the limits' ceilings allow. */
#define TG_CALL_IDX_BITS 20 /* fixed internal bound: index bits of a call id */
#define TG_CALL_ID_BITS  53 /* fixed internal bound: bits of a call id (exact in JSON readers) */
#define TG_CALL_CHUNK    64 /* fixed internal bound: entries per chunk */
#define TG_CALL_MAX      (1u << TG_CALL_IDX_BITS) /* fixed internal bound: entries of one call table */

typedef struct tg_ctab {
    size_t esize;       /* bytes of one entry */
    char **chunks;
    uint32_t nchunks;   /* allocated */
    uint32_t n;         /* entries in them (the ones an engine walks) */
    uint32_t cap;       /* entries it may hold (tg_ctab_grow) */
    uint32_t *free_idx; /* a stack, lowest index on top after a grow */
    uint32_t nfree;
    uint64_t seq;
    uint64_t last_id;   /* the newest id given out */
    unsigned bits;      /* index bits of its ids */
} tg_ctab_t;

/* An empty table of entries of <esize> bytes, ids with TG_CALL_IDX_BITS
 * index bits. */
void tg_ctab_init(tg_ctab_t *t, size_t esize);
/* Before the first take: start the seq of ids at <seed> (any 64 bits; only
 * those the ids have room for count), so that the ids of two runs, or of
 * two toolgates, are unlikely to meet in one audit trail. Without it the
 * first id of every table is the same (1 << bits). */
void tg_ctab_seed(tg_ctab_t *t, uint64_t seed);
/* Before the first take: ids with the fewest index bits that hold <n>
 * entries (the table can then never grow past 2^bits). */
void tg_ctab_fit(tg_ctab_t *t, uint32_t n);
/* Let the table hold at least <n> entries; they are allocated (zeroed,
 * free) a chunk at a time as takes need them. 0, or -ENOMEM (also for
 * n > 2^bits); on failure the table holds as many as before. */
int tg_ctab_grow(tg_ctab_t *t, uint32_t n);
/* Free the table's memory (the entries' own resources are the engine's). */
void tg_ctab_fini(tg_ctab_t *t);

/* Entry <i> (< t->n). */
static inline void *tg_ctab_at(const tg_ctab_t *t, uint32_t i)
{
    return t->chunks[i / TG_CALL_CHUNK] + (size_t)(i % TG_CALL_CHUNK) * t->esize;
}

/* Take a free entry: its index into *<idx>, a fresh id into *<id>. NULL
 * when the table is full (or a new chunk finds no memory). Its bytes are
 * as the engine last left them (zero when new). */
void *tg_ctab_take(tg_ctab_t *t, uint32_t *idx, uint64_t *id);
/* Give entry <idx> back. */
void tg_ctab_put(tg_ctab_t *t, uint32_t idx);
/* Entries taken. */
static inline uint32_t tg_ctab_used(const tg_ctab_t *t)
{
    return t->n - t->nfree;
}

/* The entry id <id> names, or NULL when its index is out of the table:
 * the engine checks that the entry is live and holds <id>. */
static inline void *tg_ctab_lookup(const tg_ctab_t *t, uint64_t id)
{
    uint32_t i = (uint32_t)(id & ((UINT64_C(1) << t->bits) - 1));
    return i < t->n ? tg_ctab_at(t, i) : NULL;
}

/* "tg-<hex>" of <id> into <out> (>= 20 bytes), NUL-terminated; its length.
 * Per call (request ids, OpenSentience call ids), so inline: the digits
 * are written in place from the last, their count known up front. */
static inline size_t tg_call_id_hex(char *out, uint64_t id)
{
    size_t n = (size_t)(64 - __builtin_clzll(id | 1) + 3) / 4;
    memcpy(out, "tg-", 3);
    out[3 + n] = '\0';
    for (char *q = out + 3 + n; q > out + 3; id >>= 4)
        *--q = "0123456789abcdef"[id & 15];
    return 3 + n;
}
/* The id of text "tg-<hex>" [<s>, <s>+<n>); -1 when it is not one. */
int tg_call_id_parse(const char *s, size_t n, uint64_t *id);

#endif
