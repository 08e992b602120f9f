/*
 * pdgemm_bench — ScaLAPACK's PDGEMM (PBLAS) speed-up and efficiency, as in the ParaStation2
 * paper's tables 4 and 5: C = A * B for random N x N matrices on a PxQ process grid (block
 * size NB), timed over a few repeats (best and median), checked (sampled entries against serial
 * dot products, and a residual C x - A (B x) covering every entry), and set against two
 * references measured in the same run on the same BLAS:
 *   uni   one DGEMM of the same size on rank 0 while the other ranks sleep (the uniprocessor
 *         column of table 4);
 *   conc  one DGEMM per rank, all started together: what the cores can do at most when every
 *         rank computes and nobody communicates (on a 2-core machine the real two-core limit,
 *         which can be less than twice uni: the cores share caches, memory bandwidth, clock).
 *   panel the local updates PBLAS's PDGEMM makes, every rank at once, without communication:
 *         one DGEMM of the local C with a kb-wide panel per kb columns of A, kb being PBLAS's
 *         logical block size (pilaenv, 32 in Debian's build); what PDGEMM reaches at most
 *         with this PBLAS, however fast the MPI (only with 2 or more ranks).
 * Built with Debian's mpicc.mpich and -lscalapack-mpich; runs on Debian's MPICH or, through
 * LD_LIBRARY_PATH, on psport's ABI-compatible libmpich.so.12.
 *
 *   pdgemm_bench [-n N[,N...]] [-b NB] [-g PxQ] [-r REPEATS] [--no-ref]
 *
 * Prints a header line "# pdgemm_bench: ..." and per N one line of key=value fields
 * "pdgemm N=.. NB=.. grid=PxQ ranks=R uni=.. conc=.. panel=.. kb=.. best=.. median=.. t_best=..
 * err=.. check=OK|WRONG" (rates in MFLOP/s, times in s).  Exit status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scalapack_decls.h"

#define MAX_SIZES   16
#define MAX_REPEATS 50

/* Settings from the command line. */
struct options {
    int sizes[MAX_SIZES];
    int nsizes;
    int nb;
    int nprow, npcol; /* 0: chosen from the number of ranks */
    int repeats;
    int with_ref;
};

/* Entry (i, j) of matrix `which` (0 = A, 1 = B), uniform in [-1, 1): a hash of the global
 * position, so that any rank can recompute any entry without holding the matrix. */
static double entry_of(int which, int i, int j)
{
    uint64_t x = ((uint64_t)which << 62) ^ ((uint64_t)(uint32_t)i << 31) ^ (uint64_t)(uint32_t)j;
    x += 0x9e3779b97f4a7c15ULL; /* splitmix64 finaliser */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Global index (0-based) of local index l in a block-cyclic distribution with block nb, on
 * process coordinate p of nprocs (first block on process 0). */
static int global_of(int l, int nb, int p, int nprocs)
{
    return (l / nb) * nb * nprocs + p * nb + l % nb;
}

/* qsort order of doubles. */
static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them in place). */
static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU time of this process (all its threads), in seconds. */
static double seconds_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits until rank 0 releases the others, sleeping between tests instead of spinning in MPI:
 * while rank 0 measures the uniprocessor DGEMM the other ranks must leave the cores alone. */
