/* h1req: bounded HTTP/1.1 request reader (see h1req.h).
 *
 * Two layers. A byte scanner of our own walks the head first and decides
 * where it ends; http-parser then parses exactly those bytes. The scanner
 * is strict where http-parser is lenient and where lenience lets a
 * request mean two things to two parsers (request smuggling, header
 * injection): every line ends in CRLF (a bare CR or LF is refused), no NUL,
 * no obs-fold (a line starting with SP or HT), header names are tokens
 * (http-parser's lenient mode takes spaces in them), and it counts head bytes and
 * fields, so the bounds hold exactly however the bytes were split.
 *
 * The body is the reader's own: Content-Length bytes are copied, chunked
 * framing is decoded strictly (http-parser's lenient mode, the only one
 * Debian builds, takes any two bytes for the CRLF after chunk data: a
 * smuggling gap). Framing bytes (chunk sizes, extensions, trailers) count
 * against max_header_bytes, so a peer cannot stream framing forever;
 * trailers are checked like header lines and dropped.
 *
 * Pipelining: http-parser is told to skip the body (on_headers_complete
 * returns 1), so it stops at the end of the head; the reader consumes
 * exactly one request and leaves the rest to the caller.
 */
#include "router/http/h1req.h"

#include "config/jscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { PH_HEAD, PH_BODY, PH_DONE, PH_ERROR };

/* head scanner states */
enum { SC_PRE, SC_PRE_CR, SC_LINE, SC_CR, SC_BOL, SC_NAME, SC_END_CR };

/* chunked decoder states (RFC 9112 7.1) */
enum {
    CK_SIZE,    /* hex digits of a chunk size */
    CK_BWS,     /* whitespace after the size: only ';' or CR may follow */
    CK_EXT,     /* chunk extensions, up to CR */
    CK_SIZE_LF, /* LF of the size line */
    CK_DATA,    /* <left> bytes of chunk data */
    CK_DATA_CR, /* CRLF after the data */
    CK_DATA_LF,
    CK_TBOL,   /* start of a trailer line, or the final CRLF */
    CK_TNAME,  /* trailer field name */
    CK_TVAL,   /* trailer field value, up to CR */
    CK_TLF,    /* LF of a trailer line */
    CK_END_LF, /* LF of the final CRLF */
};

#define CUR_NONE    -1 /* the current field is not kept */
#define CUR_NAMING  -2 /* the current field's name is still arriving */
#define ARENA_SLACK 64 /* ", " joins of list headers beyond the head's own bytes */
#define ARENA_FIRST 512u /* the head arena's first size; it doubles up to its bound */

static const struct {
    const char *name;
    bool list;
} kept[TG_H1H_COUNT] = {
    [TG_H1H_HOST] = {"host", false},
    [TG_H1H_ORIGIN] = {"origin", false},
    [TG_H1H_ACCEPT] = {"accept", true},
    [TG_H1H_CONTENT_TYPE] = {"content-type", false},
    [TG_H1H_CONTENT_LENGTH] = {"content-length", false},
    [TG_H1H_TRANSFER_ENCODING] = {"transfer-encoding", true},
    [TG_H1H_AUTHORIZATION] = {"authorization", false},
    [TG_H1H_SESSION_ID] = {"mcp-session-id", false},
    [TG_H1H_PROTOCOL_VERSION] = {"mcp-protocol-version", false},
    [TG_H1H_LAST_EVENT_ID] = {"last-event-id", false},
    [TG_H1H_CONNECTION] = {"connection", true},
    [TG_H1H_EXPECT] = {"expect", true},
};

static const char *const dup_reason[TG_H1H_COUNT] = {
    [TG_H1H_HOST] = "duplicate Host header",
    [TG_H1H_ORIGIN] = "duplicate Origin header",
    [TG_H1H_CONTENT_TYPE] = "duplicate Content-Type header",
    [TG_H1H_CONTENT_LENGTH] = "duplicate Content-Length header (request smuggling)",
    [TG_H1H_AUTHORIZATION] = "duplicate Authorization header",
    [TG_H1H_SESSION_ID] = "duplicate Mcp-Session-Id header",
    [TG_H1H_PROTOCOL_VERSION] = "duplicate MCP-Protocol-Version header",
    [TG_H1H_LAST_EVENT_ID] = "duplicate Last-Event-ID header",
};

