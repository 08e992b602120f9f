/*
 * test_rdp_states.c — every buffer-state transition of the paper's figure 3 (seed 001, §3.3),
 * observed between single firmware passes.
 *
 *   send:    IDLE -> READY (host posts) -> INTRANSIT (transmitted) -> IDLE (ACK)
 *            INTRANSIT -> RETRANSMIT (NACK, timeout) -> INTRANSIT (resent)
 *   receive: IDLE -> INTRANSIT (frame arrives) -> READY (accepted, second buffer free)
 *            -> IDLE (moved to the host queue when it has room; stays READY while it is full)
 *            INTRANSIT -> IDLE (no second free buffer: NACK; CRC error; ACK/NACK processed)
 *
 * The DUT runs behind a gate link: with tx() refused (-EAGAIN, as a busy link may answer) a
 * slot marked for retransmission stays RETRANSMIT until the gate opens, so the state can be
 * seen between passes; and the gate records the state of every receive slot right after the
 * link filled it (the end of the "receive DMA"), which is where INTRANSIT is visible.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "rdp_fixture.h"

static int states_are(const char *file, int line, struct fx *f, unsigned n, const uint32_t *want)
{
    int ok = 1;
    for (unsigned i = 0; i < n; i++)
        ok &= th_check(sslot(f, i)->state == want[i], file, line, "send slot state",
                       "slot %u is %s, expected %s", i, mcp_slot_state_name(sslot(f, i)->state),
                       mcp_slot_state_name(want[i]));
    return ok;
}
#define STATES(f, ...)                                                                             \
    do {                                                                                           \
        const uint32_t w_[] = {__VA_ARGS__};                                                       \
        states_are(__FILE__, __LINE__, (f), sizeof(w_) / sizeof(w_[0]), w_);                       \
    } while (0)

#define I  MCP_SLOT_IDLE
#define R  MCP_SLOT_READY
#define IT MCP_SLOT_INTRANSIT
#define RT MCP_SLOT_RETRANSMIT

/* ---- send buffers --------------------------------------------------------------------------- */

TEST(send_idle_to_ready_by_host_post)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 1)) {
        STATES(&f, I, I, I);
        uint32_t slot;
        void *p = mcp_send_slot(f.img, (unsigned)f.ctx, &slot);
        REQUIRE(p != NULL, "no free slot");
        CHECK_EQ_U64(slot, 0);
        STATES(&f, I, I, I); /* taking the buffer is not posting it */
        memset(p, 0x5a, 20);
        mcp_send_post(f.img, (unsigned)f.ctx, slot, PEER, 20, 100);
        STATES(&f, R, I, I);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 1);
        /* the firmware keeps it READY while the connection is being opened */
        step(&f, US);
        STATES(&f, R, I, I);
        step(&f, US);
        STATES(&f, R, I, I);
        COUNTERS(&f, "tx_ctrl=1"); /* the SYN */
    }
    fx_fini(&f);
}

TEST(send_ready_to_intransit_when_transmitted)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (!fx_init(&f, &c, 1))
        goto out;
    post_sends(&f, 0, 2);
    step(&f, US);
    int n = take_frames(&f, fr, 8);
    if (!CHECK(n == 1, "%d frames, expected the SYN", n))
        goto out;
    f.lcid = fr[0].h.src_cid;
    f.liss = fr[0].h.seq;
    COUNTERS(&f, "tx_ctrl=1");
    /* confirmed, but the link is busy: the slots stay READY */
    f.gate.tx_blocked = 1;
    inject_ctrl(&f, MCP_FT_SYNACK, PCID, f.lcid, PISS, 0, 0);
    step(&f, US);
    step(&f, US);
    STATES(&f, R, R);
    CHECK(f.gate.tx_refused > 0, "the firmware never tried to transmit");
    COUNTERS(&f, "rx_frames=1 tx_busy=?");
    CHECK_SILENT(&f);
    /* the link takes frames again: READY -> INTRANSIT, with the transmission time */
    f.gate.tx_blocked = 0;
    step(&f, US);
    STATES(&f, IT, IT);
    n = take_frames(&f, fr, 8);
    if (CHECK(n == 2, "%d DATA frames", n)) {
        DATA_IS(&f, fr[0], 0, f.liss);
        DATA_IS(&f, fr[1], 1, (uint8_t)(f.liss + 1));
    }
    CHECK_EQ_U64(sslot(&f, 0)->tx_ns, f.t);
    CHECK_EQ_U64(sslot(&f, 0)->seq, f.liss);
    CHECK_EQ_U64(sslot(&f, 1)->seq, (uint8_t)(f.liss + 1));
    COUNTERS(&f, "tx_data=2");
