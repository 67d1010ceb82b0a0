/* cgroup1 backend: one directory per instance in each v1 hierarchy that
 * carries a controller toolgate uses (memory, cpu, cpuacct, pids), plus the
 * unified hierarchy when a hybrid host has one writable beside them.
 *
 * memory.limit_in_bytes, and memory.memsw.limit_in_bytes set to the same
 * value when swap is accounted, so the limit cannot be escaped into swap
 * (memsw must be written second: the kernel refuses memsw < limit).
 * cpu.cfs_quota_us over cpu.cfs_period_us. pids.max.
 * OOM shows as the oom_kill counter of memory.oom_control (memory.failcnt
 * stays 0 on some kernels, so it is not used); the peak is
 * memory.max_usage_in_bytes. CPU usage comes from the unified cpu.stat
 * when present (it works without controllers), else cpuacct.usage.
 * Kill: cgroup.kill on the unified twin, else rounds of SIGKILL over
 * cgroup.procs.
 */
#include "limits/contain_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define V1_WAIT_MS 500     /* fixed internal bound: kill/rmdir: wait for the kernel to empty the cgroup */
#define V1_KILL_ROUNDS 100 /* fixed internal bound: SIGKILL rounds over cgroup.procs */

/* The hierarchies an instance lives in, in join order. */
static const int v1_hiers[] = {TG_CG_MEMORY, TG_CG_CPU, TG_CG_CPUACCT, TG_CG_PIDS, TG_CG_V2};
#define V1_NHIERS (sizeof v1_hiers / sizeof v1_hiers[0])

static int v1_create(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)err;
    const tg_contain_t *c = ci->ctx;
    for (size_t k = 0; k < V1_NHIERS; k++) {
        int i = v1_hiers[k];
        char *d = ci->dir[i];
        if (c->base[i][0] == '\0')
            continue;
        int alias = c->caps.h[i].alias;
        if (alias >= 0) {
            memcpy(d, ci->dir[alias], TG_CG_PATH_MAX); /* same mount: same directory */
            continue;
        }
        int rc = tg__cg_join(d, c->base[i], ci->name);
        if (rc == 0)
            rc = tg__cg_mkdir(d);
        if (rc < 0) {
            /* limit() reports the affected resources with this errno. */
            d[0] = '\0';
            ci->cg_errno = -rc;
        }
    }
    return 0;
}

static bool v1_usable(tg_contain_inst_t *ci, tg_res_t r, int hier)
{
    if (ci->dir[hier][0])
        return true;
    const tg_contain_t *c = ci->ctx;
    if (c->base[hier][0])
        tg__enf_no(ci, r, "cgroup1", "instance cgroup not created: %s", strerror(ci->cg_errno));
    else
        tg__enf_no(ci, r, "cgroup1", "no writable %s hierarchy: %s",
                   hier == TG_CG_MEMORY ? "memory" : hier == TG_CG_CPU ? "cpu" : "pids",
                   c->caps.h[hier].why);
    return false;
}

static int v1_limit(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)err;
    const tg_contain_req_t *q = &ci->req;
    char v[64];
    int rc;

    if (q->memory_bytes && v1_usable(ci, TG_RES_MEMORY, TG_CG_MEMORY)) {
        const char *d = ci->dir[TG_CG_MEMORY];
        snprintf(v, sizeof v, "%" PRIu64, q->memory_bytes);
        if ((rc = tg__cg_write(d, "memory.limit_in_bytes", v)) < 0) {
            tg__enf_no(ci, TG_RES_MEMORY, "cgroup1", "memory.limit_in_bytes: %s", strerror(-rc));
        } else {
            bool memsw = ci->ctx->caps.v1_memsw &&
                         tg__cg_write(d, "memory.memsw.limit_in_bytes", v) == 0;
            tg_enforced_set(&ci->enforced, TG_RES_MEMORY, true, q->memory_bytes, "cgroup1",
                            memsw ? "memory.limit_in_bytes, memory.memsw.limit_in_bytes"
                                  : "memory.limit_in_bytes",
                            NULL);
        }
    }
    if (q->cpu_millicores && v1_usable(ci, TG_RES_CPU, TG_CG_CPU)) {
        const char *d = ci->dir[TG_CG_CPU];
        uint64_t quota = tg__cpu_quota_us(q->cpu_millicores);
        snprintf(v, sizeof v, "%u", TG_CONTAIN_CPU_PERIOD_US);
        rc = tg__cg_write(d, "cpu.cfs_period_us", v);
        if (rc == 0) {
            snprintf(v, sizeof v, "%" PRIu64, quota);
            rc = tg__cg_write(d, "cpu.cfs_quota_us", v);
        }
        if (rc < 0)
            tg__enf_no(ci, TG_RES_CPU, "cgroup1", "cpu.cfs_quota_us: %s", strerror(-rc));
        else
            tg_enforced_set(&ci->enforced, TG_RES_CPU, true, tg__cpu_quota_mc(quota), "cgroup1",
                            "cpu.cfs_quota_us/cpu.cfs_period_us", NULL);
    }
    if (q->pids && v1_usable(ci, TG_RES_PIDS, TG_CG_PIDS)) {
        snprintf(v, sizeof v, "%" PRIu32, q->pids);
        if ((rc = tg__cg_write(ci->dir[TG_CG_PIDS], "pids.max", v)) < 0)
            tg__enf_no(ci, TG_RES_PIDS, "cgroup1", "pids.max: %s", strerror(-rc));
        else
            tg_enforced_set(&ci->enforced, TG_RES_PIDS, true, q->pids, "cgroup1", "pids.max", NULL);
    }
    return 0;
}

