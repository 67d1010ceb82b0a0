/* h1resp: HTTP/1.1 response heads and chunk framing (see h1resp.h). */
#include "router/http/h1resp.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A bounded writer: once a put does not fit, every later put fails too. */
typedef struct wr {
    char *buf;
    size_t cap, len;
    bool over;
} wr_t;

static void put(wr_t *w, const char *s, size_t n)
{
    if (w->over || n > w->cap - w->len) {
        w->over = true;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void puts_(wr_t *w, const char *s)
{
    put(w, s, strlen(s));
}

/* <v> in base <base> (10 or 16, lower case). */
static void put_uint(wr_t *w, uint64_t v, unsigned base)
{
    char d[24];
    size_t i = sizeof d;
    do {
        d[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v > 0);
    put(w, d + i, sizeof d - i);
}

/* Two digits of <v> (0..99). */
static void put_2(wr_t *w, int v)
{
    char d[2] = {(char)('0' + v / 10), (char)('0' + v % 10)};
    put(w, d, 2);
}

const char *tg_h1_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    }
    return "Unknown";
}

static bool is_token(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c) != NULL))
            return false;
    }
    return true;
}

/* A field value: visible bytes, SP, HT and obs-text; never CR, LF, NUL. */
static bool is_value(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* Headers the writer puts itself; an extra one of these would frame the
 * response twice or contradict it. */
static bool owned_name(const char *n)
{
    static const char *const own[] = {"content-length", "transfer-encoding", "connection",
                                      "content-type", "date"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (strcasecmp(n, own[i]) == 0)
            return true;
    }
    return false;
}

static void put_field(wr_t *w, const char *name, const char *value)
{
    puts_(w, name);
    put(w, ": ", 2);
    puts_(w, value);
    put(w, "\r\n", 2);
}

/* Date: Sun, 06 Nov 1994 08:49:37 GMT (IMF-fixdate, RFC 9110 5.6.7; no
 * strftime: its day and month names follow the locale). */
static void put_date(wr_t *w, int64_t t)
{
    static const char days[] = "SunMonTueWedThuFriSat";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        w->over = true;
        return;
    }
    puts_(w, "Date: ");
    put(w, days + 3 * tm.tm_wday, 3);
    put(w, ", ", 2);
    put_2(w, tm.tm_mday);
    put(w, " ", 1);
    put(w, months + 3 * tm.tm_mon, 3);
    put(w, " ", 1);
    put_2(w, (tm.tm_year + 1900) / 100);
    put_2(w, (tm.tm_year + 1900) % 100);
    put(w, " ", 1);
    put_2(w, tm.tm_hour);
    put(w, ":", 1);
    put_2(w, tm.tm_min);
    put(w, ":", 1);
    put_2(w, tm.tm_sec);
    puts_(w, " GMT\r\n");
}

static int check(const tg_h1resp_t *r)
{
    bool no_body = r->status < 200 || r->status == 204;
    if (r->status < 100 || r->status > 599)
        return -EINVAL;
    if (r->content_length < TG_H1_LEN_NONE || (no_body && r->content_length != TG_H1_LEN_NONE))
        return -EINVAL;
    if (r->content_type != NULL && !is_value(r->content_type))
        return -EINVAL;
    for (size_t i = 0; i < r->nextra; i++) {
        const tg_h1_field_t *f = &r->extra[i];
        if (f->name == NULL || f->value == NULL || !is_token(f->name) || !is_value(f->value) ||
            owned_name(f->name))
            return -EINVAL;
    }
    return 0;
}

long tg_h1resp_head(char *buf, size_t cap, const tg_h1resp_t *r)
{
    wr_t w = {buf, cap, 0, false};
    int rc = check(r);
    if (rc < 0)
        return rc;
    puts_(&w, "HTTP/1.1 ");
    put_uint(&w, (uint64_t)r->status, 10);
    put(&w, " ", 1);
    puts_(&w, tg_h1_reason(r->status));
    put(&w, "\r\n", 2);
    if (r->date >= 0)
        put_date(&w, r->date);
    if (r->content_type != NULL)
        put_field(&w, "Content-Type", r->content_type);
    if (r->content_length >= 0) {
        puts_(&w, "Content-Length: ");
        put_uint(&w, (uint64_t)r->content_length, 10);
        put(&w, "\r\n", 2);
    } else if (r->content_length == TG_H1_LEN_CHUNKED) {
        puts_(&w, "Transfer-Encoding: chunked\r\n");
    }
    if (r->status >= 200)
        puts_(&w, r->keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
    for (size_t i = 0; i < r->nextra; i++)
        put_field(&w, r->extra[i].name, r->extra[i].value);
    put(&w, "\r\n", 2);
    return w.over ? -ENOSPC : (long)w.len;
}

long tg_h1_chunk_head(char *buf, size_t cap, size_t n)
{
    wr_t w = {buf, cap, 0, false};
    if (n == 0)
        return -EINVAL;
    put_uint(&w, n, 16);
    put(&w, "\r\n", 2);
    return w.over ? -ENOSPC : (long)w.len;
}

long tg_h1_chunk(char *buf, size_t cap, const char *data, size_t n)
{
    long h = tg_h1_chunk_head(buf, cap, n);
    if (h < 0)
        return h;
    wr_t w = {buf, cap, (size_t)h, false};
    put(&w, data, n);
    put(&w, TG_H1_CHUNK_END, 2);
    return w.over ? -ENOSPC : (long)w.len;
}
