/*
 * rdp_fixture.c — shared scaffolding of the firmware (RDP) unit tests (see rdp_fixture.h).
 */
#include "rdp_fixture.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- the gate link ------------------------------------------------------------------------ */

static int gate_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
    struct gate *g = (struct gate *)l;
    if (g->tx_blocked) {
        g->tx_refused++;
        return -EAGAIN;
    }
    return lanai_tx(g->inner, dst, frame, len);
}

static int gate_flush(struct lanai_link *l)
{
    return lanai_flush(((struct gate *)l)->inner);
}

static int gate_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct gate *g = (struct gate *)l;
    int got = lanai_rx(g->inner, bufs, cap, lens, n);
    for (int i = 0; i < got && g->rx_n < 64; i++) {
        uint32_t slot = MCP_NIL, state = MCP_NIL;
        /* the receive slot whose frame buffer this is (buffers move between slots and the
         * host queue as frames are delivered) */
        for (uint32_t r = 0; r < g->img->cfg.recv_slots; r++)
            if (mcp_rframe(g->img, r) == (const uint8_t *)bufs[i]) {
                slot = r;
                state = mcp_rslot(g->img, r)->state;
                break;
            }
        g->rx_slot[g->rx_n] = slot;
        g->rx_state[g->rx_n] = state;
        g->rx_n++;
    }
    return got;
}

static void gate_close(struct lanai_link *l)
{
    (void)l; /* the inner link is closed by fx_fini */
}

static const struct lanai_link_ops gate_ops = {
    .tx = gate_tx,
    .flush = gate_flush,
    .rx = gate_rx,
    .close = gate_close,
};

/* ---- the device-under-test fixture ------------------------------------------------------- */

void cfg_default(struct mcp_config *c)
{
    mcp_config_default(c, DUT);
    c->max_nodes = NODES;
    c->contexts = 2;
    c->send_slots = 16;
    c->recv_slots = 16;
    c->hostq_slots = 16;
    c->slot_size = PAYLOAD;
    c->window = 8;
    c->rto_us = 1000;
    c->rto_max_us = 8000;
    c->ack_delay_us = 20;
    c->nack_interval_us = 200;
    c->nobuf_backoff_us = 50;
    c->peer_timeout_ms = 1000;
    c->seed = 0x7ab1e1;
}

void cfg_traffic(struct mcp_config *c, uint16_t nodes)
{
    mcp_config_default(c, 0);
    c->max_nodes = nodes;
    c->contexts = 1;
    c->send_slots = 64;
    c->recv_slots = 64;
    c->hostq_slots = 64;
    c->window = 8;
    c->slot_size = 256;
    c->rto_us = 200;
    c->rto_max_us = 3200;
    c->ack_delay_us = 10;
    c->nack_interval_us = 50;
    c->nobuf_backoff_us = 20;
    c->peer_timeout_ms = 60000; /* the runs are far shorter in virtual time */
}

struct mcp_image *image_new(const struct mcp_config *c)
{
    size_t sz = mcp_image_size(c);
    if (!sz)
        return NULL;
    sz = (sz + MCP_CACHELINE - 1) & ~(size_t)(MCP_CACHELINE - 1);
    void *m = aligned_alloc(MCP_CACHELINE, sz);
    if (m && mcp_image_format(m, sz, c)) {
        free(m);
        m = NULL;
    }
    return m;
}

int fx_init(struct fx *f, const struct mcp_config *c, int gated)
{
    memset(f, 0, sizeof(*f));
    f->net = mcp_sim_net_create(NODES, MAXF, NULL);
    if (!CHECK(f->net != NULL, "sim net"))
        return 0;
    f->dl = mcp_sim_link_open(f->net, DUT);
    f->pl = mcp_sim_link_open(f->net, PEER);
    /* the DUT's seed picks its connection ids and initial sequence number: TEST_SEED
     * overrides it, so the frame-level tests can be run against other values */
    struct mcp_config cs = *c;
    cs.seed = th_seed(c->seed);
    f->img = image_new(&cs);
    if (!CHECK(f->dl && f->pl && f->img, "links or image"))
        return 0;
    if (gated) {
        f->gate.l = *f->dl;
        f->gate.l.ops = &gate_ops;
        f->gate.inner = f->dl;
        f->gate.img = f->img;
        mcp_nic_init(&f->nic, f->img, &f->gate.l);
    } else {
        mcp_nic_init(&f->nic, f->img, f->dl);
    }
    f->ctx = mcp_ctx_attach(f->img, 4242);
    if (!CHECK(f->ctx >= 0, "attach: %d", f->ctx))
        return 0;
    f->t = T0;
    f->pcid = PCID;
    f->pnxt = PISS;
    mcp_sim_net_set_time(f->net, f->t);
    return 1;
}

