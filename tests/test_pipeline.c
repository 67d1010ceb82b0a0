/* The admission pipeline (router/call/pipeline.c) driven by a fake
 * dialect: no process, no socket, only a route, a libuv loop for the
 * deadlines, and ops that record what the pipeline asked of the dialect.
 * Each test would fail if a stage, the queue's order or an expiry denial
 * changed for every dialect at once. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "config/config.h"
#include "router/call/pipeline.h"
#include "router/call/route.h"
#include "router/gateway/gateway.h"

typedef struct fcall {
    tg_callc_t cc; /* first, as in the engines */
    int name;
} fcall_t;

#define MAXLOG 64

static struct {
    uv_loop_t loop;
    tg_config_t cfg;
    tg_gw_t gw;
    tg_route_t r;
    tg_block_t *blk;
    tg_call_go_t go;   /* what ready() says */
    bool refuse_next;  /* forward() answers the next call instead */
    int forwarded[MAXLOG], nfwd;
    struct {
        int name;
        tg_deny_code_t code;
        const char *event, *stage, *detail;
    } denied[MAXLOG];
    int ndenied;
    int timed_out, stuck, flushes;
} F;

static tg_caller_lim_t *op_climits(const tg_callc_t *cc)
{
    (void)cc;
    return NULL;
}

static tg_call_go_t op_ready(const tg_callc_t *cc)
{
    (void)cc;
    return F.go;
}

static bool op_forward(tg_callc_t *cc)
{
    cr_assert_not_null(cc->qblk, "a forwarded call holds its frame");
    if (F.refuse_next) {
        F.refuse_next = false;
        return false;
    }
    F.forwarded[F.nfwd++] = ((fcall_t *)cc)->name;
    return true;
}

static void op_denial_init(const tg_callc_t *cc, tg_denial_t *d, tg_deny_code_t code,
                           char reqid[32])
{
    tg_call_id_hex(reqid, cc->id);
    tg_adm_denial_init(d, code, "a", NULL, 0, reqid);
}

static void op_deny(tg_callc_t *cc, tg_denial_t *d, const char *event, const char *stage)
{
    F.denied[F.ndenied].name = ((fcall_t *)cc)->name;
    F.denied[F.ndenied].code = d->code;
    F.denied[F.ndenied].event = event;
    F.denied[F.ndenied].stage = stage;
    F.denied[F.ndenied].detail = d->detail != NULL ? strdup(d->detail) : NULL;
    F.ndenied++;
}

static void op_free(tg_callc_t *cc)
{
    tg_pipe_free_entry(cc);
}

static void *op_owner(const tg_callc_t *cc)
{
    (void)cc;
    return &F;
}

static void op_flush(tg_route_t *r, void *owner)
{
    (void)r;
    cr_assert_eq(owner, (void *)&F);
    F.flushes++;
}

static void op_settle(tg_route_t *r, void *owner)
{
    (void)r;
    (void)owner;
}

static void op_timed_out(tg_callc_t *cc)
{
    F.timed_out++;
    cc->state = TG_CALL_ZOMBIE;
    tg_pipe_arm(cc, 10);
}

static void op_stuck(tg_callc_t *cc)
{
    F.stuck++;
    tg_pipe_release(cc); /* as if the agent were killed and its calls freed */
}

static const tg_call_ops_t ops = {
    .climits = op_climits,
    .ready = op_ready,
    .forward = op_forward,
    .denial_init = op_denial_init,
    .deny = op_deny,
    .free = op_free,
    .owner = op_owner,
    .flush = op_flush,
    .settle = op_settle,
    .timed_out = op_timed_out,
    .stuck = op_stuck,
    .timeout_field = "timeout_ms",
};

static void setup_with(const char *json)
{
    memset(&F, 0, sizeof(F));
    cr_assert_eq(uv_loop_init(&F.loop), 0);
    tg_err_t err;
    cr_assert_eq(tg_config_default(&F.cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&F.cfg, "t.json", json, strlen(json), &err), 0, "%s",
                 err.msg);
    F.gw.loop = &F.loop;
    F.gw.cfg = &F.cfg;
    tg_registry_init(&F.gw.reg);
    tg_pool_init(&F.gw.pool, TG_IO_BLOCK);
    F.r.ops = &ops;
    tg_dlt_init(&F.r.dlt, tg_pipe_deadline, &F.r);
    cr_assert_eq(tg_route_setup(&F.r, &F.gw, &F.cfg.agents[0], 0, sizeof(fcall_t), 64, 0, NULL), 0);
    F.blk = malloc(sizeof(tg_block_t) + 64);
    F.blk->refs = 1; /* the test's: never freed by the calls */
    F.blk->cap = 64;
    memcpy(F.blk->data, "{\"id\":\"x\"}", 10);
}

