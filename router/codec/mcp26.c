/* MCP 2026-07-28 request metadata on Streamable HTTP (see mcp26.h).
 *
 * Spec references are to /work/spec/docs/specification/2026-07-28/ and
 * /work/spec/schema/2026-07-28/. Everything here reads spans of the body
 * (jscan, the envelope scanner) and bounded header bytes; the only tree
 * read is a tool definition, in tg_mcp26_xmap_build.
 */
#include "router/codec/mcp26.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "config/jsonw.h"

/* versioning.mdx: 2026-07-28 is modern; the rest are the 2025-era
 * (initialize handshake) versions the HTTP front has accepted since
 * 2025-06-18 (router/front/http.c keeps its own copy for now). Newest
 * first, as the spec's UnsupportedProtocolVersionError example lists. */
const char *const tg_mcp_versions[] = {
    TG_MCP26_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL,
};

int tg_mcp26_version_era(const char *v, size_t len)
{
    for (size_t i = 0; tg_mcp_versions[i] != NULL; i++) {
        const char *s = tg_mcp_versions[i];
        if (strlen(s) == len && memcmp(s, v, len) == 0)
            return i == 0 ? TG_MCP26_MODERN : TG_MCP26_LEGACY;
    }
    return -ENOENT;
}

/* ---- faults ---- */

__attribute__((format(printf, 3, 4))) static int fault(tg_mcp26_fault_t *f, int code,
                                                       const char *fmt, ...)
{
    va_list ap;
    f->code = code;
    f->requested[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

/* The spec's message is "Header mismatch: ..." (streamable-http.mdx
 * "Server Validation" example); ours never quotes the values compared. */
#define MISMATCH(f, ...) fault((f), TG_MCP26_HEADER_MISMATCH, "Header mismatch: " __VA_ARGS__)

static int unsupported(tg_mcp26_fault_t *f, const char *v, size_t len)
{
    fault(f, TG_MCP26_UNSUPPORTED_VERSION, "Unsupported protocol version");
    if (len > TG_MCP26_VERSION_MAX)
        len = TG_MCP26_VERSION_MAX;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        f->requested[i] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
    }
    f->requested[len] = '\0';
    return -EBADMSG;
}

long tg_mcp26_error_json(const tg_mcp26_fault_t *f, const char *id, size_t id_len, char *dst,
                         size_t cap)
{
    tg_jw_t w;
    tg_jw_init(&w, dst, cap);
    tg_jw_lit(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
    if (id != NULL && id_len > 0)
        tg_jw_raw(&w, id, id_len);
    else
        tg_jw_lit(&w, "null");
    tg_jw_lit(&w, ",\"error\":{\"code\":");
    tg_jw_i64(&w, f->code);
    tg_jw_lit(&w, ",\"message\":\"");
    tg_jw_esc(&w, f->msg, strnlen(f->msg, sizeof f->msg));
    tg_jw_lit(&w, "\"");
    if (f->code == TG_MCP26_UNSUPPORTED_VERSION) {
        /* schema.ts UnsupportedProtocolVersionError: data.supported, data.requested */
        tg_jw_lit(&w, ",\"data\":{\"supported\":[");
        for (size_t i = 0; tg_mcp_versions[i] != NULL; i++) {
            if (i > 0)
                tg_jw_lit(&w, ",");
            tg_jw_str(&w, tg_mcp_versions[i]);
        }
        tg_jw_lit(&w, "],\"requested\":");
        tg_jw_str(&w, f->requested);
        tg_jw_lit(&w, "}");
    }
    tg_jw_lit(&w, "}}");
    return tg_jw_end(&w);
}

/* ---- Base64 sentinel ---- */

#define PFX_LEN (sizeof(TG_MCP26_B64_PREFIX) - 1)
#define SFX_LEN (sizeof(TG_MCP26_B64_SUFFIX) - 1)

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* The spec's pattern: starts with the prefix and ends with the suffix
 * (they may overlap: "=?base64?=" matches and must be encoded). */
static bool sentinel_shaped(const char *v, size_t len)
{
    return len >= PFX_LEN && memcmp(v, TG_MCP26_B64_PREFIX, PFX_LEN) == 0 &&
           memcmp(v + len - SFX_LEN, TG_MCP26_B64_SUFFIX, SFX_LEN) == 0;
}

bool tg_mcp26_value_needs_b64(const char *v, size_t len)
{
    if (len == 0)
        return false;
    if (v[0] == ' ' || v[len - 1] == ' ')
        return true;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e)
            return true;
    }
    return sentinel_shaped(v, len);
}

