/*
 * fuzz_frame.c — libFuzzer harness: received frames (and host actions) into a NIC image.
 *
 * Each input is a program of operations run against a freshly formatted NIC image (node 0)
 * on a fresh sim net with nodes 1..3 played by the harness:
 *
 *   0x00-0x3f  frame: le16 length L, then L bytes, injected into node 0.  The low six bits of
 *              the op repair parts of it so that deeper checks are reached:
 *              1 magic+version+known type, 2 len field, 4 dst 0 and src 1..3, 8 the connection
 *              ids node 0 knows for that source, 16 seq/ack near the connection's numbers,
 *              32 seal the CRC
 *   0x40-0x5f  advance the clock (0 ns .. 6 s, table below) and run one mcp_poll()
 *   0x60-0x7f  host posts a send: destination = low 2 bits (0 is node 0 itself), one byte len
 *   0x80-0x9f  host takes everything from the receive queue
 *   0xa0-0xbf  host takes every send error
 *   0xc0-0xdf  peers 1..3 answer what node 0 sent them: SYN -> SYNACK, DATA -> ACK (or NACK
 *              when bit 0 is set), and the rest is dropped
 *   0xe0-0xef  drop everything node 0 sent
 *   0xf0-0xf7  the link refuses (bit 0 set) or takes again frames node 0 transmits (-EAGAIN)
 *   0xf8-0xff  the host detaches its context and attaches a context again
 *
 * After every pass the harness checks invariants and aborts on a violation: counters never
 * decrease and each received frame lands in at most one outcome counter; receive slots are
 * IDLE or READY between passes and the free stack and ready FIFO agree with them; every busy
 * send slot is in exactly one place (not yet taken, a peer's queue, or a peer's window, where
 * [snd_una, snd_tx) is INTRANSIT and [snd_tx, snd_nxt) RETRANSMIT); the window is respected;
 * host queue and error queue accounting adds up; every frame node 0 sends is well formed,
 * from node 0, to the node it went to, never to itself.
 *
 * Built with -DFUZZ_GEN_CORPUS it is instead a program writing a seed corpus of valid frame
 * sequences into the directory named by its argument.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link_sim.h"
#include "mcp.h"
#include "mcp_host.h"

#define NODES 4
#define SLOT  128u
#define STEPS 4096 /* operations per input at most */

struct peer {
    uint32_t cid;
    uint8_t iss;
};

#define FRAME_MAX (MCP_WIRE_HDR + SLOT)
#define SENT_MAX  32

/* Frames node 0 sent to one peer that the harness has not answered or dropped yet. */
struct sent {
    unsigned n;
    uint8_t f[SENT_MAX][FRAME_MAX + 1];
};

/* Node 0's link: the sim link, but tx() can be made to answer -EAGAIN (a busy link). */
struct fgate {
    struct lanai_link l;
    struct lanai_link *inner;
    int busy;
};

struct run {
    struct mcp_sim_net *net;
    struct fgate gate;
    uint64_t forgotten; /* error entries dropped by a re-attach (nobody read them) */
    struct lanai_link *link[NODES];
    struct mcp_image *img;
    size_t size;
    struct mcp_nic nic;
    int ctx;
    uint64_t t;
    uint64_t injected;
    uint64_t taken; /* host queue entries the host took */
    uint64_t errs;  /* error entries the host took */
    uint64_t posted;
    struct mcp_counters last;
    struct peer peer[NODES];
    struct sent sent[NODES];
};

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_frame: invariant violated: " __VA_ARGS__);                           \
        fprintf(stderr, "\n");                                                                     \
        abort();                                                                                   \
    } while (0)

