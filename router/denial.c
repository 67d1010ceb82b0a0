/* Structured denials (see denial.h and DESIGN.md "Denials").
 *
 * The message is built from the same fields as data, in one template:
 *   <title>: agent '<agent>' tool '<tool>' <detail>; retry in <t> (raise <config_path>)
 * where every part but the title is left out when it does not apply, and
 * <detail> is the caller's toolgate-made phrase or a default per code made
 * of observed/cap/unit. The caller's tool name is the only caller string
 * that can reach the line and it is written only when tg_audit_safe_str
 * accepts it; every string is JSON-escaped anyway, so a bad config name
 * cannot break the line either.
 */
#include "router/denial.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"

static const struct {
    const char *name;
    const char *title;
    int rpc;
    bool retryable;
} deny_tab[TG_DENY__COUNT] = {
    [TG_DENY_RATE] = {"rate_limit_exceeded", "rate limit exceeded", -32060, true},
    [TG_DENY_CONCURRENCY] = {"concurrency_limit_exceeded", "concurrency limit exceeded", -32061, true},
    [TG_DENY_TIMEOUT] = {"timeout", "timeout", -32062, true},
    [TG_DENY_FRAME] = {"frame_too_large", "frame too large", -32063, false},
    [TG_DENY_UNAVAILABLE] = {"agent_unavailable", "agent unavailable", -32064, true},
    [TG_DENY_RESOURCE] = {"resource_limit_exceeded", "resource limit exceeded", -32065, false},
    [TG_DENY_CALLER] = {"caller_not_allowed", "caller not allowed", -32066, false},
    [TG_DENY_STORE] = {"rate_store_unavailable", "rate store unavailable", -32067, true},
    [TG_DENY_SHUTTING_DOWN] = {"shutting_down", "shutting down", -32068, true},
};

static bool code_ok(tg_deny_code_t c)
{
    return (unsigned)c < TG_DENY__COUNT;
}

const char *tg_deny_name(tg_deny_code_t c)
{
    return code_ok(c) ? deny_tab[c].name : "internal_error";
}

int tg_deny_rpc_code(tg_deny_code_t c)
{
    return code_ok(c) ? deny_tab[c].rpc : -32603;
}

bool tg_deny_retryable(tg_deny_code_t c)
{
    return code_ok(c) && deny_tab[c].retryable;
}

/* ---- bounded writer: once full, writes are dropped and <full> stays ---- */

typedef struct wr {
    char *buf;
    size_t cap;
    size_t len;
    bool full;
} wr_t;

static void put(wr_t *w, const char *s, size_t n)
{
    if (w->full || w->cap - w->len < n + 1) { /* keep room for the NUL */
        w->full = true;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void puts_lit(wr_t *w, const char *s)
{
    put(w, s, strlen(s));
}

static void put_i64(wr_t *w, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRId64, v);
    put(w, t, (size_t)n);
}

/* Length of the valid UTF-8 sequence at s[0] (s[0] >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n <= need)
        return 0;
    for (size_t k = 1; k <= need; k++) {
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return 0;
    }
    return need + 1;
}

/* String contents, JSON-escaped; invalid UTF-8 becomes U+FFFD so the line
 * always parses. */
static void put_esc_n(wr_t *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        put(w, s + i, run - i);
        i = run;
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c >= 0x80) {
            size_t k = utf8_len(p + i, n - i);
            if (k) {
                put(w, s + i, k);
                i += k;
            } else {
                puts_lit(w, "\\ufffd");
                i++;
            }
            continue;
        }
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t el = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            e[1] = 'u';
            e[2] = '0';
            e[3] = '0';
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            el = 6;
            break;
        }
        put(w, e, el);
        i++;
    }
}

static void put_esc(wr_t *w, const char *s)
{
    put_esc_n(w, s, strlen(s));
}

