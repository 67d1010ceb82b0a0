/* Several agents behind one front (issue 22, router/dialect/mcp/hub.c):
 * the real `toolgate wrap --config FILE` with two and three fixture agents
 * on one stdio, as an MCP client fronting them through one entry sees it:
 * initialize and the merged list answered by toolgate, names prefixed and
 * routed back, cancels only to the agent holding the call, an agent's own
 * requests routed back to it, one agent's crash leaving the others
 * serving, collisions, forged cursors, and the policy (config and wrap's
 * --allow-tool/--deny-tool) deciding the list and the call alike.
 */
#include <criterion/criterion.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"
#include "tests/tg_admin.h"

static tgh_wrap_t W;

static void hub_fini(void)
{
    if (W.tg.pid > 0 && getenv("TG_IT_VERBOSE")) {
        char *err = tgh_read_file(W.err, NULL);
        fprintf(stderr, "---- toolgate stderr ----\n%s\n-------------------------\n",
                err ? err : "(none)");
        free(err);
    }
    tgh_cleanup();
}

TestSuite(hub, .fini = hub_fini, .timeout = 30);

#define FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"

/* The log of fixture agent <id> in this test's dir. */
static void agent_log(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s.log", W.dir, id);
}

/* One agent entry: id, its log, and <extra> members (JSON text, "" none). */
static size_t agent_json(char *out, size_t cap, const char *id, const char *extra)
{
    char log[TGH_PATH + 64];
    agent_log(id, log, sizeof log);
    return (size_t)snprintf(out, cap,
                            "{\"id\":\"%s\",\"command\":[\"%s\",\"--log\",\"%s\"]%s%s}", id,
                            FIXTURE, log, extra[0] ? "," : "", extra);
}

/* Start `toolgate wrap --config <dir>/c.json <args>` with the agents
 * <ids> (each with <extras>[i]) and top-level members <top> ("" none). */
static void hub_start(const char *const *ids, const char *const *extras, size_t n, const char *top,
                      const char *const *args)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char doc[8192], cfg[TGH_PATH + 32];
    size_t off = (size_t)snprintf(doc, sizeof doc, "{\"agents\":[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            doc[off++] = ',';
        off += agent_json(doc + off, sizeof doc - off, ids[i], extras ? extras[i] : "");
    }
    snprintf(doc + off, sizeof doc - off, "]%s%s}", top[0] ? "," : "", top);
    snprintf(cfg, sizeof cfg, "%s/c.json", W.dir);
    cr_assert_eq(tgh_write_file(cfg, doc), 0);
    const char *argv[TGH_MAX_ARGS];
    size_t k = 0;
    argv[k++] = TG_BIN;
    argv[k++] = "wrap";
    argv[k++] = "--audit";
    argv[k++] = W.audit;
    argv[k++] = "--config";
    argv[k++] = cfg;
    for (size_t i = 0; args && args[i]; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    W.started_ms = tgh_now_ms();
    cr_assert_eq(tgh_spawn(&W.tg, (char *const *)argv, NULL, W.err), 0);
}

static json_t *tools_list(json_int_t id, const char *params)
{
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"tools/list\"%s%s}\n",
              (long long)id, params ? ",\"params\":" : "", params ? params : "");
    return mcp_expect_int(&W.tg, id, 10000);
}

/* Whether the tools of list answer <r> hold <name>. */
static bool listed(const json_t *r, const char *name)
{
    const json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    for (size_t i = 0; i < json_array_size(tools); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(tools, i), "name")), name) ==
            0)
            return true;
    return false;
}

static int log_has(const char *id, const char *needle)
{
    char log[TGH_PATH + 64];
    agent_log(id, log, sizeof log);
    char *t = tgh_read_file(log, NULL);
    int n = 0;
    for (const char *p = t; p != NULL && (p = strstr(p, needle)) != NULL; p++)
        n++;
    free(t);
    return n;
}

static const char *const TWO[] = {"fs", "web"};

