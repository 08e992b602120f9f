/* crc32c.c — CRC-32C, hardware instruction when present, slicing table otherwise.  In the Linux
 * module only the table: the kernel is built without SSE, so the instruction's target attribute
 * and the CPU probe (libgcc's __builtin_cpu_supports) are user-space only. */
#include "crc32c.h"

#include "mcp_compat.h"

#if defined(__x86_64__) && !defined(__KERNEL__)
#define CRC_HW 1
#include <immintrin.h>
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
    /* shift() is linear over GF(2), so a byte's entry is the XOR of its bits' entries: 32
     * shifts of CRC_LANE steps, not 1024 (each process paid 0.5-0.7 ms for those at its first
     * CRC; now 65 us, most of it the first touch of the tables' pages). */
    for (int k = 0; k < 4; k++) {
        shift_tab[k][0] = 0;
        for (int bit = 0; bit < 8; bit++) {
            uint32_t c = 1u << (8 * k + bit);
            for (int z = 0; z < CRC_LANE; z++)
                c = (c >> 8) ^ crc_table[0][c & 0xff];
            for (uint32_t b = 0; b < (1u << bit); b++)
                shift_tab[k][(1u << bit) | b] = shift_tab[k][b] ^ c;
        }
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

/* The folding path, for runs of FOLD_BLOCK bytes and more on CPUs with the 512-bit carry-less
 * multiply (AVX-512 VPCLMULQDQ).  The crc32 instruction does 8 bytes a cycle at best, and the frame
 * CRC, made by the sender and checked by the receiver, was the largest cost of a bulk transfer
 * between nodes: folding runs about twice as fast.  It keeps the message's value modulo P while
 * moving it forward: a 128-bit chunk A, D bits before chunk B, is replaced by A * x^D mod P, which
 * two 64x64 multiplies give (A_hi * (x^(D+64) mod P) + A_lo * (x^D mod P), each of degree < 96).
 * Four 64-byte accumulators run FOLD_BLOCK bytes apart; at the end they are folded into one
 * 16-byte value, and the crc32 instruction finishes those 16 bytes and the tail: the CRC of a
 * message is the CRC (from 0) of anything congruent to it that ends at the same place.
 *
 * Bit order: the CRC is reflected, so a 64-bit lane holds degree 63 in bit 0.  The product of
 * two such lanes holds degree 126 in bit 0, one short of the 128-bit chunk's order, so each
 * constant is x^(n-1) mod P for the x^n it stands for. */
#define FOLD_BLOCK 256

/* {x^(D+63), x^(D-1)} mod P as 64-bit reflected lanes, for D = 8 * FOLD_BLOCK, 512, 384, 256
 * and 128 bits */
static uint64_t fold_k[5][2];

/* x^n mod P, reflected: degree 31 in bit 0. */
static uint32_t xpow_mod(uint32_t n)
{
    uint32_t r = 0x80000000u; /* the polynomial 1 */
    while (n--)
        r = (r >> 1) ^ ((r & 1) ? CRC32C_POLY : 0);
    return r;
}

static void fold_init(void)
{
    static const uint32_t dist[5] = {8 * FOLD_BLOCK, 512, 384, 256, 128};
    for (int i = 0; i < 5; i++) {
        /* in a 64-bit reflected lane (degree 63 in bit 0) the 32-bit value sits on top */
        fold_k[i][0] = (uint64_t)xpow_mod(dist[i] + 63) << 32;
        fold_k[i][1] = (uint64_t)xpow_mod(dist[i] - 1) << 32;
    }
}

#define FOLD_TARGET __attribute__((target("avx512f,pclmul,vpclmulqdq,sse4.2")))

/* a folded forward by the distance of k, added to b */
FOLD_TARGET static inline __m512i fold512(__m512i a, __m512i k, __m512i b)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                     _mm512_clmulepi64_epi128(a, k, 0x11), b, 0x96);
}

__attribute__((target("pclmul,sse4.2"))) static inline __m128i fold128(__m128i a, int i, __m128i b)
{
    __m128i k = _mm_set_epi64x((long long)fold_k[i][1], (long long)fold_k[i][0]);
    return _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), b);
}

FOLD_TARGET static inline __m512i fold_const(int i)
{
    return _mm512_set_epi64((long long)fold_k[i][1], (long long)fold_k[i][0],
                            (long long)fold_k[i][1], (long long)fold_k[i][0],
                            (long long)fold_k[i][1], (long long)fold_k[i][0],
                            (long long)fold_k[i][1], (long long)fold_k[i][0]);
}

/* The CRC state crc continued over len >= FOLD_BLOCK bytes at p; with out, the bytes are also
 * copied there, each 64 loaded once for both (mcp_crc32c_copy).  Inlined into its two users,
 * each with out known, so neither pays for the other's case. */
