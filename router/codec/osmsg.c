/* OpenSentience messages toolgate writes (see osmsg.h). */
#include "router/codec/osmsg.h"

#include <errno.h>
#include <string.h>

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

int tg_os_edits_plan(size_t frame_len, tg_os_edit_t *e, size_t n, unsigned char hdr[4])
{
    if (n > TG_OS_EDITS_MAX)
        return -EINVAL;
    /* Insertion sort, stable: a handful of edits. */
    for (size_t i = 1; i < n; i++) {
        tg_os_edit_t x = e[i];
        size_t j = i;
        for (; j > 0 && e[j - 1].off > x.off; j--)
            e[j] = e[j - 1];
        e[j] = x;
    }
    uint64_t len = frame_len;
    size_t end = 0; /* where the edit before ends */
    for (size_t i = 0; i < n; i++) {
        if (e[i].off < end || e[i].off > frame_len || e[i].len > frame_len - e[i].off ||
            e[i].text_len > UINT32_MAX)
            return -EINVAL;
        end = e[i].off + e[i].len;
        len = len - e[i].len + e[i].text_len;
    }
    return tg_lenpfx_header(hdr, len) < 0 ? -EMSGSIZE : 0;
}

size_t tg_os_put_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    memcpy(out, tmp + sizeof tmp - n, n);
    return n;
}

/* The offset past the blanks from <i> in <f> (<n> bytes). */
static size_t blank_end(const char *f, size_t n, size_t i)
{
    while (i < n && (f[i] == ' ' || f[i] == '\t' || f[i] == '\n' || f[i] == '\r'))
        i++;
    return i;
}

/* Text inserting the member <key> (a literal with its quotes and colon,
 * <klen> bytes) with <val>, as the first member of the object whose
 * opening brace is at <brace>: a comma follows unless the object is
 * empty. Its length. */
static size_t first_member(const tg_os_fwd_in_t *in, size_t brace, char *out, const char *key,
                           size_t klen, const char *val, size_t vlen)
{
    memcpy(out, key, klen);
    memcpy(out + klen, val, vlen);
    size_t n = klen + vlen;
    size_t j = blank_end(in->frame, in->frame_len, brace + 1);
    if (j < in->frame_len && in->frame[j] != '}')
        out[n++] = ',';
    return n;
}

int tg_os_fwd_plan(const tg_os_fwd_in_t *in, tg_os_fwd_t *out)
{
    const char *f = in->frame;
    size_t flen = in->frame_len;
    size_t obj = blank_end(f, flen, 0);
    if (obj >= flen || f[obj] != '{' || in->payload_off >= flen || f[in->payload_off] != '{' ||
        in->call_id.type != TG_J_STRING || in->new_call_id.p == NULL ||
        (in->request_id.p != NULL && in->request_id.len > TG_OS_FWD_RID_MAX))
        return -EINVAL;
    size_t n = 0;
    out->e[n++] = (tg_os_edit_t){.off = in->call_id.off,
                                 .len = in->call_id.len,
                                 .text = in->new_call_id.p,
                                 .text_len = in->new_call_id.len};
    uint64_t len = (uint64_t)flen - in->call_id.len + in->new_call_id.len;

    char digits[20];
    size_t nd = tg_os_put_u64(digits, in->timeout_ms);
    if (in->timeout_len > 0) {
        /* Over a number: never longer (the deadline is at most what was
         * asked); over null it may be. */
        if (nd <= in->timeout_len || len - in->timeout_len + nd <= in->max_frame) {
            memcpy(out->tmo, digits, nd);
            out->e[n++] = (tg_os_edit_t){
                .off = in->timeout_off, .len = in->timeout_len, .text = out->tmo, .text_len = nd};
            len = len - in->timeout_len + nd;
        }
    } else {
        static const char key[] = "\"timeout_ms\":";
        size_t t = first_member(in, in->payload_off, out->tmo, key, sizeof key - 1, digits, nd);
        if (len + t <= in->max_frame) {
            out->e[n++] = (tg_os_edit_t){
                .off = in->payload_off + 1, .len = 0, .text = out->tmo, .text_len = t};
            len += t;
        }
    }
    if (in->request_id.p != NULL && in->request_id_len > 0) {
        uint64_t grown = len - in->request_id_len + in->request_id.len;
        if (in->request_id.len <= in->request_id_len || grown <= in->max_frame)
            out->e[n++] = (tg_os_edit_t){.off = in->request_id_off,
                                         .len = in->request_id_len,
                                         .text = in->request_id.p,
                                         .text_len = in->request_id.len};
    } else if (in->request_id.p != NULL) {
        static const char key[] = "\"request_id\":";
        size_t t = first_member(in, obj, out->rid, key, sizeof key - 1, in->request_id.p,
                                in->request_id.len);
        if (len + t <= in->max_frame)
            out->e[n++] = (tg_os_edit_t){.off = obj + 1, .len = 0, .text = out->rid, .text_len = t};
    }
    out->n = n;
    return tg_os_edits_plan(flen, out->e, n, out->hdr);
}
