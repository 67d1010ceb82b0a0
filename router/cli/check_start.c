/* `toolgate check`: what would stop a start that validation cannot see
 * (see check.h, tg_check_start). Read-only: it stats and access(2)es
 * paths, it creates nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "router/cli/check.h"

/* execvp's search path when the environment has no PATH (glibc). */
#define DEFAULT_EXEC_PATH "/bin:/usr/bin"

/* Add a problem to <p>: printf-style, one line, no newline; past
 * TG_CHECK_PROBLEMS_MAX only counted. */
__attribute__((format(printf, 2, 3))) static void problem(tg_check_problems_t *p, const char *fmt,
                                                          ...)
{
    va_list ap;
    if (p->n >= TG_CHECK_PROBLEMS_MAX) {
        p->dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(p->line[p->n++], sizeof p->line[0], fmt, ap);
    va_end(ap);
}

/* Add a note to <p> (printf-style, one line); past TG_CHECK_NOTES_MAX
 * dropped. */
__attribute__((format(printf, 2, 3))) static void note(tg_check_problems_t *p, const char *fmt, ...)
{
    va_list ap;
    if (p->nnotes >= TG_CHECK_NOTES_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(p->note[p->nnotes++], sizeof p->note[0], fmt, ap);
    va_end(ap);
}

/* Listener <i>'s socket directory: it must exist, be a directory, and let
 * this user create the socket. 1 when it does not (the problem added to
 * <out>), else 0. The service unit's runtime directory that does not
 * exist yet is a note: the unit makes it (owned by its User=) before
 * toolgate starts, so right after the package is installed the config
 * checks clean (README, "Running as a service"). */
static int check_listen_dir(tg_check_problems_t *out, size_t i, const char *sock)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(sock, '/');
    size_t n = slash == NULL ? 0 : slash == sock ? 1 : (size_t)(slash - sock);
    struct stat st;

    if (n == 0 || n >= sizeof dir)
        return 0; /* validation wants an absolute path of at most 107 bytes */
    memcpy(dir, sock, n);
    dir[n] = '\0';
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e == ENOENT && strcmp(dir, TG_CHECK_UNIT_RUNTIME_DIR) == 0) {
            note(out,
                 "router.listen[%zu].unix: directory %s does not exist yet: toolgate.service "
                 "makes it when it starts toolgate (RuntimeDirectory=toolgate); to run toolgate "
                 "serve outside the unit, make it first: install -d -o toolgate -g toolgate "
                 "-m 0755 %s",
                 i, dir, dir);
            return 0;
        }
        problem(out,
                "router.listen[%zu].unix: directory %s: %s; toolgate does not create it "
                "(make it: install -d -m 0755 %s, or under systemd RuntimeDirectory=, which "
                "makes /run/toolgate for the packaged unit)",
                i, dir, strerror(e), dir);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        problem(out,
                "router.listen[%zu].unix: %s is not a directory (give the socket a path in a "
                "directory)",
                i, dir);
        return 1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        problem(out,
                "router.listen[%zu].unix: directory %s is not writable by uid %lu: the socket "
                "cannot be created there (run toolgate as its owner, or choose a directory "
                "this user may write)",
                i, dir, (unsigned long)geteuid());
        return 1;
    }
    return 0;
}

/* Whether the file <path> is a regular file this user may execute: 0,
 * or an errno (EACCES also for a directory). */
static int exec_ok(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0)
        return EACCES;
    return 0;
}

