/*
 * mcp_image.h — the NIC memory image ("SRAM").
 *
 * Everything the firmware keeps lives in one contiguous region laid out by
 * mcp_image_format(): a header with a magic, the ABI version and the offsets of every section,
 * followed by the sections.  There are no pointers inside, only offsets and indices, so the
 * image can live in a memfd mapped at different addresses in several processes, or in kernel
 * memory mapped into user space.  Any executor holding the NIC lock can run mcp_poll() on it.
 *
 * Who writes what:
 *  - send slot `state`: the host moves IDLE -> READY; the firmware moves READY -> INTRANSIT ->
 *    (RETRANSMIT -> INTRANSIT)* -> IDLE.  Loads and stores of `state` are atomic
 *    (acquire/release); all other slot fields are owned by whoever owns the current state.
 *  - host receive queue entry `full`: the firmware sets it after filling the entry, the host
 *    clears it after taking the data.
 *  - error queue entry `full`: likewise, per context.
 *  - everything else is firmware state, touched only under the NIC lock.
 *
 * An executor may die at any instruction of a pass (a client killed while it holds the NIC
 * lock).  Every firmware step that stores more than one field describes itself first in the
 * header's journal (struct mcp_journal); mcp_image_repair() undoes or completes the step the
 * dead executor left open and rebuilds what is derivable (mcp/PROTOCOL.md, "Surviving a dead
 * executor").
 */
#ifndef PSPORT_MCP_IMAGE_H
#define PSPORT_MCP_IMAGE_H

#include "mcp_types.h"
#include "mcp_wire.h"

#define MCP_IMAGE_MAGIC 0x3150434du /* "MCP1" */
/* 2: the step journal in the header; 3: adaptive RTO; 4: the host's payload CRC in a send slot,
 * frame buffers swapped into the host queue (mcp_frame_buf) */
#define MCP_ABI_VERSION  4u
#define MCP_MAX_WINDOW   64u /* largest configurable window; a power of two below 128 */
#define MCP_MAX_CONTEXTS 64u
#define MCP_NIL          0xffffffffu
#define MCP_CACHELINE    64u

/* Atomic access to fields shared between host and firmware (gcc builtins: user and kernel). */
#define MCP_LOAD_ACQ(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define MCP_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* Buffer states of the paper's figure 3. */
enum mcp_slot_state {
    MCP_SLOT_IDLE = 0,
    MCP_SLOT_READY = 1,
    MCP_SLOT_INTRANSIT = 2,
    MCP_SLOT_RETRANSMIT = 3,
};

/* Configuration, fixed when the image is formatted (copied into the header). */
struct mcp_config {
    uint16_t node_id;          /* this NIC's node id */
    uint16_t max_nodes;        /* peers 0 .. max_nodes-1 */
    uint16_t contexts;         /* attachable host contexts (<= MCP_MAX_CONTEXTS) */
    uint16_t send_slots;       /* send ring slots per context */
    uint16_t recv_slots;       /* NIC receive ring slots (>= 2) */
    uint16_t hostq_slots;      /* host receive queue entries */
    uint16_t window;           /* send window per peer (1 .. MCP_MAX_WINDOW) */
    uint16_t rx_batch;         /* frames taken from the link per pass */
    uint32_t slot_size;        /* largest payload of one frame */
    uint32_t rto_us;           /* first retransmission timeout */
    uint32_t rto_max_us;       /* timeout after exponential back-off */
    uint32_t ack_delay_us;     /* longest an ACK waits for reverse data to ride on */
    uint32_t nack_interval_us; /* least time between two NACKs for the same gap */
    uint32_t nobuf_backoff_us; /* sender pause after a "no buffer" NACK */
    uint32_t peer_timeout_ms;  /* silence after which a peer with pending sends is dead */
    uint32_t reserved;
    uint64_t seed; /* seeds connection ids and initial sequence numbers */
};

