/* Test harness for integration tests that drive the real toolgate binary
 * (TG_BIN) against the fixture agents (TG_AGENTS_DIR). Header-only: every
 * helper is static inline, so a test file uses what it needs.
 *
 * Processes are spawned in their own process group with stdin and stdout
 * on pipes and stderr on a file (a file never fills, so a child can never
 * block on its diagnostics while a test is busy elsewhere). Every process
 * and temp dir made here is registered and tgh_cleanup() (call it from the
 * criterion .fini) closes their stdin, gives them 1.5 s to exit, then kills
 * the process groups and any fixture agent named in a
 * registered dir's fixture log, and removes the dirs, so a failed
 * assertion leaves nothing running. TG_KEEP_TMP=1 keeps the dirs.
 *
 * Convention: functions return 0 or a negative errno (-ETIMEDOUT when the
 * deadline passed), or a pointer that is NULL on failure; the fixtures
 * that set up a run for a test (tgh_free_port, tgh_dead_pid, tgh_put,
 * tgh_tmp_*, tgh_serve_start, tgh_serve_stop, tgh_fail_with_stderr) fail
 * the test themselves. The callers of each dialect are tests/mcp_client.h
 * and tests/os_client.h; the exec shim's runner is tests/tg_shim.h.
 */
#ifndef TG_TESTS_HARNESS_H
#define TG_TESTS_HARNESS_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

extern char **environ;

#define TGH_MAX_PROCS 16
#define TGH_MAX_DIRS 8
#define TGH_PATH 512
#define TGH_READ_CHUNK (64 * 1024)

typedef struct tgh_proc {
    pid_t pid;       /* also the process group id; 0 when not running */
    int in_fd;       /* our end of the child's stdin; -1 once closed */
    int out_fd;      /* our end of the child's stdout */
    char *rbuf;      /* stdout bytes read but not yet returned as lines */
    size_t rlen, rcap;
    bool out_eof;
    bool reaped;
    int status;      /* wait status once reaped */
} tgh_proc_t;

static tgh_proc_t *tgh_procs[TGH_MAX_PROCS];
static char tgh_dirs[TGH_MAX_DIRS][TGH_PATH];

static inline uint64_t tgh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A loopback TCP port nobody listens on now (bound, read, released). */
static inline int tgh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static inline void tgh_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Milliseconds left until <deadline> (0 when past), as a poll timeout. */
static inline int tgh_left(uint64_t deadline)
{
    uint64_t now = tgh_now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* The full path of the executable <name> on PATH (then /usr/sbin, which a
 * non-root PATH may lack), in a static buffer; NULL when there is none. */
static inline const char *tgh_which(const char *name)
{
    static char found[TGH_PATH];
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        snprintf(found, sizeof found, "%.*s/%s", (int)n, path, name);
        if (access(found, X_OK) == 0)
            return found;
        path += n + (path[n] == ':');
    }
    snprintf(found, sizeof found, "/usr/sbin/%s", name);
    return access(found, X_OK) == 0 ? found : NULL;
}

/* ---- files and dirs ---------------------------------------------------- */

/* A fresh temp dir in <out> (registered for cleanup). */
static inline int tgh_mkdtemp(char *out, size_t cap)
{
    const char *base = getenv("TMPDIR");
    int n = snprintf(out, cap, "%s/tg-it-XXXXXX", base && *base ? base : "/tmp");
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    if (!mkdtemp(out))
        return -errno;
    for (size_t i = 0; i < TGH_MAX_DIRS; i++) {
        if (tgh_dirs[i][0] == '\0') {
            snprintf(tgh_dirs[i], TGH_PATH, "%s", out);
            break;
        }
    }
    return 0;
}

/* Remove <dir> and everything below it (symlinks are removed, never
 * followed). */
static inline void tgh_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char path[TGH_PATH * 2];
            if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path)
                continue;
            struct stat st;
            if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
                tgh_rmtree(path);
            else
                unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The whole file, NUL-terminated (length in <*len> when non-NULL); NULL
 * when it cannot be read. */
static inline char *tgh_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

static inline int tgh_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* Write <text> to <dir>/<name>; fails the test when it cannot. */
static inline void tgh_put(const char *dir, const char *name, const char *text)
{
    char path[TGH_PATH * 2];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert(n > 0 && (size_t)n < sizeof path, "%s/%s: path too long", dir, name);
    cr_assert_eq(tgh_write_file(path, text), 0, "cannot write %s", path);
}

