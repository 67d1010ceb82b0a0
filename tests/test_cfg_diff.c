/* config/diff: what a reload changes, compared through the key table.
 *
 * One verdict per reload class, the first changed key in document order,
 * nested and array keys, per-agent verdicts, values compared as the model
 * holds them, keys that never show a secret; and every row of the key
 * table changed once in a full config, the diff naming it with its class
 * (so a key added to the table and not to the diff fails here). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/diff.h"
#include "config/keys.h"
#include "tg_harness.h"

#define MANIFEST TG_SOURCE_DIR "/tests/data/files.opensentience.agent.json"
#define DIGEST_A "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define DIGEST_B "sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

/* A config that sets every section: three listeners (unix mcp, https,
 * opensentience), two audit sinks, an mcp agent with tools and an
 * opensentience agent with a manifest, a redis store, two callers (uid
 * with a token; jwt). %s: the JWKS file. Values other than the defaults
 * where a section is replaced whole by a test. */
static const char base_fmt[] =
    "{\"router\": {\"instance\": \"host-a\", \"max_frame_bytes\": \"4Mi\","
    "  \"listen\": ["
    "   {\"unix\": \"/run/tg/a.sock\", \"agent\": \"search\", \"mode\": \"0660\","
    "    \"owner\": 1000, \"group\": 1000, \"max_connections\": 100},"
    "   {\"http\": \"127.0.0.1:8080\", \"agent\": \"search\", \"path\": \"/mcp\","
    "    \"tls\": {\"cert\": \"/etc/tg/c.pem\", \"key\": \"/etc/tg/k.pem\"},"
    "    \"allowed_origins\": [\"https://a.example\"], \"max_header_bytes\": \"16Ki\","
    "    \"max_requests_per_connection\": 100, \"header_timeout\": \"10s\","
    "    \"keepalive_timeout\": \"60s\", \"max_sessions\": 10, \"max_sessions_per_caller\": 5,"
    "    \"session_idle_timeout\": \"30m\"},"
    "   {\"unix\": \"/run/tg/os.sock\", \"dialect\": \"opensentience\","
    "    \"on_oversize\": \"reject\"},"
    "   {\"unix\": \"/run/tg/m.sock\", \"agents\": [\"search\", \"web\"]}],"
    "  \"callers_only\": false, \"idle_timeout\": \"30s\", \"frame_timeout\": \"10s\","
    "  \"handshake_timeout\": \"10s\", \"reload_drain_timeout\": \"5m\","
    "  \"admin\": {\"listen\": \"127.0.0.1:9464\", \"max_header_bytes\": \"8Ki\","
    "   \"max_connections\": 16, \"idle_timeout\": \"10s\", \"max_response_bytes\": \"16Mi\"}},"
    " \"audit\": {\"queue\": 4096, \"sinks\": ["
    "   {\"kind\": \"file\", \"path\": \"/var/log/tg/a.jsonl\", \"max_bytes\": \"100Mi\","
    "    \"keep\": 5, \"fsync\": \"interval\", \"fsync_interval\": \"1s\"},"
    "   {\"kind\": \"redis_stream\", \"url\": \"redis://:SECRET-PW-1@127.0.0.1:6379/0\","
    "    \"stream\": \"tg:audit\", \"maxlen\": 1000, \"spool\": \"/var/lib/tg/spool\","
    "    \"spool_max_bytes\": \"10Mi\", \"timeout\": \"1s\"}]},"
    " \"agents\": ["
    "  {\"id\": \"search\", \"dialect\": \"mcp\", \"command\": [\"/usr/bin/search\", \"--x\"],"
    "   \"execution_limits\": {\"max_tool_call_duration\": \"30s\", \"max_concurrent_calls\": 5,"
    "    \"max_queued_calls\": 16, \"rate_limit\": \"100/minute\", \"burst\": 10,"
    "    \"kill_grace_period\": \"5s\", \"rate_scope\": \"local\", \"shared_mode\": \"exact\","
    "    \"concurrency_scope\": \"local\"},"
    "   \"tools\": {\"web\": {\"max_tool_call_duration\": \"5s\", \"max_concurrent_calls\": 1,"
    "     \"max_queued_calls\": 4, \"rate_limit\": \"10/minute\", \"burst\": 2,"
    "     \"rate_scope\": \"local\", \"shared_mode\": \"exact\", \"concurrency_scope\": \"local\"},"
    "    \"fs\": {\"rate_limit\": \"5/second\"}},"
    "   \"restart\": {\"policy\": \"always\", \"max_restarts\": 3, \"window\": \"2m\","
    "    \"backoff\": \"200ms\", \"max_backoff\": \"4s\"},"
    "   \"stderr\": {\"bytes_per_second\": \"32Ki\", \"max_line\": \"2Ki\"},"
    "   \"env\": {\"pass\": [\"PATH\", \"HOME\"], \"set\": {\"API_KEY\": \"SECRET-ENV-1\","
    "    \"MODE\": \"x\"}},"
    "   \"resources\": {\"memory\": {\"limit\": \"512Mi\", \"request\": \"128Mi\"},"
    "    \"cpu\": {\"limit\": \"500m\", \"request\": \"100m\"},"
    "    \"pids\": {\"limit\": 64, \"request\": 8}, \"nofile\": {\"limit\": 1024, \"request\": 64},"
    "    \"disk\": {\"limit\": \"1Gi\", \"request\": \"10Mi\"},"
    "    \"network\": {\"limit\": \"full\", \"bandwidth_limit\": \"10Mbps\","
    "     \"max_connections\": 100}},"
    "   \"cwd\": \"/srv\", \"workspace\": \"/var/lib/tg/ws\", \"max_instances\": 8,"
    "   \"start\": \"on_demand\"},"
    "  {\"id\": \"files\", \"dialect\": \"opensentience\", \"command\": [\"/usr/bin/files\"],"
    "   \"manifest\": \"" MANIFEST "\", \"start\": \"eager\","
    "   \"opensentience\": {\"heartbeat_interval\": \"6s\", \"heartbeat_timeout\": \"20s\","
    "    \"idempotency_window\": \"5m\", \"idempotency_max_bytes\": \"8Mi\","
    "    \"on_oversize\": \"close\"}},"
    "  {\"id\": \"web\", \"command\": [\"/usr/bin/web\"], \"tool_prefix\": \"w\"}],"
    " \"store\": {\"kind\": \"redis\", \"url\": \"redis://:SECRET-PW-2@127.0.0.1:6379/0\","
    "  \"timeout\": \"50ms\", \"on_store_error\": \"local\", \"instances\": 2, \"prefix\": \"tg\","
    "  \"connect_timeout\": \"1s\", \"dead_after\": \"1s\", \"backoff\": \"100ms\","
    "  \"max_backoff\": \"250ms\", \"lease\": \"1s\", \"slot_lease\": \"10s\","
    "  \"max_pending\": 1000, \"local_max_keys\": 1000},"
    " \"containment\": {\"mode\": \"best_effort\", \"min_free_memory\": \"100Mi\","
    "  \"workspace_backend\": \"auto\"},"
    " \"callers\": ["
    "  {\"name\": \"ci\", \"uid\": 1001, \"gid\": 1001,"
    "   \"execution_limits\": {\"max_tool_call_duration\": \"10s\", \"max_concurrent_calls\": 2,"
    "    \"max_queued_calls\": 4, \"rate_limit\": \"30/minute\", \"burst\": 5,"
    "    \"rate_scope\": \"local\", \"shared_mode\": \"exact\", \"concurrency_scope\": \"local\"},"
    "   \"tokens\": [\"" DIGEST_A "\"]},"
    "  {\"name\": \"svc\", \"jwt\": {\"issuer\": \"https://idp.example\", \"audience\": \"tg\","
    "   \"jwks_file\": \"%s\", \"claim\": \"sub\", \"leeway\": \"30s\"}}],"
    " \"policy\": {\"default\": \"allow\", \"rules\": ["
    "  {\"effect\": \"deny\", \"callers\": [\"ci\"], \"uids\": [1001], \"gids\": [1001],"
    "   \"tokens\": [\"t1\"], \"claims\": {\"scope\": [\"read\"]}, \"agents\": [\"search\"],"
    "   \"tools\": [\"web*\"], \"methods\": [\"tools/call\"]}]}}";

