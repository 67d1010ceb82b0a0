/* The audit pipe: seq and ts assignment, the bounded queue, and its drain
 * on the libuv threadpool into one or more sinks.
 *
 * Queue: encoded lines are copied into a byte ring, and their lengths into
 * a ring of queue_cap entries; both are allocated once at open, so emit
 * does not allocate. Lines stay in the ring until their write returns, so
 * a batch in flight is always the oldest <batch_events> lines, and new
 * lines are appended behind it without touching the bytes being written.
 *
 * Drain: one batch in flight at a time, covering every line queued when it
 * started (one or two iovecs, as the ring may wrap), written to each sink
 * in turn. It runs as uv_work on the threadpool, so the loop never waits
 * for the disk. A batch starts once the queue is a quarter full, else
 * within TG_AUDIT_FLUSH_MS (flush_timer). The work request and that timer
 * keep the loop alive only while lines wait or are being written; the
 * sinks' durability timer (sync_timer) never does: an idle audit pipe
 * keeps nothing alive.
 *
 * Several sinks share the one queue and the one seq space: a sink cannot
 * drop what another keeps, or the seqs of the sinks would disagree. A line
 * counts as written when every sink took it whole; otherwise it is counted
 * as lost and reported to all sinks by the next audit.dropped, so a sink
 * that did get it sees an audit.dropped without a gap, never a gap without
 * one. A slow sink therefore holds the others back; the queue bounds how
 * far.
 *
 * Loss: an event that finds the queue full gets no seq, so the written
 * seqs stay consecutive and the audit.dropped line queued once there is
 * room again carries how many were lost in between. Lines whose write
 * fails already have a seq; they are counted the same way, so every gap in
 * a sink's output is explained by the audit.dropped line that follows it.
 * An audit.dropped line can be lost too (a full disk or spool): the count
 * it carried (kept per queued line in <carry>) goes back to <unreported>,
 * so the next report covers it as well and no loss drops out of the
 * record.
 *
 * Telling the operator: after each batch every sink is asked what its
 * write met (ops->status, on the loop thread). A sink that did not take
 * every line, or reports a problem, is logged once when it starts failing
 * and once when a batch goes through again, with the lines it lost in
 * between (a full disk must be heard of, but not once per batch); toolgate
 * goes on serving meanwhile. A sink whose file was deleted or moved and
 * opened anew is logged and audited as audit.reopened, queued behind the
 * batch that saw it.
 *
 * Backpressure: a front stops reading a caller while the queue is crowded
 * (3/4 full, tg_audit_crowded) and waits for room (tg_audit_room_wait); a
 * write that leaves it less full wakes every waiter. A caller's flood of
 * calls, each of them audited, therefore stalls on its own socket instead
 * of overflowing the queue; loss stays for what no caller sends (a sink
 * that fails or stalls, bursts of events from calls already admitted).
 *
 * Threads: everything here runs on the loop thread except write_work,
 * which reads only <wr> and the ring bytes the batch covers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "audit/sink.h"

/* Ring bytes reserved per queued event. Lines are typically 150-400 bytes;
 * when long lines fill the bytes before the count is reached, the extra
 * events are dropped and reported like any other overflow. */
#define AUDIT_RING_BYTES_PER_EVENT 512

#define AUDIT_SINKS_MAX TG_CFG_SINKS_MAX

/* One batch as every sink sees it: the same ring spans, each behind its
 * own optional "\n" repair (sinks tear independently). */
typedef struct audit_batch {
    struct iovec iov[AUDIT_SINKS_MAX][3]; /* optional "\n", then up to two ring spans */
    int iovcnt[AUDIT_SINKS_MAX];
    size_t prefix[AUDIT_SINKS_MAX];  /* bytes of repair newline in iov[s][0] */
    ssize_t result[AUDIT_SINKS_MAX]; /* each write's return, set by the writer */
    size_t nbytes;    /* ring bytes in the batch */
    uint32_t nevents; /* lines in the batch; 0 for a sync-only batch */
} audit_batch_t;