/* NIC counters, in the order psinfo and mcp-pp print them. */
#define MCP_COUNTERS(X)                                                                            \
    X(tx_data, "data frames sent (first transmissions)")                                           \
    X(tx_retx, "data frames retransmitted")                                                        \
    X(tx_ack, "standalone ACK frames sent")                                                        \
    X(tx_nack, "NACK frames sent")                                                                 \
    X(tx_ctrl, "SYN/SYNACK/RST frames sent")                                                       \
    X(tx_bytes, "bytes of frames sent")                                                            \
    X(tx_busy, "frames the link could not queue (retried)")                                        \
    X(rx_frames, "frames received from the link")                                                  \
    X(rx_bytes, "bytes of frames received")                                                        \
    X(rx_data, "data frames accepted in sequence")                                                 \
    X(rx_ack, "standalone ACK frames received")                                                    \
    X(rx_nack, "NACK frames received")                                                             \
    X(rx_dup, "duplicate data frames (re-ACKed)")                                                  \
    X(rx_gap, "data frames ahead of sequence (NACKed)")                                            \
    X(nack_nobuf, "data frames refused for lack of a second free buffer")                          \
    X(ack_dup, "ACKs acknowledging nothing new")                                                   \
    X(ack_bad, "ACKs beyond what was sent (ignored)")                                              \
    X(nack_ignored, "NACKs for buffers already marked for retransmission")                         \
    X(timeouts, "retransmission timeouts")                                                         \
    X(crc_errors, "frames dropped for a bad CRC")                                                  \
    X(malformed, "frames dropped as malformed (short, magic, version, type, length)")              \
    X(wrong_dest, "frames addressed to another node")                                              \
    X(stale, "frames of an old or unknown connection")                                             \
    X(delivered, "frames delivered to the host receive queue")                                     \
    X(hostq_full, "passes the host queue was full")                                                \
    X(peer_resets, "connections reset by a restarted peer")                                        \
    X(peers_dead, "peers declared dead")                                                           \
    X(send_errors, "sends failed back to the host")                                                \
    X(errq_overflow, "send errors that found the error queue full")                                \
    X(repairs, "image repairs after an executor died inside a pass")                               \
    X(repair_undone, "interrupted firmware steps undone by a repair")                              \
    X(repair_redone, "interrupted firmware steps completed by a repair")

struct mcp_counters {
#define MCP_COUNTER_FIELD(name, help) uint64_t name;
    MCP_COUNTERS(MCP_COUNTER_FIELD)
#undef MCP_COUNTER_FIELD
};

/* Descriptor of one send slot. The frame (header + payload) lives in the frames section. */
struct mcp_send_slot {
    uint32_t state;   /* enum mcp_slot_state (atomic) */
    uint16_t dst;     /* host: destination node */
    uint16_t ctx;     /* owning context (fixed) */
    uint32_t len;     /* host: payload bytes */
    uint32_t cookie;  /* host: opaque value returned with an error */
    uint32_t next;    /* firmware: next slot in the peer's queue, or MCP_NIL */
    int32_t error;    /* firmware: 0, or the negative errno of the last failed send */
    uint8_t seq;      /* firmware: sequence number once transmitted */
    uint8_t taken;    /* firmware: 1 from taking the slot off the ring until it is IDLE again */
    uint8_t retx;     /* firmware: sent again since its first transmission (no RTT sample) */
    uint8_t pcrc_set; /* host: pcrc is the payload's CRC (mcp_send_post_crc); the firmware
                         uses it for the first transmission only and clears it */
    uint32_t pcrc;    /* host: CRC-32C of the len payload bytes, taken as they were copied in */
    uint64_t tx_ns;   /* firmware: time of the last transmission */
};

enum mcp_ctx_state { MCP_CTX_FREE = 0, MCP_CTX_ATTACHED = 1, MCP_CTX_CLOSING = 2 };

