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

/* ---- relay formatting (pure) ---- */

/* Length of the valid UTF-8 sequence at <p> (<n> bytes left), 0 when the
 * byte there does not start one (RFC 3629: no overlongs, no surrogates,
 * nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned char b = p[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < need || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    }
    return need;
}

/* Whether the valid sequence <p>/<n> is one the terminal may obey: a C1
 * control, or a bidirectional override or isolate (text that reads in an
 * order other than the bytes'). */
static bool utf8_control(const unsigned char *p, size_t n)
{
    if (n == 2)
        return p[0] == 0xC2 && p[1] <= 0x9F;
    if (n == 3 && p[0] == 0xE2 && p[1] == 0x80)
        return p[2] >= 0xAA && p[2] <= 0xAE;
    if (n == 3 && p[0] == 0xE2 && p[1] == 0x81)
        return p[2] >= 0xA6 && p[2] <= 0xA9;
    return false;
}

size_t tg_log_escape(char *out, size_t cap, const char *p, size_t len, size_t *consumed)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *in = (const unsigned char *)p;
    size_t i = 0, o = 0;
    while (i < len) {
        unsigned char b = in[i];
        size_t unit = 1;
        bool esc;
        if (b < 0x80) {
            esc = (b < 0x20 && b != '\t') || b == 0x7F;
        } else {
            unit = utf8_len(in + i, len - i);
            esc = unit == 0 || utf8_control(in + i, unit);
            if (unit == 0)
                unit = 1;
        }
        size_t need = esc ? 4 * unit : unit;
        if (o + need > cap)
            break;
        for (size_t k = 0; k < unit; k++) {
            if (esc) {
                out[o++] = '\\';
                out[o++] = 'x';
                out[o++] = hex[in[i + k] >> 4];
                out[o++] = hex[in[i + k] & 0xF];
            } else {
                out[o++] = (char)in[i + k];
            }
        }
        i += unit;
    }
    if (consumed != NULL)
        *consumed = i;
    return o;
}

static const char relay_mark[] = " [truncated]";

size_t tg_log_relay_fmt(char *out, const char *who, const char *p, size_t len, size_t body_max,
                        bool truncated)
{
    size_t o = 0;
    memcpy(out, "agent '", 7);
    o += 7;
    o += tg_log_escape(out + o, TG_LOG_RELAY_ID_MAX, who, strlen(who), NULL);
    memcpy(out + o, "': ", 3);
    o += 3;
    if (len > 0 && p[len - 1] == '\r' && !truncated)
        len--;
    size_t used;
    o += tg_log_escape(out + o, body_max, p, len, &used);
    if (truncated || used < len) {
        memcpy(out + o, relay_mark, sizeof(relay_mark) - 1);
        o += sizeof(relay_mark) - 1;
    }
    out[o++] = '\n';
    return o;
}

uint64_t tg_log_dropped(void)
{
    return g_dropped;
}
