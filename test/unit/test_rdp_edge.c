/*
 * test_rdp_edge.c — the firmware at the edges of its protocol:
 *   (a) 8-bit sequence numbers wrapping many times under reordering and duplication;
 *   (b) a peer restarting mid-stream while frames of its old incarnation are still in flight,
 *       and one the host learns of (mcp_peer_restarted) before it sends again;
 *   (c) a peer that stays dead: pending sends fail with -ETIMEDOUT after peer_timeout;
 *   (d) a receiver whose host stops draining: NOBUF NACKs, back-off, then everything arrives;
 *   (e) bad host input: invalid destination, itself, too long;
 *   (f) the window and slot counts the firmware chooses for its frame size ("auto").
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mcp_env.h"
#include "rdp_fixture.h"

static struct mcp_config edge_cfg(void)
{
    struct mcp_config c;
    cfg_traffic(&c, 2);
    return c;
}

/* A sealed control frame from PEER to DUT on net. */
static void inject_ctrl_to(struct mcp_sim_net *net, uint8_t type, uint32_t scid, uint32_t dcid,
                           uint8_t seq)
{
    uint8_t b[MCP_WIRE_HDR];
    uint32_t len = build(b, type, scid, dcid, seq, 0, 0, 0, 0);
    CHECK_OK(mcp_sim_inject(net, DUT, b, len));
}

/* ---- (a) sequence wraps -------------------------------------------------------------------- */

static void wraps(unsigned window, uint64_t seed_default)
{
    struct cluster cl;
    struct mcp_config c = edge_cfg();
    struct mcp_fault_cfg f = {.reorder = 0.10, .reorder_max = 3, .dup = 0.10};
    const uint32_t n = 60 * 256; /* 60 wraps of the 8-bit sequence space per direction */
    c.window = (uint16_t)window;
    f.seed = th_seed(seed_default);
    c.seed = f.seed;
    if (cluster_init(&cl, 2, &c, &f, 1000, 200)) {
        cluster_target(&cl, 0, 1, n);
        cluster_target(&cl, 1, 0, n);
        int done = cluster_run(&cl, 2000000);
        CHECK(done, "not done after %llu rounds (%llu delivered)", (unsigned long long)cl.rounds,
              (unsigned long long)cl.delivered);
        CHECK(cl.bad == 0, "%llu wrong deliveries, first: %s", (unsigned long long)cl.bad, cl.why);
        CHECK_EQ_U64(cl.delivered, 2ull * n);
        CHECK_EQ_U64(cluster_counter(&cl, "rx_data"), 2ull * n);
        CHECK_GT_U64(cluster_counter(&cl, "rx_dup"), 0);
        CHECK_GT_U64(cluster_counter(&cl, "rx_gap"), 0);
        CHECK_GT_U64(cluster_counter(&cl, "tx_retx"), 0);
        /* the sequence numbers really went round: snd_nxt = iss + n (mod 256) */
        for (unsigned i = 0; i < 2; i++) {
            struct mcp_conn *cn = mcp_conn(cl.node[i].img, (uint16_t)(1 - i));
            CHECK_EQ_U64(cn->snd_nxt, (uint8_t)(cn->iss + n));
            CHECK_EQ_U64(cn->snd_una, cn->snd_nxt);
        }
        printf("# wraps (window %u): %u messages each way = %u wraps, %llu rounds, tx_retx %llu "
               "rx_dup %llu rx_gap %llu\n",
               window, n, n / 256, (unsigned long long)cl.rounds,
               (unsigned long long)cluster_counter(&cl, "tx_retx"),
               (unsigned long long)cluster_counter(&cl, "rx_dup"),
               (unsigned long long)cluster_counter(&cl, "rx_gap"));
    }
    cluster_fini(&cl);
}

TEST(seq_wraps_under_reorder_and_dup)
{
    wraps(8, 3001);
}

TEST(seq_wraps_under_reorder_and_dup_window_64)
{
    wraps(64, 3002);
}

/* ---- (b) peer restart ------------------------------------------------------------------------ */

