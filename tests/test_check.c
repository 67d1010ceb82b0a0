/* toolgate check: the effective-limit tables and their sources, exit
 * codes, --json, secrets kept out, and the predicted enforcement report on
 * synthetic hosts (so the report's lines can be asserted exactly whatever
 * this machine offers).
 *
 * The command runs as `TG_BIN check ...` when the binary has the
 * subcommand, else as tg_cli_check() in a forked child with stdout and
 * stderr sent to files: the same code either way.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "limits/contain.h"
#include "router/cli/check.h"
#include "router/cli/cli.h"
#include "router/gateway/contain_cfg.h"
#include "tests/tg_harness.h"

#define OUT_MAX (256 * 1024) /* bytes of captured output kept */
#define CANARY  "canary-Pw-7f3a91"

static char out[OUT_MAX], errout[OUT_MAX];

TestSuite(check, .init = tgh_tmp_init, .fini = tgh_cleanup);

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;

    buf[0] = '\0';
    if (!f)
        return;
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* 1 when TG_BIN understands "check" (the lead wires it into main.c). */
static bool bin_has_check(void)
{
    static int known = -1;
    pid_t pid;
    int st;

    if (known >= 0)
        return known;
    known = 0;
    if (access(TG_BIN, X_OK) != 0)
        return false;
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(TG_BIN, "toolgate", "check", "--help", (char *)NULL);
        _exit(127);
    }
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    known = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return known;
}

/* Run `toolgate check <args...>` (NULL-terminated); stdout into <out>,
 * stderr into <errout>. Returns the exit status. */
static int run_check(const char *const *args)
{
    char opath[128], epath[128];
    char *argv[64];
    int argc = 0, st;
    bool use_bin = bin_has_check();
    pid_t pid;

    argv[argc++] = (char *)"toolgate";
    argv[argc++] = (char *)"check";
    for (; *args && argc < 63; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    tgh_tmp_path(opath, sizeof opath, "stdout");
    tgh_tmp_path(epath, sizeof epath, "stderr");
    fflush(NULL);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(99);
        if (use_bin) {
            execv(TG_BIN, argv);
            _exit(98);
        }
        int rc = tg_cli_check(argc - 2, argv + 2);
        fflush(NULL);
        _exit(rc);
    }
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    slurp(opath, out, sizeof out);
    slurp(epath, errout, sizeof errout);
    return WEXITSTATUS(st);
}

/* <text> holds <line> as a whole line. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

#define EXPECT_LINE(text, line)                                                                    \
    cr_expect(has_line(text, line), "missing line:\n%s\nin:\n%s", line, text)

/* The sample: an agent with a manifest, a tool, a second plain agent, and
 * secrets where a careless report could print them. */
static const char manifest_text[] =
    "{\"id\": \"com.example.search\", \"version\": \"1.2.0\",\n"
    " \"resources\": {\"memory\": {\"request\": \"128Mi\", \"limit\": \"1Gi\"},\n"
    "               \"cpu\": {\"limit\": \"500m\"},\n"
    "               \"network\": {\"bandwidth_limit\": \"10Mbps\"}},\n"
    " \"execution_limits\": {\"max_tool_call_duration\": \"30s\", \"max_concurrent_calls\": 5,\n"
    "                      \"rate_limit\": \"100/minute\"}}\n";

static const char config_text[] =
    "{\"store\": {\"kind\": \"redis\", \"url\": \"redis://ops:" CANARY "@10.0.0.5:6379/0\"},\n"
    " \"agents\": [{\"id\": \"search\", \"command\": [\"/bin/true\", \"--token=" CANARY
    "\"],\n"
    "              \"env\": {\"set\": {\"API_KEY\": \"" CANARY "\"}},\n"
    "              \"manifest\": \"m.json\",\n"
    "              \"resources\": {\"memory\": {\"limit\": \"256Mi\"}},\n"
    "              \"execution_limits\": {\"max_tool_call_duration\": \"1m\",\n"
    "                                   \"max_concurrent_calls\": 2},\n"
    "              \"tools\": {\"web\": {\"rate_limit\": \"10/minute\", "
    "\"max_tool_call_duration\": \"2m\"}}},\n"
    "             {\"id\": \"plain\", \"dialect\": \"opensentience\", \"command\": "
    "[\"/bin/true\"]}]}\n";

static void sample(char *cpath, size_t cap)
{
    char mpath[128];

    tgh_tmp_put("m.json", manifest_text, mpath, sizeof mpath);
    tgh_tmp_put("c.json", config_text, cpath, cap);
}

