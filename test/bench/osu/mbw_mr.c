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

/* The header line that gives the pairs and the window. */
static void describe_mbw_mr(const struct osu_options *opt, char *extra, size_t len)
{
    snprintf(extra, len, "# [ pairs: %d ] [ window size: %d ]\n", opt->nprocs / 2, opt->window);
}

/* Every sender sends its own pattern once; every receiver checks its partner's. */
static int check_mbw_mr(const struct osu_options *opt, const struct osu_pair *pair, size_t size)
{
    osu_fill_pattern(pair->send, size, opt->rank); /* on receivers: stale data must not pass */
    if (pair->leader) {
        MPI_Send(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD);
        return 1;
    }
    MPI_Recv(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return osu_check_pattern(pair->send, size, pair->peer);
}

/* Aggregate MB/s, and messages per second in *second, over the slowest sender's time. */
static double measure_mbw_mr(const struct osu_options *opt, const struct osu_pair *pair,
                             size_t size, int iterations, int skip, double *second)
{
    double elapsed = osu_stream_windows(opt, pair, size, iterations, skip);
    double mine = pair->leader ? elapsed : 0.0, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (opt->rank != 0)
        return 0;
    double messages = (double)(opt->nprocs / 2) * iterations * opt->window;
    *second = messages / slowest;
    return messages * (double)size / 1e6 / slowest;
}

int main(int argc, char **argv)
{
    static const struct osu_pt2pt bench = {
        .program = {"mbw_mr", OSU_PT2PT_BW, 1, 2, 0, 1},
        .title = "OSU-format MPI Multiple Bandwidth / Message Rate Test (psport test/bench/osu)",
        .value_heading = "MB/s",
        .second_heading = "Messages/s",
        .window_requests = 1,
        .describe = describe_mbw_mr,
        .check = check_mbw_mr,
        .measure = measure_mbw_mr,
    };
    return osu_pt2pt_main(argc, argv, &bench);
}
