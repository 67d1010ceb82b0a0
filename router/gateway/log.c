/* Non-blocking stderr, line formats and levels: see log.h. */
#include "router/gateway/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/jsonw.h"

static uv_pipe_t g_pipe;
static bool g_pipe_ok;
static uint64_t g_dropped;
/* The process's settings: set once at start (tg_log_setup), read by every
 * line; one loop thread writes lines. */
static tg_log_opts_t g_opts = {.format = TG_LOG_TEXT, .min = TG_LOG_INFO};
static const char *g_component = "toolgate";

static const char *const level_names[] = {"debug", "info", "warn", "error"};
/* syslog priorities (sd-daemon(3)): debug 7, info 6, warning 4, err 3 */
static const char level_prio[] = {'7', '6', '4', '3'};

const char *tg_log_level_name(tg_log_level_t lv)
{
    return level_names[lv];
}

int tg_log_parse_level(const char *s, const char *what, tg_log_level_t *out, tg_err_t *err)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (tg_log_level_t)i;
            return 0;
        }
    }
    return tg_err_set(err, -EINVAL, "%s=%.64s: expected debug, info, warn or error", what, s);
}

int tg_log_parse_format(const char *s, const char *what, tg_log_format_t *out, tg_err_t *err)
{
    if (strcmp(s, "text") == 0 || strcmp(s, "json") == 0) {
        *out = s[0] == 't' ? TG_LOG_TEXT : TG_LOG_JSON;
        return 0;
    }
    return tg_err_set(err, -EINVAL, "%s %.64s: expected text or json", what, s);
}

