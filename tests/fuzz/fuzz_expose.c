/* libFuzzer target: the exposed-name builder, the cursor decoder and the
 * tables of router/codec/expose.c, with their contracts asserted, not only
 * the absence of crashes.
 *
 * Byte 0 picks the mode (low two bits); the rest is the body.
 *   0 names:   body[0] is the prefix length; the prefix, then the name.
 *              The exposed name must be at most 64 bytes of [A-Za-z0-9_.-],
 *              the same twice, verbatim exactly when prefix "__" name is
 *              already valid, else the escaped head of it, '_' and 8 hex
 *              digits; a prefix tg_expose_prefix_check accepts (checked
 *              against a reference) survives whole, followed by "__".
 *   1 decode:  the body is a cursor from a caller: refused (it is not
 *              sealed under our key), or, should a tag ever verify, the
 *              exact spelling tg_expose_cursor_encode writes.
 *   2 cursors: the body gives the fields of a cursor: decode(encode(x))
 *              must be x, and the encoding with one bit flipped (position
 *              and bit from the body) or cut short must be refused.
 *   3 tables:  the body is a list of adds, removals and lookups on a small
 *              name table, with the table's invariants checked after each
 *              (order by agent, every owner found by lookup, every hidden
 *              entry behind an owner of an agent <= its own); then a
 *              template and a URI from the body, matched against a
 *              dynamic-programming reference.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/expose.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TABLE_MAX   32  /* entries of the fuzzed name table */
#define REF_TPL_MAX 64  /* template bytes the reference matcher takes */
#define REF_URI_MAX 128 /* URI bytes the reference matcher takes */

static const uint8_t key[TG_EXPOSE_KEY_LEN] = "fuzz_expose_key";

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_expose: %s (%zu bytes)\n", what, n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, "%02x", p[i]);
    fputc('\n', stderr);
    abort();
}

