/* OpenSentience manifests: reading, path resolution and the merge with
 * the operator's values (see manifest.h). The document's schema is
 * cfg_agent.c's (the key table's rows), so a manifest takes exactly the keys, units
 * and bounds of the config and reports errors the same way.
 */
#include "config/manifest.h"

#include <errno.h>
#include <stdint.h>
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

/* Where the ceiling's value comes from once it has beaten a request: a
 * file value is then an operator cap, the default a default cap; --limit
 * stays --limit. */
static tg_src_t capped(tg_src_t op)
{
    if (op == TG_SRC_FILE)
        return TG_SRC_CAP;
    return op == TG_SRC_DEFAULT ? TG_SRC_DEFAULT_CAP : op;
}

/* Whether request <q> asks for more than ceiling <o> allows, for row <k>:
 * a longer duration, a larger count or size, a faster rate, a looser
 * network; for an advisory row 0 is "not limited", so any request is
 * within an unlimited ceiling. */
static bool looser(const tg_cfg_key_t *k, const tg_cfg_val_t *q, const tg_cfg_val_t *o)
{
    switch (k->type) {
    case TG_KT_RATE:
        return tg_rate_stricter(o->rate, q->rate);
    case TG_KT_NETWORK:
        return q->u < o->u; /* none > loopback > full */
    default:
        if ((k->flags & TG_KF_ADVISORY) && o->u == 0)
            return false;
        return q->u > o->u;
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
    if (rqv <= opv) {
        out->burst = (uint32_t)rqv;
        out->burst_src = TG_SRC_MANIFEST;
    } else {
        out->burst = (uint32_t)opv;
        out->burst_src = capped(op_src);
    }
}

/* The rows the merge takes: every limit a manifest may ask for, kept in
 * the agent's limits or resources. */
static bool merged_row(const tg_cfg_key_t *k)
{
    unsigned both = TG_KF_LIMIT | TG_KF_MANIFEST;

    return (k->flags & both) == both && (k->obj == TG_KO_LIM || k->obj == TG_KO_RES) &&
           tg_cfg_key_under(k, "agents[]");
}

void tg_manifest_merge(const tg_manifest_t *m, tg_exec_limits_t *lim, tg_resources_t *res)
{
    tg_exec_limits_t l = m->op;
    tg_resources_t r = m->op_res;
    const tg_cfg_at_t op = {.lim = &m->op, .res = &m->op_res};
    const tg_cfg_at_t rq = {.lim = &m->req, .res = &m->req_res};
    const tg_cfg_at_t out = {.lim = &l, .res = &r};

    /* The key table is the list: a limit added there is merged here. */
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        tg_cfg_val_t o, q;
        if (!merged_row(k))
            continue;
        if (k->flags & TG_KF_FOLLOWS_RATE) {
            merge_burst(&m->op, &m->req, &l);
            continue;
        }
        o = tg_cfg_key_get(k, &op);
        q = tg_cfg_key_get(k, &rq);
        if (q.src != TG_SRC_MANIFEST)
            continue; /* <out> holds the operator's value already */
        if (looser(k, &q, &o))
            tg__cfg_key_set(k, &out, &o, capped(o.src));
        else
            tg__cfg_key_set(k, &out, &q, TG_SRC_MANIFEST);
    }
    *lim = l;
    *res = r;
}

void tg_manifest_capped_each(const tg_agent_cfg_t *a, tg_manifest_capped_fn fn, void *arg)
{
    const tg_manifest_t *m = a->manifest;
    const tg_cfg_at_t rq = {.lim = m ? &m->req : NULL, .res = m ? &m->req_res : NULL};
    const tg_cfg_at_t eff = {.lim = &a->lim, .res = &a->res};

    if (!m)
        return;
    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        tg_cfg_val_t q, e;
        if (!merged_row(k))
            continue;
        q = tg_cfg_key_get(k, &rq);
        e = tg_cfg_key_get(k, &eff);
        /* A request is met (source manifest) or lost to a stricter
         * ceiling: any other source on an asked-for row is a cap. */
        if (q.src == TG_SRC_MANIFEST && e.src != TG_SRC_MANIFEST)
            fn(arg, k, &q, &e);
    }
}

static void notice_capped(void *arg, const tg_cfg_key_t *k, const tg_cfg_val_t *asked,
                          const tg_cfg_val_t *granted)
{
    const tg_agent_cfg_t *a = arg;
    char q[48], g[48];

    tg_cfg_key_fmt(k, asked, q, sizeof q);
    tg_cfg_key_fmt(k, granted, g, sizeof g);
    tg_notice("agent '%s': manifest %s asks %s %s; granted %s (%s; a manifest cannot raise "
              "its own limits)",
              a->id, a->manifest->given, tg_cfg_key_name(k), q, g, tg_src_name(granted->src));
}

void tg_manifest_notice_capped(const tg_agent_cfg_t *a)
{
    tg_manifest_capped_each(a, notice_capped, (void *)(uintptr_t)a);
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
