/*
 * part — MPI 4.0 partitioned communication over the channel (ch_psport/src/psport_part.c),
 * between rank 0 (sender) and rank 1 (receiver); other ranks only join the reports.  Every
 * byte is checked.  The checks:
 *   - rounds of one pair, 8 B .. 4 MiB (eager and rendezvous), partitions marked ready in
 *     reverse order, with MPI_Pready_range and MPI_Pready_list, sender and receiver with
 *     different partition counts, MPI_Parrived polled until true;
 *   - three pairs of one tag and one of another, initialised on the receiver in another
 *     order (by tag) and started in reverse order every round: each gets its own data;
 *   - a user receive with MPI_ANY_SOURCE / MPI_ANY_TAG posted meanwhile gets only the user
 *     message, and the partitioned status reports the user's tag and the full count;
 *   - a derived (vector) datatype;
 *   - a receive freed without ever being started, then a new pair with the same tag: the
 *     new receive gets the new send's data, not the freed one's;
 *   - every rank sends to itself;
 *   - MPI_PROC_NULL on both sides completes at once.
 * Rank 0 prints one "ok - part: ..." / "not ok - part: ..." line per check; exit 1 on any
 * failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static unsigned char pat(long round, long k)
{
    return (unsigned char)((round * 2654435761u + k * 7u + (k >> 8)) & 0xff);
}

static void fill(unsigned char *b, long round, long n)
{
    for (long k = 0; k < n; k++)
        b[k] = pat(round, k);
}

static long bad_at(const unsigned char *b, long round, long n)
{
    for (long k = 0; k < n; k++)
        if (b[k] != pat(round, k))
            return k;
    return -1;
}

/* Wait for r at most 20 s (a request paired wrongly never completes): 0, or 1 on timeout. */
static int wait_deadline(MPI_Request *r)
{
    double end = MPI_Wtime() + 20;
    for (int done = 0; !done;) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (!done && MPI_Wtime() > end)
            return 1;
    }
    return 0;
}

