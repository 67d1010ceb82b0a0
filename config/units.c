/* Unit parsing and formatting (see units.h for the contract).
 *
 * Every parser is "digits, then an exact suffix": no sign, no spaces, no
 * exponent, no locale. Values are accumulated in uint64_t with an explicit
 * overflow check before each multiply, so "99999999999999999999Gi" is
 * -ERANGE, never a wrapped small number that would silently loosen a limit.
 */
#include "config/units.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Messages: static, so callers may keep the pointer without copying. */
static const char why_bytes[] =
    "expected a whole number of bytes, Ki, Mi, Gi or Ti, e.g. 512Ki, 4Mi or 1Gi";
static const char why_bytes_zero[] = "expected a size above zero, e.g. 4Mi";
static const char why_bytes_big[] = "expected a size below 2^64 bytes, e.g. 1Gi";
static const char why_dur[] =
    "expected a whole number with a unit ms, s, m or h, e.g. 250ms, 30s, 5m or 1h";
static const char why_dur_zero[] = "expected a duration above zero, e.g. 30s";
static const char why_dur_big[] = "expected a duration below 2^64 milliseconds, e.g. 1h";
static const char why_cpu[] =
    "expected millicores or cores, e.g. 500m, 1 or 0.5 (at most 3 decimals)";
static const char why_cpu_zero[] = "expected a CPU quantity above zero, e.g. 500m";
static const char why_cpu_big[] = "expected a CPU quantity below 2^64 millicores, e.g. 2";
static const char why_rate[] = "expected N/second, N/minute or N/hour, e.g. 100/minute";
static const char why_rate_zero[] = "expected at least 1 call per period, e.g. 100/minute";
static const char why_rate_big[] = "expected a count below 2^64 calls per period, e.g. 100/minute";
static const char why_bw[] =
    "expected a whole number with Kbps, Mbps or Gbps, e.g. 512Kbps, 10Mbps or 1Gbps";
static const char why_bw_zero[] = "expected a bandwidth above zero, e.g. 10Mbps";
static const char why_bw_big[] = "expected a bandwidth below 2^64 bits per second, e.g. 1Gbps";
static const char why_count[] = "expected a whole number, e.g. 5";
static const char why_count_zero[] = "expected a whole number of at least 1";
static const char why_count_big[] = "expected a smaller number (the limit has a ceiling)";

typedef struct suffix {
    const char *text;
    uint64_t mult;
} suffix_t;

static int fail(const char **why, const char *msg, int rc)
{
    if (why)
        *why = msg;
    return rc;
}

/* Read the decimal digits at <s> into <*v>. Returns the first byte after
 * them, or NULL when <s> does not start with a digit. <*ovf> is set when
 * the digits do not fit in 64 bits (the scan still goes to their end so the
 * suffix can be checked first: a malformed value is reported as such). */
static const char *digits(const char *s, uint64_t *v, bool *ovf)
{
    uint64_t n = 0;
    const char *p = s;

    *ovf = false;
    while (*p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        if (n > (UINT64_MAX - d) / 10)
            *ovf = true;
        else
            n = n * 10 + d;
        p++;
    }
    if (p == s)
        return NULL;
    *v = n;
    return p;
}

/* Match <p> exactly against one of <tab>; returns the entry or NULL. */
static const suffix_t *match(const char *p, const suffix_t *tab, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p, tab[i].text) == 0)
            return &tab[i];
    return NULL;
}

/* "digits + suffix" parsers share this body; the messages differ. */
static int scaled(const char *s, const suffix_t *tab, size_t ntab, uint64_t *out, const char **why,
                  const char *w_bad, const char *w_zero, const char *w_big)
{
    uint64_t n;
    bool ovf;
    const char *p;
    const suffix_t *sf;

    if (!s)
        return fail(why, w_bad, -EINVAL);
    p = digits(s, &n, &ovf);
    if (!p)
        return fail(why, w_bad, -EINVAL);
    sf = match(p, tab, ntab);
    if (!sf)
        return fail(why, w_bad, -EINVAL);
    if (ovf || n > UINT64_MAX / sf->mult)
        return fail(why, w_big, -ERANGE);
    if (n == 0)
        return fail(why, w_zero, -ERANGE);
    *out = n * sf->mult;
    return 0;
}

static const suffix_t bytes_sfx[] = {
    {"", 1}, {"Ki", 1ull << 10}, {"Mi", 1ull << 20}, {"Gi", 1ull << 30}, {"Ti", 1ull << 40},
};

int tg_unit_bytes(const char *s, uint64_t *out, const char **why)
{
    return scaled(s, bytes_sfx, sizeof bytes_sfx / sizeof bytes_sfx[0], out, why, why_bytes,
                  why_bytes_zero, why_bytes_big);
}

static const suffix_t dur_sfx[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60ull * 1000},
    {"h", 3600ull * 1000},
};

int tg_unit_duration_ms(const char *s, uint64_t *out, const char **why)
{
    return scaled(s, dur_sfx, sizeof dur_sfx / sizeof dur_sfx[0], out, why, why_dur, why_dur_zero,
                  why_dur_big);
}

static const suffix_t bw_sfx[] = {
    {"Kbps", 1000ull},
    {"Mbps", 1000ull * 1000},
    {"Gbps", 1000ull * 1000 * 1000},
};

