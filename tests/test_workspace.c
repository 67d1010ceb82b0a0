/* Workspaces (issue 4 part 5): the `workspace` key and its hostile
 * values, the request built from config, the scan backend (counting,
 * resuming a big tree across samples, symlinks never followed, orphans of
 * dead toolgates swept, the directory removed at destroy), the tmpfs
 * backend through the real exec shim (ENOSPC at the size, files invisible
 * to the host), a dropped user that fills its workspace and cannot write
 * beside it, containment.mode required refusing what cannot be applied,
 * `toolgate check`'s prediction, and, driving the real binary: a tmpfs
 * quota that holds while toolgate and a second agent keep answering, a
 * scanned workspace whose overflow kills the instance with
 * resource_limit_exceeded naming disk, and `toolgate check` showing the
 * disk row.
 *
 * Tests that need root (mounts) or a host that permits a private mount
 * namespace skip with the reason.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"
#include "tests/tg_shim.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/un.h>

#include "config/config.h"
#include "limits/contain.h"
#include "router/cli/check.h"
#include "router/gateway/contain_cfg.h"
#include "router/agent/shim.h"

#define HOG     TG_AGENTS_DIR "/tg_hog"
#define FIXTURE TG_AGENTS_DIR "/tg_fixture_agent"
#define KiB     1024ull
#define MiB     (1024ull * 1024)

static void ws_fini(void)
{
    tgh_cleanup();
}

TestSuite(workspace, .fini = ws_fini, .timeout = 60);

/* ---- helpers ---------------------------------------------------------- */

static bool exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void write_bytes(const char *path, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0, "create %s: %s", path, strerror(errno));
    static char buf[64 * 1024];
    memset(buf, 0x5a, sizeof buf);
    while (n > 0) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        cr_assert_eq(write(fd, buf, k), (ssize_t)k);
        n -= k;
    }
    cr_assert_eq(fsync(fd), 0);
    close(fd);
}

/* Entries in <dir> other than "." and "..". */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A forced rlimit context: no cgroups touched, no netns probe; the tmpfs
 * probe only with <probe_tmpfs>. */
static void rl_ctx(tg_contain_t *c, tg_contain_mode_t mode, bool probe_tmpfs)
{
    tg_err_t err = {{0}};
    tg_contain_opts_t o = {.mode = mode,
                           .backend = TG_CONTAIN_RLIMIT,
                           .skip_netns_probe = true,
                           .skip_tmpfs_probe = !probe_tmpfs};
    cr_assert_eq(tg_contain_init(c, &o, &err), 0, "%s", err.msg);
}

static tg_contain_req_t ws_req(const char *ws, uint64_t disk, tg_workspace_backend_t b)
{
    tg_contain_req_t q = {
        .disk_bytes = disk, .fsize = disk, .workspace = ws, .workspace_backend = b};
    return q;
}

/* A best-effort rlimit context in <c>, and in it the instance <name>
 * with the workspace <ws> holding <disk> bytes by backend <b>. */
static tg_contain_inst_t *ws_create(tg_contain_t *c, const char *name, const char *ws,
                                    uint64_t disk, tg_workspace_backend_t b)
{
    rl_ctx(c, TG_CONTAIN_BEST_EFFORT, false);
    tg_contain_req_t q = ws_req(ws, disk, b);
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(c, name, &q, &ci, &err), 0, "%s", err.msg);
    return ci;
}

/* Destroy <ci>, whose workspace directory must go with it, and <c>. */
static void ws_destroy(tg_contain_t *c, tg_contain_inst_t *ci)
{
    char dir[TGH_PATH * 2];
    snprintf(dir, sizeof dir, "%s", ci->ws_dir);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_expect_not(exists(dir), "%s was left behind", dir);
    tg_contain_fini(c);
}

/* ---- config ------------------------------------------------------------ */

static void load_fails(const char *json, const char *msg)
{
    tg_config_t cfg;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_expect_eq(tg_config_load_buffer(&cfg, "t.json", json, strlen(json), &err), -1,
                 "accepted: %s", json);
    cr_expect_str_eq(err.msg, msg, "for %s", json);
    tg_config_free(&cfg);
}

Test(workspace, hostile_paths_are_refused_with_their_position)
{
    /* The value starts at column 34 of {"agents":[{"id":"a","workspace":...}]} */
#define WS_JSON(v) "{\"agents\":[{\"id\":\"a\",\"workspace\":" v "}]}"
#define WS_ERR(q, why)                                                                             \
    "t.json:1:34: agents[0].workspace: " q " " why                                                 \
    " (expected an absolute, normalised directory path)"
    load_fails(WS_JSON("\"ws\""), WS_ERR("\"ws\"", "is not an absolute path"));
    load_fails(WS_JSON("\"/srv/../etc\""), WS_ERR("\"/srv/../etc\"", "has a \"..\" component"));
    load_fails(WS_JSON("\"/srv/./ws\""), WS_ERR("\"/srv/./ws\"", "has a \".\" component"));
    load_fails(WS_JSON("\"/srv//ws\""),
               WS_ERR("\"/srv//ws\"", "has an empty component (a doubled or trailing '/')"));
    load_fails(WS_JSON("\"/srv/ws/\""),
               WS_ERR("\"/srv/ws/\"", "has an empty component (a doubled or trailing '/')"));
    load_fails(WS_JSON("\"/\""), WS_ERR("\"/\"", "is the root directory"));
    load_fails(WS_JSON("\"/proc/self/cwd\""),
               WS_ERR("\"/proc/self/cwd\"", "lies under /proc, a kernel filesystem"));
    load_fails(WS_JSON("\"/dev\""), WS_ERR("\"/dev\"", "lies under /dev, a kernel filesystem"));
    load_fails(WS_JSON("\"/srv/a\\nb\""),
               WS_ERR("\"/srv/a\\x0ab\"", "holds a control byte at offset 6"));
    load_fails(WS_JSON("\"\""), "t.json:1:34: agents[0].workspace: expected a non-empty string");
    load_fails(WS_JSON("7"), "t.json:1:34: agents[0].workspace: expected a string, got an integer");
    char big[TG_WORKSPACE_PATH_MAX + 64], json[TG_WORKSPACE_PATH_MAX + 128], want[TG_ERR_MAX];
    memset(big, 'a', sizeof big);
    big[0] = '/';
    big[TG_WORKSPACE_PATH_MAX] = '\0';
    snprintf(json, sizeof json, WS_JSON("\"%s\""), big);
    tg_config_t cfg;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", json, strlen(json), &err), -1);
    snprintf(want, sizeof want, "is %d bytes long (at most %d)", TG_WORKSPACE_PATH_MAX,
             TG_WORKSPACE_PATH_MAX - 1);
    cr_expect(strstr(err.msg, want) != NULL, "%s", err.msg);
    cr_expect(strncmp(err.msg, "t.json:1:34: agents[0].workspace: ", 34) == 0, "%s", err.msg);
    tg_config_free(&cfg);
    /* The backend key names its choices. */
    load_fails("{\"containment\":{\"workspace_backend\":\"zfs\"}}",
               "t.json:1:37: containment.workspace_backend: \"zfs\" is not a workspace backend "
               "(expected \"auto\", \"tmpfs\" or \"scan\")");
#undef WS_JSON
#undef WS_ERR
}

