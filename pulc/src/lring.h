/*
 * lring.h — local rings: lock-free paths for local port-D messages, one ring per pair of
 * ports (sender port, receiver port) on a node.
 *
 * Why: through the port queues every local message takes the area lock twice (sender queues,
 * receiver takes), and on two busy cores the lock's cache line and the shared free lists
 * bounce between them: osu_mbw_mr on one node spent half its time in the lock.  A ring has one
 * writer and one reader, so a small message costs a copy in, a release store, a copy out.
 *
 * Order: once a sender port has a ring to a receiver port, every message it sends there
 * passes the ring, in order.  A message that fits (xlen + len up to PSP_LOCAL_RING_MAX) is
 * written into it whole (MSG); a larger one is queued as before but HIDDEN from receives, and
 * a TICKET in the ring names it — or, when the ring is empty (all sent before is taken or
 * moved), queued visible and counted in `pending` by the sender under the lock.  The receiver takes
 * ring messages straight into its first posted receive (port.c, no lock), or moves them into the
 * port's queue under the lock (tickets: unhide the message and queue it at the end) when that
 * receive does not take them; while moved messages of a ring are still unclaimed (`pending`), later
 * ones are moved too, so a sender's messages are always offered in the order sent.
 *
 * Life: a ring is opened by the sender at its first local message to a port (under the area
 * lock; when none is free the pair uses the queue for good) and freed when both ends are
 * closed: the sender's when its port closes or it sees the receiver's end closed, the
 * receiver's when its port closes or it drained a ring whose sender closed.  Only the sender
 * frees a ring whose receiver is gone, so a sender never writes into a ring reused by others.
 * Everything is in the area, at offsets; pulc_area_repair rebuilds the lists from the states.
 * A sender that dies holding the area lock between queuing a hidden message and writing its
 * ticket leaves that message hidden until the receiver's port closes (nobody can tell it
 * was to come).
 */
#ifndef PSPORT_PULC_LRING_H
#define PSPORT_PULC_LRING_H

#include <stdint.h>
#include <string.h>

#include "marea.h"
#include "pulc.h"

enum pulc_ring_state { PULC_RING_FREE = 0, PULC_RING_OPEN = 1 };

#define PULC_RING_SENDER_CLOSED   0x1u
#define PULC_RING_RECEIVER_CLOSED 0x2u

struct pulc_ring {
    /* set under the area lock */
    uint32_t state;             /* enum pulc_ring_state */
    uint32_t src_port, src_gen; /* the sender's port and its generation */
    uint32_t dst_port, dst_gen; /* the receiver's port and its generation */
    uint32_t next;              /* next ring of the receiver's port, or of the free list */
    uint32_t closed;            /* atomic: PULC_RING_*_CLOSED */
    uint32_t pending;           /* moved into the port's queue, not yet claimed (receiver) */
    uint64_t key;               /* set at open: mixed into every entry's stamp (pulc_rent) */
    uint8_t pad0[24];
    uint64_t head __attribute__((aligned(64))); /* bytes written (sender, release) */
    uint8_t pad1[56];
    uint64_t tail __attribute__((aligned(64))); /* bytes consumed (receiver, release) */
    uint8_t pad2[56];
};

enum pulc_rent_kind { PULC_RENT_PAD = 1, PULC_RENT_MSG = 2, PULC_RENT_TICKET = 3 };

#define PULC_RENT_ALIGN 64u

/*
 * An entry in a ring's data: the header, then xlen extra header bytes, then len bytes.
 *
 * The sender publishes an entry by storing its stamp last (release), and the reader polls
 * the stamp at its own tail, not the ring's head: a small message then costs one cache line
 * moving from the writer's core to the reader's, where polling head cost two (head's line,
 * then the entry's).  head is still advanced after the stamp, for whoever looks at a ring
 * from outside (pulc_local_ready, the sleeper's last look, psinfo).  The stamp is the entry's
 * byte position XOR the ring's key: what a slot held in an earlier lap (an old header, or
 * payload bytes of an entry that spanned it) is never taken for a new entry, unless it holds
 * exactly this position mixed with a key it cannot know.
 */
struct pulc_rent {
    uint64_t stamp; /* published last: position of the entry in the ring ^ the ring's key */
    uint32_t size;  /* bytes of the whole entry, a multiple of PULC_RENT_ALIGN */
    uint8_t kind;   /* enum pulc_rent_kind */
    uint8_t proto;  /* the protocol (PULC_PROTO_D) */
    uint16_t xlen;  /* extra header bytes */
    uint32_t len;   /* MSG: payload bytes; TICKET: the hidden message's descriptor */
    uint32_t msg_id;
};