TEST(peer_restart_mid_stream)
{
    struct cluster cl;
    struct mcp_config c = edge_cfg();
    /* frames take 30 us and some are held back: the old incarnation's frames are still on
     * the way when node 1 comes back */
    struct mcp_fault_cfg f = {.delay_ns = 30000, .reorder = 0.10, .reorder_max = 3};
    const uint32_t n = 6000;
    f.seed = th_seed(4001);
    c.seed = f.seed;
    if (!cluster_init(&cl, 2, &c, &f, 1000, 200))
        goto out;
    cl.strict = 0; /* sends may fail with -ECONNRESET; checked below */
    cluster_target(&cl, 0, 1, n);
    cluster_target(&cl, 1, 0, n);

    /* stream until 3 ms (node 1's first connection ids carry stamp 1) and some data arrived */
    while (cl.t < 3000000 || cl.next[1][0] < 500)
        cluster_round(&cl);
    CHECK(cl.bad == 0, "before the restart: %s", cl.why);
    uint64_t to_b_in_flight = mcp_send_busy(cl.node[0].img, (unsigned)cl.node[0].ctx);
    CHECK_GT_U64(to_b_in_flight, 0);
    int64_t delivered_before = cl.last[1][0];   /* A->B messages the old B delivered */
    uint32_t b_posted_before = cl.posted[1][0]; /* B->A messages the old B had posted */
    uint32_t a_posted_before = cl.posted[0][1];
    uint64_t pending_frames = mcp_sim_net_pending(cl.net);
    CHECK_GT_U64(pending_frames, 0);

    /* node 1 restarts: a fresh image with a new seed on the same link, at t = 3 ms */
    cluster_restart(&cl, 1, 0xb0b);
    int done = cluster_run(&cl, 2000000);
    CHECK(done, "not done after the restart (%llu rounds)", (unsigned long long)cl.rounds);
    CHECK(cl.bad == 0, "%llu wrong deliveries, first: %s", (unsigned long long)cl.bad, cl.why);

    struct mcp_image *a = cl.node[0].img, *b = cl.node[1].img;
    printf("# restart: A->B delivered before %lld, A had %llu sends pending, %llu frames in "
           "flight; after: A stale %llu resets %llu send_errors %llu, B stale %llu\n",
           (long long)delivered_before, (unsigned long long)to_b_in_flight,
           (unsigned long long)pending_frames, (unsigned long long)a->counters.stale,
           (unsigned long long)a->counters.peer_resets, (unsigned long long)a->counters.send_errors,
           (unsigned long long)b->counters.stale);
    /* the old incarnation's frames reached the new one and were refused as stale */
    CHECK_GT_U64(b->counters.stale, 0);
    CHECK_EQ_U64(b->counters.wrong_dest + b->counters.malformed + b->counters.crc_errors, 0);
    /* A's pending sends to the old B failed with -ECONNRESET, nothing else failed */
    CHECK_GT_U64(cl.errq[2], 0);
    CHECK_EQ_U64(cl.errq[0] + cl.errq[1] + cl.errq[3], 0);
    CHECK_EQ_U64(a->counters.send_errors, cl.errq[2]);

    /* A->B: every message arrived exactly once, or failed back to A; one that failed may
     * have reached the old incarnation (its ACK lost), never the new one */
    uint32_t lost = 0, failed_after = 0, new_ok = 0, failed = 0;
    for (uint32_t no = 0; no < n; no++) {
        uint8_t g = cl.got[0][1][no], x = cl.failed[0][1][no];
        failed += x;
        if (!g && !x)
            lost++;
        if (g && x && (int64_t)no > delivered_before)
            failed_after++;
        if (g && no >= a_posted_before)
            new_ok++;
    }
    CHECK(lost == 0, "%u A->B messages neither delivered nor failed", lost);
    CHECK(failed_after == 0, "%u failed messages delivered to the new incarnation", failed_after);
    CHECK_EQ_U64(failed, cl.errq[2]);
    CHECK_GT_U64(new_ok, 0); /* traffic flows A -> B after the restart */
    /* B->A: the new incarnation's messages all arrived; the old one's at most once */
    uint32_t b_new_missing = 0, b_new = 0;
    for (uint32_t no = b_posted_before; no < n; no++) {
        b_new++;
        b_new_missing += cl.got[1][0][no] != 1;
    }
    CHECK_GT_U64(b_new, 0);
    CHECK(b_new_missing == 0, "%u of B's %u new messages to A missing", b_new_missing, b_new);
    /* both ends run one connection of the new incarnation */
    struct mcp_conn *ab = mcp_conn(a, 1), *ba = mcp_conn(b, 0);
    CHECK_EQ_U64(ab->peer_cid, ba->local_cid);
    CHECK_EQ_U64(ba->peer_cid, ab->local_cid);
    CHECK((ba->local_cid >> 8) >= 3, "new B's cid 0x%08x does not carry the restart time",
          ba->local_cid);
out:
    cluster_fini(&cl);
}

/* The host learns of the restart first (psid: a new boot id) and drops the connection
 * (mcp_peer_restarted): the messages it sends afterwards open a new connection and all arrive,
 * where the first of them used to go on the old one, draw an RST and fail with -ECONNRESET. */
TEST(host_told_of_peer_restart_sends_on_a_new_connection)
{
    struct cluster cl;
    struct mcp_config c = edge_cfg();
    if (!cluster_init(&cl, 2, &c, NULL, 1000, 200))
        goto out;
    cluster_target(&cl, 0, 1, 100);
    CHECK(cluster_run(&cl, 100000), "the first 100 messages");
    uint32_t old_cid = mcp_conn(cl.node[0].img, 1)->local_cid;
    CHECK(old_cid != 0, "A has a connection to B");

    cluster_restart(&cl, 1, 0xb0b);
    CHECK_EQ_I64(mcp_peer_restarted(&cl.node[0].nic, 1, cl.t), 1);
    CHECK_EQ_I64(mcp_peer_restarted(&cl.node[0].nic, 1, cl.t), 0);       /* nothing left to drop */
    CHECK_EQ_I64(mcp_peer_restarted(&cl.node[1].nic, 0, cl.t), 0);       /* the new B has none */
    CHECK_EQ_I64(mcp_peer_restarted(&cl.node[0].nic, 0, cl.t), -EINVAL); /* itself */
    CHECK_EQ_I64(mcp_peer_restarted(&cl.node[0].nic, (uint16_t)c.max_nodes, cl.t), -EINVAL);
    CHECK_EQ_U64(cl.node[0].img->counters.peer_resets, 1);

    cluster_target(&cl, 0, 1, 200); /* messages 100..199 to the new incarnation */
    CHECK(cluster_run(&cl, 100000), "the next 100 messages (%llu delivered)",
          (unsigned long long)cl.delivered);
    CHECK(cl.bad == 0, "%llu wrong deliveries, first: %s", (unsigned long long)cl.bad, cl.why);
    CHECK_EQ_U64(cl.errq[0] + cl.errq[1] + cl.errq[2] + cl.errq[3], 0);
    CHECK_EQ_U64(cl.node[0].img->counters.send_errors, 0);
    CHECK_EQ_U64(cl.node[1].img->counters.stale, 0); /* nothing came on the old connection */
    CHECK_EQ_I64(cl.last[1][0], 199);
    struct mcp_conn *ab = mcp_conn(cl.node[0].img, 1), *ba = mcp_conn(cl.node[1].img, 0);
    CHECK(ab->local_cid != old_cid, "A opened a new connection");
    CHECK_EQ_U64(ab->peer_cid, ba->local_cid);
    CHECK_EQ_U64(ba->peer_cid, ab->local_cid);
out:
    cluster_fini(&cl);
}

