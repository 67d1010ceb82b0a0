/* Exposed names, the name and URI tables, merged-list cursors: see expose.h. */
#include "router/codec/expose.h"
#include "router/codec/b64url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAB_FIRST_ENTS  8  /* fixed internal bound: entries of a table's first array */
#define TAB_FIRST_SLOTS 16 /* fixed internal bound: index slots of a table's first index */
/* Bytes of a rewritten name kept before '_' and the hash. */
#define NAME_CUT       (TG_EXPOSE_NAME_MAX - 1 - TG_EXPOSE_HASH_HEX)
#define CURSOR_VERSION 1 /* the first byte of every cursor this code writes */

/* A prefix must survive the cut whole, so the first "__" still ends it. */
_Static_assert(TG_EXPOSE_PREFIX_MAX + TG_EXPOSE_SEP_LEN < NAME_CUT, "prefix longer than the cut");
/* config/ checks prefixes against the same bounds. */
_Static_assert(TG_EXPOSE_PREFIX_MAX == TG_CFG_PREFIX_MAX, "prefix bound differs from config's");
_Static_assert(TG_EXPOSE_NAME_MAX == TG_CFG_EXPOSED_NAME_MAX, "name bound differs from config's");
/* Agent indexes travel in 16 bits inside a cursor. */
_Static_assert(TG_CFG_AGENTS_MAX <= 65536, "agent index does not fit a cursor");
_Static_assert(TG_EXPOSE_CURSOR_INNER_MAX <= 65535, "inner length does not fit a cursor");
_Static_assert(TG_EXPOSE_URI_MAX <= UINT16_MAX && TG_EXPOSE_ORIG_MAX <= UINT16_MAX,
               "entry lengths are 16 bits");

/* ---- names ----------------------------------------------------------------- */

/* What LLM APIs accept in a tool name. Plain ASCII ranges: no locale. */
static bool name_byte_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

int tg_expose_name(const char *prefix, size_t plen, const char *name, size_t nlen,
                   char out[TG_EXPOSE_NAME_MAX + 1], size_t *out_len)
{
    static const char hex[] = "0123456789abcdef";
    const char *part[3] = {prefix, TG_EXPOSE_SEP, name};
    size_t part_len[3] = {plen, plen > 0 ? TG_EXPOSE_SEP_LEN : 0, nlen};
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits */
    size_t total = 0;
    bool bad = false;

    if (nlen == 0)
        return -EINVAL;
    /* One pass over prefix "__" name, never copied whole: the hash sees
     * every original byte, <out> the first TG_EXPOSE_NAME_MAX escaped. */
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < part_len[k]; i++, total++) {
            unsigned char c = (unsigned char)part[k][i];
            h = (h ^ c) * 1099511628211ull;
            if (!name_byte_ok(c)) {
                bad = true;
                c = '_';
            }
            if (total < TG_EXPOSE_NAME_MAX)
                out[total] = (char)c;
        }
    if (!bad && total <= TG_EXPOSE_NAME_MAX) {
        out[total] = '\0';
        *out_len = total;
        return 0;
    }
    /* Rewritten: the hash goes on even when only escaping was needed, so
     * "a:b" and "a;b" (both "a_b") stay apart, and apart from a verbatim
     * "a_b". Both halves of the hash fold into the 32 bits shown. */
    size_t keep = total < NAME_CUT ? total : NAME_CUT;
    uint32_t f = (uint32_t)(h ^ (h >> 32));
    out[keep] = '_';
    for (int d = 0; d < TG_EXPOSE_HASH_HEX; d++)
        out[keep + 1 + (size_t)d] = hex[(f >> (4 * (TG_EXPOSE_HASH_HEX - 1 - d))) & 15];
    *out_len = keep + 1 + TG_EXPOSE_HASH_HEX;
    out[*out_len] = '\0';
    return 1;
}

/* The rule lives in config/ (which may not include router/), so that
 * load refuses a bad tool_prefix with the same words. */
