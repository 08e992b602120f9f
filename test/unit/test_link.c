/*
 * test_link.c — the links under the firmware: fault generator, nodes files, the simulated
 * network, the udp link on loopback and the eth link on a veth pair inside a private network
 * namespace (root only; never touches the host's interfaces).
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>

#include "link.h"
#include "link_sim.h"
#include "mcp_wire.h"
#include "crc32c.h"
#include "pkt_ring.h"
#include "udp_eth.h"
#include "udp_seg.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* A test frame: byte 3 = type, bytes 4..7 = number, the rest a pattern derived from both. */
static void make_frame(uint8_t *f, uint32_t len, uint8_t type, uint32_t no)
{
    for (uint32_t i = 0; i < len; i++)
        f[i] = (uint8_t)(i * 7 + no * 13 + 1);
    if (len > 3)
        f[3] = type;
    if (len >= 8)
        mcp_put_le32(f + 4, no);
}

static uint32_t frame_no(const uint8_t *f)
{
    return mcp_get_le32(f + 4);
}

static int frame_ok(const uint8_t *f, uint32_t len, uint8_t type, uint32_t no)
{
    uint8_t want[70000];
    make_frame(want, len, type, no);
    return memcmp(want, f, len) == 0;
}

/* Whether fcs is what lanai.h's rx_fcs says for the len bytes at f, which the link copied from
 * its ring or a staging buffer (every frame of LANAI_FCS_SKIP bytes or more has one then). */
static int fcs_right(const uint8_t *f, uint32_t len, uint64_t fcs)
{
    if (len < LANAI_FCS_SKIP)
        return fcs == 0;
    return fcs == (LANAI_FCS_VALID | mcp_crc32c(0, f + LANAI_FCS_SKIP, len - LANAI_FCS_SKIP));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* ---- fault generator ---------------------------------------------------------------------- */

TEST(fault_rand_deterministic)
{
    uint64_t a = 42, b = 42, c = 43, z = 0;
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = mcp_rand64(&a), y = mcp_rand64(&b), w = mcp_rand64(&c);
        same &= x == y;
        differ |= x != w;
    }
    CHECK(same, "one seed must give one stream");
    CHECK(differ, "two seeds gave the same stream");
    uint64_t r1 = mcp_rand64(&z), r2 = mcp_rand64(&z);
    CHECK(z != 0 && r1 != r2, "a zero state must not get stuck");

    /* the bits are roughly balanced */
    uint64_t s = 7, ones = 0;
    for (int i = 0; i < 10000; i++)
        ones += (uint64_t)__builtin_popcountll(mcp_rand64(&s));
    CHECK(ones > 310000 && ones < 330000, "%" PRIu64 " one bits in 640000", ones);
}

TEST(fault_rates)
{
    uint64_t seed = th_seed(1);
    struct mcp_fault_cfg cfg = {0};
    cfg.loss = 0.10;
    cfg.dup = 0.05;
    cfg.corrupt = 0.02;
    cfg.reorder = 0.03;
    cfg.reorder_max = 4;
    cfg.seed = seed;
    struct mcp_fault f;
    mcp_fault_init(&f, &cfg);

    const unsigned n = 200000;
    unsigned drop = 0, dup = 0, cor = 0, hold = 0, hist[6] = {0};
    int bad = 0;
    for (unsigned i = 0; i < n; i++) {
        struct mcp_fault_verdict v;
        mcp_fault_decide(&f, MCP_FT_DATA, 100, &v);
        drop += v.drop;
        dup += v.dup;
        cor += v.corrupt;
        hold += v.hold;
        if (v.corrupt && (v.corrupt_at >= 100 || v.corrupt_mask == 0))
            bad = 1;
        if (v.hold) {
            if (v.hold_frames < 1 || v.hold_frames > 4)
                bad = 1;
            else
                hist[v.hold_frames]++;
        }
        if (v.drop && (v.dup || v.corrupt || v.hold))
            bad = 1;
    }
    CHECK(!bad, "a verdict out of bounds (corrupt_at, mask, hold_frames or drop+more)");
    /* expected counts; tolerance 5 standard deviations */
    double kept = n * 0.9;
    CHECK(drop > n * 0.10 - 670 && drop < n * 0.10 + 670, "drop %u", drop);
    CHECK(dup > kept * 0.05 - 460 && dup < kept * 0.05 + 460, "dup %u", dup);
    CHECK(cor > kept * 0.02 - 300 && cor < kept * 0.02 + 300, "corrupt %u", cor);
    CHECK(hold > kept * 0.03 - 360 && hold < kept * 0.03 + 360, "hold %u", hold);
    for (int h = 1; h <= 4; h++)
        CHECK(hist[h] > hold / 4 - 250 && hist[h] < hold / 4 + 250, "hold_frames=%d: %u of %u", h,
              hist[h], hold);
    CHECK_EQ_U64(f.dropped, drop);
    CHECK_EQ_U64(f.duplicated, dup);
    CHECK_EQ_U64(f.corrupted, cor);
    CHECK_EQ_U64(f.held, hold);
    CHECK_EQ_U64(f.frame_no, n);
}

TEST(fault_verdicts_repeat)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.loss = 0.2;
    cfg.dup = 0.2;
    cfg.corrupt = 0.2;
    cfg.reorder = 0.2;
    cfg.reorder_max = 8;
    cfg.seed = 99;
    struct mcp_fault a, b, c;
    mcp_fault_init(&a, &cfg);
    mcp_fault_init(&b, &cfg);
    cfg.seed = 100;
    mcp_fault_init(&c, &cfg);
    int same = 1, differ = 0;
    for (int i = 0; i < 5000; i++) {
        struct mcp_fault_verdict va, vb, vc;
        mcp_fault_decide(&a, (uint8_t)(i % 6 + 1), 64, &va);
        mcp_fault_decide(&b, (uint8_t)(i % 6 + 1), 64, &vb);
        mcp_fault_decide(&c, (uint8_t)(i % 6 + 1), 64, &vc);
        same &= memcmp(&va, &vb, sizeof va) == 0;
        differ |= memcmp(&va, &vc, sizeof va) != 0;
    }
    CHECK(same, "one seed and one frame sequence must give the same verdicts");
    CHECK(differ, "seeds 99 and 100 gave the same verdicts");
}

TEST(fault_drop_list)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.ndrops = 3;
    cfg.drops[0] = 0;
    cfg.drops[1] = 5;
    cfg.drops[2] = 7;
    CHECK(mcp_fault_active(&cfg), "a drop list is a fault");
    struct mcp_fault f;
    mcp_fault_init(&f, &cfg);
    for (uint64_t i = 0; i < 20; i++) {
        struct mcp_fault_verdict v;
        mcp_fault_decide(&f, MCP_FT_ACK, 32, &v);
        int want = i == 0 || i == 5 || i == 7;
        CHECK(v.drop == want, "frame %" PRIu64 ": drop=%d, want %d", i, v.drop, want);
    }
    CHECK_EQ_U64(f.dropped, 3);
}

TEST(fault_loss_types)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.loss = 1.0;
    cfg.loss_types = 1u << MCP_FT_DATA;
    struct mcp_fault f;
    mcp_fault_init(&f, &cfg);
    unsigned lost[MCP_FT_MAX + 1] = {0};
    for (int i = 0; i < 600; i++) {
        uint8_t t = (uint8_t)(i % MCP_FT_MAX + 1);
        struct mcp_fault_verdict v;
        mcp_fault_decide(&f, t, 40, &v);
        lost[t] += v.drop;
    }
    for (int t = 1; t <= MCP_FT_MAX; t++)
        CHECK_EQ_U64(lost[t], t == MCP_FT_DATA ? 100 : 0);

    struct mcp_fault_cfg none = {0};
    CHECK(!mcp_fault_active(&none), "an empty configuration injects nothing");
    none.delay_ns = 5;
    CHECK(mcp_fault_active(&none), "a delay is active");
}

/* ---- nodes files -------------------------------------------------------------------------- */

TEST(nodes_parse_good)
{
    static struct psp_nodes n;
    char err[256] = "";
    const char *text = "# test cluster\n"
                       "\n"
                       "0 198.18.0.1\n"
                       "   1\t198.18.0.2:5000   # with port\n"
                       "3 198.18.0.4 02:00:00:AA:bb:0c eth1\r\n"
                       "4 198.18.0.5 veth4\n"
                       "5 198.18.0.6:7 02-00-00-00-00-06";
    CHECK_OK(psp_nodes_parse(text, 18360, &n, err, sizeof err));
    CHECK_EQ_U64(n.count, 6);
    CHECK(n.node[0].present && n.node[1].present && !n.node[2].present && n.node[3].present,
          "present flags");
    CHECK_EQ_U64(n.node[0].port, 18360);
    CHECK_EQ_U64(n.node[1].port, 5000);
    CHECK_EQ_U64(ntohl(n.node[1].ip.s_addr), 0xC6120002u);
    CHECK(!n.node[0].has_mac && n.node[3].has_mac, "MAC flags");
    const uint8_t mac3[6] = {2, 0, 0, 0xaa, 0xbb, 0x0c};
    CHECK_EQ_MEM(n.node[3].mac, mac3, 6);
    CHECK_EQ_STR(n.node[3].ifname, "eth1");
    CHECK_EQ_STR(n.node[4].ifname, "veth4");
    CHECK(!n.node[4].has_mac, "an interface alone is no MAC");
    CHECK(n.node[5].has_mac && n.node[5].mac[5] == 6 && n.node[5].port == 7, "node 5");

    psp_nodes_single(&n, 1234);
    CHECK_EQ_U64(n.count, 1);
    CHECK_EQ_U64(n.node[0].port, 1234);
    CHECK_EQ_U64(ntohl(n.node[0].ip.s_addr), INADDR_LOOPBACK);
}

TEST(nodes_parse_errors)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"0 10.0.0.1\n1 10.0.0.2\n2 10.0.0.3 zz:00:00:00:00:01\n",
         "line 3: bad MAC 'zz:00:00:00:00:01'"},
        {"0 10.0.0.1 02:00:00:00:00\n", "line 1: bad MAC '02:00:00:00:00'"},
        {"0 10.0.0.1 eth0 02:00:00:00:00:01\n", "line 1: bad MAC 'eth0'"},
        {"0 10.0.0.1\n# two\n0 10.0.0.2\n", "line 3: duplicate node id 0 (already on line 1)"},
        {"1024 10.0.0.1\n", "line 1: node id 1024 out of range (0..1023)"},
        {"99999999999999999999 10.0.0.1\n", "line 1: bad node id"},
        {"x 10.0.0.1\n", "line 1: bad node id 'x'"},
        {"-1 10.0.0.1\n", "line 1: bad node id '-1'"},
        {"0 10.0.0.256\n", "line 1: bad IP address '10.0.0.256'"},
        {"0 host.example\n", "line 1: bad IP address 'host.example'"},
        {"0 10.0.0.1:70000\n", "line 1: bad port '70000'"},
        {"0 10.0.0.1:0\n", "line 1: bad port '0'"},
        {"0 10.0.0.1:\n", "line 1: bad port ''"},
        {"0 10.0.0.1:12x\n", "line 1: bad port '12x'"},
        {"0\n", "line 1: node 0 has no address"},
        {"0 10.0.0.1 02:00:00:00:00:01 eth0 extra\n", "line 1: too many words"},
        {"0 10.0.0.1 averyveryverylonginterfacename\n", "line 1: bad interface name"},
        {"0 10.0.0.1:5\n1 10.0.0.1:5\n", "line 2: node 1 uses 10.0.0.1:5, already taken by node 0"},
        {"# nothing\n\n", "no nodes described"},
        {"", "no nodes described"},
    };
    static struct psp_nodes n;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        int rc = psp_nodes_parse(cases[i].text, 18360, &n, err, sizeof err);
        CHECK(rc == -EINVAL, "case %zu: rc %d", i, rc);
        CHECK(contains(err, cases[i].want), "case %zu: message \"%s\", want \"%s\"", i, err,
              cases[i].want);
    }
    char err[256] = "";
    CHECK_RC(psp_nodes_parse("0 10.0.0.1\n", 0, &n, err, sizeof err), -EINVAL);
    CHECK(contains(err, "no UDP port"), "default port 0: \"%s\"", err);
}

TEST(nodes_load)
{
    static struct psp_nodes n;
    char path[] = "/tmp/test_link_nodes.XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp: %s", strerror(errno));
    const char *text = "0 127.0.0.1:9000\n1 127.0.0.1:9001 02:00:00:00:00:01\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    char err[512] = "";
    CHECK_OK(psp_nodes_load(path, 18360, &n, err, sizeof err));
    CHECK_EQ_U64(n.count, 2);
    CHECK_EQ_U64(n.node[1].port, 9001);

    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, "0 1.2.3.4\n0 1.2.3.5\n", 20) == 20, "write");
    close(fd);
    CHECK_RC(psp_nodes_load(path, 18360, &n, err, sizeof err), -EINVAL);
    CHECK(contains(err, path) && contains(err, "line 2: duplicate node id 0"), "\"%s\"", err);
    unlink(path);

    CHECK_RC(psp_nodes_load(path, 18360, &n, err, sizeof err), -ENOENT);
    CHECK(contains(err, "cannot read nodes file") && contains(err, path), "\"%s\"", err);
}

/* ---- simulated network -------------------------------------------------------------------- */

#define SIM_MAXF 2048

struct rxbufs {
    uint8_t mem[64][SIM_MAXF];
    void *bufs[64];
    uint32_t lens[64];
};

static struct rxbufs *rxbufs_new(void)
{
    struct rxbufs *r = calloc(1, sizeof *r);
    for (int i = 0; i < 64; i++)
        r->bufs[i] = r->mem[i];
    return r;
}