int tg_mcp26_value_encode(const char *v, size_t len, char *dst, size_t cap, size_t *out_len)
{
    if (!tg_mcp26_value_needs_b64(v, len)) {
        if (cap < len + 1)
            return -ENOSPC;
        memcpy(dst, v, len);
        dst[len] = '\0';
        *out_len = len;
        return 0;
    }
    if (len > SIZE_MAX / 2 || cap < TG_MCP26_B64_LEN(len) + 1)
        return -ENOSPC;
    const unsigned char *s = (const unsigned char *)v;
    char *d = dst;
    memcpy(d, TG_MCP26_B64_PREFIX, PFX_LEN);
    d += PFX_LEN;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t q = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *d++ = b64_alphabet[q >> 18];
        *d++ = b64_alphabet[(q >> 12) & 63];
        *d++ = b64_alphabet[(q >> 6) & 63];
        *d++ = b64_alphabet[q & 63];
    }
    if (len - i == 1) {
        uint32_t q = (uint32_t)s[i] << 16;
        *d++ = b64_alphabet[q >> 18];
        *d++ = b64_alphabet[(q >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    } else if (len - i == 2) {
        uint32_t q = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *d++ = b64_alphabet[q >> 18];
        *d++ = b64_alphabet[(q >> 12) & 63];
        *d++ = b64_alphabet[(q >> 6) & 63];
        *d++ = '=';
    }
    memcpy(d, TG_MCP26_B64_SUFFIX, SFX_LEN);
    d += SFX_LEN;
    *d = '\0';
    *out_len = (size_t)(d - dst);
    return 1;
}

/* Strict Base64 of <n> bytes (a multiple of 4) into <dst>: 0 and
 * <*out_len>, or -EINVAL. <dst> has room for 3 * n / 4 bytes. */
static int b64_decode(const unsigned char *p, size_t n, char *dst, size_t *out_len)
{
    if (n % 4 != 0)
        return -EINVAL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int a = b64_val(p[i]), b = b64_val(p[i + 1]);
        if (a < 0 || b < 0)
            return -EINVAL;
        bool last = i + 4 == n;
        if (last && p[i + 2] == '=' && p[i + 3] == '=') {
            if (b & 15) /* not canonical: bits that would be dropped */
                return -EINVAL;
            dst[o++] = (char)(a << 2 | b >> 4);
            break;
        }
        int c = b64_val(p[i + 2]);
        if (c < 0)
            return -EINVAL;
        if (last && p[i + 3] == '=') {
            if (c & 3)
                return -EINVAL;
            dst[o++] = (char)(a << 2 | b >> 4);
            dst[o++] = (char)((b & 15) << 4 | c >> 2);
            break;
        }
        int d = b64_val(p[i + 3]);
        if (d < 0)
            return -EINVAL;
        dst[o++] = (char)(a << 2 | b >> 4);
        dst[o++] = (char)((b & 15) << 4 | c >> 2);
        dst[o++] = (char)((c & 3) << 6 | d);
    }
    *out_len = o;
    return 0;
}

int tg_mcp26_value_decode(const char *v, size_t len, char *dst, size_t cap, size_t *out_len)
{
    if (len > TG_MCP26_VALUE_MAX)
        return -E2BIG;
    if (sentinel_shaped(v, len)) {
        if (len < PFX_LEN + SFX_LEN)
            return -EINVAL; /* prefix and suffix overlap: no payload */
        size_t n = len - PFX_LEN - SFX_LEN;
        const char *pl = v + PFX_LEN;
        size_t pads = n >= 1 && pl[n - 1] == '=' ? (n >= 2 && pl[n - 2] == '=' ? 2 : 1) : 0;
        if (n % 4 != 0)
            return -EINVAL;
        if (cap < n / 4 * 3 - pads + 1) /* the exact length, so a <cap> that fits it does */
            return -ENOSPC;
        size_t o;
        if (b64_decode((const unsigned char *)v + PFX_LEN, n, dst, &o) < 0)
            return -EINVAL;
        dst[o] = '\0';
        *out_len = o;
        return 1;
    }
    /* Plain: what an encoder sends plain (streamable-http.mdx "Value
     * Encoding"), so a header carrying invalid characters is refused
     * ("Server Behavior for Custom Headers"). */
    if (len > 0 && (v[0] == ' ' || v[len - 1] == ' '))
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e)
            return -EINVAL;
    }
    if (cap < len + 1)
        return -ENOSPC;
    memcpy(dst, v, len);
    dst[len] = '\0';
    *out_len = len;
    return 0;
}

