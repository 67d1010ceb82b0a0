/* b64url: unpadded base64url (RFC 4648 §5) for the opaque tokens toolgate
 * mints itself (the hub's cursors, router/codec/expose.c; the sealed
 * requestState, router/codec/seal.c). Pure, no allocation.
 *
 * Decoding is strict: the alphabet only, no padding, and the bits left
 * over at the end zero, so each token has exactly one spelling and a
 * changed character always changes the bytes a tag covers. */
#ifndef TG_ROUTER_CODEC_B64URL_H
#define TG_ROUTER_CODEC_B64URL_H

#include <stddef.h>
#include <stdint.h>

/* Characters of the encoding of <n> bytes. */
static inline size_t tg_b64url_len(size_t n)
{
    return (n * 4 + 2) / 3;
}

/* <n> bytes of <in> into <out> (tg_b64url_len(n) characters, not
 * NUL-terminated). */
void tg_b64url_encode(const uint8_t *in, size_t n, char *out);

/* <len> characters of <s> into <out> (room for len * 3 / 4 bytes), their
 * count in <*n>. 0, or -EINVAL for anything but the one spelling. */
int tg_b64url_decode(const char *s, size_t len, uint8_t *out, size_t *n);

#endif
