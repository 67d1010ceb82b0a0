/* The limit registry: warn once at 80%, re-arm (RECOVERED) below 50%; and
 * the admin endpoint's own bounds (connections, header and response
 * bytes), which it registers and keeps up to date itself. */
#include "limits/registry.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <uv.h>

#include "router/admin/admin.h"

Test(registry, warns_once_and_rearms_below_half)
{
    tg_limit_t l = {.capacity = 10};
    cr_assert_eq(tg_limit_observe(&l, 7), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 8), TG_LIMIT_EV_WARNING); /* 80% exactly */
    cr_assert(l.warned);
    cr_assert_eq(tg_limit_observe(&l, 9), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 10), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 12), TG_LIMIT_EV_NONE);
    /* between 50% and 80%: still armed off, no repeat */
    cr_assert_eq(tg_limit_observe(&l, 5), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 8), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 5), TG_LIMIT_EV_NONE); /* 50% is not below */
    cr_assert_eq(tg_limit_observe(&l, 4), TG_LIMIT_EV_RECOVERED);
    cr_assert_not(l.warned);
    cr_assert_eq(tg_limit_observe(&l, 3), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_NONE);
    /* re-armed: the next crossing warns again */
    cr_assert_eq(tg_limit_observe(&l, 9), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(l.current, 0);
    cr_assert_eq(l.high_water, 12);
}

Test(registry, thresholds_round_toward_the_exact_percentages)
{
    /* capacity 3: 80% is 2.4, so 3 warns and 2 does not; 50% is 1.5 */
    tg_limit_t l = {.capacity = 3};
    cr_assert_eq(tg_limit_observe(&l, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 3), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 1), TG_LIMIT_EV_RECOVERED);
    /* capacity 1: anything in use is 100%, only 0 is below half */
    tg_limit_t one = {.capacity = 1};
    cr_assert_eq(tg_limit_observe(&one, 1), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&one, 1), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&one, 0), TG_LIMIT_EV_RECOVERED);
    /* 4 MiB frame cap in bytes */
    tg_limit_t fr = {.capacity = 4194304};
    cr_assert_eq(tg_limit_observe(&fr, 3355443), TG_LIMIT_EV_NONE);    /* 79.99998% */
    cr_assert_eq(tg_limit_observe(&fr, 3355444), TG_LIMIT_EV_WARNING); /* 80.00002% */
    cr_assert_eq(tg_limit_observe(&fr, 2097152), TG_LIMIT_EV_NONE);    /* 50% */
    cr_assert_eq(tg_limit_observe(&fr, 2097151), TG_LIMIT_EV_RECOVERED);
}

Test(registry, huge_values_do_not_overflow)
{
    tg_limit_t l = {.capacity = UINT64_MAX};
    /* 80% of 2^64-1 is 14757395258967641292.0; a naive current * 100 wraps */
    cr_assert_eq(tg_limit_observe(&l, UINT64_C(14757395258967641291)), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_C(14757395258967641292)), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX / 2 + 1), TG_LIMIT_EV_NONE); /* 50% */
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX / 2), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(l.high_water, UINT64_MAX);
}

Test(registry, capacity_zero_never_warns)
{
    tg_limit_t l = {.capacity = 0};
    cr_assert_eq(tg_limit_observe(&l, 0), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, 1000), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_limit_observe(&l, UINT64_MAX), TG_LIMIT_EV_NONE);
    cr_assert_not(l.warned);
    cr_assert_eq(l.high_water, UINT64_MAX);
}