out:
    fx_fini(&f);
}

TEST(send_intransit_to_idle_on_ack)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 1) && dut_open(&f, 3)) {
        STATES(&f, IT, IT, IT);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 1), MCP_FLAG_ACK);
        step(&f, US);
        STATES(&f, I, IT, IT);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 3), MCP_FLAG_ACK);
        step(&f, US);
        STATES(&f, I, I, I);
        COUNTERS(&f, "rx_frames=2 rx_ack=2");
        /* IDLE again means reusable: the ring hands out slot 3, then wraps to 0 eventually */
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
    }
    fx_fini(&f);
}

TEST(send_intransit_to_retransmit_on_nack_then_resent)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 1) && dut_open(&f, 4)) {
        f.gate.tx_blocked = 1; /* hold the resend back to see RETRANSMIT */
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 1), 0, 0);
        step(&f, US);
        STATES(&f, I, RT, RT, RT);
        step(&f, US);
        STATES(&f, I, RT, RT, RT);
        COUNTERS(&f, "rx_frames=1 rx_nack=1 tx_busy=?");
        CHECK_SILENT(&f);
        f.gate.tx_blocked = 0;
        step(&f, US);
        STATES(&f, I, IT, IT, IT);
        int n = take_frames(&f, fr, 8);
        if (CHECK(n == 3, "%d frames resent", n))
            for (unsigned i = 1; i < 4; i++)
                DATA_IS(&f, fr[i - 1], i, (uint8_t)(f.liss + i));
        CHECK_EQ_U64(sslot(&f, 1)->tx_ns, f.t);
        COUNTERS(&f, "tx_retx=3");
        /* the RETRANSMIT - INTRANSIT cycle repeats until an ACK arrives */
        step(&f, c.nack_interval_us * US + US);
        f.gate.tx_blocked = 1;
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 1), 0, 0);
        step(&f, US);
        STATES(&f, I, RT, RT, RT);
        f.gate.tx_blocked = 0;
        step(&f, US);
        STATES(&f, I, IT, IT, IT);
        CHECK_EQ_U64(take_frames(&f, fr, 8), 3);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 4), MCP_FLAG_ACK);
        step(&f, US);
        STATES(&f, I, I, I, I);
        COUNTERS(&f, "rx_frames=2 rx_nack=1 rx_ack=1 tx_retx=3 tx_busy=?");
    }
    fx_fini(&f);
}

/* A SYNACK answering a retransmitted SYN can arrive after data went out: it must leave the
 * retransmission timer alone, or a lost ACK stalls the connection until the peer is declared
 * dead (seen on the udp link with 5% loss). */
TEST(duplicate_synack_keeps_the_retransmission_timer)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 3)) {
        step(&f, US);
        inject_ctrl(&f, MCP_FT_SYNACK, PCID, f.lcid, PISS, 0, 0); /* the duplicate */
        step(&f, US);
        STATES(&f, IT, IT, IT);
        COUNTERS(&f, "rx_frames=1 rx_ctrl=?");
        /* no ACK comes: after the timeout the three go out again */
        step(&f, c.rto_us * US);
        int n = take_frames(&f, fr, 8);
        if (CHECK(n == 3, "%d frames resent after the timeout (0: the timer was lost)", n))
            for (unsigned i = 0; i < 3; i++)
                DATA_IS(&f, fr[i], i, (uint8_t)(f.liss + i));
        COUNTERS(&f, "timeouts=1 tx_retx=3 tx_busy=?");
    }
    fx_fini(&f);
}