TEST(sim_delivery)
{
    struct mcp_sim_net *net = mcp_sim_net_create(3, SIM_MAXF, NULL);
    REQUIRE(net != NULL, "create");
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1),
                      *c = mcp_sim_link_open(net, 2);
    REQUIRE(a && b && c, "open");
    CHECK(mcp_sim_link_open(net, 1) == NULL, "a node's link opens once");
    CHECK(mcp_sim_link_open(net, 3) == NULL, "node 3 does not exist");
    CHECK_EQ_STR(a->kind, "sim");
    CHECK_EQ_U64(a->max_frame, SIM_MAXF);
    CHECK_EQ_U64(b->node, 1);
    CHECK_EQ_U64(b->max_nodes, 3);

    struct rxbufs *r = rxbufs_new();
    uint8_t f[SIM_MAXF];
    for (uint32_t i = 0; i < 10; i++) {
        make_frame(f, 40 + i, MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, (uint16_t)(1 + i % 2), f, 40 + i));
        memset(f, 0, sizeof f); /* the sim copies at tx */
    }
    CHECK_RC(lanai_tx(a, 3, f, 40), -EINVAL);
    CHECK_RC(lanai_tx(a, 1, f, SIM_MAXF + 1), -EMSGSIZE);
    CHECK_EQ_U64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0); /* not flushed yet */
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);
    CHECK_EQ_I64(lanai_flush(a), 10);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 10);

    int n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 3);
    CHECK_EQ_I64(n, 3);
    n += lanai_rx(b, r->bufs + 3, SIM_MAXF, r->lens + 3, 61);
    CHECK_EQ_I64(n, 5);
    for (int i = 0; i < n; i++) {
        uint32_t no = (uint32_t)(2 * i);
        CHECK_EQ_U64(r->lens[i], 40 + no);
        CHECK(frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, no), "content of frame %u", no);
    }
    CHECK_EQ_I64(lanai_rx(c, r->bufs, SIM_MAXF, r->lens, 64), 5);
    CHECK(frame_no(r->mem[4]) == 9, "order at node 2");
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);

    /* frames to a node without an open link are lost */
    lanai_close(c);
    make_frame(f, 50, MCP_FT_DATA, 77);
    CHECK_OK(lanai_tx(a, 2, f, 50));
    CHECK_EQ_I64(lanai_flush(a), 1);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);
    CHECK_RC(mcp_sim_inject(net, 2, f, 50), -ENOTCONN);

    struct mcp_sim_stats st;
    mcp_sim_net_stats(net, &st);
    CHECK_EQ_U64(st.sent, 11);
    CHECK_EQ_U64(st.delivered, 10);
    CHECK_EQ_U64(st.dropped, 1);
    CHECK_EQ_U64(st.queued_max, 10);

    /* unflushed frames are released at close */
    CHECK_OK(lanai_tx(a, 1, f, 50));
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_txq_full)
{
    struct mcp_sim_net *net = mcp_sim_net_create(2, 64, NULL);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    uint8_t f[64] = {0};
    int n = 0;
    while (lanai_tx(a, 1, f, 64) == 0 && n < 100000)
        n++;
    CHECK(n >= 64 && n < 100000, "queue of %d frames", n);
    CHECK_RC(lanai_tx(a, 1, f, 64), -EAGAIN);
    CHECK_EQ_I64(lanai_flush(a), n);
    CHECK_OK(lanai_tx(a, 1, f, 64));
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
}

TEST(sim_delay)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.delay_ns = 1000;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint8_t f[64];
    mcp_sim_net_set_time(net, 500);
    make_frame(f, 64, MCP_FT_DATA, 1);
    lanai_tx(a, 1, f, 64);
    lanai_flush(a);
    mcp_sim_net_set_time(net, 700);
    make_frame(f, 64, MCP_FT_DATA, 2);
    lanai_tx(a, 1, f, 64);
    lanai_flush(a);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0);
    mcp_sim_net_set_time(net, 1499);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0);
    mcp_sim_net_set_time(net, 1500);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 1);
    CHECK_EQ_U64(frame_no(r->mem[0]), 1);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 1);
    mcp_sim_net_set_time(net, 1000); /* the clock never goes back */
    mcp_sim_net_set_time(net, 1700);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 1);
    CHECK_EQ_U64(frame_no(r->mem[0]), 2);
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_dup_and_drop_list)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.dup = 1.0;
    cfg.ndrops = 2;
    cfg.drops[0] = 1;
    cfg.drops[1] = 3;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint8_t f[100];
    for (uint32_t i = 0; i < 5; i++) {
        make_frame(f, 100, MCP_FT_DATA, i);
        lanai_tx(a, 1, f, 100);
    }
    lanai_flush(a);
    int n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64);
    CHECK_EQ_I64(n, 6);
    static const uint32_t want[6] = {0, 0, 2, 2, 4, 4};
    for (int i = 0; i < n && i < 6; i++)
        CHECK(frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, want[i]), "frame %d is not %u", i,
              want[i]);
    struct mcp_sim_stats st;
    mcp_sim_net_stats(net, &st);
    CHECK_EQ_U64(st.duplicated, 3);
    CHECK_EQ_U64(st.dropped, 2);

    /* a new configuration restarts the frame count: frame 1 is dropped again */
    cfg.dup = 0;
    mcp_sim_net_set_fault(net, &cfg);
    for (uint32_t i = 0; i < 3; i++) {
        make_frame(f, 100, MCP_FT_DATA, i);
        lanai_tx(a, 1, f, 100);
    }
    lanai_flush(a);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 2);
    CHECK(frame_no(r->mem[1]) == 2, "frame 1 dropped after set_fault");
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_reorder_bounds)
{
    uint64_t seed = th_seed(5);
    struct mcp_fault_cfg cfg = {0};
    cfg.reorder = 0.3;
    cfg.reorder_max = 3;
    cfg.seed = seed;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    enum { N = 2000 };
    static uint32_t order[N + 8];
    static uint8_t seen[N];
    unsigned got = 0;
    uint8_t f[64];
    for (uint32_t i = 0; i < N; i++) {
        make_frame(f, 64, MCP_FT_DATA, i);
        lanai_tx(a, 1, f, 64);
        lanai_flush(a);
        int n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64);
        for (int k = 0; k < n && got < N + 8; k++)
            order[got++] = frame_no(r->mem[k]);
    }
    /* the last held frames go out when the clock moves on */
    CHECK(mcp_sim_net_pending(net) <= 3, "%" PRIu64 " pending", mcp_sim_net_pending(net));
    mcp_sim_net_set_time(net, 5000);
    int n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64);
    mcp_sim_net_set_time(net, 20000);
    n += lanai_rx(b, r->bufs + n, SIM_MAXF, r->lens + n, 64 - n);
    for (int k = 0; k < n && got < N + 8; k++)
        order[got++] = frame_no(r->mem[k]);
    CHECK_EQ_U64(got, N);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);

    unsigned inversions = 0, worst = 0, dupl = 0;
    for (unsigned i = 0; i < got; i++) {
        uint32_t no = order[i];
        if (no >= N || seen[no]++)
            dupl++;
        /* how many frames sent after it arrived before it */
        unsigned late = 0;
        for (unsigned j = 0; j < i; j++)
            late += order[j] > no;
        inversions += late > 0;
        if (late > worst)
            worst = late;
    }
    CHECK_EQ_U64(dupl, 0);
    CHECK(worst <= 3, "a frame was overtaken by %u later ones (reorder_max 3)", worst);
    CHECK(inversions > 100, "only %u frames were reordered", inversions);
    struct mcp_sim_stats st;
    mcp_sim_net_stats(net, &st);
    CHECK(st.reordered > 450 && st.reordered < 750, "reordered %" PRIu64, st.reordered);
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_hold_released_by_clock)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.reorder = 1.0;
    cfg.reorder_max = 5;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint8_t f[64];
    mcp_sim_net_set_time(net, 100000);
    make_frame(f, 64, MCP_FT_DATA, 9);
    lanai_tx(a, 1, f, 64);
    lanai_flush(a);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 1);
    mcp_sim_net_set_time(net, 105000);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0);
    mcp_sim_net_set_time(net, 110000);
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 1);
    CHECK(frame_ok(r->mem[0], r->lens[0], MCP_FT_DATA, 9), "content");
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);

    /* a held frame to a node that went away is lost, not kept */
    lanai_tx(a, 1, f, 64);
    lanai_flush(a);
    lanai_close(b);
    mcp_sim_net_set_time(net, 200000);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);
    lanai_close(a);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_corrupt)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.corrupt = 1.0;
    cfg.seed = 3;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint8_t f[200], orig[200];
    for (uint32_t i = 0; i < 40; i++) {
        make_frame(f, 200, MCP_FT_DATA, i);
        memcpy(orig, f, 200);
        lanai_tx(a, 1, f, 200);
        lanai_flush(a);
        CHECK_EQ_MEM(f, orig, 200); /* the sender's memory is never touched */
        REQUIRE(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 1) == 1, "frame %u", i);
        unsigned diff = 0;
        for (int k = 0; k < 200; k++)
            diff += r->mem[0][k] != orig[k];
        CHECK(diff == 1, "frame %u: %u bytes differ", i, diff);
    }
    struct mcp_sim_stats st;
    mcp_sim_net_stats(net, &st);
    CHECK_EQ_U64(st.corrupted, 40);
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
}

TEST(sim_inject_and_truncation)
{
    struct mcp_sim_net *net = mcp_sim_net_create(2, 256, NULL);
    struct lanai_link *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint8_t junk[1000];
    for (int i = 0; i < 1000; i++)
        junk[i] = (uint8_t)i;
    CHECK_OK(mcp_sim_inject(net, 1, junk, 3));
    CHECK_OK(mcp_sim_inject(net, 1, junk, 100));
    CHECK_OK(mcp_sim_inject(net, 1, junk, 1000)); /* larger than the net's frames */
    CHECK_RC(mcp_sim_inject(net, 2, junk, 3), -EINVAL);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 3);
    int n = lanai_rx(b, r->bufs, 50, r->lens, 64);
    CHECK_EQ_I64(n, 3);
    CHECK_EQ_U64(r->lens[0], 3);
    CHECK_EQ_U64(r->lens[1], 51); /* truncated: cap + 1 */
    CHECK_EQ_U64(r->lens[2], 51);
    CHECK_EQ_MEM(r->mem[1], junk, 50);
    CHECK_EQ_U64(mcp_sim_net_pending(net), 0);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
    CHECK(mcp_sim_net_create(0, 100, NULL) == NULL, "no nodes");
    CHECK(mcp_sim_net_create(1025, 100, NULL) == NULL, "too many nodes");
}

/* Run one sim net with loss and return the received frame numbers' hash. */
static uint64_t sim_loss_run(uint64_t seed, unsigned *received, uint64_t *dropped)
{
    struct mcp_fault_cfg cfg = {0};
    cfg.loss = 0.25;
    cfg.seed = seed;
    struct mcp_sim_net *net = mcp_sim_net_create(2, SIM_MAXF, &cfg);
    struct lanai_link *a = mcp_sim_link_open(net, 0), *b = mcp_sim_link_open(net, 1);
    struct rxbufs *r = rxbufs_new();
    uint64_t h = 1469598103934665603ull;
    *received = 0;
    uint8_t f[64];
    for (uint32_t i = 0; i < 20000; i++) {
        make_frame(f, 64, MCP_FT_DATA, i);
        lanai_tx(a, 1, f, 64);
        if (i % 50 == 49) {
            lanai_flush(a);
            int n;
            while ((n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64)) > 0) {
                for (int k = 0; k < n; k++)
                    h = (h ^ frame_no(r->mem[k])) * 1099511628211ull;
                *received += (unsigned)n;
            }
        }
    }
    struct mcp_sim_stats st;
    mcp_sim_net_stats(net, &st);
    *dropped = st.dropped;
    lanai_close(a);
    lanai_close(b);
    mcp_sim_net_destroy(net);
    free(r);
    return h;
}

TEST(sim_loss_deterministic)
{
    uint64_t seed = th_seed(11);
    unsigned r1, r2, r3;
    uint64_t d1, d2, d3;
    uint64_t h1 = sim_loss_run(seed, &r1, &d1), h2 = sim_loss_run(seed, &r2, &d2);
    uint64_t h3 = sim_loss_run(seed + 1, &r3, &d3);
    CHECK(h1 == h2 && r1 == r2, "one seed, two different runs");
    CHECK(h1 != h3, "two seeds, one run");
    CHECK_EQ_U64(r1 + d1, 20000);
    CHECK(d1 > 5000 - 310 && d1 < 5000 + 310, "dropped %" PRIu64 " of 20000 at 25%%", d1);
}

/* ---- udp link ----------------------------------------------------------------------------- */

/* A UDP socket bound to 127.0.0.1 on a free port; its port in *port. */
static int bound_socket(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    *port = ntohs(sa.sin_port);
    return fd;
}

struct udp_pair {
    struct psp_nodes nodes;
    struct lanai_link *l[2];
};

/* The links of nodes 0 and 1 of u->nodes, on sockets fd[] (-1: each opens its own). */
static int udp_pair_links(struct udp_pair *u, const int *fd, const struct mcp_fault_cfg *fault,
                          char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++) {
        struct mcp_link_params p = {0};
        p.node = (uint16_t)i;
        p.nodes = &u->nodes;
        p.fd = fd[i];
        p.ring_fd = -1;
        if (fault)
            p.fault = *fault;
        u->l[i] = mcp_link_open("udp", &p, err, errlen);
        if (!u->l[i])
            return -1;
    }
    return 0;
}

/* Two udp links on loopback (nodes 0 and 1), through pre-bound sockets (p->fd). */
static int udp_pair_open(struct udp_pair *u, const struct mcp_fault_cfg *fault, char *err,
                         size_t errlen)
{
    int fd[2];
    uint16_t port[2];
    char text[256];
    for (int i = 0; i < 2; i++)
        if ((fd[i] = bound_socket(&port[i])) < 0)
            return -1;
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 127.0.0.1:%u\n2 255.255.255.255:9\n", port[0],
             port[1]);
    if (psp_nodes_parse(text, 0, &u->nodes, err, errlen) != 0)
        return -1;
    return udp_pair_links(u, fd, fault, err, errlen);
}

static void udp_pair_close(struct udp_pair *u)
{
    lanai_close(u->l[0]);
    lanai_close(u->l[1]);
}

/* Receive on l into bufs/lens (room for max frames) until want came or a second passed. */
static int rx_frames(struct lanai_link *l, void **bufs, uint32_t *lens, int max, uint32_t cap,
                     int want, int *got)
{
    double end = now_s() + 1.0;
    while (*got < want && *got < max && now_s() < end) {
        int n = lanai_rx(l, bufs + *got, cap, lens + *got, max - *got);
        if (n < 0)
            return n;
        *got += n;
    }
    return 0;
}

