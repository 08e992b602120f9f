/*
 * rdp_fixture.h — shared scaffolding of the firmware (RDP) unit tests.
 *
 * Two set-ups:
 *
 *  - struct fx: one NIC image, the device under test (node DUT), on a sim net; the test plays
 *    its peer (node PEER) by injecting hand-made frames and reading what the DUT sends from
 *    the peer's own sim link.  The DUT's link can be wrapped in a "gate" that refuses tx()
 *    (-EAGAIN, as a busy link may) and records the state of every receive slot the firmware
 *    hands to rx(), so that transient buffer states can be observed.
 *
 *  - struct cluster: n real NIC images on one sim net (with faults), each with a host context
 *    that streams numbered, self-describing messages to the others and verifies what it
 *    receives (exactly once, in order per sender, content intact).
 *
 * Everything is deterministic: fixed seeds, a virtual clock advanced by the test.
 */
#ifndef PSPORT_TEST_RDP_FIXTURE_H
#define PSPORT_TEST_RDP_FIXTURE_H

#include <stdint.h>

#include "link_sim.h"
#include "mcp.h"
#include "mcp_host.h"

/* ---- the device-under-test fixture ------------------------------------------------------ */

#define DUT     0
#define PEER    1
#define NODES   4
#define PAYLOAD 256u
#define MAXF    (MCP_WIRE_HDR + PAYLOAD)
#define T0      1000000ull /* 1 ms: the DUT's connection ids carry stamp 1 */
#define US      1000ull

/* The peer's connection ids: the top 16 bits are the creation stamp (ms). */
#define PCID     0x00000121u /* stamp 1 ms (cid = 24-bit ms stamp << 8 | random) */
#define PCID_NEW 0x000005efu /* stamp 5: a restarted peer */
#define PCID_OLD 0x00000011u /* stamp 0: an older incarnation */
#define PISS     250         /* the peer's initial sequence number: wraps soon */
#define ANY      0x100000000ull

struct frame {
    struct mcp_wire_hdr h;
    uint32_t len;
    uint8_t b[MAXF + 1];
};

/* A link wrapper between the DUT's firmware and its sim link. */
struct gate {
    struct lanai_link l; /* first member: the firmware sees this */
    struct lanai_link *inner;
    struct mcp_image *img;
    int tx_blocked; /* tx() answers -EAGAIN */
    unsigned tx_refused;
    /* receive slots the last rx() filled, and their states right after the fill */
    unsigned rx_n;
    uint32_t rx_slot[64];
    uint32_t rx_state[64];
};

struct fx {
    struct mcp_sim_net *net;
    struct lanai_link *dl, *pl; /* the DUT's and the peer's sim links */
    struct gate gate;           /* used when fx_init(.., gated = 1) */
    struct mcp_image *img;
    struct mcp_nic nic;
    int ctx;
    uint64_t t;
    struct mcp_counters snap; /* counters at the last counter check */
    /* the connection as the handshake established it */
    uint32_t lcid; /* the DUT's connection id */
    uint8_t liss;  /* the DUT's initial sequence number */
    uint32_t pcid; /* the peer's connection id the DUT's DATA must name */
    uint8_t pnxt;  /* the ack the DUT's DATA may piggyback (the peer's next seq) */
};

/* The fixture's configuration: 4 nodes, 2 contexts x 16 send slots, 16 receive slots, ... */
void cfg_default(struct mcp_config *c);

/* The configuration of the traffic tests (soak, edge cases): nodes NICs with 64-slot rings,
 * 256-byte slots, window 8 and timers scaled for virtual time; node id 0. */
void cfg_traffic(struct mcp_config *c, uint16_t nodes);

/* A formatted image (64-byte aligned, malloc'd) or NULL. */
struct mcp_image *image_new(const struct mcp_config *c);

/* Set up net, links, DUT image and context; gated: run the DUT through f->gate. 1 if ok. */
int fx_init(struct fx *f, const struct mcp_config *c, int gated);
void fx_fini(struct fx *f);

/* Advance the clock by dt and run one firmware pass. */
void step(struct fx *f, uint64_t dt);

/* The payload byte i of a message tagged tag. */
uint8_t pattern(uint32_t tag, uint32_t i);

/* Build a sealed frame from the peer to the DUT into buf; returns its length. */
uint32_t build(uint8_t *buf, uint8_t type, uint32_t scid, uint32_t dcid, uint8_t seq, uint8_t ack,
               uint8_t flags, uint16_t plen, uint32_t tag);

void inject_raw(struct fx *f, const uint8_t *buf, uint32_t len);
/* A control frame (no payload) from the peer. */
void inject_ctrl(struct fx *f, uint8_t type, uint32_t scid, uint32_t dcid, uint8_t seq, uint8_t ack,
                 uint8_t flags);
/* A DATA frame of the live connection, 40 payload bytes tagged tag, no piggybacked ACK. */
void inject_data(struct fx *f, uint8_t seq, uint32_t tag);

/* Take every frame the DUT sent to the peer (each must pass mcp_wire_check); the count. */
int take_frames(struct fx *f, struct frame *out, int max);
/* Discard every frame waiting at the peer; returns how many. */
int drain(struct fx *f);

/* No frame from the DUT is waiting. */
#define CHECK_SILENT(f)                                                                            \
    do {                                                                                           \
        struct frame fr_[4];                                                                       \
        int n_ = take_frames((f), fr_, 4);                                                         \
        CHECK(n_ == 0, "the DUT sent %d frame(s), first of type %u", n_, n_ ? fr_[0].h.type : 0);  \
    } while (0)