int tg_expose_prefix_check(const char *p, size_t len, char *msg, size_t cap)
{
    return tg_cfg_prefix_check(p, len, msg, cap);
}

/* ---- the table under both ----------------------------------------------------- */

static uint32_t hash32(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a, as router/agent/toolreg.c */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int tab_init(tg_expose_tab_t *t, size_t max, size_t ceil, size_t key_max, size_t val_max)
{
    memset(t, 0, sizeof(*t)); /* mut 0: a cached lookup made before is dropped by its owner */
    if (max == 0 || max > ceil)
        return -EINVAL;
    t->max = max;
    t->key_max = key_max;
    t->val_max = val_max;
    return 0;
}

/* Frees the memory; the bounds stay, so the table is usable again. */
static void tab_free(tg_expose_tab_t *t)
{
    t->mut++;
    for (size_t i = 0; i < t->n; i++)
        free(t->ents[i].key); /* the value shares its allocation */
    free(t->ents);
    free(t->slots);
    t->ents = NULL;
    t->slots = NULL;
    t->n = t->ents_cap = t->cap = t->hidden = 0;
}

/* The slot of the entry owning <key> (hash <h>), or the empty slot where
 * it would go. The index is at most half full, so one is found. */
static uint32_t *tab_slot(const tg_expose_tab_t *t, uint32_t h, const char *key, size_t len)
{
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t s = t->slots[i];
        if (s == 0)
            return &t->slots[i];
        const tg_expose_ent_t *e = &t->ents[s - 1];
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
            return &t->slots[i];
    }
}

static const tg_expose_ent_t *tab_owner(const tg_expose_tab_t *t, const char *key, size_t len)
{
    if (t->n == 0 || len == 0 || len > t->key_max)
        return NULL;
    uint32_t s = *tab_slot(t, hash32(key, len), key, len);
    return s != 0 ? &t->ents[s - 1] : NULL;
}

/* Index every entry afresh, in order: the first entry of each key (the
 * lowest agent, then the earliest) owns it, the others are hidden. */
static void tab_reindex(tg_expose_tab_t *t)
{
    memset(t->slots, 0, t->cap * sizeof(*t->slots));
    t->hidden = 0;
    for (size_t i = 0; i < t->n; i++) {
        tg_expose_ent_t *e = &t->ents[i];
        uint32_t *s = tab_slot(t, e->hash, e->key, e->key_len);
        e->hidden = *s != 0;
        if (e->hidden)
            t->hidden++;
        else
            *s = (uint32_t)i + 1;
    }
}

/* Room for one more entry (n < max): the array and the index double. */
static int tab_reserve(tg_expose_tab_t *t)
{
    if (t->n == t->ents_cap) {
        size_t c = t->ents_cap == 0 ? TAB_FIRST_ENTS : 2 * t->ents_cap;
        if (c > t->max)
            c = t->max;
        tg_expose_ent_t *e = realloc(t->ents, c * sizeof(*e));
        if (e == NULL)
            return -ENOMEM;
        t->ents = e;
        t->ents_cap = c;
    }
    if (2 * (t->n + 1) > t->cap) {
        size_t c = t->cap == 0 ? TAB_FIRST_SLOTS : 2 * t->cap;
        uint32_t *s = calloc(c, sizeof(*s));
        if (s == NULL)
            return -ENOMEM;
        free(t->slots);
        t->slots = s;
        t->cap = c;
        tab_reindex(t);
    }
    return 0;
}

/* The entry of <agent> with key <owner>'s and value <val>, when it was
 * added already: the owner, or one of the hidden entries. Those are not
 * indexed; the scan runs only when collisions exist, over <max> at most. */
static const tg_expose_ent_t *tab_same(const tg_expose_tab_t *t, const tg_expose_ent_t *owner,
                                       uint32_t agent, const char *val, size_t vlen)
{
    if (owner == NULL)
        return NULL;
    for (size_t i = owner - t->ents; i < t->n && t->ents[i].agent <= agent; i++) {
        const tg_expose_ent_t *e = &t->ents[i];
        if (e->agent == agent && e->key_len == owner->key_len && e->val_len == vlen &&
            memcmp(e->key, owner->key, e->key_len) == 0 && memcmp(e->val, val, vlen) == 0)
            return e;
        if (t->hidden == 0)
            break;
    }
    return NULL;
}

