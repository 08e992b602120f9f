/*
 * mcp_rdp.c — the firmware main loop: RDP over an unreliable link (mcp/PROTOCOL.md).
 *
 * One pass of mcp_poll(): reset the control-frame scratch, move READY receive slots to the
 * host, receive and process a batch of frames, move again, take the hosts' READY send slots,
 * run every active peer (timers, go-back-N, new data, ACKs), flush the link.
 * Everything persistent is in the image; this file keeps no static state.
 *
 * Every store to the image goes through MCP_STORE()/MCP_RELEASE() (mcp_fw.h), and every step
 * that stores more than one field is journalled first (mcp_jr_begin/mcp_jr_end), so that an
 * executor killed anywhere in a pass leaves an image mcp_image_repair() can put right.  Single
 * stores that are consistent on their own (a timer, a flag, a counter) are not journalled.
 */
#include "mcp_fw.h"

#ifdef MCP_TEST_HOOKS
long mcp_test_store_budget;
unsigned long mcp_test_stores;
void (*mcp_test_store_hit)(void);

void mcp_test_store_point(void)
{
    mcp_test_stores++;
    if (mcp_test_store_budget > 0 && --mcp_test_store_budget == 0 && mcp_test_store_hit)
        mcp_test_store_hit();
}
#endif

struct pass {
    struct mcp_nic *nic;
    struct mcp_image *img;
    struct mcp_counters *cnt;
    uint64_t now;
    int work;
    int hostq_full_seen; /* hostq_full counts passes, not attempts */
    int rx_done;         /* the pass has taken what the link held: timers may fire */
    int link_looked;     /* timers_may_fire asked the link once (a look may cost, or count) */
    int timers_waiting;  /* a timer came due before that with frames waiting: run the peers
                          * again after receiving */
};

#define US(x) ((uint64_t)(x)*1000u)
#define MS(x) ((uint64_t)(x)*1000000u)

/* ---- small helpers ---------------------------------------------------------------------- */

static uint64_t rng_next(struct mcp_image *img)
{
    uint64_t x = img->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    MCP_STORE(img->rng, x);
    return x * 0x2545f4914f6cdd1dull;
}

/* A connection id: creation time in ms (mod 2^24, about 4.6 hours) above 8 random bits;
 * never 0.  The stamp lets a receiver tell a delayed SYN of an older incarnation from a
 * restart (serial comparison holds for restarts up to 2.3 hours apart; beyond that, and after
 * a reboot resets the clock, the peer_timeout rule in syn_in() admits the restart). */
static uint32_t new_cid(struct pass *p)
{
    uint32_t stamp = (uint32_t)(p->now / MS(1)) & 0xffffffu;
    uint32_t cid = (stamp << 8) | (uint32_t)(rng_next(p->img) & 0xffu);
    return cid ? cid : 1;
}

/* True if cid a was created (serially, in 24-bit ms) before cid b. */
static int cid_older(uint32_t a, uint32_t b)
{
    uint32_t d = ((a >> 8) - (b >> 8)) & 0xffffffu;
    return d & 0x800000u;
}

static void activate(struct pass *p, uint16_t node)
{
    uint64_t *act = MCP_AT(p->img, p->img->off_active);
    MCP_STORE(act[node / 64], act[node / 64] | 1ull << (node % 64));
}

static uint8_t inflight_count(const struct mcp_conn *c)
{
    return (uint8_t)(c->snd_nxt - c->snd_una);
}

static int has_pending_send(const struct mcp_conn *c)
{
    return c->q_head != MCP_NIL || c->snd_una != c->snd_nxt;
}

/* ---- errors back to the host ----------------------------------------------------------- */

/*
 * The order of the stores is what mcp_image_repair() relies on: the journal's fail_* fields
 * first (with the counters as they were, so a repair counts this fail exactly once); a queued
 * (READY) slot becomes INTRANSIT, so that READY means "taken" for as long as the firmware owns the
 * slot; `taken = 0`; the error entry published (full, then errq_head); IDLE last — from then on the
 * host may reuse the slot.
 */
void mcp_fw_fail_slot(struct mcp_image *img, uint32_t id, int err)
{
    struct mcp_send_slot *s = mcp_sslot(img, id);
    struct mcp_context *cx = mcp_ctx(img, s->ctx);
    uint32_t pos = cx->errq_head;
    struct mcp_send_error *e = &mcp_errq(img, s->ctx)[pos % img->cfg.send_slots];
    uint32_t ovf = MCP_LOAD_ACQ(&e->full) ? 1u : 0u;

    MCP_ORDER();
    MCP_STORE(img->journal.fail_slot, MCP_NIL);
    MCP_ORDER();
    MCP_STORE(img->journal.fail_pos, pos);
    MCP_STORE(img->journal.fail_ovf, ovf);
    MCP_STORE(img->journal.fail_errors, img->counters.send_errors);
    MCP_STORE(img->journal.fail_overflows, img->counters.errq_overflow);
    MCP_ORDER();
    MCP_STORE(img->journal.fail_slot, id);
    MCP_ORDER();
    /* counters a repair restores are stored like the step's fields */
    MCP_STORE(img->counters.send_errors, img->counters.send_errors + 1);
    if (ovf)
        MCP_STORE(img->counters.errq_overflow, img->counters.errq_overflow + 1);
    if (MCP_LOAD_ACQ(&s->state) == MCP_SLOT_READY)
        MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_INTRANSIT);
    MCP_ORDER();
    MCP_STORE(s->error, err);
    MCP_STORE(s->taken, 0);
    if (!ovf) {
        mcp_fw_errq_write(img, e, s, id, err);
        MCP_STORE(cx->errq_head, pos + 1);
    }
    MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_IDLE);
}

