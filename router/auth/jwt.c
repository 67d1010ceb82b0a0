/* JWKS files and JWT verification (RS256, ES256) with OpenSSL's libcrypto:
 * see auth.h.
 *
 * Order of checks: shape and sizes, header (alg, crit), key, signature,
 * and only then the payload's claims: nothing a token says about itself
 * is believed before its signature is. Every reason is a constant.
 */
#include "router/auth/auth.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#define KID_MAX    128 /* fixed internal bound: a key id's bytes */
#define P256_COORD 32

typedef struct jwk {
    char kid[KID_MAX]; /* "" when the key has none */
    bool rsa;          /* else EC P-256 */
    EVP_PKEY *pkey;
} jwk_t;

/* Owned by tg_auth_t (or the caller of tg_jwks_load). */
struct tg_jwks {
    jwk_t keys[TG_JWKS_KEYS_MAX];
    size_t n;
};

/* ------------------------------------------------------------------ */
/* base64url                                                           */

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '-' ? 62 : ch == '_' ? 63 : -1;
}

/* Decode unpadded base64url <len> bytes at <s> into <out> (capacity
 * <cap>): the decoded length, or -1 (bad character, bad length, too big). */
static long b64url_decode(const char *s, size_t len, unsigned char *out, size_t cap)
{
    uint32_t acc = 0;
    size_t o = 0;
    int bits = 0;

    if (len % 4 == 1)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return (long)o;
}

/* ------------------------------------------------------------------ */
/* JWKS                                                                */

static BIGNUM *b64_bn(const char *s, size_t maxbytes)
{
    unsigned char buf[1024];
    long n =
        s ? b64url_decode(s, strlen(s), buf, maxbytes < sizeof buf ? maxbytes : sizeof buf) : -1;

    return n > 0 ? BN_bin2bn(buf, (int)n, NULL) : NULL;
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    OSSL_PARAM *params = bld ? OSSL_PARAM_BLD_to_param(bld) : NULL;
    EVP_PKEY_CTX *pc = params ? EVP_PKEY_CTX_new_from_name(NULL, type, NULL) : NULL;
    EVP_PKEY *pkey = NULL;

    if (!pc || EVP_PKEY_fromdata_init(pc) != 1 ||
        EVP_PKEY_fromdata(pc, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(pc);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *rsa_key(const json_t *o)
{
    BIGNUM *n = b64_bn(json_string_value(json_object_get(o, "n")), 1024);
    BIGNUM *e = b64_bn(json_string_value(json_object_get(o, "e")), 8);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;

    if (n && e && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) == 1 &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) == 1)
        pkey = from_params("RSA", bld);
    if (pkey && EVP_PKEY_get_bits(pkey) < 2048) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    return pkey;
}

static EVP_PKEY *ec_key(const json_t *o)
{
    const char *x = json_string_value(json_object_get(o, "x"));
    const char *y = json_string_value(json_object_get(o, "y"));
    unsigned char pt[1 + 2 * P256_COORD] = {0x04}; /* uncompressed point */
    OSSL_PARAM_BLD *bld;
    EVP_PKEY *pkey = NULL;

    if (!x || !y || b64url_decode(x, strlen(x), pt + 1, P256_COORD) != P256_COORD ||
        b64url_decode(y, strlen(y), pt + 1 + P256_COORD, P256_COORD) != P256_COORD)
        return NULL;
    bld = OSSL_PARAM_BLD_new();
    if (bld &&
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt) == 1)
        pkey = from_params("EC", bld); /* fromdata checks the point is on the curve */
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

void tg_jwks_free(tg_jwks_t *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++)
        EVP_PKEY_free(k->keys[i].pkey);
    free(k);
}

size_t tg_jwks_count(const tg_jwks_t *k)
{
    return k ? k->n : 0;
}