/* The batch in flight and the sync timer. Kept apart from tg_audit_t
 * because both can outlive it: tg_audit_close waits for the worker, but
 * libuv still calls write_done afterwards, and the timer's close callback
 * runs on the next loop turn. <refs> counts the owner (tg_audit_t), a work
 * request in flight and an initialised sync timer; the last one frees
 * this. */
typedef struct audit_write {
    uv_work_t req;         /* req.data: the tg_audit_t, NULL once orphaned */
    uv_timer_t sync_timer; /* data: likewise */
    uv_mutex_t mu;
    uv_cond_t cv;
    bool done;       /* under <mu>: write_work has finished */
    bool inflight;   /* loop thread: queued, write_done not yet run */
    bool timer_init; /* loop thread: sync_timer initialised */
    unsigned refs;   /* loop thread */
    tg_audit_sink_t sinks[AUDIT_SINKS_MAX];
    size_t nsinks;
    audit_batch_t b;
    uint64_t sync_in_ms; /* set by write_work: a sink asked for sync() again then */
} audit_write_t;

/* Per sink, on the loop thread: what the operator was told and what is
 * still to be audited. */
typedef struct sink_watch {
    char *label;          /* for log lines: the file's path, "stderr", "redis stream KEY" */
    bool failing;         /* a failure was logged and no batch has gone through since */
    uint64_t lost;        /* lines this sink did not take since <failing> was set */
    const char *reopened; /* "deleted"/"moved": an audit.reopened to queue, else NULL */
    uint64_t rewritten;   /* its count */
} sink_watch_t;

/* Owned by the caller of tg_audit_open; freed by tg_audit_close. */
struct tg_audit {
    uv_loop_t *loop;
    tg_audit_sink_t sinks[AUDIT_SINKS_MAX];
    size_t nsinks;
    bool torn[AUDIT_SINKS_MAX]; /* sink ends in a partial line */
    sink_watch_t watch[AUDIT_SINKS_MAX];
    tg_audit_log_fn log;
    void *log_ctx;
    char *instance;
    char *ring; /* ring_size bytes of queued lines */
    size_t ring_size;
    size_t ring_head; /* offset of the oldest queued byte */
    size_t ring_used;
    uint32_t *lens; /* queue_cap line lengths, oldest at len_head */
    uint64_t *carry; /* queue_cap: the count an audit.dropped line reports, else 0 */
    uint32_t queue_cap;
    uint32_t len_head;
    uint32_t queued;
    uint64_t next_seq;
    uint64_t dropped;    /* lifetime total, for the registry */
    uint64_t unreported; /* lost since the last audit.dropped line */
    bool write_failed;   /* the last batch did not fully land in every sink */
    audit_write_t *wr;
    uv_timer_t *flush_timer; /* heap: closed (and freed) after <a> is gone */
    tg_audit_room_t waiters; /* fronts waiting for room: a ring, this its head */
    char line[TG_AUDIT_LINE_MAX]; /* encode scratch */
};

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* <i> (< 2 * <n>) modulo <n>, without a division: these run per event. */
static inline size_t wrap_at(size_t i, size_t n)
{
    return i >= n ? i - n : i;
}

/* Record a line of <len> bytes, now in the ring at its tail, reporting
 * <carry> lost events. */
static void queue_commit(tg_audit_t *a, size_t len, uint64_t carry)
{
    size_t k = wrap_at(a->len_head + a->queued, a->queue_cap);
    a->ring_used += len;
    a->lens[k] = (uint32_t)len;
    a->carry[k] = carry;
    a->queued++;
}

/* Remove the oldest <n> lines (<nbytes> bytes) from the queue. */
static void queue_pop(tg_audit_t *a, uint32_t n, size_t nbytes)
{
    a->len_head = wrap_at(a->len_head + n, a->queue_cap);
    a->queued -= n;
    a->ring_head = wrap_at(a->ring_head + nbytes, a->ring_size);
    a->ring_used -= nbytes;
}

