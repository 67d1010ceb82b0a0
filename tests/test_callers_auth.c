/* config: callers[].tokens and callers[].jwt — digests parsed to binary
 * at load, errors naming callers[i].tokens[j], the JWKS file read and
 * shape-checked at load, and the help rows for the keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/keys.h"
#include "tests/tg_harness.h"

#define DIGEST_A "sha256:00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF"
#define DIGEST_B "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff00"

static tg_config_t cfg;
static tg_err_t err;
static char dir[TGH_PATH];

static void setup(void)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(tg_config_default(&cfg), 0);
    cr_assert_eq(tgh_mkdtemp(dir, sizeof dir), 0);
}

static void teardown(void)
{
    tg_config_free(&cfg);
    tgh_cleanup();
}

TestSuite(callers_auth, .init = setup, .fini = teardown);

static int load(const char *text)
{
    return tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err);
}

static void load_fails_with(const char *text, const char *part)
{
    cr_expect_eq(load(text), -1, "accepted: %s", text);
    cr_expect_not_null(strstr(err.msg, part), "for: %s\n got: %s\nwant: %s", text, err.msg, part);
}

/* A caller entry with <body> (members after "name"), in a config. */
static void doc(char *buf, size_t cap, const char *body)
{
    snprintf(buf, cap, "{\"callers\":[{\"name\":\"ci-bot\",%s}]}", body);
}

/* ---- tokens ---- */

Test(callers_auth, tokens_load_as_binary_digests)
{
    cr_assert_eq(load("{\"callers\":[{\"name\":\"ci-bot\",\"tokens\":[\"" DIGEST_A "\",\"" DIGEST_B
                      "\"],\"execution_limits\":{\"rate_limit\":\"30/minute\"}}]}"),
                 0, "%s", err.msg);
    cr_assert_eq(cfg.ncallers, 1);
    cr_assert_eq(cfg.callers[0].ntokens, 2);
    cr_expect_eq(cfg.callers[0].tokens[0][0], 0x00);
    cr_expect_eq(cfg.callers[0].tokens[0][1], 0x11);
    cr_expect_eq(cfg.callers[0].tokens[0][31], 0xff, "upper-case hex is read too");
    cr_expect_eq(cfg.callers[0].tokens[1][31], 0x00);
    cr_expect_eq(cfg.callers[0].uid, -1);
    cr_expect_not(cfg.callers[0].has_jwt);
}

Test(callers_auth, token_errors_name_the_element)
{
    char text[512];

    doc(text, sizeof text, "\"tokens\":[\"" DIGEST_A "\",\"abc\"]");
    load_fails_with(text, "callers[0].tokens[1]: not a token digest (expected \"sha256:\" and 64 "
                          "hex digits");
    doc(text, sizeof text, "\"tokens\":[\"sha256:00\"]");
    load_fails_with(text, "callers[0].tokens[0]: the digest has 2 hex digits");
    doc(text, sizeof text,
        "\"tokens\":[\"sha256:zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"]");
    load_fails_with(text, "callers[0].tokens[0]: a byte of the digest is not hex");
    doc(text, sizeof text, "\"tokens\":[\"" DIGEST_A "\",\"" DIGEST_A "\"]");
    load_fails_with(text, "callers[0].tokens[1]: the same digest as tokens[0]");
    doc(text, sizeof text, "\"tokens\":[5]");
    load_fails_with(text, "callers[0].tokens[0]: expected a \"sha256:...\" token digest");
    doc(text, sizeof text, "\"tokens\":\"" DIGEST_A "\"");
    load_fails_with(text, "callers[0].tokens: expected an array");
}

/* A token pasted where its digest goes is refused without being echoed. */
Test(callers_auth, a_pasted_token_is_not_echoed)
{
    char text[512];

    doc(text, sizeof text, "\"tokens\":[\"tgk_CANARYsecretTOKENvalue0123456789\"]");
    cr_expect_eq(load(text), -1);
    cr_expect_null(strstr(err.msg, "CANARY"), "%s", err.msg);
}

Test(callers_auth, too_many_tokens)
{
    char text[4096], body[3900];
    size_t off = 0;

    off += (size_t)snprintf(body + off, sizeof body - off, "\"tokens\":[");
    for (int i = 0; i <= TG_CALLER_TOKENS_MAX; i++)
        off +=
            (size_t)snprintf(body + off, sizeof body - off, "%s\"sha256:%064x\"", i ? "," : "", i);
    snprintf(body + off, sizeof body - off, "]");
    doc(text, sizeof text, body);
    load_fails_with(text, "callers[0].tokens: 17 tokens (expected at most 16)");
}

