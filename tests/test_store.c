/* Rate stores: key layout, policies, Redis URLs and redaction, the local
 * store, and the redis store against a real redis-server: the Lua GCRA
 * against tg_gcra on the same call sequences, a flushed script cache, a
 * stalled (SIGSTOP) and a crashed (SIGKILL) Redis under each
 * on_store_error policy, degraded/recovered reported once per transition,
 * AUTH with an ACL user, SELECT, unix sockets, and 1000 pipelined calls.
 *
 * The Redis tests start their own redis-server on a free loopback port
 * (killed with the test: PR_SET_PDEATHSIG), or use TG_REDIS_URL for the
 * tests that do not need to stop or kill the server. Without redis-server
 * they are skipped with the reason; CI installs it, so nothing is skipped
 * there. */
#include "limits/store.h"

#include <criterion/criterion.h>
#include <errno.h>
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

/* ---------------------------------------------------------------- helpers */

static uint64_t g_now_ms;
static uint64_t test_clock(void *arg)
{
    (void)arg;
    return g_now_ms;
}

typedef struct slot {
    bool done;
    int answers;
    tg_store_result_t r;
    uint64_t t0_ns, t1_ns;
} slot_t;

static void slot_cb(void *arg, const tg_store_result_t *r)
{
    slot_t *s = arg;
    s->answers++;
    s->done = true;
    s->r = *r;
    s->t1_ns = uv_hrtime();
}

static void take(tg_store_t *st, const char *key, uint64_t count, uint64_t period_ms,
                 uint32_t burst, slot_t *s)
{
    memset(s, 0, sizeof *s);
    s->t0_ns = uv_hrtime();
    int rc = tg_store_take(st, key, count, period_ms, burst, slot_cb, s);
    cr_assert_eq(rc, 0, "take %s: %d", key, rc);
}

static uint64_t latency_ms(const slot_t *s)
{
    return (s->t1_ns - s->t0_ns) / 1000000;
}

typedef struct events {
    int degraded;
    int recovered;
    char last[2048];
} events_t;

static void on_event(void *arg, tg_store_event_t ev, const char *reason)
{
    events_t *e = arg;
    if (ev == TG_STORE_EV_DEGRADED)
        e->degraded++;
    else if (ev == TG_STORE_EV_RECOVERED)
        e->recovered++;
    snprintf(e->last, sizeof e->last, "%s", reason);
}

static void expect_gcra(tg_gcra_result_t got, tg_gcra_result_t want, const char *what)
{
    cr_assert_eq(got.allowed, want.allowed, "%s: allowed %d, want %d", what, got.allowed,
                 want.allowed);
    cr_assert_eq(got.retry_after_ms, want.retry_after_ms, "%s: retry %llu, want %llu", what,
                 (unsigned long long)got.retry_after_ms, (unsigned long long)want.retry_after_ms);
    cr_assert_eq(got.observed, want.observed, "%s: observed %llu, want %llu", what,
                 (unsigned long long)got.observed, (unsigned long long)want.observed);
    cr_assert_eq(got.cap, want.cap, "%s: cap %llu, want %llu", what, (unsigned long long)got.cap,
                 (unsigned long long)want.cap);
    cr_assert_eq(got.remaining, want.remaining, "%s: remaining %llu, want %llu", what,
                 (unsigned long long)got.remaining, (unsigned long long)want.remaining);
}

static tg_gcra_result_t gr(bool allowed, uint64_t retry, uint64_t observed, uint64_t cap,
                           uint64_t remaining)
{
    return (tg_gcra_result_t){allowed, retry, observed, cap, remaining};
}

/* Run <loop> until <flag> is true or <max_ms> pass (a guard timer keeps
 * UV_RUN_ONCE from blocking). */
static void guard_cb(uv_timer_t *t)
{
    (void)t;
}
static void pump(uv_loop_t *loop, const bool *flag, uint64_t max_ms)
{
    uv_timer_t guard;
    uv_timer_init(loop, &guard);
    uv_timer_start(&guard, guard_cb, 2, 2);
    uv_update_time(loop);
    uint64_t end = uv_now(loop) + max_ms;
    while ((flag == NULL || !*flag) && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}
static void pump_ms(uv_loop_t *loop, uint64_t ms)
{
    pump(loop, NULL, ms);
}

static void set_true(void *arg)
{
    *(bool *)arg = true;
}

/* Close <st>, wait for its callback, and check the loop closes cleanly. */
static void close_store(uv_loop_t *loop, tg_store_t *st)
{
    bool closed = false;
    tg_store_close(st, set_true, &closed);
    pump(loop, &closed, 2000);
    cr_assert(closed, "store close callback did not run");
    uv_run(loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(loop), 0, "handles left open on the loop");
}

/* ------------------------------------------------------ key and policies */

Test(store_key, hash_tag_holds_the_agent)
{
    char k[TG_STORE_KEY_MAX + 1];
    cr_assert_eq(tg_store_key(k, sizeof k, "tg:", "search", "tool:web"), 20);
    cr_assert_str_eq(k, "tg:{search}:tool:web");
    cr_assert_eq(tg_store_key(k, sizeof k, "", "a", "agent"), 9);
    cr_assert_str_eq(k, "{a}:agent");
    cr_assert_eq(tg_store_key(k, sizeof k, "t{g", "search", "x"), -EINVAL);
    cr_assert_eq(tg_store_key(k, sizeof k, "tg}", "search", "x"), -EINVAL);
    cr_assert_eq(tg_store_key(k, sizeof k, "tg:", "", "x"), -EINVAL);
    cr_assert_eq(tg_store_key(k, sizeof k, "tg:", "se}arch", "x"), -EINVAL);
    cr_assert_eq(tg_store_key(k, 8, "tg:", "search", "x"), -ENAMETOOLONG);
    char big[TG_STORE_KEY_MAX + 1];
    memset(big, 'x', TG_STORE_KEY_MAX - 6);
    big[TG_STORE_KEY_MAX - 6] = '\0';
    char kk[2 * TG_STORE_KEY_MAX];
    /* "{a}:" + 506 = 510, "tg:" makes 513 > 512 */
    cr_assert_eq(tg_store_key(kk, sizeof kk, "", "a", big), TG_STORE_KEY_MAX - 2);
    cr_assert_eq(tg_store_key(kk, sizeof kk, "tg:", "a", big), -ENAMETOOLONG);
}

Test(store_policy, names_parse_share_and_results)
{
    tg_store_policy_t p = TG_STORE_POLICY_CLOSED;
    cr_assert_eq(tg_store_policy_parse("local", &p), 0);
    cr_assert_eq(p, TG_STORE_POLICY_LOCAL);
    cr_assert_eq(tg_store_policy_parse("open", &p), 0);
    cr_assert_eq(p, TG_STORE_POLICY_OPEN);
    cr_assert_eq(tg_store_policy_parse("closed", &p), 0);
    cr_assert_eq(p, TG_STORE_POLICY_CLOSED);
    cr_assert_eq(tg_store_policy_parse("Closed", &p), -EINVAL);
    cr_assert_eq(tg_store_policy_parse("", &p), -EINVAL);
    cr_assert_eq(p, TG_STORE_POLICY_CLOSED);
    cr_assert_str_eq(tg_store_policy_name(TG_STORE_POLICY_LOCAL), "local");
    cr_assert_str_eq(tg_store_decider_name(TG_STORE_BY_STORE), "store");
    cr_assert_str_eq(tg_store_decider_name(TG_STORE_BY_LOCAL_FALLBACK), "local_fallback");
    cr_assert_str_eq(tg_store_decider_name(TG_STORE_BY_OPEN), "open");
    cr_assert_str_eq(tg_store_decider_name(TG_STORE_BY_CLOSED), "closed");

    cr_assert_eq(tg_store_share(100, 1), 100);
    cr_assert_eq(tg_store_share(100, 0), 100);
    cr_assert_eq(tg_store_share(100, 3), 33);
    cr_assert_eq(tg_store_share(2, 3), 1);
    cr_assert_eq(tg_store_share(0, 3), 0);

    tg_store_result_t r = tg_store_policy_result(TG_STORE_POLICY_OPEN, -ETIMEDOUT, 5, 3, 77);
    cr_assert_eq(r.decided_by, TG_STORE_BY_OPEN);
    cr_assert_eq(r.status, -ETIMEDOUT);
    expect_gcra(r.gcra, gr(true, 0, 0, 5, 0), "open");
    cr_assert_eq(r.granted, 3, "open grants all that was asked");
    r = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOTCONN, 5, 3, 77);
    cr_assert_eq(r.decided_by, TG_STORE_BY_CLOSED);
    cr_assert_eq(r.status, -ENOTCONN);
    expect_gcra(r.gcra, gr(false, 77, 0, 5, 0), "closed");
    cr_assert_eq(r.granted, 0);
    r = tg_store_policy_result(TG_STORE_POLICY_CLOSED, -ENOTCONN, 5, 1, 0);
    cr_assert_eq(r.gcra.retry_after_ms, 1, "a refusal always gives a positive wait");
}

/* ------------------------------------------------------------------ URLs */

static tg_store_url_t parse_ok(const char *s)
{
    tg_store_url_t u;
    tg_err_t err = {{0}};
    int rc = tg_store_url_parse(&u, s, &err);
    cr_assert_eq(rc, 0, "%s: %s", s, err.msg);
    return u;
}

static void parse_fails(const char *s, const char *msg)
{
    tg_store_url_t u;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_store_url_parse(&u, s, &err), -1, "%s parsed", s);
    cr_assert_str_eq(err.msg, msg);
    cr_assert_null(strstr(err.msg, "hunter2"), "password leaked: %s", err.msg);
    cr_assert_eq(u.password[0], '\0', "password kept after a failed parse");
}

static void redacts_to(const char *s, const char *want)
{
    tg_store_url_t u = parse_ok(s);
    char buf[TG_STORE_URL_MAX];
    size_t n = tg_store_url_redact(&u, buf, sizeof buf);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(n, strlen(want));
}

Test(store_url, tcp_forms)
{
    tg_store_url_t u = parse_ok("redis://127.0.0.1:6380/2");
    cr_assert_not(u.is_unix);
    cr_assert_str_eq(u.host, "127.0.0.1");
    cr_assert_eq(u.port, 6380);
    cr_assert_eq(u.db, 2);
    cr_assert_str_eq(u.user, "");
    cr_assert_str_eq(u.password, "");

    u = parse_ok("redis://redis.internal");
    cr_assert_str_eq(u.host, "redis.internal");
    cr_assert_eq(u.port, 6379);
    cr_assert_eq(u.db, 0);

    u = parse_ok("redis://:hunter2@h:1/");
    cr_assert_str_eq(u.user, "");
    cr_assert_str_eq(u.password, "hunter2");
    cr_assert_eq(u.port, 1);
    cr_assert_eq(u.db, 0);

    u = parse_ok("redis://app:hun%40ter%3A2@[::1]:7000/15");
    cr_assert_str_eq(u.user, "app");
    cr_assert_str_eq(u.password, "hun@ter:2");
    cr_assert_str_eq(u.host, "::1");
    cr_assert_eq(u.port, 7000);
    cr_assert_eq(u.db, 15);

    /* an unencoded '@' in the password: the last '@' ends the credentials */
    u = parse_ok("redis://app:p@ss@10.0.0.5");
    cr_assert_str_eq(u.password, "p@ss");
    cr_assert_str_eq(u.host, "10.0.0.5");
    u = parse_ok("redis://h/2147483647");
    cr_assert_eq(u.db, 2147483647);
}

