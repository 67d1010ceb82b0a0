/* Config to containment request (see contain_cfg.h). */
#include "router/contain_cfg.h"

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
    /* A workspace size is requested only when configured: no backend
     * provides workspaces yet (issue 4, part 5), and a default request that
     * can never be applied would make containment.mode "required" refuse
     * every agent. Each file is still capped at the disk size by
     * RLIMIT_FSIZE, always. */
    req->disk_bytes = r->disk_src != TG_SRC_DEFAULT ? r->disk_bytes : 0;
    req->fsize = r->disk_bytes;
    req->nofile = (uint32_t)r->nofile;
    req->network_none = r->network == TG_NET_NONE;
    return r->network == TG_NET_LOOPBACK ? -ENOTSUP : 0;
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