static int rx_until(struct lanai_link *l, struct rxbufs *r, uint32_t cap, int want, int *got)
{
    return rx_frames(l, r->bufs, r->lens, 64, cap, want, got);
}

TEST(udp_loopback_batch)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, NULL, err, sizeof err) == 0, "open: %s", err);
    struct lanai_link *a = u.l[0], *b = u.l[1];
    CHECK_EQ_STR(a->kind, "udp");
    CHECK_EQ_U64(a->max_frame, 65507);
    CHECK_EQ_U64(a->max_nodes, 3);
    CHECK(mcp_link_fd(a) >= 0, "fd");

    static uint8_t frames[60][SIM_MAXF];
    for (uint32_t i = 0; i < 60; i++) {
        make_frame(frames[i], 32 + i * 30, MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, 1, frames[i], 32 + i * 30));
    }
    CHECK_EQ_I64(lanai_flush(a), 60);
    struct rxbufs *r = rxbufs_new();
    int got = 0;
    CHECK_OK(rx_until(b, r, SIM_MAXF, 60, &got));
    CHECK_EQ_I64(got, 60);
    for (int i = 0; i < got; i++) {
        uint32_t no = frame_no(r->mem[i]);
        CHECK(no < 60 && r->lens[i] == 32 + no * 30 &&
                  frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, no),
              "frame %d (no %u, len %u)", i, no, r->lens[i]);
    }
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0);

    /* and back, with the largest frame */
    static uint8_t big[65507];
    make_frame(big, sizeof big, MCP_FT_DATA, 4242);
    CHECK_OK(lanai_tx(b, 0, big, sizeof big));
    CHECK_RC(lanai_tx(b, 0, big, sizeof big + 1), -EMSGSIZE);
    CHECK_EQ_I64(lanai_flush(b), 1);
    static uint8_t bigrx[65507];
    void *bp[1] = {bigrx};
    uint32_t blen = 0;
    double end = now_s() + 1.0;
    int n = 0;
    while (n == 0 && now_s() < end)
        n = lanai_rx(a, bp, sizeof bigrx, &blen, 1);
    CHECK_EQ_I64(n, 1);
    CHECK_EQ_U64(blen, sizeof big);
    CHECK_EQ_MEM(bigrx, big, sizeof big);

    struct mcp_link_stats st;
    CHECK_OK(mcp_link_stats(a, &st));
    CHECK_EQ_U64(st.tx_frames, 60);
    CHECK_EQ_U64(st.rx_frames, 1);
    CHECK_EQ_U64(st.rx_bytes, 65507);
    CHECK_EQ_U64(st.tx_errors, 0);
    udp_pair_close(&u);
    free(r);
}

/*
 * Packing (PSP_UDP_PACK): a burst of 26 frames of 120 to 400 bytes to node 1 in one flush, one
 * sendmmsg.  b reads with per buffers a look, so most of a packed datagram waits in the link
 * for a later look: every frame once, in order.  Returns the sender's frames sent packed.
 */
static uint64_t pack_burst(struct lanai_link *a, struct lanai_link *b, int per)
{
    enum { N = 26 };
    static uint8_t f[N][400];
    uint32_t len[N];
    for (uint32_t i = 0; i < N; i++) {
        len[i] = 120 + (i * 97) % 281;
        make_frame(f[i], len[i], MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, 1, f[i], len[i]));
    }
    struct mcp_link_stats st0, st;
    mcp_link_stats(a, &st0);
    CHECK_EQ_I64(lanai_flush(a), N);
    mcp_link_stats(a, &st);
    CHECK_EQ_U64(st.tx_calls - st0.tx_calls, 1);
    struct rxbufs *r = rxbufs_new();
    if (!CHECK(r != NULL, "memory"))
        return UINT64_MAX;
    uint32_t next = 0;
    double end = now_s() + 2.0;
    while (next < N && now_s() < end) {
        int n = lanai_rx(b, r->bufs, SIM_MAXF, r->lens, per);
        CHECK(n >= 0 && n <= per, "rx: %d", n);
        for (int i = 0; i < n; i++, next++) {
            uint32_t no = frame_no(r->mem[i]);
            if (!CHECK(no == next && no < N && r->lens[i] == len[no] &&
                           frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, no),
                       "frame %u read as number %u, %u bytes", next, no, r->lens[i]))
                break;
        }
    }
    CHECK_EQ_U64(next, N);
    CHECK_EQ_I64(lanai_pending(b) && lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64) > 0, 0);
    free(r);
    return st.tx_packed - st0.tx_packed;
}

TEST(udp_small_frames_to_one_node_go_packed)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, NULL, err, sizeof err) == 0, "open: %s", err);
    /* one packed datagram (under loopback's MTU); read 64, then 4 at a time */
    CHECK_EQ_U64(pack_burst(u.l[0], u.l[1], 64), 26);
    CHECK_EQ_U64(pack_burst(u.l[0], u.l[1], 4), 26);
    struct mcp_link_stats st;
    mcp_link_stats(u.l[1], &st);
    CHECK_EQ_U64(st.rx_frames, 52);
    CHECK_EQ_U64(st.rx_packed, 52);
    CHECK_EQ_U64(st.rx_carried, 26 - 4); /* the second datagram read with room for 4 */
    CHECK_EQ_U64(st.rx_dropped_nobuf, 0);

    /* Datagrams that only look packed (a count of 1, lengths that end before or after the
     * datagram, an empty frame) go up whole, for the firmware to judge; a good one with two
     * frames comes apart. */
    static const uint8_t bad[][12] = {{'P', 'K', 1, 0, 8, 0, 1, 2, 3, 4, 5, 6},
                                      {'P', 'K', 2, 0, 3, 0, 1, 2, 3, 4, 0, 9},
                                      {'P', 'K', 2, 0, 2, 0, 1, 2, 1, 0, 3, 4},
                                      {'P', 'K', 2, 0, 0, 0, 2, 0, 1, 2, 3, 4},
                                      {'P', 'K', 2, 0, 3, 0, 1, 2, 3, 3, 0, 7}};
    static const uint8_t good[12] = {'P', 'K', 2, 0, 3, 0, 1, 2, 3, 1, 0, 9};
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr = u.nodes.node[1].ip,
                             .sin_port = htons(u.nodes.node[1].port)};
    int fd0 = mcp_link_fd(u.l[0]);
    for (unsigned k = 0; k <= sizeof bad / sizeof bad[0]; k++) {
        const uint8_t *d = k < sizeof bad / sizeof bad[0] ? bad[k] : good;
        CHECK(sendto(fd0, d, 12, 0, (struct sockaddr *)&to, sizeof to) == 12, "sendto: %s",
              strerror(errno));
    }
    struct rxbufs *r = rxbufs_new();
    int got = 0;
    CHECK_OK(rx_until(u.l[1], r, SIM_MAXF, 7, &got));
    CHECK_EQ_I64(got, 7);
    for (int k = 0; k < 5 && k < got; k++)
        CHECK(r->lens[k] == 12 && memcmp(r->mem[k], bad[k], 12) == 0,
              "datagram %d handed up whole (%u bytes)", k, r->lens[k]);
    CHECK(got == 7 && r->lens[5] == 3 && memcmp(r->mem[5], "\1\2\3", 3) == 0 && r->lens[6] == 1 &&
              r->mem[6][0] == 9,
          "the good one: a frame of 3 bytes and one of 1");
    free(r);
    udp_pair_close(&u);

    /* PSP_UDP_PACK=0: a datagram each, the same frames */
    setenv("PSP_UDP_PACK", "0", 1);
    int rc = udp_pair_open(&u, NULL, err, sizeof err);
    unsetenv("PSP_UDP_PACK");
    REQUIRE(rc == 0, "open: %s", err);
    CHECK_EQ_U64(pack_burst(u.l[0], u.l[1], 4), 0);
    mcp_link_stats(u.l[1], &st);
    CHECK_EQ_U64(st.rx_packed, 0);
    CHECK_EQ_U64(st.rx_carried, 0);
    udp_pair_close(&u);
}

TEST(udp_truncation)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, NULL, err, sizeof err) == 0, "open: %s", err);
    uint8_t f[2000];
    make_frame(f, 2000, MCP_FT_DATA, 1);
    lanai_tx(u.l[0], 1, f, 2000);
    lanai_tx(u.l[0], 1, f, 100);
    lanai_tx(u.l[0], 1, f, 1000);
    lanai_flush(u.l[0]);
    struct rxbufs *r = rxbufs_new();
    int got = 0;
    rx_until(u.l[1], r, 1000, 3, &got);
    CHECK_EQ_I64(got, 3);
    CHECK_EQ_U64(r->lens[0], 1001);
    CHECK_EQ_U64(r->lens[1], 100);
    CHECK_EQ_U64(r->lens[2], 1000);
    CHECK_EQ_MEM(r->mem[0], f, 1000);
    struct mcp_link_stats st;
    mcp_link_stats(u.l[1], &st);
    CHECK_EQ_U64(st.rx_truncated, 1);
    udp_pair_close(&u);
    free(r);
}

/* Receive buffers for frames up to a whole datagram. */
struct bigbufs {
    uint8_t mem[16][65536];
    void *bufs[16];
    uint32_t lens[16];
};

static struct bigbufs *bigbufs_new(void)
{
    struct bigbufs *r = calloc(1, sizeof *r);
    for (int i = 0; r && i < 16; i++)
        r->bufs[i] = r->mem[i];
    return r;
}

static int rx_big(struct lanai_link *l, struct bigbufs *r, uint32_t cap, int want, int *got)
{
    return rx_frames(l, r->bufs, r->lens, 16, cap, want, got);
}

/* A udp pair whose links cut frames into segments of segment bytes (PSP_UDP_SEGMENT; "0": from
 * the MTU, which on loopback means no segmenting). */
static int udp_pair_open_segments(struct udp_pair *u, const char *segment, char *err, size_t errlen)
{
    setenv("PSP_UDP_SEGMENT", segment, 1);
    int rc = udp_pair_open(u, NULL, err, errlen);
    unsetenv("PSP_UDP_SEGMENT");
    return rc;
}

/* Frames over one datagram go as GSO segments and come back whole (PSP_UDP_SEGMENT stands in
 * for a small MTU on loopback). */
TEST(udp_segments_sent_and_put_together)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open_segments(&u, "1000", err, sizeof err) == 0, "open: %s", err);
    struct lanai_link *a = u.l[0], *b = u.l[1];
    CHECK_EQ_U64(a->max_frame, 64u * 992u); /* 64 segments of 1000 - 8 header bytes */
    CHECK_EQ_U64(udp_seg_max_frame(1472), 44u * 1464u);

    /* plain, two segments, six, the largest; sizes on each side of a segment */
    static const uint32_t len[] = {900, 1000, 1001, 5000, 64u * 992u, 1984, 1985};
    enum { N = sizeof len / sizeof len[0] };
    static uint8_t f[N][64 * 992];
    for (uint32_t i = 0; i < N; i++) {
        make_frame(f[i], len[i], MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, 1, f[i], len[i]));
    }
    CHECK_RC(lanai_tx(a, 1, f[4], 64u * 992u + 1), -EMSGSIZE);
    CHECK_EQ_I64(lanai_flush(a), N);
    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    int got = 0;
    CHECK_OK(rx_big(b, r, 65536, N, &got));
    CHECK_EQ_I64(got, N);
    for (int i = 0; i < got && i < N; i++)
        CHECK(r->lens[i] == len[i] && frame_ok(r->mem[i], len[i], MCP_FT_DATA, (uint32_t)i),
              "frame %d: length %u, want %u", i, r->lens[i], len[i]);
    struct mcp_link_stats st;
    mcp_link_stats(a, &st);
    CHECK_EQ_U64(st.tx_segmented, 5); /* all but 900 and 1000 */
    CHECK_EQ_U64(st.tx_gso_off, 0);
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_segmented, 5);
    CHECK_EQ_U64(st.rx_frames, N);
    CHECK_EQ_U64(st.rx_seg_incomplete, 0);
    CHECK_EQ_U64(st.rx_copied, 0); /* every one read straight into its buffer */

    /* A frame smaller than the receiver's buffer is truncated like a plain one. */
    CHECK_OK(lanai_tx(a, 1, f[3], len[3]));
    lanai_flush(a);
    got = 0;
    rx_big(b, r, 3000, 1, &got);
    CHECK_EQ_I64(got, 1);
    CHECK_EQ_U64(r->lens[0], 3001);
    CHECK_EQ_MEM(r->mem[0], f[3], 3000);
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_copied, 1); /* longer than the buffer: copied out, cut */
    udp_pair_close(&u);
    free(r);
}

/* Segments read one by one (as without GRO), out of order, duplicated, or with one missing;
 * read through staging buffers (segment = 0: loopback's MTU, no segmenting here) or straight
 * into the firmware's buffers (segment = 1000: this link segments too). */