Test(check, valid_config_prints_the_limits_tables)
{
    char cpath[128], line[1024];

    sample(cpath, sizeof cpath);
    cr_assert_eq(run_check((const char *[]){"--config", cpath, NULL}), 0, "stderr: %s", errout);
    cr_expect_str_eq(errout, "");
    snprintf(line, sizeof line, "config %s: valid", cpath);
    EXPECT_LINE(out, line);
    EXPECT_LINE(out, "containment.mode best_effort (default)");
    EXPECT_LINE(out, "  max_frame_bytes          4Mi           default");
    EXPECT_LINE(out, "agent search (mcp)");
    snprintf(line, sizeof line, "  manifest %s/m.json", tgh_tmp);
    EXPECT_LINE(out, line);
    EXPECT_LINE(out,
                "  limit                    effective     source        manifest      operator");
    EXPECT_LINE(out, "  max_tool_call_duration   30s           manifest      30s           1m");
    EXPECT_LINE(out, "  max_concurrent_calls     2             operator cap  5             2");
    EXPECT_LINE(out, "  max_queued_calls         16            default       -             -");
    /* The operator is silent on the rate: the default is the ceiling. */
    EXPECT_LINE(out, "  rate_limit               60/minute     default cap   100/minute    -");
    EXPECT_LINE(out, "  burst                    60            default       -             -  (the "
                     "rate's count)");
    EXPECT_LINE(out, "  kill_grace_period        5s            default       -             -");
    EXPECT_LINE(out, "  memory                   256Mi         operator cap  1Gi           256Mi");
    EXPECT_LINE(out, "  cpu                      500m          manifest      500m          -");
    EXPECT_LINE(out, "  pids                     64            default       -             -");
    EXPECT_LINE(out, "  disk                     1Gi           default       -             -");
    EXPECT_LINE(out, "  network                  full          default       -             -");
    EXPECT_LINE(out, "  bandwidth_limit          10Mbps        manifest      10Mbps        -  "
                     "(not enforced: no backend does it)");
    EXPECT_LINE(out, "  tool web (these, and the agent's limits)");
    EXPECT_LINE(out, "    max_tool_call_duration 2m            file          -             2m  "
                     "(the agent's 30s ends a call first)");
    EXPECT_LINE(out,
                "    rate_limit             10/minute     file          -             10/minute");
    EXPECT_LINE(out, "agent plain (opensentience)");
    EXPECT_LINE(out, "  max_concurrent_calls     3             default       -             -");
    EXPECT_LINE(out, "  memory                   512Mi         default       -             -");
    /* Host-dependent parts: present, with the module's table header. */
    EXPECT_LINE(out, "    resource requested  applied backend  how / why not");
    EXPECT_LINE(out,
                "    bandwidth 10Mbps     NO      none     no backend shapes bandwidth; remove "
                "resources.network.bandwidth_limit, set network \"none\", or use "
                "containment.mode best_effort");
    EXPECT_LINE(out, "host (detected for this process; check creates no cgroup)");
    cr_expect_not_null(strstr(out, "  enforced on this host (backend "));
    cr_expect_not_null(strstr(out, "\ncontainment: backend "));
    /* The plain agent asks for no bandwidth: no such row. */
    cr_expect_null(strstr(strstr(out, "agent plain"), "bandwidth"));
}

Test(check, limit_options_apply_to_the_first_agent)
{
    char cpath[128];

    sample(cpath, sizeof cpath);
    cr_assert_eq(
        run_check((const char *[]){"--config", cpath, "--limit", "max_concurrent_calls=1",
                                   "--limit=memory=2Gi", "--limit", "containment=off", NULL}),
        0, "stderr: %s", errout);
    EXPECT_LINE(out, "containment.mode off (--limit)");
    EXPECT_LINE(out, "  max_concurrent_calls     1             --limit       5             1");
    /* Looser than the manifest asks: the manifest's 1Gi stands. */
    EXPECT_LINE(out, "  memory                   1Gi           manifest      1Gi           2Gi");
    EXPECT_LINE(out, "  enforced on this host (backend none, mode off)");
    /* The column fits "bandwidth", which the manifest asks for. */
    EXPECT_LINE(out, "    memory    1Gi        NO      none     containment.mode is off");
    EXPECT_LINE(out, "    bandwidth 10Mbps     NO      none     containment.mode is off");
    /* The second agent is untouched. */
    EXPECT_LINE(out, "  max_concurrent_calls     3             default       -             -");
}

Test(check, json_output_has_values_and_sources)
{
    char cpath[128];
    json_t *root, *a, *lim, *mem;
    json_error_t jerr;

    sample(cpath, sizeof cpath);
    cr_assert_eq(run_check((const char *[]){"--json", "--config", cpath, NULL}), 0, "%s", errout);
    root = json_loads(out, 0, &jerr);
    cr_assert_not_null(root, "%s: %s", jerr.text, out);
    cr_expect(json_is_true(json_object_get(root, "valid")));
    cr_expect_str_eq(json_string_value(json_object_get(root, "config")), cpath);
    a = json_array_get(json_object_get(root, "agents"), 0);
    cr_assert_not_null(a);
    cr_expect_str_eq(json_string_value(json_object_get(a, "id")), "search");
    lim = json_object_get(a, "limits");
    mem = json_object_get(lim, "memory");
    cr_expect_eq(json_integer_value(json_object_get(mem, "value")), 268435456);
    cr_expect_str_eq(json_string_value(json_object_get(mem, "source")), "operator cap");
    cr_expect_str_eq(json_string_value(json_object_get(mem, "manifest")), "1Gi");
    cr_expect_str_eq(json_string_value(json_object_get(mem, "operator")), "256Mi");
    cr_expect_eq(json_integer_value(json_object_get(
                     json_object_get(json_object_get(lim, "rate_limit"), "value"), "period_ms")),
                 60000);
    cr_expect_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(a, "tools"), "web"), "rate_limit"),
            "source")),
        "file");
    cr_expect(json_is_boolean(json_object_get(json_object_get(a, "enforced"), "would_start")));
    cr_expect_eq(json_integer_value(json_object_get(
                     json_object_get(json_object_get(json_object_get(a, "enforced"), "resources"),
                                     "bandwidth"),
                     "requested")),
                 10000000);
    cr_expect(json_is_string(json_object_get(json_object_get(root, "host"), "backend")));
    json_decref(root);
}

