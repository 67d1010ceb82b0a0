/* Admin endpoint: the metrics model and its encoders (Prometheus text
 * checked by a strict grammar, and by promtool or prometheus_client when
 * installed), the HTTP server on a real loopback socket (routes, content
 * types, HEAD, refused methods and bodies, Host check, pipelining), its
 * bounds (header bytes, connections, idle timeout), loopback-only
 * addresses, a canary that no planted secret reaches any output, and
 * `toolgate status` against the test server. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <uv.h>

#include "limits/registry.h"
#include "router/admin/admin.h"
#include "router/cli/cli.h"
#include "router/gateway/metrics.h"
#include "router/admin/metrics_enc.h"
#include "tests/tg_harness.h"

#define CANARY "SECRET-CANARY-4242"

/* ---- a fake router: registry + metrics -------------------------------- */

static tg_registry_t reg;
static tg_metrics_t met;
static int refreshes;

static const tg_registry_t *p_registry(void *ctx)
{
    (void)ctx;
    return &reg;
}

static const tg_metrics_t *p_metrics(void *ctx)
{
    (void)ctx;
    return &met;
}

static void p_refresh(void *ctx)
{
    (void)ctx;
    refreshes++;
}

static const tg_admin_provider_t provider = {
    .ctx = NULL, .refresh = p_refresh, .registry = p_registry, .metrics = p_metrics};

/* Agents: "search" (tools web, fetch) and one whose id has odd bytes and a
 * planted secret: config validation refuses such ids, so this is the
 * defence behind it. */
static char odd_agent[] = "ev\"il<script>" CANARY "\n";
static char t_web[] = "web", t_fetch[] = "fetch", t_x[] = "x";

static void fill_fake(void)
{
    static tg_tool_cfg_t search_tools[2], odd_tools[1];
    static tg_agent_cfg_t agents[2];
    static char inst[] = "host-a", search[] = "search";
    tg_config_t cfg;

    memset(&cfg, 0, sizeof(cfg));
    memset(agents, 0, sizeof(agents));
    search_tools[0].name = t_web;
    search_tools[1].name = t_fetch;
    odd_tools[0].name = t_x;
    agents[0].id = search;
    agents[0].tools = search_tools;
    agents[0].ntools = 2;
    agents[1].id = odd_agent;
    agents[1].tools = odd_tools;
    agents[1].ntools = 1;
    cfg.instance = inst;
    cfg.agents = agents;
    cfg.nagents = 2;
    cr_assert_eq(tg_metrics_init(&met, &cfg), 0);

    tg_registry_init(&reg);
    int i;
    i = tg_registry_add(&reg, "agent.search.concurrency", TG_LIMIT_CONCURRENCY, "agent", 10);
    tg_registry_set(&reg, i, 9);
    i = tg_registry_add(&reg, "agent.search.queue", TG_LIMIT_QUEUE, "agent", 16);
    tg_registry_set(&reg, i, 12);
    tg_registry_set(&reg, i, 8);
    i = tg_registry_add(&reg, "agent.search.tool.web.rate", TG_LIMIT_RATE, "tool", 5);
    tg_registry_set(&reg, i, 5);
    i = tg_registry_add(&reg, "agent.search.memory", TG_LIMIT_RESOURCE, "agent", 0);
    tg_registry_set(&reg, i, 1234);
    i = tg_registry_add(&reg, "agent.ev\"il " CANARY ".rate", TG_LIMIT_RATE, "agent", 60);
    tg_registry_set(&reg, i, 6);

    tg_metrics_call(&met, 0, 0, TG_OUTCOME_OK, 3);      /* web, bucket 0.005 */
    tg_metrics_call(&met, 0, 0, TG_OUTCOME_OK, 40);     /* web, bucket 0.05 */
    tg_metrics_call(&met, 0, 1, TG_OUTCOME_ERROR, 5);   /* fetch, bucket 0.005 (le is <=) */
    tg_metrics_call(&met, 0, -1, TG_OUTCOME_OK, 70000); /* unconfigured tool, +Inf */
    tg_metrics_call(&met, 0, 0, TG_OUTCOME_DENIED, 0);  /* not in the histogram */
    tg_metrics_call(&met, 0, 0, TG_OUTCOME_DENIED, 0);
    tg_metrics_call(&met, 1, 0, TG_OUTCOME_TIMEOUT, 15000);
    tg_metrics_denial(&met, TG_DENY_RATE, 0, "web", 3, 1768564800000LL);
    static const char bad_tool[] = "web?token=" CANARY;
    tg_metrics_denial(&met, TG_DENY_CONCURRENCY, 0, bad_tool, sizeof(bad_tool) - 1,
                      1768564801000LL);
    tg_metrics_denial(&met, TG_DENY_TIMEOUT, 1, NULL, 0, 1768564802000LL);
    tg_metrics_load(&met, 0, 2, 1);
    tg_metrics_agent_state(&met, 0, TG_AGENT_RUNNING, 4242);
    tg_metrics_agent_restarted(&met, 0);
    tg_metrics_agent_usage(&met, 0, 50u << 20, 60u << 20, 512u << 20, 1500000, 7);
    tg_metrics_store(&met, TG_STORE_REDIS, true);
    tg_metrics_audit(&met, 3, 4096, 2);
}

static void free_fake(void)
{
    tg_metrics_free(&met);
    tg_registry_free(&reg);
}

/* ---- the server on a loop thread -------------------------------------- */

static uv_loop_t loop;
static uv_async_t stop_async;
static pthread_t loop_thread;
static tg_admin_t *adm;
static char addr[64];
static uint16_t port;

static void on_stop(uv_async_t *h)
{
    tg_admin_close(adm);
    uv_close((uv_handle_t *)h, NULL);
}

