/*
 * link_udp.c — the default link: one UDP socket per node, frames as datagrams.
 *
 * The socket is bound to the node's address from the nodes table.  Frames go out in batches
 * with sendmmsg (link_sock.c) and come in with recvmmsg.  A frame that fits one datagram under
 * the interface MTU goes as it is.  A larger one (up to max_frame) goes as segments in one GSO
 * write (udp_seg.h), which the kernel carries as one packet; with UDP_GRO the receiver reads
 * it back as one, straight into a firmware buffer (rx_direct).  If the kernel refuses
 * segmentation, frames go as one IP-fragmented datagram each (PSP_UDP_GSO=0 chooses that too),
 * read through staging buffers (rx_staged).  Consecutive small frames to one node in one
 * flush share a datagram (udp_pack.h; PSP_UDP_PACK=0: a datagram each); the receiver takes it
 * apart and keeps the frames beyond the buffers the firmware offered for its next look
 * (carry_frame).  Datagrams from addresses outside the nodes table are
 * handed up too: the firmware checks every header.
 *
 * When it may (CAP_NET_RAW, PSP_UDP_RING=1), the link opening the socket reads datagrams from
 * a packet socket's receive ring instead (udp_ring.h, rx_ring): looking for frames is then a
 * load, not a system call.  The UDP socket keeps only frames that came as IP fragments; it is
 * read every UDP_SOCK_LOOKS-th empty look.  Processes that adopt the socket adopt the ring too.
 * With the ring, frames that fit one datagram go to nodes whose MAC the nodes table gives as
 * Ethernet frames through the ring's socket, once such a node is heard to read them
 * (udp_eth.h, PSP_UDP_ETH).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crc32c.h"
#include "link.h"
#include "link_sock.h"
#include "log.h"
#include "settings.h"
#include "udp_eth.h"
#include "udp_pack.h"
#include "udp_ring.h"
#include "udp_seg.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define UDP_RXBATCH    16u    /* datagrams (each possibly many GRO segments) read per rx() */
#define UDP_STAGE      65536u /* bytes of one staged read: the largest GRO datagram */
#define UDP_SOCK_LOOKS 1024u  /* with a ring: empty looks between reads of the UDP socket */
#define UDP_CARRY      128u   /* plain frames kept from one read for the next rx() */

/* Where the iovecs of one message of a direct read point (rebuilt when the buffer changes). */
struct udp_rxmap {
    void *buf;     /* the firmware's buffer; NULL: not built yet */
    uint32_t cap;  /* its size */
    uint32_t nseg; /* segments whose payload goes into buf */
    uint32_t niov; /* iovecs in use, the last one taking the rest of the read */
};

struct udp_link {
    struct mcp_sock_link s;   /* first member */
    uint8_t *present;         /* per node: has an address */
    struct sockaddr_in *addr; /* per node */
    /* sending segments */
    int gso;      /* 1: frames over seg bytes go as segments */
    uint32_t seg; /* bytes per segment, header included (interface MTU - 28) */
    /* packing: consecutive small frames to one node in one datagram (udp_pack.h) */
    int pack; /* PSP_UDP_PACK */
    /* receiving: plain frames of one read beyond the buffers the firmware offered, handed up
     * at the next rx() (a packed write brings many frames in one datagram) */
    uint8_t *carry; /* UDP_CARRY frames of seg bytes, allocated when first needed */
    uint32_t carry_len[UDP_CARRY];
    unsigned carry_head, carry_count;
    uint16_t next_id;
    struct iovec (*giov)[2 * UDP_SEG_MAX];     /* per queued frame of a batch */
    uint8_t (*ghdr)[UDP_SEG_MAX][UDP_SEG_HDR]; /* per queued frame of a batch */
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } * gctl;
    /* receiving without segments: datagrams are read into staging buffers, frames copied out
     * of them.  With segments: straight into the firmware's buffers (rx_direct), and stage
     * takes what does not fit there */
    uint8_t *stage; /* UDP_RXBATCH * UDP_STAGE bytes, allocated on first rx() */
    uint8_t *lin;   /* UDP_RXBATCH * UDP_STAGE bytes: direct reads put back in one piece */
    struct udp_rxmap rmap[UDP_RXBATCH];
    struct iovec (*rdiov)[2 * UDP_SEG_MAX + 1]; /* per message: header, chunk, ..., rest */
    uint8_t (*rdhdr)[UDP_SEG_MAX][UDP_SEG_HDR]; /* per message: the segment headers */
    struct mmsghdr rmsg[UDP_RXBATCH];
    struct iovec riov[UDP_RXBATCH];
    struct sockaddr_in rfrom[UDP_RXBATCH];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } rctl[UDP_RXBATCH];
    struct udp_reasm *reasm; /* per node: frames whose segments came in several reads */
    struct udp_ring ring;    /* ring.fd < 0: datagrams are read from the UDP socket */
    struct udp_eth eth;      /* small frames as link frames through ring.fd (udp_eth.h) */
    unsigned sock_looks;     /* with a ring: empty looks since the UDP socket was read */
    unsigned last_from;      /* node + 1 of the sender udp_node_of found last, 0: none */
    uint64_t *fcs;           /* during udp_rx_fcs: where each filled frame's FCS goes */
};

static int udp_route(struct mcp_sock_link *s, uint16_t dst)
{
    struct udp_link *u = (struct udp_link *)s;
    return u->present[dst] ? 0 : -EHOSTUNREACH;
}

/* 1 if e goes as a link frame (udp_eth.h): it fits one datagram, its node reads them. */
static inline int via_eth(const struct udp_link *u, const struct mcp_sock_txent *e)
{
    return u->eth.on && e->len <= u->seg && u->eth.ok[e->dst];
}

static int udp_fd_for(struct mcp_sock_link *s, const struct mcp_sock_txent *e)
{
    struct udp_link *u = (struct udp_link *)s;
    return via_eth(u, e) ? u->ring.fd : s->fd;
}

