/* The gateway (see gateway.h): the process-wide state both dialects and
 * every front run on. */
#include "router/gateway/gateway.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <unistd.h>

#include "limits/preflight.h"
#include "limits/store.h"
#include "router/gateway/contain_cfg.h"
#include "router/gateway/log.h"

void tg_handle_close(uv_handle_t *h)
{
    if (h != NULL && h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h))
        uv_close(h, NULL);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    tg_handle_close(h);
}

/* A registered limit crossed 80% or re-armed below 50%: audit it, and log
 * the warning (the registry's event function, for every limit). */
static void on_limit_event(void *ctx, const tg_limit_t *l, tg_limit_ev_t lev)
{
    tg_gw_t *gw = ctx;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = lev == TG_LIMIT_EV_WARNING ? "limit.warning" : "limit.recovered";
    ev.limit.type = tg_limit_cat_name(l->cat);
    ev.limit.scope = l->scope;
    ev.limit.name = l->name;
    ev.limit.observed = (int64_t)l->current;
    ev.limit.cap = (int64_t)l->capacity;
    if (gw->audit != NULL)
        tg_audit_emit(gw->audit, &ev);
    /* As a share of the cap ("at 1 of 1 (100 %)"); once per busy episode
     * (the registry re-arms after TG_REGISTRY_REARM_QUIET_MS below 50 %). */
    if (lev == TG_LIMIT_EV_WARNING)
        tg_log_warn("limit %s at %" PRIu64 " of %" PRIu64 " (%u %%)", l->name, l->current,
                    l->capacity, (unsigned)((unsigned __int128)l->current * 100u / l->capacity));
}

/* Calls waiting for the shared store, against store.max_pending: sampled
 * once a second and on every /limits (a burst within a second shows in the
 * high-water only when a sample catches it). */
int tg_gw_hook_add(tg_gw_t *gw, void (*tick)(void *arg, uint64_t now), void (*reap)(void *arg),
                   void *arg)
{
    for (size_t i = 0; i < gw->nhooks; i++)
        if (gw->hooks[i].arg == arg && gw->hooks[i].tick == tick && gw->hooks[i].reap == reap)
            return 0;
    if (gw->nhooks == TG_GW_HOOKS_MAX)
        return -ENOSPC;
    gw->hooks[gw->nhooks++] = (struct tg_gw_hook){.tick = tick, .reap = reap, .arg = arg};
    return 0;
}

void tg_gw_store_sample(tg_gw_t *gw)
{
    if (gw->store != NULL && gw->reg_store_pending >= 0)
        tg_registry_update(&gw->reg, gw->reg_store_pending, tg_store_pending(gw->store));
}

/* Once a second: sample the audit queue and the store's pending calls,
 * and let the engine age out what it counts per second. */
#define TRIM_EVERY_MS 10000 /* fixed internal bound: heap trims under churn that never pauses */

/* Churn (issue 20 item 19): connections opened and closed as fast as a
 * client can leave the heap as large as the most that were open at once,
 * in free chunks among live ones that the allocator keeps (it only gives
 * back a free top of the heap). Once a tick passes with no connection
 * ended after some did, the free pages go back (malloc_trim: its cost is
 * a walk of the heap, once per burst, never per connection), so RSS
 * returns near where it was when the churn stops. */
static void trim_after_churn(tg_gw_t *gw)
{
    uint64_t now = uv_now(gw->loop);
    bool quiet = gw->conns_ended == gw->trim_seen;
    /* Churn that never pauses (a steady trickle of short connections)
     * gets a trim every TRIM_EVERY_MS all the same. */
    bool long_due = gw->trim_due && now - gw->trim_at >= TRIM_EVERY_MS;
    if (!quiet) {
        gw->trim_seen = gw->conns_ended;
        if (!gw->trim_due)
            gw->trim_at = now;
        gw->trim_due = true;
    }
    if (gw->trim_due && (quiet || long_due)) {
        gw->trim_due = false;
        gw->trim_at = now;
#ifdef __GLIBC__
        malloc_trim(0);
#endif
    }
}

static void on_tick(uv_timer_t *t)
{
    tg_gw_t *gw = t->data;
    trim_after_churn(gw);
    for (size_t i = 0; i < gw->nhooks; i++)
        if (gw->hooks[i].tick != NULL)
            gw->hooks[i].tick(gw->hooks[i].arg, uv_now(gw->loop));
    tg_registry_tick(&gw->reg, uv_now(gw->loop));
    if (gw->audit != NULL)
        tg_registry_update(&gw->reg, gw->reg_audit, tg_audit_queued(gw->audit));
    tg_gw_store_sample(gw);
}

