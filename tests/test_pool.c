/* An agent's pool of instances (router/agent/pool.c) driven by a fake
 * dialect: no process, no loop, places that say when they are idle, and
 * ops that record what the pool asked. Bounds, eviction within one caller
 * (the longest idle, never a busy one, never past max_instances still
 * draining), the registry row, a reload's new cap, and a reload's drain
 * of the places of older generations. */
#include <criterion/criterion.h>

#include <string.h>

#include "limits/registry.h"
#include "router/agent/pool.h"

typedef struct place {
    tg_pool_member_t pm; /* first, as the engines embed it */
    uint64_t idle_since; /* 0: busy */
    int evicted_calls;
    int drain_calls;
    bool ends_in_drain; /* leaves its pool inside drain (as a session drained at once) */
} place_t;

static tg_registry_t reg;
static int row;
static int evictions;

static uint64_t fake_evictable(tg_pool_member_t *m, uint64_t now)
{
    place_t *p = (place_t *)m;
    if (p->idle_since == 0 || now < p->idle_since + 1000)
        return 0;
    return p->idle_since + 1;
}

static void fake_evict(tg_pool_member_t *m)
{
    ((place_t *)m)->evicted_calls++;
    evictions++;
}

/* A place with no instance (not counted) moves to the new generation; one
 * running an instance drains. */
static bool fake_drain(tg_pool_member_t *m)
{
    place_t *p = (place_t *)m;
    p->drain_calls++;
    if (p->ends_in_drain) {
        tg_apool_leave(m);
        return false;
    }
    return !m->counted;
}

static const tg_apool_ops_t ops = {
    .evictable = fake_evictable, .evict = fake_evict, .drain = fake_drain};

static void setup(void)
{
    tg_registry_init(&reg);
    row = tg_registry_add(&reg, "agent.a.instances", TG_LIMIT_CONCURRENCY, "agent", 2);
    evictions = 0;
}

static void teardown(void)
{
    tg_registry_free(&reg);
}

TestSuite(pool, .init = setup, .fini = teardown);

Test(pool, max_instances_bounds_the_places_that_start_one)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 2, &ops, &reg, row);
    place_t a = {0}, b = {0}, c = {0};
    tg_apool_join(&p, &a.pm, "alice", false);
    tg_apool_join(&p, &b.pm, "alice", false);
    tg_apool_join(&p, &c.pm, "alice", false);
    uint32_t running = 0, cap = 0;
    cr_assert_eq(tg_apool_take(&a.pm, 10, &running, &cap), 0);
    cr_assert_eq(tg_apool_take(&a.pm, 10, &running, &cap), 0, "asking twice counts once");
    cr_assert_eq(tg_apool_take(&b.pm, 10, &running, &cap), 0);
    cr_assert_eq(reg.v[row].current, 2, "the row follows the count");
    cr_assert_eq(tg_apool_take(&c.pm, 10, &running, &cap), -1);
    cr_assert_eq(running, 2);
    cr_assert_eq(cap, 2);
    tg_apool_leave(&a.pm);
    cr_assert_eq(tg_apool_running(&p), 1);
    cr_assert_eq(tg_apool_take(&c.pm, 10, &running, &cap), 0, "a place that left made room");
    tg_apool_leave(&b.pm);
    tg_apool_leave(&c.pm);
    cr_assert_eq(tg_apool_running(&p), 0);
    cr_assert_eq(reg.v[row].current, 0);
    cr_assert_null(p.head, "every place unlinked");
    tg_apool_leave(&c.pm); /* a second leave is a no-op */
    cr_assert_eq(tg_apool_running(&p), 0);
}

