/* seal: the sealed `requestState` toolgate mints when it answers a 2026
 * client for a 2025-era server with an InputRequiredResult (MCP
 * 2026-07-28, basic/patterns/mrtr.mdx, "Server Requirements": a
 * requestState that influences authorization, resource access or business
 * logic MUST be integrity-protected and state that fails verification
 * MUST be rejected; it SHOULD carry the principal, a short expiry and the
 * originating request, each checked on receipt).
 *
 * Pure (no libuv, no I/O, no clock, no randomness): the caller passes the
 * key, a fresh nonce and its clock (<now_ms>), so every path is tested
 * alone.
 *
 * Cipher: ChaCha20-Poly1305 (RFC 8439) through OpenSSL's EVP, chosen over
 * AES-256-GCM because (1) it is constant-time in software on every CPU,
 * where AES needs AES-NI or ARMv8-CE to avoid table lookups (toolgate runs
 * on small ARM boxes too), and (2) a repeated nonce is less catastrophic:
 * GCM nonce reuse hands out the GHASH key and with it forgeries of any
 * token under that key, Poly1305 reuse exposes only the messages under
 * the repeated nonce. Tokens are a few hundred bytes, so AES-NI speed buys
 * nothing here. Both take a 96-bit nonce and give a 128-bit tag. Random
 * 96-bit nonces are safe for about 2^32 tokens per key (collision odds
 * 2^-33); the key is drawn per process or rotated from config long
 * before that.
 *
 * Token: TG_SEAL_PREFIX ("tgs1.") then unpadded base64url of
 *   nonce (12) | ciphertext of the record | tag (16)
 * and the record is
 *   version (1, TG_SEAL_VERSION) | expires_ms (8, big-endian) | payload
 * The AEAD's associated data is the prefix followed by the caller's <ad>
 * (the lead binds it to the caller identity, the agent and the method and
 * name), so a token presented by another caller, for another agent or on
 * another request fails the tag like a forged one. Encode the AD's fields
 * unambiguously (each length-prefixed, or separated by a byte no field
 * can hold), else caller "ab" + agent "c" binds like "a" + "bc". Only
 * [A-Za-z0-9._-]: safe in JSON strings and URLs without escaping.
 *
 * Not single-use: a token opens as often as it is presented until it
 * expires (mrtr.mdx's warning). The runtime makes a retry count once by
 * consuming the parked call the payload names.
 *
 * Errors. tg_seal_open answers one of two refusals: TG_SEAL_EXPIRED for a
 * token that verifies but whose expiry has passed (the client may start
 * over), TG_SEAL_INVALID for everything else (wrong prefix, length,
 * base64url, tag, key, AD, version), without saying which check failed:
 * a prober learns nothing from the answer. Expiry is read only after the
 * tag verifies, so "expired" is never said of a forged token.
 */
#ifndef TG_ROUTER_CODEC_SEAL_H
#define TG_ROUTER_CODEC_SEAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_SEAL_PREFIX     "tgs1." /* token format 1 */
#define TG_SEAL_PREFIX_LEN 5
#define TG_SEAL_VERSION    1  /* the record's first byte, matching the prefix */
#define TG_SEAL_KEY_LEN    32 /* ChaCha20-Poly1305 key */
#define TG_SEAL_NONCE_LEN  12 /* 96-bit nonce, drawn by the caller (RAND_bytes, getrandom) */
#define TG_SEAL_TAG_LEN    16 /* Poly1305 tag */
#define TG_SEAL_HDR_LEN    9  /* record header: version, expires_ms */
/* fixed internal bound: bytes of the opaque payload of one token */
#define TG_SEAL_PAYLOAD_MAX 256
/* fixed internal bound: bytes of a decoded token (nonce, record, tag) */
#define TG_SEAL_RAW_MAX                                                                            \
    (TG_SEAL_NONCE_LEN + TG_SEAL_HDR_LEN + TG_SEAL_PAYLOAD_MAX + TG_SEAL_TAG_LEN)
