/*
 * big — one contiguous message longer than a PULC message (4 GiB - 1) each way between ranks
 * 0 and 1: MPI_Send to an MPI_Irecv, then MPI_Isend to an MPI_Recv back.  Between nodes the
 * receiver opens its buffer to the sender in pieces (PSP_RNDV_CHUNK), on one node it reads the
 * sender's buffer at once; either way every 8-byte word is checked, and the count the status
 * gives.  Rank 0 prints "ok - big: ..." / "not ok - big: ..." per direction; exit 1 on a
 * failure.  Usage: big [bytes] (default 4 GiB + 4 KiB; a multiple of 8).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The word at index i of a message sent by rank `from`. */
static uint64_t word(int from, uint64_t i)
{
    return (i * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)from << 56) ^ i;
}

/* Fill and send to the other rank, or receive from it and check: 0 right, 1 wrong. */
static int transfer(int rank, int from, uint64_t *b, uint64_t words)
{
    const int to = 1 - from;
    int bad = 0;
    if (words > INT32_MAX) /* counts are ints: a message of more words needs a bigger type */
        return 1;
    if (rank == from) {
        for (uint64_t i = 0; i < words; i++)
            b[i] = word(from, i);
        if (from == 0) {
            MPI_Send(b, (int)words, MPI_UINT64_T, to, 5, MPI_COMM_WORLD);
        } else {
            MPI_Request rq;
            MPI_Isend(b, (int)words, MPI_UINT64_T, to, 5, MPI_COMM_WORLD, &rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
    } else {
        memset(b, 0, words * sizeof *b);
        MPI_Status st;
        if (from == 0) {
            MPI_Request rq;
            MPI_Irecv(b, (int)words, MPI_UINT64_T, from, 5, MPI_COMM_WORLD, &rq);
            MPI_Wait(&rq, &st);
        } else {
            MPI_Recv(b, (int)words, MPI_UINT64_T, from, 5, MPI_COMM_WORLD, &st);
        }
        int count = -1;
        MPI_Get_count(&st, MPI_UINT64_T, &count);
        if ((uint64_t)count != words) {
            fprintf(stderr, "big: rank %d: count %d, want %llu\n", rank, count,
                    (unsigned long long)words);
            bad = 1;
        }
        for (uint64_t i = 0; i < words && !bad; i++)
            if (b[i] != word(from, i)) {
                fprintf(stderr, "big: rank %d: word %llu of %llu wrong\n", rank,
                        (unsigned long long)i, (unsigned long long)words);
                bad = 1;
            }
    }
    return bad; /* (the receiver's; main combines the ranks' verdicts) */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (4ull << 30) + 4096;
    if (size != 2 || bytes % 8) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 big [bytes, a multiple of 8]\n");
        MPI_Finalize();
        return 2;
    }
    uint64_t *b = malloc(bytes);
    int nomem = b == NULL, any = 0;
    MPI_Allreduce(&nomem, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        if (rank == 0)
            printf("not ok - big: no memory for %llu bytes on a rank\n", (unsigned long long)bytes);
        MPI_Finalize();
        return 1;
    }
    int bad = 0;
    for (int from = 0; from < 2; from++) {
        double t = MPI_Wtime();
        int b1 = transfer(rank, from, b, bytes / 8);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &b1, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%s - big: %llu bytes, rank %d to rank %d (%s): %s (%.1f s)\n",
                   b1 ? "not ok" : "ok", (unsigned long long)bytes, from, 1 - from,
                   from ? "MPI_Isend to MPI_Recv" : "MPI_Send to MPI_Irecv",
                   b1 ? "data or count wrong" : "every word right", t);
        bad |= b1;
    }
    free(b);
    MPI_Finalize();
    return bad;
}
