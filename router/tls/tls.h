/* TLS server endpoints on memory BIOs (OpenSSL 3): no sockets, no loop.
 *
 * The HTTP front owns the socket and moves bytes: what it reads from the
 * peer goes into tg_tls_conn_feed(), what tg_tls_conn_pull() hands out goes
 * to the peer; plaintext comes out of tg_tls_conn_read() and goes in
 * through tg_tls_conn_write(). The handshake advances inside those calls
 * (or tg_tls_conn_handshake()), so after every feed the front reads, then
 * pulls whatever ciphertext is pending and writes it.
 *
 * Two objects:
 *   - tg_tls_ctx_t: the certificate chain and key of a listener (PEM files),
 *     TLS 1.2 minimum, OpenSSL's default ciphers, no renegotiation, no
 *     compression, no session tickets, ALPN "http/1.1" only. Reload builds a
 *     new SSL_CTX and swaps it in for new connections; connections already
 *     open keep the one they began with (each holds a reference). A failed
 *     reload keeps the old one.
 *   - tg_tls_conn_t: one connection's TLS state and its two memory BIOs.
 *
 * Error conventions: setup calls (ctx new, reload) take a tg_err_t and
 * return 0 or -1, with a message naming the file and what is wrong; runtime
 * calls return a count or a negative errno, and after -EPROTO
 * tg_tls_conn_reason() gives a short reason for the log (OpenSSL's reason
 * string or ours: never a byte of the peer's data or a key).
 *
 * Bounds: <cap> of tg_tls_conn_new bounds the ciphertext waiting in each
 * direction: feed takes no more than fits below <cap> (-ENOBUFS when
 * nothing does: read plaintext first), write refuses while the pending
 * output is at <cap> (-EAGAIN: pull and send first) and takes at most one
 * record (16 KiB) per call, so the output stays below <cap> plus one
 * record. OpenSSL itself holds at most one decrypted record.
 */
#ifndef TG_ROUTER_TLS_TLS_H
#define TG_ROUTER_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config/err.h"

#define TG_TLS_RECORD_MAX  16384u /* fixed internal bound: a TLS record's plaintext */
#define TG_TLS_CAP_MIN     20480u /* fixed internal bound: smallest <cap>, one record and overhead */
#define TG_TLS_WARN_MAX    256u   /* fixed internal bound: a certificate warning */
#define TG_TLS_SNIFF_BYTES 8u     /* fixed internal bound: bytes that tell plain HTTP from TLS */

/* What the front answers, in cleartext, to a plain HTTP request on a TLS
 * port (as nginx does), then closes. */
#define TG_TLS_PLAIN_HTTP_REPLY                                                                    \
    "HTTP/1.1 400 Bad Request\r\n"                                                                 \
    "Content-Type: text/plain\r\n"                                                                 \
    "Content-Length: 38\r\n"                                                                       \
    "Connection: close\r\n"                                                                        \
    "\r\n"                                                                                         \
    "plain HTTP request sent to a TLS port\n"

typedef struct tg_tls_ctx tg_tls_ctx_t;
typedef struct tg_tls_conn tg_tls_conn_t;

/* ---- contexts (setup layer) ---- */

/* A context serving certificate chain <cert> (PEM: the leaf first, then
 * intermediates) with private key <key> (PEM, not encrypted). 0 with *out
 * set, or -1 with <err> naming the file and the fault ("no PEM
 * certificate", "does not match the certificate in ..."). A certificate
 * that is expired or not yet valid still loads: <warn> (capacity <wcap>,
 * may be NULL) then holds a one-line warning, else "". */
int tg_tls_ctx_new(tg_tls_ctx_t **out, const char *cert, const char *key, char *warn, size_t wcap,
                   tg_err_t *err);

/* Load <cert> and <key> again (the same or other paths) into a new SSL_CTX
 * and use it for connections created from now on. 0, or -1 with <err> set
 * and the context unchanged. <warn> as for tg_tls_ctx_new. */
int tg_tls_ctx_reload(tg_tls_ctx_t *ctx, const char *cert, const char *key, char *warn, size_t wcap,
                      tg_err_t *err);

/* How many times the context was (re)loaded: 1 after new, +1 per
 * successful reload (for the log and tests). */