Test(store_url, unix_forms)
{
    tg_store_url_t u = parse_ok("unix:/run/redis/redis.sock");
    cr_assert(u.is_unix);
    cr_assert_str_eq(u.path, "/run/redis/redis.sock");
    cr_assert_eq(u.db, 0);
    u = parse_ok("unix:/tmp/r.sock?db=3");
    cr_assert_str_eq(u.path, "/tmp/r.sock");
    cr_assert_eq(u.db, 3);
    u = parse_ok("unix:///tmp/r.sock?db=4");
    cr_assert_str_eq(u.path, "/tmp/r.sock");
    cr_assert_eq(u.db, 4);
    cr_assert_str_eq(u.password, "");
    u = parse_ok("unix://bob:hunter2@/tmp/r.sock");
    cr_assert_str_eq(u.user, "bob");
    cr_assert_str_eq(u.password, "hunter2");
    cr_assert_str_eq(u.path, "/tmp/r.sock");
}

Test(store_url, errors_name_the_part_and_never_the_password)
{
    parse_fails("http://h", "store URL 'http://h': expected "
                            "redis://[[user]:password@]host[:port][/db] or unix:/path[?db=N]");
    parse_fails("rediss://:hunter2@h",
                "store URL 'rediss://***@h': TLS (rediss://) is not supported: use a local TLS "
                "tunnel");
    parse_fails("redis://:hunter2@h:0/1", "store URL 'redis://***@h:0/1': port: expected 1..65535");
    parse_fails("redis://:hunter2@h:65536", "store URL 'redis://***@h:65536': port: expected "
                                            "1..65535");
    parse_fails("redis://:hunter2@h:63x9", "store URL 'redis://***@h:63x9': port: expected "
                                           "1..65535");
    parse_fails("redis://:hunter2@h/x", "store URL 'redis://***@h/x': db: expected a database "
                                        "number 0..2147483647");
    parse_fails("redis://h/2147483648", "store URL 'redis://h/2147483648': db: expected a database "
                                        "number 0..2147483647");
    parse_fails("redis://:hunter2@", "store URL 'redis://***@': host: missing");
    parse_fails("redis://:hunter2@h o", "store URL 'redis://***@h o': host: unexpected character "
                                        "' '");
    parse_fails("redis://hunter2@h", "store URL 'redis://***@h': credentials: expected "
                                     "[user]:password@ (a user alone cannot authenticate; "
                                     "percent-encode ':' and '@' in them)");
    parse_fails("redis://app:@h", "store URL 'redis://***@h': credentials: user 'app' has an "
                                  "empty password");
    parse_fails("redis://:hunter2%4@h", "store URL 'redis://***@h': password: bad "
                                        "percent-encoding or longer than 255 bytes");
    parse_fails("redis://:hunter2%00@h", "store URL 'redis://***@h': password: bad "
                                         "percent-encoding or longer than 255 bytes");
    parse_fails("redis://:hunter2@h?password=hunter2",
                "store URL 'redis://***@h?password=***': unexpected '?' (query parameters are not "
                "supported in redis:// URLs)");
    parse_fails("redis://[::1", "store URL 'redis://[::1': host: '[' without ']'");
    parse_fails("redis://[zz]:1", "store URL 'redis://[zz]:1': host: 'zz' is not an IPv6 address");
    parse_fails("unix:relative.sock", "store URL 'unix:relative.sock': path: expected an absolute "
                                      "socket path");
    parse_fails("unix:/tmp/r.sock?password=hunter2",
                "store URL 'unix:/tmp/r.sock?password=***': query: unknown parameter 'password' "
                "(expected db=N)");
    parse_fails("unix:/tmp/r.sock?db=-1", "store URL 'unix:/tmp/r.sock?db=-1': db: expected a "
                                          "database number 0..2147483647");
    parse_fails("unix://bob:hunter2/tmp/r.sock",
                "store URL 'unix://***/tmp/r.sock': expected [user]:password@ before the path");
    /* the '@' forgotten: the "port" is masked */
    parse_fails("redis://bob:hunter2/0", "store URL 'redis://bob:***/0': port: expected 1..65535");
    parse_fails("redis://[::1]:hunter2", "store URL 'redis://[::1]:***': port: expected 1..65535");
    char path[200] = "unix:/";
    memset(path + 6, 'p', 120);
    path[126] = '\0';
    tg_store_url_t u;
    tg_err_t err;
    cr_assert_eq(tg_store_url_parse(&u, path, &err), -1);
    cr_assert(strstr(err.msg, "path: longer than 107 bytes") != NULL, "%s", err.msg);
    char big[TG_STORE_URL_MAX + 20] = "redis://:hunter2@";
    memset(big + 17, 'h', TG_STORE_URL_MAX);
    big[TG_STORE_URL_MAX + 17] = '\0';
    cr_assert_eq(tg_store_url_parse(&u, big, &err), -1);
    cr_assert(strstr(err.msg, "longer than 1024 bytes") != NULL, "%s", err.msg);
    cr_assert_null(strstr(err.msg, "hunter2"));
}

Test(store_url, unix_credentials_needing_quotes_are_not_echoed)
{
    /* The one error above that quotes the raw text is for a missing '@';
     * with an '@' anywhere the credentials are masked. */
    tg_store_url_t u;
    tg_err_t err;
    cr_assert_eq(tg_store_url_parse(&u, "unix://bob:hunter2@relative", &err), -1);
    cr_assert_str_eq(err.msg, "store URL 'unix://***@relative': path: missing (expected "
                              "unix:///path or unix:/path)");
}

Test(store_url, redacted_forms)
{
    redacts_to("redis://127.0.0.1", "redis://127.0.0.1:6379/0");
    redacts_to("redis://:hunter2@h:7000/3", "redis://:***@h:7000/3");
    redacts_to("redis://app:hunter2@[::1]/1", "redis://app:***@[::1]:6379/1");
    redacts_to("unix:/tmp/r.sock", "unix:/tmp/r.sock?db=0");
    redacts_to("unix://bob:hunter2@/tmp/r.sock?db=2", "unix://bob:***@/tmp/r.sock?db=2");

    char buf[64];
    cr_assert_eq(tg_store_url_redact_str("redis://u:hunter2@h:1/0", buf, sizeof buf), 17);
    cr_assert_str_eq(buf, "redis://***@h:1/0");
    tg_store_url_redact_str("u:hun@ter2@h", buf, sizeof buf);
    cr_assert_str_eq(buf, "***@h");
    tg_store_url_redact_str("unix:u:hunter2@/x?password=hunter2&db=1", buf, sizeof buf);
    cr_assert_str_eq(buf, "unix:***@/x?password=***&db=1");
    tg_store_url_redact_str("redis://h:1/0", buf, sizeof buf);
    cr_assert_str_eq(buf, "redis://h:1/0");
    /* truncation keeps the terminator and reports the full length */
    char small[12];
    cr_assert_eq(tg_store_url_redact_str("redis://a:hunter2@host", small, sizeof small), 16);
    cr_assert_str_eq(small, "redis://***");
    tg_store_url_t u = parse_ok("redis://app:hunter2@h");
    cr_assert_eq(tg_store_url_redact(&u, small, sizeof small), 24);
    cr_assert_str_eq(small, "redis://app");
    tg_store_url_wipe(&u);
    cr_assert_str_eq(u.password, "");
}

/* ----------------------------------------------------------- local store */

static tg_store_t *local_open(uint32_t max_keys)
{
    tg_store_opts_t o = {
        .kind = TG_STORE_LOCAL, .clock_ms = test_clock, .local_max_keys = max_keys};
    tg_store_t *st = NULL;
    tg_err_t err;
    cr_assert_eq(tg_store_open(NULL, &o, &st, &err), 0, "%s", err.msg);
    cr_assert_str_eq(tg_store_name(st), "local");
    return st;
}

static void local_close(tg_store_t *st)
{
    bool closed = false;
    tg_store_close(st, set_true, &closed);
    cr_assert(closed, "the local store closes synchronously");
}

Test(store_local, design_vectors_synchronously)
{
    tg_store_t *st = local_open(0);
    slot_t s;
    g_now_ms = 0;
    for (int i = 0; i < 5; i++) {
        take(st, "tg:{a}:r", 5, 1000, 0, &s);
        cr_assert(s.done, "the local store answers before take returns");
        cr_assert_eq(s.answers, 1);
        cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
        cr_assert_eq(s.r.status, 0);
        expect_gcra(s.r.gcra, gr(true, 0, (uint64_t)i + 1, 5, 4 - (uint64_t)i), "first five");
    }
    take(st, "tg:{a}:r", 5, 1000, 0, &s);
    expect_gcra(s.r.gcra, gr(false, 200, 6, 5, 0), "sixth");
    g_now_ms = 200;
    take(st, "tg:{a}:r", 5, 1000, 0, &s);
    expect_gcra(s.r.gcra, gr(true, 0, 5, 5, 0), "t=200");
    take(st, "tg:{a}:r", 5, 1000, 0, &s);
    expect_gcra(s.r.gcra, gr(false, 200, 6, 5, 0), "t=200 again");
    /* another key is another bucket; 10/second burst 1 */
    g_now_ms = 0;
    take(st, "tg:{a}:b1", 10, 1000, 1, &s);
    expect_gcra(s.r.gcra, gr(true, 0, 1, 1, 0), "b1 t=0");
    g_now_ms = 50;
    take(st, "tg:{a}:b1", 10, 1000, 1, &s);
    expect_gcra(s.r.gcra, gr(false, 50, 2, 1, 0), "b1 t=50");
    g_now_ms = 100;
    take(st, "tg:{a}:b1", 10, 1000, 1, &s);
    expect_gcra(s.r.gcra, gr(true, 0, 1, 1, 0), "b1 t=100");
    cr_assert_eq(tg_store_local_size(st), 2);
    local_close(st);
}

static void never_cb(void *arg, const tg_store_result_t *r)
{
    (void)arg;
    (void)r;
    cr_assert_fail("callback ran for a rejected take");
}

Test(store_local, bad_arguments_do_not_call_back)
{
    tg_store_t *st = local_open(0);
    cr_assert_eq(tg_store_take(st, "k", 0, 1000, 0, never_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_take(st, "k", 5, 0, 0, never_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_take(st, "k", 5, 1000, TG_GCRA_MAX_BURST + 1, never_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_take(st, "", 5, 1000, 0, never_cb, NULL), -EINVAL);
    char big[TG_STORE_KEY_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(tg_store_take(st, big, 5, 1000, 0, never_cb, NULL), -EINVAL);
    big[TG_STORE_KEY_MAX] = '\0'; /* exactly the maximum is fine */
    slot_t s;
    take(st, big, 5, 1000, 0, &s);
    cr_assert(s.r.gcra.allowed);
    cr_assert_eq(tg_store_local_size(st), 1);
    local_close(st);

    tg_store_opts_t o = {.kind = TG_STORE_LOCAL, .prefix = "t{g"};
    tg_err_t err;
    cr_assert_eq(tg_store_open(NULL, &o, &st, &err), -1);
    cr_assert_str_eq(err.msg, "store: prefix: expected at most 63 bytes and no braces (they "
                              "would become the Redis Cluster hash tag)");
}

Test(store_local, reloaded_limit_keeps_its_tat)
{
    tg_store_t *st = local_open(0);
    slot_t s;
    g_now_ms = 1000;
    for (int i = 0; i < 5; i++)
        take(st, "k", 5, 1000, 0, &s);
    /* TAT is now 2000 ms. As 10/second (T 100, tau 900): backlog 1000 > 900. */
    take(st, "k", 10, 1000, 0, &s);
    expect_gcra(s.r.gcra, gr(false, 100, 11, 10, 0), "same TAT, new T");
    g_now_ms = 1100;
    take(st, "k", 10, 1000, 0, &s);
    expect_gcra(s.r.gcra, gr(true, 0, 10, 10, 0), "one T later");
    local_close(st);
}

Test(store_local, table_is_bounded_and_swept)
{
    tg_store_t *st = local_open(4);
    slot_t s;
    char key[16];
    g_now_ms = 10000;
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "k%d", i);
        take(st, key, 1, 1000 * ((uint64_t)i + 1), 0, &s); /* expiries 11000, 12000, ... */
        cr_assert(s.r.gcra.allowed);
    }
    cr_assert_eq(tg_store_local_size(st), 4);
    /* full of live buckets: a new key is refused, fail closed */
    take(st, "new", 5, 1000, 0, &s);
    cr_assert_eq(s.r.status, -ENOSPC);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_CLOSED);
    expect_gcra(s.r.gcra, gr(false, 1000, 0, 5, 0), "full");
    /* known keys still work */
    take(st, "k3", 1, 4000, 0, &s);
    expect_gcra(s.r.gcra, gr(false, 4000, 2, 1, 0), "k3 refused by its own bucket");
    /* k0 expires at 11000: the sweep frees exactly it */
    g_now_ms = 11000;
    take(st, "new", 5, 1000, 0, &s);
    cr_assert_eq(s.r.status, 0);
    expect_gcra(s.r.gcra, gr(true, 0, 1, 5, 4), "after sweep");
    cr_assert_eq(tg_store_local_size(st), 4);
    take(st, "newer", 5, 1000, 0, &s);
    cr_assert_eq(s.r.status, -ENOSPC);
    /* a new bucket (expiring 11200) lowers the no-sweep horizon below k1's 12000 */
    g_now_ms = 11200;
    take(st, "newer", 5, 1000, 0, &s);
    cr_assert_eq(s.r.status, 0, "the new bucket's expiry must allow this sweep");
    cr_assert(s.r.gcra.allowed);
    local_close(st);
}

Test(store_local, many_keys_grow_the_table)
{
    tg_store_t *st = local_open(5000);
    slot_t s;
    char key[16];
    g_now_ms = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5000; i++) {
            snprintf(key, sizeof key, "key%d", i);
            take(st, key, 1, 60000, 0, &s);
            cr_assert_eq(s.r.gcra.allowed, round == 0, "%s round %d", key, round);
        }
    }
    cr_assert_eq(tg_store_local_size(st), 5000);
    local_close(st);
}