#define TG_SEAL_RAW_MIN (TG_SEAL_NONCE_LEN + TG_SEAL_HDR_LEN + TG_SEAL_TAG_LEN)
/* fixed internal bound: characters of a token (prefix and unpadded base64url), 396 */
#define TG_SEAL_TOKEN_MAX  (TG_SEAL_PREFIX_LEN + (TG_SEAL_RAW_MAX * 4 + 2) / 3)
#define TG_SEAL_DIGEST_HEX 16 /* hex digits of tg_seal_digest: 64 bits of SHA-256 */

/* The two refusals of tg_seal_open (negative errnos, as the codec room's
 * runtime calls return). */
#define TG_SEAL_INVALID (-EBADMSG)
#define TG_SEAL_EXPIRED (-ETIMEDOUT)

/* What a token carries. The caller's own; nothing here is allocated. */
typedef struct tg_seal_rec {
    uint8_t version;     /* tg_seal_open sets TG_SEAL_VERSION; tg_seal ignores it */
    uint64_t expires_ms; /* ms since the epoch; open refuses at now_ms >= expires_ms */
    size_t payload_len;  /* <= TG_SEAL_PAYLOAD_MAX */
    uint8_t payload[TG_SEAL_PAYLOAD_MAX]; /* opaque to seal: which parked call, which instance */
} tg_seal_rec_t;

/* Seal <rec> (its expiry and payload) under <key> with <nonce> (fresh for
 * every token: never reuse one under the same key) and associated data
 * <ad> (<ad_len> bytes, may be NULL when 0, not carried in the token) into
 * <out> (<cap> bytes; TG_SEAL_TOKEN_MAX + 1 always fits), NUL-terminated,
 * its length in <*out_len>. Returns 0; -EINVAL (<payload_len> over
 * TG_SEAL_PAYLOAD_MAX, <ad> NULL with a length); -ENOBUFS (<cap> too small);
 * -EIO (OpenSSL failed: out of memory or no ChaCha20-Poly1305 provider). */
int tg_seal(const uint8_t key[TG_SEAL_KEY_LEN], const uint8_t nonce[TG_SEAL_NONCE_LEN],
            const void *ad, size_t ad_len, const tg_seal_rec_t *rec, char *out, size_t cap,
            size_t *out_len);

/* Open token <tok> (<len> bytes, as the client echoed it: untrusted)
 * under <key> with the same associated data <ad> it was sealed with, at
 * <now_ms>. Returns 0 with <rec> filled; TG_SEAL_EXPIRED (authentic, but
 * now_ms >= expires_ms: <rec> is filled too, for the audit); TG_SEAL_INVALID
 * (anything else about the token); -EIO (OpenSSL could not run: not about
 * the token). <rec> is meaningful only on 0 and TG_SEAL_EXPIRED. */
int tg_seal_open(const uint8_t key[TG_SEAL_KEY_LEN], const void *ad, size_t ad_len, const char *tok,
                 size_t len, uint64_t now_ms, tg_seal_rec_t *rec);

/* Whether <a> and <b> (<n> bytes each) are equal, in time that depends on
 * <n> only (CRYPTO_memcmp): for comparing anything secret or a peer could
 * probe byte by byte, such as a digest or id taken from a payload against
 * the one held. The tag itself is checked inside the AEAD, already in
 * constant time. */
bool tg_seal_ct_eq(const void *a, const void *b, size_t n);

/* The audit's link between a retry and its first call without keeping the
 * token: the first TG_SEAL_DIGEST_HEX lowercase hex digits of SHA-256 of
 * the token's text <tok> (<len> bytes) into <out>, NUL-terminated. The same
 * as `printf %s "$token" | sha256sum | cut -c1-16`. 0, or -EIO. */
int tg_seal_digest(const char *tok, size_t len, char out[TG_SEAL_DIGEST_HEX + 1]);

#endif
