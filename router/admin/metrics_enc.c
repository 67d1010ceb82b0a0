/* The encoders of the router's metrics (see metrics_enc.h): Prometheus
 * text, /limits and /agents JSON.
 *
 * They reuse the bounded writer of jsonw.h for Prometheus text as well as
 * JSON: it is a plain "append into a fixed buffer, fail once" writer, and
 * one failure check at the end is what both need.
 */
#include "router/admin/metrics_enc.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/jsonw.h"
#include "router/call/denial.h"

/* RFC 3339 can only write years 0000..9999 (tg_jw_ts). */
#define METRICS_TS_MAX_MS 253402300799999LL

static const char *store_name(tg_store_kind_t k)
{
    return k == TG_STORE_REDIS ? "redis" : "local";
}

/* ---- number formatting ------------------------------------------------ */

/* <v> / 10^<digits> as a decimal without trailing zeros: exact, unlike a
 * double (ms and µs sums stay integers until here). */
static void put_fixed(tg_jw_t *w, uint64_t v, unsigned digits)
{
    uint64_t div = 1;
    for (unsigned i = 0; i < digits; i++)
        div *= 10;
    tg_jw_u64(w, v / div);
    uint64_t frac = v % div;
    if (frac == 0)
        return;
    char t[24];
    unsigned n = digits;
    while (frac % 10 == 0) {
        frac /= 10;
        n--;
    }
    t[n] = '\0';
    for (unsigned i = n; i > 0; i--) {
        t[i - 1] = (char)('0' + frac % 10);
        frac /= 10;
    }
    tg_jw_raw(w, ".", 1);
    tg_jw_raw(w, t, n);
}

/* <v> as "%.6g" (a ratio for Prometheus) or, with <one_decimal>, "%.1f"
 * (a percentage for people). */
static void put_double(tg_jw_t *w, double v, bool one_decimal)
{
    char t[48];
    int n = one_decimal ? snprintf(t, sizeof(t), "%.1f", v) : snprintf(t, sizeof(t), "%.6g", v);
    if (n > 0 && (size_t)n < sizeof(t))
        tg_jw_raw(w, t, (size_t)n);
    else
        w->err = -EINVAL;
}

/* ---- Prometheus text -------------------------------------------------- */

static void prom_esc(tg_jw_t *w, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = p[i];
        const char *rep = NULL;
        size_t adv = 1;
        if (c == '\\')
            rep = "\\\\";
        else if (c == '"')
            rep = "\\\"";
        else if (c == '\n')
            rep = "\\n";
        else if (c >= 0x80 && (adv = tg_jw_utf8_len(p + i, n - i)) == 0)
            rep = "\xEF\xBF\xBD", adv = 1; /* U+FFFD: the format requires UTF-8 */
        if (rep == NULL) {
            i += adv;
            continue;
        }
        tg_jw_raw(w, s + run, i - run);
        tg_jw_lit(w, rep);
        i += adv;
        run = i;
    }
    tg_jw_raw(w, s + run, n - run);
}

long tg_prom_escape(char *buf, size_t cap, const char *s, size_t n)
{
    tg_jw_t w;
    tg_jw_init(&w, buf, cap);
    prom_esc(&w, s, n);
    return tg_jw_end(&w);
}

/* The Prometheus writer: a family's # HELP and # TYPE are held back until
 * its first sample, so a family with no sample (no agent sampled yet, no
 * limit with a capacity) is left out rather than written empty. */
typedef struct prom {
    tg_jw_t w;
    const char *name, *type, *help; /* pending family header, or name NULL */
} prom_t;

static void family(prom_t *p, const char *name, const char *type, const char *help)
{
    p->name = name;
    p->type = type;
    p->help = help;
}