void fx_fini(struct fx *f)
{
    if (f->dl)
        lanai_close(f->dl);
    if (f->pl)
        lanai_close(f->pl);
    if (f->net)
        mcp_sim_net_destroy(f->net);
    free(f->img);
}

/* Advance the clock by dt and run one firmware pass. */
void step(struct fx *f, uint64_t dt)
{
    f->t += dt;
    mcp_sim_net_set_time(f->net, f->t);
    mcp_poll(&f->nic, f->t);
}

uint8_t pattern(uint32_t tag, uint32_t i)
{
    return (uint8_t)(tag * 131u + i * 7u + (tag >> 8) + (i >> 3));
}

/* Build a sealed frame from the peer to the DUT into buf; returns its length. */
uint32_t build(uint8_t *buf, uint8_t type, uint32_t scid, uint32_t dcid, uint8_t seq, uint8_t ack,
               uint8_t flags, uint16_t plen, uint32_t tag)
{
    struct mcp_wire_hdr h = {
        .magic = MCP_WIRE_MAGIC,
        .version = MCP_WIRE_VERSION,
        .type = type,
        .src_node = PEER,
        .dst_node = DUT,
        .src_cid = scid,
        .dst_cid = dcid,
        .seq = seq,
        .ack = ack,
        .flags = flags,
        .len = plen,
    };
    mcp_wire_put(buf, &h);
    for (uint32_t i = 0; i < plen; i++)
        buf[MCP_WIRE_HDR + i] = pattern(tag, i);
    mcp_wire_seal(buf, MCP_WIRE_HDR + plen);
    return MCP_WIRE_HDR + plen;
}

void inject_raw(struct fx *f, const uint8_t *buf, uint32_t len)
{
    int rc = mcp_sim_inject(f->net, DUT, buf, len);
    CHECK(rc == 0, "mcp_sim_inject: %d", rc);
}

/* A control frame (no payload) from the peer. */
void inject_ctrl(struct fx *f, uint8_t type, uint32_t scid, uint32_t dcid, uint8_t seq, uint8_t ack,
                 uint8_t flags)
{
    uint8_t buf[MAXF];
    inject_raw(f, buf, build(buf, type, scid, dcid, seq, ack, flags, 0, 0));
}

/* A DATA frame of the live connection with payload tagged `tag` (no piggybacked ACK). */
void inject_data(struct fx *f, uint8_t seq, uint32_t tag)
{
    uint8_t buf[MAXF];
    inject_raw(f, buf, build(buf, MCP_FT_DATA, PCID, f->lcid, seq, 0, 0, 40, tag));
}

/* Take every frame the DUT sent to the peer; each must pass mcp_wire_check(). */
int take_frames(struct fx *f, struct frame *out, int max)
{
    int n = 0;
    for (;;) {
        struct frame tmp, *fr = n < max ? &out[n] : &tmp;
        void *bufs[1] = {fr->b};
        uint32_t len = 0;
        if (lanai_rx(f->pl, bufs, MAXF, &len, 1) != 1)
            break;
        fr->len = len;
        CHECK(mcp_wire_check(fr->b, len, PAYLOAD, &fr->h) == MCP_WIRE_OK,
              "the DUT sent an invalid frame of %u bytes", len);
        CHECK(fr->h.src_node == DUT && fr->h.dst_node == PEER, "frame %u -> %u", fr->h.src_node,
              fr->h.dst_node);
        n++;
    }
    CHECK(n <= max, "%d frames, room for %d", n, max);
    return n;
}

/* Discard every frame waiting at the peer; returns how many. */
int drain(struct fx *f)
{
    uint8_t b[MAXF + 1];
    void *bufs[1] = {b};
    uint32_t len;
    int n = 0;
    while (lanai_rx(f->pl, bufs, MAXF, &len, 1) == 1)
        n++;
    return n;
}

