/* store_bench: shared-limit admission speed, a benchmark (not a test).
 *
 *   store_bench MODE URL CALLS DEPTH
 *   store_bench script        (prints the GCRA Lua script)
 *
 * MODE is exact (every admission one EVALSHA on the Redis at URL), lease
 * (tokens leased from that Redis in batches, spent locally) or local (the
 * in-process store, the reference). DEPTH admissions are kept in flight
 * (exact mode pipelines them on one connection). Prints admissions/s and
 * the p50/p99 admission latency. tests/bench/store_run.sh runs it against
 * a throwaway redis-server next to redis-benchmark's own EVALSHA ceiling.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "limits/store.h"

static tg_store_t *st;
static uint64_t done_n, target, started, refused;
static uint64_t *lat, *t0;

static void on_taken(void *arg, const tg_store_result_t *r)
{
    uint64_t i = (uintptr_t)arg;
    lat[done_n++] = uv_hrtime() - t0[i % 65536];
    refused += !r->gcra.allowed || r->decided_by != TG_STORE_BY_STORE;
}

static void issue(void)
{
    uint64_t i = started++;
    t0[i % 65536] = uv_hrtime();
    /* A limit far above the rate measured: every admission is allowed. */
    if (tg_store_take(st, "tg:{bench}:rate", 1000000, 1000, 0, on_taken, (void *)(uintptr_t)i) < 0) {
        fprintf(stderr, "store_bench: take refused its arguments\n");
        exit(2);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "script") == 0) {
        /* The GCRA script exact mode runs, for redis-benchmark. */
        fputs(tg_store_redis_script(), stdout);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: store_bench exact|lease|local URL CALLS DEPTH | store_bench script\n");
        return 64;
    }
    const char *mode = argv[1];
    target = strtoull(argv[3], NULL, 10);
    int depth = atoi(argv[4]);
    if (target == 0 || depth < 1) {
        fprintf(stderr, "store_bench: CALLS and DEPTH must be at least 1\n");
        return 64;
    }
    lat = calloc(target, sizeof(*lat));
    t0 = calloc(65536, sizeof(*t0));
    tg_err_t err;
    tg_store_t *redis = NULL;
    tg_store_opts_t o = {.kind = TG_STORE_REDIS, .url = argv[2], .timeout_ms = 1000};
    int rc;
    if (strcmp(mode, "local") == 0) {
        o.kind = TG_STORE_LOCAL;
        rc = tg_store_open(NULL, &o, &st, &err);
    } else {
        rc = tg_store_open(uv_default_loop(), &o, &redis, &err);
        st = redis;
        if (rc == 0 && strcmp(mode, "lease") == 0)
            rc = tg_store_lease_open(redis, &o, &st, &err);
    }
    if (rc < 0 || lat == NULL || t0 == NULL) {
        fprintf(stderr, "store_bench: %s\n", rc < 0 ? err.msg : "out of memory");
        return 2;
    }
    /* Connect and load the script before the clock starts. */
    for (int k = 0; k < 200; k++)
        uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    uint64_t a = uv_hrtime();
    while (done_n < target) {
        while (started < target && started - done_n < (uint64_t)depth)
            issue();
        uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    }
    uint64_t b = uv_hrtime();
    qsort(lat, target, sizeof(*lat), cmp_u64);
    printf("%-5s depth %3d: %9.0f admissions/s  p50 %8.2f us  p99 %8.2f us%s\n", mode, depth,
           (double)target / ((double)(b - a) / 1e9), (double)lat[target / 2] / 1e3,
           (double)lat[target * 99 / 100] / 1e3, refused ? "  (some refused or not by the store!)" : "");
    return refused ? 1 : 0;
}
