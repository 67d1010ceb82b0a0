/* The audit pipe: seq and ts assignment, the bounded queue, and its drain
 * on the libuv threadpool.
 *
 * Queue: encoded lines are copied into a byte ring, and their lengths into
 * a ring of queue_cap entries; both are allocated once at open, so emit
 * does not allocate. Lines stay in the ring until their write returns, so
 * a batch in flight is always the oldest <batch_events> lines, and new
 * lines are appended behind it without touching the bytes being written.
 *
 * Drain: one write in flight at a time, covering every line queued when it
 * started (one or two iovecs, as the ring may wrap). It runs as uv_work on
 * the threadpool, so the loop never waits for the disk. The work request
 * is the only thing that keeps the loop alive, and only while it is in
 * flight: an idle audit pipe holds no handle and no request.
 *
 * Loss: an event that finds the queue full gets no seq, so the written
 * seqs stay consecutive and the audit.dropped line queued once there is
 * room again carries how many were lost in between. Lines whose write
 * fails already have a seq; they are counted the same way, so every gap in
 * the file is explained by the audit.dropped line that follows it.
 *
 * Threads: everything here runs on the loop thread except write_work,
 * which reads only <wr> and the ring bytes the batch covers.
 */
#include <errno.h>
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

/* The write in flight. Kept apart from tg_audit_t because it can outlive
 * it: tg_audit_close waits for the worker, but libuv still calls
 * write_done afterwards, and that call then frees this (orphaned). */
typedef struct audit_write {
    uv_work_t req;
    uv_mutex_t mu;
    uv_cond_t cv;
    bool done;     /* under <mu>: write_work has finished */
    bool inflight; /* loop thread: queued, write_done not yet run */
    bool orphaned; /* loop thread: tg_audit_t is gone, write_done frees */
    tg_audit_sink_t sink;
    struct iovec iov[3]; /* optional "\n" repair, then up to two ring spans */
    int iovcnt;
    size_t prefix;     /* bytes of repair newline in iov[0] */
    size_t nbytes;     /* ring bytes in the batch */
    uint32_t nevents;  /* lines in the batch */
    ssize_t result;    /* write's return, set by write_work */
} audit_write_t;

/* Owned by the caller of tg_audit_open; freed by tg_audit_close. */
struct tg_audit {
    uv_loop_t *loop;
    tg_audit_sink_t sink;
    char *instance;
    char *ring; /* ring_size bytes of queued lines */
    size_t ring_size;
    size_t ring_head; /* offset of the oldest queued byte */
    size_t ring_used;
    uint32_t *lens; /* queue_cap line lengths, oldest at len_head */
    uint32_t queue_cap;
    uint32_t len_head;
    uint32_t queued;
    uint64_t next_seq;
    uint64_t dropped;    /* lifetime total, for the registry */
    uint64_t unreported; /* lost since the last audit.dropped line */
    bool torn;           /* the sink ends in a partial line */
    bool write_failed;   /* the last batch did not fully land */
    audit_write_t *wr;
    uv_timer_t *flush_timer; /* heap: closed (and freed) after <a> is gone */
    char line[TG_AUDIT_LINE_MAX]; /* encode scratch */
};

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Append the <len>-byte line <a>->line to the queue; false when the queue
 * has no room for it (count or bytes). */
static bool queue_push(tg_audit_t *a, size_t len)
{
    if (a->queued == a->queue_cap || a->ring_size - a->ring_used < len)
        return false;
    size_t tail = (a->ring_head + a->ring_used) % a->ring_size;
    size_t first = a->ring_size - tail < len ? a->ring_size - tail : len;
    memcpy(a->ring + tail, a->line, first);
    memcpy(a->ring, a->line + first, len - first);
    a->ring_used += len;
    a->lens[(a->len_head + a->queued) % a->queue_cap] = (uint32_t)len;
    a->queued++;
    return true;
}

/* Remove the oldest <n> lines (<nbytes> bytes) from the queue. */
static void queue_pop(tg_audit_t *a, uint32_t n, size_t nbytes)
{
    a->len_head = (a->len_head + n) % a->queue_cap;
    a->queued -= n;
    a->ring_head = (a->ring_head + nbytes) % a->ring_size;
    a->ring_used -= nbytes;
}

/* Encode <ev> with the next seq and queue it; the seq is consumed only
 * when the line is queued. False when the event is lost (queue full, or a
 * line that cannot be encoded, which is counted rather than silent). */
