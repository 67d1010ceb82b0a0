/* The key table (see keys.h): every config key, one row each, and the
 * functions that find rows and read or write the value a row names.
 *
 * Rows are in document order, section by section (router, audit, agents,
 * store, containment, callers): an unknown key's message lists a
 * section's keys in this order. Bounds and defaults are config.h's
 * TG_DEF_* and ceilings, so the numbers live in one place.
 */
#include "config/keys.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"

/* The table's shorthands (clang-format would put one field per line). */
/* clang-format off */

/* Where a row's value lives: the object, the field, its source. */
#define AT(O, T, m)   .obj = O, .off = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define IN_CFG(m)     AT(TG_KO_CFG, tg_config_t, m)
#define IN_AGENT(m)   AT(TG_KO_AGENT, tg_agent_cfg_t, m)
#define IN_LIM(m)     AT(TG_KO_LIM, tg_exec_limits_t, m)
#define LIM_SRC(s)    .src_off = offsetof(tg_exec_limits_t, s) + 1
#define IN_RES(m, s)  AT(TG_KO_RES, tg_resources_t, m), .src_off = offsetof(tg_resources_t, s) + 1
#define IN_ITEM(T, m) AT(TG_KO_ITEM, T, m)
#define CHOICES(...)  .choices = (const char *const[]){__VA_ARGS__, NULL}

#define R       TG_KS_ROUTER
#define AG      TG_KS_AGENT
#define AU      TG_KS_AUDIT
#define ST      TG_KS_STORE
#define CO      TG_KS_CONTAINMENT
#define LIVE    TG_RELOAD_LIVE
#define AGENT   TG_RELOAD_AGENT
#define RESTART TG_RELOAD_RESTART

#define KT(t)           TG_KT_##t
#define LIMIT           TG_KF_LIMIT
#define CHECK           TG_KF_CHECK
#define MANIFEST        TG_KF_MANIFEST
#define SINK_ALL        (TG_KF_SINK_FILE | TG_KF_SINK_STDERR | TG_KF_SINK_REDIS)
#define NOCLI           0xff
#define CLI_AT(base, i) ((base) == NOCLI ? 0 : (base) + (i))

/* The five call limits of a scope <P> (agents[].execution_limits, a tool,
 * a caller) in section <S>: <F> its flags, <B> the --limit place before
 * the first (NOCLI: none), <D> whether the defaults apply (the agent's) or
 * the key is unset until set (a tool's, a caller's). */
#define CALL_LIMIT_ROWS(P, S, F, B, D)                                                            \
    {P ".max_tool_call_duration", KT(DURATION), S, LIVE, LIMIT | (F), 1, TG_MAX_DURATION_CEIL_MS, \
     (D) ? "15s" : "", .cli = CLI_AT(B, 1), IN_LIM(max_tool_call_duration_ms),                    \
     LIM_SRC(duration_src),                                                                       \
     .help = "How long one tools/call may run; past it the call is answered with a timeout "      \
             "denial (a tool's and its agent's: the smaller one ends the call)."},                \
    {P ".max_concurrent_calls", KT(COUNT), S, LIVE, LIMIT | (F), 1, TG_MAX_CONCURRENT_CEIL,       \
     (D) ? "3" : "", .cli = CLI_AT(B, 2), IN_LIM(max_concurrent_calls), LIM_SRC(concurrent_src),  \
     .help = "Calls in flight at once; more wait in the queue."},                                 \
    {P ".max_queued_calls", KT(COUNT), S, LIVE, LIMIT | (F), 0, TG_MAX_QUEUED_CEIL,               \
     (D) ? "16" : "", .cli = CLI_AT(B, 3), IN_LIM(max_queued_calls), LIM_SRC(queued_src),         \
     .help = "Calls waiting for a concurrency slot; 0 refuses as soon as every slot is busy."},   \
    {P ".rate_limit", KT(RATE), S, LIVE, LIMIT | (F), 1, TG_RATE_COUNT_CEIL,                      \
     (D) ? "60/minute" : "", .cli = CLI_AT(B, 4), IN_LIM(rate_limit), LIM_SRC(rate_src),          \
     .help = "Calls admitted per second, minute or hour (GCRA: spread evenly, burst on top)."},   \
    {P ".burst", KT(COUNT), S, LIVE, LIMIT | TG_KF_FOLLOWS_RATE | (F), 1, TG_BURST_CEIL, "",     \
     .cli = CLI_AT(B, 5), IN_LIM(burst), LIM_SRC(burst_src),                                      \
     .help = "Calls the rate admits back to back after a quiet spell; default: the rate's "       \
             "count."}

/* A resource written as {"limit": V, "request": V}: the row --limit,
 * check and validation use, then its two members. */
#define RESOURCE_ROWS(N, T, F, MIN, MAX, DEF, CLI, M, S, HELP)                                    \
    {"agents[].resources." N, KT(T), AG, AGENT, LIMIT | MANIFEST | TG_KF_LIMIT_OBJ | (F), MIN,    \
     MAX, DEF, .cli = CLI, IN_RES(M, S), .help = HELP},                                           \
    {"agents[].resources." N ".limit", KT(T), AG, AGENT, MANIFEST | ((F) & TG_KF_BARE_INT), MIN,   \
     MAX, DEF, IN_RES(M, S), .help = "The limit toolgate enforces (see the resource)."},           \
    {"agents[].resources." N ".request", KT(T), AG, AGENT, MANIFEST | ((F) & TG_KF_BARE_INT), MIN, \
     MAX, "", .help = "What the agent needs at least: a scheduling hint, checked for its unit "    \
                      "and bounds and not used otherwise."}

