/* expose: what a caller sees when several agents sit behind one front
 * (issue 22): the names their tools and prompts are exposed under, the
 * table that routes an exposed name back to its agent, the table of which
 * agent listed which resource URI or template, and the opaque cursors that
 * page a merged list across agents.
 *
 * Pure (no libuv, no I/O, no clock, no randomness): the caller passes
 * agents as their index in config order and draws the cursor key itself
 * (getrandom), so everything here is unit-tested and fuzzed alone.
 *
 * Names. The tool `read_file` of agent `fs` is exposed as `fs__read_file`:
 * the prefix (the agent id, or its tool_prefix), the separator `__`, the
 * original name. An empty prefix exposes the name as it is, without the
 * separator. A prefix never holds `__` nor ends in `_`, so the first `__`
 * of an exposed name ends its prefix. LLM APIs accept at most 64 bytes of
 * [A-Za-z0-9_.-]; a name outside that is rewritten deterministically (see
 * tg_expose_name), so the same original gets the same exposed name in
 * every process and after every restart.
 *
 * Collisions. Two agents exposing the same name (or listing the same URI)
 * are neither silent nor fatal: the agent first in config order (lowest
 * index) keeps it and the other's entry is hidden, whatever order their
 * lists arrived in. Hidden entries are kept, so when the owner leaves
 * (tg_expose_remove_agent: its instance is gone) the next agent's entry
 * owns the name again; the adds say who owns or who lost a name, so the
 * caller can log, audit and count each collision.
 *
 * Order. A table iterates in config order of the agents, and within one
 * agent in the order its entries were added (its own list's order), so a
 * merged list is the same whichever agent answered first.
 *
 * Bounds: entries per table (the caller's max, at most a fixed ceiling),
 * bytes per name, original, URI, template and cursor. A table's arrays
 * grow by doubling up to its max, each entry's strings are one allocation
 * of bounded size, and nothing else allocates (cursors live on the stack).
 */
#ifndef TG_ROUTER_CODEC_EXPOSE_H
#define TG_ROUTER_CODEC_EXPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define TG_EXPOSE_SEP     "__" /* between prefix and original name */
#define TG_EXPOSE_SEP_LEN 2
/* fixed internal bound: bytes of an exposed name (what LLM APIs accept) */
#define TG_EXPOSE_NAME_MAX 64
/* fixed internal bound: bytes of a prefix, so a shortened name keeps it whole */
#define TG_EXPOSE_PREFIX_MAX  32
#define TG_EXPOSE_HASH_HEX    8    /* hex digits of the hash a rewritten name ends with */
#define TG_EXPOSE_ORIG_MAX    256  /* fixed internal bound: bytes of an original name */
#define TG_EXPOSE_ENTRIES_MAX 4096 /* fixed internal bound: entries of one name table */
#define TG_EXPOSE_URI_MAX     2048 /* fixed internal bound: bytes of a resource URI */
#define TG_EXPOSE_URIS_MAX    4096 /* fixed internal bound: URIs of one URI table */
/* fixed internal bound: bytes of a URI template (a match costs template x URI bytes) */
#define TG_EXPOSE_TEMPLATE_MAX  512
#define TG_EXPOSE_TEMPLATES_MAX 256 /* fixed internal bound: templates of one URI table */

/* What an add did. Negative values are errnos. */
enum {
    TG_EXPOSE_OWNED = 0,  /* the name (URI) is this agent's */
    TG_EXPOSE_HIDDEN = 1, /* an agent earlier in config order (*other) owns it: hidden */
    TG_EXPOSE_TOOK = 2,   /* this agent comes earlier: *other, the owner so far, is hidden now */
};

/* One entry of a table: owned by the table, valid until the next call
 * that takes the table non-const. */
