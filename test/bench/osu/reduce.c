/*
 * reduce — MPI_Reduce latency (MPI_FLOAT, MPI_SUM, root 0; OSU's osu_reduce method): per
 * size in bytes (4 and up: whole floats), warm-up reductions, then timed reductions separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N reduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The reduction's buffers and the communicator's shape. */
struct reduce_buffers {
    float *send;
    float *recv;
    int rank;
    int nprocs;
};

/* One sum of size bytes of floats into rank 0. */
static void run_reduce(size_t size, void *ctx)
{
    struct reduce_buffers *b = ctx;
    MPI_Reduce(b->send, b->recv, (int)(size / sizeof(float)), MPI_FLOAT, MPI_SUM, 0,
               MPI_COMM_WORLD);
}

/*
 * Element i of rank r is (r + 1) * (i % 7 + 1): small integers, so the float sum is exact
 * and equals nprocs * (nprocs + 1) / 2 * (i % 7 + 1) whatever order the ranks are added in.
 */
static int check_reduce(size_t size, void *ctx)
{
    struct reduce_buffers *b = ctx;
    size_t count = size / sizeof(float);
    for (size_t i = 0; i < count; i++) {
        b->send[i] = (float)((b->rank + 1) * (int)(i % 7 + 1));
        b->recv[i] = -1.0f;
    }
    run_reduce(size, ctx);
    if (b->rank != 0)
        return 1;
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
    osu_init(&opt, "reduce", OSU_COLLECTIVE, sizeof(float));
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct reduce_buffers buffers = {osu_alloc(opt.max_size), osu_alloc(opt.max_size), opt.rank,
                                     opt.nprocs};
    struct osu_collective bench = {
        .title = "OSU-format MPI Reduce Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_FLOAT.\n",
        .run = run_reduce,
        .check = check_reduce,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    MPI_Finalize();
    return passed ? 0 : 1;
}