static void on_store_event(void *arg, tg_store_event_t sev, const char *reason)
{
    tg_gw_t *gw = arg;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = sev == TG_STORE_EV_DEGRADED ? "store.degraded" : "store.recovered";
    ev.reason = tg_store_policy_name((tg_store_policy_t)gw->cfg->store.on_store_error);
    if (gw->metrics_ok)
        tg_metrics_store(&gw->metrics, TG_STORE_REDIS, sev == TG_STORE_EV_DEGRADED);
    if (gw->audit != NULL)
        tg_audit_emit(gw->audit, &ev);
    /* <reason> names the store by its redacted URL: no password. */
    tg_logf(sev == TG_STORE_EV_DEGRADED ? TG_LOG_WARN : TG_LOG_INFO, NULL, "%s: %s", ev.event,
            reason);
}

/* Open the shared store (store.kind redis) and, when an agent asks for
 * it, the lease view over it. 0, or -1 with <err> filled. */
static int gw_store_open(tg_gw_t *gw, tg_config_t *cfg, tg_err_t *err)
{
    tg_store_opts_t o;
    tg_err_t serr;
    memset(&o, 0, sizeof(o));
    o.kind = TG_STORE_REDIS;
    o.url = cfg->store.url;
    o.prefix = cfg->store.prefix;
    o.timeout_ms = cfg->store.timeout_ms;
    o.on_store_error = (tg_store_policy_t)cfg->store.on_store_error;
    o.instances = cfg->store.instances;
    o.connect_timeout_ms = cfg->store.connect_timeout_ms;
    o.dead_after_ms = cfg->store.dead_after_ms;
    o.backoff_initial_ms = cfg->store.backoff_ms;
    o.backoff_max_ms = cfg->store.max_backoff_ms;
    o.lease_ms = cfg->store.lease_ms;
    o.slot_lease_ms = cfg->store.slot_lease_ms;
    o.instance = cfg->instance;
    o.max_pending = cfg->store.max_pending;
    o.local_max_keys = cfg->store.local_max_keys;
    o.on_event = on_store_event;
    o.event_arg = gw;
    if (tg_store_open(gw->loop, &o, &gw->store, &serr) < 0)
        return tg_err_set(err, -1, "store: %s", serr.msg);
    bool lease = false;
    for (size_t i = 0; i < cfg->nagents; i++)
        for (size_t t = 0; t <= cfg->agents[i].ntools; t++)
            lease = lease || (cfg->agents[i].shared_lease &&
                              (t < cfg->agents[i].ntools ? cfg->agents[i].tools[t].lim.rate_shared
                                                         : cfg->agents[i].rate_shared));
    if (lease && tg_store_lease_open(gw->store, &o, &gw->lease, &serr) < 0)
        return tg_err_set(err, -1, "store (lease mode): %s", serr.msg);
    return 0;
}

/* Redis Stream sinks keep their URL as text in config (audit must not
 * depend on limits/); the store's parser fills their endpoints here. */
static int sink_endpoints(tg_config_t *cfg, tg_err_t *err)
{
    for (size_t i = 0; i < cfg->naudit_sinks; i++) {
        tg_audit_sink_cfg_t *sk = &cfg->audit_sinks[i];
        if (sk->kind != TG_AUDIT_SINK_REDIS_STREAM)
            continue;
        tg_store_url_t u;
        tg_err_t uerr;
        if (tg_store_url_parse(&u, sk->url, &uerr) < 0)
            return tg_err_set(err, -1, "audit.sinks[%zu].url: %s", i, uerr.msg);
        sk->ep.is_unix = u.is_unix;
        sk->ep.port = u.port;
        sk->ep.db = u.db;
        snprintf(sk->ep.host, sizeof(sk->ep.host), "%s", u.host);
        snprintf(sk->ep.path, sizeof(sk->ep.path), "%s", u.path);
        snprintf(sk->ep.user, sizeof(sk->ep.user), "%s", u.user);
        snprintf(sk->ep.password, sizeof(sk->ep.password), "%s", u.password);
        tg_store_url_wipe(&u);
    }
    return 0;
}

/* The audit pipe's own news (a sink failing and writing again, a file
 * deleted or moved and opened anew) goes to toolgate's log. */
