/* OpenSentience envelope scanner (see osenv.h).
 *
 * Reads the top-level members of a frame and, for the types toolgate acts
 * on, the members of payload (and payload.protocol of agent.hello).
 * Everything deeper is skipped by jscan. The rules, all in tg_os_scan:
 *   - the frame is one JSON object, blanks around it;
 *   - required: "v" (the integer 1: "1.0" and "1e0" are not integers),
 *     "type", "id", "ts" (strings) and "payload" (an object), as v1 says
 *     every message carries them;
 *   - optional: "request_id", "correlation_id", "causation_id",
 *     "in_reply_to" (strings) and "error" (an object); null counts as
 *     absent, since many serialisers write an unset optional as null;
 *   - per type, the payload members toolgate reads have the v1 types and
 *     the required ones are there (see tg_os_env_t in osenv.h); an optional
 *     member may be null; "status" of agent.tool.result is one of
 *     succeeded, failed, canceled; "timeout_ms" is a non-negative integer;
 *   - every key toolgate reads may appear once (top level, the payload of
 *     a type it reads, payload.protocol of agent.hello). Otherwise toolgate
 *     could route or account one call_id or tool_id while the agent (which
 *     typically keeps the last duplicate) runs another;
 *   - type names and keys are compared decoded, so "agent\u002ehello" is
 *     agent.hello, as it is to the agent.
 * Unknown types are valid envelopes (TG_OS_OTHER): v1 says unknown
 * payload fields and types are ignored or answered, not fatal.
 */
#include "router/codec/osenv.h"

#include <string.h>

static const tg_jspan_t none = {.off = 0, .len = 0, .type = TG_J_NONE, .escaped = false};

/* Slots record "seen" even for null, so a duplicate is caught; <seen>
 * marks are kept apart from the reported spans for that reason. */
typedef struct slot {
    tg_jspan_t val;
    bool seen;
} slot_t;

static int take_once(slot_t *s, tg_jspan_t v)
{
    if (s->seen)
        return -1;
    s->seen = true;
    s->val = v;
    return 0;
}

/* The slot's value when it has type <t>; absent when missing or (for an
 * optional member) null; -1 for any other type. */
static int typed(const slot_t *s, tg_jtype_t t, bool required, tg_jspan_t *out)
{
    *out = none;
    if (!s->seen || s->val.type == TG_J_NULL)
        return required ? -1 : 0;
    if (s->val.type != t)
        return -1;
    *out = s->val;
    return 0;
}

/* ---- the members toolgate reads, by key ---- */

enum {
    K_V,
    K_TYPE,
    K_ID,
    K_TS,
    K_PAYLOAD,
    K_REQUEST_ID,
    K_CORRELATION_ID,
    K_CAUSATION_ID,
    K_IN_REPLY_TO,
    K_ERROR,
    K__TOP
};

static const char *const top_keys[K__TOP] = {
    [K_V] = "v",
    [K_TYPE] = "type",
    [K_ID] = "id",
    [K_TS] = "ts",
    [K_PAYLOAD] = "payload",
    [K_REQUEST_ID] = "request_id",
    [K_CORRELATION_ID] = "correlation_id",
    [K_CAUSATION_ID] = "causation_id",
    [K_IN_REPLY_TO] = "in_reply_to",
    [K_ERROR] = "error",
};

/* A set of keys and their slots: one object level. */
#define MAX_KEYS 10 /* fixed internal bound: keys of one OpenSentience envelope object */
typedef struct keyset {
    const char *const *keys;
    size_t n;
    slot_t slot[MAX_KEYS];
} keyset_t;

static int keyset_member(void *ctx, const char *buf, tg_jspan_t k, tg_jspan_t v)
{
    keyset_t *ks = ctx;
    for (size_t i = 0; i < ks->n; i++) {
        if (tg_jstr_eq(buf, k, ks->keys[i]))
            return take_once(&ks->slot[i], v);
    }
    return 0;
}

static void keyset_init(keyset_t *ks, const char *const *keys, size_t n)
{
    memset(ks, 0, sizeof(*ks));
    ks->keys = keys;
    ks->n = n;
}

/* ---- payloads ---- */