/* A JSON value holds no null anywhere. */
static bool no_null(const json_t *v)
{
    const char *k;
    json_t *m;
    size_t i;

    if (json_is_null(v))
        return false;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, m) {
            if (!no_null(m))
                return false;
        }
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, m) {
            if (!no_null(m))
                return false;
        }
    }
    return true;
}

/* A fixed EC P-256 public key: callers[].jwt.jwks_file is read and
 * shape-checked at load. */
static const char caller_jwks[] =
    "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\","
    "\"x\":\"OGdHh50DB7vNxyQ2hVfh37JkM8CxAJaNpBb5wVkbJog\","
    "\"y\":\"jMw_Fpl93VfMe_OA0xkzalq6uIzmu0oAG53-YmUrErI\"}]}\n";

/* Callers of each kind: by uid, by gid, by bearer token, by JWT, and the
 * default entry. */
static void callers_sample(char *cpath, size_t cap)
{
    char jpath[128], doc[2048];

    tgh_tmp_put("jwks.json", caller_jwks, jpath, sizeof jpath);
    snprintf(doc, sizeof doc,
             "{\"router\": {\"callers_only\": true},\n"
             " \"callers\": [{\"name\": \"ci-bot\", \"uid\": 1001, \"execution_limits\": "
             "{\"rate_limit\": \"30/minute\", \"burst\": 5}},\n"
             "             {\"name\": \"ops\", \"gid\": 50, \"execution_limits\": "
             "{\"max_concurrent_calls\": 2}},\n"
             "             {\"name\": \"web\", \"tokens\": [\"sha256:%064d\", \"sha256:%064d\"], "
             "\"execution_limits\": {\"rate_limit\": \"10/second\"}},\n"
             "             {\"name\": \"partner\", \"jwt\": {\"issuer\": \"https://idp.example\", "
             "\"audience\": \"toolgate\", \"jwks_file\": \"%s\"}},\n"
             "             {\"name\": \"default\", \"execution_limits\": "
             "{\"max_concurrent_calls\": 1}}],\n"
             " \"agents\": [{\"id\": \"a\", \"command\": [\"/bin/true\"]}]}\n",
             1, 2, jpath);
    tgh_tmp_put("callers.json", doc, cpath, cap);
}

Test(check, json_output_shows_callers_and_their_limits)
{
    char cpath[128];
    json_error_t jerr;
    callers_sample(cpath, sizeof cpath);
    cr_assert_eq(run_check((const char *[]){"--json", "--config", cpath, NULL}), 0, "%s", errout);
    json_t *root = json_loads(out, 0, &jerr);
    cr_assert_not_null(root, "%s: %s", jerr.text, out);
    json_t *callers = json_object_get(root, "callers");
    cr_expect(json_is_true(json_object_get(callers, "callers_only")));
    /* Issue 20 item 9: the same facts as the text, never a bare null. */
    cr_expect(no_null(callers), "a null in callers: %s", out);
    json_t *e = json_object_get(callers, "entries");
    json_t *bot = json_array_get(e, 0), *ops = json_array_get(e, 1), *web = json_array_get(e, 2);
    json_t *partner = json_array_get(e, 3), *def = json_array_get(e, 4);
    cr_assert_not_null(def);
    cr_expect_str_eq(json_string_value(json_object_get(bot, "name")), "ci-bot");
    cr_expect_eq(json_integer_value(json_object_get(bot, "uid")), 1001);
    cr_expect_null(json_object_get(bot, "gid"));
    cr_expect_str_eq(json_string_value(json_object_get(bot, "identified_by")), "uid 1001");
    json_t *bl = json_object_get(bot, "limits");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(bl, "rate_limit"), "text")),
                     "30/minute");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(bl, "rate_limit"), "source")),
                     "caller");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(bl, "burst"), "value")), 5);
    json_t *bc = json_object_get(bl, "max_concurrent_calls");
    cr_expect(json_is_true(json_object_get(bc, "unlimited")));
    cr_expect_str_eq(json_string_value(json_object_get(bc, "text")), "unlimited");
    cr_expect_str_eq(json_string_value(json_object_get(bc, "source")), "unset");
    json_t *ol = json_object_get(ops, "limits");
    cr_expect_eq(json_integer_value(json_object_get(ops, "gid")), 50);
    cr_expect_str_eq(json_string_value(json_object_get(ops, "identified_by")), "gid 50");
    cr_expect(json_is_true(json_object_get(json_object_get(ol, "rate_limit"), "unlimited")));
    cr_expect_eq(
        json_integer_value(json_object_get(json_object_get(ol, "max_concurrent_calls"), "value")), 2);
    /* A token caller: how it is identified, and its burst's default. */
    cr_expect_null(json_object_get(web, "uid"));
    cr_expect_eq(json_integer_value(json_object_get(web, "token_digests")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(web, "identified_by")),
                     "bearer token (2 digests)");
    json_t *wb = json_object_get(json_object_get(web, "limits"), "burst");
    cr_expect_eq(json_integer_value(json_object_get(wb, "value")), 10);
    cr_expect_str_eq(json_string_value(json_object_get(wb, "source")), "default");
    json_t *jwt = json_object_get(partner, "jwt");
    cr_expect_str_eq(json_string_value(json_object_get(jwt, "issuer")), "https://idp.example");
    cr_expect_str_eq(json_string_value(json_object_get(jwt, "claim")), "sub");
    cr_expect_str_eq(json_string_value(json_object_get(jwt, "equals")), "partner");
    cr_expect_str_eq(json_string_value(json_object_get(def, "identified_by")),
                     "any peer no other entry identifies");
    json_decref(root);
}