static void reassembly_case(const char *segment)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open_segments(&u, segment, err, sizeof err) == 0, "open: %s", err);
    int fd1 = mcp_link_fd(u.l[1]); /* send as node 1, so node 0 knows the sender */
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr = u.nodes.node[0].ip,
                             .sin_port = htons(u.nodes.node[0].port)};
    static uint8_t frame[3000], seg[1100];
    const uint16_t chunk = 992;
    struct udp_seg_hdr h = {.cnt = 4, .chunk = chunk};
    /* frame 7: segments 2, 0, 0 again, 3, 1 */
    make_frame(frame, sizeof frame, MCP_FT_DATA, 7);
    h.id = 7;
    const uint8_t order[] = {2, 0, 0, 3, 1};
    for (unsigned k = 0; k < sizeof order; k++) {
        h.idx = order[k];
        uint32_t off = h.idx * chunk, n = sizeof frame - off < chunk ? sizeof frame - off : chunk;
        udp_seg_put(seg, &h);
        memcpy(seg + UDP_SEG_HDR, frame + off, n);
        CHECK(sendto(fd1, seg, UDP_SEG_HDR + n, 0, (struct sockaddr *)&to, sizeof to) ==
                  (ssize_t)(UDP_SEG_HDR + n),
              "sendto");
    }
    /* frame 8 loses segment 1; frame 9 follows whole */
    for (uint16_t id = 8; id <= 9; id++) {
        make_frame(frame, sizeof frame, MCP_FT_DATA, id);
        h.id = id;
        for (uint8_t i = 0; i < 4; i++) {
            if (id == 8 && i == 1)
                continue;
            h.idx = i;
            uint32_t off = i * chunk, n = sizeof frame - off < chunk ? sizeof frame - off : chunk;
            udp_seg_put(seg, &h);
            memcpy(seg + UDP_SEG_HDR, frame + off, n);
            sendto(fd1, seg, UDP_SEG_HDR + n, 0, (struct sockaddr *)&to, sizeof to);
        }
    }
    /* a segment with a bad header is handed up as it is (the firmware judges it) */
    uint8_t junk[40] = {0x53, 0x47, 1, 0, 5, 4, 0xe0, 0x03};
    sendto(fd1, junk, sizeof junk, 0, (struct sockaddr *)&to, sizeof to);

    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    int got = 0;
    CHECK_OK(rx_big(u.l[0], r, 65536, 3, &got));
    CHECK_EQ_I64(got, 3);
    CHECK(r->lens[0] == sizeof frame && frame_ok(r->mem[0], sizeof frame, MCP_FT_DATA, 7),
          "frame 7 (length %u)", r->lens[0]);
    CHECK(r->lens[1] == sizeof frame && frame_ok(r->mem[1], sizeof frame, MCP_FT_DATA, 9),
          "frame 9 (length %u)", r->lens[1]);
    CHECK(r->lens[2] == sizeof junk && memcmp(r->mem[2], junk, sizeof junk) == 0, "junk");
    struct mcp_link_stats st;
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.rx_segmented, 2);
    CHECK_EQ_U64(st.rx_seg_incomplete, 1);     /* frame 8 */
    CHECK_EQ_U64(st.rx_copied, 5 + 3 + 4 + 1); /* no read could be taken in place */
    udp_pair_close(&u);
    free(r);
}

TEST(udp_segments_reassembled_one_by_one)
{
    reassembly_case("0");
}

TEST(udp_segments_reassembled_one_by_one_direct)
{
    reassembly_case("1000");
}

/* Plain datagrams on a link that reads straight into the buffers: an empty one and a small
 * one in place (their first bytes moved from the header slot), one longer than a segment (as
 * a sender with PSP_UDP_GSO=0 sends, IP-fragmented) copied out whole. */
TEST(udp_direct_reads_plain_datagrams)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open_segments(&u, "1000", err, sizeof err) == 0, "open: %s", err);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr = u.nodes.node[0].ip,
                             .sin_port = htons(u.nodes.node[0].port)};
    static uint8_t f[3][2000];
    static const uint32_t len[3] = {0, 40, 2000};
    int fd1 = mcp_link_fd(u.l[1]);
    for (uint32_t i = 0; i < 3; i++) {
        make_frame(f[i], len[i], MCP_FT_DATA, i);
        CHECK(sendto(fd1, f[i], len[i], 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)len[i],
              "sendto %u bytes", len[i]);
    }
    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    int got = 0;
    CHECK_OK(rx_big(u.l[0], r, 65536, 3, &got));
    CHECK_EQ_I64(got, 3);
    CHECK_EQ_U64(r->lens[0], 0);
    for (int i = 1; i < got && i < 3; i++)
        CHECK(r->lens[i] == len[i] && frame_ok(r->mem[i], len[i], MCP_FT_DATA, (uint32_t)i),
              "frame %d: length %u, want %u", i, r->lens[i], len[i]);
    struct mcp_link_stats st;
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.rx_frames, 3);
    CHECK_EQ_U64(st.rx_copied, 1); /* the 2000 bytes: longer than one segment */
    udp_pair_close(&u);
    free(r);
}

/* Reads straight into the buffers until one cannot be taken in place: that one and the rest
 * of the batch are copied out, and every frame still arrives, in order. */
TEST(udp_direct_reads_mixed_batch)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open_segments(&u, "1000", err, sizeof err) == 0, "open: %s", err);
    struct lanai_link *a = u.l[1], *b = u.l[0];
    static uint8_t f[5][3000];
    static const uint32_t len[5] = {500, 3000, 1500, 40, 2500};
    for (uint32_t i = 0; i < 5; i++)
        make_frame(f[i], len[i], MCP_FT_DATA, i);
    /* frame 0 plain, frame 1 in three segments: both in place */
    CHECK_OK(lanai_tx(a, 0, f[0], len[0]));
    CHECK_OK(lanai_tx(a, 0, f[1], len[1]));
    CHECK_EQ_I64(lanai_flush(a), 2);
    /* frame 2 as two lone segments, the second first: copied out from here on */
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr = u.nodes.node[0].ip,
                             .sin_port = htons(u.nodes.node[0].port)};
    static uint8_t seg[1100];
    for (int k = 1; k >= 0; k--) {
        struct udp_seg_hdr h = {.id = 500, .idx = (uint8_t)k, .cnt = 2, .chunk = 992};
        uint32_t off = (uint32_t)k * 992, n = k ? len[2] - 992 : 992;
        udp_seg_put(seg, &h);
        memcpy(seg + UDP_SEG_HDR, f[2] + off, n);
        CHECK(sendto(mcp_link_fd(a), seg, UDP_SEG_HDR + n, 0, (struct sockaddr *)&to, sizeof to) ==
                  (ssize_t)(UDP_SEG_HDR + n),
              "sendto");
    }
    /* frames 3 (plain) and 4 (segments) behind them in the same batch */
    CHECK_OK(lanai_tx(a, 0, f[3], len[3]));
    CHECK_OK(lanai_tx(a, 0, f[4], len[4]));
    CHECK_EQ_I64(lanai_flush(a), 2);

    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    int got = 0;
    CHECK_OK(rx_big(b, r, 65536, 5, &got));
    CHECK_EQ_I64(got, 5);
    for (int i = 0; i < got && i < 5; i++)
        CHECK(r->lens[i] == len[i] && frame_ok(r->mem[i], len[i], MCP_FT_DATA, (uint32_t)i),
              "frame %d: length %u, want %u", i, r->lens[i], len[i]);
    struct mcp_link_stats st;
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_frames, 5);
    CHECK_EQ_U64(st.rx_segmented, 3);
    CHECK_EQ_U64(st.rx_copied, 4); /* two lone segments, and frames 3 and 4 after them */
    CHECK_EQ_U64(st.rx_seg_incomplete, 0);
    udp_pair_close(&u);
    free(r);
}

/* A process that adopts a udp link's socket and receive ring from another (as a client does
 * from psid) and prefaults the ring (PSP_PREFAULT: every page read, every frame's status
 * written with an OR of 0) must not disturb frames already waiting there: the adopter reads
 * them all, whole and in order, and the ring's owner then finds none left. */
TEST(udp_ring_prefault_keeps_waiting_frames)
{
    int tmp[2];
    uint16_t port[2];
    for (int i = 0; i < 2; i++)
        REQUIRE((tmp[i] = bound_socket(&port[i])) >= 0, "a free port");
    char text[256], err[256] = "";
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 127.0.0.1:%u\n", port[0], port[1]);
    static struct psp_nodes nodes;
    REQUIRE(psp_nodes_parse(text, 0, &nodes, err, sizeof err) == 0, "nodes: %s", err);
    close(tmp[1]); /* node 1's link binds the port itself, with a receive ring */
    struct mcp_link_params p = {0};
    p.nodes = &nodes;
    p.node = 0;
    p.fd = tmp[0];
    p.ring_fd = -1;
    struct lanai_link *a = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(a, "open node 0: %s", err);
    p.node = 1;
    p.fd = -1;
    struct lanai_link *b = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(b, "open node 1: %s", err);
    if (mcp_link_ring_fd(b) < 0) {
        lanai_close(a);
        lanai_close(b);
        SKIP("no receive ring (needs CAP_NET_RAW)");
    }
    static uint8_t frames[40][SIM_MAXF];
    for (uint32_t i = 0; i < 40; i++) {
        uint32_t len = i % 2 ? 32 + i * 50 : SIM_MAXF - i;
        make_frame(frames[i], len, MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, 1, frames[i], len));
        if (i % 8 == 7)
            CHECK_EQ_I64(lanai_flush(a), 8);
    }
    usleep(50000); /* all 40 in b's ring, none read */
    p.fd = dup(mcp_link_fd(b));
    p.ring_fd = dup(mcp_link_ring_fd(b));
    p.prefault = 1;
    struct lanai_link *c = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(c, "adopt node 1's socket and ring: %s", err);
    CHECK(mcp_link_has_ring(c), "the adopter reads the ring");
    struct rxbufs *r = rxbufs_new();
    int got = 0;
    CHECK_OK(rx_until(c, r, SIM_MAXF, 40, &got));
    CHECK_EQ_I64(got, 40);
    for (int i = 0; i < got; i++) {
        uint32_t len = i % 2 ? 32 + (uint32_t)i * 50 : SIM_MAXF - (uint32_t)i;
        CHECK(r->lens[i] == len && frame_no(r->mem[i]) == (uint32_t)i &&
                  frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, (uint32_t)i),
              "frame %d: %u bytes, no %u", i, r->lens[i], frame_no(r->mem[i]));
    }
    CHECK_EQ_I64(lanai_rx(b, r->bufs, SIM_MAXF, r->lens, 64), 0);
    lanai_close(c);
    lanai_close(b);
    lanai_close(a);
    free(r);
}

/* A burst to several nodes, queued in one firmware pass, leaves in one sendmmsg: the link
 * batches by flush, not by destination (pulc/README.md: "a stream or a burst to many nodes
 * still goes out many frames to one sendmmsg"). */
TEST(udp_burst_to_three_nodes_is_one_sendmmsg)
{
    int fd[4];
    uint16_t port[4];
    for (int i = 0; i < 4; i++)
        REQUIRE((fd[i] = bound_socket(&port[i])) >= 0, "socket %d", i);
    char text[256], err[256] = "";
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 127.0.0.1:%u\n2 127.0.0.1:%u\n3 127.0.0.1:%u\n",
             port[0], port[1], port[2], port[3]);
    static struct psp_nodes nodes;
    REQUIRE(psp_nodes_parse(text, 0, &nodes, err, sizeof err) == 0, "nodes: %s", err);
    struct mcp_link_params p = {0};
    p.node = 0;
    p.nodes = &nodes;
    p.fd = fd[0];
    p.ring_fd = -1;
    struct lanai_link *l = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(l != NULL, "open: %s", err);

    static uint8_t frames[6][200];
    for (uint32_t i = 0; i < 6; i++) { /* two frames to each of nodes 1, 2, 3, interleaved */
        make_frame(frames[i], 100 + i, MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(l, (uint16_t)(1 + i % 3), frames[i], 100 + i));
    }
    CHECK_EQ_I64(lanai_flush(l), 6);
    struct mcp_link_stats st;
    CHECK_OK(mcp_link_stats(l, &st));
    CHECK_EQ_U64(st.tx_calls, 1);
    CHECK_EQ_U64(st.tx_frames, 6);
    for (int n = 1; n <= 3; n++) { /* each node got its two frames, in order */
        for (uint32_t k = 0; k < 2; k++) {
            uint32_t no = (uint32_t)(n - 1) + 3 * k;
            uint8_t b[256];
            ssize_t got = -1;
            double end = now_s() + 1.0;
            while (got < 0 && now_s() < end)
                got = recv(fd[n], b, sizeof b, MSG_DONTWAIT);
            CHECK(got == (ssize_t)(100 + no) && frame_ok(b, (uint32_t)got, MCP_FT_DATA, no),
                  "node %d frame %u: got %zd bytes", n, no, got);
        }
    }
    /* an empty flush makes no call */
    CHECK_EQ_I64(lanai_flush(l), 0);
    CHECK_OK(mcp_link_stats(l, &st));
    CHECK_EQ_U64(st.tx_calls, 1);
    lanai_close(l);
    for (int i = 1; i < 4; i++)
        close(fd[i]);
}

TEST(udp_refused_frames_counted)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, NULL, err, sizeof err) == 0, "open: %s", err);
    /* node 2 is the broadcast address: the kernel refuses it (no SO_BROADCAST) */
    uint8_t f[4][64];
    for (uint32_t i = 0; i < 4; i++)
        make_frame(f[i], 64, MCP_FT_DATA, i);
    CHECK_OK(lanai_tx(u.l[0], 1, f[0], 64));
    CHECK_OK(lanai_tx(u.l[0], 2, f[1], 64));
    CHECK_OK(lanai_tx(u.l[0], 1, f[2], 64));
    CHECK_OK(lanai_tx(u.l[0], 2, f[3], 64));
    CHECK_EQ_I64(lanai_flush(u.l[0]), 2);
    CHECK_EQ_I64(lanai_flush(u.l[0]), 0); /* nothing left queued */
    struct mcp_link_stats st;
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.tx_errors, 2);
    CHECK_EQ_U64(st.tx_frames, 2);
    struct rxbufs *r = rxbufs_new();
    int got = 0;
    rx_until(u.l[1], r, SIM_MAXF, 2, &got);
    CHECK_EQ_I64(got, 2);
    CHECK(got == 2 && frame_no(r->mem[0]) == 0 && frame_no(r->mem[1]) == 2, "frames 0 and 2");

    /* two frames to node 2 in a row go packed: the refused datagram counts each frame once,
     * and the frame to node 1 behind them still goes */
    CHECK_OK(lanai_tx(u.l[0], 2, f[1], 64));
    CHECK_OK(lanai_tx(u.l[0], 2, f[3], 64));
    CHECK_OK(lanai_tx(u.l[0], 1, f[0], 64));
    CHECK_EQ_I64(lanai_flush(u.l[0]), 1);
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.tx_errors, 4);
    CHECK_EQ_U64(st.tx_frames, 3);
    CHECK_EQ_U64(st.tx_packed, 2);
    got = 0;
    rx_until(u.l[1], r, SIM_MAXF, 1, &got);
    CHECK(got == 1 && frame_no(r->mem[0]) == 0, "frame 0 again (%d frames)", got);

    /* a node the table does not describe, or does not exist */
    CHECK_RC(lanai_tx(u.l[0], 3, f[0], 64), -EINVAL);
    u.nodes.node[2].present = 0; /* the link copied the table: no effect */
    CHECK_OK(lanai_tx(u.l[0], 2, f[0], 64));
    lanai_flush(u.l[0]);
    udp_pair_close(&u);
    free(r);

    /* without the node's line */
    static struct psp_nodes n;
    psp_nodes_parse("0 127.0.0.1:9\n2 127.0.0.1:10\n", 0, &n, err, sizeof err);
    int fd;
    uint16_t port;
    fd = bound_socket(&port);
    struct mcp_link_params p = {0};
    p.node = 0;
    p.nodes = &n;
    p.fd = fd;
    p.ring_fd = -1;
    struct lanai_link *l = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(l != NULL, "open: %s", err);
    CHECK_RC(lanai_tx(l, 1, f[0], 64), -EHOSTUNREACH);
    struct mcp_link_stats st2;
    mcp_link_stats(l, &st2);
    CHECK_EQ_U64(st2.tx_no_route, 1);
    lanai_close(l);
}

