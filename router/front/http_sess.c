/* MCP sessions of the Streamable HTTP front. See http_sess.h.
 *
 * Invariants:
 *   - a session is in its hub's table (findable) from tg_hsess_new until it
 *     ends (engine gone, DELETE, idle, shutdown); it is freed once its
 *     bridge has closed, which also completes its pending writes (libuv
 *     cancels them before the close callback);
 *   - a stream is on exactly one session's list while attached; ending a
 *     session detaches and finishes every stream, so a connection never
 *     holds a stream whose session is gone;
 *   - reading the engine stops while a stream's connection is over its
 *     bound or the backlog is full of the agent's requests, so nothing
 *     this file holds grows past the bounds in http_sess.h.
 */
#include "router/front/http_sess.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "router/codec/envelope.h"
#include "router/http/sse.h"
#include "router/gateway/list.h"

#define RBUF_MIN (16u * 1024)   /* fixed internal bound: a session's first read buffer */
#define HUB_BUCKETS_MIN 64u /* fixed internal bound: the smallest session table */

typedef struct hmsg {
    struct hmsg *next;
    size_t len;
    bool request; /* the agent's request: never dropped */
    char data[];
} hmsg_t;

struct tg_hsess {
    tg_hub_t *h;
    tg_hsess_t *next, *prev; /* the hub's list */
    tg_hsess_t *hnext;       /* the hub's bucket chain */
    char id[TG_HSESS_ID_HEX + 1];
    uint64_t key;            /* the id's first 64 bits: its bucket */
    int caller;
    uv_pipe_t pipe;          /* our end of the bridge */
    bool listed;             /* in the hub's table */
    bool ended;              /* no more requests: engine gone, DELETE, idle or shutdown */
    bool paused;             /* reading the engine stopped (backpressure) */
    bool skipping;           /* dropping a line over the read bound */
    char *rbuf;
    size_t rlen, rcap;
    tg_hstream_t *first, *last; /* attached streams, oldest first */
    tg_hstream_t *get;
    hmsg_t *bl_first, *bl_last;
    size_t bl_n, bl_bytes;
    uint64_t last_active;
    uint32_t writes; /* posts in flight to the engine */
    uint64_t next_stream; /* SSE stream numbers: 1 is the GET stream, POSTs from 2 */
    tg_sse_win_t win;     /* the GET stream's replay window (win.buf NULL: not made yet) */
};

struct tg_hub {
    uv_loop_t *loop;
    uint64_t max_frame, idle_ms;
    uint32_t max_sessions, nsess, nopen; /* nopen: sessions not yet freed */
    tg_hub_open_fn open;
    void *open_arg;
    tg_hsess_t *first;
    tg_hsess_t **buckets;
    size_t nbuckets; /* a power of two */
    tg_hub_stats_t stats;
};

typedef struct hwrite {
    uv_write_t req;
    tg_hsess_t *s;
    void (*done)(void *arg, int status);
    void *arg;
    char data[];
} hwrite_t;

/* ---- the hub's table ---------------------------------------------------- */

static uint64_t id_key(const char *id)
{
    uint64_t k = 0;
    for (int i = 0; i < 16; i++) {
        char c = id[i];
        unsigned v = (c >= '0' && c <= '9') ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10) & 15u;
        k = k << 4 | v;
    }
    return k;
}