unsigned tg_tls_ctx_generation(const tg_tls_ctx_t *ctx);

/* Free <ctx>; connections made from it stay usable until freed. */
void tg_tls_ctx_free(tg_tls_ctx_t *ctx);

/* Whether <path> holds a certificate whose validity period covers now:
 * 1 valid, 0 not (the reason in <warn>), -1 unreadable (reason in <err>). */
int tg_tls_cert_check_time(const char *path, char *warn, size_t wcap, tg_err_t *err);

/* ---- connections (runtime) ---- */

/* A server-side connection on the context's current certificate, bounding
 * pending ciphertext to <cap> bytes per direction (at least
 * TG_TLS_CAP_MIN). NULL when out of memory. */
tg_tls_conn_t *tg_tls_conn_new(tg_tls_ctx_t *ctx, size_t cap);
void tg_tls_conn_free(tg_tls_conn_t *c);

/* Give the connection <len> bytes received from the peer. Returns the
 * bytes taken (fewer than <len> when the cap is reached: offer the rest
 * later), -ENOBUFS when none fit, or -EPROTO when the first bytes are not
 * a TLS handshake (tg_tls_conn_plain_http() says whether they were an HTTP
 * request). */
ssize_t tg_tls_conn_feed(tg_tls_conn_t *c, const void *buf, size_t len);

/* Advance the handshake: 1 done, 0 in progress (feed more, pull what is
 * pending), -EPROTO failed (see tg_tls_conn_reason). */
int tg_tls_conn_handshake(tg_tls_conn_t *c);
bool tg_tls_conn_established(const tg_tls_conn_t *c);

/* Up to <cap> bytes of plaintext into <buf>: the count, -EAGAIN when more
 * input is needed, 0 when the peer closed with close_notify, -EPROTO on a
 * protocol error. Drives the handshake while it is in progress. */
ssize_t tg_tls_conn_read(tg_tls_conn_t *c, void *buf, size_t cap);

/* Encrypt up to one record of <len> bytes at <buf>: the bytes taken,
 * -EAGAIN while the handshake is not done or the pending output is at the
 * cap, -EPIPE after shutdown began, -EPROTO on a protocol error. */
ssize_t tg_tls_conn_write(tg_tls_conn_t *c, const void *buf, size_t len);

/* Ciphertext waiting to be sent, and up to <cap> bytes of it moved into
 * <buf> (the count moved). */
size_t tg_tls_conn_pending(const tg_tls_conn_t *c);
size_t tg_tls_conn_pull(tg_tls_conn_t *c, void *buf, size_t cap);

/* Send close_notify (pull it out after): 1 when the peer's close_notify
 * has also been seen, 0 when sent and the peer's is still to come, -EPROTO
 * when the connection cannot shut down cleanly (close it). */
int tg_tls_conn_shutdown(tg_tls_conn_t *c);

/* The short reason of the last -EPROTO ("unsupported protocol", "no shared
 * cipher", "plain HTTP request sent to a TLS port"), or "". After -EPROTO
 * the front still sends what tg_tls_conn_pull gives (the alert that tells
 * the client why), then closes. */
const char *tg_tls_conn_reason(const tg_tls_conn_t *c);

/* Whether the first bytes fed were a plain HTTP request (answer
 * TG_TLS_PLAIN_HTTP_REPLY in cleartext and close). */
bool tg_tls_conn_plain_http(const tg_tls_conn_t *c);

/* The negotiated protocol ("TLSv1.3") and ALPN ("http/1.1", or "" when
 * the client offered none), for the log. */
const char *tg_tls_conn_version(const tg_tls_conn_t *c);
const char *tg_tls_conn_alpn(const tg_tls_conn_t *c);

/* ---- the first bytes (pure) ---- */

typedef enum tg_tls_sniff {
    TG_TLS_SNIFF_MORE = 0, /* too few bytes to tell */
    TG_TLS_SNIFF_TLS,      /* a TLS handshake record */
    TG_TLS_SNIFF_HTTP,     /* an HTTP/1 request line ("GET ", "POST ", ...) */
    TG_TLS_SNIFF_OTHER,    /* neither */
} tg_tls_sniff_t;

/* What the first <len> bytes a client sent are. */
tg_tls_sniff_t tg_tls_sniff(const void *buf, size_t len);

#endif
