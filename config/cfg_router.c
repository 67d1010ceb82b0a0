/* The router section's schema: router.* (instance, listeners, admin) and
 * callers[] — what the key table's rows for them cannot say alone (name
 * checks, octal modes, users and groups, arrays with required keys) — and
 * the router's checks in tg_config_validate.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/addr.h"
#include "config/cfg_impl.h"

TG_KCHECK(tg__cfg_check_instance)
{
    char q[QUOTED_MAX];

    if (tg__cfg_name_ok(s, len, true))
        return 0;
    tg__cfg_quote(q, sizeof q, s, len);
    return tg__cfg_why(-1, msg, cap, "%s is not an instance name (expected 1 to %d of %s)", q,
                       TG_NAME_MAX, tg__cfg_name_chars_tool);
}

TG_KCHECK(tg__cfg_check_unix_path)
{
    if (s[0] != '/')
        return tg__cfg_why(-1, msg, cap,
                           "socket path \"%s\" is not absolute (expected e.g. "
                           "/run/toolgate/search.sock)",
                           s);
    if (len >= 108)
        return tg__cfg_why(-1, msg, cap,
                           "socket path is %zu bytes (expected at most 107: the "
                           "sun_path limit)",
                           len);
    return 0;
}

TG_KCHECK(tg__cfg_check_caller_name)
{
    if (tg__cfg_name_ok(s, len, true))
        return 0;
    return tg__cfg_why(-1, msg, cap, "\"%s\" is not a caller name (expected 1 to %d of %s)", s,
                       TG_NAME_MAX, tg__cfg_name_chars_tool);
}

/* ---- router.listen[] ---- */

TG_KLOAD(tg__cfg_load_mode)
{
    const char *s = tg__cfg_get_str(c, v, true);
    tg_cfg_val_t val = {0};
    char *end;

    if (!s)
        return -1;
    val.u = strtoul(s, &end, 8);
    if (*end != '\0' || val.u > k->max || s[0] != '0')
        return tg__cfg_at_err(c, false,
                              "\"%s\" is not a file mode (expected octal such as \"0660\")", s);
    tg__cfg_store(c, k, &val);
    return 0;
}

/* The id of user (or group) <s>, a name or digits. */
static bool lookup_id(const char *s, bool group, int64_t *out)
{
    char buf[4096], *end;
    unsigned long n = strtoul(s, &end, 10);

    if (*end == '\0' && n <= 0x7fffffff) {
        *out = (int64_t)n;
        return true;
    }
    if (group) {
        struct group gr, *res = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof buf, &res) == 0 && res != NULL) {
            *out = (int64_t)gr.gr_gid;
            return true;
        }
        return false;
    }
    struct passwd pw, *res = NULL;
    if (getpwnam_r(s, &pw, buf, sizeof buf, &res) == 0 && res != NULL) {
        *out = (int64_t)pw.pw_uid;
        return true;
    }
    return false;
}

/* owner and group: a name or a number (JSON integer or digits), resolved
 * now so that a typo is a config error, not a failed chown. */
TG_KLOAD(tg__cfg_load_owner)
{
    bool group = strcmp(tg_cfg_key_name(k), "group") == 0;
    const char *what = group ? "group" : "user", *s;
    int64_t id = 0;
    tg_cfg_val_t val = {0};

    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > 0x7fffffff)
            return tg__cfg_at_err(c, false, "%s id %lld is out of range (expected 0..2147483647)",
                                  what, (long long)n);
        id = (int64_t)n;
    } else if (!(s = tg__cfg_get_str(c, v, true))) {
        return -1;
    } else if (!lookup_id(s, group, &id)) {
        return tg__cfg_at_err(
            c, false, "no %s named \"%s\" on this host (expected a %s name or a numeric id)", what,
            s, what);
    }
    val.u = (uint64_t)id;
    tg__cfg_store(c, k, &val);
    return 0;
}

TG_KCHECK(tg__cfg_check_http_addr)
{
    struct sockaddr_storage ss;
    tg_err_t e = {0};

    (void)len;
    if (tg_addr_parse(s, "address", &ss, &e) < 0)
        return tg__cfg_why(-1, msg, cap, "%s", e.msg);
    return 0;
}

