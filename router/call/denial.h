/* Structured denials: the JSON-RPC error (MCP) and the OpenSentience
 * agent.tool.result (status "failed") for every refusal, exactly as
 * DESIGN.md "Denials". Pure: formats into a caller-supplied buffer.
 *
 * Messages are built only from numbers, names from config, toolgate's ids
 * and caller strings that pass tg_audit_safe_str (else 'invalid'): never
 * from arguments, results, environment or agent output.
 */
#ifndef TG_ROUTER_DENIAL_H
#define TG_ROUTER_DENIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "router/codec/osmsg.h"

#include "router/call/denial-t.h"

typedef struct tg_denial {
    tg_deny_code_t code;
    const char *limit;       /* "rate", "concurrency", "queue", "timeout", "frame", "agent", "shutdown" */
    const char *scope;       /* "agent", "tool", "caller", "instance" */
    const char *agent;       /* config name */
    const char *tool;        /* caller-supplied: checked, NULL when none */
    size_t tool_len;
    int64_t observed;        /* TG_DENY_ABSENT when not applicable */
    int64_t cap;
    const char *unit;        /* "calls/minute", "calls", "ms", "bytes" */
    int64_t retry_after_ms;  /* TG_DENY_ABSENT when not applicable */
    const char *config_path; /* "agents.search.tools.web.rate_limit" or NULL */
    const char *request_id;  /* toolgate's id for the call, or NULL */
    const char *detail;      /* toolgate-made phrase for the message, e.g. "11 calls in 1m > 10/minute" */
    const tg_os_hdr_t *os;   /* tg_denial_os only (required there): the answer's envelope */
} tg_denial_t;

const char *tg_deny_name(tg_deny_code_t c);    /* "rate_limit_exceeded" */
int tg_deny_rpc_code(tg_deny_code_t c);        /* -32060 */
bool tg_deny_retryable(tg_deny_code_t c);      /* "maybe" counts as true */

/* One JSON-RPC error line ('\n'-terminated) answering id <id> (the raw
 * bytes of the caller's id; NULL or len 0 writes null). Returns its length
 * or -ENOSPC. */
long tg_denial_mcp(char *buf, size_t cap, const char *id, size_t id_len, const tg_denial_t *d);

/* OpenSentience: an agent.tool.result answering the call <call_id> (the
 * raw string span of the caller's payload.call_id, quotes included; NULL
 * or len 0 writes null) with payload {call_id, status:"failed"} and a
 * top-level error {code, message, details, retryable, where}: code and
 * message as in tg_denial_mcp, details the same fields as its data. The
 * envelope (message id, ts, echoed request_id...) comes from <d>->os.
 * One JSON object, NUL-terminated, no length header (see osmsg.h).
 * Returns its length, -ENOSPC, or -EINVAL (bad code, <d>->os NULL or
 * incomplete). */
long tg_denial_os(char *buf, size_t cap, const char *call_id, size_t call_id_len,
                  const tg_denial_t *d);

/* A plain JSON-RPC error line (parse error -32700, invalid request -32600)
 * with a fixed message chosen by toolgate. */
long tg_rpc_error(char *buf, size_t cap, const char *id, size_t id_len, int code,
                  const char *message);

#endif
