/* An agent's pool of instances: which place an instance runs in serves a
 * call (the binding), and how many instances may run at once
 * (max_instances), with eviction of an idle one of the same caller to
 * make room. Pure (no loop, no process): the engine links its places in
 * (an MCP session, an OpenSentience agent's one instance) and tells the
 * pool when one wants an instance and when it is gone; the pool counts,
 * picks a victim and asks the engine to end it, and keeps the agent's
 * agent.ID.instances row.
 *
 * A pool outlives the config generations of its agent: a reload's
 * successor takes the same pool (its sessions keep their counts), and a
 * new max_instances applies to the next instance asked for.
 *
 * Bindings: `session` (one instance per caller session, MCP's 2025 era),
 * `shared` (instances shared by every caller, OpenSentience's). The next
 * bindings (`caller`: one per caller identity; shared MCP instances) and
 * routing across several agents plug in here.
 */
#ifndef TG_ROUTER_AGENT_POOL_H
#define TG_ROUTER_AGENT_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "limits/registry.h"

typedef enum tg_binding {
    TG_BIND_SESSION = 0, /* one instance per caller session */
    TG_BIND_SHARED,      /* instances shared by every caller */
} tg_binding_t;

typedef struct tg_apool tg_apool_t;

/* One place an instance runs in, embedded in the engine's own struct. */
typedef struct tg_pool_member {
    struct tg_pool_member *next, *prev;
    tg_apool_t *pool;   /* NULL: in none */
    const char *caller; /* who it serves: eviction stays within one caller */
    bool may_evict;     /* its instance may take an idle one's place (an HTTP session) */
    bool counted;       /* it holds one of max_instances */
    bool evicted;       /* ended to make room, not gone yet */
} tg_pool_member_t;

typedef struct tg_apool_ops {
    /* 0 when <m> may not be ended now (busy, starting, not idle long
     * enough); else the time it has been idle since, plus one (the
     * smallest is the longest idle). */
    uint64_t (*evictable)(tg_pool_member_t *m, uint64_t now);
    /* End <m> to make room: its count has passed to the member that
     * asked (it stays linked, as draining, until it leaves). */
    void (*evict)(tg_pool_member_t *m);
} tg_apool_ops_t;

struct tg_apool {
    tg_binding_t binding;
    uint32_t max_instances;
    uint32_t running;        /* counted members */
    uint32_t refs;           /* agent generations holding the pool */
    tg_pool_member_t *head;  /* its places, newest first */
    const tg_apool_ops_t *ops;
    tg_registry_t *reg;      /* agent.ID.instances (-1: none) */
    int row;
};

void tg_apool_init(tg_apool_t *p, tg_binding_t binding, uint32_t max_instances,
                   const tg_apool_ops_t *ops, tg_registry_t *reg, int row);

/* Link place <m> (zeroed or left) into <p>, for <caller> (borrowed: it
 * must outlive the membership). */
void tg_apool_join(tg_apool_t *p, tg_pool_member_t *m, const char *caller, bool may_evict);
/* <m> is gone: unlinked, its count given back. A no-op outside a pool. */
void tg_apool_leave(tg_pool_member_t *m);

/* <m> wants an instance: 0 when it may start one (counted; when the pool
 * was full, an idle place of the same caller was ended for it through
 * ops->evict, unless max_instances of them are still draining), or -1
 * with the instances counted and the cap. Outside a pool: always 0. */
int tg_apool_take(tg_pool_member_t *m, uint64_t now, uint32_t *running, uint32_t *cap);

/* The pool's live counters: its row in the registry follows <running>. */
static inline uint32_t tg_apool_running(const tg_apool_t *p)
{
    return p != NULL ? p->running : 0;
}

#endif
