/*
 * pulc_stress — port-D traffic programs for the all-to-all and kill tests
 * (test/integration/pulc-alltoall, test/integration/pulc-kill).
 *
 *   pulc_stress alltoall RANK M PEERS GO
 *       open port 200+RANK, print "ready", wait until file GO exists, then send M messages to
 *       every other rank (PEERS: node:port,node:port,... indexed by rank) while receiving the
 *       M messages of every other rank; every message is verified (sender, sequence, length,
 *       content); exit 0 when all arrived exactly once and in order per sender.
 *   pulc_stress sink PORT
 *       receive on PORT until the steady sender's stop message: the steady sender's messages
 *       (header id 0) must arrive in order and intact; victims' messages (id 1) must be intact
 *       or aborted (-ECONNRESET: their sender died).  Prints counts, the longest gap between
 *       two steady messages and the longest time without any message, each less the CPU time
 *       the host stole from the VM meanwhile.
 *   pulc_stress steady NODE PORT SECONDS
 *       send messages of mixed sizes to NODE:PORT for SECONDS, then the stop message.
 *   pulc_stress victim NODE PORT
 *       send messages of mixed sizes (up to 1 MiB) to NODE:PORT until killed.
 * Exit: 0 ok, 1 failure (message on stderr), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pulc.h"

struct hdr {
    uint32_t id;  /* alltoall: sender rank; sink: 0 steady, 1 victim, 2 stop */
    uint32_t seq; /* per sender */
    uint32_t len;
};

static uint8_t pat(uint32_t id, uint32_t seq, uint32_t k)
{
    return (uint8_t)((id * 131u + seq * 2654435761u + k * 7u + (k >> 9)) & 0xffu);
}

static void fill(uint8_t *b, uint32_t id, uint32_t seq, uint32_t len)
{
    for (uint32_t k = 0; k < len; k++)
        b[k] = pat(id, seq, k);
}

