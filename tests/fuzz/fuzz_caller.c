/* libFuzzer target: the caller-frame path of both dialects, with its
 * memory bound asserted (not only the absence of crashes).
 *
 * The input is a caller's byte stream. The first byte picks the dialect
 * (low bit: mcp or opensentience) and max_frame (16..4111 bytes), the
 * second the read size. The bytes go through the codec into one window of
 * a fixed size, max_frame + header + one read, allocated once (as
 * router/gateway/io.c's bound: the codec refuses partial frames past
 * max_frame, so the shell never holds more). The partial frame is slid to
 * the front when a read would not fit; a read that still does not fit, a
 * kept partial frame over max_frame + header, an over-cap head longer than
 * max_frame or a frame span outside the window aborts. Each frame goes
 * through what the shell runs on it: tg_mcp_scan (and, when it refuses,
 * tg_mcp_salvage; batches tg_mcp_batch_has_call), or tg_os_scan; each
 * over-cap MCP head through tg_mcp_scan_head_id and tg_mcp_salvage. Spans
 * they return must lie inside the frame; a frame tg_mcp_scan accepts must
 * parse with jansson (nested values included: issue 12 item 20).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/envelope.h"
#include "router/codec/lenpfx.h"
#include "router/codec/ndjson.h"
#include "router/codec/osenv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, size_t a, size_t b)
{
    fprintf(stderr, "fuzz_caller: %s (%zu, %zu)\n", what, a, b);
    abort();
}

static void span_in(tg_jspan_t s, size_t len, const char *what)
{
    if (s.type != TG_J_NONE && (s.off > len || s.len > len - s.off))
        die(what, s.off, s.len);
}

static void mcp_frame(const char *f, size_t n)
{
    tg_mcp_env_t env;
    if (tg_mcp_scan(f, n, &env) < 0) {
        tg_mcp_salvage_t sv;
        tg_mcp_salvage(f, n, &sv);
        span_in(sv.id, n, "salvaged id outside the frame");
        return;
    }
    span_in(env.id, n, "id outside the frame");
    span_in(env.method, n, "method outside the frame");
    span_in(env.params, n, "params outside the frame");
    span_in(env.cancel_id, n, "requestId outside the frame");
    json_t *j = json_loadb(f, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    /* jansson refuses numbers it cannot hold (1e400, integers past
     * int64), which JSON allows: a refusal is a finding unless the frame
     * holds a digit run long enough to be one of those. */
    if (j == NULL) {
        size_t run = 0, best = 0;
        for (size_t i = 0; i < n; i++) {
            run = (f[i] >= '0' && f[i] <= '9') ? run + 1 : 0;
            best = run > best ? run : best;
        }
        if (best < 18)
            die("tg_mcp_scan accepted what jansson refuses", n, 0);
    }
    json_decref(j);
    if (env.kind == TG_MCP_BATCH)
        (void)tg_mcp_batch_has_call(f, n);
}

static void mcp_head(const char *h, size_t n, size_t max_frame)
{
    if (n > max_frame)
        die("over-cap head longer than max_frame", n, max_frame);
    tg_jspan_t id;
    if (tg_mcp_scan_head_id(h, n, &id) == 0)
        span_in(id, n, "head id outside the head");
    tg_mcp_salvage_t sv;
    tg_mcp_salvage(h, n, &sv);
    span_in(sv.id, n, "salvaged head id outside the head");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool os = data[0] & 1;
    size_t max_frame = 16 + (size_t)(data[0] >> 1) * 32;
    size_t chunk = 1 + data[1] % 97;
    data += 2;
    size -= 2;
    size_t cap = max_frame + TG_LENPFX_HDR + chunk;
    char *win = malloc(cap);
    if (win == NULL)
        return 0;
    tg_ndjson_t nd;
    tg_lenpfx_t lp;
    tg_ndjson_init(&nd, max_frame);
    tg_lenpfx_init(&lp, max_frame);
    size_t len = 0, pos = 0, fed = 0;
    while (fed < size) {
        size_t n = size - fed < chunk ? size - fed : chunk;
        if (cap - len < n) {
            memmove(win, win + pos, len - pos);
            len -= pos;
            pos = 0;
        }
        if (cap - len < n)
            die("a read does not fit the bounded window", len, n);
        memcpy(win + len, data + fed, n);
        len += n;
        fed += n;
        for (;;) {
            size_t s = 0, e = 0;
            uint64_t total = 0;
            if (os) {
                tg_lp_ev_t ev = tg_lenpfx_next(&lp, win, len, &pos, &s, &e, &total);
                if (ev == TG_LP_NEED_MORE)
                    break;
                if (ev == TG_LP_FRAME) {
                    if (e > len || s > e || e - s > max_frame)
                        die("frame span", s, e);
                    tg_os_env_t env;
                    (void)tg_os_scan(win + s, e - s, &env);
                }
            } else {
                tg_nd_ev_t ev = tg_ndjson_next(&nd, win, len, &pos, &s, &e, &total);
                if (ev == TG_ND_NEED_MORE)
                    break;
                if (ev == TG_ND_FRAME) {
                    if (e > len || s > e || e - s > max_frame)
                        die("frame span", s, e);
                    mcp_frame(win + s, e - s);
                } else if (ev == TG_ND_OVERSIZE) {
                    mcp_head(win + s, e - s, max_frame);
                }
            }
        }
        if (len - pos > max_frame + TG_LENPFX_HDR)
            die("partial frame kept past max_frame", len - pos, max_frame);
        if (pos == len)
            len = pos = 0;
    }
    free(win);
    return 0;
}
