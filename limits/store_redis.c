/* The redis store: shared GCRA buckets in one Redis (exact mode).
 *
 * One Lua script (gcra_lua below) runs the arithmetic of limits/gcra.c on
 * the server, reading the server's TIME, so host clocks do not matter and
 * every toolgate pointed at the same Redis shares each bucket. It is
 * loaded with SCRIPT LOAD when a connection is set up and called with
 * EVALSHA; a NOSCRIPT reply (script cache flushed, Redis restarted behind
 * a proxy) re-sends that call as EVAL and reloads the script.
 *
 * Connection: one hiredis 0.14 async connection on the caller's libuv
 * loop. Every call is written to it as soon as it is made, so calls
 * pipeline naturally (one write and one read carry many of them); replies
 * come back in order. Set-up is pipelined too: AUTH [user] password,
 * SELECT db, SCRIPT LOAD, then any calls made meanwhile (sent as EVAL until
 * the script's SHA is known).
 *
 * Timeouts: hiredis 0.14 has none for async calls, so every call carries
 * its own uv timer (timeout_ms, default 50). When it fires the caller gets
 * the failure policy at once and the request is marked done; its reply, if
 * it ever comes, is dropped (Redis did count that call: a timeout can only
 * make the fleet admit less, never more). The request's memory stays with
 * hiredis until hiredis hands it back (reply or connection teardown).
 *
 * Health: the connection is healthy when set-up has finished and no call
 * has timed out since the last reply arrived. A timeout marks it stalled;
 * a reply of any kind clears that. While the store is degraded (after any
 * failure) calls are decided by the policy at once, without a round trip,
 * so an outage adds no latency; they go back to Redis as soon as a
 * connection is healthy again. A connection that stays stalled for
 * dead_after_ms, or whose set-up takes longer than connect_timeout_ms, is
 * dropped; a lost connection is re-made after a backoff (backoff_initial_ms
 * doubling to backoff_max_ms, each delay drawn from [d/2, d] so that a
 * fleet does not reconnect in lockstep; reset once set-up succeeds).
 * store.degraded is reported on the first failure while healthy, and
 * store.recovered when a connection is healthy again: once each.
 *
 * An error reply to a call (other than NOSCRIPT: OOM, LOADING, READONLY,
 * NOAUTH...) also drops the connection: set-up on a new connection is the
 * one place that proves the server can serve again.
 *
 * Host names are resolved with uv_getaddrinfo on the threadpool: a
 * resolver timeout during an outage must not freeze the loop. Calls made
 * while the first resolution is running are decided by the policy
 * (-ENOTCONN); with an IP address or a unix socket there is no such window.
 *
 * Shared slots: a second script (slots_lua) keeps one sorted set per
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
 *
 * Ownership: the store owns its requests (pooled, each with a uv timer
 * initialised once), three timers, the getaddrinfo request, the fallback
 * local store, the slot table and the hiredis context. Memory is released after the last
 * libuv close callback. hiredis callbacks always find the request they
 * were given alive, because nothing is freed before hiredis has handed
 * back every request (a context is only ever freed through
 * redisAsyncFree, which runs the outstanding callbacks first).
 */
#include "limits/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "limits/store_slots.h"

#define TG_STORE_RENEW_BATCH 512 /* fixed internal bound: members per renewal or release command */

/* The GCRA of limits/gcra.c, in integer microseconds held in Lua doubles
 * (exact below 2^53, and gcra.h keeps every value below that).
 * KEYS[1]  bucket; its value is TAT in microseconds of the server clock.
 * ARGV[1]  count   ARGV[2] period_ms   ARGV[3] burst (0 = count)
 * ARGV[4]  n: tokens wanted (1 for one call; lease mode asks for more)
 * ARGV[5]  optional: "now" in ms, for tests replaying a call sequence
 *          (production reads TIME). With it the key's TTL is a fixed 10
 *          minutes, because the test clock and the server's expiry clock
 *          are unrelated.
 * Returns {granted, retry_after_ms, observed, cap, remaining}: granted k =
 * min(n, tokens available now), exactly what k calls in a row would get
 * (for n = 1: {allowed, ...} as tg_gcra_take); observed and remaining as
 * the last granted call sees them; retry_after_ms the wait for one more
 * token when k < n, else 0.
 * T rounds up, as in gcra.c. idiv corrects floor(a / b) by one either way:
 * the double quotient of two exact integers can round across an integer.
 * The key expires when its TAT passes (after = backlog + k T, at most
 * tau + T), from which point an absent key decides the same.
 * redis.replicate_commands() lets a script write after reading TIME on
 * Redis 3.2-4 (on 5+ it is the default and the call a no-op). */
static const char gcra_lua[] =
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local function idiv(a, b)\n"
    "  local q = math.floor(a / b)\n"
    "  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end\n"
    "  return q\n"
    "end\n"
    "local function cdiv(a, b)\n"
    "  local q = idiv(a, b)\n"
    "  if q * b < a then q = q + 1 end\n"
    "  return q\n"
    "end\n"
    "local count = tonumber(ARGV[1])\n"
    "local period_ms = tonumber(ARGV[2])\n"
    "local burst = tonumber(ARGV[3])\n"
    "local n = tonumber(ARGV[4])\n"
    "if not count or not period_ms or not burst or not n or count < 1 or period_ms < 1\n"
    "   or burst < 0 or n < 1 or count > 1e6 or burst > 1e6 or n > 1e6\n"
    "   or period_ms > 1125899906842 then\n"
    "  return redis.error_reply('ERR toolgate gcra: bad arguments')\n"
    "end\n"
    "if burst == 0 then burst = count end\n"
    "local t_us = cdiv(period_ms * 1000, count)\n"
    "local tau_us = t_us * (burst - 1)\n"
    "local now_us\n"
    "if ARGV[5] then\n"
    "  now_us = math.min(tonumber(ARGV[5]), 4503599627370) * 1000\n"
    "else\n"
    "  local tm = redis.call('TIME')\n"
    "  now_us = math.min(tonumber(tm[1]) * 1000000 + tonumber(tm[2]), 4503599627370496)\n"
    "end\n"
    "local tat = now_us\n"
    "local stored = tonumber(redis.call('GET', KEYS[1]) or '')\n"
    "if stored and stored > now_us then tat = stored end\n"
    "local ahead = tat - now_us\n"
    "local k = 0\n"
    "if ahead <= tau_us then k = math.min(n, idiv(tau_us - ahead, t_us) + 1) end\n"
    "local observed = cdiv(ahead + math.max(k - 1, 0) * t_us, t_us) + 1\n"
    "local after = ahead + k * t_us\n"
    "local retry = 0\n"
    "if k < n then retry = cdiv(after - tau_us, 1000) end\n"
    "if k == 0 then return {0, retry, observed, burst, 0} end\n"
    "local remaining = 0\n"
    "if after <= tau_us then remaining = idiv(tau_us - after, t_us) + 1 end\n"
    "local ttl_ms = cdiv(after, 1000)\n"
    "if ARGV[5] then ttl_ms = 600000 end\n"
    "redis.call('SET', KEYS[1], string.format('%.0f', tat + k * t_us), 'PX',\n"
    "           string.format('%.0f', ttl_ms))\n"
    "return {k, retry, observed, burst, remaining}\n";