TG_KCHECK(tg__cfg_check_http_path)
{
    if (s[0] != '/' || len >= TG_HTTP_PATH_MAX)
        return tg__cfg_why(-1, msg, cap,
                           "\"%.64s\" is not an endpoint path (expected an absolute path under "
                           "%d bytes, e.g. \"/mcp\")",
                           s, TG_HTTP_PATH_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '?' || ch == '#' || ch == '%')
            return tg__cfg_why(-1, msg, cap,
                               "endpoint path \"%.64s\" holds a byte a request path would not "
                               "match literally (expected printable ASCII without ?, # or %%)",
                               s);
    }
    return 0;
}

/* tls: {"cert": FILE, "key": FILE}, or "off". */
TG_KLOAD(tg__cfg_load_tls)
{
    tg_listen_cfg_t *l = c->item;

    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "off") != 0)
            return tg__cfg_at_err(c, false,
                                  "\"%.32s\" is not a TLS setting (expected {\"cert\": FILE, "
                                  "\"key\": FILE} or \"off\")",
                                  json_string_value(v));
        l->tls_off = true;
        return 0;
    }
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "{\"cert\": FILE, \"key\": FILE} or \"off\"");
    if (tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (l->tls_cert == NULL || l->tls_key == NULL)
        return tg__cfg_at_err(c, false, "tls needs both \"cert\" and \"key\" (PEM files)");
    return 0;
}

/* allowed_origins: exact Origin values, "scheme://host[:port]". */
TG_KLOAD(tg__cfg_load_origins)
{
    tg_listen_cfg_t *l = c->item;
    size_t n;
    char **out;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of origins such as \"https://app.example\"");
    n = json_array_size(v);
    if (n > TG_HTTP_ORIGINS_MAX)
        return tg__cfg_at_err(c, false, "%zu origins (expected at most %d)", n,
                              TG_HTTP_ORIGINS_MAX);
    if (!(out = calloc(n + 1, sizeof *out)))
        return tg__cfg_at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i);
        const char *o = tg__cfg_get_str(c, json_array_get(v, i), true);
        int rc = o ? 0 : -1;
        const char *sep = o ? strstr(o, "://") : NULL;
        if (rc == 0 && (sep == NULL || sep == o || sep[3] == '\0' || strchr(sep + 3, '/') ||
                        strlen(o) > 255))
            rc = tg__cfg_at_err(c, false,
                                "\"%.64s\" is not an origin (expected scheme://host[:port], "
                                "no path, e.g. \"https://app.example\")",
                                o);
        if (rc == 0 && !(out[i] = strdup(o)))
            rc = tg__cfg_at_err(c, false, "out of memory");
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            tg__cfg_argv_free(out);
            return -1;
        }
    }
    tg__cfg_argv_free(l->allowed_origins);
    l->allowed_origins = out;
    return 0;
}

/* router.listen[].agents: 1..TG_CFG_AGENTS_MAX distinct agent ids.
 * Whether each is a configured mcp agent fit to prefix is validation's
 * (agents[] may come later in the file). */
TG_KLOAD(tg__cfg_load_listen_agents)
{
    tg_listen_cfg_t *l = c->item;
    size_t n;
    char **out;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of agent ids such as [\"fs\", \"search\"]");
    n = json_array_size(v);
    if (n == 0 || n > TG_CFG_AGENTS_MAX)
        return tg__cfg_at_err(c, false,
                              "%zu agent ids (expected 1 to %d; for one agent without a "
                              "prefix, write \"agent\")",
                              n, TG_CFG_AGENTS_MAX);
    if (!(out = calloc(n, sizeof *out)))
        return tg__cfg_at_err(c, false, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i), rc = 0;
        const char *id = tg__cfg_get_str(c, json_array_get(v, i), true);
        if (!id)
            rc = -1;
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (strcmp(out[j], id) == 0)
                rc = tg__cfg_at_err(c, false,
                                    "agent \"%.*s\" is also agents[%zu] (expected each id once)",
                                    TG_NAME_MAX, id, j);
        if (rc == 0 && !(out[i] = strdup(id)))
            rc = tg__cfg_at_err(c, false, "out of memory");
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return -1;
        }
    }
    for (size_t i = 0; i < l->nagents; i++)
        free(l->agents[i]);
    free(l->agents);
    l->agents = out;
    l->nagents = n;
    return 0;
}

