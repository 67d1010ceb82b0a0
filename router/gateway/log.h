/* toolgate's own log lines and the bounded relay of agent stderr, both on
 * toolgate's stderr. Writing never blocks the loop: when stderr is a pipe
 * it is written with uv_try_write and what does not fit is dropped and
 * counted; a file or terminal is written directly (short, bounded lines).
 *
 * Every line carries a level and a component, one line per event:
 *   text     2026-11-26T17:20:01.123Z warn  serve: MESSAGE
 *   json     {"time":"2026-11-26T17:20:01.123Z","level":"warn",
 *             "component":"serve","msg":"MESSAGE"}
 *   journal  <4>serve: MESSAGE   (stderr is the journal: JOURNAL_STREAM
 *            names it; the journal keeps the time and, from <N>, the
 *            level; json lines get the <N> prefix too)
 * The format comes from --log-format text|json, the lowest level written
 * from TOOLGATE_LOG=debug|info|warn|error (default info).
 *
 * Log lines hold only what toolgate chose to print (names from config,
 * numbers, errno texts): never arguments, results, environment values or
 * agent output. Their component is the front (wrap, serve, ...) unless a
 * call names another.
 *
 * Relayed agent stderr lines (level info) have the component "agent=ID"
 * instead (json: "component":"agent","agent":"ID"), a component toolgate's
 * own lines never use, so no line an agent writes can pass for toolgate's
 * own (a forged "serve: SIGHUP ..." shows as "agent=ID: serve: SIGHUP
 * ..."), and their bytes are escaped (tg_log_escape) so no terminal
 * control sequence reaches the reader. Messages are escaped the same way,
 * and json text is then JSON-escaped (config/jsonw.h): every line parses.
 */
#ifndef TG_ROUTER_LOG_H
#define TG_ROUTER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/err.h"

#define TG_LOG_LINE_MAX 1024 /* fixed internal bound: one log message */

typedef enum tg_log_level {
    TG_LOG_DEBUG,
    TG_LOG_INFO,
    TG_LOG_WARN,
    TG_LOG_ERROR,
} tg_log_level_t;

typedef enum tg_log_format { TG_LOG_TEXT, TG_LOG_JSON } tg_log_format_t;

/* How lines are written (the process-wide one: tg_log_setup). */
typedef struct tg_log_opts {
    tg_log_format_t format;
    tg_log_level_t min; /* lines below are not written */
    bool journal;       /* stderr is the journal: "<N>" prefix, no text time */
} tg_log_opts_t;

/* "debug", "info", "warn", "error". */
const char *tg_log_level_name(tg_log_level_t lv);
/* <s> as a level or format name: 0, or -EINVAL (<err> says what is
 * expected, naming <what>: "TOOLGATE_LOG", "--log-format"). */
int tg_log_parse_level(const char *s, const char *what, tg_log_level_t *out, tg_err_t *err);
int tg_log_parse_format(const char *s, const char *what, tg_log_format_t *out, tg_err_t *err);
/* Whether <journal_stream> ("DEV:INODE", $JOURNAL_STREAM) names the file
 * <fd> is open on, as systemd says to check: a child whose stderr was
 * redirected elsewhere inherits the variable but not the journal. */
bool tg_log_is_journal(const char *journal_stream, int fd);

/* Take the process's log settings: --log-format VALUE (or
 * --log-format=VALUE) anywhere in argv[1..] before "--", removed from
 * argv (*<argc> updated), $TOOLGATE_LOG and $JOURNAL_STREAM; the
 * component is the command (argv[1]) when it is one; notices
 * (tg_notice) become warn lines. 0, or -EINVAL with <err> set (a bad
 * value: usage error). */
int tg_log_setup(int *argc, char **argv, tg_err_t *err);
/* Set the settings directly (tests, tools). */
void tg_log_set_opts(const tg_log_opts_t *o);
const tg_log_opts_t *tg_log_opts(void);
/* The component of lines that name none (the front: "wrap", "serve");
 * <c> must outlive its use (a literal). Default "toolgate". */
