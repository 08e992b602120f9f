/*
 * osu_util.c — option parsing, buffers, iteration counts, validation pattern, OSU-format
 * printing, the size sweep and the shared mains for psport's OSU-style benchmarks (see
 * osu_util.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "osu_util.h"

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* OSU's column widths: the size column, then every value column. */
#define SIZE_WIDTH  10
#define VALUE_WIDTH 18
#define COUNT_WIDTH 12

/* The sweep and round defaults of each family, as OSU's benchmarks have them. */
static const struct osu_defaults {
    size_t min_size, max_size;
    int iterations, skip, iterations_large, skip_large;
} defaults[] = {
    [OSU_PT2PT_LATENCY] = {0, (size_t)4 << 20, 10000, 100, 1000, 10},
    [OSU_PT2PT_BW] = {1, (size_t)4 << 20, 100, 10, 20, 2},
    [OSU_COLLECTIVE] = {1, (size_t)1 << 20, 1000, 200, 100, 10},
    [OSU_BARRIER] = {1, (size_t)1 << 20, 1000, 200, 100, 10},
};

void osu_init(struct osu_options *opt, const char *program, enum osu_kind kind, size_t min_elem)
{
    const struct osu_defaults *d = &defaults[kind];
    memset(opt, 0, sizeof(*opt));
    opt->program = program;
    opt->kind = kind;
    opt->window = 64;
    MPI_Comm_rank(MPI_COMM_WORLD, &opt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &opt->nprocs);
    opt->min_size = d->min_size;
    opt->max_size = d->max_size;
    opt->iterations = d->iterations;
    opt->skip = d->skip;
    opt->iterations_large = d->iterations_large;
    opt->skip_large = d->skip_large;
    opt->min_elem = min_elem ? min_elem : 1;
    if (opt->min_size < opt->min_elem)
        opt->min_size = opt->min_elem;
}

/* Parses a non-negative decimal number that must be all of text; returns 0 if it is one. */
static int parse_size(const char *text, size_t *value)
{
    char *end;
    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v > INT_MAX)
        return -1;
    *value = (size_t)v;
    return 0;
}

/* Parses a count that must be at least min; returns 0 if text is one. */
static int parse_count(const char *text, int min, int *value)
{
    size_t v;
    if (parse_size(text, &v) || v < (size_t)min)
        return -1;
    *value = (int)v;
    return 0;
}

/* Parses -m's argument: "MAX", "MIN:MAX" or "MIN:" (MAX stays the default). */
static int parse_range(const char *text, struct osu_options *opt)
{
    const char *colon = strchr(text, ':');
    if (!colon)
        return parse_size(text, &opt->max_size);
    char min_text[32];
    size_t len = (size_t)(colon - text);
    if (len == 0 || len >= sizeof(min_text))
        return -1;
    memcpy(min_text, text, len);
    min_text[len] = '\0';
    if (parse_size(min_text, &opt->min_size))
        return -1;
    return colon[1] ? parse_size(colon + 1, &opt->max_size) : 0;
}

/* Rank 0 prints the usage of opt's program to stream. */
static void print_usage(const struct osu_options *opt, FILE *stream)
{
    if (opt->rank != 0)
        return;
    fprintf(stream, "usage: mpirun -np N %s [options]\n", opt->program);
    if (opt->kind != OSU_BARRIER)
        fprintf(stream,
                "  -m [MIN:]MAX   message sizes in bytes, MIN to MAX doubling (default "
                "%zu:%zu)\n",
                opt->min_size, opt->max_size);
    fprintf(stream,
            "  -i ITERS       timed iterations per size (default %d, %d above %d bytes)\n"
            "  -x WARMUP      untimed warm-up iterations per size (default %d, %d above %d "
            "bytes)\n",
            opt->iterations, opt->iterations_large, OSU_LARGE_MESSAGE, opt->skip, opt->skip_large,
            OSU_LARGE_MESSAGE);
    if (opt->kind == OSU_PT2PT_BW)
        fprintf(stream, "  -W WINDOW      messages in flight per iteration (default %d)\n",
                opt->window);
    if (opt->kind == OSU_COLLECTIVE || opt->kind == OSU_BARRIER)
        fprintf(stream, "  -f             full statistics: min and max latency over the ranks, "
                        "iterations\n");
    if (opt->kind != OSU_BARRIER)
        fprintf(stream, "  -c             validate the data of one operation per size (outside "
                        "the timing)\n");
    fprintf(stream, "  -h             this help\n");
}