static void family_flush(prom_t *p)
{
    if (p->name == NULL)
        return;
    tg_jw_lit(&p->w, "# HELP ");
    tg_jw_lit(&p->w, p->name);
    tg_jw_raw(&p->w, " ", 1);
    tg_jw_lit(&p->w, p->help);
    tg_jw_lit(&p->w, "\n# TYPE ");
    tg_jw_lit(&p->w, p->name);
    tg_jw_raw(&p->w, " ", 1);
    tg_jw_lit(&p->w, p->type);
    tg_jw_raw(&p->w, "\n", 1);
    p->name = NULL;
}

/* A sample is written as: name, then label() per label, then end_*(). */
typedef struct sample {
    tg_jw_t *w;
    int nlabels;
} sample_t;

static sample_t sample(prom_t *p, const char *name)
{
    family_flush(p);
    tg_jw_lit(&p->w, name);
    return (sample_t){&p->w, 0};
}

static void label(sample_t *s, const char *key, const char *val)
{
    tg_jw_raw(s->w, s->nlabels++ ? "," : "{", 1);
    tg_jw_lit(s->w, key);
    tg_jw_lit(s->w, "=\"");
    prom_esc(s->w, val, strlen(val));
    tg_jw_raw(s->w, "\"", 1);
}

static void end_labels(sample_t *s)
{
    if (s->nlabels)
        tg_jw_raw(s->w, "}", 1);
    tg_jw_raw(s->w, " ", 1);
}

static void end_u64(sample_t *s, uint64_t v)
{
    end_labels(s);
    tg_jw_u64(s->w, v);
    tg_jw_raw(s->w, "\n", 1);
}

static void end_fixed(sample_t *s, uint64_t v, unsigned digits)
{
    end_labels(s);
    put_fixed(s->w, v, digits);
    tg_jw_raw(s->w, "\n", 1);
}

static void end_double(sample_t *s, double v)
{
    end_labels(s);
    put_double(s->w, v, false);
    tg_jw_raw(s->w, "\n", 1);
}

/* The registry name of limit <i>, or "invalid.<i>". */
static void limit_name(char *dst, const tg_registry_t *r, size_t i)
{
    tg_metrics_shown_name(dst, r->v[i].name, i);
}

static const char *limit_scope(const tg_limit_t *l)
{
    return tg_metrics_name_ok(l->scope) ? l->scope : "invalid";
}

static void prom_calls(prom_t *w, const tg_metrics_t *m)
{
    family(w, "toolgate_calls_total", "counter",
           "Tool calls by agent, tool (config names; \"other\" for tools config does not "
           "name) and outcome.");
    for (size_t i = 0; i < m->nagents; i++) {
        const tg_metrics_agent_t *a = &m->agents[i];
        for (size_t row = 0; row <= a->ntools; row++) {
            /* The overflow row is folded into a tool named "other". */
            if (row == a->ntools && a->other != a->ntools)
                continue;
            const char *tool = row < a->ntools ? a->tools[row] : TG_METRICS_OTHER_TOOL;
            for (int o = 0; o < TG_OUTCOME__COUNT; o++) {
                sample_t s = sample(w, "toolgate_calls_total");
                label(&s, "agent", a->name);
                label(&s, "tool", tool);
                label(&s, "outcome", tg_outcome_name((tg_outcome_t)o));
                end_u64(&s, a->calls[row * TG_OUTCOME__COUNT + (size_t)o]);
            }
        }
    }
    family(w, "toolgate_denials_total", "counter", "Refused calls by denial code.");
    for (int c = 0; c < TG_DENY__COUNT; c++) {
        sample_t s = sample(w, "toolgate_denials_total");
        label(&s, "code", tg_deny_name((tg_deny_code_t)c));
        end_u64(&s, m->denials[c]);
    }
    family(w, "toolgate_name_collisions_total", "counter",
           "Tool or prompt names and resource URIs two agents behind one front exposed "
           "(the agent first in config order keeps it; the other's is hidden).");
    {
        sample_t s = sample(w, "toolgate_name_collisions_total");
        end_u64(&s, m->name_collisions);
    }
    family(w, "toolgate_policy_denials_total", "counter",
           "Calls the policy refused (tool_not_allowed), by the rule that decided: its index "
           "in policy.rules (or the wrap flag's), or default.");
    for (size_t i = 0; i <= TG_METRICS_POLICY_DEFAULT; i++) {
        if (m->policy_denied[i] == 0)
            continue;
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", i);
        sample_t s = sample(w, "toolgate_policy_denials_total");
        label(&s, "rule", i == TG_METRICS_POLICY_DEFAULT ? "default" : idx);
        end_u64(&s, m->policy_denied[i]);
    }
    family(w, "toolgate_call_duration_seconds", "histogram",
           "Time from a call's arrival to its answer, for calls that reached the agent.");
    for (size_t i = 0; i < m->nagents; i++) {
        const tg_metrics_agent_t *a = &m->agents[i];
        uint64_t cum = 0;
        for (size_t b = 0; b <= TG_METRICS_BUCKETS; b++) {
            cum += a->dur_bucket[b];
            sample_t s = sample(w, "toolgate_call_duration_seconds_bucket");
            label(&s, "agent", a->name);
            tg_jw_lit(s.w, ",le=\"");
            if (b < TG_METRICS_BUCKETS)
                put_fixed(s.w, tg_metrics_bucket_ms[b], 3);
            else
                tg_jw_lit(s.w, "+Inf");
            tg_jw_raw(s.w, "\"", 1);
            end_u64(&s, cum);
        }
        sample_t s = sample(w, "toolgate_call_duration_seconds_sum");
        label(&s, "agent", a->name);
        end_fixed(&s, a->dur_sum_ms, 3);
        s = sample(w, "toolgate_call_duration_seconds_count");
        label(&s, "agent", a->name);
        end_u64(&s, a->dur_count);
    }
}

