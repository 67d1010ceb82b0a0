/* jscan: spans, strict validation at every level (nested values too),
 * truncation, iteration (complete and partial), string decoding, numbers,
 * line/column and dotted paths. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/jscan.h"
#include <jansson.h>

static long scan(const char *s, tg_jspan_t *v)
{
    return tg_jscan_value(s, strlen(s), 0, v);
}

static long scan_rc(const char *s)
{
    tg_jspan_t v;
    return scan(s, &v);
}

/* Scan a buffer with explicit length (may hold NULs or be cut). */
static long scan_n(const char *s, size_t n)
{
    tg_jspan_t v;
    return tg_jscan_value(s, n, 0, &v);
}

Test(jscan, scalar_spans_and_types)
{
    tg_jspan_t v;
    cr_assert_eq(scan("  42 ", &v), 4);
    cr_assert_eq(v.off, 2);
    cr_assert_eq(v.len, 2);
    cr_assert_eq(v.type, TG_J_NUMBER);

    cr_assert_eq(scan("\"ab\"", &v), 4);
    cr_assert_eq(v.type, TG_J_STRING);
    cr_assert_eq(v.len, 4);
    cr_assert_not(v.escaped);

    cr_assert_eq(scan("\"a\\nb\"", &v), 6);
    cr_assert(v.escaped);

    cr_assert_eq(scan("true", &v), 4);
    cr_assert_eq(v.type, TG_J_TRUE);
    cr_assert_eq(scan("false,", &v), 5);
    cr_assert_eq(v.type, TG_J_FALSE);
    cr_assert_eq(scan("\tnull", &v), 5);
    cr_assert_eq(v.type, TG_J_NULL);
    cr_assert_eq(v.off, 1);

    cr_assert_eq(scan("{\"a\":[1,{\"b\":\"}\"}]} x", &v), 19);
    cr_assert_eq(v.type, TG_J_OBJECT);
    cr_assert_eq(v.len, 19);
    cr_assert_eq(scan("[[],{}]", &v), 7);
    cr_assert_eq(v.type, TG_J_ARRAY);
}

