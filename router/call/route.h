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
#include "router/call/call.h"
#include "router/call/dltimer.h"
#include "router/call/table.h"
#include "router/gateway/metrics.h"
#include "router/gateway/gateway.h"

typedef struct tg_call_ops tg_call_ops_t; /* router/call/pipeline.h */

typedef struct tg_route {
    tg_gw_t *gw;
    const tg_call_ops_t *ops; /* its dialect's (set by the engine before the first call) */
    tg_agent_cfg_t *acfg; /* the config it runs with; a reload moves it */
    size_t idx;           /* position in cfg->agents (metrics rows) */
    tg_ctab_t tab;        /* the calls of every caller of the agent */
    uint64_t queued_frame_bytes; /* bytes of frames held by waiting calls */
    tg_gcra_t arate;
    tg_conc_t aconc;
    tg_waitq_t aq; /* its ring may be larger than max_queued_calls after a reload lowered it */
    uint32_t qcap; /* max_queued_calls: how many calls may wait */
    /* A reload replaces the route's shared instance: calls wait for the
     * new one (OpenSentience; an MCP reload gives new sessions a
     * successor route instead). */
    bool switching;
    uint32_t nstore_wait; /* store answers still to come (tickets) */
    int *open_timers; /* counts the call timers the pipeline initialises (NULL: nobody) */
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
    /* What this route counts in the agent's summed rows (a reload's
     * successor route counts beside the old one: tg_registry_share). */
    uint64_t sh_conc, sh_queue, sh_fleet;
    /* A reload replaced it (its sessions drain): the agent's rate rows are
     * the current route's bucket, which this one no longer writes. */
    bool retired;
    tg_agent_rows_t rows; /* its instances' rows */
    char path_rate[256], path_conc[256], path_queue[256], path_dur[256], path_grace[256];
} tg_route_t;

/* The shared stores agent config <a> asks for, from <gw>'s: the rate
 * store and its bucket key (rate_scope shared; the lease view for
 * shared_mode lease), the same for its tools' shared buckets, and the
 * slot store and its key (concurrency_scope shared); NULL for a local
 * limit. 0, or -EINVAL with <err> filled. */
int tg_route_stores(const tg_gw_t *gw, const tg_agent_cfg_t *a, tg_store_t **store,
                    char *rate_key, tg_store_t **tool_store, tg_store_t **cstore,
                    char *slots_key, tg_err_t *err);

/* The tool limit state of config <a> into <*out>: a tool's rate bucket
 * is carried over from <r>'s current tools (NULL: none) when a tool of
 * that name has the same rate (fresh otherwise), or lives in <tool_store>
 * with rate_scope shared; concurrency and queue counts start at 0 (the
 * caller counts live calls in). 0, -EINVAL (a rate that cannot be set up,
 * a shared bucket without a store or key) or -ENOMEM, with <err> filled. */
int tg_route_tools_build(const tg_route_t *r, const tg_agent_cfg_t *a, tg_store_t *tool_store,
                         tg_adm_tool_t **out, tg_err_t *err);

/* Set up <r> (zeroed) for agent <a> at metrics row <idx> of <gw>: stores,
 * buckets, slots, queue, tools, config paths, a call table of <ncalls>
 * entries of <esize> bytes (ids fitted to at most <fit> entries, 0: the
 * table may grow to TG_CALL_MAX), and its registry rows. 0, or a negative
 * errno with <err> filled (its key path first); tg_route_fini cleans up
 * either way. */
int tg_route_setup(tg_route_t *r, tg_gw_t *gw, tg_agent_cfg_t *a, size_t idx, size_t esize,
                   uint64_t ncalls, uint32_t fit, tg_err_t *err);

/* Register (or on reload update) the agent-wide rows of <r> with its
 * config's capacities. */
void tg_route_register(tg_route_t *r);

/* The agent's concurrency and queue usage into the registry and the
 * metrics, and tool <tool>'s too (-1: none). The rows sum this route's
 * counts with those of the other routes of the agent (a reload's old
 * and new ones), and the metrics show the sums. Several times per call:
 * inline, each unchanged count returns at once. */