/* One gauge or counter family with one sample per agent. */
typedef uint64_t (*agent_val_fn)(const tg_metrics_agent_t *a, bool *present);

static void prom_per_agent(prom_t *w, const tg_metrics_t *m, const char *name, const char *type,
                           const char *help, agent_val_fn val, unsigned digits)
{
    family(w, name, type, help);
    for (size_t i = 0; i < m->nagents; i++) {
        bool present = true;
        uint64_t v = val(&m->agents[i], &present);
        if (!present)
            continue;
        sample_t s = sample(w, name);
        label(&s, "agent", m->agents[i].name);
        end_fixed(&s, v, digits);
    }
}

static uint64_t v_inflight(const tg_metrics_agent_t *a, bool *p)
{
    (void)p;
    return a->inflight;
}
static uint64_t v_queued(const tg_metrics_agent_t *a, bool *p)
{
    (void)p;
    return a->queued;
}
static uint64_t v_up(const tg_metrics_agent_t *a, bool *p)
{
    (void)p;
    return a->state == TG_AGENT_RUNNING;
}
static uint64_t v_restarts(const tg_metrics_agent_t *a, bool *p)
{
    (void)p;
    return a->restarts;
}
static uint64_t v_mem(const tg_metrics_agent_t *a, bool *p)
{
    *p = a->have_usage;
    return a->memory_bytes;
}
static uint64_t v_mem_peak(const tg_metrics_agent_t *a, bool *p)
{
    *p = a->have_usage;
    return a->memory_peak_bytes;
}
static uint64_t v_mem_limit(const tg_metrics_agent_t *a, bool *p)
{
    *p = a->have_usage && a->memory_limit_bytes > 0;
    return a->memory_limit_bytes;
}
static uint64_t v_cpu(const tg_metrics_agent_t *a, bool *p)
{
    *p = a->have_usage;
    return a->cpu_usec;
}
static uint64_t v_pids(const tg_metrics_agent_t *a, bool *p)
{
    *p = a->have_usage;
    return a->pids;
}