const tg_cfg_key_t tg_cfg_keys[] = {
    /* ---- the top level ---- */
    {"router", KT(OBJECT), R, RESTART, 0, 0, 0, "",
     .help = "This toolgate: its name, frame cap, listeners, callers and admin endpoint. "
             "listen's modes and owners and callers_only reload in place."},
    {"audit", KT(OBJECT), AU, RESTART, 0, 0, 0, "", .load = tg__cfg_load_audit,
     .help = "Where the audit trail goes and how much of it may wait in memory."},
    {"agents", KT(ARRAY), AG, RESTART, 0, 0, 0, "", .load = tg__cfg_load_agents,
     .help = "The agents toolgate runs and limits; replaces wrap mode's single agent. Adding, "
             "removing or reordering agents needs a restart."},
    {"store", KT(OBJECT), ST, RESTART, 0, 0, 0, "", .load = tg__cfg_load_store,
     .help = "Where shared rate buckets and concurrency slots live (local, or a Redis shared "
             "by several toolgates)."},
    {"containment", KT(OBJECT), CO, RESTART, 0, 0, 0, "",
     .help = "How agents' resources are enforced on this host."},
    {"callers", KT(ARRAY), R, RESTART, 0, 0, 0, "", .load = tg__cfg_load_callers,
     .help = "Who a serve caller is (by its uid or gid, or over HTTP by a bearer token or a "
             "JWT) and the limits on top of agent and tool limits that apply to it."},
    {"policy", KT(OBJECT), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy,
     .help = "Who may call what: ordered rules, the first that matches decides, else the "
             "default. One decision filters tools/list, prompts/list and resources/list and "
             "refuses tools/call, prompts/get and resources/read (tool_not_allowed), so a denied "
             "tool is never listed. A reload applies a changed policy to live sessions."},

    /* ---- router (cfg_router.c) ---- */
    {"router.instance", KT(STRING), R, RESTART, TG_KF_EMPTY_OK, 0, 0, "",
     IN_CFG(instance), .check = tg__cfg_check_instance,
     .help = "This toolgate's name in audit events, metrics and denials; default: the host "
             "name (bytes outside the name set become '_')."},
    {"router.max_frame_bytes", KT(BYTES), R, RESTART, LIMIT | TG_KF_BARE_INT,
     TG_MIN_FRAME_BYTES, TG_MAX_FRAME_BYTES_CEIL, "4Mi", .cli = 1,
     IN_CFG(max_frame_bytes), .src_off = offsetof(tg_config_t, max_frame_src) + 1,
     .help = "The largest frame a caller or an agent may send; a larger one is answered with "
             "frame_too_large and skipped."},
    {"router.listen", KT(ARRAY), R, RESTART, 0, 0, 0, "", .load = tg__cfg_load_listen,
     .help = "serve: the Unix sockets to accept callers on, each for one MCP agent or for every "
             "opensentience agent."},
    {"router.listen[].unix", KT(STRING), R, RESTART, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, unix_path), .check = tg__cfg_check_unix_path,
     .help = "The socket's absolute path (at most 107 bytes)."},
    {"router.listen[].agent", KT(STRING), R, RESTART, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, agent),
     .help = "mcp: the id of the agent this socket serves (one instance per connection); or "
             "give agents instead."},
    {"router.listen[].agents", KT(LIST), R, RESTART, 0, 0, 0, "",
     .load = tg__cfg_load_listen_agents,
     .help = "mcp, instead of agent: the ids of the agents this endpoint fronts together (1 to "
             "1024, each once, each an mcp agent of agents[]). Their tools and prompts are "
             "exposed as PREFIX__NAME, PREFIX being the agent's tool_prefix or else its id, even "
             "for a list of one, so adding an agent renames nothing."},
    {"router.listen[].mode", KT(STRING), R, LIVE, 0, 0, 0777, "0660",
     IN_ITEM(tg_listen_cfg_t, mode), .load = tg__cfg_load_mode,
     .help = "The socket file's mode, in octal."},
    {"router.listen[].owner", KT(ID), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, owner), .load = tg__cfg_load_owner,
     .help = "The user the socket file is given to (a name or a uid); default: toolgate's."},
    {"router.listen[].group", KT(ID), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, group), .load = tg__cfg_load_owner,
     .help = "The group the socket file is given to (a name or a gid); default: toolgate's."},
    {"router.listen[].dialect", KT(ENUM), R, RESTART, 0, 0, 0, "mcp",
     CHOICES("mcp", "opensentience"), .noun = "a dialect", IN_ITEM(tg_listen_cfg_t, dialect),
     .help = "What callers speak: mcp (one agent), or opensentience (calls routed by tool_id)."},
    {"router.listen[].on_oversize", KT(ENUM), R, RESTART, 0, 0, 0, "reject",
     CHOICES("reject", "close"), .noun = "an oversize policy",
     IN_ITEM(tg_listen_cfg_t, on_oversize),
     .help = "opensentience: a caller's over-cap frame is answered and skipped, or also closes "
             "its connection."},
    {"router.listen[].max_connections", KT(COUNT), R, RESTART, TG_KF_ZERO_DEF, 1,
     TG_LISTEN_MAX_CONNECTIONS_CEIL, "256", IN_ITEM(tg_listen_cfg_t, max_connections),
     .help = "Connections at once; one more is refused and closed (a Unix listener answers "
             "concurrency_limit_exceeded, limit connections; an http listener 429). On an mcp "
             "listener, agent instances are bounded apart by the agent's max_instances (counted "
             "from each caller's initialize)."},
    {"router.listen[].http", KT(STRING), R, RESTART, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, http_addr), .check = tg__cfg_check_http_addr,
     .help = "An MCP Streamable HTTP endpoint instead of a socket: HOST:PORT (an IP literal or "
             "localhost; port 0: any free port). Off loopback it needs tls."},
    {"router.listen[].path", KT(STRING), R, RESTART, 0, 0, 0, TG_HTTP_DEF_PATH,
     IN_ITEM(tg_listen_cfg_t, http_path), .check = tg__cfg_check_http_path,
     .help = "http: the endpoint's path; other paths are answered 404."},
    {"router.listen[].tls", KT(OBJECT), R, RESTART, 0, 0, 0, "", .load = tg__cfg_load_tls,
     .help = "http: {\"cert\": PEM file, \"key\": PEM file} (TLS 1.2 or later, reloaded on "
             "SIGHUP), or \"off\" for plain HTTP off loopback (behind a TLS-terminating proxy)."},
    {"router.listen[].tls.cert", KT(STRING), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, tls_cert), .check = tg__cfg_check_abs_path,
     .help = "The certificate chain, PEM, leaf first."},
    {"router.listen[].tls.key", KT(STRING), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_listen_cfg_t, tls_key), .check = tg__cfg_check_abs_path,
     .help = "The private key, PEM, not encrypted."},
    {"router.listen[].allowed_origins", KT(LIST), R, RESTART, 0, 0, 0, "",
     .load = tg__cfg_load_origins,
     .help = "http: the Origin header values accepted (\"https://app.example\"); a request "
             "with any other Origin is answered 403 (DNS-rebinding guard). Requests without "
             "Origin (non-browser clients) are not affected."},
    {"router.listen[].max_header_bytes", KT(BYTES), R, RESTART, TG_KF_BARE_INT | TG_KF_ZERO_DEF,
     TG_HTTP_MIN_HEADER_BYTES, TG_HTTP_MAX_HEADER_BYTES_CEIL, "16Ki",
     IN_ITEM(tg_listen_cfg_t, max_header_bytes),
     .help = "http: the largest request head; a larger one is answered 431."},
    {"router.listen[].max_requests_per_connection", KT(COUNT), R, RESTART, TG_KF_ZERO_DEF, 1,
     TG_HTTP_MAX_REQUESTS_CEIL, "10000", IN_ITEM(tg_listen_cfg_t, max_requests),
     .help = "http: requests on one connection; the last is answered with Connection: close."},
    {"router.listen[].header_timeout", KT(DURATION), R, RESTART, TG_KF_ZERO_DEF,
     TG_HTTP_MIN_TIMEOUT_MS, TG_HTTP_TIMEOUT_CEIL_MS, "10s",
     IN_ITEM(tg_listen_cfg_t, header_timeout_ms),
     .help = "http: a request's head and body must arrive within this once begun (slowloris); "
             "else 408 and the connection is closed (audited, reason frame_timeout). Unset: "
             "router.frame_timeout."},
    {"router.listen[].keepalive_timeout", KT(DURATION), R, RESTART, TG_KF_ZERO_DEF,
     TG_HTTP_MIN_TIMEOUT_MS, TG_HTTP_TIMEOUT_CEIL_MS, "60s",
     IN_ITEM(tg_listen_cfg_t, keepalive_timeout_ms),
     .help = "http: a connection waiting for its next request this long is closed."},
    {"router.listen[].max_sessions", KT(COUNT), R, RESTART, TG_KF_ZERO_DEF, 1,
     TG_HTTP_MAX_SESSIONS_CEIL, "256", IN_ITEM(tg_listen_cfg_t, max_sessions),
     .help = "http: MCP sessions open at once on this listener (each has its own agent "
             "instance, bounded too by the agent's max_instances); one more initialize is "
             "answered 503."},
    {"router.listen[].max_sessions_per_caller", KT(COUNT), R, RESTART, TG_KF_ZERO_DEF, 1,
     TG_HTTP_MAX_SESSIONS_CEIL, "64", IN_ITEM(tg_listen_cfg_t, sessions_per_caller),
     .help = "http: MCP sessions one caller may hold open on this listener; one more "
             "initialize is answered 429."},
    {"router.listen[].session_idle_timeout", KT(DURATION), R, RESTART, TG_KF_ZERO_DEF,
     TG_HTTP_MIN_TIMEOUT_MS, TG_HTTP_SESSION_IDLE_CEIL_MS, "30m",
     IN_ITEM(tg_listen_cfg_t, session_idle_ms),
     .help = "http: a session with no request and no open stream this long is ended (its "
             "agent instance stops); its id is then answered 404."},
    {"router.callers_only", KT(BOOL), R, LIVE, 0, 0, 0, "false", IN_CFG(callers_only),
     .help = "serve: refuse peers that match no callers[] entry."},
    {"router.idle_timeout", KT(DURATION), R, RESTART, 0, 1, TG_MAX_DURATION_CEIL_MS, "30s",
     IN_CFG(idle_timeout_ms),
     .help = "serve: a caller that does not read its answers this long is disconnected."},
    {"router.frame_timeout", KT(DURATION), R, RESTART, 0, 1, TG_MAX_DURATION_CEIL_MS, "10s",
     IN_CFG(frame_timeout_ms),
     .help = "serve: a frame a caller has begun (a line, an OpenSentience length prefix or "
             "its payload) must be complete this long after its first byte, however the bytes "
             "trickle in; else the connection is closed (audited, reason frame_timeout). Also "
             "the default of an http listener's header_timeout. Not for wrap's stdin."},
    {"router.handshake_timeout", KT(DURATION), R, LIVE, 0, 1, TG_MAX_DURATION_CEIL_MS, "10s",
     IN_CFG(handshake_timeout_ms),
     .help = "serve: an mcp connection that has not sent a complete initialize this long is "
             "closed (its agent instance starts only with the initialize). Reloads in place: "
             "applies to connections accepted after the reload."},
    {"router.reload_drain_timeout", KT(DURATION), R, LIVE, 0, 0, TG_MAX_DURATION_CEIL_MS, "5m",
     IN_CFG(reload_drain_timeout_ms),
     .help = "serve: after a reload replaces an mcp agent (command, env, resources...), its "
             "open sessions run on with their old instance and old limits until the caller "
             "leaves or this long has passed, then are drained and closed; 0 ends them at "
             "once. Reloads in place: applies to agents replaced after the reload."},
    {"router.admin", KT(OBJECT), R, RESTART, 0, 0, 0, "", .load = tg__cfg_load_admin,
     .help = "The admin HTTP endpoint (/metrics, /limits, /agents, /healthz): a loopback "
             "\"HOST:PORT\", or an object with listen and bounds."},
    {"router.admin.listen", KT(STRING), R, RESTART, 0, 0, 0, "", IN_CFG(admin_addr),
     .help = "The loopback HOST:PORT to listen on (port 0: any free port)."},
    {"router.admin.max_header_bytes", KT(BYTES), R, RESTART, TG_KF_BARE_INT | TG_KF_ZERO_DEF,
     TG_ADMIN_MIN_HEADER_BYTES, TG_ADMIN_MAX_HEADER_BYTES_CEIL, "8Ki",
     IN_CFG(admin_max_header_bytes),
     .help = "The largest request head; a larger one is answered 431."},
    {"router.admin.max_connections", KT(COUNT), R, RESTART, TG_KF_ZERO_DEF, 1,
     TG_ADMIN_MAX_CONNECTIONS_CEIL, "16", IN_CFG(admin_max_connections),
     .help = "Admin connections at once; more are closed on accept."},
    {"router.admin.idle_timeout", KT(DURATION), R, RESTART, TG_KF_ZERO_DEF,
     TG_ADMIN_MIN_IDLE_TIMEOUT_MS, TG_ADMIN_IDLE_TIMEOUT_CEIL_MS, "10s",
     IN_CFG(admin_idle_timeout_ms),
     .help = "An admin connection without a complete request this long is closed."},
    {"router.admin.max_response_bytes", KT(BYTES), R, RESTART, TG_KF_BARE_INT | TG_KF_ZERO_DEF,
     TG_ADMIN_MIN_RESPONSE_BYTES, TG_ADMIN_MAX_RESPONSE_BYTES_CEIL, "16Mi",
     IN_CFG(admin_max_response_bytes),
     .help = "The largest admin response; a larger one is answered 500."},

    /* ---- audit (cfg_audit.c) ---- */
    {"audit.path", KT(STRING), AU, RESTART, 0, 0, 0, "", IN_CFG(audit_path),
     .load = tg__cfg_load_audit_path,
     .help = "Shorthand for one file sink with the default rotation; default: "
             "$XDG_STATE_HOME/toolgate/audit.jsonl. Not with sinks."},
    {"audit.queue", KT(COUNT), AU, RESTART, 0, 1, TG_AUDIT_QUEUE_CEIL, "4096",
     IN_CFG(audit_queue),
     .help = "Events waiting for the sinks; past it events are dropped, and counted."},
    {"audit.sinks", KT(ARRAY), AU, RESTART, 0, 0, 0, "", .load = tg__cfg_load_sinks,
     .help = "Where events are written: up to 8 sinks, each gets every event."},
    {"audit.sinks[].kind", KT(ENUM), AU, RESTART, SINK_ALL, 0, 0, "",
     CHOICES("file", "stderr", "redis_stream"), .noun = "a sink kind",
     .load = tg__cfg_load_sink_kind,
     .help = "file (JSON lines, rotated), stderr, or redis_stream (XADD, spooled while Redis "
             "is away). Required; it decides the sink's other keys."},
    {"audit.sinks[].path", KT(STRING), AU, RESTART, TG_KF_SINK_FILE, 0, 0, "",
     IN_ITEM(tg_audit_sink_cfg_t, path),
     .help = "file: the file events are appended to (required)."},
    {"audit.sinks[].max_bytes", KT(BYTES), AU, RESTART, TG_KF_SINK_FILE | TG_KF_BARE_INT,
     TG_AUDIT_MAX_BYTES_MIN, TG_AUDIT_MAX_BYTES_CEIL, "100Mi",
     IN_ITEM(tg_audit_sink_cfg_t, max_bytes),
     .help = "file: rotate before a line would take the file past this."},
    {"audit.sinks[].keep", KT(COUNT), AU, RESTART, TG_KF_SINK_FILE, 0, TG_AUDIT_KEEP_CEIL, "5",
     IN_ITEM(tg_audit_sink_cfg_t, keep),
     .help = "file: rotated files kept (path.1 newest); 0 empties the file in place."},
    {"audit.sinks[].fsync", KT(ENUM), AU, RESTART, TG_KF_SINK_FILE, 0, 0, "interval",
     CHOICES("interval", "always", "never"), .noun = "an fsync policy",
     IN_ITEM(tg_audit_sink_cfg_t, fsync),
     .help = "file: when written lines are made durable."},
    {"audit.sinks[].fsync_interval", KT(DURATION), AU, RESTART, TG_KF_SINK_FILE, 1,
     TG_AUDIT_FSYNC_CEIL_MS, "1s", IN_ITEM(tg_audit_sink_cfg_t, fsync_interval_ms),
     .help = "file, fsync interval: at most one fsync per this."},
    {"audit.sinks[].url", KT(STRING), AU, RESTART, TG_KF_SINK_REDIS | TG_KF_SECRET, 0, 0, "",
     IN_ITEM(tg_audit_sink_cfg_t, url), .check = tg__cfg_check_redis_url,
     .help = "redis_stream: the server, redis://[[user]:password@]host[:port][/db] or "
             "unix:/path[?db=N] (required; never echoed)."},
    {"audit.sinks[].stream", KT(STRING), AU, RESTART, TG_KF_SINK_REDIS, 0, 0, TG_DEF_AUDIT_STREAM,
     IN_ITEM(tg_audit_sink_cfg_t, stream), .check = tg__cfg_check_stream,
     .help = "redis_stream: the stream's key."},
    {"audit.sinks[].maxlen", KT(COUNT), AU, RESTART, TG_KF_SINK_REDIS, 1, TG_AUDIT_MAXLEN_CEIL,
     "1000000", IN_ITEM(tg_audit_sink_cfg_t, maxlen),
     .help = "redis_stream: entries kept (XADD MAXLEN ~)."},
    {"audit.sinks[].spool", KT(STRING), AU, RESTART, TG_KF_SINK_REDIS, 0, 0, "",
     IN_ITEM(tg_audit_sink_cfg_t, spool),
     .help = "redis_stream: the file events wait in while Redis is away (required)."},
    {"audit.sinks[].spool_max_bytes", KT(BYTES), AU, RESTART,
     TG_KF_SINK_REDIS | TG_KF_BARE_INT, TG_AUDIT_SPOOL_MIN, TG_AUDIT_MAX_BYTES_CEIL, "100Mi",
     IN_ITEM(tg_audit_sink_cfg_t, spool_max_bytes),
     .help = "redis_stream: the spool's bound; past it events are lost, and counted."},
    {"audit.sinks[].timeout", KT(DURATION), AU, RESTART, TG_KF_SINK_REDIS, 1,
     TG_AUDIT_REDIS_TIMEOUT_CEIL_MS, "1s", IN_ITEM(tg_audit_sink_cfg_t, timeout_ms),
     .help = "redis_stream: connect and command timeout."},

    /* ---- agents (cfg_agent.c) ---- */
    {"agents[].id", KT(STRING), AG, RESTART, TG_KF_EMPTY_OK, 0, 0, "", IN_AGENT(id),
     .check = tg__cfg_check_agent_id,
     .help = "The agent's name in config paths, denials and audit (required; wrap mode: the "
             "command's basename)."},
    {"agents[].tool_prefix", KT(STRING), AG, RESTART, TG_KF_EMPTY_OK, 0, 0, "",
     IN_AGENT(tool_prefix), .check = tg__cfg_check_tool_prefix,
     .help = "On a listener with agents: what the agent's tool and prompt names are prefixed "
             "with (PREFIX__NAME); \"\" exposes them unprefixed. At most 32 of A-Z a-z 0-9 . _ "
             "-, no \"__\", not ending in _. Default: the agent id."},
    {"agents[].dialect", KT(ENUM), AG, RESTART, 0, 0, 0, "mcp",
     CHOICES("mcp", "opensentience"), .noun = "a dialect", IN_AGENT(dialect),
     .help = "What the agent speaks: MCP over stdio, or OpenSentience frames."},
    {"agents[].command", KT(LIST), AG, AGENT, 0, 0, 0, "", .load = tg__cfg_load_command,
     .help = "The program and its arguments, run without a shell; wrap mode's -- CMD takes "
             "precedence."},
    {"agents[].execution_limits", KT(OBJECT), AG, LIVE, 0, 0, 0, "",
     .load = tg__cfg_load_exec_limits,
     .help = "The agent's call limits (a manifest may ask for stricter ones)."},
    CALL_LIMIT_ROWS("agents[].execution_limits", AG, CHECK | MANIFEST, 1, 1),
    {"agents[].execution_limits.kill_grace_period", KT(DURATION), AG, LIVE, LIMIT | CHECK, 1,
     TG_KILL_GRACE_CEIL_MS, "5s", .cli = 7, IN_AGENT(kill_grace_ms),
     .src_off = offsetof(tg_agent_cfg_t, kill_grace_src) + 1,
     .help = "How long a stopping agent gets between SIGTERM and SIGKILL (the operator's "
             "call: a manifest cannot ask)."},
    {"agents[].execution_limits.rate_scope", KT(ENUM), AG, LIVE, MANIFEST | TG_KF_CLI_VALID, 0,
     0, "local", CHOICES("local", "shared"), .noun = "a rate scope", .cli = 15,
     IN_AGENT(rate_shared),
     .help = "shared: the agent's rate bucket lives in the store, one for every toolgate."},
    {"agents[].execution_limits.shared_mode", KT(ENUM), AG, LIVE, MANIFEST | TG_KF_CLI_VALID, 0,
     0, "exact", CHOICES("exact", "lease"), .noun = "a shared mode", .cli = 16,
     IN_AGENT(shared_lease),
     .help = "exact: one store call per call; lease: batches of the rate leased ahead."},
    {"agents[].execution_limits.concurrency_scope", KT(ENUM), AG, LIVE,
     MANIFEST | TG_KF_CLI_VALID, 0, 0, "local", CHOICES("local", "shared"),
     .noun = "a concurrency scope", .cli = 18, IN_AGENT(conc_shared),
     .help = "shared: max_concurrent_calls is fleet-wide, held as leased slots in a redis "
             "store."},
    {"agents[].tools", KT(MAP), AG, LIVE, 0, 0, 0, "", .load = tg__cfg_load_tools,
     .help = "Per-tool limits by tool name, applied on top of the agent's."},
    CALL_LIMIT_ROWS("agents[].tools.*", AG, CHECK | TG_KF_OPTIONAL, 0, 0),
    {"agents[].tools.*.rate_scope", KT(ENUM), AG, LIVE, TG_KF_CLI_VALID, 0, 0, "local",
     CHOICES("local", "shared"), .noun = "a rate scope", .cli = 6, IN_LIM(rate_shared), .help = "shared: the tool's bucket lives in the store (needs its rate_limit)."},
    {"agents[].tools.*.shared_mode", KT(ENUM), AG, LIVE, 0, 0, 0, "", CHOICES("exact", "lease"),
     .noun = "a shared mode", .help = "Accepted for symmetry; the agent's shared_mode applies."},
    {"agents[].tools.*.concurrency_scope", KT(ENUM), AG, LIVE, 0, 0, 0, "local",
     CHOICES("local", "shared"), .noun = "a concurrency scope",
     .load = tg__cfg_load_tool_conc_scope,
     .help = "Only local: fleet-wide slots are per agent."},
    {"agents[].restart", KT(OBJECT), AG, AGENT, 0, 0, 0, "",
     .help = "When a crashed agent is started again, and how often at most."},
    {"agents[].restart.policy", KT(ENUM), AG, AGENT, 0, 0, 0, "on-failure",
     CHOICES("no", "on-failure", "always"), .noun = "a restart policy",
     IN_AGENT(restart_policy), .help = "Which exits are followed by a restart."},
    {"agents[].restart.max_restarts", KT(COUNT), AG, AGENT, 0, 0, TG_MAX_RESTARTS_CEIL, "5",
     IN_AGENT(max_restarts),
     .help = "Restarts within the window before toolgate gives up (0: never restart)."},
    {"agents[].restart.window", KT(DURATION), AG, AGENT, 0, 1, TG_MAX_DURATION_CEIL_MS, "1m",
     IN_AGENT(restart_window_ms), .help = "The window max_restarts counts in."},
    {"agents[].restart.backoff", KT(DURATION), AG, AGENT, 0, 1, TG_MAX_DURATION_CEIL_MS, "100ms",
     IN_AGENT(backoff_initial_ms), .help = "The first delay before a restart; it doubles."},
    {"agents[].restart.max_backoff", KT(DURATION), AG, AGENT, 0, 1, TG_MAX_DURATION_CEIL_MS,
     "5s", IN_AGENT(backoff_max_ms), .help = "The longest delay before a restart."},
    {"agents[].stderr", KT(OBJECT), AG, AGENT, 0, 0, 0, "",
     .help = "How much of the agent's stderr is relayed to toolgate's."},
    {"agents[].stderr.bytes_per_second", KT(BYTES), AG, AGENT, 0, 1, TG_STDERR_BPS_CEIL, "64Ki",
     IN_AGENT(stderr_bytes_per_sec), .help = "Relayed bytes per second; the rest is counted."},
    {"agents[].stderr.max_line", KT(BYTES), AG, AGENT, 0, 1, TG_STDERR_LINE_CEIL, "4Ki",
     IN_AGENT(stderr_line_max), .help = "A longer line is cut."},
    {"agents[].env", KT(OBJECT), AG, AGENT, 0, 0, 0, "",
     .help = "serve: the agent's environment (wrap passes the caller's unchanged)."},
    {"agents[].env.pass", KT(LIST), AG, AGENT, 0, 0, 0, "", .load = tg__cfg_load_env_pass,
     .help = "Names copied from toolgate's own environment."},
    {"agents[].env.set", KT(MAP), AG, AGENT, 0, 0, 0, "", .load = tg__cfg_load_env_set,
     .help = "NAME: value pairs set for the agent (values are never echoed)."},
    {"agents[].resources", KT(OBJECT), AG, AGENT, 0, 0, 0, "",
     .help = "The agent instance's resources, in the manifest format (a manifest may ask for "
             "stricter ones)."},
    RESOURCE_ROWS("memory", BYTES, CHECK | TG_KF_BARE_INT, TG_MEMORY_MIN, TG_MEMORY_CEIL, "512Mi",
                  8, memory_bytes, memory_src,
                  "Memory of an instance (cgroup memory.max, else RLIMIT_DATA and an RSS "
                  "monitor)."),
    RESOURCE_ROWS("cpu", MILLICORES, CHECK, TG_CPU_MIN_MC, TG_CPU_CEIL_MC, "1000m", 9,
                  cpu_millicores, cpu_src, "CPU of an instance, in cores or millicores (cpu.max)."),
    RESOURCE_ROWS("pids", COUNT, CHECK, 1, TG_PIDS_CEIL, "64", 10, pids, pids_src,
                  "Processes and threads of an instance (pids.max, else RLIMIT_NPROC)."),
    RESOURCE_ROWS("nofile", COUNT, 0, 16, TG_NOFILE_CEIL, "1024", 11, nofile, nofile_src,
                  "Open files of each process of an instance (RLIMIT_NOFILE)."),
    RESOURCE_ROWS("disk", BYTES, CHECK | TG_KF_BARE_INT, TG_DISK_MIN, TG_DISK_CEIL, "1Gi", 12,
                  disk_bytes, disk_src,
                  "The workspace's size, or each file's (RLIMIT_FSIZE) without a workspace."),
    {"agents[].resources.network", KT(NETWORK), AG, AGENT, LIMIT | CHECK | MANIFEST, TG_NET_FULL,
     TG_NET_NONE, "full", .cli = 13, IN_RES(network, network_src), .load = tg__cfg_load_network,
     .help = "none, loopback or full, or an object with limit, bandwidth_limit and "
             "max_connections."},
    {"agents[].resources.network.limit", KT(NETWORK), AG, AGENT, MANIFEST, TG_NET_FULL,
     TG_NET_NONE, "full", IN_RES(network, network_src),
     .help = "none (an own network namespace), loopback, or full (the host's)."},
    {"agents[].resources.network.bandwidth_limit", KT(BANDWIDTH), AG, AGENT,
     LIMIT | CHECK | MANIFEST | TG_KF_ADVISORY, TG_BANDWIDTH_MIN_BPS, TG_BANDWIDTH_CEIL_BPS, "",
     IN_RES(bandwidth_bps, bandwidth_src),
     .help = "Requested bandwidth: no backend shapes traffic, so it is reported not enforced "
             "(and refused under containment.mode required) unless network is none."},
    {"agents[].resources.network.max_connections", KT(COUNT), AG, AGENT,
     LIMIT | CHECK | MANIFEST | TG_KF_ADVISORY, 1, TG_CONNECTIONS_CEIL, "",
     IN_RES(max_connections, connections_src),
     .help = "Requested open connections: no backend counts them, so it is reported not "
             "enforced (and refused under containment.mode required) unless network is none."},
    {"agents[].cwd", KT(STRING), AG, AGENT, 0, 0, 0, "", IN_AGENT(cwd),
     .check = tg__cfg_check_abs_path,
     .help = "The working directory (absolute); default: toolgate's, or the workspace."},
    {"agents[].workspace", KT(STRING), AG, AGENT, 0, 0, 0, "", .cli = 19, IN_AGENT(workspace),
     .check = tg__cfg_check_workspace,
     .help = "A directory whose size is resources.disk, per instance (absolute, normalised)."},
    {"agents[].max_instances", KT(COUNT), AG, AGENT, 0, 1, TG_MAX_INSTANCES_CEIL, "8", .cli = 21,
     IN_AGENT(max_instances),
     .help = "serve: instances at once (one per initialized MCP session, Unix or HTTP)."},
    {"agents[].manifest", KT(STRING), AG, AGENT, 0, 0, 0, "", .load = tg__cfg_load_manifest,
     .help = "The agent's opensentience.agent.json, beside the config unless absolute: it only "
             "asks; each request is capped by the operator's value or else the default."},
    {"agents[].start", KT(ENUM), AG, AGENT, 0, 0, 0, "", CHOICES("eager", "on_demand"),
     .noun = "a start policy", IN_AGENT(start), .load = tg__cfg_load_start,
     .help = "serve: start the instance with serve (opensentience default) or at the first "
             "call (mcp: always)."},
    {"agents[].opensentience", KT(OBJECT), AG, LIVE, 0, 0, 0, "", .load = tg__cfg_load_os,
     .help = "The OpenSentience dialect's own settings (dialect opensentience only)."},
    {"agents[].opensentience.heartbeat_interval", KT(DURATION), AG, AGENT, 0,
     TG_OS_HEARTBEAT_MIN_MS, TG_OS_HEARTBEAT_CEIL_MS, "5s",
     IN_AGENT(os.heartbeat_interval_ms),
     .help = "The heartbeat interval announced in core.welcome."},
    {"agents[].opensentience.heartbeat_timeout", KT(DURATION), AG, LIVE, 0,
     TG_OS_HEARTBEAT_MIN_MS, TG_OS_HEARTBEAT_CEIL_MS, "15s", IN_AGENT(os.heartbeat_timeout_ms),
     .help = "Without a heartbeat this long the agent is unhealthy; also the hello deadline."},
    {"agents[].opensentience.idempotency_window", KT(DURATION), AG, LIVE, 0, 1,
     TG_OS_IDEM_WINDOW_CEIL_MS, "10m", IN_AGENT(os.idempotency_window_ms),
     .help = "How long a completed result is replayed for a repeated idempotency key."},
    {"agents[].opensentience.idempotency_max_bytes", KT(BYTES), AG, LIVE, TG_KF_BARE_INT, 1024,
     TG_OS_IDEM_MAX_BYTES_CEIL, "16Mi", IN_AGENT(os.idempotency_max_bytes),
     .help = "Cached results of the agent; the oldest are evicted first."},
    {"agents[].opensentience.on_oversize", KT(ENUM), AG, LIVE, 0, 0, 0, "reject",
     CHOICES("reject", "close"), .noun = "an oversize policy", IN_AGENT(os.on_oversize),
     .help = "An over-cap frame from the agent is skipped, or answered by restarting it."},

    /* ---- store (cfg_store.c) ---- */
    {"store.kind", KT(ENUM), ST, RESTART, 0, 0, 0, "local", CHOICES("local", "redis"),
     .noun = "a store kind", IN_CFG(store.redis),
     .help = "local: nothing shared; redis: shared buckets and slots (needs url)."},
    {"store.url", KT(STRING), ST, RESTART, TG_KF_SECRET, 0, 0, "", IN_CFG(store.url),
     .check = tg__cfg_check_store_url,
     .help = "redis://[user:password@]host:port/db or unix:/path?db=N (never echoed)."},
    {"store.timeout", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1, 60000, "50ms",
     IN_CFG(store.timeout_ms),
     .help = "One store call; past it on_store_error decides the call."},
    {"store.on_store_error", KT(ENUM), ST, RESTART, TG_KF_CLI_VALID, 0, 0, "local",
     CHOICES("local", "open", "closed"), .noun = "an on_store_error policy", .cli = 17,
     IN_CFG(store.on_store_error),
     .help = "While the store is away: local buckets (a share of the rate), admit, or refuse."},
    {"store.instances", KT(COUNT), ST, RESTART, TG_KF_ZERO_DEF, 1, 100000, "1",
     IN_CFG(store.instances),
     .help = "Toolgates sharing the limits: the local fallback's share is 1/instances."},
    {"store.prefix", KT(STRING), ST, RESTART, 0, 0, 0, "", IN_CFG(store.prefix),
     .check = tg__cfg_check_prefix, .help = "The key prefix; default: the store's."},
    {"store.connect_timeout", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1,
     TG_STORE_DURATION_CEIL_MS, "1s", IN_CFG(store.connect_timeout_ms),
     .help = "Connect, AUTH, SELECT and SCRIPT LOAD."},
    {"store.dead_after", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1,
     TG_STORE_DURATION_CEIL_MS, "1s", IN_CFG(store.dead_after_ms),
     .help = "No reply at all this long: reconnect."},
    {"store.backoff", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1, TG_STORE_DURATION_CEIL_MS,
     "100ms", IN_CFG(store.backoff_ms), .help = "The first reconnect delay; it doubles."},
    {"store.max_backoff", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1,
     TG_STORE_DURATION_CEIL_MS, "250ms", IN_CFG(store.max_backoff_ms),
     .help = "The longest reconnect delay: an instance is back on Redis at most this long "
             "(plus set-up) after Redis answers again."},
    {"store.lease", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, 1, TG_STORE_DURATION_CEIL_MS,
     "1s", IN_CFG(store.lease_ms), .help = "shared_mode lease: a lease's lifetime."},
    {"store.slot_lease", KT(DURATION), ST, RESTART, TG_KF_ZERO_DEF, TG_STORE_SLOT_LEASE_MIN_MS,
     TG_STORE_DURATION_CEIL_MS, "10s", IN_CFG(store.slot_lease_ms),
     .help = "A shared concurrency slot without renewal (renewed every third of it)."},
    {"store.max_pending", KT(COUNT), ST, RESTART, TG_KF_ZERO_DEF, 1, TG_STORE_MAX_PENDING_CEIL,
     "65536", IN_CFG(store.max_pending),
     .help = "Calls waiting for the store on the connection."},
    {"store.local_max_keys", KT(COUNT), ST, RESTART, TG_KF_ZERO_DEF, 1,
     TG_STORE_LOCAL_MAX_KEYS_CEIL, "65536", IN_CFG(store.local_max_keys),
     .help = "Buckets in one local table (the local store and the fallback)."},

    /* ---- containment (cfg_containment.c) ---- */
    {"containment.mode", KT(ENUM), CO, RESTART, 0, 0, 0, "best_effort",
     CHOICES("best_effort", "required", "off"), .noun = "a containment mode", .cli = 14,
     .cli_name = "containment", IN_CFG(containment_mode),
     .src_off = offsetof(tg_config_t, containment_src) + 1,
     .help = "best_effort: enforce what this host can; required: refuse to start an agent "
             "whose resources cannot all be enforced; off: none."},
    {"containment.min_free_memory", KT(BYTES), CO, RESTART, TG_KF_BARE_INT, 1,
     TG_MAX_FRAME_BYTES_CEIL * 1024 * 1024, "", IN_CFG(min_free_memory),
     .help = "Pre-flight: an instance starts only with this much memory free besides its "
             "recorded peak; default: no check."},
    {"containment.workspace_backend", KT(ENUM), CO, RESTART, 0, 0, 0, "auto",
     CHOICES("auto", "tmpfs", "scan"), .noun = "a workspace backend", .cli = 20,
     IN_CFG(workspace_backend),
     .help = "How a workspace's size is held: tmpfs per instance, a scanned directory, or "
             "auto (tmpfs where this host allows it)."},

    /* ---- callers[] (cfg_router.c) ---- */
    {"callers[].name", KT(STRING), R, RESTART, 0, 0, 0, "", IN_ITEM(tg_caller_cfg_t, name),
     .check = tg__cfg_check_caller_name,
     .help = "The caller's name in denials and audit (required; \"default\" matches "
             "everyone)."},
    {"callers[].uid", KT(ID), R, RESTART, 0, 0, 0, "", IN_ITEM(tg_caller_cfg_t, uid),
     .load = tg__cfg_load_caller_id, .help = "The peer's uid (SO_PEERCRED)."},
    {"callers[].gid", KT(ID), R, RESTART, 0, 0, 0, "", IN_ITEM(tg_caller_cfg_t, gid),
     .load = tg__cfg_load_caller_id, .help = "The peer's gid (SO_PEERCRED)."},
    {"callers[].execution_limits", KT(OBJECT), R, LIVE, 0, 0, 0, "",
     .load = tg__cfg_load_caller_limits,
     .help = "The caller's own limits, shared by its connections, on top of the agent's."},
    CALL_LIMIT_ROWS("callers[].execution_limits", R, TG_KF_OPTIONAL, NOCLI, 0),
    {"callers[].execution_limits.rate_scope", KT(ENUM), R, LIVE, 0, 0, 0, "local",
     CHOICES("local", "shared"), .noun = "a rate scope",
     .load = tg__cfg_load_caller_rate_scope,
     .help = "Only local: a caller's rate is per toolgate."},
    {"callers[].execution_limits.shared_mode", KT(ENUM), R, LIVE, 0, 0, 0, "",
     CHOICES("exact", "lease"), .noun = "a shared mode",
     .help = "Accepted for symmetry; a caller's rate is local."},
    {"callers[].execution_limits.concurrency_scope", KT(ENUM), R, LIVE, 0, 0, 0, "local",
     CHOICES("local", "shared"), .noun = "a concurrency scope",
     .load = tg__cfg_load_tool_conc_scope, .help = "Only local: fleet-wide slots are per agent."},
    {"callers[].tokens", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_caller_tokens,
     .help = "HTTP: the SHA-256 digests of the bearer tokens that name this caller, each "
             "\"sha256:\" and 64 hex digits (`toolgate token new` makes a token and its digest; "
             "the token itself is never stored). At most 16."},
    {"callers[].jwt", KT(OBJECT), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_caller_jwt,
     .help = "HTTP: JWTs (RS256 or ES256) that name this caller: signed by a key of jwks_file, "
             "from issuer, for audience, within their exp/nbf/iat, and with claim equal to the "
             "caller's name."},
    {"callers[].jwt.issuer", KT(STRING), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_caller_cfg_t, jwt.issuer),
     .help = "The \"iss\" a token must carry (required)."},
    {"callers[].jwt.audience", KT(STRING), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_caller_cfg_t, jwt.audience),
     .help = "The audience a token's \"aud\" (a string or an array) must hold (required)."},
    {"callers[].jwt.jwks_file", KT(STRING), R, LIVE, 0, 0, 0, "",
     IN_ITEM(tg_caller_cfg_t, jwt.jwks_file), .check = tg__cfg_check_abs_path,
     .help = "Absolute path of a local JWKS file holding the issuer's public keys (RSA, EC "
             "P-256; at most 16 keys, 64 KiB), read and checked at load (required)."},
    {"callers[].jwt.claim", KT(STRING), R, LIVE, 0, 0, 0, TG_DEF_JWT_CLAIM,
     IN_ITEM(tg_caller_cfg_t, jwt.claim), .check = tg__cfg_check_jwt_claim,
     .help = "The claim whose value must equal this caller's name."},
    {"callers[].jwt.leeway", KT(DURATION), R, LIVE, 0, 0, TG_JWT_LEEWAY_CEIL_MS, "30s",
     IN_ITEM(tg_caller_cfg_t, jwt.leeway_ms),
     .help = "Clock skew allowed when checking a token's exp, nbf and iat."},

    /* ---- policy (cfg_policy.c): its shape; the router reads it ---- */
    {"policy.default", KT(ENUM), R, LIVE, 0, 0, 0, "", CHOICES("allow", "deny"),
     .noun = "an effect",
     .help = "What a request no rule matches gets (required: there is no implicit default)."},
    {"policy.rules", KT(ARRAY), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_rules,
     .help = "The rules in order (at most 256); the first whose matchers all match decides. A "
             "matcher left out matches anything; one entry of a matcher matching is enough."},
    {"policy.rules[].effect", KT(ENUM), R, LIVE, 0, 0, 0, "", CHOICES("allow", "deny"),
     .noun = "an effect", .help = "What the rule decides when it matches (required)."},
    {"policy.rules[].callers", KT(LIST), R, LIVE, 0, 0, 0, "",
     .load = tg__cfg_load_policy_list,
     .help = "Globs on the callers[] name of who asks; an anonymous caller matches none."},
    {"policy.rules[].uids", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "Numeric uids of a Unix peer (SO_PEERCRED); a caller that is not a Unix peer "
             "matches none."},
    {"policy.rules[].gids", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "Numeric primary gids of a Unix peer, the same way."},
    {"policy.rules[].tokens", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "Globs on the name of the bearer token presented."},
    {"policy.rules[].claims", KT(MAP), R, LIVE, 0, 0, 0, "",
     .load = tg__cfg_load_policy_claims,
     .help = "{\"claim\": [values]}: each claim named must hold one of its values in the "
             "verified JWT; \"scope\" is read as a space-separated list and matches when the "
             "token holds one of the scopes listed."},
    {"policy.rules[].agents", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "Globs on the agent id; a glob that matches no configured agent is an error in "
             "check."},
    {"policy.rules[].tools", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "Globs (fnmatch) on the agent's own, unprefixed name: a tool's or prompt's name, a "
             "resource's URI or template."},
    {"policy.rules[].methods", KT(LIST), R, LIVE, 0, 0, 0, "", .load = tg__cfg_load_policy_list,
     .help = "tools/call, prompts/get or resources/read; each decides its list method too "
             "(tools/list, prompts/list, resources/list), so nothing is written twice."},
};
/* clang-format on */