/* One attached host process. */
struct mcp_context {
    uint32_t state;      /* enum mcp_ctx_state (atomic; CAS to attach) */
    uint32_t owner;      /* provider's id of the owner (pid) */
    uint32_t generation; /* bumped on every attach */
    uint32_t pad0;
    uint32_t accept;    /* firmware: next ring position to take */
    uint32_t errq_head; /* firmware: next error entry to fill */
    uint8_t pad1[MCP_CACHELINE - 24];
    uint32_t head;      /* host: next ring position to fill */
    uint32_t errq_tail; /* host: next error entry to read */
    uint8_t pad2[MCP_CACHELINE - 8];
};

/* An error returned to a host context: a send that could not be delivered. */
struct mcp_send_error {
    uint32_t full;   /* atomic: set by firmware, cleared by host */
    uint32_t cookie; /* the slot's cookie */
    uint32_t slot;   /* ring index within the context */
    uint16_t dst;    /* destination node */
    int16_t error;   /* negative errno: -ETIMEDOUT (peer dead), -ECONNRESET, -EINVAL */
};

/* Receive ring slot descriptor (NIC side). */
struct mcp_recv_slot {
    uint32_t state; /* IDLE, INTRANSIT or READY (firmware only) */
    uint32_t len;   /* payload bytes once READY */
    uint16_t src;   /* source node once READY */
    uint16_t pad;
    uint32_t buf; /* firmware: the frame buffer it receives into (mcp_frame_buf) */
};

/*
 * Host receive queue entry.  Its payload lies in frame buffer `buf`, after the frame header:
 * delivery swaps the buffers of the receive slot and the entry rather than copy the payload
 * (the paper's DMA into host memory), so a frame buffer is a receive slot's, then an entry's,
 * then a receive slot's again.
 */
struct mcp_hostq_entry {
    uint32_t full; /* atomic: set by firmware, cleared by host */
    uint16_t src;  /* source node */
    uint16_t pad;
    uint32_t len; /* payload bytes */
    uint32_t buf; /* firmware: the frame buffer holding the payload (mcp_frame_buf) */
};

enum mcp_conn_state { MCP_CONN_CLOSED = 0, MCP_CONN_OPEN = 1 };

/* Per-peer connection: both directions of one node pair. Firmware only. */
struct mcp_conn {
    uint32_t state;      /* MCP_CONN_CLOSED: nothing known; OPEN: local_cid chosen */
    uint32_t local_cid;  /* our connection id (0 when closed) */
    uint32_t peer_cid;   /* the peer's connection id (0 until learnt) */
    uint8_t have_peer;   /* peer_cid and rcv_nxt are known */
    uint8_t confirmed;   /* the peer knows local_cid and our initial sequence number */
    uint8_t iss;         /* our initial sequence number */
    uint8_t snd_una;     /* oldest unacknowledged sequence number */
    uint8_t snd_nxt;     /* next sequence number to assign */
    uint8_t snd_tx;      /* next sequence number to (re)transmit; < snd_nxt during go-back-N */
    uint8_t rcv_nxt;     /* next sequence number expected from the peer */
    uint8_t ack_pending; /* frames received but not yet acknowledged */
    uint8_t nack_valid;  /* nack_seq/nack_ns describe the last NACK sent */
    uint8_t nack_seq;    /* rcv_nxt when the last NACK was sent */
    uint8_t gbn_valid;   /* gbn_seq/gbn_ns describe the last go-back-N */
    uint8_t gbn_seq;
    uint32_t q_head; /* READY slots waiting for a sequence number (global slot ids) */
    uint32_t q_tail;
    uint32_t rto_us;        /* current timeout (backs off) */
    uint32_t srtt_us;       /* smoothed round-trip time of data to its ACK; 0: no sample yet */
    uint32_t rttvar_us;     /* its mean deviation */
    uint32_t ack_asap;      /* host: acknowledge now, not after ack_delay_us (mcp_ack_asap);
                               the firmware clears it at its next look at this peer */
    uint64_t last_rx_ns;    /* last valid frame from this peer */
    uint64_t wait_since_ns; /* when this connection last went from idle to having work */
    uint64_t rto_deadline;  /* 0 when not armed */
    uint64_t ack_due_ns;    /* when a pending ACK must go out */
    uint64_t nack_ns;
    uint64_t gbn_ns;
    uint64_t retx_after_ns;            /* no retransmission before this (NOBUF back-off) */
    uint64_t syn_ns;                   /* last SYN sent */
    uint32_t inflight[MCP_MAX_WINDOW]; /* slot by seq % MCP_MAX_WINDOW, for [snd_una, snd_nxt) */
};