/* The scratch dir of a suite whose .init is tgh_tmp_init (and .fini
 * tgh_cleanup, which removes it). */
static char tgh_tmp[TGH_PATH];

/* A criterion .init: a fresh scratch dir in tgh_tmp. */
static inline void tgh_tmp_init(void)
{
    int rc = tgh_mkdtemp(tgh_tmp, sizeof tgh_tmp);
    cr_assert_eq(rc, 0, "cannot make a temp dir: %s", strerror(-rc));
}

/* <tgh_tmp>/<name> in <path>; fails the test when it does not fit. */
static inline const char *tgh_tmp_path(char *path, size_t cap, const char *name)
{
    int n = snprintf(path, cap, "%s/%s", tgh_tmp, name);
    cr_assert(n > 0 && (size_t)n < cap, "%s/%s does not fit in %zu bytes", tgh_tmp, name, cap);
    return path;
}

/* Write <text> to <tgh_tmp>/<name>, its path in <path>; fails the test
 * when it cannot. */
static inline void tgh_tmp_put(const char *name, const char *text, char *path, size_t cap)
{
    tgh_tmp_path(path, cap, name);
    cr_assert_eq(tgh_write_file(path, text), 0, "cannot write %s", path);
}

/* Where the message of toolgate's own log line <line> starts, the text
 * format "TIME LEVEL COMPONENT: MESSAGE" (router/gateway/log.h) taken apart, or
 * NULL when <line> is not one: an agent's relayed line (component
 * "agent=ID") or anything else. <level> (may be NULL) gets the level word
 * ("debug", "info", "warn", "error"), <comp> (may be NULL) the component. */
static inline const char *tgh_log_own(const char *line, char level[8], char comp[16])
{
    /* 2026-11-26T17:20:01.123Z: 24 bytes, then one space */
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == 'd' ? (line[i] < '0' || line[i] > '9') : line[i] != shape[i])
            return NULL;
    }
    const char *p = line + sizeof shape - 1, *lv = p;
    while (*p >= 'a' && *p <= 'z')
        p++;
    size_t lvlen = (size_t)(p - lv);
    if (lvlen < 4 || lvlen > 5 || (lvlen == 4 && *p++ != ' ') || *p++ != ' ')
        return NULL;
    const char *c = p;
    while (*p >= 'a' && *p <= 'z')
        p++;
    size_t clen = (size_t)(p - c);
    if (clen == 0 || clen > 15 || p[0] != ':' || p[1] != ' ')
        return NULL;
    if (level) {
        memcpy(level, lv, lvlen);
        level[lvlen] = '\0';
    }
    if (comp) {
        memcpy(comp, c, clen);
        comp[clen] = '\0';
    }
    return p + 2;
}

/* Whether line <line> starts with <prefix>, or is toolgate's own log line
 * whose message does (so "SIGHUP: config reloaded" finds
 * "2026-... info  serve: SIGHUP: config reloaded"). */
static inline bool tgh_line_starts(const char *line, const char *prefix, size_t plen)
{
    const char *m;
    return strncmp(line, prefix, plen) == 0 ||
           ((m = tgh_log_own(line, NULL, NULL)) != NULL && strncmp(m, prefix, plen) == 0);
}

/* Number of lines of <path> starting with <prefix>, or whose message
 * does when they are toolgate's log lines (0 when unreadable). */
static inline int tgh_log_count(const char *path, const char *prefix)
{
    char *text = tgh_read_file(path, NULL);
    if (!text)
        return 0;
    int n = 0;
    size_t plen = strlen(prefix);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (tgh_line_starts(line, prefix, plen))
            n++;
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return n;
}

/* Lines of <text> that are toolgate's own log lines (tgh_log_own) holding
 * <needle> in their message (NULL: any). */
