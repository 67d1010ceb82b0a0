/* Unit parsing: the units of DESIGN.md, parsed exactly into bytes,
 * milliseconds, millicores, calls per period and bits per second.
 *
 * Contract for every parser: <s> is a NUL-terminated string; on success the
 * value is stored in <*out> and 0 is returned; on failure <*out> is left
 * untouched, -EINVAL (malformed) or -ERANGE (overflow, zero where zero is
 * meaningless) is returned and, when <why> is not NULL, *why points to a
 * static string saying what was expected, e.g.
 * "expected a size such as 512Ki, 4Mi or 1Gi".
 * No locale, no floating point, no leading/trailing spaces accepted.
 */
#ifndef TG_CONFIG_UNITS_H
#define TG_CONFIG_UNITS_H

#include <stdint.h>

typedef struct tg_rate {
    uint64_t count;     /* calls allowed per period; 0 = unset */
    uint64_t period_ms; /* 1000, 60000, 3600000 */
} tg_rate_t;

/* Sizes: "4194304" (bytes), "512Ki", "4Mi", "1Gi", "2Ti"; also "512KiB"
 * forms are refused (one spelling, as in manifests). Zero refused. */
int tg_unit_bytes(const char *s, uint64_t *out, const char **why);

/* Durations: "250ms", "30s", "5m", "1h"; a bare integer is refused (the
 * unit must be named). Zero refused. */
int tg_unit_duration_ms(const char *s, uint64_t *out, const char **why);

/* CPU: "500m" millicores, or whole cores "1", "2" (= 1000m, 2000m);
 * decimal cores "0.5" = 500m (at most 3 decimals). Zero refused. */
int tg_unit_millicores(const char *s, uint64_t *out, const char **why);

/* Rates: "N/second|minute|hour", also "N/s", "N/m", "N/h", "N/sec",
 * "N/min". N >= 1. */
int tg_unit_rate(const char *s, tg_rate_t *out, const char **why);

/* Bandwidth: "Kbps", "Mbps", "Gbps" (decimal: 1Kbps = 1000 bit/s). */
int tg_unit_bandwidth_bps(const char *s, uint64_t *out, const char **why);

/* Plain count: a decimal integer in [1, max]. */
int tg_unit_count(const char *s, uint64_t max, uint64_t *out, const char **why);

/* Formatting for messages ("4Mi", "1m", "10/minute"); always NUL-terminates. */
void tg_unit_fmt_bytes(char *buf, int cap, uint64_t bytes);
void tg_unit_fmt_duration(char *buf, int cap, uint64_t ms);
void tg_unit_fmt_rate(char *buf, int cap, tg_rate_t r);
/* "10Mbps": the largest decimal unit that divides <bps> exactly, else
 * "<bps> bit/s". */
void tg_unit_fmt_bandwidth(char *buf, int cap, uint64_t bps);

#endif
