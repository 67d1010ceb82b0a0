/* Who may call what: one policy of ordered rules, first match wins, and
 * an explicit default (issue 22). Pure core: no loop, no I/O, no lookup
 * of user or group names; the engines ask it, the config and wrap's flags
 * build it.
 *
 * A rule has an effect (allow or deny) and matchers, each a list; a rule
 * matches a request when every matcher it has matches (AND), and a
 * matcher matches when one of its entries does (OR). An absent matcher
 * matches everything, so a rule with none matches every request; an
 * empty list is refused at load (it would match nothing).
 *
 *   callers  globs on the callers[] name; never an anonymous caller
 *   uids     the Unix peer's uid (SO_PEERCRED), integers; never a caller
 *            that is not a Unix peer
 *   gids     the Unix peer's primary gid, the same way
 *   tokens   globs on the name of the bearer token presented
 *   claims   {claim: [values]}: every claim named must have one of its
 *            values (exact strings) in the verified JWT. "scope" is read
 *            as OAuth's space-separated list (RFC 6749 3.3): the rule
 *            matches when the token holds at least one of the scopes
 *            listed. Holding two scopes at once is not one rule's test.
 *   agents   globs on the agent id
 *   tools    globs (fnmatch(3), flags 0: `*` also crosses `/`) on the
 *            agent's own, unprefixed name: the tool's name for tools, the
 *            prompt's for prompts, the URI (or URI template) for resources
 *   methods  "tools/call", "prompts/get", "resources/read"
 *
 * One decision for the list and the call: a method names a family
 * (tools/call and tools/list; prompts/get and prompts/list;
 * resources/read, resources/list, resources/templates/list and
 * resources/subscribe), and a rule decides the whole family. Whether a
 * tool is listed is the decision a call to it would get, so a denied tool
 * is never listed and nothing is written twice. A rule naming a list
 * method is refused at load, saying which call method decides it.
 *
 * Conventions: setup (tg_policy_from_json, tg_policy_from_flags) fills a
 * tg_err_t whose message starts with the path ("policy.rules[2].tools[0]:
 * ...") and returns 0, -EINVAL or -ENOMEM; a decision allocates nothing
 * and costs O(rules x matcher entries).
 */
#ifndef TG_ROUTER_AUTH_POLICY_H
#define TG_ROUTER_AUTH_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/err.h"

#define TG_POLICY_RULES_MAX  256 /* fixed internal bound: rules in one policy */
#define TG_POLICY_MATCH_MAX  64  /* fixed internal bound: entries of one matcher */
#define TG_POLICY_CLAIMS_MAX 16  /* fixed internal bound: claims one rule names */
#define TG_POLICY_GLOB_MAX   256 /* fixed internal bound: bytes of a glob, name or claim value */
/* fixed internal bound: bytes of a rule's where ("--deny-tool GLOB" at most) */
#define TG_POLICY_WHERE_MAX (TG_POLICY_GLOB_MAX + 32)

typedef enum tg_policy_effect {
    TG_POLICY_ALLOW = 0,
    TG_POLICY_DENY,
} tg_policy_effect_t;

/* The families of methods a policy decides (see above). */
typedef enum tg_policy_method {
    TG_POLICY_M_TOOLS = 0, /* tools/call, tools/list */
    TG_POLICY_M_PROMPTS,   /* prompts/get, prompts/list */
    TG_POLICY_M_RESOURCES, /* resources/read, /list, /templates/list, /subscribe */
    TG_POLICY_M_COUNT
} tg_policy_method_t;

/* The family of MCP method <s> (<len> bytes), or -1 when a policy does
 * not decide it (initialize, ping, notifications...). */
int tg_policy_method(const char *s, size_t len);

/* ---- the model (read-only once built; owned by the tg_policy_t) ---- */

typedef struct tg_policy_strs {
    char **v;
    size_t n; /* 0: the matcher is absent */
} tg_policy_strs_t;

typedef struct tg_policy_ids {
    int64_t *v;
    size_t n; /* 0: the matcher is absent */
} tg_policy_ids_t;

typedef struct tg_policy_claim {
    char *name;
    bool scope; /* name is "scope": the token's value is split on spaces */
    tg_policy_strs_t values;
} tg_policy_claim_t;

typedef struct tg_policy_rule {
    tg_policy_effect_t effect;
    /* What a denial names: "policy.rules[3]", or the flag and its glob
     * ("--deny-tool secret_*") for a rule built from wrap's flags. */
    char where[TG_POLICY_WHERE_MAX];
    bool from_flag;   /* built from a flag: its entries have no path of their own */
    unsigned methods; /* bits 1 << tg_policy_method_t; 0: any method */
    tg_policy_strs_t callers, tokens, agents, tools;
    tg_policy_ids_t uids, gids;
    tg_policy_claim_t *claims;
    size_t nclaims;
} tg_policy_rule_t;

/* Owned by whoever built it; freed with tg_policy_free. */
typedef struct tg_policy {
    tg_policy_rule_t *rules;
    size_t nrules;
    tg_policy_effect_t def;
    char def_where[TG_POLICY_WHERE_MAX]; /* "policy.default" */
} tg_policy_t;

void tg_policy_free(tg_policy_t *p);

