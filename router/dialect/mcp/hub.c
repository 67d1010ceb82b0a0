/* Several MCP agents behind one front: see hub.h for the shape and the
 * routing table. */
#include "router/dialect/mcp/session_impl.h"

#include <sys/random.h>

#include "config/jsonw.h"

#define HUB_LISTS 4 /* tools, prompts, resources, templates: cont[][] */

static const char *const list_key[HUB_LISTS] = {"tools", "prompts", "resources",
                                                "resourceTemplates"};
static const char *const list_method[HUB_LISTS] = {"tools/list", "prompts/list",
                                                   "resources/list",
                                                   "resources/templates/list"};

static inline int list_of(mcp_hub_ask_kind_t k)
{
    return (int)k - (int)HUB_ASK_TOOLS; /* 0..3 for the list asks */
}

static const char *leg_agent(const mcp_hub_t *h, uint32_t i)
{
    return h->legs[i]->ag->r.acfg->id;
}

static const char *leg_prefix(const mcp_hub_t *h, uint32_t i, size_t *plen)
{
    const tg_agent_cfg_t *a = h->legs[i]->ag->r.acfg;
    const char *p = a->tool_prefix != NULL ? a->tool_prefix : a->id;
    *plen = strlen(p);
    return p;
}

/* The name leg <w>'s tool <tool> (its own) is exposed under, into <buf>
 * (<cap> bytes), for audit; NULL in a hub that keeps names verbatim, or
 * when the name cannot be exposed. */
const char *mcp_hub_exposed(const mcp_sess_t *w, const char *tool, char *buf, size_t cap)
{
    size_t plen, n;
    if (w->hub->verbatim || cap < TG_EXPOSE_NAME_MAX + 1)
        return NULL;
    const char *p = leg_prefix(w->hub, w->leg, &plen);
    if (tg_expose_name(p, plen, tool, strlen(tool), buf, &n) < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

/* The keyed hash of progress token <tok> (a string span of <frame>) that
 * leg <w> was given, decoded: 0 when it is none the hub made (too long). */
uint64_t mcp_hub_ptok(const mcp_sess_t *w, const char *frame, tg_jspan_t tok)
{
    char buf[TG_ID_MAX + 32];
    long n = tg_jstr_decode(frame, tok, buf, sizeof(buf));
    if (w->hub->nlegs < 2 || n <= 0)
        return 0;
    uint64_t v = tg_expose_siphash(w->hub->key, buf, (size_t)n);
    return v != 0 ? v : 1;
}

/* Whether leg <w> holds a live request it was given progress token
 * <tok> (<n> bytes, decoded) for. */
static bool leg_has_ptok(const mcp_sess_t *w, const char *tok, size_t n)
{
    uint64_t v = tg_expose_siphash(w->hub->key, tok, n);
    v = v != 0 ? v : 1;
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        const mcp_call_t *c = mcp_call_at(w->ag, i);
        if (c->w == w && c->ptok == v && (c->kind == K_CALL || c->kind == K_PASS) &&
            c->cc.state != TG_CALL_ZOMBIE)
            return true;
    }
    return false;
}

/* ---- output ---------------------------------------------------------------- */

static void hub_write(mcp_hub_t *h, const char *p, size_t len)
{
    if (!h->cout_dead)
        (void)tg_out_copy(&h->out, p, len);
}

static void hub_error(mcp_hub_t *h, const char *id, size_t id_len, int code, const char *msg)
{
    char buf[TG_DENIAL_MAX];
    long n = tg_rpc_error(buf, sizeof(buf), id, id_len, code, msg);
    if (n > 0)
        hub_write(h, buf, (size_t)n);
}

/* {"jsonrpc":"2.0","id":ID,"result":RESULT}\n, RESULT taken. */
static void hub_result(mcp_hub_t *h, const char *id, size_t id_len, json_t *result)
{
    char *r = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(result);
    if (r == NULL) {
        hub_error(h, id, id_len, -32603, "toolgate: out of memory merging the agents' answers");
        return;
    }
    size_t rl = strlen(r), cap = rl + id_len + 48;
    char *buf = malloc(cap);
    if (buf != NULL) {
        int n = snprintf(buf, cap, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":%s}\n", (int)id_len,
                         id, r);
        if (n > 0 && (size_t)n < cap)
            hub_write(h, buf, (size_t)n);
        free(buf);
    }
    free(r);
}

static void hub_notify(mcp_hub_t *h, const char *method)
{
    char buf[128];
    int n = snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}\n", method);
    hub_write(h, buf, (size_t)n);
}

/* Write what the legs a frame went to queued for their agents (their
 * hub_dirty, set by mcp_sess_dispatch). Called when the lead flushes
 * (mcp_flush_all), so a batch of the caller's frames is written to each
 * agent once, as a session without a hub writes it, rather than once
 * per frame. */
void mcp_hub_flush_legs(mcp_hub_t *h)
{
    if (h->ending)
        return;
    for (uint32_t i = 1; i < h->nlegs; i++) {
        mcp_sess_t *w = h->legs[i];
        if (w->hub_dirty) {
            w->hub_dirty = false;
            if (!w->finished)
                mcp_flush_agent(w);
        }
    }
}

/* Write what the hub and its legs queued (an ask answered). */
static void hub_flush(mcp_hub_t *h)
{
    if (h->ending)
        return;
    if (!h->legs[0]->finished) {
        mcp_flush_all(h->legs[0]);
    } else {
        mcp_hub_flush_legs(h);
        if (!h->cout_dead)
            (void)tg_out_flush(&h->out);
    }
}

/* ---- frames made by the hub -------------------------------------------------- */

/* Hand frame <b, frame, len> (newline included) to leg <w> as if its
 * caller sent it (scanned again: its spans moved). */
static void leg_take(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len)
{
    size_t slen = len - 1;
    if (slen > 0 && frame[slen - 1] == '\r')
        slen--;
    tg_mcp_env_t env;
    if (tg_mcp_scan(frame, slen, &env) < 0)
        return;
    mcp_sess_dispatch(w, b, frame, len, &env);
}

/* Span <s> of a frame whose bytes [at.off, at.off + at.len) became
 * <rlen> bytes: moved when after them, grown or shrunk when around them. */
static void span_moved(tg_jspan_t *s, tg_jspan_t at, size_t rlen)
{
    if (s->type == TG_J_NONE)
        return;
    if (s->off >= at.off + at.len)
        s->off = s->off + rlen - at.len;
    else if (s->off <= at.off && s->off + s->len >= at.off + at.len)
        s->len = s->len + rlen - at.len;
}

/* One replacement in a frame the hub hands on: the span <at> (a value
 * the envelope found) becomes the JSON text <rep> (<rlen> bytes). */
typedef struct hub_edit {
    tg_jspan_t at;
    const char *rep;
    size_t rlen;
} hub_edit_t;

/* Leg <w> takes <frame> (scanned into <env>) with the <n> (at most 2)
 * edits <ed> applied, in a block of its own: the envelope's spans are
 * moved rather than the frame scanned again. */
