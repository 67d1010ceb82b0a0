/* Several agents behind one front (router/codec/expose.c, issue 22): the
 * names tools are exposed under, the name and URI tables and their
 * collisions, and the cursors that page a merged list. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/expose.h"

/* FNV-1a 64 of "fs__read file", folded to 32 bits */
#define EXPOSE_PIN "8d0c451c"

/* Every byte of <s> is one LLM APIs accept, and it is at most 64 bytes. */
static void assert_valid_name(const char *s, size_t len)
{
    cr_assert_leq(len, TG_EXPOSE_NAME_MAX, "%s: %zu bytes", s, len);
    cr_assert_eq(strlen(s), len, "%s: length and NUL disagree", s);
    for (size_t i = 0; i < len; i++)
        cr_assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
                         s[i]) != NULL,
                  "%s: byte %zu", s, i);
}

static int name_of(const char *prefix, const char *name, char out[TG_EXPOSE_NAME_MAX + 1])
{
    size_t len = 0;
    int rc = tg_expose_name(prefix, strlen(prefix), name, strlen(name), out, &len);
    if (rc >= 0)
        assert_valid_name(out, len);
    return rc;
}

/* ---- names ---- */

Test(expose, prefix_separator_and_no_prefix)
{
    char out[TG_EXPOSE_NAME_MAX + 1];
    cr_assert_eq(name_of("fs", "read_file", out), 0);
    cr_assert_str_eq(out, "fs__read_file");
    cr_assert_eq(name_of("", "read_file", out), 0, "tool_prefix \"\": the name as it is");
    cr_assert_str_eq(out, "read_file");
    cr_assert_eq(name_of("git-1.x", "log", out), 0);
    cr_assert_str_eq(out, "git-1.x__log");
    size_t len = 7;
    cr_assert_eq(tg_expose_name("fs", 2, "", 0, out, &len), -EINVAL, "an empty original");
}

Test(expose, prefixes_with_the_separator_or_bad_bytes_are_refused_with_a_reason)
{
    char msg[256];
    snprintf(msg, sizeof msg, "untouched");
    cr_assert_eq(tg_expose_prefix_check("fs", 2, msg, sizeof msg), 0);
    cr_assert_eq(tg_expose_prefix_check("", 0, msg, sizeof msg), 0, "\"\": no prefix");
    cr_assert_eq(tg_expose_prefix_check("_fs.a-b_c", 9, msg, sizeof msg), 0);
    cr_assert_str_eq(msg, "untouched", "the message is written on failure only");

    cr_assert_eq(tg_expose_prefix_check("my__fs", 6, msg, sizeof msg), -EINVAL);
    cr_assert(strstr(msg, "\"__\" at offset 2") != NULL, "%s", msg);
    cr_assert_eq(tg_expose_prefix_check("fs_", 3, msg, sizeof msg), -EINVAL,
                 "fs_ + __ + x = fs___x: the first __ would end the prefix early");
    cr_assert(strstr(msg, "ends in '_'") != NULL, "%s", msg);
    cr_assert_eq(tg_expose_prefix_check("f s", 3, msg, sizeof msg), -EINVAL);
    cr_assert(strstr(msg, "0x20 at offset 1") != NULL, "%s", msg);
    cr_assert_eq(tg_expose_prefix_check("f:s", 3, msg, sizeof msg), -EINVAL);
    char longp[TG_EXPOSE_PREFIX_MAX + 1];
    memset(longp, 'p', sizeof longp);
    cr_assert_eq(tg_expose_prefix_check(longp, TG_EXPOSE_PREFIX_MAX, msg, sizeof msg), 0);
    cr_assert_eq(tg_expose_prefix_check(longp, sizeof longp, msg, sizeof msg), -EINVAL);
    cr_assert(strstr(msg, "tool_prefix") != NULL, "%s", msg);
    cr_assert_eq(tg_expose_prefix_check("a__b", 4, NULL, 0), -EINVAL, "no message buffer");
    char tiny[4];
    cr_assert_eq(tg_expose_prefix_check("a__b", 4, tiny, sizeof tiny), -EINVAL);
    cr_assert_eq(strlen(tiny), 3, "cut to the buffer, NUL-terminated");
}

