/*
 * test_dlink.c — pulc/psid/dlink.c (daemon messages over the firmware's RDP on UDP) and
 * pulc/psid/dmsg.c (psid_dmsg_check).
 *
 * Two or three daemon links run in this process on 127.0.0.1, driven by psid_dlink_run() in a
 * loop until the test's condition holds or a deadline passes (a failure).  Every message the
 * tests send is numbered per (source, destination, channel): its type carries the channel and
 * the number, its bytes a pattern keyed by all four, so a receiver checks that each arrives
 * exactly once, in order on its channel, with its exact length and bytes.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "dlink.h"
#include "dmsg.h"
#include "link.h"
#include "mcp.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "mcp_wire.h"

/* Same as dlink.c (its 12-byte fragment header is the wire format under test). */
#define FRAG_HDR   12u
#define FRAG_MAGIC 0xd5u
#define FRAG_FIRST 0x01u
#define FRAG_BULK  0x02u

/* ---- random numbers and message contents ------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [0, n) (0 for n == 0). */
static uint32_t below(uint64_t *rs, uint32_t n)
{
    return n ? (uint32_t)(mcp_rand64(rs) % n) : 0;
}

static void fill_random(uint64_t *rs, void *buf, uint32_t len)
{
    uint8_t *b = buf;
    for (uint32_t i = 0; i < len; i++)
        b[i] = (uint8_t)(mcp_rand64(rs) >> 24);
}

/* Byte i of the pattern keyed by key: every 8-byte block differs, so a shifted, repeated or
 * missing fragment shows. */
static void fill_pattern(uint8_t *buf, uint32_t len, uint64_t key)
{
    uint64_t w = 0;
    for (uint32_t i = 0; i < len; i++) {
        if ((i & 7) == 0)
            w = mix64(key ^ ((uint64_t)(i >> 3) * 0xd1342543de82ef95ull));
        buf[i] = (uint8_t)(w >> ((i & 7) * 8));
    }
}

/* Offset of the first byte that breaks the pattern, or len. */
static uint32_t check_pattern(const uint8_t *buf, uint32_t len, uint64_t key)
{
    uint64_t w = 0;
    for (uint32_t i = 0; i < len; i++) {
        if ((i & 7) == 0)
            w = mix64(key ^ ((uint64_t)(i >> 3) * 0xd1342543de82ef95ull));
        if (buf[i] != (uint8_t)(w >> ((i & 7) * 8)))
            return i;
    }
    return len;
}

static uint64_t msg_key(unsigned src, unsigned dst, unsigned chan, uint32_t k)
{
    return mix64(((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)chan << 24) ^ k);
}

/* A message's type: its channel in bit 15, its number (mod 2^15) below. */
static uint16_t msg_type(unsigned chan, uint32_t k)
{
    return (uint16_t)((chan << 15) | (k & 0x7fffu));
}

/* The index of the firmware counter called name (the test fails if there is none). */
static unsigned counter_index(const char *name)
{
    for (unsigned i = 0; i < mcp_counter_count(); i++)
        if (strcmp(mcp_counter_name(i), name) == 0)
            return i;
    CHECK(0, "the firmware has no counter named %s", name);
    return 0;
}

static uint64_t fw_counter(const struct psid_dlink *dl, const char *name)
{
    return mcp_counter_value(psid_dlink_image(dl), counter_index(name));
}

/* Payload bytes of one frame after the fragment header. */
static uint32_t frame_room(const struct psid_dlink *dl)
{
    return mcp_max_payload(psid_dlink_image(dl)) - FRAG_HDR;
}

/* Frames a message of len bytes takes. */
static uint32_t frames_of(uint32_t len, uint32_t room)
{
    return len == 0 ? 1 : (len + room - 1) / room;
}

/* ---- a raw firmware peer: an image and a UDP link without dlink on top -------------------- */

struct rawpeer {
    struct psp_nodes nodes; /* daemon ports */
    struct lanai_link *link;
    struct mcp_image *img;
    struct mcp_nic nic;
    /* frames received, copied */
    unsigned nrx;
    uint16_t rx_src[64];
    uint32_t rx_len[64];
    uint8_t *rx_data[64];
};

static int rawpeer_open(struct rawpeer *r, const struct psp_nodes *nodes, uint16_t node, char *err,
                        size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->nodes = *nodes;
    for (unsigned i = 0; i < r->nodes.count; i++)
        r->nodes.node[i].port++;
    struct mcp_link_params lp;
    memset(&lp, 0, sizeof lp);
    lp.node = node;
    lp.nodes = &r->nodes;
    lp.fd = -1;
    lp.ring_fd = -1;
    r->link = mcp_link_udp_open(&lp, err, errlen);
    if (!r->link)
        return -1;
    struct mcp_config cfg;
    mcp_config_default(&cfg, node);
    cfg.max_nodes = r->nodes.count < 2 ? 2 : r->nodes.count;
    cfg.contexts = 1;
    cfg.slot_size = 8192;
    cfg.ack_delay_us = 0;
    cfg.seed = 0x1234567;
    size_t size = mcp_image_size(&cfg);
    r->img = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!r->img || mcp_image_format(r->img, size, &cfg) != 0) {
        snprintf(err, errlen, "cannot format the raw peer's image");
        return -1;
    }
    mcp_nic_init(&r->nic, r->img, r->link);
    if (mcp_ctx_attach(r->img, 1) != 0) {
        snprintf(err, errlen, "cannot attach the raw peer's context");
        return -1;
    }
    return 0;
}

static void rawpeer_close(struct rawpeer *r)
{
    lanai_close(r->link);
    free(r->img);
    for (unsigned i = 0; i < r->nrx && i < 64; i++)
        free(r->rx_data[i]);
    memset(r, 0, sizeof *r);
}

static int rawpeer_run(struct rawpeer *r)
{
    int work = mcp_poll(&r->nic, mcp_now_ns());
    struct mcp_rx_desc d;
    while (mcp_recv_peek(r->img, &d)) {
        if (r->nrx < 64) {
            r->rx_src[r->nrx] = d.src;
            r->rx_len[r->nrx] = d.len;
            r->rx_data[r->nrx] = malloc(d.len ? d.len : 1);
            if (r->rx_data[r->nrx])
                memcpy(r->rx_data[r->nrx], d.data, d.len);
        }
        r->nrx++;
        mcp_recv_done(r->img);
        work++;
    }
    return work;
}

/* ---- the fixture: links, the messages sent, checks on delivery ---------------------------- */

#define FX_MAX  3
#define LOG_MAX 64

/* Messages sent from one node to another on one channel, in order. */
struct plan {
    uint32_t n, cap;
    uint32_t *len;
    uint64_t *arrival; /* receiver's arrival number of each (interleaving test) */
    uint32_t next_rx;  /* the receiver's next expected message */
};

struct fx;
struct ep {
    struct fx *f;
    uint16_t node;
};

struct fx {
    unsigned n;
    struct psp_nodes nodes; /* as in a nodes file (NIC ports; daemon ports are one above) */
    struct psid_dlink *dl[FX_MAX];
    struct ep ep[FX_MAX];
    struct rawpeer *raw; /* run by the pump too, if set */
    struct plan plan[FX_MAX][FX_MAX][2];
    uint64_t arrivals[FX_MAX]; /* messages delivered at each node */
    /* errors found by the deliver callback: counted, the first one kept */
    uint64_t errors;
    char first_error[512];
    /* log mode: deliveries are recorded instead of checked against the plans */
    int log_mode;
    unsigned nlog;
    uint16_t log_node[LOG_MAX], log_src[LOG_MAX], log_type[LOG_MAX];
    uint32_t log_len[LOG_MAX];
    uint8_t *log_data[LOG_MAX];
};

__attribute__((format(printf, 2, 3))) static void fx_error(struct fx *f, const char *fmt, ...)
{
    if (f->errors++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->first_error, sizeof f->first_error, fmt, ap);
        va_end(ap);
    }
}

static void on_deliver(void *arg, uint16_t src, uint16_t type, const void *data, uint32_t len)
{
    struct ep *e = arg;
    struct fx *f = e->f;
    uint64_t arrival = f->arrivals[e->node]++;
    if (f->log_mode) {
        if (f->nlog < LOG_MAX) {
            unsigned i = f->nlog;
            f->log_node[i] = e->node;
            f->log_src[i] = src;
            f->log_type[i] = type;
            f->log_len[i] = len;
            f->log_data[i] = malloc(len ? len : 1);
            if (f->log_data[i] && len)
                memcpy(f->log_data[i], data, len);
        }
        f->nlog++;
        return;
    }
    if (src >= f->n || src == e->node) {
        fx_error(f, "node %u: a message from node %u", e->node, src);
        return;
    }
    unsigned chan = type >> 15;
    struct plan *p = &f->plan[src][e->node][chan];
    if (p->next_rx >= p->n) {
        fx_error(f,
                 "node %u: message type 0x%x (%u bytes) from node %u on channel %u after all %u "
                 "sent had arrived (a duplicate?)",
                 e->node, type, len, src, chan, p->n);
        return;
    }
    uint32_t k = p->next_rx++;
    p->arrival[k] = arrival;
    if ((type & 0x7fffu) != (k & 0x7fffu)) {
        fx_error(f,
                 "node %u: from node %u on channel %u came message #%u where #%u was due (lost, "
                 "duplicated or reordered)",
                 e->node, src, chan, type & 0x7fffu, k & 0x7fffu);
        return;
    }
    if (len != p->len[k]) {
        fx_error(f, "node %u: message #%u from node %u on channel %u has %u bytes, sent %u",
                 e->node, k, src, chan, len, p->len[k]);
        return;
    }
    uint32_t bad = check_pattern(data, len, msg_key(src, e->node, chan, k));
    if (bad != len)
        fx_error(f, "node %u: message #%u from node %u on channel %u (%u bytes) differs at byte %u",
                 e->node, k, src, chan, len, bad);
}