static void *run_loop(void *arg)
{
    (void)arg;
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

static void start_server(const tg_admin_opts_t *o)
{
    tg_err_t err = {""};
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(tg_admin_start(&adm, &loop, "127.0.0.1:0", o, &provider, &err), 0, "start: %s",
                 err.msg);
    cr_assert_gt(tg_admin_bound(adm, addr, sizeof(addr)), 0);
    const char *colon = strrchr(addr, ':');
    port = (uint16_t)atoi(colon + 1);
    cr_assert_neq(port, 0, "an ephemeral port was bound: %s", addr);
    cr_assert_eq(strncmp(addr, "127.0.0.1:", 10), 0, "%s", addr);
    cr_assert_eq(uv_async_init(&loop, &stop_async, on_stop), 0);
    cr_assert_eq(pthread_create(&loop_thread, NULL, run_loop, NULL), 0);
}

static void stop_server(void)
{
    uv_async_send(&stop_async);
    pthread_join(loop_thread, NULL);
    /* Every handle closed and the server freed: the loop closes cleanly. */
    cr_assert_eq(uv_loop_close(&loop), 0);
}

static void setup_default(void)
{
    fill_fake();
    start_server(NULL);
}

static void teardown(void)
{
    stop_server();
    free_fake();
}

/* ---- a raw client ----------------------------------------------------- */

static int dial(void)
{
    int fd = tgh_tcp_dial(port);
    cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        cr_assert_gt(w, 0, "send: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}

/* Read until EOF (or an error such as a reset, or the 5 s timeout). */
static char *read_all(int fd, size_t *len)
{
    char *buf = tgh_read_all(fd, len);
    cr_assert_not_null(buf);
    return buf;
}

typedef struct resp {
    char *raw;
    size_t raw_len;
    int status;
    const char *body; /* into raw */
    size_t body_len;
} resp_t;

static void resp_free(resp_t *r)
{
    free(r->raw);
}

/* The value of header <name> in the head of <r>, into <out>. */
static bool header(const resp_t *r, const char *name, char *out, size_t cap)
{
    const char *end = strstr(r->raw, "\r\n\r\n");
    size_t nl = strlen(name);
    for (const char *p = strstr(r->raw, "\r\n"); p != NULL && p < end; p = strstr(p + 2, "\r\n")) {
        const char *h = p + 2;
        if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            const char *v = h + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t k = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
            memcpy(out, v, k);
            out[k] = '\0';
            return true;
        }
    }
    return false;
}

static void parse_resp(resp_t *r)
{
    r->status = -1;
    r->body = NULL;
    r->body_len = 0;
    if (sscanf(r->raw, "HTTP/1.1 %d ", &r->status) != 1)
        return;
    const char *end = strstr(r->raw, "\r\n\r\n");
    cr_assert_not_null(end, "a complete head");
    r->body = end + 4;
    r->body_len = r->raw_len - (size_t)(r->body - r->raw);
}

/* The response the server sends on <fd> until it closes; <fd> is closed. */
static resp_t finish(int fd)
{
    resp_t r;
    r.raw = read_all(fd, &r.raw_len);
    close(fd);
    parse_resp(&r);
    return r;
}

/* <n> bytes of <req> on a fresh connection, and the response. */
static resp_t exchange(const char *req, size_t n)
{
    int fd = dial();
    send_all(fd, req, n);
    return finish(fd);
}

/* One request on a fresh connection with "Connection: close". */
static resp_t request(const char *method, const char *path, const char *extra)
{
    char req[8192];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n",
                     method, path, addr, extra != NULL ? extra : "");
    cr_assert(n > 0 && (size_t)n < sizeof(req));
    return exchange(req, (size_t)n);
}

static resp_t get(const char *path)
{
    return request("GET", path, NULL);
}

/* GET <path>: a 200 whose body is a JSON document (the caller frees). */
static json_t *get_json(const char *path)
{
    resp_t r = get(path);
    cr_assert_eq(r.status, 200);
    json_error_t e;
    json_t *doc = json_loadb(r.body, r.body_len, 0, &e);
    cr_assert_not_null(doc, "%s", e.text);
    resp_free(&r);
    return doc;
}

static void assert_ctype(const resp_t *r, const char *want)
{
    char ct[256];
    cr_assert(header(r, "Content-Type", ct, sizeof(ct)), "Content-Type present");
    cr_assert_str_eq(ct, want);
}

static void assert_len_matches(const resp_t *r)
{
    char cl[32];
    cr_assert(header(r, "Content-Length", cl, sizeof(cl)));
    cr_assert_eq((size_t)strtoull(cl, NULL, 10), r->body_len, "Content-Length %s vs body %zu", cl,
                 r->body_len);
}

/* ---- strict Prometheus text 0.0.4 grammar ----------------------------- */

typedef struct fam {
    char name[128];
    char type[16];
} fam_t;

typedef struct checker {
    fam_t fams[128];
    size_t nfams;
    char *series[4096];
    size_t nseries;
    char cur_fam[128]; /* family whose samples are being read */
    /* histogram state */
    char h_key[1200];
    double h_prev_le, h_prev_count;
    struct {
        char key[1200];
        double inf;
    } h_inf[256];
    size_t n_inf;
} checker_t;

static void scopy(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

static fam_t *fam_find(checker_t *k, const char *name)
{
    for (size_t i = 0; i < k->nfams; i++)
        if (strcmp(k->fams[i].name, name) == 0)
            return &k->fams[i];
    return NULL;
}

static bool parse_value(const char *s, double *v)
{
    if (strcmp(s, "+Inf") == 0 || strcmp(s, "-Inf") == 0 || strcmp(s, "NaN") == 0) {
        *v = 0;
        return true;
    }
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && *end == '\0' && errno == 0;
}

/* The family a sample belongs to: its own name, or for a histogram's
 * _bucket/_sum/_count the base name when that was TYPEd histogram. */
static const char *family_of(checker_t *k, const char *name, const char **suffix)
{
    static char base[128];
    static const char *sfx[] = {"_bucket", "_sum", "_count"};
    *suffix = "";
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(name), s = strlen(sfx[i]);
        if (n > s && strcmp(name + n - s, sfx[i]) == 0) {
            memcpy(base, name, n - s);
            base[n - s] = '\0';
            fam_t *f = fam_find(k, base);
            if (f != NULL && strcmp(f->type, "histogram") == 0) {
                *suffix = sfx[i];
                return base;
            }
        }
    }
    return name;
}

/* A "# HELP" or "# TYPE" line: a valid name, a known type, one TYPE per
 * family and before its samples, counters named *_total. */
static void check_comment(checker_t *k, const char *line, size_t lineno)
{
    char kw[8], name[128], rest[512] = "";
    if (sscanf(line, "# %7s %127s %511[^\n]", kw, name, rest) < 2 ||
        (strcmp(kw, "HELP") != 0 && strcmp(kw, "TYPE") != 0))
        return;
    cr_assert(name_start(name[0]), "line %zu: metric name '%s'", lineno, name);
    for (const char *p = name; *p; p++)
        cr_assert(name_char(*p), "line %zu: metric name '%s'", lineno, name);
    fam_t *f = fam_find(k, name);
    if (strcmp(kw, "TYPE") == 0) {
        cr_assert(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0 ||
                      strcmp(rest, "histogram") == 0 || strcmp(rest, "summary") == 0 ||
                      strcmp(rest, "untyped") == 0,
                  "line %zu: type '%s'", lineno, rest);
        cr_assert(f == NULL || f->type[0] == '\0', "line %zu: second TYPE for %s", lineno, name);
        cr_assert_neq(strcmp(k->cur_fam, name), 0, "line %zu: TYPE after samples", lineno);
        if (strcmp(rest, "counter") == 0) {
            size_t n = strlen(name);
            cr_assert(n > 6 && strcmp(name + n - 6, "_total") == 0,
                      "line %zu: counter %s should end in _total", lineno, name);
        }
    }
    if (f == NULL) {
        cr_assert_lt(k->nfams, 128);
        f = &k->fams[k->nfams++];
        snprintf(f->name, sizeof(f->name), "%s", name);
        f->type[0] = '\0';
    }
    if (strcmp(kw, "TYPE") == 0)
        scopy(f->type, sizeof(f->type), rest);
    else
        cr_assert(strlen(rest) > 0, "line %zu: empty HELP", lineno);
}

/* One sample line, parsed. */
typedef struct sample {
    char name[128];
    char labels[1024]; /* "name=value;" for every label but le, in order */
    char le[64];
    double v;
} sample_t;

/* The label set at <*pp> ('{' already passed) up to and past its '}'. */
static void parse_labels(const char **pp, size_t lineno, sample_t *s)
{
    const char *p = *pp;
    size_t ln = 0;
    while (*p != '}') {
        char lname[64];
        size_t m = 0;
        cr_assert(name_start(*p) && *p != ':', "line %zu: label name at '%s'", lineno, p);
        while (name_char(*p) && *p != ':') {
            cr_assert_lt(m, sizeof(lname) - 1);
            lname[m++] = *p++;
        }
        lname[m] = '\0';
        cr_assert_eq(*p, '=', "line %zu: '=' after label %s", lineno, lname);
        p++;
        cr_assert_eq(*p, '"', "line %zu: quoted label value", lineno);
        p++;
        char val[512];
        size_t vn = 0;
        while (*p != '"') {
            cr_assert_neq(*p, '\0', "line %zu: unterminated label value", lineno);
            cr_assert_neq(*p, '\n', "line %zu: raw newline in label", lineno);
            if (*p == '\\') {
                p++;
                cr_assert(*p == '\\' || *p == '"' || *p == 'n', "line %zu: escape \\%c", lineno,
                          *p);
            }
            cr_assert_lt(vn, sizeof(val) - 1);
            val[vn++] = *p++;
        }
        val[vn] = '\0';
        p++;
        if (strcmp(lname, "le") == 0)
            scopy(s->le, sizeof(s->le), val);
        else
            ln += (size_t)snprintf(s->labels + ln, sizeof(s->labels) - ln, "%s=%s;", lname, val);
        if (*p == ',')
            p++;
        else
            cr_assert_eq(*p, '}', "line %zu: ',' or '}' after a label", lineno);
    }
    *pp = p + 1;
}

/* name{l="v",...} value [timestamp] */
static void parse_sample(const char *line, size_t lineno, sample_t *s)
{
    const char *p = line;
    size_t n = 0;
    cr_assert(name_start(*p), "line %zu: sample must start with a name: %s", lineno, line);
    while (name_char(*p)) {
        cr_assert_lt(n, sizeof(s->name) - 1);
        s->name[n++] = *p++;
    }
    s->name[n] = '\0';
    s->labels[0] = '\0';
    s->le[0] = '\0';
    if (*p == '{') {
        p++;
        parse_labels(&p, lineno, s);
    }
    cr_assert_eq(*p, ' ', "line %zu: one space before the value", lineno);
    p++;
    char valtxt[64];
    size_t vn = 0;
    while (*p != '\0' && *p != ' ') {
        cr_assert_lt(vn, sizeof(valtxt) - 1);
        valtxt[vn++] = *p++;
    }
    valtxt[vn] = '\0';
    cr_assert(parse_value(valtxt, &s->v), "line %zu: value '%s'", lineno, valtxt);
    if (*p == ' ') {
        char *end;
        p++;
        strtoll(p, &end, 10);
        cr_assert(end != p && *end == '\0', "line %zu: timestamp '%s'", lineno, p);
    }
}

/* A histogram sample of family <famname>: buckets cumulative with le
 * increasing, _count equal to the +Inf bucket. */
static void check_histogram(checker_t *k, const char *famname, const char *suffix,
                            const sample_t *s, size_t lineno)
{
    char hk[1200];
    snprintf(hk, sizeof(hk), "%s|%s", famname, s->labels);
    if (strcmp(suffix, "_bucket") == 0) {
        cr_assert_neq(s->le[0], '\0', "line %zu: bucket without le", lineno);
        double lev = strcmp(s->le, "+Inf") == 0 ? 1e308 : strtod(s->le, NULL);
        if (strcmp(k->h_key, hk) == 0) {
            cr_assert_gt(lev, k->h_prev_le, "line %zu: le not increasing", lineno);
            cr_assert_geq(s->v, k->h_prev_count, "line %zu: buckets not cumulative", lineno);
        }
        scopy(k->h_key, sizeof(k->h_key), hk);
        k->h_prev_le = lev;
        k->h_prev_count = s->v;
        if (lev == 1e308) {
            cr_assert_lt(k->n_inf, 256);
            scopy(k->h_inf[k->n_inf].key, sizeof(k->h_inf[0].key), hk);
            k->h_inf[k->n_inf++].inf = s->v;
        }
    } else if (strcmp(suffix, "_count") == 0) {
        bool found = false;
        for (size_t i = 0; i < k->n_inf; i++)
            if (strcmp(k->h_inf[i].key, hk) == 0) {
                cr_assert_eq(k->h_inf[i].inf, s->v, "line %zu: _count != +Inf bucket", lineno);
                found = true;
            }
        cr_assert(found, "line %zu: histogram %s without a +Inf bucket", lineno, hk);
    }
}

static void check_line(checker_t *k, const char *line, size_t lineno)
{
    if (line[0] == '#') {
        check_comment(k, line, lineno);
        return;
    }
    sample_t s;
    parse_sample(line, lineno, &s);

    const char *suffix;
    const char *famname = family_of(k, s.name, &suffix);
    fam_t *f = fam_find(k, famname);
    cr_assert_not_null(f, "line %zu: sample %s has no TYPE", lineno, s.name);
    cr_assert_neq(f->type[0], '\0', "line %zu: sample %s has no TYPE", lineno, s.name);
    if (strcmp(k->cur_fam, famname) != 0) {
        /* A family's samples are contiguous: it may not be reopened. */
        for (size_t i = 0; i < k->nseries; i++) {
            const char *ser = k->series[i];
            cr_assert(strncmp(ser, famname, strlen(famname)) != 0 || ser[strlen(famname)] != '|',
                      "line %zu: family %s reopened", lineno, famname);
        }
        snprintf(k->cur_fam, sizeof(k->cur_fam), "%s", famname);
    }
    if (strcmp(f->type, "counter") == 0)
        cr_assert_geq(s.v, 0, "line %zu: negative counter", lineno);
    char key[1400];
    snprintf(key, sizeof(key), "%s|%s%s|%s", famname, suffix, s.labels, s.le);
    for (size_t i = 0; i < k->nseries; i++)
        cr_assert_neq(strcmp(k->series[i], key), 0, "line %zu: duplicate series %s", lineno, key);
    cr_assert_lt(k->nseries, 4096);
    k->series[k->nseries++] = strdup(key);

    if (strcmp(f->type, "histogram") == 0)
        check_histogram(k, famname, suffix, &s, lineno);
}

static void check_exposition(const char *text, size_t len)
{
    checker_t *k = calloc(1, sizeof(*k));
    cr_assert_gt(len, 0);
    cr_assert_eq(text[len - 1], '\n', "ends with a newline");
    cr_assert_eq(strlen(text), len, "no NUL in the text");
    const char *p = text;
    size_t lineno = 0;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        char line[2048];
        size_t n = (size_t)(nl - p);
        cr_assert_lt(n, sizeof(line));
        cr_assert_gt(n, 0, "line %zu: empty line", lineno + 1);
        memcpy(line, p, n);
        line[n] = '\0';
        check_line(k, line, ++lineno);
        p = nl + 1;
    }
    for (size_t i = 0; i < k->nseries; i++)
        free(k->series[i]);
    free(k);
}

