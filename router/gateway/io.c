/* Zero-copy stream plumbing: see io.h. */
#include "router/gateway/io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif

void tg_pool_init(tg_pool_t *p, size_t max_block)
{
    memset(p, 0, sizeof(*p));
    p->max_block = max_block;
}

void tg_pool_free(tg_pool_t *p)
{
    for (int i = 0; i < TG_IO_SPARES; i++) {
        free(p->spare[i]);
        p->spare[i] = NULL;
    }
}

/* A block of at least <need> bytes: the smallest parked one that fits,
 * else a new one. Reusing blocks keeps large frames off mmap/munmap. */
static tg_block_t *pool_get(tg_pool_t *p, size_t need)
{
    int best = -1;
    for (int i = 0; i < TG_IO_SPARES; i++) {
        tg_block_t *b = p->spare[i];
        if (b != NULL && b->cap >= need && (best < 0 || b->cap < p->spare[best]->cap))
            best = i;
    }
    if (best >= 0) {
        tg_block_t *b = p->spare[best];
        p->spare[best] = NULL;
        b->refs = 1;
        return b;
    }
    tg_block_t *b = malloc(sizeof(*b) + need);
    if (b == NULL)
        return NULL;
    b->refs = 1;
    b->cap = need;
    return b;
}

tg_block_t *tg_block_get(tg_pool_t *p, size_t need)
{
    return pool_get(p, need);
}

void tg_block_unref(tg_pool_t *p, tg_block_t *b)
{
    if (b == NULL || --b->refs > 0)
        return;
    if (b->cap <= p->max_block) {
        int smallest = -1;
        for (int i = 0; i < TG_IO_SPARES; i++) {
            if (p->spare[i] == NULL) {
                p->spare[i] = b;
                return;
            }
            if (smallest < 0 || p->spare[i]->cap < p->spare[smallest]->cap)
                smallest = i;
        }
        /* Keep the larger of the two: big frames are the costly ones. */
        if (p->spare[smallest]->cap < b->cap) {
            tg_block_t *old = p->spare[smallest];
            p->spare[smallest] = b;
            free(old);
            return;
        }
    }
    free(b);
}

void tg_in_init(tg_in_t *in, tg_pool_t *pool, uint64_t max_frame)
{
    memset(in, 0, sizeof(*in));
    in->pool = pool;
    tg_ndjson_init(&in->nd, max_frame);
}

void tg_in_free(tg_in_t *in)
{
    tg_block_unref(in->pool, in->blk);
    in->blk = NULL;
    in->len = in->pos = 0;
}

void tg_in_alloc(tg_in_t *in, uv_buf_t *buf)
{
    tg_block_t *b = in->blk;
    if (b != NULL && b->cap - in->len >= TG_IO_CHUNK / 4) {
        *buf = uv_buf_init(b->data + in->len, (unsigned)(b->cap - in->len));
        return;
    }
    size_t partial = b != NULL ? in->len - in->pos : 0;
    if (b != NULL && b->refs == 1 && b->cap - partial >= TG_IO_CHUNK) {
        /* Nobody else holds this block: slide the partial frame down. */
        memmove(b->data, b->data + in->pos, partial);
        in->len = partial;
        in->pos = 0;
        *buf = uv_buf_init(b->data + in->len, (unsigned)(b->cap - in->len));
        return;
    }
    /* A frame straddles the block end: copy it (the only copy ever made)
     * into a block that fits it and the next chunk; grow geometrically so a
     * large frame is copied O(1) times. Bounded: the codec refuses partial
     * frames past max_frame, so need <= 2 * max_frame + CHUNK. */
    size_t need = TG_IO_BLOCK;
    if (partial * 2 + TG_IO_CHUNK > need)
        need = partial * 2 + TG_IO_CHUNK;
    if (in->hint + TG_IO_CHUNK > need)
        need = in->hint + TG_IO_CHUNK;
    size_t ceiling = (size_t)in->nd.max_frame + 2 * TG_IO_CHUNK;
    if (need > ceiling && ceiling >= partial + TG_IO_CHUNK)
        need = ceiling;
    tg_block_t *nb = pool_get(in->pool, need);
    if (nb == NULL) {
        *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
        return;
    }
    if (partial > 0)
        memcpy(nb->data, b->data + in->pos, partial);
    tg_block_unref(in->pool, b);
    in->blk = nb;
    in->len = partial;
    in->pos = 0;
    *buf = uv_buf_init(nb->data + in->len, (unsigned)(nb->cap - in->len));
}

