/* Rate stores without a server: key layout, failure policies, Redis URLs
 * and their redaction, the local store (GCRA vectors, bounded table, take
 * of n tokens, shared-slot counting) and the slot table of
 * limits/store_slots.c. The redis store is test_store_redis.c, lease views
 * test_store_lease.c; the helpers they share are tests/tg_store.h. */
#include "tests/tg_store.h"

#include "limits/store_slots.h"

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

    /* escapes in either case, a byte >= 0x80 (UTF-8) decoded as it is */
    u = parse_ok("redis://:p%c3%A9%2f@h");
    cr_assert_str_eq(u.password, "p\xc3\xa9/");

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
    parse_fails("redis://:hunter2%g1@h", "store URL 'redis://***@h': password: bad "
                                         "percent-encoding or longer than 255 bytes");
    parse_fails("redis://:hunter2%\xc3\xa9@h", "store URL 'redis://***@h': password: bad "
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

/* ------------------------------------------------------ take of n tokens */

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

/* ------------------------------------------------- shared concurrency slots */

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

typedef struct debts {
    int n;
    char key[4][32];
    uint64_t count[4], period_ms[4], ahead_us[4];
    uint32_t burst[4];
} debts_t;

static void debt_cb(void *arg, const char *key, uint64_t count, uint64_t period_ms, uint32_t burst,
                    uint64_t ahead_us)
{
    debts_t *d = arg;
    cr_assert_lt(d->n, 4);
    snprintf(d->key[d->n], sizeof d->key[0], "%s", key);
    d->count[d->n] = count;
    d->period_ms[d->n] = period_ms;
    d->burst[d->n] = burst;
    d->ahead_us[d->n++] = ahead_us;
}

/* The redis store's fallback: a bucket enforces this instance's share and
 * remembers the limit as asked; the buckets still ahead of now are listed
 * with how far (what the recovery charge floors the shared bucket at). */
Test(store_local, shares_and_the_debts_they_leave)
{
    tg_store_t *st = local_open(0);
    g_now_ms = 50000;
    tg_store_result_t r;
    /* 10/second shared by 3: 3/second (T 333.334 ms), burst 3 */
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tg_store_local_take_share(st, "tg:{a}:x", 10, 1000, 0, 3, 1, &r), 0);
        cr_assert_eq(r.gcra.allowed, i < 3, "call %d", i);
        cr_assert_eq(r.gcra.cap, 3);
    }
    cr_assert_eq(tg_store_local_take_share(st, "tg:{a}:y", 10, 1000, 4, 0, 1, &r), 0);
    cr_assert_eq(r.gcra.cap, 4, "instances 0 = 1: the whole limit");
    cr_assert_eq(tg_store_local_take_share(st, "tg:{a}:x", 10, 1000, 0, 3, 0, &r), -EINVAL);
    debts_t d = {0};
    g_now_ms += 500;
    cr_assert_eq(tg_store_local_debts(st, debt_cb, &d), 1, "y (TAT 50100) is full again");
    cr_assert_str_eq(d.key[0], "tg:{a}:x");
    cr_assert_eq(d.count[0], 10);
    cr_assert_eq(d.period_ms[0], 1000);
    cr_assert_eq(d.burst[0], 0);
    cr_assert_eq(d.ahead_us[0], 3 * 333334 - 500000);
    g_now_ms += 1000;
    d.n = 0;
    cr_assert_eq(tg_store_local_debts(st, debt_cb, &d), 0);
    local_close(st);
}

/* ------------------------------------------------------------- README */

#include "router/call/admit.h"
#include "router/call/route.h"
#include "router/gateway/gateway.h"

/* Issue 20 item 11: operators write Redis ACLs from the README's key
 * names, so every key the README names ("`tg:{agent}:...`", with the
 * placeholders agent and NAME) is one the router builds with the default
 * prefix, and each key the router builds is named. The keys come from
 * the router's own builders (tg_route_stores for the agent's bucket and
 * slot set, tg_adm_tool_key for a tool's bucket), not from a copy. */
Test(store_key, readme_names_the_keys_the_router_builds)
{
    tg_store_opts_t o = {.kind = TG_STORE_LOCAL};
    tg_store_t *st = NULL, *rs = NULL, *ts = NULL, *cs = NULL;
    tg_err_t err;
    tg_config_t cfg;
    static tg_gw_t gw; /* only its store is read */
    static tg_adm_tool_t tool;
    char keys[3][TG_STORE_KEY_MAX + 1];

    cr_assert_eq(tg_store_local_open(&o, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    tg_agent_cfg_t *a = &cfg.agents[0];
    free(a->id);
    a->id = strdup("agent");
    a->rate_shared = a->conc_shared = true;
    gw.store = st;
    cr_assert_eq(tg_route_stores(&gw, a, &rs, keys[0], &ts, &cs, keys[1], NULL), 0);
    cr_assert_eq(tg_adm_tool_key(&tool, st, "agent", "NAME"), 0);
    snprintf(keys[2], sizeof keys[2], "%s", tool.rate_key);

    size_t len;
    char *readme = tgh_read_file(TG_SOURCE_DIR "/README.md", &len);
    cr_assert_not_null(readme);
    bool named[3] = {false, false, false};
    size_t seen = 0;
    for (const char *p = readme; (p = strstr(p, "{agent}:")) != NULL; p++) {
        /* Back to the opening backquote of this code span. */
        const char *open = p;
        while (open > readme && open[-1] != '`' && open[-1] != ' ' && open[-1] != '\n')
            open--;
        if (open == readme || open[-1] != '`')
            continue;
        const char *close = strchr(p, '`');
        cr_assert_not_null(close);
        char key[TG_STORE_KEY_MAX + 1];
        snprintf(key, sizeof key, "%.*s", (int)(close - open), open);
        bool known = false;
        for (size_t k = 0; k < 3; k++)
            if (strcmp(key, keys[k]) == 0)
                known = named[k] = true;
        cr_expect(known,
                  "README.md names the Redis key `%s`, which toolgate never builds "
                  "(it builds %s, %s and %s)",
                  key, keys[0], keys[1], keys[2]);
        seen++;
    }
    for (size_t k = 0; k < 3; k++)
        cr_expect(named[k], "README.md does not name the Redis key %s", keys[k]);
    cr_expect_geq(seen, 3);
    free(readme);
    tg_config_free(&cfg);
    tg_store_close(st, NULL, NULL);
}
