/*
 * mcp_repair.c — put an image right after its executor died inside a pass (mcp/PROTOCOL.md,
 * "Surviving a dead executor").
 *
 * First the step the journal shows open is settled: undone if nothing of it can have been seen
 * outside the firmware and undoing keeps exactly-once (an accepted DATA frame: it was not
 * acknowledged, the peer sends it again), completed from the recorded values otherwise.  Then
 * everything that follows from other state is rebuilt: receive slot states and the free stack
 * from the ready FIFO, the states of in-flight send slots from snd_tx, queue tails, active
 * peers, ctx_mask, stale `full` flags of host queues.
 *
 * Host processes keep using their contexts while this runs (they do not take the NIC lock):
 * the repair never stores to a send slot the host may own (mcp_slot_fw_owned() tells), sets
 * ctx_mask bits with an atomic OR and clears `full` only outside the entries the host may read.
 * The repair itself may be killed anywhere: every action is idempotent and the journal is
 * cleared only once the step is settled, so the next executor simply repairs again.
 */
#include "mcp_fw.h"

#define REPAIR_UNDONE 1
#define REPAIR_REDONE 2

static uint32_t nsend(const struct mcp_image *img)
{
    return (uint32_t)img->cfg.contexts * img->cfg.send_slots;
}

/* Store only what differs: a repair of a consistent image writes (almost) nothing. */
#define STORE_IF(lv, v)                                                                            \
    do {                                                                                           \
        if ((lv) != (v))                                                                           \
            MCP_STORE(lv, v);                                                                      \
    } while (0)

/* Finish failing slot id, the one the journal's fail_* fields describe. */
static void fail_finish(struct mcp_image *img, uint32_t id, int err)
{
    const struct mcp_journal *j = &img->journal;
    struct mcp_send_slot *s = mcp_sslot(img, id);

    /* the fail counted itself first; nothing after it in the step counts */
    MCP_STORE(img->counters.send_errors, j->fail_errors + 1);
    MCP_STORE(img->counters.errq_overflow, j->fail_overflows + j->fail_ovf);
    if (!mcp_slot_fw_owned(s))
        return; /* IDLE was stored: complete, and the host may be using the slot again */
    if (!j->fail_ovf) {
        struct mcp_context *cx = mcp_ctx(img, s->ctx);
        uint32_t pos = j->fail_pos;
        struct mcp_send_error *e = &mcp_errq(img, s->ctx)[pos % img->cfg.send_slots];
        /* Published if full, or if the host took it already (it advances errq_tail first) */
        int published = MCP_LOAD_ACQ(&e->full) || (int32_t)(MCP_LOAD_ACQ(&cx->errq_tail) - pos) > 0;
        if (!published)
            mcp_fw_errq_write(img, e, s, id, err);
        MCP_STORE(cx->errq_head, pos + 1);
    }
    MCP_STORE(s->error, err);
    MCP_STORE(s->taken, 0);
    MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_IDLE);
}

/* Fail slot id unless the step being repaired failed it already. */
static void fail_rest(struct mcp_image *img, uint32_t id, int err)
{
    if (img->journal.fail_slot == id)
        fail_finish(img, id, err);
    else if (mcp_slot_fw_owned(mcp_sslot(img, id)))
        mcp_fw_fail_slot(img, id, err);
}