static void close_cb(uv_handle_t *h)
{
    (void)h;
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, close_cb);
}

static void teardown(void)
{
    /* Calls still waiting or in flight end with the test. */
    for (uint32_t i = 0; i < F.r.tab.n; i++) {
        tg_callc_t *cc = tg_ctab_at(&F.r.tab, i);
        if (cc->state != TG_CALL_IDLE) {
            tg_route_unqueue(&F.r, cc);
            tg_pipe_free_entry(cc);
        }
    }
    uv_walk(&F.loop, walk_close, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_expect_eq(F.blk->refs, 1, "every call gave its frame back");
    free(F.blk);
    tg_route_fini(&F.r);
    tg_config_free(&F.cfg);
    uv_loop_close(&F.loop);
    for (int i = 0; i < F.ndenied; i++)
        free((char *)F.denied[i].detail);
}

/* A new call <name> for tool <tool> (NULL: none) with a deadline of <ms>,
 * through the whole pipeline. */
static fcall_t *call(int name, const char *tool, uint64_t ms)
{
    uint32_t i;
    uint64_t id;
    fcall_t *c = tg_ctab_take(&F.r.tab, &i, &id);
    cr_assert_not_null(c);
    tg_callc_reset(&c->cc, &F.r, id, i, uv_now(&F.loop));
    c->name = name;
    if (tool != NULL) {
        const tg_tool_cfg_t *tc = tg_config_tool(F.r.acfg, tool, strlen(tool));
        cr_assert_not_null(tc);
        c->cc.tool = (int)(tc - F.r.acfg->tools);
    }
    tg_route_deadline(&F.r, &c->cc, true, ms);
    tg_route_hold_frame(&F.r, &c->cc, F.blk, F.blk->data, 10, 6, 3, false);
    tg_pipe_admit(&c->cc);
    return c;
}

#define AGENT(lim, tools)                                                                       \
    "{\"agents\": [{\"id\": \"a\", \"command\": [\"/bin/true\"], \"execution_limits\": {" lim \
    "}" tools "}]}"

Test(pipeline, fifo_dispatch_queue_full_and_release)
{
    setup_with(AGENT("\"max_concurrent_calls\": 1, \"max_queued_calls\": 2", ""));
    fcall_t *a = call(1, NULL, 60000);
    call(2, NULL, 60000);
    call(3, NULL, 60000);
    call(4, NULL, 60000);
    cr_assert_eq(F.nfwd, 1);
    cr_expect_eq(F.forwarded[0], 1);
    cr_expect_eq(a->cc.state, TG_CALL_INFLIGHT);
    cr_assert_eq(F.ndenied, 1, "the fourth call finds the queue full");
    cr_expect_eq(F.denied[0].name, 4);
    cr_expect_eq(F.denied[0].code, TG_DENY_CONCURRENCY);
    cr_expect_eq(F.r.aq.count, 2);
    tg_pipe_release(&a->cc);
    cr_assert_eq(F.nfwd, 2);
    cr_expect_eq(F.forwarded[1], 2, "waiting calls run in arrival order");
    cr_expect_eq(F.r.aq.count, 1);
    cr_expect_eq(F.r.aconc.inflight, 1);
    teardown();
}

Test(pipeline, a_call_held_by_its_tool_does_not_hold_back_others)
{
    setup_with(AGENT("\"max_concurrent_calls\": 4, \"max_queued_calls\": 4",
                     ", \"tools\": {\"t1\": {\"max_concurrent_calls\": 1}, \"t2\": {}}"));
    fcall_t *a = call(1, "t1", 60000);
    call(2, "t1", 60000); /* waits for t1's slot */
    call(3, "t2", 60000); /* behind it in the queue, but its tool has room */
    cr_assert_eq(F.nfwd, 2);
    cr_expect_eq(F.forwarded[0], 1);
    cr_expect_eq(F.forwarded[1], 3);
    cr_expect_eq(F.r.aq.count, 1);
    tg_pipe_release(&a->cc);
    cr_assert_eq(F.nfwd, 3);
    cr_expect_eq(F.forwarded[2], 2);
    teardown();
}

Test(pipeline, rate_refusal_names_the_scope_and_takes_no_slot)
{
    setup_with(AGENT("\"rate_limit\": \"1/minute\", \"burst\": 1", ""));
    call(1, NULL, 60000);
    call(2, NULL, 60000);
    cr_assert_eq(F.nfwd, 1);
    cr_assert_eq(F.ndenied, 1);
    cr_expect_eq(F.denied[0].name, 2);
    cr_expect_eq(F.denied[0].code, TG_DENY_RATE);
    cr_expect_eq(F.r.aconc.inflight, 1, "the refused call holds no slot");
    teardown();
}

Test(pipeline, deadlines_give_the_denial_of_where_the_call_waited)
{
    setup_with(AGENT("\"max_concurrent_calls\": 1, \"max_queued_calls\": 2", ""));
    call(1, NULL, 30);  /* in flight: a timeout, then a zombie */
    call(2, NULL, 20);  /* queued: a concurrency denial */
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.ndenied, 2);
    cr_expect_eq(F.denied[0].name, 2);
    cr_expect_eq(F.denied[0].code, TG_DENY_CONCURRENCY);
    cr_expect_str_eq(F.denied[0].stage, "queued");
    cr_expect_eq(F.denied[1].name, 1);
    cr_expect_eq(F.denied[1].code, TG_DENY_TIMEOUT);
    cr_expect_str_eq(F.denied[1].event, "call.timeout");
    cr_expect_eq(F.timed_out, 1);
    cr_expect_eq(F.stuck, 1, "a zombie past its grace is the dialect's to end");
    cr_expect_eq(F.r.aconc.inflight, 0);
    cr_expect_gt(F.flushes, 0, "what an expiry wrote is flushed");
    teardown();
}

