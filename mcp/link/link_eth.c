/*
 * link_eth.c — raw Ethernet frames with psport's own EtherType (0x88B5), via AF_PACKET.
 *
 * On the wire: [dst MAC][src MAC][EtherType 0x88B5][firmware frame].  The socket is bound to
 * one interface (from the params, the nodes file, or the interface holding this node's MAC)
 * and to our EtherType.  max_frame is the interface MTU.  Needs CAP_NET_RAW.
 *
 * Frames shorter than the Ethernet minimum are padded by some NICs; a received minimum-size
 * frame is trimmed back to the length its firmware header announces.
 *
 * Frames come in through the socket's receive ring (pkt_ring.h: a look for frames is a load,
 * not a system call) unless PSP_ETH_RING=0 or the kernel refuses the ring; then recvmmsg.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "link.h"
#include "link_sock.h"
#include "log.h"
#include "mcp_wire.h"
#include "pkt_ring.h"
#include "settings.h"

#define ETH_HDR        14u
#define ETH_MIN        60u        /* shortest frame on the wire (without FCS) */
#define ETH_RING_BYTES (8u << 20) /* the receive ring (fixed: every process derives its size) */

struct eth_link {
    struct mcp_sock_link s; /* first member */
    int ifindex;
    char ifname[IF_NAMESIZE];
    uint8_t mac[6];
    uint8_t *has_mac;   /* per node */
    uint8_t (*macs)[6]; /* per node */
    uint8_t *warned;    /* per node: "has no MAC" logged */
    struct mmsghdr rmsg[MCP_SOCK_RXBATCH];
    struct iovec riov[MCP_SOCK_RXBATCH][2];
    struct sockaddr_ll rsll[MCP_SOCK_RXBATCH];
    uint8_t rhdr[MCP_SOCK_RXBATCH][ETH_HDR];
    struct pkt_ring ring; /* ring.map == NULL: read with recvmmsg */
};

static int eth_route(struct mcp_sock_link *s, uint16_t dst)
{
    struct eth_link *e = (struct eth_link *)s;
    if (e->has_mac[dst])
        return 0;
    if (!e->warned[dst]) {
        e->warned[dst] = 1;
        PSP_WARN("eth link: node %u has no MAC address in the nodes file; frames to it are not "
                 "sent (add its MAC: '<id> <ip> <aa:bb:cc:dd:ee:ff>')",
                 (unsigned)dst);
    }
    return -EHOSTUNREACH;
}

static void eth_fill(struct mcp_sock_link *s, struct mcp_sock_txent *t, struct msghdr *m)
{
    struct eth_link *e = (struct eth_link *)s;
    (void)m; /* the socket is bound to the interface: no address needed */
    memcpy(t->hdr, e->macs[t->dst], 6);
    memcpy(t->hdr + 6, e->mac, 6);
    t->hdr[12] = (uint8_t)(MCP_ETHERTYPE >> 8);
    t->hdr[13] = (uint8_t)(MCP_ETHERTYPE & 0xff);
}

/* True when a frame of wire bytes (header h) is not one of ours: counted, skipped. */
static int foreign(struct mcp_sock_link *s, uint8_t pkttype, const uint8_t *h, uint32_t wire)
{
    if (pkttype == PACKET_OUTGOING || wire < ETH_HDR || h[12] != (uint8_t)(MCP_ETHERTYPE >> 8) ||
        h[13] != (uint8_t)(MCP_ETHERTYPE & 0xff)) {
        s->st.rx_ignored++;
        return 1;
    }
    return 0;
}

/* Length of a frame's firmware part: wire bytes less the header, trimmed when the frame was
 * padded to the Ethernet minimum (p: its first bytes after the header). */
static uint32_t frame_len(uint32_t wire, const uint8_t *p, uint32_t have)
{
    uint32_t len = wire - ETH_HDR;
    if (wire == ETH_MIN && len >= MCP_WIRE_HDR && have >= MCP_WIRE_HDR) {
        uint32_t want = MCP_WIRE_HDR + mcp_get_le16(p + 20);
        if (want < len)
            len = want;
    }
    return len;
}

/* rx() through the receive ring: each frame copied once, ring to the firmware's buffer (with
 * fcs, its FCS taken in that copy: lanai.h rx_fcs). */