Test(registry, add_set_and_high_water)
{
    tg_registry_t r;
    tg_registry_init(&r);
    int a = tg_registry_add(&r, "agent.search.concurrency", TG_LIMIT_CONCURRENCY, "agent", 4);
    int b = tg_registry_add(&r, "agent.search.tool.web.rate", TG_LIMIT_RATE, "tool", 10);
    cr_assert_eq(a, 0);
    cr_assert_eq(b, 1);
    cr_assert_eq(r.n, 2);
    cr_assert_str_eq(r.v[b].name, "agent.search.tool.web.rate");
    cr_assert_str_eq(r.v[b].scope, "tool");
    cr_assert_eq(r.v[b].cat, TG_LIMIT_RATE);
    cr_assert_eq(r.v[b].capacity, 10);
    cr_assert_eq(r.v[b].current, 0);
    cr_assert_eq(r.v[b].high_water, 0);
    cr_assert_not(r.v[b].warned);

    cr_assert_eq(tg_registry_set(&r, a, 2), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, a, 4), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_registry_set(&r, a, 3), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, a, 1), TG_LIMIT_EV_RECOVERED);
    cr_assert_eq(r.v[a].current, 1);
    cr_assert_eq(r.v[a].high_water, 4);
    /* limits are independent */
    cr_assert_eq(r.v[b].high_water, 0);
    cr_assert_eq(tg_registry_set(&r, b, 8), TG_LIMIT_EV_WARNING);
    /* bad indices are ignored */
    cr_assert_eq(tg_registry_set(&r, -1, 100), TG_LIMIT_EV_NONE);
    cr_assert_eq(tg_registry_set(&r, 2, 100), TG_LIMIT_EV_NONE);
    tg_registry_free(&r);
    cr_assert_null(r.v);
    cr_assert_eq(r.n, 0);
}

/* The event function sees every crossing an update makes, once, with the
 * limit it concerns; unchanged usage and unregistered indices report
 * nothing. */
typedef struct {
    int n;
    tg_limit_ev_t last;
    char name[TG_LIMIT_NAME_MAX];
} ev_log_t;

static void ev_log(void *ctx, const tg_limit_t *l, tg_limit_ev_t ev)
{
    ev_log_t *g = ctx;
    g->n++;
    g->last = ev;
    snprintf(g->name, sizeof(g->name), "%s", l->name);
}

/* Issue 20 item 17: with a quiet re-arm (the gateway's), a capacity-1
 * limit, at 100% during each call and at 0 between them, warns once per
 * busy episode: it re-arms only after staying below 50% for the quiet
 * time, seen by the tick, and then warns again. */
Test(registry, quiet_rearm_warns_once_per_episode)
{
    tg_registry_t r;
    ev_log_t g = {0};
    tg_registry_init(&r);
    r.rearm_quiet_ms = 10000;
    tg_registry_on_event(&r, ev_log, &g);
    int a = tg_registry_add(&r, "agent.a.concurrency", TG_LIMIT_CONCURRENCY, "agent", 1);
    tg_registry_tick(&r, 1000);
    for (int call = 0; call < 5; call++) {
        tg_registry_update(&r, a, 1);
        tg_registry_update(&r, a, 0);
        tg_registry_tick(&r, 1000 + 1000 * (uint64_t)call);
    }
    cr_assert_eq(g.n, 1, "%d events for 5 calls", g.n);
    cr_assert_eq(g.last, TG_LIMIT_EV_WARNING);
    /* Idle from 5000 (the last fall below half was at the tick clock
     * 5000): 9.999 s later still the same episode, 10 s later re-armed. */
    tg_registry_tick(&r, 5000);
    tg_registry_update(&r, a, 1);
    tg_registry_update(&r, a, 0);
    tg_registry_tick(&r, 14999);
    cr_assert_eq(g.n, 1);
    tg_registry_tick(&r, 15000);
    cr_assert_eq(g.n, 2);
    cr_assert_eq(g.last, TG_LIMIT_EV_RECOVERED);
    tg_registry_tick(&r, 16000);
    cr_assert_eq(g.n, 2);
    tg_registry_update(&r, a, 1);
    cr_assert_eq(g.n, 3);
    cr_assert_eq(g.last, TG_LIMIT_EV_WARNING);
    /* Busy again before the quiet time is up: the clock starts over. */
    tg_registry_update(&r, a, 0);
    tg_registry_tick(&r, 20000);
    tg_registry_update(&r, a, 1);
    tg_registry_tick(&r, 40000);
    cr_assert_eq(g.n, 3, "re-armed while busy");
    tg_registry_free(&r);
}

