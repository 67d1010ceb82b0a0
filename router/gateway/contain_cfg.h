/* From config to the containment module: an agent's effective resources
 * as a tg_contain_req_t, and containment.mode as a tg_contain_mode_t.
 * Lives in router/ because config must not depend on limits (DESIGN.md
 * "Folders": router uses limits and config; limits uses config types
 * only).
 */
#ifndef TG_ROUTER_CONTAIN_CFG_H
#define TG_ROUTER_CONTAIN_CFG_H

#include "config/config.h"
#include "limits/contain.h"

/* The containment request for agent <a>: its effective memory, cpu, pids
 * (disk only when configured; no workspace: see tg_config_contain_req_for),
 * network "none" as a new network namespace,
 * RLIMIT_NOFILE at resources.nofile (default 1024; the containment module
 * holds it to toolgate's own hard limit), RLIMIT_FSIZE at the disk size,
 * the network bandwidth and connection requests (reported, not enforced,
 * unless network is "none"), and no dedicated user. Returns 0, or
 * -ENOTSUP when <a> asks for network "loopback", which no backend
 * provides: <req> then leaves the network alone and the caller must
 * report loopback as not enforced (and, in required mode, refuse). */
int tg_config_contain_req(const tg_agent_cfg_t *a, tg_contain_req_t *req);

/* tg_config_contain_req, plus the workspace: agents[].workspace with
 * containment.workspace_backend of <cfg>, its size the disk limit
 * (default or configured). The request borrows <a>'s workspace string. */
int tg_config_contain_req_for(const tg_config_t *cfg, const tg_agent_cfg_t *a,
                              tg_contain_req_t *req);

/* containment.mode of <cfg> in the containment module's terms. */
tg_contain_mode_t tg_config_contain_mode(const tg_config_t *cfg);

#endif
