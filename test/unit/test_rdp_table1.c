/*
 * test_rdp_table1.c — every row of table 1 (seed 001) and every connection rule, as
 * mcp/PROTOCOL.md states them, checked frame by frame.
 *
 * One NIC image is the device under test (node 0).  The test plays its peer (node 1): it
 * crafts frames with mcp_wire_put()/mcp_wire_seal(), injects them into the DUT's receive queue
 * and reads what the DUT transmits by opening the peer's sim link itself.  After every step
 * it checks the exact frames sent back and the change of every NIC counter (a counter not
 * named in the expectation must not move; byte counters are not checked).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rdp_fixture.h"

/* ---- connection rules ---------------------------------------------------------------------- */

TEST(syn_answered_with_synack)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        struct mcp_conn *cn = mcp_conn(f.img, PEER);
        CHECK_EQ_U64(cn->state, MCP_CONN_OPEN);
        CHECK_EQ_U64(cn->have_peer, 1);
        CHECK_EQ_U64(cn->peer_cid, PCID);
        CHECK_EQ_U64(cn->local_cid, f.lcid);
        CHECK_EQ_U64(cn->iss, f.liss);
        CHECK_EQ_U64(cn->rcv_nxt, (uint8_t)PISS); /* the first DATA carries the SYN's seq */
        CHECK(hostq_empty(&f), "a SYN reached the host");
        /* nothing else goes out later: no DATA, no SYN of our own (no sends pending) */
        step(&f, 3000 * US);
        CHECK_SILENT(&f);
        COUNTERS(&f, "");
    }
    fx_fini(&f);
}

TEST(syn_duplicate_answered_again)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        /* accept one DATA so that the duplicate SYN must not rewind rcv_nxt */
        inject_data(&f, PISS, 1);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        inject_ctrl(&f, MCP_FT_SYN, PCID, 0, PISS, 0, 0);
        step(&f, 0);
        int n = take_frames(&f, fr, 4);
        /* the pending delayed ACK may go out in the same pass */
        int synacks = 0;
        for (int i = 0; i < n; i++) {
            if (fr[i].h.type == MCP_FT_SYNACK) {
                synacks++;
                FRAME_IS(fr[i], MCP_FT_SYNACK, f.lcid, PCID, f.liss, ANY);
            } else {
                FRAME_IS(fr[i], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 1));
            }
        }
        CHECK_EQ_U64(synacks, 1);
        COUNTERS(&f, "rx_frames=1 tx_ctrl=1 tx_ack=?");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)(PISS + 1));
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->local_cid, f.lcid);
        HOST_TAKES(&f, 1);
        /* the connection still works: the next DATA is accepted */
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        HOST_TAKES(&f, 2);
    }
    fx_fini(&f);
}

TEST(syn_of_older_incarnation_is_stale)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        inject_ctrl(&f, MCP_FT_SYN, PCID_OLD, 0, 7, 0, 0);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 stale=1");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->peer_cid, PCID);
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->local_cid, f.lcid);
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)PISS);
    }
    fx_fini(&f);
}

