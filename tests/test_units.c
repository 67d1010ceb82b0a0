/* Unit parsing: every unit, good and bad, boundaries and overflow. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "config/units.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct good {
    const char *in;
    uint64_t want;
} good_t;

typedef struct bad {
    const char *in;
    int rc;
} bad_t;

/* A failed parse must leave <*out> untouched and give a static message. */
#define CHECK_BAD(fn, tab)                                                                         \
    for (size_t i = 0; i < N(tab); i++) {                                                          \
        uint64_t out = 0xdeadbeef;                                                                 \
        const char *why = NULL;                                                                    \
        int rc = fn(tab[i].in, &out, &why);                                                        \
        cr_expect_eq(rc, tab[i].rc, "%s(\"%s\") = %d, want %d", #fn, tab[i].in, rc, tab[i].rc);    \
        cr_expect_eq(out, 0xdeadbeef, "%s(\"%s\") wrote out", #fn, tab[i].in);                     \
        cr_expect(why != NULL && strncmp(why, "expected ", 9) == 0, "%s(\"%s\") why", #fn,         \
                  tab[i].in);                                                                      \
    }

#define CHECK_GOOD(fn, tab)                                                                        \
    for (size_t i = 0; i < N(tab); i++) {                                                          \
        uint64_t out = 0;                                                                          \
        const char *why = "untouched";                                                             \
        int rc = fn(tab[i].in, &out, &why);                                                        \
        cr_expect_eq(rc, 0, "%s(\"%s\") = %d", #fn, tab[i].in, rc);                                \
        cr_expect_eq(out, tab[i].want, "%s(\"%s\") = %llu, want %llu", #fn, tab[i].in,             \
                     (unsigned long long)out, (unsigned long long)tab[i].want);                    \
        cr_expect_str_eq(why, "untouched");                                                        \
    }

/* ---- sizes ---- */

static const good_t bytes_good[] = {
    {"1", 1},
    {"64", 64},
    {"4194304", 4194304},
    {"512Ki", 512ull * 1024},
    {"4Mi", 4ull << 20},
    {"1Gi", 1ull << 30},
    {"2Ti", 2ull << 40},
    {"1Ki", 1024},
    {"0001Ki", 1024},
    {"18446744073709551615", UINT64_MAX},
    {"16777215Ti", 16777215ull << 40},
};

static const bad_t bytes_bad[] = {
    {"", -EINVAL},
    {"Mi", -EINVAL},
    {"Ki", -EINVAL},
    {"1.5Mi", -EINVAL},
    {"0.5Gi", -EINVAL},
    {"4MiB", -EINVAL},
    {"512KiB", -EINVAL},
    {"4M", -EINVAL},
    {"4MB", -EINVAL},
    {"4mi", -EINVAL},
    {"4k", -EINVAL},
    {"4K", -EINVAL},
    {"4Pi", -EINVAL},
    {" 4Mi", -EINVAL},
    {"4Mi ", -EINVAL},
    {"4 Mi", -EINVAL},
    {"-1", -EINVAL},
    {"-4Mi", -EINVAL},
    {"+4Mi", -EINVAL},
    {"1e6", -EINVAL},
    {"0x10", -EINVAL},
    {"4Mi4", -EINVAL},
    {"99999999999999999999x", -EINVAL},
    {"0", -ERANGE},
    {"0Mi", -ERANGE},
    {"000", -ERANGE},
    {"18446744073709551616", -ERANGE},
    {"99999999999999999999Gi", -ERANGE},
    {"16777216Ti", -ERANGE},
    {"17179869184Gi", -ERANGE},
};

Test(units, bytes_good)
{
    CHECK_GOOD(tg_unit_bytes, bytes_good);
}
Test(units, bytes_bad)
{
    CHECK_BAD(tg_unit_bytes, bytes_bad);
}

Test(units, bytes_messages)
{
    uint64_t v;
    const char *why = NULL;

    cr_assert_eq(tg_unit_bytes("1.5Mi", &v, &why), -EINVAL);
    cr_assert_str_eq(why,
                     "expected a whole number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi");
    cr_assert_eq(tg_unit_bytes("0", &v, &why), -ERANGE);
    cr_assert_str_eq(why, "expected a size above zero, e.g. 4Mi");
    cr_assert_eq(tg_unit_bytes("99999999999999999999Gi", &v, &why), -ERANGE);
    cr_assert_str_eq(why, "expected a size below 2^64 bytes, e.g. 1Gi");
    /* why may be NULL */
    cr_assert_eq(tg_unit_bytes("x", &v, NULL), -EINVAL);
    cr_assert_eq(tg_unit_bytes(NULL, &v, &why), -EINVAL);
}

/* ---- durations ---- */

static const good_t dur_good[] = {
    {"1ms", 1},
    {"250ms", 250},
    {"1s", 1000},
    {"30s", 30000},
    {"5m", 300000},
    {"1m", 60000},
    {"1h", 3600000},
    {"24h", 86400000},
    {"1000ms", 1000},
    {"18446744073709551615ms", UINT64_MAX},
    {"5124095576030h", 5124095576030ull * 3600000},
};

static const bad_t dur_bad[] = {
    {"", -EINVAL},
    {"30", -EINVAL},
    {"1000", -EINVAL},
    {"s", -EINVAL},
    {"ms", -EINVAL},
    {"1.5s", -EINVAL},
    {"30sec", -EINVAL},
    {"5min", -EINVAL},
    {"1d", -EINVAL},
    {"1us", -EINVAL},
    {"30S", -EINVAL},
    {"1H", -EINVAL},
    {"1h30m", -EINVAL},
    {" 30s", -EINVAL},
    {"30s ", -EINVAL},
    {"30 s", -EINVAL},
    {"-5s", -EINVAL},
    {"+5s", -EINVAL},
    {"0", -EINVAL},
    {"0s", -ERANGE},
    {"0ms", -ERANGE},
    {"0h", -ERANGE},
    {"18446744073709551616ms", -ERANGE},
    {"18446744073709552s", -ERANGE},
    {"5124095576031h", -ERANGE},
    {"99999999999999999999h", -ERANGE},
};

Test(units, duration_good)
{
    CHECK_GOOD(tg_unit_duration_ms, dur_good);
}
Test(units, duration_bad)
{
    CHECK_BAD(tg_unit_duration_ms, dur_bad);
}

Test(units, duration_messages)
{
    uint64_t v;
    const char *why;

    cr_assert_eq(tg_unit_duration_ms("30", &v, &why), -EINVAL);
    cr_assert_str_eq(
        why, "expected a whole number with a unit ms, s, m or h, e.g. 250ms, 30s, 5m or 1h");
    cr_assert_eq(tg_unit_duration_ms("0s", &v, &why), -ERANGE);
    cr_assert_str_eq(why, "expected a duration above zero, e.g. 30s");
    cr_assert_eq(tg_unit_duration_ms("99999999999999999999h", &v, &why), -ERANGE);
    cr_assert_str_eq(why, "expected a duration below 2^64 milliseconds, e.g. 1h");
}

/* ---- CPU ---- */

static const good_t cpu_good[] = {
    {"500m", 500},
    {"1m", 1},
    {"1000m", 1000},
    {"1", 1000},
    {"2", 2000},
    {"0.5", 500},
    {"0.001", 1},
    {"2.125", 2125},
    {"1.0", 1000},
    {"1.50", 1500},
    {"0.25", 250},
    {"18446744073709551615m", UINT64_MAX},
    {"18446744073709551.615", UINT64_MAX},
    {"18446744073709551", 18446744073709551000ull},
};

static const bad_t cpu_bad[] = {
    {"", -EINVAL},
    {"m", -EINVAL},
    {".5", -EINVAL},
    {"1.", -EINVAL},
    {"0.0005", -EINVAL},
    {"1.2345", -EINVAL},
    {"0.5m", -EINVAL},
    {"500M", -EINVAL},
    {"500mc", -EINVAL},
    {"1,5", -EINVAL},
    {" 1", -EINVAL},
    {"1 ", -EINVAL},
    {"-1", -EINVAL},
    {"+1", -EINVAL},
    {"1e3m", -EINVAL},
    {"1.5.5", -EINVAL},
    {"0", -ERANGE},
    {"0m", -ERANGE},
    {"0.0", -ERANGE},
    {"0.000", -ERANGE},
    {"18446744073709551616m", -ERANGE},
    {"18446744073709552", -ERANGE},
    {"18446744073709551.616", -ERANGE},
    {"99999999999999999999", -ERANGE},
};

Test(units, cpu_good)
{
    CHECK_GOOD(tg_unit_millicores, cpu_good);
}
Test(units, cpu_bad)
{
    CHECK_BAD(tg_unit_millicores, cpu_bad);
}

Test(units, cpu_messages)
{
    uint64_t v;
    const char *why;

    cr_assert_eq(tg_unit_millicores("1.2345", &v, &why), -EINVAL);
    cr_assert_str_eq(why, "expected millicores or cores, e.g. 500m, 1 or 0.5 (at most 3 decimals)");
    cr_assert_eq(tg_unit_millicores("0m", &v, &why), -ERANGE);
    cr_assert_str_eq(why, "expected a CPU quantity above zero, e.g. 500m");
}

/* ---- rates ---- */

typedef struct rgood {
    const char *in;
    uint64_t count, period_ms;
} rgood_t;

static const rgood_t rate_good[] = {
    {"100/minute", 100, 60000},
    {"10/s", 10, 1000},
    {"10/sec", 10, 1000},
    {"10/second", 10, 1000},
    {"5/m", 5, 60000},
    {"5/min", 5, 60000},
    {"7/minute", 7, 60000},
    {"1/h", 1, 3600000},
    {"1/hour", 1, 3600000},
    {"1/second", 1, 1000},
    {"18446744073709551615/hour", UINT64_MAX, 3600000},
};

static const bad_t rate_bad[] = {
    {"", -EINVAL},
    {"100", -EINVAL},
    {"100/", -EINVAL},
    {"/minute", -EINVAL},
    {"100/fortnight", -EINVAL},
    {"100/day", -EINVAL},
    {"100/minutes", -EINVAL},
    {"100/Minute", -EINVAL},
    {"100/ms", -EINVAL},
    {"100/5m", -EINVAL},
    {"100 /minute", -EINVAL},
    {"100/ minute", -EINVAL},
    {" 100/minute", -EINVAL},
    {"100/minute ", -EINVAL},
    {"1.5/s", -EINVAL},
    {"-1/s", -EINVAL},
    {"100per minute", -EINVAL},
    {"100//minute", -EINVAL},
    {"0/minute", -ERANGE},
    {"0/s", -ERANGE},
    {"18446744073709551616/hour", -ERANGE},
    {"99999999999999999999/s", -ERANGE},
};

Test(units, rate_good)
{
    for (size_t i = 0; i < N(rate_good); i++) {
        tg_rate_t r = {0, 0};
        int rc = tg_unit_rate(rate_good[i].in, &r, NULL);
        cr_expect_eq(rc, 0, "%s", rate_good[i].in);
        cr_expect_eq(r.count, rate_good[i].count, "%s", rate_good[i].in);
        cr_expect_eq(r.period_ms, rate_good[i].period_ms, "%s", rate_good[i].in);
    }
}

Test(units, rate_bad)
{
    for (size_t i = 0; i < N(rate_bad); i++) {
        tg_rate_t r = {77, 88};
        const char *why = NULL;
        int rc = tg_unit_rate(rate_bad[i].in, &r, &why);
        cr_expect_eq(rc, rate_bad[i].rc, "%s: %d", rate_bad[i].in, rc);
        cr_expect(r.count == 77 && r.period_ms == 88, "%s wrote out", rate_bad[i].in);
        cr_expect(why && strncmp(why, "expected ", 9) == 0, "%s why", rate_bad[i].in);
    }
}

Test(units, rate_messages)
{
    tg_rate_t r;
    const char *why;

    cr_assert_eq(tg_unit_rate("100/fortnight", &r, &why), -EINVAL);
    cr_assert_str_eq(why, "expected N/second, N/minute or N/hour, e.g. 100/minute");
    cr_assert_eq(tg_unit_rate("0/minute", &r, &why), -ERANGE);
    cr_assert_str_eq(why, "expected at least 1 call per period, e.g. 100/minute");
}

/* ---- bandwidth ---- */

static const good_t bw_good[] = {
    {"1Kbps", 1000},
    {"512Kbps", 512000},
    {"10Mbps", 10000000},
    {"1Gbps", 1000000000},
    {"18446744073709551Kbps", 18446744073709551000ull},
    {"18446744073Gbps", 18446744073000000000ull},
};

static const bad_t bw_bad[] = {
    {"", -EINVAL},
    {"10", -EINVAL},
    {"Mbps", -EINVAL},
    {"10bps", -EINVAL},
    {"10mbps", -EINVAL},
    {"10MBps", -EINVAL},
    {"10Mb", -EINVAL},
    {"10Mi", -EINVAL},
    {"1.5Mbps", -EINVAL},
    {"10 Mbps", -EINVAL},
    {"-10Mbps", -EINVAL},
    {"10Tbps", -EINVAL},
    {"0Mbps", -ERANGE},
    {"0Kbps", -ERANGE},
    {"18446744074Gbps", -ERANGE},
    {"18446744073709552Kbps", -ERANGE},
    {"99999999999999999999Gbps", -ERANGE},
};

Test(units, bandwidth_good)
{
    CHECK_GOOD(tg_unit_bandwidth_bps, bw_good);
}
Test(units, bandwidth_bad)
{
    CHECK_BAD(tg_unit_bandwidth_bps, bw_bad);
}

/* ---- counts ---- */

static int count_100(const char *s, uint64_t *out, const char **why)
{
    return tg_unit_count(s, 100, out, why);
}

static const good_t count_good[] = {
    {"1", 1},
    {"5", 5},
    {"100", 100},
    {"007", 7},
};

static const bad_t count_bad[] = {
    {"", -EINVAL},
    {"-1", -EINVAL},
    {"+1", -EINVAL},
    {"1.0", -EINVAL},
    {"5 ", -EINVAL},
    {" 5", -EINVAL},
    {"5x", -EINVAL},
    {"1e2", -EINVAL},
    {"five", -EINVAL},
    {"0", -ERANGE},
    {"000", -ERANGE},
    {"101", -ERANGE},
    {"18446744073709551615", -ERANGE},
    {"99999999999999999999", -ERANGE},
};

Test(units, count_good)
{
    CHECK_GOOD(count_100, count_good);
}
Test(units, count_bad)
{
    CHECK_BAD(count_100, count_bad);
}

Test(units, count_full_range)
{
    uint64_t v;

    cr_assert_eq(tg_unit_count("18446744073709551615", UINT64_MAX, &v, NULL), 0);
    cr_assert_eq(v, UINT64_MAX);
    cr_assert_eq(tg_unit_count("18446744073709551616", UINT64_MAX, &v, NULL), -ERANGE);
    cr_assert_eq(tg_unit_count("1", 0, &v, NULL), -ERANGE);
}

/* ---- formatting ---- */

Test(units, fmt_bytes)
{
    static const struct {
        uint64_t v;
        const char *want;
    } t[] = {
        {0, "0"},
        {1, "1"},
        {1000, "1000"},
        {1024, "1Ki"},
        {1536, "1536"},
        {4194304, "4Mi"},
        {512 * 1024, "512Ki"},
        {1ull << 30, "1Gi"},
        {2ull << 40, "2Ti"},
        {(1ull << 40) + 1024, "1073741825Ki"},
        {UINT64_MAX, "18446744073709551615"},
    };
    char buf[32];

    for (size_t i = 0; i < N(t); i++) {
        tg_unit_fmt_bytes(buf, (int)sizeof buf, t[i].v);
        cr_expect_str_eq(buf, t[i].want);
        /* Round trip through the parser (zero is refused there). */
        if (t[i].v) {
            uint64_t back = 0;
            cr_expect_eq(tg_unit_bytes(buf, &back, NULL), 0);
            cr_expect_eq(back, t[i].v);
        }
    }
}

Test(units, fmt_duration)
{
    static const struct {
        uint64_t v;
        const char *want;
    } t[] = {
        {0, "0ms"},       {1, "1ms"},      {250, "250ms"},   {1000, "1s"},
        {1500, "1500ms"}, {30000, "30s"},  {60000, "1m"},    {90000, "90s"},
        {300000, "5m"},   {3600000, "1h"}, {5400000, "90m"}, {86400000, "24h"},
    };
    char buf[32];

    for (size_t i = 0; i < N(t); i++) {
        tg_unit_fmt_duration(buf, (int)sizeof buf, t[i].v);
        cr_expect_str_eq(buf, t[i].want);
        if (t[i].v) {
            uint64_t back = 0;
            cr_expect_eq(tg_unit_duration_ms(buf, &back, NULL), 0);
            cr_expect_eq(back, t[i].v);
        }
    }
}

Test(units, fmt_rate)
{
    char buf[48];

    tg_unit_fmt_rate(buf, (int)sizeof buf, (tg_rate_t){10, 60000});
    cr_expect_str_eq(buf, "10/minute");
    tg_unit_fmt_rate(buf, (int)sizeof buf, (tg_rate_t){5, 1000});
    cr_expect_str_eq(buf, "5/second");
    tg_unit_fmt_rate(buf, (int)sizeof buf, (tg_rate_t){1, 3600000});
    cr_expect_str_eq(buf, "1/hour");
    tg_unit_fmt_rate(buf, (int)sizeof buf, (tg_rate_t){3, 5000});
    cr_expect_str_eq(buf, "3/5s");
}

Test(units, fmt_truncates_and_terminates)
{
    char buf[4] = "xxx";

    tg_unit_fmt_bytes(buf, (int)sizeof buf, 4194304000ull);
    cr_expect_str_eq(buf, "400");
    tg_unit_fmt_duration(buf, 1, 250);
    cr_expect_str_eq(buf, "");
    memcpy(buf, "xxx", 4);
    tg_unit_fmt_rate(buf, 0, (tg_rate_t){1, 1000});
    cr_expect_str_eq(buf, "xxx");
    tg_unit_fmt_rate(buf, (int)sizeof buf, (tg_rate_t){100, 60000});
    cr_expect_str_eq(buf, "100");
}
