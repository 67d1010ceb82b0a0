/* The key table: every key a toolgate config may hold, one row each, with
 * its JSON path, type and unit, bounds, default, section, reload
 * behaviour and help text (config/keys.c).
 *
 * It is the one list of keys: the loader accepts exactly its rows (an
 * unknown key is refused with the allowed ones, read from here), --limit
 * takes the rows that have a --limit name, validation range-checks the
 * limit rows, denials name a limit by its row's path, and `toolgate check`
 * shows the rows marked TG_KF_CHECK. Adding a key is adding a row (and,
 * for a key with its own rules, a loader in the section's cfg_*.c).
 *
 * Paths: components joined by '.', "[]" after an array's name for its
 * elements ("router.listen[].unix"), "*" for a name the operator chooses
 * ("agents[].tools.*.burst"). A manifest's "execution_limits" and
 * "resources" are the rows of agents[] marked TG_KF_MANIFEST.
 */
#ifndef TG_CONFIG_KEYS_H
#define TG_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* What a key holds. The first seven are values with a unit (units.h);
 * their order is the loader's. */
typedef enum tg_ktype {
    TG_KT_BYTES = 0,  /* a size: "4Mi" (bytes) */
    TG_KT_DURATION,   /* "30s" (milliseconds) */
    TG_KT_RATE,       /* "100/minute" (calls per period) */
    TG_KT_COUNT,      /* 5 or "5" */
    TG_KT_MILLICORES, /* "500m", "2" (CPU) */
    TG_KT_BANDWIDTH,  /* "10Mbps" (bits per second) */
    TG_KT_NETWORK,    /* "none" | "loopback" | "full" */
    TG_KT_ENUM,       /* one of the row's <choices> */
    TG_KT_BOOL,       /* true | false */
    TG_KT_STRING,     /* text: a name, path, URL or address (the help says which) */
    TG_KT_ID,         /* a user or group: a name or a number */
    TG_KT_LIST,       /* an array of strings */
    TG_KT_MAP,        /* an object whose keys the operator names */
    TG_KT_OBJECT,     /* a section: its keys are the rows below it */
    TG_KT_ARRAY,      /* an array of objects: their keys are the rows below "<path>[]" */
} tg_ktype_t;

/* The file of config/ that owns a key's schema. */
typedef enum tg_ksection {
    TG_KS_ROUTER = 0,  /* cfg_router.c: router.*, callers[] */
    TG_KS_AGENT,       /* cfg_agent.c: agents[] and a manifest's limits */
    TG_KS_AUDIT,       /* cfg_audit.c */
    TG_KS_STORE,       /* cfg_store.c */
    TG_KS_CONTAINMENT, /* cfg_containment.c */
} tg_ksection_t;

/* What a SIGHUP reload does with a change of the key (front/serve.c). */
typedef enum tg_kreload {
    TG_RELOAD_LIVE = 0, /* applied in place: state of unchanged limits is kept */
    TG_RELOAD_AGENT,    /* the agent's instances are replaced (sessions drained) */
    TG_RELOAD_RESTART,  /* refused: bound to open sockets or files, needs a restart */
} tg_kreload_t;

/* Row flags. */
enum {
    TG_KF_LIMIT = 1u << 0,        /* a limit: range-checked by validate, named in denials */
    TG_KF_CHECK = 1u << 1,        /* a row of `toolgate check`'s limit tables */
    TG_KF_MANIFEST = 1u << 2,     /* a manifest may ask for it */
    TG_KF_OPTIONAL = 1u << 3,     /* unset while its source is the default (left to the agent) */
    TG_KF_ADVISORY = 1u << 4,     /* 0 = not limited; no backend enforces it but network none */
    TG_KF_FOLLOWS_RATE = 1u << 5, /* 0 (unset) reads as the rate's count */
    TG_KF_LIMIT_OBJ = 1u << 6,    /* written as {"limit": V, "request": V} */
    TG_KF_BARE_INT = 1u << 7,     /* a size that may be a JSON integer (bytes) */
    TG_KF_EMPTY_OK = 1u << 8,     /* "" goes to the row's check, not refused as empty */
    TG_KF_SECRET = 1u << 9,       /* may hold a password: never echoed, wiped when freed */
    TG_KF_ZERO_DEF = 1u << 10,    /* 0 in the model stands for the default */
    TG_KF_CLI_VALID = 1u << 11,   /* --limit refuses a bad choice as "is not valid" */
    /* audit.sinks[] keys, by the sink kinds that take them */
    TG_KF_SINK_FILE = 1u << 12,
    TG_KF_SINK_STDERR = 1u << 13,
    TG_KF_SINK_REDIS = 1u << 14,
};

/* Where a key's value lives (for the generic loader and for readers). */
typedef enum tg_kobj {
    TG_KO_NONE = 0, /* checked and not kept (a resource "request") */
    TG_KO_CFG,      /* the tg_config_t */
    TG_KO_AGENT,    /* the tg_agent_cfg_t */
    TG_KO_LIM,      /* the tg_exec_limits_t of the scope (agent, tool, caller) */
    TG_KO_RES,      /* the agent's tg_resources_t */
    TG_KO_ITEM,     /* the array element being read (sink, listener, caller) */
} tg_kobj_t;