int tg_unit_bandwidth_bps(const char *s, uint64_t *out, const char **why)
{
    return scaled(s, bw_sfx, sizeof bw_sfx / sizeof bw_sfx[0], out, why, why_bw, why_bw_zero,
                  why_bw_big);
}

int tg_unit_millicores(const char *s, uint64_t *out, const char **why)
{
    uint64_t whole, frac = 0, v;
    bool ovf;
    const char *p;

    if (!s)
        return fail(why, why_cpu, -EINVAL);
    p = digits(s, &whole, &ovf);
    if (!p)
        return fail(why, why_cpu, -EINVAL);
    if (p[0] == 'm' && p[1] == '\0') {
        if (ovf)
            return fail(why, why_cpu_big, -ERANGE);
        v = whole;
    } else {
        if (*p == '.') {
            /* 1 to 3 decimals, scaled to thousandths: "0.5" = 500m. */
            int nd = 0;
            p++;
            while (*p >= '0' && *p <= '9') {
                if (++nd > 3)
                    return fail(why, why_cpu, -EINVAL);
                frac = frac * 10 + (uint64_t)(*p - '0');
                p++;
            }
            if (nd == 0)
                return fail(why, why_cpu, -EINVAL);
            for (; nd < 3; nd++)
                frac *= 10;
        }
        if (*p != '\0')
            return fail(why, why_cpu, -EINVAL);
        if (ovf || whole > (UINT64_MAX - frac) / 1000)
            return fail(why, why_cpu_big, -ERANGE);
        v = whole * 1000 + frac;
    }
    if (v == 0)
        return fail(why, why_cpu_zero, -ERANGE);
    *out = v;
    return 0;
}

static const suffix_t period_sfx[] = {
    {"second", 1000}, {"sec", 1000}, {"s", 1000},       {"minute", 60000},
    {"min", 60000},   {"m", 60000},  {"hour", 3600000}, {"h", 3600000},
};

int tg_unit_rate(const char *s, tg_rate_t *out, const char **why)
{
    uint64_t n;
    bool ovf;
    const char *p;
    const suffix_t *sf;

    if (!s)
        return fail(why, why_rate, -EINVAL);
    p = digits(s, &n, &ovf);
    if (!p || *p != '/')
        return fail(why, why_rate, -EINVAL);
    sf = match(p + 1, period_sfx, sizeof period_sfx / sizeof period_sfx[0]);
    if (!sf)
        return fail(why, why_rate, -EINVAL);
    if (ovf)
        return fail(why, why_rate_big, -ERANGE);
    if (n == 0)
        return fail(why, why_rate_zero, -ERANGE);
    out->count = n;
    out->period_ms = sf->mult;
    return 0;
}

int tg_unit_count(const char *s, uint64_t max, uint64_t *out, const char **why)
{
    uint64_t n;
    bool ovf;
    const char *p;

    if (!s)
        return fail(why, why_count, -EINVAL);
    p = digits(s, &n, &ovf);
    if (!p || *p != '\0')
        return fail(why, why_count, -EINVAL);
    if (ovf || n > max)
        return fail(why, why_count_big, -ERANGE);
    if (n == 0)
        return fail(why, why_count_zero, -ERANGE);
    *out = n;
    return 0;
}

/* Formatting picks the largest unit that divides the value exactly, so the
 * text parses back to the same number ("1536" rather than "1.5Ki", which
 * the parser refuses). */

/* <v> with the largest of <sfx>[<from>..<n>) that divides it exactly,
 * else the bare number followed by <tail>. */
static void fmt_scaled(char *buf, int cap, uint64_t v, const suffix_t *sfx, size_t n, size_t from,
                       const char *tail)
{
    if (!buf || cap <= 0)
        return;
    for (size_t i = n; i-- > from;) {
        if (v != 0 && v % sfx[i].mult == 0) {
            snprintf(buf, (size_t)cap, "%llu%s", (unsigned long long)(v / sfx[i].mult),
                     sfx[i].text);
            return;
        }
    }
    snprintf(buf, (size_t)cap, "%llu%s", (unsigned long long)v, tail);
}

void tg_unit_fmt_bytes(char *buf, int cap, uint64_t bytes)
{
    fmt_scaled(buf, cap, bytes, bytes_sfx, sizeof bytes_sfx / sizeof bytes_sfx[0], 1, "");
}

void tg_unit_fmt_duration(char *buf, int cap, uint64_t ms)
{
    fmt_scaled(buf, cap, ms, dur_sfx, sizeof dur_sfx / sizeof dur_sfx[0], 1, "ms");
}

void tg_unit_fmt_bandwidth(char *buf, int cap, uint64_t bps)
{
    fmt_scaled(buf, cap, bps, bw_sfx, sizeof bw_sfx / sizeof bw_sfx[0], 0, " bit/s");
}

void tg_unit_fmt_rate(char *buf, int cap, tg_rate_t r)
{
    const char *per = NULL;
    char dur[32];

    if (!buf || cap <= 0)
        return;
    switch (r.period_ms) {
    case 1000:
        per = "second";
        break;
    case 60000:
        per = "minute";
        break;
    case 3600000:
        per = "hour";
        break;
    default:
        /* Not produced by the parser; still printed unambiguously. */
        tg_unit_fmt_duration(dur, (int)sizeof dur, r.period_ms);
        per = dur;
        break;
    }
    snprintf(buf, (size_t)cap, "%llu/%s", (unsigned long long)r.count, per);
}

