/* A throwaway redis-server for tests: started on a free loopback port (or
 * a unix socket), killed with the test process. Shared by the store and
 * shared-limit tests. Static functions: include once per test file. */
#ifndef TG_TESTS_TG_REDIS_H
#define TG_TESTS_TG_REDIS_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "limits/store.h"
#include "tests/tg_harness.h"

/* ------------------------------------------------------------ redis-server */

typedef struct srv {
    pid_t pid; /* 0: external server (TG_REDIS_URL) */
    int port;  /* 0: unix socket only */
    char dir[64];
    char sock[128];
    char url[512];
    const char *const *extra;
} srv_t;

static inline const char *redis_server_path(void)
{
    return tgh_which("redis-server");
}

/* A plain connection, authenticated and on the db of the store URL. */
static inline redisContext *srv_connect(const srv_t *s)
{
    struct timeval tv = {1, 0};
    tg_store_url_t u;
    tg_err_t err;
    cr_assert_eq(tg_store_url_parse(&u, s->url, &err), 0, "%s", err.msg);
    redisContext *c = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                                : redisConnectWithTimeout(u.host, u.port, tv);
    if (c != NULL && !c->err && u.password[0] != '\0')
        freeReplyObject(u.user[0] ? redisCommand(c, "AUTH %s %s", u.user, u.password)
                                  : redisCommand(c, "AUTH %s", u.password));
    if (c != NULL && !c->err && u.db != 0)
        freeReplyObject(redisCommand(c, "SELECT %u", u.db));
    return c;
}

static inline void srv_spawn(srv_t *s)
{
    const char *bin = redis_server_path();
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    /* "-::1": also on IPv6 loopback when the host has it, so that
     * "localhost" works whichever address it resolves to first. */
    const char *argv[48] = {"redis-server", "--port", port,         "--bind",       "127.0.0.1",
                            "-::1",         "--save", "",           "--appendonly", "no",
                            "--dir",        s->dir,   "--loglevel", "warning"};
    int n = 14;
    if (s->sock[0] != '\0') {
        argv[n++] = "--unixsocket";
        argv[n++] = s->sock;
        argv[n++] = "--unixsocketperm";
        argv[n++] = "700";
    }
    for (int i = 0; s->extra != NULL && s->extra[i] != NULL && n < 46; i++)
        argv[n++] = s->extra[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        /* Dies with the test process, even when an assertion ends it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    /* up when it answers anything (NOAUTH counts) */
    for (int i = 0; i < 500; i++) {
        redisContext *c = srv_connect(s);
        if (c != NULL && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            bool up = r != NULL;
            freeReplyObject(r);
            redisFree(c);
            if (up)
                return;
        } else if (c != NULL) {
            redisFree(c);
        }
        usleep(10000);
    }
    cr_assert_fail("redis-server did not come up on port %d", s->port);
}

/* Get an own redis-server ready to start (srv_spawn): TCP on a free
 * loopback port, or (<unix_only>) a unix socket only, its data in a
 * fresh dir, <extra> arguments after the defaults (a later one wins).
 * Skips the test when redis-server is missing. */
static inline void srv_prepare(srv_t *s, bool unix_only, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    if (redis_server_path() == NULL)
        cr_skip_test("redis-server is not installed (apt-get install redis-server); CI "
                     "installs it");
    snprintf(s->dir, sizeof s->dir, "/tmp/tg-store-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir));
    s->extra = extra;
    if (unix_only) {
        snprintf(s->sock, sizeof s->sock, "%s/r.sock", s->dir);
        s->port = 0;
        snprintf(s->url, sizeof s->url, "unix:%s", s->sock);
    } else {
        s->port = tgh_free_port();
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d/0", s->port);
    }
}

/* srv_prepare, then start it. */
static inline void srv_own(srv_t *s, bool unix_only, const char *const *extra)
{
    srv_prepare(s, unix_only, extra);
    srv_spawn(s);
}

/* TG_REDIS_URL when set, else an own server. */
static inline void srv_any(srv_t *s)
{
    const char *env = getenv("TG_REDIS_URL");
    if (env != NULL && env[0] != '\0') {
        memset(s, 0, sizeof *s);
        snprintf(s->url, sizeof s->url, "%s", env);
        return;
    }
    srv_own(s, false, NULL);
}

static inline void srv_kill(srv_t *s)
{
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = -1;
}

/* Stop an own server if it runs and remove its dir (its data with it). */
static inline void srv_done(srv_t *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
    if (s->dir[0] != '\0')
        tgh_rmtree(s->dir);
    s->dir[0] = '\0';
}

static inline long long srv_int(const srv_t *s, const char *fmt, const char *arg)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    redisReply *r = redisCommand(c, fmt, arg);
    cr_assert_not_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -999;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1)
        v = r->element[0]->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static inline void srv_str(const srv_t *s, const char *fmt, const char *arg, char *buf, size_t cap)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    redisReply *r = redisCommand(c, fmt, arg);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    snprintf(buf, cap, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

static inline void srv_cmd(const srv_t *s, const char *cmd)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    redisReply *r = redisCommand(c, cmd);
    cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR, "%s failed", cmd);
    freeReplyObject(r);
    redisFree(c);
}


#endif
