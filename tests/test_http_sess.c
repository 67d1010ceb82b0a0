/* The HTTP front's MCP sessions (router/front/http_sess.c) against a fake
 * engine: the test plays the engine's end of each session's bridge, reads
 * the lines the session writes and writes the agent's side back, and
 * checks where each message is routed, the backlog's bounds and the
 * session's life (find, caller binding, end, idle). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "router/front/http_sess.h"

#define MAX_FRAME 4096

typedef struct engine {
    uv_pipe_t *pipe; /* the engine's end (heap, as the runner's sessions take it) */
    char in[65536];
    size_t in_len;
    int opened;
    bool refuse;
    char id[TG_HSESS_ID_HEX + 1];         /* the last session's metadata */
    char remote[TG_HSESS_REMOTE_MAX];
} engine_t;

typedef struct stream {
    tg_hstream_t st;
    char got[65536];
    size_t got_len;
    int nmsg;
    int finished;
    bool full; /* message() reports the connection over its bound */
} stream_t;

static uv_loop_t loop;
static engine_t eng;
static tg_hub_t *hub;

static void eng_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    b->base = eng.in + eng.in_len;
    b->len = sizeof(eng.in) - eng.in_len;
}

static void eng_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    if (n > 0)
        eng.in_len += (size_t)n;
}

static void eng_closed(uv_handle_t *h)
{
    free(h);
}

static int open_engine(void *arg, uv_pipe_t *conn, int caller, const tg_hsess_meta_t *meta,
                       char *why, size_t cap)
{
    snprintf(eng.id, sizeof(eng.id), "%s", meta->id);
    snprintf(eng.remote, sizeof(eng.remote), "%s", meta->remote);
    if (eng.refuse) {
        snprintf(why, cap, "refused by the test");
        return -EBUSY;
    }
    eng.pipe = conn;
    eng.opened++;
    uv_read_start((uv_stream_t *)conn, eng_alloc, eng_read);
    return 0;
}

