/* The dialects built in. See dialect.h. */
#include "router/dialect/dialect.h"

#include "router/dialect/mcp/mcp.h"
#include "router/dialect/opensentience/opensentience.h"

const tg_dialect_ops_t *const tg_dialects[] = {&tg_mcp_dialect, &tg_os_dialect};
const size_t tg_ndialects = sizeof(tg_dialects) / sizeof(tg_dialects[0]);

const tg_dialect_ops_t *tg_dialect_find(tg_dialect_t d)
{
    for (size_t i = 0; i < tg_ndialects; i++)
        if (tg_dialects[i]->dialect == d)
            return tg_dialects[i];
    return NULL;
}
