/* router/auth: callers by bearer token (digest, constant-time match) and
 * by JWT (RS256, ES256, JWKS files), through the config loader.
 *
 * Keys are generated at test time with libcrypto; the JWKS is written
 * from their public parts and test tokens are signed here, so every
 * verification runs against a real signature.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

#include "router/auth/auth.h"
#include "tests/tg_harness.h"
#include "tests/tg_jwt.h"

#define ISS    "https://idp.example"
#define AUD    "toolgate"
#define CANARY "CANARY7Q2x9secretvalue"

static char dir[TGH_PATH];
static char jwks_path[TGH_PATH + 32];
static EVP_PKEY *rsa, *ec, *rsa_other, *ec_other;
static tg_config_t cfg;
static tg_auth_t *auth;
static int64_t now;

/* Claims for caller <sub> from <iss> for <aud>, exp/nbf/iat relative to
 * now (INT64_MIN: left out). */
static char *claims(const char *sub, const char *iss, const char *aud, int64_t exp, int64_t nbf)
{
    static char buf[1024];
    int n = snprintf(buf, sizeof buf, "{\"sub\":\"%s\",\"iss\":\"%s\",\"aud\":%s,\"iat\":%lld", sub,
                     iss, aud, (long long)now - 5);
    if (exp != INT64_MIN)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"exp\":%lld", (long long)(now + exp));
    if (nbf != INT64_MIN)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"nbf\":%lld", (long long)(now + nbf));
    snprintf(buf + n, sizeof buf - (size_t)n, "}");
    return buf;
}

#define AUD_S       "\"" AUD "\""
#define RS_HDR(kid) "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"" kid "\"}"
#define ES_HDR(kid) "{\"alg\":\"ES256\",\"kid\":\"" kid "\"}"

/* ---- fixture ---- */

static char token_a[64], token_b[64];

static void make_token(char *out, size_t cap)
{
    unsigned char r[TG_AUTH_TOKEN_BYTES];
    cr_assert_eq(RAND_bytes(r, sizeof r), 1);
    tgj_b64url(r, sizeof r, out, cap);
}

