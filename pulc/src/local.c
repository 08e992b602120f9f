/*
 * local.c — the process's side of local rings (lring.h): a sending port's ring to each local
 * destination, the lock-free send and receive, and the move into the port's queue when the
 * first posted receive does not take a ring message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lring.h"
#include "pulc_int.h"
#include "wakefence.h"

/* Wake the receiver only if it sleeps: the store of the ring's head must be visible before
 * we read sleepers, as the sleeper counts itself before it looks at the rings (pulc_wait);
 * wakefence.h says how, light or full. */
static void ring_wake(struct pulc_area *a, uint32_t p, int light_fence)
{
    pulc_wakefence_send(light_fence);
    if (__atomic_load_n(&pulc_port_at(a, p)->sleepers, __ATOMIC_RELAXED))
        pulc_port_wake(a, p);
}

static int lock_once(struct pulc_area *a, int *locked)
{
    if (*locked)
        return 0;
    int rc = pulc_area_lock(a);
    if (!rc)
        *locked = 1;
    return rc;
}

/* The open ring to dest when dest is where port sent last (*peer set), else PULC_NONE:
 * peer_ring's first case, inline for pulc_local_send_now. */
static inline uint32_t last_peer_ring(struct pulc_area *a, PSP_Port *port, PSP_PortId dest,
                                      struct pulc_lpeer **peer)
{
    uint32_t k = port->last_peer;
    if (k >= port->npeers || port->peers[k].dest != dest)
        return PULC_NONE;
    uint32_t ring = port->peers[k].ring;
    if (ring == PULC_NONE || (__atomic_load_n(&pulc_ring_at(a, ring)->closed, __ATOMIC_ACQUIRE) &
                              PULC_RING_RECEIVER_CLOSED))
        return PULC_NONE;
    *peer = &port->peers[k];
    return ring;
}

/* The ring of port to dest, opening one at the first message (PULC_NONE: use the queue).
 * A ring whose receiver closed is closed here and a new one tried (a new port there).
 * *peer is set to the destination's entry when a ring is returned. */
static uint32_t peer_ring(struct pulc_proc *P, PSP_Port *port, PSP_PortId dest, int *locked,
                          struct pulc_lpeer **peer)
{
    struct pulc_area *a = P->node.area;
    uint32_t k = port->last_peer;
    if (k >= port->npeers || port->peers[k].dest != dest)
        for (k = 0; k < port->npeers && port->peers[k].dest != dest; k++)
            ;
    if (k < port->npeers) {
        port->last_peer = k;
        uint32_t ring = port->peers[k].ring;
        *peer = &port->peers[k];
        if (ring == PULC_NONE ||
            !(__atomic_load_n(&pulc_ring_at(a, ring)->closed, __ATOMIC_ACQUIRE) &
              PULC_RING_RECEIVER_CLOSED))
            return ring;
        if (lock_once(a, locked))
            return PULC_NONE;
        pulc_ring_close_end_locked(a, ring, PULC_RING_SENDER_CLOSED);
        port->peers[k] = port->peers[--port->npeers];
    }
    if (lock_once(a, locked))
        return PULC_NONE;
    uint32_t num = PSP_PORTID_NUMBER(dest);
    struct pulc_port *pt = pulc_port_at(a, num);
    if (pt->state != PULC_PORT_OPEN || pt->kind != PULC_KIND_D)
        return PULC_NONE; /* the queue path reports it; a ring may come when it is open */
    if (port->npeers == port->cap_peers) {
        uint32_t c = port->cap_peers ? 2 * port->cap_peers : 8;
        struct pulc_lpeer *n = realloc(port->peers, c * sizeof *n);
        if (!n)
            return PULC_NONE; /* not remembered: asked again next time */
        port->peers = n;
        port->cap_peers = c;
    }
    uint32_t ring = pulc_ring_open_locked(a, port->idx, num);
    if (ring == PULC_NONE)
        a->rings_none++;
    port->last_peer = port->npeers;
    *peer = &port->peers[port->npeers];
    port->peers[port->npeers++] = (struct pulc_lpeer){dest, ring, 0, port->activity - 1};
    return ring;
}

/* Put a message of msg_id through ring to port dest (peer: its entry): 1 done, 0 no room.
 * Inlined: it is most of the path of a small local send, taken once per message. */
