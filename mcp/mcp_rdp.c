/*
 * mcp_rdp.c — the firmware main loop: RDP over an unreliable link (mcp/PROTOCOL.md).
 *
 * One pass of mcp_poll(): reset the control-frame scratch, move READY receive slots to the
 * host, receive and process a batch of frames, move again, take the hosts' READY send slots,
 * run every active peer (timers, go-back-N, new data, ACKs), flush the link.
 * Everything persistent is in the image; this file keeps no static state.
 */
#include "mcp.h"
#include "mcp_compat.h"

struct pass {
    struct mcp_nic *nic;
    struct mcp_image *img;
    struct mcp_counters *cnt;
    uint64_t now;
    int work;
    int hostq_full_seen; /* hostq_full counts passes, not attempts */
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
    img->rng = x;
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
    act[node / 64] |= 1ull << (node % 64);
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

static void fail_slot(struct pass *p, uint32_t id, int err)
{
    struct mcp_image *img = p->img;
    struct mcp_send_slot *s = mcp_sslot(img, id);
    struct mcp_context *cx = mcp_ctx(img, s->ctx);
    struct mcp_send_error *q = mcp_errq(img, s->ctx);
    struct mcp_send_error *e = &q[cx->errq_head % img->cfg.send_slots];

    s->error = err;
    s->taken = 0;
    p->cnt->send_errors++;
    if (MCP_LOAD_ACQ(&e->full)) {
        p->cnt->errq_overflow++;
    } else {
        e->cookie = s->cookie;
        e->slot = id % img->cfg.send_slots;
        e->dst = s->dst;
        e->error = (int16_t)err;
        MCP_STORE_REL(&e->full, 1u);
        cx->errq_head++;
    }
    MCP_STORE_REL(&s->state, (uint32_t)MCP_SLOT_IDLE);
}

/* Fail every pending send of connection c and close it. */
static void conn_reset(struct pass *p, struct mcp_conn *c, int err)
{
    while (c->snd_una != c->snd_nxt) {
        fail_slot(p, c->inflight[c->snd_una % MCP_MAX_WINDOW], err);
        c->snd_una++;
    }
    while (c->q_head != MCP_NIL) {
        uint32_t id = c->q_head;
        c->q_head = mcp_sslot(p->img, id)->next;
        fail_slot(p, id, err);
    }
    uint64_t last_rx = c->last_rx_ns;
    memset(c, 0, offsetof(struct mcp_conn, inflight));
    c->q_head = c->q_tail = MCP_NIL;
    c->last_rx_ns = last_rx;
}

/* Choose our connection id and initial sequence number. */
static void conn_open(struct pass *p, struct mcp_conn *c)
{
    c->state = MCP_CONN_OPEN;
    c->local_cid = new_cid(p);
    c->iss = (uint8_t)rng_next(p->img);
    c->snd_una = c->snd_nxt = c->snd_tx = c->iss;
    c->confirmed = 0;
    c->rto_us = p->img->cfg.rto_us;
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
        c->ack_pending = 0;
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
        c->nack_valid = 1;
        c->nack_seq = c->rcv_nxt;
        c->nack_ns = p->now;
        c->ack_pending = 0; /* the NACK carries the cumulative ACK too */
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
    mcp_wire_put(f, &h);
    mcp_wire_seal(f, MCP_WIRE_HDR + s->len);
    int rc = link_tx(p, node, f, MCP_WIRE_HDR + s->len);
    if (rc)
        return rc == -EAGAIN ? -EAGAIN : rc;
    c->ack_pending = 0;
    s->tx_ns = p->now;
    if (!c->rto_deadline)
        c->rto_deadline = p->now + US(c->rto_us);
    return 0;
}

/* Go back N: every slot from seq on is marked for retransmission. */
static void go_back_n(struct pass *p, struct mcp_conn *c, uint8_t seq)
{
    for (uint8_t q = seq; q != c->snd_nxt; q++)
        MCP_STORE_REL(&mcp_sslot(p->img, c->inflight[q % MCP_MAX_WINDOW])->state,
                      (uint32_t)MCP_SLOT_RETRANSMIT);
    c->snd_tx = seq;
    c->gbn_valid = 1;
    c->gbn_seq = seq;
    c->gbn_ns = p->now;
}

/* Timers of one peer: retransmission timeout, SYN resend, dead peer. */
static void peer_timers(struct pass *p, uint16_t node, struct mcp_conn *c)
{
    const struct mcp_config *cfg = &p->img->cfg;

    if (has_pending_send(c)) {
        uint64_t since = c->last_rx_ns > c->wait_since_ns ? c->last_rx_ns : c->wait_since_ns;
        if (p->now - since > MS(cfg->peer_timeout_ms)) {
            p->cnt->peers_dead++;
            conn_reset(p, c, -ETIMEDOUT);
            return;
        }
    }
    if (!c->rto_deadline || p->now < c->rto_deadline)
        return;
    if (c->state == MCP_CONN_OPEN && !c->confirmed && has_pending_send(c)) {
        send_syn(p, node, c, MCP_FT_SYN);
    } else if (c->confirmed && c->snd_una != c->snd_nxt) {
        p->cnt->timeouts++;
        go_back_n(p, c, c->snd_una);
        c->retx_after_ns = 0;
    } else {
        c->rto_deadline = 0;
        return;
    }
    c->rto_us = c->rto_us * 2 > cfg->rto_max_us ? cfg->rto_max_us : c->rto_us * 2;
    c->rto_deadline = p->now + US(c->rto_us);
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
        c->syn_ns = p->now;
        c->rto_deadline = p->now + US(c->rto_us);
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
                MCP_STORE_REL(&mcp_sslot(img, id)->state, (uint32_t)MCP_SLOT_INTRANSIT);
                p->cnt->tx_retx++;
                c->snd_tx++;
            }
        }
        while (c->snd_tx == c->snd_nxt && c->q_head != MCP_NIL &&
               inflight_count(c) < img->cfg.window) {
            uint32_t id = c->q_head;
            struct mcp_send_slot *s = mcp_sslot(img, id);
            s->seq = c->snd_nxt;
            int rc = send_data(p, node, c, id);
            if (rc == -EAGAIN)
                break;
            c->q_head = s->next;
            if (c->q_head == MCP_NIL)
                c->q_tail = MCP_NIL;
            if (rc) { /* this frame cannot go (no route, too long): fail it alone */
                fail_slot(p, id, rc);
                continue;
            }
            c->inflight[c->snd_nxt % MCP_MAX_WINDOW] = id;
            c->snd_nxt++;
            c->snd_tx = c->snd_nxt;
            MCP_STORE_REL(&s->state, (uint32_t)MCP_SLOT_INTRANSIT);
            p->cnt->tx_data++;
        }
    }
    if (c->ack_pending && (c->ack_pending >= (img->cfg.window + 1) / 2 || p->now >= c->ack_due_ns))
        send_ack(p, node, c);

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
        cx->accept++;
        p->work++;
        if (s->dst >= cfg->max_nodes || s->dst == cfg->node_id || s->len > cfg->slot_size) {
            fail_slot(p, id, -EINVAL);
            continue;
        }
        struct mcp_conn *c = mcp_conn(img, s->dst);
        if (!has_pending_send(c))
            c->wait_since_ns = p->now;
        s->next = MCP_NIL;
        s->error = 0;
        s->taken = 1;
        if (c->q_tail == MCP_NIL)
            c->q_head = id;
        else
            mcp_sslot(img, c->q_tail)->next = id;
        c->q_tail = id;
        activate(p, s->dst);
    }
    if (state != MCP_CTX_CLOSING)
        return;
    /* A closing context is freed once all its slots are IDLE. A slot READY but never taken
     * belongs to an owner that died between filling it and publishing it: drop it.  (With a
     * full ring the slot at head is the oldest posted send, taken and still queued.) */
    struct mcp_send_slot *next = mcp_sslot(img, ci * cfg->send_slots + head % cfg->send_slots);
    if (MCP_LOAD_ACQ(&next->state) == MCP_SLOT_READY && !next->taken)
        MCP_STORE_REL(&next->state, (uint32_t)MCP_SLOT_IDLE);
    for (uint32_t i = 0; i < cfg->send_slots; i++)
        if (MCP_LOAD_ACQ(&mcp_sslot(img, ci * cfg->send_slots + i)->state) != MCP_SLOT_IDLE)
            return;
    __atomic_and_fetch(&img->ctx_mask, ~(1ull << ci), __ATOMIC_ACQ_REL);
    MCP_STORE_REL(&cx->state, (uint32_t)MCP_CTX_FREE);
}