/*
 * The steps the journal describes (mcp/PROTOCOL.md).  A step that had not completed when its
 * executor died is undone (ACCEPT; DELIVER before the host could see the entry) or completed
 * from the recorded values (everything else: those steps either made something visible to the
 * host already or are idempotent).
 */
enum mcp_journal_op {
    MCP_J_NONE = 0,
    MCP_J_ACCEPT = 1,  /* DATA accepted: receive slot READY, ready-FIFO push, rcv_nxt++ */
    MCP_J_DELIVER = 2, /* host queue entry filled, ready-FIFO pop, receive slot released */
    MCP_J_TAKE = 3,    /* send slot taken off a context ring into its peer's queue (or failed) */
    MCP_J_SEND = 4,    /* queue head transmitted first: inflight[], snd_nxt++, INTRANSIT */
    MCP_J_QFAIL = 5,   /* queue head refused by the link for good: failed and unlinked */
    MCP_J_ACK = 6,     /* slots [snd_una, ack) released */
    MCP_J_RESET = 7,   /* every pending send of a connection failed, the connection cleared */
    MCP_J_OPEN = 8,    /* connection id and initial sequence number chosen */
    MCP_J_LEARN = 9,   /* the peer's connection id and initial sequence number learnt */
};

/*
 * The one-entry journal.  A step stores every field, then `op`; it clears `op` when it is
 * complete (compiler barriers keep the order real).  fail_* describe the send slot a step
 * is currently failing back to the host (mcp_journal.fail_slot = MCP_NIL: none).
 */
struct mcp_journal {
    uint32_t op;      /* enum mcp_journal_op; MCP_J_NONE when no step is open */
    uint16_t node;    /* peer of the step */
    uint16_t ctx;     /* context of the step (TAKE) */
    uint32_t slot;    /* send slot id (global) or receive slot of the step */
    uint32_t a, b, c; /* values before the step, per op (mcp_repair.c) */
    int32_t err;      /* errno a failed send gets (TAKE, QFAIL, RESET) */
    uint32_t fail_slot;
    uint32_t fail_pos; /* error queue position of its entry */
    uint32_t fail_ovf; /* 1: that entry was full, the error is only counted */
    uint32_t pad;
    uint64_t t;              /* a 64-bit value of the step (a time) */
    uint64_t cnt;            /* the counter the step bumps, before the step */
    uint64_t fail_errors;    /* send_errors before that fail */
    uint64_t fail_overflows; /* errq_overflow before that fail */
};

/* The image header. Firmware runtime fields follow the layout fields. */
struct mcp_image {
    uint32_t magic;
    uint32_t abi_version;
    uint64_t size; /* bytes of the whole image */
    struct mcp_config cfg;
    uint32_t frame_stride; /* bytes from one frame buffer to the next */
    uint32_t off_ctx;      /* struct mcp_context[contexts] */
    uint32_t off_send;     /* struct mcp_send_slot[contexts * send_slots] */
    uint32_t off_send_frames;
    uint32_t off_errq; /* struct mcp_send_error[contexts * send_slots] */
    uint32_t off_recv; /* struct mcp_recv_slot[recv_slots] */
    uint32_t off_recv_frames;
    uint32_t off_rx_free;  /* uint32_t[recv_slots]: stack of IDLE receive slots */
    uint32_t off_rx_ready; /* uint32_t[recv_slots]: FIFO of READY receive slots */
    uint32_t off_hostq;    /* struct mcp_hostq_entry[hostq_slots] */
    uint32_t off_hostq_data;
    uint32_t off_conn;   /* struct mcp_conn[max_nodes] */
    uint32_t off_active; /* uint64_t[(max_nodes + 63) / 64]: peers with work */
    uint32_t pad0;

