/* Audit verification: proof that an audit log lost nothing.
 *
 * The core is pure (no I/O): feed it the bytes of one or more files and it
 * reports findings through a callback and keeps a summary per instance.
 * `toolgate audit verify FILE...` (tg_cli_audit) is the thin shell around
 * it that reads files, orders rotated sets and prints.
 *
 * What is checked, per instance (events are grouped by their "instance"):
 *  - schema: every line is one JSON object with v (1), ts (RFC 3339 UTC
 *    with milliseconds, "2026-11-25T22:48:21.123Z"), seq (an integer >= 1),
 *    instance (1..128 of [A-Za-z0-9._:@/-]) and event (a known event name);
 *    the optional fields have their types, caller-supplied ones
 *    (correlation_id, call_id, tool) pass the audit's safe-string check,
 *    and no other field appears;
 *  - runs: seq counts from 1 per process, so a seq of 1 starts a new run
 *    (toolgate restarted under the same instance name), unless the line is
 *    a byte-for-byte repeat of the run's first line (a duplicate) or the
 *    run has no seq 1 yet and this one is older than the run's latest ts
 *    (the run's own start, read from a file given after a newer one);
 *  - gaps: seqs missing between the lowest and highest seq of a run. A run
 *    that does not start at 1 (its oldest rotated files were removed) is
 *    not a gap: the summary shows where it starts;
 *  - duplicates: a seq seen before in the same run;
 *  - reordering: a seq lower than the one before it, for the same
 *    instance in the same file (across files, order is the files' order,
 *    which for rotated sets the CLI derives from their names);
 *  - audit.dropped: every one is a finding, since it records events the
 *    writer lost (queue full or a failed write);
 *  - how each run ended: toolgate writes router.stopping when it begins to
 *    stop, so a run without one ended by a kill, a crash, or a failure to
 *    write its last events (a full disk). A run verify knows is over (a
 *    later run of the instance follows it) is reported "ended without
 *    router.stopping", a finding; the last run of an instance may still be
 *    going (verify reads live files), so it only gets a note (open: not
 *    counted) unless the caller says every writer has stopped
 *    (tg_verify_set_stopped). What follows router.stopping (the agents'
 *    exits) is not required: only a gap would show its loss.
 *
 * audit.reopened (the writer's file was deleted or moved away and a new
 * one opened) is a valid event and no finding: the writer lost nothing,
 * and a file removed by the operator is judged like a removed rotated
 * file (the run simply starts above 1 in what is given).
 *
 * A gap is "explained" when the next audit.dropped of the run counts at
 * least as many lost events as all gaps since the previous one (audit.c
 * gives lost events no seq when the queue was full, and reports lines
 * whose write failed in the next audit.dropped). Explained or not, a gap is
 * a finding: verify passes only for a log that lost nothing. The
 * explanation tells an operator whether the writer knew (a full queue or
 * a full disk) or the loss happened outside it (a file edited or
 * truncated, a line removed).
 *
 * Memory: per instance, one entry per separate seq range of the current
 * run (one for an intact log) and one per audit.dropped; both bounded.
 */
#ifndef TG_AUDIT_VERIFY_H
#define TG_AUDIT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_VERIFY_LINE_MAX (64u * 1024)  /* fixed internal bound: longest line read whole */
#define TG_VERIFY_RANGES_MAX (1u << 20)  /* fixed internal bound: seq ranges or drops per run */
#define TG_VERIFY_INSTANCES_MAX 4096     /* fixed internal bound: instances in one verify */

typedef enum tg_verify_kind {
    TG_VERIFY_SCHEMA = 0, /* a line that is not a valid event */
    TG_VERIFY_GAP,        /* seqs missing from a run */
    TG_VERIFY_DUPLICATE,  /* a seq seen before in the run */
    TG_VERIFY_REORDER,    /* a seq lower than the one before it in the same file */
    TG_VERIFY_DROPPED,    /* an audit.dropped event: loss the writer reported */
    TG_VERIFY_UNSTOPPED,  /* a run without router.stopping (see open) */
} tg_verify_kind_t;