static void setup(void)
{
    char keys[8192], k1[2048], k2[2048], k3[2048], text[8192];
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    char da[TG_TOKEN_DIGEST_TEXT + 1], db[TG_TOKEN_DIGEST_TEXT + 1];
    tg_err_t err = {{0}};

    now = (int64_t)time(NULL);
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
    rsa = EVP_RSA_gen(2048);
    ec = EVP_EC_gen("P-256");
    rsa_other = EVP_RSA_gen(2048);
    ec_other = EVP_EC_gen("P-256");
    cr_assert(rsa && ec && rsa_other && ec_other);
    tgj_jwk(rsa, "r1", true, k1, sizeof k1);
    tgj_jwk(ec, "e1", true, k2, sizeof k2);
    tgj_jwk(ec, NULL, false, k3, sizeof k3); /* the same EC key again, without kid or alg */
    snprintf(keys, sizeof keys, "{\"keys\":[%s,%s]}", k1, k2);
    tgh_put(dir, "jwks.json", keys);
    snprintf(keys, sizeof keys, "{\"keys\":[%s]}", k3);
    tgh_put(dir, "nokid.json", keys);
    snprintf(jwks_path, sizeof jwks_path, "%s/jwks.json", dir);

    make_token(token_a, sizeof token_a);
    make_token(token_b, sizeof token_b);
    tg_auth_token_digest(token_a, strlen(token_a), d);
    tg_auth_digest_text(d, da);
    tg_auth_token_digest(token_b, strlen(token_b), d);
    tg_auth_digest_text(d, db);
    snprintf(text, sizeof text,
             "{\"callers\":["
             "{\"name\":\"local\",\"uid\":1000},"
             "{\"name\":\"ci-bot\",\"tokens\":[\"%s\"]},"
             "{\"name\":\"deployer\",\"tokens\":[\"sha256:%064d\",\"%s\"]},"
             "{\"name\":\"svc-a\",\"jwt\":{\"issuer\":\"" ISS "\",\"audience\":\"" AUD
             "\",\"jwks_file\":\"%s\",\"leeway\":\"10s\"}},"
             "{\"name\":\"svc-b\",\"jwt\":{\"issuer\":\"" ISS "\",\"audience\":\"" AUD
             "\",\"jwks_file\":\"%s\",\"claim\":\"client_id\"}},"
             "{\"name\":\"svc-c\",\"jwt\":{\"issuer\":\"https://other.example\",\"audience\":\"" AUD
             "\",\"jwks_file\":\"%s/nokid.json\"}}"
             "]}",
             da, 0, db, jwks_path, jwks_path, dir);
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err), 0, "%s", err.msg);
    cr_assert_eq(tg_auth_new(&auth, &cfg, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    tg_auth_free(auth);
    tg_config_free(&cfg);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(rsa_other);
    EVP_PKEY_free(ec_other);
    tgh_cleanup();
}

TestSuite(auth, .init = setup, .fini = teardown, .timeout = 60);

static int identify(const char *tok, const char **why)
{
    return tg_auth_identify(auth, tok, strlen(tok), now, why);
}

static void refused(const char *tok, const char *want)
{
    const char *why = NULL;
    cr_expect_eq(identify(tok, &why), -1, "accepted, want %s", want);
    cr_expect_str_eq(why ? why : "(null)", want);
}

/* ---- tokens ---- */

Test(auth, token_right_wrong_none)
{
    const char *why = NULL;
    char wrong[64];

    cr_expect(tg_auth_any(auth));
    cr_expect_eq(identify(token_a, &why), 1, "%s", why);
    cr_expect_eq(identify(token_b, &why), 2, "%s", why);
    make_token(wrong, sizeof wrong);
    refused(wrong, "unknown token");
    refused("", "no token");
    /* a prefix or an extension of a right token is a wrong token */
    size_t cut = strlen(token_a) - 1;
    memcpy(wrong, token_a, cut);
    wrong[cut] = '\0';
    refused(wrong, "unknown token");
    char longer[80];
    snprintf(longer, sizeof longer, "%sx", token_a);
    refused(longer, "unknown token");
}

Test(auth, token_too_long)
{
    static char big[TG_AUTH_TOKEN_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    refused(big, "token too long");
}

Test(auth, digest_text_round_trips_through_config)
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES], back[TG_TOKEN_DIGEST_BYTES];
    char text[TG_TOKEN_DIGEST_TEXT + 1], why[256];

    tg_auth_token_digest("abc", 3, d);
    tg_auth_digest_text(d, text);
    /* SHA-256("abc"), FIPS 180-2 */
    cr_expect_str_eq(text,
                     "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cr_assert_eq(tg_config_token_digest_parse(text, strlen(text), back, why, sizeof why), 0);
    cr_expect_eq(memcmp(d, back, sizeof d), 0);
    cr_expect_eq(tg_config_token_digest_parse("sha256:abc", 10, back, why, sizeof why), -1);
}

/* No caller config at all: nothing matches, nothing crashes. */
Test(auth, no_callers)
{
    tg_config_t empty;
    tg_auth_t *a;
    tg_err_t err;
    const char *why;

    cr_assert_eq(tg_config_default(&empty), 0);
    cr_assert_eq(tg_auth_new(&a, &empty, &err), 0);
    cr_expect_not(tg_auth_any(a));
    cr_expect_eq(tg_auth_identify(a, token_a, strlen(token_a), now, &why), -1);
    cr_expect_str_eq(why, "unknown token");
    tg_auth_free(a);
    tg_config_free(&empty);
}

/* ---- JWT ---- */

Test(auth, jwt_rs256_and_es256_valid)
{
    const char *why = NULL;

    cr_expect_eq(
        identify(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), rsa, NULL),
                 &why),
        3, "%s", why);
    cr_expect_eq(
        identify(tgj_jws(ES_HDR("e1"), claims("svc-a", ISS, AUD_S, 300, -10), ec, NULL), &why), 3,
        "%s", why);
    /* aud as an array; the caller named by another claim */
    char p[512];
    snprintf(p, sizeof p,
             "{\"client_id\":\"svc-b\",\"iss\":\"" ISS "\",\"aud\":[\"x\",\"" AUD
             "\"],\"exp\":%lld}",
             (long long)now + 60);
    cr_expect_eq(identify(tgj_jws(RS_HDR("r1"), p, rsa, NULL), &why), 4, "%s", why);
    /* no kid: every key of the alg's type is tried */
    cr_expect_eq(
        identify(tgj_jws("{\"alg\":\"ES256\"}",
                         claims("svc-c", "https://other.example", AUD_S, 60, INT64_MIN), ec, NULL),
                 &why),
        5, "%s", why);
}