/* ,"key":"value" (escaped) when <v> is set. */
static void field_str(wr_t *w, const char *key, const char *v)
{
    if (!v)
        return;
    puts_lit(w, ",\"");
    puts_lit(w, key);
    puts_lit(w, "\":\"");
    put_esc(w, v);
    puts_lit(w, "\"");
}

static void field_num(wr_t *w, const char *key, int64_t v)
{
    if (v == TG_DENY_ABSENT)
        return;
    puts_lit(w, ",\"");
    puts_lit(w, key);
    puts_lit(w, "\":");
    put_i64(w, v);
}

static void put_head(wr_t *w, const char *id, size_t id_len, int code)
{
    puts_lit(w, "{\"jsonrpc\":\"2.0\",\"id\":");
    /* The id is a span the envelope scanner validated: copied as it came,
     * so the caller matches the answer to its own request byte for byte. */
    if (id && id_len)
        put(w, id, id_len);
    else
        puts_lit(w, "null");
    puts_lit(w, ",\"error\":{\"code\":");
    put_i64(w, code);
    puts_lit(w, ",\"message\":\"");
}

static long finish(wr_t *w)
{
    put(w, "\n", 1);
    if (w->full)
        return -ENOSPC;
    w->buf[w->len] = '\0';
    return (long)w->len;
}

/* "5.2s", "250ms", "3s": a person's idea of a wait, rounded up so that
 * retrying at the printed time is never early. */
static void put_wait(wr_t *w, int64_t ms)
{
    if (ms < 1000) {
        put_i64(w, ms < 0 ? 0 : ms);
        puts_lit(w, "ms");
        return;
    }
    int64_t tenths = ms / 100 + (ms % 100 != 0);
    put_i64(w, tenths / 10);
    if (tenths % 10) {
        puts_lit(w, ".");
        put_i64(w, tenths % 10);
    }
    puts_lit(w, "s");
}

static bool has(int64_t v)
{
    return v != TG_DENY_ABSENT;
}

/* " <unit>" when there is one. */
static void put_unit(wr_t *w, const tg_denial_t *d)
{
    if (d->unit) {
        puts_lit(w, " ");
        put_esc(w, d->unit);
    }
}

/* The default phrase per code when the caller gave none. Returns false
 * when there is nothing to say beyond the title. */
static bool put_default_detail(wr_t *w, const tg_denial_t *d)
{
    bool oc = has(d->observed) && has(d->cap);
    switch (d->code) {
    case TG_DENY_CONCURRENCY:
        if (!oc)
            return false;
        put_i64(w, d->observed);
        if (d->limit && strcmp(d->limit, "queue") == 0)
            puts_lit(w, " waiting, queue full at ");
        else
            puts_lit(w, " in flight, cap ");
        put_i64(w, d->cap);
        put_unit(w, d);
        return true;
    case TG_DENY_TIMEOUT:
        if (!has(d->observed) && !has(d->cap))
            return false;
        puts_lit(w, "no result within ");
        put_i64(w, has(d->cap) ? d->cap : d->observed);
        puts_lit(w, " ms");
        return true;
    case TG_DENY_FRAME:
        if (!has(d->cap))
            return false;
        puts_lit(w, "frame ");
        if (has(d->observed)) {
            puts_lit(w, "of ");
            put_i64(w, d->observed);
            puts_lit(w, " bytes ");
        }
        puts_lit(w, "> ");
        put_i64(w, d->cap);
        puts_lit(w, " bytes");
        return true;
    case TG_DENY_UNAVAILABLE:
        puts_lit(w, "agent not running");
        return true;
    case TG_DENY_STORE:
        puts_lit(w, "shared rate store did not answer");
        return true;
    case TG_DENY_SHUTTING_DOWN:
        puts_lit(w, "no new calls accepted");
        return true;
    case TG_DENY_RESOURCE:
        if (d->limit && oc) {
            put_esc(w, d->limit);
            puts_lit(w, " ");
        }
        /* fall through */
    default:
        if (!oc)
            return false;
        put_i64(w, d->observed);
        puts_lit(w, " > ");
        put_i64(w, d->cap);
        put_unit(w, d);
        return true;
    }
}