TEST(udp_bind_by_address)
{
    char err[256] = "";
    uint16_t port;
    int probe = bound_socket(&port);
    REQUIRE(probe >= 0, "socket");
    close(probe); /* the port is free now (tiny race with other programs: acceptable) */
    static struct psp_nodes n;
    char text[128];
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 192.0.2.1:%u\n", port, port);
    REQUIRE(psp_nodes_parse(text, 0, &n, err, sizeof err) == 0, "%s", err);
    struct mcp_link_params p = {0};
    p.nodes = &n;
    p.fd = -1;
    p.ring_fd = -1;
    struct lanai_link *l = mcp_link_udp_open(&p, err, sizeof err);
    REQUIRE(l != NULL, "open: %s", err);

    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(mcp_link_fd(l), (struct sockaddr *)&sa, &sl);
    CHECK_EQ_U64(ntohs(sa.sin_port), port);
    CHECK_EQ_U64(ntohl(sa.sin_addr.s_addr), INADDR_LOOPBACK);
    int sz = 0;
    socklen_t szl = sizeof sz;
    getsockopt(mcp_link_fd(l), SOL_SOCKET, SO_RCVBUF, &sz, &szl);
    CHECK(sz >= 4 << 20 || geteuid() != 0, "receive buffer %d bytes", sz);

    /* the same address again: taken */
    struct lanai_link *l2 = mcp_link_udp_open(&p, err, sizeof err);
    CHECK(l2 == NULL && contains(err, "already in use"), "\"%s\"", err);
    lanai_close(l);

    /* an address that is not on this host */
    p.node = 1;
    l2 = mcp_link_udp_open(&p, err, sizeof err);
    CHECK(l2 == NULL && contains(err, "not on this host"), "\"%s\"", err);
    p.node = 5;
    l2 = mcp_link_udp_open(&p, err, sizeof err);
    CHECK(l2 == NULL && contains(err, "node 5 is not in the nodes file"), "\"%s\"", err);
    lanai_close(l2);
}

TEST(udp_fault_injection)
{
    uint64_t seed = th_seed(21);
    struct mcp_fault_cfg cfg = {0};
    cfg.loss = 0.3;
    cfg.seed = seed;
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, &cfg, err, sizeof err) == 0, "open: %s", err);
    struct rxbufs *r = rxbufs_new();
    uint8_t f[64][128];
    unsigned got = 0;
    const unsigned total = 6400;
    for (unsigned i = 0; i < total; i += 64) {
        for (uint32_t k = 0; k < 64; k++) {
            make_frame(f[k], 128, MCP_FT_DATA, i + k);
            CHECK_OK(lanai_tx(u.l[0], 1, f[k], 128));
        }
        lanai_flush(u.l[0]);
        int n = 0;
        rx_until(u.l[1], r, SIM_MAXF, 1, &n); /* wait for the first, then take what is there */
        int more;
        while ((more = lanai_rx(u.l[1], r->bufs + n, SIM_MAXF, r->lens + n, 64 - n)) > 0)
            n += more;
        got += (unsigned)n;
    }
    struct mcp_link_stats st;
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.fault_dropped + got, total);
    CHECK(st.fault_dropped > 1920 - 180 && st.fault_dropped < 1920 + 180,
          "dropped %" PRIu64 " of %u at 30%%", st.fault_dropped, total);
    udp_pair_close(&u);

    /* duplication and corruption; the caller's frame stays intact */
    memset(&cfg, 0, sizeof cfg);
    cfg.dup = 1.0;
    cfg.corrupt = 1.0;
    cfg.seed = seed;
    REQUIRE(udp_pair_open(&u, &cfg, err, sizeof err) == 0, "open: %s", err);
    uint8_t orig[128];
    make_frame(f[0], 128, MCP_FT_DATA, 5);
    memcpy(orig, f[0], 128);
    CHECK_OK(lanai_tx(u.l[0], 1, f[0], 128));
    CHECK_EQ_I64(lanai_flush(u.l[0]), 2);
    CHECK_EQ_MEM(f[0], orig, 128);
    int n = 0;
    rx_until(u.l[1], r, SIM_MAXF, 2, &n);
    CHECK_EQ_I64(n, 2);
    unsigned d0 = 0, d1 = 0;
    for (int k = 0; k < 128; k++) {
        d0 += r->mem[0][k] != orig[k];
        d1 += r->mem[1][k] != orig[k];
    }
    CHECK(d0 == 1 && d1 == 0, "corrupted copy differs in %u bytes, duplicate in %u", d0, d1);
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.fault_duplicated, 1);
    CHECK_EQ_U64(st.fault_corrupted, 1);
    udp_pair_close(&u);
    free(r);
}

TEST(udp_queue_full_and_throughput)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(udp_pair_open(&u, NULL, err, sizeof err) == 0, "open: %s", err);
    static uint8_t f[1024];
    make_frame(f, sizeof f, MCP_FT_DATA, 0);
    int q = 0;
    while (lanai_tx(u.l[0], 1, f, sizeof f) == 0 && q < 100000)
        q++;
    CHECK(q >= 64 && q < 100000, "queue of %d frames", q);
    CHECK_RC(lanai_tx(u.l[0], 1, f, sizeof f), -EAGAIN);
    CHECK_EQ_I64(lanai_flush(u.l[0]), q);

    struct rxbufs *r = rxbufs_new();
    int n;
    double end = now_s() + 0.5;
    while (now_s() < end)
        lanai_rx(u.l[1], r->bufs, SIM_MAXF, r->lens, 64);

    /* frames per second, 1 KiB frames, batches of 64, one thread doing both ends */
    uint64_t sent = 0, got = 0;
    double t0 = now_s();
    while (now_s() - t0 < 0.5) {
        for (int k = 0; k < 64; k++)
            lanai_tx(u.l[0], 1, f, sizeof f);
        sent += (uint64_t)lanai_flush(u.l[0]);
        while ((n = lanai_rx(u.l[1], r->bufs, SIM_MAXF, r->lens, 64)) > 0)
            got += (uint64_t)n;
    }
    double dt = now_s() - t0;
    end = now_s() + 0.2;
    while (now_s() < end)
        if ((n = lanai_rx(u.l[1], r->bufs, SIM_MAXF, r->lens, 64)) > 0)
            got += (uint64_t)n;
    printf("# udp loopback: %.0f frames/s sent, %.0f received (1 KiB frames, %.1f MB/s)\n",
           sent / dt, got / dt, got * 1024.0 / dt / 1e6);
    CHECK(sent > 1000, "only %" PRIu64 " frames in %.2f s", sent, dt);
    CHECK(got >= sent * 99 / 100, "received %" PRIu64 " of %" PRIu64, got, sent);
    udp_pair_close(&u);
    free(r);
}

/* ---- the dispatcher and settings ---------------------------------------------------------- */

TEST(link_open_dispatch)
{
    static struct psp_nodes n;
    psp_nodes_single(&n, 9);
    struct mcp_link_params p = {0};
    p.nodes = &n;
    p.fd = -1;
    p.ring_fd = -1;
    char err[256] = "";
    CHECK(mcp_link_open("tcp", &p, err, sizeof err) == NULL, "tcp");
    CHECK(contains(err, "unknown link kind 'tcp'") && contains(err, "udp or eth"), "\"%s\"", err);
    CHECK(mcp_link_open("sim", &p, err, sizeof err) == NULL, "sim");
    CHECK(contains(err, "sim"), "\"%s\"", err);

    struct mcp_sim_net *net = mcp_sim_net_create(1, 64, NULL);
    struct lanai_link *s = mcp_sim_link_open(net, 0);
    struct mcp_link_stats st;
    CHECK_EQ_I64(mcp_link_fd(s), -1);
    CHECK_RC(mcp_link_stats(s, &st), -EINVAL);
    CHECK_EQ_I64(mcp_link_fd(NULL), -1);
    lanai_close(s);
    mcp_sim_net_destroy(net);
}

TEST(fault_settings)
{
    struct mcp_fault_cfg f;
    char err[256] = "";
    unsetenv("PSP_LINK_LOSS");
    unsetenv("PSP_LINK_DUP");
    unsetenv("PSP_LINK_CORRUPT");
    unsetenv("PSP_LINK_SEED");
    CHECK_OK(mcp_fault_from_settings(&f, err, sizeof err));
    CHECK(!mcp_fault_active(&f), "defaults inject nothing");
    setenv("PSP_LINK_LOSS", "0.01", 1);
    setenv("PSP_LINK_DUP", "0.5", 1);
    setenv("PSP_LINK_CORRUPT", "1", 1);
    setenv("PSP_LINK_SEED", "77", 1);
    CHECK_OK(mcp_fault_from_settings(&f, err, sizeof err));
    CHECK(f.loss == 0.01 && f.dup == 0.5 && f.corrupt == 1.0 && f.seed == 77, "values");
    setenv("PSP_LINK_LOSS", "1.5", 1);
    CHECK_RC(mcp_fault_from_settings(&f, err, sizeof err), -EINVAL);
    CHECK(contains(err, "PSP_LINK_LOSS"), "\"%s\"", err);
}

/* ---- eth link ----------------------------------------------------------------------------- */

