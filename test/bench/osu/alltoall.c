/*
 * alltoall — MPI_Alltoall latency (OSU's osu_alltoall method): every rank sends size bytes
 * to every rank; per size, warm-up operations, then timed ones separated by untimed
 * barriers; each rank averages its own time and the figure is the mean over the ranks in µs.
 * Buffers are size * np bytes on every rank.
 *   mpirun -np N alltoall [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The exchange's buffers (size * nprocs bytes each) and the communicator's shape. */
struct alltoall_buffers {
    char *send;
    char *recv;
    int rank;
    int nprocs;
};

/* One all-to-all exchange of size bytes per pair of ranks. */
static void run_alltoall(size_t size, void *ctx)
{
    struct alltoall_buffers *b = ctx;
    MPI_Alltoall(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, MPI_COMM_WORLD);
}

/* The block from rank `from` to rank `to` carries the pattern of seed from * nprocs + to. */
static int check_alltoall(size_t size, void *ctx)
{
    struct alltoall_buffers *b = ctx;
    for (int to = 0; to < b->nprocs; to++) {
        osu_fill_pattern(b->send + (size_t)to * size, size, b->rank * b->nprocs + to);
        osu_fill_pattern(b->recv + (size_t)to * size, size, -1);
    }
    run_alltoall(size, ctx);
    for (int from = 0; from < b->nprocs; from++)
        if (!osu_check_pattern(b->recv + (size_t)from * size, size, from * b->nprocs + b->rank))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "alltoall", OSU_COLLECTIVE, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    size_t bytes = opt.max_size * (size_t)opt.nprocs;
    struct alltoall_buffers buffers = {osu_alloc(bytes), osu_alloc(bytes), opt.rank, opt.nprocs};
    struct osu_collective bench = {
        .title = "OSU-format MPI All-to-All Personalized Exchange Latency Test (psport "
                 "test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .run = run_alltoall,
        .check = check_alltoall,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    MPI_Finalize();
    return passed ? 0 : 1;
}