/* Issue 20 item 9: the text report names how each caller is identified
 * (no "uid -1 gid -1") and says "unlimited" where a limit is unset (no
 * "max_concurrent_calls 0"). */
Test(check, text_output_shows_how_callers_are_identified)
{
    char cpath[128];
    callers_sample(cpath, sizeof cpath);
    cr_assert_eq(run_check((const char *[]){"--config", cpath, NULL}), 0, "%s", errout);
    EXPECT_LINE(out, "callers (limits on top of agent and tool limits; unset: unlimited)");
    EXPECT_LINE(out, "  caller               rate_limit     burst          max_concurrent_calls  "
                     "identified by");
    EXPECT_LINE(out, "  ci-bot               30/minute      5              unlimited             "
                     "uid 1001");
    EXPECT_LINE(out, "  ops                  unlimited      unlimited      2                     "
                     "gid 50");
    EXPECT_LINE(out, "  web                  10/second      10 (default)   unlimited             "
                     "bearer token (2 digests)");
    EXPECT_LINE(out, "  partner              unlimited      unlimited      unlimited             "
                     "JWT from issuer https://idp.example for audience toolgate with sub = "
                     "partner");
    EXPECT_LINE(out, "  default              unlimited      unlimited      1                     "
                     "any peer no other entry identifies");
    EXPECT_LINE(out, "  router.callers_only true: a peer no entry identifies is refused");
    cr_expect_null(strstr(out, "-1"), "a -1 in the report:\n%s", out);
}

Test(check, bad_config_exits_1_with_the_positioned_error)
{
    char cpath[128], want[1024];

    tgh_tmp_put("c.json",
        "{\"agents\": [{\"id\": \"a\", \"command\": [\"x\"],\n  \"resources\": {\"cpu\": "
        "{\"limit\": \"fast\"}}}]}",
        cpath, sizeof cpath);
    cr_expect_eq(run_check((const char *[]){"--config", cpath, NULL}), 1);
    snprintf(want, sizeof want,
             "toolgate check: %s:2:34: agents[0].resources.cpu.limit: \"fast\" is not a CPU "
             "quantity (expected millicores or cores, e.g. 500m, 1 or 0.5 (at most 3 decimals))\n",
             cpath);
    cr_expect_str_eq(errout, want);
    cr_expect_str_eq(out, "");

    /* With --json the error is also a JSON answer on stdout. */
    cr_expect_eq(run_check((const char *[]){"--config", cpath, "--json", NULL}), 1);
    {
        json_t *o = json_loads(out, 0, NULL);
        char msg[512];
        /* The same message without the "toolgate check: " prefix and newline. */
        snprintf(msg, sizeof msg, "%.*s", (int)(strlen(want) - 17), want + 16);
        cr_assert_not_null(o, "%s", out);
        cr_expect(json_is_false(json_object_get(o, "valid")));
        cr_expect_str_eq(json_string_value(json_object_get(o, "error")), msg);
        json_decref(o);
    }
}

Test(check, missing_manifest_names_the_path)
{
    char cpath[128], want[1024];

    tgh_tmp_put("c.json",
        "{\"agents\": [{\"id\": \"a\", \"command\": [\"x\"], \"manifest\": \"gone/m.json\"}]}",
        cpath, sizeof cpath);
    cr_expect_eq(run_check((const char *[]){"--config", cpath, NULL}), 1);
    snprintf(want, sizeof want,
             "toolgate check: %s:1:55: agents[0].manifest: %s/gone/m.json: cannot open: No such "
             "file or directory\n",
             cpath, tgh_tmp);
    cr_expect_str_eq(errout, want);
}

Test(check, exit_codes)
{
    char cpath[128];

    sample(cpath, sizeof cpath);
    cr_expect_eq(run_check((const char *[]){"--config", cpath, "--limit", "pids=0", NULL}), 1);
    cr_expect_str_eq(errout, "toolgate check: --limit pids=0: pids: \"0\" is out of range "
                             "(expected 1 to 4194304)\n");
    cr_expect_eq(run_check((const char *[]){"--config", cpath, "--frobnicate", NULL}), 2);
    cr_expect_str_eq(errout, "toolgate check: unknown argument '--frobnicate' (expected --config, "
                             "--limit, --json or -- CMD)\n");
    cr_expect_eq(run_check((const char *[]){"--config", NULL}), 2);
    cr_expect_str_eq(errout, "toolgate check: --config needs a value\n");
    cr_expect_eq(run_check((const char *[]){"--help", NULL}), 0);
    cr_expect_not_null(strstr(out, "usage: toolgate check"));
    /* No config and no command: the built-in agent has nothing to run. */
    cr_expect_eq(run_check((const char *[]){NULL}), 1);
    cr_expect_str_eq(errout, "toolgate check: agents[0].command: no command (expected \"command\" "
                             "in the config or a command after --)\n");
    /* A command after -- completes it, as in wrap. */
    cr_expect_eq(run_check((const char *[]){"--", "/bin/cat", NULL}), 0, "%s", errout);
    EXPECT_LINE(out, "config (built-in defaults): valid");
    EXPECT_LINE(out, "agent agent (mcp)");
}

