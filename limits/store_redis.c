/* The redis store: shared GCRA buckets in one Redis (exact mode).
 *
 * This file owns the store's calls: the two Lua scripts, the request pool,
 * sending take, ping and slot calls and reading their replies, the failure
 * policy for takes, and open and close. The connection (set-up, health,
 * backoff, resolution) is store_redis_conn.c; shared concurrency slots are
 * store_redis_slots.c; store_redis_impl.h holds what the three share.
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
 * come back in order. Set-up is pipelined too (store_redis_conn.c): AUTH
 * [user] password, SELECT db, SCRIPT LOAD, then any calls made meanwhile
 * (sent as EVAL until the script's SHA is known).
 *
 * Timeouts: hiredis 0.14 has none for async calls, so every call carries
 * its own uv timer (timeout_ms, default 50; a recovery charge, which
 * nobody waits for, has none: store_redis_conn.c, "Recovery"). When it
 * fires the caller gets the failure policy at once and the request is
 * marked done; its reply, if it ever comes, is dropped (Redis did count
 * that call: a timeout can only make the fleet admit less, never more).
 * The request's memory stays with
 * hiredis until hiredis hands it back (reply or connection teardown).
 * While the store is degraded (store_redis_conn.c says when) calls are
 * decided by the policy at once, without a round trip, so an outage adds
 * no latency.
 *
 * An error reply to a call (other than NOSCRIPT: OOM, LOADING, READONLY,
 * NOAUTH...) also drops the connection: set-up on a new connection is the
 * one place that proves the server can serve again.
 *
 * Ownership: the store owns its requests (pooled, each with a uv timer
 * initialised once), three timers, the getaddrinfo request, the fallback
 * local store, the slot table and the hiredis context. Memory is released
 * after the last libuv close callback (tg__rs_free_all). hiredis callbacks
 * always find the request they were given alive, because nothing is freed
 * before hiredis has handed back every request (a context is only ever
 * freed through redisAsyncFree, which runs the outstanding callbacks
 * first).
 */
#include "limits/store_redis_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The GCRA of limits/gcra.c, in integer microseconds held in Lua doubles
 * (exact below 2^53, and gcra.h keeps every value below that).
 * KEYS[1]  bucket; its value is TAT in microseconds of the server clock.
 * ARGV[1]  count   ARGV[2] period_ms   ARGV[3] burst (0 = count)
 * ARGV[4]  n: tokens wanted (1 for one call; lease mode asks for more)
 * ARGV[5]  optional: "now" in ms, for tests replaying a call sequence
 *          ("" or absent: production reads TIME). With it the key's TTL is
 *          a fixed 10 minutes, because the test clock and the server's
 *          expiry clock are unrelated.
 * ARGV[6]  optional: a floor in microseconds, the recovery charge. Before
 *          deciding, TAT becomes at least now + floor, the floor capped at
 *          tau + T (a bucket just drained): calls this instance admitted
 *          on its local share while Redis was away, scaled to the fleet
 *          (store_redis_conn.c, "Recovery"). With a floor, n may be 0:
 *          charge only, take nothing.
 * Returns {granted, retry_after_ms, observed, cap, remaining}: granted k =
 * min(n, tokens available now), exactly what k calls in a row would get
 * (for n = 1: {allowed, ...} as tg_gcra_take); observed and remaining as
 * the last granted call sees them; retry_after_ms the wait for one more
 * token when k < n, else 0.
 * T rounds up, as in gcra.c. idiv corrects floor(a / b) by one either way:
 * the double quotient of two exact integers can round across an integer.
 * The key expires when its TAT passes (after = backlog + k T, at most
 * tau + T), from which point an absent key decides the same; a floor that
 * refuses every token is written all the same.
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
    "local test_now = ARGV[5] ~= nil and ARGV[5] ~= ''\n"
    "local floor_us = tonumber(ARGV[6] or '0')\n"
    "if not count or not period_ms or not burst or not n or count < 1 or period_ms < 1\n"
    "   or burst < 0 or n < 0 or (n < 1 and not ARGV[6]) or count > 1e6 or burst > 1e6\n"
    "   or n > 1e6 or period_ms > 1125899906842 or not floor_us or floor_us < 0 then\n"
    "  return redis.error_reply('ERR toolgate gcra: bad arguments')\n"
    "end\n"
    "if burst == 0 then burst = count end\n"
    "local t_us = cdiv(period_ms * 1000, count)\n"
    "local tau_us = t_us * (burst - 1)\n"
    "local now_us\n"
    "if test_now then\n"
    "  now_us = math.min(tonumber(ARGV[5]), 4503599627370) * 1000\n"
    "else\n"
    "  local tm = redis.call('TIME')\n"
    "  now_us = math.min(tonumber(tm[1]) * 1000000 + tonumber(tm[2]), 4503599627370496)\n"
    "end\n"
    "local tat = now_us\n"
    "local stored = tonumber(redis.call('GET', KEYS[1]) or '')\n"
    "if stored and stored > now_us then tat = stored end\n"
    "local floored = now_us + math.min(floor_us, tau_us + t_us)\n"
    "local raised = floored > tat\n"
    "if raised then tat = floored end\n"
    "local function put(v, ttl_us)\n"
    "  local ttl_ms = cdiv(ttl_us, 1000)\n"
    "  if test_now then ttl_ms = 600000 end\n"
    "  redis.call('SET', KEYS[1], string.format('%.0f', v), 'PX', string.format('%.0f', ttl_ms))\n"
    "end\n"
    "local ahead = tat - now_us\n"
    "local k = 0\n"
    "if ahead <= tau_us then k = math.min(n, idiv(tau_us - ahead, t_us) + 1) end\n"
    "local observed = cdiv(ahead + math.max(k - 1, 0) * t_us, t_us) + 1\n"
    "local after = ahead + k * t_us\n"
    "local retry = 0\n"
    "if k < n then retry = cdiv(after - tau_us, 1000) end\n"
    "if k == 0 then\n"
    "  if raised then put(tat, ahead) end\n"
    "  return {0, retry, observed, burst, 0}\n"
    "end\n"
    "local remaining = 0\n"
    "if after <= tau_us then remaining = idiv(tau_us - after, t_us) + 1 end\n"
    "put(tat + k * t_us, after)\n"
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