Test(auth, jwt_times)
{
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, -60, INT64_MIN), rsa, NULL),
            "expired");
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, 300, 60), rsa, NULL),
            "not yet valid");
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, INT64_MIN, INT64_MIN), rsa, NULL),
            "no exp");
    /* within the leeway (10 s for svc-a) */
    const char *why;
    cr_expect_eq(
        identify(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, -5, 5), rsa, NULL), &why), 3,
        "%s", why);
    char p[512];
    snprintf(p, sizeof p,
             "{\"sub\":\"svc-a\",\"iss\":\"" ISS "\",\"aud\":\"" AUD
             "\",\"exp\":%lld,\"iat\":%lld}",
             (long long)now + 600, (long long)now + 300);
    refused(tgj_jws(RS_HDR("r1"), p, rsa, NULL), "issued in the future");
}

Test(auth, jwt_issuer_audience_caller)
{
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", "https://evil.example", AUD_S, 300, INT64_MIN),
                    rsa, NULL),
            "wrong issuer");
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, "\"other\"", 300, INT64_MIN), rsa, NULL),
            "wrong audience");
    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, "[\"a\",\"b\"]", 300, INT64_MIN), rsa, NULL),
            "wrong audience");
    /* a valid token naming no caller of that issuer */
    refused(tgj_jws(RS_HDR("r1"), claims("ci-bot", ISS, AUD_S, 300, INT64_MIN), rsa, NULL),
            "unknown caller");
    /* svc-c's issuer does not let a token name svc-a */
    refused(tgj_jws("{\"alg\":\"ES256\"}",
                    claims("svc-a", "https://other.example", AUD_S, 60, INT64_MIN), ec, NULL),
            "unknown caller");
}

Test(auth, jwt_wrong_key_and_tampering)
{
    char *tok, *dot, p64[512];

    refused(tgj_jws(RS_HDR("r1"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), rsa_other, NULL),
            "bad signature");
    refused(tgj_jws(ES_HDR("e1"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), ec_other, NULL),
            "bad signature");
    refused(tgj_jws(RS_HDR("nope"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), rsa, NULL),
            "unknown kid");
    /* RS256 header naming the EC key */
    refused(tgj_jws(RS_HDR("e1"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), rsa, NULL),
            "alg does not match the key");
    /* a forged token naming a caller that does not exist: the signature
     * is what is reported */
    refused(tgj_jws(RS_HDR("r1"), claims("nobody", ISS, AUD_S, 300, INT64_MIN), rsa_other, NULL),
            "bad signature");

    /* tampered payload: sub swapped after signing */
    tok = tgj_jws(RS_HDR("r1"), claims("svc-b", ISS, AUD_S, 300, INT64_MIN), rsa, NULL);
    char copy[8192];
    snprintf(copy, sizeof copy, "%s", tok);
    tgj_b64url_str(claims("svc-a", ISS, AUD_S, 300, INT64_MIN), p64, sizeof p64);
    dot = strchr(copy, '.');
    char *sig = strchr(dot + 1, '.');
    char rebuilt[8192];
    snprintf(rebuilt, sizeof rebuilt, "%.*s.%s%s", (int)(dot - copy), copy, p64, sig);
    refused(rebuilt, "bad signature");

    /* a flipped signature byte */
    tok = tgj_jws(ES_HDR("e1"), claims("svc-a", ISS, AUD_S, 300, INT64_MIN), ec, NULL);
    snprintf(copy, sizeof copy, "%s", tok);
    char *last = copy + strlen(copy) - 3;
    *last = *last == 'A' ? 'B' : 'A';
    refused(copy, "bad signature");
}

Test(auth, jwt_algs_refused)
{
    refused(tgj_jws("{\"alg\":\"none\"}", claims("svc-a", ISS, AUD_S, 300, INT64_MIN), NULL, ""),
            "alg none refused");
    refused(tgj_jws("{\"alg\":\"HS256\",\"kid\":\"r1\"}",
                    claims("svc-a", ISS, AUD_S, 300, INT64_MIN), NULL, "c2lnbmF0dXJl"),
            "HMAC algorithms refused");
    refused(
        tgj_jws("{\"alg\":\"PS256\"}", claims("svc-a", ISS, AUD_S, 300, INT64_MIN), NULL, "AAAA"),
        "unsupported alg");
    refused(tgj_jws("{\"alg\":\"RS256\",\"crit\":[\"x\"]}",
                    claims("svc-a", ISS, AUD_S, 300, INT64_MIN), rsa, NULL),
            "unsupported crit header");
    refused("abc.def.ghi", "malformed token");
    refused("a.b", "unknown token");
}