static int listen_http_one(tg_cfg_ctx_t *c, tg_listen_cfg_t *l)
{
    struct sockaddr_storage ss;
    tg_err_t e = {0};

    if (l->unix_path)
        return tg__cfg_at_err(c, false,
                              "a listener is \"unix\" or \"http\", not both (make two entries)");
    if (l->dialect != TG_DIALECT_MCP)
        return tg__cfg_at_err(c, false,
                              "an http listener speaks MCP (Streamable HTTP): remove \"dialect\"");
    if (!l->agent && !l->agents)
        return tg__cfg_at_err(c, false,
                              "an http listener needs \"agent\" (agent id) or \"agents\" (a "
                              "list of agent ids)");
    if (!l->http_path && !(l->http_path = strdup(TG_HTTP_DEF_PATH)))
        return tg__cfg_at_err(c, false, "out of memory");
    if (tg_addr_parse(l->http_addr, "address", &ss, &e) == 0 && !tg_addr_loopback(&ss) &&
        !l->tls_cert && !l->tls_off)
        return tg__cfg_at_err(c, false,
                              "http listener %s is not on loopback and has no tls: bearer tokens "
                              "and results would cross the network in clear (add \"tls\": "
                              "{\"cert\": ..., \"key\": ...}, or \"tls\": \"off\" behind a "
                              "TLS-terminating proxy)",
                              l->http_addr);
    return 0;
}

static int listen_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    tg_listen_cfg_t *l = (tg_listen_cfg_t *)c->items + i;

    l->mode = 0660;
    l->owner = l->group = -1;
    c->item = l;
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, "router.listen[]") < 0)
        return -1;
    if (l->agent && l->agents)
        return tg__cfg_at_err(c, false,
                              "a listener serves one \"agent\" or a list of \"agents\", not "
                              "both (keep \"agents\" and put the single id in it)");
    if (l->dialect == TG_DIALECT_OPENSENTIENCE && l->agents)
        return tg__cfg_at_err(c, false,
                              "an opensentience listener routes calls by tool_id to "
                              "every opensentience agent (remove \"agents\")");
    if (l->http_addr)
        return listen_http_one(c, l);
    if (l->http_path || l->tls_cert || l->tls_off || l->allowed_origins || l->max_header_bytes ||
        l->max_requests || l->header_timeout_ms || l->keepalive_timeout_ms || l->max_sessions ||
        l->sessions_per_caller || l->session_idle_ms)
        return tg__cfg_at_err(c, false,
                              "path, tls, allowed_origins and the HTTP bounds belong to an "
                              "\"http\" listener (this one is \"unix\")");
    if (l->dialect == TG_DIALECT_OPENSENTIENCE && l->agent)
        return tg__cfg_at_err(c, false,
                              "an opensentience listener routes calls by tool_id to "
                              "every opensentience agent (remove \"agent\")");
    if (!l->unix_path || (!l->agent && !l->agents && l->dialect == TG_DIALECT_MCP))
        return tg__cfg_at_err(c, false,
                              "a listener needs \"unix\" (socket path) or \"http\" (HOST:PORT), "
                              "and \"agent\" (agent id) or \"agents\" (a list of agent ids)");
    return 0;
}

TG_KLOAD(tg__cfg_load_listen)
{
    static const tg_cfg_array_t listeners = {"listener", TG_CFG_LISTEN_MAX,
                                             true,       sizeof(tg_listen_cfg_t),
                                             listen_one, tg__cfg_listen_free};
    (void)k;
    return tg__cfg_load_array(c, v, &listeners, &c->cfg->listen, &c->cfg->nlisten);
}

/* router.admin: "HOST:PORT", or {"listen": "HOST:PORT", bounds...}. */
TG_KLOAD(tg__cfg_load_admin)
{
    if (json_is_string(v))
        return tg__cfg_load_default(c, v, tg_cfg_key_child(k->path, "listen", 6, 0));
    if (!json_is_object(v))
        return tg__cfg_type_err(c, v, "a \"HOST:PORT\" string or an object");
    if (tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    if (c->cfg->admin_addr == NULL)
        return tg__cfg_at_err(c, false, "router.admin needs \"listen\" (a loopback HOST:PORT)");
    return 0;
}

/* ---- callers[] ---- */

TG_KLOAD(tg__cfg_load_caller_id)
{
    tg_cfg_val_t val = {0};

    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL)
        return tg__cfg_type_err(c, v, "a numeric id from 0 to 4294967294");
    val.u = (uint64_t)json_integer_value(v);
    tg__cfg_store(c, k, &val);
    return 0;
}

