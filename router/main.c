/* toolgate: command line. See DESIGN.md "Command line".
 *
 * Exit status: 0 success; 1 runtime failure (agent could not be kept
 * running); 2 bad usage or bad config (one line on stderr saying what was
 * wrong and how to fix it); otherwise the wrapped agent's own status when
 * it exited by itself under restart policy "no".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "audit/verify.h"
#include "router/cli/cli.h"
#include "router/agent/shim.h"
#include "router/front/wrap.h"
#include "router/log.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: toolgate wrap [--config FILE] [--audit PATH] [--store URL] [--admin ADDR]\n"
            "                     [--name NAME] [--limit KEY=VALUE]...\n"
            "                     -- CMD [ARGS...]\n"
            "       toolgate serve --config FILE\n"
            "       toolgate check --config FILE [--limit KEY=VALUE]... [--json]\n"
            "       toolgate status [--admin ADDR] [--json]\n"
            "       toolgate audit verify FILE...\n"
            "       toolgate audit tail --stream KEY --group GROUP [--url URL] [--once]\n"
            "       toolgate token new [--name CALLER] | token digest < TOKEN\n"
            "       toolgate demo\n"
            "       toolgate --help | --version\n"
            "\n"
            "wrap   proxy MCP (newline-delimited JSON-RPC) between this process's stdin/stdout\n"
            "       and the agent CMD, enforcing frame, timeout, concurrency and rate limits.\n"
            "       --config FILE       JSON config (see README); agents[0] configures the agent;\n"
            "                           SIGHUP reloads its limits\n"
            "       --name NAME         the agent's id (default: the config's, else CMD's\n"
            "                           basename); the instance name is HOST-NAME-PID unless\n"
            "                           router.instance is set\n"
            "       --audit PATH        audit log (JSON lines); default\n"
            "                           $XDG_STATE_HOME/toolgate/audit.jsonl\n"
            "       --limit KEY=VALUE   override a limit; KEY is one of max_frame_bytes,\n"
            "                           max_tool_call_duration, max_concurrent_calls,\n"
            "                           max_queued_calls, rate_limit, burst, kill_grace_period,\n"
            "                           memory, cpu, pids, disk, nofile, network,\n"
            "                           containment, workspace, workspace_backend,\n"
            "                           rate_scope, shared_mode, concurrency_scope,\n"
            "                           on_store_error, or tools.NAME.KEY for one tool\n"
            "       --admin ADDR        loopback HOST:PORT for /metrics, /limits, /agents and a\n"
            "                           live page\n"
            "       --store URL         redis://[user:password@]host:port/db shared by every\n"
            "                           toolgate whose limits use rate_scope=shared or\n"
            "                           concurrency_scope=shared\n"
            "serve  run the agents of FILE behind the Unix sockets of router.listen: an MCP\n"
            "       agent instance per caller connection, or (dialect opensentience) one\n"
            "       shared instance routed by tool_id; limits per agent, tool and caller;\n"
            "       SIGHUP reloads FILE, SIGTERM drains and stops\n"
            "check  validate FILE and print every effective limit, where it came from, and\n"
            "       what this host enforces of each agent's resources\n"
            "status the limit registry of a running toolgate (its admin endpoint) as a table\n"
            "audit tail    read the audit Redis Stream as a consumer group, acknowledging\n"
            "              each event once printed\n"
            "audit verify  check audit files for gaps, duplicates, reordering and schema errors\n"
            "token new     print a fresh bearer token, its sha256: digest and the\n"
            "              callers[].tokens entry that holds it (toolgate keeps the digest)\n"
            "token digest  print the sha256: digest of the token on stdin\n"
            "demo   run a bundled demo agent under wrap with small limits and show what happens\n");
}

int main(int argc, char **argv)
{
    /* --log-format and TOOLGATE_LOG for every command (router/log.h). */
    tg_err_t lerr;
    if (tg_log_setup(&argc, argv, &lerr) < 0)
        return tg_log_failed(&lerr, 2);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("toolgate %s\n", TG_VERSION);
        return 0;
    }
    /* Hidden: the exec shim that places an agent before its code runs. */
    if (strcmp(cmd, "__shim") == 0)
        return tg_shim_main(argc - 1, argv + 1);
    if (strcmp(cmd, "wrap") == 0)
        return tg_cli_wrap(argc - 2, argv + 2);
    if (strcmp(cmd, "status") == 0)
        return tg_cli_status(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0)
        return tg_cli_check(argc - 2, argv + 2);
    if (strcmp(cmd, "audit") == 0 && argc >= 3 && strcmp(argv[2], "tail") == 0)
        return tg_cli_audit_tail(argc - 3, argv + 3);
    if (strcmp(cmd, "audit") == 0)
        return tg_cli_audit(argc - 2, argv + 2);
    if (strcmp(cmd, "serve") == 0)
        return tg_cli_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "token") == 0)
        return tg_cli_token(argc - 2, argv + 2);
    if (strcmp(cmd, "demo") == 0)
        return tg_cli_demo(argc - 2, argv + 2, argv[0]);
    fprintf(stderr, "toolgate: unknown command '%s' (expected wrap, demo, --help or --version)\n",
            cmd);
    return 2;
}
