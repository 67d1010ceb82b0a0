/* h1req: a bounded HTTP/1.1 request reader for the Streamable HTTP front,
 * on http-parser. Pure: bytes in, requests out; no I/O, no timers.
 *
 * The front feeds what it read; the reader consumes at most one request
 * per call and stops right after it (pipelining: the rest stays with the
 * caller, who answers in order and feeds it again later). What it keeps of
 * a request lives in storage sized once at init: the head (request line
 * and the headers MCP needs) in an arena of max_header_bytes, the body in
 * a buffer that grows to the body's size, never past max_body_bytes.
 *
 * Every refusal is terminal for the connection: the reader reports the
 * HTTP status the front must send (then close) and a short reason for the
 * log, and stays in that state. The reason is a static string naming the
 * rule broken; it never holds request bytes (no header value, no token).
 */
#ifndef TG_ROUTER_HTTP_H1REQ_H
#define TG_ROUTER_HTTP_H1REQ_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_H1_MIN_HEADER_BYTES 256   /* smallest max_header_bytes accepted */
#define TG_H1_MAX_HEADER_BYTES 65536 /* largest (http-parser stops at 80 KiB) */

typedef enum tg_h1_method {
    TG_H1M_GET,
    TG_H1M_POST,
    TG_H1M_DELETE,
    TG_H1M_HEAD,
    TG_H1M_OPTIONS,
    TG_H1M_OTHER, /* any other method http-parser knows; method_name says which */
} tg_h1_method_t;

/* The headers kept. Singletons (a second occurrence is refused 400):
 * Host, Origin, Content-Type, Content-Length, Authorization,
 * Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID. Lists (occurrences
 * joined with ", "): Accept, Connection, Transfer-Encoding, Expect. */
typedef enum tg_h1_hdr {
    TG_H1H_HOST,
    TG_H1H_ORIGIN,
    TG_H1H_ACCEPT,
    TG_H1H_CONTENT_TYPE,
    TG_H1H_CONTENT_LENGTH,
    TG_H1H_TRANSFER_ENCODING,
    TG_H1H_AUTHORIZATION,
    TG_H1H_SESSION_ID,       /* Mcp-Session-Id */
    TG_H1H_PROTOCOL_VERSION, /* MCP-Protocol-Version */
    TG_H1H_LAST_EVENT_ID,
    TG_H1H_CONNECTION,
    TG_H1H_EXPECT,
    TG_H1H_COUNT
} tg_h1_hdr_t;

/* A span of the reader's storage; not NUL-terminated. p == NULL: absent
 * (a present but empty header has p != NULL and n == 0). */
typedef struct tg_h1_str {
    const char *p;
    size_t n;
} tg_h1_str_t;

typedef enum tg_h1_ev {
    TG_H1_NEED_MORE = 0, /* every byte given was consumed; feed more */
    TG_H1_HEAD,          /* Expect: 100-continue and a body to come: the head is
                          * complete (all fields but body set); send
                          * "100 Continue" (or refuse and close), then feed
                          * the bytes after *consumed */
    TG_H1_REQUEST,       /* one complete request; the bytes after *consumed
                          * belong to the next one */
    TG_H1_ERROR,         /* refused: answer status (Connection: close), then close */
} tg_h1_ev_t;

typedef struct tg_h1req_opts {
    uint32_t max_header_bytes; /* request line + headers, bytes (256..65536) */
    uint32_t max_headers;      /* header fields, count (1..) */
    size_t max_body_bytes;     /* body after de-chunking, bytes (= max_frame_bytes) */
} tg_h1req_opts_t;

/* One reader per connection. The caller owns it (embedded or allocated)
 * and frees its storage with tg_h1req_free. Fields under "results" are
 * read-only for the caller and valid from a HEAD or REQUEST event until
 * the next tg_h1req_feed or tg_h1req_trim. */
