/* Lease views over a store ("shared_mode": "lease"): batch sizing, three
 * instances on one bucket never over the limit and boundedly under it,
 * tokens that expire and are never spent late, the same over a real Redis
 * (exact total, steady load mostly local), the failure policy, a full
 * lease table and close with a batch in flight; a lease view holds no
 * slots. Redis as in test_store_redis.c; helpers in tests/tg_store.h. */
#include "tests/tg_store.h"

/* ------------------------------------------------------------ lease mode */

Test(store_lease, batch_size)
{
    /* first batch (rate unknown): only the waiting calls */
    cr_assert_eq(tg_store_lease_batch(30, 3, -1, 1000, 1), 1);
    cr_assert_eq(tg_store_lease_batch(30, 3, -1, 1000, 4), 4);
    /* predicted: rate x lease, at most cap / (2 x instances) */
    cr_assert_eq(tg_store_lease_batch(30, 3, 0.002, 1000, 1), 2);
    cr_assert_eq(tg_store_lease_batch(30, 3, 0.0021, 1000, 1), 3);
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 1), 5);
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 9), 9,
                 "waiting calls are not capped by it");
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 100), 30, "but by the burst");
    cr_assert_eq(tg_store_lease_batch(4, 3, 1.0, 1000, 1), 1, "small burst: one per instance");
    cr_assert_eq(tg_store_lease_batch(4, 0, 1.0, 1000, 1), 2, "instances 0 counts as 1");
    cr_assert_eq(tg_store_lease_batch(30, 3, 0, 1000, 0), 1);
}

typedef struct fleet {
    tg_store_t *backing;
    tg_store_t *lease[3];
} fleet_t;

static void fleet_open(fleet_t *f, tg_store_t *backing, uint32_t instances)
{
    f->backing = backing;
    tg_store_opts_t o = {.instances = instances, .clock_ms = test_clock};
    tg_err_t err;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tg_store_lease_open(backing, &o, &f->lease[i], &err), 0, "%s", err.msg);
}

static void fleet_close_leases(fleet_t *f)
{
    for (int i = 0; i < 3; i++) {
        bool closed = false;
        tg_store_close(f->lease[i], set_true, &closed);
        cr_assert(closed, "nothing in flight: the lease store closes at once");
    }
}

/* Three instances on one shared bucket (a local store standing in for
 * Redis: it answers synchronously, so the run is deterministic). 30/minute,
 * 3 instances: at most 5 tokens held per lease. Each instance calls every
 * 150 ms for 60 s. */
Test(store_lease, three_instances_never_over_and_bounded_under)
{
    tg_store_t *shared = local_open(0);
    fleet_t f;
    fleet_open(&f, shared, 3);
    uint64_t admitted = 0, calls = 0;
    g_now_ms = 1000000;
    uint64_t start = g_now_ms;
    for (int round = 0; round < 1200; round++) {
        slot_t s;
        take(f.lease[round % 3], "tg:{a}:shared", 30, 60000, 0, &s);
        cr_assert(s.done, "a synchronous backing answers at once");
        cr_assert_eq(s.answers, 1);
        cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
        calls++;
        admitted += s.r.gcra.allowed;
        /* never over: the exact-mode bound since the first grant */
        uint64_t bound = 30 + (g_now_ms - start) / 2000;
        cr_assert_leq(admitted, bound, "round %d: %llu admitted > %llu", round,
                      (unsigned long long)admitted, (unsigned long long)bound);
        g_now_ms += 50;
    }
    uint64_t exact = 30 + (g_now_ms - 50 - start) / 2000;
    tg_store_lease_stats_t st, sum = {0};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tg_store_lease_stats(f.lease[i], &st), 0);
        sum.local += st.local;
        sum.granted += st.granted;
        sum.expired += st.expired;
        sum.batches += st.batches;
    }
    /* every admitted call spent one granted token; unspent ones are held
     * (at most 5 per instance) or expired */
    uint64_t held = sum.granted - admitted - sum.expired;
    cr_assert_leq(held, 3 * 5, "held %llu", (unsigned long long)held);
    /* bounded under-admission: what exact mode allows, less what leases hold or lost */
    cr_assert_geq(admitted + held + sum.expired, exact, "admitted %llu held %llu expired %llu",
                  (unsigned long long)admitted, (unsigned long long)held,
                  (unsigned long long)sum.expired);
    cr_assert_geq(admitted, exact - 3 * 5);
    cr_assert_gt(sum.local, 0, "some calls spent leased tokens without asking");
    fleet_close_leases(&f);
    local_close(shared);
}

