/* What the runs of the fronts share: see run.h. */
#include "router/front/run.h"

#include <signal.h>
#include <stdlib.h>

void *tg_front_begin(size_t size)
{
    tg_front_t *f = size >= sizeof(*f) ? calloc(1, size) : NULL;
    if (f == NULL || uv_loop_init(&f->loop) != 0) {
        free(f);
        return NULL;
    }
    signal(SIGPIPE, SIG_IGN);
    uv_signal_init(&f->loop, &f->sig_term);
    uv_signal_init(&f->loop, &f->sig_int);
    uv_signal_init(&f->loop, &f->sig_hup);
    f->sig_term.data = f->sig_int.data = f->sig_hup.data = f;
    return f;
}

void tg_front_signals_start(tg_front_t *f, uv_signal_cb cb, bool hup)
{
    uv_signal_start(&f->sig_term, cb, SIGTERM);
    uv_signal_start(&f->sig_int, cb, SIGINT);
    if (hup)
        uv_signal_start(&f->sig_hup, cb, SIGHUP);
}

static void close_once(uv_signal_t *s)
{
    if (!uv_is_closing((uv_handle_t *)s))
        uv_close((uv_handle_t *)s, NULL);
}

void tg_front_signals_close(tg_front_t *f)
{
    close_once(&f->sig_term);
    close_once(&f->sig_int);
    close_once(&f->sig_hup);
}
