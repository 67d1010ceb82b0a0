/* The redis store's connection: one hiredis async context on the caller's
 * libuv loop, from resolution and set-up to teardown and the next attempt.
 *
 * This file owns the libuv hooks hiredis reads and writes through, the
 * pipelined set-up (AUTH [user] password, SELECT db, SCRIPT LOAD of each
 * script), the health of the connection and its reports (store.degraded,
 * store.recovered), the watchdog (set-up timeout, dead connection) and the
 * reconnect backoff. The calls that ride the connection are
 * store_redis.c's.
 *
 * Health: the connection is healthy when set-up has finished and no call
 * has timed out since the last reply arrived. A timeout marks it stalled;
 * a reply of any kind clears that. While the store is degraded (after any
 * failure) calls are decided by the policy at once, without a round trip;
 * they go back to Redis as soon as a connection is healthy again. A
 * connection that stays stalled for dead_after_ms, or whose set-up takes
 * longer than connect_timeout_ms, is dropped; a lost connection is re-made
 * after a backoff (backoff_initial_ms doubling to backoff_max_ms, each
 * delay drawn from [d/2, d] so that a fleet does not reconnect in
 * lockstep; reset once set-up succeeds). store.degraded is reported on the
 * first failure while healthy, and store.recovered when a connection is
 * healthy again: once each.
 *
 * Recovery (on_store_error=local). While degraded, each instance admits
 * from its own share of each limit (count and burst / instances); the
 * fleet, N instances, admits at most the limit. Two things bound what a
 * return to Redis can add to that:
 *   - When. Reconnecting runs on timers, whatever the traffic: an attempt
 *     at most backoff_max_ms (default 250 ms) after the last failed one,
 *     and a stalled connection answers as soon as Redis does (SIGSTOP,
 *     SIGCONT). So every instance is back on Redis within
 *     D = backoff_max_ms + set-up (one round trip per script) of Redis
 *     answering again, and the instances return within D of each other.
 *     (One exception: a connect the kernel could not even queue, a
 *     stopped Redis's listen backlog being full, waits out
 *     connect_timeout_ms first.)
 *   - What the shared bucket knows. The bucket in Redis saw none of the
 *     local admissions (a restarted Redis holds no bucket at all: a full
 *     burst). The first thing a recovered connection carries, before any
 *     call, is one charge per fallback bucket still ahead of now
 *     (tg__rs_charge_all): the shared TAT becomes at least now + how far
 *     ahead that local bucket is, at most tau + T. The local bucket runs
 *     at N times the shared T, so that is what the fleet would have spent
 *     had every instance admitted as this one did; a maximum, so N
 *     instances returning with the same debt charge it once.
 * Worst case, over any window of W during a recovery, a fleet held at
 * the limit (each instance spending its share, the case that matters):
 * rate x (W + D (N - 1) / N) + N, the instances still on their share for
 * at most D while the first ones are back, and the shared bucket left as
 * drained as theirs. With every load (one instance idle through the
 * outage and busy at its end), the bound is that of the two policies side
 * by side: burst + rate x W from Redis plus, from the instances not yet
 * back, their local burst shares and rate / N x D each. Charges ride the
 * request pool: a bucket found when every request is busy is not charged
 * (stats.charges_lost). They have no timer (nobody waits for them), and K
 * of them put K short script runs ahead of the first calls back. The
 * start of an outage is not bounded here: the local buckets start full,
 * as before.
 *
 * Host names are resolved with uv_getaddrinfo on the threadpool: a
 * resolver timeout during an outage must not freeze the loop. Calls made
 * while the first resolution is running are decided by the policy
 * (-ENOTCONN); with an IP address or a unix socket there is no such window.
 */
#include "limits/store_redis_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rs_on_watchdog(uv_timer_t *t);

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

void tg__rs_degrade(redis_store_t *rs, const char *what)
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
    /* Before any call can follow them on the connection, and before the
     * event (whose handler may close the store). */
    tg__rs_charge_all(rs);
    if (rs->on_event != NULL) {
        char reason[TG_STORE_URL_MAX + 256];
        rs_reason(rs, reason, sizeof reason, "answering again");
        rs->on_event(rs->event_arg, TG_STORE_EV_RECOVERED, reason);
    }
    /* Slots that lapsed during the outage, or were granted by the policy,
     * go (back) into Redis now rather than at the next tick. */
    tg__rs_renew_all(rs);
}

/* Any reply on the current connection proves it alive. */
void tg__rs_alive(redis_store_t *rs, const redisAsyncContext *ac)
{
    if (ac != rs->ac || !rs->stalled)
        return;
    rs->stalled = false;
    if (rs->ready)
        uv_timer_stop(&rs->watchdog);
    rs_maybe_recovered(rs);
}

