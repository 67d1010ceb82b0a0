/* toolgate's own log lines and the bounded relay of agent stderr, both on
 * toolgate's stderr. Writing never blocks the loop: when stderr is a pipe
 * it is written with uv_try_write and what does not fit is dropped and
 * counted; a file or terminal is written directly (short, bounded lines).
 *
 * Log lines hold only what toolgate chose to print (names from config,
 * numbers, errno texts): never arguments, results, environment values or
 * agent output. They start with "toolgate: ".
 *
 * Relayed agent stderr lines start with "agent 'ID': " instead, so no
 * line an agent writes can pass for toolgate's own (a forged
 * "toolgate: SIGHUP ..." shows as "agent 'ID': toolgate: SIGHUP ..."),
 * and their bytes are escaped (tg_log_escape) so no terminal control
 * sequence reaches the reader.
 */
#ifndef TG_ROUTER_LOG_H
#define TG_ROUTER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/err.h"

#define TG_LOG_LINE_MAX 1024 /* fixed internal bound: one log line */

/* Attach stderr to <loop> (call once at start; safe to skip in tools). */
void tg_log_init(uv_loop_t *loop);
void tg_log_close(void);
/* One line "toolgate: ...\n". */
void tg_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Log setup error <err> as one line and return <status>: how a front
 * (wrap, serve) ends when a setup call failed (config/err.h). */
int tg_log_failed(const tg_err_t *err, int status);
/* fixed internal bound: bytes of the escaped agent id in a relay prefix */
#define TG_LOG_RELAY_ID_MAX 128
/* fixed internal bound: prefix "agent '...': " plus " [truncated]\n" */
#define TG_LOG_RELAY_EXTRA (TG_LOG_RELAY_ID_MAX + 32)

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
/* Format one relayed line of agent <who> into <out> (capacity at least
 * <body_max> + TG_LOG_RELAY_EXTRA): "agent '<who>': " (the id escaped and
 * cut at TG_LOG_RELAY_ID_MAX), the line <p>/<len> escaped and cut to at
 * most <body_max> bytes (one trailing '\r' dropped, for CRLF agents),
 * " [truncated]" when it was cut here or <truncated> says the splitter
 * cut it, and '\n'. Pure. Returns the length. */
size_t tg_log_relay_fmt(char *out, const char *who, const char *p, size_t len, size_t body_max,
                        bool truncated);
/* Raw bytes to stderr (agent stderr relay); returns bytes not written. */
size_t tg_log_raw(const char *p, size_t len);
uint64_t tg_log_dropped(void);

#endif