static void ping_cb(void *arg, int status)
{
    *(int *)arg = status + 1000;
}

Test(store_local, ping_answers_at_once)
{
    tg_store_t *st = local_open(0);
    int got = 0;
    cr_assert_eq(tg_store_ping(st, ping_cb, &got), 0);
    cr_assert_eq(got, 1000);
    tg_store_redis_stats_t stats;
    cr_assert_eq(tg_store_redis_stats(st, &stats), -EINVAL);
    local_close(st);
}

#include "tests/tg_redis.h"

/* A prefix no other run shares, for external servers. */
static const char *run_prefix(void)
{
    static char p[48];
    snprintf(p, sizeof p, "tgt%d.%llu:", (int)getpid(),
             (unsigned long long)(uv_hrtime() % 1000000));
    return p;
}

typedef struct rig {
    uv_loop_t loop;
    srv_t srv;
    tg_store_t *st;
    events_t ev;
    tg_store_opts_t o;
} rig_t;

static void rig_open(rig_t *g)
{
    cr_assert_eq(uv_loop_init(&g->loop), 0);
    g->o.kind = TG_STORE_REDIS;
    g->o.url = g->srv.url;
    if (g->o.prefix == NULL)
        g->o.prefix = run_prefix();
    g->o.on_event = on_event;
    g->o.event_arg = &g->ev;
    tg_err_t err;
    cr_assert_eq(tg_store_open(&g->loop, &g->o, &g->st, &err), 0, "%s", err.msg);
}

/* Take and wait for the answer. */
static void take_wait(rig_t *g, const char *key, uint64_t count, uint64_t period_ms, uint32_t burst,
                      slot_t *s)
{
    take(g->st, key, count, period_ms, burst, s);
    pump(&g->loop, &s->done, 3000);
    cr_assert(s->done, "%s: no answer", key);
    cr_assert_eq(s->answers, 1);
}

static void rig_close(rig_t *g)
{
    close_store(&g->loop, g->st);
    srv_done(&g->srv);
}

/* ---------------------------------------------------- redis: arithmetic */

Test(store_redis, design_vectors_match_local_gcra)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.test_script_clock_ms = test_clock;
    rig_open(&g);
    char key[TG_STORE_KEY_MAX + 1];
    cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "search", "rate"), 0);
    slot_t s[8];
    g_now_ms = 1000000;
    /* all six in one pipeline, before the connection even exists */
    for (int i = 0; i < 6; i++)
        take(g.st, key, 5, 1000, 0, &s[i]);
    for (int i = 0; i < 6; i++)
        cr_assert_not(s[i].done, "a call to Redis is answered from the loop");
    pump(&g.loop, &s[5].done, 3000);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE);
        cr_assert_eq(s[i].r.status, 0);
        expect_gcra(s[i].r.gcra, gr(true, 0, (uint64_t)i + 1, 5, 4 - (uint64_t)i), "first five");
    }
    expect_gcra(s[5].r.gcra, gr(false, 200, 6, 5, 0), "sixth");
    g_now_ms += 200;
    take_wait(&g, key, 5, 1000, 0, &s[6]);
    expect_gcra(s[6].r.gcra, gr(true, 0, 5, 5, 0), "t+200");
    take_wait(&g, key, 5, 1000, 0, &s[7]);
    expect_gcra(s[7].r.gcra, gr(false, 200, 6, 5, 0), "t+200 again");

    cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "search", "b1"), 0);
    g_now_ms = 5000;
    take_wait(&g, key, 10, 1000, 1, &s[0]);
    expect_gcra(s[0].r.gcra, gr(true, 0, 1, 1, 0), "b1 t=0");
    g_now_ms = 5050;
    take_wait(&g, key, 10, 1000, 1, &s[1]);
    expect_gcra(s[1].r.gcra, gr(false, 50, 2, 1, 0), "b1 t=50");
    g_now_ms = 5100;
    take_wait(&g, key, 10, 1000, 1, &s[2]);
    expect_gcra(s[2].r.gcra, gr(true, 0, 1, 1, 0), "b1 t=100");
    cr_assert_eq(g.ev.degraded, 0);
    rig_close(&g);
}

/* The script against tg_gcra_take on random call sequences, over limits
 * whose T is not a whole number of ms or us (7/minute, 3/7s), bursts
 * above and below count, and extremes of the bounds. */
Test(store_redis, script_arithmetic_matches_gcra_on_random_sequences)
{
    static const struct {
        uint64_t count, period_ms;
        uint32_t burst;
    } lim[] = {
        {5, 1000, 0},     {7, 60000, 0},         {10, 1000, 1},      {100, 60000, 0},
        {3, 7000, 10},    {13, 7001, 4},         {1000000, 1000, 0}, {1, 86400000, 1},
        {60, 3600000, 0}, {999983, 3600000, 17},
    };
    enum { NL = sizeof lim / sizeof lim[0], STEPS = 120 };
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.test_script_clock_ms = test_clock;
    g.o.max_pending = NL * STEPS;
    g.o.timeout_ms = 5000;
    rig_open(&g);
    static slot_t s[NL][STEPS];
    static tg_gcra_result_t want[NL][STEPS];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t l = 0; l < NL; l++) {
        tg_gcra_t ref;
        cr_assert_eq(tg_gcra_init(&ref, lim[l].count, lim[l].period_ms, lim[l].burst), 0);
        char key[TG_STORE_KEY_MAX + 1];
        char name[16];
        snprintf(name, sizeof name, "l%zu", l);
        cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "prop", name), 0);
        uint64_t now = 1700000000000ull;
        uint64_t t_ms = ref.t_us / 1000 + 1;
        for (int i = 0; i < STEPS; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = seed >> 33;
            /* mostly bursts and near-T steps, sometimes long idle gaps */
            switch (r % 6) {
            case 0:
            case 1:
                break;
            case 2:
                now += r % 3;
                break;
            case 3:
                now += t_ms / 2 + r % (t_ms + 1);
                break;
            case 4:
                now += t_ms;
                break;
            default:
                now += r % (lim[l].period_ms * 2 + 1);
                break;
            }
            g_now_ms = now;
            want[l][i] = tg_gcra_take(&ref, now);
            take(g.st, key, lim[l].count, lim[l].period_ms, lim[l].burst, &s[l][i]);
        }
    }
    pump(&g.loop, &s[NL - 1][STEPS - 1].done, 10000);
    int refused = 0;
    for (size_t l = 0; l < NL; l++) {
        for (int i = 0; i < STEPS; i++) {
            char what[64];
            snprintf(what, sizeof what, "limit %zu step %d", l, i);
            cr_assert(s[l][i].done, "%s: no answer", what);
            cr_assert_eq(s[l][i].r.decided_by, TG_STORE_BY_STORE, "%s", what);
            expect_gcra(s[l][i].r.gcra, want[l][i], what);
            refused += !want[l][i].allowed;
        }
    }
    /* the sequences exercise both branches */
    cr_assert_gt(refused, 100);
    cr_assert_lt(refused, NL * STEPS - 100);
    rig_close(&g);
}

Test(store_redis, server_time_key_layout_and_ttl)
{
    rig_t g = {0};
    srv_any(&g.srv);
    rig_open(&g);
    char key[TG_STORE_KEY_MAX + 1];
    cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "search", "tool:web"), 0);
    cr_assert(strstr(key, "{search}:tool:web") != NULL);
    slot_t s[6];
    for (int i = 0; i < 6; i++)
        take(g.st, key, 5, 1000, 0, &s[i]);
    pump(&g.loop, &s[5].done, 3000);
    for (int i = 0; i < 5; i++) {
        cr_assert(s[i].r.gcra.allowed, "call %d", i);
        cr_assert_eq(s[i].r.gcra.remaining, 4 - (uint64_t)i);
    }
    cr_assert_not(s[5].r.gcra.allowed);
    cr_assert_eq(s[5].r.gcra.observed, 6);
    /* the server clock moved by a few us between the calls */
    cr_assert(s[5].r.gcra.retry_after_ms >= 150 && s[5].r.gcra.retry_after_ms <= 200, "retry %llu",
              (unsigned long long)s[5].r.gcra.retry_after_ms);
    /* the key holds TAT and expires when TAT passes: within tau + T */
    long long pttl = srv_int(&g.srv, "PTTL %s", key);
    cr_assert(pttl > 800 && pttl <= 1000, "pttl %lld", pttl);
    /* a refusal does not write */
    char before[64], after[64];
    srv_str(&g.srv, "GET %s", key, before, sizeof before);
    slot_t r;
    take_wait(&g, key, 5, 1000, 0, &r);
    cr_assert_not(r.r.gcra.allowed);
    srv_str(&g.srv, "GET %s", key, after, sizeof after);
    cr_assert_str_eq(before, after);
    cr_assert_eq(g.ev.degraded, 0);
    rig_close(&g);
}

/* ------------------------------------------------ redis: script cache, pipeline */