static void leg_take_edits(mcp_sess_t *w, const char *frame, size_t len,
                           const tg_mcp_env_t *env, hub_edit_t *ed, int n)
{
    if (n == 2 && ed[1].at.off < ed[0].at.off) {
        hub_edit_t t = ed[0];
        ed[0] = ed[1];
        ed[1] = t;
    }
    size_t nl = len;
    for (int k = 0; k < n; k++)
        nl = nl - ed[k].at.len + ed[k].rlen;
    tg_block_t *b = tg_block_get(&w->gw->pool, nl);
    if (b == NULL)
        return;
    size_t at = 0, o = 0;
    for (int k = 0; k < n; k++) {
        memcpy(b->data + o, frame + at, ed[k].at.off - at);
        o += ed[k].at.off - at;
        memcpy(b->data + o, ed[k].rep, ed[k].rlen);
        o += ed[k].rlen;
        at = ed[k].at.off + ed[k].at.len;
    }
    memcpy(b->data + o, frame + at, len - at);
    tg_mcp_env_t e = *env;
    tg_jspan_t *spans[] = {&e.id,   &e.method,    &e.params,         &e.tool_name,
                           &e.progress_token, &e.task, &e.cancel_id, &e.notif_progress_token};
    for (int k = n - 1; k >= 0; k--) { /* the last first: the earlier spans stay put */
        for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
            if (spans[i]->off == ed[k].at.off && spans[i]->len == ed[k].at.len &&
                spans[i]->type != TG_J_NONE) {
                spans[i]->len = ed[k].rlen; /* the replaced value itself */
                if (spans[i]->type == TG_J_STRING || spans[i]->type == TG_J_NUMBER)
                    spans[i]->type = ed[k].rep[0] == '"' ? TG_J_STRING : TG_J_NUMBER;
                spans[i]->escaped = memchr(ed[k].rep, '\\', ed[k].rlen) != NULL;
            } else {
                span_moved(spans[i], ed[k].at, ed[k].rlen);
            }
        }
    }
    mcp_sess_dispatch(w, b, b->data, nl, &e);
    tg_block_unref(&w->gw->pool, b);
}

/* Whether <s> (<n> bytes) is its own JSON string text: nothing to escape. */
static bool plain(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && (unsigned char)s[k] >= 0x20 && (unsigned char)s[k] < 0x80 && s[k] != '"' &&
           s[k] != '\\')
        k++;
    return k == n;
}

/* A JSON string of <s> (<n> bytes), quoted, into <out> (<cap> bytes); its length
 * or 0 when it does not fit. */
static size_t json_str(char *out, size_t cap, const char *s, size_t n)
{
    if (plain(s, n) && n + 2 < cap) { /* nothing to escape: the common case, per call */
        out[0] = '"';
        memcpy(out + 1, s, n);
        out[n + 1] = '"';
        return n + 2;
    }
    tg_jw_t jw;
    tg_jw_init(&jw, out, cap);
    tg_jw_raw(&jw, "\"", 1);
    tg_jw_esc(&jw, s, n);
    tg_jw_raw(&jw, "\"", 1);
    long r = tg_jw_end(&jw);
    return r > 0 ? (size_t)r : 0;
}

/* ---- legs ------------------------------------------------------------------ */

/* A value the hub made unique per leg, "tg<leg>.<raw JSON>" (agent request
 * ids, progress tokens), in <buf> (<n> bytes, decoded): the offset of
 * <raw> with the leg in <*leg>, or 0 when it is not one, names no leg of
 * <h>, or <raw> is not one JSON string or number (so nothing malformed
 * is ever written on). */
static size_t unique_raw(const mcp_hub_t *h, char *buf, size_t n, uint32_t *leg)
{
    unsigned l = 0;
    int used = 0;
    if (n <= 3 || memcmp(buf, "tg", 2) != 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "tg%u.%n", &l, &used) < 1 || used == 0 || l >= h->nlegs)
        return 0;
    tg_jspan_t v;
    long end = tg_jscan_value(buf, n, (size_t)used, &v);
    if (end != (long)n || v.off != (size_t)used || (v.type != TG_J_STRING && v.type != TG_J_NUMBER))
        return 0;
    *leg = l;
    return (size_t)used;
}

/* "tg<leg>.<raw>" as a JSON string into <out> (<cap> bytes): its length,
 * or 0 when it does not fit. */
static size_t unique_make(uint32_t leg, const char *raw, size_t rlen, char *out, size_t cap)
{
    char t[TG_ID_MAX + 32];
    if (rlen > TG_ID_MAX)
        return 0;
    int k = snprintf(t, sizeof(t), "tg%u.", leg);
    memcpy(t + k, raw, rlen);
    return json_str(out, cap, t, (size_t)k + rlen);
}

/* Hand the caller's request <frame> (scanned into <env>) to leg <leg>,
 * with <name> (or none) applied and, behind several agents, its progress
 * token made unique: "tg<leg>.<raw>", so that an agent's progress can be
 * told from another's and is passed back only for its own calls
 * (mcp_hub_from_agent). */
static void leg_route(mcp_hub_t *h, uint32_t leg, tg_block_t *b, const char *frame, size_t len,
                      const tg_mcp_env_t *env, const hub_edit_t *name)
{
    hub_edit_t ed[2];
    int n = 0;
    char tok[2 * (TG_ID_MAX + 32) + 8];
    if (name != NULL)
        ed[n++] = *name;
    if (h->nlegs > 1 && env->progress_token.type != TG_J_NONE) {
        size_t tl = unique_make(leg, frame + env->progress_token.off, env->progress_token.len,
                                tok, sizeof(tok));
        if (tl > 0)
            ed[n++] = (hub_edit_t){env->progress_token, tok, tl};
    }
    if (n == 0)
        mcp_sess_dispatch(h->legs[leg], b, frame, len, env);
    else
        leg_take_edits(h->legs[leg], frame, len, env, ed, n);
}

static bool leg_up(const mcp_sess_t *w)
{
    return w->phase == TG_P_RUN && !w->leg_failed &&
           (w->awaiting_init || w->astate == TG_AGENT_RUNNING) && w->npass < TG_MAX_PASSTHRU;
}

/* The leg holding caller request <id>, or -1. */
static int leg_holding(const mcp_hub_t *h, const char *id, size_t len)
{
    for (uint32_t i = 0; i < h->nlegs; i++)
        if (mcp_sess_holds(h->legs[i], id, len))
            return (int)i;
    return -1;
}

/* ---- asks: requests the hub answers itself ------------------------------------ */

static mcp_hub_ask_t *ask_new(mcp_hub_t *h, mcp_hub_ask_kind_t kind, const char *id, size_t id_len)
{
    if (id_len > sizeof(h->asks[0].id))
        return NULL;
    for (size_t i = 0; i < MCP_HUB_ASKS; i++) {
        mcp_hub_ask_t *a = &h->asks[i];
        if (a->kind != HUB_ASK_FREE)
            continue;
        memset(a, 0, sizeof(*a));
        if ((a->got = calloc(h->nlegs, sizeof(*a->got))) == NULL)
            return NULL;
        a->ngot = h->nlegs;
        a->kind = kind;
        a->page_leg = -1;
        memcpy(a->id, id, id_len);
        a->id_len = id_len;
        return a;
    }
    return NULL;
}

static void ask_free(mcp_hub_ask_t *a)
{
    for (size_t i = 0; i < a->ngot; i++)
        json_decref(a->got[i]);
    free(a->got);
    memset(a, 0, sizeof(*a));
}

static void ask_done(mcp_hub_t *h, mcp_hub_ask_t *a);

/* Send <frame> to leg <i> for ask <a>: the answer comes to mcp_hub_answer.
 * A leg that cannot take it counts as answered (failed). */
