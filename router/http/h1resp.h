/* h1resp: HTTP/1.1 response heads and chunked framing, written into a
 * buffer the caller provides. Pure: no I/O, no allocation.
 *
 * It never emits a header it cannot vouch for: a field name that is not a
 * token, a value holding CR, LF, NUL or another control byte (only HT is
 * allowed), or an extra header that would duplicate one it writes itself
 * (framing, Connection, Date, Content-Type) makes the whole head fail with
 * -EINVAL, so a value that came from a peer can never inject a header or
 * a second response.
 */
#ifndef TG_ROUTER_HTTP_H1RESP_H
#define TG_ROUTER_HTTP_H1RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_H1_LEN_CHUNKED (-1) /* Transfer-Encoding: chunked (streamed body, SSE) */
#define TG_H1_LEN_NONE    (-2) /* no framing header (1xx, 204; or a body ended by close) */

#define TG_H1_CONTINUE   "HTTP/1.1 100 Continue\r\n\r\n" /* answer to Expect: 100-continue */
#define TG_H1_CHUNK_END  "\r\n"                          /* after each chunk's data */
#define TG_H1_CHUNK_LAST "0\r\n\r\n"                     /* ends a chunked body (no trailers) */

typedef struct tg_h1_field {
    const char *name;  /* a token: "Mcp-Session-Id", "WWW-Authenticate", "Allow", ... */
    const char *value; /* NUL-terminated; no CR, LF or other control byte but HT */
} tg_h1_field_t;

typedef struct tg_h1resp {
    int status;                 /* 100..599 */
    const char *content_type;   /* NULL: no Content-Type */
    int64_t content_length;     /* >= 0: Content-Length; TG_H1_LEN_CHUNKED; TG_H1_LEN_NONE */
    bool keep_alive;            /* Connection: keep-alive, or close (not written for 1xx) */
    int64_t date;               /* Unix seconds for Date; < 0: no Date header */
    const tg_h1_field_t *extra; /* nextra more headers, written in order */
    size_t nextra;
} tg_h1resp_t;

/* The standard reason phrase of <status> ("Not Found"), or "Unknown". */
const char *tg_h1_reason(int status);

/* Write the head of <r> (status line, headers, blank line) into
 * buf[0, cap). Returns its length, -ENOSPC when it does not fit (buf is
 * then garbage), or -EINVAL for a status out of range, a framing header
 * on 1xx/204, a bad field name or value, or an extra header that the
 * writer owns. */
long tg_h1resp_head(char *buf, size_t cap, const tg_h1resp_t *r);

/* Write the size line of a chunk of <n> > 0 bytes ("1a2\r\n") into
 * buf[0, cap): the caller sends it, then the n bytes, then
 * TG_H1_CHUNK_END (three buffers of one write, no copy). Returns its
 * length, -EINVAL for n == 0 (that is the last chunk, TG_H1_CHUNK_LAST) or
 * -ENOSPC. */
long tg_h1_chunk_head(char *buf, size_t cap, size_t n);

/* Write one whole chunk (size line, data[0, n), CRLF) into buf[0, cap).
 * Returns its length, -EINVAL for n == 0 or -ENOSPC. */
long tg_h1_chunk(char *buf, size_t cap, const char *data, size_t n);

#endif
