/* Router metrics: the counters every room records into (see metrics.h);
 * their encoders are the admin endpoint's (admin/metrics_enc.c). */
#include "router/gateway/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/jsonw.h"

const uint32_t tg_metrics_bucket_ms[TG_METRICS_BUCKETS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
};

/* RFC 3339 can only write years 0000..9999 (tg_jw_ts). */
#define METRICS_TS_MAX_MS 253402300799999LL

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool name_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '@' || c == '/' || c == '-';
}

bool tg_metrics_name_ok(const char *s)
{
    if (s == NULL)
        return false;
    size_t n = strnlen(s, TG_METRICS_NAME_MAX + 1);
    if (n == 0 || n > TG_METRICS_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok((unsigned char)s[i]))
            return false;
    return true;
}

/* <dst> (TG_LIMIT_NAME_MAX bytes) = <src> when it may be shown, else
 * "invalid.<idx>": unique per position, so two bad names never collapse
 * into one Prometheus series. */
void tg_metrics_shown_name(char *dst, const char *src, size_t idx)
{
    if (tg_metrics_name_ok(src)) {
        size_t n = strlen(src);
        memcpy(dst, src, n + 1);
    } else {
        snprintf(dst, TG_LIMIT_NAME_MAX, "invalid.%zu", idx);
    }
}

/* A row per HTTP listener of <cfg>. 0 or -ENOMEM. */
static int http_rows(tg_metrics_t *m, const tg_config_t *cfg)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->nlisten; i++)
        n += cfg->listen[i].http_addr != NULL;
    if (n == 0)
        return 0;
    m->http = calloc(n, sizeof(*m->http));
    if (m->http == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nlisten; i++) {
        if (cfg->listen[i].http_addr == NULL)
            continue;
        tg_metrics_http_t *h = &m->http[m->nhttp++];
        h->listener = (uint32_t)i;
        snprintf(h->addr, sizeof(h->addr), "%s", cfg->listen[i].http_addr);
    }
    return 0;
}

tg_metrics_http_t *tg_metrics_http_row(tg_metrics_t *m, size_t listener)
{
    for (size_t i = 0; i < m->nhttp; i++)
        if (m->http[i].listener == listener)
            return &m->http[i];
    return NULL;
}

int tg_metrics_init(tg_metrics_t *m, const tg_config_t *cfg)
{
    memset(m, 0, sizeof(*m));
    m->start_ms = wall_ms();
    m->store_kind = TG_STORE_LOCAL;
    if (tg_metrics_name_ok(cfg->instance))
        tg_metrics_shown_name(m->instance, cfg->instance, 0);
    else
        memcpy(m->instance, "invalid", sizeof("invalid"));
    if (http_rows(m, cfg) < 0)
        return -ENOMEM;
    if (cfg->nagents == 0)
        return 0;
    m->agents = calloc(cfg->nagents, sizeof(*m->agents));
    if (m->agents == NULL)
        return -ENOMEM;
    m->nagents = cfg->nagents;
    for (size_t i = 0; i < cfg->nagents; i++) {
        const tg_agent_cfg_t *ac = &cfg->agents[i];
        tg_metrics_agent_t *a = &m->agents[i];
        tg_metrics_shown_name(a->name, ac->id, i);
        a->ntools = ac->ntools;
        a->other = ac->ntools;
        if (ac->ntools > 0) {
            a->tools = calloc(ac->ntools, sizeof(*a->tools));
            if (a->tools == NULL)
                goto nomem;
        }
        for (size_t t = 0; t < ac->ntools; t++) {
            tg_metrics_shown_name(a->tools[t], ac->tools[t].name, t);
            /* A configured tool named like the overflow row takes its
             * calls: two series with the same labels would be invalid. */
            if (strcmp(a->tools[t], TG_METRICS_OTHER_TOOL) == 0)
                a->other = t;
        }
        a->calls = calloc((ac->ntools + 1) * TG_OUTCOME__COUNT, sizeof(*a->calls));
        if (a->calls == NULL)
            goto nomem;
    }
    return 0;
nomem:
    tg_metrics_free(m);
    return -ENOMEM;
}

void tg_metrics_free(tg_metrics_t *m)
{
    for (size_t i = 0; i < m->nagents; i++) {
        free(m->agents[i].tools);
        free(m->agents[i].calls);
    }
    free(m->agents);
    m->agents = NULL;
    m->nagents = 0;
    free(m->http);
    m->http = NULL;
    m->nhttp = 0;
}

static tg_metrics_agent_t *agent_at(tg_metrics_t *m, size_t agent)
{
    return agent < m->nagents ? &m->agents[agent] : NULL;
}

