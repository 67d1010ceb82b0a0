/* The OpenSentience gateway of `toolgate serve`: toolgate plays Core
 * towards every agent of dialect "opensentience" and routes the calls of
 * callers that connect to an opensentience listener, by tool_id, across
 * all of them. See DESIGN.md "Wire dialects" and os_gw.c for the
 * invariants.
 *
 * Agents: one shared instance each, started at serve start ("start":
 * "eager", the default) or by the first call routed to it ("on_demand"),
 * through the exec shim like MCP instances. The instance gets a fresh
 * 128-bit session token in OPENSENTIENCE_SESSION_TOKEN, must present it in
 * agent.hello (compared in constant time, never logged), is welcomed with
 * heartbeat_interval_ms and max_frame_bytes, registers tools named
 * "<agent_id>/<name>", and is marked unhealthy when its heartbeats stop
 * (calls then get agent_unavailable) until it recovers or, after
 * kill_grace_period, is killed and restarted per its restart policy.
 *
 * Callers: length-prefixed frames both ways; core.tool.call and
 * core.tool.cancel in, agent.tool.stream and agent.tool.result out. Every
 * call passes the same admission as MCP calls (rate, concurrency with a
 * bounded queue, deadline) per agent, tool and caller, with the agent's
 * rate, a tool's rate and the agent's concurrency shared across toolgates
 * in the gateway's store when their scope is "shared"; it is forwarded with
 * its call_id rewritten so callers cannot collide, and is refused with an
 * agent.tool.result (status "failed", the standard error). A repeat of a
 * completed call with the same idempotency_key is answered from a cache
 * within the agent's idempotency_window instead of running the tool twice.
 *
 * Reload: tg_osgw_reconfigure moves an agent to a new config, limits in
 * place, anything else by draining and restarting its instance.
 *
 * Ownership: the runner (serve.c) owns the tg_osgw_t, creates it after
 * tg_gw_open and frees it after tg_gw_teardown. Accepted connections are
 * handed over and freed by the gateway once closed.
 */
#ifndef TG_ROUTER_OS_GW_H
#define TG_ROUTER_OS_GW_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "config/config.h"
#include "router/gateway/gateway.h"

typedef struct tg_osgw tg_osgw_t;

/* Who an accepted connection is (serve.c resolves it from SO_PEERCRED). */
typedef struct tg_osgw_peer {
    const char *caller;   /* callers[] name, or "unknown" */
    tg_caller_lim_t *lim; /* its own limits, or NULL */
    bool not_allowed;     /* router.callers_only and no callers[] entry matched */
    unsigned uid, gid;    /* for the refusal's message */
} tg_osgw_peer_t;

/* The gateway for every opensentience agent of <gw>'s config; <gw> must
 * be open and outlive it. Registers the agents' limits. NULL with <err>
 * filled (out of memory, a rate that cannot be set up). */
tg_osgw_t *tg_osgw_new(tg_gw_t *gw, tg_err_t *err);

/* Number of opensentience agents it serves. */
size_t tg_osgw_nagents(const tg_osgw_t *g);

/* Start the agents whose "start" is "eager". A failing start follows the
 * agent's restart policy; it does not stop the gateway. */
void tg_osgw_start(tg_osgw_t *g);

/* Take the accepted connection <conn> from opensentience listener <lc>.
 * <conn> must be the first member of a heap block, which the gateway
 * frees (with free(conn)) once the connection has closed; the peer is
 * refused (each call answered with caller_not_allowed or shutting_down,
 * then the connection closed) when it is not allowed or the gateway is
 * stopping. */
void tg_osgw_accept(tg_osgw_t *g, uv_pipe_t *conn, const tg_listen_cfg_t *lc,
                    const tg_osgw_peer_t *peer);

/* Stop: new calls get shutting_down, the calls in flight have
 * kill_grace_period to finish, then each agent's stdin is closed, then
 * SIGTERM, then SIGKILL, kill_grace_period apart; callers are
 * disconnected once answered. <on_idle>(<arg>) runs once everything the
 * gateway opened has closed (possibly before this returns). */
void tg_osgw_shutdown(tg_osgw_t *g, void (*on_idle)(void *arg), void *arg);

/* Reload: run opensentience agent <acfg> (same id as one the gateway
 * serves; it must outlive its use, i.e. until the next reconfigure of
 * that agent or tg_osgw_free) from now on. The gateway keeps no pointer
 * into the agent's previous config once this returns 0, so the caller may
 * free it then.
 *  - Limits (execution_limits, tools, the opensentience timing and
 *    idempotency settings) apply in place: buckets of unchanged rates
 *    keep their state, changed ones start fresh; concurrency caps change
 *    with calls in flight keeping their slots; the queue keeps its calls
 *    in order (a lowered cap refuses new calls until it is under it).
 *  - <respawn> (anything else changed: command, env, cwd, resources,
 *    manifest, restart, stderr, start, heartbeat_interval...): the agent
 *    keeps routing, but no call goes to its instance any more; calls
 *    arriving meanwhile wait in its queue (within their deadline; a full
 *    queue answers agent_unavailable with retry_after_ms). Once the calls
 *    in flight have finished (or hit their deadline), the instance is
 *    stopped as on shutdown (stdin closed, SIGTERM, SIGKILL,
 *    kill_grace_period apart) and a new one started from <acfg> whatever
 *    its restart policy, restart count reset: at once for "eager", by the
 *    first call (or a queued one) for "on_demand".
 * 0; -ENOENT (no such opensentience agent), -EINVAL (a rate that cannot
 * be set up, a shared limit without its store) or -ENOMEM, each with
 * <err> naming the key: then nothing changed. */
int tg_osgw_reconfigure(tg_osgw_t *g, tg_agent_cfg_t *acfg, bool respawn, tg_err_t *err);

/* Callers connected now. */
size_t tg_osgw_callers(const tg_osgw_t *g);

/* True once tg_osgw_shutdown has finished closing everything. */
bool tg_osgw_idle(const tg_osgw_t *g);

/* SIGKILL every agent process tree now (a second Ctrl-C). */
void tg_osgw_kill(tg_osgw_t *g);

/* Free the gateway after the loop ended (tg_gw_teardown ran). NULL is
 * ignored. */
void tg_osgw_free(tg_osgw_t *g);

#endif
