/*
 * barrier — MPI_Barrier latency over all ranks (OSU's osu_barrier method): warm-up
 * barriers, then timed barriers, each rank averaging its own; the figure is the mean over
 * the ranks in µs (-f adds min and max over the ranks).
 *   mpirun -np N barrier [-i ITERS] [-x WARMUP] [-f] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One barrier: the operation being timed. */
static void run_barrier(size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "barrier", OSU_BARRIER, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct osu_collective bench = {
        .title = "OSU-format MPI Barrier Latency Test (psport test/bench/osu)",
        .run = run_barrier,
    };
    osu_run_collective(&opt, &bench);
    MPI_Finalize();
    return 0;
}
