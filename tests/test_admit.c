/* router/admit: the admission pieces both serve engines share (rate
 * denial text, denial and audit fields, metrics outcome, queue-full,
 * fleet and store denials, fleet retry backoff, in-order queue insertion,
 * per-tool limit state). */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "router/call/admit.h"

/* ---- rate denials ------------------------------------------------------ */

Test(admit, rate_unit_by_period)
{
    tg_rate_t r = {.count = 10, .period_ms = 1000};
    cr_assert_str_eq(tg_adm_rate_unit(r), "calls/second");
    r.period_ms = 60000;
    cr_assert_str_eq(tg_adm_rate_unit(r), "calls/minute");
    r.period_ms = 3600000;
    cr_assert_str_eq(tg_adm_rate_unit(r), "calls/hour");
}

Test(admit, rate_detail_text)
{
    char buf[96];
    tg_rate_t r = {.count = 10, .period_ms = 60000};
    tg_adm_rate_detail(buf, sizeof(buf), 11, r);
    cr_assert_str_eq(buf, "11 calls in 1m > 10/minute");
    r = (tg_rate_t){.count = 2, .period_ms = 1000};
    tg_adm_rate_detail(buf, sizeof(buf), 3, r);
    cr_assert_str_eq(buf, "3 calls in 1s > 2/second");
}

Test(admit, rate_detail_truncates_within_cap)
{
    char buf[8];
    tg_rate_t r = {.count = 10, .period_ms = 60000};
    tg_adm_rate_detail(buf, sizeof(buf), 11, r);
    cr_assert_str_eq(buf, "11 call");
}

Test(admit, rate_worst_is_the_one_that_frees_last)
{
    tg_gcra_t a, b, c;
    cr_assert_eq(tg_gcra_init(&a, 1, 1000, 0), 0);
    cr_assert_eq(tg_gcra_init(&b, 1, 60000, 0), 0);
    cr_assert_eq(tg_gcra_init(&c, 5, 1000, 0), 0);
    tg_adm_rate_scope_t s[3] = {
        {&a, "agent", "pa", {1, 1000}, -1},
        {&b, "tool", "pt", {1, 60000}, -1},
        {&c, "caller", "pc", {5, 1000}, -1},
    };
    tg_gcra_result_t r = {.observed = 99};
    cr_assert_eq(tg_adm_rate_worst(s, 3, 0, &r), -1);
    cr_assert_eq(r.observed, 99);
    tg_gcra_take(&a, 0);
    tg_gcra_take(&b, 0);
    tg_gcra_take(&c, 0);
    cr_assert_eq(tg_adm_rate_worst(s, 3, 0, &r), 1);
    cr_assert_not(r.allowed);
    cr_assert_eq(r.retry_after_ms, 60000);
    cr_assert_eq(tg_adm_rate_worst(s, 1, 0, &r), 0);
    cr_assert_eq(r.retry_after_ms, 1000);
}

Test(admit, rate_denial_fields)
{
    tg_denial_t d;
    char detail[96];
    tg_adm_denial_init(&d, TG_DENY_RATE, "a", NULL, 0, NULL);
    tg_gcra_result_t r = {.allowed = false, .retry_after_ms = 5999, .observed = 11, .cap = 10};
    tg_adm_rate_denial(&d, detail, sizeof(detail), "tool", "agents.a.tools.t.rate_limit",
                       (tg_rate_t){10, 60000}, &r);
    cr_assert_str_eq(d.limit, "rate");
    cr_assert_str_eq(d.scope, "tool");
    cr_assert_eq(d.observed, 11);
    cr_assert_eq(d.cap, 10);
    cr_assert_str_eq(d.unit, "calls/minute");
    cr_assert_eq(d.retry_after_ms, 5999);
    cr_assert_str_eq(d.config_path, "agents.a.tools.t.rate_limit");
    cr_assert_str_eq(d.detail, "11 calls in 1m > 10/minute");
}

/* ---- denials and audit events ------------------------------------------ */

