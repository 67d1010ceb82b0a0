/* Callers refused before they reach a call (a Unix connection turned
 * away, an HTTP request without a valid credential): their audit event,
 * and the bound on how many are audited one by one. Used by the fronts
 * and by the engines that refuse in their own framing. */
#ifndef TG_ROUTER_GATEWAY_REFUSED_H
#define TG_ROUTER_GATEWAY_REFUSED_H

#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"
#include "limits/gcra.h"

#define TG_REFUSED_AUDIT_RATE 100  /* fixed internal bound: refusals audited per second per gate */
#define TG_REFUSED_AUDIT_BURST 200 /* fixed internal bound: refusals audited at once per gate */

/* One listener's gate. Zeroed is ready. */
typedef struct tg_refused_gate {
    tg_gcra_t rate;
    uint64_t quiet; /* refusals since the last audited one, not audited */
} tg_refused_gate_t;

/* The audit event of a caller refused before it has a session:
 * call.denied <code> (a denial code's name), limit <type> of <scope>,
 * from <front> and <remote> ("" or NULL: unknown). */
void tg_refused_ev(tg_audit_ev_t *ev, const char *agent, const char *code, const char *type,
                   const char *scope, const char *front, const char *remote);

/* May one more refusal be audited at loop time <now_ms>? A flood (a token
 * being guessed, connections churned past max_connections) is audited at
 * TG_REFUSED_AUDIT_RATE, so it cannot crowd the calls' events out of the
 * audit queue; the next event audited says in <ev>'s count how many were
 * not. */
bool tg_refused_take(tg_refused_gate_t *g, uint64_t now_ms, tg_audit_ev_t *ev);

#endif
