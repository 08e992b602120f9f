/*
 * test_pulc_streams — port-S and port-M byte streams of libpulc against a running psid
 * (PSP_PSID_SOCKET): random write sizes against random read sizes with byte-exact content,
 * reads returning what is there and keeping the rest, timeouts and a sleeping reader, the
 * port-S peer and the refused second writer, four interleaved port-M streams, reading one
 * sender's stream while the others stay queued, and writes to a port of another kind.
 *
 * As in test_pulc_portd, readers and writers run in processes of their own (forked, each
 * with its own PSP_Init); with PULC_TEST_PEER_SOCKET (another node's psid, test/cluster) and
 * PULC_TEST_PEER_NODE the readers attach there and every byte crosses the NIC.  The test
 * process itself is the reader; writers report through their exit code (messages on stderr).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "pulc.h"
#include "pulc_test_roles.h"

/* ---- stream content: byte off of stream s, not periodic, so a lost, doubled or reordered
 * piece of any length shows ---- */

static uint8_t sbyte(uint32_t s, uint64_t off)
{
    uint64_t x = (off >> 3) * 0x9e3779b97f4a7c15ull + (s + 1) * 0xd1b54a32d192ed03ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (uint8_t)(x >> (8 * (off & 7)));
}

static void sfill(uint8_t *b, uint32_t s, uint64_t off, uint32_t len)
{
    for (uint32_t k = 0; k < len; k++)
        b[k] = sbyte(s, off + k);
}

/* 0, or 1 + the index of the first byte that differs from stream s at off. */
static uint32_t scheck(const uint8_t *b, uint32_t s, uint64_t off, uint32_t len)
{
    for (uint32_t k = 0; k < len; k++)
        if (b[k] != sbyte(s, off + k))
            return k + 1;
    return 0;
}