/* Check the header fields of one frame; ANY skips a field. */
int frame_is(const char *file, int line, const struct frame *fr, uint8_t type, uint64_t scid,
             uint64_t dcid, uint64_t seq, uint64_t ack)
{
    int ok = 1;
    const struct mcp_wire_hdr *h = &fr->h;
    ok &=
        th_check(h->type == type, file, line, "frame type", "type %u, expected %u", h->type, type);
    if (scid != ANY)
        ok &= th_check(h->src_cid == scid, file, line, "src_cid", "0x%08x, expected 0x%08x",
                       h->src_cid, (uint32_t)scid);
    if (dcid != ANY)
        ok &= th_check(h->dst_cid == dcid, file, line, "dst_cid", "0x%08x, expected 0x%08x",
                       h->dst_cid, (uint32_t)dcid);
    if (seq != ANY)
        ok &= th_check(h->seq == seq, file, line, "seq", "%u, expected %u", h->seq, (uint8_t)seq);
    if (ack != ANY) {
        ok &= th_check((h->flags & MCP_FLAG_ACK) != 0, file, line, "ack flag", "flags 0x%x",
                       h->flags);
        ok &= th_check(h->ack == ack, file, line, "ack", "%u, expected %u", h->ack, (uint8_t)ack);
    }
    return ok;
}

/*
 * Check how every counter moved since the last check: spec lists "name=delta" or "name=?"
 * (any change, including none); names not listed must not have moved.  Byte counters are
 * never checked.
 */
int counters_moved(const char *file, int line, struct fx *f, const char *spec)
{
    int ok = 1;
    const uint64_t *now = (const uint64_t *)&f->img->counters;
    const uint64_t *was = (const uint64_t *)&f->snap;
    for (unsigned i = 0; i < mcp_counter_count(); i++) {
        const char *name = mcp_counter_name(i);
        size_t nl = strlen(name);
        uint64_t want = 0;
        int any = !strcmp(name, "tx_bytes") || !strcmp(name, "rx_bytes");
        for (const char *p = spec; (p = strstr(p, name)) != NULL; p += nl) {
            if ((p != spec && p[-1] != ' ') || p[nl] != '=')
                continue;
            if (p[nl + 1] == '?')
                any = 1;
            else
                want = strtoull(p + nl + 1, NULL, 10);
            break;
        }
        uint64_t d = now[i] - was[i];
        if (!any)
            ok &= th_check(d == want, file, line, "counter", "%s moved by %llu, expected %llu (%s)",
                           name, (unsigned long long)d, (unsigned long long)want, spec);
    }
    f->snap = f->img->counters;
    return ok;
}

/* The peer opens: SYN in, exactly one SYNACK out.  Sets f->lcid and f->liss. */
int peer_open(struct fx *f)
{
    struct frame fr[4];
    inject_ctrl(f, MCP_FT_SYN, PCID, 0, PISS, 0, 0);
    step(f, 0);
    int n = take_frames(f, fr, 4);
    if (!CHECK(n == 1, "%d frames answer a SYN", n) ||
        !FRAME_IS(fr[0], MCP_FT_SYNACK, ANY, PCID, ANY, ANY))
        return 0;
    f->lcid = fr[0].h.src_cid;
    f->liss = fr[0].h.seq;
    CHECK(f->lcid != 0, "SYNACK with cid 0");
    CHECK((f->lcid >> 8) == ((f->t / 1000000u) & 0xffffffu),
          "cid 0x%08x does not carry the stamp %llu ms", f->lcid,
          (unsigned long long)(f->t / 1000000u));
    return COUNTERS(f, "rx_frames=1 tx_ctrl=1");
}