struct tg_cfg_ctx; /* config/cfg_impl.h */
struct json_t;     /* jansson */
struct tg_cfg_key;

/* A key's own loader: reads JSON value <v> for row <k>. 0 or -1 with the
 * error set at the key's position. */
typedef int (*tg_kload_fn)(struct tg_cfg_ctx *c, struct json_t *v, const struct tg_cfg_key *k);
/* A string key's check: 0, or -1 with the message (after "path: ") in
 * <msg>. <s> is <len> bytes, NUL-terminated. */
typedef int (*tg_kcheck_fn)(const char *s, size_t len, char *msg, size_t cap);

typedef struct tg_cfg_key {
    const char *path;
    tg_ktype_t type;
    tg_ksection_t section;
    tg_kreload_t reload;
    unsigned flags;
    uint64_t min, max;          /* types with a unit: bounds (a rate's: of its count) */
    const char *def;            /* the default as a config writes it; "" none or computed */
    const char *const *choices; /* TG_KT_ENUM: NULL-terminated, in the model enum's order */
    const char *noun;           /* TG_KT_ENUM: "a dialect", for messages */
    const char *help;           /* one or two sentences for the operator */
    uint8_t cli;                /* --limit: the key's place in its list, from 1; 0: none */
    const char *cli_name;       /* --limit KEY when not the path's last name */
    tg_kobj_t obj;              /* where the value lives: offsets into that object */
    size_t off, size;           /* the value's field */
    size_t src_off;             /* its tg_src_t field + 1; 0: none */
    tg_kload_fn load;           /* NULL: by type (value, enum, bool, string, section) */
    tg_kcheck_fn check;         /* TG_KT_STRING: what a value must be; NULL: any */
} tg_cfg_key_t;

/* A value with a unit as the model holds it, and where it came from. */
typedef struct tg_cfg_val {
    uint64_t u;     /* bytes, ms, counts, millicores, bit/s, a network mode */
    tg_rate_t rate; /* TG_KT_RATE */
    tg_src_t src;
} tg_cfg_val_t;

/* The objects a row's value may live in; a NULL one is not read. */
typedef struct tg_cfg_at {
    const tg_config_t *cfg;
    const tg_agent_cfg_t *agent;
    const tg_exec_limits_t *lim;
    const tg_resources_t *res;
    const void *item;
} tg_cfg_at_t;

/* The table, in document order: a section's keys in the order an unknown
 * key's message lists them. */
extern const tg_cfg_key_t tg_cfg_keys[];
extern const size_t tg_cfg_nkeys;

/* The row with path <path>, or NULL. */
const tg_cfg_key_t *tg_cfg_key_find(const char *path);

/* The row for member <key> (<len> bytes) of the object at <parent> ("" for
 * the top level) whose flags hold all of <mask>, or NULL. */
const tg_cfg_key_t *tg_cfg_key_child(const char *parent, const char *key, size_t len,
                                     unsigned mask);

/* Whether <k> is a direct member of the object at <parent>. */
bool tg_cfg_key_is_child(const tg_cfg_key_t *k, const char *parent);

/* Whether <k> lies below <parent> at any depth. */
bool tg_cfg_key_under(const tg_cfg_key_t *k, const char *parent);

/* The key's name: the last component of its path ("burst"). */
const char *tg_cfg_key_name(const tg_cfg_key_t *k);

/* The --limit KEY of <k> (cli_name, else its name), or NULL. */
const char *tg_cfg_key_cli(const tg_cfg_key_t *k);

/* "size", "duration", "rate", ...: the type as the help names it. */
const char *tg_ktype_name(tg_ktype_t t);

/* Whether a row's value has a unit (TG_KT_BYTES .. TG_KT_NETWORK). */
bool tg_ktype_has_unit(tg_ktype_t t);

/* The value of row <k> (a type with a unit, a choice or a boolean; obj
 * not NONE) in <at>, as the model holds it (a TG_KF_FOLLOWS_RATE value
 * left at 0 is 0). */
tg_cfg_val_t tg_cfg_key_get(const tg_cfg_key_t *k, const tg_cfg_at_t *at);

/* The string of row <k> (TG_KT_STRING held as a char *; obj not NONE) in
 * <at>, or NULL when unset. Borrowed from the model. */
const char *tg_cfg_key_str(const tg_cfg_key_t *k, const tg_cfg_at_t *at);

/* Whether row <k> is set in <at>: always, but for TG_KF_OPTIONAL and
 * TG_KF_FOLLOWS_RATE rows (a source other than the default) and
 * TG_KF_ADVISORY rows (not 0). */
bool tg_cfg_key_is_set(const tg_cfg_key_t *k, const tg_cfg_at_t *at);

/* <v> as a config writes it: "4Mi", "30s", "100/minute", "500m", "10Mbps",
 * "none", "5". */
void tg_cfg_key_fmt(const tg_cfg_key_t *k, const tg_cfg_val_t *v, char *buf, size_t cap);

#endif