/* Shared concurrency slots, one sorted set per limit.
 * KEYS[1]  the set: member = one slot held, score = when it expires (ms of
 *          the server clock)
 * ARGV[1]  "acquire" or "renew"
 * ARGV[2]  lease_ms: a slot expires this long after it was taken or renewed
 * ARGV[3]  "" (production reads TIME), or "now" in ms for tests replaying a
 *          sequence; with it the key's TTL is a fixed 10 minutes, as in the
 *          GCRA script
 * acquire: ARGV[4] cap, ARGV[5] member. Returns {granted (0|1), holders,
 *          cap}: holders after the call (the new slot included).
 * renew:   ARGV[4..] members. Each gets a fresh expiry; one that had
 *          expired (or was never written: granted by the failure policy)
 *          is put back, since its call still runs. Returns {put back,
 *          holders}.
 * Expired members go first, so a toolgate that died stops counting one
 * lease after its last renewal. The key expires with its last member (all
 * scores are at most now + lease, so one PEXPIRE of lease covers them). */
static const char slots_lua[] =
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local lease = tonumber(ARGV[2])\n"
    "local now\n"
    "if ARGV[3] ~= nil and ARGV[3] ~= '' then\n"
    "  now = tonumber(ARGV[3])\n"
    "else\n"
    "  local tm = redis.call('TIME')\n"
    "  now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
    "end\n"
    "if not lease or not now or lease < 1 or lease > 86400000 or now < 0 or now > 4503599627370 then\n"
    "  return redis.error_reply('ERR toolgate slots: bad arguments')\n"
    "end\n"
    "local ttl = lease\n"
    "if ARGV[3] ~= '' then ttl = 600000 end\n"
    "local until_ms = string.format('%.0f', now + lease)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))\n"
    "local held = redis.call('ZCARD', KEYS[1])\n"
    "if ARGV[1] == 'acquire' then\n"
    "  local cap = tonumber(ARGV[4])\n"
    "  if not cap or cap < 1 or cap > 1e6 or not ARGV[5] then\n"
    "    return redis.error_reply('ERR toolgate slots: bad arguments')\n"
    "  end\n"
    "  if held >= cap then return {0, held, cap} end\n"
    "  redis.call('ZADD', KEYS[1], until_ms, ARGV[5])\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "  return {1, held + 1, cap}\n"
    "elseif ARGV[1] == 'renew' then\n"
    "  local back = 0\n"
    "  for i = 4, #ARGV do\n"
    "    back = back + redis.call('ZADD', KEYS[1], until_ms, ARGV[i])\n"
    "  end\n"
    "  if #ARGV >= 4 then redis.call('PEXPIRE', KEYS[1], ttl) end\n"
    "  return {back, held + back}\n"
    "end\n"
    "return redis.error_reply('ERR toolgate slots: unknown operation')\n";

const char *tg_store_redis_script(void)
{
    return gcra_lua;
}

const char *tg_store_redis_slots_script(void)
{
    return slots_lua;
}

/* The scripts, loaded at set-up in this order. */
enum { SCRIPT_GCRA = 0, SCRIPT_SLOTS, NSCRIPTS };

static const struct {
    const char *body;
    size_t len;
} scripts[NSCRIPTS] = {
    {gcra_lua, sizeof gcra_lua - 1},
    {slots_lua, sizeof slots_lua - 1},
};