static void ask_leg(mcp_hub_t *h, mcp_hub_ask_t *a, uint32_t i, tg_block_t *b, const char *frame,
                    size_t len)
{
    mcp_sess_t *w = h->legs[i];
    a->waiting++;
    if (leg_up(w)) {
        w->hub_tag = (uint16_t)(a - h->asks + 1);
        leg_take(w, b, frame, len);
        bool taken = w->hub_tag == 0;
        w->hub_tag = 0;
        if (taken)
            return;
    }
    a->waiting--;
}

static void ask_all(mcp_hub_t *h, mcp_hub_ask_t *a, tg_block_t *b, const char *frame, size_t len)
{
    a->waiting++; /* held until every leg was asked */
    for (uint32_t i = 0; i < h->nlegs; i++)
        ask_leg(h, a, i, b, frame, len);
    if (--a->waiting == 0)
        ask_done(h, a);
}

/* Leg <w> answered ask <idx> with <frame> (NULL: it failed, or its
 * instance went away before answering). */
void mcp_hub_answer(mcp_sess_t *w, uint32_t idx, const char *frame, size_t len,
                    const tg_mcp_env_t *env)
{
    mcp_hub_t *h = w->hub;
    if (idx >= MCP_HUB_ASKS || h->asks[idx].kind == HUB_ASK_FREE)
        return;
    mcp_hub_ask_t *a = &h->asks[idx];
    if (frame != NULL && env->has_result &&
        a->bytes + len > 2 * (uint64_t)w->gw->cfg->max_frame_bytes) {
        a->cut = true; /* the merged answer would grow past its bound */
        tg_log_warn("agent '%s': its list answer (%zu bytes) is left out of a merged list "
                    "already holding %" PRIu64 " bytes (2 x max_frame_bytes)",
                    agent_name(w), len, a->bytes);
    } else if (frame != NULL && env->has_result) {
        a->bytes += len;
        json_t *root = json_loadb(frame, len, 0, NULL);
        json_t *r = json_object_get(root, "result");
        if (json_is_object(r) && a->got[w->leg] == NULL)
            a->got[w->leg] = json_incref(r);
        json_decref(root);
    }
    if (a->waiting > 0 && --a->waiting == 0)
        ask_done(h, a);
}

/* ---- initialize ------------------------------------------------------------ */

/* Capabilities: the union of the legs' (objects merged member by member,
 * a flag true when any leg's is). */
static void caps_merge(json_t *into, json_t *from)
{
    const char *k;
    json_t *v;
    json_object_foreach(from, k, v) {
        json_t *have = json_object_get(into, k);
        if (have == NULL)
            json_object_set(into, k, v);
        else if (json_is_object(have) && json_is_object(v))
            caps_merge(have, v);
        else if (json_is_boolean(have) && json_is_true(v))
            json_object_set_new(into, k, json_true());
    }
}

static void init_done(mcp_hub_t *h, mcp_hub_ask_t *a)
{
    if (h->nlegs == 1 && a->got[0] != NULL) {
        /* One agent: its own answer, as without a hub. */
        h->initialized = true;
        hub_result(h, a->id, a->id_len, json_incref(a->got[0]));
        return;
    }
    json_t *res = json_object(), *caps = json_object(), *down = json_array();
    const char *version = NULL;
    char *instr = NULL;
    size_t ilen = 0;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        json_t *g = a->got[i];
        if (g == NULL) {
            json_array_append_new(down, json_string(leg_agent(h, i)));
            continue;
        }
        if (version == NULL)
            version = json_string_value(json_object_get(g, "protocolVersion"));
        json_t *c = json_object_get(g, "capabilities");
        if (json_object_get(c, "resources") != NULL)
            h->caps[i] |= HUB_CAP_RESOURCES;
        if (json_is_object(c))
            caps_merge(caps, c);
        const char *in = json_string_value(json_object_get(g, "instructions"));
        if (in != NULL) {
            size_t need = ilen + strlen(in) + strlen(leg_agent(h, i)) + 8;
            char *n = realloc(instr, need + 1);
            if (n != NULL) {
                instr = n;
                ilen += (size_t)snprintf(instr + ilen, need + 1 - ilen, "%s## %s\n%s",
                                         ilen ? "\n\n" : "", leg_agent(h, i), in);
            }
        }
    }
    if (version == NULL) {
        json_decref(res);
        json_decref(caps);
        json_decref(down);
        free(instr);
        tg_denial_t d;
        tg_adm_denial_init(&d, TG_DENY_UNAVAILABLE, leg_agent(h, 0), NULL, 0, NULL);
        d.limit = "agent";
        d.detail = "no agent behind this endpoint could start";
        char buf[TG_DENIAL_MAX];
        long n = tg_denial_mcp(buf, sizeof(buf), a->id, a->id_len, &d);
        if (n > 0)
            hub_write(h, buf, (size_t)n);
        return;
    }
    json_object_set_new(res, "protocolVersion", json_string(version));
    json_object_set_new(res, "capabilities", caps);
    json_object_set_new(res, "serverInfo",
                        json_pack("{s:s,s:s}", "name", "toolgate", "version", TG_VERSION));
    if (instr != NULL)
        json_object_set_new(res, "instructions", json_string(instr));
    free(instr);
    if (json_array_size(down) > 0)
        json_object_set_new(res, "_meta", json_pack("{s:o}", "io.toolgate/unavailable", down));
    else
        json_decref(down);
    h->initialized = true;
    hub_result(h, a->id, a->id_len, res);
}

/* ---- the lists ------------------------------------------------------------- */

/* Leg <leg>'s <what> <own> (exposed as <name>) is hidden: <owner> keeps
 * the name. */
static void collision(mcp_hub_t *h, uint32_t leg, uint32_t owner, const char *what,
                      const char *own, const char *name)
{
    h->collisions++;
    tg_log_warn("agents '%s' and '%s' both expose %s '%s': '%s' (first in config order) keeps it, "
                "'%s''s is hidden",
                leg_agent(h, owner), leg_agent(h, leg), what, name, leg_agent(h, owner),
                leg_agent(h, leg));
    tg_audit_ev_t ev;
    tg_audit_ev_init(&ev);
    ev.event = "agent.name_collision";
    ev.agent = leg_agent(h, leg);
    ev.reason = "name_collision";
    ev.tool = own;
    ev.exposed_tool = name;
    ev.status = "hidden";
    emit(h->legs[leg], &ev);
    tg_gw_t *gw = h->legs[leg]->gw;
    size_t idx = h->legs[leg]->ag->r.idx;
    if (gw->metrics_ok) {
        gw->metrics.name_collisions++;
        if (idx < gw->metrics.nagents)
            gw->metrics.agents[idx].hidden_names++;
    }
}

/* The policy's family of a list kind. */
static tg_policy_method_t family_of(int list)
{
    return list == 0 ? TG_POLICY_M_TOOLS : list == 1 ? TG_POLICY_M_PROMPTS : TG_POLICY_M_RESOURCES;
}

/* Leg <i>'s items of list <list> into the tables and, when the policy lets
 * this caller see them, into <out> (named as exposed). */
