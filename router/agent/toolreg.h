/* The tools of one agent instance, as the instance declared them: the
 * OpenSentience engine fills it from agent.tools.register, and a call is
 * routed only to an instance whose registry names its tool. (MCP's
 * tools/list answers are to fill it too, when calls are routed across
 * agents and instances by tool; see agent/pool.h.)
 *
 * A set of names, bounded by <max> entries and TG_TOOLREG_NAME_MAX bytes
 * each, looked up in O(1) (open addressing on an FNV-1a hash). Pure: no
 * loop, no I/O. Owned by the engine's instance; cleared when it is gone.
 */
#ifndef TG_ROUTER_AGENT_TOOLREG_H
#define TG_ROUTER_AGENT_TOOLREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_TOOLREG_NAME_MAX 256 /* fixed internal bound: bytes of one tool name */

typedef struct tg_toolreg_slot {
    uint32_t hash;
    uint32_t len; /* 0: empty */
    char *name;   /* owned, NUL-terminated */
} tg_toolreg_slot_t;

typedef struct tg_toolreg {
    tg_toolreg_slot_t *slots; /* a power of two, at most half full */
    size_t cap, n;
    size_t max; /* names kept at most */
} tg_toolreg_t;

/* An empty registry of at most <max> names (no allocation yet). */
void tg_toolreg_init(tg_toolreg_t *r, size_t max);
/* Add <name> (<len> bytes): 1 added, 0 already there, -ENOSPC past <max>,
 * -EINVAL empty or over TG_TOOLREG_NAME_MAX, -ENOMEM. */
int tg_toolreg_add(tg_toolreg_t *r, const char *name, size_t len);
bool tg_toolreg_has(const tg_toolreg_t *r, const char *name, size_t len);
static inline size_t tg_toolreg_count(const tg_toolreg_t *r)
{
    return r->n;
}
/* Forget every name (the instance is gone); the memory is kept for the next. */
void tg_toolreg_clear(tg_toolreg_t *r);
void tg_toolreg_free(tg_toolreg_t *r);

#endif
