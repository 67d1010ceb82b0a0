/* Resource hog and self-inspection fixture for the containment tests.
 *
 *   tg_hog mem MIB [HOLD_MS]   allocate and touch MIB MiB in 1 MiB chunks;
 *                              "allocated N" and exit 0, or "alloc_failed_at N"
 *                              and exit 3 when malloc fails
 *   tg_hog fork N [HOLD_MS]    fork N children that sleep HOLD_MS (default
 *                              30 s); "forked K", exit 0 when K == N, else 4
 *   tg_hog spin MS             burn CPU for MS ms of wall time; "spun"
 *   tg_hog sleep MS            sleep, then exit 0
 *   tg_hog status              one "key=value" line per fact the shim is
 *                              meant to set (no_new_privs, fds, network,
 *                              uid/gid, death signal, session, rlimits,
 *                              cgroups, working directory and its fs)
 *   tg_hog fill DIR TOTAL FILE [HOLD_MS]
 *                              write TOTAL bytes into DIR as files
 *                              "fill-<k>" of at most FILE bytes each, in
 *                              64 KiB writes (SIGXFSZ ignored, so a file
 *                              past RLIMIT_FSIZE reads as EFBIG); then
 *                              "wrote N" (exit 0), or "<errno name> at N"
 *                              (exit 5) with N the bytes written; then hold
 *   tg_hog bgfill DELAY_MS DIR TOTAL FILE REPORT -- CMD ARGS...
 *                              fork a child that waits DELAY_MS, runs fill
 *                              with its result line appended to REPORT,
 *                              and exits; exec CMD in the parent. Puts a
 *                              disk writer beside an MCP agent in one
 *                              instance (same namespaces, same cwd).
 * Output goes to stdout and is flushed per line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024u * 1024u)

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int do_mem(long mib, long hold)
{
    for (long i = 0; i < mib; i++) {
        char *p = malloc(MIB);
        if (!p) {
            printf("alloc_failed_at %ld\n", i);
            fflush(stdout);
            return 3;
        }
        memset(p, 0x5a, MIB); /* touch every page: resident, not just reserved */
    }
    printf("allocated %ld\n", mib);
    fflush(stdout);
    sleep_ms(hold);
    return 0;
}

static int do_fork(long n, long hold)
{
    long ok = 0;
    for (long i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0)
            break;
        if (p == 0) {
            sleep_ms(hold);
            _exit(0);
        }
        ok++;
    }
    printf("forked %ld\n", ok);
    fflush(stdout);
    /* _exit: at pids.max a sanitizer's exit-time leak check cannot start
     * its thread and would turn the result into its own failure. */
    _exit(ok == n ? 0 : 4);
}

static int do_spin(long ms)
{
    long end = now_ms() + ms;
    volatile unsigned long x = 0;
    while (now_ms() < end) {
        for (int i = 0; i < 100000; i++)
            x += (unsigned long)i;
    }
    printf("spun%s\n", x == 1 ? " " : ""); /* reads x: the loop is not dead code */
    fflush(stdout);
    return 0;
}

#define FILL_WRITE (64u * 1024) /* bytes per write(2) */

/* The fill's result line into <line>; exit status 0 or 5. */
static int fill(const char *dir, long long total, long long per_file, char *line, size_t cap)
{
    static char buf[FILL_WRITE];
    long long done = 0;
    int k = 0;
    memset(buf, 0x5a, sizeof buf);
    signal(SIGXFSZ, SIG_IGN);
    if (per_file <= 0)
        per_file = total;
    while (done < total) {
        char path[4096];
        snprintf(path, sizeof path, "%s/fill-%d", dir, k++);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(line, cap, "%s at %lld", strerrorname_np(errno), done);
            return 5;
        }
        long long in_file = 0;
        while (in_file < per_file && done < total) {
            long long want = per_file - in_file;
            if (want > total - done)
                want = total - done;
            if (want > (long long)sizeof buf)
                want = sizeof buf;
            ssize_t w = write(fd, buf, (size_t)want);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                snprintf(line, cap, "%s at %lld", w < 0 ? strerrorname_np(errno) : "ENOSPC", done);
                close(fd);
                return 5;
            }
            in_file += w;
            done += w;
        }
        /* tmpfs and most filesystems report ENOSPC at write, but some
         * only at close (delayed allocation). */
        if (fsync(fd) < 0 || close(fd) < 0) {
            snprintf(line, cap, "%s at %lld", strerrorname_np(errno), done);
            return 5;
        }
    }
    snprintf(line, cap, "wrote %lld", done);
    return 0;
}

static int do_fill(const char *dir, long long total, long long per_file, long hold)
{
    char line[128];
    int rc = fill(dir, total, per_file, line, sizeof line);
    printf("%s\n", line);
    fflush(stdout);
    sleep_ms(hold);
    return rc;
}