static void udp_fill(struct mcp_sock_link *s, struct mcp_sock_txent *e, struct msghdr *m)
{
    struct udp_link *u = (struct udp_link *)s;
    if (via_eth(u, e)) {
        m->msg_name = &u->eth.to;
        m->msg_namelen = sizeof u->eth.to;
        return;
    }
    m->msg_name = &u->addr[e->dst];
    m->msg_namelen = sizeof u->addr[e->dst];
}

/* How many of the avail queued frames from e go packed in one datagram (udp_pack.h):
 * consecutive frames to e's node while the datagram stays within seg bytes; 1: e alone. */
static unsigned pack_count(const struct udp_link *u, const struct mcp_sock_txent *e, unsigned avail)
{
    if (!u->pack)
        return 1;
    uint32_t total = 0;
    unsigned c = 0;
    while (c < avail && c < UDP_PACK_MAX && e[c].dst == e->dst &&
           udp_pack_size(c + 1, total + e[c].len) <= u->seg)
        total += e[c++].len;
    return c ? c : 1;
}

/* Message i carries the cnt frames from e packed: the header and each frame's length are
 * written into message i's segment-header room (UDP_SEG_MAX * UDP_SEG_HDR bytes).  With lead,
 * message i's first iovec is already set (a link frame's Ethernet header). */
static void pack_frames(struct udp_link *u, unsigned i, const struct mcp_sock_txent *e,
                        unsigned cnt, struct msghdr *m, unsigned lead)
{
    uint8_t *room = u->ghdr[i][0];
    struct iovec *iov = u->giov[i] + lead;
    udp_pack_put_hdr(room, cnt);
    iov[0].iov_base = room;
    iov[0].iov_len = UDP_PACK_HDR;
    for (unsigned k = 0; k < cnt; k++) {
        uint8_t *l = room + UDP_PACK_HDR + k * UDP_PACK_LEN;
        udp_pack_put_len(l, e[k].len);
        iov[1 + 2 * k].iov_base = l;
        iov[1 + 2 * k].iov_len = UDP_PACK_LEN;
        iov[2 + 2 * k].iov_base = (void *)e[k].frame;
        iov[2 + 2 * k].iov_len = e[k].len;
    }
    m->msg_iov = u->giov[i];
    m->msg_iovlen = lead + 1 + 2 * cnt;
    u->s.st.tx_packed += cnt;
}

/* Message i of a batch carries e: a frame over one datagram becomes segments (udp_seg.h);
 * consecutive small frames to one node go packed (pack_count).  Returns the frames it
 * carries. */
static unsigned udp_prepare(struct mcp_sock_link *s, unsigned i, struct mcp_sock_txent *e,
                            unsigned avail, struct msghdr *m)
{
    struct udp_link *u = (struct udp_link *)s;
    struct iovec *iov = u->giov[i];
    if (e->len <= u->seg) {
        unsigned cnt = pack_count(u, e, avail), lead = via_eth(u, e);
        if (lead) { /* a link frame: its Ethernet header first */
            iov[0].iov_base = u->eth.hdr[e->dst];
            iov[0].iov_len = UDP_ETH_TXHDR;
            iov[1].iov_base = (void *)e->frame;
            iov[1].iov_len = e->len;
            m->msg_iov = iov;
            m->msg_iovlen = 2;
            u->s.st.tx_eth += cnt;
        }
        if (cnt > 1)
            pack_frames(u, i, e, cnt, m, lead);
        return cnt;
    }
    if (!u->gso)
        return 1;
    uint32_t chunk = u->seg - UDP_SEG_HDR;
    unsigned cnt = udp_seg_count(e->len, chunk);
    if (cnt > UDP_SEG_MAX)
        return 1; /* cannot happen below max_frame; sent whole */
    struct udp_seg_hdr h = {.id = u->next_id++, .cnt = (uint8_t)cnt, .chunk = (uint16_t)chunk};
    for (unsigned k = 0; k < cnt; k++) {
        uint32_t off = k * chunk;
        h.idx = (uint8_t)k;
        udp_seg_put(u->ghdr[i][k], &h);
        iov[2 * k].iov_base = u->ghdr[i][k];
        iov[2 * k].iov_len = UDP_SEG_HDR;
        iov[2 * k + 1].iov_base = (void *)(e->frame + off);
        iov[2 * k + 1].iov_len = e->len - off < chunk ? e->len - off : chunk;
    }
    m->msg_iov = iov;
    m->msg_iovlen = 2 * cnt;
    m->msg_control = u->gctl[i].buf;
    m->msg_controllen = sizeof u->gctl[i].buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(m);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso_size = (uint16_t)u->seg;
    memcpy(CMSG_DATA(c), &gso_size, sizeof gso_size);
    s->st.tx_segmented++;
    return 1;
}

/* The kernel refused e for good: if it was a segmented write, stop segmenting and resend it.
 * (A packed datagram is an ordinary one under the MTU: its refusal is its first frame's, which
 * is skipped; the others go again.) */
static int udp_refused(struct mcp_sock_link *s, struct mcp_sock_txent *e, int err)
{
    struct udp_link *u = (struct udp_link *)s;
    if (via_eth(u, e)) {
        u->eth.on = 0;
        PSP_WARN("udp link of node %u: the kernel refused a link frame to node %u (%s): frames "
                 "go as datagrams from now on (slower); PSP_UDP_ETH=0 says so from the start",
                 (unsigned)s->l.node, (unsigned)e->dst, strerror(err));
        return 1;
    }
    if (!u->gso || e->len <= u->seg)
        return 0;
    u->gso = 0;
    s->st.tx_gso_off = 1;
    PSP_WARN(
        "udp link of node %u: the kernel refused a segmented (GSO) write of %u bytes in %u-byte "
        "segments (%s): frames over the MTU go as IP fragments from now on (slower); "
        "PSP_UDP_GSO=0 says so from the start",
        (unsigned)s->l.node, (unsigned)e->len, (unsigned)u->seg, strerror(err));
    return 1;
}

/* Node id of a datagram's sender, or -1 if it is not in the nodes table.  The last one found
 * is looked at first: datagrams come in runs from one sender, and with link frames on every
 * datagram under the MTU is looked up (heard_udp). */
