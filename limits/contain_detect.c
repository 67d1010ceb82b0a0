/* Containment detection (see contain.h): what the host offers, read from
 * /proc/self/mountinfo, /proc/self/cgroup and the cgroup files of
 * toolgate's own cgroup, with a probe in a child for what only an attempt
 * can tell (network namespaces, tmpfs workspaces); and which backend that
 * makes the best one. Nothing here changes the host: contain.c makes the
 * base cgroups and delegates the controllers.
 */
#define _GNU_SOURCE
#include "limits/contain_impl.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const hier_names[TG_CG_NHIER] = {
    [TG_CG_V2] = "cgroup2", [TG_CG_MEMORY] = "memory", [TG_CG_CPU] = "cpu",
    [TG_CG_CPUACCT] = "cpuacct", [TG_CG_PIDS] = "pids",
};

const char *tg__cg_hier_name(int i)
{
    return i >= 0 && i < TG_CG_NHIER ? hier_names[i] : "?";
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static bool has_token(const char *list, const char *tok, char sep)
{
    size_t tl = strlen(tok);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, sep);
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == tl && strncmp(p, tok, tl) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

typedef struct mnt {
    bool found, ro;
    char root[TG_CG_PATH_MAX];
    char mount[TG_CG_PATH_MAX];
} mnt_t;

static void set_mnt(mnt_t *m, const char *root, const char *mount, const char *opts)
{
    if (m->found)
        return; /* the first mount of a hierarchy wins, as the kernel's own view */
    m->found = true;
    m->ro = has_token(opts, "ro", ',');
    tg__copy_str(m->root, sizeof m->root, root);
    tg__copy_str(m->mount, sizeof m->mount, mount);
    unescape_octal(m->root);
    unescape_octal(m->mount);
}

static void scan_mountinfo(const char *path, mnt_t m[TG_CG_NHIER])
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        /* id parent maj:min root mountpoint options [optional...] */
        char *fld[6] = {0};
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(line, " ", &save); t && n < 6; t = strtok_r(NULL, " ", &save))
            fld[n++] = t;
        if (n < 6)
            continue;
        char *save2 = NULL;
        char *fstype = strtok_r(sep + 3, " ", &save2);
        char *source = strtok_r(NULL, " ", &save2);
        const char *super = strtok_r(NULL, " \n", &save2);
        if (!fstype || !source)
            continue;
        if (!super)
            super = "";
        if (strcmp(fstype, "cgroup2") == 0) {
            set_mnt(&m[TG_CG_V2], fld[3], fld[4], fld[5]);
        } else if (strcmp(fstype, "cgroup") == 0) {
            for (int i = TG_CG_MEMORY; i < TG_CG_NHIER; i++)
                if (has_token(super, hier_names[i], ','))
                    set_mnt(&m[i], fld[3], fld[4], fld[5]);
        }
    }
    free(line);
    fclose(f);
}

static void scan_self_cgroup(const char *path, char own[TG_CG_NHIER][TG_CG_PATH_MAX],
                             bool have[TG_CG_NHIER])
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *ctrls = c1 + 1, *cgpath = c2 + 1;
        if (strcmp(line, "0") == 0 && *ctrls == '\0') {
            if (!have[TG_CG_V2]) {
                tg__copy_str(own[TG_CG_V2], TG_CG_PATH_MAX, cgpath);
                have[TG_CG_V2] = true;
            }
            continue;
        }
        for (int i = TG_CG_MEMORY; i < TG_CG_NHIER; i++) {
            if (!have[i] && has_token(ctrls, hier_names[i], ',')) {
                tg__copy_str(own[i], TG_CG_PATH_MAX, cgpath);
                have[i] = true;
            }
        }
    }
    free(line);
    fclose(f);
}

/* Own dir = mount point + our cgroup path relative to the mount's root
 * (a container may mount only a subtree). */
static int resolve_own(tg_cg_hier_caps_t *h, const mnt_t *m, const char *own)
{
    const char *rel = own;
    if (strcmp(m->root, "/") != 0) {
        size_t rl = strlen(m->root);
        if (strncmp(own, m->root, rl) != 0 || (own[rl] != '\0' && own[rl] != '/'))
            return -ENOENT;
        rel = own + rl;
    }
    while (*rel == '/')
        rel++;
    int n = *rel ? snprintf(h->own_dir, sizeof h->own_dir, "%s/%s", m->mount, rel)
                 : snprintf(h->own_dir, sizeof h->own_dir, "%s", m->mount);
    return (n < 0 || (size_t)n >= sizeof h->own_dir) ? -ENAMETOOLONG : 0;
}

/* Whether this process may create a network namespace. Probed in a child
 * so toolgate's own namespace never changes. */