TEST(eth_needs_cap_net_raw)
{
    static struct psp_nodes n;
    char err[256] = "";
    psp_nodes_parse("0 10.0.0.1 02:00:00:00:00:01\n", 9, &n, err, sizeof err);
    struct mcp_link_params p = {0};
    p.nodes = &n;
    p.fd = -1;
    p.ring_fd = -1;
    if (geteuid() != 0) {
        CHECK(mcp_link_eth_open(&p, err, sizeof err) == NULL, "opened without privileges?");
        CHECK(contains(err, "CAP_NET_RAW") && contains(err, "PSP_LINK=udp"), "\"%s\"", err);
        return;
    }
    int pfd[2];
    REQUIRE(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(pfd[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        struct lanai_link *l = mcp_link_eth_open(&p, err, sizeof err);
        if (l)
            snprintf(err, sizeof err, "opened without privileges");
        if (write(pfd[1], err, strlen(err) + 1) < 0)
            _exit(4);
        _exit(l ? 1 : 0);
    }
    close(pfd[1]);
    char msg[256] = "";
    ssize_t got = read(pfd[0], msg, sizeof msg - 1);
    close(pfd[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK(got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s", msg);
    CHECK(contains(msg, "eth link needs CAP_NET_RAW (run as root)") &&
              contains(msg, "PSP_LINK=udp"),
          "\"%s\"", msg);
}

#define MAC_A "02:50:53:00:00:0a"
#define MAC_B "02:50:53:00:00:0b"

/* Eth links of nodes 0 and 1 of n into l[0], l[1], each on a socket of its own: 1 when both
 * opened (a failure is recorded). */
static int open_eth_pair(const struct psp_nodes *n, struct lanai_link **l)
{
    char err[256] = "";
    for (int i = 0; i < 2; i++) {
        struct mcp_link_params p = {0};
        p.node = (uint16_t)i;
        p.nodes = n;
        p.fd = -1;
        p.ring_fd = -1;
        l[i] = mcp_link_open("eth", &p, err, sizeof err);
        if (!CHECK(l[i] != NULL, "open node %d: %s", i, err))
            return 0;
    }
    return 1;
}

/* The eth checks proper, inside the private namespace with veth pspa <-> pspb up. */
static void eth_checks(void)
{
    static struct psp_nodes n;
    char err[256] = "";
    /* node 0 found by its MAC, node 1 by the interface in the file, node 2 has no MAC */
    REQUIRE(psp_nodes_parse("0 10.0.0.1 " MAC_A "\n1 10.0.0.2 " MAC_B " pspb\n2 10.0.0.3\n", 9, &n,
                            err, sizeof err) == 0,
            "%s", err);
    struct lanai_link *l[2];
    REQUIRE(open_eth_pair(&n, l), "the links of nodes 0 and 1");
    CHECK_EQ_STR(l[0]->kind, "eth");
    CHECK_EQ_U64(l[0]->max_frame, 1500);
    CHECK(mcp_link_fd(l[1]) >= 0, "fd");

    struct rxbufs *r = rxbufs_new();
    static uint8_t f[50][1500];
    for (uint32_t i = 0; i < 50; i++) {
        uint32_t len = 32 + i * 29;
        make_frame(f[i], len, MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(l[0], 1, f[i], len));
    }
    CHECK_RC(lanai_tx(l[0], 1, f[0], 1501), -EMSGSIZE);
    CHECK_EQ_I64(lanai_flush(l[0]), 50);
    int got = 0;
    rx_until(l[1], r, SIM_MAXF, 50, &got);
    CHECK_EQ_I64(got, 50);
    for (int i = 0; i < got; i++) {
        uint32_t no = frame_no(r->mem[i]);
        CHECK(no == (uint32_t)i && r->lens[i] == 32 + no * 29 &&
                  frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, no),
              "frame %d (no %u, len %u)", i, no, r->lens[i]);
    }
    /* no outgoing copies at the sender */
    CHECK_EQ_I64(lanai_rx(l[0], r->bufs, SIM_MAXF, r->lens, 64), 0);

    /* node 1's socket handed over (as psid hands it to a client): the new link works alike */
    {
        struct mcp_link_params p = {0};
        p.node = 1;
        p.nodes = &n;
        p.fd = dup(mcp_link_fd(l[1]));
        p.ring_fd = -1;
        lanai_close(l[1]);
        l[1] = mcp_link_open("eth", &p, err, sizeof err);
        REQUIRE(l[1] != NULL, "open from a descriptor: %s", err);
        CHECK_EQ_U64(l[1]->max_frame, 1500);
        CHECK_EQ_I64(mcp_link_fd(l[1]), p.fd);
        CHECK_OK(lanai_tx(l[0], 1, f[7], 32 + 7 * 29));
        CHECK_EQ_I64(lanai_flush(l[0]), 1);
        got = 0;
        rx_until(l[1], r, SIM_MAXF, 1, &got);
        CHECK(got == 1 && frame_ok(r->mem[0], r->lens[0], MCP_FT_DATA, 7), "got %d", got);
        p.fd = socket(AF_INET, SOCK_DGRAM, 0); /* not a packet socket: refused, kept */
        p.ring_fd = -1;
        CHECK(mcp_link_open("eth", &p, err, sizeof err) == NULL &&
                  contains(err, "not a packet socket"),
              "\"%s\"", err);
        CHECK(fcntl(p.fd, F_GETFD) >= 0, "a failed open closed the caller's descriptor");
        close(p.fd);
    }

    /* back, truncated */
    lanai_tx(l[1], 0, f[49], 32 + 49 * 29);
    lanai_flush(l[1]);
    got = 0;
    rx_until(l[0], r, 100, 1, &got);
    CHECK_EQ_I64(got, 1);
    CHECK_EQ_U64(r->lens[0], 101);
    CHECK_EQ_MEM(r->mem[0], f[49], 100);

    /* a peer without MAC */
    CHECK_RC(lanai_tx(l[0], 2, f[0], 64), -EHOSTUNREACH);
    struct mcp_link_stats st;
    mcp_link_stats(l[0], &st);
    CHECK_EQ_U64(st.tx_no_route, 1);
    CHECK_EQ_U64(st.tx_frames, 51);
    CHECK_EQ_U64(st.rx_truncated, 1);

    /* a minimum-size frame padded by a NIC: trimmed to the length its header gives */
    int raw = socket(AF_PACKET, SOCK_RAW, htons(MCP_ETHERTYPE));
    REQUIRE(raw >= 0, "raw socket: %s", strerror(errno));
    struct sockaddr_ll ll = {0};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(MCP_ETHERTYPE);
    ll.sll_ifindex = (int)if_nametoindex("pspa");
    REQUIRE(bind(raw, (struct sockaddr *)&ll, sizeof ll) == 0, "bind: %s", strerror(errno));
    uint8_t pkt[60] = {0x02, 0x50, 0x53, 0, 0, 0x0b, 0x02, 0x50, 0x53, 0, 0, 0x0a, 0x88, 0xb5};
    make_frame(pkt + 14, 40, MCP_FT_DATA, 3);
    mcp_put_le16(pkt + 14 + 20, 8); /* header + 8 payload bytes, 6 bytes of padding */
    CHECK(send(raw, pkt, sizeof pkt, 0) == (ssize_t)sizeof pkt, "send: %s", strerror(errno));
    got = 0;
    rx_until(l[1], r, SIM_MAXF, 1, &got);
    CHECK_EQ_I64(got, 1);
    CHECK_EQ_U64(r->lens[0], MCP_WIRE_HDR + 8);
    CHECK_EQ_I64(lanai_rx(l[0], r->bufs, SIM_MAXF, r->lens, 64), 0); /* raw's copy not seen */
    close(raw);
    for (int i = 0; i < 2; i++)
        lanai_close(l[i]);

    /* interface from the params; larger MTU; loss injection */
    CHECK(system("ip link set pspa mtu 9000 && ip link set pspb mtu 9000") == 0, "set mtu");
    psp_nodes_parse("0 10.0.0.1 " MAC_A "\n1 10.0.0.2 " MAC_B "\n", 9, &n, err, sizeof err);
    struct mcp_link_params p = {0};
    p.nodes = &n;
    p.fd = -1;
    p.ring_fd = -1;
    p.ifname = "pspa";
    p.fault.loss = 0.5;
    p.fault.seed = 8;
    l[0] = mcp_link_eth_open(&p, err, sizeof err);
    REQUIRE(l[0] != NULL, "%s", err);
    CHECK_EQ_U64(l[0]->max_frame, 9000);
    memset(&p.fault, 0, sizeof p.fault);
    p.node = 1;
    p.ifname = NULL;
    l[1] = mcp_link_eth_open(&p, err, sizeof err); /* found by MAC */
    REQUIRE(l[1] != NULL, "%s", err);
    static uint8_t jumbo[9000];
    unsigned total = 0, recvd = 0;
    for (int round = 0; round < 20; round++) {
        for (uint32_t k = 0; k < 50; k++) {
            make_frame(jumbo, 9000, MCP_FT_DATA, k);
            lanai_tx(l[0], 1, jumbo, k == 0 ? 9000 : 100);
            total++;
        }
        lanai_flush(l[0]);
        double end = now_s() + 0.05;
        int m;
        while (now_s() < end)
            if ((m = lanai_rx(l[1], r->bufs, SIM_MAXF, r->lens, 64)) > 0)
                recvd += (unsigned)m;
    }
    mcp_link_stats(l[0], &st);
    CHECK_EQ_U64(recvd + st.fault_dropped, total);
    CHECK(st.fault_dropped > 400 && st.fault_dropped < 600, "dropped %" PRIu64 " of %u",
          st.fault_dropped, total);
    for (int i = 0; i < 2; i++)
        lanai_close(l[i]);

    /* an interface that is down, a MAC no interface has */
    CHECK(system("ip link set pspb down") == 0, "down");
    p.ifname = "pspb";
    CHECK(mcp_link_eth_open(&p, err, sizeof err) == NULL && contains(err, "is down"), "\"%s\"",
          err);
    psp_nodes_parse("0 10.0.0.1 02:00:00:00:00:99\n", 9, &n, err, sizeof err);
    p.node = 0;
    p.ifname = NULL;
    CHECK(mcp_link_eth_open(&p, err, sizeof err) == NULL && contains(err, "no interface"), "\"%s\"",
          err);
    free(r);
}

/* The socket behind an eth link reads through a receive ring (TPACKET_V2), or not (V1). */
static int has_ring(struct lanai_link *l)
{
    int v = -1;
    socklen_t len = sizeof v;
    if (getsockopt(mcp_link_fd(l), SOL_PACKET, PACKET_VERSION, &v, &len) != 0)
        return -1;
    return v == TPACKET_V2;
}

/* Send n <= 50 frames of 64 bytes numbered from first in one flush: 0, or -1. */
static int send_batch(struct lanai_link *tx, uint32_t first, uint32_t n)
{
    static uint8_t f[50][64];
    for (uint32_t i = 0; i < n; i++) {
        make_frame(f[i], 64, MCP_FT_DATA, first + i);
        if (lanai_tx(tx, 1, f[i], 64) != 0)
            return -1;
    }
    return lanai_flush(tx) == (int)n ? 0 : -1;
}

/* Send count frames numbered from first, 50 at a time, each batch read from readers[] in
 * turn (batch k by readers[k % nreaders]); the numbers read, in the order read, into seen. */
static int ring_stream(struct lanai_link *tx, struct lanai_link **readers, int nreaders,
                       struct rxbufs *r, uint32_t first, uint32_t count, uint32_t *seen)
{
    uint32_t got_all = 0;
    for (uint32_t k = 0; k * 50 < count; k++) {
        uint32_t n = count - k * 50 < 50 ? count - k * 50 : 50;
        if (send_batch(tx, first + k * 50, n) != 0)
            return -1;
        int got = 0;
        rx_until(readers[k % (uint32_t)nreaders], r, SIM_MAXF, (int)n, &got);
        for (int i = 0; i < got; i++)
            if (frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, frame_no(r->mem[i])))
                seen[got_all++] = frame_no(r->mem[i]);
    }
    return (int)got_all;
}

/* Send count frames numbered from first, 50 at a time, and read none. */
static int send_unread(struct lanai_link *tx, uint32_t first, uint32_t count)
{
    for (uint32_t k = 0; k * 50 < count; k++)
        if (send_batch(tx, first + k * 50, count - k * 50 < 50 ? count - k * 50 : 50) != 0)
            return -1;
    return 0;
}

/* Read from l until nothing more comes for 200 ms (at most max frames): the numbers of the
 * frames read, in the order read, into seen; how many. */
static uint32_t drain_ring(struct lanai_link *l, struct rxbufs *r, uint32_t *seen, uint32_t max)
{
    uint32_t n = 0;
    double quiet = now_s() + 0.2;
    while (n < max && now_s() < quiet) {
        int m = lanai_rx(l, r->bufs, SIM_MAXF, r->lens, 64);
        for (int i = 0; i < m && n < max; i++)
            if (frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, frame_no(r->mem[i])))
                seen[n++] = frame_no(r->mem[i]);
        if (m > 0)
            quiet = now_s() + 0.2;
    }
    return n;
}

/*
 * The receive ring, in the namespace of eth_checks (veth pspa <-> pspb up, MTU 1500): shared by
 * every link on one socket, robust against a reader that died halfway, and off on request.
 */
static void eth_ring_checks(void)
{
    static struct psp_nodes n;
    char err[256] = "";
    CHECK(system("ip link set pspb up && ip link set pspa mtu 1500 && ip link set pspb mtu 1500") ==
              0,
          "up");
    REQUIRE(psp_nodes_parse("0 10.0.0.1 " MAC_A " pspa\n1 10.0.0.2 " MAC_B " pspb\n", 9, &n, err,
                            sizeof err) == 0,
            "%s", err);
    struct lanai_link *l[3];
    REQUIRE(open_eth_pair(&n, l), "the links of nodes 0 and 1");
    CHECK_EQ_I64(has_ring(l[1]), 1);
    /* a second link on node 1's socket (a client psid handed it to), node 1's kept open */
    struct mcp_link_params p = {0};
    p.node = 1;
    p.nodes = &n;
    p.fd = dup(mcp_link_fd(l[1]));
    p.ring_fd = -1;
    l[2] = mcp_link_open("eth", &p, err, sizeof err);
    REQUIRE(l[2] != NULL, "open from a descriptor: %s", err);

    struct rxbufs *r = rxbufs_new();
    REQUIRE(r, "memory");
    struct pkt_ring geo;
    REQUIRE(pkt_ring_adopt(&geo, mcp_link_fd(l[1]), 1500, 8u << 20) == 1, "a ring to map");
    /* Whether anything waits (what the firmware asks before its receive step): nothing yet,
     * then the frame sent, then nothing once it is read. */
    CHECK_EQ_I64(lanai_pending(l[1]), 0);
    uint8_t probe[64];
    make_frame(probe, 64, MCP_FT_DATA, 424242);
    CHECK_OK(lanai_tx(l[0], 1, probe, 64));
    CHECK_EQ_I64(lanai_flush(l[0]), 1);
    double until = now_s() + 1.0;
    while (!lanai_pending(l[2]) && now_s() < until)
        ;
    CHECK_EQ_I64(lanai_pending(l[1]), 1);
    int got = 0;
    rx_until(l[2], r, SIM_MAXF, 1, &got);
    CHECK(got == 1 && frame_no(r->mem[0]) == 424242, "got %d", got);
    CHECK_EQ_I64(lanai_pending(l[1]), 0);

    /* Each frame's FCS, taken as it is copied out of the ring (lanai.h rx_fcs). */
    static const uint32_t flen[] = {64, 300, 1000, 1500};
    static uint8_t ff[4][1500];
    for (uint32_t i = 0; i < 4; i++) {
        make_frame(ff[i], flen[i], MCP_FT_DATA, 500 + i);
        CHECK_OK(lanai_tx(l[0], 1, ff[i], flen[i]));
    }
    CHECK_EQ_I64(lanai_flush(l[0]), 4);
    got = 0;
    until = now_s() + 1.0;
    while (got < 4 && now_s() < until) {
        uint64_t fcs[8];
        int m = lanai_rx_fcs(l[1], r->bufs + got, SIM_MAXF, r->lens + got, fcs, 4 - got);
        for (int i = 0; i < m; i++)
            CHECK(r->lens[got + i] == flen[got + i] &&
                      fcs_right(r->mem[got + i], r->lens[got + i], fcs[i]),
                  "frame %d (%u bytes): FCS %llx", got + i, r->lens[got + i],
                  (unsigned long long)fcs[i]);
        got += m > 0 ? m : 0;
    }
    CHECK_EQ_I64(got, 4);

    /* Both read one ring, in turns, over several laps of it: every frame once, in order. */
    uint32_t laps = 3 * geo.frame_nr + 77;
    uint32_t *seen = calloc(laps, sizeof *seen);
    REQUIRE(seen, "memory");
    struct lanai_link *both[2] = {l[1], l[2]};
    got = ring_stream(l[0], both, 2, r, 0, laps, seen);
    CHECK_EQ_I64(got, laps);
    uint32_t bad = 0;
    for (int i = 0; i < got; i++)
        bad += seen[i] != (uint32_t)i;
    CHECK(bad == 0, "%u of %d frames out of place (first: #0 = %u)", bad, got, seen[0]);

    /* A full ring (the kernel drops what comes on top): every frame in it is read, the newest
     * too, and what comes after is read as it comes.  A reader that gave the newest frame
     * back as a dead reader's leftover lost it and, worse, stood a lap ahead of the kernel:
     * what came next stayed in the ring unseen until a whole lap more had come (multisend2
     * between two nodes: the NIC heard nothing for seconds and gave its peer up). */
    uint32_t over = geo.frame_nr + 20;
    uint32_t *full = calloc(over, sizeof *full);
    REQUIRE(full, "memory");
    REQUIRE(send_unread(l[0], 7000000, over) == 0, "sent");
    uint32_t n_full = drain_ring(l[1], r, full, over);
    CHECK_EQ_U64(n_full, geo.frame_nr);
    for (uint32_t i = 0; i < n_full; i++)
        if (full[i] != 7000000 + i) {
            CHECK(0, "full ring: frame %u is #%u", i, full[i]);
            break;
        }
    got = ring_stream(l[0], both, 2, r, 8000000, 10, seen);
    CHECK_EQ_I64(got, 10);
    CHECK(got > 0 && seen[0] == 8000000 && seen[got - 1] == 8000000 + (uint32_t)got - 1,
          "after a full ring: first #%u", got > 0 ? seen[0] : 0);
    free(full);

    /* A reader that died after moving on but before giving its frame back: the next reader
     * gives it back, and the kernel goes past it on the next lap (else every frame from then
     * on is dropped). */
    uint8_t one[64];
    make_frame(one, 64, MCP_FT_DATA, 999999);
    CHECK_OK(lanai_tx(l[0], 1, one, 64));
    CHECK_EQ_I64(lanai_flush(l[0]), 1);
    const uint8_t *d;
    uint32_t snap = 0, wire = 0, net = 0;
    uint8_t type;
    double end = now_s() + 1.0;
    int peeked = 0;
    while (!(peeked = pkt_ring_peek(&geo, &d, &snap, &wire, &type, &net)) && now_s() < end)
        ;
    REQUIRE(peeked == 1, "the frame never reached the ring");
    CHECK_EQ_U64(wire, 14 + 64);
    pkt_ring_move_on(&geo); /* moved on, then "died" */
    got = ring_stream(l[0], both, 2, r, 0, geo.frame_nr + 100, seen);
    CHECK_EQ_I64(got, geo.frame_nr + 100);
    for (int i = 0; i < got; i++)
        if (seen[i] != (uint32_t)i) {
            CHECK(0, "after a dead reader: frame %d is #%u", i, seen[i]);
            break;
        }
    struct mcp_link_stats st;
    mcp_link_stats(l[1], &st);
    struct mcp_link_stats st2;
    mcp_link_stats(l[2], &st2);
    CHECK_EQ_U64(st.rx_frames + st2.rx_frames,
                 1 + 4 + laps + n_full + 10 + geo.frame_nr + 100); /* probes too */
    pkt_ring_unmap(&geo);
    lanai_close(l[2]);
    lanai_close(l[1]);

    /* PSP_ETH_RING=0: no ring, frames read with recvmmsg */
    setenv("PSP_ETH_RING", "0", 1);
    p.fd = -1;
    p.ring_fd = -1;
    l[1] = mcp_link_open("eth", &p, err, sizeof err);
    unsetenv("PSP_ETH_RING");
    REQUIRE(l[1] != NULL, "open without a ring: %s", err);
    CHECK_EQ_I64(has_ring(l[1]), 0);
    struct lanai_link *plain[1] = {l[1]};
    got = ring_stream(l[0], plain, 1, r, 5, 500, seen);
    CHECK_EQ_I64(got, 500);
    CHECK(got > 0 && seen[0] == 5 && seen[got - 1] == 504, "first #%u", seen[0]);
    setenv("PSP_ETH_RING", "2", 1);
    CHECK(mcp_link_open("eth", &p, err, sizeof err) == NULL && contains(err, "PSP_ETH_RING"),
          "\"%s\"", err);
    unsetenv("PSP_ETH_RING");
    lanai_close(l[1]);
    lanai_close(l[0]);
    free(seen);
    free(r);
}

/* ---- udp link: the receive ring (root, in a private namespace) ------------------------------ */

/* Two udp links on 127.0.0.1 that open their own sockets (so that they make receive rings),
 * on ports that were free a moment ago. */
static int udp_own_pair_open(struct udp_pair *u, char *err, size_t errlen)
{
    uint16_t port[2];
    char text[128];
    for (int i = 0; i < 2; i++) {
        int fd = bound_socket(&port[i]);
        if (fd < 0)
            return -1;
        close(fd);
    }
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 127.0.0.1:%u\n", port[0], port[1]);
    if (psp_nodes_parse(text, 0, &u->nodes, err, errlen) != 0)
        return -1;
    static const int own[2] = {-1, -1};
    return udp_pair_links(u, own, NULL, err, errlen);
}

/* Read from l until want frames came, a second passed, or (want 0) 3000 looks found nothing
 * more (the UDP socket is read every 1024th, UDP_SOCK_LOOKS): how many, their numbers in
 * order in seen (lengths checked against len_of, every frame's FCS against its bytes). */
static int udp_ring_read(struct lanai_link *l, struct bigbufs *r, int want, uint32_t *seen,
                         const uint32_t *len_of)
{
    int got = 0, quiet = 0;
    double end = now_s() + 1.0;
    while ((want ? got < want : quiet < 3000) && now_s() < end) {
        uint64_t fcs[16];
        int n = lanai_rx_fcs(l, r->bufs, 65536, r->lens, fcs, 16);
        quiet = n > 0 ? 0 : quiet + 1;
        for (int i = 0; i < n; i++) {
            uint32_t no = frame_no(r->mem[i]);
            CHECK(frame_ok(r->mem[i], r->lens[i], MCP_FT_DATA, no) &&
                      (!len_of || r->lens[i] == len_of[no]),
                  "frame %d: number %u, length %u", got + i, no, r->lens[i]);
            /* without a ring a frame the kernel read into place has none */
            CHECK(fcs_right(r->mem[i], r->lens[i], fcs[i]) ||
                      (mcp_link_ring_fd(l) < 0 && fcs[i] == 0),
                  "frame %d (%u bytes): FCS %llx", got + i, r->lens[i], (unsigned long long)fcs[i]);
            seen[got + i] = no;
        }
        got += n > 0 ? n : 0;
    }
    return got;
}

/* Frames corrupted on the way (PSP_LINK_CORRUPT 1: one byte each, past the header here): the
 * receiving link's FCS is of the bytes that arrived, so it disagrees with the sender's. */
static void udp_ring_fcs_of_corrupted_frames(struct bigbufs *r)
{
    static struct udp_pair u;
    char err[256] = "";
    struct mcp_fault_cfg fault = {.corrupt = 1.0, .seed = 7, .reorder_max = 1};
    uint16_t port[2];
    char text[128];
    for (int i = 0; i < 2; i++) {
        int fd = bound_socket(&port[i]);
        REQUIRE(fd >= 0, "socket");
        close(fd);
    }
    snprintf(text, sizeof text, "0 127.0.0.1:%u\n1 127.0.0.1:%u\n", port[0], port[1]);
    REQUIRE(psp_nodes_parse(text, 0, &u.nodes, err, sizeof err) == 0, "nodes: %s", err);
    static const int own[2] = {-1, -1};
    REQUIRE(udp_pair_links(&u, own, &fault, err, sizeof err) == 0, "open: %s", err);
    REQUIRE(mcp_link_ring_fd(u.l[1]) >= 0, "the receiver has a ring");
    static const uint32_t len[] = {100, 1472, 5000, 44u * 1464u};
    enum { N = sizeof len / sizeof len[0] };
    static uint8_t f[N][44 * 1464];
    for (uint32_t i = 0; i < N; i++) {
        make_frame(f[i], len[i], MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(u.l[0], 1, f[i], len[i]));
    }
    CHECK_EQ_I64(lanai_flush(u.l[0]), N);
    int got = 0, changed = 0;
    double end = now_s() + 1.0;
    while (got < N && now_s() < end) {
        uint64_t fcs[16];
        int n = lanai_rx_fcs(u.l[1], r->bufs, 65536, r->lens, fcs, 16);
        for (int i = 0; i < n && got + i < N; i++) {
            uint32_t k = (uint32_t)(got + i), flen = r->lens[i];
            CHECK(flen == len[k], "frame %u: length %u", k, flen);
            CHECK(fcs_right(r->mem[i], flen, fcs[i]), "frame %u: FCS of what arrived", k);
            if (flen == len[k] && memcmp(r->mem[i] + 32, f[k] + 32, flen - 32) != 0) {
                changed++;
                CHECK((uint32_t)fcs[i] != mcp_crc32c(0, f[k] + 32, flen - 32),
                      "frame %u: the FCS is not the sender's", k);
            }
        }
        got += n > 0 ? n : 0;
    }
    CHECK_EQ_I64(got, N);
    struct mcp_link_stats st;
    mcp_link_stats(u.l[0], &st);
    CHECK_EQ_U64(st.fault_corrupted, N);
    CHECK(changed >= N - 1, "%d of %d frames changed past their header", changed, (int)N);
    udp_pair_close(&u);
}

/*
 * In the private namespace with loopback at MTU 1500 (so that a datagram over 1472 bytes goes
 * as IP fragments): datagrams read from the ring whatever their kind, fragments through the
 * UDP socket, the ring shared with a link that adopted it, "nothing waits", the setting.
 */
static void udp_ring_checks(void)
{
    static struct udp_pair u;
    char err[256] = "";
    REQUIRE(system("ip link set lo mtu 1500 up") == 0, "loopback up");
    REQUIRE(udp_own_pair_open(&u, err, sizeof err) == 0, "open: %s", err);
    struct lanai_link *a = u.l[0], *b = u.l[1];
    REQUIRE(mcp_link_ring_fd(a) >= 0 && mcp_link_ring_fd(b) >= 0, "both links have a ring");
    CHECK_EQ_U64(a->max_frame, 44u * 1464u);
    CHECK_EQ_I64(lanai_pending(b), 0);

    /* plain, one segment over, many, the largest; each twice so both lengths repeat */
    static const uint32_t len[] = {8, 1472, 1473, 5000, 44u * 1464u, 64, 2928, 2929};
    enum { N = sizeof len / sizeof len[0] };
    static uint8_t f[N][44 * 1464];
    for (uint32_t i = 0; i < N; i++) {
        make_frame(f[i], len[i], MCP_FT_DATA, i);
        CHECK_OK(lanai_tx(a, 1, f[i], len[i]));
    }
    CHECK_EQ_I64(lanai_flush(a), N);
    double end = now_s() + 1.0;
    while (!lanai_pending(b) && now_s() < end)
        ;
    CHECK_EQ_I64(lanai_pending(b), 1);
    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    uint32_t seen[64];
    CHECK_EQ_I64(udp_ring_read(b, r, N, seen, len), N);
    for (uint32_t i = 0; i < N; i++)
        CHECK(seen[i] == i, "frame %u read as #%u: in order", i, seen[i]);
    CHECK_EQ_I64(lanai_pending(b), 0);
    struct mcp_link_stats st;
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_frames, N);
    CHECK_EQ_U64(st.rx_segmented, 5);
    CHECK_EQ_U64(st.rx_copied, 0); /* nothing came through the UDP socket */
    CHECK_EQ_U64(st.rx_seg_incomplete, 0);
    /* packed datagrams through the ring (several under the MTU), read a few frames a look */
    CHECK_EQ_U64(pack_burst(a, b, 3), 26);
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_packed, 26);
    CHECK_EQ_U64(st.rx_dropped_nobuf, 0);
    CHECK_EQ_U64(st.rx_copied, 0);
    /* read 10 a look: a packed datagram that does not fit the buffers left waits in the ring
     * (none of its frames is kept in this process, where another one sharing the ring would
     * not see them); only a first datagram larger than all the buffers is kept in part */
    uint64_t carried = st.rx_carried;
    CHECK_EQ_U64(pack_burst(a, b, 10), 26);
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_carried - carried, 0);
    CHECK_EQ_U64(st.rx_packed, 52);
    udp_ring_fcs_of_corrupted_frames(r);

    /* A sender without GSO (a plain socket here): a 3000-byte frame goes as IP fragments,
     * which the ring does not take; the UDP socket keeps it, read within UDP_SOCK_LOOKS looks.
     * A small datagram goes to the ring only: each arrives once. */
    int raw = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr = u.nodes.node[1].ip,
                             .sin_port = htons(u.nodes.node[1].port)};
    static const uint32_t plain_len[] = {3000, 100};
    static uint8_t plain[3000];
    for (uint32_t i = 0; i < 2; i++) {
        make_frame(plain, plain_len[i], MCP_FT_DATA, i);
        CHECK(sendto(raw, plain, plain_len[i], 0, (struct sockaddr *)&to, sizeof to) ==
                  (ssize_t)plain_len[i],
              "sendto: %s", strerror(errno));
    }
    close(raw);
    CHECK_EQ_I64(udp_ring_read(b, r, 0, seen, plain_len), 2);
    CHECK(seen[0] + seen[1] == 1, "frames 0 and 1, once each (read %u, %u)", seen[0], seen[1]);
    mcp_link_stats(b, &st);
    CHECK_EQ_U64(st.rx_copied, 1); /* the fragmented one */

    /* A link that adopted node 1's sockets (a psid client) reads the same ring, in turns with
     * node 1's own link: every frame once, in order. */
    struct mcp_link_params p = {0};
    p.node = 1;
    p.nodes = &u.nodes;
    p.fd = dup(mcp_link_fd(b));
    p.ring_fd = dup(mcp_link_ring_fd(b));
    struct lanai_link *c = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(c != NULL, "adopt: %s", err);
    CHECK(mcp_link_ring_fd(c) >= 0, "the adopter reads the ring");
    uint32_t total = 0, next = 100;
    for (int turn = 0; turn < 6; turn++) {
        for (uint32_t i = 0; i < 10; i++) {
            make_frame(f[0], 64, MCP_FT_DATA, next + i);
            CHECK_OK(lanai_tx(a, 1, f[0], 64));
            CHECK_EQ_I64(lanai_flush(a), 1);
        }
        int got = udp_ring_read(turn % 2 ? b : c, r, 10, seen, NULL);
        CHECK_EQ_I64(got, 10);
        for (int i = 0; i < got; i++)
            total += seen[i] == next + (uint32_t)i;
        next += 10;
    }
    CHECK_EQ_U64(total, 60);
    lanai_close(c);

    /* A ring descriptor that is not one: refused, both descriptors left to the caller. */
    p.fd = dup(mcp_link_fd(b));
    p.ring_fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(mcp_link_open("udp", &p, err, sizeof err) == NULL &&
              contains(err, "not the receive ring"),
          "refused: %s", err);
    CHECK(fcntl(p.fd, F_GETFD) >= 0 && fcntl(p.ring_fd, F_GETFD) >= 0, "descriptors kept");
    close(p.fd);
    close(p.ring_fd);
    udp_pair_close(&u);

    /* PSP_UDP_RING=0: no ring, frames still flow; a bad value is refused by name */
    setenv("PSP_UDP_RING", "0", 1);
    REQUIRE(udp_own_pair_open(&u, err, sizeof err) == 0, "open: %s", err);
    CHECK_EQ_I64(mcp_link_ring_fd(u.l[1]), -1);
    CHECK_OK(lanai_tx(u.l[0], 1, f[3], len[3]));
    CHECK_EQ_I64(lanai_flush(u.l[0]), 1);
    CHECK_EQ_I64(udp_ring_read(u.l[1], r, 1, seen, len), 1);
    udp_pair_close(&u);
    setenv("PSP_UDP_RING", "2", 1);
    CHECK(udp_own_pair_open(&u, err, sizeof err) != 0 && contains(err, "PSP_UDP_RING"),
          "PSP_UDP_RING=2 refused: %s", err);
    unsetenv("PSP_UDP_RING");
    free(r);
}

