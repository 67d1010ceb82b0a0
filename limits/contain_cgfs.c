/* cgroupfs file helpers (see contain_impl.h): the interface files of a
 * cgroup read, written and streamed, directories made and removed, the
 * processes of a cgroup counted and killed. Used by contain.c, the
 * detection (contain_detect.c), the backends and the watchdog.
 *
 * Every bound here is a fixed size: an interface file we parse is small,
 * cgroup.procs is streamed, and every wait on the kernel is bounded by the
 * caller's <wait_ms> or <rounds>.
 *
 * Interface files are opened with O_NOFOLLOW. cgroupfs holds no symbolic
 * links, so on the host this changes nothing; it means that a tree which
 * is not cgroupfs (a wrong mount, a test's fake tree) can never turn one
 * of toolgate's writes, made as root, into a write to another file: a
 * link in an interface file's place fails with ELOOP.
 */
#define _GNU_SOURCE
#include "limits/contain_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_FILE_MAX (TG_CG_PATH_MAX + 64) /* fixed internal bound: a dir plus an interface file name */
#define CG_PROCS_CHUNK 4096               /* fixed internal bound: cgroup.procs is streamed in chunks */

uint64_t tg__contain_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tg__contain_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int file_path(char *out, const char *dir, const char *file)
{
    int n = snprintf(out, CG_FILE_MAX, "%s/%s", dir, file);
    return (n < 0 || n >= CG_FILE_MAX) ? -ENAMETOOLONG : 0;
}

int tg__cg_join(char *out, const char *dir, const char *name)
{
    /* Through a temporary: callers may pass <out> == <dir>. */
    char tmp[TG_CG_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s/%s", dir, name);
    if (n < 0 || n >= TG_CG_PATH_MAX)
        return -ENAMETOOLONG;
    memcpy(out, tmp, (size_t)n + 1);
    return 0;
}

int tg__cg_write(const char *dir, const char *file, const char *val)
{
    char p[CG_FILE_MAX];
    int rc = file_path(p, dir, file);
    if (rc < 0)
        return rc;
    /* O_TRUNC is ignored by cgroupfs and makes a fake tree (tests) hold
     * exactly the last value written. No O_CREAT: a missing interface file
     * must read as ENOENT (controller or feature absent). */
    int fd = open(p, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(val);
    ssize_t w = write(fd, val, len);
    rc = w < 0 ? -errno : ((size_t)w == len ? 0 : -EIO);
    close(fd);
    return rc;
}

int tg__cg_read(const char *dir, const char *file, char *buf, size_t cap)
{
    char p[CG_FILE_MAX];
    int rc = file_path(p, dir, file);
    if (rc < 0)
        return rc;
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    return rc < 0 ? rc : (int)len;
}

static int parse_u64(const char *s, uint64_t *out)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncmp(s, "max", 3) == 0) {
        *out = UINT64_MAX;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -errno;
    *out = (uint64_t)v;
    return 0;
}

int tg__cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
    char buf[64];
    int rc = tg__cg_read(dir, file, buf, sizeof buf);
    if (rc < 0)
        return rc;
    return parse_u64(buf, out);
}

int tg__cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
    char buf[TG_CG_READ_MAX];
    int rc = tg__cg_read(dir, file, buf, sizeof buf);
    if (rc < 0)
        return rc;
    size_t klen = strlen(key);
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
            return parse_u64(line + klen + 1, out);
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

bool tg__cg_exists(const char *dir, const char *file)
{
    char p[CG_FILE_MAX];
    if (file_path(p, dir, file) < 0)
        return false;
    return access(p, F_OK) == 0;
}

int tg__cg_mkdir(const char *dir)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

int tg__cg_rmdir(const char *dir, unsigned wait_ms)
{
    uint64_t deadline = tg__contain_now_ms() + wait_ms;
    for (;;) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        /* EBUSY: tasks are still exiting (or a child cgroup is). Anything
         * else (ENOTEMPTY in a fake tree, EACCES) will not go away. */
        if (errno != EBUSY || tg__contain_now_ms() >= deadline)
            return -errno;
        tg__contain_sleep_ms(2);
    }
}

/* Call <fn> for each pid in <dir>/cgroup.procs, streamed so a fork bomb's
 * long list never needs a big buffer. Returns the number of pids or -errno. */