static void config(struct mcp_config *c)
{
    mcp_config_default(c, 0);
    c->max_nodes = NODES;
    c->contexts = 2;
    c->send_slots = 8;
    c->recv_slots = 8;
    c->hostq_slots = 4;
    c->window = 4;
    c->rx_batch = 8;
    c->slot_size = SLOT;
    c->rto_us = 100;
    c->rto_max_us = 800;
    c->ack_delay_us = 10;
    c->nack_interval_us = 50;
    c->nobuf_backoff_us = 20;
    c->peer_timeout_ms = 5;
    c->seed = 0xf022;
}

static int gate_tx(struct lanai_link *l, uint16_t dst, const void *f, uint32_t len)
{
    struct fgate *g = (struct fgate *)l;
    return g->busy ? -EAGAIN : lanai_tx(g->inner, dst, f, len);
}

static int gate_flush(struct lanai_link *l)
{
    return lanai_flush(((struct fgate *)l)->inner);
}

static int gate_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    return lanai_rx(((struct fgate *)l)->inner, bufs, cap, lens, n);
}

static void gate_close(struct lanai_link *l)
{
    (void)l;
}

static const struct lanai_link_ops gate_ops = {
    .tx = gate_tx, .flush = gate_flush, .rx = gate_rx, .close = gate_close};

static struct run R;
static uint8_t *image_mem;
static size_t image_size;

static void run_start(void)
{
    struct mcp_config c;
    config(&c);
    if (!image_mem) {
        image_size = (mcp_image_size(&c) + 63) & ~(size_t)63;
        image_mem = aligned_alloc(64, image_size);
        if (!image_mem)
            abort();
    }
    memset(&R, 0, sizeof(R));
    R.img = (struct mcp_image *)image_mem;
    R.size = image_size;
    if (mcp_image_format(R.img, R.size, &c))
        abort();
    R.net = mcp_sim_net_create(NODES, MCP_WIRE_HDR + SLOT + 64, NULL);
    for (unsigned i = 0; i < NODES; i++)
        R.link[i] = mcp_sim_link_open(R.net, (uint16_t)i);
    if (!R.net || !R.link[0])
        abort();
    R.gate.l = *R.link[0];
    R.gate.l.ops = &gate_ops;
    R.gate.inner = R.link[0];
    mcp_nic_init(&R.nic, R.img, &R.gate.l);
    R.ctx = mcp_ctx_attach(R.img, 1);
    R.t = 1000000;
    mcp_sim_net_set_time(R.net, R.t);
    for (unsigned i = 1; i < NODES; i++) {
        R.peer[i].cid = (1u << 16) | (0x100u * i + 7);
        R.peer[i].iss = (uint8_t)(40 * i);
    }
}

static void run_end(void)
{
    for (unsigned i = 0; i < NODES; i++)
        lanai_close(R.link[i]);
    mcp_sim_net_destroy(R.net);
}

/* ---- invariants ------------------------------------------------------------------------------ */

static void check_frame_out(unsigned to, const uint8_t *f, uint32_t len)
{
    struct mcp_wire_hdr h;
    enum mcp_wire_verdict v = mcp_wire_check(f, len, SLOT, &h);
    if (v != MCP_WIRE_OK)
        FAIL("node 0 sent an invalid frame to %u (verdict %d, %u bytes)", to, v, len);
    if (h.src_node != 0 || h.dst_node != to)
        FAIL("node 0 sent a frame %u -> %u over the link to %u", h.src_node, h.dst_node, to);
    if (h.type != MCP_FT_RST && h.src_cid == 0)
        FAIL("frame of type %u with src_cid 0", h.type);
}