/* Post n sends of context ctx to PEER: cookie 100+i, len 20+i, payload tagged 1000+i. */
void post_sends(struct fx *f, unsigned first, unsigned n)
{
    for (unsigned i = first; i < first + n; i++) {
        uint32_t slot;
        uint8_t *p = mcp_send_slot(f->img, (unsigned)f->ctx, &slot);
        if (!CHECK(p != NULL, "send ring full at %u", i))
            return;
        CHECK_EQ_U64(slot, i % f->img->cfg.send_slots);
        for (uint32_t k = 0; k < 20 + i; k++)
            p[k] = pattern(1000 + i, k);
        mcp_send_post(f->img, (unsigned)f->ctx, slot, PEER, 20 + i, 100 + i);
        CHECK_EQ_U64(mcp_sslot(f->img, (unsigned)f->ctx * f->img->cfg.send_slots + slot)->state,
                     MCP_SLOT_READY);
    }
}

struct mcp_send_slot *sslot(struct fx *f, unsigned i)
{
    return mcp_sslot(f->img, (unsigned)f->ctx * f->img->cfg.send_slots + i);
}

/* Check a DATA frame carrying send number i with sequence number seq. */
int data_frame_is(const char *file, int line, struct fx *f, const struct frame *fr, unsigned i,
                  uint8_t seq)
{
    int ok = frame_is(file, line, fr, MCP_FT_DATA, f->lcid, f->pcid, seq, ANY);
    ok &= th_check(fr->h.len == 20 + i, file, line, "len", "%u, expected %u", fr->h.len, 20 + i);
    if ((fr->h.flags & MCP_FLAG_ACK) && fr->h.ack != f->pnxt)
        ok &= th_check(0, file, line, "piggybacked ack", "ack %u, expected %u", fr->h.ack, f->pnxt);
    for (uint32_t k = 0; ok && k < fr->h.len; k++)
        if (fr->b[MCP_WIRE_HDR + k] != pattern(1000 + i, k))
            ok = th_check(0, file, line, "payload", "byte %u of send %u differs", k, i);
    return ok;
}

/*
 * The DUT opens: n sends posted, one SYN out, SYNACK in, then the first min(n, window) sends
 * go out as DATA with sequence numbers liss, liss+1, ...
 */
int dut_open(struct fx *f, unsigned n)
{
    struct frame fr[MCP_MAX_WINDOW + 4];
    post_sends(f, 0, n);
    step(f, US);
    int got = take_frames(f, fr, 4);
    if (!CHECK(got == 1, "%d frames after the first send, expected one SYN", got) ||
        !FRAME_IS(fr[0], MCP_FT_SYN, ANY, 0, ANY, ANY))
        return 0;
    f->lcid = fr[0].h.src_cid;
    f->liss = fr[0].h.seq;
    CHECK(f->lcid != 0, "SYN with cid 0");
    for (unsigned i = 0; i < n; i++)
        CHECK(sslot(f, i)->state == MCP_SLOT_READY, "slot %u in state %s before the SYNACK", i,
              mcp_slot_state_name(sslot(f, i)->state));
    if (!COUNTERS(f, "tx_ctrl=1"))
        return 0;

    inject_ctrl(f, MCP_FT_SYNACK, PCID, f->lcid, PISS, 0, 0);
    unsigned w = n < f->img->cfg.window ? n : f->img->cfg.window;
    got = 0;
    for (int k = 0; k < 2 && got < (int)w; k++) {
        step(f, 0);
        got += take_frames(f, fr + got, (int)(MCP_MAX_WINDOW + 4) - got);
    }
    if (!CHECK(got == (int)w, "%d DATA frames after the SYNACK, expected %u", got, w))
        return 0;
    int ok = 1;
    for (unsigned i = 0; i < w; i++) {
        ok &= DATA_IS(f, fr[i], i, (uint8_t)(f->liss + i));
        ok &= CHECK(sslot(f, i)->state == MCP_SLOT_INTRANSIT, "slot %u: %s", i,
                    mcp_slot_state_name(sslot(f, i)->state));
    }
    char spec[64];
    snprintf(spec, sizeof spec, "rx_frames=1 tx_data=%u", w);
    return ok & COUNTERS(f, spec);
}

/* The oldest host receive queue entry is DATA tagged tag from the peer; take it. */
int host_takes(const char *file, int line, struct fx *f, uint32_t tag)
{
    struct mcp_rx_desc d;
    if (!th_check(mcp_recv_peek(f->img, &d) == 1, file, line, "recv", "host queue empty"))
        return 0;
    int ok =
        th_check(d.src == PEER && d.len == 40, file, line, "entry", "src %u len %u", d.src, d.len);
    for (uint32_t k = 0; ok && k < d.len; k++)
        if (((const uint8_t *)d.data)[k] != pattern(tag, k))
            ok = th_check(0, file, line, "payload", "byte %u differs from tag %u", k, tag);
    mcp_recv_done(f->img);
    return ok;
}