void mcp_fw_conn_clear(struct mcp_image *img, struct mcp_conn *c, uint64_t last_rx)
{
    (void)img;
    MCP_STORE_POINT();
    memset(c, 0, offsetof(struct mcp_conn, inflight));
    MCP_STORE(c->q_head, MCP_NIL);
    MCP_STORE(c->q_tail, MCP_NIL);
    MCP_STORE(c->last_rx_ns, last_rx);
}

/* Fail every pending send of connection c and close it.  Journalled: a repair finishes it. */
static void conn_reset(struct pass *p, struct mcp_conn *c, int err)
{
    struct mcp_image *img = p->img;
    struct mcp_journal j = {.op = MCP_J_RESET,
                            .node = mcp_conn_node(img, c),
                            .a = c->snd_una,
                            .b = c->snd_nxt,
                            .c = c->q_head,
                            .err = err,
                            .t = c->last_rx_ns};

    mcp_jr_begin(img, &j);
    while (c->snd_una != c->snd_nxt) {
        mcp_fw_fail_slot(img, c->inflight[c->snd_una % MCP_MAX_WINDOW], err);
        MCP_STORE(c->snd_una, c->snd_una + 1);
    }
    while (c->q_head != MCP_NIL) {
        uint32_t id = c->q_head;
        uint32_t next = mcp_sslot(img, id)->next;
        mcp_fw_fail_slot(img, id, err);
        MCP_STORE(c->q_head, next);
    }
    mcp_fw_conn_clear(img, c, j.t);
    mcp_jr_end(img);
}

/* Choose our connection id and initial sequence number (c is CLOSED: nothing in flight). */
static void conn_open(struct pass *p, struct mcp_conn *c)
{
    struct mcp_image *img = p->img;
    uint32_t cid = new_cid(p);
    uint8_t iss = (uint8_t)rng_next(img);
    struct mcp_journal j = {.op = MCP_J_OPEN, .node = mcp_conn_node(img, c), .a = cid, .b = iss};

    mcp_jr_begin(img, &j);
    MCP_STORE(c->state, (uint32_t)MCP_CONN_OPEN);
    MCP_STORE(c->local_cid, cid);
    MCP_STORE(c->iss, iss);
    MCP_STORE(c->snd_una, iss);
    MCP_STORE(c->snd_nxt, iss);
    MCP_STORE(c->snd_tx, iss);
    MCP_STORE(c->confirmed, 0);
    MCP_STORE(c->rto_us, img->cfg.rto_us);
    mcp_jr_end(img);
}

/* The peer's connection id and initial sequence number (SYN, SYNACK). */
static void conn_learn(struct pass *p, struct mcp_conn *c, uint32_t cid, uint8_t seq)
{
    struct mcp_image *img = p->img;
    struct mcp_journal j = {.op = MCP_J_LEARN, .node = mcp_conn_node(img, c), .a = cid, .b = seq};

    mcp_jr_begin(img, &j);
    MCP_STORE(c->peer_cid, cid);
    MCP_STORE(c->rcv_nxt, seq);
    MCP_STORE(c->have_peer, 1);
    MCP_STORE(c->ack_pending, 0);
    MCP_STORE(c->nack_valid, 0);
    mcp_jr_end(img);
}

/* ---- transmitting ------------------------------------------------------------------------ */

static void hdr_init(struct pass *p, struct mcp_wire_hdr *h, uint8_t type, uint16_t dst,
                     const struct mcp_conn *c)
{
    memset(h, 0, sizeof(*h));
    h->magic = MCP_WIRE_MAGIC;
    h->version = MCP_WIRE_VERSION;
    h->type = type;
    h->src_node = p->img->cfg.node_id;
    h->dst_node = dst;
    h->src_cid = c->local_cid;
    h->dst_cid = c->peer_cid;
    if (c->have_peer) {
        h->flags = MCP_FLAG_ACK;
        h->ack = c->rcv_nxt;
    }
}

static int link_tx(struct pass *p, uint16_t dst, const uint8_t *frame, uint32_t len)
{
    int rc = lanai_tx(p->nic->link, dst, frame, len);
    if (rc) {
        if (rc == -EAGAIN)
            p->cnt->tx_busy++;
        return rc;
    }
    p->cnt->tx_bytes += len;
    p->work++;
    return 0;
}

/* Send a header-only frame built from h. Returns 0 or -EAGAIN (no scratch or link busy). */
static int send_ctrl(struct pass *p, struct mcp_wire_hdr *h)
{
    struct mcp_nic *nic = p->nic;
    if (nic->ctrl_used >= MCP_CTRL_FRAMES) {
        p->cnt->tx_busy++;
        return -EAGAIN;
    }
    uint8_t *f = nic->ctrl[nic->ctrl_used];
    mcp_wire_put(f, h);
    mcp_wire_seal(f, MCP_WIRE_HDR);
    if (link_tx(p, h->dst_node, f, MCP_WIRE_HDR))
        return -EAGAIN;
    nic->ctrl_used++;
    return 0;
}

static void send_syn(struct pass *p, uint16_t node, struct mcp_conn *c, uint8_t type)
{
    struct mcp_wire_hdr h;
    hdr_init(p, &h, type, node, c);
    h.flags = 0;
    h.ack = 0;
    h.seq = c->iss;
    if (type == MCP_FT_SYN)
        h.dst_cid = 0;
    if (!send_ctrl(p, &h))
        p->cnt->tx_ctrl++;
}