/* Where an entry of <agent> goes: after every entry of an agent <= it. */
static size_t tab_upper(const tg_expose_tab_t *t, uint32_t agent)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->ents[mid].agent <= agent)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Put a copy of (<key>, <val>) for <agent> at its place in the order and
 * say who owns the key now. Appending (the usual case: lists arrive in
 * config order) keeps the index; an insertion before others rebuilds it. */
static int tab_insert(tg_expose_tab_t *t, uint32_t agent, uint32_t h, const char *key, size_t klen,
                      const char *val, size_t vlen, bool rewritten, uint32_t *other)
{
    char *mem = malloc(klen + vlen + 2);
    if (mem == NULL)
        return -ENOMEM;
    memcpy(mem, key, klen);
    mem[klen] = '\0';
    if (vlen > 0)
        memcpy(mem + klen + 1, val, vlen);
    mem[klen + 1 + vlen] = '\0';
    size_t at = tab_upper(t, agent);
    memmove(&t->ents[at + 1], &t->ents[at], (t->n - at) * sizeof(*t->ents));
    t->ents[at] = (tg_expose_ent_t){.agent = agent,
                                    .hash = h,
                                    .key_len = (uint16_t)klen,
                                    .val_len = (uint16_t)vlen,
                                    .rewritten = rewritten,
                                    .key = mem,
                                    .val = mem + klen + 1};
    t->n++;
    if (at + 1 < t->n) {
        tab_reindex(t);
    } else {
        uint32_t *s = tab_slot(t, h, mem, klen);
        if (*s != 0) {
            t->ents[at].hidden = true;
            t->hidden++;
        } else {
            *s = (uint32_t)at + 1;
        }
    }
    if (t->ents[at].hidden) {
        *other = tab_owner(t, mem, klen)->agent;
        return TG_EXPOSE_HIDDEN;
    }
    return TG_EXPOSE_OWNED;
}

/* Add (<agent>, <key>, <val>), lengths checked by the caller. Returns as
 * tg_expose_add; *<other> is set on HIDDEN and TOOK. */
static int tab_add(tg_expose_tab_t *t, uint32_t agent, const char *key, size_t klen,
                   const char *val, size_t vlen, bool rewritten, uint32_t *other)
{
    t->mut++;
    const tg_expose_ent_t *owner = tab_owner(t, key, klen);
    const tg_expose_ent_t *same = tab_same(t, owner, agent, val, vlen);
    if (same != NULL) {
        if (!same->hidden)
            return TG_EXPOSE_OWNED;
        *other = owner->agent;
        return TG_EXPOSE_HIDDEN;
    }
    bool had = owner != NULL;
    uint32_t was = had ? owner->agent : 0; /* <owner> dies with the array below */
    if (t->n >= t->max)
        return -ENOSPC;
    int rc = tab_reserve(t);
    if (rc < 0)
        return rc;
    rc = tab_insert(t, agent, hash32(key, klen), key, klen, val, vlen, rewritten, other);
    /* Sorted insertion puts this entry after any of an agent <= its own,
     * so owning a key someone held means it displaced a later agent. */
    if (rc == TG_EXPOSE_OWNED && had) {
        *other = was;
        return TG_EXPOSE_TOOK;
    }
    return rc;
}

static size_t tab_remove_agent(tg_expose_tab_t *t, uint32_t agent)
{
    t->mut++;
    size_t w = 0, gone = 0;
    for (size_t r = 0; r < t->n; r++) {
        if (t->ents[r].agent == agent) {
            free(t->ents[r].key);
            gone++;
        } else {
            t->ents[w++] = t->ents[r];
        }
    }
    t->n = w;
    if (gone > 0)
        tab_reindex(t); /* the names it owned pass to the next holders */
    return gone;
}