Test(jscan, numbers_follow_rfc8259)
{
    const char *good[] = {"0", "-0", "1", "-12", "1.5", "0.25", "1e9", "1E+2", "1e-2", "-0.0e0",
                          "123456789012345678901234567890"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert_eq(scan_rc(good[i]), (long)strlen(good[i]), "%s", good[i]);
    /* a number ends where the grammar stops; the caller judges the rest */
    cr_assert_eq(scan_rc("01"), 1);
    cr_assert_eq(scan_rc("1.5.2"), 3);
    const char *bad[] = {"+1", ".5", "-a", "1.x", "1ex", "1e+x", "-.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(scan_rc(bad[i]), -1, "%s", bad[i]);
    const char *cut[] = {"-", "1.", "1e", "1e+", "-0."};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
        cr_assert_eq(scan_rc(cut[i]), -2, "%s", cut[i]);
}

Test(jscan, literals_strict_and_truncated)
{
    cr_assert_eq(scan_rc("tru"), -2);
    cr_assert_eq(scan_rc("nul"), -2);
    cr_assert_eq(scan_rc("f"), -2);
    cr_assert_eq(scan_rc("trUe"), -1);
    cr_assert_eq(scan_rc("nil"), -1);
    cr_assert_eq(scan_rc("True"), -1);
    cr_assert_eq(scan_rc("x"), -1);
    cr_assert_eq(scan_rc(""), -2);
    cr_assert_eq(scan_rc("   "), -2);
}

Test(jscan, strict_strings)
{
    cr_assert_eq(scan_rc("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""), 18);
    cr_assert_eq(scan_rc("\"\\u00e9\""), 8);
    cr_assert_eq(scan_rc("\"\\ud83d\\ude00\""), 14);
    cr_assert_eq(scan_rc("\"\\x\""), -1);
    cr_assert_eq(scan_rc("\"\\u12g4\""), -1);
    cr_assert_eq(scan_rc("\"\\ud83d\""), -1, "lone high surrogate");
    cr_assert_eq(scan_rc("\"\\ud83dx\""), -1);
    cr_assert_eq(scan_rc("\"\\ud83d\\u0041\""), -1, "high + non-low");
    cr_assert_eq(scan_rc("\"\\ude00\""), -1, "lone low surrogate");
    cr_assert_eq(scan_n("\"a\x01\"", 4), -1, "control byte");
    cr_assert_eq(scan_n("\"a\tb\"", 5), -1, "raw tab");
    cr_assert_eq(scan_n("\"a\x7f\"", 4), 4, "DEL is allowed");
    /* UTF-8 */
    cr_assert_eq(scan_rc("\"caf\xc3\xa9\""), 7);
    cr_assert_eq(scan_rc("\"\xf0\x9f\x98\x80\""), 6);
    /* the edges of every UTF-8 length and of the surrogate gap */
    const char *edges[] = {"\"\xc2\x80\"", "\"\xdf\xbf\"", "\"\xe0\xa0\x80\"", "\"\xed\x9f\xbf\"",
                           "\"\xee\x80\x80\"", "\"\xef\xbf\xbf\"", "\"\xf0\x90\x80\x80\"",
                           "\"\xf4\x8f\xbf\xbf\"", "\"\\udbff\\udfff\""};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        cr_assert_eq(scan_rc(edges[i]), (long)strlen(edges[i]), "edge %zu", i);
    cr_assert_eq(scan_rc("\"\xc3\""), -1, "bad continuation");
    cr_assert_eq(scan_rc("\"\xc0\xaf\""), -1, "overlong");
    cr_assert_eq(scan_rc("\"\xe0\x80\xaf\""), -1, "overlong 3");
    cr_assert_eq(scan_rc("\"\xed\xa0\x80\""), -1, "surrogate");
    cr_assert_eq(scan_rc("\"\xf4\x90\x80\x80\""), -1, "> U+10FFFF");
    cr_assert_eq(scan_rc("\"\xff\""), -1);
    cr_assert_eq(scan_rc("\"\x80\""), -1);
    /* long strings cross the 8-byte fast path */
    char big[300];
    big[0] = '"';
    memset(big + 1, 'a', 290);
    big[120] = '\\';
    big[121] = 'n';
    big[291] = '"';
    big[292] = 0;
    tg_jspan_t v;
    cr_assert_eq(scan(big, &v), 292);
    cr_assert(v.escaped);
    big[200] = '\x1f';
    cr_assert_eq(scan_rc(big), -1);
}

Test(jscan, strings_truncated)
{
    const char *cut[] = {"\"", "\"abc", "\"ab\\", "\"\\u12", "\"\\ud83d", "\"\\ud83d\\", "\"\\ud83d\\u",
                         "\"\\ud83d\\ude0", "\"\xc3", "\"\xf0\x9f\x98"};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
        cr_assert_eq(scan_rc(cut[i]), -2, "case %zu", i);
}

Test(jscan, nested_values_are_validated)
{
    /* Issue 12 item 20: the spelling inside a nested container is checked
     * as strictly as at the scanned level (it used to be skipped). */
    cr_assert_eq(scan_rc("[tru, 01, +]"), -1);
    cr_assert_eq(scan_rc("{\"a\" \"b\"}"), -1, "missing colon");
    cr_assert_eq(scan_rc("{\"type\":\"t\":\"ok\"}"), -1, "a second colon");
    cr_assert_eq(scan_rc("{\"a\":{\"b\":1,}}"), -1, "trailing comma");
    cr_assert_eq(scan_rc("[1 2]"), -1, "missing comma");
    cr_assert_eq(scan_rc("[{\"a\":1}{}]"), -1);
    cr_assert_eq(scan_rc("{\"a\":[\"\\q\"]}"), -1, "bad escape");
    cr_assert_eq(scan_rc("{\"a\":[\"\\udc00\"]}"), -1, "lone low surrogate");
    cr_assert_eq(scan_rc("{\"a\":[\"\xff\"]}"), -1, "invalid UTF-8");
    cr_assert_eq(scan_rc("{\"a\":[\"\xc0\xaf\"]}"), -1, "overlong UTF-8");
    cr_assert_eq(scan_rc("{\"a\":[\"\xed\xa0\x80\"]}"), -1, "UTF-8 surrogate");
    cr_assert_eq(scan_rc("{\"a\":[1.5e+3,-0,true,false,null,\"\xc3\xa9\\u00e9\"]}"), 44);
    cr_assert_eq(scan_rc("{\"\xff\":1}"), -1, "invalid UTF-8 in a nested key");
    cr_assert_eq(scan_rc("[1.]"), -1);
    cr_assert_eq(scan_rc("[-]"), -1);
    cr_assert_eq(scan_rc("[ ]"), 3);
    cr_assert_eq(scan_rc("{ }"), 3);
    cr_assert_eq(scan_rc("[[],{}]"), 7);
    /* invalid UTF-8 past the first 16 and 64 bytes of a long string */
    for (size_t at = 0; at < 150; at += 7) {
        char s[200];
        memset(s, 'a', sizeof s);
        s[0] = '[';
        s[1] = '"';
        s[160] = '"';
        s[161] = ']';
        s[2 + at] = '\xff';
        cr_assert_eq(scan_n(s, 162), -1, "0xff at %zu", at);
        s[2 + at] = '\xc3';
        s[3 + at] = '\xa9';
        cr_assert_eq(scan_n(s, 162), 162, "two-byte sequence at %zu", at);
    }
    /* ... but strings, bracket matching and control bytes are */
    cr_assert_eq(scan_rc("{\"a\":[1}"), -1);
    cr_assert_eq(scan_rc("[}"), -1);
    cr_assert_eq(scan_rc("{]"), -1);
    cr_assert_eq(scan_n("[\"a\x02\"]", 6), -1);
    cr_assert_eq(scan_rc("[\"]\"]"), 5, "bracket inside a string");
    cr_assert_eq(scan_rc("[\"\\\"]\"]"), 7, "escaped quote inside a string");
    cr_assert_eq(scan_rc("[\"\\\\\"]"), 6, "escaped backslash before the quote");
    /* control bytes and quotes at every offset of the 16/8-byte blocks,
     * in skipped and in strictly scanned strings */
    for (size_t at = 0; at < 40; at++) {
        char s[64];
        s[0] = '[';
        s[1] = '"';
        memset(s + 2, 'a', 40);
        s[42] = '"';
        s[43] = ']';
        s[2 + at] = '\x1f';
        cr_assert_eq(scan_n(s, 44), -1, "skipped, control at %zu", at);
        cr_assert_eq(scan_n(s + 1, 42), -1, "strict, control at %zu", at);
        s[2 + at] = '"';
        cr_assert_eq(scan_n(s, 44), -1, "nested, early quote: a byte after the string");
        cr_assert_eq(scan_n(s + 1, 42), (long)at + 2, "strict, early quote at %zu", at);
        s[2 + at] = ']';
        cr_assert_eq(scan_n(s, 44), 44, "bracket in a string at %zu", at);
    }
    /* truncation */
    cr_assert_eq(scan_rc("{"), -2);
    cr_assert_eq(scan_rc("[1,[2,"), -2);
    cr_assert_eq(scan_rc("{\"a\":\"}"), -2);
    cr_assert_eq(scan_rc("[\"\\"), -2);
    /* a mismatch before the cut wins */
    cr_assert_eq(scan_rc("[}["), -1);
}

Test(jscan, depth_bound)
{
    char deep[2 * TG_JSCAN_MAX_DEPTH + 3];
    size_t n = TG_JSCAN_MAX_DEPTH;
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    cr_assert_eq(scan_n(deep, 2 * n), (long)(2 * n), "exactly the bound");
    memset(deep, '[', n + 1);
    memset(deep + n + 1, ']', n + 1);
    cr_assert_eq(scan_n(deep, 2 * n + 2), -1, "one past the bound");
    /* depth is counted per skipped value: mixed brackets match */
    char mix[2 * TG_JSCAN_MAX_DEPTH];
    for (size_t i = 0; i < n; i++) {
        mix[i] = (i % 3) ? '[' : '{';
        mix[2 * n - 1 - i] = (i % 3) ? ']' : '}';
    }
    /* '{' directly inside '{' without a key is not JSON */
    cr_assert_eq(scan_n(mix, 2 * n), -1);
    /* objects and arrays mixed, with keys, exactly at the bound */
    char obj[8 * TG_JSCAN_MAX_DEPTH];
    size_t ko = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 0) {
            memcpy(obj + ko, "{\"k\":", 5);
            ko += 5;
        } else {
            obj[ko++] = '[';
        }
    }
    obj[ko++] = '1';
    for (size_t i = n; i-- > 0;)
        obj[ko++] = i % 3 == 0 ? '}' : ']';
    cr_assert_eq(scan_n(obj, ko), (long)ko);
    /* the kinds of the outer levels come back right past a word of 64 */
    for (size_t at = 60; at < 70; at++) {
        ko = 0;
        for (size_t i = 0; i < 100; i++) {
            if (i == at) {
                memcpy(obj + ko, "{\"k\":", 5);
                ko += 5;
            } else {
                obj[ko++] = '[';
            }
        }
        for (size_t i = 100; i-- > 0;)
            obj[ko++] = i == at ? '}' : ']';
        cr_assert_eq(scan_n(obj, ko), (long)ko, "object at level %zu", at);
        obj[ko - 1 - at] = ']';
        cr_assert_eq(scan_n(obj, ko), -1, "object at level %zu closed with ]", at);
    }

    /* an iterated object is a level: members get one less, so iterating a
     * document from its top bounds it exactly as tg_jscan_value does */
    for (size_t d = n - 2; d <= n; d++) {
        char doc[2 * TG_JSCAN_MAX_DEPTH + 16];
        size_t k = 0;
        memcpy(doc, "{\"a\":", 5);
        k = 5;
        memset(doc + k, '[', d);
        k += d;
        memset(doc + k, ']', d);
        k += d;
        doc[k++] = '}';
        bool fits = d + 1 <= TG_JSCAN_MAX_DEPTH;
        tg_jspan_t v, key, val;
        cr_assert_eq(tg_jscan_value(doc, k, 0, &v), fits ? (long)k : -1, "depth %zu", d + 1);
        tg_jobj_iter_t it;
        cr_assert_eq(tg_jobj_begin_partial(&it, doc, k, 0), 0);
        cr_assert_eq(tg_jobj_next(&it, &key, &val), fits ? 1 : -1, "depth %zu", d + 1);
        if (fits) {
            cr_assert_eq(tg_jobj_next(&it, &key, &val), 0);
            cr_assert_eq(it.pos, k, "pos is past the closing brace");
        }
    }
}

/* The reference for nested values is jansson: a container the scanner
 * accepts is one jansson accepts (with the same end), and a buffer jansson
 * accepts whole the scanner accepts whole. */
static bool jansson_accepts(const unsigned char *p, size_t n)
{
    json_error_t err;
    json_t *j = json_loadb((const char *)p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    json_decref(j);
    return j != NULL;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

Test(jscan, nested_values_match_jansson)
{
    /* token-level alphabet, so that a fair share of inputs is valid JSON
     * and the rest fails at every kind of place; runs of plain bytes make
     * strings cross the 16- and 64-byte steps. Numbers end in a blank, so
     * none grows past what jansson can hold (it refuses 1e400 and integers
     * past int64, which JSON allows and the scanner accepts). */
    static const char *const tok[] = {
        "{", "}", "[", "]", "{", "}", "[", "]", ",", ",", ":", "\"k\":", "\"k\":",
        "\"s\"", "1 ", "-0.5e3 ", "01", "true", "nul", " ", "\"\\u00e9\"", "\"\\ud800\"",
        "\"\xc3\xa9\"", "\"\xff\"", "\"\\n\"", "\"\\x\"", "\"\x01\"", "\"",
    };
    unsigned char buf[600];
    int valid = 0;
    for (int round = 0; round < 100000; round++) {
        size_t n = 0, want = 1 + (size_t)(rng() % (round % 4 == 0 ? 500 : 120));
        buf[n++] = (rng() & 1) ? '{' : '[';
        while (n < want) {
            uint64_t r = rng();
            const char *t = tok[(r >> 8) % (sizeof tok / sizeof tok[0])];
            if (r % 16 == 0) { /* a long string */
                size_t run = 1 + (size_t)(r >> 16) % 150;
                buf[n++] = '"';
                for (size_t k = 0; k < run && n < sizeof buf - 2; k++)
                    buf[n++] = (r >> 40) % 5 == 0 && k == run / 2 ? 0xc3 : 'x';
                if ((r >> 40) % 5 == 0)
                    buf[n++] = 0xa9;
                buf[n++] = '"';
                continue;
            }
            size_t tl = strlen(t);
            if (n + tl > sizeof buf)
                break;
            memcpy(buf + n, t, tl);
            n += tl;
        }
        /* an exact-size copy, so a sanitizer sees any over-read */
        unsigned char *copy = malloc(n);
        cr_assert_not_null(copy);
        memcpy(copy, buf, n);
        long got = scan_n((const char *)copy, n);
        bool whole = jansson_accepts(copy, n);
        if ((got >= 0 && !jansson_accepts(copy, (size_t)got)) || (whole && (got < 0 || !tg_json_blank_from((const char *)copy, n, (size_t)got)))) {
            char hex[3 * 600 + 1];
            for (size_t i = 0; i < n; i++)
                snprintf(hex + 3 * i, 4, "%02x ", copy[i]);
            cr_assert_fail("round %d, %zu bytes, got %ld, jansson %d: %s", round, n, got,
                           whole, hex);
        }
        valid += got >= 0;
        free(copy);
    }
    cr_assert_gt(valid, 1000, "the generator makes valid containers too (%d)", valid);
}

Test(jscan, skip_block_edges)
{
    /* a backslash on the last byte of a block escapes the first of the
     * next; a quote there does not end the string */
    for (size_t at = 56; at < 72; at++) {
        char s[200];
        memset(s, 'a', sizeof s);
        s[0] = '[';
        s[1] = '"';
        s[at] = '\\';
        s[at + 1] = '"';
        s[100] = '"';
        s[101] = ']';
        cr_assert_eq(scan_n(s, 102), 102, "escaped quote at %zu", at + 1);
        s[at + 1] = '\x05';
        cr_assert_eq(scan_n(s, 102), -1, "escaped control byte at %zu", at + 1);
        cr_assert_eq(scan_n(s, at + 1), -2, "cut after the backslash at %zu", at);
    }
    /* a control byte in a string after the container ends is not its
     * business; one before the end is */
    const char tail[] = "{\"a\":\"b\"} \"\x01\"";
    cr_assert_eq(scan_n(tail, sizeof tail - 1), 9);
    /* a long string (the long-string loop) then structure and a cut */
    char big[5000];
    memset(big, 'z', sizeof big);
    memcpy(big, "{\"k\":\"", 6);
    memcpy(big + 4000, "\",\"l\":[1,{\"m\":\"]\"}]}", 20);
    cr_assert_eq(scan_n(big, 4020), 4020);
    cr_assert_eq(scan_n(big, 4019), -2);
    big[3000] = '\n';
    cr_assert_eq(scan_n(big, 4020), -1, "control byte deep in a long string");
    big[3000] = '\\';
    big[3001] = '"';
    cr_assert_eq(scan_n(big, 4020), 4020, "escape deep in a long string");
    /* short buffers (the padded last block) */
    cr_assert_eq(scan_rc("{}"), 2);
    cr_assert_eq(scan_rc("[\"\\\\\"]"), 6);
    cr_assert_eq(scan_rc("[\"\\"), -2);
}

/* Descending into a member's object in place, as the envelope scanner
 * reads a tools/call's params while walking the top level. */
Test(jscan, descend_in_place)
{
    const char *s = "{\"m\":\"x\",\"p\":{\"a\":[1,2],\"meta\":{\"t\":5}, \"b\":\"c\"},\"z\":7} ";
    size_t n = strlen(s);
    tg_jobj_iter_t it, child, grand;
    tg_jspan_t k, v;
    cr_assert_eq(tg_jobj_begin_partial(&it, s, n, 0), 0);
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert(tg_jstr_eq(s, k, "m"));
    cr_assert_eq(tg_jobj_enter(&it, &child), 0, "not an object: the value is still pending");
    cr_assert_eq(tg_jobj_value(&it, &v), 0);
    cr_assert(tg_jstr_eq(s, v, "x"));
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert(tg_jstr_eq(s, k, "p"));
    cr_assert_eq(tg_jobj_enter(&it, &child), 1);
    cr_assert_eq(tg_jobj_next(&child, &k, &v), 1);
    cr_assert(tg_jstr_eq(s, k, "a"));
    cr_assert_eq(v.type, TG_J_ARRAY);
    cr_assert_eq(tg_jobj_key(&child, &k), 1);
    cr_assert(tg_jstr_eq(s, k, "meta"));
    cr_assert_eq(tg_jobj_enter(&child, &grand), 1);
    cr_assert_eq(tg_jobj_next(&grand, &k, &v), 1);
    cr_assert_eq(v.type, TG_J_NUMBER);
    cr_assert_eq(tg_jobj_next(&grand, &k, &v), 0);
    cr_assert_eq(tg_jobj_leave(&child, &grand, &v), 0);
    cr_assert_eq(v.off, 31);
    cr_assert_eq(v.len, 7);
    /* a key whose value is left unread is skipped by the next key */
    cr_assert_eq(tg_jobj_key(&child, &k), 1);
    cr_assert(tg_jstr_eq(s, k, "b"));
    cr_assert_eq(tg_jobj_key(&child, &k), 0);
    cr_assert_eq(tg_jobj_leave(&it, &child, &v), 0);
    cr_assert_eq(v.off, 13);
    cr_assert_eq(v.len, 35);
    cr_assert_eq(v.type, TG_J_OBJECT);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert(tg_jstr_eq(s, k, "z"));
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 0);
    cr_assert_eq(it.pos, n - 1);

    /* the child's error is the parent's; truncation stays truncation in a
     * partial buffer and is malformed in a complete one */
    const char *bad = "{\"p\":{\"a\" 1},\"z\":2}";
    cr_assert_eq(tg_jobj_begin_partial(&it, bad, strlen(bad), 0), 0);
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert_eq(tg_jobj_enter(&it, &child), 1);
    cr_assert_eq(tg_jobj_key(&child, &k), -1);
    cr_assert_eq(tg_jobj_leave(&it, &child, &v), -1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -1, "sticky");
    const char *cut = "{\"p\":{\"a\":\"xx";
    cr_assert_eq(tg_jobj_begin_partial(&it, cut, strlen(cut), 0), 0);
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert_eq(tg_jobj_enter(&it, &child), 1);
    cr_assert_eq(tg_jobj_key(&child, &k), 1);
    cr_assert_eq(tg_jobj_value(&child, &v), -2);
    cr_assert_eq(tg_jobj_leave(&it, &child, &v), -2);
    const char *whole = "{\"p\":{\"a\":1}";
    tg_jspan_t top = {.off = 0, .len = strlen(whole), .type = TG_J_OBJECT, .escaped = false};
    tg_jobj_begin(&it, whole, top); /* a wrong span: the inner object is not closed */
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert_eq(tg_jobj_enter(&it, &child), 1);
    cr_assert_eq(tg_jobj_next(&child, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&child, &k, &v), -1, "runs into the parent's end");
    /* leaving before the end is a mistake, made sticky */
    cr_assert_eq(tg_jobj_begin_partial(&it, s, n, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_key(&it, &k), 1);
    cr_assert_eq(tg_jobj_enter(&it, &child), 1);
    cr_assert_eq(tg_jobj_leave(&it, &child, &v), -1);
    /* a value without a key */
    cr_assert_eq(tg_jobj_begin_partial(&it, s, n, 0), 0);
    cr_assert_eq(tg_jobj_value(&it, &v), -1);

    /* the nesting budget goes down one level per descent, as for skips */
    for (size_t d = TG_JSCAN_MAX_DEPTH - 3; d <= TG_JSCAN_MAX_DEPTH - 1; d++) {
        char doc[2 * TG_JSCAN_MAX_DEPTH + 32];
        size_t m = 0;
        memcpy(doc, "{\"p\":{\"a\":", 10);
        m = 10;
        memset(doc + m, '[', d);
        m += d;
        memset(doc + m, ']', d);
        m += d;
        memcpy(doc + m, "}}", 2);
        m += 2;
        bool fits = d + 2 <= TG_JSCAN_MAX_DEPTH;
        cr_assert_eq(tg_jscan_value(doc, m, 0, &v), fits ? (long)m : -1, "depth %zu", d + 2);
        cr_assert_eq(tg_jobj_begin_partial(&it, doc, m, 0), 0);
        cr_assert_eq(tg_jobj_key(&it, &k), 1);
        cr_assert_eq(tg_jobj_enter(&it, &child), 1);
        cr_assert_eq(tg_jobj_next(&child, &k, &v), fits ? 1 : -1, "depth %zu", d + 2);
    }
}

Test(jscan, object_iteration)
{
    const char *s = " { \"a\" : 1 , \"b\\u0063\":{\"x\":[1,2]}, \"d\":\"e\" } ";
    tg_jspan_t v, k, val;
    cr_assert_gt(scan(s, &v), 0);
    tg_jobj_iter_t it;
    tg_jobj_begin(&it, s, v);
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 1);
    cr_assert(tg_jstr_eq(s, k, "a"));
    cr_assert_eq(val.type, TG_J_NUMBER);
    cr_assert_eq(s[val.off], '1');
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 1);
    cr_assert(tg_jstr_eq(s, k, "bc"));
    cr_assert(k.escaped);
    cr_assert_eq(val.type, TG_J_OBJECT);
    cr_assert_eq(val.len, 11);
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 1);
    cr_assert(tg_jstr_eq(s, k, "d"));
    cr_assert(tg_jstr_eq(s, val, "e"));
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 0, "end is sticky");

    tg_jobj_begin(&it, "{}", (tg_jspan_t){.off = 0, .len = 2, .type = TG_J_OBJECT});
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 0);
    tg_jobj_begin(&it, "{ \t}", (tg_jspan_t){.off = 0, .len = 4, .type = TG_J_OBJECT});
    cr_assert_eq(tg_jobj_next(&it, &k, &val), 0);
}