/* Settle the open step: 0 (none), REPAIR_UNDONE, REPAIR_REDONE or -EUCLEAN. */
static int settle(struct mcp_image *img)
{
    const struct mcp_config *cfg = &img->cfg;
    struct mcp_journal *j = &img->journal;
    uint32_t op = j->op;

    if (op == MCP_J_NONE)
        return 0;
    if (j->node >= cfg->max_nodes || (j->fail_slot != MCP_NIL && j->fail_slot >= nsend(img)))
        return -EUCLEAN;
    struct mcp_conn *c = mcp_conn(img, j->node);
    int send_op = op == MCP_J_TAKE || op == MCP_J_SEND || op == MCP_J_QFAIL;
    if (send_op && j->slot >= nsend(img))
        return -EUCLEAN;

    switch (op) {
    case MCP_J_ACCEPT: /* undo; the receive slot goes back to the free stack in rebuild_recv */
        if (j->slot >= cfg->recv_slots)
            return -EUCLEAN;
        MCP_STORE(c->rcv_nxt, (uint8_t)j->a);
        MCP_STORE(c->ack_pending, (uint8_t)(j->a >> 8));
        MCP_STORE(c->nack_valid, (uint8_t)(j->a >> 16));
        MCP_STORE(c->ack_due_ns, j->t);
        MCP_STORE(img->rx_ready_tail, j->b);
        MCP_STORE(img->counters.rx_data, j->cnt);
        return REPAIR_UNDONE;

    case MCP_J_DELIVER: {
        /* The host may have seen the entry once it was full; it advances hostq_tail before it
         * clears `full`.  Either way the FIFO head and the host queue head move together. */
        struct mcp_hostq_entry *e = mcp_hostq(img, j->a % cfg->hostq_slots);
        uint32_t done =
            MCP_LOAD_ACQ(&e->full) || (int32_t)(MCP_LOAD_ACQ(&img->hostq_tail) - j->a) > 0;
        if (j->slot >= cfg->recv_slots)
            return -EUCLEAN;
        /* the frame's buffer is the entry's once done, the slot's still if not */
        MCP_STORE(e->buf, done ? (uint32_t)j->t : j->c);
        MCP_STORE(mcp_rslot(img, j->slot)->buf, done ? j->c : (uint32_t)j->t);
        MCP_STORE(img->hostq_head, j->a + done);
        MCP_STORE(img->rx_ready_head, j->b + done);
        MCP_STORE(img->counters.delivered, j->cnt + done);
        return done ? REPAIR_REDONE : REPAIR_UNDONE;
    }

    case MCP_J_TAKE: {
        struct mcp_send_slot *s = mcp_sslot(img, j->slot);
        if (j->ctx >= cfg->contexts || j->slot / cfg->send_slots != j->ctx)
            return -EUCLEAN;
        MCP_STORE(mcp_ctx(img, j->ctx)->accept, j->a + 1);
        if (j->c == 1) { /* invalid: failed at once */
            if (j->fail_slot != j->slot) {
                MCP_STORE(s->taken, 1); /* the fail had not begun: the slot is still ours */
                mcp_fw_fail_slot(img, j->slot, j->err);
            } else {
                fail_finish(img, j->slot, j->err);
            }
            return REPAIR_REDONE;
        }
        if (j->b != MCP_NIL && j->b >= nsend(img))
            return -EUCLEAN;
        if (j->c == 2)
            MCP_STORE(c->wait_since_ns, j->t);
        MCP_STORE(s->next, MCP_NIL);
        MCP_STORE(s->error, 0);
        MCP_STORE(s->taken, 1);
        if (j->b == MCP_NIL)
            MCP_STORE(c->q_head, j->slot);
        else
            MCP_STORE(mcp_sslot(img, j->b)->next, j->slot);
        MCP_STORE(c->q_tail, j->slot);
        return REPAIR_REDONE;
    }

    case MCP_J_SEND: /* the frame may be out: complete; the timer resends it if it was not */
        MCP_STORE(c->q_head, j->c);
        if (j->c == MCP_NIL)
            MCP_STORE(c->q_tail, MCP_NIL);
        MCP_STORE(c->inflight[j->a % MCP_MAX_WINDOW], j->slot);
        MCP_STORE(c->snd_nxt, (uint8_t)(j->a + 1));
        MCP_STORE(c->snd_tx, (uint8_t)(j->a + 1));
        MCP_RELEASE(&mcp_sslot(img, j->slot)->state, (uint32_t)MCP_SLOT_INTRANSIT);
        MCP_STORE(img->counters.tx_data, j->cnt + 1);
        return REPAIR_REDONE;

    case MCP_J_QFAIL:
        fail_rest(img, j->slot, j->err);
        MCP_STORE(c->q_head, j->c);
        if (j->c == MCP_NIL)
            MCP_STORE(c->q_tail, MCP_NIL);
        return REPAIR_REDONE;

    case MCP_J_ACK: {
        uint8_t una = (uint8_t)j->a, ack = (uint8_t)j->b;
        if ((uint8_t)(ack - una) > cfg->window)
            return -EUCLEAN;
        for (uint8_t q = una; q != ack; q++) {
            uint32_t id = c->inflight[q % MCP_MAX_WINDOW];
            if (id >= nsend(img))
                return -EUCLEAN;
            struct mcp_send_slot *s = mcp_sslot(img, id);
            uint32_t st = MCP_LOAD_ACQ(&s->state);
            if (st == MCP_SLOT_INTRANSIT || st == MCP_SLOT_RETRANSMIT) { /* not released yet */
                MCP_STORE(s->taken, 0);
                MCP_RELEASE(&s->state, (uint32_t)MCP_SLOT_IDLE);
            }
        }
        MCP_STORE(c->snd_una, ack);
        if (mcp_seq_diff(c->snd_tx, ack) < 0)
            MCP_STORE(c->snd_tx, ack);
        MCP_STORE(c->rto_us, cfg->rto_us);
        MCP_STORE(c->rto_deadline, j->t);
        return REPAIR_REDONE;
    }

    case MCP_J_RESET: {
        uint8_t una = (uint8_t)j->a, nxt = (uint8_t)j->b;
        if ((uint8_t)(nxt - una) > cfg->window)
            return -EUCLEAN;
        for (uint8_t q = una; q != nxt; q++) {
            uint32_t id = c->inflight[q % MCP_MAX_WINDOW];
            if (id >= nsend(img))
                return -EUCLEAN;
            fail_rest(img, id, j->err);
        }
        /* The queue as it was: failing a slot does not change its `next`. */
        uint32_t id = j->c;
        for (uint32_t k = 0; id != MCP_NIL; k++) {
            if (id >= nsend(img) || k >= nsend(img))
                return -EUCLEAN;
            uint32_t next = mcp_sslot(img, id)->next;
            fail_rest(img, id, j->err);
            id = next;
        }
        mcp_fw_conn_clear(img, c, j->t);
        return REPAIR_REDONE;
    }

    case MCP_J_OPEN:
        MCP_STORE(c->state, (uint32_t)MCP_CONN_OPEN);
        MCP_STORE(c->local_cid, j->a);
        MCP_STORE(c->iss, (uint8_t)j->b);
        MCP_STORE(c->snd_una, (uint8_t)j->b);
        MCP_STORE(c->snd_nxt, (uint8_t)j->b);
        MCP_STORE(c->snd_tx, (uint8_t)j->b);
        MCP_STORE(c->confirmed, 0);
        MCP_STORE(c->rto_us, cfg->rto_us);
        return REPAIR_REDONE;

    case MCP_J_LEARN:
        MCP_STORE(c->peer_cid, j->a);
        MCP_STORE(c->rcv_nxt, (uint8_t)j->b);
        MCP_STORE(c->have_peer, 1);
        MCP_STORE(c->ack_pending, 0);
        MCP_STORE(c->nack_valid, 0);
        return REPAIR_REDONE;

    default:
        return -EUCLEAN;
    }
}

