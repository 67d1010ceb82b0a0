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

/* The members of one object level that toolgate reads, by key index.
 * <seen> marks a key met, null included, so that a duplicate is caught;
 * a value is defined only where its bit is set (nothing else is cleared:
 * this runs twice per call). */
typedef struct members {
    uint32_t seen;
    tg_jspan_t val[16];
} members_t;

static inline int take_once(members_t *m, int i, tg_jspan_t v)
{
    uint32_t bit = 1u << i;
    if (m->seen & bit)
        return -1;
    m->seen |= bit;
    m->val[i] = v;
    return 0;
}

/* Member <i>'s value into <out> when it has type <t>; <out> is left as it
 * is (TG_J_NONE: the env starts zeroed, locals are set so) when the
 * member is missing or (optional) null; -1 for any other type. */
static inline int typed(const members_t *m, int i, tg_jtype_t t, bool required, tg_jspan_t *out)
{
    if (!(m->seen >> i & 1) || m->val[i].type == TG_J_NULL)
        return required ? -1 : 0;
    if (m->val[i].type != t)
        return -1;
    *out = m->val[i];
    return 0;
}

/* ---- the keys toolgate reads ----
 * Compared raw by length, then memcmp of a known size (inlined), as the
 * MCP scanner does; only an escaped key (rare) is decoded and compared
 * name by name. */

#define RAW_IS(s, lit) (memcmp((s), (lit), sizeof(lit) - 1) == 0)

/* The index of the escaped key span <k> among the <n> <names>, or <n>. */
static __attribute__((noinline)) int key_decoded(const char *buf, tg_jspan_t k,
                                                 const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        if (tg_jstr_eq(buf, k, names[i]))
            return i;
    }
    return n;
}

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
    K__TOP /* also: a key toolgate does not read */
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

static inline int top_key(const char *buf, tg_jspan_t k)
{
    if (k.escaped)
        return key_decoded(buf, k, top_keys, K__TOP);
    const char *s = buf + k.off + 1;
    switch (k.len - 2) {
    case 1:
        return s[0] == 'v' ? K_V : K__TOP;
    case 2:
        return RAW_IS(s, "id") ? K_ID : RAW_IS(s, "ts") ? K_TS : K__TOP;
    case 4:
        return RAW_IS(s, "type") ? K_TYPE : K__TOP;
    case 5:
        return RAW_IS(s, "error") ? K_ERROR : K__TOP;
    case 7:
        return RAW_IS(s, "payload") ? K_PAYLOAD : K__TOP;
    case 10:
        return RAW_IS(s, "request_id") ? K_REQUEST_ID : K__TOP;
    case 11:
        return RAW_IS(s, "in_reply_to") ? K_IN_REPLY_TO : K__TOP;
    case 12:
        return RAW_IS(s, "causation_id") ? K_CAUSATION_ID : K__TOP;
    case 14:
        return RAW_IS(s, "correlation_id") ? K_CORRELATION_ID : K__TOP;
    default:
        return K__TOP;
    }
}

/* Payload keys, every type's in one set; which of them a type reads is
 * type_reads(). */
enum {
    P_CALL_ID,
    P_TOOL_ID,
    P_INPUT,
    P_TIMEOUT,
    P_IDEM,
    P_STATUS,
    P_REASON,
    P_TOOLS,
    P_TOKEN,
    P_AGENT,
    P_PROTOCOL,
    P__N /* also: a key toolgate does not read */
};

static const char *const pay_keys[P__N] = {
    [P_CALL_ID] = "call_id",    [P_TOOL_ID] = "tool_id",      [P_INPUT] = "input",
    [P_TIMEOUT] = "timeout_ms", [P_IDEM] = "idempotency_key", [P_STATUS] = "status",
    [P_REASON] = "reason",      [P_TOOLS] = "tools",          [P_TOKEN] = "session_token",
    [P_AGENT] = "agent_id",     [P_PROTOCOL] = "protocol",
};