TEST(send_intransit_to_retransmit_on_timeout_then_resent)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 1) && dut_open(&f, 3)) {
        uint64_t sent = sslot(&f, 0)->tx_ns;
        CHECK_EQ_U64(sent, f.t);
        f.gate.tx_blocked = 1;
        /* up to just before rto: still in transit */
        step(&f, c.rto_us * US - US);
        STATES(&f, IT, IT, IT);
        COUNTERS(&f, "");
        /* rto has passed: go back N from the oldest unacknowledged */
        step(&f, US);
        STATES(&f, RT, RT, RT);
        COUNTERS(&f, "timeouts=1 tx_busy=?");
        f.gate.tx_blocked = 0;
        step(&f, US);
        STATES(&f, IT, IT, IT);
        int n = take_frames(&f, fr, 8);
        if (CHECK(n == 3, "%d frames resent", n))
            for (unsigned i = 0; i < 3; i++)
                DATA_IS(&f, fr[i], i, (uint8_t)(f.liss + i));
        COUNTERS(&f, "tx_retx=3");
        uint64_t resent = f.t;
        /* the timeout doubled: nothing more after one rto, again after two */
        step(&f, c.rto_us * US + US);
        STATES(&f, IT, IT, IT);
        CHECK_SILENT(&f);
        COUNTERS(&f, "");
        step(&f, resent + 2 * c.rto_us * US - f.t);
        CHECK_EQ_U64(take_frames(&f, fr, 8), 3);
        COUNTERS(&f, "timeouts=1 tx_retx=3");
        /* progress resets the timeout to rto */
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 1), MCP_FLAG_ACK);
        step(&f, US);
        STATES(&f, I, IT, IT);
        uint64_t acked = f.t;
        step(&f, c.rto_us * US - US);
        CHECK_SILENT(&f);
        step(&f, acked + c.rto_us * US - f.t);
        n = take_frames(&f, fr, 8);
        if (CHECK(n == 2, "%d frames resent after the reset timeout", n)) {
            DATA_IS(&f, fr[0], 1, (uint8_t)(f.liss + 1));
            DATA_IS(&f, fr[1], 2, (uint8_t)(f.liss + 2));
        }
        COUNTERS(&f, "rx_frames=1 rx_ack=1 timeouts=1 tx_retx=2");
    }
    fx_fini(&f);
}

/*
 * The timeout follows the measured round trip (SRTT + 4 RTTVAR, RFC 6298) above the configured
 * floor; frames sent twice give no sample (Karn); quick ACKs bring it back to the floor.
 */
TEST(rto_follows_round_trip_above_floor)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[8];
    cfg_default(&c);
    if (fx_init(&f, &c, 0) && dut_open(&f, 4)) {
        struct mcp_conn *cn = mcp_conn(f.img, PEER);
        uint64_t rto = c.rto_us * US, rtt = rto * 8 / 10;
        CHECK_EQ_U64(cn->srtt_us, 0);
        /* the first frame is ACKed after 0.8 rto: SRTT 0.8 rto, RTTVAR 0.4 rto, RTO 2.4 rto */
        step(&f, rtt);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 1), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_EQ_U64(cn->srtt_us, c.rto_us * 8 / 10);
        CHECK_EQ_U64(cn->rttvar_us, c.rto_us * 4 / 10);
        CHECK_EQ_U64(cn->rto_us, c.rto_us * 24 / 10);
        uint64_t acked = f.t;
        /* a fixed timeout would have resent the other three at one rto: nothing until 2.4 */
        step(&f, 2 * rto);
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 rx_ack=1");
        step(&f, acked + rto * 24 / 10 - f.t);
        int n = take_frames(&f, fr, 8);
        CHECK(n == 3, "%d frames resent at the estimated timeout", n);
        COUNTERS(&f, "timeouts=1 tx_retx=3");
        /* Karn: the ACK of resent frames is no sample, however late (4 rto: before the
         * doubled timeout) */
        step(&f, 4 * rto);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 4), MCP_FLAG_ACK);
        step(&f, 0);
        CHECK_EQ_U64(cn->srtt_us, c.rto_us * 8 / 10);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        /* fresh frames ACKed at once: the estimate falls, but never below the floor */
        for (unsigned k = 0; k < 40; k++) {
            post_sends(&f, 4 + k, 1);
            step(&f, US);
            CHECK_EQ_U64(take_frames(&f, fr, 8), 1);
            inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 5 + k), MCP_FLAG_ACK);
            step(&f, US);
        }
        CHECK(cn->srtt_us < c.rto_us / 10, "SRTT %u us after quick ACKs", cn->srtt_us);
        CHECK_EQ_U64(cn->rto_us, c.rto_us);
        COUNTERS(&f, "rx_frames=? rx_ack=? tx_data=40");
    }
    fx_fini(&f);
}

