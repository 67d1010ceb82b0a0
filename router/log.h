/* toolgate's own log lines and the bounded relay of agent stderr, both on
 * toolgate's stderr. Writing never blocks the loop: when stderr is a pipe
 * it is written with uv_try_write and what does not fit is dropped and
 * counted; a file or terminal is written directly (short, bounded lines).
 *
 * Log lines hold only what toolgate chose to print (names from config,
 * numbers, errno texts): never arguments, results, environment values or
 * agent output. They start with "toolgate: ".
 */
#ifndef TG_ROUTER_LOG_H
#define TG_ROUTER_LOG_H

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
/* Raw bytes to stderr (agent stderr relay); returns bytes not written. */
size_t tg_log_raw(const char *p, size_t len);
uint64_t tg_log_dropped(void);

#endif
