/* libFuzzer target: the two pure cores of the 2025 -> 2026 bridge,
 * router/codec/seal.c and router/codec/bridge26.c, with their contracts
 * asserted, not only the absence of crashes.
 *
 * Byte 0 picks the mode (low two bits); the rest is the body.
 *   0 open:    the body is a token from a client: always TG_SEAL_INVALID
 *              (nothing here is sealed under the fuzz key), whatever the
 *              bytes, and never reads past <len>.
 *   1 seal:    the body gives an expiry, a payload and an AD: open(seal(x))
 *              must be x; the token is at most TG_SEAL_TOKEN_MAX bytes of
 *              [A-Za-z0-9._-]; one character changed (position and
 *              replacement from the body) or the token cut short must be
 *              refused as invalid, never as expired.
 *   2 request: the body is JSON taken as a 2025 server's request:
 *              tg_b26_input_request either refuses it leaving its outputs
 *              untouched, or gives an entry of exactly method and params
 *              and a key that tg_b26_input_required takes; the same body
 *              as a 2026 request, once stripped, holds none of the keys a
 *              2025 server must not see.
 *   3 retry:   the body is JSON taken as a retry's params against three
 *              pending requests: 0 fills all, -ENOENT some, -EINVAL none,
 *              and every response filled carries its pending request's id.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/bridge26.h"
#include "router/codec/seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[TG_SEAL_KEY_LEN] = "fuzz_bridge_key_fuzz_bridge_key";
static const uint8_t nonce[TG_SEAL_NONCE_LEN] = "fuzz_nonce_";

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_bridge: %s (%zu bytes)\n", what, n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, "%02x", p[i]);
    fputc('\n', stderr);
    abort();
}

static int tok_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

static void mode_open(const uint8_t *b, size_t n)
{
    tg_seal_rec_t r;
    /* a heap copy of exactly <n> bytes, so ASan sees any read past it */
    char *t = malloc(n ? n : 1);
    if (t == NULL)
        return;
    memcpy(t, b, n);
    if (tg_seal_open(key, "ad", 2, t, n, 0, &r) != TG_SEAL_INVALID)
        die("an unsealed token was not invalid", b, n);
    free(t);
}

static void mode_seal(const uint8_t *b, size_t n)
{
    tg_seal_rec_t in, out;
    memset(&in, 0, sizeof in);
    if (n < 12)
        return;
    for (int i = 0; i < 8; i++)
        in.expires_ms = in.expires_ms << 8 | b[i];
    size_t pos = (size_t)b[8] << 8 | b[9];
    uint8_t repl = b[10], adl = b[11];
    b += 12;
    n -= 12;
    if (adl > n)
        adl = (uint8_t)n;
    const uint8_t *ad = b;
    b += adl;
    n -= adl;
    in.payload_len = n > TG_SEAL_PAYLOAD_MAX ? TG_SEAL_PAYLOAD_MAX : n;
    memcpy(in.payload, b, in.payload_len);

    char tok[TG_SEAL_TOKEN_MAX + 1], bad[TG_SEAL_TOKEN_MAX + 1];
    size_t len = 0;
    if (tg_seal(key, nonce, ad, adl, &in, tok, sizeof tok, &len) != 0)
        die("seal failed", ad, adl);
    if (len > TG_SEAL_TOKEN_MAX || strlen(tok) != len)
        die("token length", (const uint8_t *)tok, len);
    for (size_t i = 0; i < len; i++)
        if (!tok_byte(tok[i]))
            die("token byte", (const uint8_t *)tok, len);
    uint64_t now = in.expires_ms > 0 ? in.expires_ms - 1 : 0;
    int rc = tg_seal_open(key, ad, adl, tok, len, now, &out);
    if (in.expires_ms == 0 ? rc != TG_SEAL_EXPIRED : rc != 0)
        die("open(seal(x)) refused", (const uint8_t *)tok, len);
    if (out.expires_ms != in.expires_ms || out.payload_len != in.payload_len ||
        memcmp(out.payload, in.payload, in.payload_len) != 0 || out.version != TG_SEAL_VERSION)
        die("open(seal(x)) != x", (const uint8_t *)tok, len);

    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";
    memcpy(bad, tok, len + 1);
    pos %= len;
    bad[pos] = alpha[repl % (sizeof alpha - 1)];
    if (bad[pos] != tok[pos] && tg_seal_open(key, ad, adl, bad, len, 0, &out) != TG_SEAL_INVALID)
        die("a changed token was not invalid", (const uint8_t *)bad, len);
    if (tg_seal_open(key, ad, adl, tok, pos, 0, &out) != TG_SEAL_INVALID)
        die("a cut token was not invalid", (const uint8_t *)tok, pos);
}

