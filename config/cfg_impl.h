/* Internals shared by the files of config/. Not for use outside config/.
 *
 * The loader's state (tg_cfg_ctx_t), the value parsers behind the key
 * table's types (value.c), the generic walk and loaders (load.c), the
 * model's helpers (model.c) and each section's own loaders and checks
 * (cfg_*.c), which the key table (keys.c) names.
 *
 * A manifest's "resources" and "execution_limits" are read by the same
 * walk and rows as the config's agents[] (cfg_agent.c), so that keys,
 * units, bounds and error positions are the same in both files.
 */
#ifndef TG_CONFIG_CFG_IMPL_H
#define TG_CONFIG_CFG_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "config/keys.h"

#define TG_FMT(a, b) __attribute__((format(printf, a, b)))

#define CFG_DEPTH   8  /* fixed internal bound: JSON path depth the schema uses */
#define VALUE_SHOWN 64 /* fixed internal bound: bytes of a bad value echoed in a message */
#define QUOTED_MAX  (VALUE_SHOWN * 4 + 8) /* fixed internal bound: a quoted value, escaped */
#define LIST_MAX    384                   /* fixed internal bound: an "allowed: ..." list */

/* ------------------------------------------------------------------ */
/* The loader's state (load.c)                                         */

/* <comp>/<idx> is the JSON path of the value being read: comp[i] is an
 * object key, or NULL for the array index idx[i]. */
typedef struct tg_cfg_ctx {
    const char *file;
    const char *text;
    size_t len;
    tg_err_t *err;
    const char *comp[CFG_DEPTH];
    size_t idx[CFG_DEPTH];
    int depth;
    tg_config_t *cfg;        /* the copy being built */
    tg_agent_cfg_t *agent;   /* current agent (a scratch one for a manifest) */
    tg_exec_limits_t *lim;   /* current execution_limits, tool or caller scope */
    void *items;             /* the array being read (tg__cfg_load_array) */
    void *item;              /* current audit.sinks[], router.listen[] or callers[] entry */
    unsigned mask;           /* flags every row a walk accepts must have (manifest, sink kind) */
    tg_src_t src;            /* TG_SRC_FILE, or TG_SRC_MANIFEST for a manifest */
    const char *config_path; /* the config file (manifests are found beside it), or NULL */
    const char *manifest;    /* current agent's "manifest" value (in the JSON tree), or NULL */
} tg_cfg_ctx_t;

/* <c> ready to read document <text> (<len> bytes; <file> in messages)
 * into <cfg> with source <src>, errors to <err>. */
void tg__cfg_ctx_init(tg_cfg_ctx_t *c, const char *file, const char *text, size_t len,
                      tg_config_t *cfg, tg_src_t src, tg_err_t *err);
int tg__cfg_push_key(tg_cfg_ctx_t *c, const char *key);
int tg__cfg_push_idx(tg_cfg_ctx_t *c, size_t i);
void tg__cfg_pop(tg_cfg_ctx_t *c, int pushed);

/* Fill the error for the current path: "FILE:L:C: path: message". With
 * <at_key> the position is the last key's and the path printed is its
 * parent's (the message names the key). Returns -1. */
int tg__cfg_at_err(tg_cfg_ctx_t *c, bool at_key, const char *fmt, ...) TG_FMT(3, 4);
/* Same for member <key> of the current object. */
int tg__cfg_member_err(tg_cfg_ctx_t *c, const char *key, const char *fmt, ...) TG_FMT(3, 4);
/* "expected <expected>, got <type of v>". */
int tg__cfg_type_err(tg_cfg_ctx_t *c, const json_t *v, const char *expected);
int tg__cfg_want_object(tg_cfg_ctx_t *c, const json_t *v);
/* A string, or NULL with the error set. <nonempty>: "" refused too. */
const char *tg__cfg_get_str(tg_cfg_ctx_t *c, const json_t *v, bool nonempty);
/* Read <v> per row <k> (a type with a unit) into <out>. 0 or -1. */
int tg__cfg_get_val(tg_cfg_ctx_t *c, const json_t *v, const tg_cfg_key_t *k, tg_cfg_val_t *out);
/* The index of <v> in row <k>'s choices, or -1 with the error set. */
int tg__cfg_get_enum(tg_cfg_ctx_t *c, const json_t *v, const tg_cfg_key_t *k);

