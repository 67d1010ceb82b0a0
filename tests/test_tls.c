/* router/tls: the TLS server endpoint on memory BIOs, against an OpenSSL
 * client on memory BIOs in the same process.
 *
 * Certificates are made at test time with libcrypto in a temp dir: a CA,
 * a server certificate it signs (for "localhost"), a second server
 * certificate (the reload), an expired one, and a key that matches none.
 * The client verifies the chain against the CA, so a handshake that
 * succeeds proves which certificate the server sent.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "router/tls/tls.h"
#include "tests/tg_harness.h"
#include "tests/tg_pki.h"

#define CAP (64 * 1024)

static char dir[TGH_PATH];
static char ca_pem[TGH_PATH + 32], srv_pem[TGH_PATH + 32], srv_key[TGH_PATH + 32];
static char srv2_pem[TGH_PATH + 32], srv2_key[TGH_PATH + 32];
static char old_pem[TGH_PATH + 32], old_key[TGH_PATH + 32], other_key[TGH_PATH + 32];
static char enc_key[TGH_PATH + 32];

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void setup(void)
{
    EVP_PKEY *ca_key, *other;
    X509 *ca;

    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    path_in(ca_pem, sizeof ca_pem, "ca.pem");
    path_in(srv_pem, sizeof srv_pem, "srv.pem");
    path_in(srv_key, sizeof srv_key, "srv.key");
    path_in(srv2_pem, sizeof srv2_pem, "srv2.pem");
    path_in(srv2_key, sizeof srv2_key, "srv2.key");
    path_in(old_pem, sizeof old_pem, "old.pem");
    path_in(old_key, sizeof old_key, "old.key");
    path_in(other_key, sizeof other_key, "other.key");
    path_in(enc_key, sizeof enc_key, "enc.key");
    ca_key = EVP_EC_gen("P-256");
    ca = tgp_make_cert(ca_key, "toolgate test CA", -3600, 86400, NULL, NULL);
    tgp_write_cert(ca_pem, ca, NULL);
    tgp_make_server(ca, ca_key, srv_pem, srv_key, -60, 86400);
    tgp_make_server(ca, ca_key, srv2_pem, srv2_key, -60, 86400);
    tgp_make_server(ca, ca_key, old_pem, old_key, -7200, -3600);
    other = EVP_EC_gen("P-256");
    tgp_write_key(other_key, other);
    /* a passphrase-protected key: refused, never prompted for */
    FILE *f = fopen(enc_key, "w");
    cr_assert_not_null(f);
    cr_assert_eq(PEM_write_PrivateKey(f, other, EVP_aes_256_cbc(), NULL, 0, NULL, (void *)"pw"), 1);
    fclose(f);
    EVP_PKEY_free(other);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
}

