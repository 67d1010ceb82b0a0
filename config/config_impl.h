/* Config internals shared by config.c and manifest.c. Not for use outside
 * config/.
 *
 * The manifest's "resources" and "execution_limits" are read by the same
 * schema code as the config's agents[] (config.c), so that keys, units,
 * bounds and error positions are the same in both files.
 */
#ifndef TG_CONFIG_CONFIG_IMPL_H
#define TG_CONFIG_CONFIG_IMPL_H

#include <stddef.h>

#include "config/config.h"

/* Parse manifest text <text> (<len> bytes; <name> is FILE in messages):
 * <lim> and <res> are reset to the defaults with source TG_SRC_DEFAULT,
 * then every limit the manifest's "resources" and "execution_limits" set
 * is stored with source TG_SRC_MANIFEST. Other top-level keys are
 * ignored. 0, or -1 with <err> filled ("FILE:LINE:COL: path: message"). */
int tg__config_parse_manifest(const char *name, const char *text, size_t len, tg_exec_limits_t *lim,
                              tg_resources_t *res, tg_cfg_err_t *err);

#endif