Test(expose, at_most_64_bytes_verbatim_over_that_cut_with_a_hash)
{
    char name[200], out[TG_EXPOSE_NAME_MAX + 1], again[TG_EXPOSE_NAME_MAX + 1];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    name[TG_EXPOSE_NAME_MAX - 4] = '\0'; /* fs__ + 60 = 64 */
    cr_assert_eq(name_of("fs", name, out), 0, "exactly 64 bytes stay as they are");
    cr_assert_eq(strlen(out), TG_EXPOSE_NAME_MAX);
    name[TG_EXPOSE_NAME_MAX - 4] = 'a';
    name[TG_EXPOSE_NAME_MAX - 3] = '\0';
    cr_assert_eq(name_of("fs", name, out), 1, "65 bytes are rewritten");
    cr_assert_eq(strlen(out), TG_EXPOSE_NAME_MAX);
    cr_assert_eq(strncmp(out, "fs__aaaa", 8), 0, "the prefix survives the cut: %s", out);
    cr_assert_eq(out[TG_EXPOSE_NAME_MAX - 1 - TG_EXPOSE_HASH_HEX], '_');
    for (size_t i = TG_EXPOSE_NAME_MAX - TG_EXPOSE_HASH_HEX; i < TG_EXPOSE_NAME_MAX; i++)
        cr_assert(strchr("0123456789abcdef", out[i]) != NULL, "hash digit %zu of %s", i, out);
    cr_assert_eq(name_of("fs", name, again), 1);
    cr_assert_str_eq(out, again, "deterministic");
    name[TG_EXPOSE_NAME_MAX - 3] = 'a';
    name[150] = '\0';
    cr_assert_eq(name_of("", name, out), 1);
    cr_assert_eq(strlen(out), TG_EXPOSE_NAME_MAX);
}

Test(expose, bad_bytes_are_escaped_and_hashed_so_lookalikes_stay_apart)
{
    char a[TG_EXPOSE_NAME_MAX + 1], b[TG_EXPOSE_NAME_MAX + 1], c[TG_EXPOSE_NAME_MAX + 1];
    cr_assert_eq(name_of("fs", "read file", a), 1);
    cr_assert_eq(strncmp(a, "fs__read_file_", 14), 0, "%s", a);
    cr_assert_eq(strlen(a), 14 + TG_EXPOSE_HASH_HEX);
    cr_assert_eq(name_of("fs", "read:file", b), 1);
    cr_assert_eq(name_of("fs", "read_file", c), 0);
    cr_assert_str_neq(a, b, "two escapes alike differ by their hash");
    cr_assert_str_neq(a, c, "and differ from the verbatim name");
    cr_assert_eq(name_of("", "caf\xc3\xa9/\n", a), 1, "UTF-8 and controls: one '_' a byte");
    cr_assert_eq(strncmp(a, "caf____", 7), 0, "%s", a);
    /* pinned: an exposed name is what clients remember, so the hash must
     * not change between versions (FNV-1a 64 folded to 32 bits) */
    cr_assert_eq(name_of("fs", "read file", a), 1);
    char pin[TG_EXPOSE_NAME_MAX + 1];
    cr_assert_eq(name_of("fs", "read file", pin), 1);
    cr_assert_str_eq(a, pin);
    cr_assert_str_eq(a, "fs__read_file_" EXPOSE_PIN, "%s", a);
}

