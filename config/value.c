/* Values of the key table's types: text or JSON in, bytes, ms, counts,
 * rates and choices out, with the "(expected ...)" messages of units.c;
 * the lists of allowed keys and choices that messages show. Pure: no
 * config state, no I/O.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/cfg_impl.h"

void tg__cfg_quote(char *out, size_t cap, const char *s, size_t len)
{
    size_t o = 0;
    bool cut = len > VALUE_SHOWN;

    if (cap < 8) {
        if (cap)
            out[0] = '\0';
        return;
    }
    if (cut)
        len = VALUE_SHOWN;
    out[o++] = '"';
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (cut && o + 5 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '"';
    out[o] = '\0';
}

int tg__cfg_why(int rc, char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;

    if (buf == NULL || cap == 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return rc;
}

bool tg__cfg_redis_scheme(const char *s)
{
    return strncmp(s, "redis://", 8) == 0 || strncmp(s, "unix:", 5) == 0;
}

void tg__cfg_list_add(char *buf, size_t cap, const char *name)
{
    size_t n = strlen(buf);
    if (n < cap)
        snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", name);
}

void tg__cfg_children(char *buf, size_t cap, const char *parent, unsigned mask)
{
    buf[0] = '\0';
    for (size_t i = 0; i < tg_cfg_nkeys; i++)
        if ((tg_cfg_keys[i].flags & mask) == mask && tg_cfg_key_is_child(&tg_cfg_keys[i], parent))
            tg__cfg_list_add(buf, cap, tg_cfg_key_name(&tg_cfg_keys[i]));
}

size_t tg__cfg_choices(char *buf, size_t cap, const char *const *choices)
{
    size_t n = 0;

    buf[0] = '\0';
    while (choices[n])
        n++;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s\"%s\"",
                 i == 0       ? ""
                 : i == n - 1 ? " or "
                              : ", ",
                 choices[i]);
    }
    return n;
}

int tg__cfg_parse_choice(const tg_cfg_key_t *k, const char *s, size_t len, const char *noun,
                         char *msg, size_t cap)
{
    char q[QUOTED_MAX], list[128];

    for (int i = 0; k->choices[i]; i++)
        if (strlen(k->choices[i]) == len && memcmp(s, k->choices[i], len) == 0)
            return i;
    tg__cfg_choices(list, sizeof list, k->choices);
    tg__cfg_quote(q, sizeof q, s, len);
    snprintf(msg, cap, "%s is not %s (expected %s)", q, noun ? noun : k->noun, list);
    return -1;
}

static const char *type_noun(tg_ktype_t t)
{
    static const char *const nouns[] = {
        [TG_KT_BYTES] = "a size",
        [TG_KT_DURATION] = "a duration",
        [TG_KT_RATE] = "a rate",
        [TG_KT_COUNT] = "a count",
        [TG_KT_MILLICORES] = "a CPU quantity",
        [TG_KT_BANDWIDTH] = "a bandwidth",
        [TG_KT_NETWORK] = "a network mode",
    };
    return tg_ktype_has_unit(t) ? nouns[t] : "a value";
}

/* A bound of row <k>: a count for a rate (its bounds are the count's). */
static void fmt_bound(char *buf, size_t cap, const tg_cfg_key_t *k, uint64_t n)
{
    tg_cfg_val_t v = {.u = n};

    if (k->type == TG_KT_RATE)
        snprintf(buf, cap, "%llu", (unsigned long long)n);
    else
        tg_cfg_key_fmt(k, &v, buf, cap);
}

void tg__cfg_range_why(char *buf, size_t cap, const tg_cfg_key_t *k)
{
    char lo[32], hi[32];

    fmt_bound(lo, sizeof lo, k, k->min);
    fmt_bound(hi, sizeof hi, k, k->max);
    if (k->type == TG_KT_RATE)
        snprintf(buf, cap, "expected at most %s calls per period", hi);
    else if (k->type == TG_KT_COUNT || k->min > 1)
        snprintf(buf, cap, "expected %s to %s", lo, hi);
    else
        snprintf(buf, cap, "expected at most %s", hi);
}

bool tg__cfg_in_range(const tg_cfg_key_t *k, const tg_cfg_val_t *v)
{
    uint64_t n = k->type == TG_KT_RATE ? v->rate.count : v->u;
    return n >= k->min && n <= k->max;
}

static int parse_network(const char *s, uint64_t *out, const char **why)
{
    static const char *const names[] = {"full", "loopback", "none"}; /* tg_network_t */

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    *why = "expected \"none\", \"loopback\" or \"full\"";
    return -EINVAL;
}

