/* The listening sockets of `toolgate serve` (issue 12, items 5 to 7):
 * what already stands at a listen path is refused with a message and
 * status 1, never an abort (a stale socket is replaced); a reload never
 * changes a file that replaced the socket (a planted symlink's target
 * keeps its mode); and the socket file is never wider than its mode, not
 * even between bind and chmod. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <criterion/criterion.h>
#include <dlfcn.h>
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

#include "router/cli/cli.h"
#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_serve_t S;
static tgh_proc_t l_other; /* registered with the harness: must outlive the test body */

static void l_fini(void)
{
    tgh_cleanup();
}

TestSuite(listen, .fini = l_fini, .timeout = 30);

/* Write the config: agent "fx" (the fixture) behind one socket at <sock>
 * with <listen_extra> spliced into its listen entry. */
static void l_config(const char *sock, const char *listen_extra)
{
    tgh_fx_write(&S, &(tgh_fx_t){.sock = sock, .listen_extra = listen_extra});
}

/* Run `toolgate serve` on the written config, expecting it to refuse:
 * exit status 1 (not a signal), and <want> in what it said. Returns what
 * it said (to free). */
static char *l_expect_refused(const char *want)
{
    char *const argv[] = {(char *)TG_BIN, (char *)"serve", (char *)"--config", S.cfg, NULL};
    cr_assert_eq(tgh_write_file(S.err, ""), 0);
    cr_assert_eq(tgh_spawn(&l_other, argv, NULL, S.err), 0);
    cr_assert_eq(tgh_wait(&l_other, 10000), 0, "toolgate serve did not exit");
    char *err = tgh_read_file(S.err, NULL);
    cr_assert(WIFEXITED(l_other.status), "toolgate serve died of signal %d (abort?):\n%s",
              WIFSIGNALED(l_other.status) ? WTERMSIG(l_other.status) : 0, err ? err : "");
    cr_assert_eq(WEXITSTATUS(l_other.status), 1, "exit status %d:\n%s", WEXITSTATUS(l_other.status),
                 err ? err : "");
    cr_assert(err && strstr(err, want), "no '%s' in:\n%s", want, err ? err : "");
    cr_assert(strstr(err, "Assertion") == NULL, "%s", err);
    return err;
}

/* A socket bound at <path> and listening when <listening>, else closed at
 * once (a stale socket file). Returns the fd (-1 when closed). */
static int l_socket_at(const char *path, bool listening)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s: %s", path,
                 strerror(errno));
    if (!listening) {
        close(fd);
        return -1;
    }
    cr_assert_eq(listen(fd, 4), 0);
    return fd;
}

/* ---- item 5: what stands at the path ------------------------------------- */

Test(listen, a_file_a_directory_or_a_symlink_at_the_path_is_refused_with_status_1)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    l_config(S.sock, NULL);

    cr_assert_eq(tgh_write_file(S.sock, "not a socket\n"), 0);
    free(l_expect_refused("exists and is not a socket but a regular file"));
    char *kept = tgh_read_file(S.sock, NULL);
    cr_assert(kept && strcmp(kept, "not a socket\n") == 0, "the file was changed");
    free(kept);
    cr_assert_eq(unlink(S.sock), 0);

    cr_assert_eq(mkdir(S.sock, 0700), 0);
    free(l_expect_refused("exists and is not a socket but a directory"));
    cr_assert_eq(rmdir(S.sock), 0);

    cr_assert_eq(symlink(S.cfg, S.sock), 0);
    free(l_expect_refused("exists and is not a socket but a symbolic link"));
    cr_assert_eq(unlink(S.sock), 0);
}

Test(listen, a_live_socket_is_refused_with_status_1_and_left_serving)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    l_config(S.sock, NULL);
    int fd = l_socket_at(S.sock, true);
    free(l_expect_refused("is live: another process accepts on it"));
    /* Still the other process's, and still answering. */
    int c = tgh_unix_dial(S.sock);
    cr_assert_geq(c, 0, "the live socket was taken from its owner");
    close(c);
    close(fd);
    unlink(S.sock);
}

Test(listen, a_stale_socket_is_replaced)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    l_config(S.sock, NULL);
    l_socket_at(S.sock, false);
    tgh_serve_start(&S, NULL, NULL, 5000);
    tgh_proc_t a;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 5000);
    tgh_conn_close(&a);
    tgh_serve_stop(&S, 10000);
}

Test(listen, a_missing_directory_is_named_not_permission_denied)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    char sock[TGH_PATH + 64], dir[TGH_PATH + 32];
    snprintf(dir, sizeof dir, "%s/no-such-dir", S.dir);
    snprintf(sock, sizeof sock, "%s/fx.sock", dir);
    l_config(sock, NULL);
    char want[TGH_PATH + 64];
    snprintf(want, sizeof want, "the directory %s does not exist", dir);
    char *err = l_expect_refused(want);
    cr_assert(strstr(err, "ermission denied") == NULL, "%s", err);
    free(err);
}

/* ---- item 6: a reload changes only the socket it bound ------------------- */

static void l_hup(int nth)
{
    cr_assert_eq(kill(S.tg.pid, SIGHUP), 0);
    if (tgh_log_wait(S.err, "SIGHUP: config reloaded", nth, 5000) < nth)
        tgh_fail_with_stderr(S.err, "no reload after SIGHUP");
}

