/* The envelope scanner: reads only the JSON-RPC envelope of a frame
 * (jsonrpc, id, method, params.name, params._meta, result/error presence)
 * and reports byte spans into the frame; nested values are skipped by
 * jscan without tokenising. Pure: no allocation, no I/O.
 *
 * Duplicate envelope keys ("id", "method", "params", "result", "error")
 * make the frame invalid: toolgate must never see a different id or
 * method than the agent would.
 */
#ifndef TG_ROUTER_ENVELOPE_H
#define TG_ROUTER_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/jscan.h"

typedef enum tg_mcp_kind {
    TG_MCP_INVALID = 0,  /* not JSON, not an object, or a bad envelope */
    TG_MCP_REQUEST,      /* method + id */
    TG_MCP_NOTIFICATION, /* method, no id */
    TG_MCP_RESPONSE,     /* id + result or error, no method */
    TG_MCP_BATCH,        /* a JSON array */
} tg_mcp_kind_t;

typedef struct tg_mcp_env {
    tg_mcp_kind_t kind;
    tg_jspan_t id;       /* TG_J_NONE when absent; number, string or null */
    tg_jspan_t method;   /* string span (with quotes) */
    tg_jspan_t params;   /* object/array span, or TG_J_NONE */
    bool has_result;
    bool has_error;
    /* tools/call only. Set for a tools/call notification (no id) too: an
     * agent may run it, so the router must decide what to do with it. */
    bool is_tools_call;
    tg_jspan_t tool_name;      /* params.name, string span or TG_J_NONE */
    bool has_timeout;          /* params._meta.timeout_ms present and a valid integer */
    uint64_t timeout_ms;
    tg_jspan_t progress_token; /* params._meta.progressToken or TG_J_NONE */
    /* notifications/cancelled only: params.requestId */
    tg_jspan_t cancel_id;
    /* notifications/progress only: params.progressToken */
    tg_jspan_t notif_progress_token;
} tg_mcp_env_t;

/* Scan the frame [buf, buf+len) (no trailing newline; blanks around the
 * value are allowed). Returns 0 and fills <env> (kind != TG_MCP_INVALID,
 * or TG_MCP_BATCH for arrays, whose elements are not looked at), or -1
 * with env->kind = TG_MCP_INVALID when the frame is not a valid JSON-RPC
 * object. The envelope rules are listed at the top of envelope.c. */
int tg_mcp_scan(const char *buf, size_t len, tg_mcp_env_t *env);

/* For a batch frame: 1 when any element is a tools/call request (or
 * notification), 0 when none is, -1 when the batch is malformed: empty
 * (JSON-RPC), or an element that is not an object tg_mcp_scan accepts, as
 * toolgate could not tell whether the agent would run it. */
int tg_mcp_batch_has_call(const char *buf, size_t len);

/* Head of an over-cap frame (cut anywhere): find the top-level "id" if it
 * appears before the cut. 0 and the span, or -1. */
int tg_mcp_scan_head_id(const char *buf, size_t len, tg_jspan_t *id);

/* What can still be said of a frame tg_mcp_scan refused, to answer it:
 * <id> is the top-level "id" (number, string or null) when it was read
 * before the fault, <request> when a "method" string was read too (only a
 * request's id is echoed: JSON-RPC answers requests), <too_deep> when it
 * nests deeper than TG_JSCAN_MAX_DEPTH (valid JSON or not). */
typedef struct tg_mcp_salvage {
    tg_jspan_t id;
    bool request;
    bool method;   /* a "method" string was read: not a response */
    bool too_deep;
} tg_mcp_salvage_t;

void tg_mcp_salvage(const char *buf, size_t len, tg_mcp_salvage_t *out);

#endif