Test(check, secrets_are_never_printed)
{
    char cpath[128], bad[sizeof config_text + 64];
    const char *const *runs[] = {
        (const char *[]){"--config", cpath, NULL},
        (const char *[]){"--config", cpath, "--json", NULL},
    };

    sample(cpath, sizeof cpath);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cr_expect_eq(run_check(runs[i]), 0, "%s", errout);
        cr_expect_null(strstr(out, CANARY), "leaked in run %zu", i);
        cr_expect_null(strstr(errout, CANARY), "leaked in run %zu", i);
    }
    /* A config that fails after the secrets were read. */
    snprintf(bad, sizeof bad, "%.*s, \"containment\": {\"mode\": 1}}\n",
             (int)(strrchr(config_text, '}') - config_text), config_text);
    tgh_tmp_put("c.json", bad, cpath, sizeof cpath);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cr_expect_eq(run_check(runs[i]), 1);
        cr_expect_not_null(strstr(errout, "containment.mode: expected a string"), "%s", errout);
        cr_expect_null(strstr(out, CANARY));
        cr_expect_null(strstr(errout, CANARY));
    }
}

/* ---- the prediction on synthetic hosts ---- */

static void caps_writable(tg_contain_caps_t *caps, int h, const char *dirname)
{
    caps->h[h].mounted = caps->h[h].usable = caps->h[h].writable = true;
    caps->h[h].alias = -1;
    snprintf(caps->h[h].own_dir, sizeof caps->h[h].own_dir, "%s", dirname);
}

static void caps_none(tg_contain_caps_t *caps)
{
    memset(caps, 0, sizeof *caps);
    for (int i = 0; i < TG_CG_NHIER; i++) {
        caps->h[i].alias = -1;
        snprintf(caps->h[i].why, sizeof caps->h[i].why, "not mounted");
    }
}

static void expect_item(const tg_enforced_t *e, tg_res_t r, bool applied, uint64_t value,
                        const char *backend, const char *how_or_reason)
{
    const tg_enforced_item_t *it = &e->r[r];

    cr_expect(it->requested, "%s not requested", tg_res_name(r));
    cr_expect_eq(it->applied, applied, "%s", tg_res_name(r));
    if (applied)
        cr_expect_eq(it->applied_value, value, "%s", tg_res_name(r));
    cr_expect_str_eq(it->backend, backend, "%s", tg_res_name(r));
    cr_expect_str_eq(applied ? it->how : it->reason, how_or_reason, "%s", tg_res_name(r));
}

Test(check, plan_without_cgroups_is_rlimits)
{
    tg_contain_caps_t caps;
    tg_contain_req_t req;
    tg_enforced_t e;
    char why[TG_REASON_MAX];

    caps_none(&caps);
    cr_expect_eq(tg_check_backend(&caps, TG_CONTAIN_BEST_EFFORT, why, sizeof why),
                 TG_CONTAIN_RLIMIT);
    cr_expect_str_eq(why, "no writable cgroup hierarchy below toolgate's cgroup");
    tg_contain_req_default(&req);
    req.network_none = true;
    tg_check_plan(&caps, TG_CONTAIN_RLIMIT, TG_CONTAIN_BEST_EFFORT, &req, &e);
    cr_expect_str_eq(e.backend, "rlimit");
    expect_item(&e, TG_RES_MEMORY, true, 512ull << 20, "rlimit",
                "RLIMIT_DATA + process-tree RSS monitor");
    expect_item(&e, TG_RES_CPU, false, 0, "none",
                "no cpu controller; RLIMIT_CPU is total seconds, not a rate");
    expect_item(&e, TG_RES_PIDS, false, 0, "none",
                "no pids controller; RLIMIT_NPROC binds only an agent running as its own "
                "non-root user");
    expect_item(&e, TG_RES_DISK, false, 0, "none",
                "no workspace quota; each file is capped at 1Gi by RLIMIT_FSIZE");
    expect_item(&e, TG_RES_NOFILE, true, 1024, "rlimit", "RLIMIT_NOFILE");
    expect_item(&e, TG_RES_NETWORK, false, 0, "none",
                "network namespaces unavailable (unshare(CLONE_NEWNET) refused)");
    cr_expect_not(e.r[TG_RES_FSIZE].requested);
    /* A dedicated user makes RLIMIT_NPROC a pids limit. */
    req.set_user = true;
    req.uid = 1234;
    caps.netns = true;
    tg_check_plan(&caps, TG_CONTAIN_RLIMIT, TG_CONTAIN_BEST_EFFORT, &req, &e);
    expect_item(&e, TG_RES_PIDS, true, 64, "rlimit",
                "RLIMIT_NPROC (counts every process of the dedicated uid)");
    expect_item(&e, TG_RES_NETWORK, true, 1, "netns", "unshare(CLONE_NEWNET)");
}

