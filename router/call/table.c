/* The call table (see table.h). */
#include "router/call/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg_ctab_init(tg_ctab_t *t, size_t esize)
{
    memset(t, 0, sizeof(*t));
    t->esize = esize;
    t->bits = TG_CALL_IDX_BITS;
}

void tg_ctab_seed(tg_ctab_t *t, uint64_t seed)
{
    /* The mask applies at each take, so a later tg_ctab_fit is fine. */
    t->seq = seed & ((UINT64_C(1) << (TG_CALL_ID_BITS - 1)) - 1);
}

void tg_ctab_fit(tg_ctab_t *t, uint32_t n)
{
    unsigned b = 1;
    while (b < TG_CALL_IDX_BITS && (UINT64_C(1) << b) < n)
        b++;
    t->bits = b;
}

int tg_ctab_grow(tg_ctab_t *t, uint32_t n)
{
    if (n <= t->cap)
        return 0;
    if (n > (UINT64_C(1) << t->bits))
        return -ENOMEM;
    /* Only the bookkeeping is sized for <n> now (pointers and indices,
     * untouched until used); entries come a chunk at a time (add_chunk). */
    uint32_t need = (n + TG_CALL_CHUNK - 1) / TG_CALL_CHUNK;
    char **c = realloc(t->chunks, need * sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    t->chunks = c;
    uint32_t *f = realloc(t->free_idx, n * sizeof(*f));
    if (f == NULL)
        return -ENOMEM;
    t->free_idx = f;
    t->cap = n;
    return 0;
}

/* No entry free: add the next chunk's entries (zeroed), up to <cap>, lowest
 * index on top of the free list; the last chunk, cut short by <cap>, is
 * filled up first when a grow raised it. 0, or -ENOMEM (full, or no
 * memory). Issue 12 item 2: a table sized for the limits' ceilings (65 536
 * calls at once and as many queued) held 108 MiB while idle when every
 * chunk was allocated up front. */
static int add_chunk(tg_ctab_t *t)
{
    if (t->n >= t->cap)
        return -ENOMEM;
    uint32_t k = t->n / TG_CALL_CHUNK;
    if (k == t->nchunks) {
        if ((t->chunks[k] = calloc(TG_CALL_CHUNK, t->esize)) == NULL)
            return -ENOMEM;
        t->nchunks++;
    }
    uint32_t end = (k + 1) * TG_CALL_CHUNK;
    if (end > t->cap)
        end = t->cap;
    for (uint32_t i = end; i > t->n; i--)
        t->free_idx[t->nfree++] = i - 1;
    t->n = end;
    return 0;
}

void tg_ctab_fini(tg_ctab_t *t)
{
    for (uint32_t i = 0; i < t->nchunks; i++)
        free(t->chunks[i]);
    free(t->chunks);
    free(t->free_idx);
    tg_ctab_init(t, t->esize);
}

void *tg_ctab_take(tg_ctab_t *t, uint32_t *idx, uint64_t *id)
{
    if (t->nfree == 0 && add_chunk(t) < 0)
        return NULL;
    uint32_t i = t->free_idx[--t->nfree];
    t->seq = (t->seq + 1) & ((UINT64_C(1) << (TG_CALL_ID_BITS - t->bits)) - 1);
    if (t->seq == 0)
        t->seq = 1; /* id 0 never names a call */
    *idx = i;
    *id = t->last_id = t->seq << t->bits | i;
    return tg_ctab_at(t, i);
}

void tg_ctab_put(tg_ctab_t *t, uint32_t idx)
{
    t->free_idx[t->nfree++] = idx;
}

/* One plus the value of a lower-case hex digit, 0 for any other byte:
 * one load per digit (every answer's id is parsed here). */
static const unsigned char hex_lower[256] = {
    ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

int tg_call_id_parse(const char *s, size_t n, uint64_t *id)
{
    if (n < 4 || n > 3 + 16 || memcmp(s, "tg-", 3) != 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 3; i < n; i++) {
        unsigned d = hex_lower[(unsigned char)s[i]];
        if (d == 0)
            return -1;
        v = v << 4 | (d - 1);
    }
    *id = v;
    return 0;
}
