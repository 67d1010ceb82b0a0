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
 * new max_instances applies to the next instance asked for. A reload
 * that needs new instances (tg_apool_reload) starts a new generation and
 * drains the places of the older ones through the engine: a place with
 * nothing of the old config running moves to the new one at once; the
 * others finish what they run and leave (MCP: the session ends within
 * router.reload_drain_timeout) or are renewed in place (OpenSentience:
 * its one instance is stopped and started again from the new config).
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
    bool draining;      /* its generation was replaced: asked to drain, not gone yet */
    uint32_t gen;       /* the pool's generation it joined in (or was renewed to) */
} tg_pool_member_t;

typedef struct tg_apool_ops {
    /* 0 when <m> may not be ended now (busy, starting, not idle long
     * enough); else the time it has been idle since, plus one (the
     * smallest is the longest idle). */
    uint64_t (*evictable)(tg_pool_member_t *m, uint64_t now);
    /* End <m> to make room: its count has passed to the member that
     * asked (it stays linked, as draining, until it leaves). */
    void (*evict)(tg_pool_member_t *m);
    /* A reload replaced <m>'s generation: true when it moved to the new
     * one at once (nothing of the old config runs in it); false when it
     * drains (it stays counted until it leaves or is renewed). NULL: the
     * pool's agent is never reloaded into a new generation. */
    bool (*drain)(tg_pool_member_t *m);
} tg_apool_ops_t;

struct tg_apool {
    tg_binding_t binding;
    uint32_t max_instances;
    uint32_t running;        /* counted members */
    uint32_t refs;           /* agent generations holding the pool */
    uint32_t gen;            /* the config generation new places join in */
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

/* <m>'s instance is gone but the place stays (an OpenSentience agent
 * between restarts): its count is given back. */
void tg_apool_release(tg_pool_member_t *m);

/* A reload needs new instances: a new generation with cap
 * <max_instances>; every place of an older one not yet draining is asked
 * to (ops->drain), each once. The number asked that drain; <*moved> (may
 * be NULL) those that moved at once. */
uint32_t tg_apool_reload(tg_apool_t *p, uint32_t max_instances, uint32_t *moved);
/* Draining place <m> runs the current generation now (its old instance
 * is gone and the next one starts from the new config). */
void tg_apool_renew(tg_pool_member_t *m);
/* Places asked to drain and not gone or renewed yet. */
uint32_t tg_apool_draining(const tg_apool_t *p);

/* The pool's live counters: its row in the registry follows <running>. */
static inline uint32_t tg_apool_running(const tg_apool_t *p)
{
    return p != NULL ? p->running : 0;
}

#endif