static int iterate_all(const char *s)
{
    /* The span is taken as given (scanning it first would already refuse
     * most of these): the iteration's own checks are under test. */
    tg_jspan_t v = {.off = 0, .len = strlen(s), .type = TG_J_OBJECT}, k, val;
    tg_jobj_iter_t it;
    tg_jobj_begin(&it, s, v);
    int rc;
    while ((rc = tg_jobj_next(&it, &k, &val)) == 1)
        ;
    return rc;
}

Test(jscan, object_iteration_is_strict)
{
    cr_assert_eq(iterate_all("{\"a\":1}"), 0);
    cr_assert_eq(iterate_all("{\"a\":1,}"), -1, "trailing comma");
    cr_assert_eq(iterate_all("{,\"a\":1}"), -1, "leading comma");
    cr_assert_eq(iterate_all("{\"a\" 1}"), -1, "missing colon");
    cr_assert_eq(iterate_all("{\"a\":1 \"b\":2}"), -1, "missing comma");
    cr_assert_eq(iterate_all("{a:1}"), -1, "bare key");
    cr_assert_eq(iterate_all("{\"a\":}"), -1, "missing value");
    cr_assert_eq(iterate_all("{\"a\":tru}"), -1, "bad literal");
    cr_assert_eq(iterate_all("{\"a\":01}"), -1, "leading zero");
    cr_assert_eq(iterate_all("{\"a\":1.}"), -1, "cut number inside");
    cr_assert_eq(iterate_all("{\"a\":\"\\q\"}"), -1, "bad escape");
    cr_assert_eq(iterate_all("{\"a\":[1,}"), -1, "unbalanced");
    cr_assert_eq(iterate_all("{\"a\":{\"b\" 1}}"), -1, "nested level validated too");
    tg_jobj_iter_t it;
    tg_jspan_t k, val;
    tg_jobj_begin(&it, "[1]", (tg_jspan_t){.off = 0, .len = 3, .type = TG_J_ARRAY});
    cr_assert_eq(tg_jobj_next(&it, &k, &val), -1, "not an object");
}

