/*
 * barrier — MPI_Barrier latency over all ranks (OSU's osu_barrier method): warm-up
 * barriers, then timed barriers, each rank averaging its own; the figure is the mean over
 * the ranks in µs (-f adds min and max over the ranks).
 *   mpirun -np N barrier [-i ITERS] [-x WARMUP] [-f] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One barrier: the operation being timed. */
static void run_barrier(size_t size, const struct osu_buffers *b)
{
    (void)size;
    (void)b;
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"barrier", OSU_BARRIER, 1, 2, 0, 0},
        .title = "OSU-format MPI Barrier Latency Test (psport test/bench/osu)",
        .run = run_barrier,
    };
    return osu_collective_main(argc, argv, &bench);
}
