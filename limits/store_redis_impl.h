/* Redis store internals shared by its three files. Not for use outside
 * limits/.
 *
 *   store_redis.c        the scripts, the request pool, the calls (take,
 *                        ping) and their replies, open and close
 *   store_redis_conn.c   the connection: libuv hooks for hiredis, set-up,
 *                        health (degraded / recovered), reconnect backoff,
 *                        host name resolution
 *   store_redis_slots.c  shared concurrency slots: acquire, release, the
 *                        renew timer and the release of every slot at close
 *
 * store_redis.c's opening comment describes the store as a whole.
 * Convention: runtime calls return 0 or a negative errno (or a bool where
 * the comment says so); nothing here fills a tg_err_t.
 */
#ifndef TG_LIMITS_STORE_REDIS_IMPL_H
#define TG_LIMITS_STORE_REDIS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "limits/store.h"
#include "limits/store_slots.h"

/* The scripts, loaded at set-up in this order. */
enum { RS_SCRIPT_GCRA = 0, RS_SCRIPT_SLOTS, RS_NSCRIPTS };

typedef struct tg_rs_script {
    const char *body;
    size_t len;
} tg_rs_script_t;

/* Their text (store_redis.c), indexed by RS_SCRIPT_*. */
extern const tg_rs_script_t tg__rs_scripts[RS_NSCRIPTS];

typedef enum req_kind {
    REQ_TAKE = 0,
    REQ_PING,
    REQ_SLOT_ACQUIRE,
    REQ_SLOT_RENEW,
    REQ_CHARGE, /* recovery: floor a bucket's TAT (nobody waits for it) */
} req_kind_t;

struct redis_store;

/* One call. Pooled: taken from the free list, returned when both the
 * caller has been answered (user_done) and hiredis has given it back
 * (!in_redis). */
typedef struct req {
    struct req *next_free;
    struct req *next_all; /* every request allocated, for close */
    struct redis_store *rs;
    uv_timer_t timer;            /* initialised once; closed only by store close */
    const redisAsyncContext *ac; /* connection the command went out on */
    union {
        tg_store_take_cb take;
        tg_store_ping_cb ping;
        tg_store_slot_cb slot;
    } cb;
    void *arg;
    req_kind_t kind;
    bool user_done;
    bool in_redis;
    bool as_eval; /* sent (or re-sent after NOSCRIPT) with the script body */
    uint64_t count;
    uint64_t period_ms;
    uint32_t burst;
    uint32_t n;   /* tokens wanted */
    uint32_t cap; /* effective burst */
    uint64_t test_now_ms;
    bool has_test_now;
    uint64_t floor_us; /* charge: the bucket's TAT is at least now + this */
    /* slot acquire: the member's number, and whether the failure policy
     * answered with a slot (a late grant from Redis is then that slot) */
    uint64_t seq;
    bool policy_granted;
    /* slot renew: <nmem> members, NUL-separated (heap, freed on reuse) */
    char *mbuf;
    uint32_t nmem;
    char key[TG_STORE_KEY_MAX + 1];
} req_t;

/* Which script a SCRIPT LOAD reply is for. */
typedef struct script_ctx {
    struct redis_store *rs;
    int idx;
} script_ctx_t;

/* One redis store. Owned by whoever opened it (tg_store_redis_open) until
 * tg_store_close; freed by tg__rs_free_all after its last uv handle has
 * closed (<open_handles> counts them). */
typedef struct redis_store {
    tg_store_t base;
    uv_loop_t *loop;
    tg_store_url_t url;
    uint64_t timeout_ms;
    uint64_t connect_timeout_ms;
    uint64_t dead_after_ms;
    uint64_t backoff_initial_ms;
    uint64_t backoff_max_ms;
    uint32_t max_pending;
    tg_store_policy_t policy;
    uint32_t instances;
    tg_store_t *fallback; /* local buckets for policy local */
    tg_store_event_cb on_event;
    void *event_arg;
    tg_store_clock_fn test_clock;
    void *test_clock_arg;

    redisAsyncContext *ac; /* current connection, or NULL */
    bool ready;            /* set-up on <ac> has finished */
    bool stalled;          /* a call timed out on <ac>; no reply since */
    bool degraded;         /* as last reported */
    bool resolving;        /* <gai> is running */
    unsigned reloading;    /* SCRIPT LOADs after NOSCRIPT in flight */
    bool closing;
    bool have_sha[RS_NSCRIPTS];
    char sha[RS_NSCRIPTS][41];
    script_ctx_t load_ctx[RS_NSCRIPTS]; /* privdata of each SCRIPT LOAD */
    char fail_what[160]; /* a connect that failed at once: reported from <watchdog> */

    tg_store_redis_stats_t stats;
    uv_timer_t watchdog; /* set-up timeout, dead connection, deferred failure */
    uv_timer_t retry;    /* reconnect backoff */
    uv_getaddrinfo_t gai;
    uint64_t backoff_ms;
    uint64_t retry_at_ms;
    uint64_t rng;
    unsigned addr_turn; /* which resolved address the next attempt uses */

    tg_slots_t slots;     /* shared slots held */
    uint64_t slot_lease_ms;
    uv_timer_t renew;     /* every slot_lease_ms / 3 while a slot is held */

    req_t *free_list;
    req_t *all;
    uint32_t nreqs;
    uint32_t in_use; /* requests not back in the free list: calls pending */
    unsigned open_handles; /* uv handles (and <gai>) not yet closed or finished */
    tg_store_close_cb close_cb;
    void *close_arg;
} redis_store_t;