Test(admit, denial_init_with_call)
{
    tg_denial_t d;
    memset(&d, 0x5a, sizeof(d));
    tg_adm_denial_init(&d, TG_DENY_RATE, "search", "web", 3, "00000000000000a1");
    cr_assert_eq(d.code, TG_DENY_RATE);
    cr_assert_str_eq(d.agent, "search");
    cr_assert_str_eq(d.scope, "agent");
    cr_assert_eq(d.observed, TG_DENY_ABSENT);
    cr_assert_eq(d.cap, TG_DENY_ABSENT);
    cr_assert_eq(d.retry_after_ms, TG_DENY_ABSENT);
    cr_assert_str_eq(d.tool, "web");
    cr_assert_eq(d.tool_len, 3);
    cr_assert_str_eq(d.request_id, "00000000000000a1");
    cr_assert_null(d.limit);
    cr_assert_null(d.unit);
    cr_assert_null(d.config_path);
    cr_assert_null(d.detail);
    cr_assert_null(d.os);
}

Test(admit, denial_init_without_tool_or_call)
{
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_UNAVAILABLE, NULL, "web", 0, NULL);
    cr_assert_null(d.agent);
    cr_assert_null(d.tool);
    cr_assert_eq(d.tool_len, 0);
    cr_assert_null(d.request_id);
}

Test(admit, audit_denial_copies_present_fields)
{
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_CONCURRENCY, "a", NULL, 0, NULL);
    d.limit = "concurrency";
    d.scope = "tool";
    d.observed = 3;
    d.cap = 2;
    d.retry_after_ms = 250;
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    tg_adm_audit_denial(&ev, &d);
    cr_assert_str_eq(ev.code, "concurrency_limit_exceeded");
    cr_assert_str_eq(ev.limit.type, "concurrency");
    cr_assert_str_eq(ev.limit.scope, "tool");
    cr_assert_eq(ev.limit.observed, 3);
    cr_assert_eq(ev.limit.cap, 2);
    cr_assert_eq(ev.retry_after_ms, 250);
}

Test(admit, audit_call_fields)
{
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    const char *tool_before = ev.tool;
    tg_adm_audit_call(&ev, "web", 0, 12, 340, NULL);
    cr_assert_eq(ev.tool, tool_before, "no tool name: the field stays as it was");
    cr_assert_eq(ev.duration_ms, 12);
    cr_assert_eq(ev.bytes_in, 340);
    cr_assert_null(ev.decided_by);
    tg_adm_audit_call(&ev, "web", 3, 0, 1, "local_fallback");
    cr_assert_str_eq(ev.tool, "web");
    cr_assert_eq(ev.duration_ms, 0);
    cr_assert_eq(ev.bytes_in, 1);
    cr_assert_str_eq(ev.decided_by, "local_fallback");
}

Test(admit, audit_denial_keeps_absent_fields_absent)
{
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_UNAVAILABLE, "a", NULL, 0, NULL);
    d.limit = "agent";
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    int64_t retry_before = ev.retry_after_ms;
    tg_adm_audit_denial(&ev, &d);
    cr_assert_str_eq(ev.code, "agent_unavailable");
    cr_assert_eq(ev.limit.observed, TG_AUDIT_ABSENT);
    cr_assert_eq(ev.limit.cap, TG_AUDIT_ABSENT);
    cr_assert_eq(ev.retry_after_ms, retry_before);
}

Test(admit, outcome_of_each_event)
{
    cr_assert_eq(tg_adm_outcome("call.completed", "ok", NULL, NULL), TG_OUTCOME_OK);
    cr_assert_eq(tg_adm_outcome("call.completed", "error", NULL, NULL), TG_OUTCOME_ERROR);
    cr_assert_eq(tg_adm_outcome("call.timeout", "timeout", NULL, NULL), TG_OUTCOME_TIMEOUT);
    cr_assert_eq(tg_adm_outcome("call.cancelled", "cancelled", NULL, NULL), TG_OUTCOME_CANCELLED);
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_RATE, "a", NULL, 0, NULL);
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, NULL), TG_OUTCOME_DENIED);
}

Test(admit, outcome_agent_gone_unless_queued)
{
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_UNAVAILABLE, "a", NULL, 0, NULL);
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, "inflight"), TG_OUTCOME_FAILED);
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, "queued"), TG_OUTCOME_DENIED);
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, NULL), TG_OUTCOME_DENIED);
    d.code = TG_DENY_RESOURCE;
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, "inflight"), TG_OUTCOME_FAILED);
    d.code = TG_DENY_CONCURRENCY;
    cr_assert_eq(tg_adm_outcome("call.denied", "denied", &d, "inflight"), TG_OUTCOME_DENIED);
}

