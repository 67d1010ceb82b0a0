/* Rate stores: where GCRA buckets live, behind one async call.
 *
 * A store decides "may one more call with this key pass now?" for a
 * limit of <count> calls per <period_ms> with burst <burst> (0 = count),
 * exactly as limits/gcra.h does. Two backends sit behind the table of
 * functions below (STYLE.md habit 5):
 *   local  in-process buckets (store_local.c): the default, needs nothing
 *          running; decides synchronously.
 *   redis  one shared Redis (store_redis*.c): every toolgate pointed at the
 *          same Redis shares the bucket, so a limit holds for a fleet
 *          ("shared_mode": "exact": one round trip per call).
 * and a view over a store:
 *   lease  (store_lease.c, "shared_mode": "lease"): tokens taken from the
 *          shared bucket in small batches and spent locally; admission at
 *          local speed, never over the shared limit, bounded
 *          under-admission. One redis store serves exact and lease limits.
 *
 * Callback timing: tg_store_take() may run <cb> before it returns. The
 * local store always does; the redis store does when it decides without a
 * round trip (the store is degraded, or too many calls are in flight); the
 * lease store does when the call spends a token it already holds.
 * Callers must therefore not hold state across tg_store_take() that the
 * callback invalidates. <cb> runs exactly once for every take that returned
 * 0, and never for one that returned an error.
 *
 * Failure policy (redis store): a call that Redis does not answer within
 * its own timer (default 50 ms), or that fails, is decided by
 * <on_store_error>: a local bucket with this instance's share of the limit
 * (count / instances, at least 1), open (allow) or closed (refuse; the
 * router denies with rate_store_unavailable). The result says which one
 * decided (decided_by) and why (status). The move into and out of that
 * state is reported once each through <on_event> (store.degraded /
 * store.recovered in the audit trail). On the way back, the shared
 * buckets are charged with what the local ones admitted, and the
 * reconnect delay is at most backoff_max_ms: store_redis_conn.c,
 * "Recovery", states the bound.
 *
 * Key layout (Redis): "<prefix>{<agent>}:<limit>", e.g.
 * "tg:{search}:tool:web". The braces are a Redis Cluster hash tag: only
 * "search" is hashed, so every key of one agent lives in one slot and a
 * script may touch several of them atomically. The prefix must not contain
 * braces (it would become the tag), nor the agent a '}'. tg_store_key()
 * builds such keys; the local store accepts the same keys.
 *
 * Shared concurrency slots (tg_store_slot_acquire, below): besides
 * buckets, a store holds slots, a fleet-wide cap on calls in flight
 * ("concurrency_scope": "shared"). The redis store keeps one sorted set
 * per limit key, "<prefix>{<agent>}:slots", whose members are the slots
 * held ("<instance>:<random>:<n>", unique across the fleet) scored by when
 * they expire on the server's clock. A slot is leased: it expires
 * slot_lease_ms after it was taken or last renewed, and the store renews
 * every slot it holds every slot_lease_ms / 3 (one script call per key),
 * so the slots of a toolgate that crashed free themselves within one
 * lease. Acquire, renew and release ride the same connection, timers and
 * failure policy as takes; under on_store_error=local a slot is granted
 * while this instance holds fewer than its share of the cap under that
 * key (tg_store_share). Slots granted by the policy are written to Redis
 * by the next renewal once it answers again, so the fleet's count is
 * accurate after an outage; a renewal likewise puts back a slot that
 * expired while Redis was away, because its call is still running.
 *
 * Error conventions: runtime calls (take, ping, close) return 0 or a
 * negative errno; setup calls (open, URL parsing) return 0 or -1 and fill
 * <err> on failure only (config/config.h), never with a password in it.
 *
 * Ownership: tg_store_open() returns a store the caller owns; release it
 * with tg_store_close(), whose callback says when its memory is gone (the
 * redis store must first close its libuv handles). A store must not be
 * used after tg_store_close().
 */
#ifndef TG_LIMITS_STORE_H
#define TG_LIMITS_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "limits/gcra.h"