TEST(syn_new_cid_is_peer_restart)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    /* ten sends: eight in flight, two queued behind the window */
    if (fx_init(&f, &c, 0) && dut_open(&f, 10)) {
        uint32_t old_lcid = f.lcid;
        step(&f, 2 * 1000 * US); /* 2 ms later the peer comes back with a new cid */
        /* the in-flight DATA was never acknowledged: drop the retransmissions seen meanwhile */
        drain(&f);
        COUNTERS(&f, "tx_retx=? timeouts=?");
        inject_ctrl(&f, MCP_FT_SYN, PCID_NEW, 0, 17, 0, 0);
        step(&f, 0);
        for (unsigned i = 0; i < 10; i++)
            ERROR_IS(&f, i, -ECONNRESET);
        struct mcp_send_error e;
        CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0, "an 11th error entry");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer the new SYN", n)) {
            FRAME_IS(fr[0], MCP_FT_SYNACK, ANY, PCID_NEW, ANY, ANY);
            CHECK(fr[0].h.src_cid != old_lcid && fr[0].h.src_cid != 0,
                  "the connection kept cid 0x%08x", fr[0].h.src_cid);
            f.lcid = fr[0].h.src_cid;
            f.liss = fr[0].h.seq;
        }
        COUNTERS(&f, "rx_frames=1 peer_resets=1 send_errors=10 tx_ctrl=1");
        struct mcp_conn *cn = mcp_conn(f.img, PEER);
        CHECK_EQ_U64(cn->peer_cid, PCID_NEW);
        CHECK_EQ_U64(cn->local_cid, f.lcid);
        CHECK_EQ_U64(cn->rcv_nxt, 17);
        f.pcid = PCID_NEW;
        f.pnxt = 17;

        /* a send after the restart goes out on the new connection once the peer confirms */
        post_sends(&f, 10, 1);
        step(&f, US);
        /* not confirmed yet: no DATA, but a SYN so the peer learns our cid and iss */
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames before the confirmation", n))
            FRAME_IS(fr[0], MCP_FT_SYN, f.lcid, 0, f.liss, ANY);
        inject_ctrl(&f, MCP_FT_ACK, PCID_NEW, f.lcid, 0, f.liss, MCP_FLAG_ACK);
        n = 0;
        for (int k = 0; k < 2 && n == 0; k++) {
            step(&f, 0);
            n = take_frames(&f, fr, 4);
        }
        if (CHECK(n == 1, "%d frames after the confirmation", n))
            DATA_IS(&f, fr[0], 10, f.liss);
        COUNTERS(&f, "tx_ctrl=1 rx_frames=1 rx_ack=1 ack_dup=1 tx_data=1");
    }
    fx_fini(&f);
}

TEST(syn_received_then_own_send_resends_syn_until_confirmed)
{
    /*
     * The peer opened (SYN, our SYNACK) but has sent nothing since, so it has not confirmed
     * our cid and initial sequence number.  Now our host posts a send.  PROTOCOL.md: DATA
     * only once the peer has confirmed, and "SYNs are resent on the same timer until
     * confirmed" -- so a SYN must go out within rto (the peer answers it with a SYNACK, which
     * confirms), and the send must not wait for the peer to speak first.
     */
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        post_sends(&f, 0, 1);
        int syn = -1, n = 0;
        for (uint64_t dt = 0; dt <= 2 * c.rto_us * US && syn < 0; dt += 50 * US) {
            step(&f, 50 * US);
            n = take_frames(&f, fr, 8);
            for (int i = 0; i < n; i++)
                if (fr[i].h.type == MCP_FT_SYN)
                    syn = i;
                else
                    CHECK(0, "frame of type %u before confirmation", fr[i].h.type);
        }
        if (CHECK(syn >= 0, "no SYN within 2 rto for a send to an unconfirmed peer")) {
            FRAME_IS(fr[syn], MCP_FT_SYN, f.lcid, ANY, f.liss, ANY);
            inject_ctrl(&f, MCP_FT_SYNACK, PCID, f.lcid, PISS, 0, 0);
            n = collect(&f, fr, 8);
            if (CHECK(n == 1, "%d frames after the SYNACK", n))
                DATA_IS(&f, fr[0], 0, f.liss);
        }
    }
    fx_fini(&f);
}

