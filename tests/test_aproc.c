/* router/agent_proc: the pure pieces both serve engines share (stderr
 * line splitting and byte budget, the serve-mode environment, restart
 * arithmetic, the agent lifecycle audit events). */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "router/agent/agent_proc.h"

/* ---- stderr line splitter ---------------------------------------------- */

#define MAX_LINES 16

typedef struct {
    char text[MAX_LINES][64];
    bool trunc[MAX_LINES];
    size_t n;
} lines_seen_t;

static void on_line(void *ctx, const char *p, size_t len, bool truncated)
{
    lines_seen_t *s = ctx;
    cr_assert_lt(s->n, MAX_LINES);
    cr_assert_lt(len, sizeof(s->text[0]));
    memcpy(s->text[s->n], p, len);
    s->text[s->n][len] = '\0';
    s->trunc[s->n] = truncated;
    s->n++;
}

static void feed_str(tg_aproc_lines_t *l, const char *str, lines_seen_t *s)
{
    tg_aproc_lines_feed(l, str, strlen(str), on_line, s);
}

Test(aproc, lines_split_on_newline)
{
    tg_aproc_lines_t l;
    lines_seen_t s = {0};
    tg_aproc_lines_init(&l, 32);
    feed_str(&l, "one\ntwo\n\nthree", &s);
    cr_assert_eq(s.n, 3);
    cr_assert_str_eq(s.text[0], "one");
    cr_assert_str_eq(s.text[1], "two");
    cr_assert_str_eq(s.text[2], "");
    cr_assert_eq(l.len, 5); /* "three" waits for its newline */
    feed_str(&l, "-more\n", &s);
    cr_assert_eq(s.n, 4);
    cr_assert_str_eq(s.text[3], "three-more");
    cr_assert_not(s.trunc[3]);
    tg_aproc_lines_free(&l);
}

Test(aproc, lines_cut_at_max_and_flagged)
{
    tg_aproc_lines_t l;
    lines_seen_t s = {0};
    tg_aproc_lines_init(&l, 4);
    feed_str(&l, "abcdefgh\nxy\n", &s);
    cr_assert_eq(s.n, 2);
    cr_assert_str_eq(s.text[0], "abcd");
    cr_assert(s.trunc[0]);
    cr_assert_str_eq(s.text[1], "xy");
    cr_assert_not(s.trunc[1], "the flag resets per line");
    /* A cut across two reads: the rest of the first read's line and the
     * next read's bytes up to the newline are dropped. */
    feed_str(&l, "abc", &s);
    feed_str(&l, "defg\nz\n", &s);
    cr_assert_eq(s.n, 4);
    cr_assert_str_eq(s.text[2], "abcd");
    cr_assert(s.trunc[2]);
    cr_assert_str_eq(s.text[3], "z");
    tg_aproc_lines_free(&l);
}

Test(aproc, lines_flush_emits_partial_once)
{
    tg_aproc_lines_t l;
    lines_seen_t s = {0};
    tg_aproc_lines_init(&l, 8);
    feed_str(&l, "tail", &s);
    cr_assert_eq(s.n, 0);
    tg_aproc_lines_flush(&l, on_line, &s);
    cr_assert_eq(s.n, 1);
    cr_assert_str_eq(s.text[0], "tail");
    tg_aproc_lines_flush(&l, on_line, &s);
    cr_assert_eq(s.n, 1, "nothing pending: no empty line at EOF");
    tg_aproc_lines_free(&l);
    cr_assert_null(l.buf);
}

Test(aproc, lines_without_buffer_drop_bytes)
{
    tg_aproc_lines_t l = {.buf = NULL, .len = 0, .max = 8, .trunc = false};
    lines_seen_t s = {0};
    feed_str(&l, "lost\n", &s);
    cr_assert_eq(s.n, 0);
}

/* ---- stderr byte budget ------------------------------------------------ */

Test(aproc, budget_counts_newline_and_marker)
{
    tg_aproc_errbudget_t b = {0};
    /* 10 + 1 (newline) = 11 of 30 */
    cr_assert(tg_aproc_err_charge(&b, 5000, 30, 10, false));
    cr_assert_eq(b.window_start, 5000);
    cr_assert_eq(b.window_bytes, 11);
    /* 5 + 1 + 12 (" [truncated]") = 18: 29 of 30 */
    cr_assert(tg_aproc_err_charge(&b, 5100, 30, 5, true));
    cr_assert_eq(b.window_bytes, 29);
    /* 1 + 1 = 2 would make 31: dropped, counted */
    cr_assert_not(tg_aproc_err_charge(&b, 5200, 30, 1, false));
    cr_assert_eq(b.window_bytes, 29);
    cr_assert_eq(b.dropped, 2);
    /* 0 + 1 fits exactly */
    cr_assert(tg_aproc_err_charge(&b, 5300, 30, 0, false));
    cr_assert_eq(b.window_bytes, 30);
}