/* "<field>" of INFO <section> as a number, -1 when absent. */
static long long srv_info(const srv_t *s, const char *section, const char *field)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "INFO %s", section);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    long long v = -1;
    const char *p = strstr(r->str, field);
    if (p != NULL)
        v = strtoll(p + strlen(field), NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

Test(store_redis, flushed_script_cache_is_recovered_with_eval)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    g.o.test_script_clock_ms = test_clock;
    rig_open(&g);
    g_now_ms = 50000;
    slot_t s[13];
    for (int i = 0; i < 3; i++)
        take_wait(&g, "tg:{a}:flush", 10, 1000, 0, &s[i]);
    /* GCRA and slots, both loaded at set-up */
    cr_assert_eq(srv_info(&g.srv, "memory", "number_of_cached_scripts:"), 2);
    srv_cmd(&g.srv, "SCRIPT FLUSH");
    srv_cmd(&g.srv, "CONFIG RESETSTAT");
    cr_assert_eq(srv_info(&g.srv, "memory", "number_of_cached_scripts:"), 0);
    /* seven pipelined EVALSHAs all meet NOSCRIPT and are re-sent as EVAL */
    for (int i = 3; i < 10; i++)
        take(g.st, "tg:{a}:flush", 10, 1000, 0, &s[i]);
    pump(&g.loop, &s[9].done, 3000);
    tg_store_redis_stats_t st;
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.noscript, 7);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(s[i].answers, 1, "call %d", i);
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE, "call %d", i);
        cr_assert_eq(s[i].r.status, 0, "call %d", i);
        expect_gcra(s[i].r.gcra, gr(true, 0, (uint64_t)i + 1, 10, 9 - (uint64_t)i), "admitted");
    }
    cr_assert_eq(srv_info(&g.srv, "commandstats", "cmdstat_eval:calls="), 7);
    cr_assert_eq(srv_info(&g.srv, "memory", "number_of_cached_scripts:"), 2, "both reloaded");
    /* and EVALSHA works again */
    take_wait(&g, "tg:{a}:flush", 10, 1000, 0, &s[10]);
    expect_gcra(s[10].r.gcra, gr(false, 100, 11, 10, 0), "eleventh");
    cr_assert_eq(srv_info(&g.srv, "commandstats", "cmdstat_eval:calls="), 7);
    cr_assert_eq(g.ev.degraded, 0, "a flushed cache is not an outage");
    rig_close(&g);
}

Test(store_redis, thousand_calls_pipelined_on_one_connection)
{
    enum { N = 1000 };
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    g.o.timeout_ms = 3000; /* this test is about answers, not latency (ASan) */
    rig_open(&g);
    static slot_t s[N];
    for (int i = 0; i < N; i++)
        take(g.st, "tg:{a}:pipe", 300, 60000, 0, &s[i]);
    for (int i = 0; i < N; i++)
        cr_assert_not(s[i].done, "call %d answered before the loop ran", i);
    pump(&g.loop, &s[N - 1].done, 5000);
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(s[i].answers, 1, "call %d", i);
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE, "call %d", i);
        allowed += s[i].r.gcra.allowed;
        /* in order: the first 300 pass, all later ones are refused */
        cr_assert_eq(s[i].r.gcra.allowed, i < 300, "call %d", i);
    }
    cr_assert_eq(allowed, 300);
    /* one connection carried them all (the other one is the probe asking) */
    cr_assert_eq(srv_info(&g.srv, "clients", "connected_clients:"), 2);
    rig_close(&g);
}

Test(store_redis, ping)
{
    rig_t g = {0};
    srv_any(&g.srv);
    rig_open(&g);
    int got = 0;
    cr_assert_eq(tg_store_ping(g.st, ping_cb, &got), 0);
    cr_assert_eq(got, 0, "a ping to Redis is answered from the loop");
    for (int i = 0; i < 300 && got == 0; i++)
        pump_ms(&g.loop, 10);
    cr_assert_eq(got, 1000);
    rig_close(&g);
}

/* ---------------------------------------------- redis: failures and policy */

static void wait_events(rig_t *g, int degraded, int recovered, uint64_t max_ms)
{
    for (uint64_t t = 0; t < max_ms; t += 10) {
        if (g->ev.degraded >= degraded && g->ev.recovered >= recovered)
            break;
        pump_ms(&g->loop, 10);
    }
    cr_assert_eq(g->ev.degraded, degraded, "degraded events (last: %s)", g->ev.last);
    cr_assert_eq(g->ev.recovered, recovered, "recovered events (last: %s)", g->ev.last);
}

static void fast_failover(rig_t *g, tg_store_policy_t pol)
{
    g->o.on_store_error = pol;
    g->o.instances = 2;
    g->o.clock_ms = test_clock;
    g->o.timeout_ms = 50;
    g->o.connect_timeout_ms = 300;
    g->o.dead_after_ms = 300;
    g->o.backoff_initial_ms = 50;
    g->o.backoff_max_ms = 200;
}

/* One outage call under <pol>: call <i> of a 4/second limit shared by 2
 * instances, made at a fixed local clock. */
static void expect_policy(const slot_t *s, tg_store_policy_t pol, int i)
{
    switch (pol) {
    case TG_STORE_POLICY_LOCAL:
        cr_assert_eq(s->r.decided_by, TG_STORE_BY_LOCAL_FALLBACK, "call %d", i);
        /* this instance's share: 2/second (T 500, tau 500) */
        if (i < 2)
            expect_gcra(s->r.gcra, gr(true, 0, (uint64_t)i + 1, 2, 1 - (uint64_t)i), "share");
        else
            expect_gcra(s->r.gcra, gr(false, 500, 3, 2, 0), "share spent");
        break;
    case TG_STORE_POLICY_OPEN:
        cr_assert_eq(s->r.decided_by, TG_STORE_BY_OPEN, "call %d", i);
        expect_gcra(s->r.gcra, gr(true, 0, 0, 4, 0), "open");
        break;
    case TG_STORE_POLICY_CLOSED:
        cr_assert_eq(s->r.decided_by, TG_STORE_BY_CLOSED, "call %d", i);
        cr_assert_not(s->r.gcra.allowed, "call %d", i);
        cr_assert_gt(s->r.gcra.retry_after_ms, 0, "call %d", i);
        cr_assert_eq(s->r.gcra.cap, 4);
        break;
    }
}

/* SIGSTOP: Redis accepts bytes and never answers. Every call returns
 * within the timeout plus scheduling slack, decided by the policy; the
 * connection is given up and re-made meanwhile; one degraded event; on
 * SIGCONT one recovered event and calls go back to Redis. */
static void stall_case(tg_store_policy_t pol)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    fast_failover(&g, pol);
    rig_open(&g);
    g_now_ms = 100000;
    slot_t s;
    take_wait(&g, "tg:{a}:warm", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    kill(g.srv.pid, SIGSTOP);
    slot_t out[10];
    for (int i = 0; i < 10; i++) {
        take(g.st, "tg:{a}:x", 4, 1000, 0, &out[i]);
        pump(&g.loop, &out[i].done, 1000);
        cr_assert(out[i].done, "call %d hangs", i);
        cr_assert_eq(out[i].answers, 1);
        cr_assert_leq(latency_ms(&out[i]), 50 + 40, "call %d took %llu ms", i,
                      (unsigned long long)latency_ms(&out[i]));
        if (i == 0)
            cr_assert_eq(out[i].r.status, -ETIMEDOUT);
        else
            cr_assert(out[i].r.status == -ETIMEDOUT || out[i].r.status == -ENOTCONN,
                      "call %d: status %d", i, out[i].r.status);
        expect_policy(&out[i], pol, i);
        pump_ms(&g.loop, 60);
    }
    /* ~1 s of outage: stalled, dropped, reconnects that never set up */
    cr_assert_eq(g.ev.degraded, 1, "degraded once, not per failure");
    cr_assert_eq(g.ev.recovered, 0);
    char want[128];
    snprintf(want, sizeof want, "redis://127.0.0.1:%d/0: no reply within 50 ms", g.srv.port);
    cr_assert_str_eq(g.ev.last, want);
    kill(g.srv.pid, SIGCONT);
    wait_events(&g, 1, 1, 5000);
    snprintf(want, sizeof want, "redis://127.0.0.1:%d/0: answering again", g.srv.port);
    cr_assert_str_eq(g.ev.last, want);
    take_wait(&g, "tg:{a}:x", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    cr_assert_eq(s.r.status, 0);
    cr_assert_eq(g.ev.degraded, 1);
    cr_assert_eq(g.ev.recovered, 1);
    tg_store_redis_stats_t st;
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.timeouts, 1, "only the first call waited for Redis");
    cr_assert_eq(st.by_policy, 10);
    cr_assert_geq(st.connects, 2, "the stalled connection was given up and re-made");
    cr_assert_eq(st.sessions, 2, "set up twice: at start, and after SIGCONT");
    cr_assert_eq(st.degraded, 1);
    rig_close(&g);
}

Test(store_redis, stalled_redis_policy_local)
{
    stall_case(TG_STORE_POLICY_LOCAL);
}
Test(store_redis, stalled_redis_policy_open)
{
    stall_case(TG_STORE_POLICY_OPEN);
}
Test(store_redis, stalled_redis_policy_closed)
{
    stall_case(TG_STORE_POLICY_CLOSED);
}

/* SIGKILL: the connection drops, reconnects are refused until a new
 * server is up on the same port, then admission is exact again. */
static void crash_case(tg_store_policy_t pol)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    fast_failover(&g, pol);
    rig_open(&g);
    g_now_ms = 100000;
    slot_t s;
    take_wait(&g, "tg:{a}:warm", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    srv_kill(&g.srv);
    wait_events(&g, 1, 0, 1000);
    char want[160];
    snprintf(want, sizeof want, "redis://127.0.0.1:%d/0: Server closed the connection", g.srv.port);
    cr_assert_str_eq(g.ev.last, want);
    slot_t out[6];
    for (int i = 0; i < 6; i++) {
        take(g.st, "tg:{a}:x", 4, 1000, 0, &out[i]);
        cr_assert(out[i].done, "call %d: with no connection the policy answers at once", i);
        cr_assert_eq(out[i].r.status, -ENOTCONN, "call %d", i);
        expect_policy(&out[i], pol, i);
        pump_ms(&g.loop, 60);
    }
    cr_assert_eq(g.ev.degraded, 1, "refused reconnects are not new events");
    srv_spawn(&g.srv);
    wait_events(&g, 1, 1, 5000);
    /* exact again, on the new server's clock */
    slot_t e[6];
    for (int i = 0; i < 6; i++)
        take(g.st, "tg:{a}:again", 5, 1000, 0, &e[i]);
    pump(&g.loop, &e[5].done, 3000);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(e[i].r.decided_by, TG_STORE_BY_STORE, "call %d", i);
        cr_assert_eq(e[i].r.gcra.allowed, i < 5, "call %d", i);
    }
    /* a second outage is a second transition */
    srv_kill(&g.srv);
    wait_events(&g, 2, 1, 1000);
    rig_close(&g);
}

Test(store_redis, crashed_redis_policy_local)
{
    crash_case(TG_STORE_POLICY_LOCAL);
}
Test(store_redis, crashed_redis_policy_open)
{
    crash_case(TG_STORE_POLICY_OPEN);
}
Test(store_redis, crashed_redis_policy_closed)
{
    crash_case(TG_STORE_POLICY_CLOSED);
}

Test(store_redis, unreachable_at_start_never_waits)
{
    rig_t g = {0};
    snprintf(g.srv.url, sizeof g.srv.url, "redis://127.0.0.1:%d/0", pick_port());
    fast_failover(&g, TG_STORE_POLICY_CLOSED);
    rig_open(&g);
    slot_t s;
    take(g.st, "tg:{a}:x", 4, 1000, 0, &s);
    pump(&g.loop, &s.done, 1000);
    cr_assert(s.done);
    cr_assert_leq(latency_ms(&s), 60);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_CLOSED);
    cr_assert(s.r.status == -ENOTCONN || s.r.status == -ECONNRESET, "status %d", s.r.status);
    pump_ms(&g.loop, 400);
    cr_assert_eq(g.ev.degraded, 1);
    cr_assert_eq(g.ev.recovered, 0);
    char want[600];
    snprintf(want, sizeof want, "%s: Connection refused", g.srv.url);
    cr_assert_str_eq(g.ev.last, want);
    take(g.st, "tg:{a}:x", 4, 1000, 0, &s);
    cr_assert(s.done, "degraded: decided at once");
    cr_assert_eq(s.r.status, -ENOTCONN);
    /* the closed hint points at the next reconnect attempt */
    cr_assert(s.r.gcra.retry_after_ms >= 1 && s.r.gcra.retry_after_ms <= 200, "retry %llu",
              (unsigned long long)s.r.gcra.retry_after_ms);
    int got = 0;
    cr_assert_eq(tg_store_ping(g.st, ping_cb, &got), 0);
    cr_assert(got == 1000 - ENOTCONN || got == 1000 - ETIMEDOUT, "ping %d", got - 1000);
    close_store(&g.loop, g.st);
}