TEST(data_with_unknown_dst_cid_answered_rst)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (!fx_init(&f, &c, 0))
        goto out;
    /* no connection at all */
    inject_raw(&f, buf, build(buf, MCP_FT_DATA, PCID, 0x00017777u, 3, 0, 0, 40, 1));
    step(&f, 0);
    int n = take_frames(&f, fr, 4);
    if (CHECK(n == 1, "%d frames answer a DATA of an unknown connection", n))
        FRAME_IS(fr[0], MCP_FT_RST, ANY, PCID, ANY, ANY);
    COUNTERS(&f, "rx_frames=1 stale=1 tx_ctrl=1");
    CHECK(hostq_empty(&f), "stale DATA delivered");

    /* a connection exists, but the DATA names another cid of ours (we restarted) */
    if (!peer_open(&f))
        goto out;
    inject_raw(&f, buf, build(buf, MCP_FT_DATA, PCID, f.lcid ^ 0x00000f0fu, PISS, 0, 0, 40, 2));
    step(&f, 0);
    n = take_frames(&f, fr, 4);
    if (CHECK(n == 1, "%d frames answer a DATA for another cid", n))
        FRAME_IS(fr[0], MCP_FT_RST, ANY, PCID, ANY, ANY);
    COUNTERS(&f, "rx_frames=1 stale=1 tx_ctrl=1");
    CHECK(hostq_empty(&f), "stale DATA delivered");
    CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)PISS);
    /* the connection is untouched: the right DATA is accepted */
    inject_data(&f, PISS, 3);
    step(&f, 0);
    COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
    HOST_TAKES(&f, 3);
out:
    fx_fini(&f);
}

TEST(frames_of_old_peer_incarnation_are_stale)
{
    struct mcp_config c;
    struct fx f;
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        /* right dst_cid, but src_cid of another incarnation: stale, no RST */
        inject_raw(&f, buf, build(buf, MCP_FT_DATA, PCID_OLD, f.lcid, PISS, 0, 0, 40, 1));
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 stale=1");
        CHECK(hostq_empty(&f), "DATA of an old incarnation delivered");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)PISS);
        step(&f, 300 * US); /* no delayed ACK or NACK either */
        CHECK_SILENT(&f);
        COUNTERS(&f, "");
    }
    fx_fini(&f);
}

TEST(ack_and_nack_of_unknown_cid_are_stale)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 4)) {
        uint8_t a = (uint8_t)(f.liss + 4);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid ^ 0x10u, 0, a, MCP_FLAG_ACK); /* not our cid */
        inject_ctrl(&f, MCP_FT_ACK, PCID_OLD, f.lcid, 0, a, MCP_FLAG_ACK);     /* not theirs */
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid ^ 0x10u, f.liss, f.liss, MCP_FLAG_ACK);
        inject_ctrl(&f, MCP_FT_NACK, PCID_OLD, f.lcid, f.liss, f.liss, MCP_FLAG_ACK);
        step(&f, 0);
        step(&f, 0);
        CHECK_SILENT(&f); /* neither RST nor retransmission */
        COUNTERS(&f, "rx_frames=4 stale=4");
        for (unsigned i = 0; i < 4; i++)
            CHECK(sslot(&f, i)->state == MCP_SLOT_INTRANSIT, "slot %u: %s", i,
                  mcp_slot_state_name(sslot(&f, i)->state));
    }
    fx_fini(&f);
}

TEST(rst_fails_pending_sends)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 10)) {
        uint32_t old = f.lcid;
        /* an RST for another cid of ours changes nothing */
        inject_ctrl(&f, MCP_FT_RST, PCID_NEW, f.lcid ^ 0x5a5au, 0, 0, 0);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 stale=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 10);

        /* the peer lost the connection (it restarted and has no cid for us) */
        inject_ctrl(&f, MCP_FT_RST, PCID_NEW, f.lcid, 0, 0, 0);
        step(&f, 0);
        for (unsigned i = 0; i < 10; i++)
            ERROR_IS(&f, i, -ECONNRESET);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 send_errors=10 peer_resets=?");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->state, MCP_CONN_CLOSED);

        /* a later send opens a new connection */
        post_sends(&f, 10, 1);
        step(&f, US);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames after a send on a closed connection", n)) {
            FRAME_IS(fr[0], MCP_FT_SYN, ANY, 0, ANY, ANY);
            CHECK(fr[0].h.src_cid != old && fr[0].h.src_cid != 0, "new SYN reuses cid 0x%08x",
                  fr[0].h.src_cid);
        }
        COUNTERS(&f, "tx_ctrl=1");
    }
    fx_fini(&f);
}

