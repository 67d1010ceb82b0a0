/* Sessions: one caller connected to one agent instance, with the limits of
 * the agent shared by all sessions that use it. The MCP engine of both
 * `toolgate wrap` (one stdio session) and `toolgate serve` (a session per
 * accepted connection), behind the dialect ops table (engine.c, mcp.h);
 * nothing outside dialect/mcp/ includes this header. See session.c for
 * the invariants.
 *
 * Ownership: the gateway (tg_gw_t) is owned by its runner and outlives
 * every agent and session; the engine (engine.c) owns the agents and
 * frees them after the loop ends; a session frees itself once its handles
 * have closed, then tells the engine (mcp_eng_session_gone).
 */
#ifndef TG_ROUTER_SESSION_H
#define TG_ROUTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "router/gateway/gateway.h"

typedef struct mcp_sess tg_mcp_sess_t;
typedef struct tg_mcp_agent tg_mcp_agent_t;
typedef struct tg_mcp_eng tg_mcp_eng_t;

/* The shared state of agent <acfg> of engine <e>, for up to
 * <max_sessions> sessions at once. NULL with <err> filled on failure. */
tg_mcp_agent_t *tg_mcp_agent_new(tg_mcp_eng_t *e, tg_agent_cfg_t *acfg, uint32_t max_sessions,
                                 tg_err_t *err);
void tg_mcp_agent_close_timers(tg_mcp_agent_t *ag);
void tg_mcp_agent_free(tg_mcp_agent_t *ag);

/* Reload. Apply agent config <acfg> (same id, same command and resources:
 * only limits changed) to <ag> in place: buckets and slots of unchanged
 * limits keep their state, inflight calls keep their slots. -EAGAIN when
 * the change needs a successor instead (tools added, removed or reordered,
 * the shared store choice changed, or the call table would have to grow);
 * -EINVAL/-ENOMEM otherwise, each with <err> naming the key. On failure
 * <ag> is unchanged. */
int tg_mcp_agent_reconfigure(tg_mcp_agent_t *ag, tg_agent_cfg_t *acfg, tg_err_t *err);
/* A new agent for <acfg> taking <old>'s place (metrics row, registry rows,
 * instance budget), with the state of its unchanged rate buckets. NULL
 * with <err> filled. */
tg_mcp_agent_t *tg_mcp_agent_successor(tg_mcp_agent_t *old, tg_agent_cfg_t *acfg, tg_err_t *err);
/* <ag> was replaced: free it once no session or store answer refers to it
 * (its sessions are drained by the runner), then call <on_free>(<arg>)
 * (NULL: none); at the latest in tg_gw_teardown. */
void tg_mcp_agent_retire(tg_mcp_agent_t *ag, void (*on_free)(void *arg), void *arg);
/* The agent config <ag> runs with. */
const tg_agent_cfg_t *tg_mcp_agent_cfg(const tg_mcp_agent_t *ag);
const char *tg_mcp_agent_id(const tg_mcp_agent_t *ag);

/* A session on toolgate's own stdin/stdout (wrap). NULL after logging. */
tg_mcp_sess_t *tg_mcp_sess_stdio(tg_gw_t *gw, tg_mcp_agent_t *ag);
/* A session on an accepted connection <conn> (heap; the session takes it
 * and frees it) for the caller named <caller> with limits <climits> (NULL:
 * none beyond the agent's). */
tg_mcp_sess_t *tg_mcp_sess_conn(tg_gw_t *gw, tg_mcp_agent_t *ag, uv_pipe_t *conn, const char *caller,
                        tg_caller_lim_t *climits);
/* Read the caller. A stdio session (wrap) starts its agent instance now:
 * 0, or -1 when the agent could not start (the session is then ending). A
 * connection (serve) starts it with the caller's first initialize (held
 * and forwarded once the instance is up, when its agent's pool admits
 * it); until then ping is answered, other requests get -32600, and a
 * caller with no complete initialize within router.handshake_timeout is
 * closed (audited, reason handshake_timeout). */
int tg_mcp_sess_start(tg_mcp_sess_t *s);
/* serve: where <s>'s caller is, named in each of its audit events:
 * <front> "http" or "unix" (tg_mcp_sess_conn's default; a stdio session is
 * "stdio"), a static string; <remote> the peer as the runner formats it
 * ("127.0.0.1:5123", "[::1]:5123", "uid:1000"; NULL: none) and <session>
 * the digest of its MCP session id (NULL: none), both copied (truncated
 * to their bounds). Call before tg_mcp_sess_start. */
#define TG_MCP_SESS_REMOTE_MAX 64 /* fixed internal bound: "[v6 address]:port" and its NUL */
#define TG_MCP_SESS_DIGEST_MAX 17 /* fixed internal bound: 16 hex digits and the NUL */
void tg_mcp_sess_set_origin(tg_mcp_sess_t *s, const char *front, const char *remote, const char *session);
/* serve, HTTP: whether <s> may be ended to make room for a new session of
 * its caller (its agent's pool, agent/pool.h): an HTTP session holding an instance, running,
 * nothing in flight either way, and no frame from its caller for
 * <min_idle_ms>. 0 when not; else the loop time of its caller's last
 * frame plus one (the smallest is the longest idle). */
uint64_t tg_mcp_sess_evictable(const tg_mcp_sess_t *s, uint64_t now, uint64_t min_idle_ms);
/* Reload: <s>'s agent was replaced by <ag>. A session with no instance
 * yet moves to <ag> (1). One with an instance runs on with it and the old
 * agent's limits until its caller leaves or <drain_ms> passes (0: now),
 * then is drained and closed, audited with reason reload_drain_timeout
 * (0). */
int tg_mcp_sess_replaced(tg_mcp_sess_t *s, tg_mcp_agent_t *ag, uint64_t drain_ms);
/* Stop taking calls, drain within kill_grace, stop the agent. */
void tg_mcp_sess_shutdown(tg_mcp_sess_t *s, const char *why);
bool tg_mcp_sess_stopping(const tg_mcp_sess_t *s);
/* SIGKILL the session's agent tree now (a second Ctrl-C). */
void tg_mcp_sess_kill(tg_mcp_sess_t *s);

/* Once a second (the gateway's tick): report stderr drops and age out
 * restarts of every session's agent. */
void mcp_eng_tick(tg_mcp_eng_t *e, uint64_t now);
/* Free the agents a reload retired (tg_gw_teardown, after the loop ran). */
void mcp_eng_reap_retired(tg_mcp_eng_t *e);

#endif