Test(aproc, budget_window_resets_after_a_second)
{
    tg_aproc_errbudget_t b = {0};
    cr_assert(tg_aproc_err_charge(&b, 1000, 10, 9, false));
    cr_assert_not(tg_aproc_err_charge(&b, 1999, 10, 0, false));
    cr_assert_eq(b.dropped, 1);
    cr_assert(tg_aproc_err_charge(&b, 2000, 10, 9, false));
    cr_assert_eq(b.window_start, 2000);
    cr_assert_eq(b.window_bytes, 10);
    cr_assert_eq(b.dropped, 1);
}

Test(aproc, budget_line_larger_than_budget_is_dropped_whole)
{
    tg_aproc_errbudget_t b = {0};
    cr_assert_not(tg_aproc_err_charge(&b, 0, 100, 200, true));
    cr_assert_eq(b.window_bytes, 0);
    cr_assert_eq(b.dropped, 213);
}

/* ---- environment ------------------------------------------------------- */

static size_t env_count(char **env)
{
    size_t n = 0;
    while (env[n] != NULL)
        n++;
    return n;
}

Test(aproc, env_pass_then_set)
{
    static char p0[] = "TG_APROC_T_A", p1[] = "TG_APROC_T_UNSET", s0[] = "X=1", s1[] = "Y=two=2";
    char *pass[] = {p0, p1, NULL};
    char *set[] = {s0, s1, NULL};
    tg_agent_cfg_t a;
    memset(&a, 0, sizeof(a));
    a.env_pass = pass;
    a.env_set = set;
    cr_assert_eq(setenv("TG_APROC_T_A", "alpha", 1), 0);
    cr_assert_eq(unsetenv("TG_APROC_T_UNSET"), 0);
    char **env = tg_aproc_env_build(&a, NULL, NULL);
    cr_assert_not_null(env);
    cr_assert_eq(env_count(env), 3, "an unset env.pass name is left out");
    cr_assert_str_eq(env[0], "TG_APROC_T_A=alpha");
    cr_assert_str_eq(env[1], "X=1");
    cr_assert_str_eq(env[2], "Y=two=2");
    tg_aproc_env_free(env);
}

Test(aproc, env_empty_config)
{
    tg_agent_cfg_t a;
    memset(&a, 0, sizeof(a));
    char **env = tg_aproc_env_build(&a, NULL, NULL);
    cr_assert_not_null(env);
    cr_assert_eq(env_count(env), 0);
    tg_aproc_env_free(env);
    tg_aproc_env_free(NULL);
}

Test(aproc, env_extra_wins_over_config)
{
    static char p0[] = "TG_APROC_T_TOK", p1[] = "TG_APROC_T_B";
    static char s0[] = "TG_APROC_T_TOK=forged", s1[] = "TG_APROC_T_TOKEN=kept", s2[] = "Z=3";
    char *pass[] = {p0, p1, NULL};
    char *set[] = {s0, s1, s2, NULL};
    tg_agent_cfg_t a;
    memset(&a, 0, sizeof(a));
    a.env_pass = pass;
    a.env_set = set;
    cr_assert_eq(setenv("TG_APROC_T_TOK", "inherited", 1), 0);
    cr_assert_eq(setenv("TG_APROC_T_B", "b", 1), 0);
    char **env = tg_aproc_env_build(&a, "TG_APROC_T_TOK", "secret");
    cr_assert_not_null(env);
    cr_assert_eq(env_count(env), 4);
    cr_assert_str_eq(env[0], "TG_APROC_T_B=b");
    cr_assert_str_eq(env[1], "TG_APROC_T_TOKEN=kept", "only the exact name is left out");
    cr_assert_str_eq(env[2], "Z=3");
    cr_assert_str_eq(env[3], "TG_APROC_T_TOK=secret");
    tg_aproc_env_free(env);
}

/* ---- restarts ---------------------------------------------------------- */