/* tg_jobj_each: records the members it is given; refuses the key "stop". */
typedef struct each_log {
    size_t n;
    char keys[8][8];
    tg_jtype_t types[8];
} each_log_t;

static int each_record(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    each_log_t *l = ctx;
    if (tg_jstr_eq(buf, k, "stop"))
        return -1;
    cr_assert_lt(l->n, 8);
    cr_assert_geq(tg_jstr_decode(buf, k, l->keys[l->n], sizeof(l->keys[0])), 0);
    l->types[l->n++] = v.type;
    return 0;
}

static int each_all(const char *s, each_log_t *l)
{
    tg_jspan_t v = {.off = 0, .len = strlen(s), .type = TG_J_OBJECT};
    memset(l, 0, sizeof(*l));
    (void)scan(s, &v); /* the span as given when the scan refuses it */
    return tg_jobj_each(s, v, each_record, l);
}

Test(jscan, object_each)
{
    each_log_t l;
    cr_assert_eq(each_all(" {\"a\":1, \"b\\u0063\":{\"x\":[1]}, \"d\":\"e\", \"n\":null} ", &l), 0);
    cr_assert_eq(l.n, 4, "every member, in order");
    cr_assert_str_eq(l.keys[0], "a");
    cr_assert_eq(l.types[0], TG_J_NUMBER);
    cr_assert_str_eq(l.keys[1], "bc");
    cr_assert_eq(l.types[1], TG_J_OBJECT);
    cr_assert_str_eq(l.keys[2], "d");
    cr_assert_eq(l.types[2], TG_J_STRING);
    cr_assert_str_eq(l.keys[3], "n");
    cr_assert_eq(l.types[3], TG_J_NULL);

    cr_assert_eq(each_all("{}", &l), 0);
    cr_assert_eq(l.n, 0, "empty object: no call");
    cr_assert_eq(each_all("{ \n}", &l), 0);
    cr_assert_eq(l.n, 0);

    /* malformed at the iterated level (the value scan skips it) */
    cr_assert_eq(each_all("{\"a\":1,\"b\":tru}", &l), -1);
    cr_assert_eq(l.n, 1, "members before the fault were given");
    cr_assert_eq(each_all("{\"a\":1,}", &l), -1);
    cr_assert_eq(each_all("{\"a\" 1}", &l), -1);
    cr_assert_eq(l.n, 0);

    /* refused by the callback: stops there */
    cr_assert_eq(each_all("{\"a\":1,\"stop\":2,\"c\":3}", &l), -1);
    cr_assert_eq(l.n, 1, "nothing after the refused member");

    /* not an object */
    memset(&l, 0, sizeof(l));
    cr_assert_eq(tg_jobj_each("[1]", (tg_jspan_t){.off = 0, .len = 3, .type = TG_J_ARRAY},
                              each_record, &l),
                 -1);
    cr_assert_eq(l.n, 0);
}

