/*
 * bibw — MPI bi-directional bandwidth between ranks 0 and 1 (OSU's osu_bibw method): per
 * round, both ranks post a window of MPI_Irecv (default 64), then a window of MPI_Isend to
 * each other, and wait for all of them.  Bandwidth is the bytes moved in both directions in
 * the timed rounds over rank 0's time, in MB/s (10^6 bytes per second).
 *   mpirun -np 2 bibw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-W WINDOW] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* Warm-up then timed exchanges at size; returns this rank's elapsed seconds for the timed. */
static double exchange(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                       int iterations, int skip)
{
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < opt->window; w++)
            MPI_Irecv(pair->recv, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
                      &pair->requests[w]);
        for (int w = 0; w < opt->window; w++)
            MPI_Isend(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
                      &pair->requests[opt->window + w]);
        MPI_Waitall(2 * opt->window, pair->requests, pair->statuses);
    }
    return MPI_Wtime() - start;
}

/* Each rank sends its own pattern once both ways and checks the peer's. */
static int check_bibw(const struct osu_options *opt, const struct osu_pair *pair, size_t size)
{
    osu_fill_pattern(pair->send, size, opt->rank);
    osu_fill_pattern(pair->recv, size, opt->rank); /* our own data in recv must not pass */
    MPI_Sendrecv(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, pair->recv, (int)size,
                 MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return osu_check_pattern(pair->recv, size, pair->peer);
}

/* The bytes moved both ways in the timed rounds over rank 0's time, in MB/s. */
static double measure_bibw(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                           int iterations, int skip, double *second)
{
    (void)second;
    double elapsed = exchange(opt, pair, size, iterations, skip);
    double bytes = 2.0 * (double)size * iterations * opt->window;
    return bytes / 1e6 / elapsed;
}

int main(int argc, char **argv)
{
    static const struct osu_pt2pt bench = {
        .program = {"bibw", OSU_PT2PT_BW, 1, 2, 2, 0},
        .title = "OSU-format MPI Bi-Directional Bandwidth Test (psport test/bench/osu)",
        .value_heading = "Bandwidth (MB/s)",
        .two_buffers = 1,
        .window_requests = 2,
        .describe = osu_describe_window,
        .check = check_bibw,
        .measure = measure_bibw,
    };
    return osu_pt2pt_main(argc, argv, &bench);
}