const size_t tg_cfg_nkeys = sizeof tg_cfg_keys / sizeof tg_cfg_keys[0];

/* ------------------------------------------------------------------ */
/* Finding rows                                                        */

/* Whether <path> is <parent> followed by ".<rest>" (or <rest> alone at
 * the top level); <rest> is returned. */
static const char *below(const char *path, const char *parent)
{
    size_t pl = strlen(parent);

    if (pl == 0)
        return path;
    if (strncmp(path, parent, pl) != 0 || path[pl] != '.')
        return NULL;
    return path + pl + 1;
}

bool tg_cfg_key_under(const tg_cfg_key_t *k, const char *parent)
{
    return below(k->path, parent) != NULL;
}

bool tg_cfg_key_is_child(const tg_cfg_key_t *k, const char *parent)
{
    const char *rest = below(k->path, parent);
    return rest && !strpbrk(rest, ".[");
}

const tg_cfg_key_t *tg_cfg_key_child(const char *parent, const char *key, size_t len, unsigned mask)
{
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        const char *rest = below(k->path, parent);
        if (rest && strlen(rest) == len && memcmp(rest, key, len) == 0 && (k->flags & mask) == mask)
            return k;
    }
    return NULL;
}

const tg_cfg_key_t *tg_cfg_key_find(const char *path)
{
    for (size_t i = 0; i < tg_cfg_nkeys; i++)
        if (strcmp(tg_cfg_keys[i].path, path) == 0)
            return &tg_cfg_keys[i];
    return NULL;
}