/* <s> is a duration of zero: zeros, then one of the duration suffixes. */
static bool zero_duration(const char *s)
{
    static const char *const sfx[] = {"ms", "s", "m", "h"};
    size_t z = strspn(s, "0");
    for (size_t i = 0; z > 0 && i < sizeof(sfx) / sizeof(sfx[0]); i++)
        if (strcmp(s + z, sfx[i]) == 0)
            return true;
    return false;
}

int tg__cfg_parse_text(const tg_cfg_key_t *k, const char *s, tg_cfg_val_t *out, char *msg,
                       size_t cap)
{
    const char *why = NULL;
    char q[QUOTED_MAX], rw[96];
    tg_cfg_val_t v = {0};
    int rc = -EINVAL;

    switch (k->type) {
    case TG_KT_BYTES:
        rc = tg_unit_bytes(s, &v.u, &why);
        break;
    case TG_KT_DURATION:
        /* Zero is a meaningful duration for a key whose minimum is 0
         * (router.reload_drain_timeout: at once): "0s", "0ms"... */
        if (k->min == 0 && zero_duration(s)) {
            v.u = 0;
            rc = 0;
        } else {
            rc = tg_unit_duration_ms(s, &v.u, &why);
        }
        break;
    case TG_KT_RATE:
        rc = tg_unit_rate(s, &v.rate, &why);
        break;
    case TG_KT_COUNT:
        /* Zero is a meaningful count for some keys (no queue, no
         * restarts): tg_unit_count refuses it, so it is taken here. */
        if (k->min == 0 && s[0] == '0' && strspn(s, "0") == strlen(s))
            rc = 0;
        else
            rc = tg_unit_count(s, UINT64_MAX, &v.u, &why);
        break;
    case TG_KT_MILLICORES:
        rc = tg_unit_millicores(s, &v.u, &why);
        break;
    case TG_KT_BANDWIDTH:
        rc = tg_unit_bandwidth_bps(s, &v.u, &why);
        break;
    case TG_KT_NETWORK:
        rc = parse_network(s, &v.u, &why);
        break;
    default:
        why = "expected a value with a unit";
        break;
    }
    tg__cfg_quote(q, sizeof q, s, strlen(s));
    if (rc == -EINVAL) {
        snprintf(msg, cap, "%s is not %s (%s)", q, type_noun(k->type), why);
        return -1;
    }
    if (rc == -ERANGE && k->type != TG_KT_COUNT) {
        snprintf(msg, cap, "%s is out of range (%s)", q, why);
        return -1;
    }
    if (rc != 0 || !tg__cfg_in_range(k, &v)) {
        tg__cfg_range_why(rw, sizeof rw, k);
        snprintf(msg, cap, "%s is out of range (%s)", q, rw);
        return -1;
    }
    *out = v;
    return 0;
}

const char *tg__cfg_json_noun(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

int tg__cfg_parse_json(const tg_cfg_key_t *k, const json_t *v, tg_cfg_val_t *out, char *msg,
                       size_t cap)
{
    /* What each type expects when the JSON type is wrong. */
    static const char *const want[] = {
        [TG_KT_BYTES] = "a size string such as \"4Mi\"",
        [TG_KT_DURATION] = "a duration string such as \"30s\"",
        [TG_KT_RATE] = "a rate string such as \"100/minute\"",
        [TG_KT_COUNT] = "a whole number such as 5",
        [TG_KT_MILLICORES] = "a CPU string such as \"500m\" or \"2\"",
        [TG_KT_BANDWIDTH] = "a bandwidth string such as \"10Mbps\"",
        [TG_KT_NETWORK] = "\"none\", \"loopback\" or \"full\"",
    };
    bool bare = k->type == TG_KT_BYTES && (k->flags & TG_KF_BARE_INT);

    if (json_is_string(v))
        return tg__cfg_parse_text(k, json_string_value(v), out, msg, cap);
    if (json_is_integer(v) && (k->type == TG_KT_COUNT || bare)) {
        json_int_t n = json_integer_value(v);
        tg_cfg_val_t x = {.u = n < 0 ? 0 : (uint64_t)n};
        char rw[96];
        if (n < 0 || !tg__cfg_in_range(k, &x)) {
            tg__cfg_range_why(rw, sizeof rw, k);
            snprintf(msg, cap, "%lld is out of range (%s)", (long long)n, rw);
            return -1;
        }
        *out = x;
        return 0;
    }
    snprintf(msg, cap, "expected %s%s, got %s",
             tg_ktype_has_unit(k->type) ? want[k->type] : "a value",
             bare ? " or a number of bytes" : "", tg__cfg_json_noun(v));
    return -1;
}