Test(workspace, config_and_limit_keys_build_the_request)
{
    tg_config_t cfg;
    tg_err_t err = {{0}};
    tg_contain_req_t req;
    static const char text[] =
        "{\"containment\":{\"workspace_backend\":\"scan\"},"
        "\"agents\":[{\"id\":\"a\",\"workspace\":\"/srv/tg/a\"},{\"id\":\"b\"}]}";
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", text, sizeof text - 1, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(cfg.agents[0].workspace, "/srv/tg/a");
    cr_assert_null(cfg.agents[1].workspace);
    cr_assert_eq(cfg.workspace_backend, TG_WORKSPACE_SCAN);
    /* A workspace takes the disk limit as its size, the default 1Gi here. */
    cr_assert_eq(tg_config_contain_req_for(&cfg, &cfg.agents[0], &req), 0);
    cr_expect_str_eq(req.workspace, "/srv/tg/a");
    cr_expect_eq(req.workspace_backend, TG_WORKSPACE_SCAN);
    cr_expect_eq(req.disk_bytes, 1ull << 30);
    cr_expect_eq(req.fsize, 1ull << 30);
    /* Without one, disk is requested only when configured (RLIMIT_FSIZE still caps files). */
    cr_assert_eq(tg_config_contain_req_for(&cfg, &cfg.agents[1], &req), 0);
    cr_expect_null(req.workspace);
    cr_expect_eq(req.disk_bytes, 0);

    /* --limit, as wrap mode gives them. */
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "workspace=/srv/tg/b", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "disk=64Mi", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "workspace_backend=tmpfs", &err), 0, "%s", err.msg);
    cr_assert_eq(tg_config_contain_req_for(&cfg, &cfg.agents[1], &req), 0);
    cr_expect_str_eq(req.workspace, "/srv/tg/b");
    cr_expect_eq(req.workspace_backend, TG_WORKSPACE_TMPFS);
    cr_expect_eq(req.disk_bytes, 64 * MiB);
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "workspace=srv", &err), -1);
    cr_expect_str_eq(err.msg, "--limit workspace=srv: workspace: \"srv\" is not an absolute path "
                              "(expected an absolute, normalised directory path)");
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "workspace=/a/../b", &err), -1);
    cr_expect_str_eq(err.msg, "--limit workspace=/a/../b: workspace: \"/a/../b\" has a \"..\" "
                              "component (expected an absolute, normalised directory path)");
    cr_assert_eq(tg_config_apply_limit(&cfg, 1, "workspace_backend=nfs", &err), -1);
    cr_expect_str_eq(err.msg, "--limit workspace_backend=nfs: workspace_backend: \"nfs\" is not a "
                              "workspace backend (expected \"auto\", \"tmpfs\" or \"scan\")");
    cr_expect_str_eq(cfg.agents[1].workspace, "/srv/tg/b"); /* failures changed nothing */
    cr_expect_str_eq(tg_workspace_backend_name(TG_WORKSPACE_AUTO), "auto");
    cr_expect_str_eq(tg_workspace_backend_name(TG_WORKSPACE_SCAN), "scan");
    tg_config_free(&cfg);
}

/* ---- scan backend ------------------------------------------------------ */

