/*
 * lring.c — local rings (lring.h): open and close under the area lock, the lock-free writer
 * and reader, and the move of a ring's entries into its port's queue.
 */
#include "lring.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "log.h"
#include "pulc.h"

uint32_t pulc_ring_max(const struct pulc_area *a)
{
    if (!a->cfg.rings || a->cfg.ring_bytes < 4 * PULC_RENT_ALIGN)
        return 0;
    return a->cfg.ring_bytes / 4 - (uint32_t)sizeof(struct pulc_rent);
}

/* A fresh key for a ring being opened: splitmix64 of the clock, the ring and a count, so
 * that what a reused ring's data held before never carries a valid stamp. */
static uint64_t ring_key(struct pulc_area *a, uint32_t i)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t z = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    z ^= ((uint64_t)i << 40) ^ ((uint64_t)a->rings_opened << 20) ^ 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

uint32_t pulc_ring_open_locked(struct pulc_area *a, uint32_t src, uint32_t dst)
{
    uint32_t i = a->ring_free;
    if (i == PULC_NONE)
        return PULC_NONE;
    struct pulc_ring *r = pulc_ring_at(a, i);
    struct pulc_port *d = pulc_port_at(a, dst);
    a->ring_free = r->next;
    r->src_port = src;
    r->src_gen = pulc_port_at(a, src)->generation;
    r->dst_port = dst;
    r->dst_gen = d->generation;
    r->closed = 0;
    r->pending = 0;
    r->head = r->tail = 0;
    r->key = ring_key(a, i);
    r->next = d->rings;
    __atomic_store_n(&r->state, PULC_RING_OPEN, __ATOMIC_RELEASE);
    d->rings = i;
    __atomic_add_fetch(&d->rings_gen, 1, __ATOMIC_RELEASE);
    a->rings_opened++;
    return i;
}

/* Take ring i out of its receiver's list. */
static void detach(struct pulc_area *a, uint32_t i)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    struct pulc_port *d = pulc_port_at(a, r->dst_port);
    for (uint32_t *p = &d->rings; *p != PULC_NONE; p = &pulc_ring_at(a, *p)->next)
        if (*p == i) {
            *p = r->next;
            break;
        }
    r->next = PULC_NONE;
    __atomic_add_fetch(&d->rings_gen, 1, __ATOMIC_RELEASE);
}

void pulc_ring_close_end_locked(struct pulc_area *a, uint32_t i, uint32_t end)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    if (r->state != PULC_RING_OPEN)
        return;
    uint32_t was = __atomic_fetch_or(&r->closed, end, __ATOMIC_ACQ_REL);
    if ((end & PULC_RING_RECEIVER_CLOSED) && !(was & PULC_RING_RECEIVER_CLOSED))
        detach(a, i);
    if ((was | end) == (PULC_RING_SENDER_CLOSED | PULC_RING_RECEIVER_CLOSED)) {
        __atomic_store_n(&r->state, PULC_RING_FREE, __ATOMIC_RELEASE);
        r->next = a->ring_free;
        a->ring_free = i;
    }
}

void pulc_ring_port_closed_locked(struct pulc_area *a, uint32_t p)
{
    uint32_t gen = pulc_port_at(a, p)->generation;
    for (uint32_t i = 0; i < a->cfg.rings; i++) {
        struct pulc_ring *r = pulc_ring_at(a, i);
        if (r->state != PULC_RING_OPEN)
            continue;
        uint32_t end = 0;
        if (r->src_port == p && r->src_gen == gen)
            end |= PULC_RING_SENDER_CLOSED;
        if (r->dst_port == p && r->dst_gen == gen)
            end |= PULC_RING_RECEIVER_CLOSED;
        if (end)
            pulc_ring_close_end_locked(a, i, end);
    }
}

uint32_t pulc_ring_used(struct pulc_area *a)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->cfg.rings; i++)
        n += __atomic_load_n(&pulc_ring_at(a, i)->state, __ATOMIC_ACQUIRE) != PULC_RING_FREE;
    return n;
}