Test(store_redis, host_names_resolve_off_the_loop)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    snprintf(g.srv.url, sizeof g.srv.url, "redis://localhost:%d", g.srv.port);
    rig_open(&g);
    char want[600];
    snprintf(want, sizeof want, "%s/0", g.srv.url);
    cr_assert_str_eq(tg_store_name(g.st), want);
    pump_ms(&g.loop, 300);
    slot_t s;
    take_wait(&g, "tg:{a}:x", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    cr_assert_eq(s.r.status, 0);
    rig_close(&g);
}

Test(store_redis, acl_user_auth_and_select)
{
    static const char *const acl[] = {"--user", "alice",  "on",      ">alicepw", "~*", "&*",
                                      "+@all",  "--user", "default", "off",      NULL};
    rig_t g = {0};
    srv_own(&g.srv, false, acl);
    snprintf(g.srv.url, sizeof g.srv.url, "redis://alice:alicepw@127.0.0.1:%d/3", g.srv.port);
    rig_open(&g);
    char want[128];
    snprintf(want, sizeof want, "redis://alice:***@127.0.0.1:%d/3", g.srv.port);
    cr_assert_str_eq(tg_store_name(g.st), want);
    slot_t s;
    take_wait(&g, "tg:{a}:acl", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    cr_assert_eq(srv_int(&g.srv, "EXISTS %s", "tg:{a}:acl"), 1, "the key is in db 3");
    close_store(&g.loop, g.st);

    /* a wrong password: degraded, the reason redacted */
    rig_t b = {0};
    b.srv = g.srv;
    snprintf(b.srv.url, sizeof b.srv.url, "redis://alice:WRONGpw@127.0.0.1:%d/3", g.srv.port);
    b.o.on_store_error = TG_STORE_POLICY_CLOSED;
    rig_open(&b);
    take(b.st, "tg:{a}:acl", 4, 1000, 0, &s);
    pump(&b.loop, &s.done, 1000);
    cr_assert(s.done);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_CLOSED);
    cr_assert_eq(b.ev.degraded, 1);
    snprintf(want, sizeof want,
             "redis://alice:***@127.0.0.1:%d/3: AUTH failed: WRONGPASS invalid "
             "username-password pair or user is disabled.",
             g.srv.port);
    cr_assert_str_eq(b.ev.last, want);
    cr_assert_null(strstr(tg_store_name(b.st), "WRONGpw"));
    close_store(&b.loop, b.st);
    srv_done(&g.srv);
}

Test(store_redis, unix_socket_and_db_query)
{
    rig_t g = {0};
    srv_own(&g.srv, true, NULL);
    snprintf(g.srv.url, sizeof g.srv.url, "unix:%s?db=2", g.srv.sock);
    rig_open(&g);
    slot_t s;
    take_wait(&g, "tg:{a}:ux", 4, 1000, 0, &s);
    cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
    cr_assert_eq(s.r.status, 0);
    cr_assert_eq(srv_int(&g.srv, "EXISTS %s", "tg:{a}:ux"), 1, "the key is in db 2");
    rig_close(&g);
}

Test(store_redis, close_answers_calls_in_flight)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    g.o.on_store_error = TG_STORE_POLICY_OPEN;
    rig_open(&g);
    slot_t s;
    take_wait(&g, "tg:{a}:w", 4, 1000, 0, &s);
    kill(g.srv.pid, SIGSTOP);
    slot_t out[3];
    for (int i = 0; i < 3; i++)
        take(g.st, "tg:{a}:w", 4, 1000, 0, &out[i]);
    pump_ms(&g.loop, 5); /* written, unanswered */
    bool closed = false;
    tg_store_close(g.st, set_true, &closed);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(out[i].answers, 1, "call %d answered by close", i);
        cr_assert_eq(out[i].r.status, -ECANCELED);
        cr_assert_eq(out[i].r.decided_by, TG_STORE_BY_OPEN);
    }
    cr_assert_not(closed, "memory goes after the handles close");
    pump(&g.loop, &closed, 1000);
    cr_assert(closed);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&g.loop), 0);
    kill(g.srv.pid, SIGCONT);
    srv_done(&g.srv);
}

Test(store_redis, in_flight_calls_are_bounded)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.max_pending = 4;
    g.o.on_store_error = TG_STORE_POLICY_OPEN;
    rig_open(&g);
    slot_t s[6];
    for (int i = 0; i < 6; i++)
        take(g.st, "tg:{a}:bound", 100, 1000, 0, &s[i]);
    for (int i = 4; i < 6; i++) {
        cr_assert(s[i].done, "over the bound: answered at once");
        cr_assert_eq(s[i].r.status, -ENOBUFS);
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_OPEN);
    }
    pump(&g.loop, &s[3].done, 3000);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE, "call %d", i);
    /* the pool is reused */
    for (int i = 0; i < 4; i++)
        take(g.st, "tg:{a}:bound", 100, 1000, 0, &s[i]);
    pump(&g.loop, &s[3].done, 3000);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE, "call %d", i);
    cr_assert_eq(g.ev.degraded, 0);
    rig_close(&g);
}

/* ------------------------------------------------------ take of n tokens */

/* Reference: up to <n> tg_gcra_take in a row at one instant. */
static tg_store_result_t ref_take_n(tg_gcra_t *g, uint64_t now, uint32_t n)
{
    tg_store_result_t out = {.decided_by = TG_STORE_BY_STORE};
    for (uint32_t i = 0; i < n; i++) {
        tg_gcra_result_t r = tg_gcra_take(g, now);
        if (!r.allowed) {
            if (out.granted == 0)
                out.gcra = r;
            else
                out.gcra.retry_after_ms = r.retry_after_ms;
            return out;
        }
        out.gcra = r;
        out.granted++;
    }
    return out;
}

static void expect_n(const tg_store_result_t *got, const tg_store_result_t *want, const char *what)
{
    cr_assert_eq(got->granted, want->granted, "%s: granted %u, want %u", what, got->granted,
                 want->granted);
    expect_gcra(got->gcra, want->gcra, what);
}

Test(store_local, take_n_grants_what_is_there)
{
    tg_store_t *st = local_open(0);
    slot_t s;
    g_now_ms = 0;
    cr_assert_eq(tg_store_take_n(st, "k", 5, 1000, 0, 3, slot_cb, &s), 0);
    cr_assert_eq(s.r.granted, 3);
    expect_gcra(s.r.gcra, gr(true, 0, 3, 5, 2), "3 of 5");
    cr_assert_eq(tg_store_take_n(st, "k", 5, 1000, 0, 3, slot_cb, &s), 0);
    cr_assert_eq(s.r.granted, 2);
    expect_gcra(s.r.gcra, gr(true, 200, 5, 5, 0), "2 left, one more in 200 ms");
    cr_assert_eq(tg_store_take_n(st, "k", 5, 1000, 0, 3, slot_cb, &s), 0);
    cr_assert_eq(s.r.granted, 0);
    expect_gcra(s.r.gcra, gr(false, 200, 6, 5, 0), "none");
    cr_assert_eq(tg_store_take_n(st, "k", 5, 1000, 0, 0, never_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_take_n(st, "k", 5, 1000, 0, TG_GCRA_MAX_BURST + 1, never_cb, NULL),
                 -EINVAL);
    local_close(st);
}

Test(store_redis, take_n_matches_repeated_gcra)
{
    static const uint32_t ns[] = {1, 2, 3, 7, 30, 1000};
    enum { STEPS = 200 };
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.test_script_clock_ms = test_clock;
    g.o.timeout_ms = 5000;
    rig_open(&g);
    tg_store_t *loc = local_open(0);
    tg_gcra_t ref;
    cr_assert_eq(tg_gcra_init(&ref, 30, 60000, 10), 0);
    static slot_t s[STEPS];
    static tg_store_result_t want[STEPS], lgot[STEPS];
    uint64_t seed = 12345, now = 1000000;
    for (int i = 0; i < STEPS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t n = ns[(seed >> 33) % 6];
        now += (seed >> 40) % 5000;
        g_now_ms = now;
        want[i] = ref_take_n(&ref, now, n);
        cr_assert_eq(tg_store_take_n(g.st, "tg:{a}:n2", 30, 60000, 10, n, slot_cb, &s[i]), 0);
        slot_t l;
        cr_assert_eq(tg_store_take_n(loc, "k", 30, 60000, 10, n, slot_cb, &l), 0);
        lgot[i] = l.r;
    }
    pump(&g.loop, &s[STEPS - 1].done, 10000);
    int partial = 0;
    for (int i = 0; i < STEPS; i++) {
        char what[48];
        snprintf(what, sizeof what, "step %d", i);
        cr_assert(s[i].done, "%s: no answer", what);
        expect_n(&s[i].r, &want[i], what);
        expect_n(&lgot[i], &want[i], what);
        partial += want[i].granted > 0 && want[i].gcra.retry_after_ms > 0;
    }
    cr_assert_gt(partial, 5, "sequences include partial grants");
    local_close(loc);
    rig_close(&g);
}

/* ------------------------------------------------------------ lease mode */

Test(store_lease, batch_size)
{
    /* first batch (rate unknown): only the waiting calls */
    cr_assert_eq(tg_store_lease_batch(30, 3, -1, 1000, 1), 1);
    cr_assert_eq(tg_store_lease_batch(30, 3, -1, 1000, 4), 4);
    /* predicted: rate x lease, at most cap / (2 x instances) */
    cr_assert_eq(tg_store_lease_batch(30, 3, 0.002, 1000, 1), 2);
    cr_assert_eq(tg_store_lease_batch(30, 3, 0.0021, 1000, 1), 3);
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 1), 5);
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 9), 9,
                 "waiting calls are not capped by it");
    cr_assert_eq(tg_store_lease_batch(30, 3, 1.0, 1000, 100), 30, "but by the burst");
    cr_assert_eq(tg_store_lease_batch(4, 3, 1.0, 1000, 1), 1, "small burst: one per instance");
    cr_assert_eq(tg_store_lease_batch(4, 0, 1.0, 1000, 1), 2, "instances 0 counts as 1");
    cr_assert_eq(tg_store_lease_batch(30, 3, 0, 1000, 0), 1);
}

typedef struct fleet {
    tg_store_t *backing;
    tg_store_t *lease[3];
} fleet_t;

static void fleet_open(fleet_t *f, tg_store_t *backing, uint32_t instances)
{
    f->backing = backing;
    tg_store_opts_t o = {.instances = instances, .clock_ms = test_clock};
    tg_err_t err;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tg_store_lease_open(backing, &o, &f->lease[i], &err), 0, "%s", err.msg);
}

static void fleet_close_leases(fleet_t *f)
{
    for (int i = 0; i < 3; i++) {
        bool closed = false;
        tg_store_close(f->lease[i], set_true, &closed);
        cr_assert(closed, "nothing in flight: the lease store closes at once");
    }
}

/* Three instances on one shared bucket (a local store standing in for
 * Redis: it answers synchronously, so the run is deterministic). 30/minute,
 * 3 instances: at most 5 tokens held per lease. Each instance calls every
 * 150 ms for 60 s. */
