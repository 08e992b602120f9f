/*
 * p2p — point-to-point correctness over the channel, for every size around the eager limit
 * and the PULC boundaries (0 B .. 16 MiB): blocking, expected and unexpected (probed first),
 * synchronous sends, non-contiguous send and receive types, truncation (MPI_ERR_TRUNCATE),
 * messages of up to 16 bytes into a short or non-contiguous receive, posted or unexpected,
 * zero-count messages with MPI_DATATYPE_NULL, an 8-byte message right behind a larger one (order
 * with the receiver's early hand-over of eager-short packets),
 * a non-contiguous message over PULC's 4 GiB - 1 refused by the sender (contiguous ones go:
 * test/mpi/big.c), any-source from all ranks, and a
 * thousand small messages in flight (order).  Every byte is checked.  Rank 0 prints one
 * "ok - p2p: ..." / "not ok - p2p: ..." line per check; exit 1 on any failure.
 * Usage: p2p [max_bytes] (default 16 MiB).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, size;
static long maxsz = 16l << 20;

static unsigned char pat(long msg, long k)
{
    return (unsigned char)((msg * 2654435761u + k * 7u + (k >> 8)) & 0xff);
}

static void fill(unsigned char *b, long msg, long n)
{
    for (long k = 0; k < n; k++)
        b[k] = pat(msg, k);
}

static long bad_at(const unsigned char *b, long msg, long n)
{
    for (long k = 0; k < n; k++)
        if (b[k] != pat(msg, k))
            return k;
    return -1;
}

/* Report one check from rank 0 with the worst result of all ranks. */
static int report(const char *name, int mybad)
{
    int bad = 0;
    MPI_Allreduce(&mybad, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s - p2p: %s\n", bad ? "not ok" : "ok", name);
    fflush(stdout);
    return bad;
}

static long sizes[128];
static int nsizes;

static void add(long s)
{
    if (s < 0 || s > maxsz)
        return;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] == s)
            return;
    sizes[nsizes++] = s;
}

static void make_sizes(void)
{
    long base[] = {0,        1,        7,    8,    15,   16,     17,       64,
                   100,      1000,     4076, 4096, 8192, 100000, 1l << 20, (1l << 20) + 3,
                   4l << 20, 16l << 20};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        add(base[i]);
    const char *e = getenv("PSP_EAGER_MAX");
    long eager = e ? atol(e) : 262144; /* the default of PSP_EAGER_MAX */
    long around[] = {eager, 4096, 16384, 32768, 65536, 131072, 262144};
    for (size_t i = 0; i < sizeof around / sizeof around[0]; i++)
        for (long d = -1; d <= 1; d++)
            add(around[i] + d);
}

/* Rank 0 and every other rank exchange each size both ways: blocking, then unexpected
 * (sent before the receive is posted, found by MPI_Probe), then synchronous. */
static int pairs(void)
{
    unsigned char *s = malloc(maxsz + 1), *r = malloc(maxsz + 1);
    int bad = 0;
    for (int i = 0; i < nsizes; i++) { /* on: the peer must not be left waiting */
        long n = sizes[i];
        for (int peer = 1; peer < size; peer++) {
            if (rank != 0 && rank != peer)
                continue;
            int other = rank == 0 ? peer : 0;
            for (int mode = 0; mode < 3; mode++) {
                long id = i * 100 + peer * 10 + mode;
                MPI_Status st;
                int cnt;
                fill(s, id + rank, n);
                memset(r, 0xee, n + 1);
                if (mode == 0) {
                    MPI_Sendrecv(s, (int)n, MPI_BYTE, other, mode, r, (int)n + 1, MPI_BYTE, other,
                                 mode, MPI_COMM_WORLD, &st);
                } else if (mode == 1) {
                    MPI_Request q;
                    MPI_Isend(s, (int)n, MPI_BYTE, other, mode, MPI_COMM_WORLD, &q);
                    MPI_Probe(other, mode, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_BYTE, &cnt);
                    if (cnt != n)
                        bad = 1;
                    MPI_Recv(r, (int)n + 1, MPI_BYTE, other, mode, MPI_COMM_WORLD, &st);
                    MPI_Wait(&q, MPI_STATUS_IGNORE);
                } else if (rank == 0) {
                    MPI_Ssend(s, (int)n, MPI_BYTE, other, mode, MPI_COMM_WORLD);
                    MPI_Recv(r, (int)n + 1, MPI_BYTE, other, mode, MPI_COMM_WORLD, &st);
                } else {
                    MPI_Recv(r, (int)n + 1, MPI_BYTE, other, mode, MPI_COMM_WORLD, &st);
                    MPI_Ssend(s, (int)n, MPI_BYTE, other, mode, MPI_COMM_WORLD);
                }
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                long at = bad_at(r, id + other, n);
                if (cnt != n || at >= 0 || r[n] != 0xee) {
                    fprintf(stderr, "rank %d: size %ld mode %d from %d: count %d, byte %ld wrong\n",
                            rank, n, mode, other, cnt, at);
                    bad = 1;
                }
            }
        }
    }
    free(s);
    free(r);
    return bad;
}