static void check_counters(void)
{
    const struct mcp_counters *c = &R.img->counters;
    const uint64_t *now = (const uint64_t *)c, *was = (const uint64_t *)&R.last;
    for (unsigned i = 0; i < mcp_counter_count(); i++)
        if (now[i] < was[i])
            FAIL("counter %s went back from %llu to %llu", mcp_counter_name(i),
                 (unsigned long long)was[i], (unsigned long long)now[i]);
    R.last = *c;
    uint64_t outcomes = c->rx_data + c->rx_dup + c->rx_gap + c->nack_nobuf + c->rx_ack +
                        c->rx_nack + c->malformed + c->crc_errors + c->wrong_dest + c->stale;
    if (outcomes > c->rx_frames)
        FAIL("%llu outcomes for %llu received frames", (unsigned long long)outcomes,
             (unsigned long long)c->rx_frames);
    if (c->rx_frames > R.injected)
        FAIL("%llu frames received, %llu injected", (unsigned long long)c->rx_frames,
             (unsigned long long)R.injected);
    if (c->delivered > c->rx_data)
        FAIL("%llu delivered of %llu accepted", (unsigned long long)c->delivered,
             (unsigned long long)c->rx_data);
    if (c->tx_data > R.posted)
        FAIL("%llu first transmissions of %llu sends", (unsigned long long)c->tx_data,
             (unsigned long long)R.posted);
}

static void check_recv(void)
{
    struct mcp_image *img = R.img;
    const struct mcp_config *cfg = &img->cfg;
    const uint32_t *stack = MCP_AT(img, img->off_rx_free);
    const uint32_t *ready = MCP_AT(img, img->off_rx_ready);
    uint8_t seen[64] = {0};
    unsigned idle = 0, nready = 0;

    for (uint32_t i = 0; i < cfg->recv_slots; i++) {
        uint32_t s = mcp_rslot(img, i)->state;
        if (s != MCP_SLOT_IDLE && s != MCP_SLOT_READY)
            FAIL("receive slot %u in state %u between passes", i, s);
        idle += s == MCP_SLOT_IDLE;
        nready += s == MCP_SLOT_READY;
    }
    if (img->rx_free_top != idle)
        FAIL("free stack holds %u, %u slots IDLE", img->rx_free_top, idle);
    for (uint32_t k = 0; k < img->rx_free_top; k++) {
        uint32_t r = stack[k];
        if (r >= cfg->recv_slots || seen[r]++ || mcp_rslot(img, r)->state != MCP_SLOT_IDLE)
            FAIL("free stack entry %u: slot %u", k, r);
    }
    if (img->rx_ready_tail - img->rx_ready_head != nready)
        FAIL("ready FIFO holds %u, %u slots READY", img->rx_ready_tail - img->rx_ready_head,
             nready);
    for (uint32_t q = img->rx_ready_head; q != img->rx_ready_tail; q++) {
        uint32_t r = ready[q % cfg->recv_slots];
        if (r >= cfg->recv_slots || seen[r]++ || mcp_rslot(img, r)->state != MCP_SLOT_READY ||
            mcp_rslot(img, r)->len > SLOT)
            FAIL("ready FIFO entry %u: slot %u", q, r);
    }
    /* host queue: what the firmware filled and the host has not taken */
    uint32_t full = 0;
    for (uint32_t i = 0; i < cfg->hostq_slots; i++)
        full += MCP_LOAD_ACQ(&mcp_hostq(img, i)->full) != 0;
    if (img->hostq_head - img->hostq_tail != full || full > cfg->hostq_slots)
        FAIL("host queue: head %u tail %u, %u entries full", img->hostq_head, img->hostq_tail,
             full);
    if (img->counters.delivered != R.taken + full)
        FAIL("delivered %llu, host took %llu and %u wait",
             (unsigned long long)img->counters.delivered, (unsigned long long)R.taken, full);
}