static void spin(int rounds)
{
    for (int i = 0; i < rounds; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

static void eng_write(const char *line)
{
    char buf[8192];
    int n = snprintf(buf, sizeof(buf), "%s\n", line);
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    cr_assert_eq(uv_try_write((uv_stream_t *)eng.pipe, &b, 1), n);
    spin(5);
}

static bool st_message(tg_hstream_t *st, const char *msg, size_t len)
{
    stream_t *t = (stream_t *)st;
    cr_assert_lt(t->got_len + len + 1, sizeof(t->got));
    memcpy(t->got + t->got_len, msg, len);
    t->got_len += len;
    t->got[t->got_len++] = '|';
    t->got[t->got_len] = '\0';
    t->nmsg++;
    return !t->full;
}

static void st_finish(tg_hstream_t *st)
{
    ((stream_t *)st)->finished++;
}

static const tg_hstream_ops_t ops = {st_message, st_finish};

static void stream_init(stream_t *t, bool events, const char *rpcid, const char *ptoken)
{
    memset(t, 0, sizeof(*t));
    t->st.ops = &ops;
    t->st.events = events;
    if (rpcid != NULL) {
        t->st.rpcid_len = strlen(rpcid);
        memcpy(t->st.rpcid, rpcid, t->st.rpcid_len);
    }
    if (ptoken != NULL) {
        t->st.ptoken_len = strlen(ptoken);
        memcpy(t->st.ptoken, ptoken, t->st.ptoken_len);
    }
}

static int posted;
static void post_done(void *arg, int status)
{
    posted++;
}

static void setup(void)
{
    memset(&eng, 0, sizeof(eng));
    uv_loop_init(&loop);
    hub = tg_hub_new(&loop, MAX_FRAME, 1000, 4, open_engine, NULL);
    cr_assert_not_null(hub);
    posted = 0;
}

static void teardown(void)
{
    tg_hub_shutdown(hub);
    if (eng.pipe != NULL && !uv_is_closing((uv_handle_t *)eng.pipe))
        uv_close((uv_handle_t *)eng.pipe, eng_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(tg_hub_idle(hub));
    tg_hub_free(hub);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

TestSuite(http_sess, .init = setup, .fini = teardown);

static tg_hsess_t *new_session(int caller)
{
    int status = 0;
    char why[128];
    tg_hsess_t *s = tg_hsess_new(hub, caller, "192.0.2.7:40000", &status, why, sizeof(why));
    cr_assert_not_null(s, "%d %s", status, why);
    return s;
}

Test(http_sess, the_runner_is_told_the_session_id_and_the_client_address)
{
    tg_hsess_t *s = new_session(0);
    cr_assert_str_eq(eng.id, tg_hsess_id(s));
    cr_assert_str_eq(eng.remote, "192.0.2.7:40000");
    uv_pipe_t *first = eng.pipe;
    int status = 0;
    char why[128];
    cr_assert_not_null(tg_hsess_new(hub, 0, NULL, &status, why, sizeof(why)));
    cr_assert_str_eq(eng.remote, "", "an unknown address is told as empty text");
    uv_close((uv_handle_t *)first, eng_closed);
}

Test(http_sess, a_request_reaches_the_engine_as_one_line_and_its_answer_its_stream)
{
    tg_hsess_t *s = new_session(3);
    stream_t t;
    stream_init(&t, false, "7", NULL);
    const char *body = "{\"jsonrpc\":\"2.0\",\n \"id\":7,\r\n \"method\":\"tools/list\"}";
    cr_assert_eq(tg_hsess_post(s, body, strlen(body), &t.st, post_done, NULL), 0);
    spin(5);
    cr_assert_eq(posted, 1);
    cr_assert_str_eq(eng.in, "{\"jsonrpc\":\"2.0\",  \"id\":7,   \"method\":\"tools/list\"}\n");
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}"); /* nobody waits for 8 */
    cr_assert_eq(t.nmsg, 0);
    cr_assert_eq(tg_hub_stats(hub)->responses_dropped, 1);
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}");
    cr_assert_eq(t.nmsg, 1);
    cr_assert_eq(t.finished, 1);
    cr_assert_null(t.st.s);
    cr_assert_str_eq(t.got, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}|");
}

Test(http_sess, string_ids_match_byte_for_byte)
{
    tg_hsess_t *s = new_session(0);
    stream_t a, b;
    stream_init(&a, false, "\"a\"", NULL);
    stream_init(&b, false, "\"b\"", NULL);
    const char *ba = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}";
    const char *bb = "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"}";
    cr_assert_eq(tg_hsess_post(s, ba, strlen(ba), &a.st, NULL, NULL), 0);
    cr_assert_eq(tg_hsess_post(s, bb, strlen(bb), &b.st, NULL, NULL), 0);
    spin(5);
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{}}");
    cr_assert_eq(b.finished, 1);
    cr_assert_eq(a.finished, 0);
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}");
    cr_assert_eq(a.finished, 1);
}

Test(http_sess, progress_goes_to_its_request_and_the_rest_to_the_get_stream)
{
    tg_hsess_t *s = new_session(0);
    stream_t call, call2, get;
    stream_init(&call, true, "1", "\"tok\"");
    stream_init(&call2, true, "2", NULL);
    stream_init(&get, true, NULL, NULL);
    const char *b1 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\","
                     "\"_meta\":{\"progressToken\":\"tok\"}}}";
    const char *b2 = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}";
    cr_assert_eq(tg_hsess_post(s, b1, strlen(b1), &call.st, NULL, NULL), 0);
    cr_assert_eq(tg_hsess_post(s, b2, strlen(b2), &call2.st, NULL, NULL), 0);
    tg_hsess_attach_get(s, &get.st);
    eng_write("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
              "\"params\":{\"progressToken\":\"tok\",\"progress\":1}}");
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"sampling/createMessage\",\"params\":{}}");
    eng_write("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}");
    cr_assert_eq(call.nmsg, 1);
    cr_assert_eq(call2.nmsg, 0);
    cr_assert_eq(get.nmsg, 2);
    cr_assert(strstr(get.got, "sampling/createMessage") != NULL);
}