enum { P_CALL_ID, P_TOOL_ID, P_INPUT, P_TIMEOUT, P_IDEM, P__CALL };
static const char *const call_keys[P__CALL] = {
    [P_CALL_ID] = "call_id",    [P_TOOL_ID] = "tool_id",      [P_INPUT] = "input",
    [P_TIMEOUT] = "timeout_ms", [P_IDEM] = "idempotency_key",
};

enum { H_TOKEN, H_AGENT, H_PROTOCOL, H__HELLO };
static const char *const hello_keys[H__HELLO] = {
    [H_TOKEN] = "session_token",
    [H_AGENT] = "agent_id",
    [H_PROTOCOL] = "protocol",
};
static const char *const protocol_keys[1] = {"supported_versions"};
static const char *const tools_keys[1] = {"tools"};
static const char *const stream_keys[1] = {"call_id"};
static const char *const result_keys[2] = {"call_id", "status"};
static const char *const cancel_keys[2] = {"call_id", "reason"};

static int scan_hello(const char *buf, tg_os_env_t *env)
{
    keyset_t ks, pk;
    tg_jspan_t proto;
    keyset_init(&ks, hello_keys, H__HELLO);
    if (tg_jobj_each(buf, env->payload, keyset_member, &ks) < 0 ||
        typed(&ks.slot[H_TOKEN], TG_J_STRING, true, &env->session_token) < 0 ||
        typed(&ks.slot[H_AGENT], TG_J_STRING, true, &env->agent_id) < 0 ||
        typed(&ks.slot[H_PROTOCOL], TG_J_OBJECT, true, &proto) < 0)
        return -1;
    keyset_init(&pk, protocol_keys, 1);
    if (tg_jobj_each(buf, proto, keyset_member, &pk) < 0)
        return -1;
    return typed(&pk.slot[0], TG_J_ARRAY, true, &env->versions);
}

static int scan_call(const char *buf, tg_os_env_t *env)
{
    keyset_t ks;
    tg_jspan_t t;
    keyset_init(&ks, call_keys, P__CALL);
    if (tg_jobj_each(buf, env->payload, keyset_member, &ks) < 0 ||
        typed(&ks.slot[P_CALL_ID], TG_J_STRING, true, &env->call_id) < 0 ||
        typed(&ks.slot[P_TOOL_ID], TG_J_STRING, true, &env->tool_id) < 0 ||
        typed(&ks.slot[P_INPUT], TG_J_OBJECT, true, &env->input) < 0 ||
        typed(&ks.slot[P_IDEM], TG_J_STRING, false, &env->idempotency_key) < 0 ||
        typed(&ks.slot[P_TIMEOUT], TG_J_NUMBER, false, &t) < 0)
        return -1;
    if (t.type == TG_J_NUMBER) {
        if (tg_jnum_u64(buf, t, UINT64_MAX, &env->timeout_ms) < 0)
            return -1;
        env->has_timeout = true;
    }
    return 0;
}

static int scan_result(const char *buf, tg_os_env_t *env)
{
    keyset_t ks;
    tg_jspan_t st;
    keyset_init(&ks, result_keys, 2);
    if (tg_jobj_each(buf, env->payload, keyset_member, &ks) < 0 ||
        typed(&ks.slot[0], TG_J_STRING, true, &env->call_id) < 0 ||
        typed(&ks.slot[1], TG_J_STRING, true, &st) < 0)
        return -1;
    if (tg_jstr_eq(buf, st, "succeeded"))
        env->status = TG_OS_ST_SUCCEEDED;
    else if (tg_jstr_eq(buf, st, "failed"))
        env->status = TG_OS_ST_FAILED;
    else if (tg_jstr_eq(buf, st, "canceled"))
        env->status = TG_OS_ST_CANCELED;
    else
        return -1;
    return 0;
}

/* The payloads holding only strings (and one array) toolgate reads. */
static int scan_simple(const char *buf, tg_os_env_t *env, const char *const *keys, size_t n,
                       tg_jtype_t t0, tg_jspan_t *out0, tg_jspan_t *opt1)
{
    keyset_t ks;
    keyset_init(&ks, keys, n);
    if (tg_jobj_each(buf, env->payload, keyset_member, &ks) < 0 ||
        typed(&ks.slot[0], t0, true, out0) < 0)
        return -1;
    if (opt1 && typed(&ks.slot[1], TG_J_STRING, false, opt1) < 0)
        return -1;
    return 0;
}