static void check_send(void)
{
    struct mcp_image *img = R.img;
    const struct mcp_config *cfg = &img->cfg;
    uint32_t nslots = (uint32_t)cfg->contexts * cfg->send_slots;
    uint8_t where[64] = {0}; /* 1 not taken yet, 2 queue, 3 window */

    for (unsigned ci = 0; ci < cfg->contexts; ci++) {
        struct mcp_context *cx = mcp_ctx(img, ci);
        if (cx->head - cx->accept > cfg->send_slots)
            FAIL("context %u: head %u accept %u", ci, cx->head, cx->accept);
        for (uint32_t p = cx->accept; p != cx->head; p++) {
            uint32_t id = ci * cfg->send_slots + p % cfg->send_slots;
            if (where[id]++ || mcp_sslot(img, id)->state != MCP_SLOT_READY)
                FAIL("untaken slot %u", id);
        }
    }
    for (uint16_t n = 0; n < cfg->max_nodes; n++) {
        struct mcp_conn *c = mcp_conn(img, n);
        uint8_t inflight = (uint8_t)(c->snd_nxt - c->snd_una);
        if (n == 0 && (c->state != MCP_CONN_CLOSED || c->q_head != MCP_NIL))
            FAIL("a connection to node 0 itself");
        if (c->state != MCP_CONN_OPEN && c->state != MCP_CONN_CLOSED)
            FAIL("conn %u in state %u", n, c->state);
        if (c->state == MCP_CONN_CLOSED && (c->confirmed || c->have_peer || inflight))
            FAIL("closed conn %u: confirmed %u have_peer %u inflight %u", n, c->confirmed,
                 c->have_peer, inflight);
        if (c->state == MCP_CONN_OPEN && c->local_cid == 0)
            FAIL("open conn %u with cid 0", n);
        if (inflight > cfg->window)
            FAIL("conn %u: %u in flight, window %u", n, inflight, cfg->window);
        if ((uint8_t)(c->snd_tx - c->snd_una) > inflight)
            FAIL("conn %u: snd_tx %u outside [%u, %u]", n, c->snd_tx, c->snd_una, c->snd_nxt);
        if (inflight && !c->confirmed)
            FAIL("conn %u: data in flight before the peer confirmed", n);
        for (uint8_t q = c->snd_una; q != c->snd_nxt; q++) {
            uint32_t id = c->inflight[q % MCP_MAX_WINDOW];
            if (id >= nslots || where[id]++)
                FAIL("conn %u window seq %u: slot %u twice or bad", n, q, id);
            struct mcp_send_slot *s = mcp_sslot(img, id);
            uint32_t want = (uint8_t)(q - c->snd_una) < (uint8_t)(c->snd_tx - c->snd_una)
                                ? MCP_SLOT_INTRANSIT
                                : MCP_SLOT_RETRANSMIT;
            if (s->state != want || s->seq != q || s->dst != n)
                FAIL("conn %u seq %u: slot %u state %u seq %u dst %u, expected state %u", n, q, id,
                     s->state, s->seq, s->dst, want);
            where[id] = 3;
        }
        uint32_t k = 0, last = MCP_NIL;
        for (uint32_t id = c->q_head; id != MCP_NIL; id = mcp_sslot(img, id)->next) {
            if (id >= nslots || where[id]++ || ++k > nslots)
                FAIL("conn %u queue: slot %u twice, bad or a cycle", n, id);
            if (mcp_sslot(img, id)->state != MCP_SLOT_READY || mcp_sslot(img, id)->dst != n)
                FAIL("conn %u queue: slot %u state %u dst %u", n, id, mcp_sslot(img, id)->state,
                     mcp_sslot(img, id)->dst);
            last = id;
        }
        if (c->q_tail != last)
            FAIL("conn %u: q_tail %u, last queued %u", n, c->q_tail, last);
        if (c->q_head != MCP_NIL && c->state != MCP_CONN_OPEN)
            FAIL("conn %u: sends queued on a closed connection after a pass", n);
    }
    for (uint32_t id = 0; id < nslots; id++) {
        uint32_t s = mcp_sslot(img, id)->state;
        if (s > MCP_SLOT_RETRANSMIT)
            FAIL("send slot %u in state %u", id, s);
        if ((s != MCP_SLOT_IDLE) != (where[id] != 0))
            FAIL("send slot %u: state %s but %s", id, mcp_slot_state_name(s),
                 where[id] ? "accounted" : "in no queue or window");
    }
    /* error entries: every failure is in the queue, taken, or counted as overflow */
    uint32_t waiting = 0;
    for (unsigned ci = 0; ci < cfg->contexts; ci++)
        for (uint32_t i = 0; i < cfg->send_slots; i++)
            waiting += MCP_LOAD_ACQ(&mcp_errq(img, ci)[i].full) != 0;
    if (img->counters.send_errors != R.errs + R.forgotten + waiting + img->counters.errq_overflow)
        FAIL("send_errors %llu, host took %llu (forgot %llu), %u wait, overflow %llu",
             (unsigned long long)img->counters.send_errors, (unsigned long long)R.errs,
             (unsigned long long)R.forgotten, waiting,
             (unsigned long long)img->counters.errq_overflow);
}