static inline int pay_key(const char *buf, tg_jspan_t k)
{
    if (k.escaped)
        return key_decoded(buf, k, pay_keys, P__N);
    const char *s = buf + k.off + 1;
    switch (k.len - 2) {
    case 5:
        return RAW_IS(s, "input") ? P_INPUT : RAW_IS(s, "tools") ? P_TOOLS : P__N;
    case 6:
        return RAW_IS(s, "status") ? P_STATUS : RAW_IS(s, "reason") ? P_REASON : P__N;
    case 7:
        return RAW_IS(s, "call_id") ? P_CALL_ID : RAW_IS(s, "tool_id") ? P_TOOL_ID : P__N;
    case 8:
        return RAW_IS(s, "agent_id") ? P_AGENT : RAW_IS(s, "protocol") ? P_PROTOCOL : P__N;
    case 10:
        return RAW_IS(s, "timeout_ms") ? P_TIMEOUT : P__N;
    case 13:
        return RAW_IS(s, "session_token") ? P_TOKEN : P__N;
    case 15:
        return RAW_IS(s, "idempotency_key") ? P_IDEM : P__N;
    default:
        return P__N;
    }
}

#define BIT(i) (1u << (i))

/* The payload members type <t> reads (bit i: key i); 0 for a type whose
 * payload toolgate does not read. */
