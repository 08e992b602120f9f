/*
 * psport_progress.c — the progress engine: one pass polls PULC (the NIC, local deliveries),
 * finishes sends, hands arrived packets to CH3, finishes rendezvous receives and runs
 * MPICH's progress hooks (non-blocking collectives).  A blocking wait polls until a request
 * completes — spinning first (waking a sleeping process costs ~38 us on this kind of
 * machine, a poll ~1 us), then yielding the processor, then sleeping in PULC until something
 * arrives for our port (PSP_SPIN_US, PSP_YIELD_US: co-scheduling as in pulc/README.md).
 * With MPI_THREAD_MULTIPLE a waiter never sleeps holding MPICH's global lock: it yields the
 * lock between passes, so other threads' calls get in and their completions wake it.
 */
#include "mpidi_ch3_impl.h"

#include <sched.h>
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

int MPIDI_CH3I_Progress(int blocking, MPID_Progress_state *state)
{
    int mpi_errno = MPI_SUCCESS, made = 0, moved = 0;
    if (!blocking)
        return pass(&made, &moved);

    uint64_t spin, yield;
    phases(&spin, &yield);
    uint64_t t0 = now_ns();
    for (unsigned turn = 0;; turn++) {
        made = 0;
        mpi_errno = pass(&made, &moved);
        MPIR_ERR_CHECK(mpi_errno);
        if (state->ch.completion_count != MPIDI_CH3I_progress_completion_count)
            break;
        if (made) { /* a hook or a packet did something: CH3 may want to look */
            t0 = now_ns();
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
            if (moved)
                t0 = now;
            moved = 0;
            waited = now - t0;
        }
        if (MPIR_IS_THREADED) {
            MPID_THREAD_CS_YIELD(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
            if (waited >= spin)
                sched_yield();
        } else if (waited >= spin + yield && MPIDI_CH3I_port && MPIDI_CH3I_Send_pending()) {
            /* A send still in PULC's hands ends with the peer's ACKs (its receiver may have
             * gone off to compute: they come when psid's NIC thread runs there), which wake
             * nobody: sleep 1 ms, then look (the next pass takes them).  PSRS between two
             * nodes: the root of a 16 MB MPI_Scatterv took 110 ms asleep on its port below,
             * 19 ms like its receiver with this. */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        } else if (waited >= spin + yield && MPIDI_CH3I_port) {
            /* Asleep until something arrives for our port (PULC spins and yields briefly
             * first); a bounded sleep, so hooks and sends run now and then. */
            mpi_errno = lost_sends();
            MPIR_ERR_CHECK(mpi_errno);
            int rc = PSP_WaitPort(MPIDI_CH3I_port, 100);
            if (rc < 0 && rc != -ETIMEDOUT)
                MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_pulc", "**psport_pulc %s",
                                     PSP_StrError(rc));
        } else if (waited >= spin) {
            sched_yield();
        }
    }
fn_fail:
    state->ch.completion_count = MPIDI_CH3I_progress_completion_count;
    return mpi_errno;
}

int MPIDI_CH3I_Progress_finalize(void)
{
    return MPI_SUCCESS;
}