static void fx_close_links(struct fx *f)
{
    for (unsigned i = 0; i < FX_MAX; i++) {
        psid_dlink_close(f->dl[i]);
        f->dl[i] = NULL;
    }
}

static void fx_free(struct fx *f)
{
    if (!f)
        return;
    fx_close_links(f);
    for (unsigned s = 0; s < FX_MAX; s++)
        for (unsigned d = 0; d < FX_MAX; d++)
            for (unsigned c = 0; c < 2; c++) {
                free(f->plan[s][d][c].len);
                free(f->plan[s][d][c].arrival);
            }
    for (unsigned i = 0; i < f->nlog && i < LOG_MAX; i++)
        free(f->log_data[i]);
    free(f);
}

/* Whether a UDP port of 127.0.0.1 can be bound now. */
static int port_free(unsigned port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/*
 * A fixture of n node ids on 127.0.0.1 (NIC ports base + 2i, daemon ports base + 2i + 1, base
 * from the pid in 20000..59999): ids in absent_mask are left out of the nodes text, links are
 * opened for the ids in open_mask (the other present ids' daemon ports are checked free), with
 * faults from fault[i] (NULL: none).  Tries other bases while ports are taken.  NULL on failure
 * (a failed check).
 */
static struct fx *fx_open(unsigned n, unsigned absent_mask, unsigned open_mask,
                          const struct mcp_fault_cfg *fault, uint32_t peer_timeout_ms)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!CHECK(f != NULL, "out of memory"))
        return NULL;
    f->n = n;
    for (unsigned i = 0; i < FX_MAX; i++)
        f->ep[i] = (struct ep){f, (uint16_t)i};
    char err[512] = "";
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        unsigned base =
            20000u + ((unsigned)getpid() * 7919u + attempt * 104729u) % 19990u * 2u; /* even */
        char text[256];
        size_t len = 0;
        for (unsigned i = 0; i < n; i++)
            if (!(absent_mask & (1u << i)))
                len += (size_t)snprintf(text + len, sizeof text - len, "%u 127.0.0.1:%u\n", i,
                                        base + 2 * i);
        int rc = psp_nodes_parse(text, 18360, &f->nodes, err, sizeof err);
        if (!CHECK(rc == 0, "psp_nodes_parse(\"%s\"): %d %s", text, rc, err)) {
            fx_free(f);
            return NULL;
        }
        int ok = 1;
        for (unsigned i = 0; i < n && ok; i++) {
            if (absent_mask & (1u << i))
                continue;
            if (open_mask & (1u << i)) {
                struct mcp_fault_cfg none;
                memset(&none, 0, sizeof none);
                f->dl[i] = psid_dlink_open((uint16_t)i, &f->nodes, fault ? &fault[i] : &none,
                                           peer_timeout_ms, err, sizeof err);
                ok = f->dl[i] != NULL;
            } else if (!port_free(base + 2 * i + 1)) {
                snprintf(err, sizeof err, "port %u is taken", base + 2 * i + 1);
                ok = 0;
            }
        }
        if (ok)
            return f;
        fx_close_links(f);
    }
    CHECK(0, "cannot open the daemon links on 127.0.0.1 (64 port bases tried): %s", err);
    fx_free(f);
    return NULL;
}

/* Daemon port of node i. */
static unsigned fx_dport(const struct fx *f, unsigned i)
{
    return f->nodes.node[i].port + 1u;
}

/*
 * Queue message #k of (src, dst, chan): len bytes of its pattern, split into header and data
 * at a point that varies with k.  Returns psid_dlink_send's result (0 when queued).
 */
static int fx_send(struct fx *f, unsigned src, unsigned dst, unsigned chan, uint32_t len)
{
    struct plan *p = &f->plan[src][dst][chan];
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 64;
        uint32_t *l = realloc(p->len, cap * sizeof *l);
        if (l)
            p->len = l;
        uint64_t *a = realloc(p->arrival, cap * sizeof *a);
        if (a)
            p->arrival = a;
        if (!l || !a)
            return -ENOMEM;
        p->cap = cap;
    }
    uint32_t k = p->n;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    fill_pattern(buf, len, msg_key(src, dst, chan, k));
    uint32_t hlen = (k % 3 == 0) ? 0 : (k % 3 == 1 ? len : (k * 7919u) % (len + 1));
    int rc = psid_dlink_send(f->dl[src], (uint16_t)dst, (enum psid_chan)chan, msg_type(chan, k),
                             hlen ? buf : NULL, hlen, len - hlen ? buf + hlen : NULL, len - hlen);
    free(buf);
    if (rc == 0) {
        p->len[k] = len;
        p->arrival[k] = UINT64_MAX;
        p->n++;
    }
    return rc;
}

/* Forget the messages planned from src to dst (they are not expected any more). */
static void fx_unplan(struct fx *f, unsigned src, unsigned dst)
{
    for (unsigned c = 0; c < 2; c++) {
        free(f->plan[src][dst][c].len);
        free(f->plan[src][dst][c].arrival);
        memset(&f->plan[src][dst][c], 0, sizeof f->plan[src][dst][c]);
    }
}

static int fx_all_received(struct fx *f)
{
    for (unsigned s = 0; s < FX_MAX; s++)
        for (unsigned d = 0; d < FX_MAX; d++)
            for (unsigned c = 0; c < 2; c++)
                if (f->plan[s][d][c].next_rx < f->plan[s][d][c].n)
                    return 0;
    return 1;
}

/* Everything received and nothing left to send or acknowledge. */
static int fx_quiet(struct fx *f)
{
    if (!fx_all_received(f))
        return 0;
    for (unsigned i = 0; i < FX_MAX; i++)
        if (f->dl[i] && psid_dlink_busy(f->dl[i]))
            return 0;
    return 1;
}

/* Run every link until done(f) (NULL: for the whole time) or timeout_ms pass. 1 if done. */
static int fx_pump(struct fx *f, int (*done)(struct fx *), uint32_t timeout_ms)
{
    uint64_t end = mcp_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        int work = 0;
        for (unsigned i = 0; i < FX_MAX; i++)
            if (f->dl[i])
                work += psid_dlink_run(f->dl[i], mcp_now_ns(), on_deliver, &f->ep[i]);
        if (f->raw)
            work += rawpeer_run(f->raw);
        if (done && done(f))
            return 1;
        if (mcp_now_ns() > end)
            return done ? 0 : 1;
        if (!work) {
            struct pollfd pfd[FX_MAX + 1];
            nfds_t np = 0;
            for (unsigned i = 0; i < FX_MAX; i++)
                if (f->dl[i])
                    pfd[np++] = (struct pollfd){.fd = psid_dlink_fd(f->dl[i]), .events = POLLIN};
            if (f->raw)
                pfd[np++] = (struct pollfd){.fd = mcp_link_fd(f->raw->link), .events = POLLIN};
            (void)poll(pfd, np, 1);
        }
    }
}

/* Report what the pump left undone: per plan, how many of how many arrived. */
static void fx_report_missing(struct fx *f)
{
    for (unsigned s = 0; s < FX_MAX; s++)
        for (unsigned d = 0; d < FX_MAX; d++)
            for (unsigned c = 0; c < 2; c++) {
                struct plan *p = &f->plan[s][d][c];
                if (p->next_rx < p->n)
                    printf("#   %u -> %u channel %u: %u of %u messages arrived\n", s, d, c,
                           p->next_rx, p->n);
            }
    for (unsigned i = 0; i < FX_MAX; i++)
        if (f->dl[i]) {
            const struct psid_dlink_stats *st = psid_dlink_stats(f->dl[i]);
            printf("#   node %u: busy %d tx %" PRIu64 " rx %" PRIu64 " malformed %" PRIu64
                   " send_failed %" PRIu64 "\n",
                   i, psid_dlink_busy(f->dl[i]), st->msgs_tx, st->msgs_rx, st->malformed,
                   st->send_failed);
        }
}

/* Pump until quiet; fail (with details) on the deadline; check the deliveries' errors. */
#define PUMP_QUIET(f, ms)                                                                          \
    do {                                                                                           \
        if (!CHECK(fx_pump((f), fx_quiet, (ms)), "not everything arrived within %u ms",            \
                   (unsigned)(ms)))                                                                \
            fx_report_missing(f);                                                                  \
        CHECK((f)->errors == 0, "%" PRIu64 " delivery errors, the first: %s", (f)->errors,         \
              (f)->first_error);                                                                   \
    } while (0)

