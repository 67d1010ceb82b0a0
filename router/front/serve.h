/* toolgate serve: Unix-socket listeners in front of configured agents,
 * one session (and agent instance) per MCP caller connection, with
 * per-agent, per-tool and per-caller limits. */
#ifndef TG_ROUTER_SERVE_H
#define TG_ROUTER_SERVE_H

#include "config/config.h"

/* Run until SIGTERM/SIGINT has drained every session. Returns the exit
 * status: 0 after a clean stop, 1 when a listener or agent could not be
 * set up, 2 for a config that cannot be served. */
int tg_serve_run(tg_config_t *cfg);

#endif