int tg_jwks_parse(tg_jwks_t **out, const char *name, const char *text, size_t len, tg_err_t *err)
{
    char why[256];
    json_t *doc, *arr;
    tg_jwks_t *k;

    if (tg_config_jwks_check(text, len, why, sizeof why) < 0)
        return tg_err_set(err, -1, "jwks: %s: %s", name, why);
    if (!(k = calloc(1, sizeof *k)))
        return tg_err_set(err, -1, "jwks: %s: out of memory", name);
    doc = json_loadb(text, len, 0, NULL);
    arr = json_object_get(doc, "keys");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *o = json_array_get(arr, i);
        const char *kid = json_string_value(json_object_get(o, "kid"));
        jwk_t *key = &k->keys[k->n];
        key->rsa = strcmp(json_string_value(json_object_get(o, "kty")), "RSA") == 0;
        key->pkey = key->rsa ? rsa_key(o) : ec_key(o);
        ERR_clear_error();
        if (!key->pkey) {
            bool rsa = key->rsa; /* <key> lives in <k>, freed first */
            json_decref(doc);
            tg_jwks_free(k);
            return tg_err_set(err, -1, "jwks: %s: keys[%zu]: not a usable %s public key%s", name, i,
                              rsa ? "RSA" : "EC P-256",
                              rsa ? " (at least 2048 bits)" : " (a point on the curve)");
        }
        if (kid && strlen(kid) >= KID_MAX) {
            EVP_PKEY_free(key->pkey);
            json_decref(doc);
            tg_jwks_free(k);
            return tg_err_set(err, -1, "jwks: %s: keys[%zu]: \"kid\" is longer than %d bytes", name,
                              i, KID_MAX - 1);
        }
        snprintf(key->kid, sizeof key->kid, "%s", kid ? kid : "");
        k->n++;
    }
    json_decref(doc);
    *out = k;
    return 0;
}

int tg_jwks_load(tg_jwks_t **out, const char *path, tg_err_t *err)
{
    char why[512], *text;
    size_t len;
    int rc;

    if (tg_config_jwks_read(path, &text, &len, why, sizeof why) < 0)
        return tg_err_set(err, -1, "jwks: %s", why);
    rc = tg_jwks_parse(out, path, text, len, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ */
/* JWT                                                                 */

bool tg_jwt_shaped(const char *tok, size_t len)
{
    const char *d1 = memchr(tok, '.', len), *d2;

    if (!d1 || d1 == tok)
        return false;
    d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok));
    /* The signature may be empty: "alg": "none" is then refused by name. */
    return d2 && d2 > d1 + 1 && !memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok));
}

/* Decode base64url part <s>/<len> and parse it as a JSON object (at most
 * <cap> decoded bytes). NULL when any of that fails. */
static json_t *part_json(const char *s, size_t len, size_t cap)
{
    unsigned char *buf = malloc(cap);
    long n = buf ? b64url_decode(s, len, buf, cap) : -1;
    json_t *j =
        n > 0 ? json_loadb((const char *)buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL) : NULL;

    free(buf);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

json_t *tg_jwt_peek(const char *tok, size_t len)
{
    const char *d1, *d2;

    if (len > TG_AUTH_TOKEN_MAX || !tg_jwt_shaped(tok, len))
        return NULL;
    d1 = memchr(tok, '.', len);
    d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok));
    return part_json(d1 + 1, (size_t)(d2 - d1 - 1), TG_JWT_PAYLOAD_MAX);
}

/* ES256's raw r||s (64 bytes) as the DER ECDSA-Sig-Value EVP expects.
 * The DER length into *dlen; NULL on a bad signature. */
static unsigned char *es256_der(const unsigned char *raw, size_t len, size_t *dlen)
{
    ECDSA_SIG *sig;
    BIGNUM *r, *s;
    unsigned char *der = NULL;
    int n;

    if (len != 2 * P256_COORD)
        return NULL;
    r = BN_bin2bn(raw, P256_COORD, NULL);
    s = BN_bin2bn(raw + P256_COORD, P256_COORD, NULL);
    sig = ECDSA_SIG_new();
    if (!r || !s || !sig || ECDSA_SIG_set0(sig, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return NULL;
    }
    n = i2d_ECDSA_SIG(sig, &der);
    ECDSA_SIG_free(sig);
    if (n <= 0)
        return NULL;
    *dlen = (size_t)n;
    return der;
}

/* Whether <sig> (<slen> bytes, as the JWS carries it) signs <msg>/<mlen>
 * with <key>. */
static bool sig_ok(const jwk_t *key, const unsigned char *sig, size_t slen, const char *msg,
                   size_t mlen)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *der = NULL;
    size_t dlen = slen;
    bool ok = false;

    if (!key->rsa && !(der = es256_der(sig, slen, &dlen))) {
        EVP_MD_CTX_free(md);
        return false;
    }
    if (md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key->pkey) == 1)
        ok = EVP_DigestVerify(md, der ? der : sig, dlen, (const unsigned char *)msg, mlen) == 1;
    OPENSSL_free(der);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}

/* The header's alg, checked: RS256 -> rsa, ES256 -> EC. NULL with why. */
static const char *check_header(const json_t *h, bool *rsa, const char **why)
{
    const char *alg = json_string_value(json_object_get(h, "alg"));

    if (!alg)
        return *why = "malformed header", NULL;
    if (strcmp(alg, "none") == 0)
        return *why = "alg none refused", NULL;
    if (strncmp(alg, "HS", 2) == 0)
        return *why = "HMAC algorithms refused", NULL;
    if (strcmp(alg, "RS256") != 0 && strcmp(alg, "ES256") != 0)
        return *why = "unsupported alg", NULL;
    if (json_object_get(h, "crit"))
        return *why = "unsupported crit header", NULL;
    *rsa = alg[0] == 'R';
    return alg;
}

