/* toolgate's help, version and completion (see help.h).
 *
 * The command table below is the one list of commands, options and help
 * text: `toolgate --help`, `toolgate COMMAND --help`, the completion and
 * tests/test_help.c (which holds it against toolgate(1) and main.c's
 * dispatch) read it. The --limit keys are printed from the config key
 * table, never listed here.
 */
#include "router/cli/help.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config/keys.h"
#include "limits/contain.h"
#include "router/admin/admin.h"
#include "router/cli/check.h"
#include "tg_build_info.h" /* TG_GIT_REV, written by CMake at configure time */

#define TOOL_ROWS "agents[].tools.*"

/* What every command takes (router/gateway/log.c, tg_log_setup, reads them before
 * the command parses its own options), said in `toolgate --help` and at
 * the end of each command's help. */
#define LOG_OPTS_HELP                                                                              \
    "Every command also takes (before or after its name):\n"                                       \
    "  --log-format text|json   toolgate's log lines on stderr as text (default) or\n"             \
    "                      one JSON object per line\n"                                             \
    "Environment:\n"                                                                               \
    "  TOOLGATE_LOG=debug|info|warn|error   the lowest level logged (default info)\n"

/* clang-format off */
const tg_cli_cmd_t tg_cli_cmds[] = {
    {"wrap",
     "[--config FILE] [--audit PATH] [--store URL] [--admin ADDR]\n"
     "                     [--name NAME] [--limit KEY=VALUE]... [[--] CMD [ARGS...]]",
     "proxy one MCP server on stdin/stdout, enforcing its limits",
     "--config=FILE --audit=PATH --store=URL --admin=ADDR --name=NAME --limit=KEY=VALUE",
     "Proxy MCP (newline-delimited JSON-RPC) between this process's stdin/stdout and\n"
     "the agent CMD, enforcing frame, timeout, concurrency and rate limits and the\n"
     "agent's resources. SIGHUP reloads --config and the command line's limits;\n"
     "SIGTERM or EOF on stdin drains and stops.\n"
     "  --config FILE       JSON config (toolgate.json(5)); agents[0] is the agent,\n"
     "                      and its command runs when no CMD is given (CMD wins)\n"
     "  --name NAME         the agent's id (default: the config's, else CMD's basename);\n"
     "                      the instance is HOST-NAME-PID unless router.instance is set\n"
     "  --audit PATH        audit log (JSON lines), replacing the config's sinks;\n"
     "                      default $XDG_STATE_HOME/toolgate/audit.jsonl\n"
     "  --store URL         redis://[user:password@]host:port/db or unix:/path?db=N,\n"
     "                      shared by toolgates whose limits use rate_scope=shared\n"
     "                      or concurrency_scope=shared\n"
     "  --admin ADDR        loopback HOST:PORT for /metrics, /limits, /agents and a page\n"
     "  --limit KEY=VALUE   override a limit (repeatable; KEYs below)\n"
     "Exit status: 0, 1 when the agent could not be kept running, 2 bad usage or\n"
     "config, else the agent's own status when it exited under restart policy \"no\".\n"},
    {"serve",
     "--config FILE\n"
     "       toolgate serve --http HOST:PORT [--path /mcp] [--tls-cert FILE --tls-key FILE |\n"
     "                      --tls off] [--allowed-origin ORIGIN]... [--name NAME]\n"
     "                      [--limit KEY=VALUE]... [--audit PATH] [--store URL]\n"
     "                      [--admin ADDR] -- CMD [ARGS...]",
     "run agents behind Unix sockets and MCP Streamable HTTP listeners",
     "--config=FILE --http=HOST:PORT --path=PATH --tls-cert=FILE --tls-key=FILE --tls=off "
     "--allowed-origin=ORIGIN --name=NAME --limit=KEY=VALUE --audit=PATH --store=URL "
     "--admin=ADDR",
     "Run the agents of FILE behind the listeners of router.listen: Unix sockets (an\n"
     "MCP agent instance per caller connection, or one shared opensentience instance\n"
     "routed by tool_id) and MCP Streamable HTTP listeners (router.listen[].http).\n"
     "Limits apply per agent, tool and caller (callers[]).\n"
     "  --config FILE       JSON config (toolgate.json(5)); check it with toolgate check;\n"
     "                      takes no other option\n"
     "Without a config, serve the MCP server CMD (stdio) over MCP Streamable HTTP:\n"
     "  --http HOST:PORT    at http://HOST:PORT/mcp, one agent instance per session\n"
     "  --path PATH         the endpoint's path (default /mcp)\n"
     "  --tls-cert FILE --tls-key FILE   serve HTTPS (PEM); off loopback, TLS or\n"
     "  --tls off           (a TLS-terminating proxy in front) is required\n"
     "  --allowed-origin ORIGIN   accept requests carrying this Origin (repeatable);\n"
     "                      without it any Origin is refused\n"
     "  --name, --limit, --audit, --store, --admin   as for wrap\n"
     "Signals: SIGHUP reloads FILE (what each key does on reload: toolgate.json(5)),\n"
     "SIGTERM or SIGINT drain the calls in flight and stop.\n"
     "Exit status: 0 stopped, 1 runtime failure, 2 bad usage or config.\n"},
    {"check", "[--config FILE] [--limit KEY=VALUE]... [--json] [-- CMD ARGS...]",
     "validate a config; show effective limits and what this host enforces",
     "--config=FILE --limit=KEY=VALUE --json",
     "Validate the config and print, per agent and tool, the effective limits and\n"
     "where each came from (default, file, manifest, operator cap, --limit), and\n"
     "what this host will enforce of each agent's resources. Also checks what a\n"
     "start would trip on: each Unix listener's directory exists and is writable,\n"
     "each agent command is found (on PATH when it has no '/') and executable.\n"
     "  --config FILE       JSON config\n"
     "  --limit KEY=VALUE   as in wrap: applies to the first agent\n"
     "  --json              one JSON object instead of tables\n"
     "  -- CMD ARGS         the command wrap would run (for a config without one)\n"
     "Exit status: 0 valid, 1 invalid config or a start would fail, 2 bad usage.\n"},
    {"status", "[--admin ADDR] [--json]",
     "the limit registry of a running toolgate, from its admin endpoint",
     "--admin=ADDR --json",
     "  --admin ADDR  the admin endpoint of a running toolgate (default " TG_ADMIN_DEF_ADDR ")\n"
     "  --json        print the snapshot as JSON instead of a table\n"
     "Exit status: 0, 1 when the endpoint cannot be read, 2 bad usage.\n"},
    {"audit tail",
     "--stream KEY --group GROUP [--consumer NAME]\n"
     "                           [--url redis://[user:password@]host:port/db]\n"
     "                           [--count N] [--block MS] [--once]",
     "read the audit Redis Stream as a consumer group",
     "--stream=KEY --group=GROUP --consumer=NAME --url=URL --count=N --block=MS --once",
     "Print the events of the audit stream KEY as a member of consumer group GROUP\n"
     "(created when missing), acknowledging each event once it is written out.\n"
     "  --consumer NAME  this reader's name in the group (default: the host name)\n"
     "  --url URL        the Redis (default redis://127.0.0.1:6379/0)\n"
     "  --count N        events per read (1 to 10000, default 100)\n"
     "  --block MS       how long one read waits for events (default 2000)\n"
     "  --once           stop when the stream has nothing more to read (default: follow)\n"
     "Exit status: 0, 1 when Redis fails, 2 bad usage.\n"},
    {"audit verify", "[--quiet] [--stopped] FILE...",
     "check audit files for gaps, duplicates, reordering, bad schema",
     "--quiet --stopped", NULL},
    {"token new", "[--name CALLER]",
     "print a new bearer token, its digest and its callers[] entry",
     "--name=CALLER",
     "Print a fresh bearer token (256 random bits), its sha256: digest and the\n"
     "callers[].tokens entry that holds the digest. toolgate keeps only the digest;\n"
     "the token is shown once.\n"
     "  --name CALLER  the caller's name in the printed entry\n"
     "Exit status: 0, 1 when no randomness or stdout fails, 2 bad usage.\n"},
    {"token digest", "< TOKEN",
     "print the sha256: digest of the token on stdin",
     "",
     "Read one token (one line) on stdin and print its sha256: digest, the form\n"
     "callers[].tokens holds.\n"
     "Exit status: 0, 1 when stdin or stdout fails, 2 bad usage.\n"},
    {"demo", "",
     "run a bundled demo agent under wrap with small limits",
     "",
     "Run the demo agent (TG_DEMO_AGENT; else agents/tg_fixture_agent next to the\n"
     "binary in a build tree; else the installed ../libexec/toolgate/demo-agent)\n"
     "under toolgate wrap with small limits, drive it with scripted calls (allowed,\n"
     "rate-limited, timed out, oversized) and show the audit trail, written to a\n"
     "new /tmp/toolgate-demo-XXXXXX directory. --log-format is passed to the wrap.\n"
     "Exit status: the wrap's.\n"},
};
/* clang-format on */
const size_t tg_cli_ncmds = sizeof tg_cli_cmds / sizeof tg_cli_cmds[0];

