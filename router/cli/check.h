/* `toolgate check`: validate a config and show, per agent and tool, the
 * effective limits with where each came from (default, file, manifest,
 * operator cap, --limit), and what this host will enforce of each agent's
 * resources.
 *
 * The host part is a prediction from capability detection alone
 * (tg_contain_detect): check creates no cgroup and moves no process, so it
 * is safe beside a running toolgate. It follows the choices of
 * tg_contain_init and tg_contain_create for the detected capabilities;
 * what only creating a cgroup can show (a failing mkdir, controllers that
 * cannot be enabled because other processes share toolgate's cgroup) is
 * reported by the `agent.started` audit event of the real start. Detection
 * describes the cgroup of the process that runs check: run it under the
 * same service manager unit as the gateway to see the gateway's view.
 *
 * Nothing secret is printed: no command arguments, environment values,
 * store or audit URLs.
 */
#ifndef TG_ROUTER_CHECK_H
#define TG_ROUTER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config/config.h"
#include "limits/contain.h"
#include "router/codec/expose.h"

/* The backend tg_contain_init would choose on a host with <caps> in
 * <mode>; <why> (capacity <cap>) says why not a stronger one, "" when
 * nothing is missing. */
tg_contain_kind_t tg_check_backend(const tg_contain_caps_t *caps, tg_contain_mode_t mode, char *why,
                                   size_t cap);

/* The enforcement report tg_contain_create would give an instance with
 * <req> under backend <kind> (from tg_check_backend) on a host with
 * <caps>, into <e>. Pure: reads nothing from the host. */
void tg_check_plan(const tg_contain_caps_t *caps, tg_contain_kind_t kind, tg_contain_mode_t mode,
                   const tg_contain_req_t *req, tg_enforced_t *e);

/* Write the report of the valid config <cfg> (tg_config_validate passed)
 * on a host with <caps> to <out>: a text table, or with <json> one JSON
 * object; with <start> (tg_check_start's, NULL: not checked), whether it
 * would start here and what would stop it; with <hub> (tg_check_hub's,
 * NULL: not shown), the policy's findings and the exposed names. 0, or
 * -EIO when <out> failed, -ENOMEM. */
struct tg_check_problems;
struct tg_check_hub;
int tg_check_report(FILE *out, const tg_config_t *cfg, const tg_contain_caps_t *caps, bool json,
                    const struct tg_check_problems *start, const struct tg_check_hub *hub);

#define TG_CHECK_PROBLEMS_MAX 32  /* fixed internal bound: start problems listed (more are counted) */
#define TG_CHECK_LINE_MAX     640 /* fixed internal bound: one problem's line */

#define TG_CHECK_NOTES_MAX 8 /* fixed internal bound: start notes listed (more are dropped) */

/* The directory the packaged service unit makes before it starts toolgate
 * (deploy/systemd/toolgate.service: RuntimeDirectory=toolgate), where the
 * packaged config puts its Unix listeners. Until the unit first runs it
 * does not exist, and that is no reason a start would fail. */
#define TG_CHECK_UNIT_RUNTIME_DIR "/run/toolgate"

/* What would stop a start, one line each ("json.path: what is wrong (how
 * to fix it)"), and how many more there were; and notes: what is not
 * there yet but will be when the service unit starts toolgate. */
typedef struct tg_check_problems {
    size_t n, dropped;
    char line[TG_CHECK_PROBLEMS_MAX][TG_CHECK_LINE_MAX];
    size_t nnotes;
    char note[TG_CHECK_NOTES_MAX][TG_CHECK_LINE_MAX];
} tg_check_problems_t;

/* What would stop a start of the valid config <cfg> on this host that
 * validation cannot see (check_start.c), into <out>: with <serve>, each
 * Unix listener's directory exists and this user may create the socket in
 * it (a missing TG_CHECK_UNIT_RUNTIME_DIR is a note, not a problem); each
 * agent's command is found (without a '/': on the PATH the agent gets,
 * env.set's or, when passed, toolgate's; serve passes only env.pass) and
 * is an executable file. Read-only. The number of problems. */
int tg_check_start(tg_check_problems_t *out, const tg_config_t *cfg, bool serve);

