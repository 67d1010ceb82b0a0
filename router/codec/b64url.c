/* Unpadded base64url: see b64url.h. */
#include "router/codec/b64url.h"

#include <errno.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void tg_b64url_encode(const uint8_t *in, size_t n, char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8 | in[i]) & 0xffff; /* at most 6 + 8 bits are pending */
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = alphabet[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = alphabet[(acc << (6 - bits)) & 63];
}

static int val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

int tg_b64url_decode(const char *s, size_t len, uint8_t *out, size_t *n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    if (len % 4 == 1)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        int v = val((unsigned char)s[i]);
        if (v < 0)
            return -EINVAL;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0)
        return -EINVAL;
    *n = o;
    return 0;
}
