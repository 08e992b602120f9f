/*
 * psport_progress.c — the progress engine: one pass polls PULC (the NIC, local deliveries),
 * finishes sends, hands arrived packets to CH3, finishes rendezvous receives and runs
 * MPICH's progress hooks (non-blocking collectives).  A blocking wait polls until a request
 * completes — spinning first (waking a sleeping process costs ~38 us on this kind of
 * machine, a poll ~1 us), then yielding the processor, then sleeping in PULC until something
 * arrives for our port (PSP_SPIN_US, PSP_YIELD_US: co-scheduling as in pulc/README.md).
 * While spinning it looks at the local rings alone between passes (MPIDI_CH3I_Recv_look), so
 * a message from a rank on this node is handled as it comes; MPICH's hooks and the NIC still
 * run at every pass, at most 32 looks apart.
 * With MPI_THREAD_MULTIPLE a waiter never sleeps holding MPICH's global lock: it yields the
 * lock between passes, so other threads' calls get in and their completions wake it.  Only
 * one thread of a process polls that way; the others wait on a condition variable until it
 * leaves (see poller_enter()).
 */
#include "mpidi_ch3_impl.h"

#include <limits.h>
#include <stdio.h>
#include <time.h>

#include "settings.h"

volatile unsigned int MPIDI_CH3I_progress_completion_count = 0;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spin then yield phase lengths (ns), from the PULC settings; read once. */
static void phases(uint64_t *spin, uint64_t *yield)
{
    static uint64_t s = UINT64_MAX, y;
    if (s == UINT64_MAX) {
        char err[256];
        uint64_t v;
        s = psp_setting_u64("PSP_SPIN_US", 0, 10000000, &v, err, sizeof err) ? 50000 : v * 1000;
        y = psp_setting_u64("PSP_YIELD_US", 0, 10000000, &v, err, sizeof err) ? 2000000 : v * 1000;
    }
    *spin = s;
    *yield = y;
}

/*
 * A send PULC completed when it posted it (eager data) that the NIC could not deliver after
 * all shows as an error on our port (the peer's node died, or restarted under the job): MPI
 * cannot go on without the message, so it is an MPI error, naming a rank on that node, where
 * the job used to wait forever.  Looked at every 64th pass and before sleeping.
 */
static int lost_sends(void)
{
    PSP_PortId about = 0;
    int err = PSP_GetPortError(MPIDI_CH3I_port, &about);
    if (!err)
        return MPI_SUCCESS;
    int rank = -1;
    MPIDI_PG_t *pg = MPIDI_Process.my_pg;
    for (int i = 0; pg && i < pg->size && rank < 0; i++)
        if (pg->vct[i].ch.port && PSP_PORTID_NODE(pg->vct[i].ch.port) == PSP_PORTID_NODE(about))
            rank = i;
    char why[160];
    snprintf(why, sizeof why, "%s (node %u): a message already handed to the NIC was lost",
             PSP_StrError(err), (unsigned)PSP_PORTID_NODE(about));
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                "**psport_send", "**psport_send %d %s", rank, why);
}

/* One pass over everything; *made set when anything happened for CH3, *moved when PULC
 * moved this process's traffic (PSP_Progress: sends posted, frames in, rawdata copied).  MPI
 * error code. */
static int pass(int *made, int *moved)
{
    int hooked = 0;
    int mpi_errno = MPIR_Progress_hook_exec_all(&hooked);
    MPIR_ERR_CHECK(mpi_errno);
    /* What a hook did completes no request a waiter counts: CH3's RMA hook issues operations,
     * and one PULC finishes at once leaves its target done with no request freed.  A waiter
     * (MPI_Win_flush_local, for one) must look again, so the hook's progress counts as a
     * completion, as CH3's other channels count it.  Without it such a wait never ended. */
    if (hooked) {
        *made = 1;
        MPIDI_CH3_Progress_signal_completion();
    }
    if (!MPIDI_CH3I_port)
        return MPI_SUCCESS;
    int rc = PSP_Progress();
    if (rc < 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_pulc", "**psport_pulc %s",
                             PSP_StrError(rc));
    *moved |= rc;
    static unsigned passes;
    if ((++passes & 63) == 0 && (mpi_errno = lost_sends()) != MPI_SUCCESS)
        goto fn_fail;
    mpi_errno = MPIDI_CH3I_Send_progress(made);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_Recv_progress(made);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_Rndv_progress(made);
    MPIR_ERR_CHECK(mpi_errno);
fn_fail:
    return mpi_errno;
}

