/*
 * reduce — MPI_Reduce latency (MPI_FLOAT, MPI_SUM, root 0; OSU's osu_reduce method): per
 * size in bytes (4 and up: whole floats), warm-up reductions, then timed reductions separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N reduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One sum of size bytes of floats into rank 0. */
static void run_reduce(size_t size, const struct osu_buffers *b)
{
    MPI_Reduce(b->send, b->recv, (int)(size / sizeof(float)), MPI_FLOAT, MPI_SUM, 0,
               MPI_COMM_WORLD);
}

/* Rank 0 gets the exact sum (osu_fill_sum_operands); the others have nothing to check. */
static int check_reduce(size_t size, const struct osu_buffers *b)
{
    osu_fill_sum_operands(b, size);
    run_reduce(size, b);
    return b->rank != 0 || osu_check_sum_result(b, size);
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"reduce", OSU_COLLECTIVE, sizeof(float), 2, 0, 0},
        .title = "OSU-format MPI Reduce Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_FLOAT.\n",
        .run = run_reduce,
        .check = check_reduce,
    };
    return osu_collective_main(argc, argv, &bench);
}
