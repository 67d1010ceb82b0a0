/* The Redis Stream sink: each line becomes one stream entry,
 *   XADD <stream> MAXLEN ~ <maxlen> * json <line>
 * and while Redis is away lines wait in a spool file on disk, replayed in
 * order once it is back.
 *
 * Everything here runs on the threadpool (see sink.h), so it uses
 * hiredis's blocking API with a timeout on connect and on every reply.
 * Lines are pipelined, REDIS_PIPELINE per round trip.
 *
 * Order: while the spool holds anything, new lines are appended to it, not
 * sent, so the stream receives lines in the order they were written. The
 * spool is replayed (REPLAY_BYTES at a time, so that a long backlog does
 * not hold the audit queue for long) at the start of each write, and from
 * sync(), which audit.c's timer calls while a replay is pending, so the
 * backlog drains even when no new event comes.
 *
 * Loss: a line counts as written once Redis acknowledged its XADD or it is
 * in the spool (fdatasync'ed). When the spool would pass spool_max_bytes
 * the rest of the batch is refused, and audit.c counts it and reports it
 * with audit.dropped. Delivery is at least once: if the connection breaks
 * after Redis applied an XADD but before its reply arrived, that line is
 * spooled and sent again, which verify shows as a duplicate.
 *
 * Secrets: the URL's password is used for AUTH only; no message of this
 * file names the URL, only the stream and the spool.
 *
 * Signals: writing to a connection Redis closed raises SIGPIPE, which
 * hiredis does not suppress; the process must ignore SIGPIPE (toolgate
 * does, in the router) or a Redis restart kills it.
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/sink.h"

#define REDIS_RETRY_MS 1000  /* fixed internal bound: one connect attempt per second while away */
#define REDIS_PIPELINE 256   /* fixed internal bound: XADDs per round trip */
#define REPLAY_BYTES (1u << 20) /* fixed internal bound: spool bytes replayed per call */
#define SPOOL_CHUNK (64u * 1024) /* fixed internal bound: one spool read; holds a whole line */

/* Owned by the sink; freed by redis_close. */
typedef struct redis_sink {
    tg_audit_redis_ep_t ep;
    char stream[TG_AUDIT_STREAM_KEY_MAX + 1];
    char maxlen[24];
    struct timeval tv;
    redisContext *c;   /* NULL while disconnected */
    uint64_t retry_at; /* monotonic ms before which no connect is tried */
    int spool_fd;
    uint64_t spool_max;
    uint64_t spool_size; /* bytes in the spool file */
    uint64_t spool_off;  /* of which replayed already */
    char spool[PATH_MAX];
    char line[TG_AUDIT_LINE_MAX]; /* one line of a batch, made contiguous */
    char *chunk;                  /* SPOOL_CHUNK bytes read back from the spool */
} redis_sink_t;

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

static bool spool_pending(const redis_sink_t *rs)
{
    return rs->spool_off < rs->spool_size;
}

static void rs_drop(redis_sink_t *rs)
{
    redisFree(rs->c);
    rs->c = NULL;
    rs->retry_at = now_ms() + REDIS_RETRY_MS;
}

/* True when <r> is a reply other than an error. Frees it. */
static bool reply_ok(redisReply *r)
{
    bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* Connected, or connected now (at most one attempt per REDIS_RETRY_MS). */
static bool rs_connect(redis_sink_t *rs)
{
    if (rs->c != NULL)
        return true;
    if (now_ms() < rs->retry_at)
        return false;
    rs->retry_at = now_ms() + REDIS_RETRY_MS;
    rs->c = rs->ep.is_unix ? redisConnectUnixWithTimeout(rs->ep.path, rs->tv)
                           : redisConnectWithTimeout(rs->ep.host, rs->ep.port, rs->tv);
    if (rs->c == NULL || rs->c->err != 0 || redisSetTimeout(rs->c, rs->tv) != REDIS_OK) {
        rs_drop(rs);
        return false;
    }
    if (rs->ep.password[0] != '\0') {
        redisReply *r = rs->ep.user[0] != '\0'
                            ? redisCommand(rs->c, "AUTH %s %s", rs->ep.user, rs->ep.password)
                            : redisCommand(rs->c, "AUTH %s", rs->ep.password);
        if (!reply_ok(r)) {
            rs_drop(rs);
            return false;
        }
    }
    if (rs->ep.db != 0 && !reply_ok(redisCommand(rs->c, "SELECT %u", (unsigned)rs->ep.db))) {
        rs_drop(rs);
        return false;
    }
    rs->retry_at = 0;
    return true;
}

/* Queue the XADD of the <len>-byte line at <p> (no '\n') on the pipeline. */
static bool rs_append(redis_sink_t *rs, const char *p, size_t len)
{
    const char *argv[8] = {"XADD", rs->stream, "MAXLEN", "~", rs->maxlen, "*", "json", p};
    size_t argvlen[8] = {4, strlen(rs->stream), 6, 1, strlen(rs->maxlen), 1, 4, len};

    return redisAppendCommandArgv(rs->c, 8, argv, argvlen) == REDIS_OK;
}

/* Read the replies of <n> queued XADDs; returns how many succeeded before
 * the first failure, after which the connection is dropped. */
static size_t rs_acks(redis_sink_t *rs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(rs->c, &r) != REDIS_OK ||
            ((redisReply *)r)->type != REDIS_REPLY_STRING) {
            if (r != NULL)
                freeReplyObject(r);
            rs_drop(rs);
            return i;
        }
        freeReplyObject(r);
    }
    return n;
}