typedef enum req_kind {
    REQ_TAKE = 0,
    REQ_PING,
    REQ_SLOT_ACQUIRE,
    REQ_SLOT_RENEW,
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
    bool have_sha[NSCRIPTS];
    char sha[NSCRIPTS][41];
    script_ctx_t load_ctx[NSCRIPTS]; /* privdata of each SCRIPT LOAD */
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

static void rs_connect(redis_store_t *rs);
static void rs_drop(redis_store_t *rs, const char *what);
static void rs_lost(redis_store_t *rs, const redisAsyncContext *ac, const char *what);
static void rs_on_watchdog(uv_timer_t *t);
static void rs_free_all(redis_store_t *rs);
static void rs_renew_all(redis_store_t *rs);
static void rs_on_renew(uv_timer_t *t);
static void rs_slot_gone(redis_store_t *rs, const char *key, uint64_t seq);

/* ---- events ---- */

/* "<redacted url>: <what>", with any occurrence of the password masked
 * too: <what> may quote a server error, and a secret in an audit trail
 * cannot be taken back. */
static void rs_reason(const redis_store_t *rs, char *buf, size_t cap, const char *what)
{
    char raw[TG_STORE_URL_MAX + 256];
    snprintf(raw, sizeof raw, "%s: %s", rs->base.name, what);
    const char *pw = rs->url.password;
    size_t n = strlen(pw), j = 0;
    for (const char *p = raw; *p != '\0' && j + 1 < cap;) {
        if (n > 0 && strncmp(p, pw, n) == 0) {
            for (int k = 0; k < 3 && j + 1 < cap; k++)
                buf[j++] = '*';
            p += n;
        } else {
            buf[j++] = *p++;
        }
    }
    buf[j] = '\0';
}

static void rs_degrade(redis_store_t *rs, const char *what)
{
    if (rs->degraded || rs->closing)
        return;
    rs->degraded = true;
    rs->stats.degraded++;
    if (rs->on_event != NULL) {
        char reason[TG_STORE_URL_MAX + 256];
        rs_reason(rs, reason, sizeof reason, what);
        rs->on_event(rs->event_arg, TG_STORE_EV_DEGRADED, reason);
    }
}

static bool rs_healthy(const redis_store_t *rs)
{
    return rs->ac != NULL && rs->ready && !rs->stalled;
}

static void rs_maybe_recovered(redis_store_t *rs)
{
    if (!rs->degraded || rs->closing || !rs_healthy(rs))
        return;
    rs->degraded = false;
    if (rs->on_event != NULL) {
        char reason[TG_STORE_URL_MAX + 256];
        rs_reason(rs, reason, sizeof reason, "answering again");
        rs->on_event(rs->event_arg, TG_STORE_EV_RECOVERED, reason);
    }
    /* Slots that lapsed during the outage, or were granted by the policy,
     * go (back) into Redis now rather than at the next tick. */
    rs_renew_all(rs);
}

/* ---- failure policy ---- */

static uint64_t rs_retry_hint(const redis_store_t *rs)
{
    if (rs->ac == NULL && uv_is_active((const uv_handle_t *)&rs->retry)) {
        uint64_t now = uv_now(rs->loop);
        return rs->retry_at_ms > now ? rs->retry_at_ms - now : 1;
    }
    return rs->timeout_ms;
}

static tg_store_result_t rs_policy(redis_store_t *rs, const char *key, uint64_t count,
                                   uint64_t period_ms, uint32_t burst, uint32_t n, uint32_t cap,
                                   int status)
{
    tg_store_result_t r;
    rs->stats.by_policy++;
    if (rs->policy == TG_STORE_POLICY_LOCAL && rs->fallback != NULL) {
        uint64_t b = tg_store_share(burst, rs->instances);
        if (tg_store_local_take_sync(rs->fallback, key, tg_store_share(count, rs->instances),
                                     period_ms, (uint32_t)b, n, &r) == 0) {
            if (r.decided_by == TG_STORE_BY_STORE)
                r.decided_by = TG_STORE_BY_LOCAL_FALLBACK;
            r.status = status;
            return r;
        }
    }
    return tg_store_policy_result(rs->policy == TG_STORE_POLICY_OPEN ? TG_STORE_POLICY_OPEN
                                                                     : TG_STORE_POLICY_CLOSED,
                                  status, cap, n, rs_retry_hint(rs));
}

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
static tg_store_slot_result_t rs_slot_policy(redis_store_t *rs, const char *key, uint32_t cap,
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

/* ---- requests ---- */

static void req_release(req_t *q)
{
    if (!q->user_done || q->in_redis || q->rs->closing)
        return;
    free(q->mbuf);
    q->mbuf = NULL;
    q->rs->in_use--;
    q->next_free = q->rs->free_list;
    q->rs->free_list = q;
}

/* Mark <q> answered; false when it already was. */
static bool req_done(req_t *q)
{
    if (q->user_done)
        return false;
    q->user_done = true;
    uv_timer_stop(&q->timer);
    return true;
}

/* Answer the caller once: <r> for a take, <status> for a ping. */
static void req_answer(req_t *q, const tg_store_result_t *r, int status)
{
    if (!req_done(q))
        return;
    if (q->kind == REQ_TAKE)
        q->cb.take(q->arg, r);
    else if (q->kind == REQ_PING)
        q->cb.ping(q->arg, status);
}

static void req_answer_slot(req_t *q, const tg_store_slot_result_t *r)
{
    if (req_done(q))
        q->cb.slot(q->arg, r);
}

static void req_fail(req_t *q, int status)
{
    if (q->user_done)
        return;
    tg_store_result_t r = {0};
    if (q->kind == REQ_SLOT_ACQUIRE) {
        tg_store_slot_result_t sr = rs_slot_policy(q->rs, q->key, q->cap, q->seq, status);
        q->policy_granted = sr.granted;
        req_answer_slot(q, &sr);
        return;
    }
    if (q->kind == REQ_TAKE)
        r = rs_policy(q->rs, q->key, q->count, q->period_ms, q->burst, q->n, q->cap, status);
    req_answer(q, &r, status);
}

static void req_on_timeout(uv_timer_t *t)
{
    req_t *q = t->data;
    redis_store_t *rs = q->rs;
    if (q->user_done)
        return;
    /* The request may still be queued behind others on a healthy but
     * overloaded connection; either way nothing has come back for
     * timeout_ms, and until something does the connection is stalled. */
    if (q->in_redis && q->ac == rs->ac && rs->ac != NULL && !rs->stalled) {
        rs->stalled = true;
        /* While setting up, the connect timeout already runs. */
        if (rs->ready)
            uv_timer_start(&rs->watchdog, rs_on_watchdog, rs->dead_after_ms, 0);
        char what[96];
        snprintf(what, sizeof what, "no reply within %llu ms", (unsigned long long)rs->timeout_ms);
        rs_degrade(rs, what);
    }
    rs->stats.timeouts++;
    req_fail(q, -ETIMEDOUT);
}

static req_t *req_get(redis_store_t *rs)
{
    req_t *q = rs->free_list;
    if (q != NULL) {
        rs->free_list = q->next_free;
    } else {
        if (rs->nreqs >= rs->max_pending)
            return NULL;
        q = calloc(1, sizeof *q);
        if (q == NULL)
            return NULL;
        if (uv_timer_init(rs->loop, &q->timer) != 0) {
            free(q);
            return NULL;
        }
        q->timer.data = q;
        q->rs = rs;
        q->next_all = rs->all;
        rs->all = q;
        rs->nreqs++;
        rs->open_handles++;
    }
    q->next_free = NULL;
    q->ac = NULL;
    q->user_done = false;
    q->in_redis = false;
    q->as_eval = false;
    q->has_test_now = false;
    q->policy_granted = false;
    q->nmem = 0;
    rs->in_use++;
    return q;
}

static size_t fmt_u64(char *buf, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp, n;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    n = sizeof tmp - i;
    memcpy(buf, tmp + i, n);
    buf[n] = '\0';
    return n;
}

static void rs_on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* The script request <q> runs. */
static int req_script(const req_t *q)
{
    return q->kind == REQ_TAKE ? SCRIPT_GCRA : SCRIPT_SLOTS;
}

/* Write request <q> to the current connection. 0 or -ECONNRESET. */
static int req_send(redis_store_t *rs, req_t *q)
{
    /* EVALSHA sha 1 key count period burst n [now], or
     * EVALSHA sha 1 key op lease now (cap member | members...) */
    const char *fixed[10];
    size_t fixed_lens[10];
    const char **argv = fixed;
    size_t *lens = fixed_lens;
    int argc = 0;
    char nums[5][24];
    char member[TG_STORE_MEMBER_MAX];
    if (q->kind == REQ_SLOT_RENEW) {
        /* One allocation per renewal (every lease / 3), not per call. */
        argv = malloc((7 + (size_t)q->nmem) * sizeof *argv);
        lens = malloc((7 + (size_t)q->nmem) * sizeof *lens);
        if (argv == NULL || lens == NULL) {
            free(argv);
            free(lens);
            return -ECONNRESET;
        }
    }
    if (q->kind == REQ_PING) {
        argv[argc] = "PING";
        lens[argc++] = 4;
    } else {
        int sc = req_script(q);
        if (!rs->have_sha[sc])
            q->as_eval = true;
        argv[argc] = q->as_eval ? "EVAL" : "EVALSHA";
        lens[argc] = strlen(argv[argc]);
        argc++;
        argv[argc] = q->as_eval ? scripts[sc].body : rs->sha[sc];
        lens[argc++] = q->as_eval ? scripts[sc].len : 40;
        argv[argc] = "1";
        lens[argc++] = 1;
        argv[argc] = q->key;
        lens[argc++] = strlen(q->key);
    }
    if (q->kind == REQ_TAKE) {
        lens[argc] = fmt_u64(nums[0], q->count);
        argv[argc++] = nums[0];
        lens[argc] = fmt_u64(nums[1], q->period_ms);
        argv[argc++] = nums[1];
        lens[argc] = fmt_u64(nums[2], q->burst);
        argv[argc++] = nums[2];
        lens[argc] = fmt_u64(nums[3], q->n);
        argv[argc++] = nums[3];
        if (q->has_test_now) {
            lens[argc] = fmt_u64(nums[4], q->test_now_ms);
            argv[argc++] = nums[4];
        }
    } else if (q->kind == REQ_SLOT_ACQUIRE || q->kind == REQ_SLOT_RENEW) {
        argv[argc] = q->kind == REQ_SLOT_ACQUIRE ? "acquire" : "renew";
        lens[argc] = strlen(argv[argc]);
        argc++;
        lens[argc] = fmt_u64(nums[0], rs->slot_lease_ms);
        argv[argc++] = nums[0];
        lens[argc] = q->has_test_now ? fmt_u64(nums[1], q->test_now_ms) : 0;
        argv[argc++] = q->has_test_now ? nums[1] : "";
        if (q->kind == REQ_SLOT_ACQUIRE) {
            lens[argc] = fmt_u64(nums[2], q->cap);
            argv[argc++] = nums[2];
            lens[argc] = tg_slots_member(&rs->slots, q->seq, member, sizeof member);
            argv[argc++] = member;
        } else {
            const char *m = q->mbuf;
            for (uint32_t i = 0; i < q->nmem; i++) {
                lens[argc] = strlen(m);
                argv[argc++] = m;
                m += lens[argc - 1] + 1;
            }
        }
    }
    int rc = redisAsyncCommandArgv(rs->ac, rs_on_reply, q, argc, argv, lens);
    if (argv != fixed) {
        free(argv);
        free(lens);
    }
    if (rc != REDIS_OK)
        return -ECONNRESET;
    rs->stats.sent++;
    if (q->kind == REQ_SLOT_ACQUIRE)
        rs->stats.slot_acquires++;
    else if (q->kind == REQ_SLOT_RENEW)
        rs->stats.slot_renewals++;
    q->in_redis = true;
    q->ac = rs->ac;
    return 0;
}

/* Parse {granted, retry_after_ms, observed, cap, remaining}; at most <n>
 * granted. */
static int parse_result(const redisReply *r, uint32_t n, tg_store_result_t *res)
{
    tg_gcra_result_t *out = &res->gcra;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
        return -EPROTO;
    long long v[5];
    for (size_t i = 0; i < 5; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
            return -EPROTO;
        v[i] = e->integer;
    }
    if (v[0] > (long long)n)
        return -EPROTO;
    res->granted = (uint32_t)v[0];
    out->allowed = v[0] != 0;
    out->retry_after_ms = (uint64_t)v[1];
    out->observed = (uint64_t)v[2];
    out->cap = (uint64_t)v[3];
    out->remaining = (uint64_t)v[4];
    return 0;
}

/* Any reply on the current connection proves it alive. */
static void rs_alive(redis_store_t *rs, const redisAsyncContext *ac)
{
    if (ac != rs->ac || !rs->stalled)
        return;
    rs->stalled = false;
    if (rs->ready)
        uv_timer_stop(&rs->watchdog);
    rs_maybe_recovered(rs);
}

/* Parse the slot script's {granted, holders, cap} (acquire) or {put
 * back, holders} (renew) into <v>. */
static int parse_ints(const redisReply *r, size_t n, long long *v)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return -EPROTO;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
            return -EPROTO;
        v[i] = e->integer;
    }
    return 0;
}