/* Move what node 0 sent to the peers into their stores, checking every frame. */
static void collect_sent(void)
{
    for (unsigned to = 1; to < NODES; to++) {
        struct sent *st = &R.sent[to];
        for (;;) {
            uint8_t *b = st->f[st->n < SENT_MAX ? st->n : SENT_MAX - 1];
            void *bufs[1] = {b};
            uint32_t len;
            if (lanai_rx(R.link[to], bufs, FRAME_MAX, &len, 1) != 1)
                break;
            if (len > FRAME_MAX)
                FAIL("node 0 sent %u bytes to %u, more than a slot", len, to);
            check_frame_out(to, b, len);
            if (st->n < SENT_MAX)
                st->n++;
        }
    }
}

static void check_all(void)
{
    collect_sent();
    /* node 0 never sends to itself: whatever waits for it was injected and not yet taken */
    uint64_t pending = mcp_sim_net_pending(R.net);
    if (R.img->counters.rx_frames + pending != R.injected)
        FAIL("%llu received + %llu pending != %llu injected",
             (unsigned long long)R.img->counters.rx_frames, (unsigned long long)pending,
             (unsigned long long)R.injected);
    check_counters();
    check_recv();
    check_send();
}

static void poll_once(uint64_t dt)
{
    R.t += dt;
    mcp_sim_net_set_time(R.net, R.t);
    mcp_poll(&R.nic, R.t);
    if (R.nic.ctrl_used > MCP_CTRL_FRAMES)
        FAIL("ctrl_used %u", R.nic.ctrl_used);
}

/* ---- operations --------------------------------------------------------------------------------
 */

static void inject(const uint8_t *f, uint32_t len)
{
    if (mcp_sim_inject(R.net, 0, f, len) == 0)
        R.injected++;
}

static void frame_op(uint8_t op, const uint8_t *data, uint32_t len)
{
    uint8_t f[MCP_WIRE_HDR + SLOT + 64];
    if (len > sizeof(f))
        len = sizeof(f);
    memcpy(f, data, len);
    if ((op & 0x3f) && len < MCP_WIRE_HDR) {
        memset(f + len, 0, MCP_WIRE_HDR - len);
        len = MCP_WIRE_HDR;
    }
    if (op & 1) {
        mcp_put_le16(f, MCP_WIRE_MAGIC);
        f[2] = MCP_WIRE_VERSION;
        f[3] = (uint8_t)(1 + f[3] % MCP_FT_MAX);
    }
    if (op & 4) {
        mcp_put_le16(f + 6, 0);
        mcp_put_le16(f + 4, (uint16_t)(1 + mcp_get_le16(f + 4) % (NODES - 1)));
    }
    uint16_t src = mcp_get_le16(f + 4);
    if ((op & 8) && src < NODES) {
        struct mcp_conn *c = mcp_conn(R.img, src);
        mcp_put_le32(f + 8, c->have_peer ? c->peer_cid : R.peer[src].cid);
        mcp_put_le32(f + 12, f[3] == MCP_FT_SYN ? 0 : c->local_cid);
    }
    if ((op & 16) && src < NODES) {
        struct mcp_conn *c = mcp_conn(R.img, src);
        uint8_t infl = (uint8_t)(c->snd_nxt - c->snd_una);
        if (f[3] == MCP_FT_DATA)
            f[16] = (uint8_t)(c->rcv_nxt + f[16] % 3 - 1);
        else if (f[3] == MCP_FT_NACK)
            f[16] = (uint8_t)(c->snd_una + f[16] % (infl + 2));
        f[17] = (uint8_t)(c->snd_una + f[17] % (infl + 2));
    }
    if (op & 2) {
        if (len > MCP_WIRE_HDR + SLOT)
            len = MCP_WIRE_HDR + SLOT;
        if (f[3] != MCP_FT_DATA)
            len = MCP_WIRE_HDR;
        mcp_put_le16(f + 20, (uint16_t)(len - MCP_WIRE_HDR));
    }
    if ((op & 32) && len >= MCP_WIRE_HDR)
        mcp_wire_seal(f, len);
    inject(f, len);
}