/* The value of the sample whose text up to the value is exactly <series>. */
static bool sample_value(const char *text, const char *series, char *out, size_t cap)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            const char *v = p + n + 1, *e = strchr(v, '\n');
            size_t k = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
            memcpy(out, v, k);
            out[k] = '\0';
            return true;
        }
    }
    return false;
}

static void assert_sample(const char *text, const char *series, const char *want)
{
    char v[64];
    cr_assert(sample_value(text, series, v, sizeof(v)), "series %s present", series);
    cr_assert_str_eq(v, want, "%s", series);
}

/* ---- pure encoders ---------------------------------------------------- */

TestSuite(metrics, .init = fill_fake, .fini = free_fake);

Test(metrics, prom_escape)
{
    char out[64];
    static const char in[] = "a\"b\\c\nd\xff"
                             "e\xc3\xa9";
    long n = tg_prom_escape(out, sizeof(out), in, sizeof(in) - 1);
    cr_assert_str_eq(out, "a\\\"b\\\\c\\nd\xEF\xBF\xBD"
                          "e\xc3\xa9");
    cr_assert_eq(n, (long)strlen(out));
    cr_assert_eq(tg_prom_escape(out, 4, in, sizeof(in) - 1), -ENOSPC);
}

Test(metrics, name_check)
{
    cr_assert(tg_metrics_name_ok("agent.search.tool.web:v2@x/y-z_1"));
    cr_assert_not(tg_metrics_name_ok(""));
    cr_assert_not(tg_metrics_name_ok("a b"));
    cr_assert_not(tg_metrics_name_ok("a\"b"));
    cr_assert_not(tg_metrics_name_ok(NULL));
    char longname[TG_METRICS_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    cr_assert_not(tg_metrics_name_ok(longname));
    longname[TG_METRICS_NAME_MAX] = '\0';
    cr_assert(tg_metrics_name_ok(longname));
}

Test(metrics, names_are_checked_at_init)
{
    cr_assert_str_eq(met.instance, "host-a");
    cr_assert_str_eq(met.agents[0].name, "search");
    cr_assert_str_eq(met.agents[0].tools[1], "fetch");
    cr_assert_str_eq(met.agents[1].name, "invalid.1");
}

Test(metrics, prom_values_and_grammar)
{
    static char buf[1 << 16];
    long n = tg_metrics_prom(buf, sizeof(buf), &reg, &met);
    cr_assert_gt(n, 0);
    check_exposition(buf, (size_t)n);
    assert_sample(buf, "toolgate_calls_total{agent=\"search\",tool=\"web\",outcome=\"ok\"}", "2");
    assert_sample(buf, "toolgate_calls_total{agent=\"search\",tool=\"web\",outcome=\"denied\"}",
                  "2");
    assert_sample(buf, "toolgate_calls_total{agent=\"search\",tool=\"fetch\",outcome=\"error\"}",
                  "1");
    assert_sample(buf, "toolgate_calls_total{agent=\"search\",tool=\"other\",outcome=\"ok\"}", "1");
    assert_sample(buf, "toolgate_calls_total{agent=\"invalid.1\",tool=\"x\",outcome=\"timeout\"}",
                  "1");
    assert_sample(
        buf, "toolgate_calls_total{agent=\"invalid.1\",tool=\"other\",outcome=\"timeout\"}", "0");
    assert_sample(buf, "toolgate_denials_total{code=\"rate_limit_exceeded\"}", "1");
    assert_sample(buf, "toolgate_denials_total{code=\"concurrency_limit_exceeded\"}", "1");
    assert_sample(buf, "toolgate_denials_total{code=\"timeout\"}", "1");
    assert_sample(buf, "toolgate_denials_total{code=\"shutting_down\"}", "0");
    /* Durations 3, 5, 40 and 70000 ms; denied calls are not observed. */
    assert_sample(buf, "toolgate_call_duration_seconds_bucket{agent=\"search\",le=\"0.005\"}", "2");
    assert_sample(buf, "toolgate_call_duration_seconds_bucket{agent=\"search\",le=\"0.025\"}", "2");
    assert_sample(buf, "toolgate_call_duration_seconds_bucket{agent=\"search\",le=\"0.05\"}", "3");
    assert_sample(buf, "toolgate_call_duration_seconds_bucket{agent=\"search\",le=\"60\"}", "3");
    assert_sample(buf, "toolgate_call_duration_seconds_bucket{agent=\"search\",le=\"+Inf\"}", "4");
    assert_sample(buf, "toolgate_call_duration_seconds_sum{agent=\"search\"}", "70.048");
    assert_sample(buf, "toolgate_call_duration_seconds_count{agent=\"search\"}", "4");
    assert_sample(buf, "toolgate_inflight_calls{agent=\"search\"}", "2");
    assert_sample(buf, "toolgate_queue_depth{agent=\"search\"}", "1");
    assert_sample(buf, "toolgate_agent_up{agent=\"search\"}", "1");
    assert_sample(buf, "toolgate_agent_up{agent=\"invalid.1\"}", "0");
    assert_sample(buf, "toolgate_agent_restarts_total{agent=\"search\"}", "1");
    assert_sample(buf, "toolgate_agent_memory_bytes{agent=\"search\"}", "52428800");
    assert_sample(buf, "toolgate_agent_memory_limit_bytes{agent=\"search\"}", "536870912");
    assert_sample(buf, "toolgate_agent_cpu_seconds_total{agent=\"search\"}", "1.5");
    assert_sample(buf, "toolgate_agent_pids{agent=\"search\"}", "7");
    char v[64];
    cr_assert_not(
        sample_value(buf, "toolgate_agent_memory_bytes{agent=\"invalid.1\"}", v, sizeof(v)),
        "no usage series before a sample");
    assert_sample(buf, "toolgate_limit_fill_ratio{limit=\"agent.search.concurrency\"}", "0.9");
    assert_sample(buf, "toolgate_limit_fill_ratio{limit=\"agent.search.tool.web.rate\"}", "1");
    assert_sample(buf, "toolgate_limit_high_water{limit=\"agent.search.queue\"}", "12");
    assert_sample(buf, "toolgate_limit_current{limit=\"agent.search.queue\"}", "8");
    assert_sample(buf, "toolgate_limit_capacity{limit=\"agent.search.memory\"}", "0");
    cr_assert_not(
        sample_value(buf, "toolgate_limit_fill_ratio{limit=\"agent.search.memory\"}", v, sizeof(v)),
        "no ratio without a capacity");
    assert_sample(buf, "toolgate_limit_current{limit=\"invalid.4\"}", "6");
    assert_sample(buf, "toolgate_store_degraded{store=\"redis\"}", "1");
    assert_sample(buf, "toolgate_audit_queue_depth", "3");
    assert_sample(buf, "toolgate_audit_queue_capacity", "4096");
    assert_sample(buf, "toolgate_audit_dropped_total", "2");
    cr_assert_null(strstr(buf, CANARY));
}

Test(metrics, prom_too_small_and_empty)
{
    char small[256];
    cr_assert_eq(tg_metrics_prom(small, sizeof(small), &reg, &met), -ENOSPC);
    cr_assert_eq(tg_metrics_prom(small, sizeof(small), NULL, NULL), 0);
    cr_assert_str_eq(small, "");
}

Test(metrics, tool_named_other_takes_unconfigured_calls)
{
    tg_tool_cfg_t tools[2] = {{.name = (char *)"other"}, {.name = (char *)"web"}};
    tg_agent_cfg_t ag = {.id = (char *)"a", .tools = tools, .ntools = 2};
    tg_config_t cfg = {.instance = (char *)"i", .agents = &ag, .nagents = 1};
    tg_metrics_t m;
    static char buf[1 << 14];
    cr_assert_eq(tg_metrics_init(&m, &cfg), 0);
    tg_metrics_call(&m, 0, -1, TG_OUTCOME_OK, 1);
    tg_metrics_call(&m, 0, 0, TG_OUTCOME_OK, 1);
    tg_metrics_call(&m, 0, 7, TG_OUTCOME_OK, 1); /* out of range: also unconfigured */
    tg_metrics_call(&m, 5, 0, TG_OUTCOME_OK, 1); /* no such agent: ignored */
    long n = tg_metrics_prom(buf, sizeof(buf), NULL, &m);
    cr_assert_gt(n, 0);
    check_exposition(buf, (size_t)n);
    assert_sample(buf, "toolgate_calls_total{agent=\"a\",tool=\"other\",outcome=\"ok\"}", "3");
    assert_sample(buf, "toolgate_calls_total{agent=\"a\",tool=\"web\",outcome=\"ok\"}", "0");
    /* Families without a sample are left out, not written empty. */
    cr_assert_null(strstr(buf, "toolgate_agent_memory_bytes"), "no usage sampled yet");
    cr_assert_null(strstr(buf, "toolgate_limit_"), "no registry");
    cr_assert_not_null(strstr(buf, "# TYPE toolgate_agent_up gauge\n"));
    tg_metrics_free(&m);
}

Test(metrics, denial_ring_keeps_the_latest)
{
    for (int i = 0; i < TG_METRICS_DENIALS + 5; i++) {
        char tool[16];
        int k = snprintf(tool, sizeof(tool), "t%d", i);
        tg_metrics_denial(&met, TG_DENY_RATE, 0, tool, (size_t)k, 1768564800000LL + i);
    }
    static char buf[1 << 16];
    long n = tg_metrics_agents_json(buf, sizeof(buf), &met, 1768564900000LL);
    cr_assert_gt(n, 0);
    json_error_t e;
    json_t *doc = json_loads(buf, 0, &e);
    cr_assert_not_null(doc, "%s", e.text);
    json_t *d = json_object_get(doc, "denials");
    cr_assert_eq(json_array_size(d), TG_METRICS_DENIALS);
    char want[16];
    snprintf(want, sizeof(want), "t%d", TG_METRICS_DENIALS + 4);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(d, 0), "tool")), want);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(d, 0), "ts")),
                     "2026-01-16T12:00:00.036Z");
    snprintf(want, sizeof(want), "t%d", 5);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_array_get(d, TG_METRICS_DENIALS - 1), "tool")),
        want);
    cr_assert_eq(json_integer_value(
                     json_object_get(json_object_get(doc, "denials_total"), "rate_limit_exceeded")),
                 1 + TG_METRICS_DENIALS + 5);
    json_decref(doc);
}