static int bad_content(const uint8_t *b, uint32_t id, uint32_t seq, uint32_t len)
{
    for (uint32_t k = 0; k < len; k++)
        if (b[k] != pat(id, seq, k))
            return 1;
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static PSP_Port *open_or_die(int number)
{
    PSP_Port *p = NULL;
    int rc = PSP_OpenPort(number, PSP_PORT_D, &p);
    if (rc) {
        fprintf(stderr, "open port %d: %s\n", number, PSP_StrError(rc));
        exit(1);
    }
    return p;
}

/* ---- all-to-all ---- */

#define MAXRANKS 64
#define A2A_MAX  70000u

static uint32_t a2a_len(uint32_t from, uint32_t to, uint32_t seq)
{
    return (from * 7919u + to * 104729u + seq * 3181u) % A2A_MAX;
}

static int alltoall(int rank, uint32_t m, const char *peers, const char *go)
{
    PSP_PortId ids[MAXRANKS];
    int n = 0;
    for (const char *s = peers; *s && n < MAXRANKS;) {
        unsigned node, port;
        if (sscanf(s, "%u:%u", &node, &port) != 2)
            return 2;
        ids[n++] = PSP_PORTID(node, port);
        s = strchr(s, ',');
        if (!s)
            break;
        s++;
    }
    if (rank < 0 || rank >= n)
        return 2;
    PSP_Port *p = open_or_die(200 + rank);
    printf("ready\n");
    fflush(stdout);
    struct stat st;
    double t0 = now_ms();
    while (stat(go, &st) != 0) {
        if (now_ms() - t0 > 60000) {
            fprintf(stderr, "rank %d: no go after 60 s\n", rank);
            return 1;
        }
        usleep(2000);
    }
    uint8_t *sbuf[MAXRANKS], *rbuf = malloc(A2A_MAX);
    PSP_Request sreq[MAXRANKS], rreq;
    struct hdr sh[MAXRANKS], rh;
    uint32_t next_send[MAXRANKS] = {0}, next_recv[MAXRANKS] = {0};
    uint64_t expect = (uint64_t)(n - 1) * m, got = 0;
    for (int r = 0; r < n; r++) {
        sbuf[r] = malloc(A2A_MAX);
        memset(&sreq[r], 0, sizeof sreq[r]); /* a zeroed request counts as complete */
    }
    int posted = 0, sends_left = n - 1;
    t0 = now_ms();
    while (got < expect || sends_left > 0) {
        for (int r = 0; r < n; r++) { /* one message in flight per peer */
            if (r == rank || next_send[r] > m || !PSP_Test(&sreq[r]))
                continue;
            if (sreq[r].error) {
                fprintf(stderr, "rank %d: send to rank %d failed: %s\n", rank, r,
                        strerror(-sreq[r].error));
                return 1;
            }
            if (next_send[r] == m) {
                next_send[r]++;
                sends_left--;
                continue;
            }
            uint32_t seq = next_send[r]++, len = a2a_len((uint32_t)rank, (uint32_t)r, seq);
            sh[r] = (struct hdr){(uint32_t)rank, seq, len};
            fill(sbuf[r], (uint32_t)rank, seq, len);
            int rc = PSP_ISend(p, ids[r], &sh[r], sizeof sh[r], sbuf[r], len, &sreq[r]);
            if (rc) {
                fprintf(stderr, "rank %d: send to rank %d: %s\n", rank, r, strerror(-rc));
                return 1;
            }
        }
        if (!posted && got < expect) {
            if (PSP_IReceive(p, &rh, sizeof rh, rbuf, A2A_MAX, NULL, NULL, &rreq))
                return 1;
            posted = 1;
        }
        if (posted && PSP_Test(&rreq)) {
            posted = 0;
            uint32_t from = rh.id;
            if (rreq.error || rreq.xlen != sizeof rh || from >= (uint32_t)n || (int)from == rank ||
                rh.seq != next_recv[from] || rh.len != a2a_len(from, (uint32_t)rank, rh.seq) ||
                rreq.len != rh.len || bad_content(rbuf, from, rh.seq, rh.len)) {
                fprintf(stderr,
                        "rank %d: bad message: error %d from rank %u seq %u (expected %u) len "
                        "%u/%u\n",
                        rank, rreq.error, from, rh.seq, from < MAXRANKS ? next_recv[from] : 0,
                        rreq.len, rh.len);
                return 1;
            }
            next_recv[from]++;
            got++;
        }
        if (now_ms() - t0 > 240000) {
            fprintf(stderr, "rank %d: %llu of %llu messages after 240 s\n", rank,
                    (unsigned long long)got, (unsigned long long)expect);
            return 1;
        }
    }
    /* Nothing more may come: a duplicate would show here. */
    PSP_MsgInfo info;
    usleep(200000);
    if (PSP_IProbe(p, NULL, NULL, &info)) {
        fprintf(stderr, "rank %d: an extra message from %08x after all arrived\n", rank, info.src);
        return 1;
    }
    printf("rank %d: sent %u and received %llu messages, all verified\n", rank, m * (n - 1),
           (unsigned long long)got);
    PSP_ClosePort(p);
    return 0;
}

/* ---- kill test: sink, steady sender, victim ---- */

/*
 * CPU time the host gave other guests instead of this VM's CPUs so far, in ms (the steal
 * column of /proc/stat, summed over the CPUs), or 0 where there is none to read.  Why: the
 * host of a busy VM takes a vCPU away for 100 ms at a time (seen in this test: one vCPU without
 * a single perf sample for 80 ms while the steady sender spun waiting on the other), and a
 * process of the stream on that vCPU then stalls it however the stack behaves.
 */
static double steal_ms(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return n == 8 && hz > 0 ? (double)v[7] * 1000.0 / (double)hz : 0;
}

#define SINK_MAX (1u << 20)

/*
 * Gaps between messages, judged less the CPU time the host stole from the VM meanwhile
 * (steal_ms).  A gap starts at the first message (before it the senders are still starting:
 * process, attach, port, connection, which a loaded machine makes slow).
 */
struct gaps {
    double last;          /* when the last message came (ms), < 0 before the first */
    double steal_at_last; /* steal_ms() as last read when it came */
    double longest;       /* the longest gap less steal */
    double longest_raw;   /* that gap as the clock saw it */
    double stolen;        /* steal within gaps over GAP_STEAL_MS, all together */
    uint64_t msgs, bytes; /* victims' messages and bytes since the last message */
    uint64_t longest_msgs, longest_bytes; /* ... in the longest gap */
};

/* Gaps longer than this read /proc/stat when they end; shorter ones count whole. */
#define GAP_STEAL_MS 20.0

/* A message came at t (ms) with steal_now the steal then. */
static void gap_end(struct gaps *g, double t, double steal_now)
{
    if (g->last >= 0) {
        double raw = t - g->last;
        double stolen = raw > GAP_STEAL_MS ? steal_now - g->steal_at_last : 0;
        g->stolen += stolen;
        if (raw - stolen > g->longest) {
            g->longest = raw - stolen;
            g->longest_raw = raw;
            g->longest_msgs = g->msgs;
            g->longest_bytes = g->bytes;
        }
    }
    g->last = t;
    g->steal_at_last = steal_now;
    g->msgs = g->bytes = 0;
}

static int sink(int portno)
{
    PSP_Port *p = open_or_die(portno);
    printf("ready\n");
    fflush(stdout);
    uint8_t *buf = malloc(SINK_MAX);
    uint32_t next = 0, victim_ok = 0, aborted = 0;
    /* steady: between two of the steady sender's messages (victims' traffic in between is
     * counted: the steady stream shares node 1's NIC connection with node 1's victims, so a
     * gap full of their bytes is queueing, one without any a stall); any: between two
     * messages of whoever sent them */
    struct gaps steady = {.last = -1}, any = {.last = -1};
    double start = now_ms(), first = 0;
    /* steal is read at most every 10 ms while messages flow (a read costs tens of
     * microseconds), and whenever a gap ends that may be judged less it */
    double steal_t = start, steal_now = steal_ms();
    for (;;) {
        struct hdr h;
        PSP_Request r;
        int rc = PSP_IReceive(p, &h, sizeof h, buf, SINK_MAX, NULL, NULL, &r);
        if (!rc)
            rc = PSP_Wait(&r, 5000);
        double t = now_ms();
        if (rc == -ETIMEDOUT) {
            fprintf(stderr, "sink: nothing for 5 s (steady message %u)\n", next);
            return 1;
        }
        int victim_aborted = rc == -ECONNRESET && h.id == 1; /* a victim died half way */
        if (rc && !victim_aborted) {
            fprintf(stderr, "sink: receive failed: %s (xlen %u)\n", strerror(-rc), r.xlen);
            return 1;
        }
        if (!rc && r.xlen != sizeof h) {
            fprintf(stderr, "sink: message without its header (xlen %u)\n", r.xlen);
            return 1;
        }
        if (!rc && h.id == 2)
            break;
        if (!rc && (h.len != r.len || bad_content(buf, h.id, h.seq, h.len))) {
            fprintf(stderr, "sink: message id %u seq %u len %u/%u corrupt\n", h.id, h.seq, h.len,
                    r.len);
            return 1;
        }
        if (t - steal_t >= 10 || (any.last >= 0 && t - any.last > GAP_STEAL_MS) ||
            (h.id == 0 && steady.last >= 0 && t - steady.last > GAP_STEAL_MS)) {
            steal_now = steal_ms();
            steal_t = t;
        }
        gap_end(&any, t, steal_now);
        if (h.id == 1) { /* a victim's message, whole or aborted */
            victim_aborted ? aborted++ : victim_ok++;
            steady.msgs++;
            steady.bytes += victim_aborted ? 0 : r.len;
            continue;
        }
        if (h.seq != next) {
            fprintf(stderr, "sink: steady message %u, expected %u\n", h.seq, next);
            return 1;
        }
        if (!next)
            first = t - start;
        next++;
        gap_end(&steady, t, steal_now);
    }
    printf("sink: steady %u messages in order (the first %.0f ms after the sink started), "
           "longest gap %.0f ms less steal (%.0f ms, %llu victims' messages and %llu bytes in "
           "it); longest time without any message %.0f ms less steal (%.0f ms); the host stole "
           "%.0f ms in all gaps over %.0f ms; victims %u intact, %u aborted\n",
           next, first, steady.longest, steady.longest_raw, (unsigned long long)steady.longest_msgs,
           (unsigned long long)steady.longest_bytes, any.longest, any.longest_raw, steady.stolen,
           GAP_STEAL_MS, victim_ok, aborted);
    PSP_ClosePort(p);
    return 0;
}

static uint32_t mixed_len(uint32_t seq, uint32_t max)
{
    static const uint32_t sizes[] = {8, 1000, 4076, 4077, 30000, 100000, 300000, 1u << 20};
    uint32_t l = sizes[(seq * 5u + seq / 3u) % 8];
    return l < max ? l : max;
}

static int sender(uint16_t node, int portno, uint32_t id, double seconds)
{
    PSP_Port *p = open_or_die(PSP_ANYPORT);
    uint8_t *buf = malloc(SINK_MAX);
    double t0 = now_ms();
    uint32_t seq = 0;
    for (; seconds < 0 || now_ms() - t0 < seconds * 1000; seq++) {
        uint32_t len = mixed_len(seq, id == 0 ? 200000 : SINK_MAX);
        struct hdr h = {id, seq, len};
        fill(buf, id, seq, len);
        int rc = PSP_Send(p, PSP_PORTID(node, portno), &h, sizeof h, buf, len);
        if (!rc)
            rc = PSP_GetPortError(p, NULL);
        if (rc) {
            fprintf(stderr, "sender %u: message %u: %s\n", id, seq, strerror(-rc));
            return 1;
        }
    }
    struct hdr stop = {2, seq, 0};
    if (PSP_Send(p, PSP_PORTID(node, portno), &stop, sizeof stop, NULL, 0))
        return 1;
    double t = now_ms();
    while (now_ms() - t < 500)
        PSP_Progress(); /* let the stop message go out before we detach */
    printf("steady: sent %u messages\n", seq);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && !strcmp(argv[1], "alltoall"))
        return alltoall(atoi(argv[2]), (uint32_t)atoi(argv[3]), argv[4], argv[5]);
    if (argc == 3 && !strcmp(argv[1], "sink"))
        return sink(atoi(argv[2]));
    if (argc == 5 && !strcmp(argv[1], "steady"))
        return sender((uint16_t)atoi(argv[2]), atoi(argv[3]), 0, atof(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "victim"))
        return sender((uint16_t)atoi(argv[2]), atoi(argv[3]), 1, -1);
    fprintf(stderr,
            "usage: %s alltoall RANK M PEERS GO | sink PORT | steady NODE PORT SECONDS "
            "| victim NODE PORT\n",
            argv[0]);
    return 2;
}
