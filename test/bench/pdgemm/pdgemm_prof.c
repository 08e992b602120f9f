/*
 * pdgemm_prof — where a ScaLAPACK program's PDGEMM time goes, per rank: an LD_PRELOAD library
 * that times every pdgemm_ call and, inside them, the local DGEMMs (with their flops, so their
 * rate can be set against one big DGEMM's), the MPI calls BLACS makes (point-to-point and
 * collectives apart, with the bytes sent) and what is left (PBLAS's packing, BLACS's own work).
 *
 *   mpirun -genv LD_PRELOAD /path/pdgemm_prof.so ... pdgemm_bench --no-ref
 *
 * At MPI_Finalize each rank prints one line to stderr per shape of pdgemm_ call:
 *   "pdgemm_prof rank=R M=m N=n K=k calls=C pdgemm_s=T dgemm_s=T dgemm_calls=N
 *    dgemm_mflops=F dgemm_avg_k=K send_s=T recv_s=T wait_s=T coll_s=T mpi_other_s=T rest_s=T
 *    sends=S sent_bytes=B"
 * (times summed over the calls of that shape; send = MPI_Send, Rsend, Isend; recv = MPI_Recv,
 * Irecv, Sendrecv; wait = Waitall, Testall; coll = Bcast, Allreduce, Reduce, Barrier; other =
 * Pack, Unpack, Type_commit, Type_free; rest = pdgemm - dgemm - MPI: PBLAS's packing, copies
 * and scaling, BLACS's own work and the MPI calls not wrapped here, such as MPI_Type_vector). Works
 * with psport's and Debian's libmpich alike: the MPI wrappers call the PMPI entry points of
 * whichever is loaded, dgemm_ and pdgemm_ are forwarded to the next definition (dlsym RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_SHAPES 16

/* Sums of one rank over the pdgemm_ calls of one shape (M, N, K). */
struct sums {
    int m, n, k;
    long calls, dgemm_calls, sends;
    double pdgemm_s, dgemm_s, dgemm_flops, dgemm_k, send_s, recv_s, wait_s, coll_s, other_s, sent;
};
static struct sums shapes[MAX_SHAPES];
static int nshapes;
/* The sums of the pdgemm_ call running now; NULL outside pdgemm_ (nothing is counted). */
static struct sums *cur;

/* The sums for shape (m, n, k); the last slot takes every shape past MAX_SHAPES (printed as
 * M=0 N=0 K=0: several shapes). */
static struct sums *sums_of(int m, int n, int k)
{
    for (int i = 0; i < nshapes; i++)
        if (shapes[i].m == m && shapes[i].n == n && shapes[i].k == k)
            return &shapes[i];
    if (nshapes == MAX_SHAPES) {
        struct sums *last = &shapes[MAX_SHAPES - 1];
        last->m = last->n = last->k = 0;
        return last;
    }
    shapes[nshapes] = (struct sums){.m = m, .n = n, .k = k};
    return &shapes[nshapes++];
}

/* Monotonic seconds (vDSO: cheap enough for every BLACS call). */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The next definition of a symbol after this library, or exit with a message. */
static void *next_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "pdgemm_prof: no %s after the preload (%s)\n", name, dlerror());
        exit(3);
    }
    return f;
}

/* Bytes of count elements of type (0 when MPI cannot tell). */
static double bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (double)count * size;
}

/* Times the MPI call expr into the sum field when inside pdgemm_. */
#define TIMED(field, expr)                                                                         \
    do {                                                                                           \
        if (!cur)                                                                                  \
            return expr;                                                                           \
        double t0_ = now();                                                                        \
        int rc_ = expr;                                                                            \
        cur->field += now() - t0_;                                                                 \
        return rc_;                                                                                \
    } while (0)

typedef void dgemm_fn(const char *, const char *, const int *, const int *, const int *,
                      const double *, const double *, const int *, const double *, const int *,
                      const double *, double *, const int *);
typedef void pdgemm_fn(const char *, const char *, const int *, const int *, const int *,
                       const double *, const double *, const int *, const int *, const int *,
                       const double *, const int *, const int *, const int *, const double *,
                       double *, const int *, const int *, const int *);