static const struct {
    const char *name;
    tg_os_type_t type;
} type_tab[] = {
    {"agent.hello", TG_OS_AGENT_HELLO},
    {"agent.tools.register", TG_OS_AGENT_TOOLS_REGISTER},
    {"core.tool.call", TG_OS_CORE_TOOL_CALL},
    {"agent.tool.stream", TG_OS_AGENT_TOOL_STREAM},
    {"agent.tool.result", TG_OS_AGENT_TOOL_RESULT},
    {"core.tool.cancel", TG_OS_CORE_TOOL_CANCEL},
    {"agent.heartbeat", TG_OS_AGENT_HEARTBEAT},
};

const char *tg_os_type_name(tg_os_type_t t)
{
    for (size_t i = 0; i < sizeof type_tab / sizeof type_tab[0]; i++) {
        if (type_tab[i].type == t)
            return type_tab[i].name;
    }
    return "";
}

static int scan_payload(const char *buf, tg_os_env_t *env)
{
    switch (env->type) {
    case TG_OS_AGENT_HELLO:
        return scan_hello(buf, env);
    case TG_OS_AGENT_TOOLS_REGISTER:
        return scan_simple(buf, env, tools_keys, 1, TG_J_ARRAY, &env->tools, NULL);
    case TG_OS_CORE_TOOL_CALL:
        return scan_call(buf, env);
    case TG_OS_AGENT_TOOL_STREAM:
        return scan_simple(buf, env, stream_keys, 1, TG_J_STRING, &env->call_id, NULL);
    case TG_OS_AGENT_TOOL_RESULT:
        return scan_result(buf, env);
    case TG_OS_CORE_TOOL_CANCEL:
        return scan_simple(buf, env, cancel_keys, 2, TG_J_STRING, &env->call_id, &env->reason);
    case TG_OS_AGENT_HEARTBEAT:
    case TG_OS_OTHER:
        break;
    }
    return 0;
}

/* ---- top level ---- */

static int invalid(tg_os_env_t *env)
{
    memset(env, 0, sizeof(*env));
    return -1;
}

int tg_os_scan(const char *buf, size_t len, tg_os_env_t *env)
{
    memset(env, 0, sizeof(*env)); /* every span TG_J_NONE */
    /* The object is read in one pass from its opening brace (partial mode
     * finds the closing one), not skipped first and then iterated. */
    tg_jobj_iter_t it;
    if (tg_jobj_begin_partial(&it, buf, len, 0) < 0)
        return invalid(env);
    keyset_t ks;
    keyset_init(&ks, top_keys, K__TOP);
    if (tg_jobj_each_it(&it, keyset_member, &ks) < 0 || !tg_json_blank_from(buf, len, it.pos))
        return invalid(env);

    tg_jspan_t v;
    uint64_t ver;
    if (typed(&ks.slot[K_V], TG_J_NUMBER, true, &v) < 0 ||
        tg_jnum_u64(buf, v, UINT64_MAX, &ver) < 0 || ver != TG_OS_VERSION ||
        typed(&ks.slot[K_TYPE], TG_J_STRING, true, &env->type_s) < 0 ||
        typed(&ks.slot[K_ID], TG_J_STRING, true, &env->id) < 0 ||
        typed(&ks.slot[K_TS], TG_J_STRING, true, &env->ts) < 0 ||
        typed(&ks.slot[K_PAYLOAD], TG_J_OBJECT, true, &env->payload) < 0 ||
        typed(&ks.slot[K_REQUEST_ID], TG_J_STRING, false, &env->request_id) < 0 ||
        typed(&ks.slot[K_CORRELATION_ID], TG_J_STRING, false, &env->correlation_id) < 0 ||
        typed(&ks.slot[K_CAUSATION_ID], TG_J_STRING, false, &env->causation_id) < 0 ||
        typed(&ks.slot[K_IN_REPLY_TO], TG_J_STRING, false, &env->in_reply_to) < 0 ||
        typed(&ks.slot[K_ERROR], TG_J_OBJECT, false, &env->error) < 0)
        return invalid(env);

    env->type = TG_OS_OTHER;
    for (size_t i = 0; i < sizeof type_tab / sizeof type_tab[0]; i++) {
        if (tg_jstr_eq(buf, env->type_s, type_tab[i].name)) {
            env->type = type_tab[i].type;
            break;
        }
    }
    if (scan_payload(buf, env) < 0)
        return invalid(env);
    return 0;
}