Test(callers_auth, digest_parse)
{
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    char why[256];

    cr_expect_eq(tg_config_token_digest_parse(DIGEST_B, strlen(DIGEST_B), d, why, sizeof why), 0);
    cr_expect_eq(d[0], 0xff);
    cr_expect_eq(tg_config_token_digest_parse("sha1:00", 7, d, why, sizeof why), -1);
    cr_expect_eq(
        tg_config_token_digest_parse(DIGEST_B "0", strlen(DIGEST_B) + 1, d, why, sizeof why), -1);
    cr_expect_not_null(strstr(why, "65 hex digits"), "%s", why);
}

/* A caller matched by token needs no uid or gid. */
Test(callers_auth, a_caller_needs_some_identity)
{
    load_fails_with("{\"callers\":[{\"name\":\"x\"}]}",
                    "caller \"x\" needs \"uid\", \"gid\", \"tokens\" or \"jwt\"");
}

/* ---- jwt ---- */

static char jwks_path[TGH_PATH + 32];

static void jwks(const char *text)
{
    snprintf(jwks_path, sizeof jwks_path, "%s/jwks.json", dir);
    tgh_put(dir, "jwks.json", text);
}

static void jwt_doc(char *buf, size_t cap, const char *extra)
{
    char body[1024];
    snprintf(body, sizeof body,
             "\"jwt\":{\"issuer\":\"https://idp.example\",\"audience\":\"toolgate\","
             "\"jwks_file\":\"%s\"%s}",
             jwks_path, extra);
    doc(buf, cap, body);
}

/* Shape-valid keys (the bytes are not a real key: config only checks the
 * shape; router/auth reads them with OpenSSL). */
static void good_keys(char *buf, size_t cap)
{
    char n[343];
    memset(n, 'A', 342);
    n[342] = '\0';
    snprintf(buf, cap,
             "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"alg\":\"RS256\",\"use\":\"sig\","
             "\"n\":\"%s\",\"e\":\"AQAB\"},{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\","
             "\"x\":\"%.43s\",\"y\":\"%.43s\"}]}",
             n, n, n);
}

Test(callers_auth, jwt_loads_with_defaults)
{
    char keys[2048], text[2048];

    good_keys(keys, sizeof keys);
    jwks(keys);
    jwt_doc(text, sizeof text, "");
    cr_assert_eq(load(text), 0, "%s", err.msg);
    cr_assert(cfg.callers[0].has_jwt);
    cr_expect_str_eq(cfg.callers[0].jwt.issuer, "https://idp.example");
    cr_expect_str_eq(cfg.callers[0].jwt.audience, "toolgate");
    cr_expect_str_eq(cfg.callers[0].jwt.jwks_file, jwks_path);
    cr_expect_str_eq(cfg.callers[0].jwt.claim, "sub");
    cr_expect_eq(cfg.callers[0].jwt.leeway_ms, 30000);

    jwt_doc(text, sizeof text, ",\"claim\":\"client_id\",\"leeway\":\"5s\"");
    cr_assert_eq(load(text), 0, "%s", err.msg);
    cr_expect_str_eq(cfg.callers[0].jwt.claim, "client_id");
    cr_expect_eq(cfg.callers[0].jwt.leeway_ms, 5000);
}

Test(callers_auth, jwt_errors)
{
    char keys[2048], text[2048];

    good_keys(keys, sizeof keys);
    jwks(keys);
    doc(text, sizeof text, "\"jwt\":{\"issuer\":\"i\",\"audience\":\"a\"}");
    load_fails_with(text, "callers[0].jwt: missing required key \"jwks_file\"");
    doc(text, sizeof text,
        "\"jwt\":{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_file\":\"k.json\"}");
    load_fails_with(text, "callers[0].jwt.jwks_file: \"k.json\" is not an absolute path");
    jwt_doc(text, sizeof text, ",\"leeway\":\"1h\"");
    load_fails_with(text, "callers[0].jwt.leeway");
    jwt_doc(text, sizeof text, ",\"algs\":[]");
    load_fails_with(text, "unknown key \"algs\" (allowed: issuer, audience, jwks_file, claim, "
                          "leeway)");
    jwt_doc(text, sizeof text, ",\"claim\":\"a b\"");
    load_fails_with(text, "callers[0].jwt.claim: not a claim name");
    snprintf(jwks_path, sizeof jwks_path, "%s/missing.json", dir);
    jwt_doc(text, sizeof text, "");
    load_fails_with(text, "callers[0].jwt.jwks_file: cannot read");
    load_fails_with(text, "No such file");
}