static int eth_rx_ring(struct eth_link *e, void *const *bufs, uint32_t cap, uint32_t *lens,
                       uint64_t *fcs, int n)
{
    struct mcp_sock_link *s = &e->s;
    int out = 0;
    const uint8_t *d;
    uint32_t snap, wire, net;
    uint8_t type;
    while (out < n && pkt_ring_peek(&e->ring, &d, &snap, &wire, &type, &net)) {
        if (!foreign(s, type, d, snap < wire ? snap : wire)) {
            uint32_t have = snap - ETH_HDR; /* snap >= ETH_HDR: not foreign */
            uint32_t len = frame_len(wire, d + ETH_HDR, have);
            if (len > cap || have < len) {
                memcpy(bufs[out], d + ETH_HDR, have < cap ? have : cap);
                len = cap + 1; /* longer than the buffer, or cut short by the ring frame */
                s->st.rx_truncated++;
                if (fcs)
                    fcs[out] = 0;
            } else {
                mcp_sock_copy_frame(bufs[out], d + ETH_HDR, len, fcs ? &fcs[out] : NULL);
            }
            lens[out++] = len;
            s->st.rx_frames++;
            s->st.rx_bytes += wire - ETH_HDR;
        }
        pkt_ring_release(&e->ring);
    }
    return out;
}

static int eth_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct eth_link *e = (struct eth_link *)l;
    struct mcp_sock_link *s = &e->s;

    if (n <= 0)
        return 0;
    if (e->ring.map)
        return eth_rx_ring(e, bufs, cap, lens, NULL, n);
    if (n > MCP_SOCK_RXBATCH)
        n = MCP_SOCK_RXBATCH;
    for (int i = 0; i < n; i++) {
        e->riov[i][0].iov_base = e->rhdr[i];
        e->riov[i][0].iov_len = ETH_HDR;
        e->riov[i][1].iov_base = bufs[i];
        e->riov[i][1].iov_len = cap;
        struct msghdr *m = &e->rmsg[i].msg_hdr;
        memset(m, 0, sizeof *m);
        m->msg_iov = e->riov[i];
        m->msg_iovlen = 2;
        m->msg_name = &e->rsll[i];
        m->msg_namelen = sizeof e->rsll[i];
    }

    int r;
    for (int tries = 0;; tries++) {
        r = recvmmsg(s->fd, e->rmsg, (unsigned)n, MSG_DONTWAIT, NULL);
        if (r >= 0)
            break;
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK)
            return 0;
        if (err == EINTR)
            continue;
        if (err == EBADF || err == ENOTSOCK || err == EFAULT || err == EINVAL)
            return -err;
        s->st.rx_errors++; /* e.g. ENETDOWN while the interface bounces */
        mcp_sock_warn(s, "receive", err);
        if (tries >= 8)
            return 0;
    }

    int out = 0;
    for (int i = 0; i < r; i++) {
        uint32_t wire = e->rmsg[i].msg_len;
        if (foreign(s, e->rsll[i].sll_pkttype, e->rhdr[i], wire))
            continue;
        uint32_t len;
        if (e->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) {
            len = cap + 1;
            s->st.rx_truncated++;
        } else {
            len = frame_len(wire, bufs[i], wire - ETH_HDR);
        }
        if (out != i)
            memmove(bufs[out], bufs[i], len <= cap ? len : cap);
        lens[out++] = len;
        s->st.rx_frames++;
        s->st.rx_bytes += wire - ETH_HDR;
    }
    return out;
}

/* eth_rx with each frame's FCS (lanai.h rx_fcs): taken where frames are copied out of the
 * receive ring; without one the kernel reads them into place, and they have none. */
static int eth_rx_fcs(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens,
                      uint64_t *fcs, int n)
{
    struct eth_link *e = (struct eth_link *)l;
    if (n > 0 && e->ring.map)
        return eth_rx_ring(e, bufs, cap, lens, fcs, n);
    int got = eth_rx(l, bufs, cap, lens, n);
    for (int i = 0; i < got; i++)
        fcs[i] = 0;
    return got;
}

static void eth_close(struct lanai_link *l)
{
    struct eth_link *e = (struct eth_link *)l;
    pkt_ring_unmap(&e->ring);
    mcp_sock_fini(&e->s);
    free(e->has_mac);
    free(e->macs);
    free(e->warned);
    free(e);
}

/* With a ring, whether rx() would find anything is one load (lanai.h: pending). */
static int eth_pending(struct lanai_link *l)
{
    struct eth_link *e = (struct eth_link *)l;
    return e->ring.map ? pkt_ring_ready(&e->ring) : 1;
}

