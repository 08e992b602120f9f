/*
 * dlink.c — daemon messages over the firmware's RDP engine on a UDP link of their own.
 *
 * Every frame's payload starts with a 12-byte fragment header (magic, flags, message type,
 * message length, offset).  The firmware keeps frames of a node pair in order, and the two
 * channels are sent message by message, so a receiver rebuilds a message per (node, channel)
 * by appending frames at the offset it expects; anything else is counted as malformed and
 * dropped.
 */
#include "dlink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "link.h"
#include "log.h"
#include "mcp.h"
#include "mcp_env.h"
#include "mcp_host.h"

#define FRAG_MAGIC          0xd5u
#define FRAG_FIRST          0x01u
#define FRAG_BULK           0x02u
#define FRAG_HDR            12u
#define DLINK_SLOT_SIZE     8192u
#define DLINK_CHANS         2
#define DLINK_BULK_INFLIGHT 128u /* bulk frames in the firmware at most */

struct frag_hdr {
    uint8_t magic;
    uint8_t flags;
    uint16_t type;
    uint32_t total;  /* message bytes */
    uint32_t offset; /* of this frame's bytes within the message */
};

/* A queued message; `off` bytes of it are in the firmware already. */
struct qmsg {
    struct qmsg *next;
    uint32_t len, off;
    uint16_t type;
    uint8_t data[];
};

struct sendq {
    struct qmsg *head, *tail;
    uint64_t bytes;
};

/* A message being reassembled. */
struct partial {
    uint8_t *buf;
    uint32_t total, got;
    uint16_t type;
    uint8_t active;
};

struct psid_dlink {
    struct psp_nodes nodes; /* the daemon ports */
    uint16_t node, count;
    struct lanai_link *link;
    struct mcp_image *img;
    struct mcp_nic nic;
    struct sendq *q;       /* [count][DLINK_CHANS] */
    struct partial *parts; /* [count][DLINK_CHANS] */
    unsigned queued_msgs;
    struct psid_dlink_stats st;
};

struct psid_dlink *psid_dlink_open(uint16_t node, const struct psp_nodes *nodes,
                                   const struct mcp_fault_cfg *fault, uint32_t peer_timeout_ms,
                                   char *err, size_t errlen)
{
    struct psid_dlink *dl = calloc(1, sizeof *dl);
    if (!dl) {
        psp_set_err(err, errlen, "out of memory");
        return NULL;
    }
    dl->nodes = *nodes;
    for (unsigned i = 0; i < dl->nodes.count; i++) {
        if (dl->nodes.node[i].present && dl->nodes.node[i].port >= 65535) {
            psp_set_err(err, errlen, "node %u: UDP port %u leaves no daemon port above it", i,
                        dl->nodes.node[i].port);
            free(dl);
            return NULL;
        }
        dl->nodes.node[i].port++;
    }
    dl->node = node;
    dl->count = nodes->count;
    dl->q = calloc((size_t)dl->count * DLINK_CHANS, sizeof *dl->q);
    dl->parts = calloc((size_t)dl->count * DLINK_CHANS, sizeof *dl->parts);
    if (!dl->q || !dl->parts) {
        psp_set_err(err, errlen, "out of memory");
        goto fail;
    }

    struct mcp_link_params lp;
    memset(&lp, 0, sizeof lp);
    lp.node = node;
    lp.nodes = &dl->nodes;
    lp.fault = *fault;
    lp.fault.seed ^= 0x5eed0d1ull; /* other faults than the NIC link's */
    lp.fd = -1;
    lp.ring_fd = -1;
    lp.no_ring = 1; /* psid polls the daemon link's UDP socket */
    char why[256];
    dl->link = mcp_link_udp_open(&lp, why, sizeof why);
    if (!dl->link) {
        psp_set_err(err, errlen, "daemon link (UDP port %u): %s",
                    node < dl->count ? dl->nodes.node[node].port : 0, why);
        goto fail;
    }

    struct mcp_config cfg;
    mcp_config_default(&cfg, node);
    cfg.max_nodes = dl->count < 2 ? 2 : dl->count;
    cfg.contexts = 1;
    cfg.send_slots = 1024;
    cfg.recv_slots = 128;
    cfg.hostq_slots = 256;
    cfg.slot_size = DLINK_SLOT_SIZE;
    if (cfg.slot_size + MCP_WIRE_HDR > dl->link->max_frame)
        cfg.slot_size = dl->link->max_frame - MCP_WIRE_HDR;
    cfg.ack_delay_us = 0; /* psid may sleep right after a pass: acknowledge at once */
    cfg.peer_timeout_ms = peer_timeout_ms;
    if (getrandom(&cfg.seed, sizeof cfg.seed, 0) != (ssize_t)sizeof cfg.seed)
        cfg.seed ^= (uint64_t)mcp_now_ns();
    const char *bad = NULL;
    if (mcp_config_check(&cfg, &bad)) {
        psp_set_err(err, errlen, "daemon link configuration: %s", bad ? bad : "invalid");
        goto fail;
    }
    size_t size = mcp_image_size(&cfg);
    dl->img = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!dl->img || mcp_image_format(dl->img, size, &cfg) != 0) {
        psp_set_err(err, errlen, "cannot format the daemon link's image (%zu bytes)", size);
        goto fail;
    }
    mcp_nic_init(&dl->nic, dl->img, dl->link);
    if (mcp_ctx_attach(dl->img, 1) != 0) {
        psp_set_err(err, errlen, "cannot take the daemon link's context");
        goto fail;
    }
    return dl;