/* Check the header fields of one frame; ANY skips a field (ack: also checks MCP_FLAG_ACK). */
int frame_is(const char *file, int line, const struct frame *fr, uint8_t type, uint64_t scid,
             uint64_t dcid, uint64_t seq, uint64_t ack);
#define FRAME_IS(fr, type, scid, dcid, seq, ack)                                                   \
    frame_is(__FILE__, __LINE__, &(fr), type, scid, dcid, seq, ack)

/*
 * Check how every counter moved since the last check: spec lists "name=delta" or "name=?"
 * (any change); names not listed must not have moved.  Byte counters are never checked.
 */
int counters_moved(const char *file, int line, struct fx *f, const char *spec);
#define COUNTERS(f, spec) counters_moved(__FILE__, __LINE__, (f), (spec))

/* The peer opens: SYN in, exactly one SYNACK out.  Sets f->lcid and f->liss. */
int peer_open(struct fx *f);

/* Post sends first..first+n-1 to PEER: cookie 100+i, len 20+i, payload tagged 1000+i. */
void post_sends(struct fx *f, unsigned first, unsigned n);

/* Send slot i (ring index) of the fixture's context. */
struct mcp_send_slot *sslot(struct fx *f, unsigned i);

/* Check a DATA frame carrying send number i with sequence number seq. */
int data_frame_is(const char *file, int line, struct fx *f, const struct frame *fr, unsigned i,
                  uint8_t seq);
#define DATA_IS(f, fr, i, seq) data_frame_is(__FILE__, __LINE__, (f), &(fr), (i), (seq))

/* The DUT opens with n sends: SYN out, SYNACK in, the first min(n, window) go out as DATA. */
int dut_open(struct fx *f, unsigned n);

/* The oldest host queue entry is a 40-byte DATA tagged tag from the peer; take it. */
int host_takes(const char *file, int line, struct fx *f, uint32_t tag);
#define HOST_TAKES(f, tag) host_takes(__FILE__, __LINE__, (f), (tag))

int hostq_empty(struct fx *f);
/* Receive slots in state `state`. */
unsigned rslots_in(struct fx *f, uint32_t state);

/* Pop one error entry: send i failed with err. */
int error_is(const char *file, int line, struct fx *f, unsigned i, int err);
#define ERROR_IS(f, i, err) error_is(__FILE__, __LINE__, (f), (i), (err))

/* Collect what the DUT sends in at most two passes at the current time. */
int collect(struct fx *f, struct frame *fr, int max);

/* ---- the traffic cluster ------------------------------------------------------------------ */

#define CL_MAX    8
#define MSG_HDR   16u /* magic, src, dst, number, incarnation */
#define MSG_MAGIC 0x4753504du

struct cl_node {
    struct mcp_image *img;
    struct mcp_nic nic;
    struct lanai_link *link;
    int ctx;
    int polled; /* run mcp_poll() each round */
    int drains; /* the host empties its receive queue each round */
    int sends;  /* the host posts messages each round */
    uint32_t incarnation;
};

struct cluster {
    struct mcp_sim_net *net;
    struct mcp_config cfg; /* of every node; node_id and seed set per node */
    unsigned n;
    struct cl_node node[CL_MAX];
    uint64_t t, dt, rounds;
    uint32_t maxlen;      /* largest message (payload) */
    int strict;           /* every message must arrive; no send may fail */
    unsigned drain_every; /* hosts drain their receive queues every this many rounds (1) */
    uint32_t target[CL_MAX][CL_MAX]; /* [src][dst]: messages to send */
    uint32_t posted[CL_MAX][CL_MAX];
    uint32_t next[CL_MAX][CL_MAX];   /* [dst][src]: next message number expected (strict) */
    int64_t last[CL_MAX][CL_MAX];    /* [dst][src]: last number received, -1 before */
    uint8_t *got[CL_MAX][CL_MAX];    /* [src][dst]: per message: times delivered */
    uint8_t *failed[CL_MAX][CL_MAX]; /* [src][dst]: per message: the send failed */
    uint64_t delivered;              /* verified deliveries */
    uint64_t bad;                    /* verification failures */
    uint64_t errq[4];                /* send errors seen: EINVAL, ETIMEDOUT, ECONNRESET, other */
    char why[256];                   /* the first verification failure */
};

/*
 * n nodes, each formatted from cfg (node_id = index, seed = cfg->seed + index), on a net of
 * max(n, max_nodes) ids with faults f (NULL: none) carrying frames up to header + slot + 512. Every
 * node is polled, drains and sends.  Clock starts at T0, dt per round.  1 if ok.
 */
int cluster_init(struct cluster *cl, unsigned n, const struct mcp_config *cfg,
                 const struct mcp_fault_cfg *f, uint64_t dt, uint32_t maxlen);
void cluster_fini(struct cluster *cl);

/* Messages src -> dst to send in total (allocates the bookkeeping). */
void cluster_target(struct cluster *cl, unsigned src, unsigned dst, uint32_t count);

/* One round: post, poll every node, drain and verify, collect send errors. */
void cluster_round(struct cluster *cl);

/* Everything posted, every send slot IDLE, every strict message delivered. */
int cluster_done(struct cluster *cl);

/* Run rounds until done or max_rounds; returns 1 if done. */
int cluster_run(struct cluster *cl, uint64_t max_rounds);

/* Reformat node i's image with a new seed (a restart), keeping its link. */
void cluster_restart(struct cluster *cl, unsigned i, uint64_t seed);

/* Sum of one counter (by name) over all nodes. */
uint64_t cluster_counter(struct cluster *cl, const char *name);

/* Drain the host queue of node d now (verifying). */
void cluster_drain(struct cluster *cl, unsigned d);

#endif