/* A caller's limits take the per-tool keys (rate, burst, concurrency). */
TG_KLOAD(tg__cfg_load_caller_limits)
{
    c->lim = &((tg_caller_cfg_t *)c->item)->lim;
    return tg__cfg_want_object(c, v) < 0 ? -1 : tg__cfg_walk(c, v, k->path);
}

/* A caller is a connection to this toolgate: its bucket is local. */
TG_KLOAD(tg__cfg_load_caller_rate_scope)
{
    int i = tg__cfg_get_enum(c, v, k);

    if (i == 1)
        return tg__cfg_at_err(c, false,
                              "\"shared\" is for an agent's or a tool's rate (a "
                              "caller's rate_limit is per toolgate)");
    return i < 0 ? -1 : 0;
}

/* ---- callers[].tokens ---- */

static int hex_val(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int tg_config_token_digest_parse(const char *s, size_t len, uint8_t out[TG_TOKEN_DIGEST_BYTES],
                                 char *why, size_t cap)
{
    static const char expect[] = "(expected \"sha256:\" and 64 hex digits, as `toolgate token "
                                 "new` or `toolgate token digest` prints)";

    if (len < 7 || memcmp(s, "sha256:", 7) != 0)
        return tg__cfg_why(-1, why, cap, "not a token digest %s", expect);
    if (len != TG_TOKEN_DIGEST_TEXT)
        return tg__cfg_why(-1, why, cap, "the digest has %zu hex digits %s", len - 7, expect);
    for (size_t i = 0; i < TG_TOKEN_DIGEST_BYTES; i++) {
        int hi = hex_val(s[7 + 2 * i]), lo = hex_val(s[8 + 2 * i]);
        if (hi < 0 || lo < 0)
            return tg__cfg_why(-1, why, cap, "a byte of the digest is not hex %s", expect);
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* The digests of a caller's bearer tokens, stored as 32-byte binaries.
 * A digest is not the token, but it is still not echoed: an operator who
 * pasted the token itself by mistake must not see it in a log. */
TG_KLOAD(tg__cfg_load_caller_tokens)
{
    tg_caller_cfg_t *cc = c->item;
    uint8_t(*d)[TG_TOKEN_DIGEST_BYTES];
    size_t n;

    (void)k;
    if (!json_is_array(v))
        return tg__cfg_type_err(c, v, "an array of \"sha256:...\" token digests");
    n = json_array_size(v);
    if (n > TG_CALLER_TOKENS_MAX)
        return tg__cfg_at_err(c, false, "%zu tokens (expected at most %d)", n,
                              TG_CALLER_TOKENS_MAX);
    if (n && !(d = calloc(n, sizeof *d)))
        return tg__cfg_at_err(c, false, "out of memory");
    if (n == 0)
        d = NULL;
    for (size_t i = 0; i < n; i++) {
        int pushed = tg__cfg_push_idx(c, i), rc = -1;
        const json_t *e = json_array_get(v, i);
        char why[256];
        if (!json_is_string(e))
            tg__cfg_type_err(c, e, "a \"sha256:...\" token digest");
        else if (tg_config_token_digest_parse(json_string_value(e), json_string_length(e), d[i],
                                              why, sizeof why) < 0)
            tg__cfg_at_err(c, false, "%s", why);
        else
            rc = 0;
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (memcmp(d[j], d[i], sizeof d[i]) == 0)
                rc = tg__cfg_at_err(c, false, "the same digest as tokens[%zu]", j);
        tg__cfg_pop(c, pushed);
        if (rc < 0) {
            memset(d, 0, n * sizeof *d);
            free(d);
            return -1;
        }
    }
    if (cc->tokens)
        memset(cc->tokens, 0, cc->ntokens * sizeof *cc->tokens);
    free(cc->tokens);
    cc->tokens = d;
    cc->ntokens = n;
    return 0;
}

/* ---- callers[].jwt ---- */

TG_KCHECK(tg__cfg_check_jwt_claim)
{
    if (len <= TG_NAME_MAX && strcspn(s, "\"\\ \t\r\n") == len)
        return 0;
    return tg__cfg_why(-1, msg, cap, "not a claim name (expected e.g. \"sub\" or \"client_id\")");
}

/* Whether <s> is <min>..<max> base64url characters (no padding). */
static bool b64url_ok(const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);

    return n >= min && n <= max &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789-_") == n;
}

/* Member <m> of key <o> as a string, or NULL. */
static const char *member_str(const json_t *o, const char *m)
{
    return json_string_value(json_object_get(o, m));
}

/* One JWKS key: 0, or -1 with why (after "keys[i]: "). */
static int jwk_check(const json_t *o, char *why, size_t cap)
{
    static const char *const private[] = {"d", "p", "q", "dp", "dq", "qi", "k", NULL};
    const char *kty = member_str(o, "kty"), *alg = member_str(o, "alg"), *use;
    bool rsa;

    if (!json_is_object(o))
        return tg__cfg_why(-1, why, cap, "expected an object");
    for (size_t i = 0; private[i]; i++)
        if (json_object_get(o, private[i]))
            return tg__cfg_why(-1, why, cap,
                               "holds private key member \"%s\" (publish only the public key)",
                               private[i]);
    if (!kty || (strcmp(kty, "RSA") != 0 && strcmp(kty, "EC") != 0))
        return tg__cfg_why(-1, why, cap, "\"kty\" must be \"RSA\" or \"EC\"");
    rsa = kty[0] == 'R';
    if (json_object_get(o, "kid") && !json_is_string(json_object_get(o, "kid")))
        return tg__cfg_why(-1, why, cap, "\"kid\" must be a string");
    if ((use = member_str(o, "use")) && strcmp(use, "sig") != 0)
        return tg__cfg_why(-1, why, cap, "\"use\" is \"%.16s\" (expected \"sig\")", use);
    if (json_object_get(o, "alg") && (!alg || strcmp(alg, rsa ? "RS256" : "ES256") != 0))
        return tg__cfg_why(-1, why, cap, "\"alg\" must be \"%s\" for a %s key",
                           rsa ? "RS256" : "ES256", kty);
    if (rsa) {
        /* 2048 to 8192 bits of modulus, an exponent of at most 6 bytes */
        if (!member_str(o, "n") || !b64url_ok(member_str(o, "n"), 342, 1366))
            return tg__cfg_why(-1, why, cap,
                               "\"n\" must be a 2048- to 8192-bit modulus in base64url");
        if (!member_str(o, "e") || !b64url_ok(member_str(o, "e"), 1, 8))
            return tg__cfg_why(-1, why, cap, "\"e\" must be an exponent in base64url");
        return 0;
    }
    if (!member_str(o, "crv") || strcmp(member_str(o, "crv"), "P-256") != 0)
        return tg__cfg_why(-1, why, cap, "\"crv\" must be \"P-256\" (ES256)");
    if (!member_str(o, "x") || !b64url_ok(member_str(o, "x"), 43, 43) || !member_str(o, "y") ||
        !b64url_ok(member_str(o, "y"), 43, 43))
        return tg__cfg_why(-1, why, cap, "\"x\" and \"y\" must be 32 bytes each in base64url");
    return 0;
}

int tg_config_jwks_check(const char *text, size_t len, char *why, size_t cap)
{
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je), *keys;
    char sub[192];
    int rc = 0;

    if (!doc)
        return tg__cfg_why(-1, why, cap, "not JSON (line %d: %s)", je.line, je.text);
    keys = json_object_get(doc, "keys");
    if (!json_is_array(keys) || json_array_size(keys) == 0 ||
        json_array_size(keys) > TG_JWKS_KEYS_MAX)
        rc = tg__cfg_why(-1, why, cap, "expected {\"keys\": [...]} with 1 to %d keys",
                         TG_JWKS_KEYS_MAX);
    for (size_t i = 0; rc == 0 && i < json_array_size(keys); i++) {
        const char *kid_i = member_str(json_array_get(keys, i), "kid");
        if (jwk_check(json_array_get(keys, i), sub, sizeof sub) < 0)
            rc = tg__cfg_why(-1, why, cap, "keys[%zu]: %s", i, sub);
        for (size_t j = 0; rc == 0 && kid_i && j < i; j++) {
            const char *kid_j = member_str(json_array_get(keys, j), "kid");
            if (kid_j && strcmp(kid_i, kid_j) == 0)
                rc = tg__cfg_why(-1, why, cap, "keys[%zu]: the same \"kid\" as keys[%zu]", i, j);
        }
    }
    json_decref(doc);
    return rc;
}

int tg_config_jwks_read(const char *path, char **text, size_t *len, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc = 0;
    struct stat st;
    char *buf, inner[256];
    ssize_t n;

    if (fd < 0)
        return tg__cfg_why(-1, why, cap, "cannot read %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)TG_JWKS_FILE_MAX) {
        close(fd);
        return tg__cfg_why(-1, why, cap, "%s is not a regular file of at most %u bytes", path,
                           TG_JWKS_FILE_MAX);
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        close(fd);
        return tg__cfg_why(-1, why, cap, "out of memory");
    }
    /* One byte more than its size: a file that grew is refused, not cut. */
    n = read(fd, buf, (size_t)st.st_size + 1);
    close(fd);
    if (n < 0 || n > st.st_size)
        rc = tg__cfg_why(-1, why, cap, "cannot read %s: %s", path,
                         n < 0 ? strerror(errno) : "it grew while read");
    else if (tg_config_jwks_check(buf, (size_t)n, inner, sizeof inner) < 0)
        rc = tg__cfg_why(-1, why, cap, "%s: %s", path, inner);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = (size_t)n;
    return 0;
}

TG_KLOAD(tg__cfg_load_caller_jwt)
{
    tg_caller_cfg_t *cc = c->item;
    tg_jwt_cfg_t *j = &cc->jwt;
    static const char *const required[] = {"issuer", "audience", "jwks_file", NULL};
    char why[512], *text;
    size_t len;

    if (tg__cfg_want_object(c, v) < 0)
        return -1;
    j->leeway_ms = TG_DEF_JWT_LEEWAY_MS;
    if (tg__cfg_walk(c, v, k->path) < 0)
        return -1;
    for (size_t i = 0; required[i]; i++)
        if (!json_object_get(v, required[i]))
            return tg__cfg_at_err(c, false,
                                  "missing required key \"%s\" (a jwt needs issuer, audience "
                                  "and jwks_file)",
                                  required[i]);
    if (!j->claim && !(j->claim = strdup(TG_DEF_JWT_CLAIM)))
        return tg__cfg_at_err(c, false, "out of memory");
    if (tg_config_jwks_read(j->jwks_file, &text, &len, why, sizeof why) < 0)
        return tg__cfg_member_err(c, "jwks_file", "%s", why);
    free(text);
    cc->has_jwt = true;
    return 0;
}

static int caller_one(tg_cfg_ctx_t *c, json_t *v, size_t i)
{
    tg_caller_cfg_t *cc = (tg_caller_cfg_t *)c->items + i;

    cc->uid = cc->gid = -1;
    c->item = cc;
    if (tg__cfg_want_object(c, v) < 0 || tg__cfg_walk(c, v, "callers[]") < 0)
        return -1;
    if (!cc->name)
        return tg__cfg_at_err(c, false, "missing required key \"name\"");
    if (cc->uid < 0 && cc->gid < 0 && !cc->ntokens && !cc->has_jwt &&
        strcmp(cc->name, "default") != 0)
        return tg__cfg_at_err(c, false,
                              "caller \"%s\" needs \"uid\", \"gid\", \"tokens\" or \"jwt\" (only "
                              "\"default\" matches everyone)",
                              cc->name);
    return 0;
}

TG_KLOAD(tg__cfg_load_callers)
{
    static const tg_cfg_array_t callers = {"caller",   TG_CFG_CALLERS_MAX,
                                           true,       sizeof(tg_caller_cfg_t),
                                           caller_one, tg__cfg_caller_free};
    (void)k;
    return tg__cfg_load_array(c, v, &callers, &c->cfg->callers, &c->cfg->ncallers);
}

/* ---- validation ---- */

/* The mcp agent with id <id>, or NULL. */
static const tg_agent_cfg_t *agent_by_id(const tg_config_t *cfg, const char *id)
{
    for (size_t j = 0; id && j < cfg->nagents; j++)
        if (strcmp(cfg->agents[j].id, id) == 0)
            return &cfg->agents[j];
    return NULL;
}

/* <id>, named by listener <i> at <what> ("agent", "agents[2]"), is a
 * configured mcp agent; one in an "agents" list (<listed>) must also be
 * fit to prefix its tools when it has no tool_prefix. */
static int check_listen_agent(const tg_config_t *cfg, size_t i, const char *what, const char *id,
                              bool listed, const char *f, const char *sep, tg_err_t *err)
{
    const tg_agent_cfg_t *a = agent_by_id(cfg, id);
    char ids[LIST_MAX] = "", why[256];

    if (!a) {
        for (size_t j = 0; j < cfg->nagents; j++)
            if (cfg->agents[j].dialect == TG_DIALECT_MCP)
                tg__cfg_list_add(ids, sizeof ids, cfg->agents[j].id);
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].%s: no agent \"%s\" in agents[] (expected one "
                          "of the configured agent ids: %s)",
                          f, sep, i, what, id ? id : "", ids[0] ? ids : "none is mcp");
    }
    if (a->dialect == TG_DIALECT_OPENSENTIENCE)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].%s: agent \"%s\" speaks opensentience "
                          "(serve it on a listener with \"dialect\": \"opensentience\", which "
                          "routes by tool_id)",
                          f, sep, i, what, a->id);
    if (listed && !a->tool_prefix && tg_cfg_prefix_check(a->id, strlen(a->id), why, sizeof why) < 0)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].%s: agent id \"%s\" would prefix its tools and "
                          "%s (set \"tool_prefix\" on agents[%zu])",
                          f, sep, i, what, a->id, why, (size_t)(a - cfg->agents));
    return 0;
}