/* ---- the name table ------------------------------------------------------------ */

int tg_expose_init(tg_expose_t *t, size_t max)
{
    return tab_init(&t->tab, max, TG_EXPOSE_ENTRIES_MAX, TG_EXPOSE_NAME_MAX, TG_EXPOSE_ORIG_MAX);
}

void tg_expose_free(tg_expose_t *t)
{
    tab_free(&t->tab);
}

int tg_expose_add(tg_expose_t *t, uint32_t agent, const char *prefix, size_t plen, const char *orig,
                  size_t olen, tg_expose_added_t *out)
{
    if (agent >= TG_CFG_AGENTS_MAX || olen == 0 || olen > TG_EXPOSE_ORIG_MAX ||
        tg_expose_prefix_check(prefix, plen, NULL, 0) < 0)
        return -EINVAL;
    int rw = tg_expose_name(prefix, plen, orig, olen, out->name, &out->len);
    if (rw < 0)
        return rw;
    out->rewritten = rw == 1;
    out->other = agent;
    return tab_add(&t->tab, agent, out->name, out->len, orig, olen, out->rewritten, &out->other);
}

const tg_expose_ent_t *tg_expose_lookup(const tg_expose_t *t, const char *name, size_t len)
{
    return tab_owner(&t->tab, name, len);
}

size_t tg_expose_remove_agent(tg_expose_t *t, uint32_t agent)
{
    return tab_remove_agent(&t->tab, agent);
}

/* ---- URI templates ----------------------------------------------------------- */

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The index of the '}' ending the variable name that starts at <i>, or 0
 * when it is not one of level 1: varchars (ALPHA, DIGIT, '_', %XX) with
 * single dots between (RFC 6570 2.3). An operator ('+', '#', '.', '/',
 * ...) or a list (',') is a higher level: not routable here. */
static size_t var_end(const char *t, size_t i, size_t len)
{
    size_t start = i;
    bool after_char = false; /* a '.' may follow a varchar only, and none may end the name */
    while (i < len && t[i] != '}') {
        unsigned char c = (unsigned char)t[i];
        if (c == '%' && i + 2 < len && is_hex((unsigned char)t[i + 1]) &&
            is_hex((unsigned char)t[i + 2])) {
            i += 3;
            after_char = true;
        } else if (c == '.' && after_char) {
            i++;
            after_char = false;
        } else if (is_alnum(c) || c == '_') {
            i++;
            after_char = true;
        } else {
            return 0;
        }
    }
    return i < len && i > start && after_char ? i : 0;
}

static bool tpl_ok(const char *t, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '}')
            return false;
        if (t[i] == '{' && (i = var_end(t, i + 1, len)) == 0)
            return false;
    }
    return true;
}

/* A level-1 expansion percent-encodes these, and they end URI
 * components: a variable never spans one. */
static bool uri_delim(char c)
{
    return c == '/' || c == '?' || c == '#';
}

static size_t seg_end(const char *s, size_t i, size_t len)
{
    while (i < len && !uri_delim(s[i]))
        i++;
    return i;
}

/* URI segment <u> against template segment <t> (no delimiters in either):
 * each `{name}` takes one or more bytes, as "?*" of a glob. The classic
 * wildcard walk: on a mismatch only the last variable takes one more byte,
 * which is enough (as for '*'), so O(tlen x ulen), never exponential. */
static bool seg_match(const char *t, size_t tlen, const char *u, size_t ulen)
{
    size_t ti = 0, ui = 0, st = 0, su = 0;
    bool var = false;
    while (ui < ulen) {
        if (ti < tlen && t[ti] == '{') {
            ti = (size_t)((const char *)memchr(t + ti, '}', tlen - ti) - t) + 1;
            ui++;
            st = ti;
            su = ui;
            var = true;
        } else if (ti < tlen && t[ti] == u[ui]) {
            ti++;
            ui++;
        } else if (var) {
            ti = st;
            ui = ++su;
        } else {
            return false;
        }
    }
    return ti == tlen;
}

