/* sd_notify without libsystemd: see notify.h. */
#include "router/front/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "router/gateway/log.h"

static struct sockaddr_un notify_sa;
static socklen_t notify_len; /* 0: no notify socket */
static bool notify_warned;

bool tg_notify_init(void)
{
    const char *e = getenv("NOTIFY_SOCKET");
    notify_len = 0;
    notify_warned = false;
    if (e == NULL)
        return false;
    size_t n = strlen(e);
    bool ok = n >= 2 && n < sizeof(notify_sa.sun_path) && (e[0] == '/' || e[0] == '@');
    if (ok) {
        memset(&notify_sa, 0, sizeof(notify_sa));
        notify_sa.sun_family = AF_UNIX;
        memcpy(notify_sa.sun_path, e, n);
        if (e[0] == '@')
            notify_sa.sun_path[0] = '\0'; /* abstract: the name is exactly n bytes */
        notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (e[0] == '/'));
    } else {
        tg_log("NOTIFY_SOCKET: expected an absolute path or an '@' abstract name of at most "
               "%zu bytes; readiness is not reported",
               sizeof(notify_sa.sun_path) - 1);
    }
    unsetenv("NOTIFY_SOCKET");
    return ok;
}

int tg_notify(const char *state)
{
    if (notify_len == 0)
        return 1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&notify_sa,
                          notify_len) < 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc < 0 && !notify_warned) {
        notify_warned = true;
        tg_log("NOTIFY_SOCKET: cannot tell the service manager '%.*s': %s",
               (int)strcspn(state, "\n"), state, strerror(-rc));
    }
    return rc;
}

int tg_notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[64];
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
             (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
    return tg_notify(msg);
}