static void prom_agents(prom_t *w, const tg_metrics_t *m)
{
    prom_per_agent(w, m, "toolgate_inflight_calls", "gauge",
                   "Calls held by the agent now (concurrency slots in use).", v_inflight, 0);
    prom_per_agent(w, m, "toolgate_queue_depth", "gauge",
                   "Calls waiting in the agent's bounded queue.", v_queued, 0);
    prom_per_agent(w, m, "toolgate_agent_up", "gauge", "1 when the agent process is running.", v_up,
                   0);
    prom_per_agent(w, m, "toolgate_agent_restarts_total", "counter",
                   "Times the agent was restarted.", v_restarts, 0);
    prom_per_agent(w, m, "toolgate_agent_memory_bytes", "gauge",
                   "Memory of the agent's running instances together (cgroup usage or "
                   "process-tree RSS); 0 when none runs.", v_mem, 0);
    prom_per_agent(w, m, "toolgate_agent_memory_peak_bytes", "gauge",
                   "Highest memory one instance of the agent reached.", v_mem_peak, 0);
    prom_per_agent(w, m, "toolgate_agent_memory_limit_bytes", "gauge",
                   "Memory limit applied to each instance of the agent.", v_mem_limit, 0);
    prom_per_agent(w, m, "toolgate_agent_cpu_seconds_total", "counter",
                   "CPU time used by the agent's instances, ended ones included.", v_cpu, 6);
    prom_per_agent(w, m, "toolgate_agent_pids", "gauge",
                   "Tasks in the agent's running instances together; 0 when none runs.", v_pids,
                   0);
}

static void prom_limits(prom_t *w, const tg_registry_t *r)
{
    char name[TG_LIMIT_NAME_MAX];
    static const struct {
        const char *metric, *help;
    } fam[] = {
        {"toolgate_limit_current", "Current usage of each registered limit, in its unit."},
        {"toolgate_limit_high_water", "Highest usage of each registered limit seen."},
        {"toolgate_limit_capacity", "Capacity of each registered limit (0: not applicable)."},
        {"toolgate_limit_fill_ratio", "Usage over capacity of each limit with a capacity."},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        family(w, fam[f].metric, "gauge", fam[f].help);
        for (size_t i = 0; i < r->n; i++) {
            const tg_limit_t *l = &r->v[i];
            if (f == 3 && l->capacity == 0)
                continue;
            limit_name(name, r, i);
            sample_t s = sample(w, fam[f].metric);
            label(&s, "limit", name);
            if (f == 0)
                end_u64(&s, l->current);
            else if (f == 1)
                end_u64(&s, l->high_water);
            else if (f == 2)
                end_u64(&s, l->capacity);
            else
                end_double(&s, (double)l->current / (double)l->capacity);
        }
    }
}

static void prom_instance(prom_t *w, const tg_metrics_t *m)
{
    family(w, "toolgate_build_info", "gauge", "Always 1; labels say which toolgate this is.");
    sample_t s = sample(w, "toolgate_build_info");
    label(&s, "version", TG_VERSION);
    label(&s, "instance", m->instance);
    end_u64(&s, 1);
    family(w, "toolgate_start_time_seconds", "gauge",
           "When this toolgate started, seconds since the epoch.");
    s = sample(w, "toolgate_start_time_seconds");
    end_fixed(&s, m->start_ms > 0 ? (uint64_t)m->start_ms : 0, 3);
    family(w, "toolgate_store_degraded", "gauge",
           "1 while the rate store cannot decide and on_store_error applies.");
    s = sample(w, "toolgate_store_degraded");
    label(&s, "store", store_name(m->store_kind));
    end_u64(&s, m->store_degraded);
    family(w, "toolgate_audit_queue_depth", "gauge", "Audit events waiting for the sinks.");
    s = sample(w, "toolgate_audit_queue_depth");
    end_u64(&s, m->audit_queue_depth);
    family(w, "toolgate_audit_queue_capacity", "gauge", "Capacity of the audit queue, events.");
    s = sample(w, "toolgate_audit_queue_capacity");
    end_u64(&s, m->audit_queue_capacity);
    family(w, "toolgate_audit_dropped_total", "counter",
           "Audit events lost to a full queue (each loss is also reported as audit.dropped).");
    s = sample(w, "toolgate_audit_dropped_total");
    end_u64(&s, m->audit_dropped);
}

