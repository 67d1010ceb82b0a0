/* The audit file under attack and under faults (issue 12, items 8, 14,
 * 15): no symbolic link or shared directory can redirect it, a full disk
 * is logged once per episode and leaves only whole lines, and a file
 * deleted or moved away while in use is noticed, made again and audited.
 * The full disk is a small tmpfs mounted for the test (root only; the
 * test skips without the right to mount). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/verify.h"
#include "tests/tg_audit.h"
#include "tests/tg_harness.h"

#define LOGS_MAX 32

static char mnt[TGH_PATH + 16]; /* the small disk, while mounted */
static bool mounted;

static void fini(void)
{
    if (mounted)
        umount2(mnt, MNT_DETACH);
    mounted = false;
    tgh_cleanup();
}

TestSuite(audit_file, .init = tgh_tmp_init, .fini = fini);

/* What the pipe told the operator (tg_audit_opts_t.log). */
static char logs[LOGS_MAX][1024];
static tg_audit_news_t log_levels[LOGS_MAX];
static size_t nlogs;

static void log_line(void *ctx, tg_audit_news_t level, const char *line)
{
    (void)ctx;
    cr_assert_lt(nlogs, LOGS_MAX, "too many log lines; the last: %s", line);
    log_levels[nlogs] = level;
    snprintf(logs[nlogs++], sizeof(logs[0]), "%s", line);
}

/* The level of the first log line holding <needle> (-1: none). */
static int logged_level(const char *needle)
{
    for (size_t i = 0; i < nlogs; i++)
        if (strstr(logs[i], needle) != NULL)
            return (int)log_levels[i];
    return -1;
}

/* Log lines holding <needle>. */
static size_t logged(const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < nlogs; i++)
        n += strstr(logs[i], needle) != NULL;
    return n;
}

static tg_audit_opts_t opts_for(const char *path)
{
    nlogs = 0;
    return (tg_audit_opts_t){.path = path, .instance = "host-a", .queue_cap = 256, .log = log_line};
}

static tg_audit_t *open_logged(uv_loop_t *loop, const char *path)
{
    tg_audit_opts_t o = opts_for(path);
    return aud_open(loop, &o);
}

/* Emit <n> call.completed events and run the loop until they are written. */
static void emit_run(tg_audit_t *a, uv_loop_t *loop, int n)
{
    for (int i = 0; i < n; i++)
        aud_emit(a, "call.completed", i);
    cr_assert_eq(uv_run(loop, UV_RUN_DEFAULT), 0);
}

/* The lines of <path> as JSON, failing the test on a torn or bad line.
 * Returns the count; <seqs> and <events> (may be NULL) get each line's. */
static size_t read_events(const char *path, json_int_t *seqs, char (*events)[32], size_t cap)
{
    size_t len = 0, n = 0;
    char *text = tgh_read_file(path, &len);
    cr_assert_not_null(text, "%s: %s", path, strerror(errno));
    cr_assert(len == 0 || text[len - 1] == '\n', "%s ends in part of a line", path);
    for (char *line = text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)(nl - line), 0, &je);
        cr_assert_not_null(j, "%s: line %zu is not JSON: %.*s", path, n + 1, (int)(nl - line),
                           line);
        cr_assert_lt(n, cap);
        if (seqs != NULL)
            seqs[n] = json_integer_value(json_object_get(j, "seq"));
        if (events != NULL)
            snprintf(events[n], sizeof(events[0]), "%s",
                     json_string_value(json_object_get(j, "event")));
        json_decref(j);
        n++;
    }
    free(text);
    return n;
}

/* Verify <n> files in order: the one instance's summary. */
static tg_verify_summary_t verify_files(const char *const *paths, size_t n)
{
    tg_verify_t *v = tg_verify_new(NULL, NULL);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        char *text = tgh_read_file(paths[i], &len);
        cr_assert_not_null(text, "%s", paths[i]);
        cr_assert_eq(tg_verify_begin(v, paths[i]), 0);
        cr_assert_eq(tg_verify_feed(v, text, len), 0);
        free(text);
    }
    return aud_verify_summary(v);
}

/* ---- item 8: no link, no shared directory -------------------------------- */

/* A link planted where the audit file goes is refused with a message that
 * names the path, the problem and the way out; its target is untouched. */