/* ---- the server --------------------------------------------------------- */

TestSuite(admin, .init = setup_default, .fini = teardown, .timeout = 30);

Test(admin, routes_and_content_types)
{
    static const struct {
        const char *path, *ctype;
    } routes[] = {
        {"/metrics", "text/plain; version=0.0.4; charset=utf-8"},
        {"/limits", "application/json"},
        {"/agents", "application/json"},
        {"/healthz", "text/plain; charset=utf-8"},
        {"/", "text/html; charset=utf-8"},
        {"/metrics?name[]=x", "text/plain; version=0.0.4; charset=utf-8"},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        resp_t r = get(routes[i].path);
        cr_assert_eq(r.status, 200, "%s: %d", routes[i].path, r.status);
        assert_ctype(&r, routes[i].ctype);
        assert_len_matches(&r);
        char v[256];
        cr_assert(header(&r, "Cache-Control", v, sizeof(v)));
        cr_assert_str_eq(v, "no-store");
        cr_assert(header(&r, "X-Content-Type-Options", v, sizeof(v)));
        cr_assert(header(&r, "Connection", v, sizeof(v)));
        cr_assert_str_eq(v, "close");
        resp_free(&r);
    }
    resp_t r = get("/healthz");
    cr_assert_eq(r.body_len, 3);
    cr_assert_eq(memcmp(r.body, "ok\n", 3), 0);
    resp_free(&r);

    r = get("/");
    char csp[512];
    cr_assert(header(&r, "Content-Security-Policy", csp, sizeof(csp)));
    cr_assert_not_null(strstr(csp, "default-src 'none'"));
    cr_assert_not_null(strstr(r.body, "fetch(path"));
    cr_assert_not_null(strstr(r.body, "'/limits'"));
    cr_assert_not_null(strstr(r.body, "'/agents'"));
    cr_assert_not_null(strstr(r.body, "setInterval(tick,1000)"));
    cr_assert_null(strstr(r.body, "http://"), "self-contained: no external URL");
    cr_assert_null(strstr(r.body, "https://"), "self-contained: no external URL");
    cr_assert_null(strstr(r.body, "innerHTML"), "figures go in as text only");
    resp_free(&r);

    r = get("/nope");
    cr_assert_eq(r.status, 404);
    assert_len_matches(&r);
    resp_free(&r);
    cr_assert_gt(refreshes, 0, "the provider was refreshed before rendering");
}

