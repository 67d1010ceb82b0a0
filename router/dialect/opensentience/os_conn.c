/* Caller connections of the OpenSentience engine (see os_gw.c for the
 * invariants): accepting, reading and framing, refusals, idle timers,
 * write queues and flow control between callers and agents. */
#define _GNU_SOURCE /* explicit_bzero */
#include "router/dialect/opensentience/os_gw_impl.h"
#include "router/gateway/list.h"

#include <poll.h>

/* ---- caller connections ----------------------------------------------- */

/* The caller left (or is being dropped): its calls are cancelled, the
 * agent told, their slots kept until the agent confirms. */
static void conn_forget_calls(os_conn_t *k)
{
    while (k->calls != NULL) {
        os_call_t *c = k->calls;
        switch (c->cc.state) {
        case TG_CALL_RATE: {
            /* The store's answer will find nothing. */
            os_agent_t *ag = c->ag;
            osg_audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_gone");
            osg_call_free(c);
            osg_agent_check_drained(ag);
            break;
        }
        case TG_CALL_SLOT:
        case TG_CALL_QUEUED:
            osg_audit_call(c, "call.cancelled", "cancelled", NULL, "queued", "caller_gone");
            tg_pipe_release(&c->cc);
            break;
        case TG_CALL_INFLIGHT:
            osg_audit_call(c, "call.cancelled", "cancelled", NULL, "cancelled", "caller_gone");
            osg_send_cancel(c, "caller_gone");
            osg_call_leave_caller(c);
            osg_zombie(c, "cancelled");
            break;
        default:
            osg_call_leave_caller(c);
            break;
        }
    }
    for (size_t i = 0; i < k->g->nagents; i++)
        tg_pipe_pump(&k->g->agents[i]->r, k->g);
}

static void conn_closed(uv_handle_t *h)
{
    os_conn_t *k = h->data;
    if (--k->open > 0)
        return;
    tg_osgw_t *g = k->g;
    TG_LIST_UNLINK(g->conns, k, prev, next);
    if (k->over && g->nover > 0)
        g->nover--;
    if (k->refused && g->nrefused > 0)
        g->nrefused--;
    if (k->ls != NULL) {
        k->ls->open--;
        reg_set(g, k->ls->reg, k->ls->open);
    }
    tg_audit_room_cancel(&k->audit_room);
    tg_gw_conn_ended(g->gw);
    tg_in_free(&k->rd);
    tg_out_free(&k->wr);
    free(k->pipe); /* the accepted block: the pipe is its first member */
    free(k);
    osg_flow(g);
    osg_g_check_idle(g);
}

static void conn_close_now(os_conn_t *k)
{
    if (k->closed)
        return;
    k->closed = true;
    k->ending = true;
    conn_forget_calls(k);
    uv_timer_stop(&k->idle);
    k->wr.stream = NULL;
    uv_close((uv_handle_t *)k->pipe, conn_closed);
    uv_close((uv_handle_t *)&k->idle, conn_closed);
}

void osg_refuse_now(tg_osgw_t *g, os_conn_t *k)
{
    tg_denial_t d;
    char reqid[32];
    osg_refusal_denial(k, &d, reqid);
    osg_deny_to(g, k, NULL, NULL, &d);
    osg_conn_end(k);
    osg_g_flush(g);
}

void osg_on_conn_idle(uv_timer_t *t);

/* The denial a refused connection answers with. */
void osg_refusal_denial(const os_conn_t *k, tg_denial_t *d, char reqid[32])
{
    osg_denial_init(NULL, d, k->rcode, NULL, reqid);
    d->limit = k->rlimit;
    d->scope = k->rscope;
    d->config_path = k->rpath;
    d->observed = k->robserved;
    d->cap = k->rcap;
    d->unit = k->rcode == TG_DENY_CONCURRENCY ? "connections" : NULL;
    d->detail = k->rdetail;
}

/* Stop reading <k>, cancel its calls, and close it once what was written
 * to it is out (bounded by idle_timeout). */
