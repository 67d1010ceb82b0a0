/* Every descendant of an agent dies with toolgate (issue 12, item 10):
 * a `toolgate wrap` whose agent (a shell script) forks a child and a
 * grandchild that calls setsid, each writing its pid to a file, is
 * killed with SIGKILL; on a cgroup backend the agent, the child and the
 * setsid grandchild are all gone within 2 s (the agent by the shim's
 * death signal, the rest by the cgroup watchdog, limits/contain_watch.c)
 * and the instance cgroups are removed. With containment off (no cgroup)
 * the agent itself still dies with toolgate; what survives there is
 * written down in README (Containment).
 *
 * Teardown kills any survivor still running the fixture's command.
 */
#include <criterion/criterion.h>

#include "tg_harness.h"

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

/* Start wrap (with <extra> options, NULL-terminated list of up to 4) on
 * the forking agent; returns toolgate's audit text path in <audit>. */
static void start(tgh_proc_t *p, const char *dir, const char *const *extra, char *pidfile,
                  size_t cap, char *audit, size_t acap)
{
    char script[TGH_PATH + 16], err[TGH_PATH + 16];
    snprintf(script, sizeof script, "%s/forky", dir);
    cr_assert_eq(tgh_write_file(script,
                                "#!/bin/sh\n"
                                "echo \"agent $$\" >> \"$1\"\n"
                                "sh -c 'echo \"child $$\" >> \"$1\"; exec sleep 3017' sh \"$1\" &\n"
                                "setsid sh -c 'echo \"grand $$\" >> \"$1\"; exec sleep 3017' sh "
                                "\"$1\" &\n"
                                "exec sleep 3017\n"),
                 0);
    chmod(script, 0755);
    snprintf(pidfile, cap, "%s/pids", dir);
    snprintf(audit, acap, "%s/audit.jsonl", dir);
    snprintf(err, sizeof err, "%s/wrap.stderr", dir);
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)TG_BIN;
    argv[n++] = (char *)"wrap";
    argv[n++] = (char *)"--audit";
    argv[n++] = audit;
    for (int i = 0; extra && extra[i] && i < 4; i++)
        argv[n++] = (char *)extra[i];
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

Test(descendants, sigkill_of_toolgate_takes_the_whole_tree_with_cgroups)
{
    char dir[TGH_PATH], pidfile[TGH_PATH + 16], audit[TGH_PATH + 16], backend[32];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    static tgh_proc_t p;
    start(&p, dir, NULL, pidfile, sizeof pidfile, audit, sizeof audit);
    read_pids(pidfile);
    started_backend(audit, backend, sizeof backend);
    if (strncmp(backend, "cgroup", 6) != 0)
        cr_skip("no cgroup backend on this host (%s): see README, Containment",
                backend[0] ? backend : "unknown");
    char base[64];
    snprintf(base, sizeof base, "toolgate-%ld", (long)p.pid);

    kill(p.pid, SIGKILL);
    tgh_wait(&p, 2000);
    uint64_t t0 = tgh_now_ms();
    for (int i = 0; i < g_npids; i++) {
        int left = 2000 - (int)(tgh_now_ms() - t0);
        cr_assert(tgh_pid_wait_gone(g_pids[i], left > 0 ? left : 0),
                  "pid %ld (%s of 3) outlived toolgate by 2 s", (long)g_pids[i],
                  i == 0 ? "agent" : i == 1 ? "child" : "setsid grandchild");
    }
    /* The watchdog removes what toolgate made: no toolgate-<pid> left in
     * any hierarchy it could write to. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 40); do find /sys/fs/cgroup -maxdepth 6 -type d -name '%s' "
             "2>/dev/null | grep -q . || exit 0; sleep 0.05; done; exit 1",
             base);
    cr_assert_eq(system(cmd), 0, "cgroup %s outlived toolgate", base);
}

Test(descendants, sigkill_of_toolgate_kills_the_agent_without_cgroups)
{
    char dir[TGH_PATH], pidfile[TGH_PATH + 16], audit[TGH_PATH + 16];
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    static tgh_proc_t p;
    const char *extra[] = {"--limit", "containment=off", NULL};
    start(&p, dir, extra, pidfile, sizeof pidfile, audit, sizeof audit);
    read_pids(pidfile);
    kill(p.pid, SIGKILL);
    tgh_wait(&p, 2000);
    cr_assert(tgh_pid_wait_gone(g_pids[0], 2000), "the agent outlived toolgate");
    /* Its child and a setsid grandchild survive here (no cgroup holds
     * them; README, Containment): the fini kills them. */
}
