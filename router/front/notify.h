/* The service manager's readiness protocol (sd_notify(3)) without
 * libsystemd: `toolgate serve` under a Type=notify unit tells systemd
 * READY=1 once its listeners accept, RELOADING=1 (with MONOTONIC_USEC, as
 * systemd 253+ wants for Type=notify-reload) while a SIGHUP reload runs
 * and READY=1 after it, STOPPING=1 when it starts to drain.
 *
 * $NOTIFY_SOCKET names a datagram socket: an absolute path, or an
 * abstract-namespace name written with a leading '@'. It is read once by
 * tg_notify_init and removed from the environment, so no agent toolgate
 * starts can write to the service manager in toolgate's name. Without it
 * every call is a no-op; a send that fails is logged once and otherwise
 * ignored (readiness is advisory: the service keeps serving). */
#ifndef TG_ROUTER_FRONT_NOTIFY_H
#define TG_ROUTER_FRONT_NOTIFY_H

#include <stdbool.h>

/* Read and unset $NOTIFY_SOCKET. False (and a log line) when it is set
 * but not a usable name; false and silent when it is unset. */
bool tg_notify_init(void);

/* Send <state> ("READY=1", "STOPPING=1", lines joined by '\n'). 0 sent,
 * 1 no notify socket, or a negative errno. */
int tg_notify(const char *state);

/* "RELOADING=1" with "MONOTONIC_USEC=" the CLOCK_MONOTONIC now. */
int tg_notify_reloading(void);

#endif