FOLD_TARGET static inline __attribute__((always_inline)) uint32_t
fold512_run(uint32_t crc, uint8_t *out, const uint8_t *p, size_t len)
{
    __m512i x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = _mm512_loadu_si512(p + 64 * i);
        if (out)
            _mm512_storeu_si512(out + 64 * i, x[i]);
    }
    x[0] = _mm512_xor_si512(x[0], _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, (long long)crc));
    p += FOLD_BLOCK;
    out = out ? out + FOLD_BLOCK : NULL;
    len -= FOLD_BLOCK;
    const __m512i kb = fold_const(0);
    while (len >= FOLD_BLOCK) {
        for (int i = 0; i < 4; i++) {
            __m512i v = _mm512_loadu_si512(p + 64 * i);
            if (out)
                _mm512_storeu_si512(out + 64 * i, v);
            x[i] = fold512(x[i], kb, v);
        }
        p += FOLD_BLOCK;
        out = out ? out + FOLD_BLOCK : NULL;
        len -= FOLD_BLOCK;
    }
    const __m512i k64 = fold_const(1);
    __m512i y = fold512(fold512(fold512(x[0], k64, x[1]), k64, x[2]), k64, x[3]);
    for (; len >= 64; p += 64, len -= 64) {
        __m512i v = _mm512_loadu_si512(p);
        if (out) {
            _mm512_storeu_si512(out, v);
            out += 64;
        }
        y = fold512(y, k64, v);
    }
    /* the four 16-byte lanes, 48, 32 and 16 bytes before the last */
    __m128i r = fold128(_mm512_extracti32x4_epi32(y, 0), 2, _mm512_extracti32x4_epi32(y, 3));
    r = fold128(_mm512_extracti32x4_epi32(y, 1), 3, r);
    r = fold128(_mm512_extracti32x4_epi32(y, 2), 4, r);
    /* Clear the vector registers' upper halves before leaving: with them left in use (the
     * compiler adds no vzeroupper before the tail call), the SSE code that runs next, the
     * application's own, ran at a fraction of its speed (the SCOPE relax kernel between two
     * nodes: 3.5 times as long). */
    _mm256_zeroupper();
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = __builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(r, 1));
    if (out)
        memcpy(out, p, len);
    return crc_hw((uint32_t)c, p, len);
}

FOLD_TARGET static uint32_t crc_fold512(uint32_t crc, const uint8_t *p, size_t len)
{
    return fold512_run(crc, NULL, p, len);
}

FOLD_TARGET static uint32_t crc_fold512_copy(uint32_t crc, uint8_t *out, const uint8_t *p,
                                             size_t len)
{
    return fold512_run(crc, out, p, len);
}

/* The same folding with 256-bit registers, for CPUs that have the carry-less multiply on them
 * but no AVX-512 (AMD Zen 3, Intel Alder Lake): eight 32-byte accumulators run FOLD_BLOCK bytes
 * apart, as the four 64-byte ones do above.  On an AMD EPYC host without AVX-512, where the CRC
 * was 13-15 % of a rank's time in osu_bibw between nodes, it made 22-23 GB/s over 8 and 64 KiB
 * against the instruction path's 17.7-19 (test/bench/crc-speed prints each way).  Running the
 * instruction's three lanes beside the folding, on other parts of the same run, added only
 * another 16 % there, for twice the code: not done. */
#define FOLD256_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq,sse4.2")))

FOLD256_TARGET static inline __m256i fold256(__m256i a, __m256i k, __m256i b)
{
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
                                             _mm256_clmulepi64_epi128(a, k, 0x11)),
                            b);
}

FOLD256_TARGET static inline __m256i fold256_const(int i)
{
    return _mm256_set_epi64x((long long)fold_k[i][1], (long long)fold_k[i][0],
                             (long long)fold_k[i][1], (long long)fold_k[i][0]);
}

