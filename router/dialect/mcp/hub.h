/* Several MCP agents behind one front (issue 22): a hub is one caller's
 * session with every agent a listener names ("agents": [...]) or, in
 * wrap, every agent of the config. Included by the MCP engine's files
 * only (through session_impl.h).
 *
 * Shape. Each agent is a leg: an ordinary session (mcp_sess_t) with its
 * own instance, limits, call table, restarts, audit and pool place, so
 * everything a single-agent session enforces holds per agent. Leg 0 (the
 * lead) reads the caller; every leg writes to the hub's one output. The
 * hub sits on the lead's frame path: it answers initialize, ping and the
 * list methods itself (fanned out to the legs, merged), and hands every
 * other frame to the one leg it belongs to, with the exposed name turned
 * back into the agent's own:
 *
 *   tools/call, prompts/get          the leg owning the exposed name
 *   resources/read, (un)subscribe    the leg that listed the URI, or whose
 *                                    template matches it
 *   completion/complete              by its ref (a prompt or a resource)
 *   tasks/get, /result, /cancel      the leg whose session knows the taskId
 *                                    (two legs knowing it: -32602, ambiguous)
 *   tasks/list                       every leg, the tasks in one list (first
 *                                    pages only: a leg's nextCursor is dropped
 *                                    and the result says io.toolgate/truncated)
 *   notifications/cancelled          only the leg holding that request
 *   the caller's answers             the leg whose request it answers (an
 *                                    agent's request ids are rewritten on
 *                                    the way out: "tg<leg>.<raw id>")
 *   other notifications,             every leg
 *   logging/setLevel                 every leg, answered {} by the hub
 *
 * Names: router/codec/expose.h (prefix "__" name, first agent in config
 * order keeps a colliding name). Who may call what: router/auth/policy.h,
 * one decision for the list and the call.
 *
 * Bounds: MCP_HUB_ASKS requests the hub answers itself at once (over it:
 * -32603 "busy"); each leg's answer to an ask is at most max_frame_bytes
 * (the leg's reader), the answers one ask keeps at most twice that (a leg
 * whose answer would pass it is left out, and the result's _meta says
 * "io.toolgate/truncated"), and a merged list is kept only until it is
 * written.
 */
#ifndef TG_ROUTER_MCP_HUB_H
#define TG_ROUTER_MCP_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "router/auth/policy.h"
#include "router/codec/expose.h"
#include "router/gateway/io.h"

#define MCP_HUB_ASKS 16 /* fixed internal bound: requests a hub answers itself at once */
#define MCP_HUB_LEGS TG_CFG_AGENTS_MAX
#define MCP_HUB_CLAIMS_MAX 64 /* fixed internal bound: claim values a policy is asked about */

/* What an agent's initialize result offered (mcp_hub_t.caps). */
enum { HUB_CAP_RESOURCES = 1 };

struct mcp_sess;

/* What the hub asked its legs, to answer the caller itself. */
typedef enum {
    HUB_ASK_FREE = 0,
    HUB_ASK_INIT,
    HUB_ASK_TOOLS,
    HUB_ASK_PROMPTS,
    HUB_ASK_RESOURCES,
    HUB_ASK_TEMPLATES,
    HUB_ASK_ALL, /* logging/setLevel: {} once every leg answered */
    HUB_ASK_TASKS, /* tasks/list: every leg's tasks, one list */
} mcp_hub_ask_kind_t;

typedef struct mcp_hub_ask {
    mcp_hub_ask_kind_t kind;
    uint32_t waiting;     /* legs yet to answer */
    int32_t page_leg;     /* a cursor's page: the one leg asked; -1: every leg */
    size_t id_len;
    char id[128];         /* the caller's id, raw JSON */
    json_t **got;         /* each leg's result (NULL: failed, not asked); nlegs, owned */
    uint32_t ngot;
    uint64_t bytes;       /* of the answers kept: at most 2 x max_frame_bytes */
    bool cut;             /* an answer was left out for that bound */
} mcp_hub_ask_t;

typedef struct mcp_hub {
    struct tg_mcp_eng *e;
    tg_out_t out;         /* to the caller, for every leg */
    bool cout_dead;
    bool init_seen;       /* the caller sent initialize (its requests are routed from then) */
    bool initialized;     /* the caller's initialize was answered */
    bool ending;          /* every leg finished: closing the caller */
    bool verbatim;        /* one agent, its names its own (a policy on a one-agent front) */
    uint32_t nlegs;
    uint32_t refs;        /* legs not yet released */
    uint32_t gen;         /* of the merged lists (cursors) */
    struct mcp_sess *legs[MCP_HUB_LEGS];
    uint8_t caps[MCP_HUB_LEGS]; /* HUB_CAP_* each leg's initialize result offered */
    tg_expose_t names[2]; /* exposed tools [0] and prompts [1] */
    /* The last name each table resolved, while the table has not changed
     * since (names[i].tab.mut): a caller calls the same tools again and
     * again. <memo_ent> points into the table; NULL: none. */
    const tg_expose_ent_t *memo_ent[2];
    uint32_t memo_mut[2];
    bool memo_plain[2]; /* the memo's own name needs no escaping */
    tg_expose_uri_t uris;
    uint8_t key[TG_EXPOSE_KEY_LEN];
    /* The rest of each leg's list after the first merged page: its
     * nextCursor (JSON string text, quotes included) per list kind. */
    char *(*cont)[4];     /* nlegs rows, owned */
    char who_caller[64];
    tg_policy_who_t who;
    /* The claims of the JWT that named an HTTP caller (who.claims points
     * into claims_kv, whose strings are claims_doc's), or none. */
    json_t *claims_doc;
    tg_policy_kv_t claims_kv[MCP_HUB_CLAIMS_MAX];
    uint64_t collisions;
    mcp_hub_ask_t asks[MCP_HUB_ASKS];
} mcp_hub_t;

#endif
