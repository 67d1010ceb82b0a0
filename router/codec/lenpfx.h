/* lenpfx: the length-prefixed frame codec of the OpenSentience dialect:
 * a 4-byte unsigned big-endian length, then that many bytes of one JSON
 * object. Pure (no I/O, no allocation): the shell owns the bytes and keeps
 * the current partial frame (header included) contiguous from <*pos>
 * between calls, as with ndjson.
 *
 * An over-cap frame is refused from its header alone: TG_LP_OVERSIZE
 * reports the announced length as soon as the 4 header bytes are there
 * (nothing of the payload is waited for), then the codec discards payload
 * bytes as they stream (each call consumes all it is given) and reports
 * TG_LP_SKIPPED once the whole announced length has gone by. A shell with
 * on_oversize "close" stops at OVERSIZE; with "reject" it answers and
 * keeps calling until SKIPPED, after which the stream is framed again.
 *
 * A zero-length frame cannot hold a JSON object: TG_LP_INVALID, with its
 * header consumed. The stream stays framed (the length was readable), so
 * the shell may count it and go on, or close: its policy.
 */
#ifndef TG_ROUTER_LENPFX_H
#define TG_ROUTER_LENPFX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_LENPFX_HDR 4 /* bytes of the length header */

typedef struct tg_lenpfx {
    uint64_t max_frame;  /* payload bytes, header excluded */
    bool skipping;       /* inside the payload of an over-cap frame */
    uint64_t skip_left;  /* its bytes still to discard */
    uint64_t skip_total; /* its announced length */
} tg_lenpfx_t;

typedef enum tg_lp_ev {
    TG_LP_NEED_MORE = 0, /* keep [*pos, len) and read more; *total: see tg_lenpfx_next */
    TG_LP_FRAME,         /* [*start, *end) is one payload (header excluded); *end == *pos */
    TG_LP_OVERSIZE,      /* a header announced *total > max_frame bytes; header consumed */
    TG_LP_SKIPPED,       /* that payload has gone by; *total is its length */
    TG_LP_INVALID,       /* a zero-length frame; header consumed */
} tg_lp_ev_t;

void tg_lenpfx_init(tg_lenpfx_t *c, uint64_t max_frame);

/* Next event in buf[*pos, len). Advances *pos past what was consumed.
 * On TG_LP_NEED_MORE, *total is the size (header included) the partial
 * frame at *pos will have once complete, so the shell can size its next
 * buffer; 0 when the header is not complete yet or the codec is skipping
 * (then *pos == len: nothing needs keeping). */
tg_lp_ev_t tg_lenpfx_next(tg_lenpfx_t *c, const char *buf, size_t len, size_t *pos, size_t *start,
                          size_t *end, uint64_t *total);

/* Write the 4-byte header for a payload of <len> bytes into <out>.
 * 0, or -EMSGSIZE when <len> does not fit 32 bits. */
int tg_lenpfx_header(unsigned char out[TG_LENPFX_HDR], uint64_t len);

#endif
