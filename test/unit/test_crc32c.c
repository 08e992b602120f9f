/* test_crc32c: the frame CRC (mcp/crc32c.c) against a bitwise CRC-32C, for every length up to
 * a few lane chunks, random lengths and offsets up to the largest frame, and split updates, by
 * the best way the CPU has and by each way on its own (the three-lane instruction path joins
 * lanes with shift tables, the folding path multiplies by powers of x; any slip shows here);
 * the CRC taken in a copy (mcp_crc32c_copy) likewise, and the copy itself. */
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "harness.h"

static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = ~0u;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

static uint8_t buf[65600];

static void fill(uint64_t seed)
{
    for (size_t i = 0; i < sizeof buf; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(seed >> 56);
    }
}

TEST(known_vector)
{
    /* the check value of CRC-32C: "123456789" -> 0xe3069283 */
    CHECK_EQ_U64(mcp_crc32c(0, "123456789", 9), 0xe3069283u);
    CHECK_EQ_U64(mcp_crc32c(0, "", 0), 0);
}

TEST(every_length_to_2400)
{
    fill(th_seed(5));
    for (size_t n = 0; n <= 2400; n++) {
        uint32_t a = mcp_crc32c(0, buf + (n % 7), n), b = crc_bitwise(buf + (n % 7), n);
        if (!CHECK(a == b, "length %zu: %08x, expected %08x", n, a, b))
            return;
    }
}

TEST(random_lengths_offsets_and_splits)
{
    uint64_t s = th_seed(6);
    fill(s);
    for (int t = 0; t < 400; t++) {
        s = s * 6364136223846793005ull + 1;
        size_t off = (s >> 33) % 64, n = (s >> 13) % (sizeof buf - 64);
        size_t k = n ? (s >> 40) % n : 0;
        uint32_t want = crc_bitwise(buf + off, n);
        uint32_t whole = mcp_crc32c(0, buf + off, n);
        uint32_t split = mcp_crc32c(mcp_crc32c(0, buf + off, k), buf + off + k, n - k);
        if (!CHECK(whole == want && split == want,
                   "off %zu len %zu split %zu: %08x %08x, want %08x", off, n, k, whole, split,
                   want))
            return;
    }
}

static const char *const impl_name[] = {"table", "crc32 instruction", "256-bit folding",
                                        "512-bit folding"};

/* Every length to 2400 and random runs to 64 KiB, with random starting states, by impl. */
static void check_impl(enum mcp_crc32c_impl impl, uint64_t s)
{
    uint32_t probe = 0;
    if (!mcp_crc32c_with(impl, &probe, buf, 1))
        SKIP("this CPU has no %s path", impl_name[impl]);
    fill(s);
    for (size_t n = 0; n <= 2400; n++) {
        uint32_t a = 0;
        mcp_crc32c_with(impl, &a, buf + (n % 11), n);
        uint32_t b = crc_bitwise(buf + (n % 11), n);
        if (!CHECK(a == b, "%s, length %zu: %08x, expected %08x", impl_name[impl], n, a, b))
            return;
    }
    for (int t = 0; t < 200; t++) {
        s = s * 6364136223846793005ull + 1;
        size_t off = (s >> 33) % 64, n = (s >> 13) % (sizeof buf - 64);
        size_t k = n ? (s >> 40) % n : 0;
        uint32_t want = crc_bitwise(buf + off, n), first = crc_bitwise(buf + off, k);
        uint32_t split = first;
        mcp_crc32c_with(impl, &split, buf + off + k, n - k);
        if (!CHECK(split == want, "%s, off %zu len %zu from state at %zu: %08x, want %08x",
                   impl_name[impl], off, n, k, split, want))
            return;
    }
}

/*
 * mcp_crc32c_copy by impl: the CRC as check_impl wants it, the copy exact, and not a byte
 * written before or after it; every length to 1100 (the folding's 256-byte blocks, its 32- and
 * 64-byte steps and tails), then random runs to 64 KiB, source and destination misaligned
 * apart, from random states.
 */
