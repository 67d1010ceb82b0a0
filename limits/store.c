/* Store interface: dispatch, key layout, names, and the failure policies
 * that do not need a bucket (see store.h). */
#include "limits/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int tg_store_open(uv_loop_t *loop, const tg_store_opts_t *o, tg_store_t **out, tg_err_t *err)
{
    switch (o->kind) {
    case TG_STORE_LOCAL:
        return tg_store_local_open(o, out, err);
    case TG_STORE_REDIS:
        return tg_store_redis_open(loop, o, out, err);
    }
    return tg_err_set(err, -1, "store: unknown kind %d", (int)o->kind);
}

int tg_store_key(char *buf, size_t cap, const char *prefix, const char *agent, const char *limit)
{
    /* A brace in the prefix would become the Cluster hash tag and put
     * every agent in one slot; a '}' in the agent would cut the tag short
     * and could make two agents share one. Neither is ever needed. */
    if (strpbrk(prefix, "{}") != NULL || agent[0] == '\0' || strpbrk(agent, "{}") != NULL)
        return -EINVAL;
    int n = snprintf(buf, cap, "%s{%s}:%s", prefix, agent, limit);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= cap || (size_t)n > TG_STORE_KEY_MAX)
        return -ENAMETOOLONG;
    return n;
}

const char *tg_store_decider_name(tg_store_decider_t d)
{
    switch (d) {
    case TG_STORE_BY_STORE:
        return "store";
    case TG_STORE_BY_LOCAL_FALLBACK:
        return "local_fallback";
    case TG_STORE_BY_OPEN:
        return "open";
    case TG_STORE_BY_CLOSED:
        return "closed";
    }
    return "unknown";
}

const char *tg_store_policy_name(tg_store_policy_t p)
{
    switch (p) {
    case TG_STORE_POLICY_LOCAL:
        return "local";
    case TG_STORE_POLICY_OPEN:
        return "open";
    case TG_STORE_POLICY_CLOSED:
        return "closed";
    }
    return "unknown";
}

int tg_store_policy_parse(const char *s, tg_store_policy_t *out)
{
    static const tg_store_policy_t all[] = {TG_STORE_POLICY_LOCAL, TG_STORE_POLICY_OPEN,
                                            TG_STORE_POLICY_CLOSED};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, tg_store_policy_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -EINVAL;
}

tg_store_result_t tg_store_policy_result(tg_store_policy_t p, int status, uint64_t cap, uint32_t n,
                                         uint64_t retry_hint_ms)
{
    tg_store_result_t r = {.status = status};
    r.gcra.cap = cap;
    if (p == TG_STORE_POLICY_OPEN) {
        r.decided_by = TG_STORE_BY_OPEN;
        r.gcra.allowed = true;
        r.granted = n;
    } else {
        /* Anything else that reaches here fails closed: refusing is the
         * safe answer when no bucket can be consulted. */
        r.decided_by = TG_STORE_BY_CLOSED;
        r.gcra.allowed = false;
        r.gcra.retry_after_ms = retry_hint_ms > 0 ? retry_hint_ms : 1;
    }
    return r;
}

uint64_t tg_store_share(uint64_t n, uint32_t instances)
{
    if (n == 0 || instances <= 1)
        return n;
    uint64_t s = n / instances;
    return s > 0 ? s : 1;
}

uint64_t tg_store_slot_renew_ms(uint64_t lease_ms)
{
    return lease_ms >= 3 ? lease_ms / 3 : 1;
}

uint64_t tg_store_mono_ms(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

tg_store_result_t tg_store_gcra_take_n(tg_gcra_t *g, uint64_t now, uint32_t n)
{
    tg_store_result_t out = {.decided_by = TG_STORE_BY_STORE};
    for (uint32_t i = 0; i < n; i++) {
        tg_gcra_result_t r = tg_gcra_take(g, now);
        if (!r.allowed) {
            if (out.granted == 0)
                out.gcra = r;
            else
                out.gcra.retry_after_ms = r.retry_after_ms;
            return out;
        }
        out.gcra = r;
        out.granted++;
    }
    return out;
}
