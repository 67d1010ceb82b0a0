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
#include "router/call/denial.h"

#include <errno.h>
#include <string.h>

#include "audit/audit.h"
#include "config/jsonw.h"

/* A NUL-terminated config string, escaped (no quotes). */
static void put_esc(tg_jw_t *w, const char *s)
{
    tg_jw_esc(w, s, strlen(s));
}

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
    [TG_DENY_NOT_ALLOWED] = {"tool_not_allowed", "tool not allowed", -32069, false},
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

/* ,"key":"value" (escaped) when <v> is set. */
static void field_str(tg_jw_t *w, const char *key, const char *v)
{
    if (!v)
        return;
    tg_jw_lit(w, ",\"");
    tg_jw_lit(w, key);
    tg_jw_lit(w, "\":\"");
    put_esc(w, v);
    tg_jw_lit(w, "\"");
}

static void field_num(tg_jw_t *w, const char *key, int64_t v)
{
    if (v == TG_DENY_ABSENT)
        return;
    tg_jw_lit(w, ",\"");
    tg_jw_lit(w, key);
    tg_jw_lit(w, "\":");
    tg_jw_i64(w, v);
}

static void put_head(tg_jw_t *w, const char *id, size_t id_len, int code)
{
    tg_jw_lit(w, "{\"jsonrpc\":\"2.0\",\"id\":");
    /* The id is a span the envelope scanner validated: copied as it came,
     * so the caller matches the answer to its own request byte for byte. */
    if (id && id_len)
        tg_jw_raw(w, id, id_len);
    else
        tg_jw_lit(w, "null");
    tg_jw_lit(w, ",\"error\":{\"code\":");
    tg_jw_i64(w, code);
    tg_jw_lit(w, ",\"message\":\"");
}

/* End the line: '\n' then NUL. */
static long finish(tg_jw_t *w)
{
    tg_jw_raw(w, "\n", 1);
    return tg_jw_end(w);
}

/* "5.2s", "250ms", "3s": a person's idea of a wait, rounded up so that
 * retrying at the printed time is never early. */
static void put_wait(tg_jw_t *w, int64_t ms)
{
    if (ms < 1000) {
        tg_jw_i64(w, ms < 0 ? 0 : ms);
        tg_jw_lit(w, "ms");
        return;
    }
    int64_t tenths = ms / 100 + (ms % 100 != 0);
    tg_jw_i64(w, tenths / 10);
    if (tenths % 10) {
        tg_jw_lit(w, ".");
        tg_jw_i64(w, tenths % 10);
    }
    tg_jw_lit(w, "s");
}

static bool has(int64_t v)
{
    return v != TG_DENY_ABSENT;
}

/* " <unit>" when there is one. */
static void put_unit(tg_jw_t *w, const tg_denial_t *d)
{
    if (d->unit) {
        tg_jw_lit(w, " ");
        put_esc(w, d->unit);
    }
}

/* The default phrase per code when the caller gave none. Returns false
 * when there is nothing to say beyond the title. */
static bool put_default_detail(tg_jw_t *w, const tg_denial_t *d)
{
    bool oc = has(d->observed) && has(d->cap);
    switch (d->code) {
    case TG_DENY_CONCURRENCY:
        if (!oc)
            return false;
        tg_jw_i64(w, d->observed);
        if (d->limit && strcmp(d->limit, "queue") == 0)
            tg_jw_lit(w, " waiting, queue full at ");
        else
            tg_jw_lit(w, " in flight, cap ");
        tg_jw_i64(w, d->cap);
        put_unit(w, d);
        return true;
    case TG_DENY_TIMEOUT:
        if (!has(d->observed) && !has(d->cap))
            return false;
        tg_jw_lit(w, "no result within ");
        tg_jw_i64(w, has(d->cap) ? d->cap : d->observed);
        tg_jw_lit(w, " ms");
        return true;
    case TG_DENY_FRAME:
        if (!has(d->cap))
            return false;
        tg_jw_lit(w, "frame ");
        if (has(d->observed)) {
            tg_jw_lit(w, "of ");
            tg_jw_i64(w, d->observed);
            tg_jw_lit(w, " bytes ");
        }
        tg_jw_lit(w, "> ");
        tg_jw_i64(w, d->cap);
        tg_jw_lit(w, " bytes");
        return true;
    case TG_DENY_UNAVAILABLE:
        tg_jw_lit(w, "agent not running");
        return true;
    case TG_DENY_STORE:
        tg_jw_lit(w, "shared rate store did not answer");
        return true;
    case TG_DENY_SHUTTING_DOWN:
        tg_jw_lit(w, "no new calls accepted");
        return true;
    case TG_DENY_RESOURCE:
        if (d->limit && oc) {
            put_esc(w, d->limit);
            tg_jw_lit(w, " ");
        }
        /* fall through */
    default:
        if (!oc)
            return false;
        tg_jw_i64(w, d->observed);
        tg_jw_lit(w, " > ");
        tg_jw_i64(w, d->cap);
        put_unit(w, d);
        return true;
    }
}

