/* libFuzzer target: the MCP 2026-07-28 request metadata core
 * (router/codec/mcp26.c), with its contracts asserted, not only the
 * absence of crashes. Every input the core reads is copied to a buffer of
 * its exact size, so ASan sees any read past it.
 *
 * Byte 0 picks the mode (low two bits); the rest is the body.
 *   0 encode:  the body is a value: decode(encode(x)) == x, the wire form
 *              is header-safe (0x20..0x7E, no space at either end), plain
 *              exactly when tg_mcp26_value_needs_b64 is false, and of the
 *              length TG_MCP26_B64_LEN promises when encoded.
 *   1 decode:  the body is a header value from a peer: a plain value comes
 *              back as it is and re-encodes to itself; a decoded one
 *              re-encodes to a value that decodes to the same bytes.
 *   2 request: the body is "headers\0body": header lines (Mcp-Method,
 *              Mcp-Name, MCP-Protocol-Version, then "name:value" lines for
 *              Mcp-Param-*), then a POST body; scanned, its era decided
 *              before and after the body, checked against a fixed
 *              x-mcp-header map; every fault message is printable ASCII
 *              and every error body valid JSON.
 *   3 tool:    the body is a tool definition (jansson): the map built is
 *              within its bounds, its header names tokens and unique
 *              case-insensitively, or the tool is refused with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "router/codec/mcp26.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LINES_MAX 40 /* header lines read from one input */

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_mcp26: %s (%zu bytes)\n", what, n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, "%02x", p[i]);
    fputc('\n', stderr);
    abort();
}

static char *dup_exact(const uint8_t *p, size_t n)
{
    char *d = malloc(n > 0 ? n : 1);
    if (d == NULL)
        abort();
    if (n > 0)
        memcpy(d, p, n);
    return d;
}

static void header_safe(const char *w, size_t n, const uint8_t *in, size_t in_n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)w[i] < 0x20 || (unsigned char)w[i] > 0x7e)
            die("wire form not header-safe", in, in_n);
    if (n > 0 && (w[0] == ' ' || w[n - 1] == ' '))
        die("wire form has a space at an end", in, in_n);
}

static void mode_encode(const uint8_t *p, size_t n)
{
    char *v = dup_exact(p, n);
    size_t cap = TG_MCP26_B64_LEN(n) + 1;
    char *w = malloc(cap), *back = malloc(n + 1);
    size_t wl = 0, bl = 0;
    int rc = tg_mcp26_value_encode(v, n, w, cap, &wl);
    if (rc < 0 || rc != (tg_mcp26_value_needs_b64(v, n) ? 1 : 0))
        die("encode result", p, n);
    if (wl >= cap || w[wl] != '\0' || (rc == 1 && wl != TG_MCP26_B64_LEN(n)))
        die("encode length", p, n);
    if (rc == 0 && (wl != n || memcmp(w, v, n) != 0))
        die("plain value changed", p, n);
    header_safe(w, wl, p, n);
    if (wl <= TG_MCP26_VALUE_MAX) {
        int d = tg_mcp26_value_decode(w, wl, back, n + 1, &bl);
        if (d != rc || bl != n || memcmp(back, v, n) != 0)
            die("decode(encode(x)) != x", p, n);
    }
    free(v);
    free(w);
    free(back);
}

static void mode_decode(const uint8_t *p, size_t n)
{
    char *v = dup_exact(p, n);
    char *out = malloc(n + 1);
    size_t ol = 0;
    int rc = tg_mcp26_value_decode(v, n, out, n + 1, &ol);
    if (rc == -EINVAL || rc == -E2BIG) {
        free(v);
        free(out);
        return;
    }
    if (rc < 0 || ol > n || out[ol] != '\0')
        die("decode result", p, n);
    size_t cap = TG_MCP26_B64_LEN(ol) + 1, wl = 0, bl = 0;
    char *w = malloc(cap), *back = malloc(ol + 1);
    int e = tg_mcp26_value_encode(out, ol, w, cap, &wl);
    if (rc == 0 && (e != 0 || wl != n || memcmp(w, v, n) != 0))
        die("a plain value does not encode to itself", p, n);
    if (e < 0 ||
        (wl <= TG_MCP26_VALUE_MAX && (tg_mcp26_value_decode(w, wl, back, ol + 1, &bl) < 0 ||
                                      bl != ol || memcmp(back, out, ol) != 0)))
        die("re-encoding changes the value", p, n);
    free(v);
    free(out);
    free(w);
    free(back);
}

