/* Shared concurrency end to end (concurrency_scope shared): toolgate wrap
 * instances on one throwaway Redis hold at most max_concurrent_calls calls
 * in flight between them; a call that finds the fleet full waits and runs
 * when a slot frees, or is refused at its deadline naming the shared
 * limit; the slot of a SIGKILLed toolgate frees when its lease ends (and
 * not before), while renewals keep a long call's slot alive; with Redis
 * stopped no call hangs and on_store_error decides, audited; after many
 * calls, timeouts included, no slot is left in Redis. The fleet's count is
 * read straight from the sorted set ("tg:{tg_fixture_agent}:slots").
 *
 * Timing margins are wide: the suite runs beside other builds on two
 * cores. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>

#include "router/admin/admin.h"
#include "tests/tg_harness.h"
#include "tests/tg_redis.h"

#define SLOTS_KEY "tg:{tg_fixture_agent}:slots"

static srv_t R;

static void sc_fini(void)
{
    tgh_cleanup();
    srv_done(&R);
}

TestSuite(shared_conc, .fini = sc_fini, .timeout = 90);

/* Start `toolgate wrap` on the fixture agent, pointed at R, with cap
 * <cap> shared and <extra> args (NULL-terminated, may be NULL), and
 * initialize it. */
static void sc_start(tgh_wrap_t *w, unsigned cap, const char *const *extra)
{
    char capkv[48];
    snprintf(capkv, sizeof capkv, "max_concurrent_calls=%u", cap);
    const char *args[24];
    int n = 0;
    args[n++] = "--store";
    args[n++] = R.url;
    args[n++] = "--limit";
    args[n++] = "concurrency_scope=shared";
    args[n++] = "--limit";
    args[n++] = capkv;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 22; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    cr_assert_eq(tgh_wrap_start(w, args, NULL, NULL), 0);
    tgh_sendf(&w->tg, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}");
    json_t *r = tgh_await_int(&w->tg, 0, 10000, NULL);
    if (r == NULL) {
        char *e = tgh_read_file(w->err, NULL);
        cr_assert_fail("no initialize answer; toolgate said: %s", e ? e : "");
    }
    json_decref(r);
}

/* A config file holding <json>, in a new temp dir. */
static void sc_config(char *path, size_t cap, const char *json)
{
    char dir[TGH_PATH];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(path, cap, "%s/c.json", dir);
    cr_assert_eq(tgh_write_file(path, json), 0);
}

/* A sleep call of <ms> with id <id>; <timeout_ms> > 0 asks for that
 * deadline (params._meta.timeout_ms). */
static void sc_sleep(tgh_wrap_t *w, json_int_t id, unsigned ms, unsigned timeout_ms)
{
    if (timeout_ms > 0)
        tgh_sendf(&w->tg,
                  "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"method\":\"tools/call\","
                  "\"params\":{\"name\":\"sleep\",\"arguments\":{\"ms\":%u},"
                  "\"_meta\":{\"timeout_ms\":%u}}}",
                  id, ms, timeout_ms);
    else
        tgh_sendf(&w->tg,
                  "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"method\":\"tools/call\","
                  "\"params\":{\"name\":\"sleep\",\"arguments\":{\"ms\":%u}}}",
                  id, ms);
}

static const char *code_of(const json_t *r)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(r, "error"), "data"), "code"));
}

static json_t *data_of(const json_t *r)
{
    return json_object_get(json_object_get(r, "error"), "data");
}

static long long zcard(void)
{
    return srv_int(&R, "ZCARD %s", SLOTS_KEY);
}

/* Poll ZCARD until it is <want> or <ms> pass; returns the last value. */
static long long zcard_wait(long long want, unsigned ms)
{
    uint64_t end = tgh_now_ms() + ms;
    long long n;
    while ((n = zcard()) != want && tgh_now_ms() < end)
        tgh_sleep_ms(10);
    return n;
}

/* Lines of <text> holding both <a> and <b>. */
static int lines_with(const char *text, const char *a, const char *b)
{
    int n = 0;
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        char *copy = strndup(line, len);
        cr_assert_not_null(copy);
        n += strstr(copy, a) != NULL && strstr(copy, b) != NULL;
        free(copy);
        line = nl != NULL ? nl + 1 : NULL;
    }
    return n;
}

/* The audit trail of <w> (after it exited). */
static char *sc_audit(const tgh_wrap_t *w)
{
    char *a = tgh_read_file(w->audit, NULL);
    cr_assert_not_null(a, "no audit trail at %s", w->audit);
    return a;
}