Test(hub, initialize_is_answered_by_toolgate_and_the_list_is_merged_in_config_order)
{
    hub_start(TWO, NULL, 2, "", NULL);
    json_t *init = mcp_initialize(&W.tg, 10000);
    cr_assert_not_null(init);
    json_t *res = json_object_get(init, "result");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
                     "toolgate");
    cr_assert_not_null(json_object_get(json_object_get(res, "capabilities"), "tools"));
    json_decref(init);
    tgh_sendf(&W.tg, MCP_INITIALIZED);
    json_t *r = tools_list(1, NULL);
    const json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    cr_assert_eq(json_array_size(tools), 24, "%s", mcp_dump(r));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
                     "fs__echo");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 12), "name")),
                     "web__echo");
    /* The same list again, in the same order. */
    json_t *again = tools_list(2, NULL);
    cr_assert(json_equal(json_object_get(json_object_get(again, "result"), "tools"),
                         (json_t *)tools));
    json_decref(again);
    json_decref(r);
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n");
    json_t *p = mcp_expect_int(&W.tg, 3, 5000);
    cr_assert_not_null(json_object_get(p, "result"));
    json_decref(p);
}

Test(hub, a_call_reaches_only_the_agent_owning_the_name_under_its_own_name)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    mcp_call_text(&W.tg, 2, "web__echo", "{\"text\":\"hello\"}", "hello", 10000);
    /* The fixture logs "call <its own id> <tool>". */
    cr_assert_eq(log_has("web", " echo\n"), 1);
    cr_assert_eq(log_has("fs", "call "), 0);
    mcp_call_text(&W.tg, 3, "fs__echo", "{\"text\":\"x\"}", "x", 10000);
    cr_assert_eq(log_has("fs", " echo\n"), 1);
    /* A name no agent lists: -32602, nothing reaches any agent. */
    mcp_call(&W.tg, 4, "nobody__echo", "{}");
    json_t *r = mcp_expect_int(&W.tg, 4, 5000);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602);
    json_decref(r);
    cr_assert_eq(log_has("fs", "call ") + log_has("web", "call "), 2);
    /* Audit names the agent, its own tool name and the name the caller used. */
    tgh_close_stdin(&W.tg);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0);
    char *audit = tgh_read_file(W.audit, NULL);
    cr_assert(audit != NULL && strstr(audit, "\"agent\":\"web\",\"tool\":\"echo\","
                                             "\"exposed_tool\":\"web__echo\"") != NULL,
              "%s", audit);
    free(audit);
}

Test(hub, a_cancel_reaches_only_the_agent_holding_the_call)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    mcp_call(&W.tg, 7, "web__sleep", "{\"ms\":20000}");
    uint64_t deadline = tgh_now_ms() + 5000;
    while (log_has("web", " sleep\n") == 0 && tgh_left(deadline) > 0)
        tgh_sleep_ms(20);
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                     "\"params\":{\"requestId\":7}}\n");
    deadline = tgh_now_ms() + 5000;
    while (log_has("web", "cancelled") == 0 && tgh_left(deadline) > 0)
        tgh_sleep_ms(20);
    cr_assert_eq(log_has("web", "cancelled"), 1);
    /* Still answering, and the other agent never saw the cancel. */
    mcp_call_text(&W.tg, 8, "fs__echo", "{\"text\":\"after\"}", "after", 10000);
    cr_assert_eq(log_has("fs", "cancelled"), 0);
}

Test(hub, an_agents_request_is_routed_back_to_it_under_a_unique_id)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    mcp_call(&W.tg, 5, "web__ask", "{}");
    json_t *req = NULL;
    for (int i = 0; i < 10 && req == NULL; i++) {
        json_t *m = tgh_read_json(&W.tg, 5000, NULL);
        if (m != NULL && json_object_get(m, "method") != NULL)
            req = m;
        else
            json_decref(m);
    }
    cr_assert_not_null(req, "no sampling request reached the caller");
    const char *rid = json_string_value(json_object_get(req, "id"));
    cr_assert(rid != NULL && strncmp(rid, "tg1.", 4) == 0, "id %s", mcp_dump(req));
    char *idtxt = json_dumps(json_object_get(req, "id"), JSON_ENCODE_ANY);
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"ok\":true}}\n", idtxt);
    free(idtxt);
    json_decref(req);
    json_t *r = mcp_expect_int(&W.tg, 5, 5000);
    cr_assert_str_eq(mcp_text_of(r), "got:result", "%s", mcp_dump(r));
    json_decref(r);
}

