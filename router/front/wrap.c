/* toolgate wrap: one stdio session in front of one agent. See wrap.h. */
#include "router/front/wrap.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "router/log.h"
#include "router/session.h"

typedef struct wrap_run {
    tg_gw_t gw;
    tg_agent_t *ag;
    tg_sess_t *sess;
    uv_signal_t sig_term, sig_int;
} wrap_run_t;

static void on_signal(uv_signal_t *s, int signum)
{
    wrap_run_t *r = s->data;
    if (r->sess == NULL)
        return;
    if (tg_sess_stopping(r->sess) && signum == SIGINT) {
        /* A second Ctrl-C: do not wait for the grace period. */
        tg_sess_kill(r->sess);
        return;
    }
    tg_sess_shutdown(r->sess, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* The session is the router: when it ends, so does everything. */
static void on_session_end(tg_gw_t *gw, tg_sess_t *s)
{
    wrap_run_t *r = gw->data;
    (void)s;
    r->sess = NULL;
    /* On error paths the teardown's close-all may have closed them. */
    if (!uv_is_closing((uv_handle_t *)&r->sig_term))
        uv_close((uv_handle_t *)&r->sig_term, NULL);
    if (!uv_is_closing((uv_handle_t *)&r->sig_int))
        uv_close((uv_handle_t *)&r->sig_int, NULL);
    tg_gw_stop(gw);
    if (r->ag != NULL)
        tg_agent_close_timers(r->ag);
}

int tg_wrap_run(tg_config_t *cfg)
{
    wrap_run_t *r = calloc(1, sizeof(*r));
    uv_loop_t loop;
    tg_err_t err;
    int rc;

    if (r == NULL || uv_loop_init(&loop) != 0) {
        free(r);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    r->gw.wrap_mode = true;
    r->gw.on_session_end = on_session_end;
    r->gw.data = r;
    uv_signal_init(&loop, &r->sig_term);
    uv_signal_init(&loop, &r->sig_int);
    r->sig_term.data = r->sig_int.data = r;

    rc = tg_gw_open(&r->gw, &loop, cfg, &err) < 0 ? tg_log_failed(&err, 2) : 0;
    if (rc == 0 && (r->ag = tg_agent_new(&r->gw, &cfg->agents[0], 1)) == NULL)
        rc = 1;
    if (rc == 0 && (r->sess = tg_sess_stdio(&r->gw, r->ag)) == NULL)
        rc = 2;
    if (rc == 0) {
        uv_signal_start(&r->sig_term, on_signal, SIGTERM);
        uv_signal_start(&r->sig_int, on_signal, SIGINT);
        if (tg_sess_start(r->sess) < 0 && r->gw.exit_code == 0)
            r->gw.exit_code = 127;
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = r->gw.exit_code;
    }
    tg_gw_teardown(&r->gw, &loop);
    tg_agent_free(r->ag);
    free(r);
    return rc;
}
