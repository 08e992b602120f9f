/*
 * udp_seg.c — segment headers and reassembly of segmented frames (see udp_seg.h).
 */
#include "udp_seg.h"

#include <stdlib.h>
#include <string.h>

void udp_seg_put(uint8_t *out, const struct udp_seg_hdr *h)
{
    out[0] = (uint8_t)(UDP_SEG_MAGIC & 0xff);
    out[1] = (uint8_t)(UDP_SEG_MAGIC >> 8);
    out[2] = (uint8_t)(h->id & 0xff);
    out[3] = (uint8_t)(h->id >> 8);
    out[4] = h->idx;
    out[5] = h->cnt;
    out[6] = (uint8_t)(h->chunk & 0xff);
    out[7] = (uint8_t)(h->chunk >> 8);
}

int udp_seg_get(const uint8_t *p, size_t len, struct udp_seg_hdr *h)
{
    if (len < UDP_SEG_HDR || !udp_seg_magic(p, len))
        return 0;
    h->id = (uint16_t)(p[2] | p[3] << 8);
    h->idx = p[4];
    h->cnt = p[5];
    h->chunk = (uint16_t)(p[6] | p[7] << 8);
    if (h->cnt < 2 || h->cnt > UDP_SEG_MAX || h->idx >= h->cnt || h->chunk == 0)
        return 0;
    size_t n = len - UDP_SEG_HDR;
    if (n > h->chunk || n == 0 || (h->idx + 1u < h->cnt && n != h->chunk))
        return 0; /* every segment but the last is exactly one chunk */
    return 1;
}

uint32_t udp_seg_max_frame(uint32_t seg)
{
    if (seg <= UDP_SEG_HDR || seg >= UDP_DGRAM_MAX)
        return UDP_DGRAM_MAX;         /* no segmentation, or every frame fits one datagram */
    uint32_t n = UDP_DGRAM_MAX / seg; /* whole segments in one write */
    if (n > UDP_SEG_MAX)
        n = UDP_SEG_MAX;
    uint32_t max = n * (seg - UDP_SEG_HDR);
    return max > UDP_DGRAM_MAX ? UDP_DGRAM_MAX : max;
}

int udp_reasm_add(struct udp_reasm *r, const struct udp_seg_hdr *h, const uint8_t *payload,
                  size_t n, int *discarded)
{
    *discarded = 0;
    uint64_t off = (uint64_t)h->idx * h->chunk;
    if (off + n > UDP_DGRAM_MAX)
        return -1;
    if (!r->buf && !(r->buf = malloc(UDP_DGRAM_MAX)))
        return -1;
    if (r->active && (r->id != h->id || r->cnt != h->cnt || r->chunk != h->chunk)) {
        *discarded = 1; /* a new frame began: the old one lost a segment on the way */
        r->active = 0;
    }
    if (!r->active) {
        r->active = 1;
        r->have = 0;
        r->len = 0;
        r->id = h->id;
        r->cnt = h->cnt;
        r->chunk = h->chunk;
    }
    uint64_t bit = 1ull << h->idx;
    if (r->have & bit)
        return 0; /* a duplicate segment */
    memcpy(r->buf + off, payload, n);
    r->have |= bit;
    if (h->idx + 1u == h->cnt)
        r->len = (uint32_t)(off + n);
    uint64_t all = h->cnt == 64 ? ~0ull : (1ull << h->cnt) - 1;
    if (r->have != all)
        return 0;
    r->active = 0;
    return (int)r->len;
}

void udp_reasm_free(struct udp_reasm *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}