Test(audit_file, a_planted_symlink_is_refused_and_its_target_untouched)
{
    uv_loop_t loop;
    char target[256], link[256];
    tg_audit_t *a = NULL;
    tg_err_t err = {""};

    tgh_tmp_put("precious", "not an audit line\n", target, sizeof(target));
    tgh_tmp_path(link, sizeof(link), "audit.jsonl");
    cr_assert_eq(symlink(target, link), 0);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t o = opts_for(link);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -ELOOP, "%s", err.msg);
    cr_assert_null(a);
    cr_assert_not_null(strstr(err.msg, link), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "is a symbolic link"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "remove the link"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "use --audit PATH"), "%s", err.msg);
    char *text = tgh_read_file(target, NULL);
    cr_assert_str_eq(text, "not an audit line\n");
    free(text);

    /* a dangling link is not followed to create its target either */
    char nowhere[256];
    tgh_tmp_path(nowhere, sizeof(nowhere), "nowhere");
    cr_assert_eq(unlink(link), 0);
    cr_assert_eq(symlink(nowhere, link), 0);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -ELOOP, "%s", err.msg);
    cr_assert_neq(access(nowhere, F_OK), 0, "the link's target was created");
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A directory every user may write without the sticky bit is refused (any
 * user could swap the file); with the sticky bit it is accepted. */
Test(audit_file, a_world_writable_directory_without_sticky_bit_is_refused)
{
    uv_loop_t loop;
    char dir[256], path[256];
    tg_audit_t *a = NULL;
    tg_err_t err = {""};

    tgh_tmp_path(dir, sizeof(dir), "shared");
    tgh_tmp_path(path, sizeof(path), "shared/audit.jsonl");
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t o = opts_for(path);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -EPERM, "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "every user may write"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "no sticky bit (mode 0777)"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "chmod +t"), "%s", err.msg);
    cr_assert_neq(access(path, F_OK), 0, "the file was created");

    cr_assert_eq(chmod(dir, 01777), 0);
    a = aud_open(&loop, &o);
    emit_run(a, &loop, 1);
    aud_close(a, &loop);
    cr_assert_eq(read_events(path, NULL, NULL, 4), 1);
}

/* In a sticky world-writable directory (/tmp), a file another user made
 * first is refused (fs.protected_regular's rule), and so is a FIFO,
 * without hanging on it. */
