/*
 * test_rdp_malformed.c — malformed, damaged and misaddressed frames injected into a NIC that
 * carries verified traffic at the same time.
 *
 * Node 0 (the DUT) and node 1 stream numbered messages to each other (verified exactly once,
 * in order, intact).  Into node 0's receive queue the test injects, between passes, frames of
 * every kind the checks of mcp/PROTOCOL.md must refuse, and expects each to be counted in the
 * right counter — malformed, crc_errors, wrong_dest or stale — exactly, with no crash and no
 * effect on the traffic.  Then a bounded random run: 200,000 random frames (seeded) and
 * 60,000 mutations of a live, otherwise acceptable DATA frame (bit flips, truncations,
 * extensions, byte changes, not resealed), each classified by an independent oracle (its own
 * CRC-32C and header rules) and counted.
 *
 * Node ids 2 and 3 exist (max_nodes 4) but have no NIC; 4 and above are out of range.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rdp_fixture.h"

#define SLOT     256u
#define MAXNODES 4

/* ---- an independent oracle --------------------------------------------------------------------
 */

/* CRC-32C, bit by bit (reflected polynomial 0x82F63B78, initial and final inversion). */
static uint32_t crc32c_bits(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* The CRC of a frame (wire version 2): the payload, then the header with its crc field (bytes
 * 24..27) taken as zero. */
static uint32_t frame_crc(const uint8_t *f, uint32_t len)
{
    static const uint8_t zero[4];
    uint32_t c = crc32c_bits(0, f + 32, len - 32);
    c = crc32c_bits(c, f, 24);
    c = crc32c_bits(c, zero, 4);
    return crc32c_bits(c, f + 28, 4);
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

enum cls { C_MALFORMED, C_CRC, C_WRONG_DEST, C_PROTO, C_N };
static const char *const cls_name[C_N] = {"malformed", "crc_errors", "wrong_dest", "protocol"};

/* What node 0 must make of a frame of len bytes (PROTOCOL.md "Checks on every frame"). */
static enum cls classify(const uint8_t *f, uint32_t len)
{
    if (len < 32 || le16(f) != 0x5350 || f[2] != 2 || f[3] < 1 || f[3] > 6)
        return C_MALFORMED;
    uint32_t plen = le16(f + 20);
    if (plen != len - 32 || plen > SLOT)
        return C_MALFORMED;
    /* only DATA carries a payload (mcp_wire_check; PROTOCOL.md does not spell it out) */
    if (f[3] != MCP_FT_DATA && plen != 0)
        return C_MALFORMED;
    if (frame_crc(f, len) != le32(f + 24))
        return C_CRC;
    uint16_t src = le16(f + 4), dst = le16(f + 6);
    if (dst != 0 || src >= MAXNODES || src == 0)
        return C_WRONG_DEST;
    return C_PROTO;
}

/* ---- set-up ------------------------------------------------------------------------------------
 */

struct mal {
    struct cluster cl;
    uint64_t rng;
    uint64_t injected[C_N];
    uint64_t proto_syn; /* well-formed SYNs from absent nodes (accepted or stale) */
    struct mcp_counters before;
    uint32_t cid01, cid10; /* the live connection's ids at node 0 and node 1 */
};

static uint64_t rnd(struct mal *m)
{
    return mcp_rand64(&m->rng);
}

static int mal_init(struct mal *m, uint64_t seed, uint32_t per_dir)
{
    struct mcp_config c;
    mcp_config_default(&c, 0);
    c.max_nodes = MAXNODES;
    c.contexts = 1;
    c.send_slots = 64;
    c.recv_slots = 64;
    c.hostq_slots = 64;
    c.rx_batch = 64;
    c.slot_size = SLOT;
    c.rto_us = 200;
    c.rto_max_us = 3200;
    c.ack_delay_us = 10;
    c.nack_interval_us = 50;
    c.nobuf_backoff_us = 20;
    c.peer_timeout_ms = 60000;
    c.seed = 77;
    memset(m, 0, sizeof(*m));
    m->rng = th_seed(seed) | 1;
    if (!cluster_init(&m->cl, 2, &c, NULL, 1000, 200))
        return 0;
    cluster_target(&m->cl, 0, 1, per_dir);
    cluster_target(&m->cl, 1, 0, per_dir);
    /* let the connection come up both ways before anything is injected */
    for (int r = 0; r < 50; r++)
        cluster_round(&m->cl);
    m->before = m->cl.node[0].img->counters;
    m->cid01 = mcp_conn(m->cl.node[0].img, 1)->local_cid;
    m->cid10 = mcp_conn(m->cl.node[1].img, 0)->local_cid;
    return CHECK(mcp_conn(m->cl.node[0].img, 1)->have_peer &&
                     mcp_conn(m->cl.node[0].img, 1)->confirmed,
                 "the connection 0-1 did not come up");
}

static void inject(struct mal *m, const uint8_t *f, uint32_t len)
{
    enum cls k = classify(f, len);
    int rc = mcp_sim_inject(m->cl.net, 0, f, len);
    if (!CHECK(rc == 0, "inject: %d", rc))
        return;
    m->injected[k]++;
    if (k == C_PROTO && f[3] == MCP_FT_SYN)
        m->proto_syn++;
}

/* A random connection id that is none of the live ones. */
static uint32_t foreign_cid(struct mal *m)
{
    struct mcp_conn *c0 = mcp_conn(m->cl.node[0].img, 1);
    for (;;) {
        uint32_t cid = (uint32_t)rnd(m);
        if (cid && cid != c0->local_cid && cid != c0->peer_cid)
            return cid;
    }
}

/* A sealed frame with the given header fields and plen random payload bytes. */
static uint32_t mk(struct mal *m, uint8_t *b, uint8_t type, uint16_t src, uint16_t dst,
                   uint32_t scid, uint32_t dcid, uint16_t plen)
{
    struct mcp_wire_hdr h = {.magic = MCP_WIRE_MAGIC,
                             .version = MCP_WIRE_VERSION,
                             .type = type,
                             .src_node = src,
                             .dst_node = dst,
                             .src_cid = scid,
                             .dst_cid = dcid,
                             .seq = (uint8_t)rnd(m),
                             .ack = (uint8_t)rnd(m),
                             .flags = (uint8_t)(rnd(m) & 3),
                             .len = plen};
    mcp_wire_put(b, &h);
    for (uint32_t i = 0; i < plen; i++)
        b[MCP_WIRE_HDR + i] = (uint8_t)rnd(m);
    mcp_wire_seal(b, MCP_WIRE_HDR + plen);
    return MCP_WIRE_HDR + plen;
}

/* Run rounds until node 0 has taken everything injected (and the traffic goes on). */
static void settle(struct mal *m)
{
    for (int r = 0; r < 100; r++)
        cluster_round(&m->cl);
}

/* The DUT's refusal counters moved exactly as the oracle predicted. */
static int counted(const char *file, int line, struct mal *m)
{
    const struct mcp_counters *a = &m->before, *b = &m->cl.node[0].img->counters;
    int ok = 1;
    ok &= th_check(b->malformed - a->malformed == m->injected[C_MALFORMED], file, line, "malformed",
                   "counted %llu, injected %llu", (unsigned long long)(b->malformed - a->malformed),
                   (unsigned long long)m->injected[C_MALFORMED]);
    ok &=
        th_check(b->crc_errors - a->crc_errors == m->injected[C_CRC], file, line, "crc_errors",
                 "counted %llu, injected %llu", (unsigned long long)(b->crc_errors - a->crc_errors),
                 (unsigned long long)m->injected[C_CRC]);
    ok &= th_check(b->wrong_dest - a->wrong_dest == m->injected[C_WRONG_DEST], file, line,
                   "wrong_dest", "counted %llu, injected %llu",
                   (unsigned long long)(b->wrong_dest - a->wrong_dest),
                   (unsigned long long)m->injected[C_WRONG_DEST]);
    /* well-formed frames of unknown connections: stale, except SYNs, which may open one */
    uint64_t stale = b->stale - a->stale, proto = m->injected[C_PROTO];
    ok &=
        th_check(stale >= proto - m->proto_syn && stale <= proto, file, line, "stale",
                 "counted %llu for %llu well-formed frames (%llu SYNs)", (unsigned long long)stale,
                 (unsigned long long)proto, (unsigned long long)m->proto_syn);
    return ok;
}
#define COUNTED(m) counted(__FILE__, __LINE__, (m))

/* Finish the traffic: every message of both directions verified. */
static int traffic_ok(const char *file, int line, struct mal *m)
{
    int done = cluster_run(&m->cl, 2000000);
    int ok = th_check(done, file, line, "traffic", "not finished (%llu delivered)",
                      (unsigned long long)m->cl.delivered);
    ok &= th_check(m->cl.bad == 0, file, line, "traffic", "%llu wrong deliveries, first: %s",
                   (unsigned long long)m->cl.bad, m->cl.why);
    uint64_t want = (uint64_t)m->cl.target[0][1] + m->cl.target[1][0];
    ok &= th_check(m->cl.delivered == want, file, line, "traffic", "%llu of %llu delivered",
                   (unsigned long long)m->cl.delivered, (unsigned long long)want);
    /* the connection 0-1 was never reset (SYNs from the absent nodes 2 and 3 may reset
     * theirs), and no send failed */
    struct mcp_counters *c0 = &m->cl.node[0].img->counters, *c1 = &m->cl.node[1].img->counters;
    ok &= th_check(mcp_conn(m->cl.node[0].img, 1)->local_cid == m->cid01 &&
                       mcp_conn(m->cl.node[1].img, 0)->local_cid == m->cid10,
                   file, line, "traffic", "the connection 0-1 was re-created");
    ok &= th_check(c0->send_errors == 0 && c1->send_errors == 0 && c1->peer_resets == 0, file, line,
                   "traffic", "send_errors %llu/%llu, node 1 peer_resets %llu",
                   (unsigned long long)c0->send_errors, (unsigned long long)c1->send_errors,
                   (unsigned long long)c1->peer_resets);
    return ok;
}
#define TRAFFIC_OK(m) traffic_ok(__FILE__, __LINE__, (m))

/* ---- the oracle agrees with the firmware's CRC ---------------------------------------------- */

TEST(crc_is_standard_crc32c)
{
    static const uint8_t check[] = "123456789";
    CHECK_EQ_U64(crc32c_bits(0, check, 9), 0xe3069283u); /* the CRC-32C check value */
    uint64_t rng = th_seed(11) | 1;
    uint8_t b[MAXF];
    for (int i = 0; i < 1000; i++) {
        uint32_t len = MCP_WIRE_HDR + (uint32_t)(mcp_rand64(&rng) % (SLOT + 1));
        for (uint32_t k = 0; k < len; k++)
            b[k] = (uint8_t)mcp_rand64(&rng);
        if (!CHECK(mcp_wire_crc(b, len) == frame_crc(b, len), "frame of %u bytes", len))
            break;
        mcp_wire_seal(b, len);
        if (!CHECK(le32(b + 24) == frame_crc(b, len), "sealed frame of %u bytes", len))
            break;
    }
}

/* ---- each kind of bad frame ------------------------------------------------------------------ */

TEST(malformed_kinds_counted_traffic_unaffected)
{
    struct mal m;
    uint8_t b[2048];
    if (!mal_init(&m, 21, 20000))
        goto out;
    struct mcp_conn *c0 = mcp_conn(m.cl.node[0].img, 1);
    for (int rep = 0; rep < 200; rep++) {
        uint32_t len;
        /* truncated header: 0..31 bytes */
        len = (uint32_t)(rnd(&m) % 32);
        mk(&m, b, MCP_FT_DATA, 1, 0, c0->peer_cid, c0->local_cid, 0);
        inject(&m, b, len);
        /* wrong magic, wrong version (CRC valid) */
        len = mk(&m, b, MCP_FT_ACK, 1, 0, foreign_cid(&m), foreign_cid(&m), 0);
        b[0] ^= 0x01;
        mcp_wire_seal(b, len);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_ACK, 1, 0, foreign_cid(&m), foreign_cid(&m), 0);
        b[2] = (uint8_t)(2 + rnd(&m) % 250);
        mcp_wire_seal(b, len);
        inject(&m, b, len);
        /* unknown types: 0, 7, 255 */
        static const uint8_t bad_type[] = {0, MCP_FT_MAX + 1, 255};
        len = mk(&m, b, bad_type[rep % 3], 1, 0, foreign_cid(&m), foreign_cid(&m), 0);
        inject(&m, b, len);
        /* len field beyond the slot, frame consistent with it (fits the receive buffer) */
        len = mk(&m, b, MCP_FT_DATA, 1, 0, foreign_cid(&m), foreign_cid(&m), SLOT + 10);
        inject(&m, b, len);
        /* a frame longer than the receive buffer: truncated by the link */
        len = mk(&m, b, MCP_FT_DATA, 1, 0, foreign_cid(&m), foreign_cid(&m), SLOT + 400);
        inject(&m, b, len);
        /* len field disagrees with the frame: shorter and longer */
        len = mk(&m, b, MCP_FT_DATA, 1, 0, c0->peer_cid, c0->local_cid, 40);
        inject(&m, b, len - 10);
        b[MCP_WIRE_HDR + 40] = 0;
        inject(&m, b, len + 1);
        /* a control frame with a payload */
        len = mk(&m, b, MCP_FT_NACK, 1, 0, c0->peer_cid, c0->local_cid, 8);
        inject(&m, b, len);
        /* bad CRC on an otherwise acceptable DATA of the live connection */
        len = mk(&m, b, MCP_FT_DATA, 1, 0, c0->peer_cid, c0->local_cid, 40);
        b[16] = c0->rcv_nxt;
        mcp_wire_seal(b, len);
        b[MCP_WIRE_HDR + rnd(&m) % 40] ^= (uint8_t)(1u << (rnd(&m) % 8));
        inject(&m, b, len);
        /* addressed to another node (1, 3), from ourselves, from ids out of range */
        static const uint16_t wrong_dst[] = {1, 3, 0xffff};
        len = mk(&m, b, MCP_FT_DATA, 1, wrong_dst[rep % 3], c0->peer_cid, c0->local_cid, 40);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_SYN, 0, 0, foreign_cid(&m), 0, 0);
        inject(&m, b, len);
        static const uint16_t bad_src[] = {MAXNODES, 9, 0xffff};
        len = mk(&m, b, MCP_FT_SYN, bad_src[rep % 3], 0, foreign_cid(&m), 0, 0);
        inject(&m, b, len);
        /* well-formed but of no connection we know: stale (and an RST for DATA) */
        len = mk(&m, b, MCP_FT_DATA, 1, 0, foreign_cid(&m), foreign_cid(&m), 40);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_DATA, 1, 0, foreign_cid(&m), c0->local_cid, 40);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_ACK, 1, 0, c0->peer_cid, foreign_cid(&m), 0);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_NACK, 1, 0, foreign_cid(&m), c0->local_cid, 0);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_RST, 1, 0, foreign_cid(&m), foreign_cid(&m), 0);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_SYNACK, 1, 0, foreign_cid(&m), foreign_cid(&m), 0);
        inject(&m, b, len);
        len = mk(&m, b, MCP_FT_DATA, 2, 0, foreign_cid(&m), foreign_cid(&m), 40);
        inject(&m, b, len);
        cluster_round(&m.cl);
    }
    settle(&m);
    COUNTED(&m);
    CHECK_EQ_U64(m.injected[C_MALFORMED], 200 * 9);
    CHECK_EQ_U64(m.injected[C_CRC], 200);
    CHECK_EQ_U64(m.injected[C_WRONG_DEST], 200 * 3);
    CHECK_EQ_U64(m.injected[C_PROTO], 200 * 7);
    CHECK_EQ_U64(m.proto_syn, 0); /* so stale is exact */
    CHECK_EQ_U64(m.cl.node[0].img->counters.peer_resets, 0);
    CHECK_EQ_U64(m.cl.node[0].img->counters.stale - m.before.stale, 200 * 7);
    TRAFFIC_OK(&m);
