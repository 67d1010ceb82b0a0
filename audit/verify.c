/* Audit verification core (pure: bytes in, findings out). See verify.h for
 * what is checked and why; the CLI is in verify_cli.c.
 *
 * Per instance the current run keeps the seqs seen as a sorted array of
 * disjoint ranges [lo, hi], each remembering where its lo was read (the
 * place to report the gap before it). An intact log is one range that
 * grows at its end, which the hint makes O(1) per line; disorder costs a
 * binary search and, for a new range, a move. Gaps are the holes between
 * ranges when the run ends (a new seq 1, or the end of input).
 *
 * Bytes of a bad line are never echoed: a finding names the field and
 * what is wrong with it, and quotes a value only when it passes the
 * audit's safe-string check (an audit file can be damaged, and verify's
 * output ends up in terminals and CI logs).
 */
#include "audit/verify.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"

#define PROBS_MAX 512 /* fixed internal bound: the text of one schema finding */

static const char *const known_events[] = {
    "router.started",   "router.stopping", "config.reloaded",     "config.rejected",
    "agent.started",    "agent.exited",    "agent.killed",        "agent.unhealthy",
    "agent.restarting", "call.completed",  "call.denied",         "call.timeout",
    "call.cancelled",   "call.late_result", "limit.warning",      "limit.recovered",
    "store.degraded",   "store.recovered", "audit.dropped",       "agent.invalid_frame",
    "audit.reopened",   "agent.name_collision",
};

typedef enum ftype {
    F_REQUIRED, /* v, ts, seq, instance, event: checked one by one */
    F_STR,      /* a name from config, an enum or a toolgate id */
    F_SAFE,     /* caller-supplied: safe string or "invalid" */
    F_COUNT,    /* an integer >= 0 */
    F_INT,      /* any integer */
    F_LIMIT,
    F_EXIT,
    F_OBJECT,
} ftype_t;

typedef struct field {
    const char *name;
    ftype_t type;
} field_t;

/* Every top-level field an event may hold (DESIGN.md "Audit" and the
 * encoder in encode.c). */
static const field_t fields[] = {
    {"v", F_REQUIRED},          {"ts", F_REQUIRED},        {"seq", F_REQUIRED},
    {"instance", F_REQUIRED},   {"event", F_REQUIRED},     {"request_id", F_STR},
    {"correlation_id", F_SAFE}, {"call_id", F_SAFE},       {"agent", F_STR},
    {"tool", F_SAFE},           {"caller", F_STR},         {"status", F_STR},
    {"code", F_STR},            {"stage", F_STR},          {"reason", F_STR},
    {"limit", F_LIMIT},         {"duration_ms", F_COUNT},  {"bytes_in", F_COUNT},
    {"bytes_out", F_COUNT},     {"retry_after_ms", F_COUNT}, {"count", F_COUNT},
    {"pid", F_COUNT},           {"attempt", F_COUNT},      {"backoff_ms", F_COUNT},
    {"exit", F_EXIT},           {"enforced", F_OBJECT},    {"decided_by", F_STR},
    {"front", F_STR},           {"session", F_STR},        {"remote", F_STR},
    {"key", F_STR},             {"exposed_tool", F_SAFE},
};

static const field_t limit_fields[] = {
    {"type", F_STR}, {"scope", F_STR}, {"name", F_STR}, {"observed", F_INT}, {"cap", F_INT},
};

static const field_t exit_fields[] = {
    {"code", F_INT},
    {"signal", F_INT},
    {"memory_peak_bytes", F_COUNT},
    {"reason", F_STR},
};

typedef struct range {
    uint64_t lo, hi;
    uint32_t file; /* where lo was read */
    uint64_t line;
} range_t;

typedef struct drop {
    uint64_t seq, count;
    uint32_t file;
    uint64_t line;
} drop_t;

