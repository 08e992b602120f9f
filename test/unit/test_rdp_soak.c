/*
 * test_rdp_soak.c — four NICs all-to-all on the sim net, over 200,000 DATA packets per
 * scenario, under each kind of fault the link can inject.
 *
 * Every message carries its sender, destination, number and a content derived from them;
 * each host verifies that every message arrives exactly once, in order per sender, intact
 * (rdp_fixture.c, cluster_drain).  Then the NIC counters must agree with each other and with
 * the sim net's statistics, and the counters of the fault at hand must show it was handled:
 *
 *   none          no retransmission, timeout, CRC error, duplicate, gap or NOBUF at all
 *   loss 5%/20%   gaps NACKed, data retransmitted, timeouts (tail losses)
 *   dup 10%       duplicates re-ACKed (rx_dup), duplicate ACKs ignored (ack_dup); nothing is
 *                 lost or reordered, so retransmissions are not required
 *   reorder 10%   gaps NACKed, go-back-N retransmissions
 *   corrupt 1%    every corrupted frame refused (crc_errors, malformed), data retransmitted
 *   ack loss      only standalone ACK frames are lost.  Data flows one way only (node i to
 *                 node j > i), so no ACK rides on reverse DATA and every acknowledgement is
 *                 a standalone ACK frame that the fault may hit; recovery is by timeout and
 *                 re-ACK of the duplicates
 *   nack loss     only NACK frames are lost; reordering (5%) creates the gaps that are NACKed
 *   mixed         loss, duplication, reordering and corruption together
 *
 * Fixed seeds (TEST_SEED overrides); each scenario is its own test.  The throughput of the
 * simulation is printed as a comment.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "rdp_fixture.h"

#define SOAK_NODES 4
#define PER_PAIR   16700u /* x 12 ordered pairs = 200,400 */
#define MAX_ROUNDS 4000000ull
#define ROUND_NS   1000ull

struct soak {
    struct cluster cl;
    uint64_t total;
    struct mcp_sim_stats st;
    uint64_t pending;
    double wall;
};

