/* sse: Server-Sent Events for MCP's Streamable HTTP transport. Pure: no
 * I/O; the replay window allocates once, at init.
 *
 * An event carries one JSON-RPC message: "id: <id>\ndata: <json>\n\n".
 * A frame is one line, but a message holding line breaks is still encoded
 * right: one "data:" line per line, which a client joins back with "\n".
 *
 * Event ids are "<stream>-<seq>" in decimal (both >= 1): the front numbers
 * the streams of a session (each SSE answer to a POST, each GET stream)
 * and each stream numbers its events, so an id is unique within the
 * session, names the stream it belongs to, and is a cursor within that
 * stream, as the spec asks (2025-06-18, "Resumability and Redelivery").
 *
 * The replay window of a stream keeps its latest events, bounded in bytes
 * and in count (oldest dropped first, counted), for a client that comes
 * back with Last-Event-ID. It never replays another stream's events: a
 * window holds only its own.
 */
#ifndef TG_ROUTER_HTTP_SSE_H
#define TG_ROUTER_HTTP_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_SSE_ID_MAX 42           /* bytes of the longest id, NUL included */
#define TG_SSE_PING   ": ping\n\n" /* a comment: keeps proxies and clients from timing out */

/* Write the id of event <seq> of stream <stream> into buf[0, cap) with a
 * NUL. Returns its length (without the NUL) or -ENOSPC. */
long tg_sse_id(char *buf, size_t cap, uint64_t stream, uint64_t seq);

/* Parse id s[0, n) ("12-345"; no sign, no leading zero, no spaces, both
 * parts >= 1 and within 64 bits). 0, or -EINVAL. */
int tg_sse_parse_id(const char *s, size_t n, uint64_t *stream, uint64_t *seq);

/* Bytes tg_sse_event will write for an id of <idn> bytes and data[0, n). */
size_t tg_sse_event_len(size_t idn, const char *data, size_t n);

/* Encode one event into buf[0, cap): "id: " id "\n" (left out when idn is
 * 0), one "data: " line per line of data (CRLF, CR and LF all end a line),
 * then a blank line. Returns its length, -EINVAL for an id holding CR, LF
 * or NUL, or -ENOSPC. */
long tg_sse_event(char *buf, size_t cap, const char *id, size_t idn, const char *data, size_t n);

typedef struct tg_sse_rec {
    size_t off, len;
} tg_sse_rec_t;

/* The replay window of one stream. The owner (the front's stream) frees
 * it with tg_sse_win_free. Read-only for the caller: stream, next_seq,
 * first_seq, dropped. */
typedef struct tg_sse_win {
    uint64_t stream;
    uint64_t next_seq;   /* seq the next event gets (the first is 1) */
    uint64_t first_seq;  /* oldest seq kept; == next_seq when none is */
    uint64_t dropped;    /* events evicted, or too big to keep */
    size_t max_bytes;    /* bound: bytes of kept events */
    uint32_t max_events; /* bound: kept events */
    char *buf;           /* kept events, contiguous in [rec[head].off, used) */
    size_t used;
    tg_sse_rec_t *rec; /* ring of max_events, rec[head] holds first_seq */
    uint32_t head, count;
} tg_sse_win_t;

/* Set up the window of stream <stream> (>= 1) keeping at most
 * <max_bytes> bytes (>= 1) and <max_events> events (>= 1). 0, -EINVAL or
 * -ENOMEM. */
int tg_sse_win_init(tg_sse_win_t *w, uint64_t stream, size_t max_bytes, uint32_t max_events);

void tg_sse_win_free(tg_sse_win_t *w);

/* Encode <json>[0, n) as the stream's next event into out[0, cap) and keep
 * a copy for replay (evicting the oldest as the bounds require; an event
 * bigger than max_bytes is sent but not kept, and nothing before it can be
 * replayed any more). Returns the event's length, or -ENOSPC when it does
 * not fit <out> (then nothing changed: the seq is not used). */
long tg_sse_win_send(tg_sse_win_t *w, const char *json, size_t n, char *out, size_t cap);

typedef enum tg_sse_resume {
    TG_SSE_RESUME_OK,      /* replay seqs *from .. next_seq - 1 (maybe none), then go on */
    TG_SSE_RESUME_GONE,    /* this stream, but events after the id were dropped: go on
                            * without them (the spec makes replay a MAY) */
    TG_SSE_RESUME_UNKNOWN, /* malformed, another stream's, or never issued: answer 400 */
} tg_sse_resume_t;

/* Where to resume this stream for a client whose Last-Event-ID is
 * id[0, n). On OK, *from is the first seq to replay. */
tg_sse_resume_t tg_sse_win_resume(const tg_sse_win_t *w, const char *id, size_t n, uint64_t *from);

/* The kept event <seq> (as it was sent) in *p, *n; false when it is not
 * kept. Valid until the next tg_sse_win_send. */
bool tg_sse_win_get(const tg_sse_win_t *w, uint64_t seq, const char **p, size_t *n);

#endif
