/* The dialect ops table: what a front asks of a wire dialect's engine
 * (MCP, OpenSentience), so that the fronts (front/serve.c, front/wrap.c)
 * include no engine. HAProxy's protocol table in small: a front accepts
 * a connection and says who the caller is; the engine owns everything
 * after that (the handshake, its refusals in its own framing, the calls,
 * the agents' instances and their pools, drain and reload).
 *
 * One engine per dialect per run serves every agent of its dialect in the
 * gateway's config. The table of the dialects built in is dialect/dialect.h
 * (tg_dialect_find); an engine's ops are its own (tg_mcp_dialect,
 * tg_os_dialect).
 *
 * Ownership: the runner opens an engine after tg_gw_open, starts it,
 * shuts it down on SIGTERM, frees it after tg_gw_teardown. An engine
 * tells the runner it is done through <on_done> (tg_dialect_env_t).
 */
#ifndef TG_ROUTER_AGENT_DIALECT_H
#define TG_ROUTER_AGENT_DIALECT_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "config/config.h"
#include "config/diff.h"
#include "router/gateway/gateway.h"

struct json_t;

/* Where a caller came from. */
typedef enum tg_front_kind {
    TG_FRONT_STDIO = 0, /* toolgate's own stdin and stdout (wrap): <conn> is NULL */
    TG_FRONT_UNIX,      /* an accepted Unix connection */
    TG_FRONT_HTTP,      /* an HTTP session's pipe (front/http_sess.c) */
} tg_front_kind_t;

/* Who a caller is, as its front found out (SO_PEERCRED, a bearer token).
 * The strings are copied by the engine where it keeps them. */
typedef struct tg_peer {
    tg_front_kind_t front;
    size_t listener;       /* router.listen index (not for stdio) */
    const tg_listen_cfg_t *lc; /* that listener's config, the current generation's (NULL: stdio) */
    const char *caller;    /* the callers[] name, "unknown", "anonymous", "stdio" */
    tg_caller_lim_t *lim;  /* that caller's own limits, or NULL */
    bool not_allowed;      /* router.callers_only and no callers[] entry matched */
    long uid, gid;         /* unix: the peer's, -1 when the kernel did not say */
    const char *remote;    /* "uid:1000", "127.0.0.1:5123", or NULL */
    const char *session;   /* http: the digest of its MCP session id, or NULL */
    const char *claims;    /* http: the claims of the verified JWT that named the caller, as
                            * a JSON object's text (string and string-array claims), or NULL */
} tg_peer_t;

/* What the runner gives an engine. <on_done>(<arg>, <status>) runs once
 * the engine is done: shut down with every caller gone and every handle
 * of its own closed, or (wrap) its one session ended by itself, with the
 * process status the run should exit with (0 in serve). */
typedef struct tg_dialect_env {
    void (*on_done)(void *arg, int status);
    void *arg;
} tg_dialect_env_t;

/* reconfigure's answers: the engine let go of the agent's previous config
 * now (the runner may free it), or later through <release>. */
#define TG_RECONF_RELEASED 0
#define TG_RECONF_LATER 1

typedef struct tg_dialect_ops {
    const char *name;  /* "mcp", "opensentience": the config's "dialect" */
    tg_dialect_t dialect;
    /* The engine of every agent of this dialect in gw->cfg (there may
     * be none). NULL with <err> naming the agent key that failed. */
    void *(*open)(tg_gw_t *gw, const tg_dialect_env_t *env, tg_err_t *err);
    /* Start what starts eagerly (after every listener is bound). */
    void (*start)(void *e);
    /* Take caller connection <conn> (a heap block whose first member it
     * is; NULL: stdio) of <peer>. 0: taken, the engine frees it with the
     * connection, refusals included (answered in the dialect's framing:
     * a Unix caller refused for shutting down, callers_only or
     * max_connections). Negative: not taken (an HTTP session the engine
     * cannot open: -ESHUTDOWN, -ENOMEM; stdio: the agent could not
     * start), with <why> (at most <cap> bytes) for the front's answer. */
    int (*accept)(void *e, uv_pipe_t *conn, const tg_peer_t *peer, char *why, size_t cap);
    /* Stop: callers drained (calls in flight answered, new ones refused
     * with shutting_down), instances stopped, then on_done. */
    void (*shutdown)(void *e, const char *why);
    /* Reload agent <na> (same id and index as a running one) whose own
     * keys need <need> (config/diff.h; NONE is not passed): limits in
     * place where they can be, anything else by new instances while the
     * old drain within router.reload_drain_timeout. TG_RECONF_RELEASED,
     * or TG_RECONF_LATER when the old config stays in use until
     * <release>(<old>) runs; negative with <err> when nothing changed
     * (-EAGAIN: only a restart can apply it, as in wrap). */
    int (*reconfigure)(void *e, tg_agent_cfg_t *na, tg_cfg_need_t need,
                       void (*release)(void *old), void *old, tg_err_t *err);
    /* Reload: the config's "policy" (NULL: none) is now <policy>, checked
     * by the caller with tg_policy_from_json. Sessions read the new one
     * from their next request; a session whose lists may have changed is
     * told (list_changed). NULL: the dialect has no policy. */
    int (*policy)(void *e, const struct json_t *policy, tg_err_t *err);
    /* Callers connected now (the log and audit of a stop). */
    size_t (*callers)(const void *e);
    /* SIGKILL every instance now (a second Ctrl-C). */
    void (*kill)(void *e);
    /* No caller and no instance left after shutdown. */
    bool (*idle)(const void *e);
    /* After tg_gw_teardown. NULL is ignored. */
    void (*free)(void *e);
} tg_dialect_ops_t;

#endif