static int udp_node_of(struct udp_link *u, const struct sockaddr_in *from)
{
    unsigned c = u->last_from;
    if (c && u->addr[c - 1].sin_addr.s_addr == from->sin_addr.s_addr &&
        u->addr[c - 1].sin_port == from->sin_port)
        return (int)c - 1;
    for (unsigned i = 0; i < u->s.l.max_nodes; i++)
        if (u->present[i] && u->addr[i].sin_addr.s_addr == from->sin_addr.s_addr &&
            u->addr[i].sin_port == from->sin_port) {
            u->last_from = i + 1;
            return (int)i;
        }
    return -1;
}

/* Frame i of this rx(): no FCS taken (lanai.h rx_fcs). */
static inline void no_fcs(struct udp_link *u, int i)
{
    if (u->fcs)
        u->fcs[i] = 0;
}

/* Copy a frame of len <= cap bytes from f to out, as frame i of this rx() (its FCS taken in the
 * copy during udp_rx_fcs). */
static void copy_frame(struct udp_link *u, int i, uint8_t *out, const uint8_t *f, uint32_t len)
{
    mcp_sock_copy_frame(out, f, len, u->fcs ? &u->fcs[i] : NULL);
}

/* Keep a plain frame that found no firmware buffer for the next rx(): 1 if kept, 0 if
 * dropped (counted): too long, no room, no memory. */
static int carry_frame(struct udp_link *u, const uint8_t *f, uint32_t len)
{
    if (len > u->seg || u->carry_count == UDP_CARRY ||
        (!u->carry && !(u->carry = malloc((size_t)UDP_CARRY * u->seg)))) {
        u->s.st.rx_dropped_nobuf++;
        return 0;
    }
    unsigned k = (u->carry_head + u->carry_count++) % UDP_CARRY;
    memcpy(u->carry + (size_t)k * u->seg, f, len);
    u->carry_len[k] = len;
    u->s.st.rx_carried++;
    return 1;
}

/* The frames an earlier read kept (carry_frame), oldest first, into up to n buffers. */
static int take_carried(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    int filled = 0;
    while (u->carry_count && filled < n) {
        unsigned k = u->carry_head;
        uint32_t len = u->carry_len[k];
        if (len > cap) {
            memcpy(bufs[filled], u->carry + (size_t)k * u->seg, cap);
            no_fcs(u, filled);
        } else {
            copy_frame(u, filled, bufs[filled], u->carry + (size_t)k * u->seg, len);
        }
        lens[filled++] = len > cap ? cap + 1 : len;
        if (len > cap)
            u->s.st.rx_truncated++;
        u->s.st.rx_frames++;
        u->carry_head = (k + 1) % UDP_CARRY;
        u->carry_count--;
    }
    return filled;
}

/* Hand a frame of len bytes to the firmware in out (cap bytes); 1 if taken, 0 if no buffer. */
static int put_frame(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n,
                     int *filled, const uint8_t *f, uint32_t len)
{
    if (*filled >= n)
        return carry_frame(u, f, len);
    if (len > cap) { /* truncated: reported as cap + 1, the firmware counts it malformed */
        memcpy(bufs[*filled], f, cap);
        no_fcs(u, *filled);
        lens[*filled] = cap + 1;
        u->s.st.rx_truncated++;
    } else {
        copy_frame(u, *filled, bufs[*filled], f, len);
        lens[*filled] = len;
    }
    (*filled)++;
    u->s.st.rx_frames++;
    return 1;
}

/* The frames of a packed datagram (len bytes at p) to the firmware, in order: 1, or 0 if p is
 * not one (then it is a frame, or junk for the firmware to judge). */
static int take_packed(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n,
                       int *filled, const uint8_t *p, uint32_t len)
{
    const uint8_t *frames[UDP_PACK_MAX];
    uint32_t flens[UDP_PACK_MAX];
    unsigned cnt = udp_pack_magic(p, len) ? udp_pack_split(p, len, frames, flens) : 0;
    for (unsigned k = 0; k < cnt; k++)
        put_frame(u, bufs, cap, lens, n, filled, frames[k], flens[k]);
    u->s.st.rx_packed += cnt;
    return cnt > 0;
}

/*
 * Segments of one frame, all of them, in order, at p (one GRO read, each gso bytes but the
 * last): the frame's length, or 0 if what is at p is anything else.
 */
static uint32_t whole_run(const uint8_t *p, uint32_t avail, uint32_t gso,
                          const struct udp_seg_hdr *h0)
{
    if (h0->idx != 0 || gso != h0->chunk + UDP_SEG_HDR)
        return 0;
    uint32_t len = 0, off = 0;
    for (unsigned k = 0; k < h0->cnt; k++) {
        if (off >= avail)
            return 0;
        uint32_t plen = avail - off < gso ? avail - off : gso;
        struct udp_seg_hdr h;
        if (!udp_seg_get(p + off, plen, &h) || h.id != h0->id || h.idx != k || h.cnt != h0->cnt ||
            h.chunk != h0->chunk)
            return 0;
        len += plen - UDP_SEG_HDR;
        off += plen;
    }
    return len;
}

/*
 * Copy the frame (len <= cap bytes) made of the segments at p into out, as frame i of this
 * rx(): during rx_fcs with its FCS taken in the copy, chunk by chunk, unless the frame is cut
 * short (cut: len is the buffer's size, not the frame's; the firmware drops it unread).
 */
static void gather_run(struct udp_link *u, int i, uint8_t *out, const uint8_t *p, uint32_t len,
                       uint32_t gso, int cut)
{
    uint32_t chunk = gso - UDP_SEG_HDR, crc = 0;
    int fcs = u->fcs && !cut && len >= LANAI_FCS_SKIP && chunk >= LANAI_FCS_SKIP;
    for (uint32_t off = 0; off < len; off += chunk) {
        uint32_t n = len - off < chunk ? len - off : chunk, skip = 0;
        const uint8_t *src = p + UDP_SEG_HDR;
        if (!fcs) {
            memcpy(out + off, src, n);
        } else {
            if (off == 0) { /* the header: left out of the FCS */
                memcpy(out, src, LANAI_FCS_SKIP);
                skip = LANAI_FCS_SKIP;
            }
            crc = mcp_crc32c_copy(crc, out + off + skip, src + skip, n - skip);
        }
        p += gso;
    }
    if (fcs)
        u->fcs[i] = LANAI_FCS_VALID | crc;
    else
        no_fcs(u, i);
}

