/* Sealed requestState tokens (router/codec/seal.c): round trips, and every
 * way a token can be wrong answers one refusal (expired apart). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/seal.h"

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static uint8_t key[TG_SEAL_KEY_LEN];
static uint8_t nonce[TG_SEAL_NONCE_LEN];
static const char AD[] = "caller=alice\nagent=fs\nmethod=tools/call\nname=read_file";
#define NOW     1785240000000ull /* 2026-07-28T12:00:00Z, in ms */
#define EXPIRES (NOW + 60000)

static void fill_keys(void)
{
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof nonce; i++)
        nonce[i] = (uint8_t)(0xa0 + i);
}

TestSuite(seal, .init = fill_keys);

static tg_seal_rec_t rec_of(const char *payload)
{
    tg_seal_rec_t r;
    memset(&r, 0, sizeof r);
    r.expires_ms = EXPIRES;
    r.payload_len = strlen(payload);
    memcpy(r.payload, payload, r.payload_len);
    return r;
}

/* Seal <payload> under the test key, nonce and AD into <tok>. */
static size_t seal_str(const char *payload, char tok[TG_SEAL_TOKEN_MAX + 1])
{
    tg_seal_rec_t r = rec_of(payload);
    size_t len = 0;
    cr_assert_eq(tg_seal(key, nonce, AD, strlen(AD), &r, tok, TG_SEAL_TOKEN_MAX + 1, &len), 0);
    cr_assert_eq(strlen(tok), len);
    return len;
}

static int open_at(const char *tok, size_t len, uint64_t now, tg_seal_rec_t *r)
{
    return tg_seal_open(key, AD, strlen(AD), tok, len, now, r);
}

Test(seal, round_trip_keeps_expiry_and_payload)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=17;instance=3;gen=2", tok);
    tg_seal_rec_t r;
    memset(&r, 0xee, sizeof r);
    cr_assert_eq(open_at(tok, len, NOW, &r), 0);
    cr_assert_eq(r.version, TG_SEAL_VERSION);
    cr_assert_eq(r.expires_ms, EXPIRES);
    cr_assert_eq(r.payload_len, 24);
    cr_assert_eq(memcmp(r.payload, "park=17;instance=3;gen=2", 24), 0);
}

Test(seal, token_is_prefixed_base64url_and_json_safe)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("x", tok);
    cr_assert_eq(strncmp(tok, TG_SEAL_PREFIX, TG_SEAL_PREFIX_LEN), 0);
    for (size_t i = TG_SEAL_PREFIX_LEN; i < len; i++)
        cr_assert(strchr(B64URL, tok[i]) != NULL, "byte %zu: %c", i, tok[i]);
    /* nonce 12 + version 1 + expiry 8 + payload 1 + tag 16 = 38 bytes -> 51 chars */
    cr_assert_eq(len, TG_SEAL_PREFIX_LEN + 51);
}

Test(seal, empty_and_maximal_payloads_round_trip)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    tg_seal_rec_t r, back;
    size_t len = 0;
    memset(&r, 0, sizeof r);
    r.expires_ms = EXPIRES;
    cr_assert_eq(tg_seal(key, nonce, NULL, 0, &r, tok, sizeof tok, &len), 0, "no AD, no payload");
    cr_assert_eq(tg_seal_open(key, NULL, 0, tok, len, NOW, &back), 0);
    cr_assert_eq(back.payload_len, 0);

    r.payload_len = TG_SEAL_PAYLOAD_MAX;
    for (size_t i = 0; i < TG_SEAL_PAYLOAD_MAX; i++)
        r.payload[i] = (uint8_t)i;
    cr_assert_eq(tg_seal(key, nonce, AD, strlen(AD), &r, tok, sizeof tok, &len), 0);
    cr_assert_eq(len, TG_SEAL_TOKEN_MAX, "the largest token is exactly the bound");
    cr_assert_eq(open_at(tok, len, NOW, &back), 0);
    cr_assert_eq(back.payload_len, TG_SEAL_PAYLOAD_MAX);
    cr_assert_eq(memcmp(back.payload, r.payload, TG_SEAL_PAYLOAD_MAX), 0);
}