/* Receive side: the ready FIFO is the truth; every other slot is IDLE and on the free stack.
 * A free stack that holds exactly those slots is kept as it is (its order is of no matter). */
static int rebuild_recv(struct mcp_image *img)
{
    uint32_t n = img->cfg.recv_slots; /* <= 4096 (mcp_config_check) */
    uint32_t *ready = MCP_AT(img, img->off_rx_ready);
    uint32_t *free_stack = MCP_AT(img, img->off_rx_free);
    uint32_t head = img->rx_ready_head, tail = img->rx_ready_tail;
    uint64_t in_fifo[4096 / 64] = {0}, on_stack[4096 / 64] = {0};
#define IN_SET(set, r) ((set)[(r) / 64] & 1ull << ((r) % 64))
#define SET(set, r)    ((set)[(r) / 64] |= 1ull << ((r) % 64))

    if (tail - head > n)
        return -EUCLEAN;
    for (uint32_t k = head; k != tail; k++) {
        uint32_t r = ready[k % n];
        if (r >= n || IN_SET(in_fifo, r))
            return -EUCLEAN; /* out of range, or twice in the FIFO */
        SET(in_fifo, r);
    }
    for (uint32_t r = 0; r < n; r++)
        STORE_IF(mcp_rslot(img, r)->state,
                 IN_SET(in_fifo, r) ? (uint32_t)MCP_SLOT_READY : (uint32_t)MCP_SLOT_IDLE);
    uint32_t top = img->rx_free_top;
    int ok = top == n - (tail - head);
    for (uint32_t i = 0; ok && i < top; i++) {
        uint32_t r = free_stack[i];
        ok = r < n && !IN_SET(in_fifo, r) && !IN_SET(on_stack, r);
        if (ok)
            SET(on_stack, r);
    }
    if (ok)
        return 0;
    top = 0;
    for (uint32_t r = n; r-- > 0;) {
        if (IN_SET(in_fifo, r))
            continue;
        STORE_IF(free_stack[top], r);
        top++;
    }
    STORE_IF(img->rx_free_top, top);
    return 0;
#undef IN_SET
#undef SET
}

