/*
 * wakefence.c — the asymmetric fence between local senders and sleeping receivers
 * (wakefence.h).
 */
#include "wakefence.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "settings.h"

/* -1: not asked yet; else whether the kernel has the global expedited barrier (threads may
 * ask at once: each gets the same answer). */
static int barrier_known = -1;

static int kernel_has_barrier(void)
{
    int known = __atomic_load_n(&barrier_known, __ATOMIC_RELAXED);
    if (known < 0) {
        long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        known = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                (q & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
        __atomic_store_n(&barrier_known, known, __ATOMIC_RELAXED);
    }
    return known;
}

int pulc_wakefence_register(void)
{
    const char *mode = psp_setting_str("PSP_WAKE_FENCE");
    if (mode && strcmp(mode, "full") == 0)
        return 0;
    if (mode && *mode && strcmp(mode, "light") != 0)
        PSP_ERROR("PSP_WAKE_FENCE=%s: not light or full; using light", mode);
    if (!kernel_has_barrier())
        return 0;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0) {
        PSP_WARN("membarrier registration failed (%s): local sends use a full fence",
                 strerror(errno));
        return 0;
    }
    return 1;
}

int pulc_wakefence_sleep(void)
{
    /* Whatever this process chose, other processes may send with the light fence, so the
     * barrier runs whenever the kernel has it.  It is a full fence for the caller too. */
    if (!kernel_has_barrier()) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return 0;
    }
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return -1;
    }
    return 0;
}