/* Constant time over the whole id: a probe learns nothing from timing. */
static bool id_equal(const char *a, const char *b, size_t len)
{
    unsigned char d = 0;
    for (size_t i = 0; i < len; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static void table_remove(tg_hsess_t *s)
{
    tg_hub_t *h = s->h;
    if (!s->listed)
        return;
    s->listed = false;
    tg_hsess_t **pp = &h->buckets[s->key & (h->nbuckets - 1)];
    while (*pp != NULL && *pp != s)
        pp = &(*pp)->hnext;
    if (*pp == s)
        *pp = s->hnext;
    h->nsess--;
}

tg_hub_t *tg_hub_new(uv_loop_t *loop, uint64_t max_frame, uint64_t idle_ms, uint32_t max_sessions,
                     tg_hub_open_fn open, void *open_arg)
{
    tg_hub_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    size_t nb = HUB_BUCKETS_MIN;
    while (nb < (size_t)max_sessions * 2 && nb < (1u << 20))
        nb <<= 1;
    h->buckets = calloc(nb, sizeof(*h->buckets));
    if (h->buckets == NULL) {
        free(h);
        return NULL;
    }
    h->nbuckets = nb;
    h->loop = loop;
    h->max_frame = max_frame;
    h->idle_ms = idle_ms;
    h->max_sessions = max_sessions;
    h->open = open;
    h->open_arg = open_arg;
    return h;
}

void tg_hub_set_idle(tg_hub_t *h, uint64_t idle_ms)
{
    h->idle_ms = idle_ms;
}

const tg_hub_stats_t *tg_hub_stats(const tg_hub_t *h)
{
    return &h->stats;
}

uint32_t tg_hub_sessions(const tg_hub_t *h)
{
    return h->nsess;
}

bool tg_hub_idle(const tg_hub_t *h)
{
    return h->nopen == 0;
}

void tg_hub_free(tg_hub_t *h)
{
    if (h == NULL)
        return;
    free(h->buckets);
    free(h);
}

/* ---- streams and the backlog ---------------------------------------------- */

static void stream_unlink(tg_hstream_t *st)
{
    tg_hsess_t *s = st->s;
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        s->first = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    else
        s->last = st->prev;
    if (s->get == st)
        s->get = NULL;
    st->next = st->prev = NULL;
    st->s = NULL;
    s->last_active = uv_now(s->h->loop); /* idle from the end of its last stream */
}

static void stream_link(tg_hsess_t *s, tg_hstream_t *st)
{
    st->s = s;
    st->next = NULL;
    st->prev = s->last;
    if (s->last != NULL)
        s->last->next = st;
    else
        s->first = st;
    s->last = st;
}

void tg_hsess_detach(tg_hstream_t *st)
{
    if (st->s != NULL)
        stream_unlink(st);
}

/* The cancel the bridge writes for a request whose client left: a
 * caller's notifications/cancelled whose reason the engine audits as
 * caller_gone (session.c). */
#define GONE_HEAD "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"


static void on_written(uv_write_t *req, int status);

void tg_hsess_abandon(tg_hstream_t *st)
{
    tg_hsess_t *s = st->s;
    if (s == NULL)
        return;
    bool cancel = st->call && !st->get && !st->answered && st->rpcid_len > 0 && !s->ended &&
                  s->writes < TG_HSESS_BACKLOG;
    size_t tail_len;
    const char *tail = tg_mcp_gone_tail(&tail_len);
    size_t len = sizeof(GONE_HEAD) - 1 + st->rpcid_len + tail_len;
    stream_unlink(st);
    if (!cancel)
        return; /* (past the bound the call ends by its deadline, answered to nobody) */
    hwrite_t *w = malloc(sizeof(*w) + len + 1);
    if (w == NULL)
        return;
    memcpy(w->data, GONE_HEAD, sizeof(GONE_HEAD) - 1);
    memcpy(w->data + sizeof(GONE_HEAD) - 1, st->rpcid, st->rpcid_len);
    memcpy(w->data + sizeof(GONE_HEAD) - 1 + st->rpcid_len, tail, tail_len);
    w->data[len] = '\n';
    w->s = s;
    w->done = NULL;
    w->arg = NULL;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)(len + 1));
    if (uv_write(&w->req, (uv_stream_t *)&s->pipe, &b, 1, on_written) < 0) {
        free(w);
        return;
    }
    s->writes++;
}

static void finish(tg_hstream_t *st)
{
    stream_unlink(st);
    st->ops->finish(st);
}

static void pause_reading(tg_hsess_t *s)
{
    if (!s->paused && !s->ended) {
        s->paused = true;
        uv_read_stop((uv_stream_t *)&s->pipe);
    }
}

static bool backlog_full(const tg_hsess_t *s)
{
    return s->bl_n >= TG_HSESS_BACKLOG || s->bl_bytes >= TG_HSESS_BACKLOG_BYTES;
}

/* Full of the agent's requests only: nothing more may be read. */
static bool backlog_stuck(const tg_hsess_t *s)
{
    if (!backlog_full(s))
        return false;
    for (const hmsg_t *m = s->bl_first; m != NULL; m = m->next)
        if (!m->request)
            return false;
    return true;
}

/* Drop the oldest notification of a full backlog; false when it holds
 * only the agent's requests. */
static bool backlog_drop_one(tg_hsess_t *s)
{
    hmsg_t **pp = &s->bl_first, *prev = NULL;
    while (*pp != NULL && (*pp)->request) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    hmsg_t *m = *pp;
    if (m == NULL)
        return false;
    *pp = m->next;
    if (s->bl_last == m)
        s->bl_last = prev;
    s->bl_n--;
    s->bl_bytes -= m->len;
    free(m);
    s->h->stats.backlog_dropped++;
    return true;
}