int hostq_empty(struct fx *f)
{
    struct mcp_rx_desc d;
    return mcp_recv_peek(f->img, &d) == 0;
}

unsigned rslots_in(struct fx *f, uint32_t state)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < f->img->cfg.recv_slots; i++)
        n += mcp_rslot(f->img, i)->state == state;
    return n;
}

/* Pop one error entry and check it. */
int error_is(const char *file, int line, struct fx *f, unsigned i, int err)
{
    struct mcp_send_error e;
    if (!th_check(mcp_errq_pop(f->img, (unsigned)f->ctx, &e) == 1, file, line, "errq",
                  "no error entry for send %u", i))
        return 0;
    int ok =
        th_check(e.cookie == 100 + i && e.slot == i && e.dst == PEER && e.error == err, file, line,
                 "error entry", "cookie %u slot %u dst %u error %d, expected %u %u %u %d", e.cookie,
                 e.slot, e.dst, e.error, 100 + i, i, PEER, err);
    ok &= th_check(sslot(f, i)->state == MCP_SLOT_IDLE && sslot(f, i)->error == err, file, line,
                   "failed slot", "slot %u: %s error %d", i,
                   mcp_slot_state_name(sslot(f, i)->state), sslot(f, i)->error);
    return ok;
}

/* Collect the DATA frames the DUT sends in at most two passes at the current time. */
int collect(struct fx *f, struct frame *fr, int max)
{
    int n = 0;
    for (int k = 0; k < 2 && n == 0; k++) {
        step(f, 0);
        n = take_frames(f, fr, max);
    }
    return n;
}

/* ---- the traffic cluster ------------------------------------------------------------------ */

static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static uint32_t msg_key(unsigned src, unsigned dst, uint32_t no)
{
    return mix32(((uint32_t)src << 24) ^ ((uint32_t)dst << 16) ^ mix32(no + 0x9e3779b9u));
}

static uint32_t msg_len(const struct cluster *cl, unsigned src, unsigned dst, uint32_t no)
{
    return MSG_HDR + msg_key(src, dst, no) % (cl->maxlen - MSG_HDR + 1);
}

static uint8_t msg_byte(uint32_t key, uint32_t k)
{
    return (uint8_t)(mix32(key + (k >> 2)) >> ((k & 3) * 8));
}

static void msg_fill(const struct cluster *cl, uint8_t *p, unsigned src, unsigned dst, uint32_t no)
{
    uint32_t len = msg_len(cl, src, dst, no), key = msg_key(src, dst, no);
    mcp_put_le32(p, MSG_MAGIC);
    mcp_put_le16(p + 4, (uint16_t)src);
    mcp_put_le16(p + 6, (uint16_t)dst);
    mcp_put_le32(p + 8, no);
    mcp_put_le32(p + 12, len);
    for (uint32_t k = MSG_HDR; k < len; k++)
        p[k] = msg_byte(key, k);
}

static void cl_bad(struct cluster *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cl_bad(struct cluster *cl, const char *fmt, ...)
{
    if (cl->bad++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cl->why, sizeof cl->why, fmt, ap);
        va_end(ap);
    }
}

static int node_up(struct cluster *cl, unsigned i, uint64_t seed)
{
    struct cl_node *nd = &cl->node[i];
    struct mcp_config c = cl->cfg;
    c.node_id = (uint16_t)i;
    c.seed = seed;
    free(nd->img);
    nd->img = image_new(&c);
    if (!nd->img)
        return 0;
    mcp_nic_init(&nd->nic, nd->img, nd->link);
    nd->ctx = mcp_ctx_attach(nd->img, 1000 + i);
    return nd->ctx >= 0;
}

