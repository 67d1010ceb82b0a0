/* Pre-flight memory check (DESIGN.md "Containment"): the peak memory of an
 * agent's last TG_PEAKS_KEEP instances is kept in a small state file, and
 * an instance is not started while MemAvailable < min_free_memory + the P95
 * of those peaks.
 *
 * The state file is JSON {"agents": {"<id>": [bytes, ...]}}, oldest first,
 * written atomically (a temporary file in the same directory, then
 * rename). Runtime convention: 0 or a negative errno.
 */
#ifndef TG_LIMITS_PREFLIGHT_H
#define TG_LIMITS_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#define TG_PEAKS_KEEP 20 /* fixed internal bound: peaks kept per agent */

/* The peaks recorded for <agent> in <path>, oldest first, into <out>
 * (TG_PEAKS_KEEP slots); *n their count. A missing file is no peaks (0);
 * a malformed one -EINVAL. */
int tg_peaks_load(const char *path, const char *agent, uint64_t *out, size_t *n);

/* Append <peak> to <agent>'s peaks in <path> (keeping the last
 * TG_PEAKS_KEEP), creating the file and its directory (0700) as needed. */
int tg_peaks_record(const char *path, const char *agent, uint64_t peak);

/* The 95th percentile (nearest rank) of <v>[0..n); 0 when n is 0. */
uint64_t tg_peaks_p95(const uint64_t *v, size_t n);

/* MemAvailable from <meminfo> (NULL: /proc/meminfo), in bytes. */
int tg_mem_available(const char *meminfo, uint64_t *bytes);

/* The default state file: $XDG_STATE_HOME/toolgate/peaks.json, else
 * $HOME/.local/state/toolgate/peaks.json. 0 or -ENOENT/-ENAMETOOLONG. */
int tg_peaks_default_path(char *buf, size_t cap);

#endif