static uint64_t cnt(struct soak *s, const char *name)
{
    return cluster_counter(&s->cl, name);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run one scenario to completion and check what holds for every scenario.  1 if it ran. */
/* Optional changes to the configuration of a scenario. */
struct tweak {
    uint16_t window, recv_slots, hostq_slots;
    unsigned drain_every;
};

static int soak_run_t(struct soak *s, const char *name, struct mcp_fault_cfg *f, uint64_t seed,
                      int one_way, const struct tweak *tw)
{
    struct mcp_config c;
    cfg_traffic(&c, SOAK_NODES);
    seed = th_seed(seed); /* TEST_SEED overrides: it seeds the faults and the NICs */
    c.seed = seed * 7919u + 1;
    if (tw && tw->window)
        c.window = tw->window;
    if (tw && tw->recv_slots)
        c.recv_slots = tw->recv_slots;
    if (tw && tw->hostq_slots)
        c.hostq_slots = tw->hostq_slots;
    f->seed = seed;

    memset(s, 0, sizeof(*s));
    if (!cluster_init(&s->cl, SOAK_NODES, &c, f, ROUND_NS, 200))
        return 0;
    if (tw && tw->drain_every)
        s->cl.drain_every = tw->drain_every;
    for (unsigned i = 0; i < SOAK_NODES; i++)
        for (unsigned j = 0; j < SOAK_NODES; j++)
            if (i != j && (!one_way || i < j)) {
                uint32_t n = one_way ? 2 * PER_PAIR : PER_PAIR;
                cluster_target(&s->cl, i, j, n);
                s->total += n;
            }

    double t0 = now_s();
    int done = cluster_run(&s->cl, MAX_ROUNDS);
    s->wall = now_s() - t0;
    mcp_sim_net_stats(s->cl.net, &s->st);
    s->pending = mcp_sim_net_pending(s->cl.net);

    printf("# soak %s: %llu packets delivered in %.2f s wall (%.0f packets/s), %llu rounds "
           "= %.1f ms virtual\n",
           name, (unsigned long long)s->cl.delivered, s->wall,
           s->wall > 0 ? (double)s->cl.delivered / s->wall : 0.0, (unsigned long long)s->cl.rounds,
           (double)(s->cl.rounds * ROUND_NS) / 1e6);
    printf("# soak %s: tx_data %llu tx_retx %llu timeouts %llu tx_ack %llu tx_nack %llu "
           "(nobuf %llu) rx_dup %llu rx_gap %llu ack_dup %llu nack_ignored %llu crc_errors %llu "
           "malformed %llu\n",
           name, (unsigned long long)cnt(s, "tx_data"), (unsigned long long)cnt(s, "tx_retx"),
           (unsigned long long)cnt(s, "timeouts"), (unsigned long long)cnt(s, "tx_ack"),
           (unsigned long long)cnt(s, "tx_nack"), (unsigned long long)cnt(s, "nack_nobuf"),
           (unsigned long long)cnt(s, "rx_dup"), (unsigned long long)cnt(s, "rx_gap"),
           (unsigned long long)cnt(s, "ack_dup"), (unsigned long long)cnt(s, "nack_ignored"),
           (unsigned long long)cnt(s, "crc_errors"), (unsigned long long)cnt(s, "malformed"));
    printf("# soak %s: sim sent %llu delivered %llu dropped %llu duplicated %llu corrupted "
           "%llu reordered %llu pending %llu\n",
           name, (unsigned long long)s->st.sent, (unsigned long long)s->st.delivered,
           (unsigned long long)s->st.dropped, (unsigned long long)s->st.duplicated,
           (unsigned long long)s->st.corrupted, (unsigned long long)s->st.reordered,
           (unsigned long long)s->pending);
    fflush(stdout);

    CHECK(done, "not finished after %llu rounds: %llu of %llu delivered",
          (unsigned long long)s->cl.rounds, (unsigned long long)s->cl.delivered,
          (unsigned long long)s->total);
    CHECK(s->cl.bad == 0, "%llu verification failures, first: %s", (unsigned long long)s->cl.bad,
          s->cl.why);
    CHECK_EQ_U64(s->cl.delivered, s->total);
    CHECK_GE_U64(s->cl.delivered, 200000);
    CHECK_EQ_U64(s->cl.errq[0] + s->cl.errq[1] + s->cl.errq[2] + s->cl.errq[3], 0);

    /* the firmware's view agrees with the hosts' */
    CHECK_EQ_U64(cnt(s, "tx_data"), s->total);   /* one first transmission per message */
    CHECK_EQ_U64(cnt(s, "rx_data"), s->total);   /* one acceptance per message */
    CHECK_EQ_U64(cnt(s, "delivered"), s->total); /* one move to the host queue per message */
    CHECK_EQ_U64(cnt(s, "send_errors"), 0);
    CHECK_EQ_U64(cnt(s, "peers_dead"), 0);
    CHECK_EQ_U64(cnt(s, "peer_resets"), 0);
    CHECK_EQ_U64(cnt(s, "wrong_dest"), 0);
    CHECK_EQ_U64(cnt(s, "errq_overflow"), 0);
    CHECK_EQ_U64(cnt(s, "ack_bad"), 0); /* the link never invents acknowledgements */
    /* ... and with the net's: every frame the NICs sent went onto the net, every frame the
     * net handed over was counted, and nothing vanished on the net */
    CHECK_EQ_U64(s->st.sent, cnt(s, "tx_data") + cnt(s, "tx_retx") + cnt(s, "tx_ack") +
                                 cnt(s, "tx_nack") + cnt(s, "tx_ctrl"));
    CHECK_EQ_U64(s->st.delivered, cnt(s, "rx_frames"));
    CHECK_EQ_U64(s->st.sent + s->st.duplicated, s->st.delivered + s->st.dropped + s->pending);
    /* a frame the NIC refuses was damaged on the net (corrupted) or is not ours */
    CHECK_LE_U64(cnt(s, "crc_errors") + cnt(s, "malformed"), s->st.corrupted);
    /* every NACK sent was for a gap or for lack of a buffer */
    CHECK_LE_U64(cnt(s, "tx_nack"), cnt(s, "rx_gap") + cnt(s, "nack_nobuf"));
    return 1;
}

static int soak_run(struct soak *s, const char *name, struct mcp_fault_cfg *f, uint64_t seed,
                    int one_way)
{
    return soak_run_t(s, name, f, seed, one_way, NULL);
}

static void soak_fini(struct soak *s)
{
    cluster_fini(&s->cl);
}

TEST(soak_no_faults)
{
    struct soak s;
    struct mcp_fault_cfg f = {0};
    if (soak_run(&s, "none", &f, 1001, 0)) {
        CHECK_EQ_U64(cnt(&s, "tx_retx"), 0);
        CHECK_EQ_U64(cnt(&s, "timeouts"), 0);
        CHECK_EQ_U64(cnt(&s, "crc_errors"), 0);
        CHECK_EQ_U64(cnt(&s, "malformed"), 0);
        CHECK_EQ_U64(cnt(&s, "rx_dup"), 0);
        CHECK_EQ_U64(cnt(&s, "rx_gap"), 0);
        CHECK_EQ_U64(cnt(&s, "tx_nack"), 0);
        CHECK_EQ_U64(cnt(&s, "nack_nobuf"), 0);
        CHECK_EQ_U64(cnt(&s, "stale"), 0);
        CHECK_EQ_U64(s.st.dropped, 0);
        CHECK_EQ_U64(s.st.sent, s.st.delivered + s.pending);
    }
    soak_fini(&s);
}

TEST(soak_loss_5)
{
    struct soak s;
    struct mcp_fault_cfg f = {.loss = 0.05};
    if (soak_run(&s, "loss 5%", &f, 1002, 0)) {
        CHECK_GT_U64(s.st.dropped, 0);
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "tx_nack"), 0);
        CHECK_GT_U64(cnt(&s, "rx_nack"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "timeouts"), 0);
        CHECK_EQ_U64(cnt(&s, "crc_errors"), 0);
    }
    soak_fini(&s);
}