void tg_in_settle(tg_in_t *in)
{
    if (in->blk != NULL && in->pos == in->len && in->blk->refs == 1) {
        /* Nothing unfinished and nobody else holds the block: it goes back
         * to the pool (a spare the next read takes at no cost), so an idle
         * connection holds no read block (issue 20 item 19: every caller
         * connection kept 256 KiB until it closed). */
        tg_block_unref(in->pool, in->blk);
        in->blk = NULL;
        in->len = in->pos = 0;
    }
}

void tg_out_init(tg_out_t *o, tg_pool_t *pool)
{
    memset(o, 0, sizeof(*o));
    o->pool = pool;
}

void tg_out_discard(tg_out_t *o)
{
    for (size_t i = 0; i < o->nrefs; i++)
        tg_block_unref(o->pool, o->refs[i]);
    o->nrefs = 0;
    o->npieces = 0;
    o->scratch_len = 0;
    o->pending_bytes = 0;
}

void tg_out_free(tg_out_t *o)
{
    tg_out_discard(o);
    free(o->pieces);
    free(o->refs);
    free(o->scratch);
    free(o->bufs);
    free(o->spare);
    o->spare = NULL;
    o->bufs = NULL;
    o->bufs_cap = 0;
    o->pieces = NULL;
    o->refs = NULL;
    o->scratch = NULL;
    o->pieces_cap = o->refs_cap = o->scratch_cap = 0;
}