Test(seal, same_inputs_same_token_another_nonce_another_token)
{
    char a[TG_SEAL_TOKEN_MAX + 1], b[TG_SEAL_TOKEN_MAX + 1];
    seal_str("p", a);
    seal_str("p", b);
    cr_assert_str_eq(a, b, "deterministic given the nonce: the caller draws it");
    nonce[0] ^= 1;
    seal_str("p", b);
    cr_assert_str_neq(a, b);
}

/* A token from this format, pinned: a later build must still open it (and
 * a change of layout, cipher or AD framing shows here first). Key bytes
 * i*7+1, nonce a0..ab, the AD above, payload "pin", expiry EXPIRES;
 * python cryptography's ChaCha20Poly1305 seals the same bytes to it. */
#define PINNED "tgs1.oKGio6SlpqeoqaqrcJuEq70yRQ2_iWzmjQg0i5TKINWLUoEIop2xZg"

Test(seal, a_pinned_token_still_opens)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    seal_str("pin", tok);
    cr_assert_str_eq(tok, PINNED, "sealed now: %s", tok);
    tg_seal_rec_t r;
    cr_assert_eq(open_at(PINNED, strlen(PINNED), NOW, &r), 0);
    cr_assert_eq(r.payload_len, 3);
    cr_assert_eq(memcmp(r.payload, "pin", 3), 0);
}

Test(seal, every_changed_character_is_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1], bad[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    for (size_t i = 0; i < len; i++)
        for (size_t k = 0; k < sizeof B64URL - 1; k += 5) {
            if (B64URL[k] == tok[i])
                continue;
            memcpy(bad, tok, len + 1);
            bad[i] = B64URL[k];
            cr_assert_eq(open_at(bad, len, NOW, &r), TG_SEAL_INVALID, "char %zu -> %c", i,
                         B64URL[k]);
        }
}

/* Decode, flip one bit of one byte, encode again: a canonical token whose
 * bytes differ, which only the tag can catch. */
Test(seal, every_flipped_bit_of_the_bytes_is_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    uint8_t raw[TG_SEAL_RAW_MAX];
    size_t n = 0;
    /* decode with the test's own tiny decoder */
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = TG_SEAL_PREFIX_LEN; i < len; i++) {
        acc = acc << 6 | (uint32_t)(strchr(B64URL, tok[i]) - B64URL);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            raw[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    cr_assert_eq(n, TG_SEAL_RAW_MIN + 6);
    tg_seal_rec_t r;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            uint8_t mod[TG_SEAL_RAW_MAX];
            char bad[TG_SEAL_TOKEN_MAX + 1] = TG_SEAL_PREFIX;
            size_t o = TG_SEAL_PREFIX_LEN;
            memcpy(mod, raw, n);
            mod[i] ^= (uint8_t)(1u << b);
            acc = 0;
            bits = 0;
            for (size_t j = 0; j < n; j++) {
                acc = (acc << 8 | mod[j]) & 0xffff;
                bits += 8;
                while (bits >= 6) {
                    bits -= 6;
                    bad[o++] = B64URL[(acc >> bits) & 63];
                }
            }
            if (bits > 0)
                bad[o++] = B64URL[(acc << (6 - bits)) & 63];
            bad[o] = '\0';
            cr_assert_eq(o, len);
            cr_assert_eq(open_at(bad, o, NOW, &r), TG_SEAL_INVALID, "byte %zu bit %d", i, b);
        }
}

