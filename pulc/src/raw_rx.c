/*
 * raw_rx.c — the rawdata receive handler: RAW frames into a registered buffer.
 *
 * A registration is a message descriptor queued on its owner's port with PULC_MSG_RAW (and
 * CLAIMED, so no receive matches it): total = buffer length, msg_id = nonce, direct_pid /
 * direct_addr = owner and buffer.  The owner writes arriving data straight into its buffer
 * (taken and received advance together); any other drainer (another process, psid) appends
 * fragments that the owner copies later (pulc_raw_progress), or first thing when it drains a
 * frame of that registration itself.  Frames of one registration come
 * in offset order, so an offset below `received` is a duplicate and one above it an orphan.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "marea.h"
#include "proto.h"

int pulc_raw_rx(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                const uint8_t *body, uint32_t len, uint64_t rx_tag)
{
    (void)src_node;
    struct pulc_area *a = n->area;
    struct pulc_msg *m = pulc_raw_reg(a, h->dst_port, h->msg_id, h->total);
    if (!m) {
        a->rx_orphan++; /* unregistered, the port closed, or a bad handle */
        return 0;
    }
    if (h->offset > m->received || len > m->total - h->offset) {
        if (h->offset > m->received)
            a->rx_orphan++;
        else
            a->rx_malformed++;
        return 0;
    }
    if (h->offset + len <= m->received) {
        a->rx_duplicate++;
        return 0;
    }
    uint32_t skip = m->received - h->offset, cnt = len - skip;
    if (m->direct_pid == n->pid && m->frag_head != PULC_NONE)
        /* The owner drains a registration that another drainer (psid's NIC thread) put
         * fragments on: those into the buffer first, then this frame straight in.  Appending
         * behind them instead, as before, cost the owner two more copies of every frame it
         * drained until its next pulc_raw_progress: in osu_bw 1 MiB between two nodes 8 % of
         * a rank's time went to those. */
        pulc_msg_read(a, h->msg_id, (uint8_t *)(uintptr_t)m->direct_addr + m->taken,
                      m->total - m->taken);
    if (m->direct_pid == n->pid && m->frag_head == PULC_NONE) {
        /* The owner drains: straight into its buffer.  taken first: a repair sets received
         * back to taken when the message holds no fragments. */
        memcpy((uint8_t *)(uintptr_t)m->direct_addr + m->received, body + skip, cnt);
        __atomic_store_n(&m->taken, m->received + cnt, __ATOMIC_RELEASE);
        __atomic_store_n(&m->received, m->received + cnt, __ATOMIC_RELEASE);
        return 1;
    }
    if (pulc_msg_append(a, h->msg_id, body + skip, cnt, rx_tag)) {
        a->rx_stalls++;
        return -EAGAIN;
    }
    return 1;
}