/* One instance: its summary and its current run. Owned by tg_verify_t. */
typedef struct inst {
    char *name;
    tg_verify_summary_t sum;
    bool in_run;
    bool run_has_one;     /* the run's seq 1 was read */
    uint64_t one_hash;    /* ... and the hash of that line */
    char max_ts[25];      /* latest valid ts of the run ("" none); fixed width, so
                           * strcmp orders them */
    range_t *r;
    size_t nr, capr, hint;
    drop_t *d;
    size_t nd, capd;
    uint32_t last_file;   /* file of <last_seq> + 1; 0 = none */
    uint64_t last_seq;    /* seq of the instance's previous line in that file */
    bool run_stopped;     /* the run has a router.stopping */
    uint64_t run_hi;      /* the run's highest seq, read at ... */
    uint32_t hi_file;     /* ... this file */
    uint64_t hi_line;     /* ... and line */
} inst_t;

struct tg_verify {
    tg_verify_cb cb;
    void *ud;
    char **files; /* names, for findings reported after their file ended */
    uint32_t nfiles;
    uint64_t line;  /* lines of the current file so far */
    char *buf;      /* a line split across feeds */
    size_t blen;
    bool skipping;  /* inside a line longer than TG_VERIFY_LINE_MAX */
    inst_t **inst;
    size_t ninst, capinst;
    size_t last_inst; /* lookup hint: consecutive lines share an instance */
    uint64_t findings;
    uint64_t unattributed;
    bool stopped; /* every writer has stopped: no run is still going */
};

/* ---- findings ---------------------------------------------------------- */

static void report(tg_verify_t *v, tg_verify_finding_t *f)
{
    v->findings++;
    if (v->cb != NULL)
        v->cb(v->ud, f);
}

typedef struct probs {
    char text[PROBS_MAX];
    size_t len;
    unsigned n;
} probs_t;

static void prob(probs_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void prob(probs_t *p, const char *fmt, ...)
{
    va_list ap;

    if (p->len + 8 >= sizeof(p->text))
        return;
    if (p->n++ != 0) {
        memcpy(p->text + p->len, "; ", 2);
        p->len += 2;
    }
    va_start(ap, fmt);
    int w = vsnprintf(p->text + p->len, sizeof(p->text) - p->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        p->len += (size_t)w < sizeof(p->text) - p->len ? (size_t)w : sizeof(p->text) - p->len - 1;
}

static bool safe(const char *s)
{
    return tg_audit_safe_str(s, strlen(s));
}

/* ---- schema ------------------------------------------------------------ */

static bool digits(const char *s, int n, unsigned *out)
{
    unsigned v = 0;

    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" naming a real instant (RFC 3339, UTC, with
 * milliseconds, as the encoder writes it). Second 60 is RFC 3339's leap
 * second. */
static bool ts_ok(const char *s, size_t len)
{
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned y, mo, d, h, mi, se, ms;

    if (len != 24 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
        s[16] != ':' || s[19] != '.' || s[23] != 'Z')
        return false;
    if (!digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) ||
        !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &se) ||
        !digits(s + 20, 3, &ms))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 60)
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    unsigned dim = mdays[mo - 1] + (mo == 2 && leap ? 1 : 0);
    return d <= dim;
}

