/* OpenSentience messages toolgate writes (see osmsg.h). */
#include "router/codec/osmsg.h"

#include <errno.h>

#include "router/codec/lenpfx.h"

/* A raw value that must be a JSON string span: it is copied into the
 * message unchanged, so check at least that it is delimited as one. */
static bool raw_is(tg_os_raw_t r, char open, char close)
{
    return r.p != NULL && r.len >= 2 && r.p[0] == open && r.p[r.len - 1] == close;
}

static bool raw_string(tg_os_raw_t r)
{
    return raw_is(r, '"', '"');
}

/* ,"key":<raw> when <r> is present; -EINVAL when it is not a string. */
static int echo(tg_jw_t *w, const char *key, tg_os_raw_t r)
{
    if (r.p == NULL)
        return 0;
    if (!raw_string(r))
        return -EINVAL;
    tg_jw_lit(w, ",\"");
    tg_jw_lit(w, key);
    tg_jw_lit(w, "\":");
    tg_jw_raw(w, r.p, r.len);
    return 0;
}

int tg_os_put_head(tg_jw_t *w, const tg_os_hdr_t *h, const char *type)
{
    if (h == NULL || h->id == NULL || type == NULL)
        return -EINVAL;
    tg_jw_lit(w, "{\"v\":1,\"type\":");
    tg_jw_str(w, type);
    tg_jw_lit(w, ",\"id\":");
    tg_jw_str(w, h->id);
    tg_jw_lit(w, ",\"ts\":");
    tg_jw_ts(w, h->ts_ms);
    if (echo(w, "in_reply_to", h->in_reply_to) < 0 || echo(w, "request_id", h->request_id) < 0 ||
        echo(w, "correlation_id", h->correlation_id) < 0 ||
        echo(w, "causation_id", h->causation_id) < 0)
        return -EINVAL;
    return 0;
}

/* "error":{"code":..,"message":..,"retryable":..,"where":"toolgate.router"} */
static void put_error(tg_jw_t *w, const char *code, const char *message, bool retryable)
{
    tg_jw_lit(w, "\"error\":{\"code\":");
    tg_jw_str(w, code);
    tg_jw_lit(w, ",\"message\":");
    tg_jw_str(w, message);
    tg_jw_lit(w, retryable ? ",\"retryable\":true" : ",\"retryable\":false");
    tg_jw_lit(w, ",\"where\":\"" TG_OS_WHERE "\"}");
}

long tg_os_enc_welcome(char *buf, size_t cap, const tg_os_hdr_t *h, const tg_os_welcome_t *wel)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (wel->session_id == NULL || tg_os_put_head(&w, h, "core.welcome") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"accepted_version\":");
    tg_jw_u64(&w, wel->accepted_version);
    tg_jw_lit(&w, ",\"session_id\":");
    tg_jw_str(&w, wel->session_id);
    tg_jw_lit(&w, ",\"heartbeat_interval_ms\":");
    tg_jw_u64(&w, wel->heartbeat_interval_ms);
    tg_jw_lit(&w, ",\"max_frame_bytes\":");
    tg_jw_u64(&w, wel->max_frame_bytes);
    if (wel->core_version || wel->instance_id) {
        tg_jw_lit(&w, ",\"server\":{");
        if (wel->core_version) {
            tg_jw_lit(&w, "\"core_version\":");
            tg_jw_str(&w, wel->core_version);
        }
        if (wel->instance_id) {
            tg_jw_lit(&w, wel->core_version ? ",\"instance_id\":" : "\"instance_id\":");
            tg_jw_str(&w, wel->instance_id);
        }
        tg_jw_lit(&w, "}");
    }
    tg_jw_lit(&w, "}}");
    return tg_jw_end(&w);
}

long tg_os_enc_error(char *buf, size_t cap, const tg_os_hdr_t *h, const char *type,
                     const char *code, const char *message, bool retryable)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (code == NULL || message == NULL || tg_os_put_head(&w, h, type) < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{},");
    put_error(&w, code, message, retryable);
    tg_jw_lit(&w, "}");
    return tg_jw_end(&w);
}

