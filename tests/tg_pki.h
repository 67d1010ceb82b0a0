/* Test certificates made at test time with libcrypto, shared by
 * tests/test_tls.c and tests/test_http_front.c: keys and certificates
 * written as PEM, a CA, and server certificates for "localhost" it signs
 * with a chosen validity. Header-only; failures fail the test (criterion
 * must be included first).
 */
#ifndef TG_TESTS_PKI_H
#define TG_TESTS_PKI_H

#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline void tgp_write_key(const char *path, EVP_PKEY *k)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
}

static inline void tgp_write_cert(const char *path, X509 *x, X509 *chain)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(PEM_write_X509(f, x), 1);
    if (chain)
        cr_assert_eq(PEM_write_X509(f, chain), 1);
    fclose(f);
}

/* A certificate for <cn> with key <k>, valid from now+<from_s> to
 * now+<to_s>, signed by <ca>/<ca_key> (self-signed when NULL). */
static inline X509 *tgp_make_cert(EVP_PKEY *k, const char *cn, long from_s, long to_s, X509 *ca,
                                  EVP_PKEY *ca_key)
{
    static long serial = 1;
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    X509V3_CTX v3;
    X509_EXTENSION *ext;

    cr_assert_not_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, k);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_subject_name(x, name);
    X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name);
    X509V3_set_ctx(&v3, ca ? ca : x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, ca ? NID_subject_alt_name : NID_basic_constraints,
                              ca ? "DNS:localhost" : "critical,CA:TRUE");
    cr_assert_not_null(ext);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    cr_assert_gt(X509_sign(x, ca_key ? ca_key : k, EVP_sha256()), 0);
    X509_NAME_free(name);
    return x;
}

/* A server key and certificate signed by the CA, written as <cert>/<key>. */
static inline void tgp_make_server(X509 *ca, EVP_PKEY *ca_key, const char *cert, const char *key,
                                   long from_s, long to_s)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = tgp_make_cert(k, "localhost", from_s, to_s, ca, ca_key);

    tgp_write_key(key, k);
    tgp_write_cert(cert, x, ca);
    X509_free(x);
    EVP_PKEY_free(k);
}

#endif