static const field_t *field_find(const field_t *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

static void unknown_key(probs_t *p, const char *where, const char *key)
{
    if (safe(key))
        prob(p, "unknown field %s\"%s\"", where, key);
    else
        prob(p, "an unknown field %swith unexpected characters in its name", where);
}

/* Check <val> against <type>; <name> is the field's display name. */
static void check_value(probs_t *p, const char *name, ftype_t type, json_t *val);

static void check_members(probs_t *p, const char *obj, json_t *val, const field_t *t, size_t n,
                          const char *required)
{
    const char *key;
    json_t *m;
    char where[64], display[96];

    if (!json_is_object(val)) {
        prob(p, "\"%s\" is not an object", obj);
        return;
    }
    snprintf(where, sizeof(where), "in \"%s\" ", obj);
    json_object_foreach(val, key, m)
    {
        const field_t *f = field_find(t, n, key);
        if (f == NULL) {
            unknown_key(p, where, key);
            continue;
        }
        snprintf(display, sizeof(display), "%s.%s", obj, key);
        check_value(p, display, f->type, m);
    }
    if (required != NULL && json_object_get(val, required) == NULL)
        prob(p, "\"%s\" has no \"%s\"", obj, required);
}

static void check_value(probs_t *p, const char *name, ftype_t type, json_t *val)
{
    switch (type) {
    case F_REQUIRED:
        break;
    case F_STR:
        if (!json_is_string(val))
            prob(p, "\"%s\" is not a string", name);
        break;
    case F_SAFE:
        if (!json_is_string(val))
            prob(p, "\"%s\" is not a string", name);
        else if (!safe(json_string_value(val)))
            prob(p, "\"%s\" is not a safe string (1 to %d of [A-Za-z0-9._:@/-], or \"invalid\")",
                 name, TG_AUDIT_SAFE_MAX);
        break;
    case F_COUNT:
        if (!json_is_integer(val) || json_integer_value(val) < 0)
            prob(p, "\"%s\" is not an integer >= 0", name);
        break;
    case F_INT:
        if (!json_is_integer(val))
            prob(p, "\"%s\" is not an integer", name);
        break;
    case F_LIMIT:
        check_members(p, name, val, limit_fields, sizeof(limit_fields) / sizeof(limit_fields[0]),
                      "type");
        break;
    case F_EXIT:
        check_members(p, name, val, exit_fields, sizeof(exit_fields) / sizeof(exit_fields[0]),
                      "reason");
        break;
    case F_OBJECT:
        if (!json_is_object(val))
            prob(p, "\"%s\" is not an object", name);
        break;
    }
}

static bool known_event(const char *e)
{
    for (size_t i = 0; i < sizeof(known_events) / sizeof(known_events[0]); i++)
        if (strcmp(known_events[i], e) == 0)
            return true;
    return false;
}

/* ---- instances and runs ------------------------------------------------- */

static int inst_get(tg_verify_t *v, const char *name, inst_t **out)
{
    if (v->last_inst < v->ninst && strcmp(v->inst[v->last_inst]->name, name) == 0) {
        *out = v->inst[v->last_inst];
        return 0;
    }
    for (size_t i = 0; i < v->ninst; i++) {
        if (strcmp(v->inst[i]->name, name) == 0) {
            v->last_inst = i;
            *out = v->inst[i];
            return 0;
        }
    }
    if (v->ninst == TG_VERIFY_INSTANCES_MAX)
        return -E2BIG;
    if (v->ninst == v->capinst) {
        size_t cap = v->capinst ? v->capinst * 2 : 8;
        inst_t **n = realloc(v->inst, cap * sizeof(*n));
        if (n == NULL)
            return -ENOMEM;
        v->inst = n;
        v->capinst = cap;
    }
    inst_t *in = calloc(1, sizeof(*in));
    if (in == NULL || (in->name = strdup(name)) == NULL) {
        free(in);
        return -ENOMEM;
    }
    in->sum.instance = in->name;
    v->last_inst = v->ninst;
    v->inst[v->ninst++] = in;
    *out = in;
    return 0;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    if (n >= TG_VERIFY_RANGES_MAX)
        return -E2BIG;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > TG_VERIFY_RANGES_MAX)
        c = TG_VERIFY_RANGES_MAX;
    void *p = realloc(*arr, c * elem);
    if (p == NULL)
        return -ENOMEM;
    *arr = p;
    *cap = c;
    return 0;
}

/* Join range <i> with the next one when they touch. */
static void merge_next(inst_t *in, size_t i)
{
    if (i + 1 < in->nr && in->r[i + 1].lo == in->r[i].hi + 1) {
        in->r[i].hi = in->r[i + 1].hi;
        memmove(&in->r[i + 1], &in->r[i + 2], (in->nr - i - 2) * sizeof(range_t));
        in->nr--;
    }
}

