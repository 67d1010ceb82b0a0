/* Call admission: the pieces both serve engines (router/dialect/mcp/session.c for
 * MCP, router/dialect/opensentience/os_gw.c for OpenSentience) decide a call's admission with.
 * Their call tables and state machines differ; what a limit says does
 * not:
 *
 *  - the local rate scopes: which one refuses, and its denial's unit and
 *    detail text ("11 calls in 1m > 10/minute");
 *  - the fields of a denial and of a call's audit event, and the metrics
 *    outcome of an audited call;
 *  - the denials of a full wait queue, of the shared slots (fleet) and
 *    of the shared store;
 *  - the retry backoff while the store says the fleet is full;
 *  - the wait queue: a call put back in arrival order, the pump's
 *    re-entry guard;
 *  - a tool's own limit state (tools.NAME): its setup from the config,
 *    its shared bucket key, its rows in the limit registry, and with
 *    the caller's limits the local slots a call takes.
 *
 * All but tg_adm_tool_register and tg_adm_tool_regs (registry rows,
 * which may audit) are pure: no libuv, no clock, no I/O. Every text is
 * the one both engines wrote before, byte for byte, since tests assert
 * them.
 */
#ifndef TG_ROUTER_ADMIT_H
#define TG_ROUTER_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"
#include "config/config.h"
#include "limits/conc.h"
#include "limits/gcra.h"
#include "limits/registry.h"
#include "limits/store.h"
#include "router/call/denial.h"
#include "router/gateway/metrics.h"
#include "router/gateway/gateway.h"

#define TG_ADM_FLEET_RETRY_MIN_MS 20  /* fixed internal bound: first refused-slot wait */
#define TG_ADM_FLEET_RETRY_MAX_MS 500 /* fixed internal bound: longest wait between slot asks */

/* ---- rate denials ------------------------------------------------------ */

/* The denial's unit for rate <r>: its period is one of the three config
 * units ("calls/second", "calls/minute", else "calls/hour"). */
const char *tg_adm_rate_unit(tg_rate_t r);

/* The detail of a rate denial, "<observed> calls in <period> > <rate>",
 * into <buf> of <cap> bytes (truncated when it does not fit). */
void tg_adm_rate_detail(char *buf, size_t cap, uint64_t observed, tg_rate_t r);

/* One local rate limit a call must pass: agent, tool or caller. */
typedef struct tg_adm_rate_scope {
    tg_gcra_t *g;
    const char *scope, *path; /* the denial's scope and config_path */
    tg_rate_t rate;           /* as configured: the denial's unit and detail */
    int reg;                  /* registry row, -1: none */
} tg_adm_rate_scope_t;

/* Among <scopes> (<n> of them), the one without a token at <now> that
 * frees up last (the first such on a tie), its peek into <*out>; -1 (and
 * <*out> untouched) when every scope has one. Takes nothing. */
int tg_adm_rate_worst(const tg_adm_rate_scope_t *scopes, int n, uint64_t now,
                      tg_gcra_result_t *out);

/* Fill denial <d> (tg_adm_denial_init'ed, code rate) for rate <rate> in
 * <scope> (config <path>) that refused with <r>: observed, cap, unit,
 * retry-after and the detail, written to <detail> of <detail_cap> bytes
 * (must outlive <d>). */
void tg_adm_rate_denial(tg_denial_t *d, char *detail, size_t detail_cap, const char *scope,
                        const char *path, tg_rate_t rate, const tg_gcra_result_t *r);

/* ---- denials and their audit events ------------------------------------ */

/* Start denial <d> of <code> for agent <agent> (NULL: none): scope
 * "agent", no observed, cap or retry-after; the call's tool name
 * [tool, tool+tool_len) when tool_len > 0, and its toolgate id
 * <request_id> (NULL: no call). Every other field NULL. */
void tg_adm_denial_init(tg_denial_t *d, tg_deny_code_t code, const char *agent, const char *tool,
                        size_t tool_len, const char *request_id);

/* The call fields of audit event <ev>: its tool [tool, tool+tool_len)
 * when tool_len > 0 (the text NUL-terminated there), <duration_ms> since
 * it arrived, <bytes_in> of its request frame, who decided its shared
 * limits (<decided_by>, NULL: none). */
/* <ev> initialised as a frame refused before it became a call
 * (call.denied, status invalid): from <caller> to <agent> (NULL: none
 * known), <bytes_in> long, for <reason>. */