unsigned pulc_ring_repair(struct pulc_area *a)
{
    unsigned moved = 0;
    for (uint32_t p = 0; p < a->cfg.ports; p++) {
        pulc_port_at(a, p)->rings = PULC_NONE;
        pulc_port_at(a, p)->rings_gen++;
    }
    a->ring_free = PULC_NONE;
    for (uint32_t i = a->cfg.rings; i-- > 0;) {
        struct pulc_ring *r = pulc_ring_at(a, i);
        if (r->state == PULC_RING_OPEN) {
            /* an end whose port is gone is closed */
            const struct pulc_port *s = pulc_port_at(a, r->src_port);
            const struct pulc_port *d = pulc_port_at(a, r->dst_port);
            if (s->state != PULC_PORT_OPEN || s->generation != r->src_gen)
                r->closed |= PULC_RING_SENDER_CLOSED;
            if (d->state != PULC_PORT_OPEN || d->generation != r->dst_gen)
                r->closed |= PULC_RING_RECEIVER_CLOSED;
            if (r->closed == (PULC_RING_SENDER_CLOSED | PULC_RING_RECEIVER_CLOSED)) {
                r->state = PULC_RING_FREE;
                moved++;
            }
        }
        if (r->state == PULC_RING_OPEN && !(r->closed & PULC_RING_RECEIVER_CLOSED)) {
            struct pulc_port *d = pulc_port_at(a, r->dst_port);
            r->next = d->rings;
            d->rings = i;
        } else if (r->state != PULC_RING_OPEN) {
            r->next = a->ring_free;
            a->ring_free = i;
        } else {
            r->next = PULC_NONE;
        }
    }
    return moved;
}

/* Lines pulc_ring_claim_ahead claims: the reader's hardware prefetcher and the sender's next
 * entries decide it; 2 and 3 lines past head measured best (osu_mbw_mr, cores far apart). */
#define CLAIM_FIRST 2u
#define CLAIM_LINES 2u

#if defined(__x86_64__) || defined(__i386__)
/* 1 when the CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8), else 0; -1 until asked. */
static int has_prefetchw = -1;

static inline void claim_line(const void *p)
{
    __asm__ volatile("prefetchw %0" ::"m"(*(const uint8_t *)p));
}

void pulc_ring_claim_ahead(struct pulc_area *a, uint32_t i, uint64_t tail_seen)
{
    int have = __atomic_load_n(&has_prefetchw, __ATOMIC_RELAXED);
    if (have < 0) {
        unsigned eax, ebx, ecx = 0, edx;
        have = __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8));
        __atomic_store_n(&has_prefetchw, have, __ATOMIC_RELAXED);
    }
    if (!have)
        return;
    struct pulc_ring *r = pulc_ring_at(a, i);
    uint32_t cap = a->cfg.ring_bytes;
    uint8_t *base = pulc_ring_data(a, i);
    uint64_t head = r->head;
    if (head + (uint64_t)(CLAIM_FIRST + CLAIM_LINES) * PULC_RENT_ALIGN - tail_seen > cap)
        return; /* the lines may hold entries not read yet: the reader's, leave them */
    for (uint32_t k = 0; k < CLAIM_LINES; k++)
        claim_line(base + ((head + (uint64_t)(CLAIM_FIRST - 1 + k) * PULC_RENT_ALIGN) & (cap - 1)));
}
#else
void pulc_ring_claim_ahead(struct pulc_area *a, uint32_t i, uint64_t tail_seen)
{
    (void)a;
    (void)i;
    (void)tail_seen; /* a plain prefetch would take the line shared: no gain, so none */
}
#endif

