/* Test helper: run the rest of a test as an unprivileged toolgate would,
 * without CAP_SYS_RESOURCE (root could otherwise raise any hard rlimit). */
#ifndef TG_TESTS_CAPS_H
#define TG_TESTS_CAPS_H

#include <criterion/criterion.h>

#include <errno.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Drop CAP_SYS_RESOURCE from this process (effective, permitted,
 * inheritable) and from what its children may exec into. A process
 * without the capability is left as it is. */
static inline void tgc_drop_sys_resource(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    uint32_t bit = 1u << (CAP_SYS_RESOURCE % 32);
    int w = CAP_SYS_RESOURCE / 32;

    (void)prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0); /* EPERM without CAP_SETPCAP */
    cr_assert_eq(syscall(SYS_capget, &h, d), 0);
    d[w].effective &= ~bit;
    d[w].permitted &= ~bit;
    d[w].inheritable &= ~bit;
    cr_assert_eq(syscall(SYS_capset, &h, d), 0, "capset: %s", strerror(errno));
}

#endif