static void reattach(void)
{
    struct mcp_image *img = R.img;
    if (R.ctx >= 0)
        mcp_ctx_detach(img, (unsigned)R.ctx);
    /* attaching a FREE context forgets the error entries nobody read */
    for (unsigned ci = 0; ci < img->cfg.contexts; ci++) {
        if (MCP_LOAD_ACQ(&mcp_ctx(img, ci)->state) != MCP_CTX_FREE)
            continue;
        for (uint32_t i = 0; i < img->cfg.send_slots; i++)
            R.forgotten += MCP_LOAD_ACQ(&mcp_errq(img, ci)[i].full) != 0;
        break;
    }
    R.ctx = mcp_ctx_attach(img, 2);
}

static void send_op(uint8_t op, uint8_t lenbyte)
{
    uint32_t slot;
    if (R.ctx < 0)
        return;
    uint8_t *p = mcp_send_slot(R.img, (unsigned)R.ctx, &slot);
    if (!p)
        return;
    uint32_t len = lenbyte % (SLOT + 1);
    memset(p, lenbyte, len);
    mcp_send_post(R.img, (unsigned)R.ctx, slot, (uint16_t)(op & 3), len, (uint32_t)R.posted);
    R.posted++;
}

static void answer(unsigned from, const uint8_t *f, int nack)
{
    struct mcp_wire_hdr h, a;
    mcp_wire_get(f, &h);
    memset(&a, 0, sizeof(a));
    a.magic = MCP_WIRE_MAGIC;
    a.version = MCP_WIRE_VERSION;
    a.src_node = (uint16_t)from;
    a.dst_node = 0;
    a.src_cid = R.peer[from].cid;
    a.dst_cid = h.src_cid;
    if (h.type == MCP_FT_SYN) {
        a.type = MCP_FT_SYNACK;
        a.seq = R.peer[from].iss;
    } else if (h.type == MCP_FT_DATA) {
        a.type = nack ? MCP_FT_NACK : MCP_FT_ACK;
        a.seq = h.seq;
        a.flags = MCP_FLAG_ACK;
        a.ack = nack ? h.seq : (uint8_t)(h.seq + 1);
    } else {
        return;
    }
    uint8_t out[MCP_WIRE_HDR];
    mcp_wire_put(out, &a);
    mcp_wire_seal(out, MCP_WIRE_HDR);
    inject(out, MCP_WIRE_HDR);
}

static void take_recv(void)
{
    struct mcp_rx_desc d;
    while (mcp_recv_peek(R.img, &d)) {
        if (d.len > SLOT || d.src == 0 || d.src >= NODES)
            FAIL("host queue entry of %u bytes from %u", d.len, d.src);
        mcp_recv_done(R.img);
        R.taken++;
    }
}

