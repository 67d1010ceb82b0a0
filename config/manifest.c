/* OpenSentience manifests: reading, path resolution and the merge with
 * the operator's values (see manifest.h). The document's schema is
 * cfg_agent.c's (the key table's rows), so a manifest takes exactly the keys, units
 * and bounds of the config and reports errors the same way.
 */
#include "config/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"

/* ------------------------------------------------------------------ */
/* Reading                                                             */

int tg_manifest_load_buffer(tg_manifest_t *m, const char *name, const char *text, size_t len,
                            tg_err_t *err)
{
    tg_exec_limits_t lim;
    tg_resources_t res;

    if (tg__config_parse_manifest(name, text, len, &lim, &res, err) < 0)
        return -EINVAL;
    m->req = lim;
    m->req_res = res;
    return 0;
}

int tg_manifest_load_file(tg_manifest_t *m, const char *path, tg_err_t *err)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t len = 0, n;
    int rc;

    if (!f) {
        rc = -errno;
        return tg_err_set(err, rc, "%s: cannot open: %s", path, strerror(-rc));
    }
    /* One byte past the bound tells "at the bound" from "over it"
     * without trusting st_size. */
    buf = malloc(TG_MANIFEST_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return tg_err_set(err, -ENOMEM, "%s: out of memory", path);
    }
    while (len <= TG_MANIFEST_FILE_MAX &&
           (n = fread(buf + len, 1, TG_MANIFEST_FILE_MAX + 1 - len, f)) > 0)
        len += n;
    if (ferror(f)) {
        rc = errno ? -errno : -EIO;
        fclose(f);
        free(buf);
        return tg_err_set(err, rc, "%s: cannot read: %s", path, strerror(-rc));
    }
    fclose(f);
    if (len > TG_MANIFEST_FILE_MAX) {
        free(buf);
        return tg_err_set(err, -EFBIG, "%s: larger than %u bytes (manifests are bounded)", path,
                          TG_MANIFEST_FILE_MAX);
    }
    rc = tg_manifest_load_buffer(m, path, buf, len, err);
    free(buf);
    return rc;
}

char *tg_manifest_resolve(const char *config_path, const char *given)
{
    const char *slash = config_path ? strrchr(config_path, '/') : NULL;
    size_t dir, glen;
    char *out;

    if (!given)
        return NULL;
    /* A config without a directory part lives in the working directory,
     * which is where a relative open looks anyway. */
    if (given[0] == '/' || !slash)
        return strdup(given);
    dir = (size_t)(slash - config_path) + 1; /* keeps the '/' ("/x.json" -> "/") */
    glen = strlen(given);
    out = malloc(dir + glen + 1);
    if (!out)
        return NULL;
    memcpy(out, config_path, dir);
    memcpy(out + dir, given, glen + 1);
    return out;
}

/* ------------------------------------------------------------------ */
/* Merge                                                               */

bool tg_rate_stricter(tg_rate_t a, tg_rate_t b)
{
    /* a.count / a.period < b.count / b.period, cross-multiplied: counts
     * are at most 10^6 and periods 3.6 * 10^6 ms, far from overflow. */
    uint64_t x = a.count * b.period_ms, y = b.count * a.period_ms;

    return x < y || (x == y && a.count < b.count);
}

/* Where the operator's value comes from once it has beaten a request:
 * a file value is then a cap; --limit stays --limit. */
static tg_src_t capped(tg_src_t op)
{
    return op == TG_SRC_FILE ? TG_SRC_CAP : op;
}

/* One "smaller is stricter" value: operator <op>/<op_src> against request
 * <rq>/<rq_src>. */
static void pick_min(uint64_t op, tg_src_t op_src, uint64_t rq, tg_src_t rq_src, uint64_t *out,
                     tg_src_t *src)
{
    if (rq_src != TG_SRC_MANIFEST) {
        *out = op;
        *src = op_src;
    } else if (op_src == TG_SRC_DEFAULT || rq <= op) {
        *out = rq;
        *src = TG_SRC_MANIFEST;
    } else {
        *out = op;
        *src = capped(op_src);
    }
}

static void pick_min32(uint32_t op, tg_src_t op_src, uint32_t rq, tg_src_t rq_src, uint32_t *out,
                       tg_src_t *src)
{
    uint64_t v;

    pick_min(op, op_src, rq, rq_src, &v, src);
    *out = (uint32_t)v;
}

static void merge_rate(const tg_exec_limits_t *op, const tg_exec_limits_t *rq,
                       tg_exec_limits_t *out)
{
    if (rq->rate_src != TG_SRC_MANIFEST) {
        out->rate_limit = op->rate_limit;
        out->rate_src = op->rate_src;
    } else if (op->rate_src == TG_SRC_DEFAULT ||
               !tg_rate_stricter(op->rate_limit, rq->rate_limit)) {
        out->rate_limit = rq->rate_limit;
        out->rate_src = TG_SRC_MANIFEST;
    } else {
        out->rate_limit = op->rate_limit;
        out->rate_src = capped(op->rate_src);
    }
}