/* Frames in one datagram read (len bytes at p, GRO segments of gso bytes) into the buffers. */
static void take_datagram(struct udp_link *u, const uint8_t *p, uint32_t len, uint32_t gso,
                          const struct sockaddr_in *from, void *const *bufs, uint32_t cap,
                          uint32_t *lens, int n, int *filled)
{
    uint32_t off = 0;
    if (len == 0) { /* an empty datagram is handed up too: the firmware counts it malformed */
        put_frame(u, bufs, cap, lens, n, filled, p, 0);
        return;
    }
    while (off < len) {
        uint32_t plen = len - off < gso ? len - off : gso;
        const uint8_t *piece = p + off;
        struct udp_seg_hdr h;
        if (!udp_seg_get(piece, plen, &h)) { /* a plain frame (or junk: the firmware judges) */
            if (!take_packed(u, bufs, cap, lens, n, filled, piece, plen))
                put_frame(u, bufs, cap, lens, n, filled, piece, plen);
            off += plen;
            continue;
        }
        uint32_t flen = whole_run(piece, len - off, gso, &h);
        if (flen) { /* the common case: the whole frame in this read */
            if (*filled < n) {
                if (flen > cap) { /* truncated: the firmware counts it malformed */
                    gather_run(u, *filled, bufs[*filled], piece, cap, gso, 1);
                } else {
                    gather_run(u, *filled, bufs[*filled], piece, flen, gso, 0);
                }
                lens[*filled] = flen > cap ? cap + 1 : flen;
                if (flen > cap)
                    u->s.st.rx_truncated++;
                (*filled)++;
                u->s.st.rx_frames++;
                u->s.st.rx_segmented++;
            } else {
                u->s.st.rx_dropped_nobuf++;
            }
            off += (h.cnt - 1u) * gso + (flen - (h.cnt - 1u) * h.chunk) + UDP_SEG_HDR;
            continue;
        }
        int node = udp_node_of(u, from);
        int discarded = 0, r = -1;
        if (node >= 0)
            r = udp_reasm_add(&u->reasm[node], &h, piece + UDP_SEG_HDR, plen - UDP_SEG_HDR,
                              &discarded);
        if (discarded || r < 0)
            u->s.st.rx_seg_incomplete++;
        if (r > 0 && put_frame(u, bufs, cap, lens, n, filled, u->reasm[node].buf, (uint32_t)r))
            u->s.st.rx_segmented++;
        off += plen;
    }
}

/* Read up to want datagrams with the messages as set up in u->rmsg: how many, 0 if none. */
static int read_batch(struct udp_link *u, unsigned want)
{
    struct mcp_sock_link *s = &u->s;
    for (unsigned i = 0; i < want; i++) {
        struct msghdr *m = &u->rmsg[i].msg_hdr;
        m->msg_name = &u->rfrom[i];
        m->msg_namelen = sizeof u->rfrom[i];
        m->msg_control = u->rctl[i].buf;
        m->msg_controllen = sizeof u->rctl[i].buf;
        m->msg_flags = 0;
    }
    for (int tries = 0;; tries++) {
        int r = recvmmsg(s->fd, u->rmsg, want, MSG_DONTWAIT, NULL);
        if (r >= 0)
            return r;
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return 0;
        if (e == EINTR)
            continue;
        if (e == EBADF || e == ENOTSOCK || e == EFAULT || e == EINVAL)
            return -e;
        /* an error the network reported (ICMP unreachable, ...): count it, read on */
        s->st.rx_errors++;
        mcp_sock_warn(s, "receive", e);
        if (tries >= 8)
            return 0;
    }
}

/* Length of message i of a read and its GRO segment size (*gso = the length when not GRO'd);
 * 0 if it was longer than its buffers (counted, dropped). */
static int read_len(struct udp_link *u, unsigned i, uint32_t *len, uint32_t *gso)
{
    struct msghdr *m = &u->rmsg[i].msg_hdr;
    *len = u->rmsg[i].msg_len;
    u->s.st.rx_bytes += *len;
    if (m->msg_flags & MSG_TRUNC) { /* longer than any datagram we send */
        u->s.st.rx_truncated++;
        return 0;
    }
    *gso = *len;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int g;
            memcpy(&g, CMSG_DATA(c), sizeof g);
            if (g > 0 && (uint32_t)g < *len)
                *gso = (uint32_t)g;
        }
    return 1;
}

/* Without segments: every datagram into a staging buffer, the frames copied out of it. */
static int rx_staged(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    if (!u->stage && !(u->stage = malloc((size_t)UDP_RXBATCH * UDP_STAGE)))
        return 0; /* no memory now: the frames wait in the socket */
    unsigned want = (unsigned)n < UDP_RXBATCH ? (unsigned)n : UDP_RXBATCH;
    for (unsigned i = 0; i < want; i++) {
        struct msghdr *m = &u->rmsg[i].msg_hdr;
        u->riov[i].iov_base = u->stage + (size_t)i * UDP_STAGE;
        u->riov[i].iov_len = UDP_STAGE;
        m->msg_iov = &u->riov[i];
        m->msg_iovlen = 1;
    }
    int r = read_batch(u, want);
    int filled = 0;
    for (int i = 0; i < r; i++) {
        uint32_t len, gso;
        u->s.st.rx_copied++;
        if (read_len(u, (unsigned)i, &len, &gso))
            take_datagram(u, u->stage + (size_t)i * UDP_STAGE, len, gso, &u->rfrom[i], bufs, cap,
                          lens, n, &filled);
    }
    return r < 0 ? r : filled;
}

