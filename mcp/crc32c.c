/* crc32c.c — CRC-32C, hardware instruction when present, slicing table otherwise.  In the Linux
 * module only the table: the kernel is built without SSE, so the instruction's target attribute
 * and the CPU probe (libgcc's __builtin_cpu_supports) are user-space only. */
#include "crc32c.h"

#include "mcp_compat.h"

#if defined(__x86_64__) && !defined(__KERNEL__)
#define CRC_HW 1
#endif

#define CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static int crc_table_ready;

/* The hardware path runs three independent lanes of CRC_LANE bytes (the crc32 instruction has
 * a latency of three cycles and a throughput of one) and joins them: the CRC state is linear,
 * so crc(s, A|B) = shift(crc(s, A), |B|) ^ crc(0, B), where shift() appends |B| zero bytes.
 * shift_tab holds that operator for CRC_LANE bytes, one table per state byte. */
#define CRC_LANE 256
static uint32_t shift_tab[4][256];

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = b << (8 * k);
            for (int z = 0; z < CRC_LANE; z++)
                c = (c >> 8) ^ crc_table[0][c & 0xff];
            shift_tab[k][b] = c;
        }
    __atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t len)
{
    if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
        crc_table_init(); /* idempotent: racing initialisers write the same values */
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
              crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
              crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
              crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#ifdef CRC_HW
static inline uint32_t shift_lane(uint32_t x)
{
    return shift_tab[0][x & 0xff] ^ shift_tab[1][(x >> 8) & 0xff] ^ shift_tab[2][(x >> 16) & 0xff] ^
           shift_tab[3][x >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = crc;
    while (len >= 3 * CRC_LANE) {
        uint64_t b = 0, d = 0;
        for (size_t i = 0; i < CRC_LANE; i += 8) {
            uint64_t va, vb, vd;
            memcpy(&va, p + i, 8);
            memcpy(&vb, p + CRC_LANE + i, 8);
            memcpy(&vd, p + 2 * CRC_LANE + i, 8);
            c = __builtin_ia32_crc32di(c, va);
            b = __builtin_ia32_crc32di(b, vb);
            d = __builtin_ia32_crc32di(d, vd);
        }
        c = shift_lane(shift_lane((uint32_t)c) ^ (uint32_t)b) ^ (uint32_t)d;
        p += 3 * CRC_LANE;
        len -= 3 * CRC_LANE;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t mcp_crc32c(uint32_t crc, const void *data, size_t len)
{
    crc = ~crc;
#ifdef CRC_HW
    static int have_hw = -1;
    if (have_hw < 0) {
        __builtin_cpu_init();
        if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
            crc_table_init(); /* the lanes' shift tables */
        have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    if (have_hw)
        return ~crc_hw(crc, data, len);
#endif
    return ~crc_soft(crc, data, len);
}
