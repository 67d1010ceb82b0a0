/* jsonw: bounds (no write past the capacity, sticky failure), escaping,
 * numbers, RFC 3339 timestamps and their range, the hot path's digits and
 * short copies. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config/jsonw.h"

static char out[512];

static const char *ts(int64_t ms)
{
    tg_jw_t w;
    tg_jw_init(&w, out, sizeof out);
    tg_jw_ts(&w, ms);
    cr_assert_geq(tg_jw_end(&w), 0);
    return out;
}

Test(jsonw, timestamps)
{
    cr_assert_str_eq(ts(1768564800123), "\"2026-01-16T12:00:00.123Z\"");
    cr_assert_str_eq(ts(0), "\"1970-01-01T00:00:00.000Z\"");
    cr_assert_str_eq(ts(-1), "\"1969-12-31T23:59:59.999Z\"");
    cr_assert_str_eq(ts(951782400000), "\"2000-02-29T00:00:00.000Z\"");
    cr_assert_str_eq(ts(4107542400000), "\"2100-03-01T00:00:00.000Z\"");
    cr_assert_str_eq(ts(253402300799999), "\"9999-12-31T23:59:59.999Z\"");
    cr_assert_str_eq(ts(-62167219200000), "\"0000-01-01T00:00:00.000Z\"");
    tg_jw_t w;
    tg_jw_init(&w, out, sizeof out);
    tg_jw_ts(&w, 253402300800000);
    cr_assert_eq(tg_jw_end(&w), -EINVAL);
    tg_jw_init(&w, out, sizeof out);
    tg_jw_ts(&w, -62167219200001);
    tg_jw_lit(&w, "x");
    cr_assert_eq(tg_jw_end(&w), -EINVAL, "the first failure sticks");
}

Test(jsonw, strings_and_numbers)
{
    tg_jw_t w;
    tg_jw_init(&w, out, sizeof out);
    tg_jw_lit(&w, "[");
    tg_jw_str(&w, "a\"b\\c\n\t\x01\x1f caf\xc3\xa9 \xff\xc3");
    tg_jw_lit(&w, ",");
    tg_jw_i64(&w, INT64_MIN);
    tg_jw_lit(&w, ",");
    tg_jw_u64(&w, UINT64_MAX);
    tg_jw_lit(&w, ",");
    tg_jw_raw(&w, "{}", 2);
    tg_jw_lit(&w, "]");
    long n = tg_jw_end(&w);
    const char *want = "[\"a\\\"b\\\\c\\n\\t\\u0001\\u001f caf\xc3\xa9 \\ufffd\\ufffd\","
                       "-9223372036854775808,18446744073709551615,{}]";
    cr_assert_str_eq(out, want);
    cr_assert_eq(n, (long)strlen(want));
    /* jansson reads integers past INT64_MAX only as reals */
    json_t *j = json_loads(out, JSON_DECODE_INT_AS_REAL, NULL);
    cr_assert_not_null(j, "always parses");
    json_decref(j);
    /* esc takes a length: NUL bytes inside are escaped, not an end */
    tg_jw_init(&w, out, sizeof out);
    tg_jw_esc(&w, "a\0b", 3);
    tg_jw_end(&w);
    cr_assert_str_eq(out, "a\\u0000b");
}

Test(jsonw, bounds)
{
    /* "abc" needs 4 bytes with its NUL: every smaller capacity fails
     * without writing past it */
    char b[8];
    for (size_t cap = 0; cap < 4; cap++) {
        memset(b, 'Z', sizeof b);
        tg_jw_t w;
        tg_jw_init(&w, b, cap);
        tg_jw_lit(&w, "abc");
        cr_assert_eq(tg_jw_end(&w), -ENOSPC, "cap %zu", cap);
        cr_assert_eq(b[cap], 'Z');
    }
    tg_jw_t w;
    tg_jw_init(&w, b, 4);
    tg_jw_lit(&w, "abc");
    cr_assert_eq(tg_jw_end(&w), 3);
    cr_assert_str_eq(b, "abc");
    /* a failed write sticks even when a later, smaller one would fit */
    tg_jw_init(&w, b, 4);
    tg_jw_lit(&w, "abcdef");
    tg_jw_lit(&w, "a");
    cr_assert_eq(tg_jw_end(&w), -ENOSPC);
    /* an escape is never cut in half */
    tg_jw_init(&w, b, 4);
    tg_jw_esc(&w, "a\n", 2);
    tg_jw_esc(&w, "\x01", 1);
    cr_assert_eq(tg_jw_end(&w), -ENOSPC);
    cr_assert_eq(w.len, 3, "\"a\\n\" fit, the 6-byte escape did not");
}