/*
 * Point the iovecs of message i at buf (cap bytes) so that a frame read as one run of
 * segments lands in place: segment k's header in rdhdr[i][k], its chunk at buf + k * chunk;
 * whatever lies beyond buf goes into staging buffer i.
 */
static void map_direct(struct udp_link *u, unsigned i, void *buf, uint32_t cap)
{
    struct udp_rxmap *m = &u->rmap[i];
    if (m->buf == buf && m->cap == cap)
        return; /* the firmware offers the same buffers while nothing arrives */
    uint32_t chunk = u->seg - UDP_SEG_HDR, k = 0, v = 0;
    struct iovec *iov = u->rdiov[i];
    for (uint32_t off = 0; off < cap && k < UDP_SEG_MAX; off += chunk, k++) {
        iov[v].iov_base = u->rdhdr[i][k];
        iov[v++].iov_len = UDP_SEG_HDR;
        iov[v].iov_base = (uint8_t *)buf + off;
        iov[v++].iov_len = cap - off < chunk ? cap - off : chunk;
    }
    iov[v].iov_base = u->stage + (size_t)i * UDP_STAGE;
    iov[v++].iov_len = UDP_STAGE;
    *m = (struct udp_rxmap){.buf = buf, .cap = cap, .nseg = k, .niov = v};
}

/*
 * The frame a direct read left in place in message i's buffer (len bytes, GRO segments of
 * gso): its length, or -1 if the read is anything else, to be taken apart the slow way.  A
 * plain datagram has its first UDP_SEG_HDR bytes in the header slot: they are moved in front.
 */
static int64_t direct_frame(struct udp_link *u, unsigned i, uint32_t len, uint32_t gso)
{
    const struct udp_rxmap *m = &u->rmap[i];
    uint8_t *buf = m->buf, (*hdr)[UDP_SEG_HDR] = u->rdhdr[i];
    uint32_t chunk = u->seg - UDP_SEG_HDR;
    struct udp_seg_hdr h0, h;

    if (gso == len) { /* one datagram: a plain frame unless it is a lone segment */
        if (len > m->cap || len > u->seg || udp_seg_magic(hdr[0], len) ||
            udp_pack_magic(hdr[0], len))
            return -1; /* a lone segment or a packed datagram: taken apart the slow way */
        if (len > UDP_SEG_HDR)
            memmove(buf + UDP_SEG_HDR, buf, len - UDP_SEG_HDR);
        memcpy(buf, hdr[0], len < UDP_SEG_HDR ? len : UDP_SEG_HDR);
        return len;
    }
    /* GRO'd: all segments of one frame, in order, cut as this link cuts them */
    if (gso != u->seg || !udp_seg_get(hdr[0], gso, &h0) || h0.idx != 0 || h0.chunk != chunk ||
        h0.cnt > m->nseg || udp_seg_count(len, gso) != h0.cnt)
        return -1;
    for (uint32_t k = 1; k < h0.cnt; k++) {
        uint32_t plen = k + 1 < h0.cnt ? gso : len - k * gso;
        if (!udp_seg_get(hdr[k], plen, &h) || h.id != h0.id || h.idx != k || h.cnt != h0.cnt ||
            h.chunk != chunk)
            return -1;
    }
    uint32_t flen = len - h0.cnt * UDP_SEG_HDR;
    return flen <= m->cap ? (int64_t)flen : -1;
}

/* Message i of a direct read (len bytes) in one piece at out, as it came off the wire. */
static void linearize(const struct udp_link *u, unsigned i, uint32_t len, uint8_t *out)
{
    const struct iovec *iov = u->rdiov[i];
    for (uint32_t v = 0; len && v < u->rmap[i].niov; v++) {
        uint32_t n = iov[v].iov_len < len ? (uint32_t)iov[v].iov_len : len;
        memcpy(out, iov[v].iov_base, n);
        out += n;
        len -= n;
    }
}

/*
 * With segments: read each datagram straight into a firmware buffer, so that the common
 * cases (a frame as one GRO run of segments, a plain frame) need no copy.  Why: at 2-3 GB/s
 * the copy out of a staging buffer was one of the receiver's five passes over every byte.
 * Anything else (segments one by one, several frames in one read, a foreign datagram) is put
 * back in one piece, with the rest of the batch, and taken apart as in rx_staged.
 */
static int rx_direct(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    if (!u->stage && !(u->stage = malloc((size_t)UDP_RXBATCH * UDP_STAGE)))
        return 0; /* no memory now: the frames wait in the socket */
    unsigned want = (unsigned)n < UDP_RXBATCH ? (unsigned)n : UDP_RXBATCH;
    for (unsigned i = 0; i < want; i++) {
        map_direct(u, i, bufs[i], cap);
        u->rmsg[i].msg_hdr.msg_iov = u->rdiov[i];
        u->rmsg[i].msg_hdr.msg_iovlen = u->rmap[i].niov;
    }
    int r = read_batch(u, want);
    int filled = 0, i;
    uint32_t len[UDP_RXBATCH], gso[UDP_RXBATCH];
    uint8_t ok[UDP_RXBATCH];
    for (i = 0; i < r; i++) { /* here filled == i: one frame per read, in its own buffer */
        ok[i] = (uint8_t)read_len(u, (unsigned)i, &len[i], &gso[i]);
        int64_t flen = ok[i] ? direct_frame(u, (unsigned)i, len[i], gso[i]) : -1;
        if (flen < 0)
            break;
        no_fcs(u, filled); /* the kernel copied it: nothing of ours to take it in */
        lens[filled++] = (uint32_t)flen;
        u->s.st.rx_frames++;
        if (gso[i] < len[i])
            u->s.st.rx_segmented++;
    }
    if (i >= r)
        return r < 0 ? r : filled;
    /* Read i and those after it, in the buffers the frames are about to go to: first all of
     * them in one piece each, then taken apart. */
    if (!u->lin && !(u->lin = malloc((size_t)UDP_RXBATCH * UDP_STAGE))) {
        u->s.st.rx_dropped_nobuf += (uint64_t)(r - i);
        return filled;
    }
    for (int j = i; j < r; j++) {
        if (j > i)
            ok[j] = (uint8_t)read_len(u, (unsigned)j, &len[j], &gso[j]);
        if (ok[j])
            linearize(u, (unsigned)j, len[j], u->lin + (size_t)j * UDP_STAGE);
    }
    for (int j = i; j < r; j++) {
        u->s.st.rx_copied++;
        if (ok[j])
            take_datagram(u, u->lin + (size_t)j * UDP_STAGE, len[j], gso[j], &u->rfrom[j], bufs,
                          cap, lens, n, &filled);
    }
    return filled;
}