Test(check, plan_cgroup2_uses_delegated_controllers)
{
    tg_contain_caps_t caps;
    tg_contain_req_t req;
    tg_enforced_t e;
    char why[TG_REASON_MAX];

    caps_none(&caps);
    caps_writable(&caps, TG_CG_V2, "/sys/fs/cgroup/user.slice");
    caps.v2_memory = caps.v2_pids = true;
    cr_expect_eq(tg_check_backend(&caps, TG_CONTAIN_REQUIRED, why, sizeof why), TG_CONTAIN_CGROUP2);
    cr_expect_str_eq(why, "");
    tg_contain_req_default(&req);
    req.cpu_millicores = 10;
    tg_check_plan(&caps, TG_CONTAIN_CGROUP2, TG_CONTAIN_REQUIRED, &req, &e);
    expect_item(&e, TG_RES_MEMORY, true, 512ull << 20, "cgroup2", "memory.max");
    expect_item(&e, TG_RES_PIDS, true, 64, "cgroup2", "pids.max");
    expect_item(&e, TG_RES_CPU, false, 0, "none",
                "cpu controller not delegated to toolgate's cgroup; RLIMIT_CPU is total seconds, "
                "not a rate");
    caps.v2_cpu = true;
    tg_check_plan(&caps, TG_CONTAIN_CGROUP2, TG_CONTAIN_REQUIRED, &req, &e);
    expect_item(&e, TG_RES_CPU, true, 10, "cgroup2", "cpu.max");
    /* Without any controller cgroup2 still wins over rlimit (kill switch). */
    caps.v2_memory = caps.v2_pids = caps.v2_cpu = false;
    cr_expect_eq(tg_check_backend(&caps, TG_CONTAIN_BEST_EFFORT, why, sizeof why),
                 TG_CONTAIN_CGROUP2);
    tg_check_plan(&caps, TG_CONTAIN_CGROUP2, TG_CONTAIN_BEST_EFFORT, &req, &e);
    expect_item(&e, TG_RES_MEMORY, true, 512ull << 20, "rlimit",
                "RLIMIT_DATA + process-tree RSS monitor");
}

Test(check, plan_cgroup1_per_hierarchy_and_off)
{
    tg_contain_caps_t caps;
    tg_contain_req_t req;
    tg_enforced_t e;
    char why[TG_REASON_MAX];

    caps_none(&caps);
    caps_writable(&caps, TG_CG_MEMORY, "/sys/fs/cgroup/memory");
    caps_writable(&caps, TG_CG_CPU, "/sys/fs/cgroup/cpu");
    caps_writable(&caps, TG_CG_V2, "/sys/fs/cgroup/unified");
    caps.v1_memsw = true;
    cr_expect_eq(tg_check_backend(&caps, TG_CONTAIN_BEST_EFFORT, why, sizeof why),
                 TG_CONTAIN_CGROUP1);
    cr_expect_str_eq(why, "controllers on cgroup v1; the cgroup2 mount adds cgroup.kill");
    tg_contain_req_default(&req);
    req.cpu_millicores = 250;
    tg_check_plan(&caps, TG_CONTAIN_CGROUP1, TG_CONTAIN_BEST_EFFORT, &req, &e);
    expect_item(&e, TG_RES_MEMORY, true, 512ull << 20, "cgroup1",
                "memory.limit_in_bytes, memory.memsw.limit_in_bytes");
    expect_item(&e, TG_RES_CPU, true, 250, "cgroup1", "cpu.cfs_quota_us/cpu.cfs_period_us");
    expect_item(&e, TG_RES_PIDS, false, 0, "none",
                "no writable pids hierarchy: not mounted; RLIMIT_NPROC binds only an agent "
                "running as its own non-root user");

    cr_expect_eq(tg_check_backend(&caps, TG_CONTAIN_OFF, why, sizeof why), TG_CONTAIN_NONE);
    cr_expect_str_eq(why, "containment.mode is off");
    tg_check_plan(&caps, TG_CONTAIN_NONE, TG_CONTAIN_OFF, &req, &e);
    for (int r = 0; r < TG_RES_COUNT; r++)
        if (e.r[r].requested)
            expect_item(&e, (tg_res_t)r, false, 0, "none", "containment.mode is off");
    cr_expect_not(e.r[TG_RES_NOFILE].applied);
}

/* The report of <text> (a config) on a host with <caps>, into <buf>. */
static void report(const char *text, const tg_contain_caps_t *caps, bool json, char *buf,
                   size_t cap)
{
    tg_config_t cfg;
    tg_err_t err;
    char *mem = NULL;
    size_t len = 0;
    FILE *f;

    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "r.json", text, strlen(text), &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_validate(&cfg, &err), 0, "%s", err.msg);
    f = open_memstream(&mem, &len);
    cr_assert_not_null(f);
    cr_expect_eq(tg_check_report(f, &cfg, caps, json, NULL, NULL), 0);
    cr_assert_eq(fclose(f), 0);
    snprintf(buf, cap, "%s", mem);
    free(mem);
    tg_config_free(&cfg);
}