TEST(peer_restart_with_serially_older_stamp_waits_for_peer_timeout)
{
    /*
     * Connection ids carry their creation time in ms mod 2^24 and are compared serially, so a
     * peer that restarts 2.3 .. 4.6 hours after its old connection was created (or after a
     * reboot reset its clock) presents a stamp that looks *older*.  PROTOCOL.md refuses such a
     * SYN as stale while the old incarnation is heard within peer_timeout, and accepts it as a
     * restart after that silence.  Check that bound: refused before, accepted (SYNACK,
     * peer_resets) at the first SYN after it.  The new cid is made older directly (stamp 0
     * against PCID's 1) instead of waiting hours of virtual time for the wrap.
     */
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c); /* peer_timeout 1000 ms */
    if (!fx_init(&f, &c, 0) || !peer_open(&f))
        goto out;
    uint8_t seq = PISS;
    while (f.t < 40ull * 1000000000u) { /* the old incarnation talks every 500 ms until 40 s */
        inject_data(&f, seq++, 1);
        step(&f, 500ull * 1000000u);
        drain(&f);
        struct mcp_rx_desc d;
        while (mcp_recv_peek(f.img, &d))
            mcp_recv_done(f.img);
    }
    uint64_t last_heard = f.t;   /* the last DATA was taken in the last pass */
    uint32_t ncid = 0x00000044u; /* stamp 0 */
    CHECK(((((ncid >> 8) - (PCID >> 8)) & 0xffffffu) & 0x800000u) != 0, "stamp not serially older");
    COUNTERS(&f, "rx_frames=? rx_data=? delivered=? tx_ack=?");
    int accepted = 0;
    uint64_t at = 0;
    for (int k = 0; k < 40 && !accepted; k++) { /* the new incarnation's SYN every 100 ms */
        inject_ctrl(&f, MCP_FT_SYN, ncid, 0, 9, 0, 0);
        step(&f, 0);
        int n = take_frames(&f, fr, 8);
        for (int i = 0; i < n; i++)
            if (fr[i].h.type == MCP_FT_SYNACK && fr[i].h.dst_cid == ncid)
                accepted = 1, at = f.t;
        if (!accepted)
            step(&f, 100ull * 1000000u);
    }
    CHECK(accepted, "the restarted peer was never accepted");
    CHECK(at >= last_heard + c.peer_timeout_ms * 1000000ull,
          "accepted %llu ms after the old incarnation was last heard, before peer_timeout",
          (unsigned long long)((at - last_heard) / 1000000u));
    CHECK(at <= last_heard + c.peer_timeout_ms * 1000000ull + 200ull * 1000000u,
          "accepted only %llu ms after the old incarnation was last heard",
          (unsigned long long)((at - last_heard) / 1000000u));
    CHECK_EQ_U64(f.img->counters.peer_resets, 1);
    CHECK_GE_U64(f.img->counters.stale, 5); /* the earlier SYNs */
out:
    fx_fini(&f);
}

/* ---- (c) dead peer -----------------------------------------------------------------------------
 */

TEST(dead_peer_never_answered_sends_time_out)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    c.peer_timeout_ms = 50;
    if (!fx_init(&f, &c, 0))
        goto out;
    post_sends(&f, 0, 10); /* 10 > window: some wait in the queue */
    step(&f, US);
    uint64_t began = f.t;
    struct mcp_send_error e;
    uint64_t limit = began + 50ull * 1000000u;
    unsigned syns = 0;
    /* until the limit: SYNs resent with back-off, no failure */
    while (f.t + 100 * US <= limit) {
        step(&f, 100 * US);
        syns += (unsigned)drain(&f);
        if (!CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0,
                   "send %u failed (%d) at %llu us, before peer_timeout", e.cookie, e.error,
                   (unsigned long long)((f.t - began) / US)))
            goto out;
    }
    CHECK_GT_U64(syns, 2); /* the SYN was retried */
    CHECK_EQ_U64(f.img->counters.send_errors, 0);
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 10);
    /* soon after the limit: every pending send fails with -ETIMEDOUT */
    uint64_t failed_at = 0;
    while (f.t < limit + 1000 * US && !failed_at) {
        step(&f, 100 * US);
        if (mcp_send_busy(f.img, (unsigned)f.ctx) == 0)
            failed_at = f.t;
    }
    CHECK(failed_at > limit, "failed at %llu us after the work began, limit 50000 us",
          (unsigned long long)((failed_at - began) / US));
    for (unsigned i = 0; i < 10; i++)
        ERROR_IS(&f, i, -ETIMEDOUT);
    CHECK_EQ_U64(f.img->counters.peers_dead, 1);
    CHECK_EQ_U64(f.img->counters.send_errors, 10);
    CHECK_EQ_U64(mcp_conn(f.img, PEER)->state, MCP_CONN_CLOSED);
    /* nothing more goes to the dead peer */
    drain(&f);
    step(&f, 10 * 1000 * US);
    CHECK_SILENT(&f);
    /* a send posted later tries again: a new SYN */
    post_sends(&f, 10, 1);
    step(&f, US);
    struct frame fr[4];
    int n = take_frames(&f, fr, 4);
    if (CHECK(n == 1, "%d frames after a new send", n))
        FRAME_IS(fr[0], MCP_FT_SYN, ANY, 0, ANY, ANY);
out:
    fx_fini(&f);
}

TEST(dead_peer_after_silence_sends_time_out)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    c.peer_timeout_ms = 50;
    if (!fx_init(&f, &c, 0) || !dut_open(&f, 10))
        goto out;
    /* 10 ms later the peer acknowledges two, then goes silent for good */
    step(&f, 10 * 1000 * US);
    drain(&f);
    inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 2), MCP_FLAG_ACK);
    step(&f, 0);
    uint64_t heard = f.t, limit = heard + 50ull * 1000000u;
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 8);
    unsigned retx = 0;
    struct mcp_send_error e;
    while (f.t + 100 * US <= limit) {
        step(&f, 100 * US);
        retx += (unsigned)drain(&f);
        if (!CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0,
                   "send %u failed (%d) %llu us after the peer was last heard", e.cookie, e.error,
                   (unsigned long long)((f.t - heard) / US)))
            goto out;
    }
    CHECK_GT_U64(retx, 0); /* it kept retransmitting meanwhile */
    uint64_t failed_at = 0;
    while (f.t < limit + 1000 * US && !failed_at) {
        step(&f, 100 * US);
        if (mcp_send_busy(f.img, (unsigned)f.ctx) == 0)
            failed_at = f.t;
    }
    CHECK(failed_at > limit, "pending sends not failed within 1 ms after peer_timeout");
    for (unsigned i = 2; i < 10; i++)
        ERROR_IS(&f, i, -ETIMEDOUT);
    CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0, "an acknowledged send failed too");
    CHECK_EQ_U64(f.img->counters.peers_dead, 1);
    CHECK_EQ_U64(f.img->counters.send_errors, 8);
out:
    fx_fini(&f);
}