static inline __attribute__((always_inline)) int ring_send(struct pulc_proc *P, PSP_Port *port,
                                                           PSP_PortId dest, uint32_t ring,
                                                           struct pulc_lpeer *peer, uint32_t msg_id,
                                                           const void *xhdr, uint16_t xlen,
                                                           const void *buf, uint32_t len)
{
    struct pulc_area *a = P->node.area;
    if (!pulc_ring_put(a, ring, &peer->tail_seen, PULC_RENT_MSG, msg_id, xhdr, xlen, buf, len, 0))
        return 0;
    /* Streaming (no ring message taken since the last send here): claim the lines the next
     * entries go to.  Not in a ping-pong, whose latency the claim would cost. */
    int streaming = peer->activity == port->activity;
    if (streaming && pulc_rent_size(xlen, len) <= PULC_RING_CLAIM_MAX)
        pulc_ring_claim_ahead(a, ring, peer->tail_seen);
    peer->activity = port->activity;
    /* The light fence only while streaming: in a ping-pong the full one was 5 ns faster (8 B
     * on one node, 6 alternating runs: 129-135 against 134-139 ns one way), the sender
     * having nothing to do but wait for the answer anyway. */
    ring_wake(a, PSP_PORTID_NUMBER(dest), P->light_fence && streaming);
    return 1;
}

int pulc_local_send(struct pulc_proc *P, PSP_Request *r, int *locked,
                    int (*try_local)(struct pulc_proc *, PSP_Request *, uint32_t ring,
                                     uint64_t *tail_seen))
{
    struct pulc_area *a = P->node.area;
    uint32_t ring = PULC_NONE;
    struct pulc_lpeer *peer = NULL;
    if (P->ring_max && r->p_kind == PSP_PORT_D)
        ring = peer_ring(P, r->p_port, r->p_dest, locked, &peer);
    if (ring != PULC_NONE && (uint32_t)r->xlen + r->len <= P->ring_max)
        return ring_send(P, r->p_port, r->p_dest, ring, peer, r->p_msg_id, r->p_xhdr, r->xlen,
                         r->p_sbuf, r->len)
                   ? 2
                   : 0;
    int rc = lock_once(a, locked);
    return rc ? rc : try_local(P, r, ring, peer ? &peer->tail_seen : NULL);
}

int pulc_local_send_now(struct pulc_proc *P, PSP_Port *port, PSP_PortId dest, uint32_t msg_id,
                        const void *xhdr, uint16_t xlen, const void *buf, uint32_t len)
{
    struct pulc_area *a = P->node.area;
    struct pulc_lpeer *peer = NULL;
    uint32_t ring = last_peer_ring(a, port, dest, &peer);
    if (ring == PULC_NONE) {
        int locked = 0;
        ring = peer_ring(P, port, dest, &locked, &peer);
        if (locked)
            pulc_area_unlock(a);
        if (ring == PULC_NONE)
            return 0;
    }
    return ring_send(P, port, dest, ring, peer, msg_id, xhdr, xlen, buf, len);
}

/* The receive a new message is offered to: the first one posted and not yet matched. */
static PSP_Request *first_posted(PSP_Port *port)
{
    for (PSP_Request *r = port->rq_head; r; r = r->p_next)
        if (r->p_state == PULC_RQ_RECV_POSTED)
            return r;
    return NULL;
}

/* Offer ring message e to the first posted receive; 1 taken (request completed, or used in
 * place by a standing receive's callback: PSP_PLACE_TAKEN).  Only
 * receives that take any message and standing receives are offered here: a place callback is
 * offered queued messages again whenever the queue changes anyway, an accept callback would
 * see the message twice if it passed it by here. */
static int offer(struct pulc_proc *P, PSP_Port *port, const struct pulc_ring *ring,
                 const struct pulc_rent *e)
{
    PSP_Request *r = first_posted(port);
    if (!r || r->p_accept)
        return 0; /* an accept callback sees it once, in the queue (offered there anyway) */
    PSP_MsgInfo info = {PSP_PORTID(P->node.node_id, ring->src_port), e->len, e->xlen, e + 1,
                        (const uint8_t *)(e + 1) + e->xlen};
    PSP_Request *to = rq_offer(r, port, &info);
    if (to == PSP_PLACE_TAKEN)
        return 1; /* used where it lies: the caller consumes the entry */
    if (!to)
        return 0;
    to->src = info.src;
    to->len = e->len;
    to->xlen = e->xlen;
    if (to->p_xmax)
        memcpy(to->p_xbuf, e + 1, e->xlen < to->p_xmax ? e->xlen : to->p_xmax);
    uint32_t n = e->len < to->p_buflen ? e->len : to->p_buflen;
    if (n)
        memcpy(to->p_rbuf, (const uint8_t *)(e + 1) + e->xlen, n);
    to->copied = n;
    if (to == r)
        rq_remove(&port->rq_head, &port->rq_tail, r);
    rq_complete(to, e->len > to->p_buflen ? -EMSGSIZE : 0);
    return 1;
}