static json_t *base;      /* the base document, parsed */
static tg_config_t old_c; /* the base, loaded */
static char jwks[TGH_PATH + 32], jwks2[TGH_PATH + 32];

/* Shape-valid JWKS text (config checks only the shape). */
static void put_jwks(const char *name, char *path, size_t cap)
{
    char text[512], x[44];

    memset(x, 'A', 43);
    x[43] = '\0';
    snprintf(text, sizeof text,
             "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\",\"x\":\"%s\","
             "\"y\":\"%s\"}]}",
             x, x);
    tgh_put(tgh_tmp, name, text);
    tgh_tmp_path(path, cap, name);
}

/* <doc> (not consumed) loaded over the defaults into <c>; fails the test
 * when it does not load. */
static void load_doc(const json_t *doc, tg_config_t *c)
{
    tg_err_t err;
    char *text = json_dumps(doc, JSON_PRESERVE_ORDER);

    cr_assert_not_null(text);
    cr_assert_eq(tg_config_default(c), 0);
    int rc = tg_config_load_buffer(c, "t.json", text, strlen(text), &err);
    free(text);
    cr_assert_eq(rc, 0, "%s", err.msg);
}

static void setup(void)
{
    char text[sizeof base_fmt + 2 * TGH_PATH];
    json_error_t je;

    tgh_tmp_init();
    put_jwks("jwks.json", jwks, sizeof jwks);
    put_jwks("jwks2.json", jwks2, sizeof jwks2);
    snprintf(text, sizeof text, base_fmt, jwks);
    base = json_loads(text, JSON_PRESERVE_ORDER, &je);
    cr_assert_not_null(base, "the base config: %d:%d: %s", je.line, je.column, je.text);
    load_doc(base, &old_c);
}

static void teardown(void)
{
    json_decref(base);
    tg_config_free(&old_c);
    tgh_cleanup();
}

TestSuite(cfg_diff, .init = setup, .fini = teardown);

/* ---- changing a document ---- */

/* Set member or element <path> (config syntax: "agents[0].tools.web.burst")
 * of <doc> to <v> (consumed; NULL deletes it). Missing objects on the way
 * are made; an index one past an array's end appends. */