Test(admit, queue_full_agent_scope)
{
    tg_denial_t d;
    char detail[160];
    tg_adm_denial_init(&d, TG_DENY_CONCURRENCY, "a", NULL, 0, NULL);
    tg_adm_queue_full(&d, detail, sizeof(detail), false, 0, 0, "agents.a.tools.t.max_queued_calls",
                      4, 4, "agents.a.max_queued_calls", 2, false);
    cr_assert_str_eq(d.limit, "concurrency");
    cr_assert_str_eq(d.scope, "agent");
    cr_assert_eq(d.observed, 5);
    cr_assert_eq(d.cap, 4);
    cr_assert_str_eq(d.unit, "queued calls");
    cr_assert_str_eq(d.config_path, "agents.a.max_queued_calls");
    cr_assert_str_eq(d.detail, "2 calls in flight, and the agent's wait queue is full (4 of 4 "
                               "waiting)");
    cr_assert_eq(d.detail, detail);
    /* Issue 20 item 17: one call and no queue, as a person would write it. */
    tg_adm_queue_full(&d, detail, sizeof(detail), false, 0, 0, "agents.a.tools.t.max_queued_calls",
                      0, 0, "agents.a.max_queued_calls", 1, false);
    cr_assert_eq(d.observed, 1);
    cr_assert_eq(d.cap, 0);
    cr_assert_str_eq(d.detail, "1 call in flight, and no wait queue (max_queued_calls 0)");
}

Test(admit, queue_full_tool_scope_and_fleet)
{
    tg_denial_t d;
    char detail[160];
    tg_adm_denial_init(&d, TG_DENY_CONCURRENCY, "a", NULL, 0, NULL);
    tg_adm_queue_full(&d, detail, sizeof(detail), true, 1, 1, "agents.a.tools.t.max_queued_calls",
                      3, 8, "agents.a.max_queued_calls", 7, true);
    cr_assert_str_eq(d.scope, "tool");
    cr_assert_eq(d.observed, 2);
    cr_assert_eq(d.cap, 1);
    cr_assert_str_eq(d.config_path, "agents.a.tools.t.max_queued_calls");
    cr_assert_str_eq(d.detail, "7 calls in flight with every shared slot taken, and the tool's "
                               "wait queue is full (1 of 1 waiting)");
}

Test(admit, fleet_denial_with_store_count)
{
    tg_denial_t d;
    char detail[160];
    tg_adm_denial_init(&d, TG_DENY_CONCURRENCY, "a", NULL, 0, NULL);
    tg_adm_fleet_denial(&d, detail, sizeof(detail), "agents.a.max_concurrent_calls", 4, 4,
                        "and the wait queue is full");
    cr_assert_str_eq(d.limit, "concurrency");
    cr_assert_str_eq(d.scope, "shared");
    cr_assert_str_eq(d.unit, "calls");
    cr_assert_str_eq(d.config_path, "agents.a.max_concurrent_calls");
    cr_assert_eq(d.observed, 4);
    cr_assert_eq(d.cap, 4);
    cr_assert_str_eq(d.detail,
                     "4 of 4 slots shared across instances in use, and the wait queue is full");
}

Test(admit, fleet_denial_before_store_answered)
{
    tg_denial_t d;
    char detail[160];
    tg_adm_denial_init(&d, TG_DENY_CONCURRENCY, "a", NULL, 0, NULL);
    tg_adm_fleet_denial(&d, detail, sizeof(detail), "p", 0, 0, "timed out");
    cr_assert_eq(d.observed, TG_DENY_ABSENT);
    cr_assert_eq(d.cap, TG_DENY_ABSENT);
    cr_assert_str_eq(d.detail, "timed out (the store had not answered for a shared slot)");
}

Test(admit, store_denial_scope_by_limit)
{
    tg_denial_t d;
    tg_adm_denial_init(&d, TG_DENY_STORE, "a", NULL, 0, NULL);
    tg_adm_store_denial(&d, "rate", "tool", "calls/minute", "x", 1500);
    cr_assert_str_eq(d.limit, "rate");
    cr_assert_str_eq(d.scope, "tool");
    cr_assert_str_eq(d.unit, "calls/minute");
    cr_assert_str_eq(d.config_path, "store.on_store_error");
    cr_assert_str_eq(d.detail, "x");
    cr_assert_eq(d.retry_after_ms, 1500);
    tg_adm_store_denial(&d, "concurrency", NULL, NULL, "y", TG_DENY_ABSENT);
    cr_assert_str_eq(d.scope, "shared");
    cr_assert_null(d.unit);
    cr_assert_eq(d.retry_after_ms, TG_DENY_ABSENT);
}