static void backlog_push(tg_hsess_t *s, const char *p, size_t len, bool request)
{
    while (backlog_full(s) && backlog_drop_one(s))
        ;
    if (backlog_full(s) && !request) {
        s->h->stats.backlog_dropped++;
        return;
    }
    hmsg_t *m = malloc(sizeof(*m) + len);
    if (m == NULL) {
        s->h->stats.backlog_dropped++;
        return;
    }
    m->next = NULL;
    m->len = len;
    m->request = request;
    memcpy(m->data, p, len);
    if (s->bl_last != NULL)
        s->bl_last->next = m;
    else
        s->bl_first = m;
    s->bl_last = m;
    s->bl_n++;
    s->bl_bytes += len;
    if (request && backlog_full(s))
        pause_reading(s); /* a backlog of the agent's requests: nothing may be dropped */
}

static void backlog_free(tg_hsess_t *s)
{
    while (s->bl_first != NULL) {
        hmsg_t *m = s->bl_first;
        s->bl_first = m->next;
        free(m);
    }
    s->bl_last = NULL;
    s->bl_n = s->bl_bytes = 0;
}

/* Give the backlog to <st>, oldest first, while it takes them. */
static void backlog_give(tg_hsess_t *s, tg_hstream_t *st)
{
    while (s->bl_first != NULL && st->s == s) {
        hmsg_t *m = s->bl_first;
        s->bl_first = m->next;
        if (s->bl_first == NULL)
            s->bl_last = NULL;
        s->bl_n--;
        s->bl_bytes -= m->len;
        bool room = st->ops->message(st, m->data, m->len);
        free(m);
        if (!room) {
            pause_reading(s);
            return;
        }
    }
}

static tg_hstream_t *events_stream(const tg_hsess_t *s)
{
    if (s->get != NULL)
        return s->get;
    for (tg_hstream_t *st = s->first; st != NULL; st = st->next)
        if (st->events)
            return st;
    return NULL;
}

/* ---- what the engine writes ------------------------------------------------ */

static tg_hstream_t *stream_by(tg_hsess_t *s, const char *p, tg_jspan_t sp, bool token)
{
    for (tg_hstream_t *st = s->first; st != NULL; st = st->next) {
        if (st->get || (token && !st->events))
            continue; /* progress needs a stream that carries events */
        const char *k = token ? st->ptoken : st->rpcid;
        size_t klen = token ? st->ptoken_len : st->rpcid_len;
        if (klen == sp.len && klen > 0 && memcmp(k, p + sp.off, klen) == 0)
            return st;
    }
    return NULL;
}

static void route(tg_hsess_t *s, const char *p, size_t len)
{
    tg_mcp_env_t env;
    if (tg_mcp_scan(p, len, &env) < 0) {
        s->h->stats.responses_dropped++; /* the engine forwards only judged frames */
        return;
    }
    tg_hstream_t *st = NULL;
    if (env.kind == TG_MCP_RESPONSE) {
        st = env.id.type != TG_J_NONE ? stream_by(s, p, env.id, false) : NULL;
        if (st == NULL) {
            s->h->stats.responses_dropped++;
            return;
        }
        stream_unlink(st);
        (void)st->ops->message(st, p, len);
        st->answered = true;
        st->ops->finish(st);
        return;
    }
    if (env.kind == TG_MCP_NOTIFICATION && env.notif_progress_token.type != TG_J_NONE) {
        st = stream_by(s, p, env.notif_progress_token, true);
        if (st == NULL) { /* its call's stream is gone or cannot carry it (JSON): stale */
            s->h->stats.responses_dropped++;
            return;
        }
    }
    if (st == NULL && s->bl_n == 0)
        st = events_stream(s);
    if (st == NULL) {
        backlog_push(s, p, len, env.kind == TG_MCP_REQUEST);
        return;
    }
    if (!st->ops->message(st, p, len))
        pause_reading(s);
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    tg_hsess_t *s = hd->data;
    size_t bound = (size_t)s->h->max_frame + 1;
    if (s->rlen == s->rcap && s->rcap < bound) {
        size_t ncap = s->rcap ? s->rcap * 2 : RBUF_MIN;
        if (ncap > bound)
            ncap = bound;
        char *nb = realloc(s->rbuf, ncap);
        if (nb != NULL) {
            s->rbuf = nb;
            s->rcap = ncap;
        }
    }
    if (s->rlen == s->rcap) { /* a line over the bound: keep its tail only */
        s->skipping = true;
        s->rlen = 0;
    }
    buf->base = s->rbuf + s->rlen;
    buf->len = s->rcap - s->rlen;
}