typedef struct tg_h1req {
    /* results */
    tg_h1_method_t method;
    const char *method_name; /* static: "GET", "POST", ... */
    tg_h1_str_t path;        /* request target's path, raw (not decoded) */
    tg_h1_str_t query;       /* after '?', without it; p == NULL when there is none */
    uint8_t http_minor;      /* HTTP/1.<minor>: 0 or 1 */
    bool keep_alive;         /* the connection may carry another request */
    bool expect_continue;    /* Expect: 100-continue (HTTP/1.1 only) */
    bool chunked;            /* the body came chunked */
    tg_h1_str_t hdr[TG_H1H_COUNT];
    const char *body; /* body_len bytes (never NULL after REQUEST) */
    size_t body_len;
    int status;         /* TG_H1_ERROR: the status to send (400, 413, 417, 431, 500, 501, 505) */
    const char *reason; /* TG_H1_ERROR: static text for the log */

    /* private */
    http_parser p;
    tg_h1req_opts_t o;
    int phase;
    char *arena; /* head storage: url, then kept header values */
    uint32_t arena_cap, arena_len, arena_max; /* arena_max: max_header_bytes + slack */
    uint32_t url_len; /* the url is arena[0, url_len) */
    uint32_t off[TG_H1H_COUNT], len[TG_H1H_COUNT];
    uint8_t seen[TG_H1H_COUNT];
    int cur;           /* kept header being filled, -1: dropped, -2: its name is not complete */
    char name[24];     /* the current field name (longer names are not kept ones) */
    uint32_t name_len; /* may pass sizeof(name) */
    uint32_t head_bytes, nfields;
    uint8_t scan;     /* head scanner state */
    char mtok[16];    /* the method token, to tell 501 from 400 */
    uint8_t mtok_len; /* may be sizeof(mtok) + 1: too long */
    bool mtok_end;    /* the token ended (SP or another byte seen) */
    bool mtok_sp;     /* ...with SP */
    bool bad_method;  /* http-parser refused the method; waiting for the token's end */
    int scan_status;  /* the scanner's refusal, 0 when none */
    char rl_tail[9];  /* the request line's last bytes: " HTTP/1.1" */
    uint8_t rl_len;
    const char *scan_reason;
    bool head_done;        /* the scanner saw the head's last LF */
    bool head_done_parsed; /* ...and http-parser parsed it */
    bool body_pending;     /* a body follows the head */
    char *buf;             /* body storage: buf_cap bytes */
    size_t buf_cap;
    uint64_t left;    /* Content-Length bytes, or the current chunk's, still to come */
    uint8_t ck;       /* chunked decoder state */
    bool ck_digits;   /* the chunk size has a digit */
    uint64_t framing; /* chunked framing bytes: sizes, extensions, trailers */
} tg_h1req_t;

/* Set up <r> with bounds <o>. 0 or -EINVAL (a bound out of range).
 * Nothing is allocated here: the head arena grows as a head needs it (up
 * to about max_header_bytes), the body buffer on demand. */
int tg_h1req_init(tg_h1req_t *r, const tg_h1req_opts_t *o);

/* Free what <r> holds; <r> may then be initialised again. */
void tg_h1req_free(tg_h1req_t *r);

/* Feed buf[0, len). Consumes up to the end of one request (REQUEST), the
 * end of its head (HEAD) or all of it (NEED_MORE); *consumed <= len says
 * how far. After ERROR, every call returns ERROR again, consuming nothing.
 * A call after REQUEST starts the next request (results are reset). */
tg_h1_ev_t tg_h1req_feed(tg_h1req_t *r, const char *buf, size_t len, size_t *consumed);

/* Give back the head arena and the body buffer (an idle keep-alive
 * connection holds neither; the last request's results are then gone).
 * Only between requests: after REQUEST or before any byte. */
void tg_h1req_trim(tg_h1req_t *r);

/* Bytes <r> holds now (head arena and body buffer). */
size_t tg_h1req_held(const tg_h1req_t *r);

/* Does the Accept value <v> (a list of media ranges) admit <type>
 * ("application/json")? The most specific matching range decides (type/sub
 * over type/STAR over STAR/STAR, STAR being '*'), q=0 refuses; other parameters are ignored;
 * case-insensitive. An empty value admits nothing; an absent header is the
 * caller's call (HTTP says anything is acceptable). */
bool tg_h1_accepts(const char *v, size_t n, const char *type);

/* Is the media type in Content-Type value <v> <type>, parameters ignored,
 * case-insensitive ("Application/JSON; charset=utf-8" is application/json)? */
bool tg_h1_media_is(const char *v, size_t n, const char *type);

#endif
