/* GCRA in integer microseconds.
 *
 * Why microseconds: DESIGN.md states the algorithm in milliseconds, but
 * T = period / N is rarely a whole number of them (7/minute gives
 * 8571.43 ms), and rounding T to whole ms would drift by up to 1 ms per
 * call. Integers in us keep each T exact to 1 us without floating point,
 * so the local bucket and the Redis Lua script (which sees doubles, exact
 * below 2^53) reach bit-identical decisions. Why round T up: a larger T
 * only ever refills more slowly, so the rounding error can cost a caller
 * at most 1 us per call but can never let more than N calls through per
 * period; rounding down would silently over-admit on long runs. Results
 * returned in ms (retry_after_ms) are rounded up for the same reason: a
 * caller who waits exactly that long is admitted.
 */
#include "limits/gcra.h"

#include <errno.h>
#include <stddef.h>

int tg_gcra_init(tg_gcra_t *g, uint64_t count, uint64_t period_ms, uint32_t burst)
{
    if (g == NULL || count == 0 || period_ms == 0 || period_ms > TG_GCRA_MAX_SPAN_US / 1000)
        return -EINVAL;
    uint64_t b = burst != 0 ? burst : count;
    if (b > TG_GCRA_MAX_BURST)
        return -EINVAL;
    uint64_t period_us = period_ms * 1000;
    /* >= 1 because period_us >= 1000 and the division rounds up. */
    uint64_t t_us = period_us / count + (period_us % count != 0);
    if (t_us > TG_GCRA_MAX_SPAN_US / b)
        return -EINVAL;
    g->t_us = t_us;
    g->tau_us = t_us * (b - 1);
    g->burst = (uint32_t)b;
    g->tat_us = INT64_MIN;
    return 0;
}

/* Clamping keeps now_us, TAT (<= now + tau + T) and every difference far
 * from int64 overflow and below 2^53; a clock that far out only stops
 * refilling, which fails closed. */
static int64_t gcra__now_us(uint64_t now_ms)
{
    if (now_ms > TG_GCRA_MAX_NOW_US / 1000)
        now_ms = TG_GCRA_MAX_NOW_US / 1000;
    return (int64_t)(now_ms * 1000);
}

static uint64_t gcra__ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* The decision for a call at <now_ms>; <*tat_after> receives the TAT to
 * store (unchanged on refusal). An absent TAT is INT64_MIN, below any
 * clamped now, so max(TAT, t) yields t as DESIGN.md requires. */
static tg_gcra_result_t gcra__decide(const tg_gcra_t *g, uint64_t now_ms, int64_t *tat_after)
{
    tg_gcra_result_t r = {0};
    int64_t t = gcra__now_us(now_ms);
    int64_t tat = g->tat_us > t ? g->tat_us : t;
    uint64_t ahead = (uint64_t)(tat - t); /* backlog in us, >= 0 */

    r.cap = g->burst;
    r.observed = gcra__ceil_div(ahead, g->t_us) + 1;
    if (ahead > g->tau_us) {
        r.allowed = false;
        r.retry_after_ms = gcra__ceil_div(ahead - g->tau_us, 1000);
        *tat_after = g->tat_us;
        return r;
    }
    r.allowed = true;
    *tat_after = tat + (int64_t)g->t_us;
    /* A further call j (0-based) passes now iff (ahead + T) + j*T <= tau. */
    uint64_t after = ahead + g->t_us;
    r.remaining = after > g->tau_us ? 0 : (g->tau_us - after) / g->t_us + 1;
    return r;
}

tg_gcra_result_t tg_gcra_take(tg_gcra_t *g, uint64_t now_ms)
{
    int64_t tat_after;
    tg_gcra_result_t r = gcra__decide(g, now_ms, &tat_after);
    g->tat_us = tat_after;
    return r;
}

tg_gcra_result_t tg_gcra_peek(const tg_gcra_t *g, uint64_t now_ms)
{
    int64_t tat_after;
    return gcra__decide(g, now_ms, &tat_after);
}

uint64_t tg_gcra_used(const tg_gcra_t *g, uint64_t now_ms)
{
    int64_t t = gcra__now_us(now_ms);
    if (g->tat_us <= t)
        return 0;
    uint64_t used = gcra__ceil_div((uint64_t)(g->tat_us - t), g->t_us);
    return used < g->burst ? used : g->burst;
}
