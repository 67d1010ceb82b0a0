/* router/gateway/io.c output: a batch the pipe takes whole is written at once and
 * released; one it takes in part is finished by uv_write, in order, with
 * its blocks held until then. */
#define _GNU_SOURCE
#include "router/gateway/io.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct sink {
    char *buf;
    size_t len, cap;
    size_t want;
    uv_pipe_t rd;
} sink_t;

static int drains;

static void on_drain(tg_out_t *o, void *ctx)
{
    (void)o;
    (void)ctx;
    drains++;
}

static void sink_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    sink_t *s = h->data;
    (void)suggested;
    *b = uv_buf_init(s->buf + s->len, (unsigned)(s->cap - s->len));
}

static void sink_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    sink_t *s = st->data;
    (void)b;
    if (n > 0)
        s->len += (size_t)n;
    if (n < 0 || s->len >= s->want)
        uv_read_stop(st);
}

/* A block holding <len> bytes of a known pattern starting at <seed>. */
static tg_block_t *pattern_block(size_t len, unsigned seed)
{
    tg_block_t *b = malloc(sizeof(*b) + len);
    cr_assert_not_null(b);
    b->refs = 1;
    b->cap = len;
    for (size_t i = 0; i < len; i++)
        b->data[i] = (char)('a' + (seed + i) % 26);
    return b;
}

/* The out on the write end of a fresh pipe of <pipe_bytes>; the sink on
 * its read end. */
static void open_pair(uv_loop_t *loop, uv_pipe_t *wp, tg_out_t *o, tg_pool_t *pool, sink_t *s,
                      int pipe_bytes)
{
    int fds[2];
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    cr_assert_gt(fcntl(fds[1], F_SETPIPE_SZ, pipe_bytes), 0);
    cr_assert_eq(uv_pipe_init(loop, wp, 0), 0);
    cr_assert_eq(uv_pipe_open(wp, fds[1]), 0);
    cr_assert_eq(uv_pipe_init(loop, &s->rd, 0), 0);
    cr_assert_eq(uv_pipe_open(&s->rd, fds[0]), 0);
    s->rd.data = s;
    tg_out_init(o, pool);
    o->stream = (uv_stream_t *)wp;
    o->on_drain = on_drain;
    drains = 0;
}

static void close_pair(uv_loop_t *loop, uv_pipe_t *wp, sink_t *s)
{
    uv_close((uv_handle_t *)wp, NULL);
    uv_close((uv_handle_t *)&s->rd, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}

Test(io, whole_batch_written_at_once_and_released)
{
    uv_loop_t loop;
    uv_pipe_t wp;
    tg_out_t o;
    tg_pool_t pool;
    sink_t s = {.cap = 4096, .want = 0};
    s.buf = malloc(s.cap);
    uv_loop_init(&loop);
    tg_pool_init(&pool, 0);
    open_pair(&loop, &wp, &o, &pool, &s, 65536);

    tg_block_t *b = pattern_block(100, 0);
    cr_assert_eq(tg_out_slice(&o, b, b->data, 40), 0);
    cr_assert_eq(tg_out_copy(&o, "-ID-", 4), 0);
    cr_assert_eq(tg_out_slice(&o, b, b->data + 50, 50), 0);
    cr_assert_eq(b->refs, 2);
    cr_assert_eq(tg_out_flush(&o), 0);
    /* Out already: nothing queued, the block is back with its reader. */
    cr_assert_eq(o.queued_bytes, 0);
    cr_assert_eq(o.npieces, 0);
    cr_assert_eq(b->refs, 1);
    cr_assert_eq(o.written_total, 94);

    char want[94];
    memcpy(want, b->data, 40);
    memcpy(want + 40, "-ID-", 4);
    memcpy(want + 44, b->data + 50, 50);
    s.want = sizeof want;
    uv_read_start((uv_stream_t *)&s.rd, sink_alloc, sink_read);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(s.len, sizeof want);
    cr_assert_eq(memcmp(s.buf, want, sizeof want), 0);

    /* The next batch reuses the out's arrays. */
    cr_assert_eq(tg_out_copy(&o, "x", 1), 0);
    cr_assert_eq(tg_out_flush(&o), 0);
    cr_assert_eq(o.queued_bytes, 0);

    close_pair(&loop, &wp, &s);
    tg_out_free(&o);
    tg_block_unref(&pool, b);
    tg_pool_free(&pool);
    uv_loop_close(&loop);
    free(s.buf);
}

Test(io, partial_write_finishes_in_order_holding_its_blocks)
{
    enum { BIG = 300000 };
    uv_loop_t loop;
    uv_pipe_t wp;
    tg_out_t o;
    tg_pool_t pool;
    sink_t s = {.cap = 2 * BIG, .want = 0};
    s.buf = malloc(s.cap);
    uv_loop_init(&loop);
    tg_pool_init(&pool, 0);
    open_pair(&loop, &wp, &o, &pool, &s, 4096);

    tg_block_t *b1 = pattern_block(BIG, 0), *b2 = pattern_block(BIG, 7);
    char *want = malloc(s.cap);
    size_t wl = 0;
    /* Pieces of two blocks and copies, many of them, so the pipe stops
     * in the middle of one. */
    for (int k = 0; k < 30; k++) {
        size_t off = (size_t)k * 9000;
        cr_assert_eq(tg_out_slice(&o, b1, b1->data + off, 7000), 0);
        memcpy(want + wl, b1->data + off, 7000);
        wl += 7000;
        char id[16];
        int n = snprintf(id, sizeof id, "<%d>", k);
        cr_assert_eq(tg_out_copy(&o, id, (size_t)n), 0);
        memcpy(want + wl, id, (size_t)n);
        wl += (size_t)n;
        cr_assert_eq(tg_out_slice(&o, b2, b2->data + off, 3001), 0);
        memcpy(want + wl, b2->data + off, 3001);
        wl += 3001;
    }
    cr_assert_eq(tg_out_flush(&o), 0);
    /* Part of it waits: the request holds both blocks. */
    cr_assert_gt(o.queued_bytes, 0);
    cr_assert_lt(o.queued_bytes, wl);
    cr_assert_gt(b1->refs, 1);
    cr_assert_gt(b2->refs, 1);
    /* A batch flushed while one is in flight queues behind it. */
    cr_assert_eq(tg_out_copy(&o, "END", 3), 0);
    memcpy(want + wl, "END", 3);
    wl += 3;
    cr_assert_eq(tg_out_flush(&o), 0);

    s.want = wl;
    uv_read_start((uv_stream_t *)&s.rd, sink_alloc, sink_read);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(s.len, wl, "read %zu of %zu bytes", s.len, wl);
    cr_assert_eq(memcmp(s.buf, want, wl), 0, "bytes out of order");
    cr_assert_eq(o.queued_bytes, 0);
    cr_assert_geq(drains, 1);
    cr_assert_eq(b1->refs, 1);
    cr_assert_eq(b2->refs, 1);

    close_pair(&loop, &wp, &s);
    tg_out_free(&o);
    tg_block_unref(&pool, b1);
    tg_block_unref(&pool, b2);
    tg_pool_free(&pool);
    uv_loop_close(&loop);
    free(want);
    free(s.buf);
}