Test(admin, metrics_over_http_parse)
{
    resp_t r = get("/metrics");
    cr_assert_eq(r.status, 200);
    check_exposition(r.body, r.body_len);
    assert_sample(r.body, "toolgate_calls_total{agent=\"search\",tool=\"web\",outcome=\"ok\"}",
                  "2");
    resp_free(&r);
}

/* promtool or prometheus_client, when installed, parse the same text. */
Test(admin, metrics_real_parser)
{
    bool promtool = system("command -v promtool >/dev/null 2>&1") == 0;
    /* Debian's python3-prometheus-client serves the system python, which a
     * python3 earlier on PATH (pyenv, venv) may not see. */
    static const char *pythons[] = {"python3", "/usr/bin/python3"};
    const char *py = NULL;
    for (size_t i = 0; !promtool && py == NULL && i < 2; i++) {
        char probe[128];
        snprintf(probe, sizeof(probe), "%s -c 'import prometheus_client' >/dev/null 2>&1",
                 pythons[i]);
        if (system(probe) == 0)
            py = pythons[i];
    }
    bool pyclient = py != NULL;
    if (!promtool && !pyclient)
        cr_skip_test("neither promtool (Debian prometheus) nor python3 prometheus_client is "
                     "installed; the strict grammar check (metrics_over_http_parse) still ran");
    resp_t r = get("/metrics");
    cr_assert_eq(r.status, 200);
    char path[] = "/tmp/tg-admin-metrics-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, r.body, r.body_len), (ssize_t)r.body_len);
    close(fd);
    char cmd[512];
    if (promtool)
        snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
    else
        snprintf(cmd, sizeof(cmd),
                 "%s -c 'import sys\n"
                 "from prometheus_client.parser import text_string_to_metric_families as p\n"
                 "fams = list(p(open(sys.argv[1]).read()))\n"
                 "names = {f.name for f in fams}\n"
                 "assert \"toolgate_calls\" in names or \"toolgate_calls_total\" in names\n"
                 "assert \"toolgate_call_duration_seconds\" in names\n' %s",
                 py, path);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "%s rejected /metrics", promtool ? "promtool" : "prometheus_client");
    resp_free(&r);
}