static void send_ack(struct pass *p, uint16_t node, struct mcp_conn *c)
{
    struct mcp_wire_hdr h;
    hdr_init(p, &h, MCP_FT_ACK, node, c);
    if (!send_ctrl(p, &h)) {
        p->cnt->tx_ack++;
        MCP_STORE(c->ack_pending, 0);
    }
}

static void send_nack(struct pass *p, uint16_t node, struct mcp_conn *c, uint8_t flags)
{
    struct mcp_wire_hdr h;
    hdr_init(p, &h, MCP_FT_NACK, node, c);
    h.seq = c->rcv_nxt;
    h.flags |= flags;
    if (!send_ctrl(p, &h)) {
        p->cnt->tx_nack++;
        MCP_STORE(c->nack_valid, 1);
        MCP_STORE(c->nack_seq, c->rcv_nxt);
        MCP_STORE(c->nack_ns, p->now);
        MCP_STORE(c->ack_pending, 0); /* the NACK carries the cumulative ACK too */
    }
}

static void send_rst(struct pass *p, uint16_t node, uint32_t their_cid, uint32_t our_cid)
{
    struct mcp_wire_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = MCP_WIRE_MAGIC;
    h.version = MCP_WIRE_VERSION;
    h.type = MCP_FT_RST;
    h.src_node = p->img->cfg.node_id;
    h.dst_node = node;
    h.src_cid = our_cid;
    h.dst_cid = their_cid;
    if (!send_ctrl(p, &h))
        p->cnt->tx_ctrl++;
}

/* (Re)transmit send slot id with its sequence number; piggybacks our ACK. */
static int send_data(struct pass *p, uint16_t node, struct mcp_conn *c, uint32_t id)
{
    struct mcp_send_slot *s = mcp_sslot(p->img, id);
    uint8_t *f = mcp_sframe(p->img, id);
    struct mcp_wire_hdr h;

    hdr_init(p, &h, MCP_FT_DATA, node, c);
    h.seq = s->seq;
    h.len = (uint16_t)s->len;
    MCP_STORE_POINT();
    mcp_wire_put(f, &h);
    if (s->pcrc_set) /* the host's CRC of the payload, until it has gone out once */
        mcp_wire_seal_hdr(f, s->pcrc);
    else
        mcp_wire_seal(f, MCP_WIRE_HDR + s->len);
    int rc = link_tx(p, node, f, MCP_WIRE_HDR + s->len);
    if (rc)
        return rc == -EAGAIN ? -EAGAIN : rc;
    if (s->pcrc_set) /* a retransmission computes it: a wrong one from the host costs one frame */
        MCP_STORE(s->pcrc_set, 0);
    MCP_STORE(c->ack_pending, 0);
    MCP_STORE(s->tx_ns, p->now);
    if (!c->rto_deadline)
        MCP_STORE(c->rto_deadline, p->now + US(c->rto_us));
    return 0;
}

/*
 * The retransmission timeout while data is in flight: SRTT + 4 RTTVAR of this connection's
 * round trips (RFC 6298), at least the configured rto_us and at most rto_max_us.  A window of
 * large frames can take longer to be acknowledged than the configured floor on a busy host, and
 * a timeout below that sent whole windows twice.
 */
static uint32_t rto_estimate(const struct mcp_config *cfg, const struct mcp_conn *c)
{
    uint64_t r = c->srtt_us ? (uint64_t)c->srtt_us + 4u * (uint64_t)c->rttvar_us : cfg->rto_us;
    if (r < cfg->rto_us)
        r = cfg->rto_us;
    if (r > cfg->rto_max_us)
        r = cfg->rto_max_us;
    return (uint32_t)r;
}

/* Take one round-trip sample (ns) into SRTT and RTTVAR (gains 1/8 and 1/4, RFC 6298). */
static void rtt_sample(struct mcp_conn *c, uint64_t rtt_ns)
{
    uint64_t us = rtt_ns / 1000u;
    uint32_t r = us < 1 ? 1 : us > 100000000u ? 100000000u : (uint32_t)us;
    if (!c->srtt_us) {
        MCP_STORE(c->srtt_us, r);
        MCP_STORE(c->rttvar_us, r / 2);
        return;
    }
    uint32_t d = c->srtt_us > r ? c->srtt_us - r : r - c->srtt_us;
    MCP_STORE(c->rttvar_us, (uint32_t)(((uint64_t)c->rttvar_us * 3 + d) / 4));
    MCP_STORE(c->srtt_us, (uint32_t)(((uint64_t)c->srtt_us * 7 + r) / 8));
}

/* Go back N: every slot from seq on is marked for retransmission. */
static void go_back_n(struct pass *p, struct mcp_conn *c, uint8_t seq)
{
    /* Not journalled: the state of an in-flight slot follows from snd_tx (repair). */
    for (uint8_t q = seq; q != c->snd_nxt; q++)
        MCP_RELEASE(&mcp_sslot(p->img, c->inflight[q % MCP_MAX_WINDOW])->state,
                    (uint32_t)MCP_SLOT_RETRANSMIT);
    MCP_STORE(c->snd_tx, seq);
    MCP_STORE(c->gbn_valid, 1);
    MCP_STORE(c->gbn_seq, seq);
    MCP_STORE(c->gbn_ns, p->now);
}

/*
 * Whether a peer's due timer (dead peer, retransmission, SYN) may fire in this pass: not
 * before the pass has taken the frames that wait on the link.  The ACKs of a whole window may
 * sit there because nobody ran the firmware for longer than the timeout (a sender copying a
 * large message into its send slots, psid napping while its clients poll); firing first
 * retransmitted that window for nothing.  Otherwise the pass runs the peers again after its
 * receive half (mcp_poll).
 */