/* Total messages and bytes planned from src (to anyone). */
static void fx_planned(struct fx *f, unsigned src, uint64_t *msgs, uint64_t *bytes)
{
    *msgs = *bytes = 0;
    for (unsigned d = 0; d < FX_MAX; d++)
        for (unsigned c = 0; c < 2; c++) {
            struct plan *p = &f->plan[src][d][c];
            *msgs += p->n;
            for (uint32_t k = 0; k < p->n; k++)
                *bytes += p->len[k];
        }
}

/* The link counters agree with the plans: every message sent arrived, none malformed. */
static void fx_check_stats(struct fx *f)
{
    for (unsigned i = 0; i < f->n; i++) {
        if (!f->dl[i])
            continue;
        const struct psid_dlink_stats *st = psid_dlink_stats(f->dl[i]);
        uint64_t tx_m, tx_b, rx_m = 0, rx_b = 0;
        fx_planned(f, i, &tx_m, &tx_b);
        for (unsigned s = 0; s < FX_MAX; s++)
            for (unsigned c = 0; c < 2; c++) {
                struct plan *p = &f->plan[s][i][c];
                rx_m += p->n;
                for (uint32_t k = 0; k < p->n; k++)
                    rx_b += p->len[k];
            }
        CHECK_EQ_U64(st->msgs_tx, tx_m);
        CHECK_EQ_U64(st->bytes_tx, tx_b);
        CHECK_EQ_U64(st->msgs_rx, rx_m);
        CHECK_EQ_U64(st->bytes_rx, rx_b);
        CHECK_EQ_U64(st->malformed, 0);
        CHECK_EQ_U64(st->send_failed, 0);
        CHECK_EQ_U64(st->dropped_queued, 0);
        CHECK_EQ_U64(psid_dlink_queued(f->dl[i], (uint16_t)((i + 1) % f->n), PSID_CHAN_URGENT), 0);
        CHECK_EQ_U64(psid_dlink_queued(f->dl[i], (uint16_t)((i + 1) % f->n), PSID_CHAN_BULK), 0);
    }
}

/* ---- daemon link tests ------------------------------------------------------------------- */

TEST(open_errors)
{
    static struct psp_nodes nodes;
    char err[512] = "";
    REQUIRE(psp_nodes_parse("0 127.0.0.1:65535\n1 127.0.0.1:20000\n", 18360, &nodes, err,
                            sizeof err) == 0,
            "%s", err);
    struct mcp_fault_cfg none;
    memset(&none, 0, sizeof none);
    struct psid_dlink *dl = psid_dlink_open(1, &nodes, &none, 5000, err, sizeof err);
    CHECK(dl == NULL, "opened with a node on port 65535 (no daemon port above it)");
    CHECK(strstr(err, "node 0: UDP port 65535 leaves no daemon port above it") != NULL, "%s", err);
    psid_dlink_close(dl);

    REQUIRE(psp_nodes_parse("0 127.0.0.1:20000\n2 127.0.0.1:20002\n", 18360, &nodes, err,
                            sizeof err) == 0,
            "%s", err);
    err[0] = '\0';
    dl = psid_dlink_open(1, &nodes, &none, 5000, err, sizeof err);
    CHECK(dl == NULL, "opened as node 1, which the nodes file leaves out");
    CHECK(strstr(err, "daemon link") != NULL && strstr(err, "node 1") != NULL, "%s", err);
    psid_dlink_close(dl);
    psid_dlink_close(NULL); /* harmless */
}

TEST(small_both_ways)
{
    uint64_t rs = th_seed(101) | 1;
    struct fx *f = fx_open(2, 0, 3, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    /* 300 each way, 0..64 bytes, channels mixed; sent in three rounds with pumping between. */
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < 100; i++)
            for (unsigned s = 0; s < 2; s++)
                CHECK_OK(fx_send(f, s, 1 - s, below(&rs, 2), below(&rs, 65)));
        PUMP_QUIET(f, 5000);
    }
    fx_check_stats(f);
    for (unsigned s = 0; s < 2; s++)
        CHECK_EQ_U64(f->plan[s][1 - s][0].n + f->plan[s][1 - s][1].n, 300);
    CHECK_EQ_U64(f->arrivals[0], 300);
    CHECK_EQ_U64(f->arrivals[1], 300);

    /* Header and data are joined; any type value goes through as it is. */
    f->log_mode = 1;
    static const uint16_t types[] = {0, 1, 0x7fff, 0x8000, 0xffff};
    const char hdr[] = "head:", data[] = "and data";
    for (unsigned i = 0; i < 5; i++)
        CHECK_OK(psid_dlink_send(f->dl[0], 1, (enum psid_chan)(i & 1), types[i], hdr, 5, data,
                                 i == 4 ? 0 : 8));
    CHECK(fx_pump(f, NULL, 200), "pump");
    REQUIRE(f->nlog == 5, "%u messages logged, expected 5", f->nlog);
    /* the urgent ones (even i) first: their queue is handed to the firmware first */
    static const unsigned order[] = {0, 2, 4, 1, 3};
    for (unsigned j = 0; j < 5; j++) {
        unsigned i = order[j];
        CHECK_EQ_U64(f->log_node[j], 1);
        CHECK_EQ_U64(f->log_src[j], 0);
        CHECK_EQ_U64(f->log_type[j], types[i]);
        CHECK_EQ_U64(f->log_len[j], i == 4 ? 5 : 13);
        CHECK_EQ_MEM(f->log_data[j], i == 4 ? "head:" : "head:and data", f->log_len[j]);
    }
    fx_free(f);
}

TEST(large_messages)
{
    struct fx *f = fx_open(2, 0, 3, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    uint32_t room = frame_room(f->dl[0]);
    CHECK_EQ_U64(room, 8192 - FRAG_HDR);
    const uint32_t sizes[] = {
        0,     1,        room - 1,          room,         room + 1, 2 * room, 2 * room + 1,
        65536, 1u << 20, PSID_DMSG_MAX - 1, PSID_DMSG_MAX};
    const unsigned nsizes = sizeof sizes / sizeof sizes[0];
    uint64_t frames = 0;
    for (unsigned i = 0; i < nsizes; i++) {
        CHECK_OK(fx_send(f, 0, 1, i & 1, sizes[i]));
        frames += frames_of(sizes[i], room);
    }
    /* And the largest back on the other channel, while the first batch is going. */
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_URGENT, PSID_DMSG_MAX));
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_BULK, room + 1));
    uint64_t frames_back = frames_of(PSID_DMSG_MAX, room) + 2;
    PUMP_QUIET(f, 10000);
    fx_check_stats(f);
    /* Exactly one frame for a frame's worth, two for one byte more. */
    CHECK_EQ_U64(fw_counter(f->dl[0], "tx_data"), frames);
    CHECK_EQ_U64(fw_counter(f->dl[1], "delivered"), frames);
    CHECK_EQ_U64(fw_counter(f->dl[1], "tx_data"), frames_back);
    CHECK_EQ_U64(fw_counter(f->dl[0], "delivered"), frames_back);
    /* (Retransmissions may happen: a pass that checks 4 MiB outlasts the 1 ms timeout.) */
    CHECK_EQ_U64(fw_counter(f->dl[0], "send_errors") + fw_counter(f->dl[1], "send_errors"), 0);
    fx_free(f);
}

TEST(interleaved_channels)
{
    uint64_t rs = th_seed(303) | 1;
    struct fx *f = fx_open(3, 0, 7, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    uint32_t room = frame_room(f->dl[0]);
    /* Queued all at once, channels mixed at random: 0 -> 1 300 bulk (0..30000 bytes) and 300
     * urgent (0..2000), 2 -> 1 100 of each, 1 -> 0 and 1 -> 2 50 bulk each. */
    unsigned left[2] = {300, 300};
    while (left[0] + left[1]) {
        unsigned c = left[0] && (!left[1] || below(&rs, 2)) ? 0 : 1;
        left[c]--;
        CHECK_OK(fx_send(f, 0, 1, c, c ? below(&rs, 30001) : below(&rs, 2001)));
    }
    for (unsigned i = 0; i < 200; i++) {
        unsigned c = i & 1;
        CHECK_OK(fx_send(f, 2, 1, c, c ? below(&rs, 30001) : below(&rs, 2001)));
    }
    for (unsigned i = 0; i < 50; i++) {
        CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_BULK, below(&rs, 3 * room)));
        CHECK_OK(fx_send(f, 1, 2, PSID_CHAN_BULK, below(&rs, 3 * room)));
    }
    PUMP_QUIET(f, 10000);
    fx_check_stats(f);
    CHECK_EQ_U64(f->arrivals[1], 800);
    CHECK_EQ_U64(f->arrivals[0], 50);
    CHECK_EQ_U64(f->arrivals[2], 50);
    /* Urgent messages are handed to the firmware before bulk ones: queued together (each fits
     * a frame, all fit the send ring), every urgent one arrives before the first bulk one. */
    for (unsigned s = 0; s < 3; s += 2) {
        uint64_t last_urgent = 0, first_bulk = UINT64_MAX;
        for (uint32_t k = 0; k < f->plan[s][1][0].n; k++)
            if (f->plan[s][1][0].arrival[k] > last_urgent)
                last_urgent = f->plan[s][1][0].arrival[k];
        for (uint32_t k = 0; k < f->plan[s][1][1].n; k++)
            if (f->plan[s][1][1].arrival[k] < first_bulk)
                first_bulk = f->plan[s][1][1].arrival[k];
        CHECK(last_urgent < first_bulk,
              "from node %u the last urgent message arrived as #%" PRIu64
              " at node 1, after the first bulk one (#%" PRIu64 ")",
              s, last_urgent, first_bulk);
    }
    fx_free(f);
}

