/* The limit registry: every bound toolgate has registers here with a name,
 * category, current usage, high-water mark and capacity, so that usage can
 * be reported and approach warnings emitted. Pure (no I/O).
 *
 * Warn on approach: a limit emits TG_LIMIT_EV_WARNING once when usage
 * crosses 80% of capacity (current * 100 >= capacity * 80) and re-arms,
 * emitting TG_LIMIT_EV_RECOVERED, only after falling below 50%. A
 * registry with a quiet time (rearm_quiet_ms, the gateway's) re-arms only
 * once usage has stayed below 50% that long, seen by tg_registry_tick: a
 * small limit (capacity 1 is at 100% during every call and at 0 between
 * calls) warns once per busy episode, not once per call.
 *
 * Ownership: the registry owns its array of entries and copies of names;
 * entries are addressed by index (stable for the registry's life).
 */
#ifndef TG_LIMITS_REGISTRY_H
#define TG_LIMITS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_LIMIT_NAME_MAX 160 /* fixed internal bound: registered name length */

typedef enum tg_limit_cat {
    TG_LIMIT_FRAME = 0,
    TG_LIMIT_RATE,
    TG_LIMIT_CONCURRENCY,
    TG_LIMIT_QUEUE,
    TG_LIMIT_WRITE_QUEUE,
    TG_LIMIT_AUDIT_QUEUE,
    TG_LIMIT_STDERR,
    TG_LIMIT_RESOURCE,
} tg_limit_cat_t;

typedef enum tg_limit_ev {
    TG_LIMIT_EV_NONE = 0,
    TG_LIMIT_EV_WARNING,
    TG_LIMIT_EV_RECOVERED,
} tg_limit_ev_t;

typedef struct tg_limit {
    char name[TG_LIMIT_NAME_MAX]; /* "agent.search.tool.web.rate" */
    tg_limit_cat_t cat;
    char scope[16]; /* "agent", "tool", "caller", "session", "instance" */
    uint64_t current;
    uint64_t high_water;
    uint64_t capacity;
    bool warned;
    /* With a quiet re-arm: 1 + the registry clock when usage last fell
     * below 50% while warned; 0 when it has not since the warning. */
    uint64_t below_ms;
    /* Thresholds of <capacity> as last seen (recomputed when it changes, so
     * code that assigns capacity directly needs to do nothing else). */
    uint64_t thr_cap, warn_at, rearm_at;
} tg_limit_t;

/* Told of every warning and recovery a tg_registry_update or
 * tg_registry_emit produces (the gateway audits and logs them). <l> is
 * borrowed for the call. */
typedef void (*tg_limit_event_fn)(void *ctx, const tg_limit_t *l, tg_limit_ev_t ev);

#define TG_REGISTRY_REARM_QUIET_MS 10000 /* fixed internal bound: the gateway's rearm_quiet_ms */

typedef struct tg_registry {
    tg_limit_t *v;
    size_t n, cap;
    tg_limit_event_fn on_event; /* NULL: events are returned, not reported */
    void *event_ctx;
    uint64_t now_ms;         /* the clock, as last given to tg_registry_tick */
    uint64_t rearm_quiet_ms; /* 0 (tg_registry_init): re-arm at once below 50% */
} tg_registry_t;

void tg_registry_init(tg_registry_t *r);
void tg_registry_free(tg_registry_t *r);
/* Register; returns the index (>= 0) or -ENOMEM. */
int tg_registry_add(tg_registry_t *r, const char *name, tg_limit_cat_t cat, const char *scope,
                    uint64_t capacity);
/* The entry named <name> with its capacity set to <capacity> (a reload
 * keeps a limit's row, usage and warning state), or a new one. Index or
 * -ENOMEM. */
int tg_registry_upsert(tg_registry_t *r, const char *name, tg_limit_cat_t cat, const char *scope,
                       uint64_t capacity);
/* Report crossings to <fn>(<ctx>, ...) from now on (NULL: stop). */
void tg_registry_on_event(tg_registry_t *r, tg_limit_event_fn fn, void *ctx);
/* Record usage <current> on a bare limit (pure core); returns the event
 * to emit. */