Test(hub, one_agent_crashing_leaves_the_others_serving_and_the_list_follows)
{
    static const char *const extras[] = {"\"restart\":{\"policy\":\"no\"}", ""};
    hub_start(TWO, extras, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    mcp_call(&W.tg, 2, "fs__crash", "{}");
    json_t *r = mcp_expect_int(&W.tg, 2, 5000);
    mcp_assert_denied(r, "agent_unavailable");
    json_decref(r);
    mcp_call_text(&W.tg, 3, "web__echo", "{\"text\":\"alive\"}", "alive", 10000);
    json_t *l = tools_list(4, NULL);
    cr_assert_not(listed(l, "fs__echo"), "%s", mcp_dump(l));
    cr_assert(listed(l, "web__echo"));
    const json_t *down =
        json_object_get(json_object_get(json_object_get(l, "result"), "_meta"), "io.toolgate/unavailable");
    cr_assert_str_eq(json_string_value(json_array_get(down, 0)), "fs", "%s", mcp_dump(l));
    json_decref(l);
}

Test(hub, a_collision_keeps_the_first_agents_name_and_is_audited)
{
    static const char *const extras[] = {"\"tool_prefix\":\"\"", "\"tool_prefix\":\"\""};
    char admin[64];
    snprintf(admin, sizeof admin, "127.0.0.1:%d", tgh_free_port());
    const char *const args[] = {"--admin", admin, NULL};
    hub_start(TWO, extras, 2, "", args);
    mcp_init_ok(&W.tg, 10000);
    json_t *l = tools_list(1, NULL);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(l, "result"), "tools")), 12);
    json_decref(l);
    /* /agents says which agent's names are hidden, and the metric counts them. */
    char *agents = tga_get(admin, "/agents", NULL);
    json_t *doc = json_loads(agents, 0, NULL);
    cr_assert_not_null(doc, "%s", agents);
    json_t *arr = json_is_array(doc) ? doc : json_object_get(doc, "agents");
    json_int_t hidden[2] = {-1, -1};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *a = json_array_get(arr, i);
        const char *name = json_string_value(json_object_get(a, "name"));
        if (name != NULL && (strcmp(name, "fs") == 0 || strcmp(name, "web") == 0))
            hidden[name[0] == 'w'] = json_integer_value(json_object_get(a, "hidden_names"));
    }
    cr_assert_eq(hidden[0], 0, "%s", agents);
    cr_assert_eq(hidden[1], 12, "%s", agents);
    json_decref(doc);
    free(agents);
    char *metrics = tga_get(admin, "/metrics", NULL);
    cr_assert(strstr(metrics, "toolgate_name_collisions_total 12") != NULL, "%s", metrics);
    free(metrics);
    mcp_call_text(&W.tg, 2, "echo", "{\"text\":\"first\"}", "first", 10000);
    cr_assert_eq(log_has("fs", " echo\n"), 1);
    cr_assert_eq(log_has("web", "call "), 0);
    tgh_close_stdin(&W.tg);
    cr_assert_eq(tgh_wait(&W.tg, 10000), 0);
    char *audit = tgh_read_file(W.audit, NULL);
    cr_assert(audit != NULL && strstr(audit, "\"agent.name_collision\"") != NULL);
    cr_assert(strstr(audit, "\"agent\":\"web\",\"tool\":\"echo\",\"exposed_tool\":\"echo\"") !=
                  NULL,
              "%s", audit);
    free(audit);
}

Test(hub, a_forged_cursor_is_refused)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_t *r = tools_list(1, "{\"cursor\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602);
    json_decref(r);
}

/* ---- who may call what ----------------------------------------------------------- */

Test(hub, a_config_policy_decides_the_list_and_the_call_alike)
{
    hub_start(TWO, NULL, 2,
              "\"policy\":{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"agents\":[\"web\"],"
              "\"tools\":[\"sl*\"]}]}",
              NULL);
    mcp_init_ok(&W.tg, 10000);
    json_t *l = tools_list(1, NULL);
    cr_assert_not(listed(l, "web__sleep"));
    cr_assert_not(listed(l, "web__slow_cancel"));
    cr_assert(listed(l, "fs__sleep"));
    cr_assert(listed(l, "web__echo"));
    json_decref(l);
    mcp_call(&W.tg, 2, "web__sleep", "{\"ms\":1}");
    json_t *r = mcp_expect_int(&W.tg, 2, 5000);
    json_t *data = mcp_assert_denial(r, -32069, "tool_not_allowed");
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")), "policy.rules[0]",
                     "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_eq(log_has("web", " sleep\n"), 0);
}