typedef struct tg_expose_ent {
    uint32_t agent; /* index in config order */
    uint32_t hash;  /* of key */
    uint16_t key_len, val_len;
    bool hidden;    /* an earlier entry (by agent, then arrival) holds the same key */
    bool rewritten; /* name table: the exposed name is not prefix__original verbatim */
    char *key;      /* NUL-terminated: the exposed name, URI or template */
    char *val;      /* NUL-terminated, in the key's allocation: the original name ("" for URIs) */
} tg_expose_ent_t;

/* The table both the name and URI tables are made of: entries sorted by
 * agent then arrival, and an open-addressing index (no tombstones: a
 * removal rebuilds it) of the entries that own their key. */
typedef struct tg_expose_tab {
    tg_expose_ent_t *ents; /* n used of ents_cap, ents_cap <= max */
    size_t n, ents_cap;
    uint32_t *slots; /* entry index + 1, 0 empty; a power of two, at most half full */
    size_t cap;
    size_t max;     /* entries kept at most, hidden ones included */
    size_t hidden;  /* entries with hidden set */
    size_t key_max; /* bytes of a key */
    size_t val_max; /* bytes of a value */
    uint32_t mut;   /* counts changes (adds, removals): a cached lookup holds while it stays */
} tg_expose_tab_t;

/* ---- names ---------------------------------------------------------------- */

/* Build in <out> the exposed name of original <name> (<nlen> bytes, any
 * bytes) under <prefix> (<plen> bytes; 0: none): prefix "__" name, or name
 * alone. When that is over TG_EXPOSE_NAME_MAX bytes or holds a byte
 * outside [A-Za-z0-9_.-], it is rewritten: each such byte becomes '_', the
 * result is cut at TG_EXPOSE_NAME_MAX - 1 - TG_EXPOSE_HASH_HEX bytes, then
 * '_' and TG_EXPOSE_HASH_HEX lowercase hex digits of a hash of the whole
 * unrewritten prefix "__" name are appended. The hash keeps originals that
 * escape or cut alike apart (with high probability); a clash left is a
 * collision the table reports. <out> is NUL-terminated, <*out_len> its
 * length (<= TG_EXPOSE_NAME_MAX). Returns 0 (verbatim), 1 (rewritten),
 * or -EINVAL (<nlen> is 0). */
int tg_expose_name(const char *prefix, size_t plen, const char *name, size_t nlen,
                   char out[TG_EXPOSE_NAME_MAX + 1], size_t *out_len);

/* Whether <p> (<len> bytes) may be a prefix (an agent id fronted with
 * others, or a tool_prefix): at most TG_EXPOSE_PREFIX_MAX bytes of
 * [A-Za-z0-9_.-], no "__", not ending in '_'. "" is accepted (no prefix).
 * 0, or -EINVAL with what is wrong written to <msg> (<cap> bytes, NUL-
 * terminated; untouched on success) for config validation to quote after
 * the key's path. */
int tg_expose_prefix_check(const char *p, size_t len, char *msg, size_t cap);

/* The name table: exposed name -> (agent, original). Zeroed or after
 * tg_expose_free it holds nothing; the owner frees it with tg_expose_free. */
typedef struct tg_expose {
    tg_expose_tab_t tab;
} tg_expose_t;

/* What tg_expose_add exposed. */
typedef struct tg_expose_added {
    char name[TG_EXPOSE_NAME_MAX + 1]; /* the exposed name */
    size_t len;
    bool rewritten; /* see tg_expose_name */
    uint32_t other; /* HIDDEN: the agent owning the name; TOOK: the one that lost it */
} tg_expose_added_t;

/* An empty table of at most <max> entries (no allocation yet). 0, or
 * -EINVAL when <max> is 0 or over TG_EXPOSE_ENTRIES_MAX. */
int tg_expose_init(tg_expose_t *t, size_t max);
/* Drop every entry and the memory. <t> may be zeroed, or freed already. */
void tg_expose_free(tg_expose_t *t);