const tg_rs_script_t tg__rs_scripts[RS_NSCRIPTS] = {
    {gcra_lua, sizeof gcra_lua - 1},
    {slots_lua, sizeof slots_lua - 1},
};

/* ---- failure policy ---- */

static tg_store_result_t rs_policy(redis_store_t *rs, const char *key, uint64_t count,
                                   uint64_t period_ms, uint32_t burst, uint32_t n, uint32_t cap,
                                   int status)
{
    tg_store_result_t r;
    rs->stats.by_policy++;
    if (rs->policy == TG_STORE_POLICY_LOCAL && rs->fallback != NULL) {
        if (tg_store_local_take_share(rs->fallback, key, count, period_ms, burst, rs->instances, n,
                                      &r) == 0) {
            if (r.decided_by == TG_STORE_BY_STORE)
                r.decided_by = TG_STORE_BY_LOCAL_FALLBACK;
            r.status = status;
            return r;
        }
    }
    return tg_store_policy_result(rs->policy == TG_STORE_POLICY_OPEN ? TG_STORE_POLICY_OPEN
                                                                     : TG_STORE_POLICY_CLOSED,
                                  status, cap, n, tg__rs_retry_hint(rs));
}

/* ---- requests ---- */

void tg__rs_req_release(req_t *q)
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

void tg__rs_req_answer_slot(req_t *q, const tg_store_slot_result_t *r)
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
        tg_store_slot_result_t sr = tg__rs_slot_policy(q->rs, q->key, q->cap, q->seq, status);
        q->policy_granted = sr.granted;
        tg__rs_req_answer_slot(q, &sr);
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
    if (q->in_redis && q->ac == rs->ac && rs->ac != NULL && !rs->stalled)
        tg__rs_stall(rs);
    rs->stats.timeouts++;
    req_fail(q, -ETIMEDOUT);
}

req_t *tg__rs_req_get(redis_store_t *rs)
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
    return q->kind == REQ_TAKE || q->kind == REQ_CHARGE ? RS_SCRIPT_GCRA : RS_SCRIPT_SLOTS;
}