/* Add <s> read at <file>:<line> to the run's ranges. 1 when new, 0 when
 * already there, or a negative errno. */
static int ranges_add(inst_t *in, uint64_t s, uint32_t file, uint64_t line)
{
    if (in->hint < in->nr && s == in->r[in->hint].hi + 1) {
        in->r[in->hint].hi = s; /* the common case: the next seq */
        merge_next(in, in->hint);
        return 1;
    }
    size_t lo = 0, hi = in->nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (in->r[mid].lo <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo; /* r[k-1].lo <= s < r[k].lo */
    if (k > 0 && s <= in->r[k - 1].hi)
        return 0;
    if (k > 0 && s == in->r[k - 1].hi + 1) {
        in->r[k - 1].hi = s;
        in->hint = k - 1;
        merge_next(in, k - 1);
        return 1;
    }
    if (k < in->nr && s + 1 == in->r[k].lo) {
        in->r[k].lo = s;
        in->r[k].file = file;
        in->r[k].line = line;
        in->hint = k;
        return 1;
    }
    int rc = grow((void **)&in->r, &in->capr, in->nr, sizeof(range_t));
    if (rc < 0)
        return rc;
    memmove(&in->r[k + 1], &in->r[k], (in->nr - k) * sizeof(range_t));
    in->r[k] = (range_t){s, s, file, line};
    in->nr++;
    in->hint = k;
    return 1;
}

static int drop_cmp(const void *a, const void *b)
{
    const drop_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Report the gaps in <pending> (indexes into <in>->r: gap before r[k]),
 * explained when their total is within the audit.dropped <d> (NULL: none
 * follows). */
static void settle(tg_verify_t *v, inst_t *in, const size_t *pending, size_t np,
                   const drop_t *d)
{
    uint64_t total = 0;
    char msg[256];

    for (size_t i = 0; i < np; i++) {
        const range_t *after = &in->r[pending[i]], *before = &in->r[pending[i] - 1];
        total += after->lo - before->hi - 1;
    }
    bool explained = d != NULL && total <= d->count;
    for (size_t i = 0; i < np; i++) {
        const range_t *after = &in->r[pending[i]], *before = &in->r[pending[i] - 1];
        uint64_t first = before->hi + 1, last = after->lo - 1, n = last - first + 1;
        int w = first == last ? snprintf(msg, sizeof(msg), "gap: seq %llu missing",
                                         (unsigned long long)first)
                              : snprintf(msg, sizeof(msg), "gap: seq %llu..%llu missing (%llu events)",
                                         (unsigned long long)first, (unsigned long long)last,
                                         (unsigned long long)n);
        if (w > 0 && (size_t)w < sizeof(msg)) {
            if (explained)
                snprintf(msg + w, sizeof(msg) - (size_t)w,
                         ", explained by the audit.dropped at %s:%llu", v->files[d->file],
                         (unsigned long long)d->line);
            else if (d != NULL)
                snprintf(msg + w, sizeof(msg) - (size_t)w,
                         ", more than the audit.dropped at %s:%llu reports", v->files[d->file],
                         (unsigned long long)d->line);
            else
                snprintf(msg + w, sizeof(msg) - (size_t)w, ", not reported by any audit.dropped");
        }
        tg_verify_finding_t f = {
            .kind = TG_VERIFY_GAP,
            .file = v->files[after->file],
            .line = after->line,
            .instance = in->name,
            .seq = first,
            .seq_last = last,
            .count = n,
            .explained = explained,
            .msg = msg,
        };
        in->sum.missing += n;
        if (!explained)
            in->sum.unexplained += n;
        report(v, &f);
    }
}

/* The run of <in> has no router.stopping. <over>: it is known to have
 * ended (a later run of the instance follows, or every writer has
 * stopped), so its end was not clean: a finding. Otherwise it may still be
 * going: a note to the callback, not counted. */
static void unstopped(tg_verify_t *v, inst_t *in, bool over)
{
    char msg[256];

    if (over)
        snprintf(msg, sizeof(msg),
                 "ended without router.stopping (seq %llu is the run's last event): toolgate was "
                 "killed or crashed, or its last events could not be written",
                 (unsigned long long)in->run_hi);
    else
        snprintf(msg, sizeof(msg),
                 "no router.stopping after seq %llu: the run is still going, or it ended "
                 "without router.stopping (killed, crashed, or its last events not written)",
                 (unsigned long long)in->run_hi);
    tg_verify_finding_t f = {.kind = TG_VERIFY_UNSTOPPED, .file = v->files[in->hi_file],
                             .line = in->hi_line, .instance = in->name, .seq = in->run_hi,
                             .open = !over, .msg = msg};
    if (over) {
        in->sum.unstopped++;
        report(v, &f);
    } else {
        in->sum.open = true;
        if (v->cb != NULL)
            v->cb(v->ud, &f);
    }
}

/* The run of <in> is over (<over>: known to be; see unstopped): report
 * its gaps and how it ended, and start afresh. */
static int end_run(tg_verify_t *v, inst_t *in, bool over)
{
    size_t *pending = NULL, np = 0, di = 0;

    if (!in->in_run)
        return 0;
    if (in->nr != 0) {
        if (in->sum.runs == 1)
            in->sum.first_seq = in->r[0].lo;
        in->sum.last_seq = in->r[in->nr - 1].hi;
    }
    if (in->nr > 1) {
        pending = malloc((in->nr - 1) * sizeof(*pending));
        if (pending == NULL)
            return -ENOMEM;
    }
    if (in->nd > 1)
        qsort(in->d, in->nd, sizeof(drop_t), drop_cmp);
    for (size_t k = 1; k < in->nr; k++) {
        /* audit.dropped lines before this gap close the gaps before them */
        while (di < in->nd && in->d[di].seq < in->r[k - 1].hi + 1) {
            settle(v, in, pending, np, &in->d[di]);
            np = 0;
            di++;
        }
        pending[np++] = k;
    }
    if (np != 0)
        settle(v, in, pending, np, di < in->nd ? &in->d[di] : NULL);
    free(pending);
    if (in->run_hi != 0 && !in->run_stopped)
        unstopped(v, in, over || v->stopped);
    in->nr = in->nd = in->hint = 0;
    in->in_run = false;
    in->run_has_one = false;
    in->max_ts[0] = '\0';
    in->last_file = 0;
    in->run_stopped = false;
    in->run_hi = 0;
    return 0;
}

static uint64_t fnv1a(const char *p, size_t len)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* True when a seq 1 read with timestamp <ts> (NULL: unusable) starts a new
 * run of <in> rather than belonging to the open one. It does when the run
 * has its seq 1 already, or when it is later than the run's latest event:
 * a restarted process writes after its predecessor (and takes more than a
 * millisecond to start). A seq 1 no later than that, with the run's seq 1
 * missing, is the start of this same run read late (files given out of
 * order; a busy writer puts many events in one millisecond). */
static bool starts_run(const inst_t *in, const char *ts)
{
    if (!in->in_run)
        return true;
    return in->run_has_one || ts == NULL || in->max_ts[0] == '\0' || strcmp(ts, in->max_ts) > 0;
}

/* Account for <seq> of <in> read on the current line (<hash> of its bytes,
 * <ts> its valid timestamp or NULL). 1 when the seq is new in its run, 0
 * when a duplicate, or a negative errno. */
static int track(tg_verify_t *v, inst_t *in, uint64_t seq, uint64_t hash, const char *ts)
{
    uint32_t file = v->nfiles - 1;
    char msg[128];
    int rc;

    if (seq == 1 && in->in_run && !(in->run_has_one && in->one_hash == hash) &&
        starts_run(in, ts)) {
        rc = end_run(v, in, true);
        if (rc < 0)
            return rc;
    }
    if (!in->in_run) {
        in->in_run = true;
        in->sum.runs++;
    }
    if (seq == 1 && !in->run_has_one) {
        in->run_has_one = true;
        in->one_hash = hash;
    }
    if (ts != NULL && strcmp(ts, in->max_ts) > 0)
        memcpy(in->max_ts, ts, sizeof(in->max_ts));
    rc = ranges_add(in, seq, file, v->line);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        snprintf(msg, sizeof(msg), "duplicate: seq %llu was seen before in this run",
                 (unsigned long long)seq);
        tg_verify_finding_t f = {.kind = TG_VERIFY_DUPLICATE, .file = v->files[file],
                                 .line = v->line, .instance = in->name, .seq = seq, .msg = msg};
        in->sum.duplicates++;
        report(v, &f);
        return 0;
    }
    in->sum.events++;
    if (seq > in->run_hi) {
        in->run_hi = seq;
        in->hi_file = file;
        in->hi_line = v->line;
    }
    if (in->last_file == file + 1 && seq < in->last_seq) {
        snprintf(msg, sizeof(msg), "out of order: seq %llu comes after seq %llu",
                 (unsigned long long)seq, (unsigned long long)in->last_seq);
        tg_verify_finding_t f = {.kind = TG_VERIFY_REORDER, .file = v->files[file],
                                 .line = v->line, .instance = in->name, .seq = seq,
                                 .prev_seq = in->last_seq, .msg = msg};
        in->sum.reordered++;
        report(v, &f);
    }
    in->last_file = file + 1;
    in->last_seq = seq;
    return 1;
}

static int record_drop(tg_verify_t *v, inst_t *in, uint64_t seq, uint64_t count)
{
    char msg[128];
    int rc = grow((void **)&in->d, &in->capd, in->nd, sizeof(drop_t));

    if (rc < 0)
        return rc;
    in->d[in->nd++] = (drop_t){seq, count, v->nfiles - 1, v->line};
    in->sum.dropped_lines++;
    in->sum.dropped_events += count;
    snprintf(msg, sizeof(msg), "audit.dropped: the writer lost %llu event%s before this line",
             (unsigned long long)count, count == 1 ? "" : "s");
    tg_verify_finding_t f = {.kind = TG_VERIFY_DROPPED, .file = v->files[v->nfiles - 1],
                             .line = v->line, .instance = in->name, .seq = seq, .count = count,
                             .msg = msg};
    report(v, &f);
    return 0;
}

static void schema_finding(tg_verify_t *v, inst_t *in, uint64_t seq, const probs_t *p)
{
    char msg[PROBS_MAX + 16];

    snprintf(msg, sizeof(msg), "schema: %s", p->text);
    tg_verify_finding_t f = {.kind = TG_VERIFY_SCHEMA, .file = v->files[v->nfiles - 1],
                             .line = v->line, .instance = in != NULL ? in->name : NULL,
                             .seq = seq, .msg = msg};
    if (in != NULL)
        in->sum.schema++;
    else
        v->unattributed++;
    report(v, &f);
}

/* The required fields of <root>: problems into <p>, a usable seq into
 * <*seq> (0 when none), the event name into <*event> and the timestamp
 * into <*ts> (NULL when none or invalid). */
static void check_required(probs_t *p, json_t *root, uint64_t *seq, const char **event,
                           const char **ts)
{
    json_t *x;

    *seq = 0;
    *event = NULL;
    *ts = NULL;
    if ((x = json_object_get(root, "v")) == NULL)
        prob(p, "no \"v\"");
    else if (!json_is_integer(x))
        prob(p, "\"v\" is not an integer");
    else if (json_integer_value(x) != TG_AUDIT_SCHEMA_VERSION)
        prob(p, "\"v\" is %lld (this verify reads version %d)", (long long)json_integer_value(x),
             TG_AUDIT_SCHEMA_VERSION);

    if ((x = json_object_get(root, "ts")) == NULL)
        prob(p, "no \"ts\"");
    else if (!json_is_string(x) || !ts_ok(json_string_value(x), json_string_length(x)))
        prob(p, "\"ts\" is not an RFC 3339 UTC time with milliseconds "
                "(YYYY-MM-DDTHH:MM:SS.mmmZ)");
    else
        *ts = json_string_value(x);

    if ((x = json_object_get(root, "seq")) == NULL)
        prob(p, "no \"seq\"");
    else if (!json_is_integer(x) || json_integer_value(x) < 1)
        prob(p, "\"seq\" is not an integer >= 1");
    else
        *seq = (uint64_t)json_integer_value(x);

    if ((x = json_object_get(root, "event")) == NULL) {
        prob(p, "no \"event\"");
    } else if (!json_is_string(x)) {
        prob(p, "\"event\" is not a string");
    } else if (!known_event(json_string_value(x))) {
        if (safe(json_string_value(x)))
            prob(p, "unknown event \"%s\"", json_string_value(x));
        else
            prob(p, "unknown event (with unexpected characters)");
    } else {
        *event = json_string_value(x);
    }
}

/* Check one line (<len> bytes, no '\n'); <torn>: the file ended without
 * its newline. */
static int check_line(tg_verify_t *v, const char *line, size_t len, bool torn)
{
    probs_t p = {.len = 0, .n = 0};
    json_error_t je;
    json_t *root = NULL, *x;
    inst_t *in = NULL;
    const char *key, *event, *ts;
    uint64_t seq;
    int rc = 0;

    p.text[0] = '\0';
    v->line++;
    if (len == 0) {
        prob(&p, "empty line");
        schema_finding(v, NULL, 0, &p);
        return 0;
    }
    root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL || !json_is_object(root)) {
        if (torn)
            prob(&p, "the last line is cut short (no newline and not a complete JSON object)");
        else if (root == NULL)
            prob(&p, "not valid JSON (near byte %d)", je.position);
        else
            prob(&p, "not a JSON object");
        json_decref(root);
        schema_finding(v, NULL, 0, &p);
        return 0;
    }
    x = json_object_get(root, "instance");
    if (x == NULL || !json_is_string(x) || !safe(json_string_value(x))) {
        prob(&p, "%s \"instance\" (expected 1 to %d of [A-Za-z0-9._:@/-])",
             x == NULL ? "no" : "an invalid", TG_AUDIT_SAFE_MAX);
        json_decref(root);
        schema_finding(v, NULL, 0, &p);
        return 0;
    }
    rc = inst_get(v, json_string_value(x), &in);
    if (rc < 0) {
        json_decref(root);
        return rc;
    }

    check_required(&p, root, &seq, &event, &ts);
    json_object_foreach(root, key, x)
    {
        const field_t *f = field_find(fields, sizeof(fields) / sizeof(fields[0]), key);
        if (f == NULL)
            unknown_key(&p, "", key);
        else
            check_value(&p, key, f->type, x);
    }
    bool dropped = event != NULL && strcmp(event, "audit.dropped") == 0;
    x = json_object_get(root, "count");
    bool count_ok = x != NULL && json_is_integer(x) && json_integer_value(x) >= 0;
    if (dropped && x == NULL)
        prob(&p, "audit.dropped without \"count\"");
    if (torn)
        prob(&p, "no newline at the end of the file (a torn or unfinished write)");
    if (p.n != 0)
        schema_finding(v, in, seq, &p);

    if (seq != 0) {
        rc = track(v, in, seq, fnv1a(line, len), ts);
        if (rc == 1 && event != NULL && strcmp(event, "router.stopping") == 0)
            in->run_stopped = true;
        if (rc == 1 && dropped && count_ok)
            rc = record_drop(v, in, seq, (uint64_t)json_integer_value(x));
    }
    json_decref(root);
    return rc < 0 ? rc : 0;
}