/* The SHA of one script, from set-up or from a reload after NOSCRIPT. */
static bool rs_take_sha(redis_store_t *rs, int idx, const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40)
        return false;
    memcpy(rs->sha[idx], r->str, 40);
    rs->sha[idx][40] = '\0';
    rs->have_sha[idx] = true;
    return true;
}

static void rs_on_reload(redisAsyncContext *ac, void *reply, void *privdata)
{
    const script_ctx_t *sc = privdata;
    redis_store_t *rs = sc->rs;
    if (ac != rs->ac)
        return;
    if (rs->reloading > 0)
        rs->reloading--;
    /* A failed reload costs only EVALs instead of EVALSHAs; the calls
     * themselves report real failures. */
    (void)rs_take_sha(rs, sc->idx, reply);
}

/* NOSCRIPT: the server lost its script cache (flushed, or restarted
 * behind a proxy). Load every script again and re-send <q> as EVAL. */
static bool rs_noscript(redis_store_t *rs, req_t *q)
{
    if (rs->reloading == 0) {
        for (int i = 0; i < NSCRIPTS; i++) {
            rs->have_sha[i] = false;
            if (redisAsyncCommand(rs->ac, rs_on_reload, &rs->load_ctx[i], "SCRIPT LOAD %b",
                                  scripts[i].body, scripts[i].len) == REDIS_OK)
                rs->reloading++;
        }
    }
    q->as_eval = true;
    rs->stats.noscript++;
    return req_send(rs, q) == 0;
}

/* A slot Redis granted that nobody holds: remove it. */
static void rs_slot_gone(redis_store_t *rs, const char *key, uint64_t seq)
{
    char member[TG_STORE_MEMBER_MAX];
    size_t mlen = tg_slots_member(&rs->slots, seq, member, sizeof member);
    if (rs->ac != NULL && redisAsyncCommand(rs->ac, NULL, NULL, "ZREM %s %b", key, member,
                                            mlen) == REDIS_OK)
        rs->stats.slot_releases++;
}

/* The answer to a slot acquisition. */
static void rs_slot_reply(redis_store_t *rs, req_t *q, const long long *v)
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
            rs_slot_gone(rs, q->key, q->seq);
            res.decided_by = TG_STORE_BY_CLOSED;
            res.status = -ENOMEM;
        }
    }
    req_answer_slot(q, &res);
}

