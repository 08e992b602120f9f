/* mcp_host.c — the host side of the NIC image: contexts, send slots, host receive queue. */
#include "mcp_host.h"

#include "mcp.h"
#include "mcp_compat.h"

int mcp_ctx_attach(struct mcp_image *img, uint32_t owner)
{
    for (unsigned c = 0; c < img->cfg.contexts; c++) {
        struct mcp_context *cx = mcp_ctx(img, c);
        uint32_t expect = MCP_CTX_FREE;
        if (!__atomic_compare_exchange_n(&cx->state, &expect, (uint32_t)MCP_CTX_ATTACHED, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        /* A FREE context is not touched by the firmware: all its slots are IDLE and
         * accept == head. Forget errors nobody read. */
        struct mcp_send_error *q = mcp_errq(img, c);
        for (unsigned i = 0; i < img->cfg.send_slots; i++)
            MCP_STORE_REL(&q[i].full, 0u);
        cx->errq_tail = MCP_LOAD_ACQ(&cx->errq_head);
        cx->owner = owner;
        cx->generation++;
        __atomic_or_fetch(&img->ctx_mask, 1ull << c, __ATOMIC_ACQ_REL);
        return (int)c;
    }
    return -EBUSY;
}

void mcp_ctx_detach(struct mcp_image *img, unsigned c)
{
    uint32_t expect = MCP_CTX_ATTACHED;
    __atomic_compare_exchange_n(&mcp_ctx(img, c)->state, &expect, (uint32_t)MCP_CTX_CLOSING, 0,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void *mcp_send_slot(struct mcp_image *img, unsigned c, uint32_t *slot)
{
    struct mcp_context *cx = mcp_ctx(img, c);
    uint32_t idx = cx->head % img->cfg.send_slots;
    uint32_t id = c * img->cfg.send_slots + idx;

    if (MCP_LOAD_ACQ(&mcp_sslot(img, id)->state) != MCP_SLOT_IDLE)
        return NULL;
    *slot = idx;
    return mcp_sframe(img, id) + MCP_WIRE_HDR;
}

/* Fill slot's fields and hand it to the firmware (mcp_send_post, mcp_send_post_crc). */
static void post(struct mcp_image *img, unsigned c, uint32_t slot, uint16_t dst, uint32_t len,
                 uint32_t cookie, uint8_t pcrc_set, uint32_t pcrc)
{
    struct mcp_context *cx = mcp_ctx(img, c);
    struct mcp_send_slot *s = mcp_sslot(img, c * img->cfg.send_slots + slot);

    s->dst = dst;
    s->len = len;
    s->cookie = cookie;
    s->pcrc = pcrc;
    s->pcrc_set = pcrc_set;
    MCP_STORE_REL(&s->state, (uint32_t)MCP_SLOT_READY);
    MCP_STORE_REL(&cx->head, cx->head + 1);
}

void mcp_send_post(struct mcp_image *img, unsigned c, uint32_t slot, uint16_t dst, uint32_t len,
                   uint32_t cookie)
{
    post(img, c, slot, dst, len, cookie, 0, 0);
}

void mcp_send_post_crc(struct mcp_image *img, unsigned c, uint32_t slot, uint16_t dst, uint32_t len,
                       uint32_t cookie, uint32_t payload_crc)
{
    post(img, c, slot, dst, len, cookie, 1, payload_crc);
}

int mcp_send(struct mcp_image *img, unsigned c, uint16_t dst, const void *data, uint32_t len,
             uint32_t cookie)
{
    uint32_t slot;
    void *buf;

    if (len > mcp_max_payload(img))
        return -EMSGSIZE;
    buf = mcp_send_slot(img, c, &slot);
    if (!buf)
        return -EAGAIN;
    memcpy(buf, data, len);
    mcp_send_post(img, c, slot, dst, len, cookie);
    return 0;
}

uint32_t mcp_send_busy(struct mcp_image *img, unsigned c)
{
    uint32_t busy = 0;
    for (uint32_t i = 0; i < img->cfg.send_slots; i++)
        if (MCP_LOAD_ACQ(&mcp_sslot(img, c * img->cfg.send_slots + i)->state) != MCP_SLOT_IDLE)
            busy++;
    return busy;
}

int mcp_tx_backlog(struct mcp_image *img)
{
    uint64_t ctxs = MCP_LOAD_ACQ(&img->ctx_mask);
    while (ctxs) {
        unsigned ci = (unsigned)__builtin_ctzll(ctxs);
        struct mcp_context *cx = mcp_ctx(img, ci);
        ctxs &= ctxs - 1;
        if (MCP_LOAD_ACQ(&cx->head) != MCP_LOAD_ACQ(&cx->accept))
            return 1;
    }
    const uint64_t *act = MCP_AT(img, img->off_active);
    for (unsigned w = 0; w < (img->cfg.max_nodes + 63u) / 64u; w++) {
        uint64_t bits = MCP_LOAD_ACQ(&act[w]);
        while (bits) {
            unsigned b = (unsigned)__builtin_ctzll(bits);
            const struct mcp_conn *c = mcp_conn(img, (uint16_t)(w * 64 + b));
            bits &= bits - 1;
            if (MCP_LOAD_ACQ(&c->q_head) != MCP_NIL || MCP_LOAD_ACQ(&c->snd_tx) != c->snd_nxt)
                return 1;
        }
    }
    return 0;
}

int mcp_tx_blocked(struct mcp_image *img, uint16_t dst, uint32_t posted)
{
    if (dst >= img->cfg.max_nodes)
        return 0;
    const struct mcp_conn *c = mcp_conn(img, dst);
    uint8_t inflight = (uint8_t)(MCP_LOAD_ACQ(&c->snd_nxt) - MCP_LOAD_ACQ(&c->snd_una));
    return (uint32_t)inflight + posted > img->cfg.window || MCP_LOAD_ACQ(&c->q_head) != MCP_NIL;
}

int mcp_tx_waiting(struct mcp_image *img, unsigned c, uint16_t dst)
{
    if (dst >= img->cfg.max_nodes)
        return 0;
    const struct mcp_context *cx = mcp_ctx(img, c);
    if (MCP_LOAD_ACQ(&cx->head) != MCP_LOAD_ACQ(&cx->accept))
        return 1; /* posted, not yet taken: its destination is not known here */
    const struct mcp_conn *cn = mcp_conn(img, dst);
    return MCP_LOAD_ACQ(&cn->q_head) != MCP_NIL ||
           MCP_LOAD_ACQ(&cn->snd_tx) != MCP_LOAD_ACQ(&cn->snd_nxt);
}

int mcp_tx_idle(struct mcp_image *img, unsigned c, uint16_t dst)
{
    if (dst >= img->cfg.max_nodes)
        return 0;
    const struct mcp_context *cx = mcp_ctx(img, c);
    const struct mcp_conn *cn = mcp_conn(img, dst);
    return MCP_LOAD_ACQ(&cx->head) == MCP_LOAD_ACQ(&cx->accept) &&
           MCP_LOAD_ACQ(&cn->q_head) == MCP_NIL &&
           MCP_LOAD_ACQ(&cn->snd_una) == MCP_LOAD_ACQ(&cn->snd_nxt);
}

void mcp_ack_asap(struct mcp_image *img, uint16_t src)
{
    if (src < img->cfg.max_nodes)
        MCP_STORE_REL(&mcp_conn(img, src)->ack_asap, 1u);
}

int mcp_recv_peek(struct mcp_image *img, struct mcp_rx_desc *d)
{
    uint32_t q = img->hostq_tail % img->cfg.hostq_slots;
    struct mcp_hostq_entry *e = mcp_hostq(img, q);

    if (!MCP_LOAD_ACQ(&e->full))
        return 0;
    d->data = mcp_hostq_data(img, q);
    d->len = e->len;
    d->src = e->src;
    return 1;
}

void mcp_recv_done(struct mcp_image *img)
{
    uint32_t q = img->hostq_tail % img->cfg.hostq_slots;
    /* tail first: a repair takes an entry behind the tail as taken (mcp_image_repair) */
    MCP_STORE_REL(&img->hostq_tail, img->hostq_tail + 1);
    MCP_STORE_REL(&mcp_hostq(img, q)->full, 0u);
}

uint32_t mcp_recv_position(const struct mcp_image *img)
{
    return MCP_LOAD_ACQ(&img->hostq_tail);
}

uint32_t mcp_recv_settle(struct mcp_image *img, uint32_t pos)
{
    /* mcp_recv_done() advances the tail, then clears the entry's full flag: a consumer killed
     * between the two leaves the entry marked full behind the tail.  Unless the firmware has
     * filled that entry again since (its head passed pos + slots: it found the flag clear),
     * the flag is stale. */
    if (img->hostq_tail != pos && (uint32_t)(img->hostq_head - pos) <= img->cfg.hostq_slots)
        MCP_STORE_REL(&mcp_hostq(img, pos % img->cfg.hostq_slots)->full, 0u);
    return img->hostq_tail;
}

int mcp_errq_pop(struct mcp_image *img, unsigned c, struct mcp_send_error *e)
{
    struct mcp_context *cx = mcp_ctx(img, c);
    struct mcp_send_error *q = &mcp_errq(img, c)[cx->errq_tail % img->cfg.send_slots];

    if (!MCP_LOAD_ACQ(&q->full))
        return 0;
    *e = *q;
    MCP_STORE_REL(&cx->errq_tail, cx->errq_tail + 1); /* tail first, as mcp_recv_done() */
    MCP_STORE_REL(&q->full, 0u);
    return 1;
}