Test(check, report_on_a_host_without_cgroups)
{
    static const char text[] =
        "{\"containment\": {\"mode\": \"required\"}, \"agents\": [{\"id\": \"s\", \"command\": "
        "[\"x\"],"
        " \"resources\": {\"memory\": {\"limit\": \"64Mi\"}, \"network\": \"loopback\"}}]}";
    tg_contain_caps_t caps;
    json_t *root, *enf;

    caps_none(&caps);
    report(text, &caps, false, out, sizeof out);
    EXPECT_LINE(out, "config (built-in defaults): valid");
    EXPECT_LINE(out, "containment.mode required (file)");
    EXPECT_LINE(out,
                "  network                  loopback      file          -             loopback");
    EXPECT_LINE(out, "  enforced on this host (backend rlimit, mode required)");
    EXPECT_LINE(out, "    resource requested  applied backend  how / why not");
    EXPECT_LINE(out,
                "    memory   64Mi       yes     rlimit   RLIMIT_DATA + process-tree RSS monitor");
    EXPECT_LINE(out, "    cpu      1000m      NO      none     no cpu controller; RLIMIT_CPU is "
                     "total seconds, not a rate");
    EXPECT_LINE(out, "    nofile   1024       yes     rlimit   RLIMIT_NOFILE");
    EXPECT_LINE(out, "    network  loopback   NO      none     no backend provides loopback-only "
                     "networking (use \"none\" or \"full\")");
    EXPECT_LINE(out, "  containment.mode required: this agent would not start: cpu is not enforced "
                     "here: no cpu controller; RLIMIT_CPU is total seconds, not a rate");
    EXPECT_LINE(out, "containment: backend rlimit, mode required; no writable cgroup hierarchy "
                     "below toolgate's cgroup");
    EXPECT_LINE(out, "  cgroup2  unavailable: not mounted");
    EXPECT_LINE(out, "  netns    unavailable");

    report(text, &caps, true, out, sizeof out);
    root = json_loads(out, 0, NULL);
    cr_assert_not_null(root, "%s", out);
    enf = json_object_get(json_array_get(json_object_get(root, "agents"), 0), "enforced");
    cr_expect(json_is_false(json_object_get(enf, "would_start")));
    cr_expect_str_eq(json_string_value(json_object_get(enf, "refusal")),
                     "cpu is not enforced here: no cpu controller; RLIMIT_CPU is total seconds, "
                     "not a rate");
    cr_expect_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(enf, "resources"), "network"), "requested")),
        "loopback");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(root, "host"), "backend")),
                     "rlimit");
    cr_expect(json_is_false(json_object_get(json_object_get(root, "host"), "netns")));
    cr_expect(json_is_null(json_object_get(root, "config")));
    json_decref(root);
}

Test(check, report_required_blocks_on_loopback_alone)
{
    static const char text[] =
        "{\"containment\": {\"mode\": \"required\"}, \"agents\": [{\"id\": \"s\", \"command\": "
        "[\"x\"],"
        " \"resources\": {\"network\": \"loopback\", \"disk\": {\"limit\": \"1Mi\"}}}]}";
    tg_contain_caps_t caps;

    /* Everything else enforced: memory, cpu, pids by cgroup2; disk is
     * never (no workspace quota yet), so it is the first refusal. */
    caps_none(&caps);
    caps_writable(&caps, TG_CG_V2, "/sys/fs/cgroup/t");
    caps.v2_memory = caps.v2_cpu = caps.v2_pids = caps.v2_kill = true;
    report(text, &caps, false, out, sizeof out);
    EXPECT_LINE(out, "    memory   512Mi      yes     cgroup2  memory.max");
    EXPECT_LINE(out, "    cpu      1000m      yes     cgroup2  cpu.max");
    EXPECT_LINE(out, "    disk     1Mi        NO      none     no workspace quota; each file is "
                     "capped at 1Mi by RLIMIT_FSIZE");
    EXPECT_LINE(out,
                "  containment.mode required: this agent would not start: disk is not enforced "
                "here: no workspace quota; each file is capped at 1Mi by RLIMIT_FSIZE");
    EXPECT_LINE(
        out, "  cgroup2  /sys/fs/cgroup/t writable, controllers: memory cpu pids, cgroup.kill yes");
}

/* ---- config to containment request ---- */

Test(check, contain_request_from_config)
{
    tg_config_t cfg;
    tg_err_t err;
    tg_contain_req_t req;
    tg_agent_cfg_t *a;

    cr_assert_eq(tg_config_default(&cfg), 0);
    a = &cfg.agents[0];
    cr_expect_eq(tg_config_contain_req(a, &req), 0);
    cr_expect_eq(req.memory_bytes, 512ull << 20);
    cr_expect_eq(req.cpu_millicores, 1000);
    cr_expect_eq(req.pids, 64);
    /* No workspace is requested unless disk is configured; files are still
     * capped at the default disk size. */
    cr_expect_eq(req.disk_bytes, 0);
    cr_expect_eq(req.nofile, 1024);
    cr_expect_eq(req.fsize, 1ull << 30);
    cr_expect_not(req.network_none);
    cr_expect_not(req.set_user);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "memory=64Mi", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "cpu=250m", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "pids=32", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "disk=100Mi", &err), 0);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "network=none", &err), 0);
    cr_expect_eq(tg_config_contain_req(a, &req), 0);
    cr_expect_eq(req.memory_bytes, 64ull << 20);
    cr_expect_eq(req.cpu_millicores, 250);
    cr_expect_eq(req.pids, 32);
    cr_expect_eq(req.disk_bytes, 100ull << 20);
    cr_expect(req.network_none);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "network=loopback", &err), 0);
    cr_expect_eq(tg_config_contain_req(a, &req), -ENOTSUP);
    cr_expect_not(req.network_none);
    cr_expect_eq(tg_config_contain_mode(&cfg), TG_CONTAIN_BEST_EFFORT);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "containment=required", &err), 0);
    cr_expect_eq(tg_config_contain_mode(&cfg), TG_CONTAIN_REQUIRED);
    cr_assert_eq(tg_config_apply_limit(&cfg, 0, "containment=off", &err), 0);
    cr_expect_eq(tg_config_contain_mode(&cfg), TG_CONTAIN_OFF);
    tg_config_free(&cfg);
}

/* Issue 20 item 4: check refuses what wrap and serve refuse, with the same
 * words, because all three run tg_config_validate (an agent's shared rate
 * without a store was refused only when wrap or serve opened the gateway). */