/* Nothing came back for timeout_ms: until something does, the connection
 * is stalled, and one stalled for dead_after_ms is dropped. */
void tg__rs_stall(redis_store_t *rs)
{
    rs->stalled = true;
    /* While setting up, the connect timeout already runs. */
    if (rs->ready)
        uv_timer_start(&rs->watchdog, rs_on_watchdog, rs->dead_after_ms, 0);
    char what[96];
    snprintf(what, sizeof what, "no reply within %llu ms", (unsigned long long)rs->timeout_ms);
    tg__rs_degrade(rs, what);
}

/* ---- health and backoff as seen by calls ---- */

/* Whether a take may go to Redis now; if not, <*status> says why. */
bool tg__rs_status(const redis_store_t *rs, int *status)
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

uint64_t tg__rs_retry_hint(const redis_store_t *rs)
{
    if (rs->ac == NULL && uv_is_active((const uv_handle_t *)&rs->retry)) {
        uint64_t now = uv_now(rs->loop);
        return rs->retry_at_ms > now ? rs->retry_at_ms - now : 1;
    }
    return rs->timeout_ms;
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
        tg__rs_free_all(rs);
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

redisAsyncContext *tg__rs_flush(redisAsyncContext *ac)
{
    rs_poll_t *p = ac->ev.data;
    redisAsyncHandleWrite(ac);
    return p->ac != NULL ? ac : NULL;
}

/* ---- connection ---- */

/* Forget the current connection (the caller frees it, or hiredis does). */
redisAsyncContext *tg__rs_detach(redis_store_t *rs)
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
    tg__rs_connect(rs);
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
 * been detached by the caller (tg__rs_lost). */
void tg__rs_drop(redis_store_t *rs, const char *what)
{
    redisAsyncContext *ac = tg__rs_detach(rs);
    tg__rs_degrade(rs, what);
    /* Inside a hiredis callback this only marks the context; hiredis frees
     * it, answering every outstanding request with a NULL reply, as soon
     * as that callback returns. */
    if (ac != NULL)
        redisAsyncFree(ac);
    rs_schedule(rs);
}

/* hiredis is freeing <ac> itself: forget it without freeing. */
void tg__rs_lost(redis_store_t *rs, const redisAsyncContext *ac, const char *what)
{
    if (ac != rs->ac)
        return;
    tg__rs_detach(rs);
    tg__rs_degrade(rs, what);
    rs_schedule(rs);
}

static void rs_on_connect(const redisAsyncContext *ac, int status)
{
    redis_store_t *rs = ac->data;
    if (status != REDIS_OK)
        tg__rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connect failed");
}

static void rs_on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_store_t *rs = ac->data;
    (void)status;
    tg__rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection closed");
}

/* Set-up step replies: an error ends the connection. */
static bool setup_reply_ok(redis_store_t *rs, redisAsyncContext *ac, const redisReply *r,
                           const char *step)
{
    if (ac != rs->ac)
        return false;
    if (r == NULL) {
        tg__rs_lost(rs, ac, ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
        return false;
    }
    tg__rs_alive(rs, ac);
    if (r->type == REDIS_REPLY_ERROR) {
        char what[220];
        snprintf(what, sizeof what, "%s failed: %.160s", step, r->str);
        tg__rs_drop(rs, what);
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
    if (!tg__rs_take_sha(rs, sc->idx, r)) {
        tg__rs_drop(rs, "SCRIPT LOAD: unexpected reply");
        return;
    }
    if (sc->idx + 1 < RS_NSCRIPTS)
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
        tg__rs_degrade(rs, rs->fail_what);
        rs_schedule(rs);
    } else if (!rs->ready) {
        snprintf(what, sizeof what, "connect and set-up took longer than %llu ms",
                 (unsigned long long)rs->connect_timeout_ms);
        tg__rs_drop(rs, what);
    } else if (rs->stalled) {
        snprintf(what, sizeof what, "no reply for %llu ms", (unsigned long long)rs->dead_after_ms);
        tg__rs_drop(rs, what);
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
    for (int i = 0; i < RS_NSCRIPTS; i++)
        redisAsyncCommand(ac, rs_on_script_load, &rs->load_ctx[i], "SCRIPT LOAD %b",
                          tg__rs_scripts[i].body, tg__rs_scripts[i].len);
    uv_timer_start(&rs->watchdog, rs_on_watchdog, rs->connect_timeout_ms, 0);
}

static void rs_on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    redis_store_t *rs = g->data;
    rs->resolving = false;
    if (--rs->open_handles == 0) {
        /* Closed meanwhile, and every handle is gone already. */
        uv_freeaddrinfo(res);
        tg__rs_free_all(rs);
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
        tg__rs_degrade(rs, what);
        rs_schedule(rs);
        return;
    }
    rs_start(rs, ip);
}

void tg__rs_connect(redis_store_t *rs)
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