static int timers_may_fire(struct pass *p)
{
    if (p->rx_done)
        return 1;
    if (!p->link_looked) { /* once per pass, however many peers are due */
        p->link_looked = 1;
        p->timers_waiting = lanai_pending(p->nic->link);
    }
    return !p->timers_waiting;
}

/* Timers of one peer: retransmission timeout, SYN resend, dead peer. */
static void peer_timers(struct pass *p, uint16_t node, struct mcp_conn *c)
{
    const struct mcp_config *cfg = &p->img->cfg;
    uint64_t since = c->last_rx_ns > c->wait_since_ns ? c->last_rx_ns : c->wait_since_ns;
    int dead_due = has_pending_send(c) && p->now - since > MS(cfg->peer_timeout_ms);
    int rto_due = c->rto_deadline && p->now >= c->rto_deadline;

    if (!(dead_due || rto_due) || !timers_may_fire(p))
        return;
    if (dead_due) {
        p->cnt->peers_dead++;
        conn_reset(p, c, -ETIMEDOUT);
        return;
    }
    if (c->state == MCP_CONN_OPEN && !c->confirmed && has_pending_send(c)) {
        send_syn(p, node, c, MCP_FT_SYN);
    } else if (c->confirmed && c->snd_una != c->snd_nxt) {
        p->cnt->timeouts++;
        go_back_n(p, c, c->snd_una);
        MCP_STORE(c->retx_after_ns, 0);
    } else {
        MCP_STORE(c->rto_deadline, 0);
        return;
    }
    MCP_STORE(c->rto_us, c->rto_us * 2 > cfg->rto_max_us ? cfg->rto_max_us : c->rto_us * 2);
    MCP_STORE(c->rto_deadline, p->now + US(c->rto_us));
}

/* Run one peer: timers, opening, retransmissions, new data, ACK. Returns 1 if still active. */
static int peer_run(struct pass *p, uint16_t node)
{
    struct mcp_image *img = p->img;
    struct mcp_conn *c = mcp_conn(img, node);

    peer_timers(p, node, c);

    if (c->q_head != MCP_NIL && c->state == MCP_CONN_CLOSED)
        conn_open(p, c);
    /* Work for a peer that does not know us yet: SYN now, then on the timer.  This covers a
     * connection the peer opened (we answered its SYN) as well as our own. */
    if (has_pending_send(c) && !c->confirmed && !c->rto_deadline) {
        send_syn(p, node, c, MCP_FT_SYN);
        MCP_STORE(c->syn_ns, p->now);
        MCP_STORE(c->rto_deadline, p->now + US(c->rto_us));
    }
    if (c->confirmed) {
        if (c->snd_tx != c->snd_nxt && p->now >= c->retx_after_ns) {
            while (c->snd_tx != c->snd_nxt) {
                uint32_t id = c->inflight[c->snd_tx % MCP_MAX_WINDOW];
                int rc = send_data(p, node, c, id);
                if (rc == -EAGAIN)
                    break;
                if (rc) { /* the link cannot reach the peer any more */
                    conn_reset(p, c, rc);
                    return 0;
                }
                MCP_STORE(mcp_sslot(img, id)->retx, 1);
                MCP_RELEASE(&mcp_sslot(img, id)->state, (uint32_t)MCP_SLOT_INTRANSIT);
                p->cnt->tx_retx++;
                MCP_STORE(c->snd_tx, c->snd_tx + 1);
            }
        }
        while (c->snd_tx == c->snd_nxt && c->q_head != MCP_NIL &&
               inflight_count(c) < img->cfg.window) {
            uint32_t id = c->q_head;
            struct mcp_send_slot *s = mcp_sslot(img, id);
            MCP_STORE(s->seq, c->snd_nxt);
            MCP_STORE(s->retx, 0);
            int rc = send_data(p, node, c, id);
            if (rc == -EAGAIN)
                break;
            uint32_t next = s->next;
            if (rc) { /* this frame cannot go (no route, too long): fail it alone */
                struct mcp_journal j = {
                    .op = MCP_J_QFAIL, .node = node, .slot = id, .c = next, .err = rc};
                mcp_jr_begin(img, &j);
                mcp_fw_fail_slot(img, id, rc);
                MCP_STORE(c->q_head, next);
                if (next == MCP_NIL)
                    MCP_STORE(c->q_tail, MCP_NIL);
                mcp_jr_end(img);
                continue;
            }
            /* The frame may be on the wire: a repair completes this step. */
            struct mcp_journal j = {.op = MCP_J_SEND,
                                    .node = node,
                                    .slot = id,
                                    .a = c->snd_nxt,
                                    .c = next,
                                    .cnt = p->cnt->tx_data};
            mcp_jr_begin(img, &j);
            MCP_STORE(c->q_head, next);
            if (next == MCP_NIL)
                MCP_STORE(c->q_tail, MCP_NIL);
            MCP_STORE(c->inflight[c->snd_nxt % MCP_MAX_WINDOW], id);
            MCP_STORE(c->snd_nxt, c->snd_nxt + 1);
            MCP_STORE(c->snd_tx, c->snd_nxt);
            MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_INTRANSIT);
            MCP_STORE(p->cnt->tx_data, p->cnt->tx_data + 1);
            mcp_jr_end(img);
        }
    }
    uint32_t asap = MCP_LOAD_ACQ(&c->ack_asap);
    if (c->ack_pending &&
        (c->ack_pending >= (img->cfg.window + 1) / 2 || p->now >= c->ack_due_ns || asap))
        send_ack(p, node, c);
    if (asap)
        MCP_STORE(c->ack_asap, 0u);

    if (has_pending_send(c) || c->ack_pending)
        return 1;
    return c->state == MCP_CONN_OPEN && !c->confirmed && c->rto_deadline;
}

