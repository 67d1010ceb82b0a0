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

/* SIGHUP: fill zeroed <cfg> from the command line again, as at the start
 * (<ctx> is the caller's). 0, or -1 with <err> filled (then <cfg> holds
 * nothing to keep; the caller frees it with tg_config_free). */
typedef int (*tg_wrap_load_fn)(void *ctx, tg_config_t *cfg, tg_err_t *err);

/* Run until the caller goes away, a signal asks to stop, or the agent
 * cannot be kept running. Returns the process exit status: 0 after a clean
 * shutdown, 1 when the agent could not be (re)started, the agent's own
 * status when it exited by itself under restart policy "no". SIGHUP
 * reloads the limits of cfg->path through <load> (NULL: none); stdin and
 * stdout may be anything a shell gives (relay.h). */
int tg_wrap_run(tg_config_t *cfg, tg_wrap_load_fn load, void *ctx);

/* wrap's --allow-tool and --deny-tool globs (borrowed for the run): the
 * policy when the config has none (router/auth/policy.h). */
typedef struct tg_wrap_tools {
    const char *const *allow, *const *deny;
    size_t nallow, ndeny;
} tg_wrap_tools_t;

/* tg_wrap_run with <tools> (NULL: none). */
int tg_wrap_run_tools(tg_config_t *cfg, tg_wrap_load_fn load, void *ctx,
                      const tg_wrap_tools_t *tools);

#endif