/* Expose original <orig> (<olen> bytes) of <agent> under <prefix> (<plen>
 * bytes) and fill <out> (also on HIDDEN and TOOK). The same agent adding
 * the same original again changes nothing and answers as the first time
 * would now. Returns TG_EXPOSE_OWNED, TG_EXPOSE_HIDDEN or TG_EXPOSE_TOOK
 * (see the enum; an agent's own second original that maps to the name of
 * its first is HIDDEN with *other its own index); -EINVAL (<agent> not
 * below TG_CFG_AGENTS_MAX, <orig> empty or over TG_EXPOSE_ORIG_MAX bytes,
 * <prefix> refused by tg_expose_prefix_check); -ENOSPC (<max> entries
 * held: nothing changed); -ENOMEM. */
int tg_expose_add(tg_expose_t *t, uint32_t agent, const char *prefix, size_t plen, const char *orig,
                  size_t olen, tg_expose_added_t *out);

/* The entry owning exposed name <name> (<len> bytes): its agent and
 * original. NULL when no agent exposes it. O(1) on average. */
const tg_expose_ent_t *tg_expose_lookup(const tg_expose_t *t, const char *name, size_t len);

/* Forget every entry of <agent> (its instance is gone); names it owned
 * pass to the next agent holding them. Returns how many entries went. */
size_t tg_expose_remove_agent(tg_expose_t *t, uint32_t agent);

/* Entries in config order of their agents, then arrival; hidden ones
 * included (with hidden set) so `check` can show them. */
static inline size_t tg_expose_count(const tg_expose_t *t)
{
    return t->tab.n;
}
static inline const tg_expose_ent_t *tg_expose_at(const tg_expose_t *t, size_t i)
{
    return i < t->tab.n ? &t->tab.ents[i] : NULL;
}

/* ---- resource URIs --------------------------------------------------------- */

/* Which agent listed which URI (resources/list) or URI template
 * (resources/templates/list), not rewritten. Zeroed or after
 * tg_expose_uri_free it holds nothing. */
typedef struct tg_expose_uri {
    tg_expose_tab_t exact; /* key: a URI */
    tg_expose_tab_t tpl;   /* key: a template */
} tg_expose_uri_t;

/* An empty table of at most <max_uris> URIs and <max_templates> templates.
 * 0, or -EINVAL when either is 0 or over its ceiling. */
int tg_expose_uri_init(tg_expose_uri_t *u, size_t max_uris, size_t max_templates);
void tg_expose_uri_free(tg_expose_uri_t *u);

/* Record that <agent> listed <uri> (<len> bytes), a template when
 * <is_template>. Same returns as tg_expose_add, with *<other> (may be
 * NULL) set on HIDDEN and TOOK; a template is compared as a string (two
 * different templates that match the same URIs both stay: the match takes
 * the first in config order). -EINVAL: empty, over TG_EXPOSE_URI_MAX (or
 * TG_EXPOSE_TEMPLATE_MAX) bytes, or <agent> out of range; -EOPNOTSUPP: a
 * template other than RFC 6570 level 1 (an operator, a list, a stray or
 * unclosed brace), which toolgate cannot route: not kept. */
int tg_expose_uri_add(tg_expose_uri_t *u, uint32_t agent, const char *uri, size_t len,
                      bool is_template, uint32_t *other);

/* The agent owning exactly the URI or template string <s> (<len> bytes),
 * or -ENOENT. */
int tg_expose_uri_owner(const tg_expose_uri_t *u, const char *s, size_t len, bool is_template);

/* The agent a read or subscription of concrete URI <uri> (<len> bytes)
 * goes to: the owner of that exact URI when one listed it; else the
 * template first in config order (then arrival) that matches it, where
 * `{var}` stands for one or more bytes other than '/', '?' and '#' (a
 * level-1 expansion percent-encodes those, and they end URI components);
 * else -ENOENT. */
int tg_expose_uri_route(const tg_expose_uri_t *u, const char *uri, size_t len);

/* Whether concrete <uri> matches level-1 <tpl> (as tg_expose_uri_route).
 * False for a template tg_expose_uri_add would refuse. */
bool tg_expose_uri_match(const char *tpl, size_t tlen, const char *uri, size_t ulen);

