/* ndjson frame codec: see ndjson.h. */
#include "router/codec/ndjson.h"

#include <string.h>

void tg_ndjson_init(tg_ndjson_t *c, uint64_t max_frame)
{
    memset(c, 0, sizeof(*c));
    c->max_frame = max_frame;
}

tg_nd_ev_t tg_ndjson_next(tg_ndjson_t *c, const char *buf, size_t len, size_t *pos, size_t *start,
                          size_t *end, uint64_t *total)
{
    size_t p = *pos;

    if (p >= len)
        return TG_ND_NEED_MORE;

    if (c->skipping) {
        const char *nl = memchr(buf + p, '\n', len - p);
        if (nl == NULL) {
            c->skipped += len - p;
            *start = p;
            *end = len;
            *pos = len;
            return TG_ND_SKIPPING;
        }
        size_t i = (size_t)(nl - buf);
        *start = p;
        *end = i;
        *total = c->skipped + (i - p);
        c->skipped = 0;
        c->skipping = false;
        c->scanned = 0;
        *pos = i + 1;
        return TG_ND_SKIPPED;
    }

    /* Resume the newline search where the previous call stopped. */
    size_t from = p + c->scanned;
    const char *nl = from < len ? memchr(buf + from, '\n', len - from) : NULL;
    if (nl != NULL) {
        size_t i = (size_t)(nl - buf);
        c->scanned = 0;
        if (i - p > c->max_frame) {
            *start = p;
            *end = p + (size_t)c->max_frame;
            c->skipping = true;
            c->skipped = c->max_frame;
            *pos = p + (size_t)c->max_frame;
            return TG_ND_OVERSIZE;
        }
        *start = p;
        *end = i;
        *pos = i + 1;
        return TG_ND_FRAME;
    }
    if (len - p > c->max_frame) {
        *start = p;
        *end = p + (size_t)c->max_frame;
        c->skipping = true;
        c->skipped = c->max_frame;
        c->scanned = 0;
        *pos = p + (size_t)c->max_frame;
        return TG_ND_OVERSIZE;
    }
    c->scanned = len - p;
    return TG_ND_NEED_MORE;
}
