/* Loading and validation: the JSON walk over the key table, error
 * positions, the loaders a row gets by its type, tg_config_load_* and
 * tg_config_validate.
 *
 * The walk takes an object's members in document order, so the first
 * error reported is the first one in the file. jansson keeps no positions
 * for values, so an error's JSON path is located again in the original
 * text with jscan.
 *
 * Loading is atomic: the file is applied to a deep copy of the config,
 * which replaces the original only when the whole file was accepted (a
 * SIGHUP reload with a bad file keeps the old config).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_impl.h"
#include "config/jscan.h"

/* ------------------------------------------------------------------ */
/* Positions                                                           */

void tg__cfg_ctx_init(tg_cfg_ctx_t *c, const char *file, const char *text, size_t len,
                      tg_config_t *cfg, tg_src_t src, tg_err_t *err)
{
    *c = (tg_cfg_ctx_t){.file = file, .text = text, .len = len, .err = err, .cfg = cfg, .src = src};
}

/* The schema never nests deeper than CFG_DEPTH; a push past it keeps the
 * path at its deepest known prefix (the position is then less precise but
 * still inside the offending value). */
int tg__cfg_push_key(tg_cfg_ctx_t *c, const char *key)
{
    if (c->depth >= CFG_DEPTH)
        return 0;
    c->comp[c->depth] = key;
    c->idx[c->depth] = 0;
    c->depth++;
    return 1;
}

int tg__cfg_push_idx(tg_cfg_ctx_t *c, size_t i)
{
    if (c->depth >= CFG_DEPTH)
        return 0;
    c->comp[c->depth] = NULL;
    c->idx[c->depth] = i;
    c->depth++;
    return 1;
}

void tg__cfg_pop(tg_cfg_ctx_t *c, int pushed)
{
    c->depth -= pushed;
}