static void list_leg(mcp_hub_t *h, int list, uint32_t i, json_t *items, json_t *out)
{
    size_t plen;
    const char *prefix = leg_prefix(h, i, &plen);
    size_t k;
    json_t *it;
    json_array_foreach(items, k, it) {
        bool named = list < 2;
        const char *key = json_string_value(json_object_get(it, named ? "name"
                                                           : list == 2 ? "uri"
                                                                       : "uriTemplate"));
        if (key == NULL)
            continue;
        size_t klen = strlen(key);
        tg_expose_added_t ad;
        uint32_t other = 0;
        if (h->verbatim) {
            if (tg_policy_listed(h->e->policy, &h->who, leg_agent(h, i), key, family_of(list)))
                json_array_append(out, it);
            continue;
        }
        int rc = named ? tg_expose_add(&h->names[list], i, prefix, plen, key, klen, &ad)
                       : tg_expose_uri_add(&h->uris, i, key, klen, list == 3, &other);
        if (named)
            other = ad.other;
        if (rc == TG_EXPOSE_HIDDEN) {
            collision(h, i, other, named ? (list ? "prompt" : "tool") : "resource", key,
                      named ? ad.name : key);
            continue;
        }
        if (rc < 0 || !tg_policy_listed(h->e->policy, &h->who, leg_agent(h, i), key, family_of(list)))
            continue;
        json_t *copy = json_deep_copy(it);
        if (named)
            json_object_set_new(copy, "name", json_string(ad.name));
        json_array_append_new(out, copy);
    }
}

/* A merged answer's _meta: the agents that are down (<down>, taken) and
 * whether an answer was left out (<cut>); none when neither. */
static void merged_meta(json_t *res, json_t *down, bool cut)
{
    json_t *meta = json_object();
    if (json_array_size(down) > 0)
        json_object_set(meta, "io.toolgate/unavailable", down);
    json_decref(down);
    if (cut)
        json_object_set_new(meta, "io.toolgate/truncated", json_true());
    if (json_object_size(meta) > 0)
        json_object_set_new(res, "_meta", meta);
    else
        json_decref(meta);
}

static void list_done(mcp_hub_t *h, mcp_hub_ask_t *a)
{
    int list = list_of(a->kind);
    json_t *items = json_array(), *down = json_array();
    char next[TG_EXPOSE_CURSOR_MAX + 1];
    size_t next_len = 0;
    uint32_t from = a->page_leg >= 0 ? (uint32_t)a->page_leg : 0;
    for (uint32_t i = from; i < h->nlegs; i++) {
        json_t *g = a->got[i];
        if (a->page_leg >= 0 && (int32_t)i != a->page_leg)
            break;
        if (a->page_leg < 0) {
            /* A first page: the leg's list starts again. */
            if (list < 2)
                tg_expose_remove_agent(&h->names[list], i);
            free(h->cont[i][list]);
            h->cont[i][list] = NULL;
        }
        if (g == NULL) {
            if (a->page_leg < 0 && !h->legs[i]->leg_failed && h->legs[i]->phase == TG_P_RUN &&
                h->legs[i]->astate == TG_AGENT_RUNNING)
                continue; /* it answered an error: it lists nothing of this kind */
            json_array_append_new(down, json_string(leg_agent(h, i)));
            continue;
        }
        list_leg(h, list, i, json_object_get(g, list_key[list]), items);
        const char *nc = json_string_value(json_object_get(g, "nextCursor"));
        if (nc != NULL && strlen(nc) <= TG_EXPOSE_CURSOR_INNER_MAX)
            h->cont[i][list] = strdup(nc);
    }
    /* The next page: the first leg (from this one on) with more. */
    for (uint32_t i = from; i < h->nlegs && next_len == 0; i++) {
        if (h->cont[i][list] == NULL)
            continue;
        tg_expose_cursor_t c = {.list = (uint8_t)list, .agent = i, .gen = h->gen, .has_inner = true};
        c.inner_len = strlen(h->cont[i][list]);
        memcpy(c.inner, h->cont[i][list], c.inner_len);
        if (tg_expose_cursor_encode(h->key, &c, next, sizeof(next), &next_len) < 0)
            next_len = 0;
    }
    json_t *res = json_object();
    json_object_set_new(res, list_key[list], items);
    if (next_len > 0)
        json_object_set_new(res, "nextCursor", json_stringn(next, next_len));
    merged_meta(res, down, a->cut);
    hub_result(h, a->id, a->id_len, res);
}

/* tasks/list: every leg's tasks in config order, in one list. */
static void tasks_done(mcp_hub_t *h, mcp_hub_ask_t *a)
{
    json_t *tasks = json_array(), *down = json_array();
    bool cut = a->cut;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        json_t *g = a->got[i];
        if (g == NULL) {
            if (h->legs[i]->leg_failed || h->legs[i]->astate != TG_AGENT_RUNNING)
                json_array_append_new(down, json_string(leg_agent(h, i)));
            continue;
        }
        json_array_extend(tasks, json_object_get(g, "tasks"));
        if (json_object_get(g, "nextCursor") != NULL)
            cut = true;
    }
    json_t *res = json_pack("{s:o}", "tasks", tasks);
    merged_meta(res, down, cut);
    hub_result(h, a->id, a->id_len, res);
}

/* tasks/get, tasks/result, tasks/cancel behind several agents: to the one
 * leg whose session knows the taskId (its session then checks the task
 * is this caller's, as without a hub). Task ids are the agents' own,
 * compared as the JSON text they wrote: two agents naming a task alike
 * cannot be told apart, and such a request is refused rather than sent to
 * either. */
static void task_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                         const tg_mcp_env_t *env)
{
    const char *id = frame + env->id.off;
    tg_mcp_task_t t;
    if (tg_mcp_task_read(frame, env->params, &t) < 0 || t.id.type != TG_J_STRING) {
        hub_error(h, id, env->id.len, -32602, "invalid params: a taskId string is required");
        return;
    }
    int leg = -1, n = 0;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        if (mcp_task_known(h->legs[i], frame + t.id.off, t.id.len)) {
            leg = (int)i;
            n++;
        }
    }
    if (n == 0) {
        hub_error(h, id, env->id.len, -32602, "invalid params: no task of this session has that taskId");
        return;
    }
    if (n > 1) {
        hub_error(h, id, env->id.len, -32602,
                  "invalid params: several agents behind this endpoint have a task with that "
                  "taskId; which one is meant cannot be told");
        return;
    }
    leg_route(h, (uint32_t)leg, b, frame, len, env, NULL);
}

static void ask_done(mcp_hub_t *h, mcp_hub_ask_t *a)
{
    if (a->kind == HUB_ASK_INIT)
        init_done(h, a);
    else if (a->kind == HUB_ASK_TASKS)
        tasks_done(h, a);
    else if (a->kind == HUB_ASK_ALL)
        hub_result(h, a->id, a->id_len, json_object());
    else
        list_done(h, a);
    ask_free(a);
    hub_flush(h);
}

/* A list request: every leg's first page, or (with our cursor) one leg's
 * next page. */