Test(hub, wrap_deny_tool_keeps_one_agents_names_and_refuses_the_call)
{
    cr_assert_eq(tgh_wrap_prepare(&W), 0);
    char log[TGH_PATH + 64];
    snprintf(log, sizeof log, "%s/fixture.log", W.dir);
    static const char *const tg_args[] = {"--deny-tool", "sl*", NULL};
    const char *const agent_args[] = {"--log", log, NULL};
    cr_assert_eq(tgh_wrap_exec(&W, tg_args, FIXTURE, agent_args, NULL), 0);
    mcp_init_ok(&W.tg, 10000);
    json_t *l = tools_list(1, NULL);
    cr_assert(listed(l, "echo"), "%s", mcp_dump(l));
    cr_assert_not(listed(l, "sleep"));
    json_decref(l);
    mcp_call(&W.tg, 2, "sleep", "{\"ms\":1}");
    json_t *r = mcp_expect_int(&W.tg, 2, 5000);
    json_t *data = mcp_assert_denial(r, -32069, "tool_not_allowed");
    cr_assert_str_eq(json_string_value(json_object_get(data, "config_path")), "--deny-tool sl*",
                     "%s", mcp_dump(r));
    json_decref(r);
    mcp_call_text(&W.tg, 3, "echo", "{\"text\":\"ok\"}", "ok", 10000);
}

/* ---- serve: a Unix listener naming "agents" --------------------------------------- */

static tgh_serve_t S;

static char S_admin[64]; /* the admin endpoint of serve_hub's run */

/* serve with agents fs and web behind one socket, and <top> ("" none). */
static void serve_hub(const char *top)
{
    snprintf(S_admin, sizeof S_admin, "127.0.0.1:%d", tgh_free_port());
    cr_assert_eq(tgh_serve_prepare(&S, "hub"), 0);
    snprintf(W.dir, sizeof W.dir, "%s", S.dir); /* agent_log() and log_has() read W.dir */
    char fs[TGH_PATH + 256], web[TGH_PATH + 256], doc[4 * TGH_PATH + 1024];
    agent_json(fs, sizeof fs, "fs", "");
    agent_json(web, sizeof web, "web", "");
    snprintf(doc, sizeof doc,
             "{\"audit\":{\"path\":\"%s\"},\"agents\":[%s,%s],\"router\":{\"admin\":\"%s\","
             "\"listen\":[{\"unix\":\"%s\",\"agents\":[\"fs\",\"web\"]}]}%s%s}",
             S.audit, fs, web, S_admin, S.sock, top[0] ? "," : "", top);
    tgh_serve_start(&S, doc, NULL, 10000);
}

