/* The exec shim: `toolgate __shim [OPTIONS] -- CMD ARGS...`, a hidden
 * subcommand of toolgate's own binary. The router spawns it (never a
 * shell) in place of an agent; it places itself, then execs the agent, so
 * the agent's first instruction already runs contained:
 *
 *   1. --setsid           own session and process group: the tree can be
 *                         signalled as one, and a terminal's ^C goes to
 *                         toolgate, which shuts agents down in order
 *   2. --join FILE        write "0" (= the writer) to each cgroup.procs
 *   3. --unshare-net      new, empty network namespace; "lo" brought up
 *   4. --tmpfs DIR --tmpfs-size BYTES --tmpfs-inodes N
 *                         the workspace: new mount namespace, its tree made
 *                         private (MS_REC|MS_PRIVATE on "/"), then a tmpfs
 *                         on DIR, mode 0700, nosuid, nodev, owned by
 *                         --user's ids when given
 *   5. --rlimit NAME=V[:H] setrlimit (data, nofile, fsize, nproc, as, cpu,
 *                         core, stack, memlock; "infinity")
 *   6. --user UID:GID     setgroups(0), setgid, setuid; verified after
 *   7. --no-new-privs     PR_SET_NO_NEW_PRIVS: setuid binaries and file
 *                         capabilities grant nothing from here on
 *   8. --pdeathsig PPID   PR_SET_PDEATHSIG(SIGKILL), then check that the
 *                         parent is still PPID (it may have died before)
 *   9. --chdir DIR        the agent's working directory (cwd or workspace);
 *                         after the mount, so a path in the workspace
 *                         resolves to the tmpfs, not the directory below it
 *  10. close every fd > 2, then execvp the command.
 *
 * Order matters: joining comes first so nothing the shim does is charged
 * elsewhere; the namespaces, the mount and rlimits need privilege, so they
 * precede the uid drop; the death signal is set after the uid drop because
 * a credential change clears it.
 *
 * --supervise (the argv builder adds it when no cgroup holds the instance:
 * the rlimit and none backends): after steps 1-4 the shim does not exec
 * the agent but forks it and stays as its supervisor, a subreaper
 * (PR_SET_CHILD_SUBREAPER) whose death signal is SIGRTMIN, not SIGKILL.
 * The agent, in a process group of its own, takes steps 5-10 (its death
 * signal is SIGKILL when the supervisor dies). The supervisor forwards
 * SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and SIGWINCH to it;
 * when the agent ends, or toolgate dies, it kills every descendant left
 * (orphans, double forks and setsid grandchildren all reparent to it) and
 * reaps them, then exits as the agent did: the same code, or death by the
 * same signal. It holds /dev/null as stdin and stdout and keeps stderr.
 * SIGKILL cannot be forwarded: toolgate's SIGKILL walks the tree from the
 * supervisor (tg_contain_kill) while it still holds every descendant.
 *
 * Why a death signal: an agent whose toolgate died has no caller, no
 * monitor and no one to reap it. The signal fires when the thread that
 * spawned the shim exits, so toolgate must spawn agents from its loop
 * thread (it does). With a cgroup it reaches the agent's main process
 * and the cgroup watchdog (limits/contain_watch.c) kills the rest;
 * without one the supervisor wakes and kills the whole tree.

 * Errors: one line on stderr, "toolgate shim: <what>: <strerror>", and exit
 * TG_SHIM_EXIT_SETUP (126) when containment could not be set up or the
 * command cannot be executed, TG_SHIM_EXIT_NOTFOUND (127) when it does not
 * exist. The line names files and the command's first word, never its
 * arguments or environment.
 */
#ifndef TG_ROUTER_SHIM_H
#define TG_ROUTER_SHIM_H

#include "limits/contain.h"

#define TG_SHIM_SUBCOMMAND "__shim"
#define TG_SHIM_EXIT_SETUP 126
#define TG_SHIM_EXIT_NOTFOUND 127
#define TG_SHIM_JOIN_MAX 8    /* fixed internal bound: --join options */
#define TG_SHIM_RLIMIT_MAX 16 /* fixed internal bound: --rlimit options */

/* Run the shim. <argv>[0] is the subcommand word (main passes argc - 1,
 * argv + 1); options follow, then "--" and the command. Returns only on
 * failure, with the exit status to use (126 or 127). */
int tg_shim_main(int argc, char **argv);

/* Build the argv that spawns the shim for placement <pl> (from
 * tg_contain_place): { <self_exe>, "__shim", options..., "--",
 * <agent_argv>..., NULL }. <self_exe> is normally "/proc/self/exe", which
 * the forked child resolves to toolgate's own binary even if the file was
 * replaced on disk. <workdir> (the configured cwd) may be NULL: the agent
 * then starts in <pl>'s workspace when it has one. --pdeathsig names the calling
 * process as the expected parent, so call this in the process that
 * spawns. Returns 0 with <*out> allocated (free with tg_shim_argv_free),
 * -EINVAL for an empty <agent_argv> or an rlimit the shim cannot name,
 * -ENOMEM. */
int tg_shim_argv_build(const char *self_exe, const tg_contain_place_t *pl, const char *workdir,
                       char *const agent_argv[], char ***out);
void tg_shim_argv_free(char **argv);
/* Whether the shim for <pl> stays as the agent's supervisor
 * (--supervise): when no cgroup holds the instance (no cgroup.procs to
 * join, the rlimit and none backends). The cgroup backends exec the agent
 * as before; their watchdog ties the tree to toolgate's life. */
bool tg_shim_supervises(const tg_contain_place_t *pl);

#endif
