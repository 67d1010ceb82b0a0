/* What a reload changes: two configs compared through the key table.
 *
 * Every key of a config is a row of config/keys.c, and each row says what
 * a change of it needs (its reload column, tg_kreload_t). tg_cfg_diff
 * walks the table over two configs and returns the most any changed key
 * needs, with the first such key in config syntax
 * ("agents[1].resources.memory", "router.listen[0].path", "store.url"),
 * so that a refused reload names the key to change back.
 */
#ifndef TG_CONFIG_DIFF_H
#define TG_CONFIG_DIFF_H

#include <stddef.h>

#include "config/config.h"

/* What a change needs, in increasing order: nothing, then the key table's
 * reload classes (TG_RELOAD_LIVE + 1 ...). */
typedef enum tg_cfg_need {
    TG_NEED_NONE = 0, /* nothing changed */
    TG_NEED_LIVE,     /* applied in place (TG_RELOAD_LIVE) */
    TG_NEED_AGENT,    /* the agent restarts: a successor (mcp), a new instance
                       * (opensentience) (TG_RELOAD_AGENT) */
    TG_NEED_RESTART,  /* toolgate restarts: a reload is refused (TG_RELOAD_RESTART) */
} tg_cfg_need_t;

#define TG_CFG_KEY_MAX 256 /* fixed internal bound: a key's path with its indexes and names */

/* One verdict: what a change needs, and the key that needs it. */
typedef struct tg_cfg_change {
    tg_cfg_need_t need;
    char key[TG_CFG_KEY_MAX]; /* the first changed key that needs <need>; "" for NONE */
} tg_cfg_change_t;

/* Compare config <old> (the running one) with <cur> (the reloaded one),
 * key by key in table (document) order, and return what the change needs
 * as a whole; <all>, when not NULL, gets it with its first key.
 *
 * <agents> (NULL, or <nagents> entries) gets the same for each agent's own
 * keys (agents[i].*, i < nagents; NONE for an agent past either config's
 * count), so that a reload restarts only the agents that need it.
 *
 * Arrays (agents, router.listen, audit.sinks, callers) are compared by
 * position: an element added, removed or moved is a change of the array
 * at the first position that differs ("agents[2]"), or of its id, and an
 * agent's tools by position and name ("agents[0].tools.web"). A key's
 * value is the model's (after the manifest merge): "4Mi" and 4194304 are
 * the same; a limit's source (default, file, manifest) counts as a change
 * but for keys that need a restart, where only the value does. Keys that
 * are checked and not kept (a resource's "request", the shared_mode and
 * scopes that accept one value) cannot change anything. A key names no
 * value: an env.set change is "agents[0].env.set.NAME", a token or URL
 * change the key alone. Pure: no allocation, no I/O. */
tg_cfg_need_t tg_cfg_diff(const tg_config_t *old, const tg_config_t *cur, tg_cfg_change_t *all,
                          tg_cfg_change_t *agents, size_t nagents);

#endif