static void put_message(wr_t *w, const tg_denial_t *d, bool tool_ok)
{
    /* The default detail is rendered aside first, to know whether there
     * is one (it holds only numbers and short config words). */
    char dbuf[256];
    wr_t dw = {.buf = dbuf, .cap = sizeof dbuf, .len = 0, .full = false};
    if (!d->detail && (!put_default_detail(&dw, d) || dw.full))
        dw.len = 0;
    bool detail = d->detail || dw.len > 0;

    puts_lit(w, deny_tab[d->code].title);
    if (d->agent || d->tool || detail)
        puts_lit(w, ": ");
    if (d->agent) {
        puts_lit(w, "agent '");
        put_esc(w, d->agent);
        puts_lit(w, "'");
    }
    if (d->tool) {
        puts_lit(w, d->agent ? " tool '" : "tool '");
        if (tool_ok)
            put_esc_n(w, d->tool, d->tool_len);
        else
            puts_lit(w, "invalid");
        puts_lit(w, "'");
    }
    if (detail) {
        if (d->agent || d->tool)
            puts_lit(w, " ");
        if (d->detail)
            put_esc(w, d->detail);
        else
            put(w, dbuf, dw.len); /* already escaped */
    }
    if (has(d->retry_after_ms)) {
        puts_lit(w, "; retry in ");
        put_wait(w, d->retry_after_ms);
    }
    if (d->config_path) {
        puts_lit(w, " (raise ");
        put_esc(w, d->config_path);
        puts_lit(w, ")");
    }
}

long tg_denial_mcp(char *buf, size_t cap, const char *id, size_t id_len, const tg_denial_t *d)
{
    if (!code_ok(d->code))
        return -EINVAL;
    wr_t w = {.buf = buf, .cap = cap, .len = 0, .full = cap == 0};
    bool tool_ok = d->tool && tg_audit_safe_str(d->tool, d->tool_len);

    put_head(&w, id, id_len, deny_tab[d->code].rpc);
    put_message(&w, d, tool_ok);
    puts_lit(&w, "\",\"data\":{\"code\":\"");
    puts_lit(&w, deny_tab[d->code].name);
    puts_lit(&w, "\"");
    field_str(&w, "limit", d->limit);
    field_str(&w, "scope", d->scope);
    field_str(&w, "agent", d->agent);
    if (d->tool) {
        puts_lit(&w, ",\"tool\":\"");
        if (tool_ok)
            put_esc_n(&w, d->tool, d->tool_len);
        else
            puts_lit(&w, "invalid");
        puts_lit(&w, "\"");
    }
    field_num(&w, "observed", d->observed);
    field_num(&w, "cap", d->cap);
    field_str(&w, "unit", d->unit);
    field_num(&w, "retry_after_ms", d->retry_after_ms);
    field_str(&w, "config_path", d->config_path);
    field_str(&w, "request_id", d->request_id);
    puts_lit(&w, "}}}");
    return finish(&w);
}

static const char *rpc_default_message(int code)
{
    switch (code) {
    case -32700: return "Parse error";
    case -32600: return "Invalid Request";
    case -32601: return "Method not found";
    case -32602: return "Invalid params";
    case -32603: return "Internal error";
    default: return "error";
    }
}

long tg_rpc_error(char *buf, size_t cap, const char *id, size_t id_len, int code,
                  const char *message)
{
    wr_t w = {.buf = buf, .cap = cap, .len = 0, .full = cap == 0};
    put_head(&w, id, id_len, code);
    put_esc(&w, message ? message : rpc_default_message(code));
    puts_lit(&w, "\"}}");
    return finish(&w);
}
