/*
 * scope — the SCOPE kernel-level tests (Melas' thesis §6.6–6.7) over MPI, one program with a
 * subcommand per kernel:
 *   bcast    the root broadcasts an N x N matrix of doubles                      (§6.6.2)
 *   scatter  the root scatters an N x N matrix in row blocks (MPI_Scatterv)       (§6.6.3)
 *   gather   the row blocks are gathered at the root (MPI_Gatherv)                (§6.6.3)
 *   shift    cyclic shift of every rank's row block to the next rank: a fresh
 *            receive buffer, two point-to-point calls, swap, free              (§6.6.4)
 *   cannon   Cannon's matrix multiply on a sqrt(p) x sqrt(p) torus; when p is not
 *            a square, its 1 x p form: A's row blocks stay, B's row blocks rotate
 *            round the ring p - 1 times (the same skewed rotation, one dimension)  (§6.7.3)
 *   psrs     parallel sorting by regular sampling of K random 64-bit keys: scatter,
 *            local quicksort, regular samples to the root, p - 1 pivots broadcast,
 *            partitions exchanged all-to-all, p-way merge, gather at the root     (§6.7.4)
 *   relax    Laplace relaxation on a G x G grid with fixed boundary in row strips,
 *            halo exchange and a global maximum change every iteration, a fixed
 *            number of iterations (§6.7.5); red-black Gauss-Seidel ordering instead
 *            of the thesis' chaotic Jacobi/Gauss-Seidel mixture, so that the result
 *            does not depend on the decomposition and is compared bit for bit with
 *            a serial run
 *   pingpong 8-byte ping-pong between ranks 0 and 1 (checks where the bytes travel)
 *   all      every kernel above (pingpong only with 2 ranks or more)
 * Every kernel is set up afresh for each of R repeats and only the operation is timed (as the
 * thesis prescribes); a repeat's time is the slowest rank's.  The last repeat is verified.
 * Plain C loops (no BLAS), as SCOPE's kernels avoid tuned libraries.
 *
 *   scope [-n N] [-m N] [-g G] [-i ITERS] [-k KEYS] [-r REPEATS] KERNEL...
 *
 * Prints per kernel one line of key=value fields "scope kernel=.. ranks=.. size=.. t_best=..
 * t_median=.. rate=.. unit=.. check=OK|WRONG" (times in s); exit status 0 when all checks pass.
 * Efficiency T(1) / (p T(p)) needs the 1-rank time: test/bench/scope/run computes it.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEATS 50

/* Sizes and repeats from the command line. */
struct config {
    int ops_n;      /* bcast, scatter, gather, shift: N x N doubles */
    int cannon_n;   /* cannon: N x N */
    int relax_n;    /* relax: G x G interior points */
    int relax_iter; /* relax: iterations */
    long keys;      /* psrs: number of keys */
    int repeats;
};

/* One kernel run: sets up, times only the operation (in *elapsed, this rank's seconds), and
 * when `verify` is set checks the result; returns 1 when right (or not verified). */
typedef int kernel_fn(const struct config *cfg, int me, int np, int verify, double *elapsed);

/* How a kernel is named, sized and rated in the output. */
struct kernel {
    const char *name;
    kernel_fn *run;
    const char *unit;                         /* of the rate */
    double (*work)(const struct config *cfg); /* units of work per run */
    long (*size)(const struct config *cfg);   /* the "size=" field */
};

static int me_global; /* for error messages */

