/* The audit section's schema: audit.path (the one-file shorthand),
 * audit.sinks[] (whose keys depend on the sink's kind, read first), the
 * checks of sinks built or changed in code, and --audit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"

/* Only the scheme is checked here: the URL is parsed (and its password
 * kept out of messages) where the pipe is opened. Nothing of the value is
 * echoed, since it may hold a password. */
TG_KCHECK(tg__cfg_check_redis_url)
{
    (void)len;
    return tg__cfg_redis_scheme(s) ? 0
                                   : tg__cfg_why(-1, msg, cap,
                                                 "expected a redis://[[user]:password@]host[:port]"
                                                 "[/db] or unix:/path[?db=N] URL");
}

TG_KCHECK(tg__cfg_check_stream)
{
    for (size_t i = 0; s[i]; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f)
            return tg__cfg_why(-1, msg, cap, "expected a key without spaces or control characters");
    if (len > TG_AUDIT_STREAM_KEY_MAX)
        return tg__cfg_why(-1, msg, cap, "longer than %d bytes", TG_AUDIT_STREAM_KEY_MAX);
    return 0;
}

static void drop_sinks(tg_config_t *cfg)
{
    tg__cfg_items_free(cfg->audit_sinks, cfg->naudit_sinks, sizeof *cfg->audit_sinks,
                       tg__cfg_sink_free);
    cfg->audit_sinks = NULL;
    cfg->naudit_sinks = 0;
}

TG_KLOAD(tg__cfg_load_audit)
{
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (json_object_get(v, "path") && json_object_get(v, "sinks"))
        return tg__cfg_member_err(c, "sinks",
                                  "cannot be combined with audit.path (audit.path is "
                                  "shorthand for one file sink: give the file in "
                                  "audit.sinks instead)");
    return 0;
}

/* The shorthand replaces sinks an earlier source configured. */
TG_KLOAD(tg__cfg_load_audit_path)
{
    const char *s = tg__cfg_get_str(c, v, true);

    if (!s || tg__cfg_store_str(c, k, s) < 0)
        return -1;
    drop_sinks(c->cfg);
    return 0;
}

/* "kind" was read before the walk, which picks the sink's keys by it. */
TG_KLOAD(tg__cfg_load_sink_kind)
{
    (void)c;
    (void)v;
    (void)k;
    return 0;
}

/* The file sink <j> of <sinks> writes to, or NULL (its path or spool). */
static const char *sink_file(const tg_audit_sink_cfg_t *s)
{
    return s->kind == TG_AUDIT_SINK_FILE           ? s->path
           : s->kind == TG_AUDIT_SINK_REDIS_STREAM ? s->spool
                                                   : NULL;
}

/* Two writers on one file would rename it under each other and
 * interleave their seqs: member <key> (<file>) of sink <i> against the
 * sinks before it. */
static int same_file(tg_cfg_ctx_t *c, size_t i, const char *key, const char *file)
{
    const tg_audit_sink_cfg_t *sinks = c->items;

    for (size_t j = 0; j < i; j++) {
        const char *other = sink_file(&sinks[j]);
        if (other && strcmp(other, file) == 0)
            return tg__cfg_member_err(c, key, "same file as audit.sinks[%zu]", j);
    }
    return 0;
}

/* The kind's own rules, once its keys are read. */
static int sink_rules(tg_cfg_ctx_t *c, const json_t *v, size_t i)
{
    const tg_audit_sink_cfg_t *sinks = c->items, *s = &sinks[i];

    switch (s->kind) {
    case TG_AUDIT_SINK_STDERR:
        for (size_t j = 0; j < i; j++)
            if (sinks[j].kind == TG_AUDIT_SINK_STDERR)
                return tg__cfg_at_err(c, false, "a second stderr sink (also audit.sinks[%zu])", j);
        return 0;
    case TG_AUDIT_SINK_REDIS_STREAM:
        if (!s->url)
            return tg__cfg_at_err(c, false, "missing required key \"url\" (the Redis server)");
        if (!s->spool)
            return tg__cfg_at_err(c, false,
                                  "missing required key \"spool\" (the file that holds "
                                  "events while Redis is away)");
        return same_file(c, i, "spool", s->spool);
    case TG_AUDIT_SINK_FILE:
        break;
    }
    if (!s->path)
        return tg__cfg_at_err(c, false, "missing required key \"path\" (the file to write)");
    if (json_object_get(v, "fsync_interval") && s->fsync != TG_AUDIT_FSYNC_INTERVAL)
        return tg__cfg_member_err(c, "fsync_interval",
                                  "applies only to fsync \"interval\" (this sink has fsync \"%s\")",
                                  tg_cfg_key_find("audit.sinks[].fsync")->choices[s->fsync]);
    return same_file(c, i, "path", s->path);
}

static int sink_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    static const unsigned kind_flag[] = {TG_KF_SINK_FILE, TG_KF_SINK_STDERR, TG_KF_SINK_REDIS};
    const tg_cfg_key_t *kk = tg_cfg_key_find("audit.sinks[].kind");
    tg_audit_sink_cfg_t *s = (tg_audit_sink_cfg_t *)c->items + i;
    json_t *kind = json_is_object(v) ? json_object_get(v, "kind") : NULL;
    int pushed, kind_i, rc;

    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    if (!kind)
        return tg__cfg_at_err(c, false,
                              "missing required key \"kind\" (expected \"file\", "
                              "\"stderr\" or \"redis_stream\")");
    pushed = tg__cfg_push_key(c, "kind");
    kind_i = tg__cfg_get_enum(c, kind, kk);
    tg__cfg_pop(c, pushed);
    if (kind_i < 0)
        return -1;
    tg_config_sink_defaults(s, (tg_audit_sink_kind_t)kind_i);
    c->item = s;
    c->mask = kind_flag[kind_i];
    rc = tg__cfg_walk(c, v, "audit.sinks[]");
    c->mask = 0;
    return rc < 0 ? -1 : sink_rules(c, v, i);
}