enum osu_parse_result osu_parse_options(struct osu_options *opt, int argc, char **argv)
{
    const char *bad = NULL; /* the option in error, for the message */
    int given_iterations = -1, given_skip = -1;
    for (int i = 1; i < argc && !bad; i++) {
        const char *arg = argv[i];
        int takes_value = !strcmp(arg, "-m") || !strcmp(arg, "-i") || !strcmp(arg, "-x") ||
                          (!strcmp(arg, "-W") && opt->kind == OSU_PT2PT_BW);
        if (takes_value && i + 1 >= argc) {
            bad = arg;
            break;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            print_usage(opt, stdout);
            return OSU_EXIT;
        } else if (!strcmp(arg, "-m")) {
            if (parse_range(argv[++i], opt))
                bad = arg;
        } else if (!strcmp(arg, "-i")) {
            if (parse_count(argv[++i], 1, &given_iterations))
                bad = arg;
        } else if (!strcmp(arg, "-x")) {
            if (parse_count(argv[++i], 0, &given_skip))
                bad = arg;
        } else if (!strcmp(arg, "-W") && opt->kind == OSU_PT2PT_BW) {
            if (parse_count(argv[++i], 1, &opt->window))
                bad = arg;
        } else if (!strcmp(arg, "-f") &&
                   (opt->kind == OSU_COLLECTIVE || opt->kind == OSU_BARRIER)) {
            opt->full = 1;
        } else if (!strcmp(arg, "-c") && opt->kind != OSU_BARRIER) {
            opt->validate = 1;
        } else {
            bad = arg;
        }
    }
    /* Sizes double from MIN, so a MIN that is a multiple of the element keeps all of them so. */
    opt->min_size = (opt->min_size + opt->min_elem - 1) / opt->min_elem * opt->min_elem;
    /* Only latency means something at 0 bytes (a bandwidth of 0 bytes is 0). */
    if (opt->min_size == 0 && opt->kind != OSU_PT2PT_LATENCY)
        opt->min_size = opt->min_elem;
    if (!bad && opt->min_size > opt->max_size)
        bad = "-m";
    if (bad) {
        if (opt->rank == 0) {
            fprintf(stderr, "%s: bad or unknown option or value near '%s'\n", opt->program, bad);
            print_usage(opt, stderr);
        }
        return OSU_ERROR;
    }
    if (given_iterations > 0)
        opt->iterations = opt->iterations_large = given_iterations;
    if (given_skip >= 0)
        opt->skip = opt->skip_large = given_skip;
    return OSU_RUN;
}

