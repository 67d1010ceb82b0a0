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
 * Why a death signal: an agent whose toolgate died has no caller, no
 * monitor and no one to reap it. With cgroups the next start's orphan
 * cleanup would kill it anyway; without them nothing would. The signal
 * fires when the thread that spawned the shim exits, so toolgate must
 * spawn agents from its loop thread (it does), and it reaches the main
 * process only: descendants die by the cgroup watchdog when toolgate is
 * killed (limits/contain_watch.c), by cgroup.kill when toolgate stops an
 * instance, or by the tree and session kill of the rlimit backend when
 * toolgate ends normally (a killed toolgate leaves them there).
 *
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

#endif