static void session_end(tg_hsess_t *s);

static void on_read(uv_stream_t *str, ssize_t n, const uv_buf_t *buf)
{
    tg_hsess_t *s = str->data;
    if (n < 0) {
        session_end(s);
        return;
    }
    s->rlen += (size_t)n;
    size_t pos = 0;
    char *nl;
    while (!s->ended && !s->paused &&
           (nl = memchr(s->rbuf + pos, '\n', s->rlen - pos)) != NULL) {
        size_t len = (size_t)(nl - (s->rbuf + pos));
        if (s->skipping)
            s->skipping = false, s->h->stats.responses_dropped++;
        else if (len > 0)
            route(s, s->rbuf + pos, len);
        pos += len + 1;
    }
    if (s->ended)
        return;
    memmove(s->rbuf, s->rbuf + pos, s->rlen - pos);
    s->rlen -= pos;
    if (s->rlen == 0 && s->rcap > 4 * RBUF_MIN) { /* a large line passed: give it back */
        free(s->rbuf);
        s->rbuf = NULL;
        s->rcap = 0;
    }
}

/* Lines left in the buffer when reading paused. */
static void drain_buffered(tg_hsess_t *s)
{
    if (s->rlen == 0)
        return;
    uv_buf_t none = {0};
    on_read((uv_stream_t *)&s->pipe, 0, &none);
}

void tg_hsess_resume(tg_hsess_t *s)
{
    if (!s->paused || s->ended)
        return;
    s->paused = false; /* reading is stopped still: giving the backlog may pause again */
    tg_hstream_t *st = events_stream(s);
    if (st != NULL)
        backlog_give(s, st);
    if (!s->paused && backlog_stuck(s))
        s->paused = true;
    if (s->paused)
        return;
    drain_buffered(s);
    if (!s->paused && !s->ended)
        uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
}

/* ---- life ---------------------------------------------------------------------- */

static void on_closed(uv_handle_t *hd)
{
    tg_hsess_t *s = hd->data;
    tg_hub_t *h = s->h;
    TG_LIST_UNLINK(h->first, s, prev, next);
    backlog_free(s);
    tg_sse_win_free(&s->win);
    free(s->rbuf);
    free(s);
    h->nopen--;
}

static void session_end(tg_hsess_t *s)
{
    if (s->ended)
        return;
    s->ended = true;
    table_remove(s);
    s->h->stats.sessions_ended++;
    while (s->first != NULL)
        finish(s->first);
    backlog_free(s);
    uv_close((uv_handle_t *)&s->pipe, on_closed);
}

void tg_hsess_end(tg_hsess_t *s)
{
    session_end(s);
}

bool tg_hsess_ended(const tg_hsess_t *s)
{
    return s->ended;
}

const char *tg_hsess_id(const tg_hsess_t *s)
{
    return s->id;
}

static void engine_pipe_closed(uv_handle_t *hd)
{
    free(hd);
}

tg_hsess_t *tg_hsess_new(tg_hub_t *h, int caller, const char *remote, int *status, char *why,
                         size_t why_cap)
{
    return tg_hsess_new_claims(h, caller, remote, NULL, status, why, why_cap);
}