static tg_h1_ev_t fail(tg_h1req_t *r, int status, const char *reason)
{
    if (r->phase != PH_ERROR) {
        r->phase = PH_ERROR;
        r->status = status;
        r->reason = reason;
    }
    return TG_H1_ERROR;
}

/* Record a refusal from inside a callback; the callback then returns
 * non-zero, which stops http-parser with an HPE_CB_* error. */
static int cb_fail(tg_h1req_t *r, int status, const char *reason)
{
    fail(r, status, reason);
    return -1;
}

/* ---- setup ------------------------------------------------------------ */

int tg_h1req_init(tg_h1req_t *r, const tg_h1req_opts_t *o)
{
    memset(r, 0, sizeof(*r));
    if (o->max_header_bytes < TG_H1_MIN_HEADER_BYTES ||
        o->max_header_bytes > TG_H1_MAX_HEADER_BYTES || o->max_headers == 0 ||
        o->max_body_bytes == 0)
        return -EINVAL;
    r->o = *o;
    r->arena_max = o->max_header_bytes + ARENA_SLACK; /* allocated as heads need it */
    r->phase = PH_DONE; /* the first feed starts a request */
    return 0;
}

void tg_h1req_free(tg_h1req_t *r)
{
    free(r->arena);
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

size_t tg_h1req_held(const tg_h1req_t *r)
{
    return (size_t)r->arena_cap + r->buf_cap;
}

void tg_h1req_trim(tg_h1req_t *r)
{
    if (r->phase != PH_DONE)
        return;
    free(r->buf);
    r->buf = NULL;
    r->buf_cap = 0;
    free(r->arena);
    r->arena = NULL;
    r->arena_cap = r->arena_len = r->url_len = 0;
    r->body = "";
    r->body_len = 0;
}

/* Reset every per-request field; the bounds and storage stay. */
static void start_request(tg_h1req_t *r)
{
    tg_h1req_opts_t o = r->o;
    char *arena = r->arena, *buf = r->buf;
    uint32_t arena_cap = r->arena_cap, arena_max = r->arena_max;
    size_t buf_cap = r->buf_cap;
    memset(r, 0, sizeof(*r));
    r->o = o;
    r->arena = arena;
    r->arena_cap = arena_cap;
    r->arena_max = arena_max;
    r->buf = buf;
    r->buf_cap = buf_cap;
    http_parser_init(&r->p, HTTP_REQUEST);
    r->p.data = r;
    r->method = TG_H1M_OTHER;
    r->method_name = "";
    r->http_minor = 1;
    r->body = "";
    r->phase = PH_HEAD;
    r->cur = CUR_NONE;
    r->scan = SC_PRE;
    r->ck = CK_SIZE;
}

/* ---- the head scanner ------------------------------------------------- */

static bool is_tchar(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Keep the method token's first bytes, to tell an unknown method (501)
 * from bytes that are not HTTP at all (400). */
static void note_method_byte(tg_h1req_t *r, unsigned char c)
{
    if (r->mtok_end)
        return;
    if (c == ' ' || !is_tchar(c) || r->mtok_len >= sizeof(r->mtok)) {
        r->mtok_end = true;
        r->mtok_sp = c == ' ' && r->mtok_len > 0 && r->mtok_len <= sizeof(r->mtok);
        return;
    }
    r->mtok[r->mtok_len++] = (char)c;
}

/* A refusal found by the scanner, at the last byte it scanned. It is
 * reported only if http-parser finds nothing wrong before that byte: the
 * first fault in the stream decides, however the bytes were split. */
static void scan_fail(tg_h1req_t *r, int status, const char *reason)
{
    r->scan_status = status;
    r->scan_reason = reason;
}

/* A byte of the request line. Its last 9 bytes must be " HTTP/d.d":
 * http-parser's lenient mode takes any bytes for "TTP/" (even CRLFs, so
 * that it would disagree with the scanner on where the head ends). */
static int request_line_byte(tg_h1req_t *r, unsigned char c)
{
    static const char want[] = " HTTP/0.0";
    note_method_byte(r, c);
    if (c != '\r') {
        memmove(r->rl_tail, r->rl_tail + 1, sizeof(r->rl_tail) - 1);
        r->rl_tail[sizeof(r->rl_tail) - 1] = (char)c;
        r->rl_len += r->rl_len < sizeof(r->rl_tail);
        return 0;
    }
    bool ok = r->rl_len == sizeof(r->rl_tail);
    for (size_t i = 0; ok && i < sizeof(r->rl_tail); i++) {
        char t = r->rl_tail[i];
        ok = want[i] == '0' ? t >= '0' && t <= '9' : t == want[i];
    }
    if (ok)
        return 0;
    scan_fail(r, 400, "request line does not end in HTTP/x.y");
    return -1;
}

/* Scan buf[0, len) as head bytes, stopping after the head's last LF, at
 * the head budget, at a refusal, or at the end of a method token
 * http-parser refused. Returns the bytes scanned. */
static size_t scan_head(tg_h1req_t *r, const char *buf, size_t len)
{
    size_t room = r->o.max_header_bytes - r->head_bytes;
    size_t n = len < room ? len : room;
    size_t i = 0;
    while (i < n && !r->head_done && r->scan_status == 0 && !(r->bad_method && r->mtok_end)) {
        unsigned char c = (unsigned char)buf[i++];
        if (c == '\0') {
            scan_fail(r, 400, "NUL byte in the request head");
            break;
        }
        switch (r->scan) {
        case SC_PRE: /* empty lines before the request line are ignored (RFC 9112 2.2) */
            if (c == '\r') {
                r->scan = SC_PRE_CR;
            } else if (c == '\n') {
                scan_fail(r, 400, "bare LF in the request head (lines end in CRLF)");
            } else {
                r->scan = SC_LINE;
                note_method_byte(r, c);
            }
            break;
        case SC_PRE_CR:
        case SC_CR:
            if (c != '\n')
                scan_fail(r, 400, "bare CR in the request head (header injection)");
            else
                r->scan = r->scan == SC_PRE_CR ? SC_PRE : SC_BOL;
            break;
        case SC_LINE:
            if (r->nfields == 0 && request_line_byte(r, c) < 0)
                break;
            if (c == '\r')
                r->scan = SC_CR;
            else if (c == '\n')
                scan_fail(r, 400, "bare LF in the request head (lines end in CRLF)");
            break;
        case SC_BOL:
            if (c == '\r') {
                r->scan = SC_END_CR;
            } else if (c == ' ' || c == '\t') {
                scan_fail(r, 400, "obs-fold (a header line starting with whitespace)");
            } else if (c == '\n') {
                scan_fail(r, 400, "bare LF in the request head (lines end in CRLF)");
            } else if (++r->nfields > r->o.max_headers) {
                scan_fail(r, 431, "more header fields than max_headers");
            } else if (!is_tchar(c)) {
                scan_fail(r, 400, "invalid character in a header name");
            } else {
                r->scan = SC_NAME;
            }
            break;
        case SC_NAME: /* http-parser alone would take "Name With Spaces:" */
            if (c == ':')
                r->scan = SC_LINE;
            else if (!is_tchar(c))
                scan_fail(r, 400, "invalid character in a header name");
            break;
        case SC_END_CR:
            if (c != '\n')
                scan_fail(r, 400, "bare CR in the request head (header injection)");
            else
                r->head_done = true;
            break;
        }
    }
    r->head_bytes += (uint32_t)i;
    return i;
}

/* ---- kept headers ----------------------------------------------------- */

static int kept_index(const char *name, size_t n)
{
    for (int i = 0; i < TG_H1H_COUNT; i++) {
        if (strlen(kept[i].name) == n && strncasecmp(kept[i].name, name, n) == 0)
            return i;
    }
    return CUR_NONE;
}

static void reverse(char *a, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        char t = a[i];
        a[i] = a[n - 1 - i];
        a[n - 1 - i] = t;
    }
}

/* Move kept header <h>'s value to the end of the arena (a rotation, no
 * extra space), so a second occurrence of a list header can be appended
 * to it. */
static void move_to_end(tg_h1req_t *r, int h)
{
    uint32_t off = r->off[h], n = r->len[h], tail = r->arena_len - off;
    reverse(r->arena + off, n);
    reverse(r->arena + off + n, tail - n);
    reverse(r->arena + off, tail);
    for (int i = 0; i < TG_H1H_COUNT; i++) {
        if (i != h && r->seen[i] && r->off[i] > off)
            r->off[i] -= n;
    }
    r->off[h] = r->arena_len - n;
}

static int append(tg_h1req_t *r, const char *at, size_t n)
{
    if (n > r->arena_max - r->arena_len)
        return cb_fail(r, 431, "kept header values over max_header_bytes");
    if (n > r->arena_cap - r->arena_len) { /* grow: doubling from ARENA_FIRST, up to arena_max */
        uint32_t cap = r->arena_cap ? r->arena_cap : ARENA_FIRST;
        while (cap < r->arena_len + n)
            cap *= 2;
        if (cap > r->arena_max)
            cap = r->arena_max;
        char *a = realloc(r->arena, cap);
        if (a == NULL)
            return cb_fail(r, 500, "out of memory for a request head");
        r->arena = a;
        r->arena_cap = cap;
    }
    memcpy(r->arena + r->arena_len, at, n);
    r->arena_len += (uint32_t)n;
    return 0;
}

/* The current field's name is complete: decide whether it is kept. */
static int name_done(tg_h1req_t *r)
{
    int h = r->name_len <= sizeof(r->name) ? kept_index(r->name, r->name_len) : CUR_NONE;
    r->cur = h;
    if (h < 0)
        return 0;
    if (r->seen[h] && !kept[h].list)
        return cb_fail(r, 400, dup_reason[h]);
    if (r->seen[h]) {
        move_to_end(r, h);
        r->len[h] += 2;
        return append(r, ", ", 2);
    }
    r->seen[h] = 1;
    r->off[h] = r->arena_len;
    r->len[h] = 0;
    return 0;
}

/* The current field's value is complete: trim trailing whitespace. */
static void value_done(tg_h1req_t *r)
{
    if (r->cur < 0)
        return;
    while (r->len[r->cur] > 0 &&
           (r->arena[r->arena_len - 1] == ' ' || r->arena[r->arena_len - 1] == '\t')) {
        r->len[r->cur]--;
        r->arena_len--;
    }
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    tg_h1req_t *r = p->data;
    if (append(r, at, n) < 0)
        return -1;
    r->url_len += (uint32_t)n;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    tg_h1req_t *r = p->data;
    if (r->cur != CUR_NAMING) {
        value_done(r);
        r->cur = CUR_NAMING;
        r->name_len = 0;
    }
    if (r->name_len < sizeof(r->name)) {
        size_t k = n < sizeof(r->name) - r->name_len ? n : sizeof(r->name) - r->name_len;
        memcpy(r->name + r->name_len, at, k);
    }
    r->name_len =
        r->name_len + n > sizeof(r->name) ? sizeof(r->name) + 1 : r->name_len + (uint32_t)n;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    tg_h1req_t *r = p->data;
    if (r->cur == CUR_NAMING && name_done(r) < 0)
        return -1;
    if (r->cur < 0)
        return 0;
    r->len[r->cur] += (uint32_t)n;
    return append(r, at, n);
}

/* ---- the end of the head ---------------------------------------------- */

static tg_h1_method_t method_of(enum http_method m)
{
    switch (m) {
    case HTTP_GET:
        return TG_H1M_GET;
    case HTTP_POST:
        return TG_H1M_POST;
    case HTTP_DELETE:
        return TG_H1M_DELETE;
    case HTTP_HEAD:
        return TG_H1M_HEAD;
    case HTTP_OPTIONS:
        return TG_H1M_OPTIONS;
    default:
        return TG_H1M_OTHER;
    }
}

/* Next comma-separated element of v[*i, n), trimmed; false at the end. */
static bool next_elem(const char *v, size_t n, size_t *i, const char **e, size_t *en)
{
    while (*i < n && (v[*i] == ' ' || v[*i] == '\t' || v[*i] == ','))
        (*i)++;
    if (*i >= n)
        return false;
    size_t s = *i;
    while (*i < n && v[*i] != ',')
        (*i)++;
    size_t end = *i;
    while (end > s && (v[end - 1] == ' ' || v[end - 1] == '\t'))
        end--;
    *e = v + s;
    *en = end - s;
    return true;
}

static bool elem_is(const char *e, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(e, lit, n) == 0;
}

/* Transfer-Encoding: exactly one coding, chunked (RFC 9112 6.1, 6.3). */
static int check_te(tg_h1req_t *r, tg_h1_str_t te)
{
    size_t i = 0, en, nchunked = 0, nother = 0;
    const char *e;
    bool last_chunked = false;
    while (next_elem(te.p, te.n, &i, &e, &en)) {
        last_chunked = elem_is(e, en, "chunked");
        if (last_chunked)
            nchunked++;
        else
            nother++;
    }
    if (!last_chunked)
        return cb_fail(r, 400,
                       "Transfer-Encoding does not end in chunked: the body length is unknown "
                       "(request smuggling)");
    if (nchunked > 1)
        return cb_fail(r, 400, "chunked applied twice in Transfer-Encoding (request smuggling)");
    if (nother > 0)
        return cb_fail(r, 501, "a transfer coding other than chunked (only chunked is supported)");
    if (r->http_minor == 0)
        return cb_fail(r, 400, "Transfer-Encoding in an HTTP/1.0 request (request smuggling)");
    if (!(r->p.flags & F_CHUNKED))
        return cb_fail(r, 400, "Transfer-Encoding not understood as chunked");
    r->chunked = true;
    return 0;
}

/* Expect: 100-continue only (RFC 9110 10.1.1); ignored in HTTP/1.0. */
static int check_expect(tg_h1req_t *r, tg_h1_str_t ex)
{
    size_t i = 0, en;
    const char *e;
    bool any = false;
    while (next_elem(ex.p, ex.n, &i, &e, &en)) {
        any = true;
        if (!elem_is(e, en, "100-continue"))
            return cb_fail(r, 417, "an Expect other than 100-continue");
    }
    if (!any)
        return cb_fail(r, 417, "an empty Expect header");
    r->expect_continue = r->http_minor == 1;
    return 0;
}

static int reserve(tg_h1req_t *r, size_t need)
{
    if (need <= r->buf_cap)
        return 0;
    if (need > r->o.max_body_bytes) /* callers check first; never under-allocate */
        return cb_fail(r, 413, "body over max_body_bytes");
    size_t cap = r->buf_cap * 2 > need ? r->buf_cap * 2 : need;
    if (cap > r->o.max_body_bytes)
        cap = r->o.max_body_bytes;
    char *b = realloc(r->buf, cap);
    if (b == NULL)
        return cb_fail(r, 500, "out of memory for the request body");
    r->buf = b;
    r->buf_cap = cap;
    return 0;
}

/* Fill the results the front reads from the head. */
static int head_results(tg_h1req_t *r)
{
    struct http_parser_url u;
    r->method = method_of((enum http_method)r->p.method);
    r->method_name = http_method_str((enum http_method)r->p.method);
    r->http_minor = (uint8_t)r->p.http_minor;
    for (int i = 0; i < TG_H1H_COUNT; i++) {
        if (r->seen[i])
            r->hdr[i] = (tg_h1_str_t){r->arena != NULL ? r->arena + r->off[i] : "", r->len[i]};
    }
    http_parser_url_init(&u);
    if (r->url_len == 0 || http_parser_parse_url(r->arena, r->url_len, 0, &u) != 0 ||
        !(u.field_set & (1 << UF_PATH)))
        return cb_fail(r, 400, "request target is not an origin-form or absolute URL");
    r->path = (tg_h1_str_t){r->arena + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len};
    if (u.field_set & (1 << UF_QUERY))
        r->query = (tg_h1_str_t){r->arena + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len};
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    tg_h1req_t *r = p->data;
    if (r->cur == CUR_NAMING && name_done(r) < 0) /* a last field with no value bytes */
        return -1;
    value_done(r);
    r->cur = CUR_NONE;
    if (p->http_major != 1 || p->http_minor > 1)
        return cb_fail(r, 505, "HTTP version other than 1.0 or 1.1");
    if (p->method == HTTP_CONNECT)
        return cb_fail(r, 501, "CONNECT is not supported");
    if (head_results(r) < 0)
        return -1;
    if (p->http_minor == 1 && !r->seen[TG_H1H_HOST])
        return cb_fail(r, 400, "no Host header in an HTTP/1.1 request");
    if (r->seen[TG_H1H_TRANSFER_ENCODING] && check_te(r, r->hdr[TG_H1H_TRANSFER_ENCODING]) < 0)
        return -1;
    if (r->seen[TG_H1H_EXPECT] && check_expect(r, r->hdr[TG_H1H_EXPECT]) < 0)
        return -1;
    bool body = r->chunked || ((p->flags & F_CONTENTLENGTH) && p->content_length > 0);
    if (!r->chunked && body) {
        if (p->content_length > r->o.max_body_bytes)
            return cb_fail(r, 413, "Content-Length over max_body_bytes");
        if (reserve(r, (size_t)p->content_length) < 0)
            return -1;
        r->left = p->content_length;
    }
    r->body_pending = body;
    r->expect_continue = r->expect_continue && body;
    r->keep_alive = http_should_keep_alive(p) != 0;
    /* 1: http-parser skips the body (and calls on_message_complete now);
     * the reader's own decoder takes it, strict where http-parser's
     * lenient mode is not (any two bytes pass for the CRLF after chunk
     * data there). */
    return 1;
}

static int on_message_complete(http_parser *p)
{
    tg_h1req_t *r = p->data;
    r->head_done_parsed = true;
    http_parser_pause(p, 1);
    return 0;
}
static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

/* ---- feeding ---------------------------------------------------------- */

/* http-parser refused the method: 501 for a well-formed unknown token
 * followed by SP, 400 for anything else. Decided once the token ended. */
static tg_h1_ev_t method_verdict(tg_h1req_t *r)
{
    if (r->mtok_sp)
        return fail(r, 501, "method not implemented");
    return fail(r, 400, "malformed request line (not HTTP/1.x)");
}

static tg_h1_ev_t parser_error(tg_h1req_t *r)
{
    enum http_errno e = HTTP_PARSER_ERRNO(&r->p);
    if (r->phase == PH_ERROR)
        return TG_H1_ERROR; /* a callback refused */
    switch (e) {
    case HPE_INVALID_METHOD:
        if (!r->mtok_end) {
            r->bad_method = true;
            return TG_H1_NEED_MORE;
        }
        return method_verdict(r);
    case HPE_UNEXPECTED_CONTENT_LENGTH:
        return fail(r, 400, "Content-Length twice or with Transfer-Encoding (request smuggling)");
    case HPE_INVALID_CONTENT_LENGTH:
        return fail(r, 400, "Content-Length is not a number");
    case HPE_INVALID_TRANSFER_ENCODING:
        return fail(r, 400, "Transfer-Encoding does not end in chunked (request smuggling)");
    case HPE_HEADER_OVERFLOW:
        return fail(r, 431, "request head over the parser's limit");
    case HPE_INVALID_VERSION:
        return fail(r, 400, "malformed HTTP version");
    case HPE_INVALID_HEADER_TOKEN:
        return fail(r, 400, "invalid character in a header (header injection)");
    default:
        return fail(r, 400, "malformed request");
    }
}

/* Run http-parser on head bytes buf[0, n). */
static tg_h1_ev_t execute(tg_h1req_t *r, const char *buf, size_t n, size_t *used)
{
    *used = 0;
    if (n == 0) /* http-parser takes an empty buffer for the end of the stream */
        return TG_H1_NEED_MORE;
    *used = http_parser_execute(&r->p, &settings, buf, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->p);
    if (e == HPE_PAUSED && r->head_done_parsed)
        return TG_H1_NEED_MORE;
    if (e != HPE_OK)
        return parser_error(r);
    return TG_H1_NEED_MORE;
}

/* The request is complete: the next feed starts another. */
static tg_h1_ev_t request_done(tg_h1req_t *r)
{
    r->phase = PH_DONE;
    r->body = r->body_len > 0 ? r->buf : "";
    return TG_H1_REQUEST;
}

/* The head part of a feed: scan, then parse what was scanned (up to the
 * byte the scanner refused, if it did). */
static tg_h1_ev_t feed_head(tg_h1req_t *r, const char *buf, size_t len, size_t *consumed)
{
    size_t n = scan_head(r, buf, len);
    bool scan_err = r->scan_status != 0;
    size_t upto = scan_err ? n - 1 : n, used = 0;
    tg_h1_ev_t ev = TG_H1_NEED_MORE;
    *consumed = n;
    if (!r->bad_method) {
        ev = execute(r, buf, upto, &used);
        if (ev != TG_H1_NEED_MORE) {
            *consumed = used;
            return ev;
        }
    }
    /* http-parser refused the method: 501 or 400 once its token ended */
    if (r->bad_method && r->mtok_end)
        return method_verdict(r);
    if (scan_err)
        return fail(r, r->scan_status, r->scan_reason);
    if (r->bad_method)
        return TG_H1_NEED_MORE;
    if (!r->head_done && r->head_bytes >= r->o.max_header_bytes)
        return fail(r, 431, "request head over max_header_bytes");
    if (r->head_done && !r->head_done_parsed)
        return fail(r, 400, "malformed request head (http-parser did not find its end)");
    return TG_H1_NEED_MORE;
}

/* ---- the body ---------------------------------------------------------- */

static size_t take_data(tg_h1req_t *r, const char *buf, size_t len)
{
    size_t k = r->left < len ? (size_t)r->left : len;
    memcpy(r->buf + r->body_len, buf, k);
    r->body_len += k;
    r->left -= k;
    return k;
}

/* One framing byte <c> of a chunked body: 0 to go on, 1 at the end of the
 * body, or a refusal (TG_H1_ERROR recorded, -1). */
static int chunk_byte(tg_h1req_t *r, unsigned char c)
{
    static const char *const bad = "invalid chunked encoding";
    bool ctl = (c < 0x20 && c != '\t') || c == 0x7f;
    int d;
    switch (r->ck) {
    case CK_SIZE:
        if ((d = tg_hexval(c)) >= 0) {
            /* refused from the size, before any of its data */
            size_t room = r->o.max_body_bytes - r->body_len;
            if ((size_t)d > room || r->left > (room - (size_t)d) / 16)
                return cb_fail(r, 413, "chunked body over max_body_bytes");
            r->left = r->left * 16 + (uint64_t)d;
            r->ck_digits = true;
            return 0;
        }
        if (!r->ck_digits)
            return cb_fail(r, 400, bad);
        r->ck = CK_BWS; /* the size ended: this byte is what follows it */
        return chunk_byte(r, c);
    case CK_BWS:
        if (c == ' ' || c == '\t')
            r->ck = CK_BWS;
        else if (c == ';')
            r->ck = CK_EXT;
        else if (c == '\r')
            r->ck = CK_SIZE_LF;
        else
            return cb_fail(r, 400, bad);
        return 0;
    case CK_EXT:
        if (c == '\r')
            r->ck = CK_SIZE_LF;
        else if (ctl)
            return cb_fail(r, 400, "control byte in a chunk extension");
        return 0;
    case CK_SIZE_LF:
        if (c != '\n')
            return cb_fail(r, 400, "bare CR in chunked framing");
        r->ck = r->left > 0 ? CK_DATA : CK_TBOL;
        r->ck_digits = false;
        return r->left > 0 ? reserve(r, r->body_len + (size_t)r->left) : 0;
    case CK_DATA_CR:
        if (c != '\r')
            return cb_fail(r, 400, "chunk data longer than its size");
        r->ck = CK_DATA_LF;
        return 0;
    case CK_DATA_LF:
        if (c != '\n')
            return cb_fail(r, 400, "bare CR in chunked framing");
        r->ck = CK_SIZE;
        return 0;
    case CK_TBOL:
        if (c == '\r') {
            r->ck = CK_END_LF;
            return 0;
        }
        if (!is_tchar(c))
            return cb_fail(r, 400, "invalid trailer line (obs-fold or a bad name)");
        r->ck = CK_TNAME;
        return 0;
    case CK_TNAME:
        if (c == ':')
            r->ck = CK_TVAL;
        else if (!is_tchar(c))
            return cb_fail(r, 400, "invalid character in a trailer name");
        return 0;
    case CK_TVAL:
        if (c == '\r')
            r->ck = CK_TLF;
        else if (ctl)
            return cb_fail(r, 400, "control byte in a trailer (header injection)");
        return 0;
    case CK_TLF:
    case CK_END_LF:
        if (c != '\n')
            return cb_fail(r, 400, "bare CR in chunked framing");
        if (r->ck == CK_END_LF)
            return 1;
        r->ck = CK_TBOL;
        return 0;
    }
    return cb_fail(r, 400, bad);
}

/* Body bytes buf[0, len): Content-Length bytes copied, or chunked framing
 * decoded (its bytes counted against max_header_bytes, one at a time, so
 * the bound holds however the bytes were split). */
static tg_h1_ev_t feed_body(tg_h1req_t *r, const char *buf, size_t len, size_t *used)
{
    size_t i = 0;
    *used = 0;
    if (!r->chunked) {
        *used = take_data(r, buf, len);
        return r->left == 0 ? request_done(r) : TG_H1_NEED_MORE;
    }
    while (i < len) {
        if (r->ck == CK_DATA) {
            i += take_data(r, buf + i, len - i);
            if (r->left == 0)
                r->ck = CK_DATA_CR;
            continue;
        }
        unsigned char c = (unsigned char)buf[i++];
        if (++r->framing > r->o.max_header_bytes) {
            *used = i;
            return fail(r, 413, "chunk sizes, extensions and trailers over max_header_bytes");
        }
        int rc = chunk_byte(r, c);
        if (rc != 0) {
            *used = i;
            return rc > 0 ? request_done(r) : TG_H1_ERROR;
        }
    }
    *used = len;
    return TG_H1_NEED_MORE;
}

tg_h1_ev_t tg_h1req_feed(tg_h1req_t *r, const char *buf, size_t len, size_t *consumed)
{
    *consumed = 0;
    if (r->phase == PH_ERROR)
        return TG_H1_ERROR;
    if (r->phase == PH_DONE)
        start_request(r);
    if (r->phase == PH_HEAD) {
        tg_h1_ev_t ev = feed_head(r, buf, len, consumed);
        if (ev != TG_H1_NEED_MORE || !r->head_done)
            return ev;
        if (!r->body_pending)
            return request_done(r);
        r->phase = PH_BODY;
        if (r->expect_continue)
            return TG_H1_HEAD;
    }
    size_t used = 0;
    tg_h1_ev_t ev = feed_body(r, buf + *consumed, len - *consumed, &used);
    *consumed += used;
    return ev;
}

/* ---- media types ------------------------------------------------------ */

static bool qvalue_zero(const char *v, size_t n)
{
    /* qvalue = "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3("0") ] */
    if (n == 0 || v[0] != '0')
        return false;
    for (size_t i = 2; i < n; i++) {
        if (v[i] != '0')
            return false;
    }
    return n == 1 || v[1] == '.';
}

/* Split one media range e[0, n) into type/sub and its q; false when it is
 * not type/subtype. */
static bool parse_range(const char *e, size_t n, const char **t, size_t *tn, bool *q0)
{
    size_t i = 0;
    while (i < n && e[i] != ';')
        i++;
    size_t end = i;
    while (end > 0 && (e[end - 1] == ' ' || e[end - 1] == '\t'))
        end--;
    *t = e;
    *tn = end;
    *q0 = false;
    while (i < n) { /* parameters: ;name=value */
        i++;
        while (i < n && (e[i] == ' ' || e[i] == '\t'))
            i++;
        size_t s = i;
        while (i < n && e[i] != ';')
            i++;
        size_t pe = i;
        while (pe > s && (e[pe - 1] == ' ' || e[pe - 1] == '\t'))
            pe--;
        if (pe - s >= 2 && (e[s] == 'q' || e[s] == 'Q') && e[s + 1] == '=')
            *q0 = qvalue_zero(e + s + 2, pe - s - 2);
    }
    const char *slash = memchr(e, '/', end);
    return slash != NULL && slash > e && (size_t)(slash - e) < end - 1;
}

bool tg_h1_accepts(const char *v, size_t n, const char *type)
{
    const char *slash = strchr(type, '/');
    size_t tlen = strlen(type), major = slash != NULL ? (size_t)(slash - type) : tlen;
    int best = -1; /* specificity of the best match: 0 * / *, 1 type/ *, 2 type/sub */
    bool best_ok = false;
    size_t i = 0, en, rn;
    const char *e, *rt;
    bool q0;
    while (v != NULL && next_elem(v, n, &i, &e, &en)) {
        if (!parse_range(e, en, &rt, &rn, &q0))
            continue;
        int spec = -1;
        if (rn == 3 && memcmp(rt, "*/*", 3) == 0)
            spec = 0;
        else if (rn == major + 2 && strncasecmp(rt, type, major + 1) == 0 && rt[rn - 1] == '*')
            spec = 1;
        else if (rn == tlen && strncasecmp(rt, type, tlen) == 0)
            spec = 2;
        if (spec < 0 || spec < best)
            continue;
        /* Equal specificity: any admitting range admits. */
        best_ok = spec > best ? !q0 : (best_ok || !q0);
        best = spec;
    }
    return best >= 0 && best_ok;
}

bool tg_h1_media_is(const char *v, size_t n, const char *type)
{
    size_t i = 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    size_t s = i;
    while (i < n && v[i] != ';' && v[i] != ' ' && v[i] != '\t')
        i++;
    size_t tl = strlen(type);
    if (i - s != tl || strncasecmp(v + s, type, tl) != 0)
        return false;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    return i == n || v[i] == ';';
}