/* ---- fleet backoff ----------------------------------------------------- */

Test(admit, fleet_delay_doubles_to_max)
{
    uint32_t b = 0;
    uint32_t seen[8];
    for (int i = 0; i < 8; i++)
        seen[i] = tg_adm_fleet_delay(&b);
    uint32_t want[8] = {20, 40, 80, 160, 320, 500, 500, 500};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(seen[i], want[i], "step %d: %u", i, seen[i]);
    cr_assert_eq(b, 500);
    b = 0; /* a granted slot resets it */
    cr_assert_eq(tg_adm_fleet_delay(&b), 20);
}

/* ---- wait queue -------------------------------------------------------- */

static void queue_of(tg_waitq_t *q, uint32_t cap, const uint32_t *v, uint32_t n)
{
    cr_assert_eq(tg_waitq_init(q, cap), 0);
    for (uint32_t i = 0; i < n; i++)
        cr_assert(tg_waitq_push(q, v[i]));
}

static void assert_queue(const tg_waitq_t *q, const uint32_t *want, uint32_t n)
{
    cr_assert_eq(q->count, n);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(tg_waitq_at(q, i), want[i], "at %u: %u", i, tg_waitq_at(q, i));
}

Test(admit, waitq_insert_middle_front_end)
{
    tg_waitq_t q;
    uint32_t v[] = {1, 2, 4, 5};
    queue_of(&q, 8, v, 4);
    tg_adm_waitq_insert(&q, 2, 3);
    assert_queue(&q, (uint32_t[]){1, 2, 3, 4, 5}, 5);
    tg_adm_waitq_insert(&q, 0, 0);
    assert_queue(&q, (uint32_t[]){0, 1, 2, 3, 4, 5}, 6);
    tg_adm_waitq_insert(&q, 6, 6);
    assert_queue(&q, (uint32_t[]){0, 1, 2, 3, 4, 5, 6}, 7);
    tg_waitq_free(&q);
}

Test(admit, waitq_insert_into_empty_and_wrapped_ring)
{
    tg_waitq_t q;
    queue_of(&q, 3, NULL, 0);
    tg_adm_waitq_insert(&q, 0, 7);
    assert_queue(&q, (uint32_t[]){7}, 1);
    /* Wrap the ring: its head is no longer at slot 0. */
    cr_assert(tg_waitq_push(&q, 9));
    tg_waitq_remove_at(&q, 0);
    cr_assert(tg_waitq_push(&q, 11));
    tg_adm_waitq_insert(&q, 1, 10);
    assert_queue(&q, (uint32_t[]){9, 10, 11}, 3);
    tg_waitq_free(&q);
}

/* ---- per-tool limits ---------------------------------------------------- */

static char tool_name[] = "web";

/* Tool "web" with its own rate, 5 calls/second, and nothing else. */
static tg_tool_cfg_t web_tool(void)
{
    tg_tool_cfg_t tc;
    memset(&tc, 0, sizeof(tc));
    tc.name = tool_name;
    tc.lim.rate_src = TG_SRC_FILE;
    tc.lim.rate_limit = (tg_rate_t){.count = 5, .period_ms = 1000};
    return tc;
}

static tg_agent_cfg_t agent_with_tool(tg_tool_cfg_t *tc)
{
    tg_agent_cfg_t a;
    memset(&a, 0, sizeof(a));
    static char id[] = "search";
    a.id = id;
    a.tools = tc;
    a.ntools = 1;
    return a;
}

