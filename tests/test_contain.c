/* Containment: detection, sanitised names, the enforcement report, the
 * cgroup2 file writes against a fake cgroupfs tree, and on the real host
 * (cgroup v1 memory/pids/cpu plus a cgroup2 mount with cgroup.kill, as
 * root) a memory hog OOM-killed under 64Mi, a fork bomb held at pids.max,
 * a CPU spinner throttled to 100m, the RLIMIT_DATA fallback, node under
 * RLIMIT_DATA (and killed at start by RLIMIT_AS), cleanup after destroy
 * and of a killed toolgate's orphans, and the exec shim's placement.
 *
 * Agents are the tg_hog fixture run through tg_shim_main in a forked
 * child, exactly as the router will spawn `toolgate __shim`. Tests that
 * need root, a writable cgroup controller, node, or a build without
 * AddressSanitizer (which cannot start under RLIMIT_DATA: its shadow
 * memory is a huge private writable mapping) skip with the reason.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sys/utsname.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "limits/contain.h"
#include "router/agent/shim.h"
#include "tests/tg_caps.h"
#include "tests/tg_harness.h"
#include "tests/tg_shim.h"

#define HOG TG_AGENTS_DIR "/tg_hog"
#define MiB (1024ull * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#else
#define TG_ASAN 0
#endif

/* ---- helpers ---- */

TestSuite(contain, .fini = tgh_cleanup);

/* The value of "key=" in fixture output, or NULL. */
static const char *field(const char *out, const char *key, char *buf, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            snprintf(buf, cap, "%.*s", (int)(l - kl - 1), p + kl + 1);
            return buf;
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

static bool dir_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *read_file(const char *dir, const char *name, char *buf, size_t cap)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void mkdirs(const char *p)
{
    char tmp[2048];
    snprintf(tmp, sizeof tmp, "%s", p);
    for (char *s = tmp + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(tmp, 0755);
            *s = '/';
        }
    }
    cr_assert(mkdir(tmp, 0755) == 0 || errno == EEXIST, "mkdir %s", tmp);
}

static void need_root(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (cgroups, namespaces, uid drop); CI runs as root");
}

/* Init a best-effort context with cgroups, or skip saying why not. */
static void init_cgroup_ctx(tg_contain_t *c)
{
    need_root();
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mode = TG_CONTAIN_BEST_EFFORT};
    cr_assert_eq(tg_contain_init(c, &o, &err), 0, "%s", err.msg);
    if (c->kind != TG_CONTAIN_CGROUP1 && c->kind != TG_CONTAIN_CGROUP2) {
        tg_contain_fini(c);
        cr_skip_test("no writable cgroup hierarchy here (%s)", c->why);
    }
}

static tg_contain_inst_t *create_or_skip(tg_contain_t *c, const tg_contain_req_t *q, tg_res_t need,
                                         const char *need_backend)
{
    tg_err_t err = {{0}};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(c, "hog", q, &ci, &err), 0, "%s", err.msg);
    const tg_enforced_item_t *it = &ci->enforced.r[need];
    if (!it->applied || strncmp(it->backend, need_backend, strlen(need_backend)) != 0) {
        char why[TG_REASON_MAX];
        snprintf(why, sizeof why, "%s", it->applied ? it->backend : it->reason);
        tg_contain_destroy(ci);
        tg_contain_fini(c);
        cr_skip_test("%s is not held by a %s controller here (%s)", tg_res_name(need),
                     need_backend, why);
    }
    return ci;
}

/* ---- pure parts ---- */

Test(contain, sanitize_hostile_ids)
{
    char out[TG_CG_AGENT_NAME_MAX + 1];
    cr_assert_eq(tg_contain_sanitize("search", out, sizeof out), 6);
    cr_assert_str_eq(out, "search");
    cr_assert_eq(tg_contain_sanitize("ok-name_1.2", out, sizeof out), 11);
    cr_assert_str_eq(out, "ok-name_1.2");
    cr_assert_eq(tg_contain_sanitize("../../x", out, sizeof out), 15);
    cr_assert_str_eq(out, "x2e2e2f2e2e2f78");
    cr_assert_eq(tg_contain_sanitize("..", out, sizeof out), 5);
    cr_assert_str_eq(out, "x2e2e");
    cr_assert_eq(tg_contain_sanitize(".hidden", out, sizeof out), 15);
    cr_assert_str_eq(out, "x2e68696464656e");
    cr_assert_eq(tg_contain_sanitize("a/b", out, sizeof out), 7);
    cr_assert_str_eq(out, "x612f62");
    cr_assert_eq(tg_contain_sanitize("", out, sizeof out), 1);
    cr_assert_str_eq(out, "x");
    cr_assert_eq(tg_contain_sanitize("tab\there", out, sizeof out), 17);
    cr_assert_str_eq(out, "x7461620968657265");

    /* 64 valid bytes pass; 65 are hashed; 31 invalid bytes are hex, 32 hashed */
    char id[200];
    memset(id, 'a', 64);
    id[64] = '\0';
    cr_assert_eq(tg_contain_sanitize(id, out, sizeof out), 64);
    cr_assert_str_eq(out, id);
    id[64] = 'a';
    id[65] = '\0';
    cr_assert_eq(tg_contain_sanitize(id, out, sizeof out), 17);
    cr_assert_eq(out[0], 'h');
    memset(id, '/', 31);
    id[31] = '\0';
    cr_assert_eq(tg_contain_sanitize(id, out, sizeof out), 63);
    cr_assert_eq(out[0], 'x');
    id[31] = '/';
    id[32] = '\0';
    cr_assert_eq(tg_contain_sanitize(id, out, sizeof out), 17);
    /* distinct long ids hash apart, the same id hashes alike */
    char h1[20], h2[20];
    memset(id, '/', 100);
    id[100] = '\0';
    tg_contain_sanitize(id, h1, sizeof h1);
    id[99] = '.';
    tg_contain_sanitize(id, h2, sizeof h2);
    cr_assert_str_neq(h1, h2);
    tg_contain_sanitize(id, out, sizeof out);
    cr_assert_str_eq(out, h2);
    /* nothing produced contains '/' or starts with '.' */
    const char *hostile[] = {"../../x", "/etc", ".", "..", "a/../../b", "\n", "x/..", "-"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        cr_assert_gt(tg_contain_sanitize(hostile[i], out, sizeof out), 0);
        cr_assert_null(strchr(out, '/'), "%s", hostile[i]);
        cr_assert_neq(out[0], '.', "%s", hostile[i]);
    }
    cr_assert_eq(tg_contain_sanitize("search", out, 6), -ENOSPC);
}

Test(contain, mode_and_kind_names)
{
    tg_contain_mode_t m;
    cr_assert_eq(tg_contain_mode_parse("required", &m), 0);
    cr_assert_eq(m, TG_CONTAIN_REQUIRED);
    cr_assert_eq(tg_contain_mode_parse("best_effort", &m), 0);
    cr_assert_eq(m, TG_CONTAIN_BEST_EFFORT);
    cr_assert_eq(tg_contain_mode_parse("off", &m), 0);
    cr_assert_eq(m, TG_CONTAIN_OFF);
    cr_assert_eq(tg_contain_mode_parse("strict", &m), -EINVAL);
    cr_assert_str_eq(tg_contain_mode_name(TG_CONTAIN_REQUIRED), "required");
    cr_assert_str_eq(tg_contain_kind_name(TG_CONTAIN_CGROUP1), "cgroup1");
    cr_assert_str_eq(tg_contain_kind_name(TG_CONTAIN_RLIMIT), "rlimit");
    tg_contain_req_t q;
    tg_contain_req_default(&q);
    cr_assert_eq(q.memory_bytes, 512 * MiB);
    cr_assert_eq(q.cpu_millicores, 1000);
    cr_assert_eq(q.pids, 64);
    cr_assert_eq(q.disk_bytes, 1024 * MiB);
}

/* A forced rlimit context without the netns probe: deterministic on any host. */
static void init_rlimit_ctx(tg_contain_t *c, tg_contain_mode_t mode)
{
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mode = mode, .backend = TG_CONTAIN_RLIMIT, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(c->kind, TG_CONTAIN_RLIMIT);
}

/* A best-effort rlimit context in <c>, and in it the instance <name> for
 * <q>. */
static tg_contain_inst_t *rlimit_create(tg_contain_t *c, const char *name,
                                        const tg_contain_req_t *q)
{
    init_rlimit_ctx(c, TG_CONTAIN_BEST_EFFORT);
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(c, name, q, &ci, &err), 0, "%s", err.msg);
    return ci;
}

