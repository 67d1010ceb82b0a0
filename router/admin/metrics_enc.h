/* The encoders of the router's metrics (gateway/metrics.h) for the admin
 * endpoint: pure, into a caller-supplied buffer. */
#ifndef TG_ROUTER_ADMIN_METRICS_ENC_H
#define TG_ROUTER_ADMIN_METRICS_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "limits/registry.h"
#include "router/gateway/metrics.h"

/* Encoders. <r> and <m> may each be NULL (their sections are then empty). */

/* Prometheus text exposition format 0.0.4: every family with # HELP and
 * # TYPE before its samples (a family with no sample is left out), label
 * values escaped (\\, \", \n; invalid UTF-8 as U+FFFD). */
long tg_metrics_prom(char *buf, size_t cap, const tg_registry_t *r, const tg_metrics_t *m);

/* /limits: {"instance":..,"limits":[{"name","category","scope","current",
 * "high_water","capacity","fill_pct"}...]} in registry order; fill_pct is
 * current * 100 / capacity with one decimal, null when capacity is 0. */
long tg_metrics_limits_json(char *buf, size_t cap, const tg_registry_t *r, const tg_metrics_t *m);

/* /agents: {"instance":..,"uptime_ms":..,"agents":[...],"denials":[newest first],
 * "denials_total":{code:n},"store":{..},"audit":{..}}. <now_ms> is wall
 * clock (denial ts are written as RFC 3339). */
long tg_metrics_agents_json(char *buf, size_t cap, const tg_metrics_t *m, int64_t now_ms);

/* Write <n> bytes of <s> as the inside of a Prometheus label value into
 * <buf>: returns the length, or -ENOSPC. Exposed for tests. */
long tg_prom_escape(char *buf, size_t cap, const char *s, size_t n);

#endif