Test(workspace, scan_counts_blocks_ignores_symlinks_and_cleans_up)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8], outside[TGH_PATH + 16], p[TGH_PATH * 2];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    cr_assert_eq(mkdir(outside, 0700), 0);
    snprintf(p, sizeof p, "%s/big", outside);
    write_bytes(p, 3 * MiB);

    tg_contain_t c;
    /* auto: no tmpfs probed */
    tg_contain_inst_t *ci = ws_create(&c, "agent", ws, 1 * MiB, TG_WORKSPACE_AUTO);
    char buf[2048];
    cr_assert_gt(tg_enforced_json(&ci->enforced, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "{\"disk\":{\"requested\":1048576,\"applied\":true,\"backend\":\"scan\","
                          "\"how\":\"per-instance directory, scanned every second, killed "
                          "when over\"},\"fsize\":{\"requested\":1048576,\"applied\":true,"
                          "\"backend\":\"rlimit\",\"how\":\"RLIMIT_FSIZE\"}}");
    /* The workspace was made 0700, the instance's own directory inside it. */
    struct stat st;
    cr_assert_eq(stat(ws, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0700);
    char want[TGH_PATH * 2];
    snprintf(want, sizeof want, "%s/tg-%ld-agent-1", ws, (long)getpid());
    cr_assert_str_eq(ci->ws_dir, want);
    cr_assert_eq(stat(ci->ws_dir, &st), 0);
    cr_expect(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_expect_str_eq(pl.workdir, want);
    cr_expect_str_eq(pl.tmpfs_dir, "");

    /* 2 MiB three levels down, and a symlink to 3 MiB outside. */
    snprintf(p, sizeof p, "%s/a/b/c", ci->ws_dir);
    char mk[TGH_PATH * 2];
    snprintf(mk, sizeof mk, "%s/a", ci->ws_dir);
    cr_assert_eq(mkdir(mk, 0700), 0);
    snprintf(mk, sizeof mk, "%s/a/b", ci->ws_dir);
    cr_assert_eq(mkdir(mk, 0700), 0);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/a/b/c/data", ci->ws_dir);
    write_bytes(p, 2 * MiB);
    snprintf(p, sizeof p, "%s/link", ci->ws_dir);
    cr_assert_eq(symlink(outside, p), 0);

    tg_contain_sample_t s;
    tg_contain_set_pid(ci, 0);
    tg_contain_sample(ci, &s);
    cr_assert(s.have & TG_SAMPLE_DISK);
    /* The data plus four directories' blocks (ext4: 4 KiB each, tmpfs 0),
     * never the 3 MiB behind the symlink. */
    cr_expect_geq(s.disk_bytes, 2 * MiB);
    cr_expect_leq(s.disk_bytes, 2 * MiB + 64 * KiB, "counted %" PRIu64, s.disk_bytes);
    tg_verdict_t v = tg_contain_judge(ci, NULL, &s);
    cr_expect_eq(v.kind, TG_VERDICT_DISK_OVER);
    cr_expect_eq(v.res, TG_RES_DISK);
    cr_expect_eq(v.used, s.disk_bytes);
    cr_expect_eq(v.limit, 1 * MiB);

    /* Under the limit again: no verdict. */
    snprintf(p, sizeof p, "%s/a/b/c/data", ci->ws_dir);
    cr_assert_eq(truncate(p, 100 * KiB), 0);
    tg_contain_sample(ci, &s);
    cr_expect_lt(s.disk_bytes, 1 * MiB, "counted %" PRIu64, s.disk_bytes);
    cr_expect_eq(tg_contain_judge(ci, NULL, &s).kind, TG_VERDICT_OK);

    /* destroy removes the instance's directory, nothing behind the link. */
    cr_assert_eq(tg_contain_destroy(ci), 0);
    cr_expect_not(exists(want), "%s is still there", want);
    cr_expect(exists(ws));
    snprintf(p, sizeof p, "%s/big", outside);
    cr_assert_eq(stat(p, &st), 0, "the symlink's target was removed");
    cr_expect_eq(st.st_size, (off_t)(3 * MiB));
    tg_contain_fini(&c);
}

Test(workspace, scan_resumes_a_big_tree_across_samples)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8], p[TGH_PATH * 2];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    tg_contain_t c;
    tg_contain_inst_t *ci = ws_create(&c, "big", ws, 1024 * MiB, TG_WORKSPACE_SCAN);
    /* 4200 files of one 4 KiB block each: more than one sample's budget. */
    enum { NFILES = 4200 };
    static char block[4096];
    memset(block, 1, sizeof block);
    int dfd = open(ci->ws_dir, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dfd, 0);
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "f%d", i);
        int fd = openat(dfd, p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, block, sizeof block), (ssize_t)sizeof block);
        close(fd);
    }
    syncfs(dfd);
    close(dfd);
    const uint64_t data = (uint64_t)NFILES * sizeof block;
    tg_contain_sample_t s1, s2;
    tg_contain_sample(ci, &s1);
    tg_contain_sample(ci, &s2);
    cr_expect_lt(s1.disk_bytes, data, "the first sample saw everything: %" PRIu64, s1.disk_bytes);
    cr_expect_gt(s1.disk_bytes, 0);
    /* The second completes the walk: the data plus the directory's blocks. */
    cr_expect_geq(s2.disk_bytes, data, "%" PRIu64, s2.disk_bytes);
    cr_expect_leq(s2.disk_bytes, data + 1 * MiB, "%" PRIu64, s2.disk_bytes);
    ws_destroy(&c, ci);
}

Test(workspace, scan_walks_and_removes_a_deep_tree)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    tg_contain_t c;
    tg_contain_inst_t *ci = ws_create(&c, "deep", ws, 1 * MiB, TG_WORKSPACE_SCAN);
    /* 300 levels, deeper than a path string could name in a few of them,
     * built with *at() calls; 2 MiB at the bottom. */
    int fd = open(ci->ws_dir, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(mkdirat(fd, "dddddddddddddddd", 0700), 0);
        int next = openat(fd, "dddddddddddddddd", O_RDONLY | O_DIRECTORY);
        cr_assert_geq(next, 0);
        close(fd);
        fd = next;
    }
    int f = openat(fd, "bottom", O_WRONLY | O_CREAT, 0600);
    static char chunk[64 * 1024];
    for (int i = 0; i < 32; i++)
        cr_assert_eq(write(f, chunk, sizeof chunk), (ssize_t)sizeof chunk);
    fsync(f);
    close(f);
    close(fd);
    tg_contain_sample_t s;
    tg_contain_sample(ci, &s);
    cr_expect_geq(s.disk_bytes, 2 * MiB, "%" PRIu64, s.disk_bytes);
    cr_expect_eq(tg_contain_judge(ci, NULL, &s).kind, TG_VERDICT_DISK_OVER);
    ws_destroy(&c, ci);
}

