/*
 * window — the work of osu_mbw_mr's windows without its waiting, for instruction counts
 * (test/bench/msgrate/run): rank 1 posts a window of MPI_Irecv's, lets rank 0 send it (W
 * MPI_Isend's of S bytes and an MPI_Waitall), sleeps until all of it must be there, then
 * completes it with one MPI_Waitall.  Neither side's MPI_Isend, MPI_Irecv or MPI_Waitall then
 * waits for the other: under callgrind their instructions are the work per message, the same
 * in every run (a timed run's counts include spinning, which follows the machine's state).
 * The first WARMUP windows (connections, rings, pools) are not counted: callgrind's counters
 * are zeroed after them (CALLGRIND_ZERO_STATS; a no-op outside valgrind).
 *   mpirun -np 2 window [-n WINDOWS] [-x WARMUP] [-w W] [-s BYTES] [-u SLEEP_US]
 * Prints "window: windows N w W bytes S" on rank 0.  Exit status 1 on bad arguments or data.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

#define MAX_W 1024

int main(int argc, char **argv)
{
    int rank, size, windows = 200, warmup = 10, w = 64, bytes = 8, sleep_us = 20000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        int *to = NULL;
        if (!strcmp(argv[i], "-n"))
            to = &windows;
        else if (!strcmp(argv[i], "-x"))
            to = &warmup;
        else if (!strcmp(argv[i], "-w"))
            to = &w;
        else if (!strcmp(argv[i], "-s"))
            to = &bytes;
        else if (!strcmp(argv[i], "-u"))
            to = &sleep_us;
        if (!to || i + 1 == argc) {
            if (rank == 0)
                fprintf(stderr,
                        "usage: window [-n WINDOWS] [-x WARMUP] [-w W] [-s BYTES] [-u SLEEP_US]\n");
            MPI_Finalize();
            return 1;
        }
        *to = atoi(argv[++i]);
    }
    if (size != 2 || windows < 1 || warmup < 0 || w < 1 || w > MAX_W || bytes < 0 ||
        bytes > 65536 || sleep_us < 0) {
        if (rank == 0)
            fprintf(stderr, "window: 2 ranks, 1 <= W <= %d, 0 <= BYTES <= 65536\n", MAX_W);
        MPI_Finalize();
        return 1;
    }
    static MPI_Request q[MAX_W];
    static MPI_Status st[MAX_W]; /* (MPI_STATUSES_IGNORE trips gcc 12's -Wstringop-overflow) */
    char *buf = calloc((size_t)bytes + 1, 1), ack = 0;
    int bad = 0;
    for (int it = 0; it < warmup + windows; it++) {
        if (it == warmup)
            CALLGRIND_ZERO_STATS;
        if (rank == 1) {
            for (int k = 0; k < w; k++)
                MPI_Irecv(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &q[k]);
            MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
            struct timespec nap = {sleep_us / 1000000, (long)(sleep_us % 1000000) * 1000};
            nanosleep(&nap, NULL); /* the window arrives meanwhile */
            MPI_Waitall(w, q, st);
            if (bytes && buf[bytes - 1] != (char)it)
                bad = 1;
            MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (bytes)
                buf[bytes - 1] = (char)it;
            for (int k = 0; k < w; k++)
                MPI_Isend(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, &q[k]);
            MPI_Waitall(w, q, st);
            MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("window: windows %d w %d bytes %d%s\n", windows, w, bytes,
               any ? " (data wrong)" : "");
    free(buf);
    MPI_Finalize();
    return any;
}