/* The HTTP listeners' families: one sample per listener each, labelled
 * listener (its index in router.listen) and address (from config). */
static void http_labels(sample_t *s, const tg_metrics_http_t *h)
{
    char idx[24];
    snprintf(idx, sizeof(idx), "%" PRIu32, h->listener);
    label(s, "listener", idx);
    label(s, "address", h->addr);
}

static void prom_http(prom_t *w, const tg_metrics_t *m)
{
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } fam[] = {
#define HF(name, type, field, help) {name, type, help, offsetof(tg_metrics_http_t, field)}
        HF("toolgate_http_requests_total", "counter", requests,
           "HTTP requests read by each MCP Streamable HTTP listener."),
        HF("toolgate_http_connections", "gauge", connections, "HTTP connections open now."),
        HF("toolgate_http_connections_total", "counter", connections_total,
           "HTTP connections accepted and served (refused ones are counted apart)."),
        HF("toolgate_http_connections_refused_total", "counter", connections_refused,
           "HTTP connections answered 429 (max_connections) or 503 (stopping) at once."),
        HF("toolgate_http_connection_buffer_bytes", "gauge", buffer_bytes,
           "Bytes held now by HTTP connections' read buffers and request heads and bodies."),
        HF("toolgate_http_sessions", "gauge", sessions, "MCP sessions open now."),
        HF("toolgate_http_sessions_opened_total", "counter", sessions_opened,
           "MCP sessions opened (initialize)."),
        HF("toolgate_http_sessions_ended_total", "counter", sessions_ended,
           "MCP sessions ended (DELETE, the agent or toolgate ending them, idle)."),
        HF("toolgate_http_sessions_idled_total", "counter", sessions_idled,
           "MCP sessions ended after session_idle_timeout."),
        HF("toolgate_http_responses_dropped_total", "counter", responses_dropped,
           "Answers of the agent no POST waited for any more (its client went away)."),
        HF("toolgate_http_backlog_dropped_total", "counter", backlog_dropped,
           "Notifications dropped from a full session backlog (no stream to carry them)."),
#undef HF
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        family(w, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 0; i < m->nhttp; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&m->http[i] + fam[f].off, sizeof(v));
            sample_t s = sample(w, fam[f].name);
            http_labels(&s, &m->http[i]);
            end_u64(&s, v);
        }
    }
    family(w, "toolgate_http_responses_total", "counter",
           "HTTP responses by status class (a call's denial is a 2xx: its JSON-RPC error).");
    for (size_t i = 0; i < m->nhttp; i++) {
        for (int c = 1; c <= 5; c++) {
            char cls[4] = {(char)('0' + c), 'x', 'x', '\0'};
            sample_t s = sample(w, "toolgate_http_responses_total");
            http_labels(&s, &m->http[i]);
            label(&s, "class", cls);
            end_u64(&s, m->http[i].status[c]);
        }
    }
}

long tg_metrics_prom(char *buf, size_t cap, const tg_registry_t *r, const tg_metrics_t *m)
{
    prom_t p = {.name = NULL};
    tg_jw_init(&p.w, buf, cap);
    if (m != NULL) {
        prom_instance(&p, m);
        prom_calls(&p, m);
        prom_agents(&p, m);
        prom_http(&p, m);
    }
    if (r != NULL)
        prom_limits(&p, r);
    return tg_jw_end(&p.w);
}

/* ---- JSON ------------------------------------------------------------- */

static void jkey(tg_jw_t *w, bool *first, const char *key)
{
    if (!*first)
        tg_jw_raw(w, ",", 1);
    *first = false;
    tg_jw_str(w, key);
    tg_jw_raw(w, ":", 1);
}

static void ju64(tg_jw_t *w, bool *first, const char *key, uint64_t v)
{
    jkey(w, first, key);
    tg_jw_u64(w, v);
}