Test(workspace, scan_sweeps_what_dead_toolgates_left)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8], p[TGH_PATH * 3];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    cr_assert_eq(mkdir(ws, 0700), 0);
    pid_t dead = tgh_dead_pid();
    char orphan[TGH_PATH * 2], live[TGH_PATH * 2], other[TGH_PATH * 2];
    snprintf(orphan, sizeof orphan, "%s/tg-%ld-a-3", ws, (long)dead);
    snprintf(live, sizeof live, "%s/tg-1-a-1", ws); /* pid 1 is alive */
    snprintf(other, sizeof other, "%s/notes", ws);
    cr_assert_eq(mkdir(orphan, 0700), 0);
    snprintf(p, sizeof p, "%s/sub", orphan);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/sub/file", orphan);
    write_bytes(p, 10 * KiB);
    cr_assert_eq(mkdir(live, 0700), 0);
    write_bytes(other, 1 * KiB);

    tg_contain_t c;
    tg_contain_inst_t *ci = ws_create(&c, "a", ws, 1 * MiB, TG_WORKSPACE_SCAN);
    cr_expect_not(exists(orphan), "the dead toolgate's directory is still there");
    cr_expect(exists(live), "a live toolgate's directory was removed");
    cr_expect(exists(other), "a file that is not toolgate's was removed");
    cr_assert_eq(count_entries(ws), 3); /* notes, the live one, ours */
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

/* ---- refusals ---------------------------------------------------------- */

Test(workspace, required_refuses_a_disk_limit_it_cannot_hold)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8], nested[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(nested, sizeof nested, "%s/no/ws", dir);
    tg_contain_t c;
    tg_err_t err = {{0}};
    tg_contain_inst_t *ci = (tg_contain_inst_t *)&c;

    /* tmpfs asked for on a host where it was not probed to work. */
    rl_ctx(&c, TG_CONTAIN_REQUIRED, false);
    tg_contain_req_t q = ws_req(ws, 1 * MiB, TG_WORKSPACE_TMPFS);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), -EPERM);
    cr_assert_null(ci);
    cr_expect_str_eq(err.msg, "containment required: agent 'a': disk 1Mi is not enforced on this "
                              "host: tmpfs workspaces are refused here (not probed); each file is "
                              "capped at 1Mi by RLIMIT_FSIZE");
    /* A workspace whose parent does not exist. */
    q = ws_req(nested, 1 * MiB, TG_WORKSPACE_SCAN);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), -EPERM);
    char want[TG_ERR_MAX + TGH_PATH];
    snprintf(want, sizeof want,
             "disk 1Mi is not enforced on this host: workspace %s: mkdir: No "
             "such file or directory (its parent must exist)",
             nested);
    cr_expect(strstr(err.msg, want) != NULL, "%s", err.msg);
    /* No workspace at all: a disk limit is a per-file cap only. */
    q = ws_req(NULL, 1 * MiB, TG_WORKSPACE_AUTO);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), -EPERM);
    cr_expect_str_eq(err.msg, "containment required: agent 'a': disk 1Mi is not enforced on this "
                              "host: no workspace quota; each file is capped at 1Mi by "
                              "RLIMIT_FSIZE");
    /* The same workspace scanned is enforced, so required lets it start. */
    q = ws_req(ws, 1 * MiB, TG_WORKSPACE_SCAN);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    cr_expect(tg_enforced_complete(&ci->enforced, NULL));
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
    cr_expect_eq(count_entries(ws), 0, "instance directories left behind");
}

