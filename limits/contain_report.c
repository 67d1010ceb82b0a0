/* The enforcement report (see contain.h): what each requested resource
 * got, as the audit event's JSON object (written with config/jsonw) and as
 * `toolgate check`'s table; and check's summary of what the host offers.
 * Pure: a tg_enforced_t in, text out; nothing here touches the host.
 */
#include "limits/contain_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/jsonw.h"
#include "config/units.h"

void tg__enf_no(tg_contain_inst_t *ci, tg_res_t r, const char *backend, const char *fmt, ...)
{
    tg_enforced_item_t *it = &ci->enforced.r[r];
    it->applied = false;
    it->applied_value = 0;
    it->backend = backend;
    it->how = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->reason, sizeof it->reason, fmt, ap);
    va_end(ap);
}

const char *tg_res_name(tg_res_t r)
{
    static const char *const names[TG_RES_COUNT] = {
        [TG_RES_MEMORY] = "memory",
        [TG_RES_CPU] = "cpu",
        [TG_RES_PIDS] = "pids",
        [TG_RES_DISK] = "disk",
        [TG_RES_NETWORK] = "network",
        [TG_RES_NOFILE] = "nofile",
        [TG_RES_FSIZE] = "fsize",
        [TG_RES_BANDWIDTH] = "bandwidth",
        [TG_RES_CONNECTIONS] = "connections",
    };
    return (unsigned)r < TG_RES_COUNT ? names[r] : "?";
}

void tg__res_fmt_value(tg_res_t r, uint64_t v, char *buf, size_t cap)
{
    switch (r) {
    case TG_RES_MEMORY:
    case TG_RES_DISK:
    case TG_RES_FSIZE: tg_unit_fmt_bytes(buf, (int)cap, v); break;
    case TG_RES_CPU: snprintf(buf, cap, "%" PRIu64 "m", v); break;
    case TG_RES_NETWORK: snprintf(buf, cap, "none"); break;
    case TG_RES_BANDWIDTH: tg_unit_fmt_bandwidth(buf, (int)cap, v); break;
    default: snprintf(buf, cap, "%" PRIu64, v); break;
    }
}

void tg_enforced_init(tg_enforced_t *e, tg_contain_kind_t kind, tg_contain_mode_t mode,
                      const tg_contain_req_t *req)
{
    const uint64_t val[TG_RES_COUNT] = {
        [TG_RES_MEMORY] = req->memory_bytes,
        [TG_RES_CPU] = req->cpu_millicores,
        [TG_RES_PIDS] = req->pids,
        [TG_RES_DISK] = req->disk_bytes,
        [TG_RES_NETWORK] = req->network_none,
        [TG_RES_NOFILE] = req->nofile,
        [TG_RES_FSIZE] = req->fsize,
        [TG_RES_BANDWIDTH] = req->bandwidth_bps,
        [TG_RES_CONNECTIONS] = req->max_connections,
    };
    memset(e, 0, sizeof *e);
    e->backend = tg_contain_kind_name(kind);
    e->mode = mode;
    for (int r = 0; r < TG_RES_COUNT; r++) {
        e->r[r].requested = val[r] != 0;
        e->r[r].value = val[r];
        e->r[r].backend = "none";
    }
}

void tg_enforced_set(tg_enforced_t *e, tg_res_t r, bool applied, uint64_t applied_value,
                     const char *backend, const char *how, const char *reason)
{
    tg_enforced_item_t *it = &e->r[r];
    it->applied = applied;
    it->applied_value = applied ? applied_value : 0;
    it->backend = backend ? backend : "none";
    it->how = applied ? how : NULL;
    tg__copy_str(it->reason, sizeof it->reason, applied || !reason ? "" : reason);
}

bool tg_enforced_complete(const tg_enforced_t *e, tg_res_t *first_missing)
{
    for (int r = 0; r < TG_RES_COUNT; r++) {
        if (e->r[r].requested && !e->r[r].applied) {
            if (first_missing)
                *first_missing = (tg_res_t)r;
            return false;
        }
    }
    return true;
}

typedef struct sbuf {
    char *p;
    size_t cap, len;
    bool over;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (b->over)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->cap - b->len) {
        b->over = true;
        b->p[b->len] = '\0';
        return;
    }
    b->len += (size_t)n;
}

/* Strings go through tg_jw_str: escaped, and forced to valid UTF-8, so
 * the object parses whatever a reason holds (a workspace path cut at
 * TG_REASON_MAX in the middle of a character included). */