TEST(faults)
{
    uint64_t seed = th_seed(404);
    uint64_t rs = seed | 1;
    struct mcp_fault_cfg fault[FX_MAX];
    memset(fault, 0, sizeof fault);
    for (unsigned i = 0; i < FX_MAX; i++) {
        fault[i].loss = 0.05;
        fault[i].dup = 0.02;
        fault[i].corrupt = 0.01;
        fault[i].seed = seed * 1000 + i + 1;
    }
    struct fx *f = fx_open(2, 0, 3, fault, 5000);
    REQUIRE(f != NULL, "fixture");
    /* 2000 messages each way of 0..20000 bytes, channels mixed, queued in 4 waves. */
    uint64_t t0 = mcp_now_ns();
    for (unsigned wave = 0; wave < 4; wave++) {
        for (unsigned i = 0; i < 500; i++)
            for (unsigned s = 0; s < 2; s++)
                CHECK_OK(fx_send(f, s, 1 - s, below(&rs, 2), below(&rs, 20001)));
        if (wave < 3)
            CHECK(fx_pump(f, NULL, 20), "pump");
    }
    PUMP_QUIET(f, 12000);
    fx_check_stats(f);
    CHECK_EQ_U64(f->arrivals[0], 2000);
    CHECK_EQ_U64(f->arrivals[1], 2000);
    /* The faults happened, and the firmware hid them from dlink (its malformed stays 0). */
    uint64_t retx = 0, crc = 0, dup = 0;
    for (unsigned i = 0; i < 2; i++) {
        retx += fw_counter(f->dl[i], "tx_retx");
        crc += fw_counter(f->dl[i], "crc_errors");
        dup += fw_counter(f->dl[i], "rx_dup");
    }
    CHECK_GT_U64(retx, 0);
    CHECK_GT_U64(crc, 0);
    CHECK_GT_U64(dup, 0);
    printf("# faults: 4000 messages in %.2f s; %" PRIu64 " retransmissions, %" PRIu64
           " CRC errors, %" PRIu64 " duplicates\n",
           (double)(mcp_now_ns() - t0) / 1e9, retx, crc, dup);
    fx_free(f);
}

TEST(send_errors)
{
    /* Ids 0 and 2; 1 is not in the nodes file. */
    struct fx *f = fx_open(3, 2, 5, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    struct psid_dlink *dl = f->dl[0];
    uint8_t b[16] = {0};
    CHECK_RC(psid_dlink_send(dl, 0, PSID_CHAN_URGENT, 1, b, 4, NULL, 0), -EINVAL); /* itself */
    CHECK_RC(psid_dlink_send(dl, 1, PSID_CHAN_URGENT, 1, b, 4, NULL, 0), -EINVAL); /* absent */
    CHECK_RC(psid_dlink_send(dl, 3, PSID_CHAN_BULK, 1, b, 4, NULL, 0), -EINVAL);   /* beyond */
    CHECK_RC(psid_dlink_send(dl, 0xffff, PSID_CHAN_BULK, 1, NULL, 0, NULL, 0), -EINVAL);
    CHECK_RC(psid_dlink_send(dl, 2, PSID_CHAN_BULK, 1, NULL, PSID_DMSG_MAX + 1, NULL, 0),
             -EMSGSIZE);
    CHECK_RC(psid_dlink_send(dl, 2, PSID_CHAN_BULK, 1, NULL, 0, NULL, PSID_DMSG_MAX + 1),
             -EMSGSIZE);
    CHECK_RC(psid_dlink_send(dl, 2, PSID_CHAN_URGENT, 1, NULL, PSID_DMSG_MAX, NULL, 1), -EMSGSIZE);
    /* hlen + dlen wraps 32 bits: still too large. */
    CHECK_RC(psid_dlink_send(dl, 2, PSID_CHAN_URGENT, 1, NULL, 0xffffffffu, NULL, 2), -EMSGSIZE);
    const struct psid_dlink_stats *st = psid_dlink_stats(dl);
    CHECK_EQ_U64(st->msgs_tx, 0);
    CHECK_EQ_U64(psid_dlink_busy(dl), 0);
    CHECK_EQ_U64(psid_dlink_queued(dl, 2, PSID_CHAN_URGENT), 0);
    /* The largest allowed size is taken, split over header and data, and arrives. */
    CHECK_OK(fx_send(f, 0, 2, PSID_CHAN_BULK, PSID_DMSG_MAX));
    CHECK_EQ_U64(psid_dlink_queued(dl, 2, PSID_CHAN_BULK), PSID_DMSG_MAX);
    CHECK_EQ_U64(psid_dlink_busy(dl), 1);
    PUMP_QUIET(f, 5000);
    fx_check_stats(f);
    fx_free(f);
}

TEST(queued_and_forget)
{
    struct fx *f = fx_open(2, 0, 3, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    struct psid_dlink *dl = f->dl[0];
    uint32_t room = frame_room(dl);
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_URGENT, 100));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_URGENT, 200));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 5000));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 0));
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_URGENT), 300);
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_BULK), 5000);
    CHECK_EQ_U64(psid_dlink_queued(dl, 0, PSID_CHAN_URGENT), 0);
    CHECK_EQ_U64(psid_dlink_queued(dl, 7, PSID_CHAN_URGENT), 0);
    CHECK_EQ_U64(psid_dlink_busy(dl), 1);
    psid_dlink_forget(dl, 1);
    psid_dlink_forget(dl, 7); /* no such node: nothing */
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_URGENT), 0);
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_BULK), 0);
    CHECK_EQ_U64(psid_dlink_stats(dl)->dropped_queued, 4);
    CHECK_EQ_U64(psid_dlink_busy(dl), 0);
    /* Nothing of them goes out: forget the plans, then the link works on. */
    fx_unplan(f, 0, 1);
    CHECK(fx_pump(f, NULL, 100), "pump");
    CHECK_EQ_U64(f->arrivals[1], 0);
    CHECK_EQ_U64(psid_dlink_stats(f->dl[1])->msgs_rx, 0);

    /* Three of the largest on one channel: the first pass hands only 128 bulk frames to the
     * firmware (part of the first message), so urgent messages never wait behind a deep bulk
     * backlog in the FIFO send ring; the peer is not run. */
    f->log_mode = 1;
    uint8_t *big = malloc(PSID_DMSG_MAX);
    REQUIRE(big != NULL, "memory");
    fill_pattern(big, PSID_DMSG_MAX, 42);
    for (unsigned i = 0; i < 3; i++)
        CHECK_OK(psid_dlink_send(dl, 1, PSID_CHAN_BULK, (uint16_t)(500 + i), big, PSID_DMSG_MAX,
                                 NULL, 0));
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_BULK), 3ull * PSID_DMSG_MAX);
    psid_dlink_run(dl, mcp_now_ns(), on_deliver, &f->ep[0]);
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_BULK), 3ull * PSID_DMSG_MAX - 128ull * room);
    psid_dlink_forget(dl, 1); /* drops the rest of the first, the second and the third */
    CHECK_EQ_U64(psid_dlink_stats(dl)->dropped_queued, 4 + 3);
    CHECK_EQ_U64(psid_dlink_queued(dl, 1, PSID_CHAN_BULK), 0);
    CHECK_EQ_U64(psid_dlink_busy(dl), 1); /* frames in the firmware still go out */
    /* The cut first message is dropped when the next bulk message starts; the urgent one
     * goes to the firmware before that bulk message and arrives first. */
    CHECK_OK(psid_dlink_send(dl, 1, PSID_CHAN_BULK, 600, big + 1, 3 * room, NULL, 0));
    CHECK_OK(psid_dlink_send(dl, 1, PSID_CHAN_URGENT, 601, big + 2, 10, NULL, 0));
    int done = 0;
    uint64_t end = mcp_now_ns() + 5000000000ull;
    while (!done && mcp_now_ns() < end) {
        CHECK(fx_pump(f, NULL, 5), "pump");
        done = f->nlog >= 2 && !psid_dlink_busy(dl);
    }
    CHECK(done, "%u messages arrived, expected 2", f->nlog);
    REQUIRE(f->nlog == 2, "%u messages logged", f->nlog);
    CHECK_EQ_U64(f->log_type[0], 601);
    CHECK_EQ_U64(f->log_len[0], 10);
    CHECK_EQ_MEM(f->log_data[0], big + 2, 10);
    CHECK_EQ_U64(f->log_type[1], 600);
    CHECK_EQ_U64(f->log_len[1], 3 * room);
    CHECK_EQ_MEM(f->log_data[1], big + 1, 3 * room);
    CHECK_EQ_U64(psid_dlink_stats(f->dl[1])->malformed, 1); /* the cut first message */
    CHECK_EQ_U64(psid_dlink_stats(f->dl[1])->msgs_rx, 2);
    free(big);
    fx_free(f);
}