const struct pulc_rent *pulc_ring_peek(struct pulc_area *a, uint32_t i)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    uint32_t cap = a->cfg.ring_bytes;
    uint8_t *data = pulc_ring_data(a, i);
    uint64_t tail = r->tail;
    const struct pulc_rent *e;
    while ((e = pulc_rent_published(r, data, cap, tail)) != NULL) {
        if (!pulc_rent_sound(e, (uint32_t)(tail & (cap - 1)), cap)) {
            uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
            PSP_ERROR("local ring %u: broken entry at %llu (size %u): ring dropped", i,
                      (unsigned long long)tail, e->size);
            __atomic_store_n(&r->tail, head, __ATOMIC_RELEASE);
            return NULL;
        }
        if (e->kind != PULC_RENT_PAD)
            return e;
        tail += e->size;
        __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
    }
    return NULL;
}

void pulc_ring_unpend(struct pulc_area *a, struct pulc_msg *m)
{
    if (!(m->flags & PULC_MSG_RING) || (m->flags & PULC_MSG_HIDDEN))
        return;
    m->flags &= (uint8_t)~PULC_MSG_RING;
    if (m->ring >= a->cfg.rings)
        return;
    struct pulc_ring *r = pulc_ring_at(a, m->ring);
    if (r->state == PULC_RING_OPEN && r->pending)
        r->pending--;
}

/* A ticket's message, if it is still the hidden message the ticket names. */
static uint32_t ticket_msg(struct pulc_area *a, const struct pulc_ring *r, uint16_t node_id,
                           const struct pulc_rent *e)
{
    uint32_t ticket = e->len; /* a TICKET's len names the descriptor */
    if (ticket >= a->cfg.messages)
        return PULC_NONE;
    struct pulc_msg *m = pulc_msg_at(a, ticket);
    if (m->state != PULC_MSG_QUEUED || !(m->flags & PULC_MSG_HIDDEN) || m->port != r->dst_port ||
        m->msg_id != e->msg_id || m->src != PSP_PORTID(node_id, r->src_port))
        return PULC_NONE;
    return ticket;
}

int pulc_ring_move_locked(struct pulc_area *a, uint32_t i, uint16_t node_id)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    const struct pulc_rent *e;
    while ((e = pulc_ring_peek(a, i)) != NULL) {
        struct pulc_port *pt = pulc_port_at(a, r->dst_port);
        if (e->kind == PULC_RENT_TICKET) {
            uint32_t t = ticket_msg(a, r, node_id, e);
            if (t != PULC_NONE) { /* to the queue's end: behind what the ring moved before */
                struct pulc_msg *m = pulc_msg_at(a, t);
                pulc_msg_unlink(a, t);
                m->flags &= (uint8_t)~PULC_MSG_HIDDEN;
                pulc_msg_enqueue(a, r->dst_port, t);
                pt->msgs_in--; /* counted when it was queued hidden */
                r->pending++;
            }
        } else {
            uint32_t need = pulc_frags_needed(a, e->len, e->len);
            if (a->msgs_free == 0 || a->frags_free < need) {
                a->rx_stalls++;
                return -ENOBUFS;
            }
            uint32_t k = pulc_msg_alloc(a);
            struct pulc_msg *m = pulc_msg_at(a, k);
            m->src = PSP_PORTID(node_id, r->src_port);
            m->msg_id = e->msg_id;
            m->total = e->len;
            m->xlen = e->xlen;
            m->proto = e->proto;
            if (e->xlen)
                memcpy(m->xhdr, e + 1, e->xlen);
            if (pulc_msg_append(a, k, (const uint8_t *)(e + 1) + e->xlen, e->len, UINT64_MAX)) {
                pulc_msg_free(a, k);
                a->rx_stalls++;
                return -ENOBUFS;
            }
            m->flags |= PULC_MSG_RING;
            m->ring = i;
            pulc_msg_enqueue(a, r->dst_port, k);
            pt->bytes_in += e->len;
            r->pending++;
            a->ring_moved++;
        }
        pulc_ring_consume(a, i, e);
    }
    return 0;
}