static void jstr(tg_jw_t *w, bool *first, const char *key, const char *v)
{
    jkey(w, first, key);
    if (v != NULL)
        tg_jw_str(w, v);
    else
        tg_jw_lit(w, "null");
}

static void jts(tg_jw_t *w, int64_t ms)
{
    if (ms >= 0 && ms <= METRICS_TS_MAX_MS)
        tg_jw_ts(w, ms);
    else
        tg_jw_lit(w, "null");
}

long tg_metrics_limits_json(char *buf, size_t cap, const tg_registry_t *r, const tg_metrics_t *m)
{
    tg_jw_t w;
    char name[TG_LIMIT_NAME_MAX];
    bool first = true;
    tg_jw_init(&w, buf, cap);
    tg_jw_raw(&w, "{", 1);
    jstr(&w, &first, "instance", m != NULL ? m->instance : NULL);
    jkey(&w, &first, "limits");
    tg_jw_raw(&w, "[", 1);
    for (size_t i = 0; r != NULL && i < r->n; i++) {
        const tg_limit_t *l = &r->v[i];
        bool f = true;
        limit_name(name, r, i);
        tg_jw_lit(&w, i ? ",{" : "{");
        jstr(&w, &f, "name", name);
        jstr(&w, &f, "category", tg_limit_cat_name(l->cat));
        jstr(&w, &f, "scope", limit_scope(l));
        ju64(&w, &f, "current", l->current);
        ju64(&w, &f, "high_water", l->high_water);
        ju64(&w, &f, "capacity", l->capacity);
        jkey(&w, &f, "fill_pct");
        if (l->capacity > 0)
            put_double(&w, (double)l->current * 100.0 / (double)l->capacity, true);
        else
            tg_jw_lit(&w, "null");
        tg_jw_raw(&w, "}", 1);
    }
    tg_jw_lit(&w, "]}\n");
    return tg_jw_end(&w);
}

static void json_calls(tg_jw_t *w, const tg_metrics_agent_t *a, size_t row_from, size_t row_to)
{
    bool f = true;
    tg_jw_raw(w, "{", 1);
    for (int o = 0; o < TG_OUTCOME__COUNT; o++) {
        uint64_t sum = 0;
        for (size_t row = row_from; row < row_to; row++)
            sum += a->calls[row * TG_OUTCOME__COUNT + (size_t)o];
        ju64(w, &f, tg_outcome_name((tg_outcome_t)o), sum);
    }
    tg_jw_raw(w, "}", 1);
}

static void json_agent(tg_jw_t *w, const tg_metrics_agent_t *a)
{
    bool f = true;
    tg_jw_raw(w, "{", 1);
    jstr(w, &f, "name", a->name);
    jstr(w, &f, "state", tg_agent_state_name(a->state));
    jkey(w, &f, "pid");
    if (a->pid > 0)
        tg_jw_i64(w, a->pid);
    else
        tg_jw_lit(w, "null");
    ju64(w, &f, "inflight", a->inflight);
    ju64(w, &f, "queued", a->queued);
    ju64(w, &f, "restarts", a->restarts);
    ju64(w, &f, "hidden_names", a->hidden_names);
    jkey(w, &f, "calls");
    json_calls(w, a, 0, a->ntools + 1);
    jkey(w, &f, "duration");
    tg_jw_raw(w, "{", 1);
    bool g = true;
    ju64(w, &g, "count", a->dur_count);
    ju64(w, &g, "sum_ms", a->dur_sum_ms);
    tg_jw_raw(w, "}", 1);
    jkey(w, &f, "tools");
    tg_jw_raw(w, "[", 1);
    for (size_t row = 0; row <= a->ntools; row++) {
        if (row == a->ntools && a->other != a->ntools)
            continue;
        bool t = true;
        tg_jw_lit(w, row ? ",{" : "{");
        jstr(w, &t, "name", row < a->ntools ? a->tools[row] : TG_METRICS_OTHER_TOOL);
        jkey(w, &t, "calls");
        json_calls(w, a, row, row + 1);
        tg_jw_raw(w, "}", 1);
    }
    tg_jw_raw(w, "]", 1);
    jkey(w, &f, "usage");
    if (a->have_usage) {
        bool u = true;
        tg_jw_raw(w, "{", 1);
        ju64(w, &u, "memory_bytes", a->memory_bytes);
        ju64(w, &u, "memory_peak_bytes", a->memory_peak_bytes);
        jkey(w, &u, "memory_limit_bytes");
        if (a->memory_limit_bytes > 0)
            tg_jw_u64(w, a->memory_limit_bytes);
        else
            tg_jw_lit(w, "null");
        jkey(w, &u, "cpu_seconds");
        put_fixed(w, a->cpu_usec, 6);
        ju64(w, &u, "pids", a->pids);
        tg_jw_raw(w, "}", 1);
    } else {
        tg_jw_lit(w, "null");
    }
    tg_jw_raw(w, "}", 1);
}