void osg_conn_end(os_conn_t *k)
{
    if (k->closed)
        return;
    if (!k->ending) {
        k->ending = true;
        uv_read_stop((uv_stream_t *)k->pipe);
        conn_forget_calls(k);
        (void)tg_out_flush(&k->wr);
        /* Bounded: a caller that does not read what is left is dropped. */
        uv_timer_start(&k->idle, osg_on_conn_idle, k->g->cfg->idle_timeout_ms, 0);
    }
    if (k->wr.queued_bytes == 0 && k->wr.npieces == 0)
        conn_close_now(k);
}

void osg_on_conn_idle(uv_timer_t *t)
{
    os_conn_t *k = t->data;
    tg_osgw_t *g = k->g;
    if (k->ending) {
        conn_close_now(k); /* its output did not drain in time */
        return;
    }
    if (k->refused) {
        /* It sent no call to refuse in time: the refusal, with no call_id. */
        osg_refuse_now(g, k);
        return;
    }
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "invalid";
    if (k->over) {
        ev.reason = "caller_not_reading";
        tg_log_warn("a caller on %s did not read its answers for %" PRIu64
                    " ms (router.idle_timeout): disconnecting it",
                    k->path, g->cfg->idle_timeout_ms);
        emit(g, &ev);
        conn_close_now(k);
    } else {
        /* The frame clock (conn_idle_arm): a frame begun frame_timeout
         * ago is not complete. The event counts the bytes held, never
         * shows them. */
        uint64_t cap = g->cfg->frame_timeout_ms;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "a frame begun %" PRIu64 " ms ago is not complete (router.frame_timeout); closing",
                 cap);
        osg_conn_error(g, k, "protocol.frame_timeout", msg);
        reg_set(g, g->gw->reg_frame_time, cap);
        ev.reason = "frame_timeout";
        ev.bytes_in = (int64_t)(k->rd.len - k->rd.pos);
        ev.limit.type = "frame_timeout";
        ev.limit.scope = "session";
        ev.limit.observed = (int64_t)(uv_now(g->gw->loop) - k->frame_t0);
        ev.limit.cap = (int64_t)cap;
        emit(g, &ev);
        osg_conn_end(k);
    }
    osg_g_flush(g);
}

/* Arm the connection's clock. While a frame is unfinished it is the
 * frame clock (router.frame_timeout): it runs from the frame's first byte
 * (a length prefix's included), not from the last read (a caller dripping
 * a byte at a time gets no more time than one sending nothing), restarts
 * only when a frame was completed, and stops while toolgate itself does
 * not read the caller (an agent lags, frames wait for the audit queue):
 * that time is not the caller's. While the output is over its mark it is
 * the idle clock (router.idle_timeout: a caller that sends but never
 * reads is dropped all the same). The registry's caller.frame_timeout_ms
 * is told how long the frame that completed took (0: it came whole). */
static void conn_idle_arm(os_conn_t *k)
{
    if (k->ending || k->refused)
        return;
    tg_osgw_t *g = k->g;
    bool active = uv_is_active((uv_handle_t *)&k->idle);
    uint64_t now = uv_now(g->gw->loop);
    if (k->frames != k->idle_frames && !k->over) {
        reg_set(g, g->gw->reg_frame_time, active && k->frame_t0 != 0 ? now - k->frame_t0 : 0);
        k->frame_t0 = 0;
    }
    if (k->over) {
        if (!active || k->frame_t0 != 0)
            uv_timer_start(&k->idle, osg_on_conn_idle, g->cfg->idle_timeout_ms, 0);
        k->frame_t0 = 0;
    } else if (k->held || k->paused) {
        uv_timer_stop(&k->idle); /* toolgate holds it back: no clock runs */
        k->frame_t0 = 0;
    } else if (k->rd.len > k->rd.pos || k->lp.skipping) {
        if (k->frame_t0 == 0 || k->frames != k->idle_frames) {
            k->frame_t0 = now != 0 ? now : 1;
            uv_timer_start(&k->idle, osg_on_conn_idle, g->cfg->frame_timeout_ms, 0);
        }
    } else {
        uv_timer_stop(&k->idle);
        k->frame_t0 = 0;
    }
    k->idle_frames = k->frames;
}

