/* GCRA: every DESIGN.md vector, bounds, window guarantees, and a property
 * test against an exact rational reference model. */
#include "limits/gcra.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

static tg_gcra_t mk(uint64_t count, uint64_t period_ms, uint32_t burst)
{
    tg_gcra_t g;
    int rc = tg_gcra_init(&g, count, period_ms, burst);
    cr_assert_eq(rc, 0, "init %llu/%llu burst %u: %d", (unsigned long long)count,
                 (unsigned long long)period_ms, burst, rc);
    return g;
}

static void expect(tg_gcra_result_t r, bool allowed, uint64_t retry, uint64_t observed,
                   uint64_t cap, uint64_t remaining, const char *what)
{
    cr_assert_eq(r.allowed, allowed, "%s: allowed %d", what, r.allowed);
    cr_assert_eq(r.retry_after_ms, retry, "%s: retry %llu", what,
                 (unsigned long long)r.retry_after_ms);
    cr_assert_eq(r.observed, observed, "%s: observed %llu", what, (unsigned long long)r.observed);
    cr_assert_eq(r.cap, cap, "%s: cap %llu", what, (unsigned long long)r.cap);
    cr_assert_eq(r.remaining, remaining, "%s: remaining %llu", what,
                 (unsigned long long)r.remaining);
}

Test(gcra, init_rejects_bad_parameters)
{
    tg_gcra_t g = {.t_us = 11, .tau_us = 22, .burst = 33, .tat_us = 44};
    cr_assert_eq(tg_gcra_init(&g, 0, 1000, 0), -EINVAL);
    cr_assert_eq(tg_gcra_init(&g, 5, 0, 0), -EINVAL);
    cr_assert_eq(tg_gcra_init(&g, 5, 1000, TG_GCRA_MAX_BURST + 1), -EINVAL);
    /* burst 0 means count, and the ceiling applies to the effective burst */
    cr_assert_eq(tg_gcra_init(&g, TG_GCRA_MAX_BURST + 1, 3600000, 0), -EINVAL);
    cr_assert_eq(tg_gcra_init(&g, 1, TG_GCRA_MAX_SPAN_US / 1000 + 1, 1), -EINVAL);
    /* T * burst above the span: 1/day with a burst of 1e6 */
    cr_assert_eq(tg_gcra_init(&g, 1, 86400000, TG_GCRA_MAX_BURST), -EINVAL);
    cr_assert_eq(tg_gcra_init(NULL, 5, 1000, 0), -EINVAL);
    /* untouched on error */
    cr_assert_eq(g.t_us, 11);
    cr_assert_eq(g.tau_us, 22);
    cr_assert_eq(g.burst, 33);
    cr_assert_eq(g.tat_us, 44);
    /* the largest accepted values */
    cr_assert_eq(tg_gcra_init(&g, TG_GCRA_MAX_BURST, 1000, 0), 0);
    cr_assert_eq(g.t_us, 1);
    cr_assert_eq(g.burst, TG_GCRA_MAX_BURST);
    cr_assert_eq(tg_gcra_init(&g, 1, TG_GCRA_MAX_SPAN_US / 1000, 1), 0);
}

Test(gcra, init_computes_t_and_tau_in_us)
{
    tg_gcra_t g = mk(5, 1000, 0);
    cr_assert_eq(g.t_us, 200000);
    cr_assert_eq(g.tau_us, 800000);
    cr_assert_eq(g.burst, 5);
    cr_assert_eq(g.tat_us, INT64_MIN);

    g = mk(100, 60000, 0); /* DESIGN.md: 100/minute -> T 600 */
    cr_assert_eq(g.t_us, 600000);
    cr_assert_eq(g.tau_us, 600000ull * 99);

    g = mk(7, 60000, 0); /* 8571428.57 us rounded up */
    cr_assert_eq(g.t_us, 8571429);
    cr_assert_eq(g.tau_us, 8571429ull * 6);

    g = mk(10, 1000, 1);
    cr_assert_eq(g.t_us, 100000);
    cr_assert_eq(g.tau_us, 0);
    cr_assert_eq(g.burst, 1);

    g = mk(2, 1000, 7); /* burst above count */
    cr_assert_eq(g.t_us, 500000);
    cr_assert_eq(g.tau_us, 3000000);
    cr_assert_eq(g.burst, 7);

    g = mk(3000000, 1000, 10); /* faster than 1/us: T floors at 1 us */
    cr_assert_eq(g.t_us, 1);
}