const char *tg_cfg_key_name(const tg_cfg_key_t *k)
{
    const char *dot = strrchr(k->path, '.');
    return dot ? dot + 1 : k->path;
}

const char *tg_cfg_key_cli(const tg_cfg_key_t *k)
{
    if (!k->cli)
        return NULL;
    return k->cli_name ? k->cli_name : tg_cfg_key_name(k);
}

const char *tg_ktype_name(tg_ktype_t t)
{
    static const char *const names[] = {
        [TG_KT_BYTES] = "size",      [TG_KT_DURATION] = "duration", [TG_KT_RATE] = "rate",
        [TG_KT_COUNT] = "count",     [TG_KT_MILLICORES] = "cpu",    [TG_KT_BANDWIDTH] = "bandwidth",
        [TG_KT_NETWORK] = "network", [TG_KT_ENUM] = "choice",       [TG_KT_BOOL] = "boolean",
        [TG_KT_STRING] = "string",   [TG_KT_ID] = "user or group",  [TG_KT_LIST] = "list",
        [TG_KT_MAP] = "map",         [TG_KT_OBJECT] = "object",     [TG_KT_ARRAY] = "array",
    };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "";
}

bool tg_ktype_has_unit(tg_ktype_t t)
{
    return t <= TG_KT_NETWORK;
}