static unsigned l_mode(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
    return (unsigned)(st.st_mode & 07777);
}

Test(listen, reload_leaves_a_symlink_planted_at_the_path_and_its_target_alone)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    l_config(S.sock, ", \"mode\": \"0600\"");
    tgh_serve_start(&S, NULL, NULL, 5000);
    cr_assert_eq(l_mode(S.sock), 0600);

    /* Someone with the directory replaces the socket by a symlink to a
     * 0600 file, and the operator widens the mode. */
    char victim[TGH_PATH + 32];
    snprintf(victim, sizeof victim, "%s/victim.txt", S.dir);
    cr_assert_eq(tgh_write_file(victim, "private\n"), 0);
    cr_assert_eq(chmod(victim, 0600), 0);
    cr_assert_eq(unlink(S.sock), 0);
    cr_assert_eq(symlink(victim, S.sock), 0);
    l_config(S.sock, ", \"mode\": \"0666\"");
    l_hup(1);
    cr_assert_eq(l_mode(victim), 0600, "the reload changed the symlink's target to %04o",
                 l_mode(victim));
    cr_assert(tgh_log_count(S.err, "SIGHUP: router.listen: ") >= 1,
              "the reload did not say the socket was replaced");

    /* A plain file in its place is left alone too. */
    cr_assert_eq(unlink(S.sock), 0);
    cr_assert_eq(tgh_write_file(S.sock, "mine\n"), 0);
    cr_assert_eq(chmod(S.sock, 0600), 0);
    l_config(S.sock, ", \"mode\": \"0660\"");
    l_hup(2);
    cr_assert_eq(l_mode(S.sock), 0600, "the reload changed a file that replaced the socket");

    /* Stopping removes only its own socket file: not this one. */
    kill(S.tg.pid, SIGTERM);
    cr_assert_eq(tgh_wait(&S.tg, 10000), 0);
    cr_assert_eq(tgh_exit_code(&S.tg), 0);
    cr_assert_eq(access(S.sock, F_OK), 0, "the stop removed a file that was not its socket");
    cr_assert_eq(access(victim, F_OK), 0);
}

/* ---- item 7: never wider than the mode ------------------------------------ */

/* bind(2) for this test binary: after a bind to <l_bind_watch>, the mode
 * of the file it created, before the caller can do anything else, goes to
 * <l_bind_record>. libuv's bind and toolgate's both come here. */
static const char *l_bind_watch;
static const char *l_bind_record;

int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "bind");
    int rc = real(fd, sa, len);
    if (rc == 0 && l_bind_watch != NULL && sa->sa_family == AF_UNIX &&
        strcmp(((const struct sockaddr_un *)sa)->sun_path, l_bind_watch) == 0) {
        int saved = errno;
        struct stat st;
        char line[32];
        int n = snprintf(line, sizeof line, "%o\n",
                         lstat(l_bind_watch, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 07777u);
        int out = open(l_bind_record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (out >= 0) {
            (void)!write(out, line, (size_t)n);
            close(out);
        }
        errno = saved;
    }
    return rc;
}

/* Run the serve command in a child of this process (so that the bind
 * above is the one it calls) under umask 0, with the listener's mode
 * <mode>; return the file's mode right after bind and at the end of the
 * start. */
static void l_serve_in_process(const char *mode, unsigned *at_bind, unsigned *started)
{
    cr_assert_eq(tgh_serve_prepare(&S, "fx"), 0);
    char extra[64], record[TGH_PATH + 32];
    snprintf(extra, sizeof extra, ", \"mode\": \"%s\"", mode);
    l_config(S.sock, extra);
    snprintf(record, sizeof record, "%s/bind-mode.txt", S.dir);
    l_bind_watch = S.sock;
    l_bind_record = record;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int err = open(S.err, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (err < 0 || dup2(err, 2) < 0)
            _exit(120);
        umask(0);
        char *argv[] = {(char *)"--config", S.cfg, NULL};
        _exit(tg_cli_serve(2, argv));
    }
    l_bind_watch = NULL;
    bool up = tgh_log_wait(S.err, "serving ", 1, 10000) >= 1;
    *started = up ? l_mode(S.sock) : 0;
    kill(pid, SIGTERM);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    if (!up)
        tgh_fail_with_stderr(S.err, "toolgate serve did not start");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve ended with status %#x", st);
    char *rec = tgh_read_file(record, NULL);
    cr_assert_not_null(rec, "bind was not seen");
    *at_bind = (unsigned)strtoul(rec, NULL, 8);
    free(rec);
}

Test(listen, the_socket_is_born_no_wider_than_its_mode)
{
    unsigned at_bind, started;
    l_serve_in_process("0600", &at_bind, &started);
    cr_assert_eq(at_bind & ~0600u, 0u, "the socket file was %04o right after bind (mode 0600)",
                 at_bind);
    cr_assert_eq(started, 0600u);

    l_serve_in_process("0660", &at_bind, &started);
    cr_assert_eq(at_bind & ~0660u, 0u, "the socket file was %04o right after bind (mode 0660)",
                 at_bind);
    cr_assert_eq(started, 0660u);
}
