/*
 * mcp_host.h — the host side of the NIC: what a process does with the image it has mapped.
 *
 * Sending is programmed I/O as in the paper: take the next IDLE slot of the context's send
 * ring, copy the payload into its frame buffer, post it (state READY).  Receiving reads the
 * host receive queue the firmware fills.  These functions never run the firmware; the caller
 * runs mcp_poll() (host-driven executor) or relies on another executor.
 *
 * Locking: one thread per context for the send functions; one consumer at a time for the
 * host receive queue (the caller serialises).  Attach/detach are safe from any process.
 */
#ifndef PSPORT_MCP_HOST_H
#define PSPORT_MCP_HOST_H

#include "mcp_types.h"

#include "mcp_image.h"

/*
 * Attach a context for owner (e.g. a pid). Returns the context index, or -EBUSY when all
 * contexts are taken.
 */
int mcp_ctx_attach(struct mcp_image *img, uint32_t owner);

/*
 * Detach context c.  Slots already posted still go out; the firmware frees the context once
 * all its slots are IDLE.  Used by the owner and by whoever reclaims a dead owner.
 */
void mcp_ctx_detach(struct mcp_image *img, unsigned c);

/*
 * Next free send slot of context c: returns its payload buffer (mcp_max_payload() bytes) and
 * stores the ring index in *slot, or returns NULL when the ring is full (try after polling).
 */
void *mcp_send_slot(struct mcp_image *img, unsigned c, uint32_t *slot);

/*
 * Post the slot obtained from mcp_send_slot(): len payload bytes to node dst.  cookie comes
 * back in a struct mcp_send_error if the send fails.  The slot belongs to the firmware from
 * here on.
 */
void mcp_send_post(struct mcp_image *img, unsigned c, uint32_t slot, uint16_t dst, uint32_t len,
                   uint32_t cookie);

/*
 * mcp_send_post with the payload's CRC-32C (mcp_crc32c from 0 over the len bytes), taken while
 * the host copied them into the slot (mcp_crc32c_copy): the firmware then seals the frame over
 * its header alone.  It trusts the value for the first transmission only; a wrong one costs
 * the frame (the receiver drops it, the retransmission computes the CRC itself).
 */
void mcp_send_post_crc(struct mcp_image *img, unsigned c, uint32_t slot, uint16_t dst, uint32_t len,
                       uint32_t cookie, uint32_t payload_crc);

/* Copy len bytes to node dst through context c. 0, -EAGAIN (ring full) or -EMSGSIZE. */
int mcp_send(struct mcp_image *img, unsigned c, uint16_t dst, const void *data, uint32_t len,
             uint32_t cookie);

/* Send slots of context c not IDLE (posted and not yet acknowledged or failed). */
uint32_t mcp_send_busy(struct mcp_image *img, unsigned c);

/* Whether frames wait to be transmitted: posted and not yet taken by the firmware, queued
 * behind a peer's window, or marked for retransmission.  Reads without the NIC lock (a hint
 * for whoever decides to run the firmware, not an exact count). */
int mcp_tx_backlog(struct mcp_image *img);

/* Whether frames to node dst wait behind its send window: queued there already, or `posted`
 * frames just posted (perhaps not yet taken) that the window cannot take all of.  They go out
 * only as ACKs come back, so somebody must keep running the firmware.  A hint, read without
 * the NIC lock. */
int mcp_tx_blocked(struct mcp_image *img, uint16_t dst, uint32_t posted);

/* Whether frames to node dst wait in the NIC: posted through context c and not yet taken by
 * the firmware, queued behind dst's window, or not yet transmitted.  0 once every frame for
 * dst has gone out at least once (ACKs may still be due).  A hint, read without the NIC lock. */
int mcp_tx_waiting(struct mcp_image *img, unsigned c, uint16_t dst);

/* Whether the way to node dst is idle: nothing posted through context c that the firmware has
 * not taken, nothing queued for dst, nothing sent to it that is not acknowledged.  A hint,
 * read without the NIC lock. */
int mcp_tx_idle(struct mcp_image *img, unsigned c, uint16_t dst);

/* Ask the firmware to acknowledge what it received from node src at its next pass instead of
 * after ack_delay_us (a receiver that is done and goes off to compute: the sender's window
 * would stay full until somebody else ran the firmware).  Without the NIC lock: a flag the
 * firmware clears. */
void mcp_ack_asap(struct mcp_image *img, uint16_t src);

/* A frame waiting in the host receive queue. data points into the image. */
struct mcp_rx_desc {
    const void *data;
    uint32_t len;
    uint16_t src;
};

/* Look at the oldest received frame without taking it: 1 and *d filled, or 0 when empty. */
int mcp_recv_peek(struct mcp_image *img, struct mcp_rx_desc *d);

/* Release the frame returned by the last mcp_recv_peek() (the data is gone afterwards). */
void mcp_recv_done(struct mcp_image *img);

/*
 * The host receive queue's consumer position (frames released so far, modulo 2^32).  A
 * consumer that keeps its own count can tell from it whether its last mcp_recv_done()
 * completed.
 */
uint32_t mcp_recv_position(const struct mcp_image *img);

/*
 * Finish an mcp_recv_done() that its caller did not live to complete: the frame at position
 * pos (the caller's count before that call) is released if it is not already.  Returns the
 * new position.  The caller serialises consumers, as for mcp_recv_done(), and holds off the
 * firmware (the NIC lock) while it runs.
 */
uint32_t mcp_recv_settle(struct mcp_image *img, uint32_t pos);

/* Take the oldest send error of context c into *e: 1, or 0 when none. */
int mcp_errq_pop(struct mcp_image *img, unsigned c, struct mcp_send_error *e);

#endif