Test(http_sess, without_a_get_stream_the_oldest_event_stream_carries_the_agents_requests)
{
    tg_hsess_t *s = new_session(0);
    stream_t json, sse;
    stream_init(&json, false, "1", NULL);
    stream_init(&sse, true, "2", NULL);
    const char *b1 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    const char *b2 = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
    cr_assert_eq(tg_hsess_post(s, b1, strlen(b1), &json.st, NULL, NULL), 0);
    cr_assert_eq(tg_hsess_post(s, b2, strlen(b2), &sse.st, NULL, NULL), 0);
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"roots/list\"}");
    cr_assert_eq(json.nmsg, 0);
    cr_assert_eq(sse.nmsg, 1);
}

Test(http_sess, the_backlog_is_bounded_and_the_next_stream_gets_it_first)
{
    tg_hsess_t *s = new_session(0);
    for (int i = 0; i < TG_HSESS_BACKLOG + 36; i++) {
        char line[128];
        snprintf(line, sizeof(line),
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"n\":%d}}", i);
        eng_write(line);
    }
    cr_assert_eq(tg_hub_stats(hub)->backlog_dropped, 36);
    stream_t get;
    stream_init(&get, true, NULL, NULL);
    tg_hsess_attach_get(s, &get.st);
    cr_assert_eq(get.nmsg, TG_HSESS_BACKLOG);
    cr_assert(strstr(get.got, "{\"n\":36}") != NULL, "the oldest were dropped: %.80s", get.got);
    cr_assert(strstr(get.got, "{\"n\":35}") == NULL);
}

Test(http_sess, the_agents_requests_are_never_dropped_reading_pauses_instead)
{
    tg_hsess_t *s = new_session(0);
    char all[32768];
    size_t len = 0;
    int n = TG_HSESS_BACKLOG * 2;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(all + len, sizeof(all) - len,
                                "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"roots/list\"}\n", i);
    uv_buf_t b = uv_buf_init(all, (unsigned)len);
    cr_assert_eq(uv_try_write((uv_stream_t *)eng.pipe, &b, 1), (int)len);
    spin(10);
    cr_assert_eq(tg_hub_stats(hub)->backlog_dropped, 0);
    stream_t get;
    stream_init(&get, true, NULL, NULL);
    tg_hsess_attach_get(s, &get.st);
    spin(10);
    cr_assert_eq(get.nmsg, n);
}

Test(http_sess, a_full_connection_pauses_the_engine_until_resumed)
{
    tg_hsess_t *s = new_session(0);
    stream_t get;
    stream_init(&get, true, NULL, NULL);
    get.full = true;
    tg_hsess_attach_get(s, &get.st);
    eng_write("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"n\":1}}\n"
              "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"n\":2}}");
    cr_assert_eq(get.nmsg, 1);
    get.full = false;
    tg_hsess_resume(s);
    spin(5);
    cr_assert_eq(get.nmsg, 2);
}

Test(http_sess, a_session_is_found_only_by_its_own_caller)
{
    tg_hsess_t *s = new_session(2);
    const char *id = tg_hsess_id(s);
    cr_assert_eq(strlen(id), TG_HSESS_ID_HEX);
    cr_assert_eq(tg_hsess_find(hub, id, strlen(id), 2), s);
    cr_assert_null(tg_hsess_find(hub, id, strlen(id), 1));
    cr_assert_null(tg_hsess_find(hub, id, strlen(id), -1));
    char other[TG_HSESS_ID_HEX + 1];
    memcpy(other, id, sizeof(other));
    other[TG_HSESS_ID_HEX - 1] = other[TG_HSESS_ID_HEX - 1] == '0' ? '1' : '0';
    cr_assert_null(tg_hsess_find(hub, other, strlen(other), 2));
    cr_assert_null(tg_hsess_find(hub, "ZZ", 2, 2));
    tg_hsess_end(s);
    cr_assert_null(tg_hsess_find(hub, id, strlen(id), 2));
}

