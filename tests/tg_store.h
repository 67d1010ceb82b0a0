/* Helpers shared by the rate-store suites (test_store_local.c,
 * test_store_redis.c, test_store_lease.c): a test clock, take and acquire
 * with their answer slots, the GCRA result check, loop pumping, opening and
 * closing a local store, and the redis rig (a store on its own loop against
 * a redis-server from tests/tg_redis.h). Static functions: include once per
 * test file. */
#ifndef TG_TESTS_TG_STORE_H
#define TG_TESTS_TG_STORE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "limits/store.h"
#include "tests/tg_redis.h"

/* The clock of local stores, lease views and the Lua scripts under test. */
static uint64_t g_now_ms;

static inline uint64_t test_clock(void *arg)
{
    (void)arg;
    return g_now_ms;
}

typedef struct slot {
    bool done;
    int answers;
    tg_store_result_t r;
    uint64_t t0_ns, t1_ns;
} slot_t;

static inline void slot_cb(void *arg, const tg_store_result_t *r)
{
    slot_t *s = arg;
    s->answers++;
    s->done = true;
    s->r = *r;
    s->t1_ns = uv_hrtime();
}

static inline void take(tg_store_t *st, const char *key, uint64_t count, uint64_t period_ms,
                        uint32_t burst, slot_t *s)
{
    memset(s, 0, sizeof *s);
    s->t0_ns = uv_hrtime();
    int rc = tg_store_take(st, key, count, period_ms, burst, slot_cb, s);
    cr_assert_eq(rc, 0, "take %s: %d", key, rc);
}

typedef struct events {
    int degraded;
    int recovered;
    char last[2048];
} events_t;

static inline void on_event(void *arg, tg_store_event_t ev, const char *reason)
{
    events_t *e = arg;
    if (ev == TG_STORE_EV_DEGRADED)
        e->degraded++;
    else if (ev == TG_STORE_EV_RECOVERED)
        e->recovered++;
    snprintf(e->last, sizeof e->last, "%s", reason);
}

static inline void expect_gcra(tg_gcra_result_t got, tg_gcra_result_t want, const char *what)
{
    cr_assert_eq(got.allowed, want.allowed, "%s: allowed %d, want %d", what, got.allowed,
                 want.allowed);
    cr_assert_eq(got.retry_after_ms, want.retry_after_ms, "%s: retry %llu, want %llu", what,
                 (unsigned long long)got.retry_after_ms, (unsigned long long)want.retry_after_ms);
    cr_assert_eq(got.observed, want.observed, "%s: observed %llu, want %llu", what,
                 (unsigned long long)got.observed, (unsigned long long)want.observed);
    cr_assert_eq(got.cap, want.cap, "%s: cap %llu, want %llu", what, (unsigned long long)got.cap,
                 (unsigned long long)want.cap);
    cr_assert_eq(got.remaining, want.remaining, "%s: remaining %llu, want %llu", what,
                 (unsigned long long)got.remaining, (unsigned long long)want.remaining);
}

static inline tg_gcra_result_t gr(bool allowed, uint64_t retry, uint64_t observed, uint64_t cap,
                                  uint64_t remaining)
{
    return (tg_gcra_result_t){allowed, retry, observed, cap, remaining};
}

/* Run <loop> until <flag> is true or <max_ms> pass (a guard timer keeps
 * UV_RUN_ONCE from blocking). */
static inline void guard_cb(uv_timer_t *t)
{
    (void)t;
}