/* ---- receive buffers ------------------------------------------------------------------------ */

/* Every slot the last rx() filled was INTRANSIT right after the fill. */
static int rx_was_intransit(const char *file, int line, struct fx *f, unsigned n)
{
    int ok = th_check(f->gate.rx_n == n, file, line, "rx", "%u frames received, expected %u",
                      f->gate.rx_n, n);
    for (unsigned i = 0; i < f->gate.rx_n; i++)
        ok &= th_check(f->gate.rx_state[i] == MCP_SLOT_INTRANSIT, file, line, "receive slot",
                       "slot %u was %s while its frame came in", f->gate.rx_slot[i],
                       f->gate.rx_state[i] == MCP_NIL ? "not a receive slot"
                                                      : mcp_slot_state_name(f->gate.rx_state[i]));
    return ok;
}
#define RX_WAS_INTRANSIT(f, n) rx_was_intransit(__FILE__, __LINE__, (f), (n))

TEST(recv_idle_intransit_ready_idle)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    c.recv_slots = 4;
    c.hostq_slots = 1;
    if (fx_init(&f, &c, 1) && peer_open(&f)) {
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 4);
        /* the host queue has room: IDLE -> INTRANSIT -> READY -> IDLE within the pass */
        f.gate.rx_n = 0;
        inject_data(&f, PISS, 1);
        step(&f, 0);
        RX_WAS_INTRANSIT(&f, 1);
        CHECK_EQ_U64(mcp_rslot(f.img, f.gate.rx_slot[0])->state, MCP_SLOT_IDLE);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 4);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        /* the host queue is full now: the next one stays READY */
        f.gate.rx_n = 0;
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        RX_WAS_INTRANSIT(&f, 1);
        uint32_t second = f.gate.rx_slot[0];
        CHECK_EQ_U64(mcp_rslot(f.img, second)->state, MCP_SLOT_READY);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_READY), 1);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 3);
        COUNTERS(&f, "rx_frames=1 rx_data=1 hostq_full=?");
        CHECK(f.img->counters.hostq_full > 0, "the full host queue was not counted");
        /* and stays READY pass after pass while the host does not take the first */
        for (int i = 0; i < 5; i++)
            step(&f, US);
        CHECK_EQ_U64(mcp_rslot(f.img, second)->state, MCP_SLOT_READY);
        COUNTERS(&f, "hostq_full=? tx_ack=?");
        /* the host takes the first: READY -> IDLE on the next pass, data in the queue */
        HOST_TAKES(&f, 1);
        CHECK_EQ_U64(mcp_rslot(f.img, second)->state, MCP_SLOT_READY);
        step(&f, US);
        CHECK_EQ_U64(mcp_rslot(f.img, second)->state, MCP_SLOT_IDLE);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 4);
        COUNTERS(&f, "delivered=1");
        HOST_TAKES(&f, 2);
    }
    fx_fini(&f);
}

TEST(recv_ready_held_hostq_full_counted_once_per_pass)
{
    /* hostq_full is "passes the host queue was full" (mcp_image.h): one per pass that had a
     * READY slot it could not move */
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    c.hostq_slots = 1;
    if (fx_init(&f, &c, 1) && peer_open(&f)) {
        inject_data(&f, PISS, 1);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 delivered=1");
        inject_data(&f, PISS + 1, 2);
        step(&f, 0);
        COUNTERS(&f, "rx_frames=1 rx_data=1 hostq_full=1");
        for (int i = 0; i < 5; i++)
            step(&f, US);
        COUNTERS(&f, "hostq_full=5 tx_ack=?");
    }
    fx_fini(&f);
}