/* Whether the first word of <name> is <w> (for groups: "audit"). */
static bool first_word_is(const char *name, const char *w)
{
    size_t n = strlen(w);
    return strncmp(name, w, n) == 0 && (name[n] == '\0' || name[n] == ' ');
}

const tg_cli_cmd_t *tg_cli_cmd_find(const char *w0, const char *w1)
{
    for (size_t i = 0; w0 != NULL && i < tg_cli_ncmds; i++) {
        const char *name = tg_cli_cmds[i].name;
        if (!first_word_is(name, w0))
            continue;
        const char *sub = name + strlen(w0);
        if (*sub == '\0')
            return &tg_cli_cmds[i];
        if (w1 != NULL && strcmp(sub + 1, w1) == 0)
            return &tg_cli_cmds[i];
    }
    return NULL;
}

/* Whether <w0> is a group: a word only commands of two words start with. */
static bool is_group(const char *w0)
{
    if (tg_cli_cmd_find(w0, NULL) != NULL)
        return false;
    for (size_t i = 0; i < tg_cli_ncmds; i++)
        if (first_word_is(tg_cli_cmds[i].name, w0))
            return true;
    return false;
}

/* The length of the first word of <name>. */
static size_t first_len(const char *name)
{
    return strcspn(name, " ");
}