/* malloc that ends the job with a message when memory runs out. */
static void *alloc_or_die(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "scope: rank %d: out of memory (%zu bytes)\n", me_global, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* A 64-bit hash (the splitmix64 finaliser): the test data, reproducible on any rank. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Entry (i, j) of the test matrix `which`: a hash of the position, so that any rank can
 * recompute any entry.  Integer valued in -8..8, so that sums of products are exact in double
 * whatever their order (the multiply is checked for equality). */
static double entry_of(int which, long i, long j)
{
    return (double)(int)(mix64(((uint64_t)which << 56) ^ ((uint64_t)i << 28) ^ (uint64_t)j) % 17) -
           8.0;
}

/* Rows [row0, row0 + rows) of the N-column test matrix 0, row-major. */
static void fill_rows(double *m, long row0, int rows, int n)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++)
            m[(size_t)i * n + j] = entry_of(0, row0 + i, j);
}

/* True when m holds rows [row0, row0 + rows) of test matrix 0 (as fill_rows wrote them). */
static int rows_match(const double *m, long row0, int rows, int n)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++)
            if (m[(size_t)i * n + j] != entry_of(0, row0 + i, j))
                return 0;
    return 1;
}

/* Row block of rank r when n rows are divided among p ranks (the first n % p get one more). */
static int rows_of(int r, int p, int n)
{
    return n / p + (r < n % p);
}

/* Global index of rank r's first row in that division. */
static long first_row_of(int r, int p, int n)
{
    return (long)r * (n / p) + (r < n % p ? r : n % p);
}

/* All ranks start the timed operation together. */
static double start_clock(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime();
}

/* ---- kernel-level operation tests (§6.6) ---- */

