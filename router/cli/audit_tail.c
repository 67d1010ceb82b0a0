/* `toolgate audit tail --stream KEY --group G`: read the audit Redis
 * Stream (audit/sink_redis.c: one field "json" per entry) as a member of a
 * consumer group, print each event as one JSON line, and acknowledge it
 * only after it was written to stdout, so an entry is never lost between
 * Redis and the reader: one not acknowledged is re-read on the next start
 * (pending entries first, then new ones).
 *
 * A plain blocking program (synchronous hiredis), not part of the proxy.
 * It lives in router/ because it parses the URL with the store's parser
 * (limits/), which audit/ must not use.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "limits/store.h"
#include "router/cli/cli.h"
#include "router/cli/help.h"

#define TAIL_COUNT_MAX 10000 /* fixed internal bound: entries read per XREADGROUP */

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* A connection to the Redis at <url>, authenticated and on its db; NULL
 * with <err> filled (the URL redacted). */
static redisContext *tail_connect(const char *url, tg_err_t *err)
{
    tg_store_url_t u;
    char red[TG_STORE_URL_MAX];
    if (tg_store_url_parse(&u, url, err) < 0)
        return NULL;
    tg_store_url_redact(&u, red, sizeof(red));
    struct timeval tv = {5, 0};
    redisContext *c = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                                : redisConnectWithTimeout(u.host, u.port, tv);
    if (c == NULL || c->err) {
        tg_err_set(err, -1, "cannot connect to %s: %s", red, c ? c->errstr : "out of memory");
        redisFree(c);
        tg_store_url_wipe(&u);
        return NULL;
    }
    redisReply *r = NULL;
    if (u.password[0] != '\0') {
        r = u.user[0] ? redisCommand(c, "AUTH %s %s", u.user, u.password)
                      : redisCommand(c, "AUTH %s", u.password);
        bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        freeReplyObject(r);
        if (!ok) {
            tg_err_set(err, -1, "%s: authentication failed", red);
            redisFree(c);
            tg_store_url_wipe(&u);
            return NULL;
        }
    }
    if (u.db != 0) {
        r = redisCommand(c, "SELECT %u", u.db);
        bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        freeReplyObject(r);
        if (!ok) {
            tg_err_set(err, -1, "%s: SELECT %u failed", red, u.db);
            redisFree(c);
            tg_store_url_wipe(&u);
            return NULL;
        }
    }
    tg_store_url_wipe(&u);
    return c;
}

/* Print and acknowledge the entries of one XREADGROUP reply. Returns the
 * number of entries, or -1 on an error (message on stderr). */
