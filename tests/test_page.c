/* The live admin page in a real browser: headless Chromium loads `/` from
 * a running `toolgate wrap --admin`, its script fetches /limits and
 * /agents, and the rendered DOM shows each limit's meter with the right
 * figures (a rate bucket filled to 100% marked full), the agent, and the
 * latest denial; a screenshot is taken. No secret planted in a call
 * reaches the page. Skips when chromium is not installed (CI installs it). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/mcp_client.h"
#include "tests/tg_harness.h"

static tgh_wrap_t P;

static void page_fini(void)
{
    tgh_cleanup();
}

Test(page, meters_agents_and_denials_render_in_chromium, .fini = page_fini, .timeout = 90)
{
    const char *chromium = "/usr/bin/chromium";
    if (access(chromium, X_OK) != 0)
        cr_skip_test("chromium is not installed (apt-get install chromium); CI installs it");
    cr_assert_eq(tgh_wrap_prepare(&P), 0);
    int port = tgh_free_port();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *const args[] = {"--admin", addr, "--limit", "rate_limit=4/minute", NULL};
    const char *const agent_args[] = {"--log", P.log, NULL};
    cr_assert_eq(tgh_wrap_exec(&P, args, TG_AGENTS_DIR "/tg_fixture_agent", agent_args, NULL), 0);
    json_decref(mcp_initialize(&P.tg, 5000));
    /* 4 pass (the bucket is then full), the 5th is denied. */
    for (int i = 1; i <= 5; i++)
        mcp_call(&P.tg, i, "echo", "{\"text\":\"CANARY-PAGE-4c1\"}");
    for (int i = 1; i <= 5; i++)
        json_decref(tgh_read_json(&P.tg, 5000, NULL));

    char dom[TGH_PATH + 32], png[TGH_PATH + 32], profile[TGH_PATH + 32], cmd[4096];
    snprintf(dom, sizeof dom, "%s/dom.html", P.dir);
    snprintf(png, sizeof png, "%s/page.png", P.dir);
    snprintf(profile, sizeof profile, "%s/chromium-profile", P.dir);
    const char *flags = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                        "--disable-background-networking --disable-component-update --disable-sync "
                        "--virtual-time-budget=4000";
    snprintf(cmd, sizeof cmd, "'%s' %s --user-data-dir='%s' --dump-dom 'http://%s/' > '%s' 2>/dev/null",
             chromium, flags, profile, addr, dom);
    cr_assert_eq(system(cmd), 0, "chromium --dump-dom failed");
    snprintf(cmd, sizeof cmd,
             "'%s' %s --user-data-dir='%s' --window-size=1280,900 --screenshot='%s' 'http://%s/' "
             ">/dev/null 2>&1",
             chromium, flags, profile, png, addr);
    cr_assert_eq(system(cmd), 0, "chromium --screenshot failed");

    size_t len = 0;
    char *html = tgh_read_file(dom, &len);
    cr_assert(html != NULL && len > 0, "empty DOM");
    /* The rate bucket row: name, 100% fill, marked full, with a meter. */
    char *row = strstr(html, "data-name=\"agent.tg_fixture_agent.rate\"");
    cr_assert_not_null(row, "no meter row for the agent's rate limit:\n%.2000s", html);
    char *end = strstr(row, "</tr>");
    cr_assert_not_null(end);
    *end = '\0';
    cr_assert(strstr(row, "100.0%"), "the rate meter does not show 100%%: %s", row);
    cr_assert(strstr(row, "class=\"meter\""), "no meter element: %s", row);
    *end = '<';
    /* The row's own tag carries the level class (amber at 80%, red when full). */
    char *tag = row;
    while (tag > html && strncmp(tag, "<tr", 3) != 0)
        tag--;
    cr_assert(strncmp(tag, "<tr class=\"full\"", sizeof "<tr class=\"full\"" - 1) == 0,
              "a full limit is not marked full: %.80s",
              tag);
    cr_assert(strstr(html, "rate_limit_exceeded"), "the latest denial is not shown");
    cr_assert(strstr(html, "tg_fixture_agent"), "the agent is not listed");
    cr_assert(strstr(html, "CANARY-PAGE") == NULL, "call arguments reached the page");
    free(html);
    size_t plen = 0;
    char *img = tgh_read_file(png, &plen);
    cr_assert(img != NULL && plen > 1000 && memcmp(img, "\x89PNG", 4) == 0, "no screenshot");
    free(img);
}
