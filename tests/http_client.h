/* A small blocking HTTP/1.1 client for the integration tests of the MCP
 * Streamable HTTP front: one request per connection (Connection: close),
 * the whole response read until the server closes. Enough for JSON and
 * SSE answers (an SSE stream of a POST ends with its response). */
#ifndef TG_TESTS_HTTP_CLIENT_H
#define TG_TESTS_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/tg_harness.h"

#define THC_INIT_BODY                                                                            \
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"                       \
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"                                    \
    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

typedef struct thc_resp {
    int status;     /* 0 when no status line came */
    char sid[72];   /* its Mcp-Session-Id ("" none) */
    char local[64]; /* this client's address:port, as the server sees it */
    char *raw;      /* the whole response, NUL-terminated (free with thc_free) */
    const char *body;
} thc_resp_t;

static inline void thc_free(thc_resp_t *r)
{
    free(r->raw);
    memset(r, 0, sizeof *r);
}

/* The value of header <name> in response head <raw> into <out> ("" none). */
static inline void thc_header(const char *raw, const char *body, const char *name, char *out,
                              size_t cap)
{
    size_t n = strlen(name);
    out[0] = '\0';
    for (const char *p = strstr(raw, "\r\n"); p != NULL && p + 2 < body; p = strstr(p + 2, "\r\n")) {
        const char *l = p + 2;
        if (strncasecmp(l, name, n) != 0 || l[n] != ':')
            continue;
        l += n + 1;
        while (*l == ' ')
            l++;
        size_t k = strcspn(l, "\r\n");
        snprintf(out, cap, "%.*s", (int)(k < cap ? k : cap - 1), l);
        return;
    }
}

/* <method> <path> to 127.0.0.1:<port> with <headers> (each line ending
 * in \r\n; "" none) and <body> (NULL: none). 0, or -errno. */
static inline int thc_request(int port, const char *method, const char *path, const char *headers,
                              const char *body, thc_resp_t *r)
{
    memset(r, 0, sizeof *r);
    int fd = tgh_tcp_dial(port);
    if (fd < 0)
        return fd;
    struct sockaddr_in me;
    socklen_t mlen = sizeof me;
    char ip[INET_ADDRSTRLEN] = "";
    if (getsockname(fd, (struct sockaddr *)&me, &mlen) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip) != NULL)
        snprintf(r->local, sizeof r->local, "%s:%u", ip, (unsigned)ntohs(me.sin_port));
    size_t blen = body != NULL ? strlen(body) : 0;
    size_t cap = 1024 + strlen(headers) + blen;
    char *req = malloc(cap);
    if (req == NULL) {
        close(fd);
        return -ENOMEM;
    }
    int n = snprintf(req, cap,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     "%s%s%zu\r\n\r\n%s",
                     method, path, port, headers,
                     body != NULL ? "Content-Type: application/json\r\nContent-Length: "
                                  : "Content-Length: ",
                     blen, body != NULL ? body : "");
    ssize_t w = send(fd, req, (size_t)n, MSG_NOSIGNAL);
    free(req);
    if (w != n) {
        close(fd);
        return -EIO;
    }
    size_t len = 0;
    r->raw = tgh_read_all(fd, &len);
    close(fd);
    if (r->raw == NULL)
        return -ENOMEM;
    const char *end = strstr(r->raw, "\r\n\r\n");
    r->body = end != NULL ? end + 4 : r->raw + len;
    if (sscanf(r->raw, "HTTP/1.1 %d", &r->status) != 1)
        r->status = 0;
    thc_header(r->raw, r->body, "Mcp-Session-Id", r->sid, sizeof r->sid);
    return 0;
}

/* A POST of <body> in session <sid> ("" or NULL: none) with <extra>
 * header lines (NULL: none). */
static inline int thc_post(int port, const char *sid, const char *extra, const char *body,
                           thc_resp_t *r)
{
    char h[1024];
    snprintf(h, sizeof h, "%s%s%s%s", sid != NULL && sid[0] ? "Mcp-Session-Id: " : "",
             sid != NULL && sid[0] ? sid : "", sid != NULL && sid[0] ? "\r\n" : "",
             extra != NULL ? extra : "");
    if (sid != NULL && sid[0])
        strncat(h, "MCP-Protocol-Version: 2025-06-18\r\n", sizeof h - strlen(h) - 1);
    return thc_request(port, "POST", "/mcp", h, body, r);
}

#endif