Test(workspace, scan_keeps_the_workspace_itself_out_of_the_agent_users_reach)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (an agent user other than toolgate's)");
    char dir[TGH_PATH], ws[TGH_PATH + 8], fresh[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(fresh, sizeof fresh, "%s/fresh", dir);
    tg_contain_t c;
    rl_ctx(&c, TG_CONTAIN_BEST_EFFORT, false);
    tg_contain_req_t q = ws_req(ws, 1 * MiB, TG_WORKSPACE_SCAN);
    q.set_user = true;
    q.uid = 65534;
    q.gid = 65534;
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    char want[TG_REASON_MAX + TGH_PATH];

    /* The agent's own: it could write beside its directory, unscanned. */
    cr_assert_eq(mkdir(ws, 0700), 0);
    cr_assert_eq(chown(ws, 65534, 65534), 0);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    cr_expect_not(ci->enforced.r[TG_RES_DISK].applied);
    snprintf(want, sizeof want,
             "workspace %s is writable by the agent's user: a scan would miss "
             "what it writes beside its own directory",
             ws);
    cr_expect(strncmp(ci->enforced.r[TG_RES_DISK].reason, want, strlen(want)) == 0, "%s",
              ci->enforced.r[TG_RES_DISK].reason);
    tg_contain_destroy(ci);
    /* Root's and closed: the agent could not reach its directory. */
    cr_assert_eq(chown(ws, 0, 0), 0);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    snprintf(want, sizeof want, "workspace %s is not searchable by the agent's uid 65534", ws);
    cr_expect(strncmp(ci->enforced.r[TG_RES_DISK].reason, want, strlen(want)) == 0, "%s",
              ci->enforced.r[TG_RES_DISK].reason);
    tg_contain_destroy(ci);
    /* Root's and searchable: the instance directory is the agent's. */
    cr_assert_eq(chmod(ws, 0711), 0);
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    cr_expect(ci->enforced.r[TG_RES_DISK].applied, "%s", ci->enforced.r[TG_RES_DISK].reason);
    struct stat st;
    cr_assert_eq(stat(ci->ws_dir, &st), 0);
    cr_expect_eq(st.st_uid, 65534);
    cr_expect_eq(st.st_gid, 65534);
    cr_expect_eq(st.st_mode & 07777, 0700);
    tg_contain_destroy(ci);
    /* One toolgate makes stays root's, 0711; nothing existing is chowned. */
    q.workspace = fresh;
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    cr_expect(ci->enforced.r[TG_RES_DISK].applied, "%s", ci->enforced.r[TG_RES_DISK].reason);
    cr_assert_eq(stat(fresh, &st), 0);
    cr_expect_eq(st.st_uid, 0);
    cr_expect_eq(st.st_mode & 07777, 0711);
    cr_assert_eq(stat(ci->ws_dir, &st), 0);
    cr_expect_eq(st.st_uid, 65534);
    tg_contain_destroy(ci);
    cr_assert_eq(stat(ws, &st), 0);
    cr_expect_eq(st.st_uid, 0);
    cr_expect_eq(st.st_mode & 07777, 0711);
    tg_contain_fini(&c);
}

/* ---- tmpfs through the exec shim --------------------------------------- */

static void need_tmpfs(const tg_contain_t *c)
{
    if (!c->caps.tmpfs)
        cr_skip_test("no private mount namespace with tmpfs here: %s", c->caps.tmpfs_why);
}

Test(workspace, tmpfs_holds_the_size_and_hides_the_files)
{
    char dir[TGH_PATH], ws[TGH_PATH + 8], out[TGH_PATH * 2];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    tg_contain_t c;
    rl_ctx(&c, TG_CONTAIN_BEST_EFFORT, true);
    need_tmpfs(&c);
    tg_contain_req_t q = ws_req(ws, 1 * MiB, TG_WORKSPACE_AUTO);
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "t", &q, &ci, &err), 0, "%s", err.msg);
    char buf[4096];
    cr_assert_gt(tg_enforced_json(&ci->enforced, buf, sizeof buf), 0);
    cr_assert_str_eq(buf,
                     "{\"disk\":{\"requested\":1048576,\"applied\":true,\"backend\":\"tmpfs\","
                     "\"how\":\"tmpfs per instance in a private mount namespace\"},"
                     "\"fsize\":{\"requested\":1048576,\"applied\":true,\"backend\":\"rlimit\","
                     "\"how\":\"RLIMIT_FSIZE\"}}");
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    cr_expect_str_eq(pl.tmpfs_dir, ws);
    cr_expect_eq(pl.tmpfs_bytes, 1 * MiB);
    cr_expect_eq(pl.tmpfs_inodes, 1024);
    cr_expect_str_eq(pl.workdir, ws);
    char **sv = NULL;
    char *cmd[] = {(char *)"x", NULL};
    cr_assert_eq(tg_shim_argv_build("/proc/self/exe", &pl, NULL, cmd, &sv), 0);
    char got[2048] = "";
    for (char **a = sv + 2; *a; a++) {
        strncat(got, *a, sizeof got - strlen(got) - 1);
        strncat(got, " ", sizeof got - strlen(got) - 1);
    }
    snprintf(buf, sizeof buf,
             "--setsid --tmpfs %s --tmpfs-size 1048576 --tmpfs-inodes 1024 --rlimit fsize=1048576 "
             "--no-new-privs --pdeathsig %ld --supervise --chdir %s -- x ",
             ws, (long)getpid(), ws);
    cr_expect_str_eq(got, buf);
    tg_shim_argv_free(sv);

    /* In the agent's namespace: a 1 MiB tmpfs as its cwd; 2 MiB in 256 KiB
     * files stop at ENOSPC after exactly 1 MiB (each file is well under
     * RLIMIT_FSIZE: the total is what binds). */
    char *status[] = {(char *)HOG, (char *)"status", NULL};
    shim_run_t r;
    shim_run(&pl, status, false, 20000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d: %s", r.status, r.out);
    snprintf(out, sizeof out, "cwd=%s\n", ws);
    cr_expect(strstr(r.out, out) != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "cwd_tmpfs=1\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "cwd_fs_bytes=1048576\n") != NULL, "%s", r.out);
    char *fill[] = {(char *)HOG,       (char *)"fill",   (char *)".",
                    (char *)"2097152", (char *)"262144", NULL};
    shim_run(&pl, fill, false, 20000, &r);
    cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 5, "status %d", r.status);
    cr_expect_str_eq(r.out, "ENOSPC at 1048576\n");
    /* The host's directory never saw the files; the tmpfs is gone. */
    cr_expect_eq(count_entries(ws), 0);
    cr_assert_eq(tg_contain_destroy(ci), 0);
    tg_contain_fini(&c);
}

/* As a dedicated user: the tmpfs is the agent's to fill; a scanned
 * workspace lets it write in its own directory only. */
Test(workspace, a_dropped_user_writes_its_workspace_and_nothing_beside_it)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (a uid drop)");
    /* The build tree may sit below a directory the dropped user cannot
     * enter: everything runs from one it can traverse. */
    char dir[TGH_PATH], hog[TGH_PATH + 16], ws[TGH_PATH + 8], cmd[3 * TGH_PATH],
        out[TG_WS_DIR_MAX + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    cr_assert_eq(chmod(dir, 0711), 0);
    snprintf(hog, sizeof hog, "%s/tg_hog", dir);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 0755 '%s'", HOG, hog, hog);
    cr_assert_eq(system(cmd), 0);
    tg_contain_t c;
    rl_ctx(&c, TG_CONTAIN_BEST_EFFORT, true);
    tg_contain_req_t q = ws_req(ws, 1 * MiB, TG_WORKSPACE_TMPFS);
    q.set_user = true;
    q.uid = q.gid = 65534;
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    shim_run_t r;
    if (c.caps.tmpfs) {
        cr_assert_eq(tg_contain_create(&c, "u", &q, &ci, &err), 0, "%s", err.msg);
        cr_assert(ci->enforced.r[TG_RES_DISK].applied, "%s", ci->enforced.r[TG_RES_DISK].reason);
        tg_contain_place_t pl;
        tg_contain_place(ci, &pl);
        char *fill[] = {hog, (char *)"fill", (char *)".", (char *)"2097152", (char *)"262144",
                        NULL};
        shim_run(&pl, fill, false, 20000, &r);
        cr_expect_str_eq(r.out, "ENOSPC at 1048576\n");
        tg_contain_destroy(ci);
    } else {
        cr_log_warn("tmpfs part skipped: %s", c.caps.tmpfs_why);
    }
    q.workspace_backend = TG_WORKSPACE_SCAN;
    cr_assert_eq(tg_contain_create(&c, "u", &q, &ci, &err), 0, "%s", err.msg);
    cr_assert(ci->enforced.r[TG_RES_DISK].applied, "%s", ci->enforced.r[TG_RES_DISK].reason);
    tg_contain_place_t pl;
    tg_contain_place(ci, &pl);
    char *mine[] = {hog, (char *)"fill", (char *)".", (char *)"131072", (char *)"65536", NULL};
    shim_run(&pl, mine, false, 20000, &r);
    cr_expect_str_eq(r.out, "wrote 131072\n");
    char *beside[] = {hog, (char *)"fill", (char *)"..", (char *)"4096", (char *)"4096", NULL};
    shim_run(&pl, beside, false, 20000, &r);
    cr_expect_str_eq(r.out, "EACCES at 0\n");
    snprintf(out, sizeof out, "%s/fill-0", ci->ws_dir);
    struct stat st;
    cr_expect_eq(stat(out, &st), 0);
    cr_expect_eq(st.st_uid, 65534);
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
    cr_expect_eq(count_entries(ws), 0);
}

