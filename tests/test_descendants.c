/* Every descendant of an agent dies with toolgate (issue 12, item 10):
 * a `toolgate wrap` whose agent (a shell script) forks a child and a
 * grandchild that calls setsid, each writing its pid to a file, is
 * killed with SIGKILL; on every backend the agent, the child and the
 * setsid grandchild are all gone within 2 s. On a cgroup backend the
 * agent dies by the shim's death signal and the rest by the cgroup
 * watchdog (limits/contain_watch.c), which also removes the instance
 * cgroups. On the rlimit backend (toolgate in a mount namespace without
 * cgroupfs) and with containment off, the shim's supervisor
 * (router/agent/shim.h, --supervise) kills the tree. There, too: the
 * agent's exit code and death by a signal reach agent.exited exactly,
 * the tree goes when the agent ends, and a normal stop leaves nothing.
 *
 * Teardown kills any survivor still running the fixture's command.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "tg_harness.h"
#include "tests/tg_shim.h"

#define MAX_PIDS 8
static pid_t g_pids[MAX_PIDS];
static int g_npids;

static void it_fini(void)
{
    for (int i = 0; i < g_npids; i++) {
        if (tgh_pid_alive(g_pids[i]) && tgh_pid_is(g_pids[i], "3017"))
            kill(g_pids[i], SIGKILL);
    }
    g_npids = 0;
    tgh_cleanup();
}

TestSuite(descendants, .fini = it_fini, .timeout = 30);

/* "agent PID", "child PID", "grand PID" lines of <path>, once all three are
 * there (within 5 s). */
static void read_pids(const char *path)
{
    uint64_t deadline = tgh_now_ms() + 5000;
    for (;;) {
        g_npids = 0;
        char *text = tgh_read_file(path, NULL);
        for (char *l = text; l && *l && g_npids < MAX_PIDS;) {
            char *sp = strchr(l, ' ');
            if (sp)
                g_pids[g_npids++] = (pid_t)atol(sp + 1);
            char *nl = strchr(l, '\n');
            l = nl ? nl + 1 : NULL;
        }
        free(text);
        if (g_npids >= 3 || tgh_now_ms() >= deadline)
            break;
        tgh_sleep_ms(20);
    }
    cr_assert_geq(g_npids, 3, "the agent did not start its child and grandchild");
}

/* How toolgate contains the agent: its host's best backend, the rlimit
 * backend (toolgate in a mount namespace of its own with cgroupfs
 * unmounted: no cgroup to write), or containment off. */
typedef enum { BK_HOST, BK_RLIMIT, BK_NONE } bk_t;

/* How the forking agent ends once its three pids are written. */
#define END_SLEEP "exec sleep 3017\n"
#define END_EXIT3 "exit 3\n"
#define END_USR1  "kill -USR1 $$\n"
#define END_DEAF  "trap '' TERM\nexec sleep 3017\n" /* SIGTERM ignored, through exec */

/* Start wrap on the forking agent (ending as <end>) under backend <bk>;
 * returns the pid file and toolgate's audit path. */
static void start(tgh_proc_t *p, const char *dir, bk_t bk, const char *end, char *pidfile,
                  size_t cap, char *audit, size_t acap)
{
    char script[TGH_PATH + 16], err[TGH_PATH + 16], body[1024];
    snprintf(script, sizeof script, "%s/forky", dir);
    snprintf(body, sizeof body,
             "#!/bin/sh\n"
             "echo \"agent $$\" >> \"$1\"\n"
             "sh -c 'echo \"child $$\" >> \"$1\"; exec sleep 3017' sh \"$1\" &\n"
             "setsid sh -c 'echo \"grand $$\" >> \"$1\"; exec sleep 3017' sh \"$1\" &\n"
             "while [ \"$(wc -l < \"$1\")\" -lt 3 ]; do sleep 0.02; done\n"
             "%s",
             end);
    cr_assert_eq(tgh_write_file(script, body), 0);
    chmod(script, 0755);
    snprintf(pidfile, cap, "%s/pids", dir);
    snprintf(audit, acap, "%s/audit.jsonl", dir);
    snprintf(err, sizeof err, "%s/wrap.stderr", dir);
    if (bk == BK_RLIMIT && (access("/usr/bin/unshare", X_OK) != 0 ||
                            system("/usr/bin/unshare -m sh -c 'umount -R /sys/fs/cgroup "
                                   "2>/dev/null; ! grep -q cgroup /proc/self/mountinfo'") != 0))
        cr_skip("no mount namespace without cgroupfs here (unshare -m, umount): the rlimit "
                "backend cannot be forced");
    char *argv[24];
    int n = 0;
    if (bk == BK_RLIMIT) {
        /* unshare and sh exec: toolgate keeps the pid the test knows. */
        argv[n++] = (char *)"/usr/bin/unshare";
        argv[n++] = (char *)"-m";
        argv[n++] = (char *)"sh";
        argv[n++] = (char *)"-c";
        argv[n++] = (char *)"umount -R /sys/fs/cgroup 2>/dev/null; exec \"$@\"";
        argv[n++] = (char *)"sh";
    }
    argv[n++] = (char *)TG_BIN;
    argv[n++] = (char *)"wrap";
    argv[n++] = (char *)"--audit";
    argv[n++] = audit;
    if (bk == BK_NONE) {
        argv[n++] = (char *)"--limit";
        argv[n++] = (char *)"containment=off";
    }
    /* The stop's SIGKILL step comes soon after an ignored SIGTERM. */
    argv[n++] = (char *)"--limit";
    argv[n++] = (char *)"kill_grace_period=300ms";
    argv[n++] = (char *)"--";
    argv[n++] = script;
    argv[n++] = pidfile;
    argv[n] = NULL;
    cr_assert_eq(tgh_spawn(p, argv, NULL, err), 0);
}