Test(admit, tool_init_sets_only_configured_limits)
{
    tg_tool_cfg_t tc = web_tool();
    tc.lim.queued_src = TG_SRC_FILE;
    tc.lim.max_queued_calls = 3;
    tg_agent_cfg_t a = agent_with_tool(&tc);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    cr_assert_eq(tg_adm_tool_init(&t, &a, &tc, NULL), 0);
    cr_assert(t.has_rate);
    cr_assert_eq(t.rate.burst, 5);
    cr_assert_not(t.has_conc);
    cr_assert(t.has_queue);
    cr_assert_eq(t.max_queued, 3);
    cr_assert_eq(t.queued, 0);
    cr_assert_not(t.shared);
    cr_assert_eq(t.reg_rate, -1);
    cr_assert_eq(t.reg_conc, -1);
    cr_assert_eq(t.reg_queue, -1);
    cr_assert_str_eq(t.path_rate, "agents.search.tools.web.rate_limit");
    cr_assert_str_eq(t.path_conc, "agents.search.tools.web.max_concurrent_calls");
    cr_assert_str_eq(t.path_queue, "agents.search.tools.web.max_queued_calls");
    cr_assert_str_eq(t.path_dur, "agents.search.tools.web.max_tool_call_duration");
}

Test(admit, tool_init_keeps_a_bucket_and_refuses_a_bad_rate)
{
    tg_tool_cfg_t tc = web_tool();
    tc.lim.concurrent_src = TG_SRC_FILE;
    tc.lim.max_concurrent_calls = 2;
    tg_agent_cfg_t a = agent_with_tool(&tc);
    tg_gcra_t keep;
    cr_assert_eq(tg_gcra_init(&keep, 9, 60000, 4), 0);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    cr_assert_eq(tg_adm_tool_init(&t, &a, &tc, &keep), 0);
    cr_assert_eq(t.rate.burst, 4);
    cr_assert(t.has_conc);
    cr_assert_eq(t.conc.max, 2);
    tc.lim.rate_limit.count = 0;
    memset(&t, 0, sizeof(t));
    cr_assert_eq(tg_adm_tool_init(&t, &a, &tc, NULL), -EINVAL);
}

Test(admit, tool_key_needs_a_store)
{
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    cr_assert_eq(tg_adm_tool_key(&t, NULL, "search", "web"), -EINVAL);
    cr_assert_not(t.shared);
}

Test(admit, tool_register_rows_for_set_limits)
{
    tg_registry_t reg;
    tg_registry_init(&reg);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    t.has_conc = true;
    tg_conc_init(&t.conc, 3);
    t.has_queue = true;
    t.max_queued = 5;
    tg_adm_tool_register(&t, &reg, "search", "web");
    cr_assert_eq(t.reg_rate, -1);
    cr_assert_geq(t.reg_conc, 0);
    cr_assert_geq(t.reg_queue, 0);
    cr_assert_str_eq(reg.v[t.reg_conc].name, "agent.search.tool.web.concurrency");
    cr_assert_eq(reg.v[t.reg_conc].capacity, 3);
    cr_assert_str_eq(reg.v[t.reg_queue].name, "agent.search.tool.web.queue");
    cr_assert_eq(reg.v[t.reg_queue].capacity, 5);
    /* Again (a reload): the same rows, updated in place. */
    int conc_row = t.reg_conc;
    t.conc.max = 4;
    tg_adm_tool_register(&t, &reg, "search", "web");
    cr_assert_eq(t.reg_conc, conc_row);
    cr_assert_eq(reg.v[conc_row].capacity, 4);
    tg_registry_free(&reg);
}

Test(admit, tool_queue_full_only_when_capped)
{
    cr_assert_not(tg_adm_tool_queue_full(NULL));
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    t.queued = 9;
    cr_assert_not(tg_adm_tool_queue_full(&t));
    t.has_queue = true;
    t.max_queued = 10;
    cr_assert_not(tg_adm_tool_queue_full(&t));
    t.queued = 10;
    cr_assert(tg_adm_tool_queue_full(&t));
}

Test(admit, room_and_slots_in_tool_and_caller)
{
    tg_conc_t agent;
    tg_conc_init(&agent, 5);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    tg_caller_lim_t cl;
    memset(&cl, 0, sizeof(cl));
    cr_assert(tg_adm_has_room(NULL, NULL));
    cr_assert(tg_adm_has_room(&t, &cl));
    bool ts = false, cs = false;
    tg_adm_take_slots(&agent, &t, &cl, &ts, &cs);
    cr_assert_eq(agent.inflight, 1);
    cr_assert_not(ts);
    cr_assert_not(cs);
    t.has_conc = true;
    tg_conc_init(&t.conc, 1);
    cl.has_conc = true;
    tg_conc_init(&cl.conc, 2);
    tg_adm_take_slots(&agent, &t, &cl, &ts, &cs);
    cr_assert_eq(agent.inflight, 2);
    cr_assert(ts);
    cr_assert(cs);
    cr_assert_eq(t.conc.inflight, 1);
    cr_assert_eq(cl.conc.inflight, 1);
    cr_assert_not(tg_adm_has_room(&t, &cl), "the tool's one slot is taken");
    cr_assert(tg_adm_has_room(NULL, &cl));
    tg_adm_take_slots(&agent, NULL, &cl, &ts, &cs);
    cr_assert_not(tg_adm_has_room(NULL, &cl), "the caller's two slots are taken");
}

