/*
 * proto.h — the protocol switch: PULC's header in every NIC frame and the table of receive
 * handlers, and the drain that empties the node's host receive queue into the message area.
 *
 * Header (20 bytes, little-endian) at the start of every frame's payload:
 *   proto:8 flags:8 src_port:16 dst_port:16 xlen:16 msg_id:32 offset:32 total:32
 * followed, in a message's first fragment, by xlen bytes of extra header, then payload.
 * offset is the payload offset of the frame's first payload byte; total the message's length.
 */
#ifndef PSPORT_PULC_PROTO_H
#define PSPORT_PULC_PROTO_H

#include <stdint.h>

#include "area.h"
#include "mcp_image.h"

#define PULC_HDR_LEN 20u

enum pulc_proto {
    PULC_PROTO_D = 1,     /* port-D datagrams */
    PULC_PROTO_S = 2,     /* port-S stream */
    PULC_PROTO_M = 3,     /* port-M streams */
    PULC_PROTO_RAW = 4,   /* rawdata into a registered buffer */
    PULC_PROTO_ERR = 5,   /* error notice back to a sender: offset holds the errno */
    PULC_PROTO_ABORT = 6, /* psid: the sender died mid-message; src/dst/msg_id name it */
    PULC_PROTO_MAX = 16
};

#define PULC_HF_FIRST 0x01u /* the message's first fragment (carries the extra header) */

struct pulc_hdr {
    uint8_t proto, flags;
    uint16_t src_port, dst_port, xlen;
    uint32_t msg_id, offset, total;
};

/* What a drain needs of the node: the area, the image, a context for error notices. */
struct pulc_node {
    struct pulc_area *area;
    struct mcp_image *img;
    int ctx;          /* our NIC context (error notices are sent through it), -1 none */
    uint16_t node_id; /* this node */
    int32_t pid;      /* this process (getpid() is a system call; it is asked once) */
    /* psid: leave a frame of a protocol nobody here handles (a HAL-level client's) at the
     * head for its owner, dropping it only when it is still there after PULC_UNKNOWN_NS */
    int keep_unknown;
    uint64_t unknown_tag, unknown_since_ns;
    /* kernel provider: finish a host-queue release a dead consumer left half done through
     * the device (its firmware thread does not take the area's NIC lock); NULL: under the
     * NIC lock */
    int (*settle)(int dev_fd, uint32_t pos);
    int dev_fd;
    /* kernel provider: the process's drainer thread posts notices too; the context's send
     * ring has one producer at a time under this lock (NULL: one thread, no lock) */
    pthread_mutex_t *ring_lock;
    /* only libpulc's own protocols (a drainer thread must not run handlers the process
     * registered: they expect its main thread); frames of others wait as for keep_unknown */
    int builtin_only;
};

#define PULC_UNKNOWN_NS 1000000000ull

/* Encode h into the first PULC_HDR_LEN bytes of b. */
void pulc_hdr_put(uint8_t *b, const struct pulc_hdr *h);

/* Decode a header from a frame of len bytes: 0, or -EBADMSG when it is short or impossible. */
int pulc_hdr_get(const uint8_t *b, uint32_t len, struct pulc_hdr *h);

/*
 * A receive handler: the frame from node src_node with header h and len bytes after the
 * header (extra header + payload).  Runs under the area lock.  Returns 0 when the frame is
 * consumed, -EAGAIN when it must wait for resources (the drain stops and retries later).
 * rx_tag identifies the frame for exactly-once processing after a repair (marea.h).
 */
typedef int (*pulc_proto_fn)(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                             const uint8_t *body, uint32_t len, uint64_t rx_tag);

/* rawdata's receive handler (raw_rx.c), PULC_PROTO_RAW in the switch. */
int pulc_raw_rx(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                const uint8_t *body, uint32_t len, uint64_t rx_tag);

/* Put fn in the switch for protocol id proto (new protocols plug in here). 0 or -EINVAL. */
int pulc_proto_register(unsigned proto, pulc_proto_fn fn);

/*
 * Move up to max frames from the host receive queue into the message area (takes the area
 * lock).  Returns the frames consumed, or a negative errno when the area lock cannot be
 * taken.  Processes owning a port that received something are woken.
 */
int pulc_drain(struct pulc_node *n, unsigned max);

/*
 * Send an error notice (errno value err) for message msg_id about our port our_port back to
 * port dst_port on node dst_node through n's context.  0, or -EAGAIN when the send ring is
 * full.
 */
int pulc_send_error(struct pulc_node *n, uint16_t dst_node, uint16_t dst_port, uint16_t our_port,
                    uint32_t msg_id, int err);

/*
 * Tell port dest that message msg_id from our port src_port will not continue (its sender
 * died half way).  0, or -EAGAIN when the send ring is full.
 */
int pulc_send_abort(struct pulc_node *n, uint32_t dest, uint16_t src_port, uint32_t msg_id);

#endif