/* Non-contiguous: every other int of a vector, sent to contiguous and back into a vector. */
static int noncontig(void)
{
    int bad = 0;
    long counts[] = {1, 1000, 16383, 16384, 16385, 65537, 1l << 20};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        long n = counts[c];
        if (n * 8 > maxsz)
            break;
        MPI_Datatype vec;
        MPI_Type_vector((int)n, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int *v = malloc(n * 8), *d = malloc(n * 4);
        for (int peer = 1; peer < size; peer++) {
            if (rank == 0) {
                for (long k = 0; k < 2 * n; k++)
                    v[k] = (k & 1) ? -1 : (int)(k * 3 + c);
                MPI_Send(v, 1, vec, peer, 7, MPI_COMM_WORLD);
                for (long k = 0; k < 2 * n; k++)
                    v[k] = -2;
                MPI_Recv(v, 1, vec, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (long k = 0; k < 2 * n; k++)
                    if (v[k] != ((k & 1) ? -2 : (int)(k * 5 + c))) {
                        fprintf(stderr, "noncontig recv: count %ld int %ld wrong\n", n, k);
                        bad = 1;
                        break;
                    }
            } else if (rank == peer) {
                MPI_Recv(d, (int)n, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (long k = 0; k < n; k++)
                    if (d[k] != (int)(2 * k * 3 + c)) {
                        fprintf(stderr, "noncontig send: count %ld int %ld wrong\n", n, k);
                        bad = 1;
                        break;
                    }
                for (long k = 0; k < n; k++)
                    d[k] = (int)(2 * k * 5 + c);
                MPI_Send(d, (int)n, MPI_INT, 0, 8, MPI_COMM_WORLD);
            }
        }
        free(v);
        free(d);
        MPI_Type_free(&vec);
    }
    return bad;
}

/* A receive smaller than the message: MPI_ERR_TRUNCATE, the part that fits delivered. */
static int truncation(void)
{
    int bad = 0;
    long lens[] = {100, 40000, 300000, 4l << 20};
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        long n = lens[i];
        if (n > maxsz || size < 2)
            continue;
        unsigned char *b = malloc(n);
        if (rank == 1) {
            fill(b, 77 + i, n);
            MPI_Send(b, (int)n, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Status st;
            memset(b, 0, n);
            int rc = MPI_Recv(b, (int)(n / 2), MPI_BYTE, 1, 9, MPI_COMM_WORLD, &st), cls = 0;
            MPI_Error_class(rc, &cls);
            if (cls != MPI_ERR_TRUNCATE || bad_at(b, 77 + i, n / 2) >= 0) {
                fprintf(stderr, "truncation at %ld bytes: class %d, data %s\n", n, cls,
                        bad_at(b, 77 + i, n / 2) >= 0 ? "wrong" : "right");
                bad = 1;
            }
        }
        free(b);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    return bad;
}

/*
 * Messages of at most 16 bytes (eager-short: their data inside the packet, matched where they
 * lie on one node) into receives that are not a plain contiguous buffer big enough, posted
 * before the message comes and after it (probed first): 12 bytes into 5 (MPI_ERR_TRUNCATE,
 * count 5, the 5 that fit delivered, nothing past them) and 3 ints into every other int of
 * a vector (the gaps untouched).
 */
static int short_edges(void)
{
    int bad = 0;
    MPI_Datatype vec;
    MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int peer = 1; peer < size; peer++) {
        for (int posted = 1; posted >= 0; posted--) {
            if (rank == peer) {
                unsigned char s[12];
                int v[3] = {11 * peer, 22 * peer, 33 * peer};
                fill(s, 500 + peer, 12);
                if (posted) /* rank 0's receives are posted */
                    MPI_Recv(NULL, 0, MPI_BYTE, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(s, 12, MPI_BYTE, 0, 31, MPI_COMM_WORLD);
                MPI_Send(v, 3, MPI_INT, 0, 32, MPI_COMM_WORLD);
            } else if (rank == 0) {
                unsigned char r[12];
                int w[6];
                memset(r, 0xee, sizeof r);
                for (int k = 0; k < 6; k++)
                    w[k] = -7;
                MPI_Request q[2];
                MPI_Status st[2];
                if (!posted) { /* both arrive first and wait as unexpected */
                    MPI_Probe(peer, 31, MPI_COMM_WORLD, &st[0]);
                    MPI_Probe(peer, 32, MPI_COMM_WORLD, &st[1]);
                }
                MPI_Irecv(r, 5, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &q[0]);
                MPI_Irecv(w, 1, vec, peer, 32, MPI_COMM_WORLD, &q[1]);
                if (posted)
                    MPI_Send(NULL, 0, MPI_BYTE, peer, 30, MPI_COMM_WORLD);
                /* one at a time: MPICH's MPI_Waitall leaves the requests after a failed one
                 * pending (MPI_ERR_PENDING) */
                int rc = MPI_Wait(&q[0], &st[0]), cls = -1, cnt = -1;
                MPI_Error_class(rc, &cls);
                MPI_Get_count(&st[0], MPI_BYTE, &cnt);
                rc = MPI_Wait(&q[1], &st[1]);
                int gaps = w[1] == -7 && w[3] == -7 && w[5] == -7;
                int ints = w[0] == 11 * peer && w[2] == 22 * peer && w[4] == 33 * peer;
                int data = bad_at(r, 500 + peer, 5) < 0 && r[5] == 0xee;
                if (cls != MPI_ERR_TRUNCATE || cnt != 5 || !data || rc != MPI_SUCCESS || !ints ||
                    !gaps) {
                    fprintf(stderr,
                            "short_edges from %d (%s): truncation class %d count %d data %s, "
                            "vector %d: ints %s, gaps %s\n",
                            peer, posted ? "posted" : "unexpected", cls, cnt,
                            data ? "right" : "wrong", rc, ints ? "right" : "wrong",
                            gaps ? "untouched" : "written");
                    bad = 1;
                }
            }
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Type_free(&vec);
    return bad;
}

/* A non-contiguous message longer than a PULC message (4 GiB - 1: it goes as one, packed) is
 * refused on the sender's own call, MPI_Send and MPI_Isend alike, with MPI_ERR_COUNT; nothing
 * reaches the receiver, which posts no receive (before, the sender's RTS went out and both
 * waited for ever).  The buffer is never touched: it is address space only. */
static int too_long(void)
{
    int bad = 0;
    if (rank != 0 || size < 2)
        return 0;
    MPI_Datatype mib; /* 1 MiB of data: two blocks of 512 KiB, 1 MiB apart (extent 1.5 MiB) */
    MPI_Type_vector(2, 1 << 19, 1 << 20, MPI_BYTE, &mib);
    MPI_Type_commit(&mib);
    const int count = 4097; /* 4 GiB + 1 MiB of data */
    const size_t bytes = (size_t)count * (3u << 19);
    /* Address space only, whatever the overcommit policy (MAP_NORESERVE). */
    void *b = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) {
        fprintf(stderr, "too_long: no address space for 4 GiB\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int how = 0; how < 2; how++) {
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = how ? MPI_Isend(b, count, mib, 1, 77, MPI_COMM_WORLD, &req)
                     : MPI_Send(b, count, mib, 1, 77, MPI_COMM_WORLD);
        int cls = MPI_SUCCESS, len = 0;
        char msg[MPI_MAX_ERROR_STRING] = "";
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, msg, &len);
        if (cls != MPI_ERR_COUNT || !strstr(msg, "longer than a PULC message") ||
            req != MPI_REQUEST_NULL) {
            fprintf(stderr, "too_long: %s: class %d, '%s'\n", how ? "MPI_Isend" : "MPI_Send", cls,
                    msg);
            bad = 1;
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Type_free(&mib);
    munmap(b, bytes);
    return bad;
}

/* Every rank sends to rank 0, which receives from MPI_ANY_SOURCE; per sender in order. */
static int any_source(void)
{
    const int per = 50;
    int bad = 0;
    long n = 70000 < maxsz ? 70000 : maxsz;
    unsigned char *b = malloc(n);
    if (rank == 0) {
        int *next = calloc(size, sizeof *next);
        for (int i = 0; i < per * (size - 1); i++) {
            MPI_Status st;
            int cnt;
            MPI_Recv(b, (int)n, MPI_BYTE, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            int src = st.MPI_SOURCE, k = next[src]++;
            long want = (k % 3 == 0) ? n : 1 + k % 100;
            if (cnt != want || bad_at(b, src * 1000 + k, cnt) >= 0) {
                fprintf(stderr, "any-source: message %d of %d wrong (count %d)\n", k, src, cnt);
                bad = 1;
            }
        }
        free(next);
    } else {
        for (int k = 0; k < per; k++) {
            long len = (k % 3 == 0) ? n : 1 + k % 100;
            fill(b, rank * 1000 + k, len);
            MPI_Send(b, (int)len, MPI_BYTE, 0, 11, MPI_COMM_WORLD);
        }
    }
    free(b);
    return bad;
}

/* A thousand small non-blocking messages in flight between neighbours of a ring. */
static int flood(void)
{
    enum { N = 1000 };
    int bad = 0, to = (rank + 1) % size, from = (rank + size - 1) % size;
    static int sb[N][4], rb[N][4];
    MPI_Request rq[2 * N];
    for (int i = 0; i < N; i++) {
        MPI_Irecv(rb[i], 4, MPI_INT, from, 12, MPI_COMM_WORLD, &rq[i]);
    }
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 4; k++)
            sb[i][k] = rank * 100000 + i * 4 + k;
        MPI_Isend(sb[i], 4, MPI_INT, to, 12, MPI_COMM_WORLD, &rq[N + i]);
    }
    static MPI_Status sts[2 * N]; /* (not MPI_STATUSES_IGNORE: gcc 12 warns wrongly) */
    MPI_Waitall(2 * N, rq, sts);
    for (int i = 0; i < N && !bad; i++)
        for (int k = 0; k < 4; k++)
            if (rb[i][k] != from * 100000 + i * 4 + k) {
                fprintf(stderr, "flood: rank %d message %d from %d out of order\n", rank, i, from);
                bad = 1;
                break;
            }
    return bad;
}

/* An eager-short message (8 B) right behind another from the same sender with the same tag,
 * both arriving while the receiver looks away: a 1000-byte one (through the local ring), a
 * 100000-byte one (queued: above what a ring takes, PSP_LOCAL_RING_MAX), or a synchronous
 * 8-byte one (MPI_Issend: its packet is recorded, and answered later).  The first posted receive
 * must get the first message (the receiver hands ring packets to CH3 early, but only when nothing
 * before them waits to be handled).  Rank 0 sends to rank 1, 20 times each. */
static int short_behind_eager(void)
{
    int bad = 0;
    static char big[100000], small[8], a[100000], b[100000];
    memset(big, 'A', sizeof big);
    memset(small, 'B', sizeof small);
    for (int k = 0; k < 60 && size > 1; k++) {
        int kind = k % 3, n = kind == 0 ? 1000 : kind == 1 ? 100000 : 8;
        if (rank == 0) {
            MPI_Request sync;
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (kind < 2)
                MPI_Send(big, n, MPI_CHAR, 1, 31, MPI_COMM_WORLD);
            else
                MPI_Issend(big, n, MPI_CHAR, 1, 31, MPI_COMM_WORLD, &sync);
            MPI_Send(small, sizeof small, MPI_CHAR, 1, 31, MPI_COMM_WORLD);
            if (kind == 2)
                MPI_Wait(&sync, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Request rq[2];
            MPI_Status st[2];
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            MPI_Irecv(a, sizeof a, MPI_CHAR, 0, 31, MPI_COMM_WORLD, &rq[0]);
            MPI_Irecv(b, sizeof b, MPI_CHAR, 0, 31, MPI_COMM_WORLD, &rq[1]);
            MPI_Send(NULL, 0, MPI_BYTE, 0, 32, MPI_COMM_WORLD);
            usleep(2000); /* both arrive meanwhile */
            MPI_Waitall(2, rq, st);
            int na = -1, nb = -1;
            MPI_Get_count(&st[0], MPI_CHAR, &na);
            MPI_Get_count(&st[1], MPI_CHAR, &nb);
            if ((na != n || nb != (int)sizeof small || a[0] != 'A' || b[0] != 'B') && !bad) {
                fprintf(stderr,
                        "short behind eager, round %d: first receive got %d B '%c', second %d B "
                        "'%c'\n",
                        k, na, a[0], nb, b[0]);
                bad = 1; /* (no break: the sender waits for every round's go) */
            }
        }
    }
    return bad;
}

/* Zero-count messages with MPI_DATATYPE_NULL (MPICH accepts them; CH3 used to assert) through
 * every kind of send and receive between neighbours of a ring; each carries its tag. */
static int datatype_null(void)
{
    int bad = 0, to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Request rq[4];
    MPI_Status st[4];
    MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, from, 21, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, from, 22, MPI_COMM_WORLD, &rq[1]);
    MPI_Isend(NULL, 0, MPI_DATATYPE_NULL, to, 21, MPI_COMM_WORLD, &rq[2]);
    MPI_Issend(NULL, 0, MPI_DATATYPE_NULL, to, 22, MPI_COMM_WORLD, &rq[3]);
    if (MPI_Waitall(4, rq, st) != MPI_SUCCESS || st[0].MPI_TAG != 21 || st[1].MPI_TAG != 22)
        bad = 1;
    MPI_Status s;
    int count = -1;
    if (MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, to, 23, NULL, 0, MPI_DATATYPE_NULL, from, 23,
                     MPI_COMM_WORLD, &s) != MPI_SUCCESS ||
        s.MPI_SOURCE != from || MPI_Get_count(&s, MPI_BYTE, &count) != MPI_SUCCESS || count != 0)
        bad = 1;
    MPI_Request p[2];
    MPI_Send_init(NULL, 0, MPI_DATATYPE_NULL, to, 24, MPI_COMM_WORLD, &p[0]);
    MPI_Recv_init(NULL, 0, MPI_DATATYPE_NULL, from, 24, MPI_COMM_WORLD, &p[1]);
    for (int k = 0; k < 2; k++) {
        MPI_Startall(2, p);
        if (MPI_Waitall(2, p, st) != MPI_SUCCESS || st[1].MPI_TAG != 24)
            bad = 1;
    }
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        maxsz = atol(argv[1]);
    make_sizes();
    int bad = 0;
    char name[64];
    snprintf(name, sizeof name, "%d sizes 0..%ld B, blocking/unexpected/synchronous", nsizes,
             maxsz);
    bad |= report(name, pairs());
    bad |= report("non-contiguous send and receive datatypes", noncontig());
    bad |= report("truncated receives report MPI_ERR_TRUNCATE", truncation());
    bad |= report("16 bytes or less into a short or non-contiguous receive, posted or not",
                  short_edges());
    bad |= report(
        "a non-contiguous message over 4 GiB - 1 refused on the sender's call (MPI_ERR_COUNT)",
        too_long());
    bad |= report("MPI_ANY_SOURCE from every rank, order per sender", any_source());
    bad |= report("1000 small messages in flight around a ring", flood());
    bad |= report(
        "an 8-byte message right behind a 1000-, 100000- or synchronous 8-byte one goes second",
        short_behind_eager());
    bad |=
        report("zero-count messages with MPI_DATATYPE_NULL (isend, issend, sendrecv, persistent)",
               datatype_null());
    MPI_Finalize();
    return bad;
}
