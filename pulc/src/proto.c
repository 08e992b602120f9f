/*
 * proto.c — the protocol switch and the drain of the host receive queue; the handlers of
 * the queued protocols (port-D, -S, -M) and of error notices.
 */
#include "proto.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "marea.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "mcp_wire.h"

void pulc_hdr_put(uint8_t *b, const struct pulc_hdr *h)
{
    b[0] = h->proto;
    b[1] = h->flags;
    b[2] = (uint8_t)h->src_port;
    b[3] = (uint8_t)(h->src_port >> 8);
    b[4] = (uint8_t)h->dst_port;
    b[5] = (uint8_t)(h->dst_port >> 8);
    b[6] = (uint8_t)h->xlen;
    b[7] = (uint8_t)(h->xlen >> 8);
    mcp_put_le32(b + 8, h->msg_id);
    mcp_put_le32(b + 12, h->offset);
    mcp_put_le32(b + 16, h->total);
}

int pulc_hdr_get(const uint8_t *b, uint32_t len, struct pulc_hdr *h)
{
    if (len < PULC_HDR_LEN)
        return -EBADMSG;
    h->proto = b[0];
    h->flags = b[1];
    h->src_port = mcp_get_le16(b + 2);
    h->dst_port = mcp_get_le16(b + 4);
    h->xlen = mcp_get_le16(b + 6);
    h->msg_id = mcp_get_le32(b + 8);
    h->offset = mcp_get_le32(b + 12);
    h->total = mcp_get_le32(b + 16);
    if (h->proto == 0 || h->proto >= PULC_PROTO_MAX)
        return -EBADMSG;
    return 0;
}

/* A notice of one header (no payload) to node dst through n's context: 0 or -EAGAIN. */
static int send_notice(struct pulc_node *n, uint16_t dst, const struct pulc_hdr *h)
{
    if (n->ctx < 0)
        return -EAGAIN;
    if (n->ring_lock)
        pthread_mutex_lock(n->ring_lock);
    uint32_t slot;
    uint8_t *b = mcp_send_slot(n->img, (unsigned)n->ctx, &slot);
    if (b) {
        pulc_hdr_put(b, h);
        mcp_send_post(n->img, (unsigned)n->ctx, slot, dst, PULC_HDR_LEN, UINT32_MAX);
    }
    if (n->ring_lock)
        pthread_mutex_unlock(n->ring_lock);
    return b ? 0 : -EAGAIN;
}

int pulc_send_error(struct pulc_node *n, uint16_t dst_node, uint16_t dst_port, uint16_t our_port,
                    uint32_t msg_id, int err)
{
    struct pulc_hdr h = {PULC_PROTO_ERR, 0, our_port, dst_port, 0, msg_id, (uint32_t)err, 0};
    int rc = send_notice(n, dst_node, &h);
    if (!rc)
        n->area->err_sent++;
    return rc;
}

int pulc_send_abort(struct pulc_node *n, uint32_t dest, uint16_t src_port, uint32_t msg_id)
{
    struct pulc_hdr h = {PULC_PROTO_ABORT, 0, src_port, (uint16_t)dest, 0, msg_id, 0, 0};
    return send_notice(n, (uint16_t)(dest >> 16), &h);
}

/* ---- queued protocols: port-D, port-S, port-M ---- */

/* The message from src on port p still being filled, or PULC_NONE (destination prediction:
 * the port's last_open first, then its queue from the end). */
static uint32_t open_message(struct pulc_area *a, uint32_t p, uint32_t src)
{
    struct pulc_port *pt = pulc_port_at(a, p);
    uint32_t i = pt->last_open;
    if (i != PULC_NONE) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        if (m->state == PULC_MSG_QUEUED && m->port == p && m->src == src &&
            m->received < m->total && !(m->flags & PULC_MSG_ABORTED))
            return i;
    }
    for (i = pt->qtail; i != PULC_NONE; i = pulc_msg_at(a, i)->prev) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        if (m->src == src && m->received < m->total && !(m->flags & PULC_MSG_ABORTED) &&
            !(m->flags & PULC_MSG_DIRECT))
            return i;
    }
    return PULC_NONE;
}

static int refuse(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h, int err)
{
    struct pulc_area *a = n->area;
    if (!(h->flags & PULC_HF_FIRST)) {
        a->rx_orphan++; /* the first fragment was refused already */
        return 0;
    }
    int rc = pulc_send_error(n, src_node, h->src_port, h->dst_port, h->msg_id, err);
    if (rc)
        return rc;
    a->rx_noport++;
    return 0;
}