Test(hub, serve_fronts_several_agents_on_one_socket_each_connection_with_its_own_instances)
{
    serve_hub("");
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_connect(&b, S.sock);
    mcp_init_ok(&a, 10000);
    mcp_init_ok(&b, 10000);
    tgh_sendf(&a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    json_t *l = mcp_expect_int(&a, 1, 10000);
    cr_assert(listed(l, "fs__echo") && listed(l, "web__echo"), "%s", mcp_dump(l));
    json_decref(l);
    mcp_call_text(&a, 2, "web__echo", "{\"text\":\"a\"}", "a", 10000);
    /* b never listed: a known name still reaches its agent. */
    mcp_call_text(&b, 2, "fs__echo", "{\"text\":\"b\"}", "b", 10000);
    /* Two connections, each with an instance of each agent. */
    cr_assert_eq(log_has("fs", "start "), 2);
    cr_assert_eq(log_has("web", "start "), 2);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    tgh_serve_stop(&S, 10000);
}

Test(hub, serve_policy_by_uid_decides_the_list_and_the_call)
{
    char top[256];
    snprintf(top, sizeof top,
             "\"policy\":{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"uids\":[%u],"
             "\"agents\":[\"web\"],\"tools\":[\"echo\"]}]}",
             (unsigned)getuid());
    serve_hub(top);
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 10000);
    tgh_sendf(&a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    json_t *l = mcp_expect_int(&a, 1, 10000);
    cr_assert_not(listed(l, "web__echo"), "%s", mcp_dump(l));
    cr_assert(listed(l, "fs__echo") && listed(l, "web__sleep"));
    json_decref(l);
    mcp_call(&a, 2, "web__echo", "{\"text\":\"no\"}");
    json_t *r = mcp_expect_int(&a, 2, 10000);
    mcp_assert_denial(r, -32069, "tool_not_allowed");
    json_decref(r);
    /* Counted by the rule that decided. */
    char *metrics = tga_get(S_admin, "/metrics", NULL);
    cr_assert(metrics != NULL && strstr(metrics, "toolgate_policy_denials_total{rule=\"0\"} 1") &&
                  strstr(metrics, "toolgate_denials_total{code=\"tool_not_allowed\"} 1"),
              "%s", metrics ? metrics : "(no /metrics)");
    free(metrics);
    tgh_conn_close(&a);
    tgh_serve_stop(&S, 10000);
    char *audit = tgh_read_file(S.audit, NULL);
    cr_assert(audit != NULL && strstr(audit, "\"tool_not_allowed\"") != NULL);
    free(audit);
}

Test(hub, a_reload_applies_a_changed_policy_to_live_sessions_and_says_the_list_changed)
{
    serve_hub("\"policy\":{\"default\":\"allow\"}");
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 10000);
    mcp_call_text(&a, 1, "web__echo", "{\"text\":\"before\"}", "before", 10000);
    /* The same config, web's echo now denied. */
    char *doc = tgh_read_file(S.cfg, NULL);
    cr_assert_not_null(doc);
    char *at = strstr(doc, "\"policy\":{\"default\":\"allow\"}");
    cr_assert_not_null(at);
    char next[8192];
    snprintf(next, sizeof next,
             "%.*s\"policy\":{\"default\":\"allow\",\"rules\":[{\"effect\":\"deny\",\"agents\":"
             "[\"web\"],\"tools\":[\"echo\"]}]}%s",
             (int)(at - doc), doc, at + strlen("\"policy\":{\"default\":\"allow\"}"));
    free(doc);
    cr_assert_eq(tgh_write_file(S.cfg, next), 0);
    kill(S.tg.pid, SIGHUP);
    cr_assert_geq(tgh_log_wait(S.err, "SIGHUP: config reloaded", 1, 10000), 1);
    json_t *m = tgh_read_json(&a, 5000, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(m, "method")),
                     "notifications/tools/list_changed", "%s", mcp_dump(m));
    json_decref(m);
    mcp_call(&a, 2, "web__echo", "{\"text\":\"after\"}");
    json_t *r = mcp_expect_int(&a, 2, 10000);
    mcp_assert_denial(r, -32069, "tool_not_allowed");
    json_decref(r);
    tgh_conn_close(&a);
    tgh_serve_stop(&S, 10000);
}

Test(hub, a_merged_list_keeps_at_most_twice_max_frame_bytes_and_says_it_was_cut)
{
    static const char *const three[] = {"a", "b", "c"};
    hub_start(three, NULL, 3, "\"router\":{\"max_frame_bytes\":\"64Ki\"}", NULL);
    mcp_init_ok(&W.tg, 10000);
    /* Each fixture pads its answer with 50 000 bytes: three of them pass
     * 2 x 64Ki, so one is left out. */
    json_t *r = tools_list(1, "{\"pad\":50000}");
    const json_t *meta = json_object_get(json_object_get(r, "result"), "_meta");
    cr_assert(json_is_true(json_object_get(meta, "io.toolgate/truncated")), "%s", mcp_dump(r));
    size_t n = json_array_size(json_object_get(json_object_get(r, "result"), "tools"));
    cr_assert_eq(n, 24, "%zu tools: two agents' lists, not three", n);
    json_decref(r);
    /* Without the padding every list fits again. */
    json_t *l = tools_list(2, NULL);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(l, "result"), "tools")), 36);
    json_decref(l);
}

/* Progress behind several agents: each agent is given a token of its own
 * ("tg<leg>.<raw>"), the caller gets its own token back, and an agent's
 * progress for another agent's call, or for a token it made up, never
 * reaches the caller. */