static void put_message(tg_jw_t *w, const tg_denial_t *d, bool tool_ok)
{
    /* The default detail is rendered aside first, to know whether there
     * is one (it holds only numbers and short config words). */
    char dbuf[256];
    tg_jw_t dw;
    tg_jw_init(&dw, dbuf, sizeof dbuf);
    if (!d->detail && (!put_default_detail(&dw, d) || dw.err))
        dw.len = 0;
    bool detail = d->detail || dw.len > 0;

    tg_jw_lit(w, deny_tab[d->code].title);
    if (d->agent || d->tool || detail)
        tg_jw_lit(w, ": ");
    if (d->agent) {
        tg_jw_lit(w, "agent '");
        put_esc(w, d->agent);
        tg_jw_lit(w, "'");
    }
    if (d->tool) {
        tg_jw_lit(w, d->agent ? " tool '" : "tool '");
        if (tool_ok)
            tg_jw_esc(w, d->tool, d->tool_len);
        else
            tg_jw_lit(w, "invalid");
        tg_jw_lit(w, "'");
    }
    if (detail) {
        if (d->agent || d->tool)
            tg_jw_lit(w, " ");
        if (d->detail)
            put_esc(w, d->detail);
        else
            tg_jw_raw(w, dbuf, dw.len); /* already escaped */
    }
    if (has(d->retry_after_ms)) {
        tg_jw_lit(w, "; retry in ");
        put_wait(w, d->retry_after_ms);
    }
    if (d->config_path) {
        tg_jw_lit(w, " (raise ");
        put_esc(w, d->config_path);
        tg_jw_lit(w, ")");
    }
}

/* The structured fields: MCP error.data, OpenSentience error.details.
 * Writes {"code":..., ...} (the object, braces included). */
static void put_fields(tg_jw_t *w, const tg_denial_t *d, bool tool_ok)
{
    tg_jw_lit(w, "{\"code\":\"");
    tg_jw_lit(w, deny_tab[d->code].name);
    tg_jw_lit(w, "\"");
    field_str(w, "limit", d->limit);
    field_str(w, "scope", d->scope);
    field_str(w, "agent", d->agent);
    if (d->tool) {
        tg_jw_lit(w, ",\"tool\":\"");
        if (tool_ok)
            tg_jw_esc(w, d->tool, d->tool_len);
        else
            tg_jw_lit(w, "invalid");
        tg_jw_lit(w, "\"");
    }
    field_num(w, "observed", d->observed);
    field_num(w, "cap", d->cap);
    field_str(w, "unit", d->unit);
    field_num(w, "retry_after_ms", d->retry_after_ms);
    field_str(w, "config_path", d->config_path);
    field_str(w, "request_id", d->request_id);
    tg_jw_lit(w, "}");
}

long tg_denial_mcp(char *buf, size_t cap, const char *id, size_t id_len, const tg_denial_t *d)
{
    if (!code_ok(d->code))
        return -EINVAL;
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    bool tool_ok = d->tool && tg_audit_safe_str(d->tool, d->tool_len);

    put_head(&w, id, id_len, deny_tab[d->code].rpc);
    put_message(&w, d, tool_ok);
    tg_jw_lit(&w, "\",\"data\":");
    put_fields(&w, d, tool_ok);
    tg_jw_lit(&w, "}}");
    return finish(&w);
}

long tg_denial_os(char *buf, size_t cap, const char *call_id, size_t call_id_len,
                  const tg_denial_t *d)
{
    if (!code_ok(d->code) || d->os == NULL)
        return -EINVAL;
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    bool tool_ok = d->tool && tg_audit_safe_str(d->tool, d->tool_len);

    if (tg_os_put_head(&w, d->os, "agent.tool.result") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"call_id\":");
    /* A string span the envelope scanner validated, copied as it came so
     * the caller matches the result to its call byte for byte; null when
     * it could not be read (the head of an over-cap frame is never read). */
    if (call_id && call_id_len)
        tg_jw_raw(&w, call_id, call_id_len);
    else
        tg_jw_lit(&w, "null");
    tg_jw_lit(&w, ",\"status\":\"failed\"},\"error\":{\"code\":\"");
    tg_jw_lit(&w, deny_tab[d->code].name);
    tg_jw_lit(&w, "\",\"message\":\"");
    put_message(&w, d, tool_ok);
    tg_jw_lit(&w, "\",\"details\":");
    put_fields(&w, d, tool_ok);
    tg_jw_lit(&w, deny_tab[d->code].retryable ? ",\"retryable\":true" : ",\"retryable\":false");
    tg_jw_lit(&w, ",\"where\":\"" TG_OS_WHERE "\"}}");
    return tg_jw_end(&w);
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
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    put_head(&w, id, id_len, code);
    put_esc(&w, message ? message : rpc_default_message(code));
    tg_jw_lit(&w, "\"}}");
    return finish(&w);
}