out:
    cluster_fini(&m.cl);
}

/* ---- bounded random runs ------------------------------------------------------------------------
 */

TEST(random_frames_200k)
{
    struct mal m;
    uint8_t b[2048];
    const unsigned total = 200000, per_round = 40;
    if (!mal_init(&m, 22, 60000))
        goto out;
    for (unsigned i = 0; i < total; i++) {
        uint32_t len;
        uint64_t r = rnd(&m);
        switch (r % 4) {
        case 0: /* pure noise, any length up to past the link's buffer */
            len = (uint32_t)(rnd(&m) % 700);
            for (uint32_t k = 0; k < len; k++)
                b[k] = (uint8_t)rnd(&m);
            break;
        case 1: /* a plausible header, random everything else (CRC almost surely wrong) */
            len = MCP_WIRE_HDR + (uint32_t)(rnd(&m) % (SLOT + 1));
            for (uint32_t k = 0; k < len; k++)
                b[k] = (uint8_t)rnd(&m);
            mcp_put_le16(b, MCP_WIRE_MAGIC);
            b[2] = MCP_WIRE_VERSION;
            b[3] = (uint8_t)(rnd(&m) % 8);
            mcp_put_le16(b + 20, (uint16_t)(rnd(&m) % 2 ? len - MCP_WIRE_HDR : rnd(&m)));
            break;
        default: { /* sealed, with random ids: never from node 1 to node 0 (that could be a
                    * legitimate SYN resetting the live connection) */
            static const uint16_t srcs[] = {0, 2, 3, 4, 1000};
            uint16_t src = srcs[rnd(&m) % 5], dst = (uint16_t)(rnd(&m) % 3 ? 0 : rnd(&m) % 6);
            uint8_t type = (uint8_t)(1 + rnd(&m) % 6);
            uint16_t plen = type == MCP_FT_DATA ? (uint16_t)(rnd(&m) % (SLOT + 1)) : 0;
            uint32_t dcid = rnd(&m) % 4 ? foreign_cid(&m) : 0;
            len = mk(&m, b, type, src, dst, foreign_cid(&m), dcid, plen);
            break;
        }
        }
        inject(&m, b, len);
        if (i % per_round == per_round - 1)
            cluster_round(&m.cl);
    }
    settle(&m);
    COUNTED(&m);
    for (int k = 0; k < C_N; k++)
        printf("# random: %s %llu\n", cls_name[k], (unsigned long long)m.injected[k]);
    for (int k = 0; k < C_N; k++)
        CHECK_GT_U64(m.injected[k], 1000); /* every class was exercised */
    TRAFFIC_OK(&m);
out:
    cluster_fini(&m.cl);
}