int tg_enforced_json(const tg_enforced_t *e, char *buf, size_t cap)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    tg_jw_lit(&w, "{");
    bool first = true;
    for (int r = 0; r < TG_RES_COUNT; r++) {
        const tg_enforced_item_t *it = &e->r[r];
        if (!it->requested)
            continue;
        if (!first)
            tg_jw_lit(&w, ",");
        first = false;
        tg_jw_str(&w, tg_res_name((tg_res_t)r));
        tg_jw_lit(&w, ":{\"requested\":");
        if (r == TG_RES_NETWORK)
            tg_jw_str(&w, "none");
        else
            tg_jw_u64(&w, it->value);
        tg_jw_lit(&w, it->applied ? ",\"applied\":true" : ",\"applied\":false");
        tg_jw_lit(&w, ",\"backend\":");
        tg_jw_str(&w, it->backend ? it->backend : "none");
        if (it->applied) {
            if (r != TG_RES_NETWORK && it->applied_value != it->value) {
                tg_jw_lit(&w, ",\"applied_value\":");
                tg_jw_u64(&w, it->applied_value);
            }
            tg_jw_lit(&w, ",\"how\":");
            tg_jw_str(&w, it->how ? it->how : "");
        } else {
            tg_jw_lit(&w, ",\"reason\":");
            tg_jw_str(&w, it->reason);
        }
        tg_jw_lit(&w, "}");
    }
    tg_jw_lit(&w, "}");
    long n = tg_jw_end(&w);
    if (n < 0 && cap > 0)
        buf[0] = '\0'; /* never a cut object */
    return (int)n;
}

int tg_enforced_text(const tg_enforced_t *e, char *buf, size_t cap)
{
    if (cap == 0)
        return -ENOSPC;
    sbuf_t b = {.p = buf, .cap = cap};
    buf[0] = '\0';
    /* The first column fits the longest requested name ("connections"
     * only when asked for), so the usual table keeps its shape. */
    int w = 8;
    for (int r = 0; r < TG_RES_COUNT; r++)
        if (e->r[r].requested && (int)strlen(tg_res_name((tg_res_t)r)) > w)
            w = (int)strlen(tg_res_name((tg_res_t)r));
    sb_printf(&b, "%-*s %-10s %-7s %-8s %s\n", w, "resource", "requested", "applied", "backend",
              "how / why not");
    for (int r = 0; r < TG_RES_COUNT; r++) {
        const tg_enforced_item_t *it = &e->r[r];
        if (!it->requested)
            continue;
        char v[32];
        tg__res_fmt_value((tg_res_t)r, it->value, v, sizeof v);
        const char *detail = it->applied ? (it->how ? it->how : "") : it->reason;
        sb_printf(&b, "%-*s %-10s %-7s %-8s %s", w, tg_res_name((tg_res_t)r), v,
                  it->applied ? "yes" : "NO", it->backend ? it->backend : "none", detail);
        if (it->applied && r != TG_RES_NETWORK && it->applied_value != it->value) {
            char av[32];
            tg__res_fmt_value((tg_res_t)r, it->applied_value, av, sizeof av);
            sb_printf(&b, " (enforced as %s)", av);
        }
        sb_printf(&b, "\n");
    }
    return b.over ? -ENOSPC : (int)b.len;
}

int tg_contain_caps_text(const tg_contain_t *c, char *buf, size_t cap)
{
    if (cap == 0)
        return -ENOSPC;
    sbuf_t b = {.p = buf, .cap = cap};
    buf[0] = '\0';
    const tg_contain_caps_t *k = &c->caps;
    sb_printf(&b, "containment: backend %s, mode %s%s%s\n", tg_contain_kind_name(c->kind),
              tg_contain_mode_name(c->mode), c->why[0] ? "; " : "", c->why);
    for (int i = 0; i < TG_CG_NHIER; i++) {
        const tg_cg_hier_caps_t *h = &k->h[i];
        sb_printf(&b, "  %-8s ", tg__cg_hier_name(i));
        if (!h->usable) {
            sb_printf(&b, "unavailable: %s\n", h->why);
            continue;
        }
        sb_printf(&b, "%s %s", h->own_dir, h->writable ? "writable" : "read-only");
        if (!h->writable && h->why[0])
            sb_printf(&b, " (%s)", h->why);
        if (i == TG_CG_V2)
            sb_printf(&b, ", controllers:%s%s%s%s, cgroup.kill %s", k->v2_memory ? " memory" : "",
                      k->v2_cpu ? " cpu" : "", k->v2_pids ? " pids" : "",
                      tg__caps_v2_ctl(k) ? "" : " none", k->v2_kill ? "yes" : "no");
        if (i == TG_CG_MEMORY)
            sb_printf(&b, ", swap accounting %s", k->v1_memsw ? "yes" : "no");
        if (h->alias >= 0)
            sb_printf(&b, " (same mount as %s)", tg__cg_hier_name(h->alias));
        sb_printf(&b, "\n");
    }
    sb_printf(&b, "  netns    %s\n", k->netns ? "available" : "unavailable");
    if (k->tmpfs)
        sb_printf(&b, "  tmpfs    available: workspaces are per-instance tmpfs mounts\n");
    else
        sb_printf(&b, "  tmpfs    unavailable%s%s: workspaces are scanned\n",
                  k->tmpfs_why[0] ? ": " : "", k->tmpfs_why);
    if (c->orphans_removed)
        sb_printf(&b, "  removed %u cgroup tree(s) of dead toolgate processes\n", c->orphans_removed);
    if (c->watching)
        sb_printf(&b, "  watchdog kills every agent's cgroup if toolgate dies\n");
    else if (c->watch_errno)
        sb_printf(&b, "  no watchdog (%s): an agent's children outlive a killed toolgate\n",
                  strerror(c->watch_errno));
    return b.over ? -ENOSPC : (int)b.len;
}
