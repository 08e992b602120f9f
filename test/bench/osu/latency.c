/*
 * latency — MPI point-to-point latency between ranks 0 and 1 (OSU's osu_latency method):
 * per size, warm-up rounds, then timed ping-pong rounds of blocking MPI_Send/MPI_Recv; the
 * latency is half the mean round trip in µs.
 *   mpirun -np 2 latency [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One warm-up-then-timed ping-pong sweep at size; returns rank 0's elapsed seconds. */
static double ping_pong(int rank, char *send, char *recv, size_t size, int iterations, int skip)
{
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(send, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(recv, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(recv, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(send, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

/* With -c: one exchange of each rank's own pattern, checked by the peer; 1 if both passed. */
static int validate(const struct osu_options *opt, char *send, char *recv, size_t size)
{
    if (!opt->validate)
        return 1;
    osu_fill_pattern(send, size, opt->rank);
    ping_pong(opt->rank, send, recv, size, 1, 0);
    return osu_all_passed(opt, osu_check_pattern(recv, size, 1 - opt->rank));
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "latency", OSU_PT2PT_LATENCY, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 2, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    char *send = osu_alloc(opt.max_size), *recv = osu_alloc(opt.max_size);
    osu_print_header(&opt, "OSU-format MPI Latency Test (psport test/bench/osu)",
                     "# Datatype: MPI_CHAR.\n", "Latency (us)", NULL);
    int all_passed = 1;
    for (size_t size = opt.min_size; size <= opt.max_size; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(&opt, size, &iterations, &skip);
        int passed = validate(&opt, send, recv, size);
        all_passed &= passed;
        double elapsed = ping_pong(opt.rank, send, recv, size, iterations, skip);
        osu_print_row(&opt, size, elapsed * 1e6 / (2.0 * iterations), passed);
    }
    osu_free(send);
    osu_free(recv);
    MPI_Finalize();
    return all_passed ? 0 : 1;
}
