/*
 * udp_seg.h — private to the udp link: frames larger than one datagram under the MTU, cut into
 * segments that the kernel sends as one GSO write and may hand back as one GRO read.
 *
 * Why: a 32 KiB frame sent as one IP-fragmented datagram costs the kernel one trip through
 * veth, bridge and IP reassembly per fragment, which capped a stream near 600 MB/s.  Sent with
 * UDP_SEGMENT it travels as one packet and, with UDP_GRO on the receiving socket, arrives as one.
 *
 * Every segment starts with an 8-byte little-endian header, so that a frame can be put together
 * again however its segments arrive (one GRO read, several, or one datagram each):
 *
 *   off size field
 *    0   2   magic   UDP_SEG_MAGIC ("SG"; a plain frame starts with MCP_WIRE_MAGIC "PS")
 *    2   2   id      the sender's frame number (wraps), the same in every segment of a frame
 *    4   1   idx     this segment's number, 0 .. cnt-1
 *    5   1   cnt     segments in the frame, 2 .. UDP_SEG_MAX
 *    6   2   chunk   frame bytes in every segment but the last (which may carry fewer)
 *
 * Segment idx carries frame bytes [idx * chunk, min((idx + 1) * chunk, frame length)).
 */
#ifndef PSPORT_MCP_UDP_SEG_H
#define PSPORT_MCP_UDP_SEG_H

#include <stddef.h>
#include <stdint.h>

#define UDP_SEG_MAGIC 0x4753u /* "SG" */
#define UDP_SEG_HDR   8u
#define UDP_SEG_MAX   64u    /* the kernel's limit of segments per GSO write (UDP_MAX_SEGMENTS) */
#define UDP_DGRAM_MAX 65507u /* 65535 - 20 (IPv4) - 8 (UDP): one datagram or one GSO write */

struct udp_seg_hdr {
    uint16_t id;
    uint8_t idx, cnt;
    uint16_t chunk;
};

/* Write h into out[0..UDP_SEG_HDR). */
void udp_seg_put(uint8_t *out, const struct udp_seg_hdr *h);

/* 1 if the len bytes at p start with the segment magic (a segment, or junk that looks like
 * one), 0 if not (a plain frame starts with MCP_WIRE_MAGIC). */
static inline int udp_seg_magic(const uint8_t *p, size_t len)
{
    return len >= 2 && (uint16_t)(p[0] | p[1] << 8) == UDP_SEG_MAGIC;
}

/* Read a segment header from p (len bytes): 1 and h filled if p is a well-formed segment
 * (magic, idx < cnt, 2 <= cnt, a chunk that fits, no more bytes than a chunk), else 0. */
int udp_seg_get(const uint8_t *p, size_t len, struct udp_seg_hdr *h);

/* Segments needed for a frame of len bytes at chunk bytes each. */
static inline unsigned udp_seg_count(uint32_t len, uint32_t chunk)
{
    return (unsigned)((len + chunk - 1) / chunk);
}

/* Largest frame the link can send with segments of seg bytes (header included) in one write;
 * seg = 0: no segmentation, a frame is one datagram. */
uint32_t udp_seg_max_frame(uint32_t seg);

/*
 * Reassembly of the frames of one sender, for segments that did not arrive as one complete run
 * (segments read one by one, or a frame split over several GRO reads).  One frame at a time: a
 * segment of another frame discards the one being built (counted as incomplete by the caller),
 * as the frame was lost on the wire.  Owns buf.
 */
struct udp_reasm {
    uint8_t *buf;  /* UDP_DGRAM_MAX bytes, allocated on first use */
    uint64_t have; /* bit i: segment i is in */
    uint32_t len;  /* frame length once the last segment is in, else 0 */
    uint16_t id, chunk;
    uint8_t cnt, active;
};

/*
 * Add segment h with its payload (n bytes) to r.  Returns the frame length when the frame is
 * complete (the frame is in r->buf, and r is empty again), 0 while it is not, -1 if the segment
 * cannot be used (out of memory, an inconsistent header).  *discarded is set to 1 when a frame
 * under construction was thrown away for this segment.
 */
int udp_reasm_add(struct udp_reasm *r, const struct udp_seg_hdr *h, const uint8_t *payload,
                  size_t n, int *discarded);

/* Free what r owns. */
void udp_reasm_free(struct udp_reasm *r);

#endif