static void teardown(void)
{
    tgh_cleanup();
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the client ---- */

typedef struct client {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *in, *out;
} client_t;

/* A client trusting the test CA, checking "localhost", offering <alpn>
 * (NULL: none); <max_version> 0 for OpenSSL's default. */
static void client_open(client_t *cl, const char *alpn, int max_version)
{
    cl->ctx = SSL_CTX_new(TLS_client_method());
    cr_assert_not_null(cl->ctx);
    cr_assert_eq(SSL_CTX_load_verify_locations(cl->ctx, ca_pem, NULL), 1);
    SSL_CTX_set_verify(cl->ctx, SSL_VERIFY_PEER, NULL);
    if (max_version) {
        /* Let the client itself speak an old version: the server must refuse. */
        SSL_CTX_set_security_level(cl->ctx, 0);
        SSL_CTX_set_cipher_list(cl->ctx, "DEFAULT:@SECLEVEL=0");
        SSL_CTX_set_min_proto_version(cl->ctx, 0);
        SSL_CTX_set_max_proto_version(cl->ctx, max_version);
    }
    if (alpn)
        SSL_CTX_set_alpn_protos(cl->ctx, (const unsigned char *)alpn, (unsigned)strlen(alpn));
    cl->ssl = SSL_new(cl->ctx);
    cl->in = BIO_new(BIO_s_mem());
    cl->out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(cl->in, -1);
    BIO_set_mem_eof_return(cl->out, -1);
    SSL_set_bio(cl->ssl, cl->in, cl->out);
    SSL_set_tlsext_host_name(cl->ssl, "localhost");
    SSL_set1_host(cl->ssl, "localhost");
    SSL_set_connect_state(cl->ssl);
}

static void client_close(client_t *cl)
{
    SSL_free(cl->ssl);
    SSL_CTX_free(cl->ctx);
}

/* Move bytes both ways once, client to server <step> bytes per feed.
 * Returns the bytes moved, or -EPROTO when the server refused. */
static long pump(client_t *cl, tg_tls_conn_t *s, size_t step)
{
    unsigned char buf[4096];
    long moved = 0;
    int n;

    while ((n = BIO_read(cl->out, buf, (int)sizeof buf)) > 0) {
        for (int off = 0; off < n;) {
            size_t len = (size_t)n - (size_t)off < step ? (size_t)n - (size_t)off : step;
            ssize_t took = tg_tls_conn_feed(s, buf + off, len);
            if (took < 0)
                return took;
            off += (int)took;
            moved += took;
            tg_tls_conn_handshake(s);
        }
    }
    if (tg_tls_conn_handshake(s) < 0)
        return -EPROTO;
    size_t got;
    while ((got = tg_tls_conn_pull(s, buf, sizeof buf)) > 0) {
        BIO_write(cl->in, buf, (int)got);
        moved += (long)got;
    }
    return moved;
}

/* Run the handshake to its end: 1 established, or the server's -EPROTO. */
static int handshake(client_t *cl, tg_tls_conn_t *s, size_t step)
{
    for (int i = 0; i < 10000; i++) {
        int rc = SSL_do_handshake(cl->ssl);
        long moved = pump(cl, s, step);
        if (moved < 0)
            return (int)moved;
        if (rc == 1 && tg_tls_conn_established(s))
            return 1;
        if (rc <= 0 && SSL_get_error(cl->ssl, rc) != SSL_ERROR_WANT_READ && moved == 0)
            return -EIO;
    }
    return -ETIMEDOUT;
}

/* Read plaintext from the server until <want> bytes came or nothing moves. */
static size_t server_read_all(client_t *cl, tg_tls_conn_t *s, char *buf, size_t want, size_t step)
{
    size_t have = 0;

    for (int i = 0; i < 100000 && have < want; i++) {
        ssize_t n = tg_tls_conn_read(s, buf + have, want - have);
        if (n > 0) {
            have += (size_t)n;
            continue;
        }
        cr_assert_eq(n, -EAGAIN, "read: %zd (%s)", n, tg_tls_conn_reason(s));
        if (pump(cl, s, step) <= 0)
            break;
    }
    return have;
}

static tg_tls_ctx_t *ctx_ok(const char *cert, const char *key)
{
    tg_tls_ctx_t *ctx = NULL;
    tg_err_t err = {{0}};
    char warn[TG_TLS_WARN_MAX];

    cr_assert_eq(tg_tls_ctx_new(&ctx, cert, key, warn, sizeof warn, &err), 0, "%s", err.msg);
    return ctx;
}

/* The subject CN of the certificate the client got. */
static void peer_cn(client_t *cl, char *out, size_t cap)
{
    X509 *x = SSL_get1_peer_certificate(cl->ssl);
    cr_assert_not_null(x);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, out, (int)cap);
    X509_free(x);
}

static long peer_serial(client_t *cl)
{
    X509 *x = SSL_get1_peer_certificate(cl->ssl);
    long s;
    cr_assert_not_null(x);
    s = ASN1_INTEGER_get(X509_get0_serialNumber(x));
    X509_free(x);
    return s;
}

