/* Callers by bearer token or JWT: see auth.h. */
#include "router/auth/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

/* One callers[] entry as identification needs it (owned by tg_auth_t). */
typedef struct auth_caller {
    char *name;
    uint8_t (*tokens)[TG_TOKEN_DIGEST_BYTES];
    size_t ntokens;
    bool jwt;
    char *issuer, *audience, *claim;
    uint64_t leeway_ms;
    const tg_jwks_t *keys; /* borrowed from tg_auth_t.jwks */
} auth_caller_t;

/* Owned by the HTTP front; freed with tg_auth_free. */
struct tg_auth {
    auth_caller_t *callers;
    size_t n;
    tg_jwks_t **jwks; /* one per distinct jwks_file */
    size_t njwks;
    bool any;
};

void tg_auth_token_digest(const char *tok, size_t len, uint8_t out[TG_TOKEN_DIGEST_BYTES])
{
    unsigned int n = 0;

    EVP_Digest(tok, len, out, &n, EVP_sha256(), NULL);
}

void tg_auth_digest_text(const uint8_t d[TG_TOKEN_DIGEST_BYTES], char *out)
{
    static const char hex[] = "0123456789abcdef";

    memcpy(out, "sha256:", 7);
    for (size_t i = 0; i < TG_TOKEN_DIGEST_BYTES; i++) {
        out[7 + 2 * i] = hex[d[i] >> 4];
        out[8 + 2 * i] = hex[d[i] & 15];
    }
    out[TG_TOKEN_DIGEST_TEXT] = '\0';
}

/* The caller one of whose digests is <d>, or -1. Constant time over
 * every digest of every caller: the loops run to the end whatever
 * matched, and a match is folded into <idx> without a branch. */
static int match_digest(const tg_auth_t *a, const uint8_t d[TG_TOKEN_DIGEST_BYTES])
{
    unsigned found = 0, idx = 0;

    for (size_t i = 0; i < a->n; i++) {
        const auth_caller_t *c = &a->callers[i];
        for (size_t j = 0; j < c->ntokens; j++) {
            unsigned eq = (unsigned)(CRYPTO_memcmp(d, c->tokens[j], TG_TOKEN_DIGEST_BYTES) == 0);
            unsigned mask = 0u - (eq & (found ^ 1u)); /* all ones on the first match only */
            idx = (idx & ~mask) | ((unsigned)i & mask);
            found |= eq;
        }
    }
    return found ? (int)idx : -1;
}

void tg_auth_free(tg_auth_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        auth_caller_t *c = &a->callers[i];
        if (c->tokens)
            OPENSSL_cleanse(c->tokens, c->ntokens * sizeof *c->tokens);
        free(c->tokens);
        free(c->name);
        free(c->issuer);
        free(c->audience);
        free(c->claim);
    }
    for (size_t i = 0; i < a->njwks; i++)
        tg_jwks_free(a->jwks[i]);
    free(a->jwks);
    free(a->callers);
    free(a);
}

static char *dup_or_null(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;

    *oom = *oom || (s && !d);
    return d;
}

/* The keys of <path>: loaded once for every caller that names that file.
 * NULL with <err> set. */
static const tg_jwks_t *keys_for(tg_auth_t *a, const tg_config_t *cfg, size_t upto,
                                 const char *path, tg_err_t *err)
{
    tg_jwks_t *k = NULL;

    for (size_t i = 0; i < upto; i++)
        if (a->callers[i].keys && strcmp(cfg->callers[i].jwt.jwks_file, path) == 0)
            return a->callers[i].keys;
    if (tg_jwks_load(&k, path, err) < 0)
        return NULL;
    a->jwks[a->njwks++] = k;
    return k;
}