/* Fixed internal bounds. */
#define TG_STORE_KEY_MAX  512  /* fixed internal bound: bytes of one key, NUL excluded */
#define TG_STORE_URL_MAX  1024 /* fixed internal bound: bytes of a store URL */
#define TG_STORE_HOST_MAX 256  /* fixed internal bound: bytes of a host name, NUL included */
#define TG_STORE_CRED_MAX 256  /* fixed internal bound: bytes of a user or password after %-decoding, NUL included */
#define TG_STORE_PATH_MAX 108  /* bytes of a unix socket path, NUL included (sun_path) */
#define TG_STORE_DB_MAX   2147483647 /* Redis database index */

/* Defaults, used when the matching option is 0. */
#define TG_STORE_DEF_TIMEOUT_MS         50    /* one store call */
/* The other store defaults, with their ceilings, are in config/config.h
 * (store.* sets them). */
#define TG_STORE_DEF_PREFIX             "tg:"

typedef struct tg_store tg_store_t;

typedef enum tg_store_kind {
    TG_STORE_LOCAL = 0,
    TG_STORE_REDIS,
} tg_store_kind_t;

/* on_store_error. */
typedef enum tg_store_policy {
    TG_STORE_POLICY_LOCAL = 0, /* default */
    TG_STORE_POLICY_OPEN,
    TG_STORE_POLICY_CLOSED,
} tg_store_policy_t;

/* Who decided one call. */
typedef enum tg_store_decider {
    TG_STORE_BY_STORE = 0,      /* the configured store (local buckets, or Redis) */
    TG_STORE_BY_LOCAL_FALLBACK, /* on_store_error=local: this instance's share */
    TG_STORE_BY_OPEN,           /* on_store_error=open: allowed unchecked */
    TG_STORE_BY_CLOSED,         /* on_store_error=closed: refused */
} tg_store_decider_t;

typedef struct tg_store_result {
    /* The decision. BY_OPEN: allowed, observed 0, remaining 0. BY_CLOSED:
     * refused, observed 0, retry_after_ms a hint for when the store may be
     * back (not a bucket computation). cap is the burst in every case.
     * For a take of <n> tokens (tg_store_take_n): allowed when at least
     * one was granted; observed and remaining as seen by the last granted
     * token (by the refused call when none was); retry_after_ms the wait
     * for one more token when fewer than <n> were granted, else 0. */
    tg_gcra_result_t gcra;
    uint32_t granted; /* tokens granted: 0..n (0 or 1 for tg_store_take) */
    tg_store_decider_t decided_by;
    /* 0 when decided_by is BY_STORE; otherwise why the store could not
     * decide: -ETIMEDOUT (no reply in time, or the connection is stalled),
     * -ENOTCONN (not connected), -ECONNRESET (connection lost with the call
     * in flight), -EPROTO (an error or malformed reply), -ENOBUFS (too many
     * calls in flight), -ENOSPC (local table full of live buckets),
     * -ECANCELED (the store was closed). */
    int status;
} tg_store_result_t;

typedef void (*tg_store_take_cb)(void *arg, const tg_store_result_t *r);

/* What taking <n> tokens from <g> at <now> means: <n> GCRA takes in a row,
 * stopping at the first refusal (the definition every store implements:
 * the local one by calling this, the Redis script in Lua; tests compare
 * the two). */
tg_store_result_t tg_store_gcra_take_n(tg_gcra_t *g, uint64_t now, uint32_t n);

/* One slot held by this store instance (store_slots.h); owned by the
 * store until tg_store_slot_release(). */
typedef struct tg_store_slot tg_store_slot_t;

typedef struct tg_store_slot_result {
    bool granted;
    /* Slots held under the key as the decider saw them, this one included
     * when granted: fleet-wide from Redis, this instance's under
     * on_store_error=local or open, 0 when refused closed. */
    uint64_t holders;
    /* The cap applied: the one asked for, or this instance's share of it
     * under on_store_error=local. */
    uint64_t cap;
    tg_store_slot_t *slot; /* granted: release it with tg_store_slot_release */
    tg_store_decider_t decided_by;
    int status; /* as in tg_store_result_t */
} tg_store_slot_result_t;