TEST(dead_peer_and_return)
{
    /* Node 1 is silent (its daemon port closed); 500 ms later the firmware gives up. */
    struct fx *f = fx_open(2, 0, 1, NULL, 500);
    REQUIRE(f != NULL, "fixture");
    struct psid_dlink *dl = f->dl[0];
    uint32_t room = frame_room(dl);
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_URGENT, 10));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 2 * room + 1));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 0));
    uint64_t end = mcp_now_ns() + 5000000000ull;
    while (psid_dlink_busy(dl) && mcp_now_ns() < end)
        fx_pump(f, NULL, 5);
    CHECK_EQ_U64(psid_dlink_busy(dl), 0);
    CHECK_EQ_U64(psid_dlink_stats(dl)->send_failed, 5); /* every frame failed back */
    CHECK_EQ_U64(fw_counter(dl, "peers_dead"), 1);
    CHECK_EQ_U64(psid_dlink_stats(dl)->msgs_rx, 0);

    /* Node 1 comes up: new messages reach it, both ways. */
    char err[512] = "";
    struct mcp_fault_cfg none;
    memset(&none, 0, sizeof none);
    f->dl[1] = psid_dlink_open(1, &f->nodes, &none, 500, err, sizeof err);
    REQUIRE(f->dl[1] != NULL, "%s", err);
    psid_dlink_forget(dl, 1);
    fx_unplan(f, 0, 1); /* the failed ones never arrive */
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_URGENT, 10));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 3 * room));
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_URGENT, 20));
    PUMP_QUIET(f, 5000);
    CHECK_EQ_U64(f->arrivals[1], 2);
    CHECK_EQ_U64(f->arrivals[0], 1);
    CHECK_EQ_U64(psid_dlink_stats(f->dl[1])->malformed, 0);
    fx_free(f);
}

/* The receiving node's firmware counters of garbage. */
struct garbage_ctrs {
    uint64_t malformed, crc, wrong_dest, stale;
};

static struct garbage_ctrs garbage_ctrs(const struct psid_dlink *dl)
{
    return (struct garbage_ctrs){fw_counter(dl, "malformed"), fw_counter(dl, "crc_errors"),
                                 fw_counter(dl, "wrong_dest"), fw_counter(dl, "stale")};
}

static uint64_t garbage_sum(const struct psid_dlink *dl)
{
    struct garbage_ctrs c = garbage_ctrs(dl);
    return c.malformed + c.crc + c.wrong_dest + c.stale;
}

/* A firmware header for src -> dst with len payload bytes. */
static void put_header(uint8_t *frame, uint8_t type, uint16_t src, uint16_t dst, uint32_t scid,
                       uint32_t dcid, uint16_t len)
{
    struct mcp_wire_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = MCP_WIRE_MAGIC;
    h.version = MCP_WIRE_VERSION;
    h.type = type;
    h.src_node = src;
    h.dst_node = dst;
    h.src_cid = scid;
    h.dst_cid = dcid;
    h.flags = MCP_FLAG_ACK;
    h.len = len;
    mcp_wire_put(frame, &h);
}

TEST(malformed_datagrams)
{
    uint64_t rs = th_seed(707) | 1;
    struct fx *f = fx_open(2, 0, 3, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    /* A connection both ways first. */
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_URGENT, 100));
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_URGENT, 100));
    PUMP_QUIET(f, 5000);

    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fx_dport(f, 0))};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    struct psid_dlink *dl = f->dl[0];
    struct garbage_ctrs before = garbage_ctrs(dl);
    uint64_t frames_before = fw_counter(dl, "rx_frames");
    static uint8_t buf[20000];
    /* kinds: 0 random bytes, 1 truncated header, 2 too long for any slot, 3 bad CRC,
     * 4 sealed but for another node, 5 sealed ACK of an unknown connection */
    const unsigned count[6] = {300, 64, 20, 60, 40, 40};
    unsigned sent[6] = {0};
    unsigned total = 0;
    for (unsigned kind = 0; kind < 6; kind++) {
        for (unsigned i = 0; i < count[kind]; i++) {
            uint32_t len = 0;
            switch (kind) {
            case 0:
                len = 1 + below(&rs, 1500);
                fill_random(&rs, buf, len);
                if (len >= 2 && mcp_get_le16(buf) == MCP_WIRE_MAGIC)
                    buf[0] ^= 0xff;
                break;
            case 1:
                put_header(buf, MCP_FT_DATA, 1, 0, 1, 1, 0);
                len = i % MCP_WIRE_HDR; /* 0 .. 31 bytes, some twice */
                break;
            case 2:
                len = sizeof buf - below(&rs, 1000);
                fill_random(&rs, buf, len);
                put_header(buf, MCP_FT_DATA, 1, 0, 1, 1, (uint16_t)(len - MCP_WIRE_HDR));
                mcp_wire_seal(buf, len);
                break;
            case 3: { /* (only DATA frames carry a payload) */
                uint8_t type = (uint8_t)(1 + below(&rs, MCP_FT_MAX));
                uint16_t plen = type == MCP_FT_DATA ? (uint16_t)below(&rs, 2000) : 0;
                len = MCP_WIRE_HDR + plen;
                fill_random(&rs, buf + MCP_WIRE_HDR, plen);
                put_header(buf, type, 1, 0, (uint32_t)mcp_rand64(&rs), (uint32_t)mcp_rand64(&rs),
                           plen);
                mcp_wire_seal(buf, len);
                buf[24 + below(&rs, 4)] ^= (uint8_t)(1u << below(&rs, 8)); /* the crc field */
                break;
            }
            case 4: {
                uint8_t type = (uint8_t)(1 + below(&rs, MCP_FT_MAX));
                uint16_t plen = type == MCP_FT_DATA ? (uint16_t)below(&rs, 100) : 0;
                len = MCP_WIRE_HDR + plen;
                fill_random(&rs, buf + MCP_WIRE_HDR, plen);
                /* to node 5 (not us), or claiming to come from node 0 (us) */
                put_header(buf, type, i & 1 ? 0 : 1, i & 1 ? 0 : 5, 7, 7, plen);
                mcp_wire_seal(buf, len);
                break;
            }
            case 5:
                len = MCP_WIRE_HDR;
                put_header(buf, MCP_FT_ACK, 1, 0, (uint32_t)mcp_rand64(&rs),
                           (uint32_t)mcp_rand64(&rs), 0);
                mcp_wire_seal(buf, len);
                break;
            }
            ssize_t w = sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof to);
            CHECK(w == (ssize_t)len, "sendto %u bytes: %zd %s", len, w, strerror(errno));
            sent[kind]++;
            total++;
            /* In small batches, each taken in before the next (no socket buffer overflow). */
            if (total % 16 == 0 || len > 1500) {
                uint64_t want = frames_before + total;
                uint64_t end = mcp_now_ns() + 3000000000ull;
                while (fw_counter(dl, "rx_frames") < want && mcp_now_ns() < end)
                    fx_pump(f, NULL, 1);
            }
        }
    }
    uint64_t want = before.malformed + before.crc + before.wrong_dest + before.stale + total;
    uint64_t end = mcp_now_ns() + 3000000000ull;
    while (garbage_sum(dl) < want && mcp_now_ns() < end)
        fx_pump(f, NULL, 1);
    CHECK(fx_pump(f, NULL, 100), "pump");
    close(fd);
    struct garbage_ctrs after = garbage_ctrs(dl);
    CHECK_EQ_U64(after.malformed - before.malformed, sent[0] + sent[1] + sent[2]);
    CHECK_EQ_U64(after.crc - before.crc, sent[3]);
    CHECK_EQ_U64(after.wrong_dest - before.wrong_dest, sent[4]);
    CHECK_EQ_U64(after.stale - before.stale, sent[5]);
    CHECK_EQ_U64(fw_counter(dl, "peer_resets"), 0);
    /* Nothing delivered from them, dlink saw nothing malformed, and the link still works. */
    CHECK_EQ_U64(f->arrivals[0], 1);
    CHECK_EQ_U64(psid_dlink_stats(dl)->malformed, 0);
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_URGENT, 1000));
    CHECK_OK(fx_send(f, 1, 0, PSID_CHAN_BULK, 3 * frame_room(dl)));
    CHECK_OK(fx_send(f, 0, 1, PSID_CHAN_BULK, 50));
    PUMP_QUIET(f, 5000);
    fx_check_stats(f);
    CHECK_EQ_U64(f->arrivals[0], 3);
    fx_free(f);
}

