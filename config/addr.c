/* Listening addresses. See addr.h. */
#include "config/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

bool tg_addr_ip4_loopback(const struct in_addr *a)
{
    return (ntohl(a->s_addr) >> 24) == 127;
}

bool tg_addr_ip6_loopback(const struct in6_addr *a)
{
    if (IN6_IS_ADDR_LOOPBACK(a))
        return true;
    if (IN6_IS_ADDR_V4MAPPED(a)) {
        struct in_addr v4;
        memcpy(&v4, &a->s6_addr[12], 4);
        return tg_addr_ip4_loopback(&v4);
    }
    return false;
}

bool tg_addr_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return tg_addr_ip4_loopback(&((const struct sockaddr_in *)ss)->sin_addr);
    if (ss->ss_family == AF_INET6)
        return tg_addr_ip6_loopback(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return false;
}

int tg_addr_parse_port(const char *s, uint16_t *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int tg_addr_parse(const char *addr, const char *what, struct sockaddr_storage *ss, tg_err_t *err)
{
    char host[TG_ADDR_MAX];
    const char *port_s;
    uint16_t port;
    size_t n = addr != NULL ? strnlen(addr, TG_ADDR_MAX) : 0;

    memset(ss, 0, sizeof(*ss));
    if (n == 0 || n >= TG_ADDR_MAX)
        return tg_err_set(err, -EINVAL, "%s %s (expected HOST:PORT, e.g. 127.0.0.1:8080)", what,
                          n == 0 ? "is empty" : "is too long");
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (end == NULL || end[1] != ':')
            return tg_err_set(err, -EINVAL, "%s '%s': expected [IPV6]:PORT, e.g. [::1]:8080",
                              what, addr);
        memcpy(host, addr + 1, (size_t)(end - addr - 1));
        host[end - addr - 1] = '\0';
        port_s = end + 2;
    } else {
        const char *colon = strrchr(addr, ':');
        if (colon == NULL || memchr(addr, ':', (size_t)(colon - addr)) != NULL)
            return tg_err_set(err, -EINVAL,
                              "%s '%s': expected HOST:PORT (an IPv6 address goes in brackets: "
                              "[::1]:8080)",
                              what, addr);
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        port_s = colon + 1;
    }
    if (tg_addr_parse_port(port_s, &port) < 0)
        return tg_err_set(err, -EINVAL, "%s '%s': port '%s' is not 0 to 65535", what, addr,
                          port_s);
    if (strcasecmp(host, "localhost") == 0)
        memcpy(host, "127.0.0.1", sizeof("127.0.0.1"));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (addr[0] != '[' && inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
    } else if (addr[0] == '[' && inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
    } else {
        return tg_err_set(err, -EINVAL,
                          "%s '%s': '%s' is not an IP address or localhost (host names are "
                          "not resolved)",
                          what, addr, host);
    }
    return 0;
}

/* A Host header naming this machine by a loopback name: localhost, an
 * IPv4 127/8 literal or an IPv6 loopback literal, with an optional port.
 * Anything else means the request was made through some other name, the
 * mark of a DNS-rebinding page in a local browser. */
bool tg_addr_host_loopback(const char *h, size_t n)
{
    char buf[TG_ADDR_HOST_MAX];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, h, n);
    buf[n] = '\0';
    char *port = NULL;
    if (buf[0] == '[') {
        char *end = strchr(buf, ']');
        if (end == NULL || (end[1] != '\0' && end[1] != ':'))
            return false;
        if (end[1] == ':')
            port = end + 2;
        *end = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, buf + 1, &a6) != 1 || !tg_addr_ip6_loopback(&a6))
            return false;
    } else {
        char *colon = strchr(buf, ':');
        if (colon != NULL) {
            *colon = '\0';
            port = colon + 1;
        }
        struct in_addr a4;
        if (strcasecmp(buf, "localhost") != 0 &&
            (inet_pton(AF_INET, buf, &a4) != 1 || !tg_addr_ip4_loopback(&a4)))
            return false;
    }
    uint16_t p;
    return port == NULL || tg_addr_parse_port(port, &p) == 0;
}

int tg_addr_parse_admin(const char *addr, struct sockaddr_storage *ss, tg_err_t *err)
{
    int rc = tg_addr_parse(addr, "admin address", ss, err);
    if (rc < 0)
        return rc;
    if (!tg_addr_loopback(ss)) {
        memset(ss, 0, sizeof(*ss));
        return tg_err_set(err, -EINVAL,
                          "admin address '%s' is not a loopback address: the admin endpoint has no "
                          "authentication, so it listens on 127.0.0.0/8 or ::1 only (use "
                          "127.0.0.1:PORT)",
                          addr);
    }
    return 0;
}