/* ------------------------------------------------------------------ */
/* Values                                                              */

static const void *obj_of(const tg_cfg_key_t *k, const tg_cfg_at_t *at)
{
    switch (k->obj) {
    case TG_KO_CFG:
        return at->cfg;
    case TG_KO_AGENT:
        return at->agent;
    case TG_KO_LIM:
        return at->lim;
    case TG_KO_RES:
        return at->res;
    case TG_KO_ITEM:
        return at->item;
    case TG_KO_NONE:
        break;
    }
    return NULL;
}

tg_cfg_val_t tg_cfg_key_get(const tg_cfg_key_t *k, const tg_cfg_at_t *at)
{
    const char *o = obj_of(k, at);
    tg_cfg_val_t v = {0};

    if (!o)
        return v;
    if (k->type == TG_KT_RATE && k->size == sizeof v.rate) {
        memcpy(&v.rate, o + k->off, sizeof v.rate);
    } else if (k->size == sizeof(uint64_t)) {
        memcpy(&v.u, o + k->off, sizeof(uint64_t));
    } else if (k->size == sizeof(uint32_t)) {
        uint32_t x;
        memcpy(&x, o + k->off, sizeof x);
        v.u = x;
    } else if (k->size == sizeof(uint8_t)) {
        v.u = *(const uint8_t *)(o + k->off);
    }
    if (k->src_off)
        memcpy(&v.src, o + k->src_off - 1, sizeof v.src);
    return v;
}

