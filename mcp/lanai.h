/*
 * lanai.h — the "hardware" the firmware runs on.
 *
 * Myrinet's LANai is gone; the MCP touches the outside world only through this interface:
 * a link that sends and receives whole frames, and a clock (passed into mcp_poll()).  Anything
 * that provides these operations can execute the firmware: a host process, the psid NIC
 * thread, a kernel thread, or a test with a simulated network.
 *
 * Contract for every link:
 *  - tx() queues one frame for node `dst`; the frame memory stays valid and unchanged until
 *    the next flush() returns, so a link may batch (sendmmsg, GSO).  A full queue is not an
 *    error: tx() returns -EAGAIN and the firmware tries again on a later pass.
 *  - flush() hands every queued frame to the wire.  It never blocks.  A frame the wire will
 *    not take now (socket buffer full) is dropped and counted by the link, like a frame lost
 *    on the wire; the firmware's retransmission recovers it.  After flush() returns the link
 *    no longer references any frame memory: the firmware may reuse it at once.
 *  - rx() copies up to n waiting frames into bufs[i] (each `cap` bytes), stores each length in
 *    lens[i] and returns how many it filled (0 when nothing waits).  It never blocks.  A frame
 *    longer than cap is truncated to cap and its length reported as cap + 1, so the firmware
 *    counts it as malformed.
 *  - Links are unreliable, like Myrinet: frames may be lost, duplicated, reordered or
 *    corrupted.  Reliability is the firmware's job.
 *  - rx_fcs(), where a link has it, is rx() that also takes each frame's CRC as it copies the
 *    frame (as a NIC checks the FCS on the wire): fcs[i] = LANAI_FCS_VALID | the CRC-32C
 *    (mcp_crc32c from 0) of the frame's bytes after its first LANAI_FCS_SKIP, or 0 for a frame
 *    it did not take it for (the firmware computes it then).  The firmware compares it, with
 *    the header it reads itself, against the frame's CRC field.
 */
#ifndef PSPORT_MCP_LANAI_H
#define PSPORT_MCP_LANAI_H

#include "mcp_types.h"

struct lanai_link;

/* rx_fcs: the bytes a frame's FCS leaves out at its start (the firmware's header, which the
 * firmware reads anyway; mcp_wire.h) and the flag of a taken FCS. */
#define LANAI_FCS_SKIP  32u
#define LANAI_FCS_VALID (1ull << 32)

struct lanai_link_ops {
    /* Queue one frame of len bytes for node dst. 0, or -EAGAIN when the queue is full. */
    int (*tx)(struct lanai_link *link, uint16_t dst, const void *frame, uint32_t len);
    /* Send every queued frame. Returns the number sent or a negative errno. */
    int (*flush)(struct lanai_link *link);
    /* Receive up to n frames (see contract above). Returns the count or a negative errno. */
    int (*rx)(struct lanai_link *link, void *const *bufs, uint32_t cap, uint32_t *lens, int n);
    /* Release the link and everything it owns. */
    void (*close)(struct lanai_link *link);
    /* Optional: 0 when rx() would find nothing, 1 when it may find frames; a look without a
     * system call (a receive ring).  NULL: the firmware asks rx() every pass. */
    int (*pending)(struct lanai_link *link);
    /* Optional: rx() with each frame's FCS in fcs[i] (see the contract).  NULL: rx() only. */
    int (*rx_fcs)(struct lanai_link *link, void *const *bufs, uint32_t cap, uint32_t *lens,
                  uint64_t *fcs, int n);
};

/* A link instance. Implementations embed this as their first member. */
struct lanai_link {
    const struct lanai_link_ops *ops;
    const char *kind;   /* "sim", "udp", "eth" */
    uint32_t max_frame; /* largest frame (header + payload) the wire carries */
    uint16_t node;      /* this node's id */
    uint16_t max_nodes; /* node ids are 0 .. max_nodes-1 */
};

static inline int lanai_tx(struct lanai_link *l, uint16_t dst, const void *f, uint32_t len)
{
    return l->ops->tx(l, dst, f, len);
}

static inline int lanai_flush(struct lanai_link *l)
{
    return l->ops->flush(l);
}

static inline int lanai_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens,
                           int n)
{
    return l->ops->rx(l, bufs, cap, lens, n);
}

/* lanai_rx that fills fcs too (see the contract): every fcs[i] is 0 if the link has no rx_fcs. */
static inline int lanai_rx_fcs(struct lanai_link *l, void *const *bufs, uint32_t cap,
                               uint32_t *lens, uint64_t *fcs, int n)
{
    if (l->ops->rx_fcs)
        return l->ops->rx_fcs(l, bufs, cap, lens, fcs, n);
    int got = l->ops->rx(l, bufs, cap, lens, n);
    for (int i = 0; i < got; i++)
        fcs[i] = 0;
    return got;
}

/* 0 when nothing waits to be received for certain, else 1 (see ops.pending). */
static inline int lanai_pending(struct lanai_link *l)
{
    return l->ops->pending ? l->ops->pending(l) : 1;
}

static inline void lanai_close(struct lanai_link *l)
{
    if (l)
        l->ops->close(l);
}

#endif