/*
 * Nobody ran the firmware for longer than the retransmission timeout, and the peer's ACK for
 * the whole window came meanwhile: the next pass takes the ACK before it looks at the timer,
 * so nothing is retransmitted (it used to fire first and resend the window for nothing).
 */
TEST(ack_waiting_on_the_link_is_taken_before_the_retransmission_timer_fires)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (!fx_init(&f, &c, 0) || !dut_open(&f, 4))
        goto out;
    inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 4), MCP_FLAG_ACK);
    step(&f, 3ull * c.rto_us * US); /* the first pass after three timeouts' time */
    CHECK_SILENT(&f);
    COUNTERS(&f, "rx_frames=1 rx_ack=1");
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    /* the timer still fires when the ACK does not come */
    post_sends(&f, 4, 1);
    step(&f, US);
    struct frame fr[4];
    int n = take_frames(&f, fr, 4);
    if (CHECK(n == 1, "%d frames after a new send", n))
        DATA_IS(&f, fr[0], 4, (uint8_t)(f.liss + 4));
    n = 0; /* the timeout follows the round trip measured above, at most rto_max_us */
    for (uint64_t waited = 0; n == 0 && waited <= 2ull * c.rto_max_us; waited += 100) {
        step(&f, 100 * US);
        n = take_frames(&f, fr, 4);
    }
    if (CHECK(n == 1, "%d frames when the timer fired", n))
        DATA_IS(&f, fr[0], 4, (uint8_t)(f.liss + 4));
    CHECK_EQ_U64(f.img->counters.timeouts, 1);
out:
    fx_fini(&f);
}

TEST(dead_peer_in_cluster_link_closed)
{
    /* node 2 of three never comes up (no link): sends to it fail, the others are unaffected */
    struct cluster cl;
    struct mcp_config c = edge_cfg();
    c.max_nodes = 3;
    c.peer_timeout_ms = 50;
    c.seed = 5001;
    if (!cluster_init(&cl, 3, &c, NULL, 1000, 200))
        goto out;
    lanai_close(cl.node[2].link);
    cl.node[2].link = NULL;
    cl.node[2].polled = 0;
    cl.strict = 0;
    cluster_target(&cl, 0, 1, 3000);
    cluster_target(&cl, 1, 0, 3000);
    cluster_target(&cl, 0, 2, 20);
    int done = cluster_run(&cl, 200000); /* 200 ms virtual */
    CHECK(done, "not done after %llu rounds", (unsigned long long)cl.rounds);
    CHECK(cl.bad == 0, "%s", cl.why);
    CHECK_EQ_U64(cl.errq[1], 20); /* -ETIMEDOUT, each send to node 2 */
    CHECK_EQ_U64(cl.errq[0] + cl.errq[2] + cl.errq[3], 0);
    for (uint32_t no = 0; no < 20; no++)
        CHECK(cl.failed[0][2][no], "send %u to the dead node did not fail", no);
    for (uint32_t no = 0; no < 3000; no++)
        if (!CHECK(cl.got[0][1][no] == 1 && cl.got[1][0][no] == 1, "message %u missing", no))
            break;
    CHECK_EQ_U64(cl.node[0].img->counters.peers_dead, 1);
    CHECK_GT_U64(cl.t - T0, 50ull * 1000000u);
out:
    cluster_fini(&cl);
}

/* ---- (d) a receiver that stops draining ------------------------------------------------------ */

TEST(receiver_stops_draining_nobuf_then_recovers)
{
    struct cluster cl;
    struct mcp_config c = edge_cfg();
    c.recv_slots = 16;
    c.hostq_slots = 8;
    c.seed = 6001;
    if (!cluster_init(&cl, 2, &c, NULL, 1000, 200))
        goto out;
    cluster_target(&cl, 0, 1, 5000);
    cluster_target(&cl, 1, 0, 500);
    for (int r = 0; r < 100; r++)
        cluster_round(&cl);
    /* node 1's host stops taking messages for 5 ms */
    cl.node[1].drains = 0;
    for (int r = 0; r < 5000; r++)
        cluster_round(&cl);
    struct mcp_image *a = cl.node[0].img, *b = cl.node[1].img;
    CHECK_GT_U64(b->counters.nack_nobuf, 0);
    CHECK_GT_U64(b->counters.hostq_full, 0);
    CHECK_GT_U64(a->counters.tx_retx, 0);
    CHECK_GT_U64(mcp_send_busy(a, (unsigned)cl.node[0].ctx), 0); /* A waits, nothing failed */
    CHECK_EQ_U64(cl.errq[0] + cl.errq[1] + cl.errq[2] + cl.errq[3], 0);
    /* while stalled only what fits the host queue and the receive ring was taken */
    CHECK_LE_U64(b->counters.rx_data - cl.next[1][0], c.hostq_slots + c.recv_slots - 1u);
    uint64_t nobuf = b->counters.nack_nobuf, retx = a->counters.tx_retx;
    /* the back-off keeps the stalled sender from flooding: fewer than one NOBUF per 1 us */
    CHECK_LT_U64(nobuf, 5000);
    /* draining resumes: everything arrives, in order, exactly once */
    cl.node[1].drains = 1;
    int done = cluster_run(&cl, 500000);
    CHECK(done, "not done after the receiver resumed");
    CHECK(cl.bad == 0, "%llu wrong deliveries, first: %s", (unsigned long long)cl.bad, cl.why);
    CHECK_EQ_U64(cl.delivered, 5500);
    CHECK_EQ_U64(b->counters.rx_data, 5000);
    printf("# slow receiver: nack_nobuf %llu, sender tx_retx %llu during the stall, %llu total\n",
           (unsigned long long)nobuf, (unsigned long long)retx,
           (unsigned long long)a->counters.tx_retx);
out:
    cluster_fini(&cl);
}

/* ---- (e) bad host input -------------------------------------------------------------------- */

