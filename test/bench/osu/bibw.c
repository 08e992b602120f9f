/*
 * bibw — MPI bi-directional bandwidth between ranks 0 and 1 (OSU's osu_bibw method): per
 * round, both ranks post a window of MPI_Irecv (default 64), then a window of MPI_Isend to
 * each other, and wait for all of them.  Bandwidth is the bytes moved in both directions in
 * the timed rounds over rank 0's time, in MB/s (10^6 bytes per second).
 *   mpirun -np 2 bibw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-W WINDOW] [-c] [-h]
 */
#include "osu_util.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_DATA 100

/* Warm-up then timed exchanges at size; returns this rank's elapsed seconds for the timed. */
static double exchange(const struct osu_options *opt, char *send, char *recv, size_t size,
                       int iterations, int skip, MPI_Request *requests, MPI_Status *statuses)
{
    int peer = 1 - opt->rank;
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < opt->window; w++)
            MPI_Irecv(recv, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &requests[w]);
        for (int w = 0; w < opt->window; w++)
            MPI_Isend(send, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD,
                      &requests[opt->window + w]);
        MPI_Waitall(2 * opt->window, requests, statuses);
    }
    return MPI_Wtime() - start;
}

/* With -c: each rank sends its own pattern once both ways and checks the peer's. */
static int validate(const struct osu_options *opt, char *send, char *recv, size_t size)
{
    if (!opt->validate)
        return 1;
    int peer = 1 - opt->rank;
    osu_fill_pattern(send, size, opt->rank);
    osu_fill_pattern(recv, size, opt->rank); /* our own data in recv must not pass */
    MPI_Sendrecv(send, (int)size, MPI_CHAR, peer, TAG_DATA, recv, (int)size, MPI_CHAR, peer,
                 TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return osu_all_passed(opt, osu_check_pattern(recv, size, peer));
}

int main(int argc, char **argv)
{
    struct osu_options opt;
    MPI_Init(&argc, &argv);
    osu_init(&opt, "bibw", OSU_PT2PT_BW, 1);
    enum osu_parse_result parsed = osu_parse_options(&opt, argc, argv);
    if (parsed != OSU_RUN || osu_require_procs(&opt, 2, 2, 0)) {
        MPI_Finalize();
        return parsed == OSU_EXIT ? 0 : 1;
    }
    char *send = osu_alloc(opt.max_size), *recv = osu_alloc(opt.max_size);
    MPI_Request *requests = malloc(sizeof(*requests) * 2 * (size_t)opt.window);
    MPI_Status *statuses = malloc(sizeof(*statuses) * 2 * (size_t)opt.window);
    if (!requests || !statuses)
        MPI_Abort(MPI_COMM_WORLD, 1);
    char extra[64];
    snprintf(extra, sizeof(extra), "# Datatype: MPI_CHAR.\n# [ window size: %d ]\n", opt.window);
    osu_print_header(&opt, "OSU-format MPI Bi-Directional Bandwidth Test (psport test/bench/osu)",
                     extra, "Bandwidth (MB/s)", NULL);
    int all_passed = 1;
    for (size_t size = opt.min_size; size <= opt.max_size; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(&opt, size, &iterations, &skip);
        int passed = validate(&opt, send, recv, size);
        all_passed &= passed;
        double elapsed = exchange(&opt, send, recv, size, iterations, skip, requests, statuses);
        double bytes = 2.0 * (double)size * iterations * opt.window;
        osu_print_row(&opt, size, bytes / 1e6 / elapsed, passed);
    }
    free(requests);
    free(statuses);
    osu_free(send);
    osu_free(recv);
    MPI_Finalize();
    return all_passed ? 0 : 1;
}