void tg_cli_usage(FILE *f)
{
    fprintf(f, "usage: toolgate COMMAND [OPTIONS]   (toolgate COMMAND --help for its options)\n");
    for (size_t i = 0; i < tg_cli_ncmds; i++)
        fprintf(f, "       toolgate %s%s%s\n", tg_cli_cmds[i].name,
                tg_cli_cmds[i].usage[0] ? " " : "", tg_cli_cmds[i].usage);
    fprintf(f, "       toolgate --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < tg_cli_ncmds; i++)
        fprintf(f, "  %-13s %s\n", tg_cli_cmds[i].name, tg_cli_cmds[i].summary);
    fprintf(f, "\n" LOG_OPTS_HELP);
    fprintf(f, "\nman toolgate and man toolgate.json describe the commands, signals, files and\n"
               "config keys.\n");
}

#define HELP_WIDTH 78 /* help text columns */

/* The --limit keys of the key table (a tool's when <tool>), each followed
 * by <tail>, separated by <sep>; with <wrap>, lines are broken before
 * HELP_WIDTH and continue indented by two. */
static void limit_keys(FILE *f, bool tool, const char *sep, const char *tail, bool wrap)
{
    bool first = true;
    size_t col = 2;
    if (wrap)
        fputs("  ", f);
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        if (!k->cli || tg_cfg_key_under(k, TOOL_ROWS) != tool)
            continue;
        const char *name = tg_cfg_key_cli(k);
        size_t n = strlen(name) + strlen(tail) + strlen(sep);
        if (!first)
            fputs(sep, f);
        if (wrap && !first && col + n > HELP_WIDTH) {
            fputs("\n  ", f);
            col = 2;
        } else if (wrap && !first) {
            fputc(' ', f);
        }
        fprintf(f, "%s%s", name, tail);
        col += n + 1;
        first = false;
    }
}