static void set_at(json_t *doc, const char *path, json_t *v)
{
    const char *p = path;
    json_t *cur = doc;

    for (;;) {
        /* One component: a member name, or "[N]". */
        bool idx = *p == '[';
        size_t n = idx ? strcspn(p, "]") + 1 : strcspn(p, ".[");
        char comp[128];
        cr_assert(n < sizeof comp && (!idx || p[n - 1] == ']'), "%s: bad path", path);
        snprintf(comp, sizeof comp, "%.*s", (int)(idx ? n - 2 : n), idx ? p + 1 : p);
        p += n;
        size_t i = idx ? strtoul(comp, NULL, 10) : 0;
        if (*p == '\0') {
            if (idx && v == NULL)
                json_array_remove(cur, i);
            else if (idx && i == json_array_size(cur))
                json_array_append_new(cur, v);
            else if (idx)
                json_array_set_new(cur, i, v);
            else if (v == NULL)
                json_object_del(cur, comp);
            else
                json_object_set_new(cur, comp, v);
            return;
        }
        json_t *child = idx ? json_array_get(cur, i) : json_object_get(cur, comp);
        if (child == NULL && !idx) {
            child = *p == '[' ? json_array() : json_object();
            json_object_set_new(cur, comp, child);
        }
        cr_assert_not_null(child, "%s: no element %s", path, comp);
        cur = child;
        if (*p == '.')
            p++;
    }
}

/* The base with <path> set to JSON text <json> (NULL: deleted), loaded;
 * the diff from the base into <all> and <ag> (2 agents). */
static tg_cfg_need_t diff_with(const char *path, const char *json, tg_cfg_change_t *all,
                               tg_cfg_change_t ag[2])
{
    json_t *doc = json_deep_copy(base), *v = NULL;
    json_error_t je;
    tg_config_t c;

    if (json != NULL) {
        v = json_loads(json, JSON_DECODE_ANY, &je);
        cr_assert_not_null(v, "%s: %s", path, je.text);
    }
    set_at(doc, path, v);
    load_doc(doc, &c);
    json_decref(doc);
    tg_cfg_need_t need = tg_cfg_diff(&old_c, &c, all, ag, 2);
    tg_config_free(&c);
    return need;
}

static const char *need_name(tg_cfg_need_t n)
{
    static const char *const names[] = {"none", "live", "agent", "restart"};
    return (unsigned)n < 4 ? names[n] : "?";
}

/* ---- one verdict per class ---- */

Test(cfg_diff, the_same_config_needs_nothing)
{
    tg_cfg_change_t all, ag[2];
    tg_config_t c;

    load_doc(base, &c);
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, ag, 2), TG_NEED_NONE);
    cr_assert_str_eq(all.key, "");
    cr_assert_eq(ag[0].need, TG_NEED_NONE);
    cr_assert_eq(ag[1].need, TG_NEED_NONE);
    cr_assert_eq(tg_cfg_diff(&old_c, &old_c, NULL, NULL, 0), TG_NEED_NONE);
    tg_config_free(&c);
}

Test(cfg_diff, a_live_key_applies_in_place)
{
    tg_cfg_change_t all, ag[2];

    cr_assert_eq(diff_with("router.callers_only", "true", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "router.callers_only");
    cr_assert_eq(ag[0].need, TG_NEED_NONE, "a router key is no agent's");
    cr_assert_eq(diff_with("agents[0].execution_limits.rate_limit", "\"7/second\"", &all, ag),
                 TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[0].execution_limits.rate_limit");
    cr_assert_eq(ag[0].need, TG_NEED_LIVE);
    cr_assert_str_eq(ag[0].key, "agents[0].execution_limits.rate_limit");
    cr_assert_eq(ag[1].need, TG_NEED_NONE);
}

Test(cfg_diff, an_agent_key_restarts_the_agent)
{
    tg_cfg_change_t all, ag[2];

    cr_assert_eq(diff_with("agents[1].command", "[\"/usr/bin/files\", \"-v\"]", &all, ag),
                 TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[1].command");
    cr_assert_eq(ag[0].need, TG_NEED_NONE);
    cr_assert_eq(ag[1].need, TG_NEED_AGENT);
    cr_assert_str_eq(ag[1].key, "agents[1].command");
}

Test(cfg_diff, a_restart_key_restarts_toolgate)
{
    tg_cfg_change_t all;

    cr_assert_eq(diff_with("store.prefix", "\"tg2\"", &all, NULL), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "store.prefix");
}

/* ---- which key is named ---- */

/* The first in document order among the keys that need the most. */
Test(cfg_diff, the_first_key_that_needs_the_most_is_named)
{
    tg_cfg_change_t all, ag[2];
    json_t *doc = json_deep_copy(base);
    tg_config_t c;

    set_at(doc, "router.handshake_timeout", json_string("20s"));                 /* live */
    set_at(doc, "agents[0].cwd", json_string("/srv2"));                          /* agent */
    set_at(doc, "agents[1].opensentience.heartbeat_timeout", json_string("9s")); /* live */
    set_at(doc, "store.timeout", json_string("70ms"));                           /* restart */
    set_at(doc, "callers[0].uid", json_integer(7));                              /* restart */
    load_doc(doc, &c);
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, ag, 2), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "store.timeout");
    cr_assert_eq(ag[0].need, TG_NEED_AGENT);
    cr_assert_str_eq(ag[0].key, "agents[0].cwd");
    cr_assert_eq(ag[1].need, TG_NEED_LIVE);
    cr_assert_str_eq(ag[1].key, "agents[1].opensentience.heartbeat_timeout");
    tg_config_free(&c);

    /* Without the restart keys: the agent key, though a live one came first. */
    set_at(doc, "store.timeout", json_string("50ms"));
    set_at(doc, "callers[0].uid", json_integer(1001));
    load_doc(doc, &c);
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, NULL, 0), TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[0].cwd");
    tg_config_free(&c);

    /* Two of one class: the first in the document, across sections. */
    set_at(doc, "router.idle_timeout", json_string("40s"));
    set_at(doc, "audit.queue", json_integer(10));
    load_doc(doc, &c);
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, NULL, 0), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "router.idle_timeout");
    tg_config_free(&c);
    json_decref(doc);
}