/* §6.6.2: the root's N x N matrix to everyone in one MPI_Bcast. */
static int run_bcast(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    (void)np;
    int n = cfg->ops_n;
    double *m = alloc_or_die(sizeof(double) * (size_t)n * n);
    if (me == 0)
        fill_rows(m, 0, n, n);
    double t0 = start_clock();
    MPI_Bcast(m, n * n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *elapsed = MPI_Wtime() - t0;
    int ok = !verify || rows_match(m, 0, n, n);
    free(m);
    return ok;
}

/* Counts and displacements (in doubles) of the row blocks of an N x N matrix. */
static void block_layout(int np, int n, int *counts, int *displs)
{
    for (int r = 0; r < np; r++) {
        counts[r] = rows_of(r, np, n) * n;
        displs[r] = (int)first_row_of(r, np, n) * n;
    }
}

/*
 * §6.6.3: the row blocks of an N x N matrix between the root and the ranks, the vector forms:
 * scattered from the root's matrix, or gathered back into it.  Only the sending side's data is
 * written before the clock starts (the root's receiving matrix stays untouched, as before).
 */
static int move_row_blocks(const struct config *cfg, int me, int np, int verify, int gather,
                           double *elapsed)
{
    int n = cfg->ops_n, mine = rows_of(me, np, n);
    long first = first_row_of(me, np, n);
    int *counts = alloc_or_die(sizeof(int) * np), *displs = alloc_or_die(sizeof(int) * np);
    block_layout(np, n, counts, displs);
    double *part = alloc_or_die(sizeof(double) * (size_t)mine * n);
    double *all = me == 0 ? alloc_or_die(sizeof(double) * (size_t)n * n) : NULL;
    if (gather)
        fill_rows(part, first, mine, n);
    else if (me == 0)
        fill_rows(all, 0, n, n);
    double t0 = start_clock();
    if (gather)
        MPI_Gatherv(part, mine * n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else
        MPI_Scatterv(all, counts, displs, MPI_DOUBLE, part, mine * n, MPI_DOUBLE, 0,
                     MPI_COMM_WORLD);
    *elapsed = MPI_Wtime() - t0;
    int ok = !verify ||
             (gather ? me != 0 || rows_match(all, 0, n, n) : rows_match(part, first, mine, n));
    free(all);
    free(part);
    free(counts);
    free(displs);
    return ok;
}

/* §6.6.3: the root's N x N matrix in row blocks to the ranks. */
static int run_scatter(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    return move_row_blocks(cfg, me, np, verify, 0, elapsed);
}

/* §6.6.3: the ranks' row blocks back into one N x N matrix at the root. */
static int run_gather(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    return move_row_blocks(cfg, me, np, verify, 1, elapsed);
}

/* Every rank holds ceil(N/p) rows (the last block padded with further rows of the same
 * generator) and passes them on to the next rank. */
static int run_shift(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    int n = cfg->ops_n, rows = (n + np - 1) / np, count = rows * n;
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    double *block = alloc_or_die(sizeof(double) * (size_t)count);
    fill_rows(block, (long)me * rows, rows, n);
    double t0 = start_clock();
    double *incoming = alloc_or_die(sizeof(double) * (size_t)count);
    MPI_Request req;
    MPI_Irecv(incoming, count, MPI_DOUBLE, prev, 11, MPI_COMM_WORLD, &req);
    MPI_Send(block, count, MPI_DOUBLE, next, 11, MPI_COMM_WORLD);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    free(block);
    block = incoming;
    *elapsed = MPI_Wtime() - t0;
    int ok = !verify || rows_match(block, (long)prev * rows, rows, n);
    free(block);
    return ok;
}

/* ---- kernel-level algorithmic tests (§6.7) ---- */

/* C[m x w] += A[m x k] * B[k x w], row-major with leading dimensions; the plain i-k-j loop. */
static void multiply_add(int m, int k, int w, const double *a, int lda, const double *b, int ldb,
                         double *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int l = 0; l < k; l++) {
            double x = a[(size_t)i * lda + l];
            const double *brow = b + (size_t)l * ldb;
            double *crow = c + (size_t)i * ldc;
            for (int j = 0; j < w; j++)
                crow[j] += x * brow[j];
        }
}

/* Entry of A (which 1) or B (which 2) of the multiply, zero in the padding beyond n. */
static double padded_entry(int which, int n, long i, long j)
{
    return i < n && j < n ? entry_of(which, i, j) : 0.0;
}

/* The rows x cols block at (row0, col0) of the padded A or B, row-major. */
static void fill_block(double *m, int which, int n, long row0, long col0, int rows, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            m[(size_t)i * cols + j] = padded_entry(which, n, row0 + i, col0 + j);
}

/* Entry (i, j) of C = A * B by a serial dot product. */
static double product_entry(int n, long i, long j)
{
    double s = 0;
    for (long l = 0; l < n; l++)
        s += entry_of(1, i, l) * entry_of(2, l, j);
    return s;
}

/* Compares the rows x cols block of C at (row0, col0): the whole first row and two entries
 * of every other row (one on a diagonal, one pseudo-random); exact, the entries are integers. */
static int product_block_right(const double *c, int n, long row0, long col0, int rows, int cols)
{
    uint64_t pick = (uint64_t)row0 * 31 + (uint64_t)col0;
    for (int i = 0; i < rows; i++) {
        int check[2] = {i % cols, (int)((pick = mix64(pick)) % (uint64_t)cols)};
        for (int j = 0; j < cols; j++) {
            if (i != 0 && j != check[0] && j != check[1])
                continue;
            double want = row0 + i < n && col0 + j < n ? product_entry(n, row0 + i, col0 + j) : 0;
            if (c[(size_t)i * cols + j] != want)
                return 0;
        }
    }
    return 1;
}

/* q when p = q * q, else 0. */
static int square_root_of(int p)
{
    int q = 1;
    while ((q + 1) * (q + 1) <= p)
        q++;
    return q * q == p ? q : 0;
}

/* §6.7.3: C = A * B on the torus (p square) or the 1 x p ring; the alignment and every
 * rotation are timed with the multiplies; C is checked against serial dot products. */
static int run_cannon(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    int n = cfg->cannon_n, q = square_root_of(np), ok = 1;
    if (q) { /* the sqrt(p) x sqrt(p) torus */
        int b = (n + q - 1) / q, row = me / q, col = me % q, cells = b * b;
        double *a = alloc_or_die(sizeof(double) * cells),
               *bb = alloc_or_die(sizeof(double) * cells);
        double *c = calloc((size_t)cells, sizeof(double));
        if (!c)
            MPI_Abort(MPI_COMM_WORLD, 2);
        fill_block(a, 1, n, (long)row * b, (long)col * b, b, b);
        fill_block(bb, 2, n, (long)row * b, (long)col * b, b, b);
        int left = row * q + (col + q - 1) % q, right = row * q + (col + 1) % q;
        int up = ((row + q - 1) % q) * q + col, down = ((row + 1) % q) * q + col;
        double t0 = start_clock();
        /* Alignment: row i of A moves i places left, column j of B moves j places up. */
        MPI_Sendrecv_replace(a, cells, MPI_DOUBLE, row * q + (col + q - row) % q, 1,
                             row * q + (col + row) % q, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv_replace(bb, cells, MPI_DOUBLE, ((row + q - col) % q) * q + col, 2,
                             ((row + col) % q) * q + col, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int step = 0; step < q; step++) {
            multiply_add(b, b, b, a, b, bb, b, c, b);
            if (step == q - 1)
                break;
            MPI_Sendrecv_replace(a, cells, MPI_DOUBLE, left, 3, right, 3, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
            MPI_Sendrecv_replace(bb, cells, MPI_DOUBLE, up, 4, down, 4, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
        }
        *elapsed = MPI_Wtime() - t0;
        if (verify)
            ok = product_block_right(c, n, (long)row * b, (long)col * b, b, b);
        free(a);
        free(bb);
        free(c);
        return ok;
    }
    /* The 1 x p ring: rank r keeps A's row block r (b x P) and C's row block r; B's row
     * blocks (b x P) travel one rank down the ring per step, so rank r multiplies by block
     * (r + s) mod p at step s. */
    int b = (n + np - 1) / np, full = b * np, cells = b * full;
    double *a = alloc_or_die(sizeof(double) * cells), *bb = alloc_or_die(sizeof(double) * cells);
    double *c = calloc((size_t)cells, sizeof(double));
    if (!c)
        MPI_Abort(MPI_COMM_WORLD, 2);
    fill_block(a, 1, n, (long)me * b, 0, b, full);
    fill_block(bb, 2, n, (long)me * b, 0, b, full);
    int up = (me + np - 1) % np, down = (me + 1) % np;
    double t0 = start_clock();
    for (int step = 0; step < np; step++) {
        int k = (me + step) % np;
        multiply_add(b, b, full, a + (size_t)k * b, full, bb, full, c, full);
        if (step == np - 1)
            break;
        MPI_Sendrecv_replace(bb, cells, MPI_DOUBLE, up, 5, down, 5, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
    }
    *elapsed = MPI_Wtime() - t0;
    if (verify)
        ok = product_block_right(c, n, (long)me * b, 0, b, full);
    free(a);
    free(bb);
    free(c);
    return ok;
}

/* qsort order of 64-bit keys. */
static int compare_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Index of the first of the n sorted keys that is greater than `pivot`. */
static long upper_bound(const uint64_t *keys, long n, uint64_t pivot)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (keys[mid] <= pivot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* §6.7.4: PSRS, the four phases of the thesis timed together; the root compares the result
 * with a serial qsort of the same keys. */
static int run_psrs(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    long total = cfg->keys;
    int *counts = alloc_or_die(sizeof(int) * np), *displs = alloc_or_die(sizeof(int) * np);
    int *rcounts = alloc_or_die(sizeof(int) * np), *rdispls = alloc_or_die(sizeof(int) * np);
    for (int r = 0; r < np; r++) {
        counts[r] = (int)(total / np + (r < total % np));
        displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    }
    uint64_t *input = NULL, *sorted = NULL;
    if (me == 0) {
        input = alloc_or_die(sizeof(uint64_t) * (size_t)total);
        sorted = alloc_or_die(sizeof(uint64_t) * (size_t)total);
        for (long i = 0; i < total; i++)
            input[i] = mix64((uint64_t)i * 2654435761u + 7);
    }
    int mine = counts[me];
    uint64_t *local = alloc_or_die(sizeof(uint64_t) * (size_t)mine);
    uint64_t *samples = alloc_or_die(sizeof(uint64_t) * (size_t)np * np);
    uint64_t *pivots = alloc_or_die(sizeof(uint64_t) * (size_t)np);

    double t0 = start_clock();
    /* Phase 1: contiguous blocks to every rank, sorted locally. */
    MPI_Scatterv(input, counts, displs, MPI_UINT64_T, local, mine, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    qsort(local, (size_t)mine, sizeof *local, compare_key);
    /* Phase 2: p regular samples per rank to the root, p - 1 pivots back. */
    uint64_t *mysamples = alloc_or_die(sizeof(uint64_t) * (size_t)np);
    for (int i = 0; i < np; i++)
        mysamples[i] = mine ? local[(long)i * mine / np] : 0;
    MPI_Gather(mysamples, np, MPI_UINT64_T, samples, np, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        qsort(samples, (size_t)np * np, sizeof *samples, compare_key);
        for (int i = 1; i < np; i++)
            pivots[i - 1] = samples[i * np + np / 2 - 1];
    }
    MPI_Bcast(pivots, np - 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    /* Phase 3: partition i (keys up to pivot i) goes to rank i. */
    int *scounts = alloc_or_die(sizeof(int) * np), *sdispls = alloc_or_die(sizeof(int) * np);
    long start = 0;
    for (int i = 0; i < np; i++) {
        long end = i < np - 1 ? upper_bound(local, mine, pivots[i]) : mine;
        if (end < start)
            end = start;
        sdispls[i] = (int)start;
        scounts[i] = (int)(end - start);
        start = end;
    }
    MPI_Alltoall(scounts, 1, MPI_INT, rcounts, 1, MPI_INT, MPI_COMM_WORLD);
    long received = 0;
    for (int i = 0; i < np; i++) {
        rdispls[i] = (int)received;
        received += rcounts[i];
    }
    uint64_t *parts = alloc_or_die(sizeof(uint64_t) * (size_t)received);
    uint64_t *merged = alloc_or_die(sizeof(uint64_t) * (size_t)received);
    MPI_Alltoallv(local, scounts, sdispls, MPI_UINT64_T, parts, rcounts, rdispls, MPI_UINT64_T,
                  MPI_COMM_WORLD);
    /* Phase 4: merge the p sorted partitions, gather the lists at the root in rank order. */
    int *head = calloc((size_t)np, sizeof(int));
    if (!head)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (long out = 0; out < received; out++) {
        int best = -1;
        for (int i = 0; i < np; i++)
            if (head[i] < rcounts[i] &&
                (best < 0 || parts[rdispls[i] + head[i]] < parts[rdispls[best] + head[best]]))
                best = i;
        merged[out] = parts[rdispls[best] + head[best]++];
    }
    int got = (int)received;
    MPI_Gather(&got, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (me == 0)
        for (int r = 0; r < np; r++)
            displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    MPI_Gatherv(merged, got, MPI_UINT64_T, sorted, counts, displs, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    *elapsed = MPI_Wtime() - t0;

    int ok = 1;
    if (verify && me == 0) { /* the same keys as a serial sort of the input, in order */
        qsort(input, (size_t)total, sizeof *input, compare_key);
        ok = memcmp(input, sorted, sizeof(uint64_t) * (size_t)total) == 0;
    }
    free(input);
    free(sorted);
    free(local);
    free(samples);
    free(mysamples);
    free(pivots);
    free(head);
    free(parts);
    free(merged);
    free(scounts);
    free(sdispls);
    free(counts);
    free(displs);
    free(rcounts);
    free(rdispls);
    return ok;
}

/* One red-black Gauss-Seidel sweep of colour `colour` over `rows` rows of a strip (row 0 and
 * rows + 1 are halo rows; columns 0 and g + 1 the fixed boundary); `row0` is the global index
 * of the strip's first row, which fixes the colouring.  Returns the largest change. */
static double sweep(double *u, int rows, int g, long row0, int colour)
{
    size_t w = (size_t)g + 2;
    double change = 0;
    for (int i = 1; i <= rows; i++) {
        int j0 = 1 + (int)((row0 + i + 1 + colour) % 2);
        for (int j = j0; j <= g; j += 2) {
            double *x = u + i * w + j;
            double v = 0.25 * (x[-(long)w] + x[w] + x[-1] + x[1]);
            double d = fabs(v - *x);
            change = d > change ? d : change;
            *x = v;
        }
    }
    return change;
}

/* Strip of `rows` rows starting at global row row0 (1-based interior rows), with halos: zero
 * inside, the top edge of the domain held at 1 and the left edge at 0.5. */
static double *relax_strip(int rows, int g, long row0)
{
    size_t w = (size_t)g + 2;
    double *u = calloc((size_t)(rows + 2) * w, sizeof(double));
    if (!u)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < rows + 2; i++)
        u[i * w] = 0.5;
    if (row0 == 1)
        for (size_t j = 0; j < w; j++)
            u[j] = 1.0;
    return u;
}

/* Sends the strip's first and last rows to the ranks above and below and receives their
 * edge rows into the halo rows (MPI_PROC_NULL at the domain's edges leaves the boundary). */
static void exchange_halos(double *u, int rows, int g, int up, int down)
{
    size_t w = (size_t)g + 2;
    MPI_Sendrecv(u + w, (int)w, MPI_DOUBLE, up, 21, u + (size_t)(rows + 1) * w, (int)w, MPI_DOUBLE,
                 down, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(u + (size_t)rows * w, (int)w, MPI_DOUBLE, down, 22, u, (int)w, MPI_DOUBLE, up, 22,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* §6.7.5: `relax_iter` iterations of two half sweeps with halo exchanges and the global
 * maximum change; checked bit for bit against a serial run on the root. */
static int run_relax(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    int g = cfg->relax_n, rows = rows_of(me, np, g);
    long row0 = first_row_of(me, np, g) + 1;
    int up = me > 0 ? me - 1 : MPI_PROC_NULL, down = me < np - 1 ? me + 1 : MPI_PROC_NULL;
    double *u = relax_strip(rows, g, row0), change = 0;
    size_t w = (size_t)g + 2;
    double t0 = start_clock();
    for (int it = 0; it < cfg->relax_iter; it++) {
        exchange_halos(u, rows, g, up, down);
        change = sweep(u, rows, g, row0, 0);
        exchange_halos(u, rows, g, up, down);
        double c1 = sweep(u, rows, g, row0, 1);
        change = c1 > change ? c1 : change;
        /* The thesis' global convergence test: every iteration, but no early exit. */
        MPI_Allreduce(MPI_IN_PLACE, &change, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    *elapsed = MPI_Wtime() - t0;
    int ok = 1;
    if (verify) { /* the strips at the root, against a serial run of the same sweeps */
        int *counts = alloc_or_die(sizeof(int) * np), *displs = alloc_or_die(sizeof(int) * np);
        for (int r = 0; r < np; r++) {
            counts[r] = rows_of(r, np, g) * (int)w;
            displs[r] = (int)first_row_of(r, np, g) * (int)w;
        }
        double *all = me == 0 ? alloc_or_die(sizeof(double) * (size_t)g * w) : NULL;
        MPI_Gatherv(u + w, rows * (int)w, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0,
                    MPI_COMM_WORLD);
        if (me == 0) {
            double *ref = relax_strip(g, g, 1), ref_change = 0;
            for (int it = 0; it < cfg->relax_iter; it++) {
                ref_change = sweep(ref, g, g, 1, 0);
                double c1 = sweep(ref, g, g, 1, 1);
                ref_change = c1 > ref_change ? c1 : ref_change;
            }
            ok = memcmp(all, ref + w, sizeof(double) * (size_t)g * w) == 0 && ref_change == change;
            free(ref);
        }
        free(all);
        free(counts);
        free(displs);
    }
    free(u);
    return ok;
}

/* 8-byte ping-pong between ranks 0 and 1; *elapsed is the time of 1000 round trips. */
static int run_pingpong(const struct config *cfg, int me, int np, int verify, double *elapsed)
{
    (void)cfg;
    (void)verify;
    char msg[8] = "psport!";
    double t0 = 0;
    for (int i = -100; i < 1000; i++) {
        if (i == 0)
            t0 = start_clock();
        if (me == 0) {
            MPI_Send(msg, 8, MPI_CHAR, 1, 31, MPI_COMM_WORLD);
            MPI_Recv(msg, 8, MPI_CHAR, 1, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            MPI_Recv(msg, 8, MPI_CHAR, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(msg, 8, MPI_CHAR, 0, 31, MPI_COMM_WORLD);
        }
    }
    (void)np;
    *elapsed = MPI_Wtime() - t0;
    return strcmp(msg, "psport!") == 0;
}

/* Units of work per run, for the rate. */
static double ops_mbytes(const struct config *c)
{
    return 8.0 * c->ops_n * (double)c->ops_n * 1e-6;
}

static double cannon_mflop(const struct config *c)
{
    return 2.0 * c->cannon_n * (double)c->cannon_n * c->cannon_n * 1e-6;
}

static double psrs_mkeys(const struct config *c)
{
    return (double)c->keys * 1e-6;
}

static double relax_mpoints(const struct config *c)
{
    return (double)c->relax_n * c->relax_n * c->relax_iter * 1e-6;
}

static double pingpong_trips(const struct config *c)
{
    (void)c;
    return 1000.0;
}

/* The problem size each kernel's line reports as size=. */
static long ops_size(const struct config *c)
{
    return c->ops_n;
}

static long cannon_size(const struct config *c)
{
    return c->cannon_n;
}

static long psrs_size(const struct config *c)
{
    return c->keys;
}

static long relax_size(const struct config *c)
{
    return c->relax_n;
}

static long pingpong_size(const struct config *c)
{
    (void)c;
    return 8;
}

static const struct kernel kernels[] = {
    {"pingpong", run_pingpong, "us", pingpong_trips, pingpong_size},
    {"bcast", run_bcast, "MB/s", ops_mbytes, ops_size},
    {"scatter", run_scatter, "MB/s", ops_mbytes, ops_size},
    {"gather", run_gather, "MB/s", ops_mbytes, ops_size},
    {"shift", run_shift, "MB/s", ops_mbytes, ops_size},
    {"cannon", run_cannon, "MFLOP/s", cannon_mflop, cannon_size},
    {"psrs", run_psrs, "Mkeys/s", psrs_mkeys, psrs_size},
    {"relax", run_relax, "Mpoints/s", relax_mpoints, relax_size},
};
#define NKERNELS (int)(sizeof kernels / sizeof kernels[0])

/* qsort order of doubles. */
static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Runs kernel k `repeats` times, prints its line; returns 1 when its check passed. */
static int bench(const struct kernel *k, const struct config *cfg, int me, int np)
{
    double times[MAX_REPEATS];
    int ok = 1;
    for (int r = 0; r < cfg->repeats; r++) {
        double t = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        ok &= k->run(cfg, me, np, r == cfg->repeats - 1, &t);
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times[r] = t;
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    qsort(times, (size_t)cfg->repeats, sizeof *times, compare_double);
    double best = times[0], median = times[cfg->repeats / 2];
    if (cfg->repeats % 2 == 0)
        median = 0.5 * (times[cfg->repeats / 2 - 1] + times[cfg->repeats / 2]);
    double rate = k->work(cfg) / (best > 0 ? best : 1e-9);
    if (k->run == run_pingpong) /* half a round trip, in microseconds */
        rate = best / k->work(cfg) / 2 * 1e6;
    if (me == 0) {
        printf("scope kernel=%s ranks=%d size=%ld t_best=%.6f t_median=%.6f rate=%.1f unit=%s "
               "check=%s\n",
               k->name, np, k->size(cfg), best, median, rate, k->unit, ok ? "OK" : "WRONG");
        fflush(stdout);
    }
    return ok;
}

/* Prints why the command line is wrong and the usage (rank 0), ends every rank with 2. */
static void usage_exit(int me, const char *why)
{
    if (me == 0) {
        fprintf(stderr,
                "scope: %s\n"
                "usage: scope [-n N] [-m N] [-g G] [-i ITERS] [-k KEYS] [-r REPEATS] KERNEL...\n"
                "  kernels: pingpong bcast scatter gather shift cannon psrs relax all\n"
                "  -n  N x N doubles for bcast/scatter/gather/shift (1080)\n"
                "  -m  N x N matrices for cannon (960)     -k  keys for psrs (4000000)\n"
                "  -g  G x G grid for relax (1024)         -i  relax iterations (200)\n"
                "  -r  repeats, best and median reported (3)\n",
                why);
    }
    MPI_Finalize();
    exit(2);
}

/* The value of a numeric option, within [lo, hi], or the usage and exit. */
static long number_arg(int me, const char *opt, const char *val, long lo, long hi)
{
    char *end;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || *end || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "%s wants a number in %ld..%ld", opt, lo, hi);
        usage_exit(me, why);
    }
    return v;
}

/* Parses the kernels and sizes, runs each chosen kernel in turn. */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    me_global = me;
    struct config cfg = {.ops_n = 1080,
                         .cannon_n = 960,
                         .relax_n = 1024,
                         .relax_iter = 200,
                         .keys = 4000000,
                         .repeats = 3};
    int chosen[NKERNELS] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] == '-') {
            if (strlen(a) != 2)
                usage_exit(me, "unknown option");
            i++;
            switch (a[1]) {
            case 'n':
                cfg.ops_n = (int)number_arg(me, a, v, 1, 20000);
                break;
            case 'm':
                cfg.cannon_n = (int)number_arg(me, a, v, 1, 20000);
                break;
            case 'g':
                cfg.relax_n = (int)number_arg(me, a, v, 1, 20000);
                break;
            case 'i':
                cfg.relax_iter = (int)number_arg(me, a, v, 1, 1000000);
                break;
            case 'k':
                cfg.keys = number_arg(me, a, v, 1, 1000000000);
                break;
            case 'r':
                cfg.repeats = (int)number_arg(me, a, v, 1, MAX_REPEATS);
                break;
            default:
                usage_exit(me, "unknown option");
            }
            continue;
        }
        int found = 0;
        for (int k = 0; k < NKERNELS; k++)
            if (strcmp(a, kernels[k].name) == 0 || strcmp(a, "all") == 0) {
                chosen[k] = found = any = 1;
            }
        if (!found)
            usage_exit(me, "unknown kernel");
    }
    if (!any)
        usage_exit(me, "name at least one kernel");
    if (np < 2)
        chosen[0] = 0; /* no ping-pong partner */
    if ((long)cfg.ops_n * cfg.ops_n > 1L << 30 || cfg.keys > 1L << 30)
        usage_exit(me, "sizes too large for int counts");
    int all_ok = 1;
    for (int k = 0; k < NKERNELS; k++)
        if (chosen[k])
            all_ok &= bench(&kernels[k], &cfg, me, np);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
