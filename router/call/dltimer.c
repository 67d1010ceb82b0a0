/* Call deadlines on libuv (see dltimer.h). */
#include "router/call/dltimer.h"

#include <stddef.h>

void tg_dlt_init(tg_dlt_t *t, tg_dlt_expire_fn expire, void *data)
{
    tg_dl_init(&t->list);
    t->ready = false;
    t->armed = 0;
    t->expire = expire;
    t->data = data;
}

/* Expire every node due by now, in order (an expiry may answer, free or
 * re-arm other calls, so the head is read again each time), then arm for
 * the next. */
static void on_timer(uv_timer_t *h)
{
    tg_dlt_t *t = (tg_dlt_t *)(void *)((char *)h - offsetof(tg_dlt_t, timer));
    uint64_t now = uv_now(h->loop);
    t->armed = 0;
    for (;;) {
        tg_dl_node_t *x = tg_dl_first(&t->list);
        if (x == NULL)
            return;
        if (x->due > now) {
            t->armed = x->due;
            uv_timer_start(h, on_timer, x->due - now, 0);
            return;
        }
        tg_dl_remove(&t->list, x);
        t->expire(t, x);
    }
}

int tg_dlt_arm(tg_dlt_t *t, uv_loop_t *loop, tg_dl_node_t *x, tg_dlt_own_t *own,
               uv_timer_cb own_cb, void *own_data, uint64_t ms)
{
    uint64_t now = uv_now(loop);
    uint64_t due = ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
    int inited = 0;
    /* A re-arm (a zombie's grace) replaces the deadline, wherever it was. */
    if (tg_dl_linked(&t->list, x))
        tg_dl_remove(&t->list, x);
    if (own->ready)
        uv_timer_stop(&own->timer);
    if (tg_dl_insert(&t->list, x, due, TG_DLT_MAX_STEPS)) {
        if (!t->ready) {
            uv_timer_init(loop, &t->timer);
            t->timer.data = t->data;
            t->ready = true;
            inited = 1;
        }
        if (t->armed == 0 || due < t->armed) {
            t->armed = due;
            uv_timer_start(&t->timer, on_timer, ms, 0);
        }
        return inited;
    }
    if (!own->ready) {
        uv_timer_init(loop, &own->timer);
        own->ready = true;
        inited = 1;
    }
    own->timer.data = own_data;
    uv_timer_start(&own->timer, own_cb, ms, 0);
    return inited;
}

void tg_dlt_disarm(tg_dlt_t *t, tg_dl_node_t *x, tg_dlt_own_t *own)
{
    if (tg_dl_linked(&t->list, x)) {
        tg_dl_remove(&t->list, x);
        if (t->list.n == 0 && t->armed != 0) {
            t->armed = 0;
            uv_timer_stop(&t->timer);
        }
    }
    if (own->ready)
        uv_timer_stop(&own->timer);
}
