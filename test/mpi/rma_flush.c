/*
 * rma_flush — passive-target RMA whose first operation is too large to carry the lock request
 * (CH3 piggybacks it only up to 64 KiB): every rank but 0 takes MPI_Win_lock_all, accumulates
 * 128 KiB, 1 MiB and 2 MiB of ints into rank 0's window, each followed by MPI_Win_flush_local,
 * then MPI_Win_flush and MPI_Win_unlock_all; rank 0 checks the sums.  CH3 sends the lock
 * first and issues the operation from its progress hook once the lock is granted; when the
 * channel finishes that send at once, no request is left to complete, and a waiter in
 * MPI_Win_flush_local saw nothing happen: it waited for ever between two nodes.  Rank 0 prints
 * "ok - rma_flush: ..." or "not ok - rma_flush: ..."; exit 1 on a wrong sum.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_INTS (2 * 262144) /* 2 MiB */
#define ROUNDS   3

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int counts[] = {32768, 262144, MAX_INTS};
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);
    int *tar, *orig;
    MPI_Alloc_mem(MAX_INTS * sizeof(int), MPI_INFO_NULL, &tar);
    MPI_Alloc_mem(MAX_INTS * sizeof(int), MPI_INFO_NULL, &orig);
    for (int i = 0; i < MAX_INTS; i++) {
        tar[i] = 0;
        orig[i] = rank;
    }
    MPI_Win win;
    MPI_Win_create(tar, MAX_INTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    double t = MPI_Wtime();
    MPI_Win_lock_all(0, win);
    if (rank != 0)
        for (int c = 0; c < ncounts; c++) {
            for (int r = 0; r < ROUNDS; r++) {
                MPI_Accumulate(orig, counts[c], MPI_INT, 0, 0, counts[c], MPI_INT, MPI_SUM, win);
                MPI_Win_flush_local(0, win);
            }
            MPI_Win_flush(0, win);
        }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD); /* every origin's operations are done at rank 0 */
    t = MPI_Wtime() - t;
    int bad = 0;
    if (rank == 0) {
        /* word i got ROUNDS * (sum of the other ranks) from each count that reaches it */
        long others = (long)size * (size - 1) / 2;
        for (int i = 0; i < MAX_INTS && !bad; i++) {
            long want = 0;
            for (int c = 0; c < ncounts; c++)
                if (i < counts[c])
                    want += ROUNDS * others;
            if (tar[i] != want) {
                fprintf(stderr, "rma_flush: word %d is %d, want %ld\n", i, tar[i], want);
                bad = 1;
            }
        }
        printf("%s - rma_flush: %d ranks accumulate 128 KiB .. 2 MiB under MPI_Win_lock_all with "
               "MPI_Win_flush_local after each (%.2f s)\n",
               bad ? "not ok" : "ok", size, t);
    }
    MPI_Win_free(&win);
    MPI_Free_mem(tar);
    MPI_Free_mem(orig);
    MPI_Finalize();
    return bad;
}