TEST(soak_loss_20)
{
    struct soak s;
    struct mcp_fault_cfg f = {.loss = 0.20};
    if (soak_run(&s, "loss 20%", &f, 1003, 0)) {
        CHECK_GT_U64(s.st.dropped, 0);
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "tx_nack"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "timeouts"), 0);
        CHECK_GT_U64(cnt(&s, "rx_dup"), 0); /* lost ACKs make the sender resend what arrived */
        CHECK_EQ_U64(cnt(&s, "crc_errors"), 0);
    }
    soak_fini(&s);
}

TEST(soak_duplication_10)
{
    struct soak s;
    struct mcp_fault_cfg f = {.dup = 0.10};
    if (soak_run(&s, "dup 10%", &f, 1004, 0)) {
        CHECK_GT_U64(s.st.duplicated, 0);
        CHECK_GT_U64(cnt(&s, "rx_dup"), 0);
        CHECK_GT_U64(cnt(&s, "ack_dup"), 0);
        CHECK_EQ_U64(s.st.dropped, 0);
        CHECK_EQ_U64(cnt(&s, "crc_errors"), 0);
        CHECK_EQ_U64(cnt(&s, "rx_gap"), 0); /* copies follow their original directly */
    }
    soak_fini(&s);
}

TEST(soak_reorder_10)
{
    struct soak s;
    struct mcp_fault_cfg f = {.reorder = 0.10, .reorder_max = 3};
    if (soak_run(&s, "reorder 10%", &f, 1005, 0)) {
        CHECK_GT_U64(s.st.reordered, 0);
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "tx_nack"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_EQ_U64(s.st.dropped, 0);
        CHECK_EQ_U64(cnt(&s, "crc_errors"), 0);
    }
    soak_fini(&s);
}

