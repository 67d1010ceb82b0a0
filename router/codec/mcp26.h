/* mcp26: the request metadata of MCP revision 2026-07-28 on Streamable
 * HTTP, as a pure core: what the HTTP front decides about a POST before and
 * after its body is read.
 *
 * Spec: /work/spec/docs/specification/2026-07-28/
 *   basic/transports/streamable-http.mdx "Request Metadata" (headers, the
 *     Base64 sentinel, server validation, HeaderMismatch -32020),
 *   basic/versioning.mdx (UnsupportedProtocolVersionError -32022, the era
 *     a dual-era server picks),
 *   server/tools.mdx "x-mcp-header" (the annotation's constraints),
 *   basic/index.mdx "Error Codes" (-32020..-32099 belong to the spec),
 *   schema/2026-07-28/schema.ts (HeaderMismatchError,
 *     UnsupportedProtocolVersionError, RequestMetaObject).
 *
 * The flow, for the front:
 *   1. head read: tg_mcp26_era(version header, NULL) says whether the POST
 *      is provisionally 2025-era (sessions, the existing front) or 2026,
 *      or refuses an unsupported version at once;
 *   2. body read: tg_mcp26_body_scan reads the few members that headers
 *      mirror (method, params.name / params.uri, params.arguments,
 *      params._meta's protocolVersion), tg_mcp26_era(header, body) decides
 *      for good;
 *   3. a 2026 request: tg_mcp26_check compares Mcp-Method, Mcp-Name and
 *      the Mcp-Param-* headers with the body, the last against the
 *      x-mcp-header map of the tool called (tg_mcp26_xmap_build, from the
 *      agent's tools/list);
 *   4. a refusal: tg_mcp26_error_json writes the JSON-RPC error body of the
 *      400 answer.
 *
 * Pure: no libuv, no I/O, no clock, no allocation. The body is read with
 * the jscan span scanner and the envelope scanner, never parsed into a
 * tree; only tg_mcp26_xmap_build reads jansson (tool lists are not the hot
 * path).
 *
 * Secrets: tool arguments may be secrets. No message written here holds a
 * header or argument value: they name headers, properties of the schema
 * and, for the few methods that need Mcp-Name, the method. The one value
 * echoed is the protocol version an UnsupportedProtocolVersionError must
 * return as "requested" (a version, bounded and made printable).
 *
 * Bounds (all inputs): TG_MCP26_VERSION_MAX bytes of a version,
 * TG_MCP26_METHOD_MAX of a method, TG_MCP26_VALUE_MAX of an Mcp-Name or
 * Mcp-Param-* value as received, TG_MCP26_PARAM_HDRS_MAX Mcp-Param-*
 * headers per request, TG_MCP26_XHDR_MAX annotations per tool of
 * TG_MCP26_PARAM_NAME_MAX bytes, TG_MCP26_PATH_DEPTH_MAX keys and
 * TG_MCP26_PATH_BYTES_MAX bytes per annotated property path,
 * TG_MCP26_SCHEMA_DEPTH_MAX levels of an inputSchema walked. A body is
 * what the front buffered (its max_frame_bytes), scanned to at most
 * TG_JSCAN_MAX_DEPTH levels; it is never copied.
 *
 * Return styles: 0 / negative errno, unless a function says it is
 * tri-state. Every refusal fills a tg_mcp26_fault_t; each one is answered
 * with HTTP 400 (streamable-http.mdx "Server Validation").
 */
#ifndef TG_ROUTER_CODEC_MCP26_H
#define TG_ROUTER_CODEC_MCP26_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/jscan.h"
#include "router/codec/envelope.h"

struct json_t; /* jansson's; only tg_mcp26_xmap_build reads one */

/* ---- versions ---------------------------------------------------------------- */

#define TG_MCP26_VERSION "2026-07-28" /* the stateless ("modern") revision */

/* The protocol versions toolgate accepts, newest first, NULL-terminated:
 * "2026-07-28" then the 2025-era (session) ones. The one list: the
 * UnsupportedProtocolVersionError's "supported" is written from it. */
extern const char *const tg_mcp_versions[];

/* fixed internal bound: bytes of a protocol version compared or echoed */
#define TG_MCP26_VERSION_MAX 32

/* The era of version <v> (<len> bytes): TG_MCP26_MODERN, TG_MCP26_LEGACY,
 * or -ENOENT when toolgate does not accept it. */
int tg_mcp26_version_era(const char *v, size_t len);

/* ---- faults ------------------------------------------------------------------- */

/* JSON-RPC error codes (basic/index.mdx "Error Codes", schema.ts
 * HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION). The body faults use
 * JSON-RPC's own -32700 / -32600. */