/* `toolgate check` predicts what tg_contain_create will report. */
Test(workspace, check_predicts_the_disk_row)
{
    tg_contain_caps_t caps;
    memset(&caps, 0, sizeof caps);
    tg_contain_req_t q = ws_req("/srv/ws", 1 * MiB, TG_WORKSPACE_AUTO);
    tg_enforced_t e;
    tg_check_plan(&caps, TG_CONTAIN_RLIMIT, TG_CONTAIN_BEST_EFFORT, &q, &e);
    cr_expect(e.r[TG_RES_DISK].applied);
    cr_expect_str_eq(e.r[TG_RES_DISK].backend, "scan");
    cr_expect_eq(e.r[TG_RES_DISK].applied_value, 1 * MiB);
    caps.tmpfs = true;
    tg_check_plan(&caps, TG_CONTAIN_RLIMIT, TG_CONTAIN_BEST_EFFORT, &q, &e);
    cr_expect_str_eq(e.r[TG_RES_DISK].backend, "tmpfs");
    cr_expect_str_eq(e.r[TG_RES_DISK].how, "tmpfs per instance in a private mount namespace");
    caps.tmpfs = false;
    snprintf(caps.tmpfs_why, sizeof caps.tmpfs_why,
             "unshare(CLONE_NEWNS) refused: Operation not "
             "permitted");
    q.workspace_backend = TG_WORKSPACE_TMPFS;
    tg_check_plan(&caps, TG_CONTAIN_RLIMIT, TG_CONTAIN_REQUIRED, &q, &e);
    cr_expect_not(e.r[TG_RES_DISK].applied);
    cr_expect_str_eq(e.r[TG_RES_DISK].backend, "tmpfs");
    cr_expect_str_eq(e.r[TG_RES_DISK].reason,
                     "tmpfs workspaces are refused here (unshare(CLONE_NEWNS) refused: Operation "
                     "not permitted); each file is capped at 1Mi by RLIMIT_FSIZE");
    /* The same on the real thing, where the probe is skipped. */
    tg_contain_t c;
    rl_ctx(&c, TG_CONTAIN_BEST_EFFORT, false);
    q.workspace = "/nonexistent-parent/ws";
    tg_contain_inst_t *ci = NULL;
    tg_err_t err = {{0}};
    cr_assert_eq(tg_contain_create(&c, "a", &q, &ci, &err), 0, "%s", err.msg);
    cr_expect_str_eq(
        ci->enforced.r[TG_RES_DISK].reason,
        "tmpfs workspaces are refused here (not probed); each file is capped at 1Mi by "
        "RLIMIT_FSIZE");
    tg_contain_destroy(ci);
    tg_contain_fini(&c);
}

/* ---- the real binary ----------------------------------------------------- */

/* `toolgate serve` with two agents behind two sockets: "ws" with a
 * workspace and the 1 MiB disk (the fixture agent started through
 * `tg_hog bgfill`, which fills its cwd after <delay_ms>), and "other", a
 * plain fixture agent. */
static tgh_serve_t S;                  /* S.sock is the "ws" agent's listener */
static char S_sock_other[TGH_PATH + 16]; /* the "other" agent's listener */
static char S_ws[TGH_PATH + 8];          /* the workspace */
static char S_report[TGH_PATH + 16];     /* the fill's result line */

static void serve2_start(const char *backend, unsigned delay_ms)
{
    cr_assert_eq(tgh_serve_prepare(&S, "ws"), 0);
    snprintf(S_ws, sizeof S_ws, "%s/ws", S.dir);
    snprintf(S_report, sizeof S_report, "%s/fill.txt", S.dir);
    snprintf(S_sock_other, sizeof S_sock_other, "%s/o.sock", S.dir);
    char json[8192];
    int n = snprintf(
        json, sizeof json,
        "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"ws\"},"
        " {\"unix\": \"%s\", \"agent\": \"other\"}]},\n"
        " \"audit\": {\"path\": \"%s\"},\n"
        " \"containment\": {\"workspace_backend\": \"%s\"},\n"
        " \"agents\": [{\"id\": \"ws\", \"workspace\": \"%s\","
        " \"resources\": {\"disk\": {\"limit\": \"1Mi\"}},"
        " \"restart\": {\"policy\": \"no\"},"
        " \"command\": [\"%s\", \"bgfill\", \"%u\", \".\", \"2097152\", \"262144\", \"%s\", \"--\","
        " \"%s\", \"--log\", \"%s/ws.log\"]},\n"
        "  {\"id\": \"other\", \"command\": [\"%s\", \"--log\", \"%s/other.log\"]}]}\n",
        S.sock, S_sock_other, S.audit, backend, S_ws, HOG, delay_ms, S_report, FIXTURE, S.dir,
        FIXTURE, S.dir);
    cr_assert_lt((size_t)n, sizeof json);
    tgh_serve_start(&S, json, NULL, 5000);
}