/* router.listen[i] against agents[]: an mcp listener names mcp agents,
 * an opensentience one needs an opensentience agent, paths differ. */
static int check_listener(const tg_config_t *cfg, size_t i, const char *f, const char *sep,
                          tg_err_t *err)
{
    const tg_listen_cfg_t *l = &cfg->listen[i];
    bool any_os = false;
    char what[32];

    for (size_t j = 0; j < cfg->nagents; j++)
        any_os = any_os || cfg->agents[j].dialect == TG_DIALECT_OPENSENTIENCE;
    if (l->dialect == TG_DIALECT_OPENSENTIENCE && !any_os)
        return tg_err_set(err, -1,
                          "%s%srouter.listen[%zu].dialect: no agent in agents[] speaks "
                          "opensentience (expected at least one with \"dialect\": "
                          "\"opensentience\")",
                          f, sep, i);
    if (l->dialect == TG_DIALECT_MCP && !l->agents &&
        check_listen_agent(cfg, i, "agent", l->agent, false, f, sep, err) < 0)
        return -1;
    for (size_t j = 0; j < l->nagents; j++) {
        snprintf(what, sizeof what, "agents[%zu]", j);
        if (check_listen_agent(cfg, i, what, l->agents[j], true, f, sep, err) < 0)
            return -1;
    }
    for (size_t j = 0; j < i; j++) {
        const tg_listen_cfg_t *o = &cfg->listen[j];
        bool same_unix = l->unix_path && o->unix_path && strcmp(o->unix_path, l->unix_path) == 0;
        bool same_http = l->http_addr && o->http_addr && strcmp(o->http_addr, l->http_addr) == 0;
        if (same_unix || same_http)
            return tg_err_set(err, -1,
                              "%s%srouter.listen[%zu].%s: \"%s\" is also "
                              "router.listen[%zu]",
                              f, sep, i, same_unix ? "unix" : "http",
                              same_unix ? l->unix_path : l->http_addr, j);
    }
    return 0;
}

TG_KVALID(tg__cfg_validate_router)
{
    struct sockaddr_storage ss;
    tg_err_t aerr;

    for (size_t i = 0; i < cfg->nlisten; i++)
        if (check_listener(cfg, i, f, sep, err) < 0)
            return -1;
    /* Every command refuses a bad admin address before it starts: a wrap
     * that warned and served on would hide a typo (only a port another
     * run holds is a reason to serve without the endpoint). */
    if (cfg->admin_addr != NULL && tg_addr_parse_admin(cfg->admin_addr, &ss, &aerr) < 0)
        return tg_err_set(err, -1, "%s%srouter.admin.listen: %s", f, sep, aerr.msg);
    if (!cfg->instance || !tg__cfg_name_ok(cfg->instance, strlen(cfg->instance), true))
        return tg_err_set(err, -1,
                          "%s%srouter.instance: missing or not a name (expected 1 to %d of %s)", f,
                          sep, TG_NAME_MAX, tg__cfg_name_chars_tool);
    return 0;
}