Test(registry, update_reports_crossings_to_the_event_function)
{
    tg_registry_t r;
    ev_log_t g = {0};
    tg_registry_init(&r);
    int a = tg_registry_add(&r, "agent.a.concurrency", TG_LIMIT_CONCURRENCY, "agent", 10);
    tg_registry_update(&r, a, 9); /* no function yet: nothing reported */
    cr_assert_eq(g.n, 0);
    tg_registry_update(&r, a, 1);
    tg_registry_on_event(&r, ev_log, &g);
    tg_registry_update(&r, a, 7);
    cr_assert_eq(g.n, 0);
    tg_registry_update(&r, a, 8);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.last, TG_LIMIT_EV_WARNING);
    cr_assert_str_eq(g.name, "agent.a.concurrency");
    tg_registry_update(&r, a, 8);
    tg_registry_update(&r, a, 9);
    tg_registry_update(&r, a, 5);
    cr_assert_eq(g.n, 1);
    tg_registry_update(&r, a, 4);
    cr_assert_eq(g.n, 2);
    cr_assert_eq(g.last, TG_LIMIT_EV_RECOVERED);
    tg_registry_update(&r, -1, 100);
    tg_registry_update(&r, 7, 100);
    tg_registry_emit(&r, a, TG_LIMIT_EV_NONE);
    cr_assert_eq(g.n, 2);
    tg_registry_emit(&r, a, TG_LIMIT_EV_WARNING);
    cr_assert_eq(g.n, 3);
    tg_registry_free(&r);
}

Test(registry, upsert_keeps_the_row_and_its_state)
{
    tg_registry_t r;
    tg_registry_init(&r);
    int a = tg_registry_upsert(&r, "agent.a.queue", TG_LIMIT_QUEUE, "agent", 10);
    cr_assert_eq(a, 0);
    cr_assert_eq(tg_registry_set(&r, a, 9), TG_LIMIT_EV_WARNING);
    cr_assert_eq(tg_registry_upsert(&r, "agent.b.queue", TG_LIMIT_QUEUE, "agent", 3), 1);
    cr_assert_eq(tg_registry_upsert(&r, "agent.a.queue", TG_LIMIT_QUEUE, "agent", 100), a);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.v[a].capacity, 100);
    cr_assert_eq(r.v[a].high_water, 9);
    cr_assert(r.v[a].warned);
    /* the new capacity's thresholds apply at the next update */
    cr_assert_eq(tg_registry_set(&r, a, 20), TG_LIMIT_EV_RECOVERED);
    tg_registry_free(&r);
}

/* A row two writers fill (a reload's old and new routes of one agent)
 * holds the sum of their counts: neither overwrites the other, and a
 * writer that ends takes its part back. */
Test(registry, shared_rows_sum_their_writers)
{
    tg_registry_t r;
    tg_registry_init(&r);
    int i = tg_registry_add(&r, "agent.a.concurrency", TG_LIMIT_CONCURRENCY, "agent", 10);
    cr_assert_geq(i, 0);
    uint64_t old = 0, cur = 0;
    tg_registry_share(&r, i, &old, 3);
    tg_registry_share(&r, i, &cur, 0); /* the new one, idle: no overwrite */
    cr_assert_eq(r.v[i].current, 3);
    tg_registry_share(&r, i, &cur, 2);
    cr_assert_eq(r.v[i].current, 5);
    tg_registry_share(&r, i, &old, 1);
    cr_assert_eq(r.v[i].current, 3);
    cr_assert_eq(r.v[i].high_water, 5);
    tg_registry_share(&r, i, &old, 0);
    tg_registry_share(&r, i, &cur, 0);
    cr_assert_eq(r.v[i].current, 0);
    cr_assert_eq(tg_registry_current(&r, i, 99), 0);
    cr_assert_eq(tg_registry_current(&r, -1, 99), 99);
    uint64_t none = 0;
    tg_registry_share(&r, -1, &none, 4); /* no row: the share is still kept */
    cr_assert_eq(none, 4);
    tg_registry_update_cap(&r, i, 9, 20);
    cr_assert_eq(r.v[i].capacity, 20);
    cr_assert_eq(r.v[i].current, 9);
    tg_registry_free(&r);
}

Test(registry, many_entries_keep_their_indices)
{
    tg_registry_t r;
    tg_registry_init(&r);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "limit.%d", i);
        cr_assert_eq(tg_registry_add(&r, name, TG_LIMIT_QUEUE, "instance", (uint64_t)i + 1), i);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "limit.%d", i);
        cr_assert_str_eq(r.v[i].name, name);
        cr_assert_eq(r.v[i].capacity, (uint64_t)i + 1);
    }
    tg_registry_free(&r);
}