TEST(bad_host_input_fails_with_einval)
{
    struct mcp_config c;
    struct fx f;
    uint8_t data[PAYLOAD + 1] = {0};
    cfg_default(&c);
    if (!fx_init(&f, &c, 0))
        goto out;
    /* too long for a slot: refused by the host library itself, nothing posted */
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, PEER, data, PAYLOAD + 1, 1), -EMSGSIZE);
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    /* the largest payload is fine */
    CHECK_EQ_U64(mcp_max_payload(f.img), PAYLOAD);
    /* posted, then refused by the firmware: node beyond max_nodes, far beyond, itself */
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, NODES, data, 10, 11), 0);
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, 0xffff, data, 10, 12), 0);
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, DUT, data, 10, 13), 0);
    /* a slot posted by hand with a length beyond the slot */
    uint32_t slot;
    REQUIRE(mcp_send_slot(f.img, (unsigned)f.ctx, &slot) != NULL, "no slot");
    mcp_send_post(f.img, (unsigned)f.ctx, slot, PEER, PAYLOAD + 1, 14);
    step(&f, US);
    static const struct {
        uint32_t cookie;
        uint16_t dst;
    } want[] = {{11, NODES}, {12, 0xffff}, {13, DUT}, {14, PEER}};
    for (unsigned i = 0; i < 4; i++) {
        struct mcp_send_error e;
        if (!CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 1, "no error for send %u", i))
            break;
        CHECK(e.cookie == want[i].cookie && e.dst == want[i].dst && e.slot == i &&
                  e.error == -EINVAL,
              "entry %u: cookie %u dst %u slot %u error %d", i, e.cookie, e.dst, e.slot, e.error);
        CHECK_EQ_I64(sslot(&f, i)->error, -EINVAL);
    }
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    CHECK_EQ_U64(f.img->counters.send_errors, 4);
    struct mcp_sim_stats st;
    mcp_sim_net_stats(f.net, &st);
    CHECK_EQ_U64(st.sent, 0); /* nothing went onto the wire */
    COUNTERS(&f, "send_errors=4");
    /* the context still works */
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, PEER, data, PAYLOAD, 15), 0);
    step(&f, US);
    struct frame fr[4];
    int n = take_frames(&f, fr, 4);
    if (CHECK(n == 1, "%d frames", n))
        FRAME_IS(fr[0], MCP_FT_SYN, ANY, 0, ANY, ANY);
out:
    fx_fini(&f);
}

TEST(error_queue_overflow_counted)
{
    /* the host does not read its errors: the queue (send_slots entries) fills, later failures
     * are counted in errq_overflow and the entries already queued stay intact */
    struct mcp_config c;
    struct fx f;
    uint8_t data[8] = {0};
    cfg_default(&c);
    if (!fx_init(&f, &c, 0))
        goto out;
    unsigned total = c.send_slots + 5;
    for (unsigned i = 0; i < total; i++) {
        CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, DUT, data, 8, 500 + i), 0); /* to itself */
        step(&f, US);
    }
    CHECK_EQ_U64(f.img->counters.send_errors, total);
    CHECK_EQ_U64(f.img->counters.errq_overflow, total - c.send_slots);
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    for (unsigned i = 0; i < c.send_slots; i++) {
        struct mcp_send_error e;
        if (!CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 1, "entry %u missing", i))
            break;
        CHECK(e.cookie == 500 + i && e.error == -EINVAL && e.dst == DUT, "entry %u: %u %d %u", i,
              e.cookie, e.error, e.dst);
    }
    struct mcp_send_error e;
    CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0, "more entries than the queue holds");
    /* once read, the queue takes errors again */
    CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, DUT, data, 8, 999), 0);
    step(&f, US);
    if (CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 1, "no entry after the queue drained"))
        CHECK_EQ_U64(e.cookie, 999);
out:
    fx_fini(&f);
}

TEST(two_contexts_share_one_connection_in_order)
{
    /* sends of two contexts to one peer: one sequence space; each context's own order kept */
    struct mcp_config c;
    struct fx f;
    struct frame fr[16];
    cfg_default(&c);
    if (!fx_init(&f, &c, 0))
        goto out;
    int c2 = mcp_ctx_attach(f.img, 77);
    REQUIRE(c2 >= 0 && c2 != f.ctx, "second context: %d", c2);
    uint8_t m[4];
    for (uint8_t i = 0; i < 4; i++) {
        m[0] = 1, m[1] = i;
        CHECK_RC(mcp_send(f.img, (unsigned)f.ctx, PEER, m, 2, i), 0);
        m[0] = 2;
        CHECK_RC(mcp_send(f.img, (unsigned)c2, PEER, m, 2, 10 + i), 0);
    }
    step(&f, US);
    int n = take_frames(&f, fr, 16);
    REQUIRE(n == 1 && fr[0].h.type == MCP_FT_SYN, "%d frames, expected a SYN", n);
    f.lcid = fr[0].h.src_cid;
    f.liss = fr[0].h.seq;
    inject_ctrl(&f, MCP_FT_SYNACK, PCID, f.lcid, PISS, 0, 0);
    n = collect(&f, fr, 16);
    REQUIRE(n == 8, "%d DATA frames", n);
    uint8_t next[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        FRAME_IS(fr[i], MCP_FT_DATA, f.lcid, PCID, (uint8_t)(f.liss + i), ANY);
        uint8_t who = fr[i].b[MCP_WIRE_HDR], k = fr[i].b[MCP_WIRE_HDR + 1];
        if (CHECK(who == 1 || who == 2, "frame %d from context %u", i, who))
            CHECK(k == next[who]++, "context %u: message %u out of order", who, k);
    }
    CHECK(next[1] == 4 && next[2] == 4, "%u and %u messages", next[1], next[2]);
out:
    fx_fini(&f);
}

TEST(detached_context_drains_then_is_freed)
{
    /* mcp_host.h: slots already posted still go out; the context is freed once all are IDLE */
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 3)) {
        mcp_ctx_detach(f.img, (unsigned)f.ctx);
        CHECK_EQ_U64(mcp_ctx(f.img, (unsigned)f.ctx)->state, MCP_CTX_CLOSING);
        step(&f, US);
        CHECK_EQ_U64(mcp_ctx(f.img, (unsigned)f.ctx)->state, MCP_CTX_CLOSING);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 3);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 3), MCP_FLAG_ACK);
        step(&f, US);
        step(&f, US);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        CHECK_EQ_U64(mcp_ctx(f.img, (unsigned)f.ctx)->state, MCP_CTX_FREE);
        CHECK_EQ_U64(f.img->ctx_mask & (1ull << f.ctx), 0);
        CHECK_EQ_I64(mcp_ctx_attach(f.img, 5), f.ctx);
    }
    fx_fini(&f);
}