static json_t *parse(const uint8_t *b, size_t n)
{
    return json_loadb((const char *)b, n, JSON_DECODE_ANY, NULL);
}

static void mode_request(const uint8_t *b, size_t n)
{
    json_t *req = parse(b, n);
    if (req == NULL)
        return;
    json_t *caps = json_pack("{s:{s:{},s:{}}, s:{s:{},s:{}}, s:{}}", "sampling", "tools", "context",
                             "elicitation", "form", "url", "roots");
    tg_b26_pending_t p;
    memset(&p, 0x5a, sizeof p);
    json_t *e = (json_t *)&p;
    char why[128];
    int rc = tg_b26_input_request(req, caps, 3, &p, &e, why, sizeof why);
    if (rc < 0) {
        if (e != (json_t *)&p)
            die("a refused request touched its entry", b, n);
    } else {
        const json_t *m = json_object_get(e, "method");
        size_t want = json_object_get(e, "params") != NULL ? 2 : 1;
        if (!json_is_string(m) || json_object_size(e) != want || p.id == NULL ||
            strchr(p.key, '_') == NULL || strlen(p.key) >= sizeof p.key)
            die("input request entry", b, n);
        json_t *irr = tg_b26_input_required(&p, &e, 1, "tgs1.x", NULL, 0);
        if (irr == NULL || json_object_get(json_object_get(irr, "inputRequests"), p.key) != e)
            die("input required result", b, n);
        json_decref(irr);
        json_decref(e);
        tg_b26_pending_clear(&p);
    }
    json_decref(caps);

    if (tg_b26_strip_request(req) == 0) {
        const json_t *params = json_object_get(req, "params");
        const json_t *meta = json_object_get(params, "_meta");
        if (json_object_get(params, "inputResponses") || json_object_get(params, "requestState") ||
            json_object_get(meta, TG_B26_META_VERSION) ||
            json_object_get(meta, TG_B26_META_CINFO) || json_object_get(meta, TG_B26_META_CCAPS) ||
            json_object_get(meta, TG_B26_META_LOGLEVEL) || (meta && json_object_size(meta) == 0))
            die("strip left a key", b, n);
    }
    json_decref(req);
}

static void mode_retry(const uint8_t *b, size_t n)
{
    json_t *params = parse(b, n);
    if (params == NULL)
        return;
    static const char *const keys[3] = {"sampling_0", "elicitation_1", "roots_2"};
    tg_b26_pending_t p[3];
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof p[i]);
        snprintf(p[i].key, sizeof p[i].key, "%s", keys[i]);
        p[i].kind = (tg_b26_kind_t)(i + 1);
        p[i].id = json_integer(100 + i);
    }
    json_t *out[3];
    size_t extra = 0;
    char why[128];
    int rc = tg_b26_input_responses(params, p, 3, out, &extra, why, sizeof why);
    int filled = 0;
    for (int i = 0; i < 3; i++) {
        if (out[i] == NULL)
            continue;
        filled++;
        if (!json_equal(json_object_get(out[i], "id"), p[i].id) ||
            json_object_get(out[i], "result") == NULL)
            die("a response with the wrong id", b, n);
        json_decref(out[i]);
    }
    if ((rc == 0 && filled != 3) || (rc == -EINVAL && filled != 0) ||
        (rc == -ENOENT && filled == 3) || (rc != 0 && rc != -EINVAL && rc != -ENOENT))
        die("responses do not match the return", b, n);
    for (int i = 0; i < 3; i++)
        tg_b26_pending_clear(&p[i]);
    json_decref(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *b = data + 1;
    size_t n = size - 1;
    switch (data[0] & 3) {
    case 0:
        mode_open(b, n);
        break;
    case 1:
        mode_seal(b, n);
        break;
    case 2:
        mode_request(b, n);
        break;
    default:
        mode_retry(b, n);
        break;
    }
    return 0;
}