static uint64_t rnd(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A write size: 0 .. max, a quarter of them tiny (0 .. 64). */
static uint32_t write_size(uint64_t *st, uint32_t max)
{
    uint64_t r = rnd(st);
    return (r & 3) == 0 ? (uint32_t)(r >> 8) % 65 : (uint32_t)(r >> 8) % (max + 1);
}

/* A read size: 1 .. max, spread over small and large. */
static uint32_t read_size(uint64_t *st, uint32_t max)
{
    uint64_t r = rnd(st);
    uint32_t lim = (r & 3) == 0 ? 16 : (r & 3) == 1 ? 4096 : max;
    return 1 + (uint32_t)(r >> 8) % lim;
}

/* ---- processes ---- */

static PSP_Port *open_port(int number, int kind)
{
    PSP_Port *p = NULL;
    int rc = PSP_OpenPort(number, kind, &p);
    if (rc) {
        fprintf(stderr, "PSP_OpenPort(%d, kind %d): %s\n", number, kind, PSP_StrError(rc));
        exit(3);
    }
    return p;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The port's asynchronous error, polling up to 10 s for it to arrive (0: none came). */
static int wait_port_error(PSP_Port *p, PSP_PortId *about)
{
    int rc = 0;
    for (int i = 0; i < 20000 && rc == 0; i++) {
        PSP_Progress();
        rc = PSP_GetPortError(p, about);
        if (!rc)
            usleep(500);
    }
    return rc;
}

/* Read exactly len bytes of the port-S stream (timeout per read): 0 or the failing result. */
static int sread_all(PSP_Port *p, uint8_t *buf, uint32_t len, int timeout_ms)
{
    for (uint32_t got = 0; got < len;) {
        int n = PSP_SRead(p, buf + got, len - got, timeout_ms);
        if (n <= 0)
            return n ? n : -EIO;
        got += (uint32_t)n;
    }
    return 0;
}

/* Counting accept callback for PSP_IProbe: counts queued messages (of *arg's sender if its
 * id is not 0), never takes one. */
struct count_arg {
    PSP_PortId src;
    unsigned n;
};

static int count_msgs(const PSP_MsgInfo *m, void *arg)
{
    struct count_arg *c = arg;
    if (!c->src || m->src == c->src)
        c->n++;
    return 0;
}

/* Wait up to 10 s until at least n messages (of src, 0 any) are queued at p: 1 when so. */
static int wait_queued(PSP_Port *p, PSP_PortId src, unsigned n)
{
    for (int i = 0; i < 20000; i++) {
        struct count_arg c = {src, 0};
        PSP_MsgInfo info;
        PSP_IProbe(p, count_msgs, &c, &info);
        if (c.n >= n)
            return 1;
        usleep(500);
    }
    return 0;
}

/* ---- port-S: random writes against random reads ---- */

#define S_TOTAL     (16u << 20)
#define S_WRITE_MAX (200u << 10)
#define S_READ_MAX  (300u << 10)

/* The write sizes of seed up to S_TOTAL bytes; their sum. */
static uint64_t s_total(uint64_t seed)
{
    uint64_t st = seed, sum = 0;
    while (sum < S_TOTAL)
        sum += write_size(&st, S_WRITE_MAX);
    return sum;
}

static int s_random_writer(uint64_t seed, int portno)
{
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_S);
    ready_wait();
    uint8_t *buf = malloc(S_WRITE_MAX);
    uint64_t st = seed, off = 0;
    unsigned writes = 0;
    while (off < S_TOTAL) {
        uint32_t len = write_size(&st, S_WRITE_MAX);
        sfill(buf, 7, off, len);
        int rc = PSP_SWrite(p, PSP_PORTID(peer, portno), buf, len);
        if (rc) {
            fprintf(stderr, "writer: write %u (%u bytes at %llu): %s\n", writes, len,
                    (unsigned long long)off, PSP_StrError(rc));
            return 2;
        }
        off += len;
        writes++;
    }
    /* The reader's acknowledgement comes back on our stream: its peer is us. */
    char ack = 0;
    int n = PSP_SRead(p, &ack, 1, 60000);
    if (n != 1 || ack != 'k') {
        fprintf(stderr, "writer: ack read %d (%c)\n", n, ack);
        return 2;
    }
    free(buf);
    PSP_ClosePort(p);
    return 0;
}

TEST(s_random_write_sizes_vs_random_read_sizes_byte_exact)
{
    uint64_t seed = th_seed(20240601);
    ready_make();
    pid_t pid = fork();
    if (pid == 0)
        _exit(s_random_writer(seed, 201));
    as_receiver();
    PSP_Port *p = open_port(201, PSP_PORT_S);
    ready_post(1);
    uint64_t total = s_total(seed), off = 0, st = seed ^ 0x5555;
    uint8_t *buf = malloc(S_READ_MAX);
    unsigned reads = 0, partial = 0, joined = 0;
    while (off < total) {
        uint32_t ask = read_size(&st, S_READ_MAX);
        int n = PSP_SRead(p, buf, ask, 30000);
        REQUIRE(n > 0, "read %u at %llu: %d (%s)", reads, (unsigned long long)off, n,
                PSP_StrError(n));
        REQUIRE((uint32_t)n <= ask, "read %u returned %d > %u", reads, n, ask);
        uint32_t bad = scheck(buf, 7, off, (uint32_t)n);
        REQUIRE(bad == 0, "stream byte %llu wrong (read %u of %d bytes)",
                (unsigned long long)(off + bad - 1), reads, n);
        off += (uint64_t)n;
        reads++;
        partial += (uint32_t)n < ask;
        joined += (uint32_t)n > S_WRITE_MAX; /* only possible across write boundaries */
    }
    CHECK_EQ_U64(off, total);
    printf("# %u reads (%u partial, %u longer than any write) for %llu bytes\n", reads, partial,
           joined, (unsigned long long)total);
    CHECK_GT_U64(partial, 0);
    CHECK_EQ_I64(PSP_SRead(p, buf, 100, 200), -ETIMEDOUT); /* nothing more, nothing doubled */
    PSP_PortId peer = 0;
    CHECK_EQ_I64(PSP_SGetPeer(p, &peer), 1);
    CHECK_OK(PSP_SWrite(p, peer, "k", 1));
    CHECK_EQ_I64(reap(pid), 0);
    free(buf);
    PSP_ClosePort(p);
}

/* ---- port-S: a read returns what is there; the rest stays for the next ---- */

static int partial_writer(int go_fd)
{
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_S);
    PSP_PortId dst = PSP_PORTID(peer, 202);
    ready_wait();
    static uint8_t buf[50000];
    sfill(buf, 3, 0, 100);
    if (PSP_SWrite(p, dst, buf, 100))
        return 2;
    char c;
    if (read(go_fd, &c, 1) != 1)
        return 4;
    for (uint32_t w = 0; w < 3; w++) {
        sfill(buf, 3, 100 + 100 * w, 100);
        if (PSP_SWrite(p, dst, buf, 100))
            return 2;
    }
    sfill(buf, 3, 400, sizeof buf); /* above PSP_LOCAL_DIRECT: copied by the reader */
    if (PSP_SWrite(p, dst, buf, sizeof buf))
        return 2;
    char ack = 0;
    if (PSP_SRead(p, &ack, 1, 60000) != 1 || ack != 'k')
        return 5;
    PSP_ClosePort(p);
    return 0;
}