static void rs_on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    req_t *q = privdata;
    redis_store_t *rs = q->rs;
    const redisReply *r = reply;
    long long v[3];
    q->in_redis = false;
    if (r == NULL) {
        /* hiredis is tearing the connection down. When it does so on its
         * own (I/O error, server closed it), <ac> is still ours: report
         * the loss before answering, so store.degraded precedes the
         * calls it explains. */
        rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
        req_fail(q, rs->closing ? -ECANCELED : -ECONNRESET);
        req_release(q);
        return;
    }
    rs_alive(rs, ac);
    if (q->user_done || rs->closing) {
        /* Answered already (timed out): Redis did the work anyway. A slot
         * it granted is held by nobody unless the policy handed out that
         * very slot meanwhile (then renewals keep it, and its release
         * removes it: commands on one connection run in order). */
        if (!rs->closing && q->kind == REQ_SLOT_ACQUIRE && !q->policy_granted &&
            parse_ints(r, 3, v) == 0 && v[0] != 0) {
            rs->stats.slot_orphans++;
            rs_slot_gone(rs, q->key, q->seq);
        }
        req_release(q);
        return;
    }
    if (q->kind == REQ_PING) {
        bool ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        req_answer(q, NULL, ok ? 0 : -EPROTO);
        req_release(q);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 && !q->as_eval &&
        ac == rs->ac) {
        if (rs_noscript(rs, q))
            return; /* the timer keeps running: same deadline */
    }
    tg_store_result_t res = {.decided_by = TG_STORE_BY_STORE};
    if (q->kind == REQ_TAKE && parse_result(r, q->n, &res) == 0) {
        req_answer(q, &res, 0);
        req_release(q);
        return;
    }
    if (q->kind == REQ_SLOT_ACQUIRE && parse_ints(r, 3, v) == 0) {
        rs_slot_reply(rs, q, v);
        req_release(q);
        return;
    }
    if (q->kind == REQ_SLOT_RENEW && parse_ints(r, 2, v) == 0) {
        rs->stats.slot_readded += (uint64_t)v[0];
        req_done(q);
        req_release(q);
        return;
    }
    char what[200];
    if (r->type == REDIS_REPLY_ERROR)
        snprintf(what, sizeof what, "error reply: %.160s", r->str);
    else
        snprintf(what, sizeof what, "malformed reply (type %d)", r->type);
    if (ac == rs->ac)
        rs_drop(rs, what);
    req_fail(q, -EPROTO);
    req_release(q);
}

/* ---- event loop hooks ---- */

/* hiredis' read/write hooks on a uv_poll_t. Not hiredis' own
 * adapters/libuv.h: the 0.14 one returns early on a poll error
 * (status < 0), and libuv reports a refused connect or a reset socket
 * exactly that way (POLLERR, after stopping the poll), so hiredis would
 * never learn of it and the connection would sit there until a timer gave
 * up on it. Here an error wakes every direction hiredis asked for, and its
 * own connect/read/write checks then find the error and tear down.
 * The poll handle counts in the store's open_handles until it is closed,
 * so the store outlives it. */
typedef struct rs_poll {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis has cleaned up */
    redis_store_t *rs;
    int events;
} rs_poll_t;

static void rs_poll_cb(uv_poll_t *h, int status, int events)
{
    rs_poll_t *p = h->data;
    int ev = status < 0 ? p->events : events;
    if (p->ac != NULL && (ev & UV_READABLE))
        redisAsyncHandleRead(p->ac);
    /* The read may have freed the context (cleanup cleared p->ac). */
    if (p->ac != NULL && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void rs_poll_set(rs_poll_t *p, int events)
{
    if (p->ac == NULL || events == p->events)
        return;
    p->events = events;
    if (events != 0)
        uv_poll_start(&p->handle, events, rs_poll_cb);
    else
        uv_poll_stop(&p->handle);
}

static void rs_add_read(void *d)
{
    rs_poll_set(d, ((rs_poll_t *)d)->events | UV_READABLE);
}
static void rs_del_read(void *d)
{
    rs_poll_set(d, ((rs_poll_t *)d)->events & ~UV_READABLE);
}
static void rs_add_write(void *d)
{
    rs_poll_set(d, ((rs_poll_t *)d)->events | UV_WRITABLE);
}
static void rs_del_write(void *d)
{
    rs_poll_set(d, ((rs_poll_t *)d)->events & ~UV_WRITABLE);
}

static void rs_poll_closed(uv_handle_t *h)
{
    rs_poll_t *p = h->data;
    redis_store_t *rs = p->rs;
    free(p);
    if (--rs->open_handles == 0)
        rs_free_all(rs);
}

static void rs_cleanup(void *d)
{
    rs_poll_t *p = d;
    if (p->ac == NULL)
        return;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->handle, rs_poll_closed);
}

static int rs_attach(redis_store_t *rs, redisAsyncContext *ac)
{
    rs_poll_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    int rc = uv_poll_init(rs->loop, &p->handle, ac->c.fd);
    if (rc != 0) {
        free(p);
        return rc;
    }
    p->handle.data = p;
    p->ac = ac;
    p->rs = rs;
    rs->open_handles++;
    ac->ev.data = p;
    ac->ev.addRead = rs_add_read;
    ac->ev.delRead = rs_del_read;
    ac->ev.addWrite = rs_add_write;
    ac->ev.delWrite = rs_del_write;
    ac->ev.cleanup = rs_cleanup;
    return 0;
}

/* ---- connection ---- */

/* Forget the current connection (the caller frees it, or hiredis does). */
static redisAsyncContext *rs_detach(redis_store_t *rs)
{
    redisAsyncContext *ac = rs->ac;
    rs->ac = NULL;
    rs->ready = false;
    rs->stalled = false;
    rs->reloading = 0;
    if (!rs->closing)
        uv_timer_stop(&rs->watchdog);
    return ac;
}

static uint64_t rs_rand(redis_store_t *rs)
{
    /* xorshift64: jitter needs spread, not secrecy. */
    uint64_t x = rs->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rs->rng = x;
    return x;
}

static void rs_on_retry(uv_timer_t *t)
{
    redis_store_t *rs = t->data;
    rs_connect(rs);
}

static void rs_schedule(redis_store_t *rs)
{
    if (rs->closing || rs->ac != NULL || rs->resolving ||
        uv_is_active((const uv_handle_t *)&rs->retry))
        return;
    uint64_t d = rs->backoff_ms;
    uint64_t delay = d / 2 + rs_rand(rs) % (d - d / 2 + 1);
    rs->backoff_ms = d * 2 < rs->backoff_max_ms ? d * 2 : rs->backoff_max_ms;
    rs->retry_at_ms = uv_now(rs->loop) + delay;
    uv_timer_start(&rs->retry, rs_on_retry, delay, 0);
}

/* Lost or dropped: report, and come back after the backoff. A context
 * still attached is freed here; one hiredis is tearing down already has
 * been detached by the caller (rs_lost). */
static void rs_drop(redis_store_t *rs, const char *what)
{
    redisAsyncContext *ac = rs_detach(rs);
    rs_degrade(rs, what);
    /* Inside a hiredis callback this only marks the context; hiredis frees
     * it, answering every outstanding request with a NULL reply, as soon
     * as that callback returns. */
    if (ac != NULL)
        redisAsyncFree(ac);
    rs_schedule(rs);
}

/* hiredis is freeing <ac> itself: forget it without freeing. */
static void rs_lost(redis_store_t *rs, const redisAsyncContext *ac, const char *what)
{
    if (ac != rs->ac)
        return;
    rs_detach(rs);
    rs_degrade(rs, what);
    rs_schedule(rs);
}

static void rs_on_connect(const redisAsyncContext *ac, int status)
{
    redis_store_t *rs = ac->data;
    if (status != REDIS_OK)
        rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connect failed");
}

static void rs_on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_store_t *rs = ac->data;
    (void)status;
    rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection closed");
}