/*
 * With MPI_THREAD_MULTIPLE one thread at a time does a blocking wait's polling; the others
 * sleep on poller_left until it leaves, which it does whenever anything completes.  Every
 * waiter polling and yielding on its own (multisend2: five threads in each of five ranks on
 * two cores) kept the thread that held the NIC lock off the processor for seconds under the
 * kernel's autogroup scheduling (one group per rank's session), so the node's firmware stood
 * still and its peers gave it up (PSP_PEER_TIMEOUT_MS).  All of it is guarded by MPICH's
 * global lock.
 */
static int poller_busy;
static MPID_Thread_id_t poller_id;
static MPID_Thread_cond_t poller_left;
static int poller_left_made;
static int poller_asleep; /* in poller_sleep(), the global lock let go */
#define POLLER_SLEEP_MS 10

/* Called holding the global lock at the start of a threaded blocking wait: 1 when this thread
 * is now the poller (it must call poller_leave()), 0 when it is one already (a nested wait),
 * -1 when another thread's polling completed something meanwhile (the caller returns and its
 * caller looks at its request). */
static int poller_enter(MPID_Progress_state *state)
{
    int err = 0;
    if (!poller_left_made) {
        MPID_Thread_cond_create(&poller_left, &err);
        poller_left_made = 1;
    }
    MPID_Thread_id_t self;
    MPID_Thread_self(&self);
    if (poller_busy && poller_asleep && MPIDI_CH3I_port)
        PSP_WakePort(MPIDI_CH3I_port); /* we are here to post or wait: the poller must look */
    while (poller_busy) {
        int same = 0;
        MPID_Thread_same(&self, &poller_id, &same);
        if (same)
            return 0;
        if (state->ch.completion_count != MPIDI_CH3I_progress_completion_count) {
            state->ch.completion_count = MPIDI_CH3I_progress_completion_count;
            return -1;
        }
        MPID_Thread_cond_wait(&poller_left, &MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX, &err);
    }
    poller_busy = 1;
    poller_id = self;
    return 1;
}

/*
 * The poller sleeps until something arrives for our port (idle, ticket from PSP_PortIdle), or
 * 1 ms while its sends wait for ACKs (not idle), with the global lock let go (as MPICH's own
 * yield lets it go, however deep the caller holds it): a threaded rank waiting used to poll
 * and yield for good.  PULC's sleep touches only shared memory, so other threads may call MPI
 * meanwhile; one that starts a blocking wait wakes us (poller_enter()), and the sleep is
 * bounded for sends another thread queues and then leaves to progress.
 */
