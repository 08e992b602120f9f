/*
 * link.h — opening the links the firmware runs over (see mcp/lanai.h for the contract).
 *
 *   sim  in-process network with seeded faults (tests); see link_sim.h
 *   udp  one UDP socket per node (default)
 *   eth  raw Ethernet frames, EtherType 0x88B5, AF_PACKET (needs CAP_NET_RAW)
 *
 * udp and eth inject faults too (struct mcp_fault_cfg), because this kernel has no netem.
 */
#ifndef PSPORT_MCP_LINK_H
#define PSPORT_MCP_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "lanai.h"
#include "nodes.h"

#define MCP_ETHERTYPE 0x88B5

struct mcp_link_params {
    uint16_t node;                 /* this node's id in nodes */
    const struct psp_nodes *nodes; /* addresses of every node (udp: ip:port, eth: mac) */
    const char *ifname;            /* eth: interface to use (NULL: the one holding our MAC) */
    struct mcp_fault_cfg fault;    /* faults injected on transmit */
    int fd;                        /* an already opened socket to use, or -1; an opened
                                      link owns it (closes it), a failed open leaves it */
    int ring_fd;                   /* udp, with fd: the packet socket of its receive ring
                                      (mcp_link_ring_fd), or -1; owned as fd is */
    int no_ring;                   /* udp, without fd: 1 = read the UDP socket, no ring (a
                                      link that is waited on with poll on its socket) */
    int prefault;                  /* with fd: touch every page of the adopted receive ring
                                      now (pkt_ring_prefault), not on the first lap */
};

/*
 * Open a link of kind "udp" or "eth" with params p.  Returns the link, or NULL with a message
 * in err that says what to do (e.g. "eth link needs CAP_NET_RAW: run as root").
 * The caller owns the link and frees it with lanai_close().
 */
struct lanai_link *mcp_link_open(const char *kind, const struct mcp_link_params *p, char *err,
                                 size_t errlen);

struct lanai_link *mcp_link_udp_open(const struct mcp_link_params *p, char *err, size_t errlen);
struct lanai_link *mcp_link_eth_open(const struct mcp_link_params *p, char *err, size_t errlen);

/* The socket behind a udp or eth link (to hand to another process), or -1. */
int mcp_link_fd(struct lanai_link *link);

/* The packet socket whose receive ring a udp link reads (hand it over with mcp_link_fd; poll
 * both for arrivals), or -1 (none, or another kind of link). */
int mcp_link_ring_fd(struct lanai_link *link);
int mcp_link_udp_ring_fd(struct lanai_link *link); /* the same, for a udp link only */

/* 1 when a udp or eth link reads arrivals from a receive ring (no system call per look). */
int mcp_link_has_ring(struct lanai_link *link);
int mcp_link_eth_has_ring(struct lanai_link *link); /* the same, for an eth link only */

/* 1 when a udp link sends frames that fit one datagram to nodes on the same Ethernet as
 * Ethernet frames (PSP_UDP_ETH, udp_eth.h: once each such node is heard to read them). */
int mcp_link_udp_eth(struct lanai_link *link);
int mcp_link_udp_eth_on(struct lanai_link *link); /* the same, for a udp link only */

/* Counters of a udp or eth link (the sim link has mcp_sim_net_stats()). */
struct mcp_link_stats {
    uint64_t tx_frames, tx_bytes; /* handed to the kernel */
    uint64_t tx_calls;            /* sendmmsg calls: a flush of frames to many nodes is one */
    uint64_t tx_busy;             /* tx() answered -EAGAIN: the queue was full */
    uint64_t tx_dropped_full;     /* frames dropped at flush: socket buffer full (lanai.h) */
    uint64_t tx_errors;           /* frames the kernel refused for good (not sent, counted) */
    uint64_t tx_no_route;         /* frames for a node without address (eth: without MAC) */
    uint64_t rx_frames, rx_bytes; /* handed to the firmware */
    uint64_t rx_truncated;        /* longer than the caller's buffer (reported as cap + 1) */
    uint64_t rx_ignored;          /* eth: not ours (outgoing copies, other EtherTypes, runts) */
    uint64_t rx_errors;           /* errors the socket reported on receive (e.g. ICMP) */
    uint64_t fault_dropped, fault_duplicated, fault_corrupted; /* injected faults */
    /* udp: frames larger than one datagram under the MTU go as GSO segments (udp_seg.h) */
    uint64_t tx_segmented;      /* frames sent as segments */
    uint64_t tx_gso_off;        /* 1 once the kernel refused a segmented write (sent whole since) */
    uint64_t rx_segmented;      /* frames put together from segments */
    uint64_t rx_seg_incomplete; /* frames given up: a segment never came (lost, or read by
                                   another process sharing the socket) */
    uint64_t rx_dropped_nobuf;  /* frames of one read beyond the buffers the firmware offered */
    uint64_t rx_copied;         /* reads copied out of a staging buffer: all of them without
                                   segmenting; with it those not taken in place (segments
                                   one by one, several frames in one read, foreign ones) */
    /* udp: consecutive small frames to one node in one datagram (PSP_UDP_PACK, udp_pack.h) */
    uint64_t tx_packed;  /* frames sent packed */
    uint64_t rx_packed;  /* frames taken out of packed datagrams */
    uint64_t rx_carried; /* frames of a read kept for the next rx(): more than the firmware
                            offered buffers for */
    /* udp: frames under the MTU to nodes on the same Ethernet as link frames (PSP_UDP_ETH,
     * udp_eth.h) */
    uint64_t tx_eth;        /* frames sent as link frames */
    uint64_t rx_eth;        /* link frames read (a packed one counts once) */
    uint64_t tx_hello;      /* hellos sent: this link reads link frames */
    uint64_t rx_hello;      /* hellos read */
    uint64_t eth_forgotten; /* peers sent datagrams again: they sent UDP_ETH_FORGET datagrams
                               under the MTU in a row (restarted without a ring) */
};

/* Copy the counters of a udp or eth link into s. 0, or -EINVAL for another kind of link. */
int mcp_link_stats(struct lanai_link *link, struct mcp_link_stats *s);

/* Fill f from PSP_LINK_LOSS, PSP_LINK_DUP, PSP_LINK_CORRUPT, PSP_LINK_SEED. 0 or -EINVAL. */
int mcp_fault_from_settings(struct mcp_fault_cfg *f, char *err, size_t errlen);

#endif