/* Forget every URI and template of <agent>. Returns how many went. */
size_t tg_expose_uri_remove_agent(tg_expose_uri_t *u, uint32_t agent);

/* ---- cursors ---------------------------------------------------------------- */

/* A cursor of a merged list: which agent's page comes next and the
 * agent's own cursor for it, bound to which list and a generation the
 * caller bumps when the merged list changes. The caller compares <list>
 * and <gen> with its own after decoding. Sealed with a MAC under a key
 * drawn once per process, so a caller can neither pick another agent
 * (one a policy hides) nor hand an agent a cursor it never issued. Not
 * encrypted: the agent's cursor is what the client would see without
 * toolgate. */
#define TG_EXPOSE_KEY_LEN 16 /* SipHash-2-4's key */
/* fixed internal bound: bytes of an agent's own cursor carried inside ours */
#define TG_EXPOSE_CURSOR_INNER_MAX 1024
/* layout: version, list, agent (2), gen (4), flags, inner length (2) */
#define TG_EXPOSE_CURSOR_HDR_LEN 11
#define TG_EXPOSE_CURSOR_TAG_LEN 8 /* SipHash-2-4 */
/* fixed internal bound: bytes of a cursor before base64url */
#define TG_EXPOSE_CURSOR_RAW_MAX                                                                   \
    (TG_EXPOSE_CURSOR_HDR_LEN + TG_EXPOSE_CURSOR_INNER_MAX + TG_EXPOSE_CURSOR_TAG_LEN)
/* fixed internal bound: characters of an encoded cursor (base64url, unpadded) */
#define TG_EXPOSE_CURSOR_MAX ((TG_EXPOSE_CURSOR_RAW_MAX * 4 + 2) / 3)

typedef struct tg_expose_cursor {
    uint8_t list;   /* the caller's number for the list (tools, prompts, ...) */
    uint32_t agent; /* index in config order, below TG_CFG_AGENTS_MAX */
    uint32_t gen;   /* the caller's generation of the merged list */
    bool has_inner; /* false: the agent's list from its start */
    size_t inner_len;
    char inner[TG_EXPOSE_CURSOR_INNER_MAX]; /* the agent's nextCursor, any bytes */
} tg_expose_cursor_t;

/* Encode <c> under <key> into <out> (<cap> bytes, NUL-terminated), its
 * length in <*out_len>: at most TG_EXPOSE_CURSOR_MAX characters of
 * [A-Za-z0-9_-]. 0; -EINVAL (<agent> out of range, <inner_len> over
 * TG_EXPOSE_CURSOR_INNER_MAX, or inner bytes without has_inner);
 * -ENOBUFS (<cap> too small: TG_EXPOSE_CURSOR_MAX + 1 always fits). */
int tg_expose_cursor_encode(const uint8_t key[TG_EXPOSE_KEY_LEN], const tg_expose_cursor_t *c,
                            char *out, size_t cap, size_t *out_len);

/* Decode cursor <s> (<len> bytes, from a caller) under <key> into <c>.
 * 0 only for a cursor tg_expose_cursor_encode made under <key>, exactly;
 * else -EMSGSIZE (longer than TG_EXPOSE_CURSOR_MAX), -EINVAL (not
 * canonical base64url, too short, a layout this version did not write),
 * -EBADMSG (the tag does not verify: forged, altered, cut, or sealed
 * under another key). Every refusal is a -32602 to the caller; <c> is
 * meaningful only on 0. */
int tg_expose_cursor_decode(const uint8_t key[TG_EXPOSE_KEY_LEN], const char *s, size_t len,
                            tg_expose_cursor_t *c);

/* SipHash-2-4 (Aumasson and Bernstein) of <m> (<n> bytes) under <key>:
 * the cursors' MAC, exposed for its reference vectors. */
uint64_t tg_expose_siphash(const uint8_t key[TG_EXPOSE_KEY_LEN], const void *m, size_t n);

#endif