/* Send a raw firmware frame: the fragment header fields, then n bytes of pattern. */
static int raw_frag(struct rawpeer *r, uint8_t magic, uint8_t flags, uint16_t type, uint32_t total,
                    uint32_t offset, uint32_t n)
{
    uint8_t frame[8192];
    if (n + FRAG_HDR > sizeof frame)
        return -EMSGSIZE;
    frame[0] = magic;
    frame[1] = flags;
    memcpy(frame + 2, &type, 2);
    memcpy(frame + 4, &total, 4);
    memcpy(frame + 8, &offset, 4);
    fill_pattern(frame + FRAG_HDR, n, 0x77000000ull + type + offset);
    return mcp_send(r->img, 0, 0, frame, FRAG_HDR + n, 0);
}

static int rawpeer_sent(struct fx *f)
{
    return mcp_send_busy(f->raw->img, 0) == 0 && !psid_dlink_busy(f->dl[0]);
}

TEST(malformed_fragments)
{
    /* Node 1 is a bare firmware that sends whatever fragment headers it likes. */
    struct fx *f = fx_open(2, 0, 1, NULL, 5000);
    REQUIRE(f != NULL, "fixture");
    static struct rawpeer raw;
    char err[512] = "";
    REQUIRE(rawpeer_open(&raw, &f->nodes, 1, err, sizeof err) == 0, "raw peer: %s", err);
    f->raw = &raw;
    f->log_mode = 1;
    struct psid_dlink *dl = f->dl[0];
    const uint8_t U = FRAG_FIRST, B = FRAG_FIRST | FRAG_BULK;
    /* Each line: what dlink must do with it. */
    CHECK_OK(mcp_send(raw.img, 0, 0, "short", 5, 0));            /* malformed 1: < 12 bytes */
    CHECK_OK(raw_frag(&raw, 0xd4, U, 70, 3, 0, 3));              /* 2: magic */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U | 0x04, 71, 3, 0, 3)); /* 3: unknown flag */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 72, PSID_DMSG_MAX + 1, 0, 3)); /* 4: too large */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 73, 10, 11, 0));   /* 5: offset beyond the end */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 74, 10, 0, 20));   /* 6: more bytes than total */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 75, 100, 0, 10));  /* 7: no first fragment */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 76, 100, 5, 10));  /* 8: first not at offset 0 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 77, 3, 0, 3));     /* delivered #0 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 78, 100, 0, 40));  /* starts 78 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 78, 100, 50, 10)); /* 9: gap, 78 dropped */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 78, 100, 40, 60)); /* 10: 78 is gone */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 79, 100, 0, 40));  /* starts 79 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 80, 100, 40, 60)); /* 11: type changed */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 81, 100, 0, 40));  /* starts 81 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 81, 101, 40, 61)); /* 12: total changed */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 82, 100, 0, 40));  /* starts 82 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 83, 2, 0, 2));     /* 13: 82 cut; 83 delivered #1 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, B, 84, 100, 0, 40));  /* bulk 84 starts */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 85, 0, 0, 0));     /* urgent 85 delivered #2 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, FRAG_BULK, 84, 100, 40, 60)); /* bulk 84 delivered #3 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 86, 100, 0, 40));          /* urgent 86 starts */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, FRAG_BULK, 86, 100, 40, 60)); /* 14: on the other channel */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 86, 100, 40, 60));         /* delivered #4 */
    CHECK(fx_pump(f, rawpeer_sent, 3000), "the raw peer's frames were not all acknowledged");
    CHECK(fx_pump(f, NULL, 50), "pump");
    CHECK_EQ_U64(psid_dlink_stats(dl)->malformed, 14);
    CHECK_EQ_U64(psid_dlink_stats(dl)->msgs_rx, 5);
    REQUIRE(f->nlog == 5, "%u messages delivered, expected 5", f->nlog);
    static const uint16_t types[] = {77, 83, 85, 84, 86};
    static const uint32_t lens[] = {3, 2, 0, 100, 100};
    for (unsigned i = 0; i < 5; i++) {
        CHECK_EQ_U64(f->log_src[i], 1);
        CHECK_EQ_U64(f->log_type[i], types[i]);
        REQUIRE(f->log_len[i] == lens[i], "message %u: %u bytes, expected %u", i, f->log_len[i],
                lens[i]);
        /* fragment at offset o carries the pattern keyed by type + o */
        uint8_t want[100];
        fill_pattern(want, lens[i] < 40 ? lens[i] : 40, 0x77000000ull + types[i]);
        if (lens[i] == 100)
            fill_pattern(want + 40, 60, 0x77000000ull + types[i] + 40);
        CHECK_EQ_MEM(f->log_data[i], want, lens[i]);
    }

    /* psid_dlink_forget drops a message being reassembled: its rest is malformed. */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 90, 100, 0, 40));
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, B, 91, 100, 0, 40));
    CHECK(fx_pump(f, rawpeer_sent, 3000), "the raw peer's frames were not all acknowledged");
    psid_dlink_forget(dl, 1);
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, 0, 90, 100, 40, 60));         /* 15 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, FRAG_BULK, 91, 100, 40, 60)); /* 16 */
    CHECK_OK(raw_frag(&raw, FRAG_MAGIC, U, 92, 1, 0, 1));             /* delivered #5 */
    CHECK(fx_pump(f, rawpeer_sent, 3000), "the raw peer's frames were not all acknowledged");
    CHECK(fx_pump(f, NULL, 50), "pump");
    CHECK_EQ_U64(psid_dlink_stats(dl)->malformed, 16);
    CHECK_EQ_U64(psid_dlink_stats(dl)->msgs_rx, 6);
    REQUIRE(f->nlog == 6, "%u messages delivered, expected 6", f->nlog);
    CHECK_EQ_U64(f->log_type[5], 92);

    /* The other way: dlink's own fragment headers, as the wire format says. */
    uint32_t room = frame_room(dl);
    uint8_t *msg = malloc(room + 5);
    REQUIRE(msg != NULL, "memory");
    fill_pattern(msg, room + 5, 9);
    CHECK_OK(psid_dlink_send(dl, 1, PSID_CHAN_BULK, 0x1234, msg, room + 5, NULL, 0));
    CHECK_OK(psid_dlink_send(dl, 1, PSID_CHAN_URGENT, 0x4321, NULL, 0, NULL, 0));
    CHECK(fx_pump(f, rawpeer_sent, 3000), "dlink's frames were not all acknowledged");
    REQUIRE(raw.nrx == 3, "the raw peer received %u frames, expected 3", raw.nrx);
    /* urgent first: its queue is filled before the bulk one */
    const struct {
        uint8_t flags;
        uint16_t type;
        uint32_t total, offset, n;
    } fr[3] = {{FRAG_FIRST, 0x4321, 0, 0, 0},
               {FRAG_FIRST | FRAG_BULK, 0x1234, room + 5, 0, room},
               {FRAG_BULK, 0x1234, room + 5, room, 5}};
    for (unsigned i = 0; i < 3; i++) {
        const uint8_t *p = raw.rx_data[i];
        uint16_t type;
        uint32_t total, offset;
        memcpy(&type, p + 2, 2);
        memcpy(&total, p + 4, 4);
        memcpy(&offset, p + 8, 4);
        CHECK_EQ_U64(raw.rx_src[i], 0);
        CHECK_EQ_U64(raw.rx_len[i], FRAG_HDR + fr[i].n);
        CHECK_EQ_U64(p[0], FRAG_MAGIC);
        CHECK_EQ_U64(p[1], fr[i].flags);
        CHECK_EQ_U64(type, fr[i].type);
        CHECK_EQ_U64(total, fr[i].total);
        CHECK_EQ_U64(offset, fr[i].offset);
        CHECK_EQ_MEM(p + FRAG_HDR, msg + fr[i].offset, fr[i].n);
    }
    free(msg);
    f->raw = NULL;
    rawpeer_close(&raw);
    fx_free(f);
}

/* ---- psid_dmsg_check --------------------------------------------------------------------- */

static uint32_t fixed_of(uint16_t type)
{
    switch (type) {
    case PSID_M_ALIVE:
        return sizeof(struct psid_m_alive);
    case PSID_M_SPAWN:
        return sizeof(struct psid_m_spawn);
    case PSID_M_REPLY:
        return sizeof(struct psid_m_reply);
    case PSID_M_OUTPUT:
        return sizeof(struct psid_m_task);
    case PSID_M_EXIT:
        return sizeof(struct psid_m_exit);
    case PSID_M_STDIN:
        return sizeof(struct psid_m_stdin);
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY:
        return sizeof(struct psid_m_signal);
    case PSID_M_ORPHANS:
        return sizeof(struct psid_m_orphans);
    case PSID_M_HOLD:
        return sizeof(struct psid_m_hold);
    case PSID_M_STDIN_TAKEN:
        return sizeof(struct psid_m_stdin_taken);
    case PSID_M_WAS_DEAD:
        return sizeof(struct psid_m_was_dead);
    default:
        return 0;
    }
}

