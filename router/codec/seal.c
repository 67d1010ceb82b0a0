/* Sealed requestState tokens (ChaCha20-Poly1305): see seal.h. */
#include "router/codec/seal.h"
#include "router/codec/b64url.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

_Static_assert(sizeof TG_SEAL_PREFIX - 1 == TG_SEAL_PREFIX_LEN, "prefix length");
_Static_assert(TG_SEAL_TOKEN_MAX == 396, "the token bound the header's comment states");

/* ---- AEAD ---- */

/* Run ChaCha20-Poly1305 over <in> (<n> bytes) into <out> (<n> bytes), the
 * associated data being the token prefix then <ad>. Sealing writes <tag>;
 * opening checks it (EVP compares in constant time). 0, TG_SEAL_INVALID
 * (opening: the tag did not verify), or -EIO (OpenSSL could not run). */
static int aead(bool enc, const uint8_t key[TG_SEAL_KEY_LEN],
                const uint8_t nonce[TG_SEAL_NONCE_LEN], const void *ad, size_t ad_len,
                const uint8_t *in, size_t n, uint8_t *out, uint8_t tag[TG_SEAL_TAG_LEN])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int outl = 0, rc = -EIO;
    if (ctx == NULL)
        return -EIO;
    /* The nonce length is the cipher's default (12): no IVLEN call needed. */
    if (EVP_CipherInit_ex(ctx, EVP_chacha20_poly1305(), NULL, key, nonce, enc ? 1 : 0) != 1)
        goto out;
    if (!enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TG_SEAL_TAG_LEN, (void *)tag) != 1)
        goto out;
    /* The prefix is authenticated, so a token cannot be relabelled as
     * another format version without failing the tag. */
    if (EVP_CipherUpdate(ctx, NULL, &outl, (const unsigned char *)TG_SEAL_PREFIX,
                         TG_SEAL_PREFIX_LEN) != 1)
        goto out;
    if (ad_len > 0 &&
        EVP_CipherUpdate(ctx, NULL, &outl, (const unsigned char *)ad, (int)ad_len) != 1)
        goto out;
    if (EVP_CipherUpdate(ctx, out, &outl, in, (int)n) != 1 || (size_t)outl != n)
        goto out;
    if (EVP_CipherFinal_ex(ctx, out + n, &outl) != 1) {
        /* Opening: the one failure a token causes. Sealing: OpenSSL's. */
        rc = enc ? -EIO : TG_SEAL_INVALID;
        goto out;
    }
    if (enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TG_SEAL_TAG_LEN, tag) != 1)
        goto out;
    rc = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    return rc;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

int tg_seal(const uint8_t key[TG_SEAL_KEY_LEN], const uint8_t nonce[TG_SEAL_NONCE_LEN],
            const void *ad, size_t ad_len, const tg_seal_rec_t *rec, char *out, size_t cap,
            size_t *out_len)
{
    uint8_t plain[TG_SEAL_HDR_LEN + TG_SEAL_PAYLOAD_MAX];
    uint8_t raw[TG_SEAL_RAW_MAX];
    if (rec->payload_len > TG_SEAL_PAYLOAD_MAX || (ad == NULL && ad_len > 0) || ad_len > INT32_MAX)
        return -EINVAL;
    size_t n = TG_SEAL_HDR_LEN + rec->payload_len;
    size_t total = TG_SEAL_NONCE_LEN + n + TG_SEAL_TAG_LEN;
    if (cap < TG_SEAL_PREFIX_LEN + tg_b64url_len(total) + 1)
        return -ENOBUFS;
    plain[0] = TG_SEAL_VERSION;
    put_be64(plain + 1, rec->expires_ms);
    if (rec->payload_len > 0)
        memcpy(plain + TG_SEAL_HDR_LEN, rec->payload, rec->payload_len);
    memcpy(raw, nonce, TG_SEAL_NONCE_LEN);
    int rc = aead(true, key, nonce, ad, ad_len, plain, n, raw + TG_SEAL_NONCE_LEN,
                  raw + TG_SEAL_NONCE_LEN + n);
    OPENSSL_cleanse(plain, sizeof plain);
    if (rc < 0)
        return rc;
    memcpy(out, TG_SEAL_PREFIX, TG_SEAL_PREFIX_LEN);
    tg_b64url_encode(raw, total, out + TG_SEAL_PREFIX_LEN);
    *out_len = TG_SEAL_PREFIX_LEN + tg_b64url_len(total);
    out[*out_len] = '\0';
    return 0;
}

int tg_seal_open(const uint8_t key[TG_SEAL_KEY_LEN], const void *ad, size_t ad_len, const char *tok,
                 size_t len, uint64_t now_ms, tg_seal_rec_t *rec)
{
    uint8_t raw[TG_SEAL_RAW_MAX], plain[TG_SEAL_HDR_LEN + TG_SEAL_PAYLOAD_MAX];
    size_t n = 0;
    /* Shape first, all of it one answer: nothing about a token is told
     * apart before its tag verifies. The length bound comes before the
     * decode, so a long string costs nothing. */
    if (tok == NULL || (ad == NULL && ad_len > 0) || ad_len > INT32_MAX)
        return TG_SEAL_INVALID;
    if (len < TG_SEAL_PREFIX_LEN || len > TG_SEAL_TOKEN_MAX ||
        memcmp(tok, TG_SEAL_PREFIX, TG_SEAL_PREFIX_LEN) != 0)
        return TG_SEAL_INVALID;
    if (tg_b64url_decode(tok + TG_SEAL_PREFIX_LEN, len - TG_SEAL_PREFIX_LEN, raw, &n) < 0 ||
        n < TG_SEAL_RAW_MIN || n > TG_SEAL_RAW_MAX)
        return TG_SEAL_INVALID;
    size_t m = n - TG_SEAL_NONCE_LEN - TG_SEAL_TAG_LEN;
    int rc = aead(false, key, raw, ad, ad_len, raw + TG_SEAL_NONCE_LEN, m, plain,
                  raw + TG_SEAL_NONCE_LEN + m);
    if (rc < 0) {
        OPENSSL_cleanse(plain, sizeof plain);
        return rc;
    }
    /* Authentic from here: only toolgate (holding <key>) wrote it. A
     * version this build does not read is still refused as invalid. */
    if (plain[0] != TG_SEAL_VERSION) {
        OPENSSL_cleanse(plain, sizeof plain);
        return TG_SEAL_INVALID;
    }
    rec->version = plain[0];
    rec->expires_ms = get_be64(plain + 1);
    rec->payload_len = m - TG_SEAL_HDR_LEN;
    if (rec->payload_len > 0)
        memcpy(rec->payload, plain + TG_SEAL_HDR_LEN, rec->payload_len);
    OPENSSL_cleanse(plain, sizeof plain);
    return now_ms >= rec->expires_ms ? TG_SEAL_EXPIRED : 0;
}

bool tg_seal_ct_eq(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

int tg_seal_digest(const char *tok, size_t len, char out[TG_SEAL_DIGEST_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(tok, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen * 2 < TG_SEAL_DIGEST_HEX)
        return -EIO;
    for (size_t i = 0; i < TG_SEAL_DIGEST_HEX / 2; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[TG_SEAL_DIGEST_HEX] = '\0';
    return 0;
}