int mcp_link_eth_has_ring(struct lanai_link *l)
{
    return ((struct eth_link *)l)->ring.map != NULL;
}

static const struct lanai_link_ops eth_ops = {
    .tx = mcp_sock_tx,
    .flush = mcp_sock_flush,
    .rx = eth_rx,
    .close = eth_close,
    .pending = eth_pending,
    .rx_fcs = eth_rx_fcs,
};

static void fmt_mac(const uint8_t m[6], char out[18])
{
    snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* The interface whose hardware address is mac, into name. 0 or -ENODEV. */
static int find_if_by_mac(const uint8_t mac[6], char name[IF_NAMESIZE])
{
    struct ifaddrs *ifa, *i;
    int rc = -ENODEV;
    if (getifaddrs(&ifa) != 0)
        return -errno;
    for (i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_PACKET)
            continue;
        const struct sockaddr_ll *ll = (const struct sockaddr_ll *)i->ifa_addr;
        if (ll->sll_halen == 6 && memcmp(ll->sll_addr, mac, 6) == 0) {
            snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
            rc = 0;
            break;
        }
    }
    freeifaddrs(ifa);
    return rc;
}

/* Interface facts through fd: MAC, MTU, up. 0 or -errno. */
static int if_facts(int fd, const char *name, uint8_t mac[6], int *mtu, int *up)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0)
        return -errno;
    memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
    if (ioctl(fd, SIOCGIFMTU, &ifr) != 0)
        return -errno;
    *mtu = ifr.ifr_mtu;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0)
        return -errno;
    *up = (ifr.ifr_flags & IFF_UP) != 0;
    return 0;
}

struct lanai_link *mcp_link_eth_open(const struct mcp_link_params *p, char *err, size_t errlen)
{
    if (!p || !p->nodes) {
        psp_set_err(err, errlen, "eth link: no nodes table given");
        return NULL;
    }
    const struct psp_nodes *nodes = p->nodes;
    if (p->node >= nodes->count || !nodes->node[p->node].present) {
        psp_set_err(err, errlen,
                    "eth link: node %u is not in the nodes file: add a line '%u <ip> <mac> [<if>]'",
                    (unsigned)p->node, (unsigned)p->node);
        return NULL;
    }
    const struct psp_node_addr *me = &nodes->node[p->node];

    struct eth_link *e = calloc(1, sizeof *e);
    if (!e) {
        psp_set_err(err, errlen, "eth link: out of memory");
        return NULL;
    }
    e->s.fd = -1;
    int adopted = p->fd >= 0; /* on failure the caller keeps its descriptor */
    e->has_mac = calloc(nodes->count, 1);
    e->warned = calloc(nodes->count, 1);
    e->macs = calloc(nodes->count, sizeof *e->macs);
    if (!e->has_mac || !e->warned || !e->macs) {
        psp_set_err(err, errlen, "eth link: out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < nodes->count; i++) {
        if (nodes->node[i].present && nodes->node[i].has_mac) {
            e->has_mac[i] = 1;
            memcpy(e->macs[i], nodes->node[i].mac, 6);
        }
    }

    int fd = p->fd;
    if (!adopted) {
        fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(MCP_ETHERTYPE));
        if (fd < 0) {
            int er = errno;
            if (er == EPERM || er == EACCES)
                psp_set_err(err, errlen,
                            "eth link needs CAP_NET_RAW (run as root) — or use PSP_LINK=udp");
            else
                psp_set_err(err, errlen, "eth link: cannot open a packet socket: %s", strerror(er));
            goto fail;
        }
    }
    e->s.fd = fd;