/* Types whose message is the struct alone. */
static int exact_size(uint16_t type)
{
    return type == PSID_M_ALIVE || type == PSID_M_REPLY || type == PSID_M_EXIT ||
           type == PSID_M_SIGNAL || type == PSID_M_NOTIFY || type == PSID_M_ORPHANS ||
           type == PSID_M_HOLD || type == PSID_M_STDIN_TAKEN || type == PSID_M_WAS_DEAD;
}

#define DMSG_BUF 4096

/* A random string of 0..maxlen non-NUL bytes and its NUL at p; returns the bytes written. */
static uint32_t put_string(uint64_t *rs, uint8_t *p, uint32_t maxlen)
{
    uint32_t n = below(rs, maxlen + 1);
    for (uint32_t i = 0; i < n; i++)
        p[i] = (uint8_t)(1 + below(rs, 255));
    p[n] = 0;
    return n + 1;
}

static int32_t rand_pid(uint64_t *rs)
{
    return (int32_t)(1 + below(rs, 0x7fffffffu));
}

/* A well-formed message of type into buf; returns its length. */
static uint32_t make_valid(uint64_t *rs, uint16_t type, uint8_t *buf)
{
    uint32_t fixed = fixed_of(type);
    fill_random(rs, buf, fixed);
    switch (type) {
    case PSID_M_SPAWN: {
        struct psid_m_spawn s;
        memcpy(&s, buf, sizeof s);
        s.b.flags = below(rs, PSPC_SPAWN_FLAGS + 1);
        s.b.argc = 1 + below(rs, 5);
        s.b.envc = below(rs, 6);
        uint32_t off = fixed;
        for (uint32_t i = 0; i < 1 + s.b.argc + s.b.envc; i++)
            off += put_string(rs, buf + off, 30);
        s.b.strings_len = off - fixed;
        memcpy(buf, &s, sizeof s);
        return off;
    }
    case PSID_M_OUTPUT: {
        struct psid_m_task t;
        memcpy(&t, buf, sizeof t);
        t.pid = rand_pid(rs);
        t.stream = below(rs, 2) ? PSPC_STDOUT : PSPC_STDERR;
        memcpy(buf, &t, sizeof t);
        uint32_t n = below(rs, 300);
        fill_random(rs, buf + fixed, n);
        return fixed + n;
    }
    case PSID_M_EXIT: {
        struct psid_m_exit e;
        memcpy(&e, buf, sizeof e);
        e.pid = rand_pid(rs);
        e.flags = below(rs, 4);
        memcpy(buf, &e, sizeof e);
        return fixed;
    }
    case PSID_M_STDIN: {
        struct psid_m_stdin s;
        memcpy(&s, buf, sizeof s);
        s.pid = rand_pid(rs);
        s.eof = below(rs, 2);
        memcpy(buf, &s, sizeof s);
        uint32_t n = below(rs, 300);
        fill_random(rs, buf + fixed, n);
        return fixed + n;
    }
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY: {
        struct psid_m_signal s;
        memcpy(&s, buf, sizeof s);
        s.pid = rand_pid(rs);
        s.sig = (int32_t)below(rs, 65);
        memcpy(buf, &s, sizeof s);
        return fixed;
    }
    case PSID_M_HOLD: {
        struct psid_m_hold h;
        memcpy(&h, buf, sizeof h);
        h.hold = below(rs, 2);
        memcpy(buf, &h, sizeof h);
        return fixed;
    }
    case PSID_M_STDIN_TAKEN: {
        struct psid_m_stdin_taken s;
        memcpy(&s, buf, sizeof s);
        s.pid = rand_pid(rs);
        memcpy(buf, &s, sizeof s);
        return fixed;
    }
    default: /* ALIVE, REPLY, ORPHANS, WAS_DEAD: any bytes */
        return fixed;
    }
}

/* Offsets of the NULs in the strings of a valid SPAWN (at most 64). */
static unsigned spawn_nuls(const uint8_t *buf, uint32_t len, uint32_t *at)
{
    unsigned n = 0;
    for (uint32_t i = sizeof(struct psid_m_spawn); i < len && n < 64; i++)
        if (buf[i] == 0)
            at[n++] = i;
    return n;
}

/*
 * Break a valid message of type (len bytes in buf) so that psid_dmsg_check must reject it; the
 * new length in *len.  `what` names the mutation.
 */
static void mutate(uint64_t *rs, uint16_t type, uint8_t *buf, uint32_t *len, const char **what)
{
    uint32_t fixed = fixed_of(type);
    unsigned pick = below(rs, 8);
    if (pick == 0) { /* shorter than the struct */
        *len = below(rs, fixed);
        *what = "truncated";
        return;
    }
    if (pick == 1 && (exact_size(type) || type == PSID_M_SPAWN)) { /* bytes after it */
        uint32_t extra = 1 + below(rs, 64);
        fill_random(rs, buf + *len, extra);
        *len += extra;
        *what = "extra bytes";
        return;
    }
    switch (type) {
    case PSID_M_SPAWN: {
        struct psid_m_spawn s;
        memcpy(&s, buf, sizeof s);
        uint32_t at[64];
        unsigned nn = spawn_nuls(buf, *len, at);
        switch (below(rs, 11)) {
        case 0: { /* argc 0, the argv strings taken out (the rest consistent) */
            uint32_t from = at[0] + 1, to = at[s.b.argc] + 1;
            memmove(buf + from, buf + to, *len - to);
            s.b.strings_len -= to - from;
            *len -= to - from;
            s.b.argc = 0;
            *what = "argc 0";
            break;
        }
        case 1:
            s.b.argc = 65537 + below(rs, 1000);
            *what = "argc too large";
            break;
        case 2:
            s.b.envc = 65537 + (uint32_t)below(rs, 0x7fffffff);
            *what = "envc too large";
            break;
        case 3:
            s.b.flags |= 1u << (2 + below(rs, 30));
            *what = "unknown flag";
            break;
        case 4:
            s.b.strings_len += 1 + below(rs, 10);
            *what = "strings_len too large";
            break;
        case 5:
            s.b.strings_len -= 1 + below(rs, s.b.strings_len);
            *what = "strings_len too small";
            break;
        case 6: /* a NUL gone: one string fewer */
            buf[at[below(rs, nn)]] = 'x';
            *what = "a NUL replaced";
            break;
        case 7:
            s.b.argc++;
            *what = "argc one more than the strings";
            break;
        case 8:
            s.b.envc += 1 + below(rs, 3);
            *what = "envc more than the strings";
            break;
        case 9: { /* one more string than the counts say */
            uint32_t n = put_string(rs, buf + *len, 10);
            *len += n;
            s.b.strings_len += n;
            *what = "one string more than counted";
            break;
        }
        default: { /* fewer than counted: drop the last string (there are at least 2) */
            uint32_t cut = at[nn - 2] + 1;
            s.b.strings_len -= *len - cut;
            *len = cut;
            *what = "one string fewer than counted";
            break;
        }
        }
        memcpy(buf, &s, sizeof s);
        return;
    }
    case PSID_M_OUTPUT: {
        struct psid_m_task t;
        memcpy(&t, buf, sizeof t);
        static const uint32_t streams[] = {0, 3, 7, 0xffffffffu};
        static const int32_t pids[] = {0, -1, INT32_MIN};
        if (below(rs, 2)) {
            t.stream = streams[below(rs, 4)];
            *what = "bad stream";
        } else {
            t.pid = pids[below(rs, 3)];
            *what = "pid <= 0";
        }
        memcpy(buf, &t, sizeof t);
        return;
    }
    case PSID_M_EXIT: {
        struct psid_m_exit e;
        memcpy(&e, buf, sizeof e);
        if (below(rs, 2)) {
            e.flags |= 1u << (2 + below(rs, 30));
            *what = "unknown exit flag";
        } else {
            e.pid = -(int32_t)below(rs, 1000);
            *what = "pid <= 0";
        }
        memcpy(buf, &e, sizeof e);
        return;
    }
    case PSID_M_STDIN: {
        struct psid_m_stdin s;
        memcpy(&s, buf, sizeof s);
        if (below(rs, 2)) {
            s.eof = below(rs, 2) ? 2 : 2 + below(rs, 0xfffffff0u);
            *what = "eof > 1";
        } else {
            s.pid = -(int32_t)below(rs, 1000);
            *what = "pid <= 0";
        }
        memcpy(buf, &s, sizeof s);
        return;
    }
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY: {
        struct psid_m_signal s;
        memcpy(&s, buf, sizeof s);
        static const int32_t sigs[] = {-1, 65, 999, INT32_MIN, INT32_MAX};
        s.sig = sigs[below(rs, 5)];
        memcpy(buf, &s, sizeof s);
        *what = "bad signal number";
        return;
    }
    case PSID_M_HOLD: {
        struct psid_m_hold h;
        memcpy(&h, buf, sizeof h);
        h.hold = 2 + below(rs, 0xfffffff0u);
        memcpy(buf, &h, sizeof h);
        *what = "hold > 1";
        return;
    }
    case PSID_M_STDIN_TAKEN: {
        struct psid_m_stdin_taken s;
        memcpy(&s, buf, sizeof s);
        s.pid = -(int32_t)below(rs, 1000);
        memcpy(buf, &s, sizeof s);
        *what = "pid <= 0";
        return;
    }
    default: /* ALIVE, REPLY, ORPHANS, WAS_DEAD: only the length can be wrong */
        if (below(rs, 2)) {
            *len = below(rs, fixed);
            *what = "truncated";
        } else {
            uint32_t extra = 1 + below(rs, 64);
            fill_random(rs, buf + *len, extra);
            *len += extra;
            *what = "extra bytes";
        }
        return;
    }
}