/* ---- tests ---- */

static void exchange(size_t step)
{
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, CAP);
    client_t cl;
    char big[40000], got[40000], cn[64];
    size_t off = 0;

    client_open(&cl, "\x02h2\x08http/1.1", 0);
    cr_assert_eq(handshake(&cl, s, step), 1, "%s", tg_tls_conn_reason(s));
    cr_expect_eq(SSL_get_verify_result(cl.ssl), X509_V_OK);
    peer_cn(&cl, cn, sizeof cn);
    cr_expect_str_eq(cn, "localhost");
    cr_expect_str_eq(tg_tls_conn_alpn(s), "http/1.1");
    cr_expect(strncmp(tg_tls_conn_version(s), "TLSv1.", 6) == 0);

    /* client -> server, more than one record */
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    cr_assert_eq(SSL_write(cl.ssl, big, (int)sizeof big), (int)sizeof big);
    cr_assert_eq(server_read_all(&cl, s, got, sizeof got, step), sizeof got);
    cr_expect_eq(memcmp(got, big, sizeof big), 0);

    /* server -> client, in record-sized writes */
    while (off < sizeof big) {
        ssize_t n = tg_tls_conn_write(s, big + off, sizeof big - off);
        cr_assert_gt(n, 0, "write: %zd", n);
        cr_assert_leq((size_t)n, TG_TLS_RECORD_MAX);
        off += (size_t)n;
        pump(&cl, s, step);
    }
    memset(got, 0, sizeof got);
    off = 0;
    while (off < sizeof got) {
        int n = SSL_read(cl.ssl, got + off, (int)(sizeof got - off));
        cr_assert_gt(n, 0);
        off += (size_t)n;
    }
    cr_expect_eq(memcmp(got, big, sizeof big), 0);

    /* clean shutdown both ways */
    cr_expect_eq(tg_tls_conn_shutdown(s), 0);
    cr_expect_eq(tg_tls_conn_write(s, "x", 1), -EPIPE);
    pump(&cl, s, step);
    cr_expect_eq(SSL_read(cl.ssl, got, 1), 0);
    cr_expect_eq(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
    SSL_shutdown(cl.ssl);
    pump(&cl, s, step);
    cr_expect_eq(tg_tls_conn_read(s, got, sizeof got), 0, "the peer's close_notify reads as 0");
    cr_expect_eq(tg_tls_conn_shutdown(s), 1);

    client_close(&cl);
    tg_tls_conn_free(s);
    tg_tls_ctx_free(ctx);
}

Test(tls, data_both_ways_and_close_notify)
{
    exchange(1 << 20);
}

Test(tls, byte_at_a_time)
{
    exchange(1);
}

Test(tls, tls_1_1_client_refused)
{
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, CAP);
    client_t cl;

    client_open(&cl, NULL, TLS1_1_VERSION);
    cr_expect_eq(handshake(&cl, s, 4096), -EPROTO);
    cr_expect_str_eq(tg_tls_conn_reason(s), "unsupported protocol");
    /* the alert is pending for the front to send before closing */
    cr_expect_gt(tg_tls_conn_pending(s), 0);
    cr_expect_not(tg_tls_conn_established(s));
    cr_expect_eq(tg_tls_conn_read(s, (char[8]){0}, 8), -EPROTO);
    cr_expect_eq(tg_tls_conn_write(s, "x", 1), -EPROTO);
    client_close(&cl);
    tg_tls_conn_free(s);
    tg_tls_ctx_free(ctx);
}

