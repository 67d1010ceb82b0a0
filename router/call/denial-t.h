/* The denial codes (type only, as HAProxy's -t.h headers): what the call
 * room's denials (denial.h) and the counters of every room
 * (gateway/metrics.h) both name. Includes nothing of toolgate. */
#ifndef TG_ROUTER_CALL_DENIAL_T_H
#define TG_ROUTER_CALL_DENIAL_T_H

#include <stdint.h>

typedef enum tg_deny_code {
    TG_DENY_RATE = 0,         /* rate_limit_exceeded        -32060 */
    TG_DENY_CONCURRENCY,      /* concurrency_limit_exceeded -32061 */
    TG_DENY_TIMEOUT,          /* timeout                    -32062 */
    TG_DENY_FRAME,            /* frame_too_large            -32063 */
    TG_DENY_UNAVAILABLE,      /* agent_unavailable          -32064 */
    TG_DENY_RESOURCE,         /* resource_limit_exceeded    -32065 */
    TG_DENY_CALLER,           /* caller_not_allowed         -32066 */
    TG_DENY_STORE,            /* rate_store_unavailable     -32067 */
    TG_DENY_SHUTTING_DOWN,    /* shutting_down              -32068 */
    TG_DENY_NOT_ALLOWED,      /* tool_not_allowed           -32069 (a policy rule) */
    TG_DENY__COUNT
} tg_deny_code_t;

#define TG_DENY_ABSENT INT64_MIN

#endif