TEST(soak_corruption_1)
{
    struct soak s;
    struct mcp_fault_cfg f = {.corrupt = 0.01};
    if (soak_run(&s, "corrupt 1%", &f, 1006, 0)) {
        CHECK_GT_U64(s.st.corrupted, 0);
        CHECK_GT_U64(cnt(&s, "crc_errors"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        /* every corrupted frame that arrived was refused */
        CHECK_GE_U64(cnt(&s, "crc_errors") + cnt(&s, "malformed") + s.pending, s.st.corrupted);
        CHECK_EQ_U64(s.st.dropped, 0);
    }
    soak_fini(&s);
}

TEST(soak_ack_loss_only)
{
    struct soak s;
    struct mcp_fault_cfg f = {.loss = 0.30, .loss_types = 1u << MCP_FT_ACK};
    if (soak_run(&s, "ack loss 30% (one-way data)", &f, 1007, 1)) {
        CHECK_GT_U64(s.st.dropped, 0);
        /* only standalone ACKs were lost */
        CHECK_LE_U64(s.st.dropped, cnt(&s, "tx_ack"));
        CHECK_LE_U64(cnt(&s, "rx_ack") + s.st.dropped, cnt(&s, "tx_ack"));
        CHECK_GE_U64(cnt(&s, "rx_ack") + s.st.dropped + s.pending, cnt(&s, "tx_ack"));
        CHECK_GT_U64(cnt(&s, "timeouts"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "rx_dup"), 0);
        CHECK_EQ_U64(cnt(&s, "rx_gap"), 0); /* no DATA was lost */
        CHECK_EQ_U64(cnt(&s, "tx_nack"), 0);
    }
    soak_fini(&s);
}

TEST(soak_nack_loss_only)
{
    struct soak s;
    struct mcp_fault_cfg f = {
        .loss = 0.50, .loss_types = 1u << MCP_FT_NACK, .reorder = 0.05, .reorder_max = 3};
    if (soak_run(&s, "nack loss 50% (+ reorder 5%)", &f, 1008, 0)) {
        CHECK_GT_U64(s.st.dropped, 0);
        CHECK_GT_U64(cnt(&s, "tx_nack"), 0);
        CHECK_LE_U64(cnt(&s, "rx_nack") + s.st.dropped, cnt(&s, "tx_nack"));
        CHECK_GE_U64(cnt(&s, "rx_nack") + s.st.dropped + s.pending, cnt(&s, "tx_nack"));
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
    }
    soak_fini(&s);
}

TEST(soak_mixed)
{
    struct soak s;
    struct mcp_fault_cfg f = {
        .loss = 0.03, .dup = 0.03, .reorder = 0.03, .reorder_max = 3, .corrupt = 0.005};
    if (soak_run(&s, "mixed", &f, 1009, 0)) {
        CHECK_GT_U64(s.st.dropped, 0);
        CHECK_GT_U64(s.st.duplicated, 0);
        CHECK_GT_U64(s.st.reordered, 0);
        CHECK_GT_U64(s.st.corrupted, 0);
        CHECK_GT_U64(cnt(&s, "crc_errors"), 0);
        CHECK_GT_U64(cnt(&s, "rx_dup"), 0);
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "timeouts"), 0);
    }
    soak_fini(&s);
}

TEST(soak_mixed_slow_hosts_small_rings)
{
    /* hosts drain every 4th round into small rings: NOBUF NACKs and back-off under faults */
    struct soak s;
    struct mcp_fault_cfg f = {
        .loss = 0.02, .dup = 0.02, .reorder = 0.02, .reorder_max = 3, .corrupt = 0.002};
    struct tweak tw = {.recv_slots = 8, .hostq_slots = 4, .drain_every = 4};
    if (soak_run_t(&s, "mixed, slow hosts", &f, 1010, 0, &tw)) {
        CHECK_GT_U64(cnt(&s, "nack_nobuf"), 0);
        CHECK_GT_U64(cnt(&s, "hostq_full"), 0);
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "crc_errors"), 0);
    }
    soak_fini(&s);
}

TEST(soak_mixed_window_32_with_delay)
{
    /* a wide window and a 20 us one-way delay: many frames in flight, ACKs delayed */
    struct soak s;
    struct mcp_fault_cfg f = {.loss = 0.02,
                              .dup = 0.02,
                              .reorder = 0.05,
                              .reorder_max = 3,
                              .corrupt = 0.002,
                              .delay_ns = 20000};
    struct tweak tw = {.window = 32};
    if (soak_run_t(&s, "mixed, window 32, delay 20 us", &f, 1011, 0, &tw)) {
        CHECK_GT_U64(cnt(&s, "tx_retx"), 0);
        CHECK_GT_U64(cnt(&s, "rx_gap"), 0);
        CHECK_GT_U64(cnt(&s, "rx_dup"), 0);
    }
    soak_fini(&s);
}

TEST_MAIN()