static void list_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                         const tg_mcp_env_t *env, int list)
{
    const char *id = frame + env->id.off;
    tg_jspan_t cur;
    bool has_cursor = tg_jscan_find_path(frame, len - 1, "params.cursor", &cur) == 0;
    tg_expose_cursor_t c;
    if (has_cursor) {
        char raw[TG_EXPOSE_CURSOR_MAX + 1];
        long n = cur.type == TG_J_STRING ? tg_jstr_decode(frame, cur, raw, sizeof(raw)) : -1;
        if (n < 0 || tg_expose_cursor_decode(h->key, raw, (size_t)n, &c) < 0 || c.list != list ||
            c.agent >= h->nlegs) {
            hub_error(h, id, env->id.len, -32602,
                      "invalid params: cursor is not one toolgate issued for this list");
            return;
        }
    }
    mcp_hub_ask_t *a = ask_new(h, (mcp_hub_ask_kind_t)(HUB_ASK_TOOLS + list), id, env->id.len);
    if (a == NULL) {
        hub_error(h, id, env->id.len, -32603, "toolgate: too many list requests at once");
        return;
    }
    if (!has_cursor) {
        ask_all(h, a, b, frame, len);
        return;
    }
    /* The leg's own page: {"jsonrpc":"2.0","id":ID,"method":M,"params":{"cursor":INNER}} */
    a->page_leg = (int32_t)c.agent;
    char inner[2 * TG_EXPOSE_CURSOR_INNER_MAX + 8];
    size_t il = json_str(inner, sizeof(inner), c.inner, c.inner_len);
    size_t cap = il + env->id.len + 128;
    tg_block_t *nb = malloc(sizeof(*nb) + cap);
    if (nb == NULL || il == 0) {
        free(nb);
        ask_free(a);
        hub_error(h, id, env->id.len, -32603, "toolgate: out of memory");
        return;
    }
    nb->refs = 1;
    nb->cap = cap;
    int n = snprintf(nb->data, cap,
                     "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"method\":\"%s\",\"params\":{\"cursor\":%.*s}}\n",
                     (int)env->id.len, id, list_method[list], (int)il, inner);
    a->waiting++;
    ask_leg(h, a, c.agent, nb, nb->data, (size_t)n);
    tg_block_unref(&h->legs[0]->gw->pool, nb);
    if (--a->waiting == 0)
        ask_done(h, a);
}

/* ---- calls ------------------------------------------------------------------ */

static void deny_not_allowed(mcp_hub_t *h, uint32_t leg, const char *id, size_t id_len,
                             const char *name, const tg_policy_decision_t *pd)
{
    tg_denial_t d;
    char detail[TG_POLICY_WHERE_MAX + 64];
    tg_adm_denial_init(&d, TG_DENY_NOT_ALLOWED, leg_agent(h, leg), name, strlen(name), NULL);
    d.limit = "policy";
    d.scope = "caller";
    d.config_path = pd->where;
    snprintf(detail, sizeof(detail), "denied by %s", pd->where);
    d.detail = detail;
    char buf[TG_DENIAL_MAX];
    long n = tg_denial_mcp(buf, sizeof(buf), id, id_len, &d);
    if (n > 0)
        hub_write(h, buf, (size_t)n);
    tg_audit_ev_t ev;
    denied_ev(h->legs[leg], &ev, &d);
    emit(h->legs[leg], &ev);
    if (h->legs[leg]->gw->metrics_ok) {
        tg_metrics_t *m = &h->legs[leg]->gw->metrics;
        tg_metrics_denial(m, TG_DENY_NOT_ALLOWED, (int)h->legs[leg]->ag->r.idx, name,
                          strlen(name), wall_now_ms());
        m->policy_denied[pd->rule >= 0 && pd->rule < TG_METRICS_POLICY_DEFAULT
                             ? (size_t)pd->rule
                             : TG_METRICS_POLICY_DEFAULT]++;
    }
}

/* A hub of one agent whose names stay its own (a front with one "agent"
 * and a policy): the policy asked, the frame handed on as it came. */
static void verbatim_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                             const tg_mcp_env_t *env, int list, tg_jspan_t name)
{
    char buf[TG_EXPOSE_ORIG_MAX + 1];
    long n = name.type == TG_J_STRING ? tg_jstr_decode(frame, name, buf, sizeof(buf)) : -1;
    if (n >= 0) {
        buf[n] = '\0';
        tg_policy_decision_t pd =
            tg_policy_decide(h->e->policy, &h->who, leg_agent(h, 0), buf, family_of(list));
        if (pd.effect == TG_POLICY_DENY) {
            deny_not_allowed(h, 0, frame + env->id.off, env->id.len, buf, &pd);
            return;
        }
    }
    mcp_sess_dispatch(h->legs[0], b, frame, len, env); /* a name too long to decide: the agent answers */
}

/* A name the tables do not hold (the caller has not listed since the
 * agent started, or kept the names of an earlier session): its prefix
 * names the agent, the rest is the agent's own name, when building the
 * exposed name back gives the same bytes (a shortened or escaped name
 * needs the table). true with <*leg> and <*orig> (into <name>). */
static bool by_prefix(const mcp_hub_t *h, const char *name, size_t n, uint32_t *leg,
                      const char **orig, size_t *olen)
{
    const char *sep = NULL;
    for (size_t k = 0; sep == NULL && k + 1 < n; k++)
        if (name[k] == '_' && name[k + 1] == '_')
            sep = name + k;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        size_t plen;
        const char *p = leg_prefix(h, i, &plen);
        const char *o = plen == 0 ? name : sep != NULL && (size_t)(sep - name) == plen &&
                                                   memcmp(name, p, plen) == 0
                                               ? sep + TG_EXPOSE_SEP_LEN
                                               : NULL;
        if (o == NULL || o == name + n)
            continue;
        char back[TG_EXPOSE_NAME_MAX + 1];
        size_t bl;
        if (tg_expose_name(p, plen, o, n - (size_t)(o - name), back, &bl) == 0 && bl == n &&
            memcmp(back, name, n) == 0) {
            *leg = i;
            *orig = o;
            *olen = n - (size_t)(o - name);
            return true;
        }
    }
    return false;
}

/* tools/call and prompts/get: the exposed name at <name> back to its
 * agent's own, the policy asked, the frame handed to that leg. */
static void named_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env, int list, tg_jspan_t name)
{
    const char *id = frame + env->id.off;
    if (h->verbatim) {
        verbatim_request(h, b, frame, len, env, list, name);
        return;
    }
    char buf[TG_EXPOSE_NAME_MAX + 1];
    long n = -1;
    const tg_expose_ent_t *e = h->memo_ent[list];
    bool memo = false;
    if (e != NULL && h->memo_mut[list] == h->names[list].tab.mut && e->agent < h->nlegs &&
        name.type == TG_J_STRING &&
        !name.escaped && e->key_len == name.len - 2 &&
        memcmp(e->key, frame + name.off + 1, e->key_len) == 0) {
        n = (long)e->key_len; /* the name resolved last, the table unchanged since */
        memo = true;
    } else {
        e = NULL;
        if (name.type == TG_J_STRING && !name.escaped && name.len - 2 < sizeof(buf)) {
            n = (long)name.len - 2; /* nothing to decode: the bytes between the quotes */
            memcpy(buf, frame + name.off + 1, (size_t)n);
        } else if (name.type == TG_J_STRING) {
            n = tg_jstr_decode(frame, name, buf, sizeof(buf) - 1);
        }
        e = n > 0 ? tg_expose_lookup(&h->names[list], buf, (size_t)n) : NULL;
        h->memo_ent[list] = e;
        h->memo_mut[list] = h->names[list].tab.mut;
    }
    uint32_t leg = 0;
    const char *orig = NULL;
    size_t olen = 0;
    if (e != NULL && e->agent < h->nlegs) {
        leg = e->agent;
        orig = e->val;
        olen = e->val_len;
    } else if (n > 0 && by_prefix(h, buf, (size_t)n, &leg, &orig, &olen)) {
        /* Kept, so that the next call finds it (a list rebuilds it). */
        size_t plen;
        const char *p = leg_prefix(h, leg, &plen);
        tg_expose_added_t ad;
        if (tg_expose_add(&h->names[list], leg, p, plen, orig, olen, &ad) == TG_EXPOSE_OWNED &&
            (e = tg_expose_lookup(&h->names[list], buf, (size_t)n)) != NULL) {
            orig = e->val;
            olen = e->val_len;
        }
    } else {
        hub_error(h, id, env->id.len, -32602,
                  list == 0 ? "invalid params: no agent behind this endpoint lists that tool "
                              "(send tools/list for the names)"
                            : "invalid params: no agent behind this endpoint lists that prompt "
                              "(send prompts/list for the names)");
        return;
    }
    char copy[TG_EXPOSE_ORIG_MAX + 1];
    const char *own = orig; /* a table entry's is NUL-terminated */
    if (e == NULL || orig != e->val) {
        memcpy(copy, orig, olen);
        copy[olen] = '\0';
        own = copy;
    }
    if (h->e->policy != NULL) {
        tg_policy_decision_t pd =
            tg_policy_decide(h->e->policy, &h->who, leg_agent(h, leg), own, family_of(list));
        if (pd.effect == TG_POLICY_DENY) {
            deny_not_allowed(h, leg, id, env->id.len, own, &pd);
            return;
        }
    }
    mcp_sess_t *w = h->legs[leg];
    if (e != NULL) { /* the exposed name, for the call's audit */
        w->hub_exposed = e->key;
        w->hub_exposed_len = e->key_len;
    }
    bool own_plain = memo ? h->memo_plain[list] : plain(own, olen);
    if (e != NULL && own == e->val)
        h->memo_plain[list] = own_plain; /* (the memo is e when it was looked up) */
    if (list == 0 && own_plain && olen <= TG_TOOL_NAME_MAX &&
        (h->nlegs == 1 || env->progress_token.type == TG_J_NONE)) {
        /* A tools/call: the leg holds the caller's frame as it came and
         * forwards it with the name spliced as it splices the id. */
        w->hub_own = own;
        w->hub_own_len = olen;
        mcp_sess_dispatch(w, b, frame, len, env);
    } else {
        char q[2 * TG_EXPOSE_ORIG_MAX + 8];
        size_t ql = json_str(q, sizeof(q), own, olen);
        hub_edit_t ed = {name, q, ql};
        if (ql > 0)
            leg_route(h, leg, b, frame, len, env, &ed);
    }
    w->hub_own = NULL;
    w->hub_exposed = NULL;
}