static inline struct pulc_ring *pulc_ring_at(struct pulc_area *a, uint32_t i)
{
    return (struct pulc_ring *)((uint8_t *)a + a->off_rings) + i;
}

static inline uint8_t *pulc_ring_data(struct pulc_area *a, uint32_t i)
{
    return (uint8_t *)a + a->off_ring_data + (uint64_t)i * a->cfg.ring_bytes;
}

/* Bytes an entry with xlen + len bytes takes in a ring. */
static inline uint32_t pulc_rent_size(uint32_t xlen, uint32_t len)
{
    return (uint32_t)((sizeof(struct pulc_rent) + xlen + len + PULC_RENT_ALIGN - 1) /
                      PULC_RENT_ALIGN * PULC_RENT_ALIGN);
}

/* The stamp an entry at byte position pos of ring r carries once it is written. */
static inline uint64_t pulc_rent_stamp(const struct pulc_ring *r, uint64_t pos)
{
    return pos ^ r->key;
}

/* The largest xlen + len a ring of the area takes whole (a quarter of a ring, header off). */
uint32_t pulc_ring_max(const struct pulc_area *a);

/*
 * Open a ring from port src to port dst (caller holds the area lock; both open, dst a port-D
 * port): taken off the free list, attached to dst's list.  PULC_NONE when none is free.
 */
uint32_t pulc_ring_open_locked(struct pulc_area *a, uint32_t src, uint32_t dst);

/* Close one end of ring r (caller holds the area lock); freed when both are closed.  The
 * receiver's end leaves dst's list. */
void pulc_ring_close_end_locked(struct pulc_area *a, uint32_t r, uint32_t end);

/* Port p closes (caller holds the area lock): close every ring end it holds, either role. */
void pulc_ring_port_closed_locked(struct pulc_area *a, uint32_t p);

/* Rings open now (not free). */
uint32_t pulc_ring_used(struct pulc_area *a);

/* Rebuild the ring lists from their states (pulc_area_repair): returns rings that moved. */
unsigned pulc_ring_repair(struct pulc_area *a);

/* Sender: 1 when an entry of size bytes would fit in ring i now (tail_seen as below). */
static inline int pulc_ring_room(struct pulc_area *a, uint32_t i, uint64_t *tail_seen,
                                 uint32_t size)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    uint32_t cap = a->cfg.ring_bytes;
    uint64_t head = r->head;
    uint32_t to_end = cap - (uint32_t)(head & (cap - 1));
    uint64_t need = size <= to_end ? size : (uint64_t)to_end + size;
    if (tail_seen && head + need - *tail_seen <= cap)
        return 1;
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    if (tail_seen)
        *tail_seen = tail;
    return head + need - tail <= cap;
}

/*
 * Sender: append an entry to ring r (no lock: the ring has one writer).  MSG carries xhdr and
 * data; TICKET names descriptor ticket.  tail_seen (may be NULL) is the sender's copy of the
 * reader's position: the reader's cache line is read only when that copy says "full".
 * Returns 1, or 0 when the ring has no room now.  Inline, always: it is most of a small local
 * send, and the call with its ten arguments cost a sixth of it (osu_mbw_mr's sender).
 */
static inline __attribute__((always_inline)) int
pulc_ring_put(struct pulc_area *a, uint32_t i, uint64_t *tail_seen, uint8_t kind, uint32_t msg_id,
              const void *xhdr, uint16_t xlen, const void *data, uint32_t len, uint32_t ticket)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    uint32_t cap = a->cfg.ring_bytes, size = pulc_rent_size(xlen, len);
    if (!pulc_ring_room(a, i, tail_seen, size))
        return 0;
    uint8_t *base = pulc_ring_data(a, i);
    uint64_t head = r->head;
    uint32_t off = (uint32_t)(head & (cap - 1));
    if (size > cap - off) { /* an entry never wraps: pad to the end */
        struct pulc_rent *pad = (struct pulc_rent *)(base + off);
        pad->size = cap - off;
        pad->kind = PULC_RENT_PAD;
        __atomic_store_n(&pad->stamp, pulc_rent_stamp(r, head), __ATOMIC_RELEASE);
        head += cap - off;
        off = 0;
    }
    struct pulc_rent *e = (struct pulc_rent *)(base + off);
    e->size = size;
    e->kind = kind;
    e->proto = PSP_PORT_D;
    e->xlen = xlen;
    e->len = kind == PULC_RENT_TICKET ? ticket : len;
    e->msg_id = msg_id;
    if (xlen)
        memcpy(e + 1, xhdr, xlen);
    if (len)
        memcpy((uint8_t *)(e + 1) + xlen, data, len);
    __atomic_store_n(&e->stamp, pulc_rent_stamp(r, head), __ATOMIC_RELEASE);
    __atomic_store_n(&r->head, head + size, __ATOMIC_RELEASE);
    return 1;
}

