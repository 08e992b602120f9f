/*
 * pkt_ring.c — a packet socket's receive ring (see pkt_ring.h).
 *
 * Kernel rules this relies on (packet(7), TPACKET_V2): the kernel takes frames strictly in
 * ring order, each only when its status is TP_STATUS_KERNEL, and sets TP_STATUS_USER when it
 * has filled it; when the next frame is still the reader's it drops the packet (a frame lost
 * on the wire, for the firmware).  Frames received on two CPUs at once may be completed out of
 * order, so a frame that is not the reader's yet is waited for, never skipped.
 *
 * Readers (every process of a node, one at a time under the NIC lock) share one read
 * position.  The kernel and the readers stay in step only while each frame goes back to the
 * kernel exactly once, after it was read: a frame given back early is refilled, and one given
 * back late, or twice, leaves the reader a lap apart from the kernel.
 */
#include "pkt_ring.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING_BLOCK     (128u << 10) /* bytes per block (a multiple of the page size) */
#define RING_NET_ROOM  80u          /* frame bytes before the network header (vnet: 10 more) */
#define RING_TAIL_ROOM 64u          /* bytes of block 0 past its frames kept for the tail */

/* Frame and block sizes for packets of max_net bytes in a ring of about bytes bytes: the same
 * answer in every process. */
static void geometry(struct pkt_ring *r, uint32_t max_net, uint32_t bytes)
{
    uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE);
    /* the kernel puts the network header at TPACKET_ALIGN(TPACKET2_HDRLEN + 16) = 80 (the MAC
     * header of SOCK_RAW just before it; a virtio_net_hdr adds 10), so max_net + 80 bytes
     * hold a whole packet; 64 more are slack */
    uint32_t frame = (max_net + RING_NET_ROOM + 64u + 63u) & ~63u;
    uint32_t block = RING_BLOCK;
    if (block / frame < 2) /* big packets: a block a frame, no more pages than it needs */
        block = (frame + RING_TAIL_ROOM + page - 1) / page * page;
    while (block - block / frame * frame < RING_TAIL_ROOM)
        frame += 64u; /* the kernel uses whole blocks of frames: make room for the tail */
    r->frame_size = frame;
    r->block_size = block;
    r->per_block = block / frame;
    uint32_t blocks = bytes / block ? bytes / block : 1u;
    r->frame_nr = r->per_block * blocks;
    r->map_len = (size_t)block * blocks;
}

static int map_ring(struct pkt_ring *r, int fd)
{
    void *m = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -errno;
    r->map = m;
    r->tail = (uint32_t *)(r->map + (size_t)r->per_block * r->frame_size);
    return 0;
}

int pkt_ring_create(struct pkt_ring *r, int fd, uint32_t max_net, uint32_t bytes, int vnet)
{
    memset(r, 0, sizeof *r);
    geometry(r, max_net, bytes);
    int v = TPACKET_V2;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0)
        return -errno;
    r->vnet = vnet ? 1 : 0;
    struct tpacket_req req = {
        .tp_block_size = r->block_size,
        .tp_block_nr = (unsigned)(r->map_len / r->block_size),
        .tp_frame_size = r->frame_size,
        .tp_frame_nr = r->frame_nr,
    };
    int rc = 0;
    if (r->vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &r->vnet, sizeof r->vnet) != 0)
        rc = -errno;
    else if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0)
        rc = -errno;
    else if ((rc = map_ring(r, fd)) != 0) {
        memset(&req, 0, sizeof req); /* no ring after all: frames go to the socket queue */
        (void)setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req);
    }
    if (rc) {
        v = TPACKET_V1; /* a socket without a ring says so to those who adopt it */
        (void)setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v);
        v = 0; /* and recvmmsg reads packets without a header in front */
        (void)setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &v, sizeof v);
        r->vnet = 0;
        r->map = NULL;
    }
    return rc;
}

int pkt_ring_adopt(struct pkt_ring *r, int fd, uint32_t max_net, uint32_t bytes)
{
    memset(r, 0, sizeof *r);
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, &len) != 0)
        return -errno;
    if (v != TPACKET_V2)
        return 0;
    len = sizeof r->vnet;
    if (getsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &r->vnet, &len) != 0)
        return -errno;
    geometry(r, max_net, bytes);
    int rc = map_ring(r, fd);
    return rc ? rc : 1;
}