/* A URI no agent listed in this session (the caller did not list, or
 * took it from a tool's result): the one agent that offers resources at
 * all, or -1 when several do (which one cannot be told). */
static int resources_leg(const mcp_hub_t *h)
{
    int leg = -1;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        if (h->nlegs > 1 && !(h->caps[i] & HUB_CAP_RESOURCES))
            continue;
        if (leg >= 0)
            return -1;
        leg = (int)i;
    }
    return leg;
}

/* resources/read and (un)subscribe: the leg that listed the URI. */
static int uri_leg(mcp_hub_t *h, const char *frame, tg_jspan_t uri, char *buf, size_t cap)
{
    long n = uri.type == TG_J_STRING ? tg_jstr_decode(frame, uri, buf, cap) : -1;
    if (n <= 0)
        return -1;
    int leg = tg_expose_uri_route(&h->uris, buf, (size_t)n);
    return leg >= 0 && (uint32_t)leg < h->nlegs ? leg : resources_leg(h);
}

static void uri_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                        const tg_mcp_env_t *env, tg_jspan_t uri)
{
    const char *id = frame + env->id.off;
    char buf[TG_EXPOSE_URI_MAX + 1];
    int leg = uri_leg(h, frame, uri, buf, sizeof(buf));
    if (leg < 0) {
        hub_error(h, id, env->id.len, -32002,
                  "resource not found: no agent behind this endpoint lists that URI "
                  "(send resources/list or resources/templates/list)");
        return;
    }
    tg_policy_decision_t pd = tg_policy_decide(h->e->policy, &h->who, leg_agent(h, (uint32_t)leg),
                                               buf, TG_POLICY_M_RESOURCES);
    if (pd.effect == TG_POLICY_DENY) {
        deny_not_allowed(h, (uint32_t)leg, id, env->id.len, buf, &pd);
        return;
    }
    leg_route(h, (uint32_t)leg, b, frame, len, env, NULL);
}

/* completion/complete: by its ref, a prompt (exposed name) or a resource. */
static void complete_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                             const tg_mcp_env_t *env)
{
    tg_jspan_t s;
    if (tg_jscan_find_path(frame, len - 1, "params.ref.name", &s) == 0) {
        named_request(h, b, frame, len, env, 1, s);
        return;
    }
    if (tg_jscan_find_path(frame, len - 1, "params.ref.uri", &s) == 0) {
        char buf[TG_EXPOSE_URI_MAX + 1];
        long n = s.type == TG_J_STRING ? tg_jstr_decode(frame, s, buf, sizeof(buf)) : -1;
        int leg = n > 0 ? tg_expose_uri_owner(&h->uris, buf, (size_t)n, true) : -1;
        if (leg < 0)
            leg = n > 0 ? tg_expose_uri_route(&h->uris, buf, (size_t)n) : -1;
        if (leg < 0)
            leg = resources_leg(h);
        if (leg >= 0 && (uint32_t)leg < h->nlegs) {
            leg_route(h, (uint32_t)leg, b, frame, len, env, NULL);
            return;
        }
    }
    hub_error(h, frame + env->id.off, env->id.len, -32602,
              "invalid params: completion/complete names no prompt or resource an agent "
              "behind this endpoint lists");
}

/* ---- the caller's frames -------------------------------------------------------- */

/* The caller answers an agent's request: its id "tg<leg>.<raw>" back to
 * the raw id, to that leg alone. */
static void caller_answer(mcp_hub_t *h, const char *frame, size_t len, const tg_mcp_env_t *env)
{
    char buf[TG_ID_MAX + 32];
    long n = env->id.type == TG_J_STRING ? tg_jstr_decode(frame, env->id, buf, sizeof(buf) - 1) : -1;
    uint32_t leg = 0;
    size_t used = n > 0 ? unique_raw(h, buf, (size_t)n, &leg) : 0;
    if (used == 0) {
        h->legs[0]->unmatched_responses++;
        return;
    }
    hub_edit_t ed = {env->id, buf + used, (size_t)n - used};
    leg_take_edits(h->legs[leg], frame, len, env, &ed, 1);
}

static bool is(const char *frame, tg_jspan_t m, const char *lit)
{
    return m.len == strlen(lit) + 2 && tg_jstr_eq(frame, m, lit);
}

/* The caller's request <frame>, one ask of <kind> to every leg (the hub
 * answers once every leg did), or -32603 when MCP_HUB_ASKS are out. */
static void ask_every_leg(mcp_hub_t *h, mcp_hub_ask_kind_t kind, tg_block_t *b, const char *frame,
                          size_t len, const tg_mcp_env_t *env)
{
    const char *id = frame + env->id.off;
    mcp_hub_ask_t *a = ask_new(h, kind, id, env->id.len);
    if (a == NULL)
        hub_error(h, id, env->id.len, -32603, "toolgate: too many requests at once");
    else
        ask_all(h, a, b, frame, len);
}