typedef void (*tg_store_slot_cb)(void *arg, const tg_store_slot_result_t *r);
typedef void (*tg_store_ping_cb)(void *arg, int status);
typedef void (*tg_store_close_cb)(void *arg);

typedef enum tg_store_event {
    TG_STORE_EV_DEGRADED = 1,
    TG_STORE_EV_RECOVERED,
} tg_store_event_t;

/* <reason> names the store by its redacted URL and says what happened
 * ("redis://app:***@10.0.0.5:6379/0: connection refused"); it is borrowed
 * for the duration of the call. The store may be closed from inside. */
typedef void (*tg_store_event_cb)(void *arg, tg_store_event_t ev, const char *reason);

/* Clock in milliseconds. */
typedef uint64_t (*tg_store_clock_fn)(void *arg);

/* Options; zero-initialise and set what differs from the defaults. */
typedef struct tg_store_opts {
    tg_store_kind_t kind;
    const char *url;             /* redis: redis://... or unix:... (see tg_store_url_parse) */
    const char *prefix;          /* key prefix; NULL = TG_STORE_DEF_PREFIX */
    uint64_t timeout_ms;         /* one call; 0 = TG_STORE_DEF_TIMEOUT_MS */
    uint64_t connect_timeout_ms; /* 0 = TG_STORE_DEF_CONNECT_TIMEOUT_MS */
    uint64_t dead_after_ms;      /* 0 = TG_STORE_DEF_DEAD_AFTER_MS */
    uint64_t backoff_initial_ms; /* 0 = TG_STORE_DEF_BACKOFF_INITIAL_MS */
    uint64_t backoff_max_ms;     /* 0 = TG_STORE_DEF_BACKOFF_MAX_MS */
    uint32_t max_pending;        /* calls in flight; 0 = TG_STORE_DEF_MAX_PENDING */
    uint32_t local_max_keys;     /* buckets per local table; 0 = TG_STORE_DEF_LOCAL_MAX_KEYS */
    tg_store_policy_t on_store_error;
    uint32_t instances; /* expected instances sharing the limit; 0 = 1 */
    uint64_t lease_ms;  /* lease mode: lease lifetime; 0 = TG_STORE_DEF_LEASE_MS */
    uint64_t slot_lease_ms; /* shared slots: lifetime without renewal; 0 = TG_STORE_DEF_SLOT_LEASE_MS */
    const char *instance;   /* names this toolgate in slot members; NULL = "toolgate" */
    tg_store_event_cb on_event;
    void *event_arg;
    /* Clock of the local buckets (store and fallback); NULL = CLOCK_MONOTONIC. */
    tg_store_clock_fn clock_ms;
    void *clock_arg;
    /* Tests only: when set, the redis store passes this clock's "now" to
     * the script instead of letting it read the server's TIME, so that a
     * call sequence can be replayed against tg_gcra_take. Production
     * leaves it NULL: host clocks must not matter for shared limits. */
    tg_store_clock_fn test_script_clock_ms;
    void *test_script_clock_arg;
} tg_store_opts_t;

/* The interface each backend implements. */
typedef struct tg_store_ops {
    const char *kind;
    int (*take)(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms, uint32_t burst,
                uint32_t n, tg_store_take_cb cb, void *arg);
    int (*ping)(tg_store_t *s, tg_store_ping_cb cb, void *arg);
    void (*close)(tg_store_t *s, tg_store_close_cb cb, void *arg);
    /* Shared slots; NULL in a store without them (lease). */
    int (*slot_acquire)(tg_store_t *s, const char *key, uint32_t cap, tg_store_slot_cb cb,
                        void *arg);
    void (*slot_release)(tg_store_t *s, tg_store_slot_t *slot);
    uint64_t (*slots_held)(const tg_store_t *s);
    /* Calls waiting for an answer (NULL: never any). */
    uint32_t (*pending)(const tg_store_t *s);
} tg_store_ops_t;

/* Common head of every backend's struct. */
struct tg_store {
    const tg_store_ops_t *ops;
    char prefix[64];
    char name[TG_STORE_URL_MAX]; /* "local", or the redacted URL */
};