Test(cfg_diff, nested_and_array_keys_are_named_in_config_syntax)
{
    tg_cfg_change_t all, ag[2];

    cr_assert_eq(diff_with("agents[1].resources.memory", "{\"limit\": \"128Mi\"}", &all, ag),
                 TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[1].resources.memory");
    cr_assert_eq(diff_with("router.listen[1].path", "\"/v2\"", &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "router.listen[1].path");
    cr_assert_eq(diff_with("router.listen[0].mode", "\"0600\"", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "router.listen[0].mode");
    cr_assert_eq(diff_with("agents[0].tools.fs.burst", "3", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[0].tools.fs.burst");
    cr_assert_str_eq(ag[0].key, "agents[0].tools.fs.burst");
    cr_assert_eq(diff_with("callers[1].jwt.leeway", "\"5s\"", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "callers[1].jwt.leeway");
    cr_assert_eq(diff_with("audit.sinks[1].maxlen", "5", &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "audit.sinks[1].maxlen");
    cr_assert_eq(diff_with("agents[1].resources.network.bandwidth_limit", "\"1Mbps\"", &all, ag),
                 TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[1].resources.network.bandwidth_limit");
}

/* Agents, listeners, sinks and callers by position; tools by position
 * and name. */
Test(cfg_diff, arrays_are_compared_by_position)
{
    tg_cfg_change_t all, ag[2];
    json_t *doc = json_deep_copy(base);
    tg_config_t c;

    /* Reordered agents: the first id that moved. */
    json_t *agents = json_object_get(doc, "agents"), *a0 = json_incref(json_array_get(agents, 0));
    json_array_remove(agents, 0);
    json_array_append_new(agents, a0);
    load_doc(doc, &c);
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, ag, 2), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "agents[0].id");
    cr_assert_eq(ag[0].need, TG_NEED_RESTART);
    tg_config_free(&c);
    json_decref(doc);

    /* The last agent removed: named at its index; the others unchanged. */
    cr_assert_eq(diff_with("agents[2]", NULL, &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "agents[2]");
    cr_assert_eq(ag[1].need, TG_NEED_NONE, "agents[1] did not change");
    cr_assert_eq(diff_with("agents[1].dialect", "\"mcp\"", &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "agents[1].dialect");
    cr_assert_eq(diff_with("router.listen[0]", NULL, &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "router.listen[0].unix");
    cr_assert_eq(diff_with("callers[1]", NULL, &all, ag), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "callers[1]");
    /* A tool removed: named; the tools after it are not compared. */
    cr_assert_eq(diff_with("agents[0].tools.web", NULL, &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[0].tools.fs");
    cr_assert_eq(diff_with("agents[0].tools.fs", NULL, &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[0].tools.fs");
}

/* A key names no value: not an environment value, a token's digest or a
 * URL's password. */
Test(cfg_diff, keys_never_show_a_secret)
{
    tg_cfg_change_t all, ag[2];

    cr_assert_eq(diff_with("agents[0].env.set.API_KEY", "\"SECRET-ENV-2\"", &all, ag),
                 TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[0].env.set.API_KEY");
    cr_assert_eq(diff_with("agents[0].env.set.NEW", "\"SECRET-ENV-3\"", &all, ag), TG_NEED_AGENT);
    cr_assert_str_eq(all.key, "agents[0].env.set.NEW");
    cr_assert_eq(diff_with("callers[0].tokens", "[\"" DIGEST_B "\"]", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "callers[0].tokens");
    cr_assert_eq(diff_with("store.url", "\"redis://:SECRET-PW-9@127.0.0.1:6379/0\"", &all, ag),
                 TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "store.url");
    cr_assert_eq(
        diff_with("audit.sinks[1].url", "\"redis://:SECRET-PW-9@127.0.0.1:6379/0\"", &all, ag),
        TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "audit.sinks[1].url");
}

/* Values as the model holds them: the same value written otherwise is no
 * change; a limit newly written at its default is (its source changed),
 * a restart key is not. */
Test(cfg_diff, values_are_compared_as_the_model_holds_them)
{
    tg_cfg_change_t all, ag[2];

    cr_assert_eq(diff_with("router.max_frame_bytes", "4194304", &all, ag), TG_NEED_NONE, "%s",
                 all.key);
    cr_assert_eq(diff_with("agents[0].execution_limits.rate_limit", "\"100/minute\"", &all, ag),
                 TG_NEED_NONE, "%s", all.key);
    cr_assert_eq(diff_with("agents[0].resources.memory.request", "\"256Mi\"", &all, ag),
                 TG_NEED_NONE, "a request is checked and not kept: %s", all.key);
    cr_assert_eq(diff_with("router.listen[0].max_connections", "100", &all, ag), TG_NEED_NONE);
    cr_assert_eq(diff_with("agents[0].tools.fs.max_queued_calls", "16", &all, ag), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[0].tools.fs.max_queued_calls");
    cr_assert_eq(diff_with("callers[1].execution_limits.burst", "5", &all, ag), TG_NEED_LIVE);
    cr_assert_eq(diff_with("containment.mode", "\"best_effort\"", &all, ag), TG_NEED_NONE);
    /* "opensentience": {} where it was left out: the same values. */
    json_t *doc = json_deep_copy(base);
    tg_config_t a, b;
    set_at(doc, "agents[1].opensentience", NULL);
    load_doc(doc, &a);
    set_at(doc, "agents[1].opensentience", json_object());
    load_doc(doc, &b);
    cr_assert_eq(tg_cfg_diff(&a, &b, &all, ag, 2), TG_NEED_LIVE);
    cr_assert_str_eq(all.key, "agents[1].opensentience");
    tg_config_free(&a);
    tg_config_free(&b);
    json_decref(doc);
}

Test(cfg_diff, a_listeners_dialect_alone_is_compared)
{
    tg_cfg_change_t all;
    tg_config_t c;

    load_doc(base, &c);
    c.listen[2].dialect = TG_DIALECT_MCP;
    cr_assert_eq(tg_cfg_diff(&old_c, &c, &all, NULL, 0), TG_NEED_RESTART);
    cr_assert_str_eq(all.key, "router.listen[2].dialect");
    tg_config_free(&c);
}

/* ---- every row of the table ---- */

#define OWN (-1) /* the row's own class */

/* One change per row: <at> (NULL: the row's path at element 0 and tool
 * "web") set to <json> (NULL: deleted) in the base; the diff must name
 * <key> (NULL: <at>) with <need> (OWN: the row's reload class + 1). */
static const struct mutation {
    const char *row, *at, *json, *key;
    int need;
} mutations[] = {
    /* sections: through a member */
    {"router", "router.idle_timeout", "\"31s\"", NULL, TG_NEED_RESTART},
    {"audit", "audit.queue", "100", NULL, TG_NEED_RESTART},
    {"agents", "agents[3]", "{\"id\": \"x\", \"command\": [\"/bin/x\"]}", NULL, OWN},
    {"store", "store.prefix", "\"tg2\"", NULL, TG_NEED_RESTART},
    {"containment", "containment.workspace_backend", "\"scan\"", NULL, TG_NEED_RESTART},
    {"callers", "callers[2]", "{\"name\": \"new\", \"uid\": 5}", NULL, OWN},
    /* router */
    {"router.instance", NULL, "\"host-b\"", NULL, OWN},
    {"router.max_frame_bytes", NULL, "\"8Mi\"", NULL, OWN},
    {"router.listen", "router.listen[4]", "{\"unix\": \"/run/tg/b.sock\", \"agent\": \"search\"}",
     NULL, OWN},
    {"router.listen[].unix", NULL, "\"/run/tg/z.sock\"", NULL, OWN},
    {"router.listen[].agent", NULL, "\"files\"", NULL, OWN},
    /* issue 22: a reordered list is a change (the first agent keeps a contested name) */
    {"router.listen[].agents", "router.listen[3].agents", "[\"web\", \"search\"]", NULL, OWN},
    {"router.listen[].mode", NULL, "\"0600\"", NULL, OWN},
    {"router.listen[].owner", NULL, "0", NULL, OWN},
    {"router.listen[].group", NULL, "0", NULL, OWN},
    /* A listener's dialect comes with its agent (mcp has one, opensentience
     * none): the agent is named first; the dialect alone in
     * a_listeners_dialect_alone_is_compared. */
    {"router.listen[].dialect", "router.listen[2]",
     "{\"unix\": \"/run/tg/os.sock\", \"dialect\": \"mcp\", \"agent\": \"files\"}",
     "router.listen[2].agent", TG_NEED_RESTART},
    {"router.listen[].on_oversize", "router.listen[2].on_oversize", "\"close\"", NULL, OWN},
    {"router.listen[].max_connections", NULL, "50", NULL, OWN},
    {"router.listen[].http", "router.listen[1].http", "\"127.0.0.1:8081\"", NULL, OWN},
    {"router.listen[].path", "router.listen[1].path", "\"/mcp2\"", NULL, OWN},
    {"router.listen[].tls", "router.listen[1].tls", "\"off\"", NULL, OWN},
    {"router.listen[].tls.cert", "router.listen[1].tls.cert", "\"/etc/tg/c2.pem\"", NULL, OWN},
    {"router.listen[].tls.key", "router.listen[1].tls.key", "\"/etc/tg/k2.pem\"", NULL, OWN},
    {"router.listen[].allowed_origins", "router.listen[1].allowed_origins",
     "[\"https://b.example\"]", NULL, OWN},
    {"router.listen[].max_header_bytes", "router.listen[1].max_header_bytes", "\"32Ki\"", NULL,
     OWN},
    {"router.listen[].max_requests_per_connection", "router.listen[1].max_requests_per_connection",
     "200", NULL, OWN},
    {"router.listen[].header_timeout", "router.listen[1].header_timeout", "\"20s\"", NULL, OWN},
    {"router.listen[].keepalive_timeout", "router.listen[1].keepalive_timeout", "\"30s\"", NULL,
     OWN},
    {"router.listen[].max_sessions", "router.listen[1].max_sessions", "20", NULL, OWN},
    {"router.listen[].max_sessions_per_caller", "router.listen[1].max_sessions_per_caller", "6",
     NULL, OWN},
    {"router.listen[].session_idle_timeout", "router.listen[1].session_idle_timeout", "\"1h\"",
     NULL, OWN},
    {"router.callers_only", NULL, "true", NULL, OWN},
    {"router.idle_timeout", NULL, "\"40s\"", NULL, OWN},
    {"router.frame_timeout", NULL, "\"11s\"", NULL, OWN},
    {"router.handshake_timeout", NULL, "\"11s\"", NULL, OWN},
    {"router.reload_drain_timeout", NULL, "\"1m\"", NULL, OWN},
    {"router.admin", NULL, "\"127.0.0.1:9465\"", "router.admin.listen", TG_NEED_RESTART},
    {"router.admin.listen", NULL, "\"127.0.0.1:9465\"", NULL, OWN},
    {"router.admin.max_header_bytes", NULL, "\"16Ki\"", NULL, OWN},
    {"router.admin.max_connections", NULL, "8", NULL, OWN},
    {"router.admin.idle_timeout", NULL, "\"20s\"", NULL, OWN},
    {"router.admin.max_response_bytes", NULL, "\"32Mi\"", NULL, OWN},
    /* audit */
    {"audit.path", "audit", "{\"queue\": 4096, \"path\": \"/var/log/tg/b.jsonl\"}", "audit.path",
     OWN},
    {"audit.queue", NULL, "10", NULL, OWN},
    {"audit.sinks", "audit.sinks[2]", "{\"kind\": \"stderr\"}", NULL, OWN},
    {"audit.sinks[].kind", "audit.sinks[0]", "{\"kind\": \"stderr\"}", "audit.sinks[0].kind", OWN},
    {"audit.sinks[].path", NULL, "\"/var/log/tg/b.jsonl\"", NULL, OWN},
    {"audit.sinks[].max_bytes", NULL, "\"50Mi\"", NULL, OWN},
    {"audit.sinks[].keep", NULL, "3", NULL, OWN},
    {"audit.sinks[].fsync", "audit.sinks[0]",
     "{\"kind\": \"file\", \"path\": \"/var/log/tg/a.jsonl\", \"max_bytes\": \"100Mi\","
     " \"keep\": 5, \"fsync\": \"always\"}",
     "audit.sinks[0].fsync", OWN},
    {"audit.sinks[].fsync_interval", NULL, "\"2s\"", NULL, OWN},
    {"audit.sinks[].url", "audit.sinks[1].url", "\"redis://:SECRET-PW-3@127.0.0.1:6380/0\"", NULL,
     OWN},
    {"audit.sinks[].stream", "audit.sinks[1].stream", "\"tg:audit2\"", NULL, OWN},
    {"audit.sinks[].maxlen", "audit.sinks[1].maxlen", "2000", NULL, OWN},
    {"audit.sinks[].spool", "audit.sinks[1].spool", "\"/var/lib/tg/spool2\"", NULL, OWN},
    {"audit.sinks[].spool_max_bytes", "audit.sinks[1].spool_max_bytes", "\"20Mi\"", NULL, OWN},
    {"audit.sinks[].timeout", "audit.sinks[1].timeout", "\"2s\"", NULL, OWN},
    /* agents */
    {"agents[].id", NULL, "\"search2\"", NULL, OWN},
    {"agents[].tool_prefix", NULL, "\"s\"", NULL, OWN},
    {"agents[].dialect", NULL, "\"opensentience\"", NULL, OWN},
    {"agents[].command", NULL, "[\"/usr/bin/search\", \"--y\"]", NULL, OWN},
    {"agents[].execution_limits", NULL, "{}", "agents[0].execution_limits.max_tool_call_duration",
     TG_NEED_LIVE},
    {"agents[].execution_limits.max_tool_call_duration", NULL, "\"31s\"", NULL, OWN},
    {"agents[].execution_limits.max_concurrent_calls", NULL, "6", NULL, OWN},
    {"agents[].execution_limits.max_queued_calls", NULL, "17", NULL, OWN},
    {"agents[].execution_limits.rate_limit", NULL, "\"101/minute\"", NULL, OWN},
    {"agents[].execution_limits.burst", NULL, "11", NULL, OWN},
    {"agents[].execution_limits.kill_grace_period", NULL, "\"6s\"", NULL, OWN},
    {"agents[].execution_limits.rate_scope", NULL, "\"shared\"", NULL, OWN},
    {"agents[].execution_limits.shared_mode", NULL, "\"lease\"", NULL, OWN},
    {"agents[].execution_limits.concurrency_scope", NULL, "\"shared\"", NULL, OWN},
    {"agents[].tools", "agents[0].tools.db", "{\"rate_limit\": \"1/second\"}", NULL, OWN},
    {"agents[].tools.*.max_tool_call_duration", NULL, "\"6s\"", NULL, OWN},
    {"agents[].tools.*.max_concurrent_calls", NULL, "2", NULL, OWN},
    {"agents[].tools.*.max_queued_calls", NULL, "5", NULL, OWN},
    {"agents[].tools.*.rate_limit", NULL, "\"11/minute\"", NULL, OWN},
    {"agents[].tools.*.burst", NULL, "3", NULL, OWN},
    {"agents[].tools.*.rate_scope", NULL, "\"shared\"", NULL, OWN},
    {"agents[].tools.*.shared_mode", NULL, "\"lease\"", "", TG_NEED_NONE},
    {"agents[].tools.*.concurrency_scope", "agents[0].tools.fs.concurrency_scope", "\"local\"", "",
     TG_NEED_NONE},
    {"agents[].restart", NULL, "{}", "agents[0].restart.policy", TG_NEED_AGENT},
    {"agents[].restart.policy", NULL, "\"no\"", NULL, OWN},
    {"agents[].restart.max_restarts", NULL, "4", NULL, OWN},
    {"agents[].restart.window", NULL, "\"3m\"", NULL, OWN},
    {"agents[].restart.backoff", NULL, "\"300ms\"", NULL, OWN},
    {"agents[].restart.max_backoff", NULL, "\"6s\"", NULL, OWN},
    {"agents[].stderr", NULL, "{}", "agents[0].stderr.bytes_per_second", TG_NEED_AGENT},
    {"agents[].stderr.bytes_per_second", NULL, "\"16Ki\"", NULL, OWN},
    {"agents[].stderr.max_line", NULL, "\"1Ki\"", NULL, OWN},
    {"agents[].env", NULL, "{}", "agents[0].env.pass", TG_NEED_AGENT},
    {"agents[].env.pass", NULL, "[\"PATH\"]", NULL, OWN},
    {"agents[].env.set", "agents[0].env.set.MODE", "\"y\"", NULL, OWN},
    {"agents[].resources", NULL, "{}", "agents[0].resources.memory", TG_NEED_AGENT},
    {"agents[].resources.memory", NULL, "{\"limit\": \"256Mi\"}", NULL, OWN},
    {"agents[].resources.memory.limit", NULL, "\"256Mi\"", "agents[0].resources.memory", OWN},
    {"agents[].resources.memory.request", NULL, "\"64Mi\"", "", TG_NEED_NONE},
    {"agents[].resources.cpu", NULL, "{\"limit\": \"250m\"}", NULL, OWN},
    {"agents[].resources.cpu.limit", NULL, "\"250m\"", "agents[0].resources.cpu", OWN},
    {"agents[].resources.cpu.request", NULL, "\"50m\"", "", TG_NEED_NONE},
    {"agents[].resources.pids", NULL, "{\"limit\": 32}", NULL, OWN},
    {"agents[].resources.pids.limit", NULL, "32", "agents[0].resources.pids", OWN},
    {"agents[].resources.pids.request", NULL, "4", "", TG_NEED_NONE},
    {"agents[].resources.nofile", NULL, "{\"limit\": 512}", NULL, OWN},
    {"agents[].resources.nofile.limit", NULL, "512", "agents[0].resources.nofile", OWN},
    {"agents[].resources.nofile.request", NULL, "32", "", TG_NEED_NONE},
    {"agents[].resources.disk", NULL, "{\"limit\": \"2Gi\"}", NULL, OWN},
    {"agents[].resources.disk.limit", NULL, "\"2Gi\"", "agents[0].resources.disk", OWN},
    {"agents[].resources.disk.request", NULL, "\"20Mi\"", "", TG_NEED_NONE},
    {"agents[].resources.network", NULL, "\"none\"", NULL, OWN},
    {"agents[].resources.network.limit", NULL, "\"loopback\"", "agents[0].resources.network", OWN},
    {"agents[].resources.network.bandwidth_limit", NULL, "\"20Mbps\"", NULL, OWN},
    {"agents[].resources.network.max_connections", NULL, "50", NULL, OWN},
    {"agents[].cwd", NULL, "\"/srv2\"", NULL, OWN},
    {"agents[].workspace", NULL, "\"/var/lib/tg/ws2\"", NULL, OWN},
    {"agents[].max_instances", NULL, "4", NULL, OWN},
    {"agents[].manifest", "agents[1].manifest",
     "\"" TG_SOURCE_DIR "/tests/../tests/data/files.opensentience.agent.json\"", NULL, OWN},
    {"agents[].start", "agents[1].start", "\"on_demand\"", NULL, OWN},
    {"agents[].opensentience", "agents[1].opensentience", NULL,
     "agents[1].opensentience.heartbeat_interval", TG_NEED_AGENT},
    {"agents[].opensentience.heartbeat_interval", "agents[1].opensentience.heartbeat_interval",
     "\"7s\"", NULL, OWN},
    {"agents[].opensentience.heartbeat_timeout", "agents[1].opensentience.heartbeat_timeout",
     "\"21s\"", NULL, OWN},
    {"agents[].opensentience.idempotency_window", "agents[1].opensentience.idempotency_window",
     "\"6m\"", NULL, OWN},
    {"agents[].opensentience.idempotency_max_bytes",
     "agents[1].opensentience.idempotency_max_bytes", "\"4Mi\"", NULL, OWN},
    {"agents[].opensentience.on_oversize", "agents[1].opensentience.on_oversize", "\"reject\"",
     NULL, OWN},
    /* store */
    {"store.kind", "store", "{\"kind\": \"local\"}", "store.kind", OWN},
    {"store.url", NULL, "\"redis://:SECRET-PW-4@127.0.0.1:6380/0\"", NULL, OWN},
    {"store.timeout", NULL, "\"60ms\"", NULL, OWN},
    {"store.on_store_error", NULL, "\"open\"", NULL, OWN},
    {"store.instances", NULL, "3", NULL, OWN},
    {"store.prefix", NULL, "\"tg2\"", NULL, OWN},
    {"store.connect_timeout", NULL, "\"2s\"", NULL, OWN},
    {"store.dead_after", NULL, "\"2s\"", NULL, OWN},
    {"store.backoff", NULL, "\"200ms\"", NULL, OWN},
    {"store.max_backoff", NULL, "\"500ms\"", NULL, OWN},
    {"store.lease", NULL, "\"2s\"", NULL, OWN},
    {"store.slot_lease", NULL, "\"20s\"", NULL, OWN},
    {"store.max_pending", NULL, "2000", NULL, OWN},
    {"store.local_max_keys", NULL, "2000", NULL, OWN},
    /* containment */
    {"containment.mode", NULL, "\"off\"", NULL, OWN},
    {"containment.min_free_memory", NULL, "\"200Mi\"", NULL, OWN},
    {"containment.workspace_backend", NULL, "\"tmpfs\"", NULL, OWN},
    /* callers */
    {"callers[].name", NULL, "\"ci2\"", NULL, OWN},
    {"callers[].uid", NULL, "1002", NULL, OWN},
    {"callers[].gid", NULL, "1002", NULL, OWN},
    {"callers[].execution_limits", NULL, "{}", "callers[0].execution_limits.max_tool_call_duration",
     TG_NEED_LIVE},
    {"callers[].execution_limits.max_tool_call_duration", NULL, "\"11s\"", NULL, OWN},
    {"callers[].execution_limits.max_concurrent_calls", NULL, "3", NULL, OWN},
    {"callers[].execution_limits.max_queued_calls", NULL, "5", NULL, OWN},
    {"callers[].execution_limits.rate_limit", NULL, "\"31/minute\"", NULL, OWN},
    {"callers[].execution_limits.burst", NULL, "6", NULL, OWN},
    {"callers[].execution_limits.rate_scope", "callers[1].execution_limits.rate_scope", "\"local\"",
     "", TG_NEED_NONE},
    {"callers[].execution_limits.shared_mode", NULL, "\"lease\"", "", TG_NEED_NONE},
    {"callers[].execution_limits.concurrency_scope",
     "callers[1].execution_limits.concurrency_scope", "\"local\"", "", TG_NEED_NONE},
    {"callers[].tokens", NULL, "[\"" DIGEST_A "\", \"" DIGEST_B "\"]", NULL, OWN},
    {"callers[].jwt", NULL,
     "{\"issuer\": \"https://idp.example\", \"audience\": \"tg\", \"jwks_file\": \"@JWKS2@\"}",
     NULL, OWN},
    {"callers[].jwt.issuer", "callers[1].jwt.issuer", "\"https://idp2.example\"", NULL, OWN},
    {"callers[].jwt.audience", "callers[1].jwt.audience", "\"tg2\"", NULL, OWN},
    {"callers[].jwt.jwks_file", "callers[1].jwt.jwks_file", "\"@JWKS2@\"", NULL, OWN},
    {"callers[].jwt.claim", "callers[1].jwt.claim", "\"email\"", NULL, OWN},
    {"callers[].jwt.leeway", "callers[1].jwt.leeway", "\"10s\"", NULL, OWN},
    /* policy: compared whole (json_equal), named "policy", applied live */
    {"policy", "policy", "{\"default\": \"deny\"}", "policy", TG_NEED_LIVE},
    {"policy.default", NULL, "\"deny\"", "policy", OWN},
    {"policy.rules", NULL, "[]", "policy", OWN},
    {"policy.rules[].effect", NULL, "\"allow\"", "policy", OWN},
    {"policy.rules[].callers", NULL, "[\"ci\", \"svc\"]", "policy", OWN},
    {"policy.rules[].uids", NULL, "[1002]", "policy", OWN},
    {"policy.rules[].gids", NULL, "[1002]", "policy", OWN},
    {"policy.rules[].tokens", NULL, "[\"t2\"]", "policy", OWN},
    {"policy.rules[].claims", NULL, "{\"scope\": [\"write\"]}", "policy", OWN},
    {"policy.rules[].agents", NULL, "[\"web\"]", "policy", OWN},
    {"policy.rules[].tools", NULL, "[\"*\"]", "policy", OWN},
    {"policy.rules[].methods", NULL, "[\"prompts/get\"]", "policy", OWN},
};

/* Row path <row> at element 0 and tool "web", in <out>. */
static void row_at(const char *row, char *out, size_t cap)
{
    size_t n = 0;

    for (const char *p = row; *p != '\0' && n + 4 < cap; p++) {
        if (p[0] == '[' && p[1] == ']') {
            n += (size_t)snprintf(out + n, cap - n, "[0]");
            p++;
        } else if (p[0] == '*') {
            n += (size_t)snprintf(out + n, cap - n, "web");
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

Test(cfg_diff, every_row_of_the_table_is_compared)
{
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        const struct mutation *m = NULL;
        for (size_t j = 0; j < sizeof mutations / sizeof mutations[0] && m == NULL; j++)
            if (strcmp(mutations[j].row, k->path) == 0)
                m = &mutations[j];
        cr_expect_not_null(m, "%s: no change of it is tested", k->path);
        if (m == NULL)
            continue;
        tg_cfg_change_t all, ag[2];
        char json[512];
        const char *v = m->json, *mark = v != NULL ? strstr(v, "@JWKS2@") : NULL;
        if (mark != NULL) { /* the second JWKS file's path */
            snprintf(json, sizeof json, "%.*s%s%s", (int)(mark - v), v, jwks2, mark + 7);
            v = json;
        }
        int need = m->need == OWN ? (int)k->reload + 1 : m->need;
        char at[128];
        row_at(k->path, at, sizeof at);
        if (m->at != NULL)
            snprintf(at, sizeof at, "%s", m->at);
        const char *key = m->key != NULL ? m->key : at;
        tg_cfg_need_t got = diff_with(at, v, &all, ag);
        cr_expect_eq(got, need, "%s: needs %s, want %s (key %s)", k->path, need_name(got),
                     need_name(need), all.key);
        cr_expect_str_eq(all.key, key, "%s: named %s, want %s", k->path, all.key, key);
        cr_expect_null(strstr(all.key, "SECRET"), "%s: %s", k->path, all.key);
        /* An agent's own key is its verdict too; no other agent's. */
        for (int a = 0; a < 2; a++) {
            char pre[16];
            snprintf(pre, sizeof pre, "agents[%d].", a);
            bool mine = strncmp(key, pre, strlen(pre)) == 0;
            cr_expect_eq(ag[a].need, mine ? need : TG_NEED_NONE, "%s: agents[%d] needs %s", k->path,
                         a, need_name(ag[a].need));
            if (mine)
                cr_expect_str_eq(ag[a].key, key, "%s", k->path);
        }
    }
    /* Every change names a row. */
    for (size_t j = 0; j < sizeof mutations / sizeof mutations[0]; j++)
        cr_expect_not_null(tg_cfg_key_find(mutations[j].row), "%s: not a row", mutations[j].row);
}