fail:
    psid_dlink_close(dl);
    return NULL;
}

static void drop_queue(struct psid_dlink *dl, struct sendq *q, int count)
{
    while (q->head) {
        struct qmsg *m = q->head;
        q->head = m->next;
        if (count)
            dl->st.dropped_queued++;
        dl->queued_msgs--;
        free(m);
    }
    q->tail = NULL;
    q->bytes = 0;
}

void psid_dlink_close(struct psid_dlink *dl)
{
    if (!dl)
        return;
    for (unsigned i = 0; dl->q && i < (unsigned)dl->count * DLINK_CHANS; i++)
        drop_queue(dl, &dl->q[i], 0);
    for (unsigned i = 0; dl->parts && i < (unsigned)dl->count * DLINK_CHANS; i++)
        free(dl->parts[i].buf);
    free(dl->q);
    free(dl->parts);
    lanai_close(dl->link);
    free(dl->img);
    free(dl);
}

int psid_dlink_fd(const struct psid_dlink *dl)
{
    return mcp_link_fd(dl->link);
}

int psid_dlink_send(struct psid_dlink *dl, uint16_t dst, enum psid_chan chan, uint16_t type,
                    const void *hdr, uint32_t hlen, const void *data, uint32_t dlen)
{
    if (dst >= dl->count || dst == dl->node || !dl->nodes.node[dst].present ||
        (unsigned)chan >= DLINK_CHANS)
        return -EINVAL;
    if ((uint64_t)hlen + dlen > PSID_DMSG_MAX)
        return -EMSGSIZE;
    struct qmsg *m = malloc(sizeof *m + hlen + dlen);
    if (!m)
        return -ENOMEM;
    m->next = NULL;
    m->len = hlen + dlen;
    m->off = 0;
    m->type = type;
    if (hlen)
        memcpy(m->data, hdr, hlen);
    if (dlen)
        memcpy(m->data + hlen, data, dlen);
    struct sendq *q = &dl->q[dst * DLINK_CHANS + chan];
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += m->len;
    dl->queued_msgs++;
    dl->st.msgs_tx++;
    dl->st.bytes_tx += m->len;
    return 0;
}

uint64_t psid_dlink_queued(const struct psid_dlink *dl, uint16_t dst, enum psid_chan chan)
{
    return dst < dl->count && (unsigned)chan < DLINK_CHANS ? dl->q[dst * DLINK_CHANS + chan].bytes
                                                           : 0;
}

void psid_dlink_forget(struct psid_dlink *dl, uint16_t dst)
{
    if (dst >= dl->count)
        return;
    for (unsigned c = 0; c < DLINK_CHANS; c++) {
        drop_queue(dl, &dl->q[dst * DLINK_CHANS + c], 1);
        struct partial *p = &dl->parts[dst * DLINK_CHANS + c];
        free(p->buf);
        memset(p, 0, sizeof *p);
    }
}

/* Move up to max_frames frames of queue q (for dst) into send slots. Returns frames posted,
 * -1 if the ring is full. */
static int fill_queue(struct psid_dlink *dl, uint16_t dst, unsigned chan, struct sendq *q,
                      uint32_t max_frames)
{
    uint32_t room = mcp_max_payload(dl->img) - FRAG_HDR;
    int posted = 0;
    while (q->head && (uint32_t)posted < max_frames) {
        struct qmsg *m = q->head;
        uint32_t slot;
        uint8_t *buf = mcp_send_slot(dl->img, 0, &slot);
        if (!buf)
            return posted ? posted : -1;
        uint32_t n = m->len - m->off < room ? m->len - m->off : room;
        struct frag_hdr h = {
            FRAG_MAGIC,
            (uint8_t)((m->off == 0 ? FRAG_FIRST : 0) | (chan == PSID_CHAN_BULK ? FRAG_BULK : 0)),
            m->type, m->len, m->off};
        memcpy(buf, &h, FRAG_HDR);
        memcpy(buf + FRAG_HDR, m->data + m->off, n);
        mcp_send_post(dl->img, 0, slot, dst, FRAG_HDR + n, dst);
        posted++;
        m->off += n;
        q->bytes -= n;
        if (m->off == m->len) {
            q->head = m->next;
            if (!q->head)
                q->tail = NULL;
            dl->queued_msgs--;
            free(m);
        }
    }
    return posted;
}