static inline void tg_route_regs(tg_route_t *r, int tool)
{
    tg_gw_t *gw = r->gw;
    tg_registry_share(&gw->reg, r->reg_conc, &r->sh_conc, r->aconc.inflight);
    tg_registry_share(&gw->reg, r->reg_queue, &r->sh_queue, r->aq.count);
    tg_registry_share(&gw->reg, r->reg_fleet, &r->sh_fleet, r->fleet_held);
    if (gw->metrics_ok)
        tg_metrics_load(&gw->metrics, r->idx,
                        (uint32_t)tg_registry_current(&gw->reg, r->reg_conc, r->aconc.inflight),
                        (uint32_t)tg_registry_current(&gw->reg, r->reg_queue, r->aq.count));
    if (tool >= 0)
        tg_adm_tool_regs(gw, &r->tools[tool]);
}

/* The config paths denials name, from <r>->acfg (after a reload too). */
void tg_route_paths(tg_route_t *r);

/* True when rates <a> and <b> are the same (a bucket can be kept). */
bool tg_route_same_rate(const tg_exec_limits_t *a, const tg_exec_limits_t *b);

/* ---- slots and the wait queue (both dialects' admission) -------------- */

/* Room for call <cc> in its tool's slots and its caller's <cl> (NULL:
 * none); the agent's are checked by the caller of this. */
static inline bool tg_route_has_room(const tg_route_t *r, const tg_callc_t *cc,
                                     const tg_caller_lim_t *cl)
{
    return tg_adm_has_room(cc->tool >= 0 ? &r->tools[cc->tool] : NULL, cl);
}

/* Take call <cc>'s local slots: the agent's, its tool's, its caller's
 * <cl> (NULL: none). The registry hears of them when the call is
 * forwarded: slots held only while the shared store decides (and given
 * back when it says the fleet is full) must not make a limit warn and
 * re-arm on every retry. */
void tg_route_take_slots(tg_route_t *r, tg_callc_t *cc, tg_caller_lim_t *cl);

/* Give back every slot call <cc> holds: the agent's, its tool's, its
 * caller's <cl> (NULL: the caller left and gave its slot back already),
 * and its fleet slot. A fleet slot freed by this instance is room in the
 * fleet, so the queue may ask again. Fleet slots live in the redis store
 * itself (never its lease view), also when a reload has since turned
 * shared concurrency off; after the store's close the slot died with it. */
void tg_route_release_slots(tg_route_t *r, tg_callc_t *cc, tg_caller_lim_t *cl);

/* Give back fleet slot <slot> (an answer nobody waits for any more). */
void tg_route_fleet_release(tg_route_t *r, struct tg_store_slot *slot);

/* The store granted <cc> fleet slot <slot>. */
void tg_route_fleet_granted(tg_route_t *r, tg_callc_t *cc, struct tg_store_slot *slot);

/* Call <cc> waits at the end of the queue (which has room). */
void tg_route_enqueue(tg_route_t *r, tg_callc_t *cc);
/* Take <cc> out of the queue when it is in it. */
void tg_route_unqueue(tg_route_t *r, tg_callc_t *cc);
/* Take the queue's entry <i> (call <cc>) out. */
void tg_route_dequeue_at(tg_route_t *r, uint32_t i, tg_callc_t *cc);
/* Put <cc> (not in the queue) back where its arrival puts it (ids grow
 * with arrival): calls that came later must not pass it. False when the
 * agent's queue (<cap> calls) or the tool's is full. */
bool tg_route_requeue(tg_route_t *r, tg_callc_t *cc, uint32_t cap);

/* The store said the fleet is full: queued calls wait until this instance
 * releases a fleet slot, or until <on_timer> runs after a retry delay
 * (tg_adm_fleet_delay: a doubling backoff while the refusals go on). The
 * fleet timer's data is <data>, set up here on first use. */
