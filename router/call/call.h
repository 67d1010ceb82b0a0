/* A call as the admission pipeline sees it, whatever its dialect: where it
 * is in the table, where it is in admission (its state), the slots and
 * the fleet slot it holds, who decided its shared limits, its deadline,
 * and, while it waits, its frame. Each engine's call struct has one of
 * these first (<cc>) and adds what its dialect needs (the caller's ids,
 * its session or connection).
 *
 * States. IDLE: not in admission (a free entry, or an entry that is not a
 * limited call); RATE: waiting for the shared rate store's answer (holds
 * its frame only); QUEUED: in the agent's wait queue (holds no slot);
 * SLOT: holds its local slots while the shared store decides on a fleet
 * slot (it may still sit in the queue: in_queue); INFLIGHT: the agent has
 * it (holds its slots and, with concurrency_scope shared, a fleet slot);
 * CANCELLING: the caller cancelled it, the agent's answer still goes to
 * the caller; ZOMBIE: answered already (timeout, cancel, caller gone),
 * only its slots are left until the agent proves alive or is killed.
 */
#ifndef TG_ROUTER_CALL_CALL_H
#define TG_ROUTER_CALL_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "limits/deadline.h"
#include "router/call/dltimer.h"
#include "router/gateway/io.h"

struct tg_store_slot;
struct tg_route;

/* Whose cap set a call's deadline (the config path a timeout names). */
typedef enum tg_dl_src { TG_DL_AGENT = 0, TG_DL_TOOL, TG_DL_CALLER } tg_dl_src_t;

typedef enum tg_call_state {
    TG_CALL_IDLE = 0,
    TG_CALL_RATE,
    TG_CALL_QUEUED,
    TG_CALL_SLOT,
    TG_CALL_INFLIGHT,
    TG_CALL_CANCELLING,
    TG_CALL_ZOMBIE,
} tg_call_state_t;

typedef struct tg_callc {
    struct tg_route *r;             /* the route whose table holds it */
    uint64_t id;                    /* its id in the table (router/call/table.h) */
    uint32_t idx;                   /* its index in the table */
    tg_call_state_t state;
    int tool;                       /* index in the agent's configured tools, -1: none */
    bool tool_slot;                 /* holds a tool concurrency slot */
    bool caller_slot;               /* holds a slot of its caller's limits */
    bool in_queue;                  /* in the agent's wait queue */
    struct tg_store_slot *fslot;    /* the fleet slot held (concurrency_scope shared), or NULL */
    uint32_t fleet_seen, fleet_cap; /* holders and cap at the store's last refusal; cap 0: none */
    const char *rate_by, *slot_by;  /* the shared rate's and the shared slot's deciders */
    const char *decided_by;         /* what the audit names (tg_callc_note_slot) */
    const char *stage;              /* how a zombie ended: "timed_out", "cancelled", ... */
    uint64_t t_start;               /* uv_now at arrival */
    uint64_t deadline_ms;           /* relative to t_start */
    uint64_t due;                   /* loop time its deadline falls due (tg_pipe_arm) */
    tg_dl_src_t dl_src;             /* whose cap it is (tg_route_deadline) */
    uint64_t bytes_in;
    tg_dl_node_t dl;                /* in the agent's deadline list */
    /* A waiting call keeps its frame: a reference on the block, the span,
     * and the id span relative to it (the id the engine splices). */
    tg_block_t *qblk;
    const char *qframe;
    size_t qlen, qid_off, qid_len;
    /* Kept when the entry is reused: the timer stays initialised. */
    tg_dlt_own_t own;               /* a deadline the list would not take */
} tg_callc_t;

/* Clear <cc> for a new call <id> of route <r> at table index <idx> (all
 * but its own timer), tool -1, arrived at <now>. */
static inline void tg_callc_reset(tg_callc_t *cc, struct tg_route *r, uint64_t id, uint32_t idx,
                                  uint64_t now)
{
    memset(cc, 0, offsetof(tg_callc_t, own));
    cc->r = r;
    cc->id = id;
    cc->idx = idx;
    cc->tool = -1;
    cc->t_start = now;
}

/* True when <s> holds the agent's slot (and the tool's, the fleet's). */
static inline bool tg_callc_holds_slots(tg_call_state_t s)
{
    return s == TG_CALL_INFLIGHT || s == TG_CALL_CANCELLING || s == TG_CALL_ZOMBIE ||
           s == TG_CALL_SLOT;
}

#endif
