/* The OpenSentience gateway (os_gw.h) behind the dialect ops table. See
 * opensentience.h. It serves Unix listeners only: an HTTP listener
 * speaks MCP (config/cfg_router.c refuses another dialect there). */
#include "router/dialect/opensentience/opensentience.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "router/dialect/opensentience/os_gw.h"
#include "router/gateway/log.h"

typedef struct os_eng {
    tg_osgw_t *g;
    tg_dialect_env_t env;
} os_eng_t;

static void *os_open(tg_gw_t *gw, const tg_dialect_env_t *env, tg_err_t *err)
{
    os_eng_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        tg_err_set(err, -ENOMEM, "agents: out of memory");
        return NULL;
    }
    e->env = *env;
    if ((e->g = tg_osgw_new(gw, err)) == NULL) {
        free(e);
        return NULL;
    }
    return e;
}

static void os_start(void *arg)
{
    os_eng_t *e = arg;
    tg_osgw_start(e->g);
}

static int os_accept(void *arg, uv_pipe_t *conn, const tg_peer_t *peer, char *why, size_t cap)
{
    os_eng_t *e = arg;
    if (peer->front != TG_FRONT_UNIX) {
        snprintf(why, cap, "the opensentience dialect is served on Unix listeners only");
        return -EPROTONOSUPPORT;
    }
    tg_osgw_peer_t op = {.caller = peer->caller,
                         .lim = peer->lim,
                         .not_allowed = peer->not_allowed,
                         .uid = (unsigned)peer->uid,
                         .gid = (unsigned)peer->gid};
    tg_osgw_accept(e->g, conn, peer->lc, &op);
    return 0;
}

static void os_done(void *arg)
{
    os_eng_t *e = arg;
    if (e->env.on_done != NULL)
        e->env.on_done(e->env.arg, 0);
}

static void os_shutdown(void *arg, const char *why)
{
    os_eng_t *e = arg;
    (void)why;
    tg_osgw_shutdown(e->g, os_done, e);
}

/* Limits in place; anything else by draining and restarting the agent's
 * one instance while its callers stay connected (tg_osgw_reconfigure).
 * The gateway keeps nothing of the old config once it returns. */
static int os_reconfigure(void *arg, tg_agent_cfg_t *na, tg_cfg_need_t need,
                          void (*release)(void *old), void *old, tg_err_t *err)
{
    os_eng_t *e = arg;
    (void)release;
    (void)old;
    if (tg_osgw_reconfigure(e->g, na, need != TG_NEED_LIVE, err) < 0)
        return -1;
    if (need == TG_NEED_LIVE)
        tg_log("SIGHUP: agent '%s': limits updated in place", na->id);
    return TG_RECONF_RELEASED;
}

static size_t os_callers(const void *arg)
{
    const os_eng_t *e = arg;
    return tg_osgw_callers(e->g);
}

static void os_kill(void *arg)
{
    os_eng_t *e = arg;
    tg_osgw_kill(e->g);
}

static bool os_idle(const void *arg)
{
    const os_eng_t *e = arg;
    return tg_osgw_idle(e->g);
}

static void os_free(void *arg)
{
    os_eng_t *e = arg;
    if (e == NULL)
        return;
    tg_osgw_free(e->g);
    free(e);
}

const tg_dialect_ops_t tg_os_dialect = {
    .name = "opensentience",
    .dialect = TG_DIALECT_OPENSENTIENCE,
    .open = os_open,
    .start = os_start,
    .accept = os_accept,
    .shutdown = os_shutdown,
    .reconfigure = os_reconfigure,
    .callers = os_callers,
    .kill = os_kill,
    .idle = os_idle,
    .free = os_free,
};
