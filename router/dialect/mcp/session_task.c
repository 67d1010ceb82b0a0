/* MCP tasks (2025-11-25) in the MCP engine: a task-augmented tools/call is
 * a call that is still running after the agent's CreateTaskResult.
 *
 * What toolgate holds to:
 *  - The task keeps its call's concurrency slot (agent, tool, caller,
 *    fleet) until it reaches a terminal status (completed, failed,
 *    cancelled), as the agent tells it: notifications/tasks/status, or the
 *    answer to the caller's tasks/get, tasks/cancel (a terminal status)
 *    or tasks/result (any answer: it blocks until the end).
 *  - Its deadline is the call's, counted from admission. A params.task.ttl
 *    asking for more is cut to the deadline when the call is forwarded.
 *    At the deadline toolgate sends tasks/cancel to the agent (its answer
 *    frees the slot, as a pong does for a timed-out call; no answer within
 *    kill_grace kills the agent) and fails the task to the caller: every
 *    tasks/... request of the caller about it, waiting or later, is answered
 *    with the timeout denial. The same holds for any other end toolgate
 *    gives the call (the agent exited, shutdown): the denial it got.
 *  - Audit ends the call when the task ends: call.completed (ok or error),
 *    call.cancelled, or the denial, with the task's real duration.
 *  - tasks/get, tasks/result and tasks/cancel must name a task of the
 *    caller's own session (live, or among its TG_TASKS_KEPT most recently
 *    ended): anything else is refused with -32602, so a caller cannot
 *    poll, read or cancel another caller's task. taskIds are compared as
 *    the JSON text the agent wrote. tasks/list goes to the session's own
 *    instance, which serves no other caller.
 *  - The original request id was answered by the CreateTaskResult: it is
 *    never answered twice. A notifications/cancelled for it is dropped as
 *    for any request no longer live (the spec cancels tasks with
 *    tasks/cancel).
 */
#include "router/dialect/mcp/session_impl.h"

/* ---- the session's ended tasks ------------------------------------------ */

static mcp_task_end_t *ended_find(const mcp_sess_t *w, const char *id, size_t len)
{
    if (w->tasks == NULL)
        return NULL;
    for (uint32_t i = 0; i < TG_TASKS_KEPT; i++) {
        mcp_task_end_t *e = &w->tasks->e[i];
        if (e->id_len == len && len > 0 && memcmp(e->id, id, len) == 0)
            return e;
    }
    return NULL;
}

static void ended_add(mcp_sess_t *w, const mcp_call_t *c, int fate)
{
    if (w->tasks == NULL && (w->tasks = calloc(1, sizeof(*w->tasks))) == NULL)
        return; /* it is then unknown: later tasks/... about it are refused */
    mcp_task_end_t *e = &w->tasks->e[w->tasks->next++ % TG_TASKS_KEPT];
    memcpy(e->id, c->task_id, c->task_id_len);
    e->id_len = c->task_id_len;
    e->fate = fate;
}

void mcp_tasks_free(mcp_sess_t *w)
{
    free(w->tasks);
    w->tasks = NULL;
}

/* The live task of session <w> named <id> (JSON text), or NULL. */
static mcp_call_t *live_find(mcp_sess_t *w, const char *id, size_t len)
{
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        mcp_call_t *c = mcp_call_at(w->ag, i);
        if (c->kind == K_CALL && c->w == w && c->task && c->task_id_len == len &&
            memcmp(c->task_id, id, len) == 0)
            return c;
    }
    return NULL;
}

/* Whether session <w> knows task <id> (JSON text): live, or among those
 * it remembers ended. A hub routes tasks/... by it. */
bool mcp_task_known(mcp_sess_t *w, const char *id, size_t len)
{
    return live_find(w, id, len) != NULL || ended_find(w, id, len) != NULL;
}

/* ---- admission and the CreateTaskResult --------------------------------- */

void mcp_task_admit(mcp_sess_t *w, mcp_call_t *c, const char *frame, const tg_mcp_env_t *env)
{
    (void)w;
    if (env->task.type != TG_J_OBJECT)
        return;
    c->task_req = true;
    tg_mcp_task_t t;
    uint64_t ttl;
    if (tg_mcp_task_read(frame, env->task, &t) == 0 && t.ttl.type == TG_J_NUMBER &&
        (tg_jnum_u64(frame, t.ttl, UINT64_MAX, &ttl) < 0 || ttl > c->cc.deadline_ms)) {
        /* Over the deadline (or not a count of ms toolgate can read): the
         * agent is told the deadline, the task cannot outlive it anyway. */
        c->ttl_off = t.ttl.off;
        c->ttl_len = t.ttl.len;
        c->ttl_new = c->cc.deadline_ms;
    }
}