/* ---- numbers, compared exactly in decimal ---- */

#define NUM_DIGITS_MAX 40 /* fixed internal bound: significant digits of a number compared */
#define NUM_EXP_DIGITS 6  /* fixed internal bound: digits of an exponent */

/* value = (neg ? -1 : 1) * 0.DIGITS * 10^exp; zero has nd == 0 */
typedef struct num {
    bool neg;
    size_t nd;
    long exp;
    char dig[NUM_DIGITS_MAX];
} num_t;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parse <s> (<n> bytes) as a JSON number (RFC 8259 grammar, nothing
 * around it) into canonical form. 0, or -1 when it is not one or passes
 * the bounds. */
static int num_parse(const char *s, size_t n, num_t *out)
{
    size_t i = 0;
    memset(out, 0, sizeof *out);
    if (i < n && s[i] == '-') {
        out->neg = true;
        i++;
    }
    size_t int_at = i;
    if (i < n && s[i] == '0')
        i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && is_digit(s[i]))
            i++;
    else
        return -1;
    size_t int_end = i, frac_at = i, frac_end = i;
    if (i < n && s[i] == '.') {
        frac_at = ++i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == frac_at)
            return -1;
        frac_end = i;
    }
    long e = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        size_t at = i;
        while (i < n && is_digit(s[i])) {
            if (i - at >= NUM_EXP_DIGITS)
                return -1;
            e = e * 10 + (s[i] - '0');
            i++;
        }
        if (i == at)
            return -1;
        if (eneg)
            e = -e;
    }
    if (i != n)
        return -1;
    /* Digits in order, integer part then fraction; the point sits after
     * int_end - int_at of them. */
    size_t ilen = int_end - int_at, pending = 0, seq = 0;
    bool first = true;
    for (size_t k = int_at; k < frac_end; k++) {
        if (k == int_end) {
            k = frac_at;
            if (k >= frac_end)
                break;
        }
        char c = s[k];
        if (c == '0') {
            if (!first)
                pending++;
        } else {
            if (first) {
                out->exp = (long)ilen - (long)seq;
                first = false;
            }
            if (out->nd + pending + 1 > NUM_DIGITS_MAX)
                return -1;
            while (pending > 0) {
                out->dig[out->nd++] = '0';
                pending--;
            }
            out->dig[out->nd++] = c;
        }
        seq++;
    }
    if (out->nd == 0) {
        out->neg = false;
        out->exp = 0;
    } else {
        out->exp += e;
    }
    return 0;
}

static bool num_eq(const num_t *a, const num_t *b)
{
    return a->neg == b->neg && a->nd == b->nd && a->exp == b->exp &&
           memcmp(a->dig, b->dig, a->nd) == 0;
}

/* An integer within the safe range of IEEE 754 doubles, +-(2^53 - 1)
 * (server/tools.mdx "x-mcp-header"). */
static bool num_safe_int(const num_t *a)
{
    static const char max[] = "9007199254740991"; /* 2^53 - 1: 16 digits */
    if (a->nd == 0)
        return true;
    if (a->exp < (long)a->nd || a->exp > 16)
        return false;
    if (a->exp < 16)
        return true;
    char d[16];
    memset(d, '0', sizeof d);
    memcpy(d, a->dig, a->nd);
    return memcmp(d, max, sizeof d) <= 0;
}

/* ---- the body ---- */

static bool key_is(const char *buf, tg_jspan_t k, const char *lit)
{
    size_t n = strlen(lit);
    if (k.escaped)
        return tg_jstr_eq(buf, k, lit);
    return k.len - 2 == n && memcmp(buf + k.off + 1, lit, n) == 0;
}

static int take_once(tg_jspan_t *slot, tg_jspan_t val)
{
    if (slot->type != TG_J_NONE)
        return -1;
    *slot = val;
    return 0;
}

/* streamable-http.mdx "Standard Request Headers": the body field Mcp-Name
 * mirrors, by method. */
static const char *name_source(const char *method)
{
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        return "params.name";
    if (strcmp(method, "resources/read") == 0)
        return "params.uri";
    return NULL;
}