int cluster_init(struct cluster *cl, unsigned n, const struct mcp_config *cfg,
                 const struct mcp_fault_cfg *f, uint64_t dt, uint32_t maxlen)
{
    memset(cl, 0, sizeof(*cl));
    if (!CHECK(n >= 2 && n <= CL_MAX && maxlen >= MSG_HDR && maxlen <= cfg->slot_size,
               "cluster of %u nodes, messages up to %u bytes", n, maxlen))
        return 0;
    cl->cfg = *cfg;
    cl->n = n;
    cl->dt = dt;
    cl->maxlen = maxlen;
    cl->strict = 1;
    cl->drain_every = 1;
    cl->t = T0;
    /* the net spans every possible node id (frames to ids without a link are lost there),
     * and carries frames somewhat larger than a slot, so oversize frames can be injected */
    unsigned net_nodes = cfg->max_nodes > n ? cfg->max_nodes : n;
    cl->net = mcp_sim_net_create((uint16_t)(net_nodes < 1024 ? net_nodes : 1024),
                                 MCP_WIRE_HDR + cfg->slot_size + 512, f);
    if (!CHECK(cl->net != NULL, "sim net"))
        return 0;
    mcp_sim_net_set_time(cl->net, cl->t);
    for (unsigned i = 0; i < n; i++) {
        struct cl_node *nd = &cl->node[i];
        nd->link = mcp_sim_link_open(cl->net, (uint16_t)i);
        if (!CHECK(nd->link != NULL, "link %u", i) ||
            !CHECK(node_up(cl, i, cfg->seed + i), "image of node %u", i))
            return 0;
        nd->polled = nd->drains = nd->sends = 1;
        for (unsigned j = 0; j < n; j++)
            cl->last[i][j] = -1;
    }
    return 1;
}

void cluster_fini(struct cluster *cl)
{
    for (unsigned i = 0; i < cl->n; i++) {
        if (cl->node[i].link)
            lanai_close(cl->node[i].link);
        free(cl->node[i].img);
        for (unsigned j = 0; j < cl->n; j++) {
            free(cl->got[i][j]);
            free(cl->failed[i][j]);
        }
    }
    if (cl->net)
        mcp_sim_net_destroy(cl->net);
    memset(cl, 0, sizeof(*cl));
}

void cluster_target(struct cluster *cl, unsigned src, unsigned dst, uint32_t count)
{
    free(cl->got[src][dst]);
    free(cl->failed[src][dst]);
    cl->target[src][dst] = count;
    cl->got[src][dst] = calloc(count ? count : 1, 1);
    cl->failed[src][dst] = calloc(count ? count : 1, 1);
}

void cluster_restart(struct cluster *cl, unsigned i, uint64_t seed)
{
    cl->node[i].incarnation++;
    CHECK(node_up(cl, i, seed), "restart of node %u", i);
}

/* Post messages of node s, one per destination in turn, until the ring is full. */
static void cl_post(struct cluster *cl, unsigned s)
{
    struct cl_node *nd = &cl->node[s];
    int more = 1;
    while (more) {
        more = 0;
        for (unsigned k = 0; k < cl->n; k++) {
            unsigned d = (unsigned)((k + cl->rounds) % cl->n);
            if (cl->posted[s][d] >= cl->target[s][d])
                continue;
            uint32_t slot, no = cl->posted[s][d];
            uint8_t *p = mcp_send_slot(nd->img, (unsigned)nd->ctx, &slot);
            if (!p)
                return;
            msg_fill(cl, p, s, d, no);
            mcp_send_post(nd->img, (unsigned)nd->ctx, slot, (uint16_t)d, msg_len(cl, s, d, no), no);
            cl->posted[s][d]++;
            more = 1;
        }
    }
}