/* ---- receiving ---------------------------------------------------------------------------- */

static void rx_release(struct mcp_image *img, uint32_t r)
{
    uint32_t *free_stack = MCP_AT(img, img->off_rx_free);
    mcp_rslot(img, r)->state = MCP_SLOT_IDLE;
    free_stack[img->rx_free_top++] = r;
}

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
    for (int k = 0; k < n; k++) {
        struct mcp_send_slot *s =
            mcp_sslot(p->img, c->inflight[(uint8_t)(c->snd_una + k) % MCP_MAX_WINDOW]);
        s->taken = 0;
        MCP_STORE_REL(&s->state, (uint32_t)MCP_SLOT_IDLE);
    }
    c->snd_una = ack;
    if (mcp_seq_diff(c->snd_tx, c->snd_una) < 0)
        c->snd_tx = c->snd_una;
    c->rto_us = p->img->cfg.rto_us;
    c->rto_deadline = c->snd_una != c->snd_nxt ? p->now + US(c->rto_us) : 0;
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
        c->retx_after_ns = p->now + US(cfg->nobuf_backoff_us);
    c->rto_deadline = p->now + US(c->rto_us);
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
            c->ack_pending = 1;
        c->ack_due_ns = p->now;
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
    struct mcp_recv_slot *rs = mcp_rslot(img, r);
    uint32_t *ready = MCP_AT(img, img->off_rx_ready);
    rs->state = MCP_SLOT_READY;
    rs->len = h->len;
    rs->src = node;
    ready[img->rx_ready_tail++ % img->cfg.recv_slots] = r;
    c->rcv_nxt++;
    c->nack_valid = 0;
    if (!c->ack_pending)
        c->ack_due_ns = p->now + US(img->cfg.ack_delay_us);
    if (c->ack_pending < 255)
        c->ack_pending++;
    p->cnt->rx_data++;
    return 1;
}