TEST(mutated_live_frames_60k)
{
    struct mal m;
    uint8_t base[MAXF], b[2048];
    const unsigned total = 60000, per_round = 30;
    unsigned valid = 0;
    if (!mal_init(&m, 23, 40000))
        goto out;
    for (unsigned i = 0; i < total; i++) {
        /* the DATA node 0 expects next from node 1, right now: acceptable as it is */
        struct mcp_conn *c0 = mcp_conn(m.cl.node[0].img, 1);
        uint32_t blen = mk(&m, base, MCP_FT_DATA, 1, 0, c0->peer_cid, c0->local_cid,
                           (uint16_t)(MSG_HDR + rnd(&m) % (SLOT - MSG_HDR)));
        base[16] = c0->rcv_nxt;
        base[18] = 0;
        mcp_wire_seal(base, blen);
        memcpy(b, base, blen);
        uint32_t len = blen;
        switch (rnd(&m) % 5) {
        case 0: /* 1..5 bit flips anywhere */
        case 1: {
            unsigned flips = 1 + (unsigned)(rnd(&m) % 5);
            for (unsigned k = 0; k < flips; k++) {
                uint32_t bit = (uint32_t)(rnd(&m) % (blen * 8));
                b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            }
            break;
        }
        case 2: /* truncated */
            len = (uint32_t)(rnd(&m) % blen);
            break;
        case 3: /* extended by random bytes */
            len = blen + 1 + (uint32_t)(rnd(&m) % 64);
            for (uint32_t k = blen; k < len; k++)
                b[k] = (uint8_t)rnd(&m);
            break;
        default: /* a few bytes replaced */
            for (unsigned k = 0, n = 1 + (unsigned)(rnd(&m) % 4); k < n; k++)
                b[rnd(&m) % blen] = (uint8_t)rnd(&m);
            break;
        }
        if (len == blen && !memcmp(b, base, blen))
            b[rnd(&m) % blen] ^= 0x80; /* a mutation must change something */
        if (classify(b, len) == C_PROTO) {
            valid++; /* would be accepted: with 2^-32 odds, skip it rather than corrupt */
            continue;
        }
        inject(&m, b, len);
        if (i % per_round == per_round - 1)
            cluster_round(&m.cl);
    }
    settle(&m);
    COUNTED(&m);
    for (int k = 0; k < C_N; k++)
        printf("# mutations: %s %llu\n", cls_name[k], (unsigned long long)m.injected[k]);
    CHECK_EQ_U64(valid, 0);
    CHECK_GT_U64(m.injected[C_CRC], 10000);
    CHECK_GT_U64(m.injected[C_MALFORMED], 10000);
    TRAFFIC_OK(&m);
out:
    cluster_fini(&m.cl);
}

TEST_MAIN()