/* A refused connection: its calls are answered with the refusal, then it
 * ends (after the first answer, as an MCP refusal does). */
static void refuse_call(os_conn_t *k, const char *frame, const tg_os_env_t *env)
{
    os_call_t tmp;
    tg_denial_t d;
    char reqid[32];
    memset(&tmp, 0, sizeof(tmp));
    echo_set(&tmp.cid, frame, env->call_id);
    echo_set(&tmp.msg_id, frame, env->id);
    echo_set(&tmp.request_id, frame, env->request_id);
    echo_set(&tmp.correlation_id, frame, env->correlation_id);
    osg_refusal_denial(k, &d, reqid);
    osg_deny_to(k->g, k, &tmp, &tmp.cid, &d);
    tg_audit_ev_t ev;
    char cid[OS_ECHO_MAX];
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "denied";
    ev.code = tg_deny_name(k->rcode);
    ev.limit.type = d.limit;
    ev.limit.scope = d.scope;
    ev.limit.observed = d.observed == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d.observed;
    ev.limit.cap = d.cap == TG_DENY_ABSENT ? TG_AUDIT_ABSENT : d.cap;
    ev.call_id = echo_text(&tmp.cid, cid);
    emit(k->g, &ev);
    osg_conn_end(k);
}

static void on_caller_frame(os_conn_t *k, tg_block_t *b, const char *frame, size_t len)
{
    tg_osgw_t *g = k->g;
    tg_os_env_t env;
    reg_set(g, g->gw->reg_frame_in, len);
    if (tg_os_scan(frame, len, &env) < 0) {
        osg_conn_error(g, k, "protocol.invalid_frame",
                   "the frame is not one OpenSentience v1 message (a JSON object with v, type, "
                   "id, ts and payload)");
        tg_audit_ev_t ev;
        tg_adm_audit_refused(&ev, NULL, k->caller, "invalid_frame", len);
        emit(g, &ev);
        return;
    }
    switch (env.type) {
    case TG_OS_CORE_TOOL_CALL:
        if (k->refused)
            refuse_call(k, frame, &env);
        else
            osg_admit(k, b, frame, len, &env);
        break;
    case TG_OS_CORE_TOOL_CANCEL:
        osg_caller_cancel(k, frame, &env);
        break;
    default:
        osg_conn_error(g, k, "protocol.unsupported_type",
                   "toolgate takes core.tool.call and core.tool.cancel from callers");
        break;
    }
}

/* A header announced more than max_frame_bytes: refused from the header
 * alone (the call_id is never read: the answer carries null). */
static void on_caller_oversize(os_conn_t *k, uint64_t total)
{
    tg_osgw_t *g = k->g;
    tg_denial_t d;
    char reqid[32], detail[96], cap[24];
    osg_denial_init(NULL, &d, TG_DENY_FRAME, NULL, reqid);
    d.limit = "frame";
    d.scope = "instance";
    d.observed = (int64_t)total;
    d.cap = (int64_t)g->cfg->max_frame_bytes;
    d.unit = "bytes";
    d.config_path = g->gw->path_frame;
    tg_unit_fmt_bytes(cap, sizeof(cap), g->cfg->max_frame_bytes);
    snprintf(detail, sizeof(detail), "frame of %" PRIu64 " bytes > %s", total, cap);
    d.detail = detail;
    osg_deny_to(g, k, NULL, NULL, &d);
    reg_set(g, g->gw->reg_frame_in, g->cfg->max_frame_bytes);
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.denied";
    ev.caller = k->caller;
    ev.status = "denied";
    ev.code = tg_deny_name(TG_DENY_FRAME);
    ev.reason = k->on_oversize == TG_OVERSIZE_CLOSE ? "oversize_close" : NULL;
    ev.limit.type = "frame";
    ev.limit.scope = "instance";
    ev.limit.observed = (int64_t)total;
    ev.limit.cap = (int64_t)g->cfg->max_frame_bytes;
    ev.bytes_in = (int64_t)total;
    emit(g, &ev);
    if (k->on_oversize == TG_OVERSIZE_CLOSE)
        osg_conn_end(k);
}