Test(seal, another_ad_is_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    const char *other = "caller=bob\nagent=fs\nmethod=tools/call\nname=read_file";
    cr_assert_eq(tg_seal_open(key, other, strlen(other), tok, len, NOW, &r), TG_SEAL_INVALID);
    cr_assert_eq(tg_seal_open(key, AD, strlen(AD) - 1, tok, len, NOW, &r), TG_SEAL_INVALID,
                 "a shorter AD");
    cr_assert_eq(tg_seal_open(key, NULL, 0, tok, len, NOW, &r), TG_SEAL_INVALID, "no AD");
    cr_assert_eq(tg_seal_open(key, NULL, 3, tok, len, NOW, &r), TG_SEAL_INVALID, "NULL AD");
}

Test(seal, another_key_is_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    uint8_t other[TG_SEAL_KEY_LEN];
    memcpy(other, key, sizeof other);
    other[31] ^= 0x80;
    cr_assert_eq(tg_seal_open(other, AD, strlen(AD), tok, len, NOW, &r), TG_SEAL_INVALID);
}

Test(seal, expiry_is_told_apart_and_only_for_authentic_tokens)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    cr_assert_eq(open_at(tok, len, EXPIRES - 1, &r), 0, "the last ms before expiry");
    memset(&r, 0, sizeof r);
    cr_assert_eq(open_at(tok, len, EXPIRES, &r), TG_SEAL_EXPIRED, "at the expiry");
    cr_assert_eq(r.expires_ms, EXPIRES, "an expired token is still read, for the audit");
    cr_assert_eq(r.payload_len, 6);
    cr_assert_eq(open_at(tok, len, EXPIRES + 86400000, &r), TG_SEAL_EXPIRED);
    cr_assert_eq(tg_seal_open(key, "x", 1, tok, len, EXPIRES + 1, &r), TG_SEAL_INVALID,
                 "another AD past expiry: invalid, not expired");
    tok[len - 3] = tok[len - 3] == 'A' ? 'B' : 'A';
    cr_assert_eq(open_at(tok, len, EXPIRES + 1, &r), TG_SEAL_INVALID,
                 "a forged token past expiry: invalid, not expired");
}

Test(seal, truncated_tokens_are_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    for (size_t cut = 0; cut < len; cut++)
        cr_assert_eq(open_at(tok, cut, NOW, &r), TG_SEAL_INVALID, "%zu of %zu", cut, len);
    cr_assert_eq(open_at(NULL, 0, NOW, &r), TG_SEAL_INVALID);
}

Test(seal, oversize_payloads_tokens_and_small_buffers_are_refused)
{
    tg_seal_rec_t r = rec_of("");
    char tok[TG_SEAL_TOKEN_MAX + 2];
    size_t len = 0;
    r.payload_len = TG_SEAL_PAYLOAD_MAX + 1;
    cr_assert_eq(tg_seal(key, nonce, AD, strlen(AD), &r, tok, sizeof tok, &len), -EINVAL);
    r.payload_len = 0;
    cr_assert_eq(tg_seal(key, nonce, NULL, 5, &r, tok, sizeof tok, &len), -EINVAL, "NULL AD");

    r.payload_len = 4;
    size_t need = TG_SEAL_PREFIX_LEN + ((TG_SEAL_RAW_MIN + 4) * 4 + 2) / 3 + 1;
    cr_assert_eq(tg_seal(key, nonce, AD, strlen(AD), &r, tok, need - 1, &len), -ENOBUFS);
    cr_assert_eq(tg_seal(key, nonce, AD, strlen(AD), &r, tok, need, &len), 0);

    /* one character over the bound, whatever follows */
    char big[TG_SEAL_TOKEN_MAX + 8];
    memcpy(big, TG_SEAL_PREFIX, TG_SEAL_PREFIX_LEN);
    memset(big + TG_SEAL_PREFIX_LEN, 'A', sizeof big - TG_SEAL_PREFIX_LEN);
    cr_assert_eq(open_at(big, TG_SEAL_TOKEN_MAX + 1, NOW, &r), TG_SEAL_INVALID);
    cr_assert_eq(open_at(big, TG_SEAL_TOKEN_MAX + 4, NOW, &r), TG_SEAL_INVALID);
    /* a maximal-length token of the right shape but forged */
    cr_assert_eq(open_at(big, TG_SEAL_TOKEN_MAX, NOW, &r), TG_SEAL_INVALID);
}

