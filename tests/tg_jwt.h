/* JWT test helpers shared by tests/test_auth.c and tests/test_http_front.c:
 * base64url, the public JWK of a libcrypto key, and a compact JWS signed
 * with RS256 or ES256 (by the key's type). Header-only; failures fail the
 * test (criterion must be included first).
 */
#ifndef TG_TESTS_JWT_H
#define TG_TESTS_JWT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

static inline void tgj_b64url(const unsigned char *in, size_t len, char *out, size_t cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;

    for (size_t i = 0; i < len; i++) {
        acc = acc << 8 | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            cr_assert_lt(o + 1, cap);
            out[o++] = tab[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = tab[(acc << (6 - bits)) & 63];
    out[o] = '\0';
}

static inline void tgj_b64url_str(const char *s, char *out, size_t cap)
{
    tgj_b64url((const unsigned char *)s, strlen(s), out, cap);
}

static inline void tgj_bn_param(EVP_PKEY *k, const char *name, size_t pad, char *out, size_t cap)
{
    BIGNUM *bn = NULL;
    unsigned char buf[1024];
    int n;

    cr_assert_eq(EVP_PKEY_get_bn_param(k, name, &bn), 1, "%s", name);
    n = pad ? BN_bn2binpad(bn, buf, (int)pad) : BN_bn2bin(bn, buf);
    cr_assert_gt(n, 0);
    tgj_b64url(buf, (size_t)n, out, cap);
    BN_free(bn);
}

/* The public JWK of <k> with <kid> (NULL: none) and "alg" when <alg>. */
static inline void tgj_jwk(EVP_PKEY *k, const char *kid, bool alg, char *out, size_t cap)
{
    char a[1400], b[1400], kids[160] = "";

    if (kid)
        snprintf(kids, sizeof kids, "\"kid\":\"%s\",", kid);
    if (EVP_PKEY_is_a(k, "RSA")) {
        tgj_bn_param(k, OSSL_PKEY_PARAM_RSA_N, 0, a, sizeof a);
        tgj_bn_param(k, OSSL_PKEY_PARAM_RSA_E, 0, b, sizeof b);
        snprintf(out, cap, "{%s\"kty\":\"RSA\",%s\"n\":\"%s\",\"e\":\"%s\"}", kids,
                 alg ? "\"alg\":\"RS256\"," : "", a, b);
    } else {
        tgj_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, 32, a, sizeof a);
        tgj_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32, b, sizeof b);
        snprintf(out, cap, "{%s\"kty\":\"EC\",%s\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}", kids,
                 alg ? "\"alg\":\"ES256\"," : "", a, b);
    }
}

/* A compact JWS of <payload> with header <header>, signed by <k> (RS256
 * or ES256 by its type); <k> NULL: the signature is <raw_sig> as is. */
static inline char *tgj_jws(const char *header, const char *payload, EVP_PKEY *k,
                            const char *raw_sig)
{
    static char tok[8192];
    char h[1024], p[4096], s[1024];
    unsigned char sig[1024], raw[64];
    size_t slen = sizeof sig;

    tgj_b64url_str(header, h, sizeof h);
    tgj_b64url_str(payload, p, sizeof p);
    snprintf(tok, sizeof tok, "%s.%s", h, p);
    if (!k) {
        snprintf(tok + strlen(tok), sizeof tok - strlen(tok), ".%s", raw_sig);
        return tok;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    cr_assert_eq(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
    cr_assert_eq(EVP_DigestSign(md, sig, &slen, (unsigned char *)tok, strlen(tok)), 1);
    EVP_MD_CTX_free(md);
    if (EVP_PKEY_is_a(k, "EC")) {
        /* DER ECDSA-Sig-Value -> raw r||s, as JWS wants */
        const unsigned char *pp = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &pp, (long)slen);
        cr_assert_not_null(es);
        BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
        BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
        ECDSA_SIG_free(es);
        tgj_b64url(raw, 64, s, sizeof s);
    } else {
        tgj_b64url(sig, slen, s, sizeof s);
    }
    snprintf(tok + strlen(tok), sizeof tok - strlen(tok), ".%s", s);
    return tok;
}

#endif