/* Walk object <obj>: each member must be a row below <parent> holding the
 * flags of c->mask, read by its loader; the first error in document order
 * is reported. An unknown member is refused with the allowed ones. */
int tg__cfg_walk(tg_cfg_ctx_t *c, json_t *obj, const char *parent);

/* An array of objects in the model: how its JSON array is read. */
typedef struct tg_cfg_array {
    const char *noun; /* "listener": messages say "%zu listeners", "at least one listener" */
    size_t max;       /* elements at most */
    bool may_be_empty;
    size_t size; /* bytes of an element */
    /* Read element <i> of c->items (zeroed) from <v>. 0 or -1. */
    int (*each)(tg_cfg_ctx_t *c, json_t *v, size_t i);
    void (*free_one)(void *e); /* frees what element <e> owns */
} tg_cfg_array_t;

/* Read array <v> per <a> into a new array and put it in place of the one
 * at <slot> (the address of a T *; the old array of <*n> elements is
 * freed and <*n> set). 0, or -1 with the new array freed and <slot>
 * untouched. */
int tg__cfg_load_array(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_array_t *a, void *slot, size_t *n);

/* The loader a row gets by its type: a value with a unit, a choice, a
 * boolean, a string (with the row's check), a section (walked). */
int tg__cfg_load_default(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_key_t *k);
/* Range check of every set TG_KF_LIMIT row below <parent> in <at>;
 * <where> is the message's path prefix ("agents[0].execution_limits.").
 * 0 or -1 with <err> set. */
int tg__cfg_check_limits(const tg_config_t *cfg, const tg_cfg_at_t *at, const char *parent,
                         const char *where, tg_err_t *err);
/* Store <v> (source c->src) in row <k>'s field of the current objects. */
void tg__cfg_store(tg_cfg_ctx_t *c, const tg_cfg_key_t *k, const tg_cfg_val_t *v);
/* Store a string in row <k>'s char * field (a copy; the old one freed). */
int tg__cfg_store_str(tg_cfg_ctx_t *c, const tg_cfg_key_t *k, const char *s);

/* ------------------------------------------------------------------ */
/* Values (value.c)                                                    */

/* Quote <len> bytes of <s> for a message: "..." with '"', '\\' and control
 * bytes escaped, cut at VALUE_SHOWN bytes. */
void tg__cfg_quote(char *out, size_t cap, const char *s, size_t len);
/* Parse text <s> per row <k>. On failure the message tail ("\"x\" is not
 * a rate (expected ...)") is in <msg> and -1 returned. */
int tg__cfg_parse_text(const tg_cfg_key_t *k, const char *s, tg_cfg_val_t *out, char *msg,
                       size_t cap);
/* Same for JSON value <v>: sizes, durations and rates are strings (the
 * unit is part of the value); counts may be integers too. */
int tg__cfg_parse_json(const tg_cfg_key_t *k, const json_t *v, tg_cfg_val_t *out, char *msg,
                       size_t cap);
/* The index of <s> in <k>'s choices, or -1 with "\"s\" is not <noun>
 * (expected ...)" in <msg> (<noun> NULL: the row's). */
int tg__cfg_parse_choice(const tg_cfg_key_t *k, const char *s, size_t len, const char *noun,
                         char *msg, size_t cap);
/* The choices as a message lists them, "\"a\", \"b\" or \"c\"", in <buf>;
 * returns how many there are. */
size_t tg__cfg_choices(char *buf, size_t cap, const char *const *choices);
bool tg__cfg_in_range(const tg_cfg_key_t *k, const tg_cfg_val_t *v);
/* "expected ..." for a value outside row <k>'s bounds. */
void tg__cfg_range_why(char *buf, size_t cap, const tg_cfg_key_t *k);
const char *tg__cfg_json_noun(const json_t *v);
/* Write the printf-style reason into <buf> (capacity <cap>) and return
 * <rc>: a check's refusal in one statement. */