const char *tg_cfg_key_str(const tg_cfg_key_t *k, const tg_cfg_at_t *at)
{
    const char *o = obj_of(k, at), *s = NULL;

    if (o && k->type == TG_KT_STRING && k->size == sizeof s)
        memcpy(&s, o + k->off, sizeof s);
    return s;
}

bool tg_cfg_key_is_set(const tg_cfg_key_t *k, const tg_cfg_at_t *at)
{
    tg_cfg_val_t v = tg_cfg_key_get(k, at);

    if (k->flags & (TG_KF_OPTIONAL | TG_KF_FOLLOWS_RATE))
        return v.src != TG_SRC_DEFAULT;
    if (k->flags & TG_KF_ADVISORY)
        return v.u != 0;
    return true;
}

void tg__cfg_key_set(const tg_cfg_key_t *k, const tg_cfg_at_t *at, const tg_cfg_val_t *v,
                     tg_src_t src)
{
    /* The objects are the caller's writable ones (see cfg_impl.h). */
    char *o = (char *)(uintptr_t)obj_of(k, at);

    if (!o)
        return;
    if (k->type == TG_KT_RATE && k->size == sizeof v->rate) {
        memcpy(o + k->off, &v->rate, sizeof v->rate);
    } else if (k->size == sizeof(uint64_t)) {
        memcpy(o + k->off, &v->u, sizeof(uint64_t));
    } else if (k->size == sizeof(uint32_t)) {
        uint32_t x = (uint32_t)v->u;
        memcpy(o + k->off, &x, sizeof x);
    } else if (k->size == sizeof(uint8_t)) {
        *(uint8_t *)(o + k->off) = (uint8_t)v->u;
    }
    if (k->src_off)
        memcpy(o + k->src_off - 1, &src, sizeof src);
}

