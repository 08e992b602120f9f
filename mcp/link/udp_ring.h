/*
 * udp_ring.h — private to the udp link: its datagrams read from a packet socket's receive ring
 * (pkt_ring.h) instead of the UDP socket, so that a look for frames is a load, not a system
 * call (on this VM a system call costs about a microsecond, an empty recvmmsg 1.1-1.3 µs).
 *
 * A packet socket (SOCK_RAW, every protocol, every interface) with a BPF filter takes the
 * unfragmented UDP datagrams for the node's address and port, and the link's own Ethernet
 * frames to this host on the interface holding that address (udp_eth.h), into a ring of
 * 32 MiB; never copies of what this host sends.  A virtio_net_hdr in front of each tells how a
 * GSO packet was cut (its segment size); what the socket sends starts with one too.  The UDP
 * socket stays bound (no ICMP "port unreachable" to the senders), but a filter of its own drops
 * what the ring takes; it keeps only datagrams the ring cannot see whole: those that came as IP
 * fragments (a sender with PSP_UDP_GSO=0), which the link reads from it now and then.
 *
 * Needs CAP_NET_RAW (psid runs as root; its clients are handed the socket).  Owns fd and the
 * mapping.
 */
#ifndef PSPORT_MCP_UDP_RING_H
#define PSPORT_MCP_UDP_RING_H

#include <netinet/in.h>
#include <stdint.h>

#include "pkt_ring.h"

#define UDP_RING_BYTES (32u << 20) /* fixed: every process maps the same geometry */

struct udp_ring {
    int fd; /* the packet socket, -1: none */
    struct pkt_ring ring;
};

/*
 * Open the packet socket for datagrams to me, give it its ring, and make the UDP socket udp_fd
 * (bound to me) drop what the ring takes: datagrams of up to seg bytes and segments.  0, or a
 * negative errno (-EPERM without CAP_NET_RAW) with nothing changed: read the UDP socket.
 */
int udp_ring_open(struct udp_ring *r, int udp_fd, const struct sockaddr_in *me, uint32_t seg);

/* Map the ring of packet socket fd, handed over by the process that opened it; fd is owned
 * from then on.  0, or a negative errno (fd stays the caller's). */
int udp_ring_adopt(struct udp_ring *r, int fd);

/* Unmap and close. */
void udp_ring_close(struct udp_ring *r);

/* 1 when a datagram waits in the ring (one load). */
int udp_ring_ready(struct udp_ring *r);

/*
 * The oldest packet in the ring: 1 for a datagram, with its sender, its UDP payload (*len bytes
 * at *p) and its GSO segment size (*gso; the length when it was not cut); 2 for one of the
 * link's own Ethernet frames (udp_eth.h), with its payload (*p, *len, padding taken off; *gso
 * = *len) and the sender's MAC (*mac, 6 bytes); -1 for a packet that is not one (truncated,
 * malformed: release it); 0 when none waits.  Valid until udp_ring_release().
 */
int udp_ring_peek(struct udp_ring *r, struct sockaddr_in *from, const uint8_t **p, uint32_t *len,
                  uint32_t *gso, const uint8_t **mac);

/* Give the datagram udp_ring_peek() returned back to the kernel. */
void udp_ring_release(struct udp_ring *r);

#endif