static int queue_rx(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                    const uint8_t *body, uint32_t len, uint64_t rx_tag)
{
    struct pulc_area *a = n->area;
    if (h->dst_port == 0 || h->dst_port >= a->cfg.ports)
        return refuse(n, src_node, h, ECONNREFUSED);
    struct pulc_port *pt = pulc_port_at(a, h->dst_port);
    if (pt->state != PULC_PORT_OPEN)
        return refuse(n, src_node, h, ECONNREFUSED);
    if (pt->kind != h->proto)
        return refuse(n, src_node, h, EPROTOTYPE);

    uint32_t src = (uint32_t)src_node << 16 | h->src_port;
    uint32_t i = open_message(a, h->dst_port, src);
    const uint8_t *data = body;
    uint32_t dlen = len;

    if (h->flags & PULC_HF_FIRST) {
        if (h->xlen > PULC_XHDR_MAX || h->xlen > len || h->offset != 0 ||
            len - h->xlen > h->total) {
            a->rx_malformed++;
            return 0;
        }
        if (i != PULC_NONE) {
            struct pulc_msg *m = pulc_msg_at(a, i);
            if (m->msg_id == h->msg_id) { /* seen before a repair: it is in already */
                a->rx_duplicate++;
                return 0;
            }
            /* A sender's messages never interleave on one port: a new first fragment means the
             * old message will not continue (the sender died or restarted). */
            m->flags |= PULC_MSG_ABORTED;
            pt->last_open = PULC_NONE;
            a->aborted++;
        }
        uint32_t need = pulc_frags_needed(a, h->total, len - h->xlen);
        if (a->msgs_free == 0 || a->frags_free < need) {
            a->rx_stalls++;
            return -EAGAIN;
        }
        i = pulc_msg_alloc(a);
        struct pulc_msg *m = pulc_msg_at(a, i);
        m->src = src;
        m->msg_id = h->msg_id;
        m->total = h->total;
        m->xlen = h->xlen;
        m->proto = h->proto;
        m->rx_tag = rx_tag;
        memcpy(m->xhdr, body, h->xlen);
        data = body + h->xlen;
        dlen = len - h->xlen;
        /* Data first, then the queue: queuing is the commit (a repair frees the fragments of
         * a message that is not queued, and keeps a queued one with all its data). */
        if (pulc_msg_append(a, i, data, dlen, rx_tag)) { /* cannot fail: checked above */
            pulc_msg_free(a, i);
            return -EAGAIN;
        }
        pulc_msg_enqueue(a, h->dst_port, i);
        pt->bytes_in += dlen;
        if (pt->abort_src == src && pt->abort_msg_id == h->msg_id && m->received < m->total) {
            m->flags |= PULC_MSG_ABORTED; /* its abort notice overtook it */
            pt->abort_src = 0;
            a->aborted++;
            return 1;
        }
        pt->last_open = m->received < m->total ? i : PULC_NONE;
        return 1;
    }

    if (i == PULC_NONE) {
        a->rx_orphan++;
        return 0;
    }
    struct pulc_msg *m = pulc_msg_at(a, i);
    if (h->msg_id != m->msg_id || h->offset > m->received || dlen > m->total - h->offset) {
        if (h->msg_id != m->msg_id || h->offset > m->received)
            a->rx_orphan++;
        else
            a->rx_malformed++;
        return 0;
    }
    if (h->offset + dlen <= m->received) {
        a->rx_duplicate++;
        return 0;
    }
    uint32_t skip = m->received - h->offset; /* a partly applied frame (repair) */
    if ((m->flags & PULC_MSG_CLAIMED) && m->recv_pid == n->pid && m->frag_head == PULC_NONE &&
        m->taken == m->received && !(m->flags & PULC_MSG_INLINE)) {
        /* We drain for our own claimed message and have taken all before: straight into the
         * receive buffer (bytes past its end are dropped: truncation).  taken first: a repair
         * sets received back to taken for a message without fragments. */
        uint32_t off = m->received, n = dlen - skip;
        if (off < m->recv_len)
            memcpy((uint8_t *)(uintptr_t)m->recv_addr + off, data + skip,
                   n < m->recv_len - off ? n : m->recv_len - off);
        __atomic_store_n(&m->taken, off + n, __ATOMIC_RELEASE);
        __atomic_store_n(&m->received, off + n, __ATOMIC_RELEASE);
        pt->bytes_in += n;
        pt->last_open = m->received < m->total ? i : PULC_NONE;
        return 1;
    }
    if (pulc_msg_append(a, i, data + skip, dlen - skip, rx_tag)) {
        a->rx_stalls++;
        return -EAGAIN;
    }
    pt->bytes_in += dlen - skip;
    pt->last_open = m->received < m->total ? i : PULC_NONE;
    return 1;
}

/* An error notice about a message one of our ports sent. */
static int err_rx(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                  const uint8_t *body, uint32_t len, uint64_t rx_tag)
{
    (void)body;
    (void)len;
    (void)rx_tag;
    struct pulc_area *a = n->area;
    if (h->dst_port == 0 || h->dst_port >= a->cfg.ports || h->offset == 0 || h->offset > 4095) {
        a->rx_malformed++;
        return 0;
    }
    struct pulc_port *pt = pulc_port_at(a, h->dst_port);
    if (pt->state != PULC_PORT_OPEN)
        return 0;
    pt->error = -(int32_t)h->offset;
    pt->error_msg_id = h->msg_id;
    pt->error_src = (uint32_t)src_node << 16 | h->src_port;
    a->err_received++;
    return 1;
}

