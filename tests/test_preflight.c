/* Pre-flight memory check: peaks state file and P95 (limits/preflight.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "limits/preflight.h"

Test(preflight, p95_nearest_rank)
{
    uint64_t v[20] = {0};
    cr_expect_eq(tg_peaks_p95(v, 0), 0);
    for (int i = 0; i < 20; i++)
        v[i] = (uint64_t)(20 - i) * 100; /* 2000, 1900, ..., 100 */
    cr_expect_eq(tg_peaks_p95(v, 20), 1900); /* rank 19 of 20 */
    cr_expect_eq(tg_peaks_p95(v, 1), 2000);
    uint64_t w[3] = {5, 1, 3};
    cr_expect_eq(tg_peaks_p95(w, 3), 5);
}

Test(preflight, record_keeps_last_twenty_atomically)
{
    char dir[] = "/tmp/tg-preflight-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/sub/peaks.json", dir);
    uint64_t got[TG_PEAKS_KEEP];
    size_t n = 99;
    cr_assert_eq(tg_peaks_load(path, "a", got, &n), 0, "a missing file is no peaks");
    cr_assert_eq(n, 0);
    for (uint64_t i = 1; i <= 25; i++)
        cr_assert_eq(tg_peaks_record(path, "a", i * 1000), 0);
    cr_assert_eq(tg_peaks_record(path, "b", 7), 0);
    cr_assert_eq(tg_peaks_load(path, "a", got, &n), 0);
    cr_assert_eq(n, 20);
    cr_expect_eq(got[0], 6000, "the oldest five were dropped");
    cr_expect_eq(got[19], 25000);
    cr_assert_eq(tg_peaks_load(path, "b", got, &n), 0);
    cr_assert_eq(n, 1);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    cr_expect(access(tmp, F_OK) != 0, "the temporary file was left behind");
    FILE *f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    cr_expect_eq(tg_peaks_load(path, "a", got, &n), -EINVAL);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(preflight, mem_available_parses_meminfo)
{
    char path[] = "/tmp/tg-meminfo-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
                       "MemAvailable:    2048 kB\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    uint64_t b = 0;
    cr_assert_eq(tg_mem_available(path, &b), 0);
    cr_expect_eq(b, 2048u * 1024);
    unlink(path);
    cr_assert_eq(tg_mem_available(NULL, &b), 0);
    cr_expect_gt(b, 0);
}
