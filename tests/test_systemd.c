/* Running under systemd (issue 14, part 3): the readiness protocol
 * (router/front/notify.c: READY=1, RELOADING=1 + MONOTONIC_USEC, STOPPING=1
 * on $NOTIFY_SOCKET, a path or an '@' abstract name), socket activation
 * (router/front/listen.c: LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES, fds from 3
 * matched to router.listen[] by Unix path and HTTP address; the sockets
 * come from tests/agents/tg_listen_fds.c, a stand-in for a socket unit),
 * and `systemd-analyze verify` of deploy/systemd/ (skipped without it). */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "router/front/notify.h"
#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_serve_t S;

static void sd_fini(void)
{
    tgh_cleanup();
}

TestSuite(systemd, .fini = sd_fini, .timeout = 60);

/* A datagram socket bound at <name> ('@' abstract, else a path), reads
 * timing out after 10 s. */
static int dgram_at(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    cr_assert_lt(n, sizeof(sa.sun_path));
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] != '@'));
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, len), 0, "bind %s: %s", name, strerror(errno));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* The next datagram on <fd>, NUL-terminated in <buf> ("" on timeout). */
static const char *dgram_next(int fd, char *buf, size_t cap)
{
    ssize_t n = recv(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

Test(systemd, notify_writes_to_a_path_or_an_abstract_name)
{
    char path[TGH_PATH], abs_name[64];
    tgh_tmp_init();
    tgh_tmp_path(path, sizeof(path), "notify.sock");
    snprintf(abs_name, sizeof(abs_name), "@tg-test-notify-%d", (int)getpid());
    const char *names[] = {path, abs_name};
    for (size_t i = 0; i < 2; i++) {
        int fd = dgram_at(names[i]);
        setenv("NOTIFY_SOCKET", names[i], 1);
        cr_assert(tg_notify_init(), "%s not taken", names[i]);
        cr_assert_null(getenv("NOTIFY_SOCKET"), "NOTIFY_SOCKET left for the agents to see");
        cr_assert_eq(tg_notify("READY=1"), 0);
        char buf[256];
        cr_assert_str_eq(dgram_next(fd, buf, sizeof(buf)), "READY=1");
        cr_assert_eq(tg_notify_reloading(), 0);
        dgram_next(fd, buf, sizeof(buf));
        cr_assert_eq(strncmp(buf, "RELOADING=1\nMONOTONIC_USEC=", 27), 0, "got '%s'", buf);
        cr_assert_gt(strtoull(buf + 27, NULL, 10), 0);
        close(fd);
    }
    /* Unset: nothing to do. A relative name is refused, not guessed at. */
    cr_assert_not(tg_notify_init());
    cr_assert_eq(tg_notify("READY=1"), 1);
    setenv("NOTIFY_SOCKET", "relative/notify.sock", 1);
    cr_assert_not(tg_notify_init());
    cr_assert_eq(tg_notify("READY=1"), 1);
}

/* The fixture agent behind a Unix listener at S.sock, plus <more>
 * listen entries (a leading ", {...}"). The agent is offered the
 * variables of the service manager (env.pass): toolgate must have removed
 * them from its environment, so no agent speaks for it or takes its fds. */
static void sd_config(const char *more)
{
    char json[4096];
    int n = snprintf(json, sizeof(json),
                     "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"}%s]},\n"
                     " \"audit\": {\"path\": \"%s\"},\n"
                     " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", "
                     "\"--log\", \"%s\"], \"env\": {\"pass\": [\"NOTIFY_SOCKET\", \"LISTEN_PID\", "
                     "\"LISTEN_FDS\", \"LISTEN_FDNAMES\"]}}]}\n",
                     S.sock, more, S.audit, TG_AGENTS_DIR, S.log);
    cr_assert_lt((size_t)n, sizeof(json));
    cr_assert_eq(tgh_write_file(S.cfg, json), 0);
}

/* Fail unless the agent behind <c> sees none of <names> (NULL-ended). */
static void sd_agent_env_unset(tgh_proc_t *c, const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++) {
        char args[128];
        snprintf(args, sizeof(args), "{\"name\":\"%s\"}", names[i]);
        mcp_call(c, 100 + i, "env", args);
        json_t *r = mcp_await_int(c, 100 + i, 5000, NULL);
        cr_assert_not_null(r);
        const char *t = mcp_text_of(r);
        cr_assert_str_eq(t ? t : "", "(unset)", "the agent sees %s=%s", names[i], t);
        json_decref(r);
    }
}