int tg_mcp26_body_scan(const char *buf, size_t len, tg_mcp26_body_t *b, tg_mcp26_fault_t *f)
{
    memset(b, 0, sizeof *b);
    b->buf = buf;
    b->len = len;
    tg_mcp_env_t env;
    if (tg_mcp_scan(buf, len, &env) < 0) {
        tg_mcp_verdict_t v;
        tg_mcp_judge(buf, len, &v);
        b->id = v.id;
        return fault(f, v.code, "%s", v.message);
    }
    /* A response's id is not echoed: a caller's answer is never answered
     * (tg_mcp_judge's rule); a batch has no one id. */
    if (env.kind != TG_MCP_REQUEST && env.kind != TG_MCP_NOTIFICATION)
        return fault(f, TG_MCP26_INVALID_REQUEST,
                     "invalid request: the body must be one JSON-RPC request or notification");
    b->kind = env.kind;
    b->id = env.id;
    b->method = env.method;
    long mn = tg_jstr_decode(buf, env.method, b->method_text, sizeof b->method_text);
    if (mn < 0) {
        b->method_long = true;
        b->method_text[0] = '\0';
    } else {
        b->method_len = (size_t)mn;
    }
    b->name_src = b->method_long ? NULL : name_source(b->method_text);
    if (env.params.type != TG_J_OBJECT)
        return 0;

    tg_jspan_t name = {0}, uri = {0}, meta = {0}, k, v;
    tg_jobj_iter_t it;
    int rc;
    tg_jobj_begin(&it, buf, env.params);
    static const char *const keys[] = {"name", "uri", "arguments", "_meta"};
    tg_jspan_t *slots[] = {&name, &uri, &b->arguments, &meta};
    while ((rc = tg_jobj_next(&it, &k, &v)) == 1)
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (key_is(buf, k, keys[i]) && take_once(slots[i], v) < 0)
                return fault(f, TG_MCP26_INVALID_REQUEST, "invalid request: params.%s repeats",
                             keys[i]);
    if (rc < 0) /* tg_mcp_scan validated the frame: not reached */
        return fault(f, TG_MCP26_INVALID_REQUEST, "invalid request: malformed params");
    if (b->name_src != NULL)
        b->name = strcmp(b->name_src, "params.uri") == 0 ? uri : name;
    if (meta.type == TG_J_OBJECT) {
        tg_jobj_begin(&it, buf, meta);
        while ((rc = tg_jobj_next(&it, &k, &v)) == 1)
            if (key_is(buf, k, TG_MCP26_META_VERSION) && take_once(&b->version, v) < 0)
                return fault(f, TG_MCP26_INVALID_REQUEST,
                             "invalid request: params._meta repeats " TG_MCP26_META_VERSION);
        if (rc < 0)
            return fault(f, TG_MCP26_INVALID_REQUEST, "invalid request: malformed params._meta");
    }
    return 0;
}

/* ---- era ---- */

int tg_mcp26_era(const char *hv, size_t hv_len, const tg_mcp26_body_t *b, tg_mcp26_fault_t *f)
{
    int hera = TG_MCP26_LEGACY; /* no header: 2025-03-26 (streamable-http.mdx) */
    if (hv != NULL) {
        hera = tg_mcp26_version_era(hv, hv_len);
        if (hera < 0)
            return unsupported(f, hv, hv_len);
    }
    if (b == NULL)
        return hera;
    /* versioning.mdx: "An initialize request selects legacy semantics". */
    if (!b->method_long && strcmp(b->method_text, "initialize") == 0)
        return TG_MCP26_LEGACY;

    if (b->version.type == TG_J_NONE) {
        /* schema.ts RequestMetaObject: the version is required on every
         * request; notifications carry none. */
        if (hera == TG_MCP26_MODERN && b->kind == TG_MCP_REQUEST)
            return MISMATCH(f, "MCP-Protocol-Version header but no params._meta "
                               "\"" TG_MCP26_META_VERSION "\" in the body");
        return hera;
    }
    char bv[TG_MCP26_VERSION_MAX + 1];
    long bl = -1;
    if (b->version.type == TG_J_STRING)
        bl = tg_jstr_decode(b->buf, b->version, bv, sizeof bv);
    if (hv == NULL) {
        if (b->version.type == TG_J_STRING) {
            if (bl < 0) /* over the bound: unsupported; echo its raw head */
                return unsupported(f, b->buf + b->version.off + 1, b->version.len - 2);
            if (tg_mcp26_version_era(bv, (size_t)bl) < 0)
                return unsupported(f, bv, (size_t)bl);
        }
        return MISMATCH(f, "MCP-Protocol-Version header missing");
    }
    if (bl < 0 || (size_t)bl != hv_len || memcmp(bv, hv, hv_len) != 0)
        return MISMATCH(f, "MCP-Protocol-Version header does not match params._meta "
                           "\"" TG_MCP26_META_VERSION "\"");
    return hera;
}

