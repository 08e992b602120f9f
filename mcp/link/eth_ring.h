/*
 * eth_ring.h — private to the eth link: the packet socket's receive ring (PACKET_RX_RING,
 * TPACKET_V2), read without a system call.
 *
 * Why: on a virtual machine every system call costs about a microsecond, and a receive poll
 * with recvmmsg pays one per empty look plus one per frame.  With the ring the kernel copies
 * each frame into memory mapped into every process that runs the firmware; a look for new
 * frames is a load.  The sender still pays its sendmmsg.
 *
 * The ring belongs to the socket: the process that opens the socket sets it up, a process that
 * adopts the socket (a psid client handed the descriptor) maps the same ring.  The geometry
 * follows from the interface MTU alone (no setting), so both compute the same size.
 *
 * The read position is shared by every process mapping the ring: it lives in the ring's own
 * memory, in the bytes the kernel leaves unused at the end of block 0.  Readers are serialised
 * by whoever runs the firmware (the NIC lock), as rx() always is.
 */
#ifndef PSPORT_MCP_ETH_RING_H
#define PSPORT_MCP_ETH_RING_H

#include <stddef.h>
#include <stdint.h>

#define ETH_RING_BYTES (8u << 20) /* kernel memory of one ring (fixed: both ends derive it) */

struct eth_ring {
    uint8_t *map;        /* the mapped ring, NULL when the socket has none */
    size_t map_len;      /* bytes mapped */
    uint32_t frame_size; /* bytes per ring frame */
    uint32_t frame_nr;   /* frames in the ring */
    uint32_t per_block;  /* frames per block */
    uint32_t block_size; /* bytes per block */
    uint32_t *tail;      /* shared read position (frame index), inside block 0 */
};

/*
 * Set up a ring on the packet socket fd (not yet bound) for frames of an interface with the
 * given MTU, and map it.  0, or a negative errno: the socket then has no ring (one made before
 * the mapping failed is taken down again) and is read with recvmmsg.
 */
int eth_ring_create(struct eth_ring *r, int fd, int mtu);

/*
 * Map the ring an adopted socket fd already has (made by eth_ring_create in another process).
 * 1 mapped, 0 the socket has no ring (read it with recvmmsg), or a negative errno.
 */
int eth_ring_adopt(struct eth_ring *r, int fd, int mtu);

/* Unmap the ring (the socket keeps it until it is closed). */
void eth_ring_unmap(struct eth_ring *r);

/* 1 when a frame waits to be read, else 0: one load, no system call. */
int eth_ring_ready(struct eth_ring *r);

/*
 * The oldest frame not yet read: 1 with *data (from its Ethernet header on, *snap bytes of
 * the *wire bytes it had on the wire) and *pkttype (its sll_pkttype), or 0 when none waits.
 * The frame stays in the ring, and *data valid, until eth_ring_release().  Never blocks.
 */
int eth_ring_peek(struct eth_ring *r, const uint8_t **data, uint32_t *snap, uint32_t *wire,
                  uint8_t *pkttype);

/* Give the frame eth_ring_peek() returned back to the kernel and move to the next. */
void eth_ring_release(struct eth_ring *r);

#endif