void tg_cli_help(FILE *f, const tg_cli_cmd_t *c)
{
    fprintf(f, "usage: toolgate %s%s%s\n", c->name, c->usage[0] ? " " : "", c->usage);
    if (c->text == NULL)
        return;
    fprintf(f, "\n%s", c->text);
    if (strstr(c->options, "--limit=") != NULL) {
        fprintf(f, "--limit KEY is one of:\n");
        limit_keys(f, false, ",", "", true);
        fprintf(f, ";\nor tools.NAME.KEY for tool NAME, with KEY one of:\n");
        limit_keys(f, true, ",", "", true);
        fprintf(f, ".\nValues take units: 4Mi, 30s, 100/minute, 500m (see toolgate.json(5)).\n");
    }
    fprintf(f, "\n" LOG_OPTS_HELP);
}

void tg_cli_help_of(FILE *f, const char *name)
{
    char w0[16];
    const char *sp = strchr(name, ' ');
    size_t n = sp ? (size_t)(sp - name) : strlen(name);
    snprintf(w0, sizeof w0, "%.*s", (int)n, name);
    const tg_cli_cmd_t *c = tg_cli_cmd_find(w0, sp ? sp + 1 : NULL);
    if (c != NULL)
        tg_cli_help(f, c);
}

/* A group's help: the usage of each of its commands. */
static void group_help(FILE *f, const char *w0)
{
    bool first = true;
    for (size_t i = 0; i < tg_cli_ncmds; i++) {
        const tg_cli_cmd_t *c = &tg_cli_cmds[i];
        if (!first_word_is(c->name, w0))
            continue;
        fprintf(f, "%s toolgate %s %s\n", first ? "usage:" : "      ", c->name, c->usage);
        first = false;
    }
    for (size_t i = 0; i < tg_cli_ncmds; i++)
        if (first_word_is(tg_cli_cmds[i].name, w0))
            fprintf(f, "  %-11s %s\n", tg_cli_cmds[i].name + strlen(w0) + 1,
                    tg_cli_cmds[i].summary);
    fprintf(f, "`toolgate %s SUBCOMMAND --help` shows its options.\n", w0);
}

/* Whether option word <a> of command <c> takes its value in the next word
 * ("--config FILE"). */
static bool takes_value(const tg_cli_cmd_t *c, const char *a)
{
    size_t n = strlen(a);
    if (strncmp(a, "--", 2) != 0 || strchr(a, '=') != NULL)
        return false;
    for (const char *p = strstr(c->options, a); p != NULL; p = strstr(p + 1, a))
        if ((p == c->options || p[-1] == ' ') && p[n] == '=')
            return true;
    return false;
}

int tg_cli_help_request(int argc, char **argv)
{
    if (argc < 1)
        return -1;
    const tg_cli_cmd_t *c = tg_cli_cmd_find(argv[0], argc > 1 ? argv[1] : NULL);
    int words = c != NULL && strchr(c->name, ' ') != NULL ? 2 : 1;
    if (c == NULL) {
        /* "toolgate audit --help": the group's commands. */
        if (is_group(argv[0]) && argc > 1 &&
            (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
             strcmp(argv[1], "help") == 0)) {
            group_help(stdout, argv[0]);
            return 0;
        }
        return -1;
    }
    bool wrap = strcmp(c->name, "wrap") == 0;
    for (int i = words; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0 || (wrap && a[0] != '-'))
            break; /* the agent command and its arguments are not ours */
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (c->text != NULL) {
                tg_cli_help(stdout, c);
                return fflush(stdout) == 0 ? 0 : 1;
            }
            return -1; /* the command prints its own help */
        }
        if (takes_value(c, a))
            i++;
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* --version                                                           */

/* The containment backends this host offers, strongest first, from a
 * read-only detection (no cgroup is made). */