long tg_metrics_agents_json(char *buf, size_t cap, const tg_metrics_t *m, int64_t now_ms)
{
    tg_jw_t w;
    bool first = true;
    tg_jw_init(&w, buf, cap);
    tg_jw_raw(&w, "{", 1);
    if (m == NULL) {
        tg_jw_lit(&w, "\"agents\":[],\"denials\":[]}\n");
        return tg_jw_end(&w);
    }
    jstr(&w, &first, "instance", m->instance);
    ju64(&w, &first, "uptime_ms", now_ms > m->start_ms ? (uint64_t)(now_ms - m->start_ms) : 0);
    jkey(&w, &first, "agents");
    tg_jw_raw(&w, "[", 1);
    for (size_t i = 0; i < m->nagents; i++) {
        if (i)
            tg_jw_raw(&w, ",", 1);
        json_agent(&w, &m->agents[i]);
    }
    tg_jw_raw(&w, "]", 1);
    jkey(&w, &first, "denials");
    tg_jw_raw(&w, "[", 1);
    uint64_t kept = m->ndenials < TG_METRICS_DENIALS ? m->ndenials : TG_METRICS_DENIALS;
    for (uint64_t k = 0; k < kept; k++) {
        const tg_metrics_denial_t *d = &m->ring[(m->ndenials - 1 - k) % TG_METRICS_DENIALS];
        bool f = true;
        tg_jw_lit(&w, k ? ",{" : "{");
        jkey(&w, &f, "ts");
        jts(&w, d->ts_ms);
        jstr(&w, &f, "code", tg_deny_name(d->code));
        jstr(&w, &f, "agent", d->agent >= 0 ? m->agents[d->agent].name : NULL);
        jstr(&w, &f, "tool", d->tool[0] ? d->tool : NULL);
        tg_jw_raw(&w, "}", 1);
    }
    tg_jw_raw(&w, "]", 1);
    jkey(&w, &first, "denials_total");
    tg_jw_raw(&w, "{", 1);
    bool f = true;
    for (int c = 0; c < TG_DENY__COUNT; c++)
        ju64(&w, &f, tg_deny_name((tg_deny_code_t)c), m->denials[c]);
    tg_jw_raw(&w, "}", 1);
    jkey(&w, &first, "store");
    tg_jw_raw(&w, "{", 1);
    f = true;
    jstr(&w, &f, "kind", store_name(m->store_kind));
    jkey(&w, &f, "degraded");
    tg_jw_lit(&w, m->store_degraded ? "true" : "false");
    tg_jw_raw(&w, "}", 1);
    jkey(&w, &first, "audit");
    tg_jw_raw(&w, "{", 1);
    f = true;
    ju64(&w, &f, "queue_depth", m->audit_queue_depth);
    ju64(&w, &f, "queue_capacity", m->audit_queue_capacity);
    ju64(&w, &f, "dropped", m->audit_dropped);
    tg_jw_lit(&w, "}}\n");
    return tg_jw_end(&w);
}
