/* Command-line front ends of toolgate's subcommands. Each returns the
 * process exit status (see main.c). */
#ifndef TG_ROUTER_CLI_H
#define TG_ROUTER_CLI_H

#include <stddef.h>

#include "config/config.h"

/* Parse `wrap` arguments (after the word "wrap") into <cfg>: defaults,
 * then --config, then the command, then --limit in order, then --audit.
 * 0, or -1 with a one-line reason in <err>. */
int tg_cli_parse_wrap(int argc, char **argv, tg_config_t *cfg, tg_err_t *err);

int tg_cli_wrap(int argc, char **argv);

/* `toolgate audit tail --stream KEY --group G ...` (the words after "tail"). */
int tg_cli_audit_tail(int argc, char **argv);

/* Parse `serve` arguments (after the word "serve") into <cfg>: either
 * --config FILE alone, or --http HOST:PORT [--path P] [--tls-cert F
 * --tls-key F | --tls off] [--allowed-origin O]... with wrap's --name,
 * --limit, --audit, --store, --admin and -- CMD ARGS: one MCP agent behind
 * one HTTP listener, no file. 0, or -1 with a one-line reason naming the
 * argument in <err>. */
int tg_cli_parse_serve(int argc, char **argv, tg_config_t *cfg, tg_err_t *err);

/* `toolgate serve --config F` or `toolgate serve --http ADDR ... -- CMD`. */
int tg_cli_serve(int argc, char **argv);

/* `toolgate status [--admin ADDR] [--json]` (arguments after the word
 * "status"): the limit registry of a running toolgate from its admin
 * endpoint, as a table sorted by fill or as JSON. 0, 1 when the endpoint
 * cannot be read, 2 on bad usage. */
int tg_cli_status(int argc, char **argv);

/* `toolgate check` (arguments after the word "check"): validate the config
 * and print the effective limits and what this host enforces (see
 * router/check.h). Exit status 0 valid, 1 invalid config, 2 bad usage. */
int tg_cli_check(int argc, char **argv);

/* `toolgate token new [--name CALLER]` and `toolgate token digest` (the
 * words after "token"): bearer tokens for callers[].tokens. 0, 1 when no
 * randomness or stdout fails, 2 on bad usage. */
int tg_cli_token(int argc, char **argv);

/* `toolgate demo`: <self> is argv[0], used to find the bundled agent. */
int tg_cli_demo(int argc, char **argv, const char *self);

#endif