#define TG_MCP26_HEADER_MISMATCH     (-32020)
#define TG_MCP26_UNSUPPORTED_VERSION (-32022)
#define TG_MCP26_PARSE_ERROR         (-32700)
#define TG_MCP26_INVALID_REQUEST     (-32600)

#define TG_MCP26_MSG_MAX 192 /* fixed internal bound: bytes of a fault message, NUL included */

/* Why a request is refused (HTTP 400). Filled only on failure; the caller
 * owns it (a stack object is fine). */
typedef struct tg_mcp26_fault {
    int code;                   /* one of the four codes above */
    char msg[TG_MCP26_MSG_MAX]; /* NUL-terminated, holds no header or argument value */
    /* TG_MCP26_UNSUPPORTED_VERSION only: the version requested, cut to
     * TG_MCP26_VERSION_MAX bytes, a byte outside 0x20..0x7E written '?' */
    char requested[TG_MCP26_VERSION_MAX + 1];
} tg_mcp26_fault_t;

/* Write to <dst> (<cap> bytes, NUL-terminated) the JSON-RPC error answer
 * for <f>, with <id> (<id_len> bytes of JSON text: a number, a string with
 * its quotes, or null; NULL writes null, as before the body is read):
 *   {"jsonrpc":"2.0","id":ID,"error":{"code":-32020,"message":"..."}}
 *   {"jsonrpc":"2.0","id":ID,"error":{"code":-32022,
 *     "message":"Unsupported protocol version",
 *     "data":{"supported":[tg_mcp_versions...],"requested":"..."}}}
 * (the shapes of schema/2026-07-28/examples/HeaderMismatchError and
 * UnsupportedProtocolVersionError). <id> is spliced as it is: pass a span
 * the scanner validated. Returns the length written (NUL excluded), or
 * -ENOSPC (then nothing usable is in <dst>). */
long tg_mcp26_error_json(const tg_mcp26_fault_t *f, const char *id, size_t id_len, char *dst,
                         size_t cap);

/* ---- Base64 sentinel (streamable-http.mdx "Value Encoding") ------------------ */

#define TG_MCP26_B64_PREFIX "=?base64?" /* case-sensitive, exactly this */
#define TG_MCP26_B64_SUFFIX "?="
/* bytes of the sentinel form of an <n>-byte value */
#define TG_MCP26_B64_LEN(n) (sizeof(TG_MCP26_B64_PREFIX) - 1 + 4 * (((n) + 2) / 3) + 2)

/* Bytes of one Mcp-Name or Mcp-Param-* value as received: a resource URI
 * of 2048 bytes (TG_EXPOSE_URI_MAX) fits once encoded. */
#define TG_MCP26_VALUE_MAX 4096 /* fixed internal bound: bytes of a header value */

/* True when <v> (<len> bytes) must travel in the sentinel form: a byte
 * outside 0x20..0x7E (non-ASCII, control characters, tab and DEL
 * included), a leading or trailing space, or a value that itself matches
 * the sentinel pattern (starts with "=?base64?" and ends with "?="). */
bool tg_mcp26_value_needs_b64(const char *v, size_t len);

/* Encode value <v> (<len> bytes, any bytes) as a header value in <dst>
 * (<cap> bytes, NUL-terminated, <*out_len> its length): as it is when
 * tg_mcp26_value_needs_b64 is false, else "=?base64?" standard Base64 with
 * padding "?=". Tri-state: 0 plain, 1 encoded, -ENOSPC (<dst> too small:
 * TG_MCP26_B64_LEN(len) + 1 always suffices). */
int tg_mcp26_value_encode(const char *v, size_t len, char *dst, size_t cap, size_t *out_len);

/* Decode header value <v> (<len> bytes, optional white space around it
 * already removed, as HTTP does) into <dst> (<cap> bytes; NUL-terminated,
 * <*out_len> the length: a decoded value may hold NUL bytes). A value that
 * starts with "=?base64?" and ends with "?=" is decoded: standard alphabet,
 * padded to a multiple of 4, canonical (unused bits zero), nothing else
 * inside. Any other value is plain and copied: it must be what an encoder
 * sends plain (bytes 0x20..0x7E, no space at either end). Tri-state:
 * 0 plain, 1 decoded, -EINVAL malformed (invalid characters or Base64),
 * -E2BIG over TG_MCP26_VALUE_MAX bytes, -ENOSPC (<cap> below the decoded
 * length + 1; a <cap> of <len> + 1 always suffices). */
int tg_mcp26_value_decode(const char *v, size_t len, char *dst, size_t cap, size_t *out_len);

/* ---- the body ----------------------------------------------------------------- */

#define TG_MCP26_METHOD_MAX   128 /* fixed internal bound: bytes of a method, header or body */
#define TG_MCP26_META_VERSION "io.modelcontextprotocol/protocolVersion" /* key in params._meta */