/* One finding, valid for the duration of the callback. */
typedef struct tg_verify_finding {
    tg_verify_kind_t kind;
    const char *file;     /* as given to tg_verify_begin */
    uint64_t line;        /* 1-based; GAP: the line of the first seq after it */
    const char *instance; /* NULL when the line has no usable instance */
    uint64_t seq;         /* GAP: first missing seq; others: the line's seq (0 if none) */
    uint64_t seq_last;    /* GAP: last missing seq */
    uint64_t count;       /* GAP: seqs missing; DROPPED: events the writer lost */
    uint64_t prev_seq;    /* REORDER: the seq of the line before it */
    bool explained;       /* GAP: covered by a later audit.dropped */
    bool open;            /* UNSTOPPED: the instance's last run, which may still be
                           * going: a note, not counted by tg_verify_findings */
    const char *msg;      /* what is wrong, one line, without file, line or instance */
} tg_verify_finding_t;

typedef void (*tg_verify_cb)(void *ud, const tg_verify_finding_t *f);

/* Per-instance totals, final after tg_verify_finish. */
typedef struct tg_verify_summary {
    const char *instance;
    uint64_t events;         /* lines of this instance with a usable seq */
    uint64_t first_seq;      /* lowest seq of the first run */
    uint64_t last_seq;       /* highest seq of the last run */
    uint32_t runs;           /* seq sequences (process lifetimes) seen */
    uint64_t missing;        /* seqs in gaps */
    uint64_t unexplained;    /* of those, not covered by an audit.dropped */
    uint64_t duplicates;
    uint64_t reordered;
    uint64_t schema;         /* lines with a schema finding */
    uint64_t dropped_events; /* sum of the audit.dropped counts */
    uint64_t dropped_lines;  /* audit.dropped events */
    uint32_t unstopped;      /* runs known to be over that have no router.stopping */
    bool open;               /* the last run has none and may still be going */
} tg_verify_summary_t;

typedef struct tg_verify tg_verify_t;

/* A verifier reporting findings to <cb> (may be NULL) with <ud>. NULL on
 * out of memory. */
tg_verify_t *tg_verify_new(tg_verify_cb cb, void *ud);
void tg_verify_free(tg_verify_t *v);

/* Every writer of the input has stopped (<stopped>): a last run without
 * router.stopping is then a finding too, not a note. Call before
 * tg_verify_finish. */
void tg_verify_set_stopped(tg_verify_t *v, bool stopped);

/* Start file <name> (copied): lines are numbered from 1 again and
 * reordering is judged within it. Ends the previous file as tg_verify_end
 * does. 0 or -ENOMEM. */
int tg_verify_begin(tg_verify_t *v, const char *name);
/* Feed <len> bytes of the current file, in order, in chunks of any size.
 * Lines longer than TG_VERIFY_LINE_MAX are reported and skipped. 0, or
 * -ENOMEM / -E2BIG (an instance, range or drop bound was hit: the log is
 * too disordered to verify). */
int tg_verify_feed(tg_verify_t *v, const char *buf, size_t len);
/* End of the current file: a last line without its '\n' is checked and
 * reported as torn. Same returns as tg_verify_feed. */
int tg_verify_end(tg_verify_t *v);
/* End of input: reports the gaps of every open run. Call once, last. */
int tg_verify_finish(tg_verify_t *v);

/* Findings reported so far (all kinds; a note on an open run is not one). */
uint64_t tg_verify_findings(const tg_verify_t *v);
/* Instances seen, in order of first appearance, and their summaries. */
size_t tg_verify_ninstances(const tg_verify_t *v);
const tg_verify_summary_t *tg_verify_summary(const tg_verify_t *v, size_t i);
/* Lines that could not be attributed to an instance (each is a schema
 * finding). */
uint64_t tg_verify_unattributed(const tg_verify_t *v);

/* `toolgate audit SUBCOMMAND ...`: <argv> are the words after "audit"
 * ("verify", options, files). Prints findings, notes and one summary line
 * per instance on stdout, errors on stderr. Returns the exit status: 0
 * when every file verified clean (a last run without router.stopping is
 * only a note, unless --stopped says every writer has stopped), 1 when
 * there is any finding, 2 on bad usage or a file that could not be read. */
int tg_cli_audit(int argc, char **argv);

#endif
