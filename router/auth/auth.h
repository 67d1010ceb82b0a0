/* Caller identity over HTTP: bearer tokens (by SHA-256 digest) and JWTs
 * (RS256, ES256, keys from a local JWKS file), for the HTTP front.
 *
 * Pure cores: no loop, no I/O but reading JWKS files at setup. The front
 * builds a tg_auth_t from the config (and a new one on reload, swapping it
 * in), and for each request with "Authorization: Bearer <t>" calls
 * tg_auth_identify(): the index of the callers[] entry, or -1 with a short
 * reason for the log and the audit ("unknown token", "expired", "wrong
 * audience", "bad signature", "unknown kid").
 *
 * Secrets: a reason is a constant string, never built from the token, so
 * no part of a token or a JWT reaches a log line, an audit event or a
 * denial through it (tests/test_auth.c plants a canary). Token digests are
 * compared in constant time against every digest of every caller (no
 * early exit that tells which caller's digest was close or matched).
 *
 * Conventions: setup (tg_auth_new, tg_jwks_load) fills a tg_err_t and
 * returns 0 or -1; runtime calls return an index or -1 with a reason.
 */
#ifndef TG_ROUTER_AUTH_AUTH_H
#define TG_ROUTER_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "config/err.h"

#define TG_AUTH_TOKEN_MAX   8192u /* fixed internal bound: bytes of a bearer token or JWT */
#define TG_JWT_HEADER_MAX   1024u /* fixed internal bound: a JWT header's decoded bytes */
#define TG_JWT_PAYLOAD_MAX  6144u /* fixed internal bound: a JWT payload's decoded bytes */
#define TG_AUTH_TOKEN_BYTES 32u   /* fixed internal bound: random bytes of a `token new` token */

/* ---- bearer tokens ---- */

/* The SHA-256 digest of token <tok> (<len> bytes) into <out>. */
void tg_auth_token_digest(const char *tok, size_t len, uint8_t out[TG_TOKEN_DIGEST_BYTES]);

/* "sha256:" and 64 lower-case hex digits of <d>, NUL-terminated, into
 * <out> (at least TG_TOKEN_DIGEST_TEXT + 1 bytes). */
void tg_auth_digest_text(const uint8_t d[TG_TOKEN_DIGEST_BYTES], char *out);

/* ---- JWKS ---- */

typedef struct tg_jwks tg_jwks_t;

/* The public keys of JWKS file <path> (at most TG_JWKS_FILE_MAX bytes,
 * TG_JWKS_KEYS_MAX keys; RSA of at least 2048 bits and EC P-256), checked
 * again as config does, then read with OpenSSL. 0 with *out set, or -1
 * with <err> naming the file and the key. */
int tg_jwks_load(tg_jwks_t **out, const char *path, tg_err_t *err);
/* The same from text <text> (<len> bytes); <name> names it in messages. */
int tg_jwks_parse(tg_jwks_t **out, const char *name, const char *text, size_t len, tg_err_t *err);
size_t tg_jwks_count(const tg_jwks_t *k);
void tg_jwks_free(tg_jwks_t *k);

/* ---- JWT ---- */

/* What a JWT must satisfy besides its signature (borrowed strings). */
typedef struct tg_jwt_want {
    const char *issuer, *audience, *claim;
    uint64_t leeway_ms;
} tg_jwt_want_t;

/* Verify compact JWS <tok> (<len> bytes) at time <now_s> (Unix seconds):
 * header alg RS256 or ES256 ("none" and HS* refused) matching the key
 * (by "kid" when the header has one, else each key of the alg's type),
 * signature, then iss, aud (string or array), exp (required), nbf and iat
 * with the leeway, and the claim <want>->claim a string. 0 with the claim's
 * value (NUL-terminated, at most <cap> - 1 bytes) in <claim_out>, or -1
 * with a constant reason in *why. */
int tg_jwt_verify(const tg_jwks_t *keys, const tg_jwt_want_t *want, const char *tok, size_t len,
                  int64_t now_s, char *claim_out, size_t cap, const char **why);

/* The payload of <tok> as a JSON object, NOT verified: only to choose
 * which caller's keys to verify it with. NULL when not a JWT. The caller
 * frees it (json_decref). */
struct json_t;
struct json_t *tg_jwt_peek(const char *tok, size_t len);

/* Whether <tok> has the shape of a compact JWS (three dot-separated
 * parts, the first two not empty); says nothing of its validity. */
bool tg_jwt_shaped(const char *tok, size_t len);

/* ---- callers ---- */

/* Owned by the HTTP front: what identifying callers needs from a config,
 * copied (the config may be freed or reloaded after). */
typedef struct tg_auth tg_auth_t;

/* Build from <cfg>: the callers' digests, and the keys of every
 * callers[].jwt.jwks_file (loaded once per file). 0 with *out set, or -1
 * with <err> naming callers[i].jwt.jwks_file and what is wrong. */
int tg_auth_new(tg_auth_t **out, const tg_config_t *cfg, tg_err_t *err);
void tg_auth_free(tg_auth_t *a);

/* Whether any caller can be named by a token or a JWT (an HTTP listener
 * without is only for anonymous callers). */
bool tg_auth_any(const tg_auth_t *a);

/* The callers[] index that bearer credential <tok> (<len> bytes, after
 * "Bearer ") names at <now_s>: a token whose digest a caller holds, else
 * a JWT that verifies for a caller with a jwt entry whose issuer it
 * carries and whose name its claim holds. Token digests are compared in
 * constant time against every digest of every caller. -1 with a constant reason in
 * *why when none. */
int tg_auth_identify(const tg_auth_t *a, const char *tok, size_t len, int64_t now_s,
                     const char **why);

#endif