Test(contain, report_json_and_text)
{
    tg_contain_t c;
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .cpu_millicores = 500, .pids = 32,
                          .disk_bytes = 1024 * MiB, .network_none = true, .nofile = 256};
    tg_contain_inst_t *ci = rlimit_create(&c, "search", &q);
    cr_assert_str_eq(ci->name, "search-1");

    char buf[4096];
    int n = tg_enforced_json(&ci->enforced, buf, sizeof buf);
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(buf));
    cr_assert_str_eq(
        buf,
        "{\"memory\":{\"requested\":67108864,\"applied\":true,\"backend\":\"rlimit\","
        "\"how\":\"RLIMIT_DATA + process-tree RSS monitor\"},"
        "\"cpu\":{\"requested\":500,\"applied\":false,\"backend\":\"none\","
        "\"reason\":\"no cpu controller; RLIMIT_CPU is total seconds, not a rate\"},"
        "\"pids\":{\"requested\":32,\"applied\":false,\"backend\":\"none\","
        "\"reason\":\"no pids controller; RLIMIT_NPROC binds only an agent running as its own "
        "non-root user\"},"
        "\"disk\":{\"requested\":1073741824,\"applied\":false,\"backend\":\"none\","
        "\"reason\":\"no workspace quota; each file is capped at 1Gi by RLIMIT_FSIZE\"},"
        "\"network\":{\"requested\":\"none\",\"applied\":false,\"backend\":\"none\","
        "\"reason\":\"network namespaces unavailable (unshare(CLONE_NEWNET) refused)\"},"
        "\"nofile\":{\"requested\":256,\"applied\":true,\"backend\":\"rlimit\","
        "\"how\":\"RLIMIT_NOFILE\"}}");
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    cr_assert_not_null(j, "valid JSON: %s", je.text);
    json_decref(j);
    cr_assert_eq(tg_enforced_json(&ci->enforced, buf, 40), -ENOSPC);

    n = tg_enforced_text(&ci->enforced, buf, sizeof buf);
    cr_assert_gt(n, 0);
    cr_assert_str_eq(
        buf,
        "resource requested  applied backend  how / why not\n"
        "memory   64Mi       yes     rlimit   RLIMIT_DATA + process-tree RSS monitor\n"
        "cpu      500m       NO      none     no cpu controller; RLIMIT_CPU is total seconds, not "
        "a rate\n"
        "pids     32         NO      none     no pids controller; RLIMIT_NPROC binds only an agent "
        "running as its own non-root user\n"
        "disk     1Gi        NO      none     no workspace quota; each file is capped at 1Gi by "
        "RLIMIT_FSIZE\n"
        "network  none       NO      none     network namespaces unavailable "
        "(unshare(CLONE_NEWNET) refused)\n"
        "nofile   256        yes     rlimit   RLIMIT_NOFILE\n");
    tg_res_t miss;
    cr_assert_not(tg_enforced_complete(&ci->enforced, &miss));
    cr_assert_eq(miss, TG_RES_CPU);

    /* the shim gets DATA, NOFILE, FSIZE (from disk), no joins, no netns */
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_eq(pl.nprocs, 0);
    cr_assert_eq(pl.nrl, 3);
    cr_assert_eq(pl.rl[0].resource, RLIMIT_DATA);
    cr_assert_eq(pl.rl[0].value, 64 * MiB);
    cr_assert_eq(pl.rl[1].resource, RLIMIT_NOFILE);
    cr_assert_eq(pl.rl[1].value, 256);
    cr_assert_eq(pl.rl[2].resource, RLIMIT_FSIZE);
    cr_assert_eq(pl.rl[2].value, 1024 * MiB);
    cr_assert_not(pl.unshare_net);
    cr_assert(pl.no_new_privs && pl.setsid && pl.pdeathsig);
    cr_assert(ci->rss_monitor);

    char **argv = NULL;
    char *agent[] = {(char *)"agent-bin", (char *)"--flag", NULL};
    cr_assert_eq(tg_shim_argv_build("/proc/self/exe", &pl, "/srv/ws", agent, &argv), 0);
    char expect[512];
    snprintf(expect, sizeof expect,
             "/proc/self/exe __shim --setsid --rlimit data=67108864 --rlimit nofile=256 "
             "--rlimit fsize=1073741824 --no-new-privs --pdeathsig %ld --supervise --chdir /srv/ws -- "
             "agent-bin --flag",
             (long)getpid());
    char got[512] = "";
    for (char **p = argv; *p; p++) {
        strncat(got, *p, sizeof got - strlen(got) - 1);
        if (p[1])
            strncat(got, " ", sizeof got - strlen(got) - 1);
    }
    cr_assert_str_eq(got, expect);
    tg_shim_argv_free(argv);
    char *empty[] = {NULL};
    cr_assert_eq(tg_shim_argv_build("/proc/self/exe", &pl, NULL, empty, &argv), -EINVAL);

    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_assert_eq(tg_contain_fini(&c), 0);
}

/* The report writers alone, on a report built by hand (no host, no
 * backend): every member shape, the escaping of what a reason may hold,
 * and every capacity below the length refused with no cut object. */
Test(contain, report_writers_on_a_fixed_report)
{
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .cpu_millicores = 500, .pids = 32,
                          .network_none = true, .bandwidth_bps = 1000000, .max_connections = 8};
    tg_enforced_t e;
    tg_enforced_init(&e, TG_CONTAIN_CGROUP2, TG_CONTAIN_BEST_EFFORT, &q);
    tg_enforced_set(&e, TG_RES_MEMORY, true, 64 * MiB, "cgroup2", "memory.max", NULL);
    tg_enforced_set(&e, TG_RES_CPU, true, 510, "cgroup2", "cpu.max", "ignored when applied");
    /* A workspace path may hold any UTF-8 but no control byte (config
     * refuses those); a reason is cut at TG_REASON_MAX, possibly inside a
     * character, which the JSON writes as U+FFFD. */
    tg_enforced_set(&e, TG_RES_PIDS, false, 0, "cgroup2",
                    "how is ignored when not applied", "workspace /srv/\"q\"\\caf\xc3\xa9/\xe2\x82");
    tg_enforced_set(&e, TG_RES_NETWORK, true, 1, "netns", "unshare(CLONE_NEWNET)", NULL);
    tg_enforced_set(&e, TG_RES_BANDWIDTH, true, 1000000, "netns", NULL, NULL);

    char buf[2048];
    const char *want =
        "{\"memory\":{\"requested\":67108864,\"applied\":true,\"backend\":\"cgroup2\","
        "\"how\":\"memory.max\"},"
        "\"cpu\":{\"requested\":500,\"applied\":true,\"backend\":\"cgroup2\","
        "\"applied_value\":510,\"how\":\"cpu.max\"},"
        "\"pids\":{\"requested\":32,\"applied\":false,\"backend\":\"cgroup2\","
        "\"reason\":\"workspace /srv/\\\"q\\\"\\\\caf\xc3\xa9/\\ufffd\\ufffd\"},"
        "\"network\":{\"requested\":\"none\",\"applied\":true,\"backend\":\"netns\","
        "\"how\":\"unshare(CLONE_NEWNET)\"},"
        "\"bandwidth\":{\"requested\":1000000,\"applied\":true,\"backend\":\"netns\","
        "\"how\":\"\"},"
        "\"connections\":{\"requested\":8,\"applied\":false,\"backend\":\"none\","
        "\"reason\":\"\"}}";
    int n = tg_enforced_json(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(n, (int)strlen(want));
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    cr_assert_not_null(j, "valid JSON: %s", je.text);
    json_decref(j);
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        memset(buf, 'Z', sizeof buf);
        cr_assert_eq(tg_enforced_json(&e, buf, cap), -ENOSPC, "cap %zu", cap);
        cr_assert(cap == 0 ? buf[0] == 'Z' : buf[0] == '\0', "cap %zu: no cut object", cap);
        cr_assert_eq(buf[cap], 'Z', "cap %zu: nothing written past it", cap);
    }
    cr_assert_eq(tg_enforced_json(&e, buf, (size_t)n + 1), n);

    /* "connections" widens the first column; values in their units */
    n = tg_enforced_text(&e, buf, sizeof buf);
    cr_assert_str_eq(
        buf,
        "resource    requested  applied backend  how / why not\n"
        "memory      64Mi       yes     cgroup2  memory.max\n"
        "cpu         500m       yes     cgroup2  cpu.max (enforced as 510m)\n"
        "pids        32         NO      cgroup2  workspace /srv/\"q\"\\caf\xc3\xa9/\xe2\x82\n"
        "network     none       yes     netns    unshare(CLONE_NEWNET)\n"
        "bandwidth   1Mbps      yes     netns    \n"
        "connections 8          NO      none     \n");
    cr_assert_eq(n, (int)strlen(buf));
    cr_assert_eq(tg_enforced_text(&e, buf, (size_t)n), -ENOSPC);

    tg_res_t miss;
    cr_assert_not(tg_enforced_complete(&e, &miss));
    cr_assert_eq(miss, TG_RES_PIDS);

    /* nothing requested: an empty object and the header alone */
    tg_contain_req_t none = {0};
    tg_enforced_init(&e, TG_CONTAIN_NONE, TG_CONTAIN_OFF, &none);
    cr_assert_eq(tg_enforced_json(&e, buf, sizeof buf), 2);
    cr_assert_str_eq(buf, "{}");
    cr_assert_eq(tg_enforced_json(&e, buf, 2), -ENOSPC);
    cr_assert(tg_enforced_complete(&e, NULL));
}