Test(store_lease, three_instances_never_over_and_bounded_under)
{
    tg_store_t *shared = local_open(0);
    fleet_t f;
    fleet_open(&f, shared, 3);
    uint64_t admitted = 0, calls = 0;
    g_now_ms = 1000000;
    uint64_t start = g_now_ms;
    for (int round = 0; round < 1200; round++) {
        slot_t s;
        take(f.lease[round % 3], "tg:{a}:shared", 30, 60000, 0, &s);
        cr_assert(s.done, "a synchronous backing answers at once");
        cr_assert_eq(s.answers, 1);
        cr_assert_eq(s.r.decided_by, TG_STORE_BY_STORE);
        calls++;
        admitted += s.r.gcra.allowed;
        /* never over: the exact-mode bound since the first grant */
        uint64_t bound = 30 + (g_now_ms - start) / 2000;
        cr_assert_leq(admitted, bound, "round %d: %llu admitted > %llu", round,
                      (unsigned long long)admitted, (unsigned long long)bound);
        g_now_ms += 50;
    }
    uint64_t exact = 30 + (g_now_ms - 50 - start) / 2000;
    tg_store_lease_stats_t st, sum = {0};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tg_store_lease_stats(f.lease[i], &st), 0);
        sum.local += st.local;
        sum.granted += st.granted;
        sum.expired += st.expired;
        sum.batches += st.batches;
    }
    /* every admitted call spent one granted token; unspent ones are held
     * (at most 5 per instance) or expired */
    uint64_t held = sum.granted - admitted - sum.expired;
    cr_assert_leq(held, 3 * 5, "held %llu", (unsigned long long)held);
    /* bounded under-admission: what exact mode allows, less what leases hold or lost */
    cr_assert_geq(admitted + held + sum.expired, exact, "admitted %llu held %llu expired %llu",
                  (unsigned long long)admitted, (unsigned long long)held,
                  (unsigned long long)sum.expired);
    cr_assert_geq(admitted, exact - 3 * 5);
    cr_assert_gt(sum.local, 0, "some calls spent leased tokens without asking");
    fleet_close_leases(&f);
    local_close(shared);
}

Test(store_lease, tokens_expire_and_are_never_spent_late)
{
    tg_store_t *shared = local_open(0);
    fleet_t f;
    fleet_open(&f, shared, 1); /* 100/second, 1 instance: up to 50 tokens per lease */
    slot_t s;
    g_now_ms = 5000;
    take(f.lease[0], "k", 100, 1000, 0, &s); /* first batch: 1 token */
    g_now_ms += 10;
    take(f.lease[0], "k", 100, 1000, 0, &s); /* rate 0.1/ms: 50 tokens */
    cr_assert(s.r.gcra.allowed);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.batches, 2);
    cr_assert_eq(st.granted, 51);
    for (int i = 0; i < 10; i++) {
        take(f.lease[0], "k", 100, 1000, 0, &s);
        cr_assert(s.r.gcra.allowed);
        /* the batch of 50 at t+10 left the bucket 50 (the first token had
         * refilled): remaining is those plus the tokens left in the lease */
        cr_assert_eq(s.r.gcra.remaining, 50 + 48 - (uint64_t)i, "call %d: %llu", i,
                     (unsigned long long)s.r.gcra.remaining);
        cr_assert_eq(s.r.gcra.observed, 2 + (uint64_t)i, "call %d", i);
    }
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.local, 10);
    cr_assert_eq(st.batches, 2, "spent locally, no round trip");
    /* lease life = min(lease_ms 1000, period 1000): at +1000 ms the 39
     * tokens left are void */
    g_now_ms += 1000;
    take(f.lease[0], "k", 100, 1000, 0, &s);
    cr_assert(s.r.gcra.allowed);
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.expired, 39);
    cr_assert_eq(st.batches, 3);
    /* a reloaded limit drops the tokens of the old one */
    uint64_t before = st.expired;
    uint64_t left = st.granted - 12 - st.expired - 1;
    take(f.lease[0], "k", 50, 1000, 0, &s);
    cr_assert_eq(tg_store_lease_stats(f.lease[0], &st), 0);
    cr_assert_eq(st.expired, before + left);
    cr_assert_eq(tg_store_take_n(f.lease[0], "k", 100, 1000, 0, 2, never_cb, NULL), -EINVAL);
    fleet_close_leases(&f);
    local_close(shared);
}

/* Over Redis: three instances (three connections) with a frozen clock on
 * both sides: exactly the burst is admitted in total, and never more. */
Test(store_lease, redis_three_instances_exact_total)
{
    static rig_t g[3];
    srv_any(&g[0].srv);
    const char *prefix = run_prefix();
    tg_store_t *lease[3];
    for (int i = 0; i < 3; i++) {
        g[i].srv = g[0].srv;
        g[i].o.prefix = prefix;
        g[i].o.test_script_clock_ms = test_clock;
        g[i].o.clock_ms = test_clock;
        g[i].o.instances = 3;
        rig_open(&g[i]);
        tg_store_opts_t lo = {.instances = 3, .clock_ms = test_clock};
        tg_err_t err;
        cr_assert_eq(tg_store_lease_open(g[i].st, &lo, &lease[i], &err), 0, "%s", err.msg);
    }
    g_now_ms = 7000000;
    uint64_t admitted = 0;
    static slot_t s[3][60];
    /* calls on all three at once, answered as their batches come back */
    for (int k = 0; k < 60; k++) {
        for (int i = 0; i < 3; i++)
            take(lease[i], "tg:{a}:lease", 30, 60000, 0, &s[i][k]);
        for (int i = 0; i < 3; i++) {
            pump(&g[i].loop, &s[i][k].done, 3000);
            cr_assert(s[i][k].done);
            cr_assert_eq(s[i][k].r.decided_by, TG_STORE_BY_STORE);
            admitted += s[i][k].r.gcra.allowed;
        }
        cr_assert_leq(admitted, 30);
    }
    cr_assert_eq(admitted, 30, "with every instance calling until refused, nothing is lost");
    for (int i = 0; i < 3; i++) {
        bool closed = false;
        tg_store_close(lease[i], set_true, &closed);
        cr_assert(closed);
        close_store(&g[i].loop, g[i].st);
    }
    srv_done(&g[0].srv);
}

Test(store_lease, redis_steady_load_is_mostly_local)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.clock_ms = test_clock;
    rig_open(&g);
    tg_store_opts_t lo = {.clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    g_now_ms = 1000;
    int allowed = 0, sync = 0;
    for (int i = 0; i < 400; i++) {
        slot_t s;
        take(lease, "tg:{a}:steady", 1000, 1000, 0, &s);
        sync += s.done;
        pump(&g.loop, &s.done, 3000);
        cr_assert(s.done);
        allowed += s.r.gcra.allowed;
        g_now_ms += 2; /* 500 calls/s against 1000/s */
    }
    cr_assert_eq(allowed, 400);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.local, (uint64_t)sync);
    cr_assert_gt(sync, 350, "most calls at local speed: %d", sync);
    cr_assert_lt(st.batches, 50);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    rig_close(&g);
}

Test(store_lease, store_failure_applies_the_policy)
{
    rig_t g = {0};
    snprintf(g.srv.url, sizeof g.srv.url, "redis://127.0.0.1:%d/0", pick_port());
    fast_failover(&g, TG_STORE_POLICY_LOCAL);
    g.o.instances = 2;
    rig_open(&g);
    pump_ms(&g.loop, 50);
    cr_assert_eq(g.ev.degraded, 1);
    tg_store_opts_t lo = {.instances = 2, .clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    g_now_ms = 100000;
    /* 4/second shared by 2: the fallback share is 2 */
    for (int i = 0; i < 4; i++) {
        slot_t s;
        take(lease, "tg:{a}:x", 4, 1000, 0, &s);
        cr_assert(s.done, "degraded: answered at once");
        cr_assert_eq(s.r.decided_by, TG_STORE_BY_LOCAL_FALLBACK);
        cr_assert_eq(s.r.status, -ENOTCONN);
        cr_assert_eq(s.r.gcra.allowed, i < 2, "call %d", i);
    }
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    close_store(&g.loop, g.st);
}

Test(store_lease, full_table_sends_calls_on_their_own)
{
    tg_store_t *shared = local_open(0);
    tg_store_opts_t o = {.clock_ms = test_clock, .local_max_keys = 1};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(shared, &o, &lease, &err), 0, "%s", err.msg);
    slot_t s;
    g_now_ms = 1000;
    take(lease, "a", 10, 1000, 0, &s);
    g_now_ms += 10;
    take(lease, "a", 10, 1000, 0, &s); /* a batch of 5: 4 stay in the lease */
    take(lease, "b", 10, 1000, 0, &s);
    cr_assert(s.r.gcra.allowed);
    tg_store_lease_stats_t st;
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.direct, 1, "'a' holds live tokens: 'b' goes to the shared bucket itself");
    cr_assert_eq(st.granted, 6);
    /* once a's tokens have expired, its lease may be dropped for b's */
    g_now_ms += 1000;
    take(lease, "b", 10, 1000, 0, &s);
    cr_assert_eq(tg_store_lease_stats(lease, &st), 0);
    cr_assert_eq(st.direct, 1);
    cr_assert_eq(st.expired, 4);
    cr_assert_eq(st.batches, 3);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    local_close(shared);
}

Test(store_lease, close_waits_for_the_batch_in_flight)
{
    rig_t g = {0};
    srv_any(&g.srv);
    rig_open(&g);
    tg_store_opts_t lo = {0};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(g.st, &lo, &lease, &err), 0, "%s", err.msg);
    slot_t s[2];
    take(lease, "tg:{a}:cl", 10, 1000, 0, &s[0]);
    take(lease, "tg:{a}:cl", 10, 1000, 0, &s[1]);
    cr_assert_not(s[0].done);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert_not(closed, "a batch is in flight");
    cr_assert_eq(tg_store_take(lease, "tg:{a}:cl", 10, 1000, 0, never_cb, NULL), -ECANCELED);
    pump(&g.loop, &closed, 3000);
    cr_assert(closed);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(s[i].answers, 1, "call %d", i);
        cr_assert(s[i].r.gcra.allowed, "call %d: answered from the store", i);
        cr_assert_eq(s[i].r.decided_by, TG_STORE_BY_STORE);
    }
    rig_close(&g);
}

/* ------------------------------------------------- shared concurrency slots */

#include "limits/store_slots.h"

typedef struct held {
    bool done;
    int answers;
    tg_store_slot_result_t r;
    uint64_t t0_ns, t1_ns;
} held_t;

static void held_cb(void *arg, const tg_store_slot_result_t *r)
{
    held_t *h = arg;
    h->answers++;
    h->done = true;
    h->r = *r;
    h->t1_ns = uv_hrtime();
}

static void never_slot_cb(void *arg, const tg_store_slot_result_t *r)
{
    (void)arg;
    (void)r;
    cr_assert_fail("a refused acquisition called back");
}

static void acquire(tg_store_t *st, const char *key, uint32_t cap, held_t *h)
{
    memset(h, 0, sizeof *h);
    h->t0_ns = uv_hrtime();
    cr_assert_eq(tg_store_slot_acquire(st, key, cap, held_cb, h), 0, "acquire %s", key);
}

static void acquire_wait(rig_t *g, const char *key, uint32_t cap, held_t *h)
{
    acquire(g->st, key, cap, h);
    pump(&g->loop, &h->done, 3000);
    cr_assert(h->done, "%s: no answer", key);
    cr_assert_eq(h->answers, 1);
}

static void expect_slot(const held_t *h, bool granted, uint64_t holders, uint64_t cap,
                        tg_store_decider_t by, const char *what)
{
    cr_assert(h->done, "%s: not answered", what);
    cr_assert_eq(h->r.granted, granted, "%s: granted %d", what, h->r.granted);
    cr_assert_eq(h->r.holders, holders, "%s: holders %llu, want %llu", what,
                 (unsigned long long)h->r.holders, (unsigned long long)holders);
    cr_assert_eq(h->r.cap, cap, "%s: cap %llu, want %llu", what, (unsigned long long)h->r.cap,
                 (unsigned long long)cap);
    cr_assert_eq(h->r.decided_by, by, "%s: decided by %s", what,
                 tg_store_decider_name(h->r.decided_by));
    cr_assert_eq(h->r.slot != NULL, granted, "%s: a slot exactly when granted", what);
}