TEST(s_read_returns_what_is_there_and_keeps_the_rest)
{
    int go[2];
    REQUIRE(pipe(go) == 0, "pipe");
    ready_make();
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        _exit(partial_writer(go[0]));
    }
    close(go[0]);
    as_receiver();
    PSP_Port *p = open_port(202, PSP_PORT_S);
    ready_post(1);
    static uint8_t buf[60000];
    /* Only the first write exists: a larger read returns its 100 bytes without waiting. */
    CHECK_EQ_I64(PSP_SRead(p, buf, sizeof buf, 10000), 100);
    CHECK_EQ_U64(scheck(buf, 3, 0, 100), 0);
    REQUIRE(write(go[1], "g", 1) == 1, "pipe");
    REQUIRE(wait_queued(p, 0, 3), "the three 100-byte writes did not arrive");
    /* Partial reads of one write, then a read joining the rest of it with the next writes. */
    CHECK_EQ_I64(PSP_SRead(p, buf, 30, 1000), 30);
    CHECK_EQ_U64(scheck(buf, 3, 100, 30), 0);
    CHECK_EQ_I64(PSP_SRead(p, buf, 1, 1000), 1);
    CHECK_EQ_U64(scheck(buf, 3, 130, 1), 0);
    CHECK_EQ_I64(PSP_SRead(p, buf, 249, 1000), 249);
    CHECK_EQ_U64(scheck(buf, 3, 131, 249), 0);
    /* The rest: 20 bytes of the third write and the 50000-byte one, in any pieces. */
    uint64_t off = 380;
    while (off < 50400) {
        int n = PSP_SRead(p, buf, 7000, 10000);
        REQUIRE(n > 0, "read at %llu: %d", (unsigned long long)off, n);
        CHECK_EQ_U64(scheck(buf, 3, off, (uint32_t)n), 0);
        off += (uint64_t)n;
    }
    CHECK_EQ_U64(off, 50400);
    uint64_t t0 = now_ms();
    CHECK_EQ_I64(PSP_SRead(p, buf, 10, 0), -ETIMEDOUT); /* 0: only look */
    CHECK_LT_U64(now_ms() - t0, 100);
    PSP_PortId peer = 0;
    CHECK_EQ_I64(PSP_SGetPeer(p, &peer), 1);
    CHECK_OK(PSP_SWrite(p, peer, "k", 1));
    CHECK_EQ_I64(reap(pid), 0);
    PSP_ClosePort(p);
}

/* ---- port-S: timeouts, a sleeping reader woken, argument errors ---- */

TEST(s_read_timeout_and_sleeping_reader_is_woken)
{
    ready_make();
    pid_t pid = fork();
    if (pid == 0) { /* writes 5 bytes 500 ms after the reader's port is open */
        uint16_t peer = as_sender();
        PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_S);
        ready_wait();
        usleep(500000);
        _exit(PSP_SWrite(p, PSP_PORTID(peer, 203), "hello", 5) ? 2 : 0);
    }
    as_receiver();
    PSP_Port *p = open_port(203, PSP_PORT_S);
    char buf[16];
    uint64_t t0 = now_ms();
    CHECK_EQ_I64(PSP_SRead(p, buf, sizeof buf, 100), -ETIMEDOUT);
    uint64_t dt = now_ms() - t0;
    CHECK_GE_U64(dt, 95);
    CHECK_LT_U64(dt, 1000);
    CHECK_EQ_I64(PSP_SGetPeer(p, NULL), 0); /* nothing came, nothing written */
    /* Blocked without limit, the reader sleeps (little CPU) until the data wakes it. */
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    ready_post(1);
    t0 = now_ms();
    CHECK_EQ_I64(PSP_SRead(p, buf, sizeof buf, -1), 5);
    dt = now_ms() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    uint64_t cpu_ms =
        (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000u + (uint64_t)((c1.tv_nsec - c0.tv_nsec) / 1000000);
    CHECK_EQ_MEM(buf, "hello", 5);
    CHECK_GE_U64(dt, 400);
    printf("# woken after %llu ms, %llu ms of CPU\n", (unsigned long long)dt,
           (unsigned long long)cpu_ms);
    CHECK_LT_U64(cpu_ms, dt / 4);
    CHECK_EQ_I64(PSP_SRead(p, buf, 0, 0), -EINVAL);
    PSP_Port *d = open_port(PSP_ANYPORT, PSP_PORT_D);
    CHECK_EQ_I64(PSP_SRead(d, buf, sizeof buf, 0), -EPROTOTYPE);
    CHECK_EQ_I64(PSP_SWrite(d, PSP_GetPortId(p), "x", 1), -EPROTOTYPE);
    CHECK_EQ_I64(PSP_MRead(p, &(PSP_PortId){0}, buf, sizeof buf, 0), -EPROTOTYPE);
    CHECK_EQ_I64(reap(pid), 0);
    PSP_ClosePort(d);
    PSP_ClosePort(p);
}