Test(audit_file, a_file_planted_in_a_sticky_directory_is_refused)
{
    uv_loop_t loop;
    char dir[256], path[256];
    tg_audit_t *a = NULL;
    tg_err_t err = {""};

    tgh_tmp_path(dir, sizeof(dir), "tmp");
    tgh_tmp_path(path, sizeof(path), "tmp/audit.jsonl");
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(chmod(dir, 01777), 0);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t o = opts_for(path);

    cr_assert_eq(mkfifo(path, 0666), 0);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -EPERM, "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "FIFO"), "%s", err.msg);
    cr_assert_eq(unlink(path), 0);

    if (geteuid() != 0) {
        cr_assert_eq(uv_loop_close(&loop), 0);
        cr_skip_test("another user's file needs root to make");
    }
    cr_assert_eq(tgh_write_file(path, ""), 0);
    cr_assert_eq(chown(path, 65534, 65534), 0);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -EPERM, "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "belongs to uid 65534"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_eq(unlink(path), 0);

    /* a hard link to a file elsewhere */
    char other[256];
    tgh_tmp_put("other", "x\n", other, sizeof(other));
    cr_assert_eq(link(other, path), 0);
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -EPERM, "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "hard links"), "%s", err.msg);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* The rules hold when the file is opened again: a link planted where the
 * deleted file was is refused (its target untouched), the events that had
 * nowhere to go are counted and logged once, and once the link is gone a
 * new file is made and the loss reported. */
Test(audit_file, reopen_after_deletion_refuses_a_planted_symlink)
{
    uv_loop_t loop;
    char target[256], path[256];
    json_int_t seqs[16];
    char events[16][32];

    tgh_tmp_put("precious", "keep\n", target, sizeof(target));
    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = open_logged(&loop, path);
    emit_run(a, &loop, 1);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(symlink(target, path), 0);
    emit_run(a, &loop, 2);
    emit_run(a, &loop, 1);
    char *text = tgh_read_file(target, NULL);
    cr_assert_str_eq(text, "keep\n");
    free(text);
    cr_assert_eq(tg_audit_dropped(a), 4); /* seqs 2, 3, then 4 (audit.dropped) and 5 */
    cr_assert_eq(nlogs, 1, "%s", logs[0]);
    cr_assert_not_null(strstr(logs[0], "was deleted and cannot be made again"), "%s", logs[0]);
    cr_assert_not_null(strstr(logs[0], "is a symbolic link"), "%s", logs[0]);
    cr_assert_eq(log_levels[0], TG_AUDIT_NEWS_ERROR, "a failing sink is an error line");

    cr_assert_eq(unlink(path), 0);
    emit_run(a, &loop, 1);
    cr_assert_eq(logged("writing again, after losing 4 events"), 1, "%s", logs[nlogs - 1]);
    cr_assert_eq(logged("the file was deleted while in use"), 1);
    cr_assert_eq(logged_level("writing again, after losing"), TG_AUDIT_NEWS_WARN);
    cr_assert_eq(logged_level("the file was deleted while in use"), TG_AUDIT_NEWS_INFO);
    aud_close(a, &loop);
    size_t n = read_events(path, seqs, events, 16);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(events[0], "audit.dropped");
    cr_assert_eq(seqs[0], 6);
    cr_assert_eq(seqs[1], 7);
    cr_assert_str_eq(events[2], "audit.reopened");
}

/* The Redis sink's spool (appended to, and truncated back to a whole line
 * at open) is opened by the same rules. */
Test(audit_file, a_symlinked_spool_is_refused_and_its_target_untouched)
{
    uv_loop_t loop;
    char target[256], link[256];
    tg_audit_t *a = NULL;
    tg_err_t err = {""};
    tg_audit_sink_cfg_t s;

    tgh_tmp_put("precious", "no newline at the end", target, sizeof(target));
    tgh_tmp_path(link, sizeof(link), "spool.jsonl");
    cr_assert_eq(symlink(target, link), 0);
    tg_config_sink_defaults(&s, TG_AUDIT_SINK_REDIS_STREAM);
    snprintf(s.ep.host, sizeof(s.ep.host), "127.0.0.1");
    s.ep.port = 1; /* never reached: the open fails first */
    s.spool = link;
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_opts_t o = {.sinks = &s, .nsinks = 1, .instance = "host-a", .queue_cap = 8};
    cr_assert_eq(tg_audit_open(&a, &loop, &o, &err), -ELOOP, "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "spool"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "is a symbolic link"), "%s", err.msg);
    char *text = tgh_read_file(target, NULL);
    cr_assert_str_eq(text, "no newline at the end");
    free(text);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* The router refuses to start on a planted link, with the message. */
Test(audit_file, wrap_refuses_a_symlinked_audit_path)
{
    static tgh_wrap_t w; /* registered with the harness: not on the stack */
    char target[TGH_PATH + 32];

    cr_assert_eq(tgh_wrap_prepare(&w), 0);
    snprintf(target, sizeof(target), "%s/precious", w.dir);
    cr_assert_eq(tgh_write_file(target, "keep\n"), 0);
    cr_assert_eq(symlink(target, w.audit), 0);
    const char *const args[] = {"--log", w.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&w, NULL, TG_AGENTS_DIR "/tg_fixture_agent", args, NULL), 0);
    cr_assert_eq(tgh_wait(&w.tg, 5000), 0);
    cr_assert_eq(tgh_exit_code(&w.tg), 2);
    cr_assert_eq(tgh_file_count(w.err, "is a symbolic link"), 1);
    cr_assert_eq(tgh_file_count(w.err, w.audit), 1);
    char *text = tgh_read_file(target, NULL);
    cr_assert_str_eq(text, "keep\n");
    free(text);
}

/* ---- item 14: a full disk ------------------------------------------------ */

/* A tmpfs of <kib> KiB at <tgh_tmp>/disk; false when this process may not
 * mount one. */
static bool small_disk(unsigned kib)
{
    char o[64];

    tgh_tmp_path(mnt, sizeof(mnt), "disk");
    cr_assert_eq(mkdir(mnt, 0700), 0);
    snprintf(o, sizeof(o), "size=%uk,mode=0700", kib);
    if (mount("tg-audit-test", mnt, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, o) != 0)
        return false;
    mounted = true;
    return true;
}

/* Fill the small disk with <name> until no page is left. */
static void fill(const char *name, char *path, size_t cap)
{
    static char chunk[4096];

    snprintf(path, cap, "%s/%s", mnt, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    memset(chunk, 'x', sizeof(chunk));
    while (write(fd, chunk, sizeof(chunk)) > 0) {
    }
    cr_assert_eq(errno, ENOSPC);
    close(fd);
}

/* Disk full mid-batch: the cut line is truncated away, toolgate goes on,
 * the operator hears once when writes start failing and once when they
 * work again, and the audit.dropped then written explains every gap. */
Test(audit_file, a_full_disk_is_logged_once_and_leaves_whole_lines)
{
    uv_loop_t loop;
    char path[TGH_PATH + 32], filler[TGH_PATH + 32];
    json_int_t seqs[256];
    char events[256][32];

    if (!small_disk(64))
        cr_skip_test("cannot mount a tmpfs here: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/audit.jsonl", mnt);
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = open_logged(&loop, path);
    emit_run(a, &loop, 1); /* the file's first page, mostly free */
    fill("filler", filler, sizeof(filler));

    emit_run(a, &loop, 60); /* ~9 KiB into the rest of one page: cut short */
    cr_assert_gt(tg_audit_dropped(a), 0);
    emit_run(a, &loop, 10);
    emit_run(a, &loop, 10);
    cr_assert_eq(nlogs, 1, "%s", logs[nlogs - 1]);
    cr_assert_not_null(strstr(logs[0], path), "%s", logs[0]);
    cr_assert_not_null(strstr(logs[0], "cannot write: No space left on device"), "%s", logs[0]);
    cr_assert_not_null(strstr(logs[0], "toolgate keeps serving"), "%s", logs[0]);
    size_t n = read_events(path, NULL, NULL, 256); /* whole lines only, or it fails */
    cr_assert_gt(n, 1);
    uint64_t lost = tg_audit_dropped(a);

    cr_assert_eq(unlink(filler), 0);
    emit_run(a, &loop, 1);
    cr_assert_eq(nlogs, 2, "%s", logs[nlogs - 1]);
    char want[128];
    snprintf(want, sizeof(want), "writing again, after losing %llu events",
             (unsigned long long)lost);
    cr_assert_not_null(strstr(logs[1], want), "%s (want %s)", logs[1], want);
    aud_emit(a, "router.stopping", TG_AUDIT_ABSENT);
    aud_close(a, &loop);

    n = read_events(path, seqs, events, 256);
    cr_assert_str_eq(events[n - 3], "audit.dropped");
    const char *const files[] = {path};
    tg_verify_summary_t s = verify_files(files, 1);
    cr_assert_eq(s.schema, 0);
    cr_assert_eq(s.missing, lost);
    cr_assert_eq(s.unexplained, 0);
    cr_assert_eq(s.dropped_events, lost);
    cr_assert_eq(s.unstopped, 0);
    cr_assert_not(s.open);
}

/* The same through the router: toolgate wrap on a full disk logs the
 * failure once on its stderr and keeps going to a clean exit. */
Test(audit_file, wrap_on_a_full_disk_logs_once)
{
    static tgh_wrap_t w; /* registered with the harness: not on the stack */
    char filler[TGH_PATH + 32];

    if (!small_disk(64))
        cr_skip_test("cannot mount a tmpfs here: %s", strerror(errno));
    cr_assert_eq(tgh_wrap_prepare(&w), 0);
    snprintf(w.audit, sizeof(w.audit), "%s/audit.jsonl", mnt);
    fill("filler", filler, sizeof(filler));
    const char *const args[] = {"--log", w.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&w, NULL, TG_AGENTS_DIR "/tg_fixture_agent", args, NULL), 0);
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n";
    cr_assert_eq(tgh_send(&w.tg, init, sizeof(init) - 1, 2000), 0);
    char *line = tgh_read_line(&w.tg, 5000, NULL);
    cr_assert_not_null(line, "no answer to initialize");
    free(line);
    tgh_close_stdin(&w.tg);
    cr_assert_eq(tgh_wait(&w.tg, 10000), 0);
    cr_assert_eq(tgh_exit_code(&w.tg), 0);
    cr_assert_eq(tgh_file_count(w.err, "cannot write: No space left on device"), 1);
    cr_assert_eq(tgh_file_count(w.err, "error wrap: audit: "), 1);
}

/* ---- item 15: the file deleted or moved while in use --------------------- */

/* Deleted between two batches: the next batch went to the deleted file;
 * it is noticed at once, written again into a new file at the path, and
 * audited. Nothing is lost. */
Test(audit_file, a_deleted_file_is_made_again_and_audited)
{
    uv_loop_t loop;
    char path[256];
    json_int_t seqs[16];
    char events[16][32];

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = open_logged(&loop, path);
    emit_run(a, &loop, 3);
    cr_assert_eq(unlink(path), 0);
    emit_run(a, &loop, 3);
    cr_assert_eq(access(path, F_OK), 0, "no new file at the path");
    cr_assert_eq(logged("the file was deleted while in use"), 1);
    cr_assert_eq(logged_level("the file was deleted while in use"), TG_AUDIT_NEWS_INFO);
    cr_assert_not_null(strstr(logs[0], path), "%s", logs[0]);
    cr_assert_eq(tg_audit_dropped(a), 0);
    aud_close(a, &loop);

    size_t n = read_events(path, seqs, events, 16);
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(seqs[i], (json_int_t)(4 + i));
    cr_assert_str_eq(events[3], "audit.reopened");
    char *text = tgh_read_file(path, NULL);
    cr_assert_not_null(strstr(text, "\"reason\":\"deleted\""), "%s", text);
    cr_assert_not_null(strstr(text, "\"count\":3"), "%s", text);
    free(text);
    const char *const files[] = {path};
    tg_verify_summary_t s = verify_files(files, 1);
    cr_assert_eq(s.missing + s.schema + s.duplicates, 0);
}

/* Moved away (logrotate without copytruncate): lines go on to the moved
 * file until a new one appears at the path, which is then taken up; the
 * two files together verify clean. */
Test(audit_file, a_moved_file_is_followed_by_the_new_one)
{
    uv_loop_t loop;
    char path[256], moved[256];
    json_int_t seqs[16];
    char events[16][32];

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    tgh_tmp_path(moved, sizeof(moved), "audit.jsonl.1");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = open_logged(&loop, path);
    emit_run(a, &loop, 2);
    cr_assert_eq(rename(path, moved), 0);
    emit_run(a, &loop, 1);
    cr_assert_neq(access(path, F_OK), 0, "made at once: would race the rotator's own");
    cr_assert_eq(tgh_write_file(path, ""), 0); /* the rotator's "create" */
    emit_run(a, &loop, 2);
    cr_assert_eq(logged("the file was moved while in use"), 1);
    aud_emit(a, "router.stopping", TG_AUDIT_ABSENT);
    aud_close(a, &loop);

    cr_assert_eq(read_events(moved, seqs, NULL, 16), 3);
    cr_assert_eq(seqs[2], 3);
    size_t n = read_events(path, seqs, events, 16);
    cr_assert_eq(n, 4);
    cr_assert_eq(seqs[0], 4);
    cr_assert_str_eq(events[2], "audit.reopened");
    cr_assert_str_eq(events[3], "router.stopping");
    const char *const files[] = {moved, path};
    tg_verify_summary_t s = verify_files(files, 2);
    cr_assert_eq(s.missing + s.schema + s.duplicates + s.reordered + s.unstopped, 0);
    cr_assert_eq(s.first_seq, 1);
    cr_assert_eq(s.last_seq, 7);
}

/* Moved away and nobody makes a new file: after the grace, toolgate does. */
Test(audit_file, a_moved_file_is_replaced_after_the_grace)
{
    uv_loop_t loop;
    char path[256], moved[256];
    json_int_t seqs[16];
    char events[16][32];

    tgh_tmp_path(path, sizeof(path), "audit.jsonl");
    tgh_tmp_path(moved, sizeof(moved), "gone.jsonl");
    cr_assert_eq(uv_loop_init(&loop), 0);
    tg_audit_t *a = open_logged(&loop, path);
    emit_run(a, &loop, 1);
    cr_assert_eq(rename(path, moved), 0);
    emit_run(a, &loop, 1);
    tgh_sleep_ms(1100);
    emit_run(a, &loop, 1);
    cr_assert_eq(access(path, F_OK), 0, "no new file after the grace");
    aud_close(a, &loop);
    cr_assert_eq(read_events(moved, NULL, NULL, 16), 2);
    size_t n = read_events(path, seqs, events, 16);
    cr_assert_eq(n, 2);
    cr_assert_eq(seqs[0], 3);
    cr_assert_str_eq(events[1], "audit.reopened");
    cr_assert_eq(nlogs, 1, "%s", logs[nlogs - 1]);
}
