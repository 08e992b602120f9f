/*
 * scatter — MPI_Scatter latency from rank 0 (OSU's osu_scatter method): rank 0 sends size
 * bytes to every rank out of size * np; per size, warm-up operations, then timed ones
 * separated by untimed barriers; each rank averages its own time and the figure is the mean
 * over the ranks in µs.
 *   mpirun -np N scatter [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The scatter's buffers (send, size * nprocs bytes, only on rank 0) and this rank. */
struct scatter_buffers {
    char *send;
    char *recv;
    int rank;
    int nprocs;
};

/* One scatter of size bytes per rank from rank 0. */
static void run_scatter(size_t size, void *ctx)
{
    struct scatter_buffers *b = ctx;
    MPI_Scatter(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Rank 0 puts the pattern of rank r into block r; every rank checks that it got its own. */
static int check_scatter(size_t size, void *ctx)
{
    struct scatter_buffers *b = ctx;
    if (b->rank == 0)
        for (int to = 0; to < b->nprocs; to++)
            osu_fill_pattern(b->send + (size_t)to * size, size, to);
    osu_fill_pattern(b->recv, size, -1);
    run_scatter(size, ctx);
    return osu_check_pattern(b->recv, size, b->rank);
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "scatter", OSU_COLLECTIVE, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct scatter_buffers buffers = {NULL, osu_alloc(opt.max_size), opt.rank, opt.nprocs};
    if (opt.rank == 0)
        buffers.send = osu_alloc(opt.max_size * (size_t)opt.nprocs);
    struct osu_collective bench = {
        .title = "OSU-format MPI Scatter Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .run = run_scatter,
        .check = check_scatter,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    MPI_Finalize();
    return passed ? 0 : 1;
}
