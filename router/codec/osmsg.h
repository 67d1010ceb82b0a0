/* OpenSentience (v1) messages toolgate writes as Core: core.welcome,
 * core.tools.registered, core.tool.call, core.tool.cancel, and error
 * replies. Pure encoders into a caller-supplied buffer (the denial,
 * agent.tool.result with status "failed", is tg_denial_os in denial.h).
 *
 * Each encoder writes one JSON object, NUL-terminated, without the length
 * header, and returns its length or a negative errno (-ENOSPC when it
 * does not fit: nothing partial is ever reported as written; -EINVAL for
 * a missing required field or a timestamp outside years 0000..9999). To
 * frame it, encode at p + TG_LENPFX_HDR and write the header at p:
 *     long n = tg_os_enc_welcome(p + 4, cap - 4, &h, &wel);
 *     if (n >= 0) tg_lenpfx_header((unsigned char *)p, (uint64_t)n);
 *
 * Secret-free by construction: strings are either toolgate's own (message
 * and session ids, config names, fixed words), JSON-escaped, or raw spans
 * that tg_os_scan validated in a frame from the same peer (ids, tool ids,
 * the tool input of a routed call), copied as they came. The session token
 * has no field here.
 */
#ifndef TG_ROUTER_OSMSG_H
#define TG_ROUTER_OSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/jscan.h"
#include "config/jsonw.h"
#include "router/codec/osenv.h"

#define TG_OS_WHERE      "toolgate.router" /* error.where of every error toolgate writes */
#define TG_OS_NO_TIMEOUT UINT64_MAX        /* tg_os_call_t.timeout_ms when absent */

/* The bytes of one JSON value copied as they are: a span tg_os_scan
 * reported (so validated), e.g. a caller's request_id with its quotes.
 * <p> NULL: absent. */
typedef struct tg_os_raw {
    const char *p;
    size_t len;
} tg_os_raw_t;

/* The raw value of span <s> in <frame> (absent for TG_J_NONE). */
static inline tg_os_raw_t tg_os_raw(const char *frame, tg_jspan_t s)
{
    tg_os_raw_t r = {NULL, 0};
    if (s.type != TG_J_NONE) {
        r.p = frame + s.off;
        r.len = s.len;
    }
    return r;
}

/* The envelope of a message toolgate writes. Borrowed for the call. */
typedef struct tg_os_hdr {
    const char *id; /* toolgate-made message id, unique per message (required) */
    int64_t ts_ms;  /* sender time, ms since the epoch; written RFC 3339 UTC */
    /* Echoed from the message being answered, as tg_os_scan reported
     * them (string spans, quotes included); absent ones are left out. */
    tg_os_raw_t in_reply_to; /* the answered message's "id" */
    tg_os_raw_t request_id;
    tg_os_raw_t correlation_id;
    tg_os_raw_t causation_id;
} tg_os_hdr_t;

/* Building block for encoders in other files (tg_denial_os): writes
 * {"v":1,"type":<type>,"id":..,"ts":.. and the echoed fields, leaving the
 * object open for "payload". Returns 0, or -EINVAL when <h>->id is NULL
 * or an echoed value is not a JSON string span. */
int tg_os_put_head(tg_jw_t *w, const tg_os_hdr_t *h, const char *type);

typedef struct tg_os_welcome {
    uint32_t accepted_version; /* TG_OS_VERSION */
    const char *session_id;    /* toolgate-made (required) */
    uint64_t heartbeat_interval_ms;
    uint64_t max_frame_bytes;
    const char *core_version; /* toolgate's version; NULL with instance_id NULL: no "server" */
    const char *instance_id;  /* router.instance; NULL: left out */
} tg_os_welcome_t;

/* core.welcome accepting an agent.hello. */
long tg_os_enc_welcome(char *buf, size_t cap, const tg_os_hdr_t *h, const tg_os_welcome_t *w);

/* A message of <type> with an empty payload and a top-level error
 * {code, message, retryable, where:"toolgate.router"}: e.g. core.welcome
 * with "protocol.unauthorized" before closing on a bad session token.
 * <code> and <message> are toolgate's own words (required). */
long tg_os_enc_error(char *buf, size_t cap, const tg_os_hdr_t *h, const char *type,
                     const char *code, const char *message, bool retryable);

/* A tool refused at registration: its tool_id span (absent, e.g. not a
 * string: written null) and toolgate's error code and message. */
typedef struct tg_os_reject {
    tg_os_raw_t tool_id;
    const char *code; /* "tool.invalid_id", "tool.duplicate", ... */
    const char *message;
} tg_os_reject_t;

/* core.tools.registered: payload {registered:[tool_id...], rejected:
 * [{tool_id, error:{code, message, retryable:false, where}}...]}; the
 * rejected member is left out when <nrej> is 0. */
long tg_os_enc_tools_registered(char *buf, size_t cap, const tg_os_hdr_t *h,
                                const tg_os_raw_t *registered, size_t nreg,
                                const tg_os_reject_t *rejected, size_t nrej);

typedef struct tg_os_call {
    const char *call_id;         /* toolgate's call id for the agent (required) */
    tg_os_raw_t tool_id;         /* string span (required) */
    tg_os_raw_t input;           /* object span (required) */
    uint64_t timeout_ms;         /* TG_OS_NO_TIMEOUT: left out */
    tg_os_raw_t idempotency_key; /* string span, or absent */
} tg_os_call_t;

/* core.tool.call built whole (the shell may instead splice the call_id of
 * the caller's frame, see tg_os_splice_plan). */