static inline int tgh_own_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *m = tgh_log_own(line, NULL, NULL);
        if (m != NULL && m < line + len) {
            if (needle == NULL)
                n++;
            else {
                size_t nlen = strlen(needle);
                bool hit = false;
                for (const char *q = m; q + nlen <= line + len && !hit; q++)
                    hit = strncmp(q, needle, nlen) == 0;
                n += hit;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

/* Poll <count>(<path>, <what>) every 10 ms until it reaches <min> or
 * <timeout_ms> pass; returns the last count. */
static inline int tgh__wait_count(int (*count)(const char *, const char *), const char *path,
                                  const char *what, int min, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    int n;
    while ((n = count(path, what)) < min && tgh_now_ms() < deadline)
        tgh_sleep_ms(10);
    return n;
}

/* Wait until <path> has at least <min> lines starting with <prefix>.
 * Returns the count reached (may be below <min> on timeout). */
static inline int tgh_log_wait(const char *path, const char *prefix, int min, int timeout_ms)
{
    return tgh__wait_count(tgh_log_count, path, prefix, min, timeout_ms);
}

/* The rest of the <nth> (0-based) line of <path> starting with <prefix>,
 * copied into <out> without its newline. 0 or -ENOENT. */
static inline int tgh_log_field(const char *path, const char *prefix, int nth, char *out,
                                size_t cap)
{
    char *text = tgh_read_file(path, NULL);
    if (!text)
        return -ENOENT;
    int rc = -ENOENT;
    size_t plen = strlen(prefix);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (tgh_line_starts(line, prefix, plen) && nth-- == 0) {
            const char *m = strncmp(line, prefix, plen) == 0 ? line : tgh_log_own(line, NULL, NULL);
            snprintf(out, cap, "%s", m + plen);
            rc = 0;
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return rc;
}

/* A numeric field ("VmHWM", "VmRSS") of /proc/<pid>/status in KiB, or a
 * negative errno. */
static inline long tgh_proc_status_kb(pid_t pid, const char *field)
{
    char path[64], prefix[64], rest[128];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    snprintf(prefix, sizeof prefix, "%s:", field);
    if (tgh_log_field(path, prefix, 0, rest, sizeof rest) != 0)
        return -ENOENT;
    return strtol(rest, NULL, 10);
}

/* True while <pid> exists and is not a zombie (a zombie has exited: only
 * its parent's bookkeeping is left). */
static inline bool tgh_pid_alive(pid_t pid)
{
    if (pid <= 0 || kill(pid, 0) != 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    char *text = tgh_read_file(path, NULL);
    if (!text)
        return false;
    /* The state follows the ")" that closes the command name. */
    char *rp = strrchr(text, ')');
    bool alive = !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
    free(text);
    return alive;
}

/* Wait up to <timeout_ms> for <pid> to be gone; true when it is. */
static inline bool tgh_pid_wait_gone(pid_t pid, int timeout_ms)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    while (tgh_pid_alive(pid)) {
        if (tgh_now_ms() >= deadline)
            return false;
        tgh_sleep_ms(10);
    }
    return true;
}

/* A pid that was just in use and is free now: a child forked, exited and
 * reaped. */
static inline pid_t tgh_dead_pid(void)
{
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

/* True when /proc/<pid>/cmdline names <needle>: guards the cleanup kill
 * against a pid that was reused by an unrelated process. */
static inline bool tgh_pid_is(pid_t pid, const char *needle)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    size_t len = 0;
    char *text = tgh_read_file(path, &len);
    if (!text)
        return false;
    bool found = false;
    for (size_t i = 0; i < len && !found; i += strlen(text + i) + 1)
        found = strstr(text + i, needle) != NULL;
    free(text);
    return found;
}

/* Pids from the "start <pid>" lines of a fixture log, up to <max>. */
static inline int tgh_log_pids(const char *path, pid_t *pids, int max)
{
    int n = 0;
    char field[64];
    while (n < max && tgh_log_field(path, "start ", n, field, sizeof field) == 0)
        pids[n++] = (pid_t)strtol(field, NULL, 10);
    return n;
}

/* ---- processes --------------------------------------------------------- */

/* Whether <p> lies on this thread's stack (within 8 MiB of a local). */
static inline bool tgh__on_stack(const void *p)
{
    char here;
    uintptr_t a = (uintptr_t)p, h = (uintptr_t)&here;
    return (a > h ? a - h : h - a) < ((uintptr_t)8 << 20);
}

/* The suite's fini (tgh_cleanup) kills, reaps and frees every spawned
 * process after the test body has returned, so a spawned process must
 * outlive it: static (each criterion test runs in a process of its own)
 * or on the heap, never a local of the test. */
static inline void tgh__register(tgh_proc_t *p)
{
    cr_assert_not(tgh__on_stack(p), "a spawned process is held in a local: the suite's fini "
                                    "would use it after the test returned (make it static)");
    for (size_t i = 0; i < TGH_MAX_PROCS; i++) {
        if (tgh_procs[i] == NULL || tgh_procs[i] == p) {
            tgh_procs[i] = p;
            return;
        }
    }
}

/* Spawn argv[0] (a path) with <argv>, the current environment plus
 * <env_extra> ("K=V" entries, NULL-terminated, may be NULL; they replace
 * same-named variables), stdin/stdout on pipes and stderr appended to
 * <stderr_path> (NULL: /dev/null). The child leads its own process group
 * and gets SIGKILL if the test process dies. */
static inline int tgh_spawn(tgh_proc_t *p, char *const argv[], char *const env_extra[],
                            const char *stderr_path)
{
    memset(p, 0, sizeof *p);
    p->in_fd = p->out_fd = -1;
    signal(SIGPIPE, SIG_IGN);

    size_t nenv = 0, nextra = 0;
    while (environ[nenv])
        nenv++;
    while (env_extra && env_extra[nextra])
        nextra++;
    char **envp = calloc(nenv + nextra + 1, sizeof *envp);
    if (!envp)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nlen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < nextra && !replaced; j++)
            replaced = strncmp(env_extra[j], environ[i], nlen) == 0 && env_extra[j][nlen] == '=';
        if (!replaced)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < nextra; j++)
        envp[k++] = env_extra[j];
    envp[k] = NULL;

    int in[2], out[2];
    if (pipe(in) != 0) {
        free(envp);
        return -errno;
    }
    if (pipe(out) != 0) {
        int e = errno;
        close(in[0]), close(in[1]);
        free(envp);
        return -e;
    }
    int errfd = open(stderr_path ? stderr_path : "/dev/null",
                     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (errfd < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        free(envp);
        return -e;
    }
    /* Our ends must not leak into other children spawned later (a
     * leaked write end would hide this child's EOF). */
    for (int i = 0; i < 2; i++) {
        fcntl(in[i], F_SETFD, FD_CLOEXEC);
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(errfd);
        free(envp);
        return -e;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(errfd, 2) < 0)
            _exit(127);
        /* Leave the child only its stdio: a stray inherited pipe end
         * would keep another process's EOF from ever arriving. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    close(errfd);
    free(envp);
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
    p->pid = pid;
    p->in_fd = in[1];
    p->out_fd = out[0];
    tgh__register(p);
    return 0;
}

/* Write all of <buf> to the child's stdin within <timeout_ms>. */
static inline int tgh_send(tgh_proc_t *p, const void *buf, size_t len, int timeout_ms)
{
    if (p->in_fd < 0)
        return -EBADF;
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    const char *c = buf;
    while (len > 0) {
        ssize_t w = write(p->in_fd, c, len);
        if (w >= 0) {
            c += w;
            len -= (size_t)w;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int left = tgh_left(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = p->in_fd, .events = POLLOUT};
        poll(&pfd, 1, left);
    }
    return 0;
}

/* printf-style: send one formatted line (the newline is added). */
__attribute__((format(printf, 2, 3))) static inline int tgh_sendf(tgh_proc_t *p,
                                                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    char *line = malloc((size_t)n + 2);
    if (!line)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);
    line[n] = '\n';
    int rc = tgh_send(p, line, (size_t)n + 1, 5000);
    free(line);
    return rc;
}

static inline void tgh_close_stdin(tgh_proc_t *p)
{
    if (p->in_fd >= 0)
        close(p->in_fd);
    p->in_fd = -1;
}

/* Wait until <deadline> for more of the child's stdout and append it to
 * p->rbuf. 1 when bytes came, 0 at EOF (p->out_eof is set), -ETIMEDOUT,
 * or a negative errno. */
static inline int tgh_read_more(tgh_proc_t *p, uint64_t deadline)
{
    for (;;) {
        if (p->out_eof || p->out_fd < 0)
            return 0;
        struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, tgh_left(deadline));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return -ETIMEDOUT;
        if (p->rcap - p->rlen < TGH_READ_CHUNK) {
            size_t ncap = p->rcap ? p->rcap * 2 : 4 * TGH_READ_CHUNK;
            char *nb = realloc(p->rbuf, ncap);
            if (!nb)
                return -ENOMEM;
            p->rbuf = nb;
            p->rcap = ncap;
        }
        ssize_t r = read(p->out_fd, p->rbuf + p->rlen, p->rcap - p->rlen);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            p->out_eof = true;
            return 0;
        }
        p->rlen += (size_t)r;
        return 1;
    }
}

/* Next line of the child's stdout (without '\n', NUL-terminated, caller
 * frees), waiting up to <timeout_ms>. NULL on timeout or EOF (see
 * p->out_eof). A final unterminated fragment at EOF is returned as a line. */
static inline char *tgh_read_line(tgh_proc_t *p, int timeout_ms, size_t *len_out)
{
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    size_t scanned = 0;
    for (;;) {
        char *nl = p->rlen > scanned ? memchr(p->rbuf + scanned, '\n', p->rlen - scanned) : NULL;
        if (nl || (p->out_eof && p->rlen > 0)) {
            size_t n = nl ? (size_t)(nl - p->rbuf) : p->rlen;
            char *line = malloc(n + 1);
            if (!line)
                return NULL;
            memcpy(line, p->rbuf, n);
            line[n] = '\0';
            size_t used = nl ? n + 1 : n;
            memmove(p->rbuf, p->rbuf + used, p->rlen - used);
            p->rlen -= used;
            if (len_out)
                *len_out = n;
            return line;
        }
        scanned = p->rlen;
        if (p->out_eof || p->out_fd < 0 || tgh_read_more(p, deadline) < 0)
            return NULL;
    }
}

/* Next stdout line parsed as JSON (any value). NULL on timeout, EOF or a
 * line that is not JSON (then *bad is set when <bad> is non-NULL). */
static inline json_t *tgh_read_json(tgh_proc_t *p, int timeout_ms, bool *bad)
{
    size_t n = 0;
    char *line = tgh_read_line(p, timeout_ms, &n);
    if (bad)
        *bad = false;
    if (!line)
        return NULL;
    json_error_t jerr;
    json_t *v = json_loadb(line, n, JSON_DECODE_ANY, &jerr);
    if (!v) {
        fprintf(stderr, "tgh: not JSON from child: %.200s\n", line);
        if (bad)
            *bad = true;
    }
    free(line);
    return v;
}

/* A stream socket connected to the Unix socket <path>: its descriptor, or
 * -errno. */
static inline int tgh_unix_dial(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Connect <c> as a caller to the Unix socket <path> (toolgate serve):
 * line I/O as with a child, on one socket. 0, or -errno (then <c> holds
 * no descriptor). */
static inline int tgh_unix_connect(tgh_proc_t *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->in_fd = c->out_fd = -1;
    int fd = tgh_unix_dial(path);
    if (fd < 0)
        return fd;
    c->in_fd = fd;
    c->out_fd = dup(fd);
    return 0;
}

/* A TCP connection to 127.0.0.1:<port>, its reads timing out after 5 s:
 * its descriptor, or -errno. */
static inline int tgh_tcp_dial(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* All <fd> sends until EOF (or an error, a reset, the receive timeout),
 * NUL-terminated, its length in <*len>; the caller frees. NULL when out
 * of memory. */
static inline char *tgh_read_all(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (n + 4096 > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Close a connection made by tgh_unix_connect and forget what it read. */
static inline void tgh_conn_close(tgh_proc_t *c)
{
    if (c->in_fd >= 0)
        close(c->in_fd);
    if (c->out_fd >= 0)
        close(c->out_fd);
    free(c->rbuf);
    memset(c, 0, sizeof *c);
    c->in_fd = c->out_fd = -1;
}

/* Reap the child if it has exited, waiting up to <timeout_ms>. 0 once
 * reaped (status in p->status), -ETIMEDOUT while it still runs. */
static inline int tgh_wait(tgh_proc_t *p, int timeout_ms)
{
    if (p->reaped)
        return 0;
    if (p->pid <= 0)
        return -ECHILD;
    uint64_t deadline = tgh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            p->reaped = true;
            p->status = st;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return -errno;
        if (tgh_now_ms() >= deadline)
            return -ETIMEDOUT;
        tgh_sleep_ms(5);
    }
}

/* Kill the child's whole process group and reap it; release the pipes. */
static inline void tgh_kill(tgh_proc_t *p)
{
    if (p->pid > 0 && !p->reaped) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
        tgh_wait(p, 5000);
    } else if (p->pid > 0) {
        /* The leader is gone; members of its group may not be. */
        kill(-p->pid, SIGKILL);
    }
    tgh_close_stdin(p);
    if (p->out_fd >= 0)
        close(p->out_fd);
    p->out_fd = -1;
    free(p->rbuf);
    p->rbuf = NULL;
    p->rlen = p->rcap = 0;
}

/* Exit code once reaped normally, or -1 (signal or not reaped). */
static inline int tgh_exit_code(const tgh_proc_t *p)
{
    return p->reaped && WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

/* ---- toolgate wrap sessions -------------------------------------------- */

typedef struct tgh_wrap {
    char dir[TGH_PATH];
    char audit[TGH_PATH + 32];   /* <dir>/audit.jsonl */
    char log[TGH_PATH + 32];     /* <dir>/fixture.log */
    char err[TGH_PATH + 32];     /* <dir>/stderr.txt: toolgate's stderr */
    uint64_t started_ms;
    tgh_proc_t tg;
} tgh_wrap_t;

#define TGH_MAX_ARGS 64

/* A fresh temp dir for one session and the paths in it. */
static inline int tgh_wrap_prepare(tgh_wrap_t *w)
{
    memset(w, 0, sizeof *w);
    int rc = tgh_mkdtemp(w->dir, sizeof w->dir);
    if (rc != 0)
        return rc;
    snprintf(w->audit, sizeof w->audit, "%s/audit.jsonl", w->dir);
    snprintf(w->log, sizeof w->log, "%s/fixture.log", w->dir);
    snprintf(w->err, sizeof w->err, "%s/stderr.txt", w->dir);
    return 0;
}

/* Run `toolgate wrap --audit <dir>/audit.jsonl <tg_args>... -- <agent_path>
 * <agent_args>...` in a prepared session, with <env> added to the
 * environment. The arrays are NULL-terminated and may be NULL. */
static inline int tgh_wrap_exec(tgh_wrap_t *w, const char *const *tg_args,
                                const char *agent_path, const char *const *agent_args,
                                const char *const *env)
{
    const char *argv[TGH_MAX_ARGS];
    size_t n = 0;
    argv[n++] = TG_BIN;
    argv[n++] = "wrap";
    argv[n++] = "--audit";
    argv[n++] = w->audit;
    for (size_t i = 0; tg_args && tg_args[i] && n < TGH_MAX_ARGS / 2; i++)
        argv[n++] = tg_args[i];
    argv[n++] = "--";
    argv[n++] = agent_path;
    for (size_t i = 0; agent_args && agent_args[i] && n < TGH_MAX_ARGS - 1; i++)
        argv[n++] = agent_args[i];
    argv[n] = NULL;
    if (access(TG_BIN, X_OK) != 0)
        return -errno;
    w->started_ms = tgh_now_ms();
    return tgh_spawn(&w->tg, (char *const *)argv, (char *const *)env, w->err);
}

/* Prepare a session and wrap <TG_AGENTS_DIR>/tg_fixture_agent with
 * `--log <dir>/fixture.log <agent_args>...`. */
static inline int tgh_wrap_start(tgh_wrap_t *w, const char *const *tg_args,
                                 const char *const *agent_args, const char *const *env)
{
    int rc = tgh_wrap_prepare(w);
    if (rc != 0)
        return rc;
    const char *args[TGH_MAX_ARGS / 2];
    size_t n = 0;
    args[n++] = "--log";
    args[n++] = w->log;
    for (size_t i = 0; agent_args && agent_args[i] && n < TGH_MAX_ARGS / 2 - 1; i++)
        args[n++] = agent_args[i];
    args[n] = NULL;
    return tgh_wrap_exec(w, tg_args, TG_AGENTS_DIR "/tg_fixture_agent", args, env);
}

/* ---- toolgate check ---------------------------------------------------- */

/* Run `toolgate check --config <a file holding json>` (the file in a temp
 * dir of this test); its exit code (-1 when it did not exit), its stdout
 * and stderr together in <*out> (caller frees; "" when there was none). */
static inline int tgh_check_config(const char *json, char **out)
{
    static char dir[TGH_PATH];
    char cfg[TGH_PATH + 32], txt[TGH_PATH + 32], cmd[3 * TGH_PATH + 128];
    if (dir[0] == '\0')
        cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(txt, sizeof txt, "%s/check.txt", dir);
    cr_assert_eq(tgh_write_file(cfg, json), 0, "cannot write %s", cfg);
    snprintf(cmd, sizeof cmd, "'%s' check --config '%s' > '%s' 2>&1", TG_BIN, cfg, txt);
    int st = system(cmd);
    *out = tgh_read_file(txt, NULL);
    if (*out == NULL)
        *out = strdup("");
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- toolgate serve ---------------------------------------------------- */

/* One `toolgate serve` run: a temp dir with the config, the socket of the
 * first listener, the fixture agent's log, the audit trail and toolgate's
 * stderr. A test may name other files in <dir> for what it adds. */
typedef struct tgh_serve {
    char dir[TGH_PATH];
    char cfg[TGH_PATH + 32];   /* <dir>/serve.json */
    char sock[TGH_PATH + 32];  /* <dir>/<name>.sock */
    char log[TGH_PATH + 32];   /* <dir>/fixture.log */
    char audit[TGH_PATH + 32]; /* <dir>/audit.jsonl */
    char err[TGH_PATH + 32];   /* <dir>/stderr.txt: toolgate's stderr */
    tgh_proc_t tg;
} tgh_serve_t;

/* A fresh temp dir for one run and the paths in it; the socket is
 * <dir>/<sock_name>.sock. */
static inline int tgh_serve_prepare(tgh_serve_t *s, const char *sock_name)
{
    memset(s, 0, sizeof *s);
    int rc = tgh_mkdtemp(s->dir, sizeof s->dir);
    if (rc != 0)
        return rc;
    snprintf(s->cfg, sizeof s->cfg, "%s/serve.json", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/%s.sock", s->dir, sock_name);
    snprintf(s->log, sizeof s->log, "%s/fixture.log", s->dir);
    snprintf(s->audit, sizeof s->audit, "%s/audit.jsonl", s->dir);
    snprintf(s->err, sizeof s->err, "%s/stderr.txt", s->dir);
    return 0;
}

/* Fail the test with <what> and all of toolgate's stderr so far. */
static inline void tgh_fail_with_stderr(const char *err_path, const char *what)
{
    char *err = tgh_read_file(err_path, NULL);
    cr_assert_fail("%s: %s", what, err ? err : "");
}

/* Write <json> as the config of a prepared run (NULL: the test wrote
 * <cfg> itself) and start `toolgate serve --config` with <env> added to
 * the environment (NULL-terminated, may be NULL). Waits up to
 * <timeout_ms> for the "serving" line (probing the socket would
 * start an agent); fails the test, showing toolgate's stderr, when it
 * does not come. */
static inline void tgh_serve_start(tgh_serve_t *s, const char *json, char *const *env,
                                   int timeout_ms)
{
    if (json != NULL)
        cr_assert_eq(tgh_write_file(s->cfg, json), 0, "cannot write %s", s->cfg);
    char *const argv[] = {(char *)TG_BIN, (char *)"serve", (char *)"--config", s->cfg, NULL};
    cr_assert_eq(tgh_spawn(&s->tg, argv, env, s->err), 0);
    if (tgh_log_wait(s->err, "serving ", 1, timeout_ms) < 1)
        tgh_fail_with_stderr(s->err, "toolgate serve did not start");
}

/* What tgh_fx_write splices into the usual serve config (NULL: nothing). */
typedef struct tgh_fx {
    const char *sock;         /* the listener's socket (NULL: <s>->sock) */
    const char *log;          /* the fixture's event log (NULL: <s>->log) */
    const char *listen_extra; /* more keys of the listen entry: ", \"mode\": \"0600\"" */
    const char *router_extra; /* more keys of router */
    const char *agent_extra;  /* more keys of the agent */
    const char *top_extra;    /* more top-level keys */
} tgh_fx_t;

/* Write <s>->cfg: agent "fx" (the fixture agent, logging to <log>) behind
 * one Unix socket, audit to <s>->audit, with <x>'s extras spliced in. */
static inline void tgh_fx_write(const tgh_serve_t *s, const tgh_fx_t *x)
{
#define TGH_S(v) ((v) != NULL ? (v) : "")
    char json[4096];
    int n = snprintf(json, sizeof json,
                     "{\"router\": {\"listen\": [{\"unix\": \"%s\", \"agent\": \"fx\"%s}]%s},\n"
                     " \"audit\": {\"path\": \"%s\"},\n"
                     " \"agents\": [{\"id\": \"fx\", \"command\": [\"%s/tg_fixture_agent\", "
                     "\"--log\", \"%s\"]%s}]%s}\n",
                     x->sock != NULL ? x->sock : s->sock, TGH_S(x->listen_extra),
                     TGH_S(x->router_extra), s->audit, TG_AGENTS_DIR,
                     x->log != NULL ? x->log : s->log, TGH_S(x->agent_extra), TGH_S(x->top_extra));
#undef TGH_S
    cr_assert(n > 0 && (size_t)n < sizeof json, "serve config too long");
    cr_assert_eq(tgh_write_file(s->cfg, json), 0, "cannot write %s", s->cfg);
}

/* SIGTERM; toolgate must exit 0 within <timeout_ms> and take its socket
 * file with it. */
static inline void tgh_serve_stop(tgh_serve_t *s, int timeout_ms)
{
    kill(s->tg.pid, SIGTERM);
    cr_assert_eq(tgh_wait(&s->tg, timeout_ms), 0, "toolgate serve did not stop on SIGTERM");
    /* Reaped: the suite's fini must not touch it (a test's own <s> may
     * live on its stack, gone by then). */
    for (size_t i = 0; i < TGH_MAX_PROCS; i++)
        if (tgh_procs[i] == &s->tg)
            tgh_procs[i] = NULL;
    cr_assert_eq(tgh_exit_code(&s->tg), 0);
    cr_assert(s->sock[0] == '\0' || access(s->sock, F_OK) != 0, "the socket file was left behind");
}

/* Kill every registered process (and the fixture agents named in the logs
 * of registered dirs), then remove the dirs unless TG_KEEP_TMP is set. */
static inline void tgh_cleanup(void)
{
    /* First the polite way (EOF), so a child can stop its own children;
     * then SIGKILL to the group of whatever is left. */
    for (size_t i = 0; i < TGH_MAX_PROCS; i++) {
        if (tgh_procs[i]) {
            tgh_close_stdin(tgh_procs[i]);
            if (tgh_procs[i]->out_fd >= 0)
                close(tgh_procs[i]->out_fd);
            tgh_procs[i]->out_fd = -1;
        }
    }
    uint64_t deadline = tgh_now_ms() + 1500;
    for (size_t i = 0; i < TGH_MAX_PROCS; i++) {
        if (tgh_procs[i] && tgh_procs[i]->pid > 0)
            tgh_wait(tgh_procs[i], tgh_left(deadline));
    }
    for (size_t i = 0; i < TGH_MAX_PROCS; i++) {
        if (tgh_procs[i]) {
            tgh_kill(tgh_procs[i]);
            tgh_procs[i] = NULL;
        }
    }
    const char *keep = getenv("TG_KEEP_TMP");
    for (size_t i = 0; i < TGH_MAX_DIRS; i++) {
        if (tgh_dirs[i][0] == '\0')
            continue;
        char log[TGH_PATH + 32];
        if ((size_t)snprintf(log, sizeof log, "%s/fixture.log", tgh_dirs[i]) >= sizeof log)
            continue;
        pid_t pids[32];
        int np = tgh_log_pids(log, pids, 32);
        for (int k = 0; k < np; k++)
            if (tgh_pid_alive(pids[k]) && tgh_pid_is(pids[k], "tg_fixture_agent"))
                kill(pids[k], SIGKILL);
        if (keep && *keep == '1')
            fprintf(stderr, "tgh: kept %s\n", tgh_dirs[i]);
        else
            tgh_rmtree(tgh_dirs[i]);
        tgh_dirs[i][0] = '\0';
    }
}

/* Lines of <text> (NUL-terminated) that start with <prefix> and contain
 * <needle> (case-insensitive; NULL matches any). */
static inline int tgh_count_lines_with(const char *text, const char *prefix, const char *needle)
{
    int n = 0;
    size_t plen = prefix ? strlen(prefix) : 0;
    size_t nlen = needle ? strlen(needle) : 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        bool ok = len >= plen && strncmp(line, prefix ? prefix : "", plen) == 0;
        if (ok && needle) {
            ok = false;
            for (size_t i = 0; i + nlen <= len && !ok; i++)
                ok = strncasecmp(line + i, needle, nlen) == 0;
        }
        n += ok;
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

/* Lines of <path> containing <needle> (case-insensitive); 0 when it
 * cannot be read. */
static inline int tgh_file_count(const char *path, const char *needle)
{
    char *text = tgh_read_file(path, NULL);
    int n = text ? tgh_count_lines_with(text, "", needle) : 0;
    free(text);
    return n;
}

/* Wait until <path> has at least <min> lines containing <needle>.
 * Returns the count reached (may be below <min> on timeout). */
static inline int tgh_file_wait(const char *path, const char *needle, int min, int timeout_ms)
{
    return tgh__wait_count(tgh_file_count, path, needle, min, timeout_ms);
}

#endif
