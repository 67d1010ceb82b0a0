/* libFuzzer target: untrusted frame bytes.
 *
 * 1. The input as one frame: tg_mcp_scan, tg_mcp_batch_has_call,
 *    tg_mcp_scan_head_id, tg_jscan_value and object iteration, checked
 *    against jansson by tests/mcp_oracle.h (abort on any disagreement).
 * 2. The input as a byte stream through the ndjson codec, delivered in
 *    chunks into a window the way the shell keeps it (partial frame moved
 *    to the front on NEED_MORE): the events must be exactly those of a
 *    reference split on '\n' (FRAME for a line <= max_frame, OVERSIZE with
 *    its first max_frame bytes then SKIPPED with the line's length for a
 *    longer one, every byte past the head handed out once by SKIPPING
 *    and SKIPPED), and every frame goes through the oracle, every over-cap
 *    head through tg_mcp_scan_head_id, and the id read from an over-cap
 *    line as it streams (tg_mcp_head_*) must be the line's own.
 * The first and last input bytes pick max_frame and the chunk size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/codec/ndjson.h"
#include "tests/mcp_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_frames: %s (%zu bytes)\n", what, n);
    fwrite(p, 1, n < 512 ? n : 512, stderr);
    fputc('\n', stderr);
    abort();
}

/* Run the oracle on an exact-size copy, so ASan sees any over-read. */
static void check_frame(const char *p, size_t n, unsigned seed)
{
    char *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, p, n);
    const char *why = oracle_check(copy, n, seed);
    if (why)
        die(why, (const uint8_t *)copy, n);
    free(copy);
}

static void check_head(const char *p, size_t n)
{
    char *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, p, n);
    tg_jspan_t id;
    if (tg_mcp_scan_head_id(copy, n, &id) == 0 && (id.off > n || id.len > n - id.off))
        die("head id outside the head", (const uint8_t *)copy, n);
    free(copy);
}

/* Reference: the next expected event for the stream at <*at>. */
typedef struct ref {
    const uint8_t *s;
    size_t n, at;
    uint64_t max;
    int pending_skip; /* an OVERSIZE was given for the line at <at> */
    size_t skip_off;  /* bytes of that line handed out so far */
    tg_mcp_head_t head; /* its top-level members, read as they streamed */
} ref_t;

/* The streamed reading of an over-cap line against jansson: an id it
 * reports is the line's own, when the line is one valid object. */
static void check_head_stream(const ref_t *r, size_t line)
{
    const char *id;
    size_t n;
    if (!tg_mcp_head_id(&r->head, &id, &n))
        return;
    json_t *obj = json_loadb((const char *)r->s + r->at, line, JSON_REJECT_DUPLICATES, NULL);
    if (obj == NULL)
        return;
    json_t *want = json_object_get(obj, "id");
    json_t *got = json_loadb(id, n, JSON_DECODE_ANY, NULL);
    if (!json_is_object(obj) || got == NULL || want == NULL || !json_equal(want, got))
        die("ndjson: the streamed id is not the line's", r->s + r->at, line);
    json_decref(got);
    json_decref(obj);
}

static void expect_event(ref_t *r, tg_nd_ev_t ev, const char *buf, size_t start, size_t end,
                         uint64_t total)
{
    const uint8_t *nl = r->at < r->n ? memchr(r->s + r->at, '\n', r->n - r->at) : NULL;
    size_t line = nl ? (size_t)(nl - (r->s + r->at)) : r->n - r->at;
    if (r->pending_skip) {
        /* every byte of the line past its head is handed out once, in order */
        if ((ev != TG_ND_SKIPPING && ev != TG_ND_SKIPPED) || end < start ||
            r->skip_off + (end - start) > line ||
            memcmp(buf + start, r->s + r->at + r->skip_off, end - start) != 0)
            die("ndjson: expected the over-cap line's next bytes", r->s, r->n);
        r->skip_off += end - start;
        tg_mcp_head_feed(&r->head, buf + start, end - start);
        if (ev == TG_ND_SKIPPING)
            return;
        if (!nl || total != line || r->skip_off != line)
            die("ndjson: expected SKIPPED with the line length", r->s, r->n);
        check_head_stream(r, line);
        r->at += line + 1;
        r->pending_skip = 0;
        return;
    }
    if (nl && line <= r->max) {
        if (ev != TG_ND_FRAME || end - start != line || memcmp(buf + start, r->s + r->at, line) != 0 ||
            buf[end] != '\n')
            die("ndjson: expected FRAME", r->s, r->n);
        r->at += line + 1;
        return;
    }
    if (line > r->max) {
        if (ev != TG_ND_OVERSIZE || end - start != r->max ||
            memcmp(buf + start, r->s + r->at, (size_t)r->max) != 0)
            die("ndjson: expected OVERSIZE", r->s, r->n);
        r->pending_skip = 1;
        r->skip_off = (size_t)r->max;
        tg_mcp_head_init(&r->head);
        tg_mcp_head_feed(&r->head, buf + start, end - start);
        return;
    }
    die("ndjson: event for an unfinished short line", r->s, r->n);
}

static void fuzz_ndjson(const uint8_t *data, size_t size)
{
    uint64_t max = (data[0] & 3) == 0 ? 8 + data[0] / 4 : 65536;
    size_t chunk = 1 + (size_t)(data[size - 1] * 7u) % 200;
    size_t cap = (size_t)max + chunk + 1;
    char *win = malloc(cap);
    if (!win)
        abort();
    tg_ndjson_t c;
    tg_ndjson_init(&c, max);
    static ref_t r;
    memset(&r, 0, sizeof r);
    r.s = data;
    r.n = size;
    r.max = max;
    size_t len = 0, pos = 0, fed = 0;
    unsigned seed = 1;
    while (fed < size) {
        size_t k = size - fed < chunk ? size - fed : chunk;
        if (cap - len < k)
            die("ndjson: window overflow (partial frame above max_frame)", data, size);
        memcpy(win + len, data + fed, k);
        len += k;
        fed += k;
        for (;;) {
            size_t start = 0, end = 0;
            uint64_t total = 0;
            size_t before = pos;
            tg_nd_ev_t ev = tg_ndjson_next(&c, win, len, &pos, &start, &end, &total);
            if (pos < before || pos > len)
                die("ndjson: position moved backwards or past the data", data, size);
            if (ev == TG_ND_NEED_MORE)
                break;
            expect_event(&r, ev, win, start, end, total);
            if (ev == TG_ND_FRAME)
                check_frame(win + start, end - start, seed++);
            else if (ev == TG_ND_OVERSIZE)
                check_head(win + start, end - start);
        }
        /* the shell keeps only the partial frame, moved to the front */
        memmove(win, win + pos, len - pos);
        len -= pos;
        pos = 0;
    }
    /* what is left is an unfinished line no longer than the cap, or the
     * tail of an over-cap one being skipped */
    size_t left = size - r.at;
    if (!r.pending_skip && (memchr(data + r.at, '\n', left) || left > max))
        die("ndjson: events missing at the end of the stream", data, size);
    free(win);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_frame((const char *)data, size, (unsigned)size * 2654435761u);
    if (size >= 2)
        fuzz_ndjson(data, size);
    return 0;
}
