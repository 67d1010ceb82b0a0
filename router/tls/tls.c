/* TLS server endpoints on memory BIOs: see tls.h. */
#include "router/tls/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define REASON_MAX 96 /* fixed internal bound: a connection's error reason */

/* Owned by the listener; frees its SSL_CTX reference in tg_tls_ctx_free. */
struct tg_tls_ctx {
    SSL_CTX *ssl; /* the current one; connections hold their own reference */
    unsigned generation;
};

/* Owned by the front's connection; the SSL owns both BIOs. */
struct tg_tls_conn {
    SSL *ssl;
    BIO *in;  /* ciphertext from the peer, waiting for SSL_read */
    BIO *out; /* ciphertext for the peer, waiting for pull */
    size_t cap;
    unsigned char sniff[TG_TLS_SNIFF_BYTES]; /* first bytes until they say TLS or not */
    size_t nsniff;
    bool sniffed;    /* the first bytes were a TLS record: feed goes to <in> */
    bool plain_http; /* ... or an HTTP request */
    bool shutting;
    char reason[REASON_MAX];
};

/* ------------------------------------------------------------------ */
/* Contexts                                                            */

/* Never prompt on a terminal for an encrypted key: fail instead. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0;
}

/* Offer "http/1.1" only: a client that offers ALPN without it gets
 * no_application_protocol (RFC 7301); one that offers none gets none. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;

    (void)ssl, (void)arg;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* OpenSSL's reason for the last error in its queue (e.g. "key values
 * mismatch"), the queue cleared; <fallback> when empty. */
static const char *ossl_reason(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;

    ERR_clear_error();
    return r ? r : fallback;
}

/* A file OpenSSL is about to read: its errno says more than OpenSSL's. */
static int readable(const char *what, const char *path, tg_err_t *err)
{
    FILE *f = fopen(path, "r");

    if (!f)
        return tg_err_set(err, -1, "tls %s %s: %s", what, path, strerror(errno));
    fclose(f);
    return 0;
}