/* ---- header vs body ---- */

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool ascii_caseeq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

#define PARAM_PFX     "mcp-param-"
#define PARAM_PFX_LEN (sizeof(PARAM_PFX) - 1)

/* Header name <n> (<len> bytes) is Mcp-Param-<hdr>, case-insensitively. */
static bool is_param_hdr(const char *n, size_t len, const char *hdr)
{
    size_t hl = strlen(hdr);
    return len == PARAM_PFX_LEN + hl && ascii_caseeq(n, PARAM_PFX, PARAM_PFX_LEN) &&
           ascii_caseeq(n + PARAM_PFX_LEN, hdr, hl);
}

/* The property path of <p> as "a.b" into <out> (<cap> bytes), each byte
 * outside 0x21..0x7E written '?': schema text, not a value, but it goes
 * into a message. */
static const char *path_text(const tg_mcp26_xprop_t *p, char *out, size_t cap)
{
    size_t o = 0;
    for (unsigned d = 0; d < p->depth; d++) {
        if (d > 0 && o + 1 < cap)
            out[o++] = '.';
        for (const char *k = p->keys + p->key_off[d]; *k != '\0' && o + 1 < cap; k++)
            out[o++] = (unsigned char)*k > 0x20 && (unsigned char)*k < 0x7f ? *k : '?';
    }
    out[o] = '\0';
    return out;
}

/* The value at <p>'s path in params.arguments: 0 and <*v> (TG_J_NONE when
 * absent, or a step is not an object), or -1 when a key on the way
 * repeats. */
static int arg_at(const tg_mcp26_body_t *b, const tg_mcp26_xprop_t *p, tg_jspan_t *v)
{
    tg_jspan_t cur = b->arguments;
    for (unsigned d = 0; d < p->depth; d++) {
        if (cur.type != TG_J_OBJECT) {
            cur.type = TG_J_NONE;
            break;
        }
        const char *key = p->keys + p->key_off[d];
        tg_jspan_t k, val, found = {0};
        tg_jobj_iter_t it;
        int rc;
        tg_jobj_begin(&it, b->buf, cur);
        while ((rc = tg_jobj_next(&it, &k, &val)) == 1)
            if (key_is(b->buf, k, key) && take_once(&found, val) < 0)
                return -1;
        if (rc < 0)
            return -1;
        cur = found;
    }
    *v = cur;
    return 0;
}

/* Decode the body string <s> and compare it with <hv> (<hl> bytes). A body
 * string too long for the header bound (or holding \u0000) cannot be
 * equal. <tmp> has TG_MCP26_VALUE_MAX + 1 bytes. */
static bool str_matches(const char *buf, tg_jspan_t s, const char *hv, size_t hl, char *tmp)
{
    long n = tg_jstr_decode(buf, s, tmp, TG_MCP26_VALUE_MAX + 1);
    return n >= 0 && (size_t)n == hl && memcmp(tmp, hv, hl) == 0;
}