static void version_containment(FILE *f)
{
    tg_contain_caps_t *caps = calloc(1, sizeof *caps);
    char why[TG_REASON_MAX];
    if (caps == NULL) {
        fprintf(f, "containment: (not detected: out of memory)\n");
        return;
    }
    tg_contain_detect(caps, NULL);
    bool v2 = caps->h[TG_CG_V2].usable && caps->h[TG_CG_V2].writable;
    bool v1 = false;
    for (int i = TG_CG_MEMORY; i < TG_CG_NHIER; i++)
        v1 = v1 || (caps->h[i].usable && caps->h[i].writable);
    fprintf(f, "containment: ");
    if (v2)
        fprintf(f, "cgroup2 (%s%s%s%s), ", caps->v2_memory ? "memory " : "",
                caps->v2_cpu ? "cpu " : "", caps->v2_pids ? "pids " : "",
                caps->v2_kill ? "kill" : "no cgroup.kill");
    if (v1)
        fprintf(f, "cgroup1, ");
    fprintf(f, "rlimit; network namespaces %s; tmpfs workspaces %s\n", caps->netns ? "yes" : "no",
            caps->tmpfs ? "yes" : "no");
    tg_contain_kind_t kind = tg_check_backend(caps, TG_CONTAIN_BEST_EFFORT, why, sizeof why);
    fprintf(f, "containment.mode best_effort here: %s%s%s%s\n", tg_contain_kind_name(kind),
            why[0] ? " (" : "", why, why[0] ? ")" : "");
    free(caps);
}

int tg_cli_version(FILE *f)
{
    fprintf(f, "toolgate %s (git %s)\n", TG_VERSION, TG_GIT_REV);
    fprintf(f, "libuv %s, hiredis %d.%d.%d, jansson %s, %s\n", uv_version_string(), HIREDIS_MAJOR,
            HIREDIS_MINOR, HIREDIS_PATCH, jansson_version_str(), OpenSSL_version(OPENSSL_VERSION));
    version_containment(f);
    return fflush(f) == 0 && !ferror(f) ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* __complete                                                          */

/* The words of the option list <opts>, one a line, "=VALUE" cut to "=". */
static void print_options(const char *opts)
{
    const char *p = opts;
    while (*p != '\0') {
        size_t n = strcspn(p, " ");
        const char *eq = memchr(p, '=', n);
        printf("%.*s\n", (int)(eq != NULL ? (size_t)(eq - p) + 1 : n), p);
        p += n;
        p += strspn(p, " ");
    }
    printf("--help\n");
}

int tg_cli_complete(int argc, char **argv)
{
    const char *what = argc > 0 ? argv[0] : "";
    if (strcmp(what, "commands") == 0) {
        for (size_t i = 0; i < tg_cli_ncmds; i++) {
            const char *name = tg_cli_cmds[i].name, *prev = i ? tg_cli_cmds[i - 1].name : "";
            size_t n = first_len(name);
            if (first_len(prev) != n || strncmp(prev, name, n) != 0) /* a group's first row */
                printf("%.*s\n", (int)n, name);
        }
        printf("--help\n--version\n");
    } else if (strcmp(what, "subcommands") == 0 && argc == 2) {
        for (size_t i = 0; i < tg_cli_ncmds; i++)
            if (strchr(tg_cli_cmds[i].name, ' ') && first_word_is(tg_cli_cmds[i].name, argv[1]))
                printf("%s\n", tg_cli_cmds[i].name + strlen(argv[1]) + 1);
    } else if (strcmp(what, "options") == 0 && (argc == 2 || argc == 3)) {
        const tg_cli_cmd_t *c = tg_cli_cmd_find(argv[1], argc == 3 ? argv[2] : NULL);
        if (c == NULL)
            return 0; /* nothing to offer */
        print_options(c->options);
    } else if (strcmp(what, "limit-keys") == 0 && argc == 1) {
        limit_keys(stdout, false, "\n", "=", false);
        printf("\ntools.\n"); /* then tools.NAME.KEY: "limit-keys tool" */
    } else if (strcmp(what, "limit-keys") == 0 && argc == 2 && strcmp(argv[1], "tool") == 0) {
        limit_keys(stdout, true, "\n", "=", false);
        printf("\n");
    } else {
        fprintf(stderr, "toolgate __complete: expected commands, subcommands GROUP, options "
                        "COMMAND [SUB] or limit-keys [tool]\n");
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
