/* bridge26: what a 2026 client sees of a 2025-era (initialize handshake,
 * server-to-client requests) stdio server, as pure translations. The
 * runtime (not here) keeps the 2025 server initialized, parks a call
 * while the server waits on its own requests to the client, and seals
 * the requestState (router/codec/seal.h); these functions only turn one
 * JSON message into another.
 *
 * Spec: MCP 2026-07-28, /work/spec/docs/specification/2026-07-28/ and
 * schema/2026-07-28/schema.ts; each function names its section.
 *
 * Pure: no libuv, no I/O, no clock, no randomness. jansson values in and
 * out; a returned json_t * is a new reference the caller releases, an
 * argument is borrowed (never stolen, never kept) unless said otherwise.
 *
 * Errors: 0 or a negative errno, as the codec room's runtime calls; where
 * a peer's message is refused, <why> (<cap> bytes, NUL-terminated, may be
 * NULL) says what is wrong in one line that names the member, for the
 * JSON-RPC error's message. It is written on failure only.
 *
 * Bounds. Input requests per InputRequiredResult: TG_B26_INPUTS_MAX.
 * Sizes are not checked here: every message reached the runtime as a
 * frame already held to max_frame_bytes, and the caller checks each
 * message it builds from these results (an InputRequiredResult quotes the
 * server's requests, so it can be a few bytes longer than they were)
 * against max_frame_bytes before sending it.
 */
#ifndef TG_ROUTER_CODEC_BRIDGE26_H
#define TG_ROUTER_CODEC_BRIDGE26_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define TG_B26_VERSION "2026-07-28" /* the one version the bridge speaks to clients */
/* fixed internal bound: input requests in one InputRequiredResult */
#define TG_B26_INPUTS_MAX 16
#define TG_B26_KEY_LEN    24 /* bytes of an inputRequests key buffer, NUL included */

/* The 2026 `_meta` keys (basic/index.mdx, "Per-request protocol fields";
 * schema.ts RequestMetaObject, ResultMetaObject). */
#define TG_B26_META_VERSION  "io.modelcontextprotocol/protocolVersion"
#define TG_B26_META_CINFO    "io.modelcontextprotocol/clientInfo"
#define TG_B26_META_CCAPS    "io.modelcontextprotocol/clientCapabilities"
#define TG_B26_META_LOGLEVEL "io.modelcontextprotocol/logLevel"
#define TG_B26_META_SINFO    "io.modelcontextprotocol/serverInfo"

/* cacheScope (server/utilities/caching.mdx, "Cache Scope Field"). */
typedef enum tg_b26_scope { TG_B26_PUBLIC = 0, TG_B26_PRIVATE = 1 } tg_b26_scope_t;

/* The three server-to-client requests MRTR carries (basic/patterns/mrtr.mdx,
 * "InputRequests": ElicitRequest, CreateMessageRequest, ListRootsRequest). */
typedef enum tg_b26_kind {
    TG_B26_SAMPLING = 1,    /* sampling/createMessage */
    TG_B26_ELICITATION = 2, /* elicitation/create */
    TG_B26_ROOTS = 3,       /* roots/list */
} tg_b26_kind_t;

/* One request of the 2025 server waiting on the client, as the runtime
 * keeps it with the parked call: the key it goes under in inputRequests
 * (the client's inputResponses come back under the same key) and the
 * server's own JSON-RPC id to answer it with. The key is "<kind>_<index>"
 * ("elicitation_0", "sampling_1", "roots_2"): unique within one
 * InputRequiredResult (mrtr.mdx: keys MUST be unique within the request),
 * readable in a client's UI, and free of the server's ids. Owned by the
 * caller; tg_b26_pending_clear releases <id>. */
typedef struct tg_b26_pending {
    char key[TG_B26_KEY_LEN];
    tg_b26_kind_t kind;
    json_t *id; /* a new reference to a copy of the server's id (string or integer) */
} tg_b26_pending_t;

void tg_b26_pending_clear(tg_b26_pending_t *p);

/* ---- results ---- */

/* Flags of tg_b26_discover. */
/* drop listChanged and resources.subscribe: the runtime does not bridge
 * subscriptions/listen (yet) */