void osg_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    os_conn_t *k = h->data;
    (void)suggested;
    tg_in_alloc(&k->rd, buf);
}

/* Is any agent's write queue over the mark? Then callers wait. */
static void conns_resume(tg_osgw_t *g);

static bool agents_lagging(const tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++) {
        const os_agent_t *ag = g->agents[i];
        uint64_t q = (ag->inst != NULL ? ag->inst->a.p.wr.queued_bytes : 0) + ag->r.queued_frame_bytes;
        if (q > high_mark(g))
            return true;
    }
    return false;
}

/* After EOF: true when the peer only shut down its sending side (it can
 * still read), false when it closed the connection. */
static bool peer_still_reads(uv_stream_t *s)
{
    return !tg_io_peer_gone(s);
}

static void conn_consume(os_conn_t *k);

void osg_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    os_conn_t *k = s->data;
    tg_osgw_t *g = k->g;
    (void)buf;
    if (n < 0) {
        if (n == UV_EOF && k->calls != NULL && !k->ending && peer_still_reads(s)) {
            /* A half-close (shutdown(SHUT_WR)) is not a disconnect: the
             * caller sends no more but still reads; its calls are
             * answered, then the connection ends (osg_conn_half_done). */
            uv_read_stop(s);
            k->half_closed = true;
            uv_timer_stop(&k->idle);
            osg_g_flush(g);
            return;
        }
        /* EOF or error: the caller left. */
        osg_conn_end(k);
        osg_g_flush(g);
        return;
    }
    tg_in_commit(&k->rd, (size_t)n);
    conn_consume(k);
}

/* A write made room in the audit queue: hand on the frames <k> holds. */
static void on_conn_audit_room(tg_audit_room_t *r)
{
    os_conn_t *k = (os_conn_t *)((char *)r - offsetof(os_conn_t, audit_room));
    k->held = false;
    if (!k->ending)
        conn_consume(k);
    conns_resume(k->g);
}

/* Hand on the whole frames of <k>'s read buffer, the rest held while the
 * audit queue is crowded (issue 12 item 2: a flood of calls cannot make
 * the audit drop their events; asked every 16 frames, as MCP's drain);
 * then stop reading <k> while it is held, an agent lags, or <k> does not
 * read what it is owed. */
static void conn_consume(os_conn_t *k)
{
    tg_osgw_t *g = k->g;
    tg_audit_t *audit = g->gw->audit;
    uv_stream_t *s = (uv_stream_t *)k->pipe;
    for (unsigned nf = 1; !k->ending; nf++) {
        if (nf % 16 == 0 && audit != NULL && tg_audit_crowded(audit)) {
            k->held = true;
            break;
        }
        size_t st = 0, e = 0;
        uint64_t total = 0;
        tg_block_t *b = k->rd.blk;
        if (b == NULL)
            break; /* nothing read since the block went back (tg_in_settle) */
        tg_lp_ev_t ev = tg_lenpfx_next(&k->lp, b->data, k->rd.len, &k->rd.pos, &st, &e, &total);
        if (ev == TG_LP_NEED_MORE) {
            if (total > k->rd.hint)
                k->rd.hint = (size_t)total;
            break;
        }
        k->frames++;
        if (ev == TG_LP_FRAME)
            on_caller_frame(k, b, b->data + st, e - st);
        else if (ev == TG_LP_OVERSIZE)
            on_caller_oversize(k, total);
        else if (ev == TG_LP_INVALID)
            osg_conn_error(g, k, "protocol.invalid_frame", "a zero-length frame holds no message");
        /* TG_LP_SKIPPED: the refused payload has gone by */
    }
    if (!k->ending)
        tg_in_settle(&k->rd);
    /* Stop reading while an agent lags, or while this caller does not
     * read what it is owed (toolgate's own answers included). */
    if (!k->ending && (agents_lagging(g) || k->wr.queued_bytes > high_mark(g) || k->held)) {
        uv_read_stop(s);
        k->paused = true;
    }
    if (k->held && !k->ending)
        tg_audit_room_wait(audit, &k->audit_room, on_conn_audit_room);
    conn_idle_arm(k);
    osg_g_flush(g);
}