/* ---- requests (store_redis.c) ---- */

/* A request from the pool, reset; NULL when max_pending are in use or
 * memory is short. */
req_t *tg__rs_req_get(redis_store_t *rs);
/* Put <q> back in the pool once it is answered and hiredis has handed it
 * back; otherwise (or while closing) do nothing. */
void tg__rs_req_release(req_t *q);
/* A request for a call when the connection takes calls now; NULL with
 * <*status> saying why not (tg__rs_status, or -ENOBUFS: every request
 * busy). */
req_t *tg__rs_req_for_call(redis_store_t *rs, int *status);
/* Under a test clock, stamp <q> with the time the script is to use
 * instead of TIME. */
void tg__rs_req_stamp(const redis_store_t *rs, req_t *q);
/* Send <q> and start its timer. 0, or -1 with <*status> = -ECONNRESET. */
int tg__rs_submit(redis_store_t *rs, req_t *q, int *status);
/* Answer a slot acquisition's caller once with <r>. */
void tg__rs_req_answer_slot(req_t *q, const tg_store_slot_result_t *r);
/* Store the SHA of script <idx> from a SCRIPT LOAD reply <r>; false when
 * <r> is not one. */
bool tg__rs_take_sha(redis_store_t *rs, int idx, const redisReply *r);
/* Recovery: charge every bucket the local fallback admitted from and
 * whose TAT is still ahead (store_redis_conn.c, "Recovery"), one call per
 * key, written before any call that follows. */
void tg__rs_charge_all(redis_store_t *rs);
/* Free the requests, the slot table and the store, then run the close
 * callback. Only once the last uv handle is closed. */
void tg__rs_free_all(redis_store_t *rs);

/* ---- connection (store_redis_conn.c) ---- */

/* Start connecting, unless closing, connected or resolving already. */
void tg__rs_connect(redis_store_t *rs);
/* Forget the current connection and return it (the caller frees it, or
 * hiredis does); NULL when there was none. */
redisAsyncContext *tg__rs_detach(redis_store_t *rs);
/* Drop the current connection (freeing it), report <what> and reconnect
 * after the backoff. */
void tg__rs_drop(redis_store_t *rs, const char *what);
/* hiredis is freeing <ac> itself: if it is the current connection, forget
 * it without freeing, report <what> and reconnect after the backoff. */
void tg__rs_lost(redis_store_t *rs, const redisAsyncContext *ac, const char *what);
/* A reply arrived on <ac>: a stalled current connection is alive again. */
void tg__rs_alive(redis_store_t *rs, const redisAsyncContext *ac);
/* A call on the current connection got no reply in time: mark it stalled,
 * arm the dead-connection watchdog, report store.degraded. */
void tg__rs_stall(redis_store_t *rs);
/* Report store.degraded with <what> (once, until recovered). */
void tg__rs_degrade(redis_store_t *rs, const char *what);
/* Whether a call may go to Redis now (true); if not, <*status> says why. */
bool tg__rs_status(const redis_store_t *rs, int *status);
/* The retry_after_ms a policy answer suggests: the time to the next
 * connection attempt while waiting for one, else timeout_ms. */
uint64_t tg__rs_retry_hint(const redis_store_t *rs);
/* Write what hiredis has buffered on <ac> to the socket now. Returns <ac>,
 * or NULL when hiredis freed it (a failed write tears it down). */
redisAsyncContext *tg__rs_flush(redisAsyncContext *ac);

/* ---- shared slots (store_redis_slots.c) ---- */

/* A slot decided without Redis, <status> saying why (the failure policy). */
tg_store_slot_result_t tg__rs_slot_policy(redis_store_t *rs, const char *key, uint32_t cap,
                                          uint64_t seq, int status);
/* Answer acquisition <q> from the script's {granted, holders, cap} in <v>. */
void tg__rs_slot_reply(redis_store_t *rs, req_t *q, const long long *v);
/* A slot Redis granted that nobody holds: ZREM it (without waiting). */
void tg__rs_slot_gone(redis_store_t *rs, const char *key, uint64_t seq);
/* Renew every slot held, one call per key, when the connection takes
 * calls. */
void tg__rs_renew_all(redis_store_t *rs);
/* Closing: ZREM every slot held and every acquisition still unanswered on
 * <ac>, and push them onto the socket. Returns <ac>, or NULL when hiredis
 * freed it. */
redisAsyncContext *tg__rs_release_all(redis_store_t *rs, redisAsyncContext *ac);
/* The store ops of the same names. */
int tg__rs_slot_acquire(tg_store_t *s, const char *key, uint32_t cap, tg_store_slot_cb cb,
                        void *arg);
void tg__rs_slot_release(tg_store_t *s, tg_store_slot_t *slot);
uint64_t tg__rs_slots_held(const tg_store_t *s);

#endif
