/* router/call/table: the one call table both dialects use. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "router/call/table.h"

typedef struct {
    uint64_t id;
    bool live;
    char pad[40];
} ent_t;

Test(ctab, take_lookup_put_and_stale_ids)
{
    tg_ctab_t t;
    tg_ctab_init(&t, sizeof(ent_t));
    cr_assert_null(tg_ctab_take(&t, &(uint32_t){0}, &(uint64_t){0}), "an empty table gave an entry");
    cr_assert_eq(tg_ctab_grow(&t, 3), 0);
    cr_assert_eq(t.cap, 3);
    cr_assert_eq(t.n, 0, "entries are allocated by takes, not by a grow");
    uint32_t i0, i1;
    uint64_t id0, id1;
    ent_t *e0 = tg_ctab_take(&t, &i0, &id0);
    ent_t *e1 = tg_ctab_take(&t, &i1, &id1);
    cr_assert(e0 && e1 && e0 != e1);
    cr_assert_eq(i0, 0, "lowest index first");
    cr_assert_eq(i1, 1);
    cr_assert_eq(t.n, 3, "the first take allocated the (short) chunk");
    cr_assert_eq(id0 & (TG_CALL_MAX - 1), i0);
    cr_assert_gt(id1, id0, "ids grow");
    cr_assert_eq(t.last_id, id1);
    cr_assert_eq(tg_ctab_used(&t), 2);
    e0->id = id0;
    e0->live = true;
    cr_assert_eq(tg_ctab_lookup(&t, id0), e0);
    cr_assert_null(tg_ctab_lookup(&t, (UINT64_C(7) << TG_CALL_IDX_BITS) | 5), "index out of the table");
    tg_ctab_put(&t, i0);
    e0->live = false;
    uint32_t i2;
    uint64_t id2;
    ent_t *e2 = tg_ctab_take(&t, &i2, &id2);
    cr_assert_eq(e2, e0, "the freed entry is reused");
    cr_assert_neq(id2, id0, "a reused entry gets a new id");
    /* An answer to the old id finds the entry, which holds another id now. */
    e2->id = id2;
    ent_t *stale = tg_ctab_lookup(&t, id0);
    cr_assert(stale == e2 && stale->id != id0);
    tg_ctab_fini(&t);
    cr_assert_eq(t.n, 0);
}

Test(ctab, grow_keeps_entries_in_place)
{
    tg_ctab_t t;
    tg_ctab_init(&t, sizeof(ent_t));
    cr_assert_eq(tg_ctab_grow(&t, TG_CALL_CHUNK), 0);
    uint32_t i;
    uint64_t id;
    ent_t *e = tg_ctab_take(&t, &i, &id);
    e->id = id;
    cr_assert_eq(tg_ctab_grow(&t, 10 * TG_CALL_CHUNK + 1), 0);
    cr_assert_eq(tg_ctab_at(&t, i), e, "an entry moved when the table grew");
    cr_assert_eq(e->id, id);
    cr_assert_eq(t.nchunks, 1, "a grow allocated chunks no take needed");
    cr_assert_eq(t.nfree, TG_CALL_CHUNK - 1);
    cr_assert_eq(tg_ctab_grow(&t, 5), 0, "a smaller size is a no-op");
    cr_assert_eq(t.cap, 10 * TG_CALL_CHUNK + 1);
    cr_assert_eq(tg_ctab_grow(&t, TG_CALL_MAX + 1), -ENOMEM);
    /* Every entry can be taken, each once. */
    uint32_t taken = 1, j;
    uint64_t jid;
    while (tg_ctab_take(&t, &j, &jid) != NULL)
        taken++;
    cr_assert_eq(taken, t.cap);
    cr_assert_eq(t.n, t.cap);
    cr_assert_eq(t.nchunks, 11);
    cr_assert_eq(tg_ctab_at(&t, i), e, "an entry moved when chunks were added");
    cr_assert_eq(e->id, id);
    tg_ctab_fini(&t);
}

Test(ctab, ids_stay_below_2_53_and_skip_zero)
{
    tg_ctab_t t;
    tg_ctab_init(&t, sizeof(ent_t));
    cr_assert_eq(tg_ctab_grow(&t, 1), 0);
    t.seq = (UINT64_C(1) << (TG_CALL_ID_BITS - TG_CALL_IDX_BITS)) - 2;
    uint32_t i;
    uint64_t id;
    for (int k = 0; k < 4; k++) {
        cr_assert_not_null(tg_ctab_take(&t, &i, &id));
        cr_assert_lt(id, UINT64_C(1) << 53);
        cr_assert_neq(id >> TG_CALL_IDX_BITS, 0, "seq 0 given out");
        tg_ctab_put(&t, i);
    }
    tg_ctab_fini(&t);
}

