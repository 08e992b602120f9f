/*
 * link_sim.h — a simulated network inside one process, for deterministic tests.
 *
 * Nodes 0..n-1 each open a link on the net.  A frame sent is decided by the net's seeded
 * fault generator (struct mcp_fault_cfg: loss, duplication, reordering, corruption, fixed
 * delay, drop lists, loss restricted to frame types) and then queued at the destination,
 * where it becomes receivable once the net's clock reaches its due time.  The clock is the
 * test's: mcp_sim_net_set_time().  Frames to a node with no open link are lost.
 */
#ifndef PSPORT_MCP_LINK_SIM_H
#define PSPORT_MCP_LINK_SIM_H

#include <stdint.h>

#include "fault.h"
#include "lanai.h"

struct mcp_sim_net;

struct mcp_sim_stats {
    uint64_t sent, delivered, dropped, duplicated, corrupted, reordered, queued_max;
};

/* A net of nodes (<= 1024) with max_frame-byte frames and faults f (NULL: none). */
struct mcp_sim_net *mcp_sim_net_create(uint16_t nodes, uint32_t max_frame,
                                       const struct mcp_fault_cfg *f);

/* Free the net; all links must be closed first. */
void mcp_sim_net_destroy(struct mcp_sim_net *net);

/* Replace the fault configuration (the generator restarts from f->seed). */
void mcp_sim_net_set_fault(struct mcp_sim_net *net, const struct mcp_fault_cfg *f);

/* Advance the net's clock (frames with a delay become receivable). */
void mcp_sim_net_set_time(struct mcp_sim_net *net, uint64_t now_ns);

/* Open node's link on the net (one at a time per node). NULL if taken or out of range. */
struct lanai_link *mcp_sim_link_open(struct mcp_sim_net *net, uint16_t node);

/* Put a raw frame (any bytes) into node dst's receive queue, as if it came off the wire. */
int mcp_sim_inject(struct mcp_sim_net *net, uint16_t dst, const void *frame, uint32_t len);

/* Frames waiting (in flight or held) anywhere on the net. */
uint64_t mcp_sim_net_pending(const struct mcp_sim_net *net);

/* Copy the statistics. */
void mcp_sim_net_stats(const struct mcp_sim_net *net, struct mcp_sim_stats *s);

#endif
