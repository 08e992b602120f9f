/*
 * fault.h — deterministic fault injection for links (this kernel has no netem).
 *
 * A seeded generator decides, frame by frame, whether to drop, duplicate, corrupt or delay
 * (reorder) it.  The same seed and the same frame sequence give the same decisions.
 */
#ifndef PSPORT_MCP_FAULT_H
#define PSPORT_MCP_FAULT_H

#include <stdint.h>

#define MCP_FAULT_MAX_DROPS 32

struct mcp_fault_cfg {
    double loss;          /* probability a frame is dropped */
    double dup;           /* probability a frame is sent twice */
    double corrupt;       /* probability one byte of a frame is flipped */
    double reorder;       /* probability a frame is held back (sim link only) */
    uint32_t reorder_max; /* a held frame goes out after up to this many later frames (>= 1) */
    uint32_t loss_types;  /* bit (1 << type) per frame type the loss applies to; 0 = all */
    uint64_t delay_ns;    /* fixed one-way delay (sim link only) */
    uint64_t seed;
    uint32_t ndrops;                     /* drop list: these frame numbers (0-based, counted */
    uint64_t drops[MCP_FAULT_MAX_DROPS]; /* per generator: per link for udp/eth, per net for
                                            the sim) are always dropped */
};

/* What to do with one frame. */
struct mcp_fault_verdict {
    uint8_t drop;
    uint8_t dup;
    uint8_t corrupt; /* flip byte corrupt_at with corrupt_mask */
    uint8_t hold;    /* reorder: release after hold_frames later frames */
    uint32_t corrupt_at;
    uint8_t corrupt_mask;
    uint32_t hold_frames;
};

struct mcp_fault {
    struct mcp_fault_cfg cfg;
    uint64_t rng;
    uint64_t frame_no; /* frames decided so far */
    /* statistics */
    uint64_t dropped, duplicated, corrupted, held;
};

/* Start a generator with cfg (copied). */
void mcp_fault_init(struct mcp_fault *f, const struct mcp_fault_cfg *cfg);

/* True when cfg injects anything at all. */
int mcp_fault_active(const struct mcp_fault_cfg *cfg);

/* Decide the fate of the next frame (type = its frame type, len = its length). */
void mcp_fault_decide(struct mcp_fault *f, uint8_t type, uint32_t len, struct mcp_fault_verdict *v);

/* Uniform 64-bit random number from a xorshift state (never 0 state). */
uint64_t mcp_rand64(uint64_t *state);

#endif