Test(store_lease, tokens_expire_and_are_never_spent_late)
{
    tg_store_t *shared = local_open(0);
    fleet_t f;
    fleet_open(&f, shared, 1); /* 100/second, 1 instance: up to 50 tokens per lease */
    slot_t s;
    g_now_ms = 5000;
    take(f.lease[0], "k", 100, 1000, 0, &s); /* first batch: 1 token */
    g_now_ms += 10;
    take(f.lease[0], "k", 100, 1000, 0, &s); /* rate 0.1/ms: 50 tokens */
    cr_assert(s.r.gcra.allowed);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.batches, 2);
    cr_assert_eq(st.granted, 51);
    for (int i = 0; i < 10; i++) {
        take(f.lease[0], "k", 100, 1000, 0, &s);
        cr_assert(s.r.gcra.allowed);
        /* the batch of 50 at t+10 left the bucket 50 (the first token had
         * refilled): remaining is those plus the tokens left in the lease */
        cr_assert_eq(s.r.gcra.remaining, 50 + 48 - (uint64_t)i, "call %d: %llu", i,
                     (unsigned long long)s.r.gcra.remaining);
        cr_assert_eq(s.r.gcra.observed, 2 + (uint64_t)i, "call %d", i);
    }
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.local, 10);
    cr_assert_eq(st.batches, 2, "spent locally, no round trip");
    /* lease life = min(lease_ms 1000, period 1000): at +1000 ms the 39
     * tokens left are void */
    g_now_ms += 1000;
    take(f.lease[0], "k", 100, 1000, 0, &s);
    cr_assert(s.r.gcra.allowed);
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.expired, 39);
    cr_assert_eq(st.batches, 3);
    /* a reloaded limit drops the tokens of the old one */
    uint64_t before = st.expired;
    uint64_t left = st.granted - 12 - st.expired - 1;
    take(f.lease[0], "k", 50, 1000, 0, &s);
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.expired, before + left);
    cr_assert_eq(tg_store_take_n(f.lease[0], "k", 100, 1000, 0, 2, never_cb, NULL), -EINVAL);
    fleet_close_leases(&f);
    local_close(shared);
}

/* Over Redis: three instances (three connections) with a frozen clock on
 * both sides: exactly the burst is admitted in total, and never more. */
Test(store_lease, redis_three_instances_exact_total)
{
    static rig_t g[3];
    srv_any(&g[0].srv);
    const char *prefix = run_prefix();
    tg_store_t *lease[3];
    for (int i = 0; i < 3; i++) {
        g[i].srv = g[0].srv;
        g[i].o.prefix = prefix;
        g[i].o.test_script_clock_ms = test_clock;
        g[i].o.clock_ms = test_clock;
        g[i].o.instances = 3;
        rig_open(&g[i]);
        tg_store_opts_t lo = {.instances = 3, .clock_ms = test_clock};
        tg_err_t err;
        cr_assert_eq(tg_store_lease_open(g[i].st, &lo, &lease[i], &err), 0, "%s", err.msg);
    }
    /* A key of this run, as in take_n_matches_repeated_gcra. */
    char key[TG_STORE_KEY_MAX + 1];
    cr_assert_gt(tg_store_make_key(g[0].st, key, sizeof key, "a", "lease"), 0);
    g_now_ms = 7000000;
    uint64_t admitted = 0;
    static slot_t s[3][60];
    /* calls on all three at once, answered as their batches come back */
    for (int k = 0; k < 60; k++) {
        for (int i = 0; i < 3; i++)
            take(lease[i], key, 30, 60000, 0, &s[i][k]);
        for (int i = 0; i < 3; i++) {
            pump(&g[i].loop, &s[i][k].done, 3000);
            cr_assert(s[i][k].done);
            cr_assert_eq(s[i][k].r.decided_by, TG_STORE_BY_STORE);
            admitted += s[i][k].r.gcra.allowed;
        }
        cr_assert_leq(admitted, 30);
    }
    cr_assert_eq(admitted, 30, "with every instance calling until refused, nothing is lost");
    for (int i = 0; i < 3; i++) {
        bool closed = false;
        tg_store_close(lease[i], set_true, &closed);
        cr_assert(closed);
        close_store(&g[i].loop, g[i].st);
    }
    srv_done(&g[0].srv);
}