/* Copy callers[<i>] of <cfg> into <a>: 0 or -1 with <err> set. */
static int copy_caller(tg_auth_t *a, const tg_config_t *cfg, size_t i, tg_err_t *err)
{
    const tg_caller_cfg_t *cc = &cfg->callers[i];
    auth_caller_t *c = &a->callers[i];
    bool oom = false;

    c->name = dup_or_null(cc->name, &oom);
    if (cc->ntokens) {
        c->tokens = malloc(cc->ntokens * sizeof *c->tokens);
        oom = oom || !c->tokens;
        if (c->tokens) {
            memcpy(c->tokens, cc->tokens, cc->ntokens * sizeof *c->tokens);
            c->ntokens = cc->ntokens;
        }
    }
    a->any = a->any || cc->ntokens || cc->has_jwt;
    if (cc->has_jwt) {
        tg_err_t inner;
        c->jwt = true;
        c->issuer = dup_or_null(cc->jwt.issuer, &oom);
        c->audience = dup_or_null(cc->jwt.audience, &oom);
        c->claim = dup_or_null(cc->jwt.claim ? cc->jwt.claim : TG_DEF_JWT_CLAIM, &oom);
        c->leeway_ms = cc->jwt.leeway_ms;
        if (!oom && !(c->keys = keys_for(a, cfg, i, cc->jwt.jwks_file, &inner)))
            return tg_err_set(err, -1, "callers[%zu].jwt.jwks_file: %s", i, inner.msg);
    }
    return oom ? tg_err_set(err, -1, "callers[%zu]: out of memory", i) : 0;
}

int tg_auth_new(tg_auth_t **out, const tg_config_t *cfg, tg_err_t *err)
{
    tg_auth_t *a = calloc(1, sizeof *a);

    if (!a || (cfg->ncallers && (!(a->callers = calloc(cfg->ncallers, sizeof *a->callers)) ||
                                 !(a->jwks = calloc(cfg->ncallers, sizeof *a->jwks))))) {
        tg_auth_free(a);
        return tg_err_set(err, -1, "auth: out of memory");
    }
    for (size_t i = 0; i < cfg->ncallers; i++) {
        a->n = i + 1; /* freed up to here on failure */
        if (copy_caller(a, cfg, i, err) < 0) {
            tg_auth_free(a);
            return -1;
        }
    }
    *out = a;
    return 0;
}

bool tg_auth_any(const tg_auth_t *a)
{
    return a->any;
}

/* Verify <tok> for caller <c>: 0 with the claim's value in <claim>, or -1
 * with why. */
static int verify_for(const auth_caller_t *c, const char *tok, size_t len, int64_t now_s,
                      char *claim, size_t cap, const char **why)
{
    tg_jwt_want_t want = {c->issuer, c->audience, c->claim, c->leeway_ms};

    return tg_jwt_verify(c->keys, &want, tok, len, now_s, claim, cap, why);
}

/* A JWT: the caller with a jwt entry whose issuer the token carries and
 * whose name its claim holds, verified with that caller's keys. The
 * unverified payload only picks whose keys to try, so a hostile token
 * costs one signature check per caller of that name (names are unique),
 * plus one to say why when no caller has that name (so a forged token
 * reads "bad signature" rather than "unknown caller"). */
static int identify_jwt(const tg_auth_t *a, const char *tok, size_t len, int64_t now_s,
                        const char **why)
{
    char claim[TG_NAME_MAX + 1];
    json_t *p = tg_jwt_peek(tok, len);
    const char *iss = json_string_value(json_object_get(p, "iss"));
    const auth_caller_t *first = NULL;
    int rc = -1;

    *why = p ? "wrong issuer" : "malformed token";
    for (size_t i = 0; iss && i < a->n && rc < 0; i++) {
        const auth_caller_t *c = &a->callers[i];
        const char *named;
        if (!c->jwt || strcmp(c->issuer, iss) != 0)
            continue;
        first = first ? first : c;
        named = json_string_value(json_object_get(p, c->claim));
        if (!named || strcmp(named, c->name) != 0)
            continue;
        if (verify_for(c, tok, len, now_s, claim, sizeof claim, why) == 0 &&
            strcmp(claim, c->name) == 0)
            rc = (int)i;
        first = NULL; /* the reason is this caller's */
    }
    if (rc < 0 && first && verify_for(first, tok, len, now_s, claim, sizeof claim, why) == 0)
        *why = "unknown caller";
    json_decref(p);
    if (rc >= 0)
        *why = "";
    return rc;
}

int tg_auth_identify(const tg_auth_t *a, const char *tok, size_t len, int64_t now_s,
                     const char **why)
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    int r;

    if (len == 0)
        return *why = "no token", -1;
    if (len > TG_AUTH_TOKEN_MAX)
        return *why = "token too long", -1;
    tg_auth_token_digest(tok, len, d);
    r = match_digest(a, d);
    OPENSSL_cleanse(d, sizeof d);
    if (r >= 0)
        return *why = "", r;
    for (size_t i = 0; i < a->n; i++)
        if (a->callers[i].jwt && tg_jwt_shaped(tok, len))
            return identify_jwt(a, tok, len, now_s, why);
    return *why = "unknown token", -1;
}