/* Members of sorted set <key>, space-separated, into <buf>. */
static long long srv_members(const srv_t *s, const char *key, char *buf, size_t cap)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "ZRANGE %s 0 -1", key);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    buf[0] = '\0';
    for (size_t i = 0; i < r->elements; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", i ? " " : "", r->element[i]->str);
    }
    long long count = (long long)r->elements;
    freeReplyObject(r);
    redisFree(c);
    return count;
}

/* Run <argv> (<argc> words, some maybe empty) on a plain connection. */
static redisReply *srv_argv(const srv_t *s, int argc, const char **argv)
{
    redisContext *c = srv_connect(s);
    cr_assert(c != NULL && !c->err);
    size_t lens[16];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    cr_assert_not_null(r);
    redisFree(c);
    return r;
}

/* Occurrences of <needle> in <s>. */
static int tgt_count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Run <loop> until ZCARD <key> is <want> or a second passes: a release
 * is sent from the loop and not waited for. */
static long long zcard_settles(uv_loop_t *loop, const srv_t *s, const char *key, long long want)
{
    long long n = -1;
    for (int i = 0; i < 100 && (n = srv_int(s, "ZCARD %s", key)) != want; i++)
        pump_ms(loop, 10);
    return n;
}

Test(store_slots, renewal_period_holders_and_the_key_table)
{
    cr_assert_eq(tg_store_slot_renew_ms(10000), 3333);
    cr_assert_eq(tg_store_slot_renew_ms(1000), 333);
    cr_assert_eq(tg_store_slot_renew_ms(3), 1);
    cr_assert_eq(tg_store_slot_renew_ms(0), 1);

    tg_slots_t a, b, c;
    cr_assert_eq(tg_slots_init(&a, "host-a", 2), 0);
    cr_assert_eq(tg_slots_init(&b, "host-a", 2), 0);
    cr_assert_eq(strncmp(a.holder, "host-a:", 7), 0, "%s", a.holder);
    cr_assert_eq(strlen(a.holder), 7 + 16);
    cr_assert_eq(a.holder_len, 7 + 16);
    cr_assert_str_neq(a.holder, b.holder, "one configured name, still two holders");
    char m[TG_STORE_MEMBER_MAX], want[TG_STORE_MEMBER_MAX + 8];
    size_t n = tg_slots_member(&a, 255, m, sizeof m);
    snprintf(want, sizeof want, "%s:ff", a.holder);
    cr_assert_str_eq(m, want);
    cr_assert_eq(n, strlen(want));
    /* a long instance name is cut, the random part kept */
    char longname[400];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    cr_assert_eq(tg_slots_init(&c, longname, 1), 0);
    cr_assert_eq(strlen(c.holder), TG_STORE_HOLDER_MAX - 1);
    cr_assert_eq(c.holder[TG_STORE_HOLDER_MAX - 18], ':');
    n = tg_slots_member(&c, UINT64_MAX, m, sizeof m);
    cr_assert_eq(n, TG_STORE_HOLDER_MAX - 1 + 17, "the longest member fits");
    tg_slots_free(&c);
    cr_assert_eq(tg_slots_init(&c, NULL, 1), 0);
    cr_assert_eq(strncmp(c.holder, "toolgate:", 9), 0);
    tg_slots_free(&c);

    /* counts per key; at most 2 keys, and a key with no slot held makes room */
    struct tg_store_slot *s1 = tg_slots_add(&a, "k1", tg_slots_next_seq(&a), TG_STORE_BY_STORE);
    struct tg_store_slot *s2 = tg_slots_add(&a, "k1", tg_slots_next_seq(&a), TG_STORE_BY_OPEN);
    struct tg_store_slot *s3 = tg_slots_add(&a, "k2", tg_slots_next_seq(&a), TG_STORE_BY_STORE);
    cr_assert(s1 && s2 && s3);
    cr_assert_eq(s1->seq, 1);
    cr_assert_eq(s3->seq, 3);
    cr_assert_eq(s2->by, TG_STORE_BY_OPEN);
    cr_assert_eq(tg_slots_held(&a, "k1"), 2);
    cr_assert_eq(tg_slots_held(&a, "k2"), 1);
    cr_assert_eq(tg_slots_held(&a, "k3"), 0);
    cr_assert_eq(a.held, 3);
    cr_assert_null(tg_slots_add(&a, "k3", tg_slots_next_seq(&a), TG_STORE_BY_STORE),
                   "two keys with slots held: no room for a third");
    tg_slots_remove(&a, s3);
    struct tg_store_slot *s4 = tg_slots_add(&a, "k3", tg_slots_next_seq(&a), TG_STORE_BY_STORE);
    cr_assert_not_null(s4, "k2 held nothing: dropped for k3");
    cr_assert_eq(tg_slots_held(&a, "k2"), 0);
    tg_slots_remove(&a, s1);
    cr_assert_eq(tg_slots_held(&a, "k1"), 1);
    cr_assert_eq(a.held, 2);
    tg_slots_free(&a); /* s2 and s4 with it */
    tg_slots_free(&b);
}

Test(store_local, slots_are_counted_per_key)
{
    tg_store_t *st = local_open(0);
    held_t h[4];
    for (int i = 0; i < 3; i++) {
        acquire(st, "tg:{a}:slots", 2, &h[i]);
        cr_assert(h[i].done, "the local store answers at once");
    }
    expect_slot(&h[0], true, 1, 2, TG_STORE_BY_STORE, "first");
    expect_slot(&h[1], true, 2, 2, TG_STORE_BY_STORE, "second");
    expect_slot(&h[2], false, 2, 2, TG_STORE_BY_STORE, "third");
    acquire(st, "tg:{b}:slots", 1, &h[3]);
    expect_slot(&h[3], true, 1, 1, TG_STORE_BY_STORE, "another key");
    cr_assert_eq(tg_store_slots_held(st), 3);
    tg_store_slot_release(st, h[0].r.slot);
    acquire(st, "tg:{a}:slots", 2, &h[0]);
    expect_slot(&h[0], true, 2, 2, TG_STORE_BY_STORE, "after a release");
    cr_assert_eq(tg_store_slot_acquire(st, "tg:{a}:slots", 0, never_slot_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_slot_acquire(st, "", 2, never_slot_cb, NULL), -EINVAL);
    cr_assert_eq(tg_store_slot_acquire(st, "tg:{a}:slots", TG_MAX_CONCURRENT_CEIL + 1,
                                       never_slot_cb, NULL),
                 -EINVAL);
    cr_assert_eq(tg_store_pending(st), 0);
    tg_store_slot_release(st, h[0].r.slot);
    tg_store_slot_release(st, h[1].r.slot);
    tg_store_slot_release(st, h[3].r.slot);
    cr_assert_eq(tg_store_slots_held(st), 0);
    local_close(st);
}

Test(store_lease, has_no_slots)
{
    tg_store_t *shared = local_open(0);
    tg_store_opts_t lo = {.clock_ms = test_clock};
    tg_store_t *lease;
    tg_err_t err;
    cr_assert_eq(tg_store_lease_open(shared, &lo, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(tg_store_slot_acquire(lease, "tg:{a}:slots", 2, never_slot_cb, NULL), -ENOTSUP);
    cr_assert_eq(tg_store_slots_held(lease), 0);
    bool closed = false;
    tg_store_close(lease, set_true, &closed);
    cr_assert(closed);
    local_close(shared);
}

/* The script's clock decides expiry: two slots of a toolgate that died
 * (written straight into the set) hold a cap of 2 until their scores pass,
 * to the millisecond; a new slot expires lease_ms after it was taken. */
Test(store_redis, slots_expire_by_the_lease_on_the_server_clock)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.test_script_clock_ms = test_clock;
    g.o.slot_lease_ms = 60000; /* renewals every 20 s stay out of the way */
    g.o.instance = "unit-a";
    rig_open(&g);
    char key[TG_STORE_KEY_MAX + 1], cmd[TG_STORE_KEY_MAX + 128], score[32];
    cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "search", "slots"), 0);
    cr_assert(strstr(key, "{search}:slots") != NULL);
    snprintf(cmd, sizeof cmd, "ZADD %s 1001000 dead:1 1001500 dead:2", key);
    srv_cmd(&g.srv, cmd);
    g_now_ms = 1000000;
    held_t h[5];
    acquire_wait(&g, key, 2, &h[0]);
    expect_slot(&h[0], false, 2, 2, TG_STORE_BY_STORE, "both held by the dead one");
    g_now_ms = 1000999;
    acquire_wait(&g, key, 2, &h[1]);
    expect_slot(&h[1], false, 2, 2, TG_STORE_BY_STORE, "1 ms before the first expiry");
    g_now_ms = 1001000;
    acquire_wait(&g, key, 2, &h[1]);
    expect_slot(&h[1], true, 2, 2, TG_STORE_BY_STORE, "at the first expiry");
    char members[512];
    cr_assert_eq(srv_members(&g.srv, key, members, sizeof members), 2);
    cr_assert(strstr(members, "dead:2") != NULL && strstr(members, "unit-a:") != NULL, "%s",
              members);
    /* our slot expires a lease after it was taken */
    char mine[TG_STORE_MEMBER_MAX];
    snprintf(mine, sizeof mine, "%s", strstr(members, "unit-a:"));
    mine[strcspn(mine, " ")] = '\0';
    redisContext *c = srv_connect(&g.srv);
    redisReply *r = redisCommand(c, "ZSCORE %s %s", key, mine);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    snprintf(score, sizeof score, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    cr_assert_str_eq(score, "1061000");
    acquire_wait(&g, key, 2, &h[2]);
    expect_slot(&h[2], false, 2, 2, TG_STORE_BY_STORE, "dead:2 still counts");
    g_now_ms = 1001500;
    acquire_wait(&g, key, 2, &h[3]);
    expect_slot(&h[3], true, 2, 2, TG_STORE_BY_STORE, "after the second expiry");
    cr_assert_eq(tg_store_slots_held(g.st), 2);
    tg_store_slot_release(g.st, h[1].r.slot);
    tg_store_slot_release(g.st, h[3].r.slot);
    cr_assert_eq(tg_store_slots_held(g.st), 0);
    cr_assert_eq(zcard_settles(&g.loop, &g.srv, key, 0), 0, "released slots left the set");
    cr_assert_eq(srv_int(&g.srv, "EXISTS %s", key), 0, "an empty set is no key");
    tg_store_redis_stats_t st;
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.slot_acquires, 5);
    cr_assert_eq(st.slot_releases, 2);
    cr_assert_eq(st.slot_orphans, 0);
    cr_assert_eq(g.ev.degraded, 0);
    rig_close(&g);
}

/* On the server's own clock: renewals keep a slot alive past its lease,
 * put back one that vanished (its call still runs), and stop with the
 * last release. */
Test(store_redis, renewals_keep_held_slots_and_put_lapsed_ones_back)
{
    rig_t g = {0};
    srv_any(&g.srv);
    g.o.slot_lease_ms = 1000; /* renewed every 333 ms */
    rig_open(&g);
    char key[TG_STORE_KEY_MAX + 1];
    cr_assert_gt(tg_store_make_key(g.st, key, sizeof key, "renew", "slots"), 0);
    held_t h, other;
    acquire_wait(&g, key, 1, &h);
    expect_slot(&h, true, 1, 1, TG_STORE_BY_STORE, "first");
    long long pttl = srv_int(&g.srv, "PTTL %s", key);
    cr_assert(pttl > 0 && pttl <= 1000, "the set expires with its slots: pttl %lld", pttl);
    pump_ms(&g.loop, 1600);
    cr_assert_eq(srv_int(&g.srv, "ZCARD %s", key), 1, "renewed past its lease");
    tg_store_redis_stats_t st;
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_geq(st.slot_renewals, 3, "%llu renewals in 1.6 s", (unsigned long long)st.slot_renewals);
    cr_assert_leq(st.slot_renewals, 5);
    cr_assert_eq(st.slot_readded, 0);
    srv_int(&g.srv, "DEL %s", key);
    pump_ms(&g.loop, 450);
    cr_assert_eq(srv_int(&g.srv, "ZCARD %s", key), 1, "a lapsed slot is put back");
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.slot_readded, 1);
    acquire_wait(&g, key, 1, &other);
    expect_slot(&other, false, 1, 1, TG_STORE_BY_STORE, "the cap counts it");
    tg_store_slot_release(g.st, h.r.slot);
    cr_assert_eq(zcard_settles(&g.loop, &g.srv, key, 0), 0);
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    uint64_t renewals = st.slot_renewals;
    pump_ms(&g.loop, 700);
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.slot_renewals, renewals, "nothing held, nothing renewed");
    cr_assert_eq(srv_int(&g.srv, "ZCARD %s", key), 0);
    rig_close(&g);
}