#define TG_B26_NO_NOTIFY 1u

/* The DiscoverResult (server/discover.mdx, "Response"; schema.ts
 * DiscoverResult, a CacheableResult) for a 2025 server from its
 * InitializeResult <init> (the `result` member of its answer to
 * initialize): resultType "complete", supportedVersions [TG_B26_VERSION]
 * (what the bridge speaks, not the server's own protocolVersion), its
 * capabilities less `tasks` (2025-11-25's experimental tasks moved to the
 * io.modelcontextprotocol/tasks extension in 2026, changelog major 6, and
 * the bridge does not translate them), serverInfo as
 * _meta["io.modelcontextprotocol/serverInfo"], instructions when it had
 * some, <ttl_ms> and <scope>. NULL (with <why>) when <init> is not an
 * InitializeResult (object with a string protocolVersion, an object
 * capabilities, a serverInfo with string name and version, instructions a
 * string if present) or <ttl_ms> is negative. */
json_t *tg_b26_discover(const json_t *init, int64_t ttl_ms, tg_b26_scope_t scope, unsigned flags,
                        char *why, size_t cap);

/* Make 2025 result <result> (an object, changed in place) a 2026 result
 * (changelog major 8; schema.ts Result.resultType): resultType "complete",
 * whatever the server wrote there, and no inputRequests or requestState
 * members, so a 2025 server can never steer a client into a multi
 * round-trip of its own making (only the bridge mints those). With
 * <server_info> (an Implementation object, or NULL) also
 * _meta["io.modelcontextprotocol/serverInfo"] (basic/index.mdx: servers
 * SHOULD identify themselves in each result). 0, or -EINVAL (<result> or
 * its _meta not an object, <server_info> not an object). */
int tg_b26_complete(json_t *result, const json_t *server_info);

/* tg_b26_complete, then the caching hints a list result
 * (tools/prompts/resources/templates list, resources/read, server/discover)
 * MUST carry (server/utilities/caching.mdx, "Cacheable Results"): ttlMs
 * (<ttl_ms>, MUST be >= 0) and cacheScope. 0, or -EINVAL. */
int tg_b26_cacheable(json_t *result, int64_t ttl_ms, tg_b26_scope_t scope,
                     const json_t *server_info);

/* The cacheScope for a result of <method> (caching.mdx, "Choosing a
 * Cache Scope"): private when <filtered> (a caller policy hid entries:
 * the list varies per caller), and for resources/list and resources/read
 * (a 2025 server gives no hint and resources commonly depend on the
 * user), and for any other method; public for tools/list, prompts/list,
 * resources/templates/list and server/discover otherwise ("identical for
 * all users"). */
tg_b26_scope_t tg_b26_scope_for(const char *method, bool filtered);

/* A 2025 error code as 2026 spells it: -32002 (resource not found) is
 * -32602 (changelog minor 6); every other code is unchanged. */
int tg_b26_error_code(int code);

/* ---- multi round-trip requests ---- */

/* Whether a client declaring <caps> (its
 * _meta["io.modelcontextprotocol/clientCapabilities"], may be NULL) may be
 * sent a <kind> input request with <params> (mrtr.mdx: servers MUST NOT
 * send input requests the client has not declared): sampling needs
 * `sampling`, and `sampling.tools` when params carry tools or toolChoice,
 * `sampling.context` when includeContext is other than "none"
 * (client/sampling.mdx); elicitation needs the mode asked (params.mode,
 * "form" when absent) among `elicitation`'s, an empty `elicitation`
 * meaning form only (client/elicitation.mdx); roots needs `roots`. */
bool tg_b26_client_supports(const json_t *caps, tg_b26_kind_t kind, const json_t *params);