TEST(detached_context_with_full_ring_keeps_every_posted_send)
{
    /*
     * A process fills its whole send ring (16 slots) towards a peer that has not confirmed
     * yet, then detaches (exits).  mcp_host.h: "Slots already posted still go out".  Every one
     * of the 16 must stay busy until it is transmitted and acknowledged; none may be dropped
     * (found by the fuzzer: the firmware took the oldest queued slot for an unpublished one).
     */
    struct mcp_config c;
    struct fx f;
    struct frame fr[16];
    cfg_default(&c);
    if (!fx_init(&f, &c, 0))
        goto out;
    post_sends(&f, 0, c.send_slots);
    mcp_ctx_detach(f.img, (unsigned)f.ctx);
    step(&f, US);
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), c.send_slots);
    for (unsigned i = 0; i < c.send_slots; i++)
        CHECK(sslot(&f, i)->state == MCP_SLOT_READY, "slot %u: %s", i,
              mcp_slot_state_name(sslot(&f, i)->state));
    int n = take_frames(&f, fr, 16);
    REQUIRE(n == 1 && fr[0].h.type == MCP_FT_SYN, "%d frames, expected a SYN", n);
    f.lcid = fr[0].h.src_cid;
    f.liss = fr[0].h.seq;
    inject_ctrl(&f, MCP_FT_SYNACK, PCID, f.lcid, PISS, 0, 0);
    unsigned sent = 0;
    for (int round = 0; round < 4 && sent < c.send_slots; round++) {
        n = collect(&f, fr, 16);
        for (int i = 0; i < n; i++, sent++)
            if (sent < c.send_slots)
                DATA_IS(&f, fr[i], sent, (uint8_t)(f.liss + sent));
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + sent), MCP_FLAG_ACK);
    }
    CHECK_EQ_U64(sent, c.send_slots);
    step(&f, US);
    step(&f, US);
    CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    CHECK_EQ_U64(mcp_ctx(f.img, (unsigned)f.ctx)->state, MCP_CTX_FREE);
out:
    fx_fini(&f);
}

/* Close a DUT/peer pair of sim links (either may be NULL), their net and the DUT's image. */
static void sim_pair_free(struct mcp_sim_net *net, struct lanai_link *dl, struct lanai_link *pl,
                          struct mcp_image *img)
{
    if (dl)
        lanai_close(dl);
    if (pl)
        lanai_close(pl);
    mcp_sim_net_destroy(net);
    free(img);
}

TEST(send_larger_than_the_link_frame_is_refused)
{
    /* mcp.h: "The link's max_frame limits slot_size" and mcp_max_payload() is the "slot size
     * limited by the link".  An image formatted with 256-byte slots on a link of 128-byte
     * payloads: a 200-byte send must be refused (by mcp_send or failed back by the firmware),
     * never left to retry forever. */
    struct mcp_config c;
    cfg_default(&c);
    struct mcp_sim_net *net = mcp_sim_net_create(NODES, MCP_WIRE_HDR + 128, NULL);
    struct lanai_link *dl = mcp_sim_link_open(net, DUT), *pl = mcp_sim_link_open(net, PEER);
    struct mcp_image *img = image_new(&c);
    struct mcp_nic nic;
    uint8_t data[PAYLOAD] = {0}, f[MAXF + 1];
    uint64_t t = T0;
    if (!CHECK(net && dl && pl && img, "set-up"))
        goto out;
    mcp_nic_init(&nic, img, dl);
    int ctx = mcp_ctx_attach(img, 1);
    CHECK_LE_U64(mcp_max_payload(img), 128);
    int rc = mcp_send(img, (unsigned)ctx, PEER, data, 200, 7);
    CHECK(rc == 0 || rc == -EMSGSIZE, "mcp_send: %d", rc);
    /* open the connection as the peer would */
    mcp_sim_net_set_time(net, t);
    mcp_poll(&nic, t);
    void *bufs[1] = {f};
    uint32_t len;
    struct mcp_wire_hdr h;
    uint32_t lcid = 0;
    while (lanai_rx(pl, bufs, MAXF, &len, 1) == 1) {
        mcp_wire_get(f, &h);
        if (h.type == MCP_FT_SYN)
            lcid = h.src_cid;
    }
    if (rc == 0 && CHECK(lcid != 0, "no SYN for the pending send")) {
        inject_ctrl_to(net, MCP_FT_SYNACK, PCID, lcid, PISS);
        for (int i = 0; i < 100 && mcp_send_busy(img, (unsigned)ctx); i++) {
            t += 10 * US;
            mcp_sim_net_set_time(net, t);
            mcp_poll(&nic, t);
        }
        struct mcp_send_error e;
        CHECK(mcp_send_busy(img, (unsigned)ctx) == 0,
              "the send is still pending after 100 passes (tx_busy %llu)",
              (unsigned long long)img->counters.tx_busy);
        if (CHECK(mcp_errq_pop(img, (unsigned)ctx, &e) == 1, "no error for the oversize send"))
            CHECK(e.cookie == 7 && (e.error == -EINVAL || e.error == -EMSGSIZE), "error %d",
                  e.error);
    }
out:
    sim_pair_free(net, dl, pl, img);
}

/* A consumer killed inside mcp_recv_done() (tail advanced, entry still marked full) is
 * finished by mcp_recv_settle(): the entry is released once, the next frame is intact, and a
 * completed release is left alone. */
TEST(recv_settle_finishes_a_release_cut_short)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        inject_data(&f, PISS, 1);
        inject_data(&f, (uint8_t)(PISS + 1), 2);
        step(&f, 0);
        step(&f, US);
        uint32_t pos = mcp_recv_position(f.img);
        /* the consumer dies between the two stores of mcp_recv_done() */
        f.img->hostq_tail++;
        CHECK_EQ_U64(mcp_hostq(f.img, pos % c.hostq_slots)->full, 1);
        CHECK_EQ_U64(mcp_recv_settle(f.img, pos), pos + 1);
        CHECK_EQ_U64(mcp_hostq(f.img, pos % c.hostq_slots)->full, 0);
        HOST_TAKES(&f, 2);
        /* nothing cut short: settling changes nothing */
        pos = mcp_recv_position(f.img);
        CHECK_EQ_U64(mcp_recv_settle(f.img, pos), pos);
        CHECK(hostq_empty(&f), "host queue not empty");
        /* the freed entries are filled again: nothing is stuck behind a stale flag */
        for (uint32_t i = 0; i < (uint32_t)c.hostq_slots + 2; i++) {
            inject_data(&f, (uint8_t)(PISS + 2 + i), 10 + i);
            step(&f, US);
            HOST_TAKES(&f, 10 + i);
        }
    }
    fx_fini(&f);
}