static int ok_byte(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* The prefix rules, written out again. */
static int ref_prefix_ok(const uint8_t *p, size_t n)
{
    if (n > TG_EXPOSE_PREFIX_MAX || (n > 0 && p[n - 1] == '_'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!ok_byte(p[i]) || (i + 1 < n && p[i] == '_' && p[i + 1] == '_'))
            return 0;
    return 1;
}

static void run_names(const uint8_t *b, size_t n)
{
    if (n == 0)
        return;
    size_t plen = b[0] < n - 1 ? b[0] : n - 1;
    const uint8_t *p = b + 1, *nm = b + 1 + plen;
    size_t nlen = n - 1 - plen;
    char out[TG_EXPOSE_NAME_MAX + 1], again[TG_EXPOSE_NAME_MAX + 1], msg[96];
    size_t len = 0, len2 = 0;

    int pc = tg_expose_prefix_check((const char *)p, plen, msg, sizeof msg);
    if ((pc == 0) != ref_prefix_ok(p, plen) || (pc != 0 && pc != -EINVAL))
        die("prefix check disagrees with the rules", b, n);
    if (pc != 0 && strnlen(msg, sizeof msg) == sizeof msg)
        die("prefix message not terminated", b, n);

    int rc = tg_expose_name((const char *)p, plen, (const char *)nm, nlen, out, &len);
    if (nlen == 0) {
        if (rc != -EINVAL)
            die("an empty name was exposed", b, n);
        return;
    }
    if ((rc != 0 && rc != 1) || len > TG_EXPOSE_NAME_MAX || out[len] != '\0')
        die("bad result or length", b, n);
    for (size_t i = 0; i < len; i++)
        if (!ok_byte((uint8_t)out[i]))
            die("a byte outside the set", b, n);
    if (tg_expose_name((const char *)p, plen, (const char *)nm, nlen, again, &len2) != rc ||
        len2 != len || memcmp(out, again, len) != 0)
        die("not deterministic", b, n);

    /* the reference: compose, then decide */
    size_t total = plen + (plen ? 2 : 0) + nlen, k = 0;
    uint8_t *comp = malloc(total);
    if (comp == NULL)
        abort();
    int valid = total <= TG_EXPOSE_NAME_MAX;
    for (size_t i = 0; i < plen; i++)
        comp[k++] = p[i];
    if (plen)
        comp[k++] = '_', comp[k++] = '_';
    for (size_t i = 0; i < nlen; i++)
        comp[k++] = nm[i];
    for (size_t i = 0; i < total; i++)
        valid &= ok_byte(comp[i]);
    if (valid) {
        if (rc != 0 || len != total || memcmp(out, comp, total) != 0)
            die("a valid name was not kept verbatim", b, n);
        free(comp);
        return;
    }
    size_t keep = total < TG_EXPOSE_NAME_MAX - 9 ? total : TG_EXPOSE_NAME_MAX - 9;
    if (rc != 1 || len != keep + 9 || out[keep] != '_')
        die("a rewritten name has the wrong shape", b, n);
    for (size_t i = 0; i < keep; i++)
        if (out[i] != (ok_byte(comp[i]) ? (char)comp[i] : '_'))
            die("the head is not the escaped original", b, n);
    free(comp);
    for (size_t i = keep + 1; i < len; i++)
        if (!((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f')))
            die("the hash is not lowercase hex", b, n);
    if (pc == 0 && plen > 0 && (memcmp(out, p, plen) != 0 || memcmp(out + plen, "__", 2) != 0))
        die("an accepted prefix did not survive", b, n);
}

static void run_decode(const uint8_t *b, size_t n)
{
    static tg_expose_cursor_t c;
    static char s[TG_EXPOSE_CURSOR_MAX + 1];
    int rc = tg_expose_cursor_decode(key, (const char *)b, n, &c);
    if (rc == 0) {
        size_t len;
        if (tg_expose_cursor_encode(key, &c, s, sizeof s, &len) != 0 || len != n ||
            memcmp(s, b, n) != 0)
            die("a cursor decoded that we would spell otherwise", b, n);
        return;
    }
    if (rc != -EINVAL && rc != -EBADMSG && rc != -EMSGSIZE)
        die("an undocumented refusal", b, n);
    if ((rc == -EMSGSIZE) != (n > TG_EXPOSE_CURSOR_MAX))
        die("-EMSGSIZE and the bound disagree", b, n);
}

static void run_cursor(const uint8_t *b, size_t n)
{
    static tg_expose_cursor_t c, d;
    static char s[TG_EXPOSE_CURSOR_MAX + 1];
    if (n < 10)
        return;
    memset(&c, 0, sizeof c);
    c.list = b[0];
    c.agent = (uint32_t)(b[1] << 8 | b[2]) % TG_CFG_AGENTS_MAX;
    c.gen = (uint32_t)b[3] << 24 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 8 | b[6];
    c.has_inner = b[7] & 1;
    size_t flip_at = b[8], flip_bit = b[9] & 7;
    c.inner_len = c.has_inner ? n - 10 : 0;
    if (c.inner_len > TG_EXPOSE_CURSOR_INNER_MAX)
        c.inner_len = TG_EXPOSE_CURSOR_INNER_MAX;
    memcpy(c.inner, b + 10, c.inner_len);

    size_t len;
    if (tg_expose_cursor_encode(key, &c, s, sizeof s, &len) != 0 || len > TG_EXPOSE_CURSOR_MAX ||
        s[len] != '\0')
        die("encode failed or overran", b, n);
    if (tg_expose_cursor_decode(key, s, len, &d) != 0 || d.list != c.list || d.agent != c.agent ||
        d.gen != c.gen || d.has_inner != c.has_inner || d.inner_len != c.inner_len ||
        memcmp(d.inner, c.inner, c.inner_len) != 0)
        die("decode(encode(x)) != x", b, n);
    if (tg_expose_cursor_decode(key, s, flip_at % len, &d) == 0)
        die("a cut cursor was accepted", b, n);
    s[flip_at % len] ^= (char)(1 << flip_bit);
    if (tg_expose_cursor_decode(key, s, len, &d) == 0)
        die("a flipped bit was accepted", b, n);
}

static void check_table(const tg_expose_t *t, const uint8_t *b, size_t n)
{
    size_t count = tg_expose_count(t);
    if (count > TABLE_MAX)
        die("more entries than max", b, n);
    for (size_t i = 0; i < count; i++) {
        const tg_expose_ent_t *e = tg_expose_at(t, i);
        const tg_expose_ent_t *o = tg_expose_lookup(t, e->key, e->key_len);
        if (i > 0 && tg_expose_at(t, i - 1)->agent > e->agent)
            die("entries out of config order", b, n);
        if (e->key_len > TG_EXPOSE_NAME_MAX || e->val_len > TG_EXPOSE_ORIG_MAX)
            die("an entry over its bounds", b, n);
        if (!e->hidden && o != e)
            die("an owner not found by lookup", b, n);
        if (e->hidden && (o == NULL || o >= e || o->agent > e->agent))
            die("a hidden entry without an earlier owner", b, n);
    }
}

/* The reference matcher: can template suffix <ti> match URI suffix <ui>? */
static int ref_match(const uint8_t *t, size_t tl, const uint8_t *u, size_t ul, size_t ti, size_t ui,
                     signed char memo[REF_TPL_MAX + 1][REF_URI_MAX + 1])
{
    if (memo[ti][ui] >= 0)
        return memo[ti][ui];
    int r = 0;
    if (ti == tl) {
        r = ui == ul;
    } else if (t[ti] == '{') {
        size_t end = ti;
        while (t[end] != '}')
            end++;
        for (size_t j = ui; j < ul && u[j] != '/' && u[j] != '?' && u[j] != '#' && !r; j++)
            r = ref_match(t, tl, u, ul, end + 1, j + 1, memo);
    } else {
        r = ui < ul && t[ti] == u[ui] && ref_match(t, tl, u, ul, ti + 1, ui + 1, memo);
    }
    memo[ti][ui] = (signed char)r;
    return r;
}

static void run_tables(const uint8_t *b, size_t n)
{
    static const char *const prefixes[] = {"", "a", "fs", "x.y"};
    tg_expose_t t;
    tg_expose_added_t out;
    size_t i = 0;
    if (tg_expose_init(&t, TABLE_MAX) != 0)
        die("init", b, n);
    /* ops until a 0xff byte: [op|agent|prefix] [len] [name bytes] */
    while (i + 1 < n && b[i] != 0xff) {
        uint8_t op = b[i] & 3, agent = (b[i] >> 2) & 3, pfx = (b[i] >> 4) & 3;
        size_t l = b[i + 1] % 12;
        i += 2;
        if (l > n - i)
            l = n - i;
        const char *name = (const char *)b + i;
        i += l;
        if (op == 3) {
            tg_expose_remove_agent(&t, agent);
        } else if (op == 2) {
            const tg_expose_ent_t *e = tg_expose_lookup(&t, name, l);
            if (e != NULL && (e->hidden || e->key_len != l || memcmp(e->key, name, l) != 0))
                die("lookup returned another entry", b, n);
        } else {
            int rc = tg_expose_add(&t, agent, prefixes[pfx], strlen(prefixes[pfx]), name, l, &out);
            if (rc == TG_EXPOSE_HIDDEN && out.other > agent)
                die("hidden behind a later agent", b, n);
            if (rc == TG_EXPOSE_TOOK && out.other <= agent)
                die("took a name from an earlier agent", b, n);
            if (rc >= 0 && tg_expose_lookup(&t, out.name, out.len) == NULL)
                die("an added name is not found", b, n);
        }
        check_table(&t, b, n);
    }
    tg_expose_free(&t);

    /* the rest: template, 0xff, URI */
    if (i >= n)
        return;
    const uint8_t *tp = b + i + 1, *sep = memchr(tp, 0xff, n - i - 1);
    if (sep == NULL)
        return;
    size_t tl = (size_t)(sep - tp), ul = n - i - 1 - tl - 1;
    int got = tg_expose_uri_match((const char *)tp, tl, (const char *)sep + 1, ul);
    tg_expose_uri_t u;
    tg_expose_uri_init(&u, 1, 1);
    int valid = tg_expose_uri_add(&u, 0, (const char *)tp, tl, 1, NULL) == TG_EXPOSE_OWNED;
    if (valid && tg_expose_uri_route(&u, (const char *)sep + 1, ul) != (got ? 0 : -ENOENT))
        die("route and match disagree", b, n);
    tg_expose_uri_free(&u);
    if (!valid) {
        if (got)
            die("a refused template matched", b, n);
        return;
    }
    if (tl > REF_TPL_MAX || ul > REF_URI_MAX)
        return;
    static signed char memo[REF_TPL_MAX + 1][REF_URI_MAX + 1];
    memset(memo, -1, sizeof memo);
    if (ref_match(tp, tl, sep + 1, ul, 0, 0, memo) != got)
        die("the template matcher disagrees with the reference", b, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *b = data + 1;
    size_t n = size - 1;
    switch (data[0] & 3) {
    case 0:
        run_names(b, n);
        break;
    case 1:
        run_decode(b, n);
        break;
    case 2:
        run_cursor(b, n);
        break;
    default:
        run_tables(b, n);
        break;
    }
    return 0;
}