/* ---- port-S: the peer, and a second writer refused ---- */

#define A_FIRST  3000
#define A_SECOND 70000 /* above PSP_LOCAL_DIRECT */

/* Writer A: the peer.  Writes A_FIRST bytes, then (after B is done) A_SECOND more. */
static int peer_writer(int a_go, int a_go_w)
{
    close(a_go_w);
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_S);
    PSP_PortId dst = PSP_PORTID(peer, 204);
    ready_wait();
    static uint8_t buf[A_SECOND];
    sfill(buf, 11, 0, A_FIRST);
    int rc = PSP_SWrite(p, dst, buf, A_FIRST);
    if (rc) {
        fprintf(stderr, "A: first write: %s\n", PSP_StrError(rc));
        return 2;
    }
    PSP_PortId got = 0;
    if (PSP_SGetPeer(p, &got) != 1 || got != dst)
        return 6; /* our first write fixed our peer */
    if (PSP_SWrite(p, PSP_PORTID(peer, 999), "x", 1) != -EISCONN)
        return 7; /* a port-S writes to its peer only */
    char c;
    if (read(a_go, &c, 1) != 1)
        return 4;
    sfill(buf, 11, A_FIRST, A_SECOND);
    if (PSP_SWrite(p, dst, buf, A_SECOND))
        return 2;
    char ack[2] = {0};
    if (sread_all(p, (uint8_t *)ack, 2, 60000) || memcmp(ack, "ok", 2))
        return 5; /* the reader answers its peer */
    if (PSP_GetPortError(p, NULL) != 0)
        return 8; /* the peer's data was never refused */
    PSP_ClosePort(p);
    return 0;
}

/* Writer B: writes after A became the peer; both writes are refused. */
static int second_writer(int b_go, int b_go_w, int a_go)
{
    close(b_go_w);
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_S);
    PSP_PortId dst = PSP_PORTID(peer, 204), about = 0;
    char c;
    if (read(b_go, &c, 1) != 1)
        return 4;
    static uint8_t buf[A_SECOND];
    memset(buf, 'B', sizeof buf);
    int rc = PSP_SWrite(p, dst, buf, 500); /* small: handed over, refused later */
    if (rc) {
        fprintf(stderr, "B: small write: %s\n", PSP_StrError(rc));
        return 2;
    }
    rc = wait_port_error(p, &about);
    if (rc != -ECONNREFUSED || about != dst) {
        fprintf(stderr, "B: port error %d (%s) about %#x, expected -ECONNREFUSED about %#x\n", rc,
                PSP_StrError(rc), about, dst);
        return 9;
    }
    /* A large write: locally the reader copies it, so its refusal is the write's result. */
    rc = PSP_SWrite(p, dst, buf, sizeof buf);
    if (rc == 0)
        rc = wait_port_error(p, &about);
    if (rc != -ECONNREFUSED) {
        fprintf(stderr, "B: large write refused with %d (%s)\n", rc, PSP_StrError(rc));
        return 10;
    }
    if (write(a_go, "g", 1) != 1)
        return 4;
    PSP_ClosePort(p);
    return 0;
}