/* What headers mirror of one POST body, as spans into <buf> (borrowed: the
 * body must outlive it). Filled by tg_mcp26_body_scan. */
typedef struct tg_mcp26_body {
    const char *buf;
    size_t len;
    tg_mcp_kind_t kind;                        /* TG_MCP_REQUEST or TG_MCP_NOTIFICATION */
    tg_jspan_t id;                             /* TG_J_NONE for a notification */
    tg_jspan_t method;                         /* string span */
    char method_text[TG_MCP26_METHOD_MAX + 1]; /* decoded; "" when over the bound */
    size_t method_len;
    bool method_long; /* over TG_MCP26_METHOD_MAX bytes (or holds \u0000) */
    /* params.name (tools/call, prompts/get) or params.uri (resources/read),
     * any type, TG_J_NONE when absent or the method has no name */
    tg_jspan_t name;
    const char *name_src; /* "params.name", "params.uri", or NULL: the method has none */
    tg_jspan_t arguments; /* params.arguments, any type, or TG_J_NONE */
    tg_jspan_t version;   /* params._meta[TG_MCP26_META_VERSION], any type, or TG_J_NONE */
} tg_mcp26_body_t;

/* Scan body <buf> (<len> bytes) into <b>. The body must be one JSON-RPC
 * request or notification (streamable-http.mdx "Sending Messages"); the
 * keys read ("name", "uri", "arguments", "_meta" in params, the version in
 * _meta) may appear once each, as the envelope scanner's own keys: a
 * duplicate would let a header match the first while the agent runs the
 * last. Returns 0, or -EBADMSG with <f> filled: -32700 (not JSON), -32600
 * (not a single request or notification, a duplicate key); b->id is then
 * the id to answer with when one could be read (TG_J_NONE: null). */
int tg_mcp26_body_scan(const char *buf, size_t len, tg_mcp26_body_t *b, tg_mcp26_fault_t *f);

/* ---- era ---------------------------------------------------------------------- */

enum {
    TG_MCP26_LEGACY = 0, /* 2025-era: the initialize handshake, Mcp-Session-Id */
    TG_MCP26_MODERN = 1, /* 2026-07-28: stateless, tg_mcp26_check applies */
};

/* The era of a POST from its MCP-Protocol-Version header <hv> (<hv_len>
 * bytes; NULL: absent) and, once read, its body <b> (NULL: not read yet).
 * Tri-state: TG_MCP26_LEGACY, TG_MCP26_MODERN, or -EBADMSG with <f>
 * filled (HTTP 400). The rules (versioning.mdx, streamable-http.mdx
 * "Protocol Version Header"):
 *   - a header naming a version toolgate does not accept: -32022 with it
 *     as "requested" (before the body, too);
 *   - body not read: the header's era, 2025-era when absent (a client
 *     before 2025-06-18 sends none and means 2025-03-26); provisional;
 *   - "initialize": 2025-era whatever the header (it selects legacy
 *     semantics on a dual-era server);
 *   - the body's _meta version absent: the header's era, except a 2026
 *     request (not a notification: no header rule is defined for those)
 *     lacks its required _meta version: -32020;
 *   - the body's _meta version present: the header must be present
 *     (-32022 when the body's version is unsupported and no header came,
 *     else -32020) and equal to it (-32020); then the header's era. */
int tg_mcp26_era(const char *hv, size_t hv_len, const tg_mcp26_body_t *b, tg_mcp26_fault_t *f);

/* ---- x-mcp-header (server/tools.mdx "x-mcp-header") --------------------------- */

/* fixed internal bound: x-mcp-header annotations of one tool */
#define TG_MCP26_XHDR_MAX 32
/* fixed internal bound: bytes of the {Name} of Mcp-Param-{Name} */
#define TG_MCP26_PARAM_NAME_MAX 64
/* fixed internal bound: properties keys leading to an annotation */
#define TG_MCP26_PATH_DEPTH_MAX 8
/* fixed internal bound: bytes of those keys, a NUL after each */
#define TG_MCP26_PATH_BYTES_MAX 256
/* fixed internal bound: levels of an inputSchema walked */
#define TG_MCP26_SCHEMA_DEPTH_MAX 64

enum {
    TG_MCP26_T_STRING = 1,
    TG_MCP26_T_INTEGER,
    TG_MCP26_T_BOOLEAN,
};

/* One annotated property. */
typedef struct tg_mcp26_xprop {
    char header[TG_MCP26_PARAM_NAME_MAX + 1];  /* {Name}, as the schema spells it */
    uint8_t type;                              /* TG_MCP26_T_* (the schema's "type") */
    uint8_t depth;                             /* keys in the path, >= 1 */
    uint16_t key_off[TG_MCP26_PATH_DEPTH_MAX]; /* each key's offset in <keys> */
    char keys[TG_MCP26_PATH_BYTES_MAX];        /* the keys, each NUL-terminated */
} tg_mcp26_xprop_t;