void pkt_ring_prefault(const struct pkt_ring *r)
{
    if (!r->map)
        return;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t o = 0; o < r->map_len; o += pg) /* the kernel writes there: a relaxed load */
        (void)__atomic_load_n(r->map + o, __ATOMIC_RELAXED);
    /* A reader writes each frame's status when it gives the frame back, and the shared read
     * position; a page first read and later written costs a second trap under a hypervisor,
     * so write now: an atomic OR of 0 changes nothing, even while the kernel or another reader
     * stores there.  Volatile, or a compiler may drop an RMW whose result nobody uses. */
    for (uint32_t i = 0; i < r->frame_nr; i++) {
        uint8_t *f = r->map + (size_t)(i / r->per_block) * r->block_size +
                     (size_t)(i % r->per_block) * r->frame_size;
        volatile uint32_t *status = &((struct tpacket2_hdr *)(void *)f)->tp_status;
        (void)__atomic_fetch_or(status, 0u, __ATOMIC_RELAXED);
    }
    if (r->tail)
        (void)__atomic_fetch_or((volatile uint32_t *)r->tail, 0u, __ATOMIC_RELAXED);
}

void pkt_ring_unmap(struct pkt_ring *r)
{
    if (r->map)
        munmap(r->map, r->map_len);
    r->map = NULL;
    r->tail = NULL;
}

static struct tpacket2_hdr *frame_at(const struct pkt_ring *r, uint32_t i)
{
    return (struct tpacket2_hdr *)(r->map + (size_t)(i / r->per_block) * r->block_size +
                                   (size_t)(i % r->per_block) * r->frame_size);
}

static int has_data(const struct tpacket2_hdr *h)
{
    return (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
}

/*
 * A reader marks a frame taken before it moves past it (pkt_ring_release), in tp_padding,
 * which the kernel zeroes whenever it fills a frame: a frame the readers' with the mark is
 * one a reader moved past and never gave back; a frame the readers' without it holds a packet
 * nobody has read.
 */
static const uint8_t taken_mark[4] = {'T', 'A', 'K', 'N'};

/* Frame i, the read position: after giving back a frame a dead reader left behind it. */
static struct tpacket2_hdr *at_tail(struct pkt_ring *r, uint32_t i)
{
    /* A reader that died between moving on and giving its frame back left that frame the
     * readers': give it back, or the kernel stops at it a lap later.  Only that frame: when
     * the ring was full, the frame behind the read position is the newest packet, and giving
     * it back lost it and left this reader a lap ahead of the kernel, blind to everything
     * that came next until a whole ring more had come.  One load of a line this reader just
     * wrote; the mark is looked at only behind a full ring or a dead reader. */
    struct tpacket2_hdr *prev = frame_at(r, i ? i - 1 : r->frame_nr - 1);
    if (has_data(prev) && memcmp(prev->tp_padding, taken_mark, sizeof taken_mark) == 0)
        __atomic_store_n(&prev->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    return frame_at(r, i);
}

static uint32_t tail_index(const struct pkt_ring *r)
{
    uint32_t i = __atomic_load_n(r->tail, __ATOMIC_ACQUIRE);
    return i < r->frame_nr ? i : 0; /* never so by a reader: memory the kernel gave zeroed */
}

int pkt_ring_ready(struct pkt_ring *r)
{
    return has_data(at_tail(r, tail_index(r)));
}

int pkt_ring_peek(struct pkt_ring *r, const uint8_t **data, uint32_t *snap, uint32_t *wire,
                  uint8_t *pkttype, uint32_t *net)
{
    struct tpacket2_hdr *h = at_tail(r, tail_index(r));
    if (!has_data(h))
        return 0;
    const struct sockaddr_ll *sll =
        (const struct sockaddr_ll *)((const uint8_t *)h + TPACKET_ALIGN(sizeof *h));
    *data = (const uint8_t *)h + h->tp_mac;
    *snap = h->tp_snaplen;
    *wire = h->tp_len;
    *pkttype = sll->sll_pkttype;
    *net = h->tp_net - h->tp_mac;
    return 1;
}

/* Mark frame i (the read position) taken and move the read position past it; frame i. */
static struct tpacket2_hdr *move_on(struct pkt_ring *r, uint32_t i)
{
    struct tpacket2_hdr *h = frame_at(r, i);
    memcpy(h->tp_padding, taken_mark, sizeof taken_mark);
    /* the mark before the move (release): whoever sees the move sees the mark */
    __atomic_store_n(r->tail, i + 1 == r->frame_nr ? 0 : i + 1, __ATOMIC_RELEASE);
    return h;
}

void pkt_ring_move_on(struct pkt_ring *r)
{
    (void)move_on(r, tail_index(r));
}

void pkt_ring_release(struct pkt_ring *r)
{
    /* move on first: a reader dying in between leaves a marked frame the next one gives back
     * (at_tail), not a frame read twice */
    struct tpacket2_hdr *h = move_on(r, tail_index(r));
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
}