Test(jscan, object_each_it_partial)
{
    /* a cut object (partial iteration: -2 inside) is -1, after the members
     * that were whole */
    const char *s = "{\"a\":1,\"b\":\"xx";
    tg_jobj_iter_t it;
    each_log_t l = {0};
    cr_assert_eq(tg_jobj_begin_partial(&it, s, strlen(s), 0), 0);
    cr_assert_eq(tg_jobj_each_it(&it, each_record, &l), -1);
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.keys[0], "a");

    /* whole: 0, and <pos> is just past the closing brace */
    const char *t = "{\"a\":1,\"b\":[2]}  ";
    memset(&l, 0, sizeof(l));
    cr_assert_eq(tg_jobj_begin_partial(&it, t, strlen(t), 0), 0);
    cr_assert_eq(tg_jobj_each_it(&it, each_record, &l), 0);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(it.pos, 15);

    /* the rest of an iteration already under way */
    memset(&l, 0, sizeof(l));
    tg_jspan_t k, v;
    cr_assert_eq(tg_jobj_begin_partial(&it, t, strlen(t), 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_each_it(&it, each_record, &l), 0);
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.keys[0], "b");
    cr_assert_eq(l.types[0], TG_J_ARRAY);
}

Test(jscan, array_iteration)
{
    const char *s = "[ 1, \"two\", [3], {\"4\":4}, null ]";
    tg_jspan_t v, e;
    cr_assert_gt(scan(s, &v), 0);
    tg_jarr_iter_t it;
    tg_jarr_begin(&it, s, v);
    tg_jtype_t want[] = {TG_J_NUMBER, TG_J_STRING, TG_J_ARRAY, TG_J_OBJECT, TG_J_NULL};
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(tg_jarr_next(&it, &e), 1);
        cr_assert_eq(e.type, want[i]);
    }
    cr_assert_eq(tg_jarr_next(&it, &e), 0);
    const char *t = "[1,]";
    cr_assert_eq(scan(t, &v), -1);
    v = (tg_jspan_t){.off = 0, .len = 4, .type = TG_J_ARRAY};
    tg_jarr_begin(&it, t, v);
    cr_assert_eq(tg_jarr_next(&it, &e), 1);
    cr_assert_eq(tg_jarr_next(&it, &e), -1);
    const char *u = "[]";
    cr_assert_gt(scan(u, &v), 0);
    tg_jarr_begin(&it, u, v);
    cr_assert_eq(tg_jarr_next(&it, &e), 0);
}