TEST(s_first_writer_is_the_peer_second_writer_refused)
{
    int a_go[2], b_go[2];
    REQUIRE(pipe(a_go) == 0 && pipe(b_go) == 0, "pipe");
    ready_make();
    pid_t a = fork();
    if (a == 0)
        _exit(peer_writer(a_go[0], a_go[1]));
    pid_t b = fork();
    if (b == 0)
        _exit(second_writer(b_go[0], b_go[1], a_go[1]));
    as_receiver();
    PSP_Port *p = open_port(204, PSP_PORT_S);
    ready_post(1);
    static uint8_t buf[A_FIRST + A_SECOND];
    CHECK_OK(sread_all(p, buf, A_FIRST, 10000));
    CHECK_EQ_U64(scheck(buf, 11, 0, A_FIRST), 0);
    PSP_PortId peer = 0;
    CHECK_EQ_I64(PSP_SGetPeer(p, &peer), 1);
    CHECK_EQ_I64(PSP_SWrite(p, PSP_PORTID(PSP_GetNodeID(), 999), "x", 1), -EISCONN);
    REQUIRE(write(b_go[1], "g", 1) == 1, "pipe");
    /* Keep reading: B's data is refused on the way, only A's second write is read. */
    uint64_t off = A_FIRST;
    while (off < A_FIRST + A_SECOND) {
        int n = PSP_SRead(p, buf, sizeof buf, 30000);
        REQUIRE(n > 0, "read at %llu: %d (%s)", (unsigned long long)off, n, PSP_StrError(n));
        uint32_t bad = scheck(buf, 11, off, (uint32_t)n);
        REQUIRE(bad == 0, "stream byte %llu is %#x (B's data is 0x42)",
                (unsigned long long)(off + bad - 1), bad ? buf[bad - 1] : 0);
        off += (uint64_t)n;
    }
    CHECK_EQ_I64(PSP_SRead(p, buf, sizeof buf, 200), -ETIMEDOUT);
    CHECK_OK(PSP_SWrite(p, peer, "ok", 2));
    CHECK_EQ_I64(reap(b), 0);
    CHECK_EQ_I64(reap(a), 0);
    PSP_PortId still = 0;
    CHECK_EQ_I64(PSP_SGetPeer(p, &still), 1);
    CHECK_EQ_U64(still, peer);
    PSP_ClosePort(p);
}

/* ---- port-M: four interleaved streams ---- */

#define M_SENDERS   4
#define M_TOTAL     (2u << 20)
#define M_WRITE_MAX (64u << 10)

/* Stream of sender k: 4 bytes of k, then sbyte(20 + k, off). */
static uint8_t mbyte(uint32_t k, uint64_t off)
{
    return off < 4 ? (uint8_t)(k >> (8 * off)) : sbyte(20 + k, off);
}

static uint64_t m_total(uint64_t seed, uint32_t k)
{
    uint64_t st = seed + k, sum = 4;
    while (sum < M_TOTAL)
        sum += write_size(&st, M_WRITE_MAX);
    return sum;
}

static int m_writer(uint64_t seed, uint32_t k)
{
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_M);
    PSP_PortId dst = PSP_PORTID(peer, 205);
    ready_wait();
    uint8_t *buf = malloc(M_WRITE_MAX + 4);
    uint64_t st = seed + k, off = 0;
    uint32_t len = 4;
    while (off < M_TOTAL) {
        for (uint32_t j = 0; j < len; j++)
            buf[j] = mbyte(k, off + j);
        int rc = PSP_MWrite(p, dst, buf, len);
        if (rc) {
            fprintf(stderr, "writer %u: write at %llu: %s\n", k, (unsigned long long)off,
                    PSP_StrError(rc));
            return 2;
        }
        off += len;
        len = write_size(&st, M_WRITE_MAX);
    }
    PSP_PortId from = 0;
    char ack = 0;
    if (PSP_MRead(p, &from, &ack, 1, 60000) != 1 || ack != 'k' || from != dst)
        return 5; /* the reader answers on our port-M */
    free(buf);
    PSP_ClosePort(p);
    return 0;
}