/* ---- secrets ---- */

/* A planted secret in every part of a credential never comes back in a
 * reason, whatever the path it fails on. */
Test(auth, canary_never_in_reasons)
{
    char *toks[12], buf[12][8192];
    size_t n = 0;
    char p[512];

#define KEEP(t) (snprintf(buf[n], sizeof buf[n], "%s", (t)), toks[n] = buf[n], n++)
    KEEP(CANARY);
    snprintf(p, sizeof p, "{\"sub\":\"%s\",\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":%lld}",
             CANARY, (long long)now + 60);
    KEEP(tgj_jws(RS_HDR("r1"), p, rsa, NULL));
    KEEP(tgj_jws(RS_HDR(CANARY), p, rsa, NULL));
    snprintf(p, sizeof p, "{\"sub\":\"svc-a\",\"iss\":\"%s\",\"aud\":\"" AUD "\",\"exp\":%lld}",
             CANARY, (long long)now + 60);
    KEEP(tgj_jws(RS_HDR("r1"), p, rsa, NULL));
    snprintf(p, sizeof p, "{\"sub\":\"svc-a\",\"iss\":\"" ISS "\",\"aud\":\"%s\",\"exp\":%lld}",
             CANARY, (long long)now + 60);
    KEEP(tgj_jws(RS_HDR("r1"), p, rsa, NULL));
    KEEP(tgj_jws("{\"alg\":\"" CANARY "\"}", p, NULL, CANARY));
    KEEP(tgj_jws(RS_HDR("r1"), "{\"sub\":\"" CANARY, NULL, CANARY));
    KEEP("eyJ" CANARY "." CANARY "." CANARY);
#undef KEEP
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        cr_expect_eq(tg_auth_identify(auth, toks[i], strlen(toks[i]), now, &why), -1, "%zu", i);
        cr_assert_not_null(why);
        cr_expect_null(strstr(why, CANARY), "%zu: %s", i, why);
        cr_expect_null(strstr(why, "CANARY"), "%zu: %s", i, why);
        cr_expect_lt(strlen(why), 40, "%zu: a reason is short: %s", i, why);
    }
}

/* ---- JWKS ---- */

Test(auth, jwks_errors_name_the_caller_and_file)
{
    tg_config_t c2;
    tg_auth_t *a = NULL;
    tg_err_t err = {{0}};
    tg_jwks_t *k = NULL;
    char keys[4096], want[2 * TGH_PATH];

    /* callers by uid only: nothing to load */
    cr_assert_eq(tg_config_default(&c2), 0);
    static const char uid_only[] = "{\"callers\":[{\"name\":\"x\",\"uid\":1}]}";
    cr_assert_eq(tg_config_load_buffer(&c2, "t.json", uid_only, strlen(uid_only), &err), 0, "%s",
                 err.msg);
    cr_assert_eq(tg_auth_new(&a, &c2, &err), 0);
    tg_auth_free(a);
    tg_config_free(&c2);

    /* shape-valid but not a key: a point off the curve */
    char x[44];
    memset(x, 'A', 43);
    x[43] = '\0';
    snprintf(keys, sizeof keys,
             "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", x, x);
    cr_expect_eq(tg_jwks_parse(&k, "k.json", keys, strlen(keys), &err), -1);
    cr_expect_str_eq(err.msg, "jwks: k.json: keys[0]: not a usable EC P-256 public key (a point "
                              "on the curve)");

    cr_expect_eq(tg_jwks_parse(&k, "k.json", "{}", 2, &err), -1);
    cr_expect_not_null(strstr(err.msg, "jwks: k.json: expected {\"keys\""), "%s", err.msg);

    /* the file changed between config load and auth setup */
    tgh_put(dir, "jwks.json", "{\"keys\":[]}");
    cr_expect_eq(tg_auth_new(&a, &cfg, &err), -1);
    snprintf(want, sizeof want, "callers[3].jwt.jwks_file: jwks: %s: expected", jwks_path);
    cr_expect_not_null(strstr(err.msg, want), "%s", err.msg);

    cr_expect_eq(tg_jwks_load(&k, "/nonexistent/jwks.json", &err), -1);
    cr_expect_str_eq(err.msg,
                     "jwks: cannot read /nonexistent/jwks.json: No such file or directory");
}

Test(auth, jwks_loads_each_key)
{
    tg_jwks_t *k = NULL;
    tg_err_t err;

    cr_assert_eq(tg_jwks_load(&k, jwks_path, &err), 0, "%s", err.msg);
    cr_expect_eq(tg_jwks_count(k), 2);
    tg_jwks_free(k);
}

