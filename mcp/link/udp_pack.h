/*
 * udp_pack.h — private to the udp link: several small frames to one node in one datagram.
 *
 * Why: a datagram's way through the kernel (sendmmsg, veth, bridge, the receiver's ring) costs
 * several microseconds on a VM whatever its size, and small messages to one node (osu_mbw_mr,
 * a window of 64 eight-byte sends) came one frame to a datagram: the sender spent 60 % of its
 * time in sendmmsg.  Consecutive frames to one node in one flush now share a datagram.
 *
 * A packed datagram is never longer than the link's datagram under the MTU (no GSO, no IP
 * fragments), so a receiving ring takes it like any small datagram:
 *
 *   off size field
 *    0   2   magic   UDP_PACK_MAGIC ("PK"; a plain frame starts with "PS", a segment "SG")
 *    2   1   cnt     frames, 2 .. UDP_PACK_MAX
 *    3   1   reserved 0
 *   then cnt times: a 2-byte little-endian length and that many frame bytes
 */
#ifndef PSPORT_MCP_UDP_PACK_H
#define PSPORT_MCP_UDP_PACK_H

#include <stddef.h>
#include <stdint.h>

#define UDP_PACK_MAGIC 0x4b50u /* "PK" */
#define UDP_PACK_HDR   4u
#define UDP_PACK_LEN   2u  /* the length in front of each frame */
#define UDP_PACK_MAX   63u /* frames per datagram: a header and two iovecs a frame in 128 */

/* 1 if the len bytes at p start with the pack magic, 0 if not. */
static inline int udp_pack_magic(const uint8_t *p, size_t len)
{
    return len >= 2 && (uint16_t)(p[0] | p[1] << 8) == UDP_PACK_MAGIC;
}

/* The frame count a packed datagram's header gives (0 if p is not one); not checked against
 * its lengths (udp_pack_split does that). */
static inline unsigned udp_pack_count(const uint8_t *p, size_t len)
{
    return len >= UDP_PACK_HDR && udp_pack_magic(p, len) ? p[2] : 0;
}

/* Bytes a datagram of cnt frames of total bytes in all takes. */
static inline uint32_t udp_pack_size(unsigned cnt, uint32_t total)
{
    return UDP_PACK_HDR + cnt * UDP_PACK_LEN + total;
}

/* Write the header of a datagram of cnt frames into out[0..UDP_PACK_HDR). */
void udp_pack_put_hdr(uint8_t *out, unsigned cnt);

/* Write a frame's length into out[0..UDP_PACK_LEN). */
void udp_pack_put_len(uint8_t *out, uint32_t len);

/*
 * Take the packed datagram of len bytes at p apart: its frames' starts into frames[] and
 * lengths into lens[] (room for UDP_PACK_MAX each), in order.  Returns how many, or 0 if p is
 * not a well-formed packed datagram (magic, 2 <= cnt <= UDP_PACK_MAX, lengths that end
 * exactly at len, no empty frame).
 */
unsigned udp_pack_split(const uint8_t *p, size_t len, const uint8_t **frames, uint32_t *lens);

#endif