Test(contain, required_refuses_what_the_host_cannot_enforce)
{
    tg_contain_t c;
    init_rlimit_ctx(&c, TG_CONTAIN_REQUIRED);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .cpu_millicores = 500};
    tg_contain_inst_t *ci = (tg_contain_inst_t *)&c; /* must be reset to NULL */
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "search", &q, &ci, &err), -EPERM);
    cr_assert_null(ci);
    cr_assert_str_eq(err.msg, "containment required: agent 'search': cpu 500m is not enforced on "
                              "this host: no cpu controller; RLIMIT_CPU is total seconds, not a "
                              "rate");
    /* what rlimits can hold passes */
    tg_contain_req_t ok = {.memory_bytes = 64 * MiB, .nofile = 128, .fsize = 10 * MiB};
    cr_assert_eq(tg_contain_create(&c, "search", &ok, &ci, &err), 0, "%s", err.msg);
    cr_assert(tg_enforced_complete(&ci->enforced, NULL));
    cr_assert_str_eq(ci->name, "search-2");
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

/* Issue 12 item 12: network bandwidth and connection counts were taken
 * and dropped. No backend enforces them: they are in the report, not
 * applied and why, and "required" refuses an instance asking for them;
 * a namespace without a route out (network "none") holds both. */
Test(contain, network_requests_are_reported_and_required_refuses_them)
{
    tg_contain_t c;
    tg_contain_req_t q = {.nofile = 64, .bandwidth_bps = 10000000, .max_connections = 100};
    tg_contain_inst_t *ci = rlimit_create(&c, "net", &q);
    const tg_enforced_item_t *bw = &ci->enforced.r[TG_RES_BANDWIDTH];
    const tg_enforced_item_t *cn = &ci->enforced.r[TG_RES_CONNECTIONS];
    char buf[4096];

    cr_assert(bw->requested && cn->requested);
    cr_assert_not(bw->applied);
    cr_assert_not(cn->applied);
    cr_assert_str_eq(bw->reason, "no backend shapes bandwidth; remove "
                                 "resources.network.bandwidth_limit, set network \"none\", or "
                                 "use containment.mode best_effort");
    cr_assert_eq(tg_enforced_json(&ci->enforced, buf, sizeof buf) > 0, true);
    cr_assert(strstr(buf, "\"bandwidth\":{\"requested\":10000000,\"applied\":false,"
                          "\"backend\":\"none\",\"reason\":\"no backend shapes bandwidth;"),
              "%s", buf);
    cr_assert(strstr(buf, "\"connections\":{\"requested\":100,\"applied\":false,"
                          "\"backend\":\"none\",\"reason\":\"no backend counts connections;"),
              "%s", buf);
    cr_assert_gt(tg_enforced_text(&ci->enforced, buf, sizeof buf), 0);
    cr_assert(strstr(buf, "\nbandwidth   10Mbps     NO      none     no backend shapes "), "%s",
              buf);
    cr_assert(strstr(buf, "\nconnections 100        NO      none     no backend counts "), "%s",
              buf);
    tg_res_t miss;
    cr_assert_not(tg_enforced_complete(&ci->enforced, &miss));
    cr_assert_eq(miss, TG_RES_BANDWIDTH);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);

    tg_err_t err = {{0}};
    init_rlimit_ctx(&c, TG_CONTAIN_REQUIRED);
    cr_assert_eq(tg_contain_create(&c, "net", &q, &ci, &err), -EPERM);
    cr_assert_null(ci);
    cr_assert_str_eq(err.msg, "containment required: agent 'net': bandwidth 10Mbps is not "
                              "enforced on this host: no backend shapes bandwidth; remove "
                              "resources.network.bandwidth_limit, set network \"none\", or use "
                              "containment.mode best_effort");
    /* With no route out there is nothing to shape or count (the probe was
     * skipped: the host is taken to allow network namespaces). */
    c.caps.netns = true;
    q.network_none = true;
    cr_assert_eq(tg_contain_create(&c, "net", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert(ci->enforced.r[TG_RES_BANDWIDTH].applied);
    cr_assert_str_eq(ci->enforced.r[TG_RES_CONNECTIONS].backend, "netns");
    cr_assert(tg_enforced_complete(&ci->enforced, NULL));
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

/* Notices sent while a test runs. */
static char notice_text[8][512];
static size_t nnotices;

static void keep_notice(void *arg, const char *msg)
{
    (void)arg;
    if (nnotices < 8)
        snprintf(notice_text[nnotices++], sizeof notice_text[0], "%s", msg);
}

/* Issue 12 item 18: a hard RLIMIT_NOFILE below the request (here 512
 * under the default 1024) made every shim fail (setrlimit EPERM) while
 * the report said nofile applied. Each rlimit is held to toolgate's own
 * hard limit, the report gives the applied value, a notice says so once,
 * and the agent starts under it. */
Test(contain, rlimits_held_to_toolgates_hard_limit, .timeout = 30)
{
    struct rlimit low = {512, 512};
    tg_contain_t c;
    tg_contain_req_t q = {.nofile = 1024, .fsize = 10 * MiB};
    tg_contain_place_t pl;
    char buf[4096], v[64];
    shim_run_t r;

    tgc_drop_sys_resource();
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "%s", strerror(errno));
    nnotices = 0;
    tg_notice_set_sink(keep_notice, NULL);
    tg_contain_inst_t *ci = rlimit_create(&c, "agent", &q);
    const tg_enforced_item_t *it = &ci->enforced.r[TG_RES_NOFILE];
    cr_assert(it->applied);
    cr_assert_eq(it->value, 1024);
    cr_assert_eq(it->applied_value, 512);
    cr_assert_str_eq(it->how, "RLIMIT_NOFILE, at toolgate's own lower hard limit");
    cr_assert_eq(ci->enforced.r[TG_RES_FSIZE].applied_value, 10 * MiB, "fsize is not limited");
    cr_assert_gt(tg_enforced_json(&ci->enforced, buf, sizeof buf), 0);
    cr_assert(strstr(buf, "\"nofile\":{\"requested\":1024,\"applied\":true,\"backend\":\"rlimit\","
                          "\"applied_value\":512,\"how\":\"RLIMIT_NOFILE, at toolgate's own lower "
                          "hard limit\"}"),
              "%s", buf);
    cr_assert_eq(nnotices, 1);
    cr_assert_str_eq(notice_text[0], "agent 'agent': RLIMIT_NOFILE 1024 is above toolgate's own "
                                     "hard limit 512: the agent gets 512 (raise toolgate's own "
                                     "limit, with systemd's Limit*= or prlimit, to give it more)");

    /* The shim gets 512, and the agent runs under it. */
    tg_contain_place(ci, &pl);
    char *status[] = {(char *)HOG, (char *)"status", NULL};
    shim_run(&pl, status, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "shim: %s", r.err);
    cr_assert_str_eq(field(r.out, "rlimit_nofile", v, sizeof v), "512");

    /* Said once per agent and value: the next instance is quiet. */
    tg_contain_inst_t *ci2 = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "agent", &q, &ci2, &err), 0, "%s", err.msg);
    cr_assert_eq(ci2->enforced.r[TG_RES_NOFILE].applied_value, 512);
    cr_assert_eq(nnotices, 1);
    tg_notice_set_sink(NULL, NULL);
    tg_contain_destroy(ci2);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