    /* which interface */
    if (adopted) {
        struct sockaddr_ll ll;
        socklen_t sl = sizeof ll;
        memset(&ll, 0, sizeof ll);
        if (getsockname(fd, (struct sockaddr *)&ll, &sl) != 0 || ll.sll_family != AF_PACKET ||
            ll.sll_ifindex == 0 || !if_indextoname((unsigned)ll.sll_ifindex, e->ifname)) {
            psp_set_err(err, errlen,
                        "eth link: descriptor %d is not a packet socket bound to an interface", fd);
            goto fail;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    } else if (p->ifname && p->ifname[0]) {
        snprintf(e->ifname, sizeof e->ifname, "%s", p->ifname);
    } else if (me->ifname[0]) {
        snprintf(e->ifname, sizeof e->ifname, "%s", me->ifname);
    } else if (me->has_mac) {
        if (find_if_by_mac(me->mac, e->ifname) != 0) {
            char m[18];
            fmt_mac(me->mac, m);
            psp_set_err(err, errlen,
                        "eth link: no interface on this host has MAC %s (node %u in the nodes "
                        "file): fix the MAC, or name the interface with PSP_LINK_IF",
                        m, (unsigned)p->node);
            goto fail;
        }
    } else {
        psp_set_err(err, errlen,
                    "eth link: node %u has neither a MAC nor an interface in the nodes file: add "
                    "'<mac> <interface>' to its line, or set PSP_LINK_IF",
                    (unsigned)p->node);
        goto fail;
    }

    e->ifindex = (int)if_nametoindex(e->ifname);
    if (e->ifindex == 0) {
        psp_set_err(err, errlen, "eth link: no interface '%s' on this host (see 'ip link')",
                    e->ifname);
        goto fail;
    }
    int mtu = 0, up = 0;
    int rc = if_facts(fd, e->ifname, e->mac, &mtu, &up);
    if (rc) {
        psp_set_err(err, errlen, "eth link: cannot query interface %s: %s", e->ifname,
                    strerror(-rc));
        goto fail;
    }
    if (!up) {
        psp_set_err(err, errlen, "eth link: interface %s is down: 'ip link set %s up'", e->ifname,
                    e->ifname);
        goto fail;
    }
    if (mtu < (int)MCP_WIRE_HDR + 1) {
        psp_set_err(err, errlen, "eth link: MTU %d of %s is too small for psport frames", mtu,
                    e->ifname);
        goto fail;
    }
    if (me->has_mac && memcmp(me->mac, e->mac, 6) != 0) {
        char a[18], b[18];
        fmt_mac(me->mac, a);
        fmt_mac(e->mac, b);
        PSP_WARN("eth link: the nodes file gives node %u MAC %s but %s has %s; peers will not "
                 "reach this node unless the file is fixed",
                 (unsigned)p->node, a, e->ifname, b);
    }

    /* the receive ring: the socket's own when adopted, else made here before bind, so that
     * no frame waits in the socket queue */
    if (adopted) {
        rc = pkt_ring_adopt(&e->ring, fd, (uint32_t)mtu, ETH_RING_BYTES);
        if (rc < 0) {
            psp_set_err(err, errlen,
                        "eth link: cannot map the receive ring of the socket handed over: %s (did "
                        "the MTU of %s change since psid started? restart psid)",
                        strerror(-rc), e->ifname);
            goto fail;
        }
        if (rc > 0 && p->prefault)
            pkt_ring_prefault(&e->ring);
    } else {
        uint64_t want = 1;
        if (psp_setting_u64("PSP_ETH_RING", 0, 1, &want, err, errlen))
            goto fail;
        if (want && (rc = pkt_ring_create(&e->ring, fd, (uint32_t)mtu, ETH_RING_BYTES, 0)) != 0)
            PSP_WARN("eth link: no receive ring on %s (%s): frames are read with recvmmsg",
                     e->ifname, strerror(-rc));
        struct sockaddr_ll ll;
        memset(&ll, 0, sizeof ll);
        ll.sll_family = AF_PACKET;
        ll.sll_protocol = htons(MCP_ETHERTYPE);
        ll.sll_ifindex = e->ifindex;
        if (bind(fd, (struct sockaddr *)&ll, sizeof ll) != 0) {
            psp_set_err(err, errlen, "eth link: cannot bind to %s: %s", e->ifname, strerror(errno));
            goto fail;
        }
    }
#ifdef PACKET_IGNORE_OUTGOING
    int one = 1;
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
#endif
    mcp_sock_buffers(fd, MCP_SOCK_BUFSIZE);

    e->s.l.ops = &eth_ops;
    e->s.l.kind = "eth";
    e->s.l.max_frame = (uint32_t)mtu;
    e->s.l.node = p->node;
    e->s.l.max_nodes = nodes->count;
    e->s.hdr_len = ETH_HDR;
    e->s.route = eth_route;
    e->s.fill = eth_fill;
    if (mcp_sock_init(&e->s, fd, &p->fault) != 0) {
        psp_set_err(err, errlen, "eth link: out of memory");
        goto fail;
    }
    return &e->s.l;

fail:
    pkt_ring_unmap(&e->ring);
    if (adopted)
        e->s.fd = -1;
    mcp_sock_fini(&e->s);
    free(e->has_mac);
    free(e->macs);
    free(e->warned);
    free(e);
    return NULL;
}
