/* The dialects built into toolgate: the one place that names every
 * engine, so that the fronts name none (agent/dialect.h). */
#ifndef TG_ROUTER_DIALECT_DIALECT_H
#define TG_ROUTER_DIALECT_DIALECT_H

#include <stddef.h>

#include "router/agent/dialect.h"

/* The dialects, in the order a runner opens them. */
extern const tg_dialect_ops_t *const tg_dialects[];
extern const size_t tg_ndialects;

/* The ops of <d>, or NULL. */
const tg_dialect_ops_t *tg_dialect_find(tg_dialect_t d);

#endif
