/* Redis store URLs: parsing and redaction (pure, no I/O; see store.h).
 *
 * The password of a store URL must never reach a log line, an audit
 * event, a denial or `toolgate check`. Everything here that produces text
 * for people goes through a redactor: error messages quote the URL only
 * in the form tg_store_url_redact_str() gives, and a parsed URL is shown
 * with tg_store_url_redact(), which has no way to print the password.
 */
#include "limits/store.h"
#include "config/jscan.h" /* tg_hexval */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bounded appender: counts the untruncated length, always terminates. */
typedef struct out {
    char *buf;
    size_t cap;
    size_t len;
} out_t;

static void out_mem(out_t *o, const char *s, size_t n)
{
    if (o->cap > 0 && o->len < o->cap - 1) {
        size_t room = o->cap - 1 - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
    if (o->cap > 0)
        o->buf[o->len < o->cap - 1 ? o->len : o->cap - 1] = '\0';
}

static void out_str(out_t *o, const char *s)
{
    out_mem(o, s, strlen(s));
}

static void out_u64(out_t *o, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    out_mem(o, tmp + i, sizeof tmp - i);
}

size_t tg_store_url_redact(const tg_store_url_t *u, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    if (cap > 0)
        buf[0] = '\0';
    bool creds = u->user[0] != '\0' || u->password[0] != '\0';
    out_str(&o, u->is_unix ? (creds ? "unix://" : "unix:") : "redis://");
    if (creds) {
        out_str(&o, u->user);
        if (u->password[0] != '\0')
            out_str(&o, ":***");
        out_str(&o, "@");
    }
    if (u->is_unix) {
        out_str(&o, u->path);
        out_str(&o, "?db=");
        out_u64(&o, u->db);
    } else {
        bool v6 = strchr(u->host, ':') != NULL;
        out_str(&o, v6 ? "[" : "");
        out_str(&o, u->host);
        out_str(&o, v6 ? "]:" : ":");
        out_u64(&o, u->port);
        out_str(&o, "/");
        out_u64(&o, u->db);
    }
    return o.len;
}

size_t tg_store_url_redact_str(const char *url, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    if (cap > 0)
        buf[0] = '\0';
    /* Where credentials may start: after "scheme://", after "unix:", or
     * (no scheme at all) at the very beginning. Over-redacting a URL that
     * does not parse costs nothing; under-redacting leaks a secret. */
    size_t start = 0;
    const char *sep = strstr(url, "://");
    if (sep != NULL)
        start = (size_t)(sep - url) + 3;
    else if (strncmp(url, "unix:", 5) == 0)
        start = 5;
    const char *at = strrchr(url + start, '@');
    const char *p = url;
    size_t auth_len = strcspn(url + start, "/?#");
    if (at != NULL) {
        out_mem(&o, url, start);
        out_str(&o, "***");
        p = at;
    } else if (sep != NULL && strncmp(url, "unix:", 5) == 0 && auth_len > 0) {
        /* unix URLs have no host: whatever stands before the path is
         * credentials missing their '@'. */
        out_mem(&o, url, start);
        out_str(&o, "***");
        p = url + start + auth_len;
    } else {
        /* "redis://user:password/0" (the '@' forgotten) reads as a host and
         * a port: a "port" that is not a number may be a password. */
        const char *auth = url + start;
        const char *colon = NULL;
        for (const char *c = auth; c < auth + auth_len; c++) {
            if (*c == ':')
                colon = c;
            else if (*c == ']')
                colon = NULL;
        }
        if (colon != NULL &&
            strspn(colon + 1, "0123456789") < (size_t)(auth + auth_len - colon - 1)) {
            out_mem(&o, url, (size_t)(colon + 1 - url));
            out_str(&o, "***");
            p = auth + auth_len;
        }
    }
    /* A "password=" query parameter, as some clients accept. */
    for (;;) {
        const char *pw = strstr(p, "password=");
        if (pw == NULL)
            break;
        pw += strlen("password=");
        out_mem(&o, p, (size_t)(pw - p));
        out_str(&o, "***");
        p = pw + strcspn(pw, "&#");
    }
    out_str(&o, p);
    return o.len;
}

void tg_store_url_wipe(tg_store_url_t *u)
{
    /* explicit_bzero: a plain memset of memory about to be dropped may be
     * optimised away. */
    explicit_bzero(u->password, sizeof u->password);
    explicit_bzero(u->user, sizeof u->user);
}

/* Fill <err> with "store URL '<redacted>': <what>". */
__attribute__((format(printf, 3, 4))) static int url_fail(tg_err_t *err, const char *url,
                                                          const char *fmt, ...)
{
    char shown[160];
    size_t n = tg_store_url_redact_str(url, shown, sizeof shown);
    if (n >= sizeof shown)
        memcpy(shown + sizeof shown - 4, "...", 4);
    int k = snprintf(err->msg, sizeof err->msg, "store URL '%s': ", shown);
    if (k < 0 || (size_t)k >= sizeof err->msg)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + k, sizeof err->msg - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* %-decode <n> bytes of <s> into <dst> (<cap> bytes incl. NUL). 0, or -1
 * on a bad escape, an encoded NUL, or overflow. */
static int pct_decode(char *dst, size_t cap, const char *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int hi = tg_hexval((unsigned char)s[i + 1]), lo = tg_hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (j + 1 >= cap)
            return -1;
        dst[j++] = c;
    }
    dst[j] = '\0';
    return 0;
}

/* Digits only, value in [lo, hi]. */
static int parse_uint(const char *s, size_t n, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (n == 0 || n > 10)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "[user]:password" of <n> bytes; a lone "user" has no password to AUTH
 * with and is refused rather than guessed at. */
static int parse_userinfo(tg_store_url_t *u, const char *s, size_t n, const char *url,
                          tg_err_t *err)
{
    const char *colon = memchr(s, ':', n);
    if (colon == NULL)
        return url_fail(err, url,
                        "credentials: expected [user]:password@ (a user alone cannot "
                        "authenticate; percent-encode ':' and '@' in them)");
    size_t ulen = (size_t)(colon - s);
    if (pct_decode(u->user, sizeof u->user, s, ulen) < 0)
        return url_fail(err, url, "user: bad percent-encoding or longer than %d bytes",
                        TG_STORE_CRED_MAX - 1);
    if (pct_decode(u->password, sizeof u->password, colon + 1, n - ulen - 1) < 0)
        return url_fail(err, url, "password: bad percent-encoding or longer than %d bytes",
                        TG_STORE_CRED_MAX - 1);
    if (u->password[0] == '\0' && u->user[0] != '\0')
        return url_fail(err, url, "credentials: user '%s' has an empty password", u->user);
    return 0;
}

static bool host_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

static int parse_tcp(tg_store_url_t *u, const char *url, const char *rest, tg_err_t *err)
{
    /* The last '@' ends the credentials: a stray unencoded '@' in a
     * password then still parses as the operator meant. */
    const char *at = strrchr(rest, '@');
    const char *hp = rest;
    if (at != NULL) {
        if (parse_userinfo(u, rest, (size_t)(at - rest), url, err) < 0)
            return -1;
        hp = at + 1;
    }
    const char *port_at = NULL;
    const char *end;
    if (hp[0] == '[') {
        const char *close = strchr(hp, ']');
        if (close == NULL)
            return url_fail(err, url, "host: '[' without ']'");
        size_t n = (size_t)(close - hp - 1);
        if (n == 0 || n >= sizeof u->host)
            return url_fail(err, url, "host: empty or too long IPv6 literal");
        memcpy(u->host, hp + 1, n);
        u->host[n] = '\0';
        unsigned char tmp[16];
        if (inet_pton(AF_INET6, u->host, tmp) != 1)
            return url_fail(err, url, "host: '%s' is not an IPv6 address", u->host);
        end = close + 1;
        if (*end == ':')
            port_at = end + 1;
        else if (*end != '\0' && *end != '/')
            return url_fail(err, url, "host: expected ':' or '/' after ']'");
    } else {
        size_t n = strcspn(hp, ":/?#");
        if (n == 0)
            return url_fail(err, url, "host: missing");
        if (n >= sizeof u->host)
            return url_fail(err, url, "host: longer than %d bytes", TG_STORE_HOST_MAX - 1);
        for (size_t i = 0; i < n; i++) {
            if (!host_char_ok(hp[i]))
                return url_fail(err, url, "host: unexpected character '%c'", hp[i]);
        }
        memcpy(u->host, hp, n);
        u->host[n] = '\0';
        end = hp + n;
        if (*end == ':')
            port_at = end + 1;
    }
    if (port_at != NULL) {
        size_t n = strcspn(port_at, "/?#");
        uint64_t v;
        if (parse_uint(port_at, n, 1, 65535, &v) < 0)
            return url_fail(err, url, "port: expected 1..65535");
        u->port = (uint16_t)v;
        end = port_at + n;
    }
    if (*end == '/') {
        size_t n = strcspn(end + 1, "?#");
        uint64_t v = 0;
        if (n > 0 && parse_uint(end + 1, n, 0, TG_STORE_DB_MAX, &v) < 0)
            return url_fail(err, url, "db: expected a database number 0..%d", TG_STORE_DB_MAX);
        u->db = (uint32_t)v;
        end = end + 1 + n;
    }
    if (*end != '\0')
        return url_fail(err, url,
                        "unexpected '%c' (query parameters are not supported in "
                        "redis:// URLs)",
                        *end);
    return 0;
}

static int parse_unix(tg_store_url_t *u, const char *url, const char *rest, tg_err_t *err)
{
    u->is_unix = true;
    const char *path = rest;
    if (strncmp(rest, "//", 2) == 0) {
        const char *auth = rest + 2;
        const char *slash = strchr(auth, '/');
        if (slash == NULL)
            return url_fail(err, url, "path: missing (expected unix:///path or unix:/path)");
        if (slash > auth) {
            if (slash[-1] != '@')
                return url_fail(err, url, "expected [user]:password@ before the path");
            if (parse_userinfo(u, auth, (size_t)(slash - 1 - auth), url, err) < 0)
                return -1;
        }
        path = slash;
    }
    if (path[0] != '/')
        return url_fail(err, url, "path: expected an absolute socket path");
    size_t n = strcspn(path, "?#");
    if (n < 2)
        return url_fail(err, url, "path: missing");
    if (n >= sizeof u->path)
        return url_fail(err, url, "path: longer than %d bytes", TG_STORE_PATH_MAX - 1);
    memcpy(u->path, path, n);
    u->path[n] = '\0';
    const char *q = path + n;
    if (*q == '#')
        return url_fail(err, url, "unexpected '#'");
    if (*q == '?') {
        q++;
        if (strncmp(q, "db=", 3) != 0) {
            /* Name the parameter only: its value may be a secret. */
            size_t k = strcspn(q, "=&#");
            return url_fail(err, url, "query: unknown parameter '%.*s' (expected db=N)",
                            (int)(k < 32 ? k : 32), q);
        }
        uint64_t v;
        if (parse_uint(q + 3, strlen(q + 3), 0, TG_STORE_DB_MAX, &v) < 0)
            return url_fail(err, url, "db: expected a database number 0..%d", TG_STORE_DB_MAX);
        u->db = (uint32_t)v;
    }
    return 0;
}

int tg_store_url_parse(tg_store_url_t *u, const char *url, tg_err_t *err)
{
    memset(u, 0, sizeof *u);
    u->port = 6379;
    int rc;
    if (strnlen(url, TG_STORE_URL_MAX + 1) > TG_STORE_URL_MAX)
        rc = url_fail(err, url, "longer than %d bytes", TG_STORE_URL_MAX);
    else if (strncmp(url, "redis://", 8) == 0)
        rc = parse_tcp(u, url, url + 8, err);
    else if (strncmp(url, "unix:", 5) == 0)
        rc = parse_unix(u, url, url + 5, err);
    else if (strncmp(url, "rediss://", 9) == 0)
        rc = url_fail(err, url, "TLS (rediss://) is not supported: use a local TLS tunnel");
    else
        rc = url_fail(err, url,
                      "expected redis://[[user]:password@]host[:port][/db] or "
                      "unix:/path[?db=N]");
    if (rc < 0)
        tg_store_url_wipe(u);
    return rc;
}