tg_hsess_t *tg_hsess_new_claims(tg_hub_t *h, int caller, const char *remote, const char *claims,
                                int *status, char *why, size_t why_cap)
{
    *status = 503;
    if (h->nsess >= h->max_sessions) {
        snprintf(why, why_cap, "%u HTTP sessions open on this listener, the most allowed",
                 h->nsess);
        return NULL;
    }
    *status = 500;
    unsigned char raw[TG_HSESS_ID_HEX / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        snprintf(why, why_cap, "no random bytes for a session id: %s", strerror(errno));
        return NULL;
    }
    tg_hsess_t *s = calloc(1, sizeof(*s));
    uv_pipe_t *ep = calloc(1, sizeof(*ep));
    int fds[2] = {-1, -1};
    if (s == NULL || ep == NULL ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0) {
        snprintf(why, why_cap, "cannot make a session bridge: %s", strerror(errno));
        free(s);
        free(ep);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(s->id + 2 * i, 3, "%02x", raw[i]);
    s->h = h;
    s->caller = caller;
    s->key = id_key(s->id);
    uv_pipe_init(h->loop, &s->pipe, 0);
    uv_pipe_init(h->loop, ep, 0);
    s->pipe.data = s;
    uv_pipe_open(&s->pipe, fds[0]);
    uv_pipe_open(ep, fds[1]);
    /* Listed before the engine can end it (a session's end unlists it). */
    TG_LIST_PUSH(h->first, s, prev, next);
    h->nopen++;
    s->hnext = h->buckets[s->key & (h->nbuckets - 1)];
    h->buckets[s->key & (h->nbuckets - 1)] = s;
    s->listed = true;
    h->nsess++;
    s->last_active = uv_now(h->loop);
    tg_hsess_meta_t meta = {.id = s->id,
                            .remote = remote != NULL ? remote : "",
                            .claims = claims != NULL && claims[0] != '\0' ? claims : NULL};
    int rc = h->open(h->open_arg, ep, caller, &meta, why, why_cap);
    if (rc < 0) {
        *status = rc == -ENOMEM ? 500 : 503;
        ep->data = NULL;
        uv_close((uv_handle_t *)ep, engine_pipe_closed);
        s->ended = true;
        table_remove(s);
        uv_close((uv_handle_t *)&s->pipe, on_closed);
        return NULL;
    }
    h->stats.sessions_opened++;
    uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
    return s;
}

tg_hsess_t *tg_hsess_find(tg_hub_t *h, const char *id, size_t len, int caller)
{
    if (len != TG_HSESS_ID_HEX)
        return NULL;
    for (size_t i = 0; i < len; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return NULL;
    uint64_t key = id_key(id);
    for (tg_hsess_t *s = h->buckets[key & (h->nbuckets - 1)]; s != NULL; s = s->hnext)
        if (s->key == key && id_equal(s->id, id, len))
            return s->caller == caller && !s->ended ? s : NULL;
    return NULL;
}

static void on_written(uv_write_t *req, int status)
{
    hwrite_t *w = (hwrite_t *)req;
    tg_hsess_t *s = w->s;
    s->writes--;
    if (w->done != NULL)
        w->done(w->arg, status);
    free(w);
}

int tg_hsess_post(tg_hsess_t *s, const char *body, size_t len, tg_hstream_t *st,
                  void (*done)(void *arg, int status), void *arg)
{
    if (s->ended)
        return -ECONNRESET;
    hwrite_t *w = malloc(sizeof(*w) + len + 1);
    if (w == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        w->data[i] = (c == '\n' || c == '\r') ? ' ' : c;
    }
    w->data[len] = '\n';
    w->s = s;
    w->done = done;
    w->arg = arg;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)(len + 1));
    int rc = uv_write(&w->req, (uv_stream_t *)&s->pipe, &b, 1, on_written);
    if (rc < 0) {
        free(w);
        return rc;
    }
    s->writes++;
    s->last_active = uv_now(s->h->loop);
    if (st != NULL) {
        stream_link(s, st);
        if (st->events && s->get == NULL)
            backlog_give(s, st);
    }
    return 0;
}

void tg_hsess_attach_get(tg_hsess_t *s, tg_hstream_t *st)
{
    if (s->get != NULL)
        finish(s->get);
    st->get = st->events = true;
    stream_link(s, st);
    s->get = st;
    s->last_active = uv_now(s->h->loop);
    backlog_give(s, st);
    if (s->paused && st->s == s)
        tg_hsess_resume(s);
}

void tg_hub_tick(tg_hub_t *h, uint64_t now)
{
    if (h->idle_ms == 0)
        return;
    tg_hsess_t *next;
    for (tg_hsess_t *s = h->first; s != NULL; s = next) {
        next = s->next;
        if (s->ended || s->first != NULL || s->writes > 0)
            continue;
        if (now - s->last_active >= h->idle_ms) {
            h->stats.sessions_idled++;
            session_end(s);
        }
    }
}

void tg_hub_shutdown(tg_hub_t *h)
{
    tg_hsess_t *next;
    for (tg_hsess_t *s = h->first; s != NULL; s = next) {
        next = s->next;
        session_end(s);
    }
}

uint64_t tg_hsess_stream_no(tg_hsess_t *s)
{
    if (s->next_stream < 2)
        s->next_stream = 2;
    return s->next_stream++;
}

tg_sse_win_t *tg_hsess_get_window(tg_hsess_t *s)
{
    if (s->win.buf == NULL &&
        tg_sse_win_init(&s->win, 1, TG_HSESS_BACKLOG_BYTES, TG_HSESS_BACKLOG) < 0)
        return NULL;
    return &s->win;
}

uint32_t tg_hub_caller_sessions(const tg_hub_t *h, int caller)
{
    uint32_t n = 0;
    for (const tg_hsess_t *s = h->first; s != NULL; s = s->next)
        n += !s->ended && s->caller == caller;
    return n;
}