void osg_conn_out_drain(tg_out_t *o, void *ctx)
{
    os_conn_t *k = ctx;
    (void)o;
    if (k->ending) {
        osg_conn_end(k);
        return;
    }
    osg_flow(k->g);
    conns_resume(k->g);
    conn_idle_arm(k);
}

void osg_conn_out_error(tg_out_t *o, void *ctx, int status)
{
    os_conn_t *k = ctx;
    (void)o;
    (void)status;
    /* The caller is gone (EPIPE, reset): as if it had closed. */
    k->ending = true;
    conn_close_now(k);
}

/* ---- flow control ----------------------------------------------------- */

/* caller -> agent: callers are not read while an agent lags; agent ->
 * caller: agents are not read while a caller's write queue is over the
 * mark (and such a caller is dropped after idle_timeout). */
/* Paused callers read again once no agent lags and their own answers
 * have drained to half the bound. */
static void conns_resume(tg_osgw_t *g)
{
    if (agents_lagging(g))
        return;
    for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
        if (k->paused && !k->ending && !k->closed && !k->held &&
            k->wr.queued_bytes <= high_mark(g) / 2) {
            k->paused = false;
            uv_read_start((uv_stream_t *)k->pipe, osg_conn_alloc, osg_conn_read);
            conn_idle_arm(k); /* an unfinished frame's clock runs again */
        }
    }
}

void osg_flow(tg_osgw_t *g)
{
    uint64_t high = high_mark(g);
    for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
        bool over = k->wr.queued_bytes > high && !k->closed;
        if (over != k->over) {
            k->over = over;
            if (over)
                g->nover++;
            else if (g->nover > 0)
                g->nover--;
            conn_idle_arm(k);
        }
    }
    for (size_t i = 0; i < g->nagents; i++) {
        os_agent_t *ag = g->agents[i];
        os_inst_t *in = ag->inst;
        reg_set(g, ag->r.reg_wq_agent,
                (in != NULL ? in->a.p.wr.queued_bytes : 0) + ag->r.queued_frame_bytes);
        if (in == NULL || in->a.p.gone || in->a.p.out_eof)
            continue;
        if (g->nover > 0 && !in->paused) {
            uv_read_stop((uv_stream_t *)&in->a.p.pout);
            in->paused = true;
        } else if (g->nover == 0 && in->paused) {
            in->paused = false;
            uv_read_start((uv_stream_t *)&in->a.p.pout, osg_agent_alloc, osg_agent_read);
        }
    }
}

void osg_g_flush(tg_osgw_t *g)
{
    for (size_t i = 0; i < g->nagents; i++) {
        os_inst_t *in = g->agents[i]->inst;
        if (in != NULL && !in->a.p.gone)
            (void)tg_out_flush(&in->a.p.wr);
        else if (in != NULL)
            tg_out_discard(&in->a.p.wr);
    }
    uint64_t most = 0;
    for (os_conn_t *k = g->conns; k != NULL; k = k->next) {
        if (k->closed)
            tg_out_discard(&k->wr);
        else if (k->wr.npieces > 0)
            (void)tg_out_flush(&k->wr);
        if (k->wr.queued_bytes > most)
            most = k->wr.queued_bytes;
        if (k->ending && !k->closed && k->wr.queued_bytes == 0 && k->wr.npieces == 0)
            conn_close_now(k);
    }
    reg_set(g, g->gw->reg_wq_caller, most);
    osg_flow(g);
    conns_resume(g);
}

size_t tg_osgw_callers(const tg_osgw_t *g)
{
    size_t n = 0;
    for (const os_conn_t *k = g->conns; k != NULL; k = k->next)
        n++;
    return n;
}