static void hub_request(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                        const tg_mcp_env_t *env)
{
    const char *id = frame + env->id.off;
    tg_jspan_t m = env->method, s;
    if (env->id.len > TG_ID_MAX) {
        hub_error(h, NULL, 0, -32600, "invalid request: id longer than 128 bytes");
        return;
    }
    if (env->is_tools_call && h->init_seen) { /* first: the frame that comes most */
        named_request(h, b, frame, len, env, 0, env->tool_name);
        return;
    }
    if (is(frame, m, "ping")) {
        hub_result(h, id, env->id.len, json_object());
        return;
    }
    if (is(frame, m, "initialize")) {
        mcp_hub_ask_t *a = h->init_seen ? NULL : ask_new(h, HUB_ASK_INIT, id, env->id.len);
        if (a == NULL) {
            hub_error(h, id, env->id.len, -32600, "invalid request: already initialized");
            return;
        }
        h->init_seen = true;
        ask_all(h, a, b, frame, len);
        return;
    }
    if (!h->init_seen) {
        hub_error(h, id, env->id.len, -32600,
                  "invalid request: the session is not initialized (send initialize first)");
        return;
    }
    if (env->is_tools_call) {
        named_request(h, b, frame, len, env, 0, env->tool_name);
        return;
    }
    for (int l = 0; l < HUB_LISTS; l++) {
        if (is(frame, m, list_method[l])) {
            list_request(h, b, frame, len, env, l);
            return;
        }
    }
    if (is(frame, m, "prompts/get") && tg_jscan_find_path(frame, len - 1, "params.name", &s) == 0) {
        named_request(h, b, frame, len, env, 1, s);
        return;
    }
    if ((is(frame, m, "resources/read") || is(frame, m, "resources/subscribe") ||
         is(frame, m, "resources/unsubscribe")) &&
        tg_jscan_find_path(frame, len - 1, "params.uri", &s) == 0) {
        uri_request(h, b, frame, len, env, s);
        return;
    }
    if (is(frame, m, "completion/complete")) {
        complete_request(h, b, frame, len, env);
        return;
    }
    if (is(frame, m, "logging/setLevel")) {
        ask_every_leg(h, HUB_ASK_ALL, b, frame, len, env);
        return;
    }
    if (h->nlegs == 1) {
        mcp_sess_dispatch(h->legs[0], b, frame, len, env); /* one agent: whatever else it takes */
        return;
    }
    if (mcp_task_op_of(frame, m) != TG_TASK_OP_NONE) {
        task_request(h, b, frame, len, env);
        return;
    }
    if (is(frame, m, "tasks/list")) {
        ask_every_leg(h, HUB_ASK_TASKS, b, frame, len, env);
        return;
    }
    hub_error(h, id, env->id.len, -32601,
              "method not found: not routed through an endpoint of several agents");
}

void mcp_hub_frame(mcp_hub_t *h, tg_block_t *b, const char *frame, size_t len,
                   const tg_mcp_env_t *env)
{
    switch (env->kind) {
    case TG_MCP_REQUEST:
        hub_request(h, b, frame, len, env);
        break;
    case TG_MCP_RESPONSE:
        caller_answer(h, frame, len, env);
        break;
    case TG_MCP_NOTIFICATION:
        if (env->is_tools_call) {
            mcp_sess_dispatch(h->legs[0], b, frame, len, env); /* refused there */
        } else if (is(frame, env->method, "notifications/cancelled")) {
            int leg = env->cancel_id.type != TG_J_NONE
                          ? leg_holding(h, frame + env->cancel_id.off, env->cancel_id.len)
                          : -1;
            mcp_sess_dispatch(h->legs[leg < 0 ? 0 : leg], b, frame, len, env);
        } else {
            for (uint32_t i = 0; i < h->nlegs; i++)
                if (leg_up(h->legs[i]) && !h->legs[i]->awaiting_init)
                    mcp_sess_dispatch(h->legs[i], b, frame, len, env);
        }
        break;
    default:
        hub_error(h, NULL, 0, -32600,
                  "invalid request: batches are not taken by an endpoint of several agents; "
                  "send each request on its own line");
        break;
    }
    /* Written when the lead flushes, after the caller's batch. */
}

/* ---- the agents' frames --------------------------------------------------------- */

/* notifications/progress from leg <w> behind several agents: passed on,
 * its token back to the caller's own, only when it is one the hub made for
 * this leg (leg_route); an agent's progress for another agent's call, or
 * for a token it made up, is dropped and counted. Always true (taken). */
static bool progress_from(mcp_hub_t *h, mcp_sess_t *w, const char *frame, size_t len,
                          const tg_mcp_env_t *env)
{
    tg_jspan_t t = env->notif_progress_token;
    char buf[TG_ID_MAX + 32];
    long n = t.type == TG_J_STRING ? tg_jstr_decode(frame, t, buf, sizeof(buf) - 1) : -1;
    uint32_t leg = 0;
    size_t used = n > 0 ? unique_raw(h, buf, (size_t)n, &leg) : 0;
    if (used == 0 || leg != w->leg || !leg_has_ptok(w, buf, (size_t)n)) {
        w->dropped_progress++;
        if (w->dropped_progress == 1)
            tg_log_warn("agent '%s' sent progress for a token of no call of its own: dropped "
                        "(counted per session; logged once)",
                        agent_name(w));
        return true;
    }
    if (!h->cout_dead) {
        (void)tg_out_copy(&h->out, frame, t.off);
        (void)tg_out_copy(&h->out, buf + used, (size_t)n - used);
        (void)tg_out_copy(&h->out, frame + t.off + t.len, len - t.off - t.len);
    }
    return true;
}

bool mcp_hub_from_agent(mcp_sess_t *w, tg_block_t *b, const char *frame, size_t len,
                        const tg_mcp_env_t *env)
{
    (void)b;
    mcp_hub_t *h = w->hub;
    if (env->kind == TG_MCP_NOTIFICATION) {
        static const char *const changed[] = {"notifications/tools/list_changed",
                                              "notifications/prompts/list_changed",
                                              "notifications/resources/list_changed"};
        for (size_t i = 0; i < 3; i++) {
            if (is(frame, env->method, changed[i])) {
                h->gen++;
                hub_notify(h, changed[i]);
                return true;
            }
        }
        if (h->nlegs > 1 && is(frame, env->method, "notifications/progress"))
            return progress_from(h, w, frame, len, env);
        return false;
    }
    if (env->kind != TG_MCP_REQUEST || h->cout_dead)
        return env->kind == TG_MCP_REQUEST;
    /* An agent's request: its id made unique among the legs. */
    char q[2 * (TG_ID_MAX + 32) + 8];
    size_t ql = unique_make(w->leg, frame + env->id.off, env->id.len, q, sizeof(q));
    if (ql == 0)
        return true;
    (void)tg_out_copy(&h->out, frame, env->id.off);
    (void)tg_out_copy(&h->out, q, ql);
    (void)tg_out_copy(&h->out, frame + env->id.off + env->id.len, len - env->id.off - env->id.len);
    return true;
}

/* Leg <w>'s instance is gone: its names leave the lists (the caller is
 * told), until it lists them again. */
void mcp_hub_leg_down(mcp_sess_t *w)
{
    mcp_hub_t *h = w->hub;
    size_t n = tg_expose_remove_agent(&h->names[0], w->leg) +
               tg_expose_remove_agent(&h->names[1], w->leg) +
               tg_expose_uri_remove_agent(&h->uris, w->leg);
    h->gen++;
    if (n > 0 && h->initialized && w->phase == TG_P_RUN) {
        hub_notify(h, "notifications/tools/list_changed");
        (void)tg_out_flush(&h->out);
    }
}

/* ---- life ------------------------------------------------------------------------- */

static void hub_out_drain(tg_out_t *o, void *ctx)
{
    (void)o;
    mcp_hub_t *h = ctx;
    if (h->ending)
        return;
    for (uint32_t i = 0; i < h->nlegs; i++)
        mcp_caller_out_drain(o, h->legs[i]);
    mcp_hub_maybe_end(h);
}

