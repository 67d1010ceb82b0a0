/* The setup error (see err.h). */
#include "config/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tg_err_set(tg_err_t *err, int rc, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- notices ---- */

static tg_notice_fn notice_fn;
static void *notice_arg;

void tg_notice_set_sink(tg_notice_fn fn, void *arg)
{
    notice_fn = fn;
    notice_arg = arg;
}

void tg_notice_discard(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

void tg_notice(const char *fmt, ...)
{
    char line[TG_ERR_MAX + 16];
    static const char pfx[] = "toolgate: ";
    size_t off = sizeof pfx - 1, len;
    va_list ap;
    int n;

    memcpy(line, pfx, off);
    va_start(ap, fmt);
    n = vsnprintf(line + off, sizeof line - off - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    len = off + (size_t)n;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len] = '\0';
    if (notice_fn) {
        notice_fn(notice_arg, line + off);
        return;
    }
    /* One write, so the line cannot interleave with another; a stderr
     * that is a full non-blocking pipe loses it (EAGAIN), as toolgate's
     * own log does. */
    line[len++] = '\n';
    while (write(STDERR_FILENO, line, len) < 0 && errno == EINTR)
        ;
}
