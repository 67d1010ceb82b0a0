/* Pre-flight memory check: see preflight.h. */
#include "limits/preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

int tg_peaks_load(const char *path, const char *agent, uint64_t *out, size_t *n)
{
    *n = 0;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL)
        return access(path, F_OK) == 0 ? -EINVAL : 0;
    json_t *list = json_object_get(json_object_get(root, "agents"), agent);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (*n < TG_PEAKS_KEEP && json_is_integer(v) && json_integer_value(v) >= 0)
            out[(*n)++] = (uint64_t)json_integer_value(v);
    }
    json_decref(root);
    return 0;
}

/* mkdir -p of the directory part of <path>, mode 0700. */
static int make_parent(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int tg_peaks_record(const char *path, const char *agent, uint64_t peak)
{
    json_t *root = json_load_file(path, 0, NULL);
    if (root == NULL || !json_is_object(root)) {
        json_decref(root);
        root = json_object();
    }
    json_t *agents = json_object_get(root, "agents");
    if (!json_is_object(agents)) {
        agents = json_object();
        json_object_set_new(root, "agents", agents);
    }
    json_t *list = json_object_get(agents, agent);
    if (!json_is_array(list)) {
        list = json_array();
        json_object_set_new(agents, agent, list);
    }
    json_array_append_new(list, json_integer((json_int_t)peak));
    while (json_array_size(list) > TG_PEAKS_KEEP)
        json_array_remove(list, 0);

    int rc = make_parent(path);
    char tmp[4200];
    if (rc == 0 && snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        rc = -ENAMETOOLONG;
    if (rc == 0) {
        /* Write then rename: a reader sees the old file or the new one. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            rc = -errno;
        } else {
            if (json_dumpfd(root, fd, JSON_COMPACT) < 0 || fsync(fd) < 0)
                rc = -EIO;
            close(fd);
            if (rc == 0 && rename(tmp, path) < 0)
                rc = -errno;
            if (rc < 0)
                (void)unlink(tmp);
        }
    }
    json_decref(root);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t tg_peaks_p95(const uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    uint64_t s[TG_PEAKS_KEEP];
    if (n > TG_PEAKS_KEEP)
        n = TG_PEAKS_KEEP;
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u64);
    /* Nearest rank: the smallest value with at least 95% at or below it. */
    size_t rank = (95 * n + 99) / 100;
    return s[rank - 1];
}

int tg_mem_available(const char *meminfo, uint64_t *bytes)
{
    FILE *f = fopen(meminfo != NULL ? meminfo : "/proc/meminfo", "r");
    if (f == NULL)
        return -errno;
    char line[256];
    int rc = -ENOENT;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *bytes = (uint64_t)kb * 1024;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

int tg_peaks_default_path(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(buf, cap, "%s/toolgate/peaks.json", xdg);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(buf, cap, "%s/.local/state/toolgate/peaks.json", home);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}