static const tg_mcp26_xmap_t *fixed_map(void)
{
    static tg_mcp26_xmap_t m;
    static int done;
    if (!done) {
        const char *tool =
            "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
            "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
            "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"},"
            "\"b\":{\"type\":\"boolean\",\"x-mcp-header\":\"B\"},"
            "\"o\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":[\"string\",\"null\"],"
            "\"x-mcp-header\":\"K\"}}}}}}";
        json_t *j = json_loads(tool, 0, NULL);
        char msg[128];
        if (j == NULL || tg_mcp26_xmap_build(j, &m, msg, sizeof msg) != 0 || m.n != 4)
            abort();
        json_decref(j);
        done = 1;
    }
    return &m;
}

static void fault_ok(const tg_mcp26_fault_t *f, const tg_jspan_t *id, const char *buf,
                     const uint8_t *p, size_t n)
{
    size_t ml = strnlen(f->msg, sizeof f->msg);
    if (ml == sizeof f->msg)
        die("message not terminated", p, n);
    for (size_t i = 0; i < ml; i++)
        if ((unsigned char)f->msg[i] < 0x20 || (unsigned char)f->msg[i] > 0x7e)
            die("message not printable", p, n);
    char out[1024];
    long w = tg_mcp26_error_json(f, id != NULL ? buf + id->off : NULL, id != NULL ? id->len : 0,
                                 out, sizeof out);
    if (w == -ENOSPC)
        return; /* a long id */
    /* jscan, not jansson: an id may be an integer past what jansson holds. */
    tg_jspan_t top;
    if (w <= 0 || tg_jscan_value(out, (size_t)w, 0, &top) != w || top.type != TG_J_OBJECT)
        die("error body is not JSON", p, n);
}