void tg_metrics_call(tg_metrics_t *m, size_t agent, int tool, tg_outcome_t outcome,
                     uint64_t duration_ms)
{
    tg_metrics_agent_t *a = agent_at(m, agent);
    if (a == NULL || (unsigned)outcome >= TG_OUTCOME__COUNT)
        return;
    size_t row = tool >= 0 && (size_t)tool < a->ntools ? (size_t)tool : a->other;
    a->calls[row * TG_OUTCOME__COUNT + outcome]++;
    if (outcome == TG_OUTCOME_DENIED)
        return;
    size_t b = 0;
    while (b < TG_METRICS_BUCKETS && duration_ms > tg_metrics_bucket_ms[b])
        b++;
    a->dur_bucket[b]++;
    a->dur_sum_ms += duration_ms;
    a->dur_count++;
}

void tg_metrics_denial(tg_metrics_t *m, tg_deny_code_t code, int agent, const char *tool,
                       size_t tool_len, int64_t ts_ms)
{
    if ((unsigned)code >= TG_DENY__COUNT)
        return;
    m->denials[code]++;
    tg_metrics_denial_t *d = &m->ring[m->ndenials % TG_METRICS_DENIALS];
    m->ndenials++;
    d->ts_ms = ts_ms;
    d->code = code;
    d->agent = agent >= 0 && (size_t)agent < m->nagents ? agent : -1;
    if (tool == NULL) {
        d->tool[0] = '\0';
    } else if (tg_audit_safe_str(tool, tool_len)) {
        memcpy(d->tool, tool, tool_len);
        d->tool[tool_len] = '\0';
    } else {
        memcpy(d->tool, "invalid", sizeof("invalid"));
    }
}

void tg_metrics_load(tg_metrics_t *m, size_t agent, uint32_t inflight, uint32_t queued)
{
    tg_metrics_agent_t *a = agent_at(m, agent);
    if (a == NULL)
        return;
    a->inflight = inflight;
    a->queued = queued;
}

void tg_metrics_agent_state(tg_metrics_t *m, size_t agent, tg_agent_state_t st, int64_t pid)
{
    tg_metrics_agent_t *a = agent_at(m, agent);
    if (a == NULL)
        return;
    a->state = st == TG_AGENT_FAILED ? TG_AGENT_DOWN : st;
    a->pid = pid > 0 ? pid : 0;
}

void tg_metrics_agent_restarted(tg_metrics_t *m, size_t agent)
{
    tg_metrics_agent_t *a = agent_at(m, agent);
    if (a != NULL)
        a->restarts++;
}

void tg_metrics_agent_usage(tg_metrics_t *m, size_t agent, uint64_t memory_bytes,
                            uint64_t memory_peak_bytes, uint64_t memory_limit_bytes,
                            uint64_t cpu_usec, uint64_t pids)
{
    tg_metrics_agent_t *a = agent_at(m, agent);
    if (a == NULL)
        return;
    a->have_usage = true;
    a->memory_bytes = memory_bytes;
    a->memory_peak_bytes = memory_peak_bytes;
    a->memory_limit_bytes = memory_limit_bytes;
    a->cpu_usec = cpu_usec;
    a->pids = pids;
}

void tg_metrics_store(tg_metrics_t *m, tg_store_kind_t kind, bool degraded)
{
    m->store_kind = kind;
    m->store_degraded = degraded;
}

void tg_metrics_audit(tg_metrics_t *m, uint64_t depth, uint64_t capacity, uint64_t dropped)
{
    m->audit_queue_depth = depth;
    m->audit_queue_capacity = capacity;
    m->audit_dropped = dropped;
}

const char *tg_outcome_name(tg_outcome_t o)
{
    switch (o) {
    case TG_OUTCOME_OK:
        return "ok";
    case TG_OUTCOME_ERROR:
        return "error";
    case TG_OUTCOME_DENIED:
        return "denied";
    case TG_OUTCOME_TIMEOUT:
        return "timeout";
    case TG_OUTCOME_CANCELLED:
        return "cancelled";
    case TG_OUTCOME_FAILED:
        return "failed";
    case TG_OUTCOME__COUNT:
        break;
    }
    return "unknown";
}

const char *tg_agent_state_name(tg_agent_state_t s)
{
    switch (s) {
    case TG_AGENT_DOWN:
        return "down";
    case TG_AGENT_STARTING:
        return "starting";
    case TG_AGENT_RUNNING:
        return "running";
    case TG_AGENT_BACKOFF:
        return "backoff";
    case TG_AGENT_UNHEALTHY:
        return "unhealthy";
    case TG_AGENT_FAILED:
        return "down";
    }
    return "unknown";
}