/* Set-up step replies: an error ends the connection. */
static bool setup_reply_ok(redis_store_t *rs, redisAsyncContext *ac, const redisReply *r,
                           const char *step)
{
    if (ac != rs->ac)
        return false;
    if (r == NULL) {
        rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
        return false;
    }
    rs_alive(rs, ac);
    if (r->type == REDIS_REPLY_ERROR) {
        char what[220];
        snprintf(what, sizeof what, "%s failed: %.160s", step, r->str);
        rs_drop(rs, what);
        return false;
    }
    return true;
}

static void rs_on_auth(redisAsyncContext *ac, void *reply, void *privdata)
{
    setup_reply_ok(privdata, ac, reply, "AUTH");
}

static void rs_on_select(redisAsyncContext *ac, void *reply, void *privdata)
{
    setup_reply_ok(privdata, ac, reply, "SELECT");
}

static void rs_on_script_load(redisAsyncContext *ac, void *reply, void *privdata)
{
    const script_ctx_t *sc = privdata;
    redis_store_t *rs = sc->rs;
    const redisReply *r = reply;
    if (!setup_reply_ok(rs, ac, r, "SCRIPT LOAD"))
        return;
    if (!rs_take_sha(rs, sc->idx, r)) {
        rs_drop(rs, "SCRIPT LOAD: unexpected reply");
        return;
    }
    if (sc->idx + 1 < NSCRIPTS)
        return; /* set-up ends with the last script */
    rs->ready = true;
    rs->stats.sessions++;
    rs->backoff_ms = rs->backoff_initial_ms;
    uv_timer_stop(&rs->watchdog);
    rs_maybe_recovered(rs);
}

static void rs_on_watchdog(uv_timer_t *t)
{
    redis_store_t *rs = t->data;
    char what[96];
    if (rs->ac == NULL) {
        /* A connect that failed before it got going (rs_start). */
        rs_degrade(rs, rs->fail_what);
        rs_schedule(rs);
    } else if (!rs->ready) {
        snprintf(what, sizeof what, "connect and set-up took longer than %llu ms",
                 (unsigned long long)rs->connect_timeout_ms);
        rs_drop(rs, what);
    } else if (rs->stalled) {
        snprintf(what, sizeof what, "no reply for %llu ms", (unsigned long long)rs->dead_after_ms);
        rs_drop(rs, what);
    }
}

/* Start a connection to <addr> (IP literal) or the unix socket. */
static void rs_start(redis_store_t *rs, const char *addr)
{
    rs->stats.connects++;
    redisAsyncContext *ac = rs->url.is_unix ? redisAsyncConnectUnix(rs->url.path)
                                            : redisAsyncConnect(addr, rs->url.port);
    const char *fail = NULL;
    if (ac == NULL)
        fail = "out of memory";
    else if (ac->err)
        fail = ac->errstr;
    else if (rs_attach(rs, ac) < 0)
        fail = "cannot attach to the event loop";
    if (fail != NULL) {
        /* Reported from the loop, not from inside tg_store_open or a
         * caller's tg_store_take. */
        snprintf(rs->fail_what, sizeof rs->fail_what, "%s", fail);
        if (ac != NULL)
            redisAsyncFree(ac);
        uv_timer_start(&rs->watchdog, rs_on_watchdog, 0, 0);
        return;
    }
    ac->data = rs;
    redisAsyncSetConnectCallback(ac, rs_on_connect);
    redisAsyncSetDisconnectCallback(ac, rs_on_disconnect);
    rs->ac = ac;
    rs->ready = false;
    rs->stalled = false;
    /* Pipelined set-up: hiredis buffers these until the socket connects. */
    if (rs->url.password[0] != '\0') {
        if (rs->url.user[0] != '\0')
            redisAsyncCommand(ac, rs_on_auth, rs, "AUTH %s %s", rs->url.user, rs->url.password);
        else
            redisAsyncCommand(ac, rs_on_auth, rs, "AUTH %s", rs->url.password);
    }
    if (rs->url.db != 0)
        redisAsyncCommand(ac, rs_on_select, rs, "SELECT %u", rs->url.db);
    for (int i = 0; i < NSCRIPTS; i++)
        redisAsyncCommand(ac, rs_on_script_load, &rs->load_ctx[i], "SCRIPT LOAD %b",
                          scripts[i].body, scripts[i].len);
    uv_timer_start(&rs->watchdog, rs_on_watchdog, rs->connect_timeout_ms, 0);
}

static void rs_on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    redis_store_t *rs = g->data;
    rs->resolving = false;
    if (--rs->open_handles == 0) {
        /* Closed meanwhile, and every handle is gone already. */
        uv_freeaddrinfo(res);
        rs_free_all(rs);
        return;
    }
    if (rs->closing) {
        uv_freeaddrinfo(res);
        return;
    }
    /* Each attempt takes the next address, so a name with an address
     * that does not answer (localhost as ::1 with Redis on 127.0.0.1 only)
     * still reaches the one that does. */
    char ip[INET6_ADDRSTRLEN] = "";
    unsigned n = 0;
    for (const struct addrinfo *a = status == 0 ? res : NULL; a != NULL; a = a->ai_next)
        n += a->ai_family == AF_INET || a->ai_family == AF_INET6;
    const struct addrinfo *a = status == 0 ? res : NULL;
    for (unsigned skip = n > 0 ? rs->addr_turn++ % n : 0; a != NULL; a = a->ai_next) {
        if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
            continue;
        if (skip-- > 0)
            continue;
        const void *in = a->ai_family == AF_INET6
                             ? (const void *)&((const struct sockaddr_in6 *)a->ai_addr)->sin6_addr
                             : (const void *)&((const struct sockaddr_in *)a->ai_addr)->sin_addr;
        inet_ntop(a->ai_family, in, ip, sizeof ip);
        break;
    }
    uv_freeaddrinfo(res);
    if (ip[0] == '\0') {
        char what[160];
        snprintf(what, sizeof what, "cannot resolve host: %s",
                 status < 0 ? uv_strerror(status) : "no address");
        rs_degrade(rs, what);
        rs_schedule(rs);
        return;
    }
    rs_start(rs, ip);
}

