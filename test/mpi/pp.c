/*
 * pp — MPI point-to-point benchmark between ranks 0 and 1 in the OSU Micro-Benchmarks'
 * methodology and output format: "latency" is osu_latency (ping-pong, half the round trip,
 * warm-up iterations skipped), "bw" is osu_bw (a window of 64 non-blocking sends, then a
 * 4-byte acknowledgement; MB/s = 10^6 bytes per second).
 *   pp latency|bw [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 * Sizes go from MIN to MAX doubling (MIN 0 gives 0, then 1, 2, 4 ...).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bw = argc > 1 && strcmp(argv[1], "bw") == 0;
    long lo = bw ? 1 : 0, hi = bw ? 4l << 20 : 4l << 20;
    int iters = bw ? 100 : 10000, skip = bw ? 10 : 1000, given_iters = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            char *c = strchr(argv[++i], ':');
            lo = atol(argv[i]);
            hi = c ? atol(c + 1) : lo;
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            iters = atoi(argv[++i]);
            given_iters = 1;
        } else if (!strcmp(argv[i], "-x") && i + 1 < argc) {
            skip = atoi(argv[++i]);
        }
    }
    if (size != 2 || (argc > 1 && strcmp(argv[1], "bw") && strcmp(argv[1], "latency"))) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 pp latency|bw [-m MIN:MAX] [-i N] [-x N]\n");
        MPI_Finalize();
        return 2;
    }
    char *s = malloc(hi > 0 ? hi : 1), *r = malloc(hi > 0 ? hi : 1);
    memset(s, 'a', hi > 0 ? hi : 1);
    memset(r, 'b', hi > 0 ? hi : 1);
    if (rank == 0) {
        printf(bw ? "# OSU MPI Bandwidth Test (psport pp)\n# Size      Bandwidth (MB/s)\n"
                  : "# OSU MPI Latency Test (psport pp)\n# Size          Latency (us)\n");
        fflush(stdout);
    }
    for (long n = lo; n <= hi; n = n ? n * 2 : 1) {
        int it = iters, sk = skip;
        if (!given_iters && n > 8192) { /* as OSU: fewer rounds for large messages */
            it = bw ? 20 : 1000;
            sk = bw ? 2 : 100;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        for (int i = 0; i < it + sk; i++) {
            if (i == sk)
                t0 = MPI_Wtime();
            if (bw) {
                MPI_Request q[WINDOW];
                char ack[4];
                for (int w = 0; w < WINDOW; w++) {
                    if (rank == 0)
                        MPI_Isend(s, (int)n, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &q[w]);
                    else
                        MPI_Irecv(r, (int)n, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &q[w]);
                }
                MPI_Status sts[WINDOW]; /* (not MPI_STATUSES_IGNORE: gcc 12 warns wrongly) */
                MPI_Waitall(WINDOW, q, sts);
                if (rank == 0)
                    MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                else
                    MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
            } else if (rank == 0) {
                MPI_Send(s, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(r, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(r, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(s, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) {
            if (bw)
                printf("%-10ld%18.2f\n", n, (double)n * it * WINDOW / t / 1e6);
            else
                printf("%-10ld%18.2f\n", n, t * 1e6 / (2.0 * it));
            fflush(stdout);
        }
        if (n == hi)
            break;
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