void cluster_drain(struct cluster *cl, unsigned d)
{
    struct mcp_image *img = cl->node[d].img;
    struct mcp_rx_desc m;
    while (mcp_recv_peek(img, &m)) {
        const uint8_t *p = m.data;
        if (m.len < MSG_HDR || mcp_get_le32(p) != MSG_MAGIC || mcp_get_le32(p + 12) != m.len) {
            cl_bad(cl, "node %u: message of %u bytes from %u is not one of ours", d, m.len, m.src);
            mcp_recv_done(img);
            continue;
        }
        unsigned src = mcp_get_le16(p + 4), dst = mcp_get_le16(p + 6);
        uint32_t no = mcp_get_le32(p + 8);
        if (src != m.src || dst != d || src >= cl->n || no >= cl->posted[src][d]) {
            cl_bad(cl, "node %u: message %u says %u->%u but came from %u (posted %u)", d, no, src,
                   dst, m.src, src < cl->n ? cl->posted[src][d] : 0);
            mcp_recv_done(img);
            continue;
        }
        uint32_t key = msg_key(src, d, no);
        if (m.len != msg_len(cl, src, d, no)) {
            cl_bad(cl, "node %u: message %u from %u has %u bytes, sent %u", d, no, src, m.len,
                   msg_len(cl, src, d, no));
        } else {
            for (uint32_t k = MSG_HDR; k < m.len; k++) {
                if (p[k] != msg_byte(key, k)) {
                    cl_bad(cl, "node %u: message %u from %u differs at byte %u", d, no, src, k);
                    break;
                }
            }
        }
        if ((int64_t)no <= cl->last[d][src])
            cl_bad(cl, "node %u: message %u from %u after %lld (duplicate or out of order)", d, no,
                   src, (long long)cl->last[d][src]);
        if (cl->strict && no != cl->next[d][src])
            cl_bad(cl, "node %u: message %u from %u, expected %u", d, no, src, cl->next[d][src]);
        if (cl->got[src][d][no]++)
            cl_bad(cl, "node %u: message %u from %u delivered twice", d, no, src);
        cl->last[d][src] = no;
        cl->next[d][src] = no + 1;
        cl->delivered++;
        mcp_recv_done(img);
    }
}

static void cl_errors(struct cluster *cl, unsigned s)
{
    struct cl_node *nd = &cl->node[s];
    struct mcp_send_error e;
    while (mcp_errq_pop(nd->img, (unsigned)nd->ctx, &e)) {
        int k = e.error == -EINVAL ? 0 : e.error == -ETIMEDOUT ? 1 : e.error == -ECONNRESET ? 2 : 3;
        cl->errq[k]++;
        if (e.dst < cl->n && e.cookie < cl->target[s][e.dst])
            cl->failed[s][e.dst][e.cookie] = 1;
        else
            cl_bad(cl, "node %u: error %d for unknown send %u to %u", s, e.error, e.cookie, e.dst);
        if (cl->strict)
            cl_bad(cl, "node %u: send %u to %u failed with %d", s, e.cookie, e.dst, e.error);
    }
}

void cluster_round(struct cluster *cl)
{
    cl->t += cl->dt;
    mcp_sim_net_set_time(cl->net, cl->t);
    for (unsigned i = 0; i < cl->n; i++)
        if (cl->node[i].sends && cl->node[i].polled)
            cl_post(cl, i);
    for (unsigned i = 0; i < cl->n; i++)
        if (cl->node[i].polled)
            mcp_poll(&cl->node[i].nic, cl->t);
    for (unsigned i = 0; i < cl->n; i++) {
        if (cl->node[i].drains && cl->node[i].polled &&
            cl->rounds % (cl->drain_every ? cl->drain_every : 1) == 0)
            cluster_drain(cl, i);
        if (cl->node[i].polled)
            cl_errors(cl, i);
    }
    cl->rounds++;
}

int cluster_done(struct cluster *cl)
{
    for (unsigned s = 0; s < cl->n; s++) {
        struct cl_node *nd = &cl->node[s];
        for (unsigned d = 0; d < cl->n; d++) {
            if (cl->posted[s][d] < cl->target[s][d])
                return 0;
            if (cl->strict && cl->next[d][s] < cl->target[s][d])
                return 0;
        }
        if (nd->polled && mcp_send_busy(nd->img, (unsigned)nd->ctx))
            return 0;
    }
    return 1;
}

int cluster_run(struct cluster *cl, uint64_t max_rounds)
{
    for (uint64_t r = 0; r < max_rounds; r++) {
        cluster_round(cl);
        if (cluster_done(cl))
            return 1;
    }
    return 0;
}

uint64_t cluster_counter(struct cluster *cl, const char *name)
{
    uint64_t sum = 0;
    for (unsigned k = 0; k < mcp_counter_count(); k++)
        if (!strcmp(mcp_counter_name(k), name))
            for (unsigned i = 0; i < cl->n; i++)
                sum += mcp_counter_value(cl->node[i].img, k);
    return sum;
}
