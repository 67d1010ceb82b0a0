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
    tg_jspan_t task;           /* params.task (MCP 2025-11-25 tasks) or TG_J_NONE */
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
    bool method_key; /* a "method" key was read, whatever its value */
    bool response; /* a "result" or "error" key was read */
    bool too_deep;
} tg_mcp_salvage_t;

void tg_mcp_salvage(const char *buf, size_t len, tg_mcp_salvage_t *out);

/* One judgement of a frame tg_mcp_scan refused, for every front (stdio,
 * Unix, HTTP): not JSON (invalid UTF-8 included) is -32700 Parse error;
 * valid JSON that is no valid JSON-RPC message, or nested past
 * TG_JSCAN_MAX_DEPTH, is -32600 Invalid Request. Either way the answer
 * carries the frame's top-level "id" whenever it was read before the fault
 * (JSON-RPC's null id is for an id that could not be detected), unless the
 * frame is a response (a "result" or "error" member and no "method"): a
 * caller's answer is never answered. <message> is static text; <reason>
 * is the audit reason ("parse_error", "invalid_request",
 * "nested_too_deep"). */
typedef struct tg_mcp_verdict {
    int code;
    const char *message;
    const char *reason;
    tg_jspan_t id; /* TG_J_NONE: answer with id null */
} tg_mcp_verdict_t;

void tg_mcp_judge(const char *buf, size_t len, tg_mcp_verdict_t *v);

/* ---- over-cap frames, read as a stream ----
 * The top-level members of a frame too large to buffer, fed in pieces as
 * they stream past (the head, then every skipped span), in O(1) memory:
 * it keeps the top-level "id" when it is a number, string or null of at
 * most TG_MCP_HEAD_ID_MAX bytes (strictly validated once complete), and
 * whether "method", "result" or "error" keys were seen. Nested values are
 * skipped by counting brackets outside strings; a frame that is not an
 * object, or breaks the top-level grammar, stops the reading where it
 * breaks (what was read before stays). A repeated "id" leaves no id: the
 * frame is ambiguous. Pure: no allocation, no I/O. */
#define TG_MCP_HEAD_ID_MAX 128 /* fixed internal bound: bytes of an id kept (TG_ID_MAX) */

typedef struct tg_mcp_head {
    uint64_t depth;  /* brackets open; 1 = inside the top-level object */
    uint8_t st;      /* reading state (envelope.c) */
    uint8_t key;     /* the top-level key whose value is being read */
    uint8_t klen;    /* bytes of that key so far (capped: longer is "other") */
    bool esc;        /* the previous byte of a string was a backslash */
    bool id_seen;    /* an "id" key came (a second one makes the id void) */
    bool id_void;    /* repeated, of the wrong type, or longer than the bound */
    bool method;     /* a "method" key came */
    bool response;   /* a "result" or "error" key came */
    char kbuf[8];
    size_t id_len;
    char id[TG_MCP_HEAD_ID_MAX];
} tg_mcp_head_t;

void tg_mcp_head_init(tg_mcp_head_t *h);
void tg_mcp_head_feed(tg_mcp_head_t *h, const char *p, size_t n);
/* The id read so far: 1 with [*id, *id+*len) (JSON text: a number, a
 * quoted string or null), or 0 when none was read, it is void, or it is
 * still incomplete. Echoing it follows tg_mcp_judge's rule: not for a
 * response (h->response && !h->method). */
int tg_mcp_head_id(const tg_mcp_head_t *h, const char **id, size_t *len);

/* ---- MCP tasks (2025-11-25), read on their rare paths only ---- */

/* The members of a task object toolgate reads: "taskId" (a string span
 * with its quotes), "status" (a string span), "ttl" (a number span); each
 * TG_J_NONE when absent or of another type. */
typedef struct tg_mcp_task {
    tg_jspan_t id;
    tg_jspan_t status;
    tg_jspan_t ttl;
} tg_mcp_task_t;

/* Read the task members of the object <obj> of <buf> (validated by
 * tg_mcp_scan). 0, or -1 when <obj> is not an object. */
int tg_mcp_task_read(const char *buf, tg_jspan_t obj, tg_mcp_task_t *t);

/* The top-level member <key> of the frame [buf, buf+len) tg_mcp_scan
 * accepted as an object: 1 and its span, or 0. */
int tg_mcp_frame_member(const char *buf, size_t len, const char *key, tg_jspan_t *out);

typedef enum tg_task_status {
    TG_TASK_LIVE = 0,   /* working, input_required, or anything else */
    TG_TASK_COMPLETED,
    TG_TASK_FAILED,
    TG_TASK_CANCELLED,
} tg_task_status_t;

/* A status span's meaning: the three terminal statuses, else live. */
tg_task_status_t tg_mcp_task_status(const char *buf, tg_jspan_t status);

/* The end of the notifications/cancelled the HTTP front's bridge writes
 * for a request whose client left (<*len> bytes): reason "caller_gone"
 * and a token drawn once per process, so that a client writing a cancel
 * of its own with that reason is not taken for one that left (the MCP
 * engine reads it). */
const char *tg_mcp_gone_tail(size_t *len);

#define TG_MCP_TOOL_NAME_MAX 256 /* fixed internal bound: bytes of a listed tool's name */

/* The tool names of a tools/list answer <frame> (result.tools[].name,
 * decoded; an element without a string name of 1..TG_MCP_TOOL_NAME_MAX
 * bytes is passed over) to <fn>(<ctx>, name, len) in order; <fn> < 0
 * stops. The names given, or -1 when the frame has no result.tools array
 * or it is malformed (the names before the fault were given). */
int tg_mcp_tools_listed(const char *frame, size_t len,
                        int (*fn)(void *ctx, const char *name, size_t len), void *ctx);

#endif