/* The BLAS DGEMM: timed, with its 2mnk flops, when PBLAS calls it inside pdgemm_. */
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc)
{
    static dgemm_fn *real;
    if (!real)
        real = (dgemm_fn *)next_symbol("dgemm_");
    if (!cur) {
        real(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    double t0 = now();
    real(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cur->dgemm_s += now() - t0;
    cur->dgemm_calls++;
    cur->dgemm_flops += 2.0 * *m * *n * *k;
    cur->dgemm_k += *k;
}

/* ScaLAPACK's PDGEMM: the window everything else is counted in. */
void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc)
{
    static pdgemm_fn *real;
    if (!real)
        real = (pdgemm_fn *)next_symbol("pdgemm_");
    if (cur) { /* called from inside PDGEMM: counted as part of the outer call */
        real(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
        return;
    }
    struct sums *s = sums_of(*m, *n, *k);
    double t0 = now();
    cur = s;
    real(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
    cur = NULL;
    s->pdgemm_s += now() - t0;
    s->calls++;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (cur) {
        cur->sent += bytes_of(count, type);
        cur->sends++;
    }
    TIMED(send_s, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (cur) {
        cur->sent += bytes_of(count, type);
        cur->sends++;
    }
    TIMED(send_s, PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    if (cur) {
        cur->sent += bytes_of(count, type);
        cur->sends++;
    }
    TIMED(send_s, PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
             MPI_Status *st)
{
    TIMED(recv_s, PMPI_Recv(buf, count, type, src, tag, comm, st));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    TIMED(recv_s, PMPI_Irecv(buf, count, type, src, tag, comm, req));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st)
{
    if (cur) {
        cur->sent += bytes_of(scount, stype);
        cur->sends++;
    }
    TIMED(recv_s,
          PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st));
}

int MPI_Waitall(int n, MPI_Request *reqs, MPI_Status *sts)
{
    TIMED(wait_s, PMPI_Waitall(n, reqs, sts));
}

int MPI_Testall(int n, MPI_Request *reqs, int *flag, MPI_Status *sts)
{
    TIMED(wait_s, PMPI_Testall(n, reqs, flag, sts));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    if (cur) {
        int me = -1;
        PMPI_Comm_rank(comm, &me);
        if (me == root) {
            cur->sent += bytes_of(count, type);
            cur->sends++;
        }
    }
    TIMED(coll_s, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    TIMED(coll_s, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    TIMED(coll_s, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Barrier(MPI_Comm comm)
{
    TIMED(coll_s, PMPI_Barrier(comm));
}

int MPI_Pack(const void *in, int count, MPI_Datatype type, void *out, int size, int *pos,
             MPI_Comm comm)
{
    TIMED(other_s, PMPI_Pack(in, count, type, out, size, pos, comm));
}

int MPI_Unpack(const void *in, int size, int *pos, void *out, int count, MPI_Datatype type,
               MPI_Comm comm)
{
    TIMED(other_s, PMPI_Unpack(in, size, pos, out, count, type, comm));
}

int MPI_Type_commit(MPI_Datatype *type)
{
    TIMED(other_s, PMPI_Type_commit(type));
}

int MPI_Type_free(MPI_Datatype *type)
{
    TIMED(other_s, PMPI_Type_free(type));
}

/* Prints this rank's line per PDGEMM shape, then finalizes. */
int MPI_Finalize(void)
{
    int me = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &me);
    for (int i = 0; i < nshapes; i++) {
        const struct sums *s = &shapes[i];
        double mpi = s->send_s + s->recv_s + s->wait_s + s->coll_s + s->other_s;
        fprintf(stderr,
                "pdgemm_prof rank=%d M=%d N=%d K=%d calls=%ld pdgemm_s=%.6f dgemm_s=%.6f "
                "dgemm_calls=%ld dgemm_mflops=%.0f dgemm_avg_k=%.0f send_s=%.6f recv_s=%.6f "
                "wait_s=%.6f coll_s=%.6f mpi_other_s=%.6f rest_s=%.6f sends=%ld sent_bytes=%.0f\n",
                me, s->m, s->n, s->k, s->calls, s->pdgemm_s, s->dgemm_s, s->dgemm_calls,
                s->dgemm_s > 0 ? s->dgemm_flops / s->dgemm_s * 1e-6 : 0.0,
                s->dgemm_calls ? s->dgemm_k / (double)s->dgemm_calls : 0.0, s->send_s, s->recv_s,
                s->wait_s, s->coll_s, s->other_s, s->pdgemm_s - s->dgemm_s - mpi, s->sends,
                s->sent);
    }
    return PMPI_Finalize();
}