long tg_os_enc_tool_call(char *buf, size_t cap, const tg_os_hdr_t *h, const tg_os_call_t *c);

/* core.tool.cancel {call_id, reason}; <reason> is a toolgate word
 * ("timeout", "caller_cancelled", "caller_gone"), NULL to leave it out. */
long tg_os_enc_tool_cancel(char *buf, size_t cap, const tg_os_hdr_t *h, const char *call_id,
                           const char *reason);

/* agent.tool.result written by toolgate itself, for what is not a limit
 * denial (those are tg_denial_os): payload {call_id, status} where
 * <status> is "failed" or "canceled"; with <code> (NULL: none) a
 * top-level error {code, message, retryable, where}. <call_id> is the
 * caller's string span (absent: null); <code> and <message> are
 * toolgate's words ("tool.not_found", "call.duplicate_id", ...). */
long tg_os_enc_result(char *buf, size_t cap, const tg_os_hdr_t *h, tg_os_raw_t call_id,
                      const char *status, const char *code, const char *message, bool retryable);

/* Replacing the value at <span> of a frame of <frame_len> bytes with
 * <repl_len> bytes, forwarded as a gather list without copying the frame:
 * hdr (4 bytes), frame[0, head_len), the replacement, frame[tail_off,
 * frame_len). */
typedef struct tg_os_splice {
    unsigned char hdr[4]; /* length header of the new frame */
    size_t head_len;
    size_t tail_off;
} tg_os_splice_t;

/* 0, -EINVAL when <span> is not inside the frame, -EMSGSIZE when the new
 * frame would not fit a 4-byte length. */
int tg_os_splice_plan(size_t frame_len, tg_jspan_t span, size_t repl_len, tg_os_splice_t *out);

/* Forwarding a core.tool.call to its agent: the caller's frame, scanned
 * by tg_os_scan, with
 *   - its call_id replaced by toolgate's <new_call_id> (quotes included,
 *     at most TG_OS_FWD_ID_MAX bytes);
 *   - its timeout_ms set to <timeout_ms>, the deadline left to the call:
 *     written over the caller's value (a number or null, <timeout_off>),
 *     else added as the payload's first member;
 *   - <request_id> (a string span, quotes included, at most
 *     TG_OS_FWD_ID_MAX bytes; absent: none), when toolgate assigned it:
 *     written over the caller's null (<request_id_off>), else added as
 *     the envelope's first member.
 * An addition that would take the frame over <max_frame> bytes is left
 * out: the request_id first, then the timeout (the deadline is enforced
 * all the same). The frame is not copied: the plan is a list of edits. */
#define TG_OS_FWD_ID_MAX 64 /* fixed internal bound: an id toolgate writes into a call */
typedef struct tg_os_fwd_in {
    const char *frame; /* the caller's frame (payload of its length prefix) */
    size_t frame_len;
    tg_jspan_t call_id; /* env.call_id */
    size_t payload_off; /* env.payload.off: its opening brace */
    size_t timeout_off; /* env.timeout_at: the caller's value (a number or null) */
    size_t timeout_len; /* 0: absent */
    tg_os_raw_t new_call_id;
    uint64_t timeout_ms;
    tg_os_raw_t request_id;
    size_t request_id_off; /* env.request_id_at when the caller wrote null */
    size_t request_id_len; /* 0: absent */
    uint64_t max_frame;
} tg_os_fwd_in_t;

/* Edit: the <len> bytes at <off> replaced by the <text_len> bytes at
 * <text>; len 0 inserts the text before <off>. Edits a few bytes apart
 * (TG_OS_FWD_JOIN_GAP, the first one to the frame's start) are joined
 * into one, the bytes between copied: a piece written costs more than
 * copying a few bytes, so the usual call goes out as the header and one
 * text (copied), the frame up to the payload, one text (its timeout_ms
 * and call_id), the rest. */
#define TG_OS_EDITS_MAX    3  /* fixed internal bound: call_id, timeout_ms, request_id */
#define TG_OS_FWD_JOIN_GAP 32 /* fixed internal bound: bytes copied to join two edits */
typedef struct tg_os_edit {
    size_t off, len;
    const char *text;
    size_t text_len;
} tg_os_edit_t;

/* The plan: the new frame's length header, then for each edit (in order
 * of offset) the frame's bytes from the end of the one before up to its
 * <off> and its text; then the rest of the frame. Texts live in <text>. */
typedef struct tg_os_fwd {
    unsigned char hdr[4];
    tg_os_edit_t e[TG_OS_EDITS_MAX];
    size_t n;
    char text[TG_OS_FWD_JOIN_GAP * TG_OS_EDITS_MAX + 3 * TG_OS_FWD_ID_MAX + 64];
} tg_os_fwd_t;

/* 0 and <out> filled; -EINVAL when a span of <in> is not where a scan
 * would have put it (outside the frame, overlapping another) or an id is
 * too long; -EMSGSIZE when the new frame would not fit a 4-byte length. */
int tg_os_fwd_plan(const tg_os_fwd_in_t *in, tg_os_fwd_t *out);

/* <in> cleared, then filled with what the scan <env> of the call
 * <frame> (<len> bytes) gives: the frame and its spans. The rest (ids,
 * timeout, room) is the caller's to set. (The engine keeps the spans per
 * call instead of the envelope.) */
void tg_os_fwd_in_from_env(tg_os_fwd_in_t *in, const char *frame, size_t len,
                           const tg_os_env_t *env);

#endif
