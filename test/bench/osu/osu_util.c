/*
 * osu_util.c — option parsing, buffers, iteration counts, validation pattern and OSU-format
 * printing for psport's OSU-style benchmarks (see osu_util.h).
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

void osu_init(struct osu_options *opt, const char *program, enum osu_kind kind, size_t min_elem)
{
    memset(opt, 0, sizeof(*opt));
    opt->program = program;
    opt->kind = kind;
    opt->window = 64;
    MPI_Comm_rank(MPI_COMM_WORLD, &opt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &opt->nprocs);
    switch (kind) {
    case OSU_PT2PT_LATENCY:
        opt->min_size = 0;
        opt->max_size = (size_t)4 << 20;
        opt->iterations = 10000;
        opt->skip = 100;
        opt->iterations_large = 1000;
        opt->skip_large = 10;
        break;
    case OSU_PT2PT_BW:
        opt->min_size = 1;
        opt->max_size = (size_t)4 << 20;
        opt->iterations = 100;
        opt->skip = 10;
        opt->iterations_large = 20;
        opt->skip_large = 2;
        break;
    case OSU_COLLECTIVE:
    case OSU_BARRIER:
        opt->min_size = 1;
        opt->max_size = (size_t)1 << 20;
        opt->iterations = 1000;
        opt->skip = 200;
        opt->iterations_large = 100;
        opt->skip_large = 10;
        break;
    }
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

int osu_run_collective(const struct osu_options *opt, const struct osu_collective *bench)
{
    osu_print_header(opt, bench->title, bench->extra, "Avg Latency(us)", NULL);
    int all_passed = 1;
    size_t first = opt->kind == OSU_BARRIER ? 0 : opt->min_size;
    size_t last = opt->kind == OSU_BARRIER ? 0 : opt->max_size;
    for (size_t size = first; size <= last; size = osu_next_size(size)) {
        int iterations, skip;
        osu_rounds(opt, size, &iterations, &skip);
        int passed = 1;
        if (opt->validate && bench->check)
            passed = osu_all_passed(opt, bench->check(size, bench->ctx));
        all_passed &= passed;
        double busy = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < skip + iterations; i++) {
            double start = MPI_Wtime();
            bench->run(size, bench->ctx);
            double took = MPI_Wtime() - start;
            if (i >= skip)
                busy += took;
            /* Without it a rank that leaves the operation early would start the next one
             * while others are still in this one, and pipelined operations would look faster
             * than one operation is. */
            MPI_Barrier(MPI_COMM_WORLD);
        }
        osu_print_collective_row(opt, size, busy / iterations, iterations, passed);
    }
    return all_passed;
}
