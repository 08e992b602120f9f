/*
 * bcast — MPI_Bcast latency from rank 0 (OSU's osu_bcast method): per size, warm-up
 * broadcasts, then timed broadcasts separated by untimed barriers; each rank averages its own
 * time per broadcast and the figure is the mean over the ranks in µs.
 *   mpirun -np N bcast [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-f] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* One buffer of max_size, send: the root's data and every other rank's copy. */
static void setup_bcast(const struct osu_options *opt, struct osu_buffers *b)
{
    b->send = osu_alloc(opt->max_size);
}

/* One broadcast of size bytes from rank 0. */
static void run_bcast(size_t size, const struct osu_buffers *b)
{
    MPI_Bcast(b->send, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Rank 0 broadcasts its pattern; every other rank, starting from a different one, checks it. */
static int check_bcast(size_t size, const struct osu_buffers *b)
{
    osu_fill_pattern(b->send, size, b->rank == 0 ? 0 : 1);
    run_bcast(size, b);
    return osu_check_pattern(b->send, size, 0);
}

int main(int argc, char **argv)
{
    static const struct osu_collective bench = {
        .program = {"bcast", OSU_COLLECTIVE, 1, 2, 0, 0},
        .title = "OSU-format MPI Broadcast Latency Test (psport test/bench/osu)",
        .extra = "# Datatype: MPI_CHAR.\n",
        .setup = setup_bcast,
        .run = run_bcast,
        .check = check_bcast,
    };
    return osu_collective_main(argc, argv, &bench);
}