/* ---- host send rings -------------------------------------------------------------------- */

static void take_context(struct pass *p, unsigned ci)
{
    struct mcp_image *img = p->img;
    const struct mcp_config *cfg = &img->cfg;
    struct mcp_context *cx = mcp_ctx(img, ci);
    uint32_t state = MCP_LOAD_ACQ(&cx->state);
    uint32_t head = MCP_LOAD_ACQ(&cx->head);

    if (state == MCP_CTX_FREE)
        return;
    while (cx->accept != head) {
        uint32_t id = ci * cfg->send_slots + cx->accept % cfg->send_slots;
        struct mcp_send_slot *s = mcp_sslot(img, id);
        uint16_t dst = s->dst;
        struct mcp_journal j = {
            .op = MCP_J_TAKE, .ctx = (uint16_t)ci, .slot = id, .a = cx->accept, .err = -EINVAL};
        p->work++;
        if (dst >= cfg->max_nodes || dst == cfg->node_id || s->len > cfg->slot_size) {
            j.c = 1; /* failed at once; the slot is the firmware's from `taken` on */
            mcp_jr_begin(img, &j);
            MCP_STORE(cx->accept, cx->accept + 1);
            MCP_STORE(s->taken, 1);
            mcp_fw_fail_slot(img, id, -EINVAL);
            mcp_jr_end(img);
            continue;
        }
        struct mcp_conn *c = mcp_conn(img, dst);
        j.node = dst;
        j.b = c->q_tail;
        if (!has_pending_send(c)) {
            j.c = 2; /* the connection starts waiting now */
            j.t = p->now;
        }
        mcp_jr_begin(img, &j);
        MCP_STORE(cx->accept, cx->accept + 1);
        if (j.c == 2)
            MCP_STORE(c->wait_since_ns, j.t);
        MCP_STORE(s->next, MCP_NIL);
        MCP_STORE(s->error, 0);
        MCP_STORE(s->taken, 1);
        if (j.b == MCP_NIL)
            MCP_STORE(c->q_head, id);
        else
            MCP_STORE(mcp_sslot(img, j.b)->next, id);
        MCP_STORE(c->q_tail, id);
        activate(p, dst);
        mcp_jr_end(img);
    }
    if (state != MCP_CTX_CLOSING)
        return;
    /* A closing context is freed once all its slots are IDLE. A slot READY but never taken
     * belongs to an owner that died between filling it and publishing it: drop it.  (With a
     * full ring the slot at head is the oldest posted send, taken and still queued.) */
    struct mcp_send_slot *next = mcp_sslot(img, ci * cfg->send_slots + head % cfg->send_slots);
    if (MCP_LOAD_ACQ(&next->state) == MCP_SLOT_READY && !next->taken)
        MCP_RELEASE(&next->state, (uint32_t)MCP_SLOT_IDLE);
    for (uint32_t i = 0; i < cfg->send_slots; i++)
        if (MCP_LOAD_ACQ(&mcp_sslot(img, ci * cfg->send_slots + i)->state) != MCP_SLOT_IDLE)
            return;
    /* a repair sets the bit again if the context is not FREE yet */
    MCP_STORE_POINT();
    __atomic_and_fetch(&img->ctx_mask, ~(1ull << ci), __ATOMIC_ACQ_REL);
    MCP_RELEASE(&cx->state, (uint32_t)MCP_CTX_FREE);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* Not journalled: the free stack and the receive slot states follow from the ready FIFO. */
static void rx_release(struct mcp_image *img, uint32_t r)
{
    uint32_t *free_stack = MCP_AT(img, img->off_rx_free);
    MCP_STORE(mcp_rslot(img, r)->state, (uint32_t)MCP_SLOT_IDLE);
    MCP_STORE(free_stack[img->rx_free_top], r);
    MCP_STORE(img->rx_free_top, img->rx_free_top + 1);
}

/* Release the slots before ack.  Journalled; a repair completes it (the host may have reused a
 * released slot already). */
static void ack_in(struct pass *p, struct mcp_conn *c, uint8_t ack, int standalone)
{
    int n = mcp_seq_diff(ack, c->snd_una);
    int f = inflight_count(c);

    if (n <= 0) {
        if (standalone)
            p->cnt->ack_dup++;
        return;
    }
    if (n > f) {
        p->cnt->ack_bad++;
        return;
    }
    struct mcp_image *img = p->img;
    /* Karn's rule: a frame sent more than once gives no sample (which copy was ACKed?).  Not
     * journalled: the estimate is advice, and a repair starts the timer from the floor. */
    const struct mcp_send_slot *newest =
        mcp_sslot(img, c->inflight[(uint8_t)(ack - 1) % MCP_MAX_WINDOW]);
    if (!newest->retx && p->now >= newest->tx_ns)
        rtt_sample(c, p->now - newest->tx_ns);
    uint32_t rto = rto_estimate(&img->cfg, c);
    struct mcp_journal j = {.op = MCP_J_ACK,
                            .node = mcp_conn_node(img, c),
                            .a = c->snd_una,
                            .b = ack,
                            .t = ack != c->snd_nxt ? p->now + US(rto) : 0};
    mcp_jr_begin(img, &j);
    for (int k = 0; k < n; k++) {
        struct mcp_send_slot *s =
            mcp_sslot(img, c->inflight[(uint8_t)(c->snd_una + k) % MCP_MAX_WINDOW]);
        MCP_STORE(s->taken, 0);
        MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_IDLE);
    }
    MCP_STORE(c->snd_una, ack);
    if (mcp_seq_diff(c->snd_tx, c->snd_una) < 0)
        MCP_STORE(c->snd_tx, c->snd_una);
    MCP_STORE(c->rto_us, rto);
    MCP_STORE(c->rto_deadline, j.t);
    mcp_jr_end(img);
    p->work++;
}