/* Send the lines at <c> while connected; returns the bytes of the lines
 * Redis acknowledged, with <c> just past them (always a prefix of the
 * batch, so the rest can go to the spool in order). Empty lines (the "\n"
 * that ends a torn line, which this sink never leaves) are passed over. */
static size_t send_batch(redis_sink_t *rs, tg_audit_cur_t *c)
{
    size_t total = 0;

    while (rs->c != NULL && tg_audit_cur_left(c) != 0) {
        tg_audit_cur_t start = *c;
        size_t lens[REDIS_PIPELINE];
        bool sent[REDIS_PIPELINE];
        size_t n = 0, queued = 0, bytes = 0;

        while (n < REDIS_PIPELINE && tg_audit_cur_left(c) != 0) {
            size_t len = tg_audit_cur_line(c);
            size_t body = len < sizeof(rs->line) ? len : sizeof(rs->line);
            tg_audit_cur_copy(c, rs->line, body);
            tg_audit_cur_skip(c, len - body); /* longer than any encoded line: cut */
            if (body > 0 && rs->line[body - 1] == '\n')
                body--;
            if (body != 0 && !rs_append(rs, rs->line, body)) {
                rs_drop(rs);
                break; /* this line is neither queued nor counted */
            }
            lens[n] = len;
            sent[n] = body != 0;
            queued += sent[n];
            n++;
        }
        size_t acked = rs->c != NULL ? rs_acks(rs, queued) : 0;
        /* Lines up to the first XADD not acknowledged (empty lines free). */
        size_t i = 0;
        for (size_t seen = 0; i < n && (!sent[i] || seen < acked); i++) {
            seen += sent[i];
            bytes += lens[i];
        }
        total += bytes;
        if (i < n || rs->c == NULL) {
            *c = start;
            tg_audit_cur_skip(c, bytes);
            return total;
        }
    }
    return total;
}

/* Append whole lines at <c> to the spool while they fit; returns their
 * bytes. A line the disk took only in part is cut off again, so the spool
 * always ends with a whole line. */
static size_t spool_append(redis_sink_t *rs, tg_audit_cur_t *c)
{
    size_t total = 0;

    while (tg_audit_cur_left(c) != 0) {
        size_t len = tg_audit_cur_line(c);
        if (len <= 1) { /* an empty line: nothing to keep */
            tg_audit_cur_skip(c, len);
            total += len;
            continue;
        }
        if (rs->spool_size + len > rs->spool_max)
            break;
        ssize_t w = tg_audit_fd_write(rs->spool_fd, c, len, -1);
        if (w != (ssize_t)len) {
            if (w > 0 && ftruncate(rs->spool_fd, (off_t)rs->spool_size) != 0) {
                /* The torn tail stays; open trims it on the next start. */
            }
            break;
        }
        rs->spool_size += len;
        total += len;
    }
    if (total != 0)
        (void)fdatasync(rs->spool_fd);
    return total;
}

/* XADD the lines of <buf> (<len> bytes, read from spool offset
 * <rs>->spool_off) up to its last '\n', a pipeline at a time, advancing
 * spool_off past what Redis acknowledged. Returns the bytes consumed;
 * stops early when the connection drops or <budget> is spent. */