static int time_warning(X509 *x, const char *path, char *warn, size_t wcap)
{
    const ASN1_TIME *na = X509_get0_notAfter(x), *nb = X509_get0_notBefore(x);
    const ASN1_TIME *t = NULL;
    const char *what = NULL;
    char when[64] = "";
    BIO *b;

    if (X509_cmp_current_time(na) < 0)
        t = na, what = "expired on";
    else if (X509_cmp_current_time(nb) > 0)
        t = nb, what = "not valid before";
    if (!t)
        return 1;
    b = BIO_new(BIO_s_mem());
    if (b && ASN1_TIME_print(b, t) == 1) {
        int n = BIO_read(b, when, (int)sizeof when - 1);
        when[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    if (warn)
        snprintf(warn, wcap, "tls cert %s: the certificate is %s %s (clients will refuse it)", path,
                 what, when);
    return 0;
}

int tg_tls_cert_check_time(const char *path, char *warn, size_t wcap, tg_err_t *err)
{
    BIO *b;
    X509 *x;
    int rc;

    if (warn && wcap)
        warn[0] = '\0';
    if (readable("cert", path, err) < 0)
        return -1;
    b = BIO_new_file(path, "r");
    x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    if (!x) {
        ERR_clear_error();
        return tg_err_set(err, -1,
                          "tls cert %s: no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
                          path);
    }
    rc = time_warning(x, path, warn, wcap);
    X509_free(x);
    return rc;
}

/* A new SSL_CTX serving <cert> and <key>, or NULL with <err> set. */
static SSL_CTX *build(const char *cert, const char *key, char *warn, size_t wcap, tg_err_t *err)
{
    SSL_CTX *s;

    if (warn && wcap)
        warn[0] = '\0';
    if (readable("cert", cert, err) < 0 || readable("key", key, err) < 0)
        return NULL;
    ERR_clear_error();
    s = SSL_CTX_new(TLS_server_method());
    if (!s) {
        tg_err_set(err, -1, "tls: cannot create a context: %s", ossl_reason("out of memory"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
    SSL_CTX_set_options(s, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_default_passwd_cb(s, no_password);
    SSL_CTX_set_alpn_select_cb(s, select_alpn, NULL);
    SSL_CTX_set_mode(s, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(s, cert) != 1) {
        tg_err_set(err, -1,
                   "tls cert %s: not a PEM certificate chain (%s; expected -----BEGIN "
                   "CERTIFICATE----- blocks, the server's first)",
                   cert, ossl_reason("unreadable"));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(s, key, SSL_FILETYPE_PEM) != 1) {
        const char *r = ossl_reason("unreadable");
        if (strstr(r, "mismatch"))
            tg_err_set(err, -1, "tls key %s: does not match the certificate in %s", key, cert);
        else
            tg_err_set(err, -1,
                       "tls key %s: not an unencrypted PEM private key (%s; expected -----BEGIN "
                       "PRIVATE KEY-----)",
                       key, r);
        goto fail;
    }
    if (SSL_CTX_check_private_key(s) != 1) {
        ERR_clear_error();
        tg_err_set(err, -1, "tls key %s: does not match the certificate in %s", key, cert);
        goto fail;
    }
    time_warning(SSL_CTX_get0_certificate(s), cert, warn, wcap);
    return s;
fail:
    SSL_CTX_free(s);
    return NULL;
}

int tg_tls_ctx_new(tg_tls_ctx_t **out, const char *cert, const char *key, char *warn, size_t wcap,
                   tg_err_t *err)
{
    tg_tls_ctx_t *ctx = calloc(1, sizeof *ctx);

    if (!ctx)
        return tg_err_set(err, -1, "tls: out of memory");
    ctx->ssl = build(cert, key, warn, wcap, err);
    if (!ctx->ssl) {
        free(ctx);
        return -1;
    }
    ctx->generation = 1;
    *out = ctx;
    return 0;
}

int tg_tls_ctx_reload(tg_tls_ctx_t *ctx, const char *cert, const char *key, char *warn, size_t wcap,
                      tg_err_t *err)
{
    SSL_CTX *s = build(cert, key, warn, wcap, err);

    if (!s)
        return -1;
    SSL_CTX_free(ctx->ssl); /* open connections keep their reference */
    ctx->ssl = s;
    ctx->generation++;
    return 0;
}

unsigned tg_tls_ctx_generation(const tg_tls_ctx_t *ctx)
{
    return ctx->generation;
}

void tg_tls_ctx_free(tg_tls_ctx_t *ctx)
{
    if (!ctx)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

/* ------------------------------------------------------------------ */
/* The first bytes                                                     */

tg_tls_sniff_t tg_tls_sniff(const void *buf, size_t len)
{
    /* Methods a client may begin an HTTP/1 connection with (and the h2c
     * preface "PRI "). */
    static const char *const methods[] = {"GET ",   "POST ",    "PUT ",     "HEAD ",  "DELETE ",
                                          "PATCH ", "OPTIONS ", "CONNECT ", "TRACE ", "PRI "};
    const unsigned char *p = buf;
    bool prefix = false;

    if (len == 0)
        return TG_TLS_SNIFF_MORE;
    if (p[0] == 0x16) /* handshake record; the version bytes are checked by OpenSSL */
        return TG_TLS_SNIFF_TLS;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        size_t ml = strlen(methods[i]), n = len < ml ? len : ml;
        if (memcmp(p, methods[i], n) != 0)
            continue;
        if (n == ml)
            return TG_TLS_SNIFF_HTTP;
        prefix = true;
    }
    return prefix ? TG_TLS_SNIFF_MORE : TG_TLS_SNIFF_OTHER;
}

/* ------------------------------------------------------------------ */
/* Connections                                                         */

tg_tls_conn_t *tg_tls_conn_new(tg_tls_ctx_t *ctx, size_t cap)
{
    tg_tls_conn_t *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    c->cap = cap < TG_TLS_CAP_MIN ? TG_TLS_CAP_MIN : cap;
    c->ssl = SSL_new(ctx->ssl);
    c->in = BIO_new(BIO_s_mem());
    c->out = BIO_new(BIO_s_mem());
    if (!c->ssl || !c->in || !c->out) {
        SSL_free(c->ssl);
        BIO_free(c->in);
        BIO_free(c->out);
        free(c);
        ERR_clear_error();
        return NULL;
    }
    /* An empty memory BIO reads as "retry", not end of file. */
    BIO_set_mem_eof_return(c->in, -1);
    BIO_set_mem_eof_return(c->out, -1);
    SSL_set_bio(c->ssl, c->in, c->out);
    SSL_set_accept_state(c->ssl);
    return c;
}

void tg_tls_conn_free(tg_tls_conn_t *c)
{
    if (!c)
        return;
    SSL_free(c->ssl); /* frees both BIOs and its SSL_CTX reference */
    free(c);
}

static ssize_t fail(tg_tls_conn_t *c, const char *reason)
{
    snprintf(c->reason, sizeof c->reason, "%s", reason);
    return -EPROTO;
}

/* The result of an SSL call that returned <rc> <= 0, as tls.h says. */
static ssize_t ssl_result(tg_tls_conn_t *c, int rc)
{
    switch (SSL_get_error(c->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        return fail(c, ossl_reason("unexpected end of stream"));
    default:
        return fail(c, ossl_reason("protocol error"));
    }
}

/* Append to the input BIO, within the cap. */
static ssize_t take(tg_tls_conn_t *c, const void *buf, size_t len)
{
    size_t pend = (size_t)BIO_ctrl_pending(c->in), room = pend < c->cap ? c->cap - pend : 0;
    size_t n = len < room ? len : room;

    if (n == 0)
        return len == 0 ? 0 : -ENOBUFS;
    if (BIO_write(c->in, buf, (int)n) != (int)n)
        return -ENOMEM;
    return (ssize_t)n;
}

ssize_t tg_tls_conn_feed(tg_tls_conn_t *c, const void *buf, size_t len)
{
    size_t n;

    if (c->sniffed || len == 0)
        return c->plain_http || c->reason[0] ? -EPROTO : take(c, buf, len);
    /* Hold the first bytes until they say TLS or not. */
    n = TG_TLS_SNIFF_BYTES - c->nsniff;
    n = len < n ? len : n;
    memcpy(c->sniff + c->nsniff, buf, n);
    c->nsniff += n;
    switch (tg_tls_sniff(c->sniff, c->nsniff)) {
    case TG_TLS_SNIFF_TLS: {
        ssize_t r;
        c->sniffed = true;
        if ((r = take(c, c->sniff, c->nsniff)) < 0)
            return r;
        r = n < len ? take(c, (const char *)buf + n, len - n) : 0;
        return r < 0 ? (ssize_t)n : (ssize_t)n + r;
    }
    case TG_TLS_SNIFF_HTTP:
        c->sniffed = c->plain_http = true;
        return fail(c, "plain HTTP request sent to a TLS port");
    case TG_TLS_SNIFF_OTHER:
        c->sniffed = true;
        return fail(c, "not a TLS handshake");
    default:
        return (ssize_t)n;
    }
}

int tg_tls_conn_handshake(tg_tls_conn_t *c)
{
    int rc;
    ssize_t r;

    if (c->reason[0])
        return -EPROTO;
    if (SSL_is_init_finished(c->ssl))
        return 1;
    if (!c->sniffed)
        return 0;
    ERR_clear_error();
    rc = SSL_do_handshake(c->ssl);
    if (rc == 1)
        return 1;
    r = ssl_result(c, rc);
    return r == -EAGAIN ? 0 : r == 0 ? (int)fail(c, "closed during the handshake") : (int)r;
}

bool tg_tls_conn_established(const tg_tls_conn_t *c)
{
    return SSL_is_init_finished(c->ssl);
}

ssize_t tg_tls_conn_read(tg_tls_conn_t *c, void *buf, size_t cap)
{
    size_t got = 0;
    int rc;

    if (c->reason[0])
        return -EPROTO;
    if (!c->sniffed)
        return -EAGAIN;
    if (cap == 0)
        return -EINVAL;
    ERR_clear_error();
    rc = SSL_read_ex(c->ssl, buf, cap, &got);
    if (rc == 1)
        return (ssize_t)got;
    return ssl_result(c, 0);
}

ssize_t tg_tls_conn_write(tg_tls_conn_t *c, const void *buf, size_t len)
{
    size_t n = len < TG_TLS_RECORD_MAX ? len : TG_TLS_RECORD_MAX, done = 0;

    if (c->reason[0])
        return -EPROTO;
    if (c->shutting)
        return -EPIPE;
    if (!SSL_is_init_finished(c->ssl) || (size_t)BIO_ctrl_pending(c->out) >= c->cap)
        return -EAGAIN;
    if (len == 0)
        return 0;
    ERR_clear_error();
    if (SSL_write_ex(c->ssl, buf, n, &done) == 1)
        return (ssize_t)done;
    return ssl_result(c, 0);
}

size_t tg_tls_conn_pending(const tg_tls_conn_t *c)
{
    return (size_t)BIO_ctrl_pending(c->out);
}

size_t tg_tls_conn_pull(tg_tls_conn_t *c, void *buf, size_t cap)
{
    size_t pend = (size_t)BIO_ctrl_pending(c->out), n = cap < pend ? cap : pend;
    int got;

    if (n == 0)
        return 0;
    got = BIO_read(c->out, buf, (int)(n > 0x7fffffff ? 0x7fffffff : n));
    return got > 0 ? (size_t)got : 0;
}

int tg_tls_conn_shutdown(tg_tls_conn_t *c)
{
    int rc;

    if (c->reason[0] || !SSL_is_init_finished(c->ssl))
        return -EPROTO; /* nothing clean to say: just close */
    c->shutting = true;
    ERR_clear_error();
    rc = SSL_shutdown(c->ssl);
    if (rc == 1)
        return 1;
    if (rc == 0)
        return 0;
    /* Want-read after our close_notify: the peer's is still to come. */
    return ssl_result(c, rc) == -EAGAIN ? 0 : -EPROTO;
}

const char *tg_tls_conn_reason(const tg_tls_conn_t *c)
{
    return c->reason;
}

bool tg_tls_conn_plain_http(const tg_tls_conn_t *c)
{
    return c->plain_http;
}

const char *tg_tls_conn_version(const tg_tls_conn_t *c)
{
    return SSL_get_version(c->ssl);
}

const char *tg_tls_conn_alpn(const tg_tls_conn_t *c)
{
    const unsigned char *p = NULL;
    unsigned len = 0;

    /* Only "http/1.1" can be selected: return the constant, not a copy. */
    SSL_get0_alpn_selected(c->ssl, &p, &len);
    return p && len == 8 && memcmp(p, "http/1.1", 8) == 0 ? "http/1.1" : "";
}