tg_limit_ev_t tg_limit_observe(tg_limit_t *l, uint64_t current);
/* The same for a registry with a quiet re-arm, at clock <now_ms>: never
 * TG_LIMIT_EV_RECOVERED (tg_registry_tick decides it), only notes when
 * usage fell below 50% (and forgets it when usage climbs back). */
tg_limit_ev_t tg_limit_observe_quiet(tg_limit_t *l, uint64_t current, uint64_t now_ms);
/* Advance the clock of <r> to <now_ms> and re-arm (reporting
 * TG_LIMIT_EV_RECOVERED) each warned limit whose usage has stayed below
 * 50% for rearm_quiet_ms. Nothing when rearm_quiet_ms is 0. */
void tg_registry_tick(tg_registry_t *r, uint64_t now_ms);

/* Record usage <current> of limit <idx>; returns the event to emit. Runs
 * several times per call, so an unchanged usage under unchanged
 * thresholds (nothing to record: the high water already covers it, the
 * warning state was decided for this value) returns at once. */
static inline tg_limit_ev_t tg_registry_set(tg_registry_t *r, int idx, uint64_t current)
{
    if (idx < 0 || (size_t)idx >= r->n)
        return TG_LIMIT_EV_NONE;
    tg_limit_t *l = &r->v[idx];
    if (current == l->current && l->thr_cap == l->capacity)
        return TG_LIMIT_EV_NONE;
    if (r->rearm_quiet_ms != 0)
        return tg_limit_observe_quiet(l, current, r->now_ms);
    return tg_limit_observe(l, current);
}
/* Report event <ev> of limit <idx> to the registry's event function
 * (nothing for TG_LIMIT_EV_NONE, idx < 0 or no function). */
static inline void tg_registry_emit(tg_registry_t *r, int idx, tg_limit_ev_t ev)
{
    if (ev != TG_LIMIT_EV_NONE && idx >= 0 && (size_t)idx < r->n && r->on_event != NULL)
        r->on_event(r->event_ctx, &r->v[idx], ev);
}

/* tg_registry_set, then report what it returned: the one call the
 * runtime makes for a usage change. idx < 0 (not registered) is a no-op. */
static inline void tg_registry_update(tg_registry_t *r, int idx, uint64_t current)
{
    tg_registry_emit(r, idx, tg_registry_set(r, idx, current));
}

/* A row several writers fill, each with a count of its own (the agents
 * of two config generations while a reload drains the old one's
 * sessions): the row holds the sum of the writers' counts, so that no
 * writer's count overwrites another's. <*share> is this writer's count as
 * it last added it; the row moves by the difference, and a crossing is
 * reported as tg_registry_update does. A writer that ends takes its part
 * back with <mine> 0. */
static inline void tg_registry_share(tg_registry_t *r, int idx, uint64_t *share, uint64_t mine)
{
    if (mine == *share)
        return;
    if (idx < 0 || (size_t)idx >= r->n) {
        *share = mine;
        return;
    }
    uint64_t cur = r->v[idx].current;
    cur = (cur > *share ? cur - *share : 0) + mine;
    *share = mine;
    tg_registry_update(r, idx, cur);
}

/* The usage of row <idx>, or <dflt> when there is no such row. */
static inline uint64_t tg_registry_current(const tg_registry_t *r, int idx, uint64_t dflt)
{
    return idx >= 0 && (size_t)idx < r->n ? r->v[idx].current : dflt;
}

/* tg_registry_update of a row whose capacity follows what it counts (an
 * agent's resource rows: the per-instance limit times the instances
 * running): <capacity> and <current> set together, one crossing reported. */
static inline void tg_registry_update_cap(tg_registry_t *r, int idx, uint64_t current,
                                          uint64_t capacity)
{
    if (idx < 0 || (size_t)idx >= r->n)
        return;
    r->v[idx].capacity = capacity;
    tg_registry_update(r, idx, current);
}

const char *tg_limit_cat_name(tg_limit_cat_t c);

#endif