static void release_from_root(int me, int np)
{
    int token = 0;
    if (me == 0) {
        for (int r = 1; r < np; r++)
            MPI_Send(&token, 1, MPI_INT, r, 77, MPI_COMM_WORLD);
        return;
    }
    MPI_Request req;
    MPI_Irecv(&token, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, &req);
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    while (!done) {
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
}

/* A serial N x N DGEMM on freshly generated matrices; returns the best time of `repeats` and
 * stores the process CPU time / wall time ratio of that run in *cpu_ratio (about 1 when the
 * BLAS really uses one thread). */
static double time_serial_dgemm(int n, int repeats, double *cpu_ratio)
{
    size_t nn = (size_t)n * (size_t)n;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "pdgemm_bench: no memory for a serial %dx%d DGEMM\n", n, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            a[i + (size_t)j * n] = entry_of(0, i, j);
            b[i + (size_t)j * n] = entry_of(1, i, j);
        }
    double alpha = 1.0, beta = 0.0, best = INFINITY;
    *cpu_ratio = 0;
    for (int r = 0; r < repeats; r++) {
        double c0 = seconds_cpu(), t0 = MPI_Wtime();
        dgemm_("N", "N", &n, &n, &n, &alpha, a, &n, b, &n, &beta, c, &n);
        double t = MPI_Wtime() - t0, cpu = seconds_cpu() - c0;
        if (t < best) {
            best = t;
            *cpu_ratio = cpu / t;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/*
 * Seconds for the local updates PBLAS's PDGEMM makes on this rank, without communication: C
 * (mloc x nloc) += A (mloc x kb) B (kb x nloc) once per kb-wide panel of the n columns of A.
 * With a panel width of a few dozen the DGEMMs run well below one big DGEMM's rate (C is read
 * and written once per panel), so this is what PDGEMM can reach at most with this PBLAS.
 */
static double time_panel_updates(int n, int mloc, int nloc, int kb)
{
    int m = mloc > 1 ? mloc : 1, nn = nloc > 1 ? nloc : 1;
    double *a = malloc((size_t)m * kb * sizeof *a), *b = malloc((size_t)kb * nn * sizeof *b);
    double *c = calloc((size_t)m * nn, sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "pdgemm_bench: no memory for the panel reference\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < (size_t)m * kb; i++)
        a[i] = entry_of(0, (int)(i % (size_t)m), (int)(i / (size_t)m));
    for (size_t i = 0; i < (size_t)kb * nn; i++)
        b[i] = entry_of(1, (int)(i % (size_t)kb), (int)(i / (size_t)kb));
    double one = 1.0;
    double t0 = MPI_Wtime();
    for (int k = 0; k < n && mloc > 0 && nloc > 0; k += kb) {
        int w = n - k < kb ? n - k : kb;
        dgemm_("N", "N", &mloc, &nloc, &w, &one, a, &m, b, &kb, &one, c, &m);
    }
    double t = MPI_Wtime() - t0;
    free(a);
    free(b);
    free(c);
    return t;
}

/* Per size: the references, then PDGEMM timed and checked; returns 1 when the check passed. */
static int bench_size(const struct options *o, int n, int ctx, int me, int np)
{
    int nprow, npcol, myrow, mycol;
    Cblacs_gridinfo(ctx, &nprow, &npcol, &myrow, &mycol);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    double uni = 0, conc = 0, panel = 0, ratio = 0;
    int zero = 0, one = 1, info;
    int mloc = numroc_(&n, &o->nb, &myrow, &zero, &nprow);
    int nloc = numroc_(&n, &o->nb, &mycol, &zero, &npcol);
    int kb = pilaenv_(&ctx, "D", 1);
    kb = kb < 1 ? 1 : kb > n ? n : kb;

    if (o->with_ref) {
        /* uni: rank 0 alone. */
        if (me == 0)
            uni = flops / time_serial_dgemm(n, o->repeats, &ratio) * 1e-6;
        release_from_root(me, np);
        /* conc: all ranks at once; the pair is done when the slower one is. */
        double worst = 0;
        for (int r = 0; r < o->repeats; r++) {
            double dummy, t;
            MPI_Barrier(MPI_COMM_WORLD);
            t = time_serial_dgemm(n, 1, &dummy);
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r == 0 || t < worst)
                worst = t;
        }
        conc = np * flops / worst * 1e-6;
        /* panel: every rank's local panel updates at once (none when PDGEMM makes one DGEMM:
         * a single rank). */
        if (np > 1) {
            for (int r = 0; r < o->repeats; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t = time_panel_updates(n, mloc, nloc, kb);
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (r == 0 || t < worst)
                    worst = t;
            }
            panel = flops / worst * 1e-6;
        }
    }

    int lld = mloc > 1 ? mloc : 1;
    int desc[9];
    descinit_(desc, &n, &n, &o->nb, &o->nb, &zero, &zero, &ctx, &lld, &info);
    if (info != 0) {
        fprintf(stderr, "pdgemm_bench: descinit failed (info %d) for N=%d NB=%d\n", info, n, o->nb);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t cells = (size_t)lld * (size_t)(nloc > 0 ? nloc : 1);
    double *a = malloc(cells * sizeof *a), *b = malloc(cells * sizeof *b);
    double *c = malloc(cells * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "pdgemm_bench: no memory for the local %dx%d blocks\n", mloc, nloc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int lj = 0; lj < nloc; lj++)
        for (int li = 0; li < mloc; li++) {
            int gi = global_of(li, o->nb, myrow, nprow), gj = global_of(lj, o->nb, mycol, npcol);
            a[li + (size_t)lj * lld] = entry_of(0, gi, gj);
            b[li + (size_t)lj * lld] = entry_of(1, gi, gj);
        }

    double alpha = 1.0, beta = 0.0, times[MAX_REPEATS];
    for (int r = 0; r < o->repeats; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdgemm_("N", "N", &n, &n, &n, &alpha, a, &one, &one, desc, b, &one, &one, desc, &beta, c,
                &one, &one, desc);
        double t = MPI_Wtime() - t0;
        /* A repeat lasts until the last rank is done. */
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times[r] = t;
    }
    double best = INFINITY;
    for (int r = 0; r < o->repeats; r++)
        best = times[r] < best ? times[r] : best;
    double median = median_of(times, o->repeats);

    /* The check: one entry in every local NB x NB block of C (a misplaced or lost block shows)
     * and every entry of the first local column, each against a serial dot product of the
     * generated rows and columns, within a rounding bound for a sum of n products. */
    double worst_ratio = 0, worst_err = 0;
    uint64_t pick = 12345u + 977u * (uint64_t)me;
    for (int lj = 0; lj < nloc; lj++)
        for (int li = 0; li < mloc; li++) {
            int in_block = (li % o->nb == 0) && (lj % o->nb == 0);
            if (!in_block && lj != 0)
                continue;
            int si = li, sj = lj;
            if (in_block && lj != 0) { /* a pseudo-random cell of this block */
                pick = pick * 6364136223846793005ULL + 1442695040888963407ULL;
                int bi = mloc - li < o->nb ? mloc - li : o->nb;
                int bj = nloc - lj < o->nb ? nloc - lj : o->nb;
                si = li + (int)((pick >> 33) % (uint64_t)bi);
                sj = lj + (int)((pick >> 17) % (uint64_t)bj);
            }
            int gi = global_of(si, o->nb, myrow, nprow), gj = global_of(sj, o->nb, mycol, npcol);
            double ref = 0, mag = 0;
            for (int k = 0; k < n; k++) {
                double p = entry_of(0, gi, k) * entry_of(1, k, gj);
                ref += p;
                mag += fabs(p);
            }
            double err = fabs(c[si + (size_t)sj * lld] - ref);
            double bound = 4.0 * n * DBL_EPSILON * (mag > 0 ? mag : 1.0);
            if (err / bound > worst_ratio)
                worst_ratio = err / bound;
            if (err > worst_err)
                worst_err = err;
        }
    /* And every entry at once: C x against A (B x) for a random x (an entry of C that is
     * wrong by more than rounding shows in its row), rows and columns shared out by rank. */
    double *x = malloc(sizeof(double) * (size_t)n), *y = calloc((size_t)n, sizeof(double));
    double *bx = calloc(2 * (size_t)n, sizeof(double)); /* B x, then |B| |x| */
    if (!x || !y || !bx) {
        fprintf(stderr, "pdgemm_bench: no memory for the residual check\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int j = 0; j < n; j++)
        x[j] = entry_of(2, 0, j);
    for (int lj = 0; lj < nloc; lj++) {
        int gj = global_of(lj, o->nb, mycol, npcol);
        for (int li = 0; li < mloc; li++)
            y[global_of(li, o->nb, myrow, nprow)] += c[li + (size_t)lj * lld] * x[gj];
    }
    for (int k = me; k < n; k += np)
        for (int j = 0; j < n; j++) {
            double p = entry_of(1, k, j) * x[j];
            bx[k] += p;
            bx[n + k] += fabs(p);
        }
    MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, bx, 2 * n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = me; i < n; i += np) {
        double ref = 0, mag = 0;
        for (int k = 0; k < n; k++) {
            double a_ik = entry_of(0, i, k);
            ref += a_ik * bx[k];
            mag += fabs(a_ik) * bx[n + k];
        }
        double err = fabs(y[i] - ref), bound = 8.0 * n * DBL_EPSILON * (mag > 0 ? mag : 1.0);
        if (err / bound > worst_ratio)
            worst_ratio = err / bound;
    }
    free(x);
    free(y);
    free(bx);
    MPI_Allreduce(MPI_IN_PLACE, &worst_ratio, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &worst_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int ok = worst_ratio <= 1.0;
    if (me == 0) {
        if (o->with_ref && ratio > 1.3)
            printf("# warning: the serial DGEMM used %.2f CPUs: is OPENBLAS_NUM_THREADS=1 set?\n",
                   ratio);
        printf("pdgemm N=%d NB=%d grid=%dx%d ranks=%d uni=%.0f conc=%.0f panel=%.0f kb=%d "
               "best=%.0f median=%.0f t_best=%.4f cpu_ratio=%.2f err=%.2g check=%s\n",
               n, o->nb, nprow, npcol, np, uni, conc, panel, kb, flops / best * 1e-6,
               flops / median * 1e-6, best, ratio, worst_err, ok ? "OK" : "WRONG");
        fflush(stdout);
    }
    free(a);
    free(b);
    free(c);
    return ok;
}

/* Prints why the command line is wrong and the usage (rank 0), ends every rank with 2. */
static void usage_exit(int me, const char *why)
{
    if (me == 0)
        fprintf(stderr,
                "pdgemm_bench: %s\n"
                "usage: pdgemm_bench [-n N[,N...]] [-b NB] [-g PxQ] [-r REPEATS] [--no-ref]\n"
                "  -n   matrix sizes (default 1000,2000,3000,4000)   -b  block size (64)\n"
                "  -g   process grid (default: P = largest divisor of ranks <= sqrt(ranks))\n"
                "  -r   repeats, best and median reported (3)   --no-ref  no serial DGEMMs\n",
                why);
    MPI_Finalize();
    exit(2);
}

/* Fills *o from the command line (defaults: N 1000..4000, NB 64, 3 repeats, references on). */
static void parse_options(int argc, char **argv, int me, struct options *o)
{
    *o = (struct options){.nb = 64, .repeats = 3, .with_ref = 1};
    int defaults[] = {1000, 2000, 3000, 4000};
    memcpy(o->sizes, defaults, sizeof defaults);
    o->nsizes = 4;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--no-ref") == 0) {
            o->with_ref = 0;
            continue;
        }
        if (!val || arg[0] != '-' || strlen(arg) != 2)
            usage_exit(me, "bad or incomplete option");
        i++;
        char *end;
        switch (arg[1]) {
        case 'n':
            o->nsizes = 0;
            for (const char *p = val; *p; p = *end == ',' ? end + 1 : end) {
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 100000 || o->nsizes == MAX_SIZES)
                    usage_exit(me, "-n wants sizes 1..100000, comma separated");
                o->sizes[o->nsizes++] = (int)v;
            }
            break;
        case 'b':
            o->nb = (int)strtol(val, &end, 10);
            if (*end || o->nb < 1)
                usage_exit(me, "-b wants a positive block size");
            break;
        case 'r':
            o->repeats = (int)strtol(val, &end, 10);
            if (*end || o->repeats < 1 || o->repeats > MAX_REPEATS)
                usage_exit(me, "-r wants 1..50 repeats");
            break;
        case 'g':
            if (sscanf(val, "%dx%d", &o->nprow, &o->npcol) != 2 || o->nprow < 1 || o->npcol < 1)
                usage_exit(me, "-g wants PxQ, e.g. 1x2");
            break;
        default:
            usage_exit(me, "unknown option");
        }
    }
}

/* Sets up the BLACS grid, prints the header line, benchmarks each size. */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np;
    Cblacs_pinfo(&me, &np);
    struct options o;
    parse_options(argc, argv, me, &o);
    if (o.nprow == 0) {
        o.nprow = 1;
        for (int p = 1; p * p <= np; p++)
            if (np % p == 0)
                o.nprow = p;
        o.npcol = np / o.nprow;
    }
    if (o.nprow * o.npcol != np)
        usage_exit(me, "the grid PxQ must use exactly all ranks");
    int ctx;
    Cblacs_get(-1, 0, &ctx);
    Cblacs_gridinit(&ctx, "Row", o.nprow, o.npcol);

    if (me == 0) {
        /* Which BLAS threading is in force: OpenBLAS answers when its library is loaded. */
        int (*blas_threads)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
        double load[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
                load[0] = load[1] = load[2] = -1;
            fclose(f);
        }
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        version[strcspn(version, "\n")] = '\0';
        printf("# pdgemm_bench: ranks %d grid %dx%d NB %d repeats %d blas_threads %d load %.2f "
               "%.2f %.2f mpi %.60s\n",
               np, o.nprow, o.npcol, o.nb, o.repeats, blas_threads ? blas_threads() : -1, load[0],
               load[1], load[2], version);
        fflush(stdout);
    }
    int all_ok = 1;
    for (int s = 0; s < o.nsizes; s++)
        all_ok &= bench_size(&o, o.sizes[s], ctx, me, np);
    Cblacs_gridexit(ctx);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