static inline uint32_t type_reads(tg_os_type_t t)
{
    switch (t) {
    case TG_OS_AGENT_HELLO:
        return BIT(P_TOKEN) | BIT(P_AGENT) | BIT(P_PROTOCOL);
    case TG_OS_AGENT_TOOLS_REGISTER:
        return BIT(P_TOOLS);
    case TG_OS_CORE_TOOL_CALL:
        return BIT(P_CALL_ID) | BIT(P_TOOL_ID) | BIT(P_INPUT) | BIT(P_TIMEOUT) | BIT(P_IDEM);
    case TG_OS_AGENT_TOOL_STREAM:
        return BIT(P_CALL_ID);
    case TG_OS_AGENT_TOOL_RESULT:
        return BIT(P_CALL_ID) | BIT(P_STATUS);
    case TG_OS_CORE_TOOL_CANCEL:
        return BIT(P_CALL_ID) | BIT(P_REASON);
    case TG_OS_AGENT_HEARTBEAT:
    case TG_OS_OTHER:
        break;
    }
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

/* The type the string span <s> names (decoded), TG_OS_OTHER for any
 * other. */
static inline tg_os_type_t type_of(const char *buf, tg_jspan_t s)
{
    if (s.escaped) {
        for (size_t i = 0; i < sizeof type_tab / sizeof type_tab[0]; i++) {
            if (tg_jstr_eq(buf, s, type_tab[i].name))
                return type_tab[i].type;
        }
        return TG_OS_OTHER;
    }
    const char *p = buf + s.off + 1;
    switch (s.len - 2) {
    case 11:
        return RAW_IS(p, "agent.hello") ? TG_OS_AGENT_HELLO : TG_OS_OTHER;
    case 14:
        return RAW_IS(p, "core.tool.call") ? TG_OS_CORE_TOOL_CALL : TG_OS_OTHER;
    case 15:
        return RAW_IS(p, "agent.heartbeat") ? TG_OS_AGENT_HEARTBEAT : TG_OS_OTHER;
    case 16:
        return RAW_IS(p, "core.tool.cancel") ? TG_OS_CORE_TOOL_CANCEL : TG_OS_OTHER;
    case 17:
        return RAW_IS(p, "agent.tool.result")   ? TG_OS_AGENT_TOOL_RESULT
               : RAW_IS(p, "agent.tool.stream") ? TG_OS_AGENT_TOOL_STREAM
                                                : TG_OS_OTHER;
    case 20:
        return RAW_IS(p, "agent.tools.register") ? TG_OS_AGENT_TOOLS_REGISTER : TG_OS_OTHER;
    default:
        return TG_OS_OTHER;
    }
}

/* ---- payloads ---- */

/* Record the members in <want> of the object <it> iterates (begun on the
 * payload span, or entered in place while the top level is walked) into
 * <m>; everything else is skipped once. 0 at the closing brace, -1 when
 * malformed or a key in <want> is repeated. */
static inline int payload_members(tg_jobj_iter_t *it, const char *buf, uint32_t want, members_t *m)
{
    tg_jspan_t k, v;
    int rc;
    while ((rc = tg_jobj_key(it, &k)) == 1) {
        int i = pay_key(buf, k);
        if (i < P__N && (want >> i & 1)) {
            if (tg_jobj_value(it, &v) < 0 || take_once(m, i, v) < 0)
                return -1;
        } else if (tg_jobj_value(it, NULL) < 0) {
            return -1;
        }
    }
    return rc == 0 ? 0 : -1;
}

/* payload.protocol of agent.hello: its supported_versions, once. */
static int scan_protocol(const char *buf, tg_jspan_t proto, tg_os_env_t *env)
{
    tg_jobj_iter_t it;
    tg_jspan_t k, v, versions = none;
    int rc;
    tg_jobj_begin(&it, buf, proto);
    while ((rc = tg_jobj_next(&it, &k, &v)) == 1) {
        if (tg_jstr_eq(buf, k, "supported_versions")) {
            if (versions.type != TG_J_NONE)
                return -1;
            versions = v;
        }
    }
    if (rc < 0 || versions.type != TG_J_ARRAY)
        return -1;
    env->versions = versions;
    return 0;
}

/* The payload members of <env>'s type, read into <m>, by the rules. */
static int payload_apply(const char *buf, const members_t *m, tg_os_env_t *env)
{
    tg_jspan_t t = none;
    switch (env->type) {
    case TG_OS_AGENT_HELLO:
        if (typed(m, P_TOKEN, TG_J_STRING, true, &env->session_token) < 0 ||
            typed(m, P_AGENT, TG_J_STRING, true, &env->agent_id) < 0 ||
            typed(m, P_PROTOCOL, TG_J_OBJECT, true, &t) < 0)
            return -1;
        return scan_protocol(buf, t, env);
    case TG_OS_AGENT_TOOLS_REGISTER:
        return typed(m, P_TOOLS, TG_J_ARRAY, true, &env->tools);
    case TG_OS_CORE_TOOL_CALL:
        if (typed(m, P_CALL_ID, TG_J_STRING, true, &env->call_id) < 0 ||
            typed(m, P_TOOL_ID, TG_J_STRING, true, &env->tool_id) < 0 ||
            typed(m, P_INPUT, TG_J_OBJECT, true, &env->input) < 0 ||
            typed(m, P_IDEM, TG_J_STRING, false, &env->idempotency_key) < 0 ||
            typed(m, P_TIMEOUT, TG_J_NUMBER, false, &t) < 0)
            return -1;
        if (t.type == TG_J_NUMBER) {
            if (tg_jnum_u64(buf, t, UINT64_MAX, &env->timeout_ms) < 0)
                return -1;
            env->has_timeout = true;
        }
        if (m->seen & BIT(P_TIMEOUT))
            env->timeout_at = m->val[P_TIMEOUT];
        return 0;
    case TG_OS_AGENT_TOOL_STREAM:
        return typed(m, P_CALL_ID, TG_J_STRING, true, &env->call_id);
    case TG_OS_AGENT_TOOL_RESULT: {
        tg_jspan_t st = none;
        if (typed(m, P_CALL_ID, TG_J_STRING, true, &env->call_id) < 0 ||
            typed(m, P_STATUS, TG_J_STRING, true, &st) < 0)
            return -1;
        const char *p = buf + st.off + 1;
        size_t n = st.len - 2;
        if (st.escaped)
            env->status = tg_jstr_eq(buf, st, "succeeded")  ? TG_OS_ST_SUCCEEDED
                          : tg_jstr_eq(buf, st, "failed")   ? TG_OS_ST_FAILED
                          : tg_jstr_eq(buf, st, "canceled") ? TG_OS_ST_CANCELED
                                                            : TG_OS_ST_NONE;
        else if (n == 9 && RAW_IS(p, "succeede") && p[8] == 'd') /* 8 + 1: memcmp inline */
            env->status = TG_OS_ST_SUCCEEDED;
        else if (n == 6 && RAW_IS(p, "failed"))
            env->status = TG_OS_ST_FAILED;
        else if (n == 8 && RAW_IS(p, "canceled"))
            env->status = TG_OS_ST_CANCELED;
        return env->status == TG_OS_ST_NONE ? -1 : 0;
    }
    case TG_OS_CORE_TOOL_CANCEL:
        if (typed(m, P_CALL_ID, TG_J_STRING, true, &env->call_id) < 0 ||
            typed(m, P_REASON, TG_J_STRING, false, &env->reason) < 0)
            return -1;
        return 0;
    case TG_OS_AGENT_HEARTBEAT:
    case TG_OS_OTHER:
        break;
    }
    return 0;
}

/* ---- top level ---- */

/* One pass, flattened as the MCP scanner is (the jscan steps inline, the
 * iterators live in registers): every frame both ways comes through here.
 * When the type comes before the payload (the usual order), the payload's
 * members are read in place while the top level is walked, so the input
 * or output is skipped once; otherwise the payload is iterated from its
 * span afterwards. */
__attribute__((flatten)) static int scan_bytes(const char *buf, size_t len, tg_os_env_t *env)
{
    tg_jobj_iter_t it;
    if (tg_jobj_begin_partial(&it, buf, len, 0) < 0)
        return -1;
    members_t top, pay;
    top.seen = 0;
    pay.seen = 0;
    tg_os_type_t type = TG_OS_OTHER; /* of the "type" met so far */
    bool pay_read = false;
    tg_jspan_t k, v;
    int rc;
    while ((rc = tg_jobj_key(&it, &k)) == 1) {
        int i = top_key(buf, k);
        uint32_t want;
        if (i == K_PAYLOAD && !(top.seen & BIT(K_PAYLOAD)) && (top.seen & BIT(K_TYPE)) &&
            (want = type_reads(type)) != 0) {
            tg_jobj_iter_t pit;
            int er = tg_jobj_enter(&it, &pit);
            if (er < 0)
                return -1;
            if (er == 1) {
                if (payload_members(&pit, buf, want, &pay) < 0 || tg_jobj_leave(&it, &pit, &v) < 0)
                    return -1;
                (void)take_once(&top, K_PAYLOAD, v);
                pay_read = true;
                continue;
            }
        }
        if (tg_jobj_value(&it, &v) < 0)
            return -1;
        if (i < K__TOP) {
            if (take_once(&top, i, v) < 0)
                return -1;
            if (i == K_TYPE && v.type == TG_J_STRING)
                type = type_of(buf, v);
        }
    }
    if (rc < 0 || !tg_json_blank_from(buf, len, it.pos))
        return -1;

    uint64_t ver;
    if (typed(&top, K_V, TG_J_NUMBER, true, &v) < 0 || tg_jnum_u64(buf, v, UINT64_MAX, &ver) < 0 ||
        ver != TG_OS_VERSION || typed(&top, K_TYPE, TG_J_STRING, true, &env->type_s) < 0 ||
        typed(&top, K_ID, TG_J_STRING, true, &env->id) < 0 ||
        typed(&top, K_TS, TG_J_STRING, true, &env->ts) < 0 ||
        typed(&top, K_PAYLOAD, TG_J_OBJECT, true, &env->payload) < 0 ||
        typed(&top, K_REQUEST_ID, TG_J_STRING, false, &env->request_id) < 0 ||
        typed(&top, K_CORRELATION_ID, TG_J_STRING, false, &env->correlation_id) < 0 ||
        typed(&top, K_CAUSATION_ID, TG_J_STRING, false, &env->causation_id) < 0 ||
        typed(&top, K_IN_REPLY_TO, TG_J_STRING, false, &env->in_reply_to) < 0 ||
        typed(&top, K_ERROR, TG_J_OBJECT, false, &env->error) < 0)
        return -1;
    if (top.seen & BIT(K_REQUEST_ID))
        env->request_id_at = top.val[K_REQUEST_ID];
    env->type = type;
    if (!pay_read) {
        uint32_t want = type_reads(type);
        if (want != 0) {
            tg_jobj_iter_t pit;
            tg_jobj_begin(&pit, buf, env->payload);
            if (payload_members(&pit, buf, want, &pay) < 0)
                return -1;
        }
    }
    return payload_apply(buf, &pay, env);
}

int tg_os_scan(const char *buf, size_t len, tg_os_env_t *env)
{
    memset(env, 0, sizeof(*env)); /* every span TG_J_NONE */
    if (scan_bytes(buf, len, env) < 0) {
        memset(env, 0, sizeof(*env));
        return -1;
    }
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

/* [A-Za-z0-9._:@-]: one load per byte (every call's tool_id goes
 * through here). */
static const unsigned char id_ok[256] = {
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
    ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
    ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1,
    ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1,
    ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['.'] = 1, ['_'] = 1,
    [':'] = 1, ['@'] = 1, ['-'] = 1,
};

static inline bool id_char(unsigned char c)
{
    return id_ok[c] != 0;
}

/* A part of a tool id may not be "." or ".." (nor empty). */
static inline bool part_ok(const char *s, size_t n)
{
    return n > 0 && !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

int tg_os_tool_id_split(const char *s, size_t len, size_t *agent_len)
{
    if (len == 0 || len > TG_OS_TOOL_ID_MAX)
        return -1;
    /* One pass: every byte of the class, and exactly one '/'. */
    size_t slash = len;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '/') {
            if (slash != len)
                return -1;
            slash = i;
        } else if (!id_char(c)) {
            return -1;
        }
    }
    if (slash == len || !part_ok(s, slash) || !part_ok(s + slash + 1, len - slash - 1))
        return -1;
    *agent_len = slash;
    return 0;
}

int tg_os_tool_id_parse(const char *buf, tg_jspan_t s, char *dst, size_t cap, size_t *len,
                        size_t *agent_len)
{
    if (s.type != TG_J_STRING || s.len < 2 || cap == 0)
        return -1;
    if (!s.escaped) {
        /* The usual case: the raw bytes are the id; checked, then copied
         * (no NUL can pass the class). */
        const char *p = buf + s.off + 1;
        size_t n = s.len - 2;
        if (n > cap - 1 || tg_os_tool_id_split(p, n, agent_len) < 0)
            return -1;
        memcpy(dst, p, n);
        dst[n] = '\0';
        *len = n;
        return 0;
    }
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

int tg_os_tools_next(tg_os_tools_iter_t *it, tg_jspan_t *tool_id)
{
    tg_jspan_t el;
    int rc = tg_jarr_next(&it->arr, &el);
    if (rc <= 0)
        return rc;
    *tool_id = none;
    if (el.type != TG_J_OBJECT)
        return 1;
    tg_jobj_iter_t oi;
    tg_jspan_t k, v, found = none;
    int orc, seen = 0;
    tg_jobj_begin(&oi, it->buf, el);
    while ((orc = tg_jobj_next(&oi, &k, &v)) == 1) {
        if (tg_jstr_eq(it->buf, k, "tool_id") && seen++ == 0)
            found = v;
    }
    if (orc < 0)
        return -1;
    if (seen == 1 && found.type == TG_J_STRING)
        *tool_id = found;
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
