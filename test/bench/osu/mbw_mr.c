/*
 * mbw_mr — MPI multiple-pair bandwidth and message rate (OSU's osu_mbw_mr method): the
 * first np/2 ranks each stream to a partner in the second half (rank r to r + np/2) in
 * windows of MPI_Isend (default 64), each window answered by a 4-byte acknowledgement.
 * Aggregate MB/s (10^6 bytes per second) and messages per second count every pair's timed
 * windows over the slowest sender's time, so no pair finishing early inflates the figure.
 *   mpirun -np 2K mbw_mr [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-W WINDOW] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_DATA 100
#define TAG_ACK  101

/* Warm-up then timed windows at size; returns this rank's elapsed seconds (0 for receivers). */
static double stream(const struct osu_options *opt, char *buffer, size_t size, int iterations,
                     int skip, MPI_Request *requests, MPI_Status *statuses)
{
    int pairs = opt->nprocs / 2, sender = opt->rank < pairs;
    int peer = sender ? opt->rank + pairs : opt->rank - pairs;
    char ack[4] = {0};
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < opt->window; w++) {
            if (sender)
                MPI_Isend(buffer, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD,
                          &requests[w]);
            else
                MPI_Irecv(buffer, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD,
                          &requests[w]);
        }
        MPI_Waitall(opt->window, requests, statuses);
        if (sender)
            MPI_Recv(ack, 4, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(ack, 4, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD);
    }
    return sender ? MPI_Wtime() - start : 0.0;
}

/* With -c: every sender sends its own pattern once; every receiver checks its partner's. */
static int validate(const struct osu_options *opt, char *buffer, size_t size)
{
    if (!opt->validate)
        return 1;
    int pairs = opt->nprocs / 2, passed = 1;
    if (opt->rank < pairs) {
        osu_fill_pattern(buffer, size, opt->rank);
        MPI_Send(buffer, (int)size, MPI_CHAR, opt->rank + pairs, TAG_DATA, MPI_COMM_WORLD);
    } else {
        osu_fill_pattern(buffer, size, opt->rank); /* stale data must not pass */
        MPI_Recv(buffer, (int)size, MPI_CHAR, opt->rank - pairs, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        passed = osu_check_pattern(buffer, size, opt->rank - pairs);
    }
    return osu_all_passed(opt, passed);
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "mbw_mr", OSU_PT2PT_BW, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 1)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    int pairs = opt.nprocs / 2;
    char *buffer = osu_alloc(opt.max_size);
    MPI_Request *requests = malloc(sizeof(*requests) * (size_t)opt.window);
    MPI_Status *statuses = malloc(sizeof(*statuses) * (size_t)opt.window);
    if (!requests || !statuses)
        MPI_Abort(MPI_COMM_WORLD, 1);
    char extra[64];
    snprintf(extra, sizeof(extra), "# [ pairs: %d ] [ window size: %d ]\n", pairs, opt.window);
    osu_print_header(&opt,
                     "OSU-format MPI Multiple Bandwidth / Message Rate Test (psport "
                     "test/bench/osu)",
                     extra, "MB/s", "Messages/s");
    int all_passed = 1;
    for (size_t size = opt.min_size; size <= opt.max_size; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(&opt, size, &iterations, &skip);
        int passed = validate(&opt, buffer, size);
        all_passed &= passed;
        double mine = stream(&opt, buffer, size, iterations, skip, requests, statuses);
        double slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        double messages = (double)pairs * iterations * opt.window;
        if (opt.rank == 0)
            osu_print_row2(&opt, size, messages * (double)size / 1e6 / slowest, messages / slowest,
                           passed);
    }
    free(requests);
    free(statuses);
    osu_free(buffer);
    MPI_Finalize();
    return all_passed ? 0 : 1;
}