static bool queue_event(tg_audit_t *a, const tg_audit_ev_t *ev)
{
    if (a->queued == a->queue_cap)
        return false; /* the usual overflow: skip the clock and the encoding */
    long len = tg_audit_encode(a->line, sizeof(a->line), ev, a->next_seq, wall_ms(), a->instance);
    if (len < 0 || !queue_push(a, (size_t)len))
        return false;
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
    if (!queue_event(a, &ev))
        return false;
    a->unreported = 0;
    return true;
}

static void count_lost(tg_audit_t *a, uint64_t n)
{
    a->dropped += n;
    a->unreported += n;
}

/* Describe in <wr> a batch of every queued line, led by a newline when the
 * sink ends in a torn line so that the batch's first line stays whole. */
static void batch_prepare(tg_audit_t *a, audit_write_t *wr)
{
    size_t first = a->ring_size - a->ring_head;

    wr->iovcnt = 0;
    wr->prefix = 0;
    if (a->torn) {
        wr->iov[wr->iovcnt++] = (struct iovec){.iov_base = (void *)"\n", .iov_len = 1};
        wr->prefix = 1;
    }
    if (first > a->ring_used)
        first = a->ring_used;
    wr->iov[wr->iovcnt++] = (struct iovec){.iov_base = a->ring + a->ring_head, .iov_len = first};
    if (a->ring_used > first)
        wr->iov[wr->iovcnt++] =
            (struct iovec){.iov_base = a->ring, .iov_len = a->ring_used - first};
    wr->nbytes = a->ring_used;
    wr->nevents = a->queued;
}

/* Account for the batch in <wr> whose write returned <result>. The whole
 * batch leaves the queue: written lines are done, and on a failure the
 * unwritten ones are counted as lost rather than retried (the errors a
 * file gives, ENOSPC, EIO, EFBIG, do not clear by retrying at once). A
 * line cut in the middle marks the sink torn. */
static void batch_complete(tg_audit_t *a, const audit_write_t *wr, ssize_t result)
{
    size_t written = result > 0 ? (size_t)result : 0;
    size_t payload = written > wr->prefix ? written - wr->prefix : 0;
    size_t done = 0;
    uint32_t whole = 0;

    while (whole < wr->nevents) {
        size_t len = a->lens[(a->len_head + whole) % a->queue_cap];
        if (done + len > payload)
            break;
        done += len;
        whole++;
    }
    queue_pop(a, wr->nevents, wr->nbytes);
    a->torn = written < wr->prefix || payload > done;
    a->write_failed = whole < wr->nevents;
    if (a->write_failed)
        count_lost(a, wr->nevents - whole);
}

static void write_free(audit_write_t *wr)
{
    uv_cond_destroy(&wr->cv);
    uv_mutex_destroy(&wr->mu);
    free(wr);
}

/* Threadpool: the only code that runs off the loop thread. */
static void write_work(uv_work_t *req)
{
    audit_write_t *wr = (audit_write_t *)req;
    ssize_t r = wr->sink.ops->write(wr->sink.ctx, wr->iov, wr->iovcnt);

    uv_mutex_lock(&wr->mu);
    wr->result = r;
    wr->done = true;
    uv_cond_signal(&wr->cv);
    uv_mutex_unlock(&wr->mu);
}

static void kick(tg_audit_t *a);
static void kick_soon(tg_audit_t *a);