/* Open a store of <o->kind>. <loop> may be NULL for the local store. The
 * redis store starts connecting at once and returns before it is
 * connected; calls made meanwhile are queued on the connection. 0, or -1
 * with <err> filled (bad URL, bad prefix, out of memory). */
int tg_store_open(uv_loop_t *loop, const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err);
int tg_store_local_open(const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err);
int tg_store_redis_open(uv_loop_t *loop, const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err);

/* Decide one call against the bucket <key> (NUL-terminated, at most
 * TG_STORE_KEY_MAX bytes). 0 when <cb> has run or will run exactly once;
 * -EINVAL (bad key or limit: see tg_gcra_init) when it will not run. */
static inline int tg_store_take(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                                uint32_t burst, tg_store_take_cb cb, void *arg)
{
    return s->ops->take(s, key, count, period_ms, burst, 1, cb, arg);
}

/* Take up to <n> tokens at once (1 <= n <= TG_GCRA_MAX_BURST): as many as
 * the bucket has now, the same as up to <n> takes in a row at one instant
 * (granted in the result). Lease mode uses it; the lease store itself
 * accepts only n = 1 (-EINVAL otherwise). */
static inline int tg_store_take_n(tg_store_t *s, const char *key, uint64_t count,
                                  uint64_t period_ms, uint32_t burst, uint32_t n,
                                  tg_store_take_cb cb, void *arg)
{
    return s->ops->take(s, key, count, period_ms, burst, n, cb, arg);
}

/* The local store's decision, synchronously, into <out> (its take is this
 * plus the callback). 0, or -EINVAL as for tg_store_take. <s> must be a
 * local store. */
int tg_store_local_take_sync(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                             uint32_t burst, uint32_t n, tg_store_result_t *out);
/* The same for a limit shared by <instances> instances (0 = 1): the
 * bucket enforces this instance's share, count and burst divided by
 * <instances> (tg_store_share), and remembers the limit as asked for
 * tg_store_local_debts. The redis store's on_store_error=local fallback. */
int tg_store_local_take_share(tg_store_t *s, const char *key, uint64_t count, uint64_t period_ms,
                              uint32_t burst, uint32_t instances, uint32_t n,
                              tg_store_result_t *out);

/* Visit every bucket of local store <s> whose TAT is still ahead of now:
 * <fn> gets its key, the limit as asked (count, period_ms, burst) and how
 * far ahead of now its TAT is, in microseconds (what its admissions still
 * weigh: the bucket is full again that much later). <fn> must not use <s>.
 * Returns the number visited (0 for another kind of store). */
typedef void (*tg_store_local_debt_fn)(void *arg, const char *key, uint64_t count,
                                       uint64_t period_ms, uint32_t burst, uint64_t ahead_us);
size_t tg_store_local_debts(tg_store_t *s, tg_store_local_debt_fn fn, void *arg);

/* Buckets held by local store <s>. */
size_t tg_store_local_size(const tg_store_t *s);

/* Check the store answers (toolgate check): <cb> gets 0, or the negative
 * errno a take would have failed with. Same timing rules as take. */
static inline int tg_store_ping(tg_store_t *s, tg_store_ping_cb cb, void *arg)
{
    return s->ops->ping(s, cb, arg);
}

/* Release the store. Calls still in flight complete first, with status
 * -ECANCELED and the failure policy applied. <cb> (may be NULL) runs once
 * all memory is released: synchronously for the local store, from the loop
 * for the redis store. */
static inline void tg_store_close(tg_store_t *s, tg_store_close_cb cb, void *arg)
{
    s->ops->close(s, cb, arg);
}

/* ---- shared concurrency slots ---- */

/* Take one slot of the fleet-wide cap <cap> (1..TG_MAX_CONCURRENT_CEIL)
 * under <key> (as for tg_store_take; the session uses
 * "<prefix>{<agent>}:slots"). <cb> runs exactly once, maybe before this
 * returns (local store, degraded redis store), with the slot when
 * granted. A granted slot is held, and renewed, until
 * tg_store_slot_release() or the store's close (which removes the slots
 * still held, from Redis too: the slot pointers die with the store).
 * 0; -EINVAL (bad key or cap), -ENOTSUP (a store without slots) or
 * -ECANCELED (closing): <cb> will not run. */