static void rs_connect(redis_store_t *rs)
{
    if (rs->closing || rs->ac != NULL || rs->resolving)
        return;
    unsigned char tmp[16];
    if (rs->url.is_unix || inet_pton(AF_INET, rs->url.host, tmp) == 1 ||
        inet_pton(AF_INET6, rs->url.host, tmp) == 1) {
        rs_start(rs, rs->url.host);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(rs->loop, &rs->gai, rs_on_resolved, rs->url.host, NULL, &hints);
    if (rc != 0) {
        snprintf(rs->fail_what, sizeof rs->fail_what, "cannot resolve host: %s", uv_strerror(rc));
        uv_timer_start(&rs->watchdog, rs_on_watchdog, 0, 0);
        return;
    }
    rs->resolving = true;
    rs->open_handles++; /* the request holds the store like a handle */
}

/* ---- interface ---- */

/* Whether a take may go to Redis now; if not, <*status> says why. */
static bool rs_status(const redis_store_t *rs, int *status)
{
    *status = 0;
    if (rs->ac == NULL)
        *status = -ENOTCONN;
    else if (rs->stalled)
        *status = -ETIMEDOUT;
    else if (!rs->ready && rs->degraded)
        /* The first connection takes calls while it sets up (they queue
         * behind AUTH and SCRIPT LOAD); after a failure only a connection
         * that has proved itself does. */
        *status = -ENOTCONN;
    return *status == 0;
}

/* A request for a call when the connection takes calls now; NULL with
 * <*status> saying why not (rs_status, or -ENOBUFS: every request busy). */
static req_t *req_for_call(redis_store_t *rs, int *status)
{
    if (!rs_status(rs, status))
        return NULL;
    req_t *q = req_get(rs);
    if (q == NULL)
        *status = -ENOBUFS;
    return q;
}

/* Under a test clock, the time the script is to use instead of TIME. */
static void req_stamp(const redis_store_t *rs, req_t *q)
{
    if (rs->test_clock != NULL) {
        q->has_test_now = true;
        q->test_now_ms = rs->test_clock(rs->test_clock_arg);
    }
}

static int redis_submit(redis_store_t *rs, req_t *q, int *status)
{
    if (req_send(rs, q) < 0) {
        *status = -ECONNRESET;
        return -1;
    }
    uv_timer_start(&q->timer, req_on_timeout, rs->timeout_ms, 0);
    return 0;
}

static int redis_take(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                      uint32_t burst, uint32_t want, tg_store_take_cb cb, void *arg)
{
    redis_store_t *rs = (redis_store_t *)s;
    size_t n = strnlen(key, TG_STORE_KEY_MAX + 1);
    tg_gcra_t g;
    if (n == 0 || n > TG_STORE_KEY_MAX || want == 0 || want > TG_GCRA_MAX_BURST ||
        tg_gcra_init(&g, count, period_ms, burst) < 0)
        return -EINVAL;
    if (rs->closing)
        return -ECANCELED;
    int status;
    req_t *q = req_for_call(rs, &status);
    if (q != NULL) {
        q->kind = REQ_TAKE;
        q->cb.take = cb;
        q->arg = arg;
        q->count = count;
        q->period_ms = period_ms;
        q->burst = burst;
        q->n = want;
        q->cap = g.burst;
        memcpy(q->key, key, n + 1);
        req_stamp(rs, q);
        if (redis_submit(rs, q, &status) == 0)
            return 0;
        q->user_done = true;
        req_release(q);
    }
    tg_store_result_t r = rs_policy(rs, key, count, period_ms, burst, want, g.burst, status);
    cb(arg, &r);
    return 0;
}

static int redis_ping(tg_store_t *s, tg_store_ping_cb cb, void *arg)
{
    redis_store_t *rs = (redis_store_t *)s;
    if (rs->closing)
        return -ECANCELED;
    int status = rs->ac == NULL ? -ENOTCONN : -ETIMEDOUT;
    req_t *q = NULL;
    if (rs->ac != NULL && !rs->stalled) {
        q = req_get(rs);
        if (q == NULL)
            status = -ENOBUFS;
    }
    if (q != NULL) {
        q->kind = REQ_PING;
        q->cb.ping = cb;
        q->arg = arg;
        /* A ping is a probe: unlike a take it may go out on a connection
         * that is still setting up after a failure. */
        if (req_send(rs, q) == 0) {
            uv_timer_start(&q->timer, req_on_timeout, rs->timeout_ms, 0);
            return 0;
        }
        status = -ECONNRESET;
        q->user_done = true;
        req_release(q);
    }
    cb(arg, status);
    return 0;
}

/* ---- shared slots ---- */

static int redis_slot_acquire(tg_store_t *s, const char *key, uint32_t cap, tg_store_slot_cb cb,
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
    req_t *q = req_for_call(rs, &status);
    if (q != NULL) {
        q->kind = REQ_SLOT_ACQUIRE;
        q->cb.slot = cb;
        q->arg = arg;
        q->cap = cap;
        q->seq = seq;
        memcpy(q->key, key, n + 1);
        req_stamp(rs, q);
        if (redis_submit(rs, q, &status) == 0)
            return 0;
        q->user_done = true;
        req_release(q);
    }
    tg_store_slot_result_t r = rs_slot_policy(rs, key, cap, seq, status);
    cb(arg, &r);
    return 0;
}

static void redis_slot_release(tg_store_t *s, tg_store_slot_t *slot)
{
    redis_store_t *rs = (redis_store_t *)s;
    /* Sent whenever there is a connection, even a stalled one: it queues
     * behind the acquisition on the same connection, so it cannot overtake
     * it. Without one, the slot's lease ends it. */
    rs_slot_gone(rs, slot->k->key, slot->seq);
    tg_slots_remove(&rs->slots, slot);
    if (rs->slots.held == 0)
        uv_timer_stop(&rs->renew);
}

static uint64_t redis_slots_held(const tg_store_t *s)
{
    return ((const redis_store_t *)s)->slots.held;
}

static uint32_t redis_pending(const tg_store_t *s)
{
    return ((const redis_store_t *)s)->in_use;
}

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
        req_t *q = req_get(rs);
        if (q == NULL)
            return; /* the pool is busy: the next tick tries again */
        q->kind = REQ_SLOT_RENEW;
        q->cb.slot = NULL;
        q->arg = NULL;
        memcpy(q->key, k->key, strlen(k->key) + 1);
        q->mbuf = rs_members(rs, from, &q->nmem, &from);
        req_stamp(rs, q);
        int status;
        if (q->mbuf == NULL || redis_submit(rs, q, &status) < 0) {
            q->user_done = true;
            req_release(q);
            return;
        }
    }
}

static void rs_renew_all(redis_store_t *rs)
{
    int status;
    if (rs->closing || rs->slots.held == 0 || !rs_status(rs, &status))
        return;
    tg_slots_each(&rs->slots, rs_renew_key, rs);
}

