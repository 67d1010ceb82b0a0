/* Bounded JSON text writer (see jsonw.h). */
#include "config/jsonw.h"

#include <errno.h>
#include <string.h>

void tg_jw_init(tg_jw_t *w, char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->err = cap == 0 ? -ENOSPC : 0;
}

void tg_jw_raw(tg_jw_t *w, const char *s, size_t n)
{
    if (w->err)
        return;
    if (w->cap - w->len < n + 1) { /* keep room for the NUL */
        w->err = -ENOSPC;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

void tg_jw_lit(tg_jw_t *w, const char *s)
{
    tg_jw_raw(w, s, strlen(s));
}

void tg_jw_i64(tg_jw_t *w, int64_t v)
{
    if (v < 0) {
        tg_jw_raw(w, "-", 1);
        /* in unsigned arithmetic: -INT64_MIN overflows int64_t */
        tg_jw_u64(w, 0 - (uint64_t)v);
    } else {
        tg_jw_u64(w, (uint64_t)v);
    }
}

const char tg_jw_digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                    "25262728293031323334353637383940414243444546474849"
                                    "50515253545556575859606162636465666768697071727374"
                                    "75767778798081828384858687888990919293949596979899";

void tg_jw_u64(tg_jw_t *w, uint64_t v)
{
    char t[20];
    size_t n = tg_jw_digits(t, v);
    tg_jw_raw(w, t + 20 - n, n);
}

size_t tg_jw_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n <= need)
        return 0;
    for (size_t k = 1; k <= need; k++) {
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return 0;
    }
    return need + 1;
}

void tg_jw_esc(tg_jw_t *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        tg_jw_raw(w, s + i, run - i);
        i = run;
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c >= 0x80) {
            size_t k = tg_jw_utf8_len(p + i, n - i);
            if (k) {
                tg_jw_raw(w, s + i, k);
                i += k;
            } else {
                tg_jw_lit(w, "\\ufffd");
                i++;
            }
            continue;
        }
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t el = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            e[1] = 'u';
            e[2] = '0';
            e[3] = '0';
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            el = 6;
            break;
        }
        tg_jw_raw(w, e, el);
        i++;
    }
}

void tg_jw_str(tg_jw_t *w, const char *s)
{
    tg_jw_raw(w, "\"", 1);
    tg_jw_esc(w, s, strlen(s));
    tg_jw_raw(w, "\"", 1);
}

/* Milliseconds at 0000-01-01T00:00:00Z and just past 9999-12-31T23:59:59.999Z:
 * RFC 3339 has four year digits, so only this range can be written. */
#define TS_MIN_MS (-62167219200000LL)
#define TS_END_MS 253402300800000LL

static void put_pad(char *d, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        d[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

int tg_jw_ts_text(char out[TG_JW_TS_LEN], int64_t ms)
{
    if (ms < TS_MIN_MS || ms >= TS_END_MS)
        return -EINVAL;
    /* Shift to days since 0000-03-01 so every quantity below is
     * non-negative (H. Hinnant's civil_from_days, proleptic Gregorian). */
    int64_t t = ms - TS_MIN_MS;
    int64_t days = t / 86400000 - 60; /* 0000-01-01 .. 0000-03-01 is 60 days (leap year) */
    unsigned msod = (unsigned)(t % 86400000);
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    unsigned doe = (unsigned)(days - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned day = doy - (153 * mp + 2) / 5 + 1;
    unsigned month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = (int64_t)yoe + era * 400 + (month <= 2);

    memcpy(out, "YYYY-MM-DDTHH:MM:SS.mmmZ", TG_JW_TS_LEN);
    put_pad(out, (unsigned)year, 4);
    put_pad(out + 5, month, 2);
    put_pad(out + 8, day, 2);
    put_pad(out + 11, msod / 3600000, 2);
    put_pad(out + 14, msod / 60000 % 60, 2);
    put_pad(out + 17, msod / 1000 % 60, 2);
    put_pad(out + 20, msod % 1000, 3);
    return 0;
}

void tg_jw_ts(tg_jw_t *w, int64_t ms)
{
    char d[TG_JW_TS_LEN + 2];
    if (tg_jw_ts_text(d + 1, ms) < 0) {
        if (!w->err)
            w->err = -EINVAL;
        return;
    }
    d[0] = '"';
    d[TG_JW_TS_LEN + 1] = '"';
    tg_jw_raw(w, d, sizeof d);
}

long tg_jw_end(tg_jw_t *w)
{
    if (w->err)
        return w->err;
    w->buf[w->len] = '\0';
    return (long)w->len;
}