/* Send side, per connection: in-flight slot states from snd_tx, the queue's tail, the timer. */
static int rebuild_send(struct mcp_image *img)
{
    const struct mcp_config *cfg = &img->cfg;
    uint64_t *act = MCP_AT(img, img->off_active);

    for (uint32_t n = 0; n < cfg->max_nodes; n++) {
        struct mcp_conn *c = mcp_conn(img, (uint16_t)n);
        uint8_t inflight = (uint8_t)(c->snd_nxt - c->snd_una);
        int tx = mcp_seq_diff(c->snd_tx, c->snd_una);

        if (inflight > cfg->window)
            return -EUCLEAN;
        if (tx < 0 || tx > inflight) /* cannot happen; resending everything is always right */
            MCP_STORE(c->snd_tx, c->snd_una);
        for (uint8_t q = c->snd_una; q != c->snd_nxt; q++) {
            uint32_t id = c->inflight[q % MCP_MAX_WINDOW];
            if (id >= nsend(img) || !mcp_slot_fw_owned(mcp_sslot(img, id)))
                return -EUCLEAN;
            struct mcp_send_slot *s = mcp_sslot(img, id);
            uint32_t want =
                mcp_seq_diff(q, c->snd_tx) < 0 ? MCP_SLOT_INTRANSIT : MCP_SLOT_RETRANSMIT;
            STORE_IF(s->taken, 1);
            if (MCP_LOAD_ACQ(&s->state) != want)
                MCP_RELEASE(&s->state, want);
        }
        uint32_t last = MCP_NIL, k = 0;
        for (uint32_t id = c->q_head; id != MCP_NIL; id = mcp_sslot(img, id)->next) {
            if (id >= nsend(img) || ++k > nsend(img))
                return -EUCLEAN; /* out of range or a cycle */
            struct mcp_send_slot *s = mcp_sslot(img, id);
            if (MCP_LOAD_ACQ(&s->state) != MCP_SLOT_READY || !s->taken)
                return -EUCLEAN;
            last = id;
        }
        STORE_IF(c->q_tail, last);
        if (c->snd_una != c->snd_nxt && !c->rto_deadline)
            MCP_STORE(c->rto_deadline, 1); /* no clock here: already due */
        /* active: what peer_run() keeps active */
        if (c->q_head != MCP_NIL || c->snd_una != c->snd_nxt || c->ack_pending ||
            (c->state == MCP_CONN_OPEN && !c->confirmed && c->rto_deadline)) {
            uint64_t bit = 1ull << (n % 64);
            if (!(act[n / 64] & bit))
                MCP_STORE(act[n / 64], act[n / 64] | bit);
        }
    }
    return 0;
}

/* Entries of a host-read queue outside [tail, head) are empty; a reader that died between
 * advancing its tail and clearing `full` leaves one full.  A live reader only clears entries
 * inside, or the one just behind its tail (storing the same 0). */
static void clear_stale(uint32_t *full0, size_t stride, uint32_t n, uint32_t head,
                        const uint32_t *tailp)
{
    uint32_t tail = MCP_LOAD_ACQ(tailp);
    if (head - tail > n)
        return; /* the reader is ahead of the writer: leave it to the owner */
    for (uint32_t pos = head; pos != tail + n; pos++) {
        uint32_t *full = (uint32_t *)((uint8_t *)full0 + (size_t)(pos % n) * stride);
        if (MCP_LOAD_ACQ(full))
            MCP_RELEASE(full, 0u);
    }
}

int mcp_image_repair(struct mcp_image *img)
{
    if (!img || img->magic != MCP_IMAGE_MAGIC || img->abi_version != MCP_ABI_VERSION)
        return -EPROTO;
    if (mcp_config_check(&img->cfg, NULL) || img->frame_stride < MCP_WIRE_HDR ||
        img->size < img->off_hostq_data)
        return -EINVAL;
    const struct mcp_config *cfg = &img->cfg;

    int rc = settle(img);
    if (rc < 0)
        return rc;
    if (rc == REPAIR_UNDONE)
        img->counters.repair_undone++;
    else if (rc == REPAIR_REDONE)
        img->counters.repair_redone++;
    mcp_jr_end(img);

    if ((rc = rebuild_recv(img)) || (rc = rebuild_send(img)))
        return rc;
    for (unsigned ci = 0; ci < cfg->contexts; ci++) {
        struct mcp_context *cx = mcp_ctx(img, ci);
        if (MCP_LOAD_ACQ(&cx->state) == MCP_CTX_FREE)
            continue;
        /* a context being freed (bit cleared, state not yet FREE), or attached by a process
         * that died before setting its bit: the firmware must see it again */
        if (!(MCP_LOAD_ACQ(&img->ctx_mask) & (1ull << ci))) {
            MCP_STORE_POINT();
            __atomic_or_fetch(&img->ctx_mask, 1ull << ci, __ATOMIC_ACQ_REL);
        }
        clear_stale(&mcp_errq(img, ci)->full, sizeof(struct mcp_send_error), cfg->send_slots,
                    cx->errq_head, &cx->errq_tail);
    }
    clear_stale(&mcp_hostq(img, 0)->full, sizeof(struct mcp_hostq_entry), cfg->hostq_slots,
                img->hostq_head, &img->hostq_tail);
    /* A delivery the dead executor made may not have been signalled: wake the waiters. */
    MCP_STORE_POINT();
    __atomic_add_fetch(&img->rx_event, 1u, __ATOMIC_RELEASE);
    img->counters.repairs++;
    return 0;
}