int pulc_local_take(struct pulc_proc *P, PSP_Port *port)
{
    struct pulc_area *a = P->node.area;
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    if (__atomic_load_n(&pt->rings_gen, __ATOMIC_ACQUIRE) != port->rx_rings_gen)
        return 1; /* listed again under the lock */
    int left = 0;
    uint32_t cap = a->cfg.ring_bytes;
    uint64_t msgs = 0, bytes = 0; /* the port's counters, added once at the end */
    for (uint32_t k = 0; k < port->nrx_rings; k++) {
        uint32_t i = port->rx_rings[k];
        struct pulc_ring *ring = pulc_ring_at(a, i);
        const uint8_t *data = pulc_ring_data(a, i);
        const struct pulc_rent *e;
        /* The next message straight at the tail, else the full look (pads, tickets, checks). */
        while ((e = pulc_ring_msg_at(ring, data, cap, ring->tail)) != NULL ||
               (e = pulc_ring_peek(a, i)) != NULL) {
            /* A ticket's sender bumps the port's event after it let go of the area lock:
             * that sends us to the lock (progress_port), not the ticket, which we may see
             * while the sender still holds it (and then only slow it down). */
            if (e->kind == PULC_RENT_TICKET)
                break;
            if (ring->pending || !offer(P, port, ring, e)) { /* e is a MSG (peek skips pads) */
                left = 1;
                break;
            }
            msgs++;
            bytes += e->len;
            port->activity++;
            pulc_ring_consume(a, i, e);
        }
        if (!e && (__atomic_load_n(&ring->closed, __ATOMIC_ACQUIRE) & PULC_RING_SENDER_CLOSED))
            left = 1; /* drained and its sender gone: close it under the lock */
    }
    if (msgs) {
        pt->msgs_in += msgs;
        pt->bytes_in += bytes;
    }
    return left;
}

int pulc_local_move_locked(struct pulc_proc *P, PSP_Port *port)
{
    struct pulc_area *a = P->node.area;
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    int rc = 0;
    for (int again = 1; again;) {
        again = 0;
        port->rx_rings_gen = __atomic_load_n(&pt->rings_gen, __ATOMIC_ACQUIRE);
        port->nrx_rings = 0;
        for (uint32_t i = pt->rings; i != PULC_NONE; i = pulc_ring_at(a, i)->next) {
            if (port->nrx_rings == port->cap_rx_rings) {
                uint32_t c = port->cap_rx_rings ? 2 * port->cap_rx_rings : 8;
                uint32_t *n = realloc(port->rx_rings, c * sizeof *n);
                if (!n)
                    return -ENOMEM;
                port->rx_rings = n;
                port->cap_rx_rings = c;
            }
            port->rx_rings[port->nrx_rings++] = i;
        }
        for (uint32_t k = 0; k < port->nrx_rings; k++) {
            uint32_t i = port->rx_rings[k];
            struct pulc_ring *ring = pulc_ring_at(a, i);
            uint64_t tail = ring->tail;
            int moved = pulc_ring_move_locked(a, i, P->node.node_id);
            if (ring->tail != tail)
                port->activity++; /* the queue changed without an event: PSP_WaitPort sees it */
            if (moved) {
                rc = -ENOBUFS;
                continue;
            }
            if ((__atomic_load_n(&ring->closed, __ATOMIC_ACQUIRE) & PULC_RING_SENDER_CLOSED) &&
                !ring->pending && !pulc_ring_peek(a, i)) {
                pulc_ring_close_end_locked(a, i, PULC_RING_RECEIVER_CLOSED);
                again = 1; /* the list changed */
            }
        }
    }
    return rc;
}

int pulc_local_ready(struct pulc_proc *P, PSP_Port *port)
{
    struct pulc_area *a = P->node.area;
    if (__atomic_load_n(&pulc_port_at(a, port->idx)->rings_gen, __ATOMIC_ACQUIRE) !=
        port->rx_rings_gen)
        return 1;
    for (uint32_t k = 0; k < port->nrx_rings; k++) {
        struct pulc_ring *ring = pulc_ring_at(a, port->rx_rings[k]);
        if (__atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) != ring->tail)
            return 1;
    }
    return 0;
}

int pulc_local_ready_shared(struct pulc_area *a, uint32_t port_idx)
{
    uint32_t n = 0, max = a->cfg.rings;
    for (uint32_t i = __atomic_load_n(&pulc_port_at(a, port_idx)->rings, __ATOMIC_ACQUIRE);
         i != PULC_NONE && i < max && n < max; n++) {
        struct pulc_ring *ring = pulc_ring_at(a, i);
        if (__atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) !=
            __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE))
            return 1;
        i = __atomic_load_n(&ring->next, __ATOMIC_ACQUIRE);
    }
    return 0;
}

void pulc_local_forget(PSP_Port *port)
{
    free(port->peers);
    free(port->rx_rings);
    port->peers = NULL;
    port->rx_rings = NULL;
    port->npeers = port->nrx_rings = 0;
}