static int do_bgfill(int argc, char **argv)
{
    /* bgfill DELAY DIR TOTAL FILE REPORT -- CMD ... */
    if (argc < 9 || strcmp(argv[7], "--") != 0) {
        fprintf(stderr, "usage: tg_hog bgfill DELAY_MS DIR TOTAL FILE REPORT -- CMD ARGS...\n");
        return 2;
    }
    pid_t p = fork();
    if (p < 0)
        return 4;
    if (p == 0) {
        char line[128];
        sleep_ms(atol(argv[2]));
        int rc = fill(argv[3], atoll(argv[4]), atoll(argv[5]), line, sizeof line);
        int fd = open(argv[6], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            size_t n = strlen(line);
            line[n++] = '\n';
            ssize_t w = write(fd, line, n);
            (void)w;
            close(fd);
        }
        _exit(rc);
    }
    execvp(argv[8], argv + 8);
    perror("tg_hog bgfill: exec");
    return 127;
}

static void print_rlimit(const char *name, int res)
{
    struct rlimit rl;
    getrlimit(res, &rl);
    if (rl.rlim_cur == RLIM_INFINITY)
        printf("rlimit_%s=infinity\n", name);
    else
        printf("rlimit_%s=%llu\n", name, (unsigned long long)rl.rlim_cur);
}

static int do_status(void)
{
    char line[1024];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "NoNewPrivs:", 11) == 0)
            printf("no_new_privs=%d\n", atoi(line + 11));
    }
    if (f)
        fclose(f);

    DIR *d = opendir("/proc/self/fd");
    printf("fds=");
    if (d) {
        int self = dirfd(d);
        struct dirent *e;
        int fds[1024], n = 0;
        while ((e = readdir(d)) != NULL && n < 1024) {
            char *end;
            long fd = strtol(e->d_name, &end, 10);
            if (*end == '\0' && e->d_name[0] && fd != self)
                fds[n++] = (int)fd;
        }
        closedir(d);
        for (int i = 0; i < n; i++) /* insertion sort: readdir order is not numeric */
            for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
                int t = fds[j];
                fds[j] = fds[j - 1];
                fds[j - 1] = t;
            }
        for (int i = 0; i < n; i++)
            printf("%s%d", i ? "," : "", fds[i]);
    }
    printf("\n");

    /* /proc/net/dev lists the interfaces of the reader's network namespace. */
    f = fopen("/proc/net/dev", "r");
    printf("ifaces=");
    int k = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *name = line;
        while (*name == ' ')
            name++;
        printf("%s%s", k++ ? "," : "", name);
    }
    printf("\n");
    if (f)
        fclose(f);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
    printf("lo_up=%d\n", up);
    if (s >= 0)
        close(s);

    printf("uid=%lu\ngid=%lu\ngroups=%d\n", (unsigned long)getuid(), (unsigned long)getgid(),
           getgroups(0, NULL));
    int sig = 0;
    prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0);
    printf("pdeathsig=%d\n", sig);
    printf("session_leader=%d\n", getsid(0) == getpid());
    print_rlimit("data", RLIMIT_DATA);
    print_rlimit("nofile", RLIMIT_NOFILE);
    print_rlimit("fsize", RLIMIT_FSIZE);
    print_rlimit("nproc", RLIMIT_NPROC);
    print_rlimit("as", RLIMIT_AS);

    char cwd[4096];
    struct statfs fs;
    if (getcwd(cwd, sizeof cwd))
        printf("cwd=%s\n", cwd);
    if (statfs(".", &fs) == 0)
        printf("cwd_tmpfs=%d\ncwd_fs_bytes=%llu\n", fs.f_type == 0x01021994 /* TMPFS_MAGIC */,
               (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_bsize);

    f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        printf("cgroup=%s\n", line);
    }
    if (f)
        fclose(f);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tg_hog mem|fork|spin|sleep|status|fill|bgfill [N] [HOLD_MS]\n");
        return 2;
    }
    if (strcmp(argv[1], "fill") == 0) {
        if (argc < 5) {
            fprintf(stderr, "usage: tg_hog fill DIR TOTAL FILE [HOLD_MS]\n");
            return 2;
        }
        return do_fill(argv[2], atoll(argv[3]), atoll(argv[4]), argc > 5 ? atol(argv[5]) : 0);
    }
    if (strcmp(argv[1], "bgfill") == 0)
        return do_bgfill(argc, argv);
    long n = argc > 2 ? atol(argv[2]) : 0;
    long hold = argc > 3 ? atol(argv[3]) : 0;
    if (strcmp(argv[1], "mem") == 0)
        return do_mem(n, hold);
    if (strcmp(argv[1], "fork") == 0)
        return do_fork(n, argc > 3 ? hold : 30000);
    if (strcmp(argv[1], "spin") == 0)
        return do_spin(n);
    if (strcmp(argv[1], "sleep") == 0) {
        sleep_ms(n);
        return 0;
    }
    if (strcmp(argv[1], "status") == 0)
        return do_status();
    fprintf(stderr, "tg_hog: unknown mode %s\n", argv[1]);
    return 2;
}