Test(check, shared_rate_without_a_store_is_refused_as_wrap_and_serve_do)
{
    static const char want[] = "agents[0].execution_limits.rate_scope: \"shared\" needs a shared "
                               "store (expected store {\"kind\": \"redis\", \"url\": ...} or "
                               "--store URL)";
    char line[512];
    tg_config_t cfg;
    tg_err_t err;

    cr_expect_eq(
        run_check((const char *[]){"--limit", "rate_scope=shared", "--", "/bin/cat", NULL}), 1,
        "%s", out);
    snprintf(line, sizeof line, "toolgate check: %s\n", want);
    cr_expect_str_eq(errout, line);

    char *wrap[] = {(char *)"--limit", (char *)"rate_scope=shared", (char *)"--",
                    (char *)"/bin/cat", NULL};
    memset(&cfg, 0, sizeof cfg);
    cr_expect_eq(tg_cli_parse_wrap(4, wrap, &cfg, &err), -1);
    cr_expect_str_eq(err.msg, want);
    tg_config_free(&cfg);

    char *serve[] = {(char *)"--http", (char *)"127.0.0.1:1", (char *)"--limit",
                     (char *)"rate_scope=shared", (char *)"--", (char *)"/bin/cat", NULL};
    memset(&cfg, 0, sizeof cfg);
    cr_expect_eq(tg_cli_parse_serve(6, serve, &cfg, &err), -1);
    cr_expect_str_eq(err.msg, want);
    tg_config_free(&cfg);

    /* With a store it is valid (check does not connect to it). */
    char cpath[128];
    tgh_tmp_put("c.json",
                "{\"store\": {\"kind\": \"redis\", \"url\": \"redis://127.0.0.1:1/0\"}, "
                "\"agents\": [{\"id\": \"a\", \"command\": [\"/bin/cat\"]}]}",
                cpath, sizeof cpath);
    cr_expect_eq(
        run_check((const char *[]){"--config", cpath, "--limit", "rate_scope=shared", NULL}), 0,
        "%s", errout);
}

/* Issue 20 item 13: right after `dpkg -i`, README's next step is `toolgate
 * check --config /etc/toolgate/toolgate.json`, whose listener lives in
 * /run/toolgate, which only the service unit makes (RuntimeDirectory=).
 * That directory missing is a note, and the check passes; any other
 * missing listener directory still fails it. */
Test(check, unit_runtime_dir_not_made_yet_is_a_note)
{
    char cpath[128], doc[512];
    struct stat st;

    /* The directory check names is the one the packaged unit makes. */
    char *unit = tgh_read_file(TG_SOURCE_DIR "/deploy/systemd/toolgate.service", NULL);
    cr_assert_not_null(unit);
    cr_expect_not_null(strstr(unit, "\nRuntimeDirectory=toolgate\n"));
    cr_expect_str_eq(TG_CHECK_UNIT_RUNTIME_DIR, "/run/toolgate");
    free(unit);
    char *example = tgh_read_file(TG_SOURCE_DIR "/deploy/examples/serve.json", NULL);
    cr_assert_not_null(example);
    cr_expect_not_null(strstr(example, "\"unix\": \"" TG_CHECK_UNIT_RUNTIME_DIR "/"),
                       "the packaged config's listener is not in the unit's runtime directory");
    free(example);
    if (stat(TG_CHECK_UNIT_RUNTIME_DIR, &st) == 0)
        cr_skip_test(TG_CHECK_UNIT_RUNTIME_DIR " exists on this host: nothing to note");

    snprintf(doc, sizeof doc,
             "{\"router\": {\"listen\": [{\"unix\": \"%s/demo.sock\", \"agent\": \"a\"}]},\n"
             " \"agents\": [{\"id\": \"a\", \"command\": [\"/bin/cat\"]}]}\n",
             TG_CHECK_UNIT_RUNTIME_DIR);
    tgh_tmp_put("unit.json", doc, cpath, sizeof cpath);
    cr_expect_eq(run_check((const char *[]){"--config", cpath, NULL}), 0, "%s", errout);
    EXPECT_LINE(out, "start on this host: nothing in the way (listener directories, commands)");
    EXPECT_LINE(out, "  note: router.listen[0].unix: directory /run/toolgate does not exist yet: "
                     "toolgate.service makes it when it starts toolgate "
                     "(RuntimeDirectory=toolgate); to run toolgate serve outside the unit, make "
                     "it first: install -d -o toolgate -g toolgate -m 0755 /run/toolgate");
    cr_expect_str_eq(errout, "");
    cr_expect_eq(run_check((const char *[]){"--json", "--config", cpath, NULL}), 0, "%s", errout);
    json_t *root = json_loads(out, 0, NULL);
    cr_assert_not_null(root, "%s", out);
    json_t *start = json_object_get(root, "start");
    cr_expect(json_is_true(json_object_get(start, "ok")));
    cr_expect_not_null(strstr(json_string_value(json_array_get(json_object_get(start, "notes"), 0)),
                              "does not exist yet"));
    json_decref(root);

    /* Another missing directory still stops the start. */
    snprintf(doc, sizeof doc,
             "{\"router\": {\"listen\": [{\"unix\": \"%s-absent/demo.sock\", \"agent\": \"a\"}]},\n"
             " \"agents\": [{\"id\": \"a\", \"command\": [\"/bin/cat\"]}]}\n",
             TG_CHECK_UNIT_RUNTIME_DIR);
    tgh_tmp_put("other.json", doc, cpath, sizeof cpath);
    cr_expect_eq(run_check((const char *[]){"--config", cpath, NULL}), 1);
    cr_expect_not_null(strstr(errout, "directory /run/toolgate-absent: No such file or directory"),
                       "%s", errout);
}
