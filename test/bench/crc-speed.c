/*
 * crc-speed — how fast this CPU computes the frame CRC (mcp/crc32c.c) by each way it has: the
 * slicing table, the crc32 instruction in three lanes, the 256- and 512-bit folding.  Every
 * frame is checksummed twice (by the sender's firmware and by the receiver's), so on a host
 * without a folding path the CRC is a large part of a bulk transfer between nodes.
 *
 * Output: one line a way and size, "crc32c <way> bytes=<n> GB/s=<rate>", the best of five
 * runs of about 50 ms; a way the CPU lacks prints "absent".  Then, by the best way, a copy and
 * its CRC as the frame paths take them, frame by frame out of a 4 MiB source: "copy-fused"
 * (mcp_crc32c_copy, one pass) and "copy-then-crc" (memcpy, then mcp_crc32c over the copy).
 * Exit 1 if two ways disagree (or the fused copy is wrong).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32c.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    static const char *const name[] = {"table", "instruction", "fold256", "fold512"};
    static const size_t sizes[] = {1024, 8192, 65536};
    static uint8_t buf[65536];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        uint32_t want = mcp_crc32c(0, buf, n);
        for (int impl = MCP_CRC32C_TABLE; impl <= MCP_CRC32C_FOLD512; impl++) {
            uint32_t c = 0;
            if (!mcp_crc32c_with((enum mcp_crc32c_impl)impl, &c, buf, n)) {
                printf("crc32c %s bytes=%zu absent\n", name[impl], n);
                continue;
            }
            if (c != want) {
                printf("crc32c %s bytes=%zu WRONG %08x, best way %08x\n", name[impl], n, c, want);
                bad = 1;
                continue;
            }
            double best = 0;
            for (int run = 0; run < 5; run++) {
                long reps = 0;
                double t0 = now_s(), t;
                do {
                    for (int k = 0; k < 16; k++, reps++)
                        mcp_crc32c_with((enum mcp_crc32c_impl)impl, &c, buf, n);
                } while ((t = now_s() - t0) < 0.05);
                double rate = (double)reps * (double)n / t / 1e9;
                best = rate > best ? rate : best;
            }
            printf("crc32c %s bytes=%zu GB/s=%.2f\n", name[impl], n, best);
        }
    }
    /* the copies walk a 4 MiB source frame by frame, as a send walks the user's buffer: the
     * source comes from beyond the cache, the copy is read back from it */
    enum { SRC = 4 << 20 };
    uint8_t *src = malloc(SRC);
    static uint8_t dst[65536];
    if (!src)
        return 1;
    for (size_t i = 0; i < SRC; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        uint32_t want = mcp_crc32c(0, src, n);
        uint32_t c = mcp_crc32c_copy(0, dst, src, n);
        if (c != want || memcmp(dst, src, n) != 0) {
            printf("crc32c copy-fused bytes=%zu WRONG %08x, want %08x%s\n", n, c, want,
                   memcmp(dst, src, n) ? " (copy differs)" : "");
            bad = 1;
            continue;
        }
        for (int fused = 1; fused >= 0; fused--) {
            double best = 0;
            for (int run = 0; run < 5; run++) {
                long reps = 0;
                size_t off = 0;
                double t0 = now_s(), t;
                do {
                    for (int k = 0; k < 16; k++, reps++) {
                        if (fused) {
                            c = mcp_crc32c_copy(c, dst, src + off, n);
                        } else {
                            memcpy(dst, src + off, n);
                            c = mcp_crc32c(c, dst, n);
                        }
                        off = off + 2 * n <= SRC ? off + n : 0;
                    }
                } while ((t = now_s() - t0) < 0.05);
                double rate = (double)reps * (double)n / t / 1e9;
                best = rate > best ? rate : best;
            }
            printf("crc32c %s bytes=%zu GB/s=%.2f\n", fused ? "copy-fused" : "copy-then-crc", n,
                   best);
        }
    }
    free(src);
    return bad;
}