Test(expose, distinct_long_names_stay_distinct)
{
    tg_expose_t t;
    cr_assert_eq(tg_expose_init(&t, TG_EXPOSE_ENTRIES_MAX), 0);
    char name[128];
    memset(name, 'x', 100);
    for (int i = 0; i < TG_EXPOSE_ENTRIES_MAX; i++) {
        /* alike for far longer than is kept: only the hash tells them apart */
        snprintf(name + 100, sizeof name - 100, "%d", i);
        tg_expose_added_t out;
        int rc = tg_expose_add(&t, 0, "agent", 5, name, strlen(name), &out);
        cr_assert_eq(rc, TG_EXPOSE_OWNED, "%s -> %s: rc %d (owner %u)", name, out.name, rc,
                     out.other);
        cr_assert(out.rewritten);
        assert_valid_name(out.name, out.len);
        const tg_expose_ent_t *e = tg_expose_lookup(&t, out.name, out.len);
        cr_assert_not_null(e);
        cr_assert_str_eq(e->val, name, "the original comes back");
        cr_assert(e->rewritten);
    }
    tg_expose_free(&t);
}

/* ---- the name table ---- */

static int add(tg_expose_t *t, uint32_t agent, const char *prefix, const char *orig,
               tg_expose_added_t *out)
{
    return tg_expose_add(t, agent, prefix, strlen(prefix), orig, strlen(orig), out);
}

static const tg_expose_ent_t *look(const tg_expose_t *t, const char *name)
{
    return tg_expose_lookup(t, name, strlen(name));
}

Test(expose, lookup_gives_the_agent_and_the_original)
{
    tg_expose_t t;
    tg_expose_added_t out;
    cr_assert_eq(tg_expose_init(&t, 16), 0);
    cr_assert_null(look(&t, "fs__read_file"), "empty");
    cr_assert_eq(add(&t, 0, "fs", "read_file", &out), TG_EXPOSE_OWNED);
    cr_assert_str_eq(out.name, "fs__read_file");
    cr_assert_not(out.rewritten);
    cr_assert_eq(add(&t, 1, "git", "log", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 2, "", "echo", &out), TG_EXPOSE_OWNED);
    const tg_expose_ent_t *e = look(&t, "fs__read_file");
    cr_assert_not_null(e);
    cr_assert_eq(e->agent, 0);
    cr_assert_str_eq(e->val, "read_file");
    cr_assert_eq(look(&t, "git__log")->agent, 1);
    cr_assert_str_eq(look(&t, "echo")->val, "echo");
    cr_assert_null(look(&t, "read_file"), "an original is not an exposed name");
    cr_assert_null(look(&t, "fs__read_fil"));
    cr_assert_null(look(&t, ""));
    cr_assert_eq(add(&t, 0, "fs", "read_file", &out), TG_EXPOSE_OWNED, "again: nothing new");
    cr_assert_eq(tg_expose_count(&t), 3);
    tg_expose_free(&t);
    cr_assert_null(look(&t, "echo"), "freed: holds nothing");
    tg_expose_free(&t);
}

Test(expose, first_agent_in_config_order_keeps_a_name_whatever_came_first)
{
    tg_expose_t t;
    tg_expose_added_t out;
    cr_assert_eq(tg_expose_init(&t, 16), 0);
    cr_assert_eq(add(&t, 0, "", "echo", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 1, "", "echo", &out), TG_EXPOSE_HIDDEN);
    cr_assert_eq(out.other, 0, "the second is told who owns it");
    cr_assert_str_eq(out.name, "echo");
    cr_assert_eq(add(&t, 1, "", "echo", &out), TG_EXPOSE_HIDDEN, "again: the same answer");
    cr_assert_eq(out.other, 0);
    cr_assert_eq(look(&t, "echo")->agent, 0);

    /* agent 3 answered before agent 2: 2 takes the name, 3 is told */
    cr_assert_eq(add(&t, 3, "", "sum", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 2, "", "sum", &out), TG_EXPOSE_TOOK);
    cr_assert_eq(out.other, 3, "the agent that lost it");
    cr_assert_eq(look(&t, "sum")->agent, 2);
    cr_assert_eq(add(&t, 3, "", "sum", &out), TG_EXPOSE_HIDDEN);
    cr_assert_eq(out.other, 2);
    cr_assert_eq(tg_expose_count(&t), 4, "hidden entries are kept, once each");
    size_t hidden = 0;
    for (size_t i = 0; i < tg_expose_count(&t); i++)
        hidden += tg_expose_at(&t, i)->hidden;
    cr_assert_eq(hidden, 2);
    cr_assert_null(tg_expose_at(&t, 4));
    tg_expose_free(&t);
}