/* A sender died half way through a message: drop what it sent of it. */
static int abort_rx(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                    const uint8_t *body, uint32_t len, uint64_t rx_tag)
{
    (void)body;
    (void)len;
    (void)rx_tag;
    struct pulc_area *a = n->area;
    if (h->dst_port == 0 || h->dst_port >= a->cfg.ports) {
        a->rx_malformed++;
        return 0;
    }
    struct pulc_port *pt = pulc_port_at(a, h->dst_port);
    if (pt->state != PULC_PORT_OPEN)
        return 0;
    uint32_t src = (uint32_t)src_node << 16 | h->src_port;
    uint32_t i = open_message(a, h->dst_port, src);
    if (i == PULC_NONE || pulc_msg_at(a, i)->msg_id != h->msg_id) {
        pt->abort_src = src; /* the message's fragments are still on their way */
        pt->abort_msg_id = h->msg_id;
        return 0;
    }
    pulc_msg_at(a, i)->flags |= PULC_MSG_ABORTED;
    pt->last_open = PULC_NONE;
    a->aborted++;
    return 1;
}

/* clang-format off */
#define PULC_BUILTIN_HANDLERS                                                                      \
    [PULC_PROTO_D] = queue_rx,                                                                     \
    [PULC_PROTO_S] = queue_rx,                                                                     \
    [PULC_PROTO_M] = queue_rx,                                                                     \
    [PULC_PROTO_RAW] = pulc_raw_rx,                                                                \
    [PULC_PROTO_ERR] = err_rx,                                                                     \
    [PULC_PROTO_ABORT] = abort_rx,
static pulc_proto_fn handlers[PULC_PROTO_MAX] = {PULC_BUILTIN_HANDLERS};
static const pulc_proto_fn builtin_handlers[PULC_PROTO_MAX] = {PULC_BUILTIN_HANDLERS};
#undef PULC_BUILTIN_HANDLERS
/* clang-format on */

int pulc_proto_register(unsigned proto, pulc_proto_fn fn)
{
    if (proto == 0 || proto >= PULC_PROTO_MAX)
        return -EINVAL;
    handlers[proto] = fn;
    return 0;
}

/* Release the head frame of the host queue and count it (exactly-once bookkeeping: the low
 * 32 bits of rx_count follow the image's hostq_tail). */
static void release_head(struct pulc_area *a, struct mcp_image *img)
{
    mcp_recv_done(img);
    a->rx_count++;
    a->rx_head_applied = 0;
}

int pulc_drain(struct pulc_node *n, unsigned max)
{
    struct pulc_area *a = n->area;
    struct mcp_image *img = n->img;
    struct mcp_rx_desc d;
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    if ((uint32_t)a->rx_count != mcp_recv_position(img)) {
        /* A consumer died inside mcp_recv_done(): finish it with the firmware held off (lock
         * order: area, then NIC; the kernel provider's NIC lock is in the module). */
        if (n->settle) {
            rc = n->settle(n->dev_fd, (uint32_t)a->rx_count);
        } else if ((rc = pulc_nic_lock(a, img)) == 0) {
            mcp_recv_settle(img, (uint32_t)a->rx_count);
            pulc_nic_unlock(a);
        }
        if (rc) {
            pulc_area_unlock(a);
            return rc;
        }
        a->rx_count++;
        a->rx_head_applied = 0;
    }
    if (a->rx_head_applied && mcp_recv_peek(img, &d))
        release_head(a, img);
    a->rx_head_applied = 0;

    uint32_t woken_port = 0;
    unsigned done = 0;
    const pulc_proto_fn *table = n->builtin_only ? builtin_handlers : handlers;
    while (done < max && mcp_recv_peek(img, &d)) {
        struct pulc_hdr h;
        const uint8_t *b = d.data;
        int r;
        int bad = pulc_hdr_get(b, d.len, &h);
        if (!bad && !table[h.proto] && n->keep_unknown) {
            uint64_t now = mcp_now_ns();
            if (n->unknown_tag != a->rx_count || !n->unknown_since_ns) {
                n->unknown_tag = a->rx_count;
                n->unknown_since_ns = now;
            }
            if (now - n->unknown_since_ns < PULC_UNKNOWN_NS)
                break; /* its owner polls the host queue itself */
            n->unknown_since_ns = 0;
        }
        if (bad || !table[h.proto]) {
            a->rx_malformed++;
            r = 0;
        } else {
            r = table[h.proto](n, d.src, &h, b + PULC_HDR_LEN, d.len - PULC_HDR_LEN, a->rx_count);
        }
        if (r == -EAGAIN)
            break;
        a->rx_head_applied = 1; /* applied: a death from here on must not apply it again */
        release_head(a, img);
        a->rx_frames++;
        done++;
        if (r > 0 && h.dst_port < a->cfg.ports) {
            /* Wake the owner; batch consecutive frames for one port into one wake. */
            if (woken_port && woken_port != h.dst_port)
                pulc_port_wake(a, woken_port);
            woken_port = h.dst_port;
        }
    }
    if (woken_port)
        pulc_port_wake(a, woken_port);
    pulc_area_unlock(a);
    return (int)done;
}