/* DESIGN.md: 5/second six calls at t=0 -> 5 admitted, the 6th refused with
 * retry 200, observed 6, cap 5; at t=200 admitted; again at t=200 refused,
 * retry 200. */
static void vector_5_per_second(uint64_t base)
{
    tg_gcra_t g = mk(5, 1000, 0);
    expect(tg_gcra_take(&g, base), true, 0, 1, 5, 4, "call 1");
    expect(tg_gcra_take(&g, base), true, 0, 2, 5, 3, "call 2");
    expect(tg_gcra_take(&g, base), true, 0, 3, 5, 2, "call 3");
    expect(tg_gcra_take(&g, base), true, 0, 4, 5, 1, "call 4");
    expect(tg_gcra_take(&g, base), true, 0, 5, 5, 0, "call 5");
    expect(tg_gcra_take(&g, base), false, 200, 6, 5, 0, "call 6");
    cr_assert_eq(tg_gcra_used(&g, base), 5);
    expect(tg_gcra_take(&g, base + 200), true, 0, 5, 5, 0, "t=200");
    expect(tg_gcra_take(&g, base + 200), false, 200, 6, 5, 0, "t=200 again");
    cr_assert_eq(tg_gcra_used(&g, base + 200), 5);
    cr_assert_eq(tg_gcra_used(&g, base + 399), 5);
    cr_assert_eq(tg_gcra_used(&g, base + 400), 4);
    cr_assert_eq(tg_gcra_used(&g, base + 1100), 1);
    cr_assert_eq(tg_gcra_used(&g, base + 1200), 0);
    cr_assert_eq(tg_gcra_used(&g, base + 999999), 0);
}

Test(gcra, design_vector_5_per_second) { vector_5_per_second(0); }

Test(gcra, design_vector_5_per_second_near_2_pow_42_ms)
{
    vector_5_per_second((UINT64_C(1) << 42) - 300);
    vector_5_per_second(UINT64_C(1) << 42);
    vector_5_per_second(TG_GCRA_MAX_NOW_US / 1000 - 1200);
}

Test(gcra, design_vector_10_per_second_burst_1)
{
    tg_gcra_t g = mk(10, 1000, 1);
    expect(tg_gcra_take(&g, 0), true, 0, 1, 1, 0, "t=0");
    expect(tg_gcra_take(&g, 50), false, 50, 2, 1, 0, "t=50");
    cr_assert_eq(tg_gcra_used(&g, 50), 1);
    expect(tg_gcra_take(&g, 100), true, 0, 1, 1, 0, "t=100");
    expect(tg_gcra_take(&g, 100), false, 100, 2, 1, 0, "t=100 again");
}

Test(gcra, design_vector_100_per_minute)
{
    tg_gcra_t g = mk(100, 60000, 0);
    for (uint64_t i = 1; i <= 100; i++) {
        tg_gcra_result_t r = tg_gcra_take(&g, 1000);
        cr_assert(r.allowed, "call %llu", (unsigned long long)i);
        cr_assert_eq(r.observed, i);
        cr_assert_eq(r.remaining, 100 - i);
    }
    expect(tg_gcra_take(&g, 1000), false, 600, 101, 100, 0, "call 101");
    expect(tg_gcra_take(&g, 1599), false, 1, 101, 100, 0, "1 ms early");
    expect(tg_gcra_take(&g, 1600), true, 0, 100, 100, 0, "after T");
    expect(tg_gcra_take(&g, 1600), false, 600, 101, 100, 0, "again");
    cr_assert_eq(tg_gcra_used(&g, 1600), 100);
    cr_assert_eq(tg_gcra_used(&g, 1600 + 600 * 40), 60);
}

Test(gcra, retry_rounds_the_exact_us_wait_up)
{
    /* 7/minute, burst 1: T = 8571429 us. */
    tg_gcra_t g = mk(7, 60000, 1);
    expect(tg_gcra_take(&g, 0), true, 0, 1, 1, 0, "t=0");
    expect(tg_gcra_take(&g, 0), false, 8572, 2, 1, 0, "t=0 again");
    expect(tg_gcra_take(&g, 8571), false, 1, 2, 1, 0, "429 us early");
    expect(tg_gcra_take(&g, 8572), true, 0, 1, 1, 0, "t=8572");
    /* TAT is now 8572000 + 8571429 = 17143429 us */
    expect(tg_gcra_take(&g, 17143), false, 1, 2, 1, 0, "t=17143");
    expect(tg_gcra_take(&g, 17144), true, 0, 1, 1, 0, "t=17144");
}