/* Check one annotated property; 0 or -EBADMSG with <f> filled. */
static int check_param(const tg_mcp26_hdrs_t *h, const tg_mcp26_body_t *b,
                       const tg_mcp26_xprop_t *p, char *hbuf, char *tmp, tg_mcp26_fault_t *f)
{
    char path[96];
    const tg_mcp26_hdr_t *hd = NULL;
    for (size_t j = 0; j < h->nparams; j++) {
        const tg_mcp26_hdr_t *x = &h->params[j];
        if (x->name == NULL || !is_param_hdr(x->name, x->name_len, p->header))
            continue;
        if (hd != NULL)
            return MISMATCH(f, "Mcp-Param-%s header repeated", p->header);
        hd = x;
    }
    tg_jspan_t v;
    if (arg_at(b, p, &v) < 0)
        return MISMATCH(f, "params.arguments.%s: a key on the way repeats",
                        path_text(p, path, sizeof path));
    if (v.type == TG_J_NONE || v.type == TG_J_NULL) {
        /* streamable-http.mdx: null or absent, the client omits the header */
        if (hd != NULL && hd->value != NULL)
            return MISMATCH(f, "Mcp-Param-%s header without a value in params.arguments.%s",
                            p->header, path_text(p, path, sizeof path));
        return 0;
    }
    if (v.type != TG_J_STRING && v.type != TG_J_NUMBER && v.type != TG_J_TRUE &&
        v.type != TG_J_FALSE)
        return MISMATCH(f, "params.arguments.%s is not a string, integer or boolean",
                        path_text(p, path, sizeof path));
    if (hd == NULL || hd->value == NULL)
        return MISMATCH(f, "Mcp-Param-%s header missing for params.arguments.%s", p->header,
                        path_text(p, path, sizeof path));
    size_t hl;
    if (tg_mcp26_value_decode(hd->value, hd->value_len, hbuf, TG_MCP26_VALUE_MAX + 1, &hl) < 0)
        return MISMATCH(f, "Mcp-Param-%s header value is malformed", p->header);
    bool eq;
    if (v.type == TG_J_STRING) {
        eq = str_matches(b->buf, v, hbuf, hl, tmp);
    } else if (v.type == TG_J_NUMBER) {
        num_t bn, hn;
        if (num_parse(b->buf + v.off, v.len, &bn) < 0 ||
            (p->type == TG_MCP26_T_INTEGER && !num_safe_int(&bn)))
            return MISMATCH(f, "params.arguments.%s is not an integer within +-(2^53-1)",
                            path_text(p, path, sizeof path));
        /* streamable-http.mdx "Server Validation": numerically */
        eq = num_parse(hbuf, hl, &hn) == 0 && num_eq(&bn, &hn);
    } else {
        const char *lit = v.type == TG_J_TRUE ? "true" : "false";
        eq = hl == strlen(lit) && memcmp(hbuf, lit, hl) == 0;
    }
    if (!eq)
        return MISMATCH(f, "Mcp-Param-%s header does not match params.arguments.%s", p->header,
                        path_text(p, path, sizeof path));
    return 0;
}