/* Burst 0 means "the rate's count". See manifest.h for the rule. */
static void merge_burst(const tg_exec_limits_t *op, const tg_exec_limits_t *rq,
                        tg_exec_limits_t *out)
{
    bool op_explicit = op->burst_src != TG_SRC_DEFAULT;
    bool rq_explicit = rq->burst_src == TG_SRC_MANIFEST;
    uint64_t opv, rqv;
    tg_src_t op_src;

    if (!rq_explicit && rq->rate_src != TG_SRC_MANIFEST) {
        out->burst = op->burst;
        out->burst_src = op->burst_src;
        return;
    }
    if (!op_explicit && !rq_explicit) {
        /* Both follow their rate: the burst follows the merged rate. */
        out->burst = 0;
        out->burst_src = TG_SRC_DEFAULT;
        return;
    }
    opv = op_explicit ? op->burst : op->rate_limit.count;
    op_src = op_explicit ? op->burst_src : op->rate_src;
    rqv = rq_explicit ? rq->burst : rq->rate_limit.count;
    if (op_src == TG_SRC_DEFAULT || rqv <= opv) {
        out->burst = (uint32_t)rqv;
        out->burst_src = TG_SRC_MANIFEST;
    } else {
        out->burst = (uint32_t)opv;
        out->burst_src = capped(op_src);
    }
}

/* Network: the larger enum value is the stricter. */
static void merge_network(const tg_resources_t *op, const tg_resources_t *rq, tg_resources_t *out)
{
    if (rq->network_src != TG_SRC_MANIFEST) {
        out->network = op->network;
        out->network_src = op->network_src;
    } else if (op->network_src == TG_SRC_DEFAULT || rq->network >= op->network) {
        out->network = rq->network;
        out->network_src = TG_SRC_MANIFEST;
    } else {
        out->network = op->network;
        out->network_src = capped(op->network_src);
    }
}

void tg_manifest_merge(const tg_manifest_t *m, tg_exec_limits_t *lim, tg_resources_t *res)
{
    const tg_exec_limits_t *op = &m->op, *rq = &m->req;
    const tg_resources_t *opr = &m->op_res, *rqr = &m->req_res;
    tg_exec_limits_t l = *op;
    tg_resources_t r = *opr;

    pick_min(op->max_tool_call_duration_ms, op->duration_src, rq->max_tool_call_duration_ms,
             rq->duration_src, &l.max_tool_call_duration_ms, &l.duration_src);
    pick_min32(op->max_concurrent_calls, op->concurrent_src, rq->max_concurrent_calls,
               rq->concurrent_src, &l.max_concurrent_calls, &l.concurrent_src);
    pick_min32(op->max_queued_calls, op->queued_src, rq->max_queued_calls, rq->queued_src,
               &l.max_queued_calls, &l.queued_src);
    merge_rate(op, rq, &l);
    merge_burst(op, rq, &l);

    pick_min(opr->memory_bytes, opr->memory_src, rqr->memory_bytes, rqr->memory_src,
             &r.memory_bytes, &r.memory_src);
    pick_min(opr->cpu_millicores, opr->cpu_src, rqr->cpu_millicores, rqr->cpu_src,
             &r.cpu_millicores, &r.cpu_src);
    pick_min(opr->pids, opr->pids_src, rqr->pids, rqr->pids_src, &r.pids, &r.pids_src);
    pick_min(opr->disk_bytes, opr->disk_src, rqr->disk_bytes, rqr->disk_src, &r.disk_bytes,
             &r.disk_src);
    merge_network(opr, rqr, &r);
    /* 0 = not limited comes with TG_SRC_DEFAULT, so pick_min lets any
     * request through and otherwise keeps the smaller. */
    pick_min(opr->bandwidth_bps, opr->bandwidth_src, rqr->bandwidth_bps, rqr->bandwidth_src,
             &r.bandwidth_bps, &r.bandwidth_src);
    pick_min(opr->max_connections, opr->connections_src, rqr->max_connections, rqr->connections_src,
             &r.max_connections, &r.connections_src);
    *lim = l;
    *res = r;
}

void tg_manifest_attach(tg_agent_cfg_t *a, tg_manifest_t *m)
{
    m->op = a->lim;
    m->op_res = a->res;
    a->manifest = m;
    tg_manifest_merge(m, &a->lim, &a->res);
}

/* ------------------------------------------------------------------ */
/* Model                                                               */

int tg_manifest_copy(tg_manifest_t *dst, const tg_manifest_t *src)
{
    *dst = *src;
    dst->given = src->given ? strdup(src->given) : NULL;
    dst->path = src->path ? strdup(src->path) : NULL;
    if ((src->given && !dst->given) || (src->path && !dst->path)) {
        tg_manifest_free(dst);
        return -ENOMEM;
    }
    return 0;
}

void tg_manifest_free(tg_manifest_t *m)
{
    if (!m)
        return;
    free(m->given);
    free(m->path);
    memset(m, 0, sizeof *m);
}