/* A link frame (udp_eth.h) came from mac: its node reads link frames.  0 for a hello (nothing
 * for the firmware), 1 for frames to take. */
static int heard_eth(struct udp_link *u, const uint8_t *mac, const uint8_t *p, uint32_t len)
{
    int node = udp_eth_node_of(&u->eth, mac);
    if (node >= 0) {
        u->eth.oks += !u->eth.ok[node];
        u->eth.ok[node] = 1;
        u->eth.udp_run[node] = 0;
    }
    if (udp_eth_is_hello(p, len)) {
        u->s.st.rx_hello++;
        return 0;
    }
    u->s.st.rx_eth++;
    u->s.st.rx_bytes += len;
    return 1;
}

/*
 * A datagram of len bytes came from `from`.  A node sending datagrams may not know this link
 * reads link frames: one in UDP_ETH_SAMPLE is looked at, and its node told (a hello) unless
 * link frames came from it.  A node sent link frames may have stopped reading them (restarted
 * without a ring): it sends datagrams under the MTU then, where it would send link frames,
 * and after UDP_ETH_FORGET in a row it is sent datagrams again, and a hello (udp_eth.h).
 */
static void heard_udp(struct udp_link *u, const struct sockaddr_in *from, uint32_t len)
{
    int sampled = ++u->eth.sample >= UDP_ETH_SAMPLE;
    if (!sampled && (len > u->seg || !u->eth.oks))
        return;
    if (sampled)
        u->eth.sample = 0;
    int node = udp_node_of(u, from);
    if (node < 0 || !u->eth.known[node])
        return;
    if (u->eth.ok[node]) {
        if (len > u->seg || ++u->eth.udp_run[node] < UDP_ETH_FORGET)
            return;
        u->eth.ok[node] = 0;
        u->eth.oks--;
        u->s.st.eth_forgotten++;
    } else if (!sampled) {
        return;
    }
    if (udp_eth_hello(&u->eth, u->ring.fd, (uint16_t)node) == 0)
        u->s.st.tx_hello++;
}

/*
 * With a ring: the datagrams in it, each copied once into firmware buffers (taken apart as
 * in rx_staged); then, every UDP_SOCK_LOOKS-th look that found none, the UDP socket.
 */
static int rx_ring(struct udp_link *u, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    int filled = 0, r;
    struct sockaddr_in from;
    const uint8_t *p;
    uint32_t len, gso;
    const uint8_t *mac;
    while (filled < n && (r = udp_ring_peek(&u->ring, &from, &p, &len, &gso, &mac)) != 0) {
        /* A packed datagram with more frames than the buffers left waits in the ring for the
         * next look rather than leave frames in this process's carry, which the next pass,
         * if another process of the node runs it, would not see (and the frames after them
         * would come out of order, to be sent again). */
        if (r > 0 && filled > 0 && udp_pack_count(p, len) > (unsigned)(n - filled))
            break;
        if (r == 2) {
            if (heard_eth(u, mac, p, len))
                take_datagram(u, p, len, gso, &from, bufs, cap, lens, n, &filled);
        } else if (r > 0) {
            u->s.st.rx_bytes += len;
            if (u->eth.on)
                heard_udp(u, &from, len);
            take_datagram(u, p, len, gso, &from, bufs, cap, lens, n, &filled);
        } else {
            u->s.st.rx_truncated++; /* not a whole datagram: nothing to hand up */
        }
        udp_ring_release(&u->ring);
    }
    if (filled || ++u->sock_looks < UDP_SOCK_LOOKS)
        return filled;
    u->sock_looks = 0;
    return rx_staged(u, bufs, cap, lens, n);
}

static int udp_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct udp_link *u = (struct udp_link *)l;
    if (n <= 0)
        return 0;
    int old = u->carry_count ? take_carried(u, bufs, cap, lens, n) : 0, r;
    if (old == n)
        return old;
    bufs += old;
    lens += old;
    n -= old;
    if (u->ring.fd >= 0)
        r = rx_ring(u, bufs, cap, lens, n);
    else
        r = u->gso ? rx_direct(u, bufs, cap, lens, n) : rx_staged(u, bufs, cap, lens, n);
    return r < 0 ? r : old + r;
}

/* udp_rx with each frame's FCS (lanai.h rx_fcs): taken where this link copies the frame, from
 * its receive ring or a staging buffer; a frame the kernel read in place has none. */
static int udp_rx_fcs(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens,
                      uint64_t *fcs, int n)
{
    struct udp_link *u = (struct udp_link *)l;
    u->fcs = fcs;
    int r = udp_rx(l, bufs, cap, lens, n);
    u->fcs = NULL;
    return r;
}

/* With a ring, whether rx() would find anything is one load (lanai.h: pending); every
 * UDP_SOCK_LOOKS-th empty look says yes, for the UDP socket. */
static int udp_pending(struct lanai_link *l)
{
    struct udp_link *u = (struct udp_link *)l;
    if (u->carry_count || u->ring.fd < 0 || udp_ring_ready(&u->ring))
        return 1;
    return ++u->sock_looks >= UDP_SOCK_LOOKS;
}

int mcp_link_udp_eth_on(struct lanai_link *l)
{
    return ((struct udp_link *)l)->eth.on;
}

int mcp_link_udp_ring_fd(struct lanai_link *l)
{
    return ((struct udp_link *)l)->ring.fd;
}

