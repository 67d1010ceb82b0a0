/* The MCP dialect's engine, as the fronts see it: its entry in the
 * dialect ops table (agent/dialect.h). Everything else of dialect/mcp/ is
 * the engine's own (session.h). */
#ifndef TG_ROUTER_DIALECT_MCP_H
#define TG_ROUTER_DIALECT_MCP_H

#include "router/agent/dialect.h"

extern const tg_dialect_ops_t tg_mcp_dialect;

#endif