/* ---- (f) the window for the frame size ------------------------------------------------------ */

/* Configuration of node DUT from the environment for a link of max_frame bytes. */
static int cfg_from_env(struct mcp_config *c, uint32_t max_frame, char *err, size_t errlen)
{
    return mcp_config_from_settings(c, DUT, max_frame, err, errlen);
}

TEST(auto_window_holds_96_KiB_and_the_slots_follow_it)
{
    struct mcp_config c;
    char err[256] = "";
    unsetenv("PSP_WINDOW");
    unsetenv("PSP_SEND_SLOTS");
    unsetenv("PSP_RECV_SLOTS");
    unsetenv("PSP_FRAME_SIZE");
    static const struct {
        uint32_t max_frame; /* the link's: eth at MTU 1500, eth at MTU 9000, udp */
        uint16_t window, send_slots, recv_slots;
    } want[] = {{1500, 64, 128, 256}, {9000, 11, 32, 128}, {65535, 8, 32, 128}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!CHECK(cfg_from_env(&c, want[i].max_frame, err, sizeof err) == 0, "%s", err))
            continue;
        CHECK_EQ_U64(c.slot_size, want[i].max_frame - MCP_WIRE_HDR);
        CHECK(c.window == want[i].window && c.send_slots == want[i].send_slots &&
                  c.recv_slots == want[i].recv_slots,
              "frames of %u bytes: window %u, send slots %u, receive slots %u", c.slot_size,
              c.window, c.send_slots, c.recv_slots);
    }
    /* "auto" said outright is the default; a window that is given sizes the auto slots */
    setenv("PSP_WINDOW", "auto", 1);
    CHECK_OK(cfg_from_env(&c, 1500, err, sizeof err));
    CHECK_EQ_U64(c.window, 64);
    /* (counts rounded up to powers of two: 2 x 20 send slots are 64, 4 x 20 receive slots 128) */
    setenv("PSP_WINDOW", "20", 1);
    CHECK_OK(cfg_from_env(&c, 1500, err, sizeof err));
    CHECK(c.window == 20 && c.send_slots == 64 && c.recv_slots == 128, "%u %u %u", c.window,
          c.send_slots, c.recv_slots);
    setenv("PSP_SEND_SLOTS", "16", 1);
    setenv("PSP_WINDOW", "auto", 1);
    CHECK_OK(cfg_from_env(&c, 1500, err, sizeof err));
    CHECK(c.window == 64 && c.send_slots == 16 && c.recv_slots == 256, "%u %u %u", c.window,
          c.send_slots, c.recv_slots);
    /* ring positions are taken modulo the count: a count that is no power of two is refused */
    setenv("PSP_SEND_SLOTS", "48", 1);
    CHECK_RC(cfg_from_env(&c, 1500, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "must be powers of two") != NULL, "%s", err);
    /* smaller frames asked for on a large link: the window follows the frame size */
    unsetenv("PSP_SEND_SLOTS");
    setenv("PSP_FRAME_SIZE", "4096", 1);
    CHECK_OK(cfg_from_env(&c, 65535, err, sizeof err));
    CHECK(c.window == 24 && c.send_slots == 64, "%u %u", c.window, c.send_slots);
    unsetenv("PSP_FRAME_SIZE");
    /* anything else is refused, naming the setting */
    setenv("PSP_WINDOW", "Auto", 1);
    CHECK_RC(cfg_from_env(&c, 1500, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "PSP_WINDOW=Auto is not a number") != NULL && strstr(err, "(or auto)"), "%s",
          err);
    setenv("PSP_WINDOW", "65", 1);
    CHECK_RC(cfg_from_env(&c, 1500, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "PSP_WINDOW=65 is out of range 1..64") != NULL, "%s", err);
    unsetenv("PSP_WINDOW");
}

/* ---- one flush per pass ------------------------------------------------------------------ */

/* A link between a node's firmware and its sim link that counts flushes and what each held. */
struct flush_meter {
    struct lanai_link l; /* first member: the firmware sees this */
    struct lanai_link *inner;
    unsigned queued;  /* frames queued since the last flush */
    uint32_t dsts;    /* bit per destination node of those frames */
    uint64_t flushes; /* flush() calls */
    uint64_t frames;  /* frames handed over by flushes */
    unsigned widest;  /* most destinations one flush carried */
};

static int meter_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
    struct flush_meter *m = (struct flush_meter *)l;
    int rc = lanai_tx(m->inner, dst, frame, len);
    if (rc == 0) {
        m->queued++;
        m->dsts |= 1u << (dst & 31);
    }
    return rc;
}

static int meter_flush(struct lanai_link *l)
{
    struct flush_meter *m = (struct flush_meter *)l;
    unsigned n = (unsigned)__builtin_popcount(m->dsts);
    m->flushes++;
    m->frames += m->queued;
    if (n > m->widest)
        m->widest = n;
    m->queued = 0;
    m->dsts = 0;
    return lanai_flush(m->inner);
}

static int meter_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    return lanai_rx(((struct flush_meter *)l)->inner, bufs, cap, lens, n);
}

static void meter_close(struct lanai_link *l)
{
    (void)l; /* the inner link belongs to the cluster */
}

static const struct lanai_link_ops meter_ops = {
    .tx = meter_tx, .flush = meter_flush, .rx = meter_rx, .close = meter_close};

/* What the links' batching (one sendmmsg per flush, test_link) relies on: a pass of the
 * firmware ends with one flush of everything its peers queued, so a burst to many nodes is
 * one batch.  Node 0 streams to nodes 1, 2 and 3; every pass of it flushes at most twice (after
 * sending, and after answering what it received), never leaves a frame unflushed, and flushes
 * frames to all three nodes at once. */