/* Free what the udp link owns beyond the common part. */
static void udp_free(struct udp_link *u)
{
    if (u->reasm)
        for (unsigned i = 0; i < u->s.l.max_nodes; i++)
            udp_reasm_free(&u->reasm[i]);
    free(u->reasm);
    free(u->giov);
    free(u->ghdr);
    free(u->gctl);
    free(u->stage);
    free(u->lin);
    free(u->carry);
    free(u->rdiov);
    free(u->rdhdr);
    free(u->present);
    free(u->addr);
    udp_ring_close(&u->ring);
    udp_eth_free(&u->eth);
    free(u);
}

static void udp_close(struct lanai_link *l)
{
    struct udp_link *u = (struct udp_link *)l;
    mcp_sock_fini(&u->s);
    udp_free(u);
}

/* MTU of the interface holding address ip, or 0 if none does. */
static unsigned iface_mtu(struct in_addr ip)
{
    struct ifaddrs *ifs;
    unsigned mtu = 0;
    if (getifaddrs(&ifs) != 0)
        return 0;
    for (struct ifaddrs *a = ifs; a && !mtu; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET ||
            ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr != ip.s_addr)
            continue;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", a->ifa_name);
        if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
            mtu = (unsigned)ifr.ifr_mtu;
        close(fd);
    }
    freeifaddrs(ifs);
    return mtu;
}

/*
 * Decide how frames over one datagram go (u->gso, u->seg) from PSP_UDP_GSO, PSP_UDP_SEGMENT
 * and the MTU of the interface holding ip, and set the socket up for it.  0, or -EINVAL with
 * the reason in err.
 */
static int setup_segments(struct udp_link *u, int fd, struct in_addr ip, char *err, size_t errlen)
{
    uint64_t gso = 1, seg = 0, pack = 1;
    if (psp_setting_u64("PSP_UDP_GSO", 0, 1, &gso, err, errlen) ||
        psp_setting_u64("PSP_UDP_PACK", 0, 1, &pack, err, errlen) ||
        psp_setting_u64("PSP_UDP_SEGMENT", 0, UDP_DGRAM_MAX, &seg, err, errlen))
        return -EINVAL;
    if (seg == 0) {
        unsigned mtu = iface_mtu(ip);
        seg = (mtu ? mtu : 1500u) - 28u; /* IPv4 and UDP headers */
        if (seg > UDP_DGRAM_MAX)
            seg = UDP_DGRAM_MAX;
    } else if (seg <= 2 * UDP_SEG_HDR) {
        psp_set_err(err, errlen,
                    "PSP_UDP_SEGMENT=%llu is too small: give 0 (from the MTU) or "
                    "more than %u bytes",
                    (unsigned long long)seg, 2 * UDP_SEG_HDR);
        return -EINVAL;
    }
    u->seg = (uint32_t)seg;
    u->gso = gso && seg < UDP_DGRAM_MAX;
    u->pack = (int)pack;
    int one = 1, zero = 0;
    /* Every frame carries its own CRC-32C end to end, so the UDP checksum is redundant:
     * without GSO, sending without one spares the receiving kernel a checksum pass over every
     * byte of IP fragments (measured: about a tenth of the receiver's time in a stream).  GSO
     * needs it on (the kernel refuses otherwise), and offloads it on veth. */
    (void)setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, u->gso ? &zero : &one, sizeof one);
    /* GRO: a GSO write comes back as one read.  Without it (old kernels) segments come one by
     * one and are put together in udp_reasm. */
    (void)setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
    return 0;
}

/*
 * The receive ring: adopted with the socket (p->ring_fd), or made for a socket of our own
 * unless PSP_UDP_RING=0 or p->no_ring; without CAP_NET_RAW the UDP socket is read.  0, or
 * -EINVAL with the reason in err.
 */
static int setup_ring(struct udp_link *u, const struct mcp_link_params *p, char *err, size_t errlen)
{
    if (p->fd >= 0) {
        if (p->ring_fd < 0)
            return 0;
        int rc = udp_ring_adopt(&u->ring, p->ring_fd);
        if (!rc && p->prefault)
            pkt_ring_prefault(&u->ring.ring);
        if (rc)
            psp_set_err(err, errlen,
                        "descriptor %d is not the receive ring of a udp link (%s): psid and this "
                        "library must come from the same psport",
                        p->ring_fd, strerror(-rc));
        return rc ? -EINVAL : 0;
    }
    uint64_t want = 1;
    if (psp_setting_u64("PSP_UDP_RING", 0, 1, &want, err, errlen))
        return -EINVAL;
    if (!want || p->no_ring)
        return 0;
    int rc = udp_ring_open(&u->ring, u->s.fd, &u->addr[p->node], u->seg);
    if (rc == -EPERM || rc == -EACCES)
        PSP_INFO("udp link of node %u: no receive ring without CAP_NET_RAW (run psid as root): "
                 "frames are read with recvmmsg, a system call per look",
                 (unsigned)p->node);
    else if (rc)
        PSP_WARN("udp link of node %u: the kernel refused the receive ring (%s): frames are read "
                 "with recvmmsg; PSP_UDP_RING=0 says so from the start",
                 (unsigned)p->node, strerror(-rc));
    return 0;
}

/*
 * Link frames to nodes on the same Ethernet (udp_eth.h): with a ring, unless PSP_UDP_ETH=0.
 * 0, or -EINVAL / -ENOMEM with the reason in err.
 */
static int setup_eth(struct udp_link *u, const struct mcp_link_params *p, char *err, size_t errlen)
{
    uint64_t want = 1;
    if (psp_setting_u64("PSP_UDP_ETH", 0, 1, &want, err, errlen))
        return -EINVAL;
    if (!want || u->ring.fd < 0)
        return 0;
    if (udp_eth_setup(&u->eth, p->nodes, p->node) != 0) {
        psp_set_err(err, errlen, "udp link: out of memory");
        return -ENOMEM;
    }
    u->eth.sample = UDP_ETH_SAMPLE - 1; /* the first datagram read is looked at */
    if (!u->eth.on)
        PSP_INFO("udp link of node %u: no Ethernet interface holds its address, or no other node "
                 "has a MAC in the nodes file: every frame goes as a datagram",
                 (unsigned)p->node);
    return 0;
}