Test(tls, client_without_http11_alpn_refused)
{
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, CAP);
    client_t cl;

    client_open(&cl, "\x02h2", 0);
    cr_expect_eq(handshake(&cl, s, 4096), -EPROTO);
    cr_expect_neq(tg_tls_conn_reason(s)[0], '\0');
    client_close(&cl);
    tg_tls_conn_free(s);

    /* no ALPN at all is fine (curl --http1.0, old clients) */
    s = tg_tls_conn_new(ctx, CAP);
    client_open(&cl, NULL, 0);
    cr_expect_eq(handshake(&cl, s, 4096), 1);
    cr_expect_str_eq(tg_tls_conn_alpn(s), "");
    client_close(&cl);
    tg_tls_conn_free(s);
    tg_tls_ctx_free(ctx);
}

Test(tls, sniff_first_bytes)
{
    cr_expect_eq(tg_tls_sniff("", 0), TG_TLS_SNIFF_MORE);
    cr_expect_eq(tg_tls_sniff("\x16\x03\x01", 3), TG_TLS_SNIFF_TLS);
    cr_expect_eq(tg_tls_sniff("G", 1), TG_TLS_SNIFF_MORE);
    cr_expect_eq(tg_tls_sniff("GET", 3), TG_TLS_SNIFF_MORE);
    cr_expect_eq(tg_tls_sniff("GET /mcp HTTP/1.1", 17), TG_TLS_SNIFF_HTTP);
    cr_expect_eq(tg_tls_sniff("POST ", 5), TG_TLS_SNIFF_HTTP);
    cr_expect_eq(tg_tls_sniff("PO", 2), TG_TLS_SNIFF_MORE);
    cr_expect_eq(tg_tls_sniff("OPTIONS * HTTP/1.1", 18), TG_TLS_SNIFF_HTTP);
    cr_expect_eq(tg_tls_sniff("PRI * HTTP/2.0", 14), TG_TLS_SNIFF_HTTP);
    cr_expect_eq(tg_tls_sniff("GETX", 4), TG_TLS_SNIFF_OTHER);
    cr_expect_eq(tg_tls_sniff("SSH-2.0", 7), TG_TLS_SNIFF_OTHER);
    cr_expect_eq(tg_tls_sniff("\x80\x01", 2), TG_TLS_SNIFF_OTHER);
}

/* A plain request byte by byte: undecided until "POST " is complete. */
Test(tls, plain_http_on_a_tls_port)
{
    static const char req[] = "POST /mcp HTTP/1.1\r\nHost: x\r\n\r\n";
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, CAP);
    char body[64];
    const char *reply = TG_TLS_PLAIN_HTTP_REPLY, *blank;

    for (size_t i = 0; i < 4; i++)
        cr_expect_eq(tg_tls_conn_feed(s, req + i, 1), 1);
    cr_expect_not(tg_tls_conn_plain_http(s));
    cr_expect_eq(tg_tls_conn_feed(s, req + 4, 1), -EPROTO);
    cr_expect(tg_tls_conn_plain_http(s));
    cr_expect_str_eq(tg_tls_conn_reason(s), "plain HTTP request sent to a TLS port");
    cr_expect_eq(tg_tls_conn_feed(s, req + 5, 1), -EPROTO);
    cr_expect_eq(tg_tls_conn_handshake(s), -EPROTO);
    cr_expect_eq(tg_tls_conn_pending(s), 0, "nothing encrypted goes back");
    tg_tls_conn_free(s);

    /* garbage is not called HTTP */
    s = tg_tls_conn_new(ctx, CAP);
    cr_expect_eq(tg_tls_conn_feed(s, "SSH-2.0-x\r\n", 11), -EPROTO);
    cr_expect_not(tg_tls_conn_plain_http(s));
    cr_expect_str_eq(tg_tls_conn_reason(s), "not a TLS handshake");
    tg_tls_conn_free(s);
    tg_tls_ctx_free(ctx);

    /* the cleartext reply's Content-Length is its body's */
    blank = strstr(reply, "\r\n\r\n");
    cr_assert_not_null(blank);
    snprintf(body, sizeof body, "Content-Length: %zu\r\n", strlen(blank + 4));
    cr_expect_not_null(strstr(reply, body), "%s", reply);
    cr_expect(strncmp(reply, "HTTP/1.1 400 ", 13) == 0);
}

