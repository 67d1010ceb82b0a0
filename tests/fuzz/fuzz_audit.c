/* libFuzzer target: the audit encoder on arbitrary strings.
 *
 * The input is split at NUL bytes into a config name (agent), two checked
 * caller strings (tool, call_id) and an exit reason. Whatever they hold,
 * a line that fits must be one JSON object that jansson parses, end in its
 * only '\n', carry each checked field either as given (when it passes
 * tg_audit_safe_str) or as "invalid", and carry the agent name unchanged
 * when it was valid UTF-8 with no NUL. A line that does not fit must leave
 * no newline behind.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *line, long n)
{
    fprintf(stderr, "fuzz_audit: %s: %.*s\n", what, (int)(n > 0 ? n : 0), line);
    abort();
}

static void check_checked(json_t *obj, const char *key, const char *in, const char *line, long n)
{
    const char *got = json_string_value(json_object_get(obj, key));
    bool safe = tg_audit_safe_str(in, strlen(in));

    if (got == NULL || strcmp(got, safe ? in : "invalid") != 0)
        die(key, line, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char line[TG_AUDIT_LINE_MAX];
    char *copy = malloc(size + 4);
    const char *part[4];

    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    memset(copy + size, 0, 4); /* every part ends in a NUL, missing parts are "" */
    size_t i = 0;
    for (size_t k = 0; k < 4; k++) {
        part[k] = copy + i;
        i += strlen(copy + i);
        if (i < size)
            i++; /* past the NUL that ended this part */
    }

    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "call.completed";
    ev.agent = part[0];
    ev.tool = part[1];
    ev.call_id = part[2];
    ev.exit.reason = part[3];
    ev.exit.code = (int64_t)size - 2;

    memset(line, 0, sizeof(line)); /* no newline left from the last input */
    long n = tg_audit_encode(line, sizeof(line), &ev, size, (int64_t)size * 7919, "fuzz");
    if (n == -ENOSPC) {
        if (memchr(line, '\n', sizeof(line)) != NULL)
            die("newline left by -ENOSPC", line, 0);
        free(copy);
        return 0;
    }
    if (n <= 0 || line[n - 1] != '\n' || memchr(line, '\n', (size_t)n - 1) != NULL)
        die("not one line", line, n);

    json_error_t je;
    json_t *obj = json_loadb(line, (size_t)n - 1, 0, &je);
    if (obj == NULL || !json_is_object(obj))
        die("does not parse", line, n);
    check_checked(obj, "tool", part[1], line, n);
    check_checked(obj, "call_id", part[2], line, n);

    /* jansson rejects ill-formed UTF-8, so when it accepts the name the
     * encoder must have passed it through unchanged. */
    json_t *ref = json_string(part[0]);
    if (ref != NULL) {
        const char *got = json_string_value(json_object_get(obj, "agent"));
        if (got == NULL || strcmp(got, part[0]) != 0)
            die("agent changed", line, n);
        json_decref(ref);
    }
    json_decref(obj);
    free(copy);
    return 0;
}