/* Two toolgates on one Redis share one cap; each names its own slots. */
Test(store_redis, two_instances_share_one_cap)
{
    rig_t a = {0}, b = {0};
    srv_any(&a.srv);
    a.o.instance = "inst-a";
    rig_open(&a);
    b.srv = a.srv;
    b.srv.pid = 0; /* a's server: b must not stop it */
    b.o.prefix = a.o.prefix;
    b.o.instance = "inst-b";
    rig_open(&b);
    char key[TG_STORE_KEY_MAX + 1], members[1024];
    cr_assert_gt(tg_store_make_key(a.st, key, sizeof key, "two", "slots"), 0);
    held_t h[5];
    acquire_wait(&a, key, 3, &h[0]);
    acquire_wait(&a, key, 3, &h[1]);
    acquire_wait(&b, key, 3, &h[2]);
    acquire_wait(&b, key, 3, &h[3]);
    expect_slot(&h[0], true, 1, 3, TG_STORE_BY_STORE, "a 1");
    expect_slot(&h[1], true, 2, 3, TG_STORE_BY_STORE, "a 2");
    expect_slot(&h[2], true, 3, 3, TG_STORE_BY_STORE, "b 1");
    expect_slot(&h[3], false, 3, 3, TG_STORE_BY_STORE, "b 2: the fleet is full");
    cr_assert_eq(srv_members(&a.srv, key, members, sizeof members), 3);
    cr_assert_eq(tgt_count(members, "inst-a:"), 2, "%s", members);
    cr_assert_eq(tgt_count(members, "inst-b:"), 1, "%s", members);
    tg_store_slot_release(a.st, h[0].r.slot);
    cr_assert_eq(zcard_settles(&a.loop, &a.srv, key, 2), 2);
    acquire_wait(&b, key, 3, &h[4]);
    expect_slot(&h[4], true, 3, 3, TG_STORE_BY_STORE, "b 2 after a's release");
    /* closing removes what each still holds */
    close_store(&b.loop, b.st);
    cr_assert_eq(zcard_settles(&a.loop, &a.srv, key, 1), 1, "b's two slots left with b");
    close_store(&a.loop, a.st);
    uv_loop_t idle;
    cr_assert_eq(uv_loop_init(&idle), 0);
    cr_assert_eq(zcard_settles(&idle, &a.srv, key, 0), 0, "and a's with a");
    cr_assert_eq(uv_loop_close(&idle), 0);
    srv_done(&a.srv);
}

/* SIGSTOP with a connection that stays (dead_after long): every
 * acquisition returns within the timeout, decided by the policy; local
 * grants this instance's share (4 shared by 2: 2), open grants, closed
 * refuses. On SIGCONT the late answer to the call that timed out comes
 * back (a slot nobody holds under closed: removed), and the recovery
 * renewal writes the slots the policy granted, so the set counts every
 * call this instance runs. */
static void stall_slots_case(tg_store_policy_t pol)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    fast_failover(&g, pol);
    g.o.dead_after_ms = 5000;
    g.o.slot_lease_ms = 6000;
    rig_open(&g);
    held_t w;
    acquire_wait(&g, "tg:{a}:warm", 4, &w);
    expect_slot(&w, true, 1, 4, TG_STORE_BY_STORE, "warm");
    tg_store_slot_release(g.st, w.r.slot);
    pump_ms(&g.loop, 20);
    kill(g.srv.pid, SIGSTOP);
    held_t h[3];
    for (int i = 0; i < 3; i++) {
        acquire(g.st, "tg:{a}:slots", 4, &h[i]);
        pump(&g.loop, &h[i].done, 1000);
        cr_assert(h[i].done, "acquisition %d hangs", i);
        cr_assert_eq(h[i].answers, 1);
        uint64_t ms = (h[i].t1_ns - h[i].t0_ns) / 1000000;
        cr_assert_leq(ms, 50 + 40, "acquisition %d took %llu ms", i, (unsigned long long)ms);
        cr_assert_eq(h[i].r.status, -ETIMEDOUT, "acquisition %d: status %d", i, h[i].r.status);
    }
    switch (pol) {
    case TG_STORE_POLICY_LOCAL:
        expect_slot(&h[0], true, 1, 2, TG_STORE_BY_LOCAL_FALLBACK, "share 1");
        expect_slot(&h[1], true, 2, 2, TG_STORE_BY_LOCAL_FALLBACK, "share 2");
        expect_slot(&h[2], false, 2, 2, TG_STORE_BY_LOCAL_FALLBACK, "share spent");
        break;
    case TG_STORE_POLICY_OPEN:
        for (int i = 0; i < 3; i++)
            expect_slot(&h[i], true, (uint64_t)i + 1, 4, TG_STORE_BY_OPEN, "open");
        break;
    case TG_STORE_POLICY_CLOSED:
        for (int i = 0; i < 3; i++)
            expect_slot(&h[i], false, 0, 4, TG_STORE_BY_CLOSED, "closed");
        break;
    }
    kill(g.srv.pid, SIGCONT);
    wait_events(&g, 1, 1, 5000);
    pump_ms(&g.loop, 300);
    long long want = pol == TG_STORE_POLICY_LOCAL ? 2 : pol == TG_STORE_POLICY_OPEN ? 3 : 0;
    cr_assert_eq(srv_int(&g.srv, "ZCARD %s", "tg:{a}:slots"), want);
    tg_store_redis_stats_t st;
    cr_assert_eq(tg_store_redis_stats(g.st, &st), 0);
    cr_assert_eq(st.slot_orphans, pol == TG_STORE_POLICY_CLOSED ? 1 : 0);
    cr_assert_eq(st.slot_readded, (uint64_t)(want > 0 ? want - 1 : 0),
                 "the first was written by its own late acquisition");
    cr_assert_eq(st.timeouts, 1, "only the first waited for Redis");
    for (int i = 0; i < 3; i++)
        if (h[i].r.granted)
            tg_store_slot_release(g.st, h[i].r.slot);
    cr_assert_eq(tg_store_slots_held(g.st), 0);
    cr_assert_eq(zcard_settles(&g.loop, &g.srv, "tg:{a}:slots", 0), 0);
    rig_close(&g);
}

Test(store_redis, stalled_redis_slots_policy_local)
{
    stall_slots_case(TG_STORE_POLICY_LOCAL);
}
Test(store_redis, stalled_redis_slots_policy_open)
{
    stall_slots_case(TG_STORE_POLICY_OPEN);
}
Test(store_redis, stalled_redis_slots_policy_closed)
{
    stall_slots_case(TG_STORE_POLICY_CLOSED);
}

/* With Redis down from the start (nobody listens), the policy answers at
 * once; a closing store hands out no slot whatever the policy. */
Test(store_redis, slots_without_redis_and_while_closing)
{
    rig_t g = {0};
    snprintf(g.srv.url, sizeof g.srv.url, "redis://127.0.0.1:%d/0", pick_port());
    g.o.on_store_error = TG_STORE_POLICY_OPEN;
    rig_open(&g);
    held_t h;
    acquire(g.st, "tg:{a}:slots", 3, &h);
    pump(&g.loop, &h.done, 1000);
    cr_assert(h.done, "a refused connection hangs the call");
    cr_assert_leq((h.t1_ns - h.t0_ns) / 1000000, 50 + 40);
    expect_slot(&h, true, 1, 3, TG_STORE_BY_OPEN, "open");
    cr_assert_neq(h.r.status, 0);
    /* degraded now: decided at once */
    held_t h2;
    acquire(g.st, "tg:{a}:slots", 3, &h2);
    cr_assert(h2.done, "no connection: decided at once");
    expect_slot(&h2, true, 2, 3, TG_STORE_BY_OPEN, "open again");
    bool closed = false;
    tg_store_close(g.st, set_true, &closed);
    cr_assert_eq(tg_store_slot_acquire(g.st, "tg:{a}:slots", 3, never_slot_cb, NULL), -ECANCELED);
    pump(&g.loop, &closed, 2000);
    cr_assert(closed);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&g.loop), 0);
}

/* An acquisition in flight when the store closes is refused (closed,
 * -ECANCELED): the slot would die with the store; and the close removes
 * what Redis may still grant it. */
Test(store_redis, close_refuses_acquisitions_in_flight)
{
    rig_t g = {0};
    srv_own(&g.srv, false, NULL);
    g.o.on_store_error = TG_STORE_POLICY_OPEN;
    rig_open(&g);
    held_t w;
    acquire_wait(&g, "tg:{a}:c", 4, &w);
    kill(g.srv.pid, SIGSTOP);
    held_t h;
    acquire(g.st, "tg:{a}:c", 4, &h);
    pump_ms(&g.loop, 5);
    cr_assert_not(h.done);
    bool closed = false;
    tg_store_close(g.st, set_true, &closed);
    expect_slot(&h, false, 0, 4, TG_STORE_BY_CLOSED, "closing");
    cr_assert_eq(h.r.status, -ECANCELED);
    pump(&g.loop, &closed, 1000);
    cr_assert(closed);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&g.loop), 0);
    kill(g.srv.pid, SIGCONT);
    /* the close sent a ZREM for w, and one for h behind its acquisition:
     * Redis runs h's acquisition when it wakes, then removes both */
    uv_loop_t idle;
    cr_assert_eq(uv_loop_init(&idle), 0);
    cr_assert_eq(zcard_settles(&idle, &g.srv, "tg:{a}:c", 0), 0);
    cr_assert_eq(uv_loop_close(&idle), 0);
    srv_done(&g.srv);
}

/* The script checks its arguments, and a renewal of nothing writes
 * nothing. */
Test(store_redis, slot_script_refuses_bad_arguments)
{
    srv_t s;
    srv_any(&s);
    const char *lua = tg_store_redis_slots_script();
    const char *bad_lease[] = {"EVAL", lua, "1", "tg:{x}:s", "acquire", "0", "", "2", "m"};
    redisReply *r = srv_argv(&s, 9, bad_lease);
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, "bad arguments"), "%s", r->str);
    freeReplyObject(r);
    const char *bad_cap[] = {"EVAL", lua, "1", "tg:{x}:s", "acquire", "1000", "", "0", "m"};
    r = srv_argv(&s, 9, bad_cap);
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, "bad arguments"), "%s", r->str);
    freeReplyObject(r);
    const char *bad_op[] = {"EVAL", lua, "1", "tg:{x}:s", "steal", "1000", ""};
    r = srv_argv(&s, 7, bad_op);
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown operation"), "%s", r->str);
    freeReplyObject(r);
    const char *empty[] = {"EVAL", lua, "1", "tg:{x}:s", "renew", "1000", ""};
    r = srv_argv(&s, 7, empty);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_eq(r->element[0]->integer, 0);
    cr_assert_eq(r->element[1]->integer, 0);
    freeReplyObject(r);
    cr_assert_eq(srv_int(&s, "EXISTS %s", "tg:{x}:s"), 0);
    srv_done(&s);
}