/* The shim's own guard, for a hard limit lowered between the router's
 * report and the spawn (prlimit on a running toolgate): it sets the hard
 * limit instead of failing, and says so in one line. */
Test(contain, shim_lowers_an_rlimit_above_its_hard_limit, .timeout = 30)
{
    struct rlimit low = {512, 512};
    tg_contain_place_t pl = {.setsid = true, .nrl = 1};
    char v[64];
    shim_run_t r;

    tgc_drop_sys_resource();
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "%s", strerror(errno));
    pl.rl[0] = (tg_contain_rlimit_t){.resource = RLIMIT_NOFILE, .value = 1024};
    char *status[] = {(char *)HOG, (char *)"status", NULL};
    shim_run(&pl, status, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "shim: %s", r.err);
    cr_assert_str_eq(r.err, "toolgate shim: nofile 1024 is above the hard limit 512: set to 512\n");
    cr_assert_str_eq(field(r.out, "rlimit_nofile", v, sizeof v), "512");
}

Test(contain, mode_off_applies_nothing_and_says_so)
{
    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mode = TG_CONTAIN_OFF, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(&c, &o, &err), 0);
    cr_assert_eq(c.kind, TG_CONTAIN_NONE);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .nofile = 64};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0);
    cr_assert_not(ci->enforced.r[TG_RES_MEMORY].applied);
    cr_assert_str_eq(ci->enforced.r[TG_RES_MEMORY].reason, "containment.mode is off");
    cr_assert_str_eq(ci->enforced.r[TG_RES_NOFILE].reason, "containment.mode is off");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_eq(pl.nrl, 0);
    cr_assert_eq(pl.nprocs, 0);
    cr_assert_not(pl.no_new_privs);
    cr_assert(pl.setsid && pl.pdeathsig);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

Test(contain, judge_verdicts)
{
    tg_contain_inst_t ci;
    memset(&ci, 0, sizeof ci);
    tg_enforced_set(&ci.enforced, TG_RES_MEMORY, true, 64 * MiB, "cgroup1", "memory.limit_in_bytes",
                    NULL);
    tg_enforced_set(&ci.enforced, TG_RES_PIDS, true, 8, "cgroup1", "pids.max", NULL);
    tg_contain_sample_t prev = {.have = TG_SAMPLE_OOM | TG_SAMPLE_PIDS_DENIED}, cur = prev;
    cur.have |= TG_SAMPLE_MEM | TG_SAMPLE_PEAK | TG_SAMPLE_PIDS;
    cur.memory_current = 10 * MiB;
    cur.memory_peak = 64 * MiB;
    cur.pids_current = 8;
    tg_verdict_t v = tg_contain_judge(&ci, &prev, &cur);
    cr_assert_eq(v.kind, TG_VERDICT_OK);
    cur.oom_kills = 1;
    v = tg_contain_judge(&ci, &prev, &cur);
    cr_assert_eq(v.kind, TG_VERDICT_OOM);
    cr_assert_eq(v.res, TG_RES_MEMORY);
    cr_assert_eq(v.used, 64 * MiB);
    cr_assert_eq(v.limit, 64 * MiB);
    prev.oom_kills = 1; /* the same kill is reported once */
    cur.pids_denied = 3;
    v = tg_contain_judge(&ci, &prev, &cur);
    cr_assert_eq(v.kind, TG_VERDICT_PIDS_DENIED);
    cr_assert_eq(v.used, 8);
    cr_assert_eq(v.limit, 8);
    v = tg_contain_judge(&ci, NULL, &cur); /* no previous sample: counters from 0 */
    cr_assert_eq(v.kind, TG_VERDICT_OOM);
    /* the RSS monitor: only when it holds memory */
    tg_contain_sample_t rss = {.have = TG_SAMPLE_MEM, .memory_current = 70 * MiB};
    cr_assert_eq(tg_contain_judge(&ci, NULL, &rss).kind, TG_VERDICT_OK);
    ci.rss_monitor = true;
    v = tg_contain_judge(&ci, NULL, &rss);
    cr_assert_eq(v.kind, TG_VERDICT_MEMORY_OVER);
    cr_assert_eq(v.used, 70 * MiB);
    cr_assert_eq(v.limit, 64 * MiB);
    rss.memory_current = 64 * MiB;
    cr_assert_eq(tg_contain_judge(&ci, NULL, &rss).kind, TG_VERDICT_OK);
}

/* ---- cgroup2 logic against a fake cgroupfs tree ---- */

typedef struct fake {
    char root[256];
    char own[512];
    char base[600];
    char inst[700];
    char mountinfo[300];
    char cgroup[300];
    pid_t dead;
} fake_t;

