/*
 * osu_util.h — what psport's OSU-style MPI benchmarks share: option parsing with the OSU
 * Micro-Benchmarks' letters, page-aligned buffers, iteration counts by message size, the
 * validation pattern, printing in OSU's column format (so tools that read OSU output read
 * ours), and the main of every collective (osu_collective_main) and point-to-point
 * (osu_pt2pt_main) benchmark, so that each benchmark's file holds only what is its own: the
 * operation, its buffers and its check.  Written for this project from OSU's published
 * methodology; no OSU code.
 */
#ifndef PSPORT_OSU_UTIL_H
#define PSPORT_OSU_UTIL_H

#include <mpi.h>

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

/* Who a benchmark is: its name, family, datatype and the number of ranks it runs on. */
struct osu_program {
    const char *name;   /* in messages, e.g. "latency" */
    enum osu_kind kind; /* which defaults and options apply */
    size_t min_elem;    /* element size of the datatype, as for osu_init */
    int min_procs;      /* ranks: at least this many, */
    int max_procs;      /* at most this many (0: no limit), */
    int even_procs;     /* and, if set, an even number */
};

/*
 * The start every benchmark shares: MPI_Init, osu_init, osu_parse_options and
 * osu_require_procs.  Returns -1 when the benchmark is to run; otherwise MPI is finalised and
 * the value is main's exit status (0 after -h, 1 after a bad option or rank count).
 */
int osu_start(struct osu_options *opt, const struct osu_program *program, int *argc, char ***argv);

/* The end every benchmark shares: MPI_Finalize; returns main's exit status (0 if passed). */
int osu_finish(int passed);

/* Message tags: window data and validation messages, acknowledgements, ping-pong. */
#define OSU_TAG_DATA 100
#define OSU_TAG_ACK  101
#define OSU_TAG_PING 1

/*
 * A collective benchmark's buffers: send and recv (NULL where this rank needs none), and the
 * communicator's shape for the checks.
 */
struct osu_buffers {
    char *send;
    char *recv;
    int rank;
    int nprocs;
};

/* A collective benchmark for osu_collective_main: what differs from one to the next. */
struct osu_collective {
    struct osu_program program;
    const char *title; /* first header line, e.g. "OSU-format MPI Broadcast Latency Test" */
    const char *extra; /* further "# ..." header lines or NULL */
    /* Allocates the buffers with osu_alloc for sizes up to opt->max_size (NULL: send and recv
     * of max_size on every rank; OSU_BARRIER gets none). */
    void (*setup)(const struct osu_options *opt, struct osu_buffers *buffers);
    /* Runs the operation once with messages of size bytes. */
    void (*run)(size_t size, const struct osu_buffers *buffers);
    /* With -c, once per size before the timing: fills the buffers with known data, runs the
     * operation and returns 1 if this rank's result is right (NULL: nothing to check). */
    int (*check)(size_t size, const struct osu_buffers *buffers);
};

/*
 * The whole of a collective benchmark's main: osu_start, the buffers, then for every size (a
 * single pass without size for OSU_BARRIER) the check with -c, warm-up operations, then timed
 * operations one at a time with a barrier between them (untimed), each rank summing its own
 * times; prints the header and one row per size (osu_print_collective_row).  Returns main's
 * exit status: 0 if every check passed.
 */
int osu_collective_main(int argc, char **argv, const struct osu_collective *bench);

/*
 * -c for the float sum reductions (reduce, allreduce): element i of rank r is
 * (r + 1) * (i % 7 + 1), small integers, so the float sum is exact and equals
 * nprocs * (nprocs + 1) / 2 * (i % 7 + 1) whatever order the ranks are added in.  The fill
 * writes the send buffer's size bytes and clears recv; the check reads recv.
 */
void osu_fill_sum_operands(const struct osu_buffers *buffers, size_t size);

/* Returns 1 if recv holds the sum of the operands of osu_fill_sum_operands, else 0. */
int osu_check_sum_result(const struct osu_buffers *buffers, size_t size);

/*
 * A point-to-point benchmark's state: rank r < np/2 pairs with r + np/2 (with 2 ranks, 0
 * with 1).  The leader sends first (ping-pong initiator, streaming sender).
 */
struct osu_pair {
    char *send;            /* max_size bytes */
    char *recv;            /* max_size bytes, or NULL when send serves both directions */
    int peer;              /* the rank this one exchanges with */
    int leader;            /* 1 in the first half of the ranks */
    MPI_Request *requests; /* the window's requests (NULL without a window) */
    MPI_Status *statuses;  /* and their statuses */
};

/* A point-to-point benchmark for osu_pt2pt_main: what differs from one to the next. */
struct osu_pt2pt {
    struct osu_program program;
    const char *title;          /* first header line */
    const char *value_heading;  /* e.g. "Latency (us)" */
    const char *second_heading; /* a second value column (mbw_mr) or NULL */
    int two_buffers;            /* a recv buffer besides send */
    int window_requests;        /* requests per window message: 0 (no window), 1, 2 (bibw) */
    /* Writes the "# ..." header lines after the title into extra (len bytes; NULL: only the
     * datatype line "# Datatype: MPI_CHAR."). */
    void (*describe)(const struct osu_options *opt, char *extra, size_t len);
    /* With -c, once per size before the timing: one checked exchange; returns 1 if this rank
     * received the right data. */
    int (*check)(const struct osu_options *opt, const struct osu_pair *pair, size_t size);
    /* Warm-up then timed rounds at size; returns the row's value (rank 0's is printed) and,
     * with a second heading, the second value in *second. */
    double (*measure)(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                      int iterations, int skip, double *second);
};

/*
 * The whole of a point-to-point benchmark's main: osu_start, the pair's buffers and requests,
 * the header, then for every size the check with -c and the measurement, one row each.
 * Returns main's exit status: 0 if every check passed.
 */
int osu_pt2pt_main(int argc, char **argv, const struct osu_pt2pt *bench);

/* A describe for osu_pt2pt: the datatype line and "# [ window size: W ]" (bw, bibw). */
void osu_describe_window(const struct osu_options *opt, char *extra, size_t len);

/*
 * Blocking ping-pong with the pair's peer after a barrier: skip warm-up round trips, then
 * iterations timed ones (the leader sends first).  Returns the timed seconds.
 */
double osu_ping_pong(const struct osu_pair *pair, size_t size, int iterations, int skip);

/*
 * -c for the ping-pongs: one round trip in which each side sends the pattern of its rank
 * (its recv buffer starting with its own, so stale data fails).  Returns 1 if the peer's
 * pattern arrived.
 */
int osu_check_ping_pong(const struct osu_options *opt, const struct osu_pair *pair, size_t size);

/*
 * Streaming after a barrier: per round the leader posts a window of MPI_Isend of size bytes
 * from send, the peer the matching MPI_Irecv into send, and after the window the peer answers
 * with a 4-byte acknowledgement; skip warm-up rounds, then iterations timed ones.  Returns
 * this rank's seconds for the timed rounds.
 */
double osu_stream_windows(const struct osu_options *opt, const struct osu_pair *pair, size_t size,
                          int iterations, int skip);

#endif