Test(expose, one_agent_s_verbatim_name_clashing_with_its_rewritten_one)
{
    tg_expose_t t;
    tg_expose_added_t out, first;
    cr_assert_eq(tg_expose_init(&t, 16), 0);
    cr_assert_eq(add(&t, 0, "", "x y", &first), TG_EXPOSE_OWNED);
    cr_assert(first.rewritten);
    cr_assert_eq(add(&t, 0, "", first.name, &out), TG_EXPOSE_HIDDEN, "%s", first.name);
    cr_assert_eq(out.other, 0, "its own earlier tool keeps the name");
    cr_assert_str_eq(look(&t, first.name)->val, "x y");
    tg_expose_free(&t);
}

Test(expose, an_agent_gone_loses_its_names_and_regains_them)
{
    tg_expose_t t;
    tg_expose_added_t out;
    cr_assert_eq(tg_expose_init(&t, 16), 0);
    cr_assert_eq(add(&t, 0, "fs", "read", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 0, "fs", "write", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 0, "", "echo", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 1, "", "echo", &out), TG_EXPOSE_HIDDEN);
    cr_assert_eq(add(&t, 1, "git", "log", &out), TG_EXPOSE_OWNED);

    cr_assert_eq(tg_expose_remove_agent(&t, 0), 3);
    cr_assert_eq(tg_expose_remove_agent(&t, 0), 0);
    cr_assert_null(look(&t, "fs__read"));
    cr_assert_null(look(&t, "fs__write"));
    cr_assert_eq(look(&t, "echo")->agent, 1, "the hidden one shows now");
    cr_assert_eq(look(&t, "git__log")->agent, 1);
    cr_assert_eq(tg_expose_count(&t), 2);

    /* back: it takes its name again, and its tools list first again */
    cr_assert_eq(add(&t, 0, "", "echo", &out), TG_EXPOSE_TOOK);
    cr_assert_eq(out.other, 1);
    cr_assert_eq(add(&t, 0, "fs", "read", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(look(&t, "echo")->agent, 0);
    cr_assert_eq(look(&t, "fs__read")->agent, 0);
    cr_assert_eq(look(&t, "git__log")->agent, 1);
    static const char *const order[] = {"echo", "fs__read", "echo", "git__log"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_str_eq(tg_expose_at(&t, i)->key, order[i], "entry %zu", i);
    cr_assert(tg_expose_at(&t, 2)->hidden);
    tg_expose_free(&t);
}

Test(expose, order_is_config_order_then_arrival)
{
    tg_expose_t t;
    tg_expose_added_t out;
    cr_assert_eq(tg_expose_init(&t, 16), 0);
    add(&t, 2, "c", "z", &out);
    add(&t, 2, "c", "a", &out);
    add(&t, 0, "a", "m", &out);
    add(&t, 1, "b", "k", &out);
    add(&t, 0, "a", "b", &out);
    static const char *const order[] = {"a__m", "a__b", "b__k", "c__z", "c__a"};
    cr_assert_eq(tg_expose_count(&t), 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_str_eq(tg_expose_at(&t, i)->key, order[i], "entry %zu", i);
        cr_assert_eq(look(&t, order[i]), tg_expose_at(&t, i), "index after insertions");
    }
    tg_expose_free(&t);
}

Test(expose, bounded_by_entries_and_lengths)
{
    tg_expose_t t;
    tg_expose_added_t out;
    cr_assert_eq(tg_expose_init(&t, 0), -EINVAL);
    cr_assert_eq(tg_expose_init(&t, TG_EXPOSE_ENTRIES_MAX + 1), -EINVAL);
    cr_assert_eq(tg_expose_init(&t, 3), 0);
    cr_assert_eq(add(&t, 0, "", "a", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 0, "", "b", &out), TG_EXPOSE_OWNED);
    cr_assert_eq(add(&t, 1, "", "a", &out), TG_EXPOSE_HIDDEN, "hidden ones count too");
    cr_assert_eq(add(&t, 0, "", "c", &out), -ENOSPC);
    cr_assert_eq(add(&t, 0, "", "a", &out), TG_EXPOSE_OWNED, "a known one is still known");
    cr_assert_eq(add(&t, 1, "", "a", &out), TG_EXPOSE_HIDDEN);
    cr_assert_null(look(&t, "c"), "nothing changed");
    cr_assert_eq(tg_expose_count(&t), 3);

    char big[TG_EXPOSE_ORIG_MAX + 2];
    memset(big, 'o', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(add(&t, 0, "", big, &out), -EINVAL, "an original over its bound");
    cr_assert_eq(add(&t, 0, "", "", &out), -EINVAL);
    cr_assert_eq(add(&t, TG_CFG_AGENTS_MAX, "", "d", &out), -EINVAL);
    cr_assert_eq(add(&t, 0, "a__b", "d", &out), -EINVAL, "a prefix holding the separator");
    cr_assert_eq(tg_expose_remove_agent(&t, 1), 1);
    big[TG_EXPOSE_ORIG_MAX] = '\0';
    cr_assert_eq(add(&t, 0, "", big, &out), TG_EXPOSE_OWNED, "exactly the bound");
    cr_assert_str_eq(look(&t, out.name)->val, big);
    tg_expose_free(&t);
}

/* ---- URIs ---- */

static int uadd(tg_expose_uri_t *u, uint32_t agent, const char *s, bool tpl, uint32_t *other)
{
    return tg_expose_uri_add(u, agent, s, strlen(s), tpl, other);
}

static int route(const tg_expose_uri_t *u, const char *s)
{
    return tg_expose_uri_route(u, s, strlen(s));
}

static bool match(const char *tpl, const char *uri)
{
    return tg_expose_uri_match(tpl, strlen(tpl), uri, strlen(uri));
}

Test(expose, uri_exact_and_collisions)
{
    tg_expose_uri_t u;
    uint32_t other = 99;
    cr_assert_eq(tg_expose_uri_init(&u, 8, 8), 0);
    cr_assert_eq(route(&u, "file:///a"), -ENOENT, "empty");
    cr_assert_eq(uadd(&u, 1, "file:///a", false, &other), TG_EXPOSE_OWNED);
    cr_assert_eq(uadd(&u, 2, "file:///a", false, &other), TG_EXPOSE_HIDDEN);
    cr_assert_eq(other, 1);
    cr_assert_eq(uadd(&u, 0, "file:///a", false, &other), TG_EXPOSE_TOOK);
    cr_assert_eq(other, 1);
    cr_assert_eq(uadd(&u, 3, "file:///a", false, NULL), TG_EXPOSE_HIDDEN, "<other> may be NULL");
    cr_assert_eq(route(&u, "file:///a"), 0);
    cr_assert_eq(tg_expose_uri_owner(&u, "file:///a", 9, false), 0);
    cr_assert_eq(tg_expose_uri_owner(&u, "file:///a", 9, true), -ENOENT, "not a template");
    cr_assert_eq(route(&u, "file:///b"), -ENOENT);
    cr_assert_eq(tg_expose_uri_remove_agent(&u, 0), 1);
    cr_assert_eq(route(&u, "file:///a"), 1, "the next in config order");
    cr_assert_eq(uadd(&u, 0, "", false, NULL), -EINVAL);
    char big[TG_EXPOSE_URI_MAX + 2];
    memset(big, 'u', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(uadd(&u, 0, big, false, NULL), -EINVAL);
    cr_assert_eq(route(&u, big), -ENOENT);
    big[TG_EXPOSE_URI_MAX] = '\0';
    cr_assert_eq(uadd(&u, 0, big, false, NULL), TG_EXPOSE_OWNED);
    cr_assert_eq(route(&u, big), 0);
    for (int i = 0; i < 5; i++) {
        char s[32];
        snprintf(s, sizeof s, "mem://%d", i);
        cr_assert_eq(uadd(&u, 4, s, false, NULL), i < 4 ? TG_EXPOSE_OWNED : -ENOSPC, "%s", s);
    }
    tg_expose_uri_free(&u);
}

Test(expose, uri_templates_level_1)
{
    cr_assert(match("file:///{path}", "file:///a.txt"));
    cr_assert_not(match("file:///{path}", "file:///dir/a.txt"), "a variable is one segment");
    cr_assert_not(match("file:///{path}", "file:///"), "a variable is not empty");
    cr_assert_not(match("file:///{path}", "file:///a?x=1"));
    cr_assert(match("test://static/resource/{id}", "test://static/resource/42"));
    cr_assert(match("db://{schema}.{table}", "db://a.b.c"), "backtracks to the last variable");
    cr_assert(match("a{x}b{y}c", "aXbbYcc"));
    cr_assert_not(match("a{x}b{y}c", "abYc"));
    cr_assert(match("{x}", "anything:at-all"));
    cr_assert(match("q://{a}/{b}?n={c}#{d}", "q://1/2?n=3#4"));
    cr_assert_not(match("q://{a}/{b}?n={c}", "q://1/2/n=3"), "delimiters must agree");
    cr_assert(match("x/{a.b}/{c%20d}/{_1}", "x/1/2/3"), "dotted and encoded names");
    cr_assert(match("plain://no/vars", "plain://no/vars"));
    cr_assert_not(match("plain://no/vars", "plain://no/var"));
    static const char *const refused[] = {"a{+path}", "a{#f}", "a{/p}", "a{.x}", "a{x,y}",
                                          "a{",       "a}",    "a{}",   "a{x.}", "a{x}}",
                                          "a{x{y}}",  "a{x*}", "a{x:3}"};
    tg_expose_uri_t u;
    cr_assert_eq(tg_expose_uri_init(&u, 8, 16), 0);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cr_assert_eq(uadd(&u, 0, refused[i], true, NULL), -EOPNOTSUPP, "%s", refused[i]);
        cr_assert_not(match(refused[i], "ax"), "%s", refused[i]);
    }
    cr_assert_eq(tg_expose_uri_init(&u, 8, 0), -EINVAL);
    cr_assert_eq(tg_expose_uri_init(&u, 0, 8), -EINVAL);
    cr_assert_eq(tg_expose_uri_init(&u, 8, TG_EXPOSE_TEMPLATES_MAX + 1), -EINVAL);
    tg_expose_uri_free(&u);
}

Test(expose, uri_templates_route_to_the_first_agent_and_exact_wins)
{
    tg_expose_uri_t u;
    uint32_t other = 99;
    cr_assert_eq(tg_expose_uri_init(&u, 8, 8), 0);
    cr_assert_eq(uadd(&u, 2, "file:///{name}", true, &other), TG_EXPOSE_OWNED);
    cr_assert_eq(uadd(&u, 1, "file:///{path}", true, &other), TG_EXPOSE_OWNED,
                 "another string matching alike is no collision");
    cr_assert_eq(route(&u, "file:///x"), 1, "the first in config order matches first");
    cr_assert_eq(uadd(&u, 3, "file:///{path}", true, &other), TG_EXPOSE_HIDDEN);
    cr_assert_eq(other, 1);
    cr_assert_eq(tg_expose_uri_owner(&u, "file:///{path}", 14, true), 1);
    cr_assert_eq(uadd(&u, 4, "file:///special", false, &other), TG_EXPOSE_OWNED);
    cr_assert_eq(route(&u, "file:///special"), 4, "a URI listed as such beats a template");
    cr_assert_eq(route(&u, "file:///d/x"), -ENOENT);
    cr_assert_eq(tg_expose_uri_remove_agent(&u, 1), 1);
    cr_assert_eq(route(&u, "file:///x"), 2);
    cr_assert_eq(tg_expose_uri_remove_agent(&u, 2), 1);
    cr_assert_eq(route(&u, "file:///x"), 3, "the hidden template shows now");
    tg_expose_uri_free(&u);
}

Test(expose, uri_template_matching_is_not_exponential)
{
    char uri[TG_EXPOSE_URI_MAX + 1];
    memset(uri, 'a', TG_EXPOSE_URI_MAX);
    uri[TG_EXPOSE_URI_MAX] = '\0';
    /* a backtracking matcher would try every split of the bytes among
     * eight variables; this one is O(template x URI) */
    cr_assert_not(match("{a}{b}{c}{d}{e}{f}{g}{h}x", uri));
    cr_assert(match("{a}{b}{c}{d}{e}{f}{g}{h}a", uri));
    cr_assert_not(match("{a}", "x/y"));
}

/* ---- cursors ---- */

static const uint8_t key[TG_EXPOSE_KEY_LEN] = {1, 2,  3,  4,  5,  6,  7,  8,
                                               9, 10, 11, 12, 13, 14, 15, 16};

static void encode(const tg_expose_cursor_t *c, char *out, size_t *len)
{
    cr_assert_eq(tg_expose_cursor_encode(key, c, out, TG_EXPOSE_CURSOR_MAX + 1, len), 0);
    cr_assert_leq(*len, TG_EXPOSE_CURSOR_MAX);
    cr_assert_eq(strlen(out), *len);
    for (size_t i = 0; i < *len; i++)
        cr_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                         out[i]) != NULL,
                  "byte %zu of %s", i, out);
}

static void assert_same(const tg_expose_cursor_t *a, const tg_expose_cursor_t *b)
{
    cr_assert_eq(a->list, b->list);
    cr_assert_eq(a->agent, b->agent);
    cr_assert_eq(a->gen, b->gen);
    cr_assert_eq(a->has_inner, b->has_inner);
    cr_assert_eq(a->inner_len, b->inner_len);
    cr_assert_eq(memcmp(a->inner, b->inner, a->inner_len), 0);
}

Test(expose, siphash_reference_vectors)
{
    uint8_t k[TG_EXPOSE_KEY_LEN], m[64];
    for (int i = 0; i < 16; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        m[i] = (uint8_t)i;
    /* the paper's example (appendix A), and the first and last of its
     * reference vectors (vectors.h, little-endian there) */
    cr_assert_eq(tg_expose_siphash(k, m, 15), 0xa129ca6149be45e5ull);
    cr_assert_eq(tg_expose_siphash(k, m, 0), 0x726fdb47dd0e0e31ull);
    cr_assert_eq(tg_expose_siphash(k, m, 63), 0x958a324ceb064572ull);
}

Test(expose, cursor_round_trip)
{
    static tg_expose_cursor_t c, d;
    char s[TG_EXPOSE_CURSOR_MAX + 1];
    size_t len;

    c = (tg_expose_cursor_t){.list = 2, .agent = 7, .gen = 0xdeadbeef, .has_inner = false};
    encode(&c, s, &len);
    cr_assert_eq(tg_expose_cursor_decode(key, s, len, &d), 0);
    assert_same(&c, &d);

    c.has_inner = true; /* an agent's empty cursor is not its absent one */
    encode(&c, s, &len);
    cr_assert_eq(tg_expose_cursor_decode(key, s, len, &d), 0);
    assert_same(&c, &d);

    c.agent = TG_CFG_AGENTS_MAX - 1;
    c.inner_len = TG_EXPOSE_CURSOR_INNER_MAX;
    for (size_t i = 0; i < c.inner_len; i++)
        c.inner[i] = (char)(i * 7); /* any bytes, NUL included */
    encode(&c, s, &len);
    cr_assert_eq(len, TG_EXPOSE_CURSOR_MAX, "the largest cursor is exactly the bound");
    cr_assert_eq(tg_expose_cursor_decode(key, s, len, &d), 0);
    assert_same(&c, &d);

    size_t small;
    cr_assert_eq(tg_expose_cursor_encode(key, &c, s, TG_EXPOSE_CURSOR_MAX, &small), -ENOBUFS);
    c.inner_len = TG_EXPOSE_CURSOR_INNER_MAX + 1;
    cr_assert_eq(tg_expose_cursor_encode(key, &c, s, sizeof s, &small), -EINVAL);
    c.inner_len = 3;
    c.has_inner = false;
    cr_assert_eq(tg_expose_cursor_encode(key, &c, s, sizeof s, &small), -EINVAL);
    c.has_inner = true;
    c.agent = TG_CFG_AGENTS_MAX;
    cr_assert_eq(tg_expose_cursor_encode(key, &c, s, sizeof s, &small), -EINVAL);
}

Test(expose, forged_flipped_truncated_and_foreign_cursors_are_refused)
{
    static tg_expose_cursor_t c, d;
    char s[TG_EXPOSE_CURSOR_MAX + 2], t[TG_EXPOSE_CURSOR_MAX + 2];
    size_t len;
    c = (tg_expose_cursor_t){.list = 1, .agent = 3, .gen = 9, .has_inner = true, .inner_len = 6};
    memcpy(c.inner, "pg=17x", 6);
    encode(&c, s, &len);

    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(t, s, len);
            t[i] = (char)(t[i] ^ (1 << bit));
            int rc = tg_expose_cursor_decode(key, t, len, &d);
            cr_assert(rc == -EINVAL || rc == -EBADMSG, "byte %zu bit %d: %d", i, bit, rc);
        }
    for (size_t cut = 0; cut < len; cut++)
        cr_assert_lt(tg_expose_cursor_decode(key, s, cut, &d), 0, "cut at %zu", cut);
    memcpy(t, s, len);
    t[len] = 'A';
    cr_assert_lt(tg_expose_cursor_decode(key, t, len + 1, &d), 0, "a byte more");

    uint8_t other[TG_EXPOSE_KEY_LEN];
    memcpy(other, key, sizeof other);
    other[15] ^= 1;
    cr_assert_eq(tg_expose_cursor_decode(other, s, len, &d), -EBADMSG, "another process's key");

    /* a cursor built by hand around a guessed tag */
    cr_assert_eq(tg_expose_cursor_decode(key, "AQEAAwAAAAkBAAVwZz0xNwAAAAAAAAAA", 32, &d),
                 -EBADMSG);
    cr_assert_eq(tg_expose_cursor_decode(key, "", 0, &d), -EINVAL);
    cr_assert_eq(tg_expose_cursor_decode(key, "abc=", 4, &d), -EINVAL, "padding is not ours");
    cr_assert_eq(tg_expose_cursor_decode(key, "abc+", 4, &d), -EINVAL, "nor standard base64");

    /* the same bytes spelled another way: leftover bits set in the last
     * character. Our spelling has them zero, so this one is refused. */
    memcpy(t, s, len);
    cr_assert_neq(len % 4, 0, "this cursor's length leaves bits over");
    const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    t[len - 1] = abc[(strchr(abc, t[len - 1]) - abc) | 1];
    cr_assert_eq(tg_expose_cursor_decode(key, t, len, &d), -EINVAL);

    static char big[TG_EXPOSE_CURSOR_MAX * 2];
    memset(big, 'A', sizeof big);
    cr_assert_eq(tg_expose_cursor_decode(key, big, TG_EXPOSE_CURSOR_MAX + 1, &d), -EMSGSIZE);
    cr_assert_eq(tg_expose_cursor_decode(key, big, sizeof big, &d), -EMSGSIZE);
}
