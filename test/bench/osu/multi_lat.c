/*
 * multi_lat — MPI latency of np/2 simultaneous ping-pong pairs (OSU's osu_multi_lat
 * method): rank r < np/2 plays ping-pong with rank r + np/2, all pairs at once; each pair's
 * latency is half its mean round trip, and the figure is the average over the pairs in µs.
 *   mpirun -np 2K multi_lat [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>
#include <stdio.h>

#define TAG_PING 1

/* Warm-up then timed ping-pong with peer; returns this rank's elapsed seconds for the timed. */
static double ping_pong(int initiator, int peer, char *send, char *recv, size_t size,
                        int iterations, int skip)
{
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        if (initiator) {
            MPI_Send(send, (int)size, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(recv, (int)size, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(recv, (int)size, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(send, (int)size, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "multi_lat", OSU_PT2PT_LATENCY, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 1)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    int pairs = opt.nprocs / 2, initiator = opt.rank < pairs;
    int peer = initiator ? opt.rank + pairs : opt.rank - pairs;
    char *send = osu_alloc(opt.max_size), *recv = osu_alloc(opt.max_size);
    char extra[64];
    snprintf(extra, sizeof(extra), "# Datatype: MPI_CHAR.\n# [ pairs: %d ]\n", pairs);
    osu_print_header(&opt, "OSU-format MPI Multi Latency Test (psport test/bench/osu)", extra,
                     "Latency (us)", NULL);
    int all_passed = 1;
    for (size_t size = opt.min_size; size <= opt.max_size; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(&opt, size, &iterations, &skip);
        int passed = 1;
        if (opt.validate) {
            /* one round trip: each side sends its own pattern, the partner checks it */
            osu_fill_pattern(send, size, opt.rank);
            osu_fill_pattern(recv, size, opt.rank);
            ping_pong(initiator, peer, send, recv, size, 1, 0);
            passed = osu_all_passed(&opt, osu_check_pattern(recv, size, peer));
        }
        all_passed &= passed;
        double elapsed = ping_pong(initiator, peer, send, recv, size, iterations, skip);
        double mine = initiator ? elapsed * 1e6 / (2.0 * iterations) : 0.0, total = 0;
        MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        osu_print_row(&opt, size, total / pairs, passed);
    }
    osu_free(send);
    osu_free(recv);
    MPI_Finalize();
    return all_passed ? 0 : 1;
}