static long tail_batch(redisContext *c, redisReply *r, const char *stream, const char *group)
{
    if (r->type == REDIS_REPLY_NIL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return -1;
    redisReply *s = r->element[0];
    if (s->type != REDIS_REPLY_ARRAY || s->elements < 2 || s->element[1]->type != REDIS_REPLY_ARRAY)
        return -1;
    redisReply *entries = s->element[1];
    for (size_t i = 0; i < entries->elements; i++) {
        redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        redisReply *fields = e->element[1];
        if (fields->type != REDIS_REPLY_ARRAY) {
            /* Pending but trimmed away (MAXLEN) before it was read: gone. */
            fprintf(stderr, "toolgate audit tail: entry %s was trimmed from %s before it was "
                            "read; acknowledging it\n",
                    e->element[0]->str, stream);
            freeReplyObject(redisCommand(c, "XACK %s %s %s", stream, group, e->element[0]->str));
            continue;
        }
        const char *json = NULL;
        size_t jlen = 0;
        for (size_t k = 0; k + 1 < fields->elements; k += 2)
            if (strcmp(fields->element[k]->str, "json") == 0) {
                json = fields->element[k + 1]->str;
                jlen = fields->element[k + 1]->len;
            }
        if (json == NULL) {
            fprintf(stderr, "toolgate audit tail: entry %s of %s has no \"json\" field: not a "
                            "toolgate audit stream?\n",
                    e->element[0]->str, stream);
            return -1;
        }
        /* Write, flush, then acknowledge: at least once, never lost. */
        if (fwrite(json, 1, jlen, stdout) != jlen || (jlen > 0 && json[jlen - 1] != '\n' &&
                                                      fputc('\n', stdout) == EOF) ||
            fflush(stdout) != 0) {
            fprintf(stderr, "toolgate audit tail: writing stdout: %s\n", strerror(errno));
            return -1;
        }
        redisReply *a = redisCommand(c, "XACK %s %s %s", stream, group, e->element[0]->str);
        bool ok = a != NULL && a->type == REDIS_REPLY_INTEGER;
        freeReplyObject(a);
        if (!ok) {
            fprintf(stderr, "toolgate audit tail: XACK failed: %s\n", c->err ? c->errstr : "reply");
            return -1;
        }
    }
    return (long)entries->elements;
}

int tg_cli_audit_tail(int argc, char **argv)
{
    const char *stream = NULL, *group = NULL, *consumer = NULL;
    const char *url = "redis://127.0.0.1:6379/0";
    long count = 100, block = 2000;
    bool once = false;
    char host[64];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--once") == 0) {
            once = true;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            tg_cli_help_of(stdout, "audit tail");
            return 0;
        }
        if (v == NULL) {
            fprintf(stderr, "toolgate audit tail: %s needs a value\n", a);
            tg_cli_help_of(stderr, "audit tail");
            return 2;
        }
        i++;
        if (strcmp(a, "--stream") == 0)
            stream = v;
        else if (strcmp(a, "--group") == 0)
            group = v;
        else if (strcmp(a, "--consumer") == 0)
            consumer = v;
        else if (strcmp(a, "--url") == 0)
            url = v;
        else if (strcmp(a, "--count") == 0)
            count = strtol(v, NULL, 10);
        else if (strcmp(a, "--block") == 0)
            block = strtol(v, NULL, 10);
        else {
            fprintf(stderr, "toolgate audit tail: unknown option '%s'\n", a);
            tg_cli_help_of(stderr, "audit tail");
            return 2;
        }
    }
    if (stream == NULL || group == NULL || count < 1 || count > TAIL_COUNT_MAX || block < 0) {
        fprintf(stderr, "toolgate audit tail: --stream and --group are required; --count 1..%d, "
                        "--block >= 0 ms\n",
                TAIL_COUNT_MAX);
        tg_cli_help_of(stderr, "audit tail");
        return 2;
    }
    if (consumer == NULL) {
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "tail");
        host[sizeof(host) - 1] = '\0';
        consumer = host;
    }
    tg_err_t err;
    redisContext *c = tail_connect(url, &err);
    if (c == NULL) {
        fprintf(stderr, "toolgate audit tail: %s\n", err.msg);
        return 1;
    }
    /* The group starts at the beginning of the stream; an existing group
     * keeps its place (BUSYGROUP). */
    redisReply *r = redisCommand(c, "XGROUP CREATE %s %s 0 MKSTREAM", stream, group);
    if (r == NULL || (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYGROUP", 9) != 0)) {
        fprintf(stderr, "toolgate audit tail: XGROUP CREATE %s %s: %s\n", stream, group,
                r ? r->str : c->errstr);
        freeReplyObject(r);
        redisFree(c);
        return 1;
    }
    freeReplyObject(r);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    signal(SIGPIPE, SIG_IGN);

    int rc = 0;
    bool pending = true; /* first what this consumer was given but never acknowledged */
    while (!g_stop) {
        if (pending)
            r = redisCommand(c, "XREADGROUP GROUP %s %s COUNT %ld STREAMS %s 0", group, consumer,
                             count, stream);
        else if (once)
            r = redisCommand(c, "XREADGROUP GROUP %s %s COUNT %ld STREAMS %s >", group, consumer,
                             count, stream);
        else
            r = redisCommand(c, "XREADGROUP GROUP %s %s COUNT %ld BLOCK %ld STREAMS %s >", group,
                             consumer, count, block, stream);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "toolgate audit tail: XREADGROUP: %s\n", r ? r->str : c->errstr);
            freeReplyObject(r);
            rc = 1;
            break;
        }
        long n = tail_batch(c, r, stream, group);
        freeReplyObject(r);
        if (n < 0) {
            rc = 1;
            break;
        }
        /* An empty pending list (or one entry short of a full batch) means
         * the backlog is done; a pending reply lists entries with no id. */
        if (pending && n < count)
            pending = false;
        else if (!pending && n == 0 && once)
            break;
    }
    redisFree(c);
    return rc;
}