/* Feed stops at the cap; write stops while the output is at the cap. */
Test(tls, bounded_buffers)
{
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, 0);
    static char junk[TG_TLS_CAP_MIN + 100];
    client_t cl;
    ssize_t n;
    size_t total = 0;

    client_open(&cl, NULL, 0);
    cr_assert_eq(handshake(&cl, s, 4096), 1);
    /* ciphertext in: the client's records pile up without being read */
    memset(junk, 'j', sizeof junk);
    for (int i = 0; i < 4; i++)
        cr_assert_gt(SSL_write(cl.ssl, junk, (int)sizeof junk), 0);
    unsigned char buf[8192];
    int got;
    bool refused = false;
    while ((got = BIO_read(cl.out, buf, sizeof buf)) > 0) {
        for (int off = 0; off < got;) {
            n = tg_tls_conn_feed(s, buf + off, (size_t)(got - off));
            if (n == -ENOBUFS) {
                refused = true;
                /* reading plaintext makes room again */
                char pt[TG_TLS_RECORD_MAX];
                cr_assert_gt(tg_tls_conn_read(s, pt, sizeof pt), 0);
                continue;
            }
            cr_assert_gt(n, 0);
            off += (int)n;
            total += (size_t)n;
        }
    }
    cr_expect(refused, "fed %zu bytes past a %u byte cap", total, TG_TLS_CAP_MIN);

    /* plaintext out: refused at the cap until pulled */
    size_t written = 0;
    while ((n = tg_tls_conn_write(s, junk, sizeof junk)) > 0)
        written += (size_t)n;
    cr_expect_eq(n, -EAGAIN);
    cr_expect_geq(tg_tls_conn_pending(s), TG_TLS_CAP_MIN);
    cr_expect_leq(tg_tls_conn_pending(s), TG_TLS_CAP_MIN + TG_TLS_RECORD_MAX + 1024);
    while (tg_tls_conn_pull(s, buf, sizeof buf) > 0)
        ;
    cr_expect_gt(tg_tls_conn_write(s, junk, sizeof junk), 0);
    client_close(&cl);
    tg_tls_conn_free(s);
    tg_tls_ctx_free(ctx);
}

static void expect_err(const char *cert, const char *key, const char *want)
{
    tg_tls_ctx_t *ctx = NULL;
    tg_err_t err = {{0}};

    cr_expect_eq(tg_tls_ctx_new(&ctx, cert, key, NULL, 0, &err), -1);
    cr_expect_null(ctx);
    cr_expect_not_null(strstr(err.msg, want), "%s\nwant: %s", err.msg, want);
}

Test(tls, load_errors_name_the_file)
{
    char missing[TGH_PATH + 32], msg[4 * TGH_PATH];

    path_in(missing, sizeof missing, "nope.pem");
    snprintf(msg, sizeof msg, "tls cert %s: No such file", missing);
    expect_err(missing, srv_key, msg);
    snprintf(msg, sizeof msg, "tls key %s: No such file", missing);
    expect_err(srv_pem, missing, msg);
    snprintf(msg, sizeof msg, "tls cert %s: not a PEM certificate chain", srv_key);
    expect_err(srv_key, srv_key, msg);
    snprintf(msg, sizeof msg, "tls key %s: not an unencrypted PEM private key", srv_pem);
    expect_err(srv_pem, srv_pem, msg);
    snprintf(msg, sizeof msg, "tls key %s: not an unencrypted PEM private key", enc_key);
    expect_err(srv_pem, enc_key, msg);
    snprintf(msg, sizeof msg, "tls key %s: does not match the certificate in %s", other_key,
             srv_pem);
    expect_err(srv_pem, other_key, msg);
}