void tg_adm_audit_refused(tg_audit_ev_t *ev, const char *agent, const char *caller,
                          const char *reason, uint64_t bytes_in);

void tg_adm_audit_call(tg_audit_ev_t *ev, const char *tool, size_t tool_len, uint64_t duration_ms,
                       uint64_t bytes_in, const char *decided_by);

/* Copy denial <d>'s code and limit fields into audit event <ev>
 * (absent values stay absent; retry_after_ms only when present). */
void tg_adm_audit_denial(tg_audit_ev_t *ev, const tg_denial_t *d);

/* The metrics outcome of an audited call: "call.completed" is ok or error
 * by <status>; "call.timeout" and "call.cancelled" are theirs; a denial
 * <d> for an agent that went away (unavailable or resource) at any
 * <stage> but "queued" (NULL: none) is failed; anything else denied. */
tg_outcome_t tg_adm_outcome(const char *event, const char *status, const tg_denial_t *d,
                            const char *stage);

/* Fill denial <d> (tg_adm_denial_init'ed, code concurrency) for a full
 * wait queue: the tool's when <tool_full> (<tool_queued> queued of
 * <tool_cap>, config <tool_path>), else the agent's (<agent_queued> of
 * <agent_cap>, <agent_path>); the detail, naming <inflight> calls in
 * flight and, when <fleet_full>, the full shared slots, into <detail> of
 * <detail_cap> bytes, which must outlive <d>. */
void tg_adm_queue_full(tg_denial_t *d, char *detail, size_t detail_cap, bool tool_full,
                       uint32_t tool_queued, uint32_t tool_cap, const char *tool_path,
                       uint32_t agent_queued, uint32_t agent_cap, const char *agent_path,
                       uint32_t inflight, bool fleet_full);

/* Fill denial <d> (tg_adm_denial_init'ed, code concurrency) for the
 * shared concurrency limit, config <path>: <observed> of <cap> slots held
 * as the store last said (cap 0: it had not answered), <why> in the
 * detail written to <detail> of <detail_cap> bytes (must outlive <d>). */
void tg_adm_fleet_denial(tg_denial_t *d, char *detail, size_t detail_cap, const char *path,
                         uint32_t observed, uint32_t cap, const char *why);

/* The details of a store denial, one wording for every dialect. */
#define TG_ADM_STORE_CLOSED_RATE "the shared rate store is unavailable and on_store_error is closed"
#define TG_ADM_STORE_CLOSED_SLOT "the shared slot store is unavailable and on_store_error is closed"
#define TG_ADM_STORE_REFUSED_RATE "the shared rate store refused the request"
#define TG_ADM_STORE_REFUSED_SLOT "the shared slot store refused the request"

/* Fill denial <d> (tg_adm_denial_init'ed, code store) for shared limit
 * <limit> of <scope> ("agent" or "tool" for a rate; NULL: "shared", the
 * fleet's slots) that the store cannot decide with on_store_error closed,
 * or that it refused: config store.on_store_error, <unit> of the rate
 * (NULL: none), static <detail> (TG_ADM_STORE_*), <retry_after_ms>
 * (TG_DENY_ABSENT: none). Both dialects word every store denial here. */
void tg_adm_store_denial(tg_denial_t *d, const char *limit, const char *scope, const char *unit,
                         const char *detail, int64_t retry_after_ms);

/* ---- shared slots (concurrency_scope shared) --------------------------- */

/* The wait before asking the store again while it says the fleet is
 * full: <*backoff_ms> (0: TG_ADM_FLEET_RETRY_MIN_MS), which doubles up to
 * TG_ADM_FLEET_RETRY_MAX_MS for the next time. */
uint32_t tg_adm_fleet_delay(uint32_t *backoff_ms);

/* ---- wait queue -------------------------------------------------------- */

/* Insert <v> into <q>, which has room, at position <at> (<= q->count):
 * the ring only appends, so [e0..en) becomes [e_at..en, e0..e_at), then
 * <v> goes last, then [e_at..en) moves behind it. O(count). */
void tg_adm_waitq_insert(tg_waitq_t *q, uint32_t at, uint32_t v);

/* The wait-queue pump's guard: a store answer may come at once and call
 * the pump from inside its own pass; such a nested call only asks for one
 * more pass. Zeroed: idle. */
typedef struct tg_adm_pump {
    bool pumping, again;
} tg_adm_pump_t;