/* End task <c> as the agent says (<st> terminal): audit with its real
 * duration, remember it, give its slot back. */
static void task_end(mcp_sess_t *w, mcp_call_t *c, tg_task_status_t st)
{
    if (st == TG_TASK_CANCELLED)
        mcp_audit_call(w, c, "call.cancelled", "cancelled", NULL, "task");
    else
        mcp_audit_call(w, c, "call.completed", st == TG_TASK_FAILED ? "error" : "ok", NULL, "task");
    ended_add(w, c, -1);
    tg_pipe_release(&c->cc);
}

bool mcp_task_on_response(mcp_sess_t *w, mcp_call_t *c, tg_block_t *b, const char *frame, size_t len,
                          const tg_mcp_env_t *env,
                          void (*to_caller)(mcp_sess_t *, tg_block_t *, const char *, size_t,
                                            size_t, size_t, const char *, size_t))
{
    if (c->task) {
        /* The request was answered by its CreateTaskResult: another answer
         * to its id is the agent's mistake, never the caller's business. */
        w->unmatched_responses++;
        return true;
    }
    if (!c->task_req || !env->has_result)
        return false;
    tg_jspan_t result, task;
    tg_mcp_task_t t;
    if (tg_mcp_frame_member(frame, len, "result", &result) != 1 || result.type != TG_J_OBJECT)
        return false;
    tg_jobj_iter_t it;
    tg_jspan_t k, v;
    task.type = TG_J_NONE;
    tg_jobj_begin(&it, frame, result);
    while (tg_jobj_next(&it, &k, &v) == 1)
        if (tg_jstr_eq(frame, k, "task"))
            task = v;
    if (tg_mcp_task_read(frame, task, &t) < 0 || t.id.type != TG_J_STRING || t.id.len > TG_ID_MAX)
        return false; /* a plain result: the agent ran the call as a normal one */
    to_caller(w, b, frame, len, env->id.off, env->id.len, c->caller_id, c->caller_id_len);
    memcpy(c->task_id, frame + t.id.off, t.id.len);
    c->task_id_len = t.id.len;
    c->task = true;
    tg_task_status_t st = tg_mcp_task_status(frame, t.status);
    if (st != TG_TASK_LIVE)
        task_end(w, c, st);
    return true;
}

/* ---- the caller's tasks/... requests -------------------------------------- */

int mcp_task_op_of(const char *frame, tg_jspan_t method)
{
    if (method.len < 8 || memcmp(frame + method.off, "\"tasks/", 7) != 0)
        return TG_TASK_OP_NONE;
    if (tg_jstr_eq(frame, method, "tasks/get"))
        return TG_TASK_OP_GET;
    if (tg_jstr_eq(frame, method, "tasks/result"))
        return TG_TASK_OP_RESULT;
    if (tg_jstr_eq(frame, method, "tasks/cancel"))
        return TG_TASK_OP_CANCEL;
    return TG_TASK_OP_NONE;
}

/* The denial for a task toolgate ended with <code>, answering a tasks/...
 * request that came after. */
static void deny_ended(mcp_sess_t *w, const char *id, size_t id_len, tg_deny_code_t code)
{
    tg_denial_t d;
    char reqid[32];
    mcp_denial_init(w, &d, code, NULL, reqid, sizeof(reqid));
    d.limit = code == TG_DENY_TIMEOUT ? "timeout" : code == TG_DENY_SHUTTING_DOWN ? "shutdown"
                                                                                  : "agent";
    d.detail = code == TG_DENY_TIMEOUT ? "the task ran past its call's deadline; toolgate cancelled it"
                                       : "toolgate ended the task's call";
    mcp_deny(w, id, id_len, &d);
}

