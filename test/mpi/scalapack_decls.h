/*
 * scalapack_decls.h — the BLACS, ScaLAPACK tools, PBLAS and BLAS routines psport's ScaLAPACK
 * programs call (test/mpi/pdgemm_check.c, test/bench/pdgemm/pdgemm_bench.c).  Debian's
 * libscalapack-mpich ships no C header for them, so they are declared here once, in the
 * Fortran calling convention (trailing underscore, every argument by reference) except for
 * the C BLACS interface (Cblacs_*).
 */
#ifndef PSPORT_SCALAPACK_DECLS_H
#define PSPORT_SCALAPACK_DECLS_H

#include <stddef.h>

extern void Cblacs_pinfo(int *me, int *np);
extern void Cblacs_get(int ctx, int what, int *val);
extern void Cblacs_gridinit(int *ctx, const char *order, int nprow, int npcol);
extern void Cblacs_gridinfo(int ctx, int *nprow, int *npcol, int *myrow, int *mycol);
extern void Cblacs_gridexit(int ctx);
extern int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc,
                   const int *nprocs);
extern void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
                      const int *irsrc, const int *icsrc, const int *ctx, const int *lld,
                      int *info);
extern void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
                    const double *alpha, const double *a, const int *ia, const int *ja,
                    const int *desca, const double *b, const int *ib, const int *jb,
                    const int *descb, const double *beta, double *c, const int *ic, const int *jc,
                    const int *descc);
/* PBLAS's logical block size: the width of the panels its PDGEMM multiplies at a time
 * (prec_len: the hidden length of the Fortran CHARACTER argument, 1). */
extern int pilaenv_(const int *ctx, const char *prec, size_t prec_len);
extern void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
                   const double *alpha, const double *a, const int *lda, const double *b,
                   const int *ldb, const double *beta, double *c, const int *ldc);

#endif
