/*
 * mcp_fw.h — firmware internals shared by mcp_rdp.c (the main loop) and mcp_repair.c (the
 * repair after a dead executor).  Not an interface: nothing outside mcp/ includes it.
 *
 * Stores to the image.  An executor may be killed between any two instructions, so what
 * matters is the order in which stores reach the image.  The firmware writes multi-field
 * steps through the journal (mcp_jr_begin/mcp_jr_end, which are compiler barriers) and
 * stores the fields of a step with MCP_STORE()/MCP_RELEASE().  In a normal build these are a
 * plain store and a release store; built with MCP_TEST_HOOKS each is also a point at which a
 * test can kill the executor (the store budget below), which is how test_mcp_repair.c kills
 * the firmware at the K-th store of a pass, for every K.
 */
#ifndef PSPORT_MCP_FW_H
#define PSPORT_MCP_FW_H

#include "mcp.h"
#include "mcp_compat.h"

#ifdef MCP_TEST_HOOKS
/* Stores until the hook fires (0: never); stores counted so far; what fires (NULL: nothing). */
extern long mcp_test_store_budget;
extern unsigned long mcp_test_stores;
extern void (*mcp_test_store_hit)(void);
void mcp_test_store_point(void);
#define MCP_STORE_POINT() mcp_test_store_point()
#else
#define MCP_STORE_POINT() ((void)0)
#endif

/* A store to the image (a kill point in a test build). */
#define MCP_STORE(lv, v) (MCP_STORE_POINT(), (void)((lv) = (v)))
/* A release store of a field shared with the host (a kill point in a test build). */
#define MCP_RELEASE(p, v) (MCP_STORE_POINT(), MCP_STORE_REL((p), (v)))
/* Stores before it reach the image before stores after it (a compiler barrier: the executor
 * that dies is this thread, so no hardware fence is needed). */
#define MCP_ORDER() __atomic_signal_fence(__ATOMIC_SEQ_CST)

/* Open a step: every field of *j (fail_slot = MCP_NIL), then its op. */
static inline void mcp_jr_begin(struct mcp_image *img, const struct mcp_journal *j)
{
    struct mcp_journal t = *j;
    uint32_t op = t.op;
    t.op = MCP_J_NONE;
    t.fail_slot = MCP_NIL;
    MCP_ORDER();
    MCP_STORE(img->journal, t);
    MCP_ORDER();
    MCP_STORE(img->journal.op, op);
    MCP_ORDER();
}

/* Close the step: every store of it has been made. */
static inline void mcp_jr_end(struct mcp_image *img)
{
    MCP_ORDER();
    MCP_STORE(img->journal.op, (uint32_t)MCP_J_NONE);
    MCP_ORDER();
}

/* A send slot the firmware owns: in flight, or taken off its ring and queued (READY, taken).
 * The host touches a slot only once it is IDLE; fail and ACK store `taken = 0` before IDLE. */
static inline int mcp_slot_fw_owned(const struct mcp_send_slot *s)
{
    uint32_t st = MCP_LOAD_ACQ(&s->state);
    return st == MCP_SLOT_INTRANSIT || st == MCP_SLOT_RETRANSMIT ||
           (st == MCP_SLOT_READY && s->taken);
}

/* Node id of connection c. */
static inline uint16_t mcp_conn_node(struct mcp_image *img, const struct mcp_conn *c)
{
    return (uint16_t)(c - mcp_conn(img, 0));
}

/*
 * Fail send slot id back to its context with err (the slot must be the firmware's: taken off
 * its ring).  Records itself in the journal's fail_* fields, so a repair can finish it; the
 * caller has a step open.  Counts send_errors (and errq_overflow).
 */
void mcp_fw_fail_slot(struct mcp_image *img, uint32_t id, int err);

/* Fill error-queue entry e for send slot s (global id) failing with err, and publish it. */
static inline void mcp_fw_errq_write(struct mcp_image *img, struct mcp_send_error *e,
                                     const struct mcp_send_slot *s, uint32_t id, int err)
{
    MCP_STORE(e->cookie, s->cookie);
    MCP_STORE(e->slot, id % img->cfg.send_slots);
    MCP_STORE(e->dst, s->dst);
    MCP_STORE(e->error, (int16_t)err);
    MCP_RELEASE(&e->full, 1u);
}

/* Clear connection c after a reset, keeping last_rx_ns = last_rx. */
void mcp_fw_conn_clear(struct mcp_image *img, struct mcp_conn *c, uint64_t last_rx);

#endif