static void take_errors(void)
{
    struct mcp_send_error e;
    if (R.ctx < 0)
        return;
    while (mcp_errq_pop(R.img, (unsigned)R.ctx, &e)) {
        if (e.error != -EINVAL && e.error != -ETIMEDOUT && e.error != -ECONNRESET)
            FAIL("send error %d", e.error);
        if (e.slot >= R.img->cfg.send_slots)
            FAIL("send error for slot %u", e.slot);
        R.errs++;
    }
}

static const uint64_t dt_table[32] = {
    0,          1000,        2000,    5000,    10000,   20000,   50000,    100000,
    200000,     500000,      1000000, 2000000, 5000000, 6000000, 10000000, 100000000,
    1000000000, 6000000000u, 1000,    1000,    1000,    1000,    10000,    10000,
    10000,      100000,      100000,  1000000, 0,       0,       500,      3000};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i = 0;
    int steps = 0;
    run_start();
    check_all();
    while (i < size && steps++ < STEPS) {
        uint8_t op = data[i++];
        if (op < 0x40) {
            if (i + 2 > size)
                break;
            uint32_t len = mcp_get_le16(data + i) % (MCP_WIRE_HDR + SLOT + 64);
            i += 2;
            if (len > size - i)
                len = (uint32_t)(size - i);
            frame_op(op, data + i, len);
            i += len;
        } else if (op < 0x60) {
            poll_once(dt_table[op & 0x1f]);
            check_all();
        } else if (op < 0x80) {
            send_op(op, i < size ? data[i++] : 0);
        } else if (op < 0xa0) {
            take_recv();
        } else if (op < 0xc0) {
            take_errors();
        } else if (op >= 0xf8) {
            reattach();
        } else if (op >= 0xf0) {
            R.gate.busy = op & 1;
        } else {
            collect_sent();
            for (unsigned p = 1; p < NODES; p++) {
                for (unsigned k = 0; op < 0xe0 && k < R.sent[p].n; k++)
                    answer(p, R.sent[p].f[k], op & 1);
                R.sent[p].n = 0;
            }
        }
    }
    /* let everything settle */
    R.gate.busy = 0;
    for (int k = 0; k < 4; k++) {
        poll_once(1000);
        check_all();
    }
    run_end();
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
/* ---- seed corpus ----------------------------------------------------------------------------- */

struct buf {
    uint8_t b[8192];
    size_t n;
};

static void put(struct buf *b, uint8_t v)
{
    if (b->n < sizeof(b->b))
        b->b[b->n++] = v;
}

/* A frame op with a complete, valid-looking frame (the op's repair bits finish it). */
static void put_frame(struct buf *b, uint8_t repair, uint8_t type, uint16_t src, uint8_t seq,
                      uint8_t ack, uint8_t flags, uint16_t plen)
{
    uint8_t f[MCP_WIRE_HDR + SLOT];
    struct mcp_wire_hdr h = {.magic = MCP_WIRE_MAGIC,
                             .version = MCP_WIRE_VERSION,
                             .type = type,
                             .src_node = src,
                             .dst_node = 0,
                             .src_cid = (1u << 16) | (0x100u * src + 7),
                             .seq = seq,
                             .ack = ack,
                             .flags = flags,
                             .len = plen};
    mcp_wire_put(f, &h);
    for (uint16_t k = 0; k < plen; k++)
        f[MCP_WIRE_HDR + k] = (uint8_t)(k * 7 + seq);
    mcp_wire_seal(f, MCP_WIRE_HDR + plen);
    put(b, repair);
    put(b, (uint8_t)(MCP_WIRE_HDR + plen));
    put(b, (uint8_t)((MCP_WIRE_HDR + plen) >> 8));
    for (uint32_t k = 0; k < MCP_WIRE_HDR + plen; k++)
        put(b, f[k]);
}

static int write_seed(const char *dir, const char *name, const struct buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(b->b, 1, b->n, fp) != b->n) {
        perror(path);
        return 1;
    }
    return fclose(fp) != 0;
}