/* Write request <q> to the current connection. 0 or -ECONNRESET. */
static int req_send(redis_store_t *rs, req_t *q)
{
    /* EVALSHA sha 1 key count period burst n [now], or
     * EVALSHA sha 1 key count period burst 0 now floor (a charge), or
     * EVALSHA sha 1 key op lease now (cap member | members...) */
    const char *fixed[11];
    size_t fixed_lens[11];
    const char **argv = fixed;
    size_t *lens = fixed_lens;
    int argc = 0;
    char nums[6][24];
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
        argv[argc] = q->as_eval ? tg__rs_scripts[sc].body : rs->sha[sc];
        lens[argc++] = q->as_eval ? tg__rs_scripts[sc].len : 40;
        argv[argc] = "1";
        lens[argc++] = 1;
        argv[argc] = q->key;
        lens[argc++] = strlen(q->key);
    }
    if (q->kind == REQ_TAKE || q->kind == REQ_CHARGE) {
        lens[argc] = fmt_u64(nums[0], q->count);
        argv[argc++] = nums[0];
        lens[argc] = fmt_u64(nums[1], q->period_ms);
        argv[argc++] = nums[1];
        lens[argc] = fmt_u64(nums[2], q->burst);
        argv[argc++] = nums[2];
        lens[argc] = fmt_u64(nums[3], q->kind == REQ_CHARGE ? 0 : q->n);
        argv[argc++] = nums[3];
        if (q->has_test_now || q->kind == REQ_CHARGE) {
            lens[argc] = q->has_test_now ? fmt_u64(nums[4], q->test_now_ms) : 0;
            argv[argc++] = q->has_test_now ? nums[4] : "";
        }
        if (q->kind == REQ_CHARGE) {
            lens[argc] = fmt_u64(nums[5], q->floor_us);
            argv[argc++] = nums[5];
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
bool tg__rs_take_sha(redis_store_t *rs, int idx, const redisReply *r)
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
    (void)tg__rs_take_sha(rs, sc->idx, reply);
}

/* NOSCRIPT: the server lost its script cache (flushed, or restarted
 * behind a proxy). Load every script again and re-send <q> as EVAL. */
static bool rs_noscript(redis_store_t *rs, req_t *q)
{
    if (rs->reloading == 0) {
        for (int i = 0; i < RS_NSCRIPTS; i++) {
            rs->have_sha[i] = false;
            if (redisAsyncCommand(rs->ac, rs_on_reload, &rs->load_ctx[i], "SCRIPT LOAD %b",
                                  tg__rs_scripts[i].body, tg__rs_scripts[i].len) == REDIS_OK)
                rs->reloading++;
        }
    }
    q->as_eval = true;
    rs->stats.noscript++;
    return req_send(rs, q) == 0;
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
        tg__rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
        req_fail(q, rs->closing ? -ECANCELED : -ECONNRESET);
        tg__rs_req_release(q);
        return;
    }
    tg__rs_alive(rs, ac);
    if (q->user_done || rs->closing) {
        /* Answered already (timed out): Redis did the work anyway. A slot
         * it granted is held by nobody unless the policy handed out that
         * very slot meanwhile (then renewals keep it, and its release
         * removes it: commands on one connection run in order). */
        if (!rs->closing && q->kind == REQ_SLOT_ACQUIRE && !q->policy_granted &&
            parse_ints(r, 3, v) == 0 && v[0] != 0) {
            rs->stats.slot_orphans++;
            tg__rs_slot_gone(rs, q->key, q->seq);
        }
        tg__rs_req_release(q);
        return;
    }
    if (q->kind == REQ_PING) {
        bool ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        req_answer(q, NULL, ok ? 0 : -EPROTO);
        tg__rs_req_release(q);
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
        tg__rs_req_release(q);
        return;
    }
    if (q->kind == REQ_SLOT_ACQUIRE && parse_ints(r, 3, v) == 0) {
        tg__rs_slot_reply(rs, q, v);
        tg__rs_req_release(q);
        return;
    }
    if (q->kind == REQ_SLOT_RENEW && parse_ints(r, 2, v) == 0) {
        rs->stats.slot_readded += (uint64_t)v[0];
        req_done(q);
        tg__rs_req_release(q);
        return;
    }
    char what[200];
    if (r->type == REDIS_REPLY_ERROR)
        snprintf(what, sizeof what, "error reply: %.160s", r->str);
    else
        snprintf(what, sizeof what, "malformed reply (type %d)", r->type);
    if (ac == rs->ac)
        tg__rs_drop(rs, what);
    req_fail(q, -EPROTO);
    tg__rs_req_release(q);
}

/* ---- interface ---- */

/* A request for a call when the connection takes calls now; NULL with
 * <*status> saying why not (tg__rs_status, or -ENOBUFS: every request busy). */
req_t *tg__rs_req_for_call(redis_store_t *rs, int *status)
{
    if (!tg__rs_status(rs, status))
        return NULL;
    req_t *q = tg__rs_req_get(rs);
    if (q == NULL)
        *status = -ENOBUFS;
    return q;
}

/* Under a test clock, the time the script is to use instead of TIME. */
void tg__rs_req_stamp(const redis_store_t *rs, req_t *q)
{
    if (rs->test_clock != NULL) {
        q->has_test_now = true;
        q->test_now_ms = rs->test_clock(rs->test_clock_arg);
    }
}