/* The property -> header map of one tool; the caller owns it (about 11
 * KiB: keep it with the tool, not on a hot stack). */
typedef struct tg_mcp26_xmap {
    size_t n;
    tg_mcp26_xprop_t p[TG_MCP26_XHDR_MAX];
} tg_mcp26_xmap_t;

/* Build <map> from <tool>, one tool object of a tools/list result. Every
 * "x-mcp-header" of its inputSchema must:
 *   - be a non-empty string of HTTP token characters (RFC 9110 tchar: no
 *     control characters, CR or LF), case-insensitively unique;
 *   - sit on a property of type string, integer or boolean ("number" is
 *     not allowed; a type array of one of them and "null" is taken as that
 *     type);
 *   - sit on a property statically reachable from the root: a chain of
 *     "properties" keys only (nested objects allowed), never under items,
 *     prefixItems, additionalProperties, allOf/anyOf/oneOf/not,
 *     if/then/else, $defs, $ref targets or any other keyword.
 * Only schema positions are searched: an "x-mcp-header" key inside
 * "default", "const", "enum" or "examples" is an instance, not an
 * annotation. A tool without inputSchema (or without annotations) gets an
 * empty map. Tri-state: 0 valid; -EINVAL the tool breaks the spec; -E2BIG
 * it passes toolgate's bounds; either way <msg> (<cap> bytes) says why,
 * naming the property (never a value) and <map> is left empty.
 *
 * What to do with an invalid tool (tools.mdx, streamable-http.mdx "Schema
 * Extension"): a client on Streamable HTTP MUST exclude it from the result
 * of tools/list and SHOULD log a warning with the tool's name and the
 * reason, so that one malformed tool does not stop the others being used.
 * A tool toolgate cannot map (-E2BIG) is best treated alike: it could not
 * check that tool's calls. */
int tg_mcp26_xmap_build(const struct json_t *tool, tg_mcp26_xmap_t *map, char *msg, size_t cap);

/* ---- header vs body (streamable-http.mdx "Server Validation") ----------------- */

#define TG_MCP26_PARAM_HDRS_MAX 32 /* fixed internal bound: Mcp-Param-* headers of one request */

/* One header as received: name and value (optional white space around the
 * value removed), neither NUL-terminated. */
typedef struct tg_mcp26_hdr {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} tg_mcp26_hdr_t;

/* The request headers that mirror the body; a NULL value is an absent
 * header. <params> are the Mcp-Param-* headers with their full names
 * (names compared case-insensitively; other names are passed over). */
typedef struct tg_mcp26_hdrs {
    const char *method; /* Mcp-Method */
    size_t method_len;
    const char *name; /* Mcp-Name */
    size_t name_len;
    const tg_mcp26_hdr_t *params;
    size_t nparams;
} tg_mcp26_hdrs_t;

/* Check the headers <h> of a 2026 request against its body <b> (scanned by
 * tg_mcp26_body_scan), and, for tools/call, its Mcp-Param-* headers
 * against <map>, the x-mcp-header map of the tool the body calls (NULL: the
 * tool has none). Rules:
 *   - Mcp-Method: required on a request (checked when present on a
 *     notification), byte-equal to the body's method;
 *   - Mcp-Name: required on tools/call and prompts/get (params.name) and
 *     resources/read (params.uri), decoded (Base64 sentinel) and equal to
 *     that string; refused on any other method, which has no name to
 *     match;
 *   - per annotated property: its value in params.arguments at the
 *     property's path (a key there may appear once). A string, integer or
 *     boolean value needs its Mcp-Param-{Name} header, once, which decoded
 *     must equal it: a string byte for byte (one holding \u0000, or over
 *     TG_MCP26_VALUE_MAX bytes, never matches), a boolean as "true" /
 *     "false", a number numerically ("42.0" is 42; exactly, in decimal); an integer
 *     property's value must be an integer within +-(2^53 - 1). No value (or
 *     null): the header must be absent. Any other value cannot be mirrored:
 *     refused;
 *   - an Mcp-Param-* header the map does not name is passed over (an
 *     intermediary forwards and ignores it, streamable-http.mdx).
 * Returns 0; -EBADMSG with <f> filled (-32020, which header and why);
 * -E2BIG with <f> filled (-32600) when <nparams> is over
 * TG_MCP26_PARAM_HDRS_MAX. */
int tg_mcp26_check(const tg_mcp26_hdrs_t *h, const tg_mcp26_body_t *b, const tg_mcp26_xmap_t *map,
                   tg_mcp26_fault_t *f);

#endif