static void check_copy(enum mcp_crc32c_impl impl, uint64_t s)
{
    static uint8_t out[65600 + 128];
    uint32_t probe = 0;
    if (!mcp_crc32c_copy_with(impl, &probe, out, buf, 1))
        SKIP("this CPU has no %s path", impl_name[impl]);
    fill(s);
    for (int t = 0; t < 1300; t++) {
        s = s * 6364136223846793005ull + 1;
        size_t n = t <= 1100 ? (size_t)t : (s >> 13) % (sizeof buf - 64);
        size_t soff = (s >> 33) % 64, doff = 64 + (s >> 45) % 64;
        uint32_t start = (uint32_t)(s >> 7), want = start, c = start;
        mcp_crc32c_with(MCP_CRC32C_TABLE, &want, buf + soff, n);
        memset(out, 0xa5, doff + n + 64);
        mcp_crc32c_copy_with(impl, &c, out + doff, buf + soff, n);
        int guards = 1;
        for (size_t i = 0; i < 64; i++)
            guards &= out[doff - 1 - i] == 0xa5 && out[doff + n + i] == 0xa5;
        if (!CHECK(c == want && memcmp(out + doff, buf + soff, n) == 0 && guards,
                   "%s copy, length %zu (src +%zu, dst +%zu): crc %08x want %08x, copy %s, "
                   "%s",
                   impl_name[impl], n, soff, doff, c, want,
                   memcmp(out + doff, buf + soff, n) ? "differs" : "exact",
                   guards ? "nothing else written" : "bytes around it written"))
            return;
    }
}

TEST(copy_by_every_way)
{
    for (int impl = MCP_CRC32C_TABLE; impl <= MCP_CRC32C_FOLD512; impl++) {
        uint32_t probe = 0;
        static uint8_t one[1];
        if (mcp_crc32c_copy_with((enum mcp_crc32c_impl)impl, &probe, one, buf, 1))
            check_copy((enum mcp_crc32c_impl)impl, th_seed(12) + (uint64_t)impl);
    }
    uint32_t best = 0;
    static uint8_t out[4096];
    fill(th_seed(13));
    CHECK_EQ_U64(mcp_crc32c_copy(0, out, buf, 4096), crc_bitwise(buf, 4096));
    CHECK_EQ_MEM(out, buf, 4096);
    CHECK(mcp_crc32c_copy_with(MCP_CRC32C_TABLE, &best, out, buf, 0) && best == 0,
          "an empty copy leaves the CRC");
}

TEST(table_path)
{
    check_impl(MCP_CRC32C_TABLE, th_seed(7));
}

TEST(instruction_path)
{
    check_impl(MCP_CRC32C_INSN, th_seed(8));
}

TEST(folding_path_256)
{
    check_impl(MCP_CRC32C_FOLD256, th_seed(11));
}

TEST(folding_path_512)
{
    check_impl(MCP_CRC32C_FOLD512, th_seed(9));
}

#if defined(__x86_64__)
#include <cpuid.h>

/* XINUSE (XGETBV 1): which parts of the register state are not in their initial state. */
static int xinuse(uint64_t *u)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2)))
        return 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    *u = lo | (uint64_t)hi << 32;
    return 1;
}

/* Left in use, the upper halves of the vector registers made the SSE code that ran next (the
 * application's) run at a fraction of its speed: the SCOPE relax kernel took 3.5 times as long
 * between two nodes. */
static void check_upper_halves_clear(enum mcp_crc32c_impl impl)
{
    uint32_t c = 0;
    uint64_t u;
    fill(th_seed(10));
    if (!mcp_crc32c_with(impl, &c, buf, 4096))
        SKIP("this CPU has no %s path", impl_name[impl]);
    if (!xinuse(&u))
        SKIP("this CPU does not report XINUSE");
    mcp_crc32c_with(impl, &c, buf, 4096);
    xinuse(&u);
    CHECK((u & ((1u << 2) | (1u << 6))) == 0,
          "XINUSE %#llx after the %s CRC: the upper halves (bits 2, 6) are still in use",
          (unsigned long long)u, impl_name[impl]);
    static uint8_t out[4096];
    mcp_crc32c_copy_with(impl, &c, out, buf, 4096);
    xinuse(&u);
    CHECK((u & ((1u << 2) | (1u << 6))) == 0,
          "XINUSE %#llx after the %s copy: the upper halves (bits 2, 6) are still in use",
          (unsigned long long)u, impl_name[impl]);
}

TEST(folding_256_leaves_the_upper_vector_halves_clear)
{
    check_upper_halves_clear(MCP_CRC32C_FOLD256);
}

TEST(folding_512_leaves_the_upper_vector_halves_clear)
{
    check_upper_halves_clear(MCP_CRC32C_FOLD512);
}
#endif

TEST_MAIN()