static void sc_stop(tgh_wrap_t *w)
{
    tgh_close_stdin(&w->tg);
    cr_assert_eq(tgh_wait(&w->tg, 15000), 0, "toolgate did not exit on EOF");
    cr_assert_eq(tgh_exit_code(&w->tg), 0);
}

/* Two instances, cap 2: while A runs two calls, B's call waits (the set
 * never holds more than 2), then runs as soon as A's calls are done. */
Test(shared_conc, two_instances_hold_the_cap_and_the_third_waits)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a, b;
    sc_start(&a, 2, NULL);
    sc_start(&b, 2, NULL);
    uint64_t t0 = tgh_now_ms();
    sc_sleep(&a, 1, 1500, 0);
    sc_sleep(&a, 2, 1500, 0);
    cr_assert_eq(zcard_wait(2, 3000), 2, "A's two calls did not take the fleet's slots");
    sc_sleep(&b, 1, 300, 0);
    long long most = 0;
    while (tgh_now_ms() < t0 + 1200) {
        long long n = zcard();
        most = n > most ? n : most;
        tgh_sleep_ms(15);
    }
    cr_assert_eq(most, 2, "%lld slots held fleet-wide (cap 2)", most);
    for (int i = 1; i <= 2; i++) {
        json_t *r = tgh_await_int(&a.tg, i, 10000, NULL);
        cr_assert(r && json_object_get(r, "result"), "A's call %d failed", i);
        json_decref(r);
    }
    json_t *r = tgh_await_int(&b.tg, 1, 10000, NULL);
    uint64_t tb = tgh_now_ms() - t0;
    cr_assert(r && json_object_get(r, "result"), "B's call was not run once a slot freed");
    json_decref(r);
    cr_assert_geq(tb, 1500 + 300 - 100, "B's call ran while A held both slots (%llu ms)",
                  (unsigned long long)tb);
    /* a freed slot is seen by B within its retry backoff (at most 500 ms) */
    cr_assert_leq(tb, 1500 + 300 + 500 + 1500, "B waited too long (%llu ms)",
                  (unsigned long long)tb);
    cr_assert_eq(zcard_wait(0, 3000), 0, "slots left after every call ended");
    sc_stop(&a);
    sc_stop(&b);
    char *audit = sc_audit(&b);
    cr_assert(strstr(audit, "\"event\":\"call.completed\"") &&
                  strstr(audit, "\"decided_by\":\"store\""),
              "B's audit does not say the store decided");
    free(audit);
}

/* The fleet stays full past B's deadline: B's call is refused with
 * concurrency_limit_exceeded naming the shared limit, observed against
 * cap, and the config path that raises it. */
Test(shared_conc, refused_at_its_deadline_naming_the_shared_limit)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a, b;
    sc_start(&a, 2, NULL);
    sc_start(&b, 2, NULL);
    sc_sleep(&a, 1, 4000, 0);
    sc_sleep(&a, 2, 4000, 0);
    cr_assert_eq(zcard_wait(2, 3000), 2);
    uint64_t t0 = tgh_now_ms();
    sc_sleep(&b, 7, 10, 700);
    json_t *r = tgh_await_int(&b.tg, 7, 5000, NULL);
    uint64_t took = tgh_now_ms() - t0;
    cr_assert_not_null(r, "B's call was never answered");
    cr_assert_str_eq(code_of(r), "concurrency_limit_exceeded");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32061);
    json_t *d = data_of(r);
    cr_assert_str_eq(json_string_value(json_object_get(d, "limit")), "concurrency");
    cr_assert_str_eq(json_string_value(json_object_get(d, "scope")), "shared");
    cr_assert_eq(json_integer_value(json_object_get(d, "observed")), 2);
    cr_assert_eq(json_integer_value(json_object_get(d, "cap")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(d, "config_path")),
                     "agents.tg_fixture_agent.execution_limits.max_concurrent_calls");
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg && strstr(msg, "shared across instances"), "message: %s", msg);
    json_decref(r);
    cr_assert(took >= 650 && took <= 2500, "refused after %llu ms (deadline 700)",
              (unsigned long long)took);
    cr_assert_eq(zcard(), 2, "the refused call took no slot");
    sc_stop(&a);
    sc_stop(&b);
    cr_assert_eq(zcard(), 0);
    char *audit = sc_audit(&b);
    cr_assert(strstr(audit, "\"code\":\"concurrency_limit_exceeded\"") &&
                  strstr(audit, "\"scope\":\"shared\""),
              "the refusal is not audited with the shared scope");
    free(audit);
}