Test(systemd, serve_reports_ready_reloading_and_stopping)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    sd_config("");
    char name[64], env[80], buf[256];
    snprintf(name, sizeof(name), "@tg-test-serve-%d", (int)getpid());
    snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", name);
    int fd = dgram_at(name);
    char *const envv[] = {env, NULL};
    tgh_serve_start(&S, NULL, envv, 5000);
    cr_assert_str_eq(dgram_next(fd, buf, sizeof(buf)), "READY=1");
    /* Ready means accepting: a caller gets through at once. */
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 5000);
    static const char *const notify_env[] = {"NOTIFY_SOCKET", NULL};
    sd_agent_env_unset(&a, notify_env);
    kill(S.tg.pid, SIGHUP);
    dgram_next(fd, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "RELOADING=1\nMONOTONIC_USEC=", 27), 0, "got '%s'", buf);
    cr_assert_str_eq(dgram_next(fd, buf, sizeof(buf)), "READY=1");
    cr_assert_geq(tgh_log_wait(S.err, "SIGHUP: config reloaded", 1, 5000), 1);
    tgh_conn_close(&a);
    tgh_serve_stop(&S, 10000);
    cr_assert_str_eq(dgram_next(fd, buf, sizeof(buf)), "STOPPING=1");
    close(fd);
}

/* Start `toolgate serve --config S.cfg` under tg_listen_fds with <specs>
 * (NULL-terminated). */
static void sd_start_activated(const char *const *specs)
{
    char *argv[16];
    size_t k = 0;
    static char wrapper[TGH_PATH];
    snprintf(wrapper, sizeof(wrapper), "%s/tg_listen_fds", TG_AGENTS_DIR);
    argv[k++] = wrapper;
    for (size_t i = 0; specs[i] != NULL && k < 10; i++)
        argv[k++] = (char *)specs[i];
    argv[k++] = (char *)"--";
    argv[k++] = (char *)TG_BIN;
    argv[k++] = (char *)"serve";
    argv[k++] = (char *)"--config";
    argv[k++] = S.cfg;
    argv[k] = NULL;
    cr_assert_eq(tgh_spawn(&S.tg, argv, NULL, S.err), 0);
}

/* POST an MCP initialize to 127.0.0.1:<port>/mcp; the response head. */
static void http_initialize(int port, char *head, size_t cap)
{
    static const char body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: application/json, "
                     "text/event-stream\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n\r\n%s",
                     port, sizeof(body) - 1, body);
    int fd = tgh_tcp_dial(port);
    cr_assert_geq(fd, 0, "cannot connect to port %d: %s", port, strerror(-fd));
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t got = 0;
    head[0] = '\0';
    while (got + 1 < cap && strstr(head, "\r\n\r\n") == NULL) {
        ssize_t r = recv(fd, head + got, cap - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        head[got] = '\0';
    }
    close(fd);
}

Test(systemd, serve_takes_the_sockets_it_is_passed)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    int port = tgh_free_port(), spare = tgh_free_port();
    char more[128], unix_spec[TGH_PATH + 48], web[32], extra[32];
    snprintf(more, sizeof(more), ", {\"http\": \"127.0.0.1:%d\", \"agent\": \"fx\"}", port);
    sd_config(more);
    snprintf(unix_spec, sizeof(unix_spec), "unix:%s=mcp", S.sock);
    snprintf(web, sizeof(web), "tcp:%d=web", port);
    snprintf(extra, sizeof(extra), "tcp:%d=extra", spare);
    const char *specs[] = {unix_spec, web, extra, "pipe=junk", NULL};
    sd_start_activated(specs);
    if (tgh_log_wait(S.err, "serving ", 1, 5000) < 1)
        tgh_fail_with_stderr(S.err, "toolgate serve did not start");
    char *log = tgh_read_file(S.err, NULL);
    cr_assert_not_null(strstr(log, "the socket the service manager passed (fd 3, mcp)"), "%s", log);
    cr_assert_not_null(strstr(log, "the socket the service manager passed (fd 4, web)"), "%s", log);
    cr_assert_not_null(strstr(log, "LISTEN_FDS: fd 5 (extra) matches no router.listen entry"), "%s",
                       log);
    cr_assert_not_null(strstr(log, "LISTEN_FDS: fd 6 (junk) is not a listening stream socket"),
                       "%s", log);
    free(log);
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 5000);
    static const char *const listen_env[] = {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", NULL};
    sd_agent_env_unset(&a, listen_env);
    char head[2048];
    http_initialize(port, head, sizeof(head));
    cr_assert_eq(strncmp(head, "HTTP/1.1 200", 12), 0, "got: %s", head);
    /* The unused socket is closed, not kept: nothing accepts there. */
    int fd = tgh_tcp_dial(spare);
    cr_assert_lt(fd, 0, "port %d still accepts after toolgate closed it", spare);
    tgh_conn_close(&a);
    kill(S.tg.pid, SIGTERM);
    cr_assert_eq(tgh_wait(&S.tg, 10000), 0);
    cr_assert_eq(tgh_exit_code(&S.tg), 0);
    /* The socket file is the service manager's: toolgate leaves it. */
    struct stat st;
    cr_assert_eq(lstat(S.sock, &st), 0, "toolgate removed the socket file it was passed");
    cr_assert(S_ISSOCK(st.st_mode));
}

