/* mcp_wire.c — encoding, decoding, sealing and checking of RDP frames (see mcp_wire.h). */
#include "mcp_wire.h"

#include "crc32c.h"
#include "lanai.h"

_Static_assert(LANAI_FCS_SKIP == MCP_WIRE_HDR, "a link's FCS covers the frame after its header");

void mcp_wire_put(uint8_t *f, const struct mcp_wire_hdr *h)
{
    mcp_put_le16(f + 0, h->magic);
    f[2] = h->version;
    f[3] = h->type;
    mcp_put_le16(f + 4, h->src_node);
    mcp_put_le16(f + 6, h->dst_node);
    mcp_put_le32(f + 8, h->src_cid);
    mcp_put_le32(f + 12, h->dst_cid);
    f[16] = h->seq;
    f[17] = h->ack;
    f[18] = h->flags;
    f[19] = 0;
    mcp_put_le16(f + 20, h->len);
    mcp_put_le16(f + 22, 0);
    mcp_put_le32(f + 24, h->crc);
    mcp_put_le32(f + 28, 0);
}

void mcp_wire_get(const uint8_t *f, struct mcp_wire_hdr *h)
{
    h->magic = mcp_get_le16(f + 0);
    h->version = f[2];
    h->type = f[3];
    h->src_node = mcp_get_le16(f + 4);
    h->dst_node = mcp_get_le16(f + 6);
    h->src_cid = mcp_get_le32(f + 8);
    h->dst_cid = mcp_get_le32(f + 12);
    h->seq = f[16];
    h->ack = f[17];
    h->flags = f[18];
    h->len = mcp_get_le16(f + 20);
    h->crc = mcp_get_le32(f + 24);
}

uint32_t mcp_wire_crc_hdr(const uint8_t *f, uint32_t payload_crc)
{
    static const uint8_t zero[4];
    uint32_t c = mcp_crc32c(payload_crc, f, 24);
    c = mcp_crc32c(c, zero, 4);
    return mcp_crc32c(c, f + 28, MCP_WIRE_HDR - 28);
}

uint32_t mcp_wire_crc(const uint8_t *f, uint32_t len)
{
    return mcp_wire_crc_hdr(f, mcp_crc32c(0, f + MCP_WIRE_HDR, len - MCP_WIRE_HDR));
}

void mcp_wire_seal(uint8_t *f, uint32_t len)
{
    mcp_put_le32(f + 24, mcp_wire_crc(f, len));
}

void mcp_wire_seal_hdr(uint8_t *f, uint32_t payload_crc)
{
    mcp_put_le32(f + 24, mcp_wire_crc_hdr(f, payload_crc));
}

enum mcp_wire_verdict mcp_wire_check(const uint8_t *f, uint32_t flen, uint32_t max_payload,
                                     struct mcp_wire_hdr *h)
{
    return mcp_wire_check_fcs(f, flen, max_payload, NULL, h);
}

enum mcp_wire_verdict mcp_wire_check_fcs(const uint8_t *f, uint32_t flen, uint32_t max_payload,
                                         const uint32_t *payload_crc, struct mcp_wire_hdr *h)
{
    if (flen < MCP_WIRE_HDR)
        return MCP_WIRE_SHORT;
    mcp_wire_get(f, h);
    if (h->magic != MCP_WIRE_MAGIC)
        return MCP_WIRE_MAGIC_BAD;
    if (h->version != MCP_WIRE_VERSION)
        return MCP_WIRE_VERSION_BAD;
    if (h->type < MCP_FT_SYN || h->type > MCP_FT_MAX)
        return MCP_WIRE_TYPE_BAD;
    if ((uint32_t)h->len != flen - MCP_WIRE_HDR || h->len > max_payload)
        return MCP_WIRE_LEN_BAD;
    if (h->type != MCP_FT_DATA && h->len != 0)
        return MCP_WIRE_LEN_BAD;
    uint32_t crc = payload_crc ? mcp_wire_crc_hdr(f, *payload_crc) : mcp_wire_crc(f, flen);
    if (crc != h->crc)
        return MCP_WIRE_CRC_BAD;
    return MCP_WIRE_OK;
}