static void rs_on_renew(uv_timer_t *t)
{
    rs_renew_all(t->data);
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
static redisAsyncContext *rs_release_all(redis_store_t *rs, redisAsyncContext *ac)
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
    rs_poll_t *p = ac->ev.data;
    redisAsyncHandleWrite(ac);
    return p->ac != NULL ? ac : NULL;
}

static void rs_free_all(redis_store_t *rs)
{
    req_t *q = rs->all;
    while (q != NULL) {
        req_t *next = q->next_all;
        free(q->mbuf);
        free(q);
        q = next;
    }
    tg_slots_free(&rs->slots);
    tg_store_close_cb cb = rs->close_cb;
    void *arg = rs->close_arg;
    free(rs);
    if (cb != NULL)
        cb(arg);
}

static void rs_on_timer_closed(uv_handle_t *h)
{
    redis_store_t *rs = h->data;
    if (--rs->open_handles == 0)
        rs_free_all(rs);
}

static void req_on_timer_closed(uv_handle_t *h)
{
    redis_store_t *rs = ((req_t *)h->data)->rs;
    if (--rs->open_handles == 0)
        rs_free_all(rs);
}

static void redis_close(tg_store_t *s, tg_store_close_cb cb, void *arg)
{
    redis_store_t *rs = (redis_store_t *)s;
    if (rs->closing)
        return;
    /* Closing first: a caller answered below cannot start new calls.
     * Then answer everyone, while the fallback still exists. */
    rs->closing = true;
    rs->close_cb = cb;
    rs->close_arg = arg;
    for (req_t *q = rs->all; q != NULL; q = q->next_all)
        req_fail(q, -ECANCELED);
    bool connected = rs->ready;
    redisAsyncContext *ac = rs_detach(rs);
    if (ac != NULL && connected)
        ac = rs_release_all(rs, ac);
    if (ac != NULL)
        redisAsyncFree(ac);
    if (rs->resolving)
        uv_cancel((uv_req_t *)&rs->gai);
    for (req_t *q = rs->all; q != NULL; q = q->next_all)
        uv_close((uv_handle_t *)&q->timer, req_on_timer_closed);
    uv_close((uv_handle_t *)&rs->watchdog, rs_on_timer_closed);
    uv_close((uv_handle_t *)&rs->retry, rs_on_timer_closed);
    uv_close((uv_handle_t *)&rs->renew, rs_on_timer_closed);
    if (rs->fallback != NULL)
        tg_store_close(rs->fallback, NULL, NULL);
    rs->fallback = NULL;
    tg_store_url_wipe(&rs->url);
}

int tg_store_redis_stats(const tg_store_t *s, tg_store_redis_stats_t *out)
{
    if (s->ops->take != redis_take)
        return -EINVAL;
    *out = ((const redis_store_t *)s)->stats;
    return 0;
}

static const tg_store_ops_t redis_ops = {
    .kind = "redis",
    .take = redis_take,
    .ping = redis_ping,
    .close = redis_close,
    .slot_acquire = redis_slot_acquire,
    .slot_release = redis_slot_release,
    .slots_held = redis_slots_held,
    .pending = redis_pending,
};

int tg_store_redis_open(uv_loop_t *loop, const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err)
{
    if (loop == NULL || o->url == NULL) {
        return tg_err_set(err, -1, "store: redis needs an event loop and a url");
    }
    redis_store_t *rs = calloc(1, sizeof *rs);
    if (rs == NULL) {
        return tg_err_set(err, -1, "store: out of memory");
    }
    if (tg_store_url_parse(&rs->url, o->url, err) < 0) {
        free(rs);
        return -1;
    }
    /* The local store validates the prefix and is the fallback's table. */
    tg_store_opts_t lo = *o;
    lo.kind = TG_STORE_LOCAL;
    if (tg_store_local_open(&lo, &rs->fallback, err) < 0) {
        tg_store_url_wipe(&rs->url);
        free(rs);
        return -1;
    }
    if (tg_slots_init(&rs->slots, o->instance,
                      o->local_max_keys != 0 ? o->local_max_keys : TG_STORE_DEF_LOCAL_MAX_KEYS) < 0) {
        tg_store_close(rs->fallback, NULL, NULL);
        tg_store_url_wipe(&rs->url);
        free(rs);
        return tg_err_set(err, -1, "store: out of memory");
    }
    rs->base.ops = &redis_ops;
    memcpy(rs->base.prefix, rs->fallback->prefix, sizeof rs->base.prefix);
    tg_store_url_redact(&rs->url, rs->base.name, sizeof rs->base.name);
    rs->loop = loop;
    rs->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : TG_STORE_DEF_TIMEOUT_MS;
    rs->connect_timeout_ms =
        o->connect_timeout_ms != 0 ? o->connect_timeout_ms : TG_STORE_DEF_CONNECT_TIMEOUT_MS;
    rs->dead_after_ms = o->dead_after_ms != 0 ? o->dead_after_ms : TG_STORE_DEF_DEAD_AFTER_MS;
    rs->backoff_initial_ms =
        o->backoff_initial_ms != 0 ? o->backoff_initial_ms : TG_STORE_DEF_BACKOFF_INITIAL_MS;
    rs->backoff_max_ms = o->backoff_max_ms != 0 ? o->backoff_max_ms : TG_STORE_DEF_BACKOFF_MAX_MS;
    if (rs->backoff_max_ms < rs->backoff_initial_ms)
        rs->backoff_max_ms = rs->backoff_initial_ms;
    rs->backoff_ms = rs->backoff_initial_ms;
    rs->max_pending = o->max_pending != 0 ? o->max_pending : TG_STORE_DEF_MAX_PENDING;
    rs->slot_lease_ms = o->slot_lease_ms != 0 ? o->slot_lease_ms : TG_STORE_DEF_SLOT_LEASE_MS;
    rs->policy = o->on_store_error;
    rs->instances = o->instances != 0 ? o->instances : 1;
    rs->on_event = o->on_event;
    rs->event_arg = o->event_arg;
    rs->test_clock = o->test_script_clock_ms;
    rs->test_clock_arg = o->test_script_clock_arg;
    rs->rng = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)rs;
    if (rs->rng == 0)
        rs->rng = 1;
    uv_timer_init(loop, &rs->watchdog);
    uv_timer_init(loop, &rs->retry);
    uv_timer_init(loop, &rs->renew);
    rs->watchdog.data = rs;
    rs->retry.data = rs;
    rs->renew.data = rs;
    rs->gai.data = rs;
    for (int i = 0; i < NSCRIPTS; i++)
        rs->load_ctx[i] = (script_ctx_t){rs, i};
    rs->open_handles = 3;
    rs_connect(rs);
    *out = &rs->base;
    return 0;
}