/* Entries are their own arrival keys in the requeue tests. */
static uint64_t key_is_entry(const void *ctx, uint32_t e)
{
    (void)ctx;
    return e;
}

Test(admit, requeue_goes_back_in_arrival_order)
{
    tg_waitq_t q;
    queue_of(&q, 8, (uint32_t[]){2, 5, 9}, 3);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    t.has_queue = true;
    t.max_queued = 2;
    t.queued = 1;
    cr_assert(tg_adm_requeue(&q, 8, &t, 4, 4, key_is_entry, NULL));
    assert_queue(&q, (uint32_t[]){2, 4, 5, 9}, 4);
    cr_assert_eq(t.queued, 2);
    /* The tool's queue is full now: refused, nothing moves. */
    cr_assert_not(tg_adm_requeue(&q, 8, &t, 1, 1, key_is_entry, NULL));
    assert_queue(&q, (uint32_t[]){2, 4, 5, 9}, 4);
    cr_assert_eq(t.queued, 2);
    /* No tool: first and last places. */
    cr_assert(tg_adm_requeue(&q, 8, NULL, 1, 1, key_is_entry, NULL));
    cr_assert(tg_adm_requeue(&q, 8, NULL, 12, 12, key_is_entry, NULL));
    assert_queue(&q, (uint32_t[]){1, 2, 4, 5, 9, 12}, 6);
    tg_waitq_free(&q);
}

Test(admit, requeue_refused_at_cap)
{
    tg_waitq_t q;
    queue_of(&q, 4, (uint32_t[]){1, 3}, 2);
    /* A reload lowered the cap below the ring's size. */
    cr_assert_not(tg_adm_requeue(&q, 2, NULL, 2, 2, key_is_entry, NULL));
    assert_queue(&q, (uint32_t[]){1, 3}, 2);
    cr_assert(tg_adm_requeue(&q, 3, NULL, 2, 2, key_is_entry, NULL));
    cr_assert(tg_adm_requeue(&q, 9, NULL, 0, 0, key_is_entry, NULL));
    assert_queue(&q, (uint32_t[]){0, 1, 2, 3}, 4);
    /* The ring itself is full. */
    cr_assert_not(tg_adm_requeue(&q, 9, NULL, 5, 5, key_is_entry, NULL));
    tg_waitq_free(&q);
}

Test(admit, pump_runs_one_more_pass_when_reentered)
{
    tg_adm_pump_t p = {0};
    cr_assert(tg_adm_pump_begin(&p));
    /* Re-entered twice during the pass: one more pass, not two. */
    cr_assert_not(tg_adm_pump_begin(&p));
    cr_assert_not(tg_adm_pump_begin(&p));
    cr_assert(tg_adm_pump_again(&p));
    cr_assert_not(tg_adm_pump_again(&p));
    cr_assert_not(p.pumping);
    /* Idle again: the next call runs a pass. */
    cr_assert(tg_adm_pump_begin(&p));
    cr_assert_not(tg_adm_pump_again(&p));
}

Test(admit, dequeue_at_uncounts_the_tool)
{
    tg_waitq_t q;
    queue_of(&q, 4, (uint32_t[]){7, 8, 9}, 3);
    tg_adm_tool_t t;
    memset(&t, 0, sizeof(t));
    t.queued = 2;
    tg_adm_dequeue_at(&q, 1, &t);
    assert_queue(&q, (uint32_t[]){7, 9}, 2);
    cr_assert_eq(t.queued, 1);
    tg_adm_dequeue_at(&q, 0, NULL);
    assert_queue(&q, (uint32_t[]){9}, 1);
    tg_waitq_free(&q);
}
