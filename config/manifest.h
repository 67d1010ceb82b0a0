/* OpenSentience agent manifests (opensentience.agent.json) and their merge
 * with the operator's config.
 *
 * An agent in config may name its manifest ("manifest": PATH, relative to
 * the config file's directory). Of the manifest only "resources" and
 * "execution_limits" are read, in the same format and with the same units
 * and bounds as the config's own agents[].resources and
 * agents[].execution_limits; every other key of the manifest (id, name,
 * permissions, ...) is left to other tools. Inside those two objects
 * unknown keys are errors, as in the config: a misspelt limit must not
 * vanish.
 *
 * Merge: a manifest only asks (DESIGN.md "Config"); the ceiling is the
 * operator's value or, where the operator is silent, the default. For
 * every limit a manifest may name (the key table's rows marked
 * TG_KF_LIMIT and TG_KF_MANIFEST: duration, concurrency, queue, rate,
 * burst, memory, cpu, pids, nofile, disk, network, bandwidth,
 * connections), separately:
 *   - the manifest does not ask:  the operator's value (or the default)
 *   - it asks for no more than the ceiling: its request (source
 *     TG_SRC_MANIFEST; a tie is the manifest's, its request is met)
 *   - it asks for more: the ceiling, as TG_SRC_CAP ("operator cap") for
 *     a file value, TG_SRC_DEFAULT_CAP ("default cap") for the default,
 *     TG_SRC_CLI for a --limit value.
 * An agent never raises its own limits: asking for 24h calls with the
 * operator silent gets the default 15s.
 * Stricter means: smaller duration, count, size, rate (fewer calls per
 * unit of time; on a tie the smaller burst) and burst; network none over
 * loopback over full; a bandwidth or connection count over none at all
 * (their default, 0, is "not limited", so any request is stricter).
 *
 * Burst follows its rate when neither side sets it explicitly (burst 0 =
 * the rate's count); when one side does, each side's burst is its explicit
 * burst or its rate's count, and the smaller one wins.
 *
 * Error convention (setup layer, as config.h): 0 on success; on failure a
 * negative errno and <err> filled: -EINVAL for the content, as
 * "FILE:LINE:COL: json.path: what is wrong (expected ...)"; other values
 * when the file cannot be read, as "PATH: cannot open: why".
 *
 * Ownership: a tg_manifest_t owns its strings; tg_manifest_free releases
 * them (the struct itself belongs to its holder, a tg_agent_cfg_t).
 */
#ifndef TG_CONFIG_MANIFEST_H
#define TG_CONFIG_MANIFEST_H

#include "config/config.h"
#include "config/keys.h"

typedef struct tg_manifest {
    char *given; /* the path as written in config */
    char *path;  /* the file read: <given> resolved against the config's directory */
    /* What the manifest asks for: a field is requested when its source
     * is TG_SRC_MANIFEST, and holds the default otherwise. */
    tg_exec_limits_t req;
    tg_resources_t req_res;
    /* The operator's values (defaults, file, --limit) before the merge,
     * kept so that a later --limit merges again from them. */
    tg_exec_limits_t op;
    tg_resources_t op_res;
} tg_manifest_t;

/* Read and parse the manifest at <path> into <m>'s requests (m->req,
 * m->req_res; the rest of <m> is untouched). Reads at most
 * TG_MANIFEST_FILE_MAX bytes. See the error convention above. */
int tg_manifest_load_file(tg_manifest_t *m, const char *path, tg_err_t *err);

/* Same from a buffer; <name> is used as FILE in messages. */
int tg_manifest_load_buffer(tg_manifest_t *m, const char *name, const char *text, size_t len,
                            tg_err_t *err);

/* The file a "manifest" value names: <given> itself when it is absolute
 * or <config_path> is NULL (a config that is not a file), else <given>
 * beside the config file. Returns a malloc'd string, or NULL (ENOMEM). */
char *tg_manifest_resolve(const char *config_path, const char *given);

/* Merge: the effective limits of an agent from <m>'s operator values
 * (m->op, m->op_res) and requests (m->req, m->req_res), per the rules
 * above, into <lim> and <res>. Pure. */
void tg_manifest_merge(const tg_manifest_t *m, tg_exec_limits_t *lim, tg_resources_t *res);

/* What tg_manifest_capped_each reports: row <k>, what the manifest asked
 * (<asked>) and what the agent got (<granted>, with its source). */
typedef void (*tg_manifest_capped_fn)(void *arg, const tg_cfg_key_t *k, const tg_cfg_val_t *asked,
                                      const tg_cfg_val_t *granted);

/* Call <fn> once for each limit agent <a>'s manifest asked more of than
 * it got (its effective limits, after every source is merged). Nothing
 * for an agent without a manifest. */
void tg_manifest_capped_each(const tg_agent_cfg_t *a, tg_manifest_capped_fn fn, void *arg);

/* One tg_notice per such limit: "agent 'ID': manifest PATH asks KEY
 * ASKED; granted GRANTED (SOURCE; ...)". tg_config_validate calls it for
 * every agent once the config is final. */
void tg_manifest_notice_capped(const tg_agent_cfg_t *a);

/* Attach manifest <m> (requests loaded, <given> and <path> set; ownership
 * moves to <a>, which must have none yet): the agent's current limits
 * become the operator's values, and the merge becomes the agent's limits. */
void tg_manifest_attach(tg_agent_cfg_t *a, tg_manifest_t *m);

/* True when rate <a> admits fewer calls than <b>: a lower rate, or the
 * same rate with a smaller count (so a smaller burst). */
bool tg_rate_stricter(tg_rate_t a, tg_rate_t b);

/* Deep copy of <src> into <dst>. 0 or -ENOMEM (<dst> then holds nothing
 * to free). */
int tg_manifest_copy(tg_manifest_t *dst, const tg_manifest_t *src);

/* Release <m>'s strings and clear it. NULL is a no-op. */
void tg_manifest_free(tg_manifest_t *m);

#endif