/* <tpl> already checked by tpl_ok: segment by segment, the delimiters
 * between them equal. */
static bool tpl_match(const char *tpl, size_t tlen, const char *uri, size_t ulen)
{
    size_t ti = 0, ui = 0;
    for (;;) {
        size_t te = seg_end(tpl, ti, tlen), ue = seg_end(uri, ui, ulen);
        if (!seg_match(tpl + ti, te - ti, uri + ui, ue - ui))
            return false;
        if (te == tlen || ue == ulen)
            return te == tlen && ue == ulen;
        if (tpl[te] != uri[ue])
            return false;
        ti = te + 1;
        ui = ue + 1;
    }
}

bool tg_expose_uri_match(const char *tpl, size_t tlen, const char *uri, size_t ulen)
{
    if (tlen == 0 || tlen > TG_EXPOSE_TEMPLATE_MAX || ulen > TG_EXPOSE_URI_MAX ||
        !tpl_ok(tpl, tlen))
        return false;
    return tpl_match(tpl, tlen, uri, ulen);
}

/* ---- the URI table -------------------------------------------------------------- */

int tg_expose_uri_init(tg_expose_uri_t *u, size_t max_uris, size_t max_templates)
{
    int a = tab_init(&u->exact, max_uris, TG_EXPOSE_URIS_MAX, TG_EXPOSE_URI_MAX, 0);
    int b = tab_init(&u->tpl, max_templates, TG_EXPOSE_TEMPLATES_MAX, TG_EXPOSE_TEMPLATE_MAX, 0);
    return a < 0 ? a : b;
}

void tg_expose_uri_free(tg_expose_uri_t *u)
{
    tab_free(&u->exact);
    tab_free(&u->tpl);
}

int tg_expose_uri_add(tg_expose_uri_t *u, uint32_t agent, const char *uri, size_t len,
                      bool is_template, uint32_t *other)
{
    tg_expose_tab_t *t = is_template ? &u->tpl : &u->exact;
    uint32_t dummy;
    if (agent >= TG_CFG_AGENTS_MAX || len == 0 || len > t->key_max)
        return -EINVAL;
    if (is_template && !tpl_ok(uri, len))
        return -EOPNOTSUPP;
    return tab_add(t, agent, uri, len, "", 0, false, other != NULL ? other : &dummy);
}

int tg_expose_uri_owner(const tg_expose_uri_t *u, const char *s, size_t len, bool is_template)
{
    const tg_expose_ent_t *e = tab_owner(is_template ? &u->tpl : &u->exact, s, len);
    return e != NULL ? (int)e->agent : -ENOENT;
}

int tg_expose_uri_route(const tg_expose_uri_t *u, const char *uri, size_t len)
{
    int a = tg_expose_uri_owner(u, uri, len, false);
    if (a >= 0 || len > TG_EXPOSE_URI_MAX)
        return a;
    /* The templates in config order, then arrival: the first match wins.
     * A hidden template is one an earlier agent listed too: it never
     * wins over that agent's. */
    for (size_t i = 0; i < u->tpl.n; i++) {
        const tg_expose_ent_t *e = &u->tpl.ents[i];
        if (!e->hidden && tpl_match(e->key, e->key_len, uri, len))
            return (int)e->agent;
    }
    return -ENOENT;
}

size_t tg_expose_uri_remove_agent(tg_expose_uri_t *u, uint32_t agent)
{
    return tab_remove_agent(&u->exact, agent) + tab_remove_agent(&u->tpl, agent);
}

