/* Examples that run (issue 14, part 7): every config in deploy/examples/
 * passes `toolgate check` as a valid config and, with its host paths moved
 * into a temp dir (listener sockets, audit files, the admin port) and its
 * agent replaced by the fixture agent, is started (serve or wrap) and
 * answers an MCP caller, also through socat as the README shows; and
 * check's start checks: a listener directory that is missing or not
 * writable, an agent command not found on the PATH the agent gets, or not
 * executable, each a clear line and exit 1.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"
#include "tests/tg_sh.h"

#define EXAMPLES_DIR TG_SOURCE_DIR "/deploy/examples"
#define FIXTURE      TG_AGENTS_DIR "/tg_fixture_agent"
#define EXAMPLES_MAX 16

static tgh_serve_t S;
static tgh_wrap_t W;
static tgh_proc_t caller, bridge; /* registered with the harness: must outlive a test body */

TestSuite(examples, .init = tgh_tmp_init, .fini = tgh_cleanup, .timeout = 60);

/* `toolgate check --config <path> <tail>`: exit code, stdout and stderr
 * (caller frees both). */
static int check_with(const char *path, const char *tail, char **out, char **err)
{
    char cmd[TGH_SH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' check --config '%s' %s", TG_BIN, path, tail);
    return tgh_sh(cmd, out, err);
}

static int check(const char *path, char **out, char **err)
{
    return check_with(path, "", out, err);
}

/* The .json files of deploy/examples/, sorted; their number. */
static size_t examples(char names[EXAMPLES_MAX][256])
{
    DIR *d = opendir(EXAMPLES_DIR);
    cr_assert_not_null(d, "cannot open %s", EXAMPLES_DIR);
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0) {
            cr_assert_lt(n, EXAMPLES_MAX);
            snprintf(names[n++], 256, "%s", de->d_name);
        }
    }
    closedir(d);
    qsort(names, n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Set <key> of <obj> to the string <v>. */
static void set_str(json_t *obj, const char *key, const char *v)
{
    cr_assert_eq(json_object_set_new(obj, key, json_string(v)), 0);
}

/* Example <name> with its host paths moved into <dir>: each listener's
 * socket to <dir>/<basename>, audit files to <dir>/audit.jsonl, the admin
 * endpoint to a free port, HTTP listeners to a free port, each agent's
 * command to the fixture agent logging to <dir>/fixture.log. Written to
 * <dir>/<name>; its path in <out>. Whether it has listeners (serve). */
static bool rewrite(const char *name, const char *dir, char *out, size_t cap, char *sock,
                    size_t sock_cap)
{
    char src[512], path[TGH_PATH + 64];
    json_error_t jerr;
    snprintf(src, sizeof src, "%s/%s", EXAMPLES_DIR, name);
    json_t *root = json_load_file(src, 0, &jerr);
    cr_assert_not_null(root, "%s:%d: %s", src, jerr.line, jerr.text);
    json_t *router = json_object_get(root, "router");
    json_t *listen = json_object_get(router, "listen");
    size_t i;
    json_t *v;
    sock[0] = '\0';
    json_array_foreach(listen, i, v)
    {
        const char *unix_path = json_string_value(json_object_get(v, "unix"));
        if (unix_path != NULL) {
            const char *base = strrchr(unix_path, '/');
            snprintf(path, sizeof path, "%s/%s", dir, base ? base + 1 : unix_path);
            set_str(v, "unix", path);
            if (sock[0] == '\0')
                snprintf(sock, sock_cap, "%s", path);
        }
        if (json_object_get(v, "http") != NULL) {
            snprintf(path, sizeof path, "127.0.0.1:%d", tgh_free_port());
            set_str(v, "http", path);
        }
    }
    if (json_object_get(router, "admin") != NULL) {
        snprintf(path, sizeof path, "127.0.0.1:%d", tgh_free_port());
        set_str(router, "admin", path);
    }
    json_t *audit = json_object_get(root, "audit");
    snprintf(path, sizeof path, "%s/audit.jsonl", dir);
    if (json_object_get(audit, "path") != NULL)
        set_str(audit, "path", path);
    json_array_foreach(json_object_get(audit, "sinks"), i, v)
    {
        if (json_object_get(v, "path") != NULL)
            set_str(v, "path", path);
    }
    snprintf(path, sizeof path, "%s/fixture.log", dir);
    json_array_foreach(json_object_get(root, "agents"), i, v)
    {
        if (json_object_get(v, "command") != NULL)
            json_object_set_new(v, "command", json_pack("[s,s,s]", FIXTURE, "--log", path));
    }
    snprintf(out, cap, "%s/%s", dir, name);
    cr_assert_eq(json_dump_file(root, out, JSON_INDENT(2)), 0, "cannot write %s", out);
    bool serve = json_array_size(listen) > 0;
    json_decref(root);
    return serve;
}

/* initialize, then a tools/call of echo, on <c>. */
static void talk(tgh_proc_t *c)
{
    mcp_init_ok(c, 10000);
    cr_assert_eq(mcp_call(c, 7, "echo", "{\"text\":\"example\"}"), 0);
    json_t *r = mcp_expect_int(c, 7, 10000);
    mcp_assert_text(r, "example");
    json_decref(r);
}

Test(examples, every_example_is_checked_valid_and_runs)
{
    char names[EXAMPLES_MAX][256];
    size_t n = examples(names);
    cr_assert_geq(n, 2, "deploy/examples/ has %zu configs", n);
    for (size_t k = 0; k < n; k++) {
        char src[512], *out, *err;
        /* As shipped: a valid config; where its host paths are missing,
         * check says so (exit 1) but never calls the config invalid. */
        snprintf(src, sizeof src, "%s/%s", EXAMPLES_DIR, names[k]);
        /* a wrap config has no command: wrap's comes after -- */
        char *text = tgh_read_file(src, NULL);
        cr_assert_not_null(text);
        const char *tail = strstr(text, "\"command\"") ? "" : "-- '" FIXTURE "'";
        free(text);
        int rc = check_with(src, tail, &out, &err);
        cr_expect(rc == 0 || (rc == 1 && strstr(out, ": valid\n") != NULL),
                  "check %s: exit %d\n%s%s", names[k], rc, out, err);
        free(out);
        free(err);

        /* Bound to a temp dir: check passes and it starts. */
        char path[TGH_PATH + 32], sock[TGH_PATH + 32];
        bool serve = rewrite(names[k], tgh_tmp, path, sizeof path, sock, sizeof sock);
        rc = check_with(path, tail, &out, &err);
        cr_expect_eq(rc, 0, "check %s (moved to %s): exit %d\n%s%s", names[k], tgh_tmp, rc, out,
                     err);
        free(out);
        free(err);
        if (serve) {
            cr_assert_eq(tgh_serve_prepare(&S, "unused"), 0);
            snprintf(S.cfg, sizeof S.cfg, "%s", path);
            snprintf(S.sock, sizeof S.sock, "%s", sock);
            tgh_serve_start(&S, NULL, NULL, 15000);
            mcp_connect(&caller, sock);
            talk(&caller);
            tgh_conn_close(&caller);
            tgh_serve_stop(&S, 15000);
        } else {
            const char *args[] = {"--config", path, NULL};
            cr_assert_eq(tgh_wrap_prepare(&W), 0);
            const char *agent_args[] = {"--log", W.log, NULL};
            cr_assert_eq(tgh_wrap_exec(&W, args, FIXTURE, agent_args, NULL), 0);
            talk(&W.tg);
            tgh_close_stdin(&W.tg);
            cr_assert_eq(tgh_wait(&W.tg, 15000), 0, "wrap did not stop at EOF");
            cr_expect_eq(tgh_exit_code(&W.tg), 0);
        }
    }
}

/* The README's "Connecting an MCP client to a serve socket": the client
 * runs `socat STDIO UNIX-CONNECT:<socket>` as its server command. */
Test(examples, an_mcp_client_reaches_serve_through_socat)
{
    const char *socat = tgh_which("socat");
    if (socat == NULL)
        cr_skip_test("socat is not installed (deploy/install-deps.sh installs it)");
    char path[TGH_PATH + 32], sock[TGH_PATH + 32], target[TGH_PATH + 64];
    bool serve = rewrite("serve.json", tgh_tmp, path, sizeof path, sock, sizeof sock);
    cr_assert(serve, "deploy/examples/serve.json has no listener");
    cr_assert_eq(tgh_serve_prepare(&S, "unused"), 0);
    snprintf(S.cfg, sizeof S.cfg, "%s", path);
    snprintf(S.sock, sizeof S.sock, "%s", sock);
    tgh_serve_start(&S, NULL, NULL, 15000);
    snprintf(target, sizeof target, "UNIX-CONNECT:%s", sock);
    char *const argv[] = {(char *)socat, (char *)"STDIO", target, NULL};
    cr_assert_eq(tgh_spawn(&bridge, argv, NULL, NULL), 0);
    talk(&bridge);
    tgh_close_stdin(&bridge);
    cr_expect_eq(tgh_wait(&bridge, 10000), 0, "socat did not end with its input");
    tgh_serve_stop(&S, 15000);
}

/* A serve config with one listener at <sock> and one agent with
 * <agent_extra> (JSON members, "" none) and command <command> (JSON). */
static void serve_config(char *path, size_t cap, const char *sock, const char *command,
                         const char *agent_extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"a\"}]},\n"
             " \"agents\": [{\"id\": \"a\", \"command\": %s%s}]}\n",
             sock, command, agent_extra);
    tgh_tmp_put("start.json", text, path, cap);
}