static void audit_log(void *ctx, tg_audit_news_t level, const char *line)
{
    (void)ctx;
    tg_logf(level == TG_AUDIT_NEWS_ERROR  ? TG_LOG_ERROR
            : level == TG_AUDIT_NEWS_WARN ? TG_LOG_WARN
                                          : TG_LOG_INFO,
            NULL, "%s", line);
}

int tg_gw_open(tg_gw_t *gw, uv_loop_t *loop, tg_config_t *cfg, tg_err_t *err)
{
    char audit_path[4096], name[TG_LIMIT_NAME_MAX];
    gw->loop = loop;
    gw->cfg = cfg;
#ifdef __GLIBC__
    /* Read blocks (TG_IO_BLOCK, 256 KiB) and larger come from mmap and go
     * back to the system when freed. glibc otherwise raises this threshold
     * to the size of each large block freed, after which such blocks come
     * from the heap, where a burst of connections leaves them as free
     * chunks it does not give back (issue 20 item 19: 15 MiB growing to
     * 83 MiB under connection churn, and staying). The pool keeps a few
     * spare blocks, so the hot path does not map a block per read. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    gw->handshake_timeout_ms = cfg->handshake_timeout_ms;
    gw->reload_drain_timeout_ms = cfg->reload_drain_timeout_ms;
    tg_log_init(loop);
    tg_pool_init(&gw->pool, (size_t)cfg->max_frame_bytes + 2 * TG_IO_CHUNK);
    tg_registry_init(&gw->reg);
    tg_registry_on_event(&gw->reg, on_limit_event, gw);
    gw->reg.rearm_quiet_ms = TG_REGISTRY_REARM_QUIET_MS;
    tg_registry_tick(&gw->reg, uv_now(loop));
    snprintf(gw->path_frame, sizeof(gw->path_frame), "router.max_frame_bytes");
    snprintf(name, sizeof(name), "caller.frame_bytes");
    gw->reg_frame_in = tg_registry_add(&gw->reg, name, TG_LIMIT_FRAME, "instance", cfg->max_frame_bytes);
    snprintf(name, sizeof(name), "caller.write_queue_bytes");
    gw->reg_wq_caller = tg_registry_add(&gw->reg, name, TG_LIMIT_WRITE_QUEUE, "session",
                                        2 * cfg->max_frame_bytes);
    /* Serve only: wrap's stdin is its own caller's, with no frame clock. */
    gw->reg_frame_time = -1;
    if (!gw->wrap_mode)
        gw->reg_frame_time = tg_registry_add(&gw->reg, "caller.frame_timeout_ms", TG_LIMIT_FRAME,
                                             "session", cfg->frame_timeout_ms);
    snprintf(name, sizeof(name), "audit.queue");
    gw->reg_audit = tg_registry_add(&gw->reg, name, TG_LIMIT_AUDIT_QUEUE, "instance", cfg->audit_queue);

    if (sink_endpoints(cfg, err) < 0)
        return -1;
    const char *ap = cfg->audit_path;
    if (ap == NULL) {
        if (tg_audit_default_path(audit_path, sizeof(audit_path)) < 0)
            return tg_err_set(err, -1, "no audit path: set --audit PATH, XDG_STATE_HOME or HOME");
        ap = audit_path;
    }
    tg_audit_opts_t ao = {.path = ap,
                          .instance = cfg->instance,
                          .queue_cap = cfg->audit_queue,
                          .sinks = cfg->audit_sinks,
                          .nsinks = cfg->naudit_sinks,
                          .log = audit_log};
    if (tg_audit_open(&gw->audit, loop, &ao, err) < 0)
        return -1;
    gw->reg_store_pending = -1;
    if (cfg->store.redis && gw_store_open(gw, cfg, err) < 0)
        return -1;
    if (gw->store != NULL) {
        snprintf(name, sizeof(name), "store.pending");
        gw->reg_store_pending = tg_registry_add(&gw->reg, name, TG_LIMIT_QUEUE, "instance",
                                                cfg->store.max_pending != 0 ? cfg->store.max_pending
                                                                            : TG_STORE_DEF_MAX_PENDING);
    }
    if (tg_peaks_default_path(gw->peaks_path, sizeof(gw->peaks_path)) < 0)
        gw->peaks_path[0] = '\0';
    /* Containment is detected once; without a usable backend, required
     * mode refuses to run rather than start agents it cannot contain. */
    tg_contain_opts_t co = {.mode = tg_config_contain_mode(cfg)};
    tg_err_t cerr;
    if (tg_contain_init(&gw->contain, &co, &cerr) == 0) {
        gw->contain_ok = true;
    } else if (co.mode == TG_CONTAIN_REQUIRED) {
        return tg_err_set(
            err, -1, "containment.mode is required but containment cannot be set up: %s", cerr.msg);
    } else {
        tg_log_warn("containment unavailable, agents run uncontained: %s", cerr.msg);
    }
    if (tg_metrics_init(&gw->metrics, cfg) == 0)
        gw->metrics_ok = true;
    /* Agents are not added after the start (a reload that adds one is
     * refused), so one row per configured agent is enough. */
    if ((gw->usage = calloc(cfg->nagents, sizeof(*gw->usage))) == NULL)
        return tg_err_set(err, -1, "out of memory");
    gw->nusage = cfg->nagents;
    uv_timer_init(loop, &gw->tick_timer);
    gw->tick_timer.data = gw;
    uv_timer_start(&gw->tick_timer, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&gw->tick_timer);

    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "router.started";
    ev.pid = getpid();
    tg_audit_emit(gw->audit, &ev);
    return 0;
}

