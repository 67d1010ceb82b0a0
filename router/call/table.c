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
    if (n <= t->n)
        return 0;
    if (n > (UINT64_C(1) << t->bits))
        return -ENOMEM;
    uint32_t need = (n + TG_CALL_CHUNK - 1) / TG_CALL_CHUNK;
    if (need > t->nchunks) {
        char **c = realloc(t->chunks, need * sizeof(*c));
        if (c == NULL)
            return -ENOMEM;
        t->chunks = c;
        while (t->nchunks < need) {
            if ((c[t->nchunks] = calloc(TG_CALL_CHUNK, t->esize)) == NULL)
                return -ENOMEM;
            t->nchunks++;
        }
    }
    uint32_t *f = realloc(t->free_idx, n * sizeof(*f));
    if (f == NULL)
        return -ENOMEM;
    t->free_idx = f;
    /* Lowest index on top of the free list. */
    for (uint32_t i = n; i > t->n; i--)
        f[t->nfree++] = i - 1;
    t->n = n;
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
    if (t->nfree == 0)
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


int tg_call_id_parse(const char *s, size_t n, uint64_t *id)
{
    if (n < 4 || n > 3 + 16 || memcmp(s, "tg-", 3) != 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 3; i < n; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *id = v;
    return 0;
}
