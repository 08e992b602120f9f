/*
 * bw — MPI uni-directional bandwidth from rank 0 to rank 1 (OSU's osu_bw method): per
 * round, rank 0 posts a window of MPI_Isend (default 64) and rank 1 the matching MPI_Irecv;
 * after both complete the window, rank 1 answers with a 4-byte acknowledgement.  Bandwidth
 * is the bytes of the timed windows over rank 0's time, in MB/s (10^6 bytes per second).
 *   mpirun -np 2 bw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-W WINDOW] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>

/* Two messages with different patterns from rank 0, both checked by rank 1. */
static int check_bw(const struct osu_options *opt, const struct osu_pair *pair, size_t size)
{
    (void)opt;
    int passed = 1;
    for (int seed = 0; seed < 2; seed++) {
        if (pair->leader) {
            osu_fill_pattern(pair->send, size, seed);
            MPI_Send(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD);
        } else {
            osu_fill_pattern(pair->send, size, seed + 7); /* stale data must not pass */
            MPI_Recv(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            passed &= osu_check_pattern(pair->send, size, seed);
        }
    }
    return passed;
}

/* The bytes of the timed windows over rank 0's time, in MB/s. */
static double measure_bw(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                         int iterations, int skip, double *second)
{
    (void)second;
    double elapsed = osu_stream_windows(opt, pair, size, iterations, skip);
    double bytes = (double)size * iterations * opt->window;
    return bytes / 1e6 / elapsed;
}

int main(int argc, char **argv)
{
    static const struct osu_pt2pt bench = {
        .program = {"bw", OSU_PT2PT_BW, 1, 2, 2, 0},
        .title = "OSU-format MPI Bandwidth Test (psport test/bench/osu)",
        .value_heading = "Bandwidth (MB/s)",
        .window_requests = 1,
        .describe = osu_describe_window,
        .check = check_bw,
        .measure = measure_bw,
    };
    return osu_pt2pt_main(argc, argv, &bench);
}