int tg_check_find_command(const char *cmd, const char *path_var, char *found, size_t cap)
{
    if (strchr(cmd, '/') != NULL) {
        snprintf(found, cap, "%s", cmd);
        return -exec_ok(cmd);
    }
    const char *p = path_var != NULL ? path_var : DEFAULT_EXEC_PATH;
    int best = ENOENT; /* EACCES wins: a match that cannot be run is worth saying */
    for (;;) {
        size_t len = strcspn(p, ":");
        /* an empty entry is the current directory, as for execvp */
        int n = len == 0 ? snprintf(found, cap, "%s", cmd)
                         : snprintf(found, cap, "%.*s/%s", (int)len, p, cmd);
        if (n > 0 && (size_t)n < cap) {
            int e = exec_ok(found);
            if (e == 0)
                return 0;
            if (e == EACCES)
                best = EACCES;
        }
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    snprintf(found, cap, "%s", cmd);
    return -best;
}

/* The PATH agent <a>'s command is looked up on: env.set's, else (serve)
 * toolgate's when env.pass passes it, (wrap) toolgate's; NULL: none,
 * execvp's default. <where> says which, for the message. */
static const char *agent_path_var(const tg_agent_cfg_t *a, bool serve, const char **where)
{
    for (char **p = a->env_set; p != NULL && *p != NULL; p++) {
        if (strncmp(*p, "PATH=", 5) == 0) {
            *where = "the PATH of its env.set";
            return *p + 5;
        }
    }
    bool passed = !serve;
    for (char **p = a->env_pass; serve && p != NULL && *p != NULL; p++)
        passed = passed || strcmp(*p, "PATH") == 0;
    if (passed && getenv("PATH") != NULL) {
        *where = serve ? "toolgate's PATH (passed by env.pass)" : "toolgate's PATH";
        return getenv("PATH");
    }
    *where = serve ? "the default " DEFAULT_EXEC_PATH " (env.pass does not pass PATH)"
                   : "the default " DEFAULT_EXEC_PATH " (no PATH set)";
    return NULL;
}

/* Agent <i>'s command: found and executable. 1 when not (the problem
 * added to <out>), else 0. */
static int check_command(tg_check_problems_t *out, const tg_config_t *cfg, size_t i, bool serve)
{
    const tg_agent_cfg_t *a = &cfg->agents[i];
    char found[PATH_MAX], rel[PATH_MAX];
    const char *where = "";
    const char *cmd = a->command != NULL ? a->command[0] : NULL;

    if (cmd == NULL || cmd[0] == '\0')
        return 0; /* wrap's command comes from the command line */
    const char *path_var = agent_path_var(a, serve, &where);
    /* A relative path with a slash is run from the agent's directory:
     * agents[].cwd, else its workspace (an instance's own directory with
     * the scan backend, unknown before it starts: not checked), else
     * toolgate's. */
    if (cmd[0] != '/' && strchr(cmd, '/') != NULL) {
        if (a->cwd == NULL && a->workspace != NULL)
            return 0;
        if (a->cwd != NULL && (size_t)snprintf(rel, sizeof rel, "%s/%s", a->cwd, cmd) < sizeof rel)
            cmd = rel;
    }
    int rc = tg_check_find_command(cmd, path_var, found, sizeof found);
    if (rc == 0)
        return 0;
    if (strchr(cmd, '/') == NULL)
        problem(out,
                "agents[%zu].command: '%s' is %s in %s (give its absolute path, or the "
                "directory it is in with env.set PATH)",
                i, cmd, rc == -EACCES ? "not executable" : "not found", where);
    else
        problem(out,
                "agents[%zu].command: %s: %s (install the agent there, or give the path it "
                "is installed at)",
                i, cmd, rc == -EACCES ? "not an executable file" : strerror(-rc));
    return 1;
}

int tg_check_start(tg_check_problems_t *out, const tg_config_t *cfg, bool serve)
{
    int problems = 0;
    out->n = out->dropped = out->nnotes = 0;
    for (size_t i = 0; serve && i < cfg->nlisten; i++)
        if (cfg->listen[i].unix_path != NULL)
            problems += check_listen_dir(out, i, cfg->listen[i].unix_path);
    for (size_t i = 0; i < cfg->nagents; i++)
        problems += check_command(out, cfg, i, serve);
    return problems;
}