/* A toolgate killed while it holds the only slot: its slot expires within
 * one lease (2 s) of its last renewal, not before ~2/3 of it, and then B's
 * waiting call runs. */
Test(shared_conc, slot_of_a_sigkilled_toolgate_frees_after_its_lease)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a, b;
    char cfg[TGH_PATH + 32];
    sc_config(cfg, sizeof cfg, "{\"store\": {\"slot_lease\": \"2s\"}}\n");
    const char *extra[] = {"--config", cfg, NULL};
    sc_start(&a, 1, extra);
    sc_start(&b, 1, extra);
    sc_sleep(&a, 1, 60000, 0);
    cr_assert_eq(zcard_wait(1, 3000), 1);
    /* let a renewal or two pass: the slot lives on them, not on its start */
    tgh_sleep_ms(1500);
    cr_assert_eq(zcard(), 1, "renewals did not keep A's slot");
    tgh_kill(&a.tg);
    uint64_t t_kill = tgh_now_ms();
    sc_sleep(&b, 1, 10, 0);
    json_t *r = tgh_await_int(&b.tg, 1, 10000, NULL);
    uint64_t took = tgh_now_ms() - t_kill;
    cr_assert(r && json_object_get(r, "result"), "B's call did not run after A's slot expired");
    json_decref(r);
    /* renewed every 667 ms: the last renewal was at most that long before
     * the kill, so the slot lived at least 2000 - 667 ms more */
    cr_assert_geq(took, 1300, "A's slot freed after %llu ms, before its lease",
                  (unsigned long long)took);
    cr_assert_leq(took, 2000 + 500 + 2000, "A's slot took %llu ms to free (lease 2 s)",
                  (unsigned long long)took);
    cr_assert_eq(zcard_wait(0, 3000), 0);
    sc_stop(&b);
}

/* Renewals keep the slot of a call longer than the lease: it still counts
 * for the fleet at three times the lease. */
Test(shared_conc, renewals_keep_a_long_call_in_the_count)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a, b;
    char cfg[TGH_PATH + 32];
    sc_config(cfg, sizeof cfg, "{\"store\": {\"slot_lease\": \"1s\"}}\n");
    const char *extra[] = {"--config", cfg, NULL};
    sc_start(&a, 1, extra);
    sc_start(&b, 1, extra);
    uint64_t t0 = tgh_now_ms();
    sc_sleep(&a, 1, 4000, 0);
    cr_assert_eq(zcard_wait(1, 3000), 1);
    tgh_sleep_ms(3000 - (unsigned)(tgh_now_ms() - t0 < 3000 ? tgh_now_ms() - t0 : 3000));
    cr_assert_eq(zcard(), 1, "the slot lapsed under a running call");
    sc_sleep(&b, 2, 10, 400);
    json_t *r = tgh_await_int(&b.tg, 2, 5000, NULL);
    cr_assert_not_null(r);
    cr_assert_str_eq(code_of(r), "concurrency_limit_exceeded",
                     "B ran while A's call (past three leases) still held the slot");
    cr_assert_eq(json_integer_value(json_object_get(data_of(r), "observed")), 1);
    json_decref(r);
    r = tgh_await_int(&a.tg, 1, 5000, NULL);
    cr_assert(r && json_object_get(r, "result"));
    json_decref(r);
    cr_assert_eq(zcard_wait(0, 2000), 0, "the finished call's slot stayed");
    sc_stop(&a);
    sc_stop(&b);
}

/* Redis stopped (SIGSTOP): no call waits past the store's timeout. Under
 * closed the call is refused (rate_store_unavailable, limit concurrency),
 * under local it runs on this instance's share; store.degraded is audited
 * once, and each call event says who decided. */
