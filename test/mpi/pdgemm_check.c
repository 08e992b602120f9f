/*
 * pdgemm_check — Debian's ScaLAPACK on an MPI library: C = A * B with PDGEMM on a process grid
 * (1x1, 1x2, 2x2, ... from the number of ranks), block size NB, checked entry by entry against
 * a serial DGEMM of the same matrices on every rank.  Built with Debian's mpicc.mpich and
 * -lscalapack-mpich, it runs on psport's libmpich.so.12 by LD_LIBRARY_PATH alone (the ABI
 * check of the ch_psport issue).
 *   pdgemm_check [N [NB]]     (default 600 64)
 * Prints one line "pdgemm: N=.. NB=.. grid PxQ ranks R: max error E, GFLOP/s G: OK|WRONG";
 * exit status 0 when the result is right.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "scalapack_decls.h"

static double a_of(int i, int j)
{
    return (double)((i * 7 + j * 3) % 17 - 8) / 8.0;
}

static double b_of(int i, int j)
{
    return (double)((i * 5 + j * 11) % 13 - 6) / 6.0;
}

/* Global index of local index l in a block-cyclic distribution (0-based). */
static int global_of(int l, int nb, int p, int nprocs)
{
    return (l / nb) * nb * nprocs + p * nb + l % nb;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 600, nb = argc > 2 ? atoi(argv[2]) : 64;
    int me, np;
    Cblacs_pinfo(&me, &np);
    int nprow = 1;
    while ((nprow * 2) * (nprow * 2) <= np)
        nprow *= 2;
    int npcol = np / nprow;
    int ctx;
    Cblacs_get(-1, 0, &ctx);
    Cblacs_gridinit(&ctx, "Row", nprow, npcol);
    int myrow, mycol;
    Cblacs_gridinfo(ctx, &nprow, &npcol, &myrow, &mycol);
    int zero = 0, one_i = 1, info;
    int mloc = numroc_(&n, &nb, &myrow, &zero, &nprow);
    int nloc = numroc_(&n, &nb, &mycol, &zero, &npcol);
    int lld = mloc > 1 ? mloc : 1;
    int desc[9];
    descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctx, &lld, &info);
    double *a = malloc(sizeof(double) * (size_t)lld * (size_t)(nloc ? nloc : 1));
    double *b = malloc(sizeof(double) * (size_t)lld * (size_t)(nloc ? nloc : 1));
    double *c = calloc((size_t)lld * (size_t)(nloc ? nloc : 1), sizeof(double));
    for (int lj = 0; lj < nloc; lj++)
        for (int li = 0; li < mloc; li++) {
            int gi = global_of(li, nb, myrow, nprow), gj = global_of(lj, nb, mycol, npcol);
            a[li + (size_t)lj * lld] = a_of(gi, gj);
            b[li + (size_t)lj * lld] = b_of(gi, gj);
        }
    double alpha = 1.0, beta = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    pdgemm_("N", "N", &n, &n, &n, &alpha, a, &one_i, &one_i, desc, b, &one_i, &one_i, desc, &beta,
            c, &one_i, &one_i, desc);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    /* The serial reference of the whole product, compared where this rank holds C. */
    double *ga = malloc(sizeof(double) * (size_t)n * (size_t)n);
    double *gb = malloc(sizeof(double) * (size_t)n * (size_t)n);
    double *gc = calloc((size_t)n * (size_t)n, sizeof(double));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            ga[i + (size_t)j * n] = a_of(i, j);
            gb[i + (size_t)j * n] = b_of(i, j);
        }
    dgemm_("N", "N", &n, &n, &n, &alpha, ga, &n, gb, &n, &beta, gc, &n);
    double err = 0;
    for (int lj = 0; lj < nloc; lj++)
        for (int li = 0; li < mloc; li++) {
            int gi = global_of(li, nb, myrow, nprow), gj = global_of(lj, nb, mycol, npcol);
            double d = fabs(c[li + (size_t)lj * lld] - gc[gi + (size_t)gj * n]);
            if (d > err)
                err = d;
        }
    double maxerr;
    MPI_Reduce(&err, &maxerr, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (me == 0) {
        ok = maxerr <= 1e-9 * n;
        printf("pdgemm: N=%d NB=%d grid %dx%d ranks %d: max error %.3g, %.2f GFLOP/s: %s\n", n, nb,
               nprow, npcol, np, maxerr, 2.0 * n * (double)n * n / t * 1e-9, ok ? "OK" : "WRONG");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    Cblacs_gridexit(ctx);
    MPI_Finalize();
    return ok ? 0 : 1;
}
