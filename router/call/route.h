/* A route: the limit state of one configured agent, shared by every
 * caller and every instance of that agent, whatever its dialect — the
 * call table, the rate bucket, concurrency slots and the wait queue, the
 * per-tool limits, the shared stores and keys (rate_scope and
 * concurrency_scope shared), the fleet-slot backoff, the deadline list,
 * the registry rows and the config paths denials name.
 *
 * Both engines embed one (first member, <r>) in their agent struct, so a
 * limit's state is set up, registered, reported and freed once.
 *
 * Ownership: the engine's agent owns it; tg_route_fini frees what it
 * holds (the fleet timer and deadline timer are the engine's to close,
 * as they belong to its loop).
 */
#ifndef TG_ROUTER_CALL_ROUTE_H
#define TG_ROUTER_CALL_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "limits/conc.h"
#include "limits/gcra.h"
#include "limits/store.h"
#include "router/agent/instance.h"
#include "router/call/admit.h"
#include "router/call/dltimer.h"
#include "router/call/table.h"
#include "router/gateway.h"

typedef struct tg_route {
    tg_gw_t *gw;
    tg_agent_cfg_t *acfg; /* the config it runs with; a reload moves it */
    size_t idx;           /* position in cfg->agents (metrics rows) */
    tg_ctab_t tab;        /* the calls of every caller of the agent */
    uint64_t queued_frame_bytes; /* bytes of frames held by waiting calls */
    tg_gcra_t arate;
    tg_conc_t aconc;
    tg_waitq_t aq; /* its ring may be larger than max_queued_calls after a reload lowered it */
    tg_adm_tool_t *tools; /* one per configured tool */
    /* rate_scope shared: the store (redis, or its lease view) and the key
     * of the agent's bucket; NULL: the local bucket arate. tool_store: the
     * same for its tools with rate_scope shared. */
    tg_store_t *store, *tool_store;
    char rate_key[TG_STORE_KEY_MAX + 1];
    /* concurrency_scope shared: the store holding the fleet's slots (else
     * NULL) and its key. fleet_full: the store last said the fleet is
     * full, so queued calls wait for a release by this instance or for
     * fleet_timer (backing off) before asking again. */
    tg_store_t *cstore;
    char slots_key[TG_STORE_KEY_MAX + 1];
    bool fleet_full;
    uint32_t fleet_backoff_ms;
    uint32_t fleet_held;    /* fleet slots this instance's calls hold */
    uv_timer_t fleet_timer; /* initialised by the engine (fleet_timer_ready) */
    bool fleet_timer_ready;
    tg_dlt_t dlt;           /* its calls' deadlines */
    tg_adm_pump_t pump;     /* the queue's pump re-entered from a store answer */
    int reg_rate, reg_conc, reg_queue, reg_frame_out, reg_wq_agent;
    int reg_fleet; /* agent.ID.concurrency.shared, -1: local concurrency */
    tg_agent_rows_t rows; /* its instances' rows */
    char path_rate[256], path_conc[256], path_queue[256], path_dur[256], path_grace[256];
} tg_route_t;

/* The shared stores agent config <a> asks for, from <gw>'s: the rate
 * store and its bucket key (rate_scope shared; the lease view for
 * shared_mode lease), the same for its tools' shared buckets, and the
 * slot store and its key (concurrency_scope shared); NULL for a local
 * limit. 0, or -EINVAL after logging. */
int tg_route_stores(const tg_gw_t *gw, const tg_agent_cfg_t *a, tg_store_t **store,
                    char *rate_key, tg_store_t **tool_store, tg_store_t **cstore,
                    char *slots_key);

/* The tool limit state of config <a> into <*out>: a tool's rate bucket
 * is carried over from <r>'s current tools (NULL: none) when a tool of
 * that name has the same rate (fresh otherwise), or lives in <tool_store>
 * with rate_scope shared; concurrency and queue counts start at 0 (the
 * caller counts live calls in). 0, -EINVAL (a rate that cannot be set up,
 * a shared bucket without a store or key; logged) or -ENOMEM. */
int tg_route_tools_build(const tg_route_t *r, const tg_agent_cfg_t *a, tg_store_t *tool_store,
                         tg_adm_tool_t **out);

/* Set up <r> (zeroed) for agent <a> at metrics row <idx> of <gw>: stores,
 * buckets, slots, queue, tools, config paths, a call table of <ncalls>
 * entries of <esize> bytes, and its registry rows. 0, or a negative errno
 * after logging; tg_route_fini cleans up either way. */
int tg_route_setup(tg_route_t *r, tg_gw_t *gw, tg_agent_cfg_t *a, size_t idx, size_t esize,
                   uint64_t ncalls);

/* Register (or on reload update) the agent-wide rows of <r> with its
 * config's capacities. */
void tg_route_register(tg_route_t *r);

/* The agent's concurrency and queue usage into the metrics and the
 * registry, and tool <tool>'s too (-1: none). */
void tg_route_regs(tg_route_t *r, int tool);

/* The config paths denials name, from <r>->acfg (after a reload too). */
void tg_route_paths(tg_route_t *r);

/* True when rates <a> and <b> are the same (a bucket can be kept). */
bool tg_route_same_rate(const tg_exec_limits_t *a, const tg_exec_limits_t *b);

/* Free what <r> holds (not its timers). */
void tg_route_fini(tg_route_t *r);

#endif
