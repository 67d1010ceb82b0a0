/* cgroup2 backend: one directory per instance in the unified hierarchy.
 *
 * memory.max with memory.swap.max=0 (a limit that can spill into swap is
 * not a limit), memory.oom.group=1 (an OOM kill takes the whole instance:
 * the agent never limps on with one of its children gone, the same outcome
 * the router produces on cgroup1 from the oom_kill counter), cpu.max,
 * pids.max. cgroup.kill kills the tree in one write. Controllers must have
 * been enabled in the base's subtree_control (contain.c, v2_delegate);
 * cpu.stat's usage_usec exists even without the cpu controller.
 */
#include "limits/contain_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define V2_WAIT_MS 500   /* fixed internal bound: kill/rmdir: wait for the kernel to empty the cgroup */
#define V2_KILL_ROUNDS 100 /* fixed internal bound: kernels without cgroup.kill: SIGKILL rounds */

static int v2_create(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)err;
    char *d = ci->dir[TG_CG_V2];
    int rc = tg__cg_join(d, ci->ctx->base[TG_CG_V2], ci->name);
    if (rc == 0)
        rc = tg__cg_mkdir(d);
    if (rc < 0) {
        /* Not fatal here: limit() reports every resource as not applied
         * with this errno and the rlimit fallback takes over. */
        d[0] = '\0';
        ci->cg_errno = -rc;
    }
    return 0;
}

/* Common refusals: no cgroup made, or controller not delegated. */
static bool v2_usable(tg_contain_inst_t *ci, tg_res_t r, bool ctl, const char *ctl_name)
{
    if (ci->dir[TG_CG_V2][0] == '\0') {
        tg__enf_no(ci, r, "cgroup2", "instance cgroup not created: %s", strerror(ci->cg_errno));
        return false;
    }
    if (!ctl) {
        tg__enf_no(ci, r, "cgroup2", "%s controller not delegated to toolgate's cgroup", ctl_name);
        return false;
    }
    return true;
}

static int v2_limit(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)err;
    const tg_contain_caps_t *caps = &ci->ctx->caps;
    const tg_contain_req_t *q = &ci->req;
    const char *d = ci->dir[TG_CG_V2];
    char v[64];
    int rc;

    if (q->memory_bytes && v2_usable(ci, TG_RES_MEMORY, caps->v2_memory, "memory")) {
        snprintf(v, sizeof v, "%" PRIu64, q->memory_bytes);
        if ((rc = tg__cg_write(d, "memory.max", v)) < 0) {
            tg__enf_no(ci, TG_RES_MEMORY, "cgroup2", "memory.max: %s", strerror(-rc));
        } else {
            /* memory.swap.max is absent without swap accounting, where
             * there is no swap to escape into. */
            bool noswap = tg__cg_write(d, "memory.swap.max", "0") == 0;
            tg__cg_write(d, "memory.oom.group", "1");
            tg_enforced_set(&ci->enforced, TG_RES_MEMORY, true, q->memory_bytes, "cgroup2",
                            noswap ? "memory.max, memory.swap.max=0" : "memory.max", NULL);
        }
    }
    if (q->cpu_millicores && v2_usable(ci, TG_RES_CPU, caps->v2_cpu, "cpu")) {
        uint64_t quota = tg__cpu_quota_us(q->cpu_millicores);
        snprintf(v, sizeof v, "%" PRIu64 " %u", quota, TG_CONTAIN_CPU_PERIOD_US);
        if ((rc = tg__cg_write(d, "cpu.max", v)) < 0)
            tg__enf_no(ci, TG_RES_CPU, "cgroup2", "cpu.max: %s", strerror(-rc));
        else
            tg_enforced_set(&ci->enforced, TG_RES_CPU, true, tg__cpu_quota_mc(quota), "cgroup2",
                            "cpu.max", NULL);
    }
    if (q->pids && v2_usable(ci, TG_RES_PIDS, caps->v2_pids, "pids")) {
        snprintf(v, sizeof v, "%" PRIu32, q->pids);
        if ((rc = tg__cg_write(d, "pids.max", v)) < 0)
            tg__enf_no(ci, TG_RES_PIDS, "cgroup2", "pids.max: %s", strerror(-rc));
        else
            tg_enforced_set(&ci->enforced, TG_RES_PIDS, true, q->pids, "cgroup2", "pids.max", NULL);
    }
    return 0;
}

static void v2_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl)
{
    const char *d = ci->dir[TG_CG_V2];
    if (d[0] && pl->nprocs < TG_CG_NHIER)
        snprintf(pl->procs[pl->nprocs++], sizeof pl->procs[0], "%s/cgroup.procs", d);
}

static int v2_sample(tg_contain_inst_t *ci, tg_contain_sample_t *s)
{
    const tg_contain_caps_t *caps = &ci->ctx->caps;
    const char *d = ci->dir[TG_CG_V2];
    if (d[0] == '\0')
        return -ENOENT;
    if (caps->v2_memory) {
        if (tg__cg_read_u64(d, "memory.current", &s->memory_current) == 0)
            s->have |= TG_SAMPLE_MEM;
        if (tg__cg_read_u64(d, "memory.peak", &s->memory_peak) == 0) /* kernel >= 5.19 */
            s->have |= TG_SAMPLE_PEAK;
        if (tg__cg_read_key(d, "memory.events", "oom_kill", &s->oom_kills) == 0)
            s->have |= TG_SAMPLE_OOM;
    }
    if (tg__cg_read_key(d, "cpu.stat", "usage_usec", &s->cpu_usage_us) == 0)
        s->have |= TG_SAMPLE_CPU;
    if (caps->v2_pids) {
        if (tg__cg_read_u64(d, "pids.current", &s->pids_current) == 0)
            s->have |= TG_SAMPLE_PIDS;
        if (tg__cg_read_key(d, "pids.events", "max", &s->pids_denied) == 0)
            s->have |= TG_SAMPLE_PIDS_DENIED;
    }
    return 0;
}

static int v2_kill(tg_contain_inst_t *ci)
{
    const char *d = ci->dir[TG_CG_V2];
    if (d[0] == '\0')
        return 0;
    if (ci->ctx->caps.v2_kill)
        return tg__cg_kill_v2(d, V2_WAIT_MS);
    return tg__cg_kill_procs(d, V2_KILL_ROUNDS);
}

static int v2_destroy(tg_contain_inst_t *ci)
{
    char *d = ci->dir[TG_CG_V2];
    int rc = d[0] ? tg__cg_rmdir(d, V2_WAIT_MS) : 0;
    d[0] = '\0';
    return rc;
}

const tg_contain_ops_t tg__contain_cgroup2_ops = {
    .name = "cgroup2",
    .kind = TG_CONTAIN_CGROUP2,
    .create = v2_create,
    .limit = v2_limit,
    .place = v2_place,
    .sample = v2_sample,
    .kill = v2_kill,
    .destroy = v2_destroy,
};