Test(admin, limits_json)
{
    json_t *doc = get_json("/limits");
    cr_assert_str_eq(json_string_value(json_object_get(doc, "instance")), "host-a");
    json_t *ls = json_object_get(doc, "limits");
    cr_assert_eq(json_array_size(ls), 5);
    json_t *l = json_array_get(ls, 0);
    cr_assert_str_eq(json_string_value(json_object_get(l, "name")), "agent.search.concurrency");
    cr_assert_str_eq(json_string_value(json_object_get(l, "category")), "concurrency");
    cr_assert_str_eq(json_string_value(json_object_get(l, "scope")), "agent");
    cr_assert_eq(json_integer_value(json_object_get(l, "current")), 9);
    cr_assert_eq(json_integer_value(json_object_get(l, "high_water")), 9);
    cr_assert_eq(json_integer_value(json_object_get(l, "capacity")), 10);
    cr_assert_float_eq(json_number_value(json_object_get(l, "fill_pct")), 90.0, 1e-9);
    l = json_array_get(ls, 1);
    cr_assert_eq(json_integer_value(json_object_get(l, "current")), 8);
    cr_assert_eq(json_integer_value(json_object_get(l, "high_water")), 12);
    cr_assert_float_eq(json_number_value(json_object_get(l, "fill_pct")), 50.0, 1e-9);
    l = json_array_get(ls, 3);
    cr_assert_str_eq(json_string_value(json_object_get(l, "category")), "resource");
    cr_assert(json_is_null(json_object_get(l, "fill_pct")), "no fill without a capacity");
    l = json_array_get(ls, 4);
    cr_assert_str_eq(json_string_value(json_object_get(l, "name")), "invalid.4");
    json_decref(doc);
}

Test(admin, agents_json)
{
    json_t *doc = get_json("/agents");
    json_t *as = json_object_get(doc, "agents");
    cr_assert_eq(json_array_size(as), 2);
    json_t *a = json_array_get(as, 0);
    cr_assert_str_eq(json_string_value(json_object_get(a, "name")), "search");
    cr_assert_str_eq(json_string_value(json_object_get(a, "state")), "running");
    cr_assert_eq(json_integer_value(json_object_get(a, "pid")), 4242);
    cr_assert_eq(json_integer_value(json_object_get(a, "inflight")), 2);
    cr_assert_eq(json_integer_value(json_object_get(a, "queued")), 1);
    json_t *calls = json_object_get(a, "calls");
    cr_assert_eq(json_integer_value(json_object_get(calls, "ok")), 3);
    cr_assert_eq(json_integer_value(json_object_get(calls, "error")), 1);
    cr_assert_eq(json_integer_value(json_object_get(calls, "denied")), 2);
    json_t *usage = json_object_get(a, "usage");
    cr_assert_eq(json_integer_value(json_object_get(usage, "memory_limit_bytes")), 512 << 20);
    cr_assert_float_eq(json_number_value(json_object_get(usage, "cpu_seconds")), 1.5, 1e-9);
    a = json_array_get(as, 1);
    cr_assert_str_eq(json_string_value(json_object_get(a, "name")), "invalid.1");
    cr_assert(json_is_null(json_object_get(a, "pid")));
    cr_assert(json_is_null(json_object_get(a, "usage")));

    json_t *d = json_object_get(doc, "denials");
    cr_assert_eq(json_array_size(d), 3);
    json_t *x = json_array_get(d, 0); /* newest first */
    cr_assert_str_eq(json_string_value(json_object_get(x, "code")), "timeout");
    cr_assert_str_eq(json_string_value(json_object_get(x, "agent")), "invalid.1");
    cr_assert(json_is_null(json_object_get(x, "tool")));
    cr_assert_str_eq(json_string_value(json_object_get(x, "ts")), "2026-01-16T12:00:02.000Z");
    x = json_array_get(d, 1);
    cr_assert_str_eq(json_string_value(json_object_get(x, "code")), "concurrency_limit_exceeded");
    cr_assert_str_eq(json_string_value(json_object_get(x, "tool")), "invalid");
    x = json_array_get(d, 2);
    cr_assert_str_eq(json_string_value(json_object_get(x, "code")), "rate_limit_exceeded");
    cr_assert_str_eq(json_string_value(json_object_get(x, "agent")), "search");
    cr_assert_str_eq(json_string_value(json_object_get(x, "tool")), "web");
    json_t *st = json_object_get(doc, "store");
    cr_assert_str_eq(json_string_value(json_object_get(st, "kind")), "redis");
    cr_assert(json_is_true(json_object_get(st, "degraded")));
    json_t *au = json_object_get(doc, "audit");
    cr_assert_eq(json_integer_value(json_object_get(au, "dropped")), 2);
    json_decref(doc);
}

Test(admin, canary_never_reaches_any_output)
{
    static const char *paths[] = {"/metrics", "/limits", "/agents", "/"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        resp_t r = get(paths[i]);
        cr_assert_eq(r.status, 200);
        cr_assert_null(strstr(r.raw, CANARY), "%s leaks the planted secret", paths[i]);
        cr_assert_null(strstr(r.raw, "ev\"il"), "%s shows the odd agent name", paths[i]);
        cr_assert_null(strstr(r.raw, "ev\\\"il"), "%s shows the odd agent name", paths[i]);
        cr_assert_null(strstr(r.raw, "web?token"), "%s shows the caller's tool text", paths[i]);
        resp_free(&r);
    }
}

Test(admin, head_and_refused_requests)
{
    resp_t r = request("HEAD", "/metrics", NULL);
    cr_assert_eq(r.status, 200);
    char cl[32];
    cr_assert(header(&r, "Content-Length", cl, sizeof(cl)));
    cr_assert_gt(atol(cl), 1000, "HEAD announces the GET body's length");
    cr_assert_eq(r.body_len, 0, "HEAD sends no body");
    resp_free(&r);

    r = request("POST", "/metrics", "Content-Length: 0\r\n");
    cr_assert_eq(r.status, 405);
    char allow[64];
    cr_assert(header(&r, "Allow", allow, sizeof(allow)));
    cr_assert_str_eq(allow, "GET, HEAD");
    resp_free(&r);

    r = request("GET", "/metrics", "Content-Length: 5\r\n");
    cr_assert_eq(r.status, 413);
    resp_free(&r);
    r = request("GET", "/metrics", "Transfer-Encoding: chunked\r\n");
    cr_assert_eq(r.status, 413);
    resp_free(&r);

    char longurl[3000] = "/";
    memset(longurl + 1, 'a', 2500);
    longurl[2501] = '\0';
    r = get(longurl);
    cr_assert_eq(r.status, 414);
    resp_free(&r);

    /* Malformed request line. */
    r = exchange("GARBAGE\r\n\r\n", 11);
    cr_assert_eq(r.status, 400);
    resp_free(&r);
}

static resp_t with_host(const char *host)
{
    char req[512];
    snprintf(req, sizeof(req), "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
             host);
    return exchange(req, strlen(req));
}

Test(admin, host_must_be_loopback)
{
    static const char *ok[] = {"localhost",    "LOCALHOST:9464", "127.0.0.1",
                               "127.1.2.3:80", "[::1]",          "[::1]:9464"};
    static const char *bad[] = {
        "evil.example", "evil.example:9464", "10.0.0.1", "127.0.0.1.evil.example",
        "[::2]",        "localhost:99999",   ""};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        resp_t r = with_host(ok[i]);
        cr_assert_eq(r.status, 200, "Host %s: %d", ok[i], r.status);
        resp_free(&r);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        resp_t r = with_host(bad[i]);
        cr_assert_eq(r.status, 421, "Host '%s': %d", bad[i], r.status);
        resp_free(&r);
    }
    /* Two Host headers: refused. */
    resp_t r = request("GET", "/healthz", "Host: localhost\r\n");
    cr_assert_eq(r.status, 421);
    resp_free(&r);
}