/* Display form of the first <n> components: agents[0].tools.web.burst */
static void path_display(const tg_cfg_ctx_t *c, int n, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && o < cap; i++) {
        int w;
        if (c->comp[i])
            w = snprintf(buf + o, cap - o, "%s%s", o ? "." : "", c->comp[i]);
        else
            w = snprintf(buf + o, cap - o, "[%zu]", c->idx[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

/* Element <i> of the array span <arr>. */
static bool array_nth(const char *buf, tg_jspan_t arr, size_t i, tg_jspan_t *out)
{
    size_t pos = arr.off + 1, end = arr.off + arr.len - 1;

    for (size_t k = 0;; k++) {
        tg_jspan_t el;
        long next = tg_jscan_value(buf, end, pos, &el);
        if (next < 0)
            return false;
        if (k == i) {
            *out = el;
            return true;
        }
        pos = (size_t)next;
        while (pos < end &&
               (buf[pos] == ' ' || buf[pos] == '\t' || buf[pos] == '\n' || buf[pos] == '\r'))
            pos++;
        if (pos >= end || buf[pos] != ',')
            return false;
        pos++;
    }
}

/* Member <key> of the object span <cur>: its value, or with <want_key>
 * its key. */
static bool member_of(const char *text, tg_jspan_t cur, const char *key, bool want_key,
                      tg_jspan_t *out)
{
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    int r;

    if (cur.type != TG_J_OBJECT)
        return false;
    tg_jobj_begin(&it, text, cur);
    while ((r = tg_jobj_next(&it, &k, &v)) == 1) {
        if (tg_jstr_eq(text, k, key)) {
            *out = want_key ? k : v;
            return true;
        }
    }
    return false;
}

/* Offset in the text of the value at the first <n> path components, or,
 * with <want_key>, of the key of the last one. The leading components are
 * found with tg_jscan_find_path; from the first key holding a '.' (which
 * the dotted form cannot express; tool names may hold dots) the walk goes
 * on member by member. */
static bool locate(const tg_cfg_ctx_t *c, int n, bool want_key, size_t *off)
{
    char jp[512];
    size_t jl = 0;
    int k = 0, plain = want_key ? n - 1 : n;
    tg_jspan_t cur;

    if (tg_jscan_value(c->text, c->len, 0, &cur) < 0)
        return false;
    jp[0] = '\0';
    for (; k < plain; k++) {
        int w;
        if (c->comp[k] && strchr(c->comp[k], '.'))
            break;
        if (c->comp[k])
            w = snprintf(jp + jl, sizeof jp - jl, "%s%s", jl ? "." : "", c->comp[k]);
        else
            w = snprintf(jp + jl, sizeof jp - jl, "%s%zu", jl ? "." : "", c->idx[k]);
        if (w < 0 || (size_t)w >= sizeof jp - jl) {
            jp[jl] = '\0';
            break;
        }
        jl += (size_t)w;
    }
    if (jl > 0 && tg_jscan_find_path(c->text, c->len, jp, &cur) < 0)
        return false;
    for (; k < n; k++) {
        bool ok = c->comp[k] ? member_of(c->text, cur, c->comp[k], want_key && k == n - 1, &cur)
                             : cur.type == TG_J_ARRAY && array_nth(c->text, cur, c->idx[k], &cur);
        if (!ok)
            return false;
    }
    *off = cur.off;
    return true;
}

static int vat_err(tg_cfg_ctx_t *c, bool at_key, const char *fmt, va_list ap) TG_FMT(3, 0);
static int vat_err(tg_cfg_ctx_t *c, bool at_key, const char *fmt, va_list ap)
{
    char path[256], msg[TG_ERR_MAX], pos[32] = "";
    size_t off;
    int line, col;

    vsnprintf(msg, sizeof msg, fmt, ap);
    if (locate(c, c->depth, at_key && c->depth > 0, &off)) {
        tg_jscan_linecol(c->text, c->len, off, &line, &col);
        snprintf(pos, sizeof pos, ":%d:%d", line, col);
    }
    path_display(c, at_key && c->depth > 0 ? c->depth - 1 : c->depth, path, sizeof path);
    return tg_err_set(c->err, -1, "%s%s: %s%s%s", c->file, pos, path, path[0] ? ": " : "", msg);
}

int tg__cfg_at_err(tg_cfg_ctx_t *c, bool at_key, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vat_err(c, at_key, fmt, ap);
    va_end(ap);
    return rc;
}

int tg__cfg_member_err(tg_cfg_ctx_t *c, const char *key, const char *fmt, ...)
{
    int pushed = tg__cfg_push_key(c, key), rc;
    va_list ap;

    va_start(ap, fmt);
    rc = vat_err(c, false, fmt, ap);
    va_end(ap);
    tg__cfg_pop(c, pushed);
    return rc;
}

int tg__cfg_type_err(tg_cfg_ctx_t *c, const json_t *v, const char *expected)
{
    return tg__cfg_at_err(c, false, "expected %s, got %s", expected, tg__cfg_json_noun(v));
}

int tg__cfg_want_object(tg_cfg_ctx_t *c, const json_t *v)
{
    return json_is_object(v) ? 0 : tg__cfg_type_err(c, v, "an object");
}

/* ------------------------------------------------------------------ */
/* Values                                                              */

const char *tg__cfg_get_str(tg_cfg_ctx_t *c, const json_t *v, bool nonempty)
{
    if (!json_is_string(v)) {
        tg__cfg_type_err(c, v, "a string");
        return NULL;
    }
    if (nonempty && json_string_length(v) == 0) {
        tg__cfg_at_err(c, false, "expected a non-empty string");
        return NULL;
    }
    return json_string_value(v);
}

int tg__cfg_get_val(tg_cfg_ctx_t *c, const json_t *v, const tg_cfg_key_t *k, tg_cfg_val_t *out)
{
    char msg[TG_ERR_MAX];

    if (tg__cfg_parse_json(k, v, out, msg, sizeof msg) < 0)
        return tg__cfg_at_err(c, false, "%s", msg);
    return 0;
}

int tg__cfg_get_enum(tg_cfg_ctx_t *c, const json_t *v, const tg_cfg_key_t *k)
{
    char msg[TG_ERR_MAX];
    const char *s = tg__cfg_get_str(c, v, false);
    int i;

    if (!s)
        return -1;
    i = tg__cfg_parse_choice(k, s, json_string_length(v), NULL, msg, sizeof msg);
    return i < 0 ? tg__cfg_at_err(c, false, "%s", msg) : i;
}

static tg_cfg_at_t ctx_at(const tg_cfg_ctx_t *c)
{
    tg_cfg_at_t at = {c->cfg, c->agent, c->lim, c->agent ? &c->agent->res : NULL, c->item};
    return at;
}

void tg__cfg_store(tg_cfg_ctx_t *c, const tg_cfg_key_t *k, const tg_cfg_val_t *v)
{
    tg_cfg_at_t at = ctx_at(c);
    tg__cfg_key_set(k, &at, v, c->src);
}

int tg__cfg_store_str(tg_cfg_ctx_t *c, const tg_cfg_key_t *k, const char *s)
{
    tg_cfg_at_t at = ctx_at(c);
    return tg__cfg_key_set_str(k, &at, s) < 0 ? tg__cfg_at_err(c, false, "out of memory") : 0;
}

/* ------------------------------------------------------------------ */
/* The walk and the loaders by type                                    */

int tg__cfg_walk(tg_cfg_ctx_t *c, json_t *obj, const char *parent)
{
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v)
    {
        const tg_cfg_key_t *k = tg_cfg_key_child(parent, key, strlen(key), c->mask);
        int pushed = tg__cfg_push_key(c, key), rc;
        if (!k) {
            char list[LIST_MAX], q[QUOTED_MAX];
            tg__cfg_children(list, sizeof list, parent, c->mask);
            tg__cfg_quote(q, sizeof q, key, strlen(key));
            rc = tg__cfg_at_err(c, true, "unknown key %s (allowed: %s)", q, list);
        } else {
            rc = k->load ? k->load(c, v, k) : tg__cfg_load_default(c, v, k);
        }
        tg__cfg_pop(c, pushed);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int tg__cfg_load_array(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_array_t *a, void *slot, size_t *n)
{
    void *items, *old, *outer = c->items;
    size_t len;
    int rc = 0;

    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array");
    len = json_array_size(v);
    if (len == 0 && !a->may_be_empty)
        return tg__cfg_at_err(c, false, "expected at least one %s", a->noun);
    if (len > a->max)
        return tg__cfg_at_err(c, false, "%zu %ss (expected at most %zu)", len, a->noun, a->max);
    if (!(items = calloc(len ? len : 1, a->size)))
        return tg__cfg_at_err(c, false, "out of memory");
    c->items = items;
    for (size_t i = 0; i < len && rc == 0; i++) {
        int pushed = tg__cfg_push_idx(c, i);
        rc = a->each(c, json_array_get(v, i), i);
        tg__cfg_pop(c, pushed);
    }
    c->items = outer;
    if (rc < 0) {
        tg__cfg_items_free(items, len, a->size, a->free_one);
        return -1;
    }
    /* <slot> holds a T *: moved as bytes, as object pointers are on
     * every ABI toolgate runs on. */
    memcpy(&old, slot, sizeof old);
    tg__cfg_items_free(old, *n, a->size, a->free_one);
    memcpy(slot, &items, sizeof items);
    *n = len;
    return 0;
}

static int load_string(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_key_t *k)
{
    const char *s = tg__cfg_get_str(c, v, !(k->flags & TG_KF_EMPTY_OK));
    char msg[TG_ERR_MAX];

    if (!s)
        return -1;
    if (k->check && k->check(s, json_string_length(v), msg, sizeof msg) < 0)
        return tg__cfg_at_err(c, false, "%s", msg);
    return tg__cfg_store_str(c, k, s);
}

int tg__cfg_load_default(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_key_t *k)
{
    tg_cfg_val_t val = {0};
    int i;

    if (k->type == TG_KT_OBJECT || (k->flags & TG_KF_LIMIT_OBJ))
        return tg__cfg_want_object(c, v) < 0 ? -1 : tg__cfg_walk(c, v, k->path);
    if (k->type == TG_KT_STRING)
        return load_string(c, v, k);
    if (tg_ktype_has_unit(k->type)) {
        if (tg__cfg_get_val(c, v, k, &val) < 0)
            return -1;
    } else if (k->type == TG_KT_ENUM) {
        if ((i = tg__cfg_get_enum(c, v, k)) < 0)
            return -1;
        val.u = (uint64_t)i;
    } else if (k->type == TG_KT_BOOL) {
        if (!json_is_boolean(v))
            return tg__cfg_type_err(c, v, "true or false");
        val.u = json_is_true(v);
    } else {
        return tg__cfg_at_err(c, false, "%s has no loader", k->path); /* a table bug */
    }
    tg__cfg_store(c, k, &val);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Loading                                                             */

static int load(tg_config_t *cfg, const char *name, const char *text, size_t len,
                const char *set_path, tg_err_t *err)
{
    json_error_t jerr;
    json_t *root;
    tg_config_t work;
    tg_cfg_ctx_t c;
    int rc;

    if (!name)
        name = "config";
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tg_err_set(err, -1, "%s:%d:%d: syntax error: %s", name, jerr.line, jerr.column,
                          jerr.text);
    if (tg__cfg_clone(&work, cfg) < 0) {
        json_decref(root);
        return tg_err_set(err, -1, "%s: out of memory", name);
    }
    tg__cfg_ctx_init(&c, name, text, len, &work, TG_SRC_FILE, err);
    c.config_path = set_path;
    if (!json_is_object(root))
        rc = tg__cfg_at_err(&c, false, "expected an object at the top level, got %s",
                            tg__cfg_json_noun(root));
    else
        rc = tg__cfg_walk(&c, root, "");
    json_decref(root);
    if (rc == 0 && set_path) {
        char *p = strdup(set_path);
        if (!p)
            rc = tg_err_set(err, -1, "%s: out of memory", name);
        free(work.path);
        work.path = p;
    }
    if (rc < 0) {
        tg_config_free(&work);
        return -1;
    }
    tg_config_free(cfg);
    *cfg = work;
    return 0;
}

int tg_config_load_buffer(tg_config_t *cfg, const char *name, const char *text, size_t len,
                          tg_err_t *err)
{
    return load(cfg, name, text, len, NULL, err);
}

int tg_config_load_file(tg_config_t *cfg, const char *path, tg_err_t *err)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t len = 0, n;
    int rc;

    if (!f)
        return tg_err_set(err, -1, "%s: cannot open: %s", path, strerror(errno));
    /* Read up to one byte past the bound to tell "exactly at the bound"
     * from "over it" without trusting st_size (pipes, /proc). */
    buf = malloc(TG_CFG_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return tg_err_set(err, -1, "%s: out of memory", path);
    }
    while (len <= TG_CFG_FILE_MAX && (n = fread(buf + len, 1, TG_CFG_FILE_MAX + 1 - len, f)) > 0)
        len += n;
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        return tg_err_set(err, -1, "%s: cannot read: %s", path, strerror(e));
    }
    fclose(f);
    if (len > TG_CFG_FILE_MAX) {
        free(buf);
        return tg_err_set(err, -1, "%s: larger than %u bytes (config files are bounded)", path,
                          TG_CFG_FILE_MAX);
    }
    rc = load(cfg, path, buf, len, path, err);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Validation                                                          */

int tg__cfg_check_limits(const tg_config_t *cfg, const tg_cfg_at_t *at, const char *parent,
                         const char *where, tg_err_t *err)
{
    const char *file = cfg->path;

    for (size_t i = 0; i < tg_cfg_nkeys; i++) {
        const tg_cfg_key_t *k = &tg_cfg_keys[i];
        tg_cfg_val_t v;
        char shown[48], rw[96];
        if (!(k->flags & TG_KF_LIMIT) || !tg_cfg_key_under(k, parent) || !tg_cfg_key_is_set(k, at))
            continue;
        v = tg_cfg_key_get(k, at);
        if (tg__cfg_in_range(k, &v) && (k->type != TG_KT_RATE || v.rate.period_ms != 0))
            continue;
        tg_cfg_key_fmt(k, &v, shown, sizeof shown);
        tg__cfg_range_why(rw, sizeof rw, k);
        return tg_err_set(err, -1, "%s%s%s%s: %s is out of range (%s)", file ? file : "",
                          file ? ": " : "", where, tg_cfg_key_name(k), shown, rw);
    }
    return 0;
}

int tg_config_validate(const tg_config_t *cfg, tg_err_t *err)
{
    const char *f = cfg->path ? cfg->path : "";
    const char *sep = cfg->path ? ": " : "";
    tg_cfg_at_t at = {.cfg = cfg};

    if (tg__cfg_check_limits(cfg, &at, "router", "router.", err) < 0 ||
        tg__cfg_validate_router(cfg, f, sep, err) < 0 ||
        tg__cfg_validate_audit(cfg, f, sep, err) < 0 ||
        tg__cfg_validate_containment(cfg, f, sep, err) < 0 ||
        tg__cfg_validate_agents(cfg, f, sep, err) < 0)
        return -1;
    return 0;
}
