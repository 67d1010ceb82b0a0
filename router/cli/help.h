/* toolgate's help, version and completion data: the one table of commands
 * (their usage, options and help text) that `--help`, `COMMAND --help`,
 * the bash completion (`toolgate __complete`) and the toolgate(1) test
 * read, and the key list of toolgate.json(5) (`toolgate __man-keys`),
 * printed from the config key table.
 */
#ifndef TG_ROUTER_CLI_HELP_H
#define TG_ROUTER_CLI_HELP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A command of toolgate. <name> is its words ("audit tail"); <options>
 * its options separated by spaces, one that takes a value written
 * "--opt=VALUE"; <text> its help after the usage lines, NULL when the
 * command prints its own (audit verify, which lives in audit/). */
typedef struct tg_cli_cmd {
    const char *name;
    const char *usage; /* the synopsis after "usage: toolgate NAME " */
    const char *summary;
    const char *options;
    const char *text;
} tg_cli_cmd_t;

extern const tg_cli_cmd_t tg_cli_cmds[];
extern const size_t tg_cli_ncmds;

/* The row of command words <w0> [<w1>] ("audit", "tail"; <w1> may be
 * NULL), or NULL. A group ("audit", "token") has no row of its own. */
const tg_cli_cmd_t *tg_cli_cmd_find(const char *w0, const char *w1);

/* `toolgate --help`: the commands with their summaries, to <f>. */
void tg_cli_usage(FILE *f);

/* The help of command <c> (its usage lines, then its text) to <f>. */
void tg_cli_help(FILE *f, const tg_cli_cmd_t *c);

/* The help of the command named <name> ("status"), which must exist. */
void tg_cli_help_of(FILE *f, const char *name);

/* If the command line <argv> (argv[0] the first command word, <argc>
 * words) asks for help (--help or -h among its options, before "--" and,
 * for wrap, before the agent command; or a group word alone with
 * --help), print it on stdout and return the exit status (0). -1 when it
 * does not, and the command runs. */
int tg_cli_help_request(int argc, char **argv);

/* `toolgate --version`: version, git revision, the libraries it runs with
 * and the containment backends this host offers (detected read-only). */
int tg_cli_version(FILE *f);

/* Hidden `toolgate __complete WHAT [COMMAND...]` for the bash completion:
 * "commands", "subcommands GROUP", "options COMMAND [SUB]" (one a line,
 * a value-taking option with a trailing '='), "limit-keys" (the --limit
 * keys of the key table, "tools.NAME." for a tool's). 0, or 2 on bad usage. */
int tg_cli_complete(int argc, char **argv);

/* Hidden `toolgate __man-keys`: the key table as the mdoc list of
 * toolgate.json(5) ("CONFIGURATION KEYS"), one .It per row. 0, or 1 when
 * stdout fails. */
int tg_cli_man_keys(FILE *f);

#endif