static void syn_in(struct pass *p, uint16_t node, struct mcp_conn *c, const struct mcp_wire_hdr *h)
{
    if (c->have_peer && h->src_cid == c->peer_cid) { /* duplicate SYN: answer again */
        c->last_rx_ns = p->now;
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
    c->peer_cid = h->src_cid;
    c->rcv_nxt = h->seq;
    c->have_peer = 1;
    c->ack_pending = 0;
    c->nack_valid = 0;
    c->last_rx_ns = p->now;
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
    if (!c->have_peer) {
        c->peer_cid = h->src_cid;
        c->rcv_nxt = h->seq;
        c->have_peer = 1;
    }
    c->confirmed = 1;
    c->last_rx_ns = p->now;
    c->rto_us = p->img->cfg.rto_us;
    c->rto_deadline = 0;
    activate(p, node);
}

/* Process one received frame in receive slot r of flen bytes. Returns 1 if r was kept. */
static int frame_in(struct pass *p, uint32_t r, uint32_t flen)
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
    switch (mcp_wire_check(mcp_rframe(img, r), flen, cfg->slot_size, &h)) {
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
    c->last_rx_ns = p->now;
    if (!c->confirmed) {
        c->confirmed = 1;
        c->rto_deadline = 0;
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
    void *bufs[64] = {0}; /* fully written below; zeroed to quiet a false gcc warning */
    uint32_t slots[64], lens[64];
    uint32_t idle = img->rx_free_top;
    uint32_t n;

    if (!idle)
        return;
    /* Keep the last IDLE slot out of the batch while there are others, so frames taken in
     * this batch can pass the second-free-buffer check; with one left, take it (and NACK). */
    n = idle > 1 ? idle - 1 : 1;
    if (n > img->cfg.rx_batch)
        n = img->cfg.rx_batch;
    for (uint32_t i = 0; i < n; i++) {
        slots[i] = free_stack[--img->rx_free_top];
        mcp_rslot(img, slots[i])->state = MCP_SLOT_INTRANSIT;
        bufs[i] = mcp_rframe(img, slots[i]);
    }
    int got = lanai_rx(p->nic->link, bufs, img->frame_stride, lens, (int)n);
    if (got < 0)
        got = 0;
    for (uint32_t i = (uint32_t)got; i < n; i++)
        rx_release(img, slots[n - 1 - i + (uint32_t)got]);
    for (int i = 0; i < got; i++)
        if (!frame_in(p, slots[i], lens[i]))
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
        uint32_t r = ready[img->rx_ready_head % cfg->recv_slots];
        struct mcp_recv_slot *rs = mcp_rslot(img, r);
        memcpy(mcp_hostq_data(img, q), mcp_rframe(img, r) + MCP_WIRE_HDR, rs->len);
        e->src = rs->src;
        e->len = rs->len;
        MCP_STORE_REL(&e->full, 1u);
        img->hostq_head++;
        img->rx_ready_head++;
        rx_release(img, r);
        p->cnt->delivered++;
        moved++;
    }
    if (moved) {
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
                act[w] &= ~(1ull << b);
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
int mcp_poll(struct mcp_nic *nic, uint64_t now_ns)
{
    struct mcp_image *img = nic->img;
    struct pass p = {nic, img, &img->counters, now_ns, 0, 0};

    nic->ctrl_used = 0;
    deliver(&p);
    uint64_t ctxs = __atomic_load_n(&img->ctx_mask, __ATOMIC_ACQUIRE);
    while (ctxs) {
        unsigned ci = (unsigned)__builtin_ctzll(ctxs);
        ctxs &= ctxs - 1;
        take_context(&p, ci);
    }
    run_peers(&p);
    if (p.work)
        flush(&p);

    int before = p.work;
    receive(&p);
    deliver(&p);
    if (p.work != before) {
        run_peers(&p);
        flush(&p);
    }
    img->polls++;
    return p.work;
}