/*
 * Urgent messages first, then bulk, but bulk only while few frames are in flight: the ring
 * is FIFO, so a deep backlog of output frames would hold up an alive message or a reply
 * queued after it.
 */
static int fill_slots(struct psid_dlink *dl)
{
    int work = 0;
    if (!dl->queued_msgs)
        return 0;
    uint32_t busy = mcp_send_busy(dl->img, 0);
    for (unsigned chan = 0; chan < DLINK_CHANS; chan++)
        for (uint16_t d = 0; d < dl->count; d++) {
            struct sendq *q = &dl->q[d * DLINK_CHANS + chan];
            if (!q->head)
                continue;
            if (chan == PSID_CHAN_BULK && busy >= DLINK_BULK_INFLIGHT)
                return work;
            int n = fill_queue(dl, d, chan, q,
                               chan == PSID_CHAN_BULK ? DLINK_BULK_INFLIGHT - busy : UINT32_MAX);
            if (n < 0)
                return work;
            work += n;
            busy += (uint32_t)n;
        }
    return work;
}

/* Take one frame into the reassembly of its (node, channel); deliver a finished message. */
static void take_frame(struct psid_dlink *dl, uint16_t src, const uint8_t *f, uint32_t len,
                       psid_dlink_deliver_fn deliver, void *arg)
{
    struct frag_hdr h;
    if (len < FRAG_HDR || src >= dl->count) {
        dl->st.malformed++;
        return;
    }
    memcpy(&h, f, FRAG_HDR);
    uint32_t n = len - FRAG_HDR;
    if (h.magic != FRAG_MAGIC || (h.flags & ~(FRAG_FIRST | FRAG_BULK)) || h.total > PSID_DMSG_MAX ||
        h.offset > h.total || n > h.total - h.offset) {
        dl->st.malformed++;
        return;
    }
    struct partial *p = &dl->parts[src * DLINK_CHANS + ((h.flags & FRAG_BULK) ? 1 : 0)];
    if (h.flags & FRAG_FIRST) {
        if (p->active) { /* a message cut short: cannot happen on RDP unless the peer lies */
            dl->st.malformed++;
            free(p->buf);
            memset(p, 0, sizeof *p);
        }
        if (h.offset != 0) {
            dl->st.malformed++;
            return;
        }
        if (n == h.total) { /* one frame: deliver in place */
            dl->st.msgs_rx++;
            dl->st.bytes_rx += n;
            deliver(arg, src, h.type, f + FRAG_HDR, n);
            return;
        }
        p->buf = malloc(h.total);
        if (!p->buf) {
            dl->st.malformed++;
            return;
        }
        p->total = h.total;
        p->type = h.type;
        p->got = 0;
        p->active = 1;
    } else if (!p->active || h.offset != p->got || h.total != p->total || h.type != p->type) {
        dl->st.malformed++;
        if (p->active) {
            free(p->buf);
            memset(p, 0, sizeof *p);
        }
        return;
    }
    memcpy(p->buf + p->got, f + FRAG_HDR, n);
    p->got += n;
    if (p->got < p->total)
        return;
    uint8_t *buf = p->buf;
    uint32_t total = p->total;
    uint16_t type = p->type;
    memset(p, 0, sizeof *p);
    dl->st.msgs_rx++;
    dl->st.bytes_rx += total;
    deliver(arg, src, type, buf, total);
    free(buf);
}

int psid_dlink_run(struct psid_dlink *dl, uint64_t now_ns, psid_dlink_deliver_fn deliver, void *arg)
{
    int work = fill_slots(dl);
    work += mcp_poll(&dl->nic, now_ns);
    struct mcp_rx_desc d;
    while (mcp_recv_peek(dl->img, &d)) {
        take_frame(dl, d.src, d.data, d.len, deliver, arg);
        mcp_recv_done(dl->img);
        work++;
    }
    struct mcp_send_error e;
    while (mcp_errq_pop(dl->img, 0, &e)) {
        dl->st.send_failed++;
        work++;
    }
    /* Slots freed by this pass's ACKs take more of what is queued. */
    work += fill_slots(dl);
    return work;
}

int psid_dlink_busy(const struct psid_dlink *dl)
{
    return dl->queued_msgs || mcp_send_busy(dl->img, 0) > 0;
}

const struct psid_dlink_stats *psid_dlink_stats(const struct psid_dlink *dl)
{
    return &dl->st;
}

const struct mcp_image *psid_dlink_image(const struct psid_dlink *dl)
{
    return dl->img;
}