TEST(recv_intransit_to_idle_without_second_buffer)
{
    struct mcp_config c;
    struct fx f;
    struct frame fr[4];
    cfg_default(&c);
    c.recv_slots = 2;
    c.hostq_slots = 1;
    if (fx_init(&f, &c, 1) && peer_open(&f)) {
        inject_data(&f, PISS, 1); /* fills the host queue */
        step(&f, 0);
        inject_data(&f, PISS + 1, 2); /* stays READY */
        step(&f, 0);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_READY), 1);
        COUNTERS(&f, "rx_frames=2 rx_data=2 delivered=1 hostq_full=?");
        /* the third takes the last IDLE slot: INTRANSIT, then NACK NOBUF and IDLE at once */
        f.gate.rx_n = 0;
        inject_data(&f, PISS + 2, 3);
        step(&f, 0);
        RX_WAS_INTRANSIT(&f, 1);
        CHECK_EQ_U64(mcp_rslot(f.img, f.gate.rx_slot[0])->state, MCP_SLOT_IDLE);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_READY), 1);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), 1);
        int n = take_frames(&f, fr, 4);
        if (CHECK(n == 1, "%d frames", n)) {
            FRAME_IS(fr[0], MCP_FT_NACK, f.lcid, PCID, (uint8_t)(PISS + 2), ANY);
            CHECK(fr[0].h.flags & MCP_FLAG_NOBUF, "flags 0x%x", fr[0].h.flags);
        }
        COUNTERS(&f, "rx_frames=1 nack_nobuf=1 tx_nack=1 hostq_full=?");
    }
    fx_fini(&f);
}

TEST(recv_intransit_to_idle_on_crc_error)
{
    struct mcp_config c;
    struct fx f;
    uint8_t buf[MAXF];
    cfg_default(&c);
    if (fx_init(&f, &c, 1) && peer_open(&f)) {
        uint32_t len = build(buf, MCP_FT_DATA, PCID, f.lcid, PISS, 0, 0, 40, 1);
        buf[MCP_WIRE_HDR + 39] ^= 0x01;
        f.gate.rx_n = 0;
        inject_raw(&f, buf, len);
        step(&f, 0);
        RX_WAS_INTRANSIT(&f, 1);
        CHECK_EQ_U64(mcp_rslot(f.img, f.gate.rx_slot[0])->state, MCP_SLOT_IDLE);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);
        CHECK(hostq_empty(&f), "a corrupted frame reached the host");
        CHECK_SILENT(&f);
        COUNTERS(&f, "rx_frames=1 crc_errors=1");
    }
    fx_fini(&f);
}

TEST(recv_intransit_to_idle_for_protocol_frames)
{
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 1) && dut_open(&f, 2)) {
        /* ACK and NACK are processed and their buffers released at once */
        f.gate.rx_n = 0;
        inject_ctrl(&f, MCP_FT_NACK, PCID, f.lcid, (uint8_t)(f.liss + 1), 0, 0);
        inject_ctrl(&f, MCP_FT_ACK, PCID, f.lcid, 0, (uint8_t)(f.liss + 2), MCP_FLAG_ACK);
        step(&f, 0);
        RX_WAS_INTRANSIT(&f, 2);
        CHECK_EQ_U64(rslots_in(&f, MCP_SLOT_IDLE), c.recv_slots);
        CHECK_EQ_U64(mcp_send_busy(f.img, (unsigned)f.ctx), 0);
        COUNTERS(&f, "rx_frames=2 rx_nack=1 rx_ack=1 tx_retx=? nack_ignored=?");
    }
    fx_fini(&f);
}

TEST(poll_reports_work_and_idles)
{
    /* mcp.h: mcp_poll returns how much work was done; 0 means idle */
    struct mcp_config c;
    struct fx f;
    cfg_default(&c);
    if (fx_init(&f, &c, 0)) {
        f.t += US;
        CHECK_EQ_I64(mcp_poll(&f.nic, f.t), 0); /* nothing at all */
        inject_ctrl(&f, MCP_FT_SYN, PCID, 0, PISS, 0, 0);
        mcp_sim_net_set_time(f.net, f.t);
        CHECK_GE_I64(mcp_poll(&f.nic, f.t), 2); /* one frame in, one SYNACK out */
        drain(&f);
        f.t += US;
        CHECK_EQ_I64(mcp_poll(&f.nic, f.t), 0);
        post_sends(&f, 0, 1);
        f.t += US;
        CHECK_GE_I64(mcp_poll(&f.nic, f.t), 1); /* the send is taken */
    }
    fx_fini(&f);
}

TEST_MAIN()
