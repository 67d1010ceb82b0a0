/* `toolgate audit verify FILE...`: the shell around the verify core.
 *
 * File order matters only where seqs restart (a new run) and for
 * reordering within a file; gaps and duplicates are judged on the set of
 * seqs, whatever the order. Rotated sets are put in writing order by name:
 * files sharing a base ("audit.jsonl", "audit.jsonl.1", ...) go oldest
 * first (highest suffix first, the base last), so a shell glob, which
 * sorts "audit.jsonl.10" before "audit.jsonl.2", still works. Unrelated
 * files keep their command-line order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/verify.h"

#define READ_CHUNK (64u * 1024) /* fixed internal bound: bytes per read() */
#define ROTATION_DIGITS 4       /* suffixes .1 .. .9999 (keep is at most 1000) */

typedef struct infile {
    const char *name;
    size_t baselen; /* name without its rotation suffix */
    unsigned rank;  /* rotation suffix; 0 for the live file */
    size_t group;   /* index of the first file with the same base */
    size_t pos;     /* command-line position */
} infile_t;

typedef struct out {
    bool quiet;
    bool stopped;
} out_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: toolgate audit verify [--quiet] [--stopped] FILE...\n"
            "\n"
            "Check audit logs (JSON lines) for lost, repeated or reordered events, schema\n"
            "errors and runs that ended without router.stopping, per instance. Rotated sets\n"
            "(audit.jsonl.3 ... audit.jsonl.1 audit.jsonl) may be given in any order; '-'\n"
            "reads standard input.\n"
            "  --quiet    print only the summary line of each instance\n"
            "  --stopped  every writer has stopped: an instance's last run without\n"
            "             router.stopping is a finding too (without it, a note: the run\n"
            "             may still be going; open=1 in the summary)\n"
            "Exit status: 0 nothing lost, 1 any finding (audit.dropped, a run that ended\n"
            "without router.stopping included), 2 bad usage or a file that could not be read.\n"
            "\n--log-format and TOOLGATE_LOG apply as to every command (toolgate --help).\n");
}

static void rotation_key(infile_t *f)
{
    size_t n = strlen(f->name), i = n;

    while (i > 0 && f->name[i - 1] >= '0' && f->name[i - 1] <= '9')
        i--;
    f->baselen = n;
    f->rank = 0;
    if (i < n && i > 1 && f->name[i - 1] == '.' && n - i <= ROTATION_DIGITS && f->name[i] != '0') {
        f->baselen = i - 1;
        f->rank = (unsigned)strtoul(f->name + i, NULL, 10);
    }
}

static int file_cmp(const void *a, const void *b)
{
    const infile_t *x = a, *y = b;

    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->rank != y->rank) {
        if (x->rank == 0 || y->rank == 0)
            return x->rank == 0 ? 1 : -1; /* the live file is the newest */
        return x->rank > y->rank ? -1 : 1;
    }
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void order_files(infile_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rotation_key(&f[i]);
        f[i].pos = i;
        f[i].group = i;
        for (size_t j = 0; j < i; j++) {
            if (f[j].baselen == f[i].baselen &&
                memcmp(f[j].name, f[i].name, f[i].baselen) == 0) {
                f[i].group = f[j].group;
                break;
            }
        }
    }
    qsort(f, n, sizeof(*f), file_cmp);
}

static void on_finding(void *ud, const tg_verify_finding_t *f)
{
    const out_t *o = ud;

    if (o->quiet)
        return;
    if (f->instance != NULL)
        printf("%s:%llu: %s: %s%s\n", f->file, (unsigned long long)f->line, f->instance,
               f->open ? "note: " : "", f->msg);
    else
        printf("%s:%llu: %s\n", f->file, (unsigned long long)f->line, f->msg);
}

/* Feed the file <name> ("-": stdin). 0, -1 after printing a read error, or
 * the core's negative errno. */
static int feed_file(tg_verify_t *v, const char *name, char *buf)
{
    bool is_stdin = strcmp(name, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int rc = 0;

    if (fd < 0) {
        int e = errno;
        fprintf(stderr, "toolgate audit verify: %s: cannot open: %s%s\n", name, strerror(e),
                e == ENOENT ? " (give an audit file: the config's audit.path or "
                              "audit.sinks[].path, by default "
                              "$XDG_STATE_HOME/toolgate/audit.jsonl)"
                            : "");
        return -1;
    }
    rc = tg_verify_begin(v, is_stdin ? "(stdin)" : name);
    for (;;) {
        if (rc < 0)
            break;
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "toolgate audit verify: %s: cannot read: %s\n", name,
                    strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0) {
            rc = tg_verify_end(v);
            break;
        }
        rc = tg_verify_feed(v, buf, (size_t)n);
    }
    if (!is_stdin)
        close(fd);
    return rc;
}

/* Refuse a file given twice: its events would all look duplicated. */
static bool given_twice(const infile_t *f, size_t n)
{
    struct stat *st = calloc(n, sizeof(*st));
    bool twice = false;

    if (st == NULL)
        return false;
    for (size_t i = 0; i < n && !twice; i++) {
        if (strcmp(f[i].name, "-") == 0 || stat(f[i].name, &st[i]) != 0) {
            st[i].st_ino = 0; /* reported when it is read */
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            if (st[j].st_ino != 0 && st[j].st_dev == st[i].st_dev &&
                st[j].st_ino == st[i].st_ino) {
                fprintf(stderr, "toolgate audit verify: %s: given twice (same file as %s)\n",
                        f[i].name, f[j].name);
                twice = true;
                break;
            }
        }
    }
    free(st);
    return twice;
}

