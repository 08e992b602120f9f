/*
 * udp_ring.c — the udp link's receive ring on a packet socket (see udp_ring.h).
 */
#include "udp_ring.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_eth.h"
#include "udp_seg.h"

#define UDP_RING_MAX_NET 65535u /* the largest IPv4 packet: a whole GSO write */
#define IP_HDR           20u    /* without options: we never send any */
#define UDP_HDR          8u

/* Attach a classic BPF program to fd. 0 or -errno. */
static int attach(int fd, struct sock_filter *code, unsigned short len)
{
    struct sock_fprog prog = {.len = len, .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) ? -errno : 0;
}

/* The packet socket's filter: the udp link's frames (udp_eth.h) to this host on interface
 * ifindex (the one holding my address; 0: none) and unfragmented IPv4 UDP datagrams (no IP
 * options) to me; never what this host sends. */
static int filter_ring(int fd, const struct sockaddr_in *me, int ifindex)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),  /* 0 */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 19, 0),      /* 1: -> 21 */
        BPF_STMT(BPF_MISC | BPF_TAX, 0),                                  /* 2: X = pkttype */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_PROTOCOL), /* 3 */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UDP_ETH_TYPE, 0, 4),          /* 4: -> 5, 9 */
        BPF_STMT(BPF_MISC | BPF_TXA, 0),                                  /* 5 */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_HOST, 0, 14),          /* 6: -> 7, 21 */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_IFINDEX),  /* 7 */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ifindex, 11, 12),   /* 8: -> 20, 21 */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 11),             /* 9: -> 10, 21 */
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_NET_OFF + 0), /* 10: version 4, 20-byte header */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x45, 0, 9),
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_NET_OFF + 9), /* 12: protocol UDP */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 7),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, SKF_NET_OFF + 6), /* 14: no fragment (MF, offset) */
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, 5, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 16), /* 16: destination address */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(me->sin_addr.s_addr), 0, 3),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, SKF_NET_OFF + IP_HDR + 2), /* 18: destination port */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohs(me->sin_port), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0x40000), /* 20: take it whole */
        BPF_STMT(BPF_RET | BPF_K, 0),       /* 21 */
    };
    return attach(fd, code, sizeof code / sizeof code[0]);
}

/* The UDP socket's filter (it sees the UDP header at 0): keep only datagrams over seg bytes
 * that are not segments, i.e. frames a sender without GSO sent as IP fragments. */
static int filter_udp(int fd, uint32_t seg)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, seg + UDP_HDR, 0, 3),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, UDP_HDR), /* "SG" read big-endian */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (UDP_SEG_MAGIC & 0xffu) << 8 | UDP_SEG_MAGIC >> 8, 1,
                 0),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    return attach(fd, code, sizeof code / sizeof code[0]);
}

int udp_ring_open(struct udp_ring *r, int udp_fd, const struct sockaddr_in *me, uint32_t seg)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    /* protocol 0 until bound: nothing queues before the filter and the ring are in place */
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int ifindex = 0;
    uint8_t mac[6];
    if (udp_eth_iface(me->sin_addr, &ifindex, mac) != 0)
        ifindex = 0; /* no Ethernet interface holds my address: no link frames */
    int rc = filter_ring(fd, me, ifindex);
    if (!rc)
        rc = pkt_ring_create(&r->ring, fd, UDP_RING_MAX_NET, UDP_RING_BYTES, 1);
    if (!rc) {
        struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
        /* every interface: datagrams to our address may come in on any of them; every
         * protocol: IPv4 and the link frames, in the order they came.  Copies of what this
         * host sends are not wanted (the filter drops them too, where the kernel is older). */
        int one = 1;
        (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0)
            rc = -errno;
    }
    if (!rc)
        rc = filter_udp(udp_fd, seg);
    if (rc) {
        pkt_ring_unmap(&r->ring);
        close(fd);
        return rc;
    }
    r->fd = fd;
    return 0;
}

int udp_ring_adopt(struct udp_ring *r, int fd)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    int rc = pkt_ring_adopt(&r->ring, fd, UDP_RING_MAX_NET, UDP_RING_BYTES);
    if (rc == 1 && !r->ring.vnet) {
        pkt_ring_unmap(&r->ring);
        rc = -EPROTO; /* not a socket udp_ring_open made */
    }
    if (rc != 1)
        return rc ? rc : -EPROTO;
    r->fd = fd;
    return 0;
}

void udp_ring_close(struct udp_ring *r)
{
    pkt_ring_unmap(&r->ring);
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}

int udp_ring_ready(struct udp_ring *r)
{
    return pkt_ring_ready(&r->ring);
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

int udp_ring_peek(struct udp_ring *r, struct sockaddr_in *from, const uint8_t **p, uint32_t *len,
                  uint32_t *gso, const uint8_t **mac)
{
    const uint8_t *d;
    uint32_t snap, wire, net;
    uint8_t type;
    if (!pkt_ring_peek(&r->ring, &d, &snap, &wire, &type, &net))
        return 0;
    if (snap < wire)
        return -1;
    if (net == UDP_ETH_HDR && d[12] == (uint8_t)(UDP_ETH_TYPE >> 8) &&
        d[13] == (uint8_t)UDP_ETH_TYPE) {
        memset(from, 0, sizeof *from); /* no address: a link frame is never a segment */
        *mac = d + 6;
        *p = d + net;
        *len = udp_eth_unpad(d + net, snap - net);
        *gso = *len;
        return 2;
    }
    if (snap < net + IP_HDR + UDP_HDR)
        return -1;
    const uint8_t *ip = d + net;
    uint32_t tot = be16(ip + 2);
    if (tot < IP_HDR + UDP_HDR || tot > snap - net)
        return -1;
    memset(from, 0, sizeof *from);
    from->sin_family = AF_INET;
    memcpy(&from->sin_addr, ip + 12, 4);
    memcpy(&from->sin_port, ip + IP_HDR, 2);
    *p = ip + IP_HDR + UDP_HDR;
    *len = tot - IP_HDR - UDP_HDR;
    struct virtio_net_hdr vh;
    memcpy(&vh, d - sizeof vh, sizeof vh);
    *gso = vh.gso_type != VIRTIO_NET_HDR_GSO_NONE && vh.gso_size && vh.gso_size < *len ? vh.gso_size
                                                                                       : *len;
    return 1;
}

void udp_ring_release(struct udp_ring *r)
{
    pkt_ring_release(&r->ring);
}