static size_t replay_chunk(redis_sink_t *rs, const char *buf, size_t len, uint64_t budget)
{
    const char *p = buf, *end = buf + len;

    while (rs->c != NULL && (uint64_t)(p - buf) < budget) {
        const char *ends[REDIS_PIPELINE]; /* just past each queued line */
        const char *q = p;
        size_t queued = 0;

        while (queued < REDIS_PIPELINE) {
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            if (nl == NULL)
                break; /* a line cut by the chunk: read again from it */
            if (nl > q) {
                if (!rs_append(rs, q, (size_t)(nl - q))) {
                    rs_drop(rs);
                    return (size_t)(p - buf);
                }
                ends[queued++] = nl + 1;
            }
            q = nl + 1;
        }
        size_t acked = queued != 0 ? rs_acks(rs, queued) : 0;
        const char *upto = acked == queued ? q : acked == 0 ? p : ends[acked - 1];
        rs->spool_off += (uint64_t)(upto - p);
        p = upto;
        if (acked < queued || memchr(p, '\n', (size_t)(end - p)) == NULL)
            break;
    }
    return (size_t)(p - buf);
}

/* Send up to about <budget> bytes of the spool, oldest first. Once all of
 * it is in Redis the file is emptied. */
static void replay(redis_sink_t *rs, uint64_t budget)
{
    while (spool_pending(rs) && rs->c != NULL && budget != 0) {
        uint64_t want = rs->spool_size - rs->spool_off;
        if (want > SPOOL_CHUNK)
            want = SPOOL_CHUNK;
        ssize_t n = pread(rs->spool_fd, rs->chunk, (size_t)want, (off_t)rs->spool_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* unreadable now: the next call tries again */
        if (memchr(rs->chunk, '\n', (size_t)n) == NULL) {
            /* No whole line in a chunk: not something this sink wrote. */
            rs->spool_off += (uint64_t)n;
            continue;
        }
        size_t used = replay_chunk(rs, rs->chunk, (size_t)n, budget);
        budget = used >= budget ? 0 : budget - used;
    }
    if (!spool_pending(rs) && rs->spool_size != 0 && ftruncate(rs->spool_fd, 0) == 0)
        rs->spool_size = rs->spool_off = 0;
}

static ssize_t redis_write(void *ctx, const struct iovec *iov, int iovcnt)
{
    redis_sink_t *rs = ctx;
    tg_audit_cur_t cur;
    size_t total = 0;

    tg_audit_cur_init(&cur, iov, iovcnt);
    if (spool_pending(rs) && rs_connect(rs))
        replay(rs, REPLAY_BYTES);
    if (!spool_pending(rs) && rs_connect(rs))
        total += send_batch(rs, &cur);
    if (tg_audit_cur_left(&cur) != 0)
        total += spool_append(rs, &cur);
    if (total == 0 && tg_audit_cur_left(&cur) != 0)
        return -ENOSPC; /* Redis away and the spool full (or failing) */
    return (ssize_t)total;
}

static uint64_t redis_sync(void *ctx, uint64_t now)
{
    redis_sink_t *rs = ctx;

    if (!spool_pending(rs))
        return 0;
    if (rs_connect(rs))
        replay(rs, REPLAY_BYTES);
    if (!spool_pending(rs))
        return 0;
    if (rs->c != NULL)
        return 1; /* more to replay: as soon as the queue allows */
    return rs->retry_at > now ? rs->retry_at - now : 1; /* same clock as now_ms() */
}

/* Drop the replayed head of the spool, so that a restart does not send it
 * twice: copy the rest to a new file and rename it over the spool. */
static void spool_compact(redis_sink_t *rs)
{
    char tmp[PATH_MAX + 8];
    uint64_t off = rs->spool_off;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", rs->spool) >= (int)sizeof(tmp))
        return;
    tg_err_t err;
    int fd = tg_audit_open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC, &err);
    if (fd < 0)
        return; /* best effort: the spool is replayed from its offset next time */
    while (off < rs->spool_size) {
        size_t want = rs->spool_size - off > SPOOL_CHUNK ? SPOOL_CHUNK : (size_t)(rs->spool_size - off);
        ssize_t n = pread(rs->spool_fd, rs->chunk, want, (off_t)off);
        if (n <= 0 || write(fd, rs->chunk, (size_t)n) != n) {
            close(fd);
            unlink(tmp);
            return;
        }
        off += (uint64_t)n;
    }
    if (fdatasync(fd) != 0 || rename(tmp, rs->spool) != 0)
        unlink(tmp);
    close(fd);
}

static void redis_close(void *ctx)
{
    redis_sink_t *rs = ctx;

    /* Shutdown: one last chance to empty the spool into Redis. */
    if (spool_pending(rs) && rs->c != NULL)
        replay(rs, UINT64_MAX);
    if (spool_pending(rs) && rs->spool_off != 0)
        spool_compact(rs);
    redisFree(rs->c);
    close(rs->spool_fd);
    explicit_bzero(&rs->ep, sizeof(rs->ep));
    free(rs->chunk);
    free(rs);
}