/* One entry of an InputRequiredResult's inputRequests (mrtr.mdx,
 * "InputRequests"; schema.ts InputRequest: { method, params }, no jsonrpc,
 * no id) from <req>, a JSON-RPC request the 2025 server sent toolgate
 * during a call, the <index>th of this InputRequiredResult. Fills <pend>
 * (key, kind, a copy of the server's id) and <*entry> (a new reference).
 * params are copied, less elicitationId (URL mode: removed in 2026,
 * changelog minor 11); the server's params._meta is kept.
 * Returns 0; -EINVAL (not a JSON-RPC 2.0 request with a string or integer
 * id, params not an object, a sampling or elicitation without params);
 * -EOPNOTSUPP (a method that is not an input request, such as ping, which
 * the runtime answers itself, or a task-augmented request, params.task,
 * whose answer would be a task the bridge does not run): answer the
 * server with an error; -ENOPROTOOPT (the client did not declare what it
 * takes, see tg_b26_client_supports; <caps> is the client's): answer the
 * server with an error; -ERANGE (<index> not below TG_B26_INPUTS_MAX).
 * <pend> and <*entry> are untouched on failure. */
int tg_b26_input_request(const json_t *req, const json_t *caps, size_t index,
                         tg_b26_pending_t *pend, json_t **entry, char *why, size_t cap);

/* The InputRequiredResult (mrtr.mdx, "InputRequiredResult"; schema.ts
 * InputRequiredResult): resultType "input_required", inputRequests made of
 * <entries> (borrowed; <n> of them) under the keys of <pend>, and
 * requestState <state> (the sealed token, or NULL). No caching hints
 * (caching.mdx: interim results are not cacheable). NULL (with <why>)
 * when <n> is over TG_B26_INPUTS_MAX, two keys are equal, an entry is not
 * an object, or there is neither an entry nor a state (schema.ts: at least
 * one of inputRequests or requestState MUST be present). */
json_t *tg_b26_input_required(const tg_b26_pending_t *pend, json_t *const *entries, size_t n,
                              const char *state, char *why, size_t cap);

/* The JSON-RPC responses for the 2025 server from the retried request's
 * <params> (mrtr.mdx, "InputResponses"; schema.ts
 * InputResponseRequestParams.inputResponses): for each of the <n> requests
 * in <pend>, out[i] = {"jsonrpc":"2.0","id":<its id>,"result":<the entry
 * under its key>}. Each entry is checked against its kind's result
 * (ElicitResult: action accept/decline/cancel, content an object of
 * primitives or string arrays; CreateMessageResult: role, content an
 * object or array, model a string; ListRootsResult: roots an array of
 * objects with a string uri), so the server is never handed what it could
 * not parse. Keys not in <pend> are ignored (mrtr.mdx, "Error Handling":
 * the server SHOULD ignore what it does not recognize) and counted in
 * <*extra> (may be NULL) for the caller to log or refuse.
 * Returns 0 (all <n> answered); -ENOENT (some keys missing, or no
 * inputResponses at all: out[i] is NULL for those, filled for the others;
 * <why> names the first missing key; mrtr.mdx: the server SHOULD ask
 * again with a new InputRequiredResult rather than fail); -EINVAL (params
 * or inputResponses not an object, an entry malformed: <why> names it;
 * out[] all NULL). On 0 and -ENOENT the filled out[i] are new references. */
int tg_b26_input_responses(const json_t *params, const tg_b26_pending_t *pend, size_t n,
                           json_t **out, size_t *extra, char *why, size_t cap);

/* A JSON-RPC error response {"jsonrpc":"2.0","id":<id>,"error":{code,
 * message}} for the 2025 server: a request it sent that the client cannot
 * take, or will never answer (the parked call expired or its caller left),
 * so the server stops waiting. NULL when out of memory. */
json_t *tg_b26_server_error(const json_t *id, int code, const char *message);

/* ---- requests ---- */

/* Strip from 2026 request <req> (a JSON-RPC request object, changed in
 * place) what a 2025 server must not see (it would take an unknown param
 * for its own, or refuse it): params.inputResponses and
 * params.requestState (mrtr.mdx: the bridge answers those itself), and in
 * params._meta the per-request protocol fields of basic/index.mdx,
 * io.modelcontextprotocol/protocolVersion, /clientInfo and
 * /clientCapabilities (the 2025 server had them once, at initialize) and
 * /logLevel (2025 sets it per session with logging/setLevel); a _meta
 * left empty goes. Other _meta keys (progressToken, traceparent, ...)
 * stay. 0, or -EINVAL (<req> or its params or _meta not objects). */
int tg_b26_strip_request(json_t *req);

#endif