Test(pool, a_full_pool_evicts_the_longest_idle_place_of_the_same_caller)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 2, &ops, &reg, row);
    place_t old = {.idle_since = 100}, older = {.idle_since = 50}, other = {0}, fresh = {0};
    uint32_t running, cap;
    tg_apool_join(&p, &older.pm, "alice", true);
    tg_apool_join(&p, &old.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&older.pm, 0, &running, &cap), 0);
    cr_assert_eq(tg_apool_take(&old.pm, 0, &running, &cap), 0);
    /* Another caller's new place never takes alice's instances. */
    tg_apool_join(&p, &other.pm, "bob", true);
    cr_assert_eq(tg_apool_take(&other.pm, 5000, &running, &cap), -1);
    cr_assert_eq(evictions, 0);
    /* Not idle long enough yet: refused. */
    tg_apool_join(&p, &fresh.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&fresh.pm, 1000, &running, &cap), -1);
    cr_assert_eq(tg_apool_take(&fresh.pm, 5000, &running, &cap), 0);
    cr_assert_eq(older.evicted_calls, 1, "the longest idle goes");
    cr_assert_eq(old.evicted_calls, 0);
    cr_assert(older.pm.evicted);
    cr_assert_not(older.pm.counted, "its count passed to the new place");
    cr_assert(fresh.pm.counted);
    cr_assert_eq(tg_apool_running(&p), 2, "the count stays at the cap");
    tg_apool_leave(&older.pm); /* the evicted place drains, then leaves */
    cr_assert_eq(tg_apool_running(&p), 2, "an evicted place gives back nothing");
}

Test(pool, only_places_that_may_evict_do_and_never_a_busy_one)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 1, &ops, &reg, row);
    place_t busy = {.idle_since = 0}, idle = {.idle_since = 10}, unix_place = {0}, http = {0};
    uint32_t running, cap;
    tg_apool_join(&p, &busy.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&busy.pm, 0, &running, &cap), 0);
    tg_apool_join(&p, &http.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&http.pm, 99999, &running, &cap), -1, "the only one is busy");
    busy.idle_since = 10;
    tg_apool_join(&p, &unix_place.pm, "alice", false);
    cr_assert_eq(tg_apool_take(&unix_place.pm, 99999, &running, &cap), -1,
                 "a place that may not evict waits for room");
    cr_assert_eq(tg_apool_take(&http.pm, 99999, &running, &cap), 0);
    cr_assert_eq(busy.evicted_calls, 1);
    (void)idle;
}

Test(pool, evicted_places_still_draining_hold_off_more_evictions)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 1, &ops, &reg, row);
    place_t a = {.idle_since = 1}, b = {.idle_since = 1}, c = {0};
    uint32_t running, cap;
    tg_apool_join(&p, &a.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&a.pm, 0, &running, &cap), 0);
    tg_apool_join(&p, &b.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&b.pm, 5000, &running, &cap), 0);
    cr_assert(a.pm.evicted);
    /* <a> has not left yet: max_instances (1) places are draining. */
    tg_apool_join(&p, &c.pm, "alice", true);
    cr_assert_eq(tg_apool_take(&c.pm, 9000, &running, &cap), -1);
    tg_apool_leave(&a.pm);
    cr_assert_eq(tg_apool_take(&c.pm, 9000, &running, &cap), 0, "once it left, one more may go");
    cr_assert(b.pm.evicted);
}

Test(pool, a_reload_changes_the_cap_for_the_next_instance_only)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 2, &ops, &reg, row);
    place_t a = {0}, b = {0}, c = {0};
    uint32_t running, cap;
    tg_apool_join(&p, &a.pm, "x", false);
    tg_apool_join(&p, &b.pm, "x", false);
    tg_apool_join(&p, &c.pm, "x", false);
    cr_assert_eq(tg_apool_take(&a.pm, 0, &running, &cap), 0);
    cr_assert_eq(tg_apool_take(&b.pm, 0, &running, &cap), 0);
    p.max_instances = 1; /* what a reload's successor sets */
    cr_assert(a.pm.counted && b.pm.counted, "running instances are not ended by a lower cap");
    tg_apool_leave(&a.pm);
    cr_assert_eq(tg_apool_take(&c.pm, 0, &running, &cap), -1, "1 runs, the new cap");
    cr_assert_eq(cap, 1);
    p.max_instances = 3;
    cr_assert_eq(tg_apool_take(&c.pm, 0, &running, &cap), 0);
}

Test(pool, a_place_outside_any_pool_always_starts)
{
    place_t a = {0};
    uint32_t running = 7, cap = 7;
    cr_assert_eq(tg_apool_take(&a.pm, 0, &running, &cap), 0);
    cr_assert_eq(running, 7, "untouched");
    tg_apool_leave(&a.pm);
    cr_assert_eq(tg_apool_running(NULL), 0);
}