int tg__cfg_key_set_str(const tg_cfg_key_t *k, const tg_cfg_at_t *at, const char *s)
{
    char *o = (char *)(uintptr_t)obj_of(k, at), *copy, *old;

    if (!o)
        return 0;
    if (!(copy = strdup(s)))
        return -ENOMEM;
    memcpy(&old, o + k->off, sizeof old);
    if (k->flags & TG_KF_SECRET)
        tg__cfg_free_secret(old);
    else
        free(old);
    memcpy(o + k->off, &copy, sizeof copy);
    return 0;
}

void tg_cfg_key_fmt(const tg_cfg_key_t *k, const tg_cfg_val_t *v, char *buf, size_t cap)
{
    switch (k->type) {
    case TG_KT_BYTES:
        tg_unit_fmt_bytes(buf, (int)cap, v->u);
        break;
    case TG_KT_DURATION:
        tg_unit_fmt_duration(buf, (int)cap, v->u);
        break;
    case TG_KT_RATE:
        tg_unit_fmt_rate(buf, (int)cap, v->rate);
        break;
    case TG_KT_MILLICORES:
        snprintf(buf, cap, "%llum", (unsigned long long)v->u);
        break;
    case TG_KT_BANDWIDTH:
        tg_unit_fmt_bandwidth(buf, (int)cap, v->u);
        break;
    case TG_KT_NETWORK:
        snprintf(buf, cap, "%s", tg_network_name((tg_network_t)v->u));
        break;
    default:
        snprintf(buf, cap, "%llu", (unsigned long long)v->u);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* Denials                                                             */

int tg_config_path_for(const tg_agent_cfg_t *a, const char *tool, const char *key, char *buf,
                       size_t cap)
{
    const tg_cfg_key_t *k = NULL;
    int n;

    if (!a || !a->id || !key || !buf)
        return -EINVAL;
    if (tool && !tg_config_tool_name_ok(tool, strlen(tool)))
        return -EINVAL;
    /* A router or resource limit has one path whatever the tool. */
    for (size_t i = 0; i < tg_cfg_nkeys && !k; i++) {
        const tg_cfg_key_t *r = &tg_cfg_keys[i];
        if ((r->flags & TG_KF_LIMIT) && strcmp(tg_cfg_key_name(r), key) == 0 &&
            (tg_cfg_key_under(r, "router") || tg_cfg_key_under(r, "agents[].resources")))
            k = r;
    }
    if (k && k->obj == TG_KO_CFG)
        n = snprintf(buf, cap, "%s", k->path);
    else if (k)
        n = snprintf(buf, cap, "agents.%s.%s%s", a->id, k->path + strlen("agents[]."),
                     (k->flags & TG_KF_LIMIT_OBJ) ? ".limit" : "");
    else if (tool)
        n = snprintf(buf, cap, "agents.%s.tools.%s.%s", a->id, tool, key);
    else
        n = snprintf(buf, cap, "agents.%s.execution_limits.%s", a->id, key);
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    return n;
}