static void nack_in(struct pass *p, struct mcp_conn *c, const struct mcp_wire_hdr *h)
{
    const struct mcp_config *cfg = &p->img->cfg;
    uint8_t seq = h->seq;

    p->cnt->rx_nack++;
    ack_in(p, c, seq, 0); /* everything before seq has arrived */
    if (seq != c->snd_una || c->snd_una == c->snd_nxt || mcp_seq_diff(c->snd_tx, seq) <= 0 ||
        (c->gbn_valid && c->gbn_seq == seq && p->now - c->gbn_ns < US(cfg->nack_interval_us))) {
        p->cnt->nack_ignored++;
        return;
    }
    go_back_n(p, c, seq);
    if (h->flags & MCP_FLAG_NOBUF)
        MCP_STORE(c->retx_after_ns, p->now + US(cfg->nobuf_backoff_us));
    MCP_STORE(c->rto_deadline, p->now + US(c->rto_us));
}

/* Returns 1 if the receive slot r now holds accepted data (READY), 0 if it is to be freed. */
static int data_in(struct pass *p, uint16_t node, struct mcp_conn *c, const struct mcp_wire_hdr *h,
                   uint32_t r)
{
    struct mcp_image *img = p->img;
    int d = mcp_seq_diff(h->seq, c->rcv_nxt);

    if (d < 0) { /* DATA <: our ACK was lost or late: ACK again at once */
        p->cnt->rx_dup++;
        if (!c->ack_pending)
            MCP_STORE(c->ack_pending, 1);
        MCP_STORE(c->ack_due_ns, p->now);
        return 0;
    }
    if (d > 0) { /* DATA >: data before it was lost: NACK, once per gap per interval */
        p->cnt->rx_gap++;
        if (!(c->nack_valid && c->nack_seq == c->rcv_nxt &&
              p->now - c->nack_ns < US(img->cfg.nack_interval_us)))
            send_nack(p, node, c, 0);
        return 0;
    }
    if (img->rx_free_top == 0) { /* DATA = but no second free buffer */
        p->cnt->nack_nobuf++;
        send_nack(p, node, c, MCP_FLAG_NOBUF);
        return 0;
    }
    /* Journalled; a repair undoes it: the frame is not acknowledged, the peer sends it again. */
    struct mcp_recv_slot *rs = mcp_rslot(img, r);
    uint32_t *ready = MCP_AT(img, img->off_rx_ready);
    uint32_t tail = img->rx_ready_tail;
    struct mcp_journal j = {.op = MCP_J_ACCEPT,
                            .node = node,
                            .slot = r,
                            .a = c->rcv_nxt | (uint32_t)c->ack_pending << 8 |
                                 (uint32_t)c->nack_valid << 16,
                            .b = tail,
                            .t = c->ack_due_ns,
                            .cnt = p->cnt->rx_data};
    mcp_jr_begin(img, &j);
    MCP_STORE(rs->state, (uint32_t)MCP_SLOT_READY);
    MCP_STORE(rs->len, h->len);
    MCP_STORE(rs->src, node);
    MCP_STORE(ready[tail % img->cfg.recv_slots], r);
    MCP_STORE(img->rx_ready_tail, tail + 1);
    MCP_STORE(c->rcv_nxt, c->rcv_nxt + 1);
    MCP_STORE(c->nack_valid, 0);
    if (!c->ack_pending)
        MCP_STORE(c->ack_due_ns, p->now + US(img->cfg.ack_delay_us));
    if (c->ack_pending < 255)
        MCP_STORE(c->ack_pending, c->ack_pending + 1);
    MCP_STORE(p->cnt->rx_data, p->cnt->rx_data + 1);
    mcp_jr_end(img);
    return 1;
}

static void syn_in(struct pass *p, uint16_t node, struct mcp_conn *c, const struct mcp_wire_hdr *h)
{
    if (c->have_peer && h->src_cid == c->peer_cid) { /* duplicate SYN: answer again */
        MCP_STORE(c->last_rx_ns, p->now);
        send_syn(p, node, c, MCP_FT_SYNACK);
        return;
    }
    if (c->have_peer) {
        if (cid_older(h->src_cid, c->peer_cid) &&
            p->now - c->last_rx_ns < MS(p->img->cfg.peer_timeout_ms)) {
            p->cnt->stale++; /* a delayed SYN of an older incarnation */
            return;
        }
        p->cnt->peer_resets++;
        conn_reset(p, c, -ECONNRESET);
    }
    if (c->state == MCP_CONN_CLOSED)
        conn_open(p, c);
    conn_learn(p, c, h->src_cid, h->seq);
    MCP_STORE(c->last_rx_ns, p->now);
    send_syn(p, node, c, MCP_FT_SYNACK);
    activate(p, node);
}