Test(admin, keep_alive_and_pipelining)
{
    int fd = dial();
    const char two[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
                       "GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n"
                       "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    send_all(fd, two, sizeof(two) - 1);
    size_t n;
    char *all = read_all(fd, &n);
    close(fd);
    const char *p1 = strstr(all, "HTTP/1.1 200 OK");
    cr_assert_not_null(p1);
    const char *p2 = strstr(p1 + 1, "HTTP/1.1 404 Not Found");
    cr_assert_not_null(p2, "second answer in order: %s", all);
    const char *p3 = strstr(p2 + 1, "HTTP/1.1 200 OK");
    cr_assert_not_null(p3, "third answer in order");
    cr_assert_not_null(strstr(p1, "Connection: keep-alive"));
    cr_assert_not_null(strstr(p3, "Connection: close"));
    cr_assert_null(strstr(p3 + 1, "HTTP/1.1"), "exactly three answers");
    free(all);
}

/* Header names and values split across reads are reassembled: a long
 * name cut in the middle, and the Host value cut in two. */
Test(admin, split_reads)
{
    static const char *pieces[][3] = {
        {"GET /healthz HTTP/1.1\r\nX-A-Rather-Long-Header-Na", "me-Continued: v\r\nHo",
         "st: loc"},
        {"alhost:80\r\nConnection: close\r\n", "\r\n", NULL},
    };
    int fd = dial();
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3 && pieces[i][j] != NULL; j++) {
            send_all(fd, pieces[i][j], strlen(pieces[i][j]));
            usleep(30000); /* separate reads on the server */
        }
    resp_t r = finish(fd);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    resp_free(&r);

    /* A header name of thousands of bytes, cut in two reads. */
    static char head[8192];
    size_t n = (size_t)snprintf(head, sizeof(head), "GET /healthz HTTP/1.1\r\nX-");
    memset(head + n, 'a', 3000);
    n += 3000;
    fd = dial();
    send_all(fd, head, n);
    usleep(30000);
    memset(head, 'b', 3000);
    n = 3000 + (size_t)snprintf(head + 3000, sizeof(head) - 3000,
                                ": v\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    send_all(fd, head, n);
    r = finish(fd);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    resp_free(&r);

    /* A foreign Host split the same way is still refused. */
    fd = dial();
    send_all(fd, "GET /healthz HTTP/1.1\r\nHost: local", 34);
    usleep(30000);
    send_all(fd, "host.evil.example\r\nConnection: close\r\n\r\n", 40);
    r = finish(fd);
    cr_assert_eq(r.status, 421, "%s", r.raw);
    resp_free(&r);
}

Test(admin, non_loopback_refused)
{
    static const char *bad[] = {"0.0.0.0:9464",    "10.1.2.3:9464", "[::]:9464",
                                "[2001:db8::1]:1", "192.168.1.1:0", "[::ffff:10.0.0.1]:80"};
    tg_admin_t *a = NULL;
    tg_err_t err = {""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.msg[0] = '\0';
        cr_assert_eq(tg_admin_start(&a, &loop, bad[i], NULL, &provider, &err), -EINVAL, "%s",
                     bad[i]);
        cr_assert_null(a);
        cr_assert_not_null(strstr(err.msg, "is not a loopback address"), "%s: %s", bad[i], err.msg);
        cr_assert_not_null(strstr(err.msg, bad[i]), "names the address: %s", err.msg);
    }
    static const char *malformed[] = {
        "",         "9464",      "127.0.0.1",      "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x",
        "::1:9464", "[::1]9464", "example.com:80", "[::1:80"};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        struct sockaddr_storage ss;
        err.msg[0] = '\0';
        cr_assert_eq(tg_admin_parse_addr(malformed[i], &ss, &err), -EINVAL, "'%s'", malformed[i]);
        cr_assert_neq(err.msg[0], '\0');
    }
    struct sockaddr_storage ss;
    cr_assert_eq(tg_admin_parse_addr("localhost:9464", &ss, &err), 0);
    cr_assert_eq(ss.ss_family, AF_INET);
    cr_assert_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
    cr_assert_eq(tg_admin_parse_addr("127.0.0.2:1", &ss, &err), 0);
    cr_assert_eq(tg_admin_parse_addr("[::1]:0", &ss, &err), 0);
    cr_assert_eq(ss.ss_family, AF_INET6);
    cr_assert_eq(tg_admin_parse_addr("[::ffff:127.0.0.1]:1", &ss, &err), 0);

    tg_admin_opts_t o = {.max_connections = TG_ADMIN_MAX_CONNECTIONS_CEIL + 1};
    cr_assert_eq(tg_admin_start(&a, &loop, "127.0.0.1:0", &o, &provider, &err), -EINVAL);
    cr_assert_not_null(strstr(err.msg, "max_connections"), "%s", err.msg);
}

Test(admin, status_prints_a_table_sorted_by_fill)
{
    char out[] = "/tmp/tg-admin-status-XXXXXX";
    int fd = mkstemp(out);
    cr_assert_geq(fd, 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    char *argv[] = {(char *)"--admin", addr, NULL};
    int rc = tg_cli_status(2, argv);
    char *argv_json[] = {(char *)"--json", (char *)"--admin", addr, NULL};
    fflush(stdout);
    off_t table_end = lseek(fd, 0, SEEK_CUR);
    int rc_json = tg_cli_status(3, argv_json);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    cr_assert_eq(rc, 0);
    cr_assert_eq(rc_json, 0);

    size_t len = (size_t)lseek(fd, 0, SEEK_END);
    char *text = calloc(1, len + 1);
    cr_assert_eq(pread(fd, text, len, 0), (ssize_t)len);
    close(fd);
    unlink(out);
    char *json_text = strdup(text + table_end);
    text[table_end] = '\0';

    char head[128];
    snprintf(head, sizeof(head), "toolgate host-a at %s: 5 limits\n", addr);
    cr_assert_eq(strncmp(text, head, strlen(head)), 0, "%s", text);
    cr_assert_not_null(strstr(text, "LIMIT"));
    cr_assert_not_null(strstr(text, "FILL"));
    const char *r1 = strstr(text, "agent.search.tool.web.rate"); /* 100% */
    const char *r2 = strstr(text, "agent.search.concurrency");   /* 90% */
    const char *r3 = strstr(text, "agent.search.queue");         /* 50% */
    const char *r4 = strstr(text, "invalid.4");                  /* 10% */
    const char *r5 = strstr(text, "agent.search.memory");        /* no capacity: last */
    cr_assert(r1 && r2 && r3 && r4 && r5, "every limit printed:\n%s", text);
    cr_assert(r1 < r2 && r2 < r3 && r3 < r4 && r4 < r5, "sorted by fill:\n%s", text);
    cr_assert_not_null(strstr(r1, " 100.0%"));
    cr_assert_not_null(strstr(r2, "  90.0%"));
    cr_assert_null(strstr(text, CANARY));

    /* --json: the snapshot, limits in the same order. */
    json_error_t e;
    json_t *doc = json_loads(json_text, 0, &e);
    cr_assert_not_null(doc, "%s: %s", e.text, json_text);
    json_t *ls = json_object_get(doc, "limits");
    cr_assert_eq(json_array_size(ls), 5);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ls, 0), "name")),
                     "agent.search.tool.web.rate");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ls, 4), "name")),
                     "agent.search.memory");
    json_decref(doc);
    free(json_text);
    free(text);
}

/* ---- bounds ------------------------------------------------------------- */

static void setup_small(void)
{
    fill_fake();
    tg_admin_opts_t o = {.max_header_bytes = 1024, .max_connections = 2, .idle_timeout_ms = 300};
    start_server(&o);
}

TestSuite(bounds, .init = setup_small, .fini = teardown, .timeout = 30);