/* ---- toolgate token (the real binary) ---- */

TestSuite(token_cli, .timeout = 30);

/* Run shell command <cmd>; its stdout into <out>; the exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    size_t n;
    int st;

    cr_assert_not_null(p, "%s", cmd);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The value after "<label>" on its line of <out>. */
static void field(const char *out, const char *label, char *val, size_t cap)
{
    const char *p = strstr(out, label);
    size_t n;

    cr_assert_not_null(p, "no %s in:\n%s", label, out);
    p += strlen(label);
    n = strcspn(p, "\n");
    cr_assert_lt(n, cap);
    memcpy(val, p, n);
    val[n] = '\0';
}

/* The token new prints, its digest and the snippet agree, the snippet
 * loads, and the token then names that caller. */
Test(token_cli, new_prints_a_working_token)
{
    char out[4096], out2[4096], tok[128], tok2[128], dig[128], text[1024], *snip;
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    char want[TG_TOKEN_DIGEST_TEXT + 1];
    tg_config_t c;
    tg_auth_t *a;
    tg_err_t err = {{0}};
    const char *why;

    cr_assert_eq(run(TG_BIN " token new --name ci-bot", out, sizeof out), 0, "%s", out);
    field(out, "token:  ", tok, sizeof tok);
    field(out, "digest: ", dig, sizeof dig);
    cr_expect_eq(strncmp(tok, "tgk_", 4), 0, "%s", tok);
    cr_expect_eq(strlen(tok), 4 + 43, "256 bits in base64url: %s", tok);
    cr_expect_eq(
        strspn(tok + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), 43);
    tg_auth_token_digest(tok, strlen(tok), d);
    tg_auth_digest_text(d, want);
    cr_expect_str_eq(dig, want);

    snip = strstr(out, "\"callers\": ");
    cr_assert_not_null(snip, "%s", out);
    snprintf(text, sizeof text, "{%.*s}", (int)strcspn(snip, "\n"), snip);
    cr_assert_eq(tg_config_default(&c), 0);
    cr_assert_eq(tg_config_load_buffer(&c, "snippet", text, strlen(text), &err), 0, "%s\n%s",
                 err.msg, text);
    cr_assert_eq(tg_auth_new(&a, &c, &err), 0, "%s", err.msg);
    cr_expect_eq(tg_auth_identify(a, tok, strlen(tok), 0, &why), 0, "%s", why);
    cr_expect_str_eq(c.callers[0].name, "ci-bot");
    tg_auth_free(a);
    tg_config_free(&c);

    /* fresh each time */
    cr_assert_eq(run(TG_BIN " token new", out2, sizeof out2), 0);
    field(out2, "token:  ", tok2, sizeof tok2);
    cr_expect_str_neq(tok, tok2);
    cr_expect_not_null(strstr(out2, "\"name\": \"CALLER\""), "%s", out2);
}

Test(token_cli, digest_reads_stdin)
{
    char out[512];

    cr_expect_eq(run("printf 'abc\\n' | " TG_BIN " token digest", out, sizeof out), 0);
    cr_expect_str_eq(out,
                     "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n");
    cr_expect_eq(run("printf 'abc' | " TG_BIN " token digest", out, sizeof out), 0);
    cr_expect_str_eq(out,
                     "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n");
    cr_expect_eq(run("printf 'abc\\r\\n' | " TG_BIN " token digest", out, sizeof out), 0);
    cr_expect_eq(strncmp(out, "sha256:ba7816bf", 15), 0, "%s", out);
}

Test(token_cli, bad_usage)
{
    char out[4096]; /* toolgate --help lists every command */

    cr_expect_eq(run("printf '' | " TG_BIN " token digest 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run("printf 'a b' | " TG_BIN " token digest 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run("printf 'a\\nb' | " TG_BIN " token digest 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run("head -c 9000 /dev/zero | tr '\\0' a | " TG_BIN " token digest 2>/dev/null",
                     out, sizeof out),
                 2);
    cr_expect_str_eq(out, "");
    cr_expect_eq(run(TG_BIN " token new --name 'a b' 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run(TG_BIN " token new --nope 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run(TG_BIN " token 2>/dev/null", out, sizeof out), 2);
    cr_expect_eq(run(TG_BIN " --help", out, sizeof out), 0);
    cr_expect_not_null(strstr(out, "toolgate token new [--name CALLER]"));
}
