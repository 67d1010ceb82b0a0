/* Running a shell command line from a test and keeping what it printed:
 * for tests of toolgate's command line (tests/test_help.c,
 * tests/test_examples.c). On top of tests/tg_harness.h (its scratch dir
 * tgh_tmp holds the outputs).
 */
#ifndef TG_TESTS_SH_H
#define TG_TESTS_SH_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/wait.h>

#include "tests/tg_harness.h"

#define TGH_SH_MAX 4096 /* a command line */

/* Run `sh -c <cmd>` with stdin from /dev/null and stdout and stderr to
 * files of tgh_tmp; its exit code (-1 when it did not exit), and what it
 * wrote in <*out> and <*err> (caller frees both). */
static inline int tgh_sh(const char *cmd, char **out, char **err)
{
    char o[TGH_PATH + 16], e[TGH_PATH + 16], line[TGH_SH_MAX];
    tgh_tmp_path(o, sizeof o, "sh.out");
    tgh_tmp_path(e, sizeof e, "sh.err");
    int n = snprintf(line, sizeof line, "%s > '%s' 2> '%s' < /dev/null", cmd, o, e);
    cr_assert(n > 0 && (size_t)n < sizeof line, "command line too long: %s", cmd);
    int st = system(line);
    *out = tgh_read_file(o, NULL);
    *err = tgh_read_file(e, NULL);
    cr_assert(*out != NULL && *err != NULL, "lost the output of %s", cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