Test(aproc, recent_counts_within_window)
{
    uint64_t at[TG_APROC_RESTART_LOG] = {0};
    uint32_t n = 0;
    tg_aproc_restart_note(at, &n, 1000);
    tg_aproc_restart_note(at, &n, 5000);
    tg_aproc_restart_note(at, &n, 9000);
    cr_assert_eq(n, 3);
    cr_assert_eq(tg_aproc_recent(at, n, 10000, 6000), 2); /* 5000 and 9000 */
    cr_assert_eq(tg_aproc_recent(at, n, 10000, 9001), 3);
    cr_assert_eq(tg_aproc_recent(at, n, 10000, 1000), 0);
    cr_assert_eq(tg_aproc_recent(at, 0, 10000, 60000), 0);
}

Test(aproc, restart_log_is_a_ring)
{
    uint64_t at[TG_APROC_RESTART_LOG] = {0};
    uint32_t n = 0;
    for (uint32_t i = 0; i < TG_APROC_RESTART_LOG + 3; i++)
        tg_aproc_restart_note(at, &n, 100 + i);
    cr_assert_eq(n, TG_APROC_RESTART_LOG + 3);
    cr_assert_eq(at[0], 100 + TG_APROC_RESTART_LOG);
    cr_assert_eq(at[2], 102 + TG_APROC_RESTART_LOG);
    cr_assert_eq(at[3], 103);
    cr_assert_eq(tg_aproc_recent(at, n, 1000, 100000), TG_APROC_RESTART_LOG);
}

Test(aproc, backoff_doubles_to_max)
{
    tg_agent_cfg_t a;
    memset(&a, 0, sizeof(a));
    a.backoff_initial_ms = 100;
    a.backoff_max_ms = 1000;
    cr_assert_eq(tg_aproc_backoff(&a, 0), 100);
    cr_assert_eq(tg_aproc_backoff(&a, 1), 200);
    cr_assert_eq(tg_aproc_backoff(&a, 3), 800);
    cr_assert_eq(tg_aproc_backoff(&a, 4), 1000);
    cr_assert_eq(tg_aproc_backoff(&a, 40), 1000);
    a.backoff_initial_ms = 5000;
    cr_assert_eq(tg_aproc_backoff(&a, 0), 1000, "initial above max: max");
}

/* ---- audit events ------------------------------------------------------ */

Test(aproc, exited_event_reasons)
{
    tg_audit_ev_t ev;
    tg_aproc_ev_exited(&ev, "a1", 42, false, 0, 0);
    cr_assert_str_eq(ev.event, "agent.exited");
    cr_assert_str_eq(ev.agent, "a1");
    cr_assert_eq(ev.pid, 42);
    cr_assert_eq(ev.exit.code, 0);
    cr_assert_eq(ev.exit.signal, TG_AUDIT_ABSENT);
    cr_assert_str_eq(ev.exit.reason, "exited");
    tg_aproc_ev_exited(&ev, "a1", 42, false, 0, 3);
    cr_assert_eq(ev.exit.code, 3);
    cr_assert_str_eq(ev.exit.reason, "failed");
    tg_aproc_ev_exited(&ev, "a1", 42, false, 11, 0);
    cr_assert_eq(ev.exit.code, TG_AUDIT_ABSENT);
    cr_assert_eq(ev.exit.signal, 11);
    cr_assert_str_eq(ev.exit.reason, "crashed");
    tg_aproc_ev_exited(&ev, "a1", 42, true, 9, 0);
    cr_assert_eq(ev.exit.signal, 9);
    cr_assert_str_eq(ev.exit.reason, "killed");
}

Test(aproc, started_and_restarting_events)
{
    tg_audit_ev_t ev;
    char enforced[] = "{\"memory\":1}";
    tg_aproc_ev_started(&ev, "a2", 7, 2, enforced);
    cr_assert_str_eq(ev.event, "agent.started");
    cr_assert_str_eq(ev.agent, "a2");
    cr_assert_eq(ev.pid, 7);
    cr_assert_eq(ev.attempt, 2);
    cr_assert_eq(ev.enforced_json, enforced);
    char none[] = "";
    tg_aproc_ev_started(&ev, "a2", 7, 0, none);
    cr_assert_null(ev.enforced_json, "nothing enforced: the field is left out");
    tg_aproc_ev_restarting(&ev, "a3", 4, 800);
    cr_assert_str_eq(ev.event, "agent.restarting");
    cr_assert_str_eq(ev.agent, "a3");
    cr_assert_eq(ev.attempt, 4);
    cr_assert_eq(ev.backoff_ms, 800);
}