static void fake_tree(fake_t *f, const char *own_procs)
{
    cr_assert_eq(tgh_mkdtemp(f->root, sizeof f->root), 0);
    char cg[300];
    snprintf(cg, sizeof cg, "%s/cg", f->root);
    snprintf(f->own, sizeof f->own, "%s/svc", cg);
    snprintf(f->base, sizeof f->base, "%s/toolgate-4242", f->own);
    snprintf(f->inst, sizeof f->inst, "%s/agent-1", f->base);
    snprintf(f->mountinfo, sizeof f->mountinfo, "%s/mountinfo", f->root);
    snprintf(f->cgroup, sizeof f->cgroup, "%s/cgroup", f->root);
    char line[512];
    snprintf(line, sizeof line,
             "25 30 0:22 / /proc rw,nosuid - proc proc rw\n"
             "41 31 0:38 / %s rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n",
             cg);
    tgh_put(f->root, "mountinfo", line);
    tgh_put(f->root, "cgroup", "0::/svc\n");
    mkdirs(f->own);
    tgh_put(f->own, "cgroup.controllers", "cpu io memory pids\n");
    tgh_put(f->own, "cgroup.subtree_control", "");
    tgh_put(f->own, "cgroup.procs", own_procs);
    /* a dead toolgate's tree: removed at init */
    f->dead = tgh_dead_pid();
    char orphan[700];
    snprintf(orphan, sizeof orphan, "%s/toolgate-%ld/search-3", f->own, (long)f->dead);
    mkdirs(orphan);
    snprintf(orphan, sizeof orphan, "%s/toolgate-%ld/router", f->own, (long)f->dead);
    mkdirs(orphan);
    /* What the kernel would populate: the base's and the instance's files. */
    char leaf[700];
    snprintf(leaf, sizeof leaf, "%s/router", f->base);
    mkdirs(leaf);
    tgh_put(leaf, "cgroup.procs", "");
    tgh_put(f->base, "cgroup.subtree_control", "");
    tgh_put(f->base, "cgroup.kill", "");
    mkdirs(f->inst);
    const char *empty[] = {"memory.max", "memory.swap.max", "memory.oom.group", "cpu.max",
                           "pids.max",   "cgroup.procs",    "cgroup.kill"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++)
        tgh_put(f->inst, empty[i], "");
    tgh_put(f->inst, "memory.current", "1234\n");
    tgh_put(f->inst, "memory.peak", "5678\n");
    tgh_put(f->inst, "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
    tgh_put(f->inst, "cpu.stat", "usage_usec 777\nuser_usec 700\nsystem_usec 77\n");
    tgh_put(f->inst, "pids.current", "2\n");
    tgh_put(f->inst, "pids.events", "max 5\n");
}

Test(contain, cgroup2_writes_on_a_fake_tree)
{
    fake_t f;
    fake_tree(&f, "4242\n");
    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mountinfo_path = f.mountinfo, .self_cgroup_path = f.cgroup,
                           .self_pid = 4242, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(c.kind, TG_CONTAIN_CGROUP2);
    cr_assert_str_eq(c.caps.h[TG_CG_V2].own_dir, f.own);
    cr_assert_str_eq(c.base[TG_CG_V2], f.base);
    cr_assert_not(c.caps.h[TG_CG_MEMORY].mounted);

    /* the dead toolgate's tree is gone; our own-pid tree (stale by
     * definition at init) got cgroup.kill and stays only because a fake
     * directory holding files cannot be removed */
    char p[800], buf[256];
    snprintf(p, sizeof p, "%s/toolgate-%ld", f.own, (long)f.dead);
    cr_assert_not(dir_exists(p), "orphan %s removed", p);
    cr_assert_eq(c.orphans_removed, 1);
    cr_assert_str_eq(read_file(f.base, "cgroup.kill", buf, sizeof buf), "1");

    /* toolgate was alone in its cgroup: it moved itself into base/router,
     * then delegated cpu, memory, pids down to the base */
    cr_assert(c.self_moved);
    snprintf(p, sizeof p, "%s/router", f.base);
    cr_assert_str_eq(read_file(p, "cgroup.procs", buf, sizeof buf), "0");
    cr_assert_str_eq(read_file(f.own, "cgroup.subtree_control", buf, sizeof buf),
                     "+cpu +memory +pids");
    cr_assert_str_eq(read_file(f.base, "cgroup.subtree_control", buf, sizeof buf),
                     "+cpu +memory +pids");
    cr_assert(c.caps.v2_memory && c.caps.v2_cpu && c.caps.v2_pids && c.caps.v2_kill);

    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .cpu_millicores = 500, .pids = 32};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(&c, "agent", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert_str_eq(ci->dir[TG_CG_V2], f.inst);
    cr_assert_str_eq(read_file(f.inst, "memory.max", buf, sizeof buf), "67108864");
    cr_assert_str_eq(read_file(f.inst, "memory.swap.max", buf, sizeof buf), "0");
    cr_assert_str_eq(read_file(f.inst, "memory.oom.group", buf, sizeof buf), "1");
    cr_assert_str_eq(read_file(f.inst, "cpu.max", buf, sizeof buf), "50000 100000");
    cr_assert_str_eq(read_file(f.inst, "pids.max", buf, sizeof buf), "32");
    const tg_enforced_t *e = &ci->enforced;
    cr_assert_str_eq(e->backend, "cgroup2");
    cr_assert(e->r[TG_RES_MEMORY].applied);
    cr_assert_str_eq(e->r[TG_RES_MEMORY].how, "memory.max, memory.swap.max=0");
    cr_assert_str_eq(e->r[TG_RES_CPU].how, "cpu.max");
    cr_assert_eq(e->r[TG_RES_CPU].applied_value, 500);
    cr_assert_str_eq(e->r[TG_RES_PIDS].backend, "cgroup2");
    cr_assert_not(ci->rss_monitor);

    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_eq(pl.nprocs, 1);
    snprintf(p, sizeof p, "%s/cgroup.procs", f.inst);
    cr_assert_str_eq(pl.procs[0], p);
    cr_assert_eq(pl.nrl, 0);

    tg_contain_sample_t s;
    cr_assert_eq(tg_contain_sample(ci, &s), 0);
    cr_assert_eq(s.have, TG_SAMPLE_MEM | TG_SAMPLE_PEAK | TG_SAMPLE_CPU | TG_SAMPLE_PIDS |
                             TG_SAMPLE_OOM | TG_SAMPLE_PIDS_DENIED);
    cr_assert_eq(s.memory_current, 1234);
    cr_assert_eq(s.memory_peak, 5678);
    cr_assert_eq(s.cpu_usage_us, 777);
    cr_assert_eq(s.pids_current, 2);
    cr_assert_eq(s.oom_kills, 1);
    cr_assert_eq(s.pids_denied, 5);
    tg_verdict_t v = tg_contain_judge(ci, NULL, &s);
    cr_assert_eq(v.kind, TG_VERDICT_OOM);
    cr_assert_eq(v.used, 5678);
    cr_assert_eq(v.limit, 64 * MiB);

    cr_assert_eq(tg_contain_kill(ci), 0);
    cr_assert_str_eq(read_file(f.inst, "cgroup.kill", buf, sizeof buf), "1");
    /* a fake directory holding files cannot be removed; cgroupfs allows it */
    cr_assert_eq(tg_contain_destroy(ci), -ENOTEMPTY);
    tgh_rmtree(f.root);
}

/* The root cgroup never has cgroup.kill: detection asks a child cgroup
 * (`toolgate --version` and `check` said "no cgroup.kill" on hosts where
 * toolgate runs in the root of the cgroup2 mount and kills work). */
Test(contain, cgroup_kill_detected_from_a_child_of_the_root)
{
    fake_t f;
    fake_tree(&f, "4242\n");
    tg_contain_opts_t o = {.mountinfo_path = f.mountinfo, .self_cgroup_path = f.cgroup,
                           .self_pid = 4242, .skip_netns_probe = true, .skip_tmpfs_probe = true};
    tg_contain_caps_t caps;
    /* own cgroup (svc) has no cgroup.kill; its one child toolgate-4242 has */
    char p[800];
    snprintf(p, sizeof p, "%s/toolgate-%ld", f.own, (long)f.dead);
    tgh_rmtree(p);
    tg_contain_detect(&caps, &o);
    cr_assert(caps.h[TG_CG_V2].usable);
    cr_assert(caps.v2_kill, "a child has cgroup.kill");
    /* a child without it: none */
    snprintf(p, sizeof p, "%s/cgroup.kill", f.base);
    cr_assert_eq(unlink(p), 0);
    tg_contain_detect(&caps, &o);
    cr_assert_not(caps.v2_kill);
    /* no child: the kernel's version says (this host's: 5.14 or later?) */
    struct utsname u;
    unsigned major = 0, minor = 0;
    cr_assert_eq(uname(&u), 0);
    sscanf(u.release, "%u.%u", &major, &minor);
    tgh_rmtree(f.base);
    tg_contain_detect(&caps, &o);
    cr_assert_eq(caps.v2_kill, major > 5 || (major == 5 && minor >= 14), "%s", u.release);
    /* the own cgroup has it itself */
    tgh_put(f.own, "cgroup.kill", "");
    tg_contain_detect(&caps, &o);
    cr_assert(caps.v2_kill);
    tgh_rmtree(f.root);
}

/* An interface file is never opened through a symbolic link: a tree that
 * is not cgroupfs (cgroupfs holds no links) cannot turn a write toolgate
 * makes as root into a write elsewhere, nor feed it another file's text. */
Test(contain, cgroup_files_are_not_followed_through_links)
{
    fake_t f;
    fake_tree(&f, "4242\n");
    char outside[300], p[800], buf[256];
    snprintf(outside, sizeof outside, "%s/outside", f.root);
    tgh_put(f.root, "outside", "precious\n");
    snprintf(p, sizeof p, "%s/memory.max", f.inst);
    cr_assert_eq(unlink(p), 0);
    cr_assert_eq(symlink(outside, p), 0);
    snprintf(outside, sizeof outside, "%s/number", f.root);
    tgh_put(f.root, "number", "999\n");
    snprintf(p, sizeof p, "%s/memory.current", f.inst);
    cr_assert_eq(unlink(p), 0);
    cr_assert_eq(symlink(outside, p), 0);

    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mountinfo_path = f.mountinfo, .self_cgroup_path = f.cgroup,
                           .self_pid = 4242, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(&c, &o, &err), 0, "%s", err.msg);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .pids = 32};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(&c, "agent", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert_str_eq(read_file(f.root, "outside", buf, sizeof buf), "precious\n");
    cr_assert_str_eq(read_file(f.inst, "pids.max", buf, sizeof buf), "32", "the others written");
    const tg_enforced_item_t *mem = &ci->enforced.r[TG_RES_MEMORY];
    cr_assert_str_neq(mem->backend, "cgroup2", "memory.max was not written: %s", mem->reason);

    tg_contain_sample_t s;
    tg_contain_sample(ci, &s);
    cr_assert(!(s.have & TG_SAMPLE_MEM) || s.memory_current != 999, "the link's target read");
    cr_assert_eq(tg_contain_kill(ci), 0);
    tg_contain_destroy(ci);
    tgh_rmtree(f.root);
}

Test(contain, cgroup2_not_delegated_when_others_share_the_cgroup)
{
    fake_t f;
    fake_tree(&f, "4242\n1\n");
    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mountinfo_path = f.mountinfo, .self_cgroup_path = f.cgroup,
                           .self_pid = 4242, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(c.kind, TG_CONTAIN_CGROUP2);
    cr_assert_not(c.self_moved);
    cr_assert_not(c.caps.v2_memory || c.caps.v2_cpu || c.caps.v2_pids);
    cr_assert_str_eq(c.why,
                     "cgroup2 controllers not delegated: toolgate's cgroup holds other processes");
    char buf[256];
    cr_assert_str_eq(read_file(f.own, "cgroup.subtree_control", buf, sizeof buf), "");

    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .cpu_millicores = 500};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(&c, "agent", &q, &ci, &err), 0, "%s", err.msg);
    /* memory falls back to rlimit; cpu says why it is not enforced */
    cr_assert_str_eq(ci->enforced.r[TG_RES_MEMORY].backend, "rlimit");
    cr_assert(ci->rss_monitor);
    cr_assert_not(ci->enforced.r[TG_RES_CPU].applied);
    cr_assert_str_eq(ci->enforced.r[TG_RES_CPU].reason,
                     "cpu controller not delegated to toolgate's cgroup; RLIMIT_CPU is total "
                     "seconds, not a rate");
    cr_assert_str_eq(read_file(f.inst, "memory.max", buf, sizeof buf), "");
    /* still joined, for cgroup.kill and accounting */
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_eq(pl.nprocs, 1);
    tg_contain_destroy(ci);
    tgh_rmtree(f.root);
}