Test(gcra, absent_tat_and_peek)
{
    tg_gcra_t g = mk(5, 1000, 0);
    cr_assert_eq(tg_gcra_used(&g, 0), 0);
    cr_assert_eq(tg_gcra_used(&g, UINT64_MAX), 0);
    /* peek on an absent TAT behaves as TAT = now, and changes nothing */
    expect(tg_gcra_peek(&g, 123), true, 0, 1, 5, 4, "peek fresh");
    cr_assert_eq(g.tat_us, INT64_MIN);
    for (int i = 0; i < 5; i++)
        tg_gcra_take(&g, 123);
    tg_gcra_t before = g;
    expect(tg_gcra_peek(&g, 123), false, 200, 6, 5, 0, "peek full");
    expect(tg_gcra_peek(&g, 323), true, 0, 5, 5, 0, "peek later");
    cr_assert_eq(g.tat_us, before.tat_us);
    /* a take agrees with the peek that preceded it */
    tg_gcra_result_t p = tg_gcra_peek(&g, 323);
    tg_gcra_result_t t = tg_gcra_take(&g, 323);
    cr_assert_eq(p.allowed, t.allowed);
    cr_assert_eq(p.observed, t.observed);
    cr_assert_eq(p.remaining, t.remaining);
    cr_assert_eq(g.tat_us, before.tat_us + 200000);
}

Test(gcra, refusal_leaves_tat_unchanged)
{
    tg_gcra_t g = mk(1, 1000, 1);
    tg_gcra_take(&g, 0);
    int64_t tat = g.tat_us;
    for (uint64_t t = 0; t < 1000; t += 10) {
        tg_gcra_result_t r = tg_gcra_take(&g, t);
        cr_assert_not(r.allowed);
        cr_assert_eq(r.retry_after_ms, 1000 - t);
    }
    cr_assert_eq(g.tat_us, tat);
    cr_assert(tg_gcra_take(&g, 1000).allowed);
}

Test(gcra, burst_above_count)
{
    /* 2/second with burst 4: four pass at once, then one per 500 ms. */
    tg_gcra_t g = mk(2, 1000, 4);
    expect(tg_gcra_take(&g, 0), true, 0, 1, 4, 3, "1");
    expect(tg_gcra_take(&g, 0), true, 0, 2, 4, 2, "2");
    expect(tg_gcra_take(&g, 0), true, 0, 3, 4, 1, "3");
    expect(tg_gcra_take(&g, 0), true, 0, 4, 4, 0, "4");
    expect(tg_gcra_take(&g, 0), false, 500, 5, 4, 0, "5");
    cr_assert_eq(tg_gcra_used(&g, 0), 4);
    expect(tg_gcra_take(&g, 500), true, 0, 4, 4, 0, "t=500");
    cr_assert_eq(tg_gcra_used(&g, 500), 4);
    cr_assert_eq(tg_gcra_used(&g, 1000), 3);
    cr_assert_eq(tg_gcra_used(&g, 1001), 3);
    cr_assert_eq(tg_gcra_used(&g, 2499), 1);
    cr_assert_eq(tg_gcra_used(&g, 2500), 0);
    /* after a full drain the whole burst is back */
    expect(tg_gcra_take(&g, 10000), true, 0, 1, 4, 3, "drained");
}

Test(gcra, remaining_counts_partial_refill)
{
    tg_gcra_t g = mk(5, 1000, 0);
    for (int i = 0; i < 5; i++)
        tg_gcra_take(&g, 0);
    /* at t=450 two intervals have fully refilled, a third is half way */
    expect(tg_gcra_peek(&g, 450), true, 0, 4, 5, 1, "t=450 peek");
    cr_assert_eq(tg_gcra_used(&g, 450), 3);
    expect(tg_gcra_take(&g, 450), true, 0, 4, 5, 1, "t=450 take 1");
    expect(tg_gcra_take(&g, 450), true, 0, 5, 5, 0, "t=450 take 2");
    expect(tg_gcra_take(&g, 450), false, 150, 6, 5, 0, "t=450 take 3");
}