Test(shared_conc, stopped_redis_applies_the_policy_without_hanging)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a, b;
    const char *closed[] = {"--limit", "on_store_error=closed", NULL};
    const char *local[] = {"--limit", "on_store_error=local", NULL};
    sc_start(&a, 2, closed);
    sc_start(&b, 2, local);
    /* both connected and set up: a first call each through Redis */
    tgh_call(&a.tg, 1, "echo", "{\"text\":\"x\"}");
    tgh_call(&b.tg, 1, "echo", "{\"text\":\"x\"}");
    json_t *r = tgh_await_int(&a.tg, 1, 5000, NULL);
    cr_assert(r && json_object_get(r, "result"));
    json_decref(r);
    r = tgh_await_int(&b.tg, 1, 5000, NULL);
    cr_assert(r && json_object_get(r, "result"));
    json_decref(r);
    kill(R.pid, SIGSTOP);
    for (int i = 2; i <= 4; i++) {
        uint64_t t0 = tgh_now_ms();
        tgh_call(&a.tg, i, "echo", "{\"text\":\"x\"}");
        r = tgh_await_int(&a.tg, i, 5000, NULL);
        cr_assert_not_null(r, "A's call %d hung on a stopped Redis", i);
        cr_assert_lt(tgh_now_ms() - t0, 1000, "A's call %d waited %llu ms", i,
                     (unsigned long long)(tgh_now_ms() - t0));
        cr_assert_str_eq(code_of(r), "rate_store_unavailable");
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     -32067);
        cr_assert_str_eq(json_string_value(json_object_get(data_of(r), "limit")), "concurrency");
        cr_assert_str_eq(json_string_value(json_object_get(data_of(r), "config_path")),
                         "store.on_store_error");
        json_decref(r);
        t0 = tgh_now_ms();
        tgh_call(&b.tg, i, "echo", "{\"text\":\"x\"}");
        r = tgh_await_int(&b.tg, i, 5000, NULL);
        cr_assert_not_null(r, "B's call %d hung on a stopped Redis", i);
        cr_assert_lt(tgh_now_ms() - t0, 1000);
        cr_assert(json_object_get(r, "result"), "B's call %d: the local share did not run it", i);
        json_decref(r);
    }
    kill(R.pid, SIGCONT);
    sc_stop(&a);
    sc_stop(&b);
    char *audit = sc_audit(&a);
    cr_assert_eq(lines_with(audit, "\"event\":\"store.degraded\"", "\"seq\""), 1,
                 "store.degraded not audited once");
    cr_assert_eq(lines_with(audit, "\"event\":\"call.denied\"", "\"decided_by\":\"closed\""),
                 3, "the refusals do not say the closed policy decided");
    free(audit);
    audit = sc_audit(&b);
    cr_assert_eq(lines_with(audit, "\"event\":\"store.degraded\"", "\"seq\""), 1);
    cr_assert_eq(lines_with(audit, "\"event\":\"call.completed\"", "\"decided_by\":\"local_fallback\""),
                 3, "the calls run on the local share do not say so");
    free(audit);
    cr_assert_eq(zcard_wait(0, 3000), 0);
}

/* Many calls on two instances, completions, queueing and timeouts mixed
 * (a timed-out call keeps its slot until the agent answers the ping):
 * once all are answered, no slot is left in Redis, before and after the
 * instances exit. */
Test(shared_conc, no_slot_leaks_after_many_calls_and_timeouts)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t w[2];
    const char *extra[] = {"--limit", "max_queued_calls=64", NULL};
    sc_start(&w[0], 2, extra);
    sc_start(&w[1], 2, extra);
    enum { N = 18 };
    for (int i = 1; i <= N; i++)
        for (int k = 0; k < 2; k++) {
            if (i % 3 == 0)
                sc_sleep(&w[k], i, 1500, 100 + 20 * (unsigned)i); /* times out: zombie */
            else if (i % 3 == 1)
                tgh_call(&w[k].tg, i, "echo", "{\"text\":\"x\"}");
            else
                sc_sleep(&w[k], i, 30, 0);
        }
    int ok = 0, timeouts = 0, refused = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 1; i <= N; i++) {
            /* answers come in any order: timeouts pass completions */
            json_t *r = tgh_read_json(&w[k].tg, 20000, NULL);
            cr_assert_not_null(r, "instance %d: only %d of %d calls answered", k, i - 1, N);
            const char *code = code_of(r);
            if (json_object_get(r, "result"))
                ok++;
            else if (code && strcmp(code, "timeout") == 0)
                timeouts++;
            else if (code && strcmp(code, "concurrency_limit_exceeded") == 0)
                refused++;
            else
                cr_assert_fail("instance %d call %d: unexpected answer %s", k, i, code);
            json_decref(r);
        }
    cr_assert_eq(ok + timeouts + refused, 2 * N);
    cr_assert_geq(ok, 2 * (N - N / 3), "%d completed", ok);
    cr_assert_gt(timeouts + refused, 0, "no call timed out: the test lost its point");
    cr_assert_eq(zcard_wait(0, 5000), 0, "slots left in Redis while both instances run");
    sc_stop(&w[0]);
    sc_stop(&w[1]);
    cr_assert_eq(zcard(), 0, "slots left in Redis after the instances exited");
}

/* /limits shows the shared slots this instance holds against the cap, and
 * the store's pending calls against store.max_pending. */