/* A buffer whose end touches an inaccessible page: reading past a message faults. */
static uint8_t *guard_area(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect(p + 2 * pg, (size_t)pg, PROT_NONE) != 0)
        return NULL;
    return p + 2 * pg; /* the end of the accessible part */
}

/* Check a message placed so that its last byte is the last accessible one. */
static int check_at_end(uint8_t *end, uint16_t type, const uint8_t *msg, uint32_t len)
{
    memcpy(end - len, msg, len);
    return psid_dmsg_check(type, end - len, len);
}

TEST(dmsg_known)
{
    uint8_t *end = guard_area();
    REQUIRE(end != NULL, "mmap");
    static uint8_t buf[DMSG_BUF];
    uint64_t rs = 5;
    /* One hand-made message of each type, and its neighbours in length. */
    for (uint16_t t = 1; t < PSID_M_TYPES; t++) {
        uint32_t len = make_valid(&rs, t, buf);
        CHECK_EQ_I64(check_at_end(end, t, buf, len), 0);
        CHECK_EQ_I64(check_at_end(end, t, buf, fixed_of(t) - 1), -1);
        CHECK_EQ_I64(check_at_end(end, t, buf, 0), -1);
        if (exact_size(t))
            CHECK_EQ_I64(check_at_end(end, t, buf, len + 1), -1);
    }
    /* Unknown types: never, whatever the length. */
    static const uint16_t unknown[] = {0, PSID_M_TYPES, PSID_M_TYPES + 1, 100, 0x8000, 0xffff};
    for (unsigned i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        for (uint32_t len = 0; len < 200; len += 4)
            CHECK_EQ_I64(check_at_end(end, unknown[i], buf, len), -1);

    /* SPAWN by hand: cwd "/", argv {"a"}, env {} */
    struct psid_m_spawn s;
    memset(&s, 0, sizeof s);
    s.b.argc = 1;
    s.b.strings_len = 4;
    memcpy(buf, &s, sizeof s);
    memcpy(buf + sizeof s, "/\0a", 4);
    CHECK_EQ_I64(check_at_end(end, PSID_M_SPAWN, buf, sizeof s + 4), 0);
    buf[sizeof s + 3] = 'b'; /* argv[0] unterminated */
    CHECK_EQ_I64(check_at_end(end, PSID_M_SPAWN, buf, sizeof s + 4), -1);
    buf[sizeof s + 3] = 0;
    s.b.argc = 65536; /* the limit: allowed, but there are not that many strings */
    memcpy(buf, &s, sizeof s);
    CHECK_EQ_I64(check_at_end(end, PSID_M_SPAWN, buf, sizeof s + 4), -1);
    s.b.argc = 1;
    s.b.flags = PSPC_SPAWN_FLAGS;
    memcpy(buf, &s, sizeof s);
    CHECK_EQ_I64(check_at_end(end, PSID_M_SPAWN, buf, sizeof s + 4), 0);

    /* argc 0 with strings that fit it (cwd, one env entry) */
    s.b.argc = 0;
    s.b.envc = 1;
    s.b.flags = 0;
    memcpy(buf, &s, sizeof s);
    CHECK_EQ_I64(check_at_end(end, PSID_M_SPAWN, buf, sizeof s + 4), -1);
    s.b.argc = 1;
    s.b.envc = 0;

    /* argc and envc up to 65536, with as many (empty) strings */
    static uint8_t big[sizeof(struct psid_m_spawn) + 2 * 65538];
    const struct {
        uint32_t argc, envc;
        int rc;
    } lim[] = {{65536, 0, 0}, {65537, 0, -1}, {1, 65536, 0}, {1, 65537, -1}, {65536, 65536, 0}};
    for (unsigned i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        uint32_t n = 1 + lim[i].argc + lim[i].envc;
        memset(big, 0, sizeof big);
        s.b.argc = lim[i].argc;
        s.b.envc = lim[i].envc;
        s.b.strings_len = n;
        memcpy(big, &s, sizeof s);
        CHECK_EQ_I64(psid_dmsg_check(PSID_M_SPAWN, big, (uint32_t)sizeof s + n), lim[i].rc);
    }

    /* SIGNAL: 0 and 64 are the bounds */
    struct psid_m_signal sg = {1, 2, 3, 64, 0};
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_SIGNAL, &sg, sizeof sg), 0);
    sg.sig = 0;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_NOTIFY, &sg, sizeof sg), 0);
    sg.sig = 65;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_SIGNAL, &sg, sizeof sg), -1);
    /* a pid must name a process: 0 and negative ones (groups, everyone) are refused */
    sg.sig = 9;
    sg.pid = 0;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_SIGNAL, &sg, sizeof sg), -1);
    sg.pid = -1;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_NOTIFY, &sg, sizeof sg), -1);
    /* OUTPUT and STDIN may carry any data, EXIT none */
    struct psid_m_task tk = {1, 1, PSPC_STDERR, 0};
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_OUTPUT, &tk, sizeof tk), 0);
    struct psid_m_exit ex = {1, 1, 0, PSPC_EXIT_LOST | PSPC_EXIT_NOTIFY};
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_EXIT, &ex, sizeof ex), 0);
    struct psid_m_stdin si = {1, 1};
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_STDIN, &si, sizeof si), 0);
    si.eof = 2;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_STDIN, &si, sizeof si), -1);
    tk.stream = 3;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_OUTPUT, &tk, sizeof tk), -1);
    ex.flags = 4;
    CHECK_EQ_I64(psid_dmsg_check(PSID_M_EXIT, &ex, sizeof ex), -1);
}

TEST(dmsg_random)
{
    uint64_t rs = th_seed(909) | 1;
    uint8_t *end = guard_area();
    REQUIRE(end != NULL, "mmap");
    static uint8_t buf[DMSG_BUF];
    uint64_t n_random = 0, n_random_ok = 0, n_valid = 0, n_mutated = 0;
    uint64_t bad_valid = 0, bad_mutated = 0, bad_random = 0;
    for (unsigned it = 0; it < 200000; it++) {
        unsigned mode = it % 4; /* 0, 1 random; 2 valid; 3 mutated */
        uint16_t type;
        uint32_t len;
        if (mode < 2) {
            type = (uint16_t)below(&rs, 13);
            len = below(&rs, 601);
            fill_random(&rs, buf, len);
            /* half of them with a plausible struct, to get past the first fields */
            if (mode == 1 && type >= 1 && type < PSID_M_TYPES && len >= fixed_of(type)) {
                uint8_t tmp[DMSG_BUF];
                uint32_t vl = make_valid(&rs, type, tmp);
                memcpy(buf, tmp, fixed_of(type));
                (void)vl;
            }
            int rc = check_at_end(end, type, buf, len);
            n_random++;
            if (rc == 0) {
                n_random_ok++;
                /* whatever passes fits its type */
                if (type < 1 || type >= PSID_M_TYPES || len < fixed_of(type) ||
                    (exact_size(type) && len != fixed_of(type))) {
                    if (bad_random++ == 0)
                        CHECK(0, "random message type %u, %u bytes passed", type, len);
                }
            } else if (rc != -1) {
                if (bad_random++ == 0)
                    CHECK(0, "psid_dmsg_check returned %d", rc);
            }
            continue;
        }
        type = (uint16_t)(1 + below(&rs, PSID_M_TYPES - 1));
        len = make_valid(&rs, type, buf);
        if (mode == 2) {
            n_valid++;
            int rc = check_at_end(end, type, buf, len);
            if (rc != 0 && bad_valid++ == 0)
                CHECK(0, "valid message of type %u (%u bytes) rejected (iteration %u)", type, len,
                      it);
            continue;
        }
        const char *what = "?";
        mutate(&rs, type, buf, &len, &what);
        n_mutated++;
        int rc = check_at_end(end, type, buf, len);
        if (rc != -1 && bad_mutated++ == 0)
            CHECK(0, "message of type %u with %s (%u bytes) passed (iteration %u)", type, what, len,
                  it);
    }
    CHECK_EQ_U64(bad_valid, 0);
    CHECK_EQ_U64(bad_mutated, 0);
    CHECK_EQ_U64(bad_random, 0);
    CHECK_EQ_U64(n_random + n_valid + n_mutated, 200000);
    printf("# dmsg_random: %" PRIu64 " random (%" PRIu64 " passed), %" PRIu64 " valid, %" PRIu64
           " mutated\n",
           n_random, n_random_ok, n_valid, n_mutated);
}

TEST_MAIN()