/* An echo through <c> answers with <text>. */
static void s_echo_ok(tgh_proc_t *c, json_int_t id, const char *text)
{
    char args[128];
    snprintf(args, sizeof args, "{\"text\":\"%s\"}", text);
    mcp_call_text(c, id, "echo", args, text, 10000);
}

/* The audit events named <name>, in order, as a new array. */
static json_t *audit_events(const char *name)
{
    char *text = tgh_read_file(S.audit, NULL);
    json_t *out = json_array();
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        if (ev && strcmp(json_string_value(json_object_get(ev, "event")), name) == 0)
            json_array_append(out, ev);
        json_decref(ev);
        line = nl + 1;
    }
    free(text);
    return out;
}

static json_t *wait_event(const char *name, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        json_t *evs = audit_events(name);
        if (json_array_size(evs) > 0 || tgh_left(deadline) == 0)
            return evs;
        json_decref(evs);
        tgh_sleep_ms(100);
    }
}

/* The fill's result line, waiting for it. */
static char *wait_report(int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *t = tgh_read_file(S_report, NULL);
        if ((t && strchr(t, '\n')) || tgh_left(deadline) == 0)
            return t;
        free(t);
        tgh_sleep_ms(50);
    }
}

static void s_stop(void)
{
    tgh_serve_stop(&S, 15000);
}

Test(workspace, it_tmpfs_quota_holds_while_toolgate_and_a_second_agent_answer, .timeout = 90)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (mount namespaces)");
    tg_contain_caps_t caps;
    tg_contain_opts_t o = {.skip_netns_probe = true};
    tg_contain_detect(&caps, &o);
    if (!caps.tmpfs)
        cr_skip_test("no private mount namespace with tmpfs here: %s", caps.tmpfs_why);
    serve2_start("tmpfs", 0);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 10000);
    char *rep = wait_report(10000);
    cr_assert_not_null(rep, "the agent never reported its fill");
    cr_expect_str_eq(rep, "ENOSPC at 1048576\n");
    free(rep);
    /* The files are in the agent's tmpfs only. */
    cr_expect_eq(count_entries(S_ws), 0, "the workspace's files reached the host");
    /* The agent that filled its disk, a second agent and toolgate answer. */
    s_echo_ok(&a, 1, "still-here");
    mcp_connect(&b, S_sock_other);
    mcp_init_ok(&b, 10000);
    s_echo_ok(&b, 1, "other-fine");
    /* The monitor sees the tmpfs full: limit.warning names the workspace. */
    json_t *warn = wait_event("limit.warning", 8000);
    json_t *w = NULL;
    size_t i;
    json_t *ev;
    json_array_foreach(warn, i, ev)
    {
        if (strcmp(json_string_value(json_object_get(json_object_get(ev, "limit"), "name")),
                   "agent.ws.disk_bytes") == 0)
            w = ev;
    }
    cr_assert_not_null(w, "no limit.warning for agent.ws.disk_bytes");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(w, "limit"), "observed")),
                 1048576);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(w, "limit"), "cap")), 1048576);
    json_decref(warn);
    s_echo_ok(&a, 2, "after-warning");
    json_t *started = audit_events("agent.started");
    json_t *disk = NULL;
    json_array_foreach(started, i, ev)
    {
        if (strcmp(json_string_value(json_object_get(ev, "agent")), "ws") == 0)
            disk = json_object_get(json_object_get(ev, "enforced"), "disk");
    }
    cr_assert_not_null(disk, "agent.started of ws has no enforced.disk");
    cr_expect_eq(json_integer_value(json_object_get(disk, "requested")), 1048576);
    cr_expect(json_is_true(json_object_get(disk, "applied")));
    cr_expect_str_eq(json_string_value(json_object_get(disk, "backend")), "tmpfs");
    json_decref(started);
    json_t *killed = audit_events("agent.killed");
    cr_expect_eq(json_array_size(killed), 0, "an agent was killed: the kernel holds a tmpfs");
    json_decref(killed);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    s_stop();
}

Test(workspace, it_scan_kills_past_the_limit_and_names_disk, .timeout = 90)
{
    serve2_start("scan", 1500);
    tgh_proc_t a, b;
    mcp_connect(&a, S.sock);
    mcp_init_ok(&a, 10000);
    /* In flight when the fill lands: it must fail naming disk. */
    mcp_call(&a, 1, "sleep", "{\"ms\":30000}");
    json_t *r = mcp_await_int(&a, 1, 15000, NULL);
    cr_assert_not_null(r, "the call outlived the disk overflow");
    char *s = json_dumps(r, JSON_COMPACT);
    json_t *e = json_object_get(r, "error");
    cr_assert_eq(json_integer_value(json_object_get(e, "code")), -32065, "%s", s);
    json_t *data = json_object_get(e, "data");
    cr_expect_str_eq(json_string_value(json_object_get(data, "code")), "resource_limit_exceeded");
    cr_expect_str_eq(json_string_value(json_object_get(data, "limit")), "disk");
    cr_expect_geq(json_integer_value(json_object_get(data, "observed")), 2097152, "%s", s);
    cr_expect_eq(json_integer_value(json_object_get(data, "cap")), 1048576, "%s", s);
    cr_expect_str_eq(json_string_value(json_object_get(data, "unit")), "bytes");
    cr_expect_str_eq(json_string_value(json_object_get(data, "config_path")),
                     "agents.ws.resources.disk.limit");
    free(s);
    json_decref(r);
    char *rep = wait_report(5000);
    cr_expect(rep && strcmp(rep, "wrote 2097152\n") == 0, "fill: %s", rep ? rep : "(none)");
    free(rep);
    /* The kill is audited with the resource, and the instance's directory
     * goes with it. */
    json_t *killed = wait_event("agent.killed", 5000);
    cr_assert_eq(json_array_size(killed), 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(killed, 0), "reason")),
                     "disk");
    json_decref(killed);
    uint64_t deadline = tgh_now_ms() + 5000;
    while (count_entries(S_ws) != 0 && tgh_left(deadline) > 0)
        tgh_sleep_ms(50);
    cr_expect_eq(count_entries(S_ws), 0, "the killed instance's directory was left");
    /* Toolgate and the second agent are unaffected. */
    mcp_connect(&b, S_sock_other);
    mcp_init_ok(&b, 10000);
    s_echo_ok(&b, 1, "other-fine");
    json_t *started = audit_events("agent.started");
    json_t *disk = json_object_get(json_object_get(json_array_get(started, 0), "enforced"), "disk");
    cr_expect_str_eq(json_string_value(json_object_get(disk, "backend")), "scan");
    json_decref(started);
    tgh_conn_close(&a);
    tgh_conn_close(&b);
    s_stop();
}

