/* The OpenSentience dialect's engine, as the fronts see it: its entry in
 * the dialect ops table (agent/dialect.h), over the gateway of os_gw.h. */
#ifndef TG_ROUTER_DIALECT_OPENSENTIENCE_H
#define TG_ROUTER_DIALECT_OPENSENTIENCE_H

#include "router/agent/dialect.h"

extern const tg_dialect_ops_t tg_os_dialect;

#endif