static void poller_sleep(int idle, uint32_t ticket)
{
    MPID_Thread_mutex_t *m = &MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX;
    int err = 0, count = m->count;
    MPID_Thread_id_t owner = m->owner;
    poller_asleep = 1;
    m->count = 0;
    m->owner = 0;
    MPIDU_Thread_mutex_unlock(m, &err);
    if (idle) {
        PSP_SleepPort(MPIDI_CH3I_port, ticket, POLLER_SLEEP_MS);
    } else {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    MPIDU_Thread_mutex_lock(m, &err, MPL_THREAD_PRIO_LOW);
    m->count = count;
    m->owner = owner;
    poller_asleep = 0;
}

/* The poller leaves (holding the global lock): the waiting threads look at their requests
 * and one of them polls next. */
static void poller_leave(void)
{
    int err = 0;
    poller_busy = 0;
    MPID_Thread_cond_broadcast(&poller_left, &err);
}

int MPIDI_CH3I_Progress(int blocking, MPID_Progress_state *state)
{
    int mpi_errno = MPI_SUCCESS, made = 0, moved = 0;
    if (!blocking) {
        mpi_errno = pass(&made, &moved);
        if (made && poller_asleep)
            PSP_WakePort(MPIDI_CH3I_port); /* what completed may be a waiting thread's */
        return mpi_errno;
    }

    int polling = 0;
    if (MPIR_IS_THREADED && (polling = poller_enter(state)) < 0)
        return MPI_SUCCESS;
    uint64_t spin, yield;
    phases(&spin, &yield);
    /* When the wait began, or last made progress (0: not read yet).  Read at the first pass
     * that finds nothing and every 16th after: a wait that a pass ends, or a stream whose
     * passes all handle packets, reads no clock (clock_gettime was 3 % of osu_mbw_mr's
     * receiver, read at every pass that handled a packet). */
    uint64_t t0 = 0;
    int shared = PSP_YieldShared(); /* kept up to date by the yields below */
    for (unsigned turn = 0;; turn++) {
        made = 0;
        mpi_errno = pass(&made, &moved);
        MPIR_ERR_CHECK(mpi_errno);
        if (state->ch.completion_count != MPIDI_CH3I_progress_completion_count)
            break;
        if (made) { /* a hook or a packet did something: CH3 may want to look */
            t0 = 0;
            turn = UINT_MAX; /* the next turn is 0: the clock is read if it finds nothing */
            moved = 0;
            continue;
        }
        uint64_t waited = 0;
        if ((turn & 15) == 0) {
            uint64_t now = now_ns();
            /* Frames of ours moving (a rendezvous's data) are no reason to sleep: spinning
             * and yielding count from when they stop.  osu_bibw at 4 MiB between two nodes
             * slept every PSP_SPIN_US + PSP_YIELD_US, leaving the firmware to psid's NIC
             * thread: 1108-1461 MB/s, 2145-2204 with the ranks never sleeping. */
            if (!t0 || moved)
                t0 = now;
            moved = 0;
            waited = now - t0;
        }
        uint32_t ticket;
        int may_sleep = waited >= spin + yield && MPIDI_CH3I_port; /* past spin and yield */
        if (MPIR_IS_THREADED) {
            if (may_sleep && MPIDI_CH3I_Send_pending()) {
                poller_sleep(0, 0); /* 1 ms, as below: the ACKs that end the send wake nobody */
            } else if (may_sleep && PSP_PortIdle(MPIDI_CH3I_port, &ticket)) {
                poller_sleep(1, ticket);
            } else {
                MPID_THREAD_CS_YIELD(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
                if (waited >= spin || shared)
                    shared = PSP_Yield();
            }
        } else if (may_sleep && MPIDI_CH3I_Send_pending()) {
            /* A send still in PULC's hands ends with the peer's ACKs (its receiver may have
             * gone off to compute: they come when psid's NIC thread runs there), which wake
             * nobody: sleep 1 ms, then look (the next pass takes them).  PSRS between two
             * nodes: the root of a 16 MB MPI_Scatterv took 110 ms asleep on its port below,
             * 19 ms like its receiver with this. */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        } else if (may_sleep) {
            /* Asleep until something arrives for our port (PULC spins and yields briefly
             * first); a bounded sleep, so hooks and sends run now and then. */
            mpi_errno = lost_sends();
            MPIR_ERR_CHECK(mpi_errno);
            int rc = PSP_WaitPort(MPIDI_CH3I_port, 100);
            if (rc < 0 && rc != -ETIMEDOUT)
                MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_pulc", "**psport_pulc %s",
                                     PSP_StrError(rc));
        } else if (waited >= spin || shared) {
            /* Past the spin, or at once while the CPU is shared (a rank that shares it with
             * the peer it waits for only keeps that peer off it by spinning: on one node
             * osu_mbw_mr ran at 4.6 MB/s so), yield. */
            shared = PSP_Yield();
        } else if (MPIDI_CH3I_port && !MPIDI_CH3I_Send_pending() && !MPIDI_CH3I_Rndv_pending()) {
            /* Spinning: look at the local rings alone until something comes (a pass is
             * MPIDI_CH3I_Recv_look's reason); what it took may have been ours. */
            mpi_errno = MPIDI_CH3I_Recv_look();
            MPIR_ERR_CHECK(mpi_errno);
            if (state->ch.completion_count != MPIDI_CH3I_progress_completion_count)
                break;
        }
    }
fn_fail:
    state->ch.completion_count = MPIDI_CH3I_progress_completion_count;
    if (polling > 0)
        poller_leave();
    return mpi_errno;
}

int MPIDI_CH3I_Progress_finalize(void)
{
    if (poller_left_made) {
        int err = 0;
        MPID_Thread_cond_destroy(&poller_left, &err);
        poller_left_made = 0;
    }
    return MPI_SUCCESS;
}
