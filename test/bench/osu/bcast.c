/*
 * bcast — MPI_Bcast latency from rank 0 (OSU's osu_bcast method): per size, warm-up
 * broadcasts, then timed broadcasts separated by untimed barriers; each rank averages its own
 * time per broadcast and the figure is the mean over the ranks in µs.
 *   mpirun -np N bcast [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* The broadcast buffer and this rank. */
struct bcast_buffers {
    char *buffer;
    int rank;
};

/* One broadcast of size bytes from rank 0. */
static void run_bcast(size_t size, void *ctx)
{
    struct bcast_buffers *b = ctx;
    MPI_Bcast(b->buffer, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Rank 0 broadcasts its pattern; every other rank, starting from a different one, checks it. */
static int check_bcast(size_t size, void *ctx)
{
    struct bcast_buffers *b = ctx;
    osu_fill_pattern(b->buffer, size, b->rank == 0 ? 0 : 1);
    run_bcast(size, ctx);
    return osu_check_pattern(b->buffer, size, 0);
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "bcast", OSU_COLLECTIVE, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 0, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    struct bcast_buffers buffers = {osu_alloc(opt.max_size), opt.rank};
    struct osu_collective bench = {
        .title = "OSU-format MPI Broadcast Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .run = run_bcast,
        .check = check_bcast,
        .ctx = &buffers,
    };
    int passed = osu_run_collective(&opt, &bench);
    osu_free(buffers.buffer);
    MPI_Finalize();
    return passed ? 0 : 1;
}