Test(tls, expired_cert_is_reported)
{
    tg_tls_ctx_t *ctx = NULL;
    tg_err_t err = {{0}};
    char warn[TG_TLS_WARN_MAX] = "x", want[2 * TGH_PATH];

    cr_assert_eq(tg_tls_ctx_new(&ctx, old_pem, old_key, warn, sizeof warn, &err), 0, "%s", err.msg);
    snprintf(want, sizeof want, "tls cert %s: the certificate is expired on", old_pem);
    cr_expect_not_null(strstr(warn, want), "%s", warn);
    cr_expect_eq(tg_tls_cert_check_time(old_pem, warn, sizeof warn, &err), 0);
    cr_expect_eq(tg_tls_cert_check_time(srv_pem, warn, sizeof warn, &err), 1);
    cr_expect_str_eq(warn, "");
    cr_expect_eq(tg_tls_cert_check_time(srv_key, warn, sizeof warn, &err), -1);
    cr_expect_not_null(strstr(err.msg, "no PEM certificate"), "%s", err.msg);

    /* a client checking dates refuses it */
    tg_tls_conn_t *s = tg_tls_conn_new(ctx, CAP);
    client_t cl;
    client_open(&cl, NULL, 0);
    cr_expect_lt(handshake(&cl, s, 4096), 1);
    cr_expect_eq(SSL_get_verify_result(cl.ssl), X509_V_ERR_CERT_HAS_EXPIRED);
    client_close(&cl);
    tg_tls_conn_free(s);

    /* a good one says nothing */
    tg_tls_ctx_free(ctx);
    ctx = ctx_ok(srv_pem, srv_key);
    cr_expect_eq(tg_tls_ctx_reload(ctx, srv_pem, srv_key, warn, sizeof warn, &err), 0);
    cr_expect_str_eq(warn, "");
    tg_tls_ctx_free(ctx);
}

Test(tls, reload_keeps_old_on_failure_and_serves_new_to_new_conns)
{
    tg_tls_ctx_t *ctx = ctx_ok(srv_pem, srv_key);
    tg_tls_conn_t *early = tg_tls_conn_new(ctx, CAP), *late;
    tg_err_t err = {{0}};
    client_t c1, c2, c3;
    long first, second;
    char buf[8];

    client_open(&c1, NULL, 0);
    cr_assert_eq(handshake(&c1, early, 4096), 1);
    first = peer_serial(&c1);

    /* bad files: refused, the old certificate still served */
    cr_expect_eq(tg_tls_ctx_reload(ctx, srv2_pem, other_key, NULL, 0, &err), -1);
    cr_expect_not_null(strstr(err.msg, "does not match"), "%s", err.msg);
    cr_expect_eq(tg_tls_ctx_generation(ctx), 1);
    late = tg_tls_conn_new(ctx, CAP);
    client_open(&c2, NULL, 0);
    cr_assert_eq(handshake(&c2, late, 4096), 1);
    cr_expect_eq(peer_serial(&c2), first);
    client_close(&c2);
    tg_tls_conn_free(late);

    /* good files: new connections get the new certificate */
    cr_assert_eq(tg_tls_ctx_reload(ctx, srv2_pem, srv2_key, NULL, 0, &err), 0, "%s", err.msg);
    cr_expect_eq(tg_tls_ctx_generation(ctx), 2);
    late = tg_tls_conn_new(ctx, CAP);
    client_open(&c3, NULL, 0);
    cr_assert_eq(handshake(&c3, late, 4096), 1);
    second = peer_serial(&c3);
    cr_expect_neq(second, first);

    /* ... and the connection made before still works, after the old
     * context is gone from the listener */
    tg_tls_ctx_free(ctx);
    cr_assert_eq(SSL_write(c1.ssl, "ping", 4), 4);
    cr_expect_eq(server_read_all(&c1, early, buf, 4, 4096), 4);
    cr_expect_eq(memcmp(buf, "ping", 4), 0);

    client_close(&c1);
    client_close(&c3);
    tg_tls_conn_free(early);
    tg_tls_conn_free(late);
}
