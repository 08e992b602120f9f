/*
 * gather — MPI_Gather latency to rank 0 (OSU's osu_gather method): every rank sends size
 * bytes, rank 0 receives size * np; per size, warm-up operations, then timed ones separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N gather [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The gather's buffers (recv, size * nprocs bytes, only on rank 0) and this rank. */
struct gather_buffers {
    char *send;
    char *recv;
    int rank;
    int nprocs;
};

/* One gather of size bytes from every rank into rank 0. */
static void run_gather(size_t size, void *ctx)
{
    struct gather_buffers *b = ctx;
    MPI_Gather(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Every rank sends the pattern of its rank; rank 0 finds each in its block. */
static int check_gather(size_t size, void *ctx)
{
    struct gather_buffers *b = ctx;
    osu_fill_pattern(b->send, size, b->rank);
    if (b->rank == 0)
        for (int from = 0; from < b->nprocs; from++)
            osu_fill_pattern(b->recv + (size_t)from * size, size, -1);
    run_gather(size, ctx);
    if (b->rank != 0)
        return 1;
    for (int from = 0; from < b->nprocs; from++)
        if (!osu_check_pattern(b->recv + (size_t)from * size, size, from))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "gather", OSU_COLLECTIVE, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct gather_buffers buffers = {osu_alloc(opt.max_size), NULL, opt.rank, opt.nprocs};
    if (opt.rank == 0)
        buffers.recv = osu_alloc(opt.max_size * (size_t)opt.nprocs);
    struct osu_collective bench = {
        .title = "OSU-format MPI Gather Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .run = run_gather,
        .check = check_gather,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    MPI_Finalize();
    return passed ? 0 : 1;
}