TEST(m_four_senders_interleaved_streams_read_in_order_with_src)
{
    uint64_t seed = th_seed(777);
    ready_make();
    pid_t kids[M_SENDERS];
    for (uint32_t k = 0; k < M_SENDERS; k++) {
        kids[k] = fork();
        if (kids[k] == 0)
            _exit(m_writer(seed, k));
    }
    as_receiver();
    PSP_Port *p = open_port(205, PSP_PORT_M);
    ready_post(M_SENDERS);
    struct {
        PSP_PortId src;
        uint64_t off;
        uint32_t k;
    } s[M_SENDERS];
    unsigned ns = 0, reads = 0, switches = 0, done = 0;
    PSP_PortId last = 0;
    uint64_t st = seed ^ 0xabc;
    uint8_t *buf = malloc(100000);
    while (done < M_SENDERS) {
        PSP_PortId src = 0;
        uint32_t ask = read_size(&st, 100000);
        int n = PSP_MRead(p, &src, buf, ask, 30000);
        REQUIRE(n > 0 && (uint32_t)n <= ask, "read %u: %d (%s)", reads, n, PSP_StrError(n));
        unsigned j = 0;
        while (j < ns && s[j].src != src)
            j++;
        if (j == ns) {
            REQUIRE(ns < M_SENDERS, "a fifth sender %#x", src);
            s[ns].src = src;
            s[ns].off = 0;
            s[ns].k = 0;
            ns++;
        }
        for (uint32_t b = 0; b < (uint32_t)n; b++) {
            uint64_t off = s[j].off + b;
            if (off < 4) {
                s[j].k |= (uint32_t)buf[b] << (8 * off);
                continue;
            }
            REQUIRE(s[j].k < M_SENDERS, "stream of %#x starts with sender number %u", src, s[j].k);
            REQUIRE(buf[b] == mbyte(s[j].k, off), "stream of sender %u: byte %llu wrong (read %u)",
                    s[j].k, (unsigned long long)off, reads);
        }
        s[j].off += (uint64_t)n;
        REQUIRE(s[j].off <= m_total(seed, s[j].k) || s[j].off < 4,
                "sender %u: more bytes than written", s[j].k);
        if (s[j].off >= 4 && s[j].off == m_total(seed, s[j].k))
            done++;
        switches += src != last;
        last = src;
        reads++;
    }
    printf("# %u reads, the stream changed %u times\n", reads, switches);
    CHECK_EQ_U64(ns, M_SENDERS);
    uint32_t seen = 0;
    for (unsigned j = 0; j < ns; j++)
        seen |= 1u << s[j].k;
    CHECK_EQ_U64(seen, (1u << M_SENDERS) - 1);
    PSP_PortId src = 0;
    CHECK_EQ_I64(PSP_MRead(p, &src, buf, 100, 200), -ETIMEDOUT);
    for (unsigned j = 0; j < ns; j++)
        CHECK_OK(PSP_MWrite(p, s[j].src, "k", 1));
    for (uint32_t k = 0; k < M_SENDERS; k++)
        CHECK_EQ_I64(reap(kids[k]), 0);
    free(buf);
    PSP_ClosePort(p);
}

/* ---- port-M: one sender's stream while the others stay queued ---- */

#define Q_SENDERS 3
static const uint32_t q_lens[3] = {1000, 20000, 7};
#define Q_TOTAL (1000 + 20000 + 7)

struct q_hello {
    uint32_t k;
    PSP_PortId id;
};

static int q_writer(uint32_t k, int hello_fd, int go_fd)
{
    uint16_t peer = as_sender();
    PSP_Port *p = open_port(PSP_ANYPORT, PSP_PORT_M);
    PSP_PortId dst = PSP_PORTID(peer, 206);
    struct q_hello h = {k, PSP_GetPortId(p)};
    if (write(hello_fd, &h, sizeof h) != sizeof h)
        return 4;
    char c;
    if (read(go_fd, &c, 1) != 1)
        return 4;
    static uint8_t buf[20000];
    uint64_t off = 0;
    for (int w = 0; w < 3; w++) {
        sfill(buf, 30 + k, off, q_lens[w]);
        if (PSP_MWrite(p, dst, buf, q_lens[w]))
            return 2;
        off += q_lens[w];
    }
    PSP_PortId from = 0;
    if (PSP_MRead(p, &from, &c, 1, 60000) != 1 || c != 'k')
        return 5;
    PSP_ClosePort(p);
    return 0;
}

