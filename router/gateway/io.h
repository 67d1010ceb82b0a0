/* Zero-copy stream plumbing for the proxy.
 *
 * Reads land in reference-counted blocks (tg_block_t). Complete frames are
 * forwarded as slices of the block they arrived in; a frame that straddles
 * two reads is the only thing ever copied (into the next block). All the
 * slices (and small spliced pieces such as rewritten ids) queued on one
 * output during one event are written by tg_out_flush with one writev
 * (scatter-gather), so N pipelined frames cost one syscall each way.
 *
 * Ownership: a block is freed (or parked in the pool's spare slots) when
 * its last reference goes: the reader's, or a written batch's. The pool
 * outlives every stream. A tg_out owns its pending batch. A batch the pipe
 * takes whole at flush (nothing else in flight) is released at once and
 * the out keeps its arrays; the rest of a batch goes to one uv_write whose
 * request owns the remaining block references and scratch bytes and frees
 * them in the write callback.
 */
#ifndef TG_ROUTER_IO_H
#define TG_ROUTER_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "router/codec/ndjson.h"

#define TG_IO_CHUNK (64u * 1024)      /* fixed internal bound: bytes offered per read */
#define TG_IO_BLOCK (256u * 1024)     /* fixed internal bound: default block size */
#define TG_IO_SPARES 4                /* fixed internal bound: parked free blocks */

typedef struct tg_block {
    uint32_t refs;
    size_t cap;
    char data[];
} tg_block_t;

typedef struct tg_pool {
    tg_block_t *spare[TG_IO_SPARES];
    size_t max_block; /* blocks larger than this are never parked */
} tg_pool_t;

void tg_pool_init(tg_pool_t *p, size_t max_block);
void tg_pool_free(tg_pool_t *p);
void tg_block_unref(tg_pool_t *p, tg_block_t *b);
/* A block of at least <need> bytes with one reference (a parked one when
 * one fits), or NULL: for frames made rather than read. */
tg_block_t *tg_block_get(tg_pool_t *p, size_t need);

/* One input stream split into frames. */
typedef struct tg_in {
    tg_pool_t *pool;
    tg_block_t *blk; /* current block; the reader holds one reference */
    size_t len;      /* bytes filled in blk */
    size_t pos;      /* start of the unconsumed bytes (partial frame) */
    size_t hint;     /* size of recent large frames: next block is at least this */
    tg_ndjson_t nd;
} tg_in_t;

void tg_in_init(tg_in_t *in, tg_pool_t *pool, uint64_t max_frame);
void tg_in_free(tg_in_t *in);
/* libuv alloc callback body: room for the next read. */
void tg_in_alloc(tg_in_t *in, uv_buf_t *buf);
/* After a read of <n> bytes into the buffer from tg_in_alloc. */
static inline void tg_in_commit(tg_in_t *in, size_t n) { in->len += n; }
/* After the frames of a read were consumed: reclaim the block if unused. */
void tg_in_settle(tg_in_t *in);

/* One output stream with a pending scatter-gather batch. */
typedef struct tg_piece {
    const char *base; /* NULL: offset into the scratch */
    size_t off;
    size_t len;
} tg_piece_t;

typedef struct tg_out {
    uv_stream_t *stream;     /* NULL when closed */
    tg_pool_t *pool;
    tg_piece_t *pieces;
    size_t npieces, pieces_cap;
    tg_block_t **refs;
    size_t nrefs, refs_cap;
    char *scratch;
    size_t scratch_len, scratch_cap;
    uv_buf_t *bufs;          /* flush scratch: the batch as iovecs */
    struct tg_wreq *spare;   /* a write request ready before any byte is written */
    size_t bufs_cap;
    size_t pending_bytes;    /* in the batch, not yet flushed */
    size_t queued_bytes;     /* flushed, write not yet completed */
    uint64_t written_total;
    int error;               /* first write error (negative errno), 0 if none */
    void (*on_drain)(struct tg_out *o, void *ctx); /* queued_bytes fell to 0 */
    void (*on_error)(struct tg_out *o, void *ctx, int status);
    void *ctx;
} tg_out_t;

void tg_out_init(tg_out_t *o, tg_pool_t *pool);
void tg_out_free(tg_out_t *o);
/* Queue a slice of block <b> (a reference is taken). 0 or -ENOMEM. */
int tg_out_slice(tg_out_t *o, tg_block_t *b, const char *p, size_t len);
/* Queue a copy of small bytes (ids, denials). 0 or -ENOMEM. */
int tg_out_copy(tg_out_t *o, const char *p, size_t len);
/* Reserve <len> scratch bytes to write in place; returns the pointer (valid
 * until the next out call) or NULL. Commit with tg_out_commit. */
char *tg_out_reserve(tg_out_t *o, size_t len);
void tg_out_commit(tg_out_t *o, size_t len);
/* Write the batch: at once (one writev) when no write is in flight, the
 * rest (or all of it) through one uv_write. 0 or a negative errno. */
int tg_out_flush(tg_out_t *o);
/* Drop the pending batch (stream gone). */
void tg_out_discard(tg_out_t *o);

/* Enlarge a pipe's kernel buffer (F_SETPIPE_SZ); best effort. */
void tg_pipe_enlarge(int fd, int bytes);

/* After EOF on socket <s>: true when its peer closed the connection (or
 * it failed), false when the peer only shut down its sending side and can
 * still read its answers. A Unix socket whose peer closed reports POLLHUP
 * (both directions shut); a half-close only POLLRDHUP. Not for pipes
 * (wrap's stdin): their EOF says nothing of the other direction. */
bool tg_io_peer_gone(uv_stream_t *s);

#endif