/* The signature over <tok> up to its second dot, by the header's key:
 * 0 or -1 with why. */
static int check_signature(const tg_jwks_t *keys, const json_t *h, const char *tok,
                           size_t signed_len, const char *sig64, size_t sig64_len, const char **why)
{
    const char *kid = json_string_value(json_object_get(h, "kid"));
    unsigned char sig[1024];
    long slen = b64url_decode(sig64, sig64_len, sig, sizeof sig);
    bool rsa = false, any = false;

    if (!check_header(h, &rsa, why))
        return -1;
    if (json_object_get(h, "kid") && !kid)
        return *why = "malformed header", -1;
    if (slen <= 0)
        return *why = "bad signature", -1;
    for (size_t i = 0; keys && i < keys->n; i++) {
        const jwk_t *k = &keys->keys[i];
        if (kid && strcmp(k->kid, kid) != 0)
            continue;
        if (k->rsa != rsa) {
            if (kid)
                return *why = "alg does not match the key", -1;
            continue;
        }
        any = true;
        if (sig_ok(k, sig, (size_t)slen, tok, signed_len))
            return 0;
    }
    *why = !any ? (kid ? "unknown kid" : "no key for alg") : "bad signature";
    return -1;
}

/* A NumericDate member <m> of <p>: 1 present (in *out), 0 absent, -1 not
 * a number. */
static int numeric_date(const json_t *p, const char *m, double *out)
{
    const json_t *v = json_object_get(p, m);

    if (!v)
        return 0;
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 1;
}

static bool aud_holds(const json_t *aud, const char *want)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    for (size_t i = 0; i < json_array_size(aud); i++) {
        const char *e = json_string_value(json_array_get(aud, i));
        if (e && strcmp(e, want) == 0)
            return true;
    }
    return false;
}

/* The payload's claims against <want> at <now_s>: 0 or -1 with why. */
static int check_claims(const json_t *p, const tg_jwt_want_t *want, int64_t now_s, const char **why)
{
    const char *iss = json_string_value(json_object_get(p, "iss"));
    double leeway = (double)want->leeway_ms / 1000.0, now = (double)now_s, t = 0;
    int r;

    if (!iss || strcmp(iss, want->issuer) != 0)
        return *why = "wrong issuer", -1;
    if (!aud_holds(json_object_get(p, "aud"), want->audience))
        return *why = "wrong audience", -1;
    if ((r = numeric_date(p, "exp", &t)) <= 0)
        return *why = r == 0 ? "no exp" : "malformed exp", -1;
    if (now > t + leeway)
        return *why = "expired", -1;
    if ((r = numeric_date(p, "nbf", &t)) < 0)
        return *why = "malformed nbf", -1;
    if (r == 1 && now + leeway < t)
        return *why = "not yet valid", -1;
    if ((r = numeric_date(p, "iat", &t)) < 0)
        return *why = "malformed iat", -1;
    if (r == 1 && now + leeway < t)
        return *why = "issued in the future", -1;
    return 0;
}

int tg_jwt_verify(const tg_jwks_t *keys, const tg_jwt_want_t *want, const char *tok, size_t len,
                  int64_t now_s, char *claim_out, size_t cap, const char **why)
{
    const char *d1, *d2, *claim;
    json_t *h = NULL, *p = NULL;
    int rc = -1;

    *why = "malformed token";
    if (len > TG_AUTH_TOKEN_MAX)
        return *why = "token too long", -1;
    if (!tg_jwt_shaped(tok, len))
        return -1;
    d1 = memchr(tok, '.', len);
    d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok));
    if (!(h = part_json(tok, (size_t)(d1 - tok), TG_JWT_HEADER_MAX)))
        return *why = "malformed header", -1;
    if (check_signature(keys, h, tok, (size_t)(d2 - tok), d2 + 1, len - (size_t)(d2 + 1 - tok),
                        why) < 0)
        goto out;
    if (!(p = part_json(d1 + 1, (size_t)(d2 - d1 - 1), TG_JWT_PAYLOAD_MAX))) {
        *why = "malformed payload";
        goto out;
    }
    if (check_claims(p, want, now_s, why) < 0)
        goto out;
    claim = json_string_value(json_object_get(p, want->claim));
    if (!claim || strlen(claim) >= cap) {
        *why = "no caller claim";
        goto out;
    }
    memcpy(claim_out, claim, strlen(claim) + 1);
    *why = "";
    rc = 0;
out:
    json_decref(h);
    json_decref(p);
    return rc;
}
