/* Refused callers' audit. See refused.h. */
#include "router/gateway/refused.h"

void tg_refused_ev(tg_audit_ev_t *ev, const char *agent, const char *code, const char *type,
                   const char *scope, const char *front, const char *remote)
{
    tg_audit_ev_init(ev);
    ev->event = "call.denied";
    ev->agent = agent;
    ev->status = "denied";
    ev->code = code;
    ev->limit.type = type;
    ev->limit.scope = scope;
    ev->front = front;
    ev->remote = remote != NULL && remote[0] != '\0' ? remote : NULL;
}

bool tg_refused_take(tg_refused_gate_t *g, uint64_t now_ms, tg_audit_ev_t *ev)
{
    if (g->rate.t_us == 0)
        (void)tg_gcra_init(&g->rate, TG_REFUSED_AUDIT_RATE, 1000, TG_REFUSED_AUDIT_BURST);
    if (!tg_gcra_take(&g->rate, now_ms).allowed) {
        g->quiet++;
        return false;
    }
    if (g->quiet > 0)
        ev->count = (int64_t)g->quiet; /* refused before this one, not audited */
    g->quiet = 0;
    return true;
}