Test(hub, progress_comes_back_under_the_callers_token_and_only_from_its_agent)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    mcp_call_meta(&W.tg, "2", "web__progress", "{}", "\"progressToken\":77");
    json_t *others = json_array();
    json_t *r = mcp_await_int(&W.tg, 2, 10000, others);
    cr_assert_str_eq(mcp_text_of(r), "progress done", "%s", mcp_dump(r));
    json_decref(r);
    size_t progress = 0;
    for (size_t i = 0; i < json_array_size(others); i++) {
        const json_t *m = json_array_get(others, i);
        const json_t *tok = json_object_get(json_object_get(m, "params"), "progressToken");
        cr_assert(json_is_integer(tok) && json_integer_value(tok) == 77, "%s", mcp_dump(m));
        progress++;
    }
    cr_assert_eq(progress, 2, "%s", mcp_dump(others));
    json_array_clear(others);
    /* web holds a call with token 77; fs forges progress for it (web's
     * token, and its own namespace with the caller's raw token). */
    mcp_call_meta(&W.tg, "3", "web__sleep", "{\"ms\":3000}", "\"progressToken\":77");
    mcp_call(&W.tg, 4, "fs__raw",
             "{\"lines\":["
             "\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"method\\\":\\\"notifications/progress\\\","
             "\\\"params\\\":{\\\"progressToken\\\":\\\"tg1.77\\\",\\\"progress\\\":1}}\","
             "\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"method\\\":\\\"notifications/progress\\\","
             "\\\"params\\\":{\\\"progressToken\\\":\\\"tg0.77\\\",\\\"progress\\\":1}}\","
             "\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"method\\\":\\\"notifications/progress\\\","
             "\\\"params\\\":{\\\"progressToken\\\":77,\\\"progress\\\":1}}\","
             "\"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":$ID,\\\"result\\\":{\\\"content\\\":[]}}\"]}");
    r = mcp_await_int(&W.tg, 4, 10000, others);
    cr_assert_not_null(json_object_get(r, "result"), "%s", mcp_dump(r));
    json_decref(r);
    r = mcp_await_int(&W.tg, 3, 10000, others);
    cr_assert_not_null(json_object_get(r, "result"), "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_eq(json_array_size(others), 0, "forged progress reached the caller: %s",
                 mcp_dump(others));
    json_decref(others);
}

/* Tasks behind several agents: tasks/get goes to the agent whose task it
 * is; two agents naming their tasks alike are refused rather than
 * guessed; tasks/list holds every agent's tasks. */
Test(hub, tasks_are_routed_by_their_id_and_listed_together)
{
    hub_start(TWO, NULL, 2, "", NULL);
    mcp_init_ok(&W.tg, 10000);
    json_decref(tools_list(1, NULL));
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                     "\"web__sleep\",\"arguments\":{\"ms\":3000},\"task\":{\"ttl\":60000}}}\n");
    json_t *r = mcp_expect_int(&W.tg, 2, 10000);
    const char *tid =
        json_string_value(json_object_get(json_object_get(json_object_get(r, "result"), "task"),
                                          "taskId"));
    cr_assert_str_eq(tid, "task-0", "%s", mcp_dump(r));
    json_decref(r);
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/get\","
                     "\"params\":{\"taskId\":\"task-0\"}}\n");
    r = mcp_expect_int(&W.tg, 3, 10000);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "status")),
                     "working", "%s", mcp_dump(r));
    json_decref(r);
    cr_assert_eq(log_has("fs", "tasks/get"), 0);
    /* A task no agent has. */
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\","
                     "\"params\":{\"taskId\":\"task-9\"}}\n");
    r = mcp_expect_int(&W.tg, 4, 10000);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602);
    json_decref(r);
    /* fs names its first task task-0 too: which one is meant cannot be told. */
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                     "\"fs__sleep\",\"arguments\":{\"ms\":3000},\"task\":{\"ttl\":60000}}}\n");
    json_decref(mcp_expect_int(&W.tg, 5, 10000));
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/get\","
                     "\"params\":{\"taskId\":\"task-0\"}}\n");
    r = mcp_expect_int(&W.tg, 6, 10000);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")), -32602,
                 "%s", mcp_dump(r));
    cr_assert(strstr(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
                     "several agents") != NULL, "%s", mcp_dump(r));
    json_decref(r);
    tgh_sendf(&W.tg, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/list\"}\n");
    r = mcp_expect_int(&W.tg, 7, 10000);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(r, "result"), "tasks")), 2, "%s",
                 mcp_dump(r));
    json_decref(r);
}
