/* Non-blocking stderr: see log.h. */
#include "router/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uv_pipe_t g_pipe;
static bool g_pipe_ok;
static uint64_t g_dropped;

void tg_log_init(uv_loop_t *loop)
{
    if (g_pipe_ok)
        return;
    if (uv_guess_handle(2) == UV_NAMED_PIPE && uv_pipe_init(loop, &g_pipe, 0) == 0) {
        if (uv_pipe_open(&g_pipe, 2) == 0) {
            g_pipe_ok = true;
            uv_unref((uv_handle_t *)&g_pipe);
        } else {
            uv_close((uv_handle_t *)&g_pipe, NULL);
        }
    }
}

void tg_log_close(void)
{
    if (g_pipe_ok) {
        g_pipe_ok = false;
        /* Give fd 2 back in blocking mode for anything printed after. */
        uv_stream_set_blocking((uv_stream_t *)&g_pipe, 1);
        if (!uv_is_closing((uv_handle_t *)&g_pipe))
            uv_close((uv_handle_t *)&g_pipe, NULL);
    }
}

size_t tg_log_raw(const char *p, size_t len)
{
    if (g_pipe_ok) {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)len);
        int n = uv_try_write((uv_stream_t *)&g_pipe, &b, 1);
        size_t done = n > 0 ? (size_t)n : 0;
        g_dropped += len - done;
        return len - done;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(2, p + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    g_dropped += len - done;
    return len - done;
}

void tg_log(const char *fmt, ...)
{
    char line[TG_LOG_LINE_MAX];
    int off = snprintf(line, sizeof(line), "toolgate: ");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + off, sizeof(line) - (size_t)off - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)off + (n < 0 ? 0 : (size_t)n);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    tg_log_raw(line, len);
}

int tg_log_failed(const tg_err_t *err, int status)
{
    tg_log("%s", err->msg);
    return status;
}

uint64_t tg_log_dropped(void)
{
    return g_dropped;
}
