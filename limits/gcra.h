/* GCRA rate limiting (a token bucket kept as one timestamp): pure, no I/O.
 *
 * Exactly DESIGN.md: T = period / N, tau = T * (burst - 1); per key a
 * theoretical arrival time TAT (absent = now). A call at t: tat = max(TAT, t);
 * if tat - t > tau refuse with retry_after = tat - t - tau and
 * observed = ceil((tat - t) / T) + 1, cap = burst; else admit, TAT = tat + T.
 *
 * Internally times are microseconds (integers, no floating point) so that
 * periods not divisible by N (7/minute) stay exact to 1 us; T is rounded up
 * so rounding never admits more than N per period. Values stay below 2^53,
 * so the Redis Lua script (doubles) computes the same results.
 */
#ifndef TG_LIMITS_GCRA_H
#define TG_LIMITS_GCRA_H

#include <stdbool.h>
#include <stdint.h>

/* Bounds checked by tg_gcra_init (all in microseconds unless named).
 * TG_GCRA_MAX_BURST: largest effective burst (explicit, or count when 0).
 * TG_GCRA_MAX_SPAN_US: largest period and largest T * burst (~35.7 years).
 * TG_GCRA_MAX_NOW_US: now is clamped here (~year 2112 as Unix ms), so that
 * now + T * burst stays below 2^53 and every value is exact as a double. */
#define TG_GCRA_MAX_BURST 1000000u
#define TG_GCRA_MAX_SPAN_US (UINT64_C(1) << 50)
#define TG_GCRA_MAX_NOW_US (UINT64_C(1) << 52)

typedef struct tg_gcra {
    uint64_t t_us;   /* emission interval T */
    uint64_t tau_us; /* T * (burst - 1) */
    uint32_t burst;
    int64_t tat_us;  /* theoretical arrival time; INT64_MIN = absent */
} tg_gcra_t;

typedef struct tg_gcra_result {
    bool allowed;
    uint64_t retry_after_ms; /* 0 when allowed; else ceil of the exact wait */
    uint64_t observed;       /* calls counted against the cap, incl. this one */
    uint64_t cap;            /* burst */
    uint64_t remaining;      /* calls that would still pass now, after this one */
} tg_gcra_result_t;

/* <count> calls per <period_ms>, burst <burst> (0 = count); TAT starts absent.
 * 0, or -EINVAL when <count> or <period_ms> is 0 or a bound above is
 * exceeded; <g> is left untouched on error. */
int tg_gcra_init(tg_gcra_t *g, uint64_t count, uint64_t period_ms, uint32_t burst);

/* Decide one call at <now_ms>. */
tg_gcra_result_t tg_gcra_take(tg_gcra_t *g, uint64_t now_ms);

/* Peek without taking: the result a call at <now_ms> would get. */
tg_gcra_result_t tg_gcra_peek(const tg_gcra_t *g, uint64_t now_ms);

/* Current fill in calls (how much of the burst is used), for the registry. */
uint64_t tg_gcra_used(const tg_gcra_t *g, uint64_t now_ms);

#endif