/* ---- udp link: small frames as Ethernet frames (udp_eth.h; root, private namespace) --------- */

#define ETH_IP_A "198.18.9.1"
#define ETH_IP_B "198.18.9.2"

/* Nodes 0 on pspa and 1 on pspb, with their MACs (with_macs) or without; each link opens its
 * own sockets. */
static int udp_eth_pair_open(struct udp_pair *u, int with_macs, char *err, size_t errlen)
{
    char text[256];
    snprintf(text, sizeof text, "0 " ETH_IP_A ":18371 %s\n1 " ETH_IP_B ":18372 %s\n",
             with_macs ? MAC_A " pspa" : "", with_macs ? MAC_B " pspb" : "");
    if (psp_nodes_parse(text, 0, &u->nodes, err, errlen) != 0)
        return -1;
    static const int own[2] = {-1, -1};
    return udp_pair_links(u, own, NULL, err, errlen);
}

/* Send frames numbered no.. of the lengths len[0..n) from a to node to (one flush) and read
 * them at b: all, in order, intact, each with its FCS. */
static void eth_exchange(struct lanai_link *a, uint16_t to, struct lanai_link *b, struct bigbufs *r,
                         const uint32_t *len, uint32_t n, uint32_t no)
{
    static uint8_t f[16][44 * 1464];
    uint32_t len_of[64] = {0}, seen[64];
    REQUIRE(n <= 16 && no + n <= 64, "test too large");
    for (uint32_t i = 0; i < n; i++) {
        make_frame(f[i], len[i], MCP_FT_DATA, no + i);
        len_of[no + i] = len[i];
        CHECK_OK(lanai_tx(a, to, f[i], len[i]));
    }
    CHECK_EQ_I64(lanai_flush(a), n);
    CHECK_EQ_I64(udp_ring_read(b, r, (int)n, seen, len_of), n);
    for (uint32_t i = 0; i < n; i++)
        CHECK(seen[i] == no + i, "frame %u read as #%u: in order", no + i, seen[i]);
}