static bool probe_netns(void)
{
    pid_t p = fork();
    if (p < 0)
        return false;
    if (p == 0)
        _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
    int st = 0;
    while (waitpid(p, &st, 0) < 0) {
        if (errno != EINTR)
            return false;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void tg__caps_set_ctls(tg_contain_caps_t *caps, unsigned mask)
{
    caps->v2_cpu = mask & TG_CG_CTL_CPU;
    caps->v2_memory = mask & TG_CG_CTL_MEMORY;
    caps->v2_pids = mask & TG_CG_CTL_PIDS;
}

/* Whether the kernel has cgroup.kill (5.14+) as seen from <dir>: the root
 * cgroup never has the file (toolgate runs there in many containers), so
 * there a child cgroup answers, when one exists. */
static bool has_cgroup_kill(const char *dir)
{
    if (tg__cg_exists(dir, "cgroup.kill"))
        return true;
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    int yes = -1;
    struct dirent *e;
    char child[TG_CG_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(child, sizeof child, "%s/%s", dir, e->d_name) < sizeof child)
            yes = tg__cg_exists(child, "cgroup.kill");
        break; /* one child is enough: the file is there in all or none */
    }
    closedir(d);
    if (yes >= 0)
        return yes;
    /* No child to ask: the kernel's version (cgroup.kill is 5.14's). */
    struct utsname u;
    unsigned major = 0, minor = 0;
    return uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
           (major > 5 || (major == 5 && minor >= 14));
}

void tg_contain_detect(tg_contain_caps_t *caps, const tg_contain_opts_t *opts)
{
    static const tg_contain_opts_t none;
    if (!opts)
        opts = &none;
    memset(caps, 0, sizeof *caps);
    caps->root = geteuid() == 0;

    mnt_t *m = calloc(TG_CG_NHIER, sizeof *m);
    char (*own)[TG_CG_PATH_MAX] = calloc(TG_CG_NHIER, sizeof *own);
    bool have[TG_CG_NHIER] = {0};
    if (m && own) {
        scan_mountinfo(opts->mountinfo_path ? opts->mountinfo_path : "/proc/self/mountinfo", m);
        scan_self_cgroup(opts->self_cgroup_path ? opts->self_cgroup_path : "/proc/self/cgroup",
                         own, have);
    }
    for (int i = 0; i < TG_CG_NHIER; i++) {
        tg_cg_hier_caps_t *h = &caps->h[i];
        h->alias = -1;
        if (!m || !own || !m[i].found) {
            tg__copy_str(h->why, sizeof h->why, "not mounted");
            continue;
        }
        h->mounted = true;
        tg__copy_str(h->mount, sizeof h->mount, m[i].mount);
        if (!have[i]) {
            tg__copy_str(h->why, sizeof h->why,
                         "toolgate's cgroup is not listed in /proc/self/cgroup");
            continue;
        }
        if (resolve_own(h, &m[i], own[i]) < 0) {
            tg__copy_str(h->why, sizeof h->why,
                         "toolgate's cgroup lies outside the mounted subtree");
            continue;
        }
        h->usable = true;
        for (int j = TG_CG_MEMORY; i > TG_CG_MEMORY && j < i; j++) {
            if (caps->h[j].mounted && strcmp(caps->h[j].mount, h->mount) == 0) {
                h->alias = j;
                break;
            }
        }
        if (m[i].ro)
            tg__copy_str(h->why, sizeof h->why, "read-only mount");
        else if (access(h->own_dir, W_OK) != 0)
            snprintf(h->why, sizeof h->why, "own cgroup not writable: %s", strerror(errno));
        else
            h->writable = true;
    }
    free(m);
    free(own);

    if (caps->h[TG_CG_V2].usable) {
        tg__caps_set_ctls(caps, tg__cg_read_ctls(caps->h[TG_CG_V2].own_dir, "cgroup.controllers"));
        /* init checks again in the base it makes. */
        caps->v2_kill = has_cgroup_kill(caps->h[TG_CG_V2].own_dir);
    }
    if (caps->h[TG_CG_MEMORY].usable)
        caps->v1_memsw = tg__cg_exists(caps->h[TG_CG_MEMORY].own_dir, "memory.memsw.limit_in_bytes");
    caps->netns = opts->skip_netns_probe ? false : probe_netns();
    if (opts->skip_tmpfs_probe)
        tg__copy_str(caps->tmpfs_why, sizeof caps->tmpfs_why, "not probed");
    else
        caps->tmpfs = tg__ws_probe_tmpfs(caps->tmpfs_why, sizeof caps->tmpfs_why);
}

/* ---- backend choice ---- */

bool tg__caps_hier_ok(const tg_contain_caps_t *caps, int i)
{
    return caps->h[i].usable && caps->h[i].writable;
}

static bool v1_any(const tg_contain_caps_t *caps)
{
    return tg__caps_hier_ok(caps, TG_CG_MEMORY) || tg__caps_hier_ok(caps, TG_CG_CPU) ||
           tg__caps_hier_ok(caps, TG_CG_PIDS);
}

bool tg__caps_v2_ctl(const tg_contain_caps_t *caps)
{
    return caps->v2_memory || caps->v2_cpu || caps->v2_pids;
}

tg_contain_kind_t tg__contain_choose(const tg_contain_caps_t *caps)
{
    if (tg__caps_hier_ok(caps, TG_CG_V2) && tg__caps_v2_ctl(caps))
        return TG_CONTAIN_CGROUP2;
    if (v1_any(caps))
        return TG_CONTAIN_CGROUP1;
    /* cgroup2 without controllers still gives a kill switch and accounting
     * of the whole tree; memory falls back to rlimits per resource. */
    if (tg__caps_hier_ok(caps, TG_CG_V2))
        return TG_CONTAIN_CGROUP2;
    return TG_CONTAIN_RLIMIT;
}