Test(jscan, partial_iteration)
{
    const char *s = "{\"jsonrpc\":\"2.0\",\"id\":1234,\"method\":\"tools/call\",\"params\":{\"a\":\"xxxx";
    size_t n = strlen(s);
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    cr_assert_eq(tg_jobj_begin_partial(&it, s, n, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert(tg_jstr_eq(s, k, "jsonrpc"));
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert(tg_jstr_eq(s, k, "id"));
    cr_assert_eq(v.len, 4);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert(tg_jstr_eq(s, v, "tools/call"));
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2, "sticky");

    /* cut inside the id number: the digits may be incomplete */
    cr_assert_eq(tg_jobj_begin_partial(&it, s, 25, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
    /* cut right after the number's last digit: still unknown */
    cr_assert_eq(tg_jobj_begin_partial(&it, s, 26, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
    /* cut after the comma: the id is whole */
    cr_assert_eq(tg_jobj_begin_partial(&it, s, 27, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(v.len, 4);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);

    /* a complete object also iterates partially */
    const char *c = "{\"a\":1 } trailing";
    cr_assert_eq(tg_jobj_begin_partial(&it, c, strlen(c), 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 0);
    cr_assert_eq(it.pos, 8, "just past the closing brace");
    cr_assert_eq(tg_jobj_begin_partial(&it, "{ }", 3, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 0);
    cr_assert_eq(it.pos, 3);
    cr_assert_eq(tg_jobj_begin_partial(&it, "{\"a\":1]", 7, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), 1);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -1, "bracket of the wrong kind");
    /* malformed before the cut */
    cr_assert_eq(tg_jobj_begin_partial(&it, "{\"a\" 1", 6, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -1);
    cr_assert_eq(tg_jobj_begin_partial(&it, " [1]", 4, 0), -1);
    cr_assert_eq(tg_jobj_begin_partial(&it, "  ", 2, 0), -2);
    cr_assert_eq(tg_jobj_begin_partial(&it, "{", 1, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
    cr_assert_eq(tg_jobj_begin_partial(&it, "{\"i", 3, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
    cr_assert_eq(tg_jobj_begin_partial(&it, "{\"id\":tr", 8, 0), 0);
    cr_assert_eq(tg_jobj_next(&it, &k, &v), -2);
}

Test(jscan, jstr_eq_and_decode)
{
    const char *s = "\"t\\u006fols/c\\u0061ll\"";
    tg_jspan_t v;
    cr_assert_gt(scan(s, &v), 0);
    cr_assert(tg_jstr_eq(s, v, "tools/call"));
    cr_assert_not(tg_jstr_eq(s, v, "tools/cal"));
    cr_assert_not(tg_jstr_eq(s, v, "tools/calls"));
    char out[64];
    cr_assert_eq(tg_jstr_decode(s, v, out, sizeof out), 10);
    cr_assert_str_eq(out, "tools/call");
    cr_assert_eq(tg_jstr_decode(s, v, out, 11), 10, "exact fit with the NUL");
    cr_assert_eq(tg_jstr_decode(s, v, out, 10), -1, "no room for the NUL");

    /* every escape, a BMP code point and a surrogate pair */
    const char *e = "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00x\"";
    cr_assert_gt(scan(e, &v), 0);
    cr_assert_eq(tg_jstr_decode(e, v, out, sizeof out), 8 + 2 + 3 + 4 + 1);
    cr_assert_str_eq(out, "\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x");
    cr_assert(tg_jstr_eq(e, v, "\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x"));

    /* raw UTF-8 passes through; unescaped spans compare bytewise */
    const char *r = "\"caf\xc3\xa9\"";
    cr_assert_gt(scan(r, &v), 0);
    cr_assert(tg_jstr_eq(r, v, "caf\xc3\xa9"));
    cr_assert_eq(tg_jstr_decode(r, v, out, sizeof out), 5);
    cr_assert_str_eq(out, "caf\xc3\xa9");

    /* NUL refused; an escaped and a raw spelling compare equal */
    const char *z = "\"a\\u0000b\"";
    cr_assert_gt(scan(z, &v), 0);
    cr_assert_eq(tg_jstr_decode(z, v, out, sizeof out), -1);
    cr_assert_not(tg_jstr_eq(z, v, "a"));
    const char *m = "\"caf\\u00e9\"";
    cr_assert_gt(scan(m, &v), 0);
    cr_assert(tg_jstr_eq(m, v, "caf\xc3\xa9"));

    /* empty string; non-strings never match */
    cr_assert_gt(scan("\"\"", &v), 0);
    cr_assert(tg_jstr_eq("\"\"", v, ""));
    cr_assert_eq(tg_jstr_decode("\"\"", v, out, 1), 0);
    cr_assert_gt(scan("12", &v), 0);
    cr_assert_not(tg_jstr_eq("12", v, "12"));
    cr_assert_eq(tg_jstr_decode("12", v, out, sizeof out), -1);
}

Test(jscan, jnum_u64)
{
    struct {
        const char *s;
        uint64_t max;
        int rc;
        uint64_t v;
    } c[] = {
        {"0", 10, 0, 0},
        {"-0", 10, 0, 0},
        {"10", 10, 0, 10},
        {"11", 10, -1, 0},
        {"-1", 10, -1, 0},
        {"1.0", 10, -1, 0},
        {"1e1", 100, -1, 0},
        {"18446744073709551615", UINT64_MAX, 0, UINT64_MAX},
        {"18446744073709551616", UINT64_MAX, -1, 0},
        {"99999999999999999999", UINT64_MAX, -1, 0},
        {"30000", UINT64_MAX, 0, 30000},
        /* eight digits at a time, then the rest one by one */
        {"12345678", UINT64_MAX, 0, 12345678},
        {"1000000001", UINT64_MAX, 0, 1000000001},
        {"9876543210987654321", UINT64_MAX, 0, 9876543210987654321ULL},
        {"1234567.5", UINT64_MAX, -1, 0},
        {"123456789e1", UINT64_MAX, -1, 0},
        {"12345678901", 12345678900, -1, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tg_jspan_t v;
        cr_assert_gt(scan(c[i].s, &v), 0);
        uint64_t out = 777;
        cr_assert_eq(tg_jnum_u64(c[i].s, v, c[i].max, &out), c[i].rc, "%s", c[i].s);
        cr_assert_eq(out, c[i].rc == 0 ? c[i].v : 777, "%s", c[i].s);
    }
    /* every length up to 20 digits, against strtoull */
    uint64_t seed = 0x2545F4914F6CDD1DULL;
    for (int round = 0; round < 20000; round++) {
        char d[24];
        size_t len = 1 + (size_t)(round % 20);
        for (size_t i = 0; i < len; i++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            d[i] = (char)('0' + (i == 0 ? 1 + seed % 9 : seed % 10));
        }
        d[len] = '\0';
        errno = 0;
        unsigned long long want = strtoull(d, NULL, 10);
        bool fits = errno != ERANGE;
        tg_jspan_t n = {.off = 0, .len = len, .type = TG_J_NUMBER, .escaped = false};
        uint64_t got = 0;
        cr_assert_eq(tg_jnum_u64(d, n, UINT64_MAX, &got), fits ? 0 : -1, "%s", d);
        if (fits)
            cr_assert_eq(got, (uint64_t)want, "%s", d);
    }
    tg_jspan_t v;
    cr_assert_gt(scan("\"5\"", &v), 0);
    uint64_t out;
    cr_assert_eq(tg_jnum_u64("\"5\"", v, 10, &out), -1, "strings are not numbers");
}

Test(jscan, linecol)
{
    const char *s = "{\n  \"a\": 1,\n\n  \"b\": x\n}";
    int line, col;
    tg_jscan_linecol(s, strlen(s), 0, &line, &col);
    cr_assert_eq(line, 1);
    cr_assert_eq(col, 1);
    tg_jscan_linecol(s, strlen(s), 1, &line, &col);
    cr_assert_eq(line, 1);
    cr_assert_eq(col, 2, "the newline itself is on line 1");
    tg_jscan_linecol(s, strlen(s), 4, &line, &col);
    cr_assert_eq(line, 2);
    cr_assert_eq(col, 3);
    const char *x = strchr(s, 'x');
    tg_jscan_linecol(s, strlen(s), (size_t)(x - s), &line, &col);
    cr_assert_eq(line, 4);
    cr_assert_eq(col, 8);
    tg_jscan_linecol(s, strlen(s), 9999, &line, &col);
    cr_assert_eq(line, 5);
    cr_assert_eq(col, 2, "offsets past the end clamp to the end");
}

static const char *cfg =
    "{\n"
    "  \"router\": {\"instance\": \"host-a\", \"max_frame_bytes\": \"4Mi\"},\n"
    "  \"agents\": [\n"
    "    {\"id\": \"search\", \"command\": [\"/usr/bin/search\", \"--x\"],\n"
    "     \"execution_limits\": {\"rate_limit\": \"100/minute\"},\n"
    "     \"tools\": {\"web\": {\"rate_limit\": \"10/minute\"}, \"0\": 5}},\n"
    "    {\"id\": \"other\", \"execution_limits\": {\"rate_limit\": \"1/s\", \"rate_limit\": \"2/s\"}}\n"
    "  ]\n"
    "}\n";

static const char *path_text(const char *path, char *out, size_t cap)
{
    tg_jspan_t v;
    if (tg_jscan_find_path(cfg, strlen(cfg), path, &v) != 0)
        return NULL;
    size_t n = v.len < cap - 1 ? v.len : cap - 1;
    memcpy(out, cfg + v.off, n);
    out[n] = 0;
    return out;
}

Test(jscan, find_path)
{
    char b[256];
    cr_assert_str_eq(path_text("router.instance", b, sizeof b), "\"host-a\"");
    cr_assert_str_eq(path_text("agents.0.execution_limits.rate_limit", b, sizeof b), "\"100/minute\"");
    cr_assert_str_eq(path_text("agents.0.tools.web.rate_limit", b, sizeof b), "\"10/minute\"");
    cr_assert_str_eq(path_text("agents.0.tools.0", b, sizeof b), "5", "numeric key in an object");
    cr_assert_str_eq(path_text("agents.0.command.1", b, sizeof b), "\"--x\"");
    cr_assert_str_eq(path_text("agents.1.id", b, sizeof b), "\"other\"");
    cr_assert_str_eq(path_text("agents.1.execution_limits.rate_limit", b, sizeof b), "\"2/s\"",
                     "last duplicate wins");
    cr_assert_null(path_text("agents.2", b, sizeof b));
    cr_assert_null(path_text("agents.x", b, sizeof b));
    cr_assert_null(path_text("router.instance.x", b, sizeof b));
    cr_assert_null(path_text("nope", b, sizeof b));
    cr_assert_null(path_text("agents.0.command.-1", b, sizeof b));
    tg_jspan_t v;
    cr_assert_eq(tg_jscan_find_path(cfg, strlen(cfg), "", &v), 0);
    cr_assert_eq(v.type, TG_J_OBJECT);
    cr_assert_eq(v.off, 0);
    /* line/col of a found value, as the config loader reports it */
    cr_assert_eq(tg_jscan_find_path(cfg, strlen(cfg), "agents.0.tools.web.rate_limit", &v), 0);
    int line, col;
    tg_jscan_linecol(cfg, strlen(cfg), v.off, &line, &col);
    cr_assert_eq(line, 6);
    cr_assert_eq(col, 38);
    cr_assert_eq(tg_jscan_find_path("{\"a\":", 5, "a", &v), -1, "malformed document");
}