/* ---- DATA rows ----------------------------------------------------------------------------- */

TEST(data_eq_accepted_and_acked_within_ack_delay)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        inject_data(&f, PISS, 1);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1 tx_ack=?");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)(PISS + 1));
        HOST_TAKES(&f, 1);
        CHECK(hostq_empty(&f), "more than one entry");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);
        /* exactly one ACK, ack = seq + 1, no later than ack_delay after the DATA */
        int n = take_frames(&f, fr, 4);
        for (uint64_t dt = 0; dt < c.ack_delay_us * US && n == 0; dt += US) {
            step(&f, US);
            n = take_frames(&f, fr, 4);
        }
        if (CHECK(n == 1, "%d frames by ack_delay", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 1));
        COUNTERS(&f, "tx_ack=1");
        step(&f, 2000 * US); /* and nothing more */
        CHECK_SILENT(&f);
        COUNTERS(&f, "");
    }
    fx_fini(&f);
}

/* The host asks for the ACK now (mcp_ack_asap: a receiver that goes off to compute): it goes
 * out at the next pass, not after ack_delay, and the request is used up. */
TEST(data_eq_acked_at_the_next_pass_when_the_host_asks)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    c.ack_delay_us = 100000; /* 100 ms: nothing in this test waits that long */
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        inject_data(&f, PISS, 1);
        step(&f, 0);
        HOST_TAKES(&f, 1);
        step(&f, 10 * US);
        CHECK_EQ_I64(take_frames(&f, fr, 4), 0); /* the ACK waits for reverse data */
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->ack_pending, 1);
        mcp_ack_asap(f.img, PEER);
        step(&f, US);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames at the pass after the request", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 1));
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1 tx_ack=1");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->ack_asap, 0);
        /* used up: the next frame's ACK waits for the delay again */
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        HOST_TAKES(&f, 2);
        step(&f, 10 * US);
        CHECK_EQ_I64(take_frames(&f, fr, 4), 0);
        step(&f, c.ack_delay_us * US);
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames after ack_delay", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 2));
    }
    fx_fini(&f);
}

TEST(data_eq_window_half_acked_at_once)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        unsigned half = c.window / 2; /* 4 */
        for (unsigned i = 0; i < half; i++)
            inject_data(&f, (uint8_t)(PISS + i), 10 + i);
        step(&f, 0); /* no time passes: only the count can trigger the ACK */
        int n = take_frames(&f, fr, 8);
        if (CHECK(n == 1, "%d frames after window/2 DATA frames in one pass", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + half));
        COUNTERS(&f, "rx_frames=4 rx_data=4 delivered=4 tx_ack=1");
        for (unsigned i = 0; i < half; i++)
            HOST_TAKES(&f, 10 + i);
        /* the sequence number wrapped (PISS = 250): rcv_nxt follows mod 256 */
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)(PISS + half));
        step(&f, 100 * US);
        CHECK_SILENT(&f); /* nothing left to acknowledge */
        COUNTERS(&f, "");
    }
    fx_fini(&f);
}