int tg__rs_submit(redis_store_t *rs, req_t *q, int *status)
{
    if (req_send(rs, q) < 0) {
        *status = -ECONNRESET;
        return -1;
    }
    uv_timer_start(&q->timer, req_on_timeout, rs->timeout_ms, 0);
    return 0;
}

/* A take or a charge of bucket <key> (<len> bytes), for the script. */
static void req_set_bucket(const redis_store_t *rs, req_t *q, req_kind_t kind, const char *key,
                           size_t len, uint64_t count, uint64_t period_ms, uint32_t burst,
                           uint32_t cap)
{
    q->kind = kind;
    q->count = count;
    q->period_ms = period_ms;
    q->burst = burst;
    q->cap = cap;
    memcpy(q->key, key, len + 1);
    tg__rs_req_stamp(rs, q);
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
    req_t *q = tg__rs_req_for_call(rs, &status);
    if (q != NULL) {
        req_set_bucket(rs, q, REQ_TAKE, key, n, count, period_ms, burst, g.burst);
        q->cb.take = cb;
        q->arg = arg;
        q->n = want;
        if (tg__rs_submit(rs, q, &status) == 0)
            return 0;
        q->user_done = true;
        tg__rs_req_release(q);
    }
    tg_store_result_t r = rs_policy(rs, key, count, period_ms, burst, want, g.burst, status);
    cb(arg, &r);
    return 0;
}

/* One recovery charge (tg_store_local_debt_fn): floor bucket <key> at
 * what the fallback's bucket for it still weighs. The fallback enforced
 * this instance's share, 1 / instances of the limit, at instances times
 * the shared T: its TAT ahead of now is, in time, what the whole fleet
 * would have spent had every instance admitted as this one did. Taking
 * that as the floor (a maximum, not a sum) makes the shared bucket at
 * least as drained as this instance's own, and charges nothing twice when
 * every instance of a fleet held at the limit comes back with the same
 * floor. */
static void rs_charge_one(void *arg, const char *key, uint64_t count, uint64_t period_ms,
                          uint32_t burst, uint64_t ahead_us)
{
    redis_store_t *rs = arg;
    tg_gcra_t g;
    req_t *q = rs->ac != NULL ? tg__rs_req_get(rs) : NULL;
    if (q != NULL && tg_gcra_init(&g, count, period_ms, burst) == 0) {
        req_set_bucket(rs, q, REQ_CHARGE, key, strlen(key), count, period_ms, burst, g.burst);
        q->n = 0;
        q->floor_us = ahead_us;
        /* Nobody waits for it, so no timer: a Redis that does not answer
         * it does not answer the calls behind it either, and their timers
         * say so. Its request returns with the reply or the connection. */
        q->user_done = true;
        if (req_send(rs, q) == 0) {
            rs->stats.charges++;
            return;
        }
    }
    if (q != NULL) {
        q->user_done = true;
        tg__rs_req_release(q);
    }
    rs->stats.charges_lost++;
}

void tg__rs_charge_all(redis_store_t *rs)
{
    if (rs->policy == TG_STORE_POLICY_LOCAL && rs->fallback != NULL && !rs->closing)
        tg_store_local_debts(rs->fallback, rs_charge_one, rs);
}

static int redis_ping(tg_store_t *s, tg_store_ping_cb cb, void *arg)
{
    redis_store_t *rs = (redis_store_t *)s;
    if (rs->closing)
        return -ECANCELED;
    int status = rs->ac == NULL ? -ENOTCONN : -ETIMEDOUT;
    req_t *q = NULL;
    if (rs->ac != NULL && !rs->stalled) {
        q = tg__rs_req_get(rs);
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
        tg__rs_req_release(q);
    }
    cb(arg, status);
    return 0;
}

static uint32_t redis_pending(const tg_store_t *s)
{
    return ((const redis_store_t *)s)->in_use;
}

/* ---- close and open ---- */

void tg__rs_free_all(redis_store_t *rs)
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
        tg__rs_free_all(rs);
}

static void req_on_timer_closed(uv_handle_t *h)
{
    redis_store_t *rs = ((req_t *)h->data)->rs;
    if (--rs->open_handles == 0)
        tg__rs_free_all(rs);
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
    redisAsyncContext *ac = tg__rs_detach(rs);
    if (ac != NULL && connected)
        ac = tg__rs_release_all(rs, ac);
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
    .slot_acquire = tg__rs_slot_acquire,
    .slot_release = tg__rs_slot_release,
    .slots_held = tg__rs_slots_held,
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
    for (int i = 0; i < RS_NSCRIPTS; i++)
        rs->load_ctx[i] = (script_ctx_t){rs, i};
    rs->open_handles = 3;
    tg__rs_connect(rs);
    *out = &rs->base;
    return 0;
}