void tg_gw_stop(tg_gw_t *gw)
{
    if (gw->admin != NULL && gw->admin_close != NULL)
        gw->admin_close(gw->admin);
    gw->admin = NULL;
    /* The store's connection and timers would keep the loop alive; calls
     * still waiting on it are answered (cancelled) first. */
    if (gw->lease != NULL)
        tg_store_close(gw->lease, NULL, NULL);
    if (gw->store != NULL)
        tg_store_close(gw->store, NULL, NULL);
    gw->lease = gw->store = NULL;
    tg_handle_close((uv_handle_t *)&gw->tick_timer);
}

/* After the loop ended: write out and close the audit trail (its last
 * write request is freed by the next loop run). No session may emit after. */
static void tg_gw_close(tg_gw_t *gw)
{
    tg_gw_stop(gw); /* idempotent: error paths may not have stopped */
    if (gw->audit != NULL)
        tg_audit_close(gw->audit);
    gw->audit = NULL;
}

/* Once every session and handle is gone: free buffers and registry. */
static void tg_gw_free(tg_gw_t *gw)
{
    if (gw->metrics_ok)
        tg_metrics_free(&gw->metrics);
    gw->metrics_ok = false;
    if (gw->contain_ok)
        (void)tg_contain_fini(&gw->contain);
    gw->contain_ok = false;
    tg_registry_free(&gw->reg);
    tg_pool_free(&gw->pool);
    free(gw->usage);
    gw->usage = NULL;
    gw->nusage = 0;
}

int tg_caller_lim_init(tg_caller_lim_t *cl, const tg_caller_cfg_t *cc)
{
    memset(cl, 0, sizeof(*cl));
    cl->name = cc->name;
    cl->reg_rate = cl->reg_conc = -1;
    if (cc->lim.rate_src != TG_SRC_DEFAULT) {
        if (tg_gcra_init(&cl->rate, cc->lim.rate_limit.count, cc->lim.rate_limit.period_ms,
                         cc->lim.burst_src != TG_SRC_DEFAULT ? cc->lim.burst : 0) < 0)
            return -EINVAL;
        cl->has_rate = true;
        cl->rate_cfg = cc->lim.rate_limit;
    }
    if (cc->lim.concurrent_src != TG_SRC_DEFAULT) {
        tg_conc_init(&cl->conc, cc->lim.max_concurrent_calls);
        cl->has_conc = true;
    }
    snprintf(cl->path_rate, sizeof(cl->path_rate), "callers.%s.execution_limits.rate_limit",
             cc->name);
    snprintf(cl->path_conc, sizeof(cl->path_conc),
             "callers.%s.execution_limits.max_concurrent_calls", cc->name);
    return 0;
}

void tg_gw_teardown(tg_gw_t *gw, uv_loop_t *loop)
{
    /* Write out the audit trail, close whatever is still open (error
     * paths) and let the close callbacks run: sessions free themselves
     * there (they emit nothing while closing), and so does the audit
     * write request that was in flight. Buffers go last. */
    tg_gw_close(gw);
    tg_log_close();
    gw->tearing_down = true;
    uv_walk(loop, walk_close, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    for (size_t i = 0; i < gw->nhooks; i++)
        if (gw->hooks[i].reap != NULL)
            gw->hooks[i].reap(gw->hooks[i].arg);
    tg_gw_free(gw);
    (void)uv_loop_close(loop);
}
