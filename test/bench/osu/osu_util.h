/*
 * osu_util.h — what psport's OSU-style MPI benchmarks share: option parsing with the OSU
 * Micro-Benchmarks' letters, page-aligned buffers, iteration counts by message size, the
 * validation pattern, and printing in OSU's column format (so tools that read OSU output read
 * ours).  Written for this project from OSU's published methodology; no OSU code.
 */
#ifndef PSPORT_OSU_UTIL_H
#define PSPORT_OSU_UTIL_H

#include <stddef.h>

/* The families of benchmarks: they differ in defaults, options and output columns. */
enum osu_kind {
    OSU_PT2PT_LATENCY, /* latency, multi_lat: 0 .. 4 MiB, 10000/1000 rounds */
    OSU_PT2PT_BW,      /* bw, bibw, mbw_mr: 1 .. 4 MiB, 100/20 windows */
    OSU_COLLECTIVE,    /* bcast, reduce, ...: 1 .. 1 MiB, 1000/100 rounds */
    OSU_BARRIER,       /* barrier: no message size */
};

/* Message sizes above this many bytes use the "large" iteration counts, as OSU does. */
#define OSU_LARGE_MESSAGE 8192

/* One benchmark run's settings: defaults from osu_init, then the command line. */
struct osu_options {
    const char *program;  /* name in messages, e.g. "latency" */
    enum osu_kind kind;   /* which defaults and options apply */
    size_t min_size;      /* smallest message in bytes */
    size_t max_size;      /* largest message in bytes */
    size_t min_elem;      /* element size of the datatype: no size below it, all multiples */
    int iterations;       /* timed rounds for sizes <= OSU_LARGE_MESSAGE */
    int skip;             /* untimed warm-up rounds for those */
    int iterations_large; /* timed rounds for larger sizes */
    int skip_large;       /* warm-up rounds for larger sizes */
    int window;           /* messages in flight per round (bandwidth family) */
    int full;             /* -f: collectives also print min, max and iterations */
    int validate;         /* -c: check the data of one exchange per size, outside the timing */
    int rank;             /* this process's rank in MPI_COMM_WORLD */
    int nprocs;           /* size of MPI_COMM_WORLD */
};

/* What osu_parse_options tells its caller to do. */
enum osu_parse_result {
    OSU_RUN,   /* options fine: run the benchmark */
    OSU_EXIT,  /* -h given: help printed, finish with status 0 */
    OSU_ERROR, /* bad option or value: message printed, finish with status 1 */
};

/*
 * Fills *opt with the defaults of kind for program, rank and size from MPI_COMM_WORLD (MPI
 * must be initialised).  min_elem is the size of one element of the benchmark's datatype (1
 * for MPI_CHAR, 4 for MPI_FLOAT): no sweep starts below it, as a reduction of 1 byte of floats
 * means nothing.
 */
void osu_init(struct osu_options *opt, const char *program, enum osu_kind kind, size_t min_elem);

/*
 * Parses the OSU options -m [MIN:]MAX, -i ITERS, -x WARMUP, -W WINDOW (bandwidth family),
 * -f (collectives), -c (not barrier), -h.  Every rank parses (so all agree); only rank 0
 * prints help or errors, to stderr for errors.  -i and -x set the counts for all sizes, as
 * OSU's do.  Barrier accepts -m and ignores it, so one command line fits every collective.
 * A MIN below the datatype's element size is raised to it (and MIN to a multiple of it).
 */
enum osu_parse_result osu_parse_options(struct osu_options *opt, int argc, char **argv);

/*
 * Returns a page-aligned buffer of at least bytes bytes (never NULL: at least one page), every
 * page written once so no page fault lands in a timed loop.  Aborts MPI_COMM_WORLD with a
 * message when memory runs out.  Free it with osu_free.
 */
void *osu_alloc(size_t bytes);

/* Frees a buffer from osu_alloc (NULL is fine). */
void osu_free(void *buffer);

/* The timed and warm-up rounds for messages of size bytes under opt. */
void osu_rounds(const struct osu_options *opt, size_t size, int *iterations, int *skip);

/* The size after size in the sweep: 0 is followed by 1, every other size doubles. */
size_t osu_next_size(size_t size);

/*
 * Writes the validation pattern of (seed, size) into the first size bytes of buffer: bytes
 * that differ by position, size and seed, so a message from the wrong sender, of the wrong
 * length or from an earlier round does not pass for the right one.
 */
void osu_fill_pattern(void *buffer, size_t size, int seed);

/* Returns 1 if the first size bytes of buffer hold the pattern of (seed, size), else 0. */
int osu_check_pattern(const void *buffer, size_t size, int seed);

/*
 * Checks the number of ranks: at least min_procs, at most max_procs (0: no limit) and, if
 * even is set, an even number.  Returns 0 if it fits; otherwise rank 0 prints what to run
 * instead and every rank gets 1.
 */
int osu_require_procs(const struct osu_options *opt, int min_procs, int max_procs, int even);

/*
 * Rank 0 prints the title block: "# <title>", the informational lines in extra (each starting
 * with "# " and ending in a newline; may be NULL), then the column heading of opt's kind in
 * OSU's widths: "# Size" left in 10 columns, value_heading (e.g. "Latency (us)") and, if not
 * NULL, second_heading right-aligned in 18 each; -c adds "Validation", collectives with -f add
 * min, max and iterations.  Barrier has no size column.
 */
void osu_print_header(const struct osu_options *opt, const char *title, const char *extra,
                      const char *value_heading, const char *second_heading);

/*
 * Rank 0 prints one point-to-point row: size, value with 2 decimals, and with -c the
 * validation column ("Pass"/"Fail"; passed is ignored without -c).
 */
void osu_print_row(const struct osu_options *opt, size_t size, double value, int passed);

/* As osu_print_row with a second value column (mbw_mr's messages per second). */
void osu_print_row2(const struct osu_options *opt, size_t size, double value, double second,
                    int passed);

/*
 * Collective rows.  Every rank passes its own mean time per operation in seconds; the
 * function reduces min, max and average over the ranks (so all ranks must call it) and rank 0
 * prints the row in µs: average, and with -f also min, max and the iteration count.
 */
void osu_print_collective_row(const struct osu_options *opt, size_t size, double seconds_per_op,
                              int iterations, int passed);

/*
 * Combines a local validation result over all ranks (all must call it): 1 if every rank
 * passed.  Without -c it returns 1 without communicating.
 */
int osu_all_passed(const struct osu_options *opt, int passed);

/* A collective benchmark for osu_run_collective: what one operation and its check are. */
struct osu_collective {
    const char *title; /* first header line, e.g. "OSU-format MPI Broadcast Latency Test" */
    const char *extra; /* further "# ..." header lines or NULL */
    /* Runs the operation once with messages of size bytes. */
    void (*run)(size_t size, void *ctx);
    /* With -c, once per size before the timing: fills the buffers with known data, runs the
     * operation and returns 1 if this rank's result is right (NULL: nothing to check). */
    int (*check)(size_t size, void *ctx);
    void *ctx; /* the benchmark's buffers, handed to run and check */
};

/*
 * The collective sweep: for every size (a single pass without size for OSU_BARRIER), the
 * check with -c, warm-up operations, then timed operations one at a time with a barrier
 * between them (untimed), each rank summing its own times; prints the header and one row per
 * size.  All ranks call it.  Returns 1 if every check passed (always without -c).
 */
int osu_run_collective(const struct osu_options *opt, const struct osu_collective *bench);

#endif
