/* The setup error: one type for every fallible setup call of config/,
 * limits/, audit/ and the router's setup layer (admin, cli, fronts,
 * gateway).
 *
 * Error convention (setup layer), after crun's libcrun_error_t:
 *   - a fallible setup function takes a `tg_err_t *err` as its last
 *     argument and returns 0 on success, or a negative value on failure:
 *     -1, or a negative errno where its contract says which (the audit,
 *     admin and store openers do);
 *   - <err> is filled on failure only, with one line that says what and
 *     where: "FILE:LINE:COL: json.path: what is wrong (expected ...)" for
 *     config, "audit: PATH: why", "admin ADDR: why", "store: why";
 *   - the function itself never logs and never exits: whoever called it
 *     decides (the CLI prints "toolgate: <msg>" and exits 2, a reload logs
 *     and keeps the old config, a test asserts on the text);
 *   - `return tg_err_set(err, -EINVAL, "admin %s: ...", addr);` is one line.
 * Runtime calls (on the loop, per frame or call) do not use it: they
 * return 0 or a negative errno, as libuv does.
 *
 * A message never holds a secret: URLs are redacted or not echoed,
 * environment values are never shown.
 *
 * Notices: a setup step that succeeds but changed what was asked for (a
 * manifest's request capped by the operator's value or the default, an
 * agent's rlimit clamped to toolgate's own hard limit) says so through
 * tg_notice(): one line, to the sink the process chose
 * (tg_notice_set_sink: the toolgate binary makes it a warn line of its
 * log; by default "toolgate: " and the message in one write(2) to stderr,
 * dropped rather than waited for when stderr is full). A notice never
 * fails or changes the call that makes it; the same secret rule holds.
 */
#ifndef TG_CONFIG_ERR_H
#define TG_CONFIG_ERR_H

#define TG_ERR_MAX 512 /* fixed internal bound: error message buffer */

typedef struct tg_err {
    char msg[TG_ERR_MAX];
} tg_err_t;

/* Fill <err> (when not NULL) with the printf-style message and return
 * <rc>, so that a failure is reported in one statement. */
int tg_err_set(tg_err_t *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Where notices go: <fn> gets <arg> and the message (without "toolgate: "
 * and newline). NULL restores the default (stderr). Not thread-safe: set
 * it once, before the loop runs. */
typedef void (*tg_notice_fn)(void *arg, const char *msg);
void tg_notice_set_sink(tg_notice_fn fn, void *arg);

/* A sink that drops every notice (a command that shows the same facts in
 * its own report). */
void tg_notice_discard(void *arg, const char *msg);

/* Send one notice, printf-style, to the sink. */
void tg_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
