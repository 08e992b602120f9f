/*
 * wakefence.h — the ordering between a local sender and a receiver going to sleep.
 *
 * A sender puts a message into a ring (lring.h) and then looks at the receiving port's
 * sleeper count; a receiver counts itself among the sleepers and then looks at its rings.
 * Each side's store must be visible before its load, or both miss each other and the
 * receiver sleeps with a message waiting.  A full fence on every send stalls the sender
 * until its ring store has left for the receiver's cache: osu_mbw_mr on one node spent most
 * of the send path there.  So the fence is asymmetric where the kernel allows it: streaming
 * senders only keep the compiler from reordering (a ping-pong's send keeps the full fence,
 * which was faster there: local.c), and a receiver about to sleep runs
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which puts a full fence into every CPU that
 * runs a registered process at that moment.  Sleeping is rare (after PSP_SPIN_US +
 * PSP_YIELD_US of waiting), sending is not.  PSP_WAKE_FENCE=full keeps the full fence.
 */
#ifndef PSPORT_PULC_WAKEFENCE_H
#define PSPORT_PULC_WAKEFENCE_H

/* Once per process, before its first local send: registers it for the sleepers' barrier.
 * Returns 1 when its sends may use the light fence (registered), 0 when they must use the
 * full one (no kernel support, PSP_WAKE_FENCE=full, or registration refused). */
int pulc_wakefence_register(void);

/* A sender's fence between its ring store and its look at the sleeper count; light is what
 * pulc_wakefence_register() returned for this process. */
static inline void pulc_wakefence_send(int light)
{
    if (light)
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* A sleeper's fence, after it counted itself and before it looks at the rings.  Returns 0,
 * or -1 when light senders may exist but the barrier failed: the caller must then not sleep
 * longer than a millisecond (a message put meanwhile may not wake it). */
int pulc_wakefence_sleep(void);

#endif