/* The one RFC 3339 formatter (the audit encoder's too): the text of
 * tg_jw_ts without its quotes, gmtime's calendar across the whole range,
 * nothing written outside it, and a second's text whose milliseconds are
 * rewritten reads as that millisecond formatted afresh. */
Test(jsonw, timestamp_text)
{
    char t[TG_JW_TS_LEN + 1] = {0};
    const int64_t first = -62167219200000, end = 253402300800000;
    cr_assert_eq(tg_jw_ts_text(t, 1768564800123), 0);
    cr_assert_str_eq(t, "2026-01-16T12:00:00.123Z");
    cr_assert_eq(tg_jw_ts_text(t, first), 0);
    cr_assert_str_eq(t, "0000-01-01T00:00:00.000Z");
    cr_assert_eq(tg_jw_ts_text(t, end - 1), 0);
    cr_assert_str_eq(t, "9999-12-31T23:59:59.999Z");
    memset(t, 'Z', TG_JW_TS_LEN);
    cr_assert_eq(tg_jw_ts_text(t, end), -EINVAL);
    cr_assert_eq(tg_jw_ts_text(t, first - 1), -EINVAL);
    cr_assert_eq(tg_jw_ts_text(t, INT64_MIN), -EINVAL);
    cr_assert_eq(tg_jw_ts_text(t, INT64_MAX), -EINVAL);
    cr_assert_str_eq(t, "ZZZZZZZZZZZZZZZZZZZZZZZZ", "untouched when refused");

    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int64_t ms = first + (int64_t)(s % (uint64_t)(end - first));
        cr_assert_eq(tg_jw_ts_text(t, ms), 0);
        /* gmtime's calendar (64-bit time_t reaches year 0) */
        int64_t sec = ms / 1000 - (ms % 1000 < 0);
        time_t tt = (time_t)sec;
        struct tm tm;
        cr_assert_not_null(gmtime_r(&tt, &tm));
        char want[40];
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)(ms - sec * 1000));
        cr_assert_str_eq(t, want, "ms %lld", (long long)ms);
        char quoted[sizeof want + 1];
        snprintf(quoted, sizeof quoted, "%s\"", want);
        cr_assert_str_eq(ts(ms) + 1, quoted, "tg_jw_ts quotes the same text");
        /* rewriting the milliseconds of the second's first text */
        char again[TG_JW_TS_LEN + 1] = {0};
        cr_assert_eq(tg_jw_ts_text(again, sec * 1000), 0);
        snprintf(again + 20, 5, "%03dZ", (int)(ms - sec * 1000));
        cr_assert_str_eq(again, t);
    }
}

/* The hot path's building blocks: digits at every width, short copies at
 * every size (within their bytes only). */
Test(jsonw, digits_and_copies)
{
    char d[20], want[24];
    uint64_t v = 0;
    for (int i = 0; i <= 20; i++) {
        uint64_t vals[] = {v, v + 1, v ? v - 1 : 0, v * 9 + 9};
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
            if (i == 20 && k > 0)
                break; /* v * 10 would wrap */
            int n = snprintf(want, sizeof want, "%" PRIu64, vals[k]);
            cr_assert_eq(tg_jw_digits(d, vals[k]), (size_t)n);
            cr_assert_eq(memcmp(d + 20 - n, want, (size_t)n), 0, "%s", want);
        }
        v = i == 0 ? 1 : v * 10;
    }
    cr_assert_eq(tg_jw_digits(d, UINT64_MAX), 20);
    cr_assert_eq(memcmp(d, "18446744073709551615", 20), 0);

    char src[64], dst[64];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)('a' + i % 26);
    for (size_t n = 0; n <= 40; n++) {
        memset(dst, '#', sizeof dst);
        tg_jw_copy(dst + 8, src + 3, n);
        cr_assert_eq(memcmp(dst + 8, src + 3, n), 0, "size %zu", n);
        for (size_t i = 0; i < sizeof dst; i++)
            if (i < 8 || i >= 8 + n)
                cr_assert_eq(dst[i], '#', "size %zu wrote byte %zu", n, i);
    }
}
