/*
 * allreduce — MPI_Allreduce latency (MPI_FLOAT, MPI_SUM; OSU's osu_allreduce method): per
 * size in bytes (4 and up: whole floats), warm-up reductions, then timed reductions separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N allreduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The reduction's buffers and the communicator's shape. */
struct allreduce_buffers {
    float *send;
    float *recv;
    int rank;
    int nprocs;
};

/* One sum of size bytes of floats, result on every rank. */
static void run_allreduce(size_t size, void *ctx)
{
    struct allreduce_buffers *b = ctx;
    MPI_Allreduce(b->send, b->recv, (int)(size / sizeof(float)), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}

/*
 * Element i of rank r is (r + 1) * (i % 7 + 1): small integers, so the float sum is exact
 * and equals, on every rank, nprocs * (nprocs + 1) / 2 * (i % 7 + 1) whatever order the ranks are
 * added in.
 */
static int check_allreduce(size_t size, void *ctx)
{
    struct allreduce_buffers *b = ctx;
    size_t count = size / sizeof(float);
    for (size_t i = 0; i < count; i++) {
        b->send[i] = (float)((b->rank + 1) * (int)(i % 7 + 1));
        b->recv[i] = -1.0f;
    }
    run_allreduce(size, ctx);
    float ranks_sum = (float)b->nprocs * (float)(b->nprocs + 1) / 2.0f;
    for (size_t i = 0; i < count; i++)
        if (b->recv[i] != ranks_sum * (float)(i % 7 + 1))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "allreduce", OSU_COLLECTIVE, sizeof(float));
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct allreduce_buffers buffers = {osu_alloc(opt.max_size), osu_alloc(opt.max_size), opt.rank,
                                        opt.nprocs};
    struct osu_collective bench = {
        .title = "OSU-format MPI Allreduce Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_FLOAT.\n",
        .run = run_allreduce,
        .check = check_allreduce,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    MPI_Finalize();
    return passed ? 0 : 1;
}