/* ---- API --------------------------------------------------------------- */

tg_verify_t *tg_verify_new(tg_verify_cb cb, void *ud)
{
    tg_verify_t *v = calloc(1, sizeof(*v));

    if (v == NULL)
        return NULL;
    v->buf = malloc(TG_VERIFY_LINE_MAX);
    if (v->buf == NULL) {
        free(v);
        return NULL;
    }
    v->cb = cb;
    v->ud = ud;
    return v;
}

void tg_verify_free(tg_verify_t *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->ninst; i++) {
        free(v->inst[i]->name);
        free(v->inst[i]->r);
        free(v->inst[i]->d);
        free(v->inst[i]);
    }
    free(v->inst);
    for (uint32_t i = 0; i < v->nfiles; i++)
        free(v->files[i]);
    free(v->files);
    free(v->buf);
    free(v);
}

int tg_verify_begin(tg_verify_t *v, const char *name)
{
    int rc = v->nfiles != 0 ? tg_verify_end(v) : 0;

    if (rc < 0)
        return rc;
    if (v->nfiles == UINT32_MAX - 1)
        return -E2BIG;
    char **files = realloc(v->files, (v->nfiles + 1) * sizeof(*files));
    if (files == NULL)
        return -ENOMEM;
    v->files = files;
    if ((files[v->nfiles] = strdup(name)) == NULL)
        return -ENOMEM;
    v->nfiles++;
    v->line = 0;
    v->blen = 0;
    v->skipping = false;
    return 0;
}