static long for_each_pid(const char *dir, void (*fn)(pid_t, void *), void *arg)
{
    char p[CG_FILE_MAX];
    int rc = file_path(p, dir, "cgroup.procs");
    if (rc < 0)
        return rc;
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char chunk[CG_PROCS_CHUNK];
    long count = 0;
    uint64_t acc = 0;
    bool have = false;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            count = -errno;
            break;
        }
        for (ssize_t i = 0; i <= r; i++) {
            /* r == 0 (EOF) flushes a number without a trailing newline */
            if (i < r && chunk[i] >= '0' && chunk[i] <= '9') {
                if (acc < (uint64_t)INT_MAX)
                    acc = acc * 10 + (uint64_t)(chunk[i] - '0');
                have = true;
            } else if (have && (i < r || r == 0)) {
                if (acc > 0 && acc <= (uint64_t)INT_MAX) {
                    if (fn)
                        fn((pid_t)acc, arg);
                    count++;
                }
                acc = 0;
                have = false;
            }
        }
        if (r == 0)
            break;
    }
    close(fd);
    return count;
}

long tg__cg_nprocs(const char *dir)
{
    return for_each_pid(dir, NULL, NULL);
}

static void kill_one(pid_t pid, void *arg)
{
    (void)arg;
    kill(pid, SIGKILL);
}

int tg__cg_kill_procs(const char *dir, unsigned rounds)
{
    for (unsigned i = 0; i < rounds; i++) {
        long n = for_each_pid(dir, kill_one, NULL);
        if (n == -ENOENT)
            return 0; /* no such cgroup: nothing to kill */
        if (n < 0)
            return (int)n;
        if (n == 0)
            return 0;
        /* Killed tasks leave cgroup.procs when they finish exiting. */
        tg__contain_sleep_ms(1);
    }
    return tg__cg_nprocs(dir) == 0 ? 0 : -EAGAIN;
}

int tg__cg_kill_v2(const char *dir, unsigned wait_ms)
{
    int rc = tg__cg_write(dir, "cgroup.kill", "1");
    if (rc < 0)
        return rc;
    uint64_t deadline = tg__contain_now_ms() + wait_ms;
    for (;;) {
        long n = tg__cg_nprocs(dir);
        if (n <= 0)
            return n < 0 && n != -ENOENT ? (int)n : 0;
        if (tg__contain_now_ms() >= deadline)
            return -EAGAIN;
        tg__contain_sleep_ms(2);
    }
}

unsigned tg__cg_read_ctls(const char *dir, const char *file)
{
    char buf[TG_CG_READ_MAX];
    unsigned mask = 0;
    if (tg__cg_read(dir, file, buf, sizeof buf) < 0)
        return 0;
    buf[strcspn(buf, "\n")] = '\0';
    /* cgroup.controllers lists "cpu memory"; a fake tree's subtree_control
     * holds what was written ("+cpu +memory"): accept both. */
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (*t == '+')
            t++;
        if (strcmp(t, "memory") == 0)
            mask |= TG_CG_CTL_MEMORY;
        else if (strcmp(t, "cpu") == 0)
            mask |= TG_CG_CTL_CPU;
        else if (strcmp(t, "pids") == 0)
            mask |= TG_CG_CTL_PIDS;
    }
    return mask;
}

/* "+cpu +memory +pids" for the bits of <mask>. */
static void ctl_want(unsigned mask, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", mask & TG_CG_CTL_CPU ? "+cpu " : "",
             mask & TG_CG_CTL_MEMORY ? "+memory " : "", mask & TG_CG_CTL_PIDS ? "+pids " : "");
    size_t n = strlen(buf);
    if (n > 0)
        buf[n - 1] = '\0';
}

/* Write <mask> to <dir>/cgroup.subtree_control: all at once, and when
 * that fails (one unavailable controller fails the whole write) one by
 * one, so the others are still enabled. */
void tg__cg_enable_ctls(const char *dir, unsigned mask)
{
    char want[64];
    ctl_want(mask, want, sizeof want);
    if (want[0] == '\0' || tg__cg_write(dir, "cgroup.subtree_control", want) == 0)
        return;
    for (unsigned bit = 1; bit <= TG_CG_CTL_PIDS; bit <<= 1) {
        if (mask & bit) {
            ctl_want(bit, want, sizeof want);
            tg__cg_write(dir, "cgroup.subtree_control", want);
        }
    }
}