Test(contain, forced_backend_missing_fails_init)
{
    char dir[TGH_PATH];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    tgh_put(dir, "mountinfo", "25 30 0:22 / /proc rw - proc proc rw\n");
    tgh_put(dir, "cgroup", "0::/\n");
    char mi[TGH_PATH + 16], cg[TGH_PATH + 16];
    snprintf(mi, sizeof mi, "%s/mountinfo", dir);
    snprintf(cg, sizeof cg, "%s/cgroup", dir);
    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.backend = TG_CONTAIN_CGROUP2, .mountinfo_path = mi,
                           .self_cgroup_path = cg, .skip_netns_probe = true};
    cr_assert_eq(tg_contain_init(&c, &o, &err), -ENOTSUP);
    cr_assert_str_eq(err.msg, "containment backend cgroup2 is not available on this host (not "
                              "mounted)");
    o.backend = TG_CONTAIN_AUTO;
    cr_assert_eq(tg_contain_init(&c, &o, &err), 0);
    cr_assert_eq(c.kind, TG_CONTAIN_RLIMIT);
    char text[2048];
    cr_assert_gt(tg_contain_caps_text(&c, text, sizeof text), 0);
    cr_assert(strstr(text, "containment: backend rlimit, mode best_effort; no writable cgroup "
                           "hierarchy below toolgate's cgroup\n") == text,
              "%s", text);
    cr_assert(strstr(text, "  memory   unavailable: not mounted\n") != NULL, "%s", text);
    tg_contain_fini(&c);
    tgh_rmtree(dir);
}

/* ---- the real host ---- */

Test(contain, detect_this_host)
{
    tg_contain_t c;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_init(&c, NULL, &err), 0, "%s", err.msg);
    char text[4096];
    cr_assert_gt(tg_contain_caps_text(&c, text, sizeof text), 0);
    fprintf(stderr, "%s", text);
    const tg_contain_caps_t *k = &c.caps;
    /* The choice follows the capabilities. */
    bool v1 = (k->h[TG_CG_MEMORY].usable && k->h[TG_CG_MEMORY].writable) ||
              (k->h[TG_CG_PIDS].usable && k->h[TG_CG_PIDS].writable) ||
              (k->h[TG_CG_CPU].usable && k->h[TG_CG_CPU].writable);
    bool v2 = k->h[TG_CG_V2].usable && k->h[TG_CG_V2].writable;
    if (v2 && (k->v2_memory || k->v2_cpu || k->v2_pids))
        cr_assert_eq(c.kind, TG_CONTAIN_CGROUP2);
    else if (v1)
        cr_assert_eq(c.kind, TG_CONTAIN_CGROUP1);
    else if (v2)
        cr_assert_eq(c.kind, TG_CONTAIN_CGROUP2);
    else
        cr_assert_eq(c.kind, TG_CONTAIN_RLIMIT);
    /* every base made is a directory named toolgate-<our pid> */
    char want[32];
    snprintf(want, sizeof want, "/toolgate-%ld", (long)getpid());
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (c.base[i][0] == '\0')
            continue;
        cr_assert(dir_exists(c.base[i]), "%s", c.base[i]);
        size_t bl = strlen(c.base[i]), wl = strlen(want);
        cr_assert(bl > wl && strcmp(c.base[i] + bl - wl, want) == 0, "%s", c.base[i]);
        cr_assert(strncmp(c.base[i], k->h[i].own_dir, strlen(k->h[i].own_dir)) == 0);
    }
    cr_assert_eq(tg_contain_fini(&c), 0);
    for (int i = 0; i < TG_CG_NHIER; i++)
        cr_assert(c.base[i][0] == '\0');
}

Test(contain, hostile_id_stays_below_the_base_and_is_removed)
{
    tg_contain_t c;
    init_cgroup_ctx(&c);
    char bases[TG_CG_NHIER][TG_CG_PATH_MAX];
    memcpy(bases, c.base, sizeof bases);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .pids = 16};
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "../../x", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert_str_eq(ci->name, "x2e2e2f2e2e2f78-1");
    char dirs[TG_CG_NHIER][TG_CG_PATH_MAX];
    int ndirs = 0;
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (ci->dir[i][0] == '\0')
            continue;
        char want[TG_CG_PATH_MAX + 32];
        snprintf(want, sizeof want, "%s/x2e2e2f2e2e2f78-1", c.base[i]);
        cr_assert_str_eq(ci->dir[i], want);
        char real[PATH_MAX];
        cr_assert_not_null(realpath(ci->dir[i], real));
        cr_assert_str_eq(real, want, "no escape through the id");
        memcpy(dirs[ndirs++], ci->dir[i], TG_CG_PATH_MAX);
    }
    cr_assert_gt(ndirs, 0);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    for (int i = 0; i < ndirs; i++)
        cr_assert_not(dir_exists(dirs[i]), "%s removed by destroy", dirs[i]);
    cr_assert_eq(tg_contain_fini(&c), 0);
    for (int i = 0; i < TG_CG_NHIER; i++) {
        if (bases[i][0])
            cr_assert_not(dir_exists(bases[i]), "%s removed by fini", bases[i]);
    }
}

Test(contain, memory_hog_is_oom_killed_under_64Mi, .timeout = 60)
{
    tg_contain_t c;
    init_cgroup_ctx(&c);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB};
    tg_contain_inst_t *ci = create_or_skip(&c, &q, TG_RES_MEMORY, "cgroup");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    char *argv[] = {(char *)HOG, (char *)"mem", (char *)"256", NULL};
    shim_run_t r;
    shim_run(&pl, argv, false, 30000, &r);
    cr_assert_not(r.timed_out);
    cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL,
              "status %#x out %s err %s", r.status, r.out, r.err);
    cr_assert_null(strstr(r.out, "allocated"), "the hog never finished: %s", r.out);
    tg_contain_sample_t s;
    cr_assert_eq(tg_contain_sample(ci, &s), 0);
    cr_assert(s.have & TG_SAMPLE_OOM);
    cr_assert_eq(s.oom_kills, 1);
    cr_assert(s.have & TG_SAMPLE_PEAK);
    cr_assert_geq(s.memory_peak, 60 * MiB, "peak %" PRIu64, s.memory_peak);
    cr_assert_leq(s.memory_peak, 64 * MiB);
    tg_verdict_t v = tg_contain_judge(ci, NULL, &s);
    cr_assert_eq(v.kind, TG_VERDICT_OOM);
    cr_assert_eq(v.limit, 64 * MiB);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_assert_eq(tg_contain_fini(&c), 0);
}

/* Orphans of the forked hog reparent to this process, so it can reap
 * them and pids.current drops as soon as they die. */
static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

Test(contain, fork_bomb_stops_at_pids_max, .timeout = 60)
{
    tg_contain_t c;
    init_cgroup_ctx(&c);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    tg_contain_req_t q = {.pids = 8};
    tg_contain_inst_t *ci = create_or_skip(&c, &q, TG_RES_PIDS, "cgroup");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    char *argv[] = {(char *)HOG, (char *)"fork", (char *)"20", (char *)"30000", NULL};
    shim_run_t r;
    shim_run(&pl, argv, false, 20000, &r);
    cr_assert_not(r.timed_out);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 4, "status %#x err %s", r.status,
              r.err);
    /* 8 tasks: the hog itself and 7 children */
    cr_assert_str_eq(r.out, "forked 7\n");
    tg_contain_sample_t s;
    cr_assert_eq(tg_contain_sample(ci, &s), 0);
    cr_assert(s.have & TG_SAMPLE_PIDS);
    cr_assert_eq(s.pids_current, 7, "the 7 sleeping children remain");
    cr_assert(s.have & TG_SAMPLE_PIDS_DENIED);
    cr_assert_geq(s.pids_denied, 1);
    tg_verdict_t v = tg_contain_judge(ci, NULL, &s);
    cr_assert_eq(v.kind, TG_VERDICT_PIDS_DENIED);
    cr_assert_eq(v.limit, 8);

    /* kill takes the whole tree, not just a main pid */
    cr_assert_eq(tg_contain_kill(ci), 0);
    uint64_t deadline = tgh_now_ms() + 2000;
    do {
        reap_all();
        tg_contain_sample(ci, &s);
        if (s.pids_current == 0)
            break;
        tgh_sleep_ms(5);
    } while (tgh_now_ms() < deadline);
    cr_assert_eq(s.pids_current, 0);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_assert_eq(tg_contain_fini(&c), 0);
}