bool mcp_task_caller_request(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env,
                             mcp_call_t **task)
{
    *task = NULL;
    tg_mcp_task_t t;
    const char *rid = frame + env->id.off;
    if (tg_mcp_task_read(frame, env->params, &t) < 0 || t.id.type != TG_J_STRING) {
        mcp_rpc_error(w, rid, env->id.len, -32602, "invalid params: a taskId string is required");
        return true;
    }
    const char *id = frame + t.id.off;
    mcp_call_t *c = live_find(w, id, t.id.len);
    if (c != NULL && c->cc.state == TG_CALL_INFLIGHT) {
        *task = c;
        return false; /* the agent answers; the answer is read (mcp_task_on_pass_answer) */
    }
    mcp_task_end_t *e = ended_find(w, id, t.id.len);
    if (c == NULL && e == NULL) {
        /* Not this session's: another caller's, or none. Said the same way
         * for both, so a caller learns nothing of others' tasks. */
        tg_audit_ev_t ev;
        tg_adm_audit_refused(&ev, agent_name(w), w->caller, "task_not_owned", env->params.len);
        emit(w, &ev);
        mcp_rpc_error(w, rid, env->id.len, -32602,
                      "invalid params: no task of this session has that taskId");
        return true;
    }
    if (c != NULL || (e != NULL && e->fate >= 0)) {
        /* toolgate ended it (or is ending it: a zombie awaiting the
         * agent's answer to tasks/cancel) */
        deny_ended(w, rid, env->id.len, e != NULL && e->fate >= 0 ? (tg_deny_code_t)e->fate
                                                                  : TG_DENY_TIMEOUT);
        return true;
    }
    return false; /* ended by the agent: it still answers for it */
}

void mcp_task_on_pass_answer(mcp_sess_t *w, mcp_call_t *p, const char *frame, size_t len,
                             const tg_mcp_env_t *env)
{
    mcp_call_t *c = mcp_call_at(w->ag, p->task_of);
    if (c->kind != K_CALL || !c->task || c->cc.id != p->task_of_id || c->w != w ||
        c->cc.state != TG_CALL_INFLIGHT)
        return;
    if (p->task_op == TG_TASK_OP_RESULT) {
        /* tasks/result blocks until the task ends: any answer is its end */
        task_end(w, c, env->has_error ? TG_TASK_FAILED : TG_TASK_COMPLETED);
        return;
    }
    tg_jspan_t result;
    tg_mcp_task_t t;
    if (!env->has_result || tg_mcp_frame_member(frame, len, "result", &result) != 1 ||
        tg_mcp_task_read(frame, result, &t) < 0)
        return;
    tg_task_status_t st = tg_mcp_task_status(frame, t.status);
    if (st != TG_TASK_LIVE)
        task_end(w, c, st);
}

void mcp_task_on_status(mcp_sess_t *w, const char *frame, const tg_mcp_env_t *env)
{
    tg_mcp_task_t t;
    if (tg_mcp_task_read(frame, env->params, &t) < 0 || t.id.type != TG_J_STRING)
        return;
    tg_task_status_t st = tg_mcp_task_status(frame, t.status);
    if (st == TG_TASK_LIVE)
        return;
    mcp_call_t *c = live_find(w, frame + t.id.off, t.id.len);
    if (c != NULL && c->cc.state == TG_CALL_INFLIGHT)
        task_end(w, c, st);
}

/* ---- toolgate ends a task ------------------------------------------------ */

bool mcp_task_denied(mcp_sess_t *w, mcp_call_t *c, const tg_denial_t *d)
{
    if (!c->task)
        return false;
    /* Its tasks/... requests waiting for the agent get the denial now; the
     * agent's late answers to them find no entry. */
    for (uint32_t i = 0; i < w->ag->r.tab.n; i++) {
        mcp_call_t *p = mcp_call_at(w->ag, i);
        if (p->kind == K_PASS && p->w == w && p->task_op != TG_TASK_OP_NONE &&
            p->task_of == c->cc.idx && p->task_of_id == c->cc.id) {
            mcp_deny(w, p->caller_id, p->caller_id_len, d);
            mcp_call_free(p);
        }
    }
    ended_add(w, c, (int)d->code);
    return true;
}

bool mcp_task_cancel_at_agent(mcp_sess_t *w, mcp_call_t *c)
{
    if (!c->task)
        return false;
    if (!mcp_agent_writable(w))
        return true;
    /* tasks/cancel for the agent's own task: its answer (any) proves the
     * agent alive and frees the slot, as a pong does (K_PING). */
    mcp_call_t *p = mcp_call_alloc(w, K_PING);
    if (p == NULL)
        return true; /* kill_grace still bounds the zombie */
    p->ping_for = c->cc.idx;
    p->ping_for_id = c->cc.id;
    char head[96];
    int n = snprintf(head, sizeof(head),
                     "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"method\":\"tasks/cancel\",\"params\":{\"taskId\":",
                     p->cc.id);
    tg_out_copy(&w->inst->a.p.wr, head, (size_t)n);
    tg_out_copy(&w->inst->a.p.wr, c->task_id, c->task_id_len);
    tg_out_copy(&w->inst->a.p.wr, "}}\n", 3);
    return true;
}