Test(ctab, fitted_ids_are_short_and_bounded)
{
    tg_ctab_t t;
    tg_ctab_init(&t, sizeof(ent_t));
    tg_ctab_fit(&t, 300);
    cr_assert_eq(t.bits, 9);
    cr_assert_eq(tg_ctab_grow(&t, 300), 0);
    cr_assert_eq(tg_ctab_grow(&t, 512), 0);
    cr_assert_eq(tg_ctab_grow(&t, 513), -ENOMEM, "a fitted table grew past its ids");
    uint32_t i;
    uint64_t id;
    ent_t *e = tg_ctab_take(&t, &i, &id);
    cr_assert_eq(id, (UINT64_C(1) << 9) | i);
    cr_assert_eq(tg_ctab_lookup(&t, id), e);
    t.seq = (UINT64_C(1) << (TG_CALL_ID_BITS - 9)) - 1;
    tg_ctab_put(&t, i);
    cr_assert_not_null(tg_ctab_take(&t, &i, &id));
    cr_assert_lt(id, UINT64_C(1) << 53);
    cr_assert_neq(id >> 9, 0);
    tg_ctab_fini(&t);
}

Test(ctab, id_text_round_trip)
{
    char buf[24];
    uint64_t ids[] = {0, 1, 0x2b0, (UINT64_C(1) << 53) - 1, UINT64_MAX};
    for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
        size_t n = tg_call_id_hex(buf, ids[k]);
        cr_assert_eq(n, strlen(buf));
        cr_assert_eq(strncmp(buf, "tg-", 3), 0);
        uint64_t back = 1;
        cr_assert_eq(tg_call_id_parse(buf, n, &back), 0, "%s", buf);
        cr_assert_eq(back, ids[k]);
    }
    cr_assert_str_eq((tg_call_id_hex(buf, 0x2b0), buf), "tg-2b0");
    const char *bad[] = {"",        "tg-",      "tg-x", "tg-2B0", "xx-2b0", "tg-12345678901234567",
                         "tg-2b0 ", "tg-2\xb0", "tg-g", "tg-/"};
    uint64_t v;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        cr_assert_eq(tg_call_id_parse(bad[k], strlen(bad[k]), &v), -1, "'%s' parsed", bad[k]);
}

Test(ctab, seeded_ids_differ_and_stay_bounded)
{
    uint64_t seeds[] = {0, 1, UINT64_C(0xffffffff), UINT64_C(0x0123456789abcdef)};
    uint64_t first[4];
    for (int k = 0; k < 4; k++) {
        tg_ctab_t t;
        tg_ctab_init(&t, sizeof(ent_t));
        tg_ctab_seed(&t, seeds[k]);
        tg_ctab_fit(&t, 300);
        cr_assert_eq(tg_ctab_grow(&t, 300), 0);
        uint32_t i;
        uint64_t id;
        for (int j = 0; j < 3; j++) {
            ent_t *e = tg_ctab_take(&t, &i, &id);
            cr_assert_not_null(e);
            cr_assert_lt(id, UINT64_C(1) << 53);
            cr_assert_neq(id >> 9, 0, "seq 0 given out");
            cr_assert_eq(tg_ctab_lookup(&t, id), e);
            if (j == 0)
                first[k] = id;
        }
        tg_ctab_fini(&t);
    }
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            cr_assert_neq(first[a], first[b], "seeds %d and %d gave the same first id", a, b);
}

/* Issue 12 item 2: a table sized for many calls holds memory for the
 * most calls taken at once, and a short last chunk is filled up when a
 * grow raises the size. */
Test(ctab, chunks_follow_the_calls_taken_not_the_size)
{
    tg_ctab_t t;
    tg_ctab_init(&t, sizeof(ent_t));
    cr_assert_eq(tg_ctab_grow(&t, 196608), 0);
    cr_assert_eq(t.nchunks, 0);
    uint32_t idx[2 * TG_CALL_CHUNK];
    uint64_t id;
    for (uint32_t k = 0; k < 2 * TG_CALL_CHUNK; k++)
        cr_assert_not_null(tg_ctab_take(&t, &idx[k], &id));
    cr_assert_eq(t.nchunks, 2);
    for (uint32_t k = 0; k < 2 * TG_CALL_CHUNK; k++)
        tg_ctab_put(&t, idx[k]);
    for (uint32_t k = 0; k < 2 * TG_CALL_CHUNK; k++)
        cr_assert_not_null(tg_ctab_take(&t, &idx[k], &id));
    cr_assert_eq(t.nchunks, 2, "freed entries are reused before a chunk is added");
    tg_ctab_fini(&t);

    tg_ctab_init(&t, sizeof(ent_t));
    cr_assert_eq(tg_ctab_grow(&t, 3), 0);
    for (uint32_t k = 0; k < 3; k++)
        cr_assert_not_null(tg_ctab_take(&t, &idx[k], &id));
    cr_assert_null(tg_ctab_take(&t, &idx[3], &id), "a full table gave an entry");
    cr_assert_eq(tg_ctab_grow(&t, 5), 0);
    cr_assert_not_null(tg_ctab_take(&t, &idx[3], &id));
    cr_assert_not_null(tg_ctab_take(&t, &idx[4], &id));
    cr_assert_eq(idx[3], 3);
    cr_assert_eq(idx[4], 4);
    cr_assert_eq(t.nchunks, 1, "the short chunk was filled up");
    cr_assert_null(tg_ctab_take(&t, &idx[5], &id));
    tg_ctab_fini(&t);
}