TEST(data_lt_duplicate_reacked_at_once)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        inject_data(&f, PISS, 1);
        step(&f, 0);
        step(&f, c.ack_delay_us * US); /* the delayed ACK goes out */
        int n = take_frames(&f, fr, 4);
        CHECK(n == 1, "%d frames", n);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1 tx_ack=1");
        HOST_TAKES(&f, 1);

        /* the same DATA again (our ACK was lost): re-ACK in the same pass, no delivery */
        inject_data(&f, PISS, 1);
        step(&f, 0);
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer a duplicate", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 1));
        COUNTERS(&f, "rx_frames=1 rx_dup=1 tx_ack=1");
        CHECK(hostq_empty(&f), "a duplicate was delivered");

        /* a much older one (100 behind, across the wrap): also a duplicate */
        inject_data(&f, (uint8_t)(PISS + 1 - 100), 9);
        step(&f, 0);
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer an old duplicate", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 1));
        COUNTERS(&f, "rx_frames=1 rx_dup=1 tx_ack=1");
        CHECK(hostq_empty(&f), "a duplicate was delivered");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)(PISS + 1));
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);
    }
    fx_fini(&f);
}

TEST(data_gt_gap_nacked_once_per_interval)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        /* PISS was lost; PISS+1 arrives: drop it and NACK(PISS) at once */
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer a gap", n)) {
            FRAME_IS(fr[0], MCP_FT_NACK, f.lcid, PCID, (uint8_t)PISS, ANY);
            CHECK(!(fr[0].h.flags & MCP_FLAG_NOBUF), "gap NACK flagged NOBUF");
        }
        COUNTERS(&f, "rx_frames=1 rx_gap=1 tx_nack=1");
        CHECK(hostq_empty(&f), "out-of-order DATA delivered");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);

        /* more of the same gap within nack_interval: dropped, no second NACK */
        inject_data(&f, PISS + 2, 3);
        step(&f, (c.nack_interval_us / 2) * US);
        inject_data(&f, PISS + 3, 4);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=2 rx_gap=2");

        /* after nack_interval the gap is NACKed again */
        step(&f, (c.nack_interval_us / 2 + 1) * US);
        inject_data(&f, PISS + 2, 3);
        step(&f, 0);
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer the gap after nack_interval", n))
            FRAME_IS(fr[0], MCP_FT_NACK, f.lcid, PCID, (uint8_t)PISS, ANY);
        COUNTERS(&f, "rx_frames=1 rx_gap=1 tx_nack=1");

        /* the missing frame and its successors are taken in order */
        for (unsigned i = 0; i < 4; i++)
            inject_data(&f, (uint8_t)(PISS + i), 1 + i);
        step(&f, 0);
        take_frames(&f, fr, 4);
        COUNTERS(&f, "rx_frames=4 rx_data=4 delivered=4 tx_ack=?");
        for (unsigned i = 0; i < 4; i++)
            HOST_TAKES(&f, 1 + i);
        CHECK(hostq_empty(&f), "extra delivery");
    }
    fx_fini(&f);
}

TEST(data_eq_without_second_free_buffer_nobuf)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    c.recv_slots = 2;
    c.hostq_slots = 1;
    if (fx_init(&f, &c, 0) && peer_open(&f)) {
        /* PISS fills the single host queue entry; the receive ring is free again */
        inject_data(&f, PISS, 1);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1 hostq_full=?");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 2);
        /* PISS+1: one slot stays free after taking it -> accepted; stays READY (queue full) */
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 rx_data=1 hostq_full=?");
        CHECK(f.img->counters.hostq_full > 0, "hostq_full not counted");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_READY), 1);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 1);
        /* PISS+2 would take the last free slot: NACK with NOBUF, slot IDLE again */
        inject_data(&f, PISS + 2, 3);
        step(&f, 0);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer DATA without a second buffer", n)) {
            FRAME_IS(fr[0], MCP_FT_NACK, f.lcid, PCID, (uint8_t)(PISS + 2), ANY);
            CHECK(fr[0].h.flags & MCP_FLAG_NOBUF, "NACK flags 0x%x lack NOBUF", fr[0].h.flags);
        }
        COUNTERS(&f, "rx_frames=1 nack_nobuf=1 tx_nack=1 hostq_full=?");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_READY), 1);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 1);
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)(PISS + 2));
        /* a duplicate still gets its ACK with the last buffer (only new data needs two) */
        inject_data(&f, PISS, 1);
        step(&f, 0);
        n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames answer a duplicate when short of buffers", n))
            FRAME_IS(fr[0], MCP_FT_ACK, f.lcid, PCID, ANY, (uint8_t)(PISS + 2));
        COUNTERS(&f, "rx_frames=1 rx_dup=1 tx_ack=1 hostq_full=?");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 1);

        /* the host takes PISS; the READY slot moves into the queue on the next pass */
        HOST_TAKES(&f, 1);
        step(&f, 0);
        COUNTERS(&f, "delivered=1");
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 2);
        HOST_TAKES(&f, 2);
        /* now the retransmitted PISS+2 is accepted */
        inject_data(&f, PISS + 2, 3);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        HOST_TAKES(&f, 3);
    }
    fx_fini(&f);
}