    /* firmware runtime state */
    uint64_t rng;           /* xorshift state for ids and initial sequence numbers */
    uint64_t ctx_mask;      /* contexts not FREE (host sets bits on attach) */
    uint32_t rx_free_top;   /* entries on the rx_free stack */
    uint32_t rx_ready_head; /* FIFO positions (monotonic) */
    uint32_t rx_ready_tail;
    uint32_t hostq_head; /* firmware: next host queue entry to fill */
    uint64_t polls;      /* mcp_poll passes */
    struct mcp_journal journal;
    uint8_t pad1[MCP_CACHELINE];
    uint32_t rx_event; /* bumped on every delivery to the host queue (a futex word) */
    uint8_t pad2[MCP_CACHELINE - 4];
    uint32_t hostq_tail; /* host: next host queue entry to read */
    uint8_t pad3[MCP_CACHELINE - 4];
    struct mcp_counters counters;
};

/* Section accessors. */
#define MCP_AT(img, off) ((void *)((uint8_t *)(img) + (off)))

static inline struct mcp_context *mcp_ctx(struct mcp_image *img, unsigned c)
{
    return (struct mcp_context *)MCP_AT(img, img->off_ctx) + c;
}

/* Global send slot id: ctx * send_slots + ring index. */
static inline struct mcp_send_slot *mcp_sslot(struct mcp_image *img, uint32_t id)
{
    return (struct mcp_send_slot *)MCP_AT(img, img->off_send) + id;
}

static inline uint8_t *mcp_sframe(struct mcp_image *img, uint32_t id)
{
    return (uint8_t *)MCP_AT(img, img->off_send_frames) + (size_t)id * img->frame_stride;
}

static inline struct mcp_send_error *mcp_errq(struct mcp_image *img, unsigned c)
{
    return (struct mcp_send_error *)MCP_AT(img, img->off_errq) + (size_t)c * img->cfg.send_slots;
}

static inline struct mcp_recv_slot *mcp_rslot(struct mcp_image *img, uint32_t i)
{
    return (struct mcp_recv_slot *)MCP_AT(img, img->off_recv) + i;
}

/*
 * Frame buffer b: recv_slots + hostq_slots of them, the receive frames section, then the host
 * queue's.  An index out of range (only a corrupted image holds one) is taken as 0, so the
 * firmware never writes outside the image.
 */
static inline uint8_t *mcp_frame_buf(struct mcp_image *img, uint32_t b)
{
    uint32_t nr = img->cfg.recv_slots;
    if (b >= nr + img->cfg.hostq_slots)
        b = 0;
    if (b < nr)
        return (uint8_t *)MCP_AT(img, img->off_recv_frames) + (size_t)b * img->frame_stride;
    return (uint8_t *)MCP_AT(img, img->off_hostq_data) + (size_t)(b - nr) * img->frame_stride;
}

/* The frame in receive slot i. */
static inline uint8_t *mcp_rframe(struct mcp_image *img, uint32_t i)
{
    return mcp_frame_buf(img, mcp_rslot(img, i)->buf);
}

static inline struct mcp_hostq_entry *mcp_hostq(struct mcp_image *img, uint32_t i)
{
    return (struct mcp_hostq_entry *)MCP_AT(img, img->off_hostq) + i;
}

/* The payload of host queue entry i. */
static inline uint8_t *mcp_hostq_data(struct mcp_image *img, uint32_t i)
{
    return mcp_frame_buf(img, mcp_hostq(img, i)->buf) + MCP_WIRE_HDR;
}

static inline struct mcp_conn *mcp_conn(struct mcp_image *img, uint16_t node)
{
    return (struct mcp_conn *)MCP_AT(img, img->off_conn) + node;
}

#endif