static void too_long(tg_verify_t *v)
{
    probs_t p = {.len = 0, .n = 0};

    v->line++;
    prob(&p, "line longer than %u bytes (not read)", TG_VERIFY_LINE_MAX);
    schema_finding(v, NULL, 0, &p);
}

int tg_verify_feed(tg_verify_t *v, const char *buf, size_t len)
{
    if (v->nfiles == 0)
        return -EINVAL;
    while (len != 0) {
        const char *nl = memchr(buf, '\n', len);
        size_t take = nl != NULL ? (size_t)(nl - buf) : len;
        size_t used = nl != NULL ? take + 1 : take;
        int rc = 0;

        if (v->skipping) {
            v->skipping = nl == NULL;
        } else if (v->blen + take > TG_VERIFY_LINE_MAX) {
            too_long(v);
            v->blen = 0;
            v->skipping = nl == NULL;
        } else if (nl != NULL && v->blen == 0) {
            rc = check_line(v, buf, take, false); /* whole line in this chunk: no copy */
        } else {
            memcpy(v->buf + v->blen, buf, take);
            v->blen += take;
            if (nl != NULL) {
                rc = check_line(v, v->buf, v->blen, false);
                v->blen = 0;
            }
        }
        if (rc < 0)
            return rc;
        buf += used;
        len -= used;
    }
    return 0;
}

int tg_verify_end(tg_verify_t *v)
{
    int rc = 0;

    if (v->nfiles == 0)
        return 0;
    if (v->blen != 0)
        rc = check_line(v, v->buf, v->blen, true);
    v->blen = 0;
    v->skipping = false;
    return rc;
}

int tg_verify_finish(tg_verify_t *v)
{
    int rc = tg_verify_end(v);

    for (size_t i = 0; i < v->ninst && rc == 0; i++)
        rc = end_run(v, v->inst[i], false);
    return rc;
}

void tg_verify_set_stopped(tg_verify_t *v, bool stopped)
{
    v->stopped = stopped;
}

uint64_t tg_verify_findings(const tg_verify_t *v)
{
    return v->findings;
}

size_t tg_verify_ninstances(const tg_verify_t *v)
{
    return v->ninst;
}

const tg_verify_summary_t *tg_verify_summary(const tg_verify_t *v, size_t i)
{
    return i < v->ninst ? &v->inst[i]->sum : NULL;
}

uint64_t tg_verify_unattributed(const tg_verify_t *v)
{
    return v->unattributed;
}