Test(shared_conc, registry_shows_shared_slots_and_store_pending)
{
    srv_own(&R, false, NULL);
    static tgh_wrap_t a;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tgh_free_port());
    const char *extra[] = {"--admin", addr, NULL};
    sc_start(&a, 3, extra);
    sc_sleep(&a, 1, 2000, 0);
    cr_assert_eq(zcard_wait(1, 3000), 1);
    char *body = NULL;
    tg_err_t err = {""};
    size_t len = 0;
    int st = tg_admin_get(addr, "/limits", 5000, 16u << 20, &body, &len, &err);
    cr_assert_eq(st, 200, "GET /limits: %d %s", st, st < 0 ? err.msg : "");
    json_t *doc = json_loadb(body, len, 0, NULL);
    free(body);
    cr_assert_not_null(doc);
    json_t *lims = json_object_get(doc, "limits"), *e, *shared = NULL, *pending = NULL;
    size_t i;
    json_array_foreach(lims, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name && strcmp(name, "agent.tg_fixture_agent.concurrency.shared") == 0)
            shared = e;
        if (name && strcmp(name, "store.pending") == 0)
            pending = e;
    }
    cr_assert_not_null(shared, "agent.tg_fixture_agent.concurrency.shared not on /limits");
    cr_assert_eq(json_integer_value(json_object_get(shared, "capacity")), 3);
    cr_assert_eq(json_integer_value(json_object_get(shared, "current")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(shared, "scope")), "shared");
    cr_assert_str_eq(json_string_value(json_object_get(shared, "category")), "concurrency");
    cr_assert_not_null(pending, "store.pending not on /limits");
    cr_assert_eq(json_integer_value(json_object_get(pending, "capacity")), 65536);
    cr_assert_geq(json_integer_value(json_object_get(pending, "high_water")), 0);
    json_decref(doc);
    json_t *r = tgh_await_int(&a.tg, 1, 5000, NULL);
    cr_assert(r && json_object_get(r, "result"));
    json_decref(r);
    sc_stop(&a);
}

/* toolgate check says the concurrency is shared and how slots are
 * leased; without a redis store concurrency_scope shared is refused with
 * the path of the key. */
Test(shared_conc, check_shows_shared_concurrency_and_refuses_it_without_a_store)
{
    srv_own(&R, false, NULL);
    char dir[TGH_PATH], cfg[TGH_PATH + 32], out[TGH_PATH + 32], json[1024], cmd[4096];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(out, sizeof out, "%s/check.txt", dir);
    snprintf(json, sizeof json,
             "{\"store\":{\"kind\":\"redis\",\"url\":\"%s\",\"slot_lease\":\"4s\"},"
             "\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"],\"execution_limits\":"
             "{\"max_concurrent_calls\":5,\"concurrency_scope\":\"shared\"}}]}\n",
             R.url);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    snprintf(cmd, sizeof cmd, "'%s' check --config '%s' > '%s' 2>&1", TG_BIN, cfg, out);
    cr_assert_eq(system(cmd), 0);
    char *text = tgh_read_file(out, NULL);
    cr_assert(text && strstr(text, "max_concurrent_calls is shared across hosts"),
              "check does not say the concurrency is shared:\n%s", text);
    cr_assert(strstr(text, "shared: agents.a max_concurrent_calls (slots leased for 4s"),
              "check does not list the shared slots under the store:\n%s", text);
    cr_assert(strstr(text, "answers (ping"), "the store was not pinged:\n%s", text);
    free(text);
    snprintf(json, sizeof json,
             "{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"],\"execution_limits\":"
             "{\"concurrency_scope\":\"shared\"}}]}\n");
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    cr_assert_neq(system(cmd), 0, "check accepted shared concurrency without a store");
    text = tgh_read_file(out, NULL);
    cr_assert(text && strstr(text, "agents[0].execution_limits.concurrency_scope: \"shared\" needs "
                                   "a shared store"),
              "no path-qualified refusal:\n%s", text);
    free(text);
    /* a tool cannot have its own shared slots */
    snprintf(json, sizeof json,
             "{\"store\":{\"kind\":\"redis\",\"url\":\"%s\"},\"agents\":[{\"id\":\"a\","
             "\"command\":[\"/bin/true\"],\"tools\":{\"web\":{\"concurrency_scope\":\"shared\"}}}]}\n",
             R.url);
    cr_assert_eq(tgh_write_file(cfg, json), 0);
    cr_assert_neq(system(cmd), 0);
    text = tgh_read_file(out, NULL);
    cr_assert(text && strstr(text, "agents[0].tools.web.concurrency_scope: \"shared\" is per agent"),
              "a tool's shared scope was not refused:\n%s", text);
    free(text);
}
