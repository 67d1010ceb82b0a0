/* The blocking admin client behind `toolgate status` (see admin.h).
 *
 * A command-line tool waits for one answer and exits, so plain blocking
 * sockets are right here; the whole exchange (connect, request, answer)
 * shares one deadline so a stuck endpoint cannot hang the terminal.
 */
#include "router/admin/admin.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_PATH_MAX 256 /* fixed internal bound: request path */

typedef struct client {
    char *body;
    size_t len, cap, max;
    bool over;
    bool done;
} client_t;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for <events> on <fd> until <deadline>: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    client_t *c = p->data;
    if (len > c->max - c->len) {
        c->over = true;
        return -1; /* stops the parser */
    }
    if (c->len + len + 1 > c->cap) {
        size_t ncap = c->cap ? c->cap : 4096;
        while (ncap < c->len + len + 1)
            ncap *= 2;
        char *nb = realloc(c->body, ncap);
        if (nb == NULL) {
            c->over = true;
            return -1;
        }
        c->body = nb;
        c->cap = ncap;
    }
    memcpy(c->body + c->len, at, len);
    c->len += len;
    return 0;
}

static int on_complete(http_parser *p)
{
    client_t *c = p->data;
    c->done = true;
    return 0;
}

static int connect_to(const struct sockaddr_storage *ss, int64_t deadline)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    socklen_t sl =
        ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
        int rc = -errno;
        if (rc == -EINPROGRESS) {
            int soerr = 0;
            socklen_t el = sizeof(soerr);
            rc = wait_fd(fd, POLLOUT, deadline);
            if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0)
                rc = -errno;
            else if (rc == 0 && soerr != 0)
                rc = -soerr;
        }
        if (rc < 0) {
            close(fd);
            return rc;
        }
    }
    return fd;
}

int tg_admin_get(const char *addr, const char *path, uint32_t timeout_ms, size_t max_body,
                 char **body, size_t *body_len, tg_err_t *err)
{
    struct sockaddr_storage ss;
    char req[CLIENT_PATH_MAX + TG_ADMIN_ADDR_MAX + 96];
    int64_t deadline = mono_ms() + timeout_ms;
    int rc;

    *body = NULL;
    *body_len = 0;
    if ((rc = tg_admin_parse_addr(addr, &ss, err)) < 0)
        return rc;
    if (path == NULL || path[0] != '/' || strlen(path) >= CLIENT_PATH_MAX) {
        return tg_err_set(err, -EINVAL, "admin path must start with '/' and be under %d bytes",
                          CLIENT_PATH_MAX);
    }
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\nConnection: close\r\n"
                     "User-Agent: toolgate/" TG_VERSION "\r\n\r\n",
                     path, addr);
    if (n < 0 || (size_t)n >= sizeof(req)) {
        return tg_err_set(err, -EINVAL, "admin request too long");
    }
    int fd = connect_to(&ss, deadline);
    if (fd < 0) {
        return tg_err_set(err, fd, "cannot connect to the admin endpoint at %s: %s", addr,
                          strerror(-fd));
    }
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        rc = w < 0 && (errno == EAGAIN || errno == EINTR) ? wait_fd(fd, POLLOUT, deadline) : -errno;
        if (rc < 0) {
            tg_err_set(err, rc, "admin endpoint at %s: sending: %s", addr, strerror(-rc));
            close(fd);
            return rc;
        }
    }

    client_t c = {.max = max_body};
    http_parser p;
    http_parser_settings s = {.on_body = on_body, .on_message_complete = on_complete};
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &c;
    char buf[16384];
    rc = 0;
    while (!c.done) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                if ((rc = wait_fd(fd, POLLIN, deadline)) < 0)
                    break;
                continue;
            }
            rc = -errno;
            break;
        }
        /* r == 0 tells the parser the answer ended with the connection. */
        size_t np = http_parser_execute(&p, &s, buf, (size_t)r);
        if (c.over) {
            rc = -EMSGSIZE;
            break;
        }
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK || (r > 0 && np != (size_t)r && !c.done) ||
            (r == 0 && !c.done)) {
            rc = -EPROTO;
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        free(c.body);
        if (rc == -EMSGSIZE)
            tg_err_set(err, rc, "admin endpoint at %s: %s answer larger than %zu bytes", addr, path,
                       max_body);
        else if (rc == -EPROTO)
            tg_err_set(err, rc, "admin endpoint at %s: %s: not a complete HTTP answer", addr, path);
        else
            tg_err_set(err, rc, "admin endpoint at %s: %s: %s", addr, path, strerror(-rc));
        return rc;
    }
    if (c.body == NULL && (c.body = malloc(1)) == NULL) {
        return tg_err_set(err, -ENOMEM, "out of memory");
    }
    c.body[c.len] = '\0';
    *body = c.body;
    *body_len = c.len;
    return (int)p.status_code;
}
