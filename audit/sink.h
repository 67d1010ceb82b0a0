/* Audit sinks (internal to audit/): where encoded lines go.
 *
 * A sink is a backend behind a small table of functions. The queue in
 * audit.c owns ordering, batching and loss accounting; a sink only has to
 * write bytes. write() and sync() run on a libuv threadpool thread (at
 * most one call at a time per sink), or on the loop thread during
 * tg_audit_close, so they may block; they must not touch loop state.
 *
 * Every batch a sink is given is whole lines (each ends in '\n'), except
 * that it may start with the "\n" that ends a line a failed write cut
 * short. Sinks that cut a batch (rotation, atomic pipe writes) cut only
 * after a '\n', with the cursor below.
 */
#ifndef TG_AUDIT_SINK_H
#define TG_AUDIT_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "config/config.h"

struct tg_audit_sink_status;

typedef struct tg_audit_sink_ops {
    const char *kind; /* "file", "stderr", ... */
    /* Write all <iovcnt> buffers of <iov>, in order. Returns the number of
     * bytes written, which is short only when an error stopped it, or a
     * negative errno when nothing was written. */
    ssize_t (*write)(void *ctx, const struct iovec *iov, int iovcnt);
    /* Optional (NULL: the sink has nothing to make durable later). Called
     * after every batch, and on its own when a previous call asked for it,
     * with <now_ms> from a monotonic clock. Does what the sink's durability
     * policy says is due now and returns the milliseconds until it wants
     * to be called again, or 0 when nothing is pending. */
    uint64_t (*sync)(void *ctx, uint64_t now_ms);
    /* Make everything durable that the policy asks for and release <ctx>;
     * called once, after the last write has returned. */
    void (*close)(void *ctx);
    /* Optional (NULL: the pipe judges the sink by write's return alone).
     * Called on the loop thread after a batch's write has returned, never
     * while write or sync runs: fills <st> with what that write met. */
    void (*status)(void *ctx, struct tg_audit_sink_status *st);
} tg_audit_sink_ops_t;

/* What a sink's last write met, for the pipe to log and audit. */
typedef struct tg_audit_sink_status {
    /* Why the last write fell short (or what else is wrong that an
     * operator must hear of), one phrase without the sink's name: "cannot
     * write: No space left on device". NULL or "" when it went through.
     * Owned by the sink, valid until its next write. */
    const char *problem;
    /* Set once, by the write that did it: the sink's file was "deleted" or
     * "moved" away while in use and a new one was opened at its path
     * (audited as audit.reopened). NULL otherwise. */
    const char *reopened;
    /* With "deleted": lines of that write that had gone to the deleted
     * file and were written again into the new one. */
    uint64_t rewritten;
} tg_audit_sink_status_t;

/* A sink instance: its table and its state (owned; freed by ops->close). */
typedef struct tg_audit_sink {
    const tg_audit_sink_ops_t *ops;
    void *ctx;
} tg_audit_sink_t;

/* Open the JSON-lines file sink described by <cfg> (kind file, a path):
 * parent directories are made (0700) when missing, the file is opened for
 * appending and created 0600, by the rules of tg_audit_open_file (no
 * symbolic link, no directory anyone may write without the sticky bit);
 * an existing file that ends in a torn line gets a '\n' first so the next
 * line stays whole. Returns 0, or a negative errno with a message naming
 * the path, the cause and the way out written into <err>. */
int tg_audit_sink_file_open(tg_audit_sink_t *out, const tg_audit_sink_cfg_t *cfg, tg_err_t *err);

/* Open the stderr sink: a duplicate of fd 2, so that whoever closes fd 2
 * (the router's log at exit) cannot make it write elsewhere. 0 or a
 * negative errno with a message in <err>. */
int tg_audit_sink_stderr_open(tg_audit_sink_t *out, tg_err_t *err);

/* Open the Redis Stream sink described by <cfg> (kind redis_stream, with
 * <cfg>->ep filled): opens (and makes the directories of) the spool file;
 * Redis is connected to later, from the threadpool. 0 or a negative errno
 * with a message naming the spool or the stream in <err> (never the URL,
 * which may hold a password). */
int tg_audit_sink_redis_open(tg_audit_sink_t *out, const tg_audit_sink_cfg_t *cfg, tg_err_t *err);

/* ---- batch cursor and fd writer, shared by the fd-based sinks ---- */

/* A read position in a batch: byte <off> of <iov>[<i>]. */
typedef struct tg_audit_cur {
    const struct iovec *iov;
    int iovcnt;
    int i;
    size_t off;
} tg_audit_cur_t;

void tg_audit_cur_init(tg_audit_cur_t *c, const struct iovec *iov, int iovcnt);
/* Bytes left from <c> to the end of the batch. */
size_t tg_audit_cur_left(const tg_audit_cur_t *c);
/* Length of the first line at <c>, its '\n' included (or up to the end of
 * the batch when no '\n' follows). 0 at the end. */
size_t tg_audit_cur_line(const tg_audit_cur_t *c);
/* The longest run of whole lines at <c> that is at most <max> bytes; 0
 * when the first line alone is longer. */
size_t tg_audit_cur_lines(const tg_audit_cur_t *c, size_t max);
/* Last byte before <c>, or -1 at the start of the batch. */
int tg_audit_cur_prev(const tg_audit_cur_t *c);
/* Advance <c> past the next <n> bytes (at most what is left). */
void tg_audit_cur_skip(tg_audit_cur_t *c, size_t n);
/* Copy the next <n> bytes at <c> (at most what is left) into <dst> and
 * advance past them; returns the bytes copied. */
size_t tg_audit_cur_copy(tg_audit_cur_t *c, char *dst, size_t n);

/* Make every missing directory above the file named by <path> (a
 * writable copy), mode 0700. 0, or a negative errno with <path> cut at the
 * directory that failed, for the message. */
int tg_audit_make_parents(char *path);

/* Open the file <path> of a sink with <flags> (O_CLOEXEC, O_NOCTTY and
 * O_NOFOLLOW are added; mode 0600 when O_CREAT makes it), making its
 * missing directories (0700) when O_CREAT is given. Refuses, with -ELOOP or
 * -EPERM, a symbolic link as the last component, a parent directory that
 * every user may write without the sticky bit, and in a world-writable
 * directory a file of another user or with other hard links; refuses what
 * is not a regular file or a character device (sink_open.c says why).
 * Returns the descriptor, or a negative errno with <err> naming <path>,
 * what is wrong and how to fix it (the caller adds the sink's prefix). */
int tg_audit_open_file(const char *path, int flags, tg_err_t *err);

/* Write the next <n> bytes at <c> to <fd> and advance <c> past what was
 * written. Retries short writes and EINTR; on EAGAIN (a non-blocking fd
 * shared with someone else) waits for POLLOUT up to <wait_ms> at a time.
 * Returns the bytes written (short only when an error or the wait
 * stopped it, errno then saying which), or a negative errno when nothing
 * was written. */
ssize_t tg_audit_fd_write(int fd, tg_audit_cur_t *c, size_t n, int wait_ms);

#endif