static const tg_audit_sink_ops_t redis_ops = {
    .kind = "redis_stream",
    .write = redis_write,
    .sync = redis_sync,
    .close = redis_close,
};

/* A spool cut short by a crash ends in a partial line: cut it off (that
 * line was never acknowledged to the queue, so its loss is the crash's). */
static void spool_trim_torn(redis_sink_t *rs)
{
    uint64_t end = rs->spool_size;

    while (end != 0) {
        size_t want = end > SPOOL_CHUNK ? SPOOL_CHUNK : (size_t)end;
        ssize_t n = pread(rs->spool_fd, rs->chunk, want, (off_t)(end - want));
        if (n != (ssize_t)want)
            return;
        for (size_t i = want; i-- > 0;) {
            if (rs->chunk[i] == '\n') {
                uint64_t keep = end - want + i + 1;
                if (keep != rs->spool_size && ftruncate(rs->spool_fd, (off_t)keep) == 0)
                    rs->spool_size = keep;
                return;
            }
        }
        end -= want;
    }
    if (ftruncate(rs->spool_fd, 0) == 0)
        rs->spool_size = 0;
}

int tg_audit_sink_redis_open(tg_audit_sink_t *out, const tg_audit_sink_cfg_t *cfg, tg_err_t *err)
{
    const char *stream = cfg->stream != NULL ? cfg->stream : TG_DEF_AUDIT_STREAM;
    char dir[PATH_MAX];

    if (cfg->spool == NULL || cfg->spool[0] == '\0' || strlen(cfg->spool) >= sizeof(dir)) {
        return tg_err_set(err, -EINVAL,
                          "audit: redis stream %.64s: no spool file or a path too long", stream);
    }
    if (stream[0] == '\0' || strlen(stream) > TG_AUDIT_STREAM_KEY_MAX || cfg->maxlen == 0 ||
        cfg->timeout_ms == 0 || cfg->spool_max_bytes == 0 ||
        (cfg->ep.is_unix ? cfg->ep.path[0] == '\0' : cfg->ep.host[0] == '\0')) {
        return tg_err_set(
            err, -EINVAL,
            "audit: redis stream %.64s: needs a server (a parsed url), a key, and maxlen, "
            "timeout and spool_max_bytes of at least 1",
            stream);
    }

    redis_sink_t *rs = calloc(1, sizeof(*rs));
    if (rs == NULL || (rs->chunk = malloc(SPOOL_CHUNK)) == NULL) {
        free(rs);
        return tg_err_set(err, -ENOMEM, "audit: redis stream %s: out of memory", stream);
    }
    rs->ep = cfg->ep;
    memcpy(rs->stream, stream, strlen(stream) + 1);
    snprintf(rs->maxlen, sizeof(rs->maxlen), "%llu", (unsigned long long)cfg->maxlen);
    rs->tv.tv_sec = (time_t)(cfg->timeout_ms / 1000);
    rs->tv.tv_usec = (suseconds_t)(cfg->timeout_ms % 1000 * 1000);
    rs->spool_max = cfg->spool_max_bytes;
    memcpy(rs->spool, cfg->spool, strlen(cfg->spool) + 1);

    /* Made and opened by the file sink's rules (sink_open.c): a link
     * planted at the spool's path would otherwise have its target
     * appended to, and truncated by spool_trim_torn. */
    tg_err_t oerr;
    struct stat st;
    rs->spool_fd = tg_audit_open_file(rs->spool, O_RDWR | O_APPEND | O_CREAT, &oerr);
    if (rs->spool_fd < 0 || fstat(rs->spool_fd, &st) != 0) {
        int rc = rs->spool_fd < 0 ? rs->spool_fd : -errno;
        if (rs->spool_fd < 0)
            tg_err_set(err, rc, "audit: redis stream %s: spool: %s", stream, oerr.msg);
        else
            tg_err_set(err, rc, "audit: redis stream %s: cannot open the spool %s: %s", stream,
                       rs->spool, strerror(-rc));
        if (rs->spool_fd >= 0)
            close(rs->spool_fd);
        free(rs->chunk);
        free(rs);
        return rc;
    }
    /* What an earlier run could not send is sent first. */
    rs->spool_size = (uint64_t)st.st_size;
    spool_trim_torn(rs);
    out->ops = &redis_ops;
    out->ctx = rs;
    return 0;
}