static void write_done(uv_work_t *req, int status)
{
    audit_write_t *wr = (audit_write_t *)req;

    wr->inflight = false;
    if (wr->orphaned) {
        write_free(wr);
        return;
    }
    tg_audit_t *a = req->data;
    batch_complete(a, wr, status == 0 ? wr->result : status);
    /* Room again: report the loss now rather than with the next event,
     * unless the sink just failed too (the report would fail the same
     * way and loop); the next emit reports it then. */
    if (a->unreported != 0 && !a->write_failed)
        report_dropped(a);
    kick_soon(a);
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

/* Start a write of everything queued unless one is already in flight. */
static void kick(tg_audit_t *a)
{
    if (a->flush_timer != NULL)
        uv_timer_stop(a->flush_timer);
    audit_write_t *wr = a->wr;

    if (wr->inflight || a->queued == 0)
        return;
    batch_prepare(a, wr);
    wr->done = false;
    int rc = uv_queue_work(a->loop, &wr->req, write_work, write_done);
    if (rc < 0) {
        batch_complete(a, wr, rc);
        return;
    }
    wr->inflight = true;
}

/* Write the queue out on the calling thread until it is empty. */
static void drain_sync(tg_audit_t *a)
{
    audit_write_t b;

    while (a->queued != 0) {
        batch_prepare(a, &b);
        batch_complete(a, &b, a->sink.ops->write(a->sink.ctx, b.iov, b.iovcnt));
    }
}

/* Open the file sink on <opts>->path, allocate the queue for
 * <opts>->queue_cap events and bind to <loop>. Returns 0 and <*out>, or a
 * negative errno and a message in <err>: -EINVAL for missing options or a
 * zero queue_cap, -ENOMEM (a queue_cap too large to allocate), or the
 * sink's error (naming the path). */
int tg_audit_open(tg_audit_t **out, uv_loop_t *loop, const tg_audit_opts_t *opts, char *err,
                  size_t errlen)
{
    if (opts == NULL || opts->instance == NULL || opts->queue_cap == 0) {
        snprintf(err, errlen, "audit: instance name and a queue_cap of at least 1 are required");
        return -EINVAL;
    }

    uint64_t ring_size = (uint64_t)opts->queue_cap * AUDIT_RING_BYTES_PER_EVENT;
    if (ring_size > SIZE_MAX) { /* 32-bit hosts only */
        snprintf(err, errlen, "audit: queue_cap %u is too large", (unsigned)opts->queue_cap);
        return -ENOMEM;
    }

    tg_audit_t *a = calloc(1, sizeof(*a));
    audit_write_t *wr = calloc(1, sizeof(*wr));
    if (a == NULL || wr == NULL) {
        free(a);
        free(wr);
        snprintf(err, errlen, "audit: out of memory");
        return -ENOMEM;
    }
    if (uv_mutex_init(&wr->mu) != 0) {
        free(a);
        free(wr);
        snprintf(err, errlen, "audit: cannot create a mutex");
        return -ENOMEM;
    }
    if (uv_cond_init(&wr->cv) != 0) {
        uv_mutex_destroy(&wr->mu);
        free(a);
        free(wr);
        snprintf(err, errlen, "audit: cannot create a condition variable");
        return -ENOMEM;
    }
    a->wr = wr;
    wr->req.data = a;
    a->loop = loop;
    a->queue_cap = opts->queue_cap;
    a->next_seq = 1;
    a->ring_size = (size_t)ring_size;
    if (a->ring_size < TG_AUDIT_LINE_MAX)
        a->ring_size = TG_AUDIT_LINE_MAX; /* any line fits in an empty queue */
    a->ring = malloc(a->ring_size);
    a->lens = malloc((size_t)opts->queue_cap * sizeof(*a->lens));
    a->instance = strdup(opts->instance);
    if (a->ring == NULL || a->lens == NULL || a->instance == NULL) {
        snprintf(err, errlen, "audit: out of memory for a queue of %u events",
                 (unsigned)opts->queue_cap);
        tg_audit_close(a);
        return -ENOMEM;
    }

    int rc = tg_audit_sink_file_open(&a->sink, opts->path, err, errlen);
    if (rc < 0) {
        tg_audit_close(a);
        return rc;
    }
    wr->sink = a->sink;
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
    /* The audit.dropped report goes first so it sits right after the gap
     * it explains; if it does not fit, neither does anything after it. */
    if ((a->unreported != 0 && !report_dropped(a)) || !queue_event(a, ev))
        count_lost(a, 1);
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

/* Wait for the write in flight, write the rest of the queue on the calling
 * thread (and an audit.dropped line for any loss not yet reported), close
 * the sink and free <a>. The loop is not run here, so this is safe from
 * inside a loop callback; a write request that was in flight is released
 * by libuv the next time the loop runs. */
void tg_audit_close(tg_audit_t *a)
{
    if (a == NULL)
        return;

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
        batch_complete(a, wr, wr->result);
        wr->orphaned = true; /* write_done frees it */
    } else {
        write_free(wr);
    }

    if (a->sink.ops != NULL) {
        drain_sync(a);
        if (a->unreported != 0 && report_dropped(a))
            drain_sync(a);
        a->sink.ops->close(a->sink.ctx);
    }
    free(a->instance);
    free(a->lens);
    free(a->ring);
    free(a);
}