static void synack_in(struct pass *p, uint16_t node, struct mcp_conn *c,
                      const struct mcp_wire_hdr *h)
{
    if (c->state == MCP_CONN_CLOSED || h->dst_cid != c->local_cid ||
        (c->have_peer && h->src_cid != c->peer_cid)) {
        p->cnt->stale++;
        return;
    }
    if (!c->have_peer)
        conn_learn(p, c, h->src_cid, h->seq);
    MCP_STORE(c->last_rx_ns, p->now);
    if (!c->confirmed) {
        /* The SYN's timer stops; data (sent only from now on) arms its own.  A duplicate
         * SYNACK (the answer to a retransmitted SYN) must not touch the timer: data may be in
         * flight, and without a deadline a lost ACK would stall the connection until the
         * peer is declared dead. */
        MCP_STORE(c->confirmed, 1);
        MCP_STORE(c->rto_us, p->img->cfg.rto_us);
        MCP_STORE(c->rto_deadline, 0);
    }
    activate(p, node);
}

/* Process one received frame in receive slot r of flen bytes, fcs as the link took it (lanai.h
 * rx_fcs). Returns 1 if r was kept. */
static int frame_in(struct pass *p, uint32_t r, uint32_t flen, uint64_t fcs)
{
    struct mcp_image *img = p->img;
    const struct mcp_config *cfg = &img->cfg;
    struct mcp_wire_hdr h;

    p->cnt->rx_frames++;
    p->cnt->rx_bytes += flen;
    p->work++;
    if (flen > img->frame_stride) { /* truncated by the link: longer than any slot */
        p->cnt->malformed++;
        return 0;
    }
    uint32_t payload_crc = (uint32_t)fcs;
    switch (mcp_wire_check_fcs(mcp_rframe(img, r), flen, cfg->slot_size,
                               (fcs & LANAI_FCS_VALID) ? &payload_crc : NULL, &h)) {
    case MCP_WIRE_OK:
        break;
    case MCP_WIRE_CRC_BAD:
        p->cnt->crc_errors++; /* table 1, CRC: ignore the packet */
        return 0;
    default:
        p->cnt->malformed++;
        return 0;
    }
    if (h.dst_node != cfg->node_id || h.src_node >= cfg->max_nodes || h.src_node == cfg->node_id) {
        p->cnt->wrong_dest++;
        return 0;
    }
    struct mcp_conn *c = mcp_conn(img, h.src_node);
    switch (h.type) {
    case MCP_FT_SYN:
        syn_in(p, h.src_node, c, &h);
        return 0;
    case MCP_FT_SYNACK:
        synack_in(p, h.src_node, c, &h);
        return 0;
    case MCP_FT_RST:
        if (c->state != MCP_CONN_CLOSED && h.dst_cid == c->local_cid) {
            p->cnt->peer_resets++;
            conn_reset(p, c, -ECONNRESET);
        } else {
            p->cnt->stale++;
        }
        return 0;
    default:
        break;
    }
    /* DATA, ACK, NACK: only on the connection both sides know. */
    if (c->state == MCP_CONN_CLOSED || h.dst_cid != c->local_cid) {
        p->cnt->stale++;
        if (h.type == MCP_FT_DATA)
            send_rst(p, h.src_node, h.src_cid, c->local_cid);
        return 0;
    }
    if (!c->have_peer || h.src_cid != c->peer_cid) {
        p->cnt->stale++;
        return 0;
    }
    MCP_STORE(c->last_rx_ns, p->now);
    if (!c->confirmed) {
        MCP_STORE(c->confirmed, 1);
        MCP_STORE(c->rto_deadline, 0);
    }
    activate(p, h.src_node);
    if (h.flags & MCP_FLAG_ACK)
        ack_in(p, c, h.ack, h.type == MCP_FT_ACK);
    if (h.type == MCP_FT_ACK) {
        p->cnt->rx_ack++;
        return 0;
    }
    if (h.type == MCP_FT_NACK) {
        nack_in(p, c, &h);
        return 0;
    }
    return data_in(p, h.src_node, c, &h, r);
}

static void receive(struct pass *p)
{
    struct mcp_image *img = p->img;
    uint32_t *free_stack = MCP_AT(img, img->off_rx_free);
    uint32_t idle = img->rx_free_top;
    uint32_t n;

    /* nothing waits: skip taking (and giving back) a batch of slots, which costs more than
     * the look itself when the link reads a ring rather than a socket */
    if (!idle || !lanai_pending(p->nic->link))
        return;
    /* Not cleared: the first n are written below and the link reads no more.  Cleared at
     * their declaration (to quiet a gcc warning) they cost a 512-byte `rep stos` at every
     * pass, idle ones too. */
    void *bufs[64];
    uint32_t slots[64], lens[64];
    uint64_t fcs[64];
    /* Keep the last IDLE slot out of the batch while there are others, so frames taken in
     * this batch can pass the second-free-buffer check; with one left, take it (and NACK). */
    n = idle > 1 ? idle - 1 : 1;
    if (n > img->cfg.rx_batch)
        n = img->cfg.rx_batch;
    for (uint32_t i = 0; i < n; i++) {
        MCP_STORE(img->rx_free_top, img->rx_free_top - 1);
        slots[i] = free_stack[img->rx_free_top];
        MCP_STORE(mcp_rslot(img, slots[i])->state, (uint32_t)MCP_SLOT_INTRANSIT);
        bufs[i] = mcp_rframe(img, slots[i]);
    }
    int got = lanai_rx_fcs(p->nic->link, bufs, img->frame_stride, lens, fcs, (int)n);
    if (got < 0)
        got = 0;
    for (uint32_t i = (uint32_t)got; i < n; i++)
        rx_release(img, slots[n - 1 - i + (uint32_t)got]);
    for (int i = 0; i < got; i++)
        if (!frame_in(p, slots[i], lens[i], fcs[i]))
            rx_release(img, slots[i]);
}

