/*
 * udp_eth.h — private to the udp link: frames that fit one datagram go to nodes on the same
 * Ethernet as raw Ethernet frames (EtherType UDP_ETH_TYPE) through the receive ring's packet
 * socket, past the IP and UDP layers of both kernels (PSP_UDP_ETH).  Frames over one datagram
 * stay UDP: one GSO write carries 64 KiB through the stack once.
 *
 * Why: between two network namespaces a small datagram costs the sending kernel its
 * udp_sendmsg, the route, the bridge's netfilter hooks for IPv4 and the receiving side's
 * ip_rcv before the ring has it; a raw frame is handed from the sender's device to the ring.
 * Firmware ping-pong (mcp-pp, 8 B) measured 7.1-9.8 µs over UDP against 3.9-5.5 µs over
 * the eth link, the same firmware.
 *
 * A link sends link frames to a peer only once it knows the peer reads them: one that reads
 * through a ring sends a hello (a link frame the firmware never sees) to every node when the
 * link is opened (not when adopted) and to a node whose datagrams it reads while it has not
 * heard link frames from it; any link frame from a peer's MAC tells that the peer has a ring.
 * A peer without one (no CAP_NET_RAW, PSP_UDP_RING=0) never sends one and keeps getting
 * datagrams.  A peer that stops reading them (restarted without a ring) is known by its
 * datagrams: after UDP_ETH_FORGET in a row that it would have sent as link frames, and no link
 * frame from it between, the link sends it datagrams again, and a hello (a peer that reads
 * link frames but had not heard of this one learns it so).  What a link learned is its
 * process's own.
 *
 * Both kinds arrive through the one ring, in the order the wire brought them.
 */
#ifndef PSPORT_MCP_UDP_ETH_H
#define PSPORT_MCP_UDP_ETH_H

#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "nodes.h"

#define UDP_ETH_TYPE 0x88B6u /* IEEE local experimental EtherType 2 (eth link: 0x88B5) */
#define UDP_ETH_HDR  14u     /* destination MAC, source MAC, EtherType */
/* struct virtio_net_hdr: the ring's socket has PACKET_VNET_HDR, so what it sends starts with
 * one (zero: no offloads) */
#define UDP_ETH_VNET      10u
#define UDP_ETH_TXHDR     (UDP_ETH_VNET + UDP_ETH_HDR)
#define UDP_ETH_MIN       60u /* shortest frame on the wire (without FCS): padded to it */
#define UDP_ETH_HELLO_LEN 8u
#define UDP_ETH_SAMPLE    64u /* with link frames on: every n-th datagram read is looked at */
#define UDP_ETH_FORGET    8u  /* datagrams under the MTU in a row: a peer is sent datagrams */

struct udp_eth {
    int on;                        /* link frames may be sent: ring, interface, setting */
    uint16_t nodes;                /* entries of the per-node arrays */
    uint8_t mac[6];                /* this node's interface */
    uint8_t *known;                /* per node: reachable by MAC (not this interface or address) */
    uint8_t *ok;                   /* per node: link frames came from it (it reads them) */
    uint8_t *udp_run;              /* per node with ok: datagrams under the MTU since its last
                                      link frame */
    unsigned oks;                  /* nodes with ok */
    uint8_t (*hdr)[UDP_ETH_TXHDR]; /* per node: what goes before frames to it (vnet, Ethernet) */
    uint16_t *hash;                /* MAC -> node + 1, open addressing; 0: empty */
    uint32_t hash_mask;
    unsigned sample;       /* datagrams read since one was looked at */
    struct sockaddr_ll to; /* interface and EtherType given to sendmmsg */
};

/* The Ethernet interface holding address ip: its index and MAC.  0, or -ENODEV (none, or
 * not an Ethernet one, like loopback). */
int udp_eth_iface(struct in_addr ip, int *ifindex, uint8_t mac[6]);

/*
 * Set e up for node me of nodes: the interface holding me's address (an Ethernet one), the
 * nodes the table gives a MAC for.  0 with e->on 1, or 0 with e->on 0 (no such interface, no
 * other node with a MAC: datagrams only), or -ENOMEM.  e is the caller's; udp_eth_free frees
 * what this allocated.
 */
int udp_eth_setup(struct udp_eth *e, const struct psp_nodes *nodes, uint16_t me);

/* Free what udp_eth_setup allocated; e->on becomes 0. */
void udp_eth_free(struct udp_eth *e);

/* The node whose MAC is mac, or -1. */
int udp_eth_node_of(const struct udp_eth *e, const uint8_t mac[6]);

/* 1 if the len bytes at p (after the Ethernet header) are a hello. */
int udp_eth_is_hello(const uint8_t *p, uint32_t len);

/* Send a hello to node (known) through packet socket fd now.  0 or -errno. */
int udp_eth_hello(struct udp_eth *e, int fd, uint16_t node);

/* A link frame's payload length: len less the padding to UDP_ETH_MIN when p is one frame
 * whose firmware header gives a shorter length. */
uint32_t udp_eth_unpad(const uint8_t *p, uint32_t len);

#endif
