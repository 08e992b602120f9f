/*
 * alltoall — MPI_Alltoall latency (OSU's osu_alltoall method): every rank sends size bytes
 * to every rank; per size, warm-up operations, then timed ones separated by untimed
 * barriers; each rank averages its own time and the figure is the mean over the ranks in µs.
 * Buffers are size * np bytes on every rank.
 *   mpirun -np N alltoall [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* send and recv of max_size * nprocs bytes on every rank. */
static void setup_alltoall(const struct osu_options *opt, struct osu_buffers *b)
{
    size_t bytes = opt->max_size * (size_t)opt->nprocs;
    b->send = osu_alloc(bytes);
    b->recv = osu_alloc(bytes);
}

/* One all-to-all exchange of size bytes per pair of ranks. */
static void run_alltoall(size_t size, const struct osu_buffers *b)
{
    MPI_Alltoall(b->send, (int)size, MPI_CHAR, b->recv, (int)size, MPI_CHAR, MPI_COMM_WORLD);
}

/* The block from rank `from` to rank `to` carries the pattern of seed from * nprocs + to. */
static int check_alltoall(size_t size, const struct osu_buffers *b)
{
    for (int to = 0; to < b->nprocs; to++) {
        osu_fill_pattern(b->send + (size_t)to * size, size, b->rank * b->nprocs + to);
        osu_fill_pattern(b->recv + (size_t)to * size, size, -1);
    }
    run_alltoall(size, b);
    for (int from = 0; from < b->nprocs; from++)
        if (!osu_check_pattern(b->recv + (size_t)from * size, size, from * b->nprocs + b->rank))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"alltoall", OSU_COLLECTIVE, 1, 2, 0, 0},
        .title = "OSU-format MPI All-to-All Personalized Exchange Latency Test (psport "
                 "test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .setup = setup_alltoall,
        .run = run_alltoall,
        .check = check_alltoall,
    };
    return osu_collective_main(argc, argv, &bench);
}