void tg_log_set_component(const char *c);
bool tg_log_enabled(tg_log_level_t lv);

/* Attach stderr to <loop> (call once at start; safe to skip in tools). */
void tg_log_init(uv_loop_t *loop);
void tg_log_close(void);
/* One line at <lv> from <component> (NULL: the default component). */
void tg_logf(tg_log_level_t lv, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One line from the default component: tg_log at info, the others at
 * their level. */
void tg_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tg_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tg_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tg_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Log setup error <err> as one error line and return <status>: how a
 * front (wrap, serve) ends when a setup call failed (config/err.h). */
int tg_log_failed(const tg_err_t *err, int status);
/* fixed internal bound: bytes of the escaped agent id in a relay line */
#define TG_LOG_RELAY_ID_MAX 128
/* fixed internal bound: what a line adds to its escaped message (time,
 * level, component or agent id JSON-escaped, json keys, mark, newline) */
#define TG_LOG_RELAY_EXTRA (2 * TG_LOG_RELAY_ID_MAX + 192)
/* Capacity a relay line of <body_max> message bytes needs (the escaped
 * message, then the line, whose json escaping at most doubles it). */
#define TG_LOG_RELAY_CAP(body_max) (3 * (size_t)(body_max) + TG_LOG_RELAY_EXTRA)

/* Escape <len> bytes at <p> into <out> (capacity <cap>), pure: valid
 * UTF-8 text and tab pass as they are; every other C0 control byte, DEL,
 * the C1 controls (U+0080..U+009F, which some terminals obey as ESC
 * sequences), the bidirectional overrides and isolates (U+202A..U+202E,
 * U+2066..U+2069) and every byte that is not part of valid UTF-8 (stray
 * continuation bytes, overlong forms, surrogates, beyond U+10FFFF, a
 * sequence cut short) are written as "\xNN" per byte. Backslash itself
 * passes. Stops before a unit that would not fit; <*consumed> (may be
 * NULL) gets the input bytes written. Returns the output length (no NUL
 * is written). */
size_t tg_log_escape(char *out, size_t cap, const char *p, size_t len, size_t *consumed);
/* Format one line into <out> (capacity <cap>) as <o> says, at time
 * <now_ms> (ms since the epoch): level <lv>, component <component> (or,
 * when <agent> is not NULL, the agent's: "agent=ID", the id escaped and
 * cut at TG_LOG_RELAY_ID_MAX), message <msg>/<len> escaped (tg_log_escape).
 * Pure. Returns the length, '\n' included; a line that does not fit is
 * cut (text) or has its message cut (json) so it still ends and parses:
 * <cap> >= 2 * <len> + TG_LOG_RELAY_EXTRA never cuts. */
size_t tg_log_format(char *out, size_t cap, const tg_log_opts_t *o, int64_t now_ms,
                     tg_log_level_t lv, const char *component, const char *agent, const char *msg,
                     size_t len);
/* Format one relayed line of agent <who> into <out> (capacity at least
 * TG_LOG_RELAY_CAP(<body_max>)) as tg_log_format at level info: the line
 * <p>/<len> escaped and cut to at most <body_max> bytes (one trailing
 * '\r' dropped, for CRLF agents), " [truncated]" when it was cut here or
 * <truncated> says the splitter cut it. Pure. Returns the length. */
size_t tg_log_relay_fmt(char *out, const tg_log_opts_t *o, int64_t now_ms, const char *who,
                        const char *p, size_t len, size_t body_max, bool truncated);
/* The wall clock in ms since the epoch (line times). */
int64_t tg_log_now_ms(void);
/* Raw bytes to stderr (agent stderr relay); returns bytes not written. */
size_t tg_log_raw(const char *p, size_t len);
uint64_t tg_log_dropped(void);

#endif