int tg__cfg_why(int rc, char *buf, size_t cap, const char *fmt, ...) TG_FMT(4, 5);
/* Whether <s> is a Redis URL as far as the scheme goes (redis:// or
 * unix:); the rest is parsed where it is used. */
bool tg__cfg_redis_scheme(const char *s);
/* Append <name> to the ", "-separated list in <buf>. */
void tg__cfg_list_add(char *buf, size_t cap, const char *name);
/* The names of the rows below <parent> holding <mask> ("a, b, c"). */
void tg__cfg_children(char *buf, size_t cap, const char *parent, unsigned mask);

/* ------------------------------------------------------------------ */
/* Rows (keys.c)                                                       */

/* Store <v> with source <src> in row <k>'s field of <at>, whose objects
 * must be writable. */
void tg__cfg_key_set(const tg_cfg_key_t *k, const tg_cfg_at_t *at, const tg_cfg_val_t *v,
                     tg_src_t src);
/* Store a copy of <s> in row <k>'s char * field of <at>, freeing the old
 * one (wiped first for a TG_KF_SECRET row). 0 or -ENOMEM. */
int tg__cfg_key_set_str(const tg_cfg_key_t *k, const tg_cfg_at_t *at, const char *s);

/* ------------------------------------------------------------------ */
/* Model (model.c)                                                     */

extern const char tg__cfg_name_chars_tool[];  /* "A-Z a-z 0-9 . _ : @ / -" */
extern const char tg__cfg_name_chars_agent[]; /* "A-Z a-z 0-9 . _ -" */
/* 1..TG_NAME_MAX bytes of [A-Za-z0-9._-], plus ":@/" with <tool_set>. */
bool tg__cfg_name_ok(const char *s, size_t len, bool tool_set);
bool tg__cfg_agent_id_ok(const char *s);
void tg__cfg_lim_defaults(tg_exec_limits_t *l);
void tg__cfg_agent_defaults(tg_agent_cfg_t *a);
void tg__cfg_argv_free(char **argv);
char **tg__cfg_argv_dup(char *const *argv);
/* free() after wiping: for strings that may hold a password. */
void tg__cfg_free_secret(char *s);
/* Element frees (tg_cfg_array_t.free_one): what one element owns. */
void tg__cfg_agent_free(void *a);
void tg__cfg_sink_free(void *s);
void tg__cfg_listen_free(void *l);
void tg__cfg_caller_free(void *cc);
/* Free the <n> elements of <size> bytes at <v> with <one>, then <v>. */
void tg__cfg_items_free(void *v, size_t n, size_t size, void (*one)(void *));
/* Deep copy; on failure <dst> holds nothing to free and -1 is returned. */
int tg__cfg_clone(tg_config_t *dst, const tg_config_t *src);
/* The entry for tool <name> in <a>, created unset when missing; NULL on
 * ENOMEM or past TG_CFG_TOOLS_MAX tools. */
tg_tool_cfg_t *tg__cfg_tool_get_or_add(tg_agent_cfg_t *a, const char *name, size_t len);

/* ------------------------------------------------------------------ */
/* Sections: the loaders (tg_kload_fn) and string checks (tg_kcheck_fn)
 * the key table names, and the checks tg_config_validate runs. The macros
 * give each its signature, so a definition reads TG_KLOAD(name) { ... }
 * with the arguments:
 *   TG_KLOAD:  <c> the loader's state, <v> the JSON value, <k> its row;
 *   TG_KCHECK: <s> the string (<len> bytes), the reason into <msg>
 *              (capacity <cap>); 0 or -1;
 *   TG_KVALID: <cfg>, the error into <err> with the prefix <f><sep> ("FILE"
 *              and ": ", or both "" without a file); 0 or -1. */