TEST(m_read_from_one_sender_others_stay_queued_in_order)
{
    int hello[2], go[Q_SENDERS][2];
    REQUIRE(pipe(hello) == 0, "pipe");
    for (int k = 0; k < Q_SENDERS; k++)
        REQUIRE(pipe(go[k]) == 0, "pipe");
    pid_t kids[Q_SENDERS];
    for (uint32_t k = 0; k < Q_SENDERS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            for (int j = 0; j < Q_SENDERS; j++)
                close(go[j][1]);
            _exit(q_writer(k, hello[1], go[k][0]));
        }
    }
    as_receiver();
    PSP_Port *p = open_port(206, PSP_PORT_M);
    PSP_PortId id[Q_SENDERS] = {0};
    for (int k = 0; k < Q_SENDERS; k++) {
        struct q_hello h;
        REQUIRE(read(hello[0], &h, sizeof h) == sizeof h && h.k < Q_SENDERS, "hello");
        id[h.k] = h.id;
    }
    /* Senders 0, 1, 2 one after the other: each one's three writes are queued before the
     * next one writes, so the arrival order is 0, 1, 2. */
    for (int k = 0; k < Q_SENDERS; k++) {
        REQUIRE(write(go[k][1], "g", 1) == 1, "pipe");
        REQUIRE(wait_queued(p, id[k], 3), "sender %d's writes did not arrive", k);
    }
    static uint8_t buf[Q_TOTAL + 100];
    /* Sender 2's stream, the last to arrive, first: all of it. */
    uint64_t off = 0;
    while (off < Q_TOTAL) {
        int n = PSP_MReadFrom(p, id[2], buf, sizeof buf, 10000);
        REQUIRE(n > 0, "read from 2 at %llu: %d", (unsigned long long)off, n);
        CHECK_EQ_U64(scheck(buf, 32, off, (uint32_t)n), 0);
        off += (uint64_t)n;
    }
    CHECK_EQ_U64(off, Q_TOTAL);
    CHECK_EQ_I64(PSP_MReadFrom(p, id[2], buf, sizeof buf, 50), -ETIMEDOUT);
    /* Ten bytes of sender 1's stream. */
    CHECK_EQ_I64(PSP_MReadFrom(p, id[1], buf, 10, 1000), 10);
    CHECK_EQ_U64(scheck(buf, 31, 0, 10), 0);
    /* Any stream: sender 0's arrived first; all of its three writes join in one read. */
    PSP_PortId src = 0;
    CHECK_EQ_I64(PSP_MRead(p, &src, buf, sizeof buf, 1000), Q_TOTAL);
    CHECK_EQ_U64(src, id[0]);
    CHECK_EQ_U64(scheck(buf, 30, 0, Q_TOTAL), 0);
    /* Then sender 1's, from where the ten bytes stopped. */
    off = 10;
    while (off < Q_TOTAL) {
        src = 0;
        int n = PSP_MRead(p, &src, buf, 4096, 1000);
        REQUIRE(n > 0, "read at %llu: %d", (unsigned long long)off, n);
        CHECK_EQ_U64(src, id[1]);
        CHECK_EQ_U64(scheck(buf, 31, off, (uint32_t)n), 0);
        off += (uint64_t)n;
    }
    CHECK_EQ_U64(off, Q_TOTAL);
    CHECK_EQ_I64(PSP_MRead(p, &src, buf, sizeof buf, 100), -ETIMEDOUT);
    for (int k = 0; k < Q_SENDERS; k++)
        CHECK_OK(PSP_MWrite(p, id[k], "k", 1));
    for (int k = 0; k < Q_SENDERS; k++)
        CHECK_EQ_I64(reap(kids[k]), 0);
    PSP_ClosePort(p);
}

/* ---- writes to a port of another kind ---- */

/* The error of a write to dst: at once (local) or through the port error (remote). */
static int write_error(PSP_Port *p, int stream_kind, PSP_PortId dst, PSP_PortId *about)
{
    int rc =
        stream_kind == PSP_PORT_S ? PSP_SWrite(p, dst, "xyz", 3) : PSP_MWrite(p, dst, "xyz", 3);
    *about = dst;
    if (rc == 0 && peer_is_remote())
        rc = wait_port_error(p, about);
    return rc;
}

