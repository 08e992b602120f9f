/*
 * udp_pack.c — packed datagrams of several small frames (see udp_pack.h).
 */
#include "udp_pack.h"

void udp_pack_put_hdr(uint8_t *out, unsigned cnt)
{
    out[0] = (uint8_t)(UDP_PACK_MAGIC & 0xff);
    out[1] = (uint8_t)(UDP_PACK_MAGIC >> 8);
    out[2] = (uint8_t)cnt;
    out[3] = 0;
}

void udp_pack_put_len(uint8_t *out, uint32_t len)
{
    out[0] = (uint8_t)(len & 0xff);
    out[1] = (uint8_t)(len >> 8);
}

unsigned udp_pack_split(const uint8_t *p, size_t len, const uint8_t **frames, uint32_t *lens)
{
    if (len < UDP_PACK_HDR || !udp_pack_magic(p, len))
        return 0;
    unsigned cnt = p[2];
    if (cnt < 2 || cnt > UDP_PACK_MAX)
        return 0;
    size_t off = UDP_PACK_HDR;
    for (unsigned k = 0; k < cnt; k++) {
        if (len - off < UDP_PACK_LEN)
            return 0;
        uint32_t n = (uint32_t)(p[off] | p[off + 1] << 8);
        off += UDP_PACK_LEN;
        if (n == 0 || len - off < n)
            return 0;
        frames[k] = p + off;
        lens[k] = n;
        off += n;
    }
    return off == len ? cnt : 0;
}