/* ---- ACK rows ------------------------------------------------------------------------------ */

TEST(ack_lt_duplicate_ignored)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 2), MCP_FLAG_ACK);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_ack=1");
        /* ack = snd_una and ack < snd_una: duplicates */
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 2), MCP_FLAG_ACK);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 1), MCP_FLAG_ACK);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss - 30), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=3 rx_ack=3 ack_dup=3");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, (uint8_t)(f.liss + 2));
        for (unsigned i = 0; i < 6; i++)
            CHECK(sslot(&f, i)->state == (i < 2 ? MCP_SLOT_IDLE : MCP_SLOT_INTRANSIT),
                  "slot %u: %s", i, mcp_slot_state_name(sslot(&f, i)->state));
    }
    fx_fini(&f);
}

TEST(ack_eq_releases_slots)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 2), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_SILENT(&f); /* an ACK is never answered */
        COUNTERS(&f, "rx_frames=1 rx_ack=1");
        for (unsigned i = 0; i < 6; i++)
            CHECK(sslot(&f, i)->state == (i < 2 ? MCP_SLOT_IDLE : MCP_SLOT_INTRANSIT),
                  "slot %u: %s", i, mcp_slot_state_name(sslot(&f, i)->state));
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, (uint8_t)(f.liss + 2));
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 4);
        /* ack = snd_nxt: everything */
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 6), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 rx_ack=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        struct mcp_send_error e;
        CHECK(mcp_errq_pop(f.img, (unsigned)f.ctx, &e) == 0, "error for an acknowledged send");
        for (unsigned i = 0; i < 6; i++)
            CHECK_EQ_I64(sslot(&f, i)->error, 0);
        /* the timer is off: nothing is retransmitted later */
        step(&f, 20 * c.rto_us * US);
        CHECK_SILENT(&f);
        COUNTERS(&f, "");
    }
    fx_fini(&f);
}

TEST(ack_gt_beyond_sent_ignored)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 7), MCP_FLAG_ACK);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 100), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=2 rx_ack=2 ack_bad=2");
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, f.liss);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 6);
        for (unsigned i = 0; i < 6; i++)
            CHECK(sslot(&f, i)->state == MCP_SLOT_INTRANSIT, "slot %u: %s", i,
                  mcp_slot_state_name(sslot(&f, i)->state));
    }
    fx_fini(&f);
}

