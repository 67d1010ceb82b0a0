/* The containment section's schema: mode, pre-flight and workspace
 * backend are plain rows of the key table; here are their names, the
 * workspace path rule (agents[].workspace, --limit workspace=) and the
 * section's check in tg_config_validate.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/cfg_impl.h"

/* Choice <i> of row <path>, or "unknown". */
static const char *choice(const char *path, unsigned i)
{
    const tg_cfg_key_t *k = tg_cfg_key_find(path);

    for (unsigned n = 0; k && k->choices[n]; n++)
        if (n == i)
            return k->choices[n];
    return "unknown";
}

const char *tg_containment_mode_name(tg_containment_mode_t m)
{
    return choice("containment.mode", (unsigned)m);
}

const char *tg_workspace_backend_name(tg_workspace_backend_t b)
{
    return choice("containment.workspace_backend", (unsigned)b);
}

/* toolgate creates the workspace, may chown it to the agent's user and
 * mounts over it, all as root: a path that could mean something else
 * than it says ("..", a doubled '/'), or that lies on a kernel filesystem,
 * is refused rather than interpreted. */
int tg_config_workspace_check(const char *path, char *why, size_t cap)
{
    static const char *const kernel_fs[] = {"/proc", "/sys", "/dev"};
    size_t len = strlen(path);

    if (path[0] != '/')
        return tg__cfg_why(-EINVAL, why, cap, "is not an absolute path");
    if (len >= TG_WORKSPACE_PATH_MAX)
        return tg__cfg_why(-EINVAL, why, cap, "is %zu bytes long (at most %d)", len,
                           TG_WORKSPACE_PATH_MAX - 1);
    if (len == 1)
        return tg__cfg_why(-EINVAL, why, cap, "is the root directory");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
            return tg__cfg_why(-EINVAL, why, cap, "holds a control byte at offset %zu", i);
    /* Each component: between one '/' and the next (or the end). */
    for (const char *p = path + 1;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0)
            return tg__cfg_why(-EINVAL, why, cap,
                               "has an empty component (a doubled or trailing '/')");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return tg__cfg_why(-EINVAL, why, cap, "has a \"%.*s\" component", (int)n, p);
        if (!e)
            break;
        p = e + 1;
    }
    for (size_t i = 0; i < sizeof kernel_fs / sizeof kernel_fs[0]; i++) {
        size_t kl = strlen(kernel_fs[i]);
        if (strncmp(path, kernel_fs[i], kl) == 0 && (path[kl] == '\0' || path[kl] == '/'))
            return tg__cfg_why(-EINVAL, why, cap, "lies under %s, a kernel filesystem",
                               kernel_fs[i]);
    }
    return 0;
}

TG_KCHECK(tg__cfg_check_workspace)
{
    char why[128], q[QUOTED_MAX];

    if (tg_config_workspace_check(s, why, sizeof why) == 0)
        return 0;
    tg__cfg_quote(q, sizeof q, s, len);
    return tg__cfg_why(-1, msg, cap, "%s %s (expected an absolute, normalised directory path)", q,
                       why);
}

TG_KVALID(tg__cfg_validate_containment)
{
    if ((unsigned)cfg->containment_mode <= TG_CONTAINMENT_OFF)
        return 0;
    return tg_err_set(err, -1,
                      "%s%scontainment.mode: not a containment mode (expected "
                      "\"best_effort\", \"required\" or \"off\")",
                      f, sep);
}