/* What a JWKS file may not be, each refused at load naming the key. */
Test(callers_auth, jwks_shape_errors)
{
    static const struct {
        const char *jwks, *want;
    } cases[] = {
        {"not json", "not JSON"},
        {"{\"keys\":[]}", "expected {\"keys\": [...]} with 1 to 16 keys"},
        {"{\"keys\":[{\"kty\":\"oct\",\"k\":\"AAAA\"}]}",
         "keys[0]: holds private key member \"k\""},
        {"{\"keys\":[{\"kty\":\"OKP\"}]}", "keys[0]: \"kty\" must be \"RSA\" or \"EC\""},
        {"{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}",
         "keys[0]: \"n\" must be a 2048- to 8192-bit modulus"},
        {"{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"A\",\"y\":\"A\"}]}",
         "keys[0]: \"crv\" must be \"P-256\""},
        {"{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"A\",\"y\":\"A\"}]}",
         "keys[0]: \"x\" and \"y\" must be 32 bytes each"},
        {"{\"keys\":[{\"kty\":\"EC\",\"alg\":\"HS256\",\"crv\":\"P-256\"}]}",
         "keys[0]: \"alg\" must be \"ES256\" for a EC key"},
        {"{\"keys\":[{\"kty\":\"EC\",\"use\":\"enc\"}]}", "keys[0]: \"use\" is \"enc\""},
        {"{\"keys\":[{\"kty\":\"EC\",\"d\":\"x\"}]}", "holds private key member \"d\""},
    };
    char why[512], text[2048];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_expect_eq(tg_config_jwks_check(cases[i].jwks, strlen(cases[i].jwks), why, sizeof why),
                     -1, "%s", cases[i].jwks);
        cr_expect_not_null(strstr(why, cases[i].want), "%s\n got: %s\nwant: %s", cases[i].jwks, why,
                           cases[i].want);
    }
    /* duplicate kids, and the file's path in the load error */
    good_keys(text, sizeof text);
    char *second = strstr(text, "\"kid\":\"e1\"");
    cr_assert_not_null(second);
    memcpy(second, "\"kid\":\"r1\"", 10);
    jwks(text);
    jwt_doc(text, sizeof text, "");
    load_fails_with(text, "keys[1]: the same \"kid\" as keys[0]");
    cr_expect_not_null(strstr(err.msg, jwks_path), "%s", err.msg);
}

Test(callers_auth, jwks_file_size_is_capped)
{
    static char big[TG_JWKS_FILE_MAX + 16];
    char text[2048];

    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    jwks(big);
    jwt_doc(text, sizeof text, "");
    load_fails_with(text, "is not a regular file of at most 65536 bytes");
}

Test(callers_auth, keys_are_documented)
{
    static const char *const rows[] = {"callers[].tokens",        "callers[].jwt",
                                       "callers[].jwt.issuer",    "callers[].jwt.audience",
                                       "callers[].jwt.jwks_file", "callers[].jwt.claim",
                                       "callers[].jwt.leeway"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const tg_cfg_key_t *k = tg_cfg_key_find(rows[i]);
        cr_assert_not_null(k, "%s", rows[i]);
        cr_expect_gt(strlen(k->help), 20, "%s", rows[i]);
    }
    cr_expect_not_null(strstr(tg_cfg_key_find("callers[].tokens")->help, "toolgate token new"));
}

/* `toolgate check` shows the caller, never its digests (the canary rule:
 * no digest in a log, a page or a report). */
Test(callers_auth, check_never_prints_digests)
{
    char path[TGH_PATH + 16], cmd[2 * TGH_PATH + 64], out[65536];
    const char *const modes[] = {"", " --json"};

    tgh_put(dir, "c.json",
            "{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"]}],"
            "\"callers\":[{\"name\":\"ci-bot\",\"tokens\":[\"" DIGEST_A "\"]}]}");
    snprintf(path, sizeof path, "%s/c.json", dir);
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s check --config %s%s 2>&1", TG_BIN, path, modes[i]);
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p);
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        cr_expect_eq(pclose(p), 0, "%s", out);
        cr_expect_not_null(strstr(out, "ci-bot"), "%s", out);
        cr_expect_null(strstr(out, "00112233445566778899"), "%s", out);
        cr_expect_null(strstr(out, "sha256:"), "%s", out);
    }
}