/* containment.mode required and disk=1Mi: refused without a workspace,
 * started with one, and `toolgate check` said which beforehand. */
Test(workspace, it_required_needs_a_workspace_and_check_shows_the_row, .timeout = 60)
{
    /* Registered with the harness: they must outlive the test body. */
    static tgh_wrap_t w, w2;
    static tgh_proc_t ck;
    cr_assert_eq(tgh_wrap_prepare(&w), 0);
    char ws[TGH_PATH + 8], lim_ws[TGH_PATH + 32], out_path[TGH_PATH + 16];
    snprintf(ws, sizeof ws, "%s/ws", w.dir);
    snprintf(lim_ws, sizeof lim_ws, "workspace=%s", ws);
    snprintf(out_path, sizeof out_path, "%s/check.txt", w.dir);

    /* check, with the scan forced so the row is the same on every host. */
    char *const check_argv[] = {(char *)TG_BIN,
                                (char *)"check",
                                (char *)"--limit",
                                (char *)"containment=required",
                                (char *)"--limit",
                                (char *)"disk=1Mi",
                                (char *)"--limit",
                                lim_ws,
                                (char *)"--limit",
                                (char *)"workspace_backend=scan",
                                (char *)"--",
                                (char *)FIXTURE,
                                NULL};
    cr_assert_eq(tgh_spawn(&ck, check_argv, NULL, out_path), 0);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        size_t l;
        char *line = tgh_read_line(&ck, 10000, &l);
        if (!line)
            break;
        if (len + l + 2 > cap) {
            cap = (len + l + 2) * 2;
            text = realloc(text, cap);
        }
        memcpy(text + len, line, l);
        text[len + l] = '\n';
        len += l + 1;
        text[len] = '\0';
        free(line);
    }
    cr_assert_eq(tgh_wait(&ck, 10000), 0);
    cr_assert_eq(tgh_exit_code(&ck), 0);
    cr_assert_not_null(text);
    char want[TGH_PATH + 128];
    snprintf(want, sizeof want,
             "  workspace %s: its size is the disk limit (containment.workspace_backend scan)\n",
             ws);
    cr_expect(strstr(text, want) != NULL, "%s", text);
    cr_expect(strstr(text, "    disk     1Mi        yes     scan     per-instance directory, "
                           "scanned every second, killed when over\n") != NULL,
              "%s", text);
    cr_expect(strstr(text, "  tmpfs    ") != NULL, "no tmpfs line in the host summary:\n%s", text);
    bool would_start = strstr(text, "this agent would not start") == NULL;
    free(text);
    cr_expect_not(exists(ws), "check created the workspace");

    /* Without the workspace: refused, and the log says why. */
    const char *const no_ws[] = {"--limit", "containment=required", "--limit", "disk=1Mi", NULL};
    const char *const agent_args[] = {"--log", w.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&w, no_ws, FIXTURE, agent_args, NULL), 0);
    tgh_sendf(&w.tg, MCP_INITIALIZE);
    tgh_close_stdin(&w.tg);
    cr_assert_eq(tgh_wait(&w.tg, 15000), 0, "wrap did not exit");
    cr_expect_neq(tgh_exit_code(&w.tg), 0);
    char *err = tgh_read_file(w.err, NULL);
    cr_assert_not_null(err);
    cr_expect(strstr(err, "disk 1Mi is not enforced on this host: no workspace quota; each file "
                          "is capped at 1Mi by RLIMIT_FSIZE") != NULL,
              "%s", err);
    free(err);
    cr_expect_eq(tgh_log_count(w.log, "start"), 0, "the agent was started anyway");
    if (!would_start)
        cr_skip_test("this host cannot enforce the other resources in required mode");

    /* With it: the agent starts and answers. */
    cr_assert_eq(tgh_wrap_prepare(&w2), 0);
    const char *const with_ws[] = {
        "--limit", "containment=required",   "--limit", "disk=1Mi", "--limit", lim_ws,
        "--limit", "workspace_backend=scan", NULL};
    const char *const agent_args2[] = {"--log", w2.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&w2, with_ws, FIXTURE, agent_args2, NULL), 0);
    json_t *r = mcp_initialize(&w2.tg, 10000);
    cr_assert(r && json_object_get(r, "result"), "the agent did not start with a workspace");
    json_decref(r);
    tgh_close_stdin(&w2.tg);
    cr_assert_eq(tgh_wait(&w2.tg, 15000), 0);
    cr_expect_eq(tgh_exit_code(&w2.tg), 0);
}
