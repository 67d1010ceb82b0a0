/* Length-prefixed frame codec: see lenpfx.h. */
#include "router/codec/lenpfx.h"

#include <errno.h>
#include <string.h>

void tg_lenpfx_init(tg_lenpfx_t *c, uint64_t max_frame)
{
    memset(c, 0, sizeof(*c));
    c->max_frame = max_frame;
}

static uint32_t get_be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | (uint32_t)u[3];
}

tg_lp_ev_t tg_lenpfx_next(tg_lenpfx_t *c, const char *buf, size_t len, size_t *pos, size_t *start,
                          size_t *end, uint64_t *total)
{
    size_t p = *pos;

    *total = 0;
    if (c->skipping) {
        /* Discard what is there, never more than the announced payload:
         * the next frame's header may follow in the same read. */
        size_t have = p < len ? len - p : 0;
        size_t k = (uint64_t)have < c->skip_left ? have : (size_t)c->skip_left;
        c->skip_left -= k;
        *pos = p + k;
        if (c->skip_left > 0)
            return TG_LP_NEED_MORE;
        *total = c->skip_total;
        c->skipping = false;
        c->skip_total = 0;
        return TG_LP_SKIPPED;
    }

    if (p >= len || len - p < TG_LENPFX_HDR)
        return TG_LP_NEED_MORE;
    uint64_t n = get_be32(buf + p);
    if (n == 0) {
        *pos = p + TG_LENPFX_HDR;
        return TG_LP_INVALID;
    }
    if (n > c->max_frame) {
        /* Refused from the header alone: nothing of the payload is
         * buffered, whatever length the peer announces. */
        c->skipping = true;
        c->skip_left = n;
        c->skip_total = n;
        *pos = p + TG_LENPFX_HDR;
        *total = n;
        return TG_LP_OVERSIZE;
    }
    if (len - p - TG_LENPFX_HDR < n) {
        *total = TG_LENPFX_HDR + n;
        return TG_LP_NEED_MORE;
    }
    *start = p + TG_LENPFX_HDR;
    *end = *start + (size_t)n;
    *pos = *end;
    return TG_LP_FRAME;
}

int tg_lenpfx_header(unsigned char out[TG_LENPFX_HDR], uint64_t len)
{
    if (len > UINT32_MAX)
        return -EMSGSIZE;
    out[0] = (unsigned char)(len >> 24);
    out[1] = (unsigned char)(len >> 16);
    out[2] = (unsigned char)(len >> 8);
    out[3] = (unsigned char)len;
    return 0;
}