TEST(ack_piggybacked_on_data_follows_ack_rows)
{
    struct mcp_config c;
    struct fx f;
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        /* DATA carrying ack = liss+3 releases three slots and is itself accepted */
        inject_raw(&f, buf,
                   build(buf, MCP_FT_DATA, PCID, f.lcid, PISS, (uint8_t)(f.liss + 3), MCP_FLAG_ACK,
                         40, 1));
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 3);
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, (uint8_t)(f.liss + 3));
        HOST_TAKES(&f, 1);
        /* a piggybacked ack beyond snd_nxt: ack_bad, the DATA still counts */
        inject_raw(&f, buf,
                   build(buf, MCP_FT_DATA, PCID, f.lcid, PISS + 1, (uint8_t)(f.liss + 9),
                         MCP_FLAG_ACK, 40, 2));
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1 ack_bad=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 3);
        HOST_TAKES(&f, 2);
        /* a piggybacked ack below snd_una changes nothing and is not counted (PROTOCOL.md:
         * "ack_dup counts standalone ACK frames only") */
        inject_raw(&f, buf,
                   build(buf, MCP_FT_DATA, PCID, f.lcid, PISS + 2, (uint8_t)(f.liss + 1),
                         MCP_FLAG_ACK, 40, 3));
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 3);
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, (uint8_t)(f.liss + 3));
        /* the implied ACK of a NACK follows the same rows: NACK(liss+5) releases two more
         * and goes back to liss+5 (the DUT's DATA now acknowledges PISS+3) */
        f.pnxt = PISS + 3;
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 5), (uint8_t)(f.liss + 5),
                    MCP_FLAG_ACK);
        struct frame fr[8];
        int n = collect(&f, fr, 8);
        if (CHECK(n == 1, "%d frames after the NACK", n))
            DATA_IS(&f, fr[0], 5, (uint8_t)(f.liss + 5));
        COUNTERS(&f, "rx_frames=1 rx_nack=1 tx_retx=1");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 1);
        HOST_TAKES(&f, 3);
    }
    fx_fini(&f);
}

/* ---- NACK rows ----------------------------------------------------------------------------- */

static int retransmitted(const char *file, int line, struct fx *f, const struct frame *fr, int n,
                         unsigned from, unsigned to)
{
    int ok = th_check(n == (int)(to - from), file, line, "retransmission",
                      "%d frames, expected sends %u..%u", n, from, to - 1);
    for (unsigned i = from; ok && i < to; i++)
        ok &= data_frame_is(file, line, f, &fr[i - from], i, (uint8_t)(f->liss + i));
    return ok;
}
#define RETRANSMITTED(f, fr, n, from, to)                                                          \
    retransmitted(__FILE__, __LINE__, (f), (fr), (n), from, to)

TEST(nack_intransit_goes_back_n)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[16];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        /* NACK(liss+2): liss, liss+1 arrived (implied ACK); resend liss+2 .. liss+5 */
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 2), 0, 0);
        int n = collect(&f, fr, 16);
        RETRANSMITTED(&f, fr, n, 2, 6);
        COUNTERS(&f, "rx_frames=1 rx_nack=1 tx_retx=4");
        for (unsigned i = 0; i < 6; i++)
            CHECK(sslot(&f, i)->state == (i < 2 ? MCP_SLOT_IDLE : MCP_SLOT_INTRANSIT),
                  "slot %u: %s", i, mcp_slot_state_name(sslot(&f, i)->state));
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_una, (uint8_t)(f.liss + 2));
        CHECK_EQ_U64(mcp_conn(f.img, PEER)->snd_nxt, (uint8_t)(f.liss + 6));
        /* the ACK of everything ends it */
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 6), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        COUNTERS(&f, "rx_frames=1 rx_ack=1");
    }
    fx_fini(&f);
}

TEST(nack_when_retransmit_ignored)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[16];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        uint8_t s2 = (uint8_t)(f.liss + 2);
        /* two NACKs in one batch: the second finds the slots RETRANSMIT already */
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, s2, 0, 0);
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, s2, 0, 0);
        int n = collect(&f, fr, 16);
        RETRANSMITTED(&f, fr, n, 2, 6); /* once, not twice */
        COUNTERS(&f, "rx_frames=2 rx_nack=2 nack_ignored=1 tx_retx=4");

        /* the same NACK again within nack_interval: the go-back-N was just done */
        step(&f, (c.nack_interval_us / 2) * US);
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, s2, 0, 0);
        step(&f, 0);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 rx_nack=1 nack_ignored=1");

        /* after nack_interval it goes back again */
        step(&f, (c.nack_interval_us / 2 + 1) * US);
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, s2, 0, 0);
        n = collect(&f, fr, 16);
        RETRANSMITTED(&f, fr, n, 2, 6);
        COUNTERS(&f, "rx_frames=1 rx_nack=1 tx_retx=4");
    }
    fx_fini(&f);
}