long tg_os_enc_tools_registered(char *buf, size_t cap, const tg_os_hdr_t *h,
                                const tg_os_raw_t *registered, size_t nreg,
                                const tg_os_reject_t *rejected, size_t nrej)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (tg_os_put_head(&w, h, "core.tools.registered") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"registered\":[");
    for (size_t i = 0; i < nreg; i++) {
        if (!raw_string(registered[i]))
            return -EINVAL;
        if (i)
            tg_jw_lit(&w, ",");
        tg_jw_raw(&w, registered[i].p, registered[i].len);
    }
    tg_jw_lit(&w, "]");
    if (nrej > 0) {
        tg_jw_lit(&w, ",\"rejected\":[");
        for (size_t i = 0; i < nrej; i++) {
            const tg_os_reject_t *r = &rejected[i];
            if ((r->tool_id.p && !raw_string(r->tool_id)) || r->code == NULL || r->message == NULL)
                return -EINVAL;
            tg_jw_lit(&w, i ? ",{\"tool_id\":" : "{\"tool_id\":");
            if (r->tool_id.p)
                tg_jw_raw(&w, r->tool_id.p, r->tool_id.len);
            else
                tg_jw_lit(&w, "null");
            tg_jw_lit(&w, ",");
            put_error(&w, r->code, r->message, false);
            tg_jw_lit(&w, "}");
        }
        tg_jw_lit(&w, "]");
    }
    tg_jw_lit(&w, "}}");
    return tg_jw_end(&w);
}

long tg_os_enc_tool_call(char *buf, size_t cap, const tg_os_hdr_t *h, const tg_os_call_t *c)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (c->call_id == NULL || !raw_string(c->tool_id) || !raw_is(c->input, '{', '}') ||
        (c->idempotency_key.p && !raw_string(c->idempotency_key)) ||
        tg_os_put_head(&w, h, "core.tool.call") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"call_id\":");
    tg_jw_str(&w, c->call_id);
    tg_jw_lit(&w, ",\"tool_id\":");
    tg_jw_raw(&w, c->tool_id.p, c->tool_id.len);
    tg_jw_lit(&w, ",\"input\":");
    tg_jw_raw(&w, c->input.p, c->input.len);
    if (c->timeout_ms != TG_OS_NO_TIMEOUT) {
        tg_jw_lit(&w, ",\"timeout_ms\":");
        tg_jw_u64(&w, c->timeout_ms);
    }
    if (c->idempotency_key.p) {
        tg_jw_lit(&w, ",\"idempotency_key\":");
        tg_jw_raw(&w, c->idempotency_key.p, c->idempotency_key.len);
    }
    tg_jw_lit(&w, "}}");
    return tg_jw_end(&w);
}

long tg_os_enc_tool_cancel(char *buf, size_t cap, const tg_os_hdr_t *h, const char *call_id,
                           const char *reason)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (call_id == NULL || tg_os_put_head(&w, h, "core.tool.cancel") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"call_id\":");
    tg_jw_str(&w, call_id);
    if (reason) {
        tg_jw_lit(&w, ",\"reason\":");
        tg_jw_str(&w, reason);
    }
    tg_jw_lit(&w, "}}");
    return tg_jw_end(&w);
}

long tg_os_enc_result(char *buf, size_t cap, const tg_os_hdr_t *h, tg_os_raw_t call_id,
                      const char *status, const char *code, const char *message, bool retryable)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    if (status == NULL || (call_id.p && !raw_string(call_id)) || (code && message == NULL) ||
        tg_os_put_head(&w, h, "agent.tool.result") < 0)
        return -EINVAL;
    tg_jw_lit(&w, ",\"payload\":{\"call_id\":");
    if (call_id.p)
        tg_jw_raw(&w, call_id.p, call_id.len);
    else
        tg_jw_lit(&w, "null");
    tg_jw_lit(&w, ",\"status\":");
    tg_jw_str(&w, status);
    tg_jw_lit(&w, "}");
    if (code) {
        tg_jw_lit(&w, ",");
        put_error(&w, code, message, retryable);
    }
    tg_jw_lit(&w, "}");
    return tg_jw_end(&w);
}

int tg_os_splice_plan(size_t frame_len, tg_jspan_t span, size_t repl_len, tg_os_splice_t *out)
{
    if (span.off > frame_len || span.len > frame_len - span.off)
        return -EINVAL;
    uint64_t n = (uint64_t)frame_len - span.len + repl_len;
    if (repl_len > UINT32_MAX || tg_lenpfx_header(out->hdr, n) < 0)
        return -EMSGSIZE;
    out->head_len = span.off;
    out->tail_off = span.off + span.len;
    return 0;
}
