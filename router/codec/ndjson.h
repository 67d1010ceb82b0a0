/* ndjson: the newline-delimited frame codec of the MCP stdio transport.
 * Pure (no I/O, no allocation): the shell owns the bytes and keeps the
 * current partial frame contiguous from <*pos> between calls.
 *
 * A frame longer than <max_frame> bytes (excluding its '\n') is never
 * buffered past the cap: TG_ND_OVERSIZE hands out its first max_frame
 * bytes once (to read the id from the head), then the codec discards bytes
 * as they stream until the newline, handing each span out once as it goes
 * (TG_ND_SKIPPING, so the shell can read the frame's top-level members past
 * the cap without keeping them), and reports TG_ND_SKIPPED with the
 * frame's last span and total length.
 */
#ifndef TG_ROUTER_NDJSON_H
#define TG_ROUTER_NDJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_ndjson {
    uint64_t max_frame; /* bytes, excluding the newline */
    bool skipping;      /* inside an over-cap frame */
    uint64_t skipped;   /* bytes of that frame so far */
    size_t scanned;     /* bytes of the partial frame at *pos known to hold no '\n' */
} tg_ndjson_t;

typedef enum tg_nd_ev {
    TG_ND_NEED_MORE = 0, /* keep [*pos, len) and read more */
    TG_ND_FRAME,         /* [*start, *end) is a frame; *end is the '\n' offset */
    TG_ND_OVERSIZE,      /* [*start, *end) is the head of an over-cap frame */
    TG_ND_SKIPPING,      /* [*start, *end) are bytes of the over-cap frame, gone once read */
    TG_ND_SKIPPED,       /* the over-cap frame ended; [*start, *end) were its last bytes
                          * (maybe none) and *total is its length */
} tg_nd_ev_t;

void tg_ndjson_init(tg_ndjson_t *c, uint64_t max_frame);

/* Next event in buf[*pos, len). Advances *pos past what was consumed. */
tg_nd_ev_t tg_ndjson_next(tg_ndjson_t *c, const char *buf, size_t len, size_t *pos, size_t *start,
                          size_t *end, uint64_t *total);

/* Forget the partial frame (the shell discarded it). */
static inline void tg_ndjson_reset_partial(tg_ndjson_t *c) { c->scanned = 0; }

#endif