TEST(writes_to_a_port_of_another_kind_or_no_port_are_refused)
{
    int ready[2], hold[2], verdict[2];
    REQUIRE(pipe(ready) == 0 && pipe(hold) == 0 && pipe(verdict) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) { /* holds ports 210 (D), 211 (S), 212 (M) on the peer, then checks them */
        close(hold[1]);
        close(ready[0]);
        as_receiver();
        PSP_Port *d = open_port(210, PSP_PORT_D);
        PSP_Port *s = open_port(211, PSP_PORT_S);
        PSP_Port *m = open_port(212, PSP_PORT_M);
        char c = 'y';
        if (write(ready[1], &c, 1) != 1 || read(hold[0], &c, 1) < 0)
            _exit(4);
        /* Nothing refused may have been queued. */
        char buf[16];
        PSP_PortId src;
        PSP_MsgInfo info;
        char v = 'y';
        if (PSP_IProbe(d, NULL, NULL, &info) != 0)
            v = 'd';
        if (PSP_SRead(s, buf, sizeof buf, 100) != -ETIMEDOUT || PSP_SGetPeer(s, NULL) != 0)
            v = 's';
        if (PSP_MRead(m, &src, buf, sizeof buf, 100) != -ETIMEDOUT)
            v = 'm';
        if (write(verdict[1], &v, 1) != 1)
            _exit(4);
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char c = 0;
    REQUIRE(read(ready[0], &c, 1) == 1 && c == 'y', "holder could not open its ports");
    uint16_t peer = as_sender();
    PSP_PortId about = 0;
    PSP_Port *s1 = open_port(PSP_ANYPORT, PSP_PORT_S);
    CHECK_EQ_I64(write_error(s1, PSP_PORT_S, PSP_PORTID(peer, 210), &about), -EPROTOTYPE);
    CHECK_EQ_U64(about, PSP_PORTID(peer, 210));
    PSP_Port *s2 = open_port(PSP_ANYPORT, PSP_PORT_S);
    CHECK_EQ_I64(write_error(s2, PSP_PORT_S, PSP_PORTID(peer, 212), &about), -EPROTOTYPE);
    CHECK_EQ_U64(about, PSP_PORTID(peer, 212));
    PSP_Port *s3 = open_port(PSP_ANYPORT, PSP_PORT_S);
    CHECK_EQ_I64(write_error(s3, PSP_PORT_S, PSP_PORTID(peer, 999), &about), -ECONNREFUSED);
    CHECK_EQ_U64(about, PSP_PORTID(peer, 999));
    PSP_Port *m = open_port(PSP_ANYPORT, PSP_PORT_M);
    CHECK_EQ_I64(write_error(m, PSP_PORT_M, PSP_PORTID(peer, 211), &about), -EPROTOTYPE);
    CHECK_EQ_U64(about, PSP_PORTID(peer, 211));
    CHECK_EQ_I64(write_error(m, PSP_PORT_M, PSP_PORTID(peer, 210), &about), -EPROTOTYPE);
    CHECK_EQ_U64(about, PSP_PORTID(peer, 210));
    CHECK_EQ_I64(PSP_GetPortError(m, NULL), 0); /* each reported once */
    /* A port-D cannot reach a stream port either, nor write as a stream. */
    PSP_Port *d = open_port(PSP_ANYPORT, PSP_PORT_D);
    int rc = PSP_Send(d, PSP_PORTID(peer, 211), NULL, 0, "x", 1);
    if (rc == 0 && peer_is_remote())
        rc = wait_port_error(d, NULL);
    CHECK_EQ_I64(rc, -EPROTOTYPE);
    CHECK_EQ_I64(PSP_SWrite(d, PSP_PORTID(peer, 211), "x", 1), -EPROTOTYPE);
    CHECK_EQ_I64(PSP_MWrite(s1, PSP_PORTID(peer, 212), "x", 1), -EPROTOTYPE);
    CHECK_EQ_I64(PSP_SWrite(m, PSP_PORTID(peer, 211), "x", 1), -EPROTOTYPE);
    PSP_Port *s4 = open_port(PSP_ANYPORT, PSP_PORT_S); /* s1's peer may be fixed (remote) */
    CHECK_EQ_I64(PSP_SWrite(s4, PSP_PORTID(1000, 5), "x", 1), -EHOSTUNREACH);
    CHECK_EQ_I64(PSP_SGetPeer(s4, NULL), 0); /* a failed write fixes nothing */
    close(hold[1]);
    char v = 0;
    CHECK(read(verdict[0], &v, 1) == 1 && v == 'y', "holder's ports got data (%c)", v);
    CHECK_EQ_I64(reap(pid), 0);
    PSP_ClosePort(d);
    PSP_ClosePort(m);
    PSP_ClosePort(s4);
    PSP_ClosePort(s3);
    PSP_ClosePort(s2);
    PSP_ClosePort(s1);
}

TEST_MAIN()
