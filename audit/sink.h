/* Audit sinks (internal to audit/): where encoded lines go.
 *
 * A sink is a backend behind a small table of functions. The queue in
 * audit.c owns ordering, batching and loss accounting; a sink only has to
 * write bytes. write() runs on a libuv threadpool thread (at most one call
 * at a time per sink), or on the loop thread during tg_audit_close, so it
 * may block; it must not touch loop state.
 */
#ifndef TG_AUDIT_SINK_H
#define TG_AUDIT_SINK_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct tg_audit_sink_ops {
    const char *kind; /* "file", ... */
    /* Write all <iovcnt> buffers of <iov>, in order. Returns the number of
     * bytes written, which is short only when an error stopped it, or a
     * negative errno when nothing was written. */
    ssize_t (*write)(void *ctx, const struct iovec *iov, int iovcnt);
    /* Release <ctx>; called once, after the last write has returned. */
    void (*close)(void *ctx);
} tg_audit_sink_ops_t;

/* A sink instance: its table and its state (owned; freed by ops->close). */
typedef struct tg_audit_sink {
    const tg_audit_sink_ops_t *ops;
    void *ctx;
} tg_audit_sink_t;

/* Open the JSON-lines file sink on <path>: parent directories are made
 * (0700) when missing, the file is opened for appending and created 0600.
 * Returns 0, or a negative errno with a message naming the path, the cause
 * and the way out written into <err>. */
int tg_audit_sink_file_open(tg_audit_sink_t *out, const char *path, char *err, size_t errlen);

#endif