Test(http_sess, when_the_engine_ends_the_session_its_streams_finish_and_it_is_gone)
{
    tg_hsess_t *s = new_session(0);
    char id[TG_HSESS_ID_HEX + 1];
    snprintf(id, sizeof id, "%s", tg_hsess_id(s));
    stream_t t, get;
    stream_init(&t, true, "1", NULL);
    stream_init(&get, true, NULL, NULL);
    const char *b = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    cr_assert_eq(tg_hsess_post(s, b, strlen(b), &t.st, NULL, NULL), 0);
    tg_hsess_attach_get(s, &get.st);
    uv_close((uv_handle_t *)eng.pipe, eng_closed);
    eng.pipe = NULL;
    spin(10);
    cr_assert_eq(t.finished, 1);
    cr_assert_eq(get.finished, 1);
    cr_assert_null(tg_hsess_find(hub, id, strlen(id), 0));
    cr_assert_eq(tg_hub_sessions(hub), 0);
}

Test(http_sess, an_idle_session_ends_and_a_busy_one_does_not)
{
    tg_hsess_t *idle = new_session(0);
    uv_pipe_t *first = eng.pipe;
    tg_hsess_t *busy = new_session(0);
    stream_t get;
    stream_init(&get, true, NULL, NULL);
    tg_hsess_attach_get(busy, &get.st);
    tg_hub_tick(hub, uv_now(&loop) + 999);
    cr_assert_not(tg_hsess_ended(idle));
    tg_hub_tick(hub, uv_now(&loop) + 1000);
    cr_assert_eq(tg_hub_stats(hub)->sessions_idled, 1);
    cr_assert_eq(tg_hub_sessions(hub), 1);
    cr_assert_not(tg_hsess_ended(busy));
    uv_close((uv_handle_t *)first, eng_closed);
}

Test(http_sess, sessions_are_bounded_and_a_refusal_names_why)
{
    for (int i = 0; i < 4; i++) {
        new_session(0);
        uv_close((uv_handle_t *)eng.pipe, eng_closed);
        eng.pipe = NULL;
        spin(3);
    }
    /* the engine closed those four: their slots are free again */
    cr_assert_eq(tg_hub_sessions(hub), 0);
    eng.refuse = true;
    int status = 0;
    char why[128];
    cr_assert_null(tg_hsess_new(hub, 0, NULL, &status, why, sizeof(why)));
    cr_assert_eq(status, 503);
    cr_assert_str_eq(why, "refused by the test");
    eng.refuse = false;
    uv_pipe_t *pipes[4];
    for (int i = 0; i < 4; i++) {
        new_session(0);
        pipes[i] = eng.pipe;
    }
    cr_assert_null(tg_hsess_new(hub, 0, NULL, &status, why, sizeof(why)));
    cr_assert_eq(status, 503);
    cr_assert(strstr(why, "4 HTTP sessions open") != NULL, "%s", why);
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)pipes[i], eng_closed);
    eng.pipe = pipes[3];
}

Test(http_sess, a_line_over_the_frame_bound_is_dropped_and_the_next_routed)
{
    tg_hsess_t *s = new_session(0);
    stream_t t;
    stream_init(&t, false, "1", NULL);
    const char *b = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    cr_assert_eq(tg_hsess_post(s, b, strlen(b), &t.st, NULL, NULL), 0);
    static char big[3 * MAX_FRAME];
    memset(big, 'x', sizeof(big) - 2);
    big[sizeof(big) - 2] = '\n';
    uv_buf_t bb = uv_buf_init(big, sizeof(big) - 1);
    cr_assert_eq(uv_try_write((uv_stream_t *)eng.pipe, &bb, 1), (int)sizeof(big) - 1);
    spin(10);
    eng_write("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    cr_assert_eq(t.finished, 1);
    cr_assert_eq(tg_hub_stats(hub)->responses_dropped, 1);
}
