/*
 * gather — MPI_Gather latency to rank 0 (OSU's osu_gather method): every rank sends size
 * bytes, rank 0 receives size * np; per size, warm-up operations, then timed ones separated
 * by untimed barriers; each rank averages its own time and the figure is the mean over the
 * ranks in µs.
 *   mpirun -np N gather [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* send of max_size on every rank; recv, max_size * nprocs bytes, only on rank 0. */
static void setup_gather(const struct osu_options *opt, struct osu_buffers *b)
{
    b->send = osu_alloc(opt->max_size);
    if (opt->rank == 0)
        b->recv = osu_alloc(opt->max_size * (size_t)opt->nprocs);
}

/* One gather of size bytes from every rank into rank 0. */
static void run_gather(size_t size, const struct osu_buffers *b)
{
    MPI_Gather(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Every rank sends the pattern of its rank; rank 0 finds each in its block. */
static int check_gather(size_t size, const struct osu_buffers *b)
{
    osu_fill_pattern(b->send, size, b->rank);
    if (b->rank == 0)
        for (int from = 0; from < b->nprocs; from++)
            osu_fill_pattern(b->recv + (size_t)from * size, size, -1);
    run_gather(size, b);
    if (b->rank != 0)
        return 1;
    for (int from = 0; from < b->nprocs; from++)
        if (!osu_check_pattern(b->recv + (size_t)from * size, size, from))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"gather", OSU_COLLECTIVE, 1, 2, 0, 0},
        .title = "OSU-format MPI Gather Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .setup = setup_gather,
        .run = run_gather,
        .check = check_gather,
    };
    return osu_collective_main(argc, argv, &bench);
}