Test(seal, garbage_base64_and_prefixes_are_invalid)
{
    char tok[TG_SEAL_TOKEN_MAX + 1], bad[TG_SEAL_TOKEN_MAX + 8];
    size_t len = seal_str("park=1", tok);
    tg_seal_rec_t r;
    static const char not_alpha[] = "+/= .~\"\\\n";
    for (size_t k = 0; k < sizeof not_alpha - 1; k++) {
        memcpy(bad, tok, len + 1);
        bad[len / 2] = not_alpha[k];
        cr_assert_eq(open_at(bad, len, NOW, &r), TG_SEAL_INVALID, "0x%02x",
                     (unsigned char)not_alpha[k]);
    }
    memcpy(bad, tok, len);
    memcpy(bad + len, "==", 3);
    cr_assert_eq(open_at(bad, len + 2, NOW, &r), TG_SEAL_INVALID, "padded");
    memcpy(bad, tok, len + 1);
    bad[len - 1] = '\0';
    cr_assert_eq(open_at(bad, len, NOW, &r), TG_SEAL_INVALID, "a NUL inside");

    /* 51 characters carry 38 bytes and 2 spare bits: set one, and the
     * bytes are the same but the spelling is not canonical. */
    memcpy(bad, tok, len + 1);
    size_t last = (size_t)(strchr(B64URL, bad[len - 1]) - B64URL);
    bad[len - 1] = B64URL[last | 1];
    if (bad[len - 1] != tok[len - 1])
        cr_assert_eq(open_at(bad, len, NOW, &r), TG_SEAL_INVALID, "spare bits");

    const char *prefixes[] = {"tgs2.", "TGS1.", "tgs1_", "xxxx."};
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        memcpy(bad, tok, len + 1);
        memcpy(bad, prefixes[k], TG_SEAL_PREFIX_LEN);
        cr_assert_eq(open_at(bad, len, NOW, &r), TG_SEAL_INVALID, "%s", prefixes[k]);
    }
    const char *junk[] = {"", "tgs1.", "tgs1.A", "tgs1.AAAA", "hello", "{\"a\":1}"};
    for (size_t k = 0; k < sizeof junk / sizeof *junk; k++)
        cr_assert_eq(open_at(junk[k], strlen(junk[k]), NOW, &r), TG_SEAL_INVALID, "%s", junk[k]);
}

Test(seal, digest_is_sha256_hex_prefix)
{
    char d[TG_SEAL_DIGEST_HEX + 1];
    cr_assert_eq(tg_seal_digest("abc", 3, d), 0);
    cr_assert_str_eq(d, "ba7816bf8f01cfea", "FIPS 180-2 vector of SHA-256(\"abc\")");
    char tok[TG_SEAL_TOKEN_MAX + 1], d2[TG_SEAL_DIGEST_HEX + 1];
    size_t len = seal_str("park=1", tok);
    cr_assert_eq(tg_seal_digest(tok, len, d), 0);
    cr_assert_eq(tg_seal_digest(tok, len, d2), 0);
    cr_assert_str_eq(d, d2);
    nonce[3] ^= 1;
    len = seal_str("park=1", tok);
    cr_assert_eq(tg_seal_digest(tok, len, d2), 0);
    cr_assert_str_neq(d, d2, "another token, another digest");
}

Test(seal, constant_time_compare)
{
    cr_assert(tg_seal_ct_eq("abcdef", "abcdef", 6));
    cr_assert_not(tg_seal_ct_eq("abcdef", "abcdeg", 6));
    cr_assert_not(tg_seal_ct_eq("xbcdef", "abcdef", 6));
    cr_assert(tg_seal_ct_eq("a", "b", 0), "nothing to compare: equal");
}