static __attribute__((noinline)) int grow_to(void **arr, size_t *cap, size_t want, size_t elem)
{
    size_t n = *cap ? *cap * 2 : 16;
    while (n < want)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (p == NULL)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

/* Room for <want> elements in <*arr>: the usual case, room already, is
 * one test inline (several per frame relayed); growing is out of line. */
static inline int grow(void **arr, size_t *cap, size_t want, size_t elem)
{
    return want <= *cap ? 0 : grow_to(arr, cap, want, elem);
}

/* Inline in the slice and copy writers: a call and its register saves
 * cost as much as the piece (two to four per frame relayed). */
static inline __attribute__((always_inline)) int add_piece(tg_out_t *o, const char *base,
                                                           size_t off, size_t len)
{
    if (len == 0)
        return 0;
    o->pending_bytes += len;
    if (o->npieces > 0) {
        tg_piece_t *last = &o->pieces[o->npieces - 1];
        /* Adjacent slices of one block (pass-through frames read back to
         * back) merge into one iovec. */
        if (base != NULL && last->base != NULL && last->base + last->len == base) {
            last->len += len;
            return 0;
        }
        if (base == NULL && last->base == NULL && last->off + last->len == off) {
            last->len += len;
            return 0;
        }
    }
    if (grow((void **)&o->pieces, &o->pieces_cap, o->npieces + 1, sizeof(*o->pieces)) < 0)
        return -ENOMEM;
    o->pieces[o->npieces++] = (tg_piece_t){base, off, len};
    return 0;
}

int tg_out_slice(tg_out_t *o, tg_block_t *b, const char *p, size_t len)
{
    if (o->nrefs == 0 || o->refs[o->nrefs - 1] != b) {
        if (grow((void **)&o->refs, &o->refs_cap, o->nrefs + 1, sizeof(*o->refs)) < 0)
            return -ENOMEM;
        o->refs[o->nrefs++] = b;
        b->refs++;
    }
    return add_piece(o, p, 0, len);
}

char *tg_out_reserve(tg_out_t *o, size_t len)
{
    if (grow((void **)&o->scratch, &o->scratch_cap, o->scratch_len + len, 1) < 0)
        return NULL;
    return o->scratch + o->scratch_len;
}

void tg_out_commit(tg_out_t *o, size_t len)
{
    size_t off = o->scratch_len;
    o->scratch_len += len;
    (void)add_piece(o, NULL, off, len);
}

int tg_out_copy(tg_out_t *o, const char *p, size_t len)
{
    char *dst = tg_out_reserve(o, len);
    if (dst == NULL)
        return -ENOMEM;
    memcpy(dst, p, len);
    tg_out_commit(o, len);
    return 0;
}

typedef struct tg_wreq {
    uv_write_t req;
    tg_out_t *out;
    size_t bytes;
    size_t nrefs;
    tg_block_t **refs;
    char *scratch;
} tg_wreq_t;

static void on_write(uv_write_t *req, int status)
{
    tg_wreq_t *w = (tg_wreq_t *)req;
    tg_out_t *o = w->out;
    for (size_t i = 0; i < w->nrefs; i++)
        tg_block_unref(o->pool, w->refs[i]);
    o->queued_bytes -= w->bytes;
    free(w->refs);
    free(w->scratch);
    if (o->spare == NULL)
        o->spare = w;
    else
        free(w);
    if (status < 0 && o->error == 0) {
        o->error = status;
        if (o->on_error != NULL)
            o->on_error(o, o->ctx, status);
        return;
    }
    if (o->queued_bytes == 0 && o->on_drain != NULL)
        o->on_drain(o, o->ctx);
}

int tg_out_flush(tg_out_t *o)
{
    if (o->npieces == 0)
        return 0;
    if (o->stream == NULL || o->error != 0) {
        tg_out_discard(o);
        return o->error != 0 ? o->error : -EPIPE;
    }
    if (grow((void **)&o->bufs, &o->bufs_cap, o->npieces, sizeof(*o->bufs)) < 0) {
        tg_out_discard(o);
        return -ENOMEM;
    }
    uv_buf_t *bufs = o->bufs;
    size_t n = o->npieces;
    for (size_t i = 0; i < n; i++) {
        const tg_piece_t *pc = &o->pieces[i];
        const char *p = pc->base != NULL ? pc->base : o->scratch + pc->off;
        bufs[i] = (uv_buf_t){.base = (char *)p, .len = pc->len};
    }
    size_t total = o->pending_bytes;
    /* The request a short write needs exists before anything is written:
     * running out of memory after half a frame went out would tear it. */
    if (o->spare == NULL && (o->spare = malloc(sizeof(*o->spare))) == NULL) {
        tg_out_discard(o);
        return -ENOMEM;
    }
    o->written_total += total;

    /* Nothing in flight: write now. Usually the pipe takes it all, and the
     * batch ends here with no request, no copy of the iovecs and no
     * callback; the blocks go back and the arrays are kept for the next
     * batch. A short write queues the rest below, in order. An error other
     * than EAGAIN also goes below: uv_write meets it again and reports it
     * through on_error as any write error. */
    size_t done = 0;
    if (o->queued_bytes == 0) {
        int rc = uv_try_write(o->stream, bufs, (unsigned)n);
        if (rc > 0)
            done = (size_t)rc;
    }
    if (done == total) {
        tg_out_discard(o); /* written: the batch is let go as a discard lets it go */
        return 0;
    }
    size_t left = total - done;
    size_t first = 0;
    while (done >= bufs[first].len) {
        done -= bufs[first].len;
        first++;
    }
    bufs[first].base += done;
    bufs[first].len -= done;

    tg_wreq_t *w = o->spare;
    o->spare = NULL;
    memset(w, 0, sizeof(*w));
    /* The batch's refs and scratch move to the request (they must live
     * until the write completes); the out starts fresh arrays. */
    w->out = o;
    w->bytes = left;
    w->refs = o->refs;
    w->nrefs = o->nrefs;
    w->scratch = o->scratch;
    o->refs = NULL;
    o->refs_cap = 0;
    o->nrefs = 0;
    o->scratch = NULL;
    o->scratch_cap = 0;
    o->scratch_len = 0;
    o->npieces = 0;
    o->queued_bytes += left;
    o->pending_bytes = 0;
    int rc = uv_write(&w->req, o->stream, bufs + first, (unsigned)(n - first), on_write);
    if (rc < 0) {
        o->queued_bytes -= w->bytes;
        for (size_t i = 0; i < w->nrefs; i++)
            tg_block_unref(o->pool, w->refs[i]);
        free(w->refs);
        free(w->scratch);
        o->spare = w;
        if (o->error == 0)
            o->error = rc;
        return rc;
    }
    return 0;
}

void tg_pipe_enlarge(int fd, int bytes)
{
    (void)fcntl(fd, F_SETPIPE_SZ, bytes);
}

bool tg_io_peer_gone(uv_stream_t *s)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)s, &fd) != 0)
        return true;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    return poll(&pf, 1, 0) != 1 || (pf.revents & (POLLHUP | POLLERR)) != 0;
}