/* ---- SipHash-2-4 ------------------------------------------------------------------ */

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotl(v[1], 13) ^ v[0];
    v[0] = rotl(v[0], 32);
    v[2] += v[3];
    v[3] = rotl(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = rotl(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = rotl(v[1], 17) ^ v[2];
    v[2] = rotl(v[2], 32);
}

uint64_t tg_expose_siphash(const uint8_t key[TG_EXPOSE_KEY_LEN], const void *msg, size_t n)
{
    const uint8_t *m = msg;
    uint64_t k0 = get_le64(key), k1 = get_le64(key + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t full = n & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t w = get_le64(m + i);
        v[3] ^= w;
        sip_round(v);
        sip_round(v);
        v[0] ^= w;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < (n & 7); i++)
        b |= (uint64_t)m[full + i] << (8 * i);
    v[3] ^= b;
    sip_round(v);
    sip_round(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* ---- cursors ------------------------------------------------------------------------ */


static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

int tg_expose_cursor_encode(const uint8_t key[TG_EXPOSE_KEY_LEN], const tg_expose_cursor_t *c,
                            char *out, size_t cap, size_t *out_len)
{
    uint8_t raw[TG_EXPOSE_CURSOR_RAW_MAX];
    if (c->agent >= TG_CFG_AGENTS_MAX || c->inner_len > TG_EXPOSE_CURSOR_INNER_MAX ||
        (!c->has_inner && c->inner_len > 0))
        return -EINVAL;
    size_t n = TG_EXPOSE_CURSOR_HDR_LEN + c->inner_len;
    if (cap < tg_b64url_len(n + TG_EXPOSE_CURSOR_TAG_LEN) + 1)
        return -ENOBUFS;
    raw[0] = CURSOR_VERSION;
    raw[1] = c->list;
    put_be(raw + 2, c->agent, 2);
    put_be(raw + 4, c->gen, 4);
    raw[8] = c->has_inner ? 1 : 0;
    put_be(raw + 9, c->inner_len, 2);
    if (c->inner_len > 0)
        memcpy(raw + TG_EXPOSE_CURSOR_HDR_LEN, c->inner, c->inner_len);
    put_be(raw + n, tg_expose_siphash(key, raw, n), TG_EXPOSE_CURSOR_TAG_LEN);
    n += TG_EXPOSE_CURSOR_TAG_LEN;
    tg_b64url_encode(raw, n, out);
    *out_len = tg_b64url_len(n);
    out[*out_len] = '\0';
    return 0;
}

int tg_expose_cursor_decode(const uint8_t key[TG_EXPOSE_KEY_LEN], const char *s, size_t len,
                            tg_expose_cursor_t *c)
{
    uint8_t raw[TG_EXPOSE_CURSOR_RAW_MAX], want[TG_EXPOSE_CURSOR_TAG_LEN];
    size_t n = 0;
    if (len > TG_EXPOSE_CURSOR_MAX)
        return -EMSGSIZE;
    if (tg_b64url_decode(s, len, raw, &n) < 0 || n < TG_EXPOSE_CURSOR_HDR_LEN + TG_EXPOSE_CURSOR_TAG_LEN)
        return -EINVAL;
    n -= TG_EXPOSE_CURSOR_TAG_LEN;
    /* The tag first: nothing a caller wrote is read before it verifies,
     * and compared in constant time so its bytes cannot be found one by
     * one from response times. */
    put_be(want, tg_expose_siphash(key, raw, n), TG_EXPOSE_CURSOR_TAG_LEN);
    uint8_t diff = 0;
    for (size_t i = 0; i < TG_EXPOSE_CURSOR_TAG_LEN; i++)
        diff |= (uint8_t)(want[i] ^ raw[n + i]);
    if (diff != 0)
        return -EBADMSG;
    size_t inner = (size_t)get_be(raw + 9, 2);
    uint32_t agent = (uint32_t)get_be(raw + 2, 2);
    if (raw[0] != CURSOR_VERSION || raw[8] > 1 || n != TG_EXPOSE_CURSOR_HDR_LEN + inner ||
        (raw[8] == 0 && inner > 0) || agent >= TG_CFG_AGENTS_MAX)
        return -EINVAL;
    c->list = raw[1];
    c->agent = agent;
    c->gen = (uint32_t)get_be(raw + 4, 4);
    c->has_inner = raw[8] == 1;
    c->inner_len = inner;
    if (inner > 0)
        memcpy(c->inner, raw + TG_EXPOSE_CURSOR_HDR_LEN, inner);
    return 0;
}
