/* Config to containment request (see contain_cfg.h). */
#include "router/gateway/contain_cfg.h"

#include <errno.h>

int tg_config_contain_req(const tg_agent_cfg_t *a, tg_contain_req_t *req)
{
    const tg_resources_t *r = &a->res;

    tg_contain_req_default(req);
    /* The config's ceilings (TG_CPU_CEIL_MC, TG_PIDS_CEIL) fit the
     * request's 32-bit fields. */
    req->memory_bytes = r->memory_bytes;
    req->cpu_millicores = (uint32_t)r->cpu_millicores;
    req->pids = (uint32_t)r->pids;
    /* Without a workspace, a disk size is requested only when configured:
     * nothing can hold a total without a directory to hold it in, and a
     * default request that can never be applied would make
     * containment.mode "required" refuse every agent. Each file is still
     * capped at the disk size by RLIMIT_FSIZE, always. */
    req->disk_bytes = r->disk_src != TG_SRC_DEFAULT ? r->disk_bytes : 0;
    req->fsize = r->disk_bytes;
    req->nofile = (uint32_t)r->nofile;
    req->network_none = r->network == TG_NET_NONE;
    /* Requests no backend enforces but a namespace without a route out:
     * asked for, so reported (and refused by "required") rather than
     * dropped. */
    req->bandwidth_bps = r->bandwidth_bps;
    req->max_connections = r->max_connections;
    return r->network == TG_NET_LOOPBACK ? -ENOTSUP : 0;
}

int tg_config_contain_req_for(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                              tg_contain_req_t *req)
{
    int rc = tg_config_contain_req(a, req);
    if (a->workspace) {
        /* A workspace always has a size: the disk limit, default or not. */
        req->workspace = a->workspace;
        req->workspace_backend = cfg->workspace_backend;
        req->disk_bytes = a->res.disk_bytes;
    }
    return rc;
}

tg_contain_mode_t tg_config_contain_mode(const tg_config_t *cfg)
{
    switch (cfg->containment_mode) {
    case TG_CONTAINMENT_REQUIRED:
        return TG_CONTAIN_REQUIRED;
    case TG_CONTAINMENT_OFF:
        return TG_CONTAIN_OFF;
    case TG_CONTAINMENT_BEST_EFFORT:
        break;
    }
    return TG_CONTAIN_BEST_EFFORT;
}