/* A request whose head is <head_bytes> long in total. */
static resp_t sized_request(size_t head_bytes)
{
    static const char pre[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                              "X-Pad: ";
    size_t fixed = sizeof(pre) - 1 + 4; /* the pad line's CRLF and the final CRLF */
    cr_assert_gt(head_bytes, fixed);
    char *req = malloc(head_bytes + 1);
    memcpy(req, pre, sizeof(pre) - 1);
    memset(req + sizeof(pre) - 1, 'p', head_bytes - fixed);
    memcpy(req + head_bytes - 4, "\r\n\r\n", 4);
    resp_t r = exchange(req, head_bytes);
    free(req);
    return r;
}

Test(bounds, header_bytes)
{
    resp_t r = sized_request(1024); /* exactly the bound */
    cr_assert_eq(r.status, 200);
    resp_free(&r);
    r = sized_request(1025);
    cr_assert_eq(r.status, 431);
    resp_free(&r);
    r = sized_request(60000); /* far over: answered, not reset */
    cr_assert_eq(r.status, 431);
    cr_assert_not_null(strstr(r.raw, "Connection: close"));
    resp_free(&r);

    /* The head dribbled in small pieces is counted the same. */
    int fd = dial();
    send_all(fd, "GET / HTTP/1.1\r\n", 16);
    for (int i = 0; i < 40; i++) {
        char line[64];
        int n = snprintf(line, sizeof(line), "X-H%02d: %040d\r\n", i, i);
        if (send(fd, line, (size_t)n, MSG_NOSIGNAL) < 0)
            break;
    }
    r = finish(fd);
    cr_assert_eq(r.status, 431);
    resp_free(&r);
}

static bool healthz_on(int fd)
{
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    char buf[1024];
    send_all(fd, req, sizeof(req) - 1);
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, "200 OK") != NULL;
}

Test(bounds, connections)
{
    int a = dial(), b = dial();
    /* Both are served (keep-alive, so they stay open). */
    cr_assert(healthz_on(a));
    cr_assert(healthz_on(b));
    int c = dial();
    size_t n;
    char *txt = read_all(c, &n);
    close(c);
    cr_assert_not_null(strstr(txt, "503 Service Unavailable"), "third refused: '%s'", txt);
    free(txt);
    /* Still served. */
    cr_assert(healthz_on(a));
    close(a);
    /* Room again once the server has seen the close. */
    bool ok = false;
    for (int i = 0; i < 100 && !ok; i++) {
        int d = dial();
        ok = healthz_on(d);
        close(d);
        if (!ok)
            usleep(10000);
    }
    cr_assert(ok, "a freed slot is reused");
    close(b);
}

Test(bounds, idle_timeout)
{
    /* Silent connection. */
    int64_t t0 = (int64_t)tgh_now_ms();
    int fd = dial();
    size_t n;
    char *txt = read_all(fd, &n);
    int64_t dt = (int64_t)tgh_now_ms() - t0;
    close(fd);
    free(txt);
    cr_assert_eq(n, 0);
    cr_assert_geq(dt, 250, "closed after the idle timeout, not before (%lld ms)", (long long)dt);
    cr_assert_lt(dt, 3000, "closed by the server (%lld ms)", (long long)dt);

    /* A head dribbled slower than the timeout does not keep it alive. */
    t0 = (int64_t)tgh_now_ms();
    fd = dial();
    for (int i = 0; i < 10; i++) {
        if (send(fd, "X", 1, MSG_NOSIGNAL) < 0)
            break;
        usleep(100000);
    }
    txt = read_all(fd, &n);
    dt = (int64_t)tgh_now_ms() - t0;
    close(fd);
    free(txt);
    cr_assert_lt(dt, 2000, "partial request cut at the idle timeout (%lld ms)", (long long)dt);

    /* A keep-alive connection idles out after its answer. */
    fd = dial();
    cr_assert(healthz_on(fd));
    t0 = (int64_t)tgh_now_ms();
    txt = read_all(fd, &n);
    dt = (int64_t)tgh_now_ms() - t0;
    close(fd);
    free(txt);
    cr_assert_eq(n, 0);
    cr_assert_geq(dt, 250);
    cr_assert_lt(dt, 3000);
}

/* ---- status against nothing ---------------------------------------------- */

Test(status, unreachable_and_usage)
{
    /* A port nobody listens on: bind one, note it, close it. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
    char a[64];
    snprintf(a, sizeof(a), "127.0.0.1:%u", ntohs(sa.sin_port));
    close(s);
    char *argv[] = {(char *)"--admin", a, NULL};
    cr_assert_eq(tg_cli_status(2, argv), 1);
    char *bad[] = {(char *)"--frobnicate", NULL};
    cr_assert_eq(tg_cli_status(1, bad), 2);
    char *nonloop[] = {(char *)"--admin=0.0.0.0:9464", NULL};
    cr_assert_eq(tg_cli_status(1, nonloop), 2);
    char *noval[] = {(char *)"--admin", NULL};
    cr_assert_eq(tg_cli_status(1, noval), 2);
}

Test(metrics, http_listeners_get_a_row_each_labelled_by_index_and_address)
{
    tg_listen_cfg_t ls[3] = {{.unix_path = (char *)"/run/a.sock"},
                             {.http_addr = (char *)"127.0.0.1:8080"},
                             {.http_addr = (char *)"[::1]:8443"}};
    tg_config_t cfg = {.instance = (char *)"i", .listen = ls, .nlisten = 3};
    tg_metrics_t m;
    static char buf[1 << 15];
    cr_assert_eq(tg_metrics_init(&m, &cfg), 0);
    cr_assert_eq(m.nhttp, 2);
    cr_assert_null(tg_metrics_http_row(&m, 0), "a Unix listener has no HTTP row");
    cr_assert_null(tg_metrics_http_row(&m, 3));
    tg_metrics_http_t *h = tg_metrics_http_row(&m, 2);
    cr_assert_not_null(h);
    h->requests = 7;
    h->status[2] = 5;
    h->status[4] = 2;
    h->connections = 1;
    h->sessions_idled = 3;
    long n = tg_metrics_prom(buf, sizeof(buf), NULL, &m);
    cr_assert_gt(n, 0);
    check_exposition(buf, (size_t)n);
    assert_sample(buf, "toolgate_http_requests_total{listener=\"2\",address=\"[::1]:8443\"}", "7");
    assert_sample(buf, "toolgate_http_requests_total{listener=\"1\",address=\"127.0.0.1:8080\"}",
                  "0");
    assert_sample(buf,
                  "toolgate_http_responses_total{listener=\"2\",address=\"[::1]:8443\",class=\"2xx\"}",
                  "5");
    assert_sample(buf,
                  "toolgate_http_responses_total{listener=\"2\",address=\"[::1]:8443\",class=\"4xx\"}",
                  "2");
    assert_sample(buf, "toolgate_http_connections{listener=\"2\",address=\"[::1]:8443\"}", "1");
    assert_sample(buf, "toolgate_http_sessions_idled_total{listener=\"2\",address=\"[::1]:8443\"}",
                  "3");
    cr_assert_null(strstr(buf, "listener=\"0\""));
    tg_metrics_free(&m);
    cr_assert_null(m.http);

    tg_config_t none = {.instance = (char *)"i"};
    cr_assert_eq(tg_metrics_init(&m, &none), 0);
    n = tg_metrics_prom(buf, sizeof(buf), NULL, &m);
    cr_assert_null(strstr(buf, "toolgate_http_"), "no HTTP listener, no HTTP family");
    tg_metrics_free(&m);
}