Test(store_lease, redis_steady_load_is_mostly_local)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.clock_ms = test_clock;
    rig_open(&g);
    tg_store_opts_t lo = {.clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    g_now_ms = 1000;
    int allowed = 0, sync = 0;
    for (int i = 0; i < 400; i++) {
        slot_t s;
        take(lease, "tg:{a}:steady", 1000, 1000, 0, &s);
        sync += s.done;
        pump(&g.loop, &s.done, 3000);
        cr_assert(s.done);
        allowed += s.r.gcra.allowed;
        g_now_ms += 2; /* 500 calls/s against 1000/s */
    }
    cr_assert_eq(allowed, 400);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.local, (uint64_t)sync);
    cr_assert_gt(sync, 350, "most calls at local speed: %d", sync);
    cr_assert_lt(st.batches, 50);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    rig_close(&g);
}

Test(store_lease, store_failure_applies_the_policy)
{
    rig_t g = {0};
    snprintf(g.srv.url, sizeof g.srv.url, "redis://127.0.0.1:%d/0", tgh_free_port());
    fast_failover(&g, TG_STORE_POLICY_LOCAL);
    g.o.instances = 2;
    rig_open(&g);
    pump_ms(&g.loop, 50);
    cr_assert_eq(g.ev.degraded, 1);
    tg_store_opts_t lo = {.instances = 2, .clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    g_now_ms = 100000;
    /* 4/second shared by 2: the fallback share is 2 */
    for (int i = 0; i < 4; i++) {
        slot_t s;
        take(lease, "tg:{a}:x", 4, 1000, 0, &s);
        cr_assert(s.done, "degraded: answered at once");
        cr_assert_eq(s.r.decided_by, TG_STORE_BY_LOCAL_FALLBACK);
        cr_assert_eq(s.r.status, -ENOTCONN);
        cr_assert_eq(s.r.gcra.allowed, i < 2, "call %d", i);
    }
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    close_store(&g.loop, g.st);
}

Test(store_lease, full_table_sends_calls_on_their_own)
{
    tg_store_t *shared = local_open(0);
    tg_store_opts_t o = {.clock_ms = test_clock, .local_max_keys = 1};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(shared, &o, &lease, &err), 0, "%s", err.msg);
    slot_t s;
    g_now_ms = 1000;
    take(lease, "a", 10, 1000, 0, &s);
    g_now_ms += 10;
    take(lease, "a", 10, 1000, 0, &s); /* a batch of 5: 4 stay in the lease */
    take(lease, "b", 10, 1000, 0, &s);
    cr_assert(s.r.gcra.allowed);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.direct, 1, "'a' holds live tokens: 'b' goes to the shared bucket itself");
    cr_assert_eq(st.granted, 6);
    /* once a's tokens have expired, its lease may be dropped for b's */
    g_now_ms += 1000;
    take(lease, "b", 10, 1000, 0, &s);
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.direct, 1);
    cr_assert_eq(st.expired, 4);
    cr_assert_eq(st.batches, 3);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    local_close(shared);
}

Test(store_lease, close_waits_for_the_batch_in_flight)
{
    rig_t g = {0};
    srv_any(&g.srv);
    rig_open(&g);
    tg_store_opts_t lo = {0};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    slot_t s[2];
    take(lease, "tg:{a}:cl", 10, 1000, 0, &s[0]);
    take(lease, "tg:{a}:cl", 10, 1000, 0, &s[1]);
    cr_assert_not(s[0].done);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert_not(closed, "a batch is in flight");
    cr_assert_eq(tg_store_take(lease, "tg:{a}:cl", 10, 1000, 0, never_cb, NULL), -ECANCELED);
    pump(&g.loop, &closed, 3000);
    cr_assert(closed);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(s[i].answers, 1, "call %d", i);
        cr_assert(s[i].r.gcra.allowed, "call %d: answered from the store", i);
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE);
    }
    rig_close(&g);
}

/* ------------------------------------------------- shared concurrency slots */

Test(store_lease, has_no_slots)
{
    tg_store_t *shared = local_open(0);
    tg_store_opts_t lo = {.clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(shared, &lo, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(tg_store_slot_acquire(lease, "tg:{a}:slots", 2, never_slot_cb, NULL), -ENOTSUP);
    cr_assert_eq(tg_store_slots_held(lease), 0);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    local_close(shared);
}