Test(registry, names_are_truncated_safely)
{
    tg_registry_t r;
    tg_registry_init(&r);
    char long_name[400];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    int i = tg_registry_add(&r, long_name, TG_LIMIT_FRAME, "a-scope-longer-than-16", 1);
    cr_assert_geq(i, 0);
    cr_assert_eq(strlen(r.v[i].name), TG_LIMIT_NAME_MAX - 1);
    cr_assert_str_eq(r.v[i].scope, "a-scope-longer-");

    /* a cut inside a multi-byte character backs off to its first byte:
     * 158 ASCII bytes then "é" (2 bytes) would end at byte 160 */
    char utf[200];
    memset(utf, 'b', 158);
    memcpy(utf + 158, "\xc3\xa9tail", 7);
    int j = tg_registry_add(&r, utf, TG_LIMIT_FRAME, "tool", 1);
    cr_assert_eq(strlen(r.v[j].name), 158);
    cr_assert_eq(r.v[j].name[157], 'b');

    /* exactly fits: NAME_MAX - 1 bytes are kept whole */
    char fit[TG_LIMIT_NAME_MAX];
    memset(fit, 'c', sizeof(fit) - 1);
    fit[sizeof(fit) - 1] = '\0';
    int k = tg_registry_add(&r, fit, TG_LIMIT_FRAME, "tool", 1);
    cr_assert_str_eq(r.v[k].name, fit);

    int m = tg_registry_add(&r, NULL, TG_LIMIT_FRAME, NULL, 1);
    cr_assert_str_eq(r.v[m].name, "");
    cr_assert_str_eq(r.v[m].scope, "");
    tg_registry_free(&r);
}

Test(registry, category_names)
{
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_FRAME), "frame");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_RATE), "rate");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_CONCURRENCY), "concurrency");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_QUEUE), "queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_WRITE_QUEUE), "write_queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_AUDIT_QUEUE), "audit_queue");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_STDERR), "stderr");
    cr_assert_str_eq(tg_limit_cat_name(TG_LIMIT_RESOURCE), "resource");
    cr_assert_str_eq(tg_limit_cat_name((tg_limit_cat_t)99), "unknown");
}

/* ---- the admin endpoint's own bounds ------------------------------------
 * A real server on a loopback port, its loop on a thread; the registry is
 * read through /limits (rendered on the loop thread) while it runs, and
 * directly once the thread is joined. */

#define ADM_CONNS 5u     /* max_connections: 80% is 4 */
#define ADM_HEAD 1024u   /* max_header_bytes */
#define ADM_BODY 65536u  /* max_response_bytes: the floor */

static tg_registry_t areg;
static int aevents[64][3]; /* [idx][tg_limit_ev_t]: events handed to the provider */
static uv_loop_t aloop;
static uv_async_t astop;
static pthread_t athread;
static tg_admin_t *adm;
static char aaddr[64];

static const tg_registry_t *a_registry(void *ctx)
{
    (void)ctx;
    return &areg;
}

static void a_event(void *ctx, int idx, tg_limit_ev_t ev)
{
    (void)ctx;
    if (idx >= 0 && idx < 64)
        aevents[idx][ev]++;
}

static void a_on_stop(uv_async_t *h)
{
    tg_admin_close(adm);
    uv_close((uv_handle_t *)h, NULL);
}

static void *a_run(void *arg)
{
    (void)arg;
    uv_run(&aloop, UV_RUN_DEFAULT);
    return NULL;
}

static void a_start(void)
{
    tg_registry_init(&areg);
    memset(aevents, 0, sizeof aevents);
    /* one limit of the router's own first, so the server's entries do not
     * sit at index 0 by accident */
    cr_assert_eq(tg_registry_add(&areg, "audit.queue", TG_LIMIT_AUDIT_QUEUE, "instance", 64), 0);
    tg_admin_provider_t prov = {.registry = a_registry, .own = &areg, .limit_event = a_event};
    tg_admin_opts_t o = {.max_connections = ADM_CONNS, .max_header_bytes = ADM_HEAD,
                         .max_response_bytes = ADM_BODY};
    tg_err_t err = {""};
    cr_assert_eq(uv_loop_init(&aloop), 0);
    cr_assert_eq(tg_admin_start(&adm, &aloop, "127.0.0.1:0", &o, &prov, &err), 0, "%s", err.msg);
    cr_assert_gt(tg_admin_bound(adm, aaddr, sizeof aaddr), 0);
    cr_assert_eq(uv_async_init(&aloop, &astop, a_on_stop), 0);
    cr_assert_eq(pthread_create(&athread, NULL, a_run, NULL), 0);
}

