/* The OpenSentience (v1) envelope scanner: reads the envelope of one frame
 * payload and, for the message types toolgate acts on, the payload members
 * it needs, and reports byte spans into the frame; everything else is
 * skipped by jscan without tokenising. Pure: no allocation, no I/O.
 *
 * Strict on what it reads (the rules are listed at the top of osenv.c):
 * a frame toolgate accepts is read the same way by any JSON parser, and a
 * key toolgate reads appearing twice makes the frame invalid, so toolgate
 * never routes or accounts a call differently from what the agent runs.
 */
#ifndef TG_ROUTER_OSENV_H
#define TG_ROUTER_OSENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/jscan.h"

#define TG_OS_VERSION     1   /* the protocol version toolgate speaks */
#define TG_OS_TOOL_ID_MAX 128 /* fixed internal bound: a tool_id is audit-safe as written */
#define TG_OS_TOKEN_MAX   256 /* fixed internal bound: longest session token compared */

typedef enum tg_os_type {
    TG_OS_OTHER = 0,            /* a valid envelope of a type toolgate does not read */
    TG_OS_AGENT_HELLO,          /* agent.hello */
    TG_OS_AGENT_TOOLS_REGISTER, /* agent.tools.register */
    TG_OS_CORE_TOOL_CALL,       /* core.tool.call */
    TG_OS_AGENT_TOOL_STREAM,    /* agent.tool.stream */
    TG_OS_AGENT_TOOL_RESULT,    /* agent.tool.result */
    TG_OS_CORE_TOOL_CANCEL,     /* core.tool.cancel */
    TG_OS_AGENT_HEARTBEAT,      /* agent.heartbeat */
} tg_os_type_t;

typedef enum tg_os_status {
    TG_OS_ST_NONE = 0,
    TG_OS_ST_SUCCEEDED,
    TG_OS_ST_FAILED,
    TG_OS_ST_CANCELED,
} tg_os_status_t;

/* What tg_os_scan read. Spans point into the scanned buffer; TG_J_NONE
 * when absent (an optional member written as null counts as absent). */
typedef struct tg_os_env {
    tg_os_type_t type;
    tg_jspan_t type_s;         /* "type": string span (with quotes) */
    tg_jspan_t id;             /* string */
    tg_jspan_t ts;             /* string */
    tg_jspan_t payload;        /* object */
    tg_jspan_t request_id;     /* optional string */
    tg_jspan_t request_id_at;  /* the value of request_id, a string or null (TG_J_NONE:
                                * absent): where a request_id toolgate assigns goes */
    tg_jspan_t correlation_id; /* optional string */
    tg_jspan_t causation_id;   /* optional string */
    tg_jspan_t in_reply_to;    /* optional string */
    tg_jspan_t error;          /* optional object */

    /* Per type; every member marked required is present when the type is
     * reported, so the shell does not check again. */
    tg_jspan_t call_id;         /* call, stream, result, cancel: string, required */
    tg_jspan_t session_token;   /* hello: string, required (never log it) */
    tg_jspan_t agent_id;        /* hello: string, required */
    tg_jspan_t versions;        /* hello: protocol.supported_versions, array, required */
    tg_jspan_t tools;           /* tools.register: array, required */
    tg_jspan_t tool_id;         /* tool.call: string, required */
    tg_jspan_t input;           /* tool.call: object, required */
    bool has_timeout;           /* tool.call: timeout_ms present */
    uint64_t timeout_ms;        /* tool.call: a non-negative integer */
    tg_jspan_t timeout_at;      /* tool.call: the value of timeout_ms, a number or null
                                 * (TG_J_NONE: absent): where the deadline toolgate
                                 * tells the agent is written */
    tg_jspan_t idempotency_key; /* tool.call: optional string */
    tg_os_status_t status;      /* tool.result: required, succeeded|failed|canceled */
    tg_jspan_t reason;          /* tool.cancel: optional string */
} tg_os_env_t;

/* Scan one frame payload [buf, buf+len) (blanks around the object are
 * allowed). Returns 0 and fills <env>, or -1 (and zeroes <env>) when the
 * payload is not JSON, not an object, or breaks an envelope rule. */
int tg_os_scan(const char *buf, size_t len, tg_os_env_t *env);

/* The type name toolgate reads for <t> ("agent.hello"), "" for OTHER. */
const char *tg_os_type_name(tg_os_type_t t);

/* 1 when the integer 1 is among the versions in the array span <versions>
 * (integers; other elements are ignored); 0 when it is not; -1 when the
 * array is malformed. */
int tg_os_supports_v1(const char *buf, tg_jspan_t versions);

/* Split a decoded tool_id "<agent_id>/<tool>" of <len> bytes: both parts
 * non-empty, made of [A-Za-z0-9._:@-], neither "." nor "..", joined by
 * exactly one '/', at most TG_OS_TOOL_ID_MAX bytes in all (so it is
 * audit-safe as written). 0 and *agent_len (the tool starts at
 * agent_len + 1), or -1. */
int tg_os_tool_id_split(const char *s, size_t len, size_t *agent_len);

/* Decode the tool_id string span <s> into <dst> (at least
 * TG_OS_TOOL_ID_MAX + 1 bytes) and split it. 0, or -1 when it does not
 * decode, is too long or is not a valid tool id. */
int tg_os_tool_id_parse(const char *buf, tg_jspan_t s, char *dst, size_t cap, size_t *len,
                        size_t *agent_len);

/* Iterate the tools array of agent.tools.register. For each element:
 * 1 and <*tool_id> is its tool_id string span, or TG_J_NONE when the
 * element is not an object, has no string tool_id or has it twice (the
 * shell rejects that element); 0 at the end; -1 when malformed. */
typedef struct tg_os_tools_iter {
    const char *buf;
    tg_jarr_iter_t arr;
} tg_os_tools_iter_t;

void tg_os_tools_begin(tg_os_tools_iter_t *it, const char *buf, tg_jspan_t tools);
int tg_os_tools_next(tg_os_tools_iter_t *it, tg_jspan_t *tool_id);

/* Constant-time comparison for secrets: true when the <alen> bytes at <a>
 * equal the <blen> bytes at <b>. The time depends only on <blen> (pass the
 * expected secret as <b>), never on where the bytes differ. */
bool tg_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* The session token check of agent.hello: decodes the string span <tok>
 * (escapes included, as the agent meant it) and compares it with <want>
 * in constant time. False when it does not decode or is longer than
 * TG_OS_TOKEN_MAX. The decoded copy is wiped before returning. */
bool tg_os_token_ok(const char *buf, tg_jspan_t tok, const char *want, size_t want_len);

#endif
