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
#include "router/cli/help.h"
#include "router/agent/shim.h"
#include "router/front/wrap.h"
#include "router/gateway/log.h"

int main(int argc, char **argv)
{
    /* --log-format and TOOLGATE_LOG for every command (router/gateway/log.h). */
    tg_err_t lerr;
    if (tg_log_setup(&argc, argv, &lerr) < 0)
        return tg_log_failed(&lerr, 2);
    if (argc < 2) {
        tg_cli_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        tg_cli_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0)
        return tg_cli_version(stdout);
    /* Hidden: the exec shim that places an agent before its code runs. */
    if (strcmp(cmd, "__shim") == 0)
        return tg_shim_main(argc - 1, argv + 1);
    /* Hidden: the bash completion's and the man page build's sources. */
    if (strcmp(cmd, "__complete") == 0)
        return tg_cli_complete(argc - 2, argv + 2);
    if (strcmp(cmd, "__man-keys") == 0)
        return tg_cli_man_keys(stdout);
    /* COMMAND --help (or -h): the command's help, before it parses. */
    int help = tg_cli_help_request(argc - 1, argv + 1);
    if (help >= 0)
        return help;
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
    fprintf(stderr,
            "toolgate: unknown command '%s' (expected wrap, serve, check, status, audit, token, "
            "demo, --help or --version)\n",
            cmd);
    return 2;
}