Test(pipeline, calls_wait_for_an_instance_that_is_not_ready)
{
    setup_with(AGENT("\"max_concurrent_calls\": 2, \"max_queued_calls\": 4", ""));
    F.go = TG_GO_LATER;
    call(1, NULL, 60000);
    fcall_t *b = call(2, NULL, 40);
    cr_expect_eq(F.nfwd, 0);
    cr_expect_eq(F.r.aq.count, 2);
    F.go = TG_GO_NOW;
    fcall_t *c = call(3, NULL, 60000); /* queued behind them: the pump runs all three */
    (void)b;
    (void)c;
    cr_assert_eq(F.nfwd, 2, "two slots: the first two in arrival order");
    cr_expect_eq(F.forwarded[0], 1);
    cr_expect_eq(F.forwarded[1], 2);
    cr_expect_eq(F.r.aq.count, 1);
    F.go = TG_GO_LATER;
    uv_run(&F.loop, UV_RUN_NOWAIT);
    teardown();
}

Test(pipeline, expiry_while_the_instance_never_came_says_so)
{
    setup_with(AGENT("\"max_concurrent_calls\": 2, \"max_queued_calls\": 4", ""));
    F.go = TG_GO_LATER;
    call(1, NULL, 20);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    cr_assert_eq(F.ndenied, 1);
    cr_expect_eq(F.denied[0].code, TG_DENY_UNAVAILABLE);
    cr_expect(strstr(F.denied[0].detail, "did not become ready") != NULL, "%s",
              F.denied[0].detail);
    cr_expect_eq(F.r.aq.count, 0);
    teardown();
}

Test(pipeline, a_call_the_dialect_answers_at_forward_gives_its_slot_on)
{
    setup_with(AGENT("\"max_concurrent_calls\": 1, \"max_queued_calls\": 2", ""));
    F.refuse_next = true;
    call(1, NULL, 60000);
    cr_expect_eq(F.nfwd, 0);
    cr_expect_eq(F.r.aconc.inflight, 0, "its slot is back");
    call(2, NULL, 60000);
    cr_expect_eq(F.nfwd, 1);
    teardown();
}

Test(pipeline, a_cancelled_waiting_call_leaves_the_queue)
{
    setup_with(AGENT("\"max_concurrent_calls\": 1, \"max_queued_calls\": 2", ""));
    fcall_t *a = call(1, NULL, 60000);
    fcall_t *b = call(2, NULL, 60000);
    call(3, NULL, 60000);
    tg_pipe_cancel_waiting(&b->cc);
    cr_expect_eq(F.r.aq.count, 1);
    tg_pipe_release(&a->cc);
    cr_assert_eq(F.nfwd, 2);
    cr_expect_eq(F.forwarded[1], 3, "the cancelled call never runs");
    teardown();
}