TEST(a_pass_flushes_frames_to_every_peer_at_once)
{
    struct cluster cl;
    struct mcp_config c;
    cfg_traffic(&c, 4);
    if (!cluster_init(&cl, 4, &c, NULL, 1000, 200))
        goto out;
    struct flush_meter m = {.l = *cl.node[0].link, .inner = cl.node[0].link};
    m.l.ops = &meter_ops;
    cl.node[0].nic.link = &m.l;
    for (unsigned d = 1; d < 4; d++)
        cluster_target(&cl, 0, d, 3000);
    uint64_t most = 0;
    while (!cluster_done(&cl) && cl.rounds < 200000) {
        uint64_t before = m.flushes;
        cluster_round(&cl);
        if (m.flushes - before > most)
            most = m.flushes - before;
        if (!CHECK(m.queued == 0, "round %llu: %u frames queued and not flushed",
                   (unsigned long long)cl.rounds, m.queued))
            break;
    }
    CHECK(cluster_done(&cl), "not done after %llu rounds", (unsigned long long)cl.rounds);
    CHECK(cl.bad == 0, "%llu wrong deliveries, first: %s", (unsigned long long)cl.bad, cl.why);
    CHECK_EQ_U64(cl.delivered, 3ull * 3000);
    CHECK(most >= 1 && most <= 2, "a pass flushed %llu times", (unsigned long long)most);
    CHECK(m.widest == 3, "the widest flush carried frames to %u nodes", m.widest);
    const struct mcp_counters *k = &cl.node[0].img->counters;
    CHECK_EQ_U64(m.frames, k->tx_data + k->tx_retx + k->tx_ack + k->tx_nack + k->tx_ctrl);
    printf("# node 0: %llu frames in %llu flushes over %llu rounds, at most %llu flushes a pass\n",
           (unsigned long long)m.frames, (unsigned long long)m.flushes,
           (unsigned long long)cl.rounds, (unsigned long long)most);
    cl.node[0].nic.link = cl.node[0].link;
out:
    cluster_fini(&cl);
}

TEST(window_out_of_range_is_refused_by_name_not_by_its_slots)
{
    struct mcp_config c;
    const char *why = NULL;
    static const uint16_t bad[] = {0, MCP_MAX_WINDOW + 1, 1000, 4096};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mcp_config_default(&c, 0);
        uint16_t send = c.send_slots, recv = c.recv_slots;
        c.window = bad[i];
        mcp_config_autosize(&c, MCP_AUTO_SEND_SLOTS | MCP_AUTO_RECV_SLOTS);
        CHECK(c.send_slots == send && c.recv_slots == recv, "window %u: slots %u %u (were %u %u)",
              bad[i], c.send_slots, c.recv_slots, send, recv);
        CHECK_RC(mcp_config_check(&c, &why), -EINVAL);
        CHECK(why && strcmp(why, "window must be 1..64") == 0, "window %u: %s", bad[i],
              why ? why : "(none)");
    }
    /* in range, the slots follow it: 2 x 64 send, 4 x 64 receive */
    mcp_config_default(&c, 0);
    c.window = MCP_MAX_WINDOW;
    mcp_config_autosize(&c, MCP_AUTO_SEND_SLOTS | MCP_AUTO_RECV_SLOTS);
    CHECK(c.send_slots == 128 && c.recv_slots == 256, "%u %u", c.send_slots, c.recv_slots);
    CHECK_OK(mcp_config_check(&c, &why));
}

/* Data frames the DUT (configured from the environment for 1500-byte link frames) puts on the
 * wire to a peer that has answered its SYN but acknowledges nothing, with 100 full frames
 * posted (or as many as the context has send slots). */
static int frames_before_an_ack(void)
{
    struct mcp_config c;
    char err[256] = "";
    struct mcp_sim_net *net = mcp_sim_net_create(NODES, 1500, NULL);
    struct lanai_link *dl = net ? mcp_sim_link_open(net, DUT) : NULL;
    struct lanai_link *pl = net ? mcp_sim_link_open(net, PEER) : NULL;
    struct mcp_image *img = NULL;
    static uint8_t data[1500], f[1501];
    int sent = -1;
    if (!CHECK(net && dl && pl, "sim net") ||
        !CHECK(cfg_from_env(&c, 1500, err, sizeof err) == 0, "%s", err))
        goto out;
    c.contexts = 1;
    c.max_nodes = NODES;
    c.rto_us = c.rto_max_us = 1000000; /* no retransmission in the 50 us looked at */
    img = image_new(&c);
    if (!CHECK(img != NULL, "image"))
        goto out;
    struct mcp_nic nic;
    mcp_nic_init(&nic, img, dl);
    int ctx = mcp_ctx_attach(img, 1);
    for (unsigned i = 0; i < 100 && i < c.send_slots; i++)
        if (!CHECK_OK(mcp_send(img, (unsigned)ctx, PEER, data, c.slot_size, i)))
            goto out;
    uint64_t t = T0;
    void *bufs[1] = {f};
    uint32_t len, lcid = 0;
    struct mcp_wire_hdr h;
    sent = 0;
    for (int pass = 0; pass < 50; pass++, t += US) {
        mcp_sim_net_set_time(net, t);
        mcp_poll(&nic, t);
        while (lanai_rx(pl, bufs, sizeof f - 1, &len, 1) == 1) {
            mcp_wire_get(f, &h);
            if (h.type == MCP_FT_SYN && !lcid) {
                lcid = h.src_cid;
                inject_ctrl_to(net, MCP_FT_SYNACK, PCID, lcid, PISS);
            } else if (h.type == MCP_FT_DATA) {
                sent++;
            }
        }
    }
    CHECK(lcid != 0, "no SYN");
    CHECK_EQ_U64(img->counters.tx_data, (uint64_t)sent);
out:
    sim_pair_free(net, dl, pl, img);
    return sent;
}

TEST(eth_sized_frames_fill_a_window_of_64_before_the_first_ack)
{
    unsetenv("PSP_SEND_SLOTS");
    unsetenv("PSP_RECV_SLOTS");
    unsetenv("PSP_FRAME_SIZE");
    unsetenv("PSP_WINDOW");
    CHECK_EQ_U64(frames_before_an_ack(), 64);
    setenv("PSP_WINDOW", "8", 1); /* the paper's window, asked for */
    CHECK_EQ_U64(frames_before_an_ack(), 8);
    unsetenv("PSP_WINDOW");
}

TEST_MAIN()
