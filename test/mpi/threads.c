/*
 * threads — MPI_THREAD_MULTIPLE waiters: several threads of rank 1 block in MPI_Recv at once
 * while rank 0 keeps them waiting, then rank 0 sends to them one at a time, in reverse order,
 * with pauses longer than the progress engine's spin and yield phases; each thread answers
 * its message.  Checked: every thread gets its own message (tag and contents) and answers,
 * and rank 1 does not burn the processor while all its threads wait (the four and its main
 * thread): its CPU time over the first wait (1 s, nothing arriving) must stay under a quarter
 * of the wall time (every waiter
 * polling and yielding for good used to take both cores).  Rank 0 prints "ok - threads: ..."
 * or "not ok - threads: ..."; exit 1 on a failure.  Run with 2 ranks.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NTHREADS 4
#define NINTS    1000 /* eager: one packet per message */
#define QUIET_S  1.0  /* how long all of rank 1's threads wait with nothing arriving */

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank 1's thread t: receive tag t from rank 0, check it, send it back with tag 100 + t. */
static void *receiver(void *arg)
{
    int t = (int)(long)arg, *buf = malloc(NINTS * sizeof(int)), bad = 0;
    MPI_Status st;
    MPI_Recv(buf, NINTS, MPI_INT, 0, t, MPI_COMM_WORLD, &st);
    for (int i = 0; i < NINTS; i++)
        bad += buf[i] != t * NINTS + i;
    if (bad || st.MPI_TAG != t)
        fprintf(stderr, "thread %d: tag %d, %d wrong ints\n", t, st.MPI_TAG, bad);
    buf[0] = bad || st.MPI_TAG != t ? -1 : t;
    MPI_Send(buf, NINTS, MPI_INT, 0, 100 + t, MPI_COMM_WORLD);
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, rank, size, fails = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE || size != 2) {
        if (rank == 0)
            printf("not ok - threads: needs MPI_THREAD_MULTIPLE (got %d) and 2 ranks (got %d)\n",
                   provided, size);
        MPI_Finalize();
        return 1;
    }
    double cpu_share = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        pthread_t th[NTHREADS];
        double c0 = cpu_seconds(), w0 = MPI_Wtime();
        for (int t = 0; t < NTHREADS; t++)
            pthread_create(&th[t], NULL, receiver, (void *)(long)t);
        /* rank 0 sends nothing for QUIET_S: all threads wait; it tells us when it starts */
        int started;
        MPI_Recv(&started, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        cpu_share = (cpu_seconds() - c0) / (MPI_Wtime() - w0);
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(th[t], NULL);
        MPI_Send(&cpu_share, 1, MPI_DOUBLE, 0, 98, MPI_COMM_WORLD);
    } else {
        int *buf = malloc(NINTS * sizeof(int));
        pause_ms((long)(QUIET_S * 1000));
        int started = 1;
        MPI_Send(&started, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
        double w0 = MPI_Wtime();
        for (int t = NTHREADS - 1; t >= 0; t--) {
            pause_ms(50); /* longer than spin + yield: rank 1's waiter is asleep by now */
            for (int i = 0; i < NINTS; i++)
                buf[i] = t * NINTS + i;
            MPI_Send(buf, NINTS, MPI_INT, 1, t, MPI_COMM_WORLD);
            MPI_Status st;
            MPI_Recv(buf, NINTS, MPI_INT, 1, 100 + t, MPI_COMM_WORLD, &st);
            if (buf[0] != t) {
                printf("not ok - threads: thread %d of rank 1 got a wrong message\n", t);
                fails++;
            }
        }
        double answers = MPI_Wtime() - w0;
        MPI_Recv(&cpu_share, 1, MPI_DOUBLE, 1, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!fails)
            printf("ok - threads: %d threads of rank 1 each got their message and answered "
                   "(%.3f s for %d rounds with 50 ms pauses)\n",
                   NTHREADS, answers, NTHREADS);
        if (cpu_share < 0.25)
            printf("ok - threads: rank 1 with %d threads waiting used %.1f%% of a core\n",
                   NTHREADS + 1, 100 * cpu_share);
        else {
            printf("not ok - threads: rank 1 with %d threads waiting used %.1f%% of a core "
                   "(limit 25%%): its waiters poll instead of sleeping\n",
                   NTHREADS + 1, 100 * cpu_share);
            fails++;
        }
        free(buf);
    }
    MPI_Bcast(&fails, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return fails ? 1 : 0;
}