/*
 * Two nodes in one namespace, on the two ends of veth pair pspa <-> pspb (their datagrams go
 * by loopback, their Ethernet frames by the pair): frames go as datagrams until the other
 * side is heard to read Ethernet frames, then the small ones as Ethernet frames, the large
 * ones still as datagrams, all in order; a link without a ring, or with PSP_UDP_ETH=0, is sent
 * datagrams only; a padded frame is cut back to its length.
 */
static void udp_eth_checks(void)
{
    static struct udp_pair u;
    char err[256] = "";
    struct mcp_link_stats sa, sb;
    REQUIRE(udp_eth_pair_open(&u, 1, err, sizeof err) == 0, "open: %s", err);
    struct lanai_link *a = u.l[0], *b = u.l[1];
    REQUIRE(mcp_link_ring_fd(a) >= 0 && mcp_link_ring_fd(b) >= 0, "both links have a ring");
    struct bigbufs *r = bigbufs_new();
    REQUIRE(r != NULL, "memory");
    /* each said hello when opened: b's reached a, a's came before b had a ring */
    mcp_link_stats(a, &sa);
    CHECK_EQ_U64(sa.tx_hello, 1);
    static const uint32_t small[] = {8, 100, 1472};
    static const uint32_t mixed[] = {64, 5000, 32, 44u * 1464u, 1472, 1473, 200};
    /* a has heard nothing: datagrams; b, reading one, says hello again */
    eth_exchange(a, 1, b, r, small, 3, 0);
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth, 0);
    CHECK_EQ_U64(sb.rx_eth, 0);
    CHECK_EQ_U64(sb.tx_hello, 2);
    /* b has heard nothing from a either; a reads b's two hellos and its datagrams */
    eth_exchange(b, 0, a, r, small, 3, 3);
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sb.tx_eth, 0);
    CHECK_EQ_U64(sa.rx_hello, 2);
    CHECK_EQ_U64(sa.rx_frames, 3); /* hellos are not handed up */
    /* now a sends Ethernet frames: the small ones (and the largest under the MTU), in order
     * with the large ones, which go as segmented datagrams */
    eth_exchange(a, 1, b, r, mixed, 7, 6);
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth, 4);
    CHECK_EQ_U64(sa.tx_segmented, 3);
    CHECK_EQ_U64(sb.rx_eth, 4);
    CHECK_EQ_U64(sb.rx_frames, 10);
    /* and b, having read them, too */
    eth_exchange(b, 0, a, r, mixed, 7, 13);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sb.tx_eth, 4);
    /* a burst of small frames: packed Ethernet frames under the MTU */
    uint64_t tx_eth = sa.tx_eth, rx_packed = sb.rx_packed;
    CHECK_EQ_U64(pack_burst(a, b, 64), 26);
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth - tx_eth, 26);
    CHECK_EQ_U64(sb.rx_packed - rx_packed, 26);
    /* no link reads its own frames (the ring drops what this host sends), nor the other
     * node's (Ethernet frames are taken on the interface holding the address only) */
    CHECK_EQ_I64(udp_ring_read(a, r, 0, (uint32_t[64]){0}, NULL), 0);
    CHECK_EQ_I64(udp_ring_read(b, r, 0, (uint32_t[64]){0}, NULL), 0);

    /* A frame padded to the Ethernet minimum (as a NIC does): b reads it at its own length. */
    int ps = socket(AF_PACKET, SOCK_RAW, 0);
    REQUIRE(ps >= 0, "packet socket: %s", strerror(errno));
    uint8_t pad[60] = {0};
    static const uint8_t mac_a[6] = {2, 0x50, 0x53, 0, 0, 0xa};
    static const uint8_t mac_b[6] = {2, 0x50, 0x53, 0, 0, 0xb};
    memcpy(pad, mac_b, 6);
    memcpy(pad + 6, mac_a, 6);
    pad[12] = 0x88;
    pad[13] = 0xb6;
    make_frame(pad + 14, 36, MCP_FT_DATA, 40);
    mcp_put_le16(pad + 14, MCP_WIRE_MAGIC); /* a firmware frame of 4 payload bytes */
    mcp_put_le16(pad + 14 + 20, 4);
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("pspa")};
    CHECK(sendto(ps, pad, sizeof pad, 0, (struct sockaddr *)&ll, sizeof ll) == sizeof pad,
          "sendto: %s", strerror(errno));
    close(ps);
    int got = 0;
    double end = now_s() + 1.0;
    while (got == 0 && now_s() < end)
        got = lanai_rx(b, r->bufs, 65536, r->lens, 16);
    CHECK_EQ_I64(got, 1);
    CHECK_EQ_U64(r->lens[0], 36);
    CHECK(memcmp(r->mem[0], pad + 14, 36) == 0, "the padded frame's bytes");
    udp_pair_close(&u);

    /* Node 1 without a ring never says hello: a, which has one, sends it datagrams only. */
    setenv("PSP_UDP_RING", "0", 1);
    struct mcp_link_params p = {0};
    p.node = 1;
    p.nodes = &u.nodes;
    p.fd = -1;
    p.ring_fd = -1;
    b = mcp_link_open("udp", &p, err, sizeof err);
    unsetenv("PSP_UDP_RING");
    REQUIRE(b != NULL, "open: %s", err);
    p.node = 0;
    a = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(a != NULL, "open: %s", err);
    CHECK_EQ_I64(mcp_link_ring_fd(b), -1);
    for (uint32_t k = 0; k < 4; k++) {
        eth_exchange(a, 1, b, r, small, 3, 6 * k);
        eth_exchange(b, 0, a, r, small, 3, 6 * k + 3);
    }
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth, 0);
    CHECK_EQ_U64(sb.tx_hello, 0);
    CHECK(sa.tx_hello >= 2, "a says hello (at open, to b's datagrams): %" PRIu64, sa.tx_hello);
    lanai_close(a);
    lanai_close(b);

    /* Node 1 restarts without a ring: a, which had heard it read Ethernet frames, goes on
     * sending it them until UDP_ETH_FORGET of its datagrams in a row (frames a node reading
     * Ethernet frames would have sent as such) say otherwise; then datagrams, and a hello. */
    p.node = 0;
    a = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(a != NULL, "open: %s", err);
    p.node = 1;
    b = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(b != NULL, "open: %s", err);
    eth_exchange(a, 1, b, r, small, 3, 0);
    eth_exchange(b, 0, a, r, small, 3, 3);
    eth_exchange(a, 1, b, r, small, 3, 6);
    eth_exchange(b, 0, a, r, small, 3, 9); /* b, having read a's, sends Ethernet frames too */
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth, 3);
    CHECK_EQ_U64(sb.tx_eth, 3);
    lanai_close(b);
    setenv("PSP_UDP_RING", "0", 1);
    b = mcp_link_open("udp", &p, err, sizeof err);
    unsetenv("PSP_UDP_RING");
    REQUIRE(b != NULL, "open: %s", err);
    static const uint32_t one[] = {100};
    for (uint32_t k = 0; k + 1 < UDP_ETH_FORGET; k++)
        eth_exchange(b, 0, a, r, one, 1, k); /* a flush each: a datagram each */
    mcp_link_stats(a, &sa);
    CHECK_EQ_U64(sa.eth_forgotten, 0);
    uint64_t hellos = sa.tx_hello;
    eth_exchange(b, 0, a, r, one, 1, UDP_ETH_FORGET);
    mcp_link_stats(a, &sa);
    CHECK_EQ_U64(sa.eth_forgotten, 1);
    CHECK_EQ_U64(sa.tx_hello, hellos + 1);
    tx_eth = sa.tx_eth;
    eth_exchange(a, 1, b, r, small, 3, 20); /* b reads them: datagrams */
    eth_exchange(a, 1, b, r, mixed, 7, 23);
    mcp_link_stats(a, &sa);
    CHECK_EQ_U64(sa.tx_eth, tx_eth);
    lanai_close(a);
    lanai_close(b);

    /* PSP_UDP_ETH=0 on node 0: it sends no hello and no Ethernet frame. */
    setenv("PSP_UDP_ETH", "0", 1);
    p.node = 0;
    a = mcp_link_open("udp", &p, err, sizeof err);
    unsetenv("PSP_UDP_ETH");
    REQUIRE(a != NULL, "open: %s", err);
    p.node = 1;
    b = mcp_link_open("udp", &p, err, sizeof err);
    REQUIRE(b != NULL, "open: %s", err);
    for (uint32_t k = 0; k < 2; k++) {
        eth_exchange(a, 1, b, r, small, 3, 6 * k);
        eth_exchange(b, 0, a, r, small, 3, 6 * k + 3);
    }
    mcp_link_stats(a, &sa);
    mcp_link_stats(b, &sb);
    CHECK_EQ_U64(sa.tx_eth + sa.tx_hello, 0);
    /* b's hellos (at open, to a's datagrams) reach a; nothing tells b that a reads them */
    CHECK(sa.rx_hello >= 2, "a read %" PRIu64 " hellos", sa.rx_hello);
    CHECK_EQ_U64(sb.tx_eth, 0);
    lanai_close(a);
    lanai_close(b);

    /* Without MACs in the nodes file: datagrams only, no hello. */
    REQUIRE(udp_eth_pair_open(&u, 0, err, sizeof err) == 0, "open: %s", err);
    eth_exchange(u.l[0], 1, u.l[1], r, small, 3, 0);
    eth_exchange(u.l[1], 0, u.l[0], r, small, 3, 3);
    mcp_link_stats(u.l[0], &sa);
    mcp_link_stats(u.l[1], &sb);
    CHECK_EQ_U64(sa.tx_eth + sa.tx_hello + sb.tx_eth + sb.tx_hello, 0);
    udp_pair_close(&u);
    free(r);
}

/* Run body in a private network namespace after setup (shell commands) succeeded; skipped
 * (with why) when that cannot be. */
static void in_private_netns(const char *setup, void (*body)(void))
{
    if (geteuid() != 0)
        SKIP("needs root to use a private network namespace");
    if (system("command -v ip >/dev/null 2>&1") != 0)
        SKIP("needs the ip command (iproute2)");
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    REQUIRE(home >= 0, "open /proc/self/ns/net: %s", strerror(errno));
    if (unshare(CLONE_NEWNET) != 0) {
        int e = errno;
        close(home);
        SKIP("cannot create a network namespace: %s", strerror(e));
    }
    int made = system(setup) == 0;
    if (made)
        body();
    /* back home; the namespace and its interfaces go away with their last user */
    CHECK(setns(home, CLONE_NEWNET) == 0, "setns back: %s", strerror(errno));
    close(home);
    if (!made)
        SKIP("cannot set up the private namespace: %s", setup);
}

static void eth_all_checks(void)
{
    eth_checks();
    eth_ring_checks();
}

TEST(eth_veth_in_private_netns)
{
    in_private_netns("ip link add pspa address " MAC_A " type veth peer name pspb address " MAC_B
                     " >/dev/null 2>&1 && ip link set pspa up && ip link set pspb up",
                     eth_all_checks);
}

TEST(udp_ring_in_private_netns)
{
    in_private_netns("ip link set lo up", udp_ring_checks);
}

TEST(udp_eth_frames_in_private_netns)
{
    in_private_netns("ip link add pspa address " MAC_A " type veth peer name pspb address " MAC_B
                     " >/dev/null 2>&1 && ip addr add " ETH_IP_A
                     "/24 dev pspa && ip addr add " ETH_IP_B
                     "/24 dev pspb && ip link set pspa up && ip link set pspb up && "
                     "ip link set lo up",
                     udp_eth_checks);
}

TEST_MAIN()