Test(pool, a_reload_drains_each_place_of_an_older_generation_once)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SESSION, 4, &ops, &reg, row);
    place_t busy = {0}, waiting = {0}, gone = {.ends_in_drain = true}, later = {0};
    uint32_t running, cap, moved = 99;
    tg_apool_join(&p, &busy.pm, "x", false);
    tg_apool_join(&p, &waiting.pm, "x", false);
    tg_apool_join(&p, &gone.pm, "x", false);
    cr_assert_eq(tg_apool_take(&busy.pm, 0, &running, &cap), 0);
    cr_assert_eq(tg_apool_take(&gone.pm, 0, &running, &cap), 0);
    cr_assert_eq(tg_apool_reload(&p, 2, &moved), 2, "the running places drain");
    cr_assert_eq(moved, 1, "the place with no instance yet moves");
    cr_assert_eq(busy.drain_calls, 1);
    cr_assert_eq(waiting.drain_calls, 1);
    cr_assert_eq(gone.drain_calls, 1, "a place that leaves inside drain is asked once");
    cr_assert(busy.pm.draining);
    cr_assert_not(waiting.pm.draining);
    cr_assert_eq(waiting.pm.gen, p.gen, "it runs the new config");
    cr_assert_eq(p.max_instances, 2, "the new cap");
    cr_assert_eq(tg_apool_draining(&p), 1);
    cr_assert_eq(tg_apool_running(&p), 1, "a draining place holds its instance until it leaves");
    /* A place joining now is of the new generation: the next reload asks
     * it, but not the one still draining from the first. */
    tg_apool_join(&p, &later.pm, "x", false);
    cr_assert_eq(later.pm.gen, p.gen);
    cr_assert_eq(tg_apool_take(&later.pm, 0, &running, &cap), 0);
    cr_assert_eq(tg_apool_take(&waiting.pm, 0, &running, &cap), -1, "2 run: the new cap holds");
    cr_assert_eq(tg_apool_reload(&p, 2, &moved), 1);
    cr_assert_eq(moved, 1, "waiting moves again");
    cr_assert_eq(busy.drain_calls, 1, "already draining: not asked twice");
    cr_assert_eq(later.drain_calls, 1);
    cr_assert_eq(waiting.drain_calls, 2);
    tg_apool_leave(&busy.pm);
    cr_assert_eq(tg_apool_draining(&p), 1, "later drains now");
    cr_assert_eq(tg_apool_take(&waiting.pm, 0, &running, &cap), 0, "the drained one made room");
}

Test(pool, a_shared_place_releases_between_instances_and_is_renewed_by_a_reload)
{
    tg_apool_t p;
    tg_apool_init(&p, TG_BIND_SHARED, 1, &ops, &reg, row);
    place_t agent = {0};
    uint32_t running, cap;
    tg_apool_join(&p, &agent.pm, "*", false);
    cr_assert_eq(tg_apool_take(&agent.pm, 0, &running, &cap), 0);
    cr_assert_eq(reg.v[row].current, 1);
    tg_apool_release(&agent.pm); /* its instance exited; a restart follows */
    cr_assert_eq(reg.v[row].current, 0);
    cr_assert_not(agent.pm.counted);
    cr_assert_eq(p.head, &agent.pm, "the place stays");
    cr_assert_eq(tg_apool_take(&agent.pm, 0, &running, &cap), 0, "the restart takes it again");
    cr_assert_eq(tg_apool_reload(&p, 1, NULL), 1, "its instance runs the old config: it drains");
    cr_assert(agent.pm.draining);
    tg_apool_release(&agent.pm); /* the old instance stopped */
    tg_apool_renew(&agent.pm);   /* the next starts from the new config */
    cr_assert_not(agent.pm.draining);
    cr_assert_eq(agent.pm.gen, p.gen);
    cr_assert_eq(tg_apool_draining(&p), 0);
    cr_assert_eq(tg_apool_take(&agent.pm, 0, &running, &cap), 0);
    tg_apool_leave(&agent.pm);
    cr_assert_eq(tg_apool_running(&p), 0);
}