bool tg_log_is_journal(const char *journal_stream, int fd)
{
    unsigned long long dev, ino;
    char tail;
    struct stat st;
    if (journal_stream == NULL || sscanf(journal_stream, "%llu:%llu%c", &dev, &ino, &tail) != 2 ||
        fstat(fd, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* A notice (config/err.h: a setup step gave less than was asked) is a
 * warning in toolgate's log. */
static void notice_to_log(void *arg, const char *msg)
{
    (void)arg;
    tg_log_warn("%s", msg);
}

/* The commands whose lines carry their name as the component. */
static const char *const fronts[] = {"wrap", "serve", "demo", "check", "status", "audit", "token"};

int tg_log_setup(int *argc, char **argv, tg_err_t *err)
{
    tg_log_opts_t o = {.format = TG_LOG_TEXT, .min = TG_LOG_INFO};
    const char *lv = getenv("TOOLGATE_LOG");
    if (lv != NULL && lv[0] != '\0' && tg_log_parse_level(lv, "TOOLGATE_LOG", &o.min, err) < 0)
        return -EINVAL;
    for (int i = 1; i < *argc && strcmp(argv[i], "--") != 0;) {
        const char *v = NULL;
        int take = 0;
        if (strcmp(argv[i], "--log-format") == 0) {
            if (i + 1 >= *argc)
                return tg_err_set(err, -EINVAL, "--log-format needs a value (text or json)");
            v = argv[i + 1];
            take = 2;
        } else if (strncmp(argv[i], "--log-format=", 13) == 0) {
            v = argv[i] + 13;
            take = 1;
        } else {
            i++;
            continue;
        }
        if (tg_log_parse_format(v, "--log-format", &o.format, err) < 0)
            return -EINVAL;
        memmove(&argv[i], &argv[i + take], (size_t)(*argc - i - take + 1) * sizeof(char *));
        *argc -= take;
    }
    o.journal = tg_log_is_journal(getenv("JOURNAL_STREAM"), 2);
    g_opts = o;
    tg_notice_set_sink(notice_to_log, NULL);
    for (size_t i = 0; *argc > 1 && i < sizeof(fronts) / sizeof(fronts[0]); i++)
        if (strcmp(argv[1], fronts[i]) == 0)
            g_component = fronts[i];
    return 0;
}

void tg_log_set_opts(const tg_log_opts_t *o)
{
    g_opts = *o;
}

const tg_log_opts_t *tg_log_opts(void)
{
    return &g_opts;
}

void tg_log_set_component(const char *c)
{
    g_component = c;
}

bool tg_log_enabled(tg_log_level_t lv)
{
    return lv >= g_opts.min;
}

int64_t tg_log_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static void vlog(tg_log_level_t lv, const char *component, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vlog(tg_log_level_t lv, const char *component, const char *fmt, va_list ap)
{
    if (!tg_log_enabled(lv))
        return;
    char msg[TG_LOG_LINE_MAX];
    char line[2 * TG_LOG_LINE_MAX + TG_LOG_RELAY_EXTRA];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof(msg) ? sizeof(msg) - 1 : (size_t)n;
    size_t out = tg_log_format(line, sizeof(line), &g_opts, tg_log_now_ms(), lv,
                               component != NULL ? component : g_component, NULL, msg, len);
    tg_log_raw(line, out);
}

void tg_logf(tg_log_level_t lv, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(lv, component, fmt, ap);
    va_end(ap);
}

#define TG_LOG_AT(name, lv)                                                                        \
    void name(const char *fmt, ...)                                                                \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        vlog(lv, NULL, fmt, ap);                                                                   \
        va_end(ap);                                                                                \
    }
TG_LOG_AT(tg_log, TG_LOG_INFO)
TG_LOG_AT(tg_log_debug, TG_LOG_DEBUG)
TG_LOG_AT(tg_log_warn, TG_LOG_WARN)
TG_LOG_AT(tg_log_error, TG_LOG_ERROR)

int tg_log_failed(const tg_err_t *err, int status)
{
    tg_log_error("%s", err->msg);
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

/* ---- line formats (pure) ---- */

static const char relay_mark[] = " [truncated]";

/* Bytes of <esc>/<n> (escaped text: UTF-8, tab, no other control) that
 * fit in <room> once JSON-escaped (quote, backslash and tab take two), cut
 * at a character boundary. */
static size_t json_fit(const char *esc, size_t n, size_t room)
{
    size_t i = 0, need = 0;
    while (i < n) {
        unsigned char c = (unsigned char)esc[i];
        size_t unit = c < 0x80 ? 1 : tg_jw_utf8_len((const unsigned char *)esc + i, n - i);
        size_t w = c == '"' || c == '\\' || c == '\t' ? 2 : unit == 0 ? 6 : unit;
        if (unit == 0)
            unit = 1;
        if (need + w > room)
            break;
        need += w;
        i += unit;
    }
    return i;
}

/* One line whose message <esc>/<n> is escaped already; <agent> is the
 * escaped agent id or NULL. See tg_log_format. */
static size_t format_escaped(char *out, size_t cap, const tg_log_opts_t *o, int64_t now_ms,
                             tg_log_level_t lv, const char *component, const char *agent,
                             const char *esc, size_t n)
{
    /* Room kept for the tail: the '\n', json's "\"}" and jsonw's NUL. */
    enum { TAIL = 4 };
    tg_jw_t w;
    char ts[40];
    tg_jw_init(&w, ts, sizeof(ts));
    tg_jw_ts(&w, now_ms);
    long tl = tg_jw_end(&w);
    if (tl < 2) {
        memcpy(ts, "\"\"", 3); /* out of range: an empty time */
        tl = 2;
    }
    tg_jw_init(&w, out, cap);
    if (o->journal) {
        char pre[4] = {'<', level_prio[lv], '>', '\0'};
        tg_jw_lit(&w, pre);
    }
    if (o->format == TG_LOG_JSON) {
        tg_jw_lit(&w, "{\"time\":");
        tg_jw_raw(&w, ts, (size_t)tl);
        tg_jw_lit(&w, ",\"level\":\"");
        tg_jw_lit(&w, level_names[lv]);
        tg_jw_lit(&w, "\",\"component\":");
        tg_jw_str(&w, agent != NULL ? "agent" : component);
        if (agent != NULL) {
            tg_jw_lit(&w, ",\"agent\":");
            tg_jw_str(&w, agent);
        }
        tg_jw_lit(&w, ",\"msg\":\"");
        size_t room = w.len + TAIL < cap ? cap - w.len - TAIL : 0;
        tg_jw_esc(&w, esc, json_fit(esc, n, room));
        tg_jw_lit(&w, "\"}\n");
    } else {
        if (!o->journal) {
            tg_jw_raw(&w, ts + 1, (size_t)tl - 2);
            char lvl[8];
            snprintf(lvl, sizeof(lvl), " %-5s ", level_names[lv]);
            tg_jw_lit(&w, lvl);
        }
        if (agent != NULL) {
            tg_jw_lit(&w, "agent=");
            tg_jw_lit(&w, agent);
        } else {
            tg_jw_lit(&w, component);
        }
        tg_jw_lit(&w, ": ");
        size_t room = w.len + TAIL < cap ? cap - w.len - TAIL : 0;
        tg_jw_raw(&w, esc, n < room ? n : room);
        tg_jw_lit(&w, "\n");
    }
    long len = tg_jw_end(&w);
    if (len >= 0)
        return (size_t)len;
    /* Only a component too long for <cap> gets here: the line is cut
     * after what fitted, and still ends. */
    size_t l = cap > 0 ? w.len : 0;
    if (l < cap)
        out[l++] = '\n';
    return l;
}

size_t tg_log_format(char *out, size_t cap, const tg_log_opts_t *o, int64_t now_ms,
                     tg_log_level_t lv, const char *component, const char *agent, const char *msg,
                     size_t len)
{
    char esc[2 * TG_LOG_LINE_MAX], id[TG_LOG_RELAY_ID_MAX + 1];
    size_t n = tg_log_escape(esc, sizeof(esc), msg, len, NULL);
    if (agent != NULL)
        id[tg_log_escape(id, TG_LOG_RELAY_ID_MAX, agent, strlen(agent), NULL)] = '\0';
    return format_escaped(out, cap, o, now_ms, lv, component, agent != NULL ? id : NULL, esc, n);
}

size_t tg_log_relay_fmt(char *out, const tg_log_opts_t *o, int64_t now_ms, const char *who,
                        const char *p, size_t len, size_t body_max, bool truncated)
{
    /* The escaped message goes to the end of <out>, the line to its
     * start: 2 * (body_max + mark) + what a line adds fits before it. */
    size_t cap = TG_LOG_RELAY_CAP(body_max), at = cap - body_max - sizeof(relay_mark);
    char *esc = out + at, id[TG_LOG_RELAY_ID_MAX + 1];
    id[tg_log_escape(id, TG_LOG_RELAY_ID_MAX, who, strlen(who), NULL)] = '\0';
    if (len > 0 && p[len - 1] == '\r' && !truncated)
        len--;
    size_t used;
    size_t n = tg_log_escape(esc, body_max, p, len, &used);
    if (truncated || used < len) {
        memcpy(esc + n, relay_mark, sizeof(relay_mark) - 1);
        n += sizeof(relay_mark) - 1;
    }
    return format_escaped(out, at, o, now_ms, TG_LOG_INFO, NULL, id, esc, n);
}

uint64_t tg_log_dropped(void)
{
    return g_dropped;
}
