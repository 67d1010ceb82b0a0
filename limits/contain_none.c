/* none backend: containment.mode "off". Nothing is applied and every
 * requested resource says so; the process tree is still sampled (the
 * admin view shows usage) and killed as one unit when the router ends an
 * instance. The shim stays as the agent's supervisor here too
 * (--supervise): its tree dies with the agent and with toolgate.
 */
#include "limits/contain_impl.h"

static int none_create(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)ci;
    (void)err;
    return 0;
}

static int none_limit(tg_contain_inst_t *ci, tg_err_t *err)
{
    (void)err;
    for (int r = 0; r < TG_RES_COUNT; r++) {
        if (ci->enforced.r[r].requested)
            tg__enf_no(ci, (tg_res_t)r, "none", "containment.mode is off");
    }
    return 0;
}

static void none_place(const tg_contain_inst_t *ci, tg_contain_place_t *pl)
{
    (void)ci;
    (void)pl;
}

static int none_destroy(tg_contain_inst_t *ci)
{
    (void)ci;
    return 0;
}

const tg_contain_ops_t tg__contain_none_ops = {
    .name = "none",
    .kind = TG_CONTAIN_NONE,
    .create = none_create,
    .limit = none_limit,
    .place = none_place,
    .sample = tg__tree_sample,
    .kill = tg__tree_kill,
    .destroy = none_destroy,
};