int tg_mcp26_check(const tg_mcp26_hdrs_t *h, const tg_mcp26_body_t *b, const tg_mcp26_xmap_t *map,
                   tg_mcp26_fault_t *f)
{
    if (h->nparams > TG_MCP26_PARAM_HDRS_MAX) {
        fault(f, TG_MCP26_INVALID_REQUEST, "invalid request: more than %d Mcp-Param headers",
              TG_MCP26_PARAM_HDRS_MAX);
        return -E2BIG;
    }
    bool request = b->kind == TG_MCP_REQUEST;

    /* Mcp-Method: "All requests" (streamable-http.mdx "Standard Request
     * Headers"); values are case-sensitive ("Case Sensitivity"). */
    if (h->method == NULL) {
        if (request)
            return MISMATCH(f, "Mcp-Method header missing");
    } else if (b->method_long || h->method_len != b->method_len ||
               memcmp(h->method, b->method_text, b->method_len) != 0) {
        return MISMATCH(f, "Mcp-Method header does not match the body's method");
    }

    /* The two value buffers: a header value decoded, a body string decoded. */
    char hbuf[TG_MCP26_VALUE_MAX + 1], tmp[TG_MCP26_VALUE_MAX + 1];

    if (b->name_src != NULL) {
        if (h->name == NULL) {
            if (request)
                return MISMATCH(f, "Mcp-Name header missing (required for %s)", b->method_text);
        } else {
            size_t hl;
            if (tg_mcp26_value_decode(h->name, h->name_len, hbuf, sizeof hbuf, &hl) < 0)
                return MISMATCH(f, "Mcp-Name header value is malformed");
            if (b->name.type != TG_J_STRING)
                return MISMATCH(f, "Mcp-Name header but no string %s in the body", b->name_src);
            if (!str_matches(b->buf, b->name, hbuf, hl, tmp))
                return MISMATCH(f, "Mcp-Name header does not match %s", b->name_src);
        }
    } else if (h->name != NULL) {
        /* Nothing in the body to validate it against, and an intermediary
         * might route on it: refused rather than trusted. */
        return MISMATCH(f, "Mcp-Name header on a method that has no name to mirror");
    }

    if (map == NULL || b->method_long || strcmp(b->method_text, "tools/call") != 0)
        return 0;
    for (size_t i = 0; i < map->n; i++) {
        int rc = check_param(h, b, &map->p[i], hbuf, tmp, f);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- x-mcp-header map ---- */

typedef struct xctx {
    tg_mcp26_xmap_t *map;
    char *msg;
    size_t cap;
    const char *keys[TG_MCP26_PATH_DEPTH_MAX]; /* the properties keys down to here */
    unsigned depth;                            /* keys on the way (may pass the bound) */
} xctx_t;

__attribute__((format(printf, 3, 4))) static int xfail(xctx_t *c, int err, const char *fmt, ...)
{
    if (c->msg != NULL && c->cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, c->cap, fmt, ap);
        va_end(ap);
    }
    return err;
}

/* RFC 9110 5.6.2 tchar */
static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The path so far as "a.b" (schema text; bytes outside 0x21..0x7E as '?'). */
static const char *xpath(const xctx_t *c, char *out, size_t cap)
{
    size_t o = 0;
    unsigned n = c->depth < TG_MCP26_PATH_DEPTH_MAX ? c->depth : TG_MCP26_PATH_DEPTH_MAX;
    for (unsigned d = 0; d < n; d++) {
        if (d > 0 && o + 1 < cap)
            out[o++] = '.';
        for (const char *k = c->keys[d]; *k != '\0' && o + 1 < cap; k++)
            out[o++] = (unsigned char)*k > 0x20 && (unsigned char)*k < 0x7f ? *k : '?';
    }
    out[o] = '\0';
    return out;
}

static int prim_type(const char *t)
{
    if (strcmp(t, "string") == 0)
        return TG_MCP26_T_STRING;
    if (strcmp(t, "integer") == 0)
        return TG_MCP26_T_INTEGER;
    if (strcmp(t, "boolean") == 0)
        return TG_MCP26_T_BOOLEAN;
    return 0;
}

/* The primitive type of schema <s>: its "type", a string, or an array of
 * one primitive and "null"; 0 when it has none of these. */
static int schema_type(const json_t *s)
{
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t))
        return prim_type(json_string_value(t));
    if (!json_is_array(t) || json_array_size(t) != 2)
        return 0;
    const char *a = json_string_value(json_array_get(t, 0));
    const char *b = json_string_value(json_array_get(t, 1));
    if (a == NULL || b == NULL)
        return 0;
    if (strcmp(a, "null") == 0)
        return prim_type(b);
    if (strcmp(b, "null") == 0)
        return prim_type(a);
    return 0;
}

/* The annotation <x> on schema <s>, met on the way <via> (NULL: a chain of
 * properties keys only). */
static int xadd(xctx_t *c, const json_t *s, const json_t *x, const char *via)
{
    char path[128];
    if (via != NULL)
        return xfail(c, -EINVAL,
                     "an x-mcp-header under \"%s\" is not statically reachable from the "
                     "inputSchema root (only a chain of properties keys is)",
                     via);
    if (c->depth == 0)
        return xfail(c, -EINVAL, "x-mcp-header on the inputSchema root, not on a property");
    if (c->depth > TG_MCP26_PATH_DEPTH_MAX)
        return xfail(c, -E2BIG, "x-mcp-header on property %s... deeper than %d keys",
                     xpath(c, path, sizeof path), TG_MCP26_PATH_DEPTH_MAX);
    xpath(c, path, sizeof path);
    const char *h = json_string_value(x);
    size_t hl = h != NULL ? json_string_length(x) : 0;
    if (hl == 0)
        return xfail(c, -EINVAL, "x-mcp-header of property %s is not a non-empty string", path);
    if (hl > TG_MCP26_PARAM_NAME_MAX)
        return xfail(c, -E2BIG, "x-mcp-header of property %s is longer than %d bytes", path,
                     TG_MCP26_PARAM_NAME_MAX);
    for (size_t i = 0; i < hl; i++)
        if (!is_tchar((unsigned char)h[i]))
            return xfail(c, -EINVAL,
                         "x-mcp-header of property %s is not an HTTP token (RFC 9110 tchar)", path);
    int type = schema_type(s);
    if (type == 0)
        return xfail(c, -EINVAL,
                     "x-mcp-header on property %s, whose type is not string, integer or boolean",
                     path);
    tg_mcp26_xmap_t *m = c->map;
    for (size_t i = 0; i < m->n; i++)
        if (strlen(m->p[i].header) == hl && ascii_caseeq(m->p[i].header, h, hl)) {
            char other[96];
            return xfail(c, -EINVAL,
                         "x-mcp-header \"%s\" of property %s repeats that of property %s "
                         "(case-insensitively)",
                         h, path, path_text(&m->p[i], other, sizeof other));
        }
    if (m->n >= TG_MCP26_XHDR_MAX)
        return xfail(c, -E2BIG, "more than %d x-mcp-header annotations", TG_MCP26_XHDR_MAX);
    tg_mcp26_xprop_t *p = &m->p[m->n];
    memset(p, 0, sizeof *p);
    size_t o = 0;
    for (unsigned d = 0; d < c->depth; d++) {
        size_t kl = strlen(c->keys[d]);
        if (o + kl + 1 > sizeof p->keys)
            return xfail(c, -E2BIG, "the path of property %s is longer than %d bytes", path,
                         TG_MCP26_PATH_BYTES_MAX);
        p->key_off[d] = (uint16_t)o;
        memcpy(p->keys + o, c->keys[d], kl + 1);
        o += kl + 1;
    }
    memcpy(p->header, h, hl);
    p->header[hl] = '\0';
    p->type = (uint8_t)type;
    p->depth = (uint8_t)c->depth;
    m->n++;
    return 0;
}