Test(gcra, clock_beyond_the_clamp_fails_closed)
{
    tg_gcra_t g = mk(2, 1000, 0);
    expect(tg_gcra_take(&g, UINT64_MAX), true, 0, 1, 2, 1, "first");
    expect(tg_gcra_take(&g, UINT64_MAX - 5), true, 0, 2, 2, 0, "second");
    /* time is pinned at the clamp, so nothing refills: refused, no wrap */
    expect(tg_gcra_take(&g, UINT64_MAX), false, 500, 3, 2, 0, "third");
    cr_assert_eq(tg_gcra_used(&g, UINT64_MAX), 2);
    cr_assert_lt((uint64_t)g.tat_us, UINT64_C(1) << 53);
}

Test(gcra, clock_stepping_back_does_not_admit_more)
{
    tg_gcra_t g = mk(1, 1000, 1);
    cr_assert(tg_gcra_take(&g, 5000).allowed);
    expect(tg_gcra_take(&g, 4000), false, 2000, 3, 1, 0, "1 s back");
    cr_assert(tg_gcra_take(&g, 6000).allowed);
}

/* --- Window guarantees over long simulated runs. ------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, fixed seed per test */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static uint64_t rng_below(uint64_t n) { return rng() % n; }

/* Largest number of entries of the sorted <ts> inside any closed window
 * [ts[i], ts[i] + w]; every maximal window starts at an admission. */
static size_t max_in_window(const uint64_t *ts, size_t n, uint64_t w)
{
    size_t best = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        if (j < i)
            j = i;
        while (j < n && ts[j] <= ts[i] + w)
            j++;
        if (j - i > best)
            best = j - i;
    }
    return best;
}

/* Drive <g> with dense demand (an attempt every 0..max_gap ms) in segments
 * separated by idle pauses; the first segment starts on a full bucket and
 * lasts <first_dense_ms>. Returns the admitted times (caller frees). */
static uint64_t *simulate(tg_gcra_t *g, uint64_t start, uint64_t first_dense_ms,
                          uint64_t total_ms, uint64_t max_gap, size_t *n_out)
{
    size_t cap = 1024, n = 0;
    uint64_t *ts = malloc(cap * sizeof(*ts));
    cr_assert_not_null(ts);
    uint64_t t = start, seg_end = start + first_dense_ms;
    while (t < start + total_ms) {
        if (t >= seg_end) {
            t += rng_below(15 * 60000); /* idle up to 15 min */
            seg_end = t + 1 + rng_below(90 * 60000);
        }
        if (tg_gcra_take(g, t).allowed) {
            if (n == cap) {
                cap *= 2;
                ts = realloc(ts, cap * sizeof(*ts));
                cr_assert_not_null(ts);
            }
            ts[n++] = t;
        }
        t += rng_below(max_gap + 1);
    }
    *n_out = n;
    return ts;
}

Test(gcra, seven_per_minute_burst_1_never_exceeds_7_in_any_60s)
{
    rng_state = 0x9E3779B97F4A7C15ull;
    tg_gcra_t g = mk(7, 60000, 1);
    size_t n;
    uint64_t *ts = simulate(&g, 1700000000000ull, 2 * 3600000, 48 * 3600000, 200, &n);
    cr_assert_gt(n, 7 * 60 * 10, "admitted %zu", n);
    /* with tau 0 admissions are at least T = 8571.429 ms apart, so 8 calls
     * would need 60000.003 ms, more than any closed 60 s window */
    cr_assert_eq(max_in_window(ts, n, 60000), 7);
    cr_assert_leq(max_in_window(ts, n, 3600000), 420);
    free(ts);
}

Test(gcra, seven_per_minute_default_burst_window_bound)
{
    /* With burst = count GCRA lets a full bucket drain and refill inside one
     * window (DESIGN.md's own vector: 5 at t=0, one more at t=200), so the
     * guarantee is burst + floor(W / T) calls in any closed window W. */
    rng_state = 0xD1B54A32D192ED03ull;
    tg_gcra_t g = mk(7, 60000, 0);
    size_t n;
    uint64_t *ts = simulate(&g, UINT64_C(1) << 42, 2 * 3600000, 48 * 3600000, 200, &n);
    cr_assert_eq(max_in_window(ts, n, 60000), 7 + 6);
    /* 419 T = 3591.43 s fits, 420 T = 3600.0002 s does not */
    cr_assert_eq(max_in_window(ts, n, 3600000), 7 + 419);
    free(ts);
}