int tg_os_supports_v1(const char *buf, tg_jspan_t versions)
{
    tg_jarr_iter_t it;
    tg_jspan_t el;
    int rc, found = 0;
    tg_jarr_begin(&it, buf, versions);
    while ((rc = tg_jarr_next(&it, &el)) == 1) {
        uint64_t n;
        if (el.type == TG_J_NUMBER && tg_jnum_u64(buf, el, UINT64_MAX, &n) == 0 &&
            n == TG_OS_VERSION)
            found = 1;
    }
    return rc < 0 ? -1 : found;
}

/* ---- tool ids ---- */

static bool id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '@' || c == '-';
}

static bool id_part_ok(const char *s, size_t n)
{
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!id_char((unsigned char)s[i]))
            return false;
    }
    return true;
}

int tg_os_tool_id_split(const char *s, size_t len, size_t *agent_len)
{
    if (len == 0 || len > TG_OS_TOOL_ID_MAX)
        return -1;
    const char *slash = memchr(s, '/', len);
    if (slash == NULL)
        return -1;
    size_t a = (size_t)(slash - s);
    /* id_part_ok refuses '/', so the tool part holds no second one */
    if (!id_part_ok(s, a) || !id_part_ok(slash + 1, len - a - 1))
        return -1;
    *agent_len = a;
    return 0;
}

int tg_os_tool_id_parse(const char *buf, tg_jspan_t s, char *dst, size_t cap, size_t *len,
                        size_t *agent_len)
{
    if (s.type != TG_J_STRING)
        return -1;
    long n = tg_jstr_decode(buf, s, dst, cap);
    if (n < 0 || tg_os_tool_id_split(dst, (size_t)n, agent_len) < 0)
        return -1;
    *len = (size_t)n;
    return 0;
}

void tg_os_tools_begin(tg_os_tools_iter_t *it, const char *buf, tg_jspan_t tools)
{
    it->buf = buf;
    tg_jarr_begin(&it->arr, buf, tools);
}

static const char *const tool_keys[1] = {"tool_id"};

int tg_os_tools_next(tg_os_tools_iter_t *it, tg_jspan_t *tool_id)
{
    tg_jspan_t el;
    int rc = tg_jarr_next(&it->arr, &el);
    if (rc <= 0)
        return rc;
    *tool_id = none;
    if (el.type != TG_J_OBJECT)
        return 1;
    keyset_t ks;
    keyset_init(&ks, tool_keys, 1);
    tg_jobj_iter_t oi;
    tg_jspan_t k, v;
    int orc;
    bool dup = false;
    tg_jobj_begin(&oi, it->buf, el);
    while ((orc = tg_jobj_next(&oi, &k, &v)) == 1) {
        if (keyset_member(&ks, it->buf, k, v) < 0)
            dup = true;
    }
    if (orc < 0)
        return -1;
    if (!dup && ks.slot[0].seen && ks.slot[0].val.type == TG_J_STRING)
        *tool_id = ks.slot[0].val;
    return 1;
}

/* ---- secrets ---- */

bool tg_ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    const unsigned char *x = a, *y = b;
    /* Branches depend on the lengths and the index only; the accumulator
     * is volatile so the compiler cannot stop at the first difference. */
    volatile unsigned char d = alen != blen;
    for (size_t i = 0; i < blen; i++) {
        unsigned char xi = i < alen ? x[i] : 0;
        d |= (unsigned char)(xi ^ y[i]);
    }
    return d == 0;
}

bool tg_os_token_ok(const char *buf, tg_jspan_t tok, const char *want, size_t want_len)
{
    char got[TG_OS_TOKEN_MAX + 1];
    if (tok.type != TG_J_STRING)
        return false;
    long n = tg_jstr_decode(buf, tok, got, sizeof got);
    bool ok = n >= 0 && tg_ct_equal(got, (size_t)n, want, want_len);
    explicit_bzero(got, sizeof got);
    return ok;
}