static inline int tg_store_slot_acquire(tg_store_t *s, const char *key, uint32_t cap,
                                        tg_store_slot_cb cb, void *arg)
{
    if (s->ops->slot_acquire == NULL)
        return -ENOTSUP;
    return s->ops->slot_acquire(s, key, cap, cb, arg);
}

/* Give back <slot> (from this store). The redis store removes it from the
 * sorted set without waiting for the answer; a release Redis never sees
 * (no connection then) frees itself when its lease ends. */
static inline void tg_store_slot_release(tg_store_t *s, tg_store_slot_t *slot)
{
    if (slot != NULL && s->ops->slot_release != NULL)
        s->ops->slot_release(s, slot);
}

/* Slots this store instance holds, over all keys. */
static inline uint64_t tg_store_slots_held(const tg_store_t *s)
{
    return s->ops->slots_held != NULL ? s->ops->slots_held(s) : 0;
}

/* Calls waiting for the store's answer: the bound is max_pending. */
static inline uint32_t tg_store_pending(const tg_store_t *s)
{
    return s->ops->pending != NULL ? s->ops->pending(s) : 0;
}

/* How often a store renews its slots: every <lease_ms> / 3 (at least
 * 1 ms), so that two renewals in a row may fail before a slot lapses. */
uint64_t tg_store_slot_renew_ms(uint64_t lease_ms);

/* The Lua text of the redis store's slot script (store_redis.c documents
 * its arguments), for tests. */
const char *tg_store_redis_slots_script(void);

/* Counters of a redis store, for metrics and tests. */
typedef struct tg_store_redis_stats {
    uint64_t connects;  /* connection attempts */
    uint64_t sessions;  /* connections that finished set-up */
    uint64_t sent;      /* commands written for calls (incl. EVAL re-sends) */
    uint64_t timeouts;  /* calls whose timer fired */
    uint64_t noscript;  /* calls re-sent as EVAL after NOSCRIPT */
    uint64_t by_policy; /* calls decided by on_store_error */
    uint64_t degraded;  /* store.degraded transitions */
    uint64_t slot_acquires; /* slot acquisitions sent */
    uint64_t slot_renewals; /* renewal script calls sent */
    uint64_t slot_readded;  /* slots a renewal found lapsed and put back */
    uint64_t slot_releases; /* ZREMs sent (calls ended, store closed) */
    uint64_t slot_orphans;  /* slots Redis granted after the policy had answered: removed */
    uint64_t charges;       /* recovery charges sent: buckets the fallback admitted from */
    uint64_t charges_lost;  /* recovery charges not sent: every request busy */
} tg_store_redis_stats_t;

/* Copy the counters of redis store <s>; 0, or -EINVAL for another kind. */
int tg_store_redis_stats(const tg_store_t *s, tg_store_redis_stats_t *out);

/* ---- lease mode (store_lease.c) ---- */

/* Open a lease view over <backing> (normally the redis store): calls on it
 * spend tokens leased from <backing> in batches (store_lease.c documents
 * the bounds). It does not own <backing>, which must outlive it: close the
 * lease store first. Options used: lease_ms, instances, local_max_keys,
 * max_pending, clock_ms. Takes of n = 1 only. 0, or -1 with <err>. */
int tg_store_lease_open(tg_store_t *backing, const tg_store_opts_t *o, tg_store_t **out,
                        tg_err_t *err);

typedef struct tg_store_lease_stats {
    uint64_t local;   /* calls decided from leased tokens, without a round trip */
    uint64_t batches; /* batches asked of the backing store */
    uint64_t granted; /* tokens granted in them */
    uint64_t expired; /* granted tokens dropped unspent (lease expired, limit changed) */
    uint64_t direct;  /* calls sent on their own (no room for another lease or waiter) */
} tg_store_lease_stats_t;

/* Copy the counters of lease store <s>; 0, or -EINVAL for another kind. */
int tg_store_lease_stats(const tg_store_t *s, tg_store_lease_stats_t *out);