/* Look <cmd> up as execvp would: as is when it holds a '/', else in each
 * directory of <path_var> (NULL: execvp's default). 0 with the file in
 * <found>, or -ENOENT (nowhere), -EACCES (found, not an executable
 * file), another -errno. */
int tg_check_find_command(const char *cmd, const char *path_var, char *found, size_t cap);

/* ---- issue 22: the policy and the exposed names (check_hub.c) ----------
 *
 * check does not start agents, so what it knows of an agent's tools is
 * the config's: the keys of agents[].tools. The names a listener with
 * "agents" exposes are those keys, prefixed exactly as the runtime does
 * (tg_expose_add in the listener's list order, each agent's tool_prefix
 * or id); an agent without agents[].tools exposes names check cannot see.
 * The policy is judged with the same knowledge: callers[] names, every
 * agent id, and each agent's tools keys (when it has some) as its tools. */

#define TG_CHECK_FINDINGS_MAX 64  /* fixed internal bound: findings kept (more are counted) */
#define TG_CHECK_EXPOSED_MAX  200 /* fixed internal bound: mapping lines shown (more are counted) */

/* One finding: an error fails check, a warning does not. <line> is
 * "json.path: what is wrong". */
typedef struct tg_check_finding {
    bool error;
    bool policy; /* from tg_policy_check; else from the exposed names */
    char line[TG_CHECK_LINE_MAX];
} tg_check_finding_t;

/* One line of a mapping: exposed name -> agent/tool. */
typedef struct tg_check_exposed {
    char name[TG_EXPOSE_NAME_MAX + 1]; /* the exposed name */
    const char *agent, *tool;         /* borrowed from the config */
    bool rewritten;                   /* shortened or escaped (see tg_expose_name) */
    bool shortened, escaped;          /* why, when rewritten */
    bool hidden;                      /* a collision: <kept_by> keeps the name */
    const char *kept_by;              /* hidden: the agent id that keeps it (borrowed) */
    const char *kept_tool;            /* hidden: that agent's tool (borrowed) */
} tg_check_exposed_t;

/* One front that serves several agents under one set of names: a
 * listener with "agents", or wrap's stdio with several agents. */
typedef struct tg_check_front {
    char label[TG_CHECK_LINE_MAX / 2]; /* "router.listen[0] (unix /run/x.sock)" */
    char path[48];                     /* its agents' path: "router.listen[0].agents" */
    const tg_agent_cfg_t **agents;     /* in the runtime's order; owned array, borrowed agents */
    size_t nagents;
    bool all_agents; /* wrap's front: <path> is "agents", indexed in config order */
    size_t first, n; /* its lines: rows[first .. first + n) */
    size_t more;     /* its lines not kept (past TG_CHECK_EXPOSED_MAX) */
    size_t names, rewritten, hidden; /* over all its tools, kept or not */
} tg_check_front_t;

/* What check says of issue 22's config. Owned by the caller: zero it,
 * fill it with tg_check_hub, free it with tg_check_hub_free. */
typedef struct tg_check_hub {
    bool has_policy;
    bool policy_deny; /* policy.default */
    size_t policy_rules;
    tg_check_finding_t *find; /* TG_CHECK_FINDINGS_MAX of them */
    size_t nfind, dropped;    /* kept, and not kept */
    int errors, warnings;     /* all of them, kept or not */
    tg_check_front_t *fronts;
    size_t nfronts;
    tg_check_exposed_t *rows; /* TG_CHECK_EXPOSED_MAX of them */
    size_t nrows;
} tg_check_hub_t;

/* Fill <h> for the valid config <cfg>: build its policy (tg_policy_from_
 * json) and judge it (tg_policy_check), and expose each front's known
 * tools. 0; -EINVAL when the policy does not build (<err> starts with
 * its path: "policy.rules[0].tools[0]: ..."); -ENOMEM. */
int tg_check_hub(tg_check_hub_t *h, const tg_config_t *cfg, tg_err_t *err);
void tg_check_hub_free(tg_check_hub_t *h);

/* The text sections of <h> (policy, exposed names) to <out>. */
void tg_check_hub_text(FILE *out, const tg_check_hub_t *h);

/* <h> as the JSON members "policy" (absent without one) and "exposed"
 * added to <root>. 0 or -ENOMEM. */
struct json_t;
int tg_check_hub_json(struct json_t *root, const tg_check_hub_t *h);

#endif
