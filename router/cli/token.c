/* `toolgate token new [--name CALLER]` and `toolgate token digest`: bearer
 * tokens for callers[].tokens (see router/auth/README.md).
 *
 * A token is "tgk_" and 256 random bits in base64url (RAND_bytes, seeded
 * from getrandom): the prefix lets secret scanners and people recognise
 * one. toolgate stores only its SHA-256 digest, so the token is printed
 * once, here, and nowhere else.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "config/config.h"
#include "router/auth/auth.h"
#include "router/cli/cli.h"
#include "router/cli/help.h"

#define TOKEN_PREFIX   "tgk_"
#define TOKEN_TEXT_MAX 64 /* fixed internal bound: "tgk_" and 43 base64url characters */

/* Both token commands' usage lines. */
static void token_usage(FILE *f)
{
    tg_cli_help_of(f, "token new");
    tg_cli_help_of(f, "token digest");
}

/* <n> bytes of <in> in unpadded base64url into <out> (room for 4n/3+2). */
static void b64url(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned acc = 0;
    int bits = 0;

    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8 | in[i]) & 0xffffu;
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            *out++ = tab[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        *out++ = tab[(acc << (6 - bits)) & 63];
    *out = '\0';
}

static int token_new(int argc, char **argv)
{
    unsigned char raw[TG_AUTH_TOKEN_BYTES];
    char tok[TOKEN_TEXT_MAX], digest[TG_TOKEN_DIGEST_TEXT + 1];
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    const char *name = NULL;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else {
            token_usage(stderr);
            return 2;
        }
    }
    if (name && !tg_config_tool_name_ok(name, strlen(name))) {
        fprintf(stderr,
                "toolgate: --name: not a caller name (expected 1 to %d of A-Z a-z 0-9 . _ : @ / "
                "-)\n",
                TG_NAME_MAX);
        return 2;
    }
    if (RAND_bytes(raw, sizeof raw) != 1) {
        fprintf(stderr, "toolgate: token new: no random bytes from the system\n");
        return 1;
    }
    memcpy(tok, TOKEN_PREFIX, sizeof TOKEN_PREFIX);
    b64url(raw, sizeof raw, tok + strlen(TOKEN_PREFIX));
    tg_auth_token_digest(tok, strlen(tok), d);
    tg_auth_digest_text(d, digest);
    printf("token:  %s\n"
           "digest: %s\n"
           "\n"
           "Give the token to the caller, who sends it as \"Authorization: Bearer <token>\".\n"
           "It is shown only now: toolgate keeps the digest, never the token.\n"
           "In the config:\n"
           "  \"callers\": [{\"name\": \"%s\", \"tokens\": [\"%s\"]}]\n",
           tok, digest, name ? name : "CALLER", digest);
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(tok, sizeof tok);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The token on stdin: one line, its newline (and a CR) dropped, no other
 * whitespace, at most TG_AUTH_TOKEN_MAX bytes. */
static int token_digest(int argc, char **argv)
{
    static char buf[TG_AUTH_TOKEN_MAX + 3];
    char digest[TG_TOKEN_DIGEST_TEXT + 1];
    uint8_t d[TG_TOKEN_DIGEST_BYTES];
    size_t len = 0;
    ssize_t n;

    (void)argv;
    if (argc != 0) {
        token_usage(stderr);
        return 2;
    }
    while (len < sizeof buf && (n = read(STDIN_FILENO, buf + len, sizeof buf - len)) != 0) {
        if (n < 0) {
            perror("toolgate: token digest: stdin");
            return 1;
        }
        len += (size_t)n;
    }
    if (len && buf[len - 1] == '\n')
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    buf[len < sizeof buf ? len : sizeof buf - 1] = '\0';
    if (len == 0 || len > TG_AUTH_TOKEN_MAX || memchr(buf, '\n', len) ||
        strcspn(buf, " \t\r") < len) {
        OPENSSL_cleanse(buf, sizeof buf);
        fprintf(stderr,
                "toolgate: token digest: expected one token on stdin (1 to %u bytes, one line, "
                "no spaces)\n",
                TG_AUTH_TOKEN_MAX);
        return 2;
    }
    tg_auth_token_digest(buf, len, d);
    OPENSSL_cleanse(buf, sizeof buf);
    tg_auth_digest_text(d, digest);
    printf("%s\n", digest);
    return fflush(stdout) == 0 ? 0 : 1;
}

int tg_cli_token(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "new") == 0)
        return token_new(argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "digest") == 0)
        return token_digest(argc - 1, argv + 1);
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        token_usage(stdout);
        return 0;
    }
    token_usage(stderr);
    return 2;
}
