/*
 * allreduce — MPI_Allreduce latency (MPI_FLOAT, MPI_SUM; OSU's osu_allreduce method): per
 * size in bytes (4 and up: whole floats), warm-up reductions, then timed reductions separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N allreduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One sum of size bytes of floats, result on every rank. */
static void run_allreduce(size_t size, const struct osu_buffers *b)
{
    MPI_Allreduce(b->send, b->recv, (int)(size / sizeof(float)), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}

/* Every rank gets the exact sum (osu_fill_sum_operands). */
static int check_allreduce(size_t size, const struct osu_buffers *b)
{
    osu_fill_sum_operands(b, size);
    run_allreduce(size, b);
    return osu_check_sum_result(b, size);
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"allreduce", OSU_COLLECTIVE, sizeof(float), 2, 0, 0},
        .title = "OSU-format MPI Allreduce Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_FLOAT.\n",
        .run = run_allreduce,
        .check = check_allreduce,
    };
    return osu_collective_main(argc, argv, &bench);
}
