/*
 * dlink.h — daemon-to-daemon messages: RDP over UDP, run by the firmware's engine (mcp/).
 *
 * psid talks to the other psids through a second NIC image of its own (private memory, one
 * context) on a UDP link one port above the node's NIC port.  The firmware gives reliable,
 * ordered delivery per node pair, retransmission, and a dead-peer timeout; this module adds
 * messages larger than one frame (fragmented and reassembled) and two channels per peer:
 * urgent (alive, requests, replies) and bulk (output, stdin), so a flood of output never
 * delays an alive message behind it.  Single-threaded: only psid's event loop calls it.
 */
#ifndef PSPORT_PSID_DLINK_H
#define PSPORT_PSID_DLINK_H

#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "nodes.h"

/* Largest daemon message (spawn requests carry the environment). */
#define PSID_DMSG_MAX (4u << 20)

/* Channels of a peer: messages of one channel arrive in the order they were sent. */
enum psid_chan { PSID_CHAN_URGENT = 0, PSID_CHAN_BULK = 1 };

/* Counters of the daemon link (the firmware's own are in the image: psid_dlink_image). */
struct psid_dlink_stats {
    uint64_t msgs_tx, msgs_rx;   /* whole messages */
    uint64_t bytes_tx, bytes_rx; /* message bytes */
    uint64_t malformed;          /* frames or messages dropped as malformed (counted, never used) */
    uint64_t send_failed;        /* frames the firmware failed back (peer dead or reset) */
    uint64_t dropped_queued;     /* messages dropped unsent because their peer died */
};

struct psid_dlink;

/*
 * Called for every whole message: src node, message type, its bytes (valid during the
 * call only).  The receiver checks the message's own layout (dmsg.h).
 */
typedef void (*psid_dlink_deliver_fn)(void *arg, uint16_t src, uint16_t type, const void *data,
                                      uint32_t len);

/*
 * Open the daemon link of node `node`: a UDP socket on the node's address at port + 1 of
 * the nodes file (so psids of a test cluster sharing one host stay apart), faults from
 * `fault`, a peer silent for peer_timeout_ms with traffic pending declared dead by the
 * firmware.  Returns the link or NULL with the reason in err.  The caller owns it.
 */
struct psid_dlink *psid_dlink_open(uint16_t node, const struct psp_nodes *nodes,
                                   const struct mcp_fault_cfg *fault, uint32_t peer_timeout_ms,
                                   char *err, size_t errlen);

/* Close the link and free everything it holds. */
void psid_dlink_close(struct psid_dlink *dl);

/* The socket to poll for input. */
int psid_dlink_fd(const struct psid_dlink *dl);

/*
 * Queue a message of `type` for node dst on channel chan: hlen bytes of hdr followed by
 * dlen bytes of data (either may be 0).  The bytes are copied.  0, -EMSGSIZE (larger than
 * PSID_DMSG_MAX), -ENOMEM, or -EINVAL (no such node / ourselves).
 */
int psid_dlink_send(struct psid_dlink *dl, uint16_t dst, enum psid_chan chan, uint16_t type,
                    const void *hdr, uint32_t hlen, const void *data, uint32_t dlen);

/* Bytes queued for dst on chan and not yet handed to the firmware. */
uint64_t psid_dlink_queued(const struct psid_dlink *dl, uint16_t dst, enum psid_chan chan);

/*
 * Forget everything for node dst: queued messages (counted in dropped_queued) and partial
 * messages being reassembled.  Called when the node is declared dead or restarted.
 */
void psid_dlink_forget(struct psid_dlink *dl, uint16_t dst);

/*
 * One pass: hand queued frames to the firmware, run it, deliver whole messages to `deliver`,
 * take failed sends.  Returns the work done (0: idle).  `now_ns` is mcp_now_ns().
 */
int psid_dlink_run(struct psid_dlink *dl, uint64_t now_ns, psid_dlink_deliver_fn deliver,
                   void *arg);

/* Whether frames are queued or unacknowledged (the caller then runs the link often). */
int psid_dlink_busy(const struct psid_dlink *dl);

/* The link's counters. */
const struct psid_dlink_stats *psid_dlink_stats(const struct psid_dlink *dl);

/* The firmware image (read its counters with mcp_counter_value()). */
const struct mcp_image *psid_dlink_image(const struct psid_dlink *dl);

#endif