TG_KLOAD(tg__cfg_load_sinks)
{
    static const tg_cfg_array_t sinks = {
        "sink", TG_CFG_SINKS_MAX, false, sizeof(tg_audit_sink_cfg_t), sink_one, tg__cfg_sink_free};
    (void)k;
    if (tg__cfg_load_array(c, v, &sinks, &c->cfg->audit_sinks, &c->cfg->naudit_sinks) < 0)
        return -1;
    free(c->cfg->audit_path);
    c->cfg->audit_path = NULL;
    return 0;
}

int tg_config_set_audit_path(tg_config_t *cfg, const char *path, tg_err_t *err)
{
    char *copy;

    if (!path || !path[0])
        return tg_err_set(err, -1, "--audit: expected a file path");
    if (!(copy = strdup(path)))
        return tg_err_set(err, -1, "--audit %s: out of memory", path);
    free(cfg->audit_path);
    cfg->audit_path = copy;
    drop_sinks(cfg);
    return 0;
}

/* ---- validation: configs built or changed in code (the loader already
 * refuses all of this with positions) ---- */

/* The rows of sink <s>'s kind: values in range, choices known; messages
 * give the whole range. */
static int check_sink_rows(const tg_audit_sink_cfg_t *s, size_t i, unsigned kind_flag,
                           const char *f, const char *sep, tg_err_t *err)
{
    tg_cfg_at_t at = {.item = s};

    for (size_t r = 0; r < tg_cfg_nkeys; r++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[r];
        tg_cfg_val_t v;
        char shown[48], lo[48], hi[48], msg[TG_ERR_MAX];
        if (!(k->flags & kind_flag) || k->obj != TG_KO_ITEM ||
            !tg_cfg_key_under(k, "audit.sinks[]"))
            continue;
        v = tg_cfg_key_get(k, &at);
        if (k->type == TG_KT_ENUM && v.u >= tg__cfg_choices(msg, sizeof msg, k->choices))
            return tg_err_set(err, -1, "%s%saudit.sinks[%zu].%s: not %s (expected %s)", f, sep, i,
                              tg_cfg_key_name(k), k->noun, msg);
        /* fsync_interval counts only with fsync "interval". */
        if (!tg_ktype_has_unit(k->type) || tg__cfg_in_range(k, &v) ||
            (strcmp(tg_cfg_key_name(k), "fsync_interval") == 0 &&
             s->fsync != TG_AUDIT_FSYNC_INTERVAL))
            continue;
        tg_cfg_key_fmt(k, &v, shown, sizeof shown);
        v.u = k->min;
        tg_cfg_key_fmt(k, &v, lo, sizeof lo);
        v.u = k->max;
        tg_cfg_key_fmt(k, &v, hi, sizeof hi);
        return tg_err_set(err, -1,
                          "%s%saudit.sinks[%zu].%s: %s is out of range (expected %s to %s)", f, sep,
                          i, tg_cfg_key_name(k), shown, lo, hi);
    }
    return 0;
}

static int check_sink(const tg_audit_sink_cfg_t *s, size_t i, const char *f, const char *sep,
                      tg_err_t *err)
{
    switch (s->kind) {
    case TG_AUDIT_SINK_STDERR:
        return 0;
    case TG_AUDIT_SINK_REDIS_STREAM:
        if (!s->url || !s->url[0])
            return tg_err_set(err, -1, "%s%saudit.sinks[%zu].url: missing (the Redis server)", f,
                              sep, i);
        if (!s->spool || !s->spool[0])
            return tg_err_set(err, -1, "%s%saudit.sinks[%zu].spool: missing (the spool file)", f,
                              sep, i);
        return check_sink_rows(s, i, TG_KF_SINK_REDIS, f, sep, err);
    case TG_AUDIT_SINK_FILE:
        if (!s->path || !s->path[0])
            return tg_err_set(err, -1, "%s%saudit.sinks[%zu].path: missing (the file to write)", f,
                              sep, i);
        return check_sink_rows(s, i, TG_KF_SINK_FILE, f, sep, err);
    }
    return tg_err_set(err, -1,
                      "%s%saudit.sinks[%zu].kind: not a sink kind (expected \"file\", "
                      "\"stderr\" or \"redis_stream\")",
                      f, sep, i);
}

TG_KVALID(tg__cfg_validate_audit)
{
    if (cfg->audit_queue == 0 || cfg->audit_queue > TG_AUDIT_QUEUE_CEIL)
        return tg_err_set(err, -1, "%s%saudit.queue: %u is out of range (expected 1 to %u)", f, sep,
                          cfg->audit_queue, (unsigned)TG_AUDIT_QUEUE_CEIL);
    if (cfg->naudit_sinks > TG_CFG_SINKS_MAX || (cfg->naudit_sinks && !cfg->audit_sinks))
        return tg_err_set(err, -1, "%s%saudit.sinks: %zu sinks (expected 1 to %d)", f, sep,
                          cfg->naudit_sinks, TG_CFG_SINKS_MAX);
    for (size_t i = 0; i < cfg->naudit_sinks; i++)
        if (check_sink(&cfg->audit_sinks[i], i, f, sep, err) < 0)
            return -1;
    return 0;
}