/* One check, reported by rank 0 with the worst result of all ranks. */
static int report(const char *name, int mybad)
{
    int bad = 0;
    MPI_Allreduce(&mybad, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s - part: %s\n", bad ? "not ok" : "ok", name);
    fflush(stdout);
    return bad;
}

/* Wait on the receiver's request, polling MPI_Parrived on every partition first. */
static int recv_round(MPI_Request *r, int parts)
{
    int bad = 0;
    for (int p = 0; p < parts; p++) {
        int flag = 0;
        for (long spins = 0; !flag; spins++) {
            MPI_Parrived(*r, p, &flag);
            if (spins > 100000000l) {
                fprintf(stderr, "partition %d never arrived\n", p);
                return 1;
            }
        }
    }
    if (MPI_Wait(r, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        bad = 1;
    return bad;
}

/* Rounds of one pair: total bytes in spart send partitions and rpart receive partitions. */
static int rounds(long total, int spart, int rpart, int how, int nround)
{
    int bad = 0;
    unsigned char *buf = calloc(1, total ? total : 1);
    MPI_Request r = MPI_REQUEST_NULL;
    if (rank == 0)
        MPI_Psend_init(buf, spart, total / spart, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_INFO_NULL,
                       &r);
    else if (rank == 1)
        MPI_Precv_init(buf, rpart, total / rpart, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_INFO_NULL,
                       &r);
    for (int k = 0; k < nround; k++) {
        long round = total * 31 + k;
        if (rank == 0) {
            fill(buf, round, total);
            MPI_Start(&r);
            if (how == 0) { /* one at a time, last first */
                for (int p = spart - 1; p >= 0; p--)
                    MPI_Pready(p, r);
            } else if (how == 1) { /* two ranges */
                MPI_Pready_range(spart / 2, spart - 1, r);
                if (spart / 2 > 0)
                    MPI_Pready_range(0, spart / 2 - 1, r);
            } else { /* a list, odd ones first */
                int *list = malloc(sizeof(int) * spart), n = 0;
                for (int p = 1; p < spart; p += 2)
                    list[n++] = p;
                for (int p = 0; p < spart; p += 2)
                    list[n++] = p;
                MPI_Pready_list(n, list, r);
                free(list);
            }
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            memset(buf, 0, total);
            MPI_Start(&r);
            bad |= recv_round(&r, rpart);
            long at = bad_at(buf, round, total);
            if (at >= 0) {
                fprintf(stderr, "%ld B round %d: byte %ld wrong\n", total, k, at);
                bad = 1;
            }
        }
    }
    if (r != MPI_REQUEST_NULL)
        MPI_Request_free(&r);
    free(buf);
    return bad;
}

/* Four pairs: tags 7, 7, 9, 7, initialised on the receiver as 9, 7, 7, 7 and started in
 * reverse order each round; a user any-source/any-tag receive is posted meanwhile. */
static int many_pairs(void)
{
    enum { N = 4, LEN = 100000 };
    int stag[N] = {7, 7, 9, 7};
    int bad = 0;
    unsigned char *b[N];
    MPI_Request r[N];
    for (int i = 0; i < N; i++)
        b[i] = calloc(1, LEN);
    if (rank == 0) {
        for (int i = 0; i < N; i++)
            MPI_Psend_init(b[i], 4, LEN / 4, MPI_BYTE, 1, stag[i], MPI_COMM_WORLD, MPI_INFO_NULL,
                           &r[i]);
    } else if (rank == 1) {
        /* receive j gets send j: the 9 first, then the 7s in order */
        int order[N] = {2, 0, 1, 3};
        for (int j = 0; j < N; j++) {
            int i = order[j];
            MPI_Precv_init(b[i], 2, LEN / 2, MPI_BYTE, 0, stag[i], MPI_COMM_WORLD, MPI_INFO_NULL,
                           &r[i]);
        }
    }
    for (int k = 0; k < 3; k++) {
        if (rank == 0) {
            for (int i = N - 1; i >= 0; i--) {
                fill(b[i], 1000 * k + i, LEN);
                MPI_Start(&r[i]);
            }
            int user = 4242;
            MPI_Send(&user, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
            for (int i = 0; i < N; i++)
                for (int p = 0; p < 4; p++)
                    MPI_Pready(p, r[i]);
            MPI_Status st[N];
            MPI_Waitall(N, r, st);
        } else if (rank == 1) {
            int user = 0;
            MPI_Request ur;
            MPI_Status us, st[N];
            MPI_Irecv(&user, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ur);
            for (int i = N - 1; i >= 0; i--) {
                memset(b[i], 0, LEN);
                MPI_Start(&r[i]);
            }
            MPI_Waitall(N, r, st);
            MPI_Wait(&ur, &us);
            if (user != 4242 || us.MPI_TAG != 7) {
                fprintf(stderr, "user message: %d tag %d\n", user, us.MPI_TAG);
                bad = 1;
            }
            for (int i = 0; i < N; i++) {
                int count = -1;
                MPI_Get_count(&st[i], MPI_BYTE, &count);
                long at = bad_at(b[i], 1000 * k + i, LEN);
                if (at >= 0 || st[i].MPI_TAG != stag[i] || st[i].MPI_SOURCE != 0 || count != LEN) {
                    fprintf(stderr, "pair %d round %d: byte %ld, tag %d, source %d, count %d\n", i,
                            k, at, st[i].MPI_TAG, st[i].MPI_SOURCE, count);
                    bad = 1;
                }
            }
        }
    }
    if (rank < 2)
        for (int i = 0; i < N; i++)
            MPI_Request_free(&r[i]);
    for (int i = 0; i < N; i++)
        free(b[i]);
    return bad;
}

/* A vector type: every other int of 2 * 3000 ints, in 3 partitions of 1000 elements. */
static int vector_type(void)
{
    int bad = 0, n = 3000;
    int *v = calloc(2 * n, sizeof(int));
    MPI_Datatype vec, t;
    MPI_Type_vector(1000, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 2000 * sizeof(int), &t);
    MPI_Type_free(&vec);
    MPI_Type_commit(&t);
    MPI_Request r = MPI_REQUEST_NULL;
    if (rank == 0) {
        for (int i = 0; i < 2 * n; i++)
            v[i] = i;
        MPI_Psend_init(v, 3, 1, t, 1, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
        MPI_Type_free(&t); /* the request keeps it */
        MPI_Start(&r);
        MPI_Pready_range(0, 2, r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Precv_init(v, 3, 1, t, 0, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
        MPI_Type_free(&t);
        MPI_Start(&r);
        bad |= recv_round(&r, 3);
        for (int i = 0; i < 2 * n; i++)
            if (v[i] != (i % 2 ? 0 : i)) {
                fprintf(stderr, "vector: element %d is %d\n", i, v[i]);
                bad = 1;
                break;
            }
    } else {
        MPI_Type_free(&t);
    }
    if (r != MPI_REQUEST_NULL)
        MPI_Request_free(&r);
    free(v);
    return bad;
}

/* The receiver frees a request it never started; the pairs after it stay right. */
static int freed_unstarted(void)
{
    int bad = 0, a = 1, c = 2;
    MPI_Request r1 = MPI_REQUEST_NULL, r2 = MPI_REQUEST_NULL;
    if (rank == 0) {
        MPI_Psend_init(&a, 1, 1, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &r1);
        MPI_Request_free(&r1);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Psend_init(&c, 1, 1, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &r2);
        MPI_Start(&r2);
        MPI_Pready(0, r2);
        MPI_Wait(&r2, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        int x = 0;
        MPI_Precv_init(&x, 1, 1, MPI_INT, 0, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &r1);
        MPI_Request_free(&r1);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Precv_init(&x, 1, 1, MPI_INT, 0, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &r2);
        MPI_Start(&r2);
        if (wait_deadline(&r2)) {
            fprintf(stderr, "freed pair: the new receive did not complete in 20 s\n");
            return 1; /* (r2 stays: freeing an active request would wait for it) */
        }
        if (x != 2) {
            fprintf(stderr, "freed pair: got %d, not the new send's 2\n", x);
            bad = 1;
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (r2 != MPI_REQUEST_NULL)
        MPI_Request_free(&r2);
    return bad;
}

/* Each rank sends to itself: 2 rounds of 64 KiB in 4 partitions. */
static int self(void)
{
    int bad = 0;
    long n = 65536;
    unsigned char *s = calloc(1, n), *r = calloc(1, n);
    MPI_Request rq[2];
    MPI_Precv_init(r, 4, n / 4, MPI_BYTE, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]);
    MPI_Psend_init(s, 4, n / 4, MPI_BYTE, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]);
    for (int k = 0; k < 2; k++) {
        fill(s, 77 + rank + k, n);
        memset(r, 0, n);
        MPI_Startall(2, rq);
        MPI_Pready_range(0, 3, rq[0]);
        MPI_Status st[2];
        if (MPI_Waitall(2, rq, st) != MPI_SUCCESS || bad_at(r, 77 + rank + k, n) >= 0)
            bad = 1;
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    free(s);
    free(r);
    return bad;
}

static int proc_null(void)
{
    int bad = 0, x = 5;
    MPI_Request s, r;
    MPI_Status st;
    MPI_Psend_init(&x, 2, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
    MPI_Precv_init(&x, 2, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    for (int k = 0; k < 2; k++) {
        MPI_Start(&s);
        MPI_Pready_range(0, 1, s);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
        MPI_Start(&r);
        MPI_Wait(&r, &st);
        int count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        if (st.MPI_SOURCE != MPI_PROC_NULL || count != 0 || x != 5)
            bad = 1;
    }
    MPI_Request_free(&s);
    MPI_Request_free(&r);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "part: needs 2 ranks or more\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bad = 0;
    char name[160];
    static const long totals[] = {8, 4096, 65536, 1l << 20, 4l << 20};
    for (unsigned i = 0; i < sizeof totals / sizeof totals[0]; i++) {
        long t = totals[i];
        snprintf(name, sizeof name,
                 "%ld B in 8 send / 2 receive partitions, 3 rounds each way of marking ready", t);
        int b = rounds(t, 8, 2, 0, 3) | rounds(t, 8, 2, 1, 3) | rounds(t, 8, 2, 2, 3);
        bad |= report(name, b);
    }
    bad |= report("8 KiB in 1 send / 16 receive partitions (Parrived on each)",
                  rounds(8192, 1, 16, 0, 2));
    bad |=
        report("four pairs (tags 7, 7, 9, 7) initialised in another order on the receiver, started "
               "in reverse, a user any-source any-tag receive meanwhile",
               many_pairs());
    bad |= report("a derived (vector) datatype", vector_type());
    bad |= report("a receive freed unstarted; the next pair of its tag gets its own data",
                  freed_unstarted());
    bad |= report("every rank to itself (receive initialised first)", self());
    bad |= report("MPI_PROC_NULL send and receive complete at once", proc_null());
    MPI_Finalize();
    return bad ? 1 : 0;
}