/* The backend named in agent.started's enforced report, "" when none. */
static void started_backend(const char *audit, char *out, size_t cap)
{
    out[0] = '\0';
    uint64_t deadline = tgh_now_ms() + 3000;
    while (tgh_now_ms() < deadline) {
        char *text = tgh_read_file(audit, NULL);
        const char *ev = text ? strstr(text, "agent.started") : NULL;
        const char *b = ev ? strstr(ev, "\"backend\":\"") : NULL;
        if (b) {
            b += strlen("\"backend\":\"");
            size_t n = strcspn(b, "\"");
            snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
            free(text);
            return;
        }
        free(text);
        tgh_sleep_ms(20);
    }
}

static const char *const who[] = {"agent", "child", "setsid grandchild"};

/* Each pid read is gone within 2 s from now. */
static void all_gone(const char *after)
{
    uint64_t t0 = tgh_now_ms();
    for (int i = 0; i < g_npids; i++) {
        int left = 2000 - (int)(tgh_now_ms() - t0);
        cr_assert(tgh_pid_wait_gone(g_pids[i], left > 0 ? left : 0),
                  "pid %ld (%s) outlived %s by 2 s", (long)g_pids[i], who[i < 3 ? i : 2], after);
    }
}

Test(descendants, sigkill_of_toolgate_takes_the_whole_tree_with_cgroups)
{
    char dir[TGH_PATH], pidfile[TGH_PATH + 16], audit[TGH_PATH + 16], backend[32];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    static tgh_proc_t p;
    start(&p, dir, BK_HOST, END_SLEEP, pidfile, sizeof pidfile, audit, sizeof audit);
    read_pids(pidfile);
    started_backend(audit, backend, sizeof backend);
    if (strncmp(backend, "cgroup", 6) != 0)
        cr_skip("no cgroup backend on this host (%s): see README, Containment",
                backend[0] ? backend : "unknown");
    char base[64];
    snprintf(base, sizeof base, "toolgate-%ld", (long)p.pid);

    kill(p.pid, SIGKILL);
    tgh_wait(&p, 2000);
    all_gone("a SIGKILLed toolgate");
    /* The watchdog removes what toolgate made: no toolgate-<pid> left in
     * any hierarchy it could write to. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 40); do find /sys/fs/cgroup -maxdepth 6 -type d -name '%s' "
             "2>/dev/null | grep -q . || exit 0; sleep 0.05; done; exit 1",
             base);
    cr_assert_eq(system(cmd), 0, "cgroup %s outlived toolgate", base);
}

/* Start the forking agent under <bk> (which agent.started must name as
 * <backend>), ending as <end>; its pids are read. */
static void start_on(tgh_proc_t *p, bk_t bk, const char *backend, const char *end, char *audit,
                     size_t acap)
{
    char dir[TGH_PATH], pidfile[TGH_PATH + 16], got[32];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    start(p, dir, bk, end, pidfile, sizeof pidfile, audit, acap);
    read_pids(pidfile);
    started_backend(audit, got, sizeof got);
    cr_assert_str_eq(got, backend, "agent.started names backend %s", got);
}

static void sigkill_takes_the_tree(bk_t bk, const char *backend)
{
    static tgh_proc_t p;
    char audit[TGH_PATH + 16];
    start_on(&p, bk, backend, END_SLEEP, audit, sizeof audit);
    kill(p.pid, SIGKILL);
    tgh_wait(&p, 2000);
    all_gone("a SIGKILLed toolgate");
}

Test(descendants, sigkill_of_toolgate_takes_the_whole_tree_on_rlimit)
{
    sigkill_takes_the_tree(BK_RLIMIT, "rlimit");
}

Test(descendants, sigkill_of_toolgate_takes_the_whole_tree_with_containment_off)
{
    sigkill_takes_the_tree(BK_NONE, "none");
}

/* The first agent.exited of <audit> (within 5 s) says <what> (its "code"
 * or "signal" member, not the other) and <reason>. */
static void exited_says(const char *audit, const char *what, const char *reason)
{
    cr_assert_eq(tgh_file_wait(audit, "\"event\":\"agent.exited\"", 1, 5000), 1,
                 "no agent.exited in %s", audit);
    char *text = tgh_read_file(audit, NULL);
    char *ev = strstr(text, "\"event\":\"agent.exited\"");
    char *eol = strchr(ev, '\n');
    if (eol)
        *eol = '\0';
    const char *ex = strstr(ev, "\"exit\":{");
    const char *other = strncmp(what, "\"signal\"", 8) == 0 ? "\"code\"" : "\"signal\"";
    cr_assert(ex && strstr(ex, what) && strstr(ex, reason) && strstr(ex, other) == NULL,
              "agent.exited does not say %s and %s alone: %s", what, reason, ev);
    free(text);
}

/* The agent ends by itself as <end>: agent.exited says <what> and
 * <reason> exactly, and its child and setsid grandchild go with it. */
static void agent_end_is_relayed(bk_t bk, const char *backend, const char *end, const char *what,
                                 const char *reason)
{
    static tgh_proc_t p;
    char audit[TGH_PATH + 16];
    start_on(&p, bk, backend, end, audit, sizeof audit);
    exited_says(audit, what, reason);
    all_gone("their agent");
}

Test(descendants, exit_code_is_relayed_and_the_tree_goes_on_rlimit)
{
    agent_end_is_relayed(BK_RLIMIT, "rlimit", END_EXIT3, "\"code\":3,", "\"reason\":\"failed\"");
}

Test(descendants, exit_code_is_relayed_and_the_tree_goes_with_containment_off)
{
    agent_end_is_relayed(BK_NONE, "none", END_EXIT3, "\"code\":3,", "\"reason\":\"failed\"");
}

Test(descendants, death_by_signal_is_relayed_on_rlimit)
{
    agent_end_is_relayed(BK_RLIMIT, "rlimit", END_USR1, "\"signal\":10,", "\"reason\":\"crashed\"");
}

Test(descendants, death_by_signal_is_relayed_with_containment_off)
{
    agent_end_is_relayed(BK_NONE, "none", END_USR1, "\"signal\":10,", "\"reason\":\"crashed\"");
}

/* SIGTERM to toolgate: it stops the agent in order (its SIGTERM goes
 * through the supervisor) and exits; nothing of the tree is left. An
 * agent that ignores SIGTERM (<end> END_DEAF) is SIGKILLed after the
 * grace period: the supervisor cannot forward that one, toolgate's kill
 * walks the tree while the supervisor still holds it. */
static void normal_stop_leaves_nothing(bk_t bk, const char *backend, const char *end)
{
    static tgh_proc_t p;
    char audit[TGH_PATH + 16];
    start_on(&p, bk, backend, end, audit, sizeof audit);
    kill(p.pid, SIGTERM);
    cr_assert_eq(tgh_wait(&p, 10000), 0, "toolgate did not stop on SIGTERM");
    all_gone("a stopped toolgate");
    cr_assert_eq(tgh_file_count(audit, "\"event\":\"agent.exited\""), 1);
    if (strcmp(end, END_DEAF) == 0)
        exited_says(audit, "\"signal\":9,", "\"reason\":\"stopped\"");
}

Test(descendants, normal_stop_leaves_no_descendant_on_rlimit)
{
    normal_stop_leaves_nothing(BK_RLIMIT, "rlimit", END_SLEEP);
}

Test(descendants, normal_stop_leaves_no_descendant_with_containment_off)
{
    normal_stop_leaves_nothing(BK_NONE, "none", END_SLEEP);
}

Test(descendants, stop_of_an_agent_deaf_to_sigterm_leaves_no_descendant_on_rlimit)
{
    normal_stop_leaves_nothing(BK_RLIMIT, "rlimit", END_DEAF);
}

Test(descendants, stop_of_an_agent_deaf_to_sigterm_leaves_no_descendant_with_containment_off)
{
    normal_stop_leaves_nothing(BK_NONE, "none", END_DEAF);
}

/* The supervisor itself, as the shim runs it for a placement without
 * cgroups: exit codes, death by a core-dumping signal (the supervisor
 * dumps no core of its own), and a command that does not exist (127, as
 * without a supervisor: issue 12, item 27). */
Test(descendants, supervisor_relays_what_the_agent_did)
{
    tg_contain_place_t pl = {.setsid = true, .pdeathsig = true};
    cr_assert(tg_shim_supervises(&pl));
    shim_run_t r;
    char *code[] = {(char *)"/bin/sh", (char *)"-c", (char *)"echo out; exit 7", NULL};
    shim_run(&pl, code, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 7, "status %#x: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "out\n");
    char *segv[] = {(char *)"/bin/sh", (char *)"-c", (char *)"kill -SEGV $$", NULL};
    shim_run(&pl, segv, false, 10000, &r);
    cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV && !WCOREDUMP(r.status),
              "status %#x: %s", r.status, r.err);
    char *missing[] = {(char *)"/nonexistent/agent", NULL};
    shim_run(&pl, missing, false, 10000, &r);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == TG_SHIM_EXIT_NOTFOUND, "status %#x",
              r.status);
    cr_assert_str_eq(r.err, "toolgate shim: exec /nonexistent/agent: No such file or directory\n");
    /* With a cgroup to join, the shim execs the agent as before. */
    pl.nprocs = 1;
    cr_assert_not(tg_shim_supervises(&pl));
}
