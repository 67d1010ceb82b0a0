/* Listening addresses: "HOST:PORT" text (an IPv4 literal, an IPv6 literal
 * in brackets, or localhost; host names are not resolved) to a socket
 * address, and whether an address is loopback. Pure. Used by the admin
 * endpoint (loopback only) and by HTTP listeners (TLS is required off
 * loopback). */
#ifndef TG_CONFIG_ADDR_H
#define TG_CONFIG_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config/err.h"

#define TG_ADDR_MAX 64 /* fixed internal bound: "HOST:PORT" text, NUL included */

/* Parse <addr> into <ss> ("127.0.0.1:8080", "[::1]:8080", "localhost:8080",
 * "0.0.0.0:8443"; port 0 picks a free one). <what> names the address in
 * messages ("admin address"). 0, or -EINVAL with <err>. */
int tg_addr_parse(const char *addr, const char *what, struct sockaddr_storage *ss, tg_err_t *err);

/* Parse an admin endpoint address <addr> as tg_addr_parse does, and
 * refuse one off loopback (127.0.0.0/8, ::1): the endpoint has no
 * authentication. The one judgement of the config (router.admin.listen),
 * --admin and the endpoint itself. 0, or -EINVAL with <err> (<ss>
 * zeroed). */
int tg_addr_parse_admin(const char *addr, struct sockaddr_storage *ss, tg_err_t *err);

/* <s> ("0".."65535", digits only) as a port: 0 or -1. */
int tg_addr_parse_port(const char *s, uint16_t *port);

/* 127.0.0.0/8, ::1, or an IPv4-mapped 127/8. */
bool tg_addr_loopback(const struct sockaddr_storage *ss);
bool tg_addr_ip4_loopback(const struct in_addr *a);
bool tg_addr_ip6_loopback(const struct in6_addr *a);

/* A Host header value naming this machine by a loopback name: localhost,
 * an IPv4 127/8 literal or an IPv6 loopback literal, with an optional
 * port. Anything else means the request was made through another name,
 * the mark of a DNS-rebinding page in a local browser. */
#define TG_ADDR_HOST_MAX 256 /* fixed internal bound: a Host value looked at */
bool tg_addr_host_loopback(const char *h, size_t n);

#endif