/* Encode <ev> with the next seq and queue it (<carry>: the count it
 * reports, for audit.dropped); the seq is consumed only when the line is
 * queued. False when the event is lost (queue full, or a line that cannot
 * be encoded, which is counted rather than silent). The line is encoded
 * straight into the ring's free space when that is contiguous; only a
 * line that would wrap around the ring's end goes through <a>->line and is
 * copied in two pieces. Either way a line is at most TG_AUDIT_LINE_MAX. */
static bool queue_event(tg_audit_t *a, const tg_audit_ev_t *ev, uint64_t carry)
{
    if (a->queued == a->queue_cap)
        return false; /* the usual overflow: skip the clock and the encoding */
    int64_t now = wall_ms();
    size_t tail = wrap_at(a->ring_head + a->ring_used, a->ring_size);
    size_t room = a->ring_size - a->ring_used;
    size_t contig = a->ring_size - tail;
    size_t cap = sizeof(a->line) < room ? sizeof(a->line) : room;
    if (contig > cap)
        contig = cap;
    long len = tg_audit_encode(a->ring + tail, contig, ev, a->next_seq, now, a->instance);
    if (len == -ENOSPC && contig < cap) {
        len = tg_audit_encode(a->line, cap, ev, a->next_seq, now, a->instance);
        if (len >= 0) {
            memcpy(a->ring + tail, a->line, contig);
            memcpy(a->ring, a->line + contig, (size_t)len - contig);
        }
    }
    if (len < 0)
        return false;
    queue_commit(a, (size_t)len, carry);
    a->next_seq++;
    return true;
}

/* Queue the audit.dropped line for everything lost since the last one. */
static bool report_dropped(tg_audit_t *a)
{
    tg_audit_ev_t ev;

    tg_audit_ev_init(&ev);
    ev.event = "audit.dropped";
    ev.count = a->unreported > INT64_MAX ? INT64_MAX : (int64_t)a->unreported;
    if (!queue_event(a, &ev, (uint64_t)ev.count))
        return false;
    a->unreported = 0;
    return true;
}

static void count_lost(tg_audit_t *a, uint64_t n)
{
    a->dropped += n;
    a->unreported += n;
}

/* Queue <ev> (or count it lost) without starting a write. */
static void emit_queued(tg_audit_t *a, const tg_audit_ev_t *ev)
{
    /* The audit.dropped report goes first so it sits right after the gap
     * it explains; if it does not fit, neither does anything after it. */
    if ((a->unreported != 0 && !report_dropped(a)) || !queue_event(a, ev, 0))
        count_lost(a, 1);
}

/* Queue an audit.reopened for every sink whose file was opened again
 * since the last call. The caller starts the write. */
static void queue_reopened(tg_audit_t *a)
{
    tg_audit_ev_t ev;

    for (size_t s = 0; s < a->nsinks; s++) {
        sink_watch_t *w = &a->watch[s];
        if (w->reopened == NULL)
            continue;
        tg_audit_ev_init(&ev);
        ev.event = "audit.reopened";
        ev.reason = w->reopened;
        if (strcmp(w->reopened, "deleted") == 0)
            ev.count = w->rewritten > INT64_MAX ? INT64_MAX : (int64_t)w->rewritten;
        w->reopened = NULL;
        w->rewritten = 0;
        emit_queued(a, &ev);
    }
}

/* Describe in <b> a batch of every queued line (none with <sync_only>),
 * led, for each sink that ends in a torn line, by a newline so that the
 * batch's first line stays whole. */
static void batch_prepare(tg_audit_t *a, audit_batch_t *b, bool sync_only)
{
    size_t first = a->ring_size - a->ring_head;

    if (first > a->ring_used)
        first = a->ring_used;
    b->nbytes = sync_only ? 0 : a->ring_used;
    b->nevents = sync_only ? 0 : a->queued;
    for (size_t s = 0; s < a->nsinks; s++) {
        struct iovec *iov = b->iov[s];
        int n = 0;
        b->prefix[s] = 0;
        b->result[s] = 0;
        if (sync_only) {
            b->iovcnt[s] = 0;
            continue;
        }
        if (a->torn[s]) {
            iov[n++] = (struct iovec){.iov_base = (void *)"\n", .iov_len = 1};
            b->prefix[s] = 1;
        }
        iov[n++] = (struct iovec){.iov_base = a->ring + a->ring_head, .iov_len = first};
        if (a->ring_used > first)
            iov[n++] = (struct iovec){.iov_base = a->ring, .iov_len = a->ring_used - first};
        b->iovcnt[s] = n;
    }
}

