/*
 * mcp_wire.h — the RDP frame format on the wire.
 *
 * Every frame starts with a 32-byte little-endian header followed by `len` payload bytes.
 * The CRC (CRC-32C) covers the payload and then the header, with its crc field zero.  Why that
 * order: the payload's CRC can then be taken where its bytes are copied anyway (the host
 * filling a send slot, the link putting a received frame together, mcp_crc32c_copy), and the
 * firmware continues it over the 32 header bytes alone, which it rewrites at every
 * (re)transmission (the piggybacked ack).  Fields are read and written with explicit
 * little-endian helpers; the struct is never sent raw.
 *
 *   off size field
 *    0   2   magic      MCP_WIRE_MAGIC
 *    2   1   version    MCP_WIRE_VERSION
 *    3   1   type       enum mcp_frame_type
 *    4   2   src_node
 *    6   2   dst_node
 *    8   4   src_cid    sender's connection id for this node pair (0 only in an RST sent
 *                       without a connection)
 *   12   4   dst_cid    receiver's connection id as the sender knows it (0 = not yet known)
 *   16   1   seq        DATA: sequence number; SYN/SYNACK: initial sequence number;
 *                       NACK: the sequence number the receiver expects next
 *   17   1   ack        with MCP_FLAG_ACK: cumulative ack = next sequence number expected from
 *                       the frame's destination (everything before it has been received)
 *   18   1   flags      MCP_FLAG_*
 *   19   1   reserved   0
 *   20   2   len        payload bytes
 *   22   2   reserved   0
 *   24   4   crc        CRC-32C
 *   28   4   reserved   0
 */
#ifndef PSPORT_MCP_WIRE_H
#define PSPORT_MCP_WIRE_H

#include "mcp_types.h"

#define MCP_WIRE_MAGIC   0x5350u /* "PS" */
#define MCP_WIRE_VERSION 2u      /* 2: the CRC runs over the payload first, then the header */
#define MCP_WIRE_HDR     32u

enum mcp_frame_type {
    MCP_FT_SYN = 1,    /* open: carries src_cid and the sender's initial sequence number */
    MCP_FT_SYNACK = 2, /* answer to SYN: own cid + initial seq, dst_cid = the SYN's cid */
    MCP_FT_DATA = 3,
    MCP_FT_ACK = 4,
    MCP_FT_NACK = 5,
    MCP_FT_RST = 6, /* "I do not know connection dst_cid": the peer restarted */
    MCP_FT_MAX = 6
};

#define MCP_FLAG_ACK   0x01u /* the ack field is valid (piggybacked or standalone ACK) */
#define MCP_FLAG_NOBUF 0x02u /* NACK because the receiver is short of buffers */

/* Decoded header. */
struct mcp_wire_hdr {
    uint16_t magic;
    uint8_t version;
    uint8_t type;
    uint16_t src_node;
    uint16_t dst_node;
    uint32_t src_cid;
    uint32_t dst_cid;
    uint8_t seq;
    uint8_t ack;
    uint8_t flags;
    uint16_t len;
    uint32_t crc;
};

static inline void mcp_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void mcp_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint16_t mcp_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t mcp_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Serialise h into the first MCP_WIRE_HDR bytes of frame (crc field written as given). */
void mcp_wire_put(uint8_t *frame, const struct mcp_wire_hdr *h);

/* Decode the header of a frame; no validation. frame must hold MCP_WIRE_HDR bytes. */
void mcp_wire_get(const uint8_t *frame, struct mcp_wire_hdr *h);

/* Compute the CRC-32C of a frame of total length len, taking the crc field as zero. */
uint32_t mcp_wire_crc(const uint8_t *frame, uint32_t len);

/* The frame CRC from payload_crc, the CRC-32C of its payload (mcp_crc32c from 0 over the len
 * bytes after the header), continued over the header at frame. */
uint32_t mcp_wire_crc_hdr(const uint8_t *frame, uint32_t payload_crc);

/* Write the CRC of a complete frame into its header. */
void mcp_wire_seal(uint8_t *frame, uint32_t len);

/* The same, with the payload's CRC already known (mcp_wire_crc_hdr): reads the header only. */
void mcp_wire_seal_hdr(uint8_t *frame, uint32_t payload_crc);

/* Why a received frame was refused by mcp_wire_check(). */
enum mcp_wire_verdict {
    MCP_WIRE_OK = 0,
    MCP_WIRE_SHORT,     /* shorter than the header */
    MCP_WIRE_MAGIC_BAD, /* wrong magic */
    MCP_WIRE_VERSION_BAD,
    MCP_WIRE_TYPE_BAD,
    MCP_WIRE_LEN_BAD, /* len disagrees with the frame size or exceeds max_payload */
    MCP_WIRE_CRC_BAD,
};

/*
 * Validate a received frame of frame_len bytes and decode its header into h.
 * max_payload is the receiver's slot size.  Returns MCP_WIRE_OK or the reason for refusal.
 */
enum mcp_wire_verdict mcp_wire_check(const uint8_t *frame, uint32_t frame_len, uint32_t max_payload,
                                     struct mcp_wire_hdr *h);

/* mcp_wire_check with the CRC of the frame's bytes after the header already taken (by the link
 * as it copied them, lanai.h rx_fcs); payload_crc NULL: computed here. */
enum mcp_wire_verdict mcp_wire_check_fcs(const uint8_t *frame, uint32_t frame_len,
                                         uint32_t max_payload, const uint32_t *payload_crc,
                                         struct mcp_wire_hdr *h);

/* Serial-number comparison on 8-bit sequence numbers: a - b as a signed distance. */
static inline int mcp_seq_diff(uint8_t a, uint8_t b)
{
    return (int8_t)(uint8_t)(a - b);
}

#endif
