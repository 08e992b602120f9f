/*
 * latency — MPI point-to-point latency between ranks 0 and 1 (OSU's osu_latency method):
 * per size, warm-up rounds, then timed ping-pong rounds of blocking MPI_Send/MPI_Recv; the
 * latency is half the mean round trip in µs.
 *   mpirun -np 2 latency [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* Half the mean round trip in µs (rank 0's time). */
static double measure_latency(const struct osu_options *opt, const struct osu_pair *pair,
                              size_t size, int iterations, int skip, double *second)
{
    (void)opt;
    (void)second;
    return osu_ping_pong(pair, size, iterations, skip) * 1e6 / (2.0 * iterations);
}

int main(int argc, char **argv)
{
    static const struct osu_pt2pt bench = {
        .program = {"latency", OSU_PT2PT_LATENCY, 1, 2, 2, 0},
        .title = "OSU-format MPI Latency Test (psport test/bench/osu)",
        .value_heading = "Latency (us)",
        .two_buffers = 1,
        .check = osu_check_ping_pong,
        .measure = measure_latency,
    };
    return osu_pt2pt_main(argc, argv, &bench);
}