static void a_stop(void)
{
    uv_async_send(&astop);
    pthread_join(athread, NULL);
    cr_assert_eq(uv_loop_close(&aloop), 0);
}

static int a_dial(void)
{
    const char *colon = strrchr(aaddr, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
    return fd;
}

/* Send <req> on a new connection and read the answer's status. */
static int a_exchange(const char *req, size_t len)
{
    int fd = a_dial();
    cr_assert_eq(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    close(fd);
    cr_assert_gt(n, 12);
    buf[n] = '\0';
    return atoi(buf + 9);
}

typedef struct snap {
    uint64_t current, high_water, capacity;
    char category[32], scope[16];
} snap_t;

/* GET /limits (body kept in <body>, freed by the caller) and the figures
 * of entry <name>. */
static snap_t a_limit(const char *name, char **body, size_t *len)
{
    tg_err_t err = {""};
    int st = tg_admin_get(aaddr, "/limits", 5000, 1u << 20, body, len, &err);
    cr_assert_eq(st, 200, "GET /limits: %d %s", st, err.msg);
    json_t *doc = json_loads(*body, 0, NULL);
    cr_assert_not_null(doc);
    snap_t s = {0};
    size_t i;
    json_t *e;
    bool found = false;
    json_array_foreach(json_object_get(doc, "limits"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) != 0)
            continue;
        found = true;
        s.current = (uint64_t)json_integer_value(json_object_get(e, "current"));
        s.high_water = (uint64_t)json_integer_value(json_object_get(e, "high_water"));
        s.capacity = (uint64_t)json_integer_value(json_object_get(e, "capacity"));
        snprintf(s.category, sizeof s.category, "%s",
                 json_string_value(json_object_get(e, "category")));
        snprintf(s.scope, sizeof s.scope, "%s", json_string_value(json_object_get(e, "scope")));
    }
    json_decref(doc);
    cr_assert(found, "%s is not on /limits", name);
    return s;
}

static int a_index(const char *name)
{
    for (size_t i = 0; i < areg.n; i++)
        if (strcmp(areg.v[i].name, name) == 0)
            return (int)i;
    return -1;
}

TestSuite(registry_admin, .timeout = 30);

Test(registry_admin, connections_are_counted_with_their_high_water)
{
    a_start();
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = a_dial();
    char *body;
    size_t len;
    /* 4 idle connections and the one asking: 5 of 5 */
    snap_t s = a_limit("admin.connections", &body, &len);
    free(body);
    cr_assert_str_eq(s.category, "concurrency");
    cr_assert_str_eq(s.scope, "instance");
    cr_assert_eq(s.capacity, ADM_CONNS);
    cr_assert_eq(s.current, 5);
    cr_assert_eq(s.high_water, 5);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    /* The server sees the closes on its next loop turns. */
    for (int tries = 0; tries < 100; tries++) {
        s = a_limit("admin.connections", &body, &len);
        free(body);
        if (s.current == 1)
            break;
        usleep(20000);
    }
    cr_assert_eq(s.current, 1, "closed connections are still counted: %llu",
                 (unsigned long long)s.current);
    cr_assert_eq(s.high_water, 5);
    a_stop();
    int idx = a_index("admin.connections");
    cr_assert_geq(idx, 1);
    /* 4 of 5 crossed 80% once; back to 1 (below 50%) re-armed it */
    cr_assert_eq(aevents[idx][TG_LIMIT_EV_WARNING], 1);
    cr_assert_eq(aevents[idx][TG_LIMIT_EV_RECOVERED], 1);
    tg_registry_free(&areg);
}

Test(registry_admin, header_and_response_bytes_are_measured)
{
    a_start();
    /* A request whose head is exactly 900 bytes. */
    char req[1024];
    const char *pre = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: ";
    size_t pl = strlen(pre);
    memcpy(req, pre, pl);
    memset(req + pl, 'a', 900 - pl - 4);
    memcpy(req + 900 - 4, "\r\n\r\n", 4);
    cr_assert_eq(a_exchange(req, 900), 200);
    char *body1, *body2;
    size_t len1, len2;
    snap_t h = a_limit("admin.header_bytes", &body1, &len1);
    cr_assert_str_eq(h.category, "frame");
    cr_assert_eq(h.capacity, ADM_HEAD);
    /* The /limits request itself is the latest head; the padded one is the
     * highest. */
    cr_assert_eq(h.high_water, 900);
    cr_assert_lt(h.current, 300);
    cr_assert_gt(h.current, 20);
    /* A rendered body is recorded once it is rendered: the next snapshot
     * shows the previous one's exact length. */
    snap_t b = a_limit("admin.response_bytes", &body2, &len2);
    cr_assert_str_eq(b.category, "frame");
    cr_assert_eq(b.capacity, ADM_BODY);
    cr_assert_eq(b.current, len1);
    free(body1);
    free(body2);

    /* An over-cap head is refused (431) and recorded at the cap. */
    char big[2048];
    memcpy(big, pre, pl);
    memset(big + pl, 'b', sizeof big - pl);
    cr_assert_eq(a_exchange(big, sizeof big), 431);
    h = a_limit("admin.header_bytes", &body1, &len1);
    free(body1);
    cr_assert_eq(h.high_water, ADM_HEAD);
    a_stop();
    /* 900 of 1024 warned, the small /limits head after it re-armed, the
     * 431 warned again and the last /limits re-armed again. */
    int idx = a_index("admin.header_bytes");
    cr_assert_eq(aevents[idx][TG_LIMIT_EV_WARNING], 2);
    cr_assert_eq(aevents[idx][TG_LIMIT_EV_RECOVERED], 2);
    tg_registry_free(&areg);
}

Test(registry_admin, a_body_over_the_bound_is_recorded_at_the_cap)
{
    a_start();
    /* Enough long entries that /limits cannot be rendered in 64 KiB. */
    char name[TG_LIMIT_NAME_MAX];
    for (int i = 0; i < 600; i++) {
        snprintf(name, sizeof name, "agent.padding-%03d.%0120d", i, 0);
        cr_assert_geq(tg_registry_add(&areg, name, TG_LIMIT_RATE, "agent", 1), 0);
    }
    char *body = NULL;
    tg_err_t err = {""};
    size_t len;
    cr_assert_eq(tg_admin_get(aaddr, "/limits", 5000, 1u << 20, &body, &len, &err), 500);
    free(body);
    a_stop();
    int idx = a_index("admin.response_bytes");
    cr_assert_geq(idx, 0);
    cr_assert_eq(areg.v[idx].current, ADM_BODY);
    cr_assert_eq(areg.v[idx].high_water, ADM_BODY);
    cr_assert_eq(aevents[idx][TG_LIMIT_EV_WARNING], 1);
    tg_registry_free(&areg);
}

Test(registry_admin, no_registry_no_entries)
{
    /* A provider without <own> (the admin tests' fake router): nothing is
     * registered and nothing breaks. */
    tg_registry_init(&areg);
    tg_admin_provider_t prov = {.registry = a_registry};
    tg_err_t err = {""};
    cr_assert_eq(uv_loop_init(&aloop), 0);
    cr_assert_eq(tg_admin_start(&adm, &aloop, "127.0.0.1:0", NULL, &prov, &err), 0);
    cr_assert_gt(tg_admin_bound(adm, aaddr, sizeof aaddr), 0);
    cr_assert_eq(uv_async_init(&aloop, &astop, a_on_stop), 0);
    cr_assert_eq(pthread_create(&athread, NULL, a_run, NULL), 0);
    char *body = NULL;
    size_t len;
    cr_assert_eq(tg_admin_get(aaddr, "/limits", 5000, 1u << 20, &body, &len, &err), 200);
    cr_assert_str_eq(body, "{\"instance\":null,\"limits\":[]}\n");
    free(body);
    a_stop();
    cr_assert_eq(areg.n, 0);
}