/* What toolgate's fronts can match today: bearer tokens have no names in
 * the config (callers[].tokens holds digests), so a rule with a "tokens"
 * matcher could never match, and a deny rule that never matches lets
 * through what it names. 0, or -EINVAL with <err> naming that rule. */
int tg_policy_supported(const tg_policy_t *p, tg_err_t *err);

/* ---- building one ---- */

/* struct json_t without <jansson.h> in every includer. */
struct json_t;

/* The policy of JSON object <v> (the config's "policy" value):
 * {"default": "allow"|"deny", "rules": [{"effect": ..., matchers...}]}.
 * "default" is required (there is no implicit one); "rules" may be left
 * out. Unknown keys are refused with the known ones. 0 with *out set, or
 * -EINVAL / -ENOMEM with <err> starting with the path ("policy.rules[2].
 * uids[0]: ..."). */
int tg_policy_from_json(tg_policy_t **out, const struct json_t *v, tg_err_t *err);

/* The policy of wrap's --allow-tool and --deny-tool globs (<nallow> and
 * <ndeny> of them), on tools only:
 *   1. each --deny-tool glob, in order: deny;
 *   2. each --allow-tool glob, in order: allow;
 *   3. when any --allow-tool was given, every other tool: deny;
 *   4. default allow (prompts and resources are not tools).
 * So deny wins wherever the flags stand on the command line, only deny
 * globs mean "everything but these", and any allow glob means "only
 * these". No glob at all: *out is NULL (no policy; everything allowed).
 * 0, or -EINVAL / -ENOMEM with <err> naming the flag and glob. */
int tg_policy_from_flags(tg_policy_t **out, const char *const *allow, size_t nallow,
                         const char *const *deny, size_t ndeny, tg_err_t *err);

/* ---- deciding ---- */

/* One claim of a verified JWT, borrowed. A claim holding an array of
 * strings is one pair per element; "scope" is one pair with the token's
 * space-separated string. */
typedef struct tg_policy_kv {
    const char *name, *value;
} tg_policy_kv_t;

/* Who is asking (borrowed for the call). */
typedef struct tg_policy_who {
    const char *caller;           /* callers[] name; NULL: anonymous */
    int64_t uid, gid;             /* the Unix peer's; -1: not a Unix peer */
    const char *token;            /* the bearer token's name; NULL: none */
    const tg_policy_kv_t *claims; /* the verified JWT's claims; NULL: no JWT */
    size_t nclaims;
} tg_policy_who_t;

typedef struct tg_policy_decision {
    tg_policy_effect_t effect;
    int rule;          /* the rules[] index that decided; -1: the default */
    const char *where; /* that rule's where, or def_where; borrowed from the policy */
} tg_policy_decision_t;

/* The decision of <p> for <who> on the item <name> (a tool or prompt's
 * unprefixed name, a resource's URI) of agent <agent> in family <m>: the
 * first rule that matches, else the default. <p> NULL is no policy:
 * allow, rule -1, where "no policy". A NULL <who> is an anonymous caller
 * with no credentials; a NULL <agent> or <name> matches no rule that has
 * an agents or tools matcher. Allocates nothing. */
tg_policy_decision_t tg_policy_decide(const tg_policy_t *p, const tg_policy_who_t *who,
                                      const char *agent, const char *name, tg_policy_method_t m);

/* Whether <name> appears in <who>'s list of family <m>: exactly whether
 * tg_policy_decide allows a call to it. */
bool tg_policy_listed(const tg_policy_t *p, const tg_policy_who_t *who, const char *agent,
                      const char *name, tg_policy_method_t m);

/* ---- check ---- */

typedef enum tg_policy_sev {
    TG_POLICY_WARNING = 0,
    TG_POLICY_ERROR,
} tg_policy_sev_t;

/* What check knows of one agent: its id and, per family, its own names
 * (tools, prompts, resource URIs); names[m] NULL: not known, so nothing is
 * judged dead for that family of that agent. */
typedef struct tg_policy_agent_known {
    const char *id;
    const char *const *names[TG_POLICY_M_COUNT];
    size_t nnames[TG_POLICY_M_COUNT];
} tg_policy_agent_known_t;

typedef struct tg_policy_known {
    const char *const *callers; /* callers[] names */
    size_t ncallers;
    const tg_policy_agent_known_t *agents;
    size_t nagents;
} tg_policy_known_t;

/* One finding: <where> is the path ("policy.rules[1].agents[0]"), <msg>
 * what is wrong; both valid for the call only. */
typedef void (*tg_policy_note_fn)(void *arg, tg_policy_sev_t sev, const char *where,
                                  const char *msg);

/* Report to <fn> what <p> holds that can never decide, given <k>:
 *   error:   an agents entry (id or glob) that matches no known agent;
 *   warning: a rule that can match nothing (its callers name no known
 *            caller, or its tools match no known name of any agent and
 *            family it applies to, when all of those are known), or that
 *            an earlier rule with no matchers always takes first;
 *   warning: one callers or tools entry that matches nothing known, in a
 *            rule whose other entries can match.
 * uids, gids, tokens and claims are not judged: any peer or token may
 * carry them. Returns how many errors were reported. */
int tg_policy_check(const tg_policy_t *p, const tg_policy_known_t *k, tg_policy_note_fn fn,
                    void *arg);

#endif
