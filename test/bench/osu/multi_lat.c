/*
 * multi_lat — MPI latency of np/2 simultaneous ping-pong pairs (OSU's osu_multi_lat
 * method): rank r < np/2 plays ping-pong with rank r + np/2, all pairs at once; each pair's
 * latency is half its mean round trip, and the figure is the average over the pairs in µs.
 *   mpirun -np 2K multi_lat [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>
#include <stdio.h>

/* The header line that gives the number of pairs. */
static void describe_multi_lat(const struct osu_options *opt, char *extra, size_t len)
{
    snprintf(extra, len, "# Datatype: MPI_CHAR.\n# [ pairs: %d ]\n", opt->nprocs / 2);
}

/* Every pair's latency (half its mean round trip, in µs), averaged over the pairs on rank 0. */
static double measure_multi_lat(const struct osu_options *opt, const struct osu_pair *pair,
                                size_t size, int iterations, int skip, double *second)
{
    (void)second;
    double elapsed = osu_ping_pong(pair, size, iterations, skip);
    double mine = pair->leader ? elapsed * 1e6 / (2.0 * iterations) : 0.0, total = 0;
    MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return total / (opt->nprocs / 2);
}

int main(int argc, char **argv)
{
    static const struct osu_pt2pt bench = {
        .program = {"multi_lat", OSU_PT2PT_LATENCY, 1, 2, 0, 1},
        .title = "OSU-format MPI Multi Latency Test (psport test/bench/osu)",
        .value_heading = "Latency (us)",
        .two_buffers = 1,
        .describe = describe_multi_lat,
        .check = osu_check_ping_pong,
        .measure = measure_multi_lat,
    };
    return osu_pt2pt_main(argc, argv, &bench);
}