#define TG_KLOAD(name)  int name(tg_cfg_ctx_t *c, json_t *v, const tg_cfg_key_t *k)
#define TG_KCHECK(name) int name(const char *s, size_t len, char *msg, size_t cap)
#define TG_KVALID(name)                                                                            \
    int name(const tg_config_t *cfg, const char *f, const char *sep, tg_err_t *err)

/* cfg_router.c: router.*, callers[] */
TG_KCHECK(tg__cfg_check_instance);
TG_KCHECK(tg__cfg_check_unix_path);
TG_KCHECK(tg__cfg_check_caller_name);
TG_KLOAD(tg__cfg_load_listen);
TG_KLOAD(tg__cfg_load_listen_agents);
TG_KLOAD(tg__cfg_load_policy);
TG_KLOAD(tg__cfg_load_policy_rules);
TG_KLOAD(tg__cfg_load_policy_list);
TG_KLOAD(tg__cfg_load_policy_claims);
TG_KCHECK(tg__cfg_check_http_addr);
TG_KCHECK(tg__cfg_check_http_path);
TG_KLOAD(tg__cfg_load_tls);
TG_KLOAD(tg__cfg_load_origins);
TG_KLOAD(tg__cfg_load_mode);
TG_KLOAD(tg__cfg_load_owner);
TG_KLOAD(tg__cfg_load_admin);
TG_KLOAD(tg__cfg_load_callers);
TG_KLOAD(tg__cfg_load_caller_id);
TG_KLOAD(tg__cfg_load_caller_limits);
TG_KLOAD(tg__cfg_load_caller_rate_scope);
TG_KLOAD(tg__cfg_load_caller_tokens);
TG_KLOAD(tg__cfg_load_caller_jwt);
TG_KCHECK(tg__cfg_check_jwt_claim);
TG_KVALID(tg__cfg_validate_router);

/* cfg_agent.c: agents[] and a manifest's limits */
TG_KCHECK(tg__cfg_check_agent_id);
TG_KCHECK(tg__cfg_check_tool_prefix);
TG_KCHECK(tg__cfg_check_abs_path);
TG_KLOAD(tg__cfg_load_agents);
TG_KLOAD(tg__cfg_load_command);
TG_KLOAD(tg__cfg_load_exec_limits);
TG_KLOAD(tg__cfg_load_tools);
TG_KLOAD(tg__cfg_load_tool_conc_scope);
TG_KLOAD(tg__cfg_load_env_pass);
TG_KLOAD(tg__cfg_load_env_set);
TG_KLOAD(tg__cfg_load_network);
TG_KLOAD(tg__cfg_load_manifest);
TG_KLOAD(tg__cfg_load_start);
TG_KLOAD(tg__cfg_load_os);
TG_KVALID(tg__cfg_validate_agents);

/* Parse manifest text <text> (<len> bytes; <name> is FILE in messages):
 * <lim> and <res> are reset to the defaults with source TG_SRC_DEFAULT,
 * then every limit the manifest's "resources" and "execution_limits" set
 * is stored with source TG_SRC_MANIFEST. Other top-level keys are
 * ignored. 0, or -1 with <err> filled ("FILE:LINE:COL: path: message"). */
int tg__config_parse_manifest(const char *name, const char *text, size_t len, tg_exec_limits_t *lim,
                              tg_resources_t *res, tg_err_t *err);

/* cfg_audit.c */
TG_KCHECK(tg__cfg_check_redis_url);
TG_KCHECK(tg__cfg_check_stream);
TG_KLOAD(tg__cfg_load_audit);
TG_KLOAD(tg__cfg_load_audit_path);
TG_KLOAD(tg__cfg_load_sinks);
TG_KLOAD(tg__cfg_load_sink_kind);
TG_KVALID(tg__cfg_validate_audit);

/* cfg_store.c */
TG_KCHECK(tg__cfg_check_store_url);
TG_KCHECK(tg__cfg_check_prefix);
TG_KLOAD(tg__cfg_load_store);

/* cfg_containment.c */
TG_KCHECK(tg__cfg_check_workspace);
TG_KVALID(tg__cfg_validate_containment);

#endif
