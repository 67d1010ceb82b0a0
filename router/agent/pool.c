/* An agent's pool of instances (see pool.h). */
#include "router/agent/pool.h"
#include "router/gateway/list.h"

#include <string.h>

static void count(tg_apool_t *p, uint32_t running)
{
    p->running = running;
    if (p->reg != NULL && p->row >= 0)
        tg_registry_update(p->reg, p->row, running);
}

void tg_apool_init(tg_apool_t *p, tg_binding_t binding, uint32_t max_instances,
                   const tg_apool_ops_t *ops, tg_registry_t *reg, int row)
{
    memset(p, 0, sizeof(*p));
    p->binding = binding;
    p->max_instances = max_instances;
    p->ops = ops;
    p->reg = reg;
    p->row = row;
}

void tg_apool_join(tg_apool_t *p, tg_pool_member_t *m, const char *caller, bool may_evict)
{
    memset(m, 0, sizeof(*m));
    m->pool = p;
    m->caller = caller;
    m->may_evict = may_evict;
    m->gen = p->gen;
    TG_LIST_PUSH(p->head, m, prev, next);
}

void tg_apool_leave(tg_pool_member_t *m)
{
    tg_apool_t *p = m->pool;
    if (p == NULL)
        return;
    if (m->counted && p->running > 0)
        count(p, p->running - 1);
    TG_LIST_UNLINK(p->head, m, prev, next);
    m->pool = NULL;
    m->counted = false;
}

/* A place of the same caller as <m> that its client seems to have left:
 * the longest idle of those the engine says may go. NULL when there is
 * none, or when max_instances evicted ones are still draining (so that a
 * caller opening sessions fast cannot pile up instances on their way
 * out). */
static tg_pool_member_t *victim_for(tg_apool_t *p, tg_pool_member_t *m, uint64_t now)
{
    uint64_t best = 0;
    uint32_t draining = 0;
    tg_pool_member_t *victim = NULL;
    for (tg_pool_member_t *v = p->head; v != NULL; v = v->next) {
        if (v == m)
            continue;
        if (v->evicted) {
            draining++;
            continue;
        }
        if (!v->counted || strcmp(v->caller, m->caller) != 0)
            continue;
        uint64_t since = p->ops->evictable(v, now);
        if (since != 0 && (victim == NULL || since < best)) {
            victim = v;
            best = since;
        }
    }
    return draining < p->max_instances ? victim : NULL;
}

int tg_apool_take(tg_pool_member_t *m, uint64_t now, uint32_t *running, uint32_t *cap)
{
    tg_apool_t *p = m->pool;
    if (p == NULL || m->counted)
        return 0;
    if (p->running < p->max_instances) {
        m->counted = true;
        count(p, p->running + 1);
        return 0;
    }
    tg_pool_member_t *v = m->may_evict && p->ops != NULL ? victim_for(p, m, now) : NULL;
    if (v == NULL) {
        *running = p->running;
        *cap = p->max_instances;
        return -1;
    }
    /* Its instance is now <m>'s: the count stays. */
    v->counted = false;
    v->evicted = true;
    m->counted = true;
    p->ops->evict(v);
    return 0;
}

void tg_apool_release(tg_pool_member_t *m)
{
    tg_apool_t *p = m->pool;
    if (p == NULL || !m->counted)
        return;
    m->counted = false;
    if (p->running > 0)
        count(p, p->running - 1);
}

/* The first place of an older generation than <p>'s not yet asked to
 * drain, or NULL. */
static tg_pool_member_t *next_old(tg_apool_t *p)
{
    for (tg_pool_member_t *m = p->head; m != NULL; m = m->next)
        if (m->gen != p->gen && !m->draining)
            return m;
    return NULL;
}

uint32_t tg_apool_reload(tg_apool_t *p, uint32_t max_instances, uint32_t *moved)
{
    uint32_t asked = 0, now_moved = 0;
    p->gen++;
    p->max_instances = max_instances;
    /* From the head again after each: the engine may end a place (and
     * another may join, in the new generation) inside drain. Each place
     * is asked once (it is marked before), so this ends; a reload is
     * rare and the places are bounded by the listeners' connections. */
    for (tg_pool_member_t *m; p->ops != NULL && p->ops->drain != NULL && (m = next_old(p)) != NULL;) {
        m->draining = true;
        if (p->ops->drain(m)) {
            m->draining = false;
            m->gen = p->gen;
            now_moved++;
        } else {
            asked++;
        }
    }
    if (moved != NULL)
        *moved = now_moved;
    return asked;
}

void tg_apool_renew(tg_pool_member_t *m)
{
    if (m->pool == NULL)
        return;
    m->draining = false;
    m->gen = m->pool->gen;
}

uint32_t tg_apool_draining(const tg_apool_t *p)
{
    uint32_t n = 0;
    for (const tg_pool_member_t *m = p->head; m != NULL; m = m->next)
        n += m->draining;
    return n;
}
