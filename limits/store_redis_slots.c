/* The redis store's shared concurrency slots: acquire, release, renewal
 * and the release of every slot when the store closes. The slot table
 * itself (member names, per-key lists) is store_slots.c; the requests and
 * the connection these ride are store_redis.c's and store_redis_conn.c's.
 *
 * A second script (slots_lua in store_redis.c) keeps one sorted set per
 * limit key, members the slots held fleet-wide, scores their expiry on the
 * server's clock. Acquire drops expired members and adds one while fewer
 * than the cap are left; a renew timer (every slot_lease_ms / 3) sends one
 * script call per key with every member this store holds there, which
 * pushes their expiry out and puts back any that lapsed (their calls still
 * run: the count must see them); release is a plain ZREM sent without
 * waiting for its answer. Both scripts are loaded at set-up and recovered
 * alike after NOSCRIPT. A slot granted by Redis after its caller was
 * answered by the policy without one (a reply after the timeout) is
 * removed at once. Closing sends a ZREM for every slot still held and
 * pushes it onto the socket before the connection goes, so a clean exit
 * leaves nothing behind; a crash leaves slots that expire with their lease.
 */
#include "limits/store_redis_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TG_STORE_RENEW_BATCH 512 /* fixed internal bound: members per renewal or release command */

static void rs_on_renew(uv_timer_t *t);

/* ---- failure policy ---- */

static void rs_renew_arm(redis_store_t *rs)
{
    if (!rs->closing && !uv_is_active((const uv_handle_t *)&rs->renew)) {
        uint64_t every = tg_store_slot_renew_ms(rs->slot_lease_ms);
        uv_timer_start(&rs->renew, rs_on_renew, every, every);
    }
}

/* A slot decided without Redis: <status> says why. Under policy local a
 * slot is granted while this instance holds fewer than its share of <cap>
 * under <key>, counting every slot it holds there (also those Redis
 * granted before the outage); open grants one; closed, or a store being
 * closed (it must not hand out slots it is about to forget), refuses. */
tg_store_slot_result_t tg__rs_slot_policy(redis_store_t *rs, const char *key, uint32_t cap,
                                          uint64_t seq, int status)
{
    tg_store_slot_result_t r = {.cap = cap, .decided_by = TG_STORE_BY_CLOSED, .status = status};
    uint32_t held = tg_slots_held(&rs->slots, key);
    bool grant = false;
    rs->stats.by_policy++;
    if (!rs->closing && rs->policy == TG_STORE_POLICY_LOCAL) {
        r.decided_by = TG_STORE_BY_LOCAL_FALLBACK;
        r.cap = tg_store_share(cap, rs->instances);
        r.holders = held;
        grant = held < r.cap;
    } else if (!rs->closing && rs->policy == TG_STORE_POLICY_OPEN) {
        r.decided_by = TG_STORE_BY_OPEN;
        r.holders = held;
        grant = true;
    }
    if (grant) {
        r.slot = tg_slots_add(&rs->slots, key, seq, r.decided_by);
        if (r.slot == NULL) {
            r.decided_by = TG_STORE_BY_CLOSED;
        } else {
            r.granted = true;
            r.holders = held + 1;
            rs_renew_arm(rs);
        }
    }
    return r;
}

/* ---- replies ---- */

/* A slot Redis granted that nobody holds: remove it. */
void tg__rs_slot_gone(redis_store_t *rs, const char *key, uint64_t seq)
{
    char member[TG_STORE_MEMBER_MAX];
    size_t mlen = tg_slots_member(&rs->slots, seq, member, sizeof member);
    if (rs->ac != NULL && redisAsyncCommand(rs->ac, NULL, NULL, "ZREM %s %b", key, member,
                                            mlen) == REDIS_OK)
        rs->stats.slot_releases++;
}

/* The answer to a slot acquisition. */
void tg__rs_slot_reply(redis_store_t *rs, req_t *q, const long long *v)
{
    tg_store_slot_result_t res = {.decided_by = TG_STORE_BY_STORE};
    res.holders = (uint64_t)v[1];
    res.cap = (uint64_t)v[2];
    if (v[0] != 0) {
        res.slot = tg_slots_add(&rs->slots, q->key, q->seq, TG_STORE_BY_STORE);
        if (res.slot != NULL) {
            res.granted = true;
            rs_renew_arm(rs);
        } else {
            /* Out of memory: a slot nobody renews would block the fleet
             * for a lease; give it back. */
            tg__rs_slot_gone(rs, q->key, q->seq);
            res.decided_by = TG_STORE_BY_CLOSED;
            res.status = -ENOMEM;
        }
    }
    tg__rs_req_answer_slot(q, &res);
}

/* ---- acquire and release ---- */

int tg__rs_slot_acquire(tg_store_t *s, const char *key, uint32_t cap, tg_store_slot_cb cb,
                        void *arg)
{
    redis_store_t *rs = (redis_store_t *)s;
    size_t n = strnlen(key, TG_STORE_KEY_MAX + 1);
    if (n == 0 || n > TG_STORE_KEY_MAX || cap == 0 || cap > TG_MAX_CONCURRENT_CEIL)
        return -EINVAL;
    if (rs->closing)
        return -ECANCELED;
    uint64_t seq = tg_slots_next_seq(&rs->slots);
    int status;
    req_t *q = tg__rs_req_for_call(rs, &status);
    if (q != NULL) {
        q->kind = REQ_SLOT_ACQUIRE;
        q->cb.slot = cb;
        q->arg = arg;
        q->cap = cap;
        q->seq = seq;
        memcpy(q->key, key, n + 1);
        tg__rs_req_stamp(rs, q);
        if (tg__rs_submit(rs, q, &status) == 0)
            return 0;
        q->user_done = true;
        tg__rs_req_release(q);
    }
    tg_store_slot_result_t r = tg__rs_slot_policy(rs, key, cap, seq, status);
    cb(arg, &r);
    return 0;
}