/* Tokens to ask for in one batch (pure): every waiting call (at most
 * <cap>), or what this instance would spend during one lease of
 * <lease_ms> at <rate_per_ms> (< 0: unknown) if more, the latter at most
 * max(1, cap / (2 * instances)). At least 1. */
uint32_t tg_store_lease_batch(uint32_t cap, uint32_t instances, double rate_per_ms,
                              uint64_t lease_ms, uint32_t waiting);

/* The Lua text of the redis store's GCRA script (store_redis.c documents
 * its arguments), for tests and for benchmarking it with redis-benchmark. */
const char *tg_store_redis_script(void);

/* "local", or the redis URL with the password replaced by "***". */
static inline const char *tg_store_name(const tg_store_t *s)
{
    return s->name;
}

/* Build "<prefix>{<agent>}:<limit>" into <buf> (<cap> bytes). Returns the
 * length, -EINVAL when <prefix> holds a brace, <agent> is empty or holds a
 * brace, or -ENAMETOOLONG when the key exceeds TG_STORE_KEY_MAX or <cap>. */
int tg_store_key(char *buf, size_t cap, const char *prefix, const char *agent, const char *limit);

/* Same with the prefix of store <s>. */
static inline int tg_store_make_key(const tg_store_t *s, char *buf, size_t cap, const char *agent,
                                    const char *limit)
{
    return tg_store_key(buf, cap, s->prefix, agent, limit);
}

/* CLOCK_MONOTONIC in ms: the default tg_store_clock_fn (<arg> unused). */
uint64_t tg_store_mono_ms(void *arg);

/* "store", "local_fallback", "open", "closed" (audit field values). */
const char *tg_store_decider_name(tg_store_decider_t d);
/* "local", "open", "closed". */
const char *tg_store_policy_name(tg_store_policy_t p);
/* Parse "local" | "open" | "closed"; 0 or -EINVAL. */
int tg_store_policy_parse(const char *s, tg_store_policy_t *out);

/* The decision of policy <p> when the store could not decide, for a take
 * of <n> tokens from a limit of burst <cap> (effective: count when 0);
 * <retry_hint_ms> used when refusing. Not for TG_STORE_POLICY_LOCAL, which
 * needs a bucket (anything but OPEN refuses). */
tg_store_result_t tg_store_policy_result(tg_store_policy_t p, int status, uint64_t cap, uint32_t n,
                                         uint64_t retry_hint_ms);

/* The share of a limit one of <instances> instances enforces alone:
 * <n> / <instances>, at least 1 (also for burst: 0 stays 0 = count). */
uint64_t tg_store_share(uint64_t n, uint32_t instances);

/* ---- Redis URLs (store_url.c, pure) ---- */

typedef struct tg_store_url {
    bool is_unix;
    char host[TG_STORE_HOST_MAX];     /* name or IP literal (IPv6 without brackets) */
    uint16_t port;                    /* default 6379 */
    char path[TG_STORE_PATH_MAX];     /* unix socket */
    char user[TG_STORE_CRED_MAX];     /* "" = none: AUTH <password> (or no AUTH) */
    char password[TG_STORE_CRED_MAX]; /* "" = no AUTH */
    uint32_t db;                      /* SELECT when not 0 */
} tg_store_url_t;

/* Parse
 *   redis://[[user]:password@]host[:port][/db]   (host may be [IPv6])
 *   unix:/path[?db=N]
 *   unix://[[user]:password@]/path[?db=N]
 * user and password are %-decoded. 0, or -1 with <err> filled; the message
 * quotes the URL only in redacted form. */
int tg_store_url_parse(tg_store_url_t *u, const char *url, tg_err_t *err);

/* Write the normalised URL of <u> with the password as "***" (always
 * NUL-terminated, truncated to <cap>). Returns the untruncated length. */
size_t tg_store_url_redact(const tg_store_url_t *u, char *buf, size_t cap);

/* Redact a raw URL string that may not parse: everything between "//" and
 * the last '@' of the authority becomes "***", and the value of a
 * "password=" query parameter too. Same return as above. */
size_t tg_store_url_redact_str(const char *url, char *buf, size_t cap);

/* Wipe the credentials held in <u>. */
void tg_store_url_wipe(tg_store_url_t *u);

#endif