TEST(nack_nobuf_backs_off)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[16];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 6)) {
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 2), 0, MCP_FLAG_NOBUF);
        uint64_t t_nack = f.t;
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 rx_nack=1");
        for (unsigned i = 0; i < 6; i++)
            CHECK(sslot(&f, i)->state == (i < 2 ? MCP_SLOT_IDLE : MCP_SLOT_RETRANSMIT),
                  "slot %u: %s", i, mcp_slot_state_name(sslot(&f, i)->state));
        /* nothing before nobuf_backoff */
        while (f.t + US < t_nack + c.nobuf_backoff_us * US) {
            step(&f, US);
            CHECK_SILENT(&f);
        }
        COUNTERS(&f, "");
        step(&f, t_nack + c.nobuf_backoff_us * US - f.t);
        int n = take_frames(&f, fr, 16);
        RETRANSMITTED(&f, fr, n, 2, 6);
        COUNTERS(&f, "tx_retx=4");
    }
    fx_fini(&f);
}

/* ---- CRC row ------------------------------------------------------------------------------- */

TEST(crc_error_dropped_silently)
{
    struct mcp_config c;
    struct fx f;
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (!fx_init(&f, &c, 0) || !peer_open(&f))
        goto out;
    /* the expected DATA with one payload bit flipped after sealing */
    uint32_t len = build(buf, MCP_FT_DATA, PCID, f.lcid, PISS, 0, 0, 40, 1);
    buf[MCP_WIRE_HDR + 5] ^= 0x10;
    inject_raw(&f, buf, len);
    /* ... and one with the header's seq changed */
    len = build(buf, MCP_FT_DATA, PCID, f.lcid, PISS, 0, 0, 40, 1);
    buf[16] ^= 0x01;
    inject_raw(&f, buf, len);
    step(&f, 0);
    COUNTERS(&f, "rx_frames=2 crc_errors=2");
    CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);
    /* silence: no ACK, no NACK, no RST, ever */
    for (int i = 0; i < 10; i++)
        step(&f, 50 * US);
    CHECK_SILENT(&f);
    COUNTERS(&f, "");
    CHECK(hostq_empty(&f), "a corrupted frame was delivered");
    CHECK_EQ_U64(mcp_conn(f.img, PEER)->rcv_nxt, (uint8_t)PISS);
    /* the good frame is taken afterwards */
    inject_data(&f, PISS, 1);
    step(&f, 0);
    COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
    HOST_TAKES(&f, 1);
out:
    fx_fini(&f);
}

TEST(crc_error_on_ack_and_nack_changes_nothing)
{
    struct mcp_config c;
    struct fx f;
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 4)) {
        uint32_t len =
            build(buf, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 4), MCP_FLAG_ACK, 0, 0);
        buf[25] ^= 0x80; /* the crc field itself */
        inject_raw(&f, buf, len);
        len = build(buf, MCP_FT_NACK, PCID, f.lcid, f.liss, PISS, MCP_FLAG_ACK, 0, 0);
        buf[12] ^= 0x04;
        inject_raw(&f, buf, len);
        step(&f, 0);
        step(&f, 0);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=2 crc_errors=2");
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 4);
        for (unsigned i = 0; i < 4; i++)
            CHECK(sslot(&f, i)->state == MCP_SLOT_INTRANSIT, "slot %u: %s", i,
                  mcp_slot_state_name(sslot(&f, i)->state));
    }
    fx_fini(&f);
}

TEST_MAIN()
