/*
 * pkt_ring.h — private to the links: a packet socket's receive ring (PACKET_RX_RING,
 * TPACKET_V2), read without a system call.  The eth link reads all its frames from one; the
 * udp link reads its datagrams from one on a packet socket beside its UDP socket.
 *
 * Why: on a virtual machine every system call costs about a microsecond, and a receive poll
 * with recvmmsg pays one per empty look plus one per frame.  With the ring the kernel copies
 * each frame into memory mapped into every process that runs the firmware; a look for new
 * frames is a load.  The sender still pays its sendmmsg.
 *
 * The ring belongs to the socket: the process that opens the socket sets it up, a process that
 * adopts the socket (a psid client handed the descriptor) maps the same ring.  The geometry
 * follows from the largest packet and the ring's size, both fixed by the link (no setting), so
 * both compute the same mapping.
 *
 * The read position is shared by every process mapping the ring: it lives in the ring's own
 * memory, in the bytes the kernel leaves unused at the end of block 0.  Readers are serialised
 * by whoever runs the firmware (the NIC lock), as rx() always is.
 */
#ifndef PSPORT_MCP_PKT_RING_H
#define PSPORT_MCP_PKT_RING_H

#include <stddef.h>
#include <stdint.h>

struct pkt_ring {
    uint8_t *map;        /* the mapped ring, NULL when the socket has none */
    size_t map_len;      /* bytes mapped */
    uint32_t frame_size; /* bytes per ring frame */
    uint32_t frame_nr;   /* frames in the ring */
    uint32_t per_block;  /* frames per block */
    uint32_t block_size; /* bytes per block */
    uint32_t *tail;      /* shared read position (frame index), inside block 0 */
    int vnet;            /* 1: a struct virtio_net_hdr precedes each packet (PACKET_VNET_HDR) */
};

/*
 * Set up a ring of about bytes bytes on the packet socket fd (not yet bound) for packets of up
 * to max_net bytes from the network header on (an Ethernet link: its MTU), and map it.  vnet 1
 * asks the kernel to put a struct virtio_net_hdr before each packet (its GSO size: how a
 * GSO or GRO packet was cut).  0, or a negative errno: the socket then has no ring (one made
 * before the mapping failed is taken down again) and is read with recvmmsg.
 */
int pkt_ring_create(struct pkt_ring *r, int fd, uint32_t max_net, uint32_t bytes, int vnet);

/*
 * Map the ring an adopted socket fd already has (made by pkt_ring_create in another process
 * with the same max_net and bytes).  1 mapped, 0 the socket has no ring (read it with
 * recvmmsg), or a negative errno.
 */
int pkt_ring_adopt(struct pkt_ring *r, int fd, uint32_t max_net, uint32_t bytes);

/*
 * Touch every page of r's mapping (a read) and every frame's status word (a write that
 * changes nothing), so that this process's first lap of the ring does not pay a first touch
 * per page: the kernel maps a ring's pages at mmap, but a hypervisor that keeps its own page
 * tables may fill them only at a touch.  For a process that adopted the ring from psid (psid's
 * own laps warmed its mapping long ago).  Nothing when r has no ring.
 */
void pkt_ring_prefault(const struct pkt_ring *r);

/* Unmap the ring (the socket keeps it until it is closed). */
void pkt_ring_unmap(struct pkt_ring *r);

/* 1 when a frame waits to be read, else 0: one load, no system call. */
int pkt_ring_ready(struct pkt_ring *r);

/*
 * The oldest frame not yet read: 1 with *data (from its link-level header on for a SOCK_RAW
 * socket, from its network header for SOCK_DGRAM; *snap bytes of the *wire bytes it had on
 * the wire; with vnet its struct virtio_net_hdr just before *data) and *pkttype (its
 * sll_pkttype) and *net (where its network header starts, from *data), or 0 when none waits.
 * The frame stays in the ring, and *data valid, until pkt_ring_release().  Never blocks.
 */
int pkt_ring_peek(struct pkt_ring *r, const uint8_t **data, uint32_t *snap, uint32_t *wire,
                  uint8_t *pkttype, uint32_t *net);

/* Give the frame pkt_ring_peek() returned back to the kernel and move to the next. */
void pkt_ring_release(struct pkt_ring *r);

/* The first half of pkt_ring_release(): the frame marked taken and the read position moved
 * past it, the frame not given back yet (what a reader that dies in between leaves; the next
 * reader gives it back).  For tests of that death. */
void pkt_ring_move_on(struct pkt_ring *r);

#endif