void tg__rs_slot_release(tg_store_t *s, tg_store_slot_t *slot)
{
    redis_store_t *rs = (redis_store_t *)s;
    /* Sent whenever there is a connection, even a stalled one: it queues
     * behind the acquisition on the same connection, so it cannot overtake
     * it. Without one, the slot's lease ends it. */
    tg__rs_slot_gone(rs, slot->k->key, slot->seq);
    tg_slots_remove(&rs->slots, slot);
    if (rs->slots.held == 0)
        uv_timer_stop(&rs->renew);
}

uint64_t tg__rs_slots_held(const tg_store_t *s)
{
    return ((const redis_store_t *)s)->slots.held;
}

/* ---- renewal and release at close ---- */

/* The members of <k>'s slots from <from> on, at most TG_STORE_RENEW_BATCH,
 * NUL-separated into a new buffer; <*next> is where the next batch starts. */
static char *rs_members(redis_store_t *rs, const tg_store_slot_t *from, uint32_t *count,
                        const tg_store_slot_t **next)
{
    uint32_t n = 0;
    const tg_store_slot_t *sl = from;
    while (sl != NULL && n < TG_STORE_RENEW_BATCH) {
        n++;
        sl = sl->next;
    }
    *next = sl;
    *count = n;
    char *buf = malloc((size_t)n * TG_STORE_MEMBER_MAX);
    if (buf == NULL)
        return NULL;
    char *p = buf;
    for (sl = from; sl != *next; sl = sl->next)
        p += tg_slots_member(&rs->slots, sl->seq, p, TG_STORE_MEMBER_MAX) + 1;
    return buf;
}

/* One renewal call per key (per TG_STORE_RENEW_BATCH slots of it). */
static void rs_renew_key(void *arg, const tg_slot_key_t *k)
{
    redis_store_t *rs = arg;
    const tg_store_slot_t *from = k->head;
    while (from != NULL) {
        req_t *q = tg__rs_req_get(rs);
        if (q == NULL)
            return; /* the pool is busy: the next tick tries again */
        q->kind = REQ_SLOT_RENEW;
        q->cb.slot = NULL;
        q->arg = NULL;
        memcpy(q->key, k->key, strlen(k->key) + 1);
        q->mbuf = rs_members(rs, from, &q->nmem, &from);
        tg__rs_req_stamp(rs, q);
        int status;
        if (q->mbuf == NULL || tg__rs_submit(rs, q, &status) < 0) {
            q->user_done = true;
            tg__rs_req_release(q);
            return;
        }
    }
}

void tg__rs_renew_all(redis_store_t *rs)
{
    int status;
    if (rs->closing || rs->slots.held == 0 || !tg__rs_status(rs, &status))
        return;
    tg_slots_each(&rs->slots, rs_renew_key, rs);
}

static void rs_on_renew(uv_timer_t *t)
{
    tg__rs_renew_all(t->data);
}

/* ZREM every slot of <k> on the connection in <arg> (closing). */
typedef struct zrem_ctx {
    redis_store_t *rs;
    redisAsyncContext *ac;
} zrem_ctx_t;

static void rs_zrem_key(void *arg, const tg_slot_key_t *k)
{
    zrem_ctx_t *z = arg;
    const tg_store_slot_t *from = k->head;
    while (from != NULL) {
        uint32_t n;
        char *buf = rs_members(z->rs, from, &n, &from);
        const char **argv = malloc((2 + (size_t)n) * sizeof *argv);
        size_t *lens = malloc((2 + (size_t)n) * sizeof *lens);
        if (buf != NULL && argv != NULL && lens != NULL) {
            argv[0] = "ZREM";
            lens[0] = 4;
            argv[1] = k->key;
            lens[1] = strlen(k->key);
            const char *m = buf;
            for (uint32_t i = 0; i < n; i++) {
                argv[2 + i] = m;
                lens[2 + i] = strlen(m);
                m += lens[2 + i] + 1;
            }
            if (redisAsyncCommandArgv(z->ac, NULL, NULL, (int)(2 + n), argv, lens) == REDIS_OK)
                z->rs->stats.slot_releases += n;
        }
        free(buf);
        free(argv);
        free(lens);
    }
}

/* Closing with slots still held (their calls were cut short), or with
 * acquisitions unanswered: remove those slots and push the commands onto
 * the socket now, without waiting for answers;
 * what a full socket buffer keeps back expires with the lease. Returns
 * <ac>, or NULL when hiredis freed it (a failed write tears it down). */
redisAsyncContext *tg__rs_release_all(redis_store_t *rs, redisAsyncContext *ac)
{
    zrem_ctx_t z = {rs, ac};
    tg_slots_each(&rs->slots, rs_zrem_key, &z);
    /* Acquisitions Redis has not answered yet may still add a slot nobody
     * holds; a ZREM behind them on the same connection runs after them. */
    for (const req_t *q = rs->all; q != NULL; q = q->next_all) {
        char member[TG_STORE_MEMBER_MAX];
        if (q->kind != REQ_SLOT_ACQUIRE || !q->in_redis || q->ac != ac)
            continue;
        size_t mlen = tg_slots_member(&rs->slots, q->seq, member, sizeof member);
        if (redisAsyncCommand(ac, NULL, NULL, "ZREM %s %b", q->key, member, mlen) == REDIS_OK)
            rs->stats.slot_releases++;
    }
    return tg__rs_flush(ac);
}
