/* toolgate wrap: the MCP stdio proxy for one agent (see DESIGN.md).
 *
 * The caller is toolgate's own stdin/stdout; the agent is a child process
 * started from cfg->agents[0].command with argv (no shell) and the caller's
 * environment unchanged. Every tools/call is admitted through frame, rate
 * and concurrency limits with a deadline; everything else passes through.
 */
#ifndef TG_ROUTER_WRAP_H
#define TG_ROUTER_WRAP_H

#include "config/config.h"

/* Run until the caller goes away, a signal asks to stop, or the agent
 * cannot be kept running. Returns the process exit status: 0 after a clean
 * shutdown, 1 when the agent could not be (re)started, the agent's own
 * status when it exited by itself under restart policy "no". */
int tg_wrap_run(tg_config_t *cfg);

#endif