/* A link that opened its socket tells every node with a MAC that it reads link frames (one
 * that adopted it learns from what it reads, and tells the nodes it reads datagrams from). */
static void say_hello(struct udp_link *u)
{
    for (unsigned i = 0; u->eth.on && i < u->eth.nodes; i++)
        if (u->eth.known[i] && udp_eth_hello(&u->eth, u->ring.fd, (uint16_t)i) == 0)
            u->s.st.tx_hello++;
}

static const struct lanai_link_ops udp_ops = {
    .tx = mcp_sock_tx,
    .flush = mcp_sock_flush,
    .rx = udp_rx,
    .close = udp_close,
    .pending = udp_pending,
    .rx_fcs = udp_rx_fcs,
};

/* Make fd a usable datagram socket: non-blocking, close-on-exec. 0 or -errno. */
static int adopt_fd(int fd)
{
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0)
        return -errno;
    if (type != SOCK_DGRAM)
        return -ENOTSOCK;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return 0;
}

struct lanai_link *mcp_link_udp_open(const struct mcp_link_params *p, char *err, size_t errlen)
{
    if (!p || !p->nodes) {
        psp_set_err(err, errlen, "udp link: no nodes table given");
        return NULL;
    }
    const struct psp_nodes *nodes = p->nodes;
    if (p->node >= nodes->count || !nodes->node[p->node].present) {
        psp_set_err(err, errlen,
                    "udp link: node %u is not in the nodes file (it describes ids below %u): add a "
                    "line '%u <ip>[:<port>]'",
                    (unsigned)p->node, (unsigned)nodes->count, (unsigned)p->node);
        return NULL;
    }
    const struct psp_node_addr *me = &nodes->node[p->node];
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &me->ip, ip, sizeof ip);

    struct udp_link *u = calloc(1, sizeof *u);
    if (!u) {
        psp_set_err(err, errlen, "udp link: out of memory");
        return NULL;
    }
    u->s.fd = -1;
    u->ring.fd = -1;
    u->present = calloc(nodes->count, 1);
    u->addr = calloc(nodes->count, sizeof *u->addr);
    if (!u->present || !u->addr) {
        psp_set_err(err, errlen, "udp link: out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < nodes->count; i++) {
        if (!nodes->node[i].present)
            continue;
        u->present[i] = 1;
        u->addr[i].sin_family = AF_INET;
        u->addr[i].sin_addr = nodes->node[i].ip;
        u->addr[i].sin_port = htons(nodes->node[i].port);
    }

    int fd;
    if (p->fd >= 0) {
        fd = p->fd;
        int rc = adopt_fd(fd);
        if (rc) {
            psp_set_err(err, errlen, "udp link: descriptor %d is not a usable UDP socket: %s", fd,
                        strerror(-rc));
            goto fail;
        }
    } else {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            psp_set_err(err, errlen, "udp link: cannot create a UDP socket: %s", strerror(errno));
            goto fail;
        }
        if (bind(fd, (struct sockaddr *)&u->addr[p->node], sizeof u->addr[p->node]) != 0) {
            int e = errno;
            close(fd);
            if (e == EADDRINUSE)
                psp_set_err(err, errlen,
                            "udp link: %s:%u is already in use (another psid for node %u running? "
                            "stop it, or choose another port with PSP_UDP_PORT or the nodes file)",
                            ip, (unsigned)me->port, (unsigned)p->node);
            else if (e == EADDRNOTAVAIL)
                psp_set_err(err, errlen,
                            "udp link: address %s of node %u is not on this host: check the nodes "
                            "file, or start this node with its own id",
                            ip, (unsigned)p->node);
            else
                psp_set_err(err, errlen, "udp link: cannot bind %s:%u: %s", ip, (unsigned)me->port,
                            strerror(e));
            goto fail;
        }
    }
    u->s.fd = fd;
    mcp_sock_buffers(fd, MCP_SOCK_BUFSIZE);
    u->reasm = calloc(nodes->count, sizeof *u->reasm);
    u->giov = calloc(MCP_SOCK_TXQ, sizeof *u->giov);
    u->ghdr = calloc(MCP_SOCK_TXQ, sizeof *u->ghdr);
    u->gctl = calloc(MCP_SOCK_TXQ, sizeof *u->gctl);
    u->rdiov = calloc(UDP_RXBATCH, sizeof *u->rdiov);
    u->rdhdr = calloc(UDP_RXBATCH, sizeof *u->rdhdr);
    if (!u->reasm || !u->giov || !u->ghdr || !u->gctl || !u->rdiov || !u->rdhdr) {
        psp_set_err(err, errlen, "udp link: out of memory");
        goto fail;
    }
    if (setup_segments(u, fd, me->ip, err, errlen) != 0)
        goto fail;
    if (setup_ring(u, p, err, errlen) != 0 || setup_eth(u, p, err, errlen) != 0)
        goto fail;

    u->s.l.ops = &udp_ops;
    u->s.l.kind = "udp";
    u->s.l.max_frame = u->gso ? udp_seg_max_frame(u->seg) : UDP_DGRAM_MAX;
    u->s.l.node = p->node;
    u->s.l.max_nodes = nodes->count;
    u->s.hdr_len = 0;
    u->s.route = udp_route;
    u->s.fill = udp_fill;
    u->s.prepare = udp_prepare;
    u->s.refused = udp_refused;
    u->s.fd_for = udp_fd_for;
    if (mcp_sock_init(&u->s, fd, &p->fault) != 0) {
        psp_set_err(err, errlen, "udp link: out of memory");
        goto fail;
    }
    if (p->fd < 0)
        say_hello(u);
    return &u->s.l;

fail:
    if (p->fd >= 0) {
        u->s.fd = -1; /* on failure the caller keeps its descriptors */
        if (u->ring.fd >= 0) {
            pkt_ring_unmap(&u->ring.ring);
            u->ring.fd = -1;
        }
    }
    mcp_sock_fini(&u->s);
    udp_free(u);
    return NULL;
}