static void mode_request(const uint8_t *p, size_t n)
{
    const uint8_t *sep = memchr(p, 0, n);
    size_t hn = sep != NULL ? (size_t)(sep - p) : n;
    size_t bn = sep != NULL ? n - hn - 1 : 0;
    char *body = dup_exact(sep != NULL ? sep + 1 : p, bn);

    /* Header lines, each copied to its own exact buffer. */
    char *lines[LINES_MAX];
    size_t lens[LINES_MAX], nl = 0, at = 0;
    while (at <= hn && nl < LINES_MAX) {
        const uint8_t *nlp = memchr(p + at, '\n', hn - at);
        size_t end = nlp != NULL ? (size_t)(nlp - p) : hn;
        lines[nl] = dup_exact(p + at, end - at);
        lens[nl++] = end - at;
        at = end + 1;
        if (nlp == NULL)
            break;
    }
    tg_mcp26_hdr_t params[LINES_MAX];
    size_t np = 0;
    for (size_t i = 3; i < nl; i++) {
        char *c = memchr(lines[i], ':', lens[i]);
        size_t k = c != NULL ? (size_t)(c - lines[i]) : lens[i];
        params[np].name = lines[i];
        params[np].name_len = k;
        params[np].value = c != NULL ? c + 1 : NULL;
        params[np].value_len = c != NULL ? lens[i] - k - 1 : 0;
        np++;
    }
    /* An empty line stands for an absent header. */
    const char *hv = nl > 2 && lens[2] > 0 ? lines[2] : NULL;
    tg_mcp26_hdrs_t h = {
        .method = nl > 0 && lens[0] > 0 ? lines[0] : NULL,
        .method_len = nl > 0 ? lens[0] : 0,
        .name = nl > 1 && lens[1] > 0 ? lines[1] : NULL,
        .name_len = nl > 1 ? lens[1] : 0,
        .params = params,
        .nparams = np,
    };

    tg_mcp26_fault_t f;
    int e = tg_mcp26_era(hv, hv != NULL ? lens[2] : 0, NULL, &f);
    if (e < 0)
        fault_ok(&f, NULL, NULL, p, n);
    else if (e != TG_MCP26_LEGACY && e != TG_MCP26_MODERN)
        die("era result", p, n);

    tg_mcp26_body_t b;
    if (tg_mcp26_body_scan(body, bn, &b, &f) < 0) {
        fault_ok(&f, b.id.type != TG_J_NONE ? &b.id : NULL, body, p, n);
    } else {
        if (b.kind != TG_MCP_REQUEST && b.kind != TG_MCP_NOTIFICATION)
            die("body kind", p, n);
        const tg_jspan_t *id = b.id.type != TG_J_NONE ? &b.id : NULL;
        e = tg_mcp26_era(hv, hv != NULL ? lens[2] : 0, &b, &f);
        if (e < 0)
            fault_ok(&f, id, body, p, n);
        int rc = tg_mcp26_check(&h, &b, fixed_map(), &f);
        if (rc < 0)
            fault_ok(&f, id, body, p, n);
        else if (rc != 0)
            die("check result", p, n);
        rc = tg_mcp26_check(&h, &b, NULL, &f);
        if (rc < 0)
            fault_ok(&f, id, body, p, n);
    }
    for (size_t i = 0; i < nl; i++)
        free(lines[i]);
    free(body);
}

static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static char low(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static void mode_tool(const uint8_t *p, size_t n)
{
    json_t *j = json_loadb((const char *)p, n, 0, NULL);
    if (j == NULL)
        return;
    static tg_mcp26_xmap_t m;
    char msg[128];
    msg[0] = '\0';
    int rc = tg_mcp26_xmap_build(j, &m, msg, sizeof msg);
    json_decref(j);
    if (rc == -EINVAL || rc == -E2BIG) {
        if (m.n != 0 || msg[0] == '\0')
            die("a refused tool keeps a map or lacks a message", p, n);
        return;
    }
    if (rc != 0 || m.n > TG_MCP26_XHDR_MAX)
        die("xmap result", p, n);
    for (size_t i = 0; i < m.n; i++) {
        const tg_mcp26_xprop_t *x = &m.p[i];
        size_t hl = strnlen(x->header, sizeof x->header);
        if (hl == 0 || hl > TG_MCP26_PARAM_NAME_MAX || x->depth == 0 ||
            x->depth > TG_MCP26_PATH_DEPTH_MAX || x->type < TG_MCP26_T_STRING ||
            x->type > TG_MCP26_T_BOOLEAN)
            die("map entry out of bounds", p, n);
        for (size_t k = 0; k < hl; k++)
            if (!tchar((unsigned char)x->header[k]))
                die("header name not a token", p, n);
        for (unsigned d = 0; d < x->depth; d++)
            if (x->key_off[d] >= TG_MCP26_PATH_BYTES_MAX)
                die("key offset out of bounds", p, n);
        for (size_t o = 0; o < i; o++) {
            size_t ol = strlen(m.p[o].header);
            bool same = ol == hl;
            for (size_t k = 0; same && k < hl; k++)
                same = low(m.p[o].header[k]) == low(x->header[k]);
            if (same)
                die("header names repeat", p, n);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] & 3) {
    case 0:
        mode_encode(p, n);
        break;
    case 1:
        mode_decode(p, n);
        break;
    case 2:
        mode_request(p, n);
        break;
    default:
        mode_tool(p, n);
        break;
    }
    return 0;
}