/*
 * Sender: claim the ring lines two and three past head for writing (prefetchw; nothing where
 * the CPU lacks it).  Why: a streaming sender's store into a line its reader looked at waits
 * for the reader's core to give the line up; with the two cores far apart on the host that
 * wait, paid once per message, was most of osu_mbw_mr's time.  Claimed ahead, the line is
 * the sender's when it writes.  Left alone: the line at head (a reader that caught up polls
 * it) and lines that may still hold entries not read (by tail_seen, the sender's copy of the
 * reader's position).  Call after pulc_ring_put, and only while streaming (in a ping-pong
 * the claim costs latency) and after entries of up to PULC_RING_CLAIM_MAX bytes (for larger
 * ones the copy hides the wait, and claiming cost 5-15 % at 128 B - 1 KiB).
 */
#define PULC_RING_CLAIM_MAX (2 * PULC_RENT_ALIGN)
void pulc_ring_claim_ahead(struct pulc_area *a, uint32_t r, uint64_t tail_seen);

/*
 * Receiver: the oldest entry of ring r (pads skipped), or NULL when it is empty.  A broken
 * entry (bad size: a writer that scribbled) is logged and the ring's content dropped.
 */
const struct pulc_rent *pulc_ring_peek(struct pulc_area *a, uint32_t r);

/* Receiver: the entry at byte position pos of ring r (data: the ring's bytes, cap: their
 * count) when its stamp says it is published there, else NULL. */
static inline const struct pulc_rent *
pulc_rent_published(const struct pulc_ring *r, const uint8_t *data, uint32_t cap, uint64_t pos)
{
    const struct pulc_rent *e = (const struct pulc_rent *)(data + (pos & (cap - 1)));
    if (__atomic_load_n(&e->stamp, __ATOMIC_ACQUIRE) != pulc_rent_stamp(r, pos))
        return NULL;
    return e;
}

/* Receiver: whether a published entry at offset off of a ring of cap bytes is sound: a size
 * that is a multiple of the alignment and ends inside the ring, and for a message exactly what
 * its xlen and len take (anything else is a writer that scribbled). */
static inline int pulc_rent_sound(const struct pulc_rent *e, uint32_t off, uint32_t cap)
{
    return e->size >= PULC_RENT_ALIGN && e->size % PULC_RENT_ALIGN == 0 && e->size <= cap - off &&
           (e->kind == PULC_RENT_PAD || e->kind == PULC_RENT_TICKET ||
            pulc_rent_size(e->xlen, e->len) == e->size);
}

/*
 * Receiver: the message entry at position tail of ring r (data, cap as above), when one is
 * published there and sound; NULL for anything else (nothing yet, a pad, a ticket, a broken
 * entry: pulc_ring_peek decides those).  Inline: it is the one look per message of a receiver
 * draining a stream (osu_mbw_mr's receiver called pulc_ring_peek and pulc_ring_consume once
 * per message, about 65 of its 950 instructions).
 */
static inline const struct pulc_rent *
pulc_ring_msg_at(const struct pulc_ring *r, const uint8_t *data, uint32_t cap, uint64_t tail)
{
    const struct pulc_rent *e = pulc_rent_published(r, data, cap, tail);
    if (!e || e->kind != PULC_RENT_MSG || !pulc_rent_sound(e, (uint32_t)(tail & (cap - 1)), cap))
        return NULL;
    return e;
}

/* Receiver: done with entry e of ring i (its bytes may be written again). */
static inline void pulc_ring_consume(struct pulc_area *a, uint32_t i, const struct pulc_rent *e)
{
    struct pulc_ring *r = pulc_ring_at(a, i);
    __atomic_store_n(&r->tail, r->tail + e->size, __ATOMIC_RELEASE);
}

/* A message that came through a ring leaves it behind (claimed, or freed unclaimed): the
 * ring's pending count drops (caller holds the area lock). */
void pulc_ring_unpend(struct pulc_area *a, struct pulc_msg *m);

/*
 * Move every entry of ring r into the port's queue (caller holds the area lock, is the
 * receiver): MSG becomes a queued message, TICKET unhides its message at the queue's end.
 * Returns 0, or -ENOBUFS when descriptors or fragments ran out (the rest stays in the ring).
 */
int pulc_ring_move_locked(struct pulc_area *a, uint32_t r, uint16_t node_id);

#endif
