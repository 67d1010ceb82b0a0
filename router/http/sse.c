/* sse: Server-Sent Events encoding and per-stream replay windows (see
 * sse.h). */
#include "router/http/sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- ids -------------------------------------------------------------- */

static size_t put_u64(char *d, uint64_t v)
{
    char t[20];
    size_t i = sizeof t, n;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    n = sizeof t - i;
    memcpy(d, t + i, n);
    return n;
}

long tg_sse_id(char *buf, size_t cap, uint64_t stream, uint64_t seq)
{
    char t[TG_SSE_ID_MAX];
    size_t n = put_u64(t, stream);
    t[n++] = '-';
    n += put_u64(t + n, seq);
    if (n + 1 > cap)
        return -ENOSPC;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return (long)n;
}

/* A decimal s[0, n) >= 1 without leading zeros, within 64 bits. */
static int parse_u64(const char *s, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (n == 0 || n > 20 || s[0] == '0')
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -EINVAL;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

int tg_sse_parse_id(const char *s, size_t n, uint64_t *stream, uint64_t *seq)
{
    const char *dash = s != NULL ? memchr(s, '-', n) : NULL;
    if (dash == NULL)
        return -EINVAL;
    size_t a = (size_t)(dash - s);
    if (parse_u64(s, a, stream) < 0 || parse_u64(dash + 1, n - a - 1, seq) < 0)
        return -EINVAL;
    return 0;
}

/* ---- events ----------------------------------------------------------- */

/* Length of the line at d[i, n) and of its end (0 for the last line, 1
 * for LF or CR, 2 for CRLF). */
static size_t line_at(const char *d, size_t n, size_t i, size_t *eol)
{
    size_t j = i;
    while (j < n && d[j] != '\n' && d[j] != '\r')
        j++;
    *eol = j == n ? 0 : (d[j] == '\r' && j + 1 < n && d[j + 1] == '\n') ? 2 : 1;
    return j - i;
}

size_t tg_sse_event_len(size_t idn, const char *data, size_t n)
{
    size_t len = idn > 0 ? 4 + idn + 1 : 0, i = 0, eol;
    do {
        size_t k = line_at(data, n, i, &eol);
        len += 6 + k + 1;
        i += k + eol;
    } while (eol > 0); /* data ending in a line break ends with an empty data line */
    return len + 1;
}

long tg_sse_event(char *buf, size_t cap, const char *id, size_t idn, const char *data, size_t n)
{
    if (idn > 0 && (memchr(id, '\n', idn) != NULL || memchr(id, '\r', idn) != NULL ||
                    memchr(id, '\0', idn) != NULL))
        return -EINVAL;
    size_t need = tg_sse_event_len(idn, data, n), o = 0, i = 0, eol;
    if (need > cap)
        return -ENOSPC;
    if (idn > 0) {
        memcpy(buf, "id: ", 4);
        memcpy(buf + 4, id, idn);
        buf[4 + idn] = '\n';
        o = 4 + idn + 1;
    }
    do {
        size_t k = line_at(data, n, i, &eol);
        memcpy(buf + o, "data: ", 6);
        memcpy(buf + o + 6, data + i, k);
        buf[o + 6 + k] = '\n';
        o += 6 + k + 1;
        i += k + eol;
    } while (eol > 0);
    buf[o++] = '\n';
    return (long)o;
}

/* ---- the replay window ------------------------------------------------ */

int tg_sse_win_init(tg_sse_win_t *w, uint64_t stream, size_t max_bytes, uint32_t max_events)
{
    memset(w, 0, sizeof(*w));
    if (stream == 0 || max_bytes == 0 || max_events == 0)
        return -EINVAL;
    w->buf = malloc(max_bytes);
    w->rec = calloc(max_events, sizeof(*w->rec));
    if (w->buf == NULL || w->rec == NULL) {
        tg_sse_win_free(w);
        return -ENOMEM;
    }
    w->stream = stream;
    w->next_seq = w->first_seq = 1;
    w->max_bytes = max_bytes;
    w->max_events = max_events;
    return 0;
}

void tg_sse_win_free(tg_sse_win_t *w)
{
    free(w->buf);
    free(w->rec);
    memset(w, 0, sizeof(*w));
}

static void evict_oldest(tg_sse_win_t *w)
{
    w->head = (w->head + 1) % w->max_events;
    w->count--;
    w->first_seq++;
    w->dropped++;
    if (w->count == 0)
        w->used = 0;
}

static size_t live_start(const tg_sse_win_t *w)
{
    return w->count > 0 ? w->rec[w->head].off : w->used;
}

/* Keep event bytes e[0, n) as the newest record. */
static void keep(tg_sse_win_t *w, const char *e, size_t n)
{
    if (n > w->max_bytes) {
        while (w->count > 0)
            evict_oldest(w);
        w->first_seq = w->next_seq; /* nothing before the next event replays */
        w->dropped++;
        return;
    }
    while (w->count == w->max_events || (w->used - live_start(w)) + n > w->max_bytes)
        evict_oldest(w);
    if (w->used + n > w->max_bytes) {
        /* Slide the kept events to the front; amortised over the events
         * that filled the buffer since the last slide. */
        size_t start = live_start(w), live = w->used - start;
        memmove(w->buf, w->buf + start, live);
        for (uint32_t i = 0; i < w->count; i++)
            w->rec[(w->head + i) % w->max_events].off -= start;
        w->used = live;
    }
    tg_sse_rec_t *r = &w->rec[(w->head + w->count) % w->max_events];
    r->off = w->used;
    r->len = n;
    memcpy(w->buf + w->used, e, n);
    w->used += n;
    w->count++;
}

long tg_sse_win_send(tg_sse_win_t *w, const char *json, size_t n, char *out, size_t cap)
{
    char id[TG_SSE_ID_MAX];
    long idn = tg_sse_id(id, sizeof id, w->stream, w->next_seq);
    long len = tg_sse_event(out, cap, id, (size_t)idn, json, n);
    if (len < 0)
        return len;
    w->next_seq++;
    keep(w, out, (size_t)len);
    return len;
}

tg_sse_resume_t tg_sse_win_resume(const tg_sse_win_t *w, const char *id, size_t n, uint64_t *from)
{
    uint64_t stream, seq;
    if (tg_sse_parse_id(id, n, &stream, &seq) < 0 || stream != w->stream || seq >= w->next_seq)
        return TG_SSE_RESUME_UNKNOWN;
    if (seq + 1 < w->first_seq)
        return TG_SSE_RESUME_GONE;
    *from = seq + 1;
    return TG_SSE_RESUME_OK;
}

bool tg_sse_win_get(const tg_sse_win_t *w, uint64_t seq, const char **p, size_t *n)
{
    if (seq < w->first_seq || seq >= w->next_seq || seq - w->first_seq >= w->count)
        return false;
    const tg_sse_rec_t *r = &w->rec[(w->head + (seq - w->first_seq)) % w->max_events];
    *p = w->buf + r->off;
    *n = r->len;
    return true;
}