static uint64_t spin_cpu_us(tg_contain_t *c, uint32_t millicores)
{
    tg_contain_req_t q = {.cpu_millicores = millicores};
    tg_err_t err = {{0}};
    tg_contain_inst_t *ci = NULL;
    cr_assert_eq(tg_contain_create(c, "spin", &q, &ci, &err), 0, "%s", err.msg);
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    char *argv[] = {(char *)HOG, (char *)"spin", (char *)"1000", NULL};
    shim_run_t r;
    shim_run(&pl, argv, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x err %s", r.status,
              r.err);
    cr_assert_str_eq(r.out, "spun\n");
    tg_contain_sample_t s;
    cr_assert_eq(tg_contain_sample(ci, &s), 0);
    cr_assert(s.have & TG_SAMPLE_CPU);
    tg_contain_destroy(ci);
    return s.cpu_usage_us;
}

Test(contain, cpu_quota_throttles_a_spinner, .timeout = 60)
{
    tg_contain_t c;
    init_cgroup_ctx(&c);
    tg_contain_req_t probe = {.cpu_millicores = 100};
    tg_contain_inst_t *ci = create_or_skip(&c, &probe, TG_RES_CPU, "cgroup");
    cr_assert_eq(ci->enforced.r[TG_RES_CPU].applied_value, 100);
    tg_contain_destroy(ci);

    uint64_t slow = spin_cpu_us(&c, 100);
    uint64_t fast = spin_cpu_us(&c, 0);
    fprintf(stderr, "spin 1 s: %" PRIu64 " us CPU at 100m, %" PRIu64 " us unlimited\n", slow, fast);
    /* 100m of one second is 100 ms (plus at most one period's slack). */
    cr_assert_geq(slow, 20000);
    cr_assert_leq(slow, 250000);
    /* Twice, not more: on a loaded 2-CPU machine (parallel builds, ctest
     * -j2) the unthrottled spinner gets well under a whole CPU, while the
     * throttled one's share is capped whatever the load. */
    cr_assert_geq(fast, 2 * slow, "the unthrottled spinner gets far more CPU");
    cr_assert_eq(tg_contain_fini(&c), 0);
}

Test(contain, rlimit_data_fallback_stops_the_hog, .timeout = 60)
{
    if (TG_ASAN)
        cr_skip_test("an AddressSanitizer fixture cannot start under RLIMIT_DATA");
    tg_contain_t c;
    tg_contain_req_t q = {.memory_bytes = 64 * MiB};
    tg_contain_inst_t *ci = rlimit_create(&c, "hog", &q);
    cr_assert_str_eq(ci->enforced.r[TG_RES_MEMORY].how, "RLIMIT_DATA + process-tree RSS monitor");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    char *argv[] = {(char *)HOG, (char *)"mem", (char *)"256", NULL};
    shim_run_t r;
    shim_run(&pl, argv, false, 30000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3, "status %#x out %s err %s",
              r.status, r.out, r.err);
    long at = -1;
    cr_assert_eq(sscanf(r.out, "alloc_failed_at %ld", &at), 1, "%s", r.out);
    cr_assert(at > 32 && at < 64, "malloc failed at %ld MiB", at);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

Test(contain, rss_monitor_samples_the_tree, .timeout = 60)
{
    tg_contain_t c;
    tg_contain_req_t q = {.memory_bytes = 16 * MiB};
    tg_contain_inst_t *ci = rlimit_create(&c, "hog", &q);
    /* No DATA limit for this run: the monitor alone must see the tree
     * (the hog and, through fork, nothing else) grow past 16Mi. */
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    pl.nrl = 0;
    char *argv[] = {(char *)HOG, (char *)"mem", (char *)"40", (char *)"5000", NULL};
    pid_t pid = shim_spawn(&pl, argv);
    tg_contain_set_pid(ci, pid);
    tg_contain_sample_t prev = {0}, s = {0};
    tg_verdict_t v = {0};
    uint64_t deadline = tgh_now_ms() + 4000;
    while (tgh_now_ms() < deadline) {
        cr_assert_eq(tg_contain_sample(ci, &s), 0);
        v = tg_contain_judge(ci, &prev, &s);
        if (v.kind != TG_VERDICT_OK)
            break;
        prev = s;
        tgh_sleep_ms(20);
    }
    cr_assert_eq(v.kind, TG_VERDICT_MEMORY_OVER);
    cr_assert_gt(v.used, 16 * MiB);
    cr_assert_eq(v.limit, 16 * MiB);
    cr_assert_eq(s.pids_current, 1);
    cr_assert(s.have & TG_SAMPLE_CPU);
    cr_assert_geq(s.memory_peak, s.memory_current);
    cr_assert_eq(tg_contain_kill(ci), 0);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    tg_contain_set_pid(ci, 0);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

static bool have_node(void)
{
    return access("/usr/bin/node", X_OK) == 0 || access("/usr/local/bin/node", X_OK) == 0;
}

Test(contain, node_starts_under_rlimit_data_and_dies_under_rlimit_as, .timeout = 120)
{
    if (!have_node())
        cr_skip_test("node is not installed");
    tg_contain_t c;
    tg_contain_req_t q = {.memory_bytes = 256 * MiB};
    tg_contain_inst_t *ci = rlimit_create(&c, "node", &q);
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_eq(pl.rl[0].resource, RLIMIT_DATA);

    char *ok[] = {(char *)"node", (char *)"-e", (char *)"console.log('ok')", NULL};
    shim_run_t r;
    shim_run(&pl, ok, false, 30000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x err %s", r.status,
              r.err);
    cr_assert_str_eq(r.out, "ok\n");

    /* over the limit, node is stopped (malloc fails inside V8 or Buffer) */
    char *hog[] = {(char *)"node", (char *)"-e",
                   (char *)"const a=[];for(;;)a.push(Buffer.alloc(16<<20,1))", NULL};
    shim_run(&pl, hog, false, 30000, &r);
    cr_assert_not(r.timed_out);
    cr_assert(!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0), "status %#x", r.status);

    /* Why never RLIMIT_AS: V8 reserves its code range up front. */
    tg_contain_place_t as = {.setsid = true, .nrl = 1};
    as.rl[0] = (tg_contain_rlimit_t){.resource = RLIMIT_AS, .value = 512 * MiB};
    shim_run(&as, ok, false, 30000, &r);
    cr_assert(!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0), "status %#x", r.status);
    cr_assert_null(strstr(r.out, "ok"));
    fprintf(stderr, "node under RLIMIT_AS=512Mi: %.200s\n", r.err);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

Test(contain, shim_places_and_hardens_the_agent, .timeout = 60)
{
    tg_contain_t c;
    init_cgroup_ctx(&c);
    tg_contain_req_t q = {.memory_bytes = 64 * MiB, .pids = 16, .network_none = true,
                          .nofile = 64, .fsize = 1 * MiB};
    tg_contain_inst_t *ci = create_or_skip(&c, &q, TG_RES_MEMORY, "cgroup");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_assert_gt(pl.nprocs, 0);
    char *argv[] = {(char *)HOG, (char *)"status", NULL};
    shim_run_t r;
    shim_run(&pl, argv, true, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x err %s", r.status,
              r.err);
    char v[512];
    cr_assert_str_eq(field(r.out, "no_new_privs", v, sizeof v), "1");
    cr_assert_str_eq(field(r.out, "fds", v, sizeof v), "0,1,2", "stray fds closed");
    cr_assert_str_eq(field(r.out, "pdeathsig", v, sizeof v), "9");
    cr_assert_str_eq(field(r.out, "session_leader", v, sizeof v), "1");
    cr_assert_str_eq(field(r.out, "rlimit_nofile", v, sizeof v), "64");
    cr_assert_str_eq(field(r.out, "rlimit_fsize", v, sizeof v), "1048576");
    cr_assert_str_eq(field(r.out, "rlimit_data", v, sizeof v), "infinity",
                     "memory is the cgroup's job: no DATA limit");
    cr_assert_str_eq(field(r.out, "rlimit_as", v, sizeof v), "infinity");
    if (ci->enforced.r[TG_RES_NETWORK].applied) {
        cr_assert(pl.unshare_net);
        cr_assert_str_eq(field(r.out, "ifaces", v, sizeof v), "lo", "only loopback");
        cr_assert_str_eq(field(r.out, "lo_up", v, sizeof v), "1");
    } else {
        cr_log_warn("network namespaces unavailable: %s", ci->enforced.r[TG_RES_NETWORK].reason);
    }
    /* one cgroup= line per joined hierarchy names this instance */
    char suffix[128];
    snprintf(suffix, sizeof suffix, "/toolgate-%ld/%s", (long)getpid(), ci->name);
    size_t joined = 0;
    for (const char *p = r.out; (p = strstr(p, "cgroup=")) != NULL; p++) {
        const char *nl = strchr(p, '\n');
        size_t l = (size_t)(nl - p), sl = strlen(suffix);
        if (l > sl && strncmp(nl - sl, suffix, sl) == 0)
            joined++;
    }
    cr_assert_eq(joined, pl.nprocs, "%s", r.out);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_assert_eq(tg_contain_fini(&c), 0);
}

Test(contain, shim_drops_to_a_dedicated_user, .timeout = 60)
{
    need_root();
    tg_contain_t c;
    init_rlimit_ctx(&c, TG_CONTAIN_BEST_EFFORT);
    /* without a pids controller, a dedicated user makes RLIMIT_NPROC honest */
    tg_contain_req_t q = {.pids = 16, .set_user = true, .uid = 65534, .gid = 65534};
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "nobody", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert(ci->enforced.r[TG_RES_PIDS].applied);
    cr_assert_str_eq(ci->enforced.r[TG_RES_PIDS].backend, "rlimit");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    /* The build tree may sit below a directory the dropped user cannot
     * enter (a clone in `mktemp -d`, mode 0700): run a copy from a
     * directory everyone can traverse. */
    char dir[] = "/tmp/tg-hog-XXXXXX", hog[64], cmd[256];
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(chmod(dir, 0755), 0);
    snprintf(hog, sizeof hog, "%s/tg_hog", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 0755 '%s'", HOG, hog, hog);
    cr_assert_eq(system(cmd), 0);
    char *argv[] = {hog, (char *)"status", NULL};
    shim_run_t r;
    shim_run(&pl, argv, false, 10000, &r);
    unlink(hog);
    rmdir(dir);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x err %s", r.status,
              r.err);
    char v[64];
    cr_assert_str_eq(field(r.out, "uid", v, sizeof v), "65534");
    cr_assert_str_eq(field(r.out, "gid", v, sizeof v), "65534");
    cr_assert_str_eq(field(r.out, "groups", v, sizeof v), "0");
    cr_assert_str_eq(field(r.out, "rlimit_nproc", v, sizeof v), "16");
    cr_assert_str_eq(field(r.out, "pdeathsig", v, sizeof v), "9", "armed after the uid change");
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

Test(contain, shim_reports_failures_in_one_line)
{
    tg_contain_place_t pl = {.setsid = true};
    shim_run_t r;
    char *missing[] = {(char *)"/nonexistent/agent", (char *)"--secret-arg", NULL};
    shim_run(&pl, missing, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == TG_SHIM_EXIT_NOTFOUND);
    cr_assert_str_eq(r.err, "toolgate shim: exec /nonexistent/agent: No such file or directory\n");

    pl.nprocs = 1;
    snprintf(pl.procs[0], sizeof pl.procs[0], "/nonexistent/cgroup.procs");
    char *hog[] = {(char *)HOG, (char *)"status", NULL};
    shim_run(&pl, hog, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == TG_SHIM_EXIT_SETUP);
    cr_assert_str_eq(r.err, "toolgate shim: join /nonexistent/cgroup.procs: No such file or "
                            "directory\n");
    cr_assert_eq(r.outlen, 0, "the agent never ran");

    /* bad options from a hand-made command line */
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        char *bad[] = {(char *)"__shim", (char *)"--rlimit", (char *)"bogus=1", (char *)"--",
                       (char *)"true", NULL};
        _exit(tg_shim_main(5, bad));
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == TG_SHIM_EXIT_SETUP);
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        char *none[] = {(char *)"__shim", (char *)"--setsid", (char *)"--", NULL};
        _exit(tg_shim_main(3, none));
    }
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == TG_SHIM_EXIT_SETUP);
}