FOLD256_TARGET static inline __m256i load256(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

FOLD256_TARGET static inline void store256(uint8_t *p, __m256i v)
{
    _mm256_storeu_si256((__m256i *)(void *)p, v);
}

/* fold512_run on 256-bit registers: crc continued over len >= FOLD_BLOCK bytes at p, copied
 * to out on the way if out is not NULL. */
FOLD256_TARGET static inline __attribute__((always_inline)) uint32_t
fold256_run(uint32_t crc, uint8_t *out, const uint8_t *p, size_t len)
{
    __m256i x[8];
    for (int i = 0; i < 8; i++) {
        x[i] = load256(p + 32 * i);
        if (out)
            store256(out + 32 * i, x[i]);
    }
    x[0] = _mm256_xor_si256(x[0], _mm256_set_epi64x(0, 0, 0, (long long)crc));
    p += FOLD_BLOCK;
    out = out ? out + FOLD_BLOCK : NULL;
    len -= FOLD_BLOCK;
    const __m256i kb = fold256_const(0);
    while (len >= FOLD_BLOCK) {
        for (int i = 0; i < 8; i++) {
            __m256i v = load256(p + 32 * i);
            if (out)
                store256(out + 32 * i, v);
            x[i] = fold256(x[i], kb, v);
        }
        p += FOLD_BLOCK;
        out = out ? out + FOLD_BLOCK : NULL;
        len -= FOLD_BLOCK;
    }
    /* each accumulator 32 bytes (256 bits, fold_k[3]) before the next */
    const __m256i k32 = fold256_const(3);
    __m256i y = x[0];
    for (int i = 1; i < 8; i++)
        y = fold256(y, k32, x[i]);
    for (; len >= 32; p += 32, len -= 32) {
        __m256i v = load256(p);
        if (out) {
            store256(out, v);
            out += 32;
        }
        y = fold256(y, k32, v);
    }
    __m128i r = fold128(_mm256_castsi256_si128(y), 4, _mm256_extracti128_si256(y, 1));
    _mm256_zeroupper(); /* as in fold512_run: the application's SSE code runs next */
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = __builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(r, 1));
    if (out)
        memcpy(out, p, len);
    return crc_hw((uint32_t)c, p, len);
}

FOLD256_TARGET static uint32_t crc_fold256(uint32_t crc, const uint8_t *p, size_t len)
{
    return fold256_run(crc, NULL, p, len);
}

FOLD256_TARGET static uint32_t crc_fold256_copy(uint32_t crc, uint8_t *out, const uint8_t *p,
                                                size_t len)
{
    return fold256_run(crc, out, p, len);
}

#endif

/* The best implementation this CPU has, decided once (racing callers decide alike) and
 * published after the tables it needs. */
static enum mcp_crc32c_impl best_impl(void)
{
    static int impl = -1;
    int use = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);
    if (use >= 0)
        return (enum mcp_crc32c_impl)use;
    if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
        crc_table_init(); /* also the lanes' shift tables */
    use = MCP_CRC32C_TABLE;
#ifdef CRC_HW
    fold_init();
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        int clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq");
        use = clmul && __builtin_cpu_supports("avx512f") ? MCP_CRC32C_FOLD512
              : clmul && __builtin_cpu_supports("avx2")  ? MCP_CRC32C_FOLD256
                                                         : MCP_CRC32C_INSN;
    }
#endif
    __atomic_store_n(&impl, use, __ATOMIC_RELEASE);
    return (enum mcp_crc32c_impl)use;
}

/* crc (not inverted) over len bytes by impl, which the CPU has; the folding ways fall back to
 * the instruction below FOLD_BLOCK bytes. */
static uint32_t crc_by(enum mcp_crc32c_impl impl, uint32_t crc, const uint8_t *p, size_t len)
{
#ifdef CRC_HW
    if (impl == MCP_CRC32C_FOLD512 && len >= FOLD_BLOCK)
        return crc_fold512(crc, p, len);
    if (impl == MCP_CRC32C_FOLD256 && len >= FOLD_BLOCK)
        return crc_fold256(crc, p, len);
    if (impl != MCP_CRC32C_TABLE)
        return crc_hw(crc, p, len);
#else
    (void)impl;
#endif
    return crc_soft(crc, p, len);
}

uint32_t mcp_crc32c(uint32_t crc, const void *data, size_t len)
{
    return ~crc_by(best_impl(), ~crc, data, len);
}

int mcp_crc32c_with(enum mcp_crc32c_impl impl, uint32_t *crc, const void *data, size_t len)
{
    if (impl > best_impl())
        return 0;
    *crc = ~crc_by(impl, ~*crc, data, len);
    return 1;
}

/* crc (not inverted) over the len bytes at src by impl, copying them to dst on the way. */
static uint32_t crc_copy_by(enum mcp_crc32c_impl impl, uint32_t crc, uint8_t *dst,
                            const uint8_t *src, size_t len)
{
#ifdef CRC_HW
    if (impl == MCP_CRC32C_FOLD512 && len >= FOLD_BLOCK)
        return crc_fold512_copy(crc, dst, src, len);
    if (impl == MCP_CRC32C_FOLD256 && len >= FOLD_BLOCK)
        return crc_fold256_copy(crc, dst, src, len);
#endif
    memcpy(dst, src, len);
    return crc_by(impl, crc, dst, len);
}

uint32_t mcp_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    return ~crc_copy_by(best_impl(), ~crc, dst, src, len);
}

int mcp_crc32c_copy_with(enum mcp_crc32c_impl impl, uint32_t *crc, void *dst, const void *src,
                         size_t len)
{
    if (impl > best_impl())
        return 0;
    *crc = ~crc_copy_by(impl, ~*crc, dst, src, len);
    return 1;
}
