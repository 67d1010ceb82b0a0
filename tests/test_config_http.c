/* HTTP listeners in the config (router.listen[].http and its keys): what
 * loads, the defaults, and each refusal with the message an operator sees
 * (config/cfg_router.c, config/addr.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "config/addr.h"
#include "config/config.h"

static tg_config_t cfg;
static tg_err_t err;

static void setup(void)
{
    memset(&err, 0, sizeof err);
    cr_assert_eq(tg_config_default(&cfg), 0);
}

static void teardown(void)
{
    tg_config_free(&cfg);
}

TestSuite(config_http, .init = setup, .fini = teardown);

#define AGENTS "{\"agents\":[{\"id\":\"a\",\"command\":[\"/bin/true\"]}],"

static int load(const char *listener)
{
    char text[2048];
    snprintf(text, sizeof text, AGENTS "\"router\":{\"listen\":[%s]}}", listener);
    return tg_config_load_buffer(&cfg, "t.json", text, strlen(text), &err);
}

/* A fresh model per load: a refused load leaves the model half-filled. */
static void refused(const char *listener, const char *part)
{
    tg_config_free(&cfg);
    cr_assert_eq(tg_config_default(&cfg), 0);
    memset(&err, 0, sizeof err);
    cr_expect(load(listener) == -1 || tg_config_validate(&cfg, &err) == -1, "accepted: %s",
              listener);
    cr_expect(strstr(err.msg, part) != NULL, "for: %s\n got: %s\nwant part: %s", listener, err.msg,
              part);
}

Test(config_http, a_loopback_listener_loads_with_its_defaults)
{
    cr_assert_eq(load("{\"http\":\"127.0.0.1:8080\",\"agent\":\"a\"}"), 0, "%s", err.msg);
    const tg_listen_cfg_t *l = &cfg.listen[0];
    cr_expect_str_eq(l->http_addr, "127.0.0.1:8080");
    cr_expect_str_eq(l->http_path, "/mcp");
    cr_expect_null(l->unix_path);
    cr_expect_null(l->tls_cert);
    cr_expect_null(l->allowed_origins);
    cr_expect_eq(l->max_sessions, 0, "0 stands for the default");
}

Test(config_http, every_http_key_loads)
{
    cr_assert_eq(load("{\"http\":\"[::1]:0\",\"agent\":\"a\",\"path\":\"/v1/mcp\","
                      "\"tls\":{\"cert\":\"/etc/c.pem\",\"key\":\"/etc/k.pem\"},"
                      "\"allowed_origins\":[\"https://app.example\",\"http://localhost:6274\"],"
                      "\"max_header_bytes\":\"8Ki\",\"max_requests_per_connection\":100,"
                      "\"header_timeout\":\"5s\",\"keepalive_timeout\":\"1m\","
                      "\"max_sessions\":10,\"max_sessions_per_caller\":2,"
                      "\"session_idle_timeout\":\"10m\",\"max_connections\":50}"),
                 0, "%s", err.msg);
    const tg_listen_cfg_t *l = &cfg.listen[0];
    cr_expect_str_eq(l->http_path, "/v1/mcp");
    cr_expect_str_eq(l->tls_cert, "/etc/c.pem");
    cr_expect_str_eq(l->tls_key, "/etc/k.pem");
    cr_expect_str_eq(l->allowed_origins[1], "http://localhost:6274");
    cr_expect_null(l->allowed_origins[2]);
    cr_expect_eq(l->max_header_bytes, 8192);
    cr_expect_eq(l->max_requests, 100);
    cr_expect_eq(l->header_timeout_ms, 5000);
    cr_expect_eq(l->keepalive_timeout_ms, 60000);
    cr_expect_eq(l->max_sessions, 10);
    cr_expect_eq(l->sessions_per_caller, 2);
    cr_expect_eq(l->session_idle_ms, 600000);
    cr_expect_eq(l->max_connections, 50);
}

Test(config_http, off_loopback_tls_is_required_unless_said_off)
{
    refused("{\"http\":\"0.0.0.0:8443\",\"agent\":\"a\"}",
            "is not on loopback and has no tls");
    cr_expect_eq(load("{\"http\":\"0.0.0.0:8443\",\"agent\":\"a\",\"tls\":\"off\"}"), 0, "%s",
                 err.msg);
    cr_expect(cfg.listen[0].tls_off);
}

Test(config_http, refusals_name_the_fault)
{
    refused("{\"http\":\"example.com:80\",\"agent\":\"a\"}", "not an IP address or localhost");
    refused("{\"http\":\"127.0.0.1:99999\",\"agent\":\"a\"}", "is not 0 to 65535");
    refused("{\"http\":\"::1:80\",\"agent\":\"a\"}", "an IPv6 address goes in brackets");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"path\":\"mcp\"}", "not an endpoint path");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"path\":\"/a?b\"}", "without ?, # or %");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"tls\":{\"cert\":\"/c.pem\"}}",
            "tls needs both \"cert\" and \"key\"");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"tls\":\"on\"}", "is not a TLS setting");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"allowed_origins\":[\"app.example\"]}",
            "is not an origin");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"allowed_origins\":[\"https://a/b\"]}",
            "no path");
    refused("{\"http\":\"127.0.0.1:80\",\"unix\":\"/run/a.sock\",\"agent\":\"a\"}",
            "\"unix\" or \"http\", not both");
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\",\"dialect\":\"opensentience\"}",
            "an http listener speaks MCP");
    refused("{\"http\":\"127.0.0.1:80\"}", "needs \"agent\"");
    refused("{\"unix\":\"/run/a.sock\",\"agent\":\"a\",\"max_sessions\":3}",
            "belong to an \"http\" listener");
}

Test(config_http, two_listeners_on_one_address_are_refused)
{
    refused("{\"http\":\"127.0.0.1:80\",\"agent\":\"a\"},{\"http\":\"127.0.0.1:80\",\"agent\":\"a\"}",
            "router.listen[1].http: \"127.0.0.1:80\" is also router.listen[0]");
}

Test(config_http, addresses_and_the_loopback_rule)
{
    struct sockaddr_storage ss;
    cr_assert_eq(tg_addr_parse("localhost:80", "x", &ss, &err), 0);
    cr_expect(tg_addr_loopback(&ss));
    cr_assert_eq(tg_addr_parse("127.9.9.9:80", "x", &ss, &err), 0);
    cr_expect(tg_addr_loopback(&ss));
    cr_assert_eq(tg_addr_parse("[::1]:80", "x", &ss, &err), 0);
    cr_expect(tg_addr_loopback(&ss));
    cr_assert_eq(tg_addr_parse("[::ffff:127.0.0.1]:80", "x", &ss, &err), 0);
    cr_expect(tg_addr_loopback(&ss));
    cr_assert_eq(tg_addr_parse("10.0.0.1:80", "x", &ss, &err), 0);
    cr_expect_not(tg_addr_loopback(&ss));
    cr_expect(tg_addr_host_loopback("localhost:8080", 14));
    cr_expect(tg_addr_host_loopback("[::1]", 5));
    cr_expect(tg_addr_host_loopback("127.0.0.1", 9));
    cr_expect_not(tg_addr_host_loopback("evil.example:8080", 17));
    cr_expect_not(tg_addr_host_loopback("127.0.0.1:http", 14));
    cr_expect_not(tg_addr_host_loopback("", 0));
}
