/*
 * mcp.h — the firmware: format a NIC memory image and run the MCP main loop on it.
 *
 * The firmware is a non-blocking state machine.  mcp_poll() runs one pass: take READY send
 * slots, transmit inside the window, receive a batch of frames and apply the RDP rules
 * (seed 001, table 1), move READY receive slots to the host queue, fire timers.  It never
 * blocks and never allocates; every bit of state it keeps is in the image, so any executor
 * that holds the NIC lock may run it (the lock is the caller's business).
 */
#ifndef PSPORT_MCP_H
#define PSPORT_MCP_H

#include "mcp_types.h"

#include "lanai.h"
#include "mcp_image.h"
#include "mcp_wire.h"

/* Largest number of control frames (ACK/NACK/SYN/RST) one pass can queue. */
#define MCP_CTRL_FRAMES 64

/*
 * An executor's handle on a NIC: the image as mapped in this executor and the link as
 * opened by it.  Not shared; holds scratch memory for control frames so mcp_poll() need not
 * allocate.  The caller owns both the image mapping and the link.
 */
struct mcp_nic {
    struct mcp_image *img;
    struct lanai_link *link;
    uint32_t ctrl_used;
    uint8_t ctrl[MCP_CTRL_FRAMES][MCP_WIRE_HDR];
};

/* Fill c with the defaults (window 8, 4096-byte slots, ...) for node `node`. */
void mcp_config_default(struct mcp_config *c, uint16_t node);

/* Which counts mcp_config_autosize() may choose (the others are the caller's). */
#define MCP_AUTO_WINDOW     1u
#define MCP_AUTO_SEND_SLOTS 2u
#define MCP_AUTO_RECV_SLOTS 4u
#define MCP_AUTO_ALL        7u

/* Bytes a send window holds at least when its size is left to the firmware: a window of 8
 * frames of 1468 bytes (eth, MTU 1500) does not cover a loaded round trip (mcp/PROTOCOL.md). */
#define MCP_AUTO_WINDOW_BYTES (96u * 1024u)

/*
 * Size the counts named in `which` for c->slot_size: the window holds MCP_AUTO_WINDOW_BYTES
 * (8 .. MCP_MAX_WINDOW frames: 8 for 64 KiB udp frames, 64 for eth at MTU 1500), a context
 * has two windows of send slots (at least 32), the NIC four windows of receive slots (at
 * least 128), each count rounded up to a power of two.  Call once slot_size is final.  A
 * window given out of range (0, above MCP_MAX_WINDOW) leaves the slot counts alone, for
 * mcp_config_check() to refuse by name.
 */
void mcp_config_autosize(struct mcp_config *c, unsigned which);

/* Check a configuration (slot counts must be powers of two); returns 0 or -EINVAL and, if
 * why != NULL, a static reason. */
int mcp_config_check(const struct mcp_config *c, const char **why);

/* Bytes needed for an image with configuration c (0 if c is invalid). */
size_t mcp_image_size(const struct mcp_config *c);

/*
 * Lay out a fresh image in mem (size bytes, zero or not): header, sections, all slots IDLE,
 * all connections closed.  Returns 0, -EINVAL for a bad configuration or -ENOSPC if size is
 * too small.  The caller owns mem.
 */
int mcp_image_format(void *mem, size_t size, const struct mcp_config *c);

/*
 * Check that mem (size bytes) holds an image of this ABI: magic, version and size.
 * Returns 0, -EPROTO (not an image / another ABI version; *found gets the version) or -EINVAL.
 */
int mcp_image_check(const void *mem, size_t size, uint32_t *found_version);

/* Bind an executor handle to an image and a link. The link's max_frame limits slot_size. */
void mcp_nic_init(struct mcp_nic *nic, struct mcp_image *img, struct lanai_link *link);

/*
 * Run one pass of the firmware at time now_ns (any monotonic clock, nanoseconds).
 * Returns how much work was done (frames sent + received + delivered); 0 means idle.
 */
int mcp_poll(struct mcp_nic *nic, uint64_t now_ns);

/*
 * The host that hosts the NIC learned (from its daemon) that node restarted: drop the
 * connection to it, as a reset from it would (counted in peer_resets): what was in flight or
 * queued for the old incarnation fails back with -ECONNRESET, and the next frame to the node
 * opens a new connection.  Why: without it the first frame sent after the restart went on the
 * old connection, the new incarnation answered with a reset, and that frame failed with the
 * rest (the first MPI job over the restarted node hung).  Same locking as mcp_poll().
 * Returns 1 if a connection was dropped, 0 if there was none, -EINVAL for a bad node.
 */
int mcp_peer_restarted(struct mcp_nic *nic, uint16_t node, uint64_t now_ns);

/*
 * The sending half of a pass (the doorbell of a host that just posted): take posted sends,
 * run the peers (timers, window), hand what goes out to the link; no receiving.  Same
 * locking as mcp_poll().  Returns the number of things done.
 */
int mcp_poll_send(struct mcp_nic *nic, uint64_t now_ns);

/*
 * Repair the image after its executor died inside mcp_poll() (or inside this function): undo
 * or complete the firmware step the image's journal shows open, then rebuild what follows from
 * the rest (receive slots and free stack from the ready FIFO, in-flight slot states, queue
 * tails, active peers, ctx_mask, stale host queue entries).  Called by the next holder of the
 * NIC lock (EOWNERDEAD) before it runs mcp_poll(); hosts may go on using their contexts
 * meanwhile.  Harmless on an image that needs nothing.  Counts `repairs`, `repair_undone`,
 * `repair_redone`.  Returns 0, -EPROTO (not an image of this ABI), -EINVAL (bad
 * configuration) or -EUCLEAN (the image contradicts itself: beyond repair, reformat it).
 */
int mcp_image_repair(struct mcp_image *img);

/* Largest payload one send slot carries on this NIC (slot size limited by the link). */
uint32_t mcp_max_payload(const struct mcp_image *img);

/* Name of a counter by index, its help text, and the number of counters. */
const char *mcp_counter_name(unsigned i);
const char *mcp_counter_help(unsigned i);
unsigned mcp_counter_count(void);
/* Value of counter i of img. */
uint64_t mcp_counter_value(const struct mcp_image *img, unsigned i);

/* Name of a slot state ("IDLE", ...). */
const char *mcp_slot_state_name(uint32_t state);

#endif
