/*
 * bw — MPI uni-directional bandwidth from rank 0 to rank 1 (OSU's osu_bw method): per
 * round, rank 0 posts a window of MPI_Isend (default 64) and rank 1 the matching MPI_Irecv;
 * after both complete the window, rank 1 answers with a 4-byte acknowledgement.  Bandwidth
 * is the bytes of the timed windows over rank 0's time, in MB/s (10^6 bytes per second).
 *   mpirun -np 2 bw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-W WINDOW] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_DATA 100
#define TAG_ACK  101

/* Warm-up then timed windows at size; returns rank 0's elapsed seconds for the timed ones. */
static double stream(const struct osu_options *opt, char *buffer, size_t size, int iterations,
                     int skip, MPI_Request *requests, MPI_Status *statuses)
{
    char ack[4] = {0};
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < opt->window; w++) {
            if (opt->rank == 0)
                MPI_Isend(buffer, (int)size, MPI_CHAR, 1, TAG_DATA, MPI_COMM_WORLD, &requests[w]);
            else
                MPI_Irecv(buffer, (int)size, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD, &requests[w]);
        }
        MPI_Waitall(opt->window, requests, statuses);
        if (opt->rank == 0)
            MPI_Recv(ack, 4, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(ack, 4, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - start;
}

/* With -c: two messages with different patterns from rank 0, both checked by rank 1. */
static int validate(const struct osu_options *opt, char *buffer, size_t size)
{
    if (!opt->validate)
        return 1;
    int passed = 1;
    for (int seed = 0; seed < 2; seed++) {
        if (opt->rank == 0) {
            osu_fill_pattern(buffer, size, seed);
            MPI_Send(buffer, (int)size, MPI_CHAR, 1, TAG_DATA, MPI_COMM_WORLD);
        } else {
            osu_fill_pattern(buffer, size, seed + 7); /* stale data must not pass */
            MPI_Recv(buffer, (int)size, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            passed &= osu_check_pattern(buffer, size, seed);
        }
    }
    return osu_all_passed(opt, passed);
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "bw", OSU_PT2PT_BW, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 2, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    char *buffer = osu_alloc(opt.max_size);
    MPI_Request *requests = malloc(sizeof(*requests) * (size_t)opt.window);
    MPI_Status *statuses = malloc(sizeof(*statuses) * (size_t)opt.window);
    if (!requests || !statuses)
        MPI_Abort(MPI_COMM_WORLD, 1);
    char extra[64];
    snprintf(extra, sizeof(extra), "# Datatype: MPI_CHAR.\n# [ window size: %d ]\n", opt.window);
    osu_print_header(&opt, "OSU-format MPI Bandwidth Test (psport test/bench/osu)", extra,
                     "Bandwidth (MB/s)", NULL);
    int all_passed = 1;
    for (size_t size = opt.min_size; size <= opt.max_size; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(&opt, size, &iterations, &skip);
        int passed = validate(&opt, buffer, size);
        all_passed &= passed;
        double elapsed = stream(&opt, buffer, size, iterations, skip, requests, statuses);
        double bytes = (double)size * iterations * opt.window;
        osu_print_row(&opt, size, bytes / 1e6 / elapsed, passed);
    }
    free(requests);
    free(statuses);
    osu_free(buffer);
    MPI_Finalize();
    return all_passed ? 0 : 1;
}