/* Move READY receive slots, oldest first, into the host queue (the paper's DMA). */
static void deliver(struct pass *p)
{
    struct mcp_image *img = p->img;
    const struct mcp_config *cfg = &img->cfg;
    uint32_t *ready = MCP_AT(img, img->off_rx_ready);
    int moved = 0;

    while (img->rx_ready_head != img->rx_ready_tail) {
        uint32_t q = img->hostq_head % cfg->hostq_slots;
        struct mcp_hostq_entry *e = mcp_hostq(img, q);
        if (MCP_LOAD_ACQ(&e->full)) {
            if (!p->hostq_full_seen++)
                p->cnt->hostq_full++;
            break;
        }
        /* Journalled: undone by a repair if the entry never became full, completed if the
         * host may have seen it. */
        uint32_t r = ready[img->rx_ready_head % cfg->recv_slots];
        struct mcp_recv_slot *rs = mcp_rslot(img, r);
        /* The frame's buffer becomes the entry's and the entry's (which the host is done
         * with: not full) the slot's: no copy.  The journal keeps both, a repair sets them
         * as the step ends up done or undone. */
        uint32_t frame_buf = rs->buf, entry_buf = e->buf;
        struct mcp_journal j = {.op = MCP_J_DELIVER,
                                .slot = r,
                                .a = img->hostq_head,
                                .b = img->rx_ready_head,
                                .c = entry_buf,
                                .t = frame_buf,
                                .cnt = p->cnt->delivered};
        mcp_jr_begin(img, &j);
        MCP_STORE(e->buf, frame_buf);
        MCP_STORE(rs->buf, entry_buf);
        MCP_STORE(e->src, rs->src);
        MCP_STORE(e->len, rs->len);
        MCP_RELEASE(&e->full, 1u);
        MCP_STORE(img->hostq_head, j.a + 1);
        MCP_STORE(img->rx_ready_head, j.b + 1);
        rx_release(img, r);
        MCP_STORE(p->cnt->delivered, p->cnt->delivered + 1);
        mcp_jr_end(img);
        moved++;
    }
    if (moved) {
        MCP_STORE_POINT();
        __atomic_add_fetch(&img->rx_event, 1u, __ATOMIC_RELEASE);
        p->work += moved;
    }
}

/* ---- the main loop ------------------------------------------------------------------------ */

/* Run every peer with work; clears the active bit of those left without any. */
static void run_peers(struct pass *p)
{
    uint64_t *act = MCP_AT(p->img, p->img->off_active);
    unsigned words = (p->img->cfg.max_nodes + 63u) / 64u;

    for (unsigned w = 0; w < words; w++) {
        uint64_t bits = act[w];
        while (bits) {
            unsigned b = (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (!peer_run(p, (uint16_t)(w * 64 + b)))
                MCP_STORE(act[w], act[w] & ~(1ull << b));
        }
    }
}

/* Hand queued frames to the wire; the control-frame scratch is free again afterwards. */
static void flush(struct pass *p)
{
    lanai_flush(p->nic->link);
    p->nic->ctrl_used = 0;
}

/*
 * One pass.  Transmitting comes before receiving so that a host's send goes out without a
 * receive system call in front of it (that ordering is worth about 0.5 us of latency here);
 * peers run a second time only if receiving gave them something to answer (ACK, NACK,
 * retransmission, SYNACK).
 */
/* The sending half of a pass: posted sends taken, peers run, frames handed to the wire. */
static void transmit(struct pass *p)
{
    struct mcp_image *img = p->img;

    p->nic->ctrl_used = 0;
    deliver(p);
    uint64_t ctxs = __atomic_load_n(&img->ctx_mask, __ATOMIC_ACQUIRE);
    while (ctxs) {
        unsigned ci = (unsigned)__builtin_ctzll(ctxs);
        ctxs &= ctxs - 1;
        take_context(p, ci);
    }
    run_peers(p);
    if (p->work)
        flush(p);
}

int mcp_poll_send(struct mcp_nic *nic, uint64_t now_ns)
{
    struct pass p = {.nic = nic, .img = nic->img, .cnt = &nic->img->counters, .now = now_ns};

    transmit(&p);
    return p.work;
}

int mcp_peer_restarted(struct mcp_nic *nic, uint16_t node, uint64_t now_ns)
{
    struct mcp_image *img = nic->img;
    if (node >= img->cfg.max_nodes || node == img->cfg.node_id)
        return -EINVAL;
    struct mcp_conn *c = mcp_conn(img, node);
    if (c->state == MCP_CONN_CLOSED)
        return 0;
    struct pass p = {.nic = nic, .img = img, .cnt = &img->counters, .now = now_ns};
    p.cnt->peer_resets++;
    conn_reset(&p, c, -ECONNRESET);
    return 1;
}

int mcp_poll(struct mcp_nic *nic, uint64_t now_ns)
{
    struct mcp_image *img = nic->img;
    struct pass p = {.nic = nic, .img = img, .cnt = &img->counters, .now = now_ns};

    transmit(&p);

    int before = p.work;
    receive(&p);
    p.rx_done = 1;
    deliver(&p);
    if (p.work != before || p.timers_waiting) {
        run_peers(&p);
        flush(&p);
    }
    MCP_STORE(img->polls, img->polls + 1);
    return p.work;
}