void *osu_alloc(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = bytes ? (bytes + page - 1) / page * page : page;
    void *buffer = NULL;
    if (posix_memalign(&buffer, page, rounded) != 0) {
        fprintf(stderr, "osu: cannot allocate %zu bytes: lower the maximum size with -m\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return NULL;
    }
    /* Touching every page now keeps page faults out of the timed loops. */
    memset(buffer, 0, rounded);
    return buffer;
}

void osu_free(void *buffer)
{
    free(buffer);
}

void osu_rounds(const struct osu_options *opt, size_t size, int *iterations, int *skip)
{
    int large = size > OSU_LARGE_MESSAGE;
    *iterations = large ? opt->iterations_large : opt->iterations;
    *skip = large ? opt->skip_large : opt->skip;
}

size_t osu_next_size(size_t size)
{
    return size ? size * 2 : 1;
}

/* Byte i of the pattern of (seed, size): mixes all three so shifted or stale data differ. */
static unsigned char pattern_byte(size_t i, size_t size, int seed)
{
    unsigned v = (unsigned)(i * 131u + size * 17u + (unsigned)seed * 101u + (i >> 8) * 7u);
    return (unsigned char)(v ^ (v >> 8));
}

void osu_fill_pattern(void *buffer, size_t size, int seed)
{
    unsigned char *bytes = buffer;
    for (size_t i = 0; i < size; i++)
        bytes[i] = pattern_byte(i, size, seed);
}

int osu_check_pattern(const void *buffer, size_t size, int seed)
{
    const unsigned char *bytes = buffer;
    for (size_t i = 0; i < size; i++)
        if (bytes[i] != pattern_byte(i, size, seed))
            return 0;
    return 1;
}

int osu_require_procs(const struct osu_options *opt, int min_procs, int max_procs, int even)
{
    int n = opt->nprocs;
    if (n >= min_procs && (max_procs == 0 || n <= max_procs) && (!even || n % 2 == 0))
        return 0;
    if (opt->rank != 0)
        return 1;
    if (max_procs == min_procs)
        fprintf(stderr, "%s: needs exactly %d ranks, got %d: run it with mpirun -np %d\n",
                opt->program, min_procs, n, min_procs);
    else
        fprintf(stderr, "%s: needs %s%d ranks or more, got %d: run it with mpirun -np %d\n",
                opt->program, even ? "an even number of " : "", min_procs, n, min_procs);
    return 1;
}

void osu_print_header(const struct osu_options *opt, const char *title, const char *extra,
                      const char *value_heading, const char *second_heading)
{
    if (opt->rank != 0)
        return;
    printf("# %s\n", title);
    if (extra)
        fputs(extra, stdout);
    if (opt->kind == OSU_BARRIER)
        printf("%-*s", VALUE_WIDTH, "# Avg Latency(us)");
    else
        printf("%-*s%*s", SIZE_WIDTH, "# Size", VALUE_WIDTH, value_heading);
    if (second_heading)
        printf("%*s", VALUE_WIDTH, second_heading);
    if (opt->full)
        printf("%*s%*s%*s", VALUE_WIDTH, "Min Latency(us)", VALUE_WIDTH, "Max Latency(us)",
               COUNT_WIDTH, "Iterations");
    if (opt->validate)
        printf("%*s", COUNT_WIDTH, "Validation");
    printf("\n");
    fflush(stdout);
}

/* Ends a row: the validation column with -c, the newline, and a flush so rows show live. */
static void end_row(const struct osu_options *opt, int passed)
{
    if (opt->validate)
        printf("%*s", COUNT_WIDTH, passed ? "Pass" : "Fail");
    printf("\n");
    fflush(stdout);
}

void osu_print_row(const struct osu_options *opt, size_t size, double value, int passed)
{
    if (opt->rank != 0)
        return;
    printf("%-*zu%*.2f", SIZE_WIDTH, size, VALUE_WIDTH, value);
    end_row(opt, passed);
}

void osu_print_row2(const struct osu_options *opt, size_t size, double value, double second,
                    int passed)
{
    if (opt->rank != 0)
        return;
    printf("%-*zu%*.2f%*.2f", SIZE_WIDTH, size, VALUE_WIDTH, value, VALUE_WIDTH, second);
    end_row(opt, passed);
}

void osu_print_collective_row(const struct osu_options *opt, size_t size, double seconds_per_op,
                              int iterations, int passed)
{
    double min_time, max_time, sum_time;
    MPI_Reduce(&seconds_per_op, &min_time, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&seconds_per_op, &max_time, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&seconds_per_op, &sum_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (opt->rank != 0)
        return;
    double avg_us = sum_time / opt->nprocs * 1e6;
    if (opt->kind == OSU_BARRIER)
        printf("%*.2f", VALUE_WIDTH, avg_us);
    else
        printf("%-*zu%*.2f", SIZE_WIDTH, size, VALUE_WIDTH, avg_us);
    if (opt->full)
        printf("%*.2f%*.2f%*d", VALUE_WIDTH, min_time * 1e6, VALUE_WIDTH, max_time * 1e6,
               COUNT_WIDTH, iterations);
    end_row(opt, passed);
}

int osu_all_passed(const struct osu_options *opt, int passed)
{
    if (!opt->validate)
        return 1;
    int all = 0;
    MPI_Allreduce(&passed, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

int osu_start(struct osu_options *opt, const struct osu_program *program, int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    osu_init(opt, program->name, program->kind, program->min_elem);
    enum osu_parse_result parsed = osu_parse_options(opt, *argc, *argv);
    if (parsed == OSU_RUN &&
        !osu_require_procs(opt, program->min_procs, program->max_procs, program->even_procs))
        return -1;
    MPI_Finalize();
    return parsed == OSU_EXIT ? 0 : 1;
}

int osu_finish(int passed)
{
    MPI_Finalize();
    return passed ? 0 : 1;
}

/*
 * Calls row for every size of opt's sweep (a single pass with size 0 for OSU_BARRIER) with
 * the size's timed and warm-up rounds; returns 1 if every row passed its check.
 */
static int sweep(const struct osu_options *opt,
                 int (*row)(const struct osu_options *opt, size_t size, int iterations, int skip,
                            const void *bench, void *state),
                 const void *bench, void *state)
{
    int all_passed = 1;
    size_t first = opt->kind == OSU_BARRIER ? 0 : opt->min_size;
    size_t last = opt->kind == OSU_BARRIER ? 0 : opt->max_size;
    for (size_t size = first; size <= last; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(opt, size, &iterations, &skip);
        all_passed &= row(opt, size, iterations, skip, bench, state);
    }
    return all_passed;
}

/* One collective row: the check, the timed operations, the statistics over the ranks. */
static int collective_row(const struct osu_options *opt, size_t size, int iterations, int skip,
                          const void *bench_arg, void *state)
{
    const struct osu_collective *bench = bench_arg;
    const struct osu_buffers *buffers = state;
    int passed = 1;
    if (opt->validate && bench->check)
        passed = osu_all_passed(opt, bench->check(size, buffers));
    double busy = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        double start = MPI_Wtime();
        bench->run(size, buffers);
        double took = MPI_Wtime() - start;
        if (i >= skip)
            busy += took;
        /* Without it a rank that leaves the operation early would start the next one while
         * others are still in this one, and pipelined operations would look faster than one
         * operation is. */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    osu_print_collective_row(opt, size, busy / iterations, iterations, passed);
    return passed;
}

int osu_collective_main(int argc, char **argv, const struct osu_collective *bench)
{
    struct osu_options opt;
    int status = osu_start(&opt, &bench->program, &argc, &argv);
    if (status >= 0)
        return status;
    struct osu_buffers buffers = {NULL, NULL, opt.rank, opt.nprocs};
    if (bench->setup) {
        bench->setup(&opt, &buffers);
    } else if (opt.kind != OSU_BARRIER) {
        buffers.send = osu_alloc(opt.max_size);
        buffers.recv = osu_alloc(opt.max_size);
    }
    osu_print_header(&opt, bench->title, bench->extra, "Avg Latency(us)", NULL);
    int passed = sweep(&opt, collective_row, bench, &buffers);
    osu_free(buffers.send);
    osu_free(buffers.recv);
    return osu_finish(passed);
}

void osu_fill_sum_operands(const struct osu_buffers *buffers, size_t size)
{
    float *send = (float *)buffers->send, *recv = (float *)buffers->recv;
    for (size_t i = 0; i < size / sizeof(float); i++) {
        send[i] = (float)((buffers->rank + 1) * (int)(i % 7 + 1));
        recv[i] = -1.0f;
    }
}

int osu_check_sum_result(const struct osu_buffers *buffers, size_t size)
{
    const float *recv = (const float *)buffers->recv;
    float ranks_sum = (float)buffers->nprocs * (float)(buffers->nprocs + 1) / 2.0f;
    for (size_t i = 0; i < size / sizeof(float); i++)
        if (recv[i] != ranks_sum * (float)(i % 7 + 1))
            return 0;
    return 1;
}

/* One point-to-point row: the check, the measurement, the value(s). */
static int pt2pt_row(const struct osu_options *opt, size_t size, int iterations, int skip,
                     const void *bench_arg, void *state)
{
    const struct osu_pt2pt *bench = bench_arg;
    const struct osu_pair *pair = state;
    int passed = 1;
    if (opt->validate)
        passed = osu_all_passed(opt, bench->check(opt, pair, size));
    double second = 0;
    double value = bench->measure(opt, pair, size, iterations, skip, &second);
    if (bench->second_heading)
        osu_print_row2(opt, size, value, second, passed);
    else
        osu_print_row(opt, size, value, passed);
    return passed;
}

/* Returns an array of count elements of size bytes; aborts MPI_COMM_WORLD without memory. */
static void *alloc_array(size_t count, size_t size)
{
    void *array = malloc(count * size);
    if (!array)
        MPI_Abort(MPI_COMM_WORLD, 1);
    return array;
}

int osu_pt2pt_main(int argc, char **argv, const struct osu_pt2pt *bench)
{
    struct osu_options opt;
    int status = osu_start(&opt, &bench->program, &argc, &argv);
    if (status >= 0)
        return status;
    int pairs = opt.nprocs / 2;
    struct osu_pair pair = {
        .send = osu_alloc(opt.max_size),
        .recv = bench->two_buffers ? osu_alloc(opt.max_size) : NULL,
        .peer = opt.rank < pairs ? opt.rank + pairs : opt.rank - pairs,
        .leader = opt.rank < pairs,
    };
    size_t requests = (size_t)bench->window_requests * (size_t)opt.window;
    if (requests) {
        pair.requests = alloc_array(requests, sizeof(*pair.requests));
        pair.statuses = alloc_array(requests, sizeof(*pair.statuses));
    }
    char extra[128] = "# Datatype: MPI_CHAR.\n";
    if (bench->describe)
        bench->describe(&opt, extra, sizeof(extra));
    osu_print_header(&opt, bench->title, extra, bench->value_heading, bench->second_heading);
    int passed = sweep(&opt, pt2pt_row, bench, &pair);
    free(pair.requests);
    free(pair.statuses);
    osu_free(pair.send);
    osu_free(pair.recv);
    return osu_finish(passed);
}

void osu_describe_window(const struct osu_options *opt, char *extra, size_t len)
{
    snprintf(extra, len, "# Datatype: MPI_CHAR.\n# [ window size: %d ]\n", opt->window);
}

double osu_ping_pong(const struct osu_pair *pair, size_t size, int iterations, int skip)
{
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        if (pair->leader) {
            MPI_Send(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(pair->recv, (int)size, MPI_CHAR, pair->peer, OSU_TAG_PING, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(pair->recv, (int)size, MPI_CHAR, pair->peer, OSU_TAG_PING, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_PING, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

int osu_check_ping_pong(const struct osu_options *opt, const struct osu_pair *pair, size_t size)
{
    osu_fill_pattern(pair->send, size, opt->rank);
    osu_fill_pattern(pair->recv, size, opt->rank);
    osu_ping_pong(pair, size, 1, 0);
    return osu_check_pattern(pair->recv, size, pair->peer);
}

double osu_stream_windows(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                          int iterations, int skip)
{
    char ack[4] = {0};
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iterations; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < opt->window; w++) {
            if (pair->leader)
                MPI_Isend(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
                          &pair->requests[w]);
            else
                MPI_Irecv(pair->send, (int)size, MPI_CHAR, pair->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
                          &pair->requests[w]);
        }
        MPI_Waitall(opt->window, pair->requests, pair->statuses);
        if (pair->leader)
            MPI_Recv(ack, 4, MPI_CHAR, pair->peer, OSU_TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(ack, 4, MPI_CHAR, pair->peer, OSU_TAG_ACK, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - start;
}