/* What socket activation is for: a caller that connects while toolgate is
 * not running yet (restarting) waits in the backlog and is answered. */
Test(systemd, a_caller_connecting_before_toolgate_runs_is_answered)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    sd_config("");
    char unix_spec[TGH_PATH + 48];
    snprintf(unix_spec, sizeof(unix_spec), "unix:%s=mcp", S.sock);
    const char *specs[] = {"--delay-ms", "1500", unix_spec, NULL};
    sd_start_activated(specs);
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        fd = tgh_unix_dial(S.sock);
        if (fd < 0)
            tgh_sleep_ms(10);
    }
    cr_assert_geq(fd, 0, "the socket at %s never listened", S.sock);
    cr_assert_eq(tgh_log_count(S.err, "serving "), 0,
                 "toolgate was already serving: the test proves nothing");
    tgh_proc_t a;
    memset(&a, 0, sizeof(a));
    a.in_fd = fd;
    a.out_fd = dup(fd);
    mcp_init_ok(&a, 10000);
    tgh_conn_close(&a);
    kill(S.tg.pid, SIGTERM);
    cr_assert_eq(tgh_wait(&S.tg, 10000), 0);
    cr_assert_eq(tgh_exit_code(&S.tg), 0);
}

Test(systemd, sockets_for_another_pid_are_not_taken)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    sd_config("");
    char unix_spec[TGH_PATH + 48];
    snprintf(unix_spec, sizeof(unix_spec), "unix:%s=mcp", S.sock);
    const char *specs[] = {"--no-pid", unix_spec, NULL};
    sd_start_activated(specs);
    /* Not its socket: toolgate binds the path itself and finds it live. */
    cr_assert_eq(tgh_wait(&S.tg, 10000), 0);
    cr_assert_eq(tgh_exit_code(&S.tg), 1);
    char *log = tgh_read_file(S.err, NULL);
    cr_assert_not_null(strstr(log, "is live: another process accepts on it"), "%s", log);
    cr_assert_null(strstr(log, "service manager passed"), "%s", log);
    free(log);
}

Test(systemd, units_pass_systemd_analyze_verify)
{
    const char *sa = tgh_which("systemd-analyze");
    if (sa == NULL)
        cr_skip_test("systemd-analyze is not installed: the units are not verified");
    char dir[TGH_PATH], cmd[4 * TGH_PATH], out[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(out, sizeof(out), "%s/verify.txt", dir);
    /* The units name the installed binary: point them at this build's. */
    snprintf(cmd, sizeof(cmd),
             "for u in toolgate.service toolgate.socket; do sed 's|/usr/bin/toolgate|%s|g' "
             "'%s/deploy/systemd/'$u > '%s/'$u || exit 1; done; cd '%s' && "
             "'%s' verify --man=no ./toolgate.socket ./toolgate.service > '%s' 2>&1",
             TG_BIN, TG_SOURCE_DIR, dir, dir, sa, out);
    int rc = system(cmd);
    char *text = tgh_read_file(out, NULL);
    cr_assert_eq(rc, 0, "systemd-analyze verify failed:\n%s", text ? text : "");
    /* It exits 0 on what it ignores (an unknown key, a bad value): any
     * line at all is a unit to fix. */
    cr_assert(text != NULL && text[0] == '\0', "systemd-analyze verify says:\n%s", text);
    free(text);
}
