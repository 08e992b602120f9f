/*
 * scatter — MPI_Scatter latency from rank 0 (OSU's osu_scatter method): rank 0 sends size
 * bytes to every rank out of size * np; per size, warm-up operations, then timed ones
 * separated by untimed barriers; each rank averages its own time and the figure is the mean
 * over the ranks in µs.
 *   mpirun -np N scatter [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* send, max_size * nprocs bytes, only on rank 0; recv of max_size on every rank. */
static void setup_scatter(const struct osu_options *opt, struct osu_buffers *b)
{
    if (opt->rank == 0)
        b->send = osu_alloc(opt->max_size * (size_t)opt->nprocs);
    b->recv = osu_alloc(opt->max_size);
}

/* One scatter of size bytes per rank from rank 0. */
static void run_scatter(size_t size, const struct osu_buffers *b)
{
    MPI_Scatter(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Rank 0 puts the pattern of rank r into block r; every rank checks that it got its own. */
static int check_scatter(size_t size, const struct osu_buffers *b)
{
    if (b->rank == 0)
        for (int to = 0; to < b->nprocs; to++)
            osu_fill_pattern(b->send + (size_t)to * size, size, to);
    osu_fill_pattern(b->recv, size, -1);
    run_scatter(size, b);
    return osu_check_pattern(b->recv, size, b->rank);
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"scatter", OSU_COLLECTIVE, 1, 2, 0, 0},
        .title = "OSU-format MPI Scatter Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .setup = setup_scatter,
        .run = run_scatter,
        .check = check_scatter,
    };
    return osu_collective_main(argc, argv, &bench);
}