/* Start a pass of <p>: true when the caller runs it; false when a pass
 * is running already (which is asked to run once more). */
bool tg_adm_pump_begin(tg_adm_pump_t *p);

/* A pass of <p> ended: true when another was asked for meanwhile (run
 * it), false when the pump is idle again. */
bool tg_adm_pump_again(tg_adm_pump_t *p);

/* ---- per-tool limits (tools.NAME) -------------------------------------- */

struct tg_adm_tool;

/* Take entry <i> (< q->count) out of <q>, uncounting it in tool <t>
 * (NULL: none). */
void tg_adm_dequeue_at(tg_waitq_t *q, uint32_t i, struct tg_adm_tool *t);

/* Put entry <v>, which arrived with key <key>, back into <q> where its
 * arrival puts it: before the first entry whose key (<key_of>(<ctx>, e);
 * keys grow with arrival) is greater, so that calls that came later and
 * queued meanwhile do not pass it; count it in tool <t> (NULL: none).
 * False, nothing changed, when <q> holds <cap> entries or more, or its
 * ring is full, or <t>'s queue is. */
bool tg_adm_requeue(tg_waitq_t *q, uint32_t cap, struct tg_adm_tool *t, uint32_t v, uint64_t key,
                    uint64_t (*key_of)(const void *ctx, uint32_t e), const void *ctx);

typedef struct tg_adm_tool {
    tg_gcra_t rate;
    bool has_rate;
    bool shared; /* rate_scope shared: the bucket is in the store, under rate_key */
    char rate_key[TG_STORE_KEY_MAX + 1];
    tg_conc_t conc;
    bool has_conc;
    uint32_t queued, max_queued;
    bool has_queue;
    int reg_rate, reg_conc, reg_queue; /* registry rows, -1: none */
    uint64_t sh_conc, sh_queue; /* what it counts in the summed rows (tg_registry_share) */
    char path_rate[256], path_conc[256], path_queue[256], path_dur[256];
} tg_adm_tool_t;

/* Set up <t> (zeroed) for tool <tc> of agent <a>: each limit the tool
 * sets itself gets its state (the rate bucket a copy of <keep> when not
 * NULL, fresh otherwise), counts start at 0, no registry rows, the
 * config paths its denials name. 0, or -EINVAL for a rate that cannot be
 * set up. The shared bucket key is tg_adm_tool_key's. */
int tg_adm_tool_init(tg_adm_tool_t *t, const tg_agent_cfg_t *a, const tg_tool_cfg_t *tc,
                     const tg_gcra_t *keep);

/* Name the shared bucket of tool <tool> of agent <agent> in <store>
 * ("{agent}:tool.NAME.rate", the hash slot of the agent's) and mark <t>
 * shared. 0, or -EINVAL when <store> is NULL or the names cannot make a
 * key (nothing logged: each engine says why in its own words). */
int tg_adm_tool_key(tg_adm_tool_t *t, tg_store_t *store, const char *agent, const char *tool);

/* Register (or update) <t>'s rows in <reg>: agent.AGENT.tool.TOOL.rate,
 * .concurrency and .queue, each only for a limit the tool sets. */
void tg_adm_tool_register(tg_adm_tool_t *t, tg_registry_t *reg, const char *agent,
                          const char *tool);

/* True when <t> (NULL: no tool limits) caps its queue and it is full. */
bool tg_adm_tool_queue_full(const tg_adm_tool_t *t);

/* Room in the slots of tool <t> and of caller <cl> (NULL, or a scope
 * without a concurrency cap: room); the agent's are the engine's. */
bool tg_adm_has_room(const tg_adm_tool_t *t, const tg_caller_lim_t *cl);

/* Take a call's local slots: one of <agent>, and of <t>'s and <cl>'s
 * when they cap concurrency (NULL: none), <*tool_slot> and
 * <*caller_slot> set for those taken (left alone otherwise). */
void tg_adm_take_slots(tg_conc_t *agent, tg_adm_tool_t *t, tg_caller_lim_t *cl, bool *tool_slot,
                       bool *caller_slot);

/* Put <t>'s concurrency and queue counts in its rows of <gw>'s registry
 * (each only for a limit the tool sets; crossing 80% audits). The rows
 * sum the counts of every route of the agent (tg_registry_share). */
void tg_adm_tool_regs(tg_gw_t *gw, tg_adm_tool_t *t);

#endif
