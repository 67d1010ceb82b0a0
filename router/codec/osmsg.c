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

/* ---- forwarding a call ---- */

/* True when the object whose opening brace is at <brace> of <f> (<n>
 * bytes) has a member: a member added first takes a comma. */
static bool has_member(const char *f, size_t n, size_t brace)
{
    size_t i = brace + 1;
    while (i < n && (f[i] == ' ' || f[i] == '\t' || f[i] == '\n' || f[i] == '\r'))
        i++;
    return i < n && f[i] != '}';
}

enum { K_CID, K_TMO, K_TMO_ADD, K_RID, K_RID_ADD };

typedef struct fwd_edit {
    size_t off, len; /* the frame's bytes replaced */
    size_t text_len;
    int kind;
} fwd_edit_t;

#define KEY_TMO "\"timeout_ms\":"
#define KEY_RID "\"request_id\":"

/* Write the text of edit <x> at <t>. */
static void put_text(const tg_os_fwd_in_t *in, const fwd_edit_t *x, const char *digits, size_t nd,
                     char *t)
{
    switch (x->kind) {
    case K_CID:
        tg_jw_copy(t, in->new_call_id.p, in->new_call_id.len);
        break;
    case K_TMO:
        tg_jw_copy(t, digits, nd);
        break;
    case K_TMO_ADD:
        memcpy(t, KEY_TMO, sizeof KEY_TMO - 1);
        tg_jw_copy(t + sizeof KEY_TMO - 1, digits, nd);
        if (x->text_len > sizeof KEY_TMO - 1 + nd)
            t[x->text_len - 1] = ',';
        break;
    case K_RID:
        tg_jw_copy(t, in->request_id.p, in->request_id.len);
        break;
    default: /* K_RID_ADD */
        memcpy(t, KEY_RID, sizeof KEY_RID - 1);
        tg_jw_copy(t + sizeof KEY_RID - 1, in->request_id.p, in->request_id.len);
        if (x->text_len > sizeof KEY_RID - 1 + in->request_id.len)
            t[x->text_len - 1] = ',';
        break;
    }
}

/* <off, len> lies inside a frame of <n> bytes. */
static bool inside(size_t off, size_t len, size_t n)
{
    return off <= n && len <= n - off;
}

int tg_os_fwd_plan(const tg_os_fwd_in_t *in, tg_os_fwd_t *out)
{
    const char *f = in->frame;
    size_t flen = in->frame_len;
    size_t obj = 0;
    while (obj < flen && (f[obj] == ' ' || f[obj] == '\t' || f[obj] == '\n' || f[obj] == '\r'))
        obj++;
    if (obj >= flen || f[obj] != '{' || in->payload_off >= flen || f[in->payload_off] != '{' ||
        in->call_id.type != TG_J_STRING || !inside(in->call_id.off, in->call_id.len, flen) ||
        !inside(in->timeout_off, in->timeout_len, flen) ||
        !inside(in->request_id_off, in->request_id_len, flen) || in->new_call_id.p == NULL ||
        in->new_call_id.len > TG_OS_FWD_ID_MAX ||
        (in->request_id.p != NULL && in->request_id.len > TG_OS_FWD_ID_MAX))
        return -EINVAL;

    /* What to change, and the frame's length after it. */
    fwd_edit_t x[TG_OS_EDITS_MAX];
    size_t n = 0;
    x[n++] = (fwd_edit_t){in->call_id.off, in->call_id.len, in->new_call_id.len, K_CID};
    uint64_t len = (uint64_t)flen - in->call_id.len + in->new_call_id.len;
    char dbuf[20];
    size_t nd = tg_jw_digits(dbuf, in->timeout_ms);
    const char *digits = dbuf + 20 - nd;
    if (in->timeout_len > 0) {
        /* Over a number: never longer (the deadline is at most what was
         * asked); over null it may be. */
        if (nd <= in->timeout_len || len - in->timeout_len + nd <= in->max_frame) {
            x[n++] = (fwd_edit_t){in->timeout_off, in->timeout_len, nd, K_TMO};
            len = len - in->timeout_len + nd;
        }
    } else {
        size_t t = sizeof KEY_TMO - 1 + nd + has_member(f, flen, in->payload_off);
        if (len + t <= in->max_frame) {
            x[n++] = (fwd_edit_t){in->payload_off + 1, 0, t, K_TMO_ADD};
            len += t;
        }
    }
    if (in->request_id.p != NULL && in->request_id_len > 0) {
        if (in->request_id.len <= in->request_id_len ||
            len - in->request_id_len + in->request_id.len <= in->max_frame) {
            x[n++] =
                (fwd_edit_t){in->request_id_off, in->request_id_len, in->request_id.len, K_RID};
            len = len - in->request_id_len + in->request_id.len;
        }
    } else if (in->request_id.p != NULL) {
        size_t t = sizeof KEY_RID - 1 + in->request_id.len + has_member(f, flen, obj);
        if (len + t <= in->max_frame) {
            x[n++] = (fwd_edit_t){obj + 1, 0, t, K_RID_ADD};
            len += t;
        }
    }
    /* In order of offset (an insertion before a replacement at its
     * offset), none overlapping another. */
    for (size_t i = 1; i < n; i++) {
        fwd_edit_t y = x[i];
        size_t j = i;
        for (; j > 0 && (x[j - 1].off > y.off || (x[j - 1].off == y.off && y.len == 0)); j--)
            x[j] = x[j - 1];
        x[j] = y;
    }
    for (size_t i = 1; i < n; i++) {
        if (x[i].off < x[i - 1].off + x[i - 1].len)
            return -EINVAL;
    }
    if (tg_lenpfx_header(out->hdr, len) < 0)
        return -EMSGSIZE;

    /* The texts, each written once; edits close together (the first, to
     * the frame's start) share one, the bytes between copied. */
    char *t = out->text;
    size_t k = 0, end = 0; /* where the last edit's bytes end */
    for (size_t i = 0; i < n; i++) {
        size_t gap = x[i].off - end;
        if (gap <= TG_OS_FWD_JOIN_GAP && (k > 0 || i == 0)) {
            if (k == 0)
                out->e[k++] = (tg_os_edit_t){.off = 0, .len = 0, .text = t, .text_len = 0};
            tg_jw_copy(t, f + end, gap);
            t += gap;
        } else {
            out->e[k++] = (tg_os_edit_t){.off = x[i].off, .len = 0, .text = t, .text_len = 0};
        }
        put_text(in, &x[i], digits, nd, t);
        t += x[i].text_len;
        end = x[i].off + x[i].len;
        tg_os_edit_t *e = &out->e[k - 1];
        e->len = end - e->off;
        e->text_len = (size_t)(t - e->text);
    }
    out->n = k;
    return 0;
}

void tg_os_fwd_in_from_env(tg_os_fwd_in_t *in, const char *frame, size_t len,
                           const tg_os_env_t *env)
{
    memset(in, 0, sizeof(*in));
    in->frame = frame;
    in->frame_len = len;
    in->call_id = env->call_id;
    in->payload_off = env->payload.off;
    in->timeout_off = env->timeout_at.off;
    in->timeout_len = env->timeout_at.type != TG_J_NONE ? env->timeout_at.len : 0;
    in->request_id_off = env->request_id_at.off;
    in->request_id_len = env->request_id_at.type != TG_J_NONE ? env->request_id_at.len : 0;
}