Test(examples, check_says_when_a_listener_directory_is_missing)
{
    char path[TGH_PATH + 32], sock[TGH_PATH + 32], cmd[256], *out, *err;
    snprintf(sock, sizeof sock, "%s/missing/t.sock", tgh_tmp);
    snprintf(cmd, sizeof cmd, "[\"%s\"]", FIXTURE);
    serve_config(path, sizeof path, sock, cmd, "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(out, ": valid\n") != NULL, "%s", out);
    cr_expect(
        strstr(out, "\nstart on this host: would fail\n  router.listen[0].unix: directory ") !=
            NULL,
        "%s", out);
    char want[3 * TGH_PATH];
    snprintf(want, sizeof want,
             "toolgate check: router.listen[0].unix: directory %s/missing: No such file or "
             "directory; toolgate does not create it (make it: install -d -m 0755 %s/missing",
             tgh_tmp, tgh_tmp);
    cr_expect(strstr(err, want) != NULL, "%s", err);
    free(out);
    free(err);

    /* a file where the directory should be */
    snprintf(sock, sizeof sock, "%s/start.json/t.sock", tgh_tmp);
    serve_config(path, sizeof path, sock, cmd, "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(err, "start.json is not a directory") != NULL, "%s", err);
    free(out);
    free(err);
}

Test(examples, check_says_when_a_listener_directory_is_not_writable)
{
    if (geteuid() == 0)
        cr_skip_test("root may write any directory: run as another user to cover this");
    char path[TGH_PATH + 32], sock[TGH_PATH + 64], dir[TGH_PATH + 32], cmd[256], *out, *err;
    snprintf(dir, sizeof dir, "%s/ro", tgh_tmp);
    cr_assert_eq(mkdir(dir, 0555), 0);
    snprintf(sock, sizeof sock, "%s/t.sock", dir);
    snprintf(cmd, sizeof cmd, "[\"%s\"]", FIXTURE);
    serve_config(path, sizeof path, sock, cmd, "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(err, "router.listen[0].unix: directory ") != NULL &&
                  strstr(err, "/ro is not writable by uid") != NULL,
              "%s", err);
    free(out);
    free(err);
    chmod(dir, 0755);
}

Test(examples, check_resolves_agent_commands_on_the_agents_path)
{
    char path[TGH_PATH + 32], sock[TGH_PATH + 32], extra[512], *out, *err;
    snprintf(sock, sizeof sock, "%s/t.sock", tgh_tmp);

    /* not on PATH */
    serve_config(path, sizeof path, sock, "[\"tg-no-such-agent\"]", "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(err, "toolgate check: agents[0].command: 'tg-no-such-agent' is not found in "
                          "the default /bin:/usr/bin (env.pass does not pass PATH)") != NULL,
              "%s", err);
    free(out);
    free(err);

    /* found on the PATH env.set gives the agent */
    snprintf(extra, sizeof extra, ", \"env\": {\"set\": {\"PATH\": \"/nonexistent:%s\"}}",
             TG_AGENTS_DIR);
    serve_config(path, sizeof path, sock, "[\"tg_fixture_agent\"]", extra);
    cr_expect_eq(check(path, &out, &err), 0, "%s%s", out, err);
    free(out);
    free(err);

    /* found on toolgate's PATH only when env.pass passes it */
    serve_config(path, sizeof path, sock, "[\"sh\"]", ", \"env\": {\"pass\": [\"PATH\"]}");
    cr_expect_eq(check(path, &out, &err), 0, "%s%s", out, err);
    free(out);
    free(err);

    /* an absolute path that is missing, and a file that is not executable */
    serve_config(path, sizeof path, sock, "[\"/nonexistent/agent\"]", "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(err, "agents[0].command: /nonexistent/agent: No such file or directory") !=
                  NULL,
              "%s", err);
    free(out);
    free(err);
    char plain[TGH_PATH + 32], cmd[TGH_PATH + 40];
    tgh_tmp_put("plain.sh", "#!/bin/sh\n", plain, sizeof plain);
    chmod(plain, 0644);
    snprintf(cmd, sizeof cmd, "[\"%s\"]", plain);
    serve_config(path, sizeof path, sock, cmd, "");
    cr_assert_eq(check(path, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(err, "plain.sh: not an executable file") != NULL, "%s", err);
    free(out);
    free(err);
}

Test(examples, check_json_says_whether_it_would_start)
{
    char path[TGH_PATH + 32], sock[TGH_PATH + 64], cmd[TGH_SH_MAX], *out, *err;
    snprintf(sock, sizeof sock, "%s/t.sock", tgh_tmp);
    serve_config(path, sizeof path, sock, "[\"/nonexistent/agent\"]", "");
    snprintf(cmd, sizeof cmd, "'%s' check --json --config '%s'", TG_BIN, path);
    cr_assert_eq(tgh_sh(cmd, &out, &err), 1, "%s%s", out, err);
    json_error_t jerr;
    json_t *r = json_loads(out, 0, &jerr);
    cr_assert_not_null(r, "not JSON (%s): %s", jerr.text, out);
    cr_expect(json_is_true(json_object_get(r, "valid")));
    json_t *start = json_object_get(r, "start");
    cr_expect(json_is_false(json_object_get(start, "ok")), "%s", out);
    const char *line = json_string_value(json_array_get(json_object_get(start, "problems"), 0));
    cr_expect(line != NULL && strncmp(line, "agents[0].command: /nonexistent/agent: ", 39) == 0,
              "%s", out);
    json_decref(r);
    free(out);
    free(err);

    char fixture[256];
    snprintf(fixture, sizeof fixture, "[\"%s\"]", FIXTURE);
    serve_config(path, sizeof path, sock, fixture, "");
    cr_assert_eq(tgh_sh(cmd, &out, &err), 0, "%s%s", out, err);
    r = json_loads(out, 0, &jerr);
    cr_assert_not_null(r, "not JSON (%s): %s", jerr.text, out);
    start = json_object_get(r, "start");
    cr_expect(json_is_true(json_object_get(start, "ok")), "%s", out);
    cr_expect_eq(json_array_size(json_object_get(start, "problems")), 0);
    json_decref(r);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' check --config '%s'", TG_BIN, path);
    cr_assert_eq(tgh_sh(cmd, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "\nstart on this host: nothing in the way") != NULL, "%s", out);
    free(out);
    free(err);
}

/* Issue 20 item 14: README's package recipe leaves the tree as it was.
 * dpkg-buildpackage builds in obj-<triplet>/ inside the tree; only
 * --post-clean (debian/rules clean after the build) removes it. CI runs
 * the recipe's options for real (deploy/debian/ci-package.sh, which diffs
 * the tree before and after); this holds README, ci-package.sh and
 * .gitignore to them. */
Test(examples, readme_package_recipe_leaves_the_tree_clean)
{
    static const char recipe[] = "cp -r deploy/debian debian && dpkg-buildpackage -us -uc -b "
                                 "--post-clean && rm -rf debian\n";
    char *readme = tgh_read_file(TG_SOURCE_DIR "/README.md", NULL);
    char *ci = tgh_read_file(TG_SOURCE_DIR "/deploy/debian/ci-package.sh", NULL);
    char *ignore = tgh_read_file(TG_SOURCE_DIR "/.gitignore", NULL);
    cr_assert(readme != NULL && ci != NULL && ignore != NULL);
    /* Every dpkg-buildpackage line of the README is the recipe. */
    size_t n = 0;
    for (const char *p = strstr(readme, "dpkg-buildpackage -"); p != NULL;
         p = strstr(p + 1, "dpkg-buildpackage -")) {
        const char *bol = p;
        while (bol > readme && bol[-1] != '\n')
            bol--;
        const char *eol = strchr(p, '\n');
        cr_expect(strncmp(bol, recipe, sizeof recipe - 1) == 0,
                  "README.md builds the package without cleaning up: %.*s", (int)(eol - bol), bol);
        n++;
    }
    cr_expect_geq(n, 1, "README.md has no dpkg-buildpackage recipe");
    cr_expect_not_null(strstr(ci, "dpkg-buildpackage -us -uc -b --post-clean"),
                       "ci-package.sh does not build as README says");
    cr_expect_not_null(strstr(ci, "die \"the package build left files in the tree"),
                       "ci-package.sh does not check the tree after the build");
    cr_expect_not_null(strstr(ignore, "\n/obj-*/\n"), ".gitignore does not list /obj-*/");
    free(readme);
    free(ci);
    free(ignore);
}