/* Lines of the batch <b> that landed whole in sink <s>; sets its torn
 * flag when a line was cut in the middle. */
static uint32_t batch_landed(tg_audit_t *a, const audit_batch_t *b, size_t s)
{
    size_t written = b->result[s] > 0 ? (size_t)b->result[s] : 0;
    size_t payload = written > b->prefix[s] ? written - b->prefix[s] : 0;
    size_t done = 0;
    uint32_t whole = 0;

    if (written == b->prefix[s] + b->nbytes) {
        a->torn[s] = false; /* the usual case: all of it */
        return b->nevents;
    }
    while (whole < b->nevents) {
        size_t len = a->lens[wrap_at(a->len_head + whole, a->queue_cap)];
        if (done + len > payload)
            break;
        done += len;
        whole++;
    }
    a->torn[s] = written < b->prefix[s] || payload > done;
    return whole;
}

static void say(const tg_audit_t *a, tg_audit_news_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(const tg_audit_t *a, tg_audit_news_t level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (a->log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    a->log(a->log_ctx, level, line);
}

/* Sink <s> took <landed> of the <b>->nevents lines of batch <b>: ask it
 * what it met, log the start and the end of a failing episode once each
 * (a full disk must be heard of, but not once per batch), and keep a
 * reopen of its file to be audited. Loop thread, no write in flight. */
static void sink_news(tg_audit_t *a, const audit_batch_t *b, size_t s, uint32_t landed)
{
    const tg_audit_sink_t *sk = &a->sinks[s];
    sink_watch_t *w = &a->watch[s];
    tg_audit_sink_status_t st = {NULL, NULL, 0};
    char why[64];

    if (sk->ops->status != NULL)
        sk->ops->status(sk->ctx, &st);
    if (st.reopened != NULL) {
        w->reopened = st.reopened;
        w->rewritten += st.rewritten;
        say(a, TG_AUDIT_NEWS_INFO,
            "audit: %s: the file was %s while in use; a new one was opened there "
            "(audited as audit.reopened)",
            w->label, st.reopened);
    }
    bool problem = st.problem != NULL && st.problem[0] != '\0';
    if (landed < b->nevents || problem) {
        w->lost += b->nevents - landed;
        if (w->failing)
            return;
        w->failing = true;
        if (!problem) {
            if (b->result[s] < 0)
                snprintf(why, sizeof(why), "cannot write: %s", strerror((int)-b->result[s]));
            else
                snprintf(why, sizeof(why), "a write was cut short");
        }
        say(a, TG_AUDIT_NEWS_ERROR,
            "audit: %s: %s (toolgate keeps serving; events that cannot be written are "
            "counted and reported as audit.dropped)",
            w->label, problem ? st.problem : why);
    } else if (w->failing) {
        w->failing = false;
        if (w->lost != 0)
            say(a, TG_AUDIT_NEWS_WARN,
                "audit: %s: writing again, after losing %llu event%s (reported as "
                "audit.dropped)",
                w->label, (unsigned long long)w->lost, w->lost == 1 ? "" : "s");
        else
            say(a, TG_AUDIT_NEWS_INFO, "audit: %s: writing normally again", w->label);
        w->lost = 0;
    }
}

/* Account for the written batch <b>. The whole batch leaves the queue:
 * written lines are done, and on a failure the unwritten ones are counted
 * as lost rather than retried (the errors a file gives, ENOSPC, EIO,
 * EFBIG, do not clear by retrying at once). A line counts as written only
 * when it reached every sink (see the file comment). */
static void batch_complete(tg_audit_t *a, const audit_batch_t *b)
{
    uint32_t whole = b->nevents;

    if (b->nevents == 0)
        return; /* sync only */
    for (size_t s = 0; s < a->nsinks; s++) {
        uint32_t w = batch_landed(a, b, s);
        sink_news(a, b, s, w);
        if (w < whole)
            whole = w;
    }
    /* Lost audit.dropped lines give their count back to be reported again. */
    for (uint32_t i = whole; i < b->nevents; i++)
        a->unreported += a->carry[wrap_at(a->len_head + i, a->queue_cap)];
    queue_pop(a, b->nevents, b->nbytes);
    a->write_failed = whole < b->nevents;
    if (a->write_failed)
        count_lost(a, b->nevents - whole);
}

/* Write <b> to each sink in turn, then let each sync. Returns the soonest
 * sync a sink asked for (ms from now), or 0. Runs on the threadpool, or on
 * the loop thread at close. */
static uint64_t batch_run(const tg_audit_sink_t *sinks, size_t nsinks, audit_batch_t *b)
{
    uint64_t next = 0;

    for (size_t s = 0; s < nsinks; s++) {
        if (b->iovcnt[s] != 0)
            b->result[s] = sinks[s].ops->write(sinks[s].ctx, b->iov[s], b->iovcnt[s]);
        if (sinks[s].ops->sync != NULL) {
            uint64_t due = sinks[s].ops->sync(sinks[s].ctx, mono_ms());
            if (due != 0 && (next == 0 || due < next))
                next = due;
        }
    }
    return next;
}

static void write_release(audit_write_t *wr)
{
    if (--wr->refs != 0)
        return;
    uv_cond_destroy(&wr->cv);
    uv_mutex_destroy(&wr->mu);
    free(wr);
}

/* Threadpool: the only code that runs off the loop thread. */
static void write_work(uv_work_t *req)
{
    audit_write_t *wr = (audit_write_t *)req;
    uint64_t next = batch_run(wr->sinks, wr->nsinks, &wr->b);

    uv_mutex_lock(&wr->mu);
    wr->sync_in_ms = next;
    wr->done = true;
    uv_cond_signal(&wr->cv);
    uv_mutex_unlock(&wr->mu);
}

static void kick(tg_audit_t *a);
static void kick_soon(tg_audit_t *a);
static void start_batch(tg_audit_t *a, bool sync_only);

static void on_sync_timer(uv_timer_t *t)
{
    tg_audit_t *a = t->data;

    /* A batch in flight syncs when it is done, and re-arms this. */
    if (a != NULL && !a->wr->inflight)
        start_batch(a, true);
}

static void sync_timer_closed(uv_handle_t *h)
{
    write_release(h->data);
}

/* Call the sinks' sync again in <ms> (0: nothing pending). The timer does
 * not keep the loop alive: at shutdown tg_audit_close has the sinks make
 * their data durable instead. */
static void schedule_sync(tg_audit_t *a, uint64_t ms)
{
    audit_write_t *wr = a->wr;

    if (ms == 0)
        return;
    if (!wr->timer_init) {
        if (uv_timer_init(a->loop, &wr->sync_timer) != 0)
            return; /* the next batch's sync catches up */
        wr->timer_init = true;
        wr->refs++;
        wr->sync_timer.data = a;
        uv_unref((uv_handle_t *)&wr->sync_timer);
    }
    uv_timer_start(&wr->sync_timer, on_sync_timer, ms, 0);
}

/* Wake every front waiting for room, unless the queue is still crowded.
 * The waiters move to a list of their own first: a callback may wait
 * again (on the pipe's list) or cancel another waiter (off this one). */
static void wake_waiters(tg_audit_t *a)
{
    if (a->waiters.next == &a->waiters || tg_audit_crowded(a))
        return;
    tg_audit_room_t woken;
    woken.next = a->waiters.next;
    woken.prev = a->waiters.prev;
    woken.next->prev = &woken;
    woken.prev->next = &woken;
    a->waiters.next = a->waiters.prev = &a->waiters;
    while (woken.next != &woken) {
        tg_audit_room_t *r = woken.next;
        tg_audit_room_cancel(r);
        r->cb(r);
    }
}

static void write_done(uv_work_t *req, int status)
{
    audit_write_t *wr = (audit_write_t *)req;
    tg_audit_t *a = req->data;

    wr->inflight = false;
    if (a != NULL) {
        if (status != 0)
            for (size_t s = 0; s < a->nsinks; s++)
                wr->b.result[s] = status;
        batch_complete(a, &wr->b);
        /* Room again: report the loss now rather than with the next event,
         * unless a sink just failed too (the report would fail the same
         * way and loop); the next emit reports it then. */
        if (a->unreported != 0 && !a->write_failed)
            report_dropped(a);
        queue_reopened(a);
        kick_soon(a);
        if (!wr->inflight)
            schedule_sync(a, wr->sync_in_ms);
        wake_waiters(a);
    }
    write_release(wr);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void on_flush_timer(uv_timer_t *t)
{
    kick(t->data);
}

/* Start a write now when the queue is a quarter full; else within
 * TG_AUDIT_FLUSH_MS. Batching keeps the threadpool round trip (two thread
 * wake-ups) off the per-call path: at one call in flight it would double
 * the proxy's latency. The timer is active only while lines wait, so an
 * idle pipe still keeps nothing alive. */
static void kick_soon(tg_audit_t *a)
{
    if (a->wr->inflight || a->queued == 0)
        return;
    if (a->queued >= a->queue_cap / 4 || a->flush_timer == NULL) {
        kick(a);
        return;
    }
    if (!uv_is_active((uv_handle_t *)a->flush_timer))
        uv_timer_start(a->flush_timer, on_flush_timer, TG_AUDIT_FLUSH_MS, 0);
}

/* Start a batch of everything queued (or, with <sync_only>, only the
 * sinks' sync) on the threadpool. */
static void start_batch(tg_audit_t *a, bool sync_only)
{
    audit_write_t *wr = a->wr;

    if (!sync_only && a->flush_timer != NULL)
        uv_timer_stop(a->flush_timer);
    batch_prepare(a, &wr->b, sync_only);
    wr->done = false;
    wr->sync_in_ms = 0;
    int rc = uv_queue_work(a->loop, &wr->req, write_work, write_done);
    if (rc < 0) {
        for (size_t s = 0; s < a->nsinks; s++)
            wr->b.result[s] = rc;
        batch_complete(a, &wr->b);
        return;
    }
    wr->inflight = true;
    wr->refs++;
}

/* Start a write of everything queued unless one is already in flight. */
static void kick(tg_audit_t *a)
{
    if (a->wr->inflight || a->queued == 0)
        return;
    start_batch(a, false);
}

/* Write the queue out on the calling thread until it is empty. */
static void drain_sync(tg_audit_t *a)
{
    audit_batch_t b;

    queue_reopened(a);
    while (a->queued != 0) {
        batch_prepare(a, &b, false);
        (void)batch_run(a->sinks, a->nsinks, &b);
        batch_complete(a, &b);
        queue_reopened(a);
    }
}

/* Open the sink <cfg> as <a>'s next one. */
static int open_sink(tg_audit_t *a, const tg_audit_sink_cfg_t *cfg, tg_err_t *err)
{
    tg_audit_sink_t *out = &a->sinks[a->nsinks];
    int rc;

    switch (cfg->kind) {
    case TG_AUDIT_SINK_FILE:
        rc = tg_audit_sink_file_open(out, cfg, err);
        break;
    case TG_AUDIT_SINK_STDERR:
        rc = tg_audit_sink_stderr_open(out, err);
        break;
    case TG_AUDIT_SINK_REDIS_STREAM:
        rc = tg_audit_sink_redis_open(out, cfg, err);
        break;
    default:
        rc =
            tg_err_set(err, -EINVAL, "audit: sink %zu: unknown kind %d", a->nsinks, (int)cfg->kind);
        break;
    }
    if (rc == 0) {
        char label[64];
        const char *l = label;
        if (cfg->kind == TG_AUDIT_SINK_FILE)
            l = cfg->path;
        else if (cfg->kind == TG_AUDIT_SINK_STDERR)
            l = "stderr";
        else
            snprintf(label, sizeof(label), "redis stream %.40s",
                     cfg->stream != NULL ? cfg->stream : TG_DEF_AUDIT_STREAM);
        a->watch[a->nsinks].label = strdup(l);
        if (a->watch[a->nsinks].label == NULL) {
            out->ops->close(out->ctx);
            return tg_err_set(err, -ENOMEM, "audit: out of memory");
        }
        a->nsinks++;
    }
    return rc;
}

/* Open the sinks of <opts> (or one file sink on <opts>->path with the
 * default rotation and fsync), allocate the queue for <opts>->queue_cap
 * events and bind to <loop>. Returns 0 and <*out>, or a negative errno and
 * a message in <err>: -EINVAL for missing options, a zero queue_cap or
 * more than TG_CFG_SINKS_MAX sinks, -ENOMEM (a queue_cap too large to
 * allocate), or the first failing sink's error (naming its path). */
int tg_audit_open(tg_audit_t **out, uv_loop_t *loop, const tg_audit_opts_t *opts, tg_err_t *err)
{
    if (opts == NULL || opts->instance == NULL || opts->queue_cap == 0) {
        return tg_err_set(err, -EINVAL,
                          "audit: instance name and a queue_cap of at least 1 are required");
    }
    if (opts->nsinks > AUDIT_SINKS_MAX || (opts->nsinks != 0 && opts->sinks == NULL)) {
        return tg_err_set(err, -EINVAL, "audit: %zu sinks (expected 1 to %d)", opts->nsinks,
                          AUDIT_SINKS_MAX);
    }

    uint64_t ring_size = (uint64_t)opts->queue_cap * AUDIT_RING_BYTES_PER_EVENT;
    if (ring_size > SIZE_MAX) { /* 32-bit hosts only */
        return tg_err_set(err, -ENOMEM, "audit: queue_cap %u is too large",
                          (unsigned)opts->queue_cap);
    }

    tg_audit_t *a = calloc(1, sizeof(*a));
    if (a != NULL)
        a->waiters.next = a->waiters.prev = &a->waiters;
    audit_write_t *wr = calloc(1, sizeof(*wr));
    if (a == NULL || wr == NULL) {
        free(a);
        free(wr);
        return tg_err_set(err, -ENOMEM, "audit: out of memory");
    }
    if (uv_mutex_init(&wr->mu) != 0) {
        free(a);
        free(wr);
        return tg_err_set(err, -ENOMEM, "audit: cannot create a mutex");
    }
    if (uv_cond_init(&wr->cv) != 0) {
        uv_mutex_destroy(&wr->mu);
        free(a);
        free(wr);
        return tg_err_set(err, -ENOMEM, "audit: cannot create a condition variable");
    }
    a->wr = wr;
    wr->refs = 1;
    wr->req.data = a;
    a->loop = loop;
    a->log = opts->log;
    a->log_ctx = opts->log_ctx;
    a->queue_cap = opts->queue_cap;
    a->next_seq = 1;
    a->ring_size = (size_t)ring_size;
    if (a->ring_size < TG_AUDIT_LINE_MAX)
        a->ring_size = TG_AUDIT_LINE_MAX; /* any line fits in an empty queue */
    a->ring = malloc(a->ring_size);
    a->lens = malloc((size_t)opts->queue_cap * sizeof(*a->lens));
    a->carry = malloc((size_t)opts->queue_cap * sizeof(*a->carry));
    a->instance = strdup(opts->instance);
    if (a->ring == NULL || a->lens == NULL || a->carry == NULL || a->instance == NULL) {
        tg_err_set(err, -ENOMEM, "audit: out of memory for a queue of %u events",
                   (unsigned)opts->queue_cap);
        tg_audit_close(a);
        return -ENOMEM;
    }

    tg_audit_sink_cfg_t one;
    const tg_audit_sink_cfg_t *cfgs = opts->sinks;
    size_t n = opts->nsinks;
    if (n == 0) {
        tg_config_sink_defaults(&one, TG_AUDIT_SINK_FILE);
        one.path = (char *)opts->path;
        cfgs = &one;
        n = 1;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = open_sink(a, &cfgs[i], err);
        if (rc < 0) {
            tg_audit_close(a);
            return rc;
        }
    }
    memcpy(wr->sinks, a->sinks, sizeof(a->sinks));
    wr->nsinks = a->nsinks;
    a->flush_timer = malloc(sizeof(*a->flush_timer));
    if (a->flush_timer != NULL) {
        uv_timer_init(loop, a->flush_timer);
        a->flush_timer->data = a;
    }
    *out = a;
    return 0;
}

/* Queue <ev> with the next seq and the current wall-clock time, and have
 * it written soon (kick_soon). Never blocks and never allocates. When the
 * queue is full the event is counted as dropped instead. */
void tg_audit_emit(tg_audit_t *a, const tg_audit_ev_t *ev)
{
    emit_queued(a, ev);
    kick_soon(a);
}

/* Events lost since open (queue full, unencodable, or failed writes). */
uint64_t tg_audit_dropped(const tg_audit_t *a)
{
    return a->dropped;
}

/* Lines queued, including those being written. */
uint32_t tg_audit_queued(const tg_audit_t *a)
{
    return a->queued;
}

bool tg_audit_crowded(const tg_audit_t *a)
{
    return a->queued >= a->queue_cap - a->queue_cap / 4 ||
           a->ring_used >= a->ring_size - a->ring_size / 4;
}

void tg_audit_room_wait(tg_audit_t *a, tg_audit_room_t *r, void (*cb)(tg_audit_room_t *r))
{
    if (r->next != NULL)
        return;
    r->cb = cb;
    r->prev = a->waiters.prev;
    r->next = &a->waiters;
    a->waiters.prev->next = r;
    a->waiters.prev = r;
}

void tg_audit_room_cancel(tg_audit_room_t *r)
{
    if (r->next == NULL)
        return;
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

/* Wait for the batch in flight, write the rest of the queue on the calling
 * thread (and an audit.dropped line for any loss not yet reported), close
 * the sinks (which make their data durable per their fsync policy) and
 * free <a>. The loop is not run here, so this is safe from inside a loop
 * callback; the timers' close callbacks and a work request that was in
 * flight are released by libuv the next time the loop runs. */
void tg_audit_close(tg_audit_t *a)
{
    if (a == NULL)
        return;

    /* Waiters stop waiting: nothing will wake them, and their owners may
     * outlive <a> (they cancel on a list that is gone). */
    while (a->waiters.next != &a->waiters)
        tg_audit_room_cancel(a->waiters.next);
    if (a->flush_timer != NULL) {
        uv_timer_stop(a->flush_timer);
        uv_close((uv_handle_t *)a->flush_timer, free_handle);
        a->flush_timer = NULL;
    }
    audit_write_t *wr = a->wr;
    if (wr->inflight) {
        uv_mutex_lock(&wr->mu);
        while (!wr->done)
            uv_cond_wait(&wr->cv, &wr->mu);
        uv_mutex_unlock(&wr->mu);
        batch_complete(a, &wr->b);
        wr->req.data = NULL; /* write_done only releases it now */
    }
    if (wr->timer_init) {
        /* Closing stops it, so on_sync_timer cannot run again and <data>
         * can carry <wr> to sync_timer_closed. */
        uv_close((uv_handle_t *)&wr->sync_timer, sync_timer_closed);
        wr->sync_timer.data = wr;
    }

    if (a->nsinks != 0) {
        drain_sync(a);
        if (a->unreported != 0 && report_dropped(a))
            drain_sync(a);
    }
    for (size_t s = 0; s < a->nsinks; s++) {
        a->sinks[s].ops->close(a->sinks[s].ctx);
        free(a->watch[s].label);
    }
    write_release(wr);
    free(a->instance);
    free(a->lens);
    free(a->carry);
    free(a->ring);
    free(a);
}