static void v1_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl)
{
    for (size_t k = 0; k < V1_NHIERS; k++) {
        int i = v1_hiers[k];
        if (ci->dir[i][0] == '\0' || ci->ctx->caps.h[i].alias >= 0 || pl->nprocs >= TG_CG_NHIER)
            continue;
        snprintf(pl->procs[pl->nprocs++], sizeof pl->procs[0], "%s/cgroup.procs", ci->dir[i]);
    }
}

static int v1_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s)
{
    const char *m = ci->dir[TG_CG_MEMORY];
    if (m[0]) {
        if (tg__cg_read_u64(m, "memory.usage_in_bytes", &s->memory_current) == 0)
            s->have |= TG_SAMPLE_MEM;
        if (tg__cg_read_u64(m, "memory.max_usage_in_bytes", &s->memory_peak) == 0)
            s->have |= TG_SAMPLE_PEAK;
        if (tg__cg_read_key(m, "memory.oom_control", "oom_kill", &s->oom_kills) == 0)
            s->have |= TG_SAMPLE_OOM;
    }
    uint64_t ns;
    if (ci->dir[TG_CG_V2][0] &&
        tg__cg_read_key(ci->dir[TG_CG_V2], "cpu.stat", "usage_usec", &s->cpu_usage_us) == 0) {
        s->have |= TG_SAMPLE_CPU;
    } else if (ci->dir[TG_CG_CPUACCT][0] &&
               tg__cg_read_u64(ci->dir[TG_CG_CPUACCT], "cpuacct.usage", &ns) == 0) {
        s->cpu_usage_us = ns / 1000u;
        s->have |= TG_SAMPLE_CPU;
    }
    const char *p = ci->dir[TG_CG_PIDS];
    if (p[0]) {
        if (tg__cg_read_u64(p, "pids.current", &s->pids_current) == 0)
            s->have |= TG_SAMPLE_PIDS;
        if (tg__cg_read_key(p, "pids.events", "max", &s->pids_denied) == 0)
            s->have |= TG_SAMPLE_PIDS_DENIED;
    }
    return s->have ? 0 : -ENOENT;
}

static int v1_kill(tg_contain_inst_t *ci)
{
    int rc = 0;
    if (ci->dir[TG_CG_V2][0] && ci->ctx->caps.v2_kill)
        rc = tg__cg_kill_v2(ci->dir[TG_CG_V2], V1_WAIT_MS);
    /* Every member joined every hierarchy before exec, so one v1
     * hierarchy lists them all; after cgroup.kill this only confirms. */
    for (size_t k = 0; k < V1_NHIERS - 1; k++) {
        const char *d = ci->dir[v1_hiers[k]];
        if (d[0])
            return tg__cg_kill_procs(d, V1_KILL_ROUNDS);
    }
    return rc;
}

static int v1_destroy(tg_contain_inst_t *ci)
{
    int rc = 0;
    for (size_t k = 0; k < V1_NHIERS; k++) {
        int i = v1_hiers[k];
        char *d = ci->dir[i];
        if (d[0] && ci->ctx->caps.h[i].alias < 0) {
            int r = tg__cg_rmdir(d, V1_WAIT_MS);
            if (r < 0 && rc == 0)
                rc = r;
        }
    }
    for (size_t k = 0; k < V1_NHIERS; k++)
        ci->dir[v1_hiers[k]][0] = '\0';
    return rc;
}

const tg_contain_ops_t tg__contain_cgroup1_ops = {
    .name = "cgroup1",
    .kind = TG_CONTAIN_CGROUP1,
    .create = v1_create,
    .limit = v1_limit,
    .place = v1_place,
    .sample = v1_sample,
    .kill = v1_kill,
    .destroy = v1_destroy,
};