static void hub_out_error(tg_out_t *o, void *ctx, int status)
{
    mcp_hub_t *h = ctx;
    if (h->ending)
        return;
    h->cout_dead = true;
    for (uint32_t i = 0; i < h->nlegs; i++)
        mcp_caller_out_error(o, h->legs[i], status);
}

/* The caller is gone or ends the session (<why>): every leg ends. */
void mcp_hub_shutdown(mcp_hub_t *h, const char *why, bool caller_gone)
{
    for (uint32_t i = 0; i < h->nlegs; i++) {
        mcp_sess_t *w = h->legs[i];
        if (caller_gone && w->phase == TG_P_RUN)
            mcp_caller_gone(w);
        mcp_begin_shutdown(w, why);
    }
}

/* Every leg finished: the caller's connection closes once what it is
 * owed is written; the hub goes with the last leg. */
void mcp_hub_maybe_end(mcp_hub_t *h)
{
    for (uint32_t i = 0; i < h->nlegs; i++)
        if (!h->legs[i]->finished)
            return;
    if (h->ending)
        return;
    if (!h->cout_dead && (h->out.npieces > 0 || h->out.queued_bytes > 0)) {
        (void)tg_out_flush(&h->out);
        if (h->out.queued_bytes > 0)
            return; /* hub_out_drain comes back */
    }
    /* From here legs go one by one: nothing reaches across them, and
     * what is left to write goes nowhere. */
    h->ending = true;
    h->cout_dead = true;
    h->out.stream = NULL;
    mcp_sess_close_caller(h->legs[0]);
    for (uint32_t i = 0; i < h->nlegs; i++)
        mcp_sess_release(h->legs[i]); /* the hub's hold */
}

void mcp_hub_released(mcp_sess_t *w)
{
    mcp_hub_t *h = w->hub;
    if (--h->refs > 0)
        return;
    tg_out_free(&h->out);
    for (int l = 0; l < 2; l++)
        tg_expose_free(&h->names[l]);
    tg_expose_uri_free(&h->uris);
    for (uint32_t i = 0; h->cont != NULL && i < h->nlegs; i++)
        for (int l = 0; l < HUB_LISTS; l++)
            free(h->cont[i][l]);
    free(h->cont);
    for (size_t i = 0; i < MCP_HUB_ASKS; i++)
        ask_free(&h->asks[i]);
    json_decref(h->claims_doc);
    free(h);
}

/* The JWT claims of <peer> (JSON object text) as the policy's pairs: a
 * string claim one pair, an array one pair per string; bounded. */
static void hub_claims(mcp_hub_t *h, const char *text)
{
    h->claims_doc = text != NULL ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(h->claims_doc))
        return;
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(h->claims_doc, k, v) {
        for (size_t i = 0; n < MCP_HUB_CLAIMS_MAX && i < (json_is_array(v) ? json_array_size(v) : 1);
             i++) {
            const char *s = json_string_value(json_is_array(v) ? json_array_get(v, i) : v);
            if (s != NULL)
                h->claims_kv[n++] = (tg_policy_kv_t){k, s};
        }
    }
    h->who.claims = h->claims_kv; /* a JWT named the caller, even with no claim kept */
    h->who.nclaims = n;
}

mcp_hub_t *mcp_hub_new(tg_mcp_eng_t *e, mcp_sess_t *lead, tg_mcp_agent_t **ags, size_t n,
                       const tg_peer_t *peer, bool verbatim)
{
    if (n == 0 || n > MCP_HUB_LEGS)
        return NULL;
    mcp_hub_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->e = e;
    h->verbatim = verbatim && n == 1;
    if (getrandom(h->key, sizeof(h->key), 0) != (ssize_t)sizeof(h->key)) {
        free(h);
        return NULL;
    }
    if (tg_expose_init(&h->names[0], TG_EXPOSE_ENTRIES_MAX) < 0 ||
        tg_expose_init(&h->names[1], TG_EXPOSE_ENTRIES_MAX) < 0 ||
        tg_expose_uri_init(&h->uris, TG_EXPOSE_URIS_MAX, TG_EXPOSE_TEMPLATES_MAX) < 0 ||
        (h->cont = calloc(n, sizeof(*h->cont))) == NULL) {
        tg_expose_free(&h->names[0]);
        tg_expose_free(&h->names[1]);
        tg_expose_uri_free(&h->uris);
        free(h);
        return NULL;
    }
    tg_out_init(&h->out, &lead->gw->pool);
    h->out.stream = lead->cout;
    h->out.ctx = h;
    h->out.on_drain = hub_out_drain;
    h->out.on_error = hub_out_error;
    snprintf(h->who_caller, sizeof(h->who_caller), "%s", lead->caller);
    h->who.caller = strcmp(lead->caller, "unknown") == 0 || strcmp(lead->caller, "anonymous") == 0 ||
                            strcmp(lead->caller, "stdio") == 0
                        ? NULL
                        : h->who_caller;
    h->who.uid = peer != NULL && peer->front == TG_FRONT_UNIX ? peer->uid : -1;
    h->who.gid = peer != NULL && peer->front == TG_FRONT_UNIX ? peer->gid : -1;
    hub_claims(h, peer != NULL ? peer->claims : NULL);
    for (size_t i = 0; i < n; i++) {
        mcp_sess_t *w = i == 0 ? lead : mcp_sess_leg(lead, ags[i]);
        if (w == NULL) {
            /* The legs made so far end with the lead (the caller is told
             * nothing: the connection closes). */
            h->nlegs = (uint32_t)i;
            return h;
        }
        w->hub = h;
        w->leg = (uint32_t)i;
        w->cw = &h->out;
        w->open_handles++; /* the hub's hold, dropped in mcp_hub_maybe_end */
        h->legs[i] = w;
        h->nlegs++;
        h->refs++;
    }
    return h;
}

/* Start hub <h>: serve, its lead waits for the caller's initialize (every
 * leg starts its instance with it); wrap (stdio), every leg's instance
 * starts now, and a leg that cannot is left out. -1 when no agent could
 * start at all in wrap. */
int mcp_hub_start(mcp_hub_t *h)
{
    mcp_sess_t *lead = h->legs[0];
    if (lead->conn != NULL)
        return tg_mcp_sess_start(lead);
    uint32_t up = 0;
    for (uint32_t i = 0; i < h->nlegs; i++) {
        mcp_sess_t *w = h->legs[i];
        if (mcp_agent_spawn(w) == 0) {
            up++;
            continue;
        }
        tg_log_warn("agent '%s' failed to start: its tools are left out", leg_agent(h, i));
        w->leg_failed = true;
    }
    if (up == 0) {
        mcp_begin_shutdown(lead, "no agent could start");
        return -1;
    }
    uv_read_start(lead->cin, mcp_caller_alloc, mcp_caller_read);
    return 0;
}

/* Reload changed the policy: every hub's caller is told its lists may
 * have changed (the next request reads the new policy). */
void mcp_hub_policy_changed(tg_mcp_eng_t *e)
{
    for (mcp_sess_t *w = e->sessions; w != NULL; w = w->next) {
        mcp_hub_t *h = w->hub;
        if (h == NULL || w->leg != 0 || !h->initialized || h->ending || w->phase != TG_P_RUN)
            continue;
        hub_notify(h, "notifications/tools/list_changed");
        hub_notify(h, "notifications/prompts/list_changed");
        hub_notify(h, "notifications/resources/list_changed");
        if (!h->cout_dead)
            (void)tg_out_flush(&h->out);
    }
}