/* Demand every ms from a full bucket: the closed window [0, W] admits
 * exactly burst + floor(W / T_us) calls. For periods N does not divide this
 * is where rounding T up shows: for 7/minute over an hour 420 T = 3600000.18
 * ms falls outside, whereas a T rounded down (8571428 us) would put the
 * 420th refill at 3599999.76 ms and admit burst + 420, above the rate. */
Test(gcra, rounding_up_never_admits_more_than_the_rate)
{
    static const struct {
        uint64_t n, p, periods, want;
    } cases[] = {
        {7, 60000, 60, 7 + 419},   {3, 1000, 1000, 3 + 2999}, {10, 1000, 100, 10 + 1000},
        {11, 7000, 100, 11 + 1099}, {100, 60000, 10, 100 + 1000},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tg_gcra_t g = mk(cases[c].n, cases[c].p, 0);
        uint64_t w = cases[c].p * cases[c].periods, admitted = 0;
        for (uint64_t t = 0; t <= w; t++)
            while (tg_gcra_take(&g, t).allowed)
                admitted++;
        cr_assert_eq(admitted, cases[c].want, "%llu/%llu: %llu", (unsigned long long)cases[c].n,
                     (unsigned long long)cases[c].p, (unsigned long long)admitted);
        cr_assert_leq(admitted, cases[c].n + w * cases[c].n / cases[c].p);
    }
}

Test(gcra, random_rates_respect_the_exact_rate_bound)
{
    /* For any rate, including periods N does not divide, any closed window
     * W holds at most burst + floor(W * N / period) admissions. */
    static const uint64_t counts[] = {1, 3, 7, 9, 11, 13, 17, 60, 97, 1000};
    static const uint64_t periods[] = {1000, 7000, 60000, 3600000, 333};
    rng_state = 0x2545F4914F6CDD1Dull;
    for (int round = 0; round < 40; round++) {
        uint64_t N = counts[rng_below(sizeof(counts) / sizeof(counts[0]))];
        uint64_t P = periods[rng_below(sizeof(periods) / sizeof(periods[0]))];
        uint32_t B = (uint32_t)rng_below(2 * N + 2);
        tg_gcra_t g = mk(N, P, B);
        uint64_t burst = B ? B : N;
        size_t n;
        uint64_t gap = P / N / 2 + 1;
        uint64_t *ts = simulate(&g, rng_below(UINT64_C(1) << 42), 4 * P, 40 * P + 200000, gap, &n);
        static const uint64_t mult[] = {1, 3, 10};
        for (int k = 0; k < 3; k++) {
            uint64_t w = P * mult[k];
            size_t got = max_in_window(ts, n, w);
            cr_assert_leq(got, burst + w * N / P, "%llu/%llu burst %llu window %llu: %zu",
                          (unsigned long long)N, (unsigned long long)P,
                          (unsigned long long)burst, (unsigned long long)w, got);
        }
        free(ts);
    }
}

/* --- Property test against an exact reference model. --------------------- */

/* DESIGN.md's GCRA in exact rational arithmetic: every time is scaled by N
 * (unit 1/N ms), so T = period / N becomes the integer P and nothing is
 * rounded. The implementation agrees with it exactly whenever T is a whole
 * number of microseconds (period_ms * 1000 divisible by N). */
typedef struct ref_gcra {
    int64_t n, p, burst;
    bool has_tat;
    int64_t tat; /* in 1/N ms */
} ref_gcra_t;

static int64_t ref_ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

static tg_gcra_result_t ref_take(ref_gcra_t *m, uint64_t now_ms)
{
    tg_gcra_result_t r = {0};
    int64_t t = (int64_t)now_ms * m->n;
    int64_t tau = m->p * (m->burst - 1);
    int64_t tat = m->has_tat && m->tat > t ? m->tat : t;
    int64_t ahead = tat - t;
    r.cap = (uint64_t)m->burst;
    r.observed = (uint64_t)(ref_ceil_div(ahead, m->p) + 1);
    if (ahead > tau) {
        r.retry_after_ms = (uint64_t)ref_ceil_div(ahead - tau, m->n);
        return r;
    }
    r.allowed = true;
    m->has_tat = true;
    m->tat = tat + m->p;
    int64_t after = ahead + m->p;
    r.remaining = after > tau ? 0 : (uint64_t)((tau - after) / m->p + 1);
    return r;
}