static int xwalk(xctx_t *c, const json_t *s, unsigned level, const char *via);

/* <v> is a schema, or an array of schemas. */
static int xwalk_one_or_array(xctx_t *c, const json_t *v, unsigned level, const char *via)
{
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
        {
            int rc = xwalk(c, e, level, via);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    return xwalk(c, v, level, via);
}

/* <v> maps names to schemas. */
static int xwalk_map(xctx_t *c, const json_t *v, unsigned level, const char *via)
{
    if (!json_is_object(v))
        return 0;
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)v, k, e)
    {
        int rc = xwalk(c, e, level, via);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Keywords whose value is a schema or an array of schemas (JSON Schema
 * 2020-12 and draft-07); every other keyword's value is not searched. */
static const char *const kw_schema[] = {
    /* clang-format off */
    "items", "additionalItems", "additionalProperties", "unevaluatedItems",
    "unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else",
    "allOf", "anyOf", "oneOf", "prefixItems", "contentSchema", NULL,
    /* clang-format on */
};
/* Keywords whose value maps names to schemas ("properties" aside). */
static const char *const kw_map[] = {
    "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies", NULL,
};

static bool in_list(const char *const *l, const char *k)
{
    for (; *l != NULL; l++)
        if (strcmp(*l, k) == 0)
            return true;
    return false;
}

static int xwalk(xctx_t *c, const json_t *s, unsigned level, const char *via)
{
    if (!json_is_object(s))
        return 0; /* true/false schemas, or not a schema */
    if (level > TG_MCP26_SCHEMA_DEPTH_MAX)
        return xfail(c, -E2BIG, "inputSchema nested deeper than %d levels",
                     TG_MCP26_SCHEMA_DEPTH_MAX);
    const json_t *x = json_object_get(s, "x-mcp-header");
    if (x != NULL) {
        int rc = xadd(c, s, x, via);
        if (rc < 0)
            return rc;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        int rc = 0;
        if (strcmp(k, "properties") == 0) {
            if (!json_is_object(v))
                continue;
            const char *pk;
            json_t *ps;
            json_object_foreach(v, pk, ps)
            {
                if (c->depth < TG_MCP26_PATH_DEPTH_MAX)
                    c->keys[c->depth] = pk;
                c->depth++;
                rc = xwalk(c, ps, level + 1, via);
                c->depth--;
                if (rc < 0)
                    return rc;
            }
        } else if (in_list(kw_schema, k)) {
            rc = xwalk_one_or_array(c, v, level + 1, via != NULL ? via : k);
        } else if (in_list(kw_map, k)) {
            rc = xwalk_map(c, v, level + 1, via != NULL ? via : k);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int tg_mcp26_xmap_build(const struct json_t *tool, tg_mcp26_xmap_t *map, char *msg, size_t cap)
{
    xctx_t c = {.map = map, .msg = msg, .cap = cap};
    map->n = 0;
    if (!json_is_object(tool))
        return xfail(&c, -EINVAL, "the tool is not an object");
    const json_t *schema = json_object_get(tool, "inputSchema");
    int rc = xwalk(&c, schema, 0, NULL);
    if (rc < 0)
        map->n = 0;
    return rc;
}