int main(int argc, char **argv)
{
    int rc = 0;
    struct buf b;
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (writes a seed corpus into DIR)\n", argv[0]);
        return 2;
    }
    /* 1: node 0 sends; peers answer; some ACKed, some NACKed */
    memset(&b, 0, sizeof b);
    for (int k = 0; k < 6; k++) {
        put(&b, (uint8_t)(0x60 | (1 + k % 3)));
        put(&b, (uint8_t)(10 * k + 1));
    }
    put(&b, 0x41);
    for (int k = 0; k < 6; k++) {
        put(&b, (uint8_t)(0xc0 | (k == 3)));
        put(&b, 0x42);
        put(&b, 0x80);
        put(&b, 0xa0);
    }
    put(&b, 0x50);
    rc |= write_seed(argv[1], "seed-send", &b);
    /* 2: peer 1 opens and streams DATA in order, with a duplicate and a gap */
    memset(&b, 0, sizeof b);
    put_frame(&b, 0x00, MCP_FT_SYN, 1, 40, 0, 0, 0);
    put(&b, 0x41);
    for (int k = 0; k < 8; k++) {
        put_frame(&b, 0x3e, MCP_FT_DATA, 1, 1, 0, 0, (uint16_t)(8 * k + 1));
        if (k % 3 == 0)
            put(&b, 0x41);
    }
    put_frame(&b, 0x3e, MCP_FT_DATA, 1, 0, 0, 0, 20);
    put_frame(&b, 0x3e, MCP_FT_DATA, 1, 2, 0, 0, 20);
    put(&b, 0x44);
    put(&b, 0x80);
    put(&b, 0x44);
    rc |= write_seed(argv[1], "seed-recv", &b);
    /* 3: one of every frame type, repaired into the live connection */
    memset(&b, 0, sizeof b);
    put(&b, 0x62);
    put(&b, 33);
    put(&b, 0x41);
    put(&b, 0xc0);
    put(&b, 0x41);
    for (uint8_t t = MCP_FT_SYN; t <= MCP_FT_MAX; t++) {
        put_frame(&b, 0x3f, t, 2, 1, 1, MCP_FLAG_ACK, t == MCP_FT_DATA ? 16 : 0);
        put(&b, 0x41);
    }
    put_frame(&b, 0x3f, MCP_FT_NACK, 2, 0, 0, MCP_FLAG_ACK | MCP_FLAG_NOBUF, 0);
    put(&b, 0x43);
    put(&b, 0x51);
    rc |= write_seed(argv[1], "seed-types", &b);
    /* 4: a peer that restarts (new cid in a SYN) and one that dies (timeouts) */
    memset(&b, 0, sizeof b);
    put(&b, 0x63);
    put(&b, 50);
    put(&b, 0x41);
    put(&b, 0xc0);
    put(&b, 0x41);
    put_frame(&b, 0x00, MCP_FT_SYN, 3, 9, 0, 0, 0);
    b.b[b.n - MCP_WIRE_HDR + 10] ^= 0x05; /* another cid: breaks the CRC unless repaired */
    b.b[b.n - MCP_WIRE_HDR - 3] = 0x20;   /* the op: seal again */
    put(&b, 0x41);
    put(&b, 0x61);
    put(&b, 9);
    for (int k = 0; k < 8; k++)
        put(&b, 0x4c);
    put(&b, 0xa0);
    rc |= write_seed(argv[1], "seed-restart-dead", &b);
    /* 5: noise */
    memset(&b, 0, sizeof b);
    for (int k = 0; k < 5; k++) {
        put(&b, (uint8_t)k);
        put(&b, 40);
        put(&b, 0);
        for (int j = 0; j < 40; j++)
            put(&b, (uint8_t)(j * 37 + k));
        put(&b, 0x41);
    }
    rc |= write_seed(argv[1], "seed-noise", &b);
    /* 6: every input also works as a plain program of the harness */
    rc |= LLVMFuzzerTestOneInput(b.b, b.n);
    return rc;
}
#endif
