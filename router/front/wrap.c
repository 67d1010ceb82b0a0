/* toolgate wrap: one stdio session in front of one agent. See wrap.h. */
#include "router/front/wrap.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "router/front/run.h"
#include "router/log.h"
#include "router/session.h"

/* Owned by tg_wrap_run, freed after the teardown. */
typedef struct wrap_run {
    tg_front_t f; /* first: the loop and the signals */
    tg_gw_t gw;
    tg_agent_t *ag;
    tg_sess_t *sess;
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
    tg_front_signals_close(&r->f);
    tg_gw_stop(gw);
    if (r->ag != NULL)
        tg_agent_close_timers(r->ag);
}

int tg_wrap_run(tg_config_t *cfg)
{
    wrap_run_t *r = tg_front_begin(sizeof(*r));
    if (r == NULL)
        return 1;
    r->gw.wrap_mode = true;
    r->gw.on_session_end = on_session_end;
    r->gw.data = r;

    tg_err_t err;
    int rc = tg_gw_open(&r->gw, &r->f.loop, cfg, &err) < 0 ? tg_log_failed(&err, 2) : 0;
    if (rc == 0 && (r->ag = tg_agent_new(&r->gw, &cfg->agents[0], 1)) == NULL)
        rc = 1;
    if (rc == 0 && (r->sess = tg_sess_stdio(&r->gw, r->ag)) == NULL)
        rc = 2;
    if (rc == 0) {
        tg_front_signals_start(&r->f, on_signal, false);
        if (tg_sess_start(r->sess) < 0 && r->gw.exit_code == 0)
            r->gw.exit_code = 127;
        uv_run(&r->f.loop, UV_RUN_DEFAULT);
        rc = r->gw.exit_code;
    }
    tg_gw_teardown(&r->gw, &r->f.loop);
    tg_agent_free(r->ag);
    free(r);
    return rc;
}
