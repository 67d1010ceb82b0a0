/* tg_echo_agent: the smallest fast MCP server, for benchmarks. For every
 * line holding a top-level "id" it answers
 *   {"jsonrpc":"2.0","id":<id bytes>,"result":<params bytes or {}>}
 * by splicing the original bytes: the line is not parsed into values, only
 * walked at top level to find the spans of "id" and "params". Lines without
 * an id (notifications) get no answer. Reads in large chunks and writes
 * every answer produced by one read with a single write, so pipelined
 * requests cost one syscall each way. Lines of any size are handled (the
 * input buffer grows to fit the longest line).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EA_READ_MIN (1u << 20)   /* free space kept for each read(2) */
#define EA_OUT_FLUSH (1u << 20)  /* flush answers once this much is pending */

typedef struct ea_buf {
    char *p;
    size_t len, cap;
} ea_buf_t;

static void ea_reserve(ea_buf_t *b, size_t more)
{
    if (b->cap - b->len >= more)
        return;
    size_t ncap = b->cap ? b->cap : EA_READ_MIN;
    while (ncap - b->len < more)
        ncap *= 2;
    char *np = realloc(b->p, ncap);
    if (!np)
        _exit(1);
    b->p = np;
    b->cap = ncap;
}

static void ea_put(ea_buf_t *b, const char *p, size_t n)
{
    ea_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void ea_flush(ea_buf_t *out)
{
    size_t off = 0;
    while (off < out->len) {
        ssize_t w = write(STDOUT_FILENO, out->p + off, out->len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            _exit(0); /* the reader is gone */
        }
        off += (size_t)w;
    }
    out->len = 0;
}

static const char *ea_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

/* Past the string starting at <p> (on its opening quote), or NULL. */
static const char *ea_skip_string(const char *p, const char *end)
{
    for (p++; p < end;) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (!q)
            return NULL;
        /* An odd run of backslashes before the quote escapes it. */
        size_t bs = 0;
        while (q - bs > p && q[-1 - (ptrdiff_t)bs] == '\\')
            bs++;
        if (bs % 2 == 0)
            return q + 1;
        p = q + 1;
    }
    return NULL;
}

/* Past the JSON value starting at <p>, or NULL. Containers are skipped by
 * depth counting; their contents are not validated. */
static const char *ea_skip_value(const char *p, const char *end)
{
    if (p >= end)
        return NULL;
    if (*p == '"')
        return ea_skip_string(p, end);
    if (*p == '{' || *p == '[') {
        size_t depth = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = ea_skip_string(p, end);
                if (!p)
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return p + 1;
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
           *p != '\r')
        p++;
    return p;
}

/* Answer one line. */
static void ea_line(const char *p, const char *end, ea_buf_t *out)
{
    const char *id = NULL, *id_end = NULL, *par = NULL, *par_end = NULL;
    p = ea_ws(p, end);
    if (p >= end || *p != '{')
        return;
    p++;
    for (;;) {
        p = ea_ws(p, end);
        if (p >= end || *p != '"')
            break;
        const char *k = p + 1, *ke = ea_skip_string(p, end);
        if (!ke)
            return;
        size_t klen = (size_t)(ke - 1 - k);
        p = ea_ws(ke, end);
        if (p >= end || *p != ':')
            return;
        p = ea_ws(p + 1, end);
        const char *v = p, *ve = ea_skip_value(p, end);
        if (!ve)
            return;
        if (klen == 2 && memcmp(k, "id", 2) == 0)
            id = v, id_end = ve;
        else if (klen == 6 && memcmp(k, "params", 6) == 0)
            par = v, par_end = ve;
        p = ea_ws(ve, end);
        if (p < end && *p == ',')
            p++;
        else
            break;
    }
    if (!id)
        return;
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    static const char mid[] = ",\"result\":";
    ea_put(out, head, sizeof head - 1);
    ea_put(out, id, (size_t)(id_end - id));
    ea_put(out, mid, sizeof mid - 1);
    if (par)
        ea_put(out, par, (size_t)(par_end - par));
    else
        ea_put(out, "{}", 2);
    ea_put(out, "}\n", 2);
}

int main(void)
{
    ea_buf_t in = {0}, out = {0};
    size_t scan = 0; /* bytes of <in> already known to hold no newline */
    for (;;) {
        ea_reserve(&in, EA_READ_MIN);
        ssize_t r = read(STDIN_FILENO, in.p + in.len, in.cap - in.len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (r == 0)
            break;
        in.len += (size_t)r;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(in.p + scan, '\n', in.len - scan)) != NULL) {
            ea_line(in.p + start, nl, &out);
            start = (size_t)(nl - in.p) + 1;
            scan = start;
            if (out.len >= EA_OUT_FLUSH)
                ea_flush(&out);
        }
        ea_flush(&out);
        if (start > 0) {
            memmove(in.p, in.p + start, in.len - start);
            in.len -= start;
        }
        scan = in.len;
    }
    ea_flush(&out);
    return 0;
}