static uint64_t ref_used(const ref_gcra_t *m, uint64_t now_ms)
{
    int64_t t = (int64_t)now_ms * m->n;
    if (!m->has_tat || m->tat <= t)
        return 0;
    int64_t used = ref_ceil_div(m->tat - t, m->p);
    return (uint64_t)(used < m->burst ? used : m->burst);
}

Test(gcra, property_matches_exact_reference_model)
{
    static const uint64_t counts[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 25, 40, 60, 100, 125, 1000};
    static const uint64_t periods[] = {1, 3, 7, 50, 1000, 3000, 60000, 120000, 3600000};
    rng_state = 0x5DEECE66Dull;
    int configs = 0;
    while (configs < 300) {
        uint64_t N = counts[rng_below(sizeof(counts) / sizeof(counts[0]))];
        uint64_t P = periods[rng_below(sizeof(periods) / sizeof(periods[0]))];
        if ((P * 1000) % N != 0)
            continue;
        configs++;
        uint32_t B = rng_below(3) == 0 ? 0 : (uint32_t)(1 + rng_below(2 * N + 3));
        tg_gcra_t g = mk(N, P, B);
        ref_gcra_t m = {.n = (int64_t)N, .p = (int64_t)P, .burst = B ? B : (int64_t)N};
        /* start anywhere from 0 to 2^42 ms, the top well inside the clamp */
        uint64_t t = rng_below(2) ? rng_below(1000) : (UINT64_C(1) << 42) - rng_below(1u << 20);
        uint64_t t_ms_per_call = P / N; /* whole ms part of T, may be 0 */
        for (int step = 0; step < 2000; step++) {
            switch (rng_below(8)) {
            case 0: /* same instant: bursts */
            case 1:
                break;
            case 2: /* well below T */
                t += rng_below(t_ms_per_call / 4 + 1);
                break;
            case 3: /* around T */
                t += rng_below(2 * t_ms_per_call + 2);
                break;
            case 4: /* around the whole burst */
                t += rng_below(P * (uint64_t)m.burst / N + 2);
                break;
            case 5: /* long idle */
                t += rng_below(4 * P + 1);
                break;
            case 6: { /* clock steps back a little */
                uint64_t back = rng_below(t_ms_per_call + 2);
                t -= back <= t ? back : 0;
                break;
            }
            default:
                t += 1;
                break;
            }
            tg_gcra_result_t pk = tg_gcra_peek(&g, t);
            tg_gcra_result_t want = ref_take(&m, t);
            tg_gcra_result_t got = tg_gcra_take(&g, t);
            cr_assert_eq(got.allowed, want.allowed, "%llu/%llu b%u step %d t %llu: allowed",
                         (unsigned long long)N, (unsigned long long)P, B, step,
                         (unsigned long long)t);
            cr_assert_eq(got.retry_after_ms, want.retry_after_ms,
                         "%llu/%llu b%u step %d: retry %llu vs %llu", (unsigned long long)N,
                         (unsigned long long)P, B, step, (unsigned long long)got.retry_after_ms,
                         (unsigned long long)want.retry_after_ms);
            cr_assert_eq(got.observed, want.observed, "step %d: observed", step);
            cr_assert_eq(got.cap, want.cap, "step %d: cap", step);
            cr_assert_eq(got.remaining, want.remaining, "step %d: remaining", step);
            cr_assert_eq(pk.allowed, got.allowed, "step %d: peek allowed", step);
            cr_assert_eq(pk.retry_after_ms, got.retry_after_ms, "step %d: peek retry", step);
            cr_assert_eq(pk.observed, got.observed, "step %d: peek observed", step);
            cr_assert_eq(pk.remaining, got.remaining, "step %d: peek remaining", step);
            uint64_t probe = t + rng_below(P + 1);
            cr_assert_eq(tg_gcra_used(&g, probe), ref_used(&m, probe), "step %d: used", step);
            /* a retry_after is exact: one ms earlier refuses, at it admits */
            if (!got.allowed) {
                cr_assert(tg_gcra_peek(&g, t + got.retry_after_ms).allowed, "step %d", step);
                cr_assert_not(tg_gcra_peek(&g, t + got.retry_after_ms - 1).allowed, "step %d",
                              step);
            }
        }
    }
}