void tg_route_fleet_wait(tg_route_t *r, uv_timer_cb on_timer, void *data);

/* Record the fleet slot's decider <by> on <cc>: a failure policy that
 * decided the shared rate outranks the slot's answer, so decided_by names
 * the policy whenever one decided any part of the call. */
void tg_route_note_slot(tg_callc_t *cc, tg_store_decider_t by);

/* Call <cc> waits (for the store or in the queue): it keeps its frame
 * [frame, frame+len) of block <b> (id span at <id_off>, <id_len>), taking
 * a reference on <b> unless <held>. */
void tg_route_hold_frame(tg_route_t *r, tg_callc_t *cc, tg_block_t *b, const char *frame,
                         size_t len, size_t id_off, size_t id_len, bool held);
/* The frame <cc> held, handed to the caller with its reference (NULL:
 * none); it no longer counts as waiting. */
tg_block_t *tg_route_take_frame(tg_route_t *r, tg_callc_t *cc);

/* ---- rate ------------------------------------------------------------- */

/* The local rate scopes of call <cc> into <scopes> (room for 3): the
 * agent's unless shared (<with_agent> false: left out), its tool's unless
 * shared, its caller's <cl>. Their number. */
int tg_route_rate_scopes(tg_route_t *r, const tg_callc_t *cc, tg_caller_lim_t *cl,
                         bool with_agent, tg_adm_rate_scope_t *scopes);
/* A call refused by none of <scopes> takes a token from each. */
void tg_route_rate_take(tg_route_t *r, const tg_adm_rate_scope_t *scopes, int n, uint64_t now);

/* Which shared bucket a rate store answer is for. */
enum { TG_ROUTE_STEP_AGENT = 0, TG_ROUTE_STEP_TOOL = 1 };

/* Ask the shared store for call <cc>'s token from the agent's bucket
 * (TG_ROUTE_STEP_AGENT) or its tool's: <cb>(<arg>, result). 0, or a
 * negative errno when the request could not be made (nothing pending).
 * The callback may run before this returns. */
int tg_route_rate_ask(tg_route_t *r, const tg_callc_t *cc, int step, tg_store_take_cb cb,
                      void *arg);

/* ---- deadline and expiry --------------------------------------------- */

/* Call <cc>'s deadline: min(its agent's cap, its tool's cap when the
 * operator set one, the caller's <timeout_ms> when <has_timeout>); whose
 * it is in cc->dl_src. */
void tg_route_deadline(const tg_route_t *r, tg_callc_t *cc, bool has_timeout,
                       uint64_t timeout_ms);
/* The config path that raises <cc>'s deadline; NULL when it is the
 * caller's own. */
const char *tg_route_deadline_path(const tg_route_t *r, const tg_callc_t *cc);

/* A waiting call <cc> reached its deadline: true when the shared limit is
 * what held it back (the store deciding now, or it refused the call while
 * the local scopes, its caller's <cl> included, have room and the agent
 * could take it: <ready>). */
bool tg_route_held_by_fleet(const tg_route_t *r, const tg_callc_t *cc, const tg_caller_lim_t *cl,
                            bool ready);
/* Fill denial <d> (initialised, code concurrency) of call <cc> whose
 * deadline passed while queued: the agent's slots, the config path of the
 * scope that was full; the detail in <detail> of <cap> bytes. */
void tg_route_queued_denial(const tg_route_t *r, const tg_callc_t *cc, tg_denial_t *d,
                            char *detail, size_t cap);
/* Fill denial <d> (initialised, code timeout) of call <cc> in flight past
 * its deadline at <now>: <path> raises it (NULL: the caller's own
 * <caller_field> set it); the detail in <detail> of <cap> bytes. */
void tg_route_timeout_denial(const tg_callc_t *cc, uint64_t now, const char *path,
                             const char *caller_field, tg_denial_t *d, char *detail, size_t cap);

/* Free what <r> holds (not its timers). */
void tg_route_fini(tg_route_t *r);

#endif