static inline void pump(uv_loop_t *loop, const bool *flag, uint64_t max_ms)
{
    uv_timer_t guard;
    uv_timer_init(loop, &guard);
    uv_timer_start(&guard, guard_cb, 2, 2);
    uv_update_time(loop);
    uint64_t end = uv_now(loop) + max_ms;
    while ((flag == NULL || !*flag) && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static inline void pump_ms(uv_loop_t *loop, uint64_t ms)
{
    pump(loop, NULL, ms);
}

static inline void set_true(void *arg)
{
    *(bool *)arg = true;
}

/* Close <st>, wait for its callback, and check the loop closes cleanly. */
static inline void close_store(uv_loop_t *loop, tg_store_t *st)
{
    bool closed = false;
    tg_store_close(st, set_true, &closed);
    pump(loop, &closed, 2000);
    cr_assert(closed, "store close callback did not run");
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(loop), 0, "handles left open on the loop");
}

static inline tg_store_t *local_open(uint32_t max_keys)
{
    tg_store_opts_t o = {
        .kind = TG_STORE_LOCAL, .clock_ms = test_clock, .local_max_keys = max_keys};
    tg_store_t *st = NULL;
    tg_err_t err;
    cr_assert_eq(tg_store_open(NULL, &o, &st, &err), 0, "%s", err.msg);
    cr_assert_str_eq(tg_store_name(st), "local");
    return st;
}

static inline void local_close(tg_store_t *st)
{
    bool closed = false;
    tg_store_close(st, set_true, &closed);
    cr_assert(closed, "the local store closes synchronously");
}

static inline void never_cb(void *arg, const tg_store_result_t *r)
{
    (void)arg;
    (void)r;
    cr_assert_fail("callback ran for a rejected take");
}

static inline void ping_cb(void *arg, int status)
{
    *(int *)arg = status + 1000;
}

/* A prefix no other run shares, for external servers. */
static inline const char *run_prefix(void)
{
    static char p[48];
    snprintf(p, sizeof p, "tgt%d.%llu:", (int)getpid(),
             (unsigned long long)(uv_hrtime() % 1000000));
    return p;
}

typedef struct rig {
    uv_loop_t loop;
    srv_t srv;
    tg_store_t *st;
    events_t ev;
    tg_store_opts_t o;
} rig_t;

static inline void rig_open(rig_t *g)
{
    cr_assert_eq(uv_loop_init(&g->loop), 0);
    g->o.kind = TG_STORE_REDIS;
    g->o.url = g->srv.url;
    if (g->o.prefix == NULL)
        g->o.prefix = run_prefix();
    g->o.on_event = on_event;
    g->o.event_arg = &g->ev;
    tg_err_t err;
    cr_assert_eq(tg_store_open(&g->loop, &g->o, &g->st, &err), 0, "%s", err.msg);
}

static inline void rig_close(rig_t *g)
{
    close_store(&g->loop, g->st);
    srv_done(&g->srv);
}

static inline void fast_failover(rig_t *g, tg_store_policy_t pol)
{
    g->o.on_store_error = pol;
    g->o.instances = 2;
    g->o.clock_ms = test_clock;
    g->o.timeout_ms = 50;
    g->o.connect_timeout_ms = 300;
    g->o.dead_after_ms = 300;
    g->o.backoff_initial_ms = 50;
    g->o.backoff_max_ms = 200;
}

typedef struct held {
    bool done;
    int answers;
    tg_store_slot_result_t r;
    uint64_t t0_ns, t1_ns;
} held_t;

static inline void held_cb(void *arg, const tg_store_slot_result_t *r)
{
    held_t *h = arg;
    h->answers++;
    h->done = true;
    h->r = *r;
    h->t1_ns = uv_hrtime();
}

static inline void never_slot_cb(void *arg, const tg_store_slot_result_t *r)
{
    (void)arg;
    (void)r;
    cr_assert_fail("a refused acquisition called back");
}

static inline void acquire(tg_store_t *st, const char *key, uint32_t cap, held_t *h)
{
    memset(h, 0, sizeof *h);
    h->t0_ns = uv_hrtime();
    cr_assert_eq(tg_store_slot_acquire(st, key, cap, held_cb, h), 0, "acquire %s", key);
}

static inline void expect_slot(const held_t *h, bool granted, uint64_t holders, uint64_t cap,
                               tg_store_decider_t by, const char *what)
{
    cr_assert(h->done, "%s: not answered", what);
    cr_assert_eq(h->r.granted, granted, "%s: granted %d", what, h->r.granted);
    cr_assert_eq(h->r.holders, holders, "%s: holders %llu, want %llu", what,
                 (unsigned long long)h->r.holders, (unsigned long long)holders);
    cr_assert_eq(h->r.cap, cap, "%s: cap %llu, want %llu", what, (unsigned long long)h->r.cap,
                 (unsigned long long)cap);
    cr_assert_eq(h->r.decided_by, by, "%s: decided by %s", what,
                 tg_store_decider_name(h->r.decided_by));
    cr_assert_eq(h->r.slot != NULL, granted, "%s: a slot exactly when granted", what);
}

#endif