static bool summary_clean(const tg_verify_summary_t *s)
{
    return s->missing == 0 && s->duplicates == 0 && s->reordered == 0 && s->schema == 0 &&
           s->dropped_lines == 0 && s->unstopped == 0;
}

/* The summary of each instance in the <nfiles> files read; "no events"
 * only when there were files to read (one that could not be read was
 * said on stderr and is not a file without events). */
static void print_summaries(const tg_verify_t *v, size_t nfiles)
{
    size_t n = tg_verify_ninstances(v);

    for (size_t i = 0; i < n; i++) {
        const tg_verify_summary_t *s = tg_verify_summary(v, i);
        printf("%s: %s events=%llu runs=%u seq=%llu..%llu missing=%llu unexplained=%llu "
               "duplicates=%llu reordered=%llu schema=%llu dropped=%llu unstopped=%u open=%d\n",
               s->instance, summary_clean(s) ? "ok" : "FAIL", (unsigned long long)s->events,
               s->runs, (unsigned long long)s->first_seq, (unsigned long long)s->last_seq,
               (unsigned long long)s->missing, (unsigned long long)s->unexplained,
               (unsigned long long)s->duplicates, (unsigned long long)s->reordered,
               (unsigned long long)s->schema, (unsigned long long)s->dropped_events,
               (unsigned)s->unstopped, s->open ? 1 : 0);
    }
    if (tg_verify_unattributed(v) != 0)
        printf("(no instance): FAIL lines=%llu (lines without a usable instance)\n",
               (unsigned long long)tg_verify_unattributed(v));
    if (n == 0 && tg_verify_unattributed(v) == 0 && nfiles > 0)
        printf("no events in %zu file%s\n", nfiles, nfiles == 1 ? "" : "s");
}

static int cli_verify(int argc, char **argv)
{
    out_t o = {.quiet = false, .stopped = false};
    infile_t *files;
    size_t n = 0;
    int status = 0;

    files = calloc((size_t)argc + 1, sizeof(*files));
    if (files == NULL) {
        fprintf(stderr, "toolgate audit verify: out of memory\n");
        return 2;
    }
    bool opts_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = true;
        } else if (!opts_done && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            usage(stdout);
            free(files);
            return 0;
        } else if (!opts_done && (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0)) {
            o.quiet = true;
        } else if (!opts_done && strcmp(a, "--stopped") == 0) {
            o.stopped = true;
        } else if (!opts_done && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr,
                    "toolgate audit verify: unknown option '%s' (expected --quiet, --stopped, "
                    "then FILE...)\n",
                    a);
            free(files);
            return 2;
        } else {
            files[n++].name = a;
        }
    }
    if (n == 0) {
        fprintf(stderr, "toolgate audit verify: no FILE given (usage: toolgate audit verify "
                        "[--quiet] [--stopped] FILE...)\n");
        free(files);
        return 2;
    }
    order_files(files, n);
    if (given_twice(files, n)) {
        free(files);
        return 2;
    }

    char *buf = malloc(READ_CHUNK);
    tg_verify_t *v = tg_verify_new(on_finding, &o);
    if (buf == NULL || v == NULL) {
        fprintf(stderr, "toolgate audit verify: out of memory\n");
        free(buf);
        tg_verify_free(v);
        free(files);
        return 2;
    }
    tg_verify_set_stopped(v, o.stopped);
    /* A file that cannot be read makes the result incomplete (exit 2),
     * but the others are still checked and reported; only the core giving
     * up (memory, bounds) stops the run. */
    bool fatal = false;
    size_t nread = 0;
    for (size_t i = 0; i < n && !fatal; i++) {
        int rc = feed_file(v, files[i].name, buf);
        nread += rc >= 0;
        if (rc == -1) {
            status = 2;
        } else if (rc < 0) {
            fprintf(stderr, "toolgate audit verify: %s: %s\n", files[i].name,
                    rc == -E2BIG ? "too disordered to verify (more instances, seq ranges or "
                                   "audit.dropped events than verify tracks)"
                                 : strerror(-rc));
            fatal = true;
        }
    }
    if (!fatal) {
        int rc = tg_verify_finish(v);
        if (rc < 0) {
            fprintf(stderr, "toolgate audit verify: %s\n", strerror(-rc));
            fatal = true;
        }
    }
    if (!fatal)
        print_summaries(v, nread);
    fflush(stdout);
    if (fatal)
        status = 2;
    else if (status != 2 && tg_verify_findings(v) != 0)
        status = 1;
    tg_verify_free(v);
    free(buf);
    free(files);
    return status;
}

int tg_cli_audit(int argc, char **argv)
{
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "verify") == 0)
        return cli_verify(argc - 1, argv + 1);
    fprintf(stderr, "toolgate audit: unknown subcommand '%s' (expected verify)\n", argv[0]);
    return 2;
}