/* A toolgate that dies without cleanup, and whose watchdog died too (it
 * is SIGKILLed with it here: no watchdog), leaves its cgroups and a
 * running agent; the next toolgate kills the agent and removes the tree. */
Test(contain, orphans_of_a_killed_toolgate_are_cleaned, .timeout = 60)
{
    need_root();
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t tg = fork();
    cr_assert_geq(tg, 0);
    if (tg == 0) {
        close(pfd[0]);
        tg_contain_t c;
        tg_err_t err = {{0}};
        tg_contain_opts_t o = {.no_watchdog = true};
        if (tg_contain_init(&c, &o, &err) < 0 ||
            (c.kind != TG_CONTAIN_CGROUP1 && c.kind != TG_CONTAIN_CGROUP2))
            _exit(77);
        tg_contain_req_t q = {.pids = 16};
        tg_contain_inst_t *ci = NULL;
        if (tg_contain_create(&c, "victim", &q, &ci, &err) < 0)
            _exit(78);
        tg_contain_place_t pl;
        tg_contain_place(ci, &pl);
        /* No death signal, as when the spawning thread outlived... or the
         * agent ignored it: the point is an agent that survived. */
        pl.pdeathsig = false;
        char *argv[] = {(char *)HOG, (char *)"sleep", (char *)"60000", NULL};
        pid_t agent = shim_spawn(&pl, argv);
        for (int i = 0; i < 200 && pl.nprocs; i++) { /* wait until it joined */
            char buf[64];
            int fd = open(pl.procs[0], O_RDONLY);
            ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : 0;
            if (fd >= 0)
                close(fd);
            if (n > 0)
                break;
            tgh_sleep_ms(5);
        }
        char msg[TG_CG_PATH_MAX + 32];
        int n = snprintf(msg, sizeof msg, "%ld %s\n", (long)agent, ci->dir[TG_CG_V2][0] ? ci->dir[TG_CG_V2] : pl.procs[0]);
        if (write(pfd[1], msg, (size_t)n) != n)
            _exit(79);
        raise(SIGKILL);
    }
    close(pfd[1]);
    char msg[TG_CG_PATH_MAX + 32] = "";
    ssize_t n = read(pfd[0], msg, sizeof msg - 1);
    close(pfd[0]);
    int st;
    waitpid(tg, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        cr_skip_test("no writable cgroup hierarchy here");
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
    cr_assert_gt(n, 0);
    long agent = 0;
    char path[TG_CG_PATH_MAX];
    cr_assert_eq(sscanf(msg, "%ld %1023s", &agent, path), 2);
    char *slash = strrchr(path, '/');
    if (strcmp(slash, "/cgroup.procs") == 0)
        *slash = '\0';
    char orphan_base[TG_CG_PATH_MAX];
    snprintf(orphan_base, sizeof orphan_base, "%s", path);
    *strrchr(orphan_base, '/') = '\0';
    cr_assert(dir_exists(path), "the dead toolgate's instance cgroup %s is still there", path);
    cr_assert_eq(kill((pid_t)agent, 0), 0, "its agent still runs");

    tg_contain_t c;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_init(&c, NULL, &err), 0, "%s", err.msg);
    cr_assert_geq(c.orphans_removed, 1);
    cr_assert_not(dir_exists(path), "%s removed", path);
    cr_assert_not(dir_exists(orphan_base), "%s removed", orphan_base);
    /* the agent is dead (a zombie until init reaps it, at most) */
    char stat_path[64], buf[256];
    snprintf(stat_path, sizeof stat_path, "/proc/%ld", agent);
    bool dead = false;
    for (int i = 0; i < 200 && !dead; i++) {
        const char *s = read_file(stat_path, "stat", buf, sizeof buf);
        dead = !s || strstr(s, ") Z ") != NULL;
        if (!dead)
            tgh_sleep_ms(5);
    }
    cr_assert(dead, "orphan agent %ld killed", agent);
    cr_assert_eq(tg_contain_fini(&c), 0);
}
